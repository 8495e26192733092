//! `rand()` in translated code, as the interpreter's: 32 uniformly random bits, zero-extended
//! (DTrace for Linux's, `bpf_get_prandom_u32`), which the kernel's helper gives as they are.

use super::{Kind, State, Translator};
use crate::insn::{helper, R0};

impl Translator<'_> {
    /// `rand()` into `rd`.
    /// It takes no argument: the tuple stack is not read (as the interpreter's, which ignores it).
    pub(super) fn rand(&mut self, s: &mut State, rd: u8) {
        self.a.call(helper::GET_PRANDOM_U32);
        self.put(s, rd, R0, Kind::Int(None));
    }
}
