//! String-valued D variables in the kernel: thread-locals, globals and associative arrays of
//! strings, assigned from `copyinstr()`, `execname`, constants and one another, read back in
//! predicates (`== NULL`, `!= NULL`, `== "x"`), as aggregation keys and in records built at the
//! probe, and freed by `= 0`, run whole in the kernel (`-v` says so) and print exactly what the
//! interpreter prints with every kernel path off: NULL compares as the empty string, a global
//! never stored is the empty string, recording NULL faults at the same DIF offset, a small
//! `strsize` cuts alike. Such a clause cannot hand a firing over to dtrace: at a syscall's
//! entry, a firing whose string is on a page not yet read in is kept and runs at the syscall's
//! return, where the kernel has read it in (`-v` says so); elsewhere the string faults at the
//! probe, as DTrace's `copyinstr()` does there.

mod common;
use common::same_with_kernel_paths_off as same_both_ways;
use common::{
    clause_lines, dtrace_with_env, error_lines, have_gcc, kernel_ok, kernel_paths_off, sorted,
};

/// The traced program: opens a few paths (copied to its stack first, so every string is on a
/// page read in) three times over; `openat`'s `arg2` is the flags (0), `arg3` the mode (0).
/// With an argument, it then opens a path on a page never touched; with a second (a file it
/// writes a path into), the path on its page of that file, mapped and not touched either.
const OPENER: &str = r#"
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char buf[64];
    static const char *paths[] = { "/nonexistent/kstrvar-a", "/nonexistent/kstrvar-bb",
                                   "/nonexistent/kstrvar-a", "/etc/hostname" };
    for (int r = 0; r < 3; r++)
        for (unsigned i = 0; i < sizeof paths / sizeof paths[0]; i++) {
            strcpy(buf, paths[i]);
            int fd = openat(AT_FDCWD, buf, O_RDONLY);
            if (fd >= 0)
                close(fd);
        }
    if (argc > 1) {
        char *fresh = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (fresh == MAP_FAILED)
            return 1;
        openat(AT_FDCWD, fresh, O_RDONLY);
    }
    if (argc > 2) {
        static const char path[] = "/nonexistent/kstrvar-mapped";
        int fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || write(fd, path, sizeof path) != sizeof path)
            return 1;
        char *mapped = mmap(0, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
        if (mapped == MAP_FAILED)
            return 1;
        openat(AT_FDCWD, mapped, O_RDONLY);
    }
    return 0;
}
"#;

/// Builds [`OPENER`] once per test.
fn opener(tag: &str) -> String {
    let dir = common::test_dir(tag);
    common::compile_c(&dir, "opener", OPENER, &["-O1"])
        .display()
        .to_string()
}

/// What `-v` says of a clause run whole in the kernel with `vars`.
fn whole(vars: &str) -> String {
    format!("runs whole in the kernel at 1 probe (variables {vars} live in the kernel")
}

