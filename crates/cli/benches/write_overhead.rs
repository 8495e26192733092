//! Benchmark of `dtrace(1)` itself (the built binary): the CPU time tracing adds to each write(2),
//! counting both the traced writer's CPU and the tracer's own (dtrace's, or bpftrace's), for the
//! paper's first example (`syscall::write:entry { @[execname] = count(); }`), for a count without
//! keys (`@ = count()`), for predicates that are always false (on `pid`, on `execname`, on an
//! argument), for `quantize(arg2)`, for a count by `ustack()` (the writer has no frame pointers:
//! dtrace walks its `.eh_frame` at the probe, while bpftrace's `ustack` follows frame pointers and
//! stops after a frame or two), for each write's `ustack()` printed (a record built at the probe,
//! its stack walked there), and for the entry/return latency idiom (`self->ts`, thread-locals in the kernel; and printing each
//! latency, its records built at the probe), for a key copied by the write's count
//! (`copyin(arg1, arg2)`, a record per write to dtrace), for the count with two writer threads on two CPUs,
//! each
//! against bpftrace's equivalent in the same run (when `bpftrace` is installed), each figure the
//! median of `DTBENCH_ROUNDS` (5) rounds that run every tracer in turn (the machine's load then
//! falls alike on all), with the tracer's own CPU time against the writer's ("own": DTrace's
//! target is under 2% for aggregation-only scripts); and the highest
//! write rate `dtrace` follows with no drop (a ladder of paced rates, one second each; a rate passes
//! when no drop is reported and every write is counted). Where the kernel has `fbt`, the count by
//! execname is also taken at `vfs_write`'s entry, on each mechanism it has (fentry against
//! bpftrace's `kfunc:`, kprobes against its `kprobe:`).
//!
//! The writer is this binary run again (`DTBENCH_WRITER=n,rate,file`) under `-c`: it names itself
//! `dtbenchw`, makes `n` one-byte writes to /dev/null (paced at `rate` a second, or as fast as it can
//! at 0) and records its own CPU time per write. The total (writer and tracer) is the CPU time of
//! this bench's children over the run (`getrusage(RUSAGE_CHILDREN)`: the tracer, and the writer it
//! waited for), less the tracer's CPU time when the writer began to write (read by the writer, its
//! child, through its parent's CPU clock, once the tracer is idle), so the tracers' start-up
//! (compiling, loading programs, converting types on another thread while the writer starts: tens
//! of ms that vary from run to run) is not counted; a run of one write is subtracted, so
//! neither is the tracer's exit nor the untraced writer's start-up. Needs root; prints figures and
//! never asserts them.
//! The `pid` case puts an entry probe on the writer's libc `write` (against bpftrace's `uprobe:`),
//! and the time to place an entry probe on every libc function follows the table.
//! The `copyinstr` case counts `openat(2)` calls by path (`@[copyinstr(arg1)] = count()`; the
//! writer then opens a path that does not exist instead of writing), with the kernel paths on and
//! off, against bpftrace's `str(args->filename)` key; and by a path kept from entry to return in
//! a string thread-local (`self->p = copyinstr(arg1)`, `@[self->p]` at return), against
//! bpftrace's map of strings keyed by `tid`. With `DTBENCH_BASELINE=/path/to/dtrace`, that binary
//! (an earlier build) runs every case too, in the same rounds, for before/after figures.
//! The `untraced` case measures what tracing `openat(2)` adds to a syscall nobody traces
//! (getppid(2)): DTrace's disabled-probe effect, against bpftrace's.
//! The `idle` case measures the CPU a tracer spends a second while nothing it traces happens
//! (`dtrace`'s main loop sleeps until something is due, against bpftrace's).
//! `cargo bench -p dtrace-cli --bench write_overhead [-- N [CASE]]`: with CASE, only the cases whose
//! name contains it (or one of its `|`-separated parts) run, and not the rate ladder.
//! `DTBENCH_WRITERS=2,4,16` gives the writer counts of the many-writer count (2 by default), and
//! `DTBENCH_DTRACE` another dtrace binary to measure (the bench and dtrace copied to a machine
//! without the build tree).

use std::process::Command;
use std::time::{Duration, Instant};

const SCRIPT: &str = "syscall::write:entry { @[execname] = count(); }";

