//! `dtrace` probe context on the real kernel (root, BPF, tracefs and the kernel's BTF; gcc for the
//! programs compiled here; skipped otherwise): `sched:::on-cpu` describes the thread going on CPU
//! through every identity value and `curthread`; `caller`, `ucaller`, `execargs` and `progenyof()`
//! give what DTrace documents; `proc:::exit` gives the exit reason and fires once per process;
//! `sched:::wakeup`, `proc:::create`, `lwp-create`, `signal-send` and `change-pri` give the `lwpsinfo_t *`/`psinfo_t *`
//! arguments DTrace documents (the paper's `@[args[1]->pr_fname] = count()` among them).

mod common;
use common::dtrace;
use std::path::{Path, PathBuf};

fn ready(test: &str) -> bool {
    common::kernel_ok(test) && common::have_btf(test)
}

fn scratch_dir(what: &str) -> PathBuf {
    common::test_dir(&format!("kctx-{what}"))
}

/// Compiles `src` with frame pointers (and pthreads) into `name` in a scratch directory.
fn compile(name: &str, src: &str) -> PathBuf {
    let flags = ["-O1", "-fno-omit-frame-pointer", "-pthread"];
    common::compile_c(&scratch_dir(name), name, src, &flags)
}

/// Splits `a=b a=b ...` lines and checks each pair is equal; returns the lines' pairs.
fn equal_pairs(out: &str, per_line: usize) -> Vec<Vec<(String, String)>> {
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert!(!lines.is_empty(), "no output");
    lines
        .iter()
        .map(|l| {
            let pairs: Vec<(String, String)> = l
                .split(' ')
                .map(|p| {
                    let (a, b) = p.split_once('=').unwrap_or_else(|| panic!("{l}"));
                    (a.to_string(), b.to_string())
                })
                .collect();
            assert_eq!(pairs.len(), per_line, "{l}");
            for (a, b) in &pairs {
                assert_eq!(a, b, "{l}");
            }
            pairs
        })
        .collect()
}

#[test]
fn on_cpu_describes_the_thread_going_on_cpu() {
    if !ready("on_cpu_describes_the_thread_going_on_cpu") {
        return;
    }
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"sched:::on-cpu /pid == $target/ {
            printf("%d=%d %d=%d %d=%d %d=%d %d=%d %s=%s %s=%s %d=%d %d=%d %d=%d\n",
                curthread->tgid, pid, $target, pid, curthread->pid, tid, curpsinfo->pr_pid, pid,
                curlwpsinfo->pr_lwpid, tid, stringof(curthread->comm), execname,
                curpsinfo->pr_fname, execname, curpsinfo->pr_ppid, ppid,
                curthread->real_parent->tgid, ppid, curpsinfo->pr_uid, uid);
        }"#,
        "-c",
        "sleep 0.2",
    ]);
    assert_eq!(rc, 0, "{err}");
    let lines = equal_pairs(&out, 10);
    // The target runs as "sleep" once exec'd: at least its switch-in after the sleep shows it.
    assert!(lines.iter().any(|p| p[5].0 == "sleep"), "{out}");
    // Its parent is dtrace, not this test process.
    let me = std::process::id().to_string();
    assert!(lines.iter().all(|p| p[7].0 != me), "{out}");
}

