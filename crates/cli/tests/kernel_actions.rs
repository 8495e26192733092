//! Actions built at the probe (issue 13): `tracemem()` copies the memory into the record the
//! kernel builds, byte for byte what the interpreter records (the dynamic size too), and a
//! read that fails faults as the interpreter's does; `printa()` prints every update the kernel
//! made before it fired; speculations live in the kernel (`speculation()`, `speculate()`,
//! `commit()`, `discard()`, their failures, drops and faults); each script runs with every kernel path on
//! and again with every one off (`DTRACE_KERNEL_*=0`) and must print the same output and the
//! same errors, and `-v` must say the clause ran whole in the kernel (root, BPF, tracepoints;
//! gcc).

mod common;
use common::{clause_lines, have_gcc, kernel_ok, same_with_kernel_paths_off};

/// What `-v` says of a clause that runs whole at its one probe, building records there.
const AT_PROBE: &str = "runs whole in the kernel at 1 probe (records built at the probe)";

#[test]
fn tracemem_records_kernel_memory_at_the_probe() {
    let t = "tracemem_records_kernel_memory_at_the_probe";
    if !kernel_ok(t) || !have_gcc(t) || !common::have_btf(t) {
        return;
    }
    let w = common::sized_writer("kact-tracemem");
    let cmd = format!("{} 20", w.display());
    // The thread's name, whole, cut by a dynamic size, and from an offset, between integers.
    let script = "syscall::write:entry /pid == $target/ { trace(arg2); \
        tracemem(&curthread->comm[0], 16); tracemem(&curthread->comm[0], 16, arg2 % 7); \
        printf(\"|%d|\\n\", arg2 % 7); tracemem(&curthread->comm[2], 5); }";
    let out = same_with_kernel_paths_off(script, &[], &cmd, &[(1, AT_PROBE)]);
    assert!(
        out.contains("0: 77 72 69 74 65 72 00 00 00 00 00 00 00 00 00 00  writer.........."),
        "{out}"
    );
    // 296 % 7 == 2 bytes of the name, then the name from its third byte.
    assert!(
        out.contains(
            "0: 77 72                                            wr\n|2|\n\n             0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f  0123456789abcdef\n         0: 69 74 65 72 00                                   iter."
        ),
        "{out}"
    );
}

#[test]
fn tracemem_of_an_unreadable_address_faults_as_in_the_interpreter() {
    let t = "tracemem_of_an_unreadable_address_faults_as_in_the_interpreter";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kact-tracemem-fault");
    let cmd = format!("{} 5", w.display());
    // The record before the fault is kept, the faulting clause's is not; ERROR sees the
    // fault's DIF offset, kind and address.
    let script = "syscall::write:entry /pid == $target/ { printf(\"%d\\n\", arg2); } \
        syscall::write:entry /pid == $target/ { trace(arg2); tracemem(8 + arg2 % 2, 4); } \
        ERROR { printf(\"error %d %d 0x%x\\n\", arg3 > 0, arg4, arg5); }";
    let out = same_with_kernel_paths_off(script, &[], &cmd, &[(2, AT_PROBE)]);
    // DTRACEFLT_BADADDR (1) at the address, at a DIF offset past the first clause's code.
    assert!(out.contains("\n37\nerror 1 1 0x9\n"), "{out}");
    assert_eq!(out.matches("error").count(), 5, "{out}");
}

#[test]
fn printa_at_the_probe_prints_every_update_made_before_it() {
    let t = "printa_at_the_probe_prints_every_update_made_before_it";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kact-printa");
    let cmd = format!("{} 50", w.display());
    // Every write is aggregated in the kernel before the process exits: printa() at its exit
    // (plain, formatted, two aggregations joined, one updated by its own clause) prints all of
    // them, and the aggregations it printed are not printed again at the end.
    let script = "syscall::write:entry /pid == $target/ { @[arg2 % 3] = count(); \
        @s[arg2 % 3] = sum(arg2); } \
        syscall::exit_group:entry /pid == $target/ { printa(@); printa(\"%d %@d\\n\", @s); \
        printa(\"%d %@d %@d\\n\", @s, @); } \
        syscall::exit_group:entry /pid == $target/ { @e = count(); printa(\"exits %@d\\n\", @e); }";
    let whole = "runs whole in the kernel at 1 probe (records built at the probe)";
    let out = same_with_kernel_paths_off(
        script,
        &[],
        &cmd,
        &[
            (1, "aggregations run in the kernel at 1 probe"),
            (2, whole),
            (3, whole),
        ],
    );
    let expect = "\n                2               16\n                0               17\n\
                  \x20               1               17\n0 2496\n2 2504\n1 2525\n\
                  0 2496 17\n2 2504 16\n1 2525 17\nexits 1\n";
    // After -v's stability report, which goes to stdout.
    assert!(out.ends_with(&format!("Common\n\n{expect}\n")), "{out}");
}

