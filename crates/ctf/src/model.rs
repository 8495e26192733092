//! The in-memory type graph: type ids, types, members, enumerators and encodings.
//!
//! These are plain values; a [`crate::Container`] owns a list of them and the indexes over them. Type ids
//! are version independent: parent types are numbered from 1, child types carry [`TypeId::CHILD_BIT`]
//! (the on-disk child bit of CTF v2 is translated on reading and writing).

use crate::consts::*;

/// A type id. `0` means `void` (or "no type"); ids with [`TypeId::CHILD_BIT`] set belong to a child
/// container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TypeId(pub u32);

impl TypeId {
    /// `void` / no type.
    pub const VOID: TypeId = TypeId(0);
    /// Marks a type of a child container.
    pub const CHILD_BIT: u32 = 0x8000_0000;

    /// Whether this id is one of a child container's.
    pub fn is_child(self) -> bool {
        self.0 & Self::CHILD_BIT != 0
    }

    /// The 1-based index within its container.
    pub fn index(self) -> u32 {
        self.0 & !Self::CHILD_BIT
    }

    /// The id of index `index` (1-based) in a parent (`child == false`) or child container.
    pub fn from_index(index: u32, child: bool) -> TypeId {
        TypeId(if child {
            index | Self::CHILD_BIT
        } else {
            index
        })
    }
}

impl std::fmt::Display for TypeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_child() {
            write!(f, "c{}", self.index())
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// Integer encoding: flags (`CTF_INT_*`), bit offset and width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IntEncoding {
    /// `CTF_INT_SIGNED`, `CTF_INT_CHAR`, `CTF_INT_BOOL`, `CTF_INT_VARARGS`.
    pub flags: u8,
    /// Offset in bits of the value within its storage.
    pub offset: u8,
    /// Width in bits.
    pub bits: u16,
}

impl IntEncoding {
    /// Whether the integer is signed.
    pub fn is_signed(&self) -> bool {
        self.flags & CTF_INT_SIGNED != 0
    }
    /// Packs into the 32-bit `CTF_INT_DATA` word.
    pub fn to_word(self) -> u32 {
        (u32::from(self.flags) << 24) | (u32::from(self.offset) << 16) | u32::from(self.bits)
    }
    /// Unpacks a `CTF_INT_DATA` word.
    pub fn from_word(w: u32) -> Self {
        IntEncoding {
            flags: (w >> 24) as u8,
            offset: (w >> 16) as u8,
            bits: w as u16,
        }
    }
}

/// Floating-point encoding: format (`CTF_FP_*`), bit offset and width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FloatEncoding {
    /// One of `CTF_FP_SINGLE` ... `CTF_FP_LDIMAGRY`.
    pub format: u8,
    /// Offset in bits.
    pub offset: u8,
    /// Width in bits.
    pub bits: u16,
}

impl FloatEncoding {
    /// Packs into the 32-bit `CTF_FP_DATA` word.
    pub fn to_word(self) -> u32 {
        (u32::from(self.format) << 24) | (u32::from(self.offset) << 16) | u32::from(self.bits)
    }
    /// Unpacks a `CTF_FP_DATA` word.
    pub fn from_word(w: u32) -> Self {
        FloatEncoding {
            format: (w >> 24) as u8,
            offset: (w >> 16) as u8,
            bits: w as u16,
        }
    }
}

/// An array: element type, index type and element count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArrayInfo {
    /// Element type.
    pub contents: TypeId,
    /// Index type.
    pub index: TypeId,
    /// Number of elements.
    pub nelems: u32,
}

/// A function signature: return type, argument types, and whether it takes `...`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FunctionInfo {
    /// Return type.
    pub ret: TypeId,
    /// Argument types.
    pub args: Vec<TypeId>,
    /// Whether a variable argument list follows.
    pub varargs: bool,
}

/// A struct or union member.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Member {
    /// Name; empty for an anonymous struct/union member.
    pub name: String,
    /// Type. Bit-fields have an integer type whose encoding gives the width.
    pub type_id: TypeId,
    /// Offset from the start of the aggregate, in bits.
    pub offset_bits: u64,
}

/// An enumerator.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Enumerator {
    /// Name.
    pub name: String,
    /// Value.
    pub value: i32,
}

/// Which tag a forward declaration names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ForwardKind {
    /// `struct x;`
    Struct,
    /// `union x;`
    Union,
    /// `enum x;`
    Enum,
}

