//! `toupper()`, `tolower()`, `basename()`, `dirname()`, `cleanpath()` and `lltostr()` with a
//! base computed at run time, at the probe: clauses that use them on copied paths and on
//! `execname`, as aggregation keys, in predicates, in records built at the probe and in string
//! variables, run in the kernel (`-v` says so) and print exactly what the interpreter prints
//! with every kernel path off, at D's default `strsize` and at sizes that cut the paths.

mod common;
use common::same_with_kernel_paths_off as same_both_ways;
use common::{have_gcc, kernel_ok};

/// The traced program (`kstrpaths`): opens paths with the border cases of the path rules
/// (none of them exists; their pages read in first), then writes 1, 22 and 333 bytes to /dev/null.
const PROGRAM: &str = r#"
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
int main(void) {
    static char buf[333];
    static const char *paths[] = {
        "/nonexistent/ksp-a/",
        "//nonexistent//ksp-b",
        "/nonexistent/../ksp/./c",
        "/",
        "///",
        "ksp-relative",
        "../ksp-up",
        "",
        "/nonexistent/.../ksp/..",
        "/nonexistent/KsP-MiXeD.Case",
        "/nonexistent/a/b/c/../../../../../ksp-long-name",
        "./ksp-dot/.",
    };
    /* The strings' pages read in first: the probe cannot fault them in. */
    volatile size_t n = 0;
    for (unsigned i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        n += strlen(paths[i]);
    for (unsigned i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        openat(AT_FDCWD, paths[i], O_RDONLY);
    int fd = open("/dev/null", O_WRONLY);
    if (fd < 0)
        return 1;
    write(fd, buf, 1);
    write(fd, buf, 22);
    write(fd, buf, 333);
    return 0;
}
"#;

fn program(tag: &str) -> String {
    common::traced_program(tag, "kstrpaths", PROGRAM)
}

const AGGS: &str = common::AGGS_AT_ONE_PROBE;
const RECORDS: &str = common::RECORDS_AT_ONE_PROBE;

#[test]
fn path_keys_count_in_the_kernel() {
    let t = "path_keys_count_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = program("ksp-keys");
    let script = "syscall::openat:entry /pid == $target/ { @[basename(copyinstr(arg1)), \
                  dirname(copyinstr(arg1)), toupper(execname)] = count(); \
                  @c[cleanpath(copyinstr(arg1)), tolower(copyinstr(arg1))] = count(); } \
                  END { printa(\"%s|%s|%s %@d\\n\", @); printa(\"%s|%s %@d\\n\", @c); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, AGGS)]);
    for w in [
        "ksp-a|/nonexistent|KSTRPATHS 1",
        "ksp-b|//nonexistent|KSTRPATHS 1",
        "/|/|KSTRPATHS 2",
        "ksp-relative|.|KSTRPATHS 1",
        ".|.|KSTRPATHS 1",
        "..|/nonexistent/.../ksp|KSTRPATHS 1",
        ".|./ksp-dot|KSTRPATHS 1",
        "/ksp/c|/nonexistent/../ksp/./c 1",
        "/nonexistent/.../|/nonexistent/.../ksp/.. 1",
        "/nonexistent/KsP-MiXeD.Case|/nonexistent/ksp-mixed.case 1",
        "/ksp-long-name|/nonexistent/a/b/c/../../../../../ksp-long-name 1",
        "/nonexistent/ksp-b|//nonexistent//ksp-b 1",
    ] {
        assert!(out.lines().any(|l| l.trim() == w), "{w:?} in {out}");
    }
    for strsize in ["16", "8", "5"] {
        same_both_ways(
            script,
            &["-x", &format!("strsize={strsize}")],
            &cmd,
            &[(1, AGGS)],
        );
    }
}

#[test]
fn paths_print_and_compare_in_the_kernel() {
    let t = "paths_print_and_compare_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = program("ksp-records");
    let script = "syscall::openat:entry /pid == $target/ { printf(\"%s|%s|%s|%s\\n\", \
                  cleanpath(copyinstr(arg1)), toupper(basename(copyinstr(arg1))), \
                  dirname(cleanpath(copyinstr(arg1))), tolower(execname)); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, RECORDS)]);
    assert!(
        out.contains("/nonexistent/ksp-b|KSP-B|/nonexistent|kstrpaths\n"),
        "{out}"
    );
    same_both_ways(script, &["-x", "strsize=16"], &cmd, &[(1, RECORDS)]);
    // Predicates compare the built strings.
    let script = "syscall::openat:entry /pid == $target && (basename(copyinstr(arg1)) == \"..\" \
                  || toupper(copyinstr(arg1)) == \"/NONEXISTENT/KSP-MIXED.CASE\")/ \
                  { @[copyinstr(arg1)] = count(); } END { printa(\"%s %@d\\n\", @); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, AGGS)]);
    assert_eq!(
        out.lines().filter(|l| l.ends_with(" 1")).count(),
        2,
        "{out}"
    );
}

#[test]
fn paths_live_in_string_variables_in_the_kernel() {
    let t = "paths_live_in_string_variables_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = program("ksp-vars");
    let script = "syscall::openat:entry /pid == $target/ { self->d = dirname(copyinstr(arg1)); } \
                  syscall::openat:return /self->d != NULL/ { @[basename(self->d)] = count(); \
                  self->d = 0; } END { printa(\"%s %@d\\n\", @); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, "runs whole in the kernel")]);
    assert!(out.lines().any(|l| l.trim() == "nonexistent 3"), "{out}");
}

#[test]
fn lltostr_with_a_base_computed_at_run_time_faults_as_in_dtrace() {
    let t = "lltostr_with_a_base_computed_at_run_time_faults_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = program("ksp-lltostr");
    // Bases 1 (bad), 22 and 0 (bad): the bad ones end the clause with an illegal operation.
    let script = "syscall::write:entry /pid == $target/ { \
                  printf(\"%s\\n\", lltostr(arg2 * 7, arg2 % 37)); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, RECORDS)]);
    // 154 in base 22.
    assert_eq!(out.lines().filter(|l| *l == "70").count(), 1, "{out}");
    let script = "syscall::write:entry /pid == $target/ { \
                  @[lltostr(arg2, 16 - (arg2 & 1) * 8)] = count(); } \
                  END { printa(\"%s %@d\\n\", @); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, AGGS)]);
    for w in ["01 1", "0x16 1", "0515 1"] {
        assert!(out.lines().any(|l| l.trim() == w), "{w:?} in {out}");
    }
}
