//! `substr(s, index [, length])` in translated code, as the interpreter's (`strfn::substr`):
//! `s` read up to `strsize - 1` characters (length `L`); a negative `index` counts from the
//! end, and one still before the start shortens `length` by as much; an `index` at or past the
//! end, or still negative, gives the empty string; a negative `length` leaves that many
//! characters off the end; the result is at most `strsize - 1` characters (`length` defaults
//! to `strsize`). NULL `s` faults with `DTRACEFLT_BADADDR` at 0.
//!
//! The interpreter's 64-bit arithmetic saturates; here every sum that could overflow is
//! replaced by a compare that cannot (each operand's sign is known where it is made).
//!
//! `s` is first copied (as `strjoin()` appends a part) into a work slot of the context's
//! string scratch, then its characters from `index` on, as many as the rules leave, into the
//! zeroed result slot just before it with `bpf_probe_read_kernel_str`.

use super::{FaultAddr, Kind, Pushed, State, Translator, Untranslatable};
use crate::insn::{helper, op, Size, R0, R1, R10, R2, R3, R4};
use dtrace_dif::vm::FaultKind;

impl Translator<'_> {
    /// `substr()` of the arguments on the tuple stack into `rd` (see the module notes).
    pub(super) fn substr(
        &mut self,
        pc: usize,
        s: &mut State,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let refused = super::refusal(pc, "substr()");
        let pushed = s.tuple.clone().unwrap_or_default();
        let string = match pushed.split_first() {
            Some((Pushed::Str(k), rest))
                if super::strjoin::followed(k) && (1..=2).contains(&rest.len()) =>
            {
                k.clone()
            }
            _ => return Err(refused("arguments the translator does not follow".into())),
        };
        // The integers' frame offsets: a register's own slot, or the tuple slot it was saved to.
        let at = self.int_args_from(pc, s, 1)?;
        let size = self.strsize;
        let (_, most32) = self.string_bound().map_err(refused)?;
        let width = super::string_scratch_width(size);
        // The result's slot, then the work slot (two wide: see `strjoin`).
        let offset = self.scratch_slots * width;
        self.scratch_slots += 3;
        let buf = self.frame.load_buf();
        let no_scratch = self.fault_site(pc, FaultKind::NoScratch, FaultAddr::Zero);
        let null = (string == Kind::VarStr)
            .then(|| self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Zero));
        self.ctx
            .emit_string_scratch(&mut self.a, offset, 3 * width)
            .map_err(refused)?;
        let a = &mut self.a;
        a.jmp_imm(op::JEQ, R0, 0, no_scratch);
        for w in (0..2 * width).step_by(8) {
            a.store_imm(Size::DW, R0, w as i16, 0);
        }
        a.alu_imm(op::ADD, R0, width as i32);
        a.store(Size::DW, R10, buf, R0);
        a.mov_imm(R4, 0);
        self.append(pc, &string, self.frame.tuple(0), null)?;
        // R4: L; R1: index; R2: the characters wanted.
        let a = &mut self.a;
        a.load(Size::DW, R1, R10, at[0]);
        match at.get(1) {
            Some(&n) => a.load(Size::DW, R2, R10, n),
            None => a.mov_imm(R2, size as i32),
        };
        let (counted, empty, copy) = (a.label(), a.label(), a.label());
        let not_negative = a.label();
        a.jmp_imm(op::JSGE, R1, 0, not_negative);
        a.alu(op::ADD, R1, R4);
        a.jmp_imm(op::JSGE, R1, 0, not_negative);
        // Still before the start: when index + length > 0 (only a positive length gets there,
        // and then the sum cannot overflow), length shrinks by the overshoot, from 0.
        a.jmp_imm(op::JSLE, R2, 0, empty);
        a.mov(R3, R2).alu(op::ADD, R3, R1);
        a.jmp_imm(op::JSLE, R3, 0, empty);
        a.mov(R2, R3).mov_imm(R1, 0);
        a.bind(not_negative);
        // 0 <= index: past the end, nothing.
        a.jmp_reg(op::JSGE, R1, R4, empty);
        let not_short = a.label();
        a.jmp_imm(op::JSGE, R2, 0, not_short);
        // A negative length leaves characters off the end: length + (L - index).
        a.mov(R3, R4).alu(op::SUB, R3, R1).alu(op::ADD, R2, R3);
        a.ja(counted);
        a.bind(not_short);
        // index + length > size (no overflow: length > size - index).
        a.mov_imm(R3, size as i32).alu(op::SUB, R3, R1);
        a.jmp_reg(op::JSLE, R2, R3, counted);
        a.mov(R2, R3);
        a.bind(counted);
        // The characters copied: length, at most strsize - 1 and those left after index.
        a.jmp_imm(op::JSLE, R2, 0, empty);
        a.mov(R3, R4).alu(op::SUB, R3, R1);
        let fits = a.label();
        a.jmp_reg(op::JSLE, R2, R3, fits);
        a.mov(R2, R3);
        a.bind(fits);
        let under = a.label();
        a.jmp_imm(op::JSLE, R2, most32, under);
        a.mov_imm(R2, most32);
        a.bind(under);
        a.jmp_imm(op::JSGE, R2, 0, copy);
        a.bind(empty);
        a.mov_imm(R1, 0).mov_imm(R2, 0);
        a.bind(copy);
        // From the work slot at index, into the result slot: R2 characters and the NUL.
        a.load(Size::DW, R3, R10, buf).alu(op::ADD, R3, R1);
        a.alu_imm(op::ADD, R2, 1);
        a.load(Size::DW, R1, R10, buf)
            .alu_imm(op::SUB, R1, width as i32);
        a.call(helper::PROBE_READ_KERNEL_STR);
        a.load(Size::DW, R1, R10, buf)
            .alu_imm(op::SUB, R1, width as i32);
        self.put(s, rd, R1, Kind::Scratch);
        Ok(())
    }
}
