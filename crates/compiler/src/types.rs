//! D's type system: a table of types (built-in integers, `string`, pointers, arrays, D-declared
//! structs, unions, enums and typedefs) under the LP64 or ILP32 data model, with C's promotion rules and
//! the predicates the checker needs. Types from other sources (CTF, BTF) plug in through
//! [`TypeSource`], which imports a named type into the table on demand.

use std::collections::HashMap;

use dtrace_dif::object::{ctf_kind, DifType, DIF_TF_BYREF, DIF_TYPE_CTF};

use crate::ast::SouKind;

/// Index of a type in a [`TypeTable`].
pub type TypeId = u32;

/// The data model of the compiled program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DataModel {
    /// 64-bit longs and pointers.
    #[default]
    Lp64,
    /// 32-bit ints, longs and pointers.
    Ilp32,
}

/// A struct or union member.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub name: String,
    pub ty: TypeId,
    /// Byte offset (of a bit-field: of the aligned word holding it).
    pub offset: u32,
    /// A bit-field: where it lies in the word at `offset`.
    pub bits: Option<BitField>,
}

/// A bit-field's place (little-endian): `width` bits from bit `shift` of the naturally aligned
/// `load`-byte word at the member's offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitField {
    pub shift: u8,
    pub width: u8,
    pub load: u8,
}

impl BitField {
    /// The bit-field of `width` bits at bit `bit_offset` of its aggregate: the byte offset of the
    /// smallest naturally aligned word (1, 2, 4 or 8 bytes) holding it, and its place there;
    /// `None` when no such word holds it (a packed field straddling 8-byte words).
    pub fn at(bit_offset: u64, width: u32) -> Option<(u32, BitField)> {
        if width == 0 || width > 64 {
            return None;
        }
        for load in [1u64, 2, 4, 8] {
            let start = bit_offset / (8 * load) * (8 * load);
            if bit_offset + width as u64 <= start + 8 * load {
                let off = u32::try_from(start / 8).ok()?;
                return Some((
                    off,
                    BitField {
                        shift: (bit_offset - start) as u8,
                        width: width as u8,
                        load: load as u8,
                    },
                ));
            }
        }
        None
    }
}

/// What a type is.
#[derive(Debug, Clone, PartialEq)]
pub enum TypeKind {
    Void,
    /// Integers (`char` is a signed 1-byte integer; `_Bool` an unsigned one).
    Int {
        signed: bool,
        size: u32,
    },
    Float {
        size: u32,
    },
    /// D's `string`.
    String,
    Pointer(TypeId),
    Array(TypeId, u32),
    /// A struct or union; `members` is `None` while only forward-declared.
    Sou {
        kind: SouKind,
        members: Option<Vec<Member>>,
        size: u32,
        align: u32,
    },
    Enum {
        values: Vec<(String, i64)>,
    },
    Typedef(TypeId),
    Function(TypeId, Vec<TypeId>),
}

/// One type with its printed name.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeInfo {
    pub kind: TypeKind,
    pub name: String,
    /// Added by a [`TypeSource`] (a kernel or program type), not declared in D or built in.
    pub imported: bool,
}

/// A provider of named C types (CTF or BTF containers); it adds the type (and what it refers to) to
/// the table and returns its id.
pub trait TypeSource: Send {
    /// Imports `name` (`"struct task_struct"`, `"pid_t"`) into `table`, if this source knows it.
    fn import(&self, name: &str, table: &mut TypeTable) -> Option<TypeId>;
    /// Typedef names this source knows (so the parser can recognize casts).
    fn typedef_names(&self) -> Vec<String>;
}

/// The table of types of one compilation.
pub struct TypeTable {
    types: Vec<TypeInfo>,
    by_name: HashMap<String, TypeId>,
    /// Types added now come from a source (see [`TypeInfo::imported`]).
    importing: bool,
    /// The data model.
    pub model: DataModel,
    /// The size of `string` objects (`strsize`).
    pub strsize: u32,
    sources: Vec<Box<dyn TypeSource>>,
    /// While a compilation may be undone: the earlier binding of each name D declarations bound
    /// (see [`TypeTable::begin_journal`]).
    journal: Option<Vec<(String, Option<TypeId>)>>,
}

