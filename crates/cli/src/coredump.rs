//! `-x core`: as DTrace for Linux's `dt_opt_core`, a `dtrace` that was given the option dumps core
//! when it exits (to debug `dtrace` itself): it says so on stderr, lifts its core size limit and
//! aborts, whatever its exit status would have been. Where the core goes is the kernel's
//! `core_pattern`.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Notes that the run is to end in a core dump.
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Dumps core now if [`request`]ed (it does not return then).
pub fn force_if_requested() {
    if !REQUESTED.load(Ordering::SeqCst) {
        return;
    }
    eprintln!("libdtrace DEBUG: [ forcing coredump ]");
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads the rlimit we pass; signal() restores SIGABRT's default action,
    // so abort() ends the process with a core dump.
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &unlimited);
        libc::signal(libc::SIGABRT, libc::SIG_DFL);
    }
    std::process::abort();
}
