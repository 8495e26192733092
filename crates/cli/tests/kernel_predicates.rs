//! Predicates evaluated in the kernel before anything is captured: each clause runs both ways (its
//! predicate translated to eBPF, and kept in dtrace's interpreter with DTRACE_KERNEL_PREDICATES=0)
//! and must print the same thing; faults in a kernel predicate are reported as the interpreter
//! reports them; a false predicate records nothing (no drops however fast the probe fires); `-v`
//! says where each clause's predicate runs.

mod common;
use common::{dtrace, kernel_ok};

/// Runs `dtrace args` with predicates in the kernel (`true`) or in the interpreter.
fn dtrace_way(kernel: bool, args: &[&str]) -> (i32, String, String) {
    common::dtrace_way("DTRACE_KERNEL_PREDICATES", kernel, args)
}

/// stderr without the lines naming the traced process's pid (which differs between runs).
fn steady(err: &str) -> String {
    err.lines()
        .filter(|l| !(l.starts_with("dtrace: pid ") && l.ends_with(" has exited")))
        .collect::<Vec<_>>()
        .join("\n")
}

const DD: &str = "dd if=/dev/zero of=/dev/null bs=3 count=5 status=none";

#[test]
fn clauses_print_the_same_with_predicates_in_the_kernel_or_in_dtrace() {
    if !kernel_ok("clauses_print_the_same_with_predicates_in_the_kernel_or_in_dtrace") {
        return;
    }
    let predicates = [
        r#"execname == "dd""#,
        r#"execname != "dd""#,
        r#"execname < "de" && execname > "d""#,
        r#""dd" == execname && probefunc == "write" && probename == "entry""#,
        "arg2 == 3",
        "args[2] > 2 && arg0 == 1",
        "arg2 / arg0 == 3 && arg2 % 2 == 1",
        "(int)arg2 - 4 < 0",
        "tid == pid && uid == 0",
        "arg2 == 4 || arg0 != 1",
        "!(arg2 & 1)",
        "arg2 ? arg0 : 0",
    ];
    for p in predicates {
        let script = format!(
            "syscall::write:entry /pid == $target && ({p})/ {{ @c[execname, arg2] = count(); \
             @s = sum(arg2); @q = quantize(arg2); printf(\"%d %d\\n\", arg0, arg2); }}"
        );
        let (rc, kout, kerr) = dtrace_way(true, &["-qv", "-n", &script, "-c", DD]);
        assert_eq!(rc, 0, "{p}: {kerr}");
        assert!(
            kerr.contains("predicate runs in the kernel at 1 probe\n"),
            "{p}: {kerr}"
        );
        let (rc, iout, ierr) = dtrace_way(false, &["-qv", "-n", &script, "-c", DD]);
        assert_eq!(rc, 0, "{p}: {ierr}");
        assert_eq!(kout, iout, "{p}");
        assert!(!iout.is_empty(), "{p}");
    }
}

#[test]
fn faults_in_kernel_predicates_are_reported_as_the_interpreter_reports_them() {
    if !kernel_ok("faults_in_kernel_predicates_are_reported_as_the_interpreter_reports_them") {
        return;
    }
    // dd writes to fd 1: arg0 - 1 is zero. A kernel address that is not mapped faults too.
    for (p, fault) in [
        ("arg2 / (arg0 - 1) == 0", "divide-by-zero"),
        ("arg2 % (arg0 - 1) == 0", "divide-by-zero"),
        (
            "*(int *)(0x8000000000000000 + arg2 * 0) == 0",
            "invalid address (0x8000000000000000)",
        ),
    ] {
        let script = format!("syscall::write:entry /pid == $target && ({p})/ {{ @ = count(); }}");
        let (krc, kout, kerr) = dtrace_way(true, &["-n", &script, "-c", DD]);
        let (irc, iout, ierr) = dtrace_way(false, &["-n", &script, "-c", DD]);
        assert_eq!((krc, &kout), (irc, &iout), "{p}");
        assert_eq!(steady(&kerr), steady(&ierr), "{p}");
        assert!(kerr.contains(fault), "{p}: {kerr}");
        assert_eq!(kerr.matches("error in dt_clause").count(), 5, "{p}: {kerr}");
    }
}

