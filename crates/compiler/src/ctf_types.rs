//! CTF-backed types: a [`TypeSource`] over a `dtrace-ctf` container (kernel BTF converted to CTF,
//! a module's CTF, DWARF of a program), importing a named type and everything it refers to into the
//! compiler's type table on first use. Base types keep D's own built-ins (`int`, `uint64_t`, ...) so
//! that CTF and D types stay compatible.

use std::collections::HashMap;
use std::sync::Arc;

use dtrace_ctf::{Container, TypeId as CtfId, TypeKind as Ck, CTF_INT_SIGNED};

use crate::ast::SouKind;
use crate::types::{BitField, Member, TypeId, TypeKind, TypeSource, TypeTable};

/// Types from a CTF container.
pub struct CtfTypes {
    ctf: Arc<Container>,
    typedefs: Vec<String>,
}

impl CtfTypes {
    /// A source over `ctf` (its typedef names are collected once, here).
    pub fn new(ctf: Arc<Container>) -> CtfTypes {
        let typedefs = ctf
            .iter()
            .filter(|(_, t)| t.root && !t.name.is_empty() && matches!(t.kind, Ck::Typedef(_)))
            .map(|(_, t)| t.name.clone())
            .collect();
        CtfTypes { ctf, typedefs }
    }
}

/// Nesting limit of the conversion (types deeper than this stay incomplete).
const MAX_DEPTH: u32 = 64;

struct Importer<'a> {
    c: &'a Container,
    table: &'a mut TypeTable,
    memo: HashMap<u32, TypeId>,
}

