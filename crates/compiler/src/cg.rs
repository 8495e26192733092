//! Code generation (`dt_cg` in DTrace's vocabulary): a typed expression to a DIF object. Registers
//! `%r1`-`%r7` are allocated as a free set (`%r0` is zero); a value kept across the evaluation of
//! another subexpression is *held*, and when no register is free the oldest held value is spilled to
//! a hidden clause-local (`stls`/`ldls`) and filled back when it is used, so deep expressions compile
//! as in DTrace for Linux; `&&`, `||`, `?:` and comparisons use forward branches (each arm leaves the
//! spills as it found them); strings compare with `scmp`; subroutine arguments and associative-array
//! keys go on the tuple stack; integer and string tables are deduplicated.

use std::collections::HashMap;

use dtrace_dif::instr::{Instr, Reg, DIF_TYPE_CTF, DIF_TYPE_STRING};
use dtrace_dif::object::{
    DifObject, DifType, VarEntry, DIFV_F_MOD, DIFV_F_REF, DIFV_KIND_ARRAY, DIFV_KIND_SCALAR,
    DIFV_SCOPE_GLOBAL, DIFV_SCOPE_LOCAL, DIFV_SCOPE_THREAD,
};
use dtrace_dif::opcode::Opcode;

use crate::ast::{BinOp, UnOp, VarScope};
use crate::check::VarTable;
use crate::error::{err, CResult, ErrTag};
use crate::tree::{CmpKind, Place, TExpr, VarRef, TK};
use crate::types::{BitField, TypeId, TypeTable};

/// The load of `size` bytes, sign-extending when `signed`, from kernel or `user` memory.
fn load_op(size: u64, signed: bool, user: bool) -> Opcode {
    match (size, signed, user) {
        (1, true, false) => Opcode::Ldsb,
        (1, false, false) => Opcode::Ldub,
        (2, true, false) => Opcode::Ldsh,
        (2, false, false) => Opcode::Lduh,
        (4, true, false) => Opcode::Ldsw,
        (4, false, false) => Opcode::Lduw,
        (_, _, false) => Opcode::Ldx,
        (1, true, true) => Opcode::Uldsb,
        (1, false, true) => Opcode::Uldub,
        (2, true, true) => Opcode::Uldsh,
        (2, false, true) => Opcode::Ulduh,
        (4, true, true) => Opcode::Uldsw,
        (4, false, true) => Opcode::Ulduw,
        _ => Opcode::Uldx,
    }
}

/// The store of `size` bytes.
fn store_op(size: u64) -> Opcode {
    match size {
        1 => Opcode::Stb,
        2 => Opcode::Sth,
        4 => Opcode::Stw,
        _ => Opcode::Stx,
    }
}

/// Tuple-stack entries a call or key list may use (`dtc_diftupregs`).
pub const TUPLE_REGS: usize = 8;

enum Ins {
    I(Instr),
    Br(Opcode, usize),
    Label(usize),
}

/// Builds one DIF object.
pub struct Cg<'a> {
    types: &'a TypeTable,
    /// Bytes of a string's storage: `strsize` characters and the NUL, as DTrace for Linux keeps them.
    strsize: u32,
    code: Vec<Ins>,
    nlabels: usize,
    inttab: Vec<u64>,
    intmap: HashMap<u64, u16>,
    strtab: Vec<u8>,
    strmap: HashMap<Vec<u8>, u32>,
    vars: Vec<VarEntry>,
    used: [bool; 8],
    line: u32,
    /// Values held across another subexpression's code, by [`Held`] token.
    held: Vec<HeldValue>,
    /// Tokens in the order their values were spilled (the log [`Cg::settle`] rewinds).
    spilled: Vec<usize>,
    /// Spill slots in use.
    slots: Vec<bool>,
    /// Where spill slots are created: the program's clause-locals, and the slots' type (64 bits).
    locals: &'a mut VarTable,
    slot_ty: TypeId,
}

/// A held value: its register, and its spill slot while it is spilled (`None` once released).
#[derive(Clone, Copy)]
struct HeldValue {
    reg: Reg,
    slot: Option<usize>,
    live: bool,
}

/// A value held across the code of another subexpression (see [`Cg::hold`]).
#[must_use]
struct Held(usize);

/// Running out of registers is a libdtrace error code (`EDT_NOREG`, `EDT_NOTUPREG`), not a
/// diagnostic of the program's text: DTrace reports it with no line.
fn noreg() -> crate::error::CompileError {
    crate::error::CompileError::new(
        ErrTag::D_NOREG,
        0,
        "Insufficient registers to generate code",
    )
}

