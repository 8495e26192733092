//! `proc:::fault`: a thread took a machine fault that raises a signal. Linux raises such a signal
//! with `force_sig_fault`, which the `signal_generate` tracepoint reports like any other signal;
//! a fault is told apart by its signal (one a trap raises: SIGILL, SIGTRAP, SIGBUS, SIGFPE,
//! SIGSEGV), by a `si_code` above 0 (set by the kernel; kill(2), tgkill(2) and sigqueue(3) give
//! 0 or below) and by its target being the thread running (a fault is synchronous). DTrace's first
//! argument is the fault's `FLT_*` code (`<sys/fault.h>`), here from the signal and its `si_code`
//! by [`FAULTS`].

use crate::bpf::insn::{helper, op, Asm, Label, Size, R0, R1, R10, R2, R6, R8};

/// Signal numbers a fault raises (x86-64 and arm64 numbering).
pub mod sig {
    /// Illegal instruction.
    pub const SIGILL: i32 = 4;
    /// Trace or breakpoint trap.
    pub const SIGTRAP: i32 = 5;
    /// Bus error.
    pub const SIGBUS: i32 = 7;
    /// Arithmetic exception.
    pub const SIGFPE: i32 = 8;
    /// Invalid memory reference.
    pub const SIGSEGV: i32 = 11;
}

/// DTrace's fault codes (`<sys/fault.h>`).
pub mod flt {
    /// Illegal instruction.
    pub const FLT_ILL: i32 = 1;
    /// Privileged instruction.
    pub const FLT_PRIV: i32 = 2;
    /// Breakpoint instruction.
    pub const FLT_BPT: i32 = 3;
    /// Trace trap (single-step).
    pub const FLT_TRACE: i32 = 4;
    /// Memory access (alignment, an object that cannot be read).
    pub const FLT_ACCESS: i32 = 5;
    /// Memory bounds (an address not mapped, or mapped without the access).
    pub const FLT_BOUNDS: i32 = 6;
    /// Integer overflow.
    pub const FLT_IOVF: i32 = 7;
    /// Integer divide by zero.
    pub const FLT_IZDIV: i32 = 8;
    /// Floating-point exception.
    pub const FLT_FPE: i32 = 9;
    /// Watchpoint (hardware breakpoint) trap.
    pub const FLT_WATCH: i32 = 12;
}

/// `(signal, si_code or None for any, FLT_*)`, the first matching row giving the code.
pub const FAULTS: &[(i32, Option<i32>, i32)] = &[
    // ILL_PRVOPC, ILL_PRVREG.
    (sig::SIGILL, Some(5), flt::FLT_PRIV),
    (sig::SIGILL, Some(6), flt::FLT_PRIV),
    (sig::SIGILL, None, flt::FLT_ILL),
    // TRAP_TRACE, TRAP_HWBKPT; TRAP_BRKPT and the rest are breakpoints.
    (sig::SIGTRAP, Some(2), flt::FLT_TRACE),
    (sig::SIGTRAP, Some(4), flt::FLT_WATCH),
    (sig::SIGTRAP, None, flt::FLT_BPT),
    (sig::SIGBUS, None, flt::FLT_ACCESS),
    // FPE_INTDIV, FPE_INTOVF.
    (sig::SIGFPE, Some(1), flt::FLT_IZDIV),
    (sig::SIGFPE, Some(2), flt::FLT_IOVF),
    (sig::SIGFPE, None, flt::FLT_FPE),
    (sig::SIGSEGV, None, flt::FLT_BOUNDS),
];

/// The fault code of signal `signo` with `si_code` `code`, if a fault raises that signal.
pub fn fault_code(signo: i32, code: i32) -> Option<i32> {
    FAULTS
        .iter()
        .find(|(s, c, _)| *s == signo && c.is_none_or(|c| c == code))
        .map(|&(_, _, f)| f)
}

/// Offset of `si_code` in the kernel's siginfo (after `si_signo` and `si_errno`).
const SI_CODE: i16 = 8;

