//! Golden tests of the tags and texts DTrace for Linux gives where illumos differs, and of the
//! lines its lexer and parser report: llquantize()/lquantize() parameter checks, printf format
//! syntax, prototype arity, tracing functions named inside expressions, line numbers.

use dtrace_compiler::{compile, CompileOptions, ErrTag};

fn golden(src: &str, tag: ErrTag, msg: &str) {
    match compile(src, &CompileOptions::default()) {
        Ok(_) => panic!("compiled: {src}"),
        Err(err) => {
            assert_eq!(err.tag, tag, "{src}: {err}");
            assert_eq!(err.file_message(false), msg, "{src}");
        }
    }
}

fn tag(src: &str, tag: ErrTag) {
    match compile(src, &CompileOptions::default()) {
        Ok(_) => panic!("compiled: {src}"),
        Err(err) => assert_eq!(err.tag, tag, "{src}: {err}"),
    }
}

#[test]
fn llquantize_parameters() {
    tag(
        "BEGIN { @ = llquantize(1, 10, arg0, 6, 20); }",
        ErrTag::D_LLQUANT_LMAGTYPE,
    );
    tag(
        "BEGIN { @ = llquantize(1, 10, 0, arg0, 20); }",
        ErrTag::D_LLQUANT_HMAGTYPE,
    );
    tag(
        "BEGIN { @ = llquantize(1, 10, -1, 6, 20); }",
        ErrTag::D_LLQUANT_LMAGVAL,
    );
    tag(
        "BEGIN { @ = llquantize(1, 10, 0, 70000, 20); }",
        ErrTag::D_LLQUANT_HMAGVAL,
    );
    // factor to the power high magnitude plus one overflows 64 bits
    tag(
        "BEGIN { @ = llquantize(1, 10, 0, 30, 20); }",
        ErrTag::D_LLQUANT_HMAGVAL,
    );
    tag(
        "BEGIN { @ = llquantize(1, 10, 0, 6, -1); }",
        ErrTag::D_LLQUANT_STEPTYPE,
    );
    tag(
        "BEGIN { @ = llquantize(1, 10, 0, 6, 70000); }",
        ErrTag::D_LLQUANT_STEPVAL,
    );
    tag(
        "BEGIN { @ = llquantize(1, 10, 0, 6, 3); }",
        ErrTag::D_LLQUANT_STEPVAL,
    );
    tag(
        "BEGIN { @ = llquantize(1, 10, 2, 6, 80); }",
        ErrTag::D_LLQUANT_STEPVAL,
    );
    tag(
        "BEGIN { @ = llquantize(1, 10, 0, 6, 30); }",
        ErrTag::D_LLQUANT_STEPVAL,
    );
    // steps above the factor divide the factor to the low magnitude plus one
    for ok in [
        "BEGIN { @ = llquantize(1, 3, 3, 5, 27); }",
        "BEGIN { @ = llquantize(1, 4, 4, 6, 32); }",
        "BEGIN { @ = llquantize(1, 10, 0, 6, 20); }",
        "BEGIN { @ = llquantize(1, 10, 2, 6, 100); }",
    ] {
        assert!(compile(ok, &CompileOptions::default()).is_ok(), "{ok}");
    }
    golden(
        "BEGIN { @ = llquantize(0, 10, 0, 6, 20); @ = llquantize(0, 10, 0, 6, 50); }",
        ErrTag::D_LLQUANT_MATCHSTEPS,
        "line 1: llquantize( ) linear steps per magnitude (argument #5) doesn't match previous declaration: expected 20, found 50",
    );
    tag(
        "BEGIN { @ = llquantize(0, 10, 0, 6, 20); @ = llquantize(0, 100, 0, 6, 20); }",
        ErrTag::D_LLQUANT_MATCHFACTOR,
    );
    tag(
        "BEGIN { @ = llquantize(0, 10, 0, 6, 20); @ = llquantize(0, 10, 1, 6, 20); }",
        ErrTag::D_LLQUANT_MATCHLMAG,
    );
    tag(
        "BEGIN { @ = llquantize(0, 10, 0, 6, 20); @ = llquantize(0, 10, 0, 5, 20); }",
        ErrTag::D_LLQUANT_MATCHHMAG,
    );
}

