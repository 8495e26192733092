//! The `profile` provider: `profile-N` fires on every CPU and `tick-N` on one, at a rate or interval
//! with DTrace's suffixes (`ns`, `us`, `ms`, `s`, `m`, `h`, `d`, `hz`; a bare number is in hertz).
//! arg0 is the kernel PC and arg1 the user PC of the interrupted context.

use super::{AttachPoint, Probe, ProbeArg, ProbeDesc};

/// The rates listed by `dtrace -l` (any other is created on demand, as DTrace does).
const LISTED: &[&str] = &[
    "profile-97",
    "profile-199",
    "profile-499",
    "profile-997",
    "profile-1999",
    "profile-4001",
    "profile-4999",
    "tick-1",
    "tick-10",
    "tick-100",
    "tick-500",
    "tick-1000",
    "tick-5000",
    "tick-1sec",
    "tick-10sec",
];

/// Shortest period accepted (DTrace's profile provider limit is 200 microseconds for profile-N on
/// many systems; we accept down to 100 us so a typo cannot swamp the machine).
pub const MIN_PERIOD_NS: u64 = 100_000;

/// Parses `N[suffix]` into a period in nanoseconds.
pub fn parse_rate(s: &str) -> Option<u64> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok().filter(|n| *n > 0)?;
    let per_unit: u64 = match unit {
        "" | "hz" => return Some(1_000_000_000 / n).filter(|p| *p > 0),
        "ns" | "nsec" => 1,
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" | "hour" => 3_600_000_000_000,
        "d" | "day" => 86_400_000_000_000,
        _ => return None,
    };
    n.checked_mul(per_unit)
}

/// The probe named `profile-N` or `tick-N`, if the name and rate are valid.
pub fn probe(name: &str) -> Option<Probe> {
    let (all_cpus, rate) = if let Some(r) = name.strip_prefix("profile-") {
        (true, r)
    } else {
        (false, name.strip_prefix("tick-")?)
    };
    let period_ns = parse_rate(rate)?;
    if period_ns < MIN_PERIOD_NS {
        return None;
    }
    let pc = |n: &str| ProbeArg {
        native: n.into(),
        dtype: "uint64_t".into(),
        copy: None,
    };
    Some(Probe {
        desc: ProbeDesc::new("profile", "", "", name),
        args: vec![pc("kernel pc"), pc("user pc")],
        attach: AttachPoint::Profile {
            period_ns,
            all_cpus,
        },
    })
}

/// The listed profile probes.
pub fn listed_probes() -> Vec<Probe> {
    LISTED.iter().filter_map(|n| probe(n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_with_dtrace_suffixes() {
        assert_eq!(parse_rate("997"), Some(1_000_000_000 / 997));
        assert_eq!(parse_rate("10ms"), Some(10_000_000));
        assert_eq!(parse_rate("1sec"), Some(1_000_000_000));
        assert_eq!(parse_rate("5hz"), Some(200_000_000));
        assert_eq!(parse_rate("0"), None);
        assert_eq!(parse_rate("x"), None);
        assert_eq!(parse_rate("99999999999999999999d"), None);
        assert!(probe("profile-997").is_some());
        assert!(probe("tick-1ns").is_none());
        assert!(probe("bogus-1").is_none());
    }
}
