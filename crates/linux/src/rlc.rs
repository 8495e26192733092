//! Run on last close, as illumos `/proc` sets `PR_RLC` on the processes DTrace grabs: a process
//! that `dtrace` stops from the kernel (a probe program's `SIGSTOP`, at the run-time linker's hook)
//! must run on however `dtrace` ends, SIGKILL included, when nothing of `dtrace` is left to send
//! its `SIGCONT`. Each such program first notes its process in the *held* map (an LRU hash of
//! pids); a small helper process, forked once, keeps only that map and a pidfd of `dtrace`. When
//! `dtrace` has exited (its descriptors, and so its uprobes, gone) without standing the helper
//! down, the helper lets go every noted process that is stopped or has a `SIGSTOP` pending, then
//! exits. An orderly `dtrace` resumes its processes itself and stands the helper down first, so a
//! process stopped on purpose (`stop()`, a shell's job control) stays stopped.
//!
//! A pid can be reused: each entry holds the time of the stop on the boot clock
//! (`bpf_ktime_get_boot_ns`, the clock of a process's start time in `/proc/<pid>/stat`), and the
//! helper leaves alone a process that started after it (its pid then names another process). The
//! start time is in clock ticks, rounded down, so a pid reused within one tick of the stop is the
//! one case it cannot tell apart.

use crate::bpf::insn::{helper, op, R0, R1, R10, R2, R3, R4};
use crate::bpf::{Asm, Map, MapKind, RingBuf, Size};
use crate::error::{LinuxError, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// How many processes the held map remembers (the least recently noted go first; a process
/// stopped now is the most recent).
const HELD_ENTRIES: u32 = 8192;
/// What dtrace writes to stand the helper down.
const STAND_DOWN: u8 = b'q';
/// `bpf_ringbuf_output`'s flag: wake the ring's waiters whatever it holds.
const BPF_RB_FORCE_WAKEUP: i32 = 2;
/// `SIGSTOP`'s bit in `/proc/<pid>/status`'s pending masks.
const SIGSTOP_BIT: u64 = 1 << (libc::SIGSTOP - 1);

/// The held map and its helper process.
#[derive(Debug)]
pub struct RunOnClose {
    held: Map,
    /// The helper's pid.
    helper: libc::pid_t,
    /// Write end of the pipe the helper reads (`STAND_DOWN`, or end of file when dtrace is gone).
    control: Option<OwnedFd>,
    /// A one-page ring the programs that stop a process ring once it is stopped and noted
    /// ([`RunOnClose::emit_ring`]): its wake-up ends the consumer's wait, so a stopped process
    /// waits for dtrace's answer, not for dtrace's next deadline.
    doorbell: RingBuf,
}

impl RunOnClose {
    /// Creates the held map and forks the helper.
    pub fn start() -> Result<RunOnClose> {
        let held = Map::create(MapKind::LruHash, "dt_held", 4, 8, HELD_ENTRIES)?;
        // SAFETY: sysconf reads a constant of the C library.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let tick_ns = u64::try_from(ticks)
            .ok()
            .filter(|t| *t > 0)
            .map_or(10_000_000, |t| 1_000_000_000 / t);
        // SAFETY: pidfd_open of our own pid; the result is checked.
        let me = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
        if me < 0 {
            return Err(LinuxError::last_os("pidfd_open of dtrace"));
        }
        // SAFETY: a descriptor the kernel just returned.
        let me = unsafe { OwnedFd::from_raw_fd(me as i32) };
        let mut fds = [0i32; 2];
        // SAFETY: fds is a two-element array for pipe2 to fill.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
            return Err(LinuxError::last_os("pipe2"));
        }
        // SAFETY: fresh descriptors.
        let (control_r, control_w) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let keep = [control_r.as_raw_fd(), me.as_raw_fd(), held.raw_fd()];
        // SAFETY: fork; the child runs `helper_main`, which makes system calls only, on memory
        // prepared before the fork, and never returns.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(LinuxError::last_os("fork of the run-on-close helper"));
        }
        if pid == 0 {
            helper_main(keep, tick_ns);
        }
        drop(control_r);
        // Made after the fork: the helper has no use for it.
        let doorbell = RingBuf::create("dt_rtld_bell", 4096)?;
        Ok(RunOnClose {
            held,
            helper: pid,
            control: Some(control_w),
            doorbell,
        })
    }

    /// Emits, into a probe program, the noting of the current process in the held map, followed by
    /// its `SIGSTOP` (clobbers R0-R5 and the 16 bytes below `stack_off` on the stack). Note first:
    /// should dtrace die right after the signal, the helper knows the process. The entry's value is
    /// the time of the stop on the boot clock (see the module's doc: a reused pid).
    pub fn emit_hold(&self, a: &mut Asm, stack_off: i16) {
        let key = stack_off - 16;
        let value = stack_off - 8;
        a.call(helper::KTIME_GET_BOOT_NS)
            .store(Size::DW, R10, value, R0)
            .call(helper::GET_CURRENT_PID_TGID)
            .alu_imm(op::RSH, R0, 32)
            .store(Size::W, R10, key, R0)
            .ld_map_fd(R1, self.held.raw_fd())
            .frame_addr(R2, i32::from(key))
            .frame_addr(R3, i32::from(value))
            .mov_imm(R4, 0)
            .call(helper::MAP_UPDATE_ELEM)
            .mov_imm(R1, libc::SIGSTOP)
            .call(helper::SEND_SIGNAL);
    }

    /// Emits, into a probe program, the ringing of the doorbell (after [`RunOnClose::emit_hold`]
    /// and whatever tells dtrace why): an 8-byte record with a forced wake-up of the consumer
    /// (clobbers R0-R5 and the 8 bytes below `stack_off` on the stack). A full doorbell rings
    /// no more, but then it is readable until read, which wakes the consumer as well.
    pub fn emit_ring(&self, a: &mut Asm, stack_off: i16) {
        let slot = stack_off - 8;
        a.store_imm(Size::DW, R10, slot, 0)
            .ld_map_fd(R1, self.doorbell.map().raw_fd())
            .frame_addr(R2, i32::from(slot))
            .mov_imm(R3, 8)
            .mov_imm(R4, BPF_RB_FORCE_WAKEUP)
            .call(helper::RINGBUF_OUTPUT);
    }

    /// The doorbell's descriptor, readable once a program rang it, for the consumer to wait on
    /// ([`crate::wait::readable`]).
    pub fn doorbell_fd(&self) -> RawFd {
        self.doorbell.map().raw_fd()
    }

    /// Empties the doorbell (before a wait on it: it is readable while rings are unread).
    pub fn answer_doorbell(&mut self) {
        self.doorbell.consume(|_| {});
    }

    /// Lets process `pid`, stopped by a probe program of [`RunOnClose::emit_hold`], go on, and
    /// forgets it: a process the helper would otherwise resume after a SIGKILL of dtrace long
    /// after, when it may be stopped on purpose (`stop()`, a shell's job control). The entry goes
    /// only if it is still the one read before the `SIGCONT` (the process may have stopped in a
    /// program again since, and must then stay noted).
    pub fn let_go(&self, pid: u32) {
        let key = pid.to_ne_bytes();
        let before = self.held.lookup(&key).ok().flatten();
        // A process that is gone has nothing to resume.
        let _ = crate::process::continue_process(pid);
        if let Some(v) = before {
            if self.held.lookup(&key).ok().flatten() == Some(v) {
                let _ = self.held.delete(&key);
            }
        }
    }

    /// Whether process `pid` is in the held map (tests).
    pub fn holds(&self, pid: u32) -> bool {
        matches!(self.held.lookup(&pid.to_ne_bytes()), Ok(Some(_)))
    }
}