#[test]
fn lquantize_parameters() {
    tag(
        "BEGIN { @ = lquantize(1, 0, 1100, 0); }",
        ErrTag::D_LQUANT_STEPTYPE,
    );
    // an unsuffixed decimal constant is signed: -2147483657 is a long, below 32 bits
    tag(
        "BEGIN { @ = lquantize(1, -2147483657, 1000); }",
        ErrTag::D_LQUANT_BASEVAL,
    );
    tag(
        "BEGIN { @ = lquantize(1, 0, 100, 10); @ = lquantize(1, 5, 100, 10); }",
        ErrTag::D_LQUANT_MATCHBASE,
    );
    golden(
        "BEGIN { @ = lquantize(1, 0, 100, 10); @ = lquantize(1, 0, 200, 10); }",
        ErrTag::D_LQUANT_MATCHLIM,
        "line 1: lquantize( ) limit (argument #3) doesn't match previous declaration: expected 100, found 200",
    );
    tag(
        "BEGIN { @ = lquantize(1, 0, 100, 10); @ = lquantize(1, 0, 100, 5); }",
        ErrTag::D_LQUANT_MATCHSTEP,
    );
}

#[test]
fn printf_format_syntax() {
    golden(
        "BEGIN { printf(\"%**d\", 1, 2, 3); }",
        ErrTag::D_SYNTAX,
        "line 1: format conversion #1 has more than one '*' specified for the output width",
    );
    golden(
        "BEGIN { printf(\"%3$d\", 123); }",
        ErrTag::D_SYNTAX,
        "line 1: format conversion #1 uses unsupported positional format (%n$)",
    );
    golden(
        "BEGIN { printf(\"%Z\", 123); }",
        ErrTag::D_SYNTAX,
        "line 1: format conversion #1 is undefined: %Z",
    );
    golden(
        "BEGIN { printf(\"%.*d\"); }",
        ErrTag::D_PRINTF_DYN_PROTO,
        "line 1: printf( ) prototype mismatch: conversion #1 (%d) is missing a corresponding \".*\" argument",
    );
    golden(
        "BEGIN { printf(\"%.*d\", \"\", 1); }",
        ErrTag::D_PRINTF_DYN_TYPE,
        "line 1: printf( ) argument #2 is incompatible with conversion #1 prototype:\n\tconversion: % .* d\n\t prototype: int\n\t  argument: string",
    );
    golden(
        "BEGIN { printf(1); }",
        ErrTag::D_PROTO_ARG,
        "line 1: printf( ) argument #1 is incompatible with prototype:\n\tprototype: string\n\t argument: int",
    );
}

#[test]
fn prototype_lengths_and_keys() {
    golden(
        "BEGIN { trace(substr(\"a\", 1, 2, 3)); }",
        ErrTag::D_PROTO_LEN,
        "line 1: substr( ) prototype mismatch: 4 args passed, at most 3 expected",
    );
    golden(
        "BEGIN { setopt(\"quiet\", \"1\", \"2\"); }",
        ErrTag::D_PROTO_LEN,
        "line 1: setopt( ) prototype mismatch: 3 args passed, at most 2 expected",
    );
    golden(
        "int x[int, string]; BEGIN { x[1] = 2; }",
        ErrTag::D_PROTO_LEN,
        "line 1: x[ ] prototype mismatch: 1 key passed, 2 expected",
    );
    golden(
        "int x[int, string]; BEGIN { x[1, 2] = 2; }",
        ErrTag::D_PROTO_ARG,
        "line 1: x[ ] key #2 is incompatible with prototype:\n\tprototype: string\n\t      key: int",
    );
    golden(
        "int a[]; BEGIN { }",
        ErrTag::D_DECL_ARRNULL,
        "line 1: array declaration requires array dimension or tuple signature: a",
    );
}

