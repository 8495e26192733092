//! The pre-decoded form of a DIF object that the interpreter runs ([`Prepared`]).
//!
//! A [`DifObject`] stays the contract (what the compiler emits, DOF carries and the verifier checks);
//! [`Prepared::new`] decodes its words once into compact operations with resolved operands: registers
//! masked to 0-7, `setx`/`sets` turned into constants, branch targets checked, variable references
//! resolved to their variable-table entries, built-in loads split by kind. The framework keeps one per
//! ECB predicate and action, so a probe firing never decodes a word or searches the variable table.
//!
//! Preparation is total: anything the interpreter would fault on (an invalid opcode, a table index out
//! of range, a backward branch, a variable missing from the table) becomes a [`Code::Fault`] that raises
//! the same fault, at the same instruction, when (and only when) it is reached.

use crate::object::DIFV_KIND_ARRAY as ARR;
use crate::object::DIFV_KIND_SCALAR as SCL;
use crate::object::DIFV_SCOPE_GLOBAL as GLB;
use crate::object::DIFV_SCOPE_LOCAL as LOC;
use crate::object::DIFV_SCOPE_THREAD as TLS;
use crate::object::DIF_TYPE_STRING;
use crate::object::{DifObject, VarEntry};
use crate::opcode::Opcode;
use crate::vars::DIF_VAR_OTHER_UBASE;
use crate::vm::env::is_string_var;

/// Why a [`Code::Fault`] faults (all are illegal operations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadOp {
    Opcode,
    Branch,
    IntIndex,
    StrOffset,
    VarMissing,
    BuiltinStore,
    BuiltinDynamic,
    VarRange,
    ThreadArray,
    Translator,
}

impl BadOp {
    pub(crate) fn detail(self) -> &'static str {
        match self {
            BadOp::Opcode => "invalid opcode",
            BadOp::Branch => "branch not forward within the object",
            BadOp::IntIndex => "integer table index out of range",
            BadOp::StrOffset => "string table offset out of range",
            BadOp::VarMissing => "variable not in the variable table",
            BadOp::BuiltinStore => "built-in variables cannot be stored to",
            BadOp::BuiltinDynamic => "built-in variables are not dynamic",
            BadOp::VarRange => "variable id out of range",
            BadOp::ThreadArray => "there are no built-in thread-local arrays",
            BadOp::Translator => {
                "not yet supported: xlate/xlarg (the compiler resolves translators itself)"
            }
        }
    }
}

/// What a pre-decoded instruction does ([`Op::code`]). Loads are named by width and signedness
/// (`Ld*` kernel or VM memory, `Uld*` user memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Code {
    Or,
    Xor,
    And,
    Sll,
    Srl,
    Sra,
    Sub,
    Add,
    Mul,
    Sdiv,
    Udiv,
    Srem,
    Urem,
    Not,
    Mov,
    Cmp,
    Tst,
    Scmp,
    Ba,
    Be,
    Bne,
    Bg,
    Bgu,
    Bge,
    Bgeu,
    Bl,
    Blu,
    Ble,
    Bleu,
    Ld1s,
    Ld2s,
    Ld4s,
    Ld1,
    Ld2,
    Ld4,
    Ld8,
    Uld1s,
    Uld2s,
    Uld4s,
    Uld1,
    Uld2,
    Uld4,
    Uld8,
    St1,
    St2,
    St4,
    St8,
    Ret,
    Nop,
    /// `setx`: `x` is a checked integer-table index.
    Setx,
    /// `sets`: `x` is a checked string-table offset.
    Sets,
    /// `ldga`: `x` is the built-in array id.
    LdBuiltinArray,
    /// `ldgs` of an integer built-in: `x` is its id.
    LdBuiltinInt,
    /// `ldgs` of a string built-in: `x` is its id.
    LdBuiltinStr,
    LdGlobal,
    StGlobal,
    LdLocal,
    StLocal,
    Ldts,
    Stts,
    Ldgaa,
    Stgaa,
    Ldtaa,
    Sttaa,
    /// `x` is the subroutine number.
    Call,
    /// `pushtr`; `x` is 1 for a string.
    Pushtr,
    Pushtv,
    Popts,
    Flushts,
    Allocs,
    Copys,
    /// `x` is a [`BadOp`].
    Fault,
}

/// One pre-decoded instruction: 8 bytes. Registers are 0-7. `x` is the resolved operand: a branch
/// target (checked forward and in range), a table index or offset (checked), an index into
/// [`Prepared::vars`] for user-variable instructions, a built-in id or a subroutine number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Op {
    pub code: Code,
    pub r1: u8,
    pub r2: u8,
    pub rd: u8,
    pub x: u32,
}

