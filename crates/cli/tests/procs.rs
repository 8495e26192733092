//! `dtrace -c` and `-p` end to end: `$target`, the run ending with its processes (END fires and the
//! aggregations print), DTrace's notices and errors, a created command killed when `dtrace` exits
//! first, and the context timer probes fire in when they run on the framework's timers (the `dtrace`
//! process itself; on perf events see `tests/profile.rs`).

mod common;
use common::Out;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn dtrace(args: &[&str]) -> Out {
    common::dtrace(args).into()
}

#[test]
fn c_runs_the_command_and_ends_with_it() {
    let o = dtrace(&[
        "-qn",
        "tick-10ms { n++; } END { printf(\"%d %d\\n\", $target > 0, n > 0); @[\"x\"] = count(); }",
        "-c",
        "sleep 0.3",
    ]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "1 1\n\n  x                                                                 1\n"
    );
    assert_eq!(o.stderr, "");
}

#[test]
fn c_target_is_the_commands_pid_and_notices_its_exit() {
    // The command prints its own pid, which must be $target.
    let prog = std::env::temp_dir().join(format!("dtrace-procs-{}-pid.sh", std::process::id()));
    std::fs::write(&prog, "#!/bin/sh\necho $$\n").unwrap();
    let o = dtrace(&[
        "-n",
        "END { printf(\"target=%d\\n\", $target); }",
        "-c",
        &format!("sh {}", prog.display()),
    ]);
    let _ = std::fs::remove_file(&prog);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    let mut lines = o.stdout.lines();
    let child_pid: u32 = lines.next().unwrap().trim().parse().unwrap();
    assert!(
        o.stdout.contains(&format!("target={child_pid}")),
        "{}",
        o.stdout
    );
    assert_eq!(
        o.stderr,
        format!("dtrace: description 'END ' matched 1 probe\ndtrace: pid {child_pid} has exited\n")
    );
    let o = dtrace(&["-n", "END {}", "-c", "false"]);
    assert_eq!(o.rc, 0);
    assert!(
        o.stderr.ends_with("exited with status 1\n") && o.stderr.contains("dtrace: pid "),
        "{}",
        o.stderr
    );
}

#[test]
fn c_command_is_killed_when_dtrace_exits_first() {
    let o = dtrace(&[
        "-qn",
        "tick-10ms { printf(\"%d\\n\", $target); exit(0); }",
        "-c",
        "sleep 60",
    ]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    let pid: u32 = o.stdout.trim().parse().unwrap();
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
}

#[test]
fn bad_commands_and_pids() {
    let o = dtrace(&["-n", "BEGIN", "-c", "/nonexistent/prog"]);
    assert_eq!(o.rc, 1);
    assert_eq!(
        o.stderr,
        "dtrace: failed to execute /nonexistent/prog: cannot find executable file\n"
    );
    let o = dtrace(&["-n", "BEGIN", "-p", "12abc"]);
    assert_eq!(
        (o.rc, o.stderr.as_str()),
        (1, "dtrace: invalid pid: 12abc\n")
    );
    // A pid above pid_max never names a process.
    let o = dtrace(&["-n", "BEGIN", "-p", "2147483600"]);
    assert_eq!((o.rc, o.stderr.as_str()), (1, "dtrace: No such process\n"));
}

#[test]
fn p_follows_a_process_until_it_exits() {
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let mut d = Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .args([
            "-x",
            "switchrate=10ms",
            "-qn",
            "BEGIN { printf(\"go %d\\n\", $target); } END { printf(\"end\\n\"); }",
            "-p",
            &pid,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(d.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, format!("go {pid}\n"));
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    let status = d.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(rest, "end\n\n");
}

/// Whether `dtrace` runs profile probes on perf events here (the kernel backend loads and may open
/// cpu-clock events); otherwise they are the framework's timers.
fn profile_on_perf_events() -> bool {
    dtrace_linux::Catalog::load().is_ok()
        && dtrace_linux::provider::profile::perf_profile_available()
}

#[test]
fn timer_probes_fire_in_the_dtrace_process() {
    if profile_on_perf_events() {
        // Covered by tests/profile.rs: they fire in whatever thread they interrupt.
        return;
    }
    let o = dtrace(&[
        "-qn",
        "tick-10ms { printf(\"%s %d %d %d\\n\", execname, pid == $pid, tid == $pid, ppid == $ppid); exit(0); }",
    ]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert_eq!(o.stdout, "dtrace 1 1 1\n\n");
    let o = dtrace(&[
        "-qn",
        "profile-97 { printf(\"%s %d\\n\", execname, pid == $pid); exit(0); }",
    ]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert!(o.stdout.starts_with("dtrace 1\n"), "{}", o.stdout);
}
