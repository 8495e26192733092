//! `uregs[]` end to end: the `R_*` constants of the D library compile and print as DTrace for
//! Linux prints them, and reading a register where no provider supplies user registers is an
//! error of the probe ("illegal operation", as DTrace reports a `uregs[]` read without user
//! registers), never a made-up 0; read at the probe where the clause runs in the kernel, they
//! are the registers (and faults) the interpreter sees.

mod common;

use common::dtrace;

#[test]
fn register_constants_print_as_dtrace_for_linux() {
    let (rc, out, err) = dtrace(&[
        "-qn",
        "BEGIN { printf(\"%d %d %d %d %d\\n\", R_PC, R_SP, R_FP, R_RAX, R_TRAPNO); exit(0); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    // (the blank line is the one dtrace prints at exit)
    assert_eq!(out, "16 19 4 10 25\n\n");
}

#[test]
fn reading_uregs_without_user_registers_is_an_error() {
    let (rc, out, err) = dtrace(&[
        "-qn",
        "BEGIN { trace(uregs[R_PC]); } BEGIN { printf(\"after\\n\"); exit(0); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.contains(
            "error in dt_clause_0 for probe ID 1 (dtrace:::BEGIN): illegal operation at BPF pc"
        ),
        "{err}"
    );
    // the faulting clause records nothing; the next one runs
    assert_eq!(out, "after\n\n");
}

/// At a syscall probe, `uregs[]` are the thread's user registers saved at the system call: the
/// PC in the C library's wrapper, the syscall number in `R_ERR` (orig_ax), -ENOSYS in `R_RAX`,
/// a user-mode code segment; registers `struct pt_regs` does not hold fault (root, BPF; gcc).
#[test]
fn uregs_at_a_syscall_are_the_saved_user_registers() {
    let test = "uregs_at_a_syscall_are_the_saved_user_registers";
    if !common::kernel_ok(test) || !common::have_btf(test) || !common::have_gcc(test) {
        return;
    }
    let dir = common::test_dir("uregs");
    let exe = common::compile_c(
        &dir,
        "ur",
        "#include <unistd.h>\nint main(void) { getppid(); usleep(200000); return 0; }\n",
        &["-O1"],
    );
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"syscall::getppid:entry /pid == $target/ {
            printf("nr=%d ax=%d user=%d sp=%d ", uregs[R_ERR], (long)uregs[R_RAX], uregs[R_CS] & 3,
                uregs[R_SP] != 0);
            ufunc(uregs[R_PC]);
            printf("\n");
        }
        syscall::getppid:entry /pid == $target/ { trace(uregs[R_DS]); }"#,
        "-c",
        exe.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    // x86-64: getppid is system call 110; ENOSYS is 38.
    let line = out
        .lines()
        .find(|l| l.starts_with("nr="))
        .unwrap_or_else(|| panic!("{out}\n{err}"));
    assert!(
        line.starts_with("nr=110 ax=-38 user=3 sp=1 ") && line.contains("`getppid"),
        "{line}"
    );
    assert!(
        err.contains("error in dt_clause_1 for probe ID ")
            && err.contains("illegal operation at BPF pc "),
        "{err}"
    );
}

/// `uregs[]` read at the probe, where the clause runs in the kernel: the registers the capture
/// records for the interpreter, so both ways print the same, and a register `struct pt_regs`
/// does not hold faults there as in dtrace (root, BPF; gcc).
#[test]
fn uregs_are_read_at_the_probe_as_in_dtrace() {
    let test = "uregs_are_read_at_the_probe_as_in_dtrace";
    if !common::kernel_ok(test) || !common::have_btf(test) || !common::have_gcc(test) {
        return;
    }
    let dir = common::test_dir("uregs-kernel");
    let exe = common::compile_c(
        &dir,
        "ur",
        "#include <unistd.h>\nint main(void) { getppid(); getppid(); return 0; }\n",
        &["-O1"],
    );
    let script = r#"syscall::getppid:entry /pid == $target && uregs[R_CS] == 0x33/ {
            printf("nr=%d ax=%d user=%d sp=%d ", uregs[R_ERR], (long)uregs[R_RAX],
                uregs[R_CS] & 3, uregs[R_SP] != 0);
            ufunc(uregs[R_PC]);
            printf("\n");
        }
        syscall::getppid:entry /pid == $target/ { trace(uregs[R_DS]); }"#;
    let whole = |err: &str| {
        [1, 2].iter().all(|&n| {
            common::clause_lines(err, n)
                .iter()
                .any(|l| l.contains("runs whole in the kernel at 1 probe"))
        })
    };
    let (rc, _, err) = common::dtrace_way(
        "DTRACE_KERNEL_PREDICATES",
        true,
        &["-qv", "-n", script, "-c", exe.to_str().unwrap()],
    );
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        err.matches("illegal operation at BPF pc ").count(),
        2,
        "{err}"
    );
    let out = common::same_both_ways(
        "DTRACE_KERNEL_PREDICATES",
        script,
        &[],
        exe.to_str().unwrap(),
        &whole,
    );
    assert_eq!(
        out.matches("nr=110 ax=-38 user=3 sp=1 ").count(),
        2,
        "{out}"
    );
    assert_eq!(out.matches("`getppid").count(), 2, "{out}");
}