/// Ids of the types the checker uses directly.
#[derive(Debug, Clone, Copy)]
pub struct Basic {
    pub void: TypeId,
    pub char: TypeId,
    pub int: TypeId,
    pub uint: TypeId,
    pub long: TypeId,
    pub ulong: TypeId,
    pub llong: TypeId,
    pub ullong: TypeId,
    pub int64: TypeId,
    pub uint64: TypeId,
    pub string: TypeId,
    pub void_ptr: TypeId,
    pub char_ptr: TypeId,
    pub size_t: TypeId,
    pub ptrdiff_t: TypeId,
    pub uintptr_t: TypeId,
}

impl TypeTable {
    /// A table holding D's built-in types for `model`.
    pub fn new(model: DataModel) -> (TypeTable, Basic) {
        let mut t = TypeTable {
            types: Vec::new(),
            by_name: HashMap::new(),
            journal: None,
            importing: false,
            model,
            strsize: 256,
            sources: Vec::new(),
        };
        let lp = model == DataModel::Lp64;
        let lsz = if lp { 8 } else { 4 };
        let void = t.add_named("void", TypeKind::Void);
        let char = t.add_int("char", true, 1);
        t.add_int("signed char", true, 1);
        t.add_int("unsigned char", false, 1);
        t.add_int("_Bool", false, 1);
        t.add_int("short", true, 2);
        t.add_int("unsigned short", false, 2);
        let int = t.add_int("int", true, 4);
        let uint = t.add_int("unsigned int", false, 4);
        let long = t.add_int("long", true, lsz);
        let ulong = t.add_int("unsigned long", false, lsz);
        let llong = t.add_int("long long", true, 8);
        let ullong = t.add_int("unsigned long long", false, 8);
        t.add_named("float", TypeKind::Float { size: 4 });
        t.add_named("double", TypeKind::Float { size: 8 });
        t.add_named("long double", TypeKind::Float { size: 16 });
        let string = t.add_named("string", TypeKind::String);
        let typedefs: &[(&str, &str)] = &[
            ("int8_t", "signed char"),
            ("int16_t", "short"),
            ("int32_t", "int"),
            ("int64_t", if lp { "long" } else { "long long" }),
            ("uint8_t", "unsigned char"),
            ("uint16_t", "unsigned short"),
            ("uint32_t", "unsigned int"),
            (
                "uint64_t",
                if lp {
                    "unsigned long"
                } else {
                    "unsigned long long"
                },
            ),
            ("intptr_t", "long"),
            ("uintptr_t", "unsigned long"),
            ("size_t", "unsigned long"),
            ("ssize_t", "long"),
            ("ptrdiff_t", "long"),
            ("off_t", "long"),
            ("off64_t", "long long"),
            ("uchar_t", "unsigned char"),
            ("ushort_t", "unsigned short"),
            ("uint_t", "unsigned int"),
            ("ulong_t", "unsigned long"),
            ("u_longlong_t", "unsigned long long"),
            ("longlong_t", "long long"),
            ("pid_t", "int"),
            ("id_t", "int"),
            ("uid_t", "unsigned int"),
            ("gid_t", "unsigned int"),
            ("zoneid_t", "int"),
            ("processorid_t", "int"),
            ("hrtime_t", "long long"),
            ("time_t", "long"),
            ("dev_t", "unsigned long"),
            ("mode_t", "unsigned int"),
            ("major_t", "unsigned int"),
            ("minor_t", "unsigned int"),
            ("ipaddr_t", "unsigned int"),
            ("boolean_t", "int"),
        ];
        for (n, target) in typedefs {
            let to = t.by_name[*target];
            t.add_named(n, TypeKind::Typedef(to));
        }
        let caddr_target = t.pointer_to(char);
        t.add_named("caddr_t", TypeKind::Typedef(caddr_target));
        let void_ptr = t.pointer_to(void);
        let char_ptr = t.pointer_to(char);
        let basic = Basic {
            void,
            char,
            int,
            uint,
            long,
            ulong,
            llong,
            ullong,
            int64: t.by_name["int64_t"],
            uint64: t.by_name["uint64_t"],
            string,
            void_ptr,
            char_ptr,
            size_t: t.by_name["size_t"],
            ptrdiff_t: t.by_name["ptrdiff_t"],
            uintptr_t: t.by_name["uintptr_t"],
        };
        (t, basic)
    }

