//! `print()` end to end in the library: D compiled (against D declarations, and against the running
//! kernel's BTF where it is published), run by the in-process framework, and the typed output compared
//! with the output DTrace's `dt_print` gives for the same values (its test suite's `tst.primitive`,
//! `tst.struct`, `tst.bitfield`, `tst.array`, `tst.enum` and the rules of `dt_print.c`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dtrace_compiler::ctf_types::CtfTypes;
use dtrace_compiler::types::TypeSource;
use dtrace_compiler::{compile_with_types, CompileOptions};
use dtrace_consumer::consume::DefaultOutput;
use dtrace_consumer::fwtracer::FrameworkTracer;
use dtrace_consumer::handle::{Handle, WorkStatus};

/// Runs `src` (which must `exit()`) and returns what it printed, as `dtrace -q` would (without the
/// newline dtrace(1) adds when the run ends).
fn run_with(src: &str, sources: Vec<Box<dyn TypeSource>>, quiet: bool) -> String {
    let prog = compile_with_types(src, &CompileOptions::default(), sources).expect("compiles");
    let mut h = Handle::open(Box::new(FrameworkTracer::new(1)), None);
    h.exec(&prog).expect("exec");
    h.go().expect("go");
    let mut printer = DefaultOutput {
        quiet,
        ..Default::default()
    };
    let printer = std::cell::RefCell::new(&mut printer);
    let mut out = Vec::new();
    for _ in 0..1000 {
        let r = h
            .work(
                &mut out,
                &mut |pd, o| printer.borrow_mut().probe(pd, o),
                &mut |pd, r, o| printer.borrow_mut().record(pd, r, o),
            )
            .expect("work");
        if r == WorkStatus::Done {
            return String::from_utf8(out).expect("utf-8");
        }
        std::thread::sleep(Duration::from_millis(1));
        h.poll().expect("poll");
    }
    panic!("the program did not exit");
}

fn run(src: &str) -> String {
    run_with(src, Vec::new(), true)
}