#[test]
fn a_false_kernel_predicate_records_nothing() {
    if !kernel_ok("a_false_kernel_predicate_records_nothing") {
        return;
    }
    // 200000 writes through a ring of a page or two per CPU: with the predicate in dtrace every
    // one of them is a record and most are dropped; in the kernel, none is recorded.
    let cmd = "dd if=/dev/zero of=/dev/null bs=1 count=200000 status=none";
    for p in [
        r#"execname == "no-such-program""#,
        "arg2 == 123456789",
        "arg0 > 1000000 && arg2 > 1",
    ] {
        let script = format!("syscall::write:entry /{p}/ {{ @ = count(); }}");
        let (rc, out, err) = dtrace(&["-b", "4k", "-qn", &script, "-c", cmd]);
        assert_eq!(rc, 0, "{err}");
        assert_eq!(out.trim(), "", "{p}");
        assert!(!err.contains("drop"), "{p}: {err}");
    }
}

#[test]
fn verbose_mode_says_where_each_predicate_runs() {
    if !kernel_ok("verbose_mode_says_where_each_predicate_runs") {
        return;
    }
    let (rc, _, err) = dtrace(&[
        "-qv",
        "-n",
        r#"syscall::write:entry /pid == $target && execname == "dd"/ { @a = count(); }"#,
        "-n",
        r#"syscall::read:entry /strtoll(json(lltostr(pid), "")) == 1/ { @b = count(); }"#,
        "-n",
        "syscall::close:entry { @c = count(); }",
        "-c",
        DD,
    ]);
    assert_eq!(rc, 0, "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("clause")).collect();
    assert_eq!(
        lines,
        [
            "dtrace: clause 1 (syscall::write:entry): predicate runs in the kernel at 1 probe",
            "dtrace: clause 1 (syscall::write:entry): aggregations run in the kernel at 1 probe",
            "dtrace: clause 2 (syscall::read:entry): predicate runs in the kernel at 0 probes, in \
             dtrace at 1 probe (at syscall:vmlinux:read:entry: instruction 8: subroutine \
             json() not yet translated to eBPF)",
            "dtrace: clause 2 (syscall::read:entry): aggregations run in the kernel at 0 probes, \
             in dtrace at 1 probe (at syscall:vmlinux:read:entry: instruction 8: subroutine \
             json() not yet translated to eBPF)",
            "dtrace: clause 3 (syscall::close:entry): aggregations run in the kernel at 1 probe",
        ],
        "{err}"
    );
    // Predicates kept in dtrace on purpose say so.
    let (rc, _, err) = dtrace_way(
        false,
        &[
            "-qv",
            "-n",
            "syscall::write:entry /pid == $target/ { @a = count(); }",
            "-c",
            DD,
        ],
    );
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.contains("(at syscall:vmlinux:write:entry: kernel predicates are off (DTRACE_KERNEL_PREDICATES=0))"),
        "{err}"
    );
}

#[test]
fn every_kind_of_probe_takes_a_kernel_predicate_or_says_why_not() {
    if !kernel_ok("every_kind_of_probe_takes_a_kernel_predicate_or_says_why_not") {
        return;
    }
    // Raw syscall tracepoints, tracepoints with fields, raw tracepoints of another thread's task,
    // perf events: the predicate is translated against each probe's context, loaded by the kernel
    // and never false where the interpreter says true (the counts of the two ways agree when the
    // predicate is always true at the probe).
    let pred = r#"pid == 1 || execname == "sleep" || arg0 == 3 || probename == "x" || uid == 4242 || cpu == 100000"#;
    let cases = [
        ("syscall::nanosleep:return", true),
        ("syscall::clock_nanosleep:entry", true),
        ("proc:::exec-success", true),
        ("proc:::exit", true),
        ("sched:::off-cpu", true),
        ("profile-997", true),
        // In the new thread itself, as it returns from the call that made it.
        ("proc:::lwp-start", true),
        // The record speaks for the thread going on CPU, not the one running: its ids, name
        // and credentials are read from its task.
        ("sched:::on-cpu", true),
        // A predicate on what the probe reads of the running thread only (its ancestry) stays in
        // dtrace.
        ("sched:::on-cpu", false),
    ];
    for (n, (probe, in_kernel)) in cases.into_iter().enumerate() {
        let pred = if n + 1 == cases.len() {
            "progenyof(1) && pid == 0"
        } else {
            pred
        };
        let script = format!("{probe} /{pred}/ {{ @ = count(); }}");
        let (rc, _, err) = dtrace(&["-qv", "-n", &script, "-c", "sleep 0.2"]);
        assert_eq!(rc, 0, "{probe}: {err}");
        let line = err
            .lines()
            .find(|l| l.starts_with("dtrace: clause 1 "))
            .unwrap_or_else(|| panic!("{probe}: no clause line in {err}"));
        if in_kernel {
            assert!(
                line.ends_with("predicate runs in the kernel at 1 probe"),
                "{probe}: {line}"
            );
        } else {
            assert!(
                line.contains("speaks for another thread than the one running"),
                "{probe}: {line}"
            );
        }
    }
    // Always true where it fires: the counts agree both ways.
    let script = r#"syscall::nanosleep:return,syscall::clock_nanosleep:entry /pid == $target && execname == "sleep"/ { @[probefunc] = count(); }"#;
    let (krc, kout, kerr) = dtrace_way(true, &["-q", "-n", script, "-c", "sleep 0.1"]);
    let (irc, iout, _) = dtrace_way(false, &["-q", "-n", script, "-c", "sleep 0.1"]);
    assert_eq!((krc, irc), (0, 0), "{kerr}");
    assert_eq!(kout, iout);
    assert!(kout.contains("clock_nanosleep"), "{kout}");
}

