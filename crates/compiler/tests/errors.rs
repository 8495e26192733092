//! Golden tests: each error tag the compiler reports, with DTrace's message text and location.

use dtrace_compiler::{compile, CompileOptions, ErrTag, SourceKind};

fn e(src: &str) -> dtrace_compiler::CompileError {
    match compile(src, &CompileOptions::default()) {
        Ok(_) => panic!("compiled: {src}"),
        Err(e) => e,
    }
}

fn golden(src: &str, tag: ErrTag, msg: &str) {
    let err = e(src);
    assert_eq!(err.tag, tag, "{src}: {err}");
    assert_eq!(err.file_message(false), msg, "{src}");
}

#[test]
fn rendering_for_files_and_strings() {
    let err = e("BEGIN\n{\n\ttrace(\"a\" - 1);\n}\n");
    assert_eq!(
        err.render_script("t.d", false),
        "failed to compile script t.d: line 3: operands have incompatible types: \"string\" - \"int\""
    );
    assert_eq!(
        err.render_script("t.d", true),
        "failed to compile script t.d: [D_OP_INCOMPAT] line 3: operands have incompatible types: \"string\" - \"int\""
    );
    let opts = CompileOptions {
        source: SourceKind::String,
        ..Default::default()
    };
    let err = compile("BEGIN { trace(x) }", &opts).unwrap_err();
    assert_eq!(
        err.render_specifier("BEGIN { trace(x) }", false),
        "invalid probe specifier BEGIN { trace(x) }: in action list: failed to resolve x: Unknown variable name"
    );
    let err = compile("BEGIN /y/ { trace(1) }", &opts).unwrap_err();
    assert_eq!(
        err.string_message(false),
        "in predicate: failed to resolve y: Unknown variable name"
    );
}

#[test]
fn syntax_errors() {
    golden(
        "BEGIN { x = ; }",
        ErrTag::D_SYNTAX,
        "line 1: syntax error near \";\"",
    );
    golden(
        "BEGIN { trace(1) ",
        ErrTag::D_SYNTAX,
        "line 1: syntax error near end of input",
    );
    golden(
        "BEGIN\n",
        ErrTag::D_SYNTAX,
        "line 1: expected predicate and/or actions following probe description",
    );
    golden(
        "BEGIN { x = 1 # }",
        ErrTag::D_SYNTAX,
        "line 1: invalid character (0x23)",
    );
    golden(
        "BEGIN { x = \"abc\n\"; }",
        ErrTag::D_STR_NL,
        "line 2: newline encountered in string literal",
    );
    golden(
        "BEGIN { x = ''; }",
        ErrTag::D_CHR_NULL,
        "line 1: empty character constant",
    );
    golden(
        "BEGIN { x = 'abcdefghi'; }",
        ErrTag::D_CHR_OFLOW,
        "line 1: character constant is too long",
    );
    golden(
        "BEGIN { x = 08; }",
        ErrTag::D_INT_DIGIT,
        "line 1: constant 08 contains invalid digit 8",
    );
    golden(
        "BEGIN { x = 123456789012345678901234; }",
        ErrTag::D_INT_OFLOW,
        "line 1: constant 123456789012345678901234 results in integer overflow",
    );
    // DTrace's lexer rejects floating-point constants where it reads them
    golden(
        "BEGIN { x = 1; }\nBEGIN { y = 2.5 + 1; }",
        ErrTag::D_SYNTAX,
        "line 2: floating-point constants are not permitted",
    );
    golden(
        "BEGIN { x = 1e3; }",
        ErrTag::D_SYNTAX,
        "line 1: floating-point constants are not permitted",
    );
    golden(
        "BEGIN { x = 12abc; }",
        ErrTag::D_SYNTAX,
        "line 1: syntax error near \"abc\"",
    );
    golden(
        "a:b:c:d:e { }",
        ErrTag::D_PDESC_INVAL,
        "line 1: invalid probe description \"a:b:c:d:e\": Overspecified probe description",
    );
}

#[test]
fn identifier_errors() {
    golden(
        "BEGIN { trace(cwd); }",
        ErrTag::D_IDENT_UNDEF,
        "line 1: not yet supported: built-in variable cwd (the current directory's path needs the kernel's types (BTF))",
    );
    golden(
        "BEGIN { trace(y); }",
        ErrTag::D_IDENT_UNDEF,
        "line 1: failed to resolve y: Unknown variable name",
    );
    golden(
        "BEGIN { trace(self->y); }",
        ErrTag::D_VAR_UNDEF,
        "line 1: self->y has not yet been declared or assigned",
    );
    golden(
        "BEGIN { trace(this->y); }",
        ErrTag::D_VAR_UNDEF,
        "line 1: this->y has not yet been declared or assigned",
    );
    golden(
        "BEGIN { x = foo(1); }",
        ErrTag::D_FUNC_UNDEF,
        "line 1: undefined function name: foo",
    );
    golden(
        "BEGIN { a[1] = 1; trace(a); }",
        ErrTag::D_IDENT_BADREF,
        "line 1: array 'a' may not be referenced as scalar",
    );
    golden(
        "BEGIN { this->a[1] = 2; }",
        ErrTag::D_ARR_LOCAL,
        "line 1: local variables may not be used as associative arrays: a",
    );
    golden(
        "BEGIN { timestamp = 1; }",
        ErrTag::D_OP_WRITE,
        "line 1: operator = can only be applied to a writable variable",
    );
    golden(
        "BEGIN { 1 = 2; }",
        ErrTag::D_OP_LVAL,
        "line 1: operator = requires modifiable lvalue as an operand",
    );
    golden(
        "BEGIN { x = trace(1); }",
        ErrTag::D_CG_EXPR,
        "line 1: trace( ) may not be called from a D expression (D program context required)",
    );
}

