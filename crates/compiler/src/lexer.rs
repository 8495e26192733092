//! The D lexer: tokens with their line numbers; literals with C escapes and suffixes; comments; `#line`
//! markers; macro variables (`$1`, `$$1`, `$target`); aggregation names (`@a`); scoped symbols
//! (``mod`sym``); and the two context rules D needs: raw probe specifiers at the top level
//! ([`Lexer::probe_spec`]) and `/` closing a predicate (DTrace's lookahead rule, see [`Tok::EndPred`]).

use crate::error::{err, CResult, ErrTag};

/// Integer-literal suffix flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IntSuffix {
    /// `u`/`U` present.
    pub unsigned: bool,
    /// Number of `l`/`L` (0, 1 or 2).
    pub longs: u8,
    /// Written in octal or hex (C lets those take unsigned types without a suffix).
    pub radix_not_decimal: bool,
}

/// A token.
#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// Identifier or keyword (may contain a backquote scope: ``mod`sym``).
    Ident(String),
    /// Integer constant.
    Int(u64, IntSuffix),
    /// Character constant (value as C computes it for `int`).
    Char(i64),
    /// Floating constant.
    Float(f64),
    /// String literal (bytes, escapes resolved).
    Str(Vec<u8>),
    /// Aggregation name without `@` (empty for `@`).
    Agg(String),
    /// `$name` macro variable (name without `$`).
    Macro(String),
    /// `$$name` macro variable as a string.
    MacroStr(String),
    /// Punctuator or operator.
    Punct(&'static str),
    /// The `/` that closes a predicate.
    EndPred,
    /// End of input.
    Eof,
}

impl Tok {
    /// The text DTrace shows in `syntax error near "..."`.
    pub fn text(&self) -> String {
        match self {
            Tok::Ident(s) => s.clone(),
            Tok::Int(v, _) => v.to_string(),
            Tok::Char(v) => v.to_string(),
            Tok::Float(v) => v.to_string(),
            Tok::Str(b) => format!("\"{}\"", String::from_utf8_lossy(b)),
            Tok::Agg(s) => format!("@{s}"),
            Tok::Macro(s) => format!("${s}"),
            Tok::MacroStr(s) => format!("$${s}"),
            Tok::Punct(p) => (*p).to_string(),
            Tok::EndPred => "/".to_string(),
            Tok::Eof => String::new(),
        }
    }
}

/// A token with the line it starts on and its source text.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    /// The token.
    pub tok: Tok,
    /// 1-based line.
    pub line: u32,
    /// The raw text (for error messages).
    pub raw: String,
    /// The text from the token to the end of its line: in a declaration DTrace's lexer reads
    /// ahead from an identifier, and a syntax error there quotes all it read.
    pub rest: String,
}

const PUNCTS: &[&str] = &[
    "<<=", ">>=", "...", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "^^",
    "+=", "-=", "*=", "/=", "%=", "&=", "^=", "|=", "(", ")", "[", "]", "{", "}", ".", "&", "*",
    "+", "-", "~", "!", "/", "%", "<", ">", "^", "|", "?", ":", ";", ",", "=", "`",
];

/// The lexer over one source text.
pub struct Lexer<'a> {
    src: &'a [u8],
    pos: usize,
    line: u32,
    /// When set, `/` followed by EOF, `;`, `{` or `/` lexes as [`Tok::EndPred`].
    pub in_predicate: bool,
    /// Open `(` and `[` so far, as DTrace's lexer counts them to report what is unbalanced.
    parens: u32,
    brackets: u32,
    /// Control lines (`#pragma ...`) met between the tokens of a declaration or clause, with
    /// their lines: DTrace's lexer acts on a control line wherever it starts a line.
    pub controls: Vec<(u32, Vec<String>)>,
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn is_pspec_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"-$:_.?*\\[]!`".contains(&c)
}

