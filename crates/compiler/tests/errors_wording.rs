//! Golden errors in DTrace's own words (dt_printf.c, dt_cc.c, dt_decl.c, dt_lex.l): `printa()`
//! formats checked against the aggregation's keys and value, dynamic width and precision
//! arguments, macro arguments, stack/tracemem arguments, declaration attributes, and the lines
//! multi-line expressions are reported on.

use dtrace_compiler::{compile, CompileError, CompileOptions, ErrTag};

fn e_with(src: &str, o: &CompileOptions) -> CompileError {
    match compile(src, o) {
        Ok(_) => panic!("compiled: {src}"),
        Err(e) => e,
    }
}

fn golden(src: &str, tag: ErrTag, msg: &str) {
    let err = e_with(src, &CompileOptions::default());
    assert_eq!(err.tag, tag, "{src}: {err}");
    assert_eq!(err.file_message(false), msg, "{src}");
}

fn ok(src: &str) {
    compile(src, &CompileOptions::default()).unwrap_or_else(|e| panic!("{src}: {e}"));
}

#[test]
fn printa_key_conversions_follow_the_keys() {
    let agg = "BEGIN { @a[1, \"x\"] = count(); @s[\"y\"] = sum(3); @q[2] = quantize(5); }\n";
    ok(&format!("{agg}END {{ printa(\"%d %s %@u\\n\", @a); }}"));
    ok(&format!("{agg}END {{ printa(\"%x %-10s %@8d\\n\", @a); }}"));
    ok(&format!("{agg}END {{ printa(\"%d %@d\\n\", @q); }}"));
    // keys in order: the first is an int, so %s does not fit it
    golden(
        &format!("{agg}END {{ printa(\"%s %s %@d\\n\", @a); }}"),
        ErrTag::D_PRINTF_ARG_TYPE,
        "line 2: printa( ) argument #2 is incompatible with conversion #1 prototype:\n\tconversion: %s\n\t prototype: char [] or string (or use stringof)\n\t  argument: int",
    );
    golden(
        &format!("{agg}END {{ printa(\"%d %d\\n\", @a); }}"),
        ErrTag::D_PRINTF_ARG_TYPE,
        "line 2: printa( ) argument #3 is incompatible with conversion #2 prototype:\n\tconversion: %d\n\t prototype: char, short, int, long, or long long\n\t  argument: string",
    );
    // more key conversions than keys
    golden(
        &format!("{agg}END {{ printa(\"%s %d %@d\\n\", @s); }}"),
        ErrTag::D_PRINTF_ARG_PROTO,
        "line 2: printa( ) prototype mismatch: conversion #2 (%d) is missing a corresponding value argument",
    );
    // the value: uint64_t for count(), int64_t for the others
    golden(
        &format!("{agg}END {{ printa(\"%d %s %@s\\n\", @a); }}"),
        ErrTag::D_PRINTF_ARG_TYPE,
        "line 2: printa( ) aggregating action is incompatible with conversion #3 prototype:\n\tconversion: %s\n\t prototype: char [] or string (or use stringof)\n\t  argument: uint64_t",
    );
    golden(
        &format!("{agg}END {{ printa(\"%s %@s\\n\", @s); }}"),
        ErrTag::D_PRINTF_ARG_TYPE,
        "line 2: printa( ) aggregating action is incompatible with conversion #2 prototype:\n\tconversion: %s\n\t prototype: char [] or string (or use stringof)\n\t  argument: int64_t",
    );
    // record keys (stack(), sym()...) are not type-checked
    ok("BEGIN { @k[stack()] = count(); } END { printa(\"%k %@d\\n\", @k); }");
}

#[test]
fn dynamic_width_and_precision_arguments() {
    ok("BEGIN { printf(\"%*d %.*s\\n\", 5, 1, 3, \"abc\"); }");
    golden(
        "BEGIN { printf(\"%*d\\n\"); }",
        ErrTag::D_PRINTF_DYN_PROTO,
        "line 1: printf( ) prototype mismatch: conversion #1 (%d) is missing a corresponding \"*\" argument",
    );
    golden(
        "BEGIN { printf(\"%*d\\n\", \"w\", 1); }",
        ErrTag::D_PRINTF_DYN_TYPE,
        "line 1: printf( ) argument #2 is incompatible with conversion #1 prototype:\n\tconversion: % * d\n\t prototype: int\n\t  argument: string",
    );
    golden(
        "BEGIN { @a[\"k\"] = count(); } END { printa(\"%*s %@d\\n\", @a); }",
        ErrTag::D_PRINTF_DYN_TYPE,
        "line 1: printa( ) argument #2 is incompatible with conversion #1 prototype:\n\tconversion: % * s\n\t prototype: int\n\t  argument: string",
    );
}

#[test]
fn macro_arguments_that_overflow_or_are_missing() {
    let o = CompileOptions {
        args: vec!["x.d".into(), "99999999999999999999".into()],
        ..Default::default()
    };
    let err = e_with("BEGIN { trace($1); }", &o);
    assert_eq!(err.tag, ErrTag::D_MACRO_OFLOW);
    assert_eq!(
        err.message,
        "macro argument $1 constant 99999999999999999999 results in integer overflow"
    );
    let o = CompileOptions {
        args: vec!["x.d".into(), "+7".into()],
        ..Default::default()
    };
    assert!(compile("BEGIN { trace($1 + 1); }", &o).is_ok());
    golden(
        "BEGIN { trace($2); }",
        ErrTag::D_MACRO_UNDEF,
        "line 1: macro argument $2 is not defined",
    );
    golden(
        "BEGIN { trace($nosuch); }",
        ErrTag::D_MACRO_UNDEF,
        "line 1: macro variable $nosuch is not defined",
    );
}

