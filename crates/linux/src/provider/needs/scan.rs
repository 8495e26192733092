//! What one DIF object of a clause asks to capture: a [`Visitor`] of the DIF data-flow
//! ([`dtrace_dif::flow`]) that turns the values the walk follows into copy requests (chains of
//! kernel memory from `curthread` and probe arguments, `copyin`/`copyinstr` of user addresses with
//! their lengths, the paths of `d_path()`), notes the built-in variables that need a capture
//! (`caller`, `execargs`, `uregs[]`...), and gives the walk the values of clause-locals,
//! thread-locals and `copyin`.

use super::clause::{ClauseNeeds, ALL_ARGS};
use super::mirror;
use super::policy::CopyLimits;
use crate::capture::spec::{MAX_COPY_SIZE, MAX_DEREFS, MAX_STACK_DEPTH, MAX_USER_DEREFS};
use crate::capture::{AddrBase, AddrExpr, CopyRequest, MemKind};
use dtrace_dif::flow::{self, kernel_load_size, Limits, State, Value, Visitor};
use dtrace_dif::instr::Instr;
use dtrace_dif::object::{
    DifObject, DIFV_SCOPE_GLOBAL, DIFV_SCOPE_LOCAL, DIFV_SCOPE_THREAD, DIF_TF_BYREF,
    DIF_TYPE_STRING,
};
use dtrace_dif::opcode::Opcode;
use dtrace_dif::subr::Subr;
use dtrace_dif::vars;
use std::collections::{HashMap, HashSet};

/// An address whose bytes the probe can copy from kernel memory: reached from `curthread` or
/// from a probe argument through offsets or pointer hops (a plain argument used as a string or
/// struct is left alone: tracepoint arrays are delivered as the address of their capture).
fn kernel_addr(v: &Value) -> Option<&AddrExpr> {
    match v {
        Value::Addr(e)
            if v.plain_arg().is_none() && e.user_derefs.is_empty() && !mirror::is_mirror(e) =>
        {
            Some(e)
        }
        _ => None,
    }
}

/// Whether kernel bytes at `e` can be asked of the probe (arguments past the record's eight are
/// always zero and not carried).
fn capturable(e: &AddrExpr) -> bool {
    !matches!(e.base, AddrBase::Arg(n) if n >= crate::capture::layout::NARGS)
        && e.index
            .is_none_or(|i| usize::from(i.arg) < crate::capture::layout::NARGS)
}

/// Notes in `n` a string read at `v` when `v` is a plain probe argument (see
/// [`ClauseNeeds::string_at_args`]).
fn note_string_at_arg(n: &mut ClauseNeeds, v: &Value) {
    if let Some(arg) = v.plain_arg().filter(|&a| a < crate::capture::layout::NARGS) {
        n.string_at_args |= 1 << arg;
    }
}

impl ClauseNeeds {
    /// Asks for `size` kernel bytes (or a string of at most `size` bytes) at `e`.
    fn kernel_copy(&mut self, e: &AddrExpr, kind: MemKind, size: u32) {
        if !capturable(e) || size == 0 || !e.user_derefs.is_empty() || mirror::is_mirror(e) {
            return;
        }
        if e.derefs.len() > MAX_DEREFS {
            self.unsupported.get_or_insert_with(|| {
                format!("not yet supported: a chain of more than {MAX_DEREFS} pointers read at one probe")
            });
            return;
        }
        self.add_copy(CopyRequest::new(e.clone(), kind, size.min(MAX_COPY_SIZE)));
    }

    /// Asks for the path of the `struct path` a `d_path()` call is given, when the probe can
    /// compute its address; otherwise (but for a constant, where it faults) the clause cannot be
    /// enabled: its path would not be known.
    fn d_path(&mut self, arg: Option<&Value>) {
        match arg {
            Some(Value::Addr(e))
                if capturable(e)
                    && e.derefs.len() <= MAX_DEREFS
                    && e.user_derefs.is_empty()
                    && !mirror::is_mirror(e) =>
            {
                if !self.paths.contains(e) {
                    self.paths.push(e.clone());
                }
            }
            // A constant (NULL) path: nothing to walk; d_path() faults at it, as in DTrace.
            Some(Value::Const(_)) => {}
            _ => {
                self.unsupported.get_or_insert_with(|| {
                    "not yet supported: d_path() of a struct path whose address is not a chain \
                     of members from curthread or a probe argument"
                        .to_string()
                });
            }
        }
    }
}

