//! The arithmetic of the in-tracer emulator, done by the host CPU itself: each operation runs the real
//! instruction (at the real operand size) on the tracee's values with the tracee's arithmetic flags
//! loaded, and reads back the result and the flags. The tracer runs on the same machine (and, pinned,
//! on the same CPU) as the tracee, so results and flags, including those the manuals call undefined,
//! are exactly what the tracee would have produced.

use std::arch::asm;

/// The arithmetic flags: CF, PF, AF, ZF, SF, OF.
pub const ARITH_FLAGS: u64 = 0x8d5;

/// Two-operand operations (`op dst, src`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// add
    Add,
    /// or
    Or,
    /// adc
    Adc,
    /// sbb
    Sbb,
    /// and
    And,
    /// sub
    Sub,
    /// xor
    Xor,
    /// cmp (no result written)
    Cmp,
    /// test (no result written)
    Test,
    /// two-operand imul (16, 32 and 64 bits only)
    Imul,
}

impl BinOp {
    /// Whether the destination is written.
    pub fn writes(self) -> bool {
        !matches!(self, BinOp::Cmp | BinOp::Test)
    }
}

/// One-operand operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    /// inc
    Inc,
    /// dec
    Dec,
    /// neg
    Neg,
    /// not (no flags)
    Not,
}

/// Shifts and rotates by a count (taken from CL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShiftOp {
    /// shl / sal
    Shl,
    /// shr
    Shr,
    /// sar
    Sar,
    /// rol
    Rol,
    /// ror
    Ror,
    /// rcl
    Rcl,
    /// rcr
    Rcr,
}

// Loads the tracee's arithmetic flags (keeping the host's other flags), runs the instruction, saves
// the flags.
macro_rules! run2 {
    ($insn:literal, $a:ident, $b:ident, $f:ident, $sz:literal) => {
        // SAFETY: pushes and pops balance; only arithmetic flags of the host change.
        unsafe {
            asm!(
                "pushfq", "pop {t}", "and {t}, {m}", "or {t}, {f}", "push {t}", "popfq",
                concat!($insn, " {a:", $sz, "}, {b:", $sz, "}"),
                "pushfq", "pop {f}",
                a = inout(reg) $a, b = in(reg) $b, f = inout(reg) $f, t = out(reg) _,
                m = in(reg) !ARITH_FLAGS,
            )
        }
    };
}

macro_rules! run1 {
    ($insn:literal, $a:ident, $f:ident, $sz:literal) => {
        // SAFETY: pushes and pops balance; only arithmetic flags of the host change.
        unsafe {
            asm!(
                "pushfq", "pop {t}", "and {t}, {m}", "or {t}, {f}", "push {t}", "popfq",
                concat!($insn, " {a:", $sz, "}"),
                "pushfq", "pop {f}",
                a = inout(reg) $a, f = inout(reg) $f, t = out(reg) _,
                m = in(reg) !ARITH_FLAGS,
            )
        }
    };
}

macro_rules! runcl {
    ($insn:literal, $a:ident, $c:ident, $f:ident, $sz:literal) => {
        // SAFETY: pushes and pops balance; only arithmetic flags of the host change.
        unsafe {
            asm!(
                "pushfq", "pop {t}", "and {t}, {m}", "or {t}, {f}", "push {t}", "popfq",
                concat!($insn, " {a:", $sz, "}, cl"),
                "pushfq", "pop {f}",
                a = inout(reg) $a, in("cl") $c, f = inout(reg) $f, t = out(reg) _,
                m = in(reg) !ARITH_FLAGS,
            )
        }
    };
}

macro_rules! sized2 {
    ($insn:literal, $size:expr, $a:ident, $b:ident, $f:ident) => {
        match $size {
            1 => run2!($insn, $a, $b, $f, "l"),
            2 => run2!($insn, $a, $b, $f, "x"),
            4 => run2!($insn, $a, $b, $f, "e"),
            _ => run2!($insn, $a, $b, $f, "r"),
        }
    };
}

macro_rules! sized1 {
    ($insn:literal, $size:expr, $a:ident, $f:ident) => {
        match $size {
            1 => run1!($insn, $a, $f, "l"),
            2 => run1!($insn, $a, $f, "x"),
            4 => run1!($insn, $a, $f, "e"),
            _ => run1!($insn, $a, $f, "r"),
        }
    };
}

macro_rules! sizedcl {
    ($insn:literal, $size:expr, $a:ident, $c:ident, $f:ident) => {
        match $size {
            1 => runcl!($insn, $a, $c, $f, "l"),
            2 => runcl!($insn, $a, $c, $f, "x"),
            4 => runcl!($insn, $a, $c, $f, "e"),
            _ => runcl!($insn, $a, $c, $f, "r"),
        }
    };
}

