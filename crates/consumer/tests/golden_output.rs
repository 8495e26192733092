//! Golden tests of the consumer's output, from constructed records, against DTrace's documented
//! formats: default probe lines, trace() by type, printf, aggregations and their graphs, printa,
//! errors, drops, flow indentation, byte dumps.

mod common;

use common::*;
use dtrace_consumer::consume::{DefaultOutput, ProbeData};
use dtrace_consumer::status::{DropReport, ErrorReport};
use dtrace_consumer::{ConsumeAction, Decoder};
use dtrace_dif::program::{ActionKind as A, RecDesc};
use dtrace_framework::records::{BufferSnapshot, EprobeDesc};

struct Run {
    out: String,
    errors: Vec<String>,
    drops: Vec<String>,
}

fn setup(eps: &[EprobeDesc], formats: &[&str]) -> Decoder {
    let mut d = Decoder::default();
    d.probes.insert(1, probe(1, "dtrace", "", "", "BEGIN"));
    d.probes.insert(2, probe(2, "dtrace", "", "", "END"));
    d.probes.insert(3, probe(3, "dtrace", "", "", "ERROR"));
    let f: Vec<Vec<u8>> = formats.iter().map(|s| s.as_bytes().to_vec()).collect();
    let epids: Vec<u32> = eps.iter().map(|e| e.epid).collect();
    d.add_program(&f, &epids).unwrap();
    for e in eps {
        d.eprobes.insert(e.epid, e.clone());
    }
    d
}

fn run(d: &mut Decoder, bufs: &[BufferSnapshot], quiet: bool) -> Run {
    d.options
        .set("quiet", Some(if quiet { "yes" } else { "no" }), false)
        .unwrap();
    let mut o = DefaultOutput {
        quiet,
        flowindent: d.options.is_set("flowindent"),
        ..Default::default()
    };
    let o2 = std::cell::RefCell::new(&mut o);
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let mut drops = Vec::new();
    for b in bufs {
        let mut pf = |pd: &ProbeData<'_>, out: &mut Vec<u8>| o2.borrow_mut().probe(pd, out);
        let mut rf = |pd: &ProbeData<'_>, r: Option<&RecDesc>, out: &mut Vec<u8>| {
            o2.borrow_mut().record(pd, r, out)
        };
        let mut ef = |e: &ErrorReport| {
            errors.push(e.msg.clone());
            true
        };
        let mut df = |e: &DropReport| {
            drops.push(e.msg.clone());
            true
        };
        d.consume_buffer(b, &mut out, &mut pf, &mut rf, &mut ef, &mut df)
            .unwrap();
    }
    Run {
        out: String::from_utf8(out).unwrap(),
        errors,
        drops,
    }
}

fn buf(cpu: u32, recs: &[Vec<u8>]) -> BufferSnapshot {
    BufferSnapshot {
        cpu,
        data: recs.concat(),
        drops: 0,
    }
}

#[test]
fn default_probe_lines_and_trace_by_type() {
    // trace() as DTrace for Linux prints it: ` %19ld` (signed) or ` %20lu` (unsigned) for 64 bits,
    // ` %10d`, ` %5d`, ` %3d`, signed or unsigned as the traced expression's type says (the
    // record's arg).
    let s = dtrace_dif::program::TRACE_SIGNED;
    let ep = eprobe(
        1,
        1,
        &[
            (A::DifExpr, 8, 0, s),
            (A::DifExpr, 4, 0, s),
            (A::DifExpr, 2, 0, 0),
            (A::DifExpr, 1, 0, 0),
            (A::DifExpr, 32, 0, 0),
            (A::DifExpr, 4, 0, 0),
            (A::DifExpr, 1, 0, s),
            (A::DifExpr, 8, 0, 0),
        ],
    );
    let mut d = setup(std::slice::from_ref(&ep), &[]);
    let r = record(
        &ep,
        &[
            i64b(-42),
            i32b(-7),
            vec![0xff, 0xff],
            vec![200],
            strb("hello", 32),
            i32b(-1),
            vec![0xff],
            i64b(-1),
        ],
    );
    let got = run(&mut d, &[buf(0, std::slice::from_ref(&r))], false).out;
    let want = "CPU     ID                    FUNCTION:NAME\n  0      1                           :BEGIN                  -42         -7 65535 200  hello                             4294967295  -1 18446744073709551615\n";
    assert_eq!(got, want);
    let got = run(&mut d, &[buf(0, &[r])], true).out;
    assert_eq!(got, "-42-765535200hello4294967295-118446744073709551615");
}

#[test]
fn printf_conversions() {
    let ep = eprobe(
        1,
        1,
        &[
            (A::Printf, 8, 1, 0),
            (A::DifExpr, 16, 0, 0),
            (A::DifExpr, 4, 0, 0),
            (A::DifExpr, 8, 0, 0),
            (A::DifExpr, 8, 0, 0),
            (A::DifExpr, 8, 0, 0),
            (A::DifExpr, 8, 0, 0),
            (A::DifExpr, 16, 0, 0),
            (A::DifExpr, 1, 0, 0),
        ],
    );
    let fmt = "%d %s|%5d|%-6x|%08.3f|%a|%Y|%S|%c%%\n";
    let mut d = setup(std::slice::from_ref(&ep), &[fmt]);
    let ts = 123_787_200u64 * 1_000_000_000;
    let r = record(
        &ep,
        &[
            i64b(42),
            strb("hi", 16),
            i32b(-3),
            i64b(255),
            2.5f64.to_bits().to_ne_bytes().to_vec(),
            i64b(0x1234),
            ts.to_ne_bytes().to_vec(),
            strb("a\tb\"", 16),
            vec![b'Z'],
        ],
    );
    let got = run(&mut d, &[buf(0, &[r])], true).out;
    assert_eq!(
        got,
        "42 hi|   -3|ff    |0002.500|0x1234|1973 Dec  3 17:20:00|a\\tb\\\"|Z%\n"
    );
}

