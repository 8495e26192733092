//! `strtok()` at the probe: a path copied from `openat()`'s argument, tokenized across two clauses
//! of one probe (the second continuing with `strtok(NULL, ...)` the string the first began), runs
//! whole in the kernel (`-v` says so) and prints exactly what the interpreter prints with every
//! kernel path off, NULL tokens' faults included, at D's default `strsize` and at one that cuts the
//! paths; leading and trailing delimiters, empty tokens and a path without a delimiter among
//! them. When one clause calling `strtok()` at a probe stays in dtrace, every one at that probe
//! does, and `-v` says why, naming that clause: the firing's state is never split between the two
//! paths. Another probe's (another program's) `strtok()` clauses run in the kernel all the same.
//! Strings at kernel pointers (`(char *)curthread->comm`, a `(string)` cast, the char array
//! itself, a NULL pointer that continues) are tokenized in the kernel; one at a user pointer
//! stays in dtrace, saying why.

mod common;
use common::same_with_kernel_paths_off as same_both_ways;
use common::{have_gcc, kernel_ok};

/// The traced program (`kstrtok`): opens, three times over, paths that do not exist, copied to
/// the stack first (a string on a page not yet read in would fault at the probe, as in DTrace),
/// on one CPU (a line is printed by two firings, and the errors are compared in order: records
/// of several CPUs' buffers would interleave differently from run to run).
const OPENER: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>
int main(void) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0)
        return 1;
    static const char *paths[] = {
        "//nonexistent/kstrtok//a-b.c/",
        "kstrtok",
        "///",
        "/nonexistent/kstrtok-a-longer-path/x",
    };
    char buf[64];
    for (int r = 0; r < 3; r++) {
        for (unsigned i = 0; i < sizeof paths / sizeof paths[0]; i++) {
            strcpy(buf, paths[i]);
            openat(AT_FDCWD, buf, O_RDONLY);
        }
    }
    return 0;
}
"#;

fn opener(tag: &str) -> String {
    common::traced_program(tag, "kstrtok", OPENER)
}

const WHOLE: &str = "runs whole in the kernel at 1 probe";

#[test]
fn a_path_is_tokenized_across_two_clauses_in_the_kernel() {
    let t = "a_path_is_tokenized_across_two_clauses_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstrtok-clauses");
    let script = "syscall::openat:entry /pid == $target/ { \
                  printf(\"%s|\", strtok(copyinstr(arg1), \"/\")); } \
                  syscall::openat:entry /pid == $target/ { \
                  printf(\"%s|%s\\n\", strtok(NULL, \"/\"), strtok(NULL, \"-\")); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, WHOLE), (2, WHOLE)]);
    // The second path's second clause and the third's first find no token: a NULL printed
    // faults, and the line goes on with the next path's.
    for w in [
        "nonexistent|kstrtok|//a",
        "kstrtok|nonexistent|kstrtok-a-longer-path|/x",
    ] {
        assert_eq!(
            out.lines().filter(|l| l.trim() == w).count(),
            3,
            "{w:?} in {out}"
        );
    }
    // A large strsize too: the scans have no branch per byte for the verifier to keep.
    for strsize in ["16", "8", "3", "1000"] {
        same_both_ways(
            script,
            &["-x", &format!("strsize={strsize}")],
            &cmd,
            &[(1, WHOLE), (2, WHOLE)],
        );
    }
}

#[test]
fn tokens_are_keys_and_string_variables_in_the_kernel() {
    let t = "tokens_are_keys_and_string_variables_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstrtok-keys");
    let script =
        "syscall::openat:entry /pid == $target && strtok(copyinstr(arg1), \"/\") != NULL/ { \
                  this->d = \"/\"; self->t = strtok(NULL, this->d); } \
                  syscall::openat:entry /pid == $target && self->t != NULL/ { \
                  @[self->t, strtok(NULL, strjoin(\"-\", this->d)) == NULL] = count(); \
                  self->t = 0; } \
                  END { printa(\"%s %d %@d\\n\", @); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, "runs whole in the kernel")]);
    for w in ["kstrtok 0 3", "kstrtok-a-longer-path 0 3"] {
        assert!(out.lines().any(|l| l.trim() == w), "{w:?} in {out}");
    }
}

