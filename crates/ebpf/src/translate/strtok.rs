//! `strtok(s, delims)` in translated code, as the interpreter's (`vm::subr`, `fn strtok`): the
//! string being tokenized and the position reached belong to the probe's firing, shared by every
//! clause of it, so a `strtok(NULL, d)` in one clause continues the string a `strtok(s, d)` in an
//! earlier clause began. `s` and `delims` are each read up to `strsize - 1` characters; a NULL
//! string (a string variable holding none) faults with `DTRACEFLT_BADADDR` at 0; a `NULL`
//! pointer as `s` continues the saved string, or gives NULL when none is saved (none yet in this
//! firing, or the last one used up). Leading delimiters are skipped; the token runs to the next
//! delimiter or the string's end, and the position is left at that delimiter; nothing left but
//! delimiters gives NULL and forgets the string.
//!
//! The firing's state is the context's ([`super::ProbeContext::emit_strtok_state`]): a per-CPU
//! copy of the string (one [`super::string_scratch_width`] slot, NUL-terminated within
//! `strsize`) and a word of the probe's frame, zero when the firing starts, holding the position
//! plus one (0: no string saved). Where the context has none (a clause that does not run whole at
//! the probe, or whose probe keeps strtok()'s state in dtrace) the clause stays in dtrace.
//!
//! The delimiters become a 256-bit set in the scratch (built at translation for a constant, else
//! by a loop over their bytes that sets one bit per byte without a branch); the NUL is added to
//! the set, so the scan for the token's end stops at the string's end too. The scans are loops
//! bounded by the position itself (each compares it with `strsize - 1`, so the verifier walks
//! them once per position); the positions they find leave through the scratch (a word the
//! verifier knows nothing of), so the code after them is verified once, not once per position.
//! The token is copied into a zeroed result slot of the string scratch: a string variable's kind,
//! whose register holds 0 for NULL.

use super::{FaultAddr, Kind, Pushed, State, Translator, Untranslatable};
use crate::insn::{helper, op, Size, R0, R1, R10, R2, R3, R4, R5};
use dtrace_dif::vm::FaultKind;

/// Bytes of the delimiter set (a bit per byte value) and of the two words after it (the token's
/// first byte and its end, see the module notes).
const SET_BYTES: usize = 32;
const WORDS_BYTES: usize = 16;

/// The first argument of a `strtok()`: a string to tokenize, or the `NULL` pointer.
enum Source {
    String(Kind),
    Continue,
}

