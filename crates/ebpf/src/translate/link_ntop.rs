//! `link_ntop(type, addr)` in translated code, as the interpreter's (`strfn::link_ntop`): a
//! hardware address (6 bytes for `ARPHRD_ETHER`, 20 for `ARPHRD_INFINIBAND`) as two lower-case
//! hex digits a byte, `:` between them. (`uuidstr()`, OpenDTrace's, is not a D function here, as
//! in DTrace for Linux, so no D program calls it.) The bytes are
//! read as `inet_ntoa()`'s are (`inet::bytes_as_text`: kernel memory or alloca() memory, a read
//! that fails faulting `DTRACEFLT_BADADDR` at `addr`) and each byte's digits are written without
//! a branch. `link_ntop()`'s type must be a constant `ARPHRD_ETHER` or `ARPHRD_INFINIBAND`:
//! another faults in the interpreter, which then runs the clause.

use super::inet::{put_byte, ShownBytes, BYTES};
use super::{Kind, Pushed, State, Translator, Untranslatable};
use crate::insn::{op, Asm, Size, R1, R2, R3, R5};
use dtrace_dif::vm::subr::{ARPHRD_ETHER, ARPHRD_INFINIBAND};

impl Translator<'_> {
    /// `link_ntop()` of the arguments on the tuple stack into `rd` (see the module notes).
    pub(super) fn link_ntop(
        &mut self,
        pc: usize,
        s: &mut State,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let named = "link_ntop()";
        // The address may be an alloca() pointer (see `alloca`).
        let (args, pointer) = self.args_with_alloca(pc, s)?;
        let [_, addr] = args[..] else {
            return Err(Untranslatable::Invalid {
                pc,
                what: format!("{named} with {} arguments", args.len()),
            });
        };
        let kind = match s.tuple.as_deref().and_then(|t| t.first()) {
            Some(Pushed::Reg(r)) => match &s[(r & 7) as usize] {
                Kind::Int(v) => *v,
                _ => None,
            },
            _ => None,
        };
        let n = match kind {
            Some(ARPHRD_ETHER) => 6,
            Some(ARPHRD_INFINIBAND) => 20,
            _ => {
                return Err(super::refusal(pc, named)(
                    "a hardware type other than a constant ARPHRD_ETHER or ARPHRD_INFINIBAND"
                        .into(),
                ))
            }
        };
        let shown = ShownBytes { addr, pointer, n };
        self.bytes_as_text((pc, s, rd), named, shown, |a| {
            for i in 0..n as i16 {
                if i > 0 {
                    put_byte(a, b':');
                }
                emit_hex_byte(a, BYTES + i);
            }
        })
    }
}

/// Writes the byte at work offset `at` as two lower-case hex digits at R3, moving R3 past
/// them; uses R1, R2.
fn emit_hex_byte(a: &mut Asm, at: i16) {
    for shift in [4, 0] {
        a.load(Size::B, R1, R5, at);
        a.alu_imm(op::RSH, R1, shift).alu_imm(op::AND, R1, 15);
        // 1 when the digit is a letter (9 - d is negative), times the gap from '9' + 1 to 'a'.
        a.mov_imm(R2, 9)
            .alu(op::SUB, R2, R1)
            .alu_imm(op::RSH, R2, 63);
        a.alu_imm(op::MUL, R2, i32::from(b'a' - b'0' - 10));
        a.alu(op::ADD, R1, R2).alu_imm(op::ADD, R1, i32::from(b'0'));
        a.store(Size::B, R3, 0, R1);
        a.alu_imm(op::ADD, R3, 1);
    }
}
