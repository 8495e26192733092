//! Bit-fields: D declarations laid out as DTrace (libctf) lays them out, CTF/BTF bit-fields at any
//! bit offset, their values (shift, mask, sign extension) through the DIF interpreter, and the
//! errors DTrace gives for `&`, `sizeof`, `offsetof` of a bit-field and bad declarations.

use std::sync::Arc;

use dtrace_compiler::{compile, compile_with_types, CompileOptions, ErrTag};
use dtrace_ctf::{Container, IntEncoding, Member, Type, TypeKind, CTF_INT_SIGNED};
use dtrace_dif::program::Program;
use dtrace_dif::vm::fake::{FakeContext, FakeMemory};
use dtrace_dif::vm::{Machine, VarState, VmOptions};

/// Runs every action of the first ECB with `bytes` at kernel address 0x1000 (= `arg0`), each value
/// cut to its object's size and printed signed when `signed`.
fn values(p: &Program, bytes: Vec<u8>) -> Vec<i64> {
    let mut state = VarState::new(VmOptions::default());
    let mut m = Machine::new();
    let mut ctx = FakeContext::new();
    ctx.args = vec![0x1000];
    let mut mem = FakeMemory::new();
    mem.kernel.insert(0x1000, bytes);
    m.begin_firing();
    let mut out = Vec::new();
    for a in &p.ecbs[0].actions {
        let o = a.difo.as_ref().expect("object");
        dtrace_dif::verify::verify(o).expect("verifies");
        let r = m
            .run(o, &mut state, &mut ctx, &mut mem)
            .unwrap_or_else(|f| panic!("fault {f:?}"));
        let bits = o.rtype.size * 8;
        let v = if bits > 0 && bits < 64 {
            ((r << (64 - bits)) as i64) >> (64 - bits)
        } else {
            r as i64
        };
        out.push(v);
    }
    out
}

#[test]
fn d_declared_bitfields_in_dtrace_layout() {
    let src = "struct bf { unsigned int a:3; int b:5; unsigned int c:12; char d; long e:40; };
        BEGIN { trace(((struct bf *)arg0)->a); trace(((struct bf *)arg0)->b);
                trace(((struct bf *)arg0)->c); trace(((struct bf *)arg0)->d);
                trace(((struct bf *)arg0)->e); trace(sizeof (struct bf));
                trace(offsetof(struct bf, d)); trace(((struct bf *)arg0)->b + 1); }";
    let p = compile(src, &CompileOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    // a: byte 0; b: byte 1; c: bytes 2-3; d: byte 4; e: bytes 8-15 (8-byte word); size 16
    let mut b = vec![0u8; 16];
    b[0] = 0xf8 | 5; // a = 5, garbage above its 3 bits
    b[1] = 0xe0 | 0b11101; // b = -3 in 5 bits
    b[2..4].copy_from_slice(&(0xf000u16 | 0xabc).to_le_bytes());
    b[4] = b'x';
    b[8..16].copy_from_slice(&((-2i64 as u64 & 0xff_ffff_ffff) | 0xabcd << 48).to_le_bytes());
    assert_eq!(values(&p, b), [5, -3, 0xabc, b'x' as i64, -2, 16, 4, -2]);
}

/// struct flags { int lo; unsigned int f1:1, f2:4; int s:7; unsigned long long hi:20; }
/// as a C compiler packs it: f1 at bit 32, f2 at 33, s at 37, hi at 64
fn flags_types() -> Vec<Box<dyn dtrace_compiler::TypeSource>> {
    let mut c = Container::new();
    let int = c.add(Type::new(
        "int",
        TypeKind::Integer(IntEncoding {
            flags: CTF_INT_SIGNED,
            offset: 0,
            bits: 32,
        }),
        4,
    ));
    let field = |c: &mut Container, name: &str, signed: bool, bits: u16, size: u64| {
        c.add(Type {
            name: name.into(),
            kind: TypeKind::Integer(IntEncoding {
                flags: if signed { CTF_INT_SIGNED } else { 0 },
                offset: 0,
                bits,
            }),
            size,
            root: false,
        })
    };
    let u1 = field(&mut c, "unsigned int", false, 1, 4);
    let u4 = field(&mut c, "unsigned int", false, 4, 4);
    let s7 = field(&mut c, "int", true, 7, 4);
    let h20 = field(&mut c, "unsigned long long", false, 20, 8);
    let m = |name: &str, type_id, offset_bits| Member {
        name: name.into(),
        type_id,
        offset_bits,
    };
    c.add(Type::new(
        "flags",
        TypeKind::Struct(vec![
            m("lo", int, 0),
            m("f1", u1, 32),
            m("f2", u4, 33),
            m("s", s7, 37),
            m("hi", h20, 64),
        ]),
        16,
    ));
    vec![Box::new(dtrace_compiler::ctf_types::CtfTypes::new(
        Arc::new(c),
    ))]
}

#[test]
fn ctf_bitfields_at_bit_offsets() {
    let src = "BEGIN { this->f = (struct flags *)arg0; trace(this->f->lo); trace(this->f->f1);
        trace(this->f->f2); trace(this->f->s); trace(this->f->hi); trace(sizeof (this->f->lo)); }";
    let p = compile_with_types(src, &CompileOptions::default(), flags_types())
        .unwrap_or_else(|e| panic!("{e}"));
    let word: u32 = 1 | (9 << 1) | ((-5i32 as u32 & 0x7f) << 5) | (0xfff << 20);
    let mut b = vec![0u8; 16];
    b[0..4].copy_from_slice(&(-7i32).to_le_bytes());
    b[4..8].copy_from_slice(&word.to_le_bytes());
    b[8..16].copy_from_slice(&(0x12345u64 | 0xfff << 40).to_le_bytes());
    // trace(this->f) is the first action (an assignment): skip it
    let v = values(&p, b);
    assert_eq!(&v[1..], [-7, 1, 9, -5, 0x12345, 4]);
}

