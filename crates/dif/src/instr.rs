//! DIF instructions decoded from and encoded to their 32-bit words (spec §7.2).
//!
//! The word layout follows the published DTrace encoding: the opcode in bits 31-24; R-format `r1` in 23-16,
//! `r2` in 15-8, `rd` in 7-0; B-format a 24-bit label; W-format a 16-bit index in 23-8 and a register in 7-0.
//! Decoding is lenient about reserved bits; `Instr::decode(w)?.encode() == w` holds exactly when they are zero,
//! which is how the verifier checks them.

use crate::opcode::{Format, Opcode};

/// A register number (0-7 are valid; the verifier checks).
pub type Reg = u8;

/// Type tag of a tuple-stack push (`dtrace_diftype` kinds).
pub const DIF_TYPE_CTF: u8 = 0;
/// Type tag of a tuple-stack push of a string.
pub const DIF_TYPE_STRING: u8 = 1;

/// One decoded DIF instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Instr {
    /// `op %r1, %r2, %rd` for or, xor, and, sll, srl, sra, sub, add, mul, sdiv, udiv, srem, urem.
    Alu {
        op: Opcode,
        r1: Reg,
        r2: Reg,
        rd: Reg,
    },
    /// `not %r1, %rd`.
    Not { r1: Reg, rd: Reg },
    /// `mov %r1, %rd`.
    Mov { r1: Reg, rd: Reg },
    /// `cmp %r1, %r2`.
    Cmp { r1: Reg, r2: Reg },
    /// `scmp %r1, %r2`.
    Scmp { r1: Reg, r2: Reg },
    /// `tst %r1`.
    Tst { r1: Reg },
    /// `ba` .. `bleu label`: the target is an instruction index.
    Branch { op: Opcode, label: u32 },
    /// `ld*`, `uld*`, `rld*` `[%r1], %rd`.
    Load { op: Opcode, r1: Reg, rd: Reg },
    /// `st* %r1, [%rd]`: stores the value in `r1` at the address in `rd`.
    Store { op: Opcode, r1: Reg, rd: Reg },
    /// `ret %rd`.
    Ret { rd: Reg },
    /// `nop`.
    Nop,
    /// `setx DT_INTEGER[idx], %rd`.
    Setx { idx: u16, rd: Reg },
    /// `sets DT_STRING[idx], %rd` (`idx` is a byte offset into the string table).
    Sets { idx: u16, rd: Reg },
    /// `ldga`/`ldta var, %r2, %rd`: element `%r2` of a built-in array variable (e.g. `args`).
    LoadArray {
        op: Opcode,
        var: u8,
        r2: Reg,
        rd: Reg,
    },
    /// `ldgs`/`ldts`/`ldls`/`ldgaa`/`ldtaa var, %rd`.
    LoadVar { op: Opcode, var: u16, rd: Reg },
    /// `stgs`/`stts`/`stls`/`stgaa`/`sttaa %rs, var`.
    StoreVar { op: Opcode, var: u16, rs: Reg },
    /// `call subr, %rd`.
    Call { subr: u16, rd: Reg },
    /// `pushtr type, %r2, %rs`: push a reference of size `%r2` (0 for strings: use `strsize`).
    Pushtr { ty: u8, r2: Reg, rs: Reg },
    /// `pushtv type, %rs`: push a value.
    Pushtv { ty: u8, rs: Reg },
    /// `popts`.
    Popts,
    /// `flushts`.
    Flushts,
    /// `allocs %r1, %rd`: allocate `%r1` bytes of scratch.
    Allocs { r1: Reg, rd: Reg },
    /// `copys %r1, %r2, %rd`: copy `%r2` bytes from `%r1` to `%rd`.
    Copys { r1: Reg, r2: Reg, rd: Reg },
    /// `xlate`/`xlarg idx, %rd` (translator references; illumos only).
    Xlate { op: Opcode, idx: u16, rd: Reg },
}

/// A word whose opcode byte is no DIF opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid opcode {opcode} in instruction word {word:#010x}")]
pub struct DecodeError {
    /// The whole word.
    pub word: u32,
    /// Its opcode byte.
    pub opcode: u8,
}

