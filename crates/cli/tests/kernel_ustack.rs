//! `ustack()` and `jstack()` records built at the probe: the probe walks the user stack with the
//! files' `.eh_frame` (or, beside D variables kept in the kernel, takes it as the capture does for
//! dtrace to complete the walk when it commits the record), so code without frame pointers (most
//! of a distribution's binaries) shows whole, and the output is the one the interpreter prints
//! with DTRACE_KERNEL_RECORDS=0 (root, BPF, tracefs; gcc).

mod common;
use common::{clause_lines, have_gcc, kernel_ok, RECORDS_AT_ONE_PROBE};

const SWITCH: &str = "DTRACE_KERNEL_RECORDS";

/// A call chain built without frame pointers, which calls getppid(2) three times and exits at
/// once (its stacks resolve from the mappings dtrace noted when it committed the records).
const NOFP: &str = r#"
#include <unistd.h>
volatile unsigned long sink;
__attribute__((noinline)) int level3(int x) { return (int)getppid() + x; }
__attribute__((noinline)) int level2(int x) { return level3(x * 3) + 1; }
__attribute__((noinline)) int level1(int x) { return level2(x + 5) * 2; }
int main(void) { for (int i = 0; i < 3; i++) sink += level1(i); return 0; }
"#;

/// The `-c` command running [`NOFP`], built in test directory `tag`.
fn nofp(tag: &str) -> String {
    common::compile_c(
        &common::test_dir(tag),
        "nofp",
        NOFP,
        &[
            "-O2",
            "-fomit-frame-pointer",
            "-fasynchronous-unwind-tables",
        ],
    )
    .display()
    .to_string()
}

/// Runs `script` both ways; asserts both succeed and print the same non-empty output, and that
/// `-v` says each clause of `clauses` runs whole in the kernel with its records built there.
fn same_both_ways(script: &str, cmd: &str, clauses: &[usize]) -> String {
    let in_kernel = |err: &str| {
        clauses.iter().all(|&n| {
            clause_lines(err, n)
                .iter()
                .any(|l| l.contains(RECORDS_AT_ONE_PROBE))
        })
    };
    common::same_both_ways(SWITCH, script, &[], cmd, &in_kernel)
}

use common::stack_frames as stacks;

/// Whether `frames` starts with libc's getppid, then level3, level2, level1 and main of the
/// program `nofp`.
fn whole_chain(frames: &[String]) -> bool {
    let names = [
        "libc.so.6`getppid+",
        "nofp`level3+",
        "nofp`level2+",
        "nofp`level1+",
        "nofp`main+",
    ];
    frames.len() >= names.len() && frames.iter().zip(names).all(|(f, n)| f.starts_with(n))
}

#[test]
fn ustack_and_jstack_are_recorded_at_the_probe() {
    let t = "ustack_and_jstack_are_recorded_at_the_probe";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = nofp("kustack-records");
    // ustack() with the default depth, a short one with string space, jstack(): one user stack
    // taken for the three, each record filled as the interpreter fills it.
    let script = "syscall::getppid:entry /pid == $target/ { printf(\"g %d\\n\", arg0); ustack(); \
        ustack(2, 64); jstack(3); trace(arg0); }";
    let out = same_both_ways(script, &cmd, &[1]);
    assert_eq!(out.matches("g 0\n").count(), 3, "{out}");
    let all = stacks(&out);
    assert_eq!(all.len(), 9, "{out}");
    for s in all.chunks(3) {
        // The whole stack, down to the start code, though nothing here keeps frame pointers.
        assert!(whole_chain(&s[0]), "{out}");
        assert!(
            s[0].last().is_some_and(|f| f.starts_with("nofp`_start+")),
            "{out}"
        );
        assert_eq!(s[1][..], s[0][..2], "{out}");
        assert_eq!(s[2][..], s[0][..3], "{out}");
    }
}

