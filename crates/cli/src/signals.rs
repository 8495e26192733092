//! SIGINT/SIGTERM/SIGHUP end a run the way DTrace's do: the handler sets a flag and writes a byte
//! to a self-pipe, whose read end the main loop waits on beside the tracer's sources (so ^C ends
//! tracing at once however long the loop would otherwise sleep); the loop then stops tracing (END
//! fires) and prints the aggregations.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// The self-pipe's write end (-1 until [`install`] made it).
static WAKE_W: AtomicI32 = AtomicI32::new(-1);
/// The self-pipe's read end (-1 until [`install`] made it).
static WAKE_R: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
    let w = WAKE_W.load(Ordering::SeqCst);
    if w >= 0 {
        // SAFETY: write(2) is async-signal-safe; one byte from a static to a non-blocking pipe
        // (a full pipe already wakes its reader, so a failed write loses nothing).
        unsafe { libc::write(w, b"!".as_ptr() as *const libc::c_void, 1) };
    }
}

/// Installs the handlers, and the self-pipe they write to (without it, a signal still sets the
/// flag, and the loop sees it at its next wake-up).
pub fn install() {
    let mut fds = [-1i32; 2];
    // SAFETY: fds is a two-element array for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } == 0 {
        WAKE_R.store(fds[0], Ordering::SeqCst);
        WAKE_W.store(fds[1], Ordering::SeqCst);
    }
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to atomics and writes to a pipe, which is
        // async-signal-safe.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// Whether a terminating signal arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// The descriptor that becomes readable when a terminating signal arrives, for the main loop to
/// wait on (`None` if the self-pipe could not be made).
pub fn wake_fd() -> Option<std::os::fd::RawFd> {
    let r = WAKE_R.load(Ordering::SeqCst);
    (r >= 0).then_some(r)
}
