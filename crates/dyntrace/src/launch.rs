//! Getting a process under trace: running a command (resolved on PATH, stopped at its exec) or attaching
//! to a running process and all its threads.

use crate::error::{Error, Result};
use crate::ptrace::{self, Status};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Finds the file `command` names, as execvp would.
pub fn resolve_command(command: &str) -> Result<PathBuf> {
    let check = |p: &Path| -> Option<Result<PathBuf>> {
        let meta = std::fs::metadata(p).ok()?;
        if !meta.is_file() {
            return None;
        }
        let c = CString::new(p.as_os_str().as_bytes()).ok()?;
        // SAFETY: a valid NUL-terminated path.
        if unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0 {
            Some(Ok(p.to_path_buf()))
        } else {
            Some(Err(Error::CommandNotExecutable(command.to_string())))
        }
    };
    if command.is_empty() {
        return Err(Error::CommandNotFound(command.to_string()));
    }
    if command.contains('/') {
        return check(Path::new(command))
            .unwrap_or_else(|| Err(Error::CommandNotFound(command.to_string())));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut denied = None;
    for dir in std::env::split_paths(&path) {
        match check(&dir.join(command)) {
            Some(Ok(p)) => return Ok(p),
            Some(Err(e)) => denied = Some(e),
            None => {}
        }
    }
    Err(denied.unwrap_or_else(|| Error::CommandNotFound(command.to_string())))
}

/// Pins the calling process to the CPU it runs on (children inherit it). Returns whether it worked.
pub fn pin_to_current_cpu() -> bool {
    // SAFETY: sched_getcpu has no arguments; the cpu set is plain data.
    unsafe {
        let cpu = libc::sched_getcpu();
        if cpu < 0 {
            return false;
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Runs `argv` under trace with `options`; returns its pid once it has completed its exec (the first
/// instruction of the new program not yet executed).
/// With `no_randomize` the command runs without address-space randomization, so repeated traces take
/// the same paths through alignment-sensitive library code.
pub fn spawn(argv: &[String], options: libc::c_int, no_randomize: bool) -> Result<i32> {
    let first = argv
        .first()
        .ok_or_else(|| Error::Usage("no command given".into()))?;
    let path = resolve_command(first)?;
    let cpath = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::Usage("command contains a NUL byte".into()))?;
    let cargs: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| Error::Usage("argument contains a NUL byte".into()))?;
    let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: fork in a process whose other threads (none during launch) hold no locks the child needs;
    // the child only calls async-signal-safe functions before exec.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(Error::last_os("fork"));
    }
    if pid == 0 {
        // SAFETY: async-signal-safe calls only, then exec or _exit.
        unsafe {
            if no_randomize {
                const ADDR_NO_RANDOMIZE: libc::c_ulong = 0x0040000;
                let current = libc::personality(0xffff_ffff);
                if current != -1 {
                    libc::personality(current as libc::c_ulong | ADDR_NO_RANDOMIZE);
                }
            }
            libc::raise(libc::SIGSTOP);
            libc::execv(cpath.as_ptr(), ptrs.as_ptr());
            libc::_exit(127);
        }
    }
    // Wait for the child to stop itself, then seize it and let it exec.
    let mut status = 0;
    // SAFETY: the pointer is to a live int.
    if unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) } != pid {
        return Err(Error::last_os("waitpid"));
    }
    if !libc::WIFSTOPPED(status) {
        return Err(Error::Os {
            call: "launch",
            source: std::io::Error::other("the child did not stop before exec"),
        });
    }
    ptrace::seize(pid, options | libc::PTRACE_O_EXITKILL).map_err(|e| Error::Os {
        call: "ptrace(PTRACE_SEIZE)",
        source: e,
    })?;
    // SAFETY: plain system call on our own child.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    loop {
        let (_, st) = match ptrace::wait(pid) {
            Ok(x) => x,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => {
                return Err(Error::Os {
                    call: "waitpid",
                    source: e,
                })
            }
        };
        match st {
            Status::Stopped { event, .. } if event == libc::PTRACE_EVENT_EXEC => return Ok(pid),
            Status::Stopped { sig, event } => {
                // The SIGCONT we sent and group-stop reports: just let it run to the exec.
                let deliver = if event == 0 && sig != libc::SIGSTOP && sig != libc::SIGCONT {
                    sig
                } else {
                    0
                };
                ptrace::cont(pid, deliver).map_err(|e| Error::Os {
                    call: "ptrace(PTRACE_CONT)",
                    source: e,
                })?;
            }
            Status::Exited(_) | Status::Killed(_) => {
                return Err(Error::CommandNotFound(first.clone()));
            }
        }
    }
}

/// The thread ids of process `pid`.
pub fn threads_of(pid: i32) -> std::io::Result<Vec<i32>> {
    let mut v: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    v.sort_unstable();
    Ok(v)
}

/// Seizes every thread of `pid` and asks each to stop; returns the thread ids (their stops are still to
/// be waited for).
pub fn attach(pid: i32, options: libc::c_int) -> Result<Vec<i32>> {
    if pid <= 0 {
        return Err(Error::Usage(format!("invalid process id {pid}")));
    }
    // SAFETY: getpid has no arguments.
    if pid == unsafe { libc::getpid() } {
        return Err(Error::Usage("dyntrace cannot trace itself".into()));
    }
    let mut seized: Vec<i32> = Vec::new();
    loop {
        let tids = threads_of(pid).map_err(|_| Error::NoSuchProcess(pid))?;
        let fresh: Vec<i32> = tids.into_iter().filter(|t| !seized.contains(t)).collect();
        if fresh.is_empty() {
            break;
        }
        for tid in fresh {
            match ptrace::seize(tid, options) {
                Ok(()) => {
                    let _ = ptrace::interrupt(tid);
                    seized.push(tid);
                }
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) && tid != pid => {}
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                    return Err(Error::NoSuchProcess(pid));
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) => {
                    for t in &seized {
                        let _ = ptrace::detach(*t, 0);
                    }
                    return Err(Error::PermissionDenied {
                        pid,
                        reason: e.to_string(),
                    });
                }
                Err(e) => {
                    return Err(Error::Os {
                        call: "ptrace(PTRACE_SEIZE)",
                        source: e,
                    })
                }
            }
        }
    }
    Ok(seized)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_commands_like_execvp() {
        assert!(resolve_command("sh").is_ok());
        assert!(matches!(
            resolve_command("no-such-command-dyntrace"),
            Err(Error::CommandNotFound(_))
        ));
        assert!(matches!(
            resolve_command("/no/such/file"),
            Err(Error::CommandNotFound(_))
        ));
        assert!(matches!(
            resolve_command("/etc"),
            Err(Error::CommandNotFound(_))
        ));
        assert!(matches!(
            resolve_command(""),
            Err(Error::CommandNotFound(_))
        ));
    }
}
