//! Members of the running kernel's types (BTF) reached through anonymous struct and union members
//! (C11; `struct sk_buff`'s `next`/`dev`/`transport_header`, `struct page`'s `lru`, ...) and
//! kernel bit-fields: `offsetof()`, reads through a pointer and bit-field assignment in a D
//! variable, each checked against what GCC computes from the same BTF (`bpftool btf dump ...
//! format c`) over the same bytes. Skipped (with a reason) without BTF, bpftool or gcc.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use dtrace_compiler::ctf_types::CtfTypes;
use dtrace_compiler::{compile_with_types, CompileOptions};
use dtrace_ctf::{KernelTypes, SYS_KERNEL_BTF};
use dtrace_dif::program::Program;
use dtrace_dif::vm::fake::{FakeContext, FakeMemory};
use dtrace_dif::vm::{Machine, VarState, VmOptions};
use dtrace_testkit::{have_program, skip_unless, XorShift};

/// `offsetof(struct T, m)` pairs: members inside anonymous structs and unions, and direct ones.
const OFFSETS: &[(&str, &str)] = &[
    ("sk_buff", "next"),
    ("sk_buff", "prev"),
    ("sk_buff", "dev"),
    ("sk_buff", "rbnode"),
    ("sk_buff", "tstamp"),
    ("sk_buff", "len"),
    ("sk_buff", "csum"),
    ("sk_buff", "protocol"),
    ("sk_buff", "transport_header"),
    ("page", "lru"),
    ("page", "mapping"),
    ("page", "private"),
    ("mm_struct", "mmap_base"),
    ("task_struct", "pid"),
    ("task_struct", "comm"),
    ("file", "f_inode"),
];

/// Scalar members (bit-fields too) of `struct sk_buff` read through a pointer.
const VALUES: &[&str] = &[
    "len",
    "data_len",
    "protocol",
    "transport_header",
    "network_header",
    "pkt_type",
    "cloned",
    "nohdr",
    "ignore_df",
    "queue_mapping",
    "mark",
    "tstamp",
];

/// Bit-field assignments made to a copy of the struct, then the members read back.
const ASSIGN: &str = "pkt_type = 6; s.cloned = 0; s.nohdr = 3; s.ignore_df += 1";
const AFTER: &[&str] = &[
    "pkt_type",
    "cloned",
    "nohdr",
    "ignore_df",
    "len",
    "protocol",
];

fn run_all(p: &Program, bytes: Vec<u8>) -> Vec<i64> {
    let mut state = VarState::new(VmOptions::default());
    let mut m = Machine::new();
    let mut ctx = FakeContext::new();
    ctx.args = vec![0x10000];
    let mut mem = FakeMemory::new();
    mem.kernel.insert(0x10000, bytes);
    m.begin_firing();
    let mut out = Vec::new();
    for a in &p.ecbs[0].actions {
        let o = a.difo.as_ref().expect("object");
        dtrace_dif::verify::verify(o).expect("verifies");
        let r = m
            .run(o, &mut state, &mut ctx, &mut mem)
            .unwrap_or_else(|f| panic!("fault {f:?}"));
        if o.rtype.size > 0 {
            out.push(r as i64);
        }
    }
    out
}