#[test]
fn operator_errors() {
    golden(
        "BEGIN { x = \"a\" * 2; }",
        ErrTag::D_OP_ARITH,
        "line 1: operator * requires operands of arithmetic type",
    );
    golden(
        "BEGIN { x = \"a\" % 2; }",
        ErrTag::D_OP_INT,
        "line 1: operator % requires operands of integral type",
    );
    golden(
        "BEGIN { x = ~\"a\"; }",
        ErrTag::D_OP_INT,
        "line 1: operator ~ requires an operand of integral type",
    );
    golden(
        "BEGIN { x = -\"a\"; }",
        ErrTag::D_OP_ARITH,
        "line 1: operator - requires an operand of arithmetic type",
    );
    golden(
        "BEGIN { x = !\"a\"; }",
        ErrTag::D_OP_SCALAR,
        "line 1: operator ! requires an operand of scalar type",
    );
    golden(
        "BEGIN { x = \"a\" && 1; }",
        ErrTag::D_OP_SCALAR,
        "line 1: operator && requires operands of scalar type",
    );
    golden(
        "BEGIN { x = \"a\" == 1; }",
        ErrTag::D_OP_INCOMPAT,
        "line 1: operands have incompatible types: \"string\" == \"int\"",
    );
    golden(
        "BEGIN { x = 1; x = \"s\"; }",
        ErrTag::D_OP_INCOMPAT,
        "line 1: operands have incompatible types: \"int\" = \"string\"",
    );
    golden(
        "BEGIN { x = 1 / 0; }",
        ErrTag::D_DIV_ZERO,
        "line 1: expression contains division by zero",
    );
    golden(
        "BEGIN { x = *arg0; }",
        ErrTag::D_DEREF_NONPTR,
        "line 1: cannot dereference non-pointer type",
    );
    golden(
        "BEGIN { x = *(void *)arg0; }",
        ErrTag::D_DEREF_VOID,
        "line 1: cannot dereference pointer to void",
    );
    golden(
        "BEGIN { x = &arg0; }",
        ErrTag::D_ADDROF_LVAL,
        "line 1: unacceptable operand for unary & operator",
    );
    golden(
        "BEGIN { y = 1; x = &y; }",
        ErrTag::D_ADDROF_VAR,
        "line 1: cannot take address of dynamic variable",
    );
    golden(
        "BEGIN { x = (int)\"a\"; }",
        ErrTag::D_CAST_INVAL,
        "line 1: invalid cast expression: \"string\" to \"int\"",
    );
    golden(
        "BEGIN { x = arg0->foo; }",
        ErrTag::D_OP_PTR,
        "line 1: operator -> must be applied to a pointer",
    );
    golden(
        "BEGIN { x = ((int *)arg0)->foo; }",
        ErrTag::D_OP_SOU,
        "line 1: operator -> cannot be applied to pointer to type \"int\"; must be applied to a struct or union pointer",
    );
    golden(
        "struct s { int a; }; BEGIN { x = ((struct s *)arg0)->b; }",
        ErrTag::D_TYPE_MEMBER,
        "line 1: b is not a member of struct s",
    );
    golden(
        "struct s; BEGIN { x = ((struct s *)arg0)->b; }",
        ErrTag::D_OP_INCOMPLETE,
        "line 1: operator -> cannot be applied to a forward declaration: no struct s definition is available",
    );
    golden(
        "BEGIN { x = arg0 ? 1 : \"a\"; }",
        ErrTag::D_OP_INCOMPAT,
        "line 1: operator ?: operands must have compatible types",
    );
    golden(
        "BEGIN { x = \"a\" ? 1 : 2; }",
        ErrTag::D_OP_SCALAR,
        "line 1: operator ?: expression must be of scalar type",
    );
    golden("BEGIN { x = stringof(curthread->x); }", ErrTag::D_OP_SOU, "line 1: operator -> cannot be applied to pointer to type \"void\"; must be applied to a struct or union pointer");
    golden(
        "BEGIN { x = sizeof (void); }",
        ErrTag::D_SIZEOF_TYPE,
        "line 1: cannot apply sizeof to an operand of unknown size",
    );
    golden(
        "BEGIN { x = offsetof(int, a); }",
        ErrTag::D_OFFSETOF_TYPE,
        "line 1: offsetof operand must be a struct or union type",
    );
    golden(
        "BEGIN /\"x\"/ { }",
        ErrTag::D_PRED_SCALAR,
        "line 1: predicate result must be of scalar type",
    );
    golden(
        "BEGIN { self->x += 1; }",
        ErrTag::D_VAR_UNDEF,
        "line 1: self->x has not yet been declared or assigned",
    );
}

#[test]
fn prototype_errors() {
    golden("BEGIN { x = strlen(1); }", ErrTag::D_PROTO_ARG, "line 1: strlen( ) argument #1 is incompatible with prototype:\n\tprototype: string\n\t argument: int");
    golden(
        "BEGIN { x = strlen(); }",
        ErrTag::D_PROTO_LEN,
        "line 1: strlen( ) prototype mismatch: 0 args passed, 1 expected",
    );
    golden(
        "BEGIN { x = substr(\"a\"); }",
        ErrTag::D_PROTO_LEN,
        "line 1: substr( ) prototype mismatch: 1 arg passed, at least 2 expected",
    );
    golden("BEGIN { a[1] = 1; x = a[\"s\"]; }", ErrTag::D_PROTO_ARG, "line 1: a[ ] key #1 is incompatible with prototype:\n\tprototype: int\n\t      key: string");
    golden(
        "BEGIN { a[1] = 1; x = a[1, 2]; }",
        ErrTag::D_PROTO_LEN,
        "line 1: a[ ] prototype mismatch: 2 keys passed, 1 expected",
    );
    golden(
        "BEGIN { trace(); }",
        ErrTag::D_PROTO_LEN,
        "line 1: trace( ) prototype mismatch: 0 args passed, 1 expected",
    );
}

