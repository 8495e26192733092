//! Benchmark: symbolization throughput (frames per second) as the consumer prints stacks: kernel
//! frames through `/proc/kallsyms` (a synthetic table of the same size when the addresses are
//! hidden), user frames of this process through its mappings and ELF symbols (warm caches), and
//! the cost of trimming the tracing frames off a captured kernel stack and of noting a process at
//! delivery. Also times loading kallsyms once. Prints figures, never asserts them.
//! `cargo bench -p dtrace-linux --bench symbolize`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dtrace_linux::symbols::{KernelSymbols, Symbolizer};
use std::hint::black_box;
use std::time::Instant;

/// The kernel table: the real one, or 200,000 synthetic symbols when it cannot be read.
fn kernel_table() -> KernelSymbols {
    let t = Instant::now();
    match KernelSymbols::load() {
        Ok(k) => {
            eprintln!(
                "kallsyms: {} text symbols loaded in {:.1} ms",
                k.len(),
                t.elapsed().as_secs_f64() * 1e3
            );
            k
        }
        Err(_) => {
            let text: String = (0..200_000u64)
                .map(|i| format!("{:016x} t sym_{i}\n", 0xffff_ffff_8100_0000 + i * 0x40))
                .collect();
            KernelSymbols::parse(&text)
        }
    }
}

/// Addresses spread over the table (every symbol's start plus a small offset).
fn kernel_addrs(k: &KernelSymbols, n: usize) -> Vec<u64> {
    let lo = 0xffff_ffff_8100_0000u64;
    let mut out = Vec::with_capacity(n);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let a = lo + (x % 0x100_0000);
        if k.lookup(a).is_some() {
            out.push(a);
        }
    }
    out
}

#[inline(never)]
fn user_fn_a(x: u64) -> u64 {
    x.wrapping_mul(3)
}

#[inline(never)]
fn user_fn_b(x: u64) -> u64 {
    x.wrapping_add(7)
}

fn bench(c: &mut Criterion) {
    let k = kernel_table();
    let addrs = kernel_addrs(&k, 1024);
    let mut sym = Symbolizer::with_kernel(k.clone());
    let mut g = c.benchmark_group("symbolize");
    g.throughput(Throughput::Elements(addrs.len() as u64));
    g.bench_function("kernel_frames", |b| {
        b.iter(|| {
            for &a in &addrs {
                black_box(sym.kernel_frame(a));
            }
        })
    });
    let pid = std::process::id();
    let pcs: Vec<u64> = (0..1024)
        .map(|i| {
            let f = if i % 2 == 0 {
                user_fn_a as *const () as usize
            } else {
                user_fn_b as *const () as usize
            };
            f as u64 + (i % 8)
        })
        .collect();
    black_box(user_fn_a(black_box(1)) + user_fn_b(black_box(2)));
    let t = Instant::now();
    let first = sym.user_frame(pid, pcs[0]);
    eprintln!(
        "first user frame ({first}) with maps and ELF read: {:.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    g.bench_function("user_frames", |b| {
        b.iter(|| {
            for &a in &pcs {
                black_box(sym.user_frame(pid, a));
            }
        })
    });
    let stack: Vec<u64> = addrs.iter().take(20).copied().collect();
    g.throughput(Throughput::Elements(1));
    g.bench_function("trim_kernel_stack_20", |b| {
        b.iter(|| black_box(k.tracing_prefix(black_box(&stack))))
    });
    g.bench_function("note_process_known", |b| {
        b.iter(|| sym.note_process_as(black_box(pid), black_box("symbolize")))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