impl<'a> Lexer<'a> {
    /// A lexer at the start of `src`.
    pub fn new(src: &'a str) -> Lexer<'a> {
        let src = src.as_bytes();
        // an interpreter line (`#!/usr/sbin/dtrace -s`) is not part of the program
        let pos = if src.starts_with(b"#!") {
            src.iter().position(|c| *c == b'\n').unwrap_or(src.len())
        } else {
            0
        };
        Lexer {
            src,
            pos,
            line: 1,
            controls: Vec::new(),
            in_predicate: false,
            parens: 0,
            brackets: 0,
        }
    }

    /// Current line.
    pub fn line(&self) -> u32 {
        self.line
    }

    fn peek(&self, k: usize) -> u8 {
        *self.src.get(self.pos + k).unwrap_or(&0)
    }

    fn at_eof(&self) -> bool {
        self.pos >= self.src.len()
    }

    /// Skips whitespace, comments and `#line`/`# N "file"` markers; `#pragma` lines are left for the
    /// parser (it asks [`Lexer::control_line`]).
    pub fn skip_space(&mut self) -> CResult<()> {
        loop {
            let c = self.peek(0);
            if self.at_eof() {
                return Ok(());
            }
            if c == b'\n' {
                self.line += 1;
                self.pos += 1;
            } else if c.is_ascii_whitespace() {
                self.pos += 1;
            } else if c == b'/' && self.peek(1) == b'*' {
                self.pos += 2;
                loop {
                    if self.at_eof() {
                        // reported where the end of the file is, as DTrace's lexer does
                        return err(
                            ErrTag::D_SYNTAX,
                            self.line,
                            "end-of-file encountered before matching */",
                        );
                    }
                    if self.peek(0) == b'*' && self.peek(1) == b'/' {
                        self.pos += 2;
                        break;
                    }
                    if self.peek(0) == b'\n' {
                        self.line += 1;
                    }
                    self.pos += 1;
                }
            } else if c == b'/' && self.peek(1) == b'/' {
                while !self.at_eof() && self.peek(0) != b'\n' {
                    self.pos += 1;
                }
            } else if c == b'#' && self.at_line_start() && !self.rest_starts_with_pragma() {
                self.line_marker()?;
            } else {
                return Ok(());
            }
        }
    }

    fn at_line_start(&self) -> bool {
        let mut i = self.pos;
        while i > 0 {
            let c = self.src[i - 1];
            if c == b'\n' {
                return true;
            }
            if c != b' ' && c != b'\t' {
                return false;
            }
            i -= 1;
        }
        true
    }

    fn rest_starts_with_pragma(&self) -> bool {
        let rest = &self.src[self.pos + 1..];
        let t = rest
            .iter()
            .position(|c| *c != b' ' && *c != b'\t')
            .unwrap_or(0);
        rest[t..].starts_with(b"pragma") || rest[t..].starts_with(b"error")
    }

    /// `# 12 "file"` or `#line 12 "file"`: sets the line of the next line. Other directives are errors
    /// (the source was not preprocessed).
    fn line_marker(&mut self) -> CResult<()> {
        let start = self.pos;
        let mut end = start;
        while end < self.src.len() && self.src[end] != b'\n' {
            end += 1;
        }
        let text = String::from_utf8_lossy(&self.src[start + 1..end]).to_string();
        let mut words = text.split_whitespace();
        let mut first = words.next().unwrap_or("");
        if first == "line" {
            first = words.next().unwrap_or("");
        }
        match first.parse::<u32>() {
            Ok(n) => {
                self.pos = end;
                if self.pos < self.src.len() {
                    self.pos += 1;
                }
                self.line = n;
                Ok(())
            }
            Err(_) if first.is_empty() => {
                self.pos = end;
                Ok(())
            }
            Err(_) => err(
                ErrTag::D_PRAGCTL_INVAL,
                self.line,
                format!("invalid control directive: #{}", text.trim()),
            ),
        }
    }

    /// If the next input is a `#pragma` or `#error` line, consumes it and returns its words.
    /// Whether only blanks precede the next character on its line.
    fn starts_line(&self) -> bool {
        self.src[..self.pos]
            .iter()
            .rev()
            .take_while(|c| **c != b'\n')
            .all(|c| *c == b' ' || *c == b'\t')
    }

    pub fn control_line(&mut self) -> CResult<Option<(u32, Vec<String>)>> {
        self.skip_space()?;
        if self.peek(0) != b'#' {
            return Ok(None);
        }
        let line = self.line;
        let start = self.pos + 1;
        let mut end = start;
        while end < self.src.len() && self.src[end] != b'\n' {
            end += 1;
        }
        // a control line ends with its newline
        if end == self.src.len() {
            return err(
                ErrTag::D_SYNTAX,
                line,
                "end-of-file encountered before end of control line",
            );
        }
        let text = String::from_utf8_lossy(&self.src[start..end]).to_string();
        self.pos = end;
        Ok(Some((
            line,
            text.split_whitespace().map(String::from).collect(),
        )))
    }

    /// Reads a probe specifier (`provider:module:function:name` with globs and macro variables) if the
    /// next input starts one; `None` when the next character cannot start one.
    pub fn probe_spec(&mut self) -> CResult<Option<(u32, String)>> {
        self.skip_space()?;
        let c = self.peek(0);
        if self.at_eof() || !is_pspec_char(c) {
            return Ok(None);
        }
        let line = self.line;
        let start = self.pos;
        while !self.at_eof() {
            let c = self.peek(0);
            if !is_pspec_char(c) {
                break;
            }
            self.pos += 1;
        }
        Ok(Some((
            line,
            String::from_utf8_lossy(&self.src[start..self.pos]).to_string(),
        )))
    }

    /// How many characters of probe description start at the current position, without
    /// consuming them.
    pub fn pspec_len(&mut self) -> CResult<usize> {
        self.skip_space()?;
        Ok(self.src[self.pos..]
            .iter()
            .take_while(|&&c| is_pspec_char(c))
            .count())
    }

    /// The identifier-like word at the current position, without consuming it.
    pub fn peek_word(&mut self) -> CResult<String> {
        self.skip_space()?;
        let mut end = self.pos;
        while end < self.src.len() && is_ident_char(self.src[end]) {
            end += 1;
        }
        Ok(String::from_utf8_lossy(&self.src[self.pos..end]).to_string())
    }

    /// Whether only space and comments remain.
    pub fn at_end(&mut self) -> CResult<bool> {
        self.skip_space()?;
        Ok(self.at_eof())
    }

    /// The next non-space byte, without consuming anything but space.
    pub fn peek_byte(&mut self) -> CResult<u8> {
        self.skip_space()?;
        Ok(self.peek(0))
    }

    /// The next token.
    pub fn next_token(&mut self) -> CResult<Token> {
        self.skip_space()?;
        while self.peek(0) == b'#' && self.starts_line() {
            if let Some(c) = self.control_line()? {
                self.controls.push(c);
            }
            self.skip_space()?;
        }
        let line = self.line;
        let start = self.pos;
        let tok = self.lex_one()?;
        let raw = String::from_utf8_lossy(&self.src[start..self.pos]).to_string();
        let eol = self.src[start..]
            .iter()
            .position(|c| *c == b'\n')
            .map_or(self.src.len(), |n| start + n);
        let rest = String::from_utf8_lossy(&self.src[start..eol]).to_string();
        // DTrace's lexer decides between `/` (division) and the end of a predicate by reading
        // ahead to the next non-blank character, counting the newlines it passes: what it builds
        // after a `/` (and the errors it reports there) carry that later line
        let line = if matches!(tok, Tok::EndPred | Tok::Punct("/")) {
            line + self.src[self.pos..]
                .iter()
                .take_while(|c| c.is_ascii_whitespace())
                .filter(|c| **c == b'\n')
                .count() as u32
        } else {
            line
        };
        Ok(Token {
            tok,
            line,
            raw,
            rest,
        })
    }

    fn lex_one(&mut self) -> CResult<Tok> {
        if self.at_eof() {
            return Ok(Tok::Eof);
        }
        let c = self.peek(0);
        if is_ident_start(c) || (c == b'`') {
            return Ok(Tok::Ident(self.ident_with_scope()));
        }
        if c.is_ascii_digit() || (c == b'.' && self.peek(1).is_ascii_digit()) {
            return self.number();
        }
        if c == b'"' {
            return self.string();
        }
        if c == b'\'' {
            return self.char_const();
        }
        if c == b'@' {
            self.pos += 1;
            let s = self.pos;
            while is_ident_char(self.peek(0)) {
                self.pos += 1;
            }
            return Ok(Tok::Agg(
                String::from_utf8_lossy(&self.src[s..self.pos]).to_string(),
            ));
        }
        if c == b'$' {
            self.pos += 1;
            let as_str = self.peek(0) == b'$';
            if as_str {
                self.pos += 1;
            }
            let s = self.pos;
            while is_ident_char(self.peek(0)) {
                self.pos += 1;
            }
            let name = String::from_utf8_lossy(&self.src[s..self.pos]).to_string();
            if name.is_empty() {
                return err(ErrTag::D_SYNTAX, self.line, "syntax error near \"$\"");
            }
            return Ok(if as_str {
                Tok::MacroStr(name)
            } else {
                Tok::Macro(name)
            });
        }
        if c == b'/' && self.in_predicate {
            let mut i = self.pos + 1;
            while i < self.src.len() && self.src[i].is_ascii_whitespace() {
                i += 1;
            }
            let n = *self.src.get(i).unwrap_or(&0);
            if i >= self.src.len() || n == b';' || n == b'{' || n == b'/' {
                // reported on the line of what follows the `/`, where DTrace's lexer is then
                let after = self.line
                    + self.src[self.pos..i]
                        .iter()
                        .filter(|c| **c == b'\n')
                        .count() as u32;
                for (open, what) in [(self.parens, ")"), (self.brackets, "]")] {
                    if open > 0 {
                        return err(
                            ErrTag::D_SYNTAX,
                            after,
                            format!("closing {what} expected in predicate before /"),
                        );
                    }
                }
                self.pos += 1;
                return Ok(Tok::EndPred);
            }
        }
        for p in PUNCTS {
            if self.src[self.pos..].starts_with(p.as_bytes()) {
                let depth = match *p {
                    "(" | ")" => Some(&mut self.parens),
                    "[" | "]" => Some(&mut self.brackets),
                    _ => None,
                };
                if let Some(d) = depth {
                    if p.starts_with(['(', '[']) {
                        *d += 1;
                    } else if *d == 0 {
                        return err(
                            ErrTag::D_SYNTAX,
                            self.line,
                            format!("extra {p} in input stream"),
                        );
                    } else {
                        *d -= 1;
                    }
                }
                self.pos += p.len();
                return Ok(Tok::Punct(p));
            }
        }
        self.pos += 1;
        err(
            ErrTag::D_SYNTAX,
            self.line,
            format!("invalid character (0x{c:02x})"),
        )
    }

    fn ident_with_scope(&mut self) -> String {
        let s = self.pos;
        loop {
            while is_ident_char(self.peek(0)) {
                self.pos += 1;
            }
            if self.peek(0) == b'`' {
                self.pos += 1;
                if self.peek(0) == b'`' {
                    self.pos += 1;
                }
                // module names may contain dots (`libc.so.1`): take them as part of the scope
                while is_ident_char(self.peek(0)) || self.peek(0) == b'.' {
                    if self.peek(0) == b'.' && !is_ident_char(self.peek(1)) {
                        break;
                    }
                    self.pos += 1;
                }
                if self.peek(0) == b'`' {
                    continue;
                }
                break;
            }
            break;
        }
        String::from_utf8_lossy(&self.src[s..self.pos]).to_string()
    }

    fn number(&mut self) -> CResult<Tok> {
        let line = self.line;
        let s = self.pos;
        let hex = self.peek(0) == b'0' && (self.peek(1) == b'x' || self.peek(1) == b'X');
        if hex {
            self.pos += 2;
            while self.peek(0).is_ascii_hexdigit() {
                self.pos += 1;
            }
        } else {
            while self.peek(0).is_ascii_digit() {
                self.pos += 1;
            }
            // DTrace's lexer matches floating-point constants (digits with a '.', an exponent or
            // an `f`/`F` suffix) and rejects them right there
            let is_float = self.peek(0) == b'.'
                || matches!(self.peek(0), b'f' | b'F')
                || ((self.peek(0) == b'e' || self.peek(0) == b'E')
                    && (self.peek(1).is_ascii_digit()
                        || ((self.peek(1) == b'-' || self.peek(1) == b'+')
                            && self.peek(2).is_ascii_digit())));
            if is_float {
                return err(
                    ErrTag::D_SYNTAX,
                    line,
                    "floating-point constants are not permitted",
                );
            }
        }
        let digits = String::from_utf8_lossy(&self.src[s..self.pos]).to_string();
        let mut suf = IntSuffix::default();
        loop {
            match self.peek(0) {
                b'u' | b'U' if !suf.unsigned => suf.unsigned = true,
                b'l' | b'L' if suf.longs < 2 => suf.longs += 1,
                _ => break,
            }
            self.pos += 1;
        }
        let (body, radix) = if hex {
            (&digits[2..], 16)
        } else if digits.len() > 1 && digits.starts_with('0') {
            (&digits[1..], 8)
        } else {
            (&digits[..], 10)
        };
        suf.radix_not_decimal = radix != 10;
        if radix == 8 {
            if let Some(b) = body.chars().find(|c| *c == '8' || *c == '9') {
                let text = String::from_utf8_lossy(&self.src[s..self.pos]).to_string();
                return err(
                    ErrTag::D_INT_DIGIT,
                    line,
                    format!("constant {text} contains invalid digit {b}"),
                );
            }
        }
        if body.is_empty() && radix == 16 {
            return err(
                ErrTag::D_SYNTAX,
                line,
                format!("syntax error near \"{digits}\""),
            );
        }
        match u64::from_str_radix(if body.is_empty() { "0" } else { body }, radix) {
            Ok(v) => Ok(Tok::Int(v, suf)),
            Err(_) => err(
                ErrTag::D_INT_OFLOW,
                line,
                format!(
                    "constant {} results in integer overflow",
                    String::from_utf8_lossy(&self.src[s..self.pos])
                ),
            ),
        }
    }

    fn escape(&mut self) -> CResult<u8> {
        // at the char after the backslash
        let c = self.peek(0);
        self.pos += 1;
        Ok(match c {
            b'n' => b'\n',
            b't' => b'\t',
            b'v' => 0x0b,
            b'b' => 0x08,
            b'r' => b'\r',
            b'f' => 0x0c,
            b'a' => 0x07,
            b'0'..=b'7' => {
                let mut v: u32 = (c - b'0') as u32;
                for _ in 0..2 {
                    let d = self.peek(0);
                    if (b'0'..=b'7').contains(&d) {
                        v = v * 8 + (d - b'0') as u32;
                        self.pos += 1;
                    } else {
                        break;
                    }
                }
                (v & 0xff) as u8
            }
            b'x' => {
                let mut v: u32 = 0;
                let mut n = 0;
                while self.peek(0).is_ascii_hexdigit() && n < 2 {
                    v = v * 16 + (self.peek(0) as char).to_digit(16).unwrap_or(0);
                    self.pos += 1;
                    n += 1;
                }
                v as u8
            }
            b'\n' => {
                self.line += 1;
                b'\n'
            }
            other => other,
        })
    }

    fn string(&mut self) -> CResult<Tok> {
        let line = self.line;
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            if self.at_eof() {
                return err(
                    ErrTag::D_STR_NL,
                    line,
                    "newline encountered in string literal",
                );
            }
            let c = self.peek(0);
            match c {
                b'"' => {
                    self.pos += 1;
                    return Ok(Tok::Str(out));
                }
                b'\n' => {
                    // DTrace reports it once the newline is read: on the next line
                    return err(
                        ErrTag::D_STR_NL,
                        self.line + 1,
                        "newline encountered in string literal",
                    );
                }
                b'\\' => {
                    self.pos += 1;
                    // As DTrace's stresc2chr, a string keeps a backslash that starts no escape
                    // it knows (`\?`, `\'`) with the character after it.
                    if matches!(
                        self.peek(0),
                        b'0'..=b'7'
                            | b'a'
                            | b'b'
                            | b'f'
                            | b'n'
                            | b'r'
                            | b't'
                            | b'v'
                            | b'x'
                            | b'"'
                            | b'\\'
                            | b'\n'
                    ) {
                        let e = self.escape()?;
                        out.push(e);
                    } else {
                        out.push(b'\\');
                    }
                }
                _ => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    fn char_const(&mut self) -> CResult<Tok> {
        let line = self.line;
        self.pos += 1;
        let mut bytes = Vec::new();
        loop {
            if self.at_eof() || self.peek(0) == b'\n' {
                return err(
                    ErrTag::D_CHR_NL,
                    self.line + u32::from(!self.at_eof()),
                    "newline encountered in character constant",
                );
            }
            let c = self.peek(0);
            if c == b'\'' {
                self.pos += 1;
                break;
            }
            if c == b'\\' {
                self.pos += 1;
                let e = self.escape()?;
                bytes.push(e);
            } else {
                bytes.push(c);
                self.pos += 1;
            }
        }
        if bytes.is_empty() {
            return err(ErrTag::D_CHR_NULL, line, "empty character constant");
        }
        if bytes.len() > 8 {
            return err(ErrTag::D_CHR_OFLOW, line, "character constant is too long");
        }
        let mut v: i64 = 0;
        for b in &bytes {
            v = (v << 8) | *b as i64;
        }
        if bytes.len() == 1 {
            v = bytes[0] as i8 as i64;
        }
        Ok(Tok::Char(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        let mut l = Lexer::new(s);
        let mut v = Vec::new();
        loop {
            let t = l.next_token().unwrap();
            if t.tok == Tok::Eof {
                return v;
            }
            v.push(t.tok);
        }
    }

    #[test]
    fn operators_are_maximal_munch() {
        assert_eq!(
            toks("a<<=b->c++"),
            vec![
                Tok::Ident("a".into()),
                Tok::Punct("<<="),
                Tok::Ident("b".into()),
                Tok::Punct("->"),
                Tok::Ident("c".into()),
                Tok::Punct("++")
            ]
        );
    }

    #[test]
    fn string_escapes_as_stresc2chr() {
        // known escapes convert; `\?` and `\'` keep their backslash; `\\` and `\"` are one char
        assert_eq!(
            toks(r#""abc\"\t\044\?\x4D" "\?\\\'\"""#),
            vec![
                Tok::Str(b"abc\"\t$\\?M".to_vec()),
                Tok::Str(b"\\?\\\\'\"".to_vec()),
            ]
        );
        // character constants still take `\'`
        assert_eq!(toks("'\\''"), vec![Tok::Char(39)]);
    }

    #[test]
    fn literals() {
        assert_eq!(
            toks("0x1f 017 10ul 'a' '\\n' \"a\\tb\\x41\\101\""),
            vec![
                Tok::Int(
                    31,
                    IntSuffix {
                        radix_not_decimal: true,
                        ..Default::default()
                    }
                ),
                Tok::Int(
                    15,
                    IntSuffix {
                        radix_not_decimal: true,
                        ..Default::default()
                    }
                ),
                Tok::Int(
                    10,
                    IntSuffix {
                        unsigned: true,
                        longs: 1,
                        radix_not_decimal: false
                    }
                ),
                Tok::Char(97),
                Tok::Char(10),
                Tok::Str(b"a\tbAA".to_vec()),
            ]
        );
    }

    #[test]
    fn comments_and_lines() {
        let mut l = Lexer::new("/* x\n y */ // z\n a\n#line 40\nb");
        let a = l.next_token().unwrap();
        assert_eq!((a.tok, a.line), (Tok::Ident("a".into()), 3));
        let b = l.next_token().unwrap();
        assert_eq!((b.tok, b.line), (Tok::Ident("b".into()), 40));
    }

    #[test]
    fn macros_aggs_and_scopes() {
        assert_eq!(
            toks("$1 $$2 @foo @ `bar genunix`x"),
            vec![
                Tok::Macro("1".into()),
                Tok::MacroStr("2".into()),
                Tok::Agg("foo".into()),
                Tok::Agg("".into()),
                Tok::Ident("`bar".into()),
                Tok::Ident("genunix`x".into()),
            ]
        );
    }

    #[test]
    fn lexical_errors_have_tags() {
        let cases = [
            ("\"abc\n\"", ErrTag::D_STR_NL),
            ("''", ErrTag::D_CHR_NULL),
            ("'abcdefghij'", ErrTag::D_CHR_OFLOW),
            ("09", ErrTag::D_INT_DIGIT),
            ("99999999999999999999999", ErrTag::D_INT_OFLOW),
            ("1.5", ErrTag::D_SYNTAX),
            ("2e10", ErrTag::D_SYNTAX),
            ("3f", ErrTag::D_SYNTAX),
        ];
        for (src, tag) in cases {
            let mut l = Lexer::new(src);
            let e = l.next_token().unwrap_err();
            assert_eq!(e.tag, tag, "{src}");
        }
    }

    #[test]
    fn predicate_slash_lookahead() {
        let mut l = Lexer::new("a / b/ {");
        l.in_predicate = true;
        let v: Vec<Tok> = (0..4).map(|_| l.next_token().unwrap().tok).collect();
        assert_eq!(v[1], Tok::Punct("/"));
        assert_eq!(v[3], Tok::EndPred);
    }
}
