//! Faults of clauses that run in the kernel: an aggregation clause, a clause storing kernel
//! variables or building its record at the probe whose code divides by zero or loads from a bad
//! or misaligned kernel address runs there (`-v` says so), and its fault is reported exactly as
//! the interpreter reports it with the kernel paths off: the same error messages, the same
//! `dtrace:::ERROR` arguments (probe, clause, DIF offset, kind, address), the clause's work before
//! the fault kept, its record dropped, the probe's later clauses run.

mod common;
use common::{clause_lines, dtrace_with_env, error_lines, kernel_ok, kernel_paths_off, sorted};

/// The traced command: five one-byte writes to /dev/null (write's `arg0` is 1, `arg2` is 1).
const DD: &str = "dd if=/dev/zero of=/dev/null bs=1 count=5 status=none";

/// An ERROR clause printing the arguments DTrace gives it.
const ERROR_CLAUSE: &str =
    "dtrace:::ERROR { printf(\"ERROR %d %d %d %d 0x%x\\n\", arg1, arg2, arg3, arg4, arg5); }";

/// Runs `script` (with [`ERROR_CLAUSE`]) over [`DD`] with the kernel paths on and off; asserts
/// both succeed with the same output and the same error messages, and that `-v` says each
/// `(clause, text)` of `said` the first way. Returns (output, error lines).
fn same_faults(script: &str, said: &[(usize, &str)]) -> (String, Vec<String>) {
    same_faults_with(&[], script, said)
}

