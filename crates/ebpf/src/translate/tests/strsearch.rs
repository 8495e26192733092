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
fn a_search_too_long_for_the_verifier_stays_in_dtrace_where_it_cannot_loop() {
    let mut p = string_probe();
    p.no_loops = Some("no bpf_loop here");
    let obj = predicate(&clause("index(copyinstr(arg1), copyinstr(arg2))"));
    let e = translate(&obj, &p, 257, FRAME).unwrap_err().to_string();
    assert!(
        e.contains("index(): a search of up to 256 characters for a string of up to 256")
            && e.ends_with("it cannot loop at the probe: no bpf_loop here"),
        "{e}"
    );
    // At a smaller strsize it runs at the probe.
    assert_eq!(
        agree("index(copyinstr(arg1), copyinstr(arg2))", &p, 64),
        Some(u64::MAX)
    );
}

/// A probe whose user page holds a long string at `arg0` (300 characters: `ab` repeated, an
/// `abd` at 100 and at 250, `xyz` at its end) and at `arg1`-`arg7` strings to search for in it:
/// `abd`, `xyz`, `ab`, the empty string, its first 255 characters, `q`, the whole of it.
fn long_probe() -> Probe {
    let mut hay: Vec<u8> = b"ab".iter().copied().cycle().take(297).collect();
    hay[100..103].copy_from_slice(b"abd");
    hay[250..253].copy_from_slice(b"abd");
    hay.extend(b"xyz");
    let mut page = Vec::new();
    let mut at = Vec::new();
    for s in [
        &hay[..],
        b"abd",
        b"xyz",
        b"ab",
        b"",
        &hay[..255],
        b"q",
        &hay[..],
    ] {
        at.push(0x7fff_0000_1000 + page.len() as u64);
        page.extend(s);
        page.push(0);
    }
    page.resize(4096, b'x');
    let mut p = string_probe();
    p.user = vec![(0x7fff_0000_1000, page)];
    p.args = at;
    p
}

/// Whether `expr` at `strsize` translates to code that loops with `bpf_loop`.
fn loops(expr: &str, p: &Probe, strsize: usize) -> bool {
    let obj = predicate(&format!(
        "#pragma D option strsize={strsize}\n{}",
        clause(expr)
    ));
    let f = translate(&obj, p, strsize + 1, FRAME).unwrap_or_else(|e| panic!("{expr}: {e}"));
    f.insns[..f.code_len()]
        .iter()
        .any(|i| i.code == (op::JMP | op::CALL) && i.imm == helper::LOOP)
}