#[test]
fn action_errors() {
    golden("BEGIN { printf(\"%d\\n\"); }", ErrTag::D_PRINTF_ARG_PROTO, "line 1: printf( ) prototype mismatch: conversion #1 (%d) is missing a corresponding value argument");
    golden(
        "BEGIN { printf(\"%d\\n\", 1, 2); }",
        ErrTag::D_PRINTF_ARG_EXTRA,
        "line 1: printf( ) prototype mismatch: only 1 arguments required by this format string",
    );
    golden(
        "BEGIN { printf(\"%d\\n\", \"s\"); }",
        ErrTag::D_PRINTF_ARG_TYPE,
        "line 1: printf( ) argument #2 is incompatible with conversion #1 prototype:\n\tconversion: %d\n\t prototype: char, short, int, long, or long long\n\t  argument: string",
    );
    golden("BEGIN { printf(execname); }", ErrTag::D_PRINTF_ARG_FMT, "line 1: printf( ) argument #1 is incompatible with prototype:\n\tprototype: string constant\n\t argument: string");
    golden(
        "BEGIN { printf(\"\"); }",
        ErrTag::D_PRINTF_FMT_EMPTY,
        "line 1: printf( ) format string is empty",
    );
    golden(
        "BEGIN { printf(\"%@d\", 1); }",
        ErrTag::D_PRINTF_AGG_CONV,
        "line 1: %@ conversion requires an aggregation and is not for use with printf( )",
    );
    golden(
        "BEGIN { stack(0); }",
        ErrTag::D_STACK_SIZE,
        "line 1: stack( ) argument #1 must be a non-zero positive integer constant",
    );
    golden(
        "BEGIN { stack(1, 2); }",
        ErrTag::D_PROTO_LEN,
        "line 1: stack( ) prototype mismatch: 2 args passed, at most 1 expected",
    );
    golden(
        "BEGIN { ustack(arg0); }",
        ErrTag::D_USTACK_FRAMES,
        "line 1: ustack( ) argument #1 must be a non-zero positive integer constant",
    );
    golden(
        "BEGIN { ustack(1, arg0); }",
        ErrTag::D_USTACK_STRSIZE,
        "line 1: ustack( ) argument #2 must be a positive integer constant",
    );
    golden(
        "BEGIN { tracemem(arg0, arg1); }",
        ErrTag::D_TRACEMEM_SIZE,
        "line 1: tracemem( ) argument #2 must be a non-zero positive integral constant expression",
    );
    golden("BEGIN { tracemem(\"a\", 1); }", ErrTag::D_TRACEMEM_ADDR, "line 1: tracemem( ) argument #1 is incompatible with prototype:\n\tprototype: pointer or integer\n\t argument: string");
    golden(
        "BEGIN { trace(@a); }",
        ErrTag::D_TRACE_DYN,
        "line 1: trace( ) may not be applied to a dynamic expression",
    );
    golden(
        "BEGIN { trace(bcopy(0, 0, 0)); }",
        ErrTag::D_TRACE_VOID,
        "line 1: trace( ) may not be applied to a void expression",
    );
    golden(
        "BEGIN { print(bcopy(0, 0, 0)); }",
        ErrTag::D_PRINT_VOID,
        "line 1: print( ) may not be applied to a void expression",
    );
    golden(
        "struct i { int a; }; struct o { int b; }; translator struct o < struct i *I > { b = I->a; };\nBEGIN { print(xlate < struct o * > ((struct i *)0)); }",
        ErrTag::D_PRINT_DYN,
        "line 2: print( ) may not be applied to a translated pointer",
    );
    golden(
        "BEGIN { @a = count(); print(@a); }",
        ErrTag::D_PRINT_AGG,
        "line 1: print( ) may not be applied to an aggregation -- did you mean printa()?",
    );
    golden("BEGIN { printa(1); }", ErrTag::D_PRINTA_AGGARG, "line 1: printa( ) argument #1 is incompatible with prototype:\n\tprototype: aggregation\n\t argument: int");
    golden("BEGIN { clear(1); }", ErrTag::D_CLEAR_AGGARG, "line 1: clear( ) argument #1 is incompatible with prototype:\n\tprototype: aggregation\n\t argument: int");
    golden(
        "BEGIN { clear(); }",
        ErrTag::D_PROTO_LEN,
        "line 1: clear( ) prototype mismatch: 0 args passed, 1 expected",
    );
    golden(
        "BEGIN { @a = count(); trunc(@a, \"x\"); }",
        ErrTag::D_PROTO_ARG,
        "line 1: trunc( ) argument #2 is incompatible with prototype:\n\tprototype: uint64_t\n\t argument: string",
    );
    golden(
        "BEGIN { trunc(); }",
        ErrTag::D_PROTO_LEN,
        "line 1: trunc( ) prototype mismatch: 0 args passed, at least 1 expected",
    );
    golden(
        "BEGIN { normalize(@a); }",
        ErrTag::D_PROTO_LEN,
        "line 1: normalize( ) prototype mismatch: 1 arg passed, 2 expected",
    );
    golden(
        "BEGIN { @a = count(); normalize(@a, \"x\"); }",
        ErrTag::D_PROTO_ARG,
        "line 1: normalize( ) argument #2 is incompatible with prototype:\n\tprototype: uint64_t\n\t argument: string",
    );
    golden("BEGIN { normalize(1, 2); }", ErrTag::D_NORMALIZE_AGGARG, "line 1: normalize( ) argument #1 is incompatible with prototype:\n\tprototype: aggregation\n\t argument: int");
}

#[test]
fn speculation_ordering() {
    golden(
        "BEGIN { speculate(1); speculate(1); }",
        ErrTag::D_SPEC_SPEC,
        "line 1: speculate( ) may not follow speculate( )",
    );
    golden(
        "BEGIN { commit(1); speculate(1); }",
        ErrTag::D_SPEC_COMM,
        "line 1: speculate( ) may not follow commit( )",
    );
    golden(
        "BEGIN { trace(1); speculate(1); }",
        ErrTag::D_SPEC_DREC,
        "line 1: speculate( ) may not follow data-recording action(s)",
    );
    // DTrace for Linux lets a clause commit several speculations
    assert!(compile(
        "BEGIN { commit(1); commit(2); }",
        &CompileOptions::default()
    )
    .is_ok());
    golden(
        "BEGIN { trace(1); commit(1); }",
        ErrTag::D_COMM_DREC,
        "line 1: commit( ) may not follow data-recording action(s)",
    );
    golden(
        "BEGIN { commit(1); trace(1); }",
        ErrTag::D_DREC_COMM,
        "line 1: data-recording actions may not follow commit( )",
    );
    golden(
        "BEGIN { speculate(1); @a = count(); }",
        ErrTag::D_AGG_SPEC,
        "line 1: aggregating actions may not follow speculate( )",
    );
    golden(
        "BEGIN { commit(1); @a = count(); }",
        ErrTag::D_AGG_COMM,
        "line 1: aggregating actions may not follow commit( )",
    );
    golden(
        "BEGIN { speculate(1); exit(0); }",
        ErrTag::D_EXIT_SPEC,
        "line 1: exit( ) may not follow speculate( )",
    );
}