#[test]
fn tracing_functions_inside_expressions() {
    golden(
        "BEGIN { trace(trace(1)); }",
        ErrTag::D_TRACE_VOID,
        "line 1: trace( ) may not be applied to a void expression",
    );
    golden(
        "BEGIN { i = 1; x = i == 0 ? trace(0) : trace(1); }",
        ErrTag::D_OP_ACT,
        "line 1: action cannot be used in a conditional context",
    );
    golden(
        "BEGIN { progenyof(trace(1)); }",
        ErrTag::D_PROTO_ARG,
        "line 1: progenyof( ) argument #1 is incompatible with prototype:\n\tprototype: pid_t\n\t argument: void",
    );
    golden(
        "BEGIN { printf(\"%s\", stringof(trace(0))); }",
        ErrTag::D_STRINGOF_TYPE,
        "line 1: cannot apply stringof to a value of type void",
    );
    tag("BEGIN { @[trace(0)] = count(); }", ErrTag::D_KEY_TYPE);
    tag(
        "BEGIN { normalize(count(), 4); }",
        ErrTag::D_NORMALIZE_AGGARG,
    );
    golden(
        "BEGIN { printf(\"%d\", printf(\"\")); }",
        ErrTag::D_PRINTF_ARG_TYPE,
        "line 1: printf( ) argument #2 is incompatible with conversion #1 prototype:\n\tconversion: %d\n\t prototype: char, short, int, long, or long long\n\t  argument: void",
    );
    // where nothing else objects, code generation refuses the call
    golden(
        "BEGIN { x = 1; x = (trace(1), 2); }",
        ErrTag::D_CG_EXPR,
        "line 1: trace( ) may not be called from a D expression (D program context required)",
    );
}

#[test]
fn inline_redefinitions_name_the_previous_kind() {
    golden(
        "inline int foo = 7;\ninline int foo = 8;",
        ErrTag::D_DECL_IDRED,
        "line 2: identifier redefined: foo\n\t current: inline definition\n\tprevious: scalar inline",
    );
    golden(
        "inline int rand = 7;",
        ErrTag::D_DECL_IDRED,
        "line 1: identifier redefined: rand\n\t current: inline definition\n\tprevious: function ",
    );
}

#[test]
fn lines_as_dtrace_counts_them() {
    // the lexer reads past the newline before it reports it
    golden(
        "BEGIN\n{\n\th = '\n\t';\n}",
        ErrTag::D_CHR_NL,
        "line 4: newline encountered in character constant",
    );
    golden(
        "BEGIN\n{\n\th = \"\n\t\";\n}",
        ErrTag::D_STR_NL,
        "line 4: newline encountered in string literal",
    );
    golden(
        "BEGIN\n{\n}\n/* open\n\n",
        ErrTag::D_SYNTAX,
        "line 6: end-of-file encountered before matching */",
    );
    // the `/` closing a predicate looks ahead to the next non-blank character, on the next line
    golden(
        "BEGIN\n/\"char\" & \"foo\"/\n{\n\texit(1);\n}",
        ErrTag::D_OP_INT,
        "line 3: operator & requires operands of integral type",
    );
}

#[test]
fn declarations() {
    golden(
        "self this int x;",
        ErrTag::D_DECL_CLASS,
        "line 1: more than one storage class specified",
    );
    golden(
        "this x; BEGIN { this->x = execname; }",
        ErrTag::D_OP_INCOMPAT,
        "line 1: operands have incompatible types: \"int\" = \"string\"",
    );
}

#[test]
fn char_pointer_prototypes() {
    golden(
        "BEGIN { trace(substr(1, 1)); }",
        ErrTag::D_PROTO_ARG,
        "line 1: substr( ) argument #1 is incompatible with prototype:\n\tprototype: char *\n\t argument: int",
    );
    golden(
        "BEGIN { trace(strtok(\"a\", 1)); }",
        ErrTag::D_PROTO_ARG,
        "line 1: strtok( ) argument #2 is incompatible with prototype:\n\tprototype: char *\n\t argument: int",
    );
    // a string is a source of bytes for bcopy, never a destination nor a lock
    assert!(compile(
        "BEGIN { a = (char *)alloca(10); bcopy(probename, a, 5); }",
        &CompileOptions::default()
    )
    .is_ok());
    tag("BEGIN { copyinto(1, 2, \"\"); }", ErrTag::D_PROTO_ARG);
    tag("BEGIN { mutex_owned(\"badarg\"); }", ErrTag::D_PROTO_ARG);
}

