//! Helpers shared by the test suites of the workspace.
//!
//! Owns one policy: how a test that needs something from the machine (root, BPF, tracefs, ptrace, a
//! Debian tool) decides to skip. A test calls [`skip_unless`] with whether its need is met and why not;
//! when `DTRACE_TEST_REQUIRE_KERNEL=1` is set (as `.ci/run` does) a skip is a failure instead.
//! Besides, the tests' common tools: building C with gcc ([`compile_c`]) and the fuzz smokes'
//! generator ([`XorShift`]), a strict OpenMetrics parser ([`openmetrics`]) and
//! manual-page rendering ([`man`]). It is only ever a dev-dependency.

mod cc;
pub mod man;
pub mod openmetrics;

pub use cc::{compile_c, link_c, CSource};

/// Name of the environment variable that turns skips into failures.
pub const REQUIRE_ENV: &str = "DTRACE_TEST_REQUIRE_KERNEL";

/// Whether skips are forbidden in this run.
pub fn skips_forbidden() -> bool {
    std::env::var(REQUIRE_ENV)
        .map(|v| v == "1")
        .unwrap_or(false)
}

/// Returns `true` when the test may go on. When `available` is `false`, prints why the test is skipped
/// and returns `false`; under `DTRACE_TEST_REQUIRE_KERNEL=1` it panics with the reason instead.
pub fn skip_unless(available: bool, test: &str, reason: &str) -> bool {
    if available {
        return true;
    }
    if skips_forbidden() {
        panic!("{test}: cannot run ({reason}) and {REQUIRE_ENV}=1 forbids skipping");
    }
    eprintln!("SKIP {test}: {reason}");
    false
}

/// A kernel feature a test may need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelFeature {
    /// kprobes (the kprobe PMU or `kprobe_events`).
    Kprobes,
    /// fentry/fexit: BTF and an ftrace function tracer (BPF trampolines).
    Fentry,
    /// The kernel's BTF (`/sys/kernel/btf/vmlinux`).
    Btf,
    /// uprobes (the uprobe PMU or `uprobe_events`).
    Uprobes,
}

/// Name of the environment variable listing the kernel features a run expects (comma-separated:
/// `kprobes,fentry,btf,uprobes`), as `scripts/vmtest` sets it for its guest: a test needing a listed
/// feature the kernel seems to lack fails instead of skipping, so a broken detection cannot hide a test.
pub const EXPECT_ENV: &str = "DTRACE_TEST_KERNEL_HAS";

impl KernelFeature {
    /// The name used in [`EXPECT_ENV`] and in skip messages.
    pub fn name(self) -> &'static str {
        match self {
            KernelFeature::Kprobes => "kprobes",
            KernelFeature::Fentry => "fentry",
            KernelFeature::Btf => "btf",
            KernelFeature::Uprobes => "uprobes",
        }
    }

    /// Whether the running kernel has it.
    pub fn present(self) -> bool {
        use std::path::Path;
        let tracefs = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
        let in_tracefs = |f: &str| tracefs.iter().any(|r| Path::new(r).join(f).exists());
        match self {
            KernelFeature::Kprobes => {
                Path::new("/sys/bus/event_source/devices/kprobe").exists()
                    || in_tracefs("kprobe_events")
            }
            KernelFeature::Uprobes => {
                Path::new("/sys/bus/event_source/devices/uprobe").exists()
                    || in_tracefs("uprobe_events")
            }
            KernelFeature::Btf => Path::new("/sys/kernel/btf/vmlinux").exists(),
            KernelFeature::Fentry => {
                KernelFeature::Btf.present()
                    && tracefs.iter().any(|r| {
                        std::fs::read_to_string(Path::new(r).join("available_filter_functions"))
                            .is_ok_and(|s| !s.is_empty())
                    })
            }
        }
    }
}

/// Returns `true` when the kernel has `feature`. Otherwise the test is skipped with the reason
/// printed (a kernel without the feature is not a failure, even under [`REQUIRE_ENV`]), unless
/// [`EXPECT_ENV`] lists the feature: then it panics.
pub fn kernel_has(feature: KernelFeature, test: &str) -> bool {
    if feature.present() {
        return true;
    }
    let expected = std::env::var(EXPECT_ENV)
        .map(|v| v.split(',').any(|f| f.trim() == feature.name()))
        .unwrap_or(false);
    if expected {
        panic!(
            "{test}: the kernel seems to lack {} but {EXPECT_ENV} says it has it",
            feature.name()
        );
    }
    eprintln!("SKIP {test}: this kernel has no {}", feature.name());
    false
}

/// Whether the effective user is root.
pub fn is_root() -> bool {
    // The effective uid is in /proc/self/status ("Uid:\treal\teffective\t...").
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// Whether a program is on `PATH`.
pub fn have_program(name: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn available_never_skips() {
        assert!(skip_unless(true, "t", "never shown"));
    }

    #[test]
    fn program_lookup_finds_sh_and_not_nonsense() {
        assert!(have_program("sh"));
        assert!(!have_program("no-such-program-dtrace-testkit"));
    }
}

/// The deterministic pseudo-random generator (xorshift64) the fuzz smokes of every crate draw from, so a
/// smoke run is the same inputs every time. The seed must be non-zero.
#[derive(Debug, Clone)]
pub struct XorShift(pub u64);

impl XorShift {
    /// The next 64 pseudo-random bits.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[cfg(test)]
mod xorshift_tests {
    use super::XorShift;

    #[test]
    fn sequence_is_xorshift64_and_below_stays_below() {
        let mut r = XorShift(1);
        assert_eq!(r.next(), 0x4082_2041);
        let mut r = XorShift(7);
        assert!((0..1000).all(|_| r.below(5) < 5));
        assert_eq!(r.below(0), 0);
    }
}
