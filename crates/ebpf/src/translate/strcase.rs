//! `toupper(s)` and `tolower(s)` in translated code, as the interpreter's: `s` read up to
//! `strsize - 1` characters (NULL faults with `DTRACEFLT_BADADDR` at 0), its ASCII letters
//! changed to the other case, every other byte kept.
//!
//! The string is copied into a zeroed work slot (`strarg`), which is the result, and changed in
//! place by a loop over its bytes, bounded by the most characters the string can hold (the
//! verifier walks it once per byte, as `strlen()`'s; a `bpf_loop` over a long string where the
//! probe may loop, see `strarg`).

use super::{Kind, State, Translator, Untranslatable};
use crate::insn::{op, Size, R1, R10, R2, R3, R4};
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
        let most = self.work_most(s);
        self.string_into_work(pc, s, which.name(), 0, 0)?;
        let buf = self.frame.load_buf();
        // The letters to change, and by how much.
        let (first, last, by) = if upper {
            (b'a', b'z', -32)
        } else {
            (b'A', b'Z', 32)
        };
        // Changes the byte at the address in `at` when it is such a letter (R2 its copy).
        let change = move |a: &mut crate::insn::Asm, at: crate::insn::Reg| {
            let next = a.label();
            a.load(Size::B, R2, at, 0);
            a.jmp_imm(op::JLT, R2, i32::from(first), next);
            a.jmp_imm(op::JGT, R2, i32::from(last), next);
            a.alu_imm(op::ADD, R2, by);
            a.store(Size::B, at, 0, R2);
            a.bind(next);
        };
        if self.loops_over_work(most) {
            let name = format!("dt_strcase_{}_{most}", if upper { "u" } else { "l" });
            self.loop_over_work(name, most, move |a, _| change(a, R3));
        } else if most > 0 {
            let a = &mut self.a;
            let (top, out) = (a.label(), a.label());
            // R1: the byte's address; R4: the bytes left to look at.
            a.load(Size::DW, R1, R10, buf);
            a.mov_imm(R4, most as i32);
            a.bind(top);
            a.load(Size::B, R3, R1, 0);
            a.jmp_imm(op::JEQ, R3, 0, out);
            change(a, R1);
            a.alu_imm(op::ADD, R1, 1).alu_imm(op::SUB, R4, 1);
            a.jmp_imm(op::JNE, R4, 0, top);
            a.bind(out);
        }
        let a = &mut self.a;
        a.load(Size::DW, R1, R10, buf);
        self.put(s, rd, R1, Kind::Scratch);
        Ok(())
    }
}
