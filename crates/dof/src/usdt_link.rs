//! USDT probe sites of relocatable objects, as `dtrace -G` processes them.
//!
//! A program built with a `dtrace -h` header calls `__dtrace_<provider>___<probe>(args...)` at each
//! probe site and `__dtraceenabled_<provider>___<probe>()` where it tests whether a probe is enabled.
//! [`process_object`] finds those calls through the object's relocations (x86-64, `R_X86_64_PLT32` or
//! `R_X86_64_PC32` on a 5-byte `call rel32`, or a `jmp rel32` where the compiler made the probe a
//! tail call) and:
//! - turns each probe call into a 5-byte nop (`0f 1f 44 00 00`; a tail `jmp` into `ret` and a 4-byte
//!   nop) and its relocation into `R_X86_64_NONE`, so the site costs nothing until a uprobe is placed
//!   on it; the call's argument registers hold the probe's arguments there;
//! - leaves each is-enabled call as it is: the `dtrace -G` object defines the function it calls
//!   ([`crate::usdt_stubs_elf`]) to return a per-probe 16-bit semaphore from its data, which dtrace
//!   raises through the uprobe `ref_ctr_offset` mechanism while the probe is enabled (uprobes
//!   cannot set a register at the site, as DTrace's is-enabled trap does on other systems).
//!
//! A site an earlier run rewrote (a nop with an `R_X86_64_NONE` relocation against a probe
//! function) is found again as it is, so running `dtrace -G` twice on an object is harmless.
//!
//! Each site is reported with the function containing it and its offset from a global symbol of the
//! same section (the DOF's probe address is relocated against that symbol, since another object
//! cannot name a local one). [`providers_from_sites`] groups the sites into the DOF's provider
//! description with the argument types of the `provider` declarations.

use std::collections::BTreeMap;

use object::elf;
use object::read::elf::{FileHeader as _, Rela as _, SectionHeader as _, Sym as _};
use object::LittleEndian as LE;
use thiserror::Error;

use crate::difo::{UsdtProbe, UsdtProvider};

/// Prefix of probe functions.
pub const PROBE_PREFIX: &str = "__dtrace_";
/// Prefix of is-enabled functions.
pub const ENABLED_PREFIX: &str = "__dtraceenabled_";

/// The 5-byte nop a probe call becomes.
pub const NOP5: [u8; 5] = [0x0f, 0x1f, 0x44, 0x00, 0x00];
/// What a probe made a tail call (`jmp`) becomes: `ret` and a 4-byte nop.
pub const RET_NOP4: [u8; 5] = [0xc3, 0x0f, 0x1f, 0x40, 0x00];

/// The stability of a declared provider's parts (DTrace's `_dtrace_prvdesc`: Unstable/Unstable/Common).
pub const USDT_DEFAULT_ATTR: u32 = (4 << 24) | (4 << 16) | (5 << 8);

/// What is wrong with an object given to `dtrace -G`.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum UsdtLinkError {
    /// Not an ELF file, or not one this can process.
    #[error("not a relocatable x86-64 ELF object: {0}")]
    NotObject(String),
    /// The ELF structures are malformed.
    #[error("malformed ELF object: {0}")]
    Malformed(String),
    /// A relocation against a probe function is not on a call this can rewrite.
    #[error("bad probe site for {symbol} at {section}+{offset:#x}: {why}")]
    BadSite {
        /// The probe or is-enabled symbol.
        symbol: String,
        /// The section of the site.
        section: String,
        /// The relocation's offset in the section.
        offset: u64,
        /// What is wrong.
        why: String,
    },
    /// A probe symbol's name is not `__dtrace_<provider>___<probe>`.
    #[error("malformed probe symbol name {0}")]
    BadName(String),
    /// A site whose section has no global symbol.
    #[error(
        "not yet supported: probe site of {symbol} in {function}: no global symbol in its section (make the function non-static, or compile without -ffunction-sections)"
    )]
    NoBase {
        /// The probe symbol.
        symbol: String,
        /// The containing function, or the section.
        function: String,
    },
    /// A site for a probe that no `provider` declaration has.
    #[error("probe {provider}:{probe} is not declared (function {function})")]
    Undeclared {
        /// Provider.
        provider: String,
        /// Probe (D name).
        probe: String,
        /// Function of the site.
        function: String,
    },
    /// Too many sites for the DOF's 16-bit counts.
    #[error("too many sites for probe {0}")]
    TooMany(String),
}

