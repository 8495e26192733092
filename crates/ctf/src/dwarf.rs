//! DWARF to CTF: converts the types described by the DWARF of an ELF file into one container,
//! deduplicating identical types across compilation units.
//!
//! Base, pointer, reference, qualifier, typedef, struct/union/class (with bit-fields, in both the
//! DWARF 4 `DW_AT_data_bit_offset` and the DWARF 2/3 `DW_AT_bit_offset` forms), enum, array
//! (multi-dimensional arrays become nested arrays), subroutine types and named functions
//! (`DW_TAG_subprogram`, as named CTF functions, like BTF's `FUNC`) are converted. Named aggregates are
//! deduplicated by name, size and member layout; everything else by its full content.

use std::collections::HashMap;

use gimli::{AttributeValue, DebugInfoOffset, EndianSlice, RunTimeEndian, UnitOffset};
use object::{Object, ObjectSection};

use crate::consts::*;
use crate::container::Container;
use crate::error::{CtfError, Result};
use crate::model::*;

type R<'a> = EndianSlice<'a, RunTimeEndian>;
type Die<'u, 'a> = gimli::DebuggingInformationEntry<'u, 'u, R<'a>>;

/// How deep type references may nest before the input is called hostile.
const MAX_NESTING: usize = 2000;

fn derr(e: gimli::Error) -> CtfError {
    CtfError::Dwarf(e.to_string())
}

/// Converts the DWARF of an ELF file (relocatable, executable or shared object).
pub fn dwarf_to_ctf_from_elf(bytes: &[u8]) -> Result<Container> {
    let file = object::File::parse(bytes).map_err(|e| CtfError::Object(e.to_string()))?;
    let endian = if file.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    let mut sections: HashMap<&'static str, std::borrow::Cow<'_, [u8]>> = HashMap::new();
    for id in [
        gimli::SectionId::DebugAbbrev,
        gimli::SectionId::DebugInfo,
        gimli::SectionId::DebugStr,
        gimli::SectionId::DebugLineStr,
        gimli::SectionId::DebugStrOffsets,
        gimli::SectionId::DebugAddr,
        gimli::SectionId::DebugRngLists,
        gimli::SectionId::DebugRanges,
        gimli::SectionId::DebugLine,
        gimli::SectionId::DebugTypes,
    ] {
        if let Some(s) = file.section_by_name(id.name()) {
            let mut data = s
                .uncompressed_data()
                .map_err(|e| CtfError::Object(e.to_string()))?;
            if file.kind() == object::ObjectKind::Relocatable && s.relocations().next().is_some() {
                data = std::borrow::Cow::Owned(apply_relocations(&file, &s, data.into_owned())?);
            }
            sections.insert(id.name(), data);
        }
    }
    if !sections.contains_key(".debug_info") {
        return Err(CtfError::Object("no .debug_info section".into()));
    }
    let dwarf = gimli::Dwarf::load(|id| -> std::result::Result<R<'_>, gimli::Error> {
        Ok(EndianSlice::new(
            sections.get(id.name()).map_or(&[][..], |c| c.as_ref()),
            endian,
        ))
    })
    .map_err(derr)?;
    let mut c = Container::new();
    c.pointer_size = if file.is_64() { 8 } else { 4 };
    dwarf_to_ctf(&dwarf, &mut c)?;
    Ok(c)
}

/// Applies the absolute relocations of a debugging section of a relocatable object (string and
/// cross-section offsets are relocations there, not final values).
fn apply_relocations(
    file: &object::File<'_>,
    s: &object::Section<'_, '_>,
    mut data: Vec<u8>,
) -> Result<Vec<u8>> {
    use object::ObjectSymbol;
    for (off, r) in s.relocations() {
        if r.kind() != object::RelocationKind::Absolute {
            continue;
        }
        let base = match r.target() {
            object::RelocationTarget::Symbol(i) => file
                .symbol_by_index(i)
                .map_err(|e| CtfError::Object(e.to_string()))?
                .address(),
            object::RelocationTarget::Section(_) => 0,
            _ => continue,
        };
        let value = base.wrapping_add(r.addend() as u64);
        let at = usize::try_from(off).map_err(|_| CtfError::Object("relocation offset".into()))?;
        let width = usize::from(r.size() / 8);
        let dst = at.checked_add(width).and_then(|end| data.get_mut(at..end));
        let Some(dst) = dst else {
            return Err(CtfError::Object(format!(
                "relocation at 0x{off:x} outside its section"
            )));
        };
        let le = file.is_little_endian();
        match width {
            4 => dst.copy_from_slice(&if le {
                (value as u32).to_le_bytes()
            } else {
                (value as u32).to_be_bytes()
            }),
            8 => dst.copy_from_slice(&if le {
                value.to_le_bytes()
            } else {
                value.to_be_bytes()
            }),
            _ => {}
        }
    }
    Ok(data)
}

