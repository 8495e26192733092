//! The D parser: a recursive-descent parser over [`crate::lexer`] tokens producing [`crate::ast`].
//! Expressions follow C's precedence and associativity; declarations use C's declarator syntax plus
//! D's associative-array signatures and `self`/`this` scopes; clauses are probe specifiers, an optional
//! `/predicate/` and an optional `{ statements }`. Macro variables are substituted here.

use std::collections::{HashSet, VecDeque};

use crate::ast::*;
use crate::error::{err, CResult, CompileError, ErrTag};
use crate::lexer::{IntSuffix, Lexer, Tok, Token};
use crate::macros::{MacroEnv, MacroValue};

/// Words that start declaration specifiers.
const DECL_WORDS: &[&str] = &[
    "typedef", "extern", "static", "register", "auto", "self", "this", "const", "volatile",
    "restrict", "void", "char", "short", "int", "long", "float", "double", "signed", "unsigned",
    "string", "struct", "union", "enum", "_Bool",
];

/// The scopes a type name may carry (`D`t`, `C`t`, `vmlinux`t`): DTrace's containers for the
/// program's own types, C's, and the kernel's.
const TYPE_SCOPES: &[&str] = &["D", "C", "vmlinux"];

/// Maximum nesting of expressions (recursion guard against hostile input).
const MAX_DEPTH: u32 = 100;

/// Parser state.
pub struct Parser<'a> {
    lex: Lexer<'a>,
    peeked: VecDeque<Token>,
    /// Typedef names known so far (built-in ones included).
    pub typenames: HashSet<String>,
    macros: MacroEnv,
    max_arg: usize,
    from_file: bool,
    depth: u32,
    /// Line of the last token read from the lexer (lookahead included): the line DTrace gives a
    /// node, which its yacc parser builds once it has read the token that ends it.
    lexed_line: u32,
    /// The `pspec` option: text that reads as a probe description longer than a declaration's
    /// first word (`int*x`) is taken as one.
    pub pspec: bool,
    /// `struct`/`union` names this program has defined: DTrace declares a struct when it reads
    /// the `{` of its body, so a second body is an error there, before the body is read.
    sou_defined: HashSet<String>,
    /// Pragmas read since the last item was added to the program.
    pragmas: Vec<Item>,
}

/// The end of the input met in a declaration outside any clause is worded as DTrace's lexer
/// words it in that state ("end-of-input"; inside a clause, "end of input").
fn top_level_eof(mut e: CompileError) -> CompileError {
    if e.tag == ErrTag::D_SYNTAX && e.message == "syntax error near end of input" {
        e.message = "syntax error near end-of-input".into();
    }
    e
}

fn syntax(t: &Token) -> CompileError {
    if t.tok == Tok::Eof {
        CompileError::new(ErrTag::D_SYNTAX, t.line, "syntax error near end of input")
    } else {
        CompileError::new(
            ErrTag::D_SYNTAX,
            t.line,
            format!("syntax error near \"{}\"", t.raw),
        )
    }
}

/// A syntax error at `t` where a declaration or type name is read: DTrace's lexer has read ahead
/// from an identifier (not a keyword) to the end of its line, and quotes all of it
/// (`syntax error near "new_int;"`).
fn decl_syntax(t: &Token) -> CompileError {
    match &t.tok {
        Tok::Ident(s) if !is_reserved(s) => CompileError::new(
            ErrTag::D_SYNTAX,
            t.line,
            format!("syntax error near \"{}\"", t.rest),
        ),
        _ => syntax(t),
    }
}

