//! `strjoin(a, b)` in translated code, as the interpreter's: the characters of `a` then those of
//! `b`, each read up to `strsize - 1` characters, the whole cut to `strsize - 1` and NUL-ended,
//! built in a slot of the context's per-CPU string scratch, zeroed first (so the result is
//! zero-padded, as an aggregation key needs). Either part NULL (a string variable holding none)
//! faults with `DTRACEFLT_BADADDR` at address 0, as in the interpreter.
//!
//! Each part is appended at the length built so far (`len`, kept in R4, never more than
//! `strsize - 1`): a constant or `execname` byte by byte, unrolled (each byte checks the room
//! left); a string in the scratch with `bpf_probe_read_kernel_str` at `len`, its size the room
//! left. The verifier bounds that copy by the largest offset plus the largest size, so the result
//! takes two slots of the scratch (only the first holds the string).

use super::{FaultAddr, Kind, Pushed, State, Translator, Untranslatable, COMM_LEN};
use crate::insn::{helper, op, Size, R0, R1, R10, R2, R3, R4};
use dtrace_dif::vm::FaultKind;

impl Translator<'_> {
    /// `strjoin()` of the two strings on the tuple stack into `rd` (see the module notes).
    pub(super) fn strjoin(
        &mut self,
        pc: usize,
        s: &mut State,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let parts = match s.tuple.as_deref() {
            Some([Pushed::Str(a), Pushed::Str(b)]) if followed(a) && followed(b) => {
                [a.clone(), b.clone()]
            }
            _ => {
                return Err(Untranslatable::Value {
                    pc,
                    what: "strjoin() of strings the translator does not follow".into(),
                })
            }
        };
        let refused = super::refusal(pc, "strjoin()");
        // D's strsize: the most characters the result holds.
        self.string_bound().map_err(refused)?;
        let width = super::string_scratch_width(self.strsize);
        let offset = self.scratch_slots * width;
        self.scratch_slots += 2;
        let buf = self.frame.load_buf();
        let no_scratch = self.fault_site(pc, FaultKind::NoScratch, FaultAddr::Zero);
        let null = parts
            .contains(&Kind::VarStr)
            .then(|| self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Zero));
        self.ctx
            .emit_string_scratch(&mut self.a, offset, 2 * width)
            .map_err(refused)?;
        let tuple = [self.frame.tuple(0), self.frame.tuple(1)];
        let a = &mut self.a;
        a.jmp_imm(op::JEQ, R0, 0, no_scratch);
        a.store(Size::DW, R10, buf, R0);
        for w in (0..width).step_by(8) {
            a.store_imm(Size::DW, R0, w as i16, 0);
        }
        a.mov_imm(R4, 0);
        for (part, at) in parts.iter().zip(tuple) {
            self.append(pc, part, at, null)?;
        }
        let a = &mut self.a;
        a.load(Size::DW, R1, R10, buf);
        self.put(s, rd, R1, Kind::Scratch);
        Ok(())
    }
}

impl Translator<'_> {
    /// Appends string `part` (its address, when in the scratch, in the frame at `at`) to the
    /// string in the scratch at the address the load buffer holds, whose length R4 holds (the
    /// bytes past it zero); R4 is its new length, at most `strsize - 1`. A NULL part jumps to
    /// `null`. Uses R0 to R3 and the fault address's slot.
    pub(super) fn append(
        &mut self,
        pc: usize,
        part: &Kind,
        at: i16,
        null: Option<crate::insn::Label>,
    ) -> Result<(), Untranslatable> {
        let most = self.strsize - 1;
        let most32 = i32::try_from(most).unwrap_or(i32::MAX);
        let (buf, comm, temp) = (
            self.frame.load_buf(),
            self.frame.comm(),
            self.frame.fault_addr_at(),
        );
        let a = &mut self.a;
        let done = a.label();
        match part {
            Kind::StrConst(b) => {
                let b = b.split(|&c| c == 0).next().unwrap_or_default();
                for &c in b.iter().take(most) {
                    emit_append_byte(a, buf, most32, done, |a| {
                        a.mov_imm(R2, i32::from(c));
                    });
                }
            }
            Kind::Execname => {
                // The interpreter keeps `strsize - 1` bytes of a built-in string.
                for i in 0..COMM_LEN.min(most) {
                    a.load(Size::B, R2, R10, comm + i as i16);
                    a.jmp_imm(op::JEQ, R2, 0, done);
                    emit_append_byte(a, buf, most32, done, |_| {});
                }
            }
            Kind::Scratch | Kind::VarStr => {
                a.load(Size::DW, R3, R10, at);
                if let (Kind::VarStr, Some(null)) = (part, null) {
                    a.jmp_imm(op::JEQ, R3, 0, null);
                }
                // R1: the end of the string so far; R2: the room left, its NUL included.
                a.load(Size::DW, R1, R10, buf).alu(op::ADD, R1, R4);
                a.mov_imm(R2, most32 + 1).alu(op::SUB, R2, R4);
                // The helper clobbers R4: the length so far waits in the frame.
                a.store(Size::DW, R10, temp, R4);
                a.call(helper::PROBE_READ_KERNEL_STR);
                a.load(Size::DW, R4, R10, temp);
                // A string in the scratch always reads (r0 >= 1: the NUL counted).
                a.jmp_imm(op::JSLE, R0, 0, done);
                a.alu(op::ADD, R4, R0).alu_imm(op::SUB, R4, 1);
                a.jmp_imm(op::JLE, R4, most32, done);
                a.mov_imm(R4, most32);
            }
            _ => {
                return Err(Untranslatable::Value {
                    pc,
                    what: "a string the translator does not follow".into(),
                })
            }
        }
        a.bind(done);
        Ok(())
    }
}

/// Appends the byte that `byte` leaves in R2 at the string's end (the scratch address in the
/// frame at `buf`, the length in R4), unless it already holds `most` characters (then to
/// `done`). Uses R1.
fn emit_append_byte(
    a: &mut crate::insn::Asm,
    buf: i16,
    most: i32,
    done: crate::insn::Label,
    byte: impl FnOnce(&mut crate::insn::Asm),
) {
    a.jmp_imm(op::JGE, R4, most, done);
    byte(a);
    a.load(Size::DW, R1, R10, buf).alu(op::ADD, R1, R4);
    a.store(Size::B, R1, 0, R2);
    a.alu_imm(op::ADD, R4, 1);
}

/// Whether `append` follows string `k`.
pub(super) fn followed(k: &Kind) -> bool {
    matches!(
        k,
        Kind::StrConst(_) | Kind::Execname | Kind::Scratch | Kind::VarStr
    )
}
