//! Differential test of the C printf engine against the system C library: every combination of flags,
//! width and precision over integer and floating-point conversions is printed by a small C program
//! compiled with gcc and by `cformat`, and the outputs must match byte for byte.

use dtrace_consumer::cformat::{self, Spec};
use std::fmt::Write as _;
use std::process::Command;

enum Val {
    I(i64),
    U(u64),
    F(f64),
}

fn cases() -> Vec<(String, Spec, u8, Val)> {
    let flagsets = ["", "-", "0", "+", " ", "#", "-+", "0#", "+0", "- #"];
    let widths = [0usize, 1, 6, 14];
    let precs = [None, Some(0), Some(1), Some(4), Some(10)];
    let ints: [i64; 6] = [0, 1, -1, 42, -123456789, i64::MIN];
    let uints: [u64; 4] = [0, 7, 0xdeadbeef, u64::MAX];
    let floats: [f64; 10] = [
        0.0,
        -0.0,
        1.0,
        -2.5,
        std::f64::consts::PI,
        0.000123456,
        123456789.0,
        1e-300,
        6.02214076e23,
        0.5,
    ];
    let mut v = Vec::new();
    for f in flagsets {
        for &w in &widths {
            for &p in &precs {
                let spec = Spec {
                    alt: f.contains('#'),
                    zero: f.contains('0'),
                    left: f.contains('-'),
                    plus: f.contains('+'),
                    space: f.contains(' '),
                    width: w,
                    prec: p,
                };
                let mut cf = format!("%{f}");
                if w > 0 {
                    write!(cf, "{w}").unwrap();
                }
                if let Some(p) = p {
                    write!(cf, ".{p}").unwrap();
                }
                for &i in &ints {
                    v.push((format!("{cf}lld"), spec, b'd', Val::I(i)));
                }
                for &u in &uints {
                    for c in [b'u', b'x', b'X', b'o'] {
                        v.push((format!("{cf}ll{}", c as char), spec, c, Val::U(u)));
                    }
                }
                for &x in &floats {
                    for c in [b'f', b'e', b'E', b'g', b'G', b'a', b'A'] {
                        v.push((format!("{cf}{}", c as char), spec, c, Val::F(x)));
                    }
                }
            }
        }
    }
    v
}

