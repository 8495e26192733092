//! The string argument of a subroutine that rewrites or reads a string (`toupper()`,
//! `tolower()`, `basename()`, `dirname()`, `cleanpath()`, `strtoll()`: the first argument, any
//! after it integers the subroutine reads itself), read as the interpreter reads it (`arg_str`): at
//! most `strsize - 1` characters, NULL (a string variable holding none) faulting with
//! `DTRACEFLT_BADADDR` at address 0. It is copied (as `strjoin()` appends a part) into a zeroed
//! work slot of the context's per-CPU string scratch, where the subroutine rewrites it or reads
//! its characters back.
//!
//! The scratch taken, in slots of [`super::string_scratch_width`]: the result's slots (none when
//! the work slot is the result), the work slot, two wide (the verifier bounds the copy by its
//! largest offset plus its largest size, see `strjoin`), and the bytes `extra` asks for after it
//! (integers kept in memory, where the verifier does not follow their values: a loop whose
//! values it followed would be walked once per combination of them).

use super::{FaultAddr, Pushed, State, Translator, Untranslatable};
use crate::insn::{op, Size, R0, R10, R4};
use dtrace_dif::vm::FaultKind;

/// Where a subroutine's work lies in the scratch, relative to the work slot.
#[derive(Clone, Copy, Debug)]
pub(super) struct Work {
    /// Bytes from the result's first slot to the work slot.
    pub result_before: usize,
    /// Bytes from the work slot to the `extra` bytes.
    pub extra_after: usize,
}

impl Translator<'_> {
    /// For subroutine `name`, whose first argument on the tuple stack is a string (any others
    /// integers): takes
    /// `result_slots` zeroed slots, the work slot and `extra` bytes of the scratch (see the
    /// module notes) and copies the string into the work slot. The work slot's address is then
    /// in the frame's load buffer and the string's length (at most `strsize - 1`) in R4.
    pub(super) fn string_into_work(
        &mut self,
        pc: usize,
        s: &State,
        name: &str,
        result_slots: usize,
        extra: usize,
    ) -> Result<Work, Untranslatable> {
        let named = format!("{name}()");
        let refused = super::refusal(pc, &named);
        let string = match s.tuple.as_deref() {
            Some([Pushed::Str(k), rest @ ..])
                if super::strjoin::followed(k)
                    && !rest.iter().any(|p| matches!(p, Pushed::Str(_))) =>
            {
                k.clone()
            }
            _ => return Err(refused("a string the translator does not follow".into())),
        };
        self.string_bound().map_err(refused)?;
        i32::try_from(self.strsize).map_err(|_| refused("strsize too large".into()))?;
        let width = super::string_scratch_width(self.strsize);
        let slots = result_slots + 2 + extra.div_ceil(width);
        let offset = self.scratch_slots * width;
        self.scratch_slots += slots;
        let buf = self.frame.load_buf();
        let no_scratch = self.fault_site(pc, FaultKind::NoScratch, FaultAddr::Zero);
        let null = (string == super::Kind::VarStr)
            .then(|| self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Zero));
        self.ctx
            .emit_string_scratch(&mut self.a, offset, slots * width)
            .map_err(refused)?;
        let a = &mut self.a;
        a.jmp_imm(op::JEQ, R0, 0, no_scratch);
        for w in (0..(result_slots + 1) * width).step_by(8) {
            a.store_imm(Size::DW, R0, w as i16, 0);
        }
        a.alu_imm(op::ADD, R0, (result_slots * width) as i32);
        a.store(Size::DW, R10, buf, R0);
        a.mov_imm(R4, 0);
        self.append(pc, &string, self.frame.tuple(0), null)?;
        Ok(Work {
            result_before: result_slots * width,
            extra_after: 2 * width,
        })
    }
}
