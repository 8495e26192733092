//! The `profile` provider on perf events: a [`ProfileDriver`] for the framework's profile provider
//! (which keeps probe names, units and the standing set) that enables `profile-N` as a cpu-clock
//! perf event on every online CPU and `tick-N` on the first one, each running the capture program
//! of the probe. Samples come back through the same session and delivery as the other Linux
//! probes, so a firing carries the interrupted thread's identity, arg0 = kernel PC (0 in user
//! mode), arg1 = user PC (0 in kernel mode), and its stacks.

use super::LinuxTracing;
use dtrace_framework::provider::ProviderError;
use dtrace_framework::providers::profile::{ProfileDriver, ProfileKind};
use dtrace_framework::records::ProbeInfo;

/// Drives the framework's profile probes from perf events of the shared session.
pub struct PerfProfileDriver {
    shared: LinuxTracing,
}

impl PerfProfileDriver {
    /// A driver enabling probes in `tracing`'s session.
    pub fn new(tracing: LinuxTracing) -> PerfProfileDriver {
        PerfProfileDriver { shared: tracing }
    }
}

impl ProfileDriver for PerfProfileDriver {
    fn start(
        &mut self,
        probe: &ProbeInfo,
        _kind: ProfileKind,
        _interval_ns: u64,
    ) -> Result<(), ProviderError> {
        // The catalogue parses the name with the framework's parser into the same kind and
        // interval, and the session attaches it.
        self.shared
            .lock()
            .enable(probe)
            .map_err(|reason| ProviderError::Enable {
                probe: format!("profile:::{}", probe.name),
                reason,
            })
    }

    fn stop(&mut self, probe: &ProbeInfo) {
        self.shared.lock().active.remove(&probe.id);
    }
}

/// Whether profile probes can run on perf events here: a cpu-clock event can be opened on a CPU
/// and a BPF map created (root, or the capabilities for both). Without it the framework's timers
/// stay in charge.
pub fn perf_profile_available() -> bool {
    crate::attach::cpu_clock_available() && crate::bpf_available()
}
