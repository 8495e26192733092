//! The `profile` provider's probes as perf events: `profile-N` fires on every CPU and `tick-N` on
//! one, at a rate or interval with DTrace's suffixes. Names and units are parsed by the framework's
//! profile provider (one parser for both the timer and the perf-event substrates). arg0 is the
//! kernel PC and arg1 the user PC of the interrupted context.

use super::{AttachPoint, Probe, ProbeArg, ProbeDesc};
use dtrace_framework::providers::profile::{parse_probe_name, ProfileKind};

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

/// The probe named `profile-N` or `tick-N`, if the name and rate are valid.
pub fn probe(name: &str) -> Option<Probe> {
    let (kind, period_ns) = parse_probe_name(name)?;
    let all_cpus = kind == ProfileKind::Profile;
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
    fn probes_take_the_framework_units() {
        let period = |n: &str| match probe(n).map(|p| p.attach) {
            Some(AttachPoint::Profile {
                period_ns,
                all_cpus,
            }) => Some((period_ns, all_cpus)),
            _ => None,
        };
        assert_eq!(period("profile-997"), Some((1_000_000_000 / 997, true)));
        assert_eq!(period("tick-10ms"), Some((10_000_000, false)));
        assert_eq!(period("tick-1sec"), Some((1_000_000_000, false)));
        assert_eq!(period("profile-5hz"), Some((200_000_000, true)));
        assert_eq!(period("tick-2m"), Some((120_000_000_000, false)));
        assert_eq!(period("tick-0"), None);
        assert_eq!(period("tick-x"), None);
        assert_eq!(period("tick-99999999999999999999d"), None);
        assert_eq!(period("tick-1ns"), None);
        assert_eq!(period("bogus-1"), None);
    }
}