/// One probe or is-enabled site found in an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSite {
    /// Provider name.
    pub provider: String,
    /// Probe name as D writes it (`query-start` for `query__start`).
    pub probe: String,
    /// An is-enabled site (else a probe site).
    pub enabled: bool,
    /// The function containing the site (the base symbol when none is found).
    pub function: String,
    /// A global symbol of the site's section.
    pub base: String,
    /// The function's address less `base`'s.
    pub addend: i64,
    /// The site's offset in the function.
    pub offset: u32,
}

/// An object after processing: its rewritten bytes and its sites.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessedObject {
    /// The object with its probe calls rewritten (equal to the input when it has no sites).
    pub bytes: Vec<u8>,
    /// Its sites, in section and offset order.
    pub sites: Vec<ProbeSite>,
}

/// Splits `__dtrace_<provider>___<probe>` (or the is-enabled form) into provider, D probe name and
/// whether it is an is-enabled symbol; `None` for other symbols, an error for a malformed one.
pub fn parse_probe_symbol(name: &str) -> Option<Result<(String, String, bool), UsdtLinkError>> {
    let (rest, enabled) = if let Some(r) = name.strip_prefix(ENABLED_PREFIX) {
        (r, true)
    } else {
        (name.strip_prefix(PROBE_PREFIX)?, false)
    };
    let Some((prov, probe)) = rest.split_once("___") else {
        return Some(Err(UsdtLinkError::BadName(name.to_string())));
    };
    if prov.is_empty() || probe.is_empty() {
        return Some(Err(UsdtLinkError::BadName(name.to_string())));
    }
    Some(Ok((prov.to_string(), probe.replace("__", "-"), enabled)))
}

fn malformed(e: object::Error) -> UsdtLinkError {
    UsdtLinkError::Malformed(e.to_string())
}

/// A symbol of the object's symbol table, as the site search needs it.
struct Sym {
    name: String,
    section: usize,
    value: u64,
    size: u64,
    func: bool,
    global: bool,
}

