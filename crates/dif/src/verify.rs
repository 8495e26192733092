//! The load-time verifier (DTrace's `dtrace_difo_validate`, extended): every constraint of spec ch.8 on
//! registers, `%r0`, reserved bits, branches, table and variable references, subroutine numbers, tuple
//! stack depth, the final `ret`, the return type and the variable table. It reports every violation,
//! each with where it is and a message in DTrace's words.

use std::fmt;

use crate::object::DIFV_SCOPE_THREAD;
use crate::object::{DifObject, DIF_TF_BYREF, DIF_TF_BYUREF, DIF_TYPE_CTF, DIF_TYPE_STRING};
use crate::object::{DIFV_KIND_ARRAY, DIFV_KIND_SCALAR, DIFV_SCOPE_GLOBAL, DIFV_SCOPE_LOCAL};
use crate::opcode::Opcode;
use crate::subr::Subr;
use crate::vars;
use crate::vm::machine::TUPLE_REGS;

/// Number of integer registers (`DIF_DIR_NREGS`).
pub const NREGS: u32 = 8;
/// Largest array variable id of `ldga`/`ldta` (`DIF_VAR_ARRAY_MAX`).
pub const VAR_ARRAY_MAX: u32 = 0xff;
/// Largest by-reference variable the VM accepts.
pub const MAX_VAR_SIZE: u32 = 1 << 20;
/// Largest number of instructions (branch labels are 24 bits).
pub const MAX_TEXT: usize = 1 << 24;

/// Where a violation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// Instruction index in the text (its DIF offset is 4 times this).
    Instr(u32),
    /// Entry of the variable table.
    Var(u32),
    /// The object as a whole.
    Object,
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Where.
    pub at: Location,
    /// What, in DTrace's words ("invalid register 9", "backward branch to 2", ...).
    pub msg: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at {
            Location::Instr(pc) => write!(
                f,
                "DIF offset {} (instruction {pc}): {}",
                pc as u64 * 4,
                self.msg
            ),
            Location::Var(i) => write!(f, "variable table entry {i}: {}", self.msg),
            Location::Object => write!(f, "{}", self.msg),
        }
    }
}

/// A DIF object failed verification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct VerifyError {
    /// Every violation found, in order.
    pub violations: Vec<Violation>,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DIF validation failed: ")?;
        for (i, v) in self.violations.iter().enumerate() {
            if i > 0 {
                write!(f, "; ")?;
            }
            write!(f, "{v}")?;
        }
        Ok(())
    }
}

fn known_builtin(id: u32) -> bool {
    vars::builtin_name(id).is_some() && id >= vars::DIF_VAR_OTHER_MIN
}

fn known_array(id: u32) -> bool {
    matches!(
        id,
        vars::DIF_VAR_ARGS | vars::DIF_VAR_REGS | vars::DIF_VAR_UREGS
    )
}

struct V<'a> {
    obj: &'a DifObject,
    out: Vec<Violation>,
    pc: u32,
}

impl V<'_> {
    fn err(&mut self, msg: String) {
        self.out.push(Violation {
            at: Location::Instr(self.pc),
            msg,
        });
    }
    fn reg(&mut self, r: u32) {
        if r >= NREGS {
            self.err(format!("invalid register {r}"));
        }
    }
    fn dest(&mut self, r: u32) {
        self.reg(r);
        if r == 0 {
            self.err("cannot write to %r0".into());
        }
    }
    fn zero(&mut self, v: u32) {
        if v != 0 {
            self.err("non-zero reserved bits".into());
        }
    }
    fn user_var(&mut self, id: u32, scope: u8, kind: u8) {
        if id < vars::DIF_VAR_OTHER_UBASE {
            self.err(format!("invalid variable {id}"));
            return;
        }
        if !self
            .obj
            .vartab
            .iter()
            .any(|v| v.id == id && v.scope == scope && v.kind == kind)
        {
            let k = if kind == DIFV_KIND_ARRAY {
                "array"
            } else {
                "scalar"
            };
            let s = match scope {
                DIFV_SCOPE_GLOBAL => "global",
                DIFV_SCOPE_THREAD => "thread-local",
                _ => "clause-local",
            };
            self.err(format!(
                "variable {id} is not a {s} {k} of the variable table"
            ));
        }
    }
}

