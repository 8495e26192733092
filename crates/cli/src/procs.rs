//! The processes of a run (`-c` and `-p`, DTrace's `g_psv`): commands created and held stopped just
//! after their `exec` until tracing has started, pids grabbed through a pidfd and held stopped
//! (ptrace) until then, DTrace's notices when they end, and the
//! kill of created commands still running when `dtrace` exits.

use dtrace_linux::process::{spawn_stopped, ExitStatus, Followed, HeldChild};

/// One process of the run.
enum Victim {
    /// `-c`: created by us, held until [`Procs::release`].
    Created(HeldChild),
    /// `-p`: grabbed.
    Grabbed(Followed),
}

impl Victim {
    fn pid(&self) -> u32 {
        match self {
            Victim::Created(c) => c.pid(),
            Victim::Grabbed(f) => f.pid(),
        }
    }
}

/// The processes created or grabbed, and whether each is still alive.
#[derive(Default)]
pub struct Procs {
    list: Vec<(Victim, bool)>,
    notices: Vec<String>,
}

/// `make_argv`: a `-c` argument split at white space.
pub fn make_argv(cmd: &str) -> Vec<String> {
    cmd.split_ascii_whitespace().map(str::to_string).collect()
}

/// Whether `path` names an executable regular file.
fn executable(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(md) = std::fs::metadata(path) else {
        return false;
    };
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access(2) on a NUL-terminated path.
    md.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
}

/// Finds `file` as `execvp` will: as given when it holds a `/`, else along `PATH`.
fn find_executable(file: &str) -> Result<(), &'static str> {
    let found = |p: &std::path::Path| {
        if executable(p) {
            Ok(())
        } else if p.exists() {
            Err("cannot execute file")
        } else {
            Err("cannot find executable file")
        }
    };
    if file.contains('/') {
        return found(std::path::Path::new(file));
    }
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".to_string());
    let mut first_err = "cannot find executable file";
    for dir in path.split(':') {
        let dir = if dir.is_empty() { "." } else { dir };
        match found(&std::path::Path::new(dir).join(file)) {
            Ok(()) => return Ok(()),
            Err(e) if e != first_err => first_err = e,
            Err(_) => {}
        }
    }
    Err(first_err)
}

impl Procs {
    /// `dtrace_proc_create`: starts `cmd` held on the first instruction of its new image (what it
    /// did before `exec` is not traced); returns its pid.
    pub fn create(&mut self, cmd: &str) -> Result<u32, String> {
        let argv = make_argv(cmd);
        let Some(file) = argv.first() else {
            return Err("failed to execute : cannot find executable file".to_string());
        };
        if let Err(why) = find_executable(file) {
            return Err(format!("failed to execute {file}: {why}"));
        }
        let child = spawn_stopped(&argv).map_err(|e| format!("failed to execute {file}: {e}"))?;
        let pid = child.pid();
        self.list.push((Victim::Created(child), true));
        Ok(pid)
    }

    /// `dtrace_proc_grab`: follows the process `arg` names; returns its pid.
    pub fn grab(&mut self, arg: &str) -> Result<u32, String> {
        let pid: i64 = arg.parse().map_err(|_| format!("invalid pid: {arg}"))?;
        // DTrace reports a process that is not there with libdtrace's message alone (strerror's).
        const GONE: &str = "No such process";
        let Ok(pid) = u32::try_from(pid) else {
            return Err(GONE.to_string());
        };
        if pid == 0 || pid as i32 <= 0 {
            return Err(GONE.to_string());
        }
        if pid == std::process::id() {
            return Err(format!("failed to grab pid {pid}: process is traced"));
        }
        let mut f = Followed::attach(pid).map_err(|_| GONE.to_string())?;
        // Held stopped until `release`, so nothing it does between now and go is missed.
        f.stop()
            .map_err(|e| format!("failed to grab pid {pid}: {e}"))?;
        self.list.push((Victim::Grabbed(f), true));
        Ok(pid)
    }

    /// Runs each created command on to its program's entry point (its start-up libraries then
    /// mapped), still held.
    pub fn run_to_entry(&mut self) -> Result<(), String> {
        for (v, _) in &mut self.list {
            if let Victim::Created(c) = v {
                let pid = c.pid();
                c.run_to_entry()
                    .map_err(|e| format!("failed to run pid {pid} to its entry point: {e}"))?;
            }
        }
        Ok(())
    }

    /// Whether the run has processes (it then ends when the last of them has).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// `dtrace_proc_continue` of every process: created commands and grabbed ones run again.
    pub fn release(&mut self) -> Result<(), String> {
        for (v, _) in &mut self.list {
            match v {
                Victim::Created(c) => c.release().map_err(|e| e.to_string())?,
                Victim::Grabbed(f) => f.resume(),
            }
        }
        Ok(())
    }

