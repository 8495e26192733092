//! Golden tests of the structured formats of `crate::oformat` from constructed records: JSON lines
//! for each record kind and each aggregating function (parsed by a JSON parser and compared as
//! values), folded stacks against the stacks they came from, the SVG flame graph parsed as XML, and
//! the OpenMetrics text checked by a strict parser of the format.

mod common;

use common::*;
use dtrace_consumer::consume::ConsumeAction;
use dtrace_consumer::oformat::{self, json::JsonOutput};
use dtrace_consumer::status::{DropKind, DropReport, ErrorReport};
use dtrace_consumer::symbols::{SymInfo, Symbolizer};
use dtrace_consumer::Decoder;
use dtrace_dif::program::{ActionKind as A, RecDesc};
use dtrace_framework::records::{AggDesc, AggRecord, BufferSnapshot};
use dtrace_testkit::openmetrics::{find, parse as parse_openmetrics};
use serde_json::{json, Value};

/// Kernel symbols: `main` at 0x1000, `work` at 0x2000, `leaf` at 0x3000, `odd;name` at 0x4000.
struct Syms;
impl Symbolizer for Syms {
    fn kernel(&self, addr: u64) -> Option<SymInfo> {
        let (name, base) = match addr & !0xfff {
            0x1000 => ("main", 0x1000),
            0x2000 => ("work", 0x2000),
            0x3000 => ("leaf", 0x3000),
            0x4000 => ("odd;name", 0x4000),
            _ => return None,
        };
        Some(SymInfo {
            object: "vmlinux".into(),
            symbol: Some((name.into(), base)),
        })
    }
}

fn decoder(format: &str) -> Decoder {
    let mut d = Decoder::default();
    d.symbols = Box::new(Syms);
    d.options.set("oformat", Some(format), false).unwrap();
    d
}

fn add(d: &mut Decoder, name: &str, a: &AggDesc, recs: &[AggRecord]) {
    d.aggs.add_desc(a.clone());
    d.agg_names.insert(a.varid, name.to_string());
    d.aggs.merge(recs).unwrap();
}

/// A 4-frame kernel stack key (leaf first, as the framework records it).
fn stack_spec() -> (A, u32, u16, u64) {
    (A::Stack, 32, 0, 4)
}

fn pcs(v: &[u64]) -> Vec<u8> {
    let mut b: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
    b.resize(32, 0);
    b
}

fn quantize_words(set: &[(usize, i64)]) -> Vec<u8> {
    let mut b = vec![0i64; 127];
    for &(i, v) in set {
        b[i] = v;
    }
    words(&b)
}