/// Identity of a named aggregate: kind, name, size, and (member name, bit offset) list.
type ShallowKey = (u32, String, u64, Vec<(String, u64)>);

enum State {
    InProgress(Option<TypeId>),
    Done(TypeId),
}

struct Conv<'d, 'u, 'a> {
    dwarf: &'d gimli::Dwarf<R<'a>>,
    units: &'u [gimli::Unit<R<'a>>],
    state: HashMap<DebugInfoOffset, State>,
    dedup: HashMap<Type, TypeId>,
    shallow: HashMap<ShallowKey, TypeId>,
    depth: usize,
}

/// Converts every type of every compilation unit of `dwarf` into `c`.
pub fn dwarf_to_ctf(dwarf: &gimli::Dwarf<R<'_>>, c: &mut Container) -> Result<()> {
    let mut units = Vec::new();
    let mut iter = dwarf.units();
    while let Some(h) = iter.next().map_err(derr)? {
        units.push(dwarf.unit(h).map_err(derr)?);
    }
    let mut conv = Conv {
        dwarf,
        units: &units,
        state: HashMap::new(),
        dedup: HashMap::new(),
        shallow: HashMap::new(),
        depth: 0,
    };
    for ui in 0..conv.units.len() {
        let mut offsets = Vec::new();
        {
            let unit = &conv.units[ui];
            let mut tree = unit.entries_tree(None).map_err(derr)?;
            let root = tree.root().map_err(derr)?;
            let mut children = root.children();
            while let Some(child) = children.next().map_err(derr)? {
                offsets.push((child.entry().offset(), child.entry().tag()));
            }
        }
        for (off, tag) in offsets {
            if is_type_tag(tag) || tag == gimli::DW_TAG_subprogram {
                conv.convert(c, ui, off)?;
            }
        }
    }
    Ok(())
}

fn is_type_tag(t: gimli::DwTag) -> bool {
    matches!(
        t,
        gimli::DW_TAG_base_type
            | gimli::DW_TAG_pointer_type
            | gimli::DW_TAG_reference_type
            | gimli::DW_TAG_rvalue_reference_type
            | gimli::DW_TAG_const_type
            | gimli::DW_TAG_volatile_type
            | gimli::DW_TAG_restrict_type
            | gimli::DW_TAG_atomic_type
            | gimli::DW_TAG_typedef
            | gimli::DW_TAG_structure_type
            | gimli::DW_TAG_class_type
            | gimli::DW_TAG_union_type
            | gimli::DW_TAG_enumeration_type
            | gimli::DW_TAG_array_type
            | gimli::DW_TAG_subroutine_type
            | gimli::DW_TAG_unspecified_type
    )
}

impl<'d, 'u, 'a> Conv<'d, 'u, 'a> {
    fn global(&self, ui: usize, off: UnitOffset) -> Option<DebugInfoOffset> {
        off.to_debug_info_offset(&self.units[ui].header)
    }

    fn locate(&self, g: DebugInfoOffset) -> Option<(usize, UnitOffset)> {
        for (i, u) in self.units.iter().enumerate() {
            if let Some(o) = g.to_unit_offset(&u.header) {
                return Some((i, o));
            }
        }
        None
    }

    fn name(&self, ui: usize, e: &Die<'u, 'a>) -> Result<String> {
        match e.attr_value(gimli::DW_AT_name).map_err(derr)? {
            Some(v) => {
                let s = self.dwarf.attr_string(&self.units[ui], v).map_err(derr)?;
                Ok(s.to_string_lossy().into_owned())
            }
            None => Ok(String::new()),
        }
    }

    fn udata(e: &Die<'u, 'a>, at: gimli::DwAt) -> Result<Option<u64>> {
        Ok(e.attr_value(at).map_err(derr)?.and_then(|v| match v {
            AttributeValue::Udata(x) => Some(x),
            AttributeValue::Data1(x) => Some(x.into()),
            AttributeValue::Data2(x) => Some(x.into()),
            AttributeValue::Data4(x) => Some(x.into()),
            AttributeValue::Data8(x) => Some(x),
            AttributeValue::Sdata(x) => u64::try_from(x).ok(),
            _ => None,
        }))
    }

