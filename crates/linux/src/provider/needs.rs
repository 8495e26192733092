//! What a D program needs captured at each probe: the user memory its clauses read with `copyinstr`
//! and `copyin` (found by following probe arguments through the DIF registers to the subroutine
//! call; the length too when a probe argument gives it, and user pointers read from memory a
//! `copyin` of the same probe copied, as in execve's argv), the kernel memory they read through
//! `curthread` and probe arguments
//! (`curthread->real_parent->pid`, `args[0]->field`, the D library's `curpsinfo` translations:
//! chains of constant offsets and pointer loads, each step captured) and the stacks their
//! `stack()`/`ustack()` actions record, and the thread-locals whose addresses another probe copies
//! from (`self->buf = arg1` at `read:entry`, `copyin(self->buf, arg0)` at `read:return`: the
//! storing probe mirrors the address in the kernel, see `needs/mirror.rs`). The provider turns these into
//! one [`CaptureSpec`] per
//! enabled probe, the union over every clause enabled on it, with neighbouring kernel copies of one
//! object merged.

use crate::capture::spec::ArgIndex;
use crate::capture::spec::{
    MAX_COPIES, MAX_COPY_SIZE, MAX_DEREFS, MAX_STACK_DEPTH, MAX_USER_DEREFS, SIZED_COPY_CAP,
};
use crate::capture::{AddrBase, AddrExpr, CaptureSpec, CopyRequest, MemKind, MirrorOp};
use dtrace_dif::flow::{self, kernel_load_size, Limits, State, Value, Visitor};
use dtrace_dif::instr::Instr;
use dtrace_dif::object::{
    DifObject, DIFV_SCOPE_GLOBAL, DIFV_SCOPE_LOCAL, DIFV_SCOPE_THREAD, DIF_TF_BYREF,
    DIF_TYPE_STRING,
};
use dtrace_dif::opcode::Opcode;
use dtrace_dif::program::{ActionKind, ProbeDesc, Program};
use dtrace_dif::subr::Subr;
use dtrace_dif::vars;
use std::collections::{HashMap, HashSet};

/// Default `strsize` (characters of a string, its NUL not counted).
pub const DEFAULT_STRSIZE: u32 = 256;
/// Bytes of a string under the default `strsize`: its characters and the NUL.
pub const DEFAULT_STRING_STORAGE: u32 = DEFAULT_STRSIZE + 1;
/// Default `stackframes`.
pub const DEFAULT_STACKFRAMES: u32 = 20;
/// Default `ustackframes`.
pub const DEFAULT_USTACKFRAMES: u32 = 100;

/// What one clause needs captured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClauseNeeds {
    /// Copies of memory addressed by a probe argument.
    pub copies: Vec<CopyRequest>,
    /// The clause calls `copyinstr` on something other than a plain argument: capture every
    /// string-pointer argument of the probe.
    pub any_string_arg: bool,
    /// The clause calls `copyin` with an address or a length the probe cannot compute (`arg1 +
    /// arg2`, `arg2 * 2`): it is served from the process's memory at delivery (see
    /// `deliver::EventMemory`).
    pub unresolved_copyin: bool,
    /// Kernel stack frames.
    pub kstack: Option<u32>,
    /// User stack frames.
    pub ustack: Option<u32>,
    /// Probe arguments the clause reads (bit n: `argN`/`args[N]`; all when an index is computed).
    pub used_args: u16,
    /// The clause's predicate is exactly `pid == N` (or `N == pid`): the probe may be filtered in the
    /// kernel when every clause on it has the same filter.
    pub filter_pid: Option<u32>,
    /// A read the capture cannot make (why, in a "not yet supported" message): enabling the
    /// probe fails with it.
    pub unsupported: Option<String>,
    /// The clause reads `caller` (the kernel stack's first frames are captured).
    pub caller: bool,
    /// The clause reads `ucaller` (the user stack's first frames are captured).
    pub ucaller: bool,
    /// The clause reads `execargs` (the process's argument area is captured).
    pub execargs: bool,
    /// The clause reads `uregs[]` (the thread's saved user registers are captured).
    pub uregs: bool,
    /// The clause calls `progenyof()` (the task's ancestors are captured).
    pub ancestors: bool,
    /// Thread-local variables the clause stores whose addresses other probes copy from (see
    /// `needs/mirror.rs`), in the order it stores them.
    pub mirror: Vec<MirrorOp>,
    /// The `struct path` addresses the clause calls `d_path()` on (`cwd`, `root`, `fi_pathname`):
    /// their paths are walked at the probe.
    pub paths: Vec<AddrExpr>,
    /// The clause reads `vtimestamp` (computed exactly at the probe, see [`crate::vtime`]).
    pub vtimestamp: bool,
    /// The clause's predicate, for the kernel to evaluate before capturing (see
    /// [`crate::capture::filter`]); `None` for a clause without one.
    pub predicate: Option<DifObject>,
}

/// Kernel frames captured for `caller`: enough to pass the tracing functions above the probe site.
pub const CALLER_FRAMES: u32 = crate::capture::spec::TRACING_FRAMES;
/// User frames captured for `ucaller`: the PC and its caller.
pub const UCALLER_FRAMES: u32 = 2;

impl ClauseNeeds {
    fn add_copy(&mut self, c: CopyRequest) {
        if !self.copies.contains(&c) {
            self.copies.push(c);
        }
    }
}

/// The needs of every clause of a program, with the probe description each applies to.
#[derive(Clone, Debug, Default)]
pub struct ProgramNeeds {
    /// `(description, needs)` per ECB description.
    pub clauses: Vec<(ProbeDesc, ClauseNeeds)>,
}