#[test]
fn printf_d_of_an_unsigned_first_argument_prints_it_unsigned() {
    // printf("%d %d\n", (uint8_t)x, (uint8_t)y): the first argument's mark is the high bit of the
    // printf record's arg (its low bits the format's index).
    let first = dtrace_dif::program::PRINTF_FIRST_UNSIGNED;
    let u = dtrace_dif::program::PRINTF_UNSIGNED;
    let ep = eprobe(1, 1, &[(A::Printf, 1, 1, first), (A::DifExpr, 1, 0, u)]);
    let mut d = setup(std::slice::from_ref(&ep), &["%d %d\n"]);
    let r = record(&ep, &[vec![0xfe], vec![0xff]]);
    let got = run(&mut d, &[buf(0, &[r])], true).out;
    assert_eq!(got, "254 255\n");
    // unmarked, the same byte prints signed
    let ep = eprobe(1, 1, &[(A::Printf, 1, 1, 0), (A::DifExpr, 1, 0, 0)]);
    let mut d = setup(std::slice::from_ref(&ep), &["%d %d\n"]);
    let r = record(&ep, &[vec![0xfe], vec![0xff]]);
    let got = run(&mut d, &[buf(0, &[r])], true).out;
    assert_eq!(got, "-2 -1\n");
}

#[test]
fn printf_d_of_unsigned_arguments_prints_them_unsigned() {
    // printf("%d %d %d %i %d\n", a, (uint8_t)x, (uint32_t)y, (uint64_t)z, (int)w) with all bits set: the
    // compiler marks the unsigned arguments' records, and %d/%i print them as DTrace for Linux does.
    // The first argument is recorded by the printf action itself (no mark: printed signed).
    let u = dtrace_dif::program::PRINTF_UNSIGNED;
    let ep = eprobe(
        1,
        1,
        &[
            (A::Printf, 8, 1, 0),
            (A::DifExpr, 8, 0, u),
            (A::DifExpr, 8, 0, u),
            (A::DifExpr, 8, 0, u),
            (A::DifExpr, 8, 0, 0),
        ],
    );
    let mut d = setup(std::slice::from_ref(&ep), &["%d %d %d %i %d\n"]);
    let r = record(
        &ep,
        &[i64b(-1), i64b(255), i64b(4294967295), i64b(-1), i64b(-1)],
    );
    let got = run(&mut d, &[buf(0, &[r])], true).out;
    assert_eq!(got, "-1 255 4294967295 18446744073709551615 -1\n");
}

#[test]
fn time_conversions_print_in_the_decoders_zone() {
    use dtrace_consumer::timefmt::Zone;
    let ep = eprobe(1, 1, &[(A::Printf, 8, 1, 0), (A::DifExpr, 8, 0, 0)]);
    let fmt = "%Y|%-32T|\n";
    // Either side of the spring-forward and fall-back instants of US Eastern in 2026.
    let cases = [
        (
            1_772_953_199u64,
            "2026 Mar  8 01:59:59|Sun, 08 Mar 2026 01:59:59 EST   |\n",
        ),
        (
            1_772_953_200,
            "2026 Mar  8 03:00:00|Sun, 08 Mar 2026 03:00:00 EDT   |\n",
        ),
        (
            1_793_512_799,
            "2026 Nov  1 01:59:59|Sun, 01 Nov 2026 01:59:59 EDT   |\n",
        ),
        (
            1_793_512_800,
            "2026 Nov  1 01:00:00|Sun, 01 Nov 2026 01:00:00 EST   |\n",
        ),
    ];
    let zones = [
        Zone::from_posix("EST5EDT,M3.2.0,M11.1.0").unwrap(),
        Zone::from_tz_env(Some("America/New_York"), None, &|p| std::fs::read(p).ok()),
    ];
    for (i, zone) in zones.into_iter().enumerate() {
        if i == 1
            && !dtrace_testkit::skip_unless(
                std::path::Path::new("/usr/share/zoneinfo/America/New_York").exists(),
                "time_conversions_print_in_the_decoders_zone (America/New_York)",
                "no /usr/share/zoneinfo (scripts/setup installs tzdata)",
            )
        {
            continue;
        }
        let mut d = setup(std::slice::from_ref(&ep), &[fmt]);
        d.zone = zone;
        for (secs, want) in cases {
            let ns = secs * 1_000_000_000 + 999_999_999;
            let r = record(&ep, &[ns.to_ne_bytes().to_vec(), ns.to_ne_bytes().to_vec()]);
            assert_eq!(run(&mut d, &[buf(0, &[r])], true).out, want, "zone {i}");
        }
    }
    // The default zone is UTC.
    let mut d = setup(std::slice::from_ref(&ep), &[fmt]);
    let ns = 1_772_953_200u64 * 1_000_000_000;
    let r = record(&ep, &[ns.to_ne_bytes().to_vec(), ns.to_ne_bytes().to_vec()]);
    assert_eq!(
        run(&mut d, &[buf(0, &[r])], true).out,
        "2026 Mar  8 07:00:00|Sun, 08 Mar 2026 07:00:00 UTC   |\n"
    );
}

#[test]
fn printf_star_width_and_precision() {
    let ep = eprobe(
        1,
        1,
        &[
            (A::Printf, 4, 1, 0),
            (A::DifExpr, 4, 0, 0),
            (A::DifExpr, 8, 0, 0),
            (A::DifExpr, 4, 0, 0),
            (A::DifExpr, 16, 0, 0),
        ],
    );
    let mut d = setup(std::slice::from_ref(&ep), &["[%*.*d][%-*s]\n"]);
    let r = record(&ep, &[i32b(6), i32b(4), i64b(7), i32b(5), strb("ab", 16)]);
    assert_eq!(run(&mut d, &[buf(0, &[r])], true).out, "[  0007][ab   ]\n");
}