    fn sdata(e: &Die<'u, 'a>, at: gimli::DwAt) -> Result<Option<i64>> {
        Ok(e.attr_value(at).map_err(derr)?.and_then(|v| match v {
            AttributeValue::Sdata(x) => Some(x),
            AttributeValue::Udata(x) => Some(x as i64),
            AttributeValue::Data1(x) => Some(i64::from(x as i8)),
            AttributeValue::Data2(x) => Some(i64::from(x as i16)),
            AttributeValue::Data4(x) => Some(i64::from(x as i32)),
            AttributeValue::Data8(x) => Some(x as i64),
            _ => None,
        }))
    }

    /// The CTF id of the type a `DW_AT_type` attribute names (void if absent).
    fn type_attr(&mut self, c: &mut Container, ui: usize, e: &Die<'u, 'a>) -> Result<TypeId> {
        let target = match e.attr_value(gimli::DW_AT_type).map_err(derr)? {
            None => return Ok(TypeId::VOID),
            Some(AttributeValue::UnitRef(o)) => (ui, o),
            Some(AttributeValue::DebugInfoRef(g)) => self.locate(g).ok_or_else(|| {
                CtfError::Dwarf(format!("reference to 0x{:x} outside every unit", g.0))
            })?,
            Some(v) => return Err(CtfError::Dwarf(format!("unsupported type reference {v:?}"))),
        };
        self.convert(c, target.0, target.1)
    }

    fn convert(&mut self, c: &mut Container, ui: usize, off: UnitOffset) -> Result<TypeId> {
        let g = self
            .global(ui, off)
            .ok_or_else(|| CtfError::Dwarf("bad unit offset".into()))?;
        match self.state.get_mut(&g) {
            Some(State::Done(id)) => return Ok(*id),
            Some(State::InProgress(Some(id))) => return Ok(*id),
            Some(State::InProgress(slot @ None)) => {
                // a reference back into a type being converted: give it a placeholder id now
                let id = c.add(Type::new("", TypeKind::Unknown, 0));
                *slot = Some(id);
                return Ok(id);
            }
            None => {}
        }
        if self.depth > MAX_NESTING {
            return Err(CtfError::Dwarf("types nest too deeply".into()));
        }
        self.depth += 1;
        self.state.insert(g, State::InProgress(None));
        let r = self.convert_entry(c, ui, off);
        self.depth -= 1;
        let t = match r? {
            Conversion::Existing(id) => {
                if let Some(State::InProgress(Some(ph))) = self.state.get(&g) {
                    // someone took a placeholder: make it a typedef-free alias by copying the type
                    let t = c.get(id)?.clone();
                    c.replace(*ph, t)?;
                }
                self.state.insert(g, State::Done(id));
                return Ok(id);
            }
            Conversion::New(t) => t,
        };
        let id = match self.state.get(&g) {
            Some(State::InProgress(Some(ph))) => {
                let ph = *ph;
                c.replace(ph, t)?;
                ph
            }
            _ => match self.dedup.get(&t) {
                Some(&id) => id,
                None => {
                    let id = c.add(t.clone());
                    self.dedup.insert(t, id);
                    id
                }
            },
        };
        self.state.insert(g, State::Done(id));
        Ok(id)
    }