fn all_lines(d: &Decoder) -> Vec<String> {
    let mut out = Vec::new();
    d.print_all_aggregations(&mut out).unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn parse_lines(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON {l:?}: {e}")))
        .collect()
}

#[test]
fn oformat_values_are_checked() {
    let mut d = Decoder::default();
    assert!(d.options.set("oformat", Some("xml"), false).is_err());
    assert!(d.options.set("oformat", None, false).is_err());
    d.options.set("oformat", Some("folded"), false).unwrap();
    assert_eq!(oformat::OFormat::of(&d.options), oformat::OFormat::Folded);
    d.options.set("oformat", Some("text"), false).unwrap();
    assert_eq!(oformat::OFormat::of(&d.options), oformat::OFormat::Text);
    assert!(d.options.set("metrics", Some(""), false).is_err());
    d.options.set("flamegraph", Some("x.svg"), false).unwrap();
    assert_eq!(d.options.string("flamegraph"), Some("x.svg"));
}

#[test]
fn json_scalar_aggregations_with_keys() {
    let mut d = decoder("json");
    let key = [(A::DifExpr, 16, 0, 0), (A::DifExpr, 8, 0, 0)];
    let funcs = [
        ("c", A::AggCount, i64b(3)),
        ("s", A::AggSum, i64b(-12)),
        ("mn", A::AggMin, i64b(-7)),
        ("mx", A::AggMax, i64b(99)),
    ];
    for (i, (name, f, v)) in funcs.iter().enumerate() {
        let id = i as u32 + 1;
        let a = aggdesc(id, id, &key, (*f, 8, 0, 0));
        add(
            &mut d,
            name,
            &a,
            &[aggrec(&a, &[strb("bash", 16), i64b(42)], v.clone())],
        );
    }
    // avg: count then total; stddev: count, total, sum of squares (128 bits)
    let a = aggdesc(5, 5, &key[..1], (A::AggAvg, 16, 0, 0));
    add(
        &mut d,
        "av",
        &a,
        &[aggrec(&a, &[strb("cat", 16)], words(&[4, 10]))],
    );
    let a = aggdesc(6, 6, &[], (A::AggStddev, 32, 0, 0));
    // values 2 and 4: count 2, total 6, squares 20 -> stddev 1
    add(&mut d, "sd", &a, &[aggrec(&a, &[], words(&[2, 6, 20, 0]))]);
    let got = parse_lines(&all_lines(&d));
    let want = vec![
        json!({"aggregation-name": "c", "aggregation-data": [{"keys": ["bash", 42], "count": 3}]}),
        json!({"aggregation-name": "s", "aggregation-data": [{"keys": ["bash", 42], "sum": -12}]}),
        json!({"aggregation-name": "mn", "aggregation-data": [{"keys": ["bash", 42], "min": -7}]}),
        json!({"aggregation-name": "mx", "aggregation-data": [{"keys": ["bash", 42], "max": 99}]}),
        json!({"aggregation-name": "av", "aggregation-data": [{"keys": ["cat"], "avg": 2}]}),
        json!({"aggregation-name": "sd", "aggregation-data": [{"keys": [], "stddev": 1}]}),
    ];
    assert_eq!(got, want);
}

#[test]
fn json_distributions_have_numeric_buckets() {
    let mut d = decoder("json");
    let a = aggdesc(1, 1, &[], (A::AggQuantize, 127 * 8, 0, 0));
    // bucket 63 is 0, 64 is 1, 70 is 64..127
    add(
        &mut d,
        "q",
        &a,
        &[aggrec(&a, &[], quantize_words(&[(70, 17), (64, 2)]))],
    );
    // lquantize(x, 0, 10, 2): 5 levels, underflow and overflow
    let arg = dtrace_dif::program::lquantize_arg(0, 5, 2);
    let a = aggdesc(2, 2, &[], (A::AggLquantize, 8 * 8, 0, arg));
    let mut v = vec![arg as i64, 4, 0, 0, 0, 0, 0, 1];
    add(&mut d, "l", &a, &[aggrec(&a, &[], words(&v))]);
    // llquantize(x, 10, 0, 1, 10): buckets <= -100, -90..-10, -9..-1, 0, 1..9 by 1, 10..90 by 10,
    // >= 100
    let llarg = (10u64 << 48) | (1 << 16) | 10;
    let n = 2 * 18 + 3;
    let a = aggdesc(3, 3, &[], (A::AggLlquantize, 8 * (n + 1), 0, llarg));
    v = vec![0; n as usize + 1];
    v[0] = llarg as i64;
    v[1 + 19 + 1 + 9 + 2] = 5; // 30..39
    add(&mut d, "ll", &a, &[aggrec(&a, &[], words(&v))]);
    let got = parse_lines(&all_lines(&d));
    let want = vec![
        json!({"aggregation-name": "q", "aggregation-data": [{"keys": [], "buckets": [
            {"value": 0, "count": 0}, {"value": 1, "count": 2}, {"value": 2, "count": 0},
            {"value": 4, "count": 0}, {"value": 8, "count": 0}, {"value": 16, "count": 0},
            {"value": 32, "count": 0}, {"value": 64, "count": 17}, {"value": 128, "count": 0}]}]}),
        json!({"aggregation-name": "l", "aggregation-data": [{"keys": [], "buckets": [
            {"value": 0, "count": 4, "underflow": true}, {"value": 0, "count": 0},
            {"value": 2, "count": 0}, {"value": 4, "count": 0}, {"value": 6, "count": 0},
            {"value": 8, "count": 0}, {"value": 10, "count": 1}]}]}),
        json!({"aggregation-name": "ll", "aggregation-data": [{"keys": [], "buckets": [
            {"value": 20, "count": 0}, {"value": 30, "count": 5}, {"value": 40, "count": 0}]}]}),
    ];
    assert_eq!(got, want);
}

#[test]
fn json_stack_and_symbol_keys() {
    let mut d = decoder("json");
    let a = aggdesc(
        1,
        1,
        &[stack_spec(), (A::Sym, 8, 0, 0)],
        (A::AggCount, 8, 0, 0),
    );
    let recs = [aggrec(&a, &[pcs(&[0x3010, 0x2020]), i64b(0x1000)], i64b(5))];
    add(&mut d, "", &a, &recs);
    let got = parse_lines(&all_lines(&d));
    let want = json!({"aggregation-name": "", "aggregation-data": [{"keys": [
        {"stack-frames": [
            {"symbol": "vmlinux`leaf+0x10", "module": "vmlinux", "name": "leaf", "offset": "0x10"},
            {"symbol": "vmlinux`work+0x20", "module": "vmlinux", "name": "work", "offset": "0x20"}]},
        "vmlinux`main"], "count": 5}]});
    assert_eq!(got, vec![want]);
}

/// Consumes one record of `specs` with `values` through the JSON callbacks; returns the lines.
fn consume_json(d: &mut Decoder, specs: &[(A, u32, u16, u64)], values: &[Vec<u8>]) -> Vec<Value> {
    let ed = eprobe(3, 7, specs);
    d.eprobes.insert(3, ed.clone());
    d.probes.insert(7, probe(7, "profile", "", "", "tick-1s"));
    let mut data = record(&ed, values);
    data[4..8].copy_from_slice(&0u32.to_ne_bytes());
    data[8..12].copy_from_slice(&1234u32.to_ne_bytes());
    let snap = BufferSnapshot {
        cpu: 2,
        data,
        drops: 0,
    };
    let p = std::cell::RefCell::new(JsonOutput::default());
    let mut out = Vec::new();
    d.consume_buffer(
        &snap,
        &mut out,
        &mut |pd, o| p.borrow_mut().probe(pd, o),
        &mut |pd, r: Option<&RecDesc>, o| p.borrow_mut().record(pd, r, o),
        &mut |_| true,
        &mut |_| true,
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.ends_with('\n'), "{text:?}");
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    parse_lines(&lines)
}

#[test]
fn json_probe_firing_with_every_record_kind() {
    let mut d = decoder("json");
    d.add_program(&[b"x=%d \"%s\"\n".to_vec()], &[3]).unwrap();
    let specs = [
        (A::DifExpr, 8, 0, 0),
        (A::DifExpr, 4, 0, 0),
        (A::DifExpr, 2, 0, 0),
        (A::DifExpr, 16, 0, 0),
        (A::Printf, 8, 1, 0),
        (A::DifExpr, 16, 0, 0),
        stack_spec(),
        (A::Sym, 8, 0, 0),
        (A::Mod, 8, 0, 0),
        (A::DifExpr, 5, 0, 0),
        (A::Exit, 4, 0, 0),
    ];
    let values = [
        i64b(-5),
        i32b(-3),
        vec![0xff, 0xff],
        strb("a \"quoted\"\\", 16),
        i64b(7),
        strb("tab\there", 16),
        pcs(&[0x3010, 0x4008, 0x1000]),
        i64b(0x2004),
        i64b(0x2004),
        vec![1, 2, 0, 200, 0],
        i32b(0),
    ];
    let got = consume_json(&mut d, &specs, &values);
    let want = json!({
        "timestamp": 1234, "cpu": 2, "id": 7, "provider": "profile", "module": "",
        "function": "", "name": "tick-1s",
        "output": [
            {"value": -5}, {"value": -3}, {"value": 65535},
            {"value": "a \"quoted\"\\"},
            {"message": "x=7 \"tab\there\"\n"},
            {"value": 7}, {"value": "tab\there"},
            {"stack-frames": [
                {"symbol": "vmlinux`leaf+0x10", "module": "vmlinux", "name": "leaf", "offset": "0x10"},
                {"symbol": "vmlinux`odd;name+0x8", "module": "vmlinux", "name": "odd;name", "offset": "0x8"},
                {"symbol": "vmlinux`main", "module": "vmlinux", "name": "main"}]},
            {"sym": "vmlinux`work", "module": "vmlinux", "name": "work"},
            {"mod": "vmlinux"},
            {"value": [1, 2, 0, 200, 0]}
        ]
    });
    assert_eq!(got, vec![want]);
    assert_eq!(d.exit_status, Some(0));
}

#[test]
fn json_printa_inside_a_firing_is_the_aggregation() {
    let mut d = decoder("json");
    let a = aggdesc(1, 4, &[(A::DifExpr, 8, 0, 0)], (A::AggCount, 8, 0, 0));
    add(&mut d, "calls", &a, &[aggrec(&a, &[i64b(1)], i64b(2))]);
    let got = consume_json(&mut d, &[(A::Printa, 8, 0, 0)], &[i64b(4)]);
    let want =
        json!({"aggregation-name": "calls", "aggregation-data": [{"keys": [1], "count": 2}]});
    assert_eq!(got[0]["output"], json!([want]));
    // printed by printa(): not printed again at the end
    assert!(all_lines(&d).is_empty());
}

#[test]
fn json_drops_and_errors_are_internal_pseudo_probes() {
    let d = DropReport {
        cpu: Some(1),
        kind: DropKind::Aggregation,
        drops: 3,
        msg: "3 aggregation drops on CPU 1".into(),
    };
    let v: Value = serde_json::from_str(&oformat::json::drop_line(&d, 5)).unwrap();
    assert_eq!(
        v,
        json!({"timestamp": 5, "cpu": 1, "id": -1, "provider": "dtrace", "module": "INTERNAL",
               "function": "INTERNAL", "name": "DROP", "count": 3, "kind": 1,
               "msg": "3 aggregation drops on CPU 1"})
    );
    let e = ErrorReport {
        cpu: 0,
        probe_id: 1,
        clause: 0,
        offset: 12,
        fault: 1,
        addr: 0,
        msg: "error in dt_clause_0 for probe ID 1 (dtrace:::BEGIN): invalid address (0x0) at BPF pc 12\n".into(),
    };
    let line = oformat::json::error_line(&e, 6);
    assert_eq!(line.matches('\n').count(), 1);
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["name"], "ERROR");
    assert_eq!(v["fault"], "invalid address");
    assert_eq!(v["probe-id"], 1);
    assert_eq!(v["clause"], 0);
    assert_eq!(v["offset"], 12);
    assert_eq!(
        v["msg"],
        "error in dt_clause_0 for probe ID 1 (dtrace:::BEGIN): invalid address (0x0) at BPF pc 12"
    );
}

