//! What a D program needs captured at each probe: the user memory its clauses read with `copyinstr`
//! and `copyin` (found by following probe arguments through the DIF registers to the subroutine
//! call) and the stacks its `stack()`/`ustack()` actions record. The provider turns these into one
//! [`CaptureSpec`] per enabled probe, the union over every clause enabled on it.

use crate::capture::spec::{MAX_COPIES, MAX_COPY_SIZE, MAX_STACK_DEPTH};
use crate::capture::{AddrExpr, CaptureSpec, CopyRequest, MemKind};
use dtrace_dif::instr::Instr;
use dtrace_dif::object::DifObject;
use dtrace_dif::opcode::Opcode;
use dtrace_dif::program::{ActionKind, ProbeDesc, Program};
use dtrace_dif::subr::Subr;
use dtrace_dif::vars;

/// Default `strsize` (bytes a `copyinstr` copies, NUL included).
pub const DEFAULT_STRSIZE: u32 = 256;
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
    /// The clause calls `copyin` on something other than a plain argument with a constant size: it
    /// is served from the process's memory at delivery (see `deliver::EventMemory`).
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
}

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

/// The `strsize` of a program (its pragma, else the default).
fn strsize_of(program: &Program) -> u32 {
    program
        .options
        .iter()
        .rev()
        .find(|(n, _)| n == "strsize")
        .and_then(|(_, v)| v.as_deref())
        .and_then(parse_size)
        .map(|s| s.clamp(1, u64::from(MAX_COPY_SIZE)) as u32)
        .unwrap_or(DEFAULT_STRSIZE)
}