/// The cases compared: name, dtrace's script, bpftrace's.
const CASES: [(&str, &str, &str); 11] = [
    (
        "count by execname",
        SCRIPT,
        "tracepoint:syscalls:sys_enter_write { @[comm] = count(); }",
    ),
    (
        "count() (no key)",
        "syscall::write:entry { @ = count(); }",
        "tracepoint:syscalls:sys_enter_write { @ = count(); }",
    ),
    (
        "false pid predicate",
        "syscall::write:entry /pid == 1/ { @[execname] = count(); }",
        "tracepoint:syscalls:sys_enter_write /pid == 1/ { @[comm] = count(); }",
    ),
    (
        "false execname predicate",
        "syscall::write:entry /execname == \"nomatch\"/ { @[execname] = count(); }",
        "tracepoint:syscalls:sys_enter_write /comm == \"nomatch\"/ { @[comm] = count(); }",
    ),
    (
        "false argument predicate",
        "syscall::write:entry /arg2 == 12345/ { @[execname] = count(); }",
        "tracepoint:syscalls:sys_enter_write /args->count == 12345/ { @[comm] = count(); }",
    ),
    (
        "quantize(arg2)",
        "syscall::write:entry { @ = quantize(arg2); }",
        "tracepoint:syscalls:sys_enter_write { @ = hist(args->count); }",
    ),
    (
        "write latency (self->ts)",
        "syscall::write:entry { self->ts = timestamp; } \
         syscall::write:return /self->ts/ { @ = quantize(timestamp - self->ts); self->ts = 0; }",
        "tracepoint:syscalls:sys_enter_write { @s[tid] = nsecs; } \
         tracepoint:syscalls:sys_exit_write /@s[tid]/ { @ = hist(nsecs - @s[tid]); \
         delete(@s[tid]); }",
    ),
    (
        "write latency printf",
        "syscall::write:entry /execname == \"dtbenchw\"/ { self->ts = timestamp; } \
         syscall::write:return /self->ts/ { printf(\"%d %d\\n\", pid, timestamp - self->ts); \
         self->ts = 0; }",
        "tracepoint:syscalls:sys_enter_write /comm == \"dtbenchw\"/ { @s[tid] = nsecs; } \
         tracepoint:syscalls:sys_exit_write /@s[tid]/ { printf(\"%d %d\\n\", pid, \
         nsecs - @s[tid]); delete(@s[tid]); }",
    ),
    (
        "count by ustack()",
        "syscall::write:entry /execname == \"dtbenchw\"/ { @[ustack()] = count(); }",
        "tracepoint:syscalls:sys_enter_write /comm == \"dtbenchw\"/ { @[ustack] = count(); }",
    ),
    (
        "printed ustack()",
        "syscall::write:entry /execname == \"dtbenchw\"/ { ustack(); }",
        "tracepoint:syscalls:sys_enter_write /comm == \"dtbenchw\"/ { printf(\"%s\\n\", ustack); }",
    ),
    (
        "sized copyin key",
        "syscall::write:entry /execname == \"dtbenchw\"/ \
         { @[stringof(copyin(arg1, arg2))] = count(); }",
        "tracepoint:syscalls:sys_enter_write /comm == \"dtbenchw\"/ \
         { @[str(args->buf, args->count)] = count(); }",
    ),
];

/// The `fbt` cases: name, `DTRACE_FBT` mechanism, dtrace's script, bpftrace's.
const FBT_CASES: [(&str, &str, &str, &str); 2] = [
    (
        "fbt count (fentry)",
        "fentry",
        "fbt::vfs_write:entry { @[execname] = count(); }",
        "kfunc:vfs_write { @[comm] = count(); }",
    ),
    (
        "fbt count (kprobe)",
        "kprobe",
        "fbt::vfs_write:entry { @[execname] = count(); }",
        "kprobe:vfs_write { @[comm] = count(); }",
    ),
];

/// The `pid` case: dtrace's probe on the writer's libc `write` against bpftrace's `uprobe:` on the
/// same function (`LIBC` becomes the path of the libc this bench maps), both counting the writer's
/// calls only.
const PID_CASE: (&str, &str, &str) = (
    "pid count (libc write)",
    "pid$target:libc.so.6:write:entry { @[execname] = count(); }",
    "uprobe:LIBC:write /pid == cpid/ { @[comm] = count(); }",
);

/// Set for the writer: it opens [`OPENAT_PATH`] instead of writing.
const OPENAT_ENV: &str = "DTBENCH_OPENAT";
/// Environment variable naming another `dtrace` binary the `copyinstr` case also runs (an
/// earlier build, for before/after figures in one run).
const BASELINE_ENV: &str = "DTBENCH_BASELINE";

/// Set for the writer: it calls getppid(2), a syscall no case traces, instead of writing.
const UNTRACED_ENV: &str = "DTBENCH_GETPPID";

