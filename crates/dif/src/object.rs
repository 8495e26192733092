//! DIF objects: instruction text with the integer, string and variable tables and the return type
//! (`dtrace_difo_t`), and DIF types (`dtrace_diftype_t`) and variable-table entries (`dtrace_difv_t`).

/// `dtdt_kind`: a C type described by CTF.
pub const DIF_TYPE_CTF: u8 = 0;
/// `dtdt_kind`: a D string.
pub const DIF_TYPE_STRING: u8 = 1;
/// `dtdt_flags`: the value is a reference (pointer) to data of `size` bytes in the DTrace address space.
pub const DIF_TF_BYREF: u8 = 0x1;
/// `dtdt_flags`: the value is a reference to data of `size` bytes in user space.
pub const DIF_TF_BYUREF: u8 = 0x2;

/// CTF kinds used in `ckind` (spec Table 4.1).
pub mod ctf_kind {
    /// Unknown.
    pub const UNKNOWN: u8 = 0;
    /// Integer.
    pub const INTEGER: u8 = 1;
    /// Floating point.
    pub const FLOAT: u8 = 2;
    /// Pointer.
    pub const POINTER: u8 = 3;
    /// Array.
    pub const ARRAY: u8 = 4;
    /// Function.
    pub const FUNCTION: u8 = 5;
    /// Struct.
    pub const STRUCT: u8 = 6;
    /// Union.
    pub const UNION: u8 = 7;
    /// Enum.
    pub const ENUM: u8 = 8;
    /// Forward declaration.
    pub const FORWARD: u8 = 9;
    /// Typedef.
    pub const TYPEDEF: u8 = 10;
    /// Volatile.
    pub const VOLATILE: u8 = 11;
    /// Const.
    pub const CONST: u8 = 12;
    /// Restrict.
    pub const RESTRICT: u8 = 13;
}

/// The type of a DIF value (`dtrace_diftype_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DifType {
    /// `DIF_TYPE_CTF` or `DIF_TYPE_STRING`.
    pub kind: u8,
    /// The CTF kind (see [`ctf_kind`]) when `kind` is `DIF_TYPE_CTF`.
    pub ckind: u8,
    /// `DIF_TF_BYREF`, `DIF_TF_BYUREF` or 0 (by value).
    pub flags: u8,
    /// Size in bytes of the value, or of the referenced data when by reference.
    pub size: u32,
}

impl DifType {
    /// An integer of `size` bytes passed by value.
    pub fn integer(size: u32) -> DifType {
        DifType {
            kind: DIF_TYPE_CTF,
            ckind: ctf_kind::INTEGER,
            flags: 0,
            size,
        }
    }

    /// A D string of at most `strsize` bytes (including its NUL), by reference.
    pub fn string(strsize: u32) -> DifType {
        DifType {
            kind: DIF_TYPE_STRING,
            ckind: ctf_kind::UNKNOWN,
            flags: DIF_TF_BYREF,
            size: strsize,
        }
    }

    /// Whether the value is a reference to `size` bytes rather than the value itself.
    pub fn is_by_ref(&self) -> bool {
        self.flags & (DIF_TF_BYREF | DIF_TF_BYUREF) != 0
    }

    /// Whether this is a D string.
    pub fn is_string(&self) -> bool {
        self.kind == DIF_TYPE_STRING
    }
}

/// `dtdv_kind`: an associative or indexed array.
pub const DIFV_KIND_ARRAY: u8 = 0;
/// `dtdv_kind`: a scalar.
pub const DIFV_KIND_SCALAR: u8 = 1;
/// `dtdv_scope`: global.
pub const DIFV_SCOPE_GLOBAL: u8 = 0;
/// `dtdv_scope`: thread-local (`self->`).
pub const DIFV_SCOPE_THREAD: u8 = 1;
/// `dtdv_scope`: clause-local (`this->`).
pub const DIFV_SCOPE_LOCAL: u8 = 2;
/// `dtdv_flags`: the variable is read.
pub const DIFV_F_REF: u16 = 0x1;
/// `dtdv_flags`: the variable is written.
pub const DIFV_F_MOD: u16 = 0x2;

/// One entry of a DIF object's variable table (`dtrace_difv_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VarEntry {
    /// Offset of the variable's name in the object's string table.
    pub name: u32,
    /// Variable id: below `vars::DIF_VAR_OTHER_UBASE` for built-ins, at or above it for user variables.
    pub id: u32,
    /// `DIFV_KIND_ARRAY` or `DIFV_KIND_SCALAR`.
    pub kind: u8,
    /// `DIFV_SCOPE_GLOBAL`, `DIFV_SCOPE_THREAD` or `DIFV_SCOPE_LOCAL`.
    pub scope: u8,
    /// `DIFV_F_REF` | `DIFV_F_MOD`.
    pub flags: u16,
    /// The variable's type (for arrays: the element type).
    pub ty: DifType,
}

/// A DIF object (`dtrace_difo_t`): what one predicate or one action's expression compiles to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DifObject {
    /// Instruction words.
    pub text: Vec<u32>,
    /// Integer table (`setx`).
    pub inttab: Vec<u64>,
    /// String table: NUL-terminated strings addressed by byte offset (`sets`, variable names).
    pub strtab: Vec<u8>,
    /// Variables the object references.
    pub vartab: Vec<VarEntry>,
    /// Type of the value the object returns.
    pub rtype: DifType,
}

impl DifObject {
    /// The subroutines the object's code calls, once per `call` instruction, in code order
    /// (words that do not decode, and unknown subroutine numbers, are skipped: the verifier
    /// refuses those).
    pub fn subrs_called(&self) -> impl Iterator<Item = crate::subr::Subr> + '_ {
        self.text
            .iter()
            .filter_map(|w| match crate::instr::Instr::decode(*w) {
                Ok(crate::instr::Instr::Call { subr, .. }) => crate::subr::Subr::from_u16(subr),
                _ => None,
            })
    }

    /// The NUL-terminated string at `offset` in the string table, if it is there and terminated.
    pub fn string_at(&self, offset: usize) -> Option<&[u8]> {
        let rest = self.strtab.get(offset..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        Some(&rest[..end])
    }
}
