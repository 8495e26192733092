//! libdtrace's debugging output: with `DTRACE_DEBUG` set in its environment, dtrace writes what
//! it does behind the scenes to stderr, each line starting `libdtrace DEBUG: `, as libdtrace's
//! `dt_dprintf()` does. Read once, at the first message.

use std::sync::OnceLock;

/// The environment variable that turns the output on (any value).
pub const DEBUG_ENV: &str = "DTRACE_DEBUG";

/// Whether `DTRACE_DEBUG` is set.
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os(DEBUG_ENV).is_some())
}

/// Writes `message` to stderr as libdtrace's debugging output, when it is on.
pub fn dprintf(message: impl FnOnce() -> String) {
    if enabled() {
        eprintln!("libdtrace DEBUG: {}", message());
    }
}