/// The `untraced` case: the CPU ns tracing `openat(2)` adds to each call of a syscall nobody
/// traces (getppid(2); the writer and the tracer), DTrace's disabled-probe effect: with the
/// entry alone enabled, and with a string copy at the entry (whose faults are served at the
/// return, so the return's side is hooked too), against bpftrace's tracepoints; each the best
/// of `runs`.
fn untraced_case(dtrace: &str, n: u64, runs: usize, have_bpftrace: bool) {
    let env = [(UNTRACED_ENV, "1")];
    let Some(untraced) = alone_ns(&env, n, runs) else {
        println!("  the caller did not run");
        return;
    };
    println!(
        "getppid(2) while openat(2) is traced, {n} calls, best of {runs}: alone {:.1} ns/call",
        untraced / (n - 1) as f64
    );
    let added = |argv: &[&str]| added_per_call(argv, &env, n, runs, untraced).map(|(t, _)| t);
    let cases = [
        (
            "dtrace syscall::openat:entry { @ = count(); }",
            "syscall::openat:entry { @ = count(); }",
            "bpftrace sys_enter_openat { @ = count(); }",
            "tracepoint:syscalls:sys_enter_openat { @ = count(); }",
        ),
        (
            "dtrace ... { @[copyinstr(arg1)] = count(); }",
            "syscall::openat:entry { @[copyinstr(arg1)] = count(); }",
            "bpftrace ... { @[str(args->filename)] = count(); }",
            "tracepoint:syscalls:sys_enter_openat { @[str(args->filename)] = count(); }",
        ),
    ];
    let show = |what: &str, r: Option<f64>| match r {
        Some(t) => println!("  {what:<48} {t:>8.1} added CPU ns per untraced call"),
        None => println!("  {what:<48} {:>8}", "-"),
    };
    for (name, script, bname, bscript) in cases {
        show(name, added(&[dtrace, "-q", "-n", script]));
        if have_bpftrace {
            show(bname, added(&["bpftrace", "-e", bscript]));
        }
    }
}

/// The CPU ns of `n` untraced calls of the writer (with `env`) less one call's (its start-up),
/// each the best of `runs`; `None` when it did not run.
fn alone_ns(env: &[(&str, &str)], n: u64, runs: usize) -> Option<f64> {
    let (base, base1) = (best(None, env, n, runs)?, best(None, env, 1, runs)?);
    Some(base.total_ns.saturating_sub(base1.total_ns) as f64)
}

/// The CPU ns tracer `argv` adds per call of the writer (with `env`) over `alone` ([`alone_ns`]),
/// the tracer's start-up subtracted (a run of one call), and its run of `n`; each the best of
/// `runs`.
fn added_per_call(
    argv: &[&str],
    env: &[(&str, &str)],
    n: u64,
    runs: usize,
    alone: f64,
) -> Option<(f64, Run)> {
    let big = best(Some(argv), env, n, runs)?;
    let one = best(Some(argv), env, 1, runs)?;
    let traced = big.total_ns as f64 - one.total_ns as f64;
    Some(((traced - alone) / (n - 1) as f64, big))
}

/// The path the writer opens in the `copyinstr` case.
const OPENAT_PATH: &std::ffi::CStr = c"/nonexistent/dtbench-openat-path";

