//! The string searches in translated code, as the interpreter's (`strfn::index_of`, the `call`
//! of `strchr`...): `index(s, sub [, start])` and `rindex(s, sub [, start])` (a position, or
//! -1), `strstr(s, sub)` (the rest of `s` from the first match, or NULL), `strchr(s, c)` and
//! `strrchr(s, c)` (the rest of `s` from the first or last byte `c`, the NUL among the bytes
//! searched, or NULL). Each string is read up to `strsize - 1` characters; a NULL string (a
//! string variable holding none) faults with `DTRACEFLT_BADADDR` at 0.
//!
//! Every string searched is first copied (as `strjoin()` appends a part) into a zeroed work slot
//! of the context's string scratch, two slots wide (see `strjoin`), so its bytes end with a NUL
//! at its length and the search reads nothing but the scratch. A constant `sub` is compared in
//! place, unrolled. The searches are bounded loops the verifier walks once per position (and,
//! for a `sub` not constant, once per byte `sub` can hold at each position). A search whose walk
//! would be more than [`WALK_BUDGET`] instructions is a `bpf_loop` over its positions where the
//! probe may loop (`ProbeContext::loops`), `sub` then always in its work slot: the callback
//! ([`Seek`]) compares at the position its index gives, reading the work slots' addresses from
//! the probe code's frame through its context, so the verifier walks it once (a bounded loop
//! over the bytes of `sub`); elsewhere such a search stays in dtrace, with that reason. The bytes
//! at a position are compared without a branch per byte (their differences or-ed), as the
//! verifier keeps a state for each branch it cannot decide, and gives up past 8192. A position
//! found leaves the loop as the difference of two pointers, a number the verifier knows nothing
//! of, so the code after it is not verified once per position (as `strlen`). A string result
//! (`strstr()`, `strchr()`) is the rest of the work slot copied into a zeroed result slot: a
//! string variable's kind, whose register holds 0 for NULL. The interpreter's string result
//! points into `s` itself, read again up to `strsize` characters: the same bytes, but for a
//! constant `s` longer than `strsize`, whose rest the work slot does not hold (such a call
//! stays in dtrace).

use super::{FaultAddr, Kind, Pushed, State, Translator, Untranslatable, COMM_LEN};
use crate::insn::{helper, op, Asm, Label, Size, R0, R1, R10, R2, R3, R4, R5, R6, R7};
use dtrace_dif::subr::Subr;
use dtrace_dif::vm::FaultKind;

/// The most instructions the verifier may walk for one search (its limit is a million for the
/// whole program).
pub(super) const WALK_BUDGET: usize = 200_000;

/// Where a search keeps its state in the frame: the tuple slots past the arguments (at most
/// three), free while the subroutine runs.
struct Slots {
    /// The work slot of `s` (its address).
    hay: i16,
    /// The work slot of `sub` (its address), or `c` for `strchr()`.
    needle: i16,
    /// Spills of the outer loop's registers (the first holds `s`'s length before the loop).
    spill: [i16; 3],
}

