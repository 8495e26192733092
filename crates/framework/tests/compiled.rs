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
    let tick = fw.list_probes(&dtrace_dif::program::ProbeDesc {
        provider: "profile".into(),
        name: "tick-1".into(),
        ..Default::default()
    })[0]
        .id;
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
    // EPID 1, action #1, some DIF offset, invalid address (1) at 0.
    assert_eq!((args[0], args[1], args[3], args[4]), (1, 1, 1, 0));
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