fn tag(src: &str) -> (ErrTag, String) {
    let e = compile(src, &CompileOptions::default()).unwrap_err();
    (e.tag, e.message)
}

#[test]
fn bitfield_errors_are_dtraces() {
    let decl = "struct bf { int a:3; int b; };\n";
    assert_eq!(
        tag(&format!(
            "{decl}BEGIN {{ trace(&((struct bf *)arg0)->a); }}"
        )),
        (
            ErrTag::D_ADDROF_BITFIELD,
            "cannot take address of bit-field".into()
        )
    );
    assert_eq!(
        tag(&format!(
            "{decl}BEGIN {{ trace(sizeof (((struct bf *)arg0)->a)); }}"
        )),
        (
            ErrTag::D_SIZEOF_BITFIELD,
            "cannot apply sizeof to a bit-field".into()
        )
    );
    assert_eq!(
        tag(&format!("{decl}BEGIN {{ trace(offsetof(struct bf, a)); }}")),
        (
            ErrTag::D_OFFSETOF_BITFIELD,
            "cannot take offset of a bit-field: a".into()
        )
    );
    assert_eq!(
        tag("struct bf { int a:33; };"),
        (
            ErrTag::D_DECL_BFSIZE,
            "bit-field too big for type: a".into()
        )
    );
    assert_eq!(
        tag("struct bf { string a:3; };"),
        (
            ErrTag::D_DECL_BFTYPE,
            "invalid type for bit-field: a".into()
        )
    );
    assert_eq!(
        tag("struct bf { int a:-1; };"),
        (
            ErrTag::D_DECL_BFCONST,
            "positive integral constant expression expected as bit-field size".into()
        )
    );
}

/// The traced values of the first ECB (assignments, which record nothing, skipped), each cut to
/// its object's size and shown signed; `arg0` is 0x1000 where `bytes` lie.
fn traced(p: &Program, bytes: Vec<u8>) -> Vec<i64> {
    let mut state = VarState::new(VmOptions::default());
    let mut m = Machine::new();
    let mut ctx = FakeContext::new();
    ctx.args = vec![0x1000];
    let mut mem = FakeMemory::new();
    mem.kernel.insert(0x1000, bytes);
    m.begin_firing();
    let mut out = Vec::new();
    for a in &p.ecbs[0].actions {
        let o = a.difo.as_ref().expect("object");
        dtrace_dif::verify::verify(o).expect("verifies");
        let r = m
            .run(o, &mut state, &mut ctx, &mut mem)
            .unwrap_or_else(|f| panic!("fault {f:?}"));
        let bits = o.rtype.size * 8;
        if bits == 0 {
            continue;
        }
        out.push(if bits < 64 {
            ((r << (64 - bits)) as i64) >> (64 - bits)
        } else {
            r as i64
        });
    }
    out
}