/// Finds and rewrites the USDT sites of relocatable x86-64 object `data`.
pub fn process_object(data: &[u8]) -> Result<ProcessedObject, UsdtLinkError> {
    let hdr = elf::FileHeader64::<LE>::parse(data)
        .map_err(|e| UsdtLinkError::NotObject(e.to_string()))?;
    let e = hdr
        .endian()
        .map_err(|e| UsdtLinkError::NotObject(e.to_string()))?;
    if hdr.e_type(e) != elf::ET_REL {
        return Err(UsdtLinkError::NotObject("not a relocatable object".into()));
    }
    if hdr.e_machine(e) != elf::EM_X86_64 {
        return Err(UsdtLinkError::NotObject(format!(
            "machine {} is not x86-64",
            hdr.e_machine(e)
        )));
    }
    let sections = hdr.sections(e, data).map_err(malformed)?;
    let symtab = sections
        .symbols(e, data, elf::SHT_SYMTAB)
        .map_err(malformed)?;
    let mut syms = Vec::with_capacity(symtab.len());
    for s in symtab.iter() {
        let name = symtab.symbol_name(e, s).map_err(malformed)?;
        syms.push(Sym {
            name: String::from_utf8_lossy(name).into_owned(),
            section: usize::from(s.st_shndx(e)),
            value: s.st_value(e),
            size: s.st_size(e),
            func: s.st_type() == elf::STT_FUNC,
            global: s.st_bind() != elf::STB_LOCAL && s.st_shndx(e) != elf::SHN_UNDEF,
        });
    }
    let mut out = data.to_vec();
    let mut sites = Vec::new();
    for (ri, rs) in sections.iter().enumerate() {
        if rs.sh_type(e) != elf::SHT_RELA || rs.sh_link(e) as usize != symtab.section().0 {
            continue;
        }
        let target = rs.sh_info(e) as usize;
        let ts = sections
            .section(object::SectionIndex(target))
            .map_err(malformed)?;
        if ts.sh_flags(e) & u64::from(elf::SHF_EXECINSTR) == 0 {
            continue;
        }
        let tname =
            String::from_utf8_lossy(sections.section_name(e, ts).map_err(malformed)?).into_owned();
        let relas: &[elf::Rela64<LE>] = rs.data_as_array(e, data).map_err(malformed)?;
        let toff = ts.sh_offset(e);
        let tsize = if ts.sh_type(e) == elf::SHT_NOBITS {
            0
        } else {
            ts.sh_size(e)
        };
        for (i, r) in relas.iter().enumerate() {
            let symi = r.r_sym(e, false) as usize;
            let Some(sym) = syms.get(symi) else {
                return Err(UsdtLinkError::Malformed(format!(
                    "relocation {i} of section {ri}: symbol {symi} out of range"
                )));
            };
            let Some(parsed) = parse_probe_symbol(&sym.name) else {
                continue;
            };
            let (provider, probe, enabled) = parsed?;
            let rtype = r.r_type(e, false);
            // A probe site rewritten by an earlier `dtrace -G` is still a site.
            let done = rtype == elf::R_X86_64_NONE;
            if done && enabled {
                continue;
            }
            let roff = r.r_offset(e);
            let bad = |why: &str| UsdtLinkError::BadSite {
                symbol: sym.name.clone(),
                section: tname.clone(),
                offset: roff,
                why: why.to_string(),
            };
            if !done && rtype != elf::R_X86_64_PLT32 && rtype != elf::R_X86_64_PC32 {
                return Err(bad(&format!(
                    "relocation type {rtype} (compile without -fno-plt)"
                )));
            }
            if r.r_addend(e) != -4 {
                return Err(bad("addend is not -4"));
            }
            let site = roff
                .checked_sub(1)
                .filter(|s| s.checked_add(5).is_some_and(|end| end <= tsize))
                .ok_or_else(|| bad("outside its section"))?;
            let at = toff
                .checked_add(site)
                .and_then(|a| usize::try_from(a).ok())
                .filter(|&a| a.checked_add(5).is_some_and(|end| end <= data.len()))
                .ok_or_else(|| bad("outside the file"))?;
            let op = data[at];
            if done {
                if data[at..at + 5] != NOP5 && data[at..at + 5] != RET_NOP4 {
                    return Err(bad("a rewritten site is not a nop"));
                }
            } else if op != 0xe8 && (op != 0xe9 || enabled) {
                return Err(bad(&format!("instruction {op:#04x} is not a call")));
            }
            if !enabled && !done {
                out[at..at + 5].copy_from_slice(if op == 0xe8 { &NOP5 } else { &RET_NOP4 });
                // r_info's type (its low 32 bits, little-endian) becomes R_X86_64_NONE.
                let info = usize::try_from(rs.sh_offset(e))
                    .ok()
                    .and_then(|o| o.checked_add(i * std::mem::size_of::<elf::Rela64<LE>>() + 8))
                    .filter(|&o| o + 4 <= out.len())
                    .ok_or_else(|| bad("relocation outside the file"))?;
                out[info..info + 4].copy_from_slice(&elf::R_X86_64_NONE.to_le_bytes());
            }
            let function = syms
                .iter()
                .filter(|s| s.func && s.section == target)
                .find(|s| s.value <= site && site < s.value.saturating_add(s.size));
            // The nearest global symbol at or before the site, else any of the section.
            let globals = || syms.iter().filter(|s| s.global && s.section == target);
            let base = globals()
                .filter(|s| s.value <= site)
                .max_by_key(|s| s.value)
                .or_else(|| globals().min_by_key(|s| s.value))
                .ok_or_else(|| UsdtLinkError::NoBase {
                    symbol: sym.name.clone(),
                    function: function.map_or_else(|| tname.clone(), |f| f.name.clone()),
                })?;
            let start = function.map_or(base.value, |f| f.value);
            let offset =
                u32::try_from(site - start).map_err(|_| bad("too far from its function"))?;
            let addend = i64::try_from(start)
                .ok()
                .zip(i64::try_from(base.value).ok())
                .map(|(a, b)| a - b)
                .ok_or_else(|| bad("symbol values out of range"))?;
            sites.push(ProbeSite {
                provider,
                probe,
                enabled,
                function: function.map_or_else(|| base.name.clone(), |f| f.name.clone()),
                base: base.name.clone(),
                addend,
                offset,
            });
        }
    }
    Ok(ProcessedObject { bytes: out, sites })
}

/// A DOF provider and, for each of its probes, the symbol and addend its address is relocated with.
pub type LinkedProvider = (UsdtProvider, Vec<(String, i64)>);