impl Drop for RunOnClose {
    /// dtrace is ending in order (its processes resumed already): the helper stands down.
    fn drop(&mut self) {
        if let Some(w) = self.control.take() {
            // SAFETY: one byte from a constant to our pipe.
            unsafe {
                libc::write(
                    w.as_raw_fd(),
                    [STAND_DOWN].as_ptr() as *const libc::c_void,
                    1,
                )
            };
        }
        let mut status = 0;
        // SAFETY: reaping our own child.
        while unsafe { libc::waitpid(self.helper, &mut status, 0) } < 0 {
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break;
            }
        }
    }
}

/// The helper: leaves dtrace's session and terminal signals, keeps only the descriptors `keep`
/// (the control pipe's read end, dtrace's pidfd, the held map), waits for a stand-down or for
/// dtrace's end, and in the latter case lets the held processes go (`tick_ns`: nanoseconds of a
/// clock tick of `/proc`'s start times). System calls only: this runs in the child of a fork of a
/// threaded process.
fn helper_main(keep: [i32; 3], tick_ns: u64) -> ! {
    let [control, dtrace, held] = keep;
    // SAFETY: async-signal-safe calls only, on stack memory.
    unsafe {
        libc::setsid();
        for sig in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGPIPE,
        ] {
            libc::signal(sig, libc::SIG_IGN);
        }
        close_all_but(keep);
        let mut fds = [
            libc::pollfd {
                fd: control,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: dtrace,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        loop {
            if libc::poll(fds.as_mut_ptr(), 2, -1) < 0 {
                if *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                break;
            }
            if fds[0].revents != 0 {
                let mut b = 0u8;
                let n = libc::read(control, &mut b as *mut u8 as *mut libc::c_void, 1);
                if n == 1 && b == STAND_DOWN {
                    libc::_exit(0);
                }
                if n == 1 {
                    continue;
                }
                // End of file: dtrace is gone or going.
                break;
            }
            if fds[1].revents != 0 {
                break;
            }
        }
        // Wait until dtrace has exited entirely: its probes are detached with its descriptors.
        let mut p = libc::pollfd {
            fd: dtrace,
            events: libc::POLLIN,
            revents: 0,
        };
        while libc::poll(&mut p, 1, -1) < 0 && *libc::__errno_location() == libc::EINTR {}
        let mut key = [0u8; 4];
        let mut next = [0u8; 4];
        let mut first = true;
        for _ in 0..HELD_ENTRIES {
            let prev = if first { None } else { Some(&key[..]) };
            if !Map::next_key_raw(held, prev, &mut next) {
                break;
            }
            first = false;
            key = next;
            let pid = u32::from_ne_bytes(key);
            let mut held_at = [0u8; 8];
            if !Map::lookup_raw(held, &key, &mut held_at) {
                continue;
            }
            if held_by_a_stop(pid, u64::from_ne_bytes(held_at), tick_ns) {
                libc::kill(pid as libc::pid_t, libc::SIGCONT);
            }
        }
        libc::_exit(0);
    }
}

/// Closes every descriptor but `keep` (`close_range` over the gaps between them).
///
/// # Safety
/// Only for the forked helper, which owns nothing else.
unsafe fn close_all_but(mut keep: [i32; 3]) {
    keep.sort_unstable();
    let mut from: u32 = 0;
    for k in keep {
        let k = k as u32;
        if k > from {
            // SAFETY: closing descriptors the helper does not use.
            unsafe { libc::syscall(libc::SYS_close_range, from, k - 1, 0) };
        }
        from = k + 1;
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, from, u32::MAX, 0) };
}

