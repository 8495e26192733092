//! A short deterministic fuzz smoke over the compiler's entry point: mutations of real scripts and
//! hostile shapes (deep nesting, long chains) must yield a program or an error, never a panic or hang.

use dtrace_compiler::{compile, CompileOptions, SourceKind};

const SEEDS: &[&str] = &[
    "syscall::read:entry /execname == \"ls\" && arg0 > 2/ { self->t = timestamp; @a[probefunc, pid] = count(); printf(\"%s %d\\n\", execname, arg2); }",
    "struct s { int a; char b[4]; }; BEGIN { trace(((struct s *)arg0)->b[1]); x[1, \"a\"] = strjoin(\"a\", \"b\"); }",
    "#pragma D option quiet\ninline int N = 3;\nenum e { A, B = 4 };\nBEGIN { @q = lquantize(arg0, 0, 100, N); printa(\"%@d\", @q); exit(0); }",
    "profile-97 { @[stack(), ustack(3)] = count(); trunc(@, 5); normalize(@, 2); }",
    "BEGIN { s = speculation(); speculate(s); trace(sizeof (int) + offsetof(struct x, y)); } END { commit(s); }",
    "typedef unsigned long u_t; self u_t v[string]; BEGIN { self->v[\"a\"]++; trace(self->v[\"a\"] ? 1 : 2); }",
];

use dtrace_testkit::XorShift as Rng;

const TOKENS: &[&str] = &[
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "/",
    "*",
    ";",
    ",",
    "->",
    "@a",
    "$1",
    "$$2",
    "self->",
    "this->",
    "\"",
    "'",
    "`",
    "struct",
    "int",
    "sizeof",
    "++",
    "=",
    "?",
    ":",
    "#pragma D option ",
    "\n",
    "0x",
    "@",
    "printf(\"%d\", ",
    "count()",
    "xlate<int>(",
    "if (",
    "else",
    "typedef ",
    "inline ",
    "::",
    "struct s { int a:3; int b; };",
    "translator struct s < int x > { a = x; b = x + 1; };",
    "xlate<struct s *>(",
    "xlate<struct s>(",
    ".a",
    "1.5",
    "printa(\"%s %@d\", @a)",
];

fn try_compile(src: &str) {
    let mut o = CompileOptions {
        args: vec!["f.d".into(), "1".into()],
        default_args: true,
        ..Default::default()
    };
    if let Ok(p) = compile(src, &o) {
        let _ = dtrace_compiler::listing(&p);
        verify_all(&p, src);
    }
    o.source = SourceKind::String;
    let _ = compile(src, &o);
}

/// Every object of a program that compiles passes the verifier.
fn verify_all(p: &dtrace_dif::Program, src: &str) {
    for ecb in &p.ecbs {
        for o in ecb
            .predicate
            .iter()
            .chain(ecb.actions.iter().filter_map(|a| a.difo.as_ref()))
        {
            if let Err(e) = dtrace_dif::verify::verify(o) {
                panic!("{src:?}: {e}");
            }
        }
    }
}

#[test]
fn mutations_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..4000 {
        let seed = SEEDS[i % SEEDS.len()];
        let mut b = seed.as_bytes().to_vec();
        let n = 1 + rng.next() % 6;
        for _ in 0..n {
            let pos = (rng.next() as usize) % (b.len() + 1);
            match rng.next() % 4 {
                0 if !b.is_empty() => {
                    let end = (pos + 1 + (rng.next() as usize) % 8).min(b.len());
                    b.drain(pos.min(b.len())..end);
                }
                1 => {
                    let t = TOKENS[(rng.next() as usize) % TOKENS.len()];
                    b.splice(pos..pos, t.bytes());
                }
                2 if !b.is_empty() => {
                    let p = pos.min(b.len() - 1);
                    b[p] = (rng.next() & 0xff) as u8;
                }
                _ => {
                    let from = (rng.next() as usize) % b.len().max(1);
                    let len = ((rng.next() as usize) % 16).min(b.len().saturating_sub(from));
                    let piece = b[from..from + len].to_vec();
                    b.splice(pos..pos, piece);
                }
            }
        }
        try_compile(&String::from_utf8_lossy(&b));
    }
}

#[test]
fn hostile_shapes_are_bounded() {
    let deep_parens = format!("BEGIN {{ x = {}1{}; }}", "(".repeat(5000), ")".repeat(5000));
    assert!(compile(&deep_parens, &CompileOptions::default()).is_err());
    let long_chain = format!("BEGIN {{ x = 1{}; }}", " + arg0".repeat(20000));
    assert!(compile(&long_chain, &CompileOptions::default()).is_err());
    let unary = format!("BEGIN {{ x = {}arg0; }}", "-".repeat(10000));
    assert!(compile(&unary, &CompileOptions::default()).is_err());
    let members = format!("BEGIN {{ x = a{}; }}", ".b".repeat(10000));
    assert!(compile(&members, &CompileOptions::default()).is_err());
    let ifs = format!("BEGIN {{ {} }}", "if (1) {".repeat(5000));
    assert!(compile(&ifs, &CompileOptions::default()).is_err());
    let decl = format!("int {}x;", "*".repeat(10000));
    let _ = compile(&decl, &CompileOptions::default());
    let decl2 = format!("int {}x{};", "(".repeat(5000), ")".repeat(5000));
    assert!(compile(&decl2, &CompileOptions::default()).is_err());
    // near the limits, still compiles
    let ok = format!(
        "BEGIN {{ trace({}arg0{}); }}",
        "(".repeat(40),
        ")".repeat(40)
    );
    assert!(compile(&ok, &CompileOptions::default()).is_ok());
    let chain = format!("BEGIN {{ trace(1{}); }}", " + arg0".repeat(60));
    assert!(compile(&chain, &CompileOptions::default()).is_ok());
    // inline growth is bounded
    let mut s = String::from("inline int a0 = arg0;\n");
    for i in 1..40 {
        s.push_str(&format!("inline int a{i} = a{} + a{};\n", i - 1, i - 1));
    }
    s.push_str("BEGIN { trace(a39); }");
    assert!(compile(&s, &CompileOptions::default()).is_err());
    // many clauses and variables compile in linear time
    let mut big = String::new();
    for i in 0..3000 {
        big.push_str(&format!("BEGIN /v{i} == 0/ {{ v{i} = {i}; }}\n"));
    }
    let _ = compile(&big, &CompileOptions::default());
}
