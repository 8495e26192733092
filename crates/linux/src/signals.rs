//! Termination signals: SIGINT, SIGTERM and SIGHUP set a flag instead of killing the process, so a
//! tracing loop can return normally and every probe is detached by its owners' `Drop`. (Should the
//! process die anyway, even by SIGKILL, the kernel detaches everything: nothing of ours is pinned.)

use std::sync::atomic::{AtomicI32, Ordering};

static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    RECEIVED.store(sig, Ordering::SeqCst);
}

/// Installs the handlers (without SA_RESTART, so a blocked epoll_wait returns with EINTR).
pub fn install() -> crate::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a handler that only stores to an atomic.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) < 0 {
                return Err(crate::LinuxError::last_os("sigaction"));
            }
        }
    }
    Ok(())
}

/// The termination signal received since [`install`], if any.
pub fn received() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}