#[test]
fn on_cpu_execargs_and_progenyof_are_the_incoming_process() {
    if !ready("on_cpu_execargs_and_progenyof_are_the_incoming_process") {
        return;
    }
    let dir = scratch_dir("oncpu");
    let sh = dir.join("two.sh");
    std::fs::write(&sh, "sleep 0.3\nsleep 0.3\n").unwrap();
    let cmd = format!("sh {}", sh.display());
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"sched:::on-cpu /pid == $target && execname == "sh"/ {
            printf("[%s] %d %d\n", execargs, progenyof($target), progenyof($target + 1000000));
        }"#,
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    let want = format!("[{cmd}] 1 0");
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    // The shell's arguments, read from the process at delivery: empty once it has exited.
    assert!(lines.contains(&want.as_str()), "{out}");
    assert!(lines.iter().all(|l| *l == want || *l == "[] 1 0"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn on_cpu_stack_is_the_incoming_threads() {
    if !ready("on_cpu_stack_is_the_incoming_threads") {
        return;
    }
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"sched:::on-cpu /pid == $target && execname == "sleep"/ { printf("[%a]", caller); stack(); }"#,
        "-c",
        "sleep 0.2",
    ]);
    assert_eq!(rc, 0, "{err}");
    // The sleeper comes back on CPU inside its nanosleep (the outgoing thread, often idle, would
    // show the scheduler's idle loop or another process's path instead).
    let woke: Vec<&str> = out.split('[').filter(|r| r.contains("nanosleep")).collect();
    assert!(!woke.is_empty(), "{out}");
    for rec in woke {
        let (caller, stack) = rec.split_once(']').unwrap_or_else(|| panic!("{out}"));
        let first = stack.lines().map(str::trim).find(|l| !l.is_empty());
        assert_eq!(first, Some(caller), "{out}");
        assert!(!stack.contains("bpf"), "{out}");
    }
}

#[test]
fn off_cpu_and_sleep_describe_the_outgoing_thread() {
    if !ready("off_cpu_and_sleep_describe_the_outgoing_thread") {
        return;
    }
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"sched:::off-cpu, sched:::sleep /pid == $target && execname == "sleep"/ {
            printf("%d=%d %d=%d %s=%s\n", curthread->tgid, pid, curthread->pid, tid,
                stringof(curthread->comm), execname);
        }"#,
        "-c",
        "sleep 0.2",
    ]);
    assert_eq!(rc, 0, "{err}");
    equal_pairs(&out, 3);
}

/// At one switch, `sleep` fires before `off-cpu` (as DTrace, whose `sleep` fires before the
/// thread gives up the CPU), whichever clause names its probe first and on every kernel: both are
/// raw tracepoint programs at `sched_switch`, run in the order they were enabled.
#[test]
fn sleep_fires_before_off_cpu() {
    if !ready("sleep_fires_before_off_cpu") {
        return;
    }
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"sched:::off-cpu /pid == $target/ { printf("off-cpu\n"); }
           sched:::sleep /pid == $target/ { printf("sleep\n"); }"#,
        "-c",
        "sleep 0.2",
    ]);
    assert_eq!(rc, 0, "{err}");
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert!(lines.contains(&"sleep"), "{out}");
    for (i, l) in lines.iter().enumerate() {
        if *l == "sleep" {
            assert_eq!(lines.get(i + 1), Some(&"off-cpu"), "{out}");
        }
    }
}

#[test]
fn caller_is_the_first_frame_of_the_kernel_stack() {
    if !ready("caller_is_the_first_frame_of_the_kernel_stack") {
        return;
    }
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"syscall::write:entry /pid == $target/ { printf("[%a]", caller); stack(1); }"#,
        "-c",
        "dd if=/dev/zero of=/dev/null bs=1 count=1 status=none",
    ]);
    assert_eq!(rc, 0, "{err}");
    let (caller, frame) = out.split_once(']').unwrap_or_else(|| panic!("{out}"));
    let caller = caller.trim_start_matches('[');
    // A kernel function of the syscall path, named, not the tracing machinery.
    assert!(caller.starts_with("vmlinux`"), "{out}");
    assert!(!caller.contains("bpf"), "{out}");
    assert_eq!(frame.trim(), caller, "{out}");
}

const UCALLER_PROG: &str = r#"
#include <unistd.h>
__attribute__((noinline)) void emit(void) { write(1, "x\n", 2); __asm__ volatile(""); }
__attribute__((noinline)) void outer(void) { emit(); __asm__ volatile(""); }
int main(void) { outer(); usleep(300000); return 0; }
"#;

