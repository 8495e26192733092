//! The DIF interpreter loop (`dtrace_dif_emulate`): every instruction of spec ch.8, the cc flags, the
//! tuple stack and variable access.
//!
//! `run` is safe on any object, verified or not: registers are masked to 0-7, `%r0` reads as zero, table
//! references are checked, and a branch that is not strictly forward and inside the object faults with
//! `IllOp`, so execution always ends within `text.len()` instructions.

use crate::object::{DifObject, VarEntry};
use crate::subr::Subr;
use crate::vars::DIF_VAR_OTHER_UBASE;
use crate::vm::env::{Memory, ProbeContext};
use crate::vm::fault::{Fault, FaultKind};
use crate::vm::machine::{dyn_addr, split_dyn_addr, var_addr, Machine};
use crate::vm::machine::{SCRATCH_BASE, STRTAB_BASE, TUPLE_REGS, VAR_BASE};
use crate::vm::prepare::{BadOp, Code, Op, Prepared};
use crate::vm::state::{DynScope, Stored, VarState};

/// One tuple-stack entry: a value and, for references, the size of the referenced data (0 = by value).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TupleReg {
    pub value: u64,
    pub size: u64,
}

/// The tuple stack of one run.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tuple {
    pub regs: [TupleReg; TUPLE_REGS],
    pub top: usize,
}

impl Tuple {
    pub(crate) fn args(&self) -> &[TupleReg] {
        &self.regs[..self.top]
    }
}

/// Everything a run is handed, bundled for the subroutines.
pub(crate) struct Env<'a> {
    pub obj: &'a DifObject,
    pub state: &'a mut VarState,
    pub ctx: &'a mut dyn ProbeContext,
    pub mem: &'a mut dyn Memory,
}

fn illop(detail: &'static str) -> Fault {
    Fault::with_detail(FaultKind::IllOp, 0, detail)
}

/// `f` raised by the instruction before `pc` (the interpreter has moved past it).
fn at(mut f: Fault, pc: usize) -> Fault {
    f.pc = pc.saturating_sub(1) as u32;
    f
}

/// What an out-of-line instruction did.
enum Step {
    /// Nothing to write back.
    Next,
    /// Write this into `rd`.
    Set(u64),
    /// Set the condition codes from this comparison result (`scmp`).
    Cc(i64),
    /// Stop with the fault left in `Machine::fault`.
    Fault,
}

impl Machine {
    /// Runs a DIF object for the current firing and returns the value of its `ret` register. By-reference
    /// results (strings, copied memory) are addresses to read back with
    /// [`read_result`](Machine::read_result) / [`read_string_result`](Machine::read_string_result).
    ///
    /// This decodes `obj` on every call; callers that run an object repeatedly prepare it once
    /// ([`Prepared::new`]) and use [`run_prepared`](Machine::run_prepared).
    pub fn run(
        &mut self,
        obj: &DifObject,
        state: &mut VarState,
        ctx: &mut dyn ProbeContext,
        mem: &mut dyn Memory,
    ) -> Result<u64, Fault> {
        self.run_prepared(&Prepared::new(obj.clone()), state, ctx, mem)
    }

    /// Runs a prepared DIF object for the current firing (see [`run`](Machine::run)).
    pub fn run_prepared(
        &mut self,
        p: &Prepared,
        state: &mut VarState,
        ctx: &mut dyn ProbeContext,
        mem: &mut dyn Memory,
    ) -> Result<u64, Fault> {
        self.opts = state.options;
        // String-table addresses mean another object's bytes now.
        self.key_from = None;
        let mut env = Env {
            obj: p.object(),
            state,
            ctx,
            mem,
        };
        // The globals are the VM's while it runs, so by-reference ones have VM addresses.
        // So are the dynamic variables, so by-reference ones have VM addresses too.
        self.globals.clear();
        self.key_slot = None;
        self.thread = None;
        std::mem::swap(&mut self.globals, &mut env.state.globals);
        std::mem::swap(&mut self.global_bytes, &mut env.state.global_bytes);
        std::mem::swap(&mut self.dynvars, &mut env.state.dynvars);
        let r = self.exec(p, &mut env);
        if let Ok(v) = r {
            self.keep_result_dyn(v);
        }
        std::mem::swap(&mut self.dynvars, &mut env.state.dynvars);
        std::mem::swap(&mut self.globals, &mut env.state.globals);
        std::mem::swap(&mut self.global_bytes, &mut env.state.global_bytes);
        if let Ok(v) = r {
            self.keep_result_global(env.state, v);
        }
        r
    }

