//! `copyout()` and `copyoutstr()` at the probe (issue 13): a C program compiled here writes a
//! buffer to `/dev/null` and prints what the buffer holds afterwards; the D clause at
//! `syscall::write:entry` rewrites the buffer before the kernel reads it. Also DTrace's checks
//! (destructive actions need `-w`), the fault at a bad destination, and `-x bpflog`'s verifier
//! log. Root, BPF and tracefs, and gcc; the copyout tests skip, with the reason, on a kernel that
//! refuses `bpf_probe_write_user` (a locked-down kernel).

mod common;
use common::{dtrace, have_gcc, kernel_ok, test_dir};
use std::path::PathBuf;

/// A program that fills a 64-byte buffer with `-` (a NUL last), writes it to `/dev/null`, turns
/// the NULs before the last byte into `|` and prints it; then does the same with a lowercase
/// message in a second buffer.
const WRITER: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(void) {
    int i, fd = open("/dev/null", O_WRONLY);
    char s[64];
    memset(s, '-', sizeof(s));
    s[sizeof(s) - 1] = '\0';
    write(fd, s, strlen(s));
    for (i = 0; i < (int)sizeof(s) - 1; i++)
        if (s[i] == '\0')
            s[i] = '|';
    printf("%s\n", s);
    close(fd);
    return 0;
}
"#;

/// The program's line: the first of the output, the rest blank (dtrace's closing blank line).
fn first_line(out: &str) -> String {
    assert!(out.lines().skip(1).all(str::is_empty), "{out}");
    out.lines().next().unwrap_or_default().to_string()
}

fn writer(tag: &str) -> PathBuf {
    common::compile_c(&test_dir(tag), "writer", WRITER, &[])
}

/// Whether the kernel lets BPF programs write user memory, from what dtrace said (`err`): skips
/// with the reason when it does not.
fn writes_allowed(test: &str, err: &str) -> bool {
    let refused = err.contains("refuses bpf_probe_write_user") || err.contains("locked down");
    if refused {
        let why = err.lines().last().unwrap_or(err);
        eprintln!("SKIP {test}: {why}");
    }
    !refused
}

/// Runs `clause` (at `syscall::write:entry`, for the writer's writes to `/dev/null`) with `-qw`
/// on the writer; `None` when the kernel refuses the writes.
fn rewrite(test: &str, clause: &str) -> Option<(i32, String, String)> {
    rewrite_after(test, "", clause)
}

/// [`rewrite`] with the clauses of `prelude` (`BEGIN`...) before the one at the write.
fn rewrite_after(test: &str, prelude: &str, clause: &str) -> Option<(i32, String, String)> {
    let w = writer(test);
    let script =
        format!("{prelude} syscall::write:entry /pid == $target && arg0 > 2/ {{ {clause} }}");
    let (rc, out, err) = dtrace(&["-qw", "-n", &script, "-c", w.to_str().unwrap()]);
    writes_allowed(test, &err).then_some((rc, out, err))
}

#[test]
fn copyout_rewrites_the_buffer_before_the_write_reads_it() {
    let t = "copyout_rewrites_the_buffer_before_the_write_reads_it";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let Some((rc, out, err)) = rewrite(t, r#"copyout("HELLO WORLD", arg1, 11);"#) else {
        return;
    };
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        first_line(&out),
        format!("HELLO WORLD{}", "-".repeat(52)),
        "{err}"
    );
}

