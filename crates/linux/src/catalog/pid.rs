//! The `pid` provider's probes of one process: `pid<PID>:<module>:<function>:entry`, `:return` and
//! `:<hex offset>` for every function of every ELF object the process maps, placed as uprobes.
//!
//! Modules are the objects' file names (`libc.so.6`); `a.out` names the main executable. Function
//! names come from the objects' symbol tables ([`FunctionTable`]). An offset probe must fall on an
//! instruction boundary, checked by decoding the function with `iced-x86`. At `entry` and offset
//! probes `arg0..arg9` are the integer argument registers of the x86-64 calling convention and the
//! stack slots after them; at `return` (a uretprobe) `arg1` is the return value (`%rax`) and `arg0`
//! the offset of the function's return instruction when it has a single one (a uretprobe fires in
//! the caller and cannot tell which of several returns ran: `-1` then).

use super::glob;
use super::{AttachPoint, Probe, ProbeDesc, UserSite};
use crate::capture::ArgSource;
use crate::error::{LinuxError, Result};
use crate::symbols::functions::{Function, FunctionTable};
use std::sync::Arc;

/// x86-64 `struct pt_regs` offsets (the table lives with the code that reads them).
pub use crate::capture::regs;

/// One mapped object of a process.
#[derive(Clone, Debug)]
pub struct MappedObject {
    /// The module name probes carry (the file name).
    pub module: String,
    /// Whether it is the main executable (`a.out`).
    pub main: bool,
    /// Its functions.
    pub table: Arc<FunctionTable>,
    /// Its USDT probe sites (`.note.stapsdt` notes and `.SUNW_dof` providers).
    pub usdt: Vec<super::usdt::Site>,
}

impl MappedObject {
    /// The object at `path` (`main`: the process's executable), or `None` when its functions
    /// cannot be read. A malformed note section leaves it without USDT probes.
    pub fn load(path: &str, main: bool) -> Option<MappedObject> {
        let table = FunctionTable::load(path).ok()?;
        Some(MappedObject {
            module: basename(path).to_string(),
            main,
            table: Arc::new(table),
            usdt: super::usdt::read_sites(path).unwrap_or_default(),
        })
    }
}

/// The objects a process maps, read from `/proc/<pid>/maps` when the provider is first asked.
#[derive(Clone, Debug)]
pub struct ProcessImage {
    /// The process.
    pub pid: u32,
    /// Its objects, the main executable first.
    pub objects: Vec<MappedObject>,
}

/// The file name of a path.
fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

impl ProcessImage {
    /// Reads the mapped ELF objects of `pid`. A process that does not exist, and pid 0, are
    /// refused ([`PidRefusal::Grab`], [`PidRefusal::BadPid`]); an object that cannot be read is
    /// left out.
    pub fn read(pid: u32) -> Result<ProcessImage> {
        Self::read_again(pid, None)
    }

