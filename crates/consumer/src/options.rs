//! DTrace's options (`dtrace_setopt`/`dtrace_getopt`, `-x name=value`, `#pragma D option`): the table of
//! known names, how each parses its value (sizes with `k/m/g/t`, rates with `ns/us/ms/s/m/h/d/hz`,
//! booleans with `yes/no, on/off, ...`, policies), defaults, and which may change while tracing.

use std::collections::BTreeMap;

use dtrace_dif::optval::parse_c_unsigned;
pub use dtrace_dif::optval::{parse_rate, parse_size, OptKind, OPTIONS};

use crate::error::{ConsumerError, Result};

/// The value DTrace stores for an unset option (`DTRACEOPT_UNSET`).
pub const UNSET: i64 = -2;

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
            values: OPTIONS.iter().map(|(n, _, _)| (*n, UNSET)).collect(),
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
            // DTrace for Linux's `_dtrace_ustackframes`: what `ustack()` records when unset.
            ("ustackframes", 100),
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

/// A size or rate option's value (`dt_opt_size`, `dt_opt_rate`): required, parsed by `parse`.
fn sized(parse: fn(&str) -> Option<u64>, v: Option<&str>) -> Result<i64> {
    let v = v.ok_or_else(|| bad(""))?;
    parse(v).map(|n| n as i64).ok_or_else(|| bad(v))
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
    match parse_c_unsigned(v) {
        Some(n) if n <= i64::MAX as u64 => Ok(n as i64),
        _ => Err(bad(v)),
    }
}

impl Options {
    /// Looks an option up in the table.
    pub fn kind(name: &str) -> Option<(OptKind, bool)> {
        dtrace_dif::optval::option_kind(name)
    }

    /// Every option name, in the table's order (for documentation and its tests).
    pub fn names() -> impl Iterator<Item = &'static str> {
        dtrace_dif::optval::OPTIONS.iter().map(|(n, _, _)| *n)
    }

    /// Sets an option from its textual value (`None` for a bare `-x name`). `active` says whether
    /// tracing is running, which forbids changing non-dynamic options.
    pub fn set(&mut self, name: &str, value: Option<&str>, active: bool) -> Result<()> {
        let Some(&(key, kind, dynamic)) = OPTIONS.iter().find(|(n, _, _)| *n == name) else {
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
            // The smallest string holds DTrace's NUL string; a string's size is a 32-bit count.
            OptKind::Size if key == "strsize" => match sized(parse_size, value)? {
                n if (2..=u32::MAX as i64).contains(&n) => n,
                _ => return Err(bad(value.unwrap_or(""))),
            },
            OptKind::Size => sized(parse_size, value)?,
            OptKind::Rate => sized(parse_rate, value)?,
            // The kernel's verifier log level bits (1, 2, 4); no value: DTrace for Linux's.
            OptKind::Runtime if key == "bpflog" => match parse_runtime(value)? {
                n if n == UNSET || (0..=7).contains(&n) => n,
                _ => return Err(bad(value.unwrap_or(""))),
            },
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
            OptKind::OFormat => crate::oformat::OFormat::parse(&need(value)?)? as i64,
            OptKind::Text => {
                let v = need(value)?;
                if v.is_empty() {
                    return Err(bad(""));
                }
                self.strings.insert(key, vec![v]);
                0
            }
            OptKind::Choice(words) => {
                let v = need(value)?;
                if !words.contains(&v.as_str()) {
                    return Err(bad(&v));
                }
                self.strings.entry(key).or_default().push(v);
                0
            }
            OptKind::LockMem => match value {
                // RLIM_INFINITY, as DTrace stores it.
                Some("unlimited") => i64::MAX,
                v => sized(parse_size, v)?,
            },
            OptKind::Unsupported(what) => {
                return Err(ConsumerError::NotSupported(what.to_string()))
            }
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
        // Words from a fixed set, and strsize's bounds.
        o.set("stdc", Some("s"), false).unwrap();
        assert_eq!(o.string("stdc"), Some("s"));
        assert!(o.set("stdc", Some("X"), false).is_err());
        assert!(o.set("linkmode", Some("foo"), false).is_err());
        assert!(o.set("strsize", Some("1"), false).is_err());
        o.set("strsize", Some("2"), false).unwrap();
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