/// Checks every load-time rule; `Ok` means the object is safe to [`run`](crate::vm::Machine::run).
pub fn verify(obj: &DifObject) -> Result<(), VerifyError> {
    use Opcode::*;
    let mut v = V {
        obj,
        out: Vec::new(),
        pc: 0,
    };
    let len = obj.text.len();
    if len == 0 {
        v.out.push(Violation {
            at: Location::Object,
            msg: "empty DIF object: expected 'ret' as last DIF instruction".into(),
        });
    }
    if len > MAX_TEXT {
        v.out.push(Violation {
            at: Location::Object,
            msg: format!("{len} instructions exceed the limit of {MAX_TEXT}"),
        });
        return Err(VerifyError { violations: v.out });
    }
    // Tuple-stack depth on entry to each instruction (branches are forward, so one pass suffices).
    let mut depth_in: Vec<Option<u32>> = vec![None; len + 1];
    if len > 0 {
        depth_in[0] = Some(0);
    }
    for (pc, &w) in obj.text.iter().enumerate() {
        v.pc = pc as u32;
        let r1 = (w >> 16) & 0xff;
        let r2 = (w >> 8) & 0xff;
        let rd = w & 0xff;
        let idx = (w >> 8) & 0xffff;
        let label = w & 0x00ff_ffff;
        let depth = depth_in[pc];
        let mut depth_out = depth;
        let mut falls_through = true;
        let Some(op) = Opcode::from_u8((w >> 24) as u8) else {
            v.err(format!("invalid opcode {}", w >> 24));
            continue;
        };
        match op {
            Or | Xor | And | Sll | Srl | Sra | Sub | Add | Mul | Sdiv | Udiv | Srem | Urem
            | Copys => {
                v.reg(r1);
                v.reg(r2);
                v.dest(rd);
            }
            Not | Mov | Allocs => {
                v.reg(r1);
                v.zero(r2);
                v.dest(rd);
            }
            Ldsb | Ldsh | Ldsw | Ldub | Lduh | Lduw | Ldx | Uldsb | Uldsh | Uldsw | Uldub
            | Ulduh | Ulduw | Uldx | Rldsb | Rldsh | Rldsw | Rldub | Rlduh | Rlduw | Rldx => {
                v.reg(r1);
                v.zero(r2);
                v.dest(rd);
            }
            Stb | Sth | Stw | Stx => {
                v.reg(r1);
                v.zero(r2);
                v.reg(rd);
                if rd == 0 {
                    v.err("cannot write to 0 address".into());
                }
            }
            Cmp | Scmp => {
                v.reg(r1);
                v.reg(r2);
                v.zero(rd);
            }
            Tst => {
                v.reg(r1);
                v.zero(r2 | rd);
            }
            Ba | Be | Bne | Bg | Bgu | Bge | Bgeu | Bl | Blu | Ble | Bleu => {
                if label as usize >= len {
                    v.err(format!("invalid branch target {label}"));
                } else if label as usize <= pc {
                    v.err(format!("backward branch to {label}"));
                } else if let Some(d) = depth {
                    let t = &mut depth_in[label as usize];
                    *t = Some(t.map_or(d, |x| x.max(d)));
                }
                falls_through = op != Ba;
            }
            Ret => {
                v.zero(r1 | r2);
                v.reg(rd);
                falls_through = false;
            }
            Nop | Popts | Flushts => {
                v.zero(r1 | r2 | rd);
                depth_out = match op {
                    Popts => depth.map(|d| d.saturating_sub(1)),
                    Flushts => depth.map(|_| 0),
                    _ => depth,
                };
            }
            Setx => {
                if idx as usize >= obj.inttab.len() {
                    v.err(format!("invalid integer ref {idx}"));
                }
                v.dest(rd);
            }
            Sets => {
                if idx as usize >= obj.strtab.len() {
                    v.err(format!("invalid string ref {idx}"));
                }
                v.dest(rd);
            }
            Ldga | Ldta => {
                if r1 > VAR_ARRAY_MAX || !known_array(r1) || op == Ldta {
                    v.err(format!("invalid array {r1}"));
                }
                v.reg(r2);
                v.dest(rd);
            }
            Ldgs => {
                if idx < vars::DIF_VAR_OTHER_MIN {
                    v.err(format!("invalid variable {idx}"));
                } else if idx < vars::DIF_VAR_OTHER_UBASE {
                    if !known_builtin(idx) {
                        v.err(format!("invalid variable {idx}"));
                    }
                } else {
                    v.user_var(idx, DIFV_SCOPE_GLOBAL, DIFV_KIND_SCALAR);
                }
                v.dest(rd);
            }
            Ldts | Ldls | Ldgaa | Ldtaa => {
                let (scope, kind) = match op {
                    Ldts => (DIFV_SCOPE_THREAD, DIFV_KIND_SCALAR),
                    Ldls => (DIFV_SCOPE_LOCAL, DIFV_KIND_SCALAR),
                    Ldgaa => (DIFV_SCOPE_GLOBAL, DIFV_KIND_ARRAY),
                    _ => (DIFV_SCOPE_THREAD, DIFV_KIND_ARRAY),
                };
                v.user_var(idx, scope, kind);
                v.dest(rd);
            }
            Stgs | Stts | Stls | Stgaa | Sttaa => {
                let (scope, kind) = match op {
                    Stgs => (DIFV_SCOPE_GLOBAL, DIFV_KIND_SCALAR),
                    Stts => (DIFV_SCOPE_THREAD, DIFV_KIND_SCALAR),
                    Stls => (DIFV_SCOPE_LOCAL, DIFV_KIND_SCALAR),
                    Stgaa => (DIFV_SCOPE_GLOBAL, DIFV_KIND_ARRAY),
                    _ => (DIFV_SCOPE_THREAD, DIFV_KIND_ARRAY),
                };
                v.user_var(idx, scope, kind);
                v.reg(rd);
            }
            Call => {
                if Subr::from_u16(idx as u16).is_none() {
                    v.err(format!("invalid subr {idx}"));
                }
                v.dest(rd);
            }
            Pushtr | Pushtv => {
                if op == Pushtr && r1 != DIF_TYPE_STRING as u32 && r1 != DIF_TYPE_CTF as u32 {
                    v.err(format!("invalid ref type {r1}"));
                }
                if op == Pushtv && r1 != DIF_TYPE_CTF as u32 {
                    v.err(format!("invalid val type {r1}"));
                }
                v.reg(r2);
                v.reg(rd);
                depth_out = depth.map(|d| d + 1);
                if let Some(d) = depth_out {
                    if d as usize > TUPLE_REGS {
                        v.err(format!(
                            "tuple stack overflow: depth {d} exceeds {TUPLE_REGS}"
                        ));
                        depth_out = Some(TUPLE_REGS as u32);
                    }
                }
            }
            Xlate | Xlarg => {
                v.err(format!(
                    "{} is resolved by the compiler and cannot be executed",
                    op.mnemonic()
                ));
            }
        }
        if falls_through {
            if let Some(d) = depth_out {
                let t = &mut depth_in[pc + 1];
                *t = Some(t.map_or(d, |x| x.max(d)));
            }
        }
    }
    if let Some(&last) = obj.text.last() {
        if last >> 24 != Opcode::Ret as u32 {
            v.out.push(Violation {
                at: Location::Instr(len as u32 - 1),
                msg: "expected 'ret' as last DIF instruction".into(),
            });
        }
    }
    let rt = &obj.rtype;
    if rt.flags & (DIF_TF_BYREF | DIF_TF_BYUREF) == 0 && !matches!(rt.size, 0 | 1 | 2 | 4 | 8) {
        v.out.push(Violation {
            at: Location::Object,
            msg: "bad return size".into(),
        });
    }
    if rt.flags & (DIF_TF_BYREF | DIF_TF_BYUREF) != 0 && rt.size > MAX_VAR_SIZE {
        v.out.push(Violation {
            at: Location::Object,
            msg: "oversized by-ref return type".into(),
        });
    }
    for (i, var) in obj.vartab.iter().enumerate() {
        let at = Location::Var(i as u32);
        let mut bad = |msg: String| v.out.push(Violation { at, msg });
        if var.scope > DIFV_SCOPE_LOCAL {
            bad(format!("unrecognized variable scope {}", var.scope));
        }
        if var.kind > DIFV_KIND_SCALAR {
            bad(format!("unrecognized variable type {}", var.kind));
        }
        if var.id > 0xffff {
            bad(format!("{} exceeds variable id limit", var.id));
        }
        if obj.string_at(var.name as usize).is_none() {
            bad(format!("invalid variable name ref {}", var.name));
        }
        if var.id < vars::DIF_VAR_OTHER_UBASE {
            continue;
        }
        if var.ty.flags & DIF_TF_BYREF != 0 && var.ty.size == 0 {
            bad("zero-sized variable".into());
        }
        if var.ty.size > MAX_VAR_SIZE && var.ty.flags & DIF_TF_BYREF != 0 {
            bad("oversized by-ref variable".into());
        }
        if var.scope == DIFV_SCOPE_LOCAL && var.kind == DIFV_KIND_ARRAY {
            bad("clause-local arrays are not supported".into());
        }
        if obj.vartab[..i]
            .iter()
            .any(|o| o.id == var.id && o.scope == var.scope && o.kind == var.kind && o.ty != var.ty)
        {
            bad(format!(
                "variable {} declared twice with different types",
                var.id
            ));
        }
    }
    if v.out.is_empty() {
        Ok(())
    } else {
        Err(VerifyError { violations: v.out })
    }
}
