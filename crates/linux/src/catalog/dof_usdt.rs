//! USDT probes from DOF: the providers a `.SUNW_dof` section of a mapped object describes, as
//! `dtrace -G` writes them (crate `dtrace_dof`, module `usdt_link`), become [`Site`]s the pid
//! catalog places as uprobes, exactly as stapsdt notes do. No helper daemon or kernel module is
//! involved: the DOF is read from the object's file, so a process started after tracing began is
//! found the same way when its maps are read.
//!
//! - Each DOF probe's address (its base symbol's link-time address, relocated by the linker) plus
//!   each of its offsets is a probe site: there the call's argument registers (`%rdi`, `%rsi`,
//!   `%rdx`, `%rcx`, `%r8`, `%r9`, then the stack at `%rsp`, the call not having pushed its return
//!   address at the nop) are `arg0..`, read at the width of the declared native type and
//!   sign-extended where it is signed.
//! - `args[]` have the declared (translated) types; a `string` is the user string its `char *`
//!   argument points at. A translation may reorder, repeat or drop native arguments (DOF's
//!   argument map, `probe q(int a, char *b) : (char *b, int a)`): `args[i]` is then native argument
//!   `map[i]`, and so is `argi`, as DTrace remaps both (its `tst.argmap` test).
//! - Stability: the DOF provider's five attribute triples (`#pragma D attributes` in the
//!   provider's declaration) are the provider's, as `dtrace -lv` reports them.
//! - Is-enabled: each is-enabled offset is a `call` of the `__dtraceenabled_*` function the
//!   `dtrace -G` object defines (`movzwl sem(%rip), %eax; ret`); decoding it gives the probe's
//!   semaphore, whose file offset is the uprobes' `ref_ctr_offset`: the kernel raises it while a
//!   probe site is attached and lowers it when detached, so the program's `_ENABLED()` test is true
//!   exactly while the probe is enabled.
//! - A probe the program only tests with `_ENABLED()` (no probe site in a function, only
//!   is-enabled ones) is still a probe, as DTrace creates it from its is-enabled offsets: its
//!   uprobe goes on `__dtrace_<p>`, the `ret` right after the is-enabled function
//!   (`dtrace_dof::PROBE_STUB_AFTER_ENABLED`) that no code calls, so it raises the semaphore while
//!   enabled and never fires. The site is named for the function of the is-enabled test.
//!
//! The DOF and the code are outside bytes: malformed input is an error or a site left out, never a
//! panic.

use super::pid::regs;
use super::usdt::{Image, Site};
use super::ProbeArg;
use crate::capture::{AddrBase, AddrExpr, ArgSource, CopyRequest, MemKind};
use crate::error::{LinuxError, Result};
use dtrace_dif::attr::{Attribute, ProviderAttributes};

/// Bytes copied for a `string` argument.
const STRING_SIZE: u32 = 256;

/// The width and signedness at which an argument of C type `t` is passed (`int`: the low 4 bytes,
/// sign-extended; pointers and unknown types: 8 bytes).
fn width(t: &str) -> (u8, bool) {
    let t = t.trim();
    if t.contains('*') {
        return (8, false);
    }
    let t = t.strip_prefix("const ").unwrap_or(t);
    match t {
        "char" | "signed char" | "int8_t" => (1, true),
        "unsigned char" | "uint8_t" | "_Bool" | "bool" => (1, false),
        "short" | "short int" | "signed short" | "int16_t" => (2, true),
        "unsigned short" | "unsigned short int" | "uint16_t" => (2, false),
        "int" | "signed" | "signed int" | "int32_t" => (4, true),
        "unsigned" | "unsigned int" | "uint32_t" => (4, false),
        "long" | "long int" | "long long" | "long long int" | "int64_t" | "ssize_t" | "off_t"
        | "intptr_t" => (8, true),
        _ => (8, false),
    }
}

/// Where argument `i` of type `t` is at a call site.
fn arg_source(i: usize, t: &str) -> ArgSource {
    let (size, signed) = width(t);
    match regs::CALL_ARGS.get(i) {
        Some(&offset) => ArgSource::UserReg {
            offset,
            size,
            signed,
        },
        None => ArgSource::UserMem {
            reg: regs::RSP,
            disp: 8 * (i as i32 - regs::CALL_ARGS.len() as i32),
            size,
            signed,
        },
    }
}

