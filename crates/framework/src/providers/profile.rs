//! The `profile` provider: `profile-N` probes fire on every traced CPU and `tick-N` probes on one CPU,
//! every interval N, written as in DTrace with a unit suffix (`ns`, `nsec`, `us`, `usec`, `ms`, `msec`,
//! `s`, `sec`, `m`, `min`, `h`, `hour`, `d`, `day`, `hz`; a bare number is a frequency in hertz).
//! Probes are created on demand when a description names them, plus DTrace's standing set
//! (`profile-97` ... `profile-4999`, `tick-1` ... `tick-5000`). Intervals under 200us are refused, as
//! DTrace does. Probe names, units and the standing set live here, and so does the way probes fire
//! when nothing better is available: timers polled by [`crate::Framework::poll`], which fires every
//! expiration that has passed (at most [`MAX_CATCHUP`] per probe per poll) in the consumer's context.
//! An OS layer that can interrupt the CPUs (the Linux provider, on perf events) installs a
//! [`ProfileDriver`] with [`crate::Framework::set_profile_driver`]; enabled probes then fire from it,
//! with the interrupted thread's context and program counters.

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

/// Fires enabled profile probes from outside the framework (perf events on Linux). The provider
/// keeps naming and parsing; the driver gets each probe with its kind and interval when it is
/// enabled, and must deliver its firings itself (with the probe's id).
pub trait ProfileDriver: Send {
    /// Starts firing `probe` every `interval_ns` nanoseconds, on every CPU (`Profile`) or on one
    /// (`Tick`).
    fn start(
        &mut self,
        probe: &ProbeInfo,
        kind: ProfileKind,
        interval_ns: u64,
    ) -> Result<(), ProviderError>;
    /// Stops firing `probe`.
    fn stop(&mut self, probe: &ProbeInfo);
}

#[derive(Debug, Clone)]
struct Timer {
    kind: ProfileKind,
    interval: u64,
    enabled: bool,
    next: Option<u64>,
}

/// The `profile` provider.
#[derive(Default)]
pub struct ProfileProvider {
    timers: HashMap<u32, Timer>,
    /// The CPU `tick-N` probes fire on.
    pub tick_cpu: u32,
    driver: Option<Box<dyn ProfileDriver>>,
}

impl std::fmt::Debug for ProfileProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfileProvider")
            .field("timers", &self.timers)
            .field("tick_cpu", &self.tick_cpu)
            .field("driver", &self.driver.is_some())
            .finish()
    }
}

impl ProfileProvider {
    /// A provider whose tick probes fire on CPU 0, from timers.
    pub fn new() -> ProfileProvider {
        ProfileProvider::default()
    }

    /// A provider whose enabled probes fire from `driver` instead of timers.
    pub fn with_driver(driver: Box<dyn ProfileDriver>) -> ProfileProvider {
        ProfileProvider {
            driver: Some(driver),
            ..ProfileProvider::default()
        }
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
        // Probes created by an earlier provider of this name (before a driver was installed) are
        // known by their names alone.
        let parsed = match self.timers.get(&probe.id) {
            Some(t) => Some((t.kind, t.interval)),
            None => parse_probe_name(&probe.name),
        };
        let Some((kind, interval)) = parsed else {
            return Err(ProviderError::Enable {
                probe: format!("profile:::{}", probe.name),
                reason: "not a profile probe".into(),
            });
        };
        if let Some(d) = self.driver.as_mut() {
            return d.start(probe, kind, interval);
        }
        let t = self.timers.entry(probe.id).or_insert(Timer {
            kind,
            interval,
            enabled: false,
            next: None,
        });
        t.enabled = true;
        t.next = None;
        Ok(())
    }

    fn disable(&mut self, probe: &ProbeInfo) {
        if let Some(d) = self.driver.as_mut() {
            d.stop(probe);
        }
        if let Some(t) = self.timers.get_mut(&probe.id) {
            t.enabled = false;
            t.next = None;
        }
    }

    fn poll(&mut self, now: u64, ncpus: u32, due: &mut Vec<(u32, u32, u64)>) {
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
            for k in 0..expirations.min(MAX_CATCHUP) {
                let at = next.saturating_add(k.saturating_mul(t.interval));
                match t.kind {
                    ProfileKind::Tick => due.push((id, self.tick_cpu, at)),
                    ProfileKind::Profile => due.extend((0..ncpus).map(|c| (id, c, at))),
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
        assert_eq!(
            due,
            vec![
                (7, 0, 1100),
                (7, 0, 1200),
                (7, 0, 1300),
                (8, 0, 1250),
                (8, 1, 1250)
            ]
        );
        due.clear();
        p.poll(1400, 2, &mut due);
        assert_eq!(due, vec![(7, 0, 1400)]);
    }
}
