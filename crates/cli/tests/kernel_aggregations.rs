//! Aggregations computed in the kernel: an aggregation-only clause updates per-CPU maps at the probe
//! and records nothing, and prints exactly what the interpreter prints when the same clause runs in
//! dtrace (DTRACE_KERNEL_AGGREGATIONS=0): every aggregating function, several keys, printa formats,
//! JSON, clear() and trunc(); it counts every event however fast the probe fires; `-v` says where
//! each clause's aggregations run, and why not in the kernel when they cannot.

mod common;
use common::{clause_lines, compile_c, dtrace, have_gcc, kernel_ok, test_dir};
use std::path::PathBuf;

/// Writes `argv[1]` times per phase to /dev/null, of sizes (i * 37 + phase * 11) % 300; with
/// several phases (`argv[2]`), each ends with a getppid() marker and a pause.
const WRITER: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    int phases = argc > 2 ? atoi(argv[2]) : 1;
    int fd = open("/dev/null", O_WRONLY);
    static char buf[512];
    for (int p = 0; p < phases; p++) {
        for (int i = 0; i < n; i++)
            if (write(fd, buf, (i * 37 + p * 11) % 300) < 0)
                return 1;
        if (phases > 1) {
            syscall(SYS_getppid);
            usleep(400000);
        }
    }
    return 0;
}
"#;

/// Consumes and snapshots often: what a marker prints is what came before it (the traced program
/// pauses after each marker), whichever way the aggregations run.
const FAST: &[&str] = &["-x", "switchrate=10ms", "-x", "aggrate=10ms"];

fn writer(tag: &str) -> PathBuf {
    compile_c(&test_dir(tag), "writer", WRITER, &["-O2"])
}

/// Runs `dtrace args` with aggregations in the kernel (`true`) or in dtrace's interpreter.
fn dtrace_way(kernel: bool, args: &[&str]) -> (i32, String, String) {
    common::dtrace_way("DTRACE_KERNEL_AGGREGATIONS", kernel, args)
}

/// Runs `script` both ways on `cmd`; asserts both succeed, print the same non-empty output, and
/// that clause 1's aggregations ran in the kernel the first way. Returns the output.
fn same_both_ways(script: &str, extra: &[&str], cmd: &str) -> String {
    let in_kernel = |err: &str| {
        clause_lines(err, 1)
            .iter()
            .any(|l| l.ends_with("aggregations run in the kernel at 1 probe"))
    };
    common::same_both_ways("DTRACE_KERNEL_AGGREGATIONS", script, extra, cmd, &in_kernel)
}

#[test]
fn every_aggregating_function_prints_the_same_in_the_kernel_or_in_dtrace() {
    let t = "every_aggregating_function_prints_the_same_in_the_kernel_or_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = writer("kagg-functions");
    let cmd = format!("{} 2000", w.display());
    let all = "syscall::write:entry /pid == $target/ { \
        @c[execname, arg0] = count(); @s[probefunc] = sum(arg2); @mi = min(arg2); \
        @ma = max(arg2); @a = avg(arg2); @sd = stddev(arg2); @q = quantize(arg2); \
        @l = lquantize(arg2, 0, 300, 25); @neg = quantize(-(int)arg2); @w = quantize(arg2, 3); \
        @lw = lquantize((int)arg2 - 100, -50, 50, 10, arg0); @lbig = lquantize(arg2 << 31, 2, 10, 2); @k[(int)arg2 % 7, (char)arg2] = sum(1); \
        @nmi = min(-(int)arg2); @nma = max(-(long)arg2); @nsd = stddev(100 - (int)arg2); \
        @ll = llquantize(arg2, 10, 0, 3, 10); @ll2 = llquantize(arg2 * 1000, 4, 1, 12, 16, arg0); \
        @lln = llquantize(100 - (int)arg2, 10, 0, 2, 10); \
        @qhi = quantize(((long long)arg2 << 54) | 1); @qtop = quantize(0x7fffffffffffffff - arg2); \
        @qmin = quantize(-0x7fffffffffffffff - 1 + arg2); }";
    let out = same_both_ways(all, &[], &cmd);
    // The sizes written: (i * 37) % 300 for i < 2000.
    let sum: u64 = (0..2000u64).map(|i| (i * 37) % 300).sum();
    assert!(out.contains(&sum.to_string()), "{out}");
    // printa with formats, sorted by key, and JSON.
    let fmt = "syscall::write:entry /pid == $target/ { @c[execname, arg2 % 5] = count(); \
        @q[arg0] = quantize(arg2); @av[probename] = avg(arg2); } \
        END { printa(\"%s %d %@d\\n\", @c); printa(\"%d %@d\\n\", @q); printa(@av); }";
    same_both_ways(fmt, &["-x", "aggsortkey"], &cmd);
    let json = "syscall::write:entry /pid == $target/ { @c[execname] = count(); \
        @l[arg0] = lquantize(arg2, 0, 300, 50); @sd = stddev(arg2); }";
    let out = same_both_ways(json, &["-x", "oformat=json"], &cmd);
    assert!(out.contains("\"aggregation-name\""), "{out}");
}