    fn convert_entry(
        &mut self,
        c: &mut Container,
        ui: usize,
        off: UnitOffset,
    ) -> Result<Conversion> {
        let units = self.units;
        let e = units[ui].entry(off).map_err(derr)?;
        let name = self.name(ui, &e)?;
        let size = Self::udata(&e, gimli::DW_AT_byte_size)?;
        let tag = e.tag();
        let kind = match tag {
            gimli::DW_TAG_base_type => {
                let size = size.unwrap_or(0);
                let enc = match e.attr_value(gimli::DW_AT_encoding).map_err(derr)? {
                    Some(AttributeValue::Encoding(x)) => x,
                    _ => gimli::DW_ATE_signed,
                };
                let bits = Self::udata(&e, gimli::DW_AT_bit_size)?
                    .unwrap_or(size.saturating_mul(8))
                    .min(0xffff) as u16;
                let k = match enc {
                    gimli::DW_ATE_float
                    | gimli::DW_ATE_complex_float
                    | gimli::DW_ATE_imaginary_float => {
                        let cplx = enc == gimli::DW_ATE_complex_float;
                        let format = match (cplx, size) {
                            (false, 4) => CTF_FP_SINGLE,
                            (false, 8) => CTF_FP_DOUBLE,
                            (false, _) => CTF_FP_LDOUBLE,
                            (true, 8) => CTF_FP_CPLX,
                            (true, 16) => CTF_FP_DCPLX,
                            (true, _) => CTF_FP_LDCPLX,
                        };
                        TypeKind::Float(FloatEncoding {
                            format,
                            offset: 0,
                            bits,
                        })
                    }
                    _ => {
                        let mut flags = 0;
                        if matches!(
                            enc,
                            gimli::DW_ATE_signed
                                | gimli::DW_ATE_signed_char
                                | gimli::DW_ATE_signed_fixed
                        ) {
                            flags |= CTF_INT_SIGNED;
                        }
                        if matches!(
                            enc,
                            gimli::DW_ATE_signed_char
                                | gimli::DW_ATE_unsigned_char
                                | gimli::DW_ATE_UTF
                        ) {
                            flags |= CTF_INT_CHAR;
                        }
                        if enc == gimli::DW_ATE_boolean {
                            flags |= CTF_INT_BOOL;
                        }
                        TypeKind::Integer(IntEncoding {
                            flags,
                            offset: 0,
                            bits,
                        })
                    }
                };
                return Ok(Conversion::New(Type::new(name, k, size)));
            }
            gimli::DW_TAG_unspecified_type => {
                // C++ nullptr_t and the like: an opaque integer of pointer size
                let s = u64::from(c.pointer_size);
                let k = TypeKind::Integer(IntEncoding {
                    flags: 0,
                    offset: 0,
                    bits: (s * 8) as u16,
                });
                return Ok(Conversion::New(Type::new(name, k, s)));
            }
            gimli::DW_TAG_pointer_type
            | gimli::DW_TAG_reference_type
            | gimli::DW_TAG_rvalue_reference_type => TypeKind::Pointer(self.type_attr(c, ui, &e)?),
            gimli::DW_TAG_const_type => TypeKind::Const(self.type_attr(c, ui, &e)?),
            gimli::DW_TAG_volatile_type => TypeKind::Volatile(self.type_attr(c, ui, &e)?),
            gimli::DW_TAG_restrict_type => TypeKind::Restrict(self.type_attr(c, ui, &e)?),
            gimli::DW_TAG_atomic_type => {
                return Ok(Conversion::Existing(self.type_attr(c, ui, &e)?))
            }
            gimli::DW_TAG_typedef => TypeKind::Typedef(self.type_attr(c, ui, &e)?),
            gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type | gimli::DW_TAG_union_type => {
                return self.aggregate(c, ui, off, name, size, tag == gimli::DW_TAG_union_type);
            }
            gimli::DW_TAG_enumeration_type => {
                if e.attr_value(gimli::DW_AT_declaration)
                    .map_err(derr)?
                    .is_some()
                {
                    return Ok(Conversion::New(Type::new(
                        name,
                        TypeKind::Forward(ForwardKind::Enum),
                        0,
                    )));
                }
                let mut es = Vec::new();
                for (_, ce) in self.children(ui, off)? {
                    if ce.tag() == gimli::DW_TAG_enumerator {
                        let v = Self::sdata(&ce, gimli::DW_AT_const_value)?.unwrap_or(0);
                        es.push(Enumerator {
                            name: self.name(ui, &ce)?,
                            value: v as i32,
                        });
                    }
                }
                return Ok(Conversion::New(Type::new(
                    name,
                    TypeKind::Enum(es),
                    size.unwrap_or(4),
                )));
            }
            gimli::DW_TAG_array_type => return self.array(c, ui, off, &e),
            gimli::DW_TAG_subroutine_type | gimli::DW_TAG_subprogram => {
                let ret = self.type_attr(c, ui, &e)?;
                let mut args = Vec::new();
                let mut varargs = false;
                for (_, ce) in self.children(ui, off)? {
                    match ce.tag() {
                        gimli::DW_TAG_formal_parameter => args.push(self.type_attr(c, ui, &ce)?),
                        gimli::DW_TAG_unspecified_parameters => varargs = true,
                        _ => {}
                    }
                }
                let name = if tag == gimli::DW_TAG_subprogram {
                    name
                } else {
                    String::new()
                };
                let k = TypeKind::Function(FunctionInfo { ret, args, varargs });
                return Ok(Conversion::New(Type::new(name, k, 0)));
            }
            t => {
                return Err(CtfError::Dwarf(format!(
                    "DIE at 0x{:x} with tag {t} is not a type",
                    off.0
                )))
            }
        };
        Ok(Conversion::New(Type::new(name, kind, 0)))
    }