/// DTrace's size syntax: a number with an optional k/m/g suffix.
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last()? {
        (i, 'k' | 'K') => (&s[..i], 1u64 << 10),
        (i, 'm' | 'M') => (&s[..i], 1 << 20),
        (i, 'g' | 'G') => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// Analyses every clause of `program`.
pub fn program_needs(program: &Program) -> ProgramNeeds {
    let strsize = strsize_of(program);
    let mut out = ProgramNeeds::default();
    for e in &program.ecbs {
        let mut n = ClauseNeeds {
            filter_pid: e.predicate.as_ref().and_then(pid_equality),
            ..ClauseNeeds::default()
        };
        for obj in e
            .predicate
            .iter()
            .chain(e.actions.iter().filter_map(|a| a.difo.as_ref()))
        {
            scan_object(obj, strsize, &mut n);
        }
        for a in &e.actions {
            match a.kind {
                ActionKind::Stack => {
                    let frames = if a.arg == 0 {
                        DEFAULT_STACKFRAMES
                    } else {
                        a.arg as u32
                    };
                    n.kstack = Some(n.kstack.unwrap_or(0).max(frames.min(MAX_STACK_DEPTH)));
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

/// What a register is known to hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Val {
    Unknown,
    Const(u64),
    Arg(usize),
}

/// Follows probe arguments and constants through one DIF object to its `copyinstr`/`copyin` calls.
/// Straight-line approximation: a register's value is the last one written before the call, which
/// is what the compiler emits for an argument expression; anything else is "unknown" and handled
/// conservatively by the caller.
fn scan_object(obj: &DifObject, strsize: u32, n: &mut ClauseNeeds) {
    let mut regs = [Val::Unknown; 8];
    let mut stack: Vec<Val> = Vec::new();
    for &word in &obj.text {
        let Ok(ins) = Instr::decode(word) else {
            continue;
        };
        let set = |regs: &mut [Val; 8], rd: u8, v: Val| {
            if let Some(r) = regs.get_mut(rd as usize) {
                *r = if rd == 0 { Val::Const(0) } else { v };
            }
        };
        let get = |regs: &[Val; 8], r: u8| match r {
            0 => Val::Const(0),
            _ => regs.get(r as usize).copied().unwrap_or(Val::Unknown),
        };
        match ins {
            Instr::Setx { idx, rd } => {
                let v = obj
                    .inttab
                    .get(idx as usize)
                    .map_or(Val::Unknown, |v| Val::Const(*v));
                set(&mut regs, rd, v);
            }
            Instr::Mov { r1, rd } => {
                let v = get(&regs, r1);
                set(&mut regs, rd, v);
            }
            Instr::LoadVar {
                op: Opcode::Ldgs,
                var,
                rd,
            } => {
                let var = u32::from(var);
                let v = if (vars::DIF_VAR_ARG0..=vars::DIF_VAR_ARG0 + 9).contains(&var) {
                    n.used_args |= 1 << (var - vars::DIF_VAR_ARG0);
                    Val::Arg((var - vars::DIF_VAR_ARG0) as usize)
                } else {
                    Val::Unknown
                };
                set(&mut regs, rd, v);
            }
            Instr::LoadArray { var, r2, rd, .. } => {
                let is_args = u32::from(var) == vars::DIF_VAR_ARGS;
                let v = match get(&regs, r2) {
                    Val::Const(i) if is_args && i < 10 => {
                        n.used_args |= 1 << i;
                        Val::Arg(i as usize)
                    }
                    _ => {
                        if is_args {
                            n.used_args = ALL_ARGS;
                        }
                        Val::Unknown
                    }
                };
                set(&mut regs, rd, v);
            }
            Instr::Pushtr { rs, .. } | Instr::Pushtv { rs, .. } => stack.push(get(&regs, rs)),
            Instr::Popts => {
                stack.pop();
            }
            Instr::Flushts => stack.clear(),
            Instr::Call { subr, rd } => {
                if subr == Subr::Copyinstr as u16 {
                    match stack.first() {
                        // copyinstr(addr, maxlen) copies at most strsize bytes either way.
                        Some(Val::Arg(a)) => n.add_copy(CopyRequest {
                            addr: AddrExpr::arg(*a),
                            kind: MemKind::UserString,
                            size: strsize,
                        }),
                        _ => n.any_string_arg = true,
                    }
                } else if subr == Subr::Copyin as u16 || subr == Subr::Copyinto as u16 {
                    match (stack.first(), stack.get(1)) {
                        (Some(Val::Arg(a)), Some(Val::Const(size)))
                            if (1..=u64::from(MAX_COPY_SIZE)).contains(size) =>
                        {
                            n.add_copy(CopyRequest {
                                addr: AddrExpr::arg(*a),
                                kind: MemKind::UserBytes,
                                size: *size as u32,
                            })
                        }
                        _ => n.unresolved_copyin = true,
                    }
                }
                set(&mut regs, rd, Val::Unknown);
            }
            Instr::Alu { rd, .. }
            | Instr::Not { rd, .. }
            | Instr::Load { rd, .. }
            | Instr::Sets { rd, .. }
            | Instr::LoadVar { rd, .. }
            | Instr::Allocs { rd, .. }
            | Instr::Xlate { rd, .. } => set(&mut regs, rd, Val::Unknown),
            _ => {}
        }
    }
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
            .find(|o| o.addr == c.addr && o.kind == c.kind)
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
    for n in clauses {
        for c in &n.copies {
            push(&mut spec, c.clone());
        }
        if n.any_string_arg {
            for &a in string_args {
                push(
                    &mut spec,
                    CopyRequest {
                        addr: AddrExpr::arg(a),
                        kind: MemKind::UserString,
                        size: strsize,
                    },
                );
            }
        }
        spec.kstack = spec.kstack.max(n.kstack);
        spec.ustack = spec.ustack.max(n.ustack);
    }
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
        if let Ok(spec) = spec_for(&[c], &[0, 1, 2], DEFAULT_STRSIZE) {
            assert!(spec.copies.len() <= MAX_COPIES);
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
            vec![CopyRequest {
                addr: AddrExpr::arg(1),
                kind: MemKind::UserString,
                size: DEFAULT_STRSIZE
            }]
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
        let n = needs(r#"syscall::write:entry { trace(copyinstr(arg1 + 4)); }"#);
        assert!(n.clauses[0].1.any_string_arg);
        let spec = spec_for(&[&n.clauses[0].1], &[1], 64).unwrap();
        assert_eq!(spec.copies.len(), 1);
        assert_eq!(spec.copies[0].size, 64);
        let n = needs(r#"syscall::write:entry { trace(*(int *)copyin(arg1 + 4, 4)); }"#);
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
        let spec = spec_for(&all, &[], DEFAULT_STRSIZE).unwrap();
        assert_eq!(spec.kstack, Some(DEFAULT_STACKFRAMES));
        assert_eq!(spec.ustack, Some(5));
        assert_eq!(spec.copies.len(), 1);
        assert!(spec.retry_at_return);
    }

    #[test]
    fn no_needs_for_counting() {
        let n = needs("syscall::write:entry /execname == \"sh\"/ { @c = count(); }");
        assert_eq!(n.clauses[0].1, ClauseNeeds::default());
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
    fn used_arguments() {
        let used = |src: &str| needs(src).clauses[0].1.used_args;
        assert_eq!(used("sdt:::x { trace(arg2); }"), 1 << 2);
        assert_eq!(used("sdt:::x /args[0] == 1/ { trace(args[3]); }"), 0b1001);
        assert_eq!(used("sdt:::x { trace(args[arg1]); }"), ALL_ARGS);
        assert_eq!(used("sdt:::x { trace(pid); }"), 0);
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("1k"), Some(1024));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
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
        let ops = [0x0e, 0x25, 0x28, 0x29, 0x2f, 0x30, 0x31, 0x32, 0x33];
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
                        } else {
                            (op << 24) | (w & 0x00ff_ffff)
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
            if let Ok(spec) = spec_for(&[c], &[0, 1], DEFAULT_STRSIZE) {
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
