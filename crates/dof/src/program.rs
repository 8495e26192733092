//! A compiled D program ([`dtrace_dif::Program`]) as DOF, both ways: the producer side of libdtrace's
//! `dtrace_dof_create` ([`program_to_dof`]) and the loader side of DTrace's kernel
//! (`dtrace_dof_slurp`/`dtrace_dof_ecbdesc`/`dtrace_dof_actdesc`/`dtrace_dof_options`:
//! [`program_from_dof`]), plus the conversions between the `dif` crate's [`DifObject`] and this
//! crate's plain [`Difo`].
//!
//! Layout, as DTrace writes it (DOF version 1, as for any program without providers): section 0 is the program's string table (probe description fields and
//! format strings); then, for each ECB in order, its `PROBEDESC`, the predicate's DIFO sections, each
//! action's DIFO sections, one `ACTDESC` array (when there are actions) and the `ECBDESC`; then one
//! `OPTDESC` array for the options set by pragmas (when there are any); then, unloadable, the
//! `COMMENTS` and `UTSNAME` sections when the caller gives them. A DIFO is `DIF`, `INTTAB`, `STRTAB`,
//! `VARTAB` (each only when not empty) and its `DIFOHDR`. A printf-like action (`printf`, `system`,
//! `freopen`, and `printa` with a format) links the string table and its `arg` is the format's
//! offset there; every other action carries its `arg` as is.
//!
//! What DOF does not carry, so a program read back differs from the one written only in these ways:
//! - aggregation names: DTrace keeps them in the consumer (an action's `uarg` is a pointer to the
//!   compiler's statement there); the loader lists each aggregation id found in an aggregating
//!   action's `uarg`, with an empty name;
//! - option spellings: options go as DTrace's `DTRACEOPT_*` numbers with DTrace's values (sizes in
//!   bytes, rates in nanoseconds, policies as numbers, a flag as 0), so the loader gives them back in
//!   canonical form ([`canonical_options`] says which); compile-time options (`defaultargs`,
//!   `strip`, ...) have already acted and are not written, as in DTrace; `zone` (a zone id in
//!   DTrace) cannot be written.
//! - `print()` type descriptions (`Program::print_types`; DTrace writes a CTF type reference in the
//!   string table, which has no counterpart without CTF in the object): a `print()` action keeps its
//!   `arg`, and the loaded program has no print types, so the consumer prints such values as
//!   `trace()` does (DTrace's fallback when it cannot resolve the type);
//! - unused format strings (the compiler makes none): formats are rebuilt from the actions in order;
//! - the `arg` of a `printa` without a format (the kernel ignores it): it loads as the compiler's
//!   `NO_FORMAT` (`u64::MAX`).
//!
//! DTrace also marks the extra-argument actions of a printf statement with the format string; the
//! kernel ignores that, and so do we (their `arg` stays as the compiler set it).

use thiserror::Error;

use dtrace_dif::object::{DifObject, DifType as DifTy, VarEntry};
use dtrace_dif::optval::{parse_c_unsigned, parse_rate, parse_size};
use dtrace_dif::program::{ActionDesc, ActionKind, AggregationDesc, EcbDesc, ProbeDesc, Program};

use crate::consts::*;
use crate::difo::{bytes_at, Difo, StrTabBuilder};
use crate::error::DofError;
use crate::model::{self, *};