/// The `copyinstr` case: added CPU ns per `openat(2)` (writer and tracer) counting by path, for
/// dtrace with the kernel paths on and off and for bpftrace, each the best of `runs`.
fn copyinstr_case(dtrace: &str, n: u64, runs: usize, have_bpftrace: bool) {
    let env = [(OPENAT_ENV, "1")];
    let Some(untraced) = alone_ns(&env, n, runs) else {
        println!("  the opener did not run");
        return;
    };
    let added = |argv: &[&str], env: &[(&str, &str)]| added_per_call(argv, env, n, runs, untraced);
    let script = "syscall::openat:entry { @[copyinstr(arg1)] = count(); }";
    let off = [
        (OPENAT_ENV, "1"),
        ("DTRACE_KERNEL_AGGREGATIONS", "0"),
        ("DTRACE_KERNEL_VARIABLES", "0"),
        ("DTRACE_KERNEL_RECORDS", "0"),
        ("DTRACE_KERNEL_PREDICATES", "0"),
    ];
    println!(
        "openat(2) of a missing path, {n} calls, best of {runs}: opener alone {:.1} ns/call",
        untraced / (n - 1) as f64
    );
    let show = |what: &str, r: Option<(f64, Run)>| match r {
        Some((t, run)) => println!(
            "  {what:<44} {t:>8.1} added CPU ns per call (opener and tracer), {} drops",
            run.drops
        ),
        None => println!("  {what:<44} {:>8}", "-"),
    };
    // The path kept in a string thread-local from entry to return (string variables in the
    // kernel), against bpftrace's map of strings keyed by thread.
    let var_script = "syscall::openat:entry { self->p = copyinstr(arg1); } \
        syscall::openat:return /self->p != NULL/ { @[self->p] = count(); self->p = 0; }";
    let cases = [
        (
            "dtrace @[copyinstr(arg1)] = count()",
            script,
            "bpftrace @[str(args->filename)] = count()",
            "tracepoint:syscalls:sys_enter_openat { @[str(args->filename)] = count(); }",
        ),
        (
            "dtrace self->p = copyinstr(arg1) ... @[self->p]",
            var_script,
            "bpftrace @p[tid] = str(args->filename) ... @[@p[tid]]",
            "tracepoint:syscalls:sys_enter_openat { @p[tid] = str(args->filename); } \
             tracepoint:syscalls:sys_exit_openat /@p[tid] != \"\"/ { @[@p[tid]] = count(); \
             delete(@p[tid]); }",
        ),
    ];
    for (name, script, bname, bscript) in cases {
        show(name, added(&[dtrace, "-q", "-n", script], &env));
        show(
            "  the same, kernel paths off",
            added(&[dtrace, "-q", "-n", script], &off),
        );
        // Another build of dtrace to compare with in the same run (an earlier commit's).
        if let Ok(baseline) = std::env::var(BASELINE_ENV) {
            show(
                "  the same, baseline dtrace",
                added(&[&baseline, "-q", "-n", script], &env),
            );
        }
        if have_bpftrace {
            show(bname, added(&["bpftrace", "-e", bscript], &env));
        }
    }
}

/// Seconds of the idle case's long run (its short one lasts a second).
const IDLE_SECS: u64 = 6;

/// The CPU time (ns) of a tracer run `argv` and waited for (start-up and exit included).
fn tracer_cpu_ns(argv: &[&str]) -> Option<u64> {
    let cpu0 = children_cpu_ns();
    let o = Command::new(argv[0]).args(&argv[1..]).output().ok()?;
    o.status
        .success()
        .then(|| children_cpu_ns().saturating_sub(cpu0))
}

/// The idle case: the CPU a tracer spends a second while nothing it traces happens (a probe
/// whose predicate is never true, and a timer ending the run), from a run of [`IDLE_SECS`] less
/// a run of one second (start-up and exit subtracted); the best of `runs`.
fn idle_case(dtrace: &str, baseline: Option<&str>, have_bpftrace: bool, runs: usize) {
    let d = |secs: u64| {
        format!(
            "syscall::getppid:entry /pid == 1/ {{ printf(\"x\"); }} tick-{secs}s {{ exit(0); }}"
        )
    };
    let b = |secs: u64| {
        format!(
            "tracepoint:syscalls:sys_enter_getppid /pid == 1/ {{ printf(\"x\"); }} \
             interval:s:{secs} {{ exit(); }}"
        )
    };
    println!(
        "idle: CPU a second over {} idle seconds, best of {runs}:",
        IDLE_SECS - 1
    );
    let per_second = |argv: &dyn Fn(u64) -> Vec<String>| -> Option<f64> {
        let cost = |secs: u64| {
            let a = argv(secs);
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            (0..runs).filter_map(|_| tracer_cpu_ns(&a)).min()
        };
        let (long, short) = (cost(IDLE_SECS)?, cost(1)?);
        Some(long.saturating_sub(short) as f64 / (IDLE_SECS - 1) as f64)
    };
    let show = |what: &str, ns: Option<f64>| match ns {
        Some(ns) => println!(
            "  {what:<20} {:>8.2} ms CPU a second ({:.3}% of a CPU)",
            ns / 1e6,
            ns / 1e7
        ),
        None => println!("  {what:<20} {:>8}", "-"),
    };
    let dt = |bin: &str| {
        let bin = bin.to_string();
        move |secs: u64| vec![bin.clone(), "-q".into(), "-n".into(), d(secs)]
    };
    show("dtrace", per_second(&dt(dtrace)));
    if let Some(bl) = baseline {
        show("baseline dtrace", per_second(&dt(bl)));
    }
    if have_bpftrace {
        show(
            "bpftrace",
            per_second(&|secs| vec!["bpftrace".into(), "-e".into(), b(secs)]),
        );
    }
}

/// The path of the libc this process maps.
fn libc_path() -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.rsplit('/').next() == Some("libc.so.6"))
        .map(str::to_string)
}