    /// [`ProcessImage::read`], keeping the objects of `previous` (an earlier reading of the same
    /// process) that are still mapped instead of reading their files again: after the run-time
    /// linker loaded a library, only the library is new.
    pub fn read_again(pid: u32, previous: Option<&ProcessImage>) -> Result<ProcessImage> {
        if pid == 0 {
            return Err(refused(
                PidRefusal::BadPid,
                "pid0 does not contain a valid pid".into(),
            ));
        }
        let maps = crate::symbols::procmaps::read_maps(pid).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                refused(PidRefusal::Grab, format!("failed to grab process {pid}"))
            } else {
                LinuxError::from_io(format!("reading the mappings of pid {pid}"), e)
            }
        })?;
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .and_then(|p| p.to_str().map(str::to_string));
        let mut paths: Vec<&str> = Vec::new();
        for m in maps.iter().filter(|m| m.exec && m.path.starts_with('/')) {
            if !paths.contains(&m.path.as_str()) {
                paths.push(&m.path);
            }
        }
        let mut objects = Vec::new();
        for path in paths {
            if let Some(known) = previous
                .into_iter()
                .flat_map(|p| &p.objects)
                .find(|o| o.table.path == path)
            {
                if known.main {
                    objects.insert(0, known.clone());
                } else {
                    objects.push(known.clone());
                }
                continue;
            }
            let main = exe.as_deref() == Some(path);
            let Some(obj) = MappedObject::load(path, main) else {
                continue;
            };
            if main {
                objects.insert(0, obj);
            } else {
                objects.push(obj);
            }
        }
        Ok(ProcessImage { pid, objects })
    }

    /// The name the main executable's probes carry, for rewriting `a.out` in descriptions.
    pub fn main_module(&self) -> Option<&str> {
        self.objects
            .iter()
            .find(|o| o.main)
            .map(|o| o.module.as_str())
    }

    /// Whether module pattern `pattern` selects `obj` (`a.out` selects the main executable, and
    /// a name without its suffix the object it begins, see [`ProcessImage::module_alias`]).
    fn module_matches(pattern: &str, obj: &MappedObject) -> bool {
        glob::matches(pattern, &obj.module)
            || (obj.main && glob::matches(pattern, "a.out"))
            || is_alias(pattern, &obj.module)
    }

    /// The object module name `module` stands for, as DTrace resolves it: `a.out` is the main
    /// executable, and a name that is not a glob and names no object is the one object whose
    /// name it begins, up to a dot (`libc` and `libc.so` are `libc.so.6`). `None`: `module` is
    /// used as it is.
    pub fn module_alias(&self, module: &str) -> Option<&str> {
        if module == "a.out" {
            return self.main_module();
        }
        if glob::has_meta(module) || self.objects.iter().any(|o| o.module == module) {
            return None;
        }
        let mut found = self.objects.iter().filter(|o| is_alias(module, &o.module));
        match (found.next(), found.next()) {
            (Some(o), None) => Some(&o.module),
            _ => None,
        }
    }

    /// The `pid` probes of provider `provider` matching `pattern`. Offset probes are offered when
    /// the name asks for an offset, or when the function is named exactly and the name is a glob
    /// (`pid$target:a.out:main:` is entry, return and every instruction). A description the
    /// provider cannot serve is refused as DTrace's `dt_pid.c` refuses it ([`PidRefusal`]): a
    /// function named exactly that a module named exactly lacks, a name that is neither `entry`,
    /// `return` nor an offset, an offset past the function's end or inside an instruction, and
    /// the `-` function (absolute addresses) outside `a.out` or with a glob.
    pub fn probes(&self, provider: &str, pattern: &ProbeDesc) -> Result<Vec<Probe>> {
        if pattern.function == "-" {
            return self.address_probes(provider, pattern);
        }
        let mut out = Vec::new();
        let name_is_glob = pattern.name.is_empty() || glob::has_meta(&pattern.name);
        let all_offsets =
            !pattern.function.is_empty() && !glob::has_meta(&pattern.function) && name_is_glob;
        // A function named exactly is looked up, not searched for.
        let named = !pattern.function.is_empty() && !glob::has_meta(&pattern.function);
        let (mut modules, mut functions) = (0usize, 0usize);
        for obj in &self.objects {
            if !Self::module_matches(&pattern.module, obj) {
                continue;
            }
            modules += 1;
            // As DTrace's dt_pid.c: a function named exactly is looked up by that name and its
            // probes named for the name that names its address (`_go`, a weak alias of `go`,
            // is `go`); a glob takes each address once, named for the first alias it matches.
            let funcs: Vec<&Function> = if named {
                let t = &obj.table;
                t.get(&pattern.function)
                    .map(|f| t.canonical(f))
                    .into_iter()
                    .collect()
            } else {
                obj.table
                    .matching(|name| glob::matches(&pattern.function, name))
            };
            for f in funcs {
                functions += 1;
                let desc = |name: &str| ProbeDesc::new(provider, &obj.module, &f.name, name);
                let mut named_site = false;
                for name in ["entry", "return"] {
                    if !glob::matches(&pattern.name, name) {
                        continue;
                    }
                    named_site = true;
                    // Both are placed on the function's first instruction.
                    if probeable_at(&obj.table, f, 0) {
                        out.push(self.probe(desc(name), &obj.table, f, Site::of(name))?);
                    }
                }
                if !name_is_glob && !named_site {
                    let Some(off) = parse_offset(&pattern.name) else {
                        return Err(refused(
                            PidRefusal::Name,
                            format!("'{}' is an invalid probe name", pattern.name),
                        ));
                    };
                    check_boundary(&obj.table, f, off)?;
                    out.push(self.probe(
                        desc(&format!("{off:x}")),
                        &obj.table,
                        f,
                        Site::Offset(off),
                    )?);
                } else if all_offsets {
                    let code = obj.table.code(f)?;
                    for off in instruction_offsets(&code) {
                        if !probeable(&code, off) {
                            continue;
                        }
                        let name = format!("{off:x}");
                        if glob::matches(&pattern.name, &name) {
                            out.push(self.probe(desc(&name), &obj.table, f, Site::Offset(off))?);
                        }
                    }
                }
            }
        }
        // A function named exactly in a module named exactly (and loaded) must be there; with a
        // module glob another object may have it, and a module not loaded matches nothing.
        let module_named = !pattern.module.is_empty() && !glob::has_meta(&pattern.module);
        if named && module_named && modules > 0 && functions == 0 {
            return Err(refused(
                PidRefusal::Func,
                format!(
                    "failed to lookup '{}' in module '{}'",
                    pattern.function, pattern.module
                ),
            ));
        }
        Ok(out)
    }

    /// Probes of the `-` function, whose probe name is an address in the main executable
    /// (`pid$target:a.out:-:401136`, the address as the executable's symbols give it, before a
    /// PIE is relocated): only `a.out` (or an empty module) and one address are valid, as in
    /// DTrace. The probe is named for the function holding the address, with the address as
    /// its name (`pid123:prog:main:401136`), and placed like an offset probe.
    fn address_probes(&self, provider: &str, pattern: &ProbeDesc) -> Result<Vec<Probe>> {
        let (obj, f, off) = self.address_site(pattern)?;
        let desc = ProbeDesc::new(provider, &obj.module, &f.name, &pattern.name);
        Ok(vec![self.probe(desc, &obj.table, f, Site::Offset(off))?])
    }

    /// Where a `-` description's address is: the main executable, the function holding it and
    /// the offset in the function (refused as in DTrace when it is not valid).
    fn address_site(&self, pattern: &ProbeDesc) -> Result<(&MappedObject, &Function, u64)> {
        let main = self.objects.iter().find(|o| o.main);
        let module_is_main = pattern.module.is_empty() || pattern.module == "*";
        let in_main = module_is_main
            || (!glob::has_meta(&pattern.module)
                && main.is_some_and(|m| Self::module_matches(&pattern.module, m)));
        let main = match main {
            Some(m) if in_main => m,
            _ => {
                return Err(refused(
                    PidRefusal::Lib,
                    "only the a.out module is valid with the '-' function".into(),
                ))
            }
        };
        if pattern.name.is_empty() || glob::has_meta(&pattern.name) {
            return Err(refused(
                PidRefusal::Name,
                "only individual addresses may be specified with the '-' function".into(),
            ));
        }
        let Some(addr) = parse_offset(&pattern.name) else {
            return Err(refused(
                PidRefusal::Name,
                format!("'{}' is an invalid probe name", pattern.name),
            ));
        };
        let Some(f) = main.table.containing(addr) else {
            let module = if module_is_main {
                "a.out"
            } else {
                &pattern.module
            };
            return Err(refused(
                PidRefusal::Name,
                format!("failed to lookup 0x{addr:x} in module '{module}'"),
            ));
        };
        let off = addr - f.vaddr;
        check_boundary(&main.table, f, off)?;
        Ok((main, f, off))
    }

    /// The module and function the framework's probe of a `-` description is named for
    /// (`None`: not a `-` description, or one that is refused).
    pub fn address_names(&self, pattern: &ProbeDesc) -> Option<(String, String)> {
        if pattern.function != "-" {
            return None;
        }
        let (obj, f, _) = self.address_site(pattern).ok()?;
        Some((obj.module.clone(), f.name.clone()))
    }

    /// The function a description naming one exactly by an alias is matched against: the name
    /// of its address (`go` for its weak alias `_go`), as its probes are named (see
    /// [`ProcessImage::probes`]). `None`: a glob, `-`, a name that is its address's own, or
    /// objects the description selects that disagree.
    pub fn canonical_function(&self, pattern: &ProbeDesc) -> Option<String> {
        let f = &pattern.function;
        if f.is_empty() || f == "-" || glob::has_meta(f) {
            return None;
        }
        let mut names = self
            .objects
            .iter()
            .filter(|o| Self::module_matches(&pattern.module, o))
            .filter_map(|o| o.table.get(f).map(|g| o.table.canonical(g).name.as_str()));
        let first = names.next()?;
        (first != f && names.all(|n| n == first)).then(|| first.to_string())
    }

    /// The USDT providers of the process's objects (`python`), each once.
    pub fn usdt_providers(&self) -> Vec<&str> {
        let mut v: Vec<&str> = Vec::new();
        for s in self.objects.iter().flat_map(|o| &o.usdt) {
            if !v.contains(&s.provider.as_str()) {
                v.push(&s.provider);
            }
        }
        v
    }

    /// The USDT probes of the notes of provider `kind` matching `pattern`, named for provider
    /// `provider` (`kind` and the pid). Sites in the same function with the same name are one
    /// probe, placed at each.
    pub fn usdt_probes(&self, provider: &str, kind: &str, pattern: &ProbeDesc) -> Vec<Probe> {
        let mut out: Vec<Probe> = Vec::new();
        for obj in &self.objects {
            if !Self::module_matches(&pattern.module, obj) {
                continue;
            }
            for site in obj.usdt.iter().filter(|s| s.provider == kind) {
                let function = obj
                    .table
                    .containing(site.vaddr)
                    .map(|f| f.name.clone())
                    .unwrap_or_default();
                let name = site.name.clone();
                if !glob::matches(&pattern.function, &function)
                    || !glob::matches(&pattern.name, &name)
                {
                    continue;
                }
                let types = site.types.clone();
                let at = UserSite {
                    offset: site.file_offset,
                    args: site.args.clone(),
                    ref_ctr_offset: site.semaphore_offset,
                };
                let desc = ProbeDesc::new(provider, &obj.module, &function, &name);
                match out.iter_mut().find(|p| p.desc == desc) {
                    // One uprobe per place (is-enabled-only probes share one).
                    Some(Probe {
                        attach: AttachPoint::Uprobe { sites, .. },
                        ..
                    }) => {
                        if !sites.contains(&at) {
                            sites.push(at);
                        }
                    }
                    _ => out.push(Probe {
                        desc,
                        args: types,
                        attach: AttachPoint::Uprobe {
                            path: obj.table.path.clone(),
                            retprobe: false,
                            pid: self.pid,
                            sites: vec![at],
                        },
                    }),
                }
            }
        }
        out
    }

    fn probe(
        &self,
        desc: ProbeDesc,
        table: &FunctionTable,
        f: &Function,
        site: Site,
    ) -> Result<Probe> {
        let (offset, retprobe, args) = match site {
            Site::Entry => (f.file_offset, false, call_args()),
            Site::Offset(off) => (f.file_offset + off, false, call_args()),
            Site::Return => {
                let rets = table
                    .code(f)
                    .map(|c| return_offsets(&c))
                    .unwrap_or_default();
                let at = match rets.as_slice() {
                    [one] => *one as i32,
                    _ => -1,
                };
                (
                    f.file_offset,
                    true,
                    vec![
                        ArgSource::Const(at),
                        ArgSource::UserReg {
                            offset: regs::RAX,
                            size: 8,
                            signed: false,
                        },
                    ],
                )
            }
        };
        Ok(Probe {
            desc,
            args: Vec::new(),
            attach: AttachPoint::Uprobe {
                path: table.path.clone(),
                retprobe,
                pid: self.pid,
                sites: vec![UserSite {
                    offset,
                    args,
                    ref_ctr_offset: 0,
                }],
            },
        })
    }
}