    /// When result `v` points into a dynamic variable's storage, keeps a copy of its bytes so
    /// `read_result` can read it after the run.
    fn keep_result_dyn(&mut self, v: u64) {
        if let Some((slot, _)) = split_dyn_addr(v) {
            if let Some(Stored::Bytes(b)) = self.dynvars.value(slot) {
                self.dyn_kept = Some((slot, b.clone()));
            }
        }
    }

    /// When result `v` points into a global variable's storage, keeps a copy of that variable so
    /// `read_result` can read it after the run.
    fn keep_result_global(&mut self, state: &VarState, v: u64) {
        let rel = v.wrapping_sub(VAR_BASE);
        if rel >= 1 << 44 {
            return;
        }
        let i = (rel >> 20) as usize;
        if let Some(Some(s)) = state.globals.get(i) {
            self.globals.resize(i + 1, None);
            self.globals[i] = Some(s.clone());
        }
    }

    /// The instruction loop. Integer, compare, branch and constant instructions run inline; the rest go
    /// through [`step`](Machine::step), kept out of line so the hot loop stays small.
    #[inline(never)]
    fn exec(&mut self, p: &Prepared, env: &mut Env<'_>) -> Result<u64, Fault> {
        let ops = &p.ops[..];
        let len = ops.len();
        let inttab = &env.obj.inttab[..];
        let mut regs = [0u64; 8];
        let mut tuple = Tuple::default();
        let (mut cc_n, mut cc_z, mut cc_v, mut cc_c) = (false, false, false, false);
        let mut pc = 0usize;
        while pc < len {
            let op = ops[pc];
            pc += 1;
            let a = regs[(op.r1 & 7) as usize];
            let b = regs[(op.r2 & 7) as usize];
            let v: u64 = match op.code {
                Code::Or => a | b,
                Code::Xor => a ^ b,
                Code::And => a & b,
                Code::Sll => a.wrapping_shl(b as u32),
                Code::Srl => a.wrapping_shr(b as u32),
                Code::Sra => (a as i64).wrapping_shr(b as u32) as u64,
                Code::Sub => a.wrapping_sub(b),
                Code::Add => a.wrapping_add(b),
                Code::Mul => a.wrapping_mul(b),
                Code::Not => !a,
                Code::Mov => a,
                Code::Cmp => {
                    let r = a.wrapping_sub(b) as i64;
                    cc_n = r < 0;
                    cc_z = r == 0;
                    cc_v = false;
                    cc_c = a < b;
                    continue;
                }
                Code::Tst => {
                    cc_n = false;
                    cc_v = false;
                    cc_c = false;
                    cc_z = a == 0;
                    continue;
                }
                Code::Ba => {
                    pc = op.x as usize;
                    continue;
                }
                Code::Be
                | Code::Bne
                | Code::Bg
                | Code::Bgu
                | Code::Bge
                | Code::Bgeu
                | Code::Bl
                | Code::Blu
                | Code::Ble
                | Code::Bleu => {
                    let taken = match op.code {
                        Code::Be => cc_z,
                        Code::Bne => !cc_z,
                        Code::Bg => !(cc_z | (cc_n ^ cc_v)),
                        Code::Bgu => !(cc_c | cc_z),
                        Code::Bge => !(cc_n ^ cc_v),
                        Code::Bgeu => !cc_c,
                        Code::Bl => cc_n ^ cc_v,
                        Code::Blu => cc_c,
                        Code::Ble => cc_z | (cc_n ^ cc_v),
                        _ => cc_c | cc_z,
                    };
                    if taken {
                        pc = op.x as usize;
                    }
                    continue;
                }
                Code::Ret => return Ok(regs[(op.rd & 7) as usize]),
                Code::Nop => continue,
                Code::Setx => match inttab.get(op.x as usize) {
                    Some(&v) => v,
                    None => return Err(at(illop(BadOp::IntIndex.detail()), pc)),
                },
                Code::Sets => STRTAB_BASE + op.x as u64,
                Code::Pushtv if tuple.top < TUPLE_REGS => {
                    tuple.regs[tuple.top] = TupleReg {
                        value: regs[(op.rd & 7) as usize],
                        size: 0,
                    };
                    tuple.top += 1;
                    continue;
                }
                Code::Flushts => {
                    tuple.top = 0;
                    continue;
                }
                _ => {
                    let d = regs[(op.rd & 7) as usize];
                    match self.step(p, env, op, a, b, d, &mut tuple) {
                        Step::Set(v) => v,
                        Step::Next => continue,
                        Step::Cc(r) => {
                            cc_n = r < 0;
                            cc_z = r == 0;
                            cc_v = false;
                            cc_c = false;
                            continue;
                        }
                        Step::Fault => return Err(at(self.fault, pc)),
                    }
                }
            };
            regs[(op.rd & 7) as usize] = v;
            regs[0] = 0;
        }
        Err(at(illop("DIF object ended without ret"), len))
    }