impl Translator<'_> {
    fn search_slots(&self) -> Slots {
        Slots {
            hay: self.frame.tuple(3),
            needle: self.frame.tuple(4),
            spill: [
                self.frame.tuple(5),
                self.frame.tuple(6),
                self.frame.tuple(7),
            ],
        }
    }

    /// The most characters string `k` holds after the interpreter reads it.
    pub(super) fn most_chars(&self, k: &Kind) -> usize {
        let most = self.strsize - 1;
        match k {
            Kind::StrConst(b) => b.split(|&c| c == 0).next().unwrap_or_default().len(),
            Kind::Execname => COMM_LEN - 1,
            _ => most,
        }
        .min(most)
    }

    /// Takes `widths` string-scratch widths for this call site and zeroes the first width of each
    /// slot starting at the widths `zeroed` lists; leaves the region's address in R0.
    fn search_scratch(
        &mut self,
        pc: usize,
        name: &str,
        widths: usize,
        zeroed: &[usize],
    ) -> Result<usize, Untranslatable> {
        let width = super::string_scratch_width(self.strsize);
        let offset = self.scratch_slots * width;
        self.scratch_slots += widths;
        let no_scratch = self.fault_site(pc, FaultKind::NoScratch, FaultAddr::Zero);
        self.ctx
            .emit_string_scratch(&mut self.a, offset, widths * width)
            .map_err(|why| Untranslatable::Value {
                pc,
                what: format!("{name}(): {why}"),
            })?;
        let a = &mut self.a;
        a.jmp_imm(op::JEQ, R0, 0, no_scratch);
        for &z in zeroed {
            for w in (0..width).step_by(8) {
                a.store_imm(Size::DW, R0, (z * width + w) as i16, 0);
            }
        }
        Ok(width)
    }

    /// Copies string `k`, pushed at tuple position `i`, into the zeroed work slot whose address
    /// the frame holds at `slot`; leaves its length in R4. NULL jumps to `null`.
    fn work_copy(
        &mut self,
        pc: usize,
        k: &Kind,
        i: usize,
        slot: i16,
        null: Option<Label>,
    ) -> Result<(), Untranslatable> {
        let buf = self.frame.load_buf();
        self.a.load(Size::DW, R1, R10, slot);
        self.a.store(Size::DW, R10, buf, R1);
        self.a.mov_imm(R4, 0);
        self.append(pc, k, self.frame.tuple(i), null)?;
        // `execname` is appended byte by byte, each NUL leaving with a length the verifier
        // knows: the length as a difference of two pointers makes those paths one, so the
        // search after it is not verified once per length.
        let a = &mut self.a;
        a.load(Size::DW, R1, R10, buf).alu(op::ADD, R1, R4);
        a.load(Size::DW, R2, R10, buf).alu(op::SUB, R1, R2);
        a.mov(R4, R1);
        Ok(())
    }

    /// `index()`, `rindex()` or `strstr()` (`which`) of the arguments on the tuple stack into
    /// `rd` (see the module notes).
    pub(super) fn strsearch(
        &mut self,
        pc: usize,
        s: &mut State,
        which: Subr,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let name = which.name();
        let named = format!("{name}()");
        let refused = super::refusal(pc, &named);
        let pushed = s.tuple.clone().unwrap_or_default();
        let most_args = if which == Subr::Strstr { 2 } else { 3 };
        let (hay, needle) = match pushed.as_slice() {
            [Pushed::Str(h), Pushed::Str(n), ..]
                if super::strjoin::followed(h)
                    && super::strjoin::followed(n)
                    && pushed.len() <= most_args =>
            {
                (h.clone(), n.clone())
            }
            _ => return Err(refused("arguments the translator does not follow".into())),
        };
        let start = match pushed.get(2) {
            None => None,
            Some(Pushed::Reg(r)) => {
                self.int(s, pc, *r)?;
                Some(self.frame.reg(*r))
            }
            Some(Pushed::Saved) => Some(self.frame.tuple(2)),
            Some(Pushed::Str(_)) => return Err(refused("a string where an integer goes".into())),
        };
        let (most, most32) = self.string_bound().map_err(refused)?;
        // A constant `sub`, as the interpreter reads it.
        let constant = match &needle {
            Kind::StrConst(b) => {
                let b = b.split(|&c| c == 0).next().unwrap_or_default();
                Some(b[..b.len().min(most)].to_vec())
            }
            _ => None,
        };
        let (hay_most, needle_most) = (self.most_chars(&hay), self.most_chars(&needle));
        // Positions tried at most, and what the verifier walks for each.
        let positions = |constant: &Option<Vec<u8>>| match constant {
            // The empty string is found before any search.
            Some(c) if c.is_empty() => 0,
            Some(c) => (hay_most + 1).saturating_sub(c.len()),
            None => hay_most,
        };
        let per_position = match &constant {
            Some(c) => 3 * c.len() + 14,
            None => 11 * needle_most + 24,
        };
        // Past the budget, the positions are a `bpf_loop` whose callback compares at one
        // (a constant `sub` copied into its work slot as any other), where the probe has it.
        let looped = positions(&constant) * per_position > WALK_BUDGET;
        if looped {
            self.ctx.loops().map_err(|why| {
                refused(format!(
                    "a search of up to {hay_most} characters for a string of up to \
                     {needle_most} is more than the eBPF verifier walks (a smaller strsize, or \
                     a constant to search for, runs it at the probe), and it cannot loop at the \
                     probe: {why}"
                ))
            })?;
        }
        let constant = constant.filter(|_| !looped);
        let positions = positions(&constant);
        let reverse = which == Subr::Rindex;
        let result = which == Subr::Strstr;
        if result {
            self.result_whole(&hay).map_err(refused)?;
        }
        // The result slot (strstr()), then the work slots of `s` and `sub`.
        let first = usize::from(result);
        let widths = first + 2 + if constant.is_some() { 0 } else { 2 };
        let zeroed: Vec<usize> = if constant.is_some() {
            (0..=first).collect()
        } else {
            (0..=first).chain([first + 2]).collect()
        };
        let null = [&hay, &needle]
            .contains(&&Kind::VarStr)
            .then(|| self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Zero));
        let width = self.search_scratch(pc, name, widths, &zeroed)?;
        let t = self.search_slots();
        let a = &mut self.a;
        a.mov(R1, R0).alu_imm(op::ADD, R1, (first * width) as i32);
        a.store(Size::DW, R10, t.hay, R1);
        if constant.is_none() {
            a.alu_imm(op::ADD, R1, (2 * width) as i32);
            a.store(Size::DW, R10, t.needle, R1);
        }
        self.work_copy(pc, &hay, 0, t.hay, null)?;
        self.a.store(Size::DW, R10, t.spill[0], R4);
        match &constant {
            Some(c) => {
                self.a.mov_imm(R2, c.len() as i32);
            }
            None => {
                self.work_copy(pc, &needle, 1, t.needle, null)?;
                self.a.mov(R2, R4);
            }
        }
        // R1: L, the length of `s`; R2: M, that of `sub`; R3: the first position to try.
        let a = &mut self.a;
        let (done, notfound) = (a.label(), a.label());
        a.load(Size::DW, R1, R10, t.spill[0]);
        let nonempty = a.label();
        a.jmp_imm(op::JNE, R1, 0, nonempty);
        a.jmp_imm(op::JNE, R2, 0, nonempty);
        a.mov_imm(R0, 0).ja(done);
        a.bind(nonempty);
        let search = a.label();
        if reverse {
            a.mov(R3, R1);
            if let Some(at) = start {
                a.load(Size::DW, R3, R10, at);
                let (not_negative, within) = (a.label(), a.label());
                a.jmp_imm(op::JSGE, R3, 0, not_negative);
                // Before the start: only the empty string is found (at 0).
                a.jmp_imm(op::JNE, R2, 0, notfound);
                a.mov_imm(R0, 0).ja(done);
                a.bind(not_negative);
                a.jmp_reg(op::JSLE, R3, R1, within);
                a.mov(R3, R1);
                a.bind(within);
            }
            a.jmp_imm(op::JNE, R2, 0, search);
            a.mov(R0, R3).ja(done);
            a.bind(search);
            // The last position `sub` fits at, L - M.
            a.mov(R5, R1).alu(op::SUB, R5, R2);
            a.jmp_imm(op::JSLT, R5, 0, notfound);
            let below = a.label();
            a.jmp_reg(op::JSLE, R3, R5, below);
            a.mov(R3, R5);
            a.bind(below);
            a.mov(R2, R3).alu_imm(op::ADD, R2, 1);
        } else {
            a.mov_imm(R3, 0);
            if let Some(at) = start {
                a.load(Size::DW, R3, R10, at);
                let (not_negative, within) = (a.label(), a.label());
                a.jmp_imm(op::JSGE, R3, 0, not_negative);
                a.mov_imm(R3, 0);
                a.bind(not_negative);
                a.jmp_reg(op::JSLT, R3, R1, within);
                // At or past the end: only the empty string is found (at the end).
                a.jmp_imm(op::JNE, R2, 0, notfound);
                a.mov(R0, R1).ja(done);
                a.bind(within);
            }
            a.jmp_imm(op::JNE, R2, 0, search);
            a.mov(R0, R3).ja(done);
            a.bind(search);
            // Positions to try: L - M - start + 1.
            a.alu(op::SUB, R1, R2)
                .alu(op::SUB, R1, R3)
                .alu_imm(op::ADD, R1, 1);
            a.mov(R2, R1);
        }
        // R2: positions left to try (any number); R3: the position; R4: the verifier's bound.
        let step = if reverse { -1 } else { 1 };
        let found = a.label();
        if looped {
            let (ctx, first, result) = (t.spill[2], t.spill[0], t.spill[2]);
            let seek = Seek {
                hay: t.hay - ctx,
                needle: t.needle - ctx,
                first: first - ctx,
                result: result - ctx,
                needle_most,
                most32,
                reverse,
            };
            a.jmp_imm(op::JSLE, R2, 0, notfound);
            let within = a.label();
            a.jmp_imm(op::JLE, R2, positions as i32, within);
            a.mov_imm(R2, positions as i32);
            a.bind(within);
            a.store(Size::DW, R10, first, R3);
            a.store_imm(Size::DW, R10, result, -1);
            a.mov(R1, R2);
            a.ld_callback(R2, seek.name(), move |a| seek.emit(a));
            a.frame_addr(R3, i32::from(ctx));
            a.mov_imm(R4, 0).call(helper::LOOP);
            a.load(Size::DW, R0, R10, result);
            a.jmp_imm(op::JSLT, R0, 0, notfound);
            a.ja(done);
        } else if positions == 0 {
            a.ja(notfound);
        } else {
            let (top, next) = (a.label(), a.label());
            a.mov_imm(R4, positions as i32);
            a.bind(top);
            a.jmp_imm(op::JSLE, R2, 0, notfound);
            a.jmp_imm(op::JGT, R3, most32, notfound);
            a.load(Size::DW, R5, R10, t.hay).alu(op::ADD, R5, R3);
            // The bytes are compared without a branch per byte (the verifier keeps a pending
            // state per branch it cannot decide, 8192 at most): the differences are or-ed.
            a.mov_imm(R0, 0);
            match &constant {
                Some(c) => {
                    for (k, &b) in c.iter().enumerate() {
                        a.load(Size::B, R1, R5, k as i16);
                        a.alu_imm(op::XOR, R1, i32::from(b)).alu(op::OR, R0, R1);
                    }
                    a.jmp_imm(op::JNE, R0, 0, next);
                    a.ja(found);
                }
                None => {
                    for (slot, r) in t.spill.iter().zip([R2, R3, R4]) {
                        a.store(Size::DW, R10, *slot, r);
                    }
                    let miss = a.label();
                    a.load(Size::DW, R1, R10, t.needle);
                    or_differences(a, needle_most);
                    a.jmp_imm(op::JNE, R0, 0, miss);
                    a.load(Size::DW, R3, R10, t.spill[1]);
                    a.load(Size::DW, R5, R10, t.hay).alu(op::ADD, R5, R3);
                    a.ja(found);
                    a.bind(miss);
                    for (slot, r) in t.spill.iter().zip([R2, R3, R4]) {
                        a.load(Size::DW, r, R10, *slot);
                    }
                }
            }
            a.bind(next);
            a.alu_imm(op::ADD, R3, step).alu_imm(op::SUB, R2, 1);
            a.alu_imm(op::SUB, R4, 1);
            a.jmp_imm(op::JNE, R4, 0, top);
            a.ja(notfound);
            // R5: the match in the work slot; its position, unknown to the verifier.
            a.bind(found);
            a.load(Size::DW, R1, R10, t.hay);
            a.mov(R0, R5).alu(op::SUB, R0, R1);
            a.ja(done);
        }
        a.bind(notfound);
        a.mov_imm(R0, -1);
        a.bind(done);
        if !result {
            self.put(s, rd, R0, Kind::Int(None));
            return Ok(());
        }
        self.rest_of(s, rd, t.hay, width, most32);
        Ok(())
    }
}