/// The count printed for key `key` (`printa("%s %@d\n")` lines), if any.
fn count_of(out: &str, key: &str) -> Option<u64> {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{key} ")))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
fn the_entry_return_string_idioms_run_whole_in_the_kernel() {
    let t = "the_entry_return_string_idioms_run_whole_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstrvar-idioms");
    let printa = "END { printa(\"%s %@d\\n\", @); }";
    // A thread-local copied at entry, counted at return and freed.
    let p = whole("self->p");
    let out = same_both_ways(
        &format!(
            "syscall::openat:entry /pid == $target/ {{ self->p = copyinstr(arg1); }} \
             syscall::openat:return /self->p != NULL/ {{ @[self->p] = count(); self->p = 0; }} \
             {printa}"
        ),
        &[],
        &cmd,
        &[(1, &p), (2, &p)],
    );
    assert_eq!(count_of(&out, "/nonexistent/kstrvar-a"), Some(6), "{out}");
    assert_eq!(count_of(&out, "/nonexistent/kstrvar-bb"), Some(3), "{out}");
    assert_eq!(count_of(&out, "/etc/hostname"), Some(3), "{out}");
    // execname kept from entry to return and compared with a constant.
    let n = whole("self->n");
    let out = same_both_ways(
        "syscall::openat:entry /pid == $target/ { self->n = execname; } \
         syscall::openat:return /self->n == \"opener\"/ { @c = count(); self->n = 0; } \
         syscall::openat:return /self->n != NULL/ { @x = count(); } \
         END { printa(\"n %@d\\n\", @c); }",
        &[],
        &cmd,
        &[(1, &n), (2, &n), (3, &n)],
    );
    assert!(out.contains("n 12"), "{out}");
    // An associative array of strings keyed by pid.
    let f = whole("f");
    let out = same_both_ways(
        &format!(
            "syscall::openat:entry /pid == $target/ {{ f[pid] = copyinstr(arg1); }} \
             syscall::openat:return /f[pid] != NULL/ {{ @[f[pid]] = count(); f[pid] = 0; }} \
             {printa}"
        ),
        &[],
        &cmd,
        &[(1, &f), (2, &f)],
    );
    assert_eq!(count_of(&out, "/nonexistent/kstrvar-bb"), Some(3), "{out}");
    // -v says how the kernel reads the string.
    let (_, _, err) = dtrace_with_env(
        &[],
        &[
            "-qv",
            "-n",
            "syscall::openat:entry /pid == $target/ { self->p = copyinstr(arg1); }",
            "-c",
            &cmd,
        ],
    );
    assert!(
        clause_lines(&err, 1).iter().any(|l| l.contains(
            "copyinstr() reads at the probe, and a firing whose string is on a page not yet \
             read in runs at the syscall's return instead"
        )),
        "{err}"
    );
}

#[test]
fn string_globals_arrays_and_copies_print_as_in_dtrace() {
    let t = "string_globals_arrays_and_copies_print_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstrvar-globals");
    // Globals: one never stored (the empty string, not NULL), one set to NULL, one copied from
    // another; records built at the probe; a ternary choosing between two variables.
    let out = same_both_ways(
        "string s; string t; string never; \
         syscall::openat:entry /pid == $target/ { self->n = execname; s = copyinstr(arg1); \
         t = s == \"/etc/hostname\" ? s : t; } \
         syscall::openat:return /self->n == \"opener\" && s != NULL/ { \
         printf(\"%s|%s|%s|%s|\\n\", self->n, s, t, never); trace(s); printf(\"\\n\"); \
         self->n = 0; s = 0; } \
         syscall::openat:return /pid == $target && s == NULL && never == NULL/ { \
         @[t, never] = count(); } \
         END { printa(\"%s|%s %@d\\n\", @); }",
        &[],
        &cmd,
        &[
            (1, &whole("self->n, s, t")),
            (3, "runs whole in the kernel"),
        ],
    );
    assert_eq!(
        out.matches("opener|/nonexistent/kstrvar-bb|/etc/hostname||")
            .count(),
        2,
        "{out}"
    );
    assert_eq!(count_of(&out, "/etc/hostname|"), Some(9), "{out}");
    // String keys (execname, a constant) and a small strsize cutting values, keys and
    // compares alike; one variable copied into another.
    for strsize in ["strsize=9", "strsize=256"] {
        let out = same_both_ways(
            "syscall::openat:entry /pid == $target/ { a[execname, arg2] = copyinstr(arg1); \
             self->q = a[\"opener\", arg2]; } \
             syscall::openat:return /pid == $target && self->q == \"/etc/hostname\"/ { \
             @h = count(); } \
             syscall::openat:return /pid == $target/ { @[self->q, a[\"opener\", 0]] = count(); \
             a[execname, 0] = 0; self->q = 0; }",
            &["-x", strsize],
            &cmd,
            &[(1, &whole("a, self->q"))],
        );
        assert!(!out.trim().is_empty(), "{out}");
    }
}

#[test]
fn recording_a_null_string_faults_in_the_kernel_as_in_dtrace() {
    let t = "recording_a_null_string_faults_in_the_kernel_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstrvar-null");
    // self->p is never stored: compares see the empty string, records and keys fault (an
    // invalid address, 0) at the same DIF offset both ways, and ERROR sees the same arguments.
    let out = same_both_ways(
        "syscall::openat:entry /pid == $target && arg2 == 12345/ { self->p = \"x\"; } \
         syscall::openat:return /pid == $target/ { trace(self->p); } \
         syscall::openat:return /pid == $target/ { @[self->p, 1] = count(); } \
         syscall::openat:return /pid == $target && self->p == \"\"/ { @e = count(); } \
         dtrace:::ERROR { printf(\"ERROR %d %d 0x%x\\n\", arg3, arg4, arg5); } \
         END { printa(\"empty %@d\\n\", @e); }",
        &[],
        &cmd,
        &[(2, &whole("self->p")), (3, &whole("self->p"))],
    );
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("ERROR ")).collect();
    let empty: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("empty "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    // Two faults per return (the loader's opens too, if traced), each one compared as empty.
    assert!(empty >= 12 && errors.len() == 2 * empty, "{out}");
    assert!(errors.iter().all(|l| l.ends_with(" 1 0x0")), "{out}");
}

