//! The DIF interpreter loop (`dtrace_dif_emulate`): every instruction of spec ch.8, the cc flags, the
//! tuple stack and variable access.
//!
//! `run` is safe on any object, verified or not: registers are masked to 0-7, `%r0` reads as zero, table
//! references are checked, and a branch that is not strictly forward and inside the object faults with
//! `IllOp`, so execution always ends within `text.len()` instructions.

use crate::object::{DifObject, VarEntry, DIFV_SCOPE_GLOBAL, DIFV_SCOPE_LOCAL, DIFV_SCOPE_THREAD};
use crate::object::{DIFV_KIND_ARRAY, DIFV_KIND_SCALAR, DIF_TYPE_STRING};
use crate::opcode::Opcode;
use crate::vars::DIF_VAR_OTHER_UBASE;
use crate::vm::env::{is_string_var, Memory, ProbeContext};
use crate::vm::fault::{Fault, FaultKind};
use crate::vm::machine::{var_addr, Machine, STRTAB_BASE, TUPLE_REGS, VAR_BASE};
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

fn find_var(obj: &DifObject, id: u32, scope: u8, kind: u8) -> Result<VarEntry, Fault> {
    obj.vartab
        .iter()
        .find(|v| v.id == id && v.scope == scope && v.kind == kind)
        .copied()
        .ok_or(illop("variable not in the variable table"))
}