    fn children(&self, ui: usize, off: UnitOffset) -> Result<Vec<(UnitOffset, Die<'u, 'a>)>> {
        let units = self.units;
        let unit = &units[ui];
        let mut tree = unit.entries_tree(Some(off)).map_err(derr)?;
        let root = tree.root().map_err(derr)?;
        let mut out = Vec::new();
        let mut it = root.children();
        while let Some(ch) = it.next().map_err(derr)? {
            out.push((ch.entry().offset(), ch.entry().clone()));
        }
        Ok(out)
    }

    /// The byte size of the type a DIE's `DW_AT_type` names, through typedefs and qualifiers.
    fn type_byte_size(&self, ui: usize, e: &Die<'u, 'a>) -> Result<Option<u64>> {
        let units = self.units;
        let mut cur = e.clone();
        for _ in 0..16 {
            let off = match cur.attr_value(gimli::DW_AT_type).map_err(derr)? {
                Some(AttributeValue::UnitRef(o)) => o,
                _ => return Ok(None),
            };
            cur = units[ui].entry(off).map_err(derr)?;
            if let Some(b) = Self::udata(&cur, gimli::DW_AT_byte_size)? {
                return Ok(Some(b));
            }
        }
        Ok(None)
    }

    fn member_offset(&self, e: &Die<'u, 'a>, unit_enc: gimli::Encoding) -> Result<Option<u64>> {
        Ok(
            match e
                .attr_value(gimli::DW_AT_data_member_location)
                .map_err(derr)?
            {
                None => None,
                Some(v @ (AttributeValue::Exprloc(_) | AttributeValue::Block(_))) => {
                    let expr = match v {
                        AttributeValue::Exprloc(x) => x,
                        AttributeValue::Block(b) => gimli::Expression(b),
                        _ => return Ok(None),
                    };
                    let mut ops = expr.operations(unit_enc);
                    match ops.next().map_err(derr)? {
                        Some(gimli::Operation::PlusConstant { value }) => Some(value),
                        Some(gimli::Operation::UnsignedConstant { value }) => Some(value),
                        _ => return Err(CtfError::Unsupported("computed member locations".into())),
                    }
                }
                Some(v) => v.udata_value(),
            },
        )
    }

    fn aggregate(
        &mut self,
        c: &mut Container,
        ui: usize,
        off: UnitOffset,
        name: String,
        size: Option<u64>,
        union: bool,
    ) -> Result<Conversion> {
        let units = self.units;
        let e = units[ui].entry(off).map_err(derr)?;
        if e.attr_value(gimli::DW_AT_declaration)
            .map_err(derr)?
            .is_some()
            || size.is_none()
        {
            let k = if union {
                ForwardKind::Union
            } else {
                ForwardKind::Struct
            };
            return Ok(Conversion::New(Type::new(name, TypeKind::Forward(k), 0)));
        }
        let size = size.unwrap_or(0);
        let enc = self.units[ui].encoding();
        let kids: Vec<_> = self
            .children(ui, off)?
            .into_iter()
            .filter(|(_, k)| k.tag() == gimli::DW_TAG_member)
            .collect();
        // layout of each member: (name, bit offset, bit size, byte size of its storage)
        let mut layout = Vec::with_capacity(kids.len());
        for (_, m) in &kids {
            let byte_off = self.member_offset(m, enc)?.unwrap_or(0);
            let bit_size = Self::udata(m, gimli::DW_AT_bit_size)?;
            let bit_off = if let Some(dbo) = Self::udata(m, gimli::DW_AT_data_bit_offset)? {
                dbo
            } else if let (Some(bo), Some(bs)) =
                (Self::udata(m, gimli::DW_AT_bit_offset)?, bit_size)
            {
                // DWARF 2/3: bit_offset counts from the most significant bit of the storage unit
                let storage = match Self::udata(m, gimli::DW_AT_byte_size)? {
                    Some(b) => b,
                    None => self.type_byte_size(ui, m)?.unwrap_or(4),
                };
                byte_off
                    .saturating_add(storage)
                    .saturating_mul(8)
                    .saturating_sub(bo.saturating_add(bs))
            } else {
                byte_off.saturating_mul(8)
            };
            layout.push((self.name(ui, m)?, bit_off, bit_size));
        }
        let key_kind = if union { CTF_K_UNION } else { CTF_K_STRUCT };
        let key = (
            key_kind,
            name.clone(),
            size,
            layout
                .iter()
                .map(|(n, o, _)| (n.clone(), *o))
                .collect::<Vec<_>>(),
        );
        if !name.is_empty() {
            if let Some(&id) = self.shallow.get(&key) {
                return Ok(Conversion::Existing(id));
            }
            // reserve the id now so members can point back at this type
            let g = self
                .global(ui, off)
                .ok_or_else(|| CtfError::Dwarf("bad unit offset".into()))?;
            let id = match self.state.get(&g) {
                Some(State::InProgress(Some(ph))) => *ph,
                _ => {
                    let fk = if union {
                        ForwardKind::Union
                    } else {
                        ForwardKind::Struct
                    };
                    c.add(Type::new(name.clone(), TypeKind::Forward(fk), 0))
                }
            };
            self.state.insert(g, State::InProgress(Some(id)));
            self.shallow.insert(key, id);
        }
        let mut members = Vec::with_capacity(kids.len());
        for ((_, m), (mname, bit_off, bit_size)) in kids.iter().zip(layout) {
            let mut tid = self.type_attr(c, ui, m)?;
            if let Some(bits) = bit_size {
                tid = self.bitfield(c, tid, bits)?;
            }
            members.push(Member {
                name: mname,
                type_id: tid,
                offset_bits: bit_off,
            });
        }
        let k = if union {
            TypeKind::Union(members)
        } else {
            TypeKind::Struct(members)
        };
        Ok(Conversion::New(Type::new(name, k, size)))
    }

