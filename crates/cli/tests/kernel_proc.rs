//! The `proc` provider's probes as DTrace for Linux fires them, on a small program compiled here
//! (root, BPF, tracefs and gcc; skipped otherwise): `exec` before the attempt and `exec-failure`
//! with the call's negative errno when it fails, `signal-clear` when a thread waiting in
//! sigwait(3) takes its signal, `exit` with `CLD_KILLED` for a process killed by a signal (after
//! its last thread's `lwp-exit`), and `fault` for each machine fault.

mod common;
use common::dtrace;

/// Fails to exec a missing file (its path on the stack, since a probe cannot fault in a page the
/// program has not touched yet), takes a SIGUSR1 it sent itself through sigwait(3), then forks a
/// child that waits to be killed, kills it with SIGKILL and reaps it.
const PROG: &str = r#"
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    char path[] = "/nonexistent/kernel_proc";
    execl(path, "kernel_proc", (char *)0);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, 0);
    kill(getpid(), SIGUSR1);
    int sig = 0;
    sigwait(&set, &sig);
    int fds[2];
    pipe(fds);
    pid_t p = fork();
    if (p == 0) {
        close(fds[0]);
        close(fds[1]);
        for (;;)
            pause();
    }
    close(fds[1]);
    char c;
    read(fds[0], &c, 1);
    kill(p, SIGKILL);
    waitpid(p, 0, 0);
    return 0;
}
"#;

