//! Records built at the probe: a clause whose actions are `trace()` and `printf()` of integers,
//! string constants and `execname` writes the framework's record in the kernel, which dtrace
//! commits to the CPU's buffer unchanged, so it prints exactly what the interpreter prints with
//! DTRACE_KERNEL_RECORDS=0; the entry/return idiom with a printf runs whole in the kernel; a
//! clause sharing a probe with one that runs in dtrace builds its records there too (records keep
//! the clauses' order); `exit()` at the probe stops every kernel clause at that firing; a full
//! ring counts drops as DTrace reports them, and what it loses after `exit()` (firings DTrace, draining,
//! never makes) is no drop; symbol records (`usym()`, `uaddr()`, `sym()`...) hold what the
//! interpreter's hold, their user addresses resolved with the mappings noted at commit; `-v`
//! says where.

mod common;
use common::{clause_lines, dtrace, have_gcc, kernel_ok};

const SWITCH: &str = "DTRACE_KERNEL_RECORDS";

/// Runs `script` both ways; asserts both succeed and print the same non-empty output, and that
/// each `-v` line in `said` (clause number, text) is there the first way. Returns the output.
fn same_both_ways(script: &str, extra: &[&str], cmd: &str, said: &[(usize, &str)]) -> String {
    let in_kernel = |err: &str| {
        said.iter()
            .all(|&(n, text)| clause_lines(err, n).iter().any(|l| l.contains(text)))
    };
    common::same_both_ways(SWITCH, script, extra, cmd, &in_kernel)
}

#[test]
fn the_entry_return_idiom_with_a_printf_runs_whole_in_the_kernel() {
    let t = "the_entry_return_idiom_with_a_printf_runs_whole_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("krec-idiom");
    let cmd = format!("{} 500", w.display());
    // Times differ run to run; that they are positive, the sizes and results do not.
    let idiom = "syscall::write:entry /pid == $target/ { self->ts = timestamp; \
        self->size = arg2; } \
        syscall::write:return /self->ts/ { printf(\"%d %d %d\\n\", self->size, arg0, \
        timestamp - self->ts > 0); self->ts = 0; self->size = 0; }";
    let whole = "runs whole in the kernel at 1 probe (variables self->ts, self->size live in \
                 the kernel)";
    let out = same_both_ways(idiom, &[], &cmd, &[(1, whole), (2, whole)]);
    let rows: Vec<Vec<i64>> = out
        .lines()
        .map(|l| {
            l.split(' ')
                .map_while(|w| w.parse().ok())
                .collect::<Vec<i64>>()
        })
        .filter(|r| r.len() == 3)
        .collect();
    assert!(rows.len() >= 500, "{out}");
    assert!(rows.contains(&vec![296, 296, 1]), "{out}");
    assert!(rows.iter().all(|r| r[2] == 1), "{out}");
}

#[test]
fn trace_and_printf_print_the_same_both_ways() {
    let t = "trace_and_printf_print_the_same_both_ways";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("krec-formats");
    let cmd = format!("{} 200", w.display());
    let at = "runs whole in the kernel at 1 probe (records built at the probe)";
    // Integers of every size and sign, constants, execname and the probe's names.
    let script = "syscall::write:entry /pid == $target/ { trace(arg2); trace(\" \"); \
        trace((char)(arg2 % 26 + 65)); trace((short)-arg2); \
        printf(\"|%d|%5u|%-4x|%c|%s|%s|%s:%s|%d|%lld\\n\", (int)arg2, (uint16_t)arg2, \
        arg2 * 3, (char)(arg2 % 26 + 97), \"const\", execname, probefunc, probename, \
        (int8_t)arg2, (long long)arg2 - 150); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, at)]);
    assert!(
        out.contains("|296|  296|378 |k|const|writer|write:entry|40|146\n"),
        "{out}"
    );
    // Strings as strsize lays them out: cut to its characters.
    let short = "syscall::read:entry /pid == $target/ { printf(\"%s|%s|\\n\", \"abcdefghijkl\", \
        execname); trace(\"0123456789\"); trace(arg2); }";
    let out = same_both_ways(short, &["-x", "strsize=5"], &cmd, &[(1, at)]);
    assert!(out.contains("\nabcde|write|\n01234"), "{out}");
    // Without -q: the CPU, id and probe columns of the default output.
    let plain = "syscall::read:entry /pid == $target/ { trace(arg2); }";
    let (krc, kout, kerr) = dtrace(&["-n", plain, "-c", &cmd]);
    let (irc, iout, _) = common::dtrace_way(SWITCH, false, &["-n", plain, "-c", &cmd]);
    assert_eq!((krc, irc), (0, 0), "{kerr}");
    let columns = |s: &str| -> Vec<String> {
        s.lines()
            .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
            .collect()
    };
    assert_eq!(columns(&kout), columns(&iout));
    assert!(kout.contains("read:entry"), "{kout}");
}