    /// One instruction other than the inline ones of [`exec`](Machine::exec): `a`, `b` and `d` are the
    /// values of its `r1`, `r2` and `rd` registers.
    /// A fault is left in `self.fault` (so the common results come back in registers).
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn step(
        &mut self,
        p: &Prepared,
        env: &mut Env<'_>,
        op: Op,
        a: u64,
        b: u64,
        d: u64,
        tuple: &mut Tuple,
    ) -> Step {
        match self.step_inner(p, env, op, a, b, d, tuple) {
            Ok(s) => s,
            Err(f) => {
                self.fault = f;
                Step::Fault
            }
        }
    }

    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn step_inner(
        &mut self,
        p: &Prepared,
        env: &mut Env<'_>,
        op: Op,
        a: u64,
        b: u64,
        d: u64,
        tuple: &mut Tuple,
    ) -> Result<Step, Fault> {
        let v = match op.code {
            Code::Sdiv | Code::Udiv | Code::Srem | Code::Urem => {
                if b == 0 {
                    return Err(Fault::new(FaultKind::DivZero, 0));
                }
                match op.code {
                    Code::Sdiv => (a as i64).wrapping_div(b as i64) as u64,
                    Code::Udiv => a / b,
                    Code::Srem => (a as i64).wrapping_rem(b as i64) as u64,
                    _ => a % b,
                }
            }
            Code::Scmp => return self.scmp(env, a, b).map(Step::Cc),
            Code::Ld1s => self.load(env, 1, true, a, false)?,
            Code::Ld2s => self.load(env, 2, true, a, false)?,
            Code::Ld4s => self.load(env, 4, true, a, false)?,
            Code::Ld1 => self.load(env, 1, false, a, false)?,
            Code::Ld2 => self.load(env, 2, false, a, false)?,
            Code::Ld4 => self.load(env, 4, false, a, false)?,
            Code::Ld8 => self.load(env, 8, false, a, false)?,
            Code::Uld1s => self.load(env, 1, true, a, true)?,
            Code::Uld2s => self.load(env, 2, true, a, true)?,
            Code::Uld4s => self.load(env, 4, true, a, true)?,
            Code::Uld1 => self.load(env, 1, false, a, true)?,
            Code::Uld2 => self.load(env, 2, false, a, true)?,
            Code::Uld4 => self.load(env, 4, false, a, true)?,
            Code::Uld8 => self.load(env, 8, false, a, true)?,
            Code::St1 | Code::St2 | Code::St4 | Code::St8 => {
                self.key_from = None;
                self.builtin_strs.clear();
                let n: u64 = match op.code {
                    Code::St1 => 1,
                    Code::St2 => 2,
                    Code::St4 => 4,
                    _ => 8,
                };
                let slot = self.store_mut(d, n)?;
                if d & (n - 1) != 0 {
                    return Err(Fault::new(FaultKind::BadAlign, d));
                }
                slot.copy_from_slice(&a.to_le_bytes()[..n as usize]);
                return Ok(Step::Next);
            }
            Code::LdBuiltinArray => env.ctx.array_var(op.x, b).map_err(|k| Fault::new(k, 0))?,
            Code::LdBuiltinInt => env.ctx.int_var(op.x).map_err(|k| Fault::new(k, 0))?,
            Code::LdBuiltinStr => self.load_builtin_str(env, op.x)?,
            Code::LdGlobal => self.load_static(&p.vars[op.x as usize], false)?,
            Code::StGlobal => {
                self.store_static(env, &p.vars[op.x as usize], false, d)?;
                return Ok(Step::Next);
            }
            Code::LdLocal => self.load_static(&p.vars[op.x as usize], true)?,
            Code::StLocal => {
                self.store_static(env, &p.vars[op.x as usize], true, d)?;
                return Ok(Step::Next);
            }
            Code::Ldts => {
                let var = &p.vars[op.x as usize];
                self.dyn_key(env, DynScope::ThreadScalar, var.id, tuple, false)?;
                self.load_dyn(var)?
            }
            Code::Stts => {
                let var = &p.vars[op.x as usize];
                self.dyn_key(env, DynScope::ThreadScalar, var.id, tuple, false)?;
                self.store_dyn(env, var, d)?;
                return Ok(Step::Next);
            }
            Code::Ldgaa | Code::Ldtaa => {
                let scope = if op.code == Code::Ldgaa {
                    DynScope::GlobalArray
                } else {
                    DynScope::ThreadArray
                };
                let var = &p.vars[op.x as usize];
                if self.dyn_key(env, scope, var.id, tuple, true)? {
                    self.load_dyn(var)?
                } else {
                    0
                }
            }
            Code::Stgaa | Code::Sttaa => {
                let scope = if op.code == Code::Stgaa {
                    DynScope::GlobalArray
                } else {
                    DynScope::ThreadArray
                };
                let var = &p.vars[op.x as usize];
                if self.dyn_key(env, scope, var.id, tuple, true)? {
                    self.store_dyn(env, var, d)?;
                } else {
                    self.dynvars.count_drop();
                    return Err(self.drop_exit());
                }
                return Ok(Step::Next);
            }
            Code::Call => {
                self.key_from = None;
                if op.x == Subr::Bcopy as u32 || op.x == Subr::Copyinto as u32 {
                    self.builtin_strs.clear();
                }
                self.call(env, op.x as u16, tuple)?
            }
            Code::Pushtr => {
                if tuple.top >= TUPLE_REGS {
                    return Err(Fault::new(FaultKind::TupOflow, 0));
                }
                let size = if op.x != 0 {
                    let lim = if b != 0 {
                        (b as usize).min(self.opts.strsize)
                    } else {
                        self.opts.strsize
                    };
                    self.strlen(env, d, lim)? as u64 + 1
                } else {
                    if b > i64::MAX as u64 {
                        return Err(illop("reference size too large"));
                    }
                    b
                };
                tuple.regs[tuple.top] = TupleReg { value: d, size };
                tuple.top += 1;
                return Ok(Step::Next);
            }
            Code::Pushtv => {
                if tuple.top >= TUPLE_REGS {
                    return Err(Fault::new(FaultKind::TupOflow, 0));
                }
                tuple.regs[tuple.top] = TupleReg { value: d, size: 0 };
                tuple.top += 1;
                return Ok(Step::Next);
            }
            Code::Popts => {
                tuple.top = tuple.top.saturating_sub(1);
                return Ok(Step::Next);
            }
            Code::Flushts => {
                tuple.top = 0;
                return Ok(Step::Next);
            }
            Code::Allocs => self.alloc(a)?,
            Code::Copys => {
                self.key_from = None;
                self.builtin_strs.clear();
                self.copys(env, a, b, d)?;
                return Ok(Step::Next);
            }
            Code::Fault => return Err(illop(BadOp::from_x(op.x).detail())),
            // The inline instructions never get here.
            _ => return Err(illop(BadOp::Opcode.detail())),
        };
        Ok(Step::Set(v))
    }