/// Why a program cannot be written as DOF, or a DOF object cannot be loaded as a program.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProgramDofError {
    /// An option set by a pragma has a value DTrace would refuse.
    #[error("option '{name}': invalid value '{value}'")]
    BadOptionValue {
        /// Option name.
        name: String,
        /// Its value as written.
        value: String,
    },
    /// A printf-like action names a format the program does not have.
    #[error("action names format {0}, which the program does not have")]
    BadFormat(u64),
    /// An option with no DOF form.
    #[error("not yet supported: option '{0}' in DOF")]
    OptionNotCarried(String),
    /// The DOF object's structure is wrong (from the reader or a link to the wrong kind).
    #[error("{0}")]
    Dof(#[from] DofError),
    /// A section the loader needs is not what it should be.
    #[error("section {section}: {why}")]
    BadSection {
        /// Section index.
        section: u32,
        /// What is wrong.
        why: String,
    },
    /// A DIF object fails the load-time verifier (DTrace's `dtrace_difo_validate`).
    #[error("section {section}: {source}")]
    BadDifo {
        /// The object's `DIFOHDR` section.
        section: u32,
        /// What the verifier found.
        source: dtrace_dif::verify::VerifyError,
    },
    /// An action kind DTrace does not define.
    #[error("section {section}: unknown action kind {kind:#x}")]
    UnknownAction {
        /// The `ACTDESC` section.
        section: u32,
        /// The kind.
        kind: u32,
    },
    /// An option number DTrace does not define (or one the loader rejects, like a string option).
    #[error("section {section}: invalid option {option}: {why}")]
    BadOption {
        /// The `OPTDESC` section.
        section: u32,
        /// The option number.
        option: u32,
        /// What is wrong.
        why: &'static str,
    },
}

/// Result of this module.
pub type Result<T> = std::result::Result<T, ProgramDofError>;

fn diftype_to_dof(t: &DifTy) -> model::DifType {
    model::DifType {
        kind: t.kind,
        ckind: t.ckind,
        flags: t.flags,
        pad: 0,
        size: t.size,
    }
}

fn diftype_from_dof(t: &model::DifType) -> DifTy {
    DifTy {
        kind: t.kind,
        ckind: t.ckind,
        flags: t.flags,
        size: t.size,
    }
}

impl From<&DifObject> for Difo {
    fn from(o: &DifObject) -> Difo {
        Difo {
            rtype: diftype_to_dof(&o.rtype),
            text: o.text.clone(),
            inttab: o.inttab.clone(),
            strtab: o.strtab.clone(),
            vartab: o
                .vartab
                .iter()
                .map(|v| DifVar {
                    name: v.name,
                    id: v.id,
                    kind: v.kind,
                    scope: v.scope,
                    flags: v.flags,
                    ty: diftype_to_dof(&v.ty),
                })
                .collect(),
        }
    }
}

impl From<&Difo> for DifObject {
    fn from(d: &Difo) -> DifObject {
        DifObject {
            text: d.text.clone(),
            inttab: d.inttab.clone(),
            strtab: d.strtab.clone(),
            vartab: d
                .vartab
                .iter()
                .map(|v| VarEntry {
                    name: v.name,
                    id: v.id,
                    kind: v.kind,
                    scope: v.scope,
                    flags: v.flags,
                    ty: diftype_from_dof(&v.ty),
                })
                .collect(),
            rtype: diftype_from_dof(&d.rtype),
        }
    }
}

/// Every action kind, to decode `dofa_kind`.
const ACTION_KINDS: &[ActionKind] = &[
    ActionKind::None,
    ActionKind::DifExpr,
    ActionKind::Exit,
    ActionKind::Printf,
    ActionKind::Printa,
    ActionKind::LibAct,
    ActionKind::Tracemem,
    ActionKind::TracememDynsize,
    ActionKind::Ustack,
    ActionKind::Jstack,
    ActionKind::Usym,
    ActionKind::Umod,
    ActionKind::Uaddr,
    ActionKind::Stop,
    ActionKind::Raise,
    ActionKind::System,
    ActionKind::Freopen,
    ActionKind::Stack,
    ActionKind::Sym,
    ActionKind::Mod,
    ActionKind::Breakpoint,
    ActionKind::Panic,
    ActionKind::Chill,
    ActionKind::Speculate,
    ActionKind::Commit,
    ActionKind::Discard,
    ActionKind::AggCount,
    ActionKind::AggMin,
    ActionKind::AggMax,
    ActionKind::AggAvg,
    ActionKind::AggSum,
    ActionKind::AggStddev,
    ActionKind::AggQuantize,
    ActionKind::AggLquantize,
    ActionKind::AggLlquantize,
];