#[test]
fn one_strtok_clause_in_dtrace_keeps_the_probes_others_there() {
    let t = "one_strtok_clause_in_dtrace_keeps_the_probes_others_there";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstrtok-placed");
    // json() is not translated: the second clause stays in dtrace, and with it the first.
    let script = "syscall::openat:entry /pid == $target/ { \
                  @a[strtok(copyinstr(arg1), \"/\")] = count(); } \
                  syscall::openat:entry /pid == $target/ { \
                  @b[strtok(NULL, \"/\"), strtoll(json(\"12\", \"\"))] = count(); } \
                  END { printa(\"%s %@d\\n\", @a); printa(\"%s %d %@d\\n\", @b); }";
    let out = same_both_ways(
        script,
        &[],
        &cmd,
        &[
            (
                1,
                "variables stay in dtrace (clause syscall::openat:entry runs in dtrace: at \
                 syscall:vmlinux:openat:entry: instruction 5: subroutine json() not yet \
                 translated to eBPF)",
            ),
            (2, "json() not yet translated"),
        ],
    );
    for w in [
        "nonexistent 6",
        "kstrtok 3",
        "kstrtok 12 3",
        "kstrtok-a-longer-path 12 3",
    ] {
        assert!(out.lines().any(|l| l.trim() == w), "{w:?} in {out}");
    }
}

#[test]
fn a_probes_strtok_clauses_in_dtrace_keep_no_other_probes_there() {
    let t = "a_probes_strtok_clauses_in_dtrace_keep_no_other_probes_there";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstrtok-probes");
    // openat()'s entry keeps its strtok() clauses in dtrace (json() is not translated); its
    // return never shares a firing with them: its clauses, another program's, run in the
    // kernel.
    // The entry's first clause keeps a variable in the kernel there: the probe's kernel
    // clauses see the kernel's variables, which hold no strtok() state at this probe.
    let entry = "syscall::openat:entry /pid == $target/ { this->n = 1; @e[this->n] = count(); } \
                  syscall::openat:entry /pid == $target/ { \
                  @a[strtok(copyinstr(arg1), \"/\")] = count(); } \
                  syscall::openat:entry /pid == $target/ { \
                  @b[strtok(NULL, \"/\"), strtoll(json(\"12\", \"\"))] = count(); } \
                  END { printa(\"%s %@d\\n\", @a); printa(\"%s %d %@d\\n\", @b); \
                  printa(\"%s %s %@d\\n\", @c); }";
    let ret = "syscall::openat:return /pid == $target/ { \
               @c[strtok(execname, \"t\"), strtok(NULL, \"t\")] = count(); } \
               syscall::openat:return /pid == $target/ { @d[strtok(NULL, \"t\")] = count(); }";
    let out = same_both_ways(
        entry,
        &["-n", ret],
        &cmd,
        &[
            (1, WHOLE),
            (2, WHOLE),
            (
                3,
                "runs whole in the kernel at 1 probe (variables this->n live",
            ),
            (
                4,
                "strtok()'s state lives in dtrace at this probe (one per firing, shared by \
                 every clause calling strtok() there: they run whole in the kernel or all in \
                 dtrace)",
            ),
            (5, "json() not yet translated"),
        ],
    );
    for w in ["nonexistent 6", "kstrtok 12 3", "ks r 12"] {
        assert!(out.lines().any(|l| l.trim() == w), "{w:?} in {out}");
    }
}

