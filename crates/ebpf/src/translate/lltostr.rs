//! `lltostr(n [, base])` in translated code, as the interpreter's (`strfn::lltostr`): the digits
//! of `n` in `base` (10 when absent; lower-case letters past 9), a `-` before a negative number
//! in base 10 (any other base prints the 64 bits unsigned), `0` before an octal number and `0x`
//! before a hexadecimal one, `0` for zero (`0x0` in base 16). Only a constant base of 2 to 36
//! is translated: another base faults in the interpreter, which then runs the clause.
//!
//! The digits are written from right to left into a work area of the context's string scratch,
//! unrolled (as many steps as the base can need digits, each ending early when the number is
//! spent: no loop for the verifier to bound); the string is then copied with
//! `bpf_probe_read_kernel_str` into a zeroed slot. The interpreter keeps every digit, and its
//! readers cut the string (`strlen()`, `strjoin()` at `strsize - 1` characters, a compare at
//! `strsize`): the copy keeps `strsize` characters, its NUL in the work area's first byte when
//! the slot is full.

use super::{FaultAddr, Kind, Pushed, State, Translator, Untranslatable};
use crate::insn::{helper, op, Asm, Size, R0, R1, R10, R2, R3, R4};
use dtrace_dif::vm::FaultKind;

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
        let refused = |why: String| Untranslatable::Value {
            pc,
            what: format!("lltostr(): {why}"),
        };
        let args = self.int_args(pc, s)?;
        let base = match (args.len(), s.tuple.as_deref()) {
            (1, _) => 10,
            (2, Some([_, Pushed::Reg(r)])) => match &s[(r & 7) as usize] {
                Kind::Int(Some(b)) if (2..=36).contains(b) => *b,
                _ => return Err(refused("a base other than a constant of 2 to 36".into())),
            },
            (2, _) => return Err(refused("a base other than a constant of 2 to 36".into())),
            (n, _) => {
                return Err(Untranslatable::Invalid {
                    pc,
                    what: format!("lltostr() with {n} arguments"),
                })
            }
        };
        let most = self.strsize - 1;
        let most32 = i32::try_from(most).map_err(|_| refused("strsize too large".into()))?;
        if most == 0 {
            return Err(refused("strsize 0".into()));
        }
        let width = super::string_scratch_width(self.strsize);
        let slots = 1 + WORK.div_ceil(width);
        let offset = self.scratch_slots * width;
        self.scratch_slots += slots;
        let buf = self.frame.load_buf();
        let no_scratch = self.fault_site(pc, FaultKind::NoScratch, FaultAddr::Zero);
        self.ctx
            .emit_string_scratch(&mut self.a, offset, slots * width)
            .map_err(refused)?;
        let a = &mut self.a;
        a.jmp_imm(op::JEQ, R0, 0, no_scratch);
        a.store(Size::DW, R10, buf, R0);
        for w in (0..width).step_by(8) {
            a.store_imm(Size::DW, R0, w as i16, 0);
        }
        // R3: the work area's write pointer, from its end (the NUL) leftwards.
        let end = (width + WORK - 1) as i32;
        a.mov(R3, R0).alu_imm(op::ADD, R3, end);
        a.store_imm(Size::B, R3, 0, 0);
        // R1: the number left to print; R4: the number as given.
        a.load(Size::DW, R1, R10, args[0]);
        a.mov(R4, R1);
        if base == 10 {
            let positive = a.label();
            a.jmp_imm(op::JSGE, R1, 0, positive);
            a.alu_imm(op::NEG, R1, 0);
            a.bind(positive);
        }
        let spent = a.label();
        for _ in 0..max_digits(base) {
            a.jmp_imm(op::JEQ, R1, 0, spent);
            let (letter, put) = (a.label(), a.label());
            a.mov(R2, R1).alu_imm(op::MOD, R2, base as i32);
            a.alu_imm(op::DIV, R1, base as i32);
            a.jmp_imm(op::JGT, R2, 9, letter);
            a.alu_imm(op::ADD, R2, i32::from(b'0')).ja(put);
            a.bind(letter);
            a.alu_imm(op::ADD, R2, i32::from(b'a') - 10);
            a.bind(put);
            emit_prepend(a, R2);
        }
        a.bind(spent);
        // The prefixes, right to left, as the interpreter pushes them.
        let not_zero = a.label();
        a.jmp_imm(op::JNE, R4, 0, not_zero);
        if base == 16 {
            emit_prepend_byte(a, b'0');
        }
        if base != 8 && base != 16 {
            emit_prepend_byte(a, b'0');
        }
        a.bind(not_zero);
        if base == 16 {
            emit_prepend_byte(a, b'x');
        }
        if base == 8 || base == 16 {
            emit_prepend_byte(a, b'0');
        }
        if base == 10 {
            let positive = a.label();
            a.jmp_imm(op::JSGE, R4, 0, positive);
            emit_prepend_byte(a, b'-');
            a.bind(positive);
        }
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
