//! Macro variables: `$0`..`$n` (script arguments), `$$n` (as strings) and the named ones DTrace
//! defines (`$target`, `$pid`, `$ppid`, `$uid`, `$gid`, `$sid`, `$pgid`, `$projid`, `$taskid`,
//! `$zonename`...), resolved to the token they stand for.

use crate::error::{err, CResult, ErrTag};

/// What a macro variable stands for in an expression.
#[derive(Debug, Clone, PartialEq)]
pub enum MacroValue {
    /// An integer constant.
    Int(u64),
    /// An identifier.
    Ident(String),
    /// A string constant (`$$n`, or a value that is neither integer nor identifier).
    Str(String),
}

/// The macro environment of one compilation.
#[derive(Debug, Clone, Default)]
pub struct MacroEnv {
    /// `$0` (script name) then `$1`...
    pub args: Vec<String>,
    /// Named macro variables (`target`, `pid`, ...) with their values.
    pub named: Vec<(String, String)>,
    /// `-x defaultargs`: undefined `$n` are 0 / "".
    pub default_args: bool,
}

/// Parses an integer the way DTrace accepts macro arguments (decimal, octal, hex, optional `-`).
pub fn parse_int(s: &str) -> Option<u64> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()?
    } else if body.len() > 1 && body.starts_with('0') {
        u64::from_str_radix(&body[1..], 8).ok()?
    } else {
        body.parse::<u64>().ok()?
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '`')
}

impl MacroEnv {
    /// The raw text of `$name`, if defined.
    pub fn raw(&self, name: &str, line: u32) -> CResult<String> {
        if let Ok(n) = name.parse::<usize>() {
            if let Some(v) = self.args.get(n) {
                return Ok(v.clone());
            }
            if self.default_args {
                return Ok(String::new());
            }
            return err(
                ErrTag::D_MACRO_UNDEF,
                line,
                format!("macro argument ${name} is not defined"),
            );
        }
        if let Some((_, v)) = self.named.iter().find(|(k, _)| k == name) {
            return Ok(v.clone());
        }
        err(
            ErrTag::D_MACRO_UNDEF,
            line,
            format!("macro variable ${name} is not defined"),
        )
    }

    /// `$name` in an expression.
    pub fn value(&self, name: &str, line: u32) -> CResult<MacroValue> {
        let raw = self.raw(name, line)?;
        if raw.is_empty() && self.default_args {
            return Ok(MacroValue::Int(0));
        }
        if let Some(v) = parse_int(&raw) {
            return Ok(MacroValue::Int(v));
        }
        let body = raw.strip_prefix(['-', '+']).unwrap_or(&raw);
        let numeric = match body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
            Some(h) => !h.is_empty() && h.bytes().all(|c| c.is_ascii_hexdigit()),
            None => !body.is_empty() && body.bytes().all(|c| c.is_ascii_digit()),
        };
        if numeric {
            // an integer too large for 64 bits (DTrace's strtoull reports ERANGE)
            if body.len() > 1
                && body.starts_with('0')
                && !body[1..].starts_with(['x', 'X'])
                && body.bytes().any(|c| c == b'8' || c == b'9')
            {
                return Ok(MacroValue::Str(raw));
            }
            return err(
                ErrTag::D_MACRO_OFLOW,
                line,
                format!("macro argument ${name} constant {body} results in integer overflow"),
            );
        }
        if is_ident(&raw) {
            return Ok(MacroValue::Ident(raw));
        }
        Ok(MacroValue::Str(raw))
    }

    /// `$$name`: always a string.
    pub fn string(&self, name: &str, line: u32) -> CResult<String> {
        self.raw(name, line)
    }

    /// Substitutes `$name` and `$$name` inside a probe specifier.
    pub fn expand_spec(&self, spec: &str, line: u32) -> CResult<(String, usize)> {
        let mut out = String::new();
        let mut max_arg = 0;
        let b = spec.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'$' {
                let mut j = i + 1;
                if j < b.len() && b[j] == b'$' {
                    j += 1;
                }
                let s = j;
                while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                    j += 1;
                }
                let name = &spec[s..j];
                if name.is_empty() {
                    out.push('$');
                    i += 1;
                    continue;
                }
                if let Ok(n) = name.parse::<usize>() {
                    max_arg = max_arg.max(n);
                }
                out.push_str(&self.raw(name, line)?);
                i = j;
            } else {
                out.push(b[i] as char);
                i += 1;
            }
        }
        Ok((out, max_arg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values() {
        let env = MacroEnv {
            args: vec!["x.d".into(), "42".into(), "foo".into(), "a b".into()],
            named: vec![("target".into(), "1234".into())],
            default_args: false,
        };
        assert_eq!(env.value("1", 1).unwrap(), MacroValue::Int(42));
        assert_eq!(env.value("2", 1).unwrap(), MacroValue::Ident("foo".into()));
        assert_eq!(env.value("3", 1).unwrap(), MacroValue::Str("a b".into()));
        assert_eq!(env.value("target", 1).unwrap(), MacroValue::Int(1234));
        assert_eq!(env.value("4", 1).unwrap_err().tag, ErrTag::D_MACRO_UNDEF);
        assert_eq!(
            env.expand_spec("pid$target::$2:entry", 1).unwrap().0,
            "pid1234::foo:entry"
        );
    }
}
