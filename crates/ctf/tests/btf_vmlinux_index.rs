//! The name and derived-type indexes of the running kernel's converted types (built with reserved,
//! fast-hashed tables) against a plain scan of the types: a name finds its first definition (a
//! forward declaration only when the tag has no definition), a pointer or qualifier over a type is
//! the first one there is. Skipped without `/sys/kernel/btf/vmlinux`.

use std::collections::HashMap;

use dtrace_ctf::*;

/// A name's first definition and first forward declaration.
type Firsts = (Option<TypeId>, Option<TypeId>);

fn namespace(k: &TypeKind) -> Option<Namespace> {
    Some(match k {
        TypeKind::Struct(_) | TypeKind::Forward(ForwardKind::Struct) => Namespace::Struct,
        TypeKind::Union(_) | TypeKind::Forward(ForwardKind::Union) => Namespace::Union,
        TypeKind::Enum(_) | TypeKind::Forward(ForwardKind::Enum) => Namespace::Enum,
        TypeKind::Integer(_)
        | TypeKind::Float(_)
        | TypeKind::Typedef(_)
        | TypeKind::Function(_)
        | TypeKind::Unknown => Namespace::Ordinary,
        _ => return None,
    })
}

#[test]
fn vmlinux_indexes_agree_with_a_scan_of_its_types() {
    let btf = std::fs::read("/sys/kernel/btf/vmlinux");
    if !dtrace_testkit::skip_unless(
        btf.is_ok(),
        "vmlinux_indexes_agree_with_a_scan_of_its_types",
        "no /sys/kernel/btf/vmlinux",
    ) {
        return;
    }
    let btf = btf.unwrap();
    let c = btf_to_ctf(&btf).unwrap();
    // (namespace, name) -> (first definition, first forward declaration)
    let mut names: HashMap<(Namespace, &str), Firsts> = HashMap::new();
    let mut derived: HashMap<(u32, TypeId), TypeId> = HashMap::new();
    for (id, t) in c.iter() {
        if let (Some(r), true) = (
            t.kind.reference(),
            matches!(
                t.kind,
                TypeKind::Pointer(_)
                    | TypeKind::Const(_)
                    | TypeKind::Volatile(_)
                    | TypeKind::Restrict(_)
            ),
        ) {
            derived.entry((t.kind.code(), r)).or_insert(id);
        }
        let Some(ns) = namespace(&t.kind).filter(|_| t.root && !t.name.is_empty()) else {
            continue;
        };
        let e = names.entry((ns, t.name.as_str())).or_default();
        if matches!(t.kind, TypeKind::Forward(_)) {
            e.1.get_or_insert(id);
        } else {
            e.0.get_or_insert(id);
        }
    }
    assert!(names.len() > 1000, "only {} names", names.len());
    for ((ns, name), (def, fwd)) in &names {
        assert_eq!(c.lookup_in(*ns, name), def.or(*fwd), "{ns:?} {name}");
    }
    for ((code, target), id) in &derived {
        assert_eq!(c.derived(*code, *target), Some(*id));
    }
    assert_eq!(
        c.lookup_by_name("struct task_struct"),
        names
            .get(&(Namespace::Struct, "task_struct"))
            .and_then(|(d, _)| *d)
    );
}
