//! Process control for `-c` and `-p`: starting a command held until the probes are enabled
//! (stopped just after its `exec`, as DTrace's `Pcreate` holds it, or before `exec`), and killed
//! should the thread that started it die; releasing it, reporting how it ended; following an
//! existing pid through a pidfd, stopped with ptrace (every thread seized and interrupted) while
//! the probes are enabled; and the small `/proc` readers the session uses (thread group, parent,
//! memory).

use crate::capture::MemKind;
use crate::error::{LinuxError, Result};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// `exit(code)`.
    Exited(i32),
    /// Killed by a signal.
    Signaled(i32),
}

/// A command started with [`spawn_held`] (forked, waiting before `exec`) or [`spawn_stopped`]
/// (stopped in its new image), until [`HeldChild::release`].
#[derive(Debug)]
pub struct HeldChild {
    pid: i32,
    go: Option<OwnedFd>,
    exec_err: OwnedFd,
    reaped: Option<ExitStatus>,
    /// Held in the ptrace stop that follows its `exec` (we are its tracer until released).
    stopped: bool,
    /// A pidfd of the child, readable once it has ended (`None` where the kernel has none).
    pidfd: Option<OwnedFd>,
}

/// A pidfd of process `pid` (`None` where the kernel has no `pidfd_open`).
fn pidfd_of(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags; the result is checked.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a descriptor the kernel just returned.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: fds is a two-element array for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(LinuxError::last_os("pipe2"));
    }
    // SAFETY: fresh descriptors.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A command's arguments as `execvp` takes them, prepared before a fork (the child may not
/// allocate): the strings, and [`ExecArgs::pointers`] to them ending in NULL.
struct ExecArgs(Vec<CString>);