const BAD_OPS: [BadOp; 10] = [
    BadOp::Opcode,
    BadOp::Branch,
    BadOp::IntIndex,
    BadOp::StrOffset,
    BadOp::VarMissing,
    BadOp::BuiltinStore,
    BadOp::BuiltinDynamic,
    BadOp::VarRange,
    BadOp::ThreadArray,
    BadOp::Translator,
];

impl BadOp {
    /// The `BadOp` an [`Code::Fault`] operand names.
    pub(crate) fn from_x(x: u32) -> BadOp {
        BAD_OPS.get(x as usize).copied().unwrap_or(BadOp::Opcode)
    }
}

/// A DIF object decoded once for the interpreter; see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    obj: DifObject,
    pub(crate) ops: Box<[Op]>,
    pub(crate) vars: Box<[VarEntry]>,
}

impl From<DifObject> for Prepared {
    fn from(obj: DifObject) -> Prepared {
        Prepared::new(obj)
    }
}

impl Prepared {
    /// Decodes `obj` (verified or not) for the interpreter.
    pub fn new(obj: DifObject) -> Prepared {
        let len = obj.text.len();
        let mut vars: Vec<VarEntry> = Vec::new();
        let ops = obj
            .text
            .iter()
            .enumerate()
            .map(|(pc, &w)| decode(&obj, &mut vars, pc, len, w))
            .collect();
        Prepared {
            obj,
            ops,
            vars: vars.into_boxed_slice(),
        }
    }

    /// The DIF object this was prepared from (its tables and return type).
    pub fn object(&self) -> &DifObject {
        &self.obj
    }
}

/// Resolves variable `id` of `scope` and `kind` to an index into `vars` (adding the entry on first use).
fn var_index(
    obj: &DifObject,
    vars: &mut Vec<VarEntry>,
    id: u32,
    scope: u8,
    kind: u8,
) -> Option<u32> {
    let e = obj
        .vartab
        .iter()
        .find(|v| v.id == id && v.scope == scope && v.kind == kind)?;
    if let Some(i) = vars.iter().position(|v| v == e) {
        return Some(i as u32);
    }
    vars.push(*e);
    Some(vars.len() as u32 - 1)
}

