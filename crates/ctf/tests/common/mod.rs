//! A hand-built container with every kind of Table 4.1, shared by the tests.
#![allow(dead_code)]

use dtrace_ctf::*;

pub fn int_kind(bits: u16, signed: bool) -> TypeKind {
    TypeKind::Integer(IntEncoding {
        flags: if signed { CTF_INT_SIGNED } else { 0 },
        offset: 0,
        bits,
    })
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
        TypeKind::Integer(IntEncoding {
            flags: CTF_INT_SIGNED | CTF_INT_CHAR,
            offset: 0,
            bits: 8,
        }),
        1,
    ));
    let long = c.add(Type::new("long", int_kind(64, true), 8));
    let dbl = c.add(Type::new(
        "double",
        TypeKind::Float(FloatEncoding {
            format: CTF_FP_DOUBLE,
            offset: 0,
            bits: 64,
        }),
        8,
    ));
    let ld = c.add(Type::new(
        "long double",
        TypeKind::Float(FloatEncoding {
            format: CTF_FP_LDOUBLE,
            offset: 0,
            bits: 128,
        }),
        16,
    ));
    let cchar = c.add(Type::new("", TypeKind::Const(char_), 0));
    let pcchar = c.add(Type::new("", TypeKind::Pointer(cchar), 0));
    let pchar = c.add(Type::new("", TypeKind::Pointer(char_), 0));
    let vint = c.add(Type::new("", TypeKind::Volatile(int), 0));
    let rpchar = c.add(Type::new("", TypeKind::Restrict(pchar), 0));
    let arr = c.add(Type::new(
        "",
        TypeKind::Array(ArrayInfo {
            contents: char_,
            index: long,
            nelems: 16,
        }),
        0,
    ));
    let u3 = c.add(Type {
        name: "unsigned int".into(),
        kind: int_kind(3, false),
        size: 4,
        root: false,
    });
    let point = c.add(Type::new(
        "point",
        TypeKind::Struct(vec![
            Member {
                name: "x".into(),
                type_id: int,
                offset_bits: 0,
            },
            Member {
                name: "y".into(),
                type_id: int,
                offset_bits: 32,
            },
            Member {
                name: "flags".into(),
                type_id: u3,
                offset_bits: 64,
            },
            Member {
                name: "name".into(),
                type_id: arr,
                offset_bits: 72,
            },
            Member {
                name: "d".into(),
                type_id: dbl,
                offset_bits: 256,
            },
        ]),
        40,
    ));
    let point_t = c.add(Type::new("point_t", TypeKind::Typedef(point), 0));
    let anon_union = c.add(Type::new(
        "",
        TypeKind::Union(vec![
            Member {
                name: "i".into(),
                type_id: int,
                offset_bits: 0,
            },
            Member {
                name: "p".into(),
                type_id: pchar,
                offset_bits: 0,
            },
        ]),
        8,
    ));
    let outer = c.add(Type::new(
        "outer",
        TypeKind::Struct(vec![
            Member {
                name: "tag".into(),
                type_id: long,
                offset_bits: 0,
            },
            Member {
                name: "".into(),
                type_id: anon_union,
                offset_bits: 64,
            },
            Member {
                name: "pt".into(),
                type_id: point_t,
                offset_bits: 128,
            },
        ]),
        56,
    ));
    let big_arr = c.add(Type::new(
        "",
        TypeKind::Array(ArrayInfo {
            contents: char_,
            index: long,
            nelems: 10000,
        }),
        0,
    ));
    let big = c.add(Type::new(
        "big",
        TypeKind::Struct(vec![
            Member {
                name: "head".into(),
                type_id: int,
                offset_bits: 0,
            },
            Member {
                name: "buf".into(),
                type_id: big_arr,
                offset_bits: 32,
            },
            Member {
                name: "tail".into(),
                type_id: int,
                offset_bits: 80064,
            },
        ]),
        10012,
    ));
    let huge_arr = c.add(Type::new(
        "",
        TypeKind::Array(ArrayInfo {
            contents: char_,
            index: long,
            nelems: 100_000,
        }),
        0,
    ));
    let huge = c.add(Type::new(
        "huge",
        TypeKind::Union(vec![Member {
            name: "bytes".into(),
            type_id: huge_arr,
            offset_bits: 0,
        }]),
        100_000,
    ));
    let color = c.add(Type::new(
        "color",
        TypeKind::Enum(vec![
            Enumerator {
                name: "RED".into(),
                value: 0,
            },
            Enumerator {
                name: "GREEN".into(),
                value: 1,
            },
            Enumerator {
                name: "NEG".into(),
                value: -5,
            },
        ]),
        4,
    ));
    let fwd_s = c.add(Type::new(
        "opaque",
        TypeKind::Forward(ForwardKind::Struct),
        0,
    ));
    let fwd_u = c.add(Type::new(
        "uopaque",
        TypeKind::Forward(ForwardKind::Union),
        0,
    ));
    let fwd_e = c.add(Type::new(
        "eopaque",
        TypeKind::Forward(ForwardKind::Enum),
        0,
    ));
    let list = c.add(Type::new("list", TypeKind::Struct(vec![]), 16));
    let plist = c.add(Type::new("", TypeKind::Pointer(list), 0));
    c.replace(
        list,
        Type::new(
            "list",
            TypeKind::Struct(vec![
                Member {
                    name: "next".into(),
                    type_id: plist,
                    offset_bits: 0,
                },
                Member {
                    name: "val".into(),
                    type_id: long,
                    offset_bits: 64,
                },
            ]),
            16,
        ),
    )
    .unwrap();
    let printf = c.add(Type::new(
        "printf",
        TypeKind::Function(FunctionInfo {
            ret: int,
            args: vec![pcchar],
            varargs: true,
        }),
        0,
    ));
    let fn2 = c.add(Type::new(
        "",
        TypeKind::Function(FunctionInfo {
            ret: TypeId::VOID,
            args: vec![int, long],
            varargs: false,
        }),
        0,
    ));
    let pfn = c.add(Type::new("", TypeKind::Pointer(fn2), 0));
    let handler = c.add(Type::new("handler_t", TypeKind::Typedef(pfn), 0));
    let parr = c.add(Type::new("", TypeKind::Pointer(arr), 0));
    let cpchar = c.add(Type::new("", TypeKind::Const(pchar), 0));
    let pvoid = c.add(Type::new("", TypeKind::Pointer(TypeId::VOID), 0));
    c.add(Type::new("pad", TypeKind::Unknown, 0));
    let _ = (
        uint, ld, vint, rpchar, color, fwd_s, fwd_u, fwd_e, printf, handler, parr, cpchar, pvoid,
    );
    c.labels.push(Label {
        name: "base".into(),
        type_index: c.len() as u32,
    });
    c.objects = vec![int, point, TypeId::VOID, plist];
    c.functions = vec![
        Some(FunctionInfo {
            ret: int,
            args: vec![pcchar],
            varargs: true,
        }),
        None,
        Some(FunctionInfo {
            ret: TypeId::VOID,
            args: vec![],
            varargs: false,
        }),
        Some(FunctionInfo {
            ret: long,
            args: vec![int, int, int],
            varargs: false,
        }),
    ];
    Sample {
        c,
        int,
        char_,
        point,
        big,
        huge,
        outer,
        list,
    }
}

