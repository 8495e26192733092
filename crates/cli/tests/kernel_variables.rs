//! Thread-local variables in the kernel: integer `self->` variables that only clauses running
//! whole at the probe use live in a kernel map, so the classic entry/return idiom records
//! nothing per event, and prints what it prints when the variables live in dtrace
//! (DTRACE_KERNEL_VARIABLES=0); a variable a clause kept in dtrace uses keeps all its clauses
//! there; zero frees; a full map counts dynamic variable drops; `-v` says where each clause runs.

mod common;
use common::{clause_lines, have_gcc, kernel_ok};

/// Runs `dtrace args` with thread-locals in the kernel where they can be (`true`), or in dtrace.
fn dtrace_way(kernel: bool, args: &[&str]) -> (i32, String, String) {
    common::dtrace_way("DTRACE_KERNEL_VARIABLES", kernel, args)
}

/// Runs `script` both ways; asserts both succeed and print the same non-empty output, and that
/// the clauses numbered in `whole` ran whole in the kernel the first way. Returns the output.
fn same_both_ways(script: &str, extra: &[&str], cmd: &str, whole: &[usize]) -> String {
    let in_kernel = |err: &str| {
        whole.iter().all(|&n| {
            clause_lines(err, n)
                .iter()
                .any(|l| l.contains("runs whole in the kernel at 1 probe (variables"))
        })
    };
    common::same_both_ways("DTRACE_KERNEL_VARIABLES", script, extra, cmd, &in_kernel)
}

#[test]
fn the_entry_return_idiom_runs_whole_in_the_kernel() {
    let t = "the_entry_return_idiom_runs_whole_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kvars-idiom");
    let cmd = format!("{} 2000", w.display());
    // The classic: latency of read(2). Times differ run to run; the counts do not.
    let idiom = "syscall::read:entry /pid == $target/ { self->ts = timestamp; } \
        syscall::read:return /self->ts/ { @[execname] = quantize(timestamp - self->ts); \
        @n = count(); @neg = min(timestamp - self->ts); self->ts = 0; } \
        END { printa(\"%@d\\n\", @n); printa(\"%@d\\n\", @neg); }";
    for kernel in [true, false] {
        let (rc, out, err) = dtrace_way(kernel, &["-qv", "-n", idiom, "-c", &cmd]);
        assert_eq!(rc, 0, "{err}");
        if kernel {
            for n in [1, 2] {
                assert!(
                    clause_lines(&err, n).iter().any(|l| l.ends_with(
                        "runs whole in the kernel at 1 probe (variables self->ts live in \
                         the kernel)"
                    )),
                    "{err}"
                );
            }
        }
        // The reads of the program, its loader's included, each counted once; the latency of
        // none negative (timestamp is one clock for both probes).
        let mut nums = out.lines().filter_map(|l| l.trim().parse::<i64>().ok());
        let (count, min) = (nums.next().unwrap_or(0), nums.next().unwrap_or(-1));
        assert!((2000..2100).contains(&count), "{out}");
        assert!(min > 0, "{out}");
        assert!(out.contains("writer"), "{out}");
    }
    // Values that do not depend on time print the same both ways: sizes kept from entry to
    // return, a counter that is never freed, a predicate reading a thread-local.
    let sizes = "self int n; syscall::write:entry /pid == $target/ { self->size = arg2; \
        self->n = self->n + 1; } \
        syscall::write:return /self->size/ { @s[execname] = sum(self->size); \
        @q = quantize(self->size); @c[self->n % 3] = count(); self->size = 0; } \
        syscall::write:return /self->n == 1000/ { @at = max(self->n); }";
    same_both_ways(sizes, &[], &cmd, &[1, 2, 3]);
}

