//! DTrace's options (`dtrace_setopt`/`dtrace_getopt`, `-x name=value`, `#pragma D option`): the table of
//! known names, how each parses its value (sizes with `k/m/g/t`, rates with `ns/us/ms/s/m/h/d/hz`,
//! booleans with `yes/no, on/off, ...`, policies), defaults, and which may change while tracing.

use std::collections::BTreeMap;

use crate::error::{ConsumerError, Result};

/// The value DTrace stores for an unset option (`DTRACEOPT_UNSET`).
pub const UNSET: i64 = -2;

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
}

/// `bufpolicy` values.
pub const BUFPOLICY_RING: i64 = 0;
/// `bufpolicy=fill`.
pub const BUFPOLICY_FILL: i64 = 1;
/// `bufpolicy=switch`.
pub const BUFPOLICY_SWITCH: i64 = 2;

/// `encoding=ascii`.
pub const ENCODING_ASCII: i64 = 1;
/// `encoding=utf8`.
pub const ENCODING_UTF8: i64 = 2;

/// (name, kind, may change while tracing is active)
const TABLE: &[(&str, OptKind, bool)] = &[
    // compile-time options
    ("amin", OptKind::Compile, false),
    ("argref", OptKind::Compile, false),
    ("core", OptKind::Compile, false),
    ("cpp", OptKind::Compile, false),
    ("cppargs", OptKind::CppArgs, false),
    ("cpphdrs", OptKind::Compile, false),
    ("cpppath", OptKind::Compile, false),
    ("ctypes", OptKind::Compile, false),
    ("defaultargs", OptKind::Compile, false),
    ("define", OptKind::Compile, false),
    ("droptags", OptKind::Compile, false),
    ("dtypes", OptKind::Compile, false),
    ("encoding", OptKind::Encoding, true),
    ("debug", OptKind::Compile, false),
    ("empty", OptKind::Compile, false),
    ("errtags", OptKind::Compile, false),
    ("evaltime", OptKind::Compile, false),
    ("incdir", OptKind::Compile, false),
    ("iregs", OptKind::Compile, false),
    ("kdefs", OptKind::Compile, false),
    ("knodefs", OptKind::Compile, false),
    ("late", OptKind::Compile, false),
    ("lazyload", OptKind::Compile, false),
    ("ldpath", OptKind::Compile, false),
    ("libdir", OptKind::Compile, false),
    ("linkmode", OptKind::Compile, false),
    ("linktype", OptKind::Compile, false),
    ("nolibs", OptKind::Compile, false),
    ("pgmax", OptKind::Compile, false),
    ("pspec", OptKind::Compile, false),
    ("stdc", OptKind::Compile, false),
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
    ("nspec", OptKind::Runtime, false),
    ("specsize", OptKind::Size, false),
    ("stackframes", OptKind::Runtime, false),
    ("statusrate", OptKind::Rate, false),
    ("strsize", OptKind::Size, false),
    ("ustackframes", OptKind::Runtime, false),
    ("temporal", OptKind::Runtime, false),
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
    ("rawbytes", OptKind::Runtime, true),
    ("stackindent", OptKind::Runtime, true),
    ("switchrate", OptKind::Rate, true),
];

/// The option settings of one handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    values: BTreeMap<&'static str, i64>,
    explicit: Vec<(&'static str, Option<String>)>,
    strings: BTreeMap<&'static str, Vec<String>>,
}

impl Default for Options {
    fn default() -> Self {
        let mut o = Options {
            values: TABLE.iter().map(|(n, _, _)| (*n, UNSET)).collect(),
            explicit: Vec::new(),
            strings: BTreeMap::new(),
        };
        for (name, v) in [
            ("bufsize", 4 << 20),
            ("aggsize", 4 << 20),
            ("dynvarsize", 1 << 20),
            ("specsize", 32 << 10),
            ("strsize", 256),
            ("nspec", 1),
            ("stackframes", 20),
            ("ustackframes", 20),
            ("jstackframes", 50),
            ("jstackstrsize", 512),
            ("switchrate", 1_000_000_000),
            ("statusrate", 1_000_000_000),
            ("aggrate", 1_000_000_000),
            ("cleanrate", 1_000_000_000 / 101),
            ("bufpolicy", BUFPOLICY_SWITCH),
            ("bufresize", 0),
        ] {
            o.values.insert(name, v);
        }
        o
    }
}

fn bad(v: &str) -> ConsumerError {
    ConsumerError::BadOptionValue(v.to_string())
}

