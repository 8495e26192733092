//! A string indexed at the probe (`s[i]`), checked against the interpreter: each kind of string
//! source (a constant, the probe's names, `execname`, `copyinstr()` with and without `maxlen`,
//! the subroutines that build strings, string variables, NULL among them), indexes in the
//! string, at its NUL and past it within its storage, bounded indexes computed at run time; and
//! the indexes that stay in dtrace with their reason (negative, past what both sides hold
//! alike, unbounded).

use super::strbuild::agree;
use super::*;

/// The reason the clause predicate `(expr) + 1000` stays in dtrace at D's `strsize`.
fn refused(expr: &str, strsize: usize) -> String {
    let src = format!(
        "#pragma D option strsize={strsize}\n{}",
        clause(&format!("({expr}) + 1000"))
    );
    translate(&predicate(&src), &string_probe(), strsize + 1, FRAME)
        .expect_err(expr)
        .to_string()
}

/// A probe whose `execname` and arguments the cases read ("hello" at `arg1`).
fn probe() -> Probe {
    let mut p = string_probe();
    p.execname = b"abcdefghijklmno".to_vec();
    p.args[0] = 3;
    p
}

#[test]
fn a_constant_index_of_each_source_reads_the_interpreters_byte() {
    let p = probe();
    for strsize in [256usize, 8, 3] {
        for expr in [
            "execname[0]",
            "\"hello\"[0]",
            "\"hello\"[4]",
            "\"hello\"[5]",
            "\"\"[0]",
            "probefunc[0]",
            "probefunc[4]",
            "probefunc[5]",
            "probename[0]",
            "copyinstr(arg1)[0]",
            "copyinstr(arg1)[1]",
            "copyinstr(arg1)[4]",
            "copyinstr(arg1)[5]",
            "copyinstr(arg1)[2] == 'l'",
            "copyinstr(arg1, 8)[4]",
            "copyinstr(arg1, 8)[7]",
            "copyinstr(arg1, 3)[1]",
            "copyinstr(arg1, 3)[2]",
            "copyinstr(arg1, 1)[0]",
            "copyinstr(arg1, 0)[0]",
            "copyinstr(arg4)[0]",
            "copyinstr(arg5)[0]",
            "strjoin(\"ab\", \"cd\")[0]",
            "strjoin(\"\", \"\")[0]",
            "lltostr(arg0)[0]",
            "substr(\"hello\", 1)[0]",
            "substr(\"hello\", 1)[3]",
            "substr(\"hello\", 1)[4]",
            "substr(copyinstr(arg1), 2)[1]",
            "toupper(copyinstr(arg1))[1]",
            "tolower(\"HeLLo\")[2]",
            "basename(\"/usr/lib/x\")[0]",
            "dirname(\"/usr/lib/x\")[3]",
            "cleanpath(\"/a/./b\")[2]",
            "strtok(copyinstr(arg1), \"l\")[1]",
            "strtok(copyinstr(arg1), \"hel\")[0]",
        ] {
            // Every one at D's default strsize; at one that cuts the string, an index past
            // what is left stays in dtrace.
            if strsize == 256 || translates(expr, strsize) {
                agree(expr, &p, strsize);
            } else {
                assert!(refused(expr, strsize).contains("past the"), "{expr}");
            }
        }
    }
}

/// Whether the clause predicate `(expr) + 1000` runs at the probe at D's `strsize`.
fn translates(expr: &str, strsize: usize) -> bool {
    let src = format!(
        "#pragma D option strsize={strsize}\n{}",
        clause(&format!("({expr}) + 1000"))
    );
    translate(&predicate(&src), &string_probe(), strsize + 1, FRAME).is_ok()
}

#[test]
fn an_index_past_the_nul_within_the_storage_reads_its_zeros() {
    let p = probe();
    for (expr, strsize) in [
        ("copyinstr(arg1)[6]", 256),
        ("copyinstr(arg1)[255]", 256),
        ("copyinstr(arg1)[7]", 8),
        ("copyinstr(arg1, 96)[11]", 12),
        ("copyinstr(arg2, 32)[31]", 256),
        ("substr(\"hello\", 1)[200]", 256),
        ("substr(\"hello\", 1)[256]", 256),
        ("toupper(copyinstr(arg1))[100]", 256),
        ("basename(\"/a/b\")[9]", 16),
        ("strtok(copyinstr(arg1), \"l\")[255]", 256),
    ] {
        assert_eq!(agree(expr, &p, strsize), Some(0), "{expr}");
    }
    // The interpreter's byte where the two hold the string's last characters.
    assert_eq!(
        agree("copyinstr(arg1, 96)[4] == 'o'", &probe(), 12),
        Some(1)
    );
}