    /// `copys`: copies `n` bytes from `src` to `dst` (scratch or variable storage).
    fn copys(&mut self, env: &mut Env<'_>, src: u64, n: u64, dst: u64) -> Result<(), Fault> {
        self.store_mut(dst, n)?;
        let mut buf = std::mem::take(&mut self.tmp);
        buf.clear();
        buf.resize(n as usize, 0);
        let r = self.read(env.obj, env.mem, src, &mut buf);
        if r.is_ok() {
            self.store_mut(dst, n)?.copy_from_slice(&buf);
        }
        self.tmp = buf;
        r
    }

    fn load(
        &self,
        env: &mut Env<'_>,
        n: usize,
        signed: bool,
        addr: u64,
        user: bool,
    ) -> Result<u64, Fault> {
        if !user && addr & (n as u64 - 1) != 0 {
            return Err(Fault::new(FaultKind::BadAlign, addr));
        }
        let mut buf = [0u8; 8];
        if user {
            env.mem
                .read_user(addr, &mut buf[..n])
                .map_err(|k| Fault::new(k, addr))?;
        } else {
            self.read(env.obj, env.mem, addr, &mut buf[..n])?;
        }
        let v = u64::from_le_bytes(buf);
        Ok(if signed {
            let shift = 64 - 8 * n as u32;
            (((v << shift) as i64) >> shift) as u64
        } else {
            v
        })
    }

