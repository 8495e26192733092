//! Golden tests of the aggregation display options `agghist`, `aggpack`, `aggzoom` and `encoding`,
//! from constructed aggregation records, against the layouts libdtrace draws (`dt_print_aggs`,
//! `dt_print_quanthdr[_packed]`, `dt_print_quantize_packed`, `dt_print_lquantize_packed`,
//! `dt_print_packed`, `dt_print_quantline[_utf8]`, `dt_aggregate_total`, `dt_aggregate_minmaxbin`).

mod common;

use common::*;
use dtrace_consumer::consume::{DefaultOutput, ProbeData};
use dtrace_consumer::Decoder;
use dtrace_dif::program::{ActionKind as A, RecDesc};
use dtrace_framework::records::{AggDesc, AggRecord, BufferSnapshot};

const DIST: &str = "------------- Distribution -------------";

fn decoder(opts: &[(&str, Option<&str>)]) -> Decoder {
    let mut d = Decoder::default();
    for (k, v) in opts {
        d.options.set(k, *v, false).unwrap();
    }
    d
}

fn add(d: &mut Decoder, a: &AggDesc, recs: &[AggRecord]) {
    d.aggs.add_desc(a.clone());
    d.aggs.merge(recs).unwrap();
}

fn print_all(d: &Decoder) -> String {
    let mut out = Vec::new();
    d.print_all_aggregations(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn quantize_words(set: &[(usize, i64)]) -> Vec<u8> {
    let mut b = vec![0i64; 127];
    for &(i, v) in set {
        b[i] = v;
    }
    words(&b)
}

// ------------------------------------------------------------------------------------------------
// agghist
// ------------------------------------------------------------------------------------------------

fn count_by_name(d: &mut Decoder) {
    let a = aggdesc(1, 1, &[(A::DifExpr, 16, 0, 0)], (A::AggCount, 8, 0, 0));
    add(
        d,
        &a,
        &[
            aggrec(&a, &[strb("bash", 16)], i64b(3)),
            aggrec(&a, &[strb("sshd", 16)], i64b(4)),
            aggrec(&a, &[strb("cat", 16)], i64b(1)),
        ],
    );
}

#[test]
fn agghist_count_with_string_keys() {
    let mut d = decoder(&[("agghist", None)]);
    count_by_name(&mut d);
    // Total 8: bars of 5, 15 and 20 columns; string keys right-justified in 16 columns.
    let want = "\n              key  ------------- Distribution ------------- count    \n\
                 \x20             cat |@@@@@                                    1        \n\
                 \x20            bash |@@@@@@@@@@@@@@@                          3        \n\
                 \x20            sshd |@@@@@@@@@@@@@@@@@@@@                     4        \n";
    assert_eq!(print_all(&d), want);
}

#[test]
fn agghist_sum_with_negative_values_draws_both_sides() {
    let mut d = decoder(&[("agghist", None)]);
    let a = aggdesc(1, 1, &[(A::DifExpr, 8, 0, 0)], (A::AggSum, 8, 0, 0));
    add(
        &mut d,
        &a,
        &[
            aggrec(&a, &[i64b(1)], i64b(-5)),
            aggrec(&a, &[i64b(2)], i64b(10)),
            aggrec(&a, &[i64b(3)], i64b(5)),
        ],
    );
    // Total of magnitudes 20; half-width bars either side of the centre line.
    let mut want = format!("\n{:>17} {DIST:>41} {:<9}\n", "key", "count");
    want.push_str(&format!(
        "{:>17} {}{}|{} {:<9}\n",
        1,
        " ".repeat(15),
        "@".repeat(5),
        " ".repeat(20),
        -5
    ));
    want.push_str(&format!(
        "{:>17} {}|{}{} {:<9}\n",
        3,
        " ".repeat(20),
        "@".repeat(5),
        " ".repeat(15),
        5
    ));
    want.push_str(&format!(
        "{:>17} {}|{}{} {:<9}\n",
        2,
        " ".repeat(20),
        "@".repeat(10),
        " ".repeat(10),
        10
    ));
    assert_eq!(print_all(&d), want);
}

#[test]
fn agghist_without_keys_uses_the_value_header() {
    let mut d = decoder(&[("agghist", None)]);
    let a = aggdesc(1, 1, &[], (A::AggSum, 8, 0, 0));
    add(&mut d, &a, &[aggrec(&a, &[], i64b(40))]);
    let want = format!(
        "\n           value  {DIST} count    \n |{} 40       \n",
        "@".repeat(40)
    );
    assert_eq!(print_all(&d), want);
}

#[test]
fn agghist_avg_bars_show_the_averages() {
    let mut d = decoder(&[("agghist", None)]);
    let a = aggdesc(1, 1, &[(A::DifExpr, 4, 0, 0)], (A::AggAvg, 16, 0, 0));
    add(
        &mut d,
        &a,
        &[
            aggrec(&a, &[i32b(7)], words(&[2, 6])),  // average 3
            aggrec(&a, &[i32b(9)], words(&[1, 1])),  // average 1
            aggrec(&a, &[i32b(8)], words(&[4, 16])), // average 4
        ],
    );
    // Total of averages 8; a 4-byte key takes 8 columns.
    let want = format!(
        "\n{:>9} {DIST:>41} {:<9}\n{:>9} |{:<40} 1        \n{:>9} |{:<40} 3        \n{:>9} |{:<40} 4        \n",
        "key",
        "count",
        9,
        "@".repeat(5),
        7,
        "@".repeat(15),
        8,
        "@".repeat(20)
    );
    assert_eq!(print_all(&d), want);
}

#[test]
fn aggzoom_scales_histograms_to_the_largest_value() {
    let mut d = decoder(&[("agghist", None), ("aggzoom", None)]);
    let a = aggdesc(1, 1, &[(A::DifExpr, 8, 0, 0)], (A::AggCount, 8, 0, 0));
    add(
        &mut d,
        &a,
        &[
            aggrec(&a, &[i64b(1)], i64b(2)),
            aggrec(&a, &[i64b(2)], i64b(20)),
        ],
    );
    // The total is 20 / 0.95 truncated: 21. 20 -> 38 columns (95%), 2 -> 4.
    let want = format!(
        "\n{:>17} {DIST:>41} {:<9}\n{:>17} |{:<40} 2        \n{:>17} |{:<40} 20       \n",
        "key",
        "count",
        1,
        "@".repeat(4),
        2,
        "@".repeat(38)
    );
    assert_eq!(print_all(&d), want);
    // Without aggzoom the same data fills the bar by shares of 22.
    let mut d = decoder(&[("agghist", None)]);
    add(
        &mut d,
        &a,
        &[
            aggrec(&a, &[i64b(1)], i64b(2)),
            aggrec(&a, &[i64b(2)], i64b(20)),
        ],
    );
    let s = print_all(&d);
    assert!(s.contains(&format!("|{:<40} 20", "@".repeat(36))), "{s}");
}

#[test]
fn agghist_leaves_min_max_and_quantize_alone() {
    let mut d = decoder(&[("agghist", None)]);
    let a = aggdesc(1, 1, &[], (A::AggMax, 8, 0, 0));
    let q = aggdesc(2, 2, &[], (A::AggQuantize, 127 * 8, 0, 0));
    add(&mut d, &a, &[aggrec(&a, &[], i64b(7))]);
    add(&mut d, &q, &[aggrec(&q, &[], quantize_words(&[(64, 1)]))]);
    let want = format!(
        "                7\n\n           value  {DIST} count    \n               0 |{:40} 0        \n               1 |{} 1        \n               2 |{:40} 0        \n\n",
        "",
        "@".repeat(40),
        ""
    );
    assert_eq!(print_all(&d), want);
}

// ------------------------------------------------------------------------------------------------
// aggpack
// ------------------------------------------------------------------------------------------------

fn two_quantizes(d: &mut Decoder) {
    let a = aggdesc(
        1,
        1,
        &[(A::DifExpr, 4, 0, 0)],
        (A::AggQuantize, 127 * 8, 0, 0),
    );
    add(
        d,
        &a,
        &[
            // key 1: two 1s and one 4..7
            aggrec(&a, &[i32b(1)], quantize_words(&[(64, 2), (66, 1)])),
            // key 2: one 2..3 and seven 8..15
            aggrec(&a, &[i32b(2)], quantize_words(&[(65, 1), (67, 7)])),
        ],
    );
}

#[test]
fn aggpack_quantize_rows_share_one_range() {
    let mut d = decoder(&[("aggpack", None), ("encoding", Some("ascii"))]);
    two_quantizes(&mut d);
    // Data in buckets 1..8 across keys: shown from 0 to 16, six cells.
    let want = "\n      key  min .------. max  | count\n\
                \x20       1    0 : x x  : 16   | 3\n\
                \x20       2    0 :  _ X : 16   | 8\n";
    assert_eq!(print_all(&d), want);
}

#[test]
fn aggpack_quantize_in_utf8_block_elements() {
    let mut d = decoder(&[("aggpack", None), ("encoding", Some("utf8"))]);
    two_quantizes(&mut d);
    let want = "\n      key  min .------. max  | count\n\
                \x20       1    0 : \u{2586} \u{2583}  : 16   | 3\n\
                \x20       2    0 :  \u{2582} \u{2587} : 16   | 8\n";
    assert_eq!(print_all(&d), want);
}

#[test]
fn aggpack_negative_counts_and_no_keys() {
    let mut d = decoder(&[("aggpack", None), ("encoding", Some("ascii"))]);
    let a = aggdesc(1, 1, &[], (A::AggQuantize, 127 * 8, 0, 0));
    // quantize(1, 4) and quantize(2, -4): the counts cancel.
    add(
        &mut d,
        &a,
        &[aggrec(&a, &[], quantize_words(&[(64, 4), (65, -4)]))],
    );
    let want = "\n  min .----. max  | count\n    0 : xv : 4    | 0\n";
    assert_eq!(print_all(&d), want);
}

#[test]
fn aggpack_empty_quantize_shows_the_zero_bucket() {
    let mut d = decoder(&[("aggpack", None), ("encoding", Some("ascii"))]);
    let a = aggdesc(
        1,
        1,
        &[(A::DifExpr, 8, 0, 0)],
        (A::AggQuantize, 127 * 8, 0, 0),
    );
    add(&mut d, &a, &[aggrec(&a, &[i64b(5)], quantize_words(&[]))]);
    let want = format!(
        "\n{:>17} {:>4} .--. {:<4} | count\n{:>17} {:>4} :  : {:<4} | 0\n",
        "key", "min", "max", 5, 0, 1
    );
    assert_eq!(print_all(&d), want);
}

#[test]
fn aggpack_negative_buckets_widen_the_labels() {
    let mut d = decoder(&[("aggpack", None), ("encoding", Some("ascii"))]);
    let a = aggdesc(1, 1, &[], (A::AggQuantize, 127 * 8, 0, 0));
    // Values -20000 (bucket -16384) and 20000 (bucket 16384).
    add(
        &mut d,
        &a,
        &[aggrec(&a, &[], quantize_words(&[(48, 1), (78, 1)]))],
    );
    // From -32768 (6 columns) to 32768 (5 columns): 33 cells.
    let want = format!(
        "\n {:>6} .{}. {:<5} | count\n {:>6} : x{}x : {:<5} | 2\n",
        "min",
        "-".repeat(33),
        "max",
        -32768,
        " ".repeat(29),
        32768
    );
    assert_eq!(print_all(&d), want);
}

#[test]
fn aggpack_lquantize_shows_the_whole_range() {
    let mut d = decoder(&[("aggpack", None), ("encoding", Some("ascii"))]);
    let arg = dtrace_dif::program::lquantize_arg(0, 2, 5);
    let a = aggdesc(
        1,
        1,
        &[(A::DifExpr, 16, 0, 0)],
        (A::AggLquantize, 8 * 5, 0, arg),
    );
    add(
        &mut d,
        &a,
        &[
            aggrec(&a, &[strb("a", 16)], words(&[arg as i64, 0, 4, 0, 1])),
            aggrec(&a, &[strb("b", 16)], words(&[arg as i64, 2, 0, 0, 0])),
        ],
    );
    let want = "\n              key     min .----. max      | count\n\
                \x20               b     < 0 :X   : >= 10    | 2\n\
                \x20               a     < 0 : X _: >= 10    | 5\n";
    assert_eq!(print_all(&d), want);
}

#[test]
fn aggpack_leaves_count_and_llquantize_alone() {
    let mut d = decoder(&[("aggpack", None), ("encoding", Some("ascii"))]);
    count_by_name(&mut d);
    let s = print_all(&d);
    assert_eq!(
        s.lines().next().unwrap(),
        format!("  cat{}{:>17}", " ".repeat(47), 1)
    );
    let mut d = decoder(&[("aggpack", None)]);
    let arg = dtrace_dif::program::llquantize_arg(10, 0, 2, 10);
    // 27 buckets either side of zero, zero and the two overflow buckets
    let a = aggdesc(1, 1, &[], (A::AggLlquantize, 8 * 58, 0, arg));
    let mut v = vec![0i64; 58];
    v[0] = arg as i64;
    v[1 + 28 + 6] = 1;
    add(&mut d, &a, &[aggrec(&a, &[], words(&v))]);
    assert!(print_all(&d).contains(DIST));
}

// ------------------------------------------------------------------------------------------------
// aggzoom and encoding on ordinary graphs
// ------------------------------------------------------------------------------------------------

#[test]
fn aggzoom_draws_the_largest_bucket_at_95_percent() {
    let mut d = decoder(&[("aggzoom", None)]);
    let a = aggdesc(1, 1, &[], (A::AggQuantize, 127 * 8, 0, 0));
    add(
        &mut d,
        &a,
        &[aggrec(
            &a,
            &[],
            quantize_words(&[(64, 1), (65, 2), (66, 1)]),
        )],
    );
    let row = |v: i64, ats: usize, n: i64| format!("{v:>16} |{:<40} {n:<9}\n", "@".repeat(ats));
    let want = format!(
        "\n           value  {DIST} count    \n{}{}{}{}{}\n",
        row(0, 0, 0),
        row(1, 19, 1),
        row(2, 38, 2),
        row(4, 19, 1),
        row(8, 0, 0)
    );
    assert_eq!(print_all(&d), want);
}

#[test]
fn utf8_encoding_draws_bars_with_eighth_blocks() {
    let mut d = decoder(&[("encoding", Some("utf8"))]);
    let a = aggdesc(1, 1, &[], (A::AggQuantize, 127 * 8, 0, 0));
    add(
        &mut d,
        &a,
        &[aggrec(&a, &[], quantize_words(&[(64, 1), (65, 2)]))],
    );
    // Total 3: 13 1/3 cells (13 full, a quarter block) and 26 2/3 cells (26 full, five eighths).
    let full = "\u{2588}";
    let want = format!(
        "\n           value  {DIST} count    \n               0 |{} 0        \n               1 |{}\u{258e}{} 1        \n               2 |{}\u{258b}{} 2        \n               4 |{} 0        \n\n",
        " ".repeat(40),
        full.repeat(13),
        " ".repeat(26),
        full.repeat(26),
        " ".repeat(13),
        " ".repeat(40)
    );
    assert_eq!(print_all(&d), want);
}

// ------------------------------------------------------------------------------------------------
// printa
// ------------------------------------------------------------------------------------------------

fn printa_run(
    d: &mut Decoder,
    specs: &[(A, u32, u16, u64)],
    formats: &[&str],
    ids: &[i32],
) -> String {
    let ep = eprobe(1, 1, specs);
    d.eprobes.insert(1, ep.clone());
    d.probes.insert(1, probe(1, "dtrace", "", "", "BEGIN"));
    let f: Vec<Vec<u8>> = formats.iter().map(|s| s.as_bytes().to_vec()).collect();
    d.add_program(&f, &[1]).unwrap();
    d.options.set("quiet", None, false).unwrap();
    let r = record(&ep, &ids.iter().map(|&i| i32b(i)).collect::<Vec<_>>());
    let snap = BufferSnapshot {
        cpu: 0,
        data: r,
        drops: 0,
    };
    let mut o = DefaultOutput {
        quiet: true,
        ..Default::default()
    };
    let o2 = std::cell::RefCell::new(&mut o);
    let mut pf = |pd: &ProbeData<'_>, out: &mut Vec<u8>| o2.borrow_mut().probe(pd, out);
    let mut rf = |pd: &ProbeData<'_>, r: Option<&RecDesc>, out: &mut Vec<u8>| {
        o2.borrow_mut().record(pd, r, out)
    };
    let mut out = Vec::new();
    d.consume_buffer(
        &snap,
        &mut out,
        &mut pf,
        &mut rf,
        &mut |_| true,
        &mut |_| true,
    )
    .unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn printa_without_format_packs_with_a_blank_line_first() {
    let mut d = decoder(&[("aggpack", None), ("encoding", Some("ascii"))]);
    two_quantizes(&mut d);
    let got = printa_run(&mut d, &[(A::Printa, 4, 0, 0)], &[], &[1]);
    let want = "\n\n      key  min .------. max  | count\n\
                \x20       1    0 : x x  : 16   | 3\n\
                \x20       2    0 :  _ X : 16   | 8\n";
    assert_eq!(got, want);
    // printa marked it printed: nothing more at the end.
    assert_eq!(print_all(&d), "");
}

#[test]
fn printa_with_a_format_is_not_packed_but_is_zoomed() {
    let mut d = decoder(&[("aggpack", None), ("aggzoom", None)]);
    let a = aggdesc(
        1,
        1,
        &[(A::DifExpr, 4, 0, 0)],
        (A::AggQuantize, 127 * 8, 0, 0),
    );
    add(
        &mut d,
        &a,
        &[aggrec(&a, &[i32b(3)], quantize_words(&[(64, 1)]))],
    );
    let got = printa_run(&mut d, &[(A::Printa, 4, 1, 0)], &["k=%d%@d"], &[1]);
    let want = format!(
        "k=3\n           value  {DIST} count    \n               0 |{:40} 0        \n               1 |{:<40} 1        \n               2 |{:40} 0        \n",
        "",
        "@".repeat(38),
        ""
    );
    assert_eq!(got, want);
}

#[test]
fn printa_of_joined_aggregations_is_not_histogrammed() {
    let mut d = decoder(&[("agghist", None)]);
    let a = aggdesc(1, 1, &[(A::DifExpr, 8, 0, 0)], (A::AggCount, 8, 0, 0));
    let b = aggdesc(2, 2, &[(A::DifExpr, 8, 0, 0)], (A::AggSum, 8, 0, 0));
    add(&mut d, &a, &[aggrec(&a, &[i64b(1)], i64b(5))]);
    add(&mut d, &b, &[aggrec(&b, &[i64b(1)], i64b(9))]);
    // Joining aggregations takes a format (D refuses printa(@a, @b) without one): consecutive
    // printa records without a format are separate printa() calls.
    let got = printa_run(
        &mut d,
        &[(A::Printa, 4, 1, 0), (A::Printa, 4, 1, 0)],
        &["%d %@d %@d\n"],
        &[1, 2],
    );
    assert_eq!(got, "1 5 9\n");
}

#[test]
fn setopt_turns_agghist_on_while_tracing() {
    let mut d = decoder(&[]);
    count_by_name(&mut d);
    assert!(!print_all(&d).contains(DIST));
    d.options.set("agghist", Some("yes"), true).unwrap();
    assert!(print_all(&d).contains(DIST));
    d.options.set("agghist", Some("no"), true).unwrap();
    assert!(!print_all(&d).contains(DIST));
}
