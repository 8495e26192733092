//! Needs of the thread-variable mirror: a thread-local stored from an address a probe can compute
//! (`self->buf = arg1` at `read:entry`) and loaded as a copy address at another probe
//! (`copyin(self->buf, arg0)` at `read:return`). The load becomes an [`AddrBase::ThreadVar`]
//! address the reading probe copies from; the store becomes a [`MirrorOp`] the storing probe makes
//! in the kernel. The eBPF ops run whatever the clauses' predicates decide, so the mirror may hold
//! another address than the D variable: delivery only serves a read from a capture whose recorded
//! address covers it, so that costs a copy, not a wrong result.

use super::clause::ClauseNeeds;
use crate::capture::layout::NARGS;
use crate::capture::spec::{MAX_DEREFS, MAX_MIRROR_OPS, MAX_USER_DEREFS};
use crate::capture::{AddrBase, AddrExpr, CopyRequest, MirrorOp};
use dtrace_dif::flow::Value;
use dtrace_dif::object::{DifObject, DIFV_SCOPE_THREAD, DIF_TF_BYREF, DIF_TF_BYUREF};
use dtrace_dif::program::ProbeDesc;
use std::collections::{HashMap, HashSet};

/// Whether `e` starts at a mirrored thread-local.
pub(super) fn is_mirror(e: &AddrExpr) -> bool {
    matches!(e.base, AddrBase::ThreadVar(_))
}

/// The value a load of mirrorable thread-local `var` gives: the address the mirror holds.
pub(super) fn load(var: u16) -> Value {
    Value::Addr(AddrExpr::kernel(
        AddrBase::ThreadVar(u32::from(var)),
        0,
        Vec::new(),
    ))
}

/// An address the storing probe computes itself: from an argument or `curthread`, within the
/// capture's hop limits.
fn probe_address(v: &Value) -> Option<AddrExpr> {
    match v {
        Value::Addr(e)
            if (matches!(e.base, AddrBase::Arg(n) if n < NARGS)
                || e.base == AddrBase::CurrentTask)
                && e.derefs.len() <= MAX_DEREFS
                && e.user_derefs.len() <= MAX_USER_DEREFS
                && e.index.is_none() =>
        {
            Some(e.clone())
        }
        _ => None,
    }
}

/// What the store `self->var = v` in `obj` does to the mirror: a save of the address when the
/// probe can compute it, else a removal. `None` for variables held by reference (strings,
/// structures), whose loads are never addresses.
pub(super) fn store(obj: &DifObject, var: u16, v: &Value) -> Option<MirrorOp> {
    let by_ref = obj.vartab.iter().any(|d| {
        d.id == u32::from(var)
            && d.scope == DIFV_SCOPE_THREAD
            && (d.ty.is_string() || d.ty.flags & (DIF_TF_BYREF | DIF_TF_BYUREF) != 0)
    });
    (!by_ref).then(|| MirrorOp {
        var: u32::from(var),
        value: probe_address(v),
    })
}

/// Keeps, in each clause, only the mirror ops of variables some clause (or, in `elsewhere`, some
/// other program) copies from.
pub(super) fn keep_loaded(clauses: &mut [(ProbeDesc, ClauseNeeds)], elsewhere: &HashSet<u32>) {
    let mut loaded: HashSet<u32> = clauses
        .iter()
        .flat_map(|(_, n)| &n.copies)
        .filter_map(|c| match c.addr.base {
            AddrBase::ThreadVar(v) => Some(v),
            _ => None,
        })
        .collect();
    loaded.extend(elsewhere.iter().copied());
    for (_, n) in clauses {
        n.mirror.retain(|m| loaded.contains(&m.var));
    }
}

/// Adds a clause's ops to a probe's: one op per variable, a save winning over a removal (a clause
/// whose predicate fails stores nothing, so a save is the better guess) and a later save over an
/// earlier one. Past [`MAX_MIRROR_OPS`] variables, removals go first, then the latest saves (a
/// stale mirror only costs copies).
pub(super) fn merge_ops(acc: &mut Vec<MirrorOp>, ops: &[MirrorOp]) {
    for op in ops {
        match acc.iter_mut().find(|m| m.var == op.var) {
            Some(m) => {
                if op.value.is_some() || m.value.is_none() {
                    m.value = op.value.clone();
                }
            }
            None => acc.push(op.clone()),
        }
    }
    while acc.len() > MAX_MIRROR_OPS {
        match acc.iter().rposition(|m| m.value.is_none()) {
            Some(i) => {
                acc.remove(i);
            }
            None => {
                acc.pop();
            }
        }
    }
}

/// Records the addresses clause `n` saves, for the clauses after it at the same probe.
pub(super) fn note_stores(stored: &mut HashMap<u32, AddrExpr>, n: &ClauseNeeds) {
    for m in &n.mirror {
        match &m.value {
            Some(e) => {
                stored.insert(m.var, e.clone());
            }
            None => {
                stored.remove(&m.var);
            }
        }
    }
}

/// Copy `c` with its mirrored base replaced by the address an earlier clause of the probe stores
/// in the variable (`self->b = arg1` then `copyin(self->b, 8)` in the next clause copies from
/// arg1, which the D variable then holds unless the storing clause's predicate failed: delivery
/// checks the address either way). Copies of other addresses are unchanged.
pub(super) fn resolve_stored(stored: &HashMap<u32, AddrExpr>, c: &CopyRequest) -> CopyRequest {
    let AddrBase::ThreadVar(v) = c.addr.base else {
        return c.clone();
    };
    let Some(e) = stored.get(&v) else {
        return c.clone();
    };
    if !c.addr.derefs.is_empty() || c.addr.index.is_some() {
        return c.clone();
    }
    let Some(mut addr) = e.offset_by(i64::from(c.addr.offset)) else {
        return c.clone();
    };
    addr.user_derefs.extend(c.addr.user_derefs.iter().copied());
    if addr.user_derefs.len() > MAX_USER_DEREFS {
        return c.clone();
    }
    CopyRequest { addr, ..c.clone() }
}
