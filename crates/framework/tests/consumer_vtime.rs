//! `vtimestamp` in the probes that fire in the consumer's context (BEGIN, END, timer probes run by
//! the framework): the on-CPU time of the thread firing them, read through the embedder's reader
//! at each firing.

use dtrace_dif::asm::assemble;
use dtrace_dif::program::{ActionDesc, ActionKind, EcbDesc, ProbeDesc, Program};
use dtrace_framework::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

fn probe(name: &str) -> ProbeDesc {
    ProbeDesc {
        provider: if name.starts_with("tick") {
            "profile"
        } else {
            "dtrace"
        }
        .into(),
        module: String::new(),
        function: String::new(),
        name: name.into(),
    }
}

fn trace_vtimestamp(name: &str) -> EcbDesc {
    EcbDesc {
        probe: probe(name),
        predicate: None,
        actions: vec![ActionDesc {
            kind: ActionKind::DifExpr,
            difo: Some(assemble("ldgs vtimestamp, %r1\nret %r1\n").unwrap()),
            arg: 0,
            uarg: 0,
            ntuple: 0,
        }],
        line: 0,
    }
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_ne_bytes(b[o..o + 8].try_into().unwrap())
}

#[test]
fn begin_and_end_read_the_firing_threads_cpu_time() {
    let mut fw = Framework::new(Options::default(), 1);
    let clock = ManualClock::default();
    clock.set(1_000_000_000);
    fw.set_clock(Box::new(clock));
    let cpu = Arc::new(AtomicU64::new(5_000));
    let reader = cpu.clone();
    fw.set_consumer_vtime(Box::new(move || reader.load(Ordering::Relaxed)));
    let p = Program {
        ecbs: vec![trace_vtimestamp("BEGIN"), trace_vtimestamp("END")],
        ..Program::default()
    };
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    let begin = fw.switch_buffer(0).unwrap().data;
    // Record: EPID, 4 bytes of padding, 8 bytes of timestamp, then the traced value.
    assert_eq!(u64_at(&begin, 16), 5_000);
    cpu.store(7_500, Ordering::Relaxed);
    fw.stop().unwrap();
    let end = fw.switch_buffer(0).unwrap().data;
    assert_eq!(u64_at(&end, 16), 7_500);
}

#[test]
fn without_a_reader_the_consumer_contexts_value_stands() {
    let mut fw = Framework::new(Options::default(), 1);
    fw.set_consumer_context(FiringContext {
        vtimestamp: 42,
        ..FiringContext::default()
    });
    let p = Program {
        ecbs: vec![trace_vtimestamp("BEGIN")],
        ..Program::default()
    };
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    assert_eq!(u64_at(&fw.switch_buffer(0).unwrap().data, 16), 42);
}

#[test]
fn each_timer_firing_reads_the_clock_anew() {
    let mut fw = Framework::new(Options::default(), 1);
    let clock = ManualClock::default();
    clock.set(10);
    fw.set_clock(Box::new(clock.clone()));
    let reads = Arc::new(AtomicU64::new(0));
    let counter = reads.clone();
    // Every read is 1000 ns later than the one before.
    fw.set_consumer_vtime(Box::new(move || {
        1000 * (counter.fetch_add(1, Ordering::Relaxed) + 1)
    }));
    let p = Program {
        ecbs: vec![trace_vtimestamp("tick-1sec")],
        ..Program::default()
    };
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    fw.poll();
    clock.set(10 + 3_500_000_000);
    assert_eq!(fw.poll(), 3);
    let data = fw.switch_buffer(0).unwrap().data;
    // Three 24-byte records (EPID, padding, timestamp, value): increasing values.
    let got: Vec<u64> = (0..3).map(|i| u64_at(&data, 24 * i + 16)).collect();
    assert!(got[0] > 0 && got[0] < got[1] && got[1] < got[2], "{got:?}");
}
