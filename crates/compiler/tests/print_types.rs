//! The type descriptions `print()` leaves in the program (`Program::print_types`): names as DTrace
//! prints them, resolved shapes, bit-fields as integers of their width, members and elements by index,
//! and the action's `arg` naming the entry of what the printed pointer points to.

use dtrace_compiler::ErrTag;
use dtrace_compiler::{compile, CompileOptions};
use dtrace_dif::program::{split_libact_arg, ActionKind, LibAction, PrintKind, PrintType, Program};

fn c(src: &str) -> Program {
    compile(src, &CompileOptions::default()).expect("compiles")
}

/// The entries of the `print()` actions of the program, in order (the pointed-to types).
fn printed(p: &Program) -> Vec<&PrintType> {
    p.ecbs
        .iter()
        .flat_map(|e| &e.actions)
        .filter(|a| a.kind == ActionKind::LibAct)
        .filter(|a| split_libact_arg(a.arg).0 == LibAction::Print as u32)
        .map(|a| &p.print_types[split_libact_arg(a.arg).1 as usize])
        .collect()
}

fn members(p: &Program, t: &PrintType) -> Vec<(String, String, u64)> {
    match &t.kind {
        PrintKind::Struct(m) | PrintKind::Union(m) => m
            .iter()
            .map(|m| {
                (
                    m.name.clone(),
                    p.print_types[m.ty as usize].name.clone(),
                    m.offset_bits,
                )
            })
            .collect(),
        k => panic!("not a struct or union: {k:?}"),
    }
}

#[test]
fn scalars() {
    let p = c("BEGIN { print((int *)8); print((char *)8); print((unsigned short *)8); print((void **)8); print((uint64_t *)8); print((void *)8); print((void (*)())8); }");
    let t = printed(&p);
    let names: Vec<&str> = t.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "int",
            "char",
            "unsigned short",
            "void *",
            "uint64_t",
            "void",
            "void (*)()"
        ]
    );
    let int = |bits, signed, char| PrintKind::Integer { bits, signed, char };
    assert_eq!((t[0].size, &t[0].kind), (4, &int(32, true, false)));
    assert_eq!((t[1].size, &t[1].kind), (1, &int(8, true, true)));
    assert_eq!((t[2].size, &t[2].kind), (2, &int(16, false, false)));
    assert_eq!(
        (t[3].size, &t[3].kind),
        (8, &PrintKind::Pointer { function: false })
    );
    // typedefs keep their name and resolve to the shape
    assert_eq!((t[4].size, &t[4].kind), (8, &int(64, false, false)));
    // each print() records the pointer, then the object (none for a pointer to void or to a
    // function)
    let acts: Vec<_> = p.ecbs[0].actions.iter().collect();
    assert_eq!(acts.len(), 12);
    let sizes: Vec<u32> = acts
        .iter()
        .map(|a| a.difo.as_ref().unwrap().rtype.size)
        .collect();
    assert_eq!(sizes, [8, 4, 8, 1, 8, 2, 8, 8, 8, 8, 8, 8]);
    let kinds: Vec<u32> = acts.iter().map(|a| split_libact_arg(a.arg).0).collect();
    let (pr, ob) = (LibAction::Print as u32, LibAction::PrintObject as u32);
    assert_eq!(kinds, [pr, ob, pr, ob, pr, ob, pr, ob, pr, ob, pr, pr]);
}

#[test]
fn only_pointers_are_printed() {
    // DTrace for Linux's print() has the prototype `void *`
    for (arg, ty) in [("1", "int"), ("\"hi\"", "string")] {
        let e = compile(
            &format!("BEGIN {{ print({arg}); }}"),
            &CompileOptions::default(),
        )
        .unwrap_err();
        assert_eq!(e.tag, ErrTag::D_PROTO_ARG, "{arg}");
        assert_eq!(
            e.message,
            format!("print( ) argument #1 is incompatible with prototype:\n\tprototype: void *\n\t argument: {ty}")
        );
    }
}

#[test]
fn structs_unions_bitfields_arrays_and_enums() {
    let p = c(r#"
        enum e { A, B = 5 };
        typedef struct s {
            int a:4;
            unsigned b:12;
            struct { char x; long y; } anon;
            union { int i; short h[2]; } u;
            enum e k;
            int grid[2][3];
            void (*fp)();
            struct s *next;
        } s_t;
        BEGIN { this->p = (s_t *)alloca(sizeof (s_t)); print(this->p); print(&this->p->grid); print((enum e *)this->p); }
    "#);
    let t = printed(&p);
    assert_eq!(t[0].name, "s_t");
    assert_eq!(
        members(&p, t[0]),
        [
            ("a".to_string(), "int".to_string(), 0),
            // a 12-bit field takes 2 bytes, aligned to 2
            ("b".into(), "unsigned int".into(), 16),
            ("anon".into(), "struct ".into(), 64),
            ("u".into(), "union ".into(), 192),
            ("k".into(), "enum e".into(), 224),
            ("grid".into(), "int [2][3]".into(), 256),
            ("fp".into(), "void (*)()".into(), 448),
            ("next".into(), "struct s *".into(), 512),
        ]
    );
    let PrintKind::Struct(m) = &t[0].kind else {
        unreachable!()
    };
    // bit-fields are integers of their width, sized as CTF sizes them
    let a = &p.print_types[m[0].ty as usize];
    assert_eq!(
        (a.size, &a.kind),
        (
            1,
            &PrintKind::Integer {
                bits: 4,
                signed: true,
                char: false
            }
        )
    );
    let b = &p.print_types[m[1].ty as usize];
    assert_eq!(
        (b.size, &b.kind),
        (
            2,
            &PrintKind::Integer {
                bits: 12,
                signed: false,
                char: false
            }
        )
    );
    assert_eq!(
        members(&p, &p.print_types[m[2].ty as usize]),
        [
            ("x".to_string(), "char".to_string(), 0),
            ("y".into(), "long".into(), 64)
        ]
    );
    assert!(matches!(
        p.print_types[m[3].ty as usize].kind,
        PrintKind::Union(_)
    ));
    assert_eq!(
        p.print_types[m[4].ty as usize].kind,
        PrintKind::Enum(vec![("A".into(), 0), ("B".into(), 5)])
    );
    assert_eq!(
        p.print_types[m[6].ty as usize].kind,
        PrintKind::Pointer { function: true }
    );
    // arrays of arrays: the outer array's elements are the inner arrays
    let PrintKind::Array { element, count: 2 } = t[1].kind else {
        panic!("{:?}", t[1].kind)
    };
    let inner = &p.print_types[element as usize];
    assert_eq!((inner.name.as_str(), inner.size), ("int [3]", 12));
    assert_eq!(t[1].size, 24);
    assert_eq!(t[2].name, "enum e");
    // the whole struct is recorded after the pointer
    let a = &p.ecbs[0].actions[2];
    assert_eq!(a.difo.as_ref().unwrap().rtype.size as u64, t[0].size);
}

#[test]
fn entries_are_shared() {
    let p = c("struct q { int a; int b; }; BEGIN { this->q = (struct q *)alloca(8); print(this->q); print(this->q); print(&this->q->a); }");
    let t = printed(&p);
    assert!(std::ptr::eq(t[0], t[1]));
    // int (for the two members and the third print) and struct q
    assert_eq!(p.print_types.len(), 2);
}
