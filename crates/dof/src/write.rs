//! Encoding a [`DofFile`]: header, section headers, then the loadable sections' data followed by the
//! unloadable ones (so the loadable part is one prefix, `dofh_loadsz` long), each at its alignment.

use crate::bytes::Endian;
use crate::consts::*;
use crate::error::{DofError, Result};

/// The largest DOF object [`write_dof`] produces (64 MiB; illumos loads at most 8 MiB by default).
pub const MAX_DOF_SIZE: u64 = 64 << 20;
use crate::model::*;

fn put_diftype(e: Endian, o: &mut Vec<u8>, t: &DifType) {
    o.extend_from_slice(&[t.kind, t.ckind, t.flags, t.pad]);
    e.put32(o, t.size);
}

fn pad_to(o: &mut Vec<u8>, start: usize, entsize: u32) {
    let want = start + entsize as usize;
    if o.len() < want {
        o.resize(want, 0);
    }
}

fn encode_data(e: Endian, s: &Section) -> Vec<u8> {
    let mut o = Vec::new();
    let ent = s.entsize;
    match &s.data {
        SectionData::None(b)
        | SectionData::Comments(b)
        | SectionData::Source(b)
        | SectionData::StrTab(b)
        | SectionData::PrArgs(b)
        | SectionData::Unknown(_, b) => o.extend_from_slice(b),
        SectionData::EcbDesc(d) => {
            for w in [d.probes, d.pred, d.actions, d.pad] {
                e.put32(&mut o, w);
            }
            e.put64(&mut o, d.uarg);
        }
        SectionData::ProbeDesc(d) => {
            for w in [d.strtab, d.provider, d.module, d.function, d.name, d.id] {
                e.put32(&mut o, w);
            }
        }
        SectionData::ActDesc(v) => {
            for a in v {
                let st = o.len();
                for w in [a.difo, a.strtab, a.kind, a.ntuple] {
                    e.put32(&mut o, w);
                }
                e.put64(&mut o, a.arg);
                e.put64(&mut o, a.uarg);
                pad_to(&mut o, st, ent);
            }
        }
        SectionData::DifoHdr(h) => {
            put_diftype(e, &mut o, &h.rtype);
            for &l in &h.links {
                e.put32(&mut o, l);
            }
        }
        SectionData::Dif(w)
        | SectionData::PrOffs(w)
        | SectionData::PrEnOffs(w)
        | SectionData::PrExport(w) => {
            for &x in w {
                let st = o.len();
                e.put32(&mut o, x);
                pad_to(&mut o, st, ent);
            }
        }
        SectionData::VarTab(v) => {
            for d in v {
                let st = o.len();
                e.put32(&mut o, d.name);
                e.put32(&mut o, d.id);
                o.extend_from_slice(&[d.kind, d.scope]);
                e.put16(&mut o, d.flags);
                put_diftype(e, &mut o, &d.ty);
                pad_to(&mut o, st, ent);
            }
        }
        SectionData::RelTab(v) => {
            for r in v {
                let st = o.len();
                e.put32(&mut o, r.name);
                e.put32(&mut o, r.kind);
                e.put64(&mut o, r.offset);
                e.put64(&mut o, r.data);
                pad_to(&mut o, st, ent);
            }
        }
        SectionData::TypTab(v) => {
            for t in v {
                let st = o.len();
                put_diftype(e, &mut o, t);
                pad_to(&mut o, st, ent);
            }
        }
        SectionData::URelHdr(r) | SectionData::KRelHdr(r) => {
            for w in [r.strtab, r.relsec, r.tgtsec] {
                e.put32(&mut o, w);
            }
        }
        SectionData::OptDesc(v) => {
            for d in v {
                let st = o.len();
                e.put32(&mut o, d.option);
                e.put32(&mut o, d.strtab);
                e.put64(&mut o, d.value);
                pad_to(&mut o, st, ent);
            }
        }
        SectionData::Provider(p) => {
            for w in [
                p.strtab, p.probes, p.prargs, p.proffs, p.name, p.provattr, p.modattr, p.funcattr,
                p.nameattr, p.argsattr,
            ] {
                e.put32(&mut o, w);
            }
            if let Some(x) = p.prenoffs {
                e.put32(&mut o, x);
            }
        }
        SectionData::Probes(v) => {
            for p in v {
                let st = o.len();
                e.put64(&mut o, p.addr);
                for w in [p.func, p.name, p.nargv, p.xargv, p.argidx, p.offidx] {
                    e.put32(&mut o, w);
                }
                o.extend_from_slice(&[p.nargc, p.xargc]);
                e.put16(&mut o, p.noffs);
                e.put32(&mut o, p.enoffidx);
                e.put16(&mut o, p.nenoffs);
                e.put16(&mut o, p.pad1);
                e.put32(&mut o, p.pad2);
                pad_to(&mut o, st, ent);
            }
        }
        SectionData::IntTab(v) => {
            for &x in v {
                let st = o.len();
                e.put64(&mut o, x);
                pad_to(&mut o, st, ent);
            }
        }
        SectionData::Utsname(u) => {
            for f in &u.fields {
                let b = f.as_slice();
                let n = b.len().min(size::UTS_FIELD - 1);
                o.extend_from_slice(&b[..n]);
                o.resize(o.len() + size::UTS_FIELD - n, 0);
            }
        }
        SectionData::XlTab(v) => {
            for r in v {
                let st = o.len();
                for w in [r.xlator, r.member, r.argn] {
                    e.put32(&mut o, w);
                }
                pad_to(&mut o, st, ent);
            }
        }
        SectionData::XlMembers(v) => {
            for m in v {
                let st = o.len();
                e.put32(&mut o, m.difo);
                e.put32(&mut o, m.name);
                put_diftype(e, &mut o, &m.ty);
                pad_to(&mut o, st, ent);
            }
        }
        SectionData::XlImport(x) | SectionData::XlExport(x) => {
            for w in [x.members, x.strtab, x.argv, x.argc, x.ty, x.attr] {
                e.put32(&mut o, w);
            }
        }
    }
    o
}