/// [`same_faults`] with the options `extra`.
fn same_faults_with(extra: &[&str], script: &str, said: &[(usize, &str)]) -> (String, Vec<String>) {
    let script = format!("{script} {ERROR_CLAUSE}");
    let mut args = vec!["-qv"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-n", &script, "-c", DD]);
    let (rc, kout, kerr) = dtrace_with_env(&[], &args);
    assert_eq!(rc, 0, "{script}: {kerr}");
    for &(n, text) in said {
        assert!(
            clause_lines(&kerr, n).iter().any(|l| l.contains(text)),
            "{script}: clause {n} should say {text:?}: {kerr}"
        );
    }
    let (rc, iout, ierr) = dtrace_with_env(&kernel_paths_off(), &args);
    assert_eq!(rc, 0, "{script}: {ierr}");
    assert!(ierr.contains("are off (DTRACE_KERNEL_"), "{ierr}");
    // The same lines; their order across CPUs (END's, the faulting thread's) is the buffers'.
    assert_eq!(sorted(&kout), sorted(&iout), "{script}");
    let (kerrs, ierrs) = (error_lines(&kerr), error_lines(&ierr));
    assert_eq!(kerrs, ierrs, "{script}");
    assert_eq!(kerrs.len(), 5, "{script}: one error per write: {kerr}");
    (kout, kerrs.into_iter().map(String::from).collect())
}

/// The `ERROR` lines of `out`, each one's five arguments.
fn error_args(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .filter_map(|l| l.strip_prefix("ERROR "))
        .map(|l| l.split(' ').map(String::from).collect())
        .collect()
}

/// Asserts that `out` has five ERROR lines for kind `kind` at address `addr`, and that each error
/// message names the DIF offset the ERROR clause was given (its pc times 4).
fn assert_errors(out: &str, errs: &[String], kind: u32, addr: &str, message: &str) {
    let args = error_args(out);
    assert_eq!(args.len(), 5, "{out}");
    for (a, e) in args.iter().zip(errs) {
        assert_eq!(a[3], kind.to_string(), "{out}");
        assert_eq!(a[4], addr, "{out}");
        assert!(e.contains(message), "{e}");
        let pc: u64 = a[2].parse().unwrap();
        assert!(
            e.ends_with(&format!(" {}", pc * 4)) || e.ends_with(&format!(" {pc}")),
            "{e}"
        );
    }
}

/// The value printed for aggregation `name` (`printa("name %@d\n", @name)`), if any.
fn agg_value(out: &str, name: &str) -> Option<i64> {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
}

/// Prints the aggregations `names` one a line, as `name value`.
fn printas(names: &[&str]) -> String {
    let p: Vec<String> = names
        .iter()
        .map(|n| format!("printa(\"{n} %@d\\n\", @{n});"))
        .collect();
    format!("END {{ {} }}", p.join(" "))
}

const AGGS_IN_KERNEL: &str = "aggregations run in the kernel at 1 probe";

#[test]
fn division_and_modulo_by_zero_in_kernel_aggregations_fault_as_in_dtrace() {
    let t = "division_and_modulo_by_zero_in_kernel_aggregations_fault_as_in_dtrace";
    if !kernel_ok(t) {
        return;
    }
    for op in ["/", "%"] {
        // The count before the fault is kept, the sum and the count after it never happen, the
        // probe's next clause runs.
        let script = format!(
            "syscall::write:entry /pid == $target/ {{ @before = count(); \
             @s = sum(arg2 {op} (arg0 - 1)); @after = count(); }} \
             syscall::write:entry /pid == $target/ {{ @later = count(); }} {}",
            printas(&["before", "s", "after", "later"])
        );
        let (out, errs) = same_faults(&script, &[(1, AGGS_IN_KERNEL), (2, AGGS_IN_KERNEL)]);
        assert_errors(&out, &errs, 4, "0x0", "divide-by-zero");
        assert_eq!(agg_value(&out, "before"), Some(5), "{out}");
        assert_eq!(agg_value(&out, "later"), Some(5), "{out}");
        assert_eq!(agg_value(&out, "s"), None, "{out}");
        assert_eq!(agg_value(&out, "after"), None, "{out}");
    }
}

#[test]
fn bad_and_misaligned_kernel_loads_in_kernel_aggregations_fault_as_in_dtrace() {
    let t = "bad_and_misaligned_kernel_loads_in_kernel_aggregations_fault_as_in_dtrace";
    if !kernel_ok(t) {
        return;
    }
    for (load, kind, addr, message) in [
        ("*(int *)(arg0 - 1)", 1, "0x0", "invalid address (0x0)"),
        (
            "*(int *)(arg0 + 0xffff7fffffffffff)",
            1,
            "0xffff800000000000",
            "invalid address (0xffff800000000000)",
        ),
        // Misaligned: the alignment is checked before the read.
        (
            "*(int *)(arg0 + 0xffff800000000000)",
            2,
            "0xffff800000000001",
            "invalid alignment (0xffff800000000001)",
        ),
    ] {
        // A key that faults: the count before it is kept.
        let script = format!(
            "syscall::write:entry /pid == $target/ {{ @before = count(); @k[{load}] = count(); }} \
             {}",
            printas(&["before"])
        );
        let (out, errs) = same_faults(&script, &[(1, AGGS_IN_KERNEL)]);
        assert_errors(&out, &errs, kind, addr, message);
        assert_eq!(agg_value(&out, "before"), Some(5), "{out}");
    }
}

#[test]
fn faults_in_clauses_storing_kernel_variables_are_reported_as_in_dtrace() {
    let t = "faults_in_clauses_storing_kernel_variables_are_reported_as_in_dtrace";
    if !kernel_ok(t) {
        return;
    }
    // The store before the fault is kept, the one after it never happens.
    let script = format!(
        "self int n; self int x; self int y; \
         syscall::write:entry /pid == $target/ {{ self->n = self->n + 1; \
         self->x = arg2 / (arg0 - 1); self->y = 1; }} \
         syscall::write:return /pid == $target/ {{ @n = max(self->n); @x = max(self->x); \
         @y = max(self->y); }} {}",
        printas(&["n", "x", "y"])
    );
    let whole = "runs whole in the kernel at 1 probe (variables";
    let (out, errs) = same_faults(&script, &[(1, whole), (2, whole)]);
    assert_errors(&out, &errs, 4, "0x0", "divide-by-zero");
    assert_eq!(agg_value(&out, "n"), Some(5), "{out}");
    assert_eq!(agg_value(&out, "x"), Some(0), "{out}");
    assert_eq!(agg_value(&out, "y"), Some(0), "{out}");
}

#[test]
fn a_record_built_at_the_probe_is_dropped_at_a_fault() {
    let t = "a_record_built_at_the_probe_is_dropped_at_a_fault";
    if !kernel_ok(t) {
        return;
    }
    // The first printf's record is the clause's: the fault drops it; the next clause prints.
    let script = "syscall::write:entry /pid == $target/ { printf(\"first %d\\n\", arg2); \
        printf(\"%d\\n\", arg2 % (arg0 - 1)); } \
        syscall::write:entry /pid == $target/ { printf(\"next %d\\n\", arg2); }";
    let built = "runs whole in the kernel at 1 probe (records built at the probe)";
    let (out, errs) = same_faults(script, &[(1, built), (2, built)]);
    assert_errors(&out, &errs, 4, "0x0", "divide-by-zero");
    assert!(!out.contains("first"), "{out}");
    assert_eq!(out.matches("next 1").count(), 5, "{out}");
}

#[test]
fn a_signal_whose_predicate_faults_is_not_sent() {
    let t = "a_signal_whose_predicate_faults_is_not_sent";
    if !kernel_ok(t) {
        return;
    }
    // Sent, SIGUSR1 would end dd at its first write: it writes five times.
    let script = format!(
        "syscall::write:entry /pid == $target/ {{ @writes = count(); }} \
         syscall::write:entry /pid == $target && arg2 / (arg0 - 1) >= 0/ {{ raise(10); }} {}",
        printas(&["writes"])
    );
    let sent = "raise() and stop() are sent in the kernel at 1 probe";
    let (out, errs) = same_faults_with(&["-w"], &script, &[(2, sent)]);
    assert_errors(&out, &errs, 4, "0x0", "divide-by-zero");
    assert_eq!(agg_value(&out, "writes"), Some(5), "{out}");
    // The clause in dtrace, its signal sent by the probe (`capture::signal`): the same.
    let script = format!("{script} {ERROR_CLAUSE}");
    let args = ["-qvw", "-n", &script, "-c", DD];
    let (rc, out, err) = dtrace_with_env(&[("DTRACE_KERNEL_RECORDS", "0")], &args);
    assert_eq!(rc, 0, "{err}");
    assert!(
        clause_lines(&err, 2).iter().any(|l| l.contains(sent)),
        "{err}"
    );
    assert_eq!(agg_value(&out, "writes"), Some(5), "{out}");
    assert_eq!(error_lines(&err), errs, "{err}");
}

#[test]
fn faults_keep_the_clauses_order_with_clauses_run_in_dtrace() {
    let t = "faults_keep_the_clauses_order_with_clauses_run_in_dtrace";
    if !kernel_ok(t) {
        return;
    }
    // ustackdepth keeps its clause in dtrace when user stacks are walked there.
    let printing = "syscall::write:entry /pid == $target/ { printf(\"first %d\\n\", arg2 + \
        0 * ustackdepth); }";
    let faulting = "syscall::write:entry /pid == $target/ { @ = sum(arg2 / (arg0 - 1)); }";
    let error = "dtrace:::ERROR { printf(\"ERR %d\\n\", arg3); }";
    for (script, pair, kernel) in [
        // The fault after the clause run in dtrace: reported there, in dtrace.
        (
            format!("{printing} {faulting} {error}"),
            ["first", "ERR"],
            "its code can fault, and a clause before it at the probe runs in dtrace",
        ),
        // The fault before it: in the kernel, reported first.
        (
            format!("{faulting} {printing} {error}"),
            ["ERR", "first"],
            "aggregations run in the kernel at 1 probe",
        ),
    ] {
        let env = [("DTRACE_KERNEL_USTACKS", "0")];
        let (rc, out, err) = dtrace_with_env(&env, &["-qvw", "-n", &script, "-c", DD]);
        assert_eq!(rc, 0, "{err}");
        let n = if pair[0] == "first" { 2 } else { 1 };
        assert!(
            clause_lines(&err, n).iter().any(|l| l.contains(kernel)),
            "{err}"
        );
        let lines: Vec<&str> = out
            .lines()
            .filter_map(|l| l.split(' ').next())
            .filter(|w| *w == "first" || *w == "ERR")
            .collect();
        // Each firing's lines are together (a CPU's buffer keeps them in order).
        assert_eq!(lines.len(), 10, "{out}");
        for p in lines.chunks(2) {
            assert_eq!(p, pair, "{out}");
        }
        assert_eq!(error_lines(&err).len(), 5, "{err}");
    }
}

#[test]
fn error_clauses_run_in_the_faulting_threads_context() {
    let t = "error_clauses_run_in_the_faulting_threads_context";
    if !kernel_ok(t) {
        return;
    }
    // DTrace fires ERROR in the context of the thread that faulted: dd's ids, its parent (this
    // dtrace, `$pid`), its name, the firing's clocks; at a syscall's return, its errno.
    let context = "dtrace:::ERROR { printf(\"ctx %d %d %d %d %d %s %d %d %d %d\\n\", \
        pid == $target, ppid == $pid, tid == pid, uid == $uid, gid == $gid, execname, errno, \
        timestamp > 0, vtimestamp > 0, walltimestamp / 1000000000 > 1600000000); }";
    for probe in ["syscall::write:entry", "syscall::write:return"] {
        let script = format!("{probe} /pid == $target/ {{ @s = sum(1 / (arg0 - 1)); }} {context}");
        let (out, _) = same_faults(&script, &[(1, AGGS_IN_KERNEL)]);
        let ctx: Vec<&str> = out.lines().filter(|l| l.starts_with("ctx ")).collect();
        assert_eq!(ctx, vec!["ctx 1 1 1 1 1 dd 0 1 1 1"; 5], "{script}: {out}");
    }
    // A failed syscall's errno: dd's write to /dev/full fails with ENOSPC (28), and dd stops.
    let script = "syscall::write:return /pid == $target/ { @s = sum(1 / (arg0 + 28)); } \
        dtrace:::ERROR { printf(\"errno %d\\n\", errno); }";
    let full = "dd if=/dev/zero of=/dev/full bs=1 count=1 status=none";
    for kernel in [true, false] {
        let args = ["-qv", "-n", script, "-c", full];
        let (rc, out, err) = common::dtrace_way("DTRACE_KERNEL_AGGREGATIONS", kernel, &args);
        assert_eq!(rc, 0, "{err}");
        if kernel {
            assert!(
                clause_lines(&err, 1)
                    .iter()
                    .any(|l| l.contains(AGGS_IN_KERNEL)),
                "{err}"
            );
        }
        assert_eq!(error_lines(&err).len(), 1, "{err}");
        assert!(out.lines().any(|l| l == "errno 28"), "{out}");
    }
    // ERROR's `timestamp` is its firing's, as the interpreter's ERROR shares its firing's: the
    // timestamps the faulting clause saw before its fault are those ERROR sees, both ways.
    let script = "syscall::write:entry /pid == $target/ { @t[timestamp] = count(); \
        @s = sum(arg2 / (arg0 - 1)); } dtrace:::ERROR { @e[timestamp] = count(); } \
        END { printa(\"t %d\\n\", @t); printa(\"e %d\\n\", @e); }";
    let args = ["-qv", "-n", script, "-c", DD];
    for kernel in [true, false] {
        let off: Vec<(&str, &str)> = if kernel {
            Vec::new()
        } else {
            kernel_paths_off()
        };
        let (rc, out, err) = dtrace_with_env(&off, &args);
        assert_eq!(rc, 0, "{err}");
        if kernel {
            assert!(
                clause_lines(&err, 1)
                    .iter()
                    .any(|l| l.contains(AGGS_IN_KERNEL)),
                "{err}"
            );
        }
        let stamps = |tag: &str| {
            let mut v: Vec<&str> = out
                .lines()
                .filter_map(|l| l.strip_prefix(tag))
                .map(str::trim)
                .collect();
            v.sort_unstable();
            v
        };
        assert_eq!(stamps("t ").len(), 5, "{out}");
        assert_eq!(
            stamps("t "),
            stamps("e "),
            "kernel paths on: {kernel}\n{out}"
        );
    }
    // Two faults of one firing whose clauses read no clock: one time for both, as both
    // ERRORs of the interpreter share their firing's.
    let script = "syscall::write:entry /pid == $target/ { @a = sum(arg2 / (arg0 - 1)); } \
        syscall::write:entry /pid == $target/ { @b = sum(arg2 % (arg0 - 1)); } \
        dtrace:::ERROR { @e[timestamp] = count(); } END { printa(\"e %d %@d\\n\", @e); }";
    let args = ["-qv", "-n", script, "-c", DD];
    for kernel in [true, false] {
        let (rc, out, err) = common::dtrace_way("DTRACE_KERNEL_AGGREGATIONS", kernel, &args);
        assert_eq!(rc, 0, "{err}");
        if kernel {
            for n in [1, 2] {
                assert!(
                    clause_lines(&err, n)
                        .iter()
                        .any(|l| l.contains(AGGS_IN_KERNEL)),
                    "{err}"
                );
            }
        }
        assert_eq!(error_lines(&err).len(), 10, "{err}");
        let counts: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("e "))
            .filter_map(|l| l.split(' ').nth(2))
            .collect();
        assert_eq!(counts, vec!["2"; 5], "kernel paths on: {kernel}\n{out}");
    }
}

