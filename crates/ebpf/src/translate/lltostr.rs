//! `lltostr(n [, base])` in translated code, as the interpreter's (`strfn::lltostr`): the digits
//! of `n` in `base` (10 when absent; lower-case letters past 9), a `-` before a negative number
//! in base 10 (any other base prints the 64 bits unsigned), `0` before an octal number and `0x`
//! before a hexadecimal one, `0` for zero (`0x0` in base 16). A base outside 2 to 36 faults
//! with `DTRACEFLT_ILLOP` at address 0, as in the interpreter (checked before the scratch is
//! taken); a base known when the clause is translated is built into the code, one computed at
//! run time is read from its register.
//!
//! The digits are written from right to left into a work area of the context's string scratch,
//! unrolled (as many steps as the base can need digits, each ending early when the number is
//! spent: no loop for the verifier to bound); the string is then copied with
//! `bpf_probe_read_kernel_str` into a zeroed slot. The interpreter keeps every digit, and its
//! readers cut the string (`strlen()`, `strjoin()` at `strsize - 1` characters, a compare at
//! `strsize`): the copy keeps `strsize` characters, its NUL in the work area's first byte when
//! the slot is full.

use super::{FaultAddr, Kind, Pushed, State, Translator, Untranslatable};
use crate::insn::{helper, op, Asm, Size, R0, R1, R10, R2, R3, R4, R5};
use dtrace_dif::vm::FaultKind;

/// The base: a constant of 2 to 36, or the frame slot of the value given (checked at run time).
#[derive(Clone, Copy)]
enum Base {
    Const(u64),
    At(i16),
}

/// Bytes of the work area: 64 binary digits, the `0x`, the `-` and the NUL, rounded up.
const WORK: usize = 72;

