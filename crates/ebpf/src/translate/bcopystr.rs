//! `bcopy(src, dst, n)` whose source is a string (a constant, `execname`, a string variable, a
//! string a subroutine built, a `copyinstr()` that is not the last scratch the interpreter
//! allocated) into `alloca()` memory: the `n` bytes from the string's start, as the
//! interpreter copies them from its storage of the string.
//!
//! The interpreter checks the destination (the alloca access, see `alloca`), then reads `n`
//! bytes at the string's address: within the string's own allocation they are the string, its
//! NUL and zeros (see `strindex`), which the kernel's string slot holds alike; past it, what
//! its scratch or string table holds next, which the kernel does not. So the copy is made at the
//! probe when `n` lies within the string's window ([`super::State::pushed_window`], a
//! constant's characters and NUL); a larger `n` keeps the clause in dtrace with that reason.
//! A NULL string variable is read at address 0, which faults `DTRACEFLT_BADADDR` there, after
//! the destination's check. (The string a `copyinstr()` of the same expression just made is
//! copied by `alloca` itself, up to a whole string's storage: scratch past it reads as zeros.)

use super::alloca::Access;
use super::{FaultAddr, Kind, Pushed, State, Translator, Untranslatable};
use crate::insn::{helper, op, Size, R1, R10, R2, R3};
use dtrace_dif::vm::FaultKind;

impl Translator<'_> {
    /// `bcopy()` of the string `src` (pushed first, see [`Translator::bcopy`]) into the alloca
    /// memory pushed second, the size pushed third (see the module notes).
    pub(super) fn string_bcopy(
        &mut self,
        pc: usize,
        s: &State,
        src: Kind,
    ) -> Result<(), Untranslatable> {
        let refused = |what: String| Untranslatable::Value {
            pc,
            what: format!("bcopy(): {what}"),
        };
        let dst = match s.tuple.as_deref() {
            Some([_, Pushed::Reg(r), _]) if s[(r & 7) as usize] == Kind::Alloca => {
                self.frame.reg(*r)
            }
            Some([_, Pushed::Str(Kind::Alloca), _]) => self.frame.tuple(1),
            _ => return Err(refused("a destination other than alloca() memory".into())),
        };
        let n = match s.tuple.as_deref() {
            Some([_, _, Pushed::Reg(r)]) => match s[(r & 7) as usize] {
                Kind::Int(Some(n)) if n > 0 => Some(n),
                _ => None,
            },
            _ => None,
        }
        .ok_or_else(|| refused("a size other than a constant above 0".into()))?;
        let window = match &src {
            Kind::StrConst(b) => b.len() as u64 + 1,
            Kind::Execname | Kind::Scratch | Kind::VarStr => s.pushed_window[0].unwrap_or(1),
            _ => 0,
        };
        if n > window {
            return Err(refused(format!(
                "a string as its source, {n} bytes past the {window} of it dtrace and the kernel \
                 are known to hold alike (the interpreter reads what follows it in its own \
                 scratch or string table)"
            )));
        }
        let n32 = u32::try_from(n)
            .ok()
            .filter(|&n| n <= i16::MAX as u32)
            .ok_or_else(|| refused(format!("a string copy of {n} bytes")))?;
        self.alloca_access(pc, dst, Access::Copy(n32))?;
        // R1: the destination's bytes in the area.
        match src {
            Kind::StrConst(b) => {
                for i in 0..n as usize {
                    let c = b.get(i).copied().unwrap_or(0);
                    self.a.store_imm(Size::B, R1, i as i16, i32::from(c));
                }
            }
            Kind::Execname => {
                // One byte (the window): the interpreter keeps `strsize - 1` characters of it.
                if self.strsize > 1 {
                    self.a.load(Size::B, R2, R10, self.frame.comm());
                    self.a.store(Size::B, R1, 0, R2);
                } else {
                    self.a.store_imm(Size::B, R1, 0, 0);
                }
            }
            kind => {
                // The string's address was kept in the tuple slot of its position.
                let at = self.frame.tuple(0);
                if kind == Kind::VarStr {
                    let null = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Zero);
                    self.a.load(Size::DW, R3, R10, at);
                    self.a.jmp_imm(op::JEQ, R3, 0, null);
                }
                let a = &mut self.a;
                a.mov_imm(R2, n32 as i32).load(Size::DW, R3, R10, at);
                // Its own slot: the read does not fail.
                a.call(helper::PROBE_READ_KERNEL);
            }
        }
        Ok(())
    }
}
