//! `chill()` at the probe: a clause calling it runs whole in the kernel (`-v` says so) and spins
//! there, so the traced thread is the one delayed (a syscall's entry-to-return time covers the
//! chill, which the interpreter, sleeping in dtrace, cannot give); past DTrace's budget of half a
//! second per second of a CPU it faults as the interpreter's does: the same error messages, the
//! same `dtrace:::ERROR` arguments, the same records, with the kernel paths off. Where the
//! kernel cannot spin (no `bpf_loop`, or Linux 6.1's verifier, see
//! `dtrace_linux::features::chill_at_probe`) the clause stays in dtrace and `-v` says why.

mod common;
use common::{
    clause_lines, dtrace_with_env, error_lines, have_dd, kernel_ok, kernel_paths_off,
    same_with_kernel_paths_off, RECORDS_AT_ONE_PROBE,
};

/// Five one-byte writes to /dev/null, on CPU 0 only: `chill()`'s budget is per CPU, so each
/// way then counts every firing against the same one.
const ONE_CPU_DD: &str = "taskset -c 0 dd if=/dev/zero of=/dev/null bs=1 count=5 status=none";

/// An ERROR clause printing the arguments DTrace gives it.
const ERROR_CLAUSE: &str =
    "dtrace:::ERROR { printf(\"ERROR %d %d %d %d 0x%x\\n\", arg1, arg2, arg3, arg4, arg5); }";

fn can_run(t: &str) -> bool {
    kernel_ok(t)
        && have_dd(t)
        && dtrace_testkit::skip_unless(dtrace_testkit::have_program("taskset"), t, "no taskset")
}

/// The lines of `out` that print a truth value (`-v` prints the stability report too).
fn flags(out: &str) -> Vec<&str> {
    out.lines().filter(|l| matches!(*l, "0" | "1")).collect()
}

#[test]
fn chill_delays_the_traced_thread_at_the_probe() {
    let t = "chill_delays_the_traced_thread_at_the_probe";
    if !can_run(t) {
        return;
    }
    let script = "syscall::write:entry /pid == $target/ { self->t = timestamp; chill(20000000); } \
        syscall::write:return /self->t/ { printf(\"%d\\n\", timestamp - self->t >= 20000000); \
        self->t = 0; }";
    let args = ["-qvw", "-n", script, "-c", ONE_CPU_DD];
    let (rc, out, err) = dtrace_with_env(&[], &args);
    assert_eq!(rc, 0, "{err}");
    if let Err(why) = dtrace_linux::features::chill_at_probe() {
        assert!(err.contains(why), "{err}");
        assert_eq!(flags(&out).len(), 5, "{out}");
        return;
    }
    assert!(
        clause_lines(&err, 1)
            .iter()
            .any(|l| l.contains("runs whole in the kernel at 1 probe")),
        "{err}"
    );
    // Every write took the 20 ms the probe spun.
    assert_eq!(flags(&out), ["1"; 5], "{out}");
    // The interpreter sleeps in dtrace: the same firings, the thread not delayed.
    let (rc, iout, ierr) = dtrace_with_env(&kernel_paths_off(), &args);
    assert_eq!(rc, 0, "{ierr}");
    assert_eq!(flags(&iout).len(), 5, "{iout}");
}

#[test]
fn chill_past_its_budget_faults_as_the_interpreter() {
    let t = "chill_past_its_budget_faults_as_the_interpreter";
    if !can_run(t) {
        return;
    }
    // 200 ms a write on one CPU: two fit the 500 ms budget, the next three fault (an illegal
    // operation), each after the record was reserved, which goes nowhere.
    let script = format!(
        "syscall::write:entry /pid == $target/ {{ chill(200000000); printf(\"chilled %d\\n\", \
         arg2); }} {ERROR_CLAUSE}"
    );
    let said =
        dtrace_linux::features::chill_at_probe().map_or_else(|why| why, |()| RECORDS_AT_ONE_PROBE);
    let out = same_with_kernel_paths_off(&script, &["-w"], ONE_CPU_DD, &[(1, said)]);
    assert_eq!(out.matches("chilled 1\n").count(), 2, "{out}");
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("ERROR ")).collect();
    assert_eq!(errors.len(), 3, "{out}");
    // DTRACEFLT_ILLOP (3) at address 0, in the clause's first action.
    for e in errors {
        let a: Vec<&str> = e.split(' ').collect();
        assert_eq!((a[4], a[5]), ("3", "0x0"), "{out}");
    }
    let (_, _, err) = dtrace_with_env(&[], &["-qw", "-n", &script, "-c", ONE_CPU_DD]);
    let errs = error_lines(&err);
    assert_eq!(errs.len(), 3, "{err}");
    assert!(
        errs.iter().all(|e| e.contains("illegal operation")),
        "{err}"
    );
}