#[test]
fn ucaller_is_the_second_frame_of_the_user_stack() {
    if !ready("ucaller_is_the_second_frame_of_the_user_stack")
        || !dtrace_testkit::skip_unless(dtrace_testkit::have_program("gcc"), "ucaller", "needs gcc")
    {
        return;
    }
    let exe = compile("ucaller", UCALLER_PROG);
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"syscall::write:entry /pid == $target/ { printf("[%A]\n", ucaller); ustack(2); }"#,
        "-c",
        &exe.display().to_string(),
    ]);
    assert_eq!(rc, 0, "{err}");
    // The program's own "x" shares the output.
    let mut lines = out
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && *l != "x");
    let first = lines.next().unwrap_or_else(|| panic!("{out}"));
    let caller = first
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let frames: Vec<&str> = lines.collect();
    assert_eq!(frames.len(), 2, "{out}");
    assert_eq!(caller, frames[1], "{out}");
    // With frame pointers, the frame above libc's write wrapper is in the program.
    assert!(caller.starts_with("ucaller`"), "{out}");
    let _ = std::fs::remove_dir_all(exe.parent().unwrap());
}

#[test]
fn execargs_and_progenyof() {
    if !ready("execargs_and_progenyof") {
        return;
    }
    let me = std::process::id();
    let script = format!(
        r#"syscall::write:entry /pid == $target/ {{
            printf("[%s] %d %d %d %d %d %d\n", execargs, progenyof($target), progenyof(ppid),
                progenyof({me}), progenyof(1), progenyof(2), progenyof($target + 1000000));
        }}"#
    );
    let (rc, out, err) = dtrace(&[
        "-qn",
        &script,
        "-c",
        "dd if=/dev/zero of=/dev/null bs=1 count=2 status=none",
    ]);
    assert_eq!(rc, 0, "{err}");
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 2, "{out}");
    for l in lines {
        // The process itself, its parent (dtrace), this test (dtrace's parent) and init are its
        // ancestors; kthreadd and an unused pid are not.
        assert_eq!(
            l,
            "[dd if=/dev/zero of=/dev/null bs=1 count=2 status=none] 1 1 1 1 0 0"
        );
    }
}