/// Variables whose values the analysis follows: clause-local ones (`this->`, carried from one
/// object of a clause to the next), and thread-local ones (`self->`) that every store of the
/// program sets to the same value computed from `curthread` (`self->t = curthread`): such a value
/// is the same computation on the same thread wherever it is read, so it can be captured there too.
#[derive(Default)]
pub(super) struct ScanVars {
    /// Clause-local values stored so far in the clause.
    pub(super) locals: HashMap<u16, Value>,
    /// Thread-local values known at loads (from a first pass over the program).
    pub(super) thread: HashMap<u16, Value>,
    /// What the stores of each thread-local store (`Unknown`: not one `curthread` computation).
    pub(super) thread_stores: HashMap<u16, Value>,
    /// Thread-locals some store sets to an address a probe can compute (filled by the first pass).
    pub(super) mirror_sources: HashSet<u16>,
    /// Those of the first pass: their loads are mirror addresses ([`AddrBase::ThreadVar`]).
    pub(super) mirrorable: HashSet<u16>,
    /// What the clause itself stored in thread-locals so far: a later load in the clause reads it
    /// (`self->b = arg1; copyinstr(self->b)` copies from arg1, not from the mirror).
    pub(super) stored: HashMap<u16, Value>,
}

/// Follows probe arguments, `curthread` and constants through one DIF object (the DIF data-flow,
/// [`dtrace_dif::flow`]) to the memory it reads: `copyinstr`/`copyin` of arguments (user memory),
/// and kernel loads, strings and by-reference values reached from `curthread` or an argument
/// through constant offsets and pointer loads (`curthread->real_parent->pid`, `args[0]->field`),
/// each of which asks for a kernel copy. Every step of a chain is asked for, so the interpreter
/// finds each pointer it loads on its own walk. Where branches join, a register keeps a value the
/// paths agree on, or the address one of them computed when the other holds a constant (the NULL
/// arm of `T->mm ? T->mm->arg_start : 0`); anything else is unknown. A wrong guess only costs a
/// copy, never a wrong result (reads are served by address), and what is not captured faults at
/// delivery as before.
/// `vars` carries clause-local variables (`this->`) from one object of the clause to the next.
pub(super) fn scan_object(
    obj: &DifObject,
    sizes: CopyLimits,
    n: &mut ClauseNeeds,
    vars: &mut ScanVars,
) {
    let limits = Limits {
        user_hops: MAX_USER_DEREFS,
    };
    flow::walk(
        obj,
        limits,
        &mut ObjectScan {
            obj,
            strsize: sizes.strsize,
            sized: sizes.sized,
            n,
            vars,
        },
    );
}

/// The capture planner's view of one object's walk: what each instruction asks to capture, and
/// the values of the variables and subroutines the data-flow leaves to it.
struct ObjectScan<'a> {
    obj: &'a DifObject,
    strsize: u32,
    /// The most bytes of a copy sized at the probe.
    sized: u32,
    n: &'a mut ClauseNeeds,
    vars: &'a mut ScanVars,
}