#[test]
fn searches_past_the_walk_budget_loop_at_the_probe_as_the_interpreter_searches() {
    let p = long_probe();
    let starts = [
        None,
        Some("0"),
        Some("1"),
        Some("99"),
        Some("100"),
        Some("101"),
        Some("250"),
        Some("251"),
        Some("254"),
        Some("255"),
        Some("256"),
        Some("1000"),
        Some("-1"),
        Some("-9223372036854775807 - 1"),
    ];
    let mut found = Vec::new();
    for strsize in [256usize, 200] {
        for n in 1..=7 {
            let sub = format!("copyinstr(arg{n})");
            assert!(loops(
                &format!("index(copyinstr(arg0), {sub})"),
                &p,
                strsize
            ));
            for start in starts {
                for f in ["index", "rindex"] {
                    let call = match start {
                        Some(at) => format!("{f}(copyinstr(arg0), {sub}, {at})"),
                        None => format!("{f}(copyinstr(arg0), {sub})"),
                    };
                    found.push(agree(&call, &p, strsize));
                }
            }
            let call = format!("strstr(copyinstr(arg0), {sub})");
            agree(&format!("strlen({call})"), &p, strsize);
            for w in ["abdxyz", "abdab", "xyz", "ab", ""] {
                agree(&format!(r#"{call} == "{w}""#), &p, strsize);
            }
        }
        // The string searched for as the haystack, and a needle longer than it.
        agree("index(copyinstr(arg2), copyinstr(arg0))", &p, strsize);
        agree("rindex(copyinstr(arg3), copyinstr(arg7), 2)", &p, strsize);
    }
    // The interpreter's answers, as the loop found them: the border cases all met.
    for v in [100, 250, 0, 2, 98, 255, 199, u64::MAX] {
        assert!(found.contains(&Some(v)), "{v} in {found:?}");
    }
    assert_eq!(
        agree("rindex(copyinstr(arg0), copyinstr(arg1))", &p, 256),
        Some(250)
    );
    assert_eq!(
        agree("rindex(copyinstr(arg0), copyinstr(arg1), 249)", &p, 256),
        Some(100)
    );
    assert_eq!(
        agree("index(copyinstr(arg0), copyinstr(arg1), 101)", &p, 256),
        Some(250)
    );
    // strsize cuts the string before its second `abd` and its `xyz`.
    assert_eq!(
        agree("rindex(copyinstr(arg0), copyinstr(arg1))", &p, 200),
        Some(100)
    );
    assert_eq!(
        agree("index(copyinstr(arg0), copyinstr(arg2))", &p, 200),
        Some(u64::MAX)
    );
    // Below the budget, the search is unrolled as before.
    assert!(!loops("index(copyinstr(arg0), copyinstr(arg1))", &p, 64));
    assert!(!loops("index(copyinstr(arg0), \"abd\")", &p, 256));
}

#[test]
fn a_looped_searchs_callback_is_laid_out_once_after_the_program_holding_it() {
    let p = string_probe();
    let obj = predicate(&clause("index(copyinstr(arg1), copyinstr(arg2))"));
    let f = translate(&obj, &p, 257, FRAME).unwrap();
    let code = f.code_len();
    assert!(code < f.insns.len(), "the fragment holds its callback");
    let mut a = Asm::new();
    f.emit(&mut a);
    f.emit(&mut a);
    a.mov_imm(R0, 0).exit();
    let insns = a.finish().unwrap();
    let subs = crate::insn::subprograms(&insns);
    assert_eq!(subs, vec![2 * code + 2]);
    assert_eq!(&insns[subs[0]..], &f.insns[code..]);
    // Each copy's code is the fragment's but for where its load of the callback points.
    for copy in [0, code] {
        for (k, (x, y)) in insns[copy..copy + code].iter().zip(&f.insns).enumerate() {
            if y.src == crate::insn::PSEUDO_FUNC && y.code == (op::LD | op::DW | op::IMM) {
                assert_eq!(copy + k + 1 + x.imm as usize, subs[0], "{copy} {k} {x:?}");
            } else {
                assert_eq!(x, y);
            }
        }
    }
}

#[test]
fn a_constant_past_the_walk_budget_is_searched_for_from_its_work_slot_in_the_loop() {
    let p = long_probe();
    // 200 characters of the long string from 50 (its first `abd` at 50 of them).
    let mut hay: Vec<u8> = b"ab".iter().copied().cycle().take(297).collect();
    hay[100..103].copy_from_slice(b"abd");
    let sub = String::from_utf8(hay[50..250].to_vec()).unwrap();
    let index = format!(r#"index(copyinstr(arg0), "{sub}")"#);
    let rindex = format!(r#"rindex(copyinstr(arg0), "{sub}")"#);
    assert!(loops(&index, &p, 600));
    assert_eq!(agree(&index, &p, 600), Some(50));
    assert_eq!(agree(&rindex, &p, 600), Some(50));
    let from = |f: &str, at: &str| format!(r#"{f}(copyinstr(arg0), "{sub}", {at})"#);
    assert_eq!(agree(&from("index", "50"), &p, 600), Some(50));
    assert_eq!(agree(&from("index", "51"), &p, 600), Some(u64::MAX));
    assert_eq!(agree(&from("rindex", "49"), &p, 600), Some(u64::MAX));
    assert_eq!(agree(&from("rindex", "1000"), &p, 600), Some(50));
    // Under the budget at D's default strsize: compared in place, unrolled.
    assert!(!loops(&index, &p, 256));
    assert_eq!(agree(&index, &p, 256), Some(50));
}
