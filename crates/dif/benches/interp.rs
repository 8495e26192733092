//! Interpreter benchmarks: (a) a straight-line integer block, (b) a typical D clause (predicate on `pid`
//! and a string, an associative-array update, a `strjoin`). Figures are reported, never asserted.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dtrace_dif::asm::assemble;
use dtrace_dif::vars;
use dtrace_dif::verify::verify;
use dtrace_dif::vm::fake::{FakeContext, FakeMemory};
use dtrace_dif::vm::{FaultKind, Machine, Prepared, ProbeContext, VarState, VmOptions};
use std::hint::black_box;

/// A probe context with plain fields, as the framework's will be (the test fake uses maps).
struct BenchContext {
    pid: u64,
    execname: &'static [u8],
}

impl ProbeContext for BenchContext {
    fn int_var(&mut self, id: u32) -> Result<u64, FaultKind> {
        match id {
            vars::DIF_VAR_PID => Ok(self.pid),
            _ => Err(FaultKind::IllOp),
        }
    }
    fn str_var(&mut self, id: u32, out: &mut Vec<u8>) -> Result<(), FaultKind> {
        match id {
            vars::DIF_VAR_EXECNAME => {
                out.extend_from_slice(self.execname);
                Ok(())
            }
            _ => Err(FaultKind::IllOp),
        }
    }
    fn array_var(&mut self, _id: u32, _index: u64) -> Result<u64, FaultKind> {
        Err(FaultKind::IllOp)
    }
    fn thread_key(&mut self) -> u64 {
        1
    }
    fn speculation(&mut self) -> u64 {
        0
    }
    fn progenyof(&mut self, _pid: u64) -> bool {
        false
    }
    fn random(&mut self) -> u64 {
        4
    }
}

/// CPU time consumed by this thread so far, in ns (`/proc/thread-self/schedstat`), so figures on a
/// shared, loaded machine reflect our work rather than the wait for a core. `None` where unavailable.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Runs `f` `iters` times and returns the thread CPU time it took (wall time when unavailable); used
/// over long runs because the kernel updates the figure only at scheduling events.
fn cpu_time(iters: u64, mut f: impl FnMut()) -> Duration {
    let wall = std::time::Instant::now();
    let t0 = thread_cpu_ns();
    for _ in 0..iters {
        f();
    }
    match (t0, thread_cpu_ns()) {
        (Some(a), Some(b)) => Duration::from_nanos(b.saturating_sub(a)),
        _ => wall.elapsed(),
    }
}

fn straight_line(c: &mut Criterion) {
    let mut src = String::from("setx 3, %r1\nsetx 5, %r2\n");
    let ops = ["add", "mul", "xor", "sub", "or", "and", "sll", "srl"];
    for i in 0..1000 {
        let op = ops[i % ops.len()];
        src.push_str(&format!("{op} %r1, %r2, %r{}\n", 3 + i % 5));
    }
    src.push_str("ret %r3\n");
    let obj = assemble(&src).unwrap();
    verify(&obj).unwrap();
    let n = obj.text.len() as u64;
    let obj = Prepared::new(obj);
    let mut state = VarState::new(VmOptions::default());
    let mut m = Machine::new();
    let mut ctx = FakeContext::new();
    let mut mem = FakeMemory::new();
    let mut g = c.benchmark_group("straight_line");
    g.throughput(Throughput::Elements(n));
    g.bench_function("1002_integer_instructions", |b| {
        b.iter(|| {
            m.begin_firing();
            black_box(
                m.run_prepared(black_box(&obj), &mut state, &mut ctx, &mut mem)
                    .unwrap(),
            )
        })
    });
    let reps = if std::env::var_os("DIF_BENCH_SKIP_STRAIGHT").is_some() {
        1
    } else {
        20_000
    };
    let t = cpu_time(reps, || {
        m.begin_firing();
        black_box(
            m.run_prepared(black_box(&obj), &mut state, &mut ctx, &mut mem)
                .unwrap(),
        );
    });
    let per = t.as_nanos() as f64 / reps as f64;
    println!(
        "straight_line CPU time: {per:.0} ns/run, {:.0} M DIF instructions/s",
        n as f64 / per * 1e3
    );
    g.finish();
}

/// `/pid == 100 && execname == "fake"/ { @counts[execname] ... ; names[pid] = strjoin(execname, "-x") }`
/// as the compiler would lower it: a predicate object, an associative-array increment, and a strjoin
/// stored into a global associative array.
fn typical_clause(c: &mut Criterion) {
    let pred = assemble(
        "ldgs pid, %r1\nsetx 100, %r2\ncmp %r1, %r2\nbne f\nldgs execname, %r1\nsets \"fake\", %r2\nscmp %r1, %r2\nbne f\nsetx 1, %r1\nret %r1\nf:\nret %r0\n",
    )
    .unwrap();
    let action = assemble(
        ".var counts 0x500 arr glb int 8\n.var names 0x501 arr glb string 256\n\
         flushts\nldgs execname, %r1\npushtr string, %r0, %r1\nldgaa counts, %r2\nsetx 1, %r3\nadd %r2, %r3, %r2\n\
         flushts\npushtr string, %r0, %r1\nstgaa %r2, counts\n\
         flushts\npushtr string, %r0, %r1\nsets \"-x\", %r4\npushtr string, %r0, %r4\ncall strjoin, %r5\n\
         flushts\nldgs pid, %r6\npushtv int, %r6\nstgaa %r5, names\nret %r5\n",
    )
    .unwrap();
    verify(&pred).unwrap();
    verify(&action).unwrap();
    // Prepared once, as the framework does per ECB.
    let (pred, action) = (Prepared::new(pred), Prepared::new(action));
    let mut state = VarState::new(VmOptions::default());
    let mut m = Machine::new();
    let mut ctx = BenchContext {
        pid: 100,
        execname: b"fake",
    };
    let mut mem = FakeMemory::new();
    c.bench_function("typical_clause", |b| {
        b.iter(|| {
            m.begin_firing();
            let p = m
                .run_prepared(&pred, &mut state, &mut ctx, &mut mem)
                .unwrap();
            assert_eq!(p, 1);
            black_box(
                m.run_prepared(&action, &mut state, &mut ctx, &mut mem)
                    .unwrap(),
            )
        })
    });
    let t = cpu_time(2_000_000, || {
        m.begin_firing();
        let p = m
            .run_prepared(&pred, &mut state, &mut ctx, &mut mem)
            .unwrap();
        assert_eq!(p, 1);
        black_box(
            m.run_prepared(&action, &mut state, &mut ctx, &mut mem)
                .unwrap(),
        );
    });
    println!(
        "typical_clause CPU time: {:.0} ns/firing",
        t.as_nanos() as f64 / 2_000_000.0
    );
}

criterion_group!(benches, straight_line, typical_clause);
criterion_main!(benches);
