//! Decoding DOF: the header and section headers with the checks DTrace's loader makes (magic, data
//! model, encoding, versions, register counts, padding, flags, sizes, alignment, bounds against the
//! loadable and file sizes), then each section's contents by type, then the cross-section checks of
//! `validate.rs`.

use crate::bytes::*;
use crate::consts::*;
use crate::error::{DofError, Result};
use crate::model::*;

/// The fixed header fields after the identification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DofHeaderInfo {
    /// `dofh_flags`.
    pub flags: u32,
    /// `dofh_hdrsize`.
    pub hdrsize: u32,
    /// `dofh_secsize`.
    pub secsize: u32,
    /// `dofh_secnum`.
    pub secnum: u32,
    /// `dofh_secoff`.
    pub secoff: u64,
    /// `dofh_loadsz`.
    pub loadsz: u64,
    /// `dofh_filesz`.
    pub filesz: u64,
}

/// A raw section header (`dof_sec_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawSection {
    /// `dofs_type`.
    pub kind: u32,
    /// `dofs_align`.
    pub align: u32,
    /// `dofs_flags`.
    pub flags: u32,
    /// `dofs_entsize`.
    pub entsize: u32,
    /// `dofs_offset`.
    pub offset: u64,
    /// `dofs_size`.
    pub size: u64,
}

/// Decodes and checks the identification and header.
pub fn read_header(b: &[u8]) -> Result<(DofIdent, DofHeaderInfo)> {
    let id = slice(b, 0, size::HDR, "DOF header")?;
    if id[0..4] != DOF_MAG {
        return Err(DofError::BadMagic);
    }
    let ident = DofIdent {
        model: id[DOF_ID_MODEL],
        encoding: id[DOF_ID_ENCODING],
        version: id[DOF_ID_VERSION],
        dif_version: id[DOF_ID_DIFVERS],
        dif_ireg: id[DOF_ID_DIFIREG],
        dif_treg: id[DOF_ID_DIFTREG],
    };
    let bad = |s: String| Err(DofError::BadHeader(s));
    if ident.model != DOF_MODEL_ILP32 && ident.model != DOF_MODEL_LP64 {
        return bad(format!("unknown data model {}", ident.model));
    }
    if ident.encoding != DOF_ENCODE_LSB && ident.encoding != DOF_ENCODE_MSB {
        return bad(format!("unknown encoding {}", ident.encoding));
    }
    if !(DOF_VERSION_1..=DOF_VERSION_3).contains(&ident.version) {
        return bad(format!("unknown DOF version {}", ident.version));
    }
    if !(DIF_VERSION_1..=DIF_VERSION_2).contains(&ident.dif_version) {
        return bad(format!("unknown DIF version {}", ident.dif_version));
    }
    if ident.dif_ireg > DIF_DIR_NREGS {
        return bad(format!("{} integer registers", ident.dif_ireg));
    }
    if ident.dif_treg > DIF_DTR_NREGS {
        return bad(format!("{} tuple registers", ident.dif_treg));
    }
    if id[DOF_ID_PAD..DOF_ID_SIZE].iter().any(|&x| x != 0) {
        return bad("non-zero identification padding".into());
    }
    let e = Endian {
        big: ident.encoding == DOF_ENCODE_MSB,
    };
    let h = DofHeaderInfo {
        flags: e.u32(b, 16, "DOF header")?,
        hdrsize: e.u32(b, 20, "DOF header")?,
        secsize: e.u32(b, 24, "DOF header")?,
        secnum: e.u32(b, 28, "DOF header")?,
        secoff: e.u64(b, 32, "DOF header")?,
        loadsz: e.u64(b, 40, "DOF header")?,
        filesz: e.u64(b, 48, "DOF header")?,
    };
    if h.flags & !DOF_FL_VALID != 0 {
        return bad(format!("unknown flags 0x{:x}", h.flags));
    }
    if (h.hdrsize as usize) < size::HDR {
        return bad(format!("header size {}", h.hdrsize));
    }
    if (h.secsize as usize) < size::SEC || !h.secsize.is_multiple_of(8) {
        return bad(format!("section header size {}", h.secsize));
    }
    if !h.secoff.is_multiple_of(8) {
        return bad("misaligned section headers".into());
    }
    if h.filesz > b.len() as u64 {
        return Err(DofError::Truncated {
            what: "DOF file",
            offset: 0,
            need: h.filesz,
            have: b.len() as u64,
        });
    }
    if h.loadsz > h.filesz {
        return bad(format!(
            "load size {} exceeds file size {}",
            h.loadsz, h.filesz
        ));
    }
    let sec_end = u64::from(h.secnum)
        .checked_mul(u64::from(h.secsize))
        .and_then(|n| n.checked_add(h.secoff))
        .ok_or_else(|| DofError::BadHeader("section headers overflow".into()))?;
    if h.secoff < u64::from(h.hdrsize) || sec_end > h.loadsz {
        return bad("section headers outside the loadable part".into());
    }
    Ok((ident, h))
}

