//! `basename(s)` and `dirname(s)` in translated code, with the interpreter's rules
//! (`strfn::base_or_dir`): trailing slashes are not part of the last component; a string of
//! slashes only gives "/" both ways; a name without a slash has the dirname "."; the empty
//! string gives "." both ways; otherwise the basename is the last component and the dirname
//! what comes before the slashes in front of it ("/" when only slashes do). `s` is read up to
//! `strsize - 1` characters; NULL faults with `DTRACEFLT_BADADDR` at 0.
//!
//! The string is copied into a work slot (`strarg`); one loop over its bytes, bounded by the
//! most characters the string can hold (`strsize - 1`, fewer for `execname` or a constant),
//! finds the last character that is not a slash (`lastbase`), the start of the
//! component it ends (`firstbase`, where a slash comes before a character that is not) and the
//! last such character before that slash (`lastdir`). They are kept in the scratch, not in
//! registers: the verifier would otherwise walk the loop once per combination of their values.
//! Where the probe may loop, a long string's loop is a `bpf_loop` (`strarg`): the verifier walks
//! one byte's code, not each byte's (`basename()` of a 255-character string: 15,000
//! instructions walked unrolled, about 1,000 looped).
//! The result, a part of the string or ".", is copied into the zeroed result slot with
//! `bpf_probe_read_kernel_str`.

use super::{Kind, State, Translator, Untranslatable};
use crate::insn::{helper, op, Asm, Label, Reg, Size, R0, R1, R10, R2, R3, R4, R5, R6};
use dtrace_dif::subr::Subr;

/// Offsets of the integers kept in the scratch: the last character that is not a slash, the
/// start of the component it ends, and the last character before that component's slashes
/// (each -1 when there is none).
const LASTBASE: i16 = 0;
const FIRSTBASE: i16 = 8;
const LASTDIR: i16 = 16;

