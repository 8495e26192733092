//! A hand-built container with every kind of Table 4.1, shared by the tests.
#![allow(dead_code)]

use dtrace_ctf::*;

pub fn int_kind(bits: u16, signed: bool) -> TypeKind {
    TypeKind::Integer(IntEncoding { flags: if signed { CTF_INT_SIGNED } else { 0 }, offset: 0, bits })
}

pub struct Sample {
    pub c: Container,
    pub int: TypeId,
    pub char_: TypeId,
    pub point: TypeId,
    pub big: TypeId,
    pub huge: TypeId,
    pub outer: TypeId,
    pub list: TypeId,
}

/// Every kind, small and large records, bit-fields, anonymous members, varargs, labels, objects and
/// function entries.
pub fn sample() -> Sample {
    let mut c = Container::new();
    let int = c.add(Type::new("int", int_kind(32, true), 4));
    let uint = c.add(Type::new("unsigned int", int_kind(32, false), 4));
    let char_ = c.add(Type::new(
        "char",
        TypeKind::Integer(IntEncoding { flags: CTF_INT_SIGNED | CTF_INT_CHAR, offset: 0, bits: 8 }),
        1,
    ));
    let long = c.add(Type::new("long", int_kind(64, true), 8));
    let dbl = c.add(Type::new("double", TypeKind::Float(FloatEncoding { format: CTF_FP_DOUBLE, offset: 0, bits: 64 }), 8));
    let ld = c.add(Type::new("long double", TypeKind::Float(FloatEncoding { format: CTF_FP_LDOUBLE, offset: 0, bits: 128 }), 16));
    let cchar = c.add(Type::new("", TypeKind::Const(char_), 0));
    let pcchar = c.add(Type::new("", TypeKind::Pointer(cchar), 0));
    let pchar = c.add(Type::new("", TypeKind::Pointer(char_), 0));
    let vint = c.add(Type::new("", TypeKind::Volatile(int), 0));
    let rpchar = c.add(Type::new("", TypeKind::Restrict(pchar), 0));
    let arr = c.add(Type::new("", TypeKind::Array(ArrayInfo { contents: char_, index: long, nelems: 16 }), 0));
    let u3 = c.add(Type { name: "unsigned int".into(), kind: int_kind(3, false), size: 4, root: false });
    let point = c.add(Type::new(
        "point",
        TypeKind::Struct(vec![
            Member { name: "x".into(), type_id: int, offset_bits: 0 },
            Member { name: "y".into(), type_id: int, offset_bits: 32 },
            Member { name: "flags".into(), type_id: u3, offset_bits: 64 },
            Member { name: "name".into(), type_id: arr, offset_bits: 72 },
            Member { name: "d".into(), type_id: dbl, offset_bits: 256 },
        ]),
        40,
    ));
    let point_t = c.add(Type::new("point_t", TypeKind::Typedef(point), 0));
    let anon_union = c.add(Type::new(
        "",
        TypeKind::Union(vec![
            Member { name: "i".into(), type_id: int, offset_bits: 0 },
            Member { name: "p".into(), type_id: pchar, offset_bits: 0 },
        ]),
        8,
    ));
    let outer = c.add(Type::new(
        "outer",
        TypeKind::Struct(vec![
            Member { name: "tag".into(), type_id: long, offset_bits: 0 },
            Member { name: "".into(), type_id: anon_union, offset_bits: 64 },
            Member { name: "pt".into(), type_id: point_t, offset_bits: 128 },
        ]),
        56,
    ));
    let big_arr = c.add(Type::new("", TypeKind::Array(ArrayInfo { contents: char_, index: long, nelems: 10000 }), 0));
    let big = c.add(Type::new(
        "big",
        TypeKind::Struct(vec![
            Member { name: "head".into(), type_id: int, offset_bits: 0 },
            Member { name: "buf".into(), type_id: big_arr, offset_bits: 32 },
            Member { name: "tail".into(), type_id: int, offset_bits: 80064 },
        ]),
        10012,
    ));
    let huge_arr = c.add(Type::new("", TypeKind::Array(ArrayInfo { contents: char_, index: long, nelems: 100_000 }), 0));
    let huge = c.add(Type::new(
        "huge",
        TypeKind::Union(vec![Member { name: "bytes".into(), type_id: huge_arr, offset_bits: 0 }]),
        100_000,
    ));
    let color = c.add(Type::new(
        "color",
        TypeKind::Enum(vec![
            Enumerator { name: "RED".into(), value: 0 },
            Enumerator { name: "GREEN".into(), value: 1 },
            Enumerator { name: "NEG".into(), value: -5 },
        ]),
        4,
    ));
    let fwd_s = c.add(Type::new("opaque", TypeKind::Forward(ForwardKind::Struct), 0));
    let fwd_u = c.add(Type::new("uopaque", TypeKind::Forward(ForwardKind::Union), 0));
    let fwd_e = c.add(Type::new("eopaque", TypeKind::Forward(ForwardKind::Enum), 0));
    let list = c.add(Type::new("list", TypeKind::Struct(vec![]), 16));
    let plist = c.add(Type::new("", TypeKind::Pointer(list), 0));
    c.replace(
        list,
        Type::new(
            "list",
            TypeKind::Struct(vec![
                Member { name: "next".into(), type_id: plist, offset_bits: 0 },
                Member { name: "val".into(), type_id: long, offset_bits: 64 },
            ]),
            16,
        ),
    )
    .unwrap();
    let printf = c.add(Type::new("printf", TypeKind::Function(FunctionInfo { ret: int, args: vec![pcchar], varargs: true }), 0));
    let fn2 = c.add(Type::new("", TypeKind::Function(FunctionInfo { ret: TypeId::VOID, args: vec![int, long], varargs: false }), 0));
    let pfn = c.add(Type::new("", TypeKind::Pointer(fn2), 0));
    let handler = c.add(Type::new("handler_t", TypeKind::Typedef(pfn), 0));
    let parr = c.add(Type::new("", TypeKind::Pointer(arr), 0));
    let cpchar = c.add(Type::new("", TypeKind::Const(pchar), 0));
    let pvoid = c.add(Type::new("", TypeKind::Pointer(TypeId::VOID), 0));
    c.add(Type::new("pad", TypeKind::Unknown, 0));
    let _ = (uint, ld, vint, rpchar, color, fwd_s, fwd_u, fwd_e, printf, handler, parr, cpchar, pvoid);
    c.labels.push(Label { name: "base".into(), type_index: c.len() as u32 });
    c.objects = vec![int, point, TypeId::VOID, plist];
    c.functions = vec![
        Some(FunctionInfo { ret: int, args: vec![pcchar], varargs: true }),
        None,
        Some(FunctionInfo { ret: TypeId::VOID, args: vec![], varargs: false }),
        Some(FunctionInfo { ret: long, args: vec![int, int, int], varargs: false }),
    ];
    Sample { c, int, char_, point, big, huge, outer, list }
}
