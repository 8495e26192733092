//! Benchmarks: converting the running kernel's BTF into CTF (what `dtrace(1)` does at start-up),
//! encoding it, and lookups by name (which must not grow with the number of types). Figures are
//! reported, never asserted; without `/sys/kernel/btf/vmlinux` it says so and measures nothing.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

fn vmlinux() -> Option<Vec<u8>> {
    std::fs::read("/sys/kernel/btf/vmlinux").ok()
}

fn bench(c: &mut Criterion) {
    let Some(btf) = vmlinux() else {
        eprintln!("no /sys/kernel/btf/vmlinux: nothing to benchmark");
        return;
    };
    let mut g = c.benchmark_group("vmlinux");
    g.sample_size(10);
    // dtrace(1) keeps the kernel's types until it exits: the conversion without freeing the result,
    // then with it (what a caller that drops the container pays as well)
    g.bench_function("btf_to_ctf", |b| {
        b.iter_with_large_drop(|| dtrace_ctf::btf_to_ctf(black_box(&btf)).unwrap())
    });
    g.bench_function("btf_to_ctf and drop", |b| {
        b.iter(|| dtrace_ctf::btf_to_ctf(black_box(&btf)).unwrap())
    });
    g.bench_function("btf parse and validate", |b| {
        b.iter(|| dtrace_ctf::Btf::parse(black_box(&btf)).unwrap().types.len())
    });
    // what dtrace(1)'s start-up thread does: read the file and convert it
    g.bench_function("KernelTypes::load", |b| {
        b.iter_with_large_drop(|| {
            dtrace_ctf::KernelTypes::load(std::path::Path::new(dtrace_ctf::SYS_KERNEL_BTF)).unwrap()
        })
    });
    let ctf = dtrace_ctf::btf_to_ctf(&btf).unwrap();
    g.bench_function("write_ctf", |b| {
        b.iter(|| dtrace_ctf::write_ctf(black_box(&ctf), Default::default()).unwrap())
    });
    let bytes = dtrace_ctf::write_ctf(&ctf, Default::default()).unwrap();
    g.bench_function("read_ctf", |b| {
        b.iter(|| dtrace_ctf::read_ctf(black_box(&bytes)).unwrap())
    });
    g.finish();
    let mut g = c.benchmark_group("lookup");
    for name in [
        "struct task_struct",
        "int",
        "u64",
        "struct sk_buff",
        "const char *",
    ] {
        g.bench_function(name, |b| b.iter(|| ctf.lookup_by_name(black_box(name))));
    }
    let ts = ctf.lookup_by_name("struct task_struct").unwrap();
    g.bench_function("member task_struct.comm", |b| {
        b.iter(|| ctf.member(black_box(ts), "comm").unwrap())
    });
    // the same lookups in a container of 10 types: constant time means the same figures
    let mut small = dtrace_ctf::Container::new();
    for i in 0..10 {
        small.add(dtrace_ctf::Type::new(
            format!("t{i}"),
            dtrace_ctf::TypeKind::Struct(vec![]),
            0,
        ));
    }
    small.add(dtrace_ctf::Type::new(
        "task_struct",
        dtrace_ctf::TypeKind::Struct(vec![]),
        0,
    ));
    g.bench_function("struct task_struct (11-type container)", |b| {
        b.iter(|| small.lookup_by_name(black_box("struct task_struct")))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