fn run_d(src: &str) -> Vec<i64> {
    let p = compile(src, &CompileOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    traced(&p, vec![0; 16])
}

/// `=`, compound assignment and `++`/`--` (pre and post) on bit-fields of a D variable: the
/// field's bits change, signed fields sign-extend, the neighbouring fields and bits keep their
/// values (seen through a union with the whole word), and each expression's value is the field's
/// value as C gives it (cut to the field's width).
#[test]
fn bitfield_places_assign_and_step() {
    let decl = "struct bf { unsigned int a:3; int b:5; unsigned int c:12; char d; long e:40; };
        union u { struct bf s; unsigned long long w[2]; };
        union u x;\n";
    // layout (see d_declared_bitfields_in_dtrace_layout): a at byte 0 bits 0-2, b at byte 1
    // bits 0-4, c at bytes 2-3 bits 0-11, d at byte 4, e at bytes 8-15 bits 0-39
    let v = run_d(&format!(
        "{decl}BEGIN {{
            x.w[0] = 0xffffffffffffffff; x.w[1] = 0xffffffffffffffff;
            x.s.a = 2; trace(x.w[0]);
            x.s.b = -3; trace(x.s.b); trace(x.w[0]);
            x.s.c = 0xabc; trace(x.s.c); trace(x.w[0]);
            x.s.e = -2; trace(x.s.e); trace(x.w[1]);
            trace(x.s.d);
        }}"
    ));
    let w0 = |a: u64, b: u64, c: u64| {
        let mut w = u64::MAX;
        w = (w & !0x7) | a;
        w = (w & !(0x1f << 8)) | (b << 8);
        w = (w & !(0xfff << 16)) | (c << 16);
        w as i64
    };
    let e = (!0xff_ffff_ffffu64 | (-2i64 as u64 & 0xff_ffff_ffff)) as i64;
    assert_eq!(
        v,
        [
            w0(2, 0x1f, 0xfff),
            -3,
            w0(2, 0b11101, 0xfff),
            0xabc,
            w0(2, 0b11101, 0xabc),
            -2,
            e,
            -1
        ]
    );

    // compound assignment and ++/--, values and wrap-around within the field's width
    let v = run_d(&format!(
        "{decl}BEGIN {{
            x.s.a = 6; x.s.b = 14; x.s.c = 4095;
            x.s.a += 1; trace(x.s.a);
            trace(x.s.a++); trace(x.s.a);
            trace(++x.s.a); trace(x.s.a);
            trace(x.s.b--); trace(--x.s.b); trace(x.s.b);
            x.s.b += 3; trace(x.s.b);
            x.s.b *= -1; trace(x.s.b);
            trace(x.s.b = 20);
            trace(x.s.c <<= 4); trace(x.s.c);
            x.s.c |= 7; x.s.c ^= 1; trace(x.s.c);
            x.s.c -= 0x1000; trace(x.s.c);
            trace(x.w[0]);
        }}"
    ));
    // a: 6+1=7; post++ yields 7, field wraps to 0; pre++ yields 1
    // b: 14, post-- yields 14 (now 13), pre-- yields 12; +3 = 15; *-1 = -15; = 20 yields -12
    // c: 4095 << 4 = 0xfff0 cut to 12 bits: 0xff0; |7 ^1: 0xff6; -0x1000 leaves it: 0xff6
    let word = (1u64 | ((20 & 0x1f) << 8) | (0xff6 << 16)) as i64;
    assert_eq!(
        v,
        [7, 7, 0, 1, 1, 14, 12, 12, 15, -15, -12, 0xff0, 0xff0, 0xff6, 0xff6, word]
    );
}