#[test]
fn lock_queries_refuse_locks_laid_out_unlike_linuxs() {
    // A mutex whose owner is not its first word (as under PREEMPT_RT), an rwlock that is not
    // a queued one: refused at compile time rather than answered wrong.
    tag(
        "struct mutex { long wait_lock; long owner; };
         BEGIN { trace(mutex_owned((struct mutex *)0)); }",
        ErrTag::D_NOT_SUPPORTED,
    );
    tag(
        "typedef struct { long lock; } rwlock_t;
         BEGIN { trace(rw_read_held((rwlock_t *)0)); }",
        ErrTag::D_NOT_SUPPORTED,
    );
    // Linux's usual layouts are accepted.
    for src in [
        "struct mutex { long owner; int wait_lock; };
         BEGIN { trace(mutex_owner((struct mutex *)0)); }",
        "struct qrwlock { int cnts; int wait_lock; };
         typedef struct { struct qrwlock raw_lock; } rwlock_t;
         BEGIN { trace(rw_iswriter((rwlock_t *)0)); }",
    ] {
        if let Err(e) = compile(src, &CompileOptions::default()) {
            panic!("{src}: {e}");
        }
    }
}

#[test]
fn action_prototypes_from_the_table() {
    for (src, msg) in [
        (
            "BEGIN { clear(); }",
            "clear( ) prototype mismatch: 0 args passed, 1 expected",
        ),
        (
            "BEGIN { denormalize(@a, 1); }",
            "denormalize( ) prototype mismatch: 2 args passed, 1 expected",
        ),
        (
            "BEGIN { normalize(@a, 1, 2); }",
            "normalize( ) prototype mismatch: 3 args passed, 2 expected",
        ),
        (
            "BEGIN { trunc(); }",
            "trunc( ) prototype mismatch: 0 args passed, at least 1 expected",
        ),
        (
            "BEGIN { trunc(@a, 1, 2); }",
            "trunc( ) prototype mismatch: 3 args passed, at most 2 expected",
        ),
        (
            "BEGIN { tracemem(arg0, 16, 8, 1); }",
            "tracemem( ) prototype mismatch: 4 args passed, at most 3 expected",
        ),
        (
            "BEGIN { ustack(1, 2, 3); }",
            "ustack( ) prototype mismatch: 3 args passed, at most 2 expected",
        ),
        (
            "BEGIN { @ = avg(); }",
            "avg( ) prototype mismatch: 0 args passed, 1 expected",
        ),
        (
            "BEGIN { @ = llquantize(1, 10, 0, 6); }",
            "llquantize( ) prototype mismatch: 4 args passed, at least 5 expected",
        ),
    ] {
        golden(src, ErrTag::D_PROTO_LEN, &format!("line 1: {msg}"));
    }
    golden(
        "BEGIN { stack(\"a\"); }",
        ErrTag::D_PROTO_ARG,
        "line 1: stack( ) argument #1 is incompatible with prototype:\n\tprototype: uint32_t\n\t argument: string",
    );
    golden(
        "BEGIN { @a = count(); normalize(@a, \"x\"); }",
        ErrTag::D_PROTO_ARG,
        "line 1: normalize( ) argument #2 is incompatible with prototype:\n\tprototype: uint64_t\n\t argument: string",
    );
    golden(
        "BEGIN { exit(\"a\"); }",
        ErrTag::D_PROTO_ARG,
        "line 1: exit( ) argument #1 is incompatible with prototype:\n\tprototype: int\n\t argument: string",
    );
}

#[test]
fn speculation_ordering() {
    golden(
        "BEGIN { speculate(1); copyout(\"abc\", arg0, 3); }",
        ErrTag::D_ACT_SPEC,
        "line 1: destructive actions may not follow speculate( )",
    );
    golden(
        "BEGIN { commit(1); exit(0); }",
        ErrTag::D_DREC_COMM,
        "line 1: data-recording actions may not follow commit( )",
    );
    assert!(compile(
        "BEGIN { commit(1); commit(2); commit(3); }",
        &CompileOptions::default()
    )
    .is_ok());
}

