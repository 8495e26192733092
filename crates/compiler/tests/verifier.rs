//! Every DIF object the compiler emits passes the `dif` crate's load-time verifier.

use dtrace_compiler::{compile, CompileOptions};
use dtrace_dif::verify::verify;

fn verify_program(name: &str, src: &str) -> usize {
    let o = CompileOptions {
        destructive: true,
        macros: vec![("target".into(), "1".into())],
        ..Default::default()
    };
    let p = compile(src, &o).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut n = 0;
    for ecb in &p.ecbs {
        let objs = ecb
            .predicate
            .iter()
            .chain(ecb.actions.iter().filter_map(|a| a.difo.as_ref()));
        for obj in objs {
            if let Err(e) = verify(obj) {
                panic!(
                    "{name}: {e}\n{}",
                    dtrace_dif::disasm::disassemble(obj, "rejected")
                );
            }
            n += 1;
        }
    }
    n
}

#[test]
fn scripts_pass_the_verifier() {
    let mut n = 0;
    for (name, src) in [
        ("opens.d", include_str!("scripts/opens.d")),
        ("latency.d", include_str!("scripts/latency.d")),
        ("speculation.d", include_str!("scripts/speculation.d")),
        ("types.d", include_str!("scripts/types.d")),
        ("actions.d", include_str!("scripts/actions.d")),
    ] {
        n += verify_program(name, src);
    }
    assert!(n > 100, "{n} objects");
}

#[test]
fn expressions_pass_the_verifier() {
    let exprs = [
        "1 + 2 * arg0 - arg1 / 3 % 5",
        "arg0 << 2 | arg1 >> 1 ^ ~arg2 & 7",
        "arg0 && arg1 || !arg2 ^^ arg3",
        "arg0 > 1 ? arg1 : arg2 < 3 ? 4 : 5",
        "execname == \"sh\" ? \"a\" : probefunc",
        "(char)arg0 + (short)arg1 + (unsigned int)arg2 + (long)arg3",
        "strlen(strjoin(execname, probefunc)) + strlen(copyinstr(arg0, 8))",
        "self->x++ + this->y-- + g++",
        "a[arg0, execname] = b[probefunc] = 3",
        "((struct s *)arg0)->c[2] + ((struct s *)arg0)->n->a",
        "args[0] + args[1] + regs[2]",
        "htonl(ntohs(arg0)) + progenyof(pid) + rand()",
    ];
    for (i, e) in exprs.iter().enumerate() {
        let src = format!(
            "struct s {{ int a; char c[4]; struct s *n; }};\nBEGIN {{ self->x = 1; this->y = 2; g = 3; b[\"k\"] = 1; }}\nsyscall::read:entry /arg0/ {{ trace({e}); }}"
        );
        verify_program(&format!("expr #{i}"), &src);
    }
}
