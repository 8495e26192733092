//! Strings through `?:` at the probe, checked against the interpreter: constants, `execname`,
//! the probe's names, copied user strings, string variables and NULL meeting at a join, nested
//! joins, used by compares, `strlen()` and the other string subroutines, returned as a value (an
//! aggregation key, a recorded string) and stored in string variables, at D's default `strsize`
//! and at one the strings fill; strings meeting a kernel string's address joined as addresses;
//! what stays mixed (strings, NULL and an address) says so.

use super::strbuild::agree;
use super::*;

/// [`string_probe`] with `arg0` and `execname` as given.
fn probe(arg0: u64, execname: &str) -> Probe {
    let mut p = string_probe();
    p.args[0] = arg0;
    p.execname = execname.as_bytes().to_vec();
    p
}

/// The probes the tests run at: `arg0` (the condition) zero, three and four; two `execname`s.
fn probes() -> Vec<Probe> {
    let mut v = Vec::new();
    for arg0 in [0, 3, 4] {
        for name in ["dd", "bash"] {
            v.push(probe(arg0, name));
        }
    }
    v
}

#[test]
fn joined_strings_compare_and_measure_as_the_interpreter() {
    for p in probes() {
        for strsize in [256usize, 5] {
            for expr in [
                r#"(arg0 > 2 ? "big" : "small") == "big""#,
                r#"(arg0 > 2 ? "big" : "small") == "small""#,
                r#"(arg0 > 2 ? "big" : "small") < "c""#,
                r#""small" == (arg0 ? "big" : "small")"#,
                r#"(arg0 ? "big" : "small") == (arg0 == 3 ? "big" : "bug")"#,
                r#"strlen(arg0 ? "big" : "small")"#,
                r#"strlen(arg0 == 3 ? "three" : arg0 == 4 ? "four" : "other")"#,
                r#"(arg0 == 3 ? "three" : arg0 == 4 ? "four" : "other") == "four""#,
                r#"(arg0 ? (arg3 ? "x" : "y") : execname) == "x""#,
                r#"(arg0 ? execname : "none") == "dd""#,
                r#"(arg0 ? execname : "none") == "none""#,
                "(arg0 ? execname : probefunc) == execname",
                r#"(arg0 ? probefunc : probename) == "entry""#,
                r#"(arg0 ? copyinstr(arg1) : "x") == "hello""#,
                r#"(arg0 ? "x" : copyinstr(arg2)) == "world""#,
                r#"(arg0 ? copyinstr(arg1) : copyinstr(arg2)) < "i""#,
                "strlen(arg0 ? copyinstr(arg4) : execname)",
                r#"strlen(strjoin(arg0 ? "a" : "bc", arg0 == 4 ? execname : "-"))"#,
                r#"strjoin(arg0 ? "a" : "bc", "d") == "ad""#,
                r#"index(arg0 ? "hello" : execname, "l")"#,
                r#"strlen(substr(arg0 ? "hello" : "bye", 1))"#,
                r#"toupper(arg0 ? execname : "up") == "DD""#,
                // NULL on one path: compared as the empty string, measured a fault.
                r#"(arg0 ? "a" : NULL) == """#,
                r#"(arg0 ? NULL : execname) < "c""#,
                r#"strlen(arg0 ? "a" : NULL)"#,
                // A fault on one path only.
                r#"(arg0 ? copyinstr(arg5) : "x") == "x""#,
            ] {
                agree(expr, &p, strsize);
            }
        }
    }
}

