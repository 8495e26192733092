//! `strtok(s, delims)` in translated code, as the interpreter's (`vm::subr`, `fn strtok`): the
//! string being tokenized and the position reached belong to the probe's firing, shared by every
//! clause of it, so a `strtok(NULL, d)` in one clause continues the string a `strtok(s, d)` in an
//! earlier clause began. `s` and `delims` are each read up to `strsize - 1` characters; a NULL
//! string (a string variable holding none) faults with `DTRACEFLT_BADADDR` at 0; a `NULL`
//! pointer as `s` continues the saved string, or gives NULL when none is saved (none yet in this
//! firing, or the last one used up). A pointer as `s` (`(char *)curthread->comm`, `(char *)arg1`
//! at `fbt`, or a char array pushed by reference, `curthread->comm`, which only `strtok()`'s
//! string takes so) is NULL when it is 0 at run time, else the string at it, read (after the
//! delimiters, as the interpreter reads them) as `stringof` reads a string at a kernel address,
//! faulting where the interpreter does; one the interpreter reads from user memory or the
//! probe's own copy (a probe argument elsewhere) keeps the clause in dtrace, saying so. Leading
//! delimiters are skipped; the token runs to the next delimiter or the string's end, and the
//! position is left at that delimiter; nothing left but delimiters gives NULL and forgets the
//! string.
//!
//! The firing's state is the context's ([`super::ProbeContext::emit_strtok_state`]): a per-CPU
//! copy of the string (one [`super::string_scratch_width`] slot, NUL-terminated within
//! `strsize`) and a word of the probe's frame, zero when the firing starts, holding the position
//! plus one (0: no string saved). Where the context has none (a clause that does not run whole at
//! the probe, or whose probe keeps strtok()'s state in dtrace) the clause stays in dtrace: the
//! state is never split between the two paths. The interpreter would continue only a string in
//! its own scratch (a firing's record would have to carry the kernel's copy and position), and
//! dtrace runs a firing's clauses after the kernel's, so a kernel clause after a dtrace one, or a
//! clause's predicate at the probe with its actions in dtrace, would tokenize out of order.
//!
//! The delimiters become a 256-bit set in the scratch (built at translation for a constant, else
//! by a loop over their bytes that sets one bit per byte without a branch); the NUL is added to
//! the set, so the token's end is found at the string's end too. One loop then looks at every
//! position of the copy (up to the most characters the string begun can hold: `execname`'s 15,
//! a constant's length; every one for a string continued), the same number of times whatever
//! the string (a constant count the verifier follows exactly), without a branch per byte: the
//! token's first byte (the first at or after the start that is not in the set) and its end (the
//! first in the set after it) are kept as arithmetic on the comparisons' sign bits. The verifier
//! keeps a pending state for each branch it cannot decide and gives up past 8192 of them: a
//! branch per byte would refuse a few calls at a large `strsize`.
//!
//! The token is copied into a zeroed result slot of the string scratch: a string variable's kind,
//! whose register holds 0 for NULL.

use super::{FaultAddr, Kind, Pushed, State, Translator, Untranslatable};
use crate::insn::{helper, op, Size, R0, R1, R10, R2, R3, R4, R5};
use dtrace_dif::vm::FaultKind;

/// Bytes of the delimiter set (a bit per byte value).
const SET_BYTES: usize = 32;

/// A position not found yet (more than any `strsize`).
const UNSET: i32 = 1 << 30;

/// Where a `strtok()` keeps its state in the frame: the tuple slots past its two arguments, free
/// while the subroutine runs.
struct Slots {
    /// The string scratch taken (its address).
    scratch: i16,
    /// The firing's copy (its address).
    copy: i16,
    /// The position the scan starts from, the position scanned, the token's first byte and its
    /// end ([`UNSET`] until found).
    from: i16,
    k: i16,
    first: i16,
    end: i16,
}