#[test]
fn aggregation_errors() {
    golden(
        "BEGIN { @a[1] = count(); @b[1, 2] = count(); } END { printa(\"%d %@d %@d\", @a, @b); }",
        ErrTag::D_PRINTA_AGGKEY,
        "line 1: printa( ): @a and @b do not have matching key signatures: @a has 1 key, @b has 2 keys",
    );
    golden(
        "BEGIN { @a[1] = count(); @b[\"s\"] = count(); } END { printa(\"%d %@d %@d\", @a, @b); }",
        ErrTag::D_PRINTA_AGGPROTO,
        "line 1: printa( ): @b[ ] key #1 is incompatible with @a:\n        a key #1: int\n        b key #1: string",
    );
    golden(
        "END { printa(@nope); }",
        ErrTag::D_IDENT_UNDEF,
        "line 1: failed to resolve @nope: Unknown variable name",
    );
    golden(
        "BEGIN { @a = 1; }",
        ErrTag::D_AGG_FUNC,
        "line 1: @a must be assigned the result of an aggregating function",
    );
    golden(
        "BEGIN { @a = count(); }\nEND { @a = sum(1); }",
        ErrTag::D_AGG_REDEF,
        "line 2: aggregation redefined: @a\n\t current: @a = sum( )\n\tprevious: @a = count( ) : line 1",
    );
    golden(
        "BEGIN { @a = sum(\"x\"); }",
        ErrTag::D_AGG_SCALAR,
        "line 1: sum( ) argument #1 must be of scalar type",
    );
    golden(
        "BEGIN { @a = count(1); }",
        ErrTag::D_PROTO_LEN,
        "line 1: count( ) prototype mismatch: 1 arg passed, 0 expected",
    );
    golden("BEGIN { @a[1] = count(); @a[\"s\"] = count(); }", ErrTag::D_PROTO_ARG, "line 1: @a[ ] argument #1 is incompatible with prototype:\n\tprototype: int\n\t argument: string");
    golden(
        "BEGIN { @a[1] = count(); @a[1, 2] = count(); }",
        ErrTag::D_PROTO_LEN,
        "line 1: @a[ ] prototype mismatch: 2 args passed, 1 expected",
    );
    golden(
        "BEGIN { @a = lquantize(1, arg0, 10); }",
        ErrTag::D_LQUANT_BASETYPE,
        "line 1: lquantize( ) argument #2 must be a constant integer",
    );
    golden(
        "BEGIN { @a = lquantize(1, 0, arg0); }",
        ErrTag::D_LQUANT_LIMTYPE,
        "line 1: lquantize( ) argument #3 must be a constant integer",
    );
    golden(
        "BEGIN { @a = lquantize(1, 10, 0); }",
        ErrTag::D_LQUANT_MISMATCH,
        "line 1: lquantize( ) base (argument #2) must be less than limit (argument #3)",
    );
    golden(
        "BEGIN { @a = lquantize(1, 0, 10, 70000); }",
        ErrTag::D_LQUANT_STEPVAL,
        "line 1: lquantize( ) argument #4 must be a non-zero positive 16-bit quantity",
    );
    golden(
        "BEGIN { @a = lquantize(1, 0, 10, 20); }",
        ErrTag::D_LQUANT_STEPLARGE,
        "line 1: lquantize( ) step (argument #4) too large (must be at most 10)",
    );
    golden(
        "BEGIN { @a = lquantize(1, 0, 1000000, 1); }",
        ErrTag::D_LQUANT_STEPSMALL,
        "line 1: lquantize( ) step (argument #4) too small to quantize from 0 to 1000000",
    );
    golden(
        "BEGIN { @a = lquantize(1, 5000000000, 6000000000); }",
        ErrTag::D_LQUANT_BASEVAL,
        "line 1: lquantize( ) argument #2 must be a 32-bit quantity",
    );
    golden("BEGIN { @a = llquantize(1, 1, 0, 5, 10); }", ErrTag::D_LLQUANT_FACTORVAL, "line 1: llquantize( ) argument #2 (factor) must be a 16-bit quantity greater than or equal to 2");
    golden("BEGIN { @a = llquantize(1, 10, 5, 2, 10); }", ErrTag::D_LLQUANT_HMAGVAL, "line 1: llquantize( ) argument #4 (high magnitude) must be at least argument #3 (low magnitude)");
    golden("BEGIN { @a = llquantize(1, 10, 0, 5, 3); }", ErrTag::D_LLQUANT_STEPVAL, "line 1: llquantize( ) argument #5 (linear steps per magnitude) must evenly divide or be evenly divisible by argument #2 (factor)");
    golden("BEGIN { @a = llquantize(1, 10, 0, 30, 10); }", ErrTag::D_LLQUANT_HMAGVAL, "line 1: llquantize( ) argument #2 (factor) raised to power of argument #4 (high magnitude) plus 1 overflows 64-bits");
    golden(
        "BEGIN { @a = llquantize(arg0, arg0, 0, 3, 10); }",
        ErrTag::D_LLQUANT_FACTORTYPE,
        "line 1: llquantize( ) argument #2 (factor) must be a constant integer",
    );
}

#[test]
fn declaration_errors() {
    golden(
        "int;",
        ErrTag::D_DECL_USELESS,
        "line 1: useless declaration",
    );
    golden(
        "\n/* nothing */\n",
        ErrTag::D_EMPTY,
        "line 3: empty D program translation unit",
    );
    golden(
        "BEGIN { @a[1][2] = count(); }",
        ErrTag::D_AGG_MDIM,
        "line 1: improper attempt to reference @a as a multi-dimensional array",
    );
    golden(
        "int x; int x[4];",
        ErrTag::D_DECL_IDRED,
        "line 1: identifier redeclared: x",
    );
    golden(
        "struct s { int a; }; struct s { int b; };",
        ErrTag::D_DECL_TYPERED,
        "line 1: type redeclared: struct s",
    );
    golden("int x[arg0];", ErrTag::D_DECL_ARRSUB, "line 1: positive integral constant expression or tuple signature expected as array declaration subscript");
    golden(
        "void x;",
        ErrTag::D_DECL_VOIDOBJ,
        "line 1: cannot have void object: x",
    );
    golden(
        "this int a[int];",
        ErrTag::D_DECL_LOCASSC,
        "line 1: associative arrays may not be declared as local variables: a",
    );
    golden(
        "unsigned string s;",
        ErrTag::D_DECL_SIGNINT,
        "line 1: invalid type declaration: signed and unsigned may only be used with integer type",
    );
    golden(
        "enum e { A = arg0 };",
        ErrTag::D_DECL_ENCONST,
        "line 1: enumerator 'A' must be assigned to an integral constant expression",
    );
    golden(
        "inline int x = \"s\";",
        ErrTag::D_OP_INCOMPAT,
        "line 1: inline x definition uses incompatible types: \"int\" = \"string\"",
    );
    golden(
        "struct s; struct s x;",
        ErrTag::D_DECL_INCOMPLETE,
        "line 1: incomplete struct/union/enum struct s: x",
    );
    golden(
        "translator int < int x > { a = 1; };",
        ErrTag::D_XLATE_SOU,
        "line 1: translator output type must be a struct or union",
    );
    golden(
        "BEGIN { x = xlate<int>(1); }",
        ErrTag::D_XLATE_NONE,
        "line 1: cannot translate from \"int\" to \"int\"",
    );
}