#[test]
fn printf_widths_and_precisions_are_not_capped_below_a_c_int() {
    // DTrace hands them to printf(3): ten million columns are ten million columns.
    let ep = eprobe(
        1,
        1,
        &[
            (A::Printf, 4, 1, 0),
            (A::DifExpr, 4, 0, 0),
            (A::DifExpr, 4, 0, 0),
        ],
    );
    let mut d = setup(
        std::slice::from_ref(&ep),
        &["%10000000d\n%.10000000d\n%10000000.10000000d\n"],
    );
    let r = record(&ep, &[i32b(1), i32b(1), i32b(1)]);
    let out = run(&mut d, &[buf(0, &[r])], true).out;
    let lens: Vec<usize> = out.lines().map(str::len).collect();
    assert_eq!(lens, [10_000_000; 3]);
}

#[test]
fn printf_without_arguments_uses_its_record() {
    let ep = eprobe(1, 1, &[(A::Printf, 0, 1, 0), (A::DifExpr, 8, 0, 0)]);
    let mut d = setup(std::slice::from_ref(&ep), &["hello\n"]);
    let r = record(&ep, &[vec![], i64b(5)]);
    // The trace() after the printf still prints.
    assert_eq!(run(&mut d, &[buf(0, &[r])], true).out, "hello\n5");
}

fn key_count_aggs() -> Decoder {
    let mut d = setup(&[], &[]);
    let a = aggdesc(1, 0, &[(A::DifExpr, 16, 0, 0)], (A::AggCount, 8, 0, 0));
    d.aggs.add_desc(a.clone());
    let recs = vec![
        aggrec(&a, &[strb("bash", 16)], i64b(3)),
        aggrec(&a, &[strb("sshd", 16)], i64b(6)),
        aggrec(&a, &[strb("cat", 16)], i64b(1)),
        aggrec(&a, &[strb("sshd", 16)], i64b(4)),
    ];
    d.aggs.merge(&recs).unwrap();
    d
}

#[test]
fn default_aggregation_output_sorted_by_value() {
    let d = key_count_aggs();
    let mut out = Vec::new();
    d.print_all_aggregations(&mut out).unwrap();
    let want = format!(
        "  cat{}{:>17}\n  bash{}{:>17}\n  sshd{}{:>17}\n",
        " ".repeat(47),
        "1",
        " ".repeat(46),
        "3",
        " ".repeat(46),
        "10"
    );
    assert_eq!(String::from_utf8(out).unwrap(), want);
}

#[test]
fn aggsortkey_and_aggsortrev() {
    let mut d = key_count_aggs();
    d.options.set("aggsortkey", None, false).unwrap();
    let mut out = Vec::new();
    d.print_all_aggregations(&mut out).unwrap();
    let s = String::from_utf8(out).unwrap();
    let keys: Vec<&str> = s
        .lines()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(keys, ["bash", "cat", "sshd"]);
    d.options.set("aggsortrev", None, false).unwrap();
    let mut out = Vec::new();
    d.print_all_aggregations(&mut out).unwrap();
    let s = String::from_utf8(out).unwrap();
    let keys: Vec<&str> = s
        .lines()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(keys, ["sshd", "cat", "bash"]);
}

#[test]
fn keyless_functions_default_output() {
    let mut d = setup(&[], &[]);
    let descs = [
        aggdesc(1, 0, &[], (A::AggSum, 8, 0, 0)),
        aggdesc(2, 1, &[], (A::AggAvg, 16, 0, 0)),
        aggdesc(3, 2, &[], (A::AggMin, 8, 0, 0)),
        aggdesc(4, 3, &[], (A::AggMax, 8, 0, 0)),
        aggdesc(5, 4, &[], (A::AggStddev, 32, 0, 0)),
    ];
    for a in &descs {
        d.aggs.add_desc(a.clone());
    }
    let xs = [2i64, 4, 4, 4, 5, 5, 7, 9];
    let sq: i64 = xs.iter().map(|x| x * x).sum();
    d.aggs
        .merge(&[
            aggrec(&descs[0], &[], i64b(40)),
            aggrec(&descs[1], &[], words(&[3, 10])),
            aggrec(&descs[2], &[], i64b(-5)),
            aggrec(&descs[2], &[], i64b(2)),
            aggrec(&descs[3], &[], i64b(-5)),
            aggrec(&descs[3], &[], i64b(2)),
            aggrec(&descs[4], &[], words(&[8, 40, sq, 0])),
            aggrec(&descs[1], &[], words(&[1, 6])),
        ])
        .unwrap();
    let mut out = Vec::new();
    d.print_all_aggregations(&mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "               40\n                4\n               -5\n                2\n                2\n"
    );
}

const HDR: &str = "\n           value  ------------- Distribution ------------- count    \n";

#[test]
fn quantize_graph() {
    let mut d = setup(&[], &[]);
    let a = aggdesc(1, 0, &[], (A::AggQuantize, 127 * 8, 0, 0));
    d.aggs.add_desc(a.clone());
    let mut b = vec![0i64; 127];
    b[64] = 1; // 1
    b[65] = 2; // 2..3
    b[66] = 1; // 4..7
    d.aggs.merge(&[aggrec(&a, &[], words(&b))]).unwrap();
    let mut out = Vec::new();
    d.print_all_aggregations(&mut out).unwrap();
    let want = format!(
        "{HDR}               0 |                                         0        \n               1 |@@@@@@@@@@                               1        \n               2 |@@@@@@@@@@@@@@@@@@@@                     2        \n               4 |@@@@@@@@@@                               1        \n               8 |                                         0        \n\n"
    );
    assert_eq!(String::from_utf8(out).unwrap(), want);
}

