//! printf-style format strings: parsing conversions as DTrace's `dt_printf` does and checking each
//! against the type of its argument (`printf`, `printa`, `system`, `freopen`).

use crate::error::{err, CResult, ErrTag};

/// What a conversion accepts (the `pfcheck_*` function of DTrace's conversion table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvArg {
    /// `%d %i %o %u %x %X`: any integer (`pfcheck_xint`, `pfcheck_dint`).
    Int,
    /// `%c %C`: an integer no wider than `int` (`pfcheck_csi`).
    Csi,
    /// `%hd %hu %ld %lu %lld %llu %lc %wc %P ...`: an integer whose encoding (size and
    /// signedness) is that of the named C type (`pfcheck_type`, CTF type compatibility).
    Exact(&'static str),
    /// `%hx %hX`: a `short` of either signedness (`pfcheck_xshort`).
    XShort,
    /// `%lx %lX`: a `long` of either signedness (`pfcheck_xlong`).
    XLong,
    /// `%llx %llX`: a `long long` of either signedness, or an `int64_t`/`uint64_t` or a typedef of
    /// one (`pfcheck_xlonglong`).
    XLongLong,
    /// `%p`: integer or pointer (`pfcheck_addr`).
    Addr,
    /// `%a`: integer, pointer or kernel symbol address (`pfcheck_kaddr`).
    KAddr,
    /// `%A`: a user address (`pfcheck_uaddr`).
    UAddr,
    /// `%s %S %I`: a string or `char` array (`pfcheck_str`).
    Str,
    /// `%ls`, `%ws`: an array of 32-bit integers (`wchar_t []`).
    WideStr,
    /// `%e %E %f %g %G`: a floating-point value (`pfcheck_fp`).
    Float,
    /// `%Le %LE %Lf %Lg %LG`: a `long double`.
    LongDouble,
    /// `%k`: a stack.
    Stack,
    /// `%Y`, `%T`: a time, a 64-bit integer (`pfcheck_time`).
    Time,
    /// `%%`.
    None,
}

/// One conversion of a format string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conv {
    /// Its name (`d`, `llx`, `s`, ...), size modifiers included, flags, width and `@` not.
    pub name: String,
    /// `*` width and `.*` precision arguments it consumes first.
    pub dynamic: u32,
    /// Its precision is dynamic (`.*`): with one dynamic argument, that one is the precision.
    pub dyn_prec: bool,
    /// What its value must be.
    pub arg: ConvArg,
    /// `%@...`: it formats the aggregation's value (printa only).
    pub agg: bool,
}

/// DTrace's prototype strings for its conversion classes (`pfproto_*`).
const XINT: &str = "char, short, int, long, or long long";
const CSI: &str = "char, short, or int";
const FP: &str = "float, double, or long double";
const ADDR: &str = "pointer or integer";
const UADDR: &str = "pointer or integer (with -p/-c) or _usymaddr (without -p/-c)";
const CSTR: &str = "char [] or string (or use stringof)";
const WSTR: &str = "wchar_t []";

impl ConvArg {
    /// The prototype string DTrace prints for the conversion's expected type (`pfc_tstr`).
    pub fn proto(self) -> &'static str {
        match self {
            ConvArg::Int => XINT,
            ConvArg::Csi => CSI,
            ConvArg::Exact(t) => t,
            ConvArg::XShort => "short",
            ConvArg::XLong => "long",
            ConvArg::XLongLong => "long long",
            ConvArg::Addr | ConvArg::KAddr => ADDR,
            ConvArg::UAddr => UADDR,
            ConvArg::Str => CSTR,
            ConvArg::WideStr => WSTR,
            ConvArg::Float => FP,
            ConvArg::LongDouble => "long double",
            ConvArg::Stack => "stack",
            ConvArg::Time => "int64_t",
            ConvArg::None => "void",
        }
    }
}

/// DTrace's conversion dictionary (`_dtrace_conversions`): the conversion named `name` (size
/// modifiers and conversion character), or `None` when it is undefined (`%hhd`, `%lf`, `%zd`...).
pub fn lookup(name: &str) -> Option<ConvArg> {
    use ConvArg::*;
    Some(match name {
        "a" => KAddr,
        "A" => UAddr,
        "c" | "C" => Csi,
        "d" | "i" | "o" | "u" | "x" | "X" => Int,
        "e" | "E" | "f" | "g" | "G" => Float,
        "hd" | "hi" => Exact("short"),
        "ho" | "hu" => Exact("unsigned short"),
        "hx" | "hX" => XShort,
        "I" | "s" | "S" => Str,
        "k" => Stack,
        "lc" | "wc" => Exact("int"),
        "ld" | "li" => Exact("long"),
        "lo" | "lu" => Exact("unsigned long"),
        "lx" | "lX" => XLong,
        "ls" | "ws" => WideStr,
        "lld" | "lli" => Exact("long long"),
        "llo" | "llu" => Exact("unsigned long long"),
        "llx" | "llX" => XLongLong,
        "Le" | "LE" | "Lf" | "Lg" | "LG" => LongDouble,
        "p" => Addr,
        "P" => Exact("uint16_t"),
        "T" | "Y" => Time,
        "%" => None,
        _ => return Option::None,
    })
}

