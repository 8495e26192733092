//! DIF objects as plain data ([`Difo`]: instruction words, integer table, string table, variable table,
//! return type) and their conversion to and from the DOF sections that carry them, plus a string
//! table builder.

use std::collections::HashMap;

use crate::consts::*;
use crate::error::{DofError, Result};
use crate::model::*;

/// One DIF object, independent of any DIF crate: the compiler's code generator fills it in.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Difo {
    /// Return type (`dofd_rtype`).
    pub rtype: DifType,
    /// Instruction words.
    pub text: Vec<u32>,
    /// Integer table.
    pub inttab: Vec<u64>,
    /// String table bytes (NUL-separated).
    pub strtab: Vec<u8>,
    /// Variable table.
    pub vartab: Vec<DifVar>,
}

impl DofFile {
    /// Adds the sections of a DIFO (text, and the tables that are not empty) and its `DIFOHDR`;
    /// returns the header's section index, which ECB and action descriptions link to.
    pub fn add_difo(&mut self, d: &Difo) -> u32 {
        let mut links = vec![self.add(Section::new(SectionData::Dif(d.text.clone())))];
        if !d.inttab.is_empty() {
            links.push(self.add(Section::new(SectionData::IntTab(d.inttab.clone()))));
        }
        if !d.strtab.is_empty() {
            links.push(self.add(Section::new(SectionData::StrTab(d.strtab.clone()))));
        }
        if !d.vartab.is_empty() {
            links.push(self.add(Section::new(SectionData::VarTab(d.vartab.clone()))));
        }
        self.add(Section::new(SectionData::DifoHdr(DifoHdr {
            rtype: d.rtype,
            links,
        })))
    }

    /// Gathers the DIFO whose `DIFOHDR` is section `hdr`.
    pub fn difo(&self, hdr: u32) -> Result<Difo> {
        let bad = |why: &str| DofError::BadLink {
            from: hdr,
            to: hdr,
            why: why.into(),
        };
        let Some(Section {
            data: SectionData::DifoHdr(h),
            ..
        }) = self.section(hdr)
        else {
            return Err(bad("not a DIFOHDR section"));
        };
        let mut d = Difo {
            rtype: h.rtype,
            ..Default::default()
        };
        for &l in &h.links {
            match self.section(l).map(|s| &s.data) {
                Some(SectionData::Dif(w)) => d.text = w.clone(),
                Some(SectionData::IntTab(w)) => d.inttab = w.clone(),
                Some(SectionData::StrTab(w)) => d.strtab = w.clone(),
                Some(SectionData::VarTab(w)) => d.vartab = w.clone(),
                Some(_) => {}
                None => {
                    return Err(DofError::BadLink {
                        from: hdr,
                        to: l,
                        why: "no such section".into(),
                    })
                }
            }
        }
        Ok(d)
    }
}

/// Builds an ELF-style string table (offset 0 is the empty string), sharing repeated strings.
#[derive(Debug, Clone)]
pub struct StrTabBuilder {
    bytes: Vec<u8>,
    index: HashMap<Vec<u8>, u32>,
}

impl Default for StrTabBuilder {
    fn default() -> Self {
        StrTabBuilder {
            bytes: vec![0],
            index: HashMap::new(),
        }
    }
}

impl StrTabBuilder {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }
    /// The offset of `s`, adding it if new.
    pub fn add(&mut self, s: &str) -> u32 {
        self.add_bytes(s.as_bytes())
    }
    /// The offset of the bytes `s` (a D string, not necessarily UTF-8), adding them if new.
    pub fn add_bytes(&mut self, s: &[u8]) -> u32 {
        if s.is_empty() {
            return 0;
        }
        if let Some(&o) = self.index.get(s) {
            return o;
        }
        let o = self.bytes.len() as u32;
        self.bytes.extend_from_slice(s);
        self.bytes.push(0);
        self.index.insert(s.to_vec(), o);
        o
    }
    /// Adds `strs` consecutively (for argument type lists) and returns the offset of the first.
    pub fn add_list(&mut self, strs: &[String]) -> u32 {
        let o = self.bytes.len() as u32;
        for s in strs {
            self.bytes.extend_from_slice(s.as_bytes());
            self.bytes.push(0);
        }
        o
    }
    /// The table's bytes.
    pub fn finish(self) -> Vec<u8> {
        self.bytes
    }
}

/// The string at `off` of a string table.
pub fn str_at(tab: &[u8], off: u64) -> Option<&str> {
    std::str::from_utf8(bytes_at(tab, off)?).ok()
}

/// The bytes of the NUL-terminated string at `off` of a string table, whatever their encoding.
pub fn bytes_at(tab: &[u8], off: u64) -> Option<&[u8]> {
    let start = usize::try_from(off).ok()?;
    let rest = tab.get(start..)?;
    let n = rest.iter().position(|&c| c == 0)?;
    Some(&rest[..n])
}

/// `count` consecutive strings starting at `off`.
pub fn str_list(tab: &[u8], off: u32, count: usize) -> Option<Vec<String>> {
    let mut out = Vec::with_capacity(count);
    let mut o = off as u64;
    for _ in 0..count {
        let s = str_at(tab, o)?;
        o += s.len() as u64 + 1;
        out.push(s.to_string());
    }
    Some(out)
}

/// A USDT probe, as `dtrace -G` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UsdtProbe {
    /// Function containing the probe.
    pub function: String,
    /// Probe name.
    pub name: String,
    /// Function address (usually 0, fixed by a relocation).
    pub addr: u64,
    /// Offsets of the probe sites in the function.
    pub offsets: Vec<u32>,
    /// Offsets of the is-enabled sites.
    pub enabled_offsets: Vec<u32>,
    /// Native argument types.
    pub native_args: Vec<String>,
    /// Translated argument types.
    pub xlated_args: Vec<String>,
    /// For each translated argument, the native argument it comes from.
    pub arg_map: Vec<u8>,
}