/// `op a, b` at `size` bytes (1, 2, 4, 8) with arithmetic flags `flags`: (result, new flags). Only
/// the low `size` bytes of the result mean anything. `Imul` needs `size` 2, 4 or 8.
pub fn binary(op: BinOp, size: u8, a: u64, b: u64, flags: u64) -> (u64, u64) {
    let mut a = a;
    let mut f = flags & ARITH_FLAGS;
    match op {
        BinOp::Add => sized2!("add", size, a, b, f),
        BinOp::Or => sized2!("or", size, a, b, f),
        BinOp::Adc => sized2!("adc", size, a, b, f),
        BinOp::Sbb => sized2!("sbb", size, a, b, f),
        BinOp::And => sized2!("and", size, a, b, f),
        BinOp::Sub => sized2!("sub", size, a, b, f),
        BinOp::Xor => sized2!("xor", size, a, b, f),
        BinOp::Cmp => sized2!("cmp", size, a, b, f),
        BinOp::Test => sized2!("test", size, a, b, f),
        BinOp::Imul => match size {
            2 => run2!("imul", a, b, f, "x"),
            4 => run2!("imul", a, b, f, "e"),
            _ => run2!("imul", a, b, f, "r"),
        },
    }
    (a, f & ARITH_FLAGS)
}

/// `op a` at `size` bytes: (result, new flags).
pub fn unary(op: UnOp, size: u8, a: u64, flags: u64) -> (u64, u64) {
    let mut a = a;
    let mut f = flags & ARITH_FLAGS;
    match op {
        UnOp::Inc => sized1!("inc", size, a, f),
        UnOp::Dec => sized1!("dec", size, a, f),
        UnOp::Neg => sized1!("neg", size, a, f),
        UnOp::Not => sized1!("not", size, a, f),
    }
    (a, f & ARITH_FLAGS)
}

/// `op a, count` at `size` bytes: (result, new flags).
pub fn shift(op: ShiftOp, size: u8, a: u64, count: u8, flags: u64) -> (u64, u64) {
    let mut a = a;
    let mut f = flags & ARITH_FLAGS;
    match op {
        ShiftOp::Shl => sizedcl!("shl", size, a, count, f),
        ShiftOp::Shr => sizedcl!("shr", size, a, count, f),
        ShiftOp::Sar => sizedcl!("sar", size, a, count, f),
        ShiftOp::Rol => sizedcl!("rol", size, a, count, f),
        ShiftOp::Ror => sizedcl!("ror", size, a, count, f),
        ShiftOp::Rcl => sizedcl!("rcl", size, a, count, f),
        ShiftOp::Rcr => sizedcl!("rcr", size, a, count, f),
    }
    (a, f & ARITH_FLAGS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CF: u64 = 1;
    const ZF: u64 = 0x40;
    const SF: u64 = 0x80;
    const OF: u64 = 0x800;

    #[test]
    fn add_sets_carry_zero_and_overflow_at_each_size() {
        let (r, f) = binary(BinOp::Add, 1, 0xff, 1, 0);
        assert_eq!(r & 0xff, 0);
        assert_eq!(f & (CF | ZF), CF | ZF);
        let (r, f) = binary(BinOp::Add, 4, 0x7fff_ffff, 1, 0);
        assert_eq!(r as u32, 0x8000_0000);
        assert_eq!(f & (OF | SF | CF), OF | SF);
        let (r, f) = binary(BinOp::Sub, 8, 0, 1, 0);
        assert_eq!(r, u64::MAX);
        assert_eq!(f & (CF | SF), CF | SF);
    }

    #[test]
    fn carry_in_is_used() {
        assert_eq!(binary(BinOp::Adc, 8, 1, 1, CF).0, 3);
        assert_eq!(binary(BinOp::Sbb, 2, 5, 1, CF).0 & 0xffff, 3);
    }

    #[test]
    fn unary_and_shifts() {
        let (r, f) = unary(UnOp::Dec, 8, 1, CF);
        assert_eq!(r, 0);
        assert_eq!(f & (ZF | CF), ZF | CF, "dec keeps CF");
        assert_eq!(unary(UnOp::Not, 1, 0x0f, 0).0 & 0xff, 0xf0);
        let (r, f) = shift(ShiftOp::Shl, 4, 0x8000_0001, 1, 0);
        assert_eq!(r as u32, 2);
        assert_eq!(f & CF, CF);
        assert_eq!(shift(ShiftOp::Rol, 8, 1 << 63, 1, 0).0, 1);
        assert_eq!(shift(ShiftOp::Sar, 2, 0x8000, 15, 0).0 & 0xffff, 0xffff);
    }
}