/// Parses the conversions of `fmt` as DTrace's `dt_printf_create` does: flags, width, precision,
/// `@` and the size modifiers `h`, `l`, `L`, `w` may come in any order (`%16@d` and `%@16d` are
/// the same); the first other character ends the conversion's name, which must be in DTrace's
/// dictionary ([`lookup`]).
pub fn parse(fmt: &[u8], line: u32) -> CResult<Vec<Conv>> {
    let b = fmt;
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
        let first = i;
        let n = out.len() + 1;
        // DTrace for Linux's format parser: one '.', one '*' each for width and precision, no
        // positional arguments; these are syntax errors of the format itself
        let (mut dot, mut width_star, mut prec_star) = (false, false, false);
        let c = loop {
            let Some(&ch) = b.get(i) else {
                return err(
                    ErrTag::D_SYNTAX,
                    line,
                    format!("format conversion #{n} name expected before end of format string"),
                );
            };
            i += 1;
            match ch {
                b'%' if i - 1 == first => break '%',
                b'%' => {
                    return err(
                        ErrTag::D_SYNTAX,
                        line,
                        format!(
                            "format conversion #{n} cannot be combined with other format flags: %%"
                        ),
                    )
                }
                b'$' => {
                    return err(
                        ErrTag::D_SYNTAX,
                        line,
                        format!("format conversion #{n} uses unsupported positional format (%n$)"),
                    )
                }
                b'.' if dot => {
                    return err(
                        ErrTag::D_SYNTAX,
                        line,
                        format!("format conversion #{n} has more than one '.' specified"),
                    )
                }
                b'.' => dot = true,
                b'-' | b'+' | b' ' | b'#' | b'\'' | b'?' | b'0'..=b'9' => {}
                b'*' => {
                    let (seen, what) = if dot {
                        (&mut prec_star, "precision")
                    } else {
                        (&mut width_star, "width")
                    };
                    if *seen {
                        return err(
                            ErrTag::D_SYNTAX,
                            line,
                            format!("format conversion #{n} has more than one '*' specified for the output {what}"),
                        );
                    }
                    *seen = true;
                    dynamic += 1
                }
                b'@' => agg = true,
                // DTrace keeps at most six modifier characters of a name of eight
                b'h' | b'l' | b'L' | b'w' => {
                    if mods.len() < 6 {
                        mods.push(ch as char)
                    }
                }
                _ => {
                    // A conversion character (the whole UTF-8 character, for the error message).
                    let rest = &fmt[i - 1..];
                    let c = (1..=rest.len().min(4))
                        .find_map(|n| std::str::from_utf8(&rest[..n]).ok())
                        .and_then(|s| s.chars().next())
                        .unwrap_or(char::REPLACEMENT_CHARACTER);
                    i += c.len_utf8().min(rest.len()) - 1;
                    break c;
                }
            }
        };
        let name = format!("{mods}{c}");
        let Some(arg) = lookup(&name) else {
            return err(
                ErrTag::D_SYNTAX,
                line,
                format!("format conversion #{n} is undefined: %{name}"),
            );
        };
        let agg = agg && arg != ConvArg::None;
        out.push(Conv {
            name,
            dynamic,
            dyn_prec: prec_star,
            arg,
            agg,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        let v = parse(b"%d %-*s %llx %% %@d %5.2f", 1).unwrap();
        let names: Vec<&str> = v.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["d", "s", "llx", "%", "d", "f"]);
        assert_eq!(v[1].dynamic, 1);
        assert!(v[4].agg);
        let v = parse(b"%9d %16@d %-@8.3d", 1).unwrap();
        assert!(v[1].agg && v[2].agg && !v[0].agg);
        assert_eq!(v[1].arg, ConvArg::Int);
        assert_eq!(v[0].arg, ConvArg::Int);
        assert!(parse(b"%", 1).is_err());
        assert!(parse(b"%v", 1).is_err());
        // %Y and %T (RFC 822) both take a time in nanoseconds.
        let v = parse(b"%Y %-30T", 1).unwrap();
        assert_eq!(v[0].arg, ConvArg::Time);
        assert_eq!(v[1].arg, ConvArg::Time);
        // size modifiers select a conversion of DTrace's dictionary; others are undefined
        let v = parse(b"%hd %-8lu %llx %lc %Lf %hhd", 1);
        let e = v.unwrap_err();
        assert_eq!(e.message, "format conversion #6 is undefined: %hhd");
        let v = parse(b"%hd %-8lu %llx %lc %Lf %hX", 1).unwrap();
        let args: Vec<ConvArg> = v.iter().map(|c| c.arg).collect();
        assert_eq!(
            args,
            [
                ConvArg::Exact("short"),
                ConvArg::Exact("unsigned long"),
                ConvArg::XLongLong,
                ConvArg::Exact("int"),
                ConvArg::LongDouble,
                ConvArg::XShort
            ]
        );
        // DTrace for Linux's syntax errors of a conversion itself
        for (f, m) in [
            ("%.*.*d", "has more than one '.' specified"),
            (
                "%**d",
                "has more than one '*' specified for the output width",
            ),
            (
                "%.**d",
                "has more than one '*' specified for the output precision",
            ),
            ("%1$d", "uses unsupported positional format (%n$)"),
            ("%-%", "cannot be combined with other format flags: %%"),
            ("%*", "name expected before end of format string"),
        ] {
            let e = parse(f.as_bytes(), 1).unwrap_err();
            assert_eq!(e.tag, ErrTag::D_SYNTAX, "{f}");
            assert_eq!(e.message, format!("format conversion #1 {m}"), "{f}");
        }
        let v = parse(b"%.*d %*d %*.*d", 1).unwrap();
        assert!(v[0].dyn_prec && !v[1].dyn_prec && v[2].dyn_prec);
        // `z`, `j`, `q`, `t` are no modifiers to DTrace: the conversion is named by them
        for (f, n) in [("%zd", "%z"), ("%jd", "%j"), ("%lf", "%lf"), ("%F", "%F")] {
            let e = parse(f.as_bytes(), 1).unwrap_err();
            assert!(
                e.message.ends_with(&format!("is undefined: {n}")),
                "{f}: {e}"
            );
        }
    }
}
