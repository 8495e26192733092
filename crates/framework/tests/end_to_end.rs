//! End-to-end tests: hand-built programs (DIF from the `dif` assembler) enabled, fired and checked byte
//! by byte in the buffers and aggregation snapshots.

use dtrace_dif::asm::assemble;
use dtrace_dif::object::DifObject;
use dtrace_dif::program::{
    lquantize_arg, ActionDesc, ActionKind, AggregationDesc, EcbDesc, ProbeDesc, Program,
};
use dtrace_framework::aggregate::{merge_value, QUANTIZE_ZEROBUCKET};
use dtrace_framework::records::{read_header, FaultRecord, FAULT_EPID};
use dtrace_framework::*;

fn asm(src: &str) -> DifObject {
    assemble(src).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

fn pd(s: &str) -> ProbeDesc {
    let f: Vec<&str> = s.split(':').collect();
    ProbeDesc {
        provider: f[0].into(),
        module: f[1].into(),
        function: f[2].into(),
        name: f[3].into(),
    }
}

fn act(kind: ActionKind, difo: Option<DifObject>) -> ActionDesc {
    ActionDesc {
        kind,
        difo,
        arg: 0,
        uarg: 0,
        ntuple: 0,
    }
}

fn trace_int(v: i64) -> ActionDesc {
    act(
        ActionKind::DifExpr,
        Some(asm(&format!("setx {v}, %r1\nret %r1\n"))),
    )
}

fn ecb(probe: &str, pred: Option<DifObject>, actions: Vec<ActionDesc>) -> EcbDesc {
    EcbDesc {
        probe: pd(probe),
        predicate: pred,
        actions,
        line: 0,
    }
}

/// The global the speculation tests keep a speculation's id in.
const SPEC_VAR: &str = ".var spec 1280 scl glb r/w int 8\n";

/// A BEGIN clause storing a new speculation's id in `spec`.
fn begin_speculation() -> EcbDesc {
    ecb(
        "dtrace:::BEGIN",
        None,
        vec![act(
            ActionKind::DifExpr,
            Some(asm(&format!(
                "{SPEC_VAR}call speculation, %r1\nstgs %r1, spec\nret %r0\n.rtype int 0\n"
            ))),
        )],
    )
}

/// An action of `kind` (`speculate()`, `commit()`, `discard()`) on the speculation in `spec`.
fn on_spec(kind: ActionKind) -> ActionDesc {
    act(
        kind,
        Some(asm(&format!("{SPEC_VAR}ldgs spec, %r1\nret %r1\n"))),
    )
}

fn program(ecbs: Vec<EcbDesc>) -> Program {
    Program {
        ecbs,
        ..Program::default()
    }
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes(b[o..o + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_ne_bytes(b[o..o + 8].try_into().unwrap())
}

/// Splits a buffer into records using the EPID sizes.
fn records<'a>(data: &'a [u8], size_of: &dyn Fn(u32) -> usize) -> Vec<(u32, &'a [u8])> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + 4 <= data.len() {
        let epid = u32_at(data, off);
        if epid == 0 {
            off += 4;
            continue;
        }
        let len = size_of(epid);
        out.push((epid, &data[off..off + len]));
        off += (len + 7) & !7;
    }
    out
}

fn new_fw() -> (Framework, ManualClock) {
    let mut fw = Framework::new(Options::default(), 2);
    let clock = ManualClock::default();
    clock.set(1_000_000_000);
    fw.set_clock(Box::new(clock.clone()));
    fw.set_fault_records(true);
    (fw, clock)
}

#[test]
fn begin_trace_and_exit() {
    let (mut fw, _clock) = new_fw();
    let p = program(vec![ecb(
        "dtrace:::BEGIN",
        None,
        vec![
            trace_int(42),
            act(
                ActionKind::Exit,
                Some(asm("setx 3, %r1\nret %r1\n.rtype int 4\n")),
            ),
        ],
    )]);
    let en = fw.enable(&p, false).unwrap();
    assert_eq!(en.matched, 1);
    assert_eq!(en.eprobes.len(), 1);
    let ep = &en.eprobes[0];
    assert_eq!((ep.epid, ep.probe_id, ep.size), (1, 1, 28));
    assert_eq!((ep.recs[0].offset, ep.recs[0].size), (16, 8));
    assert_eq!((ep.recs[1].offset, ep.recs[1].size), (24, 4));
    assert_eq!(en.probes[0].name, "BEGIN");
    fw.go().unwrap();
    let snap = fw.switch_buffer(0).unwrap();
    assert_eq!(snap.data.len(), 32);
    let (epid, ts) = read_header(&snap.data).unwrap();
    assert_eq!((epid, ts), (1, 1_000_000_000));
    assert_eq!(u64_at(&snap.data, 16), 42);
    assert_eq!(u32_at(&snap.data, 24), 3);
    assert_eq!(fw.status().exit_status, Some(3));
    assert!(fw.switch_buffer(1).unwrap().data.is_empty());
}

#[test]
fn begin_before_end_and_empty_clause_records_header() {
    let (mut fw, _c) = new_fw();
    let p = program(vec![
        ecb("dtrace:::END", None, vec![]),
        ecb("dtrace:::BEGIN", None, vec![]),
    ]);
    let en = fw.enable(&p, false).unwrap();
    assert_eq!(en.eprobes[0].size, 12);
    fw.go().unwrap();
    fw.stop().unwrap();
    let snap = fw.switch_buffer(0).unwrap();
    let epids: Vec<u32> = records(&snap.data, &|_| 12).iter().map(|r| r.0).collect();
    assert_eq!(epids, vec![2, 1]);
    assert_eq!(fw.activity(), Activity::Stopped);
}

#[test]
fn matching_counts_and_errors() {
    let (mut fw, _c) = new_fw();
    let p = program(vec![
        ecb("dtrace:::B*", None, vec![]),
        ecb(":::END", None, vec![]),
    ]);
    assert_eq!(fw.enable(&p, false).unwrap().matched, 2);

    let (mut fw, _c) = new_fw();
    let p = program(vec![ecb("dtrace:::*", None, vec![])]);
    let en = fw.enable(&p, false).unwrap();
    assert_eq!(en.matched, 3);
    assert_eq!(
        en.eprobes.iter().map(|e| e.epid).collect::<Vec<_>>(),
        [1, 2, 3]
    );

    let (mut fw, _c) = new_fw();
    let p = program(vec![
        ecb("dtrace:::BEGIN", None, vec![]),
        ecb("foo:::bar", None, vec![]),
    ]);
    let e = fw.enable(&p, false).unwrap_err();
    assert_eq!(
        e.to_string(),
        "probe description foo:::bar does not match any probes"
    );
    let en = fw.enable(&p, true).unwrap();
    assert_eq!(en.matched, 1);
}

#[test]
fn predicate_selects() {
    let (mut fw, _c) = new_fw();
    let p = program(vec![
        ecb(
            "dtrace:::BEGIN",
            Some(asm("setx 0, %r1\nret %r1\n")),
            vec![trace_int(1)],
        ),
        ecb(
            "dtrace:::BEGIN",
            Some(asm("setx 7, %r1\nret %r1\n")),
            vec![trace_int(2)],
        ),
    ]);
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    let snap = fw.switch_buffer(0).unwrap();
    let recs = records(&snap.data, &|_| 24);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].0, 2);
    assert_eq!(u64_at(recs[0].1, 16), 2);
}

