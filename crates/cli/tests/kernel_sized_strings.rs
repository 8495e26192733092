//! `stringof(copyin(addr, size))` at the probe, its size known only there (root, BPF and
//! tracefs; skipped otherwise): as an aggregation key, in a predicate, in a string variable and
//! in records built at the probe, the clause runs in the kernel (`-v` says so) and prints
//! exactly what the interpreter prints with every kernel path off, errors included: writes of 0,
//! 1, 100, strsize - 1, strsize, strsize + 1 and 5000 bytes, bytes with a NUL among them, a bad
//! address, memory unreadable part way, and a size over `scratchsize`.

mod common;
use common::same_with_kernel_paths_off as same_both_ways;
use common::{clause_lines, dtrace, have_gcc, kernel_ok};

/// The traced program (`ksizedstr`): its writes to /dev/null, their bytes `a` to `z` over and
/// over; the last two from a page at a fixed address whose next page is unmapped.
const WRITER: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
int main(void) {
    static char buf[6000];
    for (int i = 0; i < 6000; i++)
        buf[i] = 'a' + i % 26;
    int fd = open("/dev/null", O_WRONLY);
    if (fd < 0)
        return 1;
    int sizes[] = {0, 1, 100, 255, 256, 257, 5000, 15, 16, 17};
    for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        write(fd, buf, sizes[i]);
    write(fd, "ab\0cd", 5);
    write(fd, (void *)16, 10);
    char *p = mmap((void *)0x50000000, 8192, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED)
        return 2;
    memset(p, 'z', 8192);
    munmap(p + 4096, 4096);
    write(fd, p + 4000, 96);
    write(fd, p + 4000, 200);
    return 0;
}
"#;

fn writer(tag: &str) -> String {
    common::traced_program(tag, "ksizedstr", WRITER)
}

const AGGS: &str = common::AGGS_AT_ONE_PROBE;
const RECORDS: &str = common::RECORDS_AT_ONE_PROBE;
/// What `-v` says of a clause keeping variables in the kernel.
const WHOLE: &str = "runs whole in the kernel at 1 probe";
const KEY: &str = "stringof(copyin(arg1, arg2))";

#[test]
fn sized_copies_count_as_keys_in_the_kernel() {
    let t = "sized_copies_count_as_keys_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("kss-keys");
    let script = format!(
        "syscall::write:entry /pid == $target/ {{ @[{KEY}] = count(); }} \
         END {{ printa(\"<%s> %@d\\n\", @); }}"
    );
    let out = same_both_ways(&script, &[], &cmd, &[(1, AGGS)]);
    let az = |n: usize| -> String { (0..n).map(|i| (b'a' + (i % 26) as u8) as char).collect() };
    for want in [
        format!("<{}> 1", az(1)),
        format!("<{}> 1", az(100)),
        format!("<{}> 1", az(255)),
        // strsize (256) characters at most.
        format!("<{}> 3", az(256)),
        format!("<{}> 1", az(15)),
        "<ab> 1".into(),
        format!("<{}> 1", "z".repeat(96)),
    ] {
        assert!(out.lines().any(|l| l == want), "{want:?} in {out}");
    }
    // At a strsize the writes fill, and one they do not.
    for strsize in ["16", "17", "15"] {
        let out = same_both_ways(
            &script,
            &["-x", &format!("strsize={strsize}")],
            &cmd,
            &[(1, AGGS)],
        );
        assert!(out.lines().count() >= 4, "strsize {strsize}: {out}");
    }
}

#[test]
fn sized_copies_fault_as_the_interpreter_at_the_probe() {
    let t = "sized_copies_fault_as_the_interpreter_at_the_probe";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("kss-faults");
    let script = format!("syscall::write:entry /pid == $target/ {{ @[{KEY}] = count(); }}");
    let (rc, _, err) = dtrace(&["-qv", "-n", &script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    let errors: Vec<&str> = common::error_lines(&err);
    // No bytes, a bad address, and memory unreadable part way, at the copy's address.
    for addr in ["(0x8)", "(0x10)", "(0x50000fa0)"] {
        assert!(
            errors
                .iter()
                .any(|l| l.contains(&format!("invalid address {addr}"))),
            "{addr}: {err}"
        );
    }
    // The same both ways (same_both_ways compares the errors too), and past the scratch: out of
    // scratch space before anything is read.
    same_both_ways(
        &format!("{script} END {{ printa(\"<%s> %@d\\n\", @); }}"),
        &["-x", "scratchsize=4096"],
        &cmd,
        &[(1, AGGS)],
    );
    let (rc, _, err) = dtrace(&["-q", "-x", "scratchsize=4096", "-n", &script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("out of scratch space"), "{err}");
}

#[test]
fn sized_copies_compare_print_and_store_as_strings() {
    let t = "sized_copies_compare_print_and_store_as_strings";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("kss-uses");
    // A predicate.
    let script = format!(
        "syscall::write:entry /pid == $target && {KEY} == \"ab\"/ {{ @[arg2] = count(); }} \
         END {{ printa(\"%d %@d\\n\", @); }}"
    );
    let out = same_both_ways(&script, &[], &cmd, &[(1, AGGS)]);
    assert!(out.lines().any(|l| l == "5 1"), "{out}");
    // A clause-local string.
    let script = format!(
        "syscall::write:entry /pid == $target/ {{ this->s = {KEY}; @[strlen(this->s)] = count(); }} \
         END {{ printa(\"%d %@d\\n\", @); }}"
    );
    let out = same_both_ways(&script, &[], &cmd, &[(1, WHOLE)]);
    assert!(out.lines().any(|l| l == "256 3"), "{out}");
    // Records built at the probe.
    let script = format!(
        "syscall::write:entry /pid == $target && arg2 < 300/ {{ printf(\"%d <%s>\\n\", arg2, {KEY}); }}"
    );
    let out = same_both_ways(&script, &[], &cmd, &[(1, RECORDS)]);
    assert!(out.lines().any(|l| l == "5 <ab>"), "{out}");
    // stringof() of a copy of constant size.
    let script =
        "syscall::write:entry /pid == $target/ { @[stringof(copyin(arg1, 3))] = count(); } \
                  END { printa(\"<%s> %@d\\n\", @); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, AGGS)]);
    assert!(out.lines().any(|l| l == "<abc> 10"), "{out}");
}

#[test]
fn a_clause_with_two_copies_keeps_them_in_dtrace() {
    let t = "a_clause_with_two_copies_keeps_them_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("kss-two");
    let script = format!(
        "syscall::write:entry /pid == $target && arg2 > 0/ {{ @[{KEY}, stringof(copyin(arg1, 1))] = count(); }}"
    );
    let (rc, _, err) = dtrace(&["-qv", "-n", &script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    let lines = clause_lines(&err, 1);
    assert!(
        lines.iter().any(|l| l.contains("in dtrace at 1 probe")
            && l.contains("other copyin() or alloca() calls")),
        "{err}"
    );
}