/// Writes `argv[1]` times (3 by default) to /dev/null, from a buffer on its stack, the i-th
/// time its first 20 + i bytes: "copied at the probe!" and a counting byte.
const STACK_WRITER: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3;
    int out = open("/dev/null", O_WRONLY);
    char buf[64];
    memset(buf, 0, sizeof buf);
    strcpy(buf, "copied at the probe!");
    for (int i = 0; i < n; i++) {
        buf[20] = (char)('A' + i);
        if (write(out, buf, 20 + i) < 0)
            return 1;
    }
    return 0;
}
"#;

#[test]
fn tracemem_of_copyin_records_user_memory_at_the_probe() {
    let t = "tracemem_of_copyin_records_user_memory_at_the_probe";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let dir = common::test_dir("kact-copyin");
    let w = common::compile_c(&dir, "stackw", STACK_WRITER, &["-O2"]);
    let cmd = format!("{} 3", w.display());
    // copyin() of a constant size, whole, cut by the dynamic size (the bytes written), and
    // twice in one clause.
    let script = "syscall::write:entry /pid == $target/ { tracemem(copyin(arg1, 24), 24); \
        tracemem(copyin(arg1, 32), 32, arg2); trace(arg2); tracemem(copyin(arg1 + 7, 2), 2); }";
    let out = same_with_kernel_paths_off(script, &[], &cmd, &[(1, AT_PROBE)]);
    assert!(
        out.contains(
            "0: 63 6f 70 69 65 64 20 61 74 20 74 68 65 20 70 72  copied at the pr\n        10: 6f 62 65 21 43 00 00 00                          obe!C..."
        ),
        "{out}"
    );
    assert!(
        out.contains("        10: 6f 62 65 21 42                                   obe!B\n21\n"),
        "{out}"
    );
    assert!(
        out.contains("0: 61 74                                            at\n"),
        "{out}"
    );
    // A read that fails faults at the address, as the interpreter's.
    let script =
        "syscall::write:entry /pid == $target/ { tracemem(copyin(16 + arg0 * 0, 8), 8); } \
        ERROR { printf(\"error %d 0x%x\\n\", arg4, arg5); }";
    let out = same_with_kernel_paths_off(script, &[], &cmd, &[(1, AT_PROBE)]);
    assert_eq!(out.matches("error 1 0x10\n").count(), 3, "{out}");
}

#[test]
fn speculations_run_in_the_kernel_and_commit_or_discard_there() {
    let t = "speculations_run_in_the_kernel_and_commit_or_discard_there";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kact-spec");
    let cmd = format!("{} 10", w.display());
    // One speculation per write (nspec is 1): its size speculated at entry (a printf and a
    // trace), committed at the return of an even result, discarded otherwise. Committed or
    // discarded on the CPU that speculated, it is free at once, as in the interpreter.
    let script = "syscall::write:entry /pid == $target/ { self->spec = speculation(); } \
        syscall::write:entry /self->spec/ { speculate(self->spec); printf(\"%d \", arg2); \
        trace(execname); } \
        syscall::write:return /self->spec && arg0 % 2 == 0/ { commit(self->spec); \
        self->spec = 0; } \
        syscall::write:return /self->spec/ { discard(self->spec); self->spec = 0; } \
        syscall::write:return /pid == $target/ { printf(\"|\\n\"); }";
    let whole = "runs whole in the kernel at 1 probe (variables self->spec, speculations live \
                 in the kernel)";
    let out = same_with_kernel_paths_off(
        script,
        &[],
        &cmd,
        &[(1, whole), (2, whole), (3, whole), (4, whole)],
    );
    let lines: Vec<&str> = out.lines().filter(|l| l.ends_with('|')).collect();
    assert_eq!(
        lines,
        [
            "0 writer|",
            "|",
            "74 writer|",
            "|",
            "148 writer|",
            "|",
            "222 writer|",
            "|",
            "296 writer|",
            "|"
        ],
        "{out}"
    );
}

