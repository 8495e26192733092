//! Clauses that run whole at the probe for reasons small but common (issue 13): `walltimestamp`
//! and `vtimestamp` read there, stack keys of `-x stackframes` frames, clauses whose provider is
//! a glob or empty, strings cut at `-x strsize` as the interpreter cuts them, and `this->`
//! variables in long key lists, expression statements. Each script prints the same with the kernel path on and off
//! (root, BPF, tracefs; gcc for the traced program; skipped otherwise).

mod common;
use common::{clause_lines, have_gcc, kernel_ok};

/// Runs `script` on `cmd` with `switch` on and off (`extra` arguments both ways); asserts both
/// succeed and print the same non-empty output, and that each clause numbered in `whole` ran
/// whole in the kernel (for its variables or its aggregations). Returns the output and the
/// first run's stderr.
fn same_both_ways(
    switch: &str,
    script: &str,
    extra: &[&str],
    cmd: &str,
    whole: &[usize],
) -> (String, String) {
    let mut args = vec!["-qv"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-n", script, "-c", cmd]);
    let (rc, kout, kerr) = common::dtrace_way(switch, true, &args);
    assert_eq!(rc, 0, "{script}: {kerr}");
    for &n in whole {
        assert!(
            clause_lines(&kerr, n)
                .iter()
                .any(|l| l.contains("runs whole in the kernel")
                    || l.ends_with("aggregations run in the kernel at 1 probe")),
            "clause {n} of {script}: {kerr}"
        );
    }
    assert!(!kerr.contains("drop"), "{script}: {kerr}");
    let (rc, iout, ierr) = common::dtrace_way(switch, false, &args);
    assert_eq!(rc, 0, "{script}: {ierr}");
    assert!(ierr.contains(&format!("off ({switch}=0)")), "{ierr}");
    assert_eq!(kout, iout, "{script}");
    assert!(!kout.trim().is_empty(), "{script}");
    (kout, kerr)
}

/// The numbers of the lines of `out` that are one integer each, in order.
fn numbers(out: &str) -> Vec<i64> {
    out.lines()
        .filter_map(|l| l.trim().parse::<i64>().ok())
        .collect()
}

#[test]
fn walltimestamp_and_vtimestamp_are_read_at_the_probe() {
    let t = "walltimestamp_and_vtimestamp_are_read_at_the_probe";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kmisc-clocks");
    let cmd = format!("{} 500", w.display());
    // The entry/return idiom on both clocks. walltimestamp is the firing's timestamp plus one
    // offset both ways, so the two clocks' deltas agree exactly; vtimestamp is never 0 for a
    // thread that ran and never goes backwards (a floor per thread in the kernel as in dtrace).
    let script = "syscall::read:entry /pid == $target/ { self->v = vtimestamp; \
        self->w = walltimestamp; self->t = timestamp; } \
        syscall::read:return /self->v/ { @q = quantize(vtimestamp - self->v); @n = count(); \
        @off = sum((walltimestamp - self->w) != (timestamp - self->t)); \
        @zero = sum(vtimestamp == 0); @back = sum(vtimestamp < self->v); self->v = 0; \
        self->w = 0; self->t = 0; } \
        END { printa(\"%@d\\n\", @n); printa(\"%@d\\n\", @off); printa(\"%@d\\n\", @zero); \
        printa(\"%@d\\n\", @back); }";
    let args = ["-qv", "-n", script, "-c", &cmd];
    let mut outs = Vec::new();
    for kernel in [true, false] {
        let (rc, out, err) = common::dtrace_way("DTRACE_KERNEL_VARIABLES", kernel, &args);
        assert_eq!(rc, 0, "{err}");
        if kernel {
            for n in [1, 2] {
                assert!(
                    clause_lines(&err, n)
                        .iter()
                        .any(|l| l.contains("runs whole in the kernel at 1 probe")),
                    "{err}"
                );
            }
        }
        // The last four numbers: the count (the loader's reads too), no delta apart, no zero,
        // no thread's vtimestamp going backwards.
        let n = numbers(&out);
        assert!(n.len() >= 4, "{out}");
        let tail = &n[n.len() - 4..];
        assert!((500..600).contains(&tail[0]), "{out}");
        assert_eq!(&tail[1..], &[0, 0, 0], "{out}");
        assert!(out.contains("value  ------------- Distribution"), "{out}");
        outs.push(tail.to_vec());
    }
    assert_eq!(outs[0], outs[1]);
    // Aggregations of the clocks alone, in the kernel: walltimestamp less timestamp is one
    // offset for every firing, and walltimestamp is the wall clock's.
    let script = "syscall::write:entry /pid == $target/ { @lo = min(walltimestamp - timestamp); \
        @hi = max(walltimestamp - timestamp); @w = max(walltimestamp); @v = min(vtimestamp); } \
        END { printa(\"%@d\\n\", @lo); printa(\"%@d\\n\", @hi); printa(\"%@d\\n\", @w); \
        printa(\"%@d\\n\", @v); }";
    for kernel in [true, false] {
        let args = ["-qv", "-n", script, "-c", &cmd];
        let (rc, out, err) = common::dtrace_way("DTRACE_KERNEL_AGGREGATIONS", kernel, &args);
        assert_eq!(rc, 0, "{err}");
        if kernel {
            assert!(
                clause_lines(&err, 1)
                    .iter()
                    .any(|l| l.ends_with("aggregations run in the kernel at 1 probe")),
                "{err}"
            );
        }
        let n = numbers(&out);
        assert!(n.len() >= 4, "{out}");
        let tail = &n[n.len() - 4..];
        assert_eq!(tail[0], tail[1], "{out}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        assert!((tail[2] / 1_000_000_000 - now).abs() < 3600, "{out}");
        assert!(tail[3] > 0, "{out}");
    }
}

#[test]
fn stack_keys_in_the_kernel_take_stackframes_frames() {
    let t = "stack_keys_in_the_kernel_take_stackframes_frames";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kmisc-stackframes");
    let cmd = format!("{} 50", w.display());
    let script = "syscall::write:entry /pid == $target/ { @[stack()] = count(); }";
    for frames in ["2", "3"] {
        let opt = format!("stackframes={frames}");
        let (out, _) = same_both_ways(
            "DTRACE_KERNEL_AGGREGATIONS",
            script,
            &["-x", &opt],
            &cmd,
            &[1],
        );
        let shown = out.lines().filter(|l| l.contains('`')).count();
        assert!(shown >= 1 && shown <= frames.parse().unwrap(), "{out}");
        assert!(out.contains("vmlinux`"), "{out}");
        if frames == "2" {
            assert_eq!(shown, 2, "{out}");
        }
    }
}

#[test]
fn glob_and_empty_providers_keep_variables_in_the_kernel() {
    let t = "glob_and_empty_providers_keep_variables_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kmisc-globs");
    let cmd = format!("{} 300", w.display());
    let script = "sysc*::write:entry /pid == $target/ { self->n++; self->size = arg2; } \
        ::write:return /self->size/ { @[self->n % 3] = count(); @s = sum(self->size); \
        self->size = 0; } \
        syscall::read*:entry /pid == $target/ { @r[probefunc] = count(); self->r++; } \
        syscall::read:return /self->r == 300/ { @last = count(); }";
    let (out, err) = same_both_ways("DTRACE_KERNEL_VARIABLES", script, &[], &cmd, &[1, 2, 3, 4]);
    assert!(
        clause_lines(&err, 1)
            .iter()
            .any(|l| l.ends_with("(variables self->n, self->size live in the kernel)")),
        "{err}"
    );
    assert!(out.contains("read "), "{out}");
}

#[test]
fn strsize_cuts_strings_in_the_kernel_as_in_dtrace() {
    let t = "strsize_cuts_strings_in_the_kernel_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    // `writer` (cut to 4 characters) and a copy named with exactly 4.
    let w = common::sized_writer("kmisc-strsize");
    let four = w.with_file_name("wrtr");
    std::fs::copy(&w, &four).unwrap();
    let script = "syscall::write:entry /pid == $target && execname == \"wrtr\"/ { @a = count(); } \
        syscall::write:entry /pid == $target && execname == \"writ\"/ { @b = count(); } \
        syscall::write:entry /pid == $target && execname == \"writer\"/ { @c = count(); } \
        syscall::write:entry /pid == $target && probeprov == \"sysc\"/ { @d = count(); } \
        syscall::write:entry /pid == $target && probeprov == \"syscall\"/ { @e = count(); } \
        syscall::write:entry /pid == $target && probefunc == \"writ\"/ { @f = count(); } \
        syscall::write:entry /pid == $target/ { @k[execname, probeprov, probefunc] = count(); } \
        END { printa(\"a %@d\\n\", @a); printa(\"b %@d\\n\", @b); printa(\"c %@d\\n\", @c); \
        printa(\"d %@d\\n\", @d); printa(\"e %@d\\n\", @e); printa(\"f %@d\\n\", @f); }";
    for (exe, want) in [(&four, "a 40\nd 40\nf 40\n"), (&w, "b 40\nd 40\nf 40\n")] {
        let cmd = format!("{} 40", exe.display());
        let (out, _) = same_both_ways(
            "DTRACE_KERNEL_PREDICATES",
            script,
            &["-x", "strsize=4"],
            &cmd,
            &[1, 2, 3, 4, 5, 6, 7],
        );
        assert!(out.contains(want), "{out}");
        let name = if exe == &four { "wrtr" } else { "writ" };
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == [name, "sysc", "writ", "40"]),
            "{out}"
        );
    }
}