fn stack_aggs(d: &mut Decoder) {
    let a = aggdesc(
        1,
        1,
        &[(A::DifExpr, 16, 0, 0), stack_spec()],
        (A::AggCount, 8, 0, 0),
    );
    add(
        d,
        "cpu",
        &a,
        &[
            aggrec(
                &a,
                &[strb("bash", 16), pcs(&[0x3010, 0x2020, 0x1030])],
                i64b(5),
            ),
            aggrec(&a, &[strb("bash", 16), pcs(&[0x2040, 0x1030])], i64b(2)),
            aggrec(&a, &[strb("cat", 16), pcs(&[0x4001, 0x1030])], i64b(1)),
        ],
    );
    // a distribution keyed by stack: its weight is the number of values
    let b = aggdesc(2, 2, &[stack_spec()], (A::AggQuantize, 127 * 8, 0, 0));
    add(
        d,
        "lat",
        &b,
        &[aggrec(
            &b,
            &[pcs(&[0x2000, 0x1000])],
            quantize_words(&[(66, 3), (70, 4)]),
        )],
    );
}

#[test]
fn folded_stacks_are_root_first_with_keys_as_frames() {
    let mut d = decoder("folded");
    stack_aggs(&mut d);
    let got = all_lines(&d);
    let want = [
        "cat;vmlinux`main+0x30;vmlinux`odd:name+0x1 1",
        "bash;vmlinux`main+0x30;vmlinux`work+0x40 2",
        "bash;vmlinux`main+0x30;vmlinux`work+0x20;vmlinux`leaf+0x10 5",
        "vmlinux`main;vmlinux`work 7",
    ];
    assert_eq!(got, want);
}

