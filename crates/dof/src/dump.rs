//! Human-readable dump of a DOF object, as `dofdump` prints it: the header, each section header, and
//! each section's decoded contents (strings resolved through their string tables).

use std::fmt::Write;

use crate::consts::*;
use crate::difo::{str_at, str_list};
use crate::model::*;

fn strtab(f: &DofFile, idx: u32) -> &[u8] {
    match f.section(idx).map(|s| &s.data) {
        Some(SectionData::StrTab(t)) => t,
        _ => &[],
    }
}

fn s(f: &DofFile, tab: u32, off: u64) -> String {
    match str_at(strtab(f, tab), off) {
        Some(x) => format!("\"{x}\""),
        None => format!("<bad string {off}>"),
    }
}

fn link(x: u32) -> String {
    if x == DOF_SECIDX_NONE {
        "none".into()
    } else {
        x.to_string()
    }
}

fn ty(t: &DifType) -> String {
    let k = match t.kind {
        DIF_TYPE_CTF => "ctf",
        DIF_TYPE_STRING => "string",
        _ => "?",
    };
    format!(
        "{k} ckind={} flags=0x{:x} size={}",
        t.ckind, t.flags, t.size
    )
}

/// Renders the dump of `f`.
pub fn dump(f: &DofFile) -> String {
    let mut o = String::new();
    let model = match f.ident.model {
        DOF_MODEL_ILP32 => "ILP32",
        DOF_MODEL_LP64 => "LP64",
        _ => "?",
    };
    let enc = match f.ident.encoding {
        DOF_ENCODE_LSB => "LSB",
        DOF_ENCODE_MSB => "MSB",
        _ => "?",
    };
    let _ = writeln!(
        o,
        "dof_hdr: model={model} encoding={enc} version={} difvers={} difireg={} diftreg={} flags=0x{:x} sections={}",
        f.ident.version,
        f.ident.dif_version,
        f.ident.dif_ireg,
        f.ident.dif_treg,
        f.flags,
        f.sections.len()
    );
    for (i, sec) in f.sections.iter().enumerate() {
        let t = sec.data.sect_type();
        let _ = writeln!(
            o,
            "\n[{i}] DOF_SECT_{} align={} flags={} entsize={} size={}",
            sect_name(t),
            sec.align,
            if sec.is_loadable() { "LOAD" } else { "0" },
            sec.entsize,
            crate::write::encoded_size(f, sec)
        );
        match &sec.data {
            SectionData::Comments(b) | SectionData::Source(b) => {
                let _ = writeln!(o, "  {}", String::from_utf8_lossy(b).trim_end_matches('\0'));
            }
            SectionData::StrTab(b) => {
                let mut off = 0;
                for part in b.split(|&c| c == 0) {
                    if off < b.len() {
                        let _ = writeln!(o, "  [{off}] \"{}\"", String::from_utf8_lossy(part));
                    }
                    off += part.len() + 1;
                }
            }
            SectionData::EcbDesc(e) => {
                let _ = writeln!(
                    o,
                    "  probes={} pred={} actions={} uarg=0x{:x}",
                    link(e.probes),
                    link(e.pred),
                    link(e.actions),
                    e.uarg
                );
            }
            SectionData::ProbeDesc(p) => {
                let _ = writeln!(
                    o,
                    "  {}:{}:{}:{} id={}",
                    s(f, p.strtab, p.provider.into()),
                    s(f, p.strtab, p.module.into()),
                    s(f, p.strtab, p.function.into()),
                    s(f, p.strtab, p.name.into()),
                    p.id
                );
            }
            SectionData::ActDesc(v) => {
                for (j, a) in v.iter().enumerate() {
                    let arg = if a.strtab != DOF_SECIDX_NONE {
                        s(f, a.strtab, a.arg)
                    } else {
                        format!("0x{:x}", a.arg)
                    };
                    let _ = writeln!(
                        o,
                        "  [{j}] kind=0x{:x} difo={} ntuple={} arg={arg} uarg=0x{:x}",
                        a.kind,
                        link(a.difo),
                        a.ntuple,
                        a.uarg
                    );
                }
            }
            SectionData::DifoHdr(h) => {
                let links: Vec<String> = h.links.iter().map(|&l| link(l)).collect();
                let _ = writeln!(o, "  rtype: {} links: {}", ty(&h.rtype), links.join(" "));
            }
            SectionData::Dif(w) => {
                for (j, x) in w.iter().enumerate() {
                    let _ = writeln!(o, "  {j:04}: {x:08x}");
                }
            }
            SectionData::IntTab(w) => {
                for (j, x) in w.iter().enumerate() {
                    let _ = writeln!(o, "  [{j}] 0x{x:x}");
                }
            }
            SectionData::VarTab(v) => {
                for d in v {
                    let _ = writeln!(
                        o,
                        "  name@{} id={} kind={} scope={} flags=0x{:x} type: {}",
                        d.name,
                        d.id,
                        if d.kind == DIFV_KIND_ARRAY {
                            "array"
                        } else {
                            "scalar"
                        },
                        match d.scope {
                            DIFV_SCOPE_GLOBAL => "global",
                            DIFV_SCOPE_THREAD => "thread",
                            DIFV_SCOPE_LOCAL => "local",
                            _ => "?",
                        },
                        d.flags,
                        ty(&d.ty)
                    );
                }
            }
            SectionData::TypTab(v) => {
                for t in v {
                    let _ = writeln!(o, "  {}", ty(t));
                }
            }
            SectionData::RelTab(v) => {
                for r in v {
                    let _ = writeln!(
                        o,
                        "  name@{} type={} offset=0x{:x} data=0x{:x}",
                        r.name, r.kind, r.offset, r.data
                    );
                }
            }
            SectionData::URelHdr(r) | SectionData::KRelHdr(r) => {
                let _ = writeln!(
                    o,
                    "  strtab={} relsec={} tgtsec={}",
                    r.strtab, r.relsec, r.tgtsec
                );
            }
            SectionData::OptDesc(v) => {
                for d in v {
                    let val = if d.strtab != DOF_SECIDX_NONE {
                        s(f, d.strtab, d.value)
                    } else {
                        format!("0x{:x}", d.value)
                    };
                    let _ = writeln!(o, "  option={} value={val}", d.option);
                }
            }
            SectionData::Provider(p) => {
                let _ = writeln!(
                    o,
                    "  name={} strtab={} probes={} prargs={} proffs={} prenoffs={}",
                    s(f, p.strtab, p.name.into()),
                    p.strtab,
                    link(p.probes),
                    link(p.prargs),
                    link(p.proffs),
                    p.prenoffs.map_or("-".into(), link)
                );
                let _ = writeln!(
                    o,
                    "  attrs: provider=0x{:08x} module=0x{:08x} function=0x{:08x} name=0x{:08x} args=0x{:08x}",
                    p.provattr, p.modattr, p.funcattr, p.nameattr, p.argsattr
                );
            }
            SectionData::Probes(v) => {
                let tab_idx = f.sections.iter().find_map(|x| match &x.data {
                    SectionData::Provider(p) if p.probes == i as u32 => Some(p.strtab),
                    _ => None,
                });
                for p in v {
                    let names = |off: u64| tab_idx.map_or(format!("@{off}"), |t| s(f, t, off));
                    let args = |off: u32, n: u8| {
                        tab_idx
                            .and_then(|t| str_list(strtab(f, t), off, n.into()))
                            .map_or(String::new(), |v| v.join(", "))
                    };
                    let _ = writeln!(
                        o,
                        "  {}:{} addr=0x{:x} native=({}) xlated=({}) argidx={} offidx={} noffs={} enoffidx={} nenoffs={}",
                        names(p.func.into()),
                        names(p.name.into()),
                        p.addr,
                        args(p.nargv, p.nargc),
                        args(p.xargv, p.xargc),
                        p.argidx,
                        p.offidx,
                        p.noffs,
                        p.enoffidx,
                        p.nenoffs
                    );
                }
            }
            SectionData::PrArgs(b) => {
                let _ = writeln!(o, "  {b:?}");
            }
            SectionData::PrOffs(w) | SectionData::PrEnOffs(w) => {
                let v: Vec<String> = w.iter().map(|x| format!("0x{x:x}")).collect();
                let _ = writeln!(o, "  {}", v.join(" "));
            }
            SectionData::PrExport(w) => {
                let _ = writeln!(o, "  {w:?}");
            }
            SectionData::Utsname(u) => {
                let _ = writeln!(
                    o,
                    "  {}",
                    (0..5).map(|i| u.field(i)).collect::<Vec<_>>().join(" ")
                );
            }
            SectionData::XlTab(v) => {
                for r in v {
                    let _ = writeln!(
                        o,
                        "  xlator={} member={} argn={}",
                        r.xlator, r.member, r.argn
                    );
                }
            }
            SectionData::XlMembers(v) => {
                for m in v {
                    let _ = writeln!(
                        o,
                        "  difo={} name@{} type: {}",
                        link(m.difo),
                        m.name,
                        ty(&m.ty)
                    );
                }
            }
            SectionData::XlImport(x) | SectionData::XlExport(x) => {
                let _ = writeln!(
                    o,
                    "  members={} type={} argc={} args=({})",
                    x.members,
                    s(f, x.strtab, x.ty.into()),
                    x.argc,
                    str_list(strtab(f, x.strtab), x.argv, x.argc.min(256) as usize)
                        .map_or(String::new(), |v| v.join(", "))
                );
            }
            SectionData::None(_) | SectionData::Unknown(..) => {}
        }
    }
    o
}