#[test]
fn pragma_and_macro_errors() {
    golden(
        "#pragma D option nosuchoption\nBEGIN { }",
        ErrTag::D_PRAGMA_OPTSET,
        "line 1: failed to set option 'nosuchoption': Invalid option name",
    );
    golden(
        "#pragma D frobnicate\n",
        ErrTag::D_PRAGMA_INVAL,
        "line 1: invalid control directive: #pragma D frobnicate",
    );
    golden(
        "#pragma D option\n",
        ErrTag::D_PRAGMA_MALFORM,
        "line 1: malformed #pragma D option",
    );
    golden(
        "#define X 1\n",
        ErrTag::D_PRAGCTL_INVAL,
        "line 1: invalid control directive: #define X 1",
    );
    golden(
        "BEGIN { trace($1); }",
        ErrTag::D_MACRO_UNDEF,
        "line 1: macro argument $1 is not defined",
    );
    let opts = CompileOptions {
        args: vec!["t.d".into(), "a".into()],
        ..Default::default()
    };
    let err = compile("BEGIN { }", &opts).unwrap_err();
    assert_eq!(err.tag, ErrTag::D_MACRO_UNUSED);
    assert_eq!(
        err.file_message(false),
        "extraneous argument 'a' ($1 is not referenced)"
    );
    let opts = CompileOptions {
        args: vec!["t.d".into(), "a".into()],
        default_args: true,
        ..Default::default()
    };
    assert!(compile("BEGIN { trace($2); }", &opts).is_ok());
}

#[test]
fn line_numbers_follow_the_source() {
    let err = e("/* header\n comment */\nBEGIN\n{\n\tx = 1;\n\ty = z;\n}\n");
    assert_eq!(err.line, Some(6));
    let err = e("#line 100\nBEGIN { y = z; }\n");
    assert_eq!(err.line, Some(100));
}

#[test]
fn code_generation_limits() {
    let e = e("BEGIN { a[1, 2, 3, 4, 5, 6, 7, 8, 9] = 1; }");
    assert_eq!(e.tag, ErrTag::D_NOREG);
    assert_eq!(
        e.file_message(false),
        "Insufficient tuple registers to generate code"
    );
    // deeper expressions than DIF has registers spill to the stack, as in DTrace for Linux
    let deep = "BEGIN { trace(arg0 + (arg1 + (arg2 + (arg3 + (arg4 + (arg5 + (arg6 + (arg7 + arg8)))))))); }";
    assert!(compile(deep, &CompileOptions::default()).is_ok());
}

#[test]
fn more_tags() {
    golden(
        "struct o { int a; int b; }; translator struct o < int x > { a = x; }; BEGIN { trace(xlate<struct o>(1).b); }",
        ErrTag::D_XLATE_NOCONV,
        "line 1: translator does not define conversion for member: b",
    );
    golden(
        "struct o { int a; }; translator struct o < int x > { c = x; };",
        ErrTag::D_XLATE_MEMB,
        "line 1: translator member c is not a member of struct o",
    );
    golden(
        "struct o { int a; }; translator struct o < int x > { a = x; }; translator struct o < int y > { a = y; };",
        ErrTag::D_XLATE_REDECL,
        "line 1: translator from int to struct o has already been declared",
    );
    golden(
        "struct o { int a; }; translator struct o < int x > { a = \"s\"; }; BEGIN { trace(xlate<struct o>(1).a); }",
        ErrTag::D_XLATE_INCOMPAT,
        "line 1: translator member a definition uses incompatible types: \"int\" = \"string\"",
    );
    // with or without -w: destructive actions are refused when enabling, not compiling
    let err = compile(
        "BEGIN { speculate(1); raise(9); }",
        &CompileOptions::default(),
    )
    .unwrap_err();
    assert_eq!(err.tag, ErrTag::D_ACT_SPEC);
    assert_eq!(
        err.file_message(false),
        "line 1: destructive actions may not follow speculate( )"
    );
    golden(
        "BEGIN { x = 1; y = x[1, 2]; }",
        ErrTag::D_ARR_BADREF,
        "line 1: cannot access expression as an associative array",
    );
    golden(
        "int x[];",
        ErrTag::D_DECL_ARRNULL,
        "line 1: array declaration requires array dimension or tuple signature: x",
    );
    golden(
        "long long long x;",
        ErrTag::D_DECL_LONGINT,
        "line 1: invalid type declaration: long and long long may only be used with integer or floating-point type",
    );
    // DTrace for Linux looks "short long" up by name and finds no such type
    golden(
        "short long x;",
        ErrTag::D_UNKNOWN,
        "line 1: failed to resolve type short long : Unknown type name",
    );
    golden(
        "short short x;",
        ErrTag::D_DECL_COMBO,
        "line 1: invalid type combination",
    );
    golden(
        "int char x;",
        ErrTag::D_DECL_COMBO,
        "line 1: invalid type combination",
    );
    golden(
        "BEGIN { x = (1)(2); }",
        ErrTag::D_FUNC_IDENT,
        "line 1: function designator is not of function type",
    );
    golden(
        "BEGIN { x = 1; y = x(2); }",
        ErrTag::D_FUNC_IDKIND,
        "line 1: variable 'x' may not be referenced as function",
    );
    // structs and unions are keys in DTrace for Linux; arrays are not
    golden(
        "int x[3]; BEGIN { a[x] = 1; }",
        ErrTag::D_KEY_TYPE,
        "line 1: key #1 is of invalid type: int [3]",
    );
    golden(
        "BEGIN { x = arg0.; }",
        ErrTag::D_OP_IDENT,
        "line 1: operator . must be followed by an identifier",
    );
    golden(
        "BEGIN { p = (void *)arg0; p++; }",
        ErrTag::D_OP_VFPTR,
        "line 1: operator ++ requires an operand of known size",
    );
    golden(
        "BEGIN { x = stringof(*(struct foo_s *)0); }",
        ErrTag::D_STRINGOF_TYPE,
        "line 1: cannot apply stringof to a value of type struct foo_s",
    );
    golden(
        "#pragma D error boom\n",
        ErrTag::D_PRAGERR,
        "line 1: #error: boom ",
    );
    golden(
        "BEGIN { printa(\"%d\"); }",
        ErrTag::D_PRINTA_PROTO,
        "line 1: printa( ) prototype mismatch: 1 args passed, 2 expected",
    );
    golden("BEGIN { @a = count(); trunc(1); }", ErrTag::D_TRUNC_AGGARG, "line 1: trunc( ) argument #1 is incompatible with prototype:\n\tprototype: aggregation\n\t argument: int");
    golden(
        "BEGIN { ustack(1, 2, 3); }",
        ErrTag::D_PROTO_LEN,
        "line 1: ustack( ) prototype mismatch: 3 args passed, at most 2 expected",
    );
    golden(
        "BEGIN { @a = lquantize(1, 0, 5000000000); }",
        ErrTag::D_LQUANT_LIMVAL,
        "line 1: lquantize( ) argument #3 must be a 32-bit quantity",
    );
    golden(
        "BEGIN { @a = lquantize(1, 0, 10, arg0); }",
        ErrTag::D_LQUANT_STEPTYPE,
        "line 1: lquantize( ) argument #4 must be a constant integer",
    );
    golden(
        "BEGIN { @a = llquantize(1, 10, arg0, 5, 10); }",
        ErrTag::D_LLQUANT_LMAGTYPE,
        "line 1: llquantize( ) argument #3 (low magnitude) must be a constant integer",
    );
    golden(
        "BEGIN { @a = llquantize(1, 10, 0, arg0, 10); }",
        ErrTag::D_LLQUANT_HMAGTYPE,
        "line 1: llquantize( ) argument #4 (high magnitude) must be a constant integer",
    );
    golden(
        "BEGIN { @a = llquantize(1, 10, 0, 5, arg0); }",
        ErrTag::D_LLQUANT_STEPTYPE,
        "line 1: llquantize( ) argument #5 (linear steps per magnitude) must be a constant integer",
    );
    golden(
        "BEGIN { @a = llquantize(1, 10, 70000, 80000, 10); }",
        ErrTag::D_LLQUANT_LMAGVAL,
        "line 1: llquantize( ) argument #3 (low magnitude) must be a 16-bit quantity",
    );
    golden(
        "BEGIN { @a = llquantize(1, 10, 0, 5, 0); }",
        ErrTag::D_LLQUANT_STEPTYPE,
        "line 1: llquantize( ) argument #5 (linear steps per magnitude) must be a non-zero positive integer constant",
    );
    golden("BEGIN { @a = llquantize(1, 4, 0, 5, 12); }", ErrTag::D_LLQUANT_STEPVAL, "line 1: llquantize( ) argument #5 (linear steps per magnitude) must evenly divide argument #2 (factor) raised to the power of argument #3 (low magnitude) plus one");
}

