//! Instruction timing: `--timer task-clock` times every instruction on any Linux machine (the same path
//! as hardware cycles, another counter), `--timer cycles` times or warns once, `--timer none` and block
//! mode do not time, and the profile says which unit its `cycles`/`min`/`max` attributes are in.

mod common;
use common::*;
use std::process::Command;

const N: u64 = 500;

/// Every opcount of a profile: (region, mnemonic, n, timing attributes if any).
type Row = (String, String, u64, Option<(u64, u64, u64)>);

fn parse_rows(text: &str) -> (Option<String>, Vec<Row>) {
    let doc = roxmltree::Document::parse(text).expect("profile is well-formed XML");
    let root = doc.root_element();
    let timer = root.attribute("timer").map(str::to_string);
    let mut out = Vec::new();
    for r in root.descendants().filter(|n| n.has_tag_name("region")) {
        let region = r.attribute("type").unwrap_or("").to_string();
        for c in r.children().filter(|n| n.has_tag_name("opcount")) {
            let num = |a: &str| c.attribute(a).map(|v| v.parse::<u64>().expect("a number"));
            let timing = match (num("cycles"), num("min"), num("max")) {
                (Some(c), Some(lo), Some(hi)) => Some((c, lo, hi)),
                (None, None, None) => None,
                other => panic!("partial timing attributes {other:?}"),
            };
            let m = c.attribute("mnemonic").unwrap_or("").to_string();
            out.push((region.clone(), m, num("n").unwrap_or(0), timing));
        }
    }
    (timer, out)
}

/// Runs `dyntrace opts -o out probe spin N`: (exit ok, stderr, profile text).
fn run_spin(name: &str, opts: &[&str]) -> Option<(bool, String, String)> {
    let prog = setup(name)?;
    let dir = scratch(name);
    let out = dir.join("spin.trace");
    let o = Command::new(dyntrace())
        .args(opts)
        .arg("-o")
        .arg(&out)
        .arg(&prog)
        .args(["spin", &N.to_string()])
        .output()
        .expect("run dyntrace");
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    if o.status.success() {
        validate(&out);
    }
    Some((
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        text,
    ))
}

#[test]
fn task_clock_times_every_instruction() {
    let Some((ok, err, text)) = run_spin("timing_task_clock", &["--timer", "task-clock"]) else {
        return;
    };
    assert!(ok, "{err}");
    assert!(!err.contains("warning"), "{err}");
    let (timer, rows) = parse_rows(&text);
    assert_eq!(timer.as_deref(), Some("task-clock"));
    assert!(!rows.is_empty());
    let mut total = 0;
    for (region, m, n, t) in &rows {
        let (cycles, lo, hi) = t.unwrap_or_else(|| panic!("{region} {m}: no timing"));
        assert!(lo <= hi, "{region} {m}: min {lo} > max {hi}");
        assert!(
            lo * n <= cycles && cycles <= hi * n,
            "{region} {m}: {n} executions, {cycles} in all, min {lo}, max {hi}"
        );
        total += cycles;
    }
    // Each single step costs at least a trap into the kernel: far more than a nanosecond.
    let insns: u64 = rows.iter().map(|r| r.2).sum();
    assert!(total > insns, "{total} ns for {insns} instructions");
    let dec = rows
        .iter()
        .find(|r| r.0 == "text:program" && r.1 == "DEC")
        .expect("the loop's DEC");
    assert!(dec.2 >= N, "{dec:?}");
}

#[test]
fn cycles_time_or_warn_once() {
    let Some((ok, err, text)) = run_spin("timing_cycles", &[]) else {
        return;
    };
    assert!(ok, "{err}");
    let (timer, rows) = parse_rows(&text);
    let warnings = err
        .matches("warning: instruction timing unavailable")
        .count();
    match timer.as_deref() {
        Some("cycles") => {
            assert_eq!(warnings, 0, "{err}");
            assert!(rows.iter().all(|r| r.3.is_some()));
        }
        None => {
            // No hardware cycle counter here: one warning, no timing attributes.
            assert_eq!(warnings, 1, "{err}");
            assert!(err.contains("no cycles counter"), "{err}");
            assert!(rows.iter().all(|r| r.3.is_none()));
        }
        other => panic!("timer {other:?}"),
    }
}

#[test]
fn no_timing_with_timer_none_or_in_block_mode() {
    let Some((ok, err, text)) = run_spin("timing_none", &["--timer", "none"]) else {
        return;
    };
    assert!(ok, "{err}");
    assert!(!err.contains("warning"), "{err}");
    let (timer, rows) = parse_rows(&text);
    assert_eq!(timer, None);
    assert!(rows.iter().all(|r| r.3.is_none()));

    let Some((ok, err, text)) = run_spin("timing_block", &["-m", "block", "--timer", "task-clock"])
    else {
        return;
    };
    assert!(ok, "{err}");
    assert!(
        err.contains("warning: instruction timing needs step mode"),
        "{err}"
    );
    let (timer, rows) = parse_rows(&text);
    assert_eq!(timer, None);
    assert!(rows.iter().all(|r| r.3.is_none()));
}

#[test]
fn unknown_timer_is_a_usage_error() {
    let o = run(&["--timer", "bogus", "true"]);
    assert_eq!(o.status.code(), Some(64));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("unknown timer \"bogus\" (cycles, task-clock or none)"),
        "{err}"
    );
}
