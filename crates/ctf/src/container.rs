//! [`Container`]: a CTF type container in memory — its types, labels, data-object and function
//! sections, parent link, and the hash indexes that make lookups by name constant time.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::{CtfError, Result};
use crate::model::*;

/// The name namespaces of C: ordinary identifiers and the three tag namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Namespace {
    /// Typedefs, base types, named functions.
    Ordinary,
    /// `struct` tags.
    Struct,
    /// `union` tags.
    Union,
    /// `enum` tags.
    Enum,
}

/// Key of the derived-type index: (kind code, referenced type).
type DerivedKey = (u32, TypeId);

/// The hash of the indexes: a fast one (the keys are type names and ids, not attacker-chosen
/// in bulk, and `vmlinux` has some 100,000 of them to index at every start).
type IndexHasher = foldhash::fast::RandomState;

/// A CTF container: a list of types (ids 1..=n, with the child bit for a child container), the
/// optional parent it extends, labels, data-object and function entries, and indexes by name.
///
/// Build one with [`Container::new`] and [`Container::add`], read one with [`crate::read_ctf`], or
/// convert one with [`crate::btf_to_ctf`] / [`crate::dwarf_to_ctf_from_elf`]. Query it through the methods of
/// `lookup.rs` (by name, id, size, alignment, members, resolution).
#[derive(Debug, Clone)]
pub struct Container {
    pub(crate) types: Vec<Type>,
    pub(crate) child: bool,
    pub(crate) parent: Option<Arc<Container>>,
    /// Name of the parent container (`cth_parname`), empty if none.
    pub parent_name: String,
    /// Label of the parent (`cth_parlabel`), empty if none.
    pub parent_label: String,
    /// Labels (`ctf_lblent_t`).
    pub labels: Vec<Label>,
    /// Data-object section: one type per data symbol, in symbol-table order.
    pub objects: Vec<TypeId>,
    /// Function section: one entry per function symbol; `None` is a padding (no information) entry.
    pub functions: Vec<Option<FunctionInfo>>,
    /// Size of a pointer in bytes (the data model: 8 for LP64, 4 for ILP32). CTF does not store it.
    pub pointer_size: u8,
    pub(crate) names: [HashMap<String, TypeId, IndexHasher>; 4],
    pub(crate) derived: HashMap<DerivedKey, TypeId, IndexHasher>,
}

/// Two containers are equal when their types, parent naming, labels, data objects and function
/// entries are (trailing "no information" function entries ignored; indexes and the attached parent
/// are not compared).
impl PartialEq for Container {
    fn eq(&self, other: &Self) -> bool {
        self.types == other.types
            && self.child == other.child
            && self.parent_name == other.parent_name
            && self.parent_label == other.parent_label
            && self.labels == other.labels
            && self.objects == other.objects
            && trim_none(&self.functions) == trim_none(&other.functions)
    }
}

/// Function entries without trailing "no information" entries: those say nothing (a symbol past the
/// end of the section has no information either), and the v2 encoding may add one as padding.
fn trim_none(f: &[Option<FunctionInfo>]) -> &[Option<FunctionInfo>] {
    let n = f.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
    &f[..n]
}

impl Default for Container {
    fn default() -> Self {
        Self::new()
    }
}

fn ns_slot(ns: Namespace) -> usize {
    match ns {
        Namespace::Ordinary => 0,
        Namespace::Struct => 1,
        Namespace::Union => 2,
        Namespace::Enum => 3,
    }
}

impl Container {
    /// An empty parent container (LP64).
    pub fn new() -> Container {
        Container {
            types: Vec::new(),
            child: false,
            parent: None,
            parent_name: String::new(),
            parent_label: String::new(),
            labels: Vec::new(),
            objects: Vec::new(),
            functions: Vec::new(),
            pointer_size: 8,
            names: Default::default(),
            derived: HashMap::default(),
        }
    }

    /// An empty child container extending `parent`, which it names `parent_name`.
    pub fn new_child(parent: Arc<Container>, parent_name: impl Into<String>) -> Container {
        let mut c = Container::new();
        c.child = true;
        c.pointer_size = parent.pointer_size;
        c.parent = Some(parent);
        c.parent_name = parent_name.into();
        c
    }

