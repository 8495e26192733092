//! Probe-firing throughput: `{ @[probename] = count(); }` fired repeatedly on one CPU, and a clause
//! tracing an integer into the principal buffer. Figures are reported, never asserted.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dtrace_dif::asm::assemble;
use dtrace_dif::program::{ActionDesc, ActionKind, EcbDesc, ProbeDesc, Program};
use dtrace_framework::{FiringContext, Framework, Options};

fn probe(name: &str) -> ProbeDesc {
    ProbeDesc {
        provider: "profile".into(),
        module: String::new(),
        function: String::new(),
        name: name.into(),
    }
}

fn setup(actions: Vec<ActionDesc>) -> (Framework, u32) {
    let mut fw = Framework::new(Options::default(), 1);
    let p = Program {
        ecbs: vec![EcbDesc {
            probe: probe("tick-1"),
            predicate: None,
            actions,
            line: 0,
        }],
        ..Program::default()
    };
    fw.enable(&p, false).expect("enable");
    fw.go().expect("go");
    let id = fw.list_probes(&probe("tick-1"))[0].id;
    (fw, id)
}

fn bench(c: &mut Criterion) {
    let key = ActionDesc {
        kind: ActionKind::DifExpr,
        difo: Some(assemble("ldgs probename, %r1\nret %r1\n.rtype string\n").expect("asm")),
        arg: 0,
        uarg: 0,
        ntuple: 0,
    };
    let count = ActionDesc {
        kind: ActionKind::AggCount,
        difo: None,
        arg: 0,
        uarg: 1,
        ntuple: 1,
    };
    let mut g = c.benchmark_group("fire");
    g.throughput(Throughput::Elements(1));
    let (mut fw, id) = setup(vec![key, count]);
    let ctx = FiringContext {
        timestamp: Some(1),
        ..FiringContext::default()
    };
    g.bench_function("count_by_probename", |b| b.iter(|| fw.fire(id, 0, &ctx)));

    let trace = ActionDesc {
        kind: ActionKind::DifExpr,
        difo: Some(assemble("ldgs arg0, %r1\nret %r1\n").expect("asm")),
        arg: 0,
        uarg: 0,
        ntuple: 0,
    };
    let (mut fw, id) = setup(vec![trace]);
    let mut n = 0u64;
    g.bench_function("trace_arg0", |b| {
        b.iter(|| {
            fw.fire(id, 0, &ctx);
            n += 1;
            // Switch before the 4 MiB buffer fills, so firings record rather than drop.
            if n.is_multiple_of(100_000) {
                fw.switch_buffer(0).expect("cpu 0");
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