#[test]
fn d_container_scoped_types() {
    // `struct D`s` is the struct s this program declares
    assert!(compile(
        "struct s { int x; int y; }; union u { int a; char b; };
         BEGIN { trace(offsetof(struct D`s, y)); trace(offsetof(union D`u, b)); }",
        &CompileOptions::default()
    )
    .is_ok());
    golden(
        "struct s { int x; }; BEGIN { trace(offsetof(struct D`s, y)); }",
        ErrTag::D_UNKNOWN,
        "line 1: failed to determine offset of y: Member name not found",
    );
    golden(
        "BEGIN { trace(offsetof(struct no_such_type, x)); }",
        ErrTag::D_OFFSETOF_TYPE,
        "line 1: offsetof operand must be a struct or union type",
    );
    golden(
        "typedef int new_int; typedef char new_int;",
        ErrTag::D_DECL_IDRED,
        "line 1: typedef redeclared: new_int",
    );
}

#[test]
fn network_constants_of_the_library() {
    // Linux's values: <linux/socket.h>, <linux/if_arp.h>
    let p = compile(
        "BEGIN { trace(AF_INET); trace(AF_INET6); trace(ARPHRD_ETHER); trace(ARPHRD_INFINIBAND); }",
        &CompileOptions::default(),
    );
    assert!(p.is_ok(), "{p:?}");
}

#[test]
fn enumerators_and_aggregation_statements() {
    golden(
        "enum e {\n\ttoobig = 2147483648\n};",
        ErrTag::D_DECL_ENOFLOW,
        "line 3: enumerator 'toobig' value overflows INT_MAX (2147483647)",
    );
    golden(
        "enum e {\n\ttoosmall = -2147483649\n};",
        ErrTag::D_DECL_ENOFLOW,
        "line 3: enumerator 'toosmall' value overflows INT_MAX (2147483647)",
    );
    golden(
        "enum e {\n\tTAG = \"no\"\n};",
        ErrTag::D_DECL_ENCONST,
        "line 3: enumerator 'TAG' must be assigned to an integral constant expression",
    );
    assert!(compile(
        "enum e { a = -1, b = 2147483647 }; BEGIN { trace(a); trace(b); }",
        &CompileOptions::default()
    )
    .is_ok());
    golden(
        "enum foo { };",
        ErrTag::D_SYNTAX,
        "line 1: syntax error near \"}\"",
    );
    tag("BEGIN { @a = count(); @a; }", ErrTag::D_AGG_NULL);
    tag("BEGIN { @a[1]; }", ErrTag::D_AGG_NULL);
    golden(
        "BEGIN { @ = f(); }",
        ErrTag::D_FUNC_UNDEF,
        "line 1: undefined function name: f",
    );
    tag(
        "BEGIN { @a = count(); @b = max(1); @c = min(1); printa(@a, @b, @c, 1); }",
        ErrTag::D_PRINTA_AGGARG,
    );
    tag(
        "BEGIN { @a = count(); @b[1] = count(); printa(@a, @b); }",
        ErrTag::D_PRINTA_AGGKEY,
    );
}

#[test]
fn register_exhaustion_has_no_line() {
    // libdtrace's EDT_NOTUPREG: an error code, not a diagnostic of a line
    match compile(
        "BEGIN { a[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] = 1; }",
        &CompileOptions::default(),
    ) {
        Ok(_) => panic!("compiled"),
        Err(e) => assert_eq!(
            e.file_message(false),
            "Insufficient tuple registers to generate code"
        ),
    }
}

#[test]
fn struct_declarations() {
    golden(
        "struct pirate {\n\tint position;\n}\n\nstruct record rec;",
        ErrTag::D_DECL_COMBO,
        "line 5: invalid type combination",
    );
    golden(
        "struct {\n\tint trace();\n};",
        ErrTag::D_DECL_VOIDOBJ,
        "line 2: cannot have void member: trace",
    );
}

#[test]
fn constant_array_indices_are_bounded() {
    golden(
        "int a[5];\nBEGIN\n{\n\ttrace(a[5]);\n}",
        ErrTag::D_ARR_BOUNDS,
        "line 4: index outside array bounds: 5, max is 5",
    );
    tag("int a[5]; BEGIN { a[-1] = 1; }", ErrTag::D_ARR_BOUNDS);
    assert!(compile(
        "int a[5]; BEGIN { a[4] = 1; trace(a[0]); }",
        &CompileOptions::default()
    )
    .is_ok());
}