/// `proc:::exit` of the target: its `args[0]`, once per process.
fn exit_reasons(script_body: &str, dir: &Path) -> Vec<String> {
    let sh = dir.join("run.sh");
    std::fs::write(&sh, script_body).unwrap();
    let cmd = format!("sh {}", sh.display());
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"proc:::exit /pid == $target/ { printf("exit %d\n", args[0]); }"#,
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    out.lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn exit_reasons_follow_the_wait_status() {
    if !ready("exit_reasons_follow_the_wait_status") {
        return;
    }
    let dir = scratch_dir("exit");
    // CLD_EXITED, CLD_KILLED and (where the kernel writes core files to the process's directory)
    // CLD_DUMPED, as <sys/wait.h> numbers them.
    assert_eq!(exit_reasons("exit 3\n", &dir), ["exit 1"]);
    assert_eq!(exit_reasons("kill -9 $$\n", &dir), ["exit 2"]);
    let pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default();
    if !pattern.starts_with('|') && !pattern.contains('/') && !pattern.trim().is_empty() {
        let body = format!("ulimit -c unlimited\ncd {}\nkill -SEGV $$\n", dir.display());
        assert_eq!(exit_reasons(&body, &dir), ["exit 3"]);
    } else {
        eprintln!("exit_reasons_follow_the_wait_status: core dumps go to {pattern:?}; skipped");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

const THREADS_PROG: &str = r#"
#include <pthread.h>
static void *work(void *p) { return p; }
int main(void) {
    pthread_t t[3];
    for (int i = 0; i < 3; i++) pthread_create(&t[i], 0, work, 0);
    for (int i = 0; i < 3; i++) pthread_join(t[i], 0);
    return 0;
}
"#;

#[test]
fn exit_fires_once_per_process_and_lwp_exit_per_thread() {
    if !ready("exit_fires_once_per_process_and_lwp_exit_per_thread")
        || !dtrace_testkit::skip_unless(dtrace_testkit::have_program("gcc"), "threads", "needs gcc")
    {
        return;
    }
    let exe = compile("threads", THREADS_PROG);
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"proc:::exit /pid == $target/ { @e = count(); @r = max(args[0]); }
           proc:::lwp-exit /pid == $target/ { @l = count(); }
           END { printa("exit %@d ", @e); printa("reason %@d ", @r); printa("lwp %@d\n", @l); }"#,
        "-c",
        &exe.display().to_string(),
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out.trim(), "exit 1 reason 1 lwp 4", "{out}");
    let _ = std::fs::remove_dir_all(exe.parent().unwrap());
}

/// Forks a child and starts three threads; waits for the child, so that it has run (and its
/// probes fired) before the target exits and tracing ends: on a loaded machine an unwaited child
/// may first run after its parent is gone.
const START_PROG: &str = r#"
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>
static void *work(void *p) { return p; }
int main(void) {
    pthread_t t[3];
    pid_t child = fork();
    if (child == 0) _exit(0);
    for (int i = 0; i < 3; i++) pthread_create(&t[i], 0, work, 0);
    for (int i = 0; i < 3; i++) pthread_join(t[i], 0);
    waitpid(child, 0, 0);
    return 0;
}
"#;

#[test]
fn start_fires_for_new_processes_and_lwp_start_for_every_new_thread() {
    if !ready("start_fires_for_new_processes_and_lwp_start_for_every_new_thread")
        || !dtrace_testkit::skip_unless(dtrace_testkit::have_program("gcc"), "start", "needs gcc")
    {
        return;
    }
    let exe = compile("start", START_PROG);
    // In the new task's context: its own pid, tid and parent.
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"proc:::start /ppid == $target/ { printf("start %d=%d %d=%d\n", pid, tid, curpsinfo->pr_pid, pid); }
           proc:::start /pid == $target/ { printf("start of the target\n"); }
           proc:::lwp-start /pid == $target/ { @t = count(); }
           proc:::lwp-start /ppid == $target/ { printf("lwp-start %d=%d\n", curlwpsinfo->pr_lwpid, tid); }
           END { printa("threads %@d\n", @t); }"#,
        "-c",
        &exe.display().to_string(),
    ]);
    assert_eq!(rc, 0, "{err}");
    let mut lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    lines.sort_unstable();
    // The forked child: one start, then its first lwp's start; the target's three new threads.
    assert_eq!(lines.len(), 3, "{out}");
    let start: Vec<&str> = lines[1].split(' ').collect();
    assert_eq!(start[0], "start", "{out}");
    for pair in &start[1..] {
        let (a, b) = pair.split_once('=').unwrap();
        assert_eq!(a, b, "{out}");
    }
    assert!(lines[0].starts_with("lwp-start "), "{out}");
    assert_eq!(lines[2], "threads 3", "{out}");
    // A new process's `start` fires before its first thread's `lwp-start`, whichever clause
    // comes first in the script.
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"proc:::lwp-start /ppid == $target/ { printf("lwp-start\n"); }
           proc:::start /ppid == $target/ { printf("start\n"); }"#,
        "-c",
        &exe.display().to_string(),
    ]);
    assert_eq!(rc, 0, "{err}");
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines, ["start", "lwp-start"], "{out}");
    let _ = std::fs::remove_dir_all(exe.parent().unwrap());
}

fn ready_gcc(test: &str) -> bool {
    ready(test)
        && dtrace_testkit::skip_unless(dtrace_testkit::have_program("gcc"), test, "needs gcc")
}

#[test]
fn lwp_create_args_are_the_new_thread_and_its_process() {
    if !ready_gcc("lwp_create_args_are_the_new_thread_and_its_process") {
        return;
    }
    let exe = compile("lwpcreate", START_PROG);
    // In the creating thread: the new thread (another lwp of this process); the fork's child is
    // proc:::create's, not lwp-create's.
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"proc:::lwp-create /pid == $target/ {
            @[args[0]->pr_lwpid != tid, args[1]->pr_pid == pid, args[0]->pr_lwpid > 0] = count();
        }"#,
        "-c",
        &exe.display().to_string(),
    ]);
    assert_eq!(rc, 0, "{err}");
    let lines: Vec<Vec<&str>> = out
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines, vec![vec!["1", "1", "1", "3"]], "{out}");
}

