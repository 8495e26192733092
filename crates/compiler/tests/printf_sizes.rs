//! printf/printa size modifiers checked as DTrace's conversion dictionary (dt_printf.c) checks
//! them: `%hd`/`%ld`/`%lld`/`%lc` and their unsigned forms take an integer of exactly the named
//! type's size and signedness (`pfcheck_type`), `%hx`/`%lx`/`%llx` a short, long or long long
//! of either signedness by name (`pfcheck_xshort`/`xlong`/`xlonglong`), `%c` at most an int,
//! `%Y` a 64-bit integer; unknown modifier combinations (`%hhd`, `%zd`, `%lf`) are undefined.
//! The message is D_PRINTF_ARG_TYPE's, with the conversion's prototype.

use std::sync::Arc;

use dtrace_compiler::{compile, compile_with_types, CompileError, CompileOptions, ErrTag};
use dtrace_ctf::{Container, IntEncoding, Member, Type, TypeKind, CTF_INT_SIGNED};

fn check(src: &str) -> Result<(), CompileError> {
    compile(src, &CompileOptions::default()).map(|_| ())
}

/// `printf(fmt, v)` compiles.
fn accepts(fmt: &str, v: &str) {
    let src = format!("BEGIN {{ printf(\"{fmt}\\n\", {v}); }}");
    check(&src).unwrap_or_else(|e| panic!("{src}: {e}"));
}

/// `printf(fmt, v)` fails with DTrace's message naming `proto` and the argument's type `arg`.
fn rejects(fmt: &str, v: &str, proto: &str, arg: &str) {
    let src = format!("BEGIN {{ printf(\"{fmt}\\n\", {v}); }}");
    let e = check(&src).expect_err(&src);
    assert_eq!(e.tag, ErrTag::D_PRINTF_ARG_TYPE, "{src}: {e}");
    let conv = fmt.trim_start_matches(|c: char| c == '%' || c == '-' || c.is_ascii_digit());
    assert_eq!(
        e.message,
        format!(
            "printf( ) argument #2 is incompatible with conversion #1 prototype:\n\tconversion: %{conv}\n\t prototype: {proto}\n\t  argument: {arg}"
        ),
        "{src}"
    );
}

#[test]
fn h_conversions_take_shorts() {
    accepts("%hd", "(short)-1");
    accepts("%hi", "(int16_t)1");
    accepts("%5hd", "(signed short)1");
    rejects("%hd", "1", "short", "int");
    rejects("%hd", "(unsigned short)1", "short", "unsigned short");
    rejects("%hd", "(char)1", "short", "char");
    rejects("%hd", "1L", "short", "long");
    accepts("%hu", "(unsigned short)1");
    accepts("%ho", "(uint16_t)1");
    rejects("%hu", "(short)1", "unsigned short", "short");
    rejects("%hu", "(unsigned int)1", "unsigned short", "unsigned int");
    // %hx and %hX take a short of either signedness
    accepts("%hx", "(short)1");
    accepts("%-4hX", "(uint16_t)1");
    rejects("%hx", "1", "short", "int");
    rejects("%hX", "(unsigned char)1", "short", "unsigned char");
}

#[test]
fn l_and_ll_conversions_take_longs() {
    accepts("%ld", "1L");
    accepts("%li", "(int64_t)1");
    // long long has long's encoding on LP64: compatible, as CTF type compatibility finds
    accepts("%ld", "(long long)1");
    rejects("%ld", "1", "long", "int");
    rejects("%ld", "(unsigned long)1", "long", "unsigned long");
    accepts("%lu", "(unsigned long)1");
    accepts("%lu", "timestamp");
    accepts("%lo", "(size_t)1");
    rejects("%lu", "1L", "unsigned long", "long");
    // %lx by name: long or unsigned long (uint64_t is unsigned long), not long long
    accepts("%lx", "1L");
    accepts("%lx", "timestamp");
    rejects("%lx", "(long long)1", "long", "long long");
    rejects("%lx", "1", "long", "int");
    rejects("%lx", "(char *)0", "long", "char *");
    accepts("%lld", "(long long)1");
    accepts("%lld", "1L");
    rejects("%lld", "1", "long long", "int");
    accepts("%llu", "(unsigned long long)1");
    accepts("%llu", "timestamp");
    rejects("%llu", "-1LL", "unsigned long long", "long long");
    // %llx: long long by name, or int64_t/uint64_t (and typedefs of them) whatever they alias
    accepts("%llx", "(long long)1");
    accepts("%llx", "(unsigned long long)1");
    accepts("%llx", "(uint64_t)1");
    accepts("%llx", "timestamp");
    accepts("%llx", "(int64_t)1");
    rejects("%llx", "1L", "long long", "long");
    rejects("%llx", "1", "long long", "int");
    // %lc/%wc: an int (wint_t)
    accepts("%lc", "'x'");
    rejects("%lc", "1L", "int", "long");
    // %Le and friends: a long double
    rejects("%Lf", "1", "long double", "int");
}

#[test]
fn unsized_conversions() {
    // %d and friends take any integer; %c one no wider than an int; %Y a 64-bit integer
    accepts("%d", "(char)1");
    accepts("%x", "1LL");
    accepts("%c", "(short)65");
    rejects("%c", "65L", "char, short, or int", "long");
    rejects(
        "%d",
        "\"s\"",
        "char, short, int, long, or long long",
        "string",
    );
    rejects(
        "%x",
        "(char *)0",
        "char, short, int, long, or long long",
        "char *",
    );
    accepts("%p", "(char *)0");
    accepts("%Y", "walltimestamp");
    rejects("%Y", "1", "int64_t", "int");
    rejects("%f", "1", "float, double, or long double", "int");
}