#[test]
fn kernel_speculations_fail_drop_and_fault_as_the_interpreters() {
    let t = "kernel_speculations_fail_drop_and_fault_as_the_interpreters";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kact-spec-fail");
    let cmd = format!("{} 6", w.display());
    let both = |script: &str, extra: &[&str]| {
        let mut args = vec!["-qv"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-n", script, "-c", &cmd]);
        let (rc, kout, kerr) = common::dtrace_with_env(&[], &args);
        assert_eq!(rc, 0, "{kerr}");
        assert!(kerr.contains("speculations live in the kernel"), "{kerr}");
        let (rc, iout, ierr) = common::dtrace_with_env(&common::kernel_paths_off(), &args);
        assert_eq!(rc, 0, "{ierr}");
        let said = dtrace_messages;
        assert_eq!(kout, iout, "{script}");
        assert_eq!(said(&kerr), said(&ierr), "{script}");
        (kout, said(&kerr))
    };
    // nspec speculations only: the second speculation() of a firing fails.
    let (out, said) = both(
        "syscall::write:entry /pid == $target && arg2 == 37/ { self->a = speculation(); \
         self->b = speculation(); printf(\"%d %d\\n\", self->a, self->b); }",
        &[],
    );
    assert!(out.contains("1 0\n"), "{out}");
    assert_eq!(
        said,
        ["dtrace: 1 failed speculation (no speculative buffer available)"]
    );
    // A record larger than specsize is a speculative drop.
    let (_, said) = both(
        "syscall::write:entry /pid == $target/ { self->s = speculation(); } \
         syscall::write:entry /self->s/ { speculate(self->s); printf(\"%d %s\\n\", arg2, \
         \"longer than the buffer\"); } \
         syscall::write:return /self->s/ { commit(self->s); self->s = 0; }",
        &["-x", "nspec=16", "-x", "specsize=40"],
    );
    assert!(
        said.iter().any(|l| l == "dtrace: 6 speculative drops"),
        "{said:?}"
    );
    // A clause faulting after speculate() gives the room its record took in the principal
    // buffer back once (twice, the principal buffer's account went below zero and every record
    // after the first fault was a drop, the exit() record among them).
    let (out, said) = both(
        "syscall::write:entry /pid == $target/ { self->s = speculation(); \
         speculate(self->s); trace(arg2); tracemem(8 + arg2 % 2, 4); } \
         syscall::write:return /self->s/ { commit(self->s); self->s = 0; } \
         syscall::write:return /pid == $target/ { printf(\"%d\\n\", arg1); }",
        &[],
    );
    assert_eq!(
        out.lines().filter(|l| l.parse::<u64>().is_ok()).count(),
        6,
        "{out}"
    );
    assert!(!said.iter().any(|l| l.contains("drop")), "{said:?}");
    assert_eq!(said.len(), 6, "{said:?}");
    // commit() of an id beyond nspec is an illegal operation; discard(0) does nothing.
    let (out, said) = both(
        "syscall::write:entry /pid == $target && arg2 == 37/ { commit(arg2); } \
         syscall::write:entry /pid == $target && arg2 == 74/ { discard(0); printf(\"zero\\n\"); } \
         syscall::write:entry /pid == $target && arg2 == 74/ { self->s = speculation(); }",
        &[],
    );
    // After -v's stability report, which goes to stdout.
    assert!(out.ends_with("Common\n\nzero\n\n"), "{out}");
    assert!(
        said[0].ends_with("illegal operation at BPF pc 23"),
        "{said:?}"
    );
    // More speculations than the kernel keeps: they stay in dtrace, and -v says why.
    let (rc, _, err) = common::dtrace(&[
        "-qv",
        "-x",
        "nspec=17",
        "-n",
        "syscall::write:entry /pid == $target/ { self->s = speculation(); }",
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.contains("variables stay in dtrace (nspec is above the kernel's 16 speculations)"),
        "{err}"
    );
}

/// The `dtrace:` messages of `err` (the clauses' reports, matches and exits aside), the
/// speculative drops reported in several status intervals added up into one line (the kernel
/// counts them at the probe, the interpreter as dtrace consumes the firings).
fn dtrace_messages(err: &str) -> Vec<String> {
    let mut spec_drops = 0u64;
    let mut out: Vec<String> = err
        .lines()
        .filter(|l| l.starts_with("dtrace: ") && !l.starts_with("dtrace: clause"))
        .filter(|l| !l.contains("matched") && !l.contains("has exited"))
        .filter(|l| {
            let n = common::reported_drops(l, "speculative");
            spec_drops += n;
            n == 0
        })
        .map(String::from)
        .collect();
    if spec_drops > 0 {
        let s = if spec_drops == 1 { "" } else { "s" };
        out.push(format!("dtrace: {spec_drops} speculative drop{s}"));
    }
    out
}

/// Pinned to CPU 0 (so a speculation stays on one CPU): writes `argv[1]` times to /dev/null, of
/// sizes (i * 37) % 300, sleeping `argv[2]` ms after each.
const PINNED_WRITER: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        return 1;
    int n = atoi(argv[1]), ms = argc > 2 ? atoi(argv[2]) : 0;
    int out = open("/dev/null", O_WRONLY);
    static char buf[512];
    for (int i = 0; i < n; i++) {
        if (write(out, buf, (i * 37) % 300) < 0)
            return 1;
        if (ms > 0)
            usleep(ms * 1000);
    }
    return 0;
}
"#;

/// Runs `script` with `-qv` and `extra` over `cmd` with every kernel path on, then off: both
/// succeed with the same output and the same `dtrace:` messages (the clauses' reports, matches
/// and exits aside), and `-v` says `said` of every clause. Returns the output and the messages.
fn speculating_both_ways(
    script: &str,
    extra: &[&str],
    cmd: &str,
    said: &str,
) -> (String, Vec<String>) {
    let (out, messages) = both_ways(script, extra, cmd, said);
    assert_eq!(messages[0], messages[1], "{script}");
    (out, messages.into_iter().next().unwrap_or_default())
}

/// [`speculating_both_ways`], returning both ways' messages (kernel paths on, then off).
fn both_ways(script: &str, extra: &[&str], cmd: &str, said: &str) -> (String, Vec<Vec<String>>) {
    let mut args = vec!["-qv"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-n", script, "-c", cmd]);
    let (rc, kout, kerr) = common::dtrace_with_env(&[], &args);
    assert_eq!(rc, 0, "{kerr}");
    // Every clause, each named by its number.
    let clauses = kerr
        .lines()
        .filter_map(|l| l.strip_prefix("dtrace: clause "))
        .filter_map(|l| l.split(' ').next())
        .collect::<std::collections::BTreeSet<_>>();
    assert!(!clauses.is_empty(), "{kerr}");
    for n in clauses {
        assert!(
            common::clause_lines(&kerr, n.parse().unwrap_or(0))
                .iter()
                .any(|l| l.contains(said)),
            "clause {n}: {kerr}"
        );
    }
    let (rc, iout, ierr) = common::dtrace_with_env(&common::kernel_paths_off(), &args);
    assert_eq!(rc, 0, "{ierr}");
    let messages = dtrace_messages;
    assert_eq!(kout, iout, "{script}");
    (kout, vec![messages(&kerr), messages(&ierr)])
}

#[test]
fn a_clause_whose_record_exceeds_specsize_stores_nothing_at_the_probe() {
    let t = "a_clause_whose_record_exceeds_specsize_stores_nothing_at_the_probe";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kact-spec-size");
    let cmd = format!("{} 6", w.display());
    // speculate() of a record larger than specsize ends the clause there, as in DTrace: its
    // later store (self->n++) never runs, and each firing is one speculative drop.
    let (out, said) = speculating_both_ways(
        "syscall::write:entry /pid == $target/ { self->s = speculation(); } \
         syscall::write:entry /self->s/ { speculate(self->s); printf(\"%d %s\\n\", arg2, \
         \"longer than the buffer\"); self->n++; } \
         syscall::write:return /self->s/ { commit(self->s); self->s = 0; } \
         syscall::write:return /pid == $target/ { printf(\"n=%d\\n\", self->n); }",
        &["-x", "nspec=16", "-x", "specsize=40"],
        &cmd,
        "runs whole in the kernel",
    );
    assert_eq!(out.matches("n=0\n").count(), 6, "{out}");
    assert!(!out.contains("longer"), "{out}");
    assert_eq!(said, ["dtrace: 6 speculative drops"]);
}

#[test]
fn speculate_and_commit_in_one_clause_run_at_the_probe() {
    let t = "speculate_and_commit_in_one_clause_run_at_the_probe";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let dir = common::test_dir("kact-spec-commit");
    let w = common::compile_c(&dir, "pinned", PINNED_WRITER, &["-O2"]);
    let cmd = format!("{} 6", w.display());
    // Each write speculates to a new speculation and, in the same clause, commits the previous
    // write's (DTrace allows speculate() before commit(), not after): committed on the CPU that
    // speculated, it is free at once, so two speculations take turns (a clause recording
    // nothing speculates too). A clause that speculates to the speculation it discards sends
    // its record there first: nothing of it is printed.
    let (out, said) = speculating_both_ways(
        "self int prev; \
         syscall::write:entry /pid == $target/ { self->cur = speculation(); \
         printf(\"id %d\\n\", self->cur); } \
         syscall::write:entry /pid == $target/ { speculate(self->cur); commit(self->prev); } \
         syscall::write:entry /pid == $target/ { speculate(self->cur); printf(\"%d\\n\", arg2); } \
         syscall::write:entry /pid == $target/ { self->prev = self->cur; } \
         syscall::write:entry /pid == $target && arg2 == 148/ { speculate(self->prev); \
         discard(self->prev); self->prev = 0; }",
        &["-x", "nspec=2"],
        &cmd,
        "runs whole in the kernel",
    );
    // The 148-byte write's speculation is discarded, freed at once for the last write's, whose
    // data is never committed.
    let printed = out
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('\t') && !l.starts_with("Stability"))
        .collect::<Vec<_>>();
    assert_eq!(
        printed,
        ["id 1", "id 2", "0", "id 1", "37", "id 2", "74", "id 1", "111", "id 1"],
        "{out}"
    );
    assert!(said.is_empty(), "{said:?}");
}

/// Pinned to CPU 0 at a real-time priority: writes 37 bytes to /dev/null, then half a second
/// later reads 7 bytes from /dev/zero (static: no loader reads first).
const WRITE_THEN_READ: &str = r#"
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        return 1;
    /* dtrace (the parent, which ran this with -c), every thread of it, on the same CPU: it
       must not drain the ring while the write's clauses run, and on another CPU it could
       (woken by the records past the ring's wake-up mark). */
    char tasks[64];
    snprintf(tasks, sizeof tasks, "/proc/%d/task", (int)getppid());
    DIR *dir = opendir(tasks);
    if (dir == NULL)
        return 1;
    for (struct dirent *e; (e = readdir(dir)) != NULL;)
        if (e->d_name[0] != '.' && sched_setaffinity(atoi(e->d_name), sizeof set, &set) != 0)
            return 1;
    closedir(dir);
    /* Not preempted by dtrace or other work while the write's clauses run (their programs are
       preemptible where syscall tracepoints may fault). */
    struct sched_param fifo = { .sched_priority = 1 };
    if (sched_setscheduler(0, SCHED_FIFO, &fifo) != 0)
        return 1;
    static char buf[64];
    if (write(open("/dev/null", O_WRONLY), buf, 37) != 37)
        return 1;
    usleep(500000);
    if (read(open("/dev/zero", O_RDONLY), buf, 7) != 7)
        return 1;
    usleep(100000);
    return 0;
}
"#;