/// Forks a child that names itself `woken` and sleeps in pause(); the parent prints the child's
/// pid, maps a page (the paper's "interested" moment), wakes the child with SIGUSR1 and reaps it.
const WAKER_PROG: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
static void on_usr1(int s) { (void)s; }
int main(void) {
    signal(SIGUSR1, on_usr1);
    pid_t c = fork();
    if (c == 0) { prctl(PR_SET_NAME, "woken"); pause(); _exit(0); }
    printf("child=%d\n", (int)c);
    fflush(stdout);
    usleep(200000);
    void *p = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    kill(c, SIGUSR1);
    waitpid(c, NULL, 0);
    munmap(p, 4096);
    return 0;
}
"#;

/// Runs `script` with `-q` over the waker program; returns the child's pid, the parent's pid
/// (as `$target` printed by the script's BEGIN, when it prints `target=`) and the other lines.
fn run_waker(script: &str) -> (i32, Vec<String>) {
    let exe = compile("waker", WAKER_PROG);
    let exe = exe.to_str().unwrap();
    let (rc, out, err) = dtrace(&["-qn", script, "-c", exe]);
    assert_eq!(rc, 0, "{err}");
    let child = out
        .lines()
        .find_map(|l| l.strip_prefix("child="))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no child pid: {out}"));
    let rest = out
        .lines()
        .filter(|l| !l.starts_with("child=") && !l.trim().is_empty())
        .map(|l| l.trim().to_string())
        .collect();
    (child, rest)
}

#[test]
fn wakeup_args_are_the_woken_thread_and_process() {
    if !ready_gcc("wakeup_args_are_the_woken_thread_and_process") {
        return;
    }
    let (child, lines) = run_waker(
        r#"sched:::wakeup /pid == $target && args[1]->pr_ppid == $target/ {
            printf("woke %d %d %s %d\n", args[1]->pr_pid, args[0]->pr_lwpid, args[1]->pr_fname,
                args[1]->pr_ppid == pid);
        }"#,
    );
    let want = format!("woke {child} {child} woken 1");
    assert!(lines.contains(&want), "{want} in {lines:?}");
    assert!(lines.iter().all(|l| l.starts_with("woke ")), "{lines:?}");
}

#[test]
fn create_args0_is_the_child() {
    if !ready_gcc("create_args0_is_the_child") {
        return;
    }
    let (child, lines) = run_waker(
        r#"proc:::create /pid == $target/ {
            printf("create %d %d %d\n", args[0]->pr_pid, args[0]->pr_ppid == pid,
                args[0]->pr_pid == pid);
        }"#,
    );
    assert_eq!(lines, vec![format!("create {child} 1 0")]);
}

#[test]
fn signal_send_args_are_the_target_and_the_signal() {
    if !ready_gcc("signal_send_args_are_the_target_and_the_signal") {
        return;
    }
    let (child, lines) = run_waker(
        r#"proc:::signal-send /pid == $target && args[2] == 10/ {
            printf("sig %d %d %d %s\n", args[2], args[1]->pr_pid, args[0]->pr_lwpid,
                args[1]->pr_fname);
        }"#,
    );
    assert_eq!(lines, vec![format!("sig 10 {child} {child} woken")]);
}

#[test]
fn signal_send_from_kill_usr1() {
    if !ready("signal_send_from_kill_usr1") {
        return;
    }
    // The shell's `kill -USR1` of its sleeping child: the target is the child (a process whose
    // parent is the shell), the signal SIGUSR1.
    let script = scratch_dir("killusr1").join("kill.sh");
    std::fs::write(&script, "sleep 5 &\nsleep 0.2\nkill -USR1 $!\nwait\n").unwrap();
    let cmd = format!("/bin/sh {}", script.display());
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"proc:::signal-send /pid == $target && args[1]->pr_ppid == $target/ {
            printf("%d %d %d\n", args[2], args[1]->pr_pid != pid,
                args[0]->pr_lwpid == args[1]->pr_pid);
        }"#,
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    let lines: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines, vec!["10 1 1"], "{out}");
}