/// A fault at `sched:::on-cpu`, whose record speaks for the thread going on CPU: the ERROR probe
/// runs in that thread's context (its pid, execname, uid), as the interpreter runs it for the
/// faulting firing, not in the thread still running when the probe fires.
#[test]
fn a_fault_at_on_cpu_is_the_incoming_threads() {
    let t = "a_fault_at_on_cpu_is_the_incoming_threads";
    if !kernel_ok(t) || !common::have_btf(t) {
        return;
    }
    let sh = common::test_dir("kfault-oncpu").join("naps.sh");
    std::fs::write(&sh, "for i in 1 2 3; do sleep 0.02; done\n").unwrap();
    let cmd = format!("sh {}", sh.display());
    let script = "sched:::on-cpu /pid == $target/ { @[*(int *)8] = count(); } \
        dtrace:::ERROR { @e[execname, pid == $target, uid == $uid] = max(1); } \
        END { printa(\"%s %d %d %@d\\n\", @e); }";
    let args = ["-qv", "-n", script, "-c", &cmd];
    let (rc, kout, kerr) = dtrace_with_env(&[], &args);
    assert_eq!(rc, 0, "{kerr}");
    assert!(
        clause_lines(&kerr, 1)
            .iter()
            .any(|l| l.contains("aggregations run in the kernel at 1 probe")),
        "{kerr}"
    );
    let (rc, iout, ierr) = dtrace_with_env(&kernel_paths_off(), &args);
    assert_eq!(rc, 0, "{ierr}");
    assert_eq!(kout, iout);
    assert_eq!(
        kout.lines()
            .filter(|l| l.contains(" 1 "))
            .collect::<Vec<_>>(),
        ["sh 1 1 1"],
        "{kout}"
    );
}