#[test]
fn a_commit_the_full_ring_cannot_take_loses_that_cpus_data_and_frees_the_speculation() {
    let t = "a_commit_the_full_ring_cannot_take_loses_that_cpus_data_and_frees_the_speculation";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let dir = common::test_dir("kact-spec-full");
    let cmd = common::compile_c(&dir, "wr", WRITE_THEN_READ, &["-O2", "-static"]);
    let cmd = cmd.display().to_string();
    // The ring holds bufsize (4k) per CPU; the interpreter's principal buffer 4k. At the write
    // the clauses before commit() fill both with records that print nothing: the interpreter's
    // with 15 strings of 256 bytes (4080 of its 4096 bytes, each 304 in the ring), the ring then
    // with larger records, then those strings again, then settles of 32 bytes (a discard() of
    // a new speculation) until not even a settle fits. The commit() then finds no room: as
    // DTrace with a full principal buffer, the speculation's data is lost, counted as a drop on
    // the CPU, and the speculation is free again, the read's speculation() taking it. (Every
    // predicate is `pid == $target` alone, which the probe filters on with the kernel paths
    // off too: the small ring then takes no other process's writes.)
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let max_cpu = online
        .trim()
        .split([',', '-'])
        .filter_map(|n| n.parse::<usize>().ok())
        .max()
        .unwrap_or(0);
    let ring = ((max_cpu + 1) * 4096).next_power_of_two();
    let at =
        |probe: &str, body: &str| format!("syscall::{probe}:entry /pid == $target/ {{ {body} }} ");
    let mut script = String::new();
    for probe in ["write", "read"] {
        script += &at(probe, "self->s = speculation();");
        script += &at(
            probe,
            &format!("speculate(self->s); printf(\"speculated {probe} %d\\n\", (long)self->s);"),
        );
        if probe == "write" {
            let string = at(probe, "printf(\"%s\", \"\");");
            let large = at(
                probe,
                &format!("printf(\"{}\"{});", "%s".repeat(15), ", \"\"".repeat(15)),
            );
            script += &string.repeat(15);
            script += &large.repeat(ring / 3888 + 1);
            script += &string.repeat(13);
            script += &at(probe, "discard(speculation());").repeat(9);
        }
        script += &at(probe, "commit(self->s); self->s = 0;");
    }
    let (out, said) = both_ways(
        &script,
        &[
            "-b",
            "4k",
            "-x",
            "strsize=256",
            "-x",
            "nspec=10",
            "-x",
            "switchrate=20hz",
        ],
        &cmd,
        "runs whole in the kernel",
    );
    // After -v's stability report, which goes to stdout.
    assert!(out.ends_with("Common\n\nspeculated read 1\n\n"), "{out}");
    // The buffers' sizes differ (the ring is shared by the CPUs): both ways drop, not as many.
    for said in said {
        assert!(
            said.iter()
                .all(|l| l.ends_with(" drops on CPU 0") || l.ends_with(" 1 drop on CPU 0"))
                && !said.is_empty(),
            "{said:?}"
        );
    }
}