/// Or-s into R0 the differences between the bytes of `sub` at R1 before its NUL (`most` bytes
/// read, at least 1) and the bytes of `s` at R5 under them: a bounded loop without a branch per
/// byte. Uses R2-R4; advances R1 and R5.
fn or_differences(a: &mut Asm, most: usize) {
    let inner = a.label();
    a.mov_imm(R2, most.max(1) as i32);
    a.bind(inner);
    a.load(Size::B, R3, R1, 0).load(Size::B, R4, R5, 0);
    a.alu(op::XOR, R4, R3);
    // All ones when the byte of `sub` is not the NUL, else 0.
    a.alu_imm(op::NEG, R3, 0).alu_imm(op::RSH, R3, 63);
    a.alu_imm(op::NEG, R3, 0);
    a.alu(op::AND, R4, R3).alu(op::OR, R0, R4);
    a.alu_imm(op::ADD, R1, 1).alu_imm(op::ADD, R5, 1);
    a.alu_imm(op::SUB, R2, 1);
    a.jmp_imm(op::JNE, R2, 0, inner);
}

/// The callback of a search looped with `bpf_loop`: tries the position its index gives (from
/// the first, backwards for `rindex()`), as the unrolled search tries each. Its context points
/// at the probe code's frame, where the search's slots are (the fields are their offsets from
/// the context).
#[derive(Clone, Copy, Debug)]
struct Seek {
    /// The slot holding the address of the work slot of `s`.
    hay: i16,
    /// The slot holding the address of the work slot of `sub`.
    needle: i16,
    /// The slot holding the first position to try.
    first: i16,
    /// The slot where a match leaves its position (the probe code leaves -1 there first).
    result: i16,
    /// The bytes of `sub` compared at each position (those past its NUL count for nothing).
    needle_most: usize,
    /// The last position `s` may hold (`strsize - 1`).
    most32: i32,
    /// `rindex()`: the positions go down from the first.
    reverse: bool,
}