#[test]
fn strings_are_nul_padded() {
    let (mut fw, _c) = new_fw();
    fw.set_option("strsize", Some("16")).unwrap();
    let p = program(vec![ecb(
        "dtrace:::BEGIN",
        None,
        vec![act(
            ActionKind::DifExpr,
            Some(asm("ldgs probename, %r1\nret %r1\n.rtype string 0\n")),
        )],
    )]);
    let en = fw.enable(&p, false).unwrap();
    let r = en.eprobes[0].recs[0];
    // strsize characters and the NUL, aligned as that size gives (to a byte).
    assert_eq!((r.offset, r.size, r.alignment), (12, 17, 1));
    fw.go().unwrap();
    let snap = fw.switch_buffer(0).unwrap();
    assert_eq!(&snap.data[12..29], b"BEGIN\0\0\0\0\0\0\0\0\0\0\0\0");
}

#[test]
fn fault_fires_error_probe() {
    let (mut fw, _c) = new_fw();
    // trace(*(int *)0): load from address 0 at instruction 1 (DIF offset 4).
    let bad = asm("setx 0, %r1\nldsw [%r1], %r2\nret %r2\n");
    let p = program(vec![
        ecb(
            "dtrace:::BEGIN",
            None,
            vec![trace_int(5), act(ActionKind::DifExpr, Some(bad))],
        ),
        ecb(
            "dtrace:::ERROR",
            None,
            (1..=5)
                .map(|n| {
                    act(
                        ActionKind::DifExpr,
                        Some(asm(&format!("ldgs arg{n}, %r1\nret %r1\n"))),
                    )
                })
                .collect(),
        ),
    ]);
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    let snap = fw.switch_buffer(0).unwrap();
    // Fault records and the ERROR clause's records (5 x u64) are both 56 bytes.
    let recs = records(&snap.data, &|_| 56);
    // The faulting clause's record is not committed: a fault record, then the ERROR clause's record.
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].0, FAULT_EPID);
    let f = FaultRecord::decode(recs[0].1).unwrap();
    assert_eq!(
        f,
        FaultRecord {
            probe: 1,
            clause: 0,
            pc: 3,
            kind: 1,
            addr: 0
        }
    );
    assert_eq!(recs[1].0, 2);
    // DTrace for Linux's ERROR arguments: the probe id (BEGIN), the statement id (clause 0), the pc
    // in the clause's code (trace(5) is 2 instructions, the load is the second of the next action),
    // the fault kind and the address.
    let args: Vec<u64> = (0..5).map(|i| u64_at(recs[1].1, 16 + 8 * i)).collect();
    assert_eq!(args, vec![1, 0, 3, 1, 0]);
    assert_eq!(fw.status().errors, 1);
}

#[test]
fn fault_in_predicate_and_in_error_clause() {
    let (mut fw, _c) = new_fw();
    let div0 = || asm("setx 1, %r1\nsetx 0, %r2\nsdiv %r1, %r2, %r3\nret %r3\n");
    let p = program(vec![
        ecb("dtrace:::BEGIN", Some(div0()), vec![trace_int(1)]),
        ecb("dtrace:::ERROR", Some(div0()), vec![]),
    ]);
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    let f = FaultRecord::decode(&fw.switch_buffer(0).unwrap().data).unwrap();
    assert_eq!((f.clause, f.pc, f.kind), (0, 2, 4));
    let st = fw.status();
    assert_eq!((st.errors, st.dblerrors), (2, 1));
}

#[test]
fn aggregations_count_by_probename() {
    let (mut fw, _c) = new_fw();
    let key = act(
        ActionKind::DifExpr,
        Some(asm("ldgs probename, %r1\nret %r1\n.rtype string\n")),
    );
    let mut count = act(ActionKind::AggCount, None);
    count.ntuple = 1;
    count.uarg = 1;
    let mut p = program(vec![
        ecb("dtrace:::BEGIN", None, vec![key.clone(), count.clone()]),
        ecb("profile:::tick-1sec", None, vec![key, count]),
    ]);
    p.aggregations.push(AggregationDesc {
        id: 1,
        name: String::new(),
    });
    let (mut fw2, clock) = (
        Framework::new(Options::default(), 1),
        ManualClock::default(),
    );
    std::mem::swap(&mut fw, &mut fw2);
    clock.set(10);
    fw.set_clock(Box::new(clock.clone()));
    let en = fw.enable(&p, false).unwrap();
    assert_eq!(en.eprobes[0].size, 0);
    assert_eq!(en.aggs.len(), 2);
    let a = &en.aggs[0];
    assert_eq!((a.varid, a.epid), (1, 1));
    assert_eq!((a.recs[0].offset, a.recs[0].size), (0, 256));
    assert_eq!((a.recs[1].offset, a.recs[1].size), (256, 8));
    fw.go().unwrap();
    fw.poll(); // arms the timer
    clock.set(10 + 3_500_000_000);
    assert_eq!(fw.poll(), 3);
    let snaps = fw.snapshot_aggregations();
    assert!(fw.switch_buffer(0).unwrap().data.is_empty());
    let recs = &snaps[0].records;
    assert_eq!(recs.len(), 2);
    let find = |name: &[u8]| {
        recs.iter()
            .find(|r| r.key.starts_with(name) && r.key[name.len()] == 0)
            .unwrap()
    };
    assert_eq!(u64_at(&find(b"BEGIN").value, 0), 1);
    let tick = find(b"tick-1sec");
    assert_eq!(tick.aggid, 2);
    assert_eq!(tick.key.len(), 256);
    assert_eq!(u64_at(&tick.value, 0), 3);
    // Snapshots drain.
    assert!(fw.snapshot_aggregations()[0].records.is_empty());
}

#[test]
fn every_aggregating_function() {
    let (mut fw, _c) = new_fw();
    let val = |v: i64| Some(asm(&format!("setx {v}, %r1\nret %r1\n")));
    let mut actions = Vec::new();
    let kinds = [
        (ActionKind::AggCount, 0),
        (ActionKind::AggSum, 0),
        (ActionKind::AggAvg, 0),
        (ActionKind::AggMin, 0),
        (ActionKind::AggMax, 0),
        (ActionKind::AggStddev, 0),
        (ActionKind::AggQuantize, 0),
        (ActionKind::AggLquantize, lquantize_arg(0, 10, 10)),
        (
            ActionKind::AggLlquantize,
            dtrace_dif::program::llquantize_arg(10, 0, 2, 10),
        ),
    ];
    for (i, &(k, arg)) in kinds.iter().enumerate() {
        let mut a = act(
            k,
            if k == ActionKind::AggCount {
                None
            } else {
                val(-7 + 12 * i as i64)
            },
        );
        a.arg = arg;
        a.uarg = i as u64;
        actions.push(a);
    }
    let p = program(vec![ecb("dtrace:::BEGIN", None, actions)]);
    let en = fw.enable(&p, false).unwrap();
    let sizes: Vec<u32> = en
        .aggs
        .iter()
        .map(|a| a.recs.last().unwrap().size)
        .collect();
    // llquantize(x, 10, 0, 2, 10): 9 buckets in each magnitude 0..2, mirrored below the zero bucket,
    // the two overflow buckets and the parameter word.
    assert_eq!(
        sizes,
        vec![8, 8, 16, 8, 8, 32, 127 * 8, 13 * 8, (2 * 27 + 4) * 8]
    );
    fw.go().unwrap();
    let snap = fw.snapshot_aggregations();
    let vals: Vec<Vec<u64>> = snap[0]
        .records
        .iter()
        .map(|r| {
            r.value
                .chunks(8)
                .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
                .collect()
        })
        .collect();
    assert_eq!(vals[0], vec![1]);
    assert_eq!(vals[1], vec![5]); // sum(5)
    assert_eq!(vals[2], vec![1, 17]); // avg(17)
    assert_eq!(vals[3], vec![29]); // min(29)
    assert_eq!(vals[4], vec![41]); // max(41)
    assert_eq!(vals[5], vec![1, 53, 53 * 53, 0]); // stddev(53)
    assert_eq!(vals[6][QUANTIZE_ZEROBUCKET + 7], 1); // quantize(65): 64..127
    assert_eq!(vals[7][0], lquantize_arg(0, 10, 10));
    assert_eq!(vals[7][1 + 1 + 7], 1); // lquantize(77): after the arg and underflow, 70..79
    assert_eq!(vals[8][1 + 28 + 17], 1); // llquantize(89, 10, 0, 2, 10): the 80..89 bucket
                                         // The consumer merges snapshots.
    let mut a = snap[0].records[3].value.clone();
    merge_value(ActionKind::AggMin, &mut a, &(-1i64).to_ne_bytes());
    assert_eq!(i64::from_ne_bytes(a[..8].try_into().unwrap()), -1);
}