impl<'a> Cg<'a> {
    /// A builder using `types` and the `strsize` option (characters of a string, its NUL not counted);
    /// spill slots are clause-locals of `locals` of type `slot_ty` (a 64-bit integer).
    pub fn new(
        types: &'a TypeTable,
        strsize: u32,
        locals: &'a mut VarTable,
        slot_ty: TypeId,
    ) -> Cg<'a> {
        Cg {
            types,
            strsize: strsize.saturating_add(1),
            code: Vec::new(),
            nlabels: 0,
            inttab: Vec::new(),
            intmap: HashMap::new(),
            strtab: Vec::new(),
            strmap: HashMap::new(),
            vars: Vec::new(),
            used: [true, false, false, false, false, false, false, false],
            line: 0,
            held: Vec::new(),
            spilled: Vec::new(),
            slots: Vec::new(),
            locals,
            slot_ty,
        }
    }

    /// Compiles `e` into an object returning its value (`void_result`: a zero-size return type).
    pub fn object(mut self, e: &TExpr, void_result: bool) -> CResult<DifObject> {
        self.line = e.line;
        let r = self.gen(e)?;
        self.emit(Instr::Ret { rd: r });
        let rtype = if void_result {
            DifType {
                size: 0,
                ..DifType::integer(0)
            }
        } else {
            self.types.diftype(e.ty, self.strsize)
        };
        self.finish(rtype)
    }

    fn finish(self, rtype: DifType) -> CResult<DifObject> {
        let mut addr = vec![0u32; self.nlabels];
        let mut pc = 0u32;
        for i in &self.code {
            match i {
                Ins::Label(l) => addr[*l] = pc,
                _ => pc += 1,
            }
        }
        let mut text = Vec::new();
        for i in &self.code {
            match i {
                Ins::I(x) => text.push(x.encode()),
                Ins::Br(op, l) => text.push(
                    Instr::Branch {
                        op: *op,
                        label: addr[*l],
                    }
                    .encode(),
                ),
                Ins::Label(_) => {}
            }
        }
        Ok(DifObject {
            text,
            inttab: self.inttab,
            strtab: self.strtab,
            vartab: self.vars,
            rtype,
        })
    }

    fn emit(&mut self, i: Instr) {
        self.code.push(Ins::I(i));
    }

    fn label(&mut self) -> usize {
        self.nlabels += 1;
        self.nlabels - 1
    }

    fn place_label(&mut self, l: usize) {
        self.code.push(Ins::Label(l));
    }

    fn branch(&mut self, op: Opcode, l: usize) {
        self.code.push(Ins::Br(op, l));
    }

    /// A free register; when there is none, the oldest held value still in a register is spilled
    /// to make one (DTrace for Linux's `dt_regset_alloc` spills to the stack likewise).
    fn alloc(&mut self) -> CResult<Reg> {
        if let Some(r) = self.free_reg() {
            self.used[r as usize] = true;
            return Ok(r);
        }
        let Some(t) = self.held.iter().position(|h| h.live && h.slot.is_none()) else {
            return Err(noreg());
        };
        let reg = self.held[t].reg;
        let slot = self.spill_slot();
        self.store_slot(slot, reg)?;
        self.held[t].slot = Some(slot);
        self.spilled.push(t);
        Ok(reg)
    }

    /// The lowest free register, if any.
    fn free_reg(&self) -> Option<Reg> {
        (1..8).find(|&r| !self.used[r]).map(|r| r as Reg)
    }

    /// A spill slot not in use.
    fn spill_slot(&mut self) -> usize {
        let k = match self.slots.iter().position(|u| !u) {
            Some(k) => k,
            None => {
                self.slots.push(false);
                self.slots.len() - 1
            }
        };
        self.slots[k] = true;
        k
    }

    /// Stores register `rs` in spill slot `k`.
    fn store_slot(&mut self, k: usize, rs: Reg) -> CResult<()> {
        let var = self.slot_var(k)?;
        self.emit(Instr::StoreVar {
            op: Opcode::Stls,
            var: var.id as u16,
            rs,
        });
        Ok(())
    }

    /// Loads spill slot `k` into register `rd`.
    fn load_slot(&mut self, k: usize, rd: Reg) -> CResult<()> {
        let var = self.slot_var(k)?;
        self.emit(Instr::LoadVar {
            op: Opcode::Ldls,
            var: var.id as u16,
            rd,
        });
        Ok(())
    }

    /// The hidden clause-local of spill slot `k` (a name no D identifier can take), noted in the
    /// object's variable table.
    fn slot_var(&mut self, k: usize) -> CResult<VarRef> {
        let name = format!("%spill{k}");
        let info = match self.locals.vars.get(&name) {
            Some(v) => v.clone(),
            None => {
                let mut v = self
                    .locals
                    .create(&name, false, self.line, "clause local")?;
                v.ty = Some(self.slot_ty);
                self.locals.vars.insert(name.clone(), v.clone());
                v
            }
        };
        let v = VarRef {
            scope: VarScope::Local,
            id: info.id,
            name,
            array: false,
            ty: self.slot_ty,
        };
        self.note_var(&v, DIFV_F_REF | DIFV_F_MOD);
        Ok(v)
    }

    /// Holds the value in `r` while other code is generated: its register may be spilled meanwhile,
    /// so it must be taken back with [`Cg::unhold`], which says where it then is.
    fn hold(&mut self, r: Reg) -> Held {
        self.held.push(HeldValue {
            reg: r,
            slot: None,
            live: true,
        });
        Held(self.held.len() - 1)
    }

    /// The register of a held value, filled from its spill slot if it was spilled.
    fn unhold(&mut self, h: Held) -> CResult<Reg> {
        let v = self.held[h.0];
        self.held[h.0].live = false;
        let Some(slot) = v.slot else {
            return Ok(v.reg);
        };
        self.slots[slot] = false;
        let r = self.alloc()?;
        self.load_slot(slot, r)?;
        Ok(r)
    }

    /// A point to [`Cg::settle`] back to: code after it may run or not (an arm of a branch).
    fn spill_mark(&self) -> usize {
        self.spilled.len()
    }

    /// Ends a conditionally run stretch of code begun at `mark`, whose result is in `r`: every value
    /// spilled since is filled back into its register, so the spills are as they were at `mark` on
    /// each path; the result is kept (through a spill slot when fills were needed) and its register
    /// returned.
    fn settle(&mut self, r: Reg, mark: usize) -> CResult<Reg> {
        if self.spilled[mark..]
            .iter()
            .all(|&t| !self.held[t].live || self.held[t].slot.is_none())
        {
            self.spilled.truncate(mark);
            return Ok(r);
        }
        let keep = self.spill_slot();
        self.store_slot(keep, r)?;
        self.free(r);
        for t in self.spilled.split_off(mark) {
            let v = self.held[t];
            let Some(slot) = v.slot.filter(|_| v.live) else {
                continue;
            };
            self.load_slot(slot, v.reg)?;
            self.used[v.reg as usize] = true;
            self.held[t].slot = None;
            self.slots[slot] = false;
        }
        self.slots[keep] = false;
        let rd = self.alloc()?;
        self.load_slot(keep, rd)?;
        Ok(rd)
    }

    fn free(&mut self, r: Reg) {
        if r != 0 {
            self.used[r as usize] = false;
        }
    }

    fn setx(&mut self, v: u64, rd: Reg) -> CResult<()> {
        let idx = match self.intmap.get(&v) {
            Some(i) => *i,
            None => {
                if self.inttab.len() >= u16::MAX as usize {
                    return err(ErrTag::D_NOREG, self.line, "integer table overflow");
                }
                let i = self.inttab.len() as u16;
                self.inttab.push(v);
                self.intmap.insert(v, i);
                i
            }
        };
        self.emit(Instr::Setx { idx, rd });
        Ok(())
    }

    /// Offset of `s` (NUL added) in the string table.
    fn string(&mut self, s: &[u8]) -> u32 {
        if let Some(o) = self.strmap.get(s) {
            return *o;
        }
        let o = self.strtab.len() as u32;
        self.strtab.extend_from_slice(s);
        self.strtab.push(0);
        self.strmap.insert(s.to_vec(), o);
        o
    }

    fn note_var(&mut self, v: &VarRef, flag: u16) {
        let scope = match v.scope {
            VarScope::Global => DIFV_SCOPE_GLOBAL,
            VarScope::Thread => DIFV_SCOPE_THREAD,
            VarScope::Local => DIFV_SCOPE_LOCAL,
        };
        let kind = if v.array {
            DIFV_KIND_ARRAY
        } else {
            DIFV_KIND_SCALAR
        };
        if let Some(e) = self
            .vars
            .iter_mut()
            .find(|e| e.id == v.id && e.scope == scope && e.kind == kind)
        {
            e.flags |= flag;
            return;
        }
        let name = self.string(v.name.as_bytes());
        let ty = self.types.diftype(v.ty, self.strsize);
        self.vars.push(VarEntry {
            name,
            id: v.id,
            kind,
            scope,
            flags: flag,
            ty,
        });
    }

    fn gen(&mut self, e: &TExpr) -> CResult<Reg> {
        self.line = e.line;
        match &e.kind {
            TK::Int(v) => {
                let r = self.alloc()?;
                self.setx(*v, r)?;
                Ok(r)
            }
            TK::Str(s) => {
                let r = self.alloc()?;
                let o = self.string(s);
                if o > u16::MAX as u32 {
                    return err(ErrTag::D_NOREG, e.line, "string table overflow");
                }
                self.emit(Instr::Sets {
                    idx: o as u16,
                    rd: r,
                });
                Ok(r)
            }
            TK::Read(p) => self.read(p, e),
            TK::Builtin(id) => {
                let r = self.alloc()?;
                self.emit(Instr::LoadVar {
                    op: Opcode::Ldgs,
                    var: *id as u16,
                    rd: r,
                });
                Ok(r)
            }
            TK::BuiltinArray(id, idx) => {
                let ri = self.gen(idx)?;
                self.emit(Instr::LoadArray {
                    op: Opcode::Ldga,
                    var: *id as u8,
                    r2: ri,
                    rd: ri,
                });
                Ok(ri)
            }
            TK::Unary(op, x) => {
                let r = self.gen(x)?;
                match op {
                    UnOp::Neg => self.emit(Instr::Alu {
                        op: Opcode::Sub,
                        r1: 0,
                        r2: r,
                        rd: r,
                    }),
                    UnOp::BitNot => self.emit(Instr::Not { r1: r, rd: r }),
                    _ => {
                        // logical not
                        let lz = self.label();
                        let end = self.label();
                        self.emit(Instr::Tst { r1: r });
                        self.branch(Opcode::Bne, lz);
                        self.setx(1, r)?;
                        self.branch(Opcode::Ba, end);
                        self.place_label(lz);
                        self.emit(Instr::Mov { r1: 0, rd: r });
                        self.place_label(end);
                    }
                }
                Ok(r)
            }
            TK::Binary(op, l, r) => {
                let rl = self.gen(l)?;
                let h = self.hold(rl);
                let rr = self.gen(r)?;
                let rl = self.unhold(h)?;
                let signed = self.types.is_signed(e.ty);
                let opc = match op {
                    BinOp::Add => Opcode::Add,
                    BinOp::Sub => Opcode::Sub,
                    BinOp::Mul => Opcode::Mul,
                    BinOp::Div if signed => Opcode::Sdiv,
                    BinOp::Div => Opcode::Udiv,
                    BinOp::Mod if signed => Opcode::Srem,
                    BinOp::Mod => Opcode::Urem,
                    BinOp::BitAnd => Opcode::And,
                    BinOp::BitOr => Opcode::Or,
                    BinOp::BitXor => Opcode::Xor,
                    BinOp::Shl => Opcode::Sll,
                    BinOp::Shr if signed => Opcode::Sra,
                    BinOp::Shr => Opcode::Srl,
                    _ => return err(ErrTag::D_UNKNOWN, e.line, "invalid binary operator"),
                };
                self.emit(Instr::Alu {
                    op: opc,
                    r1: rl,
                    r2: rr,
                    rd: rl,
                });
                self.free(rr);
                Ok(rl)
            }
            TK::Cmp(op, l, r, kind) => {
                let rl = self.gen(l)?;
                let h = self.hold(rl);
                let rr = self.gen(r)?;
                let rl = self.unhold(h)?;
                if *kind == CmpKind::String {
                    self.emit(Instr::Scmp { r1: rl, r2: rr });
                } else {
                    self.emit(Instr::Cmp { r1: rl, r2: rr });
                }
                self.free(rr);
                let u = *kind == CmpKind::Unsigned;
                let bop = match op {
                    BinOp::Eq => Opcode::Be,
                    BinOp::Ne => Opcode::Bne,
                    BinOp::Lt if u => Opcode::Blu,
                    BinOp::Lt => Opcode::Bl,
                    BinOp::Le if u => Opcode::Bleu,
                    BinOp::Le => Opcode::Ble,
                    BinOp::Gt if u => Opcode::Bgu,
                    BinOp::Gt => Opcode::Bg,
                    BinOp::Ge if u => Opcode::Bgeu,
                    _ => Opcode::Bge,
                };
                let lt = self.label();
                let end = self.label();
                self.branch(bop, lt);
                self.emit(Instr::Mov { r1: 0, rd: rl });
                self.branch(Opcode::Ba, end);
                self.place_label(lt);
                self.setx(1, rl)?;
                self.place_label(end);
                Ok(rl)
            }
            TK::Logical(op, l, r) => self.logical(*op, l, r),
            TK::Cond(c, a, b) => {
                let rc = self.gen(c)?;
                let le = self.label();
                let end = self.label();
                self.emit(Instr::Tst { r1: rc });
                self.free(rc);
                self.branch(Opcode::Be, le);
                // the register both arms leave the value in: free, as `rc` was just freed
                let rd = self.free_reg().ok_or_else(noreg)?;
                self.arm(a, rd)?;
                self.branch(Opcode::Ba, end);
                self.place_label(le);
                self.arm(b, rd)?;
                self.place_label(end);
                self.used[rd as usize] = true;
                Ok(rd)
            }
            TK::Assign(p, v) => match p.as_ref() {
                Place::Mem(addr, _) if self.types.is_string(e.ty) => {
                    // a string stored into memory (`*x = "abc"` in alloca'd scratch): copied
                    // there, bounded as a translated member's; the value is the copy
                    let ra = self.gen(addr)?;
                    self.store_member(ra, 0, v)?;
                    Ok(ra)
                }
                _ => {
                    let rv = self.gen(v)?;
                    self.store(p, rv, e.ty)
                }
            },
            TK::IncDec { place, delta, post } => {
                let rv = self.read(place, e)?;
                let rd = self.alloc()?;
                self.setx(delta.unsigned_abs(), rd)?;
                self.emit(Instr::Alu {
                    op: if *delta < 0 { Opcode::Sub } else { Opcode::Add },
                    r1: rv,
                    r2: rd,
                    rd,
                });
                let h = self.hold(rv);
                let rd = self.store(place, rd, e.ty)?;
                let rv = self.unhold(h)?;
                if *post {
                    self.free(rd);
                    Ok(rv)
                } else {
                    self.free(rv);
                    Ok(rd)
                }
            }
            TK::Call(subr, args) => {
                self.push_tuple(args)?;
                let rd = self.alloc()?;
                self.emit(Instr::Call { subr: *subr, rd });
                Ok(rd)
            }
            TK::Convert(x) => {
                let r = self.gen(x)?;
                let size = self.types.size(e.ty);
                if size < 8 && size > 0 {
                    let rt = self.alloc()?;
                    self.setx(64 - size * 8, rt)?;
                    self.emit(Instr::Alu {
                        op: Opcode::Sll,
                        r1: r,
                        r2: rt,
                        rd: r,
                    });
                    let op = if self.types.is_signed(e.ty) {
                        Opcode::Sra
                    } else {
                        Opcode::Srl
                    };
                    self.emit(Instr::Alu {
                        op,
                        r1: r,
                        r2: rt,
                        rd: r,
                    });
                    self.free(rt);
                }
                Ok(r)
            }
            TK::Retype(x) => self.gen(x),
            TK::NonNull(x) => {
                // a NULL pointer faults with a read at address 0 (`%r0`) before the member's
                // offset is added to it
                let r = self.gen(x)?;
                let ok = self.label();
                self.emit(Instr::Tst { r1: r });
                self.branch(Opcode::Bne, ok);
                let rt = self.alloc()?;
                self.emit(Instr::Load {
                    op: Opcode::Ldub,
                    r1: 0,
                    rd: rt,
                });
                self.free(rt);
                self.place_label(ok);
                Ok(r)
            }
            TK::XlateStruct(size, members) => self.xlate_struct(*size, members),
            TK::Action(n) => err(
                ErrTag::D_CG_EXPR,
                e.line,
                format!(
                    "{n}( ) may not be called from a D expression (D program context required)"
                ),
            ),
            TK::Xlate(..) => err(
                ErrTag::D_UNKNOWN,
                e.line,
                "internal error: unexpanded translation reached code generation",
            ),
            TK::Comma(a, b) => {
                let ra = self.gen(a)?;
                self.free(ra);
                self.gen(b)
            }
        }
    }

    /// One arm of `?:`, run or not: its value is left in `rd` (free until both arms are done) with
    /// the spills as they were before it.
    fn arm(&mut self, x: &TExpr, rd: Reg) -> CResult<()> {
        let mark = self.spill_mark();
        let r = self.gen(x)?;
        let r = self.settle(r, mark)?;
        if r != rd {
            self.emit(Instr::Mov { r1: r, rd });
        }
        self.free(r);
        Ok(())
    }

    fn logical(&mut self, op: BinOp, l: &TExpr, r: &TExpr) -> CResult<Reg> {
        let rl = self.gen(l)?;
        match op {
            BinOp::LogAnd | BinOp::LogOr => {
                let short = self.label();
                let end = self.label();
                let (br, short_val, other) = if op == BinOp::LogAnd {
                    (Opcode::Be, 0u64, 1u64)
                } else {
                    (Opcode::Bne, 1, 0)
                };
                self.emit(Instr::Tst { r1: rl });
                self.free(rl);
                self.branch(br, short);
                // the right operand runs or not: it leaves the spills as it found them
                let mark = self.spill_mark();
                let rr = self.gen(r)?;
                let rr = self.settle(rr, mark)?;
                self.emit(Instr::Tst { r1: rr });
                self.free(rr);
                self.branch(br, short);
                // free before the right operand, so the same register on both paths
                let rd = self.alloc()?;
                self.set_bool(other, rd)?;
                self.branch(Opcode::Ba, end);
                self.place_label(short);
                self.set_bool(short_val, rd)?;
                self.place_label(end);
                Ok(rd)
            }
            _ => {
                self.make_bool(rl)?;
                let h = self.hold(rl);
                let rr = self.gen(r)?;
                self.make_bool(rr)?;
                let rl = self.unhold(h)?;
                self.emit(Instr::Alu {
                    op: Opcode::Xor,
                    r1: rl,
                    r2: rr,
                    rd: rl,
                });
                self.free(rr);
                Ok(rl)
            }
        }
    }

    fn set_bool(&mut self, v: u64, r: Reg) -> CResult<()> {
        if v == 0 {
            self.emit(Instr::Mov { r1: 0, rd: r });
            Ok(())
        } else {
            self.setx(1, r)
        }
    }

    fn make_bool(&mut self, r: Reg) -> CResult<()> {
        let l = self.label();
        self.emit(Instr::Tst { r1: r });
        self.branch(Opcode::Be, l);
        self.setx(1, r)?;
        self.place_label(l);
        Ok(())
    }

    /// Evaluates `args`, flushes the tuple stack and pushes them (DTrace's `dt_cg_arglist`).
    fn push_tuple(&mut self, args: &[TExpr]) -> CResult<()> {
        if args.len() > TUPLE_REGS {
            return err(
                ErrTag::D_NOREG,
                0,
                "Insufficient tuple registers to generate code",
            );
        }
        let mut held = Vec::new();
        for a in args {
            let r = self.gen(a)?;
            held.push(self.hold(r));
        }
        self.emit(Instr::Flushts);
        for (a, h) in args.iter().zip(held) {
            let r = self.unhold(h)?;
            let t = self.types.diftype(a.ty, self.strsize);
            if t.is_by_ref() {
                let (ty, sr) = if t.is_string() {
                    (DIF_TYPE_STRING, 0)
                } else {
                    let sr = self.alloc()?;
                    self.setx(t.size as u64, sr)?;
                    (DIF_TYPE_CTF, sr)
                };
                self.emit(Instr::Pushtr { ty, r2: sr, rs: r });
                self.free(sr);
            } else {
                self.emit(Instr::Pushtv {
                    ty: DIF_TYPE_CTF,
                    rs: r,
                });
            }
            self.free(r);
        }
        Ok(())
    }

    /// The size of a dynamic variable's storage when it is a struct, union or array (by reference, not a
    /// string): such variables are loaded as the address of their storage.
    fn dyn_ref_size(&self, v: &VarRef) -> Option<u32> {
        let dynamic = v.array || v.scope == VarScope::Thread;
        let t = self.types.diftype(v.ty, self.strsize);
        (dynamic && t.is_by_ref() && !t.is_string()).then_some(t.size)
    }

    /// Loads variable `v` into `r` with `ld`; for a by-reference dynamic variable, first creates it
    /// zero-filled when it does not exist (DTrace's `dt_cg_assoc_op`: load, and when NULL `allocs` a
    /// zeroed copy, store it with `st` and load again), so members and elements can be stored through
    /// the address. The tuple, if any, is already on the stack.
    fn load_var(&mut self, v: &VarRef, ld: Opcode, st: Opcode, r: Reg) -> CResult<()> {
        let var = v.id as u16;
        self.emit(Instr::LoadVar { op: ld, var, rd: r });
        let Some(size) = self.dyn_ref_size(v) else {
            return Ok(());
        };
        self.note_var(v, DIFV_F_MOD);
        let done = self.label();
        self.emit(Instr::Tst { r1: r });
        self.branch(Opcode::Bne, done);
        self.setx(size as u64, r)?;
        self.emit(Instr::Allocs { r1: r, rd: r });
        self.emit(Instr::StoreVar { op: st, var, rs: r });
        self.emit(Instr::LoadVar { op: ld, var, rd: r });
        self.place_label(done);
        Ok(())
    }

    fn read(&mut self, p: &Place, e: &TExpr) -> CResult<Reg> {
        match p {
            Place::Var(v) => {
                self.note_var(v, DIFV_F_REF);
                let r = self.alloc()?;
                let (ld, st) = match v.scope {
                    VarScope::Global => (Opcode::Ldgs, Opcode::Stgs),
                    VarScope::Thread => (Opcode::Ldts, Opcode::Stts),
                    VarScope::Local => (Opcode::Ldls, Opcode::Stls),
                };
                self.load_var(v, ld, st, r)?;
                Ok(r)
            }
            Place::Assoc(v, keys) => {
                self.note_var(v, DIFV_F_REF);
                self.push_tuple(keys)?;
                let r = self.alloc()?;
                let (ld, st) = if v.scope == VarScope::Thread {
                    (Opcode::Ldtaa, Opcode::Sttaa)
                } else {
                    (Opcode::Ldgaa, Opcode::Stgaa)
                };
                self.load_var(v, ld, st, r)?;
                Ok(r)
            }
            Place::Mem(addr, user) => {
                let r = self.gen(addr)?;
                if self.types.is_by_ref(e.ty) {
                    return Ok(r);
                }
                let size = self.types.size(e.ty);
                let s = self.types.is_signed(e.ty);
                self.emit(Instr::Load {
                    op: load_op(size, s, *user),
                    r1: r,
                    rd: r,
                });
                Ok(r)
            }
            Place::Bits(addr, user, bf) => {
                let r = self.gen(addr)?;
                self.emit(Instr::Load {
                    op: load_op(u64::from(bf.load), false, *user),
                    r1: r,
                    rd: r,
                });
                self.field_get(r, *bf, self.types.is_signed(e.ty))?;
                Ok(r)
            }
        }
    }

    /// Shifts the field `bf` of the word in `r` down to bit 0, sign-extending it when `signed` and
    /// clearing the bits above it otherwise (`dt_cg_field_get`).
    fn field_get(&mut self, r: Reg, bf: BitField, signed: bool) -> CResult<()> {
        let (w, sh) = (u64::from(bf.width), u64::from(bf.shift));
        let rt = self.alloc()?;
        if signed {
            // move the field's top bit to bit 63, then shift back arithmetically
            if 64 - sh - w > 0 {
                self.setx(64 - sh - w, rt)?;
                self.alu(Opcode::Sll, r, rt, r);
            }
            if w < 64 {
                self.setx(64 - w, rt)?;
                self.alu(Opcode::Sra, r, rt, r);
            }
        } else {
            if sh > 0 {
                self.setx(sh, rt)?;
                self.alu(Opcode::Srl, r, rt, r);
            }
            if w < 64 {
                self.setx((1u64 << w) - 1, rt)?;
                self.alu(Opcode::And, r, rt, r);
            }
        }
        self.free(rt);
        Ok(())
    }

    /// Stores the low bits of `rv` into the field `bf` of the word at `addr` (`dt_cg_field_set`:
    /// the word is loaded, the field's bits cleared with the inverted mask, the value masked and
    /// shifted into place and or-ed in, and the word stored back); then `rv` is made the value the
    /// field now holds (cut to its width, sign-extended when `signed`), the value of the assignment.
    fn field_set(
        &mut self,
        addr: &TExpr,
        user: bool,
        bf: BitField,
        rv: Reg,
        signed: bool,
    ) -> CResult<Reg> {
        let h = self.hold(rv);
        let ra = self.gen(addr)?;
        let rv = self.unhold(h)?;
        self.field_set_at(ra, user, bf, rv, signed)?;
        self.free(ra);
        Ok(rv)
    }

    /// [`Self::field_set`] with the word's address in `ra` (left allocated).
    fn field_set_at(
        &mut self,
        ra: Reg,
        user: bool,
        bf: BitField,
        rv: Reg,
        signed: bool,
    ) -> CResult<()> {
        let (w, sh) = (u64::from(bf.width), u64::from(bf.shift));
        let mask = if w >= 64 { u64::MAX } else { (1u64 << w) - 1 };
        let rw = self.alloc()?;
        self.emit(Instr::Load {
            op: load_op(u64::from(bf.load), false, user),
            r1: ra,
            rd: rw,
        });
        let rt = self.alloc()?;
        self.setx(!(mask << sh), rt)?;
        self.alu(Opcode::And, rw, rt, rw);
        let rf = self.alloc()?;
        self.setx(mask, rf)?;
        self.alu(Opcode::And, rv, rf, rf);
        if sh > 0 {
            self.setx(sh, rt)?;
            self.alu(Opcode::Sll, rf, rt, rf);
        }
        self.alu(Opcode::Or, rw, rf, rw);
        self.free(rf);
        self.free(rt);
        self.emit(Instr::Store {
            op: store_op(u64::from(bf.load)),
            r1: rw,
            rd: ra,
        });
        self.free(rw);
        // the assignment's value: the field as it now reads
        if w < 64 {
            let rt = self.alloc()?;
            self.setx(64 - w, rt)?;
            self.alu(Opcode::Sll, rv, rt, rv);
            self.alu(if signed { Opcode::Sra } else { Opcode::Srl }, rv, rt, rv);
            self.free(rt);
        }
        Ok(())
    }

    fn alu(&mut self, op: Opcode, r1: Reg, r2: Reg, rd: Reg) {
        self.emit(Instr::Alu { op, r1, r2, rd });
    }

    /// Narrows `r` to an integer type smaller than 64 bits (sign- or zero-extending it back), as a
    /// D variable of that type holds only its own size: DTrace for Linux keeps each variable at its
    /// type's size, so what is stored, and the assignment's value, is the value as the variable reads.
    fn narrow_to(&mut self, r: Reg, ty: crate::types::TypeId) -> CResult<()> {
        let size = self.types.size(ty);
        if !self.types.is_integer(ty) || size == 0 || size >= 8 {
            return Ok(());
        }
        let rt = self.alloc()?;
        self.setx(64 - size * 8, rt)?;
        self.alu(Opcode::Sll, r, rt, r);
        let op = if self.types.is_signed(ty) {
            Opcode::Sra
        } else {
            Opcode::Srl
        };
        self.alu(op, r, rt, r);
        self.free(rt);
        Ok(())
    }

    /// Stores `rv` into `p`; the value stays allocated, in the register returned (it may have been
    /// spilled while the place's address or keys were computed).
    fn store(&mut self, p: &Place, rv: Reg, ty: crate::types::TypeId) -> CResult<Reg> {
        if matches!(p, Place::Var(_) | Place::Assoc(..)) {
            self.narrow_to(rv, ty)?;
        }
        match p {
            Place::Var(v) => {
                self.note_var(v, DIFV_F_MOD);
                let op = match v.scope {
                    VarScope::Global => Opcode::Stgs,
                    VarScope::Thread => Opcode::Stts,
                    VarScope::Local => Opcode::Stls,
                };
                self.emit(Instr::StoreVar {
                    op,
                    var: v.id as u16,
                    rs: rv,
                });
                Ok(rv)
            }
            Place::Assoc(v, keys) => {
                self.note_var(v, DIFV_F_MOD);
                let h = self.hold(rv);
                self.push_tuple(keys)?;
                let rv = self.unhold(h)?;
                let op = if v.scope == VarScope::Thread {
                    Opcode::Sttaa
                } else {
                    Opcode::Stgaa
                };
                self.emit(Instr::StoreVar {
                    op,
                    var: v.id as u16,
                    rs: rv,
                });
                Ok(rv)
            }
            Place::Mem(addr, _) => {
                // a store into a D variable's storage (scalar arrays, members)
                let h = self.hold(rv);
                let ra = self.gen(addr)?;
                let rv = self.unhold(h)?;
                if self.types.is_by_ref(ty) && !self.types.is_string(ty) {
                    // a struct or union member assigned a whole struct or union: copied
                    let rn = self.alloc()?;
                    self.setx(self.types.size(ty), rn)?;
                    self.emit(Instr::Copys {
                        r1: rv,
                        r2: rn,
                        rd: ra,
                    });
                    self.free(rn);
                } else {
                    self.emit(Instr::Store {
                        op: store_op(self.types.size(ty)),
                        r1: rv,
                        rd: ra,
                    });
                }
                self.free(ra);
                Ok(rv)
            }
            Place::Bits(addr, user, bf) => {
                self.field_set(addr, *user, *bf, rv, self.types.is_signed(ty))
            }
        }
    }

    /// A translated struct: scratch of `size` bytes (zeroed by `allocs`), each converted member
    /// stored at its offset; the register holds the address.
    fn xlate_struct(
        &mut self,
        size: u64,
        members: &[(u32, Option<BitField>, TExpr)],
    ) -> CResult<Reg> {
        let rd = self.alloc()?;
        self.setx(size, rd)?;
        self.emit(Instr::Allocs { r1: rd, rd });
        for (off, bits, v) in members {
            match bits {
                Some(bf) => {
                    let rv = self.gen(v)?;
                    let ra = self.offset_reg(rd, *off)?;
                    self.field_set_at(ra, false, *bf, rv, self.types.is_signed(v.ty))?;
                    self.free(ra);
                    self.free(rv);
                }
                None => self.store_member(rd, *off, v)?,
            }
        }
        Ok(rd)
    }

    /// `base + off` in a new register.
    fn offset_reg(&mut self, base: Reg, off: u32) -> CResult<Reg> {
        let ra = self.alloc()?;
        self.setx(off as u64, ra)?;
        self.emit(Instr::Alu {
            op: Opcode::Add,
            r1: base,
            r2: ra,
            rd: ra,
        });
        Ok(ra)
    }

    /// Stores one translated member: scalars by size, arrays and structs by copy, strings by a
    /// copy bounded by the constant's length where the value is a string constant (per arm of `?:`)
    /// and by a string's storage (`strsize` bytes) otherwise.
    fn store_member(&mut self, base: Reg, off: u32, v: &TExpr) -> CResult<()> {
        if !self.types.is_by_ref(v.ty) {
            let rv = self.gen(v)?;
            let ra = self.offset_reg(base, off)?;
            let op = match self.types.size(v.ty) {
                1 => Opcode::Stb,
                2 => Opcode::Sth,
                4 => Opcode::Stw,
                _ => Opcode::Stx,
            };
            self.emit(Instr::Store { op, r1: rv, rd: ra });
            self.free(ra);
            self.free(rv);
            return Ok(());
        }
        let is_string = self.types.is_string(v.ty);
        match &v.kind {
            TK::Cond(c, a, b) if is_string => {
                let rc = self.gen(c)?;
                let le = self.label();
                let end = self.label();
                self.emit(Instr::Tst { r1: rc });
                self.free(rc);
                self.branch(Opcode::Be, le);
                self.store_member(base, off, a)?;
                self.branch(Opcode::Ba, end);
                self.place_label(le);
                self.store_member(base, off, b)?;
                self.place_label(end);
                Ok(())
            }
            _ => {
                // A string's storage holds `strsize` bytes (`sizeof (string)`): a longer string
                // is copied without its NUL, which a read of at most `strsize` characters never
                // needs (the NUL past it would land in the next member, or past a variable's
                // storage, where a store faults).
                let room = self.types.size(v.ty).min(u64::from(self.strsize));
                let len = match &v.kind {
                    TK::Str(s) => (s.len() as u64 + 1).min(room),
                    _ if is_string => room,
                    _ => self.types.size(v.ty),
                };
                let rv = self.gen(v)?;
                let ra = self.offset_reg(base, off)?;
                let rn = self.alloc()?;
                self.setx(len, rn)?;
                self.emit(Instr::Copys {
                    r1: rv,
                    r2: rn,
                    rd: ra,
                });
                self.free(rn);
                self.free(ra);
                self.free(rv);
                Ok(())
            }
        }
    }
}