#[test]
fn undefined_modifier_combinations() {
    for (fmt, name) in [
        ("%hhd", "%hhd"),
        ("%hhu", "%hhu"),
        ("%zu", "%z"),
        ("%jd", "%j"),
        ("%qd", "%q"),
        ("%lf", "%lf"),
        ("%hs", "%hs"),
        ("%llp", "%llp"),
    ] {
        let src = format!("BEGIN {{ printf(\"{fmt}\\n\", 1); }}");
        let e = check(&src).expect_err(&src);
        assert_eq!(
            e.message,
            format!("format conversion #1 is undefined: {name}"),
            "{src}"
        );
    }
}

#[test]
fn printa_value_conversions_take_the_aggregations_type() {
    // count() is uint64_t, the others int64_t
    check("BEGIN { @c = count(); } END { printa(\"%@lu %@llx %@llu\\n\", @c); }")
        .unwrap_or_else(|e| panic!("{e}"));
    check("BEGIN { @s = sum(1); } END { printa(\"%@ld %@lld %@llx\\n\", @s); }")
        .unwrap_or_else(|e| panic!("{e}"));
    let e = check("BEGIN { @s = sum(1); } END { printa(\"%@lu\\n\", @s); }").unwrap_err();
    assert_eq!(e.tag, ErrTag::D_PRINTF_ARG_TYPE);
    assert_eq!(
        e.message,
        "printa( ) aggregating action is incompatible with conversion #1 prototype:\n\tconversion: %lu\n\t prototype: unsigned long\n\t  argument: int64_t"
    );
    let e = check("BEGIN { @s[1] = count(); } END { printa(\"%hd %@d\\n\", @s); }").unwrap_err();
    assert_eq!(
        e.message,
        "printa( ) argument #2 is incompatible with conversion #1 prototype:\n\tconversion: %hd\n\t prototype: short\n\t  argument: int"
    );
    check("BEGIN { @s[(short)1] = count(); } END { printa(\"%hd %@d\\n\", @s); }")
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Kernel types named as GCC names them in BTF and DWARF (`short unsigned int`, `long int`,
/// `long long unsigned int`) are the shorts, longs and long longs they are.
#[test]
fn kernel_integer_names() {
    let mut c = Container::new();
    let int = |c: &mut Container, name: &str, signed: bool, size: u64| {
        c.add(Type::new(
            name,
            TypeKind::Integer(IntEncoding {
                flags: if signed { CTF_INT_SIGNED } else { 0 },
                offset: 0,
                bits: (size * 8) as u16,
            }),
            size,
        ))
    };
    let us = int(&mut c, "short unsigned int", false, 2);
    let li = int(&mut c, "long int", true, 8);
    let llu = int(&mut c, "long long unsigned int", false, 8);
    let m = |name: &str, type_id, offset_bits| Member {
        name: name.into(),
        type_id,
        offset_bits,
    };
    c.add(Type::new(
        "k",
        TypeKind::Struct(vec![m("us", us, 0), m("li", li, 64), m("llu", llu, 128)]),
        24,
    ));
    let compile_k = |body: &str| {
        let src = format!("BEGIN {{ this->k = (struct k *)arg0; {body} }}");
        compile_with_types(
            &src,
            &CompileOptions::default(),
            vec![Box::new(dtrace_compiler::ctf_types::CtfTypes::new(
                Arc::new(c.clone()),
            ))],
        )
        .map(|_| ())
    };
    compile_k(
        "printf(\"%hx %hu %lx %ld %llx %llu\\n\", this->k->us, this->k->us, this->k->li, \
         this->k->li, this->k->llu, this->k->llu);",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let e = compile_k("printf(\"%hd\\n\", this->k->us);").unwrap_err();
    assert_eq!(e.tag, ErrTag::D_PRINTF_ARG_TYPE);
    let e = compile_k("printf(\"%lx\\n\", this->k->llu);").unwrap_err();
    assert_eq!(e.tag, ErrTag::D_PRINTF_ARG_TYPE, "{e}");
}

/// `%A` takes a plain integer or pointer only with a target process (`-p`/`-c`: the `target`
/// macro set); without one, DTrace wants `uaddr()` (`pfcheck_uaddr`).
#[test]
fn user_address_conversion_needs_a_target() {
    let src = "syscall::write:entry { printf(\"%A\\n\", ucaller); }";
    let e = check(src).unwrap_err();
    assert_eq!(e.tag, ErrTag::D_PRINTF_ARG_TYPE);
    assert_eq!(
        e.message,
        "printf( ) argument #2 is incompatible with conversion #1 prototype:\n\tconversion: %A\n\t prototype: pointer or integer (with -p/-c) or _usymaddr (without -p/-c)\n\t  argument: uint64_t"
    );
    let with = |target: &str| CompileOptions {
        macros: vec![("target".into(), target.into())],
        ..Default::default()
    };
    assert!(compile(src, &with("0")).is_err());
    compile(src, &with("1234")).unwrap_or_else(|e| panic!("{e}"));
    check("syscall::write:entry { printf(\"%A\\n\", uaddr(ucaller)); }")
        .unwrap_or_else(|e| panic!("{e}"));
}
