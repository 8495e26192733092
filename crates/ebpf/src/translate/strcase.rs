//! `toupper(s)` and `tolower(s)` in translated code, as the interpreter's: `s` read up to
//! `strsize - 1` characters (NULL faults with `DTRACEFLT_BADADDR` at 0), its ASCII letters
//! changed to the other case, every other byte kept.
//!
//! The string is copied into a zeroed work slot (`strarg`), which is the result, and changed in
//! place by a loop over its bytes, bounded by `strsize - 1` (the verifier walks it once per
//! byte, as `strlen()`'s).

use super::{Kind, State, Translator, Untranslatable};
use crate::insn::{op, Size, R1, R10, R2, R3};
use dtrace_dif::subr::Subr;

impl Translator<'_> {
    /// `toupper()` (`which` [`Subr::Toupper`]) or `tolower()` of the string on the tuple stack
    /// into `rd`.
    pub(super) fn strcase(
        &mut self,
        pc: usize,
        s: &mut State,
        which: Subr,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let upper = which == Subr::Toupper;
        self.string_into_work(pc, s, which.name(), 0, 0)?;
        let most = self.strsize - 1;
        let buf = self.frame.load_buf();
        // The letters to change, and by how much.
        let (first, last, by) = if upper {
            (b'a', b'z', -32)
        } else {
            (b'A', b'Z', 32)
        };
        let a = &mut self.a;
        let (top, next, out) = (a.label(), a.label(), a.label());
        // R1: the byte's address; R2: the bytes left to look at.
        a.load(Size::DW, R1, R10, buf);
        a.mov_imm(R2, most as i32);
        a.bind(top);
        a.load(Size::B, R3, R1, 0);
        a.jmp_imm(op::JEQ, R3, 0, out);
        a.jmp_imm(op::JLT, R3, i32::from(first), next);
        a.jmp_imm(op::JGT, R3, i32::from(last), next);
        a.alu_imm(op::ADD, R3, by);
        a.store(Size::B, R1, 0, R3);
        a.bind(next);
        a.alu_imm(op::ADD, R1, 1).alu_imm(op::SUB, R2, 1);
        a.jmp_imm(op::JNE, R2, 0, top);
        a.bind(out);
        a.load(Size::DW, R1, R10, buf);
        self.put(s, rd, R1, Kind::Scratch);
        Ok(())
    }
}