#[test]
fn nul_bytes_are_not_end_of_input() {
    golden(
        "BEGIN { }\0 junk",
        ErrTag::D_SYNTAX,
        "line 1: invalid character (0x00)",
    );
}

#[test]
fn struct_keys_must_match_the_arrays_prototype() {
    golden(
        "struct r { int p; }; struct q { int p; }; struct r r1; struct q q1; BEGIN { a[r1] = 1; a[q1] = 2; }",
        ErrTag::D_PROTO_ARG,
        "line 1: a[ ] key #1 is incompatible with prototype:\n\tprototype: struct r\n\t      key: struct q",
    );
}

#[test]
fn begin_and_end_have_no_args() {
    golden(
        "BEGIN { trace(args[0]); }",
        ErrTag::D_ARGS_IDX,
        "line 1: index 0 is out of range for BEGIN args[ ]",
    );
    golden(
        "dtrace:::END { trace(args[1]); }",
        ErrTag::D_ARGS_IDX,
        "line 1: index 1 is out of range for dtrace:::END args[ ]",
    );
    // arg0 is still allowed, and so is args[] where the probes are not known
    compile("BEGIN { trace(arg0); }", &CompileOptions::default()).unwrap();
    compile(
        "BEGIN, syscall::read:entry { trace(args[0]); }",
        &CompileOptions::default(),
    )
    .unwrap();
}

#[test]
fn network_subroutine_prototypes() {
    let decl = "struct in6_addr { uint8_t b[16]; };\n";
    let ok = |src: &str| {
        compile(&format!("{decl}{src}"), &CompileOptions::default())
            .unwrap_or_else(|e| panic!("{src}: {e}"))
    };
    let bad = |src: &str| e(&format!("{decl}{src}"));
    // inet_ntoa6(addr [, strict]): the second argument an integer constant
    ok("BEGIN { trace(inet_ntoa6((struct in6_addr *)alloca(16))); }");
    ok("BEGIN { trace(inet_ntoa6((struct in6_addr *)alloca(16), 1)); }");
    ok("BEGIN { trace(inet_ntoa6(alloca(16))); }");
    let err = bad("BEGIN { n = 0; trace(inet_ntoa6((struct in6_addr *)alloca(16), n)); }");
    assert_eq!(err.tag, ErrTag::D_PROTO_ARG, "{err}");
    assert!(err.message.contains("argument #2"), "{err}");
    // a pointer to another type is not a pointer to struct in6_addr (pointers to void and
    // between integers are compatible, as in DTrace's dt_node_is_ptrcompat)
    let err = bad("int *p; BEGIN { trace(inet_ntoa6(p)); }");
    assert_eq!(err.tag, ErrTag::D_PROTO_ARG, "{err}");
    assert!(
        err.message.contains("prototype: struct in6_addr *"),
        "{err}"
    );
    assert_eq!(
        bad("BEGIN { trace(inet_ntoa6()); }").tag,
        ErrTag::D_PROTO_LEN
    );
    ok("uint32_t *q; BEGIN { trace(inet_ntoa((ipaddr_t *)q)); trace(inet_ntoa((int *)q)); }");
    // link_ntop(type, addr): any pointer or byte array
    ok("uint8_t a[20]; BEGIN { trace(link_ntop(ARPHRD_ETHER, a)); trace(link_ntop(1, alloca(8))); }");
    assert_eq!(
        bad("BEGIN { trace(link_ntop(1)); }").tag,
        ErrTag::D_PROTO_LEN
    );
}

