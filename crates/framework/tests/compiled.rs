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