impl ExecArgs {
    /// The NULL-terminated argument vector; valid while `self` lives.
    fn pointers(&self) -> Vec<*const libc::c_char> {
        let mut ptrs: Vec<*const libc::c_char> = self.0.iter().map(|c| c.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        ptrs
    }
}

/// `argv` checked for [`spawn_held`] and [`spawn_stopped`]: not empty, no NUL byte inside.
fn exec_args(argv: &[String]) -> Result<ExecArgs> {
    if argv.is_empty() {
        return Err(LinuxError::Process("empty command".into()));
    }
    argv.iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<std::result::Result<_, _>>()
        .map(ExecArgs)
        .map_err(|_| LinuxError::Process("command argument contains a NUL byte".into()))
}

/// Forks `argv` (searched on `PATH`), holding the child before `exec` until released. Dropping the
/// handle without releasing makes the child exit with status 126 instead of running.
pub fn spawn_held(argv: &[String]) -> Result<HeldChild> {
    let cargs = exec_args(argv)?;
    let ptrs = cargs.pointers();
    let (go_r, go_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: fork; the child only calls async-signal-safe functions (prctl, getppid, close, read,
    // execvp, write, _exit) on memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(LinuxError::last_os("fork"));
    }
    if pid == 0 {
        // SAFETY: child side, see above.
        unsafe {
            die_with_parent(parent);
            libc::close(go_w.as_raw_fd());
            libc::close(err_r.as_raw_fd());
            let mut b = 0u8;
            let r = loop {
                let r = libc::read(go_r.as_raw_fd(), &mut b as *mut u8 as *mut libc::c_void, 1);
                if r >= 0 || *libc::__errno_location() != libc::EINTR {
                    break r;
                }
            };
            if r != 1 {
                libc::_exit(126);
            }
            libc::close(go_r.as_raw_fd());
            libc::execvp(ptrs[0], ptrs.as_ptr());
            let e = *libc::__errno_location();
            libc::write(
                err_w.as_raw_fd(),
                &e as *const i32 as *const libc::c_void,
                4,
            );
            libc::_exit(127);
        }
    }
    drop(go_r);
    drop(err_w);
    Ok(HeldChild {
        pid,
        go: Some(go_w),
        exec_err: err_r,
        reaped: None,
        stopped: false,
        pidfd: pidfd_of(pid),
    })
}

/// What the child of [`spawn_stopped`] writes when `PTRACE_TRACEME` fails (an errno is positive).
const TRACEME_FAILED: i32 = -1;

/// Starts `argv` (searched on `PATH`) and holds it stopped on the first instruction of its new
/// image until released, as DTrace's `-c` does: nothing the command does before its `exec` (and
/// nothing `dtrace` does in the forked child) is seen by the probes. Where this process cannot
/// trace its children (`PTRACE_TRACEME` refused), falls back to [`spawn_held`]. Fails at once if
/// the command cannot be executed. Dropping the handle without releasing kills the command.
pub fn spawn_stopped(argv: &[String]) -> Result<HeldChild> {
    let cargs = exec_args(argv)?;
    let ptrs = cargs.pointers();
    let (err_r, err_w) = pipe()?;
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: fork; the child only calls async-signal-safe functions (prctl, getppid, close,
    // ptrace, execvp, write, _exit) on memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(LinuxError::last_os("fork"));
    }
    if pid == 0 {
        // SAFETY: child side, see above.
        unsafe {
            die_with_parent(parent);
            libc::close(err_r.as_raw_fd());
            let null: *mut libc::c_void = std::ptr::null_mut();
            let e = if libc::ptrace(libc::PTRACE_TRACEME, 0, null, null) < 0 {
                TRACEME_FAILED
            } else {
                // On success the kernel stops us with SIGTRAP in the new image.
                libc::execvp(ptrs[0], ptrs.as_ptr());
                *libc::__errno_location()
            };
            libc::write(
                err_w.as_raw_fd(),
                &e as *const i32 as *const libc::c_void,
                4,
            );
            libc::_exit(127);
        }
    }
    drop(err_w);
    let mut child = HeldChild {
        pid,
        go: None,
        exec_err: err_r,
        reaped: None,
        stopped: false,
        pidfd: pidfd_of(pid),
    };
    let mut e = 0i32;
    // Blocks until exec succeeds (pipe closed by CLOEXEC) or fails (errno written).
    // SAFETY: reading into a local i32.
    let r = unsafe {
        libc::read(
            child.exec_err.as_raw_fd(),
            &mut e as *mut i32 as *mut libc::c_void,
            4,
        )
    };
    if r == 4 {
        let _ = child.wait();
        if e == TRACEME_FAILED {
            return spawn_held(argv);
        }
        return Err(LinuxError::Process(format!(
            "failed to execute command: {}",
            std::io::Error::from_raw_os_error(e)
        )));
    }
    let mut status = 0;
    // SAFETY: waiting for our own child's exec stop.
    let w = loop {
        let w = unsafe { libc::waitpid(pid, &mut status, 0) };
        if w >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break w;
        }
    };
    if w < 0 {
        return Err(LinuxError::last_os("waitpid"));
    }
    if libc::WIFSTOPPED(status) {
        child.stopped = true;
        // Killed should this process die while it is held (the death signal set before the exec
        // is cleared by the exec of a set-user-ID program).
        let _ = ptrace(
            libc::PTRACE_SETOPTIONS,
            pid,
            libc::PTRACE_O_EXITKILL as usize,
        );
    } else {
        child.reaped = Some(exit_status(status));
    }
    Ok(child)
}

/// In the child of a fork: die (SIGKILL) when the thread that forked it, `dtrace`'s main thread,
/// ends, however it ends, as DTrace kills the processes it created (illumos sets them
/// kill-on-last-close); exits at once if that parent is already gone.
///
/// # Safety
/// Async-signal-safe: for a forked child before its exec.
unsafe fn die_with_parent(parent: libc::pid_t) {
    // SAFETY: prctl and getppid take integers only; _exit ends the child.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
        if libc::getppid() != parent {
            libc::_exit(127);
        }
    }
}

