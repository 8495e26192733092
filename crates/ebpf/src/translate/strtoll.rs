//! `strtoll(s [, base])` in translated code, as the interpreter's (`strfn::strtoll`): `s` read
//! up to `strsize - 1` characters (NULL faults with `DTRACEFLT_BADADDR` at 0), then leading
//! blanks (spaces and tabs) skipped, an optional sign, a `0x` or `0X` before a hexadecimal digit
//! skipped in base 16, and the digits below `base` (`0`-`9`, then letters of either case from
//! 10) taken up to the first that is not one, the value wrapping at 64 bits and negated after a
//! `-`. A `base` (10 when absent) outside 2 to 36 faults with `DTRACEFLT_ILLOP` at address 0,
//! after the string is read, as in the interpreter.
//!
//! The string is copied into a zeroed work slot (`strarg`), with a table of each character's
//! class (digit value, blank, neither) written after it, so each character costs the verifier
//! one branch; the blanks are skipped by a loop bounded by the most characters the string can
//! hold (`strsize - 1`, fewer for `execname` or a constant), whose stopping point is made a
//! number the verifier knows only the range of (the stopped pointer less the slot's start, as
//! `strlen()`'s length), so what follows is not verified once per count of blanks; the digits
//! are read by a second loop bounded alike. The base, the sign and where the digits start are
//! kept in the work area and read back before that loop, so the verifier walks it once, not
//! once per base, sign and prefix it could tell apart; each loop's way out is its fall-through,
//! which the verifier follows first, so it keeps one pending state, not one per character. Every
//! read stops at the string's NUL, inside the work slot; the verifier's bound on the second
//! loop's reads is the work area (two slots wide).

use super::{FaultAddr, Kind, Pushed, State, Translator, Untranslatable};
use crate::insn::{op, Asm, Reg, Size, R0, R1, R10, R2, R3, R4, R5};
use dtrace_dif::vm::FaultKind;

/// The work area after the work slot (see `strarg`): the base, whether a `-` was read, where
/// the digits start (8 bytes each), then the characters' classes ([`classes`]).
const BASE: usize = 0;
const NEG: usize = 8;
const POS: usize = 16;
const TABLE: usize = 24;
/// Bytes of it.
const EXTRA: usize = TABLE + 256;

/// The class of a space or a tab.
const BLANK: u8 = 64;
/// The class of a character that is neither a digit nor a blank (above any base).
const NONE: u8 = 255;

