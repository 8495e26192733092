//! `raise()` and `stop()` at the probe, the consumer's side (the probe's side is
//! `capture::signal`): which clause's signal the probe's program can send ([`plan_signal`]).
//! A clause that signals runs in dtrace (its record is built there); when its predicate runs in
//! the kernel too, the probe sends the signal and dtrace only records the firing.

use crate::capture::KernelSignal;
use dtrace_dif::program::{ActionKind, EcbDesc};

/// The signal clause `e` sends (`None` when it has no `raise()` or `stop()`): `Ok` with what the
/// probe's program needs to send it, else why dtrace sends it.
pub fn plan_signal(e: &EcbDesc) -> Option<Result<KernelSignal, String>> {
    let signals = |a: &&dtrace_dif::program::ActionDesc| {
        matches!(a.kind, ActionKind::Raise | ActionKind::Stop)
    };
    let first = e.actions.iter().position(|a| signals(&a))?;
    if e.actions.iter().filter(signals).count() > 1 {
        return Some(Err("the clause sends more than one signal".into()));
    }
    let a = &e.actions[first];
    let signal = match (a.kind, &a.difo) {
        (ActionKind::Raise, Some(o)) => Some(o.clone()),
        (ActionKind::Raise, None) => return Some(Err("raise() without a signal".into())),
        _ => None,
    };
    Some(Ok(KernelSignal {
        predicate: e.predicate.clone(),
        before: e.actions[..first]
            .iter()
            .filter_map(|a| a.difo.clone())
            .collect(),
        signal,
    }))
}