impl Translator<'_> {
    /// `basename()` (`which` [`Subr::Basename`]) or `dirname()` of the string on the tuple
    /// stack into `rd` (see the module notes).
    pub(super) fn base_or_dir(
        &mut self,
        pc: usize,
        s: &mut State,
        which: Subr,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let dir = which == Subr::Dirname;
        let held = self.work_most(s);
        let work = self.string_into_work(pc, s, which.name(), 1, 24)?;
        let most = (self.strsize - 1) as i32;
        let scan_most = i32::try_from(held).unwrap_or(most);
        let looped = self.loops_over_work(held);
        let buf = self.frame.load_buf();
        let length = self.frame.tuple(5);
        let (before, after) = (work.result_before as i32, work.extra_after as i32);
        let a = &mut self.a;
        // R5: the integers.
        a.load(Size::DW, R5, R10, buf).alu_imm(op::ADD, R5, after);
        for at in [LASTBASE, FIRSTBASE, LASTDIR] {
            a.store_imm(Size::DW, R5, at, -1);
        }
        if looped {
            // The scan ends at the string's length (R4 from the copy), kept for after it.
            a.store(Size::DW, R10, length, R4);
            self.loop_over_work(
                format!("dt_pathscan_{after}_{held}"),
                held,
                move |a, end| {
                    a.load(Size::B, R3, R3, 0);
                    emit_step(a, R1, (R6, 0), after, end);
                },
            );
            self.a.load(Size::DW, R2, R10, length);
        } else {
            // R1: the byte's address; R2: its index.
            let (top, out) = (a.label(), a.label());
            a.load(Size::DW, R1, R10, buf);
            a.mov_imm(R2, 0);
            a.bind(top);
            a.load(Size::B, R3, R1, 0);
            emit_step(a, R2, (R10, buf), after, out);
            a.alu_imm(op::ADD, R1, 1).alu_imm(op::ADD, R2, 1);
            a.jmp_imm(op::JLE, R2, scan_most, top);
            a.bind(out);
        }
        let a = &mut self.a;
        // R2: the length. R3: where the result starts; R2: its length.
        let (dot, copy) = (a.label(), a.label());
        a.jmp_imm(op::JEQ, R2, 0, dot);
        a.load(Size::DW, R5, R10, buf).alu_imm(op::ADD, R5, after);
        a.load(Size::DW, R4, R5, LASTBASE);
        a.load(Size::DW, R0, R5, FIRSTBASE);
        let not_slashes = a.label();
        a.jmp_imm(op::JSGE, R4, 0, not_slashes);
        // Slashes only: "/", the first of them.
        a.mov_imm(R3, 0).mov_imm(R2, 1).ja(copy);
        a.bind(not_slashes);
        let after_slash = a.label();
        a.jmp_imm(op::JSGE, R0, 0, after_slash);
        // No slash before the last component.
        if dir {
            a.ja(dot);
        } else {
            a.mov_imm(R3, 0)
                .mov(R2, R4)
                .alu_imm(op::ADD, R2, 1)
                .ja(copy);
        }
        a.bind(after_slash);
        if dir {
            a.load(Size::DW, R2, R5, LASTDIR);
            let some = a.label();
            a.jmp_imm(op::JSGE, R2, 0, some);
            a.mov_imm(R2, 0);
            a.bind(some);
            a.mov_imm(R3, 0).alu_imm(op::ADD, R2, 1);
        } else {
            a.mov(R3, R0);
            a.mov(R2, R4).alu(op::SUB, R2, R0).alu_imm(op::ADD, R2, 1);
        }
        a.bind(copy);
        // R2 characters from R3 on, into the result slot; at most strsize - 1 (always so).
        let fits = a.label();
        a.jmp_imm(op::JLE, R2, most, fits);
        a.mov_imm(R2, most);
        a.bind(fits);
        a.alu_imm(op::ADD, R2, 1);
        // The start, bounded for the verifier (always within the string).
        let within = a.label();
        a.jmp_imm(op::JLE, R3, most, within);
        a.mov_imm(R3, 0);
        a.bind(within);
        a.load(Size::DW, R1, R10, buf).alu(op::ADD, R3, R1);
        a.alu_imm(op::SUB, R1, before);
        a.call(helper::PROBE_READ_KERNEL_STR);
        let done = a.label();
        a.ja(done);
        a.bind(dot);
        a.load(Size::DW, R1, R10, buf).alu_imm(op::SUB, R1, before);
        a.store_imm(Size::B, R1, 0, i32::from(b'.'));
        a.bind(done);
        a.load(Size::DW, R1, R10, buf).alu_imm(op::SUB, R1, before);
        self.put(s, rd, R1, Kind::Scratch);
        Ok(())
    }
}

/// One step of the scan, looped or unrolled: the byte in R3 at index `i` updates the integers,
/// `after` bytes past the work slot whose address is at `slot` (a register and an offset); the
/// NUL jumps to `end`. Uses R0, R4 and R5.
fn emit_step(a: &mut Asm, i: Reg, slot: (Reg, i16), after: i32, end: Label) {
    let (next, same) = (a.label(), a.label());
    a.jmp_imm(op::JEQ, R3, 0, end);
    a.jmp_imm(op::JEQ, R3, i32::from(b'/'), next);
    a.load(Size::DW, R5, slot.0, slot.1)
        .alu_imm(op::ADD, R5, after);
    // A character after a slash starts a component: the one before the slashes ends the
    // directory.
    a.load(Size::DW, R4, R5, LASTBASE);
    a.mov(R0, i).alu_imm(op::SUB, R0, 1);
    a.jmp_reg(op::JEQ, R4, R0, same);
    a.store(Size::DW, R5, FIRSTBASE, i);
    a.store(Size::DW, R5, LASTDIR, R4);
    a.bind(same);
    a.store(Size::DW, R5, LASTBASE, i);
    a.bind(next);
}