#[test]
fn a_thread_local_used_in_dtrace_keeps_all_its_clauses_there() {
    let t = "a_thread_local_used_in_dtrace_keeps_all_its_clauses_there";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kvars-mixed");
    let cmd = format!("{} 300", w.display());
    // Clause 3 prints what only dtrace computes (json()): it runs in dtrace, so self->size
    // lives there, and clauses 1, 2 and 4 with it; self->k, used by clause 5 only, still lives
    // in the kernel.
    let script = "syscall::write:entry /pid == $target/ { self->size = arg2; } \
        syscall::write:return /self->size/ { @s = sum(self->size); } \
        syscall::write:return /self->size == 296/ { printf(\"big %d\\n\", \
        strtoll(json(lltostr(self->size), \"\"))); } \
        syscall::write:return { self->size = 0; } \
        syscall::read:entry /pid == $target/ { self->k = 1; @r = count(); self->k = 0; }";
    let out = same_both_ways(script, &[], &cmd, &[5]);
    assert!(out.contains("big 296"), "{out}");
    let (_, _, err) = dtrace_way(true, &["-qv", "-n", script, "-c", &cmd]);
    for n in [1, 2, 4] {
        assert!(
            clause_lines(&err, n).iter().any(|l| l.contains(
                "variables stay in dtrace (clause syscall::write:return runs in dtrace: at \
                 syscall:vmlinux:write:return: instruction 8: subroutine json() not yet \
                 translated to eBPF)"
            ) || l.contains("which stays in dtrace)")),
            "clause {n}: {err}"
        );
    }
    // A thread-local a BEGIN clause uses (dtrace's own thread's) is not kept in the kernel.
    let script = "BEGIN { self->n = 1; } syscall::write:entry /pid == $target/ { self->n = 2; }";
    let (rc, _, err) = dtrace_way(true, &["-qv", "-n", script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        clause_lines(&err, 1)
            .iter()
            .any(|l| l.contains("variables stay in dtrace")
                && l.contains("its probes fire in dtrace")),
        "{script}: {err}"
    );
}

#[test]
fn zero_frees_and_a_full_map_counts_dynamic_variable_drops() {
    let t = "zero_frees_and_a_full_map_counts_dynamic_variable_drops";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kvars-drops");
    let cmd = format!("{} 200", w.display());
    // dynvarsize fits one int thread-local: each variable costs the program's largest tuple (none
    // here) and its largest variable (an int), in the framework's space as in the kernel's map.
    let small = ["-q", "-x", "dynvarsize=4"];
    // Freed at return, the entry is there for the next variable: no drop.
    let frees = "syscall::write:entry /pid == $target/ { self->a = arg2 + 1; } \
        syscall::write:return /self->a/ { self->a = 0; } \
        syscall::read:entry /pid == $target/ { self->b = 1; } \
        syscall::read:return /self->b/ { @ = count(); self->b = 0; }";
    let mut args = small.to_vec();
    args.extend_from_slice(&["-n", frees, "-c", &cmd]);
    let (rc, out, err) = dtrace_way(true, &args);
    assert_eq!(rc, 0, "{err}");
    assert!(!err.contains("drop"), "{err}");
    let n: u64 = out.trim().parse().unwrap_or(0);
    assert!((200..210).contains(&n), "{out}");
    // Never freed, self->a takes the only entry: every store of self->b is a drop, reported as
    // DTrace reports dynamic variable drops, both ways.
    let full = "syscall::write:entry /pid == $target/ { self->a = 1; } \
        syscall::read:entry /pid == $target/ { self->b = 1; }";
    let mut args = small.to_vec();
    args.extend_from_slice(&["-n", full, "-c", &cmd]);
    for kernel in [true, false] {
        let (rc, _, err) = dtrace_way(kernel, &args);
        assert_eq!(rc, 0, "{err}");
        assert!(
            common::reported_drops(&err, "dynamic variable") > 0,
            "kernel {kernel}: {err}"
        );
    }
}

#[test]
fn global_scalars_live_in_the_kernel_when_only_kernel_clauses_use_them() {
    let t = "global_scalars_live_in_the_kernel_when_only_kernel_clauses_use_them";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kvars-globals");
    let cmd = format!("{} 400", w.display());
    // A counter shared by two probes, read as a key and a value; a global never stored reads 0.
    let script = "int n; int never; syscall::write:entry /pid == $target/ { n = n + arg2; } \
        syscall::read:entry /pid == $target/ { @[n % 7, never] = count(); @m = max(n); n = 0; }";
    let out = same_both_ways(script, &[], &cmd, &[1, 2]);
    let (_, _, err) = dtrace_way(true, &["-qv", "-n", script, "-c", &cmd]);
    assert!(err.contains("(variables n live in the kernel)"), "{err}");
    assert!(out.contains("59700"), "{out}");
    // Clause-locals live for the firing: clause 3 reads what clause 2 stored, or 0.
    let script = "syscall::write:entry /pid == $target/ { self->sz = arg2; } \
        syscall::write:return /self->sz > 150/ { this->d = self->sz * 3; @s = sum(this->d); } \
        syscall::write:return /self->sz/ { @t = sum(this->d); @c[this->d > 0] = count(); \
        self->sz = 0; }";
    same_both_ways(script, &[], &cmd, &[1, 2, 3]);
    // END reads it after the kernel's clauses stop: it lives in the kernel all the same, and
    // dtrace reads it from there before END.
    let script = "int n; syscall::write:entry /pid == $target/ { n = n + 1; } \
        END { printf(\"%d\\n\", n); }";
    let out = same_both_ways(script, &[], &cmd, &[1]);
    assert!(out.contains("400"), "{out}");
    let (rc, _, err) = dtrace_way(true, &["-qv", "-n", script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("(variables n live in the kernel)"), "{err}");
    assert!(
        err.contains(
            "clause (:::END): runs in dtrace after the kernel's clauses stop, reading \
             variables n kept in the kernel"
        ),
        "{err}"
    );
}

/// Calls libc's write() on /dev/null with sizes 1..=N (N from argv[1]), then spins in `spin()`
/// for about N milliseconds of CPU time.
const PID_PROG: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static char buf[4096];
__attribute__((noinline)) long spin(long ms) {
    struct timespec t0, t;
    volatile long n = 0;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do {
        for (int i = 0; i < 100000; i++)
            n++;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
    return n;
}
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100;
    int fd = open("/dev/null", O_WRONLY);
    for (int i = 1; i <= n; i++)
        if (write(fd, buf, i % 4096) < 0)
            return 1;
    close(fd);
    return spin(n) > 0 ? 0 : 1;
}
"#;

/// Whether clauses `whole` of `err` (`dtrace -v`'s stderr) ran whole in the kernel, each at one
/// probe.
fn ran_whole(err: &str, whole: &[usize]) -> bool {
    whole.iter().all(|&n| {
        clause_lines(err, n)
            .iter()
            .any(|l| l.contains("runs whole in the kernel at 1 probe (variables"))
    })
}

#[test]
fn the_entry_return_idiom_runs_whole_in_the_kernel_at_pid_probes() {
    let t = "the_entry_return_idiom_runs_whole_in_the_kernel_at_pid_probes";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let exe = common::compile_c(
        &common::test_dir("kvars-pid"),
        "pidprog",
        PID_PROG,
        &["-O2"],
    );
    let cmd = format!("{} 500", exe.display());
    // The latency of libc's write(): times differ run to run, the counts do not.
    let idiom = "pid$target:libc.so.6:write:entry { self->ts = timestamp; } \
        pid$target:libc.so.6:write:return /self->ts/ { @q = quantize(timestamp - self->ts); \
        @n = count(); @neg = min(timestamp - self->ts); self->ts = 0; } \
        END { printa(\"%@d\\n\", @n); printa(\"%@d\\n\", @neg); }";
    for kernel in [true, false] {
        let (rc, out, err) = dtrace_way(kernel, &["-qv", "-n", idiom, "-c", &cmd]);
        assert_eq!(rc, 0, "{err}");
        assert_eq!(ran_whole(&err, &[1, 2]), kernel, "{err}");
        let mut nums = out.lines().filter_map(|l| l.trim().parse::<i64>().ok());
        let (count, min) = (nums.next().unwrap_or(0), nums.next().unwrap_or(-1));
        assert_eq!(count, 500, "{out}");
        assert!(min > 0, "{out}");
    }
    // What does not depend on time prints the same both ways: the sizes kept from entry to
    // return, a counter never freed, a global, a predicate on a thread-local.
    let sizes = "int total; self int n; pid$target:libc.so.6:write:entry { self->size = arg2; \
        self->n = self->n + 1; total = total + arg2; } \
        pid$target:libc.so.6:write:return /self->size/ { @s = sum(self->size); \
        @q = quantize(self->size); @c[self->n % 3] = count(); @t = max(total); \
        self->size = 0; } \
        pid$target:libc.so.6:write:return /self->n == 400/ { @at = max(self->n); }";
    let out = same_both_ways(sizes, &[], &cmd, &[1, 2, 3]);
    assert!(out.contains("125250"), "{out}");
}

#[test]
fn thread_locals_and_globals_are_shared_by_pid_profile_and_tick_clauses_in_the_kernel() {
    let t = "thread_locals_and_globals_are_shared_by_pid_profile_and_tick_clauses_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let exe = common::compile_c(
        &common::test_dir("kvars-prof"),
        "pidprog",
        PID_PROG,
        &["-O2"],
    );
    let cmd = format!("{} 400", exe.display());
    // The samples taken while the program spins read the thread-local its pid probes keep; the
    // timer reads the global the samples count, once.
    let script = "int hits; int said; \
        pid$target:a.out:spin:entry { self->spinning = 1; } \
        pid$target:a.out:spin:return { self->spinning = 0; } \
        profile-997 /self->spinning/ { @k[self->spinning, pid == $target] = count(); \
        hits = hits + 1; } \
        tick-1ms /hits > 20 && !said/ { said = 1; printf(\"spinning seen\\n\"); } \
        END { printa(\"spinning %d %d\\n\", @k); }";
    let out = same_both_ways(script, &[], &cmd, &[1, 2, 3, 4]);
    assert!(out.ends_with("\nspinning seen\nspinning 1 1\n\n"), "{out}");
    // A global a BEGIN clause sets (in dtrace, before the kernel's clauses start) lives in the
    // kernel all the same (BEGIN, on no kernel probe, is not numbered), and END reads it back.
    let shared = "int hits; BEGIN { hits = 1; } profile-997 { hits = hits + 1; } \
        tick-1ms /hits > 20/ { exit(0); } END { printf(\"%d\\n\", hits > 20); }";
    let (rc, out, err) = dtrace_way(true, &["-qv", "-n", shared]);
    assert_eq!(rc, 0, "{err}");
    // (-v's stability report comes first.)
    assert_eq!(out.trim_end().lines().last(), Some("1"), "{out}{err}");
    for n in [1, 2] {
        assert!(
            clause_lines(&err, n)
                .iter()
                .any(|l| l.contains("runs whole in the kernel at 1 probe (variables hits")),
            "clause {n}: {err}"
        );
    }
    assert!(
        err.contains("clause (:::BEGIN): runs in dtrace before the kernel's clauses start"),
        "{err}"
    );
}

#[test]
fn a_firing_keeps_the_thread_locals_it_loaded_and_stored_as_dtrace_sees_them() {
    let t = "a_firing_keeps_the_thread_locals_it_loaded_and_stored_as_dtrace_sees_them";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kvars-kept");
    let cmd = format!("{} 200", w.display());
    // A firing keeps the first two thread-locals of the probe once it loaded or stored them
    // (a second load needs no lookup): loads after stores, increments, frees (a zero store,
    // then a load: zero) and a third variable, which is looked up each time, in one clause and
    // across the probe's clauses, print as in dtrace.
    let script =
        "self int a, b, c; syscall::write:entry /pid == $target/ { self->a = self->a + 1; \
        self->b = self->a * 10; self->c = self->b + self->a; @x[self->a % 4, self->b % 7, \
        self->c % 5] = count(); } \
        syscall::write:entry /pid == $target && self->a % 3 == 0/ { self->b = 0; \
        @z[self->b, self->c % 3] = count(); self->c = self->c + self->b + 1; } \
        syscall::write:entry /pid == $target && self->b == 0/ { @f[self->a % 5, self->c % 11] \
        = count(); self->a = self->a + 1; @g[self->a % 6] = sum(self->a); }";
    same_both_ways(script, &[], &cmd, &[1, 2, 3]);
}

/// `sched:::on-cpu` speaks for the thread going on CPU (its `curthread`, as DTrace's): its
/// `self->` variables, ids, name and credentials are that thread's in the kernel too (read from
/// its task), so the
/// on-cpu/off-cpu idiom runs whole in the kernel and a thread reads at off-cpu what it stored at
/// its own on-cpu, as in dtrace.
#[test]
fn on_cpu_thread_locals_are_the_incoming_threads_in_the_kernel() {
    let t = "on_cpu_thread_locals_are_the_incoming_threads_in_the_kernel";
    if !kernel_ok(t) || !common::have_btf(t) {
        return;
    }
    let script = "sched:::on-cpu /pid == $target && execname == \"sh\" && uid == $uid && \
        curthread->tgid == pid/ { self->t = tid; self->on = timestamp; } \
        sched:::off-cpu /pid == $target && self->on/ { @n[self->t == tid] = count(); \
        @late = sum(timestamp < self->on); self->on = 0; } \
        END { printa(\"%d %@d\\n\", @n); printa(\"late %@d\\n\", @late); }";
    let sh = common::test_dir("kvars-oncpu").join("naps.sh");
    std::fs::write(&sh, "for i in 1 2 3 4 5; do sleep 0.02; done\n").unwrap();
    let cmd = format!("sh {}", sh.display());
    for kernel in [true, false] {
        let (rc, out, err) = dtrace_way(kernel, &["-qv", "-n", script, "-c", &cmd]);
        assert_eq!(rc, 0, "{err}");
        if kernel {
            assert!(ran_whole(&err, &[1, 2]), "{err}");
        }
        // Every off-cpu of the shell after its on-cpu, each reading its own thread's variables.
        let ones: u64 = out
            .lines()
            .find_map(|l| l.strip_prefix("1 ")?.trim().parse().ok())
            .unwrap_or(0);
        assert!(ones >= 5, "{out}");
        assert!(!out.lines().any(|l| l.starts_with("0 ")), "{out}");
        assert!(out.contains("late 0"), "{out}");
    }
}
