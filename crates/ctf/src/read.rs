//! Decoding a CTF container (versions 2 and 3, optionally zlib-compressed) with full validation:
//! header, section bounds and alignment, every record's length, string references, kinds and type
//! references.

use std::io::Read;

use crate::bytes::*;
use crate::consts::*;
use crate::container::Container;
use crate::error::{CtfError, Result};
use crate::model::*;

/// Largest decompressed container we accept (guards against zlib bombs).
pub const MAX_DECOMPRESSED: u64 = 256 << 20;

/// Deflate cannot expand data by more than about 1032:1; a header claiming more is lying.
const MAX_DEFLATE_RATIO: u64 = 1032;

/// The decoded header of a CTF container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtfHeader {
    /// `cth_version`.
    pub version: u8,
    /// `cth_flags`.
    pub flags: u8,
    /// `cth_parlabel`.
    pub parlabel: u32,
    /// `cth_parname`.
    pub parname: u32,
    /// `cth_lbloff`.
    pub lbloff: u32,
    /// `cth_objtoff`.
    pub objtoff: u32,
    /// `cth_funcoff`.
    pub funcoff: u32,
    /// `cth_typeoff`.
    pub typeoff: u32,
    /// `cth_stroff`.
    pub stroff: u32,
    /// `cth_strlen`.
    pub strlen: u32,
}

/// Reads only the header.
pub fn read_header(b: &[u8]) -> Result<CtfHeader> {
    let magic = u16_at(b, 0, "CTF preamble")?;
    if magic == CTF_MAGIC.swap_bytes() {
        return Err(CtfError::Unsupported("CTF of the other byte order".into()));
    }
    if magic != CTF_MAGIC {
        return Err(CtfError::BadMagic(u32::from(magic)));
    }
    let version = slice(b, 2, 1, "CTF preamble")?[0];
    if Layout::for_version(version).is_none() {
        return Err(CtfError::BadVersion {
            format: "CTF",
            version: u32::from(version),
        });
    }
    let flags = slice(b, 3, 1, "CTF preamble")?[0];
    if flags & !CTF_F_COMPRESS != 0 {
        return Err(CtfError::BadHeader(format!("unknown flags 0x{flags:x}")));
    }
    let w = |i: usize| u32_at(b, 4 + 4 * i, "CTF header");
    Ok(CtfHeader {
        version,
        flags,
        parlabel: w(0)?,
        parname: w(1)?,
        lbloff: w(2)?,
        objtoff: w(3)?,
        funcoff: w(4)?,
        typeoff: w(5)?,
        stroff: w(6)?,
        strlen: w(7)?,
    })
}

