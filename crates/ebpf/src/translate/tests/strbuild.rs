//! `strjoin()` and `lltostr()` at the probe, checked against the interpreter: the strings they
//! build are measured (`strlen`), compared with the string the interpreter builds, and used as
//! arguments of each other, at D's default `strsize` and at a `strsize` they overflow.

use super::*;

/// Runs `expr` (an integer) both ways at `strsize` and checks that they agree, faults included;
/// the interpreter's value.
pub(super) fn agree(expr: &str, p: &Probe, strsize: usize) -> Option<u64> {
    let src = format!(
        "#pragma D option strsize={strsize}\n{}",
        clause(&format!("({expr}) + 1000"))
    );
    let obj = predicate(&src);
    let (mut ctx, mut mem) = fake_env(p);
    let mut state = VarState::new(VmOptions {
        strsize: strsize + 1,
        ..VmOptions::default()
    });
    let want = Machine::new().run(&obj, &mut state, &mut ctx, &mut mem);
    let f = translate(&obj, p, strsize + 1, FRAME).unwrap_or_else(|e| panic!("{expr}: {e}"));
    assert_reachable(&f.insns);
    let (r0, stack) = emulate_frame(&f.insns, p);
    match want {
        Ok(v) => {
            assert_eq!(r0, v, "{expr} (strsize {strsize})");
            Some(v.wrapping_sub(1000))
        }
        Err(fault) => {
            assert_eq!(r0, FAULTED as u64, "{expr}");
            assert_eq!(
                frame_fault(&stack),
                Some((fault.kind.code(), fault.pc, fault.addr)),
                "{expr}: the interpreter's fault"
            );
            None
        }
    }
}

/// Checks that `s` builds `want` both ways at D's default `strsize`, and that at a smaller
/// `strsize` both ways agree on its length and on its compares with `want`'s prefixes.
pub(super) fn builds(s: &str, want: &str, p: &Probe, strsize: usize) {
    let len = agree(&format!("strlen({s})"), p, strsize);
    let mut equal = 0;
    for n in 0..=want.len().min(strsize + 1) {
        let cut = &want[..n];
        equal += agree(&format!(r#"{s} == "{cut}""#), p, strsize).unwrap_or(0);
    }
    if strsize >= 256 {
        assert_eq!(len, Some(want.len() as u64), "strlen({s})");
        assert_eq!(
            agree(&format!(r#"{s} == "{want}""#), p, strsize),
            Some(1),
            "{s}"
        );
    }
    // Equal to one prefix of `want` at most (the parts are cut before they are joined).
    assert!(equal <= 1, "{s} at strsize {strsize}");
}

#[test]
fn strjoin_builds_the_interpreters_string() {
    let mut p = string_probe();
    p.execname = b"abcdefghijklmno".to_vec();
    for strsize in [256usize, 16, 4, 1] {
        for (s, want) in [
            (r#"strjoin(execname, "-w")"#, "abcdefghijklmno-w"),
            (r#"strjoin("-w", execname)"#, "-wabcdefghijklmno"),
            (
                "strjoin(execname, execname)",
                "abcdefghijklmnoabcdefghijklmno",
            ),
            (r#"strjoin("", "")"#, ""),
            (r#"strjoin("ab", "cd")"#, "abcd"),
            ("strjoin(copyinstr(arg1), copyinstr(arg2))", "helloworld"),
            (r#"strjoin(copyinstr(arg1), "!")"#, "hello!"),
            (r#"strjoin("<", copyinstr(arg2))"#, "<world"),
            ("strjoin(probefunc, copyinstr(arg1))", "writehello"),
            (
                r#"strjoin(strjoin(execname, ":"), strjoin(probefunc, copyinstr(arg1)))"#,
                "abcdefghijklmno:writehello",
            ),
        ] {
            builds(s, want, &p, strsize);
        }
    }
}

#[test]
fn strjoin_of_an_unreadable_string_faults_as_the_interpreter() {
    let p = string_probe();
    // copyinstr() of unmapped memory faults before strjoin() runs.
    assert_eq!(
        agree(r#"strlen(strjoin("a", copyinstr(arg5)))"#, &p, 256),
        None
    );
}

#[test]
fn lltostr_builds_the_interpreters_string() {
    let mut p = Probe::new();
    p.args = vec![
        0,
        255,
        (-123i64) as u64,
        i64::MIN as u64,
        u64::MAX,
        8,
        35,
        1,
    ];
    for strsize in [256usize, 5, 1] {
        for (s, want) in [
            ("lltostr(arg0)", "0"),
            ("lltostr(arg1)", "255"),
            ("lltostr(arg2)", "-123"),
            ("lltostr(arg3)", "-9223372036854775808"),
            ("lltostr(arg4)", "-1"),
            ("lltostr(arg1, 16)", "0xff"),
            ("lltostr(arg0, 16)", "0x0"),
            ("lltostr(arg4, 16)", "0xffffffffffffffff"),
            ("lltostr(arg5, 8)", "010"),
            ("lltostr(arg0, 8)", "0"),
            ("lltostr(arg5, 2)", "1000"),
            (
                "lltostr(arg4, 2)",
                "1111111111111111111111111111111111111111111111111111111111111111",
            ),
            ("lltostr(arg6, 36)", "z"),
            ("lltostr(arg2, 36)", "3w5e11264sgp1"),
            ("lltostr(arg7 * 1000000)", "1000000"),
            (r#"strjoin(lltostr(arg1), "-x")"#, "255-x"),
            (r#"strjoin("n=", lltostr(arg2))"#, "n=-123"),
        ] {
            builds(s, want, &p, strsize);
        }
    }
}

#[test]
fn substr_cuts_as_the_interpreter() {
    let mut p = string_probe();
    p.execname = b"abcdefghijklmno".to_vec();
    // arg0 3, arg3 7, arg6 0, arg7 1; and extremes through casts.
    let indexes = [
        "0",
        "1",
        "2",
        "5",
        "14",
        "15",
        "16",
        "300",
        "-1",
        "-2",
        "-5",
        "-15",
        "-16",
        "-20",
        "-300",
        "arg0",
        "-arg0",
        "arg6",
        "-9223372036854775807 - 1",
        "9223372036854775807",
    ];
    let lengths = [
        None,
        Some("0"),
        Some("1"),
        Some("3"),
        Some("7"),
        Some("20"),
        Some("-1"),
        Some("-3"),
        Some("-20"),
        Some("arg3"),
        Some("9223372036854775807"),
        Some("-9223372036854775807 - 1"),
    ];
    for strsize in [256usize, 8] {
        for s in ["execname", r#""hello""#, "copyinstr(arg1)", r#""""#] {
            for i in indexes {
                for n in lengths {
                    let call = match n {
                        Some(n) => format!("substr({s}, {i}, {n})"),
                        None => format!("substr({s}, {i})"),
                    };
                    agree(&format!("strlen({call})"), &p, strsize);
                    agree(&format!(r#"{call} == "hel""#), &p, strsize);
                    agree(&format!(r#"{call} == "cdefg""#), &p, strsize);
                }
            }
        }
    }
    builds(r#"substr(execname, 2, 3)"#, "cde", &p, 256);
    builds(r#"substr(strjoin(execname, "xyz"), -4)"#, "oxyz", &p, 256);
    builds(r#"substr(copyinstr(arg1), 1, -1)"#, "ell", &p, 256);
}
