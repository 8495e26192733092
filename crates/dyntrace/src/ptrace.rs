//! Thin wrappers over the ptrace, wait and memory-reading system calls, returning `io::Result`.
//!
//! We call `libc` directly rather than `nix`: the tracer's inner loop is a handful of raw ptrace requests
//! per instruction, several of them (PTRACE_SEIZE options, PTRACE_INTERRUPT, PTRACE_GETEVENTMSG,
//! process_vm_readv, perf_event_open) are clearer as the plain calls the manual pages describe, and it
//! keeps the dependency set small.

use std::io;

/// Options we always set: report exec, auto-attach threads.
pub const BASE_OPTIONS: libc::c_int = libc::PTRACE_O_TRACEEXEC | libc::PTRACE_O_TRACECLONE;

/// Extra options to follow children across fork and vfork.
pub const FORK_OPTIONS: libc::c_int = libc::PTRACE_O_TRACEFORK | libc::PTRACE_O_TRACEVFORK;

fn check(r: libc::c_long) -> io::Result<libc::c_long> {
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// PTRACE_SEIZE with options.
pub fn seize(tid: i32, options: libc::c_int) -> io::Result<()> {
    // SAFETY: plain system call; no memory is passed.
    check(unsafe { libc::ptrace(libc::PTRACE_SEIZE, tid, 0usize, options as usize) }).map(|_| ())
}

/// PTRACE_INTERRUPT: stop a seized tracee.
pub fn interrupt(tid: i32) -> io::Result<()> {
    // SAFETY: plain system call.
    check(unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0usize, 0usize) }).map(|_| ())
}

/// PTRACE_LISTEN: leave a group-stopped tracee stopped but report when it continues.
pub fn listen(tid: i32) -> io::Result<()> {
    // SAFETY: plain system call.
    check(unsafe { libc::ptrace(libc::PTRACE_LISTEN, tid, 0usize, 0usize) }).map(|_| ())
}

/// PTRACE_SINGLESTEP, delivering `sig` (0 for none).
#[inline]
pub fn singlestep(tid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: plain system call.
    check(unsafe { libc::ptrace(libc::PTRACE_SINGLESTEP, tid, 0usize, sig as usize) }).map(|_| ())
}

/// PTRACE_SYSCALL: run to the next system call entry, delivering `sig` (0 for none).
pub fn syscall(tid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: plain system call.
    check(unsafe { libc::ptrace(libc::PTRACE_SYSCALL, tid, 0usize, sig as usize) }).map(|_| ())
}

/// PTRACE_CONT, delivering `sig` (0 for none).
pub fn cont(tid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: plain system call.
    check(unsafe { libc::ptrace(libc::PTRACE_CONT, tid, 0usize, sig as usize) }).map(|_| ())
}

/// PTRACE_DETACH, delivering `sig` (0 for none).
pub fn detach(tid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: plain system call.
    check(unsafe { libc::ptrace(libc::PTRACE_DETACH, tid, 0usize, sig as usize) }).map(|_| ())
}

/// PTRACE_SETOPTIONS.
pub fn set_options(tid: i32, options: libc::c_int) -> io::Result<()> {
    // SAFETY: plain system call.
    check(unsafe { libc::ptrace(libc::PTRACE_SETOPTIONS, tid, 0usize, options as usize) })
        .map(|_| ())
}

/// PTRACE_GETREGS.
#[inline]
pub fn getregs(tid: i32) -> io::Result<libc::user_regs_struct> {
    // SAFETY: user_regs_struct is plain data; the kernel fills it whole.
    let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer is to a live, correctly sized struct.
    check(unsafe {
        libc::ptrace(
            libc::PTRACE_GETREGS,
            tid,
            0usize,
            &mut regs as *mut libc::user_regs_struct,
        )
    })?;
    Ok(regs)
}

/// PTRACE_SETREGS.
pub fn setregs(tid: i32, regs: &libc::user_regs_struct) -> io::Result<()> {
    // SAFETY: the pointer is to a live, correctly sized struct the kernel only reads.
    check(unsafe {
        libc::ptrace(
            libc::PTRACE_SETREGS,
            tid,
            0usize,
            regs as *const libc::user_regs_struct,
        )
    })
    .map(|_| ())
}

/// PTRACE_GETEVENTMSG.
pub fn event_msg(tid: i32) -> io::Result<u64> {
    let mut msg: libc::c_ulong = 0;
    // SAFETY: the pointer is to a live c_ulong.
    check(unsafe {
        libc::ptrace(
            libc::PTRACE_GETEVENTMSG,
            tid,
            0usize,
            &mut msg as *mut libc::c_ulong,
        )
    })?;
    Ok(msg as u64)
}