#[test]
fn quantize_with_negative_values_draws_both_sides() {
    let mut d = setup(&[], &[]);
    let a = aggdesc(1, 0, &[], (A::AggQuantize, 127 * 8, 0, 0));
    d.aggs.add_desc(a.clone());
    let mut b = vec![0i64; 127];
    b[62] = -2; // bucket -1, negative count (as with quantize(x, -2))
    b[64] = 2;
    d.aggs.merge(&[aggrec(&a, &[], words(&b))]).unwrap();
    let mut out = Vec::new();
    d.print_all_aggregations(&mut out).unwrap();
    let s = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(
        lines[2],
        format!("{:>16} {}|{:20} {:<9}", -2, " ".repeat(20), "", 0)
    );
    assert_eq!(
        lines[3],
        format!(
            "{:>16} {}{}|{:20} {:<9}",
            -1,
            " ".repeat(10),
            "@".repeat(10),
            "",
            -2
        )
    );
    assert_eq!(
        lines[5],
        format!(
            "{:>16} {:20}|{}{} {:<9}",
            1,
            "",
            "@".repeat(10),
            " ".repeat(10),
            2
        )
    );
}

#[test]
fn empty_quantize_shows_rows_around_zero() {
    let mut d = setup(&[], &[]);
    let a = aggdesc(1, 0, &[], (A::AggQuantize, 127 * 8, 0, 0));
    d.aggs.add_desc(a.clone());
    d.aggs.merge(&[aggrec(&a, &[], words(&[0; 127]))]).unwrap();
    let mut out = Vec::new();
    d.print_all_aggregations(&mut out).unwrap();
    let s = String::from_utf8(out).unwrap();
    let labels: Vec<&str> = s
        .lines()
        .skip(2)
        .filter(|l| !l.is_empty())
        .map(|l| l.split('|').next().unwrap().trim())
        .collect();
    assert_eq!(labels, ["-1", "0", "1"]);
}

#[test]
fn lquantize_graph() {
    let mut d = setup(&[], &[]);
    let arg = dtrace_dif::program::lquantize_arg(0, 2, 5);
    let a = aggdesc(1, 0, &[], (A::AggLquantize, 8 * 5, 0, arg));
    d.aggs.add_desc(a.clone());
    d.aggs
        .merge(&[aggrec(&a, &[], words(&[arg as i64, 0, 3, 0, 1]))])
        .unwrap();
    let mut out = Vec::new();
    d.print_all_aggregations(&mut out).unwrap();
    let want = format!(
        "{HDR}             < 0 |                                         0        \n               0 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@           3        \n               5 |                                         0        \n           >= 10 |@@@@@@@@@@                               1        \n\n"
    );
    assert_eq!(String::from_utf8(out).unwrap(), want);
}

#[test]
fn llquantize_graph() {
    let mut d = setup(&[], &[]);
    let arg = dtrace_dif::program::llquantize_arg(10, 0, 2, 10);
    // DTrace for Linux's layout: 27 buckets either side of the zero bucket (index 28), and the two
    // overflow buckets
    let a = aggdesc(1, 0, &[], (A::AggLlquantize, 8 * 58, 0, arg));
    d.aggs.add_desc(a.clone());
    let mut v = vec![0i64; 58];
    v[0] = arg as i64;
    v[1 + 28 + 5] = 2; // value 5
    v[1 + 28 + 12] = 1; // value 30
    d.aggs.merge(&[aggrec(&a, &[], words(&v))]).unwrap();
    let mut out = Vec::new();
    d.print_all_aggregations(&mut out).unwrap();
    let row = |v: &str, ats: usize, n: i64| {
        format!(
            "{v:>16} |{}{} {n:<9}\n",
            "@".repeat(ats),
            " ".repeat(40 - ats)
        )
    };
    let mut want = HDR.to_string();
    for (v, a, n) in [
        ("4", 0, 0),
        ("5", 27, 2),
        ("6", 0, 0),
        ("7", 0, 0),
        ("8", 0, 0),
        ("9", 0, 0),
        ("10", 0, 0),
        ("20", 0, 0),
        ("30", 13, 1),
        ("40", 0, 0),
    ] {
        want.push_str(&row(v, a, n));
    }
    want.push('\n');
    assert_eq!(String::from_utf8(out).unwrap(), want);
}

#[test]
fn printa_with_format_and_several_aggregations() {
    // printa("%-6s %@4d %@4d\n", @a, @b) in a clause.
    let ep = eprobe(1, 2, &[(A::Printa, 4, 1, 0), (A::Printa, 4, 1, 0)]);
    let mut d = setup(std::slice::from_ref(&ep), &["%-6s %@4d %@4d\n"]);
    let a = aggdesc(1, 0, &[(A::DifExpr, 8, 0, 0)], (A::AggCount, 8, 0, 0));
    let b = aggdesc(2, 1, &[(A::DifExpr, 8, 0, 0)], (A::AggSum, 8, 0, 0));
    d.aggs.add_desc(a.clone());
    d.aggs.add_desc(b.clone());
    d.aggs
        .merge(&[
            aggrec(&a, &[strb("x", 8)], i64b(5)),
            aggrec(&a, &[strb("y", 8)], i64b(2)),
            aggrec(&b, &[strb("y", 8)], i64b(100)),
            aggrec(&b, &[strb("z", 8)], i64b(7)),
        ])
        .unwrap();
    let r = record(&ep, &[i32b(0), i32b(1)]);
    let got = run(&mut d, &[buf(0, &[r])], true).out;
    assert_eq!(
        got,
        "z         0    7\ny         2  100\nx         5    0\n"
    );
    // printa marked both as printed: nothing left for the end of the run.
    let mut out = Vec::new();
    d.print_all_aggregations(&mut out).unwrap();
    assert!(out.is_empty());
}

#[test]
fn printa_without_format_prints_a_blank_line_then_rows() {
    let ep = eprobe(1, 2, &[(A::Printa, 4, 0, 0)]);
    let mut d = key_count_aggs();
    d.eprobes.insert(1, ep.clone());
    d.add_program(&[], &[1]).unwrap();
    let r = record(&ep, &[i32b(0)]);
    let got = run(&mut d, &[buf(0, &[r])], true).out;
    assert!(got.starts_with("\n  cat "), "{got:?}");
    assert_eq!(got.lines().count(), 4);
}

