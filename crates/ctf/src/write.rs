//! Encoding a [`Container`] as CTF version 2 or 3, optionally zlib-compressed. Version 2 is chosen
//! when the container fits its 16-bit limits, version 3 otherwise (or when asked for).

use std::collections::HashMap;
use std::io::Write;

use crate::consts::*;
use crate::container::Container;
use crate::error::{CtfError, Result};
use crate::model::*;

/// How to encode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// `Some(2)` or `Some(3)` to force a version; `None` picks 2 if the container fits, else 3.
    pub version: Option<u8>,
    /// Compress everything after the header with zlib (`CTF_F_COMPRESS`).
    pub compress: bool,
}

struct Strings {
    bytes: Vec<u8>,
    index: HashMap<String, u32>,
}

impl Strings {
    fn new() -> Self {
        Strings {
            bytes: vec![0],
            index: HashMap::new(),
        }
    }
    fn add(&mut self, s: &str) -> Result<u32> {
        if s.is_empty() {
            return Ok(0);
        }
        if let Some(&o) = self.index.get(s) {
            return Ok(o);
        }
        let o = self.bytes.len() as u32;
        if self.bytes.len() + s.len() + 1 > CTF_MAX_NAME as usize {
            return Err(CtfError::TooLarge {
                version: 0,
                why: "string table over 2 GiB".into(),
            });
        }
        self.bytes.extend_from_slice(s.as_bytes());
        self.bytes.push(0);
        self.index.insert(s.to_string(), o);
        Ok(o)
    }
}

/// Whether the container can be written as CTF version 2; `Err` says which limit it exceeds.
pub fn check_fits(c: &Container, layout: &Layout) -> Result<()> {
    let too = |why: String| {
        Err(CtfError::TooLarge {
            version: layout.version,
            why,
        })
    };
    if c.types.len() as u64 > u64::from(layout.max_index) {
        return too(format!(
            "{} types, at most {}",
            c.types.len(),
            layout.max_index
        ));
    }
    let id_ok = |t: TypeId| t.index() <= layout.max_index;
    for (id, t) in c.iter() {
        for r in t.kind.referenced_ids() {
            if !id_ok(r) {
                return too(format!("type {id} refers to {r}"));
            }
        }
        let vlen = match &t.kind {
            TypeKind::Struct(m) | TypeKind::Union(m) => m.len(),
            TypeKind::Enum(e) => e.len(),
            TypeKind::Function(f) => f.args.len() + usize::from(f.varargs),
            _ => 0,
        };
        if vlen as u64 > u64::from(layout.max_vlen) {
            return too(format!(
                "type {id} has {vlen} members/arguments, at most {}",
                layout.max_vlen
            ));
        }
        if let TypeKind::Struct(ms) | TypeKind::Union(ms) = &t.kind {
            if t.size < layout.lstruct_thresh {
                let max_off = if layout.id_bytes == 2 {
                    0xffff
                } else {
                    0xffff_ffff
                };
                if ms.iter().any(|m| m.offset_bits > max_off) {
                    return too(format!("type {id} has a member offset beyond its size"));
                }
            }
        }
        if let TypeKind::Function(f) = &t.kind {
            if !f.varargs && f.args.last() == Some(&TypeId::VOID) {
                return Err(CtfError::BadType {
                    id: id.0,
                    why: "a last argument of type void reads back as `...`".into(),
                });
            }
        }
        if let Some(r) = t.kind.reference() {
            // a reference equal to the large-size sentinel would be read back as a large record
            if id_to_file(r, layout) == layout.max_size + 1 {
                return too(format!(
                    "type {id} refers to id {r}, which collides with the size sentinel"
                ));
            }
        }
    }
    for f in c.functions.iter().flatten() {
        if !f.varargs && f.args.last() == Some(&TypeId::VOID) {
            return Err(CtfError::BadType {
                id: 0,
                why: "function entry whose last argument is void".into(),
            });
        }
        if (f.args.len() + usize::from(f.varargs)) as u64 > u64::from(layout.max_vlen) {
            return too("function entry with too many arguments".into());
        }
        if !id_ok(f.ret) || !f.args.iter().all(|&a| id_ok(a)) {
            return too("function entry refers to a type beyond the id range".into());
        }
    }
    if !c.objects.iter().all(|&o| id_ok(o)) {
        return too("data object refers to a type beyond the id range".into());
    }
    Ok(())
}

fn id_to_file(id: TypeId, layout: &Layout) -> u32 {
    if id.is_child() {
        id.index() | layout.child_bit
    } else {
        id.0
    }
}