/// The `si_code` of the signal thread `tid` is stopped for (PTRACE_GETSIGINFO): for a SIGTRAP,
/// `TRAP_TRACE` after a single step and `SI_KERNEL` after an `int3`.
pub fn signal_code(tid: i32) -> io::Result<i32> {
    // SAFETY: plain data, filled by the kernel.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer is to a live siginfo_t.
    check(unsafe {
        libc::ptrace(
            libc::PTRACE_GETSIGINFO,
            tid,
            0usize,
            &mut info as *mut libc::siginfo_t,
        )
    })?;
    Ok(info.si_code)
}

/// PTRACE_PEEKTEXT of one word.
pub fn peek(tid: i32, addr: u64) -> io::Result<u64> {
    // PEEKTEXT returns the word; -1 is ambiguous, so errno decides.
    // SAFETY: errno location is thread-local and valid.
    unsafe { *libc::__errno_location() = 0 };
    // SAFETY: plain system call.
    let r = unsafe { libc::ptrace(libc::PTRACE_PEEKTEXT, tid, addr as usize, 0usize) };
    if r == -1 {
        let e = io::Error::last_os_error();
        if e.raw_os_error().unwrap_or(0) != 0 {
            return Err(e);
        }
    }
    Ok(r as u64)
}

/// PTRACE_POKETEXT of one word.
pub fn poke(tid: i32, addr: u64, word: u64) -> io::Result<()> {
    // SAFETY: plain system call; the kernel checks the address.
    check(unsafe { libc::ptrace(libc::PTRACE_POKETEXT, tid, addr as usize, word as usize) })
        .map(|_| ())
}

/// Reads up to `buf.len()` bytes at `addr` of process `pid`; returns how many could be read (stops at the
/// first unreadable page). Falls back to PTRACE_PEEKTEXT for execute-only memory.
pub fn read_mem(tid: i32, addr: u64, buf: &mut [u8]) -> usize {
    let page = 4096u64;
    let first = ((page - (addr % page)) as usize).min(buf.len());
    let (a, b) = buf.split_at_mut(first);
    let local = [
        libc::iovec {
            iov_base: a.as_mut_ptr().cast(),
            iov_len: a.len(),
        },
        libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        },
    ];
    let remote = [
        libc::iovec {
            iov_base: addr as usize as *mut libc::c_void,
            iov_len: a.len(),
        },
        libc::iovec {
            iov_base: (addr + first as u64) as usize as *mut libc::c_void,
            iov_len: b.len(),
        },
    ];
    let n_iov = if b.is_empty() { 1 } else { 2 };
    // SAFETY: the local iovecs point into `buf`, which outlives the call; remote ones are only addresses.
    let n =
        unsafe { libc::process_vm_readv(tid, local.as_ptr(), n_iov, remote.as_ptr(), n_iov, 0) };
    if n > 0 {
        return n as usize;
    }
    // Execute-only pages (or no process_vm_readv): read word by word.
    let mut got = 0;
    while got < buf.len() {
        match peek(tid, addr + got as u64) {
            Ok(w) => {
                let bytes = w.to_le_bytes();
                let take = (buf.len() - got).min(8);
                buf[got..got + take].copy_from_slice(&bytes[..take]);
                got += take;
            }
            Err(_) => break,
        }
    }
    got
}

/// A wait status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Exited with a code.
    Exited(i32),
    /// Killed by a signal.
    Killed(i32),
    /// In a ptrace stop: the signal and the ptrace event (0 for none).
    Stopped {
        /// WSTOPSIG.
        sig: i32,
        /// PTRACE_EVENT_*.
        event: i32,
    },
}

fn decode_status(status: i32) -> Status {
    if libc::WIFEXITED(status) {
        Status::Exited(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Status::Killed(libc::WTERMSIG(status))
    } else {
        Status::Stopped {
            sig: libc::WSTOPSIG(status),
            event: (status >> 16) & 0xff,
        }
    }
}

/// Waits for any traced thread (`pid` -1) or one thread; EINTR is returned as an error.
#[inline]
pub fn wait(pid: i32) -> io::Result<(i32, Status)> {
    let mut status = 0;
    // SAFETY: the pointer is to a live int.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
    if r == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok((r, decode_status(status)))
}

/// Sends a signal to one thread.
pub fn tgkill(tgid: i32, tid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: plain system call.
    check(unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid, sig) }).map(|_| ())
}