#[test]
fn anonymous_members_and_bitfields_match_gcc() {
    let have = Path::new(SYS_KERNEL_BTF).join("vmlinux").exists()
        && have_program("bpftool")
        && have_program("gcc");
    if !skip_unless(
        have,
        "anonymous_members_and_bitfields_match_gcc",
        "needs /sys/kernel/btf/vmlinux, bpftool and gcc",
    ) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("dtrace-anon-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let dump = Command::new("bpftool")
        .args([
            "btf",
            "dump",
            "file",
            "/sys/kernel/btf/vmlinux",
            "format",
            "c",
        ])
        .output()
        .expect("bpftool runs");
    assert!(dump.status.success(), "bpftool btf dump");
    std::fs::write(dir.join("vmlinux.h"), &dump.stdout).expect("vmlinux.h");

    // the struct's bytes: pseudo-random, the same for GCC's program and the DIF machine
    let mut rng = XorShift(0x5eed_1234_abcd_0001);
    let bytes: Vec<u8> = (0..4096).map(|_| rng.next() as u8).collect();
    std::fs::write(dir.join("bytes"), &bytes).expect("bytes");

    let mut c = String::from(
        "#include \"vmlinux.h\"\nextern int printf(const char *, ...);\n\
         extern void *fopen(const char *, const char *);\n\
         extern unsigned long fread(void *, unsigned long, unsigned long, void *);\n\
         static unsigned char buf[4096] __attribute__((aligned(64)));\n\
         int main(int argc, char **argv) {\n\
         fread(buf, 1, sizeof buf, fopen(argv[1], \"rb\"));\n\
         struct sk_buff *p = (struct sk_buff *)buf; struct sk_buff s = *p;\n",
    );
    let mut d = String::from("BEGIN {\n");
    for (t, m) in OFFSETS {
        c += &format!("printf(\"%lu\\n\", (unsigned long)__builtin_offsetof(struct {t}, {m}));\n");
        d += &format!("trace(offsetof(struct {t}, {m}));\n");
    }
    for m in VALUES {
        c += &format!("printf(\"%lld\\n\", (long long)p->{m});\n");
        d += &format!("trace(((struct sk_buff *)arg0)->{m});\n");
    }
    c += &format!("s.{ASSIGN};\n");
    d += &format!(
        "this->s = *(struct sk_buff *)arg0;\nthis->s.{};\n",
        ASSIGN.replace("s.", "this->s.")
    );
    for m in AFTER {
        c += &format!("printf(\"%lld\\n\", (long long)s.{m});\n");
        d += &format!("trace(this->s.{m});\n");
    }
    c += "return 0; }\n";
    d += "}\n";
    std::fs::write(dir.join("oracle.c"), &c).expect("oracle.c");
    let cc = Command::new("gcc")
        .arg("-w")
        .arg("-o")
        .arg(dir.join("oracle"))
        .arg(dir.join("oracle.c"))
        .output()
        .expect("gcc runs");
    assert!(
        cc.status.success(),
        "gcc: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let run = Command::new(dir.join("oracle"))
        .arg(dir.join("bytes"))
        .output()
        .expect("oracle runs");
    let want: Vec<i64> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(|l| {
            l.parse::<u64>()
                .map(|v| v as i64)
                .or_else(|_| l.parse::<i64>())
        })
        .collect::<Result<_, _>>()
        .expect("numbers");

    let k = KernelTypes::load(Path::new(SYS_KERNEL_BTF)).expect("vmlinux BTF converts");
    let p = compile_with_types(
        &d,
        &CompileOptions::default(),
        vec![Box::new(CtfTypes::new(Arc::clone(&k.vmlinux)))],
    )
    .unwrap_or_else(|e| panic!("{e}\n{d}"));
    let got = run_all(&p, bytes);
    let names: Vec<String> = OFFSETS
        .iter()
        .map(|(t, m)| format!("offsetof(struct {t}, {m})"))
        .chain(VALUES.iter().map(|m| format!("p->{m}")))
        .chain(AFTER.iter().map(|m| format!("s.{m} after assignment")))
        .collect();
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for ((n, g), w) in names.iter().zip(&got).zip(&want) {
        assert_eq!(g, w, "{n}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same without a kernel: CTF types with an anonymous union holding an anonymous struct;
/// `offsetof()` and `->` find members inside them (offsets added up), also for a struct first
/// seen as a pointer's target (imported as a forward declaration, completed by `offsetof`).
#[test]
fn anonymous_members_of_ctf_types() {
    use dtrace_ctf::{Container, IntEncoding, Member, Type, TypeKind, CTF_INT_SIGNED};
    let mut c = Container::new();
    let int = |c: &mut Container, name: &str, size: u64| {
        c.add(Type::new(
            name,
            TypeKind::Integer(IntEncoding {
                flags: CTF_INT_SIGNED,
                offset: 0,
                bits: (size * 8) as u16,
            }),
            size,
        ))
    };
    let i32t = int(&mut c, "int", 4);
    let i16t = int(&mut c, "short", 2);
    let i64t = int(&mut c, "long", 8);
    let m = |name: &str, type_id, offset_bits| Member {
        name: name.into(),
        type_id,
        offset_bits,
    };
    // struct outer { int a; union { int b; struct { short c; short d; }; }; long e; }
    let inner = c.add(Type::new(
        "",
        TypeKind::Struct(vec![m("c", i16t, 0), m("d", i16t, 16)]),
        4,
    ));
    let un = c.add(Type::new(
        "",
        TypeKind::Union(vec![m("b", i32t, 0), m("", inner, 0)]),
        4,
    ));
    let outer = c.add(Type::new(
        "outer",
        TypeKind::Struct(vec![m("a", i32t, 0), m("", un, 32), m("e", i64t, 64)]),
        16,
    ));
    let ptr = c.add(Type::new("", TypeKind::Pointer(outer), 8));
    c.add(Type::new(
        "holder",
        TypeKind::Struct(vec![m("p", ptr, 0)]),
        8,
    ));
    let src = "BEGIN {
        trace(((struct holder *)arg0)->p);
        trace(offsetof(struct outer, d));
        trace(offsetof(struct outer, b));
        trace(offsetof(struct outer, e));
        trace(((struct outer *)(arg0 + 8))->d);
        trace(((struct holder *)arg0)->p->c);
    }";
    let p = compile_with_types(
        src,
        &CompileOptions::default(),
        vec![Box::new(CtfTypes::new(Arc::new(c)))],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // at arg0: a holder whose p points just after it, at a struct outer (c at +4, d at +6)
    let mut b = vec![0u8; 24];
    b[0..8].copy_from_slice(&0x10008u64.to_le_bytes());
    b[12..14].copy_from_slice(&(-2i16).to_le_bytes());
    b[14..16].copy_from_slice(&(300i16).to_le_bytes());
    assert_eq!(run_all(&p, b), [0x10008, 6, 4, 8, 300, -2]);
}