/// Decodes a CTF container. A child container (one naming a parent) is returned without its parent;
/// attach it with [`Container::set_parent`].
pub fn read_ctf(b: &[u8]) -> Result<Container> {
    let h = read_header(b)?;
    let layout = Layout::for_version(h.version).ok_or(CtfError::BadVersion {
        format: "CTF",
        version: 0,
    })?;
    let body_len = u64::from(h.stroff) + u64::from(h.strlen);
    let raw = &b[CTF_HEADER_SIZE.min(b.len())..];
    let decompressed;
    let body: &[u8] = if h.flags & CTF_F_COMPRESS != 0 {
        if body_len > MAX_DECOMPRESSED || body_len > (raw.len() as u64 + 64) * MAX_DEFLATE_RATIO {
            return Err(CtfError::BadHeader(format!(
                "decompressed size {body_len} too large"
            )));
        }
        let mut out = Vec::with_capacity((body_len as usize).min(raw.len().saturating_mul(16)));
        flate2::read::ZlibDecoder::new(raw)
            .take(body_len + 1)
            .read_to_end(&mut out)
            .map_err(|e| CtfError::Decompress(e.to_string()))?;
        if out.len() as u64 != body_len {
            return Err(CtfError::Decompress(format!(
                "expected {body_len} bytes, got {}",
                out.len()
            )));
        }
        decompressed = out;
        &decompressed
    } else {
        raw
    };
    check_sections(&h, &layout, body.len())?;
    let strtab = &body[h.stroff as usize..(h.stroff as usize + h.strlen as usize)];
    if !strtab.is_empty() && strtab[0] != 0 {
        return Err(CtfError::BadHeader(
            "string table does not start with an empty string".into(),
        ));
    }
    let name = |r: u32| -> Result<String> {
        if r >> 31 == CTF_STRTAB_1 {
            return Err(CtfError::Unsupported(
                "names in the external (ELF) string table".into(),
            ));
        }
        if r == 0 && strtab.is_empty() {
            return Ok(String::new());
        }
        Ok(cstr_at(strtab, r & CTF_MAX_NAME)?.to_string())
    };

    let mut c = Container::new();
    c.parent_name = name(h.parname)?;
    c.parent_label = name(h.parlabel)?;
    c.child = !c.parent_name.is_empty();

    // labels
    let lbl = &body[h.lbloff as usize..h.objtoff as usize];
    if !lbl.len().is_multiple_of(8) {
        return Err(CtfError::BadHeader(
            "label section is not a whole number of entries".into(),
        ));
    }
    for off in (0..lbl.len()).step_by(8) {
        c.labels.push(Label {
            name: name(u32_at(lbl, off, "label")?)?,
            type_index: u32_at(lbl, off + 4, "label")?,
        });
    }

    // types
    let types = &body[h.typeoff as usize..h.stroff as usize];
    read_types(&mut c, types, &layout, &name)?;

    // data objects
    let idw = layout.id_bytes;
    let obj = &body[h.objtoff as usize..h.funcoff as usize];
    if !obj.len().is_multiple_of(idw) {
        return Err(CtfError::BadHeader(
            "data object section is not a whole number of entries".into(),
        ));
    }
    for off in (0..obj.len()).step_by(idw) {
        let raw = id_at(obj, off, idw, "data object")?;
        c.objects.push(file_to_id(raw, &layout));
    }

    // functions
    let func = &body[h.funcoff as usize..h.typeoff as usize];
    let mut off = 0;
    while off < func.len() {
        let info = id_at(func, off, idw, "function entry")?;
        off += idw;
        let (kind, _, vlen) = layout.split_info(info);
        if kind == CTF_K_UNKNOWN && vlen == 0 {
            c.functions.push(None);
            continue;
        }
        if kind != CTF_K_FUNCTION {
            return Err(CtfError::BadHeader(format!(
                "function entry with kind {kind}"
            )));
        }
        let ret = file_to_id(id_at(func, off, idw, "function entry")?, &layout);
        off += idw;
        let need = (vlen as usize)
            .checked_mul(idw)
            .ok_or(CtfError::BadHeader("function vlen".into()))?;
        slice(func, off, need, "function arguments")?;
        let mut args = Vec::with_capacity(vlen as usize);
        for i in 0..vlen as usize {
            args.push(file_to_id(
                id_at(func, off + i * idw, idw, "function argument")?,
                &layout,
            ));
        }
        off += need;
        let varargs = args.last() == Some(&TypeId::VOID);
        if varargs {
            args.pop();
        }
        c.functions.push(Some(FunctionInfo { ret, args, varargs }));
    }
    c.validate()?;
    Ok(c)
}

fn check_sections(h: &CtfHeader, layout: &Layout, body_len: usize) -> Result<()> {
    let order = [h.lbloff, h.objtoff, h.funcoff, h.typeoff, h.stroff];
    if order.windows(2).any(|w| w[0] > w[1]) {
        return Err(CtfError::BadHeader("sections out of order".into()));
    }
    let end = u64::from(h.stroff) + u64::from(h.strlen);
    if end > body_len as u64 {
        return Err(CtfError::Truncated {
            what: "CTF sections",
            offset: CTF_HEADER_SIZE as u64,
            need: end,
            have: body_len as u64,
        });
    }
    let ida = layout.id_bytes as u32;
    if !h.lbloff.is_multiple_of(4)
        || !h.objtoff.is_multiple_of(ida)
        || !h.funcoff.is_multiple_of(ida)
        || !h.typeoff.is_multiple_of(4)
    {
        return Err(CtfError::BadHeader("misaligned section offset".into()));
    }
    Ok(())
}

/// Translates an on-disk type id into the in-memory form (child bit moved to bit 31).
pub(crate) fn file_to_id(raw: u32, layout: &Layout) -> TypeId {
    if raw & layout.child_bit != 0 {
        TypeId::from_index(raw & !layout.child_bit, true)
    } else {
        TypeId(raw)
    }
}

