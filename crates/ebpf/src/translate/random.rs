//! `random()` in translated code, as the interpreter's: 64 uniformly random bits (the
//! interpreter's `random()` is its generator's whole 64-bit word, where `rand()` keeps 32). The
//! kernel's helper gives 32 bits a call: two calls make the word, the first the high half.

use super::{Kind, State, Translator};
use crate::insn::{helper, op, Size, R0, R1, R10};

impl Translator<'_> {
    /// `random()` into `rd`.
    /// It takes no argument: the tuple stack is not read (as the interpreter's, which ignores it).
    pub(super) fn random(&mut self, s: &mut State, rd: u8) {
        let buf = self.frame.load_buf();
        let a = &mut self.a;
        a.call(helper::GET_PRANDOM_U32);
        a.store(Size::DW, R10, buf, R0);
        a.call(helper::GET_PRANDOM_U32);
        // The helper's 32 bits, whatever the upper half of r0 holds.
        a.alu_imm(op::LSH, R0, 32).alu_imm(op::RSH, R0, 32);
        a.load(Size::DW, R1, R10, buf);
        a.alu_imm(op::LSH, R1, 32).alu(op::OR, R1, R0);
        self.put(s, rd, R1, Kind::Int(None));
    }
}