/// Leaves in r0 the `si_code` of the siginfo raw argument `info` points at (0 when it is one of
/// the kernel's special values, NULL or 1, or cannot be read), sign-extended. Uses r0-r5, r8 and
/// the stack slot at `scratch`.
fn load_si_code(a: &mut Asm, info: i16, scratch: i16) {
    a.store_imm(Size::DW, R10, scratch, 0);
    a.load(Size::DW, R8, R6, info);
    super::codegen::read_kernel(a, R10, i32::from(scratch), 4, R8, i32::from(SI_CODE));
    a.load(Size::W, R0, R10, scratch);
    a.sign_extend(R0, 4);
}

/// Skips to `out` unless the `signal_generate` raw tracepoint (context in r6; the signal, siginfo
/// and target task at context offsets `sig`, `info`, `task`) reports a fault of the running
/// thread. Uses r0-r5, r8 and the stack slot at `scratch`.
pub fn emit_condition(a: &mut Asm, sig: i16, info: i16, task: i16, scratch: i16, out: Label) {
    let is_fault = a.label();
    a.load(Size::DW, R0, R6, sig);
    a.sign_extend(R0, 4);
    let mut signals: Vec<i32> = FAULTS.iter().map(|&(s, _, _)| s).collect();
    signals.dedup();
    for s in signals {
        a.jmp_imm(op::JEQ, R0, s, is_fault);
    }
    a.ja(out);
    a.bind(is_fault);
    load_si_code(a, info, scratch);
    a.jmp_imm(op::JSLE, R0, 0, out);
    a.call(helper::GET_CURRENT_TASK);
    a.load(Size::DW, R1, R6, task);
    a.jmp_reg(op::JNE, R0, R1, out);
}

/// Leaves in r0 the fault code of the `signal_generate` raw tracepoint (context in r6; the signal
/// and siginfo at context offsets `sig` and `info`); 0 for a signal no fault raises. Uses r0-r5,
/// r8 and the stack slot at `scratch`.
pub fn emit_code(a: &mut Asm, sig: i16, info: i16, scratch: i16) {
    load_si_code(a, info, scratch);
    a.mov(R1, R0);
    a.load(Size::DW, R2, R6, sig);
    a.sign_extend(R2, 4);
    let done = a.label();
    for &(s, code, flt) in FAULTS {
        let next = a.label();
        a.jmp_imm(op::JNE, R2, s, next);
        if let Some(c) = code {
            a.jmp_imm(op::JNE, R1, c, next);
        }
        a.mov_imm(R0, flt).ja(done);
        a.bind(next);
    }
    a.mov_imm(R0, 0);
    a.bind(done);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_signal_and_its_si_code() {
        assert_eq!(fault_code(sig::SIGSEGV, 1), Some(flt::FLT_BOUNDS));
        assert_eq!(fault_code(sig::SIGSEGV, 2), Some(flt::FLT_BOUNDS));
        assert_eq!(fault_code(sig::SIGBUS, 2), Some(flt::FLT_ACCESS));
        assert_eq!(fault_code(sig::SIGFPE, 1), Some(flt::FLT_IZDIV));
        assert_eq!(fault_code(sig::SIGFPE, 2), Some(flt::FLT_IOVF));
        assert_eq!(fault_code(sig::SIGFPE, 3), Some(flt::FLT_FPE));
        assert_eq!(fault_code(sig::SIGILL, 1), Some(flt::FLT_ILL));
        assert_eq!(fault_code(sig::SIGILL, 5), Some(flt::FLT_PRIV));
        assert_eq!(fault_code(sig::SIGTRAP, 1), Some(flt::FLT_BPT));
        assert_eq!(fault_code(sig::SIGTRAP, 2), Some(flt::FLT_TRACE));
        assert_eq!(fault_code(sig::SIGTRAP, 4), Some(flt::FLT_WATCH));
        assert_eq!(fault_code(2, 1), None);
    }

    #[test]
    fn programs_assemble() {
        let mut a = Asm::new();
        let out = a.label();
        emit_condition(&mut a, 0, 8, 16, -8, out);
        emit_code(&mut a, 0, 8, -8);
        a.bind(out).mov_imm(R0, 0).exit();
        assert!(a.finish().is_ok());
    }
}