/// A small BTF encoder for tests: types are pushed in id order (first id 1, or after a base).
pub struct BtfBuilder {
    pub types: Vec<u8>,
    pub strings: Vec<u8>,
    pub str_base: u32,
}

impl BtfBuilder {
    pub fn new() -> Self {
        BtfBuilder {
            types: Vec::new(),
            strings: vec![0],
            str_base: 0,
        }
    }
    /// For split BTF: strings continue after the base's `str_len` bytes.
    pub fn split(str_base: u32) -> Self {
        BtfBuilder {
            types: Vec::new(),
            strings: Vec::new(),
            str_base,
        }
    }
    pub fn s(&mut self, s: &str) -> u32 {
        if s.is_empty() {
            return 0;
        }
        let o = self.str_base + self.strings.len() as u32;
        self.strings.extend_from_slice(s.as_bytes());
        self.strings.push(0);
        o
    }
    pub fn t(
        &mut self,
        name: &str,
        kind: u32,
        vlen: u32,
        kflag: bool,
        size_or_type: u32,
        extra: &[u32],
    ) {
        let n = self.s(name);
        let info = (kind << 24) | vlen | (u32::from(kflag) << 31);
        for w in [n, info, size_or_type].iter().chain(extra) {
            self.types.extend_from_slice(&w.to_le_bytes());
        }
    }
    pub fn finish(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&0xeb9fu16.to_le_bytes());
        out.push(1);
        out.push(0);
        for w in [
            24u32,
            0,
            self.types.len() as u32,
            self.types.len() as u32,
            self.strings.len() as u32,
        ] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(&self.types);
        out.extend_from_slice(&self.strings);
        out
    }
}