/// Bytes of a string in a program (its `strsize` pragma, else the default, and the NUL): what the
/// interpreter keeps of one and the most a string copy takes.
fn strsize_of(program: &Program) -> u32 {
    program
        .options
        .iter()
        .rev()
        .find(|(n, _)| n == "strsize")
        .and_then(|(_, v)| v.as_deref())
        .and_then(dtrace_dif::optval::parse_size)
        .map(|s| s.saturating_add(1).clamp(2, u64::from(MAX_COPY_SIZE)) as u32)
        .unwrap_or(DEFAULT_STRING_STORAGE)
}

/// Analyses every clause of `program`.
pub fn program_needs(program: &Program) -> ProgramNeeds {
    program_needs_in(program, &MirrorContext::default())
}

/// What the other programs of one consumer do with thread-locals, which they share with it (`dtrace
/// -n 'read:entry { self->buf = arg1; }' -n 'read:return { ... copyin(self->buf, arg0) ... }'`):
/// the variables they store from probe-computable addresses and those they copy from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MirrorContext {
    /// Variables some program stores from an address its probe computes.
    pub sources: HashSet<u16>,
    /// Variables some program copies from.
    pub loaded: HashSet<u32>,
}

/// The mirror context of `programs` together (see [`program_needs_in`]).
pub fn mirror_context(programs: &[&Program]) -> MirrorContext {
    let mut ctx = MirrorContext::default();
    for p in programs {
        ctx.sources.extend(mirror_sources(p, strsize_of(p)));
    }
    for p in programs {
        let n = program_needs_in(p, &ctx);
        ctx.loaded.extend(n.clauses.iter().flat_map(|(_, c)| {
            c.copies.iter().filter_map(|r| match r.addr.base {
                AddrBase::ThreadVar(v) => Some(v),
                _ => None,
            })
        }));
    }
    ctx
}

/// The first pass over `program`: what its clauses store in thread-local variables.
fn scan_stores(program: &Program, strsize: u32) -> ScanVars {
    let mut first = ScanVars::default();
    for e in &program.ecbs {
        first.locals.clear();
        first.stored.clear();
        for obj in e
            .predicate
            .iter()
            .chain(e.actions.iter().filter_map(|a| a.difo.as_ref()))
        {
            scan_object(obj, strsize, &mut ClauseNeeds::default(), &mut first);
        }
    }
    first
}

/// The thread-locals `program` stores from probe-computable addresses.
fn mirror_sources(program: &Program, strsize: u32) -> HashSet<u16> {
    scan_stores(program, strsize).mirror_sources
}

/// Analyses every clause of `program`, one of several programs sharing thread-locals whose mirror
/// needs `ctx` gives (from [`mirror_context`]).
pub fn program_needs_in(program: &Program, ctx: &MirrorContext) -> ProgramNeeds {
    let strsize = strsize_of(program);
    let mut out = ProgramNeeds::default();
    // First pass: what the program stores in its thread-local variables.
    let mut first = scan_stores(program, strsize);
    let mut mirrorable = std::mem::take(&mut first.mirror_sources);
    mirrorable.extend(ctx.sources.iter().copied());
    let thread: HashMap<u16, Value> = first
        .thread_stores
        .into_iter()
        .filter(|(_, v)| *v != Value::Unknown)
        .collect();
    for e in &program.ecbs {
        let mut n = ClauseNeeds {
            filter_pid: e.predicate.as_ref().and_then(pid_equality),
            predicate: e.predicate.clone(),
            ..ClauseNeeds::default()
        };
        let mut vars = ScanVars {
            thread: thread.clone(),
            mirrorable: mirrorable.clone(),
            ..ScanVars::default()
        };
        for obj in e
            .predicate
            .iter()
            .chain(e.actions.iter().filter_map(|a| a.difo.as_ref()))
        {
            scan_object(obj, strsize, &mut n, &mut vars);
        }
        for a in &e.actions {
            match a.kind {
                ActionKind::Stack => {
                    let frames = if a.arg == 0 {
                        DEFAULT_STACKFRAMES
                    } else {
                        a.arg as u32
                    };
                    // The tracing machinery's frames are cut at delivery: `frames` remain.
                    let room = crate::capture::spec::kernel_stack_room(frames);
                    n.kstack = Some(n.kstack.unwrap_or(0).max(room));
                }
                ActionKind::Ustack | ActionKind::Jstack => {
                    let frames = match (a.arg & 0xffff_ffff) as u32 {
                        0 => DEFAULT_USTACKFRAMES,
                        f => f,
                    };
                    n.ustack = Some(n.ustack.unwrap_or(0).max(frames.min(MAX_STACK_DEPTH)));
                }
                _ => {}
            }
        }
        out.clauses.push((e.probe.clone(), n));
    }
    mirror::keep_loaded(&mut out.clauses, &ctx.loaded);
    out
}

/// The pid `N` of a predicate that is exactly `pid == N` or `N == pid`, as the compiler emits it:
/// the two loads, `cmp`, `be` to the true arm, `mov %r0` / `ba` to the end, `setx` of a non-zero
/// constant, `ret`. Anything else is not recognised (the predicate then only runs in the framework,
/// which it does in every case: the kernel filter is an optimisation, never the only test).
fn pid_equality(obj: &DifObject) -> Option<u32> {
    let ins: Vec<Instr> = obj
        .text
        .iter()
        .map(|w| Instr::decode(*w).ok())
        .collect::<Option<_>>()?;
    let [a, b, Instr::Cmp { r1, r2 }, Instr::Branch {
        op: Opcode::Be,
        label: 6,
    }, Instr::Mov { r1: 0, rd: f }, Instr::Branch {
        op: Opcode::Ba,
        label: 7,
    }, Instr::Setx { idx: t, rd: tr }, Instr::Ret { rd }] = ins.as_slice()
    else {
        return None;
    };
    if f != tr || tr != rd || obj.inttab.get(*t as usize).copied().unwrap_or(0) == 0 {
        return None;
    }
    let load = |i: &Instr| match *i {
        Instr::LoadVar {
            op: Opcode::Ldgs,
            var,
            rd,
        } if u32::from(var) == vars::DIF_VAR_PID => Some((rd, None)),
        Instr::Setx { idx, rd } => Some((rd, Some(*obj.inttab.get(idx as usize)?))),
        _ => None,
    };
    let (ra, va) = load(a)?;
    let (rb, vb) = load(b)?;
    if ra == 0
        || rb == 0
        || ra == rb
        || !matches!((r1, r2), (x, y) if (*x, *y) == (ra, rb) || (*x, *y) == (rb, ra))
    {
        return None;
    }
    let pid = match (va, vb) {
        (None, Some(v)) | (Some(v), None) => v,
        _ => return None,
    };
    u32::try_from(pid).ok().filter(|p| *p > 0)
}