#[test]
fn copyoutstr_writes_the_nul_only_when_the_size_leaves_room() {
    let t = "copyoutstr_writes_the_nul_only_when_the_size_leaves_room";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let msg = "HELLO WORLD; YOU HAVE A LONG MESSAGE TO DELIVER";
    // Longer than the string: the string and its NUL; shorter: that many characters, no NUL.
    for (size, want) in [
        (64, format!("{msg}|{}", "-".repeat(63 - msg.len() - 1))),
        (32, format!("{}{}", &msg[..32], "-".repeat(31))),
    ] {
        let clause = format!(r#"copyoutstr("{msg}", arg1, {size});"#);
        let Some((rc, out, err)) = rewrite(t, &clause) else {
            return;
        };
        assert_eq!(rc, 0, "{err}");
        assert_eq!(first_line(&out), want, "size {size}: {err}");
    }
}

#[test]
fn copyoutstr_of_execname_and_of_a_copied_in_string() {
    let t = "copyoutstr_of_execname_and_of_a_copied_in_string";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let Some((rc, out, err)) = rewrite(t, "copyoutstr(execname, arg1, 64);") else {
        return;
    };
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        first_line(&out),
        format!("writer|{}", "-".repeat(56)),
        "{err}"
    );
    // The buffer's own first 5 bytes, read at the probe and written back 10 bytes further.
    let Some((rc, out, err)) = rewrite(t, "copyoutstr(copyinstr(arg1, 6), arg1 + 10, 64);") else {
        return;
    };
    // A clause copying a string in may hand its firing to dtrace (a page not read yet), which
    // would write too late: such a clause is refused, with the reason.
    assert_ne!(rc, 0, "{out}");
    assert!(err.contains("too late for copyout()"), "{err}");
}

