//! `strlen(s)` in translated code, as the interpreter's: the bytes before the NUL, at most D's
//! `strsize` (a string's storage less its NUL); `strlen(NULL)` faults with `DTRACEFLT_BADADDR`
//! at address 0, as DTrace for Linux's does. The strings it follows are those the compares
//! follow (`strings`): a constant is measured here, `execname` in the fragment's frame and a
//! string in the context's scratch (`copyinstr()`, a string variable's copy) by a loop over its
//! bytes, bounded by `strsize` (the verifier walks it once per byte). The length is the
//! difference of the pointer that stopped and the string's start: a number the verifier knows
//! nothing of, so the code after the loop is not verified once per length.

use super::{Kind, Pushed, State, Translator, Untranslatable, COMM_LEN};
use crate::insn::{op, Reg, Size, R1, R10, R2, R3};
use dtrace_dif::vm::FaultKind;

impl Translator<'_> {
    /// `strlen()` of the string on the tuple stack into `rd`.
    pub(super) fn strlen(
        &mut self,
        pc: usize,
        s: &mut State,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let arg = match s.tuple.as_deref() {
            Some([Pushed::Str(k)]) => k.clone(),
            _ => {
                return Err(Untranslatable::Value {
                    pc,
                    what: "strlen() of a string the translator does not follow".into(),
                })
            }
        };
        // D's strsize: the most characters a string holds.
        let most = self.strsize - 1;
        match arg {
            Kind::StrConst(b) => {
                let n = b.iter().position(|&c| c == 0).unwrap_or(b.len()).min(most);
                self.a.mov_imm(R1, n as i32);
                self.put(s, rd, R1, Kind::Int(Some(n as u64)));
                return Ok(());
            }
            Kind::Execname => {
                let comm = self.frame.comm();
                self.a.frame_addr(R1, i32::from(comm));
                emit_measure(&mut self.a, R1, most.min(COMM_LEN));
                self.a.frame_addr(R3, i32::from(comm));
            }
            Kind::Scratch | Kind::VarStr => {
                // The string's address (0: NULL), kept in the tuple slot when it was pushed.
                let at = self.frame.tuple(0);
                self.a.load(Size::DW, R1, R10, at);
                if arg == Kind::VarStr {
                    let null = self.fault_site(pc, FaultKind::BadAddr, super::FaultAddr::Zero);
                    self.a.jmp_imm(op::JEQ, R1, 0, null);
                }
                emit_measure(&mut self.a, R1, most);
                self.a.load(Size::DW, R3, R10, at);
            }
            _ => {
                return Err(Untranslatable::Value {
                    pc,
                    what: "strlen() of a string the translator does not follow".into(),
                })
            }
        }
        // The pointer that stopped less the string's start.
        self.a.alu(op::SUB, R1, R3);
        self.put(s, rd, R1, Kind::Int(None));
        Ok(())
    }
}

/// Advances the pointer in `p` to the first NUL of the string it points to, or `most` bytes on
/// (a bounded loop; `most` 0 reads nothing). Uses R2 and R3.
fn emit_measure(a: &mut crate::insn::Asm, p: Reg, most: usize) {
    if most == 0 {
        return;
    }
    let (top, out) = (a.label(), a.label());
    a.mov_imm(R2, i32::try_from(most).unwrap_or(i32::MAX));
    a.bind(top);
    a.load(Size::B, R3, p, 0);
    a.jmp_imm(op::JEQ, R3, 0, out);
    a.alu_imm(op::ADD, p, 1).alu_imm(op::SUB, R2, 1);
    a.jmp_imm(op::JNE, R2, 0, top);
    a.bind(out);
}
