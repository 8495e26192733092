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
        err.contains("(ID 1: dtrace:::BEGIN): illegal operation in action #1 at DIF offset"),
        "{err}"
    );
    // the faulting clause records nothing; the next one runs
    assert_eq!(out, "after\n\n");
}