#[test]
fn copyout_of_string_variables_set_in_begin_or_by_the_clause() {
    let t = "copyout_of_string_variables_set_in_begin_or_by_the_clause";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    // A global set in BEGIN (which runs in dtrace, before the kernel's clauses start), as
    // Oracle's tst.copyout.sh has it; a thread-local, a global and a clause-local set by the
    // clause itself.
    for (prelude, clause) in [
        (r#"BEGIN { s = "HELLO"; }"#, "copyout(s, arg1, 5);"),
        (
            "",
            r#"self->s = "HELLO"; copyout(self->s, arg1, 5); self->s = 0;"#,
        ),
        ("", r#"g = "HELLO"; copyoutstr(g, arg1, 5);"#),
        ("", r#"this->s = "HELLO"; copyout(this->s, arg1, 5);"#),
    ] {
        let Some((rc, out, err)) = rewrite_after(t, prelude, clause) else {
            return;
        };
        assert_eq!(rc, 0, "{prelude} {clause}: {err}");
        assert_eq!(
            first_line(&out),
            format!("HELLO{}", "-".repeat(58)),
            "{prelude} {clause}: {err}"
        );
    }
}

#[test]
fn a_clause_that_copies_out_and_exits_runs_whole_at_the_probe() {
    // Oracle's tst.copyout.sh: copyout() and exit() in one clause. The clause runs whole at the
    // probe (it builds its string there, and its exit() stops the kernel's clauses): the buffer
    // is rewritten before the write reads it, and tracing ends.
    let t = "a_clause_that_copies_out_and_exits_runs_whole_at_the_probe";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let Some((rc, out, err)) = rewrite(t, r#"copyout("HELLO", arg1, 5); exit(0);"#) else {
        return;
    };
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        first_line(&out),
        format!("HELLO{}", "-".repeat(58)),
        "{err}"
    );
}

#[test]
fn an_exit_kept_from_the_probe_names_the_clause_that_keeps_it() {
    // An exit() in its own clause after a copyout() clause at the same probe: the copyout()
    // clause (no variables) may hand firings over to dtrace, so the exit() clause cannot run
    // whole at the probe, and the copyout() one, which must, is refused; the refusal names the
    // clause in dtrace and the probe.
    let t = "an_exit_kept_from_the_probe_names_the_clause_that_keeps_it";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = writer(t);
    let (rc, out, err) = dtrace(&[
        "-qw",
        "-n",
        r#"syscall::write:entry /pid == $target && arg0 > 2/ { copyout("HELLO", arg1, 5); }"#,
        "-n",
        "syscall::write:entry /pid == $target && arg0 > 2/ { exit(0); }",
        "-c",
        w.to_str().unwrap(),
    ]);
    if !writes_allowed(t, &err) {
        return;
    }
    assert_ne!(rc, 0, "{out}");
    assert!(
        err.contains("calls exit() at a kernel probe, where it cannot run whole: "),
        "{err}"
    );
    assert!(err.contains("runs in dtrace at syscall:"), "{err}");
}

#[test]
fn a_bad_destination_faults_at_its_address() {
    let t = "a_bad_destination_faults_at_its_address";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let Some((rc, out, err)) = rewrite(
        t,
        r#"copyout("HELLO", 16, 5); } ERROR { printf("error %d %x\n", arg4, arg5);"#,
    ) else {
        return;
    };
    assert_eq!(rc, 0, "{err}");
    // DTRACEFLT_BADADDR (1) at the destination; the buffer is untouched.
    assert!(out.contains("error 1 10\n"), "{out}\n{err}");
    assert!(out.contains(&"-".repeat(63)), "{out}");
    assert!(err.contains("invalid address (0x10)"), "{err}");
}

#[test]
fn copyout_without_destructive_actions_is_refused() {
    let t = "copyout_without_destructive_actions_is_refused";
    if !kernel_ok(t) {
        return;
    }
    let (rc, _, err) = dtrace(&[
        "-n",
        r#"syscall::write:entry /pid == 1/ { copyout("x", arg1, 1); }"#,
    ]);
    assert_ne!(rc, 0);
    assert!(
        err.contains("could not enable tracing: Destructive actions not allowed"),
        "{err}"
    );
}

#[test]
fn bpflog_prints_the_verifier_log_of_every_program() {
    let t = "bpflog_prints_the_verifier_log_of_every_program";
    if !kernel_ok(t) {
        return;
    }
    let script = "syscall::getppid:entry /pid == $target/ { @ = count(); }";
    let (rc, _, err) = dtrace(&["-q", "-x", "bpflog", "-n", script, "-c", "true"]);
    assert_eq!(rc, 0, "{err}");
    let log: Vec<&str> = err.lines().filter(|l| l.starts_with("BPF: ")).collect();
    // Level 7 (DTrace for Linux's): the instructions, the states and the statistics.
    assert!(log.iter().any(|l| l.contains("processed ")), "{err}");
    assert!(log.iter().any(|l| l.contains("call bpf_")), "{err}");
    // Level 4 alone: the statistics only.
    let (rc, _, err) = dtrace(&["-q", "-x", "bpflog=4", "-n", script, "-c", "true"]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.lines().any(|l| l.starts_with("BPF: processed ")),
        "{err}"
    );
    assert!(!err.contains("call bpf_"), "{err}");
    // Without the option, nothing.
    let (rc, _, err) = dtrace(&["-q", "-n", script, "-c", "true"]);
    assert_eq!(rc, 0, "{err}");
    assert!(!err.contains("BPF: "), "{err}");
    // A level the kernel does not have is refused.
    let (rc, _, err) = dtrace(&["-q", "-x", "bpflog=9", "-n", script]);
    assert_ne!(rc, 0);
    assert!(err.contains("bpflog"), "{err}");
}

#[test]
fn a_log_larger_than_bpflogsize_is_not_printed_and_the_load_fails() {
    let t = "a_log_larger_than_bpflogsize_is_not_printed_and_the_load_fails";
    if !kernel_ok(t) {
        return;
    }
    let script = "syscall::getppid:entry /pid == $target/ { @ = count(); }";
    let (rc, _, err) = dtrace(&[
        "-q",
        "-x",
        "bpflog",
        "-x",
        "bpflogsize=256",
        "-n",
        script,
        "-c",
        "true",
    ]);
    assert_ne!(rc, 0, "{err}");
    assert!(
        err.contains(
            "BPF verifier log is incomplete and is not reported.\nSet DTrace option \
             'bpflogsize' to some greater size for more output.\n(Current size is 256.)\n"
        ),
        "{err}"
    );
    assert!(!err.contains("BPF: "), "{err}");
}