/// Bit-fields of thread-local and clause-local struct variables, and of an associative array's
/// struct elements, are places too.
#[test]
fn bitfields_of_dynamic_variables() {
    let v = run_d(
        "struct bf { int lo:4; int hi:4; };
        self struct bf t;
        struct bf arr[int];
        BEGIN {
            self->t.lo = -1; self->t.hi = 3; self->t.hi++;
            trace(self->t.lo); trace(self->t.hi);
            arr[1].hi = -8; arr[1].hi--; arr[1].lo = 5;
            trace(arr[1].hi); trace(arr[1].lo); trace(arr[2].hi);
        }",
    );
    assert_eq!(v, [-1, 4, 7, 5, 0]);
}

/// Bit-fields of memory not in D variables (kernel memory) are read but not written: DTrace's
/// `D_OP_WRITE` for `=`, compound assignment and `++`/`--`.
#[test]
fn bitfields_of_kernel_memory_are_not_writable() {
    let decl = "struct bf { int a:3; int b; };\n";
    for (stmt, op) in [
        ("((struct bf *)arg0)->a = 1", "="),
        ("((struct bf *)arg0)->a += 1", "+="),
        ("((struct bf *)arg0)->a++", "++"),
        ("--((struct bf *)arg0)->a", "--"),
    ] {
        assert_eq!(
            tag(&format!("{decl}BEGIN {{ {stmt}; }}")),
            (
                ErrTag::D_OP_WRITE,
                format!("operator {op} can only be applied to a writable variable")
            ),
            "{stmt}"
        );
    }
}

/// Bit-fields of a kernel (CTF/BTF) struct held in D variables are places: a copy of the kernel
/// struct in a clause-local and a global of that type are written field by field, the other
/// fields as they were.
#[test]
fn ctf_bitfields_assigned_in_d_variables() {
    let src = "struct flags g;
        BEGIN {
            this->f = *(struct flags *)arg0;
            this->f.s = -60; this->f.f2 += 3; this->f.hi--; this->f.f1 = 0;
            trace(this->f.lo); trace(this->f.f1); trace(this->f.f2); trace(this->f.s);
            trace(this->f.hi);
            g.hi = 0xfffff; g.s = 63; ++g.s; g.f1 = 3;
            trace(g.hi); trace(g.s); trace(g.f1); trace(g.f2); trace(g.lo);
        }";
    let p = compile_with_types(src, &CompileOptions::default(), flags_types())
        .unwrap_or_else(|e| panic!("{e}"));
    let word: u32 = 1 | (9 << 1) | ((-5i32 as u32 & 0x7f) << 5) | (0xfff << 20);
    let mut b = vec![0u8; 16];
    b[0..4].copy_from_slice(&(-7i32).to_le_bytes());
    b[4..8].copy_from_slice(&word.to_le_bytes());
    b[8..16].copy_from_slice(&(0x12345u64 | 0xfff << 40).to_le_bytes());
    // s: 63 + 1 = 64 wraps to -64 in 7 signed bits; f1 = 3 keeps its 1 bit
    assert_eq!(
        traced(&p, b),
        [-7, 0, 12, -60, 0x12344, 0xfffff, -64, 1, 0, 0]
    );
}

/// A translator whose output struct has bit-fields: the whole translated struct (built in
/// scratch) holds each converted value cut to its field, the neighbours intact.
#[test]
fn translated_structs_with_bitfields() {
    let src = "struct in_t { int a; int b; };
        struct out_t { unsigned int x:3; int y:5; int z; };
        translator struct out_t < struct in_t *p > { x = p->a; y = p->b; z = p->a + p->b; };
        BEGIN {
            this->o = xlate<struct out_t>((struct in_t *)arg0);
            trace(this->o.x); trace(this->o.y); trace(this->o.z);
            trace(*(unsigned int *)xlate<struct out_t *>((struct in_t *)arg0));
        }";
    let p = compile(src, &CompileOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let mut b = vec![0u8; 8];
    b[0..4].copy_from_slice(&13i32.to_le_bytes());
    b[4..8].copy_from_slice(&(-20i32).to_le_bytes());
    // x = 13 cut to 3 bits = 5; y = -20 in 5 signed bits = 12; z = -7
    let word = 5 | (12 << 8);
    assert_eq!(traced(&p, b), [5, 12, -7, word]);
}