/// Decodes the section headers, checking each one's alignment and bounds.
pub fn read_section_headers(
    b: &[u8],
    ident: &DofIdent,
    h: &DofHeaderInfo,
) -> Result<Vec<RawSection>> {
    let e = Endian {
        big: ident.encoding == DOF_ENCODE_MSB,
    };
    let mut out = Vec::with_capacity(h.secnum as usize);
    for i in 0..h.secnum {
        let off = (h.secoff + u64::from(i) * u64::from(h.secsize)) as usize;
        let s = RawSection {
            kind: e.u32(b, off, "section header")?,
            align: e.u32(b, off + 4, "section header")?,
            flags: e.u32(b, off + 8, "section header")?,
            entsize: e.u32(b, off + 12, "section header")?,
            offset: e.u64(b, off + 16, "section header")?,
            size: e.u64(b, off + 24, "section header")?,
        };
        let bad = |why: String| DofError::BadSection {
            index: i,
            kind: sect_name(s.kind),
            why,
        };
        if s.flags & !DOF_SECF_LOAD != 0 {
            return Err(bad(format!("unknown flags 0x{:x}", s.flags)));
        }
        let loadable = s.flags & DOF_SECF_LOAD != 0;
        if s.kind != sect::NONE || s.size != 0 {
            if s.align == 0 || !s.align.is_power_of_two() {
                return Err(bad(format!("alignment {} is not a power of two", s.align)));
            }
            if !s.offset.is_multiple_of(u64::from(s.align)) {
                return Err(bad(format!(
                    "offset {} not aligned to {}",
                    s.offset, s.align
                )));
            }
        }
        let end = s
            .offset
            .checked_add(s.size)
            .ok_or_else(|| bad("size overflows".into()))?;
        let limit = if loadable { h.loadsz } else { h.filesz };
        if end > limit {
            return Err(bad(format!(
                "data [{}, {end}) beyond the {} size {limit}",
                s.offset,
                if loadable { "load" } else { "file" }
            )));
        }
        out.push(s);
    }
    Ok(out)
}

/// Decodes and fully validates a DOF object (trailing bytes after `dofh_filesz` are ignored).
pub fn read_dof(b: &[u8]) -> Result<DofFile> {
    let (ident, h) = read_header(b)?;
    let raws = read_section_headers(b, &ident, &h)?;
    let e = Endian {
        big: ident.encoding == DOF_ENCODE_MSB,
    };
    let mut sections = Vec::with_capacity(raws.len());
    for (i, s) in raws.iter().enumerate() {
        let data = &b[s.offset as usize..(s.offset + s.size) as usize];
        let decoded = decode_section(e, i as u32, s, data)?;
        sections.push(Section {
            align: s.align,
            flags: s.flags,
            entsize: s.entsize,
            data: decoded,
        });
    }
    let f = DofFile {
        ident,
        flags: h.flags,
        sections,
    };
    crate::validate::validate(&f)?;
    Ok(f)
}

fn entries<T>(
    index: u32,
    s: &RawSection,
    data: &[u8],
    min: usize,
    mut one: impl FnMut(&[u8]) -> Result<T>,
) -> Result<Vec<T>> {
    let bad = |why: String| DofError::BadSection {
        index,
        kind: sect_name(s.kind),
        why,
    };
    let ent = s.entsize as usize;
    if ent < min {
        return Err(bad(format!("entry size {ent}, need at least {min}")));
    }
    if !data.len().is_multiple_of(ent) {
        return Err(bad(format!(
            "size {} is not a multiple of the entry size {ent}",
            data.len()
        )));
    }
    data.chunks_exact(ent).map(&mut one).collect()
}

fn need(index: u32, s: &RawSection, data: &[u8], min: usize) -> Result<()> {
    if data.len() < min {
        return Err(DofError::BadSection {
            index,
            kind: sect_name(s.kind),
            why: format!("size {} smaller than the structure ({min})", data.len()),
        });
    }
    Ok(())
}

