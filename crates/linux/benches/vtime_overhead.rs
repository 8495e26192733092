//! Benchmark: what an exact `vtimestamp` costs ([`dtrace_linux::vtime`]).
//!
//! 1. Per event: a loop of N one-byte write(2) calls to /dev/null with `syscall::write:entry`
//!    captured (pid filter in the kernel, the ring read after the loop so only the in-kernel cost
//!    counts), without and with the exact `vtimestamp` computed at the probe.
//! 2. Per context switch, for every thread on the machine while the clock runs: two threads pinned
//!    to one CPU pass a byte back and forth through pipes (two switches a round trip), without and
//!    with the `sched_switch` program attached.
//!
//! Times are CPU time of the threads measured (robust to a loaded machine), best of 5. Needs root;
//! prints figures and never asserts them. `cargo bench -p dtrace-linux --bench vtime_overhead [-- N]`.

use dtrace_linux::bpf::insn::{Asm, R0};
use dtrace_linux::bpf::{ProgKind, Program};
use dtrace_linux::capture::CaptureSpec;
use dtrace_linux::{Catalog, ProbeDesc, Session, SessionOptions};

fn cpu_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec out-parameter.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn write_loop(n: u64) -> f64 {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .expect("/dev/null");
    let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
    let t = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    for _ in 0..n {
        // SAFETY: writing one byte from a static to an open descriptor.
        unsafe { libc::write(fd, b"x".as_ptr() as *const libc::c_void, 1) };
    }
    (cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID) - t) as f64 / n as f64
}

fn best<F: FnMut() -> f64>(runs: usize, mut f: F) -> f64 {
    (0..runs).map(|_| f()).fold(f64::INFINITY, f64::min)
}

/// ns per write with `syscall::write:entry` captured for this process, events seen, and (with
/// run-time statistics on) the kernel's ns per run of the `sys_enter` dispatcher and the capture
/// it tail-calls (mostly this loop's writes; other syscalls of the machine add short runs).
fn traced_writes(n: u64, runs: usize, exact_vtime: bool) -> Option<(f64, u64, Option<f64>)> {
    let cat = Catalog::load().ok()?;
    let p = cat
        .matching(&ProbeDesc::parse("syscall::write:entry"))
        .ok()?
        .remove(0);
    let mut s = Session::new(SessionOptions {
        name_prefix: "dtvbench".into(),
        ring_bytes: 1 << 30,
        ..Default::default()
    })
    .ok()?;
    let spec = CaptureSpec {
        filter_pid: Some(std::process::id()),
        exact_vtime,
        ..CaptureSpec::new()
    };
    if let Err(e) = s.enable(&p, 1, &spec) {
        eprintln!("enable: {e}");
        return None;
    }
    let mut seen = 0u64;
    let mut ns = f64::INFINITY;
    for _ in 0..runs {
        ns = ns.min(write_loop(n));
        s.drain(&mut |_| seen += 1);
    }
    let per_run = run_stats("dtvbench_se")
        .filter(|r| r.1 > 0)
        .map(|(t, c)| t as f64 / c as f64);
    Some((ns, seen, per_run))
}

/// CPU ns per round trip of a byte between two threads pinned to the same CPU.
fn ping_pong(rounds: u64) -> f64 {
    let mut a = [0i32; 2];
    let mut b = [0i32; 2];
    // SAFETY: pipe fills the two-element arrays.
    unsafe {
        libc::pipe(a.as_mut_ptr());
        libc::pipe(b.as_mut_ptr());
    }
    let pin = || {
        // SAFETY: a zeroed cpu_set_t with CPU 0 set, for the calling thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    };
    let (ar, aw, br, bw) = (a[0], a[1], b[0], b[1]);
    let echo = std::thread::spawn(move || {
        pin();
        let mut c = [0u8; 1];
        let t = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID);
        for _ in 0..rounds {
            // SAFETY: one-byte reads and writes on our own pipes.
            unsafe {
                libc::read(ar, c.as_mut_ptr() as *mut libc::c_void, 1);
                libc::write(bw, c.as_ptr() as *const libc::c_void, 1);
            }
        }
        cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID) - t
    });
    pin();
    let mut c = [0u8; 1];
    let t = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    for _ in 0..rounds {
        // SAFETY: as above.
        unsafe {
            libc::write(aw, c.as_ptr() as *const libc::c_void, 1);
            libc::read(br, c.as_mut_ptr() as *mut libc::c_void, 1);
        }
    }
    let mine = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID) - t;
    let theirs = echo.join().unwrap_or(0);
    for fd in [ar, aw, br, bw] {
        // SAFETY: closing descriptors we opened.
        unsafe { libc::close(fd) };
    }
    (mine + theirs) as f64 / rounds as f64
}