/// The native argument each of `args[]` (and `arg0..`) of DOF probe `p` is: its argument map
/// when it has translated arguments, else the native arguments in order. `None` when the map
/// names a native argument the probe does not have.
fn arg_map(p: &dtrace_dof::UsdtProbe) -> Option<Vec<usize>> {
    if p.xlated_args.is_empty() {
        return Some((0..p.native_args.len()).collect());
    }
    if p.arg_map.len() != p.xlated_args.len() {
        return None;
    }
    p.arg_map
        .iter()
        .map(|&m| (usize::from(m) < p.native_args.len()).then_some(usize::from(m)))
        .collect()
}

/// `args[]` of a DOF probe whose argument `i` is native argument `map[i]`: the translated types,
/// each over its native type.
fn arg_types(p: &dtrace_dof::UsdtProbe, map: &[usize]) -> Vec<ProbeArg> {
    map.iter()
        .enumerate()
        .map(|(i, &m)| {
            let native = p.native_args[m].clone();
            let dtype = p.xlated_args.get(i).unwrap_or(&native).clone();
            let copy = (dtype == "string").then(|| {
                CopyRequest::new(
                    AddrExpr {
                        base: AddrBase::Arg(i),
                        offset: 0,
                        derefs: Vec::new(),
                        user_derefs: Vec::new(),
                        index: None,
                    },
                    MemKind::UserString,
                    STRING_SIZE,
                )
            });
            ProbeArg {
                native,
                dtype,
                copy,
            }
        })
        .collect()
}

/// The attribute triple DOF packs in `a` (`DOF_ATTR`: name, data and class in its top three
/// bytes); `None` for a level or class DTrace does not define.
fn attribute(a: u32) -> Option<Attribute> {
    use dtrace_dif::attr::{DepClass as C, Stability as S};
    const LEVELS: [S; 8] = [
        S::Internal,
        S::Private,
        S::Obsolete,
        S::External,
        S::Unstable,
        S::Evolving,
        S::Stable,
        S::Standard,
    ];
    const CLASSES: [C; 6] = [C::Unknown, C::Cpu, C::Platform, C::Group, C::Isa, C::Common];
    let [n, d, c, _] = a.to_be_bytes();
    Some(Attribute::new(
        *LEVELS.get(usize::from(n))?,
        *LEVELS.get(usize::from(d))?,
        *CLASSES.get(usize::from(c))?,
    ))
}

/// A DOF provider's attributes (provider, module, function, name, args); `None` if any triple
/// is not one DTrace defines.
pub fn provider_attributes(attrs: &[u32; 5]) -> Option<ProviderAttributes> {
    Some(ProviderAttributes {
        provider: attribute(attrs[0])?,
        module: attribute(attrs[1])?,
        function: attribute(attrs[2])?,
        name: attribute(attrs[3])?,
        args: attribute(attrs[4])?,
    })
}

/// The semaphore an is-enabled site at `vaddr` reads: the site must be a `call` of a function
/// whose code is `dtrace_dof::IS_ENABLED_CODE`. Its link-time address.
pub fn semaphore_of(image: &dyn Image, vaddr: u64) -> Option<u64> {
    semaphore_and_function(image, vaddr).map(|(sem, _)| sem)
}

/// Where the uprobe of a probe with only is-enabled site `vaddr` goes: the never-called `ret`
/// after the is-enabled function the site calls. Its link-time address.
fn uncalled_stub_of(image: &dyn Image, vaddr: u64) -> Option<u64> {
    let (_, func) = semaphore_and_function(image, vaddr)?;
    let stub = func.checked_add(dtrace_dof::PROBE_STUB_AFTER_ENABLED)?;
    (image.bytes(stub, 1)? == [0xc3]).then_some(stub)
}