fn action_kind(n: u32) -> Option<ActionKind> {
    ACTION_KINDS.iter().copied().find(|k| *k as u32 == n)
}

/// `printa()` without a format: its `arg` (the compiler's `NO_FORMAT`).
const NO_FORMAT: u64 = u64::MAX;

/// Whether an action's `arg` names a format string (DTrace's `DTRACEACT_ISPRINTFLIKE`, with `printa`
/// only when it has a format).
fn has_format(kind: ActionKind, arg: u64) -> bool {
    match kind {
        ActionKind::Printf | ActionKind::System | ActionKind::Freopen => true,
        ActionKind::Printa => arg != NO_FORMAT,
        _ => false,
    }
}

/// How DTrace parses an option's value (`dt_opt_size`, `dt_opt_rate`, `dt_opt_runtime`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OptKind {
    /// A number with an optional k/m/g/t suffix (bytes).
    Size,
    /// A time with an optional unit suffix, or a frequency in hz (nanoseconds).
    Rate,
    /// A plain number.
    Number,
    /// A flag: no value (0), or a number.
    Flag,
    /// `ring`, `fill`, `switch`.
    BufPolicy,
    /// `auto`, `manual`.
    BufResize,
    /// A zone name (a zone id in DTrace): not carried.
    Zone,
}

/// DTrace's run-time options with their `DTRACEOPT_*` numbers.
const OPTIONS: &[(&str, u32, OptKind)] = &[
    ("bufsize", 0, OptKind::Size),
    ("bufpolicy", 1, OptKind::BufPolicy),
    ("dynvarsize", 2, OptKind::Size),
    ("aggsize", 3, OptKind::Size),
    ("specsize", 4, OptKind::Size),
    ("nspec", 5, OptKind::Number),
    ("strsize", 6, OptKind::Size),
    ("cleanrate", 7, OptKind::Rate),
    ("cpu", 8, OptKind::Number),
    ("bufresize", 9, OptKind::BufResize),
    ("grabanon", 10, OptKind::Flag),
    ("flowindent", 11, OptKind::Flag),
    ("quiet", 12, OptKind::Flag),
    ("stackframes", 13, OptKind::Number),
    ("ustackframes", 14, OptKind::Number),
    ("aggrate", 15, OptKind::Rate),
    ("switchrate", 16, OptKind::Rate),
    ("statusrate", 17, OptKind::Rate),
    ("destructive", 18, OptKind::Flag),
    ("stackindent", 19, OptKind::Number),
    ("rawbytes", 20, OptKind::Flag),
    ("jstackframes", 21, OptKind::Number),
    ("jstackstrsize", 22, OptKind::Number),
    ("aggsortkey", 23, OptKind::Flag),
    ("aggsortrev", 24, OptKind::Flag),
    ("aggsortpos", 25, OptKind::Number),
    ("aggsortkeypos", 26, OptKind::Number),
    ("temporal", 27, OptKind::Flag),
    ("agghist", 28, OptKind::Flag),
    ("aggpack", 29, OptKind::Flag),
    ("aggzoom", 30, OptKind::Flag),
    ("zone", 31, OptKind::Zone),
];

/// `DTRACEOPT_MAX`: option numbers at or above it are not options.
const DTRACEOPT_MAX: u32 = 32;