/// Where D variables live in the kernel at the probe, a firing whose stack the probe's walk cannot
/// place cannot go to dtrace whole: the record takes the stack's bytes for dtrace to walk, not the
/// probe's walk (`capture::ustack::TailForm`), and prints the same.
#[test]
fn a_record_beside_kernel_variables_takes_the_stack_for_dtrace_to_walk() {
    let t = "a_record_beside_kernel_variables_takes_the_stack_for_dtrace_to_walk";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = nofp("kustack-vars");
    let script = "syscall::getppid:entry /pid == $target/ { self->n++; \
        printf(\"n %d\\n\", self->n); ustack(); }";
    // (Its -v line names the variables where others say its records are built at the probe.)
    let in_kernel = |err: &str| {
        clause_lines(err, 1)
            .iter()
            .any(|l| l.contains("runs whole in the kernel at 1 probe (variables self->n"))
    };
    let out = common::same_both_ways(SWITCH, script, &[], &cmd, &in_kernel);
    for n in 1..=3 {
        assert!(out.contains(&format!("n {n}\n")), "{out}");
    }
    let all = stacks(&out);
    assert_eq!(all.len(), 3, "{out}");
    assert!(all.iter().all(|s| whole_chain(s)), "{out}");
}

#[test]
fn clauses_of_different_depths_at_one_probe_print_as_in_dtrace() {
    let t = "clauses_of_different_depths_at_one_probe_print_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = nofp("kustack-depths");
    // Each clause's record takes the user stack as deep as the probe's capture would (the
    // deepest clause's), so dtrace completes the same walk both ways.
    let script = "syscall::getppid:entry /pid == $target/ { ustack(1); } \
        syscall::getppid:entry /pid == $target/ { printf(\"--\\n\"); ustack(40); }";
    let out = same_both_ways(script, &cmd, &[1, 2]);
    let all = stacks(&out);
    assert_eq!(all.len(), 6, "{out}");
    for s in all.chunks(2) {
        assert_eq!(s[0].len(), 1, "{out}");
        assert!(whole_chain(&s[1]), "{out}");
    }
}

#[test]
fn ustack_in_a_speculation_is_recorded_at_the_probe() {
    let t = "ustack_in_a_speculation_is_recorded_at_the_probe";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = nofp("kustack-spec");
    // The speculation's buffer holds the built records until commit() or discard(): the second
    // call's stack is discarded.
    let script = "BEGIN { n = 0; } \
        syscall::getppid:entry /pid == $target/ { n++; } \
        syscall::getppid:entry /pid == $target/ { s = speculation(); speculate(s); \
        printf(\"n %d\\n\", n); ustack(5); } \
        syscall::getppid:return /pid == $target && n != 2/ { commit(s); } \
        syscall::getppid:return /pid == $target && n == 2/ { discard(s); }";
    let args = ["-qv", "-n", script, "-c", &cmd];
    let (rc, out, err) = common::dtrace(&args);
    assert_eq!(rc, 0, "{err}");
    assert!(
        clause_lines(&err, 2)
            .iter()
            .any(|l| l.contains("runs whole in the kernel at 1 probe")),
        "{err}"
    );
    let (rc, iout, ierr) = common::dtrace_way(SWITCH, false, &args);
    assert_eq!(rc, 0, "{ierr}");
    assert_eq!(out, iout);
    assert!(
        out.contains("n 1\n") && out.contains("n 3\n") && !out.contains("n 2\n"),
        "{out}"
    );
    let all = stacks(&out);
    assert_eq!(all.len(), 2, "{out}");
    assert!(all.iter().all(|s| whole_chain(s)), "{out}");
}

/// A distribution's shell, built without frame pointers: the kernel's frame-pointer walk ends in
/// its first frame or two, the stack completed from the bytes taken at the probe goes down to
/// the C library's start code. (Address randomization off, so its unnamed frames print the same
/// addresses both ways.)
#[test]
fn a_distribution_binary_without_frame_pointers_shows_whole() {
    let t = "a_distribution_binary_without_frame_pointers_shows_whole";
    if !kernel_ok(t)
        || !dtrace_testkit::skip_unless(
            dtrace_testkit::have_program("setarch") && std::path::Path::new("/bin/sh").exists(),
            t,
            "needs setarch and /bin/sh",
        )
    {
        return;
    }
    let dir = common::test_dir("kustack-shell");
    let script_file = dir.join("two.sh");
    std::fs::write(&script_file, "echo one\necho two\n").unwrap();
    let cmd = format!("setarch -R /bin/sh {}", script_file.display());
    let script = "syscall::write:entry /pid == $target/ { ustack(); jstack(); }";
    let out = same_both_ways(script, &cmd, &[1]);
    let all = stacks(&out);
    assert_eq!(all.len(), 4, "{out}");
    for s in &all {
        assert!(s[0].starts_with("libc.so.6`write"), "{out}");
        assert!(
            s.iter()
                .any(|f| f.starts_with("libc.so.6`__libc_start_main")),
            "{out}"
        );
    }
}
