//! D programs compiled by `dtrace-compiler` run by the framework: checks that the compiler's output
//! conventions and the framework's layout and execution agree.

use dtrace_compiler::{compile, CompileOptions};
use dtrace_framework::records::RecordIter;
use dtrace_framework::{FiringContext, Framework, ManualClock, Options};

fn run(src: &str) -> (Framework, Vec<u8>, dtrace_framework::Enabling) {
    let prog = compile(src, &CompileOptions::default()).unwrap_or_else(|e| panic!("{e:?}"));
    let mut fw = Framework::new(Options::default(), 1);
    let clock = ManualClock::default();
    clock.set(1_000);
    fw.set_clock(Box::new(clock));
    let en = fw.enable(&prog, false).unwrap();
    fw.go().unwrap();
    let tick = tick_1(&mut fw);
    for i in 0..3u64 {
        let mut ctx = FiringContext {
            execname: "sh".into(),
            ..FiringContext::default()
        };
        ctx.args[0] = i;
        fw.fire(tick, 0, &ctx);
    }
    fw.stop().unwrap();
    let data = fw.switch_buffer(0).unwrap().data;
    (fw, data, en)
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_ne_bytes(b[o..o + 8].try_into().unwrap())
}

#[test]
fn trace_printf_exit_and_aggregations() {
    let (mut fw, data, en) = run(r#"
        BEGIN { printf("hello\n"); }
        profile:::tick-1 { @c[execname] = count(); @q = quantize(arg0); trace(arg0 * 2); }
        END { exit(7); }
    "#);
    assert_eq!(en.matched, 3);
    let recs: Vec<(u32, Vec<u8>)> = RecordIter::new(&data, |e| fw.eprobe(e).map(|d| d.size))
        .map(|r| {
            let (_, e, b) = r.unwrap();
            (e, b.to_vec())
        })
        .collect();
    // BEGIN's printf, three tick traces, END's exit.
    assert_eq!(recs.len(), 5);
    assert_eq!(recs[0].0, 1);
    let traced: Vec<u64> = recs[1..4]
        .iter()
        .map(|(e, b)| {
            let d = fw.eprobe(*e).unwrap();
            let r = d.recs.iter().find(|r| r.size == 8).unwrap();
            u64_at(b, r.offset as usize)
        })
        .collect();
    assert_eq!(traced, vec![0, 2, 4]);
    assert_eq!(fw.status().exit_status, Some(7));
    let aggs = fw.snapshot_aggregations();
    let count = aggs[0]
        .records
        .iter()
        .find(|r| r.key.starts_with(b"sh\0"))
        .unwrap();
    assert_eq!(u64_at(&count.value, 0), 3);
    assert_eq!(aggs[0].records.len(), 2);
}

fn records(fw: &Framework, data: &[u8]) -> Vec<(u32, Vec<u8>)> {
    RecordIter::new(data, |e| fw.eprobe(e).map(|d| d.size))
        .map(|r| {
            let (_, e, b) = r.unwrap();
            (e, b.to_vec())
        })
        .collect()
}

#[test]
fn speculation_commit_and_discard() {
    let (fw, data, _) = run(r#"
        profile:::tick-1 { self->spec = speculation(); }
        profile:::tick-1 /self->spec/ { speculate(self->spec); trace(arg0 + 100); }
        profile:::tick-1 /self->spec && arg0 == 2/ { commit(self->spec); self->spec = 0; }
        profile:::tick-1 /self->spec && arg0 != 2/ { discard(self->spec); self->spec = 0; }
    "#);
    let recs = records(&fw, &data);
    assert_eq!(recs.len(), 1);
    let d = fw.eprobe(recs[0].0).unwrap();
    let r = d.recs.iter().find(|r| r.size == 8).unwrap();
    assert_eq!(u64_at(&recs[0].1, r.offset as usize), 102);
}

#[test]
fn faults_reach_the_error_program() {
    let (fw, data, _) = run(r#"
        BEGIN { trace(*(int *)0); }
        dtrace:::ERROR { trace(arg1); trace(arg2); trace(arg3); trace(arg4); trace(arg5); }
    "#);
    let recs = records(&fw, &data);
    assert_eq!(recs.len(), 1);
    let (epid, b) = &recs[0];
    let d = fw.eprobe(*epid).unwrap();
    assert_eq!(d.probe_id, 3);
    let args: Vec<u64> = d
        .recs
        .iter()
        .map(|r| u64_at(b, r.offset as usize))
        .collect();
    // Probe 1 (BEGIN), clause 0, some pc, invalid address (1) at 0.
    assert_eq!((args[0], args[1], args[3], args[4]), (1, 0, 1, 0));
    assert!(args[2] > 0 && args[2] != u64::MAX);
}

#[test]
fn predicates_globals_and_clause_locals() {
    let (fw, data, _) = run(r#"
        BEGIN { x = 5; }
        profile:::tick-1 /x == 5 && arg0 > 0/ { this->v = arg0 * 10; }
        profile:::tick-1 /arg0 > 0/ { trace(this->v + x); }
    "#);
    let vals: Vec<u64> = records(&fw, &data)
        .iter()
        .map(|(e, b)| {
            let d = fw.eprobe(*e).unwrap();
            u64_at(b, d.recs[0].offset as usize)
        })
        .collect();
    assert_eq!(vals, vec![15, 25]);
}

#[test]
fn every_aggregating_function_compiled() {
    let (mut fw, _data, en) = run(r#"
        profile:::tick-1
        {
            @c = count(); @s = sum(arg0); @a = avg(arg0); @mn = min(arg0); @mx = max(arg0);
            @sd = stddev(arg0); @q = quantize(arg0); @l = lquantize(arg0, 0, 10, 1);
            @ll = llquantize(arg0, 10, 0, 2, 10); @k[execname, arg0 % 2] = sum(1);
        }
    "#);
    let snap = fw.snapshot_aggregations();
    let vals: Vec<(u32, Vec<u64>)> = snap[0]
        .records
        .iter()
        .map(|r| {
            (
                r.aggid,
                r.value
                    .chunks(8)
                    .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
                    .collect(),
            )
        })
        .collect();
    let get = |aggid: u32| -> Vec<Vec<u64>> {
        vals.iter()
            .filter(|v| v.0 == aggid)
            .map(|v| v.1.clone())
            .collect()
    };
    // arg0 = 0, 1, 2 over the three firings.
    let kinds: Vec<dtrace_dif::program::ActionKind> = en
        .aggs
        .iter()
        .map(|a| a.recs.last().unwrap().action)
        .collect();
    use dtrace_dif::program::ActionKind as K;
    for (i, k) in kinds.iter().enumerate() {
        let v = get(en.aggs[i].aggid);
        match k {
            K::AggCount => assert_eq!(v, vec![vec![3]]),
            K::AggSum if en.aggs[i].recs.len() == 1 => assert_eq!(v, vec![vec![3]]),
            K::AggSum => {
                // @k[execname, arg0 % 2]: keys ("sh", 0) twice and ("sh", 1) once.
                let mut s: Vec<u64> = v.iter().map(|x| x[0]).collect();
                s.sort();
                assert_eq!(s, vec![1, 2]);
            }
            K::AggAvg => assert_eq!(v, vec![vec![3, 3]]),
            K::AggMin => assert_eq!(v, vec![vec![0]]),
            K::AggMax => assert_eq!(v, vec![vec![2]]),
            K::AggStddev => assert_eq!(v, vec![vec![3, 3, 5, 0]]),
            K::AggQuantize => {
                let q = &v[0];
                assert_eq!((q[63], q[64], q[65]), (1, 1, 1));
            }
            K::AggLquantize => {
                let q = &v[0];
                assert_eq!(q[0], dtrace_dif::program::lquantize_arg(0, 10, 1));
                assert_eq!((q[2], q[3], q[4]), (1, 1, 1));
            }
            K::AggLlquantize => {
                // the zero bucket is 28 (27 buckets below it), after the parameter word
                let q = &v[0];
                assert_eq!((q[29], q[30], q[31]), (1, 1, 1));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(kinds.len(), 10);
}

#[test]
fn if_else_and_strings() {
    let (fw, data, _) = run(r#"
        profile:::tick-1
        {
            if (arg0 == 1) { trace(probename); } else { trace(arg0 + 40); }
        }
    "#);
    let recs = records(&fw, &data);
    assert_eq!(recs.len(), 3);
    let d = |e: u32| fw.eprobe(e).unwrap();
    let first = &recs[0];
    let r = d(first.0)
        .recs
        .iter()
        .find(|r| r.size == 4 || r.size == 8)
        .copied()
        .unwrap();
    let v = if r.size == 4 {
        u32::from_ne_bytes(
            first.1[r.offset as usize..r.offset as usize + 4]
                .try_into()
                .unwrap(),
        ) as u64
    } else {
        u64_at(&first.1, r.offset as usize)
    };
    assert_eq!(v, 40);
    let second = &recs[1];
    let r = d(second.0)
        .recs
        .iter()
        .find(|r| r.size >= 16)
        .copied()
        .unwrap();
    assert_eq!(
        &second.1[r.offset as usize..r.offset as usize + 7],
        b"tick-1\0"
    );
}

#[test]
fn after_exit_nothing_but_end_fires() {
    // Three ticks fire; the first calls exit(), so the other two are not traced (DTrace's DRAINING
    // state), and END still fires at stop.
    let (mut fw, data, _) = run(r#"
        profile:::tick-1 { trace(arg0); exit(3); }
        END { trace((uint64_t)99); }
    "#);
    let recs = records(&fw, &data);
    let values: Vec<u64> = recs
        .iter()
        .map(|(e, b)| {
            let d = fw.eprobe(*e).unwrap();
            let r = d.recs.iter().find(|r| r.size == 8).unwrap();
            u64_at(b, r.offset as usize)
        })
        .collect();
    assert_eq!(values, vec![0, 99]);
    assert_eq!(fw.status().exit_status, Some(3));
}

#[test]
fn progenyof_is_the_process_its_parent_or_an_ancestor() {
    let prog = compile(
        "profile:::tick-1 { trace(progenyof(10)); trace(progenyof(5)); trace(progenyof(1)); trace(progenyof(7)); }",
        &CompileOptions::default(),
    )
    .unwrap();
    let mut fw = Framework::new(Options::default(), 1);
    fw.enable(&prog, false).unwrap();
    fw.go().unwrap();
    let tick = tick_1(&mut fw);
    for ancestors in [vec![], vec![5, 1]] {
        let ctx = FiringContext {
            pid: 10,
            ppid: 5,
            ancestors,
            ..FiringContext::default()
        };
        fw.fire(tick, 0, &ctx);
    }
    fw.stop().unwrap();
    let data = fw.switch_buffer(0).unwrap().data;
    let got: Vec<Vec<u64>> = records(&fw, &data)
        .iter()
        .map(|(e, b)| {
            let d = fw.eprobe(*e).unwrap();
            d.recs
                .iter()
                .map(|r| match r.size {
                    4 => u32::from_ne_bytes(b[r.offset as usize..][..4].try_into().unwrap()) as u64,
                    _ => u64_at(b, r.offset as usize),
                })
                .collect()
        })
        .collect();
    assert_eq!(got, [vec![1, 1, 0, 0], vec![1, 1, 1, 0]]);
}

#[test]
fn chip_and_lgrp_come_from_the_cpu_places() {
    let prog = compile(
        "profile:::tick-1 { trace(curcpu->cpu_id); trace(curcpu->cpu_chip); trace(lgrp); }",
        &CompileOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let mut fw = Framework::new(Options::default(), 3);
    fw.set_cpu_places(vec![
        dtrace_framework::CpuPlace::default(),
        dtrace_framework::CpuPlace::default(),
        dtrace_framework::CpuPlace { chip: 4, lgrp: 5 },
    ]);
    fw.enable(&prog, false).unwrap();
    fw.go().unwrap();
    let tick = tick_1(&mut fw);
    fw.fire(tick, 2, &FiringContext::default());
    fw.stop().unwrap();
    let data = fw.switch_buffer(2).unwrap().data;
    let (_, e, b) = RecordIter::new(&data, |e| fw.eprobe(e).map(|d| d.size))
        .next()
        .unwrap()
        .unwrap();
    let d = fw.eprobe(e).unwrap();
    let vals: Vec<u64> = d
        .recs
        .iter()
        .filter(|r| r.size >= 4)
        .map(|r| match r.size {
            4 => u32::from_ne_bytes(
                b[r.offset as usize..r.offset as usize + 4]
                    .try_into()
                    .unwrap(),
            ) as u64,
            _ => u64_at(b, r.offset as usize),
        })
        .collect();
    assert_eq!(vals, [2, 4, 5]);
}

/// The id of `profile:::tick-1`.
fn tick_1(fw: &mut Framework) -> u32 {
    fw.list_probes(&dtrace_dif::program::ProbeDesc {
        provider: "profile".into(),
        name: "tick-1".into(),
        ..Default::default()
    })[0]
        .id
}