#[test]
fn aggregation_drops_when_aggsize_exceeded() {
    let (mut fw, _c) = new_fw();
    fw.set_option("aggsize", Some("128")).unwrap();
    let key = act(ActionKind::DifExpr, Some(asm("ldgs arg0, %r1\nret %r1\n")));
    let mut count = act(ActionKind::AggCount, None);
    count.ntuple = 1;
    let p = program(vec![ecb("profile:::tick-1", None, vec![key, count])]);
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    let tick = fw.list_probes(&pd("profile:::tick-1"))[0].id;
    for i in 0..10u64 {
        let mut ctx = FiringContext::default();
        ctx.args[0] = i;
        fw.fire(tick, 1, &ctx);
    }
    let snap = fw.snapshot_aggregations();
    assert_eq!(snap[1].records.len(), 2);
    assert_eq!(snap[1].drops, 8);
}

#[test]
fn an_aggsize_too_small_for_one_entry_fails_the_enabling() {
    // DTrace for Linux: "Enabling exceeds size of buffer" when not one entry fits.
    let (mut fw, _c) = new_fw();
    fw.set_option("aggsize", Some("8")).unwrap();
    let count = act(ActionKind::AggCount, None);
    let p = program(vec![ecb("profile:::tick-1", None, vec![count])]);
    fw.enable(&p, false).unwrap();
    let e = fw.go().unwrap_err();
    assert_eq!(e.to_string(), "Enabling exceeds size of buffer");
}

#[test]
fn speculation_commit_and_discard() {
    let (mut fw, _c) = new_fw();
    // BEGIN: spec = speculation(); speculate(spec); trace(11)
    // END:   commit(spec) when arg... (two clauses: one discards a second speculation)
    let p = program(vec![
        begin_speculation(),
        ecb(
            "dtrace:::BEGIN",
            None,
            vec![on_spec(ActionKind::Speculate), trace_int(11)],
        ),
        ecb("dtrace:::END", None, vec![on_spec(ActionKind::Commit)]),
    ]);
    let en = fw.enable(&p, false).unwrap();
    assert_eq!(en.eprobes[0].size, 0);
    assert_eq!(en.eprobes[1].size, 24);
    assert_eq!(en.eprobes[2].size, 0);
    fw.go().unwrap();
    assert!(fw.switch_buffer(0).unwrap().data.is_empty());
    fw.stop().unwrap();
    let snap = fw.switch_buffer(0).unwrap();
    assert_eq!(snap.data.len(), 24);
    assert_eq!(u32_at(&snap.data, 0), 2);
    assert_eq!(u64_at(&snap.data, 16), 11);

    // With nspec=1, a second speculation() fails as unavailable; speculate(5) drops the clause's
    // data without a fault (DTrace for Linux).
    let (mut fw, _c) = new_fw();
    let p = program(vec![
        ecb(
            "dtrace:::BEGIN",
            None,
            vec![
                trace_int(0),
                act(
                    ActionKind::DifExpr,
                    Some(asm("call speculation, %r1\nret %r1\n")),
                ),
                act(
                    ActionKind::DifExpr,
                    Some(asm("call speculation, %r1\nret %r1\n")),
                ),
            ],
        ),
        ecb(
            "dtrace:::BEGIN",
            None,
            vec![act(
                ActionKind::Speculate,
                Some(asm("setx 5, %r1\nret %r1\n")),
            )],
        ),
    ]);
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    let data = fw.switch_buffer(0).unwrap().data;
    assert_eq!(u64_at(&data, 24), 1);
    assert_eq!(u64_at(&data, 32), 0);
    assert_eq!(fw.status().spec_unavail, 1);
    assert_eq!(data.len(), 40);
}

#[test]
fn a_speculation_committed_on_another_cpu_is_not_lost_when_tracing_stops() {
    // Speculated on CPU 1 by a tick, committed on CPU 0 by another: the cleaner (cleanrate)
    // has not run when tracing stops, so stop() commits it, into CPU 1's buffer.
    let (mut fw, _c) = new_fw();
    let p = program(vec![
        begin_speculation(),
        ecb(
            "profile:::tick-1",
            Some(asm(
                "ldgs cpu, %r1\nsetx 1, %r2\ncmp %r1, %r2\nbe yes\nret %r0\nyes:\nret %r2\n",
            )),
            vec![on_spec(ActionKind::Speculate), trace_int(11)],
        ),
        ecb(
            "profile:::tick-1",
            Some(asm(
                "ldgs cpu, %r1\ntst %r1\nbe yes\nret %r0\nyes:\nsetx 1, %r2\nret %r2\n",
            )),
            vec![on_spec(ActionKind::Commit)],
        ),
    ]);
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    let tick = fw.list_probes(&pd("profile:::tick-1"))[0].id;
    fw.fire(tick, 1, &FiringContext::default());
    fw.fire(tick, 0, &FiringContext::default());
    assert!(fw.switch_buffer(1).unwrap().data.is_empty());
    fw.stop().unwrap();
    let data = fw.switch_buffer(1).unwrap().data;
    assert_eq!(data.len(), 24, "the committed record is in CPU 1's buffer");
    assert_eq!(u64_at(&data, 16), 11);
}

#[test]
fn destructive_actions_need_the_option() {
    let (mut fw, _c) = new_fw();
    let p = program(vec![ecb(
        "dtrace:::BEGIN",
        None,
        vec![act(ActionKind::Raise, Some(asm("setx 9, %r1\nret %r1\n")))],
    )]);
    // enabled, then refused when tracing starts (DTrace's EDT_DESTRUCTIVE from go)
    fw.enable(&p, false).unwrap();
    assert_eq!(
        fw.go().unwrap_err().to_string(),
        "Destructive actions not allowed"
    );
    fw.set_option("destructive", None).unwrap();
    fw.go().unwrap();
    assert_eq!(
        fw.take_requests(),
        vec![DestructiveRequest::Raise {
            pid: 0,
            tid: 0,
            signal: 9
        }]
    );
}

#[test]
fn switch_buffer_counts_drops_and_fill_reports_filled() {
    for policy in ["switch", "fill", "ring"] {
        let (mut fw, _c) = new_fw();
        fw.set_option("bufsize", Some("64")).unwrap();
        fw.set_option("bufpolicy", Some(policy)).unwrap();
        let p = program(vec![
            ecb("profile:::tick-1", None, vec![trace_int(1)]),
            ecb("dtrace:::END", None, vec![trace_int(2)]),
        ]);
        fw.enable(&p, false).unwrap();
        fw.go().unwrap();
        let tick = fw.list_probes(&pd("profile:::tick-1"))[0].id;
        for _ in 0..5 {
            fw.fire(tick, 0, &FiringContext::default());
        }
        fw.stop().unwrap();
        let snap = fw.switch_buffer(0).unwrap();
        let vals: Vec<u64> = records(&snap.data, &|_| 24)
            .iter()
            .map(|r| u64_at(r.1, 16))
            .collect();
        match policy {
            "switch" => {
                assert_eq!(vals, vec![1, 1]);
                assert_eq!(snap.drops, 4);
            }
            "fill" => {
                // 24 bytes are reserved for END: one tick record fits, END fits.
                assert_eq!(vals, vec![1, 2]);
                assert_eq!(snap.drops, 4);
                assert!(fw.status().filled);
            }
            _ => {
                assert_eq!(vals, vec![1, 2]);
                assert_eq!(snap.drops, 0);
            }
        }
    }
}