impl ObjectScan<'_> {
    /// Whether variable `var` stored by `op` is a string.
    fn string_var(&self, op: Opcode, var: u16) -> bool {
        let scope = match op {
            Opcode::Stts => DIFV_SCOPE_THREAD,
            Opcode::Stls => DIFV_SCOPE_LOCAL,
            _ => DIFV_SCOPE_GLOBAL,
        };
        self.obj
            .vartab
            .iter()
            .any(|v| v.id == u32::from(var) && v.scope == scope && v.ty.is_string())
    }

    /// `ldgs`: notes the built-in variables that ask for a capture (the lattice gives the
    /// arguments and `curthread` their values).
    fn builtin(&mut self, var: u16) {
        let n = &mut *self.n;
        let var = u32::from(var);
        if (vars::DIF_VAR_ARG0..=vars::DIF_VAR_ARG0 + 9).contains(&var) {
            n.used_args |= 1 << (var - vars::DIF_VAR_ARG0);
        } else if var == vars::DIF_VAR_CALLER {
            n.caller = true;
        } else if var == vars::DIF_VAR_UCALLER {
            n.ucaller = true;
        } else if var == vars::DIF_VAR_EPID {
            n.epid = true;
        } else if var == vars::DIF_VAR_EXECARGS {
            n.execargs = true;
        } else if var == vars::DIF_VAR_STACKDEPTH {
            // The depth of the whole stack, not of what a stack() action would print.
            n.kstack = Some(MAX_STACK_DEPTH);
            n.stackdepth = true;
        } else if var == vars::DIF_VAR_USTACKDEPTH {
            n.ustack = Some(MAX_STACK_DEPTH);
        } else if var == vars::DIF_VAR_VTIMESTAMP {
            n.vtimestamp = true;
        }
    }

    /// `stts`/`stls`: a string stored from kernel memory is copied; clause-locals and
    /// thread-locals keep what they hold for later loads, and thread-locals holding addresses are
    /// mirrored.
    fn store(&mut self, op: Opcode, var: u16, v: Value) {
        if let Some(e) = kernel_addr(&v) {
            if self.string_var(op, var) {
                self.n.kernel_copy(e, MemKind::KernelString, self.strsize);
            }
        }
        let vars = &mut *self.vars;
        match op {
            Opcode::Stls => {
                vars.locals.insert(var, v);
            }
            Opcode::Stts => {
                vars.stored.insert(var, v.clone());
                if let Some(op) = mirror::store(self.obj, var, &v) {
                    if op.value.is_some() {
                        vars.mirror_sources.insert(var);
                    }
                    self.n.mirror.push(op);
                }
                // What every store of the thread-local stores (zero clears it).
                let task_based = match &v {
                    Value::Addr(e) if e.base == AddrBase::CurrentTask => Some(v.clone()),
                    Value::Const(0) => None,
                    _ => Some(Value::Unknown),
                };
                if let Some(v) = task_based {
                    let slot = vars.thread_stores.entry(var).or_insert(v.clone());
                    if *slot != v {
                        *slot = Value::Unknown;
                    }
                }
            }
            _ => {}
        }
    }

    /// `call`: the subroutines that read memory or ask for a capture; the value of `copyin` (a
    /// scratch copy of the user memory it read).
    fn call(&mut self, subr: u16, stack: &[Value]) -> Value {
        let n = &mut *self.n;
        let user_addr = stack.first().and_then(user_addr);
        let mut result = Value::Unknown;
        if subr == Subr::Progenyof as u16 {
            n.ancestors = true;
        } else if subr == Subr::DPath as u16 {
            n.d_path(stack.first());
        } else if let Some((at, size)) = subr_bytes(subr, stack) {
            // The address's bytes, which the subroutine reads from kernel memory (as a load
            // reads them: a probe argument's too).
            if let Value::Addr(e) = at {
                n.kernel_copy(e, MemKind::KernelBytes, size);
            }
        } else if subr == Subr::Bcopy as u16 {
            // bcopy(src, dst, size): `size` bytes of kernel memory at `src` (a constant size
            // the capture can hold).
            if let (Some(Value::Addr(e)), Some(Value::Const(size))) = (stack.first(), stack.get(2))
            {
                if (1..=u64::from(MAX_COPY_SIZE)).contains(size) {
                    n.kernel_copy(e, MemKind::KernelBytes, *size as u32);
                }
            }
        } else if subr == Subr::Strtok as u16 {
            // strtok(s, d) reads the string at `s`, a pointer too (`(char *)p`, pushed by
            // value: a string pushed by reference was asked for at its push).
            if let Some(v) = stack.first() {
                note_string_at_arg(n, v);
                if let Some(e) = kernel_addr(v) {
                    n.kernel_copy(e, MemKind::KernelString, self.strsize);
                }
            }
        } else if subr == Subr::Copyinstr as u16 {
            match user_addr {
                // copyinstr(addr, maxlen) copies at most strsize bytes either way, at most
                // maxlen characters when a probe argument gives it.
                Some(addr) => n.add_copy(sized_string(addr, stack.get(1), self.strsize)),
                None => n.any_string_arg = true,
            }
        } else if subr == Subr::Copyin as u16 || subr == Subr::Copyinto as u16 {
            match (user_addr, stack.get(1)) {
                (Some(addr), Some(Value::Const(size)))
                    if (1..=u64::from(MAX_COPY_SIZE)).contains(size) =>
                {
                    if subr == Subr::Copyin as u16 {
                        result = Value::Scratch(addr.clone());
                    }
                    n.add_copy(CopyRequest::new(addr, MemKind::UserBytes, *size as u32))
                }
                (Some(addr), Some(len)) => match sized_bytes(&addr, len, self.sized) {
                    Some(c) => {
                        if subr == Subr::Copyin as u16 {
                            result = Value::Scratch(addr);
                        }
                        n.add_copy(c)
                    }
                    None => n.unresolved_copyin = true,
                },
                _ => n.unresolved_copyin = true,
            }
        }
        result
    }
}