/// Whether process `pid`, noted at `held_at` (boot clock, ns), is that process (it started no
/// later, `tick_ns` the unit of its start time) and is stopped (`T`) or has a `SIGSTOP` pending,
/// from its `/proc` files read into stack buffers.
fn held_by_a_stop(pid: u32, held_at: u64, tick_ns: u64) -> bool {
    let mut path = [0u8; 32];
    let mut buf = [0u8; 4096];
    let Some(stat) = read_proc(pid, b"stat", &mut path, &mut buf) else {
        return false;
    };
    match start_ticks(stat) {
        Some(t) if t.saturating_mul(tick_ns) <= held_at => {}
        _ => return false,
    }
    is_stopped(stat) || read_proc(pid, b"status", &mut path, &mut buf).is_some_and(stop_pending)
}

/// The start time (field 22, clock ticks since boot) of a `/proc/<pid>/stat` text.
fn start_ticks(stat: &[u8]) -> Option<u64> {
    let close = stat.iter().rposition(|b| *b == b')')?;
    // Fields after the command: state is field 3, so the start time is the 20th.
    let field = stat
        .get(close + 1..)?
        .split(|b| *b == b' ')
        .filter(|f| !f.is_empty())
        .nth(19)?;
    let mut v: u64 = 0;
    for c in field {
        let d = (*c as char).to_digit(10)?;
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

/// Reads `/proc/<pid>/<file>` into `buf` (system calls only); the bytes read.
fn read_proc<'a>(
    pid: u32,
    file: &[u8],
    path: &mut [u8; 32],
    buf: &'a mut [u8],
) -> Option<&'a [u8]> {
    let mut n = 0;
    for b in b"/proc/" {
        path[n] = *b;
        n += 1;
    }
    let mut digits = [0u8; 10];
    let mut d = 0;
    let mut v = pid;
    loop {
        digits[d] = b'0' + (v % 10) as u8;
        d += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    while d > 0 {
        d -= 1;
        path[n] = digits[d];
        n += 1;
    }
    path[n] = b'/';
    n += 1;
    for b in file {
        *path.get_mut(n)? = *b;
        n += 1;
    }
    *path.get_mut(n)? = 0;
    // SAFETY: a NUL-terminated path on the stack; the descriptor is closed below.
    let fd = unsafe {
        libc::open(
            path.as_ptr() as *const libc::c_char,
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: reading into our buffer, then closing our descriptor.
    let r = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
    // SAFETY: as above.
    unsafe { libc::close(fd) };
    let r = usize::try_from(r).ok()?;
    buf.get(..r)
}

/// Whether a `/proc/<pid>/stat` text says the process is stopped by a signal (`T`; a ptrace stop,
/// `t`, is another tracer's).
fn is_stopped(stat: &[u8]) -> bool {
    let Some(close) = stat.iter().rposition(|b| *b == b')') else {
        return false;
    };
    stat.get(close + 2) == Some(&b'T')
}

/// Whether a `/proc/<pid>/status` text has `SIGSTOP` pending for the process (`ShdPnd`, where a
/// signal to the whole process waits) or its main thread (`SigPnd`).
fn stop_pending(status: &[u8]) -> bool {
    status
        .split(|b| *b == b'\n')
        .filter_map(|l| {
            l.strip_prefix(b"ShdPnd:")
                .or_else(|| l.strip_prefix(b"SigPnd:"))
        })
        .any(|hex| {
            let mut v: u64 = 0;
            for c in hex.iter().filter(|c| !c.is_ascii_whitespace()) {
                let Some(d) = (*c as char).to_digit(16) else {
                    return false;
                };
                v = (v << 4) | u64::from(d);
            }
            v & SIGSTOP_BIT != 0
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_are_read_from_proc_texts() {
        assert!(is_stopped(b"12 (a) b) T 1 2 3"));
        assert!(!is_stopped(b"12 (sleep) S 1 2 3"));
        assert!(!is_stopped(b"12 (gdb'd) t 1 2 3"));
        assert!(!is_stopped(b"garbage"));
        assert!(!is_stopped(b"1 (x)"));
        let pending = b"Name:\tx\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000040000\n";
        assert!(stop_pending(pending));
        let other = b"SigPnd:\t0000000000000002\nShdPnd:\t0000000000000000\n";
        assert!(!stop_pending(other));
        assert!(!stop_pending(b"ShdPnd:\tzz40000\n"));
        assert!(!stop_pending(b""));
        let stat = b"7 (a) b) T 1 7 7 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 4242 1000 10";
        assert_eq!(start_ticks(stat), Some(4242));
        assert_eq!(start_ticks(b"7 (a) T 1 2"), None);
        assert_eq!(start_ticks(b"no command"), None);
    }

    #[test]
    fn the_helper_stands_down_when_dropped() {
        if !dtrace_testkit::skip_unless(
            crate::bpf_available(),
            "the_helper_stands_down_when_dropped",
            "needs bpf(2)",
        ) {
            return;
        }
        let rlc = RunOnClose::start().expect("helper");
        let helper = rlc.helper;
        assert!(!rlc.holds(std::process::id()));
        // The helper keeps only its three descriptors (dtrace's probes die with dtrace).
        let t0 = std::time::Instant::now();
        let count = || std::fs::read_dir(format!("/proc/{helper}/fd")).map_or(0, |d| d.count());
        while count() != 3 {
            assert!(
                t0.elapsed().as_secs() < 30,
                "helper has {} descriptors",
                count()
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        drop(rlc);
        // Reaped by the drop: no such child any more.
        let mut status = 0;
        // SAFETY: waitpid on a pid that is no longer our child fails with ECHILD.
        assert_eq!(
            unsafe { libc::waitpid(helper, &mut status, libc::WNOHANG) },
            -1
        );
    }

    #[test]
    fn own_proc_files_read_without_allocating() {
        let mut path = [0u8; 32];
        let mut buf = [0u8; 4096];
        let me = std::process::id();
        let stat = read_proc(me, b"stat", &mut path, &mut buf)
            .expect("own stat")
            .to_vec();
        assert!(stat.starts_with(format!("{me} (").as_bytes()));
        assert!(!is_stopped(&stat));
        assert!(read_proc(
            me,
            b"a-file-name-too-long-for-the-path",
            &mut path,
            &mut buf
        )
        .is_none());
        assert!(!held_by_a_stop(me, u64::MAX, 10_000_000));
        // Our own start time is on the boot clock, before now.
        let mine = start_ticks(&stat).expect("own start time");
        // SAFETY: sysconf reads a constant of the C library.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        let now_ns = boot_ns();
        assert!(mine * (1_000_000_000 / ticks) <= now_ns);
    }

    /// The boot clock now, in nanoseconds.
    fn boot_ns() -> u64 {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime fills our timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut now) };
        now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
    }

    #[test]
    fn a_stopped_process_is_let_go_only_if_it_started_before_its_stop() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = child.id();
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) };
        let t0 = std::time::Instant::now();
        let (mut path, mut buf) = ([0u8; 32], [0u8; 4096]);
        while !read_proc(pid, b"stat", &mut path, &mut buf).is_some_and(is_stopped) {
            assert!(t0.elapsed().as_secs() < 30, "child never stopped");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let tick = 1_000_000_000 / 100;
        // Noted now: the same process.
        assert!(held_by_a_stop(pid, boot_ns(), tick));
        // Noted before it started: its pid named another process then.
        assert!(!held_by_a_stop(pid, 0, tick));
        let _ = child.kill();
        let _ = child.wait();
    }
}