#[test]
fn stack_and_tracemem_wordings() {
    golden(
        "BEGIN { jstack(1, 2, 3); }",
        ErrTag::D_PROTO_LEN,
        "line 1: jstack( ) prototype mismatch: 3 args passed, at most 2 expected",
    );
    golden(
        "BEGIN { jstack(0); }",
        ErrTag::D_USTACK_FRAMES,
        "line 1: ustack( ) argument #1 must be a non-zero positive integer constant",
    );
    ok("BEGIN { ustack(5, 0); }");
    golden(
        "BEGIN { tracemem(arg0, 16, 8, 1); }",
        ErrTag::D_PROTO_LEN,
        "line 1: tracemem( ) prototype mismatch: 4 args passed, at most 3 expected",
    );
    golden(
        "BEGIN { tracemem(arg0, 16, \"x\"); }",
        ErrTag::D_TRACEMEM_DYNSIZE,
        "line 1: tracemem ( ) dynamic size (argument #3) must be of scalar type",
    );
    ok("BEGIN { tracemem(arg0, 16, arg1); }");
}

/// The line of an error is where DTrace's parser builds the node: once it has read the token
/// that ends it (the lookahead after an operator's right operand, a call's `)`).
#[test]
fn multi_line_expressions_report_dtraces_line() {
    let e = e_with(
        "BEGIN\n{\n\tx = \"a\" -\n\t    1;\n}\n",
        &CompileOptions::default(),
    );
    assert_eq!(e.tag, ErrTag::D_OP_INCOMPAT);
    assert_eq!(e.line, Some(4));
    let e = e_with(
        "BEGIN\n{\n\tprintf(\"%d\\n\",\n\t    \"s\"\n\t);\n}\n",
        &CompileOptions::default(),
    );
    assert_eq!(e.tag, ErrTag::D_PRINTF_ARG_TYPE);
    assert_eq!(e.line, Some(5));
    // a single-line construct keeps its line
    let e = e_with(
        "BEGIN\n{\n\ttrace(\"a\" - 1);\n}\n",
        &CompileOptions::default(),
    );
    assert_eq!(e.line, Some(3));
    // an undefined identifier is reported on its own line
    let e = e_with(
        "BEGIN\n{\n\ttrace(1 +\n\t    nosuch);\n}\n",
        &CompileOptions::default(),
    );
    assert_eq!(e.tag, ErrTag::D_IDENT_UNDEF);
    assert_eq!(e.line, Some(4));
}

#[test]
fn declaration_attribute_wordings() {
    golden(
        "long char c;",
        ErrTag::D_DECL_CHARATTR,
        "line 1: invalid type declaration: short and long may not be used with char type",
    );
    golden(
        "unsigned void *p;",
        ErrTag::D_DECL_VOIDATTR,
        "line 1: invalid type declaration: attributes may not be used with void type",
    );
    golden(
        "long string s;",
        ErrTag::D_DECL_LONGINT,
        "line 1: invalid type declaration: long and long long may only be used with integer or floating-point type",
    );
    ok("unsigned long long x; signed char c; long double d; short int s; BEGIN { x = 1; }");
}

#[test]
fn wide_character_conversions_take_wchar_t_values_and_arrays() {
    ok("BEGIN { printf(\"%lc %wc\\n\", 0x263a, 'x'); }");
    ok("int w[4]; BEGIN { printf(\"%ls %-8ws\\n\", w, w); }");
    // %lc takes an int (DTrace's pfcheck_type), not an aggregation's int64_t value
    golden(
        "BEGIN { @c[\"a\"] = sum(0x41); } END { printa(\"%s %@lc\\n\", @c); }",
        ErrTag::D_PRINTF_ARG_TYPE,
        "line 1: printa( ) aggregating action is incompatible with conversion #2 prototype:\n\tconversion: %lc\n\t prototype: int\n\t  argument: int64_t",
    );
    golden(
        "BEGIN { printf(\"%ls\\n\", \"abc\"); }",
        ErrTag::D_PRINTF_ARG_TYPE,
        "line 1: printf( ) argument #2 is incompatible with conversion #1 prototype:\n\tconversion: %ls\n\t prototype: wchar_t []\n\t  argument: string",
    );
    golden(
        "char c[4]; BEGIN { printf(\"%ws\\n\", c); }",
        ErrTag::D_PRINTF_ARG_TYPE,
        "line 1: printf( ) argument #2 is incompatible with conversion #1 prototype:\n\tconversion: %ws\n\t prototype: wchar_t []\n\t  argument: char [4]",
    );
    golden(
        "BEGIN { printf(\"%lc\\n\", \"a\"); }",
        ErrTag::D_PRINTF_ARG_TYPE,
        "line 1: printf( ) argument #2 is incompatible with conversion #1 prototype:\n\tconversion: %lc\n\t prototype: int\n\t  argument: string",
    );
    golden(
        "BEGIN { @c = count(); } END { printa(\"%@ls\\n\", @c); }",
        ErrTag::D_PRINTF_ARG_TYPE,
        "line 1: printa( ) aggregating action is incompatible with conversion #1 prototype:\n\tconversion: %ls\n\t prototype: wchar_t []\n\t  argument: uint64_t",
    );
}