    /// `strlen` bounded by `lim` bytes; the NULL string has length 0.
    pub(crate) fn strlen(
        &mut self,
        env: &mut Env<'_>,
        addr: u64,
        lim: usize,
    ) -> Result<usize, Fault> {
        if addr == 0 {
            return Ok(0);
        }
        if let Some(b) = self.vm_tail(env.obj, addr)? {
            let b = &b[..b.len().min(lim)];
            return Ok(b.iter().position(|&c| c == 0).unwrap_or(b.len()));
        }
        let mut s = std::mem::take(&mut self.tmp2);
        let r = self.read_str(env.obj, env.mem, addr, lim, false, &mut s);
        let n = s.len();
        self.tmp2 = s;
        r.map(|_| n)
    }

    fn scmp(&mut self, env: &mut Env<'_>, a: u64, b: u64) -> Result<i64, Fault> {
        if a == b {
            return Ok(0);
        }
        let lim = self.opts.strsize;
        // Fast path: both strings VM-owned, compared in place.
        if a != 0 && b != 0 {
            if let (Some(x), Some(y)) = (self.vm_tail(env.obj, a)?, self.vm_tail(env.obj, b)?) {
                let (x, y) = (&x[..x.len().min(lim)], &y[..y.len().min(lim)]);
                for i in 0..lim {
                    let c1 = x.get(i).copied().unwrap_or(0);
                    let c2 = y.get(i).copied().unwrap_or(0);
                    if c1 != c2 {
                        return Ok(c1 as i64 - c2 as i64);
                    }
                    if c1 == 0 {
                        break;
                    }
                }
                return Ok(0);
            }
        }
        let mut s1 = std::mem::take(&mut self.tmp);
        let mut s2 = std::mem::take(&mut self.tmp2);
        let mut r = Ok(());
        if a != 0 {
            r = self.read_str(env.obj, env.mem, a, lim, false, &mut s1);
        } else {
            s1.clear();
        }
        if r.is_ok() {
            if b != 0 {
                r = self.read_str(env.obj, env.mem, b, lim, false, &mut s2);
            } else {
                s2.clear();
            }
        }
        let mut res = 0i64;
        for i in 0..lim {
            let c1 = s1.get(i).copied().unwrap_or(0);
            let c2 = s2.get(i).copied().unwrap_or(0);
            if c1 != c2 {
                res = c1 as i64 - c2 as i64;
                break;
            }
            if c1 == 0 {
                break;
            }
        }
        self.tmp = s1;
        self.tmp2 = s2;
        r.map(|_| res)
    }

