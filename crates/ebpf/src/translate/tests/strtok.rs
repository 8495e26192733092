//! `strtok()` at the probe, checked against the interpreter over whole firings: a sequence of
//! clauses (each a string value, as `trace()` records it) run in one firing of the interpreter and,
//! translated, one after the other in the emulator, sharing the firing's state as the probe's
//! clauses do. Strings of every kind the translator follows, delimiters constant and built at the
//! probe, leading and trailing delimiters, empty tokens, no delimiter at all, a `strsize` that
//! cuts the string, and the NULL cases of the interpreter's rules; strings at kernel addresses
//! (pointers, `(string)` casts), an address of 0 at run time, and their faults.

use super::*;

/// What one clause of a firing gives: its token, NULL, or a fault (kind, DIF pc, address).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Str(String),
    Null,
    Fault(u32, u32, u64),
}

/// A struct laid over [`kernel_probe`]'s memory: char arrays holding a path and a list.
const KSTR: &str = "struct kstr { char pad; char path[12]; char list[30]; };";

/// The value object of `trace(expr)` at D's `strsize` (the program declares [`KSTR`]).
fn value(expr: &str, strsize: usize) -> DifObject {
    let src = format!(
        "#pragma D option strsize={strsize}\n{KSTR}\nsyscall::write:entry {{ trace({expr}); }}"
    );
    let p = dtrace_compiler::compile(&src, &dtrace_compiler::CompileOptions::default())
        .unwrap_or_else(|e| panic!("{src}: {e:?}"));
    p.ecbs[0].actions[0].difo.clone().expect("a value")
}

/// Runs the clauses `exprs` (string values) as one firing both ways, at D's `strsize`; asserts
/// that they agree clause by clause and returns what each gave.
fn firing(exprs: &[&str], p: &Probe, strsize: usize) -> Vec<Tok> {
    let objs: Vec<DifObject> = exprs.iter().map(|e| value(e, strsize)).collect();
    // The interpreter: one machine, one firing.
    let (mut ctx, mut mem) = fake_env(p);
    let mut state = VarState::new(VmOptions {
        strsize: strsize + 1,
        ..VmOptions::default()
    });
    let mut m = Machine::new();
    m.begin_firing();
    let mut want = Vec::new();
    for o in &objs {
        m.begin_clause();
        want.push(match m.run(o, &mut state, &mut ctx, &mut mem) {
            Ok(0) => Tok::Null,
            Ok(addr) => Tok::Str(
                String::from_utf8(m.read_string_result(o, &mut mem, addr).expect("a string"))
                    .expect("utf-8"),
            ),
            Err(f) => Tok::Fault(f.kind.code(), f.pc, f.addr),
        });
    }
    // The translation: the fragments of the clauses so far, one after the other.
    let mut insns = Vec::new();
    for (k, o) in objs.iter().enumerate() {
        let v = translate_value(o, p, strsize + 1, FRAME)
            .unwrap_or_else(|e| panic!("{}: {e}", exprs[k]));
        assert_eq!(v.kind, ValueKind::Scratch, "{}", exprs[k]);
        assert_reachable(&v.fragment.insns);
        insns.extend(v.fragment.insns.iter().copied());
        let (r0, stack, scratch) = emulate_all(&insns, p);
        let got = if r0 == FAULTED as u64 {
            let (kind, pc, addr) = frame_fault(&stack).expect("a fault");
            // Recording NULL faults where the action stores it: the value's last instruction.
            let last = o.text.len() as u32 - 1;
            if (kind, pc, addr) == (FaultKind::BadAddr.code(), last, 0) && want[k] == Tok::Null {
                Tok::Null
            } else {
                Tok::Fault(kind, pc, addr)
            }
        } else {
            let at = usize::try_from(r0.wrapping_sub(SCRATCH_ADDR)).expect("in the scratch");
            let s = &scratch[at..at + strsize + 1];
            let n = s.iter().position(|&c| c == 0).expect("NUL-terminated");
            assert!(
                s[n..].iter().all(|&c| c == 0),
                "{}: zero-padded within strsize",
                exprs[k]
            );
            Tok::Str(String::from_utf8(s[..n].to_vec()).expect("utf-8"))
        };
        assert_eq!(got, want[k], "clause {k} of {exprs:?} (strsize {strsize})");
    }
    want
}

