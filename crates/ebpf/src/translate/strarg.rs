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
//!
//! A loop over the work slot's bytes is walked by the verifier once per byte. Where the probe may
//! loop (`ProbeContext::loops`) and the string can hold more than [`UNROLLED_MOST`] characters,
//! it is a `bpf_loop` over the string's length ([`Translator::loop_over_work`]) whose callback
//! looks at one byte, so the verifier walks one.

use super::{FaultAddr, Pushed, State, Translator, Untranslatable};
use crate::insn::{helper, op, Asm, Label, Size, R0, R1, R10, R2, R3, R4, R6, R7};
use dtrace_dif::vm::FaultKind;

/// The most characters a loop over a work slot walks unrolled where the probe may loop: past
/// them it is a `bpf_loop`.
const UNROLLED_MOST: usize = 32;

/// The bytes a call of a loop's callback takes (a power of two).
const LOOP_CHUNK: i32 = 8;

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

    /// The most characters the string argument on the tuple stack can hold (`strsize - 1`,
    /// fewer for `execname` or a constant): the bound of a loop over its work slot. Asked
    /// before [`Translator::string_into_work`] takes the argument.
    pub(super) fn work_most(&self, s: &State) -> usize {
        match s.tuple.as_deref() {
            Some([Pushed::Str(k), ..]) => self.most_chars(k),
            _ => self.strsize - 1,
        }
    }

    /// Whether a loop over a work slot of up to `most` characters is a `bpf_loop`
    /// ([`Translator::loop_over_work`]) rather than unrolled.
    pub(super) fn loops_over_work(&self, most: usize) -> bool {
        most > UNROLLED_MOST && self.ctx.loops().is_ok()
    }

    /// A `bpf_loop` over the work slot's string, whose length (at most `most`) is in R4: the
    /// callback `name` (one name per shape of `body`) takes [`LOOP_CHUNK`] bytes a call (the
    /// helper's call costs more than a byte's code), running `body` for each with R1 its index,
    /// R3 its address and R6 the context (the frame slot holding the work slot's address), and
    /// the label that ends the loop; `body` may use R0-R5 and ends by falling through. Bytes
    /// past the string (the last call's) are the slot's zeroes, up to `most`. Clobbers R0-R5.
    pub(super) fn loop_over_work(
        &mut self,
        name: String,
        most: usize,
        body: impl Fn(&mut Asm, Label) + Send + Sync + 'static,
    ) {
        let most = i32::try_from(most).unwrap_or(i32::MAX);
        let buf = self.frame.load_buf();
        let a = &mut self.a;
        // Calls: the length over LOOP_CHUNK, rounded up.
        a.mov(R1, R4).alu_imm(op::ADD, R1, LOOP_CHUNK - 1).alu_imm(
            op::RSH,
            R1,
            LOOP_CHUNK.trailing_zeros() as i32,
        );
        a.ld_callback(R2, name, move |a| {
            let stop = a.label();
            a.mov(R6, R2);
            a.mov(R7, R1)
                .alu_imm(op::LSH, R7, LOOP_CHUNK.trailing_zeros() as i32);
            for k in 0..LOOP_CHUNK {
                a.mov(R1, R7).alu_imm(op::ADD, R1, k);
                // Never past the string's room: a bound for the verifier.
                a.jmp_imm(op::JGT, R1, most, stop);
                a.load(Size::DW, R3, R6, 0).alu(op::ADD, R3, R1);
                body(a, stop);
            }
            a.mov_imm(R0, 0).exit();
            a.bind(stop);
            a.mov_imm(R0, 1).exit();
        });
        a.frame_addr(R3, i32::from(buf));
        a.mov_imm(R4, 0).call(helper::LOOP);
    }
}
