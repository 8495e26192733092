//! Differential runs of the kernel paths (issue 13): a corpus of small D programs, each run over
//! a traced command with every kernel path on (predicates, aggregations, variables, records
//! built at the probe) and again with every one off (`DTRACE_KERNEL_*=0`: the interpreter in
//! dtrace does everything), must print the same output and the same errors; `-v` must say the
//! clauses the corpus is about ran in the kernel, so that the comparison is not vacuous (root,
//! BPF, tracepoints, uprobes; gcc).
//!
//! The programs are written from DTrace's documented behaviour and cover what a differential run
//! of Oracle's conformance suite exercised at kernel probes: the nine aggregating functions over
//! tuple keys, predicates on integers, strings and thread-locals, variables of each scope,
//! records of every `printf` conversion, faults and the ERROR probe, `exit()` between clauses,
//! `pid` probes, and USDT probes named by a provider glob in the `-c` process itself (whose
//! probes exist before the file-wide probe is placed: the kernel path once ran its clauses twice
//! on the process's first firing and dropped the records it built after it).

mod common;
use common::same_with_kernel_paths_off;
use common::{have_gcc, kernel_ok};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The traced program: `argv[1]` rounds (10 by default) of a write to /dev/null of (i * 37) %
/// 300 bytes, a read of i % 7 + 1 bytes from /dev/zero and an open of a path that does not exist
/// (`/nonexistent/kdiff-bb` every third round, else `/nonexistent/kdiff-a`, copied to the stack
/// first, as are the device names, so that every path is on a page read in: a clause keeping
/// variables in the kernel reads its strings at the probe, where a page not yet read in faults,
/// as in DTrace, while dtrace's interpreter reads them again at the syscall's return).
const WORKER: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    char p[64];
    strcpy(p, "/dev/null");
    int out = open(p, O_WRONLY);
    strcpy(p, "/dev/zero");
    int in = open(p, O_RDONLY);
    static char buf[512];
    for (int i = 0; i < n; i++) {
        if (write(out, buf, (i * 37) % 300) < 0 || read(in, buf, i % 7 + 1) < 0)
            return 1;
        strcpy(p, i % 3 ? "/nonexistent/kdiff-a" : "/nonexistent/kdiff-bb");
        openat(AT_FDCWD, p, O_RDONLY);
    }
    return 0;
}
"#;

/// A USDT provider of two probes, declared in D.
const PROVIDER: &str = "provider kdiff {
    probe step(int, long);
    probe done(int);
};
";

/// Fires `kdiff:::step(i, i * -10)` `argv[1]` times (5 by default), then `kdiff:::done(n)`.
const USDT_PROG: &str = r#"
#include "provider.h"
#include <stdlib.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 5;
    for (int i = 0; i < n; i++)
        KDIFF_STEP(i, (long)i * -10);
    KDIFF_DONE(n);
    return 0;
}
"#;

/// What `-v` says of a clause run whole at the probe.
const WHOLE: &str = "runs whole in the kernel";
/// What `-v` says of a clause whose aggregations run at the probe.
const AGGS: &str = "aggregations run in the kernel";
/// What `-v` says of a clause whose predicate runs at the probe.
const PRED: &str = "predicate runs in the kernel at 1 probe";

/// One program of the corpus: its text and, for the run with the kernel paths on, what `-v`
/// must say of which clause.
struct Case {
    script: &'static str,
    said: &'static [(usize, &'static str)],
}