fn read_types(
    c: &mut Container,
    types: &[u8],
    layout: &Layout,
    name: &dyn Fn(u32) -> Result<String>,
) -> Result<()> {
    let idw = layout.id_bytes;
    let mut off = 0usize;
    c.types.reserve(types.len() / layout.stype_size);
    while off < types.len() {
        let id = c.next_id();
        if id.index() > layout.max_index {
            return Err(CtfError::BadType {
                id: id.0,
                why: "more types than the version allows".into(),
            });
        }
        let bad = |why: &str| CtfError::BadType {
            id: id.0,
            why: why.to_string(),
        };
        let name_ref = u32_at(types, off, "type record")?;
        let info = id_at(types, off + 4, idw, "type record")?;
        let size_or_type = id_at(types, off + 4 + idw, idw, "type record")?;
        let (kind, root, vlen) = layout.split_info(info);
        let mut size = u64::from(size_or_type);
        off += layout.stype_size;
        if size_or_type == layout.max_size + 1 {
            let hi = u32_at(
                types,
                off - layout.stype_size + 4 + 2 * idw,
                "large type record",
            )?;
            let lo = u32_at(
                types,
                off - layout.stype_size + 8 + 2 * idw,
                "large type record",
            )?;
            size = (u64::from(hi) << 32) | u64::from(lo);
            off += layout.ltype_size - layout.stype_size;
        }
        let tref = file_to_id(size_or_type, layout);
        let vlen_us = vlen as usize;
        let kind = match kind {
            CTF_K_UNKNOWN => TypeKind::Unknown,
            CTF_K_INTEGER => {
                let e = IntEncoding::from_word(u32_at(types, off, "integer encoding")?);
                off += 4;
                TypeKind::Integer(e)
            }
            CTF_K_FLOAT => {
                let e = FloatEncoding::from_word(u32_at(types, off, "float encoding")?);
                off += 4;
                if e.format == 0 || e.format > CTF_FP_LDIMAGRY {
                    return Err(bad("unknown float encoding"));
                }
                TypeKind::Float(e)
            }
            CTF_K_POINTER => TypeKind::Pointer(tref),
            CTF_K_TYPEDEF => TypeKind::Typedef(tref),
            CTF_K_VOLATILE => TypeKind::Volatile(tref),
            CTF_K_CONST => TypeKind::Const(tref),
            CTF_K_RESTRICT => TypeKind::Restrict(tref),
            CTF_K_FORWARD => TypeKind::Forward(match size_or_type {
                CTF_K_UNION => ForwardKind::Union,
                CTF_K_ENUM => ForwardKind::Enum,
                _ => ForwardKind::Struct,
            }),
            CTF_K_ARRAY => {
                let contents = file_to_id(id_at(types, off, idw, "array record")?, layout);
                let index = file_to_id(id_at(types, off + idw, idw, "array record")?, layout);
                let nelems = u32_at(types, off + 2 * idw, "array record")?;
                off += layout.array_size;
                TypeKind::Array(ArrayInfo {
                    contents,
                    index,
                    nelems,
                })
            }
            CTF_K_FUNCTION => {
                let need = vlen_us * idw;
                slice(types, off, need, "function arguments")?;
                let mut args = Vec::with_capacity(vlen_us);
                for i in 0..vlen_us {
                    args.push(file_to_id(
                        id_at(types, off + i * idw, idw, "function argument")?,
                        layout,
                    ));
                }
                off += need;
                if idw == 2 && vlen % 2 == 1 {
                    off += 2;
                }
                let varargs = args.last() == Some(&TypeId::VOID);
                if varargs {
                    args.pop();
                }
                TypeKind::Function(FunctionInfo {
                    ret: tref,
                    args,
                    varargs,
                })
            }
            CTF_K_STRUCT | CTF_K_UNION => {
                let large = size >= layout.lstruct_thresh;
                let rec = if large {
                    layout.lmember_size
                } else {
                    layout.member_size
                };
                let need = vlen_us
                    .checked_mul(rec)
                    .ok_or_else(|| bad("member count"))?;
                let ms = slice(types, off, need, "members")?;
                let mut members = Vec::with_capacity(vlen_us);
                for i in 0..vlen_us {
                    let m = i * rec;
                    let mname = name(u32_at(ms, m, "member")?)?;
                    let mtype = file_to_id(id_at(ms, m + 4, idw, "member")?, layout);
                    let offset_bits = if large {
                        // both versions keep the 64-bit offset in the last two words
                        (u64::from(u32_at(ms, m + 8, "member")?) << 32)
                            | u64::from(u32_at(ms, m + 12, "member")?)
                    } else {
                        u64::from(id_at(ms, m + 4 + idw, idw, "member")?)
                    };
                    members.push(Member {
                        name: mname,
                        type_id: mtype,
                        offset_bits,
                    });
                }
                off += need;
                if kind == CTF_K_STRUCT {
                    TypeKind::Struct(members)
                } else {
                    TypeKind::Union(members)
                }
            }
            CTF_K_ENUM => {
                let need = vlen_us * 8;
                let es = slice(types, off, need, "enumerators")?;
                let mut enums = Vec::with_capacity(vlen_us);
                for i in 0..vlen_us {
                    enums.push(Enumerator {
                        name: name(u32_at(es, i * 8, "enumerator")?)?,
                        value: u32_at(es, i * 8 + 4, "enumerator")? as i32,
                    });
                }
                off += need;
                TypeKind::Enum(enums)
            }
            k => return Err(bad(&format!("unknown kind {k}"))),
        };
        if off > types.len() {
            return Err(CtfError::Truncated {
                what: "type record",
                offset: off as u64,
                need: 0,
                have: types.len() as u64,
            });
        }
        let size = if kind.has_size() { size } else { 0 };
        c.add(Type {
            name: name(name_ref)?,
            kind,
            size,
            root,
        });
    }
    Ok(())
}