/// The first argument of a `strtok()`: a string to tokenize, the `NULL` pointer, or an address
/// (a pointer, in DIF register `r`): NULL when it is 0, else the string there.
enum Source {
    String(Kind),
    Continue,
    Address(u8),
}

impl Translator<'_> {
    fn strtok_slots(&self) -> Slots {
        let f = self.frame;
        Slots {
            scratch: f.tuple(2),
            copy: f.tuple(3),
            from: f.tuple(4),
            k: f.tuple(5),
            first: f.tuple(6),
            end: f.tuple(7),
        }
    }

    /// `strtok()` of the arguments on the tuple stack into `rd` (see the module notes).
    pub(super) fn strtok(
        &mut self,
        pc: usize,
        s: &mut State,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let refused = super::refusal(pc, "strtok()");
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
            [Pushed::Reg(r), Pushed::Str(d)]
                if matches!(s[(*r & 7) as usize], Kind::Int(_)) && super::strjoin::followed(d) =>
            {
                (Source::Address(*r & 7), d.clone())
            }
            _ => return Err(refused("arguments the translator does not follow".into())),
        };
        let (most, most32) = self.string_bound().map_err(refused)?;
        // The positions the scan looks at: a string begun here ends within the most characters
        // it can hold (`execname`'s 15, a constant's length); one continued may be any.
        let scan_most = match &source {
            Source::String(k) => i32::try_from(self.most_chars(k)).unwrap_or(most32),
            Source::Continue | Source::Address(_) => most32,
        };
        if let Source::Address(r) = source {
            self.strtok_address(pc, s, r, &delims)?;
        }
        let width = super::string_scratch_width(self.strsize);
        // The result slot, the work slot (two wide, see `strjoin`), and the set: in the work
        // slot's second width, which only the verifier's bound of a copy into the work slot
        // needs (no string there is longer than one width), when it fits there.
        let set = if width >= SET_BYTES {
            2 * width
        } else {
            3 * width
        };
        let widths = (set + SET_BYTES).div_ceil(width).max(3);
        let offset = self.scratch_slots * width;
        self.scratch_slots += widths;
        let no_scratch = self.fault_site(pc, FaultKind::NoScratch, FaultAddr::Zero);
        let null = (matches!(&source, Source::String(Kind::VarStr)) || delims == Kind::VarStr)
            .then(|| self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Zero));
        let t = self.strtok_slots();
        let (scratch_at, copy_at) = (t.scratch, t.copy);
        let buf = self.frame.load_buf();
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
        // An address read into the scratch (its address in the first tuple slot, 0 for NULL)
        // is a string there; NULL continues.
        let (source, continues) = match source {
            Source::Address(_) => {
                let continues = a.label();
                a.load(Size::DW, R1, R10, self.frame.tuple(0));
                a.jmp_imm(op::JEQ, R1, 0, continues);
                (Source::String(Kind::Scratch), Some(continues))
            }
            other => (other, None),
        };
        match &source {
            Source::String(k) => {
                let a = &mut self.a;
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
            Source::Continue | Source::Address(_) => {}
        }
        let a = &mut self.a;
        if let Some(continues) = continues {
            a.bind(continues);
        }
        // The delimiters' set.
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
                // The work slot is free again: the delimiters go there (its first width).
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
        a.jmp_imm(op::JGT, R1, most32, none);
        a.store(Size::DW, R10, t.from, R1);
        a.store_imm(Size::DW, R10, t.k, 0);
        a.store_imm(Size::DW, R10, t.first, UNSET);
        a.store_imm(Size::DW, R10, t.end, UNSET);
        // Every position k of the copy, the NUL's included: the token's first byte is the first
        // at or after the start not in the set, its end the first in the set after it (see the
        // module notes). R1: the byte's address; R5: whether it is in the set.
        let top = a.label();
        a.load(Size::DW, R1, R10, copy_at);
        a.bind(top);
        a.load(Size::B, R0, R1, 0);
        a.mov(R2, R0).alu_imm(op::RSH, R2, 3);
        a.load(Size::DW, R5, R10, scratch_at).alu(op::ADD, R5, R2);
        a.load(Size::B, R5, R5, set16);
        a.alu_imm(op::AND, R0, 7)
            .alu(op::RSH, R5, R0)
            .alu_imm(op::AND, R5, 1);
        a.load(Size::DW, R4, R10, t.k);
        // found = (from <= k) & !in_set & (k < first); first += found * (k - first).
        a.load(Size::DW, R2, R10, t.from);
        a.alu(op::SUB, R2, R4)
            .alu_imm(op::SUB, R2, 1)
            .alu_imm(op::RSH, R2, 63);
        a.mov(R0, R5).alu_imm(op::XOR, R0, 1).alu(op::AND, R2, R0);
        a.load(Size::DW, R3, R10, t.first);
        a.mov(R0, R4).alu(op::SUB, R0, R3).alu_imm(op::RSH, R0, 63);
        a.alu(op::AND, R2, R0);
        a.mov(R0, R4).alu(op::SUB, R0, R3).alu(op::MUL, R0, R2);
        a.alu(op::ADD, R3, R0).store(Size::DW, R10, t.first, R3);
        // ended = (first <= k) & in_set & (k < end); end += ended * (k - end).
        a.mov(R0, R3).alu(op::SUB, R0, R4).alu_imm(op::SUB, R0, 1);
        a.alu_imm(op::RSH, R0, 63).alu(op::AND, R5, R0);
        a.load(Size::DW, R3, R10, t.end);
        a.mov(R0, R4).alu(op::SUB, R0, R3).alu_imm(op::RSH, R0, 63);
        a.alu(op::AND, R5, R0);
        a.mov(R0, R4).alu(op::SUB, R0, R3).alu(op::MUL, R0, R5);
        a.alu(op::ADD, R3, R0).store(Size::DW, R10, t.end, R3);
        a.alu_imm(op::ADD, R4, 1).store(Size::DW, R10, t.k, R4);
        a.alu_imm(op::ADD, R1, 1);
        a.jmp_imm(op::JLE, R4, scan_most, top);
        // No token: NULL. Else the position after it, and the token into the result slot.
        a.load(Size::DW, R3, R10, t.first);
        a.jmp_imm(op::JGT, R3, most32, none);
        a.load(Size::DW, R1, R10, t.end);
        a.jmp_imm(op::JGT, R1, most32, none);
        a.mov(R2, R1).alu_imm(op::ADD, R2, 1);
        a.store(Size::DW, R10, position, R2);
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

    /// For `strtok()` of the address in DIF register `r` (delimiters `delims`): reads the
    /// string there into the scratch as the interpreter reads a string at an address (see
    /// `stringof`), its address left in the first tuple slot; leaves 0 there when the address
    /// is 0 (NULL: the saved string continues). As the interpreter, the delimiters are read
    /// first: NULL ones fault before the string's read does.
    fn strtok_address(
        &mut self,
        pc: usize,
        s: &State,
        r: u8,
        delims: &Kind,
    ) -> Result<(), Untranslatable> {
        let at = self.frame.tuple(0);
        if *delims == Kind::VarStr {
            let null = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Zero);
            let a = &mut self.a;
            a.load(Size::DW, R1, R10, self.frame.tuple(1));
            a.jmp_imm(op::JEQ, R1, 0, null);
        }
        let read = self.a.label();
        let a = &mut self.a;
        a.load(Size::DW, R1, R10, self.frame.reg(r));
        a.store(Size::DW, R10, at, R1);
        a.jmp_imm(op::JEQ, R1, 0, read);
        self.kernel_string(pc, s, r, at).map_err(|e| match e {
            Untranslatable::Value { what, .. } => super::refusal(pc, "strtok()")(what),
            e => e,
        })?;
        self.a.bind(read);
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
