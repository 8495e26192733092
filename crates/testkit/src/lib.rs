//! Helpers shared by the test suites of the workspace.
//!
//! Owns one policy: how a test that needs something from the machine (root, BPF, tracefs, ptrace, a
//! Debian tool) decides to skip. A test calls [`skip_unless`] with whether its need is met and why not;
//! when `DTRACE_TEST_REQUIRE_KERNEL=1` is set (as `.ci/run` does) a skip is a failure instead.
//! It owns nothing else and is only ever a dev-dependency.

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