impl Translator<'_> {
    /// `strtoll()` of the arguments on the tuple stack into `rd` (see the module notes).
    pub(super) fn strtoll(
        &mut self,
        pc: usize,
        s: &mut State,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let ints = self.int_args_from(pc, s, 1)?;
        let base = match (&ints[..], s.tuple.as_deref()) {
            ([], _) => None,
            ([at], Some([_, Pushed::Reg(r)])) => match &s[(r & 7) as usize] {
                Kind::Int(Some(b)) => Some(Ok(*b)),
                _ => Some(Err(*at)),
            },
            ([at], _) => Some(Err(*at)),
            (more, _) => {
                return Err(Untranslatable::Invalid {
                    pc,
                    what: format!("strtoll() with {} arguments", more.len() + 1),
                })
            }
        };
        // The loops' bound: the most characters the string can hold (`execname`'s 15, a
        // constant's length), at least one (a loop looks at a byte before it counts).
        let most = i32::try_from(self.work_most(s).max(1)).unwrap_or(i32::MAX);
        let work = self.string_into_work(pc, s, "strtoll", 0, EXTRA)?;
        let extra = |at: usize| i16::try_from(work.extra_after + at);
        let (base_at, neg_at, pos_at, table_at) =
            match (extra(BASE), extra(NEG), extra(POS), extra(TABLE)) {
                (Ok(b), Ok(n), Ok(p), Ok(t)) if extra(EXTRA).is_ok() => (b, n, p, t),
                _ => return Err(super::refusal(pc, "strtoll()")("strsize too large".into())),
            };
        let buf = self.frame.load_buf();
        let bad_base = self.fault_site(pc, FaultKind::IllOp, FaultAddr::Zero);
        let a = &mut self.a;
        // R5: the base, checked, and kept in the work area.
        match base {
            None => a.mov_imm(R5, 10),
            Some(Ok(b)) => a.ld_imm64(R5, b),
            Some(Err(at)) => a.load(Size::DW, R5, R10, at),
        };
        a.jmp_imm(op::JLT, R5, 2, bad_base);
        a.jmp_imm(op::JGT, R5, 36, bad_base);
        // R3: the work slot, R5's base and the characters' table kept after it.
        a.load(Size::DW, R3, R10, buf);
        a.store(Size::DW, R3, base_at, R5);
        for (i, w) in classes().chunks_exact(8).enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            a.ld_imm64(R2, u64::from_le_bytes(b));
            a.store(Size::DW, R3, table_at + 8 * i as i16, R2);
        }
        // The blanks: R1 the byte's address, R2 the bytes left to look at. Each loop's way
        // out is its fall-through: the verifier follows it first and keeps only the way on
        // pending, not one way out per character.
        let (blank, is_blank, blanks_done) = (a.label(), a.label(), a.label());
        a.mov(R1, R3);
        a.mov_imm(R2, most);
        a.bind(blank);
        emit_class(a, buf, table_at);
        a.jmp_imm(op::JEQ, R4, i32::from(BLANK), is_blank);
        a.ja(blanks_done);
        a.bind(is_blank);
        a.alu_imm(op::ADD, R1, 1).alu_imm(op::SUB, R2, 1);
        a.jmp_imm(op::JNE, R2, 0, blank);
        a.bind(blanks_done);
        // How far the blanks went, as a number of known range only.
        a.load(Size::DW, R3, R10, buf);
        a.alu(op::SUB, R1, R3);
        emit_at_most(a, R1, most);
        a.alu(op::ADD, R1, R3);
        // The sign: 1 after a `-`.
        let (signed, unsigned) = (a.label(), a.label());
        a.mov_imm(R0, 0);
        a.load(Size::B, R4, R1, 0);
        a.jmp_imm(op::JEQ, R4, i32::from(b'+'), signed);
        a.jmp_imm(op::JNE, R4, i32::from(b'-'), unsigned);
        a.mov_imm(R0, 1);
        a.bind(signed);
        a.alu_imm(op::ADD, R1, 1);
        a.bind(unsigned);
        a.store(Size::DW, R3, neg_at, R0);
        // `0x` or `0X` before a hexadecimal digit, in base 16.
        let no_prefix = a.label();
        a.jmp_imm(op::JNE, R5, 16, no_prefix);
        a.load(Size::B, R4, R1, 0);
        a.jmp_imm(op::JNE, R4, i32::from(b'0'), no_prefix);
        a.load(Size::B, R4, R1, 1);
        a.alu_imm(op::OR, R4, 0x20);
        a.jmp_imm(op::JNE, R4, i32::from(b'x'), no_prefix);
        a.alu_imm(op::ADD, R1, 2);
        emit_class(a, buf, table_at);
        a.alu_imm(op::SUB, R1, 2);
        a.jmp_imm(op::JGE, R4, 16, no_prefix);
        a.alu_imm(op::ADD, R1, 2);
        a.bind(no_prefix);
        // Where the digits start, and the base, read back from the work area: numbers the
        // verifier knows nothing of, so the digits' loop is verified once whatever the sign,
        // the prefix and the base were.
        a.load(Size::DW, R3, R10, buf);
        a.alu(op::SUB, R1, R3);
        a.store(Size::DW, R3, pos_at, R1);
        a.load(Size::DW, R1, R3, pos_at);
        emit_at_most(a, R1, most + 3);
        a.alu(op::ADD, R1, R3);
        a.load(Size::DW, R5, R3, base_at);
        // The digits: R0 the value, R2 the characters left. A digit below the base is
        // compared as a difference, which narrows neither register (the verifier would follow
        // each narrowing of the base as a state of its own).
        let (digit, is_digit, digits_done) = (a.label(), a.label(), a.label());
        a.mov_imm(R0, 0);
        a.mov_imm(R2, most);
        a.bind(digit);
        emit_class(a, buf, table_at);
        a.mov(R3, R4).alu(op::SUB, R3, R5);
        a.jmp_imm(op::JSLT, R3, 0, is_digit);
        a.ja(digits_done);
        a.bind(is_digit);
        a.alu(op::MUL, R0, R5).alu(op::ADD, R0, R4);
        a.alu_imm(op::ADD, R1, 1).alu_imm(op::SUB, R2, 1);
        a.jmp_imm(op::JNE, R2, 0, digit);
        a.bind(digits_done);
        let positive = a.label();
        a.load(Size::DW, R1, R10, buf);
        a.load(Size::DW, R1, R1, neg_at);
        a.jmp_imm(op::JEQ, R1, 0, positive);
        a.alu_imm(op::NEG, R0, 0);
        a.bind(positive);
        self.put(s, rd, R0, Kind::Int(None));
        Ok(())
    }
}

/// Bounds the offset in `r` by `most` for the verifier (it never is past it: every read stops
/// at the string's NUL).
fn emit_at_most(a: &mut Asm, r: Reg, most: i32) {
    let within = a.label();
    a.jmp_imm(op::JLE, r, most, within);
    a.mov_imm(r, most);
    a.bind(within);
}

/// The class of the character at R1 into R4 (see [`classes`]): the byte read, then its entry
/// in the table at `table_at` from the work slot, whose address the frame's slot `buf` holds.
/// Uses R3.
fn emit_class(a: &mut Asm, buf: i16, table_at: i16) {
    a.load(Size::B, R3, R1, 0);
    a.load(Size::DW, R4, R10, buf);
    a.alu(op::ADD, R4, R3);
    a.load(Size::B, R4, R4, table_at);
}

/// Each character's class: its digit's value (`0`-`9`, then letters of either case from 10),
/// [`BLANK`] for a space or a tab, [`NONE`] for any other.
fn classes() -> [u8; 256] {
    let mut t = [NONE; 256];
    for c in 0..=255u8 {
        t[c as usize] = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'z' => c - b'a' + 10,
            b'A'..=b'Z' => c - b'A' + 10,
            b' ' | b'\t' => BLANK,
            _ => NONE,
        };
    }
    t
}