impl Machine {
    /// Runs a DIF object for the current firing and returns the value of its `ret` register. By-reference
    /// results (strings, copied memory) are addresses to read back with
    /// [`read_result`](Machine::read_result) / [`read_string_result`](Machine::read_string_result).
    pub fn run(
        &mut self,
        obj: &DifObject,
        state: &mut VarState,
        ctx: &mut dyn ProbeContext,
        mem: &mut dyn Memory,
    ) -> Result<u64, Fault> {
        self.opts = state.options;
        // String-table addresses mean another object's bytes now.
        self.key_from = None;
        let mut env = Env {
            obj,
            state,
            ctx,
            mem,
        };
        let mut at = 0usize;
        // The globals are the VM's while it runs, so by-reference ones have VM addresses.
        self.globals.clear();
        std::mem::swap(&mut self.globals, &mut env.state.globals);
        std::mem::swap(&mut self.global_bytes, &mut env.state.global_bytes);
        let r = self.exec(&mut env, &mut at);
        std::mem::swap(&mut self.globals, &mut env.state.globals);
        std::mem::swap(&mut self.global_bytes, &mut env.state.global_bytes);
        if let Ok(v) = r {
            self.keep_result_global(env.state, v);
        }
        r.map_err(|mut f| {
            f.pc = at as u32;
            f
        })
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

    fn exec(&mut self, env: &mut Env<'_>, at: &mut usize) -> Result<u64, Fault> {
        use Opcode::*;
        let obj = env.obj;
        let text = &obj.text[..];
        let len = text.len();
        let mut regs = [0u64; 8];
        let mut tuple = Tuple::default();
        let (mut cc_n, mut cc_z, mut cc_v, mut cc_c) = (false, false, false, false);
        let mut pc = 0usize;
        while pc < len {
            let w = text[pc];
            *at = pc;
            pc += 1;
            let r1 = ((w >> 16) & 7) as usize;
            let r2 = ((w >> 8) & 7) as usize;
            let rd = (w & 7) as usize;
            let idx = (w >> 8) & 0xffff;
            let Some(op) = Opcode::from_u8((w >> 24) as u8) else {
                return Err(illop("invalid opcode"));
            };
            let a = regs[r1];
            let b = regs[r2];
            let v: u64 = match op {
                Or => a | b,
                Xor => a ^ b,
                And => a & b,
                Sll => a.wrapping_shl(b as u32),
                Srl => a.wrapping_shr(b as u32),
                Sra => (a as i64).wrapping_shr(b as u32) as u64,
                Sub => a.wrapping_sub(b),
                Add => a.wrapping_add(b),
                Mul => a.wrapping_mul(b),
                Sdiv | Udiv | Srem | Urem => {
                    if b == 0 {
                        return Err(Fault::new(FaultKind::DivZero, 0));
                    }
                    match op {
                        Sdiv => (a as i64).wrapping_div(b as i64) as u64,
                        Udiv => a / b,
                        Srem => (a as i64).wrapping_rem(b as i64) as u64,
                        _ => a % b,
                    }
                }
                Not => !a,
                Mov => a,
                Cmp => {
                    let r = a.wrapping_sub(b) as i64;
                    cc_n = r < 0;
                    cc_z = r == 0;
                    cc_v = false;
                    cc_c = a < b;
                    continue;
                }
                Tst => {
                    cc_n = false;
                    cc_v = false;
                    cc_c = false;
                    cc_z = a == 0;
                    continue;
                }
                Scmp => {
                    let r = self.scmp(env, a, b)?;
                    cc_n = r < 0;
                    cc_z = r == 0;
                    cc_v = false;
                    cc_c = false;
                    continue;
                }
                Ba | Be | Bne | Bg | Bgu | Bge | Bgeu | Bl | Blu | Ble | Bleu => {
                    let taken = match op {
                        Ba => true,
                        Be => cc_z,
                        Bne => !cc_z,
                        Bg => !(cc_z | (cc_n ^ cc_v)),
                        Bgu => !(cc_c | cc_z),
                        Bge => !(cc_n ^ cc_v),
                        Bgeu => !cc_c,
                        Bl => cc_n ^ cc_v,
                        Blu => cc_c,
                        Ble => cc_z | (cc_n ^ cc_v),
                        _ => cc_c | cc_z,
                    };
                    let label = (w & 0x00ff_ffff) as usize;
                    if label < pc || label >= len {
                        return Err(illop("branch not forward within the object"));
                    }
                    if taken {
                        pc = label;
                    }
                    continue;
                }
                Ldsb | Ldsh | Ldsw | Ldub | Lduh | Lduw | Ldx | Rldsb | Rldsh | Rldsw | Rldub
                | Rlduh | Rlduw | Rldx => self.load(env, op, a, false)?,
                Uldsb | Uldsh | Uldsw | Uldub | Ulduh | Ulduw | Uldx => {
                    self.load(env, op, a, true)?
                }
                Stb | Sth | Stw | Stx => {
                    self.key_from = None;
                    let dst = regs[rd];
                    let n: u64 = match op {
                        Stb => 1,
                        Sth => 2,
                        Stw => 4,
                        _ => 8,
                    };
                    let slot = self.store_mut(dst, n)?;
                    if dst & (n - 1) != 0 {
                        return Err(Fault::new(FaultKind::BadAlign, dst));
                    }
                    slot.copy_from_slice(&a.to_le_bytes()[..n as usize]);
                    continue;
                }
                Ret => return Ok(regs[rd]),
                Nop => continue,
                Setx => *obj
                    .inttab
                    .get(idx as usize)
                    .ok_or(illop("integer table index out of range"))?,
                Sets => {
                    if idx as usize >= obj.strtab.len() {
                        return Err(illop("string table offset out of range"));
                    }
                    STRTAB_BASE + idx as u64
                }
                Ldga => {
                    let var = (w >> 16) & 0xff;
                    env.ctx.array_var(var, b).map_err(|k| Fault::new(k, 0))?
                }
                Ldta => return Err(illop("there are no built-in thread-local arrays")),
                Ldgs => self.load_global(env, idx)?,
                Stgs => {
                    self.store_global(env, idx, regs[rd])?;
                    continue;
                }
                Ldts => {
                    let var = find_var(obj, idx, DIFV_SCOPE_THREAD, DIFV_KIND_SCALAR)?;
                    self.dyn_key(env, DynScope::ThreadScalar, idx, &tuple, false)?;
                    self.load_dyn(env, &var)?
                }
                Stts => {
                    let var = find_var(obj, idx, DIFV_SCOPE_THREAD, DIFV_KIND_SCALAR)?;
                    self.dyn_key(env, DynScope::ThreadScalar, idx, &tuple, false)?;
                    self.store_dyn(env, &var, regs[rd])?;
                    continue;
                }
                Ldgaa | Ldtaa => {
                    let (scope, s) = if op == Ldgaa {
                        (DynScope::GlobalArray, DIFV_SCOPE_GLOBAL)
                    } else {
                        (DynScope::ThreadArray, DIFV_SCOPE_THREAD)
                    };
                    let var = find_var(obj, idx, s, DIFV_KIND_ARRAY)?;
                    if self.dyn_key(env, scope, idx, &tuple, true)? {
                        self.load_dyn(env, &var)?
                    } else {
                        0
                    }
                }
                Stgaa | Sttaa => {
                    let (scope, s) = if op == Stgaa {
                        (DynScope::GlobalArray, DIFV_SCOPE_GLOBAL)
                    } else {
                        (DynScope::ThreadArray, DIFV_SCOPE_THREAD)
                    };
                    let var = find_var(obj, idx, s, DIFV_KIND_ARRAY)?;
                    if self.dyn_key(env, scope, idx, &tuple, true)? {
                        self.store_dyn(env, &var, regs[rd])?;
                    } else {
                        env.state.dynvars.count_drop();
                    }
                    continue;
                }
                Ldls => self.load_local(env, idx)?,
                Stls => {
                    self.store_local(env, idx, regs[rd])?;
                    continue;
                }
                Call => {
                    self.key_from = None;
                    let r = self.call(env, idx as u16, &tuple)?;
                    regs[rd] = r;
                    regs[0] = 0;
                    continue;
                }
                Pushtr => {
                    if tuple.top >= TUPLE_REGS {
                        return Err(Fault::new(FaultKind::TupOflow, 0));
                    }
                    let ty = (w >> 16) & 0xff;
                    let value = regs[rd];
                    let size = if ty == DIF_TYPE_STRING as u32 {
                        let lim = if b != 0 {
                            (b as usize).min(self.opts.strsize)
                        } else {
                            self.opts.strsize
                        };
                        self.strlen(env, value, lim)? as u64 + 1
                    } else {
                        if b > i64::MAX as u64 {
                            return Err(illop("reference size too large"));
                        }
                        b
                    };
                    tuple.regs[tuple.top] = TupleReg { value, size };
                    tuple.top += 1;
                    continue;
                }
                Pushtv => {
                    if tuple.top >= TUPLE_REGS {
                        return Err(Fault::new(FaultKind::TupOflow, 0));
                    }
                    tuple.regs[tuple.top] = TupleReg {
                        value: regs[rd],
                        size: 0,
                    };
                    tuple.top += 1;
                    continue;
                }
                Popts => {
                    tuple.top = tuple.top.saturating_sub(1);
                    continue;
                }
                Flushts => {
                    tuple.top = 0;
                    continue;
                }
                Allocs => self.alloc(a)?,
                Copys => {
                    self.key_from = None;
                    let n = b;
                    let dst = regs[rd];
                    self.store_mut(dst, n)?;
                    let mut buf = std::mem::take(&mut self.tmp);
                    buf.clear();
                    buf.resize(n as usize, 0);
                    let r = self.read(obj, env.mem, a, &mut buf);
                    if r.is_ok() {
                        self.store_mut(dst, n)?.copy_from_slice(&buf);
                    }
                    self.tmp = buf;
                    r?;
                    continue;
                }
                Xlate | Xlarg => {
                    return Err(illop("translators are resolved by the compiler"));
                }
            };
            regs[rd] = v;
            regs[0] = 0;
        }
        Err(illop("DIF object ended without ret"))
    }

    fn load(&self, env: &mut Env<'_>, op: Opcode, addr: u64, user: bool) -> Result<u64, Fault> {
        use Opcode::*;
        let (n, signed) = match op {
            Ldsb | Rldsb | Uldsb => (1, true),
            Ldsh | Rldsh | Uldsh => (2, true),
            Ldsw | Rldsw | Uldsw => (4, true),
            Ldub | Rldub | Uldub => (1, false),
            Lduh | Rlduh | Ulduh => (2, false),
            Lduw | Rlduw | Ulduw => (4, false),
            _ => (8, false),
        };
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

    fn load_global(&mut self, env: &mut Env<'_>, id: u32) -> Result<u64, Fault> {
        if id < DIF_VAR_OTHER_UBASE {
            if is_string_var(id) {
                let mut s = std::mem::take(&mut self.tmp);
                s.clear();
                let r = env.ctx.str_var(id, &mut s).map_err(|k| Fault::new(k, 0));
                s.truncate(self.opts.strsize.saturating_sub(1));
                let addr = r.and_then(|_| self.put_str(&s));
                self.tmp = s;
                return addr;
            }
            return env.ctx.int_var(id).map_err(|k| Fault::new(k, 0));
        }
        let var = find_var(env.obj, id, DIFV_SCOPE_GLOBAL, DIFV_KIND_SCALAR)?;
        self.load_static(&var, id, false)
    }

    /// Loads global (`local` false) or clause-local scalar `id`: integers by value, strings as a scratch
    /// copy, other by-reference variables as the address of their storage (created zero-filled).
    fn load_static(&mut self, var: &VarEntry, id: u32, local: bool) -> Result<u64, Fault> {
        let i = id
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
        id: u32,
        local: bool,
        v: u64,
    ) -> Result<(), Fault> {
        let i = id
            .checked_sub(DIF_VAR_OTHER_UBASE)
            .filter(|&i| i <= 0xffff)
            .ok_or(illop("built-in variables cannot be stored to"))? as usize;
        let s = self.stored_value(env, var, v)?;
        self.set_static(local, i, s)
    }

    /// The register value of a stored variable: the integer, or the address of a scratch copy of its
    /// bytes. Missing values are 0 for dynamic variables and zero bytes for static ones.
    fn load_stored(
        &mut self,
        s: Option<&Stored>,
        var: &VarEntry,
        fill: bool,
    ) -> Result<u64, Fault> {
        if !var.ty.is_by_ref() {
            return Ok(match s {
                Some(Stored::Int(v)) => *v,
                _ => 0,
            });
        }
        match s {
            Some(Stored::Bytes(b)) => {
                if var.ty.is_string() {
                    self.put_str(b)
                } else {
                    self.put_bytes(b)
                }
            }
            _ if fill => self.alloc(var_size(var, self.opts.strsize) as u64),
            _ => Ok(0),
        }
    }

    /// What storing register value `v` into a variable of type `var` stores.
    fn stored_value(&mut self, env: &mut Env<'_>, var: &VarEntry, v: u64) -> Result<Stored, Fault> {
        if !var.ty.is_by_ref() {
            return Ok(Stored::Int(v));
        }
        let size = var_size(var, self.opts.strsize);
        if var.ty.is_string() {
            let mut s = Vec::new();
            if v != 0 {
                self.read_str(env.obj, env.mem, v, size.saturating_sub(1), false, &mut s)?;
            }
            Ok(Stored::Bytes(s.into_boxed_slice()))
        } else {
            let mut buf = vec![0u8; size];
            if v != 0 {
                self.read(env.obj, env.mem, v, &mut buf)?;
            }
            Ok(Stored::Bytes(buf.into_boxed_slice()))
        }
    }

    fn store_global(&mut self, env: &mut Env<'_>, id: u32, v: u64) -> Result<(), Fault> {
        if id < DIF_VAR_OTHER_UBASE {
            return Err(illop("built-in variables cannot be stored to"));
        }
        let var = find_var(env.obj, id, DIFV_SCOPE_GLOBAL, DIFV_KIND_SCALAR)?;
        self.store_static(env, &var, id, false, v)
    }

    fn load_local(&mut self, env: &mut Env<'_>, id: u32) -> Result<u64, Fault> {
        let var = find_var(env.obj, id, DIFV_SCOPE_LOCAL, DIFV_KIND_SCALAR)?;
        self.load_static(&var, id, true)
    }

    fn store_local(&mut self, env: &mut Env<'_>, id: u32, v: u64) -> Result<(), Fault> {
        let var = find_var(env.obj, id, DIFV_SCOPE_LOCAL, DIFV_KIND_SCALAR)?;
        self.store_static(env, &var, id, true, v)
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
        let thread = if scope == DynScope::GlobalArray {
            0
        } else {
            env.ctx.thread_key()
        };
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
        self.key_from = None;
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

    fn load_dyn(&mut self, env: &mut Env<'_>, var: &VarEntry) -> Result<u64, Fault> {
        let key = std::mem::take(&mut self.key);
        let r = self.load_stored(env.state.dynvars.get(&key), var, false);
        self.key = key;
        r
    }

    fn store_dyn(&mut self, env: &mut Env<'_>, var: &VarEntry, v: u64) -> Result<(), Fault> {
        let key = std::mem::take(&mut self.key);
        let r = if v == 0 {
            env.state.dynvars.remove(&key);
            Ok(())
        } else if var.ty.is_string() {
            // Strings are read once into a reused buffer and updated in place when the length matches.
            let mut buf = std::mem::take(&mut self.tmp);
            let size = var_size(var, self.opts.strsize);
            let r = self.read_str(env.obj, env.mem, v, size.saturating_sub(1), false, &mut buf);
            if r.is_ok() && !env.state.dynvars.overwrite_bytes(&key, &buf) {
                env.state
                    .dynvars
                    .put_ref(&key, Stored::Bytes(buf.as_slice().into()));
            }
            self.tmp = buf;
            r
        } else {
            self.stored_value(env, var, v).map(|s| {
                env.state.dynvars.put_ref(&key, s);
            })
        };
        self.key = key;
        r
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
