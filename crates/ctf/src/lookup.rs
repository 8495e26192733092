//! The query API the compiler codes against: lookup by name (with the `struct`/`union`/`enum`
//! namespaces, qualifiers and pointer suffixes), resolution through typedefs and qualifiers, sizes,
//! alignments, members with their offsets, and enumerators.

use crate::consts::*;
use crate::container::{Container, Namespace};
use crate::error::{CtfError, Result};
use crate::model::*;

/// How deep reference chains may go before we call them a cycle.
pub(crate) const MAX_DEPTH: usize = 512;

/// How many aggregates one member search may visit (anonymous members nest; hostile input could
/// make the search exponential).
const MEMBER_SEARCH_BUDGET: usize = 100_000;

/// A member found by [`Container::member`]: its type and offset from the start of the outermost
/// aggregate (anonymous members are searched through, their offsets added).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberInfo {
    /// The member's type.
    pub type_id: TypeId,
    /// Offset in bits.
    pub offset_bits: u64,
}

impl Container {
    /// Finds a type by its C name: `int`, `unsigned long`, `struct task_struct`, `union u`, `enum e`,
    /// a typedef name, optionally with leading `const`/`volatile`/`restrict` and trailing `*`s
    /// (`const char *`, `struct file **`). Pointer and qualifier forms are found only if the container
    /// has such a type. `void` is [`TypeId::VOID`]. Each step is a hash lookup.
    pub fn lookup_by_name(&self, name: &str) -> Option<TypeId> {
        // fast paths without allocation: "name", "struct tag", "union tag", "enum tag"
        let plain = |s: &str| !s.is_empty() && !s.contains(|c: char| c == '*' || c.is_whitespace());
        if plain(name) {
            return match name {
                "void" => Some(TypeId::VOID),
                "const" | "volatile" | "restrict" | "struct" | "union" | "enum" => None,
                _ => self.lookup_in(Namespace::Ordinary, name),
            };
        }
        for (kw, ns) in [
            ("struct ", Namespace::Struct),
            ("union ", Namespace::Union),
            ("enum ", Namespace::Enum),
        ] {
            if let Some(tag) = name.strip_prefix(kw) {
                if plain(tag) {
                    return self.lookup_in(ns, tag);
                }
            }
        }
        let mut words: Vec<&str> = Vec::new();
        let mut stars = 0usize;
        for w in name.split_whitespace() {
            let trimmed = w.trim_end_matches('*');
            let (lead, rest) = split_leading_stars(trimmed);
            if lead > 0 && !rest.is_empty() {
                return None; // '*' before a name: not a type name
            }
            if !rest.is_empty() {
                if stars > 0 {
                    return None; // a word after a '*' ("char * const") is not handled
                }
                words.push(rest);
            }
            stars += w.len() - rest.len();
        }
        let mut quals: Vec<u32> = Vec::new();
        let mut base_words: Vec<&str> = Vec::new();
        for w in words {
            match w {
                "const" => quals.push(CTF_K_CONST),
                "volatile" => quals.push(CTF_K_VOLATILE),
                "restrict" => quals.push(CTF_K_RESTRICT),
                _ => base_words.push(w),
            }
        }
        let mut id = match base_words.as_slice() {
            [] => return None,
            ["struct", tag] => self.lookup_in(Namespace::Struct, tag)?,
            ["union", tag] => self.lookup_in(Namespace::Union, tag)?,
            ["enum", tag] => self.lookup_in(Namespace::Enum, tag)?,
            ["void"] => TypeId::VOID,
            [single] => self.lookup_in(Namespace::Ordinary, single)?,
            many => self.lookup_in(Namespace::Ordinary, &many.join(" "))?,
        };
        for q in quals {
            id = self.derived(q, id)?;
        }
        for _ in 0..stars {
            id = self.derived(CTF_K_POINTER, id)?;
        }
        Some(id)
    }

    /// Follows typedefs and `const`/`volatile`/`restrict` to the type they stand for.
    pub fn resolve(&self, id: TypeId) -> Result<TypeId> {
        let mut cur = id;
        for _ in 0..MAX_DEPTH {
            if cur == TypeId::VOID {
                return Ok(cur);
            }
            match &self.get(cur)?.kind {
                TypeKind::Typedef(t)
                | TypeKind::Const(t)
                | TypeKind::Volatile(t)
                | TypeKind::Restrict(t) => cur = *t,
                _ => return Ok(cur),
            }
        }
        Err(CtfError::Cycle(id.0))
    }

    /// The kind of the type `id` stands for after [`Container::resolve`]; `None` for `void`.
    pub fn resolved_kind(&self, id: TypeId) -> Result<Option<&TypeKind>> {
        let r = self.resolve(id)?;
        if r == TypeId::VOID {
            return Ok(None);
        }
        Ok(Some(&self.get(r)?.kind))
    }

    /// Size in bytes, as `sizeof` gives it: own size for integers, floats, structs, unions and enums;
    /// the data model's pointer size for pointers; element size times count for arrays; 0 for void,
    /// functions and forward declarations; through typedefs and qualifiers.
    pub fn size_of(&self, id: TypeId) -> Result<u64> {
        self.size_of_depth(id, 0)
    }

    fn size_of_depth(&self, id: TypeId, depth: usize) -> Result<u64> {
        if depth > MAX_DEPTH {
            return Err(CtfError::Cycle(id.0));
        }
        if id == TypeId::VOID {
            return Ok(0);
        }
        let t = self.get(id)?;
        Ok(match &t.kind {
            TypeKind::Pointer(_) => u64::from(self.pointer_size),
            TypeKind::Array(a) => self
                .size_of_depth(a.contents, depth + 1)?
                .saturating_mul(u64::from(a.nelems)),
            TypeKind::Typedef(r)
            | TypeKind::Const(r)
            | TypeKind::Volatile(r)
            | TypeKind::Restrict(r) => self.size_of_depth(*r, depth + 1)?,
            TypeKind::Function(_) | TypeKind::Forward(_) => 0,
            _ => t.size,
        })
    }

