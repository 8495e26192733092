//! Framework options: DTrace's runtime options that govern probe context (buffer sizes and policies,
//! rates, speculation counts, string and stack sizes, `destructive`), their defaults, and DTrace's value
//! syntax (sizes `4m`, `512k`, `0x1000`; times `10ms`, `1sec`, `97hz`, a bare number being nanoseconds) with
//! its error messages. Consumer-side options (`quiet`, `flowindent`, `aggsort*`, ...) are not held here:
//! [`Options::set`] answers [`OptionError::UnknownOption`] for them so the consumer can handle its own.

use thiserror::Error;

/// Errors setting an option, with libdtrace's messages (`EDT_BADOPTNAME`, `EDT_BADOPTVAL`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OptionError {
    /// No framework option has this name.
    #[error("Invalid option name")]
    UnknownOption(String),
    /// The value does not parse or is out of range for this option.
    #[error("Invalid value for specified option")]
    BadValue {
        /// Option name.
        option: String,
        /// Offending value.
        value: String,
    },
    /// The option may not change once tracing is active.
    #[error("Operation illegal when tracing is active")]
    BadContext(String),
}

/// `bufpolicy`: what a full principal buffer does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufPolicy {
    /// Two buffers per CPU; the consumer switches them; records that do not fit are dropped.
    Switch,
    /// Record until the buffer is full, then drop (and report the buffer filled).
    Fill,
    /// Overwrite the oldest records.
    Ring,
}

/// `bufresize`: what happens when a buffer of the requested size cannot be allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufResize {
    /// Halve the size until it can be allocated.
    Auto,
    /// Fail.
    Manual,
}

/// Nanoseconds per second.
pub use dtrace_dif::optval::NANOSEC;

/// The framework's options with DTrace's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `bufsize`: bytes per CPU principal buffer (default 4m).
    pub bufsize: u64,
    /// `bufpolicy` (default switch).
    pub bufpolicy: BufPolicy,
    /// `bufresize` (default auto).
    pub bufresize: BufResize,
    /// `aggsize`: bytes per CPU aggregation buffer (default 4m).
    pub aggsize: u64,
    /// `aggrate`: nanoseconds between aggregation snapshots (default 1s).
    pub aggrate: u64,
    /// `switchrate`: nanoseconds between buffer switches (default 1s).
    pub switchrate: u64,
    /// `statusrate`: nanoseconds between status checks (default 1s).
    pub statusrate: u64,
    /// `cleanrate`: nanoseconds between speculation cleanings (default 101hz).
    pub cleanrate: u64,
    /// `dynvarsize`: bytes of dynamic variable space (default 1m).
    pub dynvarsize: u64,
    /// `strsize`: the most characters of a string, its NUL not counted (default 256); see
    /// [`Options::string_storage`].
    pub strsize: u64,
    /// `nspec`: number of speculation buffers (default 1).
    pub nspec: u64,
    /// `specsize`: bytes per CPU per speculation buffer (default 32k).
    pub specsize: u64,
    /// `cpu`: trace only this CPU (default: all).
    pub cpu: Option<u32>,
    /// `destructive`: allow destructive actions (default off; `-w`).
    pub destructive: bool,
    /// `stackframes` (default 20).
    pub stackframes: u64,
    /// `ustackframes` (default 20).
    pub ustackframes: u64,
    /// `jstackframes` (default 50).
    pub jstackframes: u64,
    /// `jstackstrsize` (default 512).
    pub jstackstrsize: u64,
    /// `temporal`: the consumer prints the records of all CPUs in time order (see the consumer's
    /// `temporal` module); the framework records as usual.
    pub temporal: bool,
    /// `zone`: restrict to a zone (accepted and ignored on Linux).
    pub zone: Option<String>,
    /// `grabanon`/anonymous tracing (accepted; not applicable).
    pub grabanon: bool,
    /// `scratchsize`: bytes of scratch space (`alloca()` and string temporaries) per probe firing
    /// (default 1m), rounded up to a multiple of 8 bytes.
    pub scratchsize: u64,
}

