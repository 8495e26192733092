//! `copyinstr()` at the probe: clauses that copy user strings as aggregation keys, in
//! predicates (compared with constants, `execname`, each other) and in records built at the
//! probe run in the kernel (`-v` says so) and print exactly what the interpreter prints with
//! every kernel path off, `copyinstr(addr, maxlen)` and a small `strsize` included. A string
//! the probe cannot read (a page not yet faulted in, a string running into one) hands the firing
//! to dtrace, whose capture reads it again at the syscall's return, so both ways still print
//! the same; `copyinstr(0)` faults in the kernel as in dtrace. Strings at kernel addresses
//! (`stringof(curthread->comm)`, `(string)` casts) are read at the probe too; a probe
//! argument's string is not (user memory: it stays in dtrace, and `-v` says why).

mod common;
use common::same_with_kernel_paths_off as same_both_ways;
use common::{clause_lines, dtrace_with_env, have_gcc, kernel_ok};

/// The traced program: opens a few paths three times over (`openat`'s `arg1` a string, its
/// `arg3` 0), then a path on a page never touched and one running into such a page (neither
/// readable at the syscall's entry: the kernel reads them while opening them).
const OPENER: &str = r#"
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
int main(void) {
    static const char *paths[] = { "/nonexistent/kstr-a", "/nonexistent/kstr-bb",
                                   "/nonexistent/kstr-a", "/etc/hostname" };
    for (int r = 0; r < 3; r++)
        for (unsigned i = 0; i < sizeof paths / sizeof paths[0]; i++) {
            int fd = openat(AT_FDCWD, paths[i], O_RDONLY);
            if (fd >= 0)
                close(fd);
        }
    char *fresh = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *two = mmap(0, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (fresh == MAP_FAILED || two == MAP_FAILED)
        return 1;
    openat(AT_FDCWD, fresh, O_RDONLY);
    memcpy(two + 4096 - 6, "/kstr/", 6);
    openat(AT_FDCWD, two + 4096 - 6, O_RDONLY);
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

const AGGS: &str = common::AGGS_AT_ONE_PROBE;
const RECORDS: &str = common::RECORDS_AT_ONE_PROBE;

/// The count printed for key `key` (`printa("%s %@d\n")` lines), if any.
fn count_of(out: &str, key: &str) -> Option<u64> {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{key} ")))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
fn copyinstr_keys_and_predicates_run_in_the_kernel_as_in_dtrace() {
    let t = "copyinstr_keys_and_predicates_run_in_the_kernel_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstr-keys");
    let printa = "END { printa(\"%s %@d\\n\", @); }";
    let out = same_both_ways(
        &format!(
            "syscall::openat:entry /pid == $target/ {{ @[copyinstr(arg1)] = count(); }} {printa}"
        ),
        &[],
        &cmd,
        &[(1, AGGS)],
    );
    assert_eq!(count_of(&out, "/nonexistent/kstr-a"), Some(6), "{out}");
    assert_eq!(count_of(&out, "/nonexistent/kstr-bb"), Some(3), "{out}");
    // The strings the probe could not read, handed to dtrace and read at the return.
    assert_eq!(count_of(&out, "/kstr/"), Some(1), "{out}");
    assert!(
        out.lines().any(|l| l.trim() == "1"),
        "the empty path: {out}"
    );
    // Compares with a constant, execname and another copied string; maxlen; a string key of
    // a constant and execname beside a copied one.
    for (pred, want) in [
        (r#"copyinstr(arg1) == "/nonexistent/kstr-a""#, 6),
        (r#"copyinstr(arg1) != "/nonexistent/kstr-a""#, 0),
        (r#""/nonexistent/kstr-b" < copyinstr(arg1)"#, 3),
        (r#"copyinstr(arg1) >= "/nonexistent/kstr-""#, 0),
        ("copyinstr(arg1) == execname", 0),
        ("copyinstr(arg1) == copyinstr(arg1, 400)", 0),
        (r#"copyinstr(arg1, 15) == "/nonexistent/k""#, 6),
        (r#"copyinstr(arg1, 0) == """#, 0),
    ] {
        let script = format!(
            "syscall::openat:entry /pid == $target && {pred}/ {{ @[\"n\", execname, \
             copyinstr(arg1, 20)] = count(); }} END {{ printa(\"%s %s %s %@d\\n\", @); }}"
        );
        let out = same_both_ways(&script, &[], &cmd, &[(1, AGGS)]);
        if want > 0 {
            assert!(out.contains(&format!(" {want}\n")), "{pred}: {out}");
        }
    }
}

/// Opens paths of 62 to 300 bytes sharing their first 62 (`/` then `a`s, then the letter
/// of the length), the one of `n` bytes (index i) i + 1 times, and a short one.
const LENGTHS_OPENER: &str = r#"
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
int main(void) {
    static const unsigned lens[] = { 62, 63, 64, 65, 200, 255, 256, 300 };
    static char p[301];
    for (unsigned i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        memset(p, 0, sizeof p);
        memset(p, 'a', lens[i]);
        p[0] = '/';
        p[lens[i] - 1] = 'A' + i;
        for (unsigned r = 0; r <= i; r++)
            openat(AT_FDCWD, p, O_RDONLY);
    }
    openat(AT_FDCWD, "/nonexistent/kstr-s", O_RDONLY);
    return 0;
}
"#;

#[test]
fn string_keys_short_and_long_compare_and_print_as_in_dtrace() {
    let t = "string_keys_short_and_long_compare_and_print_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    // The kernel keeps a key's string whose NUL is within 64 bytes in maps of short keys, a
    // longer one in maps of the whole width: keys either side of that length, and past
    // strsize (cut to 255 characters, so the last two are one key), compare and print as the
    // interpreter's, alone and after an integer key.
    let dir = common::test_dir("kstr-lengths");
    let cmd = common::compile_c(&dir, "lengths", LENGTHS_OPENER, &["-O1"])
        .display()
        .to_string();
    let path = |n: usize, i: u8| format!("/{}{}", "a".repeat(n - 2), char::from(b'A' + i));
    for script in [
        "syscall::openat:entry /pid == $target/ { @[copyinstr(arg1)] = count(); } \
         END { printa(\"%s %@d\\n\", @); }",
        "syscall::openat:entry /pid == $target/ { @[arg0 + 1, copyinstr(arg1)] = count(); } \
         END { printa(\"%d %s %@d\\n\", @); }",
    ] {
        let out = same_both_ways(script, &[], &cmd, &[(1, AGGS)]);
        // The path and its count, the last two words of a line.
        let count = |key: &str| {
            out.lines().find_map(|l| {
                let w: Vec<&str> = l.split_whitespace().rev().take(2).collect();
                (w.len() == 2 && w[1] == key)
                    .then(|| w[0].parse::<u64>().ok())
                    .flatten()
            })
        };
        for (i, n) in [62, 63, 64, 65, 200].into_iter().enumerate() {
            assert_eq!(count(&path(n, i as u8)), Some(i as u64 + 1), "{n}: {out}");
        }
        // 255 characters are kept: the paths of 256 bytes and more (NUL included) are cut to
        // their first 255, the `a`s, and count together.
        let cut = format!("/{}", "a".repeat(254));
        assert_eq!(count(&cut), Some(7 + 8), "{out}");
        assert_eq!(count(&path(255, 5)), Some(6), "{out}");
        assert_eq!(count("/nonexistent/kstr-s"), Some(1), "{out}");
    }
}

#[test]
fn copyinstr_in_records_built_at_the_probe_prints_as_in_dtrace() {
    let t = "copyinstr_in_records_built_at_the_probe_prints_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstr-records");
    let out = same_both_ways(
        // One line per firing: the firings of a thread that moved between CPUs print in the
        // order their buffers are read (as DTrace's), so lines, not the output, compare.
        "syscall::openat:entry /pid == $target/ { trace(copyinstr(arg1, 5)); \
         printf(\"|%s|%s|%d\\n\", execname, copyinstr(arg1), arg3); }",
        &[],
        &cmd,
        &[(1, RECORDS)],
    );
    assert_eq!(
        out.matches("opener|/nonexistent/kstr-bb|0").count(),
        3,
        "{out}"
    );
    assert!(out.contains("opener|/kstr/|0"), "{out}");
    // A small strsize cuts strings, keys and records alike.
    for extra in [["-x", "strsize=8"], ["-x", "strsize=16"]] {
        same_both_ways(
            "syscall::openat:entry /pid == $target/ { printf(\"%s|%s\\n\", execname, \
             copyinstr(arg1)); @[copyinstr(arg1)] = count(); }",
            &extra,
            &cmd,
            &[],
        );
    }
}

#[test]
fn copyinstr_of_null_faults_in_the_kernel_as_in_dtrace() {
    let t = "copyinstr_of_null_faults_in_the_kernel_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstr-null");
    // arg3 (the mode) is 0: an invalid address, at the same DIF offset both ways.
    let script = "syscall::openat:entry /pid == $target/ { @[copyinstr(arg3)] = count(); } \
                  dtrace:::ERROR { printf(\"ERROR %d %d 0x%x\\n\", arg3, arg4, arg5); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, AGGS)]);
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("ERROR ")).collect();
    assert!(errors.len() >= 14, "{out}");
    assert!(errors.iter().all(|l| l.ends_with(" 1 0x0")), "{out}");
}

#[test]
fn a_clause_keeping_variables_in_the_kernel_reads_its_strings_at_the_probe_and_says_so() {
    let t = "a_clause_keeping_variables_in_the_kernel_reads_its_strings_at_the_probe_and_says_so";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstr-vars");
    // It cannot hand a firing over to dtrace: a firing whose strings it cannot read at the
    // syscall's entry (the two last paths, and the first one when its page of the program's
    // constants was not read in yet) is kept and runs at the syscall's return, where the kernel
    // has read them in, so it prints what dtrace prints, whose capture reads them again there
    // (DTrace's copyinstr() faults at the entry; kernel_strvars has more).
    let script = "syscall::openat:entry /pid == $target/ { self->n++; \
         @[copyinstr(arg1), self->n] = count(); } END { printa(\"%s %d %@d\\n\", @); }";
    let (rc, _, err) = dtrace_with_env(&[], &["-qv", "-n", script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        clause_lines(&err, 1).iter().any(|l| l.contains(
            "(variables self->n live in the kernel; copyinstr() reads at the probe, and a \
             firing whose string is on a page not yet read in runs at the syscall's return \
             instead)"
        )),
        "{err}"
    );
    let out = same_both_ways(script, &[], &cmd, &[(1, "runs whole in the kernel")]);
    assert!(out.lines().any(|l| l.starts_with("/kstr/ ")), "{out}");
    // The empty path (on a page never touched), counted under its number of opens.
    assert!(
        out.lines()
            .any(|l| l.starts_with(' ') && l.split_whitespace().count() == 2),
        "the empty path: {out}"
    );
    // At a probe where such a clause runs, one copying strings without variables runs in the
    // kernel too: a firing it cannot read is kept for the return with the other's.
    let script = "syscall::openat:entry /pid == $target/ { self->n++; @n = count(); } \
         syscall::openat:entry /pid == $target/ { @[copyinstr(arg1)] = count(); } \
         END { printa(\"%s %@d\\n\", @); }";
    let out = same_both_ways(
        script,
        &[],
        &cmd,
        &[(2, "aggregations run in the kernel at 1 probe")],
    );
    assert_eq!(count_of(&out, "/kstr/"), Some(1), "{out}");
}

/// `this->path = copyinstr(arg1)`, the idiom: a clause whose variables live for the firing
/// only reads its strings before it runs, as one without variables, and a string the probe
/// cannot read hands the firing to dtrace, which runs it there with clause-locals of its own
/// (the two last paths; before, they faulted at the probe). Across two clauses, with
/// `strtok()`'s state, and beside a clause keeping a thread-local (which cannot hand a firing
/// over: the firing is kept for the syscall's return).
#[test]
fn a_clause_with_clause_locals_hands_firings_over_as_one_without_variables() {
    let t = "a_clause_with_clause_locals_hands_firings_over_as_one_without_variables";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstr-locals");
    let out = same_both_ways(
        "syscall::openat:entry /pid == $target/ { this->path = copyinstr(arg1); \
             @[this->path] = count(); printf(\"open %s %d\\n\", this->path, strlen(this->path)); } \
         END { printa(\"%s %@d\\n\", @); }",
        &[],
        &cmd,
        &[(1, "runs whole in the kernel")],
    );
    assert_eq!(count_of(&out, "/kstr/"), Some(1), "{out}");
    assert_eq!(count_of(&out, "/nonexistent/kstr-a"), Some(6), "{out}");
    assert!(out.contains("open /kstr/ 6\n"), "{out}");
    let out = same_both_ways(
        "syscall::openat:entry /pid == $target/ { this->path = copyinstr(arg1); } \
         syscall::openat:entry /pid == $target/ \
         { @[this->path, strtok(this->path, \"/\")] = count(); } \
         END { printa(\"%s %s %@d\\n\", @); }",
        &[],
        &cmd,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
        ],
    );
    assert!(out.contains("/kstr/ kstr 1\n"), "{out}");
    assert!(
        out.contains("/nonexistent/kstr-bb nonexistent 3\n"),
        "{out}"
    );
    // Beside a clause keeping a thread-local, the firing is kept for the syscall's return.
    let out = same_both_ways(
        "syscall::openat:entry /pid == $target/ { self->n++; } \
         syscall::openat:entry /pid == $target/ { this->path = copyinstr(arg1); \
             @[this->path] = count(); } END { printa(\"%s %@d\\n\", @); }",
        &[],
        &cmd,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
        ],
    );
    assert!(out.contains("/nonexistent/kstr-bb 3\n"), "{out}");
    assert_eq!(count_of(&out, "/kstr/"), Some(1), "{out}");
}

#[test]
fn a_kernel_clause_copying_strings_beside_one_run_in_dtrace_prints_as_in_dtrace() {
    let t = "a_kernel_clause_copying_strings_beside_one_run_in_dtrace_prints_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstr-mixed");
    // A handed-over firing runs both clauses in dtrace; the others run the second one there.
    let out = same_both_ways(
        "syscall::openat:entry /pid == $target/ { @[copyinstr(arg1)] = count(); } \
         syscall::openat:entry /pid == $target && arg3 == 0/ { printf(\"%s\\n\", \
         basename(lltostr(arg2))); } END { printa(\"%s %@d\\n\", @); }",
        &[],
        &cmd,
        &[(1, AGGS)],
    );
    assert_eq!(count_of(&out, "/kstr/"), Some(1), "{out}");
    assert_eq!(count_of(&out, "/nonexistent/kstr-a"), Some(6), "{out}");
}

#[test]
fn strings_at_kernel_addresses_are_read_at_the_probe_as_in_dtrace() {
    let t = "strings_at_kernel_addresses_are_read_at_the_probe_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = opener("kstr-stringof");
    // Compared in a predicate, as keys (with strlen()), in a record built at the probe.
    let out = same_both_ways(
        "syscall::openat:entry /pid == $target && stringof(curthread->comm) == \"opener\"/ \
         { @[stringof(curthread->comm), strlen((string)curthread->comm)] = count(); } \
         END { printa(\"%s %d %@d\\n\", @); }",
        &[],
        &cmd,
        &[(1, AGGS)],
    );
    let n = out
        .lines()
        .find_map(|l| l.strip_prefix("opener 6 "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert!(n.is_some_and(|n| n >= 14), "{out}");
    let out = same_both_ways(
        "syscall::openat:entry /pid == $target/ \
         { printf(\"%s|%s\\n\", stringof(curthread->comm), (string)curthread->comm); }",
        &[],
        &cmd,
        &[(1, RECORDS)],
    );
    assert!(
        out.lines().filter(|l| *l == "opener|opener").count() >= 14,
        "{out}"
    );
    // Stored in a thread-local kept in the kernel, read back at the return.
    let out = same_both_ways(
        "syscall::openat:entry /pid == $target/ { self->c = stringof(curthread->comm); } \
         syscall::openat:return /self->c != NULL/ { @[self->c] = count(); self->c = 0; } \
         END { printa(\"%s %@d\\n\", @); }",
        &[],
        &cmd,
        &[
            (
                1,
                "runs whole in the kernel at 1 probe (variables self->c live in the kernel",
            ),
            (
                2,
                "runs whole in the kernel at 1 probe (variables self->c live in the kernel",
            ),
        ],
    );
    assert!(count_of(&out, "opener").is_some_and(|n| n >= 14), "{out}");
    // A constant address is never copied: it faults at its value both ways.
    let out = same_both_ways(
        "syscall::openat:entry /pid == $target/ { @[stringof(123)] = count(); } \
         dtrace:::ERROR { printf(\"ERROR %d %d 0x%x\\n\", arg3, arg4, arg5); }",
        &[],
        &cmd,
        &[(1, AGGS)],
    );
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("ERROR ")).collect();
    assert!(errors.len() >= 14, "{out}");
    assert!(errors.iter().all(|l| l.ends_with(" 1 0x7b")), "{out}");
    // A probe argument's string is user memory: the clause stays in dtrace, and -v says why.
    let (_, _, err) = dtrace_with_env(
        &[],
        &[
            "-qv",
            "-n",
            "syscall::openat:entry /pid == $target/ { trace(stringof(arg1)); }",
            "-c",
            &cmd,
        ],
    );
    assert!(
        clause_lines(&err, 1)
            .iter()
            .any(|l| l.contains("a string at probe argument arg1 is read in dtrace")),
        "{err}"
    );
}

#[test]
fn strings_a_tracepoint_record_holds_are_read_at_the_probe_as_in_dtrace() {
    let t = "strings_a_tracepoint_record_holds_are_read_at_the_probe_as_in_dtrace";
    if !kernel_ok(t) {
        return;
    }
    // sched_process_exec's filename (a __data_loc string) and sched_process_fork's comms
    // (char[16] fields): the interpreter's argN is the address of the probe's copy, the code at
    // the probe reads the string where the copy does.
    let script = common::test_dir("kstr-record").join("execs.sh");
    std::fs::write(&script, "/bin/true\n/bin/true\n/bin/echo -n\nexit 0\n").expect("script");
    let cmd = format!("sh {}", script.display());
    let cmd = cmd.as_str();
    for extra in [&[][..], &["-x", "strsize=6"][..]] {
        let out = same_both_ways(
            "sdt:::sched_process_exec /ppid == $target && args[0] != \"/nonexistent\"/ \
             { @[args[0], strlen(args[0])] = count(); } \
             END { printa(\"%s %d %@d\\n\", @); }",
            extra,
            cmd,
            &[(1, AGGS)],
        );
        assert!(out.lines().any(|l| l.ends_with(" 2")), "{out}");
    }
    let out = same_both_ways(
        "sdt:::sched_process_fork /args[1] == $target/ \
         { @[stringof(args[0]), args[2]] = count(); } \
         END { printa(\"%s %s %@d\\n\", @); }",
        &[],
        cmd,
        &[(1, AGGS)],
    );
    assert!(out.lines().any(|l| l.starts_with("sh sh ")), "{out}");
    let out = same_both_ways(
        "sdt:::sched_process_exec /ppid == $target/ { printf(\"[%s]\\n\", args[0]); }",
        &[],
        cmd,
        &[(1, RECORDS)],
    );
    assert!(out.contains("[/bin/true]"), "{out}");
    // The interpreter's value of such an argument is its copy's address, which the probe does
    // not have: read as an integer, the clause stays in dtrace, and -v says why.
    let (_, _, err) = dtrace_with_env(
        &[],
        &[
            "-qv",
            "-n",
            "sdt:::sched_process_exec /ppid == $target/ { @[arg0 != 0] = count(); }",
            "-c",
            cmd,
        ],
    );
    assert!(
        clause_lines(&err, 1)
            .iter()
            .any(|l| l.contains("used as an integer")),
        "{err}"
    );
}

/// The D library's translators join a constant with a kernel string (`fileinfo_t`'s `fi_name`:
/// `F == 0 ? "<none>" : stringof(F->f_path.dentry->d_name.name)`): `fds[fd].fi_name` as a key,
/// in a predicate and in a record runs at the probe, each path's string read where the value is
/// used, and prints what the interpreter prints.
#[test]
fn translator_strings_joined_with_kernel_strings_run_at_the_probe() {
    let t = "translator_strings_joined_with_kernel_strings_run_at_the_probe";
    if !kernel_ok(t) || !common::have_btf(t) {
        return;
    }
    let dd = "dd if=/dev/zero of=/dev/null bs=1 count=3 status=none";
    let out = same_both_ways(
        "syscall::read:entry /pid == $target/ { @[fds[arg0].fi_name] = count(); }",
        &[],
        dd,
        &[(1, "aggregations run in the kernel at 1 probe")],
    );
    assert!(
        out.lines().any(|l| l.split_whitespace().eq(["zero", "3"])),
        "{out}"
    );
    let out = same_both_ways(
        "syscall::write:entry /pid == $target && fds[arg0].fi_name == \"null\"/ \
         { printf(\"%s\\n\", fds[arg0].fi_name); }",
        &[],
        dd,
        &[(1, "runs whole in the kernel at 1 probe")],
    );
    assert_eq!(out.lines().filter(|l| *l == "null").count(), 3, "{out}");
}

/// The file system type of the mount holding `path`, as `/proc/self/mounts` names it (the
/// kernel's `file_system_type` name, which `fileinfo_t`'s `fi_fs` reads).
fn fs_type_of(path: &str) -> Option<String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((*f.get(1)?, *f.get(2)?))
        })
        .filter(|(at, _)| {
            path.starts_with(at) && (at.ends_with('/') || path[at.len()..].starts_with('/'))
        })
        .max_by_key(|(at, _)| at.len())
        .map(|(_, t)| t.to_string())
}

/// `fds[fd].fi_fs` follows nine kernel pointers, more than a probe's capture copies for dtrace:
/// where every clause runs whole in the kernel, whose code reads the memory itself, the probe is
/// enabled all the same and its clauses print the mount's type; with the kernel paths off it
/// is refused with that reason (as it was everywhere). So does `fds[self->fd]`, an index the
/// probe could not copy for at all.
#[test]
fn clauses_reading_more_than_the_capture_copies_run_in_the_kernel() {
    let t = "clauses_reading_more_than_the_capture_copies_run_in_the_kernel";
    if !kernel_ok(t) || !common::have_btf(t) {
        return;
    }
    let Some(fs) = fs_type_of("/dev/zero") else {
        eprintln!("skipped: /proc/self/mounts does not say what /dev/zero is on");
        return;
    };
    let dd = "dd if=/dev/zero of=/dev/null bs=1 count=3 status=none";
    let script = "syscall::read:entry /pid == $target && fds[arg0].fi_fs != \"\"/ \
        { @[fds[arg0].fi_fs, fds[arg0].fi_name] = count(); }";
    let args = ["-qv", "-n", script, "-c", dd];
    let (rc, out, err) = dtrace_with_env(&[], &args);
    assert_eq!(rc, 0, "{err}");
    assert!(
        clause_lines(&err, 1)
            .iter()
            .any(|l| l.ends_with("aggregations run in the kernel at 1 probe")),
        "{err}"
    );
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().eq([fs.as_str(), "zero", "3"])),
        "{fs}: {out}"
    );
    let (rc, _, err) = dtrace_with_env(&common::kernel_paths_off(), &args);
    assert_ne!(rc, 0);
    assert!(
        err.contains("not yet supported: more than 8 distinct memory copies at one probe"),
        "{err}"
    );
    // The descriptor kept in a thread-local until the read returns (the latency idiom): the
    // probe copies nothing for dtrace at an index only the kernel knows, and the kernel reads
    // the strings itself, as DTrace does (no fault).
    let script = "syscall::read:entry /pid == $target/ { self->in = 1; self->fd = arg0; } \
        syscall::read:return /self->in/ \
        { @[fds[self->fd].fi_fs, fds[self->fd].fi_name] = count(); self->in = 0; }";
    let (rc, out, err) = dtrace_with_env(&[], &["-qv", "-n", script, "-c", dd]);
    assert_eq!(rc, 0, "{err}");
    for c in [1, 2] {
        assert!(
            clause_lines(&err, c)
                .iter()
                .any(|l| l.contains("runs whole in the kernel at 1 probe")),
            "{err}"
        );
    }
    assert!(!err.contains("error"), "{err}");
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().eq([fs.as_str(), "zero", "3"])),
        "{fs}: {out}"
    );
}