#[test]
fn events_from_other_threads() {
    let (mut fw, _c) = new_fw();
    let p = program(vec![ecb(
        "profile:::tick-1",
        None,
        vec![act(
            ActionKind::DifExpr,
            Some(asm("ldgs pid, %r1\nret %r1\n")),
        )],
    )]);
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    let tick = fw.list_probes(&pd("profile:::tick-1"))[0].id;
    let tx = fw.event_sender();
    let h = std::thread::spawn(move || {
        for pid in 1..=3u64 {
            let ctx = FiringContext {
                pid,
                ..FiringContext::default()
            };
            assert!(tx.send(ProbeEvent {
                probe: tick,
                cpu: 1,
                ctx,
                memory: None
            }));
        }
    });
    h.join().unwrap();
    assert_eq!(fw.process_events(), 3);
    let snap = fw.switch_buffer(1).unwrap();
    let pids: Vec<u64> = records(&snap.data, &|_| 24)
        .iter()
        .map(|r| u64_at(r.1, 16))
        .collect();
    assert_eq!(pids, vec![1, 2, 3]);
}

#[test]
fn thread_locals_are_per_thread() {
    let (mut fw, _c) = new_fw();
    let v = ".var ts 1280 scl tls r/w int 8\n";
    let p = program(vec![
        ecb(
            "profile:::tick-1",
            Some(asm(&format!("{v}ldts ts, %r1\nret %r1\n"))),
            vec![act(
                ActionKind::DifExpr,
                Some(asm(&format!("{v}ldts ts, %r1\nret %r1\n"))),
            )],
        ),
        ecb(
            "profile:::tick-1",
            None,
            vec![act(
                ActionKind::DifExpr,
                Some(asm(&format!(
                    "{v}ldgs tid, %r1\nstts %r1, ts\nret %r0\n.rtype int 0\n"
                ))),
            )],
        ),
    ]);
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    let tick = fw.list_probes(&pd("profile:::tick-1"))[0].id;
    for tid in [7u64, 8, 7] {
        let ctx = FiringContext {
            tid,
            ..FiringContext::default()
        };
        fw.fire(tick, 0, &ctx);
    }
    let snap = fw.switch_buffer(0).unwrap();
    let vals: Vec<u64> = records(&snap.data, &|_| 24)
        .iter()
        .map(|r| u64_at(r.1, 16))
        .collect();
    // Only the third firing (thread 7 again) sees its own earlier value.
    assert_eq!(vals, vec![7]);
    // When thread 7 exits its variables go.
    fw.thread_exit(7);
    let ctx = FiringContext {
        tid: 7,
        ..FiringContext::default()
    };
    fw.fire(tick, 0, &ctx);
    assert!(fw.switch_buffer(0).unwrap().data.is_empty());
}

#[test]
fn fuzz_smoke_random_programs() {
    // A few thousand random programs (random DIF, actions, options) must run without panicking.
    let mut started = 0;
    for seed in 0..4000u64 {
        let bytes = dtrace_framework::fuzzing::smoke_bytes(seed, 256);
        started += dtrace_framework::fuzzing::fire_program(&bytes) as u32;
    }
    // Enough of them get past enabling to exercise probe context.
    eprintln!("{started} of 4000 random programs ran");
    assert!(started > 300, "only {started} random programs ran");
}

#[test]
fn fuzz_smoke_inputs() {
    for seed in 0..3000u64 {
        let len = (seed % 40) as usize;
        let mut bytes = dtrace_framework::fuzzing::smoke_bytes(seed, len);
        // Bias towards printable text and glob characters.
        for c in bytes.iter_mut() {
            *c = b"0123456789kmgtKxX*?[]!\\-hzsecmin. "[(*c as usize) % 34];
        }
        dtrace_framework::fuzzing::parse_inputs(&bytes);
    }
}

#[test]
fn compound_and_prefix_string_keys() {
    let (mut fw, _c) = new_fw();
    // @a[execname, arg0] = sum(arg1); @b[execname] = count();
    let exe = || {
        act(
            ActionKind::DifExpr,
            Some(asm("ldgs execname, %r1\nret %r1\n.rtype string\n")),
        )
    };
    let arg = |n: u32| {
        act(
            ActionKind::DifExpr,
            Some(asm(&format!("ldgs arg{n}, %r1\nret %r1\n"))),
        )
    };
    let mut sum = act(ActionKind::AggSum, Some(asm("ldgs arg1, %r1\nret %r1\n")));
    sum.ntuple = 2;
    let mut count = act(ActionKind::AggCount, None);
    count.ntuple = 1;
    count.uarg = 1;
    let p = program(vec![ecb(
        "profile:::tick-1",
        None,
        vec![exe(), arg(0), sum, exe(), count],
    )]);
    let en = fw.enable(&p, false).unwrap();
    assert_eq!(
        en.aggs[0].recs.iter().map(|r| r.offset).collect::<Vec<_>>(),
        [0, 256, 264]
    );
    fw.go().unwrap();
    let tick = fw.list_probes(&pd("profile:::tick-1"))[0].id;
    for (name, a0, a1) in [("ab", 1, 10), ("abc", 1, 20), ("ab", 1, 30), ("ab", 2, 40)] {
        let mut ctx = FiringContext {
            execname: name.into(),
            ..FiringContext::default()
        };
        ctx.args[0] = a0;
        ctx.args[1] = a1;
        fw.fire(tick, 0, &ctx);
    }
    let snap = fw.snapshot_aggregations();
    let mut got: Vec<(u32, String, Vec<u64>)> = snap[0]
        .records
        .iter()
        .map(|r| {
            let name_end = r.key.iter().position(|&b| b == 0).unwrap();
            assert!(r.key[name_end..256].iter().all(|&b| b == 0));
            let rest: Vec<u64> = r.key[256..]
                .chunks(8)
                .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
                .collect();
            let mut v = rest;
            v.push(u64_at(&r.value, 0));
            (
                r.aggid,
                String::from_utf8(r.key[..name_end].to_vec()).unwrap(),
                v,
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            (1, "ab".into(), vec![1, 40]),
            (1, "ab".into(), vec![2, 40]),
            (1, "abc".into(), vec![1, 20]),
            (2, "ab".into(), vec![3]),
            (2, "abc".into(), vec![1]),
        ]
    );
}

#[test]
fn begin_fires_in_the_consumer_context() {
    let (mut fw, _c) = new_fw();
    fw.set_consumer_context(FiringContext {
        pid: 1234,
        execname: "dtrace".into(),
        ..FiringContext::default()
    });
    let p = program(vec![ecb(
        "dtrace:::BEGIN",
        None,
        vec![act(
            ActionKind::DifExpr,
            Some(asm("ldgs pid, %r1\nret %r1\n")),
        )],
    )]);
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    assert_eq!(u64_at(&fw.switch_buffer(0).unwrap().data, 16), 1234);
}

/// BEGIN and END read the consumer's memory when one is set (kernel reads through `curthread`).
#[test]
fn begin_and_end_read_the_consumer_memory() {
    let (mut fw, _c) = new_fw();
    let task = 0xffff_8880_0000_1000u64;
    fw.set_consumer_context(FiringContext {
        curthread: task,
        ..FiringContext::default()
    });
    let mut mem = dtrace_dif::vm::fake::FakeMemory::new();
    mem.kernel.insert(task + 8, 4321u64.to_ne_bytes().to_vec());
    fw.set_consumer_memory(Box::new(mem));
    let read = || {
        act(
            ActionKind::DifExpr,
            Some(asm(
                "ldgs curthread, %r1\nsetx 8, %r2\nadd %r1, %r2, %r1\nldx [%r1], %r1\nret %r1\n",
            )),
        )
    };
    let p = program(vec![
        ecb("dtrace:::BEGIN", None, vec![read()]),
        ecb("dtrace:::END", None, vec![read()]),
    ]);
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    assert_eq!(u64_at(&fw.switch_buffer(0).unwrap().data, 16), 4321);
    fw.stop().unwrap();
    assert_eq!(u64_at(&fw.switch_buffer(0).unwrap().data, 16), 4321);
}

#[test]
fn framework_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<Framework>();
    assert_send::<EventSender>();
}