/// The one-byte writes of [`small_buffer_run`]'s command.
const WRITES: u64 = 20_000;

/// Runs `script` with `-q -v -b 4k` and `opts` over dd's [`WRITES`] one-byte writes, the kernel paths
/// on (`kernel`) or off; returns the output and stderr.
fn small_buffer_run(script: &str, opts: &[&str], kernel: bool) -> (String, String) {
    let cmd = format!("dd if=/dev/zero of=/dev/null bs=1 count={WRITES} status=none");
    let env = if kernel {
        Vec::new()
    } else {
        common::kernel_paths_off()
    };
    let mut args = vec!["-qv", "-b", "4k"];
    args.extend_from_slice(opts);
    args.extend_from_slice(&["-n", script, "-c", &cmd]);
    let (rc, out, err) = common::dtrace_with_env(&env, &args);
    assert_eq!(rc, 0, "{err}");
    (out, err)
}

/// The drops `dtrace` reported on stderr, added up.
fn drops_reported(err: &str) -> u64 {
    err.lines()
        .filter(|l| l.contains(" drops on CPU ") || l.contains(" drop on CPU "))
        .filter_map(|l| l.split(' ').nth(1)?.parse::<u64>().ok())
        .sum()
}

#[test]
fn a_clause_without_room_for_its_record_is_skipped_whole() {
    let t = "a_clause_without_room_for_its_record_is_skipped_whole";
    if !kernel_ok(t) {
        return;
    }
    // As DTrace reserves an ECB's room in the principal buffer before it runs, a firing whose
    // record finds no room (a 4k buffer, 20000 writes in a burst) does nothing but count a
    // drop: `x++` is not made either. Under `fill` the buffer fills once and END's record
    // still fits: x is the number of records traced. Under `switch` the values printed are
    // 1..x without a gap. Both ways: in the kernel (the clause runs whole there, x too) and
    // in dtrace.
    let script = "syscall::write:entry /pid == $target/ { x++; printf(\"%d\\n\", x); } \
        END { printf(\"x=%d\\n\", x); }";
    for kernel in [true, false] {
        let (out, err) = small_buffer_run(script, &["-x", "bufpolicy=fill"], kernel);
        if kernel {
            assert!(
                clause_lines(&err, 1)
                    .iter()
                    .any(|l| l.contains("runs whole in the kernel at 1 probe")),
                "{err}"
            );
        }
        let traced: Vec<u64> = out.lines().filter_map(|l| l.parse().ok()).collect();
        let x = out
            .lines()
            .find_map(|l| l.strip_prefix("x="))
            .and_then(|v| v.parse::<u64>().ok());
        assert!(!traced.is_empty(), "{out}\n{err}");
        assert_eq!(
            x,
            Some(traced.len() as u64),
            "kernel {kernel}: {out}\n{err}"
        );
        assert!(drops_reported(&err) > 0, "{err}");
        // A predicate with side effects does not run either: the room is taken before it.
        let stores = "syscall::write:entry /pid == $target && ++y > 0/ { printf(\"%d\\n\", y); } \
            END { printf(\"x=%d\\n\", y); }";
        let (out, err) = small_buffer_run(stores, &["-x", "bufpolicy=fill"], kernel);
        let traced = out.lines().filter(|l| l.parse::<u64>().is_ok()).count() as u64;
        assert!(traced > 0, "{out}\n{err}");
        assert!(
            out.contains(&format!("x={traced}\n")),
            "kernel {kernel}: {out}\n{err}"
        );
        let (out, err) = small_buffer_run(script, &["-x", "bufpolicy=switch"], kernel);
        let mut traced: Vec<u64> = out.lines().filter_map(|l| l.parse().ok()).collect();
        traced.sort_unstable();
        let n = traced.len() as u64;
        assert!(n > 0, "{out}\n{err}");
        assert_eq!(
            traced,
            (1..=n).collect::<Vec<u64>>(),
            "kernel {kernel}: {err}"
        );
        // Every write was traced or dropped (the END record may have been dropped too).
        let dropped = drops_reported(&err);
        assert!(
            n + dropped == WRITES || n + dropped == WRITES + 1,
            "kernel {kernel}: {n} traced, {dropped} dropped: {err}"
        );
    }
}