impl Seek {
    /// The callback's name: one per shape of its code.
    fn name(&self) -> String {
        let dir = if self.reverse { "r" } else { "f" };
        format!("dt_strsearch_{dir}{}_{}", self.needle_most, self.most32)
    }

    /// The callback (`long (*)(u64 index, void *ctx)`): 1 (stop) at a match, its position
    /// stored, else 0. Compares without a branch per byte, as the unrolled search.
    fn emit(&self, a: &mut Asm) {
        let miss = a.label();
        a.mov(R6, R2);
        a.load(Size::DW, R7, R6, self.first);
        a.alu(if self.reverse { op::SUB } else { op::ADD }, R7, R1);
        a.jmp_imm(op::JGT, R7, self.most32, miss);
        a.load(Size::DW, R5, R6, self.hay).alu(op::ADD, R5, R7);
        a.load(Size::DW, R1, R6, self.needle);
        a.mov_imm(R0, 0);
        or_differences(a, self.needle_most);
        a.jmp_imm(op::JNE, R0, 0, miss);
        a.store(Size::DW, R6, self.result, R7);
        a.mov_imm(R0, 1).exit();
        a.bind(miss);
        a.mov_imm(R0, 0).exit();
    }
}

impl Translator<'_> {
    /// Refuses a string result in a constant longer than D's `strsize`: the interpreter's is
    /// the rest of the whole constant (its address there), which the work slot does not hold.
    /// (Every other string the translator follows already holds `strsize` characters at most.)
    fn result_whole(&self, hay: &Kind) -> Result<(), String> {
        match hay {
            Kind::StrConst(b)
                if b.split(|&c| c == 0).next().unwrap_or_default().len() >= self.strsize =>
            {
                Err("the rest of a constant longer than strsize".into())
            }
            _ => Ok(()),
        }
    }

    /// The string result of a search: the work slot (its address at `hay`) from the position in
    /// R0 on, copied into the result slot one `width` before it, or NULL when R0 is negative.
    fn rest_of(&mut self, s: &mut State, rd: u8, hay: i16, width: usize, most32: i32) {
        let a = &mut self.a;
        let (null, out) = (a.label(), a.label());
        a.jmp_imm(op::JSLT, R0, 0, null);
        a.load(Size::DW, R3, R10, hay).alu(op::ADD, R3, R0);
        a.load(Size::DW, R1, R10, hay)
            .alu_imm(op::SUB, R1, width as i32);
        a.mov_imm(R2, most32 + 1);
        a.call(helper::PROBE_READ_KERNEL_STR);
        a.load(Size::DW, R1, R10, hay)
            .alu_imm(op::SUB, R1, width as i32);
        a.ja(out);
        a.bind(null);
        a.mov_imm(R1, 0);
        a.bind(out);
        self.put(s, rd, R1, Kind::VarStr);
    }

    /// `strchr()` or `strrchr()` (`which`) of the arguments on the tuple stack into `rd` (see
    /// the module notes).
    pub(super) fn strchr(
        &mut self,
        pc: usize,
        s: &mut State,
        which: Subr,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let name = which.name();
        let named = format!("{name}()");
        let refused = super::refusal(pc, &named);
        let pushed = s.tuple.clone().unwrap_or_default();
        let (hay, c) = match pushed.as_slice() {
            [Pushed::Str(h), Pushed::Reg(r)] if super::strjoin::followed(h) => {
                self.int(s, pc, *r)?;
                (h.clone(), self.frame.reg(*r))
            }
            [Pushed::Str(h), Pushed::Saved] if super::strjoin::followed(h) => {
                (h.clone(), self.frame.tuple(1))
            }
            _ => return Err(refused("arguments the translator does not follow".into())),
        };
        let (_, most32) = self.string_bound().map_err(refused)?;
        self.result_whole(&hay).map_err(refused)?;
        let hay_most = self.most_chars(&hay);
        let null =
            (hay == Kind::VarStr).then(|| self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Zero));
        // The result slot, then the work slot of `s`.
        let width = self.search_scratch(pc, name, 3, &[0, 1])?;
        let t = self.search_slots();
        let a = &mut self.a;
        a.mov(R1, R0).alu_imm(op::ADD, R1, width as i32);
        a.store(Size::DW, R10, t.hay, R1);
        // `c` as the interpreter takes it (its low byte), kept before the copy clobbers R0-R5.
        a.load(Size::DW, R1, R10, c).alu_imm(op::AND, R1, 0xff);
        a.store(Size::DW, R10, t.needle, R1);
        self.work_copy(pc, &hay, 0, t.hay, null)?;
        // R1: the byte's address; R2: the verifier's bound; R3: `c`; R5: the last match (strrchr).
        let a = &mut self.a;
        let (top, other, end, found) = (a.label(), a.label(), a.label(), a.label());
        let last = which == Subr::Strrchr;
        a.load(Size::DW, R1, R10, t.hay);
        a.load(Size::DW, R3, R10, t.needle);
        a.mov_imm(R5, -1);
        a.mov_imm(R2, hay_most as i32 + 1);
        a.bind(top);
        a.load(Size::B, R0, R1, 0);
        a.jmp_reg(op::JNE, R0, R3, other);
        if last {
            // The match's position, unknown to the verifier (see the module notes).
            a.load(Size::DW, R5, R10, t.hay);
            a.mov(R4, R1).alu(op::SUB, R4, R5).mov(R5, R4);
        } else {
            a.load(Size::DW, R4, R10, t.hay);
            a.mov(R0, R1).alu(op::SUB, R0, R4);
            a.ja(found);
        }
        a.bind(other);
        // The NUL ends the string (after it was compared: `c` may be 0).
        a.jmp_imm(op::JEQ, R0, 0, end);
        a.alu_imm(op::ADD, R1, 1).alu_imm(op::SUB, R2, 1);
        a.jmp_imm(op::JNE, R2, 0, top);
        a.bind(end);
        a.mov(R0, R5);
        a.bind(found);
        self.rest_of(s, rd, t.hay, width, most32);
        Ok(())
    }
}