/// A provider that refuses to enable its probe.
struct Refusing;

impl Provider for Refusing {
    fn name(&self) -> &str {
        "refusing"
    }
    fn attributes(&self) -> dtrace_framework::provider::ProviderAttributes {
        use dtrace_framework::provider::{Attribute, DepClass, Stability};
        let a = Attribute::new(Stability::Private, Stability::Private, DepClass::Unknown);
        dtrace_framework::provider::ProviderAttributes {
            provider: a,
            module: a,
            function: a,
            name: a,
            args: a,
        }
    }
    fn provide(
        &mut self,
        desc: Option<&ProbeDesc>,
        sink: &mut dtrace_framework::provider::ProbeSink<'_>,
    ) {
        if desc.is_none() {
            sink.create("mod", "func", "never");
        }
    }
    fn enable(
        &mut self,
        probe: &dtrace_framework::records::ProbeInfo,
    ) -> Result<(), dtrace_framework::provider::ProviderError> {
        Err(dtrace_framework::provider::ProviderError::Enable {
            probe: probe.name.clone(),
            reason: "no such thing".into(),
        })
    }
    fn disable(&mut self, _probe: &dtrace_framework::records::ProbeInfo) {}
}

#[test]
fn provider_refusal_enables_nothing() {
    let (mut fw, _c) = new_fw();
    fw.register_provider(Box::new(Refusing)).unwrap();
    assert!(fw.register_provider(Box::new(Refusing)).is_err());
    let info = fw.list_probes(&pd("refusing:::"));
    assert_eq!(info.len(), 1);
    assert_eq!((info[0].id, info[0].module.as_str()), (4 + 13, "mod"));
    let p = program(vec![
        ecb("dtrace:::BEGIN", None, vec![]),
        ecb("refusing:::never", None, vec![]),
    ]);
    let e = fw.enable(&p, false).unwrap_err();
    assert_eq!(e.to_string(), "cannot enable probe never: no such thing");
    assert_eq!(fw.eprobe(1), None);
    let p = program(vec![ecb("dtrace:::BEGIN", None, vec![])]);
    assert_eq!(fw.enable(&p, false).unwrap().eprobes[0].epid, 1);
}

#[test]
fn cpu_option_restricts_tracing() {
    let (mut fw, _c) = new_fw();
    fw.set_option("cpu", Some("1")).unwrap();
    let p = program(vec![
        ecb("dtrace:::BEGIN", None, vec![trace_int(1)]),
        ecb("profile:::tick-1", None, vec![trace_int(2)]),
    ]);
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    let tick = fw.list_probes(&pd("profile:::tick-1"))[0].id;
    fw.fire(tick, 0, &FiringContext::default());
    fw.fire(tick, 1, &FiringContext::default());
    assert!(fw.switch_buffer(0).unwrap().data.is_empty());
    let vals: Vec<u64> = records(&fw.switch_buffer(1).unwrap().data, &|_| 24)
        .iter()
        .map(|r| u64_at(r.1, 16))
        .collect();
    assert_eq!(vals, vec![1, 2]);

    let (mut fw, _c) = new_fw();
    fw.set_option("cpu", Some("5")).unwrap();
    fw.enable(&p, false).unwrap();
    assert_eq!(fw.go().unwrap_err(), FrameworkError::BadCpu(5));
}

#[test]
fn buffer_too_small_for_a_record() {
    let (mut fw, _c) = new_fw();
    fw.set_option("bufsize", Some("16")).unwrap();
    let p = program(vec![ecb("dtrace:::BEGIN", None, vec![trace_int(1)])]);
    fw.enable(&p, false).unwrap();
    let e = fw.go().unwrap_err();
    assert_eq!(e, FrameworkError::BufferTooSmall);
    assert_eq!(e.to_string(), "Enabling exceeds size of buffer");
}

#[test]
fn fill_buffers_must_have_room_for_the_end_records() {
    let (mut fw, _c) = new_fw();
    fw.set_option("bufsize", Some("32")).unwrap();
    fw.set_option("bufpolicy", Some("fill")).unwrap();
    let p = program(vec![
        ecb("dtrace:::BEGIN", None, vec![trace_int(1)]),
        ecb("dtrace:::END", None, vec![trace_int(1), trace_int(2)]),
    ]);
    fw.enable(&p, false).unwrap();
    let e = fw.go().unwrap_err();
    assert_eq!(e, FrameworkError::EndTooBig);
    assert_eq!(
        e.to_string(),
        "END enablings exceed size of principal buffer"
    );
}

#[test]
fn dynamic_variable_drops_are_counted() {
    let (mut fw, _c) = new_fw();
    fw.set_option("dynvarsize", Some("256")).unwrap();
    let v = ".var ts 1280 scl tls r/w int 8\n";
    let p = program(vec![ecb(
        "profile:::tick-1",
        None,
        vec![act(
            ActionKind::DifExpr,
            Some(asm(&format!(
                "{v}setx 1, %r1\nstts %r1, ts\nret %r0\n.rtype int 0\n"
            ))),
        )],
    )]);
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    let tick = fw.list_probes(&pd("profile:::tick-1"))[0].id;
    for tid in 1..=100u64 {
        let ctx = FiringContext {
            tid,
            ..FiringContext::default()
        };
        fw.fire(tick, 0, &ctx);
    }
    let st = fw.status();
    assert!(st.dynvar_drops > 0, "{st:?}");
    assert!(fw.vars().dynvars.len() < 100);
}

#[test]
fn faults_reach_the_error_program_without_fault_records() {
    let mut fw = Framework::new(Options::default(), 1);
    // libdtrace's ERROR program: trace(arg1) ... trace(arg5).
    let p = program(vec![
        ecb(
            "dtrace:::BEGIN",
            None,
            vec![act(
                ActionKind::DifExpr,
                Some(asm("setx 0, %r1\nldx [%r1], %r2\nret %r2\n")),
            )],
        ),
        ecb(
            "dtrace:::ERROR",
            None,
            (1..=5)
                .map(|n| {
                    act(
                        ActionKind::DifExpr,
                        Some(asm(&format!("ldgs arg{n}, %r1\nret %r1\n"))),
                    )
                })
                .collect(),
        ),
    ]);
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    let data = fw.switch_buffer(0).unwrap().data;
    let recs: Vec<_> =
        dtrace_framework::records::RecordIter::new(&data, |e| fw.eprobe(e).map(|d| d.size))
            .map(|r| r.unwrap())
            .collect();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].1, 2);
    let args: Vec<u64> = (0..5).map(|i| u64_at(recs[0].2, 16 + 8 * i)).collect();
    assert_eq!(args, vec![1, 0, 1, 1, 0]);
}