impl Options {
    /// Bytes a string takes in a record or variable: `strsize` characters and the NUL, as DTrace for
    /// Linux stores them (`strsize=5` traces `"abcdefgh"` as the six bytes `abcde\0`).
    pub fn string_storage(&self) -> u64 {
        self.strsize.saturating_add(1)
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            bufsize: 4 << 20,
            bufpolicy: BufPolicy::Switch,
            bufresize: BufResize::Auto,
            aggsize: 4 << 20,
            aggrate: NANOSEC,
            switchrate: NANOSEC,
            statusrate: NANOSEC,
            cleanrate: NANOSEC / 101,
            dynvarsize: 1 << 20,
            strsize: 256,
            nspec: 1,
            specsize: 32 << 10,
            cpu: None,
            destructive: false,
            stackframes: 20,
            ustackframes: 20,
            jstackframes: 50,
            jstackstrsize: 512,
            temporal: false,
            zone: None,
            grabanon: false,
            scratchsize: 1 << 20,
        }
    }
}

/// Largest `strsize`, `stackframes` and similar counts we accept, to keep allocations bounded.
const MAX_STRSIZE: u64 = 1 << 20;
const MAX_FRAMES: u64 = 1 << 16;
const MAX_NSPEC: u64 = 1 << 16;
/// Smallest and largest clean rates (DTrace clamps `cleanrate` the same way).
const CLEANRATE_MIN: u64 = 200_000;
const CLEANRATE_MAX: u64 = 60 * NANOSEC;

/// The names of every option [`Options::set`] knows.
pub const FRAMEWORK_OPTIONS: &[&str] = &[
    "aggrate",
    "aggsize",
    "bufpolicy",
    "bufresize",
    "bufsize",
    "cleanrate",
    "cpu",
    "destructive",
    "dynvarsize",
    "grabanon",
    "jstackframes",
    "jstackstrsize",
    "nspec",
    "scratchsize",
    "specsize",
    "stackframes",
    "statusrate",
    "strsize",
    "switchrate",
    "temporal",
    "ustackframes",
    "zone",
];

/// Options that may still change while tracing is active (DTrace lets these be set by `setopt()`).
pub const RUNTIME_OPTIONS: &[&str] = &["aggrate", "switchrate", "statusrate", "cleanrate"];

pub use dtrace_dif::optval::{
    parse_c_unsigned, parse_rate, parse_size, time_suffix, TIME_SUFFIXES,
};

impl Options {
    /// Sets option `name` to `value` (`None` for a bare `-x name`), with DTrace's parsing and errors.
    pub fn set(&mut self, name: &str, value: Option<&str>) -> Result<(), OptionError> {
        let bad = || OptionError::BadValue {
            option: name.to_string(),
            value: value.unwrap_or("").to_string(),
        };
        let size = || value.and_then(parse_size).ok_or_else(bad);
        let rate = || value.and_then(parse_rate).ok_or_else(bad);
        let count = |max: u64| {
            value
                .and_then(parse_c_unsigned)
                .filter(|&v| v <= max)
                .ok_or_else(bad)
        };
        match name {
            "bufsize" => self.bufsize = size()?,
            "aggsize" => self.aggsize = size()?,
            "dynvarsize" => self.dynvarsize = size()?,
            "specsize" => self.specsize = size()?,
            "strsize" => {
                let v = size()?;
                if v == 0 || v > MAX_STRSIZE {
                    return Err(bad());
                }
                self.strsize = v;
            }
            "jstackstrsize" => {
                let v = size()?;
                if v > MAX_STRSIZE {
                    return Err(bad());
                }
                self.jstackstrsize = v;
            }
            "aggrate" => self.aggrate = rate()?,
            "switchrate" => self.switchrate = rate()?,
            "statusrate" => self.statusrate = rate()?,
            "cleanrate" => self.cleanrate = rate()?.clamp(CLEANRATE_MIN, CLEANRATE_MAX),
            "nspec" => self.nspec = count(MAX_NSPEC)?,
            "scratchsize" => {
                let v = size()?;
                // DTrace rounds its region (the size plus an 8-byte header) to 8 bytes; the VM
                // keeps no header, so the usable bytes are the size rounded up to 8.
                self.scratchsize = v.div_ceil(8) * 8;
            }
            "stackframes" => self.stackframes = count(MAX_FRAMES)?.max(1),
            "ustackframes" => self.ustackframes = count(MAX_FRAMES)?.max(1),
            "jstackframes" => self.jstackframes = count(MAX_FRAMES)?.max(1),
            "cpu" => self.cpu = Some(count(u32::MAX as u64)? as u32),
            "bufpolicy" => {
                self.bufpolicy = match value {
                    Some("switch") => BufPolicy::Switch,
                    Some("fill") => BufPolicy::Fill,
                    Some("ring") => BufPolicy::Ring,
                    _ => return Err(bad()),
                }
            }
            "bufresize" => {
                self.bufresize = match value {
                    Some("auto") => BufResize::Auto,
                    Some("manual") => BufResize::Manual,
                    _ => return Err(bad()),
                }
            }
            "destructive" => self.destructive = flag(value).ok_or_else(bad)?,
            "temporal" => self.temporal = flag(value).ok_or_else(bad)?,
            "grabanon" => self.grabanon = flag(value).ok_or_else(bad)?,
            "zone" => self.zone = Some(value.ok_or_else(bad)?.to_string()),
            _ => return Err(OptionError::UnknownOption(name.to_string())),
        }
        Ok(())
    }