fn decode(obj: &DifObject, vars: &mut Vec<VarEntry>, pc: usize, len: usize, w: u32) -> Op {
    use Opcode::*;
    let r1 = ((w >> 16) & 7) as u8;
    let r2 = ((w >> 8) & 7) as u8;
    let rd = (w & 7) as u8;
    let idx = (w >> 8) & 0xffff;
    let op = |code: Code, x: u32| Op {
        code,
        r1,
        r2,
        rd,
        x,
    };
    let fault = |why: BadOp| Op {
        code: Code::Fault,
        r1: 0,
        r2: 0,
        rd: 0,
        x: why as u32,
    };
    let Some(opcode) = Opcode::from_u8((w >> 24) as u8) else {
        return fault(BadOp::Opcode);
    };
    // A user variable of the table; `low` is the fault for a built-in id there.
    let mut var = |scope: u8, kind: u8, code: Code, low: BadOp| -> Op {
        match var_index(obj, vars, idx, scope, kind) {
            None => fault(BadOp::VarMissing),
            Some(_) if idx < DIF_VAR_OTHER_UBASE => fault(low),
            Some(i) => op(code, i),
        }
    };
    let code = match opcode {
        Or => Code::Or,
        Xor => Code::Xor,
        And => Code::And,
        Sll => Code::Sll,
        Srl => Code::Srl,
        Sra => Code::Sra,
        Sub => Code::Sub,
        Add => Code::Add,
        Mul => Code::Mul,
        Sdiv => Code::Sdiv,
        Udiv => Code::Udiv,
        Srem => Code::Srem,
        Urem => Code::Urem,
        Not => Code::Not,
        Mov => Code::Mov,
        Cmp => Code::Cmp,
        Tst => Code::Tst,
        Scmp => Code::Scmp,
        Ba | Be | Bne | Bg | Bgu | Bge | Bgeu | Bl | Blu | Ble | Bleu => {
            let label = (w & 0x00ff_ffff) as usize;
            if label <= pc || label >= len {
                return fault(BadOp::Branch);
            }
            let c = match opcode {
                Ba => Code::Ba,
                Be => Code::Be,
                Bne => Code::Bne,
                Bg => Code::Bg,
                Bgu => Code::Bgu,
                Bge => Code::Bge,
                Bgeu => Code::Bgeu,
                Bl => Code::Bl,
                Blu => Code::Blu,
                Ble => Code::Ble,
                _ => Code::Bleu,
            };
            return op(c, label as u32);
        }
        Ldsb | Rldsb => Code::Ld1s,
        Ldsh | Rldsh => Code::Ld2s,
        Ldsw | Rldsw => Code::Ld4s,
        Ldub | Rldub => Code::Ld1,
        Lduh | Rlduh => Code::Ld2,
        Lduw | Rlduw => Code::Ld4,
        Ldx | Rldx => Code::Ld8,
        Uldsb => Code::Uld1s,
        Uldsh => Code::Uld2s,
        Uldsw => Code::Uld4s,
        Uldub => Code::Uld1,
        Ulduh => Code::Uld2,
        Ulduw => Code::Uld4,
        Uldx => Code::Uld8,
        Stb => Code::St1,
        Sth => Code::St2,
        Stw => Code::St4,
        Stx => Code::St8,
        Ret => Code::Ret,
        Nop => Code::Nop,
        Setx if (idx as usize) < obj.inttab.len() => return op(Code::Setx, idx),
        Setx => return fault(BadOp::IntIndex),
        Sets if (idx as usize) < obj.strtab.len() => return op(Code::Sets, idx),
        Sets => return fault(BadOp::StrOffset),
        Ldga => return op(Code::LdBuiltinArray, (w >> 16) & 0xff),
        Ldta => return fault(BadOp::ThreadArray),
        Ldgs if idx < DIF_VAR_OTHER_UBASE => {
            let c = if is_string_var(idx) {
                Code::LdBuiltinStr
            } else {
                Code::LdBuiltinInt
            };
            return op(c, idx);
        }
        Ldgs => return var(GLB, SCL, Code::LdGlobal, BadOp::VarRange),
        Stgs if idx < DIF_VAR_OTHER_UBASE => return fault(BadOp::BuiltinStore),
        Stgs => return var(GLB, SCL, Code::StGlobal, BadOp::BuiltinStore),
        Ldls => return var(LOC, SCL, Code::LdLocal, BadOp::VarRange),
        Stls => return var(LOC, SCL, Code::StLocal, BadOp::BuiltinStore),
        Ldts => return var(TLS, SCL, Code::Ldts, BadOp::BuiltinDynamic),
        Stts => return var(TLS, SCL, Code::Stts, BadOp::BuiltinDynamic),
        Ldgaa => return var(GLB, ARR, Code::Ldgaa, BadOp::BuiltinDynamic),
        Stgaa => return var(GLB, ARR, Code::Stgaa, BadOp::BuiltinDynamic),
        Ldtaa => return var(TLS, ARR, Code::Ldtaa, BadOp::BuiltinDynamic),
        Sttaa => return var(TLS, ARR, Code::Sttaa, BadOp::BuiltinDynamic),
        Call => return op(Code::Call, idx),
        Pushtr => {
            let is_str = ((w >> 16) & 0xff) == DIF_TYPE_STRING as u32;
            return op(Code::Pushtr, is_str as u32);
        }
        Pushtv => Code::Pushtv,
        Popts => Code::Popts,
        Flushts => Code::Flushts,
        Allocs => Code::Allocs,
        Copys => Code::Copys,
        Xlate | Xlarg => return fault(BadOp::Translator),
    };
    op(code, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asm::assemble;

    #[test]
    fn operands_are_resolved_once() {
        let o = assemble(
            ".var x 0x500 scl glb r/w int 8\nsetx DT_INTEGER[0], %r1 ! 42\nsets \"ab\", %r2\nstgs %r1, x\nldgs pid, %r3\nldgs execname, %r4\nret %r1\n",
        )
        .unwrap();
        let p = Prepared::new(o);
        assert_eq!((p.ops[0].code, p.ops[0].rd, p.ops[0].x), (Code::Setx, 1, 0));
        assert_eq!((p.ops[1].code, p.ops[1].rd), (Code::Sets, 2));
        assert_eq!(
            (p.ops[2].code, p.ops[2].rd, p.ops[2].x),
            (Code::StGlobal, 1, 0)
        );
        assert_eq!(p.vars[0].id, 0x500);
        assert_eq!((p.ops[3].code, p.ops[3].rd), (Code::LdBuiltinInt, 3));
        assert_eq!((p.ops[4].code, p.ops[4].rd), (Code::LdBuiltinStr, 4));
        assert_eq!((p.ops[5].code, p.ops[5].rd), (Code::Ret, 1));
        assert_eq!(std::mem::size_of::<Op>(), 8);
    }

    #[test]
    fn bad_words_become_faults_where_they_are() {
        let mut o = assemble("nop\nnop\nret %r0\n").unwrap();
        o.text[0] = 0xff00_0000;
        o.text[1] = (Opcode::Ba as u32) << 24; // branch to 0: backward
        let p = Prepared::new(o);
        assert_eq!(p.ops[0].code, Code::Fault);
        assert_eq!(BadOp::from_x(p.ops[0].x), BadOp::Opcode);
        assert_eq!(BadOp::from_x(p.ops[1].x), BadOp::Branch);
        assert_eq!(p.ops[2].code, Code::Ret);
    }
}