/// The kind of a type, with what each kind carries (Table 4.1).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TypeKind {
    /// `CTF_K_UNKNOWN`: padding or a type the producer could not describe.
    Unknown,
    /// `CTF_K_INTEGER`.
    Integer(IntEncoding),
    /// `CTF_K_FLOAT`.
    Float(FloatEncoding),
    /// `CTF_K_POINTER` to the referenced type.
    Pointer(TypeId),
    /// `CTF_K_ARRAY`.
    Array(ArrayInfo),
    /// `CTF_K_FUNCTION`.
    Function(FunctionInfo),
    /// `CTF_K_STRUCT`.
    Struct(Vec<Member>),
    /// `CTF_K_UNION`.
    Union(Vec<Member>),
    /// `CTF_K_ENUM`.
    Enum(Vec<Enumerator>),
    /// `CTF_K_FORWARD`.
    Forward(ForwardKind),
    /// `CTF_K_TYPEDEF` of the referenced type.
    Typedef(TypeId),
    /// `CTF_K_VOLATILE`.
    Volatile(TypeId),
    /// `CTF_K_CONST`.
    Const(TypeId),
    /// `CTF_K_RESTRICT`.
    Restrict(TypeId),
}

impl TypeKind {
    /// The `CTF_K_*` number.
    pub fn code(&self) -> u32 {
        match self {
            TypeKind::Unknown => CTF_K_UNKNOWN,
            TypeKind::Integer(_) => CTF_K_INTEGER,
            TypeKind::Float(_) => CTF_K_FLOAT,
            TypeKind::Pointer(_) => CTF_K_POINTER,
            TypeKind::Array(_) => CTF_K_ARRAY,
            TypeKind::Function(_) => CTF_K_FUNCTION,
            TypeKind::Struct(_) => CTF_K_STRUCT,
            TypeKind::Union(_) => CTF_K_UNION,
            TypeKind::Enum(_) => CTF_K_ENUM,
            TypeKind::Forward(_) => CTF_K_FORWARD,
            TypeKind::Typedef(_) => CTF_K_TYPEDEF,
            TypeKind::Volatile(_) => CTF_K_VOLATILE,
            TypeKind::Const(_) => CTF_K_CONST,
            TypeKind::Restrict(_) => CTF_K_RESTRICT,
        }
    }

    /// A short lowercase name of the kind, as `ctfdump` prints it.
    pub fn kind_name(&self) -> &'static str {
        match self {
            TypeKind::Unknown => "unknown",
            TypeKind::Integer(_) => "integer",
            TypeKind::Float(_) => "float",
            TypeKind::Pointer(_) => "pointer",
            TypeKind::Array(_) => "array",
            TypeKind::Function(_) => "function",
            TypeKind::Struct(_) => "struct",
            TypeKind::Union(_) => "union",
            TypeKind::Enum(_) => "enum",
            TypeKind::Forward(_) => "forward",
            TypeKind::Typedef(_) => "typedef",
            TypeKind::Volatile(_) => "volatile",
            TypeKind::Const(_) => "const",
            TypeKind::Restrict(_) => "restrict",
        }
    }

    /// The single type this kind refers to (pointer target, typedef or qualifier base).
    pub fn reference(&self) -> Option<TypeId> {
        match self {
            TypeKind::Pointer(t)
            | TypeKind::Typedef(t)
            | TypeKind::Volatile(t)
            | TypeKind::Const(t)
            | TypeKind::Restrict(t) => Some(*t),
            _ => None,
        }
    }

    /// Every type id this kind refers to, in record order.
    pub fn referenced_ids(&self) -> Vec<TypeId> {
        match self {
            TypeKind::Pointer(t)
            | TypeKind::Typedef(t)
            | TypeKind::Volatile(t)
            | TypeKind::Const(t)
            | TypeKind::Restrict(t) => vec![*t],
            TypeKind::Array(a) => vec![a.contents, a.index],
            TypeKind::Function(f) => std::iter::once(f.ret)
                .chain(f.args.iter().copied())
                .collect(),
            TypeKind::Struct(m) | TypeKind::Union(m) => m.iter().map(|m| m.type_id).collect(),
            _ => Vec::new(),
        }
    }

    /// Whether this kind carries its own size (integer, float, struct, union, enum).
    pub fn has_size(&self) -> bool {
        matches!(
            self,
            TypeKind::Integer(_)
                | TypeKind::Float(_)
                | TypeKind::Struct(_)
                | TypeKind::Union(_)
                | TypeKind::Enum(_)
                | TypeKind::Unknown
        )
    }
}

/// One type: its name (empty if anonymous), kind, own size in bytes (for kinds that have one) and
/// whether it is a root type (visible to lookups by name).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Type {
    /// Name, or empty.
    pub name: String,
    /// Kind and kind-specific data.
    pub kind: TypeKind,
    /// Size in bytes for integer, float, struct, union, enum and unknown; 0 for the others.
    pub size: u64,
    /// Whether lookups by name find this type (`isroot`).
    pub root: bool,
}

impl Type {
    /// A root type.
    pub fn new(name: impl Into<String>, kind: TypeKind, size: u64) -> Type {
        Type {
            name: name.into(),
            kind,
            size,
            root: true,
        }
    }
}

/// A label: names the last type index of a group (`ctf_lblent_t`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Label {
    /// Label name.
    pub name: String,
    /// Last type index covered.
    pub type_index: u32,
}