fn exit_status(status: i32) -> ExitStatus {
    if libc::WIFEXITED(status) {
        ExitStatus::Exited(libc::WEXITSTATUS(status))
    } else {
        ExitStatus::Signaled(libc::WTERMSIG(status))
    }
}

impl HeldChild {
    /// The child's pid (`$target`).
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Lets the child run (`exec`, when held before it). Fails if `exec` failed (command not
    /// found...).
    pub fn release(&mut self) -> Result<()> {
        if self.stopped {
            let null: *mut libc::c_void = std::ptr::null_mut();
            // SAFETY: detaching from our stopped tracee; signal 0 discards the exec SIGTRAP.
            if unsafe { libc::ptrace(libc::PTRACE_DETACH, self.pid, null, null) } < 0 {
                // Still stopped: dropping the handle kills it.
                return Err(LinuxError::last_os("releasing the held command"));
            }
            self.stopped = false;
            return Ok(());
        }
        let Some(go) = self.go.take() else {
            return Ok(());
        };
        // SAFETY: writing one byte from a local to our pipe.
        let w = unsafe { libc::write(go.as_raw_fd(), b"g".as_ptr() as *const libc::c_void, 1) };
        if w != 1 {
            return Err(LinuxError::last_os("releasing the held command"));
        }
        drop(go);
        let mut e = 0i32;
        // Blocks until exec succeeds (pipe closed by CLOEXEC) or fails (errno written).
        // SAFETY: reading into a local i32.
        let r = unsafe {
            libc::read(
                self.exec_err.as_raw_fd(),
                &mut e as *mut i32 as *mut libc::c_void,
                4,
            )
        };
        if r == 4 {
            let _ = self.wait();
            return Err(LinuxError::Process(format!(
                "failed to execute command: {}",
                std::io::Error::from_raw_os_error(e)
            )));
        }
        Ok(())
    }

    /// Runs a command held after its `exec` up to the entry point of its program (`AT_ENTRY`),
    /// so the libraries the dynamic linker loads at start are mapped (the `pid` provider then
    /// finds their functions), and holds it there. A breakpoint is written over the entry's
    /// first byte through `/proc/<pid>/mem` and taken out again before this returns. Does nothing
    /// for a command not held in its image.
    pub fn run_to_entry(&mut self) -> Result<()> {
        if !self.stopped {
            return Ok(());
        }
        let pid = self.pid;
        let entry = read_auxv_entry(pid as u32)
            .ok_or_else(|| LinuxError::Process(format!("no entry point in /proc/{pid}/auxv")))?;
        let mem = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/mem"))
            .map_err(|e| LinuxError::from_io(format!("opening /proc/{pid}/mem"), e))?;
        use std::os::unix::fs::FileExt;
        let mut orig = [0u8; 1];
        mem.read_exact_at(&mut orig, entry)
            .and_then(|_| mem.write_all_at(&[0xcc], entry))
            .map_err(|e| LinuxError::from_io(format!("placing a breakpoint in pid {pid}"), e))?;
        let run = (|| -> Result<()> {
            ptrace(libc::PTRACE_CONT, pid, 0)
                .map_err(|e| LinuxError::from_io("resuming the held command", e))?;
            let mut status = 0;
            // SAFETY: waiting for our own traced child.
            let w = loop {
                let w = unsafe { libc::waitpid(pid, &mut status, 0) };
                if w >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    break w;
                }
            };
            if w < 0 {
                return Err(LinuxError::last_os("waitpid"));
            }
            if !libc::WIFSTOPPED(status) {
                self.stopped = false;
                self.reaped = Some(exit_status(status));
                return Err(LinuxError::Process(format!(
                    "pid {pid} ended before reaching its entry point"
                )));
            }
            if libc::WSTOPSIG(status) != libc::SIGTRAP {
                return Err(LinuxError::Process(format!(
                    "pid {pid} stopped by signal {} before reaching its entry point",
                    libc::WSTOPSIG(status)
                )));
            }
            // SAFETY: an all-zero user_regs_struct is valid; GETREGS/SETREGS read and write it.
            let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
            let p = &mut regs as *mut libc::user_regs_struct as *mut libc::c_void;
            // SAFETY: our stopped tracee; `p` points at a live user_regs_struct.
            if unsafe { libc::ptrace(libc::PTRACE_GETREGS, pid, 0usize, p) } < 0 {
                return Err(LinuxError::last_os("reading the held command's registers"));
            }
            regs.rip = entry;
            // SAFETY: as above.
            if unsafe { libc::ptrace(libc::PTRACE_SETREGS, pid, 0usize, p) } < 0 {
                return Err(LinuxError::last_os("setting the held command's registers"));
            }
            Ok(())
        })();
        if self.stopped {
            mem.write_all_at(&orig, entry)
                .map_err(|e| LinuxError::from_io(format!("restoring pid {pid}"), e))?;
        }
        run
    }

