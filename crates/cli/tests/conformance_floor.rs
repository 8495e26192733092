//! The conformance floor: runs the portable part of Oracle's DTrace unit suite (`../shared/conformance`
//! beside the repository, with its harness `run.py`) against the `dtrace` this build made, and fails
//! when fewer tests pass than the floor kept in the repository's `conformance-floor` file. Skipped,
//! with the reason printed, when the suite is not there. `DTRACE_CONFORMANCE_JOBS` sets how many
//! tests run at once (4 by default).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root (this crate is `crates/cli`).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The floor: the first line of `conformance-floor` that is a number (`#` lines are comments).
fn floor(root: &Path) -> u64 {
    let path = root.join("conformance-floor");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .and_then(|l| l.parse().ok())
        .unwrap_or_else(|| panic!("{} holds no passing count", path.display()))
}

/// The `"passed"` count of the `"total"` object of run.py's JSON report.
fn total_passed(json: &str) -> Option<u64> {
    let total = &json[json.find("\"total\"")?..];
    let passed = &total[total.find("\"passed\"")? + "\"passed\"".len()..];
    let digits: String = passed
        .trim_start_matches([':', ' '])
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[test]
fn total_passed_reads_the_report() {
    let report = "{\"summary\": {\"aggs\": {\"passed\": 3}},\n \"total\": {\n  \"passed\": 912,\n  \"failed\": 10\n }}";
    assert_eq!(total_passed(report), Some(912));
    assert_eq!(total_passed("{\"summary\": {}}"), None);
}

#[test]
fn conformance_floor() {
    let root = repo_root();
    let suite = root.join("../shared/conformance");
    let harness = suite.join("run.py");
    if !harness.exists() {
        eprintln!(
            "SKIP conformance_floor: {} is absent (the shared conformance suite is not beside this checkout)",
            harness.display()
        );
        return;
    }
    if !dtrace_testkit::have_program("python3") {
        eprintln!("SKIP conformance_floor: python3 is not installed");
        return;
    }
    let floor = floor(&root);
    let jobs = std::env::var("DTRACE_CONFORMANCE_JOBS").unwrap_or_else(|_| "4".to_string());
    let json = std::env::temp_dir().join(format!("dtrace-conformance-{}.json", std::process::id()));
    let out = Command::new("python3")
        .arg(&harness)
        .args(["--dtrace", env!("CARGO_BIN_EXE_dtrace")])
        .args(["--jobs", &jobs, "--quiet"])
        .arg("--mirror")
        .arg(suite.join("suite.tar.gz"))
        .arg("--json")
        .arg(&json)
        .output()
        .expect("running the conformance harness");
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "run.py failed ({}):\n{summary}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report = std::fs::read_to_string(&json).expect("run.py's JSON report");
    let _ = std::fs::remove_file(&json);
    let passed = total_passed(&report).expect("a total passing count in run.py's report");
    eprintln!("{summary}conformance: {passed} passed, floor {floor}");
    assert!(
        passed >= floor,
        "conformance fell below the floor: {passed} tests pass, the floor (conformance-floor) is {floor}\n{summary}"
    );
}