/// A firing of dtrace's own process whose string its kernel clause cannot read is a bad address
/// there, as any process's is: dtrace reads none of its own memory for it (an open and reads of
/// /proc/self/mem, each a syscall its own probes would hand over again, and so on without end:
/// `syscall:::entry { @[copyinstr(arg0)] = count(); }` once ran away and ignored Ctrl-C).
#[test]
fn dtraces_own_faulting_firings_do_not_feed_themselves() {
    let t = "dtraces_own_faulting_firings_do_not_feed_themselves";
    if !kernel_ok(t) {
        return;
    }
    let dir = common::test_dir("kfault-self");
    let (out, err) = (dir.join("out"), dir.join("err"));
    // Not write(2): each error message dtrace writes would fault again, as in DTrace. The paths
    // dtrace opens itself are counted (its own memory's file must not be among them).
    let script = "syscall:::entry /pid == $pid && probefunc != \"write\"/ { \
        @[probefunc, copyinstr(arg0)] = count(); } \
        syscall::openat:entry /pid == $pid/ { @opened[copyinstr(arg1)] = count(); } \
        tick-1s { exit(0); } END { printa(\"opened %s\\n\", @opened); }";
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .args(["-q", "-n", script])
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let mem = format!("/proc/{}/mem", child.id());
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > std::time::Duration::from_secs(300) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("dtrace did not exit: its own firings fed themselves");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let (out, err) = (
        std::fs::read_to_string(&out).unwrap(),
        std::fs::read_to_string(&err).unwrap(),
    );
    assert!(status.success(), "{err}");
    // Its own syscalls' arg0 is mostly no string (a descriptor, a command): faults, reported.
    assert!(err.contains("invalid address"), "{err}");
    assert!(!out.contains(&mem), "dtrace read its own memory: {out}");
}