impl Visitor for ObjectScan<'_> {
    fn visit(&mut self, _pc: usize, ins: &Instr, s: &State) -> Option<Value> {
        let strsize = self.strsize;
        match *ins {
            Instr::Ret { rd } => {
                let t = self.obj.rtype;
                if t.flags & DIF_TF_BYREF != 0 {
                    if t.is_string() {
                        note_string_at_arg(self.n, &s.reg(rd));
                    }
                    if let Some(e) = kernel_addr(&s.reg(rd)) {
                        if t.is_string() {
                            self.n.kernel_copy(e, MemKind::KernelString, strsize);
                        } else {
                            self.n
                                .kernel_copy(e, MemKind::KernelBytes, t.size.min(MAX_COPY_SIZE));
                        }
                    }
                }
            }
            Instr::Load { op, r1, .. } => {
                if let (Some(size), Value::Addr(e)) = (kernel_load_size(op), s.reg(r1)) {
                    if mirror::is_mirror(&e) {
                        // Kernel memory at a mirrored address is not captured.
                        return Some(Value::Unknown);
                    }
                    self.n.kernel_copy(&e, MemKind::KernelBytes, size);
                }
            }
            Instr::LoadVar {
                op: Opcode::Ldgs,
                var,
                ..
            } => self.builtin(var),
            Instr::LoadVar {
                op: Opcode::Ldls,
                var,
                ..
            } => {
                return Some(
                    self.vars
                        .locals
                        .get(&var)
                        .cloned()
                        .unwrap_or(Value::Unknown),
                )
            }
            Instr::LoadVar {
                op: Opcode::Ldts,
                var,
                ..
            } => {
                let vars = &*self.vars;
                return Some(match (vars.stored.get(&var), vars.thread.get(&var)) {
                    (Some(v), _) if *v != Value::Unknown => v.clone(),
                    (_, Some(v)) => v.clone(),
                    _ if vars.mirrorable.contains(&var) => mirror::load(var),
                    _ => Value::Unknown,
                });
            }
            Instr::StoreVar { op, var, rs } => self.store(op, var, s.reg(rs)),
            Instr::LoadArray { var, r2, .. } => {
                if u32::from(var) == vars::DIF_VAR_UREGS {
                    self.n.uregs = true;
                }
                if u32::from(var) == vars::DIF_VAR_ARGS {
                    match s.reg(r2) {
                        Value::Const(i) if i < 10 => self.n.used_args |= 1 << i,
                        _ => self.n.used_args = ALL_ARGS,
                    }
                }
            }
            Instr::Scmp { r1, r2 } => {
                for r in [r1, r2] {
                    note_string_at_arg(self.n, &s.reg(r));
                    if let Some(e) = kernel_addr(&s.reg(r)) {
                        self.n.kernel_copy(e, MemKind::KernelString, strsize);
                    }
                }
            }
            Instr::Pushtr { ty, r2, rs } => {
                if ty == DIF_TYPE_STRING {
                    note_string_at_arg(self.n, &s.reg(rs));
                }
                if let Some(e) = kernel_addr(&s.reg(rs)) {
                    if ty == DIF_TYPE_STRING {
                        self.n.kernel_copy(e, MemKind::KernelString, strsize);
                    } else if let Value::Const(size) = s.reg(r2) {
                        self.n.kernel_copy(
                            e,
                            MemKind::KernelBytes,
                            size.min(u64::from(MAX_COPY_SIZE)) as u32,
                        );
                    }
                }
            }
            Instr::Copys { r1, r2, .. } => {
                if let (Some(e), Value::Const(size)) = (kernel_addr(&s.reg(r1)), s.reg(r2)) {
                    self.n.kernel_copy(
                        e,
                        MemKind::KernelBytes,
                        size.min(u64::from(MAX_COPY_SIZE)) as u32,
                    );
                }
            }
            Instr::Call { subr, .. } => return Some(self.call(subr, &s.stack)),
            _ => {}
        }
        None
    }
}

