//! `strjoin()` and `lltostr()` at the probe: clauses that build strings from `execname`,
//! constants, copied user strings and numbers, as aggregation keys, in predicates and in records
//! built at the probe, run in the kernel (`-v` says so) and print exactly what the interpreter
//! prints with every kernel path off, at D's default `strsize` and at a `strsize` the strings
//! fill.

mod common;
use common::same_with_kernel_paths_off as same_both_ways;
use common::{have_gcc, kernel_ok};

/// The traced program (`kstrbuild`): writes 1, 22 and 333 bytes to /dev/null three times over,
/// and opens two paths that do not exist, one of them longer than a small `strsize`.
const WRITER: &str = r#"
#include <fcntl.h>
#include <unistd.h>
int main(void) {
    static char buf[333];
    int fd = open("/dev/null", O_WRONLY);
    if (fd < 0)
        return 1;
    for (int r = 0; r < 3; r++) {
        write(fd, buf, 1);
        write(fd, buf, 22);
        write(fd, buf, 333);
        openat(AT_FDCWD, "/nonexistent/ksb", O_RDONLY);
        openat(AT_FDCWD, "/nonexistent/kstrbuild-a-long-path", O_RDONLY);
    }
    return 0;
}
"#;

fn writer(tag: &str) -> String {
    common::traced_program(tag, "kstrbuild", WRITER)
}

const AGGS: &str = common::AGGS_AT_ONE_PROBE;
const RECORDS: &str = common::RECORDS_AT_ONE_PROBE;
const PRINTA: &str = r#"END { printa("%s %@d\n", @); }"#;

#[test]
fn strjoin_and_lltostr_keys_count_in_the_kernel() {
    let t = "strjoin_and_lltostr_keys_count_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("ksb-keys");
    for (key, want) in [
        (r#"strjoin(execname, "-w")"#, vec!["kstrbuild-w 9"]),
        ("lltostr(arg2)", vec!["1 3", "22 3", "333 3"]),
        ("lltostr(arg2, 16)", vec!["0x1 3", "0x16 3", "0x14d 3"]),
        ("lltostr(-arg2)", vec!["-1 3", "-22 3", "-333 3"]),
        (
            r#"strjoin(strjoin(execname, ":"), lltostr(arg2, 8))"#,
            vec!["kstrbuild:01 3", "kstrbuild:026 3", "kstrbuild:0515 3"],
        ),
    ] {
        let script =
            format!("syscall::write:entry /pid == $target/ {{ @[{key}] = count(); }} {PRINTA}");
        let out = same_both_ways(&script, &[], &cmd, &[(1, AGGS)]);
        for w in want {
            assert!(out.lines().any(|l| l.trim() == w), "{key}: {w:?} in {out}");
        }
    }
}

#[test]
fn strings_built_from_copied_strings_fill_strsize_as_in_dtrace() {
    let t = "strings_built_from_copied_strings_fill_strsize_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("ksb-strsize");
    let script = format!(
        "syscall::openat:entry /pid == $target/ {{ \
         @[strjoin(copyinstr(arg1), strjoin(\"#\", lltostr(arg2)))] = count(); }} {PRINTA}"
    );
    let out = same_both_ways(&script, &[], &cmd, &[(1, AGGS)]);
    assert!(out.contains("/nonexistent/ksb#0 3"), "{out}");
    for strsize in ["16", "17", "15", "8"] {
        let out = same_both_ways(
            &script,
            &["-x", &format!("strsize={strsize}")],
            &cmd,
            &[(1, AGGS)],
        );
        assert!(out.lines().count() >= 2, "strsize {strsize}: {out}");
    }
    // A predicate comparing a joined string.
    let script = format!(
        "syscall::openat:entry /pid == $target && \
         strjoin(copyinstr(arg1), \"!\") == \"/nonexistent/ksb!\"/ {{ @[execname] = count(); }} \
         {PRINTA}"
    );
    let out = same_both_ways(&script, &[], &cmd, &[(1, AGGS)]);
    assert!(out.contains("kstrbuild 3"), "{out}");
}

#[test]
fn built_strings_print_in_records_built_at_the_probe() {
    let t = "built_strings_print_in_records_built_at_the_probe";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("ksb-records");
    let script = "syscall::write:entry /pid == $target/ { \
                  printf(\"%s %s|\\n\", strjoin(execname, \"-w\"), lltostr(arg2, 2)); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, RECORDS)]);
    assert_eq!(out.matches("kstrbuild-w 101001101|").count(), 3, "{out}");
}

#[test]
fn built_strings_live_in_variables_in_the_kernel() {
    let t = "built_strings_live_in_variables_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("ksb-vars");
    let script = format!(
        "syscall::write:entry /pid == $target/ {{ self->s = strjoin(execname, lltostr(arg2)); \
         x = strjoin(self->s, self->s); }} \
         syscall::write:return /self->s != NULL/ {{ @[strjoin(self->s, \"+r\")] = count(); \
         @[x] = count(); self->s = 0; }} {PRINTA}"
    );
    let out = same_both_ways(&script, &[], &cmd, &[(1, "runs whole in the kernel")]);
    for w in ["kstrbuild22+r 3", "kstrbuild333kstrbuild333 3"] {
        assert!(out.lines().any(|l| l.trim() == w), "{w:?} in {out}");
    }
}

#[test]
fn substr_cuts_at_the_probe_as_in_dtrace() {
    let t = "substr_cuts_at_the_probe_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("ksb-substr");
    let script = format!(
        "syscall::openat:entry /pid == $target/ {{ @[substr(copyinstr(arg1), -4)] = count(); \
         @[substr(copyinstr(arg1), 1, -20)] = count(); @[substr(execname, arg2 - 3, 3)] = count(); \
         @[substr(strjoin(execname, lltostr(arg2)), 5, 100)] = count(); }} {PRINTA}"
    );
    let out = same_both_ways(&script, &[], &cmd, &[(1, AGGS)]);
    for w in ["/ksb 3", "path 3", "nonexistent/k 3", "ild 6", "uild0 6"] {
        assert!(out.lines().any(|l| l.trim() == w), "{w:?} in {out}");
    }
    for strsize in ["16", "8", "5"] {
        same_both_ways(
            &script,
            &["-x", &format!("strsize={strsize}")],
            &cmd,
            &[(1, AGGS)],
        );
    }
}
