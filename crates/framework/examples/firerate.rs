//! Measures firings per second of `{ @[probename] = count(); }` without criterion: `cargo run --release -p dtrace-framework --example firerate [N]`.

use dtrace_dif::asm::assemble;
use dtrace_dif::program::{ActionDesc, ActionKind, EcbDesc, ProbeDesc, Program};
use dtrace_framework::{FiringContext, Framework, Options};
fn main() {
    // Unwraps are fine here: fixed, known-good inputs.
    let probe = ProbeDesc {
        provider: "profile".into(),
        module: String::new(),
        function: String::new(),
        name: "tick-1".into(),
    };
    let key = ActionDesc {
        kind: ActionKind::DifExpr,
        difo: Some(assemble("ldgs probename, %r1\nret %r1\n.rtype string\n").unwrap()),
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
    // `firerate N plain` measures `@ = count()` (no key, no DIF): the framework's own cost.
    let actions = if std::env::args().nth(2).as_deref() == Some("plain") {
        vec![ActionDesc { ntuple: 0, ..count }]
    } else {
        vec![key, count]
    };
    let mut fw = Framework::new(Options::default(), 1);
    let p = Program {
        ecbs: vec![EcbDesc {
            probe: probe.clone(),
            predicate: None,
            actions,
            line: 0,
        }],
        ..Program::default()
    };
    fw.enable(&p, false).unwrap();
    fw.go().unwrap();
    let id = fw.list_probes(&probe)[0].id;
    let ctx = FiringContext {
        timestamp: Some(1),
        ..FiringContext::default()
    };
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5_000_000);
    let t = std::time::Instant::now();
    for _ in 0..n {
        fw.fire(id, 0, &ctx);
    }
    let el = t.elapsed();
    println!(
        "{:.1} ns/firing, {:.2} M/s",
        el.as_nanos() as f64 / n as f64,
        n as f64 / el.as_secs_f64() / 1e6
    );
}
