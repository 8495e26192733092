//! Instructions traced per second, in one run: a raw ptrace single-step loop (the floor any
//! single-stepper pays), dyntrace in step mode, in block mode, and in block mode without the in-tracer
//! emulator, all on the same statically linked program (tests/progs/probe.c: "mix", about ten
//! straight-line instructions per loop iteration; "spin", a three-instruction loop; "alu", about forty
//! instructions of compiled integer code per iteration).
//! Prints wall-clock and CPU-time rates (the machine may be shared; CPU time is the steadier figure)
//! and checks that both modes counted the same instructions. Reports, never asserts, the speeds.
//!
//! Run: `cargo bench -p dtrace-dyntrace --bench trace_speed` (needs gcc with static libc, and ptrace).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn cpu_seconds(ru: &libc::rusage) -> f64 {
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn self_cpu() -> f64 {
    // SAFETY: getrusage fills a plain struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    cpu_seconds(&ru)
}

/// Forks, execs `prog args` under PTRACE_TRACEME and single-steps it to the end: (steps, wall, cpu).
fn raw_loop(prog: &Path, args: &[&str]) -> (u64, f64, f64) {
    let c = |s: &str| std::ffi::CString::new(s).unwrap();
    let path = c(prog.to_str().unwrap());
    let mut argv: Vec<std::ffi::CString> = vec![path.clone()];
    argv.extend(args.iter().map(|a| c(a)));
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let start = Instant::now();
    let cpu0 = self_cpu();
    // SAFETY: the child only calls async-signal-safe functions before exec.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        unsafe {
            libc::ptrace(libc::PTRACE_TRACEME, 0, 0usize, 0usize);
            libc::execv(path.as_ptr(), ptrs.as_ptr());
            libc::_exit(127);
        }
    }
    let mut steps = 0u64;
    let mut status = 0;
    // SAFETY: plain system calls on our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe {
        libc::waitpid(pid, &mut status, 0); // the exec SIGTRAP
        loop {
            libc::ptrace(libc::PTRACE_SINGLESTEP, pid, 0usize, 0usize);
            libc::wait4(pid, &mut status, 0, &mut ru);
            if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                break;
            }
            steps += 1;
        }
    }
    let wall = start.elapsed().as_secs_f64();
    (steps, wall, self_cpu() - cpu0 + cpu_seconds(&ru))
}

/// Runs dyntrace in `mode`: (instructions counted, wall, cpu of dyntrace and the tracee).
// The child is reaped with wait4 (for its resource usage), which clippy cannot see.
#[allow(clippy::zombie_processes)]
fn dyntrace(mode: &[&str], prog: &Path, args: &[&str], out: &Path) -> (u64, f64, f64) {
    let start = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_dyntrace"))
        .args(["-v", "-c", "0", "-m"])
        .args(mode)
        .arg("-o")
        .arg(out)
        .arg(prog)
        .args(args)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run dyntrace");
    let pid = child.id() as i32;
    let mut stderr = child.stderr.expect("stderr");
    let mut text = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut text).ok();
    let mut status = 0;
    // SAFETY: waits for our own child and fills a plain struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let wall = start.elapsed().as_secs_f64();
    let n = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("dyntrace: ")?
                .split(" instructions counted")
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no count in dyntrace's output:\n{text}"));
    (n, wall, cpu_seconds(&ru))
}

fn main() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dyntrace-bench");
    std::fs::create_dir_all(&dir).unwrap();
    let prog = dir.join("probe-static");
    let ok = Command::new("gcc")
        .args(["-O1", "-static", "-pthread", "-o"])
        .arg(&prog)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/progs/probe.c"))
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!(
            "trace_speed: cannot build the test program (gcc with static libc needed); skipped"
        );
        return;
    }
    let n = std::env::var("DYNTRACE_BENCH_N").unwrap_or_else(|_| "30000".into());
    for workload in ["mix", "spin", "alu"] {
        let args = [workload, n.as_str()];
        let (raw_n, raw_wall, raw_cpu) = raw_loop(&prog, &args);
        let (step_n, step_wall, step_cpu) =
            dyntrace(&["step"], &prog, &args, &dir.join("step.trace"));
        let (block_n, block_wall, block_cpu) =
            dyntrace(&["block"], &prog, &args, &dir.join("block.trace"));
        let (native_n, native_wall, native_cpu) = dyntrace(
            &["block", "--no-emulate"],
            &prog,
            &args,
            &dir.join("native.trace"),
        );
        let step_profile = std::fs::read_to_string(dir.join("step.trace")).unwrap_or_default();
        let block_profile = std::fs::read_to_string(dir.join("block.trace")).unwrap_or_default();
        let strip = |s: &str| {
            s.lines()
                .filter(|l| !l.contains("<program"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        println!("workload {workload} {n}:");
        println!(
            "  {:<22} {:>10} {:>9} {:>14} {:>9} {:>14}",
            "", "insns", "wall s", "insns/s wall", "cpu s", "insns/s cpu"
        );
        for (name, count, wall, cpu) in [
            ("raw ptrace step loop", raw_n, raw_wall, raw_cpu),
            ("dyntrace -m step", step_n, step_wall, step_cpu),
            ("dyntrace -m block", block_n, block_wall, block_cpu),
            ("block, --no-emulate", native_n, native_wall, native_cpu),
        ] {
            println!(
                "  {name:<22} {count:>10} {wall:>9.3} {:>14.0} {cpu:>9.3} {:>14.0}",
                count as f64 / wall,
                count as f64 / cpu
            );
        }
        println!(
            "  step/raw (cpu rate): {:.2}; block/step (cpu rate): {:.2}; block/step (wall rate): {:.2}; identical profiles: {}",
            (step_n as f64 / step_cpu) / (raw_n as f64 / raw_cpu),
            (block_n as f64 / block_cpu) / (step_n as f64 / step_cpu),
            (block_n as f64 / block_wall) / (step_n as f64 / step_wall),
            step_n == block_n && strip(&step_profile) == strip(&block_profile)
        );
        println!(
            "  block --no-emulate/step (cpu rate): {:.2}; same count: {}",
            (native_n as f64 / native_cpu) / (step_n as f64 / step_cpu),
            native_n == step_n
        );
    }
}