#[test]
fn keys_reloaded_from_spill_slots_run_in_the_kernel() {
    let t = "keys_reloaded_from_spill_slots_run_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kmisc-spills");
    let cmd = format!("{} 300", w.display());
    // A key deep enough that the compiler spills registers to hidden clause-locals and pushes
    // the reloaded values through one register.
    let deep = "arg0 + (arg1 * (arg2 + (arg0 * (arg2 + (arg1 * (arg0 + (arg1 * (arg2 + \
        (arg0 * 2)))))))))";
    let script = format!(
        "syscall::write:entry /pid == $target/ {{ self->k[arg0, arg2 % 7, {deep}] = arg2; \
         @[self->k[arg0, arg2 % 7, {deep}]] = count(); self->k[arg0, arg2 % 7, {deep}] = 0; }}"
    );
    let (out, err) = same_both_ways("DTRACE_KERNEL_VARIABLES", &script, &[], &cmd, &[1]);
    assert!(
        clause_lines(&err, 1)
            .iter()
            .any(|l| l.ends_with("(variables self->k live in the kernel)")),
        "{err}"
    );
    // Sizes (i * 37) % 300 of 300 writes: 0 and 296 among them, each as often as it comes.
    let rows: Vec<Vec<i64>> = out
        .lines()
        .map(|l| {
            l.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .filter(|r: &Vec<i64>| r.len() == 2)
        .collect();
    assert_eq!(rows.iter().map(|r| r[1]).sum::<i64>(), 300, "{out}");
    assert!(rows.iter().any(|r| r[0] == 296), "{out}");
    // Eight this-> variables as one key: more values than free registers, pushed through the
    // same ones.
    let keys = "this->a, this->b, this->c, this->d, this->e, this->f, this->g, this->h";
    let script = format!(
        "syscall::write:entry /pid == $target/ {{ this->a = arg0; this->b = arg2;          this->c = arg2 % 3; this->d = arg2 % 5; this->e = arg2 % 7; this->f = arg2 % 11;          this->g = arg2 % 13; this->h = arg2 % 17; self->k[{keys}] = arg2 + 1;          @[self->k[{keys}]] = count(); self->k[{keys}] = 0; }}"
    );
    let (out, err) = same_both_ways("DTRACE_KERNEL_VARIABLES", &script, &[], &cmd, &[1]);
    assert!(
        clause_lines(&err, 1)
            .iter()
            .any(|l| l.contains("this->h, self->k live in the kernel)")),
        "{err}"
    );
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().next() == Some("297")),
        "{out}"
    );
}

