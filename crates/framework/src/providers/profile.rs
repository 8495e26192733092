//! The `profile` provider: `profile-N` probes fire on every traced CPU and `tick-N` probes on one CPU,
//! every interval N, written as in DTrace with a unit suffix (`ns`, `nsec`, `us`, `usec`, `ms`, `msec`,
//! `s`, `sec`, `m`, `min`, `h`, `hour`, `d`, `day`, `hz`; a bare number is a frequency in hertz).
//! Probes are created on demand when a description names them, plus DTrace's standing set
//! (`profile-97` ... `profile-4999`, `tick-1` ... `tick-5000`). Intervals under 200us are refused, as
//! DTrace does. Here the timers are polled: [`crate::Framework::poll`] fires every expiration that has
//! passed (at most [`MAX_CATCHUP`] per probe per poll; the Linux provider will move this onto perf events).

use crate::options::{time_suffix, NANOSEC};
use crate::provider::{
    Attribute, DepClass, ProbeSink, Provider, ProviderAttributes, ProviderError, Stability,
};
use crate::records::ProbeInfo;
use dtrace_dif::program::ProbeDesc;
use std::collections::HashMap;

/// Smallest interval accepted (`profile_interval_min`: 5000 Hz).
pub const INTERVAL_MIN: u64 = NANOSEC / 5000;
/// Most expirations of one probe fired by one poll; later ones are skipped.
pub const MAX_CATCHUP: u64 = 10_000;

const PROFILE_RATES: &[u64] = &[97, 199, 499, 997, 1999, 4001, 4999];
const TICK_RATES: &[u64] = &[1, 10, 100, 500, 1000, 5000];

/// Which kind of profile probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileKind {
    /// `profile-N`: every CPU.
    Profile,
    /// `tick-N`: one CPU.
    Tick,
}

/// Parses a profile probe name into its kind and interval in nanoseconds, as `profile_provide` does.
pub fn parse_probe_name(name: &str) -> Option<(ProfileKind, u64)> {
    let (kind, rest) = if let Some(r) = name.strip_prefix("profile-") {
        (ProfileKind::Profile, r)
    } else if let Some(r) = name.strip_prefix("tick-") {
        (ProfileKind::Tick, r)
    } else {
        return None;
    };
    let digits_end = rest
        .bytes()
        .rposition(|c| c.is_ascii_digit())
        .map(|p| p + 1)?;
    let (digits, suffix) = rest.split_at(digits_end);
    if !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let val: u64 = digits.parse().ok()?;
    if val == 0 {
        return None;
    }
    let mult = if suffix.is_empty() {
        0
    } else {
        time_suffix(suffix)?
    };
    let interval = if mult == 0 {
        NANOSEC / val
    } else {
        val.checked_mul(mult)?
    };
    if interval < INTERVAL_MIN {
        return None;
    }
    Some((kind, interval))
}

#[derive(Debug, Clone)]
struct Timer {
    kind: ProfileKind,
    interval: u64,
    enabled: bool,
    next: Option<u64>,
}

/// The `profile` provider.
#[derive(Debug, Default)]
pub struct ProfileProvider {
    timers: HashMap<u32, Timer>,
    /// The CPU `tick-N` probes fire on.
    pub tick_cpu: u32,
}

impl ProfileProvider {
    /// A provider whose tick probes fire on CPU 0.
    pub fn new() -> ProfileProvider {
        ProfileProvider::default()
    }

    fn create(&mut self, sink: &mut ProbeSink<'_>, name: &str) {
        if let Some((kind, interval)) = parse_probe_name(name) {
            let id = sink.create("", "", name);
            self.timers.entry(id).or_insert(Timer {
                kind,
                interval,
                enabled: false,
                next: None,
            });
        }
    }
}

impl Provider for ProfileProvider {
    fn name(&self) -> &str {
        "profile"
    }

    fn attributes(&self) -> ProviderAttributes {
        let evolving = Attribute::new(Stability::Evolving, Stability::Evolving, DepClass::Common);
        let unstable = Attribute::new(Stability::Unstable, Stability::Unstable, DepClass::Unknown);
        ProviderAttributes {
            provider: evolving,
            module: unstable,
            function: unstable,
            name: evolving,
            args: evolving,
        }
    }

    fn provide(&mut self, desc: Option<&ProbeDesc>, sink: &mut ProbeSink<'_>) {
        match desc {
            None => {
                for r in PROFILE_RATES {
                    self.create(sink, &format!("profile-{r}"));
                }
                for r in TICK_RATES {
                    self.create(sink, &format!("tick-{r}"));
                }
            }
            Some(d) => {
                if d.module.is_empty() && d.function.is_empty() && !crate::glob::is_glob(&d.name) {
                    self.create(sink, &d.name.clone());
                }
            }
        }
    }