#[test]
fn pragmas() {
    golden(
        "#pragma D error \"this is an error message\"\n",
        ErrTag::D_PRAGERR,
        "line 1: #error: this is an error message ",
    );
    golden(
        "#pragma D attributes incorrect_attr\n",
        ErrTag::D_PRAGMA_MALFORM,
        "line 1: malformed #pragma attributes <attributes> <ident>",
    );
    golden(
        "#pragma D attributes incorrect_attr foo\n",
        ErrTag::D_PRAGMA_INVAL,
        "line 1: invalid attributes specified by #pragma attributes",
    );
    golden(
        "#pragma D depends_on library net.d\n",
        ErrTag::D_PRAGMA_DEPEND,
        "line 1: main program may not explicitly depend on a library",
    );
    golden(
        "#pragma D option nspec=24 * 44\n",
        ErrTag::D_PRAGMA_MALFORM,
        "line 1: superfluous arguments specified for #pragma option",
    );
    for (opt, v) in [
        ("nspec", "245566729809009887663"),
        ("nspec", "-72"),
        ("specsize", "1b"),
        ("specsize", "-40"),
    ] {
        golden(
            &format!("#pragma D option {opt}={v}\n"),
            ErrTag::D_PRAGMA_OPTSET,
            &format!(
                "line 1: failed to set option '{opt}' to '{v}': Invalid value for specified option"
            ),
        );
    }
    for ok in [
        "#pragma D attributes Evolving/Evolving/Common foo\n",
        "#pragma D option specsize=4k\n",
        "#pragma D option nspec=4\n",
        "#pragma D option scratchsize=64\n",
        "#pragma D depends_on provider sched\n",
    ] {
        let src = format!("{ok}BEGIN {{ }}");
        let r = compile(&src, &CompileOptions::default());
        assert!(r.is_ok(), "{src}: {r:?}");
    }
}

#[test]
fn translators_are_cooked_where_defined() {
    let src = "struct input_struct { int i; char c; } *ivar;
struct output_struct { int myi; char myc; };
translator struct output_struct < struct input_struct *ivar >
{
\tmyi = ((struct input_struct *)ivar)->i;
\tmyc = ((struct input_struct *)ivar)->nonexistent;
};
BEGIN { exit(0); }";
    golden(
        src,
        ErrTag::D_TYPE_MEMBER,
        "line 6: nonexistent is not a member of struct input_struct",
    );
    // checks of the translator as a whole are made at its closing `};`
    golden(
        "struct input_struct { int i; };
struct output_struct { int myi; };
translator struct output_struct < struct input_struct *ivar >
{
\tyourc = ivar->i;
};",
        ErrTag::D_XLATE_MEMB,
        "line 6: translator member yourc is not a member of struct output_struct",
    );
    golden(
        "struct input_struct { int i; };
translator int < struct input_struct *ivar >
{
};",
        ErrTag::D_XLATE_SOU,
        "line 4: translator output type must be a struct or union",
    );
}

#[test]
fn unbalanced_parentheses_and_brackets() {
    golden(
        "BEGIN\n{\n\ttrace(epid));\n}",
        ErrTag::D_SYNTAX,
        "line 3: extra ) in input stream",
    );
    golden(
        "BEGIN\n{\n\ttrace(args[0]]);\n}",
        ErrTag::D_SYNTAX,
        "line 3: extra ] in input stream",
    );
    golden(
        "BEGIN\n/rand(/\n{\n\ttrace(epid);\n}",
        ErrTag::D_SYNTAX,
        "line 3: closing ) expected in predicate before /",
    );
    golden(
        "BEGIN\n/args[0/\n{\n\ttrace(epid);\n}",
        ErrTag::D_SYNTAX,
        "line 3: closing ] expected in predicate before /",
    );
    golden(
        "inline int foo = 0;\n#pragma",
        ErrTag::D_SYNTAX,
        "line 2: end-of-file encountered before end of control line",
    );
    assert!(compile(
        "BEGIN /(arg0 / 2) > 1 && arg1 == 0/ { trace(epid); }",
        &CompileOptions::default()
    )
    .is_ok());
}