/// The semaphore an is-enabled site at `vaddr` reads, and the is-enabled function it calls.
fn semaphore_and_function(image: &dyn Image, vaddr: u64) -> Option<(u64, u64)> {
    let call = image.bytes(vaddr, 5)?;
    if call[0] != 0xe8 {
        return None;
    }
    let rel = i32::from_le_bytes(call[1..5].try_into().ok()?);
    let func = vaddr.checked_add(5)?.checked_add_signed(i64::from(rel))?;
    let code = image.bytes(func, dtrace_dof::IS_ENABLED_CODE.len())?;
    let want = &dtrace_dof::IS_ENABLED_CODE;
    if code[..3] != want[..3] || code[7] != want[7] {
        return None;
    }
    let disp = i32::from_le_bytes(code[3..7].try_into().ok()?);
    let sem = func.checked_add(7)?.checked_add_signed(i64::from(disp))?;
    Some((sem, func))
}

/// The USDT sites of the providers of DOF `dof`, an object's `.SUNW_dof` section, located in
/// `image`. A probe whose address is outside the file is left out.
pub fn sites(dof: &[u8], image: &dyn Image) -> Result<Vec<Site>> {
    let bad = |e: dtrace_dof::DofError| LinuxError::BadFile {
        path: dtrace_dof::SUNW_DOF_SECTION.into(),
        reason: e.to_string(),
    };
    let providers = dtrace_dof::read_dof(dof)
        .and_then(|f| f.usdt_providers())
        .map_err(bad)?;
    let mut out = Vec::new();
    for pv in providers {
        let stability = provider_attributes(&pv.attrs);
        // The semaphore of each probe name: any of its is-enabled sites, in any function.
        let semaphore = |name: &str| {
            pv.probes
                .iter()
                .filter(|p| p.name == name)
                .flat_map(|p| {
                    p.enabled_offsets
                        .iter()
                        .filter_map(move |&o| p.addr.checked_add(u64::from(o)))
                })
                .find_map(|site| semaphore_of(image, site))
                .and_then(|sem| image.file_offset(sem))
                .unwrap_or(0)
        };
        for p in &pv.probes {
            // A map naming a missing native argument: a DOF that is not DTrace's, left out.
            let Some(map) = arg_map(p) else {
                continue;
            };
            let semaphore_offset = semaphore(&p.name);
            let args: Vec<ArgSource> = map
                .iter()
                .take(crate::capture::layout::NARGS)
                .map(|&m| arg_source(m, &p.native_args[m]))
                .collect();
            let types = arg_types(p, &map);
            // Each probe site; a probe with none in its function is placed on the uncalled
            // stub of its first is-enabled site that has one, named for that site.
            let placed: Vec<(u64, u64)> = if p.offsets.is_empty() {
                p.enabled_offsets
                    .iter()
                    .filter_map(|&o| {
                        let at = p.addr.checked_add(u64::from(o))?;
                        Some((at, uncalled_stub_of(image, at)?))
                    })
                    .take(1)
                    .collect()
            } else {
                p.offsets
                    .iter()
                    .filter_map(|&o| p.addr.checked_add(u64::from(o)))
                    .map(|at| (at, at))
                    .collect()
            };
            for (vaddr, probe_at) in placed {
                // Only in code: a site elsewhere is a DOF that does not describe this file.
                let Some(file_offset) = image.code_offset(probe_at) else {
                    continue;
                };
                out.push(Site {
                    provider: pv.name.clone(),
                    name: p.name.clone(),
                    vaddr,
                    file_offset,
                    semaphore_offset,
                    args: args.clone(),
                    types: types.clone(),
                    stability,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_arguments_and_semaphores_from_dof() {
        // 0x1000: nop5 (probe site); 0x1005: call 0x1010 (is-enabled); 0x1010: movzwl 0x1020, ret
        let mut bytes = vec![0u8; 0x30];
        bytes[0..5].copy_from_slice(&dtrace_dof::usdt_link::NOP5);
        bytes[5] = 0xe8;
        bytes[6..10].copy_from_slice(&(0x1010i32 - 0x100a).to_le_bytes());
        bytes[0x10..0x18].copy_from_slice(&dtrace_dof::IS_ENABLED_CODE);
        bytes[0x13..0x17].copy_from_slice(&(0x1020i32 - 0x1017).to_le_bytes());
        let image = super::super::usdt::FlatImage {
            base: 0x1000,
            bytes,
        };
        assert_eq!(semaphore_of(&image, 0x1005), Some(0x1020));
        assert_eq!(semaphore_of(&image, 0x1000), None);
        let mut f = dtrace_dof::DofFile::new();
        f.add_usdt_provider(&dtrace_dof::UsdtProvider {
            name: "myprov".into(),
            attrs: [0; 5],
            probes: vec![dtrace_dof::UsdtProbe {
                function: "main".into(),
                name: "probe1".into(),
                addr: 0x1000,
                offsets: vec![0, 0x100],
                enabled_offsets: vec![5],
                native_args: vec!["int".into(), "char *".into()],
                xlated_args: vec!["int".into(), "string".into()],
                arg_map: vec![0, 1],
            }],
        });
        let dof = dtrace_dof::write_dof(&f).unwrap();
        let s = sites(&dof, &image).unwrap();
        // the site at 0x1100 is outside the file
        assert_eq!(s.len(), 1);
        // A probe with only an is-enabled site: its uprobe goes on the uncalled `ret` after the
        // is-enabled function, once its bytes are there; the site names its function.
        let only = dtrace_dof::UsdtProvider {
            name: "myprov".into(),
            attrs: [0; 5],
            probes: vec![dtrace_dof::UsdtProbe {
                function: "main".into(),
                name: "only".into(),
                addr: 0x1000,
                offsets: vec![],
                enabled_offsets: vec![5, 5],
                native_args: vec![],
                xlated_args: vec![],
                arg_map: vec![],
            }],
        };
        let mut g = dtrace_dof::DofFile::new();
        g.add_usdt_provider(&only);
        let only_dof = dtrace_dof::write_dof(&g).unwrap();
        assert!(sites(&only_dof, &image).unwrap().is_empty());
        let mut with_ret = image.bytes.clone();
        with_ret[0x18] = 0xc3;
        let image2 = super::super::usdt::FlatImage {
            base: 0x1000,
            bytes: with_ret,
        };
        let o = sites(&only_dof, &image2).unwrap();
        assert_eq!(o.len(), 1);
        assert_eq!(
            (o[0].vaddr, o[0].file_offset, o[0].semaphore_offset),
            (0x1005, 0x18, 0x20)
        );
        assert_eq!(
            (s[0].provider.as_str(), s[0].name.as_str(), s[0].file_offset),
            ("myprov", "probe1", 0)
        );
        assert_eq!(s[0].semaphore_offset, 0x20);
        assert_eq!(
            s[0].args,
            [
                ArgSource::UserReg {
                    offset: regs::RDI,
                    size: 4,
                    signed: true
                },
                ArgSource::UserReg {
                    offset: regs::RSI,
                    size: 8,
                    signed: false
                }
            ]
        );
        assert_eq!(s[0].types[1].dtype, "string");
        assert!(s[0].types[1].copy.is_some());
        assert!(sites(b"junk", &image).is_err());
    }

    #[test]
    fn argument_maps_and_attributes() {
        let mut p = dtrace_dof::UsdtProbe {
            function: "main".into(),
            name: "q".into(),
            addr: 0,
            offsets: vec![0],
            enabled_offsets: vec![],
            native_args: vec!["int".into(), "char *".into()],
            xlated_args: vec!["string".into(), "int".into()],
            arg_map: vec![1, 0],
        };
        let map = arg_map(&p).unwrap();
        assert_eq!(map, [1, 0]);
        let t = arg_types(&p, &map);
        assert_eq!(
            (t[0].native.as_str(), t[0].dtype.as_str()),
            ("char *", "string")
        );
        assert!(t[0].copy.is_some() && t[1].copy.is_none());
        assert_eq!((t[1].native.as_str(), t[1].dtype.as_str()), ("int", "int"));
        p.arg_map = vec![2, 0];
        assert_eq!(arg_map(&p), None);
        p.xlated_args.clear();
        p.arg_map.clear();
        assert_eq!(arg_map(&p).unwrap(), [0, 1]);
        let a = provider_attributes(&[dtrace_dof::dof_attr(5, 5, 5); 5]).unwrap();
        assert_eq!(a.provider, Attribute::EVOLVING);
        assert_eq!(
            provider_attributes(&[dtrace_dof::dof_attr(9, 5, 5); 5]),
            None
        );
    }

    #[test]
    fn stack_arguments_after_six() {
        assert_eq!(
            arg_source(7, "long"),
            ArgSource::UserMem {
                reg: regs::RSP,
                disp: 8,
                size: 8,
                signed: true
            }
        );
    }
}