/// The user address of a `copyin`/`copyinstr` the probe can copy from: a probe argument plus a
/// constant (`arg1`, `arg1 + 8`), a user pointer read from the kernel (`curpsinfo->pr_argv`), or
/// one read from user memory a `copyin` of the same probe captured (`this->argv[1]`). Addresses
/// computed otherwise (`arg1 + arg2`) are not: they fall back on the string arguments or the
/// process's memory.
/// The argument a subroutine that shows memory as text reads its address from, and the bytes
/// it reads there: `inet_ntoa()`, `inet_ntoa6()`, `inet_ntop()` (16 when its family is not a
/// constant `AF_INET`), `uuidstr()`, `link_ntop()` (20 when its type is not a constant
/// `ARPHRD_ETHER`) and `memstr()` (`size - 1`, when `size` is a constant the capture can hold);
/// the lock queries read their lock's first word (`mutex_owned()`, `rw_read_held()`...).
fn subr_bytes(subr: u16, stack: &[Value]) -> Option<(&Value, u32)> {
    use dtrace_dif::vm::subr::{locks, AF_INET, ARPHRD_ETHER};
    let s = Subr::from_u16(subr)?;
    if let Some(n) = locks::word_bytes(s) {
        return Some((stack.first()?, n as u32));
    }
    let constant = |i: usize| match stack.get(i) {
        Some(Value::Const(v)) => Some(*v),
        _ => None,
    };
    match s {
        Subr::InetNtoa => Some((stack.first()?, 4)),
        Subr::InetNtoa6 | Subr::Uuidstr => Some((stack.first()?, 16)),
        Subr::InetNtop => Some((
            stack.get(1)?,
            if constant(0) == Some(AF_INET) { 4 } else { 16 },
        )),
        Subr::LinkNtop => Some((
            stack.get(1)?,
            if constant(0) == Some(ARPHRD_ETHER) {
                6
            } else {
                20
            },
        )),
        Subr::Memstr => match constant(2)? {
            n @ 2.. if n - 1 <= u64::from(MAX_COPY_SIZE) => Some((stack.first()?, (n - 1) as u32)),
            _ => None,
        },
        _ => None,
    }
}

fn user_addr(v: &Value) -> Option<AddrExpr> {
    match v {
        Value::Addr(e)
            if capturable(e)
                && (matches!(e.base, AddrBase::Arg(_) | AddrBase::ThreadVar(_))
                    || !e.derefs.is_empty()
                    || !e.user_derefs.is_empty()) =>
        {
            Some(e.clone())
        }
        _ => None,
    }
}

/// A probe argument a copy's length can come from: `(argument, most bytes)`.
fn length_arg(len: &Value) -> Option<(usize, u64)> {
    let (arg, max) = match len {
        Value::ArgAtMost { arg, max } => (*arg, *max),
        v => (v.plain_arg()?, u64::MAX),
    };
    (arg < crate::capture::layout::NARGS).then_some((arg, max))
}

/// `copyin(addr, len)` with a length known only at the probe: at most `most` bytes (the
/// program's `scratchsize`, see `policy::sized_copy_limit`; fewer when the length is limited by
/// a constant).
fn sized_bytes(addr: &AddrExpr, len: &Value, most: u32) -> Option<CopyRequest> {
    let (arg, max) = length_arg(len)?;
    let size = max.min(u64::from(most)) as u32;
    (size > 0).then(|| CopyRequest {
        addr: addr.clone(),
        kind: MemKind::UserBytes,
        size,
        size_arg: Some(arg),
    })
}

/// `copyinstr(addr)` or `copyinstr(addr, maxlen)`: a string's bytes (`strsize`, the storage), and
/// when a probe argument gives `maxlen`, no more bytes than it says, the NUL among them (the bytes
/// past a buffer that is not NUL-terminated may not be mapped).
fn sized_string(addr: AddrExpr, maxlen: Option<&Value>, strsize: u32) -> CopyRequest {
    let mut c = CopyRequest::new(addr, MemKind::UserString, strsize);
    if let Some((arg, max)) = maxlen.and_then(length_arg) {
        c.size = u64::from(strsize).min(max.max(1)) as u32;
        c.size_arg = Some(arg);
    }
    c
}