    /// A string built-in, copied into scratch.
    /// String built-ins do not change during a firing, so each is copied once per firing; the copy is
    /// forgotten when DIF code may have written scratch.
    fn load_builtin_str(&mut self, env: &mut Env<'_>, id: u32) -> Result<u64, Fault> {
        if let Some(&(_, addr)) = self.builtin_strs.iter().find(|b| b.0 == id) {
            return Ok(addr);
        }
        let mut s = std::mem::take(&mut self.tmp);
        s.clear();
        let r = env.ctx.str_var(id, &mut s).map_err(|k| Fault::new(k, 0));
        s.truncate(self.opts.strsize.saturating_sub(1));
        let addr = r.and_then(|_| self.put_str(&s));
        self.tmp = s;
        if let Ok(a) = addr {
            self.builtin_strs.push((id, a));
        }
        addr
    }

    /// Loads global (`local` false) or clause-local scalar `id`: integers by value, strings as a scratch
    /// copy, other by-reference variables as the address of their storage (created zero-filled).
    fn load_static(&mut self, var: &VarEntry, local: bool) -> Result<u64, Fault> {
        let i = var
            .id
            .checked_sub(DIF_VAR_OTHER_UBASE)
            .filter(|&i| i <= 0xffff)
            .ok_or(illop("variable id out of range"))? as usize;
        let size = var_size(var, self.opts.strsize);
        let vars = if local {
            &mut self.locals
        } else {
            &mut self.globals
        };
        let slot = vars.get(i).and_then(|s| s.as_ref());
        if !var.ty.is_by_ref() {
            return Ok(match slot {
                Some(Stored::Int(v)) => *v,
                _ => 0,
            });
        }
        if var.ty.is_string() {
            // A string set to NULL loads as NULL (DTrace for Linux's DT_NULL_STRING).
            if let Some(Stored::Int(0)) = slot {
                return Ok(0);
            }
            let mut t = std::mem::take(&mut self.tmp);
            t.clear();
            if let Some(Stored::Bytes(b)) = slot {
                t.extend_from_slice(b);
            }
            let r = if t.is_empty() && slot.is_none() {
                self.alloc(size as u64)
            } else {
                self.put_str(&t)
            };
            self.tmp = t;
            return r;
        }
        if !matches!(slot, Some(Stored::Bytes(b)) if b.len() == size) {
            self.set_static(local, i, Stored::Bytes(vec![0u8; size].into_boxed_slice()))?;
        }
        Ok(var_addr(local, i))
    }

    /// Puts `s` in static slot `i`, keeping the bytes of all global (or clause-local) variables within
    /// [`STATIC_LIMIT`]; `NoScratch` when they would not fit.
    fn set_static(&mut self, local: bool, i: usize, s: Stored) -> Result<(), Fault> {
        fn bytes(s: Option<&Stored>) -> usize {
            match s {
                Some(Stored::Bytes(b)) => b.len(),
                _ => 0,
            }
        }
        let (vars, used) = if local {
            (&mut self.locals, &mut self.local_bytes)
        } else {
            (&mut self.globals, &mut self.global_bytes)
        };
        let old = bytes(vars.get(i).and_then(|v| v.as_ref()));
        let new_used = (*used - old.min(*used)).saturating_add(bytes(Some(&s)));
        if new_used > STATIC_LIMIT {
            return Err(Fault::new(FaultKind::NoScratch, 0));
        }
        *used = new_used;
        if i >= vars.len() {
            vars.resize(i + 1, None);
        }
        vars[i] = Some(s);
        Ok(())
    }

    /// Stores `v` into global or clause-local scalar `id`.
    fn store_static(
        &mut self,
        env: &mut Env<'_>,
        var: &VarEntry,
        local: bool,
        v: u64,
    ) -> Result<(), Fault> {
        let i = var
            .id
            .checked_sub(DIF_VAR_OTHER_UBASE)
            .filter(|&i| i <= 0xffff)
            .ok_or(illop("built-in variables cannot be stored to"))? as usize;
        let s = self.stored_value(env, var, v)?;
        self.set_static(local, i, s)
    }

