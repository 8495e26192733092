//! Consumer throughput: one million `printf("%d %s\n", ...)` records decoded from principal buffers,
//! formatted, and written to /dev/null. Reports records per second; asserts nothing.

use std::io::Write;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dtrace_consumer::consume::DefaultOutput;
use dtrace_consumer::Decoder;
use dtrace_dif::program::{ActionKind, RecDesc};
use dtrace_framework::records::{BufferSnapshot, EprobeDesc, ProbeInfo};

const PER_BUFFER: usize = 10_000;

fn setup() -> (Decoder, BufferSnapshot) {
    let ep = EprobeDesc {
        epid: 1,
        probe_id: 1,
        clause: 0,
        size: 56,
        recs: vec![
            RecDesc {
                action: ActionKind::Printf,
                size: 8,
                offset: 16,
                alignment: 8,
                format: 1,
                arg: 0,
            },
            RecDesc {
                action: ActionKind::DifExpr,
                size: 32,
                offset: 24,
                alignment: 1,
                format: 0,
                arg: 0,
            },
        ],
    };
    let mut d = Decoder::default();
    d.probes.insert(
        1,
        ProbeInfo {
            id: 1,
            provider: "profile".into(),
            module: String::new(),
            function: String::new(),
            name: "tick-1000".into(),
        },
    );
    d.eprobes.insert(1, ep);
    d.add_program(&[b"%d %s\n".to_vec()], &[1]).unwrap();
    d.options.set("quiet", None, false).unwrap();
    let mut data = Vec::with_capacity(56 * PER_BUFFER);
    for i in 0..PER_BUFFER {
        let mut r = [0u8; 56];
        r[..4].copy_from_slice(&1u32.to_ne_bytes());
        r[16..24].copy_from_slice(&(i as i64 * 7919).to_ne_bytes());
        let name = format!("process-{}", i % 97);
        r[24..24 + name.len()].copy_from_slice(name.as_bytes());
        data.extend_from_slice(&r);
    }
    (
        d,
        BufferSnapshot {
            cpu: 0,
            data,
            drops: 0,
        },
    )
}

fn consume(d: &mut Decoder, snap: &BufferSnapshot, sink: &mut impl Write, n: usize) {
    let mut o = DefaultOutput {
        quiet: true,
        ..Default::default()
    };
    let o = std::cell::RefCell::new(&mut o);
    let mut out = Vec::with_capacity(1 << 20);
    for _ in 0..n / PER_BUFFER {
        d.consume_buffer(
            snap,
            &mut out,
            &mut |pd, out| o.borrow_mut().probe(pd, out),
            &mut |pd, r, out| o.borrow_mut().record(pd, r, out),
            &mut |_| true,
            &mut |_| true,
        )
        .unwrap();
        sink.write_all(&out).unwrap();
        out.clear();
    }
}

fn bench(c: &mut Criterion) {
    let (mut d, snap) = setup();
    let mut null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .unwrap();
    // One straight run of a million records, reported as records/s.
    let t = Instant::now();
    consume(&mut d, &snap, &mut null, 1_000_000);
    let secs = t.elapsed().as_secs_f64();
    println!(
        "printf(\"%d %s\\n\") x 1,000,000 to /dev/null: {:.3} s, {:.0} records/s",
        secs,
        1e6 / secs
    );
    let mut g = c.benchmark_group("consumer");
    g.throughput(Throughput::Elements(100_000));
    g.sample_size(10);
    g.bench_function("printf_records_100k", |b| {
        b.iter(|| consume(&mut d, &snap, &mut null, 100_000))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
