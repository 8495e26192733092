//! Waiting in the kernel: sleeps until one of several descriptors is readable (the capture ring,
//! whose programs wake its reader once it is filling up; a pidfd at its process's exit; a signal
//! handler's self-pipe) or a timeout passes, so an idle `dtrace` costs nothing between the
//! moments something is due. Everything unsafe about it lives here.

use crate::error::{LinuxError, Result};
use std::os::fd::RawFd;
use std::time::Duration;

/// Waits up to `timeout` for one of `fds` to be readable (or hung up). Returns whether one is;
/// `false` on the timeout or when a signal interrupted the wait (the caller looks at its flags).
pub fn readable(fds: &[RawFd], timeout: Duration) -> Result<bool> {
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `polled` holds `polled.len()` initialised pollfds, `ts` is a valid timespec, and a
    // null signal mask leaves the process's mask as it is.
    let r = unsafe {
        libc::ppoll(
            polled.as_mut_ptr(),
            polled.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok(false);
        }
        return Err(LinuxError::from_io("ppoll", e));
    }
    Ok(r > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_readable_descriptor_ends_the_wait_and_none_times_out() {
        let (r, mut w) = std::io::pipe().expect("pipe");
        let fd = r.as_raw_fd();
        assert!(!readable(&[fd], Duration::from_millis(1)).expect("wait"));
        std::io::Write::write_all(&mut w, b"x").expect("write");
        assert!(readable(&[fd], Duration::from_secs(3600)).expect("wait"));
        // Nothing to wait on: the timeout alone.
        assert!(!readable(&[], Duration::from_millis(1)).expect("wait"));
    }
}