/// `strtoull(s, &end, 0)`: decimal, `0x` hex or `0` octal; returns the value and the rest.
fn c_number(s: &str) -> Option<(u64, &str)> {
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or(s.strip_prefix("0X")) {
        (h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    let n = digits
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(digits.len());
    if n == 0 {
        return if radix == 8 { Some((0, digits)) } else { None };
    }
    let v = u64::from_str_radix(&digits[..n], radix).ok()?;
    Some((v, &digits[n..]))
}

/// Parses a size (`dt_opt_size`).
pub fn parse_size(v: &str) -> Result<i64> {
    let (num, mul) = match v.as_bytes().last() {
        Some(b't' | b'T') => (&v[..v.len() - 1], 1u64 << 40),
        Some(b'g' | b'G') => (&v[..v.len() - 1], 1 << 30),
        Some(b'm' | b'M') => (&v[..v.len() - 1], 1 << 20),
        Some(b'k' | b'K') => (&v[..v.len() - 1], 1 << 10),
        _ => (v, 1),
    };
    match c_number(num) {
        Some((n, "")) => n
            .checked_mul(mul)
            .filter(|&x| x <= i64::MAX as u64)
            .map(|x| x as i64)
            .ok_or_else(|| bad(v)),
        _ => Err(bad(v)),
    }
}

/// Parses a rate or time into nanoseconds (`dt_opt_rate`); `hz` gives the period of that frequency.
pub fn parse_rate(v: &str) -> Result<i64> {
    let (n, rest) = c_number(v).ok_or_else(|| bad(v))?;
    let mul: i64 = match rest.to_ascii_lowercase().as_str() {
        "" | "ns" | "nsec" => 1,
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" | "hour" => 3_600_000_000_000,
        "d" | "day" => 86_400_000_000_000,
        "hz" => 0,
        _ => return Err(bad(v)),
    };
    let n = i64::try_from(n).map_err(|_| bad(v))?;
    if mul == 0 {
        return Ok(if n == 0 { 0 } else { 1_000_000_000 / n });
    }
    n.checked_mul(mul).ok_or_else(|| bad(v))
}

fn parse_runtime(v: Option<&str>) -> Result<i64> {
    let Some(v) = v else { return Ok(0) };
    if v.is_empty() {
        return Ok(UNSET);
    }
    for (yes, no) in [
        ("yes", "no"),
        ("enable", "disable"),
        ("enabled", "disabled"),
        ("true", "false"),
        ("on", "off"),
        ("set", "unset"),
    ] {
        if v.eq_ignore_ascii_case(yes) {
            return Ok(1);
        }
        if v.eq_ignore_ascii_case(no) {
            return Ok(UNSET);
        }
    }
    match c_number(v) {
        Some((n, "")) if n <= i64::MAX as u64 => Ok(n as i64),
        _ => Err(bad(v)),
    }
}

impl Options {
    /// Looks an option up in the table.
    pub fn kind(name: &str) -> Option<(OptKind, bool)> {
        TABLE
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, k, d)| (*k, *d))
    }

    /// Sets an option from its textual value (`None` for a bare `-x name`). `active` says whether
    /// tracing is running, which forbids changing non-dynamic options.
    pub fn set(&mut self, name: &str, value: Option<&str>, active: bool) -> Result<()> {
        let Some(&(key, kind, dynamic)) = TABLE.iter().find(|(n, _, _)| *n == name) else {
            return Err(ConsumerError::BadOptionName(name.to_string()));
        };
        if active && !dynamic {
            return Err(ConsumerError::Active);
        }
        let need = |v: Option<&str>| v.map(str::to_string).ok_or_else(|| bad(""));
        let v = match kind {
            OptKind::Compile => {
                if let Some(s) = value {
                    self.strings.entry(key).or_default().push(s.to_string());
                }
                0
            }
            OptKind::CppArgs => {
                let words = need(value)?;
                let list = self.strings.entry(key).or_default();
                list.extend(words.split_ascii_whitespace().map(str::to_string));
                0
            }
            OptKind::Size => parse_size(&need(value)?)?,
            OptKind::Rate => parse_rate(&need(value)?)?,
            OptKind::Runtime => parse_runtime(value)?,
            OptKind::BufPolicy => match need(value)?.as_str() {
                "ring" => BUFPOLICY_RING,
                "fill" => BUFPOLICY_FILL,
                "switch" => BUFPOLICY_SWITCH,
                v => return Err(bad(v)),
            },
            OptKind::BufResize => match need(value)?.as_str() {
                "auto" => 0,
                "manual" => 1,
                v => return Err(bad(v)),
            },
            OptKind::Encoding => match need(value)?.as_str() {
                "ascii" => ENCODING_ASCII,
                "utf8" => ENCODING_UTF8,
                v => return Err(bad(v)),
            },
        };
        self.values.insert(key, v);
        self.explicit.push((key, value.map(str::to_string)));
        Ok(())
    }

    /// Every successful `set` in order, with its textual value (to hand on to the framework, which
    /// parses them with the same rules).
    pub fn explicit(&self) -> &[(&'static str, Option<String>)] {
        &self.explicit
    }

    /// The stored value (`UNSET` when unset), or an error for an unknown name.
    pub fn get(&self, name: &str) -> Result<i64> {
        self.values
            .get(name)
            .copied()
            .ok_or_else(|| ConsumerError::BadOptionName(name.to_string()))
    }

    /// The value of a known option; `UNSET` for names not in the table.
    pub fn value(&self, name: &str) -> i64 {
        self.values.get(name).copied().unwrap_or(UNSET)
    }

    /// Whether an option is set (any value but `UNSET`).
    pub fn is_set(&self, name: &str) -> bool {
        self.value(name) != UNSET
    }

    /// The last string given to a compile-time option, if any.
    pub fn string(&self, name: &str) -> Option<&str> {
        self.strings
            .get(name)
            .and_then(|v| v.last())
            .map(String::as_str)
    }

    /// Every string given to a compile-time option, in order (`-D`, `-U`, `-I` accumulate).
    pub fn strings(&self, name: &str) -> &[String] {
        self.strings.get(name).map_or(&[], Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_rates() {
        assert_eq!(parse_size("4m").unwrap(), 4 << 20);
        assert_eq!(parse_size("0x10").unwrap(), 16);
        assert_eq!(parse_size("2K").unwrap(), 2048);
        assert!(parse_size("4q").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999t").is_err());
        assert_eq!(parse_rate("10hz").unwrap(), 100_000_000);
        assert_eq!(parse_rate("1s").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate("250ms").unwrap(), 250_000_000);
        assert_eq!(parse_rate("500").unwrap(), 500);
        assert!(parse_rate("5parsecs").is_err());
    }

    #[test]
    fn runtime_values_and_errors() {
        let mut o = Options::default();
        assert!(!o.is_set("quiet"));
        o.set("quiet", None, false).unwrap();
        assert!(o.is_set("quiet"));
        o.set("quiet", Some("no"), false).unwrap();
        assert!(!o.is_set("quiet"));
        o.set("stackindent", Some("4"), true).unwrap();
        assert_eq!(o.get("stackindent").unwrap(), 4);
        assert_eq!(
            o.set("bufsize", Some("1m"), true),
            Err(ConsumerError::Active)
        );
        assert!(matches!(
            o.set("nosuch", None, false),
            Err(ConsumerError::BadOptionName(_))
        ));
        assert!(o.set("bufpolicy", Some("ring"), false).is_ok());
        o.set("aggpack", None, true).unwrap();
        assert!(o.is_set("aggpack"));
        o.set("aggpack", Some("no"), true).unwrap();
        assert!(!o.is_set("aggpack"));
        assert!(!o.is_set("encoding"));
        o.set("encoding", Some("utf8"), true).unwrap();
        assert_eq!(o.get("encoding").unwrap(), ENCODING_UTF8);
        o.set("encoding", Some("ascii"), false).unwrap();
        assert_eq!(o.get("encoding").unwrap(), ENCODING_ASCII);
        assert!(o.set("encoding", Some("latin1"), false).is_err());
        assert!(o.set("encoding", None, false).is_err());
        assert_eq!(o.get("bufpolicy").unwrap(), BUFPOLICY_RING);
        assert!(o.set("quiet", Some("maybe"), false).is_err());
        o.set("define", Some("A=1"), false).unwrap();
        o.set("define", Some("B"), false).unwrap();
        assert_eq!(o.strings("define"), ["A=1", "B"]);
        assert_eq!(o.string("define"), Some("B"));
        // cppargs: split at white space, accumulated, a value required.
        o.set("cppargs", Some(" -fno-show-column\t-DX=1 "), false)
            .unwrap();
        o.set("cppargs", Some("-UY"), false).unwrap();
        assert_eq!(o.strings("cppargs"), ["-fno-show-column", "-DX=1", "-UY"]);
        assert!(matches!(
            o.set("cppargs", None, false),
            Err(ConsumerError::BadOptionValue(_))
        ));
    }
}