#[test]
fn an_aggregation_only_clause_counts_every_event() {
    let t = "an_aggregation_only_clause_counts_every_event";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    // 250000 writes through a ring of one page per CPU: with the clause in dtrace most records
    // would be dropped; in the kernel nothing is recorded and nothing is lost.
    let w = writer("kagg-exact");
    let cmd = format!("{} 250000", w.display());
    let (rc, out, err) = dtrace(&[
        "-b",
        "4k",
        "-qn",
        "syscall::write:entry /pid == $target/ { @c = count(); @s = sum(arg2); } \
         END { printa(\"%@d \", @c); printa(\"%@d\\n\", @s); }",
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(!err.contains("drop"), "{err}");
    let sum: u64 = (0..250_000u64).map(|i| (i * 37) % 300).sum();
    assert_eq!(out.trim(), format!("250000 {sum}"), "{err}");
    // Without a predicate, keyed by the program's name: every write of dd counted.
    let (rc, out, err) = dtrace(&[
        "-b",
        "4k",
        "-qn",
        "syscall::write:entry { @[execname] = count(); } END { printa(\"%s %@d\\n\", @); }",
        "-c",
        "dd if=/dev/zero of=/dev/null bs=1 count=200000 status=none",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(!err.contains("drop"), "{err}");
    assert!(out.lines().any(|l| l == "dd 200000"), "{out}");
}

#[test]
fn clear_and_trunc_keep_their_meaning() {
    let t = "clear_and_trunc_keep_their_meaning";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    // Three phases of writes, each followed by a marker whose clause prints, clears and
    // truncates: each phase's output holds that phase's writes (and the keys kept).
    let w = writer("kagg-clear");
    let cmd = format!("{} 300 3", w.display());
    let script = "syscall::write:entry /pid == $target/ { @c[arg2 % 4] = count(); \
        @m[arg2 % 3] = max(arg2); @mi = min(arg2); @t[arg2] = sum(arg2); } \
        syscall::getppid:entry /pid == $target/ { printa(\"c %d %@d\\n\", @c); \
        printa(\"m %d %@d\\n\", @m); printa(\"mi %@d\\n\", @mi); printa(\"t %d %@d\\n\", @t); \
        clear(@c); clear(@m); clear(@mi); trunc(@t, 3); printf(\"--\\n\"); }";
    let out = same_both_ways(script, FAST, &cmd);
    assert_eq!(out.matches("--\n").count(), 3, "{out}");
}

#[test]
fn keyless_aggregations_have_no_data_until_they_fire_and_keep_clear_and_trunc() {
    let t = "keyless_aggregations_have_no_data_until_they_fire_and_keep_clear_and_trunc";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    // Aggregations without keys are kept in a per-CPU array whose values exist before they
    // fire: one that never fires prints nothing, one that fires with 0 prints 0, and clear()
    // and trunc() between three phases keep their meaning, both ways.
    let w = writer("kagg-keyless");
    let cmd = format!("{} 300 3", w.display());
    let script = "syscall::write:entry /pid == $target/ { @n = count(); @z = sum(0); \
        @mx = max((int)arg2 % 3 - 5); @q = quantize(arg2); @lq = lquantize(arg2, 0, 300, 100); } \
        syscall::write:entry /pid == $target && arg2 > 100000/ { @never = count(); \
        @nq = quantize(arg2); @nmin = min(arg2); } \
        syscall::getppid:entry /pid == $target/ { printa(\"n %@d\\n\", @n); \
        printa(\"z %@d\\n\", @z); printa(\"mx %@d\\n\", @mx); printa(\"never %@d\\n\", @never); \
        printa(\"nmin %@d\\n\", @nmin); printa(@q); printa(@nq); clear(@n); trunc(@z); \
        trunc(@q); printf(\"--\\n\"); }";
    let in_kernel = |err: &str| {
        [1, 2].iter().all(|&c| {
            clause_lines(err, c)
                .iter()
                .any(|l| l.ends_with("aggregations run in the kernel at 1 probe"))
        })
    };
    let out = common::same_both_ways("DTRACE_KERNEL_AGGREGATIONS", script, FAST, &cmd, &in_kernel);
    assert_eq!(out.matches("--\n").count(), 3, "{out}");
    assert_eq!(out.matches("n 300\n").count(), 3, "{out}");
    assert_eq!(out.matches("z 0\n").count(), 3, "{out}");
    assert!(!out.contains("never") && !out.contains("nmin"), "{out}");
}

#[test]
fn clauses_beside_kernel_aggregations_and_keys_from_probe_names() {
    let t = "clauses_beside_kernel_aggregations_and_keys_from_probe_names";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = writer("kagg-mixed");
    // On one CPU: records print CPU by CPU, so a writer that moved CPU could have a record printed
    // after the marker's printa() of the same switch (as in DTrace).
    let cmd = format!("taskset -c 0 {} 500 2", w.display());
    // A recording clause on the same probe, and a clause on several probes keyed by their names.
    let script = "syscall::write:entry,syscall::getppid:entry /pid == $target/ \
        { @[probefunc, probename, \"k\"] = count(); } \
        syscall::write:entry /pid == $target && arg2 == 74/ { printf(\"w %d\\n\", arg2); } \
        syscall::getppid:entry /pid == $target/ { printa(@); }";
    let out = same_both_ways(script, FAST, &cmd);
    assert!(out.contains("getppid"), "{out}");
    assert!(out.contains("w 74"), "{out}");
}

#[test]
fn verbose_mode_says_why_aggregations_stay_in_dtrace() {
    let t = "verbose_mode_says_why_aggregations_stay_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = writer("kagg-verbose");
    let cmd = format!("{} 100", w.display());
    let cases = [(
        "@[json(lltostr(arg2), \"\")] = count();",
        "aggregations run in the kernel at 0 probes, in dtrace at 1 probe (at \
             syscall:vmlinux:write:entry: instruction",
    )];
    // exit() in a clause that runs in dtrace at a kernel probe stops the counting at that
    // firing: only dtrace knows which (kernel_records.rs has it in the kernel).
    let script = "syscall::write:entry /pid == $target/ { @ = count(); } \
        syscall::write:entry /pid == $target && arg2 == 74/ { trace(json(lltostr(arg2), \"\")); exit(0); }";
    let (krc, kout, kerr) = dtrace_way(true, &["-qv", "-n", script, "-c", &cmd]);
    let (irc, iout, _) = dtrace_way(false, &["-qv", "-n", script, "-c", &cmd]);
    assert_eq!((krc, irc), (0, 0), "{kerr}");
    assert_eq!(kout, iout);
    assert!(kout.contains(" 3\n"), "{kout}");
    assert!(
        kerr.contains("calls exit() at a kernel probe, where it cannot run whole: ")
            && kerr.contains("; counting stops at that firing"),
        "{kerr}"
    );
    for (body, line) in cases {
        let script = format!("syscall::write:entry /pid == $target/ {{ {body} }}");
        let (krc, kout, kerr) = dtrace_way(true, &["-qv", "-n", &script, "-c", &cmd]);
        let (irc, iout, _) = dtrace_way(false, &["-qv", "-n", &script, "-c", &cmd]);
        assert_eq!((krc, irc), (0, 0), "{body}: {kerr}");
        assert!(
            clause_lines(&kerr, 1).iter().any(|l| l.contains(line)),
            "{body}: {kerr}"
        );
        // Kept in dtrace, the clause prints as it always has.
        assert_eq!(kout, iout, "{body}");
    }
}

#[test]
fn a_full_map_counts_aggregation_drops_as_the_framework_does() {
    let t = "a_full_map_counts_aggregation_drops_as_the_framework_does";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    // aggsize bounds the entries as it bounds the framework's buffer: 10 of the 300 sizes fit,
    // the other writes are aggregation drops, reported as such. (The framework's bound is per
    // CPU, the kernel map's for all: the writer stays on one CPU.)
    if !dtrace_testkit::skip_unless(dtrace_testkit::have_program("taskset"), t, "needs taskset") {
        return;
    }
    let w = writer("kagg-drops");
    let cmd = format!("taskset -c 0 {} 1000", w.display());
    let script = "syscall::write:entry /pid == $target/ { @[arg2] = count(); } \
        END { printa(\"%d %@d\\n\", @); }";
    let args = ["-q", "-x", "aggsize=600", "-n", script, "-c", &cmd];
    let (krc, kout, kerr) = dtrace_way(true, &args);
    let (irc, iout, ierr) = dtrace_way(false, &args);
    assert_eq!((krc, irc), (0, 0), "{kerr}");
    let entries = |out: &str| out.lines().filter(|l| !l.is_empty()).count();
    let drops = |e: &str| -> u64 {
        e.lines()
            .filter(|l| l.contains("aggregation drop"))
            .filter_map(|l| l.split(' ').nth(1)?.parse::<u64>().ok())
            .sum()
    };
    let counted = |out: &str| -> u64 {
        out.lines()
            .filter_map(|l| l.split(' ').nth(1)?.parse::<u64>().ok())
            .sum()
    };
    // Every write is counted or dropped, on either path. Both bound the entries between two
    // snapshots, as DTrace's aggregation buffer is (the framework's buffer is emptied by each
    // snapshot, the kernel's maps are two generations switched at each): a run spanning a
    // snapshot fits 10 more keys (15 entries once on a loaded host), so the paths' counts agree
    // only when the run falls between two snapshots.
    for (out, err) in [(&kout, &kerr), (&iout, &ierr)] {
        assert!(err.contains("aggregation drops on CPU"), "{err}");
        assert_eq!(counted(out) + drops(err), 1000, "{out}\n{err}");
        assert!((10..300).contains(&entries(out)), "{out}");
    }
}

/// Pinned to CPU 0 at a real-time priority (so nothing else of that CPU's runs while it
/// writes, the kernel's work queues neither): writes `argv[1]` sizes 0, 1, ... `argv[2]` times.
const BURST_WRITER: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int keys = atoi(argv[1]), rounds = atoi(argv[2]);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    struct sched_param fifo = { .sched_priority = 1 };
    if (sched_setaffinity(0, sizeof set, &set) != 0 || sched_setscheduler(0, SCHED_FIFO, &fifo) != 0)
        return 1;
    int fd = open("/dev/null", O_WRONLY);
    static char buf[4096];
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < keys; i++)
            if (write(fd, buf, i) < 0)
                return 1;
    return 0;
}
"#;

#[test]
fn entries_the_kernel_cannot_allocate_at_the_probe_are_aggregated_by_dtrace_not_dropped() {
    let t = "entries_the_kernel_cannot_allocate_at_the_probe_are_aggregated_by_dtrace_not_dropped";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    // The kernel allocates a map's new entry at the probe, from caches refilled later (per-CPU
    // values of 8 KB here, two maps' worth a key); 400 new keys in a burst on one CPU empty
    // them (on 6.18, without this, more than 1,000 of the 1,200 updates were lost). The map is
    // far from full (aggsize 16m), so, as in DTrace, nothing may be dropped: what the map
    // cannot take at once goes to dtrace, which aggregates it. The string keys are short: their
    // entries are in the short keys' maps.
    let dir = test_dir("kagg-burst");
    let w = compile_c(&dir, "burst", BURST_WRITER, &["-O2"]);
    let cmd = format!("{} 400 3", w.display());
    let out = same_both_ways(
        "syscall::write:entry /pid == $target/ { @a[arg2] = lquantize(arg2, 0, 1000, 1); \
         @b[lltostr(arg2)] = lquantize(arg2, 0, 1000, 1); } \
         END { printa(\"%d %@d\\n\", @a); printa(\"%s %@d\\n\", @b); }",
        &["-x", "aggsize=16m"],
        &cmd,
    );
    // Every key, each with the three writes of its size in its bucket.
    let keys = out
        .lines()
        .filter(|l| l.contains("|@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@ 3 "))
        .count();
    assert_eq!(keys, 800, "{out}");
}

#[test]
fn the_cpu_option_keeps_kernel_clauses_to_that_cpu() {
    let t = "the_cpu_option_keeps_kernel_clauses_to_that_cpu";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    if !dtrace_testkit::skip_unless(dtrace_testkit::have_program("taskset"), t, "needs taskset") {
        return;
    }
    // DTrace traces the CPU the cpu option names only: the code at the probe returns at once
    // on the others, so the clause aggregates in the kernel and counts the writes made on that
    // CPU, not those of another.
    let w = writer("kagg-cpu");
    let script = "syscall::write:entry /pid == $target/ { @ = count(); }";
    for (cpu, counted) in [(1, false), (0, true)] {
        let cmd = format!("taskset -c {cpu} {} 100", w.display());
        let (rc, out, err) = dtrace(&["-qv", "-x", "cpu=0", "-n", script, "-c", &cmd]);
        if rc != 0 && err.contains("taskset") {
            // A machine with one CPU.
            return;
        }
        assert_eq!(rc, 0, "{err}");
        assert!(err.contains("aggregations run in the kernel"), "{err}");
        assert_eq!(out.contains("100"), counted, "writes on CPU {cpu}: {out}");
        // A variable kept in the kernel counts that CPU's firings only, too.
        let vars = "syscall::write:entry /pid == $target/ { x++; } END { printf(\"%d\\n\", x); }";
        let (rc, out, err) = dtrace(&["-qv", "-x", "cpu=0", "-n", vars, "-c", &cmd]);
        assert_eq!(rc, 0, "{err}");
        assert!(err.contains("variables x live in the kernel"), "{err}");
        let want = if counted { "100" } else { "0" };
        let last = out.trim_end().lines().last().unwrap_or("");
        assert_eq!(last.trim(), want, "writes on CPU {cpu}: {out}");
    }
}
