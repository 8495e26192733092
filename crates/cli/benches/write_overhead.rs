//! Benchmark of `dtrace(1)` itself (the built binary) on the paper's first example: the CPU time
//! `syscall::write:entry { @[execname] = count(); }` adds to each write(2), against no tracing and
//! against bpftrace's equivalent (`tracepoint:syscalls:sys_enter_write { @[comm] = count(); }`, when
//! `bpftrace` is installed), and the highest write rate `dtrace` follows with no drop (a ladder of
//! paced rates, one second each; a rate passes when no drop is reported and every write is counted).
//!
//! The writer is this binary run again (`DTBENCH_WRITER=n,rate,file`) under `-c`: it names itself
//! `dtbenchw`, makes `n` one-byte writes to /dev/null (paced at `rate` a second, or as fast as it can
//! at 0) and records its own CPU time per write, so a loaded machine slows it without changing the
//! figure. Needs root; prints figures and never asserts them. The ladder prints the rate the writer
//! achieved: one traced writer thread has a ceiling of its own (about 1/(traced ns per write)), so
//! when every step passes, dtrace kept up with the fastest single writer, not with an upper bound.
//! `cargo bench -p dtrace-cli --bench write_overhead [-- N]`.

use std::process::Command;
use std::time::{Duration, Instant};

const SCRIPT: &str = "syscall::write:entry { @[execname] = count(); }";
const BPFTRACE_SCRIPT: &str = "tracepoint:syscalls:sys_enter_write { @[comm] = count(); }";