/// Runs `script` with `-q -v -b 4k -x bufpolicy=fill -x switchrate=100ms` over `sh` running
/// `target` (a script whose `$PPID` is dtrace), the kernel paths on (`kernel`) or off; returns
/// how many lines of the output start with `1` and with `2` (as `1` or `1 ...`), and stderr.
fn fill_run(
    dir: &std::path::Path,
    script: &str,
    target: &str,
    kernel: bool,
) -> (usize, usize, String) {
    let path = dir.join("target.sh");
    std::fs::write(&path, target).unwrap();
    let env = if kernel {
        Vec::new()
    } else {
        common::kernel_paths_off()
    };
    let cmd = format!("sh {}", path.display());
    let args = [
        "-qv",
        "-b",
        "4k",
        "-x",
        "bufpolicy=fill",
        "-x",
        "switchrate=100ms",
        "-n",
        script,
        "-c",
        &cmd,
    ];
    let (rc, out, err) = common::dtrace_with_env(&env, &args);
    assert_eq!(rc, 0, "{err}");
    if kernel {
        assert!(
            clause_lines(&err, 1)
                .iter()
                .any(|l| l.contains("runs whole in the kernel at 1 probe")),
            "{err}"
        );
    }
    let count = |v: &str| {
        out.lines()
            .filter(|l| l.split(' ').next() == Some(v))
            .count()
    };
    (count("1"), count("2"), err)
}