impl Translator<'_> {
    /// `lltostr()` of the arguments on the tuple stack into `rd` (see the module notes).
    pub(super) fn lltostr(
        &mut self,
        pc: usize,
        s: &mut State,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let refused = super::refusal(pc, "lltostr()");
        let args = self.int_args(pc, s)?;
        let base = match (args.len(), s.tuple.as_deref()) {
            (1, _) => Base::Const(10),
            (2, Some([_, Pushed::Reg(r)])) => match &s[(r & 7) as usize] {
                Kind::Int(Some(b)) if (2..=36).contains(b) => Base::Const(*b),
                _ => Base::At(args[1]),
            },
            (2, _) => Base::At(args[1]),
            (n, _) => {
                return Err(Untranslatable::Invalid {
                    pc,
                    what: format!("lltostr() with {n} arguments"),
                })
            }
        };
        let (_, most32) = self.string_bound().map_err(refused)?;
        let width = super::string_scratch_width(self.strsize);
        let slots = 1 + WORK.div_ceil(width);
        let buf = self.frame.load_buf();
        if let Base::At(at) = base {
            let bad = self.fault_site(pc, FaultKind::IllOp, FaultAddr::Zero);
            self.a.load(Size::DW, R5, R10, at);
            self.a.jmp_imm(op::JLT, R5, 2, bad);
            self.a.jmp_imm(op::JGT, R5, 36, bad);
        }
        self.scratch_area(pc, slots, buf, width).map_err(refused)?;
        let a = &mut self.a;
        // R3: the work area's write pointer, from its end (the NUL) leftwards.
        let end = (width + WORK - 1) as i32;
        a.mov(R3, R0).alu_imm(op::ADD, R3, end);
        a.store_imm(Size::B, R3, 0, 0);
        // R1: the number left to print; R4: the number as given.
        a.load(Size::DW, R1, R10, args[0]);
        a.mov(R4, R1);
        // R5: a base computed at run time (checked above).
        if let Base::At(at) = base {
            a.load(Size::DW, R5, R10, at);
        }
        // Whether the base is `b`: known, or to be compared (jumping to `no` when not).
        let is = |a: &mut Asm, b: u64, no: crate::insn::Label| match base {
            Base::Const(k) => k == b,
            Base::At(_) => {
                a.jmp_imm(op::JNE, R5, b as i32, no);
                true
            }
        };
        let positive = a.label();
        if is(a, 10, positive) {
            a.jmp_imm(op::JSGE, R1, 0, positive);
            a.alu_imm(op::NEG, R1, 0);
        }
        a.bind(positive);
        let spent = a.label();
        let steps = match base {
            Base::Const(b) => max_digits(b),
            Base::At(_) => max_digits(2),
        };
        for _ in 0..steps {
            a.jmp_imm(op::JEQ, R1, 0, spent);
            let (letter, put) = (a.label(), a.label());
            match base {
                Base::Const(b) => {
                    a.mov(R2, R1).alu_imm(op::MOD, R2, b as i32);
                    a.alu_imm(op::DIV, R1, b as i32);
                }
                Base::At(_) => {
                    a.mov(R2, R1).alu(op::MOD, R2, R5);
                    a.alu(op::DIV, R1, R5);
                }
            }
            a.jmp_imm(op::JGT, R2, 9, letter);
            a.alu_imm(op::ADD, R2, i32::from(b'0')).ja(put);
            a.bind(letter);
            a.alu_imm(op::ADD, R2, i32::from(b'a') - 10);
            a.bind(put);
            emit_prepend(a, R2);
        }
        a.bind(spent);
        // The prefixes, right to left, as the interpreter pushes them: a `0` for zero in any
        // base but 8 (whose own `0` follows); `x` and `0` in base 16; `0` in base 8; `-`.
        let not_zero = a.label();
        a.jmp_imm(op::JNE, R4, 0, not_zero);
        match base {
            Base::Const(8) => {}
            Base::Const(_) => emit_prepend_byte(a, b'0'),
            Base::At(_) => {
                a.jmp_imm(op::JEQ, R5, 8, not_zero);
                emit_prepend_byte(a, b'0');
            }
        }
        a.bind(not_zero);
        let not_hex = a.label();
        if is(a, 16, not_hex) {
            emit_prepend_byte(a, b'x');
            emit_prepend_byte(a, b'0');
        }
        a.bind(not_hex);
        let not_octal = a.label();
        if is(a, 8, not_octal) {
            emit_prepend_byte(a, b'0');
        }
        a.bind(not_octal);
        let positive = a.label();
        if is(a, 10, positive) {
            a.jmp_imm(op::JSGE, R4, 0, positive);
            emit_prepend_byte(a, b'-');
        }
        a.bind(positive);
        // Into the slot, cut to strsize characters.
        a.load(Size::DW, R1, R10, buf);
        a.mov_imm(R2, most32 + 2);
        a.call(helper::PROBE_READ_KERNEL_STR);
        a.load(Size::DW, R1, R10, buf);
        self.put(s, rd, R1, Kind::Scratch);
        Ok(())
    }
}

/// The most digits a 64-bit number has in `base`.
fn max_digits(base: u64) -> usize {
    let mut n = 1;
    let mut v = u64::MAX / base;
    while v != 0 {
        v /= base;
        n += 1;
    }
    n
}

/// Writes the byte in `r` just left of R3, and moves R3 there.
fn emit_prepend(a: &mut Asm, r: crate::insn::Reg) {
    a.alu_imm(op::SUB, R3, 1);
    a.store(Size::B, R3, 0, r);
}

/// Writes `c` just left of R3, and moves R3 there.
fn emit_prepend_byte(a: &mut Asm, c: u8) {
    a.alu_imm(op::SUB, R3, 1);
    a.store_imm(Size::B, R3, 0, i32::from(c));
}

#[cfg(test)]
mod tests {
    use super::max_digits;

    #[test]
    fn digits_of_the_largest_number() {
        assert_eq!(max_digits(2), 64);
        assert_eq!(max_digits(8), 22);
        assert_eq!(max_digits(10), 20);
        assert_eq!(max_digits(16), 16);
        assert_eq!(max_digits(36), 13);
    }
}
