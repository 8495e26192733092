//! What every clause of a program needs ([`ProgramNeeds`]): each clause's objects scanned in
//! order after a first pass over what the program stores in thread-locals, its stack actions, and
//! the thread-locals it shares with the consumer's other programs ([`MirrorContext`]).

use super::clause::ClauseNeeds;
use super::mirror;
use super::pid_filter::pid_equality;
use super::policy::{stack_frames, ustack_frames, CopyLimits};
use super::scan::{scan_object, ScanVars};
use crate::capture::spec::MAX_STACK_DEPTH;
use crate::capture::AddrBase;
use dtrace_dif::flow::Value;
use dtrace_dif::program::{ActionKind, ProbeDesc, Program};
use std::collections::{HashMap, HashSet};

/// The needs of every clause of a program, with the probe description each applies to.
#[derive(Clone, Debug, Default)]
pub struct ProgramNeeds {
    /// `(description, needs)` per ECB description.
    pub clauses: Vec<(ProbeDesc, ClauseNeeds)>,
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
        ctx.sources.extend(mirror_sources(p, CopyLimits::of(p)));
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
fn scan_stores(program: &Program, limits: CopyLimits) -> ScanVars {
    let mut first = ScanVars::default();
    for e in &program.ecbs {
        first.locals.clear();
        first.stored.clear();
        for obj in e
            .predicate
            .iter()
            .chain(e.actions.iter().filter_map(|a| a.difo.as_ref()))
        {
            scan_object(obj, limits, &mut ClauseNeeds::default(), &mut first);
        }
    }
    first
}

/// The thread-locals `program` stores from probe-computable addresses.
fn mirror_sources(program: &Program, limits: CopyLimits) -> HashSet<u16> {
    scan_stores(program, limits).mirror_sources
}

/// Analyses every clause of `program`, one of several programs sharing thread-locals whose mirror
/// needs `ctx` gives (from [`mirror_context`]).
pub fn program_needs_in(program: &Program, ctx: &MirrorContext) -> ProgramNeeds {
    let limits = CopyLimits::of(program);
    let mut out = ProgramNeeds::default();
    // First pass: what the program stores in its thread-local variables.
    let mut first = scan_stores(program, limits);
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
            scan_object(obj, limits, &mut n, &mut vars);
        }
        for a in &e.actions {
            match a.kind {
                ActionKind::Stack => {
                    // The tracing machinery's frames are cut at delivery: the frames asked for
                    // remain.
                    let room = crate::capture::spec::kernel_stack_room(stack_frames(a.arg));
                    n.kstack = Some(n.kstack.unwrap_or(0).max(room));
                }
                ActionKind::Ustack | ActionKind::Jstack => {
                    let frames = ustack_frames(a.arg).min(MAX_STACK_DEPTH);
                    n.ustack = Some(n.ustack.unwrap_or(0).max(frames));
                }
                _ => {}
            }
        }
        out.clauses.push((e.probe.clone(), n));
    }
    mirror::keep_loaded(&mut out.clauses, &ctx.loaded);
    out
}
