//! `uregs[]` end to end: the `R_*` constants of the D library compile and print as DTrace for
//! Linux prints them, and reading a register where no provider supplies user registers is an
//! error of the probe ("illegal operation", as DTrace reports a `uregs[]` read without user
//! registers), never a made-up 0.

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