/// `used_args` when an `args[]` index is computed.
pub const ALL_ARGS: u16 = 0x3ff;

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
}

impl ClauseNeeds {
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
struct ScanVars {
    locals: HashMap<u16, Value>,
    /// Thread-local values known at loads (from a first pass over the program).
    thread: HashMap<u16, Value>,
    /// What the stores of each thread-local store (`Unknown`: not one `curthread` computation).
    thread_stores: HashMap<u16, Value>,
    /// Thread-locals some store sets to an address a probe can compute (filled by the first pass).
    mirror_sources: HashSet<u16>,
    /// Those of the first pass: their loads are mirror addresses ([`AddrBase::ThreadVar`]).
    mirrorable: HashSet<u16>,
    /// What the clause itself stored in thread-locals so far: a later load in the clause reads it
    /// (`self->b = arg1; copyinstr(self->b)` copies from arg1, not from the mirror).
    stored: HashMap<u16, Value>,
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
fn scan_object(obj: &DifObject, strsize: u32, n: &mut ClauseNeeds, vars: &mut ScanVars) {
    let limits = Limits {
        user_hops: MAX_USER_DEREFS,
    };
    flow::walk(
        obj,
        limits,
        &mut ObjectScan {
            obj,
            strsize,
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
        } else if var == vars::DIF_VAR_EXECARGS {
            n.execargs = true;
        } else if var == vars::DIF_VAR_STACKDEPTH {
            // The depth of the whole stack, not of what a stack() action would print.
            n.kstack = Some(MAX_STACK_DEPTH);
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
                (Some(addr), Some(len)) => match sized_bytes(&addr, len) {
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
                    if let Some(e) = kernel_addr(&s.reg(r)) {
                        self.n.kernel_copy(e, MemKind::KernelString, strsize);
                    }
                }
            }
            Instr::Pushtr { ty, r2, rs } => {
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

/// `copyin(addr, len)` with a length known only at the probe: at most [`SIZED_COPY_CAP`] bytes
/// (fewer when the length is limited by a constant).
fn sized_bytes(addr: &AddrExpr, len: &Value) -> Option<CopyRequest> {
    let (arg, max) = length_arg(len)?;
    let size = max.min(u64::from(SIZED_COPY_CAP)) as u32;
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

/// Kernel copies closer than this many bytes to each other in one object are made as one.
const MERGE_GAP: i64 = 256;

/// One object kernel copies are read from: the base, and when the copy follows pointers, the offset
/// and every hop but the last; and the argument index on the way, if any.
type ObjectKey = (AddrBase, Option<i32>, Vec<i32>, Option<ArgIndex>);

/// The object a kernel copy reads (its base and every pointer hop but the last) and where in it the
/// copy starts; `None` for copies that are not merged (user memory, strings, tracepoint records).
fn copy_object(c: &CopyRequest) -> Option<(ObjectKey, i64)> {
    if c.kind != MemKind::KernelBytes
        || !matches!(c.addr.base, AddrBase::CurrentTask | AddrBase::Arg(_))
    {
        return None;
    }
    let a = &c.addr;
    Some(match a.derefs.split_last() {
        None => ((a.base, None, Vec::new(), a.index), i64::from(a.offset)),
        Some((last, rest)) => (
            (a.base, Some(a.offset), rest.to_vec(), a.index),
            i64::from(*last),
        ),
    })
}

/// Merges the kernel copies of one object that overlap or lie close together (then, while there
/// are more than [`MAX_COPIES`], the closest remaining ones) into single copies, so that
/// `curthread->pid`, `curthread->real_parent` and `curthread->comm` cost one read, and a load the
/// interpreter makes finds its bytes in one captured range. Other copies keep their order, first.
fn merge_kernel_copies(copies: Vec<CopyRequest>) -> Vec<CopyRequest> {
    let mut out = Vec::new();
    let mut groups: Vec<(ObjectKey, Vec<(i64, i64)>)> = Vec::new();
    for c in copies {
        match copy_object(&c) {
            Some((key, start)) => {
                let r = (start, start + i64::from(c.size));
                match groups.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, rs)) => rs.push(r),
                    None => groups.push((key, vec![r])),
                }
            }
            None => out.push(c),
        }
    }
    let fits = |a: (i64, i64), b: (i64, i64)| b.1.max(a.1) - a.0 <= i64::from(MAX_COPY_SIZE);
    for (_, rs) in &mut groups {
        rs.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::new();
        for &r in rs.iter() {
            match merged.last_mut() {
                Some(m) if r.0 <= m.1 + MERGE_GAP && fits(*m, r) => m.1 = m.1.max(r.1),
                _ => merged.push(r),
            }
        }
        *rs = merged;
    }
    // Still too many: join the closest neighbours while the result stays a legal copy.
    while out.len() + groups.iter().map(|(_, r)| r.len()).sum::<usize>() > MAX_COPIES {
        let best = groups
            .iter()
            .enumerate()
            .flat_map(|(g, (_, rs))| {
                rs.windows(2)
                    .enumerate()
                    .filter(|(_, w)| fits(w[0], w[1]))
                    .map(move |(i, w)| (w[1].0 - w[0].1, g, i))
            })
            .min();
        let Some((_, g, i)) = best else { break };
        let rs = &mut groups[g].1;
        rs[i].1 = rs[i].1.max(rs[i + 1].1);
        rs.remove(i + 1);
    }
    for ((base, offset, hops, index), rs) in groups {
        for (start, end) in rs {
            // Starts and sizes came from i32 offsets and legal sizes.
            let start = i32::try_from(start).unwrap_or(i32::MAX);
            let addr = match offset {
                None => AddrExpr::kernel(base, start, Vec::new()),
                Some(offset) => {
                    let mut derefs = hops.clone();
                    derefs.push(start);
                    AddrExpr::kernel(base, offset, derefs)
                }
            };
            let addr = AddrExpr { index, ..addr };
            out.push(CopyRequest::new(
                addr,
                MemKind::KernelBytes,
                u32::try_from(end - i64::from(start)).unwrap_or(MAX_COPY_SIZE),
            ));
        }
    }
    out
}

/// Merges the needs of the clauses matching a probe into one capture spec. `string_args` are the
/// probe's arguments that are user string pointers (used when a clause's `copyinstr` address could
/// not be resolved to one argument).
pub fn spec_for(
    clauses: &[&ClauseNeeds],
    string_args: &[usize],
    strsize: u32,
) -> Result<CaptureSpec, String> {
    let mut spec = CaptureSpec::new();
    let push = |spec: &mut CaptureSpec, c: CopyRequest| {
        if let Some(old) = spec
            .copies
            .iter_mut()
            .find(|o| o.addr == c.addr && o.kind == c.kind && o.size_arg == c.size_arg)
        {
            old.size = old.size.max(c.size);
        } else {
            spec.copies.push(c);
        }
    };
    let first_pid = clauses.first().and_then(|n| n.filter_pid);
    if clauses.iter().all(|n| n.filter_pid == first_pid) {
        spec.filter_pid = first_pid;
    }
    // Every clause has a predicate: the probe records only when one of them holds.
    let predicates: Option<Vec<DifObject>> = clauses.iter().map(|n| n.predicate.clone()).collect();
    if let Some(predicates) = predicates.filter(|p| !p.is_empty()) {
        spec.filter = Some(crate::capture::KernelFilter {
            predicates,
            strsize,
            ..Default::default()
        });
    }
    // Addresses earlier clauses of the probe store in thread-locals: a later clause's copy of one
    // is made from the address itself (the eBPF runs every clause's store, predicate or not).
    let mut stored_before = HashMap::new();
    for n in clauses {
        for c in &n.copies {
            push(&mut spec, mirror::resolve_stored(&stored_before, c));
        }
        mirror::note_stores(&mut stored_before, n);
        if n.any_string_arg {
            for &a in string_args {
                push(
                    &mut spec,
                    CopyRequest::new(AddrExpr::arg(a), MemKind::UserString, strsize),
                );
            }
        }
        spec.kstack = spec.kstack.max(n.kstack);
        spec.ustack = spec.ustack.max(n.ustack);
        if n.caller {
            spec.kstack = spec.kstack.max(Some(CALLER_FRAMES));
        }
        if n.ucaller {
            spec.ustack = spec.ustack.max(Some(UCALLER_FRAMES));
        }
        if n.execargs {
            spec.execargs = Some(strsize.clamp(1, MAX_COPY_SIZE));
        }
        spec.uregs |= n.uregs;
        spec.ancestors |= n.ancestors;
        mirror::merge_ops(&mut spec.mirror, &n.mirror);
        for p in &n.paths {
            if !spec.paths.contains(p) {
                spec.paths.push(p.clone());
            }
        }
        spec.exact_vtime |= n.vtimestamp;
        if let Some(why) = &n.unsupported {
            return Err(why.clone());
        }
    }
    if spec.paths.len() > crate::capture::path::MAX_PATHS {
        return Err(format!(
            "not yet supported: more than {} d_path() paths at one probe",
            crate::capture::path::MAX_PATHS
        ));
    }
    spec.copies = merge_kernel_copies(std::mem::take(&mut spec.copies));
    if spec.copies.len() > MAX_COPIES {
        return Err(format!(
            "not yet supported: more than {} distinct memory copies at one probe",
            MAX_COPIES
        ));
    }
    Ok(spec)
}

/// The `strsize` the needs were computed with (for [`spec_for`]).
pub fn program_strsize(program: &Program) -> u32 {
    strsize_of(program)
}

/// Fuzz entry point: a clause built from arbitrary bytes (first byte: action kind and argument;
/// then 8-byte integer-table entries up to a count given by the second byte; the rest instruction
/// words) is analysed and merged; nothing may panic and the spec must stay within the capture limits.
pub fn fuzz_entry(data: &[u8]) {
    let (Some(&head), Some(&nint)) = (data.first(), data.get(1)) else {
        return;
    };
    let rest = &data[2..];
    let nint = (usize::from(nint) % 8).min(rest.len() / 8);
    let inttab: Vec<u64> = rest[..nint * 8]
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect();
    let text: Vec<u32> = rest[nint * 8..]
        .chunks_exact(4)
        .take(4096)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap_or([0; 4])))
        .collect();
    let obj = DifObject {
        text,
        inttab,
        ..DifObject::default()
    };
    let kind = match head % 3 {
        0 => ActionKind::Stack,
        1 => ActionKind::Ustack,
        _ => ActionKind::DifExpr,
    };
    let action = dtrace_dif::program::ActionDesc {
        kind,
        difo: Some(obj.clone()),
        arg: u64::from(head) << 24,
        uarg: 0,
        ntuple: 0,
    };
    let p = Program {
        ecbs: vec![dtrace_dif::program::EcbDesc {
            probe: ProbeDesc::default(),
            predicate: Some(obj),
            actions: vec![action],
            line: 0,
        }],
        ..Program::default()
    };
    let n = program_needs(&p);
    for (_, c) in &n.clauses {
        assert!(c
            .copies
            .iter()
            .all(|c| (1..=MAX_COPY_SIZE).contains(&c.size)));
        assert!(
            c.kstack.unwrap_or(0) <= MAX_STACK_DEPTH && c.ustack.unwrap_or(0) <= MAX_STACK_DEPTH
        );
        if let Ok(spec) = spec_for(&[c], &[0, 1, 2], DEFAULT_STRING_STORAGE) {
            assert!(spec.copies.len() <= MAX_COPIES);
            // Every copy asked for is one the capture can make.
            assert!(spec.copies.iter().all(|c| c.addr.derefs.len() <= MAX_DEREFS
                && c.addr.user_derefs.len() <= MAX_USER_DEREFS
                && !matches!(c.addr.base, AddrBase::Arg(n) if n >= crate::capture::layout::NARGS)));
            let _ = crate::capture::RecordLayout::for_spec(&spec, "fuzz");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs(src: &str) -> ProgramNeeds {
        let p = dtrace_compiler::compile(src, &dtrace_compiler::CompileOptions::default())
            .unwrap_or_else(|e| panic!("{e:?}"));
        program_needs(&p)
    }

    #[test]
    fn copyinstr_of_an_argument_is_found() {
        let n = needs(r#"syscall::openat:entry { printf("%s", copyinstr(arg1)); }"#);
        assert_eq!(n.clauses.len(), 1);
        assert_eq!(n.clauses[0].0.function, "openat");
        let c = &n.clauses[0].1;
        assert!(!c.any_string_arg);
        assert_eq!(
            c.copies,
            vec![CopyRequest::new(
                AddrExpr::arg(1),
                MemKind::UserString,
                DEFAULT_STRING_STORAGE
            )]
        );
    }

    #[test]
    fn args_array_and_copyin_with_constant_size() {
        let n = needs(
            r#"syscall::write:entry { trace(copyinstr(args[1])); tracemem(copyin(arg1, 16), 16); }"#,
        );
        let c = &n.clauses[0].1;
        assert!(c
            .copies
            .iter()
            .any(|c| c.addr == AddrExpr::arg(1) && c.kind == MemKind::UserBytes && c.size == 16));
        assert!(!c.unresolved_copyin);
    }

    #[test]
    fn computed_addresses_fall_back() {
        let n = needs(r#"syscall::write:entry { trace(copyinstr(arg1 + arg2)); }"#);
        assert!(n.clauses[0].1.any_string_arg);
        let spec = spec_for(&[&n.clauses[0].1], &[1], 64).unwrap();
        assert_eq!(spec.copies.len(), 1);
        assert_eq!(spec.copies[0].size, 64);
        let n = needs(r#"syscall::write:entry { trace(*(int *)copyin(arg1 + arg2, 4)); }"#);
        assert!(n.clauses[0].1.unresolved_copyin);
        assert!(spec_for(&[&n.clauses[0].1], &[], 64)
            .unwrap()
            .copies
            .is_empty());
    }

    #[test]
    fn stacks_and_union() {
        let n = needs(
            r#"syscall::read:entry { stack(); } syscall::read:entry { ustack(5); trace(copyinstr(arg0)); }"#,
        );
        let all: Vec<&ClauseNeeds> = n.clauses.iter().map(|(_, c)| c).collect();
        let spec = spec_for(&all, &[], DEFAULT_STRING_STORAGE).unwrap();
        // The tracing machinery's frames, cut at delivery, are taken beyond those shown.
        assert_eq!(spec.kstack, Some(DEFAULT_STACKFRAMES + CALLER_FRAMES));
        assert_eq!(spec.ustack, Some(5));
        assert_eq!(spec.copies.len(), 1);
        assert!(spec.retry_at_return);
    }

    #[test]
    fn no_needs_for_counting() {
        let n = needs("syscall::write:entry /execname == \"sh\"/ { @c = count(); }");
        let c = &n.clauses[0].1;
        // Nothing to capture; the predicate goes to the kernel filter.
        assert!(c.predicate.is_some());
        assert_eq!(
            ClauseNeeds {
                predicate: None,
                ..c.clone()
            },
            ClauseNeeds::default()
        );
    }

    #[test]
    fn a_probe_is_filtered_when_every_clause_has_a_predicate() {
        let two = needs(
            "syscall::write:entry /pid == 1/ { @a = count(); } \
             syscall::write:entry /execname == \"sh\"/ { @b = count(); }",
        );
        let all: Vec<&ClauseNeeds> = two.clauses.iter().map(|(_, n)| n).collect();
        let spec = spec_for(&all, &[], 64).unwrap();
        let f = spec.filter.expect("a kernel filter");
        assert_eq!(f.predicates.len(), 2);
        assert_eq!(f.strsize, 64);
        let mixed = needs(
            "syscall::write:entry /pid == 1/ { @a = count(); } syscall::write:entry { @b = count(); }",
        );
        let all: Vec<&ClauseNeeds> = mixed.clauses.iter().map(|(_, n)| n).collect();
        assert_eq!(spec_for(&all, &[], 64).unwrap().filter, None);
    }

    #[test]
    fn pid_predicates_filter_in_the_kernel() {
        let pid = |src: &str| needs(src).clauses[0].1.filter_pid;
        assert_eq!(
            pid("syscall::write:entry /pid == 1234/ { @c = count(); }"),
            Some(1234)
        );
        assert_eq!(
            pid("syscall::write:entry /1234 == pid/ { @c = count(); }"),
            Some(1234)
        );
        assert_eq!(
            pid("syscall::write:entry /pid != 1234/ { @c = count(); }"),
            None
        );
        assert_eq!(
            pid("syscall::write:entry /tid == 1234/ { @c = count(); }"),
            None
        );
        assert_eq!(
            pid("syscall::write:entry /pid == 1234 && arg0 == 1/ { @c = count(); }"),
            None
        );
        assert_eq!(
            pid("syscall::write:entry /pid == 0/ { @c = count(); }"),
            None
        );
        assert_eq!(
            pid("syscall::write:entry /pid == 5000000000/ { @c = count(); }"),
            None
        );
        assert_eq!(pid("syscall::write:entry { @c = count(); }"), None);
        // The union: one filter only when every clause on the probe has the same one.
        let n = needs(
            "syscall::write:entry /pid == 7/ { @c = count(); } syscall::write:entry /pid == 7/ { trace(1); }",
        );
        let all: Vec<&ClauseNeeds> = n.clauses.iter().map(|(_, c)| c).collect();
        assert_eq!(spec_for(&all, &[], 256).unwrap().filter_pid, Some(7));
        let n = needs(
            "syscall::write:entry /pid == 7/ { @c = count(); } syscall::write:entry { trace(1); }",
        );
        let all: Vec<&ClauseNeeds> = n.clauses.iter().map(|(_, c)| c).collect();
        assert_eq!(spec_for(&all, &[], 256).unwrap().filter_pid, None);
    }

    #[test]
    fn target_predicates_filter_in_the_kernel() {
        let opts = dtrace_compiler::CompileOptions {
            macros: vec![("target".into(), "4321".into())],
            ..dtrace_compiler::CompileOptions::default()
        };
        let p = dtrace_compiler::compile(
            "syscall::write:entry /pid == $target/ { @c = count(); }",
            &opts,
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(program_needs(&p).clauses[0].1.filter_pid, Some(4321));
    }

    #[test]
    fn used_arguments() {
        let used = |src: &str| needs(src).clauses[0].1.used_args;
        assert_eq!(used("sdt:::x { trace(arg2); }"), 1 << 2);
        assert_eq!(used("sdt:::x /args[0] == 1/ { trace(args[3]); }"), 0b1001);
        assert_eq!(used("sdt:::x { trace(args[arg1]); }"), ALL_ARGS);
        assert_eq!(used("sdt:::x { trace(pid); }"), 0);
    }

    const FOO: &str = "struct foo { int a; long b; struct foo *next; char name[16]; };";

    fn kcopy(base: AddrBase, offset: i32, derefs: &[i32], kind: MemKind, size: u32) -> CopyRequest {
        CopyRequest::new(AddrExpr::kernel(base, offset, derefs.to_vec()), kind, size)
    }

    #[test]
    fn kernel_chains_through_arguments_ask_for_each_step() {
        let n = needs(&format!(
            "{FOO} sdt:::x {{ trace(((struct foo *)arg0)->next->a); trace(((struct foo *)args[1])->b); trace(args[2]); }}"
        ));
        let c = &n.clauses[0].1;
        let bytes = MemKind::KernelBytes;
        // The pointer `next` (8 bytes at 16), then `a` (4 bytes at 0 of what it points at).
        assert!(
            c.copies
                .contains(&kcopy(AddrBase::Arg(0), 16, &[], bytes, 8)),
            "{c:?}"
        );
        assert!(
            c.copies
                .contains(&kcopy(AddrBase::Arg(0), 16, &[0], bytes, 4)),
            "{c:?}"
        );
        assert!(
            c.copies
                .contains(&kcopy(AddrBase::Arg(1), 8, &[], bytes, 8)),
            "{c:?}"
        );
        // Arguments only traced are not memory.
        assert_eq!(c.copies.len(), 3, "{c:?}");
        assert_eq!(c.used_args, 0b111);
        assert!(c.unsupported.is_none());
    }

    #[test]
    fn kernel_chains_from_curthread_merge_per_object() {
        let n = needs(&format!(
            "{FOO} sdt:::x /((struct foo *)curthread)->a == 1/ {{ trace(((struct foo *)curthread)->b);
               trace(stringof(((struct foo *)curthread)->name)); trace(((struct foo *)curthread)->name[3]);
               trace(((struct foo *)curthread)->next->next->b); }}"
        ));
        let c = &n.clauses[0].1;
        let (bytes, string) = (MemKind::KernelBytes, MemKind::KernelString);
        let task = AddrBase::CurrentTask;
        for want in [
            kcopy(task, 0, &[], bytes, 4),
            kcopy(task, 8, &[], bytes, 8),
            kcopy(task, 24, &[], string, DEFAULT_STRING_STORAGE),
            kcopy(task, 27, &[], bytes, 1),
            kcopy(task, 16, &[], bytes, 8),
            kcopy(task, 16, &[16], bytes, 8),
            kcopy(task, 16, &[16, 8], bytes, 8),
        ] {
            assert!(c.copies.contains(&want), "{want:?} not in {:?}", c.copies);
        }
        let spec = spec_for(&[c], &[], DEFAULT_STRING_STORAGE).unwrap();
        // The task's own fields in one copy, bytes 0..28; the string apart; one copy per hop.
        assert!(
            spec.copies.contains(&kcopy(task, 0, &[], bytes, 28)),
            "{:?}",
            spec.copies
        );
        assert!(spec
            .copies
            .contains(&kcopy(task, 24, &[], string, DEFAULT_STRING_STORAGE)));
        assert!(spec.copies.contains(&kcopy(task, 16, &[16], bytes, 8)));
        assert!(spec.copies.contains(&kcopy(task, 16, &[16, 8], bytes, 8)));
        assert_eq!(spec.copies.len(), 4, "{:?}", spec.copies);
    }

    #[test]
    fn clause_locals_carry_chains() {
        let n = needs(&format!(
            "{FOO} sdt:::x {{ this->t = (struct foo *)curthread; }} sdt:::x {{ this->t = (struct foo *)curthread; trace(this->t->next->a); }}"
        ));
        let c = &n.clauses[1].1;
        assert!(
            c.copies.contains(&kcopy(
                AddrBase::CurrentTask,
                16,
                &[0],
                MemKind::KernelBytes,
                4
            )),
            "{c:?}"
        );
        assert!(n.clauses[0].1.copies.is_empty());
    }

    #[test]
    fn thread_locals_holding_curthread_chains() {
        // Every store of self->t is curthread (or a clear): its reads are captured where they are.
        let n = needs(&format!(
            "{FOO} sdt:::a {{ self->t = (struct foo *)curthread; self->p = (struct foo *)arg0; }}
             sdt:::b /self->t/ {{ trace(self->t->next->a); trace(self->p->a); self->t = 0; }}"
        ));
        let c = &n.clauses[1].1;
        assert!(
            c.copies.contains(&kcopy(
                AddrBase::CurrentTask,
                16,
                &[0],
                MemKind::KernelBytes,
                4
            )),
            "{c:?}"
        );
        // self->p came from another probe's argument: not known at b.
        assert_eq!(c.copies.len(), 2, "{c:?}");
        // Two different stores: not followed.
        let n = needs(&format!(
            "{FOO} sdt:::a {{ self->t = (struct foo *)curthread; }}
             sdt:::c {{ self->t = ((struct foo *)curthread)->next; }}
             sdt:::b {{ trace(self->t->a); }}"
        ));
        assert!(n.clauses[2].1.copies.is_empty(), "{:?}", n.clauses[2].1);
    }

    #[test]
    fn strings_of_plain_arguments_and_user_pointers() {
        // A plain argument used as a string is a tracepoint array delivered as its capture's address:
        // nothing to ask for.
        let n = needs("sdt:::x { trace(stringof(args[0])); }");
        assert!(n.clauses[0].1.copies.is_empty());
        // A user pointer read from the kernel: a user string at the end of the chain.
        let n = needs(&format!(
            "{FOO} sdt:::x {{ trace(copyinstr(((struct foo *)curthread)->next->b)); }}"
        ));
        let c = &n.clauses[0].1;
        assert!(!c.any_string_arg);
        assert!(c.copies.contains(&kcopy(
            AddrBase::CurrentTask,
            16,
            &[8, 0],
            MemKind::UserString,
            DEFAULT_STRING_STORAGE
        )));
        let n = needs(&format!(
            "{FOO} sdt:::x {{ tracemem(copyin(((struct foo *)curthread)->next->b, 80), 80); }}"
        ));
        let c = &n.clauses[0].1;
        assert!(!c.unresolved_copyin);
        assert!(c.copies.contains(&kcopy(
            AddrBase::CurrentTask,
            16,
            &[8, 0],
            MemKind::UserBytes,
            80
        )));
    }

    #[test]
    fn both_arms_of_a_conditional_chain() {
        // The NULL arm of the ternary does not hide the chain of the other arm.
        let n = needs(&format!(
            "{FOO} sdt:::x {{ this->f = (struct foo *)curthread;
               trace(copyinstr(this->f->next ? this->f->next->b : 0));
               trace(this->f->a > 0 ? this->f->next->a : this->f->next->next->a); }}"
        ));
        let c = &n.clauses[0].1;
        let task = AddrBase::CurrentTask;
        for want in [
            kcopy(
                task,
                16,
                &[8, 0],
                MemKind::UserString,
                DEFAULT_STRING_STORAGE,
            ),
            kcopy(task, 16, &[0], MemKind::KernelBytes, 4),
            kcopy(task, 16, &[16, 0], MemKind::KernelBytes, 4),
        ] {
            assert!(c.copies.contains(&want), "{want:?} not in {:?}", c.copies);
        }
        assert!(!c.any_string_arg);
    }

    #[test]
    fn chains_past_the_hop_limit_are_refused() {
        let deep = format!(
            "((struct foo *)curthread){}->a",
            "->next".repeat(MAX_DEREFS + 1)
        );
        let n = needs(&format!("{FOO} sdt:::x {{ trace({deep}); }}"));
        let c = &n.clauses[0].1;
        let e = spec_for(&[c], &[], DEFAULT_STRING_STORAGE).unwrap_err();
        assert!(e.starts_with("not yet supported:"), "{e}");
        // One copy per hop: the copy limit comes first.
        let ok = format!(
            "((struct foo *)curthread){}->a",
            "->next".repeat(MAX_COPIES - 1)
        );
        let n = needs(&format!("{FOO} sdt:::x {{ trace({ok}); }}"));
        assert!(spec_for(&[&n.clauses[0].1], &[], DEFAULT_STRING_STORAGE).is_ok());
    }

    #[test]
    fn merging_keeps_within_the_copy_limit() {
        let task = AddrBase::CurrentTask;
        // Far apart fields of one object: joined, closest first, down to the limit.
        let far: Vec<CopyRequest> = (0..12)
            .map(|i| kcopy(task, i * 600, &[], MemKind::KernelBytes, 8))
            .collect();
        let m = merge_kernel_copies(far);
        assert_eq!(m.len(), MAX_COPIES);
        assert!(m.iter().all(|c| c.size <= MAX_COPY_SIZE));
        // Every original range is inside one merged copy.
        for i in 0..12 {
            assert!(m
                .iter()
                .any(|c| c.addr.offset <= i * 600 && i * 600 + 8 <= c.addr.offset + c.size as i32));
        }
        // Different objects and kinds are never joined; overlapping ones are.
        let m = merge_kernel_copies(vec![
            kcopy(task, 0, &[], MemKind::KernelBytes, 8),
            kcopy(task, 4, &[], MemKind::KernelBytes, 8),
            kcopy(task, 0, &[0], MemKind::KernelBytes, 8),
            kcopy(AddrBase::Arg(0), 0, &[0], MemKind::KernelBytes, 8),
            kcopy(task, 8, &[], MemKind::KernelString, 8),
            kcopy(AddrBase::Arg(1), 0, &[], MemKind::UserString, 8),
        ]);
        assert_eq!(m.len(), 5, "{m:?}");
        assert!(m.contains(&kcopy(task, 0, &[], MemKind::KernelBytes, 12)));
        // Too large to join: left apart, and the spec says so.
        let big: Vec<CopyRequest> = (0..9)
            .map(|i| {
                kcopy(
                    task,
                    i * MAX_COPY_SIZE as i32,
                    &[],
                    MemKind::KernelBytes,
                    8000,
                )
            })
            .collect();
        assert_eq!(merge_kernel_copies(big.clone()).len(), 9);
        let n = ClauseNeeds {
            copies: big,
            ..ClauseNeeds::default()
        };
        assert!(spec_for(&[&n], &[], 64)
            .unwrap_err()
            .starts_with("not yet supported"));
    }

    #[test]
    fn process_context_variables_ask_for_their_captures() {
        let n = needs(
            "syscall::write:entry { trace(caller); } syscall::write:entry { trace(ucaller); }
             syscall::write:entry { trace(execargs); } syscall::write:entry /progenyof(1)/ { trace(1); }
             syscall::write:entry { trace(stackdepth); trace(ustackdepth); }",
        );
        let c: Vec<&ClauseNeeds> = n.clauses.iter().map(|(_, c)| c).collect();
        assert!(c[0].caller && !c[0].ucaller && !c[0].execargs && !c[0].ancestors);
        assert!(c[1].ucaller && !c[1].caller);
        assert!(c[2].execargs);
        assert!(c[3].ancestors);
        assert_eq!(
            (c[4].kstack, c[4].ustack),
            (Some(MAX_STACK_DEPTH), Some(MAX_STACK_DEPTH))
        );
        let one = |i: usize| spec_for(&[c[i]], &[], 300).unwrap();
        assert_eq!((one(0).kstack, one(0).ustack), (Some(CALLER_FRAMES), None));
        assert_eq!((one(1).kstack, one(1).ustack), (None, Some(UCALLER_FRAMES)));
        assert_eq!(one(2).execargs, Some(300));
        assert!(one(3).ancestors && !one(2).ancestors);
        // A stack() deeper than the caller's frames keeps its depth, and the tracing frames.
        let n = needs("syscall::write:entry { stack(40); trace(caller); }");
        assert_eq!(
            spec_for(&[&n.clauses[0].1], &[], 256).unwrap().kstack,
            Some(40 + CALLER_FRAMES)
        );
        // Nothing is captured for clauses that do not read them.
        assert_eq!(
            spec_for(
                &[&needs("syscall::write:entry { trace(pid); }").clauses[0].1],
                &[],
                256
            )
            .unwrap(),
            CaptureSpec::new()
        );
    }
}

#[cfg(test)]
mod smoke {
    use super::*;
    use dtrace_dif::program::{ActionDesc, EcbDesc};

    /// Arbitrary instruction words and tables (a program may come from outside, through DOF) never
    /// make the analysis panic, and what it asks for stays within the capture limits.
    #[test]
    fn random_dif_never_panics() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // Opcodes that matter here, so random words often reach them.
        // setx, ldga, ldgs, call, pushtr, pushtv, popts, flushts, add, the kernel loads, ret,
        // scmp, copys, stls/ldls.
        let ops = [
            0x0e, 0x25, 0x28, 0x29, 0x2f, 0x30, 0x31, 0x32, 0x33, 0x07, 0x1c, 0x1e, 0x22, 0x22,
            0x23, 0x27, 0x3b, 0x39, 0x38,
        ];
        for _ in 0..4000 {
            let len = (next() % 24) as usize;
            let text: Vec<u32> = (0..len)
                .map(|_| {
                    let w = next() as u32;
                    if w & 1 == 0 {
                        let op = ops[(w as usize >> 1) % ops.len()];
                        if op == 0x2f {
                            // call copyin / copyinstr / copyinto
                            let subr = [8, 9, 17][(w as usize >> 8) % 3];
                            (op << 24) | (subr << 8) | (w & 7)
                        } else if op == 0x29 && w & 0x100 != 0 {
                            // ldgs curthread
                            (op << 24) | (0x100 << 8) | (w & 7)
                        } else {
                            (op << 24) | (w & 0x00ff_ff07)
                        }
                    } else {
                        w
                    }
                })
                .collect();
            let inttab: Vec<u64> = (0..(next() % 4)).map(|_| next() % 20_000).collect();
            let obj = DifObject {
                text,
                inttab,
                ..DifObject::default()
            };
            let action = ActionDesc {
                kind: if next() % 2 == 0 {
                    ActionKind::Stack
                } else {
                    ActionKind::Ustack
                },
                difo: Some(obj.clone()),
                arg: next(),
                uarg: 0,
                ntuple: 0,
            };
            let p = Program {
                ecbs: vec![EcbDesc {
                    probe: ProbeDesc::default(),
                    predicate: Some(obj),
                    actions: vec![action],
                    line: 0,
                }],
                ..Program::default()
            };
            let n = program_needs(&p);
            let c = &n.clauses[0].1;
            assert!(c
                .copies
                .iter()
                .all(|c| c.size >= 1 && c.size <= MAX_COPY_SIZE));
            assert!(c.kstack.unwrap_or(0) <= MAX_STACK_DEPTH);
            assert!(c.ustack.unwrap_or(0) <= MAX_STACK_DEPTH);
            if let Ok(spec) = spec_for(&[c], &[0, 1], DEFAULT_STRING_STORAGE) {
                assert!(spec.copies.len() <= MAX_COPIES);
            }
        }
    }

    /// The fuzz target's entry point over pseudo-random and truncated inputs.
    #[test]
    fn fuzz_entry_smoke() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for i in 0..3000usize {
            let len = i % 97;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            fuzz_entry(&bytes);
        }
        fuzz_entry(&[]);
        fuzz_entry(&[1]);
    }
}

#[cfg(test)]
mod sized_tests;

mod mirror;
#[cfg(test)]
mod mirror_tests;