#[test]
fn a_string_on_a_page_not_read_in_at_the_entry_is_read_at_the_return() {
    let t = "a_string_on_a_page_not_read_in_at_the_entry_is_read_at_the_return";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = format!("{} fresh", opener("kstrvar-fresh"));
    let script = "syscall::openat:entry /pid == $target/ { self->p = copyinstr(arg1); } \
        syscall::openat:return /self->p != NULL/ { @[self->p] = count(); self->p = 0; } \
        END { printa(\"%s %@d\\n\", @); }";
    let (rc, out, err) = dtrace_with_env(&[], &["-q", "-n", script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    // The empty path on a page never touched: the kernel cannot read it at the entry (DTrace
    // faults there), so the entry's firing is kept and runs at the syscall's return, where the
    // kernel has read the page in: no fault, and the readable ones count as in dtrace (the
    // empty string is not counted either way: it compares equal to NULL).
    assert!(error_lines(&err).is_empty(), "{err}");
    assert_eq!(count_of(&out, "/nonexistent/kstrvar-a"), Some(6), "{out}");
    // In dtrace, the capture reads it again at the syscall's return: no fault.
    let off = kernel_paths_off();
    let (rc, iout, ierr) = dtrace_with_env(&off, &["-q", "-n", script, "-c", &cmd]);
    assert_eq!(rc, 0, "{ierr}");
    assert!(error_lines(&ierr).is_empty(), "{ierr}");
    assert_eq!(sorted(&out), sorted(&iout));
    // DTrace's advice: keep the address at entry and copy the string at return, where the
    // kernel has read it in. That runs whole in the kernel too, with no fault.
    let out = same_both_ways(
        "syscall::openat:entry /pid == $target/ { self->a = arg1; } \
         syscall::openat:return /self->a/ { @[copyinstr(self->a)] = count(); self->a = 0; } \
         END { printa(\"%s %@d\\n\", @); }",
        &[],
        &cmd,
        &[(1, &whole("self->a")), (2, &whole("self->a"))],
    );
    assert_eq!(count_of(&out, "/nonexistent/kstrvar-a"), Some(6), "{out}");
    assert!(
        out.lines().any(|l| l.trim() == "1"),
        "the empty path: {out}"
    );
}

/// The firing a syscall's entry keeps for its return (its string not readable at the entry)
/// runs the entry's clauses there as the entry: its records and variables, its `timestamp`,
/// before the return's clauses (whichever the program enables first), so both ways print the
/// same.
#[test]
fn a_kept_entry_firing_runs_at_the_return_as_the_entry() {
    let t = "a_kept_entry_firing_runs_at_the_return_as_the_entry";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let dir = common::test_dir("kstrvar-kept");
    let cmd = format!(
        "{} fresh {}",
        opener("kstrvar-kept"),
        dir.join("mapped").display()
    );
    let note = "copyinstr() reads at the probe, and a firing whose string is on a page not yet \
                read in runs at the syscall's return instead";
    // The return's clause first: its program is in place before the entry's replay.
    let out = same_both_ways(
        "self string p; self uint64_t ts, prev; self int n; \
         syscall::openat:return /self->p != NULL/ { printf(\"return %s %d %d\\n\", self->p, \
             self->n, timestamp > self->ts && self->ts > self->prev); self->p = 0; } \
         syscall::openat:entry /pid == $target/ { self->n++; self->prev = self->ts; \
             self->p = copyinstr(arg1); self->ts = timestamp; \
             printf(\"entry %s %d\\n\", self->p, self->n); }",
        &[],
        &cmd,
        &[(2, note)],
    );
    assert!(out.contains("entry /nonexistent/kstrvar-mapped "), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("return /nonexistent/kstrvar-mapped ") && l.ends_with(" 1")),
        "{out}"
    );
    // A speculation at the entry, committed at the return for failed opens (with the most
    // buffers the kernel's speculations have: a committed one is busy until dtrace has read
    // it, and the opens follow each other closely; the 6.1 guest's slow dtrace ran out of
    // eight).
    let out = same_both_ways(
        "syscall::openat:entry /pid == $target/ { self->spec = speculation(); \
             speculate(self->spec); printf(\"%s\\n\", copyinstr(arg1)); } \
         syscall::openat:return /self->spec && (int)arg0 < 0/ { commit(self->spec); \
             self->spec = 0; } \
         syscall::openat:return /self->spec/ { discard(self->spec); self->spec = 0; }",
        &["-x", "nspec=16"],
        &cmd,
        &[(1, note)],
    );
    assert!(out.contains("/nonexistent/kstrvar-mapped\n"), "{out}");
    assert!(!out.contains("/etc/hostname"), "{out}");
    // What the return could read otherwise (vtimestamp: the syscall's own time) is not kept:
    // the string faults at the entry, as in DTrace, and -v says so.
    let script = "syscall::openat:entry /pid == $target/ { self->v = vtimestamp; \
         self->p = copyinstr(arg1); } \
         syscall::openat:return /self->p != NULL/ { @[self->p] = count(); self->p = 0; }";
    let (rc, _, err) = dtrace_with_env(&[], &["-qv", "-n", script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        clause_lines(&err, 1).iter().any(|l| l.contains(
            "copyinstr() reads at the probe, where a string on a page not yet read in faults, \
             as in DTrace"
        )),
        "{err}"
    );
    let faults = error_lines(&err);
    assert!(
        faults
            .iter()
            .any(|l| l.contains("syscall:vmlinux:openat:entry): invalid address (0x")),
        "{err}"
    );
}

#[test]
fn full_maps_count_drops() {
    let t = "full_maps_count_drops";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstrvar-drops");
    // Never freed, one string per thread fills a space of one variable: the other thread-local's
    // stores are dynamic variable drops, reported both ways.
    let script = "syscall::openat:entry /pid == $target/ { self->a = copyinstr(arg1); } \
        syscall::close:entry /pid == $target/ { self->b = execname; }";
    for kernel in [true, false] {
        let env: Vec<(&str, &str)> = if kernel {
            Vec::new()
        } else {
            kernel_paths_off()
        };
        let (rc, _, err) = dtrace_with_env(
            &env,
            &["-qv", "-x", "dynvarsize=300", "-n", script, "-c", &cmd],
        );
        assert_eq!(rc, 0, "{err}");
        assert!(
            common::reported_drops(&err, "dynamic variable") > 0,
            "kernel {kernel}: {err}"
        );
        if kernel {
            assert!(
                clause_lines(&err, 2)
                    .iter()
                    .any(|l| l.contains(&whole("self->b"))),
                "{err}"
            );
        }
    }
}

#[test]
fn begin_and_end_share_globals_with_the_clauses_in_the_kernel() {
    let t = "begin_and_end_share_globals_with_the_clauses_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstrvar-bookends");
    // BEGIN (run in dtrace before the kernel's clauses start) sets an integer and a string the
    // clause in the kernel reads and writes; END (after they stop) prints what they left.
    let script = "string last; BEGIN { s = \"hello\"; n = 3; } \
        syscall::openat:entry /pid == $target && s == \"hello\"/ { n++; \
        last = copyinstr(arg1); @[s] = count(); } \
        END { printf(\"%d %s %s\\n\", n, s, last); printa(\"%s %@d\\n\", @); }";
    let out = same_both_ways(
        script,
        &[],
        &cmd,
        &[(1, "runs whole in the kernel at 1 probe")],
    );
    // The loader's opens count too.
    let opens = count_of(&out, "hello").expect("count");
    assert!(opens >= 12, "{out}");
    assert!(
        out.contains(&format!("{} hello /etc/hostname\n", opens + 3)),
        "{out}"
    );
    let (rc, _, err) = dtrace_with_env(&[], &["-qv", "-n", script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    for line in [
        "clause (:::BEGIN): runs in dtrace before the kernel's clauses start, writing variables s, n \
         kept in the kernel",
        "clause (:::END): runs in dtrace after the kernel's clauses stop, reading variables",
    ] {
        assert!(err.contains(line), "{line}: {err}");
    }
}

#[test]
fn clause_local_strings_and_string_keys_run_whole_in_the_kernel() {
    let t = "clause_local_strings_and_string_keys_run_whole_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstrvar-locals");
    // Clause-locals from copyinstr() and execname, shared by the probe's clauses for the
    // firing; one set to NULL; read at another probe before any store: the empty string.
    let out = same_both_ways(
        "syscall::openat:entry /pid == $target/ { this->p = copyinstr(arg1); \
         this->e = execname; this->q = this->p; this->q = 0; } \
         syscall::openat:entry /pid == $target && this->q == NULL/ { \
         @[this->e, this->p] = count(); } \
         syscall::openat:return /pid == $target/ { @r[this->p, \"r\"] = count(); } \
         END { printa(\"%s %s %@d\\n\", @); printa(\"%s|%s %@d\\n\", @r); }",
        &[],
        &cmd,
        &[
            (1, &whole("this->p, this->e, this->q")),
            (2, "runs whole in the kernel"),
            (3, &whole("this->p")),
        ],
    );
    assert_eq!(
        count_of(&out, "opener /nonexistent/kstrvar-a"),
        Some(6),
        "{out}"
    );
    assert_eq!(count_of(&out, "opener /etc/hostname"), Some(3), "{out}");
    assert!(out.lines().any(|l| l.starts_with("|r ")), "{out}");
    // Arrays keyed by strings: copyinstr() itself, a string thread-local, a clause-local; a
    // NULL key faults where the array is read, as in the interpreter.
    let out = same_both_ways(
        "syscall::openat:entry /pid == $target/ { self->p = copyinstr(arg1); \
         seen[self->p]++; lens[copyinstr(arg1)] = seen[self->p]; \
         this->p = self->p; by[this->p] = execname; } \
         syscall::openat:return /self->p != NULL/ { \
         @k[self->p, seen[self->p], lens[self->p], by[self->p]] = count(); self->p = 0; } \
         syscall::close:entry /pid == $target/ { @n[seen[self->p]] = count(); } \
         dtrace:::ERROR { @e[arg4, arg5] = count(); } \
         END { printa(\"%s %d %d %s %@d\\n\", @k); printa(\"e %d %x %@d\\n\", @e); }",
        &[],
        &cmd,
        &[
            (1, &whole("self->p, seen, lens, this->p, by")),
            (2, &whole("self->p, seen, lens, by")),
        ],
    );
    assert_eq!(
        count_of(&out, "/nonexistent/kstrvar-a 6 6 opener"),
        Some(1),
        "{out}"
    );
    assert_eq!(count_of(&out, "/etc/hostname 3 3 opener"), Some(1), "{out}");
    // close(2) reads seen[NULL]: a fault at each close, BADADDR at 0.
    assert!(out.lines().any(|l| l.starts_with("e 1 0 ")), "{out}");
}

/// Loads libm with `dlopen` and calls its `nextafter` three times.
const LATE_LOADER: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
int main(void) {
    void *h = dlopen("libm.so.6", RTLD_NOW);
    if (!h)
        return 1;
    double (*f)(double, double) = (double (*)(double, double))dlsym(h, "nextafter");
    double x = 0;
    for (int i = 0; i < 3; i++)
        x += f(i, 10);
    printf("done %d\n", x > 0);
    return 0;
}
"#;

#[test]
fn globals_begin_set_reach_kernel_clauses_enabled_after_it() {
    let t = "globals_begin_set_reach_kernel_clauses_enabled_after_it";
    if !kernel_ok(t)
        || !have_gcc(t)
        || !dtrace_testkit::skip_unless(dtrace_linux::uprobe::available(), t, "no uprobe PMU")
    {
        return;
    }
    let dir = common::test_dir("kstrvar-late");
    let exe = common::compile_c(&dir, "late", LATE_LOADER, &["-O1", "-ldl"]);
    // The library's probe is placed when the process loads it, after BEGIN ran: the kernel's
    // variables are made then, with the values BEGIN left.
    let script = "BEGIN { s = \"set in BEGIN\"; n = 5; } \
        pid$target:libm.so.6:nextafter:entry { n++; @[s] = count(); } \
        END { printf(\"%d %s\\n\", n, s); printa(\"%s %@d\\n\", @); }";
    let cmd = exe.display().to_string();
    let args = ["-Zqv", "-n", script, "-c", &cmd];
    let (rc, out, err) = dtrace_with_env(&[], &args);
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.contains("clause (:::BEGIN): runs in dtrace before the kernel's clauses start"),
        "{err}"
    );
    let (rc, iout, ierr) = dtrace_with_env(&kernel_paths_off(), &args);
    assert_eq!(rc, 0, "{ierr}");
    assert_eq!(sorted(&out), sorted(&iout));
    assert!(out.contains("8 set in BEGIN\n"), "{out}");
    assert!(out.contains("set in BEGIN 3\n"), "{out}");
}

#[test]
fn strlen_runs_at_the_probe_as_in_dtrace() {
    let t = "strlen_runs_at_the_probe_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstrvar-strlen");
    // strlen() of copyinstr() in a predicate and as keys, of execname as a key.
    let out = same_both_ways(
        "syscall::openat:entry /pid == $target && strlen(copyinstr(arg1)) >= 22 && \
         strlen(copyinstr(arg1)) < 24/ { @[strlen(copyinstr(arg1)), strlen(execname)] = count(); } \
         END { printa(\"%d %d %@d\\n\", @); }",
        &[],
        &cmd,
        &[(1, "aggregations run in the kernel at 1 probe")],
    );
    let counts: Vec<&str> = sorted(&out)
        .into_iter()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(counts, ["22 6 6", "23 6 3"], "{out}");
    // strlen() of a thread-local string kept in the kernel.
    let p = whole("self->p");
    let out = same_both_ways(
        "syscall::openat:entry /pid == $target/ { self->p = copyinstr(arg1); } \
         syscall::openat:return /self->p != NULL && strlen(self->p) == 23/ { @n = count(); } \
         syscall::openat:return /self->p != NULL/ { @[strlen(self->p)] = sum(1); self->p = 0; } \
         END { printa(\"n %@d\\n\", @n); printa(\"%d %@d\\n\", @); }",
        &[],
        &cmd,
        &[(1, &p), (2, &p), (3, &p)],
    );
    assert!(out.lines().any(|l| l == "n 3"), "{out}");
    assert!(out.lines().any(|l| l == "22 6"), "{out}");
    assert!(out.lines().any(|l| l == "13 3"), "{out}");
    // strlen(NULL) faults (an invalid address, 0) at the same DIF offset both ways.
    let q = whole("self->q");
    let out = same_both_ways(
        "syscall::openat:entry /pid == $target && arg2 == 12345/ { self->q = \"x\"; } \
         syscall::openat:return /pid == $target/ { @[strlen(self->q)] = count(); } \
         dtrace:::ERROR { printf(\"ERROR %d %d 0x%x\\n\", arg3, arg4, arg5); }",
        &[],
        &cmd,
        &[(2, &q)],
    );
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("ERROR ")).collect();
    assert!(errors.len() >= 12, "{out}");
    assert!(errors.iter().all(|l| l.ends_with(" 1 0x0")), "{out}");
}

