//! `dtrace -x oformat=json|folded`, `-x flamegraph=FILE.svg` and `-x metrics=ADDR:PORT` end to end on
//! the probes that need no kernel (BEGIN, END, ERROR, tick-N): JSON lines parsed, folded lines
//! compared, the SVG parsed as XML, the metrics endpoint scraped while tracing runs and parsed by a
//! strict OpenMetrics parser; a reader that goes away (closed pipe, dropped connection) stops nothing.
//! One test draws kernel stacks sampled by `profile-997` (root and BPF; skipped otherwise).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use common::dtrace;
use dtrace_testkit::openmetrics;
use serde_json::{json, Value};

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

#[test]
fn json_lines_for_firings_printa_and_aggregations() {
    let (rc, out, err) = dtrace(&[
        "-x",
        "oformat=json",
        "-n",
        "BEGIN { trace(1); printf(\"%s-%d\", \"x\", 2); @a[probename] = count(); @q = quantize(3); exit(0); } END { printa(@a); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("matched 2 probes"), "{err}");
    let v = json_lines(&out);
    assert_eq!(v.len(), 3, "{out}");
    assert_eq!(v[0]["name"], "BEGIN");
    assert_eq!(v[0]["provider"], "dtrace");
    assert_eq!(
        v[0]["output"],
        json!([{"value": 1}, {"message": "x-2"}, {"value": "x"}, {"value": 2}])
    );
    assert_eq!(v[1]["name"], "END");
    assert_eq!(
        v[1]["output"],
        json!([{"aggregation-name": "a", "aggregation-data": [{"keys": ["BEGIN"], "count": 1}]}])
    );
    assert_eq!(
        v[2],
        json!({"aggregation-name": "q", "aggregation-data": [{"keys": [], "buckets": [
            {"value": 1, "count": 0}, {"value": 2, "count": 1}, {"value": 4, "count": 0}]}]})
    );
}

#[test]
fn json_errors_are_lines_on_the_output() {
    let (rc, out, err) = dtrace(&[
        "-x",
        "oformat=json",
        "-n",
        "BEGIN { trace(*(int *)0); }",
        "-n",
        "BEGIN { exit(0); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(!err.contains("error in dt_clause"), "{err}");
    let v = json_lines(&out);
    let e = v
        .iter()
        .find(|l| l["name"] == "ERROR")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(e["module"], "INTERNAL");
    assert_eq!(e["fault"], "invalid address");
    let msg = e["msg"].as_str().unwrap();
    let want = format!(
        "error in dt_clause_{} for probe ID 1 (dtrace:::BEGIN): invalid address (0x0) at BPF pc",
        e["clause"]
    );
    assert!(msg.starts_with(&want), "{e}");
}

#[test]
fn json_reader_that_goes_away_stops_nothing() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .args([
            "-x",
            "oformat=json",
            "-n",
            "BEGIN { trace(1); } tick-10ms { trace(2); } tick-300ms { exit(3); }",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let st = child.wait().unwrap();
    // exit(3) still took effect
    assert_eq!(st.code(), Some(3), "{err}");
    assert!(err.contains("reader went away; tracing continues"), "{err}");
}

#[test]
fn folded_output_is_the_aggregations_only() {
    let (rc, out, err) = dtrace(&[
        "-x",
        "oformat=folded",
        "-n",
        "BEGIN { @[probename, \"x;y\"] = sum(3); @[probename, \"z\"] = sum(4); exit(0); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out, "BEGIN;x:y 3\nBEGIN;z 4\n");
}

#[test]
fn flamegraph_writes_an_svg_and_leaves_other_aggregations_to_print() {
    let path = std::env::temp_dir().join(format!("dtrace-flame-{}.svg", std::process::id()));
    let opt = format!("flamegraph={}", path.display());
    let (rc, out, err) = dtrace(&[
        "-q",
        "-x",
        &opt,
        "-n",
        "BEGIN { @s[probename, stack()] = count(); @n = count(); exit(0); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    // the stack-keyed aggregation went into the graph; the other prints as usual
    assert_eq!(out, "\n                1\n");
    let titles = svg_titles(&path);
    let _ = std::fs::remove_file(&path);
    assert!(
        titles.iter().any(|t| t.starts_with("BEGIN (1 samples")),
        "{titles:?}"
    );
    // nothing to draw is an error, said plainly
    let (rc, _, err) = dtrace(&["-x", &opt, "-n", "BEGIN { @n = count(); exit(0); }"]);
    assert_eq!(rc, 1);
    assert!(err.contains("failed to write flame graph"), "{err}");
    assert!(err.contains("no stacks to draw"), "{err}");
}

fn get(addr: &str, path: &str) -> std::io::Result<(String, String)> {
    let mut s = TcpStream::connect(addr)?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n")?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    let (head, body) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
    Ok((head.to_string(), body.to_string()))
}

#[test]
fn metrics_endpoint_serves_openmetrics_while_tracing() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .args([
            "-x",
            "metrics=127.0.0.1:0",
            "-x",
            "aggrate=10ms",
            "-x",
            "switchrate=10ms",
            "-n",
            "tick-10ms { @ticks = count(); @lat[probename] = quantize(5); @top[\"a\\\"b\"] = max(7); } tick-60s { exit(0); }",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut addr = None;
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 {
        if let Some(rest) = line
            .trim()
            .strip_prefix("dtrace: serving metrics at http://")
        {
            addr = rest.strip_suffix("/metrics").map(str::to_string);
            break;
        }
        line.clear();
    }
    let addr = addr.unwrap_or_else(|| panic!("no address announced: {line}"));
    // a client that connects and goes away, and one that asks for another path
    drop(TcpStream::connect(&addr).unwrap());
    let (head, _) = get(&addr, "/").unwrap();
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    // scrape until the ticks have been counted (bounded: the run exits after 60s anyway)
    let mut body = String::new();
    for _ in 0..600 {
        let (head, b) = get(&addr, "/metrics").unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(
            head.contains("Content-Type: application/openmetrics-text; version=1.0.0"),
            "{head}"
        );
        body = b;
        if body.contains("dtrace_ticks_total") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (types, samples) = openmetrics::parse(&body).unwrap_or_else(|e| panic!("{e}\n{body}"));
    assert_eq!(
        types.get("dtrace_ticks").map(String::as_str),
        Some("counter")
    );
    assert_eq!(
        types.get("dtrace_lat").map(String::as_str),
        Some("histogram")
    );
    assert_eq!(types.get("dtrace_top").map(String::as_str), Some("gauge"));
    let ticks = openmetrics::find(&samples, "dtrace_ticks_total", &[]).unwrap();
    assert!(ticks.value >= 1.0, "{body}");
    let inf = openmetrics::find(
        &samples,
        "dtrace_lat_bucket",
        &[("key0", "tick-10ms"), ("le", "+Inf")],
    );
    assert!(inf.is_some_and(|s| s.value >= 1.0), "{body}");
    let le7 = openmetrics::find(
        &samples,
        "dtrace_lat_bucket",
        &[("key0", "tick-10ms"), ("le", "7")],
    );
    assert_eq!(le7.map(|s| s.value), inf.map(|s| s.value), "{body}");
    let top = openmetrics::find(&samples, "dtrace_top", &[("key0", "a\"b")]).unwrap();
    assert_eq!(top.value, 7.0);
    // ^C ends the run as usual, the aggregations printed
    interrupt(child.id());
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(0));
    assert!(out.contains("tick-10ms"), "{out}");
}

/// Sends SIGINT with kill(1) (no unsafe code in tests).
fn interrupt(pid: u32) {
    let st = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn metrics_address_that_cannot_be_bound_is_an_error() {
    let (rc, _, err) = dtrace(&["-x", "metrics=nonsense", "-n", "BEGIN { exit(0); }"]);
    assert_eq!(rc, 1);
    assert!(err.contains("failed to serve metrics at nonsense"), "{err}");
}

fn svg_titles(path: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(&text, opts).expect("well-formed SVG");
    doc.descendants()
        .filter(|n| n.tag_name().name() == "title")
        .filter_map(|n| n.text().map(str::to_string))
        .collect()
}

#[test]
fn flamegraph_of_sampled_kernel_stacks_in_one_command() {
    let test = "flamegraph_of_sampled_kernel_stacks_in_one_command";
    if !common::kernel_ok(test) {
        return;
    }
    let path = std::env::temp_dir().join(format!("dtrace-kflame-{}.svg", std::process::id()));
    let opt = format!("flamegraph={}", path.display());
    // dd spends its time in the kernel (read(2) of /dev/zero), so its samples have kernel stacks
    let (rc, out, err) = dtrace(&[
        "-x",
        &opt,
        "-n",
        "profile-997 /pid == $target/ { @[stack()] = count(); }",
        "-c",
        "dd if=/dev/zero of=/dev/null bs=64k count=40000",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        !out.contains("vmlinux`"),
        "drawn stacks are not printed again: {out}"
    );
    let titles = svg_titles(&path);
    let _ = std::fs::remove_file(&path);
    assert!(
        titles.iter().any(|t| t.starts_with("vmlinux`")),
        "{titles:?}"
    );
    assert!(titles.iter().any(|t| t.starts_with("all (")), "{titles:?}");
}
