//! An idle `dtrace` sleeps in the kernel until something is due, and wakes for what comes (root,
//! BPF, tracefs; skipped otherwise): over an idle run its main loop wakes a few times a second
//! (its rates and timers), not every few milliseconds, while its ticks still fire; a busy ring
//! is read in time, losing nothing; a `-c` command's end and a SIGINT end a run whose rates are a
//! minute long at once (each would otherwise wait out the minute: the watchdog here is a hang
//! check, not a timing threshold), and so does a traced process stopped by the run-time
//! linker's hook (gcc too). Wake-ups are counted by `DTRACE_REPORT_WAKEUPS=1`.

mod common;
use common::{compile_c, dtrace_with_env, have_gcc, kernel_ok, test_dir};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const REPORT: (&str, &str) = ("DTRACE_REPORT_WAKEUPS", "1");

/// The wake-ups `dtrace: N wake-ups` reports on stderr.
fn wakeups(err: &str) -> u64 {
    err.lines()
        .find_map(|l| l.strip_prefix("dtrace: ")?.strip_suffix(" wake-ups"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no wake-up count in: {err}"))
}

/// Rates of a minute: between them only the tracer's own sources, a signal or a process's end
/// wake the loop.
const SLOW: [&str; 6] = [
    "-x",
    "switchrate=60s",
    "-x",
    "statusrate=60s",
    "-x",
    "aggrate=60s",
];

/// Waits for `child` to end, killing it (and failing) if it is still running after a generous
/// `limit` (what it waits for would otherwise take a minute).
fn ended_within(mut child: Child, limit: Duration, what: &str) -> std::process::Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("dtrace slept through {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Runs `dtrace FLAGS -n 'CLAUSE tick-1s {...} tick-3s { exit(0); }'`, whose `clause` never
/// fires, and asserts the ticks fire while the main loop wakes a few times a second: a loop
/// polling (or reading a ring) every 5 ms wakes ~600 times in 3 s; one sleeping until its rates
/// (1 s apart) and its timers are due wakes a few times a second.
fn assert_sleeps_while_idle(flags: &str, clause: &str) {
    let script = format!("{clause} tick-1s {{ printf(\"tick\\n\"); }} tick-3s {{ exit(0); }}");
    let (rc, out, err) = dtrace_with_env(&[REPORT], &[flags, "-n", &script]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.lines().filter(|l| *l == "tick").count() >= 2,
        "the ticks fire: {out}"
    );
    let n = wakeups(&err);
    assert!(n <= 40, "{n} wake-ups over 3 idle seconds");
}

#[test]
fn an_idle_run_wakes_only_when_something_is_due() {
    if !kernel_ok("an_idle_run_wakes_only_when_something_is_due") {
        return;
    }
    // The predicate is false in the kernel: nothing reaches the ring for 3 seconds.
    assert_sleeps_while_idle("-q", "syscall::getppid:entry /pid == 1/ { printf(\"x\"); }");
}

/// A `raise()` clause whose signal the probe sends (its predicate runs in the kernel) puts no
/// clock on the run: while nothing fires it sleeps as any idle run. (One whose signal dtrace
/// sends reads the ring every 5 ms: see `SIGNAL_POLL` in dtrace-linux.)
#[test]
fn an_idle_run_with_a_raise_clause_wakes_only_when_something_is_due() {
    if !kernel_ok("an_idle_run_with_a_raise_clause_wakes_only_when_something_is_due") {
        return;
    }
    assert_sleeps_while_idle(
        "-qw",
        "syscall::getppid:entry /pid == 1/ { raise(SIGUSR1); }",
    );
}

/// An `on-cpu` clause reading `execargs` (completed from the live process when its record is
/// read) does not put the run on a clock either: its records wake dtrace as they come (its ring
/// was read every 5 ms before).
#[test]
fn an_idle_run_with_on_cpu_execargs_wakes_only_when_something_is_due() {
    if !kernel_ok("an_idle_run_with_on_cpu_execargs_wakes_only_when_something_is_due") {
        return;
    }
    assert_sleeps_while_idle("-q", "sched:::on-cpu /pid == 999999/ { trace(execargs); }");
}

#[test]
fn a_busy_ring_is_read_in_time_and_loses_nothing() {
    if !kernel_ok("a_busy_ring_is_read_in_time_and_loses_nothing") {
        return;
    }
    // 100000 records, each printed (more than the capture ring holds unread): the consumer
    // keeps reading while records come, and the ring wakes it once it fills up, so none is
    // dropped. (The principal buffers, 4 MB a CPU, hold a second of them.)
    const N: usize = 100_000;
    let cmd = format!("dd if=/dev/zero of=/dev/null bs=1 count={N} status=none");
    let (rc, out, err) = dtrace_with_env(
        &[REPORT],
        &[
            "-q",
            "-c",
            &cmd,
            "-n",
            "syscall::write:entry /pid == $target/ { printf(\"%d\\n\", arg2); }",
        ],
    );
    assert_eq!(rc, 0, "{err}");
    assert!(!err.contains("drop"), "{err}");
    assert_eq!(out.lines().filter(|l| *l == "1").count(), N, "{err}");
}

#[test]
fn a_commands_end_wakes_the_run() {
    if !kernel_ok("a_commands_end_wakes_the_run") {
        return;
    }
    let mut args = vec![
        "-q",
        "-c",
        "sleep 0.2",
        "-n",
        "syscall::getppid:entry /pid == 1/ { printf(\"x\"); }",
    ];
    args.extend(SLOW);
    let child = Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .env(REPORT.0, REPORT.1)
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = ended_within(child, Duration::from_secs(30), "its command's end");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(wakeups(&err) <= 5, "{err}");
}

#[test]
fn sigint_wakes_the_run() {
    if !kernel_ok("sigint_wakes_the_run") {
        return;
    }
    let mut args = vec![
        "-q",
        "-n",
        "BEGIN { printf(\"ready\\n\"); } syscall::getppid:entry /pid == 1/ { printf(\"x\"); } \
         END { printf(\"end\\n\"); }",
    ];
    args.extend(SLOW);
    let mut child = Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // BEGIN's output comes with the first read of the buffers, once tracing has started.
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let o = ended_within(child, Duration::from_secs(30), "SIGINT");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(rest.contains("end"), "END fires: {rest}");
}

/// Loads and unloads libm five times (each time the run-time linker's hook stops it until dtrace
/// has placed the probes the library brings), then calls `after()`.
const LOADER: &str = r#"
#include <dlfcn.h>
void __attribute__((noinline)) after(void) { __asm__ volatile(""); }
int main(void) {
    for (int i = 0; i < 5; i++) {
        void *h = dlopen("libm.so.6", RTLD_NOW);
        if (!h)
            return 1;
        dlclose(h);
    }
    after();
    return 0;
}
"#;

#[test]
fn a_process_stopped_in_its_linker_wakes_the_run() {
    if !kernel_ok("a_process_stopped_in_its_linker_wakes_the_run")
        || !have_gcc("a_process_stopped_in_its_linker_wakes_the_run")
    {
        return;
    }
    let dir = test_dir("idle-loader");
    let exe = compile_c(&dir, "loader", LOADER, &["-O1", "-ldl"]);
    let exe = exe.display().to_string();
    let mut args = vec![
        "-q",
        "-c",
        &exe,
        "-n",
        "pid$target::after:entry { printf(\"after\\n\"); }",
    ];
    args.extend(SLOW);
    let child = Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Each of the ten or more stops would otherwise wait out a minute.
    let o = ended_within(
        child,
        Duration::from_secs(30),
        "a process stopped in its linker",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "after", "{err}");
}