    /// Whether this is a child container (its type ids carry [`TypeId::CHILD_BIT`]).
    pub fn is_child(&self) -> bool {
        self.child
    }

    /// The parent container, if attached.
    pub fn parent(&self) -> Option<&Arc<Container>> {
        self.parent.as_ref()
    }

    /// Attaches (or replaces) the parent of a child container, checking that every reference to a parent
    /// type exists there.
    pub fn set_parent(&mut self, parent: Arc<Container>) -> Result<()> {
        if !self.child {
            return Err(CtfError::BadHeader(
                "only a child container has a parent".into(),
            ));
        }
        for (i, t) in self.types.iter().enumerate() {
            for r in t.kind.referenced_ids() {
                if r != TypeId::VOID && !r.is_child() && parent.local(r).is_none() {
                    return Err(CtfError::BadType {
                        id: TypeId::from_index(i as u32 + 1, true).0,
                        why: format!("refers to parent type {r} which the parent lacks"),
                    });
                }
            }
        }
        self.parent = Some(parent);
        Ok(())
    }

    /// Number of types in this container (not counting the parent's).
    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// Whether this container has no types of its own.
    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }

    /// The id the next added type will get.
    pub fn next_id(&self) -> TypeId {
        TypeId::from_index(self.types.len() as u32 + 1, self.child)
    }

    /// Makes room for `types` more types, `index.0[i]` more names in namespace `i` (ordinary,
    /// struct, union, enum) and `index.1` more pointers and qualifiers, for a converter that knows
    /// how many it will add (growing the indexes step by step would hash every name again).
    pub(crate) fn reserve(&mut self, types: usize, index: ([usize; 4], usize)) {
        self.types.reserve(types);
        for (map, n) in self.names.iter_mut().zip(index.0) {
            map.reserve(n);
        }
        self.derived.reserve(index.1);
    }

    /// Adds a type and returns its id. References are not checked here (types may refer forward);
    /// [`Container::validate`] checks them all.
    pub fn add(&mut self, t: Type) -> TypeId {
        let id = self.next_id();
        self.index_type(id, &t);
        self.types.push(t);
        id
    }

    /// Replaces the type with id `id` (one of this container's), for builders that reserve an id
    /// before they know the type (recursive structs). Name indexes are updated.
    pub fn replace(&mut self, id: TypeId, t: Type) -> Result<()> {
        let slot = self.local_slot(id).ok_or(CtfError::NoSuchType(id.0))?;
        self.index_type(id, &t);
        self.types[slot] = t;
        Ok(())
    }

    fn index_type(&mut self, id: TypeId, t: &Type) {
        if let Some(r) = t.kind.reference() {
            if matches!(
                t.kind,
                TypeKind::Pointer(_)
                    | TypeKind::Const(_)
                    | TypeKind::Volatile(_)
                    | TypeKind::Restrict(_)
            ) {
                self.derived.entry((t.kind.code(), r)).or_insert(id);
            }
        }
        if !t.root || t.name.is_empty() {
            return;
        }
        let ns = match &t.kind {
            TypeKind::Struct(_) | TypeKind::Forward(ForwardKind::Struct) => Namespace::Struct,
            TypeKind::Union(_) | TypeKind::Forward(ForwardKind::Union) => Namespace::Union,
            TypeKind::Enum(_) | TypeKind::Forward(ForwardKind::Enum) => Namespace::Enum,
            TypeKind::Integer(_)
            | TypeKind::Float(_)
            | TypeKind::Typedef(_)
            | TypeKind::Function(_)
            | TypeKind::Unknown => Namespace::Ordinary,
            _ => return,
        };
        let is_forward = matches!(t.kind, TypeKind::Forward(_));
        let map = &mut self.names[ns_slot(ns)];
        match map.get(&t.name) {
            None => {
                map.insert(t.name.clone(), id);
            }
            Some(&old) => {
                // A definition replaces an earlier forward declaration of the same tag.
                let slot = old.index() as usize;
                let old_is_forward = old.is_child() == self.child
                    && slot >= 1
                    && self
                        .types
                        .get(slot - 1)
                        .is_some_and(|o| matches!(o.kind, TypeKind::Forward(_)));
                if old_is_forward && !is_forward {
                    map.insert(t.name.clone(), id);
                }
            }
        }
    }

    /// Looks a name up in one namespace of this container and then of its parent.
    pub fn lookup_in(&self, ns: Namespace, name: &str) -> Option<TypeId> {
        if let Some(&id) = self.names[ns_slot(ns)].get(name) {
            return Some(id);
        }
        self.parent.as_ref().and_then(|p| p.lookup_in(ns, name))
    }

    /// The existing pointer (kind code `CTF_K_POINTER`) or qualifier type over `target`, if any.
    pub fn derived(&self, kind_code: u32, target: TypeId) -> Option<TypeId> {
        if let Some(&id) = self.derived.get(&(kind_code, target)) {
            return Some(id);
        }
        self.parent
            .as_ref()
            .and_then(|p| p.derived(kind_code, target))
    }

    /// The pointer type to `target`: an existing one (here or in the parent) or a new one added here.
    pub fn pointer_to(&mut self, target: TypeId) -> TypeId {
        self.derived_or_add(crate::consts::CTF_K_POINTER, target)
    }

    /// The `const`, `volatile` or `restrict` (kind code `CTF_K_CONST`, ...) or pointer type over
    /// `target`: an existing one or a new one added here.
    pub fn derived_or_add(&mut self, kind_code: u32, target: TypeId) -> TypeId {
        if let Some(id) = self.derived(kind_code, target) {
            return id;
        }
        let kind = match kind_code {
            crate::consts::CTF_K_CONST => TypeKind::Const(target),
            crate::consts::CTF_K_VOLATILE => TypeKind::Volatile(target),
            crate::consts::CTF_K_RESTRICT => TypeKind::Restrict(target),
            _ => TypeKind::Pointer(target),
        };
        self.add(Type::new("", kind, 0))
    }

    pub(crate) fn local_slot(&self, id: TypeId) -> Option<usize> {
        if id.is_child() != self.child || id.index() == 0 {
            return None;
        }
        let slot = id.index() as usize - 1;
        (slot < self.types.len()).then_some(slot)
    }

    /// The type with id `id` if it is one of this container's own (not the parent's).
    pub fn local(&self, id: TypeId) -> Option<&Type> {
        self.local_slot(id).map(|s| &self.types[s])
    }

    /// The type with id `id`, looking in the parent for parent ids. `void` (id 0) has no record.
    pub fn get(&self, id: TypeId) -> Result<&Type> {
        if let Some(t) = self.local(id) {
            return Ok(t);
        }
        if self.child && !id.is_child() && id != TypeId::VOID {
            return match &self.parent {
                Some(p) => p.get(id),
                None => Err(CtfError::NoParent(id.0)),
            };
        }
        Err(CtfError::NoSuchType(id.0))
    }

    /// Iterates over this container's own types with their ids, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (TypeId, &Type)> + '_ {
        let child = self.child;
        self.types
            .iter()
            .enumerate()
            .map(move |(i, t)| (TypeId::from_index(i as u32 + 1, child), t))
    }

    /// Checks that every type reference (in types, data objects and functions) names an existing type,
    /// and that labels stay within the type range. Parent references of a child are checked only when
    /// a parent is attached.
    pub fn validate(&self) -> Result<()> {
        let check = |owner: u32, r: TypeId| -> Result<()> {
            if r == TypeId::VOID {
                return Ok(());
            }
            if r.is_child() {
                if !self.child || self.local_slot(r).is_none() {
                    return Err(CtfError::BadType {
                        id: owner,
                        why: format!("refers to missing type {r}"),
                    });
                }
                return Ok(());
            }
            if self.child {
                if let Some(p) = &self.parent {
                    if p.local(r).is_none() {
                        return Err(CtfError::BadType {
                            id: owner,
                            why: format!("refers to missing parent type {r}"),
                        });
                    }
                }
                return Ok(());
            }
            if self.local_slot(r).is_none() {
                return Err(CtfError::BadType {
                    id: owner,
                    why: format!("refers to missing type {r}"),
                });
            }
            Ok(())
        };
        for (id, t) in self.iter() {
            for r in t.kind.referenced_ids() {
                check(id.0, r)?;
            }
        }
        for &o in &self.objects {
            check(0, o)?;
        }
        for f in self.functions.iter().flatten() {
            check(0, f.ret)?;
            for &a in &f.args {
                check(0, a)?;
            }
        }
        Ok(())
    }
}