#[test]
fn global_arrays_set_in_begin_reach_the_kernel_and_end_reads_them_back() {
    let t = "global_arrays_set_in_begin_reach_the_kernel_and_end_reads_them_back";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstrvar-arrays");
    // BEGIN fills an integer array keyed by strings and a string array keyed by a string and
    // an integer; the clause in the kernel reads them (a predicate, a key), adds to them and
    // deletes an element; END prints what the kernel left, absent elements included.
    let script = "BEGIN { a[\"opener\"] = 1; a[\"gone\"] = 5; a[\"kept\"] = 9; \
        n[\"opener\", 1] = \"first\"; } \
        syscall::openat:entry /pid == $target && a[execname]/ { a[execname]++; \
        a[\"gone\"] = 0; @[n[execname, 1]] = count(); n[execname, 2] = copyinstr(arg1); } \
        END { printf(\"%d %d %d %d|%s|%s\\n\", a[\"opener\"], a[\"gone\"], a[\"kept\"], \
        a[\"none\"], n[\"opener\", 1], n[\"opener\", 2]); printa(\"%s %@d\\n\", @); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, &whole("a, n"))]);
    let opens = count_of(&out, "first").expect("count");
    assert!(opens >= 12, "{out}");
    assert!(
        out.contains(&format!("{} 0 9 0|first|/etc/hostname\n", opens + 1)),
        "{out}"
    );
    let (rc, _, err) = dtrace_with_env(&[], &["-qv", "-n", script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    for line in [
        "clause (:::BEGIN): runs in dtrace before the kernel's clauses start, writing variables a, \
         n kept in the kernel",
        "clause (:::END): runs in dtrace after the kernel's clauses stop, reading variables a, n \
         kept in the kernel",
    ] {
        assert!(err.contains(line), "{line}: {err}");
    }
}

/// Forty chained string steps on `{scope}->s` and `{scope}->i` (`this`, `self`): more code than
/// one probe's program can jump over at a small `strsize`.
fn string_steps(scope: &str) -> String {
    format!(
        "{scope}->s = strjoin(substr({scope}->s, 1), toupper(basename({scope}->s))); \
         {scope}->i += index({scope}->s, \"A\") + strlen(dirname({scope}->s)) \
         + rindex({scope}->s, strtok({scope}->s, \"/\")); "
    )
    .repeat(40)
}

/// A clause whose variables live for the firing only (`this->` strings, the firing's
/// `strtok()` state), placed whole in the kernel, whose probe's program turns out too large
/// for eBPF: the probe runs it in dtrace with its other clauses, printing what the interpreter
/// prints, and `-v` says why; dtrace once refused to start, its variables "living in the
/// kernel". A second clause at the probe shares the firing's `this->s` from dtrace too.
#[test]
fn a_firing_only_clause_too_large_for_the_probe_runs_in_dtrace() {
    let t = "a_firing_only_clause_too_large_for_the_probe_runs_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstrvar-large");
    let script = format!(
        "syscall::openat:entry /pid == $target/ {{ this->s = copyinstr(arg1); this->i = 0; {} }} \
         syscall::openat:entry /pid == $target/ {{ printf(\"open %s %d\\n\", this->s, this->i); }}",
        string_steps("this")
    );
    let out = same_both_ways(
        &script,
        &["-x", "strsize=16"],
        &cmd,
        &[
            (1, "predicate runs in the kernel at 1 probe"),
            (
                1,
                "runs whole in the kernel at 0 probes, in dtrace at 1 probe",
            ),
            (1, "the probe's program is too large"),
        ],
    );
    assert_eq!(
        out.lines().filter(|l| l.starts_with("open ")).count(),
        12,
        "{out}"
    );
}

/// The same with a thread-local (`self->s`, which outlives the firing): dtrace cannot move it
/// out of the kernel once placed there, so it refuses to start, in one line naming the clause,
/// why, and the way to run it (the variables in dtrace), which runs it as the interpreter does.
#[test]
fn a_lasting_variable_clause_too_large_for_the_probe_says_how_to_run_it() {
    let t = "a_lasting_variable_clause_too_large_for_the_probe_says_how_to_run_it";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstrvar-large-self");
    let script = format!(
        "syscall::openat:entry /pid == $target/ {{ self->s = copyinstr(arg1); self->i = 0; {} }} \
         syscall::openat:return /self->s != NULL/ {{ printf(\"open %s %d\\n\", self->s, self->i); \
         self->s = 0; }}",
        string_steps("self")
    );
    let args = ["-q", "-x", "strsize=16", "-n", &script, "-c", &cmd];
    let (rc, _, err) = dtrace_with_env(&[], &args);
    assert_ne!(rc, 0, "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("its variables live in the kernel"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains("clause syscall::openat:entry"), "{line}");
    assert!(line.contains("the probe's program is too large"), "{line}");
    assert!(
        line.ends_with("DTRACE_KERNEL_VARIABLES=0 keeps the variables in dtrace"),
        "{line}"
    );
    let (rc, out, err) = dtrace_with_env(&[("DTRACE_KERNEL_VARIABLES", "0")], &args);
    assert_eq!(rc, 0, "{err}");
    let (_, all_off, _) = dtrace_with_env(&kernel_paths_off(), &args);
    assert_eq!(
        out.lines().filter(|l| l.starts_with("open ")).count(),
        12,
        "{out}"
    );
    assert_eq!(sorted(&out), sorted(&all_off));
}