/// The `DTRACEOPT_*` number and value DTrace stores for option `name` set to `value`; `Ok(None)` for
/// an option that is not a run-time option (a compile-time one, which has no DOF form).
pub fn dof_option(name: &str, value: Option<&str>) -> Result<Option<(u32, u64)>> {
    let Some(&(_, id, kind)) = OPTIONS.iter().find(|o| o.0 == name) else {
        return Ok(None);
    };
    let bad = || ProgramDofError::BadOptionValue {
        name: name.to_string(),
        value: value.unwrap_or("").to_string(),
    };
    let v = match (kind, value) {
        (OptKind::Zone, _) => return Err(ProgramDofError::OptionNotCarried(name.to_string())),
        (OptKind::Flag | OptKind::Number | OptKind::Size | OptKind::Rate, None) => 0,
        (OptKind::Flag | OptKind::Number, Some(s)) => match parse_c_unsigned(s) {
            Some(v) if v <= i64::MAX as u64 => v,
            _ => return Err(bad()),
        },
        (OptKind::Size, Some(s)) => parse_size(s).ok_or_else(bad)?,
        (OptKind::Rate, Some(s)) => parse_rate(s).ok_or_else(bad)?,
        (OptKind::BufPolicy, Some("ring")) => 0,
        (OptKind::BufPolicy, Some("fill")) => 1,
        (OptKind::BufPolicy, Some("switch")) => 2,
        (OptKind::BufResize, Some("auto")) => 0,
        (OptKind::BufResize, Some("manual")) => 1,
        (OptKind::BufPolicy | OptKind::BufResize, _) => return Err(bad()),
    };
    Ok(Some((id, v)))
}

/// The name and value text of option number `id` with DOF value `v`, as the loader gives it back.
fn option_text(id: u32, v: u64) -> Option<(String, Option<String>)> {
    let &(name, _, kind) = OPTIONS.iter().find(|o| o.1 == id)?;
    if v > i64::MAX as u64 {
        return None; // a negative dtrace_optval_t
    }
    let value = match kind {
        OptKind::Flag if v == 0 => None,
        OptKind::BufPolicy => Some(["ring", "fill", "switch"].get(v as usize)?.to_string()),
        OptKind::BufResize => Some(["auto", "manual"].get(v as usize)?.to_string()),
        OptKind::Zone => return None,
        _ => Some(v.to_string()),
    };
    Some((name.to_string(), value))
}

/// Options as a program loaded from DOF holds them: run-time options only, each in DTrace's canonical
/// value (sizes in bytes, rates in nanoseconds, a flag without value), in the order given.
pub fn canonical_options(
    opts: &[(String, Option<String>)],
) -> Result<Vec<(String, Option<String>)>> {
    let mut out = Vec::new();
    for (name, value) in opts {
        if let Some((id, v)) = dof_option(name, value.as_deref())? {
            out.extend(option_text(id, v));
        }
    }
    Ok(out)
}

/// What to put in a program's DOF beside the program: the unloadable sections DTrace adds unless
/// told to strip them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgramDofExtras {
    /// `DOF_SECT_COMMENTS`: the compiler's version string.
    pub comments: Option<String>,
    /// `DOF_SECT_UTSNAME`: the system the program was compiled on.
    pub utsname: Option<Utsname>,
}

fn sect(data: SectionData, align: u32, entsize: u32) -> Section {
    let mut s = Section::new(data);
    s.align = align;
    s.entsize = entsize;
    s
}