/// The number of bytes section `s` of `f` encodes to.
pub fn encoded_size(f: &DofFile, s: &Section) -> usize {
    encode_data(
        Endian {
            big: f.ident.encoding == DOF_ENCODE_MSB,
        },
        s,
    )
    .len()
}

/// Encodes a DOF object. The result is what [`crate::read_dof`] accepts when `f` is valid (call
/// [`crate::validate`] first to be sure).
pub fn write_dof(f: &DofFile) -> Result<Vec<u8>> {
    write_laid_out(f, None)
}

/// Encodes a DOF object laid out as libdtrace's `dtrace_dof_create` lays out a program: the loadable
/// sections' data in section order, except the program's string table (section `strtab`), which
/// follows them; then, from the next 8-byte boundary, the unloadable sections' data. Every section,
/// even an empty one, gets the offset where its data would start.
pub fn write_dof_dtrace_layout(f: &DofFile, strtab: u32) -> Result<Vec<u8>> {
    write_laid_out(f, Some(strtab as usize))
}

fn write_laid_out(f: &DofFile, dtrace_strtab: Option<usize>) -> Result<Vec<u8>> {
    let e = Endian {
        big: f.ident.encoding == DOF_ENCODE_MSB,
    };
    let n = f.sections.len();
    let datas: Vec<Vec<u8>> = f.sections.iter().map(|s| encode_data(e, s)).collect();
    let mut offsets = vec![0u64; n];
    let mut pos = (size::HDR + n * size::SEC) as u64;
    let loadable = |i: usize| f.sections[i].is_loadable();
    let order: Vec<usize> = (0..n)
        .filter(|&i| loadable(i) && Some(i) != dtrace_strtab)
        .chain(dtrace_strtab.filter(|&i| i < n && loadable(i)))
        .chain((0..n).filter(|&i| !loadable(i)))
        .collect();
    let mut loadsz = pos;
    let mut in_udata = false;
    for &i in &order {
        if dtrace_strtab.is_some() && !loadable(i) && !in_udata {
            in_udata = true;
            pos = pos.div_ceil(8) * 8;
        }
        if datas[i].is_empty() && dtrace_strtab.is_none() {
            continue; // an empty section needs no place (offset 0 is aligned to anything)
        }
        let a = u64::from(f.sections[i].align.max(1));
        pos = pos.div_ceil(a) * a;
        offsets[i] = pos;
        pos += datas[i].len() as u64;
        if loadable(i) {
            loadsz = pos;
        }
    }
    let filesz = pos;
    if filesz > MAX_DOF_SIZE {
        return Err(DofError::TooLarge(filesz));
    }
    let mut out = Vec::with_capacity(filesz as usize);
    out.extend_from_slice(&DOF_MAG);
    out.extend_from_slice(&[
        f.ident.model,
        f.ident.encoding,
        f.ident.version,
        f.ident.dif_version,
        f.ident.dif_ireg,
        f.ident.dif_treg,
    ]);
    out.resize(DOF_ID_SIZE, 0);
    e.put32(&mut out, f.flags);
    e.put32(&mut out, size::HDR as u32);
    e.put32(&mut out, size::SEC as u32);
    e.put32(&mut out, n as u32);
    e.put64(&mut out, size::HDR as u64);
    e.put64(&mut out, loadsz);
    e.put64(&mut out, filesz);
    e.put64(&mut out, 0);
    for (i, s) in f.sections.iter().enumerate() {
        e.put32(&mut out, s.data.sect_type());
        e.put32(&mut out, s.align);
        e.put32(&mut out, s.flags);
        e.put32(&mut out, s.entsize);
        e.put64(
            &mut out,
            if datas[i].is_empty() && s.data.sect_type() == sect::NONE && dtrace_strtab.is_none() {
                0
            } else {
                offsets[i]
            },
        );
        e.put64(&mut out, datas[i].len() as u64);
    }
    for &i in &order {
        if datas[i].is_empty() {
            continue;
        }
        out.resize(offsets[i] as usize, 0);
        out.extend_from_slice(&datas[i]);
    }
    out.resize(filesz as usize, 0);
    Ok(out)
}