impl Importer<'_> {
    fn convert(&mut self, id: CtfId, depth: u32) -> Option<TypeId> {
        if let Some(t) = self.memo.get(&id.0) {
            return Some(*t);
        }
        if id == CtfId::VOID {
            return self.table.lookup("void");
        }
        if depth > MAX_DEPTH {
            return None;
        }
        let t = self.c.get(id).ok()?;
        let name = t.name.clone();
        let out = match &t.kind {
            Ck::Unknown => return None,
            Ck::Integer(e) => match self.table.lookup(&name) {
                Some(ours) if self.table.size(ours) == t.size => ours,
                _ => self.table.add_named(
                    &name,
                    TypeKind::Int {
                        signed: e.flags & CTF_INT_SIGNED != 0,
                        size: t.size as u32,
                    },
                ),
            },
            Ck::Float(_) => match self.table.lookup(&name) {
                Some(ours) => ours,
                None => self.table.add_named(
                    &name,
                    TypeKind::Float {
                        size: t.size as u32,
                    },
                ),
            },
            Ck::Pointer(to) => {
                let to = match self.shallow(*to) {
                    Some(t) => t,
                    None => self
                        .convert(*to, depth + 1)
                        .or_else(|| self.table.lookup("void"))?,
                };
                self.table.pointer_to(to)
            }
            Ck::Array(a) => {
                let e = self.convert(a.contents, depth + 1)?;
                self.table.array_of(e, a.nelems)
            }
            Ck::Function(f) => {
                let ret = self.convert(f.ret, depth + 1)?;
                let mut args = Vec::new();
                for a in &f.args {
                    args.push(self.convert(*a, depth + 1)?);
                }
                let n = format!("{} (*)()", self.table.name(ret));
                self.table.add(n, TypeKind::Function(ret, args))
            }
            Ck::Struct(ms) | Ck::Union(ms) => {
                let kind = if matches!(t.kind, Ck::Struct(_)) {
                    SouKind::Struct
                } else {
                    SouKind::Union
                };
                let kw = if kind == SouKind::Struct {
                    "struct"
                } else {
                    "union"
                };
                let full = if name.is_empty() {
                    format!("{kw} <anon>")
                } else {
                    format!("{kw} {name}")
                };
                let existing = if name.is_empty() {
                    None
                } else {
                    self.table.lookup(&full)
                };
                if let Some(ours) = existing {
                    if matches!(
                        self.table.kind(ours),
                        TypeKind::Sou {
                            members: Some(_),
                            ..
                        }
                    ) {
                        self.memo.insert(id.0, ours);
                        return Some(ours);
                    }
                }
                let placeholder = TypeKind::Sou {
                    kind,
                    members: None,
                    size: 0,
                    align: 1,
                };
                let sid = match existing {
                    // a forward declaration made earlier (a pointer target): complete it in place
                    Some(f) => f,
                    None if name.is_empty() => self.table.add(full, placeholder),
                    None => self.table.add_named(&full, placeholder),
                };
                self.memo.insert(id.0, sid);
                let mut members = Vec::new();
                for m in ms.clone() {
                    let Some(mt) = self.convert(m.type_id, depth + 1) else {
                        continue;
                    };
                    // a bit-field has an integer type narrower than its storage
                    let field = match self.c.get(m.type_id).map(|t| (t.size, &t.kind)) {
                        Ok((size, Ck::Integer(e)))
                            if u64::from(e.bits) < size * 8 || e.offset != 0 =>
                        {
                            BitField::at(m.offset_bits + u64::from(e.offset), u32::from(e.bits))
                        }
                        _ => None,
                    };
                    let (offset, bits) = match field {
                        Some((o, b)) => (o, Some(b)),
                        None => ((m.offset_bits / 8) as u32, None),
                    };
                    members.push(Member {
                        name: m.name.clone(),
                        ty: mt,
                        offset,
                        bits,
                    });
                }
                let align = self.c.align_of(id).unwrap_or(1).max(1) as u32;
                self.table.set_kind(
                    sid,
                    TypeKind::Sou {
                        kind,
                        members: Some(members),
                        size: t.size as u32,
                        align,
                    },
                );
                sid
            }
            Ck::Enum(es) => {
                let full = format!("enum {name}");
                let values = es
                    .iter()
                    .map(|e| (e.name.clone(), e.value as i64))
                    .collect();
                self.table.add_named(&full, TypeKind::Enum { values })
            }
            Ck::Forward(fk) => {
                let (kw, kind) = match fk {
                    dtrace_ctf::ForwardKind::Union => ("union", SouKind::Union),
                    _ => ("struct", SouKind::Struct),
                };
                let full = format!("{kw} {name}");
                match self.table.lookup(&full) {
                    Some(ours) => ours,
                    None => self.table.add_named(
                        &full,
                        TypeKind::Sou {
                            kind,
                            members: None,
                            size: 0,
                            align: 1,
                        },
                    ),
                }
            }
            Ck::Typedef(to) => {
                // A name D also defines (`dev_t` is 64-bit in D, 32-bit in Linux) means the kernel's
                // own type inside kernel types, as in DTrace where each CTF container keeps its own;
                // the name stays D's for the program.
                let existing = self.table.lookup(&name);
                let same = existing.is_some_and(|ours| {
                    self.table.is_imported(ours)
                        || self.c.size_of(id).ok() == Some(self.table.size(ours))
                });
                match existing {
                    Some(ours) if same => ours,
                    _ => {
                        let to = self.convert(*to, depth + 1)?;
                        if existing.is_some() {
                            self.table.add(name.clone(), TypeKind::Typedef(to))
                        } else {
                            self.table.add_named(&name, TypeKind::Typedef(to))
                        }
                    }
                }
            }
            Ck::Volatile(to) | Ck::Const(to) | Ck::Restrict(to) => self.convert(*to, depth + 1)?,
        };
        self.memo.insert(id.0, out);
        Some(out)
    }
}

impl Importer<'_> {
    /// A pointer target that is a named struct or union becomes (or reuses) a forward declaration,
    /// completed from the source only when a member, size or value is needed.
    fn shallow(&mut self, id: CtfId) -> Option<TypeId> {
        let t = self.c.get(id).ok()?;
        let kw = match &t.kind {
            Ck::Struct(_) => "struct",
            Ck::Union(_) => "union",
            _ => return None,
        };
        if t.name.is_empty() {
            return None;
        }
        let full = format!("{kw} {}", t.name);
        if let Some(ours) = self.table.lookup(&full) {
            return Some(ours);
        }
        let kind = if kw == "struct" {
            SouKind::Struct
        } else {
            SouKind::Union
        };
        Some(self.table.add_named(
            &full,
            TypeKind::Sou {
                kind,
                members: None,
                size: 0,
                align: 1,
            },
        ))
    }
}

impl TypeSource for CtfTypes {
    fn import(&self, name: &str, table: &mut TypeTable) -> Option<TypeId> {
        let id = self.ctf.lookup_by_name(name)?;
        let mut imp = Importer {
            c: &self.ctf,
            table,
            memo: HashMap::new(),
        };
        imp.convert(id, 0)
    }

    fn typedef_names(&self) -> Vec<String> {
        self.typedefs.clone()
    }
}