#[test]
fn flamegraph_svg_parses_and_holds_the_frames() {
    let mut d = decoder("text");
    stack_aggs(&mut d);
    let (lines, used) = oformat::stack_lines(&d).unwrap();
    assert_eq!(used, vec![1, 2]);
    let mut svg = Vec::new();
    oformat::flamegraph::svg(&lines, "cpu", &mut svg).unwrap();
    let text = String::from_utf8(svg).unwrap();
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let doc =
        roxmltree::Document::parse_with_options(&text, opts).expect("the SVG is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let titles: Vec<String> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "title")
        .filter_map(|n| n.text().map(str::to_string))
        .collect();
    let has = |prefix: &str| titles.iter().any(|t| t.starts_with(prefix));
    assert!(has("bash (7 samples"), "{titles:?}");
    assert!(has("vmlinux`leaf+0x10 (5 samples"), "{titles:?}");
    assert!(has("vmlinux`odd:name+0x1 (1 samples"), "{titles:?}");
    assert!(has("vmlinux`main (7 samples"), "{titles:?}");
    assert!(has("all (15 samples"), "{titles:?}");
    let mut empty = Vec::new();
    assert!(oformat::flamegraph::svg(&[], "none", &mut empty).is_err());
}

#[test]
fn openmetrics_text_parses_with_types_labels_and_histograms() {
    let mut d = decoder("text");
    let a = aggdesc(1, 1, &[(A::DifExpr, 16, 0, 0)], (A::AggCount, 8, 0, 0));
    add(
        &mut d,
        "syscalls",
        &a,
        &[
            aggrec(&a, &[strb("read", 16)], i64b(10)),
            aggrec(&a, &[strb("a\"b\\c\nd", 16)], i64b(2)),
        ],
    );
    let a = aggdesc(2, 2, &[], (A::AggMax, 8, 0, 0));
    add(&mut d, "biggest", &a, &[aggrec(&a, &[], i64b(-4))]);
    let a = aggdesc(
        3,
        3,
        &[(A::DifExpr, 8, 0, 0)],
        (A::AggQuantize, 127 * 8, 0, 0),
    );
    add(
        &mut d,
        "lat",
        &a,
        &[aggrec(
            &a,
            &[i64b(3)],
            quantize_words(&[(60, 1), (63, 2), (66, 3)]),
        )],
    );
    let arg = dtrace_dif::program::lquantize_arg(0, 5, 2);
    let a = aggdesc(4, 4, &[], (A::AggLquantize, 8 * 8, 0, arg));
    add(
        &mut d,
        "lin",
        &a,
        &[aggrec(&a, &[], words(&[arg as i64, 1, 0, 2, 0, 0, 0, 3]))],
    );
    let a = aggdesc(5, 5, &[stack_spec()], (A::AggSum, 8, 0, 0));
    add(
        &mut d,
        "",
        &a,
        &[aggrec(&a, &[pcs(&[0x2000, 0x1000])], i64b(9))],
    );
    let text = oformat::metrics_text(&d).unwrap();
    let (types, samples) = parse_openmetrics(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let t = |n: &str| types.get(n).map(String::as_str);
    assert_eq!(t("dtrace_syscalls"), Some("counter"));
    assert_eq!(t("dtrace_biggest"), Some("gauge"));
    assert_eq!(t("dtrace_lat"), Some("histogram"));
    assert_eq!(t("dtrace_lin"), Some("histogram"));
    assert_eq!(t("dtrace"), Some("counter"));
    let v = |n: &str, l: &[(&str, &str)]| find(&samples, n, l).map(|s| s.value);
    assert_eq!(v("dtrace_syscalls_total", &[("key0", "read")]), Some(10.0));
    assert_eq!(
        v("dtrace_syscalls_total", &[("key0", "a\"b\\c\nd")]),
        Some(2.0)
    );
    assert!(text.contains(r#"key0="a\"b\\c\nd""#), "{text}");
    assert_eq!(v("dtrace_biggest", &[]), Some(-4.0));
    // quantize: bucket 60 is -4 (holds -7..-4), 63 is 0, 66 is 4 (holds 4..7)
    assert_eq!(
        v("dtrace_lat_bucket", &[("key0", "3"), ("le", "-8")]),
        Some(0.0)
    );
    assert_eq!(
        v("dtrace_lat_bucket", &[("key0", "3"), ("le", "-4")]),
        Some(1.0)
    );
    assert_eq!(
        v("dtrace_lat_bucket", &[("key0", "3"), ("le", "0")]),
        Some(3.0)
    );
    assert_eq!(
        v("dtrace_lat_bucket", &[("key0", "3"), ("le", "3")]),
        Some(3.0)
    );
    assert_eq!(
        v("dtrace_lat_bucket", &[("key0", "3"), ("le", "7")]),
        Some(6.0)
    );
    assert_eq!(
        v("dtrace_lat_bucket", &[("key0", "3"), ("le", "+Inf")]),
        Some(6.0)
    );
    assert_eq!(v("dtrace_lat_count", &[("key0", "3")]), Some(6.0));
    // lquantize(x, 0, 10, 2): < 0 holds ..-1, then 0..1, 2..3, ..., >= 10
    assert_eq!(v("dtrace_lin_bucket", &[("le", "-1")]), Some(1.0));
    assert_eq!(v("dtrace_lin_bucket", &[("le", "3")]), Some(3.0));
    assert_eq!(v("dtrace_lin_bucket", &[("le", "9")]), Some(3.0));
    assert_eq!(v("dtrace_lin_bucket", &[("le", "+Inf")]), Some(6.0));
    assert_eq!(
        v("dtrace_total", &[("key0", "vmlinux`main;vmlinux`work")]),
        Some(9.0)
    );
}

#[test]
fn openmetrics_parser_rejects_what_the_format_forbids() {
    for bad in [
        "# TYPE x counter\nx 1\n# EOF\n",
        "# TYPE x gauge\nx{a=\"b} 1\n# EOF\n",
        "# TYPE x gauge\nx 1\n",
        "# TYPE x histogram\nx_bucket{le=\"1\"} 2\nx_bucket{le=\"+Inf\"} 1\nx_count 1\n# EOF\n",
        "# TYPE x gauge\nx{a=\"\\q\"} 1\n# EOF\n",
    ] {
        assert!(parse_openmetrics(bad).is_err(), "{bad}");
    }
    assert!(parse_openmetrics("# TYPE x gauge\nx{a=\"\\\"\"} 1\n# EOF\n").is_ok());
}

#[test]
fn structured_callbacks_skip_nothing_the_text_prints() {
    // the JSON callbacks hand each record back to the library (This) and end each firing (Next)
    let mut p = JsonOutput::default();
    let ed = eprobe(1, 1, &[(A::DifExpr, 8, 0, 0)]);
    let pi = probe(1, "dtrace", "", "", "BEGIN");
    let data = record(&ed, &[i64b(1)]);
    let pd = dtrace_consumer::ProbeData {
        cpu: 0,
        edesc: &ed,
        pdesc: &pi,
        data: &data,
        timestamp: 0,
        flow: dtrace_consumer::consume::Flow::None,
        indent: 0,
        prefix: "",
    };
    let mut out = Vec::new();
    assert_eq!(p.probe(&pd, &mut out), ConsumeAction::This);
    assert_eq!(
        p.record(&pd, Some(&ed.recs[0]), &mut out),
        ConsumeAction::This
    );
    out.extend_from_slice(b"                1");
    assert_eq!(p.record(&pd, None, &mut out), ConsumeAction::Next);
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["output"], json!([{"value": 1}]));
}

/// The labels DTrace's text graph prints for a distribution, as JSON's bucket values (`< 10` is the
/// underflow bucket of value 10, `>= 100` the bucket of value 100).
fn text_labels(d: &Decoder) -> Vec<(i64, bool)> {
    let mut out = Vec::new();
    d.print_all_aggregations(&mut out).unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('|').map(|(label, _)| label.trim().to_string()))
        .filter(|l| l != "value")
        .map(|l| match l.strip_prefix("< ") {
            Some(v) => (v.parse().unwrap(), true),
            None if l.starts_with("abs() < ") => (0, false),
            None => (
                l.trim_start_matches(">= ")
                    .trim_start_matches("<= ")
                    .parse()
                    .unwrap(),
                false,
            ),
        })
        .collect()
}

#[test]
fn json_bucket_values_are_the_labels_of_the_text_graph() {
    // every bucket counted once, so both print every row
    for (factor, low, high, steps) in [
        (10u64, 0u64, 1u64, 10u64),
        (2, 0, 6, 2),
        (10, 1, 3, 10),
        (4, 2, 5, 16),
    ] {
        let arg = (factor << 48) | (low << 32) | (high << 16) | steps;
        // as many buckets as DTrace gives these parameters: count the text rows of a full value
        let mut n = 2;
        let mut v = 1u64;
        for _ in 0..low {
            v *= factor;
        }
        for _ in low..=high {
            let next = v * factor;
            let step = if next > steps { next / steps } else { 1 };
            n += ((next - v) / step) as usize;
            v = next;
        }
        // DTrace for Linux mirrors the buckets below zero
        let n = 2 * (n - 2) + 3;
        let mut words_v = vec![1i64; n + 1];
        words_v[0] = arg as i64;
        let value = words(&words_v);
        let mut text = decoder("text");
        let a = aggdesc(1, 1, &[], (A::AggLlquantize, value.len() as u32, 0, arg));
        add(&mut text, "ll", &a, &[aggrec(&a, &[], value.clone())]);
        let mut js = decoder("json");
        add(&mut js, "ll", &a, &[aggrec(&a, &[], value)]);
        let v: Value = serde_json::from_str(&all_lines(&js)[0]).unwrap();
        let json_labels: Vec<(i64, bool)> = v["aggregation-data"][0]["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| (b["value"].as_i64().unwrap(), b["underflow"] == true))
            .collect();
        assert_eq!(
            json_labels,
            text_labels(&text),
            "llquantize({factor}, {low}, {high}, {steps})"
        );
    }
}