/// Whether `name` (not a glob) is `module` without a suffix that starts with a dot (`libc` and
/// `libc.so` for `libc.so.6`).
fn is_alias(name: &str, module: &str) -> bool {
    !name.is_empty()
        && !glob::has_meta(name)
        && module
            .strip_prefix(name)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// Where in a function a probe fires.
#[derive(Clone, Copy, Debug)]
enum Site {
    Entry,
    Return,
    Offset(u64),
}

impl Site {
    fn of(name: &str) -> Site {
        if name == "return" {
            Site::Return
        } else {
            Site::Entry
        }
    }
}

/// The integer arguments of the x86-64 calling convention: six registers, then the stack (above
/// the return address at a function's first instruction: `arg6` at `sp+8`, ... `arg9` at
/// `sp+32`), as many as a record carries.
fn call_args() -> Vec<ArgSource> {
    let mut v: Vec<ArgSource> = regs::CALL_ARGS
        .iter()
        .map(|&offset| ArgSource::UserReg {
            offset,
            size: 8,
            signed: false,
        })
        .collect();
    for slot in 1..=(crate::capture::layout::NARGS - regs::CALL_ARGS.len()) as i32 {
        v.push(ArgSource::UserMem {
            reg: regs::RSP,
            disp: 8 * slot,
            size: 8,
            signed: false,
        });
    }
    v
}

/// A probe name that is an offset (hexadecimal, as DTrace writes them).
pub fn parse_offset(name: &str) -> Option<u64> {
    if name.is_empty() || glob::has_meta(name) {
        return None;
    }
    let digits = name.strip_prefix("0x").unwrap_or(name);
    u64::from_str_radix(digits, 16).ok()
}

/// Offsets of every instruction of `code` (decoding stops at the first undecodable byte).
pub fn instruction_offsets(code: &[u8]) -> Vec<u64> {
    let mut d = iced_x86::Decoder::with_ip(64, code, 0, iced_x86::DecoderOptions::NONE);
    let mut out = Vec::new();
    while d.can_decode() {
        let ip = d.ip();
        let insn = d.decode();
        if insn.is_invalid() {
            break;
        }
        out.push(ip);
    }
    out
}

/// Whether the kernel's uprobes can be placed on the instruction at `off` of `code` (x86 uprobes
/// refuse `lock`-prefixed instructions and VEX/EVEX/XOP-encoded ones; undecodable bytes are
/// refused here too).
pub fn probeable(code: &[u8], off: u64) -> bool {
    let Some(rest) = usize::try_from(off).ok().and_then(|o| code.get(o..)) else {
        return false;
    };
    let mut d = iced_x86::Decoder::with_ip(64, rest, off, iced_x86::DecoderOptions::NONE);
    let insn = d.decode();
    !insn.is_invalid()
        && !insn.has_lock_prefix()
        && insn.encoding() == iced_x86::EncodingKind::Legacy
}

/// [`probeable`] for function `f` of `table` (a function whose bytes cannot be read is taken as
/// probeable: the kernel then decides).
fn probeable_at(table: &FunctionTable, f: &Function, off: u64) -> bool {
    match table.code(f) {
        Ok(code) if !code.is_empty() => probeable(&code, off),
        _ => true,
    }
}

/// Offsets of the `ret` instructions of `code`.
pub fn return_offsets(code: &[u8]) -> Vec<u64> {
    let mut d = iced_x86::Decoder::with_ip(64, code, 0, iced_x86::DecoderOptions::NONE);
    let mut out = Vec::new();
    while d.can_decode() {
        let insn = d.decode();
        if insn.is_invalid() {
            break;
        }
        if insn.flow_control() == iced_x86::FlowControl::Return {
            out.push(insn.ip());
        }
    }
    out
}

/// An offset probe's offset must fall inside the function (`D_PROC_OFF`) and start an
/// instruction that uprobes can trace (`D_PROC_CREATEFAIL` otherwise).
fn check_boundary(table: &FunctionTable, f: &Function, off: u64) -> Result<()> {
    if f.size == 0 || off >= f.size {
        return Err(refused(
            PidRefusal::Off,
            format!("offset 0x{off:x} outside of function '{}'", f.name),
        ));
    }
    let code = table.code(f)?;
    let why = if !instruction_offsets(&code).contains(&off) {
        "the offset is not on an instruction boundary"
    } else if !probeable(&code, off) {
        "uprobes cannot trace the instruction there"
    } else {
        return Ok(());
    };
    Err(refused(
        PidRefusal::CreateFail,
        format!("failed to create probes at '{}+0x{off:x}': {why}", f.name),
    ))
}

/// Why the `pid` provider refuses a probe description: each is one of DTrace's `D_PROC_*`
/// compiler error tags, with the message its `dt_pid.c` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PidRefusal {
    /// The provider names no process (`pid0`).
    BadPid,
    /// The process cannot be grabbed: it does not exist (any more).
    Grab,
    /// A function named exactly is not in the module named exactly.
    Func,
    /// The `-` function with a module other than `a.out`.
    Lib,
    /// A probe name that is not `entry`, `return` or an offset, or not one address with `-`.
    Name,
    /// An offset past the end of the function.
    Off,
    /// A probe that cannot be placed (an offset inside an instruction).
    CreateFail,
}