/// The time `dtrace` takes to place an entry probe on every function of libc in a short command
/// (`/bin/true`), against one function, and how many probes that is.
fn libc_placement(dtrace: &str) {
    let wall = |desc: &str| -> Option<f64> {
        let t = Instant::now();
        let o = Command::new(dtrace)
            .args([
                "-q",
                "-n",
                &format!("{desc} {{ @ = count(); }}"),
                "-c",
                "/bin/true",
            ])
            .output()
            .ok()?;
        o.status.success().then(|| t.elapsed().as_secs_f64())
    };
    let probes = Command::new(dtrace)
        .args(["-l", "-n", "pid$target:libc.so.6::entry", "-c", "/bin/true"])
        .output()
        .ok()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .count()
                .saturating_sub(1)
        });
    let one = (0..3)
        .filter_map(|_| wall("pid$target:libc.so.6:write:entry"))
        .min_by(f64::total_cmp);
    let all = (0..3)
        .filter_map(|_| wall("pid$target:libc.so.6::entry"))
        .min_by(f64::total_cmp);
    match (probes, one, all) {
        (Some(n), Some(one), Some(all)) => println!(
            "placing pid$target:libc.so.6::entry ({n} probes) under -c /bin/true: {all:.2} s \
             wall, against {one:.2} s for one function ({:.1} us per added probe)",
            (all - one) * 1e6 / n.max(1) as f64
        ),
        _ => println!("placing pid$target:libc.so.6::entry: the run failed"),
    }
}

/// CPU time (user and system) of this process's waited-for children so far, in ns.
fn children_cpu_ns() -> u64 {
    // SAFETY: rusage is plain data; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-parameter.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    ns(ru.ru_utime) + ns(ru.ru_stime)
}

/// CPU time of process `pid` (0: this process) so far, in ns (0 when it cannot be read).
fn cpu_ns_of(pid: i32) -> u64 {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: valid out-parameter.
    if unsafe { libc::clock_getcpuclockid(pid, &mut clock) } != 0 {
        return 0;
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec out-parameter.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The writer: `threads` threads (named alike) of `n` writes each at `rate` a second (0:
/// unpaced); its CPU ns per write, the seconds it took, its whole CPU time (its start-up
/// included) and its parent's (the tracer's) CPU time when it began to write go to `out`.
fn writer(n: u64, rate: u64, out: &str, threads: u64) {
    // SAFETY: PR_SET_NAME with a NUL-terminated name (threads made after it inherit it).
    unsafe { libc::prctl(libc::PR_SET_NAME, c"dtbenchw".as_ptr(), 0, 0, 0) };
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .expect("/dev/null");
    let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    // The tracer (the parent) idle first: what it still does of its start-up once the writer
    // runs (dtrace converts the kernel's types on a thread of its own) is not counted against
    // the writes (a run of one write would not count it at all: it exits first).
    let mut last = cpu_ns_of(parent);
    for _ in 0..300 {
        std::thread::sleep(Duration::from_millis(10));
        let now = cpu_ns_of(parent);
        if now.saturating_sub(last) < 500_000 {
            break;
        }
        last = now;
    }
    let parent_before = cpu_ns_of(parent);
    let start = Instant::now();
    let t0 = cpu_ns_of(0);
    std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(|| write_loop(fd, n, rate, start));
        }
        write_loop(fd, n, rate, start);
    });
    let end = cpu_ns_of(0);
    let per = (end - t0) as f64 / (n * threads.max(1)) as f64;
    let secs = start.elapsed().as_secs_f64();
    std::fs::write(out, format!("{per} {secs} {end} {parent_before}\n")).expect("result file");
}

