//! `cleanpath(s)` in translated code, as the interpreter's (`strfn::cleanpath`, DTrace's textual
//! rules): `//` is one slash, `/./` none, `/../` (or a final `/..`) removes the component before
//! it up to its slash, a final `/..` leaving a `/`; components that only begin with dots
//! (`/.x`, `/..x`) are kept. Before each component the interpreter stops when the path built
//! has `strsize - 5` characters. `s` is read up to `strsize - 1` characters; NULL faults with
//! `DTRACEFLT_BADADDR` at 0.
//!
//! The string is copied into a work slot (`strarg`) and rewritten in place (the path built
//! never outgrows the characters read) by a state machine that reads one character per step:
//! after a component's character (`N`), after a slash (`S`), after `/.` (`D`) and after `/..`
//! (`DD`); a loop bounded by `strsize` steps. The state, the length built and a stack of the
//! positions of its slashes (what `/..` goes back to) are kept in the scratch, where the
//! verifier does not follow their values (it would otherwise walk the loop once per
//! combination of them). The result is copied into the zeroed result slot with
//! `bpf_probe_read_kernel_str`.

use super::{Kind, State, Translator, Untranslatable};
use crate::insn::{helper, op, Asm, Label, Size, R0, R1, R10, R2, R3, R4, R5};

/// Offsets of the integers kept in the scratch: the state, the length built, the depth of the
/// slash stack; then the stack (16-bit positions).
const STATE: i16 = 0;
const LEN: i16 = 8;
const DEPTH: i16 = 16;
const STACK: i16 = 24;

/// The states: after a component's character (or at the start), after a slash, after `/.`,
/// after `/..`.
const N: i32 = 0;
const S: i32 = 1;
const D: i32 = 2;
const DD: i32 = 3;

/// What the emitters below share: the frame slot of the work slot's address, the offset of
/// the integers from it, the most characters a string holds, the stack's capacity and the
/// label that ends the rewrite.
#[derive(Clone, Copy)]
struct Machine {
    buf: i16,
    after: i32,
    most: i32,
    cap: i32,
    stop: Label,
}

impl Machine {
    /// Stops when the path built is `strsize - 5` characters long or longer (the
    /// interpreter's check before each component). Uses R4.
    fn check(self, a: &mut Asm) {
        a.load(Size::DW, R4, R5, LEN);
        a.jmp_imm(op::JSGE, R4, self.most + 1 - 5, self.stop);
    }

    /// Appends the byte that `byte` leaves in R3 (or R3 itself) to the path built. Uses R0
    /// and R4.
    fn push(self, a: &mut Asm, byte: Option<u8>) {
        a.load(Size::DW, R4, R5, LEN);
        // Never so (see `check`); the verifier needs the bound.
        a.jmp_imm(op::JGT, R4, self.most, self.stop);
        a.load(Size::DW, R0, R10, self.buf).alu(op::ADD, R0, R4);
        match byte {
            Some(c) => a.store_imm(Size::B, R0, 0, i32::from(c)),
            None => a.store(Size::B, R0, 0, R3),
        };
        a.alu_imm(op::ADD, R4, 1);
        a.store(Size::DW, R5, LEN, R4);
    }

    /// Appends a slash, its position pushed on the slash stack. Uses R0 and R4.
    fn push_slash(self, a: &mut Asm) {
        a.load(Size::DW, R0, R5, DEPTH);
        a.jmp_imm(op::JGE, R0, self.cap, self.stop);
        a.mov(R4, R0).alu_imm(op::ADD, R4, 1);
        a.store(Size::DW, R5, DEPTH, R4);
        a.alu_imm(op::LSH, R0, 1).alu(op::ADD, R0, R5);
        a.load(Size::DW, R4, R5, LEN);
        a.store(Size::H, R0, STACK, R4);
        self.push(a, Some(b'/'));
    }

    /// `/..`: the path built goes back to its last slash (that slash removed too), or to
    /// nothing. Uses R0 and R4.
    fn back_up(self, a: &mut Asm) {
        let (none, done) = (a.label(), a.label());
        a.load(Size::DW, R0, R5, DEPTH);
        a.jmp_imm(op::JEQ, R0, 0, none);
        a.alu_imm(op::SUB, R0, 1);
        a.store(Size::DW, R5, DEPTH, R0);
        a.jmp_imm(op::JGE, R0, self.cap, self.stop);
        a.alu_imm(op::LSH, R0, 1).alu(op::ADD, R0, R5);
        a.load(Size::H, R4, R0, STACK);
        a.store(Size::DW, R5, LEN, R4);
        a.ja(done);
        a.bind(none);
        a.store_imm(Size::DW, R5, LEN, 0);
        a.bind(done);
    }
}