/// The DOF providers for `sites` (of every object) under `decls`: one DOF probe per probe and
/// function, with the declaration's argument types. Every site's probe must be declared; a declared
/// provider without sites has no DOF provider. Each probe's `addr` is 0, to be relocated against
/// the returned base symbol and addend of the same index.
pub fn providers_from_sites(
    decls: &[dtrace_dif::program::ProviderDecl],
    sites: &[ProbeSite],
) -> Result<Vec<LinkedProvider>, UsdtLinkError> {
    // provider -> (probe, function, base, addend) -> (offsets, enabled offsets)
    type Key = (String, String, String, i64);
    type Offsets = BTreeMap<Key, (Vec<u32>, Vec<u32>)>;
    let mut by: BTreeMap<String, Offsets> = BTreeMap::new();
    for s in sites {
        let decl = decls
            .iter()
            .find(|d| d.name == s.provider)
            .and_then(|d| d.probes.iter().find(|p| p.name == s.probe));
        if decl.is_none() {
            return Err(UsdtLinkError::Undeclared {
                provider: s.provider.clone(),
                probe: s.probe.clone(),
                function: s.function.clone(),
            });
        }
        let e = by
            .entry(s.provider.clone())
            .or_default()
            .entry((
                s.probe.clone(),
                s.function.clone(),
                s.base.clone(),
                s.addend,
            ))
            .or_default();
        if s.enabled { &mut e.1 } else { &mut e.0 }.push(s.offset);
    }
    let mut out = Vec::new();
    for d in decls {
        let Some(probes) = by.get(&d.name) else {
            continue;
        };
        let mut p = UsdtProvider {
            name: d.name.clone(),
            attrs: d
                .attrs
                .map(|a| a.map_or(USDT_DEFAULT_ATTR, |[n, dt, c]| crate::dof_attr(n, dt, c))),
            probes: Vec::new(),
        };
        let mut bases = Vec::new();
        for ((probe, function, base, addend), (offs, enoffs)) in probes {
            if offs.len() > usize::from(u16::MAX) || enoffs.len() > usize::from(u16::MAX) {
                return Err(UsdtLinkError::TooMany(probe.clone()));
            }
            let Some(pd) = d.probes.iter().find(|q| &q.name == probe) else {
                continue;
            };
            p.probes.push(UsdtProbe {
                function: function.clone(),
                name: probe.clone(),
                addr: 0,
                offsets: offs.clone(),
                enabled_offsets: enoffs.clone(),
                native_args: pd.native.clone(),
                xlated_args: pd.xlated.clone(),
                arg_map: pd.mapping.clone(),
            });
            bases.push((base.clone(), *addend));
        }
        out.push((p, bases));
    }
    Ok(out)
}

/// Adds `providers` (from [`providers_from_sites`]) to program DOF `f` (as version 2, which has
/// is-enabled offsets) and encodes it; returns the bytes and the ELF relocations that fill each
/// probe's address with its base symbol's.
pub fn encode_with_providers(
    mut f: crate::DofFile,
    providers: &[LinkedProvider],
) -> crate::Result<(Vec<u8>, Vec<crate::DofElfReloc>)> {
    if !providers.is_empty() && f.ident.version < crate::DOF_VERSION_2 {
        f.ident.version = crate::DOF_VERSION_2;
    }
    let mut probe_secs = Vec::new();
    for (p, _) in providers {
        let pv = f.add_usdt_provider(p);
        if let Some(crate::Section {
            data: crate::SectionData::Provider(d),
            ..
        }) = f.section(pv)
        {
            probe_secs.push(d.probes);
        }
    }
    let bytes = crate::write_dof(&f)?;
    let (ident, h) = crate::read_header(&bytes)?;
    let heads = crate::read_section_headers(&bytes, &ident, &h)?;
    let mut relocs = Vec::new();
    for ((_, bases), sec) in providers.iter().zip(probe_secs) {
        let raw = heads.get(sec as usize).ok_or(crate::DofError::BadLink {
            from: sec,
            to: sec,
            why: "no such section".into(),
        })?;
        for (i, (base, addend)) in bases.iter().enumerate() {
            relocs.push(crate::DofElfReloc {
                offset: raw.offset + i as u64 * u64::from(raw.entsize),
                symbol: base.clone(),
                addend: *addend,
            });
        }
    }
    Ok((bytes, relocs))
}

/// The `<provider>___<probe>` names (the probe as its C functions name it) of `providers`' probes,
/// once each, for [`crate::dof_to_elf_with_stubs`].
pub fn stub_names(decls: &[dtrace_dif::program::ProviderDecl]) -> Vec<String> {
    let mut out = Vec::new();
    for d in decls {
        for p in &d.probes {
            let n = format!("{}___{}", d.name, p.name.replace('-', "__"));
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}