    /// What storing register value `v` into a variable of type `var` stores.
    fn stored_value(&mut self, env: &mut Env<'_>, var: &VarEntry, v: u64) -> Result<Stored, Fault> {
        if !var.ty.is_by_ref() {
            return Ok(Stored::Int(v));
        }
        let size = var_size(var, self.opts.strsize);
        if var.ty.is_string() {
            if v == 0 {
                // NULL, kept apart from "" (a later load gives NULL back).
                return Ok(Stored::Int(0));
            }
            let mut s = Vec::new();
            self.read_str(env.obj, env.mem, v, size.saturating_sub(1), false, &mut s)?;
            Ok(Stored::Bytes(s.into_boxed_slice()))
        } else {
            let mut buf = vec![0u8; size];
            if v != 0 {
                self.read(env.obj, env.mem, v, &mut buf)?;
            }
            Ok(Stored::Bytes(buf.into_boxed_slice()))
        }
    }

    /// Builds in `self.key` the dynamic-variable key for variable `id` with the current tuple (arrays)
    /// and thread. Returns false when a by-reference key is too large to ever be stored.
    fn dyn_key(
        &mut self,
        env: &mut Env<'_>,
        scope: DynScope,
        id: u32,
        tuple: &Tuple,
        with_tuple: bool,
    ) -> Result<bool, Fault> {
        if id < DIF_VAR_OTHER_UBASE {
            return Err(illop("built-in variables are not dynamic"));
        }
        let top = if with_tuple { tuple.top } else { 0 };
        if let Some(k) = &self.key_from {
            if k.scope == scope
                && k.id == id
                && k.with_tuple == with_tuple
                && k.top == top
                && k.args[..top]
                    .iter()
                    .zip(tuple.args())
                    .all(|(a, t)| a.0 == t.value && a.1 == t.size)
            {
                return Ok(true);
            }
        }
        let mut args = [(0u64, 0u64); TUPLE_REGS];
        for (a, t) in args.iter_mut().zip(&tuple.regs[..top]) {
            *a = (t.value, t.size);
        }
        let source = crate::vm::machine::KeySource {
            scope,
            id,
            with_tuple,
            top,
            args,
        };
        let thread = if scope == DynScope::GlobalArray {
            0
        } else {
            // The thread does not change during a run: asked once.
            *self.thread.get_or_insert_with(|| env.ctx.thread_key())
        };
        self.key_from = None;
        self.key_slot = None;
        let mut key = std::mem::take(&mut self.key);
        key.reset(scope, id, thread);
        let mut r = Ok(true);
        if with_tuple {
            for t in tuple.args() {
                if t.size == 0 {
                    key.push_int(t.value);
                    continue;
                }
                if t.size > (env.state.options.dynvarsize as u64).min(MAX_KEY_SIZE) {
                    r = Ok(false);
                    break;
                }
                let res = match self.region(env.obj, t.value, t.size as usize) {
                    Ok(crate::vm::machine::Region::Vm(b)) => {
                        // String keys are compared up to their NUL.
                        let n = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                        key.push_bytes(&b[..n]);
                        Ok(())
                    }
                    Ok(crate::vm::machine::Region::Outside) => {
                        let mut buf = vec![0u8; t.size as usize];
                        let res = self.read(env.obj, env.mem, t.value, &mut buf);
                        let n = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
                        key.push_bytes(&buf[..n]);
                        res
                    }
                    Err(e) => Err(e),
                };
                if let Err(e) = res {
                    r = Err(e);
                    break;
                }
            }
        }
        self.key = key;
        if matches!(r, Ok(true)) {
            self.key_from = Some(source);
        }
        r
    }

    /// The slot of the variable `self.key` names, looked up once per key.
    fn key_slot(&mut self) -> Option<u32> {
        if self.key_slot.is_none() {
            self.key_slot = self.dynvars.slot_of(&self.key);
        }
        self.key_slot
    }