    /// Alignment in bytes: scalars align to their size (at most 16, at least 1), pointers to the pointer
    /// size, arrays to their element, structs and unions to their most aligned member.
    pub fn align_of(&self, id: TypeId) -> Result<u64> {
        let mut memo = std::collections::HashMap::new();
        self.align_of_memo(id, 0, &mut memo)
    }

    fn align_of_memo(
        &self,
        id: TypeId,
        depth: usize,
        memo: &mut std::collections::HashMap<TypeId, Option<u64>>,
    ) -> Result<u64> {
        if depth > MAX_DEPTH {
            return Err(CtfError::Cycle(id.0));
        }
        if id == TypeId::VOID {
            return Ok(1);
        }
        match memo.get(&id) {
            Some(Some(a)) => return Ok(*a),
            Some(None) => return Err(CtfError::Cycle(id.0)), // still being computed: a cycle
            None => {}
        }
        memo.insert(id, None);
        let t = self.get(id)?;
        let a = match &t.kind {
            TypeKind::Pointer(_) => u64::from(self.pointer_size),
            TypeKind::Array(a) => self.align_of_memo(a.contents, depth + 1, memo)?,
            TypeKind::Typedef(r)
            | TypeKind::Const(r)
            | TypeKind::Volatile(r)
            | TypeKind::Restrict(r) => self.align_of_memo(*r, depth + 1, memo)?,
            TypeKind::Struct(ms) | TypeKind::Union(ms) => {
                let mut a = 1;
                for m in ms {
                    a = a.max(self.align_of_memo(m.type_id, depth + 1, memo)?);
                }
                a
            }
            TypeKind::Function(_) | TypeKind::Forward(_) => 1,
            _ => {
                let s = t.size.clamp(1, 16);
                // largest power of two not above the size
                1u64 << (63 - s.leading_zeros())
            }
        };
        memo.insert(id, Some(a));
        Ok(a)
    }

    /// The members of the struct or union `id` stands for (through typedefs and qualifiers).
    pub fn members(&self, id: TypeId) -> Result<&[Member]> {
        let r = self.resolve(id)?;
        if r == TypeId::VOID {
            return Err(CtfError::WrongKind {
                id: id.0,
                kind: "void",
                wanted: "struct or union",
            });
        }
        match &self.get(r)?.kind {
            TypeKind::Struct(m) | TypeKind::Union(m) => Ok(m),
            k => Err(CtfError::WrongKind {
                id: r.0,
                kind: k.kind_name(),
                wanted: "struct or union",
            }),
        }
    }

    /// Finds member `name` of the struct or union `id` stands for, searching anonymous struct and union
    /// members too (as C does). `Ok(None)` if there is no such member.
    pub fn member(&self, id: TypeId, name: &str) -> Result<Option<MemberInfo>> {
        let mut budget = MEMBER_SEARCH_BUDGET;
        self.member_depth(id, name, 0, &mut budget)
    }

    fn member_depth(
        &self,
        id: TypeId,
        name: &str,
        depth: usize,
        budget: &mut usize,
    ) -> Result<Option<MemberInfo>> {
        if depth > MAX_DEPTH || *budget == 0 {
            return Err(CtfError::Cycle(id.0));
        }
        *budget -= 1;
        let members = self.members(id)?;
        for m in members {
            if m.name == name {
                return Ok(Some(MemberInfo {
                    type_id: m.type_id,
                    offset_bits: m.offset_bits,
                }));
            }
        }
        for m in members {
            if m.name.is_empty() {
                if let Ok(Some(TypeKind::Struct(_) | TypeKind::Union(_))) =
                    self.resolved_kind(m.type_id)
                {
                    if let Some(inner) = self.member_depth(m.type_id, name, depth + 1, budget)? {
                        return Ok(Some(MemberInfo {
                            type_id: inner.type_id,
                            offset_bits: inner.offset_bits.saturating_add(m.offset_bits),
                        }));
                    }
                }
            }
        }
        Ok(None)
    }

    /// The enumerators of the enum `id` stands for.
    pub fn enumerators(&self, id: TypeId) -> Result<&[Enumerator]> {
        let r = self.resolve(id)?;
        if r == TypeId::VOID {
            return Err(CtfError::WrongKind {
                id: id.0,
                kind: "void",
                wanted: "enum",
            });
        }
        match &self.get(r)?.kind {
            TypeKind::Enum(e) => Ok(e),
            k => Err(CtfError::WrongKind {
                id: r.0,
                kind: k.kind_name(),
                wanted: "enum",
            }),
        }
    }

    /// The value of enumerator `name` in enum `id`.
    pub fn enum_value(&self, id: TypeId, name: &str) -> Result<Option<i32>> {
        Ok(self
            .enumerators(id)?
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.value))
    }

    /// The name of the enumerator of enum `id` with value `value` (the first, if several).
    pub fn enum_name(&self, id: TypeId, value: i32) -> Result<Option<&str>> {
        Ok(self
            .enumerators(id)?
            .iter()
            .find(|e| e.value == value)
            .map(|e| e.name.as_str()))
    }
}

fn split_leading_stars(s: &str) -> (usize, &str) {
    let t = s.trim_start_matches('*');
    (s.len() - t.len(), t)
}