fn diftype(b: &[u8], off: usize, e: Endian) -> Result<DifType> {
    let s = slice(b, off, size::DIFTYPE, "dtrace_diftype_t")?;
    Ok(DifType {
        kind: s[0],
        ckind: s[1],
        flags: s[2],
        pad: s[3],
        size: e.u32(b, off + 4, "dtrace_diftype_t")?,
    })
}

fn xlator(b: &[u8], e: Endian) -> Result<Xlator> {
    let w = |i: usize| e.u32(b, 4 * i, "dof_xlator_t");
    Ok(Xlator {
        members: w(0)?,
        strtab: w(1)?,
        argv: w(2)?,
        argc: w(3)?,
        ty: w(4)?,
        attr: w(5)?,
    })
}

fn relohdr(b: &[u8], e: Endian) -> Result<RelocHdr> {
    let w = |i: usize| e.u32(b, 4 * i, "dof_relohdr_t");
    Ok(RelocHdr {
        strtab: w(0)?,
        relsec: w(1)?,
        tgtsec: w(2)?,
    })
}

fn decode_section(e: Endian, index: u32, s: &RawSection, d: &[u8]) -> Result<SectionData> {
    let bad = |why: String| DofError::BadSection {
        index,
        kind: sect_name(s.kind),
        why,
    };
    Ok(match s.kind {
        sect::NONE => SectionData::None(d.to_vec()),
        sect::COMMENTS => SectionData::Comments(d.to_vec()),
        sect::SOURCE => SectionData::Source(d.to_vec()),
        sect::ECBDESC => {
            need(index, s, d, size::ECBDESC)?;
            SectionData::EcbDesc(EcbDesc {
                probes: e.u32(d, 0, "ecbdesc")?,
                pred: e.u32(d, 4, "ecbdesc")?,
                actions: e.u32(d, 8, "ecbdesc")?,
                pad: e.u32(d, 12, "ecbdesc")?,
                uarg: e.u64(d, 16, "ecbdesc")?,
            })
        }
        sect::PROBEDESC => {
            need(index, s, d, size::PROBEDESC)?;
            let w = |i: usize| e.u32(d, 4 * i, "probedesc");
            SectionData::ProbeDesc(ProbeDesc {
                strtab: w(0)?,
                provider: w(1)?,
                module: w(2)?,
                function: w(3)?,
                name: w(4)?,
                id: w(5)?,
            })
        }
        sect::ACTDESC => SectionData::ActDesc(entries(index, s, d, size::ACTDESC, |x| {
            Ok(ActDesc {
                difo: e.u32(x, 0, "actdesc")?,
                strtab: e.u32(x, 4, "actdesc")?,
                kind: e.u32(x, 8, "actdesc")?,
                ntuple: e.u32(x, 12, "actdesc")?,
                arg: e.u64(x, 16, "actdesc")?,
                uarg: e.u64(x, 24, "actdesc")?,
            })
        })?),
        sect::DIFOHDR => {
            need(index, s, d, size::DIFOHDR)?;
            if !(d.len() - size::DIFTYPE).is_multiple_of(4) {
                return Err(bad("DIFO header size is not a whole number of links".into()));
            }
            let rtype = diftype(d, 0, e)?;
            let links = (size::DIFTYPE..d.len())
                .step_by(4)
                .map(|o| e.u32(d, o, "difohdr"))
                .collect::<Result<_>>()?;
            SectionData::DifoHdr(DifoHdr { rtype, links })
        }
        sect::DIF => SectionData::Dif(entries(index, s, d, 4, |x| e.u32(x, 0, "DIF"))?),
        sect::STRTAB => SectionData::StrTab(d.to_vec()),
        sect::VARTAB => SectionData::VarTab(entries(index, s, d, size::DIFV, |x| {
            Ok(DifVar {
                name: e.u32(x, 0, "difv")?,
                id: e.u32(x, 4, "difv")?,
                kind: x[8],
                scope: x[9],
                flags: e.u16(x, 10, "difv")?,
                ty: diftype(x, 12, e)?,
            })
        })?),
        sect::RELTAB => SectionData::RelTab(entries(index, s, d, size::RELODESC, |x| {
            Ok(RelocDesc {
                name: e.u32(x, 0, "relodesc")?,
                kind: e.u32(x, 4, "relodesc")?,
                offset: e.u64(x, 8, "relodesc")?,
                data: e.u64(x, 16, "relodesc")?,
            })
        })?),
        sect::TYPTAB => {
            SectionData::TypTab(entries(index, s, d, size::DIFTYPE, |x| diftype(x, 0, e))?)
        }
        sect::URELHDR => {
            need(index, s, d, size::RELOHDR)?;
            SectionData::URelHdr(relohdr(d, e)?)
        }
        sect::KRELHDR => {
            need(index, s, d, size::RELOHDR)?;
            SectionData::KRelHdr(relohdr(d, e)?)
        }
        sect::OPTDESC => SectionData::OptDesc(entries(index, s, d, size::OPTDESC, |x| {
            Ok(OptDesc {
                option: e.u32(x, 0, "optdesc")?,
                strtab: e.u32(x, 4, "optdesc")?,
                value: e.u64(x, 8, "optdesc")?,
            })
        })?),
        sect::PROVIDER => {
            need(index, s, d, size::PROVIDER_V1)?;
            let w = |i: usize| e.u32(d, 4 * i, "provider");
            SectionData::Provider(Provider {
                strtab: w(0)?,
                probes: w(1)?,
                prargs: w(2)?,
                proffs: w(3)?,
                name: w(4)?,
                provattr: w(5)?,
                modattr: w(6)?,
                funcattr: w(7)?,
                nameattr: w(8)?,
                argsattr: w(9)?,
                prenoffs: if d.len() >= size::PROVIDER {
                    Some(w(10)?)
                } else {
                    None
                },
            })
        }
        sect::PROBES => SectionData::Probes(entries(index, s, d, size::PROBE, |x| {
            Ok(Probe {
                addr: e.u64(x, 0, "probe")?,
                func: e.u32(x, 8, "probe")?,
                name: e.u32(x, 12, "probe")?,
                nargv: e.u32(x, 16, "probe")?,
                xargv: e.u32(x, 20, "probe")?,
                argidx: e.u32(x, 24, "probe")?,
                offidx: e.u32(x, 28, "probe")?,
                nargc: x[32],
                xargc: x[33],
                noffs: e.u16(x, 34, "probe")?,
                enoffidx: e.u32(x, 36, "probe")?,
                nenoffs: e.u16(x, 40, "probe")?,
                pad1: e.u16(x, 42, "probe")?,
                pad2: e.u32(x, 44, "probe")?,
            })
        })?),
        sect::PRARGS => SectionData::PrArgs(d.to_vec()),
        sect::PROFFS => SectionData::PrOffs(entries(index, s, d, 4, |x| e.u32(x, 0, "u32 array"))?),
        sect::PRENOFFS => {
            SectionData::PrEnOffs(entries(index, s, d, 4, |x| e.u32(x, 0, "u32 array"))?)
        }
        sect::PREXPORT => {
            SectionData::PrExport(entries(index, s, d, 4, |x| e.u32(x, 0, "u32 array"))?)
        }
        sect::INTTAB => SectionData::IntTab(entries(index, s, d, 8, |x| e.u64(x, 0, "inttab"))?),
        sect::UTSNAME => {
            need(index, s, d, size::UTSNAME)?;
            let field = |i: usize| {
                let f = &d[i * size::UTS_FIELD..(i + 1) * size::UTS_FIELD];
                let n = f.iter().position(|&c| c == 0).unwrap_or(f.len() - 1);
                f[..n].to_vec()
            };
            SectionData::Utsname(Utsname {
                fields: [field(0), field(1), field(2), field(3), field(4)],
            })
        }
        sect::XLTAB => SectionData::XlTab(entries(index, s, d, size::XLREF, |x| {
            Ok(XlRef {
                xlator: e.u32(x, 0, "xlref")?,
                member: e.u32(x, 4, "xlref")?,
                argn: e.u32(x, 8, "xlref")?,
            })
        })?),
        sect::XLMEMBERS => SectionData::XlMembers(entries(index, s, d, size::XLMEMBER, |x| {
            Ok(XlMember {
                difo: e.u32(x, 0, "xlmember")?,
                name: e.u32(x, 4, "xlmember")?,
                ty: diftype(x, 8, e)?,
            })
        })?),
        sect::XLIMPORT => {
            need(index, s, d, size::XLATOR)?;
            SectionData::XlImport(xlator(d, e)?)
        }
        sect::XLEXPORT => {
            need(index, s, d, size::XLATOR)?;
            SectionData::XlExport(xlator(d, e)?)
        }
        t => SectionData::Unknown(t, d.to_vec()),
    })
}