fn fmt_r(op: Opcode, r1: u8, r2: u8, rd: u8) -> u32 {
    ((op as u32) << 24) | ((r1 as u32) << 16) | ((r2 as u32) << 8) | rd as u32
}

fn fmt_w(op: Opcode, idx: u16, r: u8) -> u32 {
    ((op as u32) << 24) | ((idx as u32) << 8) | r as u32
}

impl Instr {
    /// Decodes one instruction word.
    pub fn decode(word: u32) -> Result<Instr, DecodeError> {
        use Opcode::*;
        let opb = (word >> 24) as u8;
        let op = Opcode::from_u8(opb).ok_or(DecodeError { word, opcode: opb })?;
        let r1 = ((word >> 16) & 0xff) as u8;
        let r2 = ((word >> 8) & 0xff) as u8;
        let rd = (word & 0xff) as u8;
        let idx = ((word >> 8) & 0xffff) as u16;
        Ok(match op {
            Or | Xor | And | Sll | Srl | Sra | Sub | Add | Mul | Sdiv | Udiv | Srem | Urem => {
                Instr::Alu { op, r1, r2, rd }
            }
            Not => Instr::Not { r1, rd },
            Mov => Instr::Mov { r1, rd },
            Cmp => Instr::Cmp { r1, r2 },
            Scmp => Instr::Scmp { r1, r2 },
            Tst => Instr::Tst { r1 },
            Ba | Be | Bne | Bg | Bgu | Bge | Bgeu | Bl | Blu | Ble | Bleu => Instr::Branch {
                op,
                label: word & 0x00ff_ffff,
            },
            Ldsb | Ldsh | Ldsw | Ldub | Lduh | Lduw | Ldx | Uldsb | Uldsh | Uldsw | Uldub
            | Ulduh | Ulduw | Uldx | Rldsb | Rldsh | Rldsw | Rldub | Rlduh | Rlduw | Rldx => {
                Instr::Load { op, r1, rd }
            }
            Stb | Sth | Stw | Stx => Instr::Store { op, r1, rd },
            Ret => Instr::Ret { rd },
            Nop => Instr::Nop,
            Setx => Instr::Setx { idx, rd },
            Sets => Instr::Sets { idx, rd },
            Ldga | Ldta => Instr::LoadArray {
                op,
                var: r1,
                r2,
                rd,
            },
            Ldgs | Ldts | Ldls | Ldgaa | Ldtaa => Instr::LoadVar { op, var: idx, rd },
            Stgs | Stts | Stls | Stgaa | Sttaa => Instr::StoreVar {
                op,
                var: idx,
                rs: rd,
            },
            Call => Instr::Call { subr: idx, rd },
            Pushtr => Instr::Pushtr { ty: r1, r2, rs: rd },
            Pushtv => Instr::Pushtv { ty: r1, rs: rd },
            Popts => Instr::Popts,
            Flushts => Instr::Flushts,
            Allocs => Instr::Allocs { r1, rd },
            Copys => Instr::Copys { r1, r2, rd },
            Xlate | Xlarg => Instr::Xlate { op, idx, rd },
        })
    }

    /// Encodes this instruction as a word (unused fields zero).
    pub fn encode(&self) -> u32 {
        use Opcode::*;
        match *self {
            Instr::Alu { op, r1, r2, rd } => fmt_r(op, r1, r2, rd),
            Instr::Not { r1, rd } => fmt_r(Not, r1, 0, rd),
            Instr::Mov { r1, rd } => fmt_r(Mov, r1, 0, rd),
            Instr::Cmp { r1, r2 } => fmt_r(Cmp, r1, r2, 0),
            Instr::Scmp { r1, r2 } => fmt_r(Scmp, r1, r2, 0),
            Instr::Tst { r1 } => fmt_r(Tst, r1, 0, 0),
            Instr::Branch { op, label } => ((op as u32) << 24) | (label & 0x00ff_ffff),
            Instr::Load { op, r1, rd } => fmt_r(op, r1, 0, rd),
            Instr::Store { op, r1, rd } => fmt_r(op, r1, 0, rd),
            Instr::Ret { rd } => fmt_r(Ret, 0, 0, rd),
            Instr::Nop => fmt_r(Nop, 0, 0, 0),
            Instr::Setx { idx, rd } => fmt_w(Setx, idx, rd),
            Instr::Sets { idx, rd } => fmt_w(Sets, idx, rd),
            Instr::LoadArray { op, var, r2, rd } => fmt_r(op, var, r2, rd),
            Instr::LoadVar { op, var, rd } => fmt_w(op, var, rd),
            Instr::StoreVar { op, var, rs } => fmt_w(op, var, rs),
            Instr::Call { subr, rd } => fmt_w(Call, subr, rd),
            Instr::Pushtr { ty, r2, rs } => fmt_r(Pushtr, ty, r2, rs),
            Instr::Pushtv { ty, rs } => fmt_r(Pushtv, ty, 0, rs),
            Instr::Popts => fmt_r(Popts, 0, 0, 0),
            Instr::Flushts => fmt_r(Flushts, 0, 0, 0),
            Instr::Allocs { r1, rd } => fmt_r(Allocs, r1, 0, rd),
            Instr::Copys { r1, r2, rd } => fmt_r(Copys, r1, r2, rd),
            Instr::Xlate { op, idx, rd } => fmt_w(op, idx, rd),
        }
    }