    /// A descriptor that becomes readable when the child ends, for a wait on it among others
    /// ([`crate::wait::readable`]); `None` where the kernel has no pidfds.
    pub fn exit_fd(&self) -> Option<std::os::fd::RawFd> {
        self.pidfd.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Non-blocking: how the child ended, if it has.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        self.waitpid(libc::WNOHANG)
    }

    /// Blocks until the child ends.
    pub fn wait(&mut self) -> Result<ExitStatus> {
        loop {
            if let Some(s) = self.waitpid(0)? {
                return Ok(s);
            }
        }
    }

    fn waitpid(&mut self, flags: i32) -> Result<Option<ExitStatus>> {
        if let Some(s) = self.reaped {
            return Ok(Some(s));
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(self.pid, &mut status, flags) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                return Ok(None);
            }
            return Err(LinuxError::from_io("waitpid", e));
        }
        if r == 0 {
            return Ok(None);
        }
        let s = exit_status(status);
        self.reaped = Some(s);
        Ok(Some(s))
    }
}

impl Drop for HeldChild {
    fn drop(&mut self) {
        if self.stopped {
            // A command held after its exec is killed, as DTrace kills what it created.
            // SAFETY: signalling our own stopped child, then reaping it.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            let _ = self.wait();
            return;
        }
        // An unreleased child reads EOF and exits 126; reap it if it is done so no zombie stays.
        self.go = None;
        if self.reaped.is_none() {
            let _ = self.waitpid(libc::WNOHANG);
        }
    }
}

/// An existing process followed with `-p`.
///
/// [`Followed::stop`] seizes and interrupts each of its threads with ptrace, so it stays stopped
/// (state `t`) until [`Followed::resume`] or the drop of the handle detaches them; if this process
/// dies first the kernel detaches and restarts them, so the process is never left stopped. Ptrace
/// requests are per tracer thread: stop, resume and drop must happen on the same thread.
#[derive(Debug)]
pub struct Followed {
    pid: u32,
    pidfd: OwnedFd,
    /// The threads seized, each with the signal to deliver when it is detached (a signal that
    /// arrived while it was held).
    held: Vec<(i32, i32)>,
}

/// Why a process cannot be grabbed, in `Pgrab_error`'s words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GrabError {
    /// No such process.
    #[error("no such process")]
    NoProcess,
    /// A zombie.
    #[error("zombie process")]
    Zombie,
    /// Another tracer has it.
    #[error("process is traced")]
    Traced,
    /// A kernel thread.
    #[error("system process")]
    System,
    /// Not ours to trace.
    #[error("permission denied")]
    Permission,
}