#[test]
fn exec_failure_signal_clear_and_killed_exit() {
    let test = "exec_failure_signal_clear_and_killed_exit";
    if !(common::kernel_ok(test) && common::have_gcc(test)) {
        return;
    }
    let exe = common::compile_c(&common::test_dir("kernel_proc"), "kproc", PROG, &["-O1"]);
    let exe = exe.display().to_string();
    // -x temporal: the child's exit is on whichever CPU it ran.
    let (rc, out, err) = dtrace(&[
        "-x",
        "temporal",
        "-qn",
        "proc:::exec /pid == $target/ { printf(\"exec %s\\n\", args[0]); } \
         proc:::exec-failure /pid == $target/ \
         { printf(\"exec-failure %d %d\\n\", args[0], args[0] == -ENOENT); } \
         proc:::signal-clear /pid == $target/ { printf(\"signal-clear %d\\n\", args[0]); } \
         proc:::exit /progenyof($target) && pid != $target/ \
         { printf(\"exit %d\\n\", args[0] == CLD_KILLED); }",
        "-c",
        &exe,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        out,
        "exec /nonexistent/kernel_proc\nexec-failure -2 1\nsignal-clear 10\nexit 1\n\n"
    );
}

/// A process's last thread fires `lwp-exit` before the process's `exit`, whichever clause names
/// its probe first, on every kernel: at `sched_process_exit`'s raw tracepoint where it passes
/// `group_dead` (6.16 on), at the entry and the return of `taskstats_exit` before (Debian 12's 6.1).
#[test]
fn lwp_exit_fires_before_exit() {
    let test = "lwp_exit_fires_before_exit";
    if !(common::kernel_ok(test) && common::have_gcc(test)) {
        return;
    }
    let exe = common::compile_c(
        &common::test_dir("kernel_proc_exit"),
        "kproc",
        PROG,
        &["-O1"],
    );
    let exe = exe.display().to_string();
    let (rc, out, err) = dtrace(&[
        "-x",
        "temporal",
        "-qn",
        "proc:::exit /progenyof($target) && pid != $target/ { printf(\"exit\\n\"); } \
         proc:::lwp-exit /progenyof($target) && pid != $target/ { printf(\"lwp-exit\\n\"); }",
        "-c",
        &exe,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out, "lwp-exit\nexit\n\n");
}

/// `exec-failure`'s argument is the system call's result, an `int`, as DTrace for Linux types it;
/// `signal-clear` takes the signal number.
#[test]
fn exec_failure_and_signal_clear_are_listed_with_their_arguments() {
    if !common::kernel_ok("exec_failure_and_signal_clear_are_listed_with_their_arguments") {
        return;
    }
    for probe in ["proc:::exec-failure", "proc:::signal-clear"] {
        let (rc, out, err) = dtrace(&["-lv", "-n", probe]);
        assert_eq!(rc, 0, "{err}");
        assert!(out.contains("\t\targs[0]: int\n"), "{out}");
    }
}

/// `proc`, `sched` and `io` probes are in module `vmlinux`, as DTrace for Linux lists them, so their
/// description's stability is the module's (Private), not only the provider's and name's.
#[test]
fn proc_sched_and_io_probes_are_listed_in_vmlinux() {
    if !common::kernel_ok("proc_sched_and_io_probes_are_listed_in_vmlinux") {
        return;
    }
    for (probe, line) in [
        (
            "proc:::exec",
            "proc           vmlinux                                   exec\n",
        ),
        (
            "sched:::on-cpu",
            "sched           vmlinux                                   on-cpu\n",
        ),
    ] {
        let (rc, out, err) = dtrace(&["-lv", "-n", probe]);
        assert_eq!(rc, 0, "{err}");
        assert!(out.contains(line), "{out}");
        assert!(
            out.contains(
                "\tProbe Description Attributes\n\t\tIdentifier Names: Private\n\
                 \t\tData Semantics:   Private\n\t\tDependency Class: Unknown\n"
            ),
            "{out}"
        );
    }
    let (rc, out, err) = dtrace(&[
        "-q",
        "-n",
        "proc:vmlinux::exit /pid == $target/ { trace(probemod); exit(0); }",
        "-c",
        "/bin/true",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out, "vmlinux\n");
}

/// A `-c` command is traced from `evaltime`: by default (`postinit`) once the dynamic linker has
/// loaded its libraries, so the linker's own opens are not seen; with `-xevaltime=exec` from its
/// exec, so they are.
#[test]
fn c_commands_are_traced_from_evaltime() {
    let test = "c_commands_are_traced_from_evaltime";
    if !(common::kernel_ok(test) && common::have_gcc(test)) {
        return;
    }
    let src = "#include <fcntl.h>\n\
               int main(void) { char p[] = \"/dev/null\"; return open(p, O_RDONLY) < 0; }\n";
    let exe = common::compile_c(&common::test_dir("evaltime"), "opener", src, &["-O1"]);
    let exe = exe.display().to_string();
    let prog = "syscall::openat:entry /pid == $target/ { printf(\"%s\\n\", copyinstr(arg1)); }";
    // -x temporal: the process may move between CPUs after its exec.
    let (rc, out, err) = dtrace(&["-xtemporal", "-qn", prog, "-c", &exe]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out, "/dev/null\n\n");
    let (rc, out, err) = dtrace(&["-xtemporal", "-xevaltime=exec", "-qn", prog, "-c", &exe]);
    assert_eq!(rc, 0, "{err}");
    let opens: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert!(opens.len() > 1, "{out}");
    assert!(opens.iter().any(|o| o.contains("libc.so")), "{out}");
    assert_eq!(opens.last(), Some(&"/dev/null"), "{out}");
}

/// Three stores to unmapped addresses and an integer divide by zero, each caught by a handler;
/// then a SIGSEGV sent with kill(2) and a SIGUSR1 with raise(3), which are not faults.
const FAULTS: &str = r#"
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
static sigjmp_buf jb;
static void back(int sig) { (void)sig; siglongjmp(jb, 1); }
int main(void) {
    signal(SIGSEGV, back);
    signal(SIGFPE, back);
    signal(SIGUSR1, back);
    for (int i = 0; i < 3; i++)
        if (!sigsetjmp(jb, 1))
            *(volatile int *)(long)(16 + 8 * i) = 1;
    volatile int zero = 0;
    if (!sigsetjmp(jb, 1))
        zero = 5 / zero;
    if (!sigsetjmp(jb, 1))
        kill(getpid(), SIGSEGV);
    if (!sigsetjmp(jb, 1))
        raise(SIGUSR1);
    return 0;
}
"#;

/// `proc:::fault` fires in the faulting thread, before its signal is handled, for each machine
/// fault (`FLT_BOUNDS`, 6, for an unmapped address; `FLT_IZDIV`, 8, for a divide by zero), with
/// the signal's siginfo as `args[1]`, before `signal-send` of its signal; signals sent by a
/// process are not faults.
#[test]
fn fault_fires_for_machine_faults_only() {
    let test = "fault_fires_for_machine_faults_only";
    if !(common::kernel_ok(test) && common::have_gcc(test)) {
        return;
    }
    let exe = common::compile_c(&common::test_dir("kernel_proc"), "faults", FAULTS, &["-O0"]);
    let exe = exe.display().to_string();
    // -x temporal: the thread may move to another CPU between a fault and its handler, and
    // each CPU's buffer is printed whole.
    let (rc, out, err) = dtrace(&[
        "-x",
        "temporal",
        "-qn",
        "proc:::fault /pid == $target/ \
         { printf(\"fault %d sig %d code %d\\n\", args[0], args[1]->si_signo, args[1]->si_code); } \
         proc:::signal-handle /pid == $target/ { printf(\"handle %d\\n\", args[0]); }",
        "-c",
        &exe,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        out,
        "fault 6 sig 11 code 1\nhandle 11\n\
         fault 6 sig 11 code 1\nhandle 11\n\
         fault 6 sig 11 code 1\nhandle 11\n\
         fault 8 sig 8 code 1\nhandle 8\n\
         handle 11\nhandle 10\n\n"
    );
    // The fault comes first, then the signal it raises is sent (both at `signal_generate`).
    let (rc, out, err) = dtrace(&[
        "-qn",
        "proc:::signal-send /pid == $target && args[2] == 8/ { printf(\"send\\n\"); } \
         proc:::fault /pid == $target && args[0] == 8/ { printf(\"fault\\n\"); }",
        "-c",
        &exe,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out, "fault\nsend\n\n");
    let (rc, out, err) = dtrace(&["-lv", "-n", "proc:::fault"]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.contains("\t\targs[0]: int\n\t\targs[1]: siginfo_t *\n"),
        "{out}"
    );
}

/// A description naming a kernel provider's probe this kernel does not have matches nothing, and
/// DTrace says so before it compiles the clause: the clause's `args[]` are never typed, so a
/// body using them as pointers must not fail first with a type error. `-Z` lets the
/// description match nothing; the body is then compiled with `args[]` untyped, as DTrace does.
#[test]
fn a_missing_probe_is_said_before_its_body_is_compiled() {
    if !common::kernel_ok("a_missing_probe_is_said_before_its_body_is_compiled") {
        return;
    }
    let script = "proc:::no-such-probe { trace(args[0]->pr_pid); }";
    let (rc, out, err) = dtrace(&["-n", script]);
    assert_eq!(
        (rc, out.as_str(), err.as_str()),
        (
            1,
            "",
            "dtrace: invalid probe specifier proc:::no-such-probe { trace(args[0]->pr_pid); }: \
             probe description proc:::no-such-probe does not match any probes\n"
        )
    );
    let (rc, _, err) = dtrace(&[
        "-xerrtags",
        "-n",
        "proc:::exit, sched:::no-such-probe { trace(args[0]->pr_pid); }",
    ]);
    assert_eq!(rc, 1);
    assert!(
        err.contains("[D_PDESC_ZERO] probe description sched:::no-such-probe does not match"),
        "{err}"
    );
    let (rc, _, err) = dtrace(&["-Z", "-n", script]);
    assert_eq!(rc, 1);
    assert!(
        err.contains("operator -> must be applied to a pointer"),
        "{err}"
    );
}

/// `proc:::exec`'s `args[0]`, the path the process asked to run (a user string the probe
/// copies), is read at the probe wherever it is used as a string: in a predicate, a record, an
/// aggregation's key, a thread-local kept until `exec-success` or `exec-failure`; `arg0` stays
/// its address. Each prints what the interpreter prints.
#[test]
fn exec_paths_are_read_in_the_kernel() {
    let test = "exec_paths_are_read_in_the_kernel";
    if !common::kernel_ok(test) {
        return;
    }
    let dir = common::test_dir("kernel_proc_exec");
    let script = dir.join("execs.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\n/bin/true\n/bin/true again\n./no-such-program 2>/dev/null\nexit 0\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let cmd = script.display().to_string();
    let out = common::same_with_kernel_paths_off(
        "proc:::exec /progenyof($target) && args[0] != \"/nowhere\"/ \
         { printf(\"exec %s %d %d\\n\", args[0], strlen(args[0]), arg0 != 0); \
           @[basename(args[0])] = count(); }",
        &[],
        &cmd,
        &[(1, "runs whole in the kernel")],
    );
    // `-v` prints the clauses' stability attributes on stdout first.
    let printed = |out: &str| -> Vec<String> {
        let mut v: Vec<String> = out
            .lines()
            .filter(|l| l.starts_with("exec") || l.starts_with("  "))
            .map(String::from)
            .collect();
        v.sort_unstable();
        v
    };
    assert_eq!(
        printed(&out),
        [
            "  no-such-program                                                   1",
            "  true                                                              2",
            "exec ./no-such-program 17 1",
            "exec /bin/true 9 1",
            "exec /bin/true 9 1",
        ],
        "{out}"
    );
    let out = common::same_with_kernel_paths_off(
        "proc:::exec /progenyof($target)/ { self->path = args[0]; } \
         proc:::exec-success, proc:::exec-failure /self->path != NULL/ \
         { printf(\"%s %s\\n\", probename, self->path); self->path = 0; }",
        &[],
        &cmd,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
        ],
    );
    assert_eq!(
        printed(&out),
        [
            "exec-failure ./no-such-program",
            "exec-success /bin/true",
            "exec-success /bin/true",
        ],
        "{out}"
    );
}