    /// Loads the dynamic variable `self.key` names: integers by value, strings as a scratch copy,
    /// structs and arrays as the address of their storage; 0 when it does not exist.
    fn load_dyn(&mut self, var: &VarEntry) -> Result<u64, Fault> {
        let Some(slot) = self.key_slot() else {
            return Ok(0);
        };
        if !var.ty.is_by_ref() {
            return Ok(match self.dynvars.value(slot) {
                Some(Stored::Int(v)) => *v,
                _ => 0,
            });
        }
        if !var.ty.is_string() {
            return Ok(dyn_addr(slot));
        }
        let n = match self.dynvars.value(slot) {
            Some(Stored::Bytes(b)) => b.len(),
            _ => return Ok(0),
        };
        let addr = self.alloc(n as u64 + 1)?;
        let off = (addr - SCRATCH_BASE) as usize;
        if let (Some(Stored::Bytes(b)), Some(dst)) =
            (self.dynvars.value(slot), self.scratch.get_mut(off..off + n))
        {
            dst.copy_from_slice(b);
        }
        Ok(addr)
    }

    /// Stores `v` into the dynamic variable `self.key` names: 0 frees it; integers by value; strings
    /// and by-reference values (structs, arrays) by copying the bytes `v` points to into its storage.
    fn store_dyn(&mut self, env: &mut Env<'_>, var: &VarEntry, v: u64) -> Result<(), Fault> {
        if v == 0 {
            self.dynvars.remove(&self.key);
            self.key_slot = None;
            return Ok(());
        }
        if !var.ty.is_by_ref() {
            if let Some(slot) = self.key_slot() {
                if let Some(Stored::Int(x)) = self.dynvars.value_mut(slot) {
                    *x = v;
                    return Ok(());
                }
            }
            self.key_slot = self.dynvars.put_slot(&self.key, Stored::Int(v));
            if self.key_slot.is_none() {
                return Err(self.drop_exit());
            }
            return Ok(());
        }
        let size = var_size(var, self.opts.strsize);
        let mut buf = std::mem::take(&mut self.tmp);
        let r = if var.ty.is_string() {
            self.read_str(env.obj, env.mem, v, size.saturating_sub(1), false, &mut buf)
        } else {
            buf.clear();
            buf.resize(size, 0);
            self.read(env.obj, env.mem, v, &mut buf)
        };
        if r.is_ok() {
            // Updated in place when the size matches, as most stores do.
            let slot = self.key_slot();
            let done = match slot.and_then(|s| self.dynvars.value_mut(s)) {
                Some(Stored::Bytes(old)) if old.len() == buf.len() => {
                    old.copy_from_slice(&buf);
                    true
                }
                _ => false,
            };
            if !done {
                self.key_slot = self
                    .dynvars
                    .put_slot(&self.key, Stored::Bytes(buf.as_slice().into()));
            }
        }
        self.tmp = buf;
        r?;
        if self.key_slot.is_none() {
            return Err(self.drop_exit());
        }
        Ok(())
    }

    /// A store into the dynamic variable space that was dropped (counted already) ends the clause, as
    /// DTrace for Linux's clause jumps to its exit when it gets no variable: no record, no error. The
    /// run stops with this `Err`, and [`Machine::take_dropped_exit`] tells the caller it is no fault.
    fn drop_exit(&mut self) -> Fault {
        self.dropped_exit = true;
        Fault::with_detail(
            FaultKind::Unknown,
            0,
            "dynamic variable drop ends the clause",
        )
    }

    /// Whether the last run ended because a dynamic-variable store was dropped (see `drop_exit`);
    /// clears the flag.
    pub fn take_dropped_exit(&mut self) -> bool {
        std::mem::take(&mut self.dropped_exit)
    }
}

/// Most bytes the global (and, separately, the clause-local) by-reference variables may hold, so a
/// program with many large variables cannot make the VM allocate without bound.
pub(crate) const STATIC_LIMIT: usize = 64 << 20;

/// Largest by-reference key element read (larger ones can never be stored and count as drops).
const MAX_KEY_SIZE: u64 = 1 << 20;

/// Bytes of storage of a by-reference variable: its type size, strings bounded by `strsize`, everything
/// bounded by 1 MiB.
pub(crate) fn var_size(var: &VarEntry, strsize: usize) -> usize {
    let size = var.ty.size as usize;
    let size = if var.ty.is_string() {
        if size == 0 {
            strsize
        } else {
            size.min(strsize)
        }
    } else {
        size
    };
    size.min(1 << 20)
}