impl<'a> Parser<'a> {
    /// A parser over `src`; `typenames` are the type names the type system knows (built-ins, CTF);
    /// `from_file` makes a bare probe description an error as DTrace does for files.
    pub fn new(
        src: &'a str,
        macros: MacroEnv,
        typenames: HashSet<String>,
        from_file: bool,
    ) -> Parser<'a> {
        Parser {
            lex: Lexer::new(src),
            peeked: VecDeque::new(),
            typenames,
            macros,
            max_arg: 0,
            from_file,
            depth: 0,
            lexed_line: 1,
            pspec: false,
            sou_defined: HashSet::new(),
            pragmas: Vec::new(),
        }
    }

    fn fill(&mut self, n: usize) -> CResult<()> {
        while self.peeked.len() <= n {
            let t = self.lex.next_token()?;
            for (line, words) in std::mem::take(&mut self.lex.controls) {
                self.control(line, words)?;
            }
            self.lexed_line = t.line;
            self.peeked.push_back(t);
        }
        Ok(())
    }

    fn peek(&mut self) -> CResult<&Token> {
        self.fill(0)?;
        Ok(&self.peeked[0])
    }

    fn peek_n(&mut self, n: usize) -> CResult<&Token> {
        self.fill(n)?;
        Ok(&self.peeked[n])
    }

    fn next(&mut self) -> CResult<Token> {
        self.fill(0)?;
        Ok(self.peeked.pop_front().unwrap_or(Token {
            tok: Tok::Eof,
            line: self.lex.line(),
            raw: String::new(),
            rest: String::new(),
        }))
    }

    fn is_punct(&mut self, p: &str) -> CResult<bool> {
        Ok(matches!(&self.peek()?.tok, Tok::Punct(q) if *q == p))
    }

    fn eat(&mut self, p: &str) -> CResult<bool> {
        if self.is_punct(p)? {
            self.next()?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn expect(&mut self, p: &str) -> CResult<Token> {
        let t = self.next()?;
        match &t.tok {
            Tok::Punct(q) if *q == p => Ok(t),
            _ => Err(syntax(&t)),
        }
    }

    fn ident(&mut self) -> CResult<(String, u32)> {
        let t = self.next()?;
        match t.tok {
            Tok::Ident(s) => Ok((s, t.line)),
            _ => Err(syntax(&t)),
        }
    }

    /// Parses a whole program.
    pub fn program(mut self) -> CResult<Program> {
        self.program_mut()
    }

    /// Parses a whole program and returns it (or its error) with the typedef names known at its
    /// end (those given to [`Parser::new`] plus the program's).
    pub fn program_with_names_always(mut self) -> (CResult<Program>, HashSet<String>) {
        let p = self.program_mut();
        (p, self.typenames)
    }

    fn program_mut(&mut self) -> CResult<Program> {
        let mut items = Vec::new();
        loop {
            if let Some((line, words)) = self.lex.control_line()? {
                self.control(line, words)?;
                items.append(&mut self.pragmas);
                continue;
            }
            if self.peeked.is_empty() && self.lex.at_end()? {
                break;
            }
            if self.lex.peek_byte()? == b';' {
                self.next()?;
                continue;
            }
            let word = self.lex.peek_word()?;
            let item = match word.as_str() {
                "inline" => self.inline_decl().map_err(top_level_eof)?,
                "translator" => self.translator().map_err(top_level_eof)?,
                "provider" => self.provider().map_err(top_level_eof)?,
                w if (DECL_WORDS.contains(&w) || self.typenames.contains(w))
                    && !(self.pspec && self.lex.pspec_len()? > w.len()) =>
                {
                    self.decl_item().map_err(top_level_eof)?
                }
                _ => Item::Clause(self.clause()?),
            };
            // control lines met inside the item act before it
            items.append(&mut self.pragmas);
            items.push(item);
        }
        Ok(Program {
            items,
            max_macro_arg: self.max_arg,
            last_line: self.lex.line(),
            default_args: self.macros.default_args,
        })
    }

    /// A control line (`#pragma`, `#error`), at the top level or between the tokens of an item:
    /// options that change how the rest of the program is read take effect at once, malformed
    /// attributes are refused where they are read, and the pragma is kept for the checker.
    fn control(&mut self, line: u32, words: Vec<String>) -> CResult<()> {
        match words.first().map(String::as_str) {
            Some("pragma") => {
                if words.len() >= 4 && words[1] == "D" && words[2] == "option" {
                    for w in &words[3..] {
                        if w == "defaultargs" {
                            self.macros.default_args = true;
                        }
                        if w == "pspec" {
                            self.pspec = true;
                        }
                    }
                }
                let attrs = words.len() == 5 && words[1] == "D" && words[2] == "attributes";
                if attrs && !crate::check_decl::valid_attributes(&words[3]) {
                    return err(
                        ErrTag::D_PRAGMA_INVAL,
                        line,
                        "invalid attributes specified by #pragma attributes",
                    );
                }
                self.pragmas.push(Item::Pragma(words[1..].to_vec(), line));
                Ok(())
            }
            Some("error") => err(
                ErrTag::D_PRAGERR,
                line,
                format!("#error {}", words[1..].join(" ")),
            ),
            _ => err(
                ErrTag::D_PRAGCTL_INVAL,
                line,
                format!("invalid control directive: #{}", words.join(" ")),
            ),
        }
    }

    fn clause(&mut self) -> CResult<Clause> {
        let mut probes = Vec::new();
        let line = self.lex.line();
        loop {
            match self.lex.probe_spec()? {
                Some((l, spec)) => {
                    let (s, m) = self.macros.expand_spec(&spec, l)?;
                    self.max_arg = self.max_arg.max(m);
                    probes.push((s, l));
                }
                None => {
                    let t = self.next()?;
                    return Err(syntax(&t));
                }
            }
            if self.lex.peek_byte()? == b',' {
                self.next()?;
                continue;
            }
            break;
        }
        let mut pred = None;
        if self.lex.peek_byte()? == b'/' {
            self.next()?;
            self.lex.in_predicate = true;
            let e = self.expr();
            self.lex.in_predicate = false;
            let e = e?;
            let t = self.next()?;
            if t.tok != Tok::EndPred {
                return Err(syntax(&t));
            }
            pred = Some(e);
        }
        let body = if self.lex.peek_byte()? == b'{' {
            self.next()?;
            let stmts = self.statements()?;
            Some(stmts)
        } else {
            if pred.is_none() && self.from_file {
                return err(
                    ErrTag::D_SYNTAX,
                    line,
                    "expected predicate and/or actions following probe description",
                );
            }
            None
        };
        Ok(Clause {
            probes,
            pred,
            body,
            line,
        })
    }

    /// Statements up to and including the closing `}`.
    fn statements(&mut self) -> CResult<Vec<Stmt>> {
        let mut out = Vec::new();
        loop {
            if self.eat("}")? {
                return Ok(out);
            }
            if self.eat(";")? {
                continue;
            }
            if matches!(&self.peek()?.tok, Tok::Ident(s) if s == "if") {
                let line = self.next()?.line;
                self.enter(line)?;
                self.expect("(")?;
                let c = self.expr()?;
                self.expect(")")?;
                let then = self.block_or_stmt()?;
                let els = if matches!(&self.peek()?.tok, Tok::Ident(s) if s == "else") {
                    self.next()?;
                    self.block_or_stmt()?
                } else {
                    Vec::new()
                };
                out.push(Stmt::If(c, then, els, line));
                self.depth -= 1;
                continue;
            }
            let e = self.expr()?;
            out.push(Stmt::Expr(e));
            if self.eat(";")? {
                continue;
            }
            if self.is_punct("}")? {
                continue;
            }
            let t = self.next()?;
            return Err(syntax(&t));
        }
    }

    fn block_or_stmt(&mut self) -> CResult<Vec<Stmt>> {
        if self.eat("{")? {
            return self.statements();
        }
        let e = self.expr()?;
        self.eat(";")?;
        Ok(vec![Stmt::Expr(e)])
    }

    // ---- expressions ----

    /// A full expression (with commas).
    pub fn expr(&mut self) -> CResult<Expr> {
        let mut e = self.assign()?;
        let mark = self.depth;
        while self.is_punct(",")? {
            let line = self.next()?.line;
            self.enter(line)?;
            let r = self.assign()?;
            self.peek()?;
            e = Expr {
                kind: ExprKind::Comma(Box::new(e), Box::new(r)),
                line: self.lexed_line,
            };
        }
        self.depth = mark;
        Ok(e)
    }

    fn enter(&mut self, line: u32) -> CResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return err(ErrTag::D_SYNTAX, line, "expression is too deeply nested");
        }
        Ok(())
    }

    fn assign(&mut self) -> CResult<Expr> {
        let line = self.peek()?.line;
        self.enter(line)?;
        let r = self.assign_inner();
        self.depth -= 1;
        r
    }

    fn assign_inner(&mut self) -> CResult<Expr> {
        let lhs = self.cond()?;
        let op = match &self.peek()?.tok {
            Tok::Punct(p) => match *p {
                "=" => Some(None),
                "+=" => Some(Some(BinOp::Add)),
                "-=" => Some(Some(BinOp::Sub)),
                "*=" => Some(Some(BinOp::Mul)),
                "/=" => Some(Some(BinOp::Div)),
                "%=" => Some(Some(BinOp::Mod)),
                "&=" => Some(Some(BinOp::BitAnd)),
                "^=" => Some(Some(BinOp::BitXor)),
                "|=" => Some(Some(BinOp::BitOr)),
                "<<=" => Some(Some(BinOp::Shl)),
                ">>=" => Some(Some(BinOp::Shr)),
                _ => None,
            },
            _ => None,
        };
        if let Some(op) = op {
            self.next()?;
            let rhs = self.assign()?;
            self.peek()?;
            return Ok(Expr {
                kind: ExprKind::Assign(op, Box::new(lhs), Box::new(rhs)),
                line: self.lexed_line,
            });
        }
        Ok(lhs)
    }

    fn cond(&mut self) -> CResult<Expr> {
        let c = self.binary(0)?;
        if self.is_punct("?")? {
            self.next()?;
            let a = self.expr()?;
            self.expect(":")?;
            let b = self.cond()?;
            self.peek()?;
            return Ok(Expr {
                kind: ExprKind::Cond(Box::new(c), Box::new(a), Box::new(b)),
                line: self.lexed_line,
            });
        }
        Ok(c)
    }

    fn binop_at(&mut self, level: usize) -> CResult<Option<BinOp>> {
        const LEVELS: &[&[(&str, BinOp)]] = &[
            &[("||", BinOp::LogOr)],
            &[("^^", BinOp::LogXor)],
            &[("&&", BinOp::LogAnd)],
            &[("|", BinOp::BitOr)],
            &[("^", BinOp::BitXor)],
            &[("&", BinOp::BitAnd)],
            &[("==", BinOp::Eq), ("!=", BinOp::Ne)],
            &[
                ("<", BinOp::Lt),
                ("<=", BinOp::Le),
                (">", BinOp::Gt),
                (">=", BinOp::Ge),
            ],
            &[("<<", BinOp::Shl), (">>", BinOp::Shr)],
            &[("+", BinOp::Add), ("-", BinOp::Sub)],
            &[("*", BinOp::Mul), ("/", BinOp::Div), ("%", BinOp::Mod)],
        ];
        if let Tok::Punct(p) = &self.peek()?.tok {
            for (s, op) in LEVELS[level] {
                if s == p {
                    return Ok(Some(*op));
                }
            }
        }
        Ok(None)
    }

    fn binary(&mut self, level: usize) -> CResult<Expr> {
        if level == 11 {
            return self.unary();
        }
        let mut l = self.binary(level + 1)?;
        let mark = self.depth;
        while let Some(op) = self.binop_at(level)? {
            let line = self.next()?.line;
            self.enter(line)?;
            let r = self.binary(level + 1)?;
            self.peek()?;
            l = Expr {
                kind: ExprKind::Binary(op, Box::new(l), Box::new(r)),
                line: self.lexed_line,
            };
        }
        self.depth = mark;
        Ok(l)
    }

    fn starts_type_name(&mut self, n: usize) -> CResult<bool> {
        let t = self.peek_n(n)?.tok.clone();
        Ok(match t {
            Tok::Ident(s) => {
                (DECL_WORDS.contains(&s.as_str())
                    && !matches!(
                        s.as_str(),
                        "self" | "this" | "typedef" | "extern" | "static"
                    ))
                    || self.typenames.contains(&s)
                    || self.unscoped_type(&s).is_some()
            }
            _ => false,
        })
    }

    /// The type name a scoped one stands for: `D`dqstr_t` (a type the program declares), `C`int`
    /// (a C type), `vmlinux`pid_t` (a kernel type). DTrace keeps those in separate containers
    /// named by the scope; here they share one namespace, so the scope is checked and dropped.
    /// `None` for anything else (a scoped symbol such as `vmlinux`max_pfn`).
    fn unscoped_type(&self, w: &str) -> Option<String> {
        let (scope, name) = w.split_once('`')?;
        if !TYPE_SCOPES.contains(&scope) || name.contains('`') {
            return None;
        }
        let base_word = matches!(
            name,
            "void"
                | "char"
                | "short"
                | "int"
                | "long"
                | "float"
                | "double"
                | "signed"
                | "unsigned"
                | "string"
                | "_Bool"
        );
        (base_word || self.typenames.contains(name)).then(|| name.to_string())
    }

    /// A struct, union or enum tag with its scope dropped (`struct vmlinux`task_struct`).
    fn unscoped_tag(w: &str) -> String {
        match w.split_once('`') {
            Some((scope, tag)) if TYPE_SCOPES.contains(&scope) && !tag.contains('`') => {
                tag.to_string()
            }
            _ => w.to_string(),
        }
    }

    fn unary(&mut self) -> CResult<Expr> {
        let line = self.peek()?.line;
        self.enter(line)?;
        let r = self.unary_inner();
        self.depth -= 1;
        r
    }

    fn unary_inner(&mut self) -> CResult<Expr> {
        let t = self.peek()?.clone();
        let op = match &t.tok {
            Tok::Punct(p) => match *p {
                "++" => Some(UnOp::PreInc),
                "--" => Some(UnOp::PreDec),
                "&" => Some(UnOp::AddrOf),
                "*" => Some(UnOp::Deref),
                "+" => Some(UnOp::Pos),
                "-" => Some(UnOp::Neg),
                "~" => Some(UnOp::BitNot),
                "!" => Some(UnOp::LogNot),
                _ => None,
            },
            _ => None,
        };
        if let Some(op) = op {
            self.next()?;
            let e = self.unary()?;
            self.peek()?;
            return Ok(Expr {
                kind: ExprKind::Unary(op, Box::new(e)),
                line: self.lexed_line,
            });
        }
        if let Tok::Ident(s) = &t.tok {
            if s == "sizeof" {
                self.next()?;
                if self.is_punct("(")? && self.starts_type_name(1)? {
                    self.next()?;
                    let tn = self.type_name()?;
                    self.expect(")")?;
                    return Ok(Expr {
                        kind: ExprKind::SizeofType(Box::new(tn)),
                        line: self.lexed_line,
                    });
                }
                let e = self.unary()?;
                self.peek()?;
                return Ok(Expr {
                    kind: ExprKind::SizeofExpr(Box::new(e)),
                    line: self.lexed_line,
                });
            }
            if s == "stringof" {
                self.next()?;
                let e = self.unary()?;
                self.peek()?;
                return Ok(Expr {
                    kind: ExprKind::Stringof(Box::new(e)),
                    line: self.lexed_line,
                });
            }
        }
        if matches!(t.tok, Tok::Punct("(")) && self.starts_type_name(1)? {
            self.next()?;
            let tn = self.type_name()?;
            self.expect(")")?;
            let e = self.unary()?;
            self.peek()?;
            return Ok(Expr {
                kind: ExprKind::Cast(Box::new(tn), Box::new(e)),
                line: self.lexed_line,
            });
        }
        self.postfix()
    }

    fn args(&mut self) -> CResult<Vec<Expr>> {
        let mut v = Vec::new();
        if self.eat(")")? {
            return Ok(v);
        }
        loop {
            v.push(self.assign()?);
            if self.eat(",")? {
                continue;
            }
            self.expect(")")?;
            return Ok(v);
        }
    }

    fn postfix(&mut self) -> CResult<Expr> {
        let mark = self.depth;
        let r = self.postfix_inner();
        self.depth = mark;
        r
    }

    fn postfix_inner(&mut self) -> CResult<Expr> {
        let mut e = self.primary()?;
        loop {
            let t = self.peek()?.clone();
            let line = t.line;
            if matches!(t.tok, Tok::Punct("[" | "(" | "." | "->" | "++" | "--")) {
                self.enter(line)?;
            }
            match t.tok {
                Tok::Punct("[") => {
                    self.next()?;
                    let mut keys = vec![self.assign()?];
                    while self.eat(",")? {
                        keys.push(self.assign()?);
                    }
                    self.expect("]")?;
                    e = Expr {
                        kind: ExprKind::Index(Box::new(e), keys),
                        line: self.lexed_line,
                    };
                }
                Tok::Punct("(") => {
                    let name = match &e.kind {
                        ExprKind::Ident(n) => n.clone(),
                        _ => {
                            return err(
                                ErrTag::D_FUNC_IDENT,
                                line,
                                "function designator is not of function type",
                            )
                        }
                    };
                    self.next()?;
                    let a = self.args()?;
                    e = Expr {
                        kind: ExprKind::Call(name, a),
                        line: self.lexed_line,
                    };
                }
                Tok::Punct(p @ ("." | "->")) => {
                    self.next()?;
                    let nt = self.next()?;
                    let name = match nt.tok {
                        Tok::Ident(s) => s,
                        _ => {
                            return err(
                                ErrTag::D_OP_IDENT,
                                nt.line,
                                format!("operator {p} must be followed by an identifier"),
                            )
                        }
                    };
                    let scoped = match (&e.kind, p) {
                        (ExprKind::Ident(s), "->") if s == "self" => Some(VarScope::Thread),
                        (ExprKind::Ident(s), "->") if s == "this" => Some(VarScope::Local),
                        _ => None,
                    };
                    e = match scoped {
                        Some(sc) => Expr {
                            kind: ExprKind::ScopedVar(sc, name),
                            line: e.line,
                        },
                        None => Expr {
                            kind: ExprKind::Member(Box::new(e), name, p == "->"),
                            line: nt.line,
                        },
                    };
                }
                Tok::Punct("++") => {
                    self.next()?;
                    e = Expr {
                        kind: ExprKind::Unary(UnOp::PostInc, Box::new(e)),
                        line,
                    };
                }
                Tok::Punct("--") => {
                    self.next()?;
                    e = Expr {
                        kind: ExprKind::Unary(UnOp::PostDec, Box::new(e)),
                        line,
                    };
                }
                _ => return Ok(e),
            }
        }
    }

    fn macro_expr(&mut self, name: &str, line: u32) -> CResult<ExprKind> {
        if let Ok(n) = name.parse::<usize>() {
            self.max_arg = self.max_arg.max(n);
        }
        Ok(match self.macros.value(name, line)? {
            MacroValue::Int(v) => ExprKind::Int(v, IntSuffix::default()),
            MacroValue::Ident(s) => ExprKind::Ident(s),
            MacroValue::Str(s) => ExprKind::Str(s.into_bytes()),
        })
    }

    fn primary(&mut self) -> CResult<Expr> {
        let t = self.next()?;
        let line = t.line;
        let kind = match t.tok {
            Tok::Int(v, s) => ExprKind::Int(v, s),
            Tok::Char(c) => ExprKind::Char(c),
            Tok::Float(f) => ExprKind::Float(f),
            Tok::Str(mut s) => {
                // adjacent string literals concatenate
                while let Tok::Str(more) = &self.peek()?.tok {
                    s.extend_from_slice(more);
                    self.next()?;
                }
                ExprKind::Str(s)
            }
            Tok::Agg(a) => ExprKind::Agg(a),
            Tok::Macro(m) => self.macro_expr(&m, line)?,
            Tok::MacroStr(m) => {
                if let Ok(n) = m.parse::<usize>() {
                    self.max_arg = self.max_arg.max(n);
                }
                ExprKind::Str(self.macros.string(&m, line)?.into_bytes())
            }
            Tok::Punct("(") => {
                let e = self.expr()?;
                self.expect(")")?;
                return Ok(e);
            }
            Tok::Ident(s) if s == "offsetof" => {
                self.expect("(")?;
                if !self.starts_type_name(0)? {
                    let t = self.next()?;
                    return Err(decl_syntax(&t));
                }
                let tn = self.type_name()?;
                self.expect(",")?;
                let (m, _) = self.ident()?;
                self.expect(")")?;
                ExprKind::Offsetof(Box::new(tn), m)
            }
            Tok::Ident(s) if s == "xlate" => {
                self.expect("<")?;
                let tn = self.type_name()?;
                self.expect(">")?;
                self.expect("(")?;
                let e = self.expr()?;
                self.expect(")")?;
                ExprKind::Xlate(Box::new(tn), Box::new(e))
            }
            Tok::Ident(s) if is_reserved(&s) => return Err(syntax(&t_clone(&s, line))),
            Tok::Ident(s) => ExprKind::Ident(s),
            _ => return Err(syntax(&t)),
        };
        Ok(Expr { kind, line })
    }

    // ---- declarations ----

    /// Declaration specifiers.
    fn decl_spec(&mut self) -> CResult<DeclSpec> {
        let line = self.peek()?.line;
        let mut class = None;
        let mut signed = None::<bool>;
        let mut shorts = 0;
        let mut longs = 0;
        let mut base: Option<String> = None;
        let mut sou: Option<BaseType> = None;
        loop {
            let t = self.peek()?.clone();
            let w = match &t.tok {
                Tok::Ident(w) => self.unscoped_type(w).unwrap_or_else(|| w.clone()),
                _ => break,
            };
            let c = match w.as_str() {
                "typedef" => Some(StorageClass::Typedef),
                "extern" => Some(StorageClass::Extern),
                "static" => Some(StorageClass::Static),
                "register" => Some(StorageClass::Register),
                "auto" => Some(StorageClass::Auto),
                "self" => Some(StorageClass::SelfVar),
                "this" => Some(StorageClass::ThisVar),
                _ => None,
            };
            if let Some(c) = c {
                if class.is_some() {
                    return err(
                        ErrTag::D_DECL_CLASS,
                        t.line,
                        "more than one storage class specified",
                    );
                }
                class = Some(c);
                self.next()?;
                continue;
            }
            match w.as_str() {
                "const" | "volatile" | "restrict" => {
                    self.next()?;
                }
                "signed" | "unsigned" => {
                    self.next()?;
                    signed = Some(w == "signed");
                }
                "short" => {
                    self.next()?;
                    shorts += 1;
                }
                "long" => {
                    self.next()?;
                    longs += 1;
                }
                "void" | "char" | "int" | "float" | "double" | "string" | "_Bool" => {
                    if base.is_some() || sou.is_some() {
                        return err(ErrTag::D_DECL_COMBO, t.line, "invalid type combination");
                    }
                    self.next()?;
                    base = Some(w);
                }
                "struct" | "union" | "enum" if sou.is_some() || base.is_some() => {
                    return err(ErrTag::D_DECL_COMBO, t.line, "invalid type combination");
                }
                "struct" | "union" if longs > 0 && shorts == 0 && signed.is_none() => {
                    // refused once the tag is read, at the line of the token after it
                    self.next()?;
                    if matches!(self.peek()?.tok, Tok::Ident(_)) {
                        self.next()?;
                    }
                    let at = self.peek()?.line;
                    return err(
                        ErrTag::D_DECL_LONGINT,
                        at,
                        "invalid type declaration: long and long long may only be used with integer or floating-point type",
                    );
                }
                "struct" | "union" => {
                    self.next()?;
                    sou = Some(self.sou_spec(if w == "struct" {
                        SouKind::Struct
                    } else {
                        SouKind::Union
                    })?);
                }
                "enum" => {
                    self.next()?;
                    sou = Some(self.enum_spec()?);
                }
                _ if base.is_none()
                    && sou.is_none()
                    && signed.is_none()
                    && shorts == 0
                    && longs == 0
                    && self.typenames.contains(&w) =>
                {
                    // a typedef name is a type unless it is being declared (followed by ';' etc.)
                    self.next()?;
                    base = Some(w);
                }
                _ => break,
            }
        }
        let base = if let Some(s) = sou {
            if base.is_some() || signed.is_some() || shorts + longs > 0 {
                return err(ErrTag::D_DECL_COMBO, line, "invalid type combination");
            }
            s
        } else {
            // a storage class alone (`extern e;`, `self x;`) declares an int, as in C
            let base = match base {
                None if class.is_some() && signed.is_none() && shorts + longs == 0 => {
                    Some("int".to_string())
                }
                b => b,
            };
            BaseType::Named(normalize_base(base, signed, shorts, longs, line)?)
        };
        Ok(DeclSpec { class, base, line })
    }

    fn sou_spec(&mut self, kind: SouKind) -> CResult<BaseType> {
        let mut name = None;
        if let Tok::Ident(s) = &self.peek()?.tok {
            name = Some(Self::unscoped_tag(s));
            self.next()?;
        }
        if !self.is_punct("{")? {
            if name.is_none() {
                let t = self.next()?;
                return Err(syntax(&t));
            }
            return Ok(BaseType::Sou(kind, name, None));
        }
        let brace = self.next()?;
        if let Some(n) = &name {
            let kw = if kind == SouKind::Union {
                "union"
            } else {
                "struct"
            };
            let full = format!("{kw} {n}");
            if !self.sou_defined.insert(full.clone()) {
                return Err(CompileError::new(
                    ErrTag::D_DECL_TYPERED,
                    brace.line,
                    format!("type redeclared: {full}"),
                ));
            }
        }
        let mut members = Vec::new();
        while !self.eat("}")? {
            let spec = self.decl_spec()?;
            loop {
                let line = self.peek()?.line;
                let decl = if self.is_punct(":")? {
                    Declarator::default()
                } else {
                    self.declarator(false)?
                };
                let bits = if self.eat(":")? {
                    Some(self.cond()?)
                } else {
                    None
                };
                members.push(MemberDecl {
                    spec: spec.clone(),
                    decl,
                    bits,
                    line,
                });
                if self.eat(",")? {
                    continue;
                }
                self.expect(";")?;
                break;
            }
        }
        Ok(BaseType::Sou(kind, name, Some(members)))
    }

    fn enum_spec(&mut self) -> CResult<BaseType> {
        let mut name = None;
        if let Tok::Ident(s) = &self.peek()?.tok {
            name = Some(Self::unscoped_tag(s));
            self.next()?;
        }
        if !self.eat("{")? {
            return Ok(BaseType::Enum(name, None));
        }
        let mut vals = Vec::new();
        // an enum needs at least one enumerator
        if self.peek()?.tok == Tok::Punct("}") {
            return Err(syntax(self.peek()?));
        }
        while !self.eat("}")? {
            let (n, _) = self.ident()?;
            let v = if self.eat("=")? {
                Some(self.cond()?)
            } else {
                None
            };
            // DTrace defines the enumerator once it has read the token after it
            self.peek()?;
            vals.push((n, v, self.lexed_line));
            if !self.eat(",")? {
                self.expect("}")?;
                break;
            }
        }
        Ok(BaseType::Enum(name, Some(vals)))
    }

    /// A declarator; `abstract_ok` allows the name to be missing (type names).
    fn declarator(&mut self, abstract_ok: bool) -> CResult<Declarator> {
        let line = self.peek()?.line;
        self.enter(line)?;
        let r = self.declarator_inner(abstract_ok);
        self.depth -= 1;
        r
    }

    fn declarator_inner(&mut self, abstract_ok: bool) -> CResult<Declarator> {
        let mut ptrs: u32 = 0;
        loop {
            if self.eat("*")? {
                ptrs += 1;
                if ptrs > MAX_DEPTH {
                    return err(
                        ErrTag::D_SYNTAX,
                        self.lex.line(),
                        "declaration is too deeply nested",
                    );
                }
                continue;
            }
            if let Tok::Ident(s) = &self.peek()?.tok {
                if matches!(s.as_str(), "const" | "volatile" | "restrict") {
                    self.next()?;
                    continue;
                }
            }
            break;
        }
        let mut inner = Declarator::default();
        let t = self.peek()?.clone();
        match &t.tok {
            Tok::Ident(s) if !is_reserved(s) => {
                self.next()?;
                inner.name = Some(s.clone());
            }
            Tok::Punct("(") if !self.starts_type_name(1)? && !self.peek_is_close(1)? => {
                self.next()?;
                inner = self.declarator(abstract_ok)?;
                self.expect(")")?;
            }
            _ if abstract_ok => {}
            _ => {
                let t = self.next()?;
                return Err(syntax(&t));
            }
        }
        let mut suffixes = Vec::new();
        loop {
            if self.eat("[")? {
                if self.eat("]")? {
                    suffixes.push(Derived::Array(None));
                } else if self.is_punct("...")? || self.starts_type_name(0)? {
                    let mut sig = Vec::new();
                    loop {
                        if self.is_punct("...")? {
                            return err(
                                ErrTag::D_DECL_PROTO_VARARGS,
                                self.lex.line(),
                                "array prototype may not use a variable-length argument list",
                            );
                        }
                        sig.push(self.type_name()?);
                        if !self.eat(",")? {
                            break;
                        }
                    }
                    self.expect("]")?;
                    suffixes.push(Derived::Assoc(sig));
                } else {
                    let e = self.cond()?;
                    self.expect("]")?;
                    suffixes.push(Derived::Array(Some(e)));
                }
            } else if self.is_punct("(")? {
                self.next()?;
                let mut params = Vec::new();
                if !self.eat(")")? {
                    loop {
                        if self.eat("...")? {
                            self.expect(")")?;
                            break;
                        }
                        params.push(self.type_name_with_name()?);
                        if self.eat(",")? {
                            continue;
                        }
                        self.expect(")")?;
                        break;
                    }
                }
                suffixes.push(Derived::Function(params));
            } else {
                break;
            }
        }
        let mut derived = vec![Derived::Pointer; ptrs as usize];
        derived.extend(suffixes.into_iter().rev());
        derived.extend(inner.derived);
        Ok(Declarator {
            name: inner.name,
            derived,
        })
    }

    fn peek_is_close(&mut self, n: usize) -> CResult<bool> {
        Ok(matches!(self.peek_n(n)?.tok, Tok::Punct(")")))
    }

    /// A type name (`int`, `struct foo *`, `char [32]`).
    pub fn type_name(&mut self) -> CResult<TypeName> {
        let spec = self.decl_spec()?;
        let decl = self.declarator(true)?;
        Ok(TypeName { spec, decl })
    }

    fn type_name_with_name(&mut self) -> CResult<TypeName> {
        self.type_name()
    }

    fn decl_item(&mut self) -> CResult<Item> {
        let spec = self.decl_spec()?;
        let mut decls = Vec::new();
        if self.eat(";")? {
            return Ok(Item::Decl(spec, decls));
        }
        loop {
            let line = self.peek()?.line;
            let d = self.declarator(false)?;
            if spec.class == Some(StorageClass::Typedef) {
                if let Some(n) = &d.name {
                    self.typenames.insert(n.clone());
                }
            }
            decls.push((d, line));
            if self.eat(",")? {
                continue;
            }
            let t = self.next()?;
            if !matches!(t.tok, Tok::Punct(";")) {
                return Err(decl_syntax(&t));
            }
            break;
        }
        Ok(Item::Decl(spec, decls))
    }

    fn inline_decl(&mut self) -> CResult<Item> {
        let line = self.next()?.line;
        let spec = self.decl_spec()?;
        let decl = self.declarator(false)?;
        self.expect("=")?;
        let e = self.assign()?;
        self.expect(";")?;
        Ok(Item::Inline(TypeName { spec, decl }, e, line))
    }

    fn translator(&mut self) -> CResult<Item> {
        let line = self.next()?.line;
        let out = self.type_name()?;
        self.expect("<")?;
        let spec = self.decl_spec()?;
        let decl = self.declarator(false)?;
        let param = decl.name.clone().unwrap_or_default();
        let input = TypeName {
            spec,
            decl: Declarator {
                name: None,
                derived: decl.derived,
            },
        };
        self.expect(">")?;
        self.expect("{")?;
        let mut members = Vec::new();
        while !self.eat("}")? {
            let (name, mline) = self.ident()?;
            self.expect("=")?;
            let e = self.assign()?;
            self.expect(";")?;
            members.push(XlatorMember {
                name,
                expr: e,
                line: mline,
            });
        }
        // DTrace checks the translator as a whole once it has read its closing `;`
        let _ = line;
        let line = self.peek()?.line;
        self.expect(";")?;
        Ok(Item::Translator {
            out,
            input,
            param,
            members,
            line,
        })
    }

    /// `provider name { probe pname(native types) [: (translated types)]; ... };`
    fn provider(&mut self) -> CResult<Item> {
        let line = self.next()?.line;
        let (name, _) = self.ident()?;
        self.expect("{")?;
        let mut probes = Vec::new();
        while !self.eat("}")? {
            let t = self.next()?;
            if !matches!(&t.tok, Tok::Ident(s) if s == "probe") {
                return Err(syntax(&t));
            }
            let pline = t.line;
            let (pname, _) = self.ident()?;
            let native = self.probe_params()?;
            let xlated = if self.eat(":")? {
                Some(self.probe_params()?)
            } else {
                None
            };
            self.expect(";")?;
            probes.push(ProbeDeclAst {
                name: pname,
                native,
                xlated,
                line: pline,
            });
        }
        self.expect(";")?;
        Ok(Item::Provider(ProviderDeclAst { name, probes, line }))
    }

    /// A probe declaration's parenthesized parameter types (`()`, `(void)`, `(int, char *p)`).
    fn probe_params(&mut self) -> CResult<Vec<TypeName>> {
        self.expect("(")?;
        let mut out = Vec::new();
        if self.eat(")")? {
            return Ok(out);
        }
        loop {
            out.push(self.type_name()?);
            if self.eat(",")? {
                continue;
            }
            self.expect(")")?;
            break;
        }
        Ok(out)
    }
}