#[test]
fn consecutive_printa_without_format_print_each_aggregation() {
    // printa(@a); printa(@b): two printa() records, each one aggregation, not one joined table.
    let ep = eprobe(1, 2, &[(A::Printa, 4, 0, 0), (A::Printa, 4, 0, 0)]);
    let mut d = setup(std::slice::from_ref(&ep), &[]);
    let a = aggdesc(1, 0, &[(A::DifExpr, 8, 0, 0)], (A::AggSum, 8, 0, 0));
    let b = aggdesc(2, 1, &[(A::DifExpr, 8, 0, 0)], (A::AggSum, 8, 0, 0));
    d.aggs.add_desc(a.clone());
    d.aggs.add_desc(b.clone());
    d.aggs
        .merge(&[
            aggrec(&a, &[i64b(1)], i64b(100)),
            aggrec(&b, &[i64b(4)], i64b(0)),
        ])
        .unwrap();
    let r = record(&ep, &[i32b(0), i32b(1)]);
    let got = run(&mut d, &[buf(0, &[r])], true).out;
    assert_eq!(
        got,
        "\n                1              100\n\n                4                0\n"
    );
}

#[test]
fn clear_trunc_normalize_actions() {
    // normalize(@, 2); printa(@); trunc(@, 1); printa(@); clear(@); printa("%@d\n", @)
    let ep = eprobe(
        1,
        2,
        &[
            (A::LibAct, 4, 0, 2),
            (A::LibAct, 8, 0, 2),
            (A::Printa, 4, 0, 0),
            (A::LibAct, 4, 0, 4),
            (A::LibAct, 8, 0, 4),
            (A::Printa, 4, 0, 1),
            (A::LibAct, 4, 0, 1),
            (A::Printa, 4, 1, 2),
        ],
    );
    let mut d = key_count_aggs();
    d.eprobes.insert(1, ep.clone());
    d.add_program(&[b"%@d\n".to_vec()], &[1]).unwrap();
    let r = record(
        &ep,
        &[
            i32b(0),
            i64b(2),
            i32b(0),
            i32b(0),
            i64b(1),
            i32b(0),
            i32b(0),
            i32b(0),
        ],
    );
    let got = run(&mut d, &[buf(0, &[r])], true).out;
    let nums: Vec<&str> = got
        .split_whitespace()
        .filter(|w| w.parse::<i64>().is_ok())
        .collect();
    // normalized by 2: 0 (1/2), 1 (3/2), 5; after trunc(1): 5; after clear: 0
    assert_eq!(nums, ["0", "1", "5", "5", "0"]);
}

#[test]
fn error_probe_messages() {
    let ep = eprobe(1, 1, &[(A::DifExpr, 8, 0, 0)]);
    let err = eprobe(
        7,
        3,
        &[
            (A::DifExpr, 8, 0, 0),
            (A::DifExpr, 8, 0, 0),
            (A::DifExpr, 8, 0, 0),
            (A::DifExpr, 8, 0, 0),
            (A::DifExpr, 8, 0, 0),
        ],
    );
    let mut d = setup(&[ep, err.clone()], &[]);
    d.error_epids.insert(7);
    // DTrace for Linux's ERROR arguments: probe id, statement id, pc, fault, address or value.
    let r = record(&err, &[i64b(1), i64b(1), i64b(12), i64b(1), i64b(0)]);
    let r2 = record(&err, &[i64b(1), i64b(0), i64b(5), i64b(11), i64b(8)]);
    let r3 = record(&err, &[i64b(1), i64b(2), i64b(-1), i64b(4), i64b(0)]);
    let res = run(&mut d, &[buf(0, &[r, r2, r3])], false);
    assert_eq!(res.out, "");
    assert_eq!(
        res.errors,
        [
            "error in dt_clause_1 for probe ID 1 (dtrace:::BEGIN): invalid address (0x0) at BPF pc 12\n",
            "error in dt_clause_0 for probe ID 1 (dtrace:::BEGIN): index out of bounds (8) at BPF pc 5\n",
            "error in dt_clause_2 for probe ID 1 (dtrace:::BEGIN): divide-by-zero\n",
        ]
    );
}

#[test]
fn drops_are_reported_per_cpu() {
    let mut d = setup(&[], &[]);
    let b = BufferSnapshot {
        cpu: 3,
        data: vec![],
        drops: 12,
    };
    let res = run(&mut d, &[b], false);
    assert_eq!(res.drops, ["12 drops on CPU 3"]);
}

#[test]
fn flowindent_indents_entries_and_returns() {
    let mut d = setup(&[], &[]);
    for (id, f, n) in [
        (10, "foo", "entry"),
        (11, "bar", "entry"),
        (12, "bar", "return"),
        (13, "foo", "return"),
    ] {
        d.probes.insert(id, probe(id, "fbt", "k", f, n));
        let ep = eprobe(id, id, &[]);
        d.eprobes.insert(id, ep);
    }
    d.options.set("flowindent", None, false).unwrap();
    let recs: Vec<Vec<u8>> = [10, 11, 12, 13]
        .iter()
        .map(|&i| record(&d.eprobes[&i].clone(), &[]))
        .collect();
    let got = run(&mut d, &[buf(0, &recs)], false).out;
    let want = format!(
        "CPU FUNCTION{}\n  0 {:<41} \n  0 {:<41} \n  0 {:<41} \n  0 {:<41} \n",
        " ".repeat(33),
        " -> foo",
        "   -> bar",
        "   <- bar",
        " <- foo"
    );
    assert_eq!(got, want);
}

#[test]
fn non_string_bytes_print_as_hex_dump() {
    let ep = eprobe(1, 1, &[(A::Tracemem, 20, 0, 20)]);
    let mut d = setup(std::slice::from_ref(&ep), &[]);
    let data: Vec<u8> = (0u8..20)
        .map(|i| i.wrapping_mul(13).wrapping_add(60))
        .collect();
    let r = record(&ep, &[data]);
    let got = run(&mut d, &[buf(0, &[r])], true).out;
    let want = "\n             0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f  0123456789abcdef\n         0: 3c 49 56 63 70 7d 8a 97 a4 b1 be cb d8 e5 f2 ff  <IVcp}..........\n        10: 0c 19 26 33                                      ..&3\n";
    assert_eq!(got, want);
}

