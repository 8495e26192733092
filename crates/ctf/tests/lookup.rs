//! The type API the compiler uses: lookups, sizes, alignments, members, resolution, names.

mod common;

use dtrace_ctf::*;

#[test]
fn lookup_by_name_in_each_namespace() {
    let s = common::sample();
    let c = &s.c;
    assert_eq!(c.lookup_by_name("int"), Some(s.int));
    assert_eq!(c.lookup_by_name("struct point"), Some(s.point));
    assert_eq!(
        c.lookup_by_name("point"),
        None,
        "tags are not ordinary names"
    );
    assert!(c.lookup_by_name("point_t").is_some());
    assert!(c.lookup_by_name("enum color").is_some());
    assert!(c.lookup_by_name("union uopaque").is_some());
    assert_eq!(c.lookup_by_name("union point"), None);
    assert_eq!(c.lookup_by_name("void"), Some(TypeId::VOID));
    assert_eq!(
        c.lookup_by_name("long double")
            .map(|t| c.size_of(t).unwrap()),
        Some(16)
    );
    assert_eq!(
        c.lookup_by_name("  unsigned   int "),
        c.lookup_by_name("unsigned int")
    );
    let pcc = c.lookup_by_name("const char *").unwrap();
    assert_eq!(c.type_name(pcc).unwrap(), "const char *");
    let pc = c.lookup_by_name("char*").unwrap();
    assert_eq!(c.type_name(pc).unwrap(), "char *");
    assert_eq!(
        c.lookup_by_name("struct list *")
            .map(|t| c.type_name(t).unwrap()),
        Some("struct list *".into())
    );
    assert_eq!(c.lookup_by_name("struct nosuch"), None);
    assert_eq!(
        c.lookup_by_name("char **"),
        None,
        "no such pointer type in the container"
    );
    assert_eq!(
        c.lookup_by_name("printf").map(|t| c.type_name(t).unwrap()),
        Some("printf".into())
    );
    // bit-field integers are not root, so "unsigned int" is the full one
    let u = c.lookup_by_name("unsigned int").unwrap();
    assert_eq!(c.size_of(u).unwrap(), 4);
    assert!(matches!(
        c.get(u).unwrap().kind,
        TypeKind::Integer(IntEncoding { bits: 32, .. })
    ));
}

#[test]
fn sizes_alignments_and_resolution() {
    let s = common::sample();
    let c = &s.c;
    let pt = c.lookup_by_name("point_t").unwrap();
    assert_eq!(c.resolve(pt).unwrap(), s.point);
    assert_eq!(c.size_of(pt).unwrap(), 40);
    assert_eq!(c.align_of(pt).unwrap(), 8);
    assert_eq!(c.size_of(s.outer).unwrap(), 56);
    let arr = c.member(s.point, "name").unwrap().unwrap().type_id;
    assert_eq!(c.size_of(arr).unwrap(), 16);
    assert_eq!(c.align_of(arr).unwrap(), 1);
    assert_eq!(c.size_of(c.lookup_by_name("char *").unwrap()).unwrap(), 8);
    assert_eq!(c.size_of(TypeId::VOID).unwrap(), 0);
    assert_eq!(c.size_of(s.char_).unwrap(), 1);
    let mut c32 = c.clone();
    c32.pointer_size = 4;
    assert_eq!(c32.size_of(c.lookup_by_name("char *").unwrap()).unwrap(), 4);
    assert!(matches!(
        c.size_of(TypeId(9999)),
        Err(CtfError::NoSuchType(9999))
    ));
}