/// Programs at syscall probes of the [`WORKER`] (`$target`).
const SYSCALL_CASES: &[Case] = &[
    // The nine aggregating functions, keyed by nothing, an integer and execname.
    Case {
        script: "syscall::write:entry /pid == $target/ { @c = count(); @s = sum(arg2);
                 @a = avg(arg2); @mn = min(arg2); @mx = max(arg2); @sd = stddev(arg2);
                 @q[arg2 % 3] = quantize(arg2); @l[execname] = lquantize(arg2, 0, 300, 25);
                 @ll = llquantize(arg2, 10, 0, 3, 5); }",
        said: &[(1, AGGS)],
    },
    // Negative values, buckets below and above a range, keys of two integers.
    Case {
        script: "syscall::read:entry /pid == $target/ { @n[arg2 % 2, arg0 > 0] = sum(-arg2);
                 @r = lquantize(arg2, 2, 5); @m = min(-arg2); @q = quantize(-arg2); }",
        said: &[(1, AGGS)],
    },
    // A string key copied from the process, and a predicate comparing such a string.
    Case {
        script: "syscall::openat:entry /pid == $target/ { @[copyinstr(arg1)] = count(); }
                 syscall::openat:entry /pid == $target &&
                 copyinstr(arg1) == \"/nonexistent/kdiff-bb\"/ { @bb = count(); }",
        said: &[(1, AGGS), (2, PRED)],
    },
    // Records: every integer conversion, widths and precisions, strings and characters.
    Case {
        script: "syscall::write:entry /pid == $target/ {
                 printf(\"%d %i %u %x %X %o|%5d|%-5d|%05d|%+d|%s|%-8s|%.2s|%c\\n\", arg2, arg2,
                 arg2, arg2, arg2, arg2, arg2, arg2, arg2, arg2, execname, execname, execname,
                 (char)(65 + arg2 % 26)); }",
        said: &[(1, WHOLE)],
    },
    // trace() of integers and strings, a string from the process in a record.
    Case {
        script: "syscall::openat:entry /pid == $target/ { trace(arg2); trace(execname);
                 printf(\"\\n%s %d\\n\", copyinstr(arg1), arg3); }",
        said: &[(1, WHOLE)],
    },
    // Thread-locals from entry to return, freed by assigning zero.
    Case {
        script: "syscall::write:entry /pid == $target/ { self->n = arg2; self->c++; }
                 syscall::write:return /self->n/ { @[self->n] = sum(arg1); self->n = 0; }
                 syscall::write:return /self->c == 4/ { printf(\"fourth %d\\n\", arg1); }",
        said: &[(1, WHOLE), (2, WHOLE), (3, WHOLE)],
    },
    // Globals and associative arrays with integer and string keys.
    Case {
        script: "syscall::write:entry /pid == $target/ { x[arg2 % 4] = arg2; n++;
                 y[execname, arg2 % 2] = n; }
                 syscall::write:return /pid == $target && n % 3 == 0/ {
                 printf(\"%d %d %d %d %d\\n\", n, x[0], x[1], y[\"worker\", 0], y[\"worker\", 1]); }",
        said: &[(1, WHOLE), (2, WHOLE)],
    },
    // String variables: a thread-local copied at entry, compared and counted at return.
    Case {
        script: "syscall::openat:entry /pid == $target/ { self->p = copyinstr(arg1); }
                 syscall::openat:return /self->p != NULL/ { @[self->p, arg1] = count();
                 printf(\"%s\\n\", self->p); self->p = 0; }",
        said: &[(1, WHOLE), (2, WHOLE)],
    },
    // Clause-local variables and string subroutines.
    Case {
        script: "syscall::openat:entry /pid == $target/ { this->p = copyinstr(arg1);
                 printf(\"%s|%s|%s|%d|%s\\n\", strjoin(copyinstr(arg1), \"!\"),
                 substr(copyinstr(arg1), 3, 4), basename(copyinstr(arg1)),
                 index(copyinstr(arg1), \"a\"), dirname(copyinstr(arg1)));
                 printf(\"%d\\n\", strlen(copyinstr(arg1))); }
                 syscall::write:entry /pid == $target/ { this->x = arg2 * 2;
                 @[this->x > 300, lltostr(arg2 % 4)] = count(); }",
        said: &[],
    },
    // Faults: a division by zero and a bad address end their clause alone, with the ERROR
    // probe's arguments the same both ways; the clauses after them still run.
    Case {
        script: "syscall::write:entry /pid == $target/ { printf(\"a %d\\n\", arg2); }
                 syscall::write:entry /pid == $target/ { printf(\"b %d\\n\", arg2 / (arg2 - arg2)); }
                 syscall::write:entry /pid == $target && arg2 > 100/ { trace(*(int *)0); }
                 syscall::write:entry /pid == $target/ { printf(\"c %d\\n\", arg2); }
                 ERROR { printf(\"ERROR %d %d %d 0x%x\\n\", arg2, arg3, arg4, arg5); }",
        said: &[(1, WHOLE), (2, WHOLE), (4, WHOLE)],
    },
    // exit() at a kernel probe, between two clauses of the firing; END prints an aggregation.
    Case {
        script: "syscall::write:entry /pid == $target/ { printf(\"%d\\n\", arg2); @s = sum(arg2); }
                 syscall::write:entry /pid == $target && arg2 > 200/ { exit(0); }
                 syscall::write:entry /pid == $target/ { printf(\"after %d\\n\", arg2); }
                 END { printa(\"sum %@d\\n\", @s); }",
        said: &[],
    },
    // A speculation committed or discarded at return.
    Case {
        script: "syscall::write:entry /pid == $target/ { self->s = speculation();
                 speculate(self->s); printf(\"spec %d\\n\", arg2); }
                 syscall::write:return /self->s && arg1 > 100/ { commit(self->s); self->s = 0; }
                 syscall::write:return /self->s/ { discard(self->s); self->s = 0; }",
        said: &[(1, "speculations live in the kernel")],
    },
    // strtok() across the clauses of one firing: a path from the process tokenized on "/" and
    // "-", the tokens a key and a record.
    Case {
        script: "syscall::openat:entry /pid == $target/ { @[strtok(copyinstr(arg1), \"/\")] =
                 count(); }
                 syscall::openat:entry /pid == $target/ { printf(\"%s %s\\n\",
                 strtok(NULL, \"-\"), strtok(NULL, \"/-\")); }",
        said: &[(1, WHOLE), (2, WHOLE)],
    },
    // Aggregations printed, normalized and truncated at END.
    Case {
        script: "syscall::write:entry /pid == $target/ { @[arg2 % 3] = avg(arg2);
                 @m[arg2 % 5] = max(arg2); }
                 END { normalize(@, 2); printa(@); trunc(@m, 2); printa(@m); }",
        said: &[(1, AGGS)],
    },
];

/// Programs at `pid` probes of the [`WORKER`].
const PID_CASES: &[Case] = &[Case {
    script: "pid$target:libc.so.6:write:entry { @q = quantize(arg2); @c[probefunc] = count(); }
             pid$target:libc.so.6:write:return /arg1 > 100/ { printf(\"%s %d\\n\", probename, arg1); }",
    said: &[(1, AGGS), (2, WHOLE)],
}];

/// Programs at the USDT probes of [`USDT_PROG`], named by a provider glob (a file-wide probe
/// that serves the `-c` process too) or by `$target`.
const USDT_CASES: &[Case] = &[
    Case {
        script: "kdiff*:::step { printf(\"%s %d %d\\n\", probename, arg0, arg1); }",
        said: &[(1, WHOLE)],
    },
    Case {
        script: "kdiff*:::step { @c = count(); @s[arg0 % 2] = sum(arg1); }
                 kdiff*:::step /arg0 == 3/ { printf(\"three %d\\n\", arg1); }
                 kdiff*:::done { printf(\"done %d\\n\", arg0); }",
        said: &[(1, AGGS), (2, WHOLE), (3, WHOLE)],
    },
    Case {
        script: "kdiff$target:::step /arg0 > 1/ { @[probefunc] = sum(arg0);
                 printf(\"%d\\n\", arg1); }",
        said: &[(1, WHOLE)],
    },
];

/// Builds [`WORKER`] once per test.
fn worker(tag: &str) -> String {
    common::compile_c(&common::test_dir(tag), "worker", WORKER, &["-O1"])
        .display()
        .to_string()
}

/// Runs `prog args` in `dir`, which must succeed.
fn run_in(dir: &Path, prog: &str, args: &[&str]) {
    let o = Command::new(prog)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{prog} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Builds [`USDT_PROG`] with its provider's header and DOF (`dtrace -h`, `dtrace -G`).
fn usdt_prog(tag: &str) -> PathBuf {
    let d = common::test_dir(tag);
    std::fs::write(d.join("provider.d"), PROVIDER).unwrap();
    std::fs::write(d.join("prog.c"), USDT_PROG).unwrap();
    let dt = env!("CARGO_BIN_EXE_dtrace");
    run_in(&d, dt, &["-h", "-s", "provider.d"]);
    run_in(&d, "gcc", &["-O1", "-c", "prog.c", "-o", "prog.o"]);
    run_in(&d, dt, &["-G", "-s", "provider.d", "prog.o"]);
    run_in(&d, "gcc", &["-o", "prog", "prog.o", "provider.o"]);
    d.join("prog")
}

/// Runs every case of `cases` over `cmd` both ways; returns the outputs.
fn run_cases(cases: &[Case], extra: &[&str], cmd: &str) -> Vec<String> {
    cases
        .iter()
        .map(|c| same_with_kernel_paths_off(c.script, extra, cmd, c.said))
        .collect()
}

#[test]
fn syscall_clauses_print_the_same_with_kernel_paths_on_and_off() {
    let t = "syscall_clauses_print_the_same_with_kernel_paths_on_and_off";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = format!("{} 12", worker("kdiff-syscall"));
    let outs = run_cases(SYSCALL_CASES, &[], &cmd);
    // A few facts of the output, so that both ways being equally wrong shows too: 12 writes of
    // 1542 bytes in all, one of them of a size that is a multiple of 26, four opens of the
    // second path, every write faulting (seven of them twice) with the clause after still run.
    assert!(
        outs[0].contains("\n               12\n") && outs[0].contains("\n             1542\n"),
        "{}",
        outs[0]
    );
    let a_line = |l: &&str| l.ends_with("|worker|worker  |wo|A");
    assert_eq!(outs[3].lines().filter(a_line).count(), 1, "{}", outs[3]);
    assert_eq!(
        outs[7].matches("/nonexistent/kdiff-bb\n").count(),
        4,
        "{}",
        outs[7]
    );
    assert_eq!(outs[9].matches("ERROR ").count(), 12 + 7, "{}", outs[9]);
    let c_lines = outs[9].lines().filter(|l| l.starts_with("c ")).count();
    assert_eq!(c_lines, 12, "{}", outs[9]);
}

#[test]
fn pid_clauses_print_the_same_with_kernel_paths_on_and_off() {
    let t = "pid_clauses_print_the_same_with_kernel_paths_on_and_off";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = format!("{} 12", worker("kdiff-pid"));
    let outs = run_cases(PID_CASES, &[], &cmd);
    assert!(outs[0].contains("write"), "{}", outs[0]);
}

#[test]
fn usdt_clauses_of_the_traced_process_print_the_same_with_kernel_paths_on_and_off() {
    let t = "usdt_clauses_of_the_traced_process_print_the_same_with_kernel_paths_on_and_off";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = format!("{} 6", usdt_prog("kdiff-usdt").display());
    let outs = run_cases(USDT_CASES, &["-Z"], &cmd);
    // Every firing of the process, its first (which tells dtrace of it) and those after.
    for i in 0..6 {
        let line = format!("step {i} {}\n", i * -10);
        assert_eq!(outs[0].matches(&line).count(), 1, "{line}: {}", outs[0]);
    }
    assert!(
        outs[1].contains("three -30\n") && outs[1].contains("done 6\n"),
        "{}",
        outs[1]
    );
    assert!(
        outs[1].contains("\n                6\n"),
        "count: {}",
        outs[1]
    );
}
