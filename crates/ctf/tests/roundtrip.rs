//! Round trips: a container written then read gives the same types, in every encoding.

mod common;

use dtrace_ctf::*;

#[test]
fn round_trip_all_versions_and_compression() {
    let s = common::sample();
    s.c.validate().unwrap();
    for version in [None, Some(2), Some(3)] {
        for compress in [false, true] {
            let bytes = write_ctf(&s.c, WriteOptions { version, compress }).unwrap();
            let h = read_header(&bytes).unwrap();
            assert_eq!(
                h.version,
                version.unwrap_or(2),
                "auto picks v2 when it fits"
            );
            assert_eq!(h.flags & CTF_F_COMPRESS != 0, compress);
            let back = read_ctf(&bytes).unwrap();
            assert_eq!(back, s.c, "version {version:?} compress {compress}");
            // and writing again gives the same bytes
            assert_eq!(
                write_ctf(&back, WriteOptions { version, compress }).unwrap(),
                bytes
            );
        }
    }
}

#[test]
fn v2_layout_is_the_published_one() {
    let mut c = Container::new();
    let int = c.add(Type::new("int", common::int_kind(32, true), 4));
    let p = c.add(Type::new("", TypeKind::Pointer(int), 0));
    let b = write_ctf(
        &c,
        WriteOptions {
            version: Some(2),
            compress: false,
        },
    )
    .unwrap();
    assert_eq!(&b[0..4], &[0xf1, 0xcf, 2, 0]);
    let h = read_header(&b).unwrap();
    assert_eq!((h.lbloff, h.objtoff, h.funcoff, h.typeoff), (0, 0, 0, 0));
    let types = &b[36..36 + h.stroff as usize];
    // int: name=1, info = INTEGER<<11 | root<<10 | 0, size 4, encoding signed 32 bits
    assert_eq!(u32::from_le_bytes(types[0..4].try_into().unwrap()), 1);
    assert_eq!(
        u16::from_le_bytes(types[4..6].try_into().unwrap()),
        (1 << 11) | (1 << 10)
    );
    assert_eq!(u16::from_le_bytes(types[6..8].try_into().unwrap()), 4);
    assert_eq!(
        u32::from_le_bytes(types[8..12].try_into().unwrap()),
        0x0100_0020
    );
    // pointer: name 0, info POINTER, type 1
    assert_eq!(
        u16::from_le_bytes(types[16..18].try_into().unwrap()),
        (3 << 11) | (1 << 10)
    );
    assert_eq!(
        u16::from_le_bytes(types[18..20].try_into().unwrap()),
        p.0 as u16 - 1
    );
    assert_eq!(&b[36 + h.stroff as usize..], b"\0int\0");
}

#[test]
fn large_records_are_used_when_needed() {
    let s = common::sample();
    let b2 = write_ctf(
        &s.c,
        WriteOptions {
            version: Some(2),
            compress: false,
        },
    )
    .unwrap();
    let back = read_ctf(&b2).unwrap();
    assert_eq!(back.size_of(s.big).unwrap(), 10012);
    assert_eq!(
        back.member(s.big, "tail").unwrap().unwrap().offset_bits,
        80064
    );
    assert_eq!(back.size_of(s.huge).unwrap(), 100_000);
}

#[test]
fn v2_limits_force_v3() {
    let mut c = Container::new();
    let int = c.add(Type::new("int", common::int_kind(32, true), 4));
    let members: Vec<Member> = (0..2000)
        .map(|i| Member {
            name: format!("m{i}"),
            type_id: int,
            offset_bits: 32 * i,
        })
        .collect();
    c.add(Type::new("wide", TypeKind::Struct(members), 8000));
    assert!(matches!(
        write_ctf(
            &c,
            WriteOptions {
                version: Some(2),
                compress: false
            }
        ),
        Err(CtfError::TooLarge { version: 2, .. })
    ));
    let b = write_ctf(&c, WriteOptions::default()).unwrap();
    assert_eq!(read_header(&b).unwrap().version, 3);
    assert_eq!(read_ctf(&b).unwrap(), c);
}

#[test]
fn child_container_round_trip_and_lookup_through_parent() {
    let s = common::sample();
    let parent = std::sync::Arc::new(s.c.clone());
    let mut child = Container::new_child(parent.clone(), "genunix");
    let pp = child.add(Type::new("", TypeKind::Pointer(s.point), 0));
    let mine = child.add(Type::new(
        "mine",
        TypeKind::Struct(vec![Member {
            name: "p".into(),
            type_id: pp,
            offset_bits: 0,
        }]),
        8,
    ));
    assert!(mine.is_child());
    assert_eq!(child.lookup_by_name("struct mine"), Some(mine));
    assert_eq!(child.lookup_by_name("struct point"), Some(s.point));
    assert_eq!(child.type_name(pp).unwrap(), "struct point *");
    for version in [2, 3] {
        let b = write_ctf(
            &child,
            WriteOptions {
                version: Some(version),
                compress: false,
            },
        )
        .unwrap();
        let mut back = read_ctf(&b).unwrap();
        assert!(back.is_child());
        assert_eq!(back.parent_name, "genunix");
        assert!(matches!(back.size_of(s.point), Err(CtfError::NoParent(_))));
        back.set_parent(parent.clone()).unwrap();
        assert_eq!(back, child);
        assert_eq!(back.member(mine, "p").unwrap().unwrap().type_id, pp);
        assert_eq!(back.size_of(s.point).unwrap(), 40);
    }
}

#[test]
fn hostile_references_are_rejected() {
    let mut c = Container::new();
    c.add(Type::new("", TypeKind::Pointer(TypeId(7)), 0));
    let b = write_ctf(&c, WriteOptions::default()).unwrap();
    assert!(matches!(read_ctf(&b), Err(CtfError::BadType { .. })));
}

#[test]
fn odd_object_count_keeps_the_type_section_aligned() {
    let s = common::sample();
    for (objs, funcs) in [(1usize, 0usize), (3, 1), (1, 2), (2, 1), (0, 1)] {
        let mut c = s.c.clone();
        c.objects.truncate(objs);
        c.functions.truncate(funcs);
        let b = write_ctf(
            &c,
            WriteOptions {
                version: Some(2),
                compress: false,
            },
        )
        .unwrap();
        let h = read_header(&b).unwrap();
        assert_eq!(h.typeoff % 4, 0);
        assert_eq!(
            read_ctf(&b).unwrap(),
            c,
            "{objs} objects, {funcs} functions"
        );
    }
}