/// The threads of `pid`, from `/proc/<pid>/task`.
fn threads_of(pid: u32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// Why `PTRACE_SEIZE` of `pid` failed with `errno`, from what `/proc` says of it.
fn grab_error(pid: u32, errno: i32) -> GrabError {
    if errno == libc::ESRCH {
        return GrabError::NoProcess;
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    if field("State:").is_some_and(|s| s.starts_with('Z')) {
        GrabError::Zombie
    } else if field("TracerPid:").is_some_and(|t| t != "0") {
        GrabError::Traced
    } else if field("Kthread:").is_some_and(|k| k == "1")
        || std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.is_empty())
            && field("VmSize:").is_none()
    {
        GrabError::System
    } else if status.is_empty() {
        GrabError::NoProcess
    } else {
        GrabError::Permission
    }
}

/// The entry point (`AT_ENTRY`) of `pid`'s program, from its auxiliary vector.
fn read_auxv_entry(pid: u32) -> Option<u64> {
    const AT_ENTRY: u64 = 9;
    let auxv = std::fs::read(format!("/proc/{pid}/auxv")).ok()?;
    auxv.chunks_exact(16).find_map(|c| {
        let k = u64::from_le_bytes(c[..8].try_into().ok()?);
        let v = u64::from_le_bytes(c[8..].try_into().ok()?);
        (k == AT_ENTRY).then_some(v)
    })
}

/// `ptrace(req, tid, 0, data)`.
fn ptrace(req: libc::c_uint, tid: i32, data: usize) -> std::io::Result<()> {
    // SAFETY: the requests used here take no pointers (addr 0, data a number).
    let r = unsafe { libc::ptrace(req, tid, 0usize, data) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

impl Followed {
    /// Opens a pidfd on `pid`; errors if there is no such process.
    pub fn attach(pid: u32) -> Result<Followed> {
        // SAFETY: pidfd_open takes a pid and flags.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ESRCH) {
                return Err(LinuxError::Process(format!(
                    "failed to grab pid {pid}: no such process"
                )));
            }
            return Err(LinuxError::from_io(format!("pidfd_open({pid})"), e));
        }
        // SAFETY: fresh descriptor.
        Ok(Followed {
            pid,
            pidfd: unsafe { OwnedFd::from_raw_fd(fd as i32) },
            held: Vec::new(),
        })
    }

    /// Stops every thread of the process (`PTRACE_SEIZE` then `PTRACE_INTERRUPT`), returning once
    /// each is in its ptrace stop. Threads are listed again until no new one appears, since a thread
    /// not yet stopped may create others. On an error the threads already held are let go.
    pub fn stop(&mut self) -> std::result::Result<(), GrabError> {
        loop {
            let fresh: Vec<i32> = threads_of(self.pid)
                .into_iter()
                .filter(|t| !self.held.iter().any(|(h, _)| h == t))
                .collect();
            if fresh.is_empty() {
                break;
            }
            let mut seized = Vec::new();
            for tid in fresh {
                match ptrace(libc::PTRACE_SEIZE, tid, 0) {
                    Ok(()) => {}
                    // The thread exited meanwhile.
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) && tid as u32 != self.pid => {
                        continue
                    }
                    Err(e) => {
                        let why = grab_error(self.pid, e.raw_os_error().unwrap_or(0));
                        self.resume();
                        return Err(why);
                    }
                }
                self.held.push((tid, 0));
                if ptrace(libc::PTRACE_INTERRUPT, tid, 0).is_ok() {
                    seized.push(tid);
                }
            }
            for tid in seized {
                self.wait_stopped(tid);
            }
            if self.held.iter().all(|(t, _)| *t as u32 != self.pid) {
                self.resume();
                return Err(GrabError::NoProcess);
            }
        }
        if self.held.is_empty() {
            return Err(GrabError::NoProcess);
        }
        Ok(())
    }

    /// Waits for held thread `tid` to stop; one that ended is dropped from the held list, one
    /// stopped for a signal keeps it to deliver at detach.
    fn wait_stopped(&mut self, tid: i32) {
        loop {
            let mut status = 0;
            // SAFETY: waiting for a tracee of this thread.
            let r = unsafe { libc::waitpid(tid, &mut status, libc::__WALL) };
            if r < 0 {
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                self.held.retain(|(t, _)| *t != tid);
                return;
            }
            if libc::WIFSTOPPED(status) {
                let event = status >> 16;
                let sig = libc::WSTOPSIG(status);
                if event == 0 && sig != libc::SIGTRAP {
                    // Signal-delivery-stop: hand the signal back when detaching.
                    if let Some(h) = self.held.iter_mut().find(|(t, _)| *t == tid) {
                        h.1 = sig;
                    }
                }
                return;
            }
            // Exited or killed.
            self.held.retain(|(t, _)| *t != tid);
            return;
        }
    }

    /// Whether [`Followed::stop`] holds the process.
    pub fn is_stopped(&self) -> bool {
        !self.held.is_empty()
    }

    /// Lets every held thread run again (`PTRACE_DETACH`, with any signal that arrived meanwhile).
    pub fn resume(&mut self) {
        for (tid, sig) in std::mem::take(&mut self.held) {
            if ptrace(libc::PTRACE_DETACH, tid, sig as usize).is_err() {
                // Dead (SIGKILL while held): collect its ptrace notification.
                let mut status = 0;
                // SAFETY: reaping a tracee's notification without blocking.
                unsafe { libc::waitpid(tid, &mut status, libc::__WALL | libc::WNOHANG) };
            }
        }
    }

    /// The pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// A descriptor that becomes readable when the process exits (its pidfd), for a wait on it
    /// among others ([`crate::wait::readable`]).
    pub fn exit_fd(&self) -> std::os::fd::RawFd {
        self.pidfd.as_raw_fd()
    }

    /// Waits up to `timeout` for the process to exit; true once it has.
    pub fn wait_exit(&self, timeout: std::time::Duration) -> Result<bool> {
        crate::wait::readable(&[self.exit_fd()], timeout)
    }
}