/// One thread's `n` writes (or opens) at `rate` a second (0: unpaced) from `start`.
fn write_loop(fd: i32, n: u64, rate: u64, start: Instant) {
    let opens = std::env::var_os(OPENAT_ENV).is_some();
    let untraced = std::env::var_os(UNTRACED_ENV).is_some();
    for i in 0..n {
        if rate > 0 && i % 256 == 0 {
            let due = start + Duration::from_nanos(i * 1_000_000_000 / rate);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        if untraced {
            // SAFETY: getppid has no preconditions.
            unsafe { libc::getppid() };
        } else if opens {
            // SAFETY: a NUL-terminated path; the call fails (ENOENT), nothing to close.
            unsafe { libc::openat(libc::AT_FDCWD, OPENAT_PATH.as_ptr(), libc::O_RDONLY) };
        } else {
            // SAFETY: writing one byte from a static to an open descriptor.
            unsafe { libc::write(fd, b"x".as_ptr() as *const libc::c_void, 1) };
        }
    }
}

/// One run's figures.
struct Run {
    ns_per_write: f64,
    /// CPU time of the tracer and the writer together (the children's), in ns, less the
    /// tracer's before the writer began to write (its start-up, which varies by tens of ms from
    /// run to run, and which the tracing of the writes does not cost).
    total_ns: u64,
    /// CPU time of the writer alone (its start-up included), in ns.
    writer_ns: u64,
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

/// Runs the writer under `tracer` (None: alone), with `env` set for the tracer, and reads its
/// figures.
fn run(tracer: Option<&[&str]>, env_vars: &[(&str, &str)], n: u64, rate: u64) -> Option<Run> {
    run_threads(tracer, env_vars, n, rate, 1)
}

/// [`run`] with a writer of `threads` threads of `n` writes each.
fn run_threads(
    tracer: Option<&[&str]>,
    env_vars: &[(&str, &str)],
    n: u64,
    rate: u64,
    threads: u64,
) -> Option<Run> {
    let me = std::env::current_exe().ok()?.display().to_string();
    let out = result_file();
    let _ = std::fs::remove_file(&out);
    let env = format!("{n},{rate},{out},{threads}");
    let cpu0 = children_cpu_ns();
    let (stdout, stderr) = match tracer {
        None => {
            let o = Command::new(&me)
                .envs(env_vars.iter().copied())
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
                .envs(env_vars.iter().copied())
                .env("DTBENCH_WRITER", &env)
                .output()
                .ok()?;
            (
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        }
    };
    let total_ns = children_cpu_ns().saturating_sub(cpu0);
    let figures = std::fs::read_to_string(&out).ok().and_then(|s| {
        let mut w = s.split_whitespace().map(|v| v.parse::<f64>().ok());
        Some((w.next()??, w.next()??, w.next()??, w.next()??))
    });
    let (ns_per_write, secs, writer_ns, parent_before) = match figures {
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
    // The printf case: a line `pid latency` a write.
    let printed = stdout
        .lines()
        .filter(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() == 2 && w.iter().all(|v| v.parse::<u64>().is_ok())
        })
        .count() as u64;
    // A count keyed by a stack (or by nothing): dtrace prints it alone on its line, bpftrace
    // after `]: ` (`@: ` with no key); the sum over the stacks.
    let alone: Vec<u64> = stdout
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let bpftrace = l
                .strip_prefix("@:")
                .or_else(|| l.rsplit_once("]:").map(|(_, n)| n));
            l.parse().ok().or_else(|| bpftrace?.trim().parse().ok())
        })
        .collect();
    let counted = counted
        .or((printed > 0).then_some(printed))
        .or((!alone.is_empty()).then(|| alone.iter().sum()));
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
    // The writer's parent is the tracer (when there is one): its start-up is not counted.
    let total_ns = match tracer {
        Some(_) => total_ns.saturating_sub(parent_before as u64),
        None => total_ns,
    };
    Some(Run {
        ns_per_write,
        total_ns,
        writer_ns: writer_ns as u64,
        rate: (n * threads) as f64 / secs.max(1e-9),
        counted,
        drops,
    })
}

/// Environment variable: the dtrace binary to measure (by default the one built with the bench).
const DTRACE_ENV: &str = "DTBENCH_DTRACE";
/// Environment variable: the writer counts of the many-writer case, `,`-separated (2 by default).
const WRITERS_ENV: &str = "DTBENCH_WRITERS";

/// Environment variable: rounds of the per-case figures (5 by default).
const ROUNDS_ENV: &str = "DTBENCH_ROUNDS";

/// Median figures of a tracer (or of the writer alone) over rounds, start-up subtracted.
#[derive(Clone, Debug)]
struct Figures {
    /// The writer's CPU ns per write.
    ns_per_write: f64,
    /// CPU ns of writer and tracer together, less a run of one write's.
    total_ns: f64,
    /// The tracer's own CPU ns from the writer's first write to its exit (less a run of one
    /// write's: its exit).
    tracer_ns: f64,
    /// The writer's CPU ns.
    writer_ns: f64,
    /// The smallest count of the writer's writes printed.
    counted: Option<u64>,
    /// The median of the drops reported.
    drops: u64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The figures of each of `tracers` (None: the writer alone), with `env` set, for a writer of
/// `threads` threads of `n` writes: each round runs every tracer with `n` writes and with one
/// (interleaved, so the machine's load falls alike on all, each round starting with the next
/// tracer), and each figure is the median over the rounds. The figures stop at the first tracer whose runs all failed.
fn figures(
    tracers: &[Option<&[&str]>],
    env: &[(&str, &str)],
    n: u64,
    threads: u64,
    rounds: usize,
) -> Vec<Figures> {
    let mut big: Vec<Vec<Run>> = tracers.iter().map(|_| Vec::new()).collect();
    let mut one: Vec<Vec<Run>> = tracers.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        // Each round starts with the next tracer, so that none always runs in the same slot.
        for k in 0..tracers.len() {
            let i = (k + round) % tracers.len();
            let t = &tracers[i];
            if let Some(r) = run_threads(*t, env, n, 0, threads) {
                big[i].push(r);
            }
            if let Some(r) = run_threads(*t, env, 1, 0, 1) {
                one[i].push(r);
            }
        }
    }
    let mut out = Vec::new();
    for (b, o) in big.iter().zip(&one) {
        if b.is_empty() || o.is_empty() {
            break;
        }
        let m = |v: &[Run], f: &dyn Fn(&Run) -> f64| median(v.iter().map(f).collect());
        let tracer = |r: &Run| r.total_ns.saturating_sub(r.writer_ns) as f64;
        let mut drops: Vec<u64> = b.iter().map(|r| r.drops).collect();
        drops.sort_unstable();
        out.push(Figures {
            ns_per_write: m(b, &|r| r.ns_per_write),
            total_ns: m(b, &|r| r.total_ns as f64) - m(o, &|r| r.total_ns as f64),
            tracer_ns: (m(b, &tracer) - m(o, &tracer)).max(0.0),
            writer_ns: m(b, &|r| r.writer_ns as f64),
            counted: b.iter().filter_map(|r| r.counted).min(),
            drops: drops[drops.len() / 2],
        });
    }
    out
}

/// The run with the lowest cost of `runs`.
fn best(tracer: Option<&[&str]>, env: &[(&str, &str)], n: u64, runs: usize) -> Option<Run> {
    (0..runs)
        .filter_map(|_| run(tracer, env, n, 0))
        .min_by(|a, b| a.ns_per_write.total_cmp(&b.ns_per_write))
}

fn main() {
    if let Ok(spec) = std::env::var("DTBENCH_WRITER") {
        let mut it = spec.splitn(4, ',');
        let n = it.next().and_then(|v| v.parse().ok()).unwrap_or(1);
        let rate = it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
        let out = it.next().unwrap_or("/dev/null");
        let threads = it.next().and_then(|v| v.parse().ok()).unwrap_or(1);
        writer(n, rate, out, threads);
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
    // CASE: `|`-separated parts of case names.
    let only: Option<String> = std::env::args()
        .skip(1)
        .find(|a| a.parse::<u64>().is_err() && !a.starts_with('-'));
    let wanted = |name: &str| {
        only.as_ref()
            .is_none_or(|o| o.split('|').any(|part| name.contains(part)))
    };
    // The writer counts of the many-writer case (one CPU each where the machine has them).
    let writers: Vec<u64> = std::env::var(WRITERS_ENV)
        .ok()
        .map(|v| v.split(',').filter_map(|w| w.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![2]);
    let writer_names: Vec<String> = writers
        .iter()
        .map(|w| format!("count, {w} writers ({w} CPUs)"))
        .collect();
    // The dtrace built with this bench, or another (`DTBENCH_DTRACE`: a copy of the bench and
    // the binary run on a machine without the build tree).
    let dtrace_env = std::env::var(DTRACE_ENV).ok();
    let dtrace = dtrace_env
        .as_deref()
        .unwrap_or(env!("CARGO_BIN_EXE_dtrace"));
    let dt_argv = [dtrace, "-q", "-n", SCRIPT];
    let runs = 3;
    // Rounds of the per-case figures (medians of interleaved runs: this machine is shared).
    let rounds: usize = std::env::var(ROUNDS_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    let baseline = std::env::var(BASELINE_ENV).ok();

    println!(
        "write(2) of 1 byte to /dev/null, {n} writes a writer thread, medians of {rounds} \
         interleaved rounds; own: the tracer's CPU against the writer's"
    );
    let have_bpftrace = Command::new("bpftrace")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    println!(
        "  {:<26} {:>26} {:>26} {:>6}{}",
        "added CPU ns per write",
        "dtrace: writer/total own",
        "bpftrace: writer/total own",
        "ratio",
        if baseline.is_some() {
            format!(" {:>10} {:>6}", "baseline", "new/bl")
        } else {
            String::new()
        }
    );
    // The fbt cases run where this kernel has the mechanism.
    let fbt_cases = FBT_CASES.iter().filter(|(_, m, d, _)| {
        Command::new(dtrace)
            .args(["-l", "-n", d.split_whitespace().next().unwrap_or("")])
            .env("DTRACE_FBT", m)
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let pid_bscript = libc_path().map(|p| PID_CASE.2.replace("LIBC", &p));
    let pid_case = pid_bscript
        .as_deref()
        .map(|b| (PID_CASE.0, None, PID_CASE.1, b, 1));
    let cases = CASES
        .iter()
        .map(|&(n, d, b)| (n, None, d, b, 1))
        .chain(
            writers
                .iter()
                .zip(&writer_names)
                .map(|(&w, name)| (name.as_str(), None, SCRIPT, CASES[0].2, w)),
        )
        .chain(pid_case)
        .chain(fbt_cases.map(|&(n, m, d, b)| (n, Some(m), d, b, 1)));
    let cases = cases.filter(|(name, ..)| wanted(name));
    // The untraced writer's figures, per number of writer threads.
    let mut untraced: Vec<(u64, Figures)> = Vec::new();
    for (name, mechanism, dscript, bscript, threads) in cases {
        let base = match untraced.iter().find(|(t, _)| *t == threads) {
            Some((_, f)) => f.clone(),
            None => {
                let Some(f) = figures(&[None], &[], n, threads, rounds).pop() else {
                    println!("  the writer did not run");
                    return;
                };
                println!(
                    "  untraced, {threads} writer thread(s): {:.1} CPU ns per write",
                    f.total_ns / (n * threads - 1) as f64
                );
                untraced.push((threads, f.clone()));
                f
            }
        };
        let env: Vec<(&str, &str)> = mechanism.map(|m| ("DTRACE_FBT", m)).into_iter().collect();
        let dt: Vec<&str> = vec![dtrace, "-q", "-n", dscript];
        let bl: Option<Vec<&str>> = baseline.as_deref().map(|b| vec![b, "-q", "-n", dscript]);
        let bt: Option<Vec<&str>> = have_bpftrace.then(|| vec!["bpftrace", "-e", bscript]);
        let tracers: Vec<Option<&[&str]>> = std::iter::once(Some(&dt[..]))
            .chain(bt.as_deref().map(Some))
            .chain(bl.as_deref().map(Some))
            .collect();
        let figs = figures(&tracers, &env, n, threads, rounds);
        let events = (n * threads - 1) as f64;
        let added = |f: &Figures| {
            (
                f.ns_per_write - base.ns_per_write,
                (f.total_ns - base.total_ns) / events,
                100.0 * f.tracer_ns / f.writer_ns.max(1.0),
            )
        };
        let fig = |f: Option<&Figures>| match f {
            Some(f) => {
                let (w, t, own) = added(f);
                format!("{w:>8.1} / {t:>8.1} {own:>5.1}%")
            }
            None => format!("{:>26}", "-"),
        };
        let d = figs.first();
        let b = bt.as_ref().and_then(|_| figs.get(1));
        let l = bl
            .as_ref()
            .and_then(|_| figs.get(1 + usize::from(bt.is_some())));
        let ratio = |x: Option<&Figures>, y: Option<&Figures>| match (x, y) {
            (Some(x), Some(y)) if added(y).1 > 0.0 => format!("{:.2}", added(x).1 / added(y).1),
            _ => "-".into(),
        };
        let bl_col = match &bl {
            Some(_) => format!(
                " {:>10} {:>6}",
                l.map_or("-".into(), |l| format!("{:.1}", added(l).1)),
                ratio(d, l)
            ),
            None => String::new(),
        };
        println!(
            "  {name:<26} {} {} {:>6}{bl_col}",
            fig(d),
            fig(b),
            ratio(d, b)
        );
        if let Some(f) = d {
            let whole = n * threads;
            let counts = dscript == SCRIPT || dscript.contains("printf");
            if f.drops > 0 || counts {
                println!(
                    "    dtrace counted {} of {whole}, {} drops",
                    f.counted.map_or("?".to_string(), |c| c.to_string()),
                    f.drops
                );
            }
        }
    }

    if wanted("libc placement") {
        libc_placement(dtrace);
    }
    if wanted("idle") {
        idle_case(dtrace, baseline.as_deref(), have_bpftrace, runs);
    }
    if wanted("copyinstr") {
        copyinstr_case(dtrace, n.min(1_000_000), runs, have_bpftrace);
    }
    if wanted("untraced") {
        untraced_case(dtrace, n.min(2_000_000), runs, have_bpftrace);
    }
    if only.is_some() {
        return;
    }
    println!("highest paced write rate dtrace follows with no drop (1 s per step):");
    let mut best_rate = None;
    for rate in [
        50_000u64, 100_000, 200_000, 400_000, 800_000, 1_600_000, 3_200_000,
    ] {
        let Some(r) = run(Some(&dt_argv), &[], rate, rate) else {
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