fn toks(t: &[&str]) -> Vec<Tok> {
    t.iter()
        .map(|s| match *s {
            "NULL" => Tok::Null,
            s => Tok::Str(s.into()),
        })
        .collect()
}

/// A probe whose `arg1` is a path (`copyinstr(arg1)`) and whose `execname` holds delimiters.
fn path_probe(path: &str) -> Probe {
    let mut p = string_probe();
    let mut bytes = path.as_bytes().to_vec();
    bytes.push(0);
    p.user = vec![(p.args[1], bytes)];
    p.execname = b"/.".to_vec();
    p
}

#[test]
fn a_firing_tokenizes_across_clauses_as_the_interpreter() {
    let p = path_probe("//usr/lib//x86_64-linux-gnu/libc.so.6/");
    let first = r#"strtok(copyinstr(arg1), "/")"#;
    let next = r#"strtok(NULL, "/")"#;
    assert_eq!(
        firing(&[first, next, next, next, next, next], &p, 256),
        toks(&[
            "usr",
            "lib",
            "x86_64-linux-gnu",
            "libc.so.6",
            "NULL",
            "NULL"
        ])
    );
    // Another delimiter set midway, delimiters from a string built at the probe.
    assert_eq!(
        firing(
            &[
                first,
                r#"strtok(NULL, strjoin("/", "-"))"#,
                next,
                r#"strtok(NULL, ".")"#
            ],
            &p,
            256
        ),
        // The position stays at the delimiter that ended a token, so a set without it takes it.
        toks(&["usr", "lib", "x86_64-linux-gnu", "/libc"])
    );
    // A new string starts over.
    assert_eq!(
        firing(&[first, next, r#"strtok("a/b", "/")"#, next, next], &p, 256),
        toks(&["usr", "lib", "a", "b", "NULL"])
    );
    // `execname` ("/.") as the delimiters.
    assert_eq!(
        firing(
            &[
                "strtok(copyinstr(arg1), execname)",
                "strtok(NULL, execname)",
                "strtok(NULL, execname)",
                "strtok(NULL, execname)",
                "strtok(NULL, execname)",
            ],
            &p,
            256
        ),
        toks(&["usr", "lib", "x86_64-linux-gnu", "libc", "so"])
    );
}

#[test]
fn the_interpreters_border_cases() {
    let p = path_probe("abc");
    let next = r#"strtok(NULL, ",")"#;
    for (first, want) in [
        // No delimiter at all.
        (r#"strtok("abc", ",")"#, ["abc", "NULL", "NULL"]),
        // Only delimiters, and the empty string.
        (r#"strtok(",,,", ",")"#, ["NULL", "NULL", "NULL"]),
        (r#"strtok("", ",")"#, ["NULL", "NULL", "NULL"]),
        // Empty tokens are skipped; a trailing delimiter ends nothing.
        (r#"strtok(",a,,b,", ",")"#, ["a", "b", "NULL"]),
        // No delimiters: the whole string.
        (r#"strtok("a,b", "")"#, ["a,b", "NULL", "NULL"]),
        (r#"strtok(copyinstr(arg1), "")"#, ["abc", "NULL", "NULL"]),
        (r#"strtok(copyinstr(arg1), "b")"#, ["a", "bc", "NULL"]),
    ] {
        assert_eq!(
            firing(&[first, next, next], &p, 256),
            toks(&want),
            "{first}"
        );
    }
    // strtok(NULL, d) before any string in the firing: NULL.
    assert_eq!(firing(&[next, next], &p, 256), toks(&["NULL", "NULL"]));
}

#[test]
fn strsize_cuts_the_string_as_the_interpreter() {
    let p = path_probe("/usr/lib/x86_64-linux-gnu/libc.so.6");
    let first = r#"strtok(copyinstr(arg1), "/")"#;
    let next = r#"strtok(NULL, "/")"#;
    for strsize in [16usize, 8, 5, 4, 3, 2, 1] {
        firing(&[first, next, next, next], &p, strsize);
        firing(
            &[r#"strtok("aaaaaaaaaaaaaaaaaaaaaaa,b", ",")"#, next, next],
            &p,
            strsize,
        );
        firing(
            &[
                r#"strtok(copyinstr(arg1), "/aeiou_-.")"#,
                r#"strtok(NULL, strjoin("/", "l"))"#,
                next,
            ],
            &p,
            strsize,
        );
    }
    assert_eq!(
        firing(&[first, next, next], &p, 16),
        toks(&["usr", "lib", "x86_64"])
    );
}

#[test]
fn null_strings_fault_as_the_interpreters() {
    // A NULL string variable (here, strtok()'s own NULL result) as either argument faults with
    // DTRACEFLT_BADADDR at 0, as in the interpreter.
    let p = path_probe("abc");
    let null = r#"strtok("", ",")"#;
    for exprs in [
        vec![format!(r#"strtok({null}, ",")"#)],
        vec![format!(r#"strtok("a,b", {null})"#)],
        vec![
            r#"strtok("a,b", ",")"#.to_string(),
            format!("strtok(NULL, {null})"),
        ],
        vec![format!("strtok(NULL, {null})")],
    ] {
        let exprs: Vec<&str> = exprs.iter().map(String::as_str).collect();
        let got = firing(&exprs, &p, 256);
        assert!(
            matches!(got.last(), Some(Tok::Fault(k, _, 0)) if *k == FaultKind::BadAddr.code()),
            "{exprs:?}: {got:?}"
        );
    }
}

#[test]
fn strtok_without_the_firings_state_stays_in_dtrace() {
    // A context that keeps no strtok() state (the default: a clause that does not run whole at
    // the probe) says why.
    struct NoState;
    impl ProbeContext for NoState {
        fn emit_builtin(&self, _: &mut Asm, _: Builtin) -> Result<(), String> {
            Ok(())
        }
        fn emit_execname(&self, _: &mut Asm, _: i16) -> Result<(), String> {
            Ok(())
        }
        fn names(&self) -> &ProbeNames {
            static N: std::sync::OnceLock<ProbeNames> = std::sync::OnceLock::new();
            N.get_or_init(ProbeNames::default)
        }
        fn emit_string_scratch(&self, a: &mut Asm, _: usize, _: usize) -> Result<(), String> {
            a.mov_imm(R0, 0);
            Ok(())
        }
    }
    let e = translate_value(&value(r#"strtok("a,b", ",")"#, 256), &NoState, 257, FRAME)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("strtok(): strtok()'s state lives in dtrace"),
        "{e}"
    );
    // The string at a probe argument that is user memory (or the probe's own copy) is read in
    // dtrace, and the clause with it.
    let e = translate_value(
        &value(r#"strtok((char *)arg0, ",")"#, 256),
        &string_probe(),
        257,
        FRAME,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("strtok(): a string at probe argument arg0 is read in dtrace"),
        "{e}"
    );
    // A char array is strtok()'s string by its address, and only its string.
    for expr in [
        r#"strlen(((struct kstr *)curthread)->path)"#,
        r#"strtok("a,b", ((struct kstr *)curthread)->list)"#,
    ] {
        let e = translate_value(&value(expr, 256), &kernel_probe(), 257, FRAME)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a tuple the translator does not follow"),
            "{expr}: {e}"
        );
    }
}

/// A probe whose `curthread` points at kernel memory holding "\0/usr/lib//x\0" then "ab,cd,"
/// over and over to the end of the region (no NUL), whose `fbt` arguments are `arg1`, the
/// address of "/usr/lib//x", and `arg4`, 0.
fn kernel_probe() -> Probe {
    let mut p = string_probe();
    let mut mem = b"\0/usr/lib//x\0".to_vec();
    mem.extend(b"ab,cd,".iter().cycle().take(30));
    p.kernel = vec![(0xffff_8000_0000_1000, mem)];
    p.names.provider = "fbt".into();
    p.args[1] = 0xffff_8000_0000_1001;
    p.args[4] = 0;
    p
}

#[test]
fn a_string_at_a_kernel_address_is_tokenized_as_the_interpreter_reads_it() {
    let p = kernel_probe();
    let next = r#"strtok(NULL, "/")"#;
    for first in [
        r#"strtok((char *)curthread + 1, "/")"#,
        r#"strtok((char *)arg1, "/")"#,
        r#"strtok((string)((char *)curthread + 1), "/")"#,
        r#"strtok(stringof(arg1), "/")"#,
    ] {
        assert_eq!(
            firing(&[first, next, next, next], &p, 256),
            toks(&["usr", "lib", "x", "NULL"]),
            "{first}"
        );
    }
    // A char array (pushed by reference) is the string at its address.
    let path = "((struct kstr *)curthread)->path";
    let list = "((struct kstr *)curthread)->list";
    assert_eq!(
        firing(
            &[
                &format!(r#"strtok({path}, "/")"#),
                next,
                &format!(r#"strtok({list}, ",")"#),
                r#"strtok(NULL, ",")"#,
            ],
            &p,
            8
        ),
        toks(&["usr", "lib", "ab", "cd"])
    );
    // An address of 0 at run time is NULL: the saved string continues.
    assert_eq!(
        firing(
            &[
                r#"strtok((char *)arg1, "/")"#,
                r#"strtok((char *)arg4, "/")"#,
                r#"strtok((char *)arg4, strjoin("/", ""))"#,
                r#"strtok((char *)arg4, "/")"#,
            ],
            &p,
            256
        ),
        toks(&["usr", "lib", "x", "NULL"])
    );
    assert_eq!(
        firing(&[r#"strtok((char *)arg4, "/")"#], &p, 256),
        toks(&["NULL"])
    );
    // At most strsize - 1 characters, those of the string at curthread + 13 all readable (the
    // probe's copy of a string is whole or nothing: one running into memory not readable
    // faults at its address on both paths, which this fake memory, read byte by byte, does
    // not model).
    assert_eq!(
        firing(
            &[
                r#"strtok((char *)curthread + 13, ",")"#,
                r#"strtok(NULL, ",")"#,
                r#"strtok(NULL, ",")"#,
                r#"strtok(NULL, ",")"#,
            ],
            &p,
            8
        ),
        toks(&["ab", "cd", "ab", "NULL"])
    );
    for strsize in [1usize, 2, 3, 4, 8, 16, 28, 29] {
        firing(
            &[
                r#"strtok((char *)curthread + 13, ",")"#,
                r#"strtok(NULL, ",")"#,
                r#"strtok(NULL, ",")"#,
            ],
            &p,
            strsize,
        );
        firing(
            &[
                r#"strtok((char *)curthread + 1, "/")"#,
                r#"strtok(NULL, "/")"#,
            ],
            &p,
            strsize,
        );
    }
}

#[test]
fn strings_at_addresses_fault_as_the_interpreters() {
    let p = kernel_probe();
    for (exprs, addr) in [
        // Memory not mapped, a constant address (never copied).
        (
            vec![r#"strtok((char *)curthread + 4096, ",")"#],
            0xffff_8000_0000_2000,
        ),
        (vec![r#"strtok((char *)1234, ",")"#], 1234),
        // NULL delimiters fault first, as the interpreter reads them first.
        (
            vec![r#"strtok((char *)curthread + 4096, strtok("", ","))"#],
            0,
        ),
        (vec![r#"strtok((char *)arg4, strtok("", ","))"#], 0),
        (
            vec![r#"strtok("a,b", ",")"#, r#"strtok((char *)1234, ",")"#],
            1234,
        ),
    ] {
        let got = firing(&exprs, &p, 256);
        assert!(
            matches!(got.last(), Some(Tok::Fault(k, _, a))
                if *k == FaultKind::BadAddr.code() && *a == addr),
            "{exprs:?}: {got:?}"
        );
    }
}
