//! dtrace tracing its own system calls (`-P syscall`, `/pid == $pid/`) ends as asked, with the
//! kernel paths on and off: reading a record must not make the records it then reads (a
//! `getpid()` per record, and a batch that read the ring as it went, fed each other and never
//! ended: `dtrace -qwP syscall '{chill(15); printf(...); exit(0);}'` spun at start, deaf to
//! SIGTERM, with the interpreter running the clauses) (root, BPF, tracefs).

mod common;
use common::{kernel_ok, kernel_paths_off};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `dtrace args` with `env`, killed after 60 s: (exit status, stdout, stderr), `None` as
/// the status if it had to be killed.
fn dtrace_in_time(env: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .envs(env.iter().copied())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (_, out, err) = common::outcome(&child.wait_with_output().unwrap());
    (status, out, err)
}

#[test]
fn dtrace_tracing_its_own_syscalls_exits_when_asked() {
    let t = "dtrace_tracing_its_own_syscalls_exits_when_asked";
    if !kernel_ok(t) {
        return;
    }
    let scripts = [
        "syscall::: { chill(15); printf(\"Done chilling\"); exit(0); }",
        "syscall::: /pid == $pid/ { printf(\"%s\", probefunc); exit(0); }",
    ];
    for script in scripts {
        for env in [Vec::new(), kernel_paths_off()] {
            let (rc, out, err) = dtrace_in_time(&env, &["-qw", "-n", script]);
            assert_eq!(rc, Some(0), "{script} {env:?}: {err}");
            assert!(!out.is_empty(), "{script} {env:?}: {err}");
        }
    }
}