impl Translator<'_> {
    /// `cleanpath()` of the string on the tuple stack into `rd` (see the module notes).
    pub(super) fn cleanpath(
        &mut self,
        pc: usize,
        s: &mut State,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let width = super::string_scratch_width(self.strsize);
        let work = self.string_into_work(pc, s, "cleanpath", 1, STACK as usize + width)?;
        let buf = self.frame.load_buf();
        let before = work.result_before as i32;
        let a = &mut self.a;
        let m = Machine {
            buf,
            after: work.extra_after as i32,
            most: (self.strsize - 1) as i32,
            cap: (width / 2) as i32,
            stop: a.label(),
        };
        a.load(Size::DW, R5, R10, buf).alu_imm(op::ADD, R5, m.after);
        for at in [STATE, LEN, DEPTH] {
            a.store_imm(Size::DW, R5, at, 0);
        }
        // R1: the character's address; R2: its index; R3: the character; R5: the integers.
        let (top, next) = (a.label(), a.label());
        let (st_s, st_d, st_dd) = (a.label(), a.label(), a.label());
        let (to_s, to_d, to_dd, slash_again) = (a.label(), a.label(), a.label(), a.label());
        a.load(Size::DW, R1, R10, buf);
        a.mov_imm(R2, 0);
        a.bind(top);
        a.load(Size::B, R3, R1, 0);
        a.load(Size::DW, R5, R10, buf).alu_imm(op::ADD, R5, m.after);
        a.load(Size::DW, R4, R5, STATE);
        a.jmp_imm(op::JEQ, R4, S, st_s);
        a.jmp_imm(op::JEQ, R4, D, st_d);
        a.jmp_imm(op::JEQ, R4, DD, st_dd);
        // N: a component's first character, or its next.
        m.check(a);
        a.jmp_imm(op::JEQ, R3, i32::from(b'/'), to_s);
        a.jmp_imm(op::JEQ, R3, 0, m.stop);
        m.push(a, None);
        a.ja(next);
        // S: `//` is one slash; `/.` waits; anything else is a component.
        a.bind(st_s);
        a.jmp_imm(op::JEQ, R3, i32::from(b'/'), slash_again);
        a.jmp_imm(op::JEQ, R3, i32::from(b'.'), to_d);
        m.push_slash(a);
        a.jmp_imm(op::JEQ, R3, 0, m.stop);
        m.push(a, None);
        a.store_imm(Size::DW, R5, STATE, N);
        a.ja(next);
        // D: `/./` is no slash; `/..` waits; `/.x` is a component.
        a.bind(st_d);
        a.jmp_imm(op::JEQ, R3, i32::from(b'/'), slash_again);
        a.jmp_imm(op::JEQ, R3, i32::from(b'.'), to_dd);
        m.push_slash(a);
        m.push(a, Some(b'.'));
        a.jmp_imm(op::JEQ, R3, 0, m.stop);
        m.push(a, None);
        a.store_imm(Size::DW, R5, STATE, N);
        a.ja(next);
        // DD: `/../` and a final `/..` go back; `/..x` is a component.
        a.bind(st_dd);
        let back = a.label();
        a.jmp_imm(op::JEQ, R3, i32::from(b'/'), back);
        a.jmp_imm(op::JEQ, R3, 0, back);
        m.push_slash(a);
        m.push(a, Some(b'.'));
        m.push(a, Some(b'.'));
        m.push(a, None);
        a.store_imm(Size::DW, R5, STATE, N);
        a.ja(next);
        a.bind(back);
        m.back_up(a);
        // `/../`: its slash read again, as a component's first character.
        a.jmp_imm(op::JEQ, R3, i32::from(b'/'), slash_again);
        // A final `/..` leaves a slash.
        m.push_slash(a);
        a.ja(m.stop);
        a.bind(slash_again);
        m.check(a);
        a.bind(to_s);
        a.store_imm(Size::DW, R5, STATE, S);
        a.ja(next);
        a.bind(to_d);
        a.store_imm(Size::DW, R5, STATE, D);
        a.ja(next);
        a.bind(to_dd);
        a.store_imm(Size::DW, R5, STATE, DD);
        a.bind(next);
        a.alu_imm(op::ADD, R1, 1).alu_imm(op::ADD, R2, 1);
        a.jmp_imm(op::JLE, R2, m.most, top);
        a.bind(m.stop);
        // The path's end, then the path into the result slot.
        a.load(Size::DW, R5, R10, buf).alu_imm(op::ADD, R5, m.after);
        a.load(Size::DW, R4, R5, LEN);
        let fits = a.label();
        a.jmp_imm(op::JLE, R4, m.most, fits);
        a.mov_imm(R4, m.most);
        a.bind(fits);
        a.load(Size::DW, R3, R10, buf);
        a.mov(R0, R3).alu(op::ADD, R0, R4);
        a.store_imm(Size::B, R0, 0, 0);
        a.mov(R1, R3).alu_imm(op::SUB, R1, before);
        a.mov_imm(R2, m.most + 1);
        a.call(helper::PROBE_READ_KERNEL_STR);
        a.load(Size::DW, R1, R10, buf).alu_imm(op::SUB, R1, before);
        self.put(s, rd, R1, Kind::Scratch);
        Ok(())
    }
}
