//! DTrace's options: the table of DTrace for Linux's option names with how each value is parsed, and
//! the syntax of option values, the one parser every crate uses: numbers in C notation
//! (`strtoull(s, &end, 0)`: decimal, `0x` hex, leading-`0` octal), sizes with a `k`, `m`, `g` or `t`
//! suffix (`dt_opt_size`), and times with a unit or `hz` suffix (`dt_opt_rate`).

/// How an option's value is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptKind {
    /// Compile-time option taking no value or a free-form one (compiler's business).
    Compile,
    /// `cppargs`: further arguments for the preprocessor, split at white space; a value is required.
    CppArgs,
    /// A size in bytes with optional `k`, `m`, `g`, `t` suffix.
    Size,
    /// A time: a number of nanoseconds with optional unit suffix, or a frequency with `hz`.
    Rate,
    /// A runtime value: a number, or `yes/no`, `on/off`, `true/false`, `enable(d)/disable(d)`,
    /// `set/unset`; no value means set.
    Runtime,
    /// `bufpolicy`: `ring`, `fill` or `switch`.
    BufPolicy,
    /// `bufresize`: `auto` or `manual`.
    BufResize,
    /// `encoding`: `ascii` or `utf8`, how graphs draw their bars.
    Encoding,
    /// `oformat`: `text`, `json` or `folded` (the consumer's output formats).
    OFormat,
    /// A free-form string kept as given (`flamegraph=FILE`, `metrics=ADDR:PORT`).
    Text,
    /// `lockmem`: a size, or `unlimited`.
    LockMem,
    /// A compile-time option whose value must be one of these words.
    Choice(&'static [&'static str]),
    /// An option DTrace for Linux has whose mechanism is not here yet: setting it is refused with
    /// "not yet supported: " and this description.
    Unsupported(&'static str),
}

/// DTrace for Linux's options: (name, kind, may change while tracing is active).
pub const OPTIONS: &[(&str, OptKind, bool)] = &[
    // compile-time options
    ("aggpercpu", OptKind::Compile, false),
    ("amin", OptKind::Compile, false),
    ("argref", OptKind::Compile, false),
    ("core", OptKind::Compile, false),
    ("cpp", OptKind::Compile, false),
    ("cppargs", OptKind::CppArgs, false),
    ("cpphdrs", OptKind::Compile, false),
    ("cpppath", OptKind::Compile, false),
    (
        "ctfpath",
        OptKind::Unsupported("a CTF archive path (ctfpath); types come from BTF"),
        false,
    ),
    ("ctypes", OptKind::Compile, false),
    ("defaultargs", OptKind::Compile, false),
    ("define", OptKind::Compile, false),
    ("droptags", OptKind::Compile, false),
    ("dtypes", OptKind::Compile, false),
    ("encoding", OptKind::Encoding, true),
    ("debug", OptKind::Compile, false),
    ("empty", OptKind::Compile, false),
    ("errtags", OptKind::Compile, false),
    (
        "evaltime",
        OptKind::Choice(&["exec", "preinit", "postinit", "main"]),
        false,
    ),
    ("incdir", OptKind::Compile, false),
    ("iregs", OptKind::Compile, false),
    ("kdefs", OptKind::Compile, false),
    ("knodefs", OptKind::Compile, false),
    ("late", OptKind::Choice(&["dynamic", "static"]), false),
    ("lazyload", OptKind::Compile, false),
    ("ldpath", OptKind::Compile, false),
    ("libdir", OptKind::Compile, false),
    (
        "linkmode",
        OptKind::Choice(&["kernel", "dynamic", "static"]),
        false,
    ),
    ("linktype", OptKind::Choice(&["elf", "dof"]), false),
    ("nolibs", OptKind::Compile, false),
    ("pgmax", OptKind::Compile, false),
    ("pspec", OptKind::Compile, false),
    ("stdc", OptKind::Choice(&["a", "c", "s", "t"]), false),
    ("strip", OptKind::Compile, false),
    ("syslibdir", OptKind::Compile, false),
    ("tree", OptKind::Compile, false),
    ("tregs", OptKind::Compile, false),
    ("udefs", OptKind::Compile, false),
    ("undef", OptKind::Compile, false),
    ("unodefs", OptKind::Compile, false),
    ("verbose", OptKind::Compile, false),
    ("version", OptKind::Compile, false),
    ("zdefs", OptKind::Compile, false),
    // runtime options fixed once tracing starts
    ("aggsize", OptKind::Size, false),
    ("bpflog", OptKind::Runtime, false),
    ("bpflogsize", OptKind::Size, false),
    ("bufsize", OptKind::Size, false),
    ("bufpolicy", OptKind::BufPolicy, false),
    ("bufresize", OptKind::BufResize, false),
    ("cleanrate", OptKind::Rate, false),
    ("cpu", OptKind::Runtime, false),
    ("destructive", OptKind::Runtime, false),
    ("dynvarsize", OptKind::Size, false),
    ("grabanon", OptKind::Runtime, false),
    ("jstackframes", OptKind::Runtime, false),
    ("jstackstrsize", OptKind::Size, false),
    ("lockmem", OptKind::LockMem, false),
    ("maxframes", OptKind::Runtime, false),
    ("noresolve", OptKind::Runtime, false),
    ("nspec", OptKind::Runtime, false),
    ("pcapsize", OptKind::Size, false),
    ("scratchsize", OptKind::Size, false),
    ("specsize", OptKind::Size, false),
    ("stackframes", OptKind::Runtime, false),
    ("statusrate", OptKind::Rate, false),
    ("strsize", OptKind::Size, false),
    ("ustackframes", OptKind::Runtime, false),
    ("temporal", OptKind::Runtime, false),
    (
        "zone",
        OptKind::Unsupported("zones (zone): Linux has none"),
        false,
    ),
    // output formats (the consumer's oformat)
    ("oformat", OptKind::OFormat, false),
    ("flamegraph", OptKind::Text, false),
    ("metrics", OptKind::Text, false),
    // dynamic runtime options
    ("agghist", OptKind::Runtime, true),
    ("aggpack", OptKind::Runtime, true),
    ("aggrate", OptKind::Rate, true),
    ("aggsortkey", OptKind::Runtime, true),
    ("aggsortkeypos", OptKind::Runtime, true),
    ("aggsortpos", OptKind::Runtime, true),
    ("aggsortrev", OptKind::Runtime, true),
    ("aggzoom", OptKind::Runtime, true),
    ("flowindent", OptKind::Runtime, true),
    ("quiet", OptKind::Runtime, true),
    ("quietresize", OptKind::Runtime, true),
    ("printsize", OptKind::Size, true),
    ("rawbytes", OptKind::Runtime, true),
    ("stackindent", OptKind::Runtime, true),
    ("switchrate", OptKind::Rate, true),
];

