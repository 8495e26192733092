//! The profile provider's driver seam (probes fire from an OS layer's driver instead of the
//! framework's timers, keeping their names and ids) and stack and user-symbol records as
//! aggregation keys (`@[stack()]`, `@[ustack()]`, `@[usym(arg1)]`).

use std::sync::{Arc, Mutex};

use dtrace_dif::asm::assemble;
use dtrace_dif::program::{ActionDesc, ActionKind, EcbDesc, ProbeDesc, Program};
use dtrace_framework::provider::ProviderError;
use dtrace_framework::providers::profile::{ProfileDriver, ProfileKind};
use dtrace_framework::records::AggSnapshot;
use dtrace_framework::records::ProbeInfo;
use dtrace_framework::*;

fn pd(s: &str) -> ProbeDesc {
    let f: Vec<&str> = s.split(':').collect();
    ProbeDesc {
        provider: f[0].into(),
        module: f[1].into(),
        function: f[2].into(),
        name: f[3].into(),
    }
}

fn act(kind: ActionKind, src: Option<&str>, arg: u64, ntuple: u32) -> ActionDesc {
    ActionDesc {
        kind,
        difo: src.map(|s| assemble(s).unwrap()),
        arg,
        uarg: 0,
        ntuple,
    }
}

fn program(ecbs: Vec<(&str, Vec<ActionDesc>)>) -> Program {
    Program {
        ecbs: ecbs
            .into_iter()
            .map(|(p, actions)| EcbDesc {
                probe: pd(p),
                predicate: None,
                actions,
                line: 0,
            })
            .collect(),
        ..Program::default()
    }
}

type Calls = Arc<Mutex<Vec<(String, u32, Option<(ProfileKind, u64)>)>>>;

/// Records what it is asked to start and stop.
struct Recorder(Calls);

impl ProfileDriver for Recorder {
    fn start(
        &mut self,
        probe: &ProbeInfo,
        kind: ProfileKind,
        interval_ns: u64,
    ) -> Result<(), ProviderError> {
        if probe.name == "tick-7" {
            return Err(ProviderError::Enable {
                probe: probe.name.clone(),
                reason: "refused".into(),
            });
        }
        self.0
            .lock()
            .unwrap()
            .push((probe.name.clone(), probe.id, Some((kind, interval_ns))));
        Ok(())
    }
    fn stop(&mut self, probe: &ProbeInfo) {
        self.0
            .lock()
            .unwrap()
            .push((probe.name.clone(), probe.id, None));
    }
}

#[test]
fn a_driver_fires_profile_probes_instead_of_the_timers() {
    let mut fw = Framework::new(Options::default(), 2);
    let clock = ManualClock::default();
    clock.set(1_000_000_000);
    fw.set_clock(Box::new(clock.clone()));
    let tick1 = fw.list_probes(&pd("profile:::tick-1"))[0].id;
    let calls: Calls = Arc::default();
    fw.set_profile_driver(Box::new(Recorder(calls.clone())));
    // Standing probes keep their ids; others are still created on demand, with every unit.
    assert_eq!(fw.list_probes(&pd("profile:::tick-1"))[0].id, tick1);
    let count = || act(ActionKind::AggCount, None, 0, 0);
    let p = program(vec![
        ("profile:::tick-1", vec![count()]),
        ("profile:::profile-1234", vec![count()]),
        ("profile:::tick-10ms", vec![count()]),
    ]);
    fw.enable(&p, false).unwrap();
    let prof = fw.list_probes(&pd("profile:::profile-1234"))[0].id;
    let tick10 = fw.list_probes(&pd("profile:::tick-10ms"))[0].id;
    {
        let c = calls.lock().unwrap();
        assert_eq!(c.len(), 3, "{c:?}");
        assert!(c.contains(&(
            "tick-1".into(),
            tick1,
            Some((ProfileKind::Tick, 1_000_000_000))
        )));
        assert!(c.contains(&(
            "profile-1234".into(),
            prof,
            Some((ProfileKind::Profile, 1_000_000_000 / 1234))
        )));
        assert!(c.contains(&(
            "tick-10ms".into(),
            tick10,
            Some((ProfileKind::Tick, 10_000_000))
        )));
    }
    fw.go().unwrap();
    // No timer fires them: ten seconds pass and polling fires nothing.
    clock.set(11_000_000_000);
    assert_eq!(fw.poll(), 0);
    assert_eq!(fw.next_deadline(), None);
    // Firings come from the driver's side, with their own context.
    let ctx = FiringContext {
        pid: 42,
        ..FiringContext::default()
    };
    fw.fire(prof, 1, &ctx);
    fw.fire(prof, 0, &ctx);
    let snap = fw.snapshot_aggregations();
    let fired: usize = snap.iter().map(|s| s.records.len()).sum();
    assert_eq!(fired, 2);
    fw.stop().unwrap();
    let c = calls.lock().unwrap();
    assert_eq!(c.iter().filter(|(_, _, k)| k.is_none()).count(), 3, "{c:?}");
}