#[test]
fn exit_records_set_the_status_and_print_nothing() {
    let ep = eprobe(1, 1, &[(A::Exit, 4, 0, 0)]);
    let mut d = setup(std::slice::from_ref(&ep), &[]);
    let r = record(&ep, &[i32b(3)]);
    let got = run(&mut d, &[buf(0, &[r])], false).out;
    assert!(got.ends_with(":BEGIN \n"), "{got:?}");
    assert_eq!(d.exit_status, Some(3));
}

#[test]
fn bad_buffers_are_errors_not_panics() {
    let ep = eprobe(1, 1, &[(A::DifExpr, 8, 0, 0)]);
    let mut d = setup(std::slice::from_ref(&ep), &[]);
    let mut r = record(&ep, &[i64b(1)]);
    r.truncate(10);
    let mut o = DefaultOutput::default();
    let mut out = Vec::new();
    let res = d.consume_buffer(
        &buf(0, &[r]),
        &mut out,
        &mut |pd, out| o.probe(pd, out),
        &mut |_, _, _| ConsumeAction::This,
        &mut |_| true,
        &mut |_| true,
    );
    assert!(matches!(
        res,
        Err(dtrace_consumer::ConsumerError::RecordOutOfBounds { .. })
    ));
    let bad = buf(0, &[99u32.to_ne_bytes().to_vec(), vec![0; 12]]);
    let res = d.consume_buffer(
        &bad,
        &mut out,
        &mut |_, _| ConsumeAction::This,
        &mut |_, _, _| ConsumeAction::This,
        &mut |_| true,
        &mut |_| true,
    );
    assert!(matches!(
        res,
        Err(dtrace_consumer::ConsumerError::BadEpid(99))
    ));
}

struct Syms;
impl dtrace_consumer::symbols::Symbolizer for Syms {
    fn kernel(&self, a: u64) -> Option<dtrace_consumer::symbols::SymInfo> {
        (a >= 0x1000).then(|| dtrace_consumer::symbols::SymInfo {
            object: "vmlinux".into(),
            symbol: Some(("do_sys_open".into(), 0x1000)),
        })
    }
}

#[test]
fn stack_records_print_one_frame_per_line() {
    let ep = eprobe(1, 1, &[(A::Stack, 32, 0, 4), (A::Sym, 8, 0, 0)]);
    let mut d = setup(std::slice::from_ref(&ep), &[]);
    d.symbols = Box::new(Syms);
    let r = record(&ep, &[words(&[0x1010, 0x1000, 0x20, 0]), i64b(0x1004)]);
    let got = run(&mut d, &[buf(0, &[r])], true).out;
    let want = format!(
        "\n{0}vmlinux`do_sys_open+0x10\n{0}vmlinux`do_sys_open\n{0}0x20\n  {1:<50}",
        " ".repeat(14),
        "vmlinux`do_sys_open"
    );
    assert_eq!(got, want);
}

#[test]
fn printa_aggregation_ids_as_difexpr_records() {
    // The compiler's form: printa(fmt, @a, @b) is a Printa record then a DifExpr per further
    // aggregation; a trace() after it is not taken as an aggregation.
    let ep = eprobe(
        1,
        2,
        &[
            (A::Printa, 4, 1, 0),
            (A::DifExpr, 4, 0, 0),
            (A::DifExpr, 8, 0, 0),
        ],
    );
    let mut d = setup(std::slice::from_ref(&ep), &["%s:%@d:%@d\n"]);
    let a = aggdesc(1, 0, &[(A::DifExpr, 8, 0, 0)], (A::AggCount, 8, 0, 0));
    let b = aggdesc(2, 1, &[(A::DifExpr, 8, 0, 0)], (A::AggSum, 8, 0, 0));
    d.aggs.add_desc(a.clone());
    d.aggs.add_desc(b.clone());
    d.aggs
        .merge(&[
            aggrec(&a, &[strb("k", 8)], i64b(2)),
            aggrec(&b, &[strb("k", 8)], i64b(9)),
        ])
        .unwrap();
    let r = record(&ep, &[i32b(0), i32b(1), i64b(77)]);
    assert_eq!(run(&mut d, &[buf(0, &[r])], true).out, "k:2:9\n77");
}

