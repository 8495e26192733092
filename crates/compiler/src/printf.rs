//! printf-style format strings: parsing conversions as DTrace's `dt_printf` does and checking each
//! against the type of its argument (`printf`, `printa`, `system`, `freopen`).

use crate::error::{err, CResult, ErrTag};

/// What a conversion accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvArg {
    /// `%d`, `%u`, `%x`, ... (any integer).
    Int,
    /// `%x`, `%p`, `%a`: integer or pointer.
    IntOrPtr,
    /// `%c`.
    Char,
    /// `%s`, `%S`.
    Str,
    /// `%ls`, `%ws`: an array of 32-bit integers (`wchar_t []`).
    WideStr,
    /// `%e`, `%f`, `%g`.
    Float,
    /// `%k`: a stack.
    Stack,
    /// `%Y`: a time (integer).
    Time,
    /// `%@`: the aggregation value (printa only).
    Agg,
    /// `%%`.
    None,
}

/// One conversion of a format string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conv {
    /// Its name (`d`, `llx`, `s`, ...).
    pub name: String,
    /// `*` width and `.*` precision arguments it consumes first.
    pub dynamic: u32,
    pub arg: ConvArg,
}

impl ConvArg {
    /// The prototype string DTrace prints for the conversion's expected type.
    pub fn proto(self) -> &'static str {
        match self {
            ConvArg::Int => "int",
            ConvArg::IntOrPtr => "pointer or integer",
            ConvArg::Char => "char",
            ConvArg::Str => "char [] or string (or use stringof)",
            ConvArg::WideStr => "wchar_t []",
            ConvArg::Float => "double",
            ConvArg::Stack => "stack",
            ConvArg::Time => "int64_t",
            ConvArg::Agg => "aggregation",
            ConvArg::None => "",
        }
    }
}

/// Parses the conversions of `fmt`.
pub fn parse(fmt: &str, func: &str, line: u32) -> CResult<Vec<Conv>> {
    let b = fmt.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        i += 1;
        let mut dynamic = 0;
        let mut agg = false;
        let mut mods = String::new();
        // As DTrace's dt_printf_create: flags, width, precision, `@` and size modifiers may come in any
        // order (`%16@d` and `%@16d` are the same); the first other character is the conversion.
        let first = i;
        let c = loop {
            let Some(&ch) = b.get(i) else {
                return err(
                    ErrTag::D_PRINTF_ARG_PROTO,
                    line,
                    format!(
                        "{func}( ) format conversion #{} name expected before end of format string",
                        out.len() + 1
                    ),
                );
            };
            i += 1;
            match ch {
                b'%' if i - 1 == first => break '%',
                b'-' | b'+' | b' ' | b'#' | b'\'' | b'?' | b'.' | b'0'..=b'9' => {}
                b'*' => dynamic += 1,
                b'@' => agg = true,
                b'h' | b'l' | b'L' | b'w' | b'q' | b'j' | b'z' | b't' => mods.push(ch as char),
                _ => {
                    // A conversion character (the whole UTF-8 character, for the error message).
                    let rest = &fmt[i - 1..];
                    let c = rest.chars().next().unwrap_or('?');
                    i += c.len_utf8() - 1;
                    break c;
                }
            }
        };
        let name = format!("{mods}{c}");
        let wide = mods == "l" || mods == "w";
        let arg = match c {
            // %lc and %wc take a wint_t / wchar_t: an int.
            'c' if wide => ConvArg::Int,
            's' if wide => ConvArg::WideStr,
            '%' => ConvArg::None,
            'd' | 'i' | 'o' | 'u' | 'D' | 'O' | 'U' => ConvArg::Int,
            'x' | 'X' | 'p' | 'P' | 'a' | 'A' => ConvArg::IntOrPtr,
            'c' | 'C' => ConvArg::Char,
            's' | 'S' => ConvArg::Str,
            'e' | 'E' | 'f' | 'F' | 'g' | 'G' => ConvArg::Float,
            'k' => ConvArg::Stack,
            'Y' | 'T' => ConvArg::Time,
            '@' => ConvArg::Agg,
            _ => {
                return err(
                    ErrTag::D_PRINTF_ARG_TYPE,
                    line,
                    format!(
                        "{func}( ) format conversion #{} is undefined: %{name}",
                        out.len() + 1
                    ),
                )
            }
        };
        let arg = if agg && arg != ConvArg::None {
            ConvArg::Agg
        } else {
            arg
        };
        out.push(Conv { name, dynamic, arg });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        let v = parse("%d %-*s %llx %% %@d %5.2f", "printf", 1).unwrap();
        let names: Vec<&str> = v.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["d", "s", "llx", "%", "d", "f"]);
        assert_eq!(v[1].dynamic, 1);
        assert_eq!(v[4].arg, ConvArg::Agg);
        let v = parse("%9d %16@d %-@8.3d", "printa", 1).unwrap();
        assert_eq!(v[1].arg, ConvArg::Agg);
        assert_eq!(v[2].arg, ConvArg::Agg);
        assert_eq!(v[0].arg, ConvArg::Int);
        assert!(parse("%", "printf", 1).is_err());
        assert!(parse("%v", "printf", 1).is_err());
        // %Y and %T (RFC 822) both take a time in nanoseconds.
        let v = parse("%Y %-30T", "printf", 1).unwrap();
        assert_eq!(v[0].arg, ConvArg::Time);
        assert_eq!(v[1].arg, ConvArg::Time);
    }
}