fn put_id(out: &mut Vec<u8>, v: u32, layout: &Layout) {
    if layout.id_bytes == 2 {
        out.extend_from_slice(&(v as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn put32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Encodes the container as CTF bytes.
pub fn write_ctf(c: &Container, opts: WriteOptions) -> Result<Vec<u8>> {
    let layout = match opts.version {
        Some(v) => {
            let l = Layout::for_version(v).ok_or(CtfError::BadVersion {
                format: "CTF",
                version: u32::from(v),
            })?;
            check_fits(c, &l)?;
            l
        }
        None => {
            if check_fits(c, &Layout::V2).is_ok() {
                Layout::V2
            } else {
                check_fits(c, &Layout::V3)?;
                Layout::V3
            }
        }
    };
    let mut strs = Strings::new();
    let parlabel = strs.add(&c.parent_label)?;
    let parname = strs.add(&c.parent_name)?;

    let mut lbl = Vec::with_capacity(c.labels.len() * 8);
    for l in &c.labels {
        put32(&mut lbl, strs.add(&l.name)?);
        put32(&mut lbl, l.type_index);
    }
    let mut obj = Vec::new();
    for &o in &c.objects {
        put_id(&mut obj, id_to_file(o, &layout), &layout);
    }
    let mut func = Vec::new();
    for f in &c.functions {
        match f {
            None => put_id(&mut func, 0, &layout),
            Some(f) => {
                let n = f.args.len() as u32 + u32::from(f.varargs);
                put_id(&mut func, layout.info(CTF_K_FUNCTION, false, n), &layout);
                put_id(&mut func, id_to_file(f.ret, &layout), &layout);
                for &a in &f.args {
                    put_id(&mut func, id_to_file(a, &layout), &layout);
                }
                if f.varargs {
                    put_id(&mut func, 0, &layout);
                }
            }
        }
    }
    if func.len() % 4 != 0 {
        func.extend_from_slice(&[0, 0]);
    }
    let mut types = Vec::with_capacity(c.types.len() * 16);
    for t in &c.types {
        encode_type(&mut types, t, &layout, &mut strs)?;
    }

    let lbloff = 0u32;
    let objtoff = lbl.len() as u32;
    let funcoff = objtoff + obj.len() as u32;
    // a padding word keeps the type section 4-aligned when the function section ends on 2 bytes
    let typeoff = funcoff + func.len() as u32;
    let stroff = typeoff + types.len() as u32;
    let strlen = strs.bytes.len() as u32;

    let mut body = Vec::with_capacity(stroff as usize + strlen as usize);
    body.extend_from_slice(&lbl);
    body.extend_from_slice(&obj);
    body.extend_from_slice(&func);
    body.extend_from_slice(&types);
    body.extend_from_slice(&strs.bytes);

    let mut out = Vec::with_capacity(CTF_HEADER_SIZE + body.len());
    out.extend_from_slice(&CTF_MAGIC.to_le_bytes());
    out.push(layout.version);
    out.push(if opts.compress { CTF_F_COMPRESS } else { 0 });
    for v in [
        parlabel, parname, lbloff, objtoff, funcoff, typeoff, stroff, strlen,
    ] {
        put32(&mut out, v);
    }
    if opts.compress {
        let mut z = flate2::write::ZlibEncoder::new(out, flate2::Compression::default());
        z.write_all(&body)
            .map_err(|e| CtfError::Decompress(e.to_string()))?;
        out = z
            .finish()
            .map_err(|e| CtfError::Decompress(e.to_string()))?;
    } else {
        out.extend_from_slice(&body);
    }
    Ok(out)
}

fn encode_type(out: &mut Vec<u8>, t: &Type, layout: &Layout, strs: &mut Strings) -> Result<()> {
    let name = strs.add(&t.name)?;
    let (vlen, size_or_type, large_size): (u32, u32, Option<u64>) = match &t.kind {
        TypeKind::Pointer(r)
        | TypeKind::Typedef(r)
        | TypeKind::Volatile(r)
        | TypeKind::Const(r)
        | TypeKind::Restrict(r) => (0, id_to_file(*r, layout), None),
        TypeKind::Function(f) => (
            f.args.len() as u32 + u32::from(f.varargs),
            id_to_file(f.ret, layout),
            None,
        ),
        TypeKind::Forward(k) => (
            0,
            match k {
                ForwardKind::Struct => CTF_K_STRUCT,
                ForwardKind::Union => CTF_K_UNION,
                ForwardKind::Enum => CTF_K_ENUM,
            },
            None,
        ),
        TypeKind::Array(_) => (0, 0, None),
        k => {
            let vlen = match k {
                TypeKind::Struct(m) | TypeKind::Union(m) => m.len() as u32,
                TypeKind::Enum(e) => e.len() as u32,
                _ => 0,
            };
            if t.size > u64::from(layout.max_size) {
                (vlen, layout.max_size + 1, Some(t.size))
            } else {
                (vlen, t.size as u32, None)
            }
        }
    };
    put32(out, name);
    put_id(out, layout.info(t.kind.code(), t.root, vlen), layout);
    put_id(out, size_or_type, layout);
    if let Some(s) = large_size {
        put32(out, (s >> 32) as u32);
        put32(out, s as u32);
    }
    match &t.kind {
        TypeKind::Integer(e) => put32(out, e.to_word()),
        TypeKind::Float(e) => put32(out, e.to_word()),
        TypeKind::Array(a) => {
            put_id(out, id_to_file(a.contents, layout), layout);
            put_id(out, id_to_file(a.index, layout), layout);
            put32(out, a.nelems);
        }
        TypeKind::Function(f) => {
            for &a in &f.args {
                put_id(out, id_to_file(a, layout), layout);
            }
            if f.varargs {
                put_id(out, 0, layout);
            }
            if layout.id_bytes == 2 && vlen % 2 == 1 {
                out.extend_from_slice(&[0, 0]);
            }
        }
        TypeKind::Struct(ms) | TypeKind::Union(ms) => {
            let large = t.size >= layout.lstruct_thresh;
            for m in ms {
                put32(out, strs.add(&m.name)?);
                put_id(out, id_to_file(m.type_id, layout), layout);
                if large {
                    if layout.id_bytes == 2 {
                        out.extend_from_slice(&[0, 0]);
                    }
                    put32(out, (m.offset_bits >> 32) as u32);
                    put32(out, m.offset_bits as u32);
                } else {
                    put_id(out, m.offset_bits as u32, layout);
                }
            }
        }
        TypeKind::Enum(es) => {
            for e in es {
                put32(out, strs.add(&e.name)?);
                put32(out, e.value as u32);
            }
        }
        _ => {}
    }
    Ok(())
}