#[test]
fn papers_wakeup_script_counts_the_woken_process() {
    if !ready_gcc("papers_wakeup_script_counts_the_woken_process") {
        return;
    }
    // The paper's script (with the X server's mmap and poll as the moments of interest).
    let (_child, lines) = run_waker(
        r#"syscall::mmap:entry /pid == $target/ { self->interested = 1; }
        syscall::poll:entry, syscall::ppoll:entry /pid == $target/ { self->interested = 0; }
        sched:::wakeup /self->interested/ { @[args[1]->pr_fname] = count(); }"#,
    );
    let woken = lines
        .iter()
        .find_map(|l| l.strip_prefix("woken"))
        .unwrap_or_else(|| panic!("no woken: {lines:?}"));
    let n: u64 = woken.trim().parse().unwrap_or_else(|_| panic!("{lines:?}"));
    assert!(n >= 1, "{lines:?}");
}

#[test]
fn list_verbose_shows_the_translated_types() {
    if !ready("list_verbose_shows_the_translated_types") {
        return;
    }
    for (probe, want) in [
        (
            "sched:::wakeup",
            &["args[0]: lwpsinfo_t *", "args[1]: psinfo_t *"][..],
        ),
        ("proc:::create", &["args[0]: psinfo_t *"][..]),
        (
            "proc:::signal-send",
            &[
                "args[0]: lwpsinfo_t *",
                "args[1]: psinfo_t *",
                "args[2]: int",
            ][..],
        ),
        (
            "sched:::off-cpu",
            &["args[0]: lwpsinfo_t *", "args[1]: psinfo_t *"][..],
        ),
        (
            "sched:::change-pri",
            &[
                "args[0]: lwpsinfo_t *",
                "args[1]: psinfo_t *",
                "args[2]: int",
            ][..],
        ),
    ] {
        let (rc, out, err) = dtrace(&["-lv", "-n", probe]);
        assert_eq!(rc, 0, "{err}");
        for w in want {
            assert!(out.lines().any(|l| l.trim() == *w), "{probe}: {w} in {out}");
        }
    }
}

/// The main thread (nice 5: priority 125) holds a priority-inheritance mutex a nice-0 thread
/// (priority 120) then waits for: the holder is boosted to 120, and back to 125 at the unlock.
const PI_PROG: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>
static pthread_mutex_t m;
static void *waiter(void *p) {
    setpriority(PRIO_PROCESS, gettid(), 0);
    pthread_mutex_lock(&m);
    pthread_mutex_unlock(&m);
    return p;
}
int main(void) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT);
    pthread_mutex_init(&m, &a);
    setpriority(PRIO_PROCESS, gettid(), 5);
    pthread_mutex_lock(&m);
    pthread_t t;
    pthread_create(&t, 0, waiter, 0);
    usleep(200000);
    pthread_mutex_unlock(&m);
    pthread_join(t, 0);
    return 0;
}
"#;

#[test]
fn change_pri_args_are_the_thread_its_process_and_the_new_priority() {
    if !ready_gcc("change_pri_args_are_the_thread_its_process_and_the_new_priority") {
        return;
    }
    let exe = compile("changepri", PI_PROG);
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"sched:::change-pri /pid == $target/ {
            printf("%d %d %d %d\n", args[0]->pr_lwpid == pid, args[1]->pr_pid == pid,
                args[0]->pr_pri, args[2]);
        }"#,
        "-c",
        &exe.display().to_string(),
    ]);
    assert_eq!(rc, 0, "{err}");
    // The boost (fired in the waiter) and the unboost (in the holder) may print in either order:
    // each CPU's events come in their own buffer.
    let mut lines: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    lines.sort_unstable();
    assert_eq!(lines, vec!["1 1 120 125", "1 1 125 120"], "{out}");
}

