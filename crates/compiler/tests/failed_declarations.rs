//! A compilation that fails leaves none of its declarations behind on the shared state: the same
//! program compiled again (as the consumer does once the kernel's types are loaded) reports its
//! own error, not its struct, typedef, enum or inline as redeclared; the corrected program
//! compiles; what earlier successful programs declared stays.

use dtrace_compiler::{compile_shared, CompileOptions, SharedState};

fn comp(src: &str, st: &mut SharedState) -> Result<(), String> {
    compile_shared(src, &CompileOptions::default(), Vec::new(), None, st)
        .map(|_| ())
        .map_err(|e| e.string_message(false))
}

#[test]
fn a_failed_program_fails_again_with_its_own_error() {
    let mut st = SharedState::new();
    comp("struct kept { int k; }; typedef int kept_t;", &mut st).expect("declarations");
    let decls = "struct s { int x; }; typedef long len_t; enum color { RED, GREEN };
        inline int N = 3; translator struct s < int i > { x = i; }; struct s g;\n";
    let bad = format!("{decls}BEGIN {{ this->p = &g; }}");
    let first = comp(&bad, &mut st).expect_err("address of a D variable");
    assert!(
        first.contains("cannot take address of dynamic variable"),
        "{first}"
    );
    let again = comp(&bad, &mut st).expect_err("the same error");
    assert_eq!(again, first);
    let undefined = comp(&format!("{decls}BEGIN {{ x = nosuch; }}"), &mut st).unwrap_err();
    assert!(
        undefined.contains("failed to resolve nosuch: Unknown variable name"),
        "{undefined}"
    );
    // nothing of the failed programs is known ...
    let e = comp("BEGIN { trace((len_t)1); }", &mut st).unwrap_err();
    assert!(!e.contains("redeclared"), "{e}");
    let e = comp("BEGIN { trace(N); }", &mut st).unwrap_err();
    assert!(e.contains("failed to resolve N"), "{e}");
    // ... and the corrected program compiles, its declarations then kept
    comp(
        &format!("{decls}BEGIN {{ g.x = RED + N; trace((len_t)g.x); }}"),
        &mut st,
    )
    .expect("the corrected program");
    comp(
        "BEGIN { trace(sizeof (struct s) + sizeof (len_t) + GREEN + N); trace(xlate<struct s>(1).x); }",
        &mut st,
    )
    .expect("its declarations are kept");
    let e = comp("struct s { int y; };", &mut st).unwrap_err();
    assert!(e.contains("redeclared"), "{e}");
    // and those of the first program all along
    comp(
        "BEGIN { trace(sizeof (struct kept) + sizeof (kept_t)); }",
        &mut st,
    )
    .expect("earlier declarations stay");
}