#[test]
fn members_with_offsets_including_anonymous_and_bitfields() {
    let s = common::sample();
    let c = &s.c;
    let m = c.member(s.outer, "p").unwrap().unwrap();
    assert_eq!(m.offset_bits, 64, "found through the anonymous union");
    assert_eq!(c.type_name(m.type_id).unwrap(), "char *");
    let y = c.member(s.outer, "pt").unwrap().unwrap();
    assert_eq!(y.offset_bits, 128);
    assert_eq!(
        c.member(y.type_id, "y").unwrap().unwrap().offset_bits,
        32,
        "through the typedef"
    );
    let f = c.member(s.point, "flags").unwrap().unwrap();
    assert!(matches!(
        c.get(f.type_id).unwrap().kind,
        TypeKind::Integer(IntEncoding { bits: 3, .. })
    ));
    assert_eq!(c.member(s.point, "nosuch").unwrap(), None);
    assert!(matches!(
        c.member(s.int, "x"),
        Err(CtfError::WrongKind { .. })
    ));
    let next = c.member(s.list, "next").unwrap().unwrap();
    assert_eq!(c.type_name(next.type_id).unwrap(), "struct list *");
    let color = c.lookup_by_name("enum color").unwrap();
    assert_eq!(c.enum_value(color, "NEG").unwrap(), Some(-5));
    assert_eq!(c.enum_name(color, 1).unwrap(), Some("GREEN"));
}

#[test]
fn declaration_names() {
    let s = common::sample();
    let c = &s.c;
    let name = |n: &str| c.type_name(c.lookup_by_name(n).unwrap()).unwrap();
    assert_eq!(name("handler_t"), "handler_t");
    let h = c.lookup_by_name("handler_t").unwrap();
    let TypeKind::Typedef(pfn) = c.get(h).unwrap().kind else {
        panic!()
    };
    assert_eq!(c.type_name(pfn).unwrap(), "void (*)(int, long)");
    let printf = c.lookup_by_name("printf").unwrap();
    let TypeKind::Function(f) = &c.get(printf).unwrap().kind else {
        panic!()
    };
    assert!(f.varargs);
    let names: Vec<String> = c.iter().map(|(id, _)| c.type_name(id).unwrap()).collect();
    for want in [
        "char [16]",
        "char (*)[16]",
        "char *const",
        "void *",
        "volatile int",
        "char *restrict",
        "union (anon)",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "missing {want} in {names:?}"
        );
    }
}

#[test]
fn iteration_visits_every_type_in_id_order() {
    let s = common::sample();
    let ids: Vec<u32> = s.c.iter().map(|(id, _)| id.0).collect();
    assert_eq!(ids, (1..=s.c.len() as u32).collect::<Vec<_>>());
}

#[test]
fn cycles_are_errors_not_hangs() {
    let mut c = Container::new();
    let a = c.next_id();
    let b = TypeId(a.0 + 1);
    c.add(Type::new("a", TypeKind::Typedef(b), 0));
    c.add(Type::new("b", TypeKind::Typedef(a), 0));
    assert!(matches!(c.resolve(a), Err(CtfError::Cycle(_))));
    assert!(matches!(c.size_of(a), Err(CtfError::Cycle(_))));
    assert!(matches!(c.align_of(a), Err(CtfError::Cycle(_))));
    assert!(c.type_name(a).is_ok() || c.type_name(a).is_err());
    // a struct containing itself twice, nested: alignment is memoised, not exponential
    let s = c.next_id();
    c.add(Type::new(
        "s",
        TypeKind::Struct(vec![
            Member {
                name: "".into(),
                type_id: s,
                offset_bits: 0,
            },
            Member {
                name: "".into(),
                type_id: s,
                offset_bits: 0,
            },
        ]),
        4,
    ));
    assert!(c.align_of(s).is_err());
    assert!(c.member(s, "nosuch").is_err());
}

#[test]
fn pointer_to_reuses_or_adds() {
    let mut s = common::sample();
    let before = s.c.len();
    let pc = s.c.pointer_to(s.char_);
    assert_eq!(s.c.len(), before, "char * already exists");
    assert_eq!(s.c.type_name(pc).unwrap(), "char *");
    let pp = s.c.pointer_to(pc);
    assert_eq!(s.c.len(), before + 1);
    assert_eq!(s.c.type_name(pp).unwrap(), "char **");
    assert_eq!(s.c.lookup_by_name("char **"), Some(pp));
    let cv = s.c.derived_or_add(CTF_K_VOLATILE, s.point);
    assert_eq!(s.c.type_name(cv).unwrap(), "volatile struct point");
}