/// `src` as an aggregation key at `p` (D's default `strsize`): `Some` of the string it leaves in
/// scratch, `None` when it faults (which must be the interpreter's fault on recording NULL: bad
/// address 0 at the key's last instruction).
fn key_value(src: &str, p: &Probe) -> Option<Vec<u8>> {
    let obj = key(src);
    let v = translate_value(&obj, p, 257, FRAME).unwrap_or_else(|e| panic!("{src}: {e}"));
    assert_eq!(v.kind, ValueKind::Scratch, "{src}");
    assert_reachable(&v.fragment.insns);
    let (r0, stack, scratch) = emulate_all(&v.fragment.insns, p);
    if r0 == FAULTED as u64 {
        let last = obj.text.len() as u32 - 1;
        assert_eq!(
            frame_fault(&stack),
            Some((FaultKind::BadAddr.code(), last, 0)),
            "{src}"
        );
        // The interpreter's value is NULL.
        assert_eq!(interpret_result(&obj, p).ok(), Some(0), "{src}");
        return None;
    }
    let at = (r0 - SCRATCH_ADDR) as usize;
    let width = string_scratch_width(257);
    let bytes = &scratch[at..at + width];
    let n = bytes.iter().position(|&c| c == 0).expect("NUL-terminated");
    assert!(bytes[n..].iter().all(|&c| c == 0), "{src}: zero-padded");
    let s = bytes[..n].to_vec();
    // The interpreter's string is the same.
    let lit = String::from_utf8(s.clone()).unwrap();
    assert_eq!(
        agree(&format!(r#"({src}) == "{lit}""#), p, 256),
        Some(1),
        "{src}"
    );
    Some(s)
}

#[test]
fn joined_strings_are_values_in_scratch() {
    for p in probes() {
        let a0 = p.args[0];
        let exec = String::from_utf8(p.execname.clone()).unwrap();
        let pick = |c: bool, x: &str, y: &str| if c { x.to_string() } else { y.to_string() };
        let cases = [
            (
                r#"arg0 > 2 ? "big" : "small""#,
                Some(pick(a0 > 2, "big", "small")),
            ),
            (
                "arg0 ? execname : probefunc",
                Some(pick(a0 != 0, &exec, "write")),
            ),
            (
                r#"arg0 == 3 ? "three" : arg0 == 4 ? execname : "other""#,
                Some(match a0 {
                    3 => "three".to_string(),
                    4 => exec.clone(),
                    _ => "other".to_string(),
                }),
            ),
            (
                r#"arg0 ? copyinstr(arg1) : "none""#,
                Some(pick(a0 != 0, "hello", "none")),
            ),
            (r#"arg0 ? "a" : NULL"#, (a0 != 0).then(|| "a".to_string())),
            ("arg0 ? NULL : execname", (a0 == 0).then(|| exec.clone())),
        ];
        for (src, want) in cases {
            assert_eq!(
                key_value(src, &p),
                want.map(String::into_bytes),
                "{src} at arg0 {a0}"
            );
        }
    }
}

#[test]
fn joined_strings_are_stored_in_string_variables() {
    for setup in [
        r#"self->p = arg0 ? "hello" : execname;"#,
        r#"self->p = arg3 ? copyinstr(arg2) : "x"; s = arg3 ? "g" : probefunc;"#,
        r#"s = arg0 ? execname : arg3 ? "seven" : "none";"#,
        r#"self->q = "q"; self->p = arg3 ? self->q : "dflt";"#,
        r#"self->p = arg3 ? self->q : "dflt";"#,
        r#"self->p = arg3 ? NULL : "dflt";"#,
    ] {
        for pred in [
            r#"self->p == "hello""#,
            "self->p == execname",
            r#"self->p == "world" && s == "g""#,
            r#"s == "dd""#,
            r#"s == "seven""#,
            r#"self->p == "q""#,
            r#"self->p == """#,
            "self->p == NULL",
        ] {
            strvar_case(setup, pred);
        }
    }
}

/// [`Probe`] with string scratch for `slots` strings only.
struct FewSlots {
    p: Probe,
    slots: usize,
}

impl ProbeContext for FewSlots {
    fn emit_builtin(&self, a: &mut Asm, b: Builtin) -> Result<(), String> {
        self.p.emit_builtin(a, b)
    }

    fn emit_execname(&self, a: &mut Asm, at: i16) -> Result<(), String> {
        self.p.emit_execname(a, at)
    }

    fn names(&self) -> &ProbeNames {
        self.p.names()
    }

    fn emit_string_scratch(&self, a: &mut Asm, offset: usize, len: usize) -> Result<(), String> {
        if offset + len > self.slots * string_scratch_width(257) {
            return Err("out of string scratch".into());
        }
        self.p.emit_string_scratch(a, offset, len)
    }
}

#[test]
fn a_join_copies_its_strings_into_one_slot() {
    // Every edge into a join copies into the join's one slot; a string already in scratch
    // (a copy's own slot) is taken as it is.
    for (src, slots) in [
        (r#"arg0 > 2 ? "big" : "small""#, 1),
        // One join: the inner `?:` branches to the outer one's end.
        (r#"arg0 ? execname : arg1 ? "x" : probefunc"#, 1),
        (r#"arg0 ? "x" : copyinstr(arg1)"#, 2),
        ("arg0 ? copyinstr(arg2) : copyinstr(arg1)", 2),
    ] {
        let obj = predicate(&clause(&format!("strlen({src}) > 0")));
        for (n, fits) in [(slots, true), (slots - 1, false)] {
            let ctx = FewSlots {
                p: probe(3, "dd"),
                slots: n,
            };
            match translate(&obj, &ctx, 257, FRAME) {
                Ok(f) => {
                    assert!(fits, "{src} in {n} slots");
                    assert_reachable(&f.insns);
                    assert_eq!(emulate(&f.insns, &ctx.p), 1, "{src}");
                }
                Err(e) => assert!(!fits, "{src} in {n} slots: {e}"),
            }
        }
    }
    let one = FewSlots {
        p: probe(3, "dd"),
        slots: 1,
    };
    // Two joins, two slots: with one, the clause stays in dtrace and says why.
    let e = translate(
        &predicate(&clause(r#"(arg0 ? "a" : "b") == (arg3 ? execname : "c")"#)),
        &one,
        257,
        FRAME,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("strings joined in %r")
            && e.to_string().contains("out of string scratch"),
        "{e}"
    );
}

#[test]
fn strings_meeting_kernel_addresses_join_as_addresses() {
    // The D library's translators: `F == 0 ? "<none>" : stringof(F->...->name)`. Each path's
    // string is an address, read where the value is used, as the interpreter reads it.
    let mut p = kernel_string_probe();
    for arg0 in [0, 3, 4] {
        p.args[0] = arg0;
        let name = |yes: bool, s: &str| Some(if yes { s } else { "kthread" }.as_bytes().to_vec());
        for (src, want) in [
            (
                r#"arg0 ? "<none>" : stringof((char *)curthread + 1)"#,
                name(arg0 != 0, "<none>"),
            ),
            (
                r#"arg0 == 0 ? stringof((char *)curthread + 1) : arg0 == 3 ? execname : "four""#,
                match arg0 {
                    0 => name(false, ""),
                    3 => Some(p.execname.clone()),
                    _ => Some(b"four".to_vec()),
                },
            ),
        ] {
            assert_eq!(key_value(src, &p), want, "{src} at arg0 {arg0}");
        }
        // With NULL on a path too: mixed (the interpreter compares NULL as the empty string).
        let src = r#"arg0 == 3 ? "x" : arg0 ? (string)((char *)curthread + 1) : NULL"#;
        let e = translate_value(&key(src), &p, 257, FRAME).unwrap_err();
        assert!(
            e.to_string().contains("different kinds on different paths"),
            "{e}"
        );
        // A probe argument whose string is user memory or the probe's own copy: in dtrace.
        let src = r#"arg0 ? "x" : stringof(arg3)"#;
        let e = translate_value(&key(src), &p, 257, FRAME).unwrap_err();
        assert!(
            e.to_string()
                .contains("a string at an address the translator does not follow joined"),
            "{e}"
        );
        for strsize in [256usize, 8] {
            for expr in [
                r#"(arg0 ? "<none>" : stringof((char *)curthread + 1)) == "kthread""#,
                r#"(arg0 ? stringof((char *)curthread + 1) : "k") < "kz""#,
                // A fault on one path only: at the use, as the interpreter's.
                r#"(arg0 ? "x" : stringof((char *)curthread + 0x4000)) == "x""#,
                // An address computed from a value the probe copies nothing for: read in
                // kernel memory (here unreadable: a fault on both paths).
                r#"(arg0 ? "x" : stringof((char *)(arg3 * 2))) == "x""#,
            ] {
                agree(expr, &p, strsize);
            }
        }
    }
}

#[test]
fn strings_mixed_with_other_values_stay_in_dtrace_and_say_what_they_are() {
    let p = string_probe();
    // A string on one path, a string and NULL on the other.
    let e = translate_value(
        &key(r#"arg0 ? "a" : arg3 ? stringof(curthread) : NULL"#),
        &p,
        257,
        FRAME,
    )
    .unwrap_err();
    let why = e.to_string();
    assert!(
        why.contains(
            "holds values of different kinds on different paths (a string, the integer 0 and \
             an integer)"
        ),
        "{why}"
    );
    assert!(!why.contains("alloca"), "{why}");
    let e = translate(
        &predicate(&clause(
            r#"(arg0 ? "a" : arg3 ? stringof(curthread) : NULL) == "a""#,
        )),
        &p,
        257,
        FRAME,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains(
            "string compare of values of different kinds on different paths (a string, the \
             integer 0 and an integer)"
        ),
        "{e}"
    );
    // A constant longer than strsize meets another string: a copy would cut what the
    // interpreter compares.
    let src = format!(
        "#pragma D option strsize=4\n{}",
        clause(r#"(arg0 ? "longer" : "b") == "longer""#)
    );
    let e = translate(&predicate(&src), &p, 5, FRAME).unwrap_err();
    assert!(
        e.to_string()
            .contains("a string constant longer than strsize joined with other strings"),
        "{e}"
    );
    // Where the constants fit, it translates.
    let src = format!(
        "#pragma D option strsize=4\n{}",
        clause(r#"(arg0 ? "long" : "b") == "long""#)
    );
    assert!(translate(&predicate(&src), &p, 5, FRAME).is_ok());
}