    /// DTrace's notices for the processes that ended since the last call (`pid N has exited`,
    /// `pid N exited with status S`, `pid N terminated by SIGNAME`).
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    /// Notes the processes that ended (without blocking); true if any did since the last call.
    pub fn poll(&mut self) -> bool {
        let before = self.notices.len();
        for (v, live) in &mut self.list {
            if !*live {
                continue;
            }
            let pid = v.pid();
            let ended = match v {
                Victim::Created(c) => match c.try_wait() {
                    Ok(Some(s)) => Some(Some(s)),
                    Ok(None) => None,
                    Err(_) => Some(None),
                },
                Victim::Grabbed(f) => match f.wait_exit(std::time::Duration::ZERO) {
                    Ok(true) | Err(_) => Some(None),
                    Ok(false) => None,
                },
            };
            if let Some(status) = ended {
                *live = false;
                self.notices.push(exit_notice(pid, status));
            }
        }
        self.notices.len() > before
    }

    /// Descriptors that become readable when a process still alive ends, for the main loop to
    /// wait on.
    pub fn exit_fds(&self) -> Vec<std::os::fd::RawFd> {
        self.list
            .iter()
            .filter(|(_, live)| *live)
            .filter_map(|(v, _)| match v {
                Victim::Created(c) => c.exit_fd(),
                Victim::Grabbed(f) => Some(f.exit_fd()),
            })
            .collect()
    }

    /// How many processes are still alive (`g_pslive`).
    pub fn live(&self) -> usize {
        self.list.iter().filter(|(_, l)| *l).count()
    }
}

impl Drop for Procs {
    /// Created commands still running when the run ends are killed, as DTrace does on close;
    /// grabbed processes are left to run (let go if still held, by `Followed`'s drop).
    fn drop(&mut self) {
        for (v, live) in &mut self.list {
            if let (Victim::Created(c), true) = (v, *live) {
                // SAFETY: signalling our own child, which we have not reaped yet.
                unsafe {
                    libc::kill(c.pid() as libc::pid_t, libc::SIGKILL);
                }
                let _ = c.wait();
            }
        }
    }
}

/// DTrace's notice for a process that ended (without the `dtrace: ` prefix).
pub fn exit_notice(pid: u32, status: Option<ExitStatus>) -> String {
    match status {
        Some(ExitStatus::Signaled(sig)) => format!("pid {pid} terminated by {}", signame(sig)),
        Some(ExitStatus::Exited(code)) if code != 0 => {
            format!("pid {pid} exited with status {code}")
        }
        _ => format!("pid {pid} has exited"),
    }
}

/// A signal's name as `proc_signame` gives it (`SIGKILL`), or its number when unknown.
pub fn signame(sig: i32) -> String {
    let names = [
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGTRAP, "SIGTRAP"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGCHLD, "SIGCHLD"),
        (libc::SIGCONT, "SIGCONT"),
        (libc::SIGSTOP, "SIGSTOP"),
        (libc::SIGTSTP, "SIGTSTP"),
        (libc::SIGTTIN, "SIGTTIN"),
        (libc::SIGTTOU, "SIGTTOU"),
        (libc::SIGURG, "SIGURG"),
        (libc::SIGXCPU, "SIGXCPU"),
        (libc::SIGXFSZ, "SIGXFSZ"),
        (libc::SIGVTALRM, "SIGVTALRM"),
        (libc::SIGPROF, "SIGPROF"),
        (libc::SIGWINCH, "SIGWINCH"),
        (libc::SIGIO, "SIGIO"),
        (libc::SIGPWR, "SIGPWR"),
        (libc::SIGSYS, "SIGSYS"),
    ];
    names
        .iter()
        .find(|(n, _)| *n == sig)
        .map_or_else(|| format!("signal {sig}"), |(_, s)| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_and_argv() {
        assert_eq!(make_argv(" sleep \t 1 "), vec!["sleep", "1"]);
        assert_eq!(
            exit_notice(7, Some(ExitStatus::Exited(0))),
            "pid 7 has exited"
        );
        assert_eq!(
            exit_notice(7, Some(ExitStatus::Exited(3))),
            "pid 7 exited with status 3"
        );
        assert_eq!(
            exit_notice(7, Some(ExitStatus::Signaled(libc::SIGKILL))),
            "pid 7 terminated by SIGKILL"
        );
        assert_eq!(exit_notice(7, None), "pid 7 has exited");
    }

    #[test]
    fn bad_commands_and_pids() {
        let mut p = Procs::default();
        assert_eq!(
            p.create("/nonexistent/cmd x").unwrap_err(),
            "failed to execute /nonexistent/cmd: cannot find executable file"
        );
        assert_eq!(p.grab("12x").unwrap_err(), "invalid pid: 12x");
        assert!(p.is_empty());
    }
}
