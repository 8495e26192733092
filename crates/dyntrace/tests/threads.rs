//! Block mode in multithreaded processes: threads run their blocks natively (no fallback to
//! single-stepping the whole process), breakpoints are never lifted while other threads run, and counts
//! are exact, also while a thread vforks (posix_spawn) and the others keep running, and while the
//! process receives signals it ignores.

mod common;
use common::*;

/// (instructions counted, stops) from dyntrace -v's last line.
fn summary(stderr: &[u8]) -> (u64, u64) {
    let text = String::from_utf8_lossy(stderr);
    text.lines()
        .find_map(|l| {
            let rest = l.strip_prefix("dyntrace: ")?;
            let (n, rest) = rest.split_once(" instructions counted in ")?;
            let (stops, _) = rest.split_once(" stops")?;
            Some((n.parse().ok()?, stops.parse().ok()?))
        })
        .unwrap_or_else(|| panic!("no summary in:\n{text}"))
}

/// Runs `probe args` in block mode (plus `extra` options): (profile, instructions, stops).
fn block_trace(extra: &[&str], prog: &std::path::Path, args: &[&str]) -> (Trace, u64, u64) {
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let k = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = scratch(&format!("threads-{k}"));
    let out = dir.join("t.trace");
    let mut all = vec!["-v", "-m", "block", "-o", out.to_str().unwrap()];
    all.extend(extra);
    all.push(prog.to_str().unwrap());
    all.extend(args);
    let o = run(&all);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (n, stops) = summary(&o.stderr);
    (read_trace(&out), n, stops)
}

const DEC: (&str, &str) = ("DEC", "o64 FF /1");

fn decs(t: &Trace) -> u64 {
    t.programs[0].regions.get("text:program").map_or(0, |r| {
        r.iter()
            .filter(|(k, _)| (k.0.as_str(), k.1.as_str()) == DEC)
            .map(|(_, v)| *v)
            .sum()
    })
}

#[test]
fn threads_count_exactly_in_block_mode() {
    let Some(prog) = setup_static("threads_block") else {
        return;
    };
    for extra in [&[][..], &["--no-emulate"]] {
        // Two threads spinning: each iteration is ADD, DEC, JNZ.
        let (t, n, stops) = block_trace(extra, &prog, &["threads", "4000"]);
        assert_eq!(decs(&t), 8000, "{extra:?}");
        assert!(
            stops * 2 < n,
            "{extra:?}: {stops} stops for {n} instructions: threads were single-stepped"
        );
        // Two threads making system calls and calls between them.
        let (t, _, _) = block_trace(extra, &prog, &["tsys", "150"]);
        assert_eq!(decs(&t), 2 * 150 * 3, "{extra:?}");
        assert!(t.programs[0].mnemonic("text:program", "SYSCALL") >= 300);
    }
}

#[test]
fn threads_keep_counting_while_one_vforks() {
    let Some(prog) = setup_static("threads_vfork") else {
        return;
    };
    for _ in 0..3 {
        let (t, _, _) = block_trace(&["--no-emulate"], &prog, &["tspawn", "20000"]);
        assert_eq!(decs(&t), 40000);
    }
    let (t, _, _) = block_trace(&[], &prog, &["tspawn", "20000"]);
    assert_eq!(decs(&t), 40000);
}

#[test]
fn threads_count_exactly_while_ignored_signals_arrive() {
    let Some(prog) = setup_static("threads_signals") else {
        return;
    };
    // SIGURG (ignored by default) stops the spinning threads anywhere in their loop, the breakpointed
    // branch included; the signal is delivered there without lifting the breakpoint the other thread
    // runs to.
    for extra in [&["--no-emulate"][..], &[]] {
        let (t, _, _) = block_trace(extra, &prog, &["tsignal", "20000"]);
        assert_eq!(decs(&t), 40000, "{extra:?}");
    }
}