#[test]
fn a_driver_refusal_fails_the_enabling() {
    let mut fw = Framework::new(Options::default(), 1);
    fw.set_profile_driver(Box::new(Recorder(Arc::default())));
    let p = program(vec![(
        "profile:::tick-7",
        vec![act(ActionKind::AggCount, None, 0, 0)],
    )]);
    let e = fw.enable(&p, false).unwrap_err().to_string();
    assert!(e.contains("refused"), "{e}");
}

fn key_of(snap: &[AggSnapshot]) -> Vec<(Vec<u8>, u64)> {
    let mut out: Vec<(Vec<u8>, u64)> = snap
        .iter()
        .flat_map(|s| &s.records)
        .map(|r| {
            (
                r.key.clone(),
                u64::from_ne_bytes(r.value[..8].try_into().unwrap()),
            )
        })
        .collect();
    out.sort();
    out
}

fn words(w: &[u64]) -> Vec<u8> {
    w.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

#[test]
fn stacks_and_user_symbols_are_aggregation_keys() {
    let mut fw = Framework::new(Options::default(), 1);
    let p = program(vec![
        (
            "profile:::tick-1",
            vec![
                act(ActionKind::Stack, None, 3, 0),
                act(ActionKind::AggCount, None, 0, 1),
            ],
        ),
        (
            "profile:::tick-1",
            vec![
                act(ActionKind::Ustack, None, 2, 0),
                act(ActionKind::AggCount, None, 0, 1),
            ],
        ),
        (
            "profile:::tick-1",
            vec![
                act(ActionKind::Usym, Some("ldgs arg1, %r1\nret %r1\n"), 0, 0),
                act(ActionKind::Sym, Some("ldgs arg0, %r1\nret %r1\n"), 0, 0),
                act(ActionKind::AggCount, None, 0, 2),
            ],
        ),
    ]);
    let en = fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    let tick = fw.list_probes(&pd("profile:::tick-1"))[0].id;
    let mut fire = |kstack: Vec<u64>, ustack: Vec<u64>, pid: u64, a0: u64, a1: u64| {
        let mut ctx = FiringContext {
            pid,
            kstack,
            ustack,
            ..FiringContext::default()
        };
        ctx.args[0] = a0;
        ctx.args[1] = a1;
        fw.fire(tick, 0, &ctx);
    };
    fire(vec![0xa1, 0xa2], vec![0x11, 0x12, 0x13], 7, 0xa1, 0);
    fire(vec![0xa1, 0xa2], vec![0x11, 0x12, 0x99], 7, 0xa1, 0);
    fire(vec![0xb1], vec![0x11], 8, 0, 0x11);
    let snap = fw.snapshot_aggregations();
    let aggid_of = |i: usize| en.aggs[i].aggid;
    let mut by_agg: Vec<Vec<(Vec<u8>, u64)>> = vec![Vec::new(); 3];
    for s in &snap {
        for r in &s.records {
            let i = (0..3).find(|&i| aggid_of(i) == r.aggid).unwrap();
            by_agg[i].push((
                r.key.clone(),
                u64::from_ne_bytes(r.value[..8].try_into().unwrap()),
            ));
        }
    }
    for v in &mut by_agg {
        v.sort();
    }
    // stack(3): three pcs, zero-filled; equal stacks are one key.
    assert_eq!(
        by_agg[0],
        vec![(words(&[0xa1, 0xa2, 0]), 2), (words(&[0xb1, 0, 0]), 1)]
    );
    // ustack(2): the pid, then two pcs (deeper frames do not matter).
    assert_eq!(
        by_agg[1],
        vec![(words(&[7, 0x11, 0x12]), 2), (words(&[8, 0x11, 0]), 1)]
    );
    // usym(arg1), sym(arg0): pid and address, then the kernel address.
    assert_eq!(
        by_agg[2],
        vec![(words(&[7, 0, 0xa1]), 2), (words(&[8, 0x11, 0]), 1)]
    );
    assert!(key_of(&fw.snapshot_aggregations()).is_empty());
}