    fn bitfield(&mut self, c: &mut Container, base: TypeId, bits: u64) -> Result<TypeId> {
        let r = c.resolve(base)?;
        let Ok(t) = c.get(r) else { return Ok(base) };
        let TypeKind::Integer(enc) = t.kind else {
            return Ok(base);
        };
        if u64::from(enc.bits) == bits {
            return Ok(base);
        }
        let nt = Type {
            name: t.name.clone(),
            kind: TypeKind::Integer(IntEncoding {
                flags: enc.flags,
                offset: 0,
                bits: bits.min(0xffff) as u16,
            }),
            size: t.size,
            root: false,
        };
        if let Some(&id) = self.dedup.get(&nt) {
            return Ok(id);
        }
        let id = c.add(nt.clone());
        self.dedup.insert(nt, id);
        Ok(id)
    }

    fn array(
        &mut self,
        c: &mut Container,
        ui: usize,
        off: UnitOffset,
        e: &Die<'u, 'a>,
    ) -> Result<Conversion> {
        let elem = self.type_attr(c, ui, e)?;
        let mut dims = Vec::new();
        for (_, ce) in self.children(ui, off)? {
            if ce.tag() == gimli::DW_TAG_subrange_type || ce.tag() == gimli::DW_TAG_enumeration_type
            {
                let index = self.type_attr(c, ui, &ce)?;
                let n = if let Some(count) = Self::udata(&ce, gimli::DW_AT_count)? {
                    count
                } else if let Some(ub) = Self::sdata(&ce, gimli::DW_AT_upper_bound)? {
                    let lb = Self::sdata(&ce, gimli::DW_AT_lower_bound)?.unwrap_or(0);
                    ub.saturating_sub(lb).saturating_add(1).max(0) as u64
                } else {
                    0 // flexible array member
                };
                dims.push((index, n.min(u64::from(u32::MAX)) as u32));
            }
        }
        if dims.is_empty() {
            dims.push((TypeId::VOID, 0));
        }
        // int a[2][3] is an array of 2 arrays of 3: build from the innermost dimension out
        let mut cur = elem;
        for (i, &(index, nelems)) in dims.iter().enumerate().rev() {
            let t = Type::new(
                "",
                TypeKind::Array(ArrayInfo {
                    contents: cur,
                    index,
                    nelems,
                }),
                0,
            );
            if i == 0 {
                return Ok(Conversion::New(t));
            }
            cur = match self.dedup.get(&t) {
                Some(&id) => id,
                None => {
                    let id = c.add(t.clone());
                    self.dedup.insert(t, id);
                    id
                }
            };
        }
        Ok(Conversion::Existing(cur))
    }
}

enum Conversion {
    /// A new type to add (or find among identical ones).
    New(Type),
    /// The DIE stands for a type that already has an id.
    Existing(TypeId),
}
