//! `index()`, `rindex()`, `strstr()`, `strchr()` and `strrchr()` at the probe, checked against
//! the interpreter over strings of every kind the translator follows, with the border cases of
//! their rules (empty strings, not found, starts before the start and past the end) and at a
//! `strsize` that cuts the strings.

use super::strbuild::agree;
use super::*;

const STRINGS: [&str; 5] = [
    "execname",
    r#""hello""#,
    "copyinstr(arg1)",
    r#""""#,
    r#"strjoin(copyinstr(arg1), "lol")"#,
];

const SUBS: [&str; 9] = [
    r#""""#,
    r#""l""#,
    r#""lo""#,
    r#""bc""#,
    r#""abcab""#,
    r#""zz""#,
    "execname",
    "copyinstr(arg1)",
    r#"substr(copyinstr(arg1), 3)"#,
];

#[test]
fn index_and_rindex_find_what_the_interpreter_finds() {
    let mut p = string_probe();
    p.execname = b"abcabcabclolabc".to_vec();
    // arg0 3, arg6 0, arg7 1.
    let starts = [
        None,
        Some("0"),
        Some("2"),
        Some("arg0"),
        Some("-1"),
        Some("-arg0"),
        Some("5"),
        Some("14"),
        Some("15"),
        Some("100"),
        Some("-9223372036854775807 - 1"),
    ];
    let mut found = 0;
    for strsize in [256usize, 8, 1] {
        for s in STRINGS {
            for sub in SUBS {
                for start in starts {
                    for f in ["index", "rindex"] {
                        let call = match start {
                            Some(n) => format!("{f}({s}, {sub}, {n})"),
                            None => format!("{f}({s}, {sub})"),
                        };
                        let v = search(&call, &p, strsize);
                        found += usize::from(v.is_some_and(|v| v as i64 >= 0));
                    }
                }
            }
        }
    }
    // Not every search fails.
    assert!(found > 100, "{found}");
    assert_eq!(agree(r#"index(execname, "abc", 1)"#, &p, 256), Some(3));
    assert_eq!(agree(r#"rindex(execname, "abc")"#, &p, 256), Some(12));
    assert_eq!(agree(r#"rindex(execname, "abc", 11)"#, &p, 256), Some(6));
    assert_eq!(
        agree(r#"index(execname, "lol")"#, &p, 256),
        Some(9),
        "a constant sub"
    );
    assert_eq!(
        agree(r#"index(execname, substr(execname, 9, 3))"#, &p, 256),
        Some(9),
        "a sub built at the probe"
    );
}

/// As `agree`, but a search of two strings built at the probe, at D's default strsize, and the
/// rest of a constant longer than strsize, stay in dtrace (see the module notes of
/// `strsearch`): `None` then.
fn search(expr: &str, p: &Probe, strsize: usize) -> Option<u64> {
    translates(expr, p, strsize)
        .then(|| agree(expr, p, strsize))
        .flatten()
}

/// Whether `expr` runs at the probe at `strsize` (see `search`).
fn translates(expr: &str, p: &Probe, strsize: usize) -> bool {
    let obj = predicate(&format!(
        "#pragma D option strsize={strsize}\n{}",
        clause(expr)
    ));
    if let Err(e) = translate(&obj, p, strsize + 1, FRAME) {
        let e = e.to_string();
        assert!(
            (strsize >= 256 && e.contains("more than the eBPF verifier walks"))
                || e.contains("the rest of a constant longer than strsize"),
            "{expr}: {e}"
        );
        return false;
    }
    true
}

/// Checks string `expr` both ways: its length and its compares with each of `wants`.
fn same_string(expr: &str, wants: &[&str], p: &Probe, strsize: usize) {
    agree(&format!("strlen({expr})"), p, strsize);
    for w in wants {
        agree(&format!(r#"{expr} == "{w}""#), p, strsize);
    }
}

#[test]
fn strstr_strchr_and_strrchr_give_the_interpreters_strings() {
    let mut p = string_probe();
    p.execname = b"abcabcabclolabc".to_vec();
    let wants = [
        "",
        "lo",
        "llo",
        "bcabclolabc",
        "abc",
        "c",
        "hello",
        "lolabc",
    ];
    for strsize in [256usize, 8, 1] {
        for s in STRINGS {
            for sub in SUBS {
                let call = format!("strstr({s}, {sub})");
                if translates(&format!("strlen({call})"), &p, strsize) {
                    same_string(&call, &wants, &p, strsize);
                }
            }
            for c in ["'l'", "'a'", "'c'", "'z'", "0", "arg0 + 'i'", "256 + 'l'"] {
                for f in ["strchr", "strrchr"] {
                    let call = format!("{f}({s}, {c})");
                    if translates(&format!("strlen({call})"), &p, strsize) {
                        same_string(&call, &wants, &p, strsize);
                    }
                }
            }
        }
    }
    assert_eq!(
        agree(r#"strstr(execname, "lol") == "lolabc""#, &p, 256),
        Some(1)
    );
    assert_eq!(agree(r#"strrchr(execname, 'b') == "bc""#, &p, 256), Some(1));
    assert_eq!(
        agree(r#"strchr(copyinstr(arg1), 'l') == "llo""#, &p, 256),
        Some(1)
    );
    // Not found: NULL, whose length faults as the interpreter's does.
    assert_eq!(agree(r#"strlen(strchr("hello", 'z'))"#, &p, 256), None);
    assert_eq!(agree(r#"strstr("hello", "lol") == NULL"#, &p, 256), Some(1));
}

#[test]
fn a_search_too_long_for_the_verifier_stays_in_dtrace() {
    let p = string_probe();
    let obj = predicate(&clause("index(copyinstr(arg1), copyinstr(arg2))"));
    let e = translate(&obj, &p, 257, FRAME).unwrap_err();
    assert!(
        e.to_string()
            .contains("index(): a search of up to 256 characters for a string of up to 256"),
        "{e}"
    );
    // At a smaller strsize it runs at the probe.
    assert_eq!(
        agree("index(copyinstr(arg1), copyinstr(arg2))", &p, 64),
        Some(u64::MAX)
    );
}
