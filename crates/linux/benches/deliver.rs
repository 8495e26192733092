//! Benchmark: delivering one captured event to the framework (turning a `CapturedEvent` into a
//! firing context and captured memory, then running the clause), without the kernel, and, as root,
//! end to end: `syscall::write:entry /pid == <this process>/ { @c = count(); }` enabled through the
//! framework with a writer thread making write(2) calls while this thread pumps events. Prints
//! figures, never asserts them. `cargo bench -p dtrace-linux --bench deliver`.

use criterion::{criterion_group, criterion_main, Criterion};
use dtrace_compiler::{compile, CompileOptions};
use dtrace_framework::{Framework, Options};
use dtrace_linux::capture::{CapturedEvent, CapturedMemory, CopySource, MemKind};
use dtrace_linux::provider::deliver::firing_of;
use dtrace_linux::provider::framework_ncpus;
use dtrace_linux::LinuxTracing;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn event() -> CapturedEvent {
    let mut comm = [0u8; 16];
    comm[..5].copy_from_slice(b"bench");
    CapturedEvent {
        ktime_ns: 1_000_000,
        pid: 100,
        tid: 100,
        ppid: 1,
        comm,
        task: 0xffff_8880_0000_0000,
        args: [3, 0x7ffd_0000_1000, 0, 0, 0, 0, 0, 0, 0, 0],
        copies: vec![CapturedMemory {
            addr: 0x7ffd_0000_1000,
            kind: MemKind::UserString,
            data: Ok(b"/usr/lib/x86_64-linux-gnu/libc.so.6".to_vec()),
            source: CopySource::AtProbe,
            requested: None,
        }],
        ..Default::default()
    }
}

/// A framework running `src` on `profile:::tick-1` (a probe every framework has), and its id.
fn framework(src: &str) -> (Framework, u32) {
    let mut fw = Framework::new(Options::default(), 1);
    fw.set_option("bufsize", Some("4m")).unwrap();
    let prog = compile(src, &CompileOptions::default()).unwrap();
    let en = fw.enable(&prog, false).unwrap();
    let id = en.probes[0].id;
    fw.go().unwrap();
    (fw, id)
}

fn bench_deliver(c: &mut Criterion) {
    let ev = event();
    c.bench_function("firing_of (context + memory)", |b| {
        b.iter(|| black_box(firing_of(black_box(&ev), 0)))
    });
    for (name, src) in [
        (
            "deliver: @c = count()",
            "profile:::tick-1 { @c = count(); }",
        ),
        (
            "deliver: @[execname] = count()",
            "profile:::tick-1 { @[execname] = count(); }",
        ),
        (
            "deliver: @[copyinstr(arg1)] = count()",
            "profile:::tick-1 { @[copyinstr(arg1)] = count(); }",
        ),
    ] {
        let (mut fw, id) = framework(src);
        c.bench_function(name, |b| {
            b.iter(|| {
                let (ctx, mut mem) = firing_of(&ev, 0);
                fw.fire_with_memory(id, 0, &ctx, &mut mem);
            })
        });
        let _ = fw.snapshot_aggregations();
    }
}

/// End to end through the kernel (root only): events per second delivered and the pumping thread's
/// CPU per event.
fn end_to_end() {
    if !dtrace_linux::bpf_available() {
        println!("deliver end-to-end: skipped (needs root and bpf(2))");
        return;
    }
    let Ok(linux) = LinuxTracing::load() else {
        println!("deliver end-to-end: skipped (no tracefs)");
        return;
    };
    let mut fw = Framework::new(Options::default(), framework_ncpus().unwrap());
    fw.set_option("bufsize", Some("4m")).unwrap();
    linux.register(&mut fw).unwrap();
    let src = format!(
        "syscall::write:entry /pid == {}/ {{ @c = count(); }}",
        std::process::id()
    );
    let prog = compile(&src, &CompileOptions::default()).unwrap();
    linux.plan(&prog);
    fw.enable(&prog, false).unwrap();
    fw.go().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let writer = std::thread::spawn(move || {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
        let mut n = 0u64;
        while !s2.load(Ordering::Relaxed) {
            // SAFETY: one byte from a static to an open descriptor.
            unsafe { libc::write(fd, b"x".as_ptr() as *const libc::c_void, 1) };
            n += 1;
        }
        n
    });
    let t0 = Instant::now();
    let cpu0 = cpu_ns();
    let mut delivered = 0usize;
    while t0.elapsed().as_secs_f64() < 2.0 {
        delivered += linux.pump(&mut fw, 10).unwrap();
        fw.poll();
    }
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().unwrap();
    delivered += linux.finish(&mut fw);
    let cpu = cpu_ns() - cpu0;
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "deliver end-to-end: {written} writes, {delivered} events delivered in {secs:.2}s \
         ({:.0} events/s), {:.0} ns pump CPU per event, {} dropped",
        delivered as f64 / secs,
        cpu as f64 / delivered.max(1) as f64,
        linux.drops().unwrap_or(0)
    );
    fw.stop().unwrap();
}

fn cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn benches(c: &mut Criterion) {
    bench_deliver(c);
    end_to_end();
}

criterion_group! {
    name = group;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(2));
    targets = benches
}
criterion_main!(group);