/// A USDT provider with its probes and stability attributes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UsdtProvider {
    /// Provider name.
    pub name: String,
    /// Provider, module, function, name and argument stability (`DOF_ATTR` words).
    pub attrs: [u32; 5],
    /// Probes.
    pub probes: Vec<UsdtProbe>,
}

impl DofFile {
    /// Adds a provider with its string table, probes, argument mappings, offsets and is-enabled offsets
    /// (six sections, as DTrace lays them out); returns the `PROVIDER` section index.
    pub fn add_usdt_provider(&mut self, p: &UsdtProvider) -> u32 {
        let mut st = StrTabBuilder::new();
        let name = st.add(&p.name);
        let (mut probes, mut args, mut offs, mut enoffs) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for pr in &p.probes {
            let func = st.add(&pr.function);
            let pname = st.add(&pr.name);
            let nargv = if pr.native_args.is_empty() {
                0
            } else {
                st.add_list(&pr.native_args)
            };
            let xargv = if pr.xlated_args.is_empty() {
                0
            } else {
                st.add_list(&pr.xlated_args)
            };
            probes.push(Probe {
                addr: pr.addr,
                func,
                name: pname,
                nargv,
                xargv,
                argidx: args.len() as u32,
                offidx: offs.len() as u32,
                nargc: pr.native_args.len() as u8,
                xargc: pr.xlated_args.len() as u8,
                noffs: pr.offsets.len() as u16,
                enoffidx: enoffs.len() as u32,
                nenoffs: pr.enabled_offsets.len() as u16,
                pad1: 0,
                pad2: 0,
            });
            args.extend_from_slice(&pr.arg_map);
            offs.extend_from_slice(&pr.offsets);
            enoffs.extend_from_slice(&pr.enabled_offsets);
        }
        let strtab = self.add(Section::new(SectionData::StrTab(st.finish())));
        let probes = self.add(Section::new(SectionData::Probes(probes)));
        let prargs = self.add(Section::new(SectionData::PrArgs(args)));
        let proffs = self.add(Section::new(SectionData::PrOffs(offs)));
        let prenoffs = if self.ident.version >= DOF_VERSION_2 {
            Some(self.add(Section::new(SectionData::PrEnOffs(enoffs))))
        } else {
            None
        };
        self.add(Section::new(SectionData::Provider(Provider {
            strtab,
            probes,
            prargs,
            proffs,
            name,
            provattr: p.attrs[0],
            modattr: p.attrs[1],
            funcattr: p.attrs[2],
            nameattr: p.attrs[3],
            argsattr: p.attrs[4],
            prenoffs,
        })))
    }

    /// The USDT providers of this object, decoded from their sections (the object must be valid).
    pub fn usdt_providers(&self) -> Result<Vec<UsdtProvider>> {
        let mut out = Vec::new();
        for (i, s) in self.sections.iter().enumerate() {
            let SectionData::Provider(p) = &s.data else {
                continue;
            };
            let bad = |why: &str| DofError::BadSection {
                index: i as u32,
                kind: "PROVIDER",
                why: why.into(),
            };
            let tab = match self.section(p.strtab).map(|s| &s.data) {
                Some(SectionData::StrTab(t)) => t.as_slice(),
                _ => return Err(bad("no string table")),
            };
            let get = |idx: u32| self.section(idx).map(|s| &s.data);
            let Some(SectionData::Probes(probes)) = get(p.probes) else {
                return Err(bad("no probes"));
            };
            let args: &[u8] = match get(p.prargs) {
                Some(SectionData::PrArgs(a)) => a,
                _ => &[],
            };
            let offs: &[u32] = match get(p.proffs) {
                Some(SectionData::PrOffs(o)) => o,
                _ => &[],
            };
            let enoffs: &[u32] = match p.prenoffs.and_then(get) {
                Some(SectionData::PrEnOffs(o)) => o,
                _ => &[],
            };
            let slice32 = |v: &[u32], at: u32, n: u16| {
                v.get(at as usize..at as usize + usize::from(n))
                    .map(|s| s.to_vec())
            };
            let mut up = UsdtProvider {
                name: str_at(tab, u64::from(p.name))
                    .ok_or_else(|| bad("bad name"))?
                    .to_string(),
                attrs: [p.provattr, p.modattr, p.funcattr, p.nameattr, p.argsattr],
                probes: Vec::new(),
            };
            for pr in probes {
                up.probes.push(UsdtProbe {
                    function: str_at(tab, u64::from(pr.func))
                        .ok_or_else(|| bad("bad function name"))?
                        .to_string(),
                    name: str_at(tab, u64::from(pr.name))
                        .ok_or_else(|| bad("bad probe name"))?
                        .to_string(),
                    addr: pr.addr,
                    offsets: slice32(offs, pr.offidx, pr.noffs)
                        .ok_or_else(|| bad("bad offsets"))?,
                    enabled_offsets: slice32(enoffs, pr.enoffidx, pr.nenoffs)
                        .ok_or_else(|| bad("bad offsets"))?,
                    native_args: str_list(tab, pr.nargv, usize::from(pr.nargc))
                        .ok_or_else(|| bad("bad args"))?,
                    xlated_args: str_list(tab, pr.xargv, usize::from(pr.xargc))
                        .ok_or_else(|| bad("bad args"))?,
                    arg_map: args
                        .get(pr.argidx as usize..pr.argidx as usize + usize::from(pr.xargc))
                        .ok_or_else(|| bad("bad argument map"))?
                        .to_vec(),
                });
            }
            out.push(up);
        }
        Ok(out)
    }
}