#[test]
fn a_record_the_ring_loses_does_not_fill_a_fill_buffer() {
    let t = "a_record_the_ring_loses_does_not_fill_a_fill_buffer";
    if !kernel_ok(t) {
        return;
    }
    // dtrace is stopped while dd writes 500 bytes one at a time: the kernel's ring (8k here)
    // has no room for most of those firings, which are drops, but not of DTrace's principal
    // buffer, which had room all along: a fill buffer is not full after them, and the later
    // writes are traced. (The guest's slow dtrace once lost its first captures to the ring,
    // which then filled the buffer: nothing was traced at all.)
    let dir = common::test_dir("kact-ring-fill");
    let target = "d=$PPID\n(sleep 2; kill -CONT $d) &\nkill -STOP $d\n\
        dd if=/dev/zero of=/dev/null bs=1 count=500 status=none\nwait\nsleep 1\n\
        dd if=/dev/zero of=/dev/null bs=2 count=5 status=none\n";
    let script = "syscall::write:entry /ppid == $target && arg2 <= 2/ { printf(\"%d\\n\", arg2); }";
    // Built at the probe, a record takes more room in the ring (shared by the CPUs, the
    // buffer's size times their number) than in its CPU's buffer: with more than two CPUs the
    // buffer's room runs out before the ring's, and fills the buffer as it should.
    let ncpus = dtrace_linux::provider::framework_ncpus().unwrap_or(u32::MAX);
    for kernel in [false, true] {
        if kernel && ncpus > 2 {
            eprintln!(
                "{t}: skipped with the kernel paths on: {ncpus} CPUs (the ring's room outlasts \
                 the buffer's)"
            );
            continue;
        }
        let (ones, twos, err) = fill_run(&dir, script, target, kernel);
        let drops = drops_reported(&err);
        // (With the kernel paths off, every process's writes take room in the ring, and other
        // tests' may take all of it before dd's first: then none of dd's is traced.)
        assert!(
            drops > 0 && (ones > 0 || !kernel),
            "kernel {kernel}: {ones} traced\n{err}"
        );
        assert_eq!(twos, 5, "kernel {kernel}: {ones} traced\n{err}");
        // Every one-byte write was traced or dropped; with the kernel paths off, dtrace's
        // predicate drops the captures of every other process's writes too.
        if kernel {
            assert_eq!(ones as u64 + drops, 500, "{err}");
        } else {
            assert!(ones as u64 + drops >= 500, "{ones} traced\n{err}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_fill_buffer_filled_at_the_probe_keeps_no_later_record() {
    let t = "a_fill_buffer_filled_at_the_probe_keeps_no_later_record";
    if !kernel_ok(t) {
        return;
    }
    // 20000 one-byte writes fill the 4k fill buffer (records of a string of `strsize` bytes: 14
    // fit, where the ring holds more, records or captures, whatever the consumer's pace): a
    // filled buffer stops tracing, and five two-byte writes a second later are not traced.
    // Built at the probe, the kernel refused the record that found no room, and dtrace learns
    // of it at its next switch.
    let dir = common::test_dir("kact-fill-full");
    let target = "dd if=/dev/zero of=/dev/null bs=1 count=20000 status=none\nsleep 1\n\
        dd if=/dev/zero of=/dev/null bs=2 count=5 status=none\n";
    let script = "syscall::write:entry /ppid == $target && arg2 <= 2/ \
        { printf(\"%d %s\\n\", arg2, execname); }";
    for kernel in [false, true] {
        let (ones, twos, err) = fill_run(&dir, script, target, kernel);
        assert!(ones > 0, "kernel {kernel}: {err}");
        assert!(drops_reported(&err) > 0, "kernel {kernel}: {err}");
        assert_eq!(twos, 0, "kernel {kernel}: {ones} traced\n{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn records_built_at_the_probe_and_in_dtrace_share_one_buffer() {
    let t = "records_built_at_the_probe_and_in_dtrace_share_one_buffer";
    if !kernel_ok(t) {
        return;
    }
    // One CPU's writes, two clauses: entry's record is built in dtrace (json() is not
    // translated), return's at the probe. Both go to CPU 0's one 4k principal buffer, as in
    // DTrace, so together they never pass it: records of 24 bytes (EPID, timestamp, an
    // integer), 170 at most, however the two sides' records interleave; the rest are drops,
    // under `fill` and `switch` alike (a switch interval of 10 s: one interval).
    let script =
        "syscall::write:entry /pid == $target/ { printf(\"d %d\\n\", arg2 + strtoll(json(\"0\", \"\"))); } \
        syscall::write:return /pid == $target/ { printf(\"k %d\\n\", arg1); }";
    // Few writes (a burst of them still overflows the buffer), so that the other tests' runs
    // with the kernel paths off, which capture every write, do not lose theirs to these.
    let writes = 2000;
    let cmd = format!("taskset -c 0 dd if=/dev/zero of=/dev/null bs=1 count={writes} status=none");
    for policy in ["fill", "switch"] {
        let pol = format!("bufpolicy={policy}");
        let args = [
            "-qv",
            "-b",
            "4k",
            "-x",
            &pol,
            "-x",
            "switchrate=10s",
            "-n",
            script,
            "-c",
            &cmd,
        ];
        let (rc, out, err) = common::dtrace_with_env(&[], &args);
        assert_eq!(rc, 0, "{err}");
        assert!(
            clause_lines(&err, 1)
                .iter()
                .any(|l| l.contains("records are built in dtrace")),
            "{err}"
        );
        assert!(
            clause_lines(&err, 2)
                .iter()
                .any(|l| l.contains("runs whole in the kernel at 1 probe")),
            "{err}"
        );
        let count = |v: &str| {
            out.lines()
                .filter(|l| l.split(' ').next() == Some(v))
                .count()
        };
        let (d, k) = (count("d") as u64, count("k") as u64);
        assert!(
            d > 0 && k > 0,
            "{policy}: {d} built in dtrace, {k} at the probe\n{err}"
        );
        assert!(
            (d + k) * 24 <= 4096,
            "{policy}: {d} built in dtrace and {k} at the probe pass the 4k buffer\n{err}"
        );
        // Under `switch` every firing's record was kept or dropped; a filled `fill` buffer
        // ends tracing, and later firings are no drops.
        let drops = drops_reported(&err);
        assert!(drops > 0, "{policy}: {d} + {k} kept, no drop\n{err}");
        if policy == "switch" {
            assert!(
                d + k + drops >= 2 * writes,
                "{policy}: {d} + {k} kept, {drops} dropped\n{err}"
            );
        }
    }
}
