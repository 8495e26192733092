//! The signals dyntrace itself obeys: HUP, INT, QUIT and TERM end the trace; USR1 (and the interval
//! timer behind `-c`) ask for a checkpoint. Handlers only set flags, and are installed without SA_RESTART
//! so a blocked `waitpid` returns to look at them.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static CHECKPOINT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

extern "C" fn on_checkpoint(_: libc::c_int) {
    CHECKPOINT.store(true, Ordering::SeqCst);
}

fn install(sig: libc::c_int, handler: extern "C" fn(libc::c_int)) -> std::io::Result<()> {
    // SAFETY: sigaction with a zeroed struct, a valid handler and an empty mask.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = 0;
        if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Installs the handlers, and the checkpoint timer when `seconds` is not zero.
pub fn install_all(seconds: u64) -> std::io::Result<()> {
    for s in [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT, libc::SIGTERM] {
        install(s, on_stop)?;
    }
    install(libc::SIGUSR1, on_checkpoint)?;
    install(libc::SIGALRM, on_checkpoint)?;
    if seconds > 0 {
        let secs = seconds.min(i32::MAX as u64) as libc::time_t;
        let it = libc::itimerval {
            it_interval: libc::timeval {
                tv_sec: secs,
                tv_usec: 0,
            },
            it_value: libc::timeval {
                tv_sec: secs,
                tv_usec: 0,
            },
        };
        // SAFETY: a valid itimerval; the old value is not wanted.
        if unsafe { libc::setitimer(libc::ITIMER_REAL, &it, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether a stop was asked for (the request stays set).
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Whether a checkpoint was asked for since the last call.
pub fn take_checkpoint() -> bool {
    CHECKPOINT.swap(false, Ordering::SeqCst)
}
