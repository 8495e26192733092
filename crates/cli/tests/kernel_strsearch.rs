//! `index()`, `rindex()`, `strstr()`, `strchr()` and `strrchr()` at the probe: clauses that
//! search `execname`, constants and copied user strings, as aggregation keys, in predicates, in
//! records built at the probe and through string variables, run in the kernel (`-v` says so)
//! and print exactly what the interpreter prints with every kernel path off, at D's default
//! `strsize` and at `strsize` values that cut the strings; a search too long for the verifier
//! stays in dtrace and `-v` says why.

mod common;
use common::same_with_kernel_paths_off as same_both_ways;
use common::{have_gcc, kernel_ok};

/// The traced program (`kstrsearch`): writes 1 and 22 bytes to /dev/null three times over, and
/// opens two paths that do not exist, one of them longer than a small `strsize`.
const WRITER: &str = r#"
#include <fcntl.h>
#include <unistd.h>
int main(void) {
    static char buf[22];
    int fd = open("/dev/null", O_WRONLY);
    if (fd < 0)
        return 1;
    for (int r = 0; r < 3; r++) {
        write(fd, buf, 1);
        write(fd, buf, 22);
        openat(AT_FDCWD, "/nonexistent/ksb", O_RDONLY);
        openat(AT_FDCWD, "/nonexistent/kstrsearch-a-long-path", O_RDONLY);
    }
    return 0;
}
"#;

fn writer(tag: &str) -> String {
    common::traced_program(tag, "kstrsearch", WRITER)
}

const AGGS: &str = common::AGGS_AT_ONE_PROBE;
const RECORDS: &str = common::RECORDS_AT_ONE_PROBE;

#[test]
fn searches_of_execname_count_in_the_kernel() {
    let t = "searches_of_execname_count_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("kss-execname");
    let script = "syscall::write:entry /pid == $target/ { \
         @[index(execname, \"s\"), rindex(execname, \"s\"), index(execname, \"s\", 2), \
         rindex(execname, \"s\", -1), index(execname, \"\", 100), index(\"\", execname), \
         index(execname, \"zz\")] = count(); \
         @s[strstr(execname, \"sea\"), strchr(execname, 'r'), strrchr(execname, 's'), \
         strchr(execname, 0)] = count(); } \
         END { printa(\"%d %d %d %d %d %d %d %@d\\n\", @); printa(\"%s|%s|%s|%s| %@d\\n\", @s); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, AGGS)]);
    for w in ["1 4 4 -1 10 -1 -1 6", "search|rsearch|search|| 6"] {
        assert!(out.lines().any(|l| l.trim() == w), "{w:?} in {out}");
    }
    // strsize cuts execname (and what the searches see of it).
    for strsize in ["8", "5", "2"] {
        same_both_ways(
            script,
            &["-x", &format!("strsize={strsize}")],
            &cmd,
            &[(1, AGGS)],
        );
    }
}

#[test]
fn searches_of_copied_strings_count_in_the_kernel() {
    let t = "searches_of_copied_strings_count_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("kss-copied");
    let script = "syscall::openat:entry /pid == $target/ { \
         @[index(copyinstr(arg1), \"k\"), rindex(copyinstr(arg1), \"/\", 12), \
         index(copyinstr(arg1), execname), strrchr(copyinstr(arg1), '/')] = count(); } \
         END { printa(\"%d %d %d %s %@d\\n\", @); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, AGGS)]);
    for w in ["13 12 -1 /ksb 3", "13 12 13 /kstrsearch-a-long-path 3"] {
        assert!(out.lines().any(|l| l.trim() == w), "{w:?} in {out}");
    }
    for strsize in ["16", "17", "15", "8"] {
        same_both_ways(
            script,
            &["-x", &format!("strsize={strsize}")],
            &cmd,
            &[(1, AGGS)],
        );
    }
    // Two strings built at the probe searched at a strsize the verifier walks.
    let script = "syscall::openat:entry /pid == $target/ { \
         @[rindex(copyinstr(arg1), substr(copyinstr(arg1), 1, 3)), \
         strstr(copyinstr(arg1), substr(copyinstr(arg1), -4))] = count(); } \
         END { printa(\"%d %s %@d\\n\", @); }";
    let out = same_both_ways(script, &["-x", "strsize=64"], &cmd, &[(1, AGGS)]);
    assert!(out.lines().any(|l| l.trim() == "1 path 3"), "{out}");
}

#[test]
fn searches_decide_predicates_and_print_in_records_built_at_the_probe() {
    let t = "searches_decide_predicates_and_print_in_records_built_at_the_probe";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("kss-records");
    let script = "syscall::write:entry /pid == $target && index(execname, \"arch\") > 0 && \
                  strstr(execname, \"nope\") == NULL/ { \
                  printf(\"%s %d %s|\\n\", strchr(execname, 's'), rindex(execname, \"s\"), \
                  strstr(execname, \"\")); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, RECORDS)]);
    assert_eq!(out.matches("strsearch 4 kstrsearch|").count(), 6, "{out}");
    for strsize in ["6", "3"] {
        same_both_ways(
            script,
            &["-x", &format!("strsize={strsize}")],
            &cmd,
            &[(1, "runs whole in the kernel")],
        );
    }
}

#[test]
fn search_results_live_in_string_variables_in_the_kernel() {
    let t = "search_results_live_in_string_variables_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("kss-vars");
    let script = "syscall::write:entry /pid == $target/ { self->s = strrchr(execname, 'r'); \
                  self->n = strchr(execname, 'z'); } \
                  syscall::write:return /self->s != NULL/ { \
                  @[self->s, index(self->s, \"c\"), self->n == NULL] = count(); self->s = 0; } \
                  END { printa(\"%s %d %d %@d\\n\", @); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, "runs whole in the kernel")]);
    assert!(out.lines().any(|l| l.trim() == "rch 1 1 6"), "{out}");
}

#[test]
fn a_search_too_long_for_the_verifier_stays_in_dtrace_and_says_why() {
    let t = "a_search_too_long_for_the_verifier_stays_in_dtrace_and_says_why";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("kss-long");
    let script = "syscall::openat:entry /pid == $target/ { \
         @[index(copyinstr(arg1), substr(copyinstr(arg1), 3))] = count(); } \
         END { printa(\"%d %@d\\n\", @); }";
    let out = same_both_ways(
        script,
        &[],
        &cmd,
        &[(
            1,
            "index(): a search of up to 256 characters for a string of up to 256 is more than \
             the eBPF verifier walks",
        )],
    );
    assert!(out.lines().any(|l| l.starts_with("3 ")), "{out}");
}
