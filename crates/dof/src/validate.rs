//! Cross-section validation of a decoded DOF object: every link names an existing section of the
//! right type that is loadable when its referrer is, every string reference lies inside its string
//! table, DIFO sub-sections have the alignment and entry size the loader demands and appear once,
//! relocations stay inside their target, and provider probes stay inside their offset and argument
//! tables.

use crate::consts::*;
use crate::error::{DofError, Result};
use crate::model::*;

struct V<'a> {
    f: &'a DofFile,
}

impl V<'_> {
    fn link(
        &self,
        from: u32,
        to: u32,
        types: &[u32],
        allow_none: bool,
    ) -> Result<Option<&Section>> {
        let bad = |why: String| Err(DofError::BadLink { from, to, why });
        if to == DOF_SECIDX_NONE {
            if allow_none {
                return Ok(None);
            }
            return bad("a section is required here".into());
        }
        let Some(s) = self.f.section(to) else {
            return bad("no such section".into());
        };
        let t = s.data.sect_type();
        if !types.is_empty() && !types.contains(&t) {
            let want: Vec<&str> = types.iter().map(|&t| sect_name(t)).collect();
            return bad(format!(
                "is {}, expected {}",
                sect_name(t),
                want.join(" or ")
            ));
        }
        let from_loadable = self.f.section(from).is_some_and(|s| s.is_loadable());
        if from_loadable && !s.is_loadable() {
            return bad("linked section is not loadable".into());
        }
        Ok(Some(s))
    }

    fn strtab(&self, from: u32, to: u32, allow_none: bool) -> Result<Option<&[u8]>> {
        Ok(self
            .link(from, to, &[sect::STRTAB], allow_none)?
            .map(|s| match &s.data {
                SectionData::StrTab(b) => b.as_slice(),
                _ => &[][..],
            }))
    }

    fn string(&self, section: u32, strtab: u32, tab: &[u8], offset: u64) -> Result<()> {
        if offset >= tab.len() as u64 {
            return Err(DofError::BadString {
                section,
                strtab,
                offset: offset.min(u64::from(u32::MAX)) as u32,
            });
        }
        Ok(())
    }

    /// `count` consecutive strings starting at `offset`.
    fn strings(
        &self,
        section: u32,
        strtab: u32,
        tab: &[u8],
        offset: u32,
        count: usize,
    ) -> Result<()> {
        let mut off = offset as usize;
        for _ in 0..count {
            self.string(section, strtab, tab, off as u64)?;
            let n = tab[off..]
                .iter()
                .position(|&c| c == 0)
                .unwrap_or(tab.len() - off);
            off += n + 1;
        }
        Ok(())
    }
}