/// Builds the DOF of a compiled program, laid out as `dtrace_dof_create` lays it out (see the module
/// documentation).
pub fn program_to_dof(p: &Program, extras: &ProgramDofExtras) -> Result<DofFile> {
    let mut f = DofFile::new();
    // DTrace writes a program without providers as DOF version 1 (`dp_dofversion`).
    f.ident.version = DOF_VERSION_1;
    let strsec = f.add(sect(SectionData::StrTab(Vec::new()), 1, 0));
    let mut st = StrTabBuilder::new();
    for ecb in &p.ecbs {
        let pd = &ecb.probe;
        let probes = f.add(sect(
            SectionData::ProbeDesc(model::ProbeDesc {
                strtab: strsec,
                provider: st.add(pd.provider.as_str()),
                module: st.add(pd.module.as_str()),
                function: st.add(pd.function.as_str()),
                name: st.add(pd.name.as_str()),
                id: 0,
            }),
            4,
            size::PROBEDESC as u32,
        ));
        let pred = match &ecb.predicate {
            Some(o) => f.add_difo(&Difo::from(o)),
            None => DOF_SECIDX_NONE,
        };
        let mut acts = Vec::new();
        for a in &ecb.actions {
            let difo = match &a.difo {
                Some(o) => f.add_difo(&Difo::from(o)),
                None => DOF_SECIDX_NONE,
            };
            let (strtab, arg) = if has_format(a.kind, a.arg) {
                let fmt = usize::try_from(a.arg)
                    .ok()
                    .and_then(|i| p.formats.get(i))
                    .ok_or(ProgramDofError::BadFormat(a.arg))?;
                (strsec, u64::from(st.add_bytes(fmt)))
            } else {
                (DOF_SECIDX_NONE, a.arg)
            };
            acts.push(ActDesc {
                difo,
                strtab,
                kind: a.kind as u32,
                ntuple: a.ntuple,
                arg,
                uarg: a.uarg,
            });
        }
        let actions = if acts.is_empty() {
            DOF_SECIDX_NONE
        } else {
            f.add(sect(SectionData::ActDesc(acts), 8, size::ACTDESC as u32))
        };
        f.add(sect(
            SectionData::EcbDesc(model::EcbDesc {
                probes,
                pred,
                actions,
                pad: 0,
                uarg: 0,
            }),
            8,
            0,
        ));
    }
    let mut opts = Vec::new();
    for (name, value) in &p.options {
        if let Some((option, value)) = dof_option(name, value.as_deref())? {
            opts.push(OptDesc {
                option,
                strtab: DOF_SECIDX_NONE,
                value,
            });
        }
    }
    if !opts.is_empty() {
        f.add(sect(SectionData::OptDesc(opts), 8, size::OPTDESC as u32));
    }
    if let Some(c) = &extras.comments {
        let mut b = c.as_bytes().to_vec();
        b.push(0);
        f.add(sect(SectionData::Comments(b), 1, 0));
    }
    if let Some(u) = &extras.utsname {
        f.add(sect(SectionData::Utsname(u.clone()), 1, 0));
    }
    f.sections[strsec as usize].data = SectionData::StrTab(st.finish());
    Ok(f)
}

/// The DOF bytes of a compiled program: [`program_to_dof`], written in DTrace's layout (the string
/// table's data after the other loadable sections', see [`crate::write_dof_dtrace_layout`]).
pub fn program_to_dof_bytes(p: &Program, extras: &ProgramDofExtras) -> Result<Vec<u8>> {
    Ok(crate::write_dof_dtrace_layout(
        &program_to_dof(p, extras)?,
        PROGRAM_STRTAB,
    )?)
}

/// The section index of a program's string table.
pub const PROGRAM_STRTAB: u32 = 0;

fn string(f: &DofFile, section: u32, strtab: u32, off: u64) -> Result<String> {
    let b = bytes(f, section, strtab, off)?;
    std::str::from_utf8(b)
        .map(str::to_string)
        .map_err(|_| ProgramDofError::BadSection {
            section,
            why: format!("string at offset {off} in section {strtab} is not UTF-8"),
        })
}

/// The bytes of the string at `off` of string table `strtab` (a format string: any bytes).
fn bytes(f: &DofFile, section: u32, strtab: u32, off: u64) -> Result<&[u8]> {
    let bad = |why: String| ProgramDofError::BadSection { section, why };
    let Some(Section {
        data: SectionData::StrTab(tab),
        ..
    }) = f.section(strtab)
    else {
        return Err(bad(format!("section {strtab} is not a string table")));
    };
    bytes_at(tab, off).ok_or_else(|| bad(format!("bad string offset {off} in section {strtab}")))
}