fn t_clone(s: &str, line: u32) -> Token {
    Token {
        tok: Tok::Ident(s.to_string()),
        line,
        raw: s.to_string(),
        rest: s.to_string(),
    }
}

/// Words that cannot be used as identifiers.
fn is_reserved(s: &str) -> bool {
    matches!(
        s,
        "auto"
            | "break"
            | "case"
            | "char"
            | "const"
            | "continue"
            | "counter"
            | "default"
            | "do"
            | "double"
            | "else"
            | "enum"
            | "extern"
            | "float"
            | "for"
            | "goto"
            | "if"
            | "import"
            | "inline"
            | "int"
            | "long"
            | "offsetof"
            | "probe"
            | "provider"
            | "register"
            | "restrict"
            | "return"
            | "short"
            | "signed"
            | "sizeof"
            | "static"
            | "string"
            | "stringof"
            | "struct"
            | "switch"
            | "translator"
            | "typedef"
            | "union"
            | "unsigned"
            | "void"
            | "volatile"
            | "while"
            | "xlate"
    )
}

fn normalize_base(
    base: Option<String>,
    signed: Option<bool>,
    shorts: u32,
    longs: u32,
    line: u32,
) -> CResult<String> {
    let b = base.as_deref();
    // dt_decl_check's order and words
    if b == Some("char") && (shorts > 0 || longs > 0) {
        return err(
            ErrTag::D_DECL_CHARATTR,
            line,
            "invalid type declaration: short and long may not be used with char type",
        );
    }
    if b == Some("void") && (shorts > 0 || longs > 0 || signed.is_some()) {
        return err(
            ErrTag::D_DECL_VOIDATTR,
            line,
            "invalid type declaration: attributes may not be used with void type",
        );
    }
    if signed.is_some() && !matches!(b, None | Some("char") | Some("int")) {
        return err(
            ErrTag::D_DECL_SIGNINT,
            line,
            "invalid type declaration: signed and unsigned may only be used with integer type",
        );
    }
    if longs > 0 && !matches!(b, None | Some("int") | Some("double")) || longs > 2 {
        return err(
            ErrTag::D_DECL_LONGINT,
            line,
            "invalid type declaration: long and long long may only be used with integer or floating-point type",
        );
    }
    if shorts == 1 && longs > 0 && matches!(b, None | Some("int")) {
        // DTrace looks the combination up by name ("short long"), which no type has
        let mut name = vec!["short"];
        name.extend(std::iter::repeat_n("long", longs as usize));
        name.extend(b);
        return err(
            ErrTag::D_UNKNOWN,
            line,
            format!(
                "failed to resolve type {} : Unknown type name",
                name.join(" ")
            ),
        );
    }
    if shorts > 0 && (!matches!(b, None | Some("int")) || longs > 0 || shorts > 1) {
        return err(ErrTag::D_DECL_COMBO, line, "invalid type combination");
    }
    let u = signed == Some(false);
    Ok(match b {
        Some("char") => match signed {
            None => "char".into(),
            Some(true) => "signed char".into(),
            Some(false) => "unsigned char".into(),
        },
        Some("double") if longs > 0 => "long double".into(),
        Some(other) if other != "int" => other.into(),
        _ => {
            let w = if shorts > 0 {
                "short"
            } else if longs == 1 {
                "long"
            } else if longs == 2 {
                "long long"
            } else {
                "int"
            };
            if u {
                format!("unsigned {w}")
            } else if base.is_none() && signed.is_none() && shorts == 0 && longs == 0 {
                return err(ErrTag::D_SYNTAX, line, "syntax error: type expected");
            } else {
                w.to_string()
            }
        }
    })
}