/// Runs every cross-section check (the decoder calls this; builders may call it before writing).
pub fn validate(f: &DofFile) -> Result<()> {
    let v = V { f };
    for (i, s) in f.sections.iter().enumerate() {
        let i = i as u32;
        let bad = |why: String| {
            Err(DofError::BadSection {
                index: i,
                kind: sect_name(s.data.sect_type()),
                why,
            })
        };
        match &s.data {
            SectionData::StrTab(b) if b.last().is_some_and(|&c| c != 0) => {
                return bad("string table does not end with a NUL".into());
            }
            SectionData::EcbDesc(e) => {
                v.link(i, e.probes, &[sect::PROBEDESC], false)?;
                v.link(i, e.pred, &[sect::DIFOHDR], true)?;
                v.link(i, e.actions, &[sect::ACTDESC], true)?;
            }
            SectionData::ProbeDesc(p) => {
                if let Some(tab) = v.strtab(i, p.strtab, false)? {
                    for o in [p.provider, p.module, p.function, p.name] {
                        v.string(i, p.strtab, tab, u64::from(o))?;
                    }
                }
            }
            SectionData::ActDesc(acts) => {
                if acts.is_empty() {
                    return bad("no actions".into());
                }
                for a in acts {
                    v.link(i, a.difo, &[sect::DIFOHDR], true)?;
                    if let Some(tab) = v.strtab(i, a.strtab, true)? {
                        v.string(i, a.strtab, tab, a.arg)?;
                    }
                }
            }
            SectionData::DifoHdr(h) => validate_difo(&v, i, h)?,
            SectionData::URelHdr(r) | SectionData::KRelHdr(r) => {
                let tab = v.strtab(i, r.strtab, false)?.unwrap_or(&[]);
                let rel = v.link(i, r.relsec, &[sect::RELTAB], false)?;
                let tgt = v.link(i, r.tgtsec, &[], false)?;
                let tgt_size = tgt.map_or(0, |t| crate::write::encoded_size(f, t) as u64);
                if let Some(Section {
                    data: SectionData::RelTab(relocs),
                    ..
                }) = rel
                {
                    for r2 in relocs {
                        v.string(r.relsec, r.strtab, tab, u64::from(r2.name))?;
                        match r2.kind {
                            DOF_RELO_NONE => {}
                            DOF_RELO_SETX | DOF_RELO_DOFREL => {
                                if r2.offset.checked_add(8).is_none_or(|e| e > tgt_size)
                                    || r2.offset % 8 != 0
                                {
                                    return Err(DofError::BadSection {
                                        index: r.relsec,
                                        kind: "RELTAB",
                                        why: format!(
                                            "relocation at {} outside or misaligned in its target",
                                            r2.offset
                                        ),
                                    });
                                }
                            }
                            k => {
                                return Err(DofError::BadSection {
                                    index: r.relsec,
                                    kind: "RELTAB",
                                    why: format!("unknown relocation type {k}"),
                                })
                            }
                        }
                    }
                }
            }
            SectionData::OptDesc(opts) => {
                for o in opts {
                    if let Some(tab) = v.strtab(i, o.strtab, true)? {
                        v.string(i, o.strtab, tab, o.value)?;
                    }
                }
            }
            SectionData::Provider(p) => validate_provider(&v, i, p)?,
            SectionData::XlImport(x) | SectionData::XlExport(x) => {
                v.link(i, x.members, &[sect::XLMEMBERS], false)?;
                let tab = v.strtab(i, x.strtab, false)?.unwrap_or(&[]);
                v.strings(i, x.strtab, tab, x.argv, x.argc as usize)?;
                v.string(i, x.strtab, tab, u64::from(x.ty))?;
            }
            SectionData::XlMembers(ms) => {
                for m in ms {
                    v.link(i, m.difo, &[sect::DIFOHDR], true)?;
                }
            }
            SectionData::XlTab(refs) => {
                for r in refs {
                    v.link(i, r.xlator, &[sect::XLIMPORT], false)?;
                }
            }
            SectionData::PrExport(ids) => {
                for &x in ids {
                    v.link(i, x, &[], false)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn validate_difo(v: &V, i: u32, h: &DifoHdr) -> Result<()> {
    let mut seen = [false; 4];
    let mut strtab: Option<(u32, &[u8])> = None;
    let mut vartab: Option<(u32, &[DifVar])> = None;
    for &l in &h.links {
        let Some(s) = v.link(i, l, &[], false)? else {
            continue;
        };
        let (slot, align, entsize) = match &s.data {
            SectionData::Dif(_) => (0, 4, 4),
            SectionData::IntTab(_) => (1, 8, 8),
            SectionData::StrTab(b) => {
                strtab = Some((l, b));
                (2, 1, 0)
            }
            SectionData::VarTab(vs) => {
                vartab = Some((l, vs));
                (3, 4, size::DIFV as u32)
            }
            _ => continue, // other sections (type tables, relocations) may be linked; the loader skips them
        };
        let bad = |why: String| {
            Err(DofError::BadLink {
                from: i,
                to: l,
                why,
            })
        };
        if std::mem::replace(&mut seen[slot], true) {
            return bad(format!(
                "second {} section in one DIFO",
                sect_name(s.data.sect_type())
            ));
        }
        if s.align != align {
            return bad(format!(
                "alignment {} where the loader requires {align}",
                s.align
            ));
        }
        if s.entsize != entsize {
            return bad(format!(
                "entry size {} where the loader requires {entsize}",
                s.entsize
            ));
        }
        if let SectionData::Dif(words) = &s.data {
            if words.is_empty() {
                return bad("empty DIF text".into());
            }
        }
    }
    if !seen[0] {
        return Err(DofError::BadSection {
            index: i,
            kind: "DIFOHDR",
            why: "missing DIF text".into(),
        });
    }
    if let Some((vt, vars)) = vartab {
        let (st, tab) = strtab.unwrap_or((DOF_SECIDX_NONE, &[]));
        for var in vars {
            v.string(vt, st, tab, u64::from(var.name))?;
        }
    }
    Ok(())
}

fn validate_provider(v: &V, i: u32, p: &Provider) -> Result<()> {
    let tab = v.strtab(i, p.strtab, false)?.unwrap_or(&[]);
    v.string(i, p.strtab, tab, u64::from(p.name))?;
    let probes = match v.link(i, p.probes, &[sect::PROBES], false)? {
        Some(Section {
            data: SectionData::Probes(ps),
            ..
        }) => ps.as_slice(),
        _ => &[],
    };
    let prargs = match v.link(i, p.prargs, &[sect::PRARGS], true)? {
        Some(Section {
            data: SectionData::PrArgs(a),
            ..
        }) => a.as_slice(),
        _ => &[],
    };
    let proffs = match v.link(i, p.proffs, &[sect::PROFFS], false)? {
        Some(Section {
            data: SectionData::PrOffs(o),
            ..
        }) => o.len(),
        _ => 0,
    };
    let prenoffs = match p.prenoffs {
        Some(x) => match v.link(i, x, &[sect::PRENOFFS], true)? {
            Some(Section {
                data: SectionData::PrEnOffs(o),
                ..
            }) => o.len(),
            _ => 0,
        },
        None if v.f.ident.version >= DOF_VERSION_2 => {
            return Err(DofError::BadSection {
                index: i,
                kind: "PROVIDER",
                why: "version-1 provider record in a later-version DOF".into(),
            })
        }
        None => 0,
    };
    for (n, pr) in probes.iter().enumerate() {
        let bad = |why: String| {
            Err(DofError::BadSection {
                index: p.probes,
                kind: "PROBES",
                why: format!("probe {n}: {why}"),
            })
        };
        v.string(p.probes, p.strtab, tab, u64::from(pr.name))?;
        v.string(p.probes, p.strtab, tab, u64::from(pr.func))?;
        if u64::from(pr.offidx) + u64::from(pr.noffs) > proffs as u64 {
            return bad("offsets beyond the offset table".into());
        }
        if u64::from(pr.enoffidx) + u64::from(pr.nenoffs) > prenoffs as u64 {
            return bad("is-enabled offsets beyond their table".into());
        }
        if pr.noffs == 0 && pr.nenoffs == 0 {
            return bad("no probe offsets".into());
        }
        if pr.nargc > 0 {
            v.strings(p.probes, p.strtab, tab, pr.nargv, usize::from(pr.nargc))?;
        }
        if pr.xargc > 0 {
            v.strings(p.probes, p.strtab, tab, pr.xargv, usize::from(pr.xargc))?;
            let end = pr.argidx as usize + usize::from(pr.xargc);
            if end > prargs.len() {
                return bad("argument mappings beyond the argument table".into());
            }
            if prargs[pr.argidx as usize..end]
                .iter()
                .any(|&a| a >= pr.nargc && pr.nargc > 0)
            {
                return bad("argument mapping to a native argument that does not exist".into());
            }
        }
    }
    Ok(())
}