#[test]
fn array_prototypes_and_additive_assignment() {
    golden(
        "int a[...];\nBEGIN { exit(0); }",
        ErrTag::D_DECL_PROTO_VARARGS,
        "line 1: array prototype may not use a variable-length argument list",
    );
    golden(
        "int a[int, ...];",
        ErrTag::D_DECL_PROTO_VARARGS,
        "line 1: array prototype may not use a variable-length argument list",
    );
    golden(
        "int x[void, char];\nBEGIN { x[1, 'a'] = 4; }",
        ErrTag::D_DECL_PROTO_TYPE,
        "line 1: array prototype may not use parameter of type void: (anonymous), parameter #1",
    );
    // += and -=: the left side must be an integer or a pointer of known size
    golden(
        "int p;\nBEGIN { p -= alloca(10); }",
        ErrTag::D_OP_VFPTR,
        "line 2: operator -= requires left-hand scalar operand of known size",
    );
    golden(
        "void *v;\nBEGIN { v += 1; }",
        ErrTag::D_OP_VFPTR,
        "line 2: operator += requires left-hand scalar operand of known size",
    );
    golden(
        "int *p; char *c;\nBEGIN { p -= c; }",
        ErrTag::D_OP_INCOMPAT,
        "line 2: operands have incompatible types: \"int *\" -= \"char *\"",
    );
    compile(
        "int *p; int i; BEGIN { p += 2; i -= 3; i += 'a'; }",
        &CompileOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn the_empty_option_accepts_an_empty_program() {
    let o = CompileOptions {
        empty: true,
        ..Default::default()
    };
    let p = compile("\n/* nothing */\n", &o).unwrap_or_else(|e| panic!("{e}"));
    assert!(p.ecbs.is_empty());
    assert_eq!(e("\n").tag, ErrTag::D_EMPTY);
}

#[test]
fn pspec_reads_ambiguous_text_as_a_probe_description() {
    // without pspec `int*x` is a declaration cut short; with it, a probe description
    let err = e("\nint*x");
    assert_eq!(err.tag, ErrTag::D_SYNTAX);
    golden(
        "#pragma D option pspec\n\nint*x",
        ErrTag::D_SYNTAX,
        "line 3: expected predicate and/or actions following probe description",
    );
    // declarations still read as declarations
    compile(
        "#pragma D option pspec\nint x;\nBEGIN { x = 1; }",
        &CompileOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn parameter_declarations() {
    golden(
        "int foo(static int);",
        ErrTag::D_DECL_PARMCLASS,
        "line 1: inappropriate storage class for function or associative array parameter",
    );
    golden(
        "\nint a(void v);",
        ErrTag::D_DECL_PROTO_NAME,
        "line 2: void parameter may not have a name: v",
    );
    // `register`, and a nameless void, are fine
    for ok in ["int f(register int);", "int g(void);"] {
        compile(ok, &CompileOptions::default()).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
}

#[test]
fn extern_arrays_may_leave_out_their_size() {
    let src = "extern int a1[];\nextern int a3[123][456];\nBEGIN { exit(0); }";
    compile(src, &CompileOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    golden(
        "int a1[];",
        ErrTag::D_DECL_ARRNULL,
        "line 1: array declaration requires array dimension or tuple signature: a1",
    );
}

#[test]
fn struct_bodies_and_translators() {
    // a second body for a struct is refused at its `{`, before the body is read: a translator
    // written with braces instead of angle brackets reads as one
    golden(
        "struct in { int i; };\nstruct out { int o; };\ntranslator struct out\n{\n\tstruct in *p\n}\n{\n\to = p->i;\n};",
        ErrTag::D_DECL_TYPERED,
        "line 4: type redeclared: struct out",
    );
    golden(
        "union u { int i; };\nunion u { long l; };",
        ErrTag::D_DECL_TYPERED,
        "line 2: type redeclared: union u",
    );
    // a member conversion that does not fit is reported where the translator ends
    golden(
        "struct in { char c; };\nstruct out { char *p; };\ntranslator struct out < struct in *x >\n{\n\tp = x->c;\n};",
        ErrTag::D_XLATE_INCOMPAT,
        "line 6: translator member p definition uses incompatible types: \"char *\" = \"char\"",
    );
}

#[test]
fn freopen_refuses_the_current_directory() {
    golden(
        "BEGIN\n{\n\tfreopen(\".\");\n}",
        ErrTag::D_FREOPEN_INVALID,
        "line 3: freopen( ) argument #1 cannot be \".\"",
    );
    compile(
        "BEGIN { freopen(\"\"); freopen(\"./x\"); }",
        &CompileOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn translated_pointers_are_no_integers() {
    golden(
        "struct in { int ii; };\nstruct out { int oi; };\ntranslator struct out < struct in *i > { oi = i->ii; };\nBEGIN\n{\n\taddr = (uintptr_t)xlate<struct out *>((struct in *)0);\n}",
        ErrTag::D_CAST_INVAL,
        "line 6: invalid cast expression: \"pointer to translated data\" to \"uintptr_t\"",
    );
}

#[test]
fn syntax_errors_in_declarations_quote_the_rest_of_the_line() {
    golden(
        "typedef pint new_int;\nBEGIN { exit(0); }",
        ErrTag::D_SYNTAX,
        "line 1: syntax error near \"new_int;\"",
    );
    golden(
        "BEGIN\n{\n\ttrace(offsetof(vnode_t, v_no_such_member));\n}",
        ErrTag::D_SYNTAX,
        "line 3: syntax error near \"vnode_t, v_no_such_member));\"",
    );
    // a declaration cut short by the end of the input, outside any clause
    golden(
        "\nint*x",
        ErrTag::D_SYNTAX,
        "line 2: syntax error near end-of-input",
    );
    // elsewhere the token alone
    golden(
        "BEGIN { x = 12abc; }",
        ErrTag::D_SYNTAX,
        "line 1: syntax error near \"abc\"",
    );
}

#[test]
fn control_lines_inside_clauses_and_declarations() {
    let p = compile(
        "BEGIN\n{\n#pragma D option quiet\n\texit(0);\n}",
        &CompileOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        p.options.iter().any(|(k, _)| k == "quiet"),
        "{:?}",
        p.options
    );
    // acted on where they are read: before the declaration they interrupt is found incomplete
    golden(
        "inline int foo\n\n#pragma D attributes incorrect_attr foo\n\nBEGIN\n{\n}",
        ErrTag::D_PRAGMA_INVAL,
        "line 3: invalid attributes specified by #pragma attributes",
    );
}

#[test]
fn scratch_sizes_known_when_compiling() {
    golden(
        "#pragma D option scratchsize=64\nBEGIN\n{\n\tcopyin(0, 65);\n}",
        ErrTag::D_ALLOCA_SIZE,
        "line 4: copyin( ) size 65 is larger than the scratch space (64 bytes)",
    );
    golden(
        "#pragma D option scratchsize=60\nBEGIN\n{\n\tx = alloca(65);\n}",
        ErrTag::D_ALLOCA_SIZE,
        "line 4: alloca( ) size 65 is larger than the scratch space (64 bytes)",
    );
    let opts = CompileOptions {
        scratchsize: 16,
        ..Default::default()
    };
    assert_eq!(
        compile("BEGIN { x = alloca(17); }", &opts).unwrap_err().tag,
        ErrTag::D_ALLOCA_SIZE
    );
    compile("BEGIN { x = alloca(16); y = copyin(0, arg0); }", &opts)
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn lock_subroutines_name_the_kernels_lock_types() {
    golden(
        "BEGIN\n{\n\tmutex_type_adaptive(trace(\"badarg\"));\n}",
        ErrTag::D_PROTO_ARG,
        "line 3: mutex_type_adaptive( ) argument #1 is incompatible with prototype:\n\tprototype: struct mutex *\n\t argument: void",
    );
}

#[test]
fn translated_pointers_are_no_aggregation_keys() {
    golden(
        "struct o { int a; };\ntranslator struct o < int x > { a = x; };\nBEGIN\n{\n\t@a[xlate<struct o *>(1)] = count();\n}",
        ErrTag::D_KEY_TYPE,
        "line 5: @a[ ] key #1 is of invalid type: pointer to translated data",
    );
}

#[test]
fn alloca_and_other_pointers_do_not_share_a_variable() {
    golden(
        "BEGIN\n{\n\ta = (char *) alloca(1);\n\ta = (a == NULL) ? (char *) 50 : a;\n}",
        ErrTag::D_ALLOCA_INCOMPAT,
        "line 4: ternary conditional with alloca and non-alloca branches cannot be assigned to a variable",
    );
    // in another clause too, and NULL in between changes nothing
    golden(
        "BEGIN\n{\n\ta = (char *) alloca(1);\n}\nBEGIN\n{\n\ta = NULL;\n\ta = (char *)arg0 + 5;\n}",
        ErrTag::D_ALLOCA_INCOMPAT,
        "line 8: a: cannot reuse the same identifier for both alloca and non-alloca allocations",
    );
    golden(
        "BEGIN\n{\n\tself->p = (char *)curthread;\n\tself->p = (char *)alloca(4) + 1;\n}",
        ErrTag::D_ALLOCA_INCOMPAT,
        "line 4: p: cannot reuse the same identifier for both alloca and non-alloca allocations",
    );
    // what is fine: the same kind again, integers, NULL, and a mixed ?: not assigned
    for ok in [
        "BEGIN { a = (char *)alloca(1); a = (char *)alloca(2) + 1; a = NULL; b = a; b = 0; }",
        "BEGIN { p = (char *)arg0; p = p + 1; x[1] = copyin(arg0, 4); x[2] = (void *)alloca(4); }",
        "BEGIN { a = (char *)alloca(1); trace((a == NULL) ? (char *)50 : a); }",
    ] {
        compile(ok, &CompileOptions::default()).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
}

/// A global variable may not take the name of a D function of the program's D version: the
/// functions of D 1.1 (`strstr`, `index`, `freopen`, ...) are free names at `version=1.0`.
#[test]
fn variables_named_as_d_functions() {
    for name in ["strstr", "index", "freopen", "trace", "count", "copyin"] {
        golden(
            &format!("int {name};\nBEGIN {{ exit(0); }}"),
            ErrTag::D_DECL_IDRED,
            &format!("line 1: identifier redeclared: {name}"),
        );
        golden(
            &format!("#pragma D option version=1.1\nint {name};\nBEGIN {{ exit(0); }}"),
            ErrTag::D_DECL_IDRED,
            &format!("line 2: identifier redeclared: {name}"),
        );
    }
    let v10 = "#pragma D option version=1.0\nint strstr;\nint substr;\nint freopen;\nint rindex;\nBEGIN { exit(0); }";
    assert!(compile(v10, &CompileOptions::default()).is_ok());
    let e = compile(
        "#pragma D option version=1.0\nint copyin;\nBEGIN { exit(0); }",
        &CompileOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.tag, ErrTag::D_DECL_IDRED);
}

/// An expression compiled by itself (a statement, a predicate, `trace()`'s value) may not end in a
/// translated pointer: DTrace's `D_CG_DYN` (the Errtag/D_CG_DYN assertion: "An expression cannot
/// evaluate to result of dynamic type"). A member of the same translation stays legal, and so does a
/// pointer the D library translates.
#[test]
fn a_translated_pointer_is_no_result_of_its_own() {
    let xl =
        "struct i { int a; }; struct o { int b; }; translator struct o < int I > { b = I; };\n";
    let msg = "line 2: expression cannot evaluate to result of a translated pointer";
    golden(
        &format!("{xl}BEGIN {{ xlate < struct o * > (0); exit(0); }}"),
        ErrTag::D_CG_DYN,
        msg,
    );
    golden(
        &format!("{xl}BEGIN {{ trace(xlate < struct o * > (1)); }}"),
        ErrTag::D_CG_DYN,
        msg,
    );
    golden(
        &format!("{xl}BEGIN / xlate < struct o * > (1) / {{ exit(0); }}"),
        ErrTag::D_CG_DYN,
        msg,
    );
    let ok =
        format!("{xl}BEGIN {{ trace(xlate < struct o * > (1)->b); x = xlate < struct o > (1); }}");
    assert!(compile(&ok, &CompileOptions::default()).is_ok(), "{ok}");
    // the D library's translations stand for real data (DTrace for Linux's `curcpu`)
    let lib = "BEGIN { trace(curcpu); exit(curcpu != 0 ? 0 : 1); }";
    assert!(compile(lib, &CompileOptions::default()).is_ok(), "{lib}");
}