/// BEGIN and END fire in dtrace's own thread, as in DTrace: `curthread` is that thread's task, read
/// at that moment (its pid, its parent: this test process), and `curpsinfo` translates it.
#[test]
fn begin_and_end_have_dtraces_own_curthread() {
    if !ready("begin_and_end_have_dtraces_own_curthread") {
        return;
    }
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"BEGIN {
            printf("%d=%d %d=%d %s=%s %d=%d\n", curthread->pid, pid, curthread->tgid, tid,
                stringof(curthread->comm), execname, curthread->real_parent->tgid, ppid);
            printf("%s=%s\n", curpsinfo->pr_fname, execname);
            exit(0);
        }
        END { printf("end %d=%d\n", curthread->pid, pid); }"#,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(err.is_empty(), "{err}");
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 3, "{out}");
    for pair in lines[0].split(' ').chain([lines[1]]) {
        let (a, b) = pair.split_once('=').unwrap_or_else(|| panic!("{out}"));
        assert_eq!(a, b, "{out}");
    }
    assert!(
        lines[0].ends_with(&format!("={}", std::process::id())),
        "{out}"
    );
    assert!(lines[0].contains("dtrace=dtrace"), "{out}");
    let (a, b) = lines[2]
        .strip_prefix("end ")
        .and_then(|p| p.split_once('='))
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(a, b, "{out}");
    assert_ne!(a, "0", "{out}");
}

/// A kernel symbol is looked up in /proc/kallsyms; with no type for it (the kernel's BTF describes
/// no global variables), the compiler says so in DTrace's words; an unknown one is unknown.
#[test]
fn kernel_symbols_without_types_are_reported_as_such() {
    if !ready("kernel_symbols_without_types_are_reported_as_such") {
        return;
    }
    let (rc, _, err) = dtrace(&["-qn", "BEGIN { trace(`vfs_read); exit(0); }"]);
    assert_eq!(rc, 1, "{err}");
    assert!(
        err.contains(
            "no symbolic type information is available for vmlinux`vfs_read: \
             No type information available for symbol"
        ),
        "{err}"
    );
    let (rc, _, err) = dtrace(&["-qn", "BEGIN { trace(`no_such_symbol_here); exit(0); }"]);
    assert_eq!(rc, 1, "{err}");
    assert!(
        err.contains("failed to resolve `no_such_symbol_here: Unknown symbol name"),
        "{err}"
    );
    // A kernel variable: found without a type where kallsyms lists variables
    // (CONFIG_KALLSYMS_ALL, as Debian's kernel), else unknown with the reason.
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
    let listed = kallsyms
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() == 3 && matches!(f[1], "d" | "D" | "b" | "B" | "r" | "R")
        })
        .count()
        >= 1000;
    let (rc, _, err) = dtrace(&["-qn", "BEGIN { trace(`max_pfn); exit(0); }"]);
    assert_eq!(rc, 1, "{err}");
    let expected = if listed {
        "no symbolic type information is available for vmlinux`max_pfn"
    } else {
        "failed to resolve `max_pfn: Unknown symbol name (this kernel lists no variables in \
         /proc/kallsyms: it is built without CONFIG_KALLSYMS_ALL)"
    };
    assert!(err.contains(expected), "{err}");
}

/// `proc:::signal-handle` gives the signal, the `siginfo_t *` DTrace documents (its fields read at
/// the probe) and the handler about to run.
#[test]
fn signal_handle_gives_siginfo_and_handler() {
    if !ready("signal_handle_gives_siginfo_and_handler") || !common::have_gcc("signal_handle") {
        return;
    }
    let prog = compile(
        "sighandle",
        r#"#include <signal.h>
#include <stdio.h>
#include <unistd.h>
static volatile int got;
static void handler(int s) { got = s; }
int main(void) {
    signal(SIGUSR1, handler);
    printf("handler=%lx\n", (unsigned long)handler);
    fflush(stdout);
    kill(getpid(), SIGUSR1);
    return got == SIGUSR1 ? 0 : 1;
}
"#,
    );
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"proc:::signal-handle /pid == $target/ {
            printf("sig=%d signo=%d code=%d errno=%d handler=%x\n", arg0, args[1]->si_signo,
                args[1]->si_code, args[1]->si_errno, (uint64_t)args[2]);
        }"#,
        "-c",
        prog.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    let handler = out
        .lines()
        .find_map(|l| l.strip_prefix("handler="))
        .unwrap_or_else(|| panic!("{out}"));
    // SIGUSR1 (10 on x86-64 and arm64) sent by kill(2): si_code SI_USER (0).
    let want = format!("sig=10 signo=10 code=0 errno=0 handler={handler}");
    assert!(out.lines().any(|l| l == want), "{out}\n{err}");
}
