//! Linux BTF: a validating parser ([`Btf`]) and the conversion into a CTF [`Container`]
//! ([`btf_to_ctf`] for `vmlinux`, [`btf_to_ctf_child`] for split module BTF).
//!
//! BTF kinds map onto CTF kinds one to one where CTF has them. `FUNC` becomes a named CTF function
//! (so lookups by a kernel function's name give its signature), `FUNC_PROTO` an anonymous one;
//! `TYPE_TAG` is transparent; `ENUM64` becomes an enum whose values are truncated to 32 bits;
//! `VAR`, `DATASEC` and `DECL_TAG` describe no type and are dropped. A bit-field member
//! (`kind_flag` set) gets an integer type of the field's width, as ctfconvert makes them.

use std::collections::HashMap;

use crate::bytes::*;
use crate::consts::*;
use crate::container::Container;
use crate::error::{CtfError, Result};
use crate::model::*;

/// BTF magic.
pub const BTF_MAGIC: u16 = 0xeb9f;

/// BTF kind numbers.
pub mod kind {
    /// `void` (only as id 0).
    pub const UNKN: u32 = 0;
    /// Integer.
    pub const INT: u32 = 1;
    /// Pointer.
    pub const PTR: u32 = 2;
    /// Array.
    pub const ARRAY: u32 = 3;
    /// Struct.
    pub const STRUCT: u32 = 4;
    /// Union.
    pub const UNION: u32 = 5;
    /// Enum (32-bit values).
    pub const ENUM: u32 = 6;
    /// Forward declaration.
    pub const FWD: u32 = 7;
    /// Typedef.
    pub const TYPEDEF: u32 = 8;
    /// Volatile.
    pub const VOLATILE: u32 = 9;
    /// Const.
    pub const CONST: u32 = 10;
    /// Restrict.
    pub const RESTRICT: u32 = 11;
    /// A function (name and prototype).
    pub const FUNC: u32 = 12;
    /// A function prototype.
    pub const FUNC_PROTO: u32 = 13;
    /// A variable.
    pub const VAR: u32 = 14;
    /// A data section.
    pub const DATASEC: u32 = 15;
    /// Floating point.
    pub const FLOAT: u32 = 16;
    /// A declaration tag.
    pub const DECL_TAG: u32 = 17;
    /// A type tag.
    pub const TYPE_TAG: u32 = 18;
    /// Enum with 64-bit values.
    pub const ENUM64: u32 = 19;
}

/// One raw BTF type record: its common fields and where its trailing data starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BtfType {
    /// `name_off`.
    pub name_off: u32,
    /// Kind (bits 24-28 of info).
    pub kind: u32,
    /// vlen (bits 0-15 of info).
    pub vlen: u32,
    /// kind_flag (bit 31 of info).
    pub kind_flag: bool,
    /// `size` or `type`.
    pub size_or_type: u32,
    /// Offset of the trailing data in the type section.
    pub data_off: usize,
}

/// A parsed BTF blob (the whole of `/sys/kernel/btf/vmlinux` or a module's split BTF).
#[derive(Debug, Clone)]
pub struct Btf<'a> {
    types_bytes: &'a [u8],
    strings: &'a [u8],
    /// The string section as text when all of it is UTF-8 (as it always is in practice): each
    /// string is then found without checking its bytes again.
    strings_text: Option<&'a str>,
    /// Records; index `i` is type id `first_id + i`.
    pub types: Vec<BtfType>,
    /// Id of the first record: 1, or one past the base's last id for split BTF.
    pub first_id: u32,
    /// Size of the base's string table for split BTF (string offsets below it are the base's).
    base_str_len: u32,
    base: Option<&'a Btf<'a>>,
    /// A split blob parsed without its base ([`Btf::parse_over`]): its references into the base
    /// (ids below `first_id`, string offsets below `base_str_len`) are the caller's to check.
    base_elsewhere: bool,
}