impl PidRefusal {
    /// The refusal's compiler error tag, as `-x errtags` prints it.
    pub fn tag(self) -> &'static str {
        match self {
            PidRefusal::BadPid => "D_PROC_BADPID",
            PidRefusal::Grab => "D_PROC_GRAB",
            PidRefusal::Func => "D_PROC_FUNC",
            PidRefusal::Lib => "D_PROC_LIB",
            PidRefusal::Name => "D_PROC_NAME",
            PidRefusal::Off => "D_PROC_OFF",
            PidRefusal::CreateFail => "D_PROC_CREATEFAIL",
        }
    }
}

/// A refusal with its message.
fn refused(refusal: PidRefusal, message: String) -> LinuxError {
    LinuxError::PidRefused { refusal, message }
}

/// Splits a per-process provider name into its provider and process id (`pid1234` →
/// `("pid", 1234)`, `python31` → `("python", 31)`).
pub fn split_provider(name: &str) -> Option<(&str, u32)> {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits == name.len() {
        return None;
    }
    let (prov, pid) = name.split_at(name.len() - digits);
    Some((prov, pid.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_split_into_name_and_pid() {
        assert_eq!(split_provider("pid1234"), Some(("pid", 1234)));
        assert_eq!(split_provider("python31"), Some(("python", 31)));
        assert_eq!(split_provider("pid"), None);
        assert_eq!(split_provider("123"), None);
        assert_eq!(split_provider("pid99999999999999"), None);
    }

    #[test]
    fn modules_are_named_without_their_suffix() {
        let obj = |module: &str, main: bool| MappedObject {
            module: module.into(),
            main,
            table: Arc::default(),
            usdt: Vec::new(),
        };
        let image = ProcessImage {
            pid: 1,
            objects: vec![
                obj("prog", true),
                obj("libc.so.6", false),
                obj("libm.so.6", false),
                obj("libmx.so", false),
            ],
        };
        assert_eq!(image.module_alias("a.out"), Some("prog"));
        assert_eq!(image.module_alias("libc"), Some("libc.so.6"));
        assert_eq!(image.module_alias("libc.so"), Some("libc.so.6"));
        assert_eq!(image.module_alias("libc.so.6"), None);
        assert_eq!(image.module_alias("libc.s"), None);
        assert_eq!(image.module_alias("libm"), Some("libm.so.6"));
        assert_eq!(image.module_alias("lib*"), None);
        assert_eq!(image.module_alias("libz"), None);
        assert!(ProcessImage::module_matches("libc", &image.objects[1]));
        assert!(!ProcessImage::module_matches("libc", &image.objects[2]));
    }

    /// The refusal of reading `pattern` (`module:function:name`) against `image`.
    fn refusal(image: &ProcessImage, pattern: &str) -> Option<(PidRefusal, String)> {
        let mut f = pattern.split(':');
        let mut next = || f.next().unwrap_or_default();
        let desc = ProbeDesc::new("pid1", next(), next(), next());
        match image.probes("pid1", &desc) {
            Err(LinuxError::PidRefused { refusal, message }) => Some((refusal, message)),
            _ => None,
        }
    }

    #[test]
    fn descriptions_are_refused_with_dtraces_tags() {
        let exe = std::env::current_exe().unwrap();
        let table = FunctionTable::load(exe.to_str().unwrap()).unwrap();
        // A function of this test program with its size, for offsets past its end.
        let f = table.iter().find(|f| f.size > 16).unwrap().clone();
        let image = ProcessImage {
            pid: 1,
            objects: vec![MappedObject {
                module: "prog".into(),
                main: true,
                table: Arc::new(table),
                usdt: Vec::new(),
            }],
        };
        let r = refusal(&image, "a.out:no_such_function_here:entry");
        assert_eq!(
            r,
            Some((
                PidRefusal::Func,
                "failed to lookup 'no_such_function_here' in module 'a.out'".into()
            ))
        );
        // With a module glob another object might have it; a module not loaded matches nothing.
        assert!(image
            .probes(
                "pid1",
                &ProbeDesc::new("pid1", "*", "no_such_function_here", "entry")
            )
            .is_ok_and(|v| v.is_empty()));
        assert!(image
            .probes("pid1", &ProbeDesc::new("pid1", "libnone.so", "f", "entry"))
            .is_ok_and(|v| v.is_empty()));
        let r = refusal(&image, &format!("a.out:{}:beginning", f.name));
        assert_eq!(
            r,
            Some((
                PidRefusal::Name,
                "'beginning' is an invalid probe name".into()
            ))
        );
        let r = refusal(&image, &format!(":{}:{:x}", f.name, f.size));
        let off = format!("offset 0x{:x} outside of function '{}'", f.size, f.name);
        assert_eq!(r, Some((PidRefusal::Off, off)));
        assert_eq!(
            refusal(&image, "libc:-:800").map(|r| r.0),
            Some(PidRefusal::Lib)
        );
        for p in [":-:", "a.out:-:10*"] {
            let r = refusal(&image, p);
            let msg = "only individual addresses may be specified with the '-' function";
            assert_eq!(r, Some((PidRefusal::Name, msg.into())), "{p}");
        }
        // One address: the probe is named for the function holding it.
        let at = image.objects[0]
            .table
            .containing(f.vaddr)
            .unwrap()
            .name
            .clone();
        let d = ProbeDesc::new("pid1", "", "-", &format!("{:x}", f.vaddr));
        assert_eq!(image.address_names(&d), Some(("prog".into(), at.clone())));
        let probes = image.probes("pid1", &d).unwrap();
        let want = ProbeDesc::new("pid1", "prog", &at, &format!("{:x}", f.vaddr));
        assert_eq!(probes.iter().map(|p| &p.desc).collect::<Vec<_>>(), [&want]);
        assert_eq!(
            refusal(&image, "a.out:-:1"),
            Some((
                PidRefusal::Name,
                "failed to lookup 0x1 in module 'a.out'".into()
            ))
        );
        assert_eq!(PidRefusal::CreateFail.tag(), "D_PROC_CREATEFAIL");
        assert!(matches!(
            ProcessImage::read(0),
            Err(LinuxError::PidRefused {
                refusal: PidRefusal::BadPid,
                ..
            })
        ));
    }

    #[test]
    fn offsets_parse_as_hex_and_boundaries_decode() {
        assert_eq!(parse_offset("1f"), Some(0x1f));
        assert_eq!(parse_offset("0x10"), Some(0x10));
        assert_eq!(parse_offset("entry"), None);
        assert_eq!(parse_offset("1*"), None);
        // push %rbp; mov %rsp,%rbp; mov $1,%eax; pop %rbp; ret
        let code = [0x55, 0x48, 0x89, 0xe5, 0xb8, 1, 0, 0, 0, 0x5d, 0xc3];
        assert_eq!(instruction_offsets(&code), vec![0, 1, 4, 9, 10]);
        assert_eq!(return_offsets(&code), vec![10]);
        assert!(probeable(&code, 0) && probeable(&code, 10) && !probeable(&code, 11));
        // lock btsl $0x5,0x308(%rdi)
        let locked = [0xf0, 0x0f, 0xba, 0xaf, 0x08, 0x03, 0x00, 0x00, 0x05];
        assert!(!probeable(&locked, 0));
        // vmovd %esi,%xmm0
        assert!(!probeable(&[0xc5, 0xf9, 0x6e, 0xc6], 0));
    }
}