    /// Adds a type source consulted when a name is not in the table.
    pub fn add_source(&mut self, s: Box<dyn TypeSource>) {
        self.sources.push(s);
    }

    /// Typedef names (for the parser).
    pub fn typedef_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .by_name
            .iter()
            .filter(|(_, id)| matches!(self.types[**id as usize].kind, TypeKind::Typedef(_)))
            .map(|(n, _)| n.clone())
            .collect();
        for s in &self.sources {
            v.extend(s.typedef_names());
        }
        v
    }

    fn add_int(&mut self, name: &str, signed: bool, size: u32) -> TypeId {
        self.add_named(name, TypeKind::Int { signed, size })
    }

    /// Adds a type under `name` (replacing any earlier binding of the name).
    pub fn add_named(&mut self, name: &str, kind: TypeKind) -> TypeId {
        let id = self.add(name.to_string(), kind);
        let old = self.by_name.insert(name.to_string(), id);
        if let Some(j) = self.journal.as_mut().filter(|_| !self.importing) {
            j.push((name.to_string(), old));
        }
        id
    }

    /// Starts recording the names D declarations bind, so that [`TypeTable::rollback`] can
    /// unbind them when the compilation fails (types imported from the sources stay).
    pub fn begin_journal(&mut self) {
        self.journal = Some(Vec::new());
    }

    /// Keeps the names bound since [`TypeTable::begin_journal`].
    pub fn commit(&mut self) {
        self.journal = None;
    }

    /// Restores the bindings of the names bound since [`TypeTable::begin_journal`] (the types
    /// stay in the table, unnamed), so a program compiled again declares them anew.
    pub fn rollback(&mut self) {
        for (name, old) in self.journal.take().unwrap_or_default().into_iter().rev() {
            match old {
                Some(id) => self.by_name.insert(name, id),
                None => self.by_name.remove(&name),
            };
        }
    }

    /// Adds an anonymous or derived type.
    pub fn add(&mut self, name: String, kind: TypeKind) -> TypeId {
        let imported = self.importing;
        self.types.push(TypeInfo {
            kind,
            name,
            imported,
        });
        (self.types.len() - 1) as TypeId
    }

    /// Whether `id` came from a [`TypeSource`] rather than from D.
    pub fn is_imported(&self, id: TypeId) -> bool {
        self.types.get(id as usize).is_some_and(|t| t.imported)
    }

    /// Replaces the kind of a type (completing a forward declaration).
    pub fn set_kind(&mut self, id: TypeId, kind: TypeKind) {
        if let Some(t) = self.types.get_mut(id as usize) {
            t.kind = kind;
        }
    }

    /// A named type (`int`, `struct foo`, `uint64_t`), consulting the sources.
    pub fn lookup(&mut self, name: &str) -> Option<TypeId> {
        if let Some(id) = self.by_name.get(name) {
            return Some(*id);
        }
        let sources = std::mem::take(&mut self.sources);
        let mut found = None;
        for s in &sources {
            self.importing = true;
            let r = s.import(name, self);
            self.importing = false;
            if let Some(id) = r {
                found = Some(id);
                break;
            }
        }
        self.sources = sources;
        found
    }

    /// Completes a forward-declared struct or union from the type sources, if one defines it.
    pub fn complete(&mut self, id: TypeId) {
        let r = self.resolve(id);
        if !matches!(self.kind(r), TypeKind::Sou { members: None, .. }) || self.sources.is_empty() {
            return;
        }
        let name = self.info(r).name.clone();
        let sources = std::mem::take(&mut self.sources);
        for s in &sources {
            self.importing = true;
            let r = s.import(&name, self);
            self.importing = false;
            if r.is_some() {
                break;
            }
        }
        self.sources = sources;
    }

    /// Whether a name is bound.
    pub fn has(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// The type's info.
    pub fn info(&self, id: TypeId) -> &TypeInfo {
        &self.types[id as usize]
    }

    /// The type's kind.
    pub fn kind(&self, id: TypeId) -> &TypeKind {
        &self.types[id as usize].kind
    }

    /// The type with typedefs removed.
    pub fn resolve(&self, mut id: TypeId) -> TypeId {
        for _ in 0..64 {
            match self.kind(id) {
                TypeKind::Typedef(t) => id = *t,
                _ => return id,
            }
        }
        id
    }

    /// The resolved kind.
    pub fn rkind(&self, id: TypeId) -> &TypeKind {
        self.kind(self.resolve(id))
    }

    /// Pointer to `to` (cached by name).
    pub fn pointer_to(&mut self, to: TypeId) -> TypeId {
        let name = self.ptr_name(to);
        if let Some(id) = self.by_name.get(&name) {
            if *self.kind(*id) == TypeKind::Pointer(to) {
                return *id;
            }
        }
        let id = self.add(name.clone(), TypeKind::Pointer(to));
        self.by_name.entry(name).or_insert(id);
        id
    }

    fn ptr_name(&self, to: TypeId) -> String {
        let n = &self.info(to).name;
        if n.ends_with('*') {
            format!("{n}*")
        } else {
            format!("{n} *")
        }
    }

    /// Array of `n` elements.
    pub fn array_of(&mut self, elem: TypeId, n: u32) -> TypeId {
        let name = format!("{} [{}]", self.info(elem).name, n);
        self.add(name, TypeKind::Array(elem, n))
    }

    /// Size in bytes.
    pub fn size(&self, id: TypeId) -> u64 {
        let ptr = if self.model == DataModel::Lp64 { 8 } else { 4 };
        match self.rkind(id) {
            TypeKind::Void => 0,
            TypeKind::Int { size, .. } | TypeKind::Float { size } => *size as u64,
            TypeKind::String => self.strsize as u64,
            TypeKind::Pointer(_) => ptr,
            TypeKind::Array(e, n) => self.size(*e).saturating_mul(*n as u64),
            TypeKind::Sou { size, .. } => *size as u64,
            TypeKind::Enum { .. } => 4,
            TypeKind::Typedef(_) => 0,
            TypeKind::Function(..) => 0,
        }
    }

    /// Alignment in bytes.
    pub fn align(&self, id: TypeId) -> u64 {
        match self.rkind(id) {
            TypeKind::Array(e, _) => self.align(*e),
            TypeKind::Sou { align, .. } => (*align).max(1) as u64,
            TypeKind::Float { size } => (*size as u64).min(8),
            _ => self.size(id).clamp(1, 8),
        }
    }

    /// The name as DTrace prints types in messages.
    pub fn name(&self, id: TypeId) -> String {
        self.info(id).name.clone()
    }

    pub fn is_integer(&self, id: TypeId) -> bool {
        matches!(self.rkind(id), TypeKind::Int { .. } | TypeKind::Enum { .. })
    }

    pub fn is_float(&self, id: TypeId) -> bool {
        matches!(self.rkind(id), TypeKind::Float { .. })
    }

    pub fn is_arith(&self, id: TypeId) -> bool {
        self.is_integer(id) || self.is_float(id)
    }

    pub fn is_pointer(&self, id: TypeId) -> bool {
        matches!(self.rkind(id), TypeKind::Pointer(_))
    }

    pub fn is_scalar(&self, id: TypeId) -> bool {
        self.is_arith(id) || self.is_pointer(id)
    }

    pub fn is_string(&self, id: TypeId) -> bool {
        matches!(self.rkind(id), TypeKind::String)
    }

    pub fn is_void(&self, id: TypeId) -> bool {
        matches!(self.rkind(id), TypeKind::Void)
    }

    /// `char *`, `char [n]` or `string`: usable where a string is expected.
    pub fn is_strcompat(&self, id: TypeId) -> bool {
        match self.rkind(id) {
            TypeKind::String => true,
            TypeKind::Pointer(t) | TypeKind::Array(t, _) => {
                matches!(self.rkind(*t), TypeKind::Int { size: 1, .. })
            }
            _ => false,
        }
    }

    /// An array of 32-bit integers: usable where a `wchar_t []` is expected (`%ls`).
    pub fn is_wstrcompat(&self, id: TypeId) -> bool {
        match self.rkind(id) {
            TypeKind::Array(t, _) => matches!(self.rkind(*t), TypeKind::Int { size: 4, .. }),
            _ => false,
        }
    }

    /// Pointer to void or to a function.
    pub fn is_vfptr(&self, id: TypeId) -> bool {
        match self.rkind(id) {
            TypeKind::Pointer(t) => {
                matches!(self.rkind(*t), TypeKind::Void | TypeKind::Function(..))
            }
            _ => false,
        }
    }

    /// `dt_node_is_ptrcompat` for two pointer (or array) types: compatible when either refers to
    /// `void` (or a function), both refer to integers, or the referenced types are the same.
    pub fn ptr_compat(&self, a: TypeId, b: TypeId) -> bool {
        let (Some(x), Some(y)) = (self.pointee(a), self.pointee(b)) else {
            return false;
        };
        let vf = |t| matches!(self.rkind(t), TypeKind::Void | TypeKind::Function(..));
        vf(x) || vf(y) || (self.is_integer(x) && self.is_integer(y)) || self.compat(x, y)
    }

    /// Whether values of this type are passed by reference (strings, structs, unions, arrays).
    pub fn is_by_ref(&self, id: TypeId) -> bool {
        matches!(
            self.rkind(id),
            TypeKind::String | TypeKind::Sou { .. } | TypeKind::Array(..)
        )
    }

    pub fn is_signed(&self, id: TypeId) -> bool {
        match self.rkind(id) {
            TypeKind::Int { signed, .. } => *signed,
            TypeKind::Enum { .. } => true,
            _ => false,
        }
    }

    /// What a pointer or array refers to.
    pub fn pointee(&self, id: TypeId) -> Option<TypeId> {
        match self.rkind(id) {
            TypeKind::Pointer(t) | TypeKind::Array(t, _) => Some(*t),
            _ => None,
        }
    }

    /// Whether two types are the same type once typedefs are removed (`ctf_type_compat`).
    pub fn compat(&self, a: TypeId, b: TypeId) -> bool {
        let (a, b) = (self.resolve(a), self.resolve(b));
        if a == b {
            return true;
        }
        match (self.kind(a), self.kind(b)) {
            (TypeKind::Pointer(x), TypeKind::Pointer(y)) => self.compat(*x, *y),
            (TypeKind::Array(x, n), TypeKind::Array(y, m)) => n == m && self.compat(*x, *y),
            (TypeKind::Int { .. }, TypeKind::Int { .. }) => self.info(a).name == self.info(b).name,
            (x, y) => x == y && self.info(a).name == self.info(b).name,
        }
    }

    /// Integer promotion (C's A6.1): types smaller than `int` become `int`.
    pub fn promote_one(&self, id: TypeId, basic: &Basic) -> TypeId {
        if (self.is_integer(id) && self.size(id) < 4)
            || matches!(self.rkind(id), TypeKind::Enum { .. })
        {
            basic.int
        } else {
            id
        }
    }

    /// The type of a binary operation on two integer operands (`dt_type_promote`): the operand
    /// type of the greater rank (its size, and unsigned above signed), enums counting as `int`.
    /// Unlike C, smaller types are not first promoted to `int`: `(unsigned char)254 + (char)3`
    /// is an `unsigned char`, recorded as 1.
    pub fn promote(&self, a: TypeId, b: TypeId, basic: &Basic) -> TypeId {
        let as_int = |t: TypeId| {
            if matches!(self.rkind(t), TypeKind::Enum { .. }) {
                basic.int
            } else {
                t
            }
        };
        let (a, b) = (as_int(a), as_int(b));
        let (sa, sb) = (self.size(a), self.size(b));
        if sa > sb {
            return a;
        }
        if sb > sa {
            return b;
        }
        if !self.is_signed(a) {
            return a;
        }
        if !self.is_signed(b) {
            return b;
        }
        a
    }

    /// The DIF type of a value of this type (`dt_node_diftype`).
    pub fn diftype(&self, id: TypeId, strsize: u32) -> DifType {
        let r = self.resolve(id);
        let size = self.size(r) as u32;
        match self.kind(r) {
            TypeKind::String => DifType::string(strsize),
            TypeKind::Void => DifType {
                kind: DIF_TYPE_CTF,
                ckind: ctf_kind::INTEGER,
                flags: 0,
                size: 0,
            },
            TypeKind::Sou { kind, .. } => DifType {
                kind: DIF_TYPE_CTF,
                ckind: if *kind == SouKind::Struct {
                    ctf_kind::STRUCT
                } else {
                    ctf_kind::UNION
                },
                flags: DIF_TF_BYREF,
                size,
            },
            TypeKind::Array(..) => DifType {
                kind: DIF_TYPE_CTF,
                ckind: ctf_kind::ARRAY,
                flags: DIF_TF_BYREF,
                size,
            },
            TypeKind::Pointer(_) => DifType {
                kind: DIF_TYPE_CTF,
                ckind: ctf_kind::POINTER,
                flags: 0,
                size,
            },
            TypeKind::Enum { .. } => DifType {
                kind: DIF_TYPE_CTF,
                ckind: ctf_kind::ENUM,
                flags: 0,
                size,
            },
            TypeKind::Float { .. } => DifType {
                kind: DIF_TYPE_CTF,
                ckind: ctf_kind::FLOAT,
                flags: 0,
                size,
            },
            _ => DifType::integer(size),
        }
    }

    /// Looks up a member of a struct or union type.
    pub fn member(&self, sou: TypeId, name: &str) -> Option<Member> {
        self.member_within(sou, name, 0)
    }

    /// Member `name` of `sou`, looking through anonymous struct and union members (C11, and how
    /// the kernel nests `struct file`'s `f_path` or `mm_struct`'s fields) with their offsets added.
    fn member_within(&self, sou: TypeId, name: &str, depth: u32) -> Option<Member> {
        let TypeKind::Sou {
            members: Some(m), ..
        } = self.rkind(sou)
        else {
            return None;
        };
        if let Some(x) = m.iter().find(|m| m.name == name) {
            return Some(x.clone());
        }
        if depth >= 16 || name.is_empty() {
            return None;
        }
        m.iter().filter(|a| a.name.is_empty()).find_map(|a| {
            let mut x = self.member_within(a.ty, name, depth + 1)?;
            x.offset += a.offset;
            Some(x)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_models() {
        let (t, b) = TypeTable::new(DataModel::Lp64);
        assert_eq!(t.size(b.long), 8);
        assert_eq!(t.size(b.void_ptr), 8);
        let (t32, b32) = TypeTable::new(DataModel::Ilp32);
        assert_eq!(t32.size(b32.long), 4);
        assert_eq!(t32.size(b32.void_ptr), 4);
        assert_eq!(t32.size(b32.int64), 8);
    }

    #[test]
    fn promotion() {
        let (mut t, b) = TypeTable::new(DataModel::Lp64);
        let uc = t.lookup("unsigned char").unwrap();
        assert_eq!(t.promote(uc, uc, &b), uc);
        assert_eq!(t.promote(uc, b.char, &b), uc);
        assert_eq!(t.promote(uc, b.int, &b), b.int);
        assert_eq!(t.promote(b.int, b.uint, &b), b.uint);
        assert_eq!(t.promote(b.int, b.long, &b), b.long);
        let u64t = t.lookup("uint64_t").unwrap();
        assert!(!t.is_signed(t.promote(b.long, u64t, &b)));
    }
}
