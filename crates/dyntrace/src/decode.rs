//! Decoding the instruction at a traced thread's program counter: its op (via the opcode list), its
//! length, and what kind of instruction it is for the tracer's bookkeeping.

use crate::oplist::{OpKey, OpList, MAX_INSN_LEN};
use iced_x86::{Code, Decoder, DecoderOptions, FlowControl, Instruction};

/// What the tracer must know about an instruction beyond its op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Falls through to the next instruction.
    Plain,
    /// Transfers control (jumps, calls, returns, loops).
    Branch,
    /// Enters the kernel (syscall, sysenter, int 0x80).
    Syscall,
    /// A REP-prefixed string instruction: single-stepping traps once per iteration.
    RepString,
    /// Raises SIGTRAP itself (int3, int1, into, int n).
    Trap,
    /// Could not be decoded.
    Invalid,
}

/// A decoded instruction.
#[derive(Debug, Clone, Copy)]
pub struct Decoded {
    /// What it counts as.
    pub key: OpKey,
    /// Its length in bytes.
    pub len: u8,
    /// Its kind.
    pub kind: Kind,
    /// For direct branches, the target; otherwise 0.
    pub target: u64,
    /// The instruction as the decoder saw it.
    pub insn: Instruction,
}

/// Decodes `bytes` found at `pc` in a `bitness`-bit code segment.
pub fn decode(ops: &OpList, bytes: &[u8], pc: u64, bitness: u32) -> Decoded {
    let bytes = &bytes[..bytes.len().min(MAX_INSN_LEN)];
    let mut d = Decoder::with_ip(bitness, bytes, pc, DecoderOptions::NONE);
    let insn = d.decode();
    let key = ops.classify(bytes, &insn, bitness);
    let kind = if insn.is_invalid() {
        Kind::Invalid
    } else {
        match insn.code() {
            Code::Syscall | Code::Sysenter => Kind::Syscall,
            Code::Int_imm8 if insn.immediate8() == 0x80 => Kind::Syscall,
            Code::Int3 | Code::Int1 | Code::Into | Code::Int_imm8 => Kind::Trap,
            _ if (insn.has_rep_prefix() || insn.has_repne_prefix())
                && insn.code().is_string_instruction() =>
            {
                Kind::RepString
            }
            _ => match insn.flow_control() {
                FlowControl::Next => Kind::Plain,
                FlowControl::Interrupt | FlowControl::Exception => Kind::Trap,
                _ => Kind::Branch,
            },
        }
    };
    let target = match insn.flow_control() {
        FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch | FlowControl::Call => {
            insn.near_branch_target()
        }
        _ => 0,
    };
    Decoded {
        key,
        len: if insn.is_invalid() {
            1
        } else {
            insn.len() as u8
        },
        kind,
        target,
        insn,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oplist::BUILTIN_OPLIST;

    #[test]
    fn kinds() {
        let ops = OpList::parse(BUILTIN_OPLIST, "builtin").unwrap();
        let k = |b: &[u8]| decode(&ops, b, 0x1000, 64).kind;
        assert_eq!(k(&[0x0f, 0x05]), Kind::Syscall);
        assert_eq!(k(&[0xcd, 0x80]), Kind::Syscall);
        assert_eq!(k(&[0xcc]), Kind::Trap);
        assert_eq!(k(&[0xf3, 0xa4]), Kind::RepString);
        assert_eq!(k(&[0xa4]), Kind::Plain);
        assert_eq!(k(&[0xeb, 0xfe]), Kind::Branch);
        assert_eq!(k(&[0xc3]), Kind::Branch);
        assert_eq!(k(&[0x48, 0x01, 0xc8]), Kind::Plain);
        assert_eq!(k(&[0x06]), Kind::Invalid);
        assert_eq!(k(&[]), Kind::Invalid);
        let d = decode(&ops, &[0xeb, 0xfe], 0x1000, 64);
        assert_eq!((d.len, d.target), (2, 0x1000));
    }
}