impl Translator<'_> {
    /// `strtok()` of the arguments on the tuple stack into `rd` (see the module notes).
    pub(super) fn strtok(
        &mut self,
        pc: usize,
        s: &mut State,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let refused = |why: String| Untranslatable::Value {
            pc,
            what: format!("strtok(): {why}"),
        };
        let pushed = s.tuple.clone().unwrap_or_default();
        let (source, delims) = match pushed.as_slice() {
            [Pushed::Str(k), Pushed::Str(d)]
                if super::strjoin::followed(k) && super::strjoin::followed(d) =>
            {
                (Source::String(k.clone()), d.clone())
            }
            [Pushed::Reg(r), Pushed::Str(d)]
                if s[(*r & 7) as usize] == Kind::Int(Some(0)) && super::strjoin::followed(d) =>
            {
                (Source::Continue, d.clone())
            }
            _ => return Err(refused("arguments the translator does not follow".into())),
        };
        let (most, most32) = self.string_bound().map_err(refused)?;
        let width = super::string_scratch_width(self.strsize);
        // The result slot, the work slot (two wide, see `strjoin`), the set and the words.
        let extra = (SET_BYTES + WORDS_BYTES).div_ceil(width);
        let widths = 3 + extra;
        let offset = self.scratch_slots * width;
        self.scratch_slots += widths;
        let no_scratch = self.fault_site(pc, FaultKind::NoScratch, FaultAddr::Zero);
        let null = (matches!(&source, Source::String(Kind::VarStr)) || delims == Kind::VarStr)
            .then(|| self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Zero));
        // Frame slots free while the subroutine runs (past its two arguments).
        let (scratch_at, copy_at) = (self.frame.tuple(3), self.frame.tuple(4));
        let buf = self.frame.load_buf();
        let (set, first, end) = (
            3 * width,
            (3 * width + SET_BYTES) as i16,
            (3 * width + SET_BYTES + 8) as i16,
        );
        let set16 = set as i16;
        self.ctx
            .emit_string_scratch(&mut self.a, offset, widths * width)
            .map_err(refused)?;
        let a = &mut self.a;
        a.jmp_imm(op::JEQ, R0, 0, no_scratch);
        a.store(Size::DW, R10, scratch_at, R0);
        // The result slot and the work slot's first width zeroed.
        for w in (0..2 * width).step_by(8) {
            a.store_imm(Size::DW, R0, w as i16, 0);
        }
        let position = self.ctx.emit_strtok_state(&mut self.a).map_err(refused)?;
        let a = &mut self.a;
        a.jmp_imm(op::JEQ, R0, 0, no_scratch);
        a.store(Size::DW, R10, copy_at, R0);
        let (none, done) = (a.label(), a.label());
        // R1 ends as the position the scan starts at.
        match &source {
            Source::String(k) => {
                // Into the work slot, then the firing's copy, from the first byte.
                a.load(Size::DW, R1, R10, scratch_at)
                    .alu_imm(op::ADD, R1, width as i32);
                a.store(Size::DW, R10, buf, R1);
                a.mov_imm(R4, 0);
                self.append(pc, k, self.frame.tuple(0), null)?;
                let a = &mut self.a;
                a.load(Size::DW, R1, R10, scratch_at);
                a.load(Size::DW, R3, R10, copy_at);
                for w in (0..width as i16).step_by(8) {
                    a.load(Size::DW, R2, R1, width as i16 + w)
                        .store(Size::DW, R3, w, R2);
                }
                a.store_imm(Size::DW, R10, position, 1);
            }
            Source::Continue => {}
        }
        // The delimiters' set.
        let a = &mut self.a;
        match &delims {
            Kind::StrConst(b) => {
                let mut bits = [0u64; SET_BYTES / 8];
                for &c in b
                    .split(|&c| c == 0)
                    .next()
                    .unwrap_or_default()
                    .iter()
                    .take(most)
                {
                    bits[usize::from(c) / 64] |= 1 << (c % 64);
                }
                bits[0] |= 1;
                a.load(Size::DW, R1, R10, scratch_at);
                for (i, w) in bits.iter().enumerate() {
                    a.ld_imm64(R2, *w);
                    a.store(Size::DW, R1, set16 + 8 * i as i16, R2);
                }
            }
            d => {
                let d = d.clone();
                a.load(Size::DW, R1, R10, scratch_at);
                for w in (0..SET_BYTES as i16).step_by(8) {
                    a.store_imm(Size::DW, R1, set16 + w, 0);
                }
                // The work slot is free again: the delimiters go there.
                a.alu_imm(op::ADD, R1, width as i32);
                for w in (0..width as i16).step_by(8) {
                    a.store_imm(Size::DW, R1, w, 0);
                }
                a.store(Size::DW, R10, buf, R1);
                a.mov_imm(R4, 0);
                self.append(pc, &d, self.frame.tuple(1), null)?;
                let most_d = self.most_delims(&d);
                let a = &mut self.a;
                // Every byte of the slot up to the most the delimiters hold (those past the NUL
                // are zero): set[c >> 3] |= 1 << (c & 7).
                let top = a.label();
                a.load(Size::DW, R1, R10, buf);
                a.mov_imm(R5, most_d.max(1) as i32);
                a.bind(top);
                a.load(Size::B, R2, R1, 0);
                a.mov(R3, R2).alu_imm(op::AND, R3, 7);
                a.mov_imm(R4, 1).alu(op::LSH, R4, R3);
                a.alu_imm(op::RSH, R2, 3);
                a.load(Size::DW, R3, R10, scratch_at).alu(op::ADD, R3, R2);
                a.load(Size::B, R2, R3, set16).alu(op::OR, R2, R4);
                a.store(Size::B, R3, set16, R2);
                a.alu_imm(op::ADD, R1, 1).alu_imm(op::SUB, R5, 1);
                a.jmp_imm(op::JNE, R5, 0, top);
                // The NUL ends a token.
                a.load(Size::DW, R3, R10, scratch_at);
                a.load(Size::B, R2, R3, set16).alu_imm(op::OR, R2, 1);
                a.store(Size::B, R3, set16, R2);
            }
        }
        let a = &mut self.a;
        // No string saved: NULL, the state as it is.
        a.load(Size::DW, R1, R10, position);
        let saved = a.label();
        a.jmp_imm(op::JNE, R1, 0, saved);
        a.mov_imm(R1, 0).ja(done);
        a.bind(saved);
        a.alu_imm(op::SUB, R1, 1);
        // Skip the delimiters: R1 the position, R2 its byte's address, R3 the byte, R4 its bit.
        let (skip, start) = (a.label(), a.label());
        a.bind(skip);
        a.jmp_imm(op::JGT, R1, most32, none);
        a.load(Size::DW, R2, R10, copy_at).alu(op::ADD, R2, R1);
        a.load(Size::B, R3, R2, 0);
        a.jmp_imm(op::JEQ, R3, 0, none);
        emit_in_set(a, scratch_at, set16);
        a.jmp_imm(op::JEQ, R4, 0, start);
        a.alu_imm(op::ADD, R1, 1).ja(skip);
        // The token's first byte, through the scratch (see the module notes).
        a.bind(start);
        a.load(Size::DW, R2, R10, scratch_at);
        a.store(Size::DW, R2, first, R1);
        a.load(Size::DW, R1, R2, first);
        // Its end: the next byte in the set (the NUL among them).
        let (scan, stop) = (a.label(), a.label());
        a.bind(scan);
        a.jmp_imm(op::JGT, R1, most32, stop);
        a.load(Size::DW, R2, R10, copy_at).alu(op::ADD, R2, R1);
        a.load(Size::B, R3, R2, 0);
        emit_in_set(a, scratch_at, set16);
        a.jmp_imm(op::JNE, R4, 0, stop);
        a.alu_imm(op::ADD, R1, 1).ja(scan);
        a.bind(stop);
        a.load(Size::DW, R2, R10, scratch_at);
        a.store(Size::DW, R2, end, R1);
        // The position after the token, then the token into the result slot.
        a.load(Size::DW, R1, R2, end);
        a.mov(R3, R1).alu_imm(op::ADD, R3, 1);
        a.store(Size::DW, R10, position, R3);
        a.load(Size::DW, R3, R2, first);
        a.jmp_imm(op::JGT, R3, most32, none);
        a.alu(op::SUB, R1, R3);
        a.jmp_imm(op::JGT, R1, most32, none);
        a.load(Size::DW, R0, R10, copy_at).alu(op::ADD, R0, R3);
        a.mov(R3, R0);
        a.mov(R2, R1).alu_imm(op::ADD, R2, 1);
        a.load(Size::DW, R1, R10, scratch_at);
        a.call(helper::PROBE_READ_KERNEL_STR);
        a.load(Size::DW, R1, R10, scratch_at);
        a.ja(done);
        // Nothing left: NULL, and the string forgotten.
        a.bind(none);
        a.store_imm(Size::DW, R10, position, 0);
        a.mov_imm(R1, 0);
        a.bind(done);
        self.put(s, rd, R1, Kind::VarStr);
        Ok(())
    }

    /// The most characters the delimiters `d` hold as the interpreter reads them.
    fn most_delims(&self, d: &Kind) -> usize {
        match d {
            Kind::Execname => super::COMM_LEN - 1,
            _ => self.strsize - 1,
        }
        .min(self.strsize - 1)
    }
}

/// R4 = 1 when byte R3 is in the set at `set` of the scratch whose address the frame holds at
/// `scratch_at`, else 0. Uses R5.
fn emit_in_set(a: &mut crate::insn::Asm, scratch_at: i16, set: i16) {
    a.mov(R4, R3).alu_imm(op::RSH, R4, 3);
    a.load(Size::DW, R5, R10, scratch_at).alu(op::ADD, R5, R4);
    a.load(Size::B, R4, R5, set);
    a.mov(R5, R3).alu_imm(op::AND, R5, 7);
    a.alu(op::RSH, R4, R5).alu_imm(op::AND, R4, 1);
}