    /// The opcode of this instruction.
    pub fn opcode(&self) -> Opcode {
        match *self {
            Instr::Alu { op, .. }
            | Instr::Branch { op, .. }
            | Instr::Load { op, .. }
            | Instr::Store { op, .. }
            | Instr::LoadArray { op, .. }
            | Instr::LoadVar { op, .. }
            | Instr::StoreVar { op, .. }
            | Instr::Xlate { op, .. } => op,
            Instr::Not { .. } => Opcode::Not,
            Instr::Mov { .. } => Opcode::Mov,
            Instr::Cmp { .. } => Opcode::Cmp,
            Instr::Scmp { .. } => Opcode::Scmp,
            Instr::Tst { .. } => Opcode::Tst,
            Instr::Ret { .. } => Opcode::Ret,
            Instr::Nop => Opcode::Nop,
            Instr::Setx { .. } => Opcode::Setx,
            Instr::Sets { .. } => Opcode::Sets,
            Instr::Call { .. } => Opcode::Call,
            Instr::Pushtr { .. } => Opcode::Pushtr,
            Instr::Pushtv { .. } => Opcode::Pushtv,
            Instr::Popts => Opcode::Popts,
            Instr::Flushts => Opcode::Flushts,
            Instr::Allocs { .. } => Opcode::Allocs,
            Instr::Copys { .. } => Opcode::Copys,
        }
    }

    /// The encoding format of this instruction.
    pub fn format(&self) -> Format {
        self.opcode().format()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_opcode_round_trips_through_a_word() {
        for &op in Opcode::ALL {
            let word = ((op as u32) << 24) | 0x0003_0201;
            let i = Instr::decode(word).expect("valid opcode");
            assert_eq!(i.opcode(), op);
            let again = Instr::decode(i.encode()).expect("re-decodes");
            assert_eq!(again, i, "{op:?}");
        }
    }

    #[test]
    fn known_encodings() {
        // add %r1, %r2, %r3
        let add = Instr::Alu {
            op: Opcode::Add,
            r1: 1,
            r2: 2,
            rd: 3,
        };
        assert_eq!(add.encode(), 0x0701_0203);
        // setx DT_INTEGER[5], %r4
        assert_eq!(Instr::Setx { idx: 5, rd: 4 }.encode(), 0x2500_0504);
        // ba 7
        assert_eq!(
            Instr::Branch {
                op: Opcode::Ba,
                label: 7
            }
            .encode(),
            0x1100_0007
        );
        // ret %r1
        assert_eq!(Instr::Ret { rd: 1 }.encode(), 0x2300_0001);
    }

    #[test]
    fn bad_opcodes_are_errors() {
        for b in [0u8, 80, 200, 255] {
            let w = (b as u32) << 24;
            assert_eq!(Instr::decode(w), Err(DecodeError { word: w, opcode: b }));
        }
    }

    #[test]
    fn reserved_bits_show_up_as_a_different_reencoding() {
        let w = 0x2300_0101; // ret with r2 = 1
        assert_ne!(Instr::decode(w).unwrap().encode(), w);
    }
}