#[test]
fn library_action_values_are_records_of_the_same_action() {
    // normalize(@, 3): the factor is a second normalize record; trunc(@) with no count, then a
    // trace() that must not be taken for one; setopt("nosuch") with its toggle value.
    let ep = eprobe(
        1,
        2,
        &[
            (A::LibAct, 4, 0, 2),
            (A::LibAct, 8, 0, 2),
            (A::Printa, 4, 1, 0),
            (A::LibAct, 4, 0, 4),
            (A::DifExpr, 4, 0, 0),
            (A::Printa, 4, 1, 0),
            (A::LibAct, 16, 0, 5),
            (A::LibAct, 4, 0, 5),
        ],
    );
    let mut d = key_count_aggs();
    d.eprobes.insert(1, ep.clone());
    d.add_program(&[b"%s=%@d\n".to_vec()], &[1]).unwrap();
    let r = record(
        &ep,
        &[
            i32b(0),
            i64b(3),
            i32b(0),
            i32b(0),
            i32b(7),
            i32b(0),
            strb("nosuch", 16),
            i32b(0),
        ],
    );
    let res = run(&mut d, &[buf(0, &[r])], true);
    assert_eq!(res.out, "cat=0\nbash=1\nsshd=3\n7");
    assert_eq!(
        res.errors,
        ["error in dt_clause_1 for probe ID 2 (dtrace:::END): couldn't set option \"nosuch\" to \"1\": Invalid option name

"]
    );
}

#[test]
fn symbol_keys_merge_by_function_and_print_through_any_conversion() {
    // printa("%-24s|%@d\n", @) over @[sym(arg0)]: two pcs of one function are one key, and %s of a
    // sym() record prints the symbol (dt_printf_format switches to the symbol printer); a sym()
    // traced after it prints in its default layout.
    let ep = eprobe(1, 2, &[(A::Printa, 4, 1, 0), (A::Sym, 8, 0, 0)]);
    let mut d = setup(std::slice::from_ref(&ep), &["%-24s|%@d\n"]);
    d.symbols = Box::new(Syms);
    let a = aggdesc(1, 0, &[(A::Sym, 8, 0, 0)], (A::AggCount, 8, 0, 0));
    d.aggs.add_desc(a.clone());
    d.aggs
        .merge_symbolized(
            &[
                aggrec(&a, &[i64b(0x1004)], i64b(2)),
                aggrec(&a, &[i64b(0x1010)], i64b(3)),
                aggrec(&a, &[i64b(0x20)], i64b(1)),
            ],
            &Syms,
        )
        .unwrap();
    let r = record(&ep, &[i32b(0), i64b(0x1008)]);
    assert_eq!(
        run(&mut d, &[buf(0, &[r])], true).out,
        format!(
            "0x20                    |1\nvmlinux`do_sys_open     |5\n  {:<50}",
            "vmlinux`do_sys_open"
        )
    );
}

fn wchars(s: &[u32], size: usize) -> Vec<u8> {
    let mut v: Vec<u8> = s.iter().flat_map(|c| c.to_ne_bytes()).collect();
    v.resize(size, 0);
    v
}

#[test]
fn wide_character_conversions_print_utf8() {
    // printf("%lc|%-3lc|%3wc|%ls|%.3ws|%6ls|%ls|\n", 'A', 0xe9, 0x20ac, w, w, w, t): wchar_t
    // values as C ints, wchar_t arrays up to their first null.
    let ep = eprobe(
        1,
        1,
        &[
            (A::Printf, 4, 1, 0),
            (A::DifExpr, 4, 0, 0),
            (A::DifExpr, 2, 0, 0),
            (A::DifExpr, 16, 0, 0),
            (A::DifExpr, 16, 0, 0),
            (A::DifExpr, 16, 0, 0),
            (A::DifExpr, 10, 0, 0),
        ],
    );
    let mut d = setup(
        std::slice::from_ref(&ep),
        &["%lc|%-3lc|%3wc|%ls|%.3ws|%6ls|%ls|\n"],
    );
    let w = wchars(&[0x68, 0xe9, 0, 0x7a], 16); // "hé", then a stray 'z' after the null
    let r = record(
        &ep,
        &[
            i32b(0x41),
            i32b(0xe9),
            0x20acu16.to_ne_bytes().to_vec(),
            w.clone(),
            w.clone(),
            w,
            // two whole wchar_ts and half of a third, which is dropped
            wchars(&[0x1f600, 0x21, 0x41], 12)[..10].to_vec(),
        ],
    );
    let got = run(&mut d, &[buf(0, &[r])], true).out;
    assert_eq!(
        got,
        "A|\u{e9} |\u{20ac}|h\u{e9}|h\u{e9}|   h\u{e9}|\u{1f600}!|\n"
    );
}

#[test]
fn wide_characters_without_a_multibyte_form_are_errors() {
    let ep = eprobe(1, 1, &[(A::Printf, 4, 1, 0)]);
    let mut d = setup(std::slice::from_ref(&ep), &["%lc\n"]);
    let r = record(&ep, &[i32b(0xd800)]);
    let mut out = Vec::new();
    let res = d.consume_buffer(
        &buf(0, &[r]),
        &mut out,
        &mut |_, _| ConsumeAction::This,
        &mut |_, _, _| ConsumeAction::This,
        &mut |_| true,
        &mut |_| true,
    );
    assert_eq!(
        res.unwrap_err().to_string(),
        "wide character 0xd800 has no multibyte form: Illegal byte sequence"
    );
    let ep = eprobe(1, 1, &[(A::Printf, 8, 1, 0)]);
    let mut d = setup(std::slice::from_ref(&ep), &["%ls\n"]);
    let r = record(&ep, &[wchars(&[0x41, u32::MAX], 8)]);
    let res = d.consume_buffer(
        &buf(0, &[r]),
        &mut out,
        &mut |_, _| ConsumeAction::This,
        &mut |_, _, _| ConsumeAction::This,
        &mut |_| true,
        &mut |_| true,
    );
    assert!(matches!(
        res,
        Err(dtrace_consumer::ConsumerError::BadWideChar(-1))
    ));
}

#[test]
fn printa_wide_character_of_an_aggregation_value() {
    // printa("%s=%@lc ", @c): the value (a count) read as a wide character, divided by the
    // normalization; %@ls is refused (an aggregation value is no wchar_t array).
    let ep = eprobe(1, 2, &[(A::Printa, 4, 1, 0)]);
    let mut d = setup(std::slice::from_ref(&ep), &["%s=%@lc "]);
    let a = aggdesc(1, 0, &[(A::DifExpr, 8, 0, 0)], (A::AggCount, 8, 0, 0));
    d.aggs.add_desc(a.clone());
    d.aggs
        .merge(&[
            aggrec(&a, &[strb("x", 8)], i64b(0x42)),
            aggrec(&a, &[strb("y", 8)], i64b(0xe9)),
        ])
        .unwrap();
    let r = record(&ep, &[i32b(0)]);
    let got = run(&mut d, &[buf(0, &[r])], true).out;
    assert_eq!(got, "x=B y=\u{e9} ");
    let ep = eprobe(1, 2, &[(A::Printa, 4, 1, 0)]);
    let mut d2 = setup(std::slice::from_ref(&ep), &["%@ls"]);
    d2.aggs = d.aggs.clone();
    let mut out = Vec::new();
    let res = d2.consume_buffer(
        &buf(0, &[record(&ep, &[i32b(0)])]),
        &mut out,
        &mut |_, _| ConsumeAction::This,
        &mut |_, _, _| ConsumeAction::This,
        &mut |_| true,
        &mut |_| true,
    );
    assert!(matches!(
        res,
        Err(dtrace_consumer::ConsumerError::SizeMismatch { .. })
    ));
}

#[test]
fn llquantize_graph_is_symmetric_about_zero() {
    // DTrace for Linux: llquantize(x, 10, 3, 5, 5) (the documented example) has a zero bucket for
    // abs(x) < 1000, its magnitudes cut at multiples of 2000, 20000, 200000, and mirrored buckets
    // below zero.
    let mut d = setup(&[], &[]);
    let arg = dtrace_dif::program::llquantize_arg(10, 3, 5, 5);
    let npos = 3 * 5;
    let n = 2 * npos + 3;
    let a = aggdesc(1, 0, &[], (A::AggLlquantize, 8 * (n as u32 + 1), 0, arg));
    d.aggs.add_desc(a.clone());
    let mut v = vec![0i64; n + 1];
    v[0] = arg as i64;
    let z = 1 + npos + 1;
    v[z] = 3; // abs(x) < 1000
    v[z + 1] = 1; // 1000..1999
    v[z - 2] = 2; // -2000..-3999
    d.aggs.merge(&[aggrec(&a, &[], words(&v))]).unwrap();
    let mut out = Vec::new();
    d.print_all_aggregations(&mut out).unwrap();
    let want = format!(
        "{HDR}           -4000 |                                         0        \n\
         \x20          -2000 |@@@@@@@@@@@@@                            2        \n\
         \x20          -1000 |                                         0        \n\
         \x20   abs() < 1000 |@@@@@@@@@@@@@@@@@@@@                     3        \n\
         \x20           1000 |@@@@@@@                                  1        \n\
         \x20           2000 |                                         0        \n\n"
    );
    assert_eq!(String::from_utf8(out).unwrap(), want);

    // No data: the zero bucket and the two above it; the overflow buckets say <= and >=.
    let mut d = setup(&[], &[]);
    let arg = dtrace_dif::program::llquantize_arg(2, 0, 1, 2);
    let a = aggdesc(1, 0, &[], (A::AggLlquantize, 8 * 8, 0, arg));
    d.aggs.add_desc(a.clone());
    d.aggs
        .merge(&[aggrec(&a, &[], words(&[arg as i64, 0, 0, 0, 0, 0, 0, 0]))])
        .unwrap();
    let mut out = Vec::new();
    d.print_all_aggregations(&mut out).unwrap();
    let labels: Vec<String> = String::from_utf8(out)
        .unwrap()
        .lines()
        .skip(2)
        .filter_map(|l| l.split_once('|').map(|(a, _)| a.trim().to_string()))
        .collect();
    assert_eq!(labels, ["0", "1", "2"]);
    let mut d = setup(&[], &[]);
    d.aggs.add_desc(a.clone());
    d.aggs
        .merge(&[aggrec(&a, &[], words(&[arg as i64, 1, 0, 0, 0, 0, 0, 1]))])
        .unwrap();
    let mut out = Vec::new();
    d.print_all_aggregations(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("           <= -4 |"), "{text}");
    assert!(text.contains("            >= 4 |"), "{text}");
}

#[test]
fn trace_of_a_struct_union_or_array_dumps_its_bytes() {
    // DTrace for Linux: trace() of a by-reference value dumps its bytes whatever its size, a one-byte
    // struct too, and a char array is not printed as a string.
    let b = dtrace_dif::program::TRACE_BYREF;
    let ep = eprobe(1, 1, &[(A::DifExpr, 1, 0, b)]);
    let mut d = setup(std::slice::from_ref(&ep), &[]);
    let r = record(&ep, &[vec![0x34]]);
    let got = run(&mut d, &[buf(0, &[r])], false).out;
    let want = "CPU     ID                    FUNCTION:NAME\n  0      1                           :BEGIN \n             0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f  0123456789abcdef\n         0: 34                                               4\n\n";
    assert_eq!(got, want);
    let ep = eprobe(1, 1, &[(A::DifExpr, 8, 0, b)]);
    let mut d = setup(std::slice::from_ref(&ep), &[]);
    let r = record(&ep, &[b"dtrace\0\0".to_vec()]);
    let got = run(&mut d, &[buf(0, &[r])], false).out;
    assert!(
        got.contains("         0: 64 74 72 61 63 65 00 00                          dtrace..\n"),
        "{got}"
    );
}

#[test]
fn printa_of_an_empty_lquantize_beside_others_shows_zero_rows() {
    // printa("%-6s %@4d %@\n", @a, @q) where @q (lquantize(x, -10, 10, 1)) has no entries at all:
    // its zero value still has the parameters the aggregation was declared with.
    let ep = eprobe(1, 2, &[(A::Printa, 4, 1, 0), (A::Printa, 4, 1, 0)]);
    let mut d = setup(std::slice::from_ref(&ep), &["%-6s %@4d %@d\n"]);
    let a = aggdesc(1, 0, &[(A::DifExpr, 8, 0, 0)], (A::AggCount, 8, 0, 0));
    let arg = dtrace_dif::program::lquantize_arg(-10, 20, 1);
    let q = aggdesc(
        2,
        1,
        &[(A::DifExpr, 8, 0, 0)],
        (A::AggLquantize, 23 * 8, 0, arg),
    );
    d.aggs.add_desc(a.clone());
    d.aggs.add_desc(q.clone());
    d.aggs
        .merge(&[aggrec(&a, &[strb("x", 8)], i64b(5))])
        .unwrap();
    let r = record(&ep, &[i32b(0), i32b(1)]);
    let got = run(&mut d, &[buf(0, &[r])], true).out;
    assert!(got.starts_with("x         5 "), "{got}");
    assert!(got.contains("           < -10 |"), "{got}");
    assert!(got.contains("             -10 |"), "{got}");
}