fn process_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The writer: `n` writes at `rate` a second (0: unpaced); its CPU ns per write goes to `out`.
fn writer(n: u64, rate: u64, out: &str) {
    // SAFETY: PR_SET_NAME with a NUL-terminated name.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"dtbenchw".as_ptr(), 0, 0, 0) };
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .expect("/dev/null");
    let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
    let start = Instant::now();
    let t0 = process_cpu_ns();
    for i in 0..n {
        if rate > 0 && i % 256 == 0 {
            let due = start + Duration::from_nanos(i * 1_000_000_000 / rate);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        // SAFETY: writing one byte from a static to an open descriptor.
        unsafe { libc::write(fd, b"x".as_ptr() as *const libc::c_void, 1) };
    }
    let per = (process_cpu_ns() - t0) as f64 / n as f64;
    let secs = start.elapsed().as_secs_f64();
    std::fs::write(out, format!("{per} {secs}\n")).expect("result file");
}

/// One run's figures.
struct Run {
    ns_per_write: f64,
    /// Writes a second the writer achieved.
    rate: f64,
    counted: Option<u64>,
    drops: u64,
}

fn result_file() -> String {
    std::env::temp_dir()
        .join(format!("dtbench-{}.out", std::process::id()))
        .display()
        .to_string()
}

/// Runs the writer under `tracer` (None: alone) and reads its figures.
fn run(tracer: Option<&[&str]>, n: u64, rate: u64) -> Option<Run> {
    let me = std::env::current_exe().ok()?.display().to_string();
    let out = result_file();
    let _ = std::fs::remove_file(&out);
    let env = format!("{n},{rate},{out}");
    let (stdout, stderr) = match tracer {
        None => {
            let o = Command::new(&me)
                .env("DTBENCH_WRITER", &env)
                .output()
                .ok()?;
            (
                String::new(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        }
        Some(argv) => {
            let o = Command::new(argv[0])
                .args(&argv[1..])
                .args(["-c", &me])
                .env("DTBENCH_WRITER", &env)
                .output()
                .ok()?;
            (
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        }
    };
    let figures = std::fs::read_to_string(&out).ok().and_then(|s| {
        let mut w = s.split_whitespace().map(|v| v.parse::<f64>().ok());
        Some((w.next()??, w.next()??))
    });
    let (ns_per_write, secs) = match figures {
        Some(v) => v,
        None => {
            eprintln!("run failed: {stderr}");
            return None;
        }
    };
    let _ = std::fs::remove_file(&out);
    // dtrace: `  dtbenchw      2000001`; bpftrace: `@[dtbenchw]: 2000001`.
    let counted = stdout.lines().find_map(|l| {
        let l = l.trim();
        let rest = l
            .strip_prefix("dtbenchw")
            .or_else(|| l.strip_prefix("@[dtbenchw]:"))?;
        rest.trim().parse().ok()
    });
    // `dtrace: 12 drops on CPU 0`
    let drops = stderr
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            (w.len() == 6 && w[0] == "dtrace:" && w[2].starts_with("drop"))
                .then(|| w[1].parse::<u64>().ok())
                .flatten()
        })
        .sum();
    Some(Run {
        ns_per_write,
        rate: n as f64 / secs.max(1e-9),
        counted,
        drops,
    })
}

/// The run with the lowest cost of `runs`.
fn best(tracer: Option<&[&str]>, n: u64, runs: usize) -> Option<Run> {
    (0..runs)
        .filter_map(|_| run(tracer, n, 0))
        .min_by(|a, b| a.ns_per_write.total_cmp(&b.ns_per_write))
}

fn main() {
    if let Ok(spec) = std::env::var("DTBENCH_WRITER") {
        let mut it = spec.splitn(3, ',');
        let n = it.next().and_then(|v| v.parse().ok()).unwrap_or(1);
        let rate = it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
        let out = it.next().unwrap_or("/dev/null");
        writer(n, rate, out);
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("write_overhead: needs root (kernel tracing); skipped");
        return;
    }
    let n: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let dtrace = env!("CARGO_BIN_EXE_dtrace");
    let dt_argv = [dtrace, "-q", "-n", SCRIPT];
    let runs = 3;

    println!("write(2) of 1 byte to /dev/null, {n} writes, CPU time of the writer, best of {runs}");
    let Some(base) = best(None, n, runs) else {
        println!("the writer did not run");
        return;
    };
    println!(
        "  untraced                 {:8.1} ns/write",
        base.ns_per_write
    );
    let report = |name: &str, r: Option<Run>| match r {
        Some(r) => println!(
            "  {name:<24} {:8.1} ns/write  (+{:.1} ns)  {:.0} writes/s  counted {}  drops {}",
            r.ns_per_write,
            r.ns_per_write - base.ns_per_write,
            r.rate,
            r.counted.map_or("?".to_string(), |c| c.to_string()),
            r.drops
        ),
        None => println!("  {name:<24} failed"),
    };
    report("dtrace (all processes)", best(Some(&dt_argv), n, runs));
    let have_bpftrace = Command::new("bpftrace")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if have_bpftrace {
        let bt_argv = ["bpftrace", "-e", BPFTRACE_SCRIPT];
        report("bpftrace", best(Some(&bt_argv), n, runs));
    } else {
        println!("  bpftrace                 not installed");
    }

    println!("highest paced write rate dtrace follows with no drop (1 s per step):");
    let mut best_rate = None;
    for rate in [
        50_000u64, 100_000, 200_000, 400_000, 800_000, 1_600_000, 3_200_000,
    ] {
        let Some(r) = run(Some(&dt_argv), rate, rate) else {
            break;
        };
        let ok = r.drops == 0 && r.counted.is_some_and(|c| c >= rate);
        println!(
            "  asked {rate:>9}/s  achieved {:>9.0}/s  counted {}  drops {}  {}",
            r.rate,
            r.counted.map_or("?".to_string(), |c| c.to_string()),
            r.drops,
            if ok { "ok" } else { "lost events" }
        );
        if !ok {
            break;
        }
        best_rate = Some(r.rate);
    }
    match best_rate {
        Some(r) => println!("  sustained: {r:.0} events/s"),
        None => println!("  sustained: below 50000 events/s"),
    }
}
