//! `toupper()`, `tolower()`, `basename()`, `dirname()`, `cleanpath()` and `lltostr()` with a
//! base computed at run time, at the probe, checked against the interpreter: the strings they
//! build are measured, compared with the interpreter's and with the string DTrace's rules give,
//! nested in each other, at D's default `strsize` and at sizes that cut them.

use super::strbuild::{agree, builds};
use super::*;
use dtrace_dif::vm::subr::strfn;

/// Paths with the border cases of the rules: trailing slashes, slashes only, no slash, empty,
/// `.` and `..` components, `//`, names that only begin with dots.
const PATHS: &[&str] = &[
    "/usr/bin/ls",
    "/usr/bin/",
    "ls",
    "",
    "/",
    "///",
    "/ls",
    "a//b//",
    "//a",
    "/a/b/../c",
    "/a//b/./c",
    "/a/b/..",
    "/..",
    "/../..",
    "/a/.b/..c",
    "a/b",
    "/foo/bar/../../baz",
    "../x/./y/",
    "/a/b/c/../../../../d",
    ".",
    "..",
    "/./",
    "x/..",
    "/a/./../b//.//c/.",
    "/abc/def/ghi/jkl/mno/pqr/../stu",
    "MiXeD/Case-09_/",
];

/// A probe whose `arg1` points at user string `s`.
fn path_probe(s: &str) -> Probe {
    let mut p = Probe::new();
    let mut page = s.as_bytes().to_vec();
    page.push(0);
    page.resize(4096, b'x');
    p.user = vec![(0x7fff_0000_1000, page)];
    p.args[1] = 0x7fff_0000_1000;
    p.execname = b"Dd-Writer_9".to_vec();
    p
}

fn text(v: Vec<u8>) -> String {
    String::from_utf8(v).expect("ASCII")
}

#[test]
fn paths_build_the_interpreters_strings() {
    for &path in PATHS {
        let p = path_probe(path);
        let b = path.as_bytes();
        let base = text(strfn::base_or_dir(b, false, 255));
        let dir = text(strfn::base_or_dir(b, true, 255));
        let clean = text(strfn::cleanpath(b, 256));
        for strsize in [256usize, 16, 6, 5, 4, 2, 1] {
            for (s, want) in [
                ("basename(copyinstr(arg1))", base.clone()),
                ("dirname(copyinstr(arg1))", dir.clone()),
                ("cleanpath(copyinstr(arg1))", clean.clone()),
                ("toupper(copyinstr(arg1))", path.to_ascii_uppercase()),
                ("tolower(copyinstr(arg1))", path.to_ascii_lowercase()),
                (
                    r#"strjoin(basename(copyinstr(arg1)), "!")"#,
                    format!("{base}!"),
                ),
            ] {
                builds(s, &want, &p, strsize);
            }
        }
    }
}

#[test]
fn strings_are_rewritten_alike_looped_and_unrolled() {
    // `basename()`, `dirname()`, `toupper()` and `tolower()` of a copied string go over it
    // with `bpf_loop` where the probe may loop, unrolled elsewhere: the same strings either way.
    for &path in PATHS {
        let mut p = path_probe(path);
        let b = path.as_bytes();
        let base = text(strfn::base_or_dir(b, false, 255));
        let dir = text(strfn::base_or_dir(b, true, 255));
        for no_loops in [None, Some("no bpf_loop in this test")] {
            p.no_loops = no_loops;
            for strsize in [256usize, 40, 5] {
                builds("basename(copyinstr(arg1))", &base, &p, strsize);
                builds("dirname(copyinstr(arg1))", &dir, &p, strsize);
                let upper = path.to_ascii_uppercase();
                builds("toupper(copyinstr(arg1))", &upper, &p, strsize);
                let lower = path.to_ascii_lowercase();
                builds("tolower(copyinstr(arg1))", &lower, &p, strsize);
            }
        }
    }
}