/// BTF with every kind: returns the blob.
pub fn sample_btf() -> Vec<u8> {
    let mut b = BtfBuilder::new();
    b.t("int", 1, 0, false, 4, &[(1 << 24) | 32]); // 1
    b.t("unsigned int", 1, 0, false, 4, &[32]); // 2
    b.t("", 2, 0, false, 1, &[]); // 3: int *
    b.t("", 3, 0, false, 0, &[1, 2, 10]); // 4: int[10]
    let (x, y, f, g) = (b.s("x"), b.s("y"), b.s("flags"), b.s("more"));
    // 5: struct s { int x; int *y; unsigned int flags:3; unsigned int more:5; } with kind_flag bit-fields
    b.t(
        "s",
        4,
        4,
        true,
        24,
        &[
            x,
            1,
            0,
            y,
            3,
            64,
            f,
            2,
            (3 << 24) | 128,
            g,
            2,
            (5 << 24) | 131,
        ],
    );
    let (a, bb) = (b.s("a"), b.s("b"));
    b.t("u", 5, 2, false, 8, &[a, 1, 0, bb, 3, 0]); // 6
    let (r, gr) = (b.s("RED"), b.s("GREEN"));
    b.t("color", 6, 2, false, 4, &[r, 0, gr, 7]); // 7
    b.t("fwd_u", 7, 0, true, 0, &[]); // 8: union forward
    b.t("myint", 8, 0, false, 1, &[]); // 9
    b.t("", 9, 0, false, 1, &[]); // 10 volatile int
    b.t("", 10, 0, false, 1, &[]); // 11 const int
    b.t("", 11, 0, false, 3, &[]); // 12 restrict int*
    let pa = b.s("fmt");
    b.t("", 13, 2, false, 1, &[pa, 3, 0, 0]); // 13: int (int *, ...)
    b.t("my_printf", 12, 0, false, 13, &[]); // 14 FUNC
    b.t("counter", 14, 0, false, 1, &[1]); // 15 VAR
    b.t(".data", 15, 1, false, 4, &[15, 0, 4]); // 16 DATASEC
    b.t("double", 16, 0, false, 8, &[]); // 17 FLOAT
    b.t("user", 18, 0, false, 1, &[]); // 18 TYPE_TAG over int
    b.t("", 2, 0, false, 18, &[]); // 19 pointer to tagged int
    b.t("tag", 17, 0, false, 5, &[u32::MAX]); // 20 DECL_TAG
    let (e1, e2) = (b.s("BIG"), b.s("SMALL"));
    b.t("e64", 19, 2, false, 8, &[e1, 0, 1, e2, 5, 0]); // 21 ENUM64
    b.finish()
}
