//! `strtoll()` at the probe, checked against the interpreter: constant strings and strings
//! copied in, every base from 2 to 36 given as a constant and as a run-time value, bases outside
//! it (the interpreter's illegal-operation fault), blanks, signs, the `0x` prefix, digits past
//! the base, overflow, and at a `strsize` that cuts the string.

use super::strbuild::agree;
use super::*;
use dtrace_dif::vm::subr::strfn;

/// Where the fake user memory holding the strings starts.
const UADDR: u64 = 0x7fff_0000_4000;

/// Strings that take each rule of `strtoll()`.
const CASES: &[&str] = &[
    "",
    "0",
    "42",
    "-17",
    "+17",
    "  \t 99 ",
    " - 5",
    "--5",
    "+-5",
    "0x1F",
    "0X1f",
    "-0xff",
    "0x",
    "0xg",
    "0x 1",
    "1010201",
    "777",
    "zz",
    "ZZtop",
    "Hello",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "18446744073709551617",
    "123456789012345678901234567890",
    "\t",
    "12abc",
    "7fffffffffffffff",
    "  0x0x12",
    "abc",
];

/// A probe whose `arg1` points at `s` (NUL-terminated) in user memory, `arg3` holding `base`.
fn probe(s: &str, base: u64) -> Probe {
    let mut p = Probe::new();
    let mut b = s.as_bytes().to_vec();
    b.push(0);
    p.user = vec![(UADDR, b)];
    p.args[1] = UADDR;
    p.args[3] = base;
    p
}

#[test]
fn strtoll_reads_every_base_as_the_interpreter() {
    for s in CASES {
        for base in 2..=36u64 {
            let p = probe(s, base);
            let want = strfn::strtoll(s.as_bytes(), base).map(|v| v as u64);
            let lit = s.replace('\\', "\\\\").replace('\t', "\\t");
            for expr in [
                format!("strtoll(copyinstr(arg1), {base})"),
                "strtoll(copyinstr(arg1), arg3)".to_string(),
                format!(r#"strtoll("{lit}", arg3)"#),
            ] {
                let got = agree(&expr, &p, 255);
                assert_eq!(got, want, "{expr} of {s:?}");
            }
        }
        let p = probe(s, 10);
        agree("strtoll(copyinstr(arg1))", &p, 255);
        agree(
            "strtoll(copyinstr(arg1)) * 3 + strtoll(copyinstr(arg1), 16)",
            &p,
            255,
        );
    }
}

#[test]
fn strtoll_faults_on_a_base_out_of_range_as_the_interpreter() {
    for base in [0u64, 1, 37, 64, u64::MAX, 1 << 32 | 10] {
        let p = probe("123", base);
        // The base is an int: the compiler keeps its low 32 bits, sign-extended.
        let int = base as u32 as i32 as i64 as u64;
        let want = (2..=36).contains(&int).then_some(123);
        assert_eq!(agree("strtoll(copyinstr(arg1), arg3)", &p, 255), want);
        if let Ok(b) = i32::try_from(base as i64) {
            assert_eq!(
                agree(&format!("strtoll(copyinstr(arg1), {b})"), &p, 255),
                None
            );
        }
    }
    // A bad string faults first.
    let mut p = probe("1", 0);
    p.args[1] = 0x10;
    agree("strtoll(copyinstr(arg1), arg3)", &p, 255);
}

#[test]
fn strtoll_reads_the_string_cut_at_strsize() {
    for s in ["123456789", "   42", "-0x7f", "0x1", "ffffffffffffffffffff"] {
        for strsize in [1, 2, 3, 4, 5, 8, 15] {
            for base in [10, 16, 36] {
                let p = probe(s, base);
                agree("strtoll(copyinstr(arg1), arg3)", &p, strsize);
                agree(&format!(r#"strtoll("{s}", arg3)"#), &p, strsize);
            }
        }
    }
}
