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

#[cfg(test)]
mod tests {
    use super::*;
    use dtrace_dif::object::DifObject;
    use dtrace_dif::program::ActionDesc;

    fn action(kind: ActionKind, difo: bool) -> ActionDesc {
        ActionDesc {
            kind,
            difo: difo.then(DifObject::default),
            arg: 0,
            uarg: 0,
            ntuple: 0,
        }
    }

    fn clause(actions: Vec<ActionDesc>) -> EcbDesc {
        EcbDesc {
            probe: Default::default(),
            predicate: Some(DifObject::default()),
            actions,
            line: 0,
        }
    }

    #[test]
    fn a_clause_sends_its_one_signal_after_the_actions_before_it() {
        assert!(plan_signal(&clause(vec![action(ActionKind::DifExpr, true)])).is_none());
        let Some(Ok(s)) = plan_signal(&clause(vec![
            action(ActionKind::DifExpr, true),
            action(ActionKind::Raise, true),
            action(ActionKind::DifExpr, true),
        ])) else {
            panic!("raise() planned")
        };
        assert_eq!(s.before.len(), 1);
        assert!(s.signal.is_some() && s.predicate.is_some());
        let Some(Ok(s)) = plan_signal(&clause(vec![action(ActionKind::Stop, false)])) else {
            panic!("stop() planned")
        };
        assert!(s.signal.is_none() && s.before.is_empty());
        let two = clause(vec![
            action(ActionKind::Stop, false),
            action(ActionKind::Raise, true),
        ]);
        assert!(matches!(plan_signal(&two), Some(Err(_))));
    }
}
