//! `print()` end to end in the library: D compiled (against D declarations, and against the running
//! kernel's BTF where it is published), run by the in-process framework, and the typed output compared
//! with what DTrace for Linux prints for a pointer: the address and ` = *`, then the object in the
//! typed-data style of its test suite's `print/tst.print.*.r` files (members that are zero left
//! out, `printsize` bytes at most).

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

/// The output with the 44-column margin shown as `|` and addresses as `ADDR`.
fn shown(s: &str) -> String {
    let s = s.replace(&" ".repeat(44), "|");
    let mut out = String::new();
    for line in s.split_inclusive('\n') {
        let Some((before, rest)) = line.split_once(" = *") else {
            out.push_str(line);
            continue;
        };
        let (lead, addr) = before
            .rsplit_once(' ')
            .map_or(("", before), |(l, a)| (l, a));
        if !addr.starts_with("0x") {
            out.push_str(line);
            continue;
        }
        if !lead.is_empty() {
            out.push_str(lead);
            out.push(' ');
        }
        out.push_str("ADDR = *");
        out.push_str(rest);
    }
    out
}

#[test]
fn scalars_through_pointers() {
    let got = run(r#"
        BEGIN {
            this->p = (int64_t *)alloca(8);
            *this->p = -2;
            print(this->p);
            print((int *)this->p);
            print((unsigned char *)this->p);
            print((char *)this->p);
            print((void **)this->p);
            *this->p = 0;
            print((int *)this->p);
            print((void *)0x1234);
            exit(0);
        }"#);
    assert_eq!(
        shown(&got),
        "ADDR = *\n|(int64_t)-2\nADDR = *\n|(int)-2\nADDR = *\n|(unsigned char)254\n\
         ADDR = *\n|(char)-2\nADDR = *\n|(void *)0xfffffffffffffffe\nADDR = *\n|(int)0\n\
         ADDR = *\n"
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
            print(this->s);
            exit(0);
        }"#);
    assert_eq!(
        shown(&got),
        "ADDR = *\n|(foo_t) {\n| .a = (int)1,\n| .b = (void *)0x2,\n| .c = (struct) {\n\
         |  .alpha = (uint64_t)3,\n|  .beta = (uint64_t)4,\n| },\n| .d = (ushort_t)5,\n\
         | .f = (forward_t *)0x7,\n| .g = (char *)0xffff880012345678,\n|}\n"
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
            print(this->s);
            exit(0);
        }"#);
    assert_eq!(
        shown(&got),
        "ADDR = *\n|(foo_t) {\n| .a = (int)0x1,\n| .b = (int)0x5,\n| .d = (int)0x2,\n\
         | .e = (unsigned int)48879,\n| .f = (unsigned int)0x123456,\n|}\n"
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
            this->i[2] = 3;
            this->p = (char *)this->f + offsetof(foo_t, b);
            this->p[0] = 'a';
            this->p[1] = 'b';
            this->i = (int *)((char *)this->f + offsetof(foo_t, c));
            this->i[1] = 6;
            this->p = (char *)this->f + offsetof(foo_t, d);
            this->p[0] = 4;
            this->h = (short *)((char *)this->f + offsetof(foo_t, grid));
            this->h[3] = 9;
            print(this->f);
            exit(0);
        }"#);
    assert_eq!(
        shown(&got),
        "ADDR = *\n|(foo_t) {\n| .a = (int [3]) [\n|  (int)1,\n|  (int)0,\n|  (int)3,\n| ],\n\
         | .b = (char [30]) [\n|  (char)'a',\n|  (char)'b',\n| ],\n| .c = (bar_t [2]) [\n\
         |  (bar_t) {\n|  },\n|  (bar_t) {\n|   .alpha = (int)6,\n|  },\n| ],\n\
         | .d = (char [3]) [\n|  (char)4,\n| ],\n| .grid = (short [2][2]) [\n|  (short [2]) [\n\
         |   (short)0,\n|   (short)0,\n|  ],\n|  (short [2]) [\n|   (short)0,\n|   (short)9,\n\
         |  ],\n| ],\n|}\n"
    );
}

#[test]
fn enums_and_unions() {
    let got = run(r#"
        enum simpson { homer, marge, bart, lisa, maggie, snowball_ii, santas_little_helper };
        union num { int i; char c[4]; unsigned short s; };
        struct holder { enum simpson who; union num n; };
        BEGIN {
            this->h = (struct holder *)alloca(sizeof (struct holder));
            this->h->who = lisa;
            this->h->n.i = 0x41424344;
            print(this->h);
            this->h->who = (enum simpson)42;
            print((enum simpson *)this->h);
            exit(0);
        }"#);
    assert_eq!(
        shown(&got),
        "ADDR = *\n|(struct holder) {\n| .who = (enum simpson)lisa,\n| .n = (union num) {\n\
         |  .i = (int)1094861636,\n|  .c = (char [4]) [\n|   (char)'D',\n|   (char)'C',\n\
         |   (char)'B',\n|   (char)'A',\n|  ],\n|  .s = (unsigned short)17220,\n| },\n|}\n\
         ADDR = *\n|(enum simpson)42\n"
    );
}

#[test]
fn printsize_limits_the_bytes_shown_and_may_change_while_tracing() {
    let got = run(r#"
        #pragma D option printsize=8
        struct three { long a; long b; long c; };
        BEGIN {
            this->t = (struct three *)alloca(sizeof (struct three));
            this->t->a = 1;
            this->t->b = 2;
            this->t->c = 3;
            print(this->t);
            setopt("printsize", "16");
            print(this->t);
            setopt("printsize", "1k");
            print(this->t);
            exit(0);
        }"#);
    assert_eq!(
        shown(&got),
        "ADDR = *\n|(struct three) {\n| .a = (long)1,\n| ...\n|}\n\
         ADDR = *\n|(struct three) {\n| .a = (long)1,\n| .b = (long)2,\n| ...\n|}\n\
         ADDR = *\n|(struct three) {\n| .a = (long)1,\n| .b = (long)2,\n| .c = (long)3,\n|}\n"
    );
}

#[test]
fn an_argument_is_evaluated_once() {
    let got = run(r#"
        BEGIN {
            this->a = (int *)alloca(8);
            this->a[0] = 10;
            this->a[1] = 20;
            this->p = this->a;
            print(this->p++);
            print(this->p);
            exit(0);
        }"#);
    assert_eq!(shown(&got), "ADDR = *\n|(int)10\nADDR = *\n|(int)20\n");
}

#[test]
fn default_output_puts_the_value_after_the_probe() {
    let got = run_with(
        "struct p { int x; int y; }; BEGIN { this->v = (struct p *)alloca(8); this->v->y = 2; print(this->v); exit(0); }",
        Vec::new(),
        false,
    );
    assert_eq!(
        shown(&got),
        "CPU     ID                    FUNCTION:NAME\n  0      1                           :BEGIN ADDR = *\n\
         |(struct p) {\n| .y = (int)2,\n|}\n\n"
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
            print(this->l);
            this->t = (struct timespec64 *)alloca(sizeof (struct timespec64));
            this->t->tv_sec = 12;
            this->t->tv_nsec = 345;
            print(this->t);
            exit(0);
        }"#,
        sources(),
        true,
    );
    assert_eq!(
        shown(&got),
        "ADDR = *\n|(struct list_head) {\n| .next = (struct list_head *)0xffff888000001000,\n|}\n\
         ADDR = *\n|(struct timespec64) {\n| .tv_sec = (time64_t)12,\n| .tv_nsec = (long int)345,\n|}\n"
    );
}

#[test]
fn print_records_go_through_the_record_callback() {
    let prog = compile_with_types(
        "BEGIN { print((int *)alloca(4)); print((int *)alloca(4)); exit(0); }",
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
    assert_eq!(
        shown(&String::from_utf8(out).unwrap()),
        "ADDR = *\n|(int)0\n"
    );
}