/// The DIF object whose `DIFOHDR` is section `hdr`, verified as DTrace's kernel verifies it on load.
fn load_difo(f: &DofFile, hdr: u32) -> Result<DifObject> {
    let o = DifObject::from(&f.difo(hdr)?);
    dtrace_dif::verify::verify(&o).map_err(|source| ProgramDofError::BadDifo {
        section: hdr,
        source,
    })?;
    Ok(o)
}

/// Loads the program a DOF object describes, as DTrace's kernel does: every loadable `ECBDESC` in
/// section order with its probe description, predicate and actions, and every `OPTDESC`. The object
/// is validated first ([`crate::validate`]) and every DIF object passes the DIF verifier; see the module documentation for what comes back
/// differently from what was written.
pub fn program_from_dof(f: &DofFile) -> Result<Program> {
    crate::validate(f)?;
    let mut p = Program::default();
    let mut aggs: Vec<u32> = Vec::new();
    for (i, s) in f.sections.iter().enumerate() {
        let i = i as u32;
        if !s.is_loadable() {
            continue;
        }
        match &s.data {
            SectionData::EcbDesc(e) => {
                let bad = |why: String| ProgramDofError::BadSection { section: i, why };
                let Some(SectionData::ProbeDesc(pd)) = f.section(e.probes).map(|s| &s.data) else {
                    return Err(bad("probe description link is not a PROBEDESC".into()));
                };
                let field = |o: u32| string(f, e.probes, pd.strtab, u64::from(o));
                let probe = ProbeDesc {
                    provider: field(pd.provider)?,
                    module: field(pd.module)?,
                    function: field(pd.function)?,
                    name: field(pd.name)?,
                };
                let predicate = if e.pred == DOF_SECIDX_NONE {
                    None
                } else {
                    Some(load_difo(f, e.pred)?)
                };
                let mut actions = Vec::new();
                if e.actions != DOF_SECIDX_NONE {
                    let Some(SectionData::ActDesc(list)) = f.section(e.actions).map(|s| &s.data)
                    else {
                        return Err(bad("action link is not an ACTDESC".into()));
                    };
                    for a in list {
                        let kind = action_kind(a.kind).ok_or(ProgramDofError::UnknownAction {
                            section: e.actions,
                            kind: a.kind,
                        })?;
                        if a.strtab == DOF_SECIDX_NONE
                            && has_format(kind, 0)
                            && kind != ActionKind::Printa
                        {
                            return Err(ProgramDofError::BadSection {
                                section: e.actions,
                                why: format!("{kind:?} action without a format string"),
                            });
                        }
                        let arg = if kind == ActionKind::Printa && a.strtab == DOF_SECIDX_NONE {
                            NO_FORMAT // a printa without a format: its arg means nothing more
                        } else if a.strtab != DOF_SECIDX_NONE && has_format(kind, 0) {
                            let fmt = bytes(f, e.actions, a.strtab, a.arg)?.to_vec();
                            match p.formats.iter().position(|x| *x == fmt) {
                                Some(k) => k as u64,
                                None => {
                                    p.formats.push(fmt);
                                    p.formats.len() as u64 - 1
                                }
                            }
                        } else {
                            a.arg
                        };
                        if kind.is_aggregation() {
                            let id = u32::try_from(a.uarg).map_err(|_| {
                                bad(format!("aggregation id {} out of range", a.uarg))
                            })?;
                            if !aggs.contains(&id) {
                                aggs.push(id);
                            }
                        }
                        actions.push(ActionDesc {
                            kind,
                            difo: if a.difo == DOF_SECIDX_NONE {
                                None
                            } else {
                                Some(load_difo(f, a.difo)?)
                            },
                            arg,
                            uarg: a.uarg,
                            ntuple: a.ntuple,
                        });
                    }
                }
                p.ecbs.push(EcbDesc {
                    probe,
                    predicate,
                    actions,
                    line: 0,
                });
            }
            SectionData::OptDesc(list) => {
                for o in list {
                    let bad = |why| ProgramDofError::BadOption {
                        section: i,
                        option: o.option,
                        why,
                    };
                    if o.strtab != DOF_SECIDX_NONE {
                        return Err(bad("string option not supported"));
                    }
                    if o.option >= DTRACEOPT_MAX {
                        return Err(bad("unknown option"));
                    }
                    if o.value == DTRACEOPT_UNSET {
                        return Err(bad("unset option"));
                    }
                    let (name, value) =
                        option_text(o.option, o.value).ok_or(bad("invalid option value"))?;
                    p.options.push((name, value));
                }
            }
            _ => {}
        }
    }
    aggs.sort_unstable();
    p.aggregations = aggs
        .into_iter()
        .map(|id| AggregationDesc {
            id,
            name: String::new(),
        })
        .collect();
    Ok(p)
}

