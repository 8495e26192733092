//! Strings through `?:` at the probe: records, aggregation keys, predicates, string variables and
//! associative array keys whose string is chosen by a condition (constants, `execname`, copied
//! user strings, string variables and NULL among the choices, nested) run in the kernel (`-v`
//! says so) and print exactly what the interpreter prints with every kernel path off, NULL's
//! faults included, at D's default `strsize` and at one that cuts the strings; at a `strsize`
//! shorter than a constant chosen, the clause stays in dtrace and `-v` says why.
mod common;
use common::same_with_kernel_paths_off as same_both_ways;
use common::{have_gcc, kernel_ok};

/// The traced program (`kcond`): writes 1, 22 and 333 bytes to /dev/null three times over, and
/// opens a path that does not exist (copied to the stack first: a string on a page not yet read
/// in would fault at the probe, as in DTrace).
const WRITER: &str = r#"
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
int main(void) {
    static char buf[333];
    char path[64];
    int fd = open("/dev/null", O_WRONLY);
    if (fd < 0)
        return 1;
    for (int r = 0; r < 3; r++) {
        write(fd, buf, 1);
        write(fd, buf, 22);
        write(fd, buf, 333);
        strcpy(path, "/nonexistent/kcond");
        openat(AT_FDCWD, path, O_RDONLY);
    }
    return 0;
}
"#;

fn writer(tag: &str) -> String {
    common::traced_program(tag, "kcond", WRITER)
}

const AGGS: &str = common::AGGS_AT_ONE_PROBE;
const RECORDS: &str = common::RECORDS_AT_ONE_PROBE;
const WHOLE: &str = "runs whole in the kernel";
const PRINTA: &str = r#"END { printa("%s %@d\n", @); }"#;

#[test]
fn strings_chosen_by_a_condition_print_in_records_built_at_the_probe() {
    let t = "strings_chosen_by_a_condition_print_in_records_built_at_the_probe";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("kcond-records");
    let script = "syscall::write:entry /pid == $target/ { \
                  printf(\"%s %s %s|\\n\", arg2 > 3 ? \"big\" : \"tiny\", \
                  arg2 == 1 ? \"one\" : arg2 == 22 ? execname : probefunc, \
                  arg2 < 100 ? execname : \"long\"); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, RECORDS)]);
    for w in ["tiny one kcond|", "big kcond kcond|", "big write long|"] {
        assert_eq!(
            out.lines().filter(|l| l.trim() == w).count(),
            3,
            "{w:?} in {out}"
        );
    }
    // A strsize that cuts `execname` and the probe's name, and one that would cut the constants:
    // a copy would cut what the interpreter compares of them, so the clause stays in dtrace,
    // and says why.
    same_both_ways(script, &["-x", "strsize=4"], &cmd, &[(1, RECORDS)]);
    same_both_ways(
        script,
        &["-x", "strsize=2"],
        &cmd,
        &[
            (
                1,
                "records are built in dtrace (at syscall:vmlinux:write:entry: instruction",
            ),
            (
                1,
                "a string constant longer than strsize joined with other strings",
            ),
        ],
    );
    // A copied user string or a constant; NULL, which faults when recorded, as in DTrace.
    let script = "syscall::openat:entry /pid == $target/ { \
                  printf(\"%s|\\n\", arg2 ? \"flags\" : copyinstr(arg1)); } \
                  syscall::write:entry /pid == $target/ { \
                  printf(\"%s|\\n\", arg2 == 22 ? NULL : \"w\"); }";
    let (out, err) = same_both_ways_with_errors(script, &cmd, &[(1, RECORDS), (2, RECORDS)]);
    for (w, n) in [("/nonexistent/kcond|", 3), ("flags|", 1), ("w|", 6)] {
        assert_eq!(
            out.lines().filter(|l| l.trim() == w).count(),
            n,
            "{w:?} in {out}"
        );
    }
    assert_eq!(
        err.lines()
            .filter(|l| l.starts_with("dtrace: error") && l.contains("invalid address (0x0)"))
            .count(),
        3,
        "{err}"
    );
}

/// As [`same_both_ways`] (which compares the error lines), also returning the first way's
/// stderr.
fn same_both_ways_with_errors(script: &str, cmd: &str, said: &[(usize, &str)]) -> (String, String) {
    let out = same_both_ways(script, &[], cmd, said);
    let (_, _, err) = common::dtrace(&["-qv", "-n", script, "-c", cmd]);
    (out, err)
}

