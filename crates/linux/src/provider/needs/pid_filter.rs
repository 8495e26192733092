//! The `pid == N` predicate: a probe whose clauses all have exactly this predicate is filtered
//! by pid in the kernel, before anything is captured (see `spec.rs`).

use dtrace_dif::instr::Instr;
use dtrace_dif::object::DifObject;
use dtrace_dif::opcode::Opcode;
use dtrace_dif::vars;

/// The pid `N` of a predicate that is exactly `pid == N` or `N == pid`, as the compiler emits it:
/// the two loads, `cmp`, `be` to the true arm, `mov %r0` / `ba` to the end, `setx` of a non-zero
/// constant, `ret`. Anything else is not recognised (the predicate then only runs in the framework,
/// which it does in every case: the kernel filter is an optimisation, never the only test).
pub(super) fn pid_equality(obj: &DifObject) -> Option<u32> {
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