#[test]
fn records_keep_the_clauses_order_at_a_shared_probe() {
    let t = "records_keep_the_clauses_order_at_a_shared_probe";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("krec-order");
    let cmd = format!("{} 50", w.display());
    // Clause 1 prints what only dtrace computes: clause 2, at the same probe, prints there too,
    // after it; clause 3, alone at its probe, builds its records in the kernel.
    let script =
        "syscall::write:entry /pid == $target/ { printf(\"A %s\\n\", json(lltostr(arg2), \"\")); } \
        syscall::write:entry /pid == $target/ { printf(\"B %d\\n\", arg2); } \
        syscall::read:entry /pid == $target/ { printf(\"C %d\\n\", arg2); }";
    let out = same_both_ways(
        script,
        &[],
        &cmd,
        &[
            (
                2,
                "records are built in dtrace (at syscall:vmlinux:write:entry: it records, \
                 and another clause at the probe runs in dtrace (records keep the clauses' \
                 order))",
            ),
            (
                3,
                "runs whole in the kernel at 1 probe (records built at the probe)",
            ),
        ],
    );
    assert!(out.contains("A 296\nB 296\n"), "{out}");
    // A variable such a clause uses stays in dtrace with it, and says why.
    let shared = "syscall::write:entry /pid == $target/ { self->n = arg2; \
        printf(\"A %s\\n\", json(lltostr(arg2), \"\")); } \
        syscall::write:entry /self->n/ { printf(\"B %d\\n\", self->n); }";
    let (rc, out, err) = dtrace(&["-qv", "-n", shared, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("A 296\nB 296\n"), "{out}");
    assert!(
        clause_lines(&err, 2)
            .iter()
            .any(|l| l.contains("variables stay in dtrace")),
        "{err}"
    );
}

#[test]
fn a_full_ring_counts_drops_as_dtrace_reports_them() {
    let t = "a_full_ring_counts_drops_as_dtrace_reports_them";
    if !kernel_ok(t) {
        return;
    }
    // A 4k buffer per CPU (a ring of a page or two) cannot hold a burst of 100000 records: what
    // is lost is reported as drops on its CPU, and what printed plus what dropped is every write.
    let n = 100_000u64;
    let cmd = format!("dd if=/dev/zero of=/dev/null bs=1 count={n} status=none");
    let script = "syscall::write:entry /pid == $target/ { printf(\"%d\\n\", arg2); }";
    let (rc, out, err) = dtrace(&["-qv", "-b", "4k", "-n", script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        clause_lines(&err, 1)
            .iter()
            .any(|l| l.contains("records built at the probe")),
        "{err}"
    );
    let printed = out.lines().filter(|l| *l == "1").count() as u64;
    let mut dropped = 0;
    for l in err.lines().filter(|l| l.contains("drop")) {
        let words: Vec<&str> = l.split(' ').collect();
        assert_eq!(words.len(), 6, "{l}");
        assert_eq!(&words[3..5], ["on", "CPU"], "{l}");
        dropped += words[1].parse::<u64>().unwrap_or(0);
    }
    assert!(dropped > 0, "no drops reported: {err}");
    assert_eq!(printed + dropped, n, "{err}");
}

#[test]
fn exit_at_the_probe_stops_at_that_firing() {
    let t = "exit_at_the_probe_stops_at_that_firing";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("krec-exit");
    let cmd = format!("{} 300", w.display());
    // The third write is of 74 bytes: it is counted and printed, and nothing after it, not even
    // the clause after exit() in that firing, nor the reads that follow the writes (the loader's
    // read of the C library comes before the command is traced, at its entry point: `@reads`
    // stays empty).
    let script =
        "syscall::write:entry /pid == $target/ { @ = count(); printf(\"w %d\\n\", arg2); } \
        syscall::write:entry /pid == $target && arg2 == 74/ { printf(\"bye\\n\"); exit(0); } \
        syscall::write:entry /pid == $target/ { printf(\"after %d\\n\", arg2); } \
        syscall::read:entry /pid == $target/ { @reads = count(); }";
    let at = "runs whole in the kernel at 1 probe (records built at the probe)";
    let out = same_both_ways(script, &[], &cmd, &[(1, at), (2, at), (3, at)]);
    assert!(
        out.ends_with("w 0\nafter 0\nw 37\nafter 37\nw 74\nbye\n\n                3\n"),
        "{out:?}"
    );
}

#[test]
fn the_consumers_actions_are_recorded_at_the_probe() {
    let t = "the_consumers_actions_are_recorded_at_the_probe";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("krec-libact");
    let cmd = format!("{} 6", w.display());
    // clear(), normalize(), denormalize(), trunc() and setopt() record values (an aggregation's
    // id, a factor, an option's name) the consumer acts on: built at the probe, with an exit() in
    // the same clause, they leave the aggregating clause in the kernel too. (What trunc() and
    // clear() find depends on when the kernel's counts were last drained, in DTrace too: the
    // aggregations they act on here are BEGIN's, complete before.)
    let script = "BEGIN { @t[1] = count(); @t[2] = count(); @t[2] = count(); @c = count(); } \
        syscall::write:entry /pid == $target/ { @s = sum(arg2); @n = sum(arg2); } \
        syscall::write:entry /pid == $target && arg2 == 74/ { normalize(@s, 3); \
        normalize(@n, 2); denormalize(@n); trunc(@t, 1); clear(@c); setopt(\"aggsortrev\"); \
        exit(0); }";
    let out = same_both_ways(
        script,
        &[],
        &cmd,
        &[
            (1, "aggregations run in the kernel at 1 probe"),
            (
                2,
                "runs whole in the kernel at 1 probe (records built at the probe)",
            ),
        ],
    );
    // @s and @n as normalized and denormalized, @c cleared, @t cut to its largest, in the
    // reverse of the usual order.
    assert!(
        out.ends_with("\n              111\n               37\n                0\n        2                2\n"),
        "{out:?}"
    );
}

#[test]
fn system_and_freopen_are_recorded_at_the_probe() {
    let t = "system_and_freopen_are_recorded_at_the_probe";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("krec-system");
    let cmd = format!("{} 3", w.display());
    let file = common::test_dir("krec-system-out").join("freopened");
    // system()'s and freopen()'s records hold their arguments, as printf()'s: built at the probe,
    // dtrace runs the command and switches the output when it reads them.
    let script = format!(
        "syscall::write:entry /pid == $target/ {{ system(\"echo sys %d %s\", arg2, execname); \
         freopen(\"{}\"); printf(\"w %d\\n\", arg2); freopen(\"\"); }}",
        file.display()
    );
    let mut written = Vec::new();
    for kernel in [true, false] {
        let _ = std::fs::remove_file(&file);
        let args = ["-qwv", "-n", &script, "-c", &cmd];
        let (rc, out, err) = common::dtrace_way(SWITCH, kernel, &args);
        assert_eq!(rc, 0, "{err}");
        assert_eq!(
            clause_lines(&err, 1)
                .iter()
                .any(|l| l.contains("runs whole in the kernel at 1 probe")),
            kernel,
            "{err}"
        );
        // (After -v's stability report.)
        assert!(
            out.ends_with("\n\nsys 0 writer\nsys 37 writer\nsys 74 writer\n\n"),
            "{out:?}"
        );
        written.push(std::fs::read_to_string(&file).unwrap_or_default());
    }
    assert_eq!(written[0], "w 0\nw 37\nw 74\n");
    assert_eq!(written[0], written[1]);
}

#[test]
fn stack_is_recorded_at_the_probe() {
    let t = "stack_is_recorded_at_the_probe";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("krec-stack");
    let cmd = format!("{} 3", w.display());
    // The kernel takes the frames wanted and the tracing machinery's past the record; dtrace
    // cuts the machinery's as it cuts a captured stack's: the same frames both ways.
    let script = "syscall::write:entry /pid == $target/ { printf(\"w %d\\n\", arg2); stack(); \
        stack(2); trace(arg2); }";
    let at = "runs whole in the kernel at 1 probe (records built at the probe)";
    let out = same_both_ways(script, &[], &cmd, &[(1, at)]);
    assert!(out.contains("w 37\n\n"), "{out}");
    let frames: Vec<&str> = out
        .lines()
        .map(str::trim)
        .filter(|l| l.contains('`'))
        .collect();
    // Each write: the whole stack, then its first two frames, from the system call's entry.
    assert!(frames.len() >= 3 * 3, "{out}");
    assert!(frames.iter().all(|f| f.starts_with("vmlinux`")), "{out}");
    assert!(!frames.iter().any(|f| f.contains("bpf")), "{out}");
}

#[test]
fn exit_in_a_timer_clause_leaves_kernel_clauses_alone() {
    if !kernel_ok("exit_in_a_timer_clause_leaves_kernel_clauses_alone") {
        return;
    }
    // tick-N fires in dtrace: its exit() (and the global it reads) stay there, and the
    // enabling does not ask the kernel to run it.
    let script = "BEGIN { i = 0; } tick-10ms /i < 10/ { i++; trace(i); } \
        tick-10ms /i == 10/ { exit(0); }";
    let (rc, out, err) = dtrace(&["-qn", script]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out.trim(), "12345678910");
}

#[test]
fn what_the_ring_loses_after_exit_is_no_drop() {
    let t = "what_the_ring_loses_after_exit_is_no_drop";
    if !kernel_ok(t) {
        return;
    }
    // The first write exits; dd's million more 1-byte writes then flood the ring, which dtrace no
    // longer empties (clauses run in dtrace here) until it has ended. DTrace drains after exit():
    // those firings never happen there, so no drop is reported, only the first write's line.
    let cmd = "dd if=/dev/zero of=/dev/null bs=1 count=1000000 status=none";
    let script = "syscall::write:entry /pid == $target/ { printf(\"%d\\n\", arg2); exit(0); }";
    let (rc, out, err) =
        common::dtrace_with_env(&[(SWITCH, "0")], &["-q", "-n", script, "-c", cmd]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out.trim(), "1", "{err}");
    assert!(!err.contains("drop"), "{err}");
}

/// Calls `call` with a function pointer, three times.
const CALLER: &str = r#"
__attribute__((noinline)) void target(int i) { __asm__ volatile("" ::"r"(i)); }
__attribute__((noinline)) void call(void (*f)(int), int i) { f(i); }
int main(void) {
    for (int i = 0; i < 3; i++)
        call(target, i);
    return 0;
}
"#;

#[test]
fn symbols_are_recorded_at_the_probe() {
    let t = "symbols_are_recorded_at_the_probe";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let exe = common::traced_program("krec-syms", "caller", CALLER);
    // The user symbol records hold the process's id and the address, resolved by dtrace with
    // the process's mappings, noted when the record is committed.
    let script = "pid$target::call:entry { usym(arg0); umod(arg0); uaddr(arg0); \
        printf(\"\\n%A %d\\n\", arg0, arg1); sym(arg1); mod(arg1); }";
    let at = "runs whole in the kernel at 1 probe (records built at the probe)";
    let out = same_both_ways(script, &[], &exe, &[(1, at)]);
    // usym(), uaddr() and %A of each call's function pointer.
    assert_eq!(out.matches("caller`target").count(), 9, "{out}");
    for i in 0..3 {
        assert!(out.contains(&format!("caller`target {i}\n")), "{out}");
    }
}
