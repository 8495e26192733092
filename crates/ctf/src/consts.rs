//! Numeric values of the CTF format (illumos/FreeBSD `sys/ctf.h`), for versions 2 and 3.

/// Magic number in the preamble.
pub const CTF_MAGIC: u16 = 0xcff1;
/// Version 2: 16-bit type ids, the version of the OpenDTrace specification.
pub const CTF_VERSION_2: u8 = 2;
/// Version 3 (FreeBSD 14): 32-bit type ids and lengths; needed for kernels with more than 32767 types.
pub const CTF_VERSION_3: u8 = 3;
/// Header flag: everything after the header is one zlib stream.
pub const CTF_F_COMPRESS: u8 = 0x1;
/// Size of `ctf_header_t`.
pub const CTF_HEADER_SIZE: usize = 36;

/// Largest name offset; bit 31 selects the string table.
pub const CTF_MAX_NAME: u32 = 0x7fff_ffff;
/// String table selector of the container's own string table.
pub const CTF_STRTAB_0: u32 = 0;
/// String table selector of the external (ELF) string table.
pub const CTF_STRTAB_1: u32 = 1;

/// Kind numbers (`CTF_K_*`).
pub const CTF_K_UNKNOWN: u32 = 0;
/// Integer.
pub const CTF_K_INTEGER: u32 = 1;
/// Floating point.
pub const CTF_K_FLOAT: u32 = 2;
/// Pointer.
pub const CTF_K_POINTER: u32 = 3;
/// Array.
pub const CTF_K_ARRAY: u32 = 4;
/// Function.
pub const CTF_K_FUNCTION: u32 = 5;
/// Struct.
pub const CTF_K_STRUCT: u32 = 6;
/// Union.
pub const CTF_K_UNION: u32 = 7;
/// Enum.
pub const CTF_K_ENUM: u32 = 8;
/// Forward declaration.
pub const CTF_K_FORWARD: u32 = 9;
/// Typedef.
pub const CTF_K_TYPEDEF: u32 = 10;
/// Volatile qualifier.
pub const CTF_K_VOLATILE: u32 = 11;
/// Const qualifier.
pub const CTF_K_CONST: u32 = 12;
/// Restrict qualifier.
pub const CTF_K_RESTRICT: u32 = 13;

/// Integer encoding flag: signed.
pub const CTF_INT_SIGNED: u8 = 0x01;
/// Integer encoding flag: character.
pub const CTF_INT_CHAR: u8 = 0x02;
/// Integer encoding flag: boolean.
pub const CTF_INT_BOOL: u8 = 0x04;
/// Integer encoding flag: printed varargs-style.
pub const CTF_INT_VARARGS: u8 = 0x08;

/// Float encodings (Table 4.2).
pub const CTF_FP_SINGLE: u8 = 1;
/// IEEE 64-bit.
pub const CTF_FP_DOUBLE: u8 = 2;
/// Complex.
pub const CTF_FP_CPLX: u8 = 3;
/// Double complex.
pub const CTF_FP_DCPLX: u8 = 4;
/// Long double complex.
pub const CTF_FP_LDCPLX: u8 = 5;
/// Long double.
pub const CTF_FP_LDOUBLE: u8 = 6;
/// Interval.
pub const CTF_FP_INTRVL: u8 = 7;
/// Double interval.
pub const CTF_FP_DINTRVL: u8 = 8;
/// Long double interval.
pub const CTF_FP_LDINTRVL: u8 = 9;
/// Imaginary.
pub const CTF_FP_IMAGRY: u8 = 10;
/// Double imaginary.
pub const CTF_FP_DIMAGRY: u8 = 11;
/// Long double imaginary.
pub const CTF_FP_LDIMAGRY: u8 = 12;

/// Version-dependent limits and record sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// 2 or 3.
    pub version: u8,
    /// Bytes of a type id in records (2 or 4).
    pub id_bytes: usize,
    /// Size of the small type record.
    pub stype_size: usize,
    /// Size of the large type record.
    pub ltype_size: usize,
    /// Largest vlen.
    pub max_vlen: u32,
    /// Largest size in a small record; the next value is the large-record sentinel.
    pub max_size: u32,
    /// Struct size from which members use the large member record.
    pub lstruct_thresh: u64,
    /// Size of the small member record.
    pub member_size: usize,
    /// Size of the large member record.
    pub lmember_size: usize,
    /// Size of the array record.
    pub array_size: usize,
    /// Bit that marks a child type id.
    pub child_bit: u32,
    /// Largest type index in one container.
    pub max_index: u32,
}

impl Layout {
    /// Limits of CTF version 2.
    pub const V2: Layout = Layout {
        version: 2,
        id_bytes: 2,
        stype_size: 8,
        ltype_size: 16,
        max_vlen: 0x3ff,
        max_size: 0xfffe,
        lstruct_thresh: 1 << 13,
        member_size: 8,
        lmember_size: 16,
        array_size: 8,
        child_bit: 0x8000,
        max_index: 0x7fff,
    };
    /// Limits of CTF version 3.
    pub const V3: Layout = Layout {
        version: 3,
        id_bytes: 4,
        stype_size: 12,
        ltype_size: 20,
        max_vlen: 0x00ff_ffff,
        max_size: 0xffff_fffe,
        lstruct_thresh: 1 << 29,
        member_size: 12,
        lmember_size: 16,
        array_size: 12,
        child_bit: 0x8000_0000,
        max_index: 0x7fff_ffff,
    };

    /// The layout of a version, if this crate reads it.
    pub fn for_version(version: u8) -> Option<Layout> {
        match version {
            2 => Some(Self::V2),
            3 => Some(Self::V3),
            _ => None,
        }
    }

    /// Packs kind, root flag and vlen into an info word.
    pub fn info(&self, kind: u32, root: bool, vlen: u32) -> u32 {
        if self.version == 2 {
            (kind << 11) | (u32::from(root) << 10) | (vlen & self.max_vlen)
        } else {
            (kind << 26) | (u32::from(root) << 25) | (vlen & self.max_vlen)
        }
    }

    /// Splits an info word into (kind, root, vlen).
    pub fn split_info(&self, info: u32) -> (u32, bool, u32) {
        if self.version == 2 {
            (
                (info & 0xf800) >> 11,
                info & 0x0400 != 0,
                info & self.max_vlen,
            )
        } else {
            (
                (info & 0xfc00_0000) >> 26,
                info & 0x0200_0000 != 0,
                info & self.max_vlen,
            )
        }
    }
}