    /// The current value of option `name` as DTrace's `dtrace_getopt` reports it (sizes in bytes, rates in
    /// nanoseconds, booleans 0/1, policies as their `DTRACEOPT_*` numbers), or `None` for an unknown name.
    pub fn get(&self, name: &str) -> Option<i64> {
        let v = match name {
            "bufsize" => self.bufsize,
            "aggsize" => self.aggsize,
            "dynvarsize" => self.dynvarsize,
            "specsize" => self.specsize,
            "strsize" => self.strsize,
            "jstackstrsize" => self.jstackstrsize,
            "aggrate" => self.aggrate,
            "switchrate" => self.switchrate,
            "statusrate" => self.statusrate,
            "cleanrate" => self.cleanrate,
            "nspec" => self.nspec,
            "scratchsize" => self.scratchsize,
            "stackframes" => self.stackframes,
            "ustackframes" => self.ustackframes,
            "jstackframes" => self.jstackframes,
            "cpu" => return Some(self.cpu.map(i64::from).unwrap_or(-1)),
            "bufpolicy" => match self.bufpolicy {
                BufPolicy::Ring => 0,
                BufPolicy::Fill => 1,
                BufPolicy::Switch => 2,
            },
            "bufresize" => match self.bufresize {
                BufResize::Auto => 0,
                BufResize::Manual => 1,
            },
            "destructive" => self.destructive as u64,
            "temporal" => self.temporal as u64,
            "grabanon" => self.grabanon as u64,
            "zone" => return Some(self.zone.is_some() as i64),
            _ => return None,
        };
        Some(v as i64)
    }
}

/// A boolean option's value: no value or "1"/"yes"/"true" set it, "0"/"no"/"false" clear it.
fn flag(value: Option<&str>) -> Option<bool> {
    match value {
        None | Some("") | Some("1") | Some("yes") | Some("true") | Some("on") => Some(true),
        Some("0") | Some("no") | Some("false") | Some("off") => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratchsize_is_rounded_to_8_bytes() {
        let mut o = Options::default();
        assert_eq!(o.get("scratchsize"), Some(1 << 20));
        o.set("scratchsize", Some("64")).unwrap();
        assert_eq!(o.get("scratchsize"), Some(64));
        o.set("scratchsize", Some("9")).unwrap();
        assert_eq!(o.get("scratchsize"), Some(16));
        o.set("scratchsize", Some("0")).unwrap();
        assert_eq!(o.get("scratchsize"), Some(0));
        assert!(o.set("scratchsize", Some("1q")).is_err());
    }

    #[test]
    fn set_and_get() {
        let mut o = Options::default();
        o.set("bufsize", Some("8m")).unwrap();
        assert_eq!(o.get("bufsize"), Some(8 << 20));
        o.set("bufpolicy", Some("ring")).unwrap();
        assert_eq!(o.bufpolicy, BufPolicy::Ring);
        o.set("destructive", None).unwrap();
        assert!(o.destructive);
        o.set("switchrate", Some("10hz")).unwrap();
        assert_eq!(o.switchrate, 100_000_000);
        o.set("cleanrate", Some("1ns")).unwrap();
        assert_eq!(o.cleanrate, CLEANRATE_MIN);
        assert_eq!(o.get("cpu"), Some(-1));
        o.set("cpu", Some("1")).unwrap();
        assert_eq!(o.cpu, Some(1));

        let e = o.set("bufpolicy", Some("wrap")).unwrap_err();
        assert_eq!(e.to_string(), "Invalid value for specified option");
        let e = o.set("bufsize", None).unwrap_err();
        assert!(matches!(e, OptionError::BadValue { .. }));
        let e = o.set("strsize", Some("0")).unwrap_err();
        assert!(matches!(e, OptionError::BadValue { .. }));
        let e = o.set("quiet", None).unwrap_err();
        assert_eq!(e, OptionError::UnknownOption("quiet".into()));
        assert_eq!(e.to_string(), "Invalid option name");
        for name in FRAMEWORK_OPTIONS {
            assert!(o.get(name).is_some(), "{name}");
        }
    }
}