/// Options that only the command line or the environment may set: `#pragma D option` refuses them
/// ("Option cannot be used from within a D program", `EDT_BADOPTCTX`).
pub const NOT_FROM_D: &[&str] = &[
    "cppargs",
    "cpphdrs",
    "cpppath",
    "ctfpath",
    "define",
    "incdir",
    "ldpath",
    "modpath",
    "procfspath",
    "stdc",
    "undef",
];

/// Looks an option up: its kind and whether it may change while tracing is active.
pub fn option_kind(name: &str) -> Option<(OptKind, bool)> {
    OPTIONS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|&(_, k, d)| (k, d))
}

/// Nanoseconds per second.
pub const NANOSEC: u64 = 1_000_000_000;

/// What `strtoull(s, &end, 0)` reads from the start of `s`: the value and the rest, or `None` when no
/// digit starts it (or the number does not fit in 64 bits).
pub fn c_number(s: &str) -> Option<(u64, &str)> {
    let (radix, body) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(r) if r.starts_with(|c: char| c.is_ascii_hexdigit()) => (16, r),
        // "0x" with no hex digit after it is the number 0 followed by "x...".
        Some(_) => return Some((0, &s[1..])),
        None if s.len() > 1 && s.starts_with('0') => (8, &s[1..]),
        None => (10, s),
    };
    let n = body
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(body.len());
    if n == 0 {
        // A lone leading 0 (octal with no more digits) is the number 0.
        return if radix == 8 { Some((0, body)) } else { None };
    }
    let v = u64::from_str_radix(&body[..n], radix).ok()?;
    Some((v, &body[n..]))
}

/// A whole string as a C-notation unsigned number.
pub fn parse_c_unsigned(s: &str) -> Option<u64> {
    match c_number(s)? {
        (v, "") => Some(v),
        _ => None,
    }
}

/// A size in bytes (`dt_opt_size`): a C-notation number optionally followed by `k`, `m`, `g` or `t`
/// (either case, each a factor of 1024); `None` when malformed or beyond `i64::MAX`.
pub fn parse_size(s: &str) -> Option<u64> {
    let (digits, mul): (&str, u64) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1 << 10),
        b'm' | b'M' => (&s[..s.len() - 1], 1 << 20),
        b'g' | b'G' => (&s[..s.len() - 1], 1 << 30),
        b't' | b'T' => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    parse_c_unsigned(digits)?
        .checked_mul(mul)
        .filter(|&v| v <= i64::MAX as u64)
}