#[test]
fn strings_chosen_by_a_condition_key_aggregations_in_the_kernel() {
    let t = "strings_chosen_by_a_condition_key_aggregations_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("kcond-keys");
    for (key, want) in [
        (r#"arg2 > 3 ? "big" : "tiny""#, vec!["big 6", "tiny 3"]),
        (
            r#"arg2 == 1 ? "one" : arg2 == 22 ? "two" : "many""#,
            vec!["one 3", "two 3", "many 3"],
        ),
        (
            r#"arg2 == 22 ? execname : probefunc"#,
            vec!["kcond 3", "write 6"],
        ),
        (
            r#"arg2 == 1 ? "one" : lltostr(arg2)"#,
            vec!["one 3", "22 3", "333 3"],
        ),
    ] {
        let script =
            format!("syscall::write:entry /pid == $target/ {{ @[{key}] = count(); }} {PRINTA}");
        let out = same_both_ways(&script, &[], &cmd, &[(1, AGGS)]);
        for w in want {
            assert!(out.lines().any(|l| l.trim() == w), "{key}: {w:?} in {out}");
        }
        same_both_ways(&script, &["-x", "strsize=4"], &cmd, &[(1, AGGS)]);
    }
}

#[test]
fn predicates_compare_strings_chosen_by_a_condition_in_the_kernel() {
    let t = "predicates_compare_strings_chosen_by_a_condition_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("kcond-preds");
    let script =
        "syscall::write:entry /pid == $target && (arg2 > 3 ? \"big\" : \"small\") == \"big\"/ \
         { @[arg2] = count(); } \
         syscall::write:entry /pid == $target && (arg2 == 22 ? execname : \"x\") == execname/ \
         { @[arg2 + 1000] = count(); } \
         syscall::write:entry /pid == $target && \
         strlen(arg2 == 1 ? \"a\" : arg2 == 22 ? \"bb\" : \"ccc\") == 3/ \
         { @[arg2 + 2000] = count(); } \
         END { printa(\"%d %@d\\n\", @); }";
    let out = same_both_ways(
        script,
        &[],
        &cmd,
        &[
            (1, "predicate runs in the kernel"),
            (2, "predicate runs in the kernel"),
            (3, "predicate runs in the kernel"),
        ],
    );
    for w in ["22 3", "333 3", "1022 3", "2333 3"] {
        assert!(out.lines().any(|l| l.trim() == w), "{w:?} in {out}");
    }
    assert!(!out.lines().any(|l| l.trim() == "1 3"), "{out}");
}

#[test]
fn variables_hold_and_are_keyed_by_strings_chosen_by_a_condition_in_the_kernel() {
    let t = "variables_hold_and_are_keyed_by_strings_chosen_by_a_condition_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("kcond-vars");
    let script = format!(
        "syscall::write:entry /pid == $target/ {{ \
         self->s = arg2 > 3 ? (arg2 > 100 ? \"long\" : execname) : \"tiny\"; \
         this->t = arg2 == 22 ? self->s : \"else\"; @[this->t] = count(); }} \
         syscall::write:return /self->s != NULL/ {{ @[strjoin(self->s, \"+r\")] = count(); \
         self->s = arg1 == 1 ? 0 : self->s; }} \
         syscall::write:return /self->s != NULL/ {{ @[self->s] = count(); self->s = 0; }} \
         {PRINTA}"
    );
    let out = same_both_ways(&script, &[], &cmd, &[(1, WHOLE), (2, WHOLE), (3, WHOLE)]);
    for w in [
        "kcond 6",
        "else 6",
        "tiny+r 3",
        "kcond+r 3",
        "long+r 3",
        "long 3",
    ] {
        assert!(out.lines().any(|l| l.trim() == w), "{w:?} in {out}");
    }
    assert!(!out.lines().any(|l| l.trim().starts_with("tiny ")), "{out}");
    same_both_ways(
        &script,
        &["-x", "strsize=4"],
        &cmd,
        &[(1, WHOLE), (2, WHOLE), (3, WHOLE)],
    );
    // An associative array's key chosen by a condition.
    let script = format!(
        "syscall::write:entry /pid == $target/ {{ n[arg2 > 3 ? \"big\" : execname] += arg2; \
         @[arg2 > 3 ? \"big\" : execname] = sum(n[arg2 > 3 ? \"big\" : execname]); }} {PRINTA}"
    );
    let out = same_both_ways(&script, &[], &cmd, &[(1, WHOLE)]);
    for w in ["kcond 6", "big 3261"] {
        assert!(out.lines().any(|l| l.trim() == w), "{w:?} in {out}");
    }
}