#[test]
fn curthread_chains_and_ppid_in_kernel_predicates() {
    if !kernel_ok("curthread_chains_and_ppid_in_kernel_predicates")
        || !common::have_btf("curthread_chains_and_ppid_in_kernel_predicates")
    {
        return;
    }
    // Kernel memory read at the probe by the predicate, and by the interpreter from the copies the
    // capture made: the same values.
    for p in [
        "curthread->tgid == pid && curthread->pid == tid",
        "curthread->real_parent->tgid == ppid && ppid != 0",
        "curpsinfo->pr_pid == pid && curthread->pid != 0",
        "curthread->tgid != pid",
    ] {
        let script = format!(
            "syscall::write:entry /pid == $target && ({p})/ {{ @[execname, arg2] = count(); }}"
        );
        let (rc, kout, kerr) = dtrace_way(true, &["-qv", "-n", &script, "-c", DD]);
        assert_eq!(rc, 0, "{p}: {kerr}");
        assert!(
            kerr.contains("predicate runs in the kernel at 1 probe\n"),
            "{p}: {kerr}"
        );
        let (rc, iout, ierr) = dtrace_way(false, &["-qv", "-n", &script, "-c", DD]);
        assert_eq!(rc, 0, "{p}: {ierr}");
        assert_eq!(kout, iout, "{p}");
    }
}

#[test]
fn errno_at_a_syscall_return_is_read_at_the_probe() {
    if !kernel_ok("errno_at_a_syscall_return_is_read_at_the_probe") {
        return;
    }
    // The idiom `/errno != 0/` at a return: errno is the negated result from -4095 to -1 (the
    // interpreter's rule), 0 at a success and at every entry probe; it is read at the probe,
    // in predicates, records and keys, and prints the same as in dtrace.
    let script = "syscall::openat:return /pid == $target && errno != 0/ { printf(\"e %d %d\\n\", \
        errno, (int)arg0); @[errno] = count(); } \
        syscall::openat:return /pid == $target && errno == 0/ { @ok = count(); } \
        syscall::openat:entry /pid == $target && errno == 0/ { @entries = count(); }";
    let cmd = "cat /nonexistent/a /etc/hostname /nonexistent/b";
    let said = |err: &str| {
        (1..=3).all(|n| {
            common::clause_lines(err, n)
                .iter()
                .any(|l| l.contains("in the kernel at 1 probe"))
        }) && !err.contains("errno is not available")
    };
    // (With predicates off, nothing runs in the kernel.)
    {
        let out = common::same_both_ways("DTRACE_KERNEL_PREDICATES", script, &[], cmd, &said);
        assert!(out.contains("e 2 -2\n"), "{out}");
        // (The loader's own failed opens count too.)
        let enoent = out.lines().find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() == 2 && w[0] == "2").then(|| w[1].parse::<u64>().unwrap_or(0))
        });
        assert!(enoent.is_some_and(|n| n >= 2), "{out}");
    }
}