impl Drop for Followed {
    /// A process still held is let go.
    fn drop(&mut self) {
        self.resume();
    }
}

/// `raise(signal)`: sends `signal` to thread `tid` of process `pid` (`tgkill`), as DTrace's
/// `raise()` sends it to the thread that fired the probe. A thread that is gone by now is not an
/// error (DTrace's signal would have been lost with it too).
pub fn raise_in_thread(pid: u32, tid: u32, signal: u64) -> Result<()> {
    let sig = libc::c_int::try_from(signal)
        .ok()
        .filter(|s| (0..=64).contains(s))
        .ok_or_else(|| LinuxError::BadProbe(format!("raise(): {signal} is not a signal")))?;
    // SAFETY: tgkill takes three integers and touches no memory of ours.
    let r = unsafe {
        libc::syscall(
            libc::SYS_tgkill,
            pid as libc::c_long,
            tid as libc::c_long,
            sig as libc::c_long,
        )
    };
    signalled(r == 0, "tgkill")
}

/// `stop()`: stops process `pid` (`SIGSTOP`), as DTrace's `stop()` stops the process that fired
/// the probe. A process that is gone by now is not an error.
pub fn stop_process(pid: u32) -> Result<()> {
    signal_process(pid, libc::SIGSTOP)
}

/// Lets a stopped process `pid` go on (`SIGCONT`). A process that is gone is not an error.
pub fn continue_process(pid: u32) -> Result<()> {
    signal_process(pid, libc::SIGCONT)
}

fn signal_process(pid: u32, sig: libc::c_int) -> Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| LinuxError::BadProbe(format!("no process {pid}")))?;
    // SAFETY: kill takes two integers and touches no memory of ours.
    let r = unsafe { libc::kill(pid, sig) };
    signalled(r == 0, "kill")
}

/// The result of a signalling call `call` that succeeded or set errno: a target that is gone
/// (`ESRCH`) is not an error.
fn signalled(ok: bool, call: &str) -> Result<()> {
    match std::io::Error::last_os_error() {
        _ if ok => Ok(()),
        e if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        e => Err(LinuxError::from_io(call, e)),
    }
}