#[test]
fn cformat_matches_the_c_library() {
    if !dtrace_testkit::skip_unless(
        dtrace_testkit::have_program("gcc"),
        "cformat_matches_the_c_library",
        "gcc is not installed",
    ) {
        return;
    }
    let cases = cases();
    let dir = std::env::temp_dir().join(format!("dtrace-cformat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = String::from("#include <stdio.h>\nint main(void){\n");
    for (fmt, _, _, val) in &cases {
        let arg = match val {
            Val::I(i) if *i == i64::MIN => "(-9223372036854775807LL-1)".to_string(),
            Val::I(i) => format!("{i}LL"),
            Val::U(u) => format!("{u}ULL"),
            Val::F(x) => format!("{:?}", x),
        };
        writeln!(c, "printf(\"[{fmt}]\\n\", {arg});").unwrap();
    }
    c.push_str("return 0;}\n");
    let bin = dtrace_testkit::compile_c(
        dtrace_testkit::CSource::Text(&c),
        &dir.join("t"),
        &["-w", "-O0"],
    )
    .unwrap_or_else(|e| panic!("gcc failed: {e}"));
    let out = Command::new(&bin).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), cases.len());
    let mut bad = Vec::new();
    for ((fmt, spec, conv, val), want) in cases.iter().zip(lines) {
        let mut o = Vec::new();
        match val {
            Val::I(i) => cformat::fmt_signed(&mut o, spec, *i),
            Val::U(u) => cformat::fmt_unsigned(&mut o, spec, *u, *conv),
            Val::F(x) => cformat::fmt_float(&mut o, spec, *x, *conv),
        }
        let got = format!("[{}]", String::from_utf8(o).unwrap());
        if got != want {
            bad.push(format!("{fmt}: C {want} ours {got}"));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        bad.is_empty(),
        "{} mismatches, first: {:#?}",
        bad.len(),
        &bad[..bad.len().min(20)]
    );
}

/// The wide-character conversions against the C library in a UTF-8 locale: `%lc` and `%ls` over
/// flags, widths (counted in bytes) and precisions (whole characters within that many bytes), and
/// the values it refuses (`printf` returning -1).
#[test]
fn wide_conversions_match_the_c_library_in_utf8() {
    if !dtrace_testkit::skip_unless(
        dtrace_testkit::have_program("gcc"),
        "wide_conversions_match_the_c_library_in_utf8",
        "gcc is not installed",
    ) {
        return;
    }
    let chars: [i64; 9] = [
        0x41,
        0x7f,
        0xe9,
        0x7ff,
        0x20ac,
        0xffff,
        0x1f600,
        0x110000,
        0x7fff_ffff,
    ];
    let strings: [&[i64]; 5] = [
        &[],
        &[0x61, 0x62, 0x63],
        &[0x68, 0xe9, 0x6c, 0x6c, 0x6f],
        &[0x20ac, 0x31, 0x1f600, 0x78],
        &[0x61, 0, 0x62],
    ];
    let bad: [i64; 3] = [0xd800, 0xdfff, -1];
    let mut cases: Vec<(String, Spec, usize, bool)> = Vec::new(); // fmt, spec, value index, is string
    for f in ["", "-", "0", "-0"] {
        for w in [0usize, 1, 3, 8] {
            for p in [None, Some(0), Some(1), Some(2), Some(3), Some(5)] {
                let spec = Spec {
                    zero: f.contains('0'),
                    left: f.contains('-'),
                    width: w,
                    prec: p,
                    ..Spec::default()
                };
                let mut cf = format!("%{f}");
                if w > 0 {
                    write!(cf, "{w}").unwrap();
                }
                if let Some(p) = p {
                    write!(cf, ".{p}").unwrap();
                }
                for i in 0..chars.len() {
                    cases.push((format!("{cf}lc"), spec, i, false));
                }
                for i in 0..strings.len() {
                    cases.push((format!("{cf}ls"), spec, i, true));
                }
            }
        }
    }
    let dir = std::env::temp_dir().join(format!("dtrace-cformat-wide-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = String::from(
        "#include <stdio.h>\n#include <wchar.h>\n#include <locale.h>\nint main(void){\n\
         if (setlocale(LC_ALL, \"C.UTF-8\") == NULL) return 3;\n",
    );
    for (i, s) in strings.iter().enumerate() {
        let elems: Vec<String> = s.iter().map(|v| format!("{v}")).collect();
        writeln!(
            c,
            "static const int s{i}[] = {{{}{}0}};",
            elems.join(","),
            if s.is_empty() { "" } else { "," }
        )
        .unwrap();
    }
    for (fmt, _, i, is_str) in &cases {
        if *is_str {
            writeln!(c, "printf(\"[{fmt}]\\n\", (const wchar_t *)s{i});").unwrap();
        } else {
            writeln!(c, "printf(\"[{fmt}]\\n\", (wint_t){});", chars[*i]).unwrap();
        }
    }
    for v in bad {
        writeln!(c, "if (printf(\"%lc\", (wint_t){v}) != -1) return 4;").unwrap();
    }
    c.push_str("return 0;}\n");
    let bin = dtrace_testkit::compile_c(
        dtrace_testkit::CSource::Text(&c),
        &dir.join("w"),
        &["-w", "-O0"],
    )
    .unwrap_or_else(|e| panic!("gcc failed: {e}"));
    let out = Command::new(&bin).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    if out.status.code() == Some(3) {
        eprintln!("skipping: no C.UTF-8 locale");
        return;
    }
    assert_eq!(
        out.status.code(),
        Some(0),
        "the C library accepted a bad wide character"
    );
    let lines: Vec<&[u8]> = out.stdout.split(|&b| b == b'\n').collect();
    assert!(lines.len() > cases.len());
    let mut badcases = Vec::new();
    for ((fmt, spec, i, is_str), want) in cases.iter().zip(lines) {
        let mut o = b"[".to_vec();
        if *is_str {
            cformat::fmt_wstr(&mut o, spec, strings[*i].iter().copied()).unwrap();
        } else {
            cformat::fmt_wchar(&mut o, spec, chars[*i]).unwrap();
        }
        o.push(b']');
        if o != want {
            badcases.push(format!("{fmt} #{i}: C {want:?} ours {o:?}"));
        }
    }
    for v in bad {
        assert_eq!(
            cformat::fmt_wchar(&mut Vec::new(), &Spec::default(), v),
            Err(v)
        );
        assert_eq!(
            cformat::fmt_wstr(&mut Vec::new(), &Spec::default(), [0x41, v]),
            Err(v)
        );
    }
    assert!(
        badcases.is_empty(),
        "{} mismatches, first: {:#?}",
        badcases.len(),
        &badcases[..badcases.len().min(20)]
    );
}
