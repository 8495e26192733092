//! `index()`, `rindex()`, `strstr()`, `strchr()` and `strrchr()` at the probe: clauses that
//! search `execname`, constants and copied user strings, as aggregation keys, in predicates, in
//! records built at the probe and through string variables, run in the kernel (`-v` says so)
//! and print exactly what the interpreter prints with every kernel path off, at D's default
//! `strsize` and at `strsize` values that cut the strings; a search too long for the verifier
//! to walk (a needle known only at run time, in a clause-local variable) loops at the probe with
//! `bpf_loop`, or, where the kernel cannot loop, stays in dtrace and `-v` says why.

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

/// What `-v` says of clause 1 when its search is past the verifier's walk: `running` where
/// the probe loops with `bpf_loop` (this host), else the reason it stays in dtrace (Linux 6.1's
/// verifier, a kernel without `bpf_loop`), which the test prints.
fn looped_or_why(t: &str, running: &'static str) -> String {
    match dtrace_linux::features::loop_at_probe() {
        Ok(()) => running.into(),
        Err(why) => {
            eprintln!("{t}: searches past the verifier's walk stay in dtrace here: {why}");
            format!("it cannot loop at the probe: {why}")
        }
    }
}

#[test]
fn a_search_past_the_verifiers_walk_loops_in_the_kernel_or_stays_in_dtrace_and_says_why() {
    let t = "a_search_past_the_verifiers_walk_loops_in_the_kernel_or_stays_in_dtrace_and_says_why";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("kss-long");
    let script = "syscall::openat:entry /pid == $target/ { \
         @[index(copyinstr(arg1), substr(copyinstr(arg1), 3))] = count(); } \
         END { printa(\"%d %@d\\n\", @); }";
    let said = looped_or_why(t, AGGS);
    let out = same_both_ways(script, &[], &cmd, &[(1, &said)]);
    assert!(out.lines().any(|l| l.starts_with("3 ")), "{out}");
    if said != AGGS {
        same_both_ways(
            script,
            &[],
            &cmd,
            &[(
                1,
                "index(): a search of up to 256 characters for a string of up to 256 is more \
                 than the eBPF verifier walks",
            )],
        );
    }
}

/// The traced program (`kstrlong`): opens three paths that do not exist, three times over,
/// from its stack (pages written, so read at the probe): a short one, a longer one, and one
/// longer than D's `strsize` with `ks` at 200 and again past 255.
const LONG_OPENER: &str = r#"
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
int main(void) {
    char a[] = "/nonexistent/ksb";
    char b[] = "/nonexistent/kstrsearch-a-long-path";
    char c[300];
    memset(c, 'a', sizeof(c));
    memcpy(c, "/nonexistent/", 13);
    memcpy(c + 200, "ks", 2);
    memcpy(c + 270, "ks", 2);
    c[sizeof(c) - 1] = 0;
    for (int r = 0; r < 3; r++) {
        openat(AT_FDCWD, a, O_RDONLY);
        openat(AT_FDCWD, b, O_RDONLY);
        openat(AT_FDCWD, c, O_RDONLY);
    }
    return 0;
}
"#;

#[test]
fn searches_for_strings_known_at_run_time_loop_in_the_kernel() {
    let t = "searches_for_strings_known_at_run_time_loop_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = common::traced_program("kss-runtime", "kstrlong", LONG_OPENER);
    // Needles in clause-local variables: the clause runs whole in the kernel.
    let script = "syscall::openat:entry /pid == $target/ { \
         this->t = strjoin(\"k\", \"s\"); this->d = substr(copyinstr(arg1), 0, 1); \
         @[index(copyinstr(arg1), this->t), rindex(copyinstr(arg1), this->t), \
         index(copyinstr(arg1), this->t, 14), rindex(copyinstr(arg1), this->d, 5), \
         index(copyinstr(arg1), this->t, -5), rindex(copyinstr(arg1), this->t, 1000), \
         strstr(copyinstr(arg1), this->t)] = count(); } \
         END { printa(\"%d %d %d %d %d %d %s %@d\\n\", @); }";
    let said = looped_or_why(t, "runs whole in the kernel");
    let out = same_both_ways(script, &[], &cmd, &[(1, &said)]);
    let long = format!("ks{}", "a".repeat(53));
    for w in [
        "13 13 -1 0 13 13 ksb 3".to_string(),
        "13 13 -1 0 13 13 kstrsearch-a-long-path 3".to_string(),
        format!("200 200 200 0 200 200 {long} 3"),
    ] {
        assert!(out.lines().any(|l| l.trim() == w), "{w:?} in {out}");
    }
    // strsize cuts the long path before its `ks`: not found, and strstr()'s NULL as a key
    // faults (both ways alike); at 64 the search is unrolled (under the walk).
    let out = same_both_ways(script, &["-x", "strsize=150"], &cmd, &[(1, &said)]);
    assert!(!out.contains(" 200 "), "{out}");
    assert!(
        out.lines().any(|l| l.trim() == "13 13 -1 0 13 13 ksb 3"),
        "{out}"
    );
    same_both_ways(script, &["-x", "strsize=64"], &cmd, &[(1, "runs whole")]);
    // Records built at the probe, the needle a string built there.
    let script = "syscall::openat:entry /pid == $target/ { \
         this->t = substr(copyinstr(arg1), 13, 2); \
         printf(\"%d %d %s|\\n\", index(copyinstr(arg1), this->t, 1), \
         rindex(copyinstr(arg1), this->t), strstr(copyinstr(arg1), this->t)); }";
    let said = looped_or_why(t, "runs whole in the kernel");
    let out = same_both_ways(script, &[], &cmd, &[(1, &said)]);
    assert_eq!(out.matches("13 13 ksb|").count(), 3, "{out}");
    assert_eq!(
        out.matches("13 200 kstrsearch-a-long-path|").count(),
        0,
        "{out}"
    );
    assert_eq!(
        out.matches("13 13 kstrsearch-a-long-path|").count(),
        3,
        "{out}"
    );
    // In a predicate.
    let script = "syscall::openat:entry /pid == $target && \
         rindex(copyinstr(arg1), substr(copyinstr(arg1), 13, 2)) == 13/ { \
         @[copyinstr(arg1)] = count(); } END { printa(\"%s %@d\\n\", @); }";
    let said = looped_or_why(t, "predicate runs in the kernel");
    let out = same_both_ways(script, &[], &cmd, &[(1, &said)]);
    for w in [
        "/nonexistent/ksb 3",
        "/nonexistent/kstrsearch-a-long-path 3",
    ] {
        assert!(out.lines().any(|l| l.trim() == w), "{w:?} in {out}");
    }
    assert!(!out.contains("/nonexistent/aaa"), "{out}");
}