impl<'a> Btf<'a> {
    /// Parses and validates a standalone BTF blob.
    pub fn parse(b: &'a [u8]) -> Result<Btf<'a>> {
        Self::parse_split(b, None)
    }

    /// Parses a blob whose types and strings continue those of `base` (module BTF on top of vmlinux).
    pub fn parse_split(b: &'a [u8], base: Option<&'a Btf<'a>>) -> Result<Btf<'a>> {
        let (first_id, base_str_len) = match base {
            Some(bb) => (
                bb.first_id + bb.types.len() as u32,
                bb.base_str_len + bb.strings.len() as u32,
            ),
            None => (1, 0),
        };
        Self::parse_with(b, base, (first_id, base_str_len), false)
    }

    /// Parses a split blob whose base (of `base_types` types, void included, and a string table
    /// of `base_str_len` bytes) the caller holds in another form: the blob's own records are
    /// validated; its references into the base are the caller's to check.
    pub fn parse_over(b: &'a [u8], base_types: u32, base_str_len: u32) -> Result<Btf<'a>> {
        if base_types == 0 {
            return Err(CtfError::BadHeader("a base of no types".into()));
        }
        Self::parse_with(b, None, (base_types, base_str_len), true)
    }

    fn parse_with(
        b: &'a [u8],
        base: Option<&'a Btf<'a>>,
        (first_id, base_str_len): (u32, u32),
        base_elsewhere: bool,
    ) -> Result<Btf<'a>> {
        let magic = u16_at(b, 0, "BTF header")?;
        if magic == BTF_MAGIC.swap_bytes() {
            return Err(CtfError::Unsupported("BTF of the other byte order".into()));
        }
        if magic != BTF_MAGIC {
            return Err(CtfError::BadMagic(u32::from(magic)));
        }
        let version = slice(b, 2, 1, "BTF header")?[0];
        if version != 1 {
            return Err(CtfError::BadVersion {
                format: "BTF",
                version: u32::from(version),
            });
        }
        let hdr_len = u32_at(b, 4, "BTF header")? as usize;
        if hdr_len < 24 {
            return Err(CtfError::BadHeader(format!("BTF header length {hdr_len}")));
        }
        let type_off = u32_at(b, 8, "BTF header")? as usize;
        let type_len = u32_at(b, 12, "BTF header")? as usize;
        let str_off = u32_at(b, 16, "BTF header")? as usize;
        let str_len = u32_at(b, 20, "BTF header")? as usize;
        let body = slice(b, 0, b.len(), "BTF")?
            .get(hdr_len..)
            .ok_or(CtfError::Truncated {
                what: "BTF header",
                offset: 0,
                need: hdr_len as u64,
                have: b.len() as u64,
            })?;
        if !type_off.is_multiple_of(4) {
            return Err(CtfError::BadHeader("misaligned BTF type section".into()));
        }
        let types_bytes = slice(body, type_off, type_len, "BTF type section")?;
        let strings = slice(body, str_off, str_len, "BTF string section")?;
        if base.is_none() && !base_elsewhere && (strings.is_empty() || strings[0] != 0) {
            return Err(CtfError::BadHeader(
                "BTF string table does not start with an empty string".into(),
            ));
        }
        let mut btf = Btf {
            types_bytes,
            strings,
            strings_text: std::str::from_utf8(strings).ok(),
            types: Vec::new(),
            first_id,
            base_str_len,
            base,
            base_elsewhere,
        };
        btf.scan()?;
        btf.validate()?;
        Ok(btf)
    }

    fn scan(&mut self) -> Result<()> {
        let tb = self.types_bytes;
        let mut off = 0usize;
        self.types.reserve(tb.len() / 12);
        while off < tb.len() {
            let id = self.first_id + self.types.len() as u32;
            let name_off = u32_at(tb, off, "BTF type")?;
            let info = u32_at(tb, off + 4, "BTF type")?;
            let size_or_type = u32_at(tb, off + 8, "BTF type")?;
            let k = (info >> 24) & 0x1f;
            let vlen = info & 0xffff;
            let data_off = off + 12;
            let extra = match k {
                kind::INT => 4,
                kind::PTR
                | kind::FWD
                | kind::TYPEDEF
                | kind::VOLATILE
                | kind::CONST
                | kind::RESTRICT
                | kind::FUNC
                | kind::FLOAT
                | kind::TYPE_TAG => 0,
                kind::ARRAY => 12,
                kind::STRUCT | kind::UNION => 12 * vlen as usize,
                kind::ENUM => 8 * vlen as usize,
                kind::ENUM64 => 12 * vlen as usize,
                kind::FUNC_PROTO => 8 * vlen as usize,
                kind::VAR => 4,
                kind::DATASEC => 12 * vlen as usize,
                kind::DECL_TAG => 4,
                _ => {
                    return Err(CtfError::BadType {
                        id,
                        why: format!("unknown BTF kind {k}"),
                    })
                }
            };
            slice(tb, data_off, extra, "BTF type data")?;
            self.types.push(BtfType {
                name_off,
                kind: k,
                vlen,
                kind_flag: info >> 31 != 0,
                size_or_type,
                data_off,
            });
            off = data_off + extra;
        }
        Ok(())
    }

    /// The last valid type id.
    pub fn max_id(&self) -> u32 {
        self.first_id + self.types.len() as u32 - 1
    }

    /// The record of type `id` (looking in the base for base ids). `None` for 0 (void) or unknown ids.
    pub fn get(&self, id: u32) -> Option<&BtfType> {
        if id >= self.first_id {
            self.types.get((id - self.first_id) as usize)
        } else {
            self.base.and_then(|b| b.get(id))
        }
    }

    fn data(&self, id: u32) -> &'a [u8] {
        if id >= self.first_id {
            self.types_bytes
        } else {
            self.base.map_or(self.types_bytes, |b| b.data(id))
        }
    }

    /// This blob's own string section (a split blob's continues its base's).
    pub fn string_section(&self) -> &'a [u8] {
        self.strings
    }

