//! `dtrace -p`: the grabbed process is held stopped (ptrace stop, state `t`) from the grab until
//! tracing has started, then runs again; it is let go on every way out (a compile error, `dtrace`
//! killed). The target is a program compiled here that counts in a tight loop, writing its counter
//! to a file; the script comes through a FIFO so the test decides when enabling proceeds.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const PROG: &str = r#"
#include <fcntl.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd;
    unsigned long n = 0;
    if (argc < 2 || (fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644)) < 0)
        return 2;
    for (;;) {
        n++;
        pwrite(fd, &n, sizeof n, 0);
    }
}
"#;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("dtrace-cli-grab-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    })
}

/// The counting program, compiled once; None without gcc.
fn prog() -> Option<&'static PathBuf> {
    static PROG_PATH: OnceLock<Option<PathBuf>> = OnceLock::new();
    PROG_PATH
        .get_or_init(|| {
            if !dtrace_testkit::have_program("gcc") {
                return None;
            }
            let src = dir().join("counter.c");
            let exe = dir().join("counter");
            std::fs::write(&src, PROG).unwrap();
            let st = Command::new("gcc")
                .args(["-O1", "-o"])
                .arg(&exe)
                .arg(&src)
                .status()
                .unwrap();
            assert!(st.success(), "gcc failed");
            Some(exe)
        })
        .as_ref()
}

/// A running counter and the file it writes.
struct Counter {
    child: Child,
    file: PathBuf,
}

impl Counter {
    fn start(exe: &Path, name: &str) -> Counter {
        let file = dir().join(format!("{name}.count"));
        let child = Command::new(exe).arg(&file).spawn().unwrap();
        let c = Counter { child, file };
        let t0 = Instant::now();
        while c.value() == 0 {
            assert!(t0.elapsed() < Duration::from_secs(5), "counter never ran");
            std::thread::sleep(Duration::from_millis(5));
        }
        c
    }
    fn pid(&self) -> u32 {
        self.child.id()
    }
    fn value(&self) -> u64 {
        let b = std::fs::read(&self.file).unwrap_or_default();
        b.get(..8)
            .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
            .unwrap_or(0)
    }
    fn state(&self) -> char {
        let s = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        s[s.rfind(')').unwrap() + 2..].chars().next().unwrap()
    }
    /// Waits up to 5 s for the state to become (or stop being) `t`.
    fn wait_state(&self, stopped: bool) {
        let t0 = Instant::now();
        while (self.state() == 't') != stopped {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "state stayed {}",
                self.state()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    /// Asserts the counter does not move for a while.
    fn assert_frozen(&self) {
        let a = self.value();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(self.value(), a, "the held process ran");
        assert_eq!(self.state(), 't');
    }
    /// Asserts the counter moves.
    fn assert_running(&self) {
        self.wait_state(false);
        let a = self.value();
        let t0 = Instant::now();
        while self.value() == a {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "process left stopped"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.file);
    }
}

fn fifo(name: &str) -> PathBuf {
    let p = dir().join(format!("{name}.d"));
    let _ = std::fs::remove_file(&p);
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    p
}

/// Starts `dtrace -q -p PID -s FIFO extra...`; it grabs, then blocks reading the script.
fn dtrace_on_fifo(pid: u32, script: &Path, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .args(["-q", "-x", "switchrate=10ms", "-p", &pid.to_string(), "-s"])
        .arg(script)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn kernel_ok() -> bool {
    dtrace_testkit::is_root()
        && dtrace_linux::bpf_available()
        && dtrace_linux::tracefs::ensure_tracefs().is_ok()
}

#[test]
fn grabbed_process_is_stopped_until_tracing_starts() {
    let Some(exe) = prog() else {
        eprintln!("skipped: needs gcc");
        return;
    };
    let c = Counter::start(exe, "go");
    let script = fifo("go");
    let mut d = dtrace_on_fifo(c.pid(), &script, &[]);
    c.wait_state(true);
    c.assert_frozen();
    let held_at = c.value();
    // With the kernel providers, the first write traced carries the next count: nothing ran
    // between the grab and go.
    let text = if kernel_ok() {
        "BEGIN { printf(\"began %d\\n\", $target); }\n\
         syscall::pwrite64:entry /pid == $target/ \
         { printf(\"%d\\n\", *(uint64_t *)copyin(arg1, 8)); exit(0); }\n"
    } else {
        "BEGIN { printf(\"began %d\\n\", $target); }\ntick-50ms { exit(0); }\n"
    };
    std::fs::write(&script, text).unwrap();
    let mut out = BufReader::new(d.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, format!("began {}\n", c.pid()));
    if kernel_ok() {
        line.clear();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, format!("{}\n", held_at + 1));
    }
    let st = d.wait().unwrap();
    assert_eq!(st.code(), Some(0));
    c.assert_running();
}

#[test]
fn grabbed_process_runs_again_after_a_compile_error() {
    let Some(exe) = prog() else {
        eprintln!("skipped: needs gcc");
        return;
    };
    let c = Counter::start(exe, "err");
    let script = fifo("err");
    let d = dtrace_on_fifo(c.pid(), &script, &[]);
    c.wait_state(true);
    c.assert_frozen();
    std::fs::write(&script, "BEGIN { this is not D }\n").unwrap();
    let o = d.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).starts_with("dtrace: failed to compile script"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    c.assert_running();
}

#[test]
fn grabbed_process_runs_again_when_dtrace_is_killed_or_interrupted() {
    let Some(exe) = prog() else {
        eprintln!("skipped: needs gcc");
        return;
    };
    let c = Counter::start(exe, "kill");
    let script = fifo("kill");
    let mut d = dtrace_on_fifo(c.pid(), &script, &[]);
    c.wait_state(true);
    c.assert_frozen();
    d.kill().unwrap();
    d.wait().unwrap();
    c.assert_running();

    // SIGTERM while held: the run proceeds to go (the process is let go), then ends.
    let mut d = dtrace_on_fifo(c.pid(), &script, &[]);
    c.wait_state(true);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(d.id() as i32, libc::SIGTERM) };
    let mut w = std::fs::OpenOptions::new()
        .write(true)
        .open(&script)
        .unwrap();
    w.write_all(b"tick-1s { }\n").unwrap();
    drop(w);
    let st = d.wait().unwrap();
    assert_eq!(st.code(), Some(0));
    c.assert_running();
}

#[test]
fn a_second_grab_of_a_held_process_is_refused() {
    let Some(exe) = prog() else {
        eprintln!("skipped: needs gcc");
        return;
    };
    let c = Counter::start(exe, "twice");
    let script = fifo("twice");
    let mut d = dtrace_on_fifo(c.pid(), &script, &[]);
    c.wait_state(true);
    let o = Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .args(["-n", "BEGIN", "-p", &c.pid().to_string()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "dtrace: failed to grab pid {}: process is traced\n",
            c.pid()
        )
    );
    d.kill().unwrap();
    d.wait().unwrap();
    c.assert_running();
}
