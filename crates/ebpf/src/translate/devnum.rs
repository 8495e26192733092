//! `getmajor(dev)` and `getminor(dev)` in translated code, as the interpreter's: a Linux kernel
//! `dev_t` is 32 bits, the major number above the 20 bits of the minor one; `getmajor()` gives
//! bits 20 to 31 of the value's low 32 bits, `getminor()` its low 20 bits, each zero-extended.

use super::{Kind, State, Translator, Untranslatable};
use crate::insn::{op, Size, R1, R10};
use dtrace_dif::subr::Subr;

/// Bits of a kernel `dev_t`'s minor number (`MINORBITS`).
const MINOR_BITS: i32 = 20;

impl Translator<'_> {
    /// `getmajor()` (`which` [`Subr::Getmajor`]) or `getminor()` of the integer on the tuple
    /// stack into `rd`.
    pub(super) fn devnum(
        &mut self,
        pc: usize,
        s: &mut State,
        which: Subr,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let args = self.int_args(pc, s)?;
        let [dev] = args[..] else {
            return Err(Untranslatable::Invalid {
                pc,
                what: format!("{}() with {} arguments", which.name(), args.len()),
            });
        };
        let a = &mut self.a;
        a.load(Size::DW, R1, R10, dev);
        if which == Subr::Getmajor {
            // The low 32 bits to the top, then down past the minor number.
            a.alu_imm(op::LSH, R1, 32)
                .alu_imm(op::RSH, R1, 32 + MINOR_BITS);
        } else {
            a.alu_imm(op::AND, R1, (1 << MINOR_BITS) - 1);
        }
        self.put(s, rd, R1, Kind::Int(None));
        Ok(())
    }
}