#[test]
fn unverifiable_dif_is_refused() {
    let (mut fw, _c) = new_fw();
    let p = program(vec![ecb(
        "dtrace:::BEGIN",
        None,
        vec![act(ActionKind::DifExpr, Some(DifObject::default()))],
    )]);
    match fw.enable(&p, false) {
        Err(FrameworkError::InvalidDif { desc, reason }) => {
            assert_eq!(desc, "dtrace:::BEGIN");
            assert!(reason.contains("ret"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fw.eprobe(1), None);
}

#[test]
fn tick_firings_carry_their_expiration_times() {
    let (mut fw, clock) = new_fw();
    clock.set(10);
    let p = program(vec![ecb(
        "profile:::tick-1sec",
        None,
        vec![act(
            ActionKind::DifExpr,
            Some(asm("ldgs timestamp, %r1\nret %r1\n")),
        )],
    )]);
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    assert_eq!(fw.poll(), 0);
    assert_eq!(fw.next_deadline(), Some(10 + 1_000_000_000));
    clock.set(10 + 3_500_000_000);
    assert_eq!(fw.poll(), 3);
    let data = fw.switch_buffer(0).unwrap().data;
    let got: Vec<(u64, u64)> = records(&data, &|_| 24)
        .iter()
        .map(|r| (read_header(r.1).unwrap().1, u64_at(r.1, 16)))
        .collect();
    let want: Vec<(u64, u64)> = (1..=3u64)
        .map(|k| (10 + k * 1_000_000_000, 10 + k * 1_000_000_000))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn copyinstr_reads_captured_memory_and_faults_outside_it() {
    let (mut fw, _c) = new_fw();
    // trace(copyinstr(arg0))
    let p = program(vec![ecb(
        "profile:::tick-1",
        None,
        vec![act(
            ActionKind::DifExpr,
            Some(asm(
                "ldgs arg0, %r1\npushtv int, %r1\ncall copyinstr, %r2\nret %r2\n.rtype string\n",
            )),
        )],
    )]);
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    let tick = fw.list_probes(&pd("profile:::tick-1"))[0].id;
    let mut mem = CapturedMemory::new();
    mem.add(0x7000, b"/etc/passwd\0".to_vec(), true);
    let mut ctx = FiringContext::default();
    ctx.args[0] = 0x7000;
    fw.fire_with_memory(tick, 0, &ctx, &mut mem);
    ctx.args[0] = 0x9000;
    fw.fire_with_memory(tick, 0, &ctx, &mut mem);
    let data = fw.switch_buffer(0).unwrap().data;
    let recs: Vec<_> =
        dtrace_framework::records::RecordIter::new(&data, |e| fw.eprobe(e).map(|d| d.size))
            .map(|r| r.unwrap())
            .collect();
    assert_eq!(recs.len(), 2);
    assert_eq!(&recs[0].2[16..28], b"/etc/passwd\0");
    let f = FaultRecord::decode(recs[1].2).unwrap();
    assert_eq!((f.kind, f.addr), (1, 0x9000));
}

#[test]
fn printf_without_arguments_records() {
    let (mut fw, _c) = new_fw();
    let mut printf = act(ActionKind::Printf, None);
    printf.arg = 0;
    let mut p = program(vec![ecb("dtrace:::BEGIN", None, vec![printf])]);
    p.formats.push(b"hello\n".to_vec());
    let en = fw.enable(&p, false).unwrap();
    let r = en.eprobes[0].recs[0];
    assert_eq!((r.offset, r.size, r.format), (12, 4, 1));
    fw.go().unwrap();
    let data = fw.switch_buffer(0).unwrap().data;
    assert_eq!(data.len(), 16);
    assert_eq!(read_header(&data).unwrap().0, 1);
}

#[test]
fn quantize_increment_weights_the_bucket() {
    let (mut fw, _c) = new_fw();
    // @ = quantize(arg0, arg1): the increment is a zero-size expression counted in ntuple.
    let mut q = act(
        ActionKind::AggQuantize,
        Some(asm("ldgs arg0, %r1\nret %r1\n")),
    );
    q.ntuple = 1;
    let incr = act(
        ActionKind::DifExpr,
        Some(asm("ldgs arg1, %r1\nret %r1\n.rtype int 0\n")),
    );
    let p = program(vec![ecb("profile:::tick-1", None, vec![incr, q])]);
    let en = fw.enable(&p, false).unwrap();
    assert_eq!(en.aggs[0].recs.len(), 1);
    fw.go().unwrap();
    let tick = fw.list_probes(&pd("profile:::tick-1"))[0].id;
    for (a0, a1) in [(5u64, 3u64), (5, 4), (100, 1)] {
        let mut ctx = FiringContext::default();
        ctx.args[0] = a0;
        ctx.args[1] = a1;
        fw.fire(tick, 1, &ctx);
    }
    let snap = fw.snapshot_aggregations();
    let r = &snap[1].records[0];
    assert!(r.key.is_empty());
    let b = |i: usize| u64_at(&r.value, i * 8);
    assert_eq!(b(QUANTIZE_ZEROBUCKET + 3), 7); // 4..7
    assert_eq!(b(QUANTIZE_ZEROBUCKET + 7), 1); // 64..127
}

#[test]
fn freed_dynamic_variable_space_is_reusable_in_the_same_firing() {
    let (mut fw, _c) = new_fw();
    // Every dynamic variable costs the program's largest one: 4 bytes (an int), so 15 bytes hold
    // three thread-locals (DTrace for Linux's sizing).
    fw.set_option("dynvarsize", Some("15")).unwrap();
    let v = ".var a 1280 scl tls r/w int 4\n.var b 1281 scl tls r/w int 4\n\
             .var c 1282 scl tls r/w int 4\n.var d 1283 scl tls r/w int 4\n";
    // self->a..c fill the space; self->a = 0 frees one, so self->d fits at once; a fifth drops.
    let p = Program {
        max_dvar_size: 4,
        ..program(vec![ecb(
            "profile:::tick-1",
            None,
            vec![act(
                ActionKind::DifExpr,
                Some(asm(&format!(
                    "{v}setx 1, %r1\nstts %r1, a\nstts %r1, b\nstts %r1, c\nstts %r0, a\n\
                     stts %r1, d\nstts %r1, a\nret %r0\n.rtype int 0\n"
                ))),
            )],
        )])
    };
    fw.enable(&p, false).unwrap();
    assert_eq!(fw.dynvar_entry_size(), 4);
    fw.go().unwrap();
    let tick = fw.list_probes(&pd("profile:::tick-1"))[0].id;
    let ctx = FiringContext {
        tid: 7,
        ..FiringContext::default()
    };
    fw.fire(tick, 0, &ctx);
    assert_eq!(fw.status().dynvar_drops, 1);
    assert_eq!(fw.vars().dynvars.len(), 3);
}

#[test]
fn clauses_are_numbered_over_every_program_for_the_error_probe() {
    let (mut fw, _c) = new_fw();
    let bad = || asm("setx 0, %r1\nldx [%r1], %r2\nret %r2\n");
    // Program 1: clauses 0 and 1; program 2: clause 2, which faults.
    fw.enable(
        &program(vec![
            ecb("dtrace:::BEGIN", None, vec![trace_int(1)]),
            ecb("dtrace:::END", None, vec![trace_int(2)]),
        ]),
        false,
    )
    .unwrap();
    let en = fw
        .enable(
            &program(vec![ecb(
                "dtrace:::BEGIN",
                None,
                vec![act(ActionKind::DifExpr, Some(bad()))],
            )]),
            false,
        )
        .unwrap();
    assert_eq!(en.eprobes[0].clause, 2);
    fw.go().unwrap();
    let data = fw.switch_buffer(0).unwrap().data;
    let recs = records(&data, &|e| if e == FAULT_EPID { 56 } else { 24 });
    let f = FaultRecord::decode(recs[1].1).unwrap();
    assert_eq!((f.probe, f.clause, f.pc, f.kind), (1, 2, 1, 1));
}

#[test]
fn exit_stops_the_remaining_clauses_of_the_firing() {
    let (mut fw, _c) = new_fw();
    let exit = act(
        ActionKind::Exit,
        Some(asm("setx 3, %r1\nret %r1\n.rtype int 4\n")),
    );
    fw.enable(
        &program(vec![
            ecb("dtrace:::BEGIN", None, vec![trace_int(1)]),
            ecb("dtrace:::BEGIN", None, vec![exit]),
            ecb("dtrace:::BEGIN", None, vec![trace_int(2)]),
            ecb("dtrace:::END", None, vec![trace_int(3)]),
        ]),
        false,
    )
    .unwrap();
    fw.go().unwrap();
    fw.stop().unwrap();
    let data = fw.switch_buffer(0).unwrap().data;
    let epids: Vec<u32> = records(&data, &|e| fw.eprobe(e).map_or(0, |d| d.size as usize))
        .iter()
        .map(|r| r.0)
        .collect();
    // BEGIN's first clause, the exit() record, then END: BEGIN's third clause does not run.
    assert_eq!(epids, vec![1, 2, 4]);
}

#[test]
fn a_speculative_clause_larger_than_specsize_is_abandoned() {
    // specsize 16: BEGIN's speculative clause records 24 bytes, so at speculate() the clause is
    // abandoned (its store to `n` does not happen) and a speculative drop is counted.
    let opts = Options {
        specsize: 16,
        ..Options::default()
    };
    let mut fw = Framework::new(opts, 1);
    let n_var = ".var n 1281 scl glb r/w int 8\n";
    let p = program(vec![
        begin_speculation(),
        ecb(
            "dtrace:::BEGIN",
            None,
            vec![
                on_spec(ActionKind::Speculate),
                trace_int(11),
                act(
                    ActionKind::DifExpr,
                    Some(asm(&format!(
                        "{n_var}setx 1, %r1\nstgs %r1, n\nret %r0\n.rtype int 0\n"
                    ))),
                ),
            ],
        ),
        ecb("dtrace:::BEGIN", None, vec![on_spec(ActionKind::Commit)]),
        ecb(
            "dtrace:::BEGIN",
            None,
            vec![act(
                ActionKind::DifExpr,
                Some(asm(&format!("{n_var}ldgs n, %r1\nret %r1\n"))),
            )],
        ),
    ]);
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    let data = fw.switch_buffer(0).unwrap().data;
    // Only the last clause's record: `n` is still 0.
    assert_eq!(data.len(), 24);
    assert_eq!(u32_at(&data, 0), 4);
    assert_eq!(u64_at(&data, 16), 0);
    assert_eq!(fw.status().spec_drops, 1);
}

/// A provider whose probes (`growing:<module>:f:go`) appear as modules are added to its list, as
/// a process's libraries appear to the pid provider.
struct Growing(std::sync::Arc<std::sync::Mutex<Vec<&'static str>>>);

impl Provider for Growing {
    fn name(&self) -> &str {
        "growing"
    }
    fn attributes(&self) -> dtrace_framework::provider::ProviderAttributes {
        Refusing.attributes()
    }
    fn provide(
        &mut self,
        _desc: Option<&ProbeDesc>,
        sink: &mut dtrace_framework::provider::ProbeSink<'_>,
    ) {
        for m in self.0.lock().unwrap().iter() {
            sink.create(m, "f", "go");
        }
    }
    fn enable(
        &mut self,
        _probe: &dtrace_framework::records::ProbeInfo,
    ) -> Result<(), dtrace_framework::provider::ProviderError> {
        Ok(())
    }
    fn disable(&mut self, _probe: &dtrace_framework::records::ProbeInfo) {}
}

#[test]
fn descriptions_are_matched_again_when_probes_appear() {
    let (mut fw, _c) = new_fw();
    let modules = std::sync::Arc::new(std::sync::Mutex::new(vec!["a.out"]));
    fw.register_provider(Box::new(Growing(modules.clone())))
        .unwrap();
    let p = program(vec![
        ecb("growing:::go", None, vec![trace_int(7)]),
        ecb("growing:lib2::go", None, vec![trace_int(8)]),
    ]);
    // The second description matches nothing yet: an error without -Z.
    assert!(fw.enable(&p, false).is_err());
    let en = fw.enable(&p, true).unwrap();
    assert_eq!((en.matched, en.eprobes.len()), (1, 1));
    let first_clause = en.eprobes[0].clause;
    fw.go().unwrap();
    assert!(fw.enable_new(&|_| true).unwrap().eprobes.is_empty());
    modules.lock().unwrap().push("lib2");
    // Descriptions left out are not matched.
    assert!(fw
        .enable_new(&|d| d.provider != "growing")
        .unwrap()
        .eprobes
        .is_empty());
    let new = fw.enable_new(&|_| true).unwrap();
    // Both clauses match lib2's probe: one ECB each, with the clauses' statement ids.
    assert_eq!(new.eprobes.len(), 2);
    let lib2 = new.eprobes[0].probe_id;
    assert!(new.eprobes.iter().all(|e| e.probe_id == lib2));
    let clauses: Vec<u32> = new.eprobes.iter().map(|e| e.clause).collect();
    assert_eq!(clauses, vec![first_clause, first_clause + 1]);
    assert_eq!(fw.probe_info(lib2).unwrap().module, "lib2");
    assert!(new.probes.iter().any(|p| p.id == lib2));
    // Nothing new the second time.
    assert!(fw.enable_new(&|_| true).unwrap().eprobes.is_empty());
    // The new ECBs record when their probe fires.
    fw.fire(lib2, 0, &FiringContext::default());
    let snap = fw.switch_buffer(0).unwrap();
    let epids: Vec<u32> = records(&snap.data, &|e| fw.eprobe(e).unwrap().size as usize)
        .iter()
        .map(|(e, _)| *e)
        .collect();
    let want: Vec<u32> = new.eprobes.iter().map(|e| e.epid).collect();
    assert_eq!(epids, want);
}

#[test]
fn records_built_elsewhere_are_committed_unchanged() {
    let (mut fw, _c) = new_fw();
    let p = program(vec![
        ecb("profile:::tick-1s", None, vec![trace_int(5)]),
        ecb(
            "profile:::tick-1s",
            None,
            vec![
                trace_int(6),
                act(
                    ActionKind::Exit,
                    Some(asm("setx 3, %r1\nret %r1\n.rtype int 4\n")),
                ),
            ],
        ),
    ]);
    let en = fw.enable(&p, false).unwrap();
    let (one, two) = (&en.eprobes[0], &en.eprobes[1]);
    assert_eq!((one.size, two.size), (24, 28));
    // As the provider would build them where the probe fires.
    let built = |epid: u32, size: usize, value: u64, exit: Option<u32>| {
        let mut r = vec![0u8; size.next_multiple_of(8)];
        r[..4].copy_from_slice(&epid.to_ne_bytes());
        r[4..8].copy_from_slice(&7u32.to_ne_bytes());
        r[8..12].copy_from_slice(&9u32.to_ne_bytes());
        r[16..24].copy_from_slice(&value.to_ne_bytes());
        if let Some(x) = exit {
            r[24..28].copy_from_slice(&x.to_ne_bytes());
        }
        r
    };
    let first = built(one.epid, 24, 55, None);
    // Only while tracing, and only for a clause run elsewhere.
    assert!(!fw.commit_elsewhere(1, &first));
    fw.go().unwrap();
    assert!(!fw.commit_elsewhere(1, &first));
    fw.run_elsewhere(one.epid);
    fw.run_elsewhere(two.epid);
    assert!(fw.commit_elsewhere(1, &first));
    // Shorter than the ECB's record, or naming no ECB: refused.
    assert!(!fw.commit_elsewhere(1, &first[..20]));
    assert!(!fw.commit_elsewhere(1, &built(99, 24, 1, None)));
    assert!(!fw.commit_elsewhere(7, &first));
    // exit() in a built record ends tracing as the interpreter's does: nothing after it.
    assert!(fw.commit_elsewhere(1, &built(two.epid, 28, 66, Some(3))));
    assert_eq!(fw.status().exit_status, Some(3));
    assert!(!fw.commit_elsewhere(1, &first));
    let snap = fw.switch_buffer(1).unwrap();
    let recs = records(&snap.data, &|e| if e == one.epid { 24 } else { 28 });
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].1, &first[..24]);
    assert_eq!(read_header(recs[0].1), Some((one.epid, (7u64 << 32) | 9)));
    assert_eq!((u64_at(recs[1].1, 16), u32_at(recs[1].1, 24)), (66, 3));
}

#[test]
fn faults_elsewhere_are_reported_as_the_interpreters() {
    let (mut fw, _c) = new_fw();
    let error_args = ecb(
        "dtrace:::ERROR",
        None,
        (1..=5)
            .map(|n| {
                act(
                    ActionKind::DifExpr,
                    Some(asm(&format!("ldgs arg{n}, %r1\nret %r1\n"))),
                )
            })
            .collect(),
    );
    let p = program(vec![
        ecb("profile:::tick-1s", None, vec![trace_int(5)]),
        error_args,
    ]);
    let en = fw.enable(&p, false).unwrap();
    let one = &en.eprobes[0];
    let mut mem = dtrace_dif::vm::NoMemory;
    let ctx = FiringContext {
        timestamp: Some(77),
        ..FiringContext::default()
    };
    // Only while tracing, and only for a clause run elsewhere.
    assert!(!fw.fault_elsewhere(one.epid, 1, 3, 4, 0, &ctx, &mut mem));
    fw.go().unwrap();
    fw.switch_buffer(1).unwrap();
    assert!(!fw.fault_elsewhere(one.epid, 1, 3, 4, 0, &ctx, &mut mem));
    fw.run_elsewhere(one.epid);
    assert!(!fw.fault_elsewhere(99, 1, 3, 4, 0, &ctx, &mut mem));
    assert!(!fw.fault_elsewhere(one.epid, 7, 3, 4, 0, &ctx, &mut mem));
    assert!(fw.fault_elsewhere(one.epid, 1, 3, 1, 0x10, &ctx, &mut mem));
    assert_eq!(fw.status().errors, 1);
    // The fault record, then the ERROR clause's record with DTrace's arguments.
    let snap = fw.switch_buffer(1).unwrap();
    let recs = records(&snap.data, &|_| 56);
    assert_eq!(recs.len(), 2);
    assert_eq!(read_header(recs[0].1), Some((FAULT_EPID, 77)));
    let f = FaultRecord::decode(recs[0].1).unwrap();
    assert_eq!(
        f,
        FaultRecord {
            probe: one.probe_id,
            clause: 0,
            pc: 3,
            kind: 1,
            addr: 0x10
        }
    );
    let args: Vec<u64> = (0..5).map(|i| u64_at(recs[1].1, 16 + 8 * i)).collect();
    assert_eq!(args, vec![u64::from(one.probe_id), 0, 3, 1, 0x10]);
}

/// A clause whose record finds no room in the principal buffer is skipped whole, as DTrace's
/// `dtrace_probe()` skips an ECB whose `dte_needed` it cannot reserve: one drop, and none of
/// its stores (here `n++` before `trace(n)`) happen; a predicate with side effects does not run
/// either. An aggregation-only clause (no record) always runs.
#[test]
fn a_clause_without_room_for_its_record_is_skipped_whole() {
    let n = ".var n 1280 scl glb r/w int 8\n";
    let p = ".var p 1281 scl glb r/w int 8\n";
    let incr = |v: &str, name: &str| {
        act(
            ActionKind::DifExpr,
            Some(asm(&format!(
                "{v}ldgs {name}, %r1\nsetx 1, %r2\nadd %r1, %r2, %r1\nstgs %r1, {name}\nret %r0\n.rtype int 0\n"
            ))),
        )
    };
    let load = |v: &str, name: &str| {
        act(
            ActionKind::DifExpr,
            Some(asm(&format!("{v}ldgs {name}, %r1\nret %r1\n"))),
        )
    };
    for policy in ["switch", "fill", "ring"] {
        let (mut fw, _c) = new_fw();
        fw.set_option("bufsize", Some("96")).unwrap();
        fw.set_option("bufpolicy", Some(policy)).unwrap();
        // { n++; trace(n); }, then /++p/ { trace(p); } (a predicate that stores), then
        // @ = count().
        let pred = asm(&format!(
            "{p}ldgs p, %r1\nsetx 1, %r2\nadd %r1, %r2, %r1\nstgs %r1, p\nret %r2\n"
        ));
        let mut count = act(ActionKind::AggCount, None);
        count.uarg = 1;
        let mut prog = program(vec![
            ecb("profile:::tick-1", None, vec![incr(n, "n"), load(n, "n")]),
            ecb("profile:::tick-1", Some(pred), vec![load(p, "p")]),
            ecb("profile:::tick-1", None, vec![count]),
        ]);
        prog.aggregations.push(AggregationDesc {
            id: 1,
            name: String::new(),
        });
        fw.enable(&prog, false).unwrap();
        fw.go().unwrap();
        let tick = fw.list_probes(&pd("profile:::tick-1"))[0].id;
        for _ in 0..5 {
            fw.fire(tick, 0, &FiringContext::default());
        }
        let snap = fw.switch_buffer(0).unwrap();
        let vals: Vec<u64> = records(&snap.data, &|_| 24)
            .iter()
            .map(|r| u64_at(r.1, 16))
            .collect();
        let counted: u64 = fw
            .snapshot_aggregations()
            .iter()
            .flat_map(|s| &s.records)
            .map(|r| u64_at(&r.value, 0))
            .sum();
        assert_eq!(counted, 5, "{policy}: aggregation-only clauses always run");
        match policy {
            // Four 24-byte records fit in 96: n and p went to 2 each, then nothing changed.
            "switch" | "fill" => {
                assert_eq!(vals, vec![1, 1, 2, 2], "{policy}");
                assert_eq!(snap.drops, 6, "{policy}");
            }
            // A ring always has room: every clause ran, the newest four records are kept.
            _ => {
                assert_eq!(vals, vec![4, 4, 5, 5], "{policy}");
                assert_eq!(snap.drops, 0);
            }
        }
        // The next interval: the stores skipped before were never made.
        if policy == "switch" {
            fw.fire(tick, 0, &FiringContext::default());
            let snap = fw.switch_buffer(0).unwrap();
            let vals: Vec<u64> = records(&snap.data, &|_| 24)
                .iter()
                .map(|r| u64_at(r.1, 16))
                .collect();
            assert_eq!(vals, vec![3, 3]);
        }
    }
}