#[test]
fn primitives() {
    let got = run(r#"
        BEGIN {
            print((char)'a');
            print((int)-1);
            print((unsigned int)23);
            print((short)456);
            print((unsigned short)789);
            print((long)1234);
            print((ulong_t)56789);
            print((void *)0x1234);
            print("hello");
            print(10);
            print(0);
            print((char)0);
            print((char)10);
            print((char)-1);
            print((uint8_t)200);
            print((int8_t)'x');
            print((_Bool)1);
            print((long long)-2);
            exit(0);
        }"#);
    assert_eq!(
        got,
        "char 'a'\nint 0xffffffff\nunsigned int 0x17\nshort 0x1c8\nunsigned short 0x315\n\
         long 0x4d2\nulong_t 0xddd5\nvoid * 0x1234\nstring \"hello\"\nint 0xa\nint 0\n\
         char '\\0'\nchar '\\012'\nchar '\\37777777777'\nuint8_t 0xc8\nint8_t 'x'\n_Bool 0x1\n\
         long long 0xfffffffffffffffe\n"
    );
}

#[test]
fn strings_that_are_not_printable_are_character_arrays() {
    // a string with a newline fails dt_print_array's string test: every element is printed
    let got = run(r#"
        #pragma D option strsize=8
        BEGIN { print("a\tb"); exit(0); }"#);
    assert_eq!(
        got,
        "string [ 'a', '\\011', 'b', '\\0', '\\0', '\\0', '\\0', '\\0' ]\n"
    );
}

#[test]
fn struct_with_nested_anonymous_struct_and_pointers() {
    let got = run(r#"
        typedef struct forward forward_t;
        typedef struct foo {
            int a;
            void *b;
            struct {
                uint64_t alpha;
                uint64_t beta;
            } c;
            ushort_t d;
            int e;
            forward_t *f;
            char *g;
        } foo_t;
        BEGIN {
            this->s = (foo_t *)alloca(sizeof (foo_t));
            this->s->a = 1;
            this->s->b = (void *)2;
            this->s->c.alpha = 3;
            this->s->c.beta = 4;
            this->s->d = 5;
            this->s->e = 0;
            this->s->f = (void *)7;
            this->s->g = (char *)0xffff880012345678;
            print(*this->s);
            exit(0);
        }"#);
    assert_eq!(
        got,
        "foo_t {\n    int a = 0x1\n    void *b = 0x2\n    struct c = {\n        uint64_t alpha = 0x3\n\
         \x20       uint64_t beta = 0x4\n    }\n    ushort_t d = 0x5\n    int e = 0\n\
         \x20   forward_t *f = 0x7\n    char *g = 0xffff880012345678\n}"
    );
}

#[test]
fn bit_fields() {
    let got = run(r#"
        typedef struct foo {
            int a:4;
            int b:7;
            int c:1;
            int d:2;
            unsigned int e:16;
            unsigned int f:24;
        } foo_t;
        BEGIN {
            this->s = (foo_t *)alloca(sizeof (foo_t));
            this->w = (uint32_t *)this->s;
            this->w[0] = 0x02000501;
            this->w[1] = 0xbeef;
            this->w[2] = 0x123456;
            print(*this->s);
            exit(0);
        }"#);
    // D lays each bit-field out from a byte boundary; a 16-bit one is a plain 2-byte integer
    // (no width shown), a 24-bit one is not a power-of-two size and so a bit-field again
    assert_eq!(
        got,
        "foo_t {\n    int a :4 = 0x1\n    int b :7 = 0x5\n    int c :1 = 0\n    int d :2 = 0x2\n\
         \x20   unsigned int e = 0xbeef\n    unsigned int f :24 = 0x123456\n}"
    );
}

#[test]
fn arrays_of_integers_characters_and_structs() {
    let got = run(r#"
        typedef struct bar {
            int alpha;
        } bar_t;
        typedef struct foo {
            int a[3];
            char b[30];
            bar_t c[2];
            char d[3];
            short grid[2][2];
        } foo_t;
        BEGIN {
            this->f = (foo_t *)alloca(sizeof (foo_t));
            this->i = (int *)this->f;
            this->i[0] = 1;
            this->i[1] = 2;
            this->i[2] = 3;
            this->p = (char *)this->f + offsetof(foo_t, b);
            this->p[0] = 'a';
            this->p[1] = 'b';
            this->i = (int *)((char *)this->f + offsetof(foo_t, c));
            this->i[0] = 5;
            this->i[1] = 6;
            this->p = (char *)this->f + offsetof(foo_t, d);
            this->p[0] = 4;
            this->h = (short *)((char *)this->f + offsetof(foo_t, grid));
            this->h[3] = 9;
            print(this->f->a);
            print(this->f->b);
            print(this->f->c);
            print(*this->f);
            exit(0);
        }"#);
    let want = "int [3] [ 0x1, 0x2, 0x3 ]\n\
                char [30] \"ab\"\n\
                bar_t [2] [ \n    bar_t {\n        int alpha = 0x5\n    }, \n    bar_t {\n        int alpha = 0x6\n    }\n]\n\
                foo_t {\n    int [3] a = [ 0x1, 0x2, 0x3 ]\n    char [30] b = [ \"ab\" ]\n\
                \x20   bar_t [2] c = [ \n        bar_t {\n            int alpha = 0x5\n        }, \n        bar_t {\n            int alpha = 0x6\n        }\n    ]\n\
                \x20   char [3] d = [ '\\004', '\\0', '\\0' ]\n\
                \x20   short [2][2] grid = [ [ 0, 0 ], [ 0, 0x9 ] ]\n}";
    assert_eq!(got, want);
}

#[test]
fn enums_and_unions() {
    let got = run(r#"
        enum simpson { homer, marge, bart, lisa, maggie, snowball_ii, santas_little_helper };
        union num { int i; char c[4]; unsigned short s; };
        struct holder { enum simpson who; union num n; };
        BEGIN {
            print(bart);
            print((enum simpson)4);
            print((enum simpson)42);
            this->h = (struct holder *)alloca(sizeof (struct holder));
            this->h->who = lisa;
            this->h->n.i = 0x41424344;
            print(*this->h);
            exit(0);
        }"#);
    assert_eq!(
        got,
        "enum simpson bart\nenum simpson maggie\nenum simpson 42\n\
         struct holder {\n    enum simpson who = lisa\n    union num n = {\n        int i = 0x41424344\n\
         \x20       char [4] c = [ 'D', 'C', 'B', 'A' ]\n        unsigned short s = 0x4344\n    }\n}"
    );
}

#[test]
fn translated_structs() {
    // the shape of DTrace's tst.xlate: print() of a dereferenced translation
    let got = run(r#"
        struct in { int a; long b; };
        typedef struct out { int doubled; long b; char tag; } out_t;
        translator out_t < struct in *I > { doubled = I->a * 2; b = I->b; tag = 'z'; };
        BEGIN {
            this->i = (struct in *)alloca(sizeof (struct in));
            this->i->a = 21;
            this->i->b = -1;
            print(*(xlate < out_t * > (this->i)));
            exit(0);
        }"#);
    assert_eq!(
        got,
        "out_t {\n    int doubled = 0x2a\n    long b = 0xffffffffffffffff\n    char tag = 'z'\n}"
    );
}

#[test]
fn default_output_puts_the_value_after_the_probe() {
    let got = run_with(
        "struct p { int x; int y; }; BEGIN { this->v = (struct p *)alloca(8); this->v->y = 2; print(*this->v); print(7); exit(0); }",
        Vec::new(),
        false,
    );
    assert_eq!(
        got,
        "CPU     ID                    FUNCTION:NAME\n  0      1                           :BEGIN struct p {\n    int x = 0\n    int y = 0x2\n}int 0x7\n\n"
    );
}

#[test]
fn kernel_types_from_btf() {
    let btf = Path::new(dtrace_ctf::SYS_KERNEL_BTF);
    if !dtrace_testkit::skip_unless(
        btf.join("vmlinux").exists(),
        "kernel_types_from_btf",
        "no /sys/kernel/btf/vmlinux",
    ) {
        return;
    }
    let k = dtrace_ctf::KernelTypes::load(btf).expect("vmlinux BTF converts");
    let sources =
        || -> Vec<Box<dyn TypeSource>> { vec![Box::new(CtfTypes::new(Arc::clone(&k.vmlinux)))] };
    let got = run_with(
        r#"BEGIN {
            this->l = (struct list_head *)alloca(sizeof (struct list_head));
            this->l->next = (struct list_head *)0xffff888000001000;
            print(*this->l);
            this->t = (struct timespec64 *)alloca(sizeof (struct timespec64));
            this->t->tv_sec = 12;
            this->t->tv_nsec = 345;
            print(*this->t);
            exit(0);
        }"#,
        sources(),
        true,
    );
    assert_eq!(
        got,
        "struct list_head {\n    struct list_head *next = 0xffff888000001000\n    struct list_head *prev = 0\n}\
         struct timespec64 {\n    time64_t tv_sec = 0xc\n    long int tv_nsec = 0x159\n}"
    );
}

#[test]
fn print_records_go_through_the_record_callback() {
    let prog = compile_with_types(
        "BEGIN { print(1); print(2); exit(0); }",
        &CompileOptions::default(),
        Vec::new(),
    )
    .expect("compiles");
    let mut h = Handle::open(Box::new(FrameworkTracer::new(1)), None);
    h.exec(&prog).expect("exec");
    h.go().expect("go");
    let mut out = Vec::new();
    let mut seen = 0;
    for _ in 0..1000 {
        let r = h
            .work(
                &mut out,
                &mut |_, _| dtrace_consumer::ConsumeAction::This,
                &mut |_, r, _| match r {
                    // the first print() is let through, the second skipped
                    Some(r) if r.action == dtrace_dif::program::ActionKind::LibAct => {
                        seen += 1;
                        if seen == 1 {
                            dtrace_consumer::ConsumeAction::This
                        } else {
                            dtrace_consumer::ConsumeAction::Next
                        }
                    }
                    Some(_) => dtrace_consumer::ConsumeAction::Next,
                    None => dtrace_consumer::ConsumeAction::Next,
                },
            )
            .expect("work");
        if r == WorkStatus::Done {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
        h.poll().expect("poll");
    }
    assert_eq!(seen, 2);
    assert_eq!(String::from_utf8(out).unwrap(), "int 0x1\n");
}