#[test]
fn a_bounded_index_computed_at_run_time_reads_the_interpreters_byte() {
    let mut p = probe();
    for a0 in [0u64, 1, 3, 5, 6, 7, 0xff, u64::MAX] {
        p.args[0] = a0;
        for expr in [
            "copyinstr(arg1)[arg0 & 7]",
            "copyinstr(arg1, 8)[arg0 & 7]",
            "copyinstr(arg1)[arg0 & 0x7f]",
            "\"hello\"[arg0 & 3]",
            "\"hello\"[arg0 & 5]",
            "probefunc[arg0 & 3]",
            "substr(copyinstr(arg1), 1)[arg0 & 0xff]",
            "(unsigned char)copyinstr(arg1)[arg0 & 1]",
            "execname[arg0 & 0]",
            "lltostr(arg0)[arg0 & 0]",
        ] {
            agree(expr, &p, 256);
        }
    }
}

#[test]
fn an_index_outside_what_both_hold_alike_stays_in_dtrace_with_its_reason() {
    for (expr, strsize, why) in [
        ("execname[1]", 256, "past the 1 bytes"),
        ("execname[-1]", 256, "before the string"),
        ("copyinstr(arg1, 8)[8]", 256, "past the 8 bytes"),
        ("copyinstr(arg1)[8]", 8, "past the 8 bytes"),
        ("copyinstr(arg1)[-2]", 256, "index -2"),
        ("strjoin(\"a\", \"b\")[1]", 256, "past the 1 bytes"),
        ("lltostr(arg0)[1]", 256, "past the 1 bytes"),
        ("\"hello\"[6]", 256, "past the 6 bytes"),
        ("copyinstr(arg1)[arg0]", 256, "computed at run time"),
        ("copyinstr(arg1, arg2)[1]", 256, "past the 1 bytes"),
        (
            "substr(\"hello\", 1)[arg0 & 0x1ff]",
            256,
            "computed at run time",
        ),
        ("\"hello\"[arg0 & 7]", 256, "computed at run time"),
    ] {
        let e = refused(expr, strsize);
        assert!(e.contains(why), "{expr}: {e}");
        assert!(e.contains("string"), "{expr}: {e}");
    }
}

/// Runs `setup`'s actions, then the predicate `(expr) + 1000`, in the interpreter (one variable
/// state) and translated (one program), and checks that they agree, faults included.
fn var_case(setup: &str, expr: &str) {
    let decls = "self string p; self string q; string s; string t;";
    let src = format!(
        "{decls} syscall::write:entry {{ {setup} }} \
         syscall::write:entry /({expr}) + 1000/ {{ @ = count(); }}"
    );
    let prog = dtrace_compiler::compile(&src, &dtrace_compiler::CompileOptions::default())
        .unwrap_or_else(|e| panic!("{src}: {e:?}"));
    let p = string_probe();
    let (mut ctx, mut mem) = fake_env(&p);
    let mut state = VarState::new(VmOptions::default());
    let ctxp = StrVarProbe { p: string_probe() };
    let mut insns = StrVarProbe::prologue();
    for a in &prog.ecbs[0].actions {
        let o = a.difo.as_ref().unwrap();
        Machine::new()
            .run(o, &mut state, &mut ctx, &mut mem)
            .unwrap_or_else(|e| panic!("{setup}: {e:?}"));
        let f = translate(o, &ctxp, 257, FRAME).unwrap_or_else(|e| panic!("{setup}: {e}"));
        insns.extend(f.insns);
    }
    let obj = prog.ecbs[1].predicate.clone().unwrap();
    let want = Machine::new().run(&obj, &mut state, &mut ctx, &mut mem);
    let f = translate(&obj, &ctxp, 257, FRAME).unwrap_or_else(|e| panic!("{expr}: {e}"));
    assert_reachable(&f.insns);
    insns.extend(f.insns);
    let (r0, stack) = emulate_frame(&insns, &p);
    match want {
        Ok(v) => assert_eq!(r0, v, "{setup} / {expr}"),
        Err(fault) => {
            assert_eq!(r0, FAULTED as u64, "{setup} / {expr}");
            assert_eq!(
                frame_fault(&stack),
                Some((fault.kind.code(), fault.pc, fault.addr)),
                "{setup} / {expr}: the interpreter's fault"
            );
        }
    }
}

#[test]
fn string_variables_are_indexed_as_the_interpreter_keeps_them() {
    for setup in [
        "self->p = copyinstr(arg1);",
        "self->p = \"\";",
        "self->p = execname;",
        "self->p = \"x\"; self->p = 0;",
        "s = copyinstr(arg2);",
        "s = \"hello\"; t = s; s = 0;",
        ";",
    ] {
        for expr in [
            "self->p[0]",
            "self->p[0] == 'h'",
            "s[0]",
            "t[0]",
            "self->q[0]",
        ] {
            var_case(setup, expr);
        }
    }
}

#[test]
fn a_null_string_variable_indexed_faults_at_the_index() {
    // NULL plus the index is the address the interpreter reads: a fault there.
    var_case(";", "self->p[0]");
    var_case(";", "self->q[0] == 'h'");
    var_case("self->p = \"x\"; self->p = 0;", "self->p[0]");
}