/// `DTRACEOPT_UNSET` ((dtrace_optval_t)-2).
const DTRACEOPT_UNSET: u64 = (-2i64) as u64;

/// Reads DOF bytes (or an ELF object holding DOF in `.SUNW_dof`, the first one) and loads the program.
pub fn program_from_dof_bytes(bytes: &[u8]) -> Result<Program> {
    let dof = match crate::dof_sections_from_elf(bytes)? {
        Some(mut secs) if !secs.is_empty() => secs.swap_remove(0),
        Some(_) => {
            return Err(ProgramDofError::BadSection {
                section: 0,
                why: "no .SUNW_dof section in the ELF object".into(),
            })
        }
        None => bytes.to_vec(),
    };
    program_from_dof(&crate::read_dof(&dof)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_values_parse_as_dtrace_parses_them() {
        let v = |n: &str, s: Option<&str>| dof_option(n, s).unwrap().unwrap();
        assert_eq!(v("bufsize", Some("4m")), (0, 4 << 20));
        assert_eq!(v("bufsize", Some("0x1000")), (0, 4096));
        assert_eq!(v("aggsize", Some("010k")), (3, 8 << 10));
        assert_eq!(v("switchrate", Some("10hz")), (16, 100_000_000));
        assert_eq!(v("aggrate", Some("2SEC")), (15, 2_000_000_000));
        assert_eq!(v("cleanrate", Some("500")), (7, 500));
        assert_eq!(v("statusrate", Some("1min")), (17, 60_000_000_000));
        assert_eq!(v("quiet", None), (12, 0));
        assert_eq!(v("bufpolicy", Some("ring")), (1, 0));
        assert_eq!(v("bufresize", Some("manual")), (9, 1));
        assert_eq!(
            dof_option("zone", Some("global")),
            Err(ProgramDofError::OptionNotCarried("zone".into()))
        );
    }

    #[test]
    fn bad_values_and_compile_time_options() {
        assert_eq!(dof_option("defaultargs", None), Ok(None));
        assert_eq!(dof_option("cpp", None), Ok(None));
        for (n, s) in [
            ("bufsize", "4q"),
            ("switchrate", "10furlongs"),
            ("nspec", "1k"),
            ("bufpolicy", "sometimes"),
        ] {
            assert!(
                matches!(
                    dof_option(n, Some(s)),
                    Err(ProgramDofError::BadOptionValue { .. })
                ),
                "{n}={s}"
            );
        }
        assert!(dof_option("bufpolicy", None).is_err());
    }

    #[test]
    fn difo_conversion_keeps_every_field() {
        let o = DifObject {
            text: vec![0x2300_0100, 0x2500_0001],
            inttab: vec![7, u64::MAX],
            strtab: b"\0x\0".to_vec(),
            vartab: vec![VarEntry {
                name: 1,
                id: 0x500,
                kind: 1,
                scope: 2,
                flags: 3,
                ty: DifTy::string(256),
            }],
            rtype: DifTy::integer(8),
        };
        let d = Difo::from(&o);
        assert_eq!(d.vartab[0].ty.flags, 1);
        assert_eq!(d.rtype.size, 8);
        assert_eq!(DifObject::from(&d), o);
    }
}
