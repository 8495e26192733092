//! `dtrace -p`: the grabbed process is held stopped (ptrace stop, state `t`) from the grab until
//! tracing has started, then runs again; it is let go on every way out (a compile error, `dtrace`
//! killed). The target is a program compiled here that counts in a tight loop, writing its counter
//! to a file; the script comes through a FIFO so the test decides when enabling proceeds.

mod common;
use common::kernel_ok;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const PROG: &str = r#"
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
static int fd;
/* Counts in a tight loop, writing the count at offset 8 * slot. */
static void *count(void *slot) {
    unsigned long n = 0;
    for (;;) {
        n++;
        pwrite(fd, &n, sizeof n, 8 * (long)slot);
    }
    return 0;
}
int main(int argc, char **argv) {
    pthread_t t;
    if (argc < 2 || (fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644)) < 0)
        return 2;
    /* With a third argument, a second thread counts too. */
    if (argc > 2)
        pthread_create(&t, 0, count, (void *)1);
    count((void *)0);
}
"#;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| common::test_dir("grab"))
}

/// The counting program, compiled once; None without gcc.
fn prog() -> Option<&'static PathBuf> {
    static PROG_PATH: OnceLock<Option<PathBuf>> = OnceLock::new();
    PROG_PATH
        .get_or_init(|| {
            if !dtrace_testkit::skip_unless(
                dtrace_testkit::have_program("gcc"),
                "grab",
                "needs gcc",
            ) {
                return None;
            }
            Some(common::compile_c(
                dir(),
                "counter",
                PROG,
                &["-O1", "-pthread"],
            ))
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
        Counter::start_threads(exe, name, 1)
    }
    /// With `threads` (1 or 2) counting threads.
    fn start_threads(exe: &Path, name: &str, threads: usize) -> Counter {
        let file = dir().join(format!("{name}.count"));
        let mut cmd = Command::new(exe);
        cmd.arg(&file);
        if threads > 1 {
            cmd.arg("2");
        }
        let child = cmd.spawn().unwrap();
        let c = Counter { child, file };
        let t0 = Instant::now();
        while c.values().len() < threads || c.values().contains(&0) {
            assert!(t0.elapsed() < Duration::from_secs(20), "counter never ran");
            std::thread::sleep(Duration::from_millis(5));
        }
        c
    }
    fn pid(&self) -> u32 {
        self.child.id()
    }
    /// The main thread's count.
    fn value(&self) -> u64 {
        self.values().first().copied().unwrap_or(0)
    }
    /// Every thread's count.
    fn values(&self) -> Vec<u64> {
        let b = std::fs::read(&self.file).unwrap_or_default();
        b.chunks_exact(8)
            .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    }
    /// The process's state: `t` only when every thread is in a tracing stop.
    fn state(&self) -> char {
        let mut states = Vec::new();
        for t in std::fs::read_dir(format!("/proc/{}/task", self.pid())).unwrap() {
            let path = t.unwrap().path().join("stat");
            let s = std::fs::read_to_string(path).unwrap_or_default();
            if let Some(i) = s.rfind(')') {
                states.extend(s[i + 2..].chars().next());
            }
        }
        if !states.is_empty() && states.iter().all(|&c| c == 't') {
            't'
        } else {
            states.into_iter().find(|&c| c != 't').unwrap_or('?')
        }
    }
    /// Waits up to 20 s for the state to become (or stop being) `t`.
    fn wait_state(&self, stopped: bool) {
        let t0 = Instant::now();
        while (self.state() == 't') != stopped {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "state stayed {}",
                self.state()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    /// Asserts the counter does not move for a while.
    fn assert_frozen(&self) {
        let a = self.values();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(self.values(), a, "the held process ran");
        assert_eq!(self.state(), 't');
    }
    /// Asserts the counter moves.
    fn assert_running(&self) {
        self.wait_state(false);
        let a = self.value();
        let t0 = Instant::now();
        while self.value() == a {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
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

#[test]
fn grabbed_process_is_stopped_until_tracing_starts() {
    let Some(exe) = prog() else {
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
    let kernel = kernel_ok("grabbed_process_is_stopped_until_tracing_starts (pwrite64 check)");
    let text = if kernel {
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
    if kernel {
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
    // Failing to enable (a description matching no probe) lets it go as well.
    let d = dtrace_on_fifo(c.pid(), &script, &[]);
    c.wait_state(true);
    c.assert_frozen();
    std::fs::write(&script, "nosuchprovider:::nosuchprobe { }\n").unwrap();
    let o = d.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("does not match any probes"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    c.assert_running();
}

#[test]
fn every_thread_of_the_grabbed_process_is_held() {
    let Some(exe) = prog() else {
        return;
    };
    let c = Counter::start_threads(exe, "threads", 2);
    let script = fifo("threads");
    let d = dtrace_on_fifo(c.pid(), &script, &[]);
    c.wait_state(true);
    c.assert_frozen();
    std::fs::write(&script, "BEGIN { exit(0); }\n").unwrap();
    let o = d.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    c.assert_running();
}

#[test]
fn grabbed_process_runs_again_when_dtrace_is_killed_or_interrupted() {
    let Some(exe) = prog() else {
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