#[test]
fn an_exit_that_reads_a_variable_kept_in_dtrace_keeps_every_clause_there() {
    // Oracle's speculation/tst.SingleCPU.d with the kernel's variables off: the exit() clause
    // reads a global that stays in dtrace, so it cannot stop the kernel's clauses itself; every
    // clause then runs in dtrace (the speculations too), and prints what the kernel prints.
    let t = "an_exit_that_reads_a_variable_kept_in_dtrace_keeps_every_clause_there";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kmisc-exit-vars");
    let cmd = format!("{} 300", w.display());
    let on = "syscall::write:entry /pid == $target";
    let script = format!(
        "BEGIN {{ n = 0; }} \
        {on} && (n & 3) == 0/ {{ i = speculation(); }} \
        {on} && (n & 3) == 1/ {{ speculate(i); printf(\"%4d\", n); }} \
        {on} && (n & 3) == 2/ {{ speculate(i); printf(\"%4d hello\\n\", n); }} \
        {on} && (n & 7) == 3/ {{ commit(i); }} \
        {on} && (n & 7) == 7/ {{ discard(i); }} \
        {on}/ {{ n++; }} \
        {on} && n == 40/ {{ exit(0); }}"
    );
    let (out, _) = same_both_ways(
        "DTRACE_KERNEL_VARIABLES",
        &script,
        &[],
        &cmd,
        &[1, 2, 3, 4, 5, 6, 7],
    );
    // (-v's stability report comes first.)
    let got: Vec<&str> = out.lines().filter(|l| l.contains("hello")).collect();
    let want: Vec<String> = (0..5)
        .map(|k| format!("{:4}{:4} hello", 8 * k + 1, 8 * k + 2))
        .collect();
    assert_eq!(got, want, "{out}");
}

#[test]
fn an_expression_statement_runs_at_the_probe_with_exit() {
    let t = "an_expression_statement_runs_at_the_probe_with_exit";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kmisc-exprstmt");
    let cmd = format!("{} 3", w.display());
    // A statement that only evaluates (no variable, no record) next to exit(): the clause runs
    // whole at the probe (it once failed to enable: its store action kept it from the probe's
    // kernel clauses, which its exit() needs it among).
    let script = "syscall::write:entry /pid == $target/ { \
        ((uint8_t *)copyin(arg1, 4))[0]; printf(\"%d\\n\", arg2); exit(0); }";
    let (out, _) = same_both_ways("DTRACE_KERNEL_RECORDS", script, &[], &cmd, &[1]);
    assert_eq!(numbers(&out).len(), 1, "{out}");
}