    /// The string at offset `off` (offsets continue the base's table in split BTF).
    pub fn string(&self, off: u32) -> Result<&'a str> {
        if off < self.base_str_len {
            return match self.base {
                Some(b) => b.string(off),
                None => Err(CtfError::BadString(off)),
            };
        }
        let local = off - self.base_str_len;
        if local == 0 && self.strings.is_empty() {
            return Ok("");
        }
        // In a string section that is all UTF-8, a string starting on a character boundary and
        // ending at a NUL is UTF-8 too; any other offset takes the checking path for its error.
        if let Some(rest) = self.strings_text.and_then(|t| t.get(local as usize..)) {
            if let Some(len) = rest.bytes().position(|c| c == 0) {
                return Ok(&rest[..len]);
            }
        }
        cstr_at(self.strings, local)
    }

    /// Checks that [`Btf::string`] finds a string at offset `off`, without looking for its end
    /// where the section is all UTF-8 and ends with a NUL (every character boundary then starts one).
    fn check_string(&self, off: u32) -> Result<()> {
        if off < self.base_str_len && self.base_elsewhere {
            return Ok(());
        }
        if off >= self.base_str_len {
            let local = (off - self.base_str_len) as usize;
            if let Some(t) = self.strings_text.filter(|t| t.ends_with('\0')) {
                if local < t.len() && t.is_char_boundary(local) {
                    return Ok(());
                }
            }
        }
        self.string(off).map(drop)
    }

    /// Word `i` (u32) of the trailing data of type `id`.
    pub fn word(&self, t: &BtfType, i: usize, id: u32) -> u32 {
        // bounds were checked by scan(); a failure here would be a bug, so fall back to 0
        u32_at(self.data(id), t.data_off + 4 * i, "BTF type data").unwrap_or(0)
    }

    /// Whether type `r` is in a base parsed elsewhere (see [`Btf::parse_over`]).
    fn in_base_elsewhere(&self, r: u32) -> bool {
        self.base_elsewhere && r < self.first_id
    }

    fn check_ref(&self, owner: u32, r: u32, allow_void: bool) -> Result<()> {
        if r == 0 {
            if allow_void {
                return Ok(());
            }
            return Err(CtfError::BadType {
                id: owner,
                why: "refers to void where a type is needed".into(),
            });
        }
        if self.in_base_elsewhere(r) {
            return Ok(());
        }
        if r > self.max_id() || self.get(r).is_none() {
            return Err(CtfError::BadType {
                id: owner,
                why: format!("refers to missing type {r}"),
            });
        }
        Ok(())
    }

    fn validate(&self) -> Result<()> {
        for (i, t) in self.types.iter().enumerate() {
            let id = self.first_id + i as u32;
            self.check_string(t.name_off)?;
            match t.kind {
                kind::PTR
                | kind::TYPEDEF
                | kind::VOLATILE
                | kind::CONST
                | kind::RESTRICT
                | kind::TYPE_TAG => self.check_ref(id, t.size_or_type, true)?,
                kind::FUNC => {
                    self.check_ref(id, t.size_or_type, false)?;
                    if !self.in_base_elsewhere(t.size_or_type)
                        && self.get(t.size_or_type).map(|p| p.kind) != Some(kind::FUNC_PROTO)
                    {
                        return Err(CtfError::BadType {
                            id,
                            why: "FUNC does not refer to a FUNC_PROTO".into(),
                        });
                    }
                }
                kind::VAR | kind::DECL_TAG => self.check_ref(id, t.size_or_type, false)?,
                kind::FUNC_PROTO => {
                    self.check_ref(id, t.size_or_type, true)?;
                    for j in 0..t.vlen as usize {
                        self.check_string(self.word(t, 2 * j, id))?;
                        // only the last parameter may be void, and then it means `...`
                        let last = j + 1 == t.vlen as usize;
                        self.check_ref(id, self.word(t, 2 * j + 1, id), last)?;
                    }
                }
                kind::ARRAY => {
                    self.check_ref(id, self.word(t, 0, id), false)?;
                    self.check_ref(id, self.word(t, 1, id), true)?;
                }
                kind::STRUCT | kind::UNION => {
                    for j in 0..t.vlen as usize {
                        self.check_string(self.word(t, 3 * j, id))?;
                        self.check_ref(id, self.word(t, 3 * j + 1, id), false)?;
                    }
                }
                kind::ENUM => {
                    for j in 0..t.vlen as usize {
                        self.check_string(self.word(t, 2 * j, id))?;
                    }
                }
                kind::ENUM64 => {
                    for j in 0..t.vlen as usize {
                        self.check_string(self.word(t, 3 * j, id))?;
                    }
                }
                kind::DATASEC => {
                    for j in 0..t.vlen as usize {
                        self.check_ref(id, self.word(t, 3 * j, id), false)?;
                    }
                }
                kind::FLOAT if !matches!(t.size_or_type, 2 | 4 | 8 | 12 | 16) => {
                    return Err(CtfError::BadType {
                        id,
                        why: format!("float of {} bytes", t.size_or_type),
                    });
                }
                kind::INT => {
                    let enc = self.word(t, 0, id);
                    if enc & 0xff > 128 || t.size_or_type > 16 {
                        return Err(CtfError::BadType {
                            id,
                            why: "integer wider than 128 bits".into(),
                        });
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Converts standalone BTF (such as `/sys/kernel/btf/vmlinux`) into a parent CTF container.
pub fn btf_to_ctf(b: &[u8]) -> Result<Container> {
    let btf = Btf::parse(b)?;
    Converter::new(&btf, None)?.run(Container::new())
}

/// Converts split BTF (a module's, on top of `base_btf`) into a child container of `parent`, which must
/// be the conversion of `base_btf`.
pub fn btf_to_ctf_child(
    module_btf: &[u8],
    base_btf: &[u8],
    parent: std::sync::Arc<Container>,
    parent_name: &str,
) -> Result<Container> {
    let base = Btf::parse(base_btf)?;
    let btf = Btf::parse_split(module_btf, Some(&base))?;
    let base_map = Converter::new(&base, None)?.map;
    let conv = Converter::new(&btf, Some(base_map))?;
    conv.run(Container::new_child(parent, parent_name))
}

struct Converter<'b, 'a> {
    btf: &'b Btf<'a>,
    /// CTF id by BTF id (for the base part of split BTF: the parent's ids); `void` for 0 and for
    /// the records that describe no type.
    map: Vec<TypeId>,
    child: bool,
}

fn is_type_kind(k: u32) -> bool {
    !matches!(
        k,
        kind::VAR | kind::DATASEC | kind::DECL_TAG | kind::TYPE_TAG
    )
}

/// How many names each namespace of the converted container will index at most, and how many
/// pointers and qualifiers it will have: what the container reserves room for up front.
fn index_sizes(btf: &Btf) -> ([usize; 4], usize) {
    let mut names = [0usize; 4];
    let mut derived = 0;
    for t in &btf.types {
        match t.kind {
            kind::PTR | kind::CONST | kind::VOLATILE | kind::RESTRICT => derived += 1,
            _ if t.name_off == 0 => {}
            kind::STRUCT => names[1] += 1,
            kind::UNION => names[2] += 1,
            kind::ENUM | kind::ENUM64 => names[3] += 1,
            kind::FWD if t.kind_flag => names[2] += 1,
            kind::FWD => names[1] += 1,
            kind::INT | kind::FLOAT | kind::TYPEDEF | kind::FUNC => names[0] += 1,
            _ => {}
        }
    }
    (names, derived)
}

impl<'b, 'a> Converter<'b, 'a> {
    fn new(btf: &'b Btf<'a>, base_map: Option<Vec<TypeId>>) -> Result<Self> {
        let child = base_map.is_some();
        let mut map = base_map.unwrap_or_default();
        // index i of the map is BTF id i: the base's ids (and void) come first
        map.resize(btf.first_id as usize, TypeId::VOID);
        map.reserve(btf.types.len());
        let mut next = 1u32;
        for t in &btf.types {
            if is_type_kind(t.kind) {
                map.push(TypeId::from_index(next, child));
                next += 1;
            } else {
                map.push(TypeId::VOID);
            }
        }
        // TYPE_TAG is transparent: map it to whatever it tags (chains resolved with a bound)
        for (i, t) in btf.types.iter().enumerate() {
            if t.kind == kind::TYPE_TAG {
                let id = btf.first_id + i as u32;
                let mut r = t.size_or_type;
                let mut hops = 0;
                while let Some(rt) = btf.get(r).filter(|rt| rt.kind == kind::TYPE_TAG) {
                    r = rt.size_or_type;
                    hops += 1;
                    if hops > 64 {
                        return Err(CtfError::Cycle(id));
                    }
                }
                let target = map.get(r as usize).copied().unwrap_or(TypeId::VOID);
                map[id as usize] = target;
            }
        }
        Ok(Converter { btf, map, child })
    }

    fn id(&self, btf_id: u32) -> TypeId {
        self.map
            .get(btf_id as usize)
            .copied()
            .unwrap_or(TypeId::VOID)
    }

    fn run(self, mut c: Container) -> Result<Container> {
        let btf = self.btf;
        let _ = self.child;
        c.reserve(btf.types.len(), index_sizes(btf));
        let mut bitfields: HashMap<(TypeId, u16), TypeId> = HashMap::new();
        // Bit-field integer types are created after all mapped types, so their ids come last.
        let n_mapped = btf.types.iter().filter(|t| is_type_kind(t.kind)).count() as u32;
        let mut pending: Vec<Type> = Vec::new();
        for (i, t) in btf.types.iter().enumerate() {
            if !is_type_kind(t.kind) {
                continue;
            }
            let id = btf.first_id + i as u32;
            let name = btf.string(t.name_off)?.to_string();
            let (kind, size) = match t.kind {
                kind::INT => {
                    let enc = btf.word(t, 0, id);
                    let mut flags = 0u8;
                    if enc & (1 << 24) != 0 {
                        flags |= CTF_INT_SIGNED;
                    }
                    if enc & (2 << 24) != 0 {
                        flags |= CTF_INT_CHAR;
                    }
                    if enc & (4 << 24) != 0 {
                        flags |= CTF_INT_BOOL;
                    }
                    let e = IntEncoding {
                        flags,
                        offset: (enc >> 16) as u8,
                        bits: (enc & 0xff) as u16,
                    };
                    (TypeKind::Integer(e), u64::from(t.size_or_type))
                }
                kind::FLOAT => {
                    let format = match t.size_or_type {
                        4 => CTF_FP_SINGLE,
                        8 => CTF_FP_DOUBLE,
                        _ => CTF_FP_LDOUBLE,
                    };
                    let e = FloatEncoding {
                        format,
                        offset: 0,
                        bits: t.size_or_type.saturating_mul(8).min(0xffff) as u16,
                    };
                    (TypeKind::Float(e), u64::from(t.size_or_type))
                }
                kind::PTR => (TypeKind::Pointer(self.id(t.size_or_type)), 0),
                kind::TYPEDEF => (TypeKind::Typedef(self.id(t.size_or_type)), 0),
                kind::VOLATILE => (TypeKind::Volatile(self.id(t.size_or_type)), 0),
                kind::CONST => (TypeKind::Const(self.id(t.size_or_type)), 0),
                kind::RESTRICT => (TypeKind::Restrict(self.id(t.size_or_type)), 0),
                kind::FWD => (
                    TypeKind::Forward(if t.kind_flag {
                        ForwardKind::Union
                    } else {
                        ForwardKind::Struct
                    }),
                    0,
                ),
                kind::ARRAY => (
                    TypeKind::Array(ArrayInfo {
                        contents: self.id(btf.word(t, 0, id)),
                        index: self.id(btf.word(t, 1, id)),
                        nelems: btf.word(t, 2, id),
                    }),
                    0,
                ),
                kind::STRUCT | kind::UNION => {
                    let mut members = Vec::with_capacity(t.vlen as usize);
                    for j in 0..t.vlen as usize {
                        let mname = btf.string(btf.word(t, 3 * j, id))?.to_string();
                        let mtype = btf.word(t, 3 * j + 1, id);
                        let moff = btf.word(t, 3 * j + 2, id);
                        let (bit_off, bits) = if t.kind_flag {
                            (moff & 0x00ff_ffff, (moff >> 24) as u16)
                        } else {
                            (moff, 0)
                        };
                        let mut type_id = self.id(mtype);
                        if bits != 0 {
                            type_id = self.bitfield_type(
                                &mut c,
                                &mut bitfields,
                                &mut pending,
                                n_mapped,
                                mtype,
                                bits,
                            )?;
                        }
                        members.push(Member {
                            name: mname,
                            type_id,
                            offset_bits: u64::from(bit_off),
                        });
                    }
                    let k = if t.kind == kind::STRUCT {
                        TypeKind::Struct(members)
                    } else {
                        TypeKind::Union(members)
                    };
                    (k, u64::from(t.size_or_type))
                }
                kind::ENUM | kind::ENUM64 => {
                    let stride = if t.kind == kind::ENUM { 2 } else { 3 };
                    let mut es = Vec::with_capacity(t.vlen as usize);
                    for j in 0..t.vlen as usize {
                        let ename = btf.string(btf.word(t, stride * j, id))?.to_string();
                        let value = btf.word(t, stride * j + 1, id) as i32;
                        es.push(Enumerator { name: ename, value });
                    }
                    (TypeKind::Enum(es), u64::from(t.size_or_type))
                }
                kind::FUNC => {
                    let proto = btf
                        .get(t.size_or_type)
                        .copied()
                        .ok_or(CtfError::NoSuchType(t.size_or_type))?;
                    (TypeKind::Function(self.proto(&proto, t.size_or_type)), 0)
                }
                kind::FUNC_PROTO => (TypeKind::Function(self.proto(t, id)), 0),
                _ => (TypeKind::Unknown, 0),
            };
            c.add(Type {
                name,
                kind,
                size,
                root: true,
            });
        }
        for t in pending {
            c.add(t);
        }
        Ok(c)
    }

    fn proto(&self, t: &BtfType, id: u32) -> FunctionInfo {
        let mut args = Vec::with_capacity(t.vlen as usize);
        let mut varargs = false;
        for j in 0..t.vlen as usize {
            let a = self.btf.word(t, 2 * j + 1, id);
            if a == 0 && j + 1 == t.vlen as usize {
                varargs = true;
            } else {
                args.push(self.id(a));
            }
        }
        FunctionInfo {
            ret: self.id(t.size_or_type),
            args,
            varargs,
        }
    }

    /// The (deduplicated, non-root) integer type for a bit-field of `bits` bits over BTF type `base`.
    fn bitfield_type(
        &self,
        c: &mut Container,
        cache: &mut HashMap<(TypeId, u16), TypeId>,
        pending: &mut Vec<Type>,
        n_mapped: u32,
        base: u32,
        bits: u16,
    ) -> Result<TypeId> {
        // resolve typedefs and qualifiers to the integer (or enum) underneath
        let mut r = base;
        for _ in 0..64 {
            match self.btf.get(r) {
                Some(bt)
                    if matches!(
                        bt.kind,
                        kind::TYPEDEF
                            | kind::VOLATILE
                            | kind::CONST
                            | kind::RESTRICT
                            | kind::TYPE_TAG
                    ) =>
                {
                    r = bt.size_or_type
                }
                _ => break,
            }
        }
        let Some(bt) = self.btf.get(r).copied() else {
            return Ok(self.id(base));
        };
        if bt.kind != kind::INT {
            return Ok(self.id(base)); // enums keep their type; the width is implied by the offset
        }
        let key = (self.id(r), bits);
        if let Some(&id) = cache.get(&key) {
            return Ok(id);
        }
        let enc = self.btf.word(&bt, 0, r);
        let mut flags = 0u8;
        if enc & (1 << 24) != 0 {
            flags |= CTF_INT_SIGNED;
        }
        if enc & (2 << 24) != 0 {
            flags |= CTF_INT_CHAR;
        }
        if enc & (4 << 24) != 0 {
            flags |= CTF_INT_BOOL;
        }
        let name = self.btf.string(bt.name_off)?.to_string();
        let id = TypeId::from_index(n_mapped + pending.len() as u32 + 1, c.is_child());
        pending.push(Type {
            name,
            kind: TypeKind::Integer(IntEncoding {
                flags,
                offset: 0,
                bits,
            }),
            size: u64::from(bt.size_or_type),
            root: false,
        });
        cache.insert(key, id);
        Ok(id)
    }
}