/// dtrace's own process id, asked of the kernel once: a per-record `getpid()` fires the
/// syscall probes again when dtrace traces itself (`-P syscall`), each record feeding the next.
pub fn own_pid() -> u32 {
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *PID.get_or_init(std::process::id)
}

/// The thread-group id (process id) of thread `tid`, from `/proc/<tid>/status`.
pub fn tgid_of(tid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The parent pid of `pid`, from `/proc/<pid>/stat`.
pub fn ppid_of(pid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_ppid(&s)
}

/// The ancestors of `pid`, its parent first, up to init (at most
/// [`crate::capture::spec::MAX_ANCESTORS`], as a probe captures them): what `progenyof()` tests in a
/// context the kernel did not capture (BEGIN and END, which fire in `dtrace`).
pub fn ancestors(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut p = pid;
    while let Some(parent) = ppid_of(p).filter(|&n| n != 0) {
        if out.len() == crate::capture::spec::MAX_ANCESTORS || out.contains(&parent) {
            break;
        }
        out.push(parent);
        p = parent;
    }
    out
}

/// Extracts the ppid from the text of a `/proc/<pid>/stat` file (the comm may contain spaces and
/// parentheses, so fields are counted after the last `)`).
pub fn parse_stat_ppid(s: &str) -> Option<u32> {
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Reads `cap` bytes (strings: up to the NUL) of process `pid`'s memory at `addr` through
/// `/proc/<pid>/mem`, which faults pages in as needed.
pub fn read_memory(pid: u32, addr: u64, kind: MemKind, cap: usize) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(format!("/proc/{pid}/mem"))?;
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < cap {
        let to_page_end = 4096 - (at % 4096) as usize;
        let mut buf = vec![0u8; to_page_end.min(cap - out.len())];
        let n = f.read_at(&mut buf, at)?;
        if n == 0 {
            break;
        }
        buf.truncate(n);
        if kind.is_string() {
            if let Some(z) = buf.iter().position(|b| *b == 0) {
                out.extend_from_slice(&buf[..z]);
                return Ok(out);
            }
        }
        out.extend_from_slice(&buf);
        at += n as u64;
    }
    if out.is_empty() {
        return Err(std::io::Error::from_raw_os_error(libc::EFAULT));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_ppid_survives_odd_comms() {
        assert_eq!(parse_stat_ppid("12 (a) b) S 34 12 12"), Some(34));
        assert_eq!(parse_stat_ppid("garbage"), None);
        assert_eq!(parse_stat_ppid("1 (x)"), None);
    }

    #[test]
    fn ancestors_run_from_the_parent_to_init() {
        let me = std::process::id();
        let a = ancestors(me);
        assert_eq!(a.first().copied(), ppid_of(me));
        // The chain ends at a process without a parent in this pid namespace (init's is 0).
        let top = *a.last().unwrap();
        assert_eq!(ppid_of(top), Some(0));
        assert!(ancestors(u32::MAX).is_empty());
    }

    #[test]
    fn held_child_runs_only_when_released_and_reports_exit() {
        let mut c = spawn_held(&["sh".into(), "-c".into(), "exit 7".into()]).unwrap();
        assert_eq!(c.try_wait().unwrap(), None, "child ran before release");
        c.release().unwrap();
        assert_eq!(c.wait().unwrap(), ExitStatus::Exited(7));
    }

    #[test]
    fn missing_command_is_a_clear_error() {
        let mut c = spawn_held(&["/nonexistent/cmd".into()]).unwrap();
        let e = c.release().unwrap_err().to_string();
        assert!(e.contains("failed to execute command"), "{e}");
    }

    #[test]
    fn stopped_child_is_held_in_its_new_image() {
        let mut c = spawn_stopped(&["sh".into(), "-c".into(), "exit 9".into()]).unwrap();
        assert_eq!(c.try_wait().unwrap(), None, "child ran before release");
        // Already exec'd: the held process is the command, not a copy of us.
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", c.pid())).unwrap();
        assert_eq!(comm.trim(), "sh");
        c.release().unwrap();
        assert_eq!(c.wait().unwrap(), ExitStatus::Exited(9));
    }

    #[test]
    fn stopped_spawn_of_a_missing_command_fails_at_once() {
        let e = spawn_stopped(&["/nonexistent/cmd".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("failed to execute command"), "{e}");
    }

    #[test]
    fn unreleased_stopped_child_is_killed() {
        let c = spawn_stopped(&["sleep".into(), "100".into()]).unwrap();
        let pid = c.pid();
        drop(c);
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    }

    #[test]
    fn unreleased_child_exits_126() {
        let c = spawn_held(&["true".into()]).unwrap();
        let pid = c.pid() as i32;
        drop(c);
        let mut status = 0;
        // SAFETY: reaping our own child if Drop did not.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 126);
        }
    }

    #[test]
    fn followed_process_exit_is_seen_and_missing_pid_errors() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.2")
            .spawn()
            .unwrap();
        let f = Followed::attach(child.id()).unwrap();
        assert!(!f.wait_exit(std::time::Duration::ZERO).unwrap());
        child.wait().unwrap();
        assert!(f.wait_exit(std::time::Duration::from_secs(5)).unwrap());
        assert!(Followed::attach(0x3fff_fff0).is_err());
    }

    fn state_of(pid: u32) -> char {
        let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        s[s.rfind(')').unwrap() + 2..].chars().next().unwrap()
    }

    #[test]
    fn followed_process_is_held_stopped_until_resumed_or_dropped() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut f = Followed::attach(pid).unwrap();
        f.stop().unwrap();
        assert!(f.is_stopped());
        assert_eq!(state_of(pid), 't');
        // A second tracer is refused, in DTrace's words.
        let mut g = Followed::attach(pid).unwrap();
        let e = std::thread::spawn(move || g.stop().unwrap_err())
            .join()
            .unwrap();
        assert_eq!(e, GrabError::Traced);
        f.resume();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_ne!(state_of(pid), 't');
        f.stop().unwrap();
        assert_eq!(state_of(pid), 't');
        drop(f);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_ne!(state_of(pid), 't');
        child.kill().unwrap();
        child.wait().unwrap();
        let mut f = Followed::attach(pid);
        if let Ok(f) = f.as_mut() {
            assert_eq!(f.stop(), Err(GrabError::NoProcess));
        }
    }

    #[test]
    fn zombies_and_kernel_threads_are_refused_in_pgrabs_words() {
        // SAFETY: the child only calls _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: leaving the forked child at once.
            unsafe { libc::_exit(0) };
        }
        assert!(pid > 0);
        let t0 = std::time::Instant::now();
        while state_of(pid as u32) != 'Z' {
            assert!(t0.elapsed().as_secs() < 5);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let mut f = Followed::attach(pid as u32).unwrap();
        assert_eq!(f.stop(), Err(GrabError::Zombie));
        let mut status = 0;
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        let kthreadd = std::fs::read_to_string("/proc/2/status")
            .is_ok_and(|s| s.starts_with("Name:\tkthreadd\n"));
        if kthreadd {
            let mut f = Followed::attach(2).unwrap();
            assert_eq!(f.stop(), Err(GrabError::System));
        }
    }

    #[test]
    fn own_memory_reads_through_proc() {
        let s = b"hello\0world";
        let v = read_memory(
            std::process::id(),
            s.as_ptr() as u64,
            MemKind::UserString,
            64,
        )
        .unwrap();
        assert_eq!(v, b"hello");
        let v = read_memory(
            std::process::id(),
            s.as_ptr() as u64,
            MemKind::UserBytes,
            11,
        )
        .unwrap();
        assert_eq!(v, s);
    }
}
