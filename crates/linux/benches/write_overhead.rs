//! Benchmark: the cost a capture program adds to each write(2), and the event rate sustained.
//!
//! Runs (as root; otherwise it says why and exits): a loop of N write(2) calls of 1 byte to /dev/null
//! with no tracing; with `syscall::write:entry` captured for all processes and counted by execname in
//! user space (the stage-1 form of `syscall::write:entry { @[execname] = count(); }`); the same with the
//! pid filter pushed into the kernel; and, when `bpftrace` is installed, bpftrace running
//! `tracepoint:syscalls:sys_enter_write { @[comm] = count(); }`. Prints ns per write and the added cost;
//! never asserts figures. Times are the writer thread's CPU time, robust to a loaded machine. `cargo bench -p dtrace-linux --bench write_overhead [-- N]`.

use dtrace_linux::capture::CaptureSpec;
use dtrace_linux::{Catalog, ProbeDesc, Session, SessionOptions};
use std::collections::HashMap;
use std::io::BufRead;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// CPU time of the calling thread: the probe runs inside the writer's syscalls, so this counts the
/// capture's cost and not the time the thread waited for a CPU on a busy machine.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn write_loop(n: u64) -> f64 {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .expect("/dev/null");
    let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
    let t = thread_cpu_ns();
    for _ in 0..n {
        // SAFETY: writing one byte from a static to an open descriptor.
        unsafe { libc::write(fd, b"x".as_ptr() as *const libc::c_void, 1) };
    }
    (thread_cpu_ns() - t) as f64 / n as f64
}

fn best_of(runs: usize, n: u64) -> f64 {
    (0..runs)
        .map(|_| write_loop(n))
        .fold(f64::INFINITY, f64::min)
}

/// Runs the write loop on a thread while this thread consumes and aggregates (or, with `live` off,
/// only after the loop, with a ring big enough to hold everything, isolating the in-kernel cost).
/// Returns (ns per write, events seen, drops).
fn traced(n: u64, runs: usize, filter: bool, live: bool) -> Option<(f64, u64, u64)> {
    let cat = Catalog::load().ok()?;
    let p = cat
        .matching(&ProbeDesc::parse("syscall::write:entry"))
        .ok()?
        .remove(0);
    let ring_bytes = if live { 8 << 20 } else { 1 << 30 };
    let mut s = Session::new(SessionOptions {
        name_prefix: "dtbench".into(),
        ring_bytes,
        ..Default::default()
    })
    .ok()?;
    let spec = CaptureSpec {
        filter_pid: filter.then_some(std::process::id()),
        ..CaptureSpec::new()
    };
    if let Err(e) = s.enable(&p, 1, &spec) {
        eprintln!("enable: {e}");
        return None;
    }
    let done = Arc::new(AtomicBool::new(false));
    let d2 = done.clone();
    let started = std::time::Instant::now();
    let writer = std::thread::spawn(move || {
        let r = best_of(runs, n);
        d2.store(true, Ordering::SeqCst);
        r
    });
    let mut agg: HashMap<[u8; 16], u64> = HashMap::new();
    let mut seen = 0u64;
    while !done.load(Ordering::SeqCst) {
        if live {
            let _ = s.poll(10, &mut |e| {
                seen += 1;
                *agg.entry(e.comm).or_default() += 1;
            });
        } else {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    s.drain(&mut |e| {
        seen += 1;
        *agg.entry(e.comm).or_default() += 1;
    });
    let ns = writer.join().ok()?;
    let wall = started.elapsed().as_secs_f64();
    if !filter && live {
        eprintln!(
            "  (live consumer kept up with {:.0} events/s of wall time)",
            seen as f64 / wall
        );
    }
    if filter && live && runs == 1 {
        println!(
            "  sustained: {:.0} events/s of wall time into a live consumer ({seen} events, {} drops)",
            seen as f64 / wall,
            s.drops().unwrap_or(0)
        );
    }
    Some((ns, seen, s.drops().unwrap_or(0)))
}

fn bpftrace(n: u64, runs: usize) -> Option<f64> {
    if !std::process::Command::new("bpftrace")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return None;
    }
    let mut child = std::process::Command::new("bpftrace")
        .args([
            "-e",
            "tracepoint:syscalls:sys_enter_write { @[comm] = count(); }",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let mut out = std::io::BufReader::new(child.stdout.take()?);
    let mut line = String::new();
    out.read_line(&mut line).ok()?; // "Attaching 1 probe..."
    let ns = best_of(runs, n);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let _ = child.wait();
    Some(ns)
}

fn main() {
    let n: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let runs = 3;
    if !dtrace_linux::bpf_available() {
        println!("write_overhead: BPF unavailable (needs root); nothing measured");
        return;
    }
    let t = std::time::Instant::now();
    if let Ok(cat) = Catalog::load() {
        let listed = t.elapsed();
        let count = |prov: &str| cat.descs().filter(|d| d.provider == prov).count();
        println!(
            "catalogue: {} probes (syscall {}, sdt {}, proc {}, sched {}, profile {} listed) listed in {:.1} ms ({} formats read)",
            cat.len(),
            count("syscall"),
            count("sdt"),
            count("proc"),
            count("sched"),
            count("profile"),
            listed.as_secs_f64() * 1e3,
            cat.formats_read()
        );
        let t = std::time::Instant::now();
        let all = cat.probes().len();
        println!(
            "catalogue: {all} probes built (every format read) in {:.1} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
    }
    let base = best_of(runs, n);
    println!(
        "write(2) of 1 byte to /dev/null x {n}, best of {runs} (load average {}):",
        loadavg()
    );
    println!("  no tracing                                        {base:8.1} ns/write");
    let report = |label: &str, r: Option<(f64, u64, u64)>| {
        if let Some((ns, seen, drops)) = r {
            println!(
                "  {label:<48}  {ns:8.1} ns/write  (+{:.1} ns; {seen} events, {drops} drops)",
                ns - base
            );
        }
    };
    report(
        "capture all writes, consumer reads afterwards",
        traced(n, runs, false, false),
    );
    report(
        "capture all writes, live consumer @[execname]",
        traced(n, runs, false, true),
    );
    report(
        "capture, pid filter in kernel, live consumer",
        traced(n, runs, true, true),
    );
    match bpftrace(n, runs) {
        Some(ns) => println!(
            "  {:<48}  {ns:8.1} ns/write  (+{:.1} ns)",
            "bpftrace @[comm] = count()",
            ns - base
        ),
        None => println!("  bpftrace: not installed, not compared"),
    }
    let _ = traced(n * 10, 1, true, true);
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or("?")
        .to_string()
}
