//! `dtrace` reading kernel memory through `curthread` and probe arguments (root, BPF, tracefs and
//! the kernel's BTF; skipped otherwise): the chains a clause walks are captured at the probe, so
//! `curthread->pid`, `curthread->real_parent->tgid`, `stringof(curthread->comm)` and the D
//! library's `curpsinfo`/`curlwpsinfo` agree with the built-in variables, and a chain through a NULL
//! pointer reports DTrace's error.

mod common;
use common::dtrace;

fn ready(test: &str) -> bool {
    common::kernel_ok(test) && common::have_btf(test)
}

const DD2: &str = "dd if=/dev/zero of=/dev/null bs=1 count=2 status=none";

#[test]
fn curthread_chains_print_what_the_variables_say() {
    if !ready("curthread_chains_print_what_the_variables_say") {
        return;
    }
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"syscall::write:entry /pid == $target/ {
            printf("%d=%d %d=%d %d=%d %s=%s %s=%s %d=%d %d=%d\n",
                curthread->pid, tid, curthread->tgid, pid, curthread->real_parent->tgid, ppid,
                stringof(curthread->comm), execname, curpsinfo->pr_fname, execname,
                curpsinfo->pr_ppid, ppid, curlwpsinfo->pr_lwpid, tid);
        }"#,
        "-c",
        DD2,
    ]);
    assert_eq!(rc, 0, "{err}");
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 2, "{out}");
    let me = std::process::id().to_string();
    for l in lines {
        let pairs: Vec<(&str, &str)> = l
            .split(' ')
            .map(|p| p.split_once('=').unwrap_or_else(|| panic!("{l}")))
            .collect();
        assert_eq!(pairs.len(), 7, "{l}");
        for (a, b) in &pairs {
            assert_eq!(a, b, "{l}");
        }
        // dd's parent is this test process, which ran dtrace -c.
        assert_ne!(pairs[0].0, me);
        assert_eq!(pairs[3].0, "dd");
    }
}

#[test]
fn a_chain_through_null_reports_invalid_address() {
    if !ready("a_chain_through_null_reports_invalid_address") {
        return;
    }
    // vfork_done is NULL once dd runs; `done` is the first member of struct completion.
    let (rc, out, err) = dtrace(&[
        "-qn",
        "syscall::write:entry /pid == $target/ { trace(curthread->vfork_done->done); }",
        "-c",
        DD2,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out.trim(), "", "{out}");
    let errs: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("dtrace: error in dt_clause_0 for probe ID "))
        .collect();
    assert_eq!(errs.len(), 2, "{err}");
    for e in errs {
        assert!(
            e.contains("(syscall:vmlinux:write:entry): invalid address (0x0) at BPF pc "),
            "{e}"
        );
    }
}

#[test]
fn a_member_of_a_tracepoint_pointer_argument() {
    if !ready("a_member_of_a_tracepoint_pointer_argument") {
        return;
    }
    // hrtimer_start's first field is the struct hrtimer *, its second the timer's function: the
    // function read through the pointer is the one the record carries. Timers start all the time;
    // sleep arms one.
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"sdt:timer::hrtimer_start { @[((struct hrtimer *)arg0)->function == arg1 ? "same" : "differ"] = count(); }
           syscall::exit_group:entry /pid == $target/ { exit(0); }"#,
        "-c",
        "sleep 0.05",
    ]);
    assert_eq!(rc, 0, "{err}");
    let words: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(words.first(), Some(&"same"), "{out}");
    assert_eq!(words.len(), 2, "{out}");
    assert!(words[1].parse::<u64>().unwrap() >= 1, "{out}");
}

#[test]
fn the_argument_strings_of_the_target_through_curpsinfo() {
    if !ready("the_argument_strings_of_the_target_through_curpsinfo") {
        return;
    }
    // pr_argv is the user address of the argument strings, read from the task's mm at the probe
    // (the NULL arm of the translator's `T->mm ? ... : 0` notwithstanding); the first string is
    // copied there too, so it is read even when dd has exited by the time the clause runs.
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"syscall::write:entry /pid == $target/ { printf("<%s>\n", copyinstr(curpsinfo->pr_argv)); }"#,
        "-c",
        DD2,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out, "<dd>\n<dd>\n\n", "{err}");
}

#[test]
fn psargs_of_the_target_show_its_arguments() {
    if !ready("psargs_of_the_target_show_its_arguments") {
        return;
    }
    // The argument strings joined by spaces, at most PRARGSZ - 1 = 79 characters, as in psinfo.
    let long = "dd if=/dev/zero of=/dev/null bs=1 count=1 status=none conv=notrunc,noerror,sync iflag=fullblock";
    for (cmd, want) in [
        (
            "dd if=/dev/zero of=/dev/null bs=1 count=1 status=none",
            "dd if=/dev/zero of=/dev/null bs=1 count=1 status=none",
        ),
        (long, &long[..79]),
    ] {
        let (rc, out, err) = dtrace(&[
            "-qn",
            r#"syscall::write:entry /pid == $target/ { printf("<%s>\n", curpsinfo->pr_psargs); }"#,
            "-c",
            cmd,
        ]);
        assert_eq!(rc, 0, "{err}");
        assert_eq!(out, format!("<{want}>\n\n"), "{err}");
    }
    // printf() and trace() of the member build their records at the probe, byte for byte what
    // dtrace builds (trace() of a char array prints its bytes, zeros past the string).
    let out = common::same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ { printf("<%s>\n", curpsinfo->pr_psargs);
            trace(curpsinfo->pr_psargs); }"#,
        &[],
        "dd if=/dev/zero of=/dev/null bs=1 count=1 status=none",
        &[(1, common::RECORDS_AT_ONE_PROBE)],
    );
    assert!(out.contains("<dd if=/dev/zero of=/dev/null"), "{out}");
    assert!(
        out.contains("0: 64 64 20 69 66 3d 2f 64 65 76 2f 7a 65 72 6f 20  dd if=/dev/zero "),
        "{out}"
    );
    // A kernel thread has no arguments.
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"sdt:sched::sched_switch /curthread->mm == 0/ { printf("<%s>\n", curpsinfo->pr_psargs); exit(0); }"#,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out, "<>\n\n", "{err}");
}