    fn enable(&mut self, probe: &ProbeInfo) -> Result<(), ProviderError> {
        match self.timers.get_mut(&probe.id) {
            Some(t) => {
                t.enabled = true;
                t.next = None;
                Ok(())
            }
            None => Err(ProviderError::Enable {
                probe: format!("profile:::{}", probe.name),
                reason: "not a profile probe".into(),
            }),
        }
    }

    fn disable(&mut self, probe: &ProbeInfo) {
        if let Some(t) = self.timers.get_mut(&probe.id) {
            t.enabled = false;
            t.next = None;
        }
    }

    fn poll(&mut self, now: u64, ncpus: u32, due: &mut Vec<(u32, u32)>) {
        let mut ids: Vec<u32> = self
            .timers
            .iter()
            .filter(|(_, t)| t.enabled)
            .map(|(&id, _)| id)
            .collect();
        ids.sort_unstable();
        for id in ids {
            let Some(t) = self.timers.get_mut(&id) else {
                continue;
            };
            let next = *t.next.get_or_insert(now.saturating_add(t.interval));
            if now < next {
                continue;
            }
            let expirations = (now - next) / t.interval + 1;
            for _ in 0..expirations.min(MAX_CATCHUP) {
                match t.kind {
                    ProfileKind::Tick => due.push((id, self.tick_cpu)),
                    ProfileKind::Profile => due.extend((0..ncpus).map(|c| (id, c))),
                }
            }
            t.next = Some(next.saturating_add(expirations.saturating_mul(t.interval)));
        }
    }

    fn next_deadline(&self) -> Option<u64> {
        self.timers
            .values()
            .filter(|t| t.enabled)
            .map(|t| t.next.unwrap_or(0))
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit() {
        use ProfileKind::*;
        let cases: &[(&str, Option<(ProfileKind, u64)>)] = &[
            ("tick-1sec", Some((Tick, NANOSEC))),
            ("tick-1s", Some((Tick, NANOSEC))),
            ("tick-10ms", Some((Tick, 10_000_000))),
            ("tick-10msec", Some((Tick, 10_000_000))),
            ("tick-500us", Some((Tick, 500_000))),
            ("tick-500usec", Some((Tick, 500_000))),
            ("tick-300000ns", Some((Tick, 300_000))),
            ("tick-300000nsec", Some((Tick, 300_000))),
            ("tick-2m", Some((Tick, 120 * NANOSEC))),
            ("tick-2min", Some((Tick, 120 * NANOSEC))),
            ("tick-1h", Some((Tick, 3600 * NANOSEC))),
            ("tick-1hour", Some((Tick, 3600 * NANOSEC))),
            ("tick-1d", Some((Tick, 86400 * NANOSEC))),
            ("tick-1day", Some((Tick, 86400 * NANOSEC))),
            ("profile-97", Some((Profile, NANOSEC / 97))),
            ("profile-997hz", Some((Profile, NANOSEC / 997))),
            ("tick-5000", Some((Tick, INTERVAL_MIN))),
            ("tick-5001", None),
            ("tick-10ns", None),
            ("tick-0", None),
            ("tick-", None),
            ("tick-1.5s", None),
            ("tick-1fortnight", None),
            ("tock-1", None),
            ("tick-1SEC", Some((Tick, NANOSEC))),
        ];
        for (name, want) in cases {
            assert_eq!(parse_probe_name(name), *want, "{name}");
        }
    }

    #[test]
    fn polling_fires_each_expiration() {
        let mut p = ProfileProvider::new();
        p.timers.insert(
            7,
            Timer {
                kind: ProfileKind::Tick,
                interval: 100,
                enabled: true,
                next: None,
            },
        );
        p.timers.insert(
            8,
            Timer {
                kind: ProfileKind::Profile,
                interval: 250,
                enabled: true,
                next: None,
            },
        );
        let mut due = Vec::new();
        p.poll(1000, 2, &mut due);
        assert!(due.is_empty());
        assert_eq!(p.next_deadline(), Some(1100));
        p.poll(1099, 2, &mut due);
        assert!(due.is_empty());
        p.poll(1350, 2, &mut due);
        assert_eq!(due, vec![(7, 0), (7, 0), (7, 0), (8, 0), (8, 1)]);
        due.clear();
        p.poll(1400, 2, &mut due);
        assert_eq!(due, vec![(7, 0)]);
    }
}