/// An empty program attached to `sched_switch`: what any program there costs.
fn empty_switch_program() -> Option<(dtrace_linux::attach::Attachment, Program)> {
    let mut a = Asm::new();
    a.mov_imm(R0, 0).exit();
    let insns = a.finish().ok()?;
    let prog = Program::load(ProgKind::RawTracepoint, &insns, "dtvbench_e", "bench").ok()?;
    let at = dtrace_linux::attach::Attachment::raw_tracepoint(&prog, "sched_switch").ok()?;
    Some((at, prog))
}

fn main() {
    let n: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let runs = 5;
    if !dtrace_linux::bpf_available() {
        println!("vtime_overhead: BPF unavailable (needs root); nothing measured");
        return;
    }
    let stats = enable_bpf_stats();
    let base = best(runs, || write_loop(n));
    println!("write(2) of 1 byte to /dev/null x {n}, best of {runs}, writer's CPU time:");
    println!("  no tracing                                   {base:8.1} ns/write");
    let plain = traced_writes(n, runs, false);
    let exact = traced_writes(n, runs, true);
    for (label, r) in [
        ("write:entry captured", plain),
        ("write:entry captured, exact vtimestamp", exact),
    ] {
        if let Some((ns, seen, per_run)) = r {
            println!(
                "  {label:<44} {ns:8.1} ns/write  (+{:.1} ns; {seen} events{})",
                ns - base,
                per_run.map_or(String::new(), |p| format!("; kernel: {p:.1} ns per run"))
            );
        }
    }
    if let (Some((p, _, kp)), Some((e, _, ke))) = (plain, exact) {
        print!(
            "  exact vtimestamp adds {:.1} ns per event (writer's CPU time)",
            e - p
        );
        match (kp, ke) {
            (Some(kp), Some(ke)) => println!(", {:.1} ns (kernel run-time statistics)", ke - kp),
            _ => println!(),
        }
    }
    let rounds = (n / 10).max(10_000);
    let without = best(runs, || ping_pong(rounds));
    let mut per_run = None;
    let with = match dtrace_linux::vtime::Vclock::start("dtvbclk") {
        Ok(clock) => {
            let r = best(runs, || ping_pong(rounds));
            per_run = run_stats("dtvbclk_vclk");
            drop(clock);
            Some(r)
        }
        Err(e) => {
            eprintln!("vclock: {e}");
            None
        }
    };
    let mut empty_run = None;
    let empty = empty_switch_program().map(|_keep| {
        let r = best(runs, || ping_pong(rounds));
        empty_run = run_stats("dtvbench_e");
        r
    });
    println!("pipe ping-pong between two threads on CPU 0 x {rounds} (2 switches a round trip):");
    println!("  no tracing                                   {without:8.1} ns/round trip");
    if let Some(w) = empty {
        println!(
            "  empty program on sched_switch                {w:8.1} ns/round trip  (+{:.1} ns per switch)",
            (w - without) / 2.0
        );
    }
    if let Some(w) = with {
        println!(
            "  sched_switch clock attached                  {w:8.1} ns/round trip  (+{:.1} ns per switch)",
            (w - without) / 2.0
        );
    }
    if stats.is_none() {
        println!("  (no kernel run-time statistics: BPF_ENABLE_STATS unavailable)");
        return;
    }
    println!("kernel run-time statistics of the programs on sched_switch (machine-wide):");
    for (label, r) in [("empty program", empty_run), ("vtimestamp clock", per_run)] {
        if let Some((ns, cnt)) = r.filter(|r| r.1 > 0) {
            println!(
                "  {label:<44} {:8.1} ns per run over {cnt} runs",
                ns as f64 / cnt as f64
            );
        }
    }
}

/// Turns on the kernel's BPF run-time statistics while the returned descriptor is open.
fn enable_bpf_stats() -> Option<std::os::fd::OwnedFd> {
    const BPF_ENABLE_STATS: libc::c_long = 32;
    let mut attr = [0u32; 2]; // BPF_STATS_RUN_TIME = 0
                              // SAFETY: bpf(2) with a zeroed enable_stats attribute of its size.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_ENABLE_STATS,
            attr.as_mut_ptr() as *mut libc::c_void,
            std::mem::size_of_val(&attr) as libc::c_uint,
        )
    };
    // SAFETY: a descriptor the kernel just returned, owned by nobody else.
    (fd >= 0).then(|| unsafe { std::os::fd::FromRawFd::from_raw_fd(fd as i32) })
}

/// `run_time_ns` and `run_cnt` of the program named `name`, from bpftool.
fn run_stats(name: &str) -> Option<(u64, u64)> {
    let out = std::process::Command::new("bpftool")
        .args(["prog", "show", "name", name])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let words: Vec<&str> = text.split_whitespace().collect();
    let after = |key: &str| {
        words
            .windows(2)
            .find(|w| w[0] == key)
            .and_then(|w| w[1].parse::<u64>().ok())
    };
    Some((after("run_time_ns")?, after("run_cnt")?))
}