#[test]
fn aggregations_are_not_values() {
    tag(
        "BEGIN { @a = count(); trace(@a + 3); }",
        ErrTag::D_OP_INCOMPAT,
    );
    golden(
        "BEGIN { @a = count(); printf(\"hello %d %d\", 123, @a); }",
        ErrTag::D_PRINTF_ARG_TYPE,
        "line 1: printf( ) argument #3 is incompatible with conversion #2 prototype:\n\tconversion: %d\n\t prototype: char, short, int, long, or long long\n\t  argument: aggregation",
    );
    tag(
        "BEGIN { @a = count(); trunc(@a, @a); }",
        ErrTag::D_PROTO_ARG,
    );
}

#[test]
fn quantize_increments_follow_the_prototype() {
    tag(
        "BEGIN { @ = lquantize(1, 0, 10, 2, \"\"); }",
        ErrTag::D_PROTO_ARG,
    );
    tag(
        "BEGIN { @ = llquantize(1, 10, 0, 2, 20, \"\"); }",
        ErrTag::D_PROTO_ARG,
    );
}

#[test]
fn stack_keys_print_only_as_stacks() {
    golden(
        "BEGIN { @[stack()] = count(); printa(\"%p\\n\", @); }",
        ErrTag::D_PRINTF_ARG_TYPE,
        "line 1: printa( ) argument #2 is incompatible with conversion #1 prototype:\n\tconversion: %p\n\t prototype: pointer or integer\n\t  argument: stack",
    );
    tag(
        "BEGIN { @[ustack()] = count(); printa(\"%d\\n\", @); }",
        ErrTag::D_PRINTF_ARG_TYPE,
    );
    assert!(compile(
        "BEGIN { @[stack()] = count(); printa(\"%k %@d\\n\", @); }",
        &CompileOptions::default()
    )
    .is_ok());
}

#[test]
fn type_names_dtrace_for_linux_cannot_resolve() {
    golden(
        "BEGIN { i = (long short)0; }",
        ErrTag::D_UNKNOWN,
        "line 1: failed to resolve type short long : Unknown type name",
    );
    golden(
        "long struct s { int i; };",
        ErrTag::D_DECL_LONGINT,
        "line 1: invalid type declaration: long and long long may only be used with integer or floating-point type",
    );
    golden(
        "enum foo { x = 3, x = 4 };",
        ErrTag::D_UNKNOWN,
        "line 1: failed to define enumerator 'x': Duplicate member or variable name",
    );
    // a name another enum already defines is a redeclaration
    tag("enum a { RED }; enum b { RED };", ErrTag::D_DECL_IDRED);
}

#[test]
fn symbol_records_take_narrow_integers() {
    // sym(0), usym(0)...: the argument is converted to a 64-bit uintptr_t record
    let p = compile(
        "BEGIN { @a[sym(0)] = count(); @b[usym(0)] = count(); @c[func(0)] = count(); @d[umod(0)] = count(); }",
        &CompileOptions::default(),
    )
    .unwrap();
    for ecb in &p.ecbs {
        for a in &ecb.actions {
            if let Some(d) = &a.difo {
                if !a.kind.is_aggregation() {
                    assert_eq!(d.rtype.size, 8, "{:?}", a.kind);
                }
            }
        }
    }
}

#[test]
fn integer_keys_take_the_declared_key_type() {
    // @[(int32_t)1, 2] and @[(int64_t)1, 2] are one key: the second is converted to int32_t
    let p = compile(
        "BEGIN { @[(int32_t)1, 2] = count(); @[(int64_t)1, 2] = count(); }",
        &CompileOptions::default(),
    )
    .unwrap();
    let sizes: Vec<Vec<u32>> = p
        .ecbs
        .iter()
        .map(|e| {
            e.actions
                .iter()
                .filter(|a| !a.kind.is_aggregation())
                .filter_map(|a| a.difo.as_ref().map(|d| d.rtype.size))
                .collect()
        })
        .collect();
    assert_eq!(sizes[0][..2], [4, 4]);
    assert_eq!(sizes[0][2..4], [4, 4]);
}