/// Time suffixes of rate options and the profile provider, with nanoseconds per unit (0 for `hz`,
/// a frequency per second).
pub const TIME_SUFFIXES: &[(&str, u64)] = &[
    ("ns", 1),
    ("nsec", 1),
    ("us", 1_000),
    ("usec", 1_000),
    ("ms", 1_000_000),
    ("msec", 1_000_000),
    ("s", NANOSEC),
    ("sec", NANOSEC),
    ("m", 60 * NANOSEC),
    ("min", 60 * NANOSEC),
    ("h", 3600 * NANOSEC),
    ("hour", 3600 * NANOSEC),
    ("d", 86400 * NANOSEC),
    ("day", 86400 * NANOSEC),
    ("hz", 0),
];

/// Looks a time suffix up (case-insensitively): nanoseconds per unit, 0 for `hz`.
pub fn time_suffix(s: &str) -> Option<u64> {
    TIME_SUFFIXES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(s))
        .map(|&(_, m)| m)
}

/// A rate or time in nanoseconds (`dt_opt_rate`): a C-notation number with an optional time suffix;
/// a bare number is nanoseconds and `Nhz` is the period of that frequency (`0hz` is 0).
pub fn parse_rate(s: &str) -> Option<u64> {
    let (v, rest) = c_number(s)?;
    let mul = if rest.is_empty() {
        1
    } else {
        time_suffix(rest)?
    };
    if mul == 0 {
        return Some(NANOSEC.checked_div(v).unwrap_or(0));
    }
    v.checked_mul(mul).filter(|&v| v <= i64::MAX as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_numbers() {
        assert_eq!(c_number("0x1fz"), Some((31, "z")));
        assert_eq!(c_number("017"), Some((15, "")));
        assert_eq!(c_number("0"), Some((0, "")));
        assert_eq!(c_number("08"), Some((0, "8")));
        assert_eq!(c_number("0xg"), Some((0, "xg")));
        assert_eq!(c_number("42ms"), Some((42, "ms")));
        assert_eq!(c_number("x"), None);
        assert_eq!(c_number("-1"), None);
        assert_eq!(c_number("99999999999999999999"), None);
        assert_eq!(parse_c_unsigned("12"), Some(12));
        assert_eq!(parse_c_unsigned("12k"), None);
        assert_eq!(parse_c_unsigned(""), None);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4m"), Some(4 << 20));
        assert_eq!(parse_size("4M"), Some(4 << 20));
        assert_eq!(parse_size("512k"), Some(512 << 10));
        assert_eq!(parse_size("2K"), Some(2048));
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size("1t"), Some(1 << 40));
        assert_eq!(parse_size("1T"), Some(1 << 40));
        assert_eq!(parse_size("1024"), Some(1024));
        assert_eq!(parse_size("0x100"), Some(256));
        assert_eq!(parse_size("0x10k"), Some(16 << 10));
        assert_eq!(parse_size("010"), Some(8));
        assert_eq!(parse_size("0"), Some(0));
        for bad in [
            "4mb",
            "4q",
            "m",
            "",
            "-1",
            "1.5m",
            " 4m",
            "99999999999t",
            "0x",
        ] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10hz"), Some(100_000_000));
        assert_eq!(parse_rate("10Hz"), Some(100_000_000));
        assert_eq!(parse_rate("0hz"), Some(0));
        assert_eq!(parse_rate("1s"), Some(NANOSEC));
        assert_eq!(parse_rate("1sec"), Some(NANOSEC));
        assert_eq!(parse_rate("250ms"), Some(250_000_000));
        assert_eq!(parse_rate("3MSEC"), Some(3_000_000));
        assert_eq!(parse_rate("5us"), Some(5_000));
        assert_eq!(parse_rate("7usec"), Some(7_000));
        assert_eq!(parse_rate("9ns"), Some(9));
        assert_eq!(parse_rate("2m"), Some(120 * NANOSEC));
        assert_eq!(parse_rate("2min"), Some(120 * NANOSEC));
        assert_eq!(parse_rate("1h"), Some(3600 * NANOSEC));
        assert_eq!(parse_rate("1hour"), Some(3600 * NANOSEC));
        assert_eq!(parse_rate("1d"), Some(86400 * NANOSEC));
        assert_eq!(parse_rate("1day"), Some(86400 * NANOSEC));
        assert_eq!(parse_rate("500"), Some(500));
        assert_eq!(parse_rate("0x10"), Some(16));
        for bad in ["10 hz", "10fortnights", "hz", "", "-5s", "99999999999d"] {
            assert_eq!(parse_rate(bad), None, "{bad:?}");
        }
    }
}