#[test]
fn a_clause_at_two_probes_links_their_strtok_states() {
    let t = "a_clause_at_two_probes_links_their_strtok_states";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstrtok-two-probes");
    // The first clause fires at openat()'s entry and return: the entry's clause in dtrace
    // (json()) keeps it there, and with it the return's; sched_setaffinity()'s runs in the
    // kernel.
    let script = "syscall::openat:* /pid == $target/ { \
                  @[probename, strtok(execname, \"t\")] = count(); } \
                  syscall::openat:return /pid == $target/ { \
                  @[probename, strtok(NULL, \"t\")] = count(); } \
                  syscall::openat:entry /pid == $target/ { \
                  @[probename, strtok(NULL, \"t\")] = count(); @n[strtoll(json(\"1\", \"\"))] = count(); } \
                  syscall::sched_setaffinity:entry /pid == $target/ { \
                  @[probename, strtok(execname, \"o\")] = count(); }";
    let out = same_both_ways(
        script,
        &[],
        &cmd,
        &[
            (
                2,
                "it shares strtok()'s state with clause syscall::openat:*, which stays in \
                 dtrace",
            ),
            (4, WHOLE),
        ],
    );
    let words = |l: &str| l.split_whitespace().collect::<Vec<_>>().join(" ");
    for w in [
        "entry ks 12",
        "entry r 12",
        "return ks 12",
        "return r 12",
        "entry kstrt 1",
    ] {
        assert!(out.lines().any(|l| words(l) == w), "{w:?} in {out}");
    }
}

#[test]
fn strings_at_kernel_pointers_are_tokenized_in_the_kernel() {
    let t = "strings_at_kernel_pointers_are_tokenized_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstrtok-pointers");
    // The task's comm ("kstrtok") and its parent's (dtrace's) as pointers, as strings and as
    // char arrays.
    let script = "syscall::openat:entry /pid == $target/ { \
                  @a[strtok((char *)curthread->comm, \"t\")] = count(); } \
                  syscall::openat:entry /pid == $target/ { \
                  @b[strtok(NULL, \"t\"), strtok((string)curthread->comm, \"k\")] = count(); } \
                  syscall::openat:entry /pid == $target/ { \
                  @c[strtok((char *)0, \"t\"), \
                  strtok((char *)curthread->real_parent->comm, \"r\")] = count(); } \
                  syscall::openat:entry /pid == $target/ { \
                  @d[strtok(curthread->comm, \"s\"), strtok(NULL, \"k\")] = count(); } \
                  END { printa(\"%s %@d\\n\", @a); printa(\"%s %s %@d\\n\", @b); \
                  printa(\"%s %s %@d\\n\", @c); printa(\"%s %s %@d\\n\", @d); }";
    let out = same_both_ways(
        script,
        &[],
        &cmd,
        &[(1, WHOLE), (2, WHOLE), (3, WHOLE), (4, WHOLE)],
    );
    for w in ["ks 12", "r strto 12", "k dt 12", "k strto 12"] {
        assert!(out.lines().any(|l| l.trim() == w), "{w:?} in {out}");
    }
}

#[test]
fn a_string_at_a_user_pointer_is_read_in_dtrace() {
    let t = "a_string_at_a_user_pointer_is_read_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstrtok-user-pointer");
    // openat()'s path is user memory: strtok() reads kernel memory, which the interpreter
    // reads from the probe's copy; the clause stays in dtrace and faults there, as DTrace's
    // strtok() of a user address does.
    let script = "syscall::openat:entry /pid == $target/ { \
                  @[strtok((char *)arg1, \"/\")] = count(); } \
                  syscall::openat:entry /pid == $target/ { @n = count(); }";
    let args = ["-qv", "-n", script, "-c", &cmd];
    let (rc, kout, kerr) = common::dtrace_with_env(&[], &args);
    assert_eq!(rc, 0, "{kerr}");
    let said = "strtok(): a string at probe argument arg1 is read in dtrace";
    assert!(
        common::clause_lines(&kerr, 1)
            .iter()
            .any(|l| l.contains(said)),
        "{kerr}"
    );
    let (rc, iout, ierr) = common::dtrace_with_env(&common::kernel_paths_off(), &args);
    assert_eq!(rc, 0, "{ierr}");
    assert_eq!(common::sorted(&kout), common::sorted(&iout));
    assert!(kout.lines().any(|l| l.trim() == "12"), "{kout}");
    // Every firing's fault (the paths' addresses on the stack differ from run to run).
    for err in [&kerr, &ierr] {
        let faults = common::error_lines(err);
        assert_eq!(faults.len(), 12, "{err}");
        assert!(
            faults.iter().all(|l| l.contains("dt_clause_0")
                && l.contains("invalid address (0x7f")
                && l.ends_with("at BPF pc 13")),
            "{err}"
        );
    }
}