#[test]
fn the_rules_give_dtraces_paths() {
    let p = path_probe("/usr//lib/./x/../libc.so.6/");
    for (s, want) in [
        ("basename(copyinstr(arg1))", "libc.so.6"),
        ("dirname(copyinstr(arg1))", "/usr//lib/./x/.."),
        ("cleanpath(copyinstr(arg1))", "/usr/lib/libc.so.6/"),
        ("basename(dirname(cleanpath(copyinstr(arg1))))", "lib"),
        ("toupper(basename(copyinstr(arg1)))", "LIBC.SO.6"),
        (r#"basename("/usr/lib/")"#, "lib"),
        (r#"dirname("/usr/lib/")"#, "/usr"),
        (r#"dirname("usr")"#, "."),
        (r#"basename("")"#, "."),
        (r#"dirname("///")"#, "/"),
        (r#"cleanpath("/a/../../b")"#, "/b"),
        ("toupper(execname)", "DD-WRITER_9"),
        ("tolower(execname)", "dd-writer_9"),
        (r#"tolower("MiXeD 09 @[`{")"#, "mixed 09 @[`{"),
        (r#"toupper("MiXeD 09 @[`{")"#, "MIXED 09 @[`{"),
        ("dirname(probefunc)", "."),
        ("basename(probefunc)", "write"),
    ] {
        builds(s, want, &p, 256);
    }
}

#[test]
fn an_unreadable_path_faults_as_the_interpreter() {
    let mut p = path_probe("/x");
    p.args[5] = 0x7fff_0000_5000;
    for s in ["basename", "dirname", "cleanpath", "toupper", "tolower"] {
        assert_eq!(
            agree(&format!("strlen({s}(copyinstr(arg5)))"), &p, 256),
            None
        );
    }
}

#[test]
fn lltostr_with_a_base_computed_at_run_time() {
    let values: [i64; 6] = [0, 255, -123, i64::MIN, -1, 35];
    let bases: [u64; 12] = [2, 8, 10, 16, 36, 7, 0, 1, 37, u64::MAX, 1 << 32 | 10, 11];
    for strsize in [256usize, 5] {
        for &v in &values {
            for &b in &bases {
                let mut p = Probe::new();
                p.args[1] = v as u64;
                p.args[2] = b;
                let expr = "lltostr(arg1, arg2)";
                // The base is an `int`: the compiler converts it (1 << 32 | 10 is 10).
                match strfn::lltostr(v, b as i32 as i64 as u64) {
                    Some(want) => builds(expr, &text(want), &p, strsize),
                    // A base outside 2 to 36 faults both ways, where and as the interpreter.
                    None => assert_eq!(agree(&format!("strlen({expr})"), &p, strsize), None),
                }
                // The base as an expression of a constant.
                p.args[2] = 0;
                if let Some(want) = strfn::lltostr(v, b) {
                    if b < 1 << 20 {
                        builds(
                            &format!("lltostr(arg1, arg2 + {b})"),
                            &text(want),
                            &p,
                            strsize,
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn lltostr_with_a_constant_bad_base_faults_at_the_probe() {
    let p = Probe::new();
    for expr in ["lltostr(arg0, 37)", "lltostr(arg0, 1)", "lltostr(arg0, 0)"] {
        assert_eq!(agree(&format!("strlen({expr})"), &p, 256), None, "{expr}");
    }
}

#[test]
fn string_variables_are_rewritten_and_null_faults() {
    for setup in [
        "self->p = copyinstr(arg1);",
        "s = \"/a/./b//\"; self->p = s;",
    ] {
        for pred in [
            "toupper(self->p) == \"HELLO\"",
            "tolower(toupper(self->p)) == self->p",
            "basename(self->p) == \"b\"",
            "dirname(self->p) == \"/a/.\"",
            "cleanpath(self->p) == \"/a/b/\"",
            "strlen(cleanpath(s)) == 6",
        ] {
            strvar_case(setup, pred);
        }
    }
    // A variable holding no string: the interpreter's fault, at the subroutine's call.
    let ctxp = StrVarProbe { p: string_probe() };
    for f in ["toupper", "tolower", "basename", "dirname", "cleanpath"] {
        let src = format!("self string p; syscall::write:entry /{f}(self->p) == \"\"/ {{ }}");
        let prog = dtrace_compiler::compile(&src, &dtrace_compiler::CompileOptions::default())
            .unwrap_or_else(|e| panic!("{src}: {e:?}"));
        let obj = prog.ecbs[0].predicate.clone().unwrap();
        let p = string_probe();
        let (mut ctx, mut mem) = fake_env(&p);
        let mut state = VarState::new(VmOptions::default());
        let want = Machine::new()
            .run(&obj, &mut state, &mut ctx, &mut mem)
            .expect_err("NULL faults");
        let t = translate(&obj, &ctxp, 257, FRAME).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert_reachable(&t.insns);
        let mut insns = StrVarProbe::prologue();
        insns.extend(t.insns);
        let (r0, stack) = emulate_frame(&insns, &ctxp.p);
        assert_eq!(r0, FAULTED as u64, "{f}");
        assert_eq!(
            frame_fault(&stack),
            Some((want.kind.code(), want.pc, want.addr)),
            "{f}"
        );
    }
}
