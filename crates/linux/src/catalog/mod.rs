//! The probe catalogue: every probe this kernel offers, named as DTrace on Linux names them
//! (`syscall:vmlinux:read:entry`, `sdt:sched::sched_switch`, `proc:::exec-success`,
//! `sched:::on-cpu`, `io:::start`, `profile:::profile-997`), each with typed arguments and what it takes to attach it.

pub mod dof_usdt;
pub mod fbt;
pub mod glob;
pub mod io;
pub mod pid;
pub mod proc_sched;
pub mod profile;
pub mod sched_fbt;
pub mod sdt;
pub mod syscall;
pub mod syscall_nr;
pub mod usdt;

use crate::capture::{ArgSource, Condition, CopyRequest, Identity};
use crate::error::{LinuxError, Result};
use crate::tracefs::{self, EventFormat};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// A probe's four-part name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProbeDesc {
    /// Provider (`syscall`).
    pub provider: String,
    /// Module (`vmlinux`).
    pub module: String,
    /// Function (`read`).
    pub function: String,
    /// Name (`entry`).
    pub name: String,
}

impl ProbeDesc {
    /// Builds a description.
    pub fn new(provider: &str, module: &str, function: &str, name: &str) -> Self {
        ProbeDesc {
            provider: provider.into(),
            module: module.into(),
            function: function.into(),
            name: name.into(),
        }
    }

    /// Parses `provider:module:function:name` (fewer parts fill from the right, as DTrace does:
    /// `a:b` is function `a`, name `b`).
    pub fn parse(s: &str) -> Self {
        let parts: Vec<&str> = s.split(':').collect();
        let mut p = ["", "", "", ""];
        let n = parts.len().min(4);
        for (i, part) in parts[parts.len() - n..].iter().enumerate() {
            p[4 - n + i] = part;
        }
        ProbeDesc::new(p[0], p[1], p[2], p[3])
    }
}

impl std::fmt::Display for ProbeDesc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}:{}",
            self.provider, self.module, self.function, self.name
        )
    }
}

/// One argument of a probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeArg {
    /// The kernel's type for it (`const char *`, `pid_t`, `char[16]`).
    pub native: String,
    /// The type D sees (`args[n]`), as `dtrace -lv` prints it.
    pub dtype: String,
    /// When the argument's data lives in the record rather than in a register-sized value (inline arrays,
    /// `__data_loc` strings): the copy that fetches it.
    pub copy: Option<CopyRequest>,
}

/// How a probe is attached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttachPoint {
    /// A tracefs tracepoint.
    Tracepoint {
        /// Subsystem directory.
        subsystem: String,
        /// Event directory.
        event: String,
        /// Event id.
        id: u64,
        /// Where each argument comes from.
        args: Vec<ArgSource>,
        /// Tests on the record.
        conditions: Vec<Condition>,
        /// Whose identity the record carries.
        identity: Identity,
        /// For syscall entry probes: the exit tracepoint's id (for re-reading user memory at return).
        return_event: Option<u64>,
        /// Whether this is a syscall return probe (errno is derived from arg0).
        syscall_return: bool,
        /// For syscall probes: the number and argument sources to fire from the `sys_enter`/`sys_exit`
        /// raw tracepoints through one dispatcher (fast to attach and detach by the hundred).
        syscall: Option<SyscallRoute>,
    },
    /// A raw tracepoint (the kernel's own arguments, e.g. `struct task_struct *` pointers), for
    /// probes whose context is a task the tracefs record only names (`on-cpu`).
    RawTracepoint {
        /// The tracepoint's name (`sched_switch`).
        name: String,
        /// Where each argument comes from.
        args: Vec<ArgSource>,
        /// Tests that must hold for the probe to fire.
        conditions: Vec<Condition>,
        /// Whose identity the record carries.
        identity: Identity,
    },
    /// Uprobes (or uretprobes) in one process, through the uprobe PMU (`pid` and USDT probes): one
    /// per site (a USDT probe may have several).
    Uprobe {
        /// The object file.
        path: String,
        /// Return probes (uretprobes on the function at each site).
        retprobe: bool,
        /// The process the probe fires in ([`crate::uprobe::EVERY_PROCESS`]: every process that
        /// maps the file, now or later; see `provider::file_usdt`).
        pid: u32,
        /// Where it is placed.
        sites: Vec<UserSite>,
    },
    /// A kernel function's entry or return: fentry/fexit through a BPF trampoline, or a kprobe
    /// (see `features::fbt_mechanism`).
    Fbt {
        /// The function's module (`vmlinux` for the kernel image).
        module: String,
        /// The function.
        function: String,
        /// The function's vmlinux BTF id (0: none, kprobes only).
        btf_id: u32,
        /// Return (fexit) rather than entry (fentry).
        ret: bool,
        /// Where each argument comes from (`FuncArg`/`FuncRet`: the trampoline's arguments).
        args: Vec<ArgSource>,
        /// Tests that must hold for the probe to fire (on the argument array).
        conditions: Vec<Condition>,
        /// Further functions of the kernel image the probe fires from, each with its BTF id
        /// (0: none), placed the same way and with the same arguments: a provider's probe built
        /// on a family of functions (`sched:::enqueue` on each scheduling class's
        /// `enqueue_task_*`).
        also: Vec<(String, u32)>,
    },
    /// A cpu-clock perf event.
    Profile {
        /// Period in nanoseconds.
        period_ns: u64,
        /// Every CPU (`profile-N`) or one (`tick-N`).
        all_cpus: bool,
    },
}

/// One place of a user-space probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserSite {
    /// The file offset of the probed instruction.
    pub offset: u64,
    /// Where each argument comes from (`struct pt_regs` of the user registers).
    pub args: Vec<ArgSource>,
    /// File offset of the USDT semaphore the kernel raises while the probe is attached (0: none).
    pub ref_ctr_offset: u64,
}

/// How a syscall probe fires from the raw syscall tracepoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyscallRoute {
    /// Syscall number.
    pub nr: u32,
    /// Argument sources in the raw tracepoint's context.
    pub args: Vec<ArgSource>,
}

/// A probe and how to attach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    /// Its name.
    pub desc: ProbeDesc,
    /// Its arguments.
    pub args: Vec<ProbeArg>,
    /// How it attaches.
    pub attach: AttachPoint,
}

impl Probe {
    /// Whether the probe is a system call's return, whose `errno` comes from `arg0`.
    pub fn syscall_return(&self) -> bool {
        matches!(
            self.attach,
            AttachPoint::Tracepoint {
                syscall_return: true,
                ..
            }
        )
    }

    /// The constants of the probe's code in the kernel: its names, whether `errno` is read
    /// from `arg0`, and its id (`id`): [`ProbeId::Planned`] until the framework numbers the
    /// probe (see [`Probe::names_as`]), [`ProbeId::Shared`] for a probe placed for every
    /// process, whose program serves each process's probe.
    ///
    /// [`ProbeId::Planned`]: dtrace_ebpf::translate::ProbeId::Planned
    /// [`ProbeId::Shared`]: dtrace_ebpf::translate::ProbeId::Shared
    pub fn names(&self) -> dtrace_ebpf::translate::ProbeNames {
        use dtrace_ebpf::translate::ProbeId;
        let shared = matches!(
            self.attach,
            AttachPoint::Uprobe {
                pid: crate::uprobe::EVERY_PROCESS,
                ..
            }
        );
        dtrace_ebpf::translate::ProbeNames {
            provider: self.desc.provider.clone(),
            module: self.desc.module.clone(),
            function: self.desc.function.clone(),
            name: self.desc.name.clone(),
            syscall_return: self.syscall_return(),
            id: if shared {
                ProbeId::Shared
            } else {
                ProbeId::Planned
            },
        }
    }

    /// [`Probe::names`] of the probe the framework numbered `id`.
    pub fn names_as(&self, id: u32) -> dtrace_ebpf::translate::ProbeNames {
        use dtrace_ebpf::translate::ProbeId;
        let mut names = self.names();
        if names.id == ProbeId::Planned {
            names.id = ProbeId::Is(id);
        }
        names
    }
}

/// How a listed probe is built when first asked for.
#[derive(Debug)]
enum Source {
    /// Built when the catalogue was read.
    Built,
    /// `syscall:vmlinux:<name>:entry`, from `sys_enter_<name>` (and `sys_exit_<name>`'s id).
    SyscallEntry(String),
    /// `syscall:vmlinux:<name>:return`, from `sys_exit_<name>`.
    SyscallReturn(String),
    /// `sdt:<subsystem>::<event>`, from that event's format.
    Sdt(String, String),
    /// `proc:::exit` on `fbt` ([`fbt::FbtCatalog::group_exit_probe`]), where the exit tracepoint
    /// cannot tell a process's exit from a thread's.
    FbtGroupExit,
    /// `proc:::lwp-exit` on `fbt` where `exit` is ([`fbt::FbtCatalog::thread_exit_probe`]), so
    /// that it fires first; the tracepoint's probe (built when the catalogue was read) otherwise.
    FbtThreadExit(Box<Probe>),
    /// A `sched` probe no tracepoint gives, on `fbt` ([`sched_fbt::probe`]).
    FbtSched(&'static str),
}

/// One listed probe: its name, and the probe once built (`None` inside when its format file
/// turned out unreadable or unusable: the probe then answers as absent).
#[derive(Debug)]
struct Entry {
    desc: ProbeDesc,
    source: Source,
    built: OnceLock<Option<Probe>>,
}

/// Formats read so far by `(subsystem, event)` (`None`: unreadable).
type FormatCache = HashMap<(String, String), Option<Arc<EventFormat>>>;

/// Every probe of the running kernel.
///
/// The catalogue is read lazily: [`Catalog::load`] lists the tracefs events by name (one
/// directory read per subsystem) and reads only the handful of `format` files the `proc`, `sched`
/// and `io` providers are built from; a `syscall` or `sdt` probe's format is read and parsed the
/// first time the probe itself is asked for ([`Catalog::get`], [`Catalog::matching`],
/// [`Catalog::probes`]). The probes listed, their order (which fixes the framework's probe ids)
/// and what each answers are those of [`Catalog::load_eager_from`], which parses every format
/// up front, as long as every format file reads and parses (a tracepoint whose format does not is
/// listed, but then answers as absent).
#[derive(Debug, Default)]
pub struct Catalog {
    entries: Vec<Entry>,
    index: HashMap<ProbeDesc, usize>,
    root: PathBuf,
    /// Formats read so far (`None`: unreadable), shared by the probes built from them.
    formats: Mutex<FormatCache>,
    /// How many format files have been read and parsed.
    reads: AtomicUsize,
    /// The `fbt` functions, read at the first description naming them (`None`: no `fbt` here).
    fbt: OnceLock<Option<fbt::FbtCatalog>>,
}

impl Catalog {
    /// Enumerates tracefs (mounting it if needed) into probes, reading formats lazily.
    pub fn load() -> Result<Catalog> {
        let root = tracefs::ensure_tracefs()?;
        Self::load_from(&root)
    }

    /// Enumerates the tracefs at `root`, reading formats lazily (see [`Catalog`]).
    pub fn load_from(root: &Path) -> Result<Catalog> {
        let events = tracefs::list_events(root)?;
        let mut cat = Catalog {
            root: root.to_path_buf(),
            ..Catalog::default()
        };
        let exists: HashSet<(&str, &str)> = events
            .iter()
            .map(|(s, e)| (s.as_str(), e.as_str()))
            .collect();
        for name in syscall::names(&events) {
            cat.push_lazy(
                ProbeDesc::new("syscall", "vmlinux", &name, "entry"),
                Source::SyscallEntry(name.clone()),
            );
            if exists.contains(&("syscalls", &*format!("sys_exit_{name}"))) {
                cat.push_lazy(
                    ProbeDesc::new("syscall", "vmlinux", &name, "return"),
                    Source::SyscallReturn(name),
                );
            }
        }
        // The proc and sched probes depend on their formats' fields: read those few now.
        let mut some: HashMap<(String, String), EventFormat> = HashMap::new();
        for (sys, ev) in proc_sched::events() {
            if exists.contains(&(sys, ev)) {
                if let Some(f) = cat.format(sys, ev) {
                    some.insert((sys.to_string(), ev.to_string()), (*f).clone());
                }
            }
        }
        for p in proc_sched::probes(&some) {
            cat.push(p);
        }
        if !cat.index.contains_key(&fbt::group_exit_desc())
            && crate::features::fbt_support().is_ok()
        {
            cat.push_lazy(fbt::group_exit_desc(), Source::FbtGroupExit);
            cat.thread_exit_follows_group_exit();
        }
        if crate::features::fbt_support().is_ok() {
            for name in sched_fbt::names() {
                if !cat.index.contains_key(&sched_fbt::desc(name)) {
                    cat.push_lazy(sched_fbt::desc(name), Source::FbtSched(name));
                }
            }
        }
        for p in io::probes_where(|sys, ev| exists.contains(&(sys, ev))) {
            cat.push(p);
        }
        for p in profile::listed_probes() {
            cat.push(p);
        }
        for (sys, ev) in &events {
            cat.push_lazy(
                ProbeDesc::new("sdt", sys, "", ev),
                Source::Sdt(sys.clone(), ev.clone()),
            );
        }
        Ok(cat)
    }

    /// Enumerates tracefs (mounting it if needed), reading every format now.
    pub fn load_eager() -> Result<Catalog> {
        let root = tracefs::ensure_tracefs()?;
        Self::load_eager_from(&root)
    }

    /// Enumerates the tracefs at `root`, reading and parsing every event's format file now (what
    /// [`Catalog::load_from`] answers lazily; kept to check it against).
    pub fn load_eager_from(root: &Path) -> Result<Catalog> {
        let mut formats: HashMap<(String, String), EventFormat> = HashMap::new();
        let mut reads = 0;
        for (sys, ev) in tracefs::list_events(root)? {
            // A tracepoint that vanishes or whose format we cannot read is skipped; it is then
            // simply not offered (enabling it by name reports that it does not exist).
            if let Ok(f) = tracefs::read_format(root, &sys, &ev) {
                reads += 1;
                formats.insert((sys, ev), f);
            }
        }
        let mut cat = Catalog {
            root: root.to_path_buf(),
            reads: AtomicUsize::new(reads),
            ..Catalog::default()
        };
        for p in syscall::probes(&formats) {
            cat.push(p);
        }
        for p in proc_sched::probes(&formats) {
            cat.push(p);
        }
        if crate::features::fbt_support().is_ok() {
            let f = fbt::FbtCatalog::load(root).ok();
            if !cat.index.contains_key(&fbt::group_exit_desc()) {
                if let Some(exit) = f.as_ref().and_then(|f| f.group_exit_probe()) {
                    cat.push(exit);
                    if let Some(lwp_exit) = f.as_ref().and_then(|f| f.thread_exit_probe()) {
                        cat.replace(lwp_exit);
                    }
                }
            }
            // Listed as the lazy catalogue lists them (absent when this kernel cannot build one).
            for name in sched_fbt::names() {
                let probe = f.as_ref().and_then(|f| sched_fbt::probe(f, name));
                cat.push_entry(
                    sched_fbt::desc(name),
                    Source::FbtSched(name),
                    OnceLock::from(probe),
                );
            }
        }
        for p in io::probes(&formats)
            .into_iter()
            .chain(profile::listed_probes())
            .chain(sdt::probes(&formats))
        {
            cat.push(p);
        }
        Ok(cat)
    }

    /// Where `exit` is placed on `fbt`, `lwp-exit` is built lazily too: on `fbt` when it can
    /// fire before `exit` there, on its tracepoint otherwise (see [`Source::FbtThreadExit`]).
    fn thread_exit_follows_group_exit(&mut self) {
        let Some(&i) = self.index.get(&fbt::thread_exit_desc()) else {
            return;
        };
        let e = &mut self.entries[i];
        if let (Source::Built, Some(Some(p))) = (&e.source, e.built.take()) {
            e.source = Source::FbtThreadExit(Box::new(p));
        }
    }

    /// Puts `p` in place of the listed probe of its name (keeping its id), or lists it.
    fn replace(&mut self, p: Probe) {
        match self.index.get(&p.desc) {
            Some(&i) => {
                self.entries[i].source = Source::Built;
                self.entries[i].built = OnceLock::from(Some(p));
            }
            None => self.push(p),
        }
    }

    fn push(&mut self, p: Probe) {
        let desc = p.desc.clone();
        self.push_entry(desc, Source::Built, OnceLock::from(Some(p)));
    }

    fn push_lazy(&mut self, desc: ProbeDesc, source: Source) {
        self.push_entry(desc, source, OnceLock::new());
    }

    fn push_entry(&mut self, desc: ProbeDesc, source: Source, built: OnceLock<Option<Probe>>) {
        if !self.index.contains_key(&desc) {
            self.index.insert(desc.clone(), self.entries.len());
            self.entries.push(Entry {
                desc,
                source,
                built,
            });
        }
    }

    /// The format of one event, read and parsed at the first asking (`None` when it cannot be).
    fn format(&self, sys: &str, ev: &str) -> Option<Arc<EventFormat>> {
        let key = (sys.to_string(), ev.to_string());
        let mut formats = self.formats.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = formats.get(&key) {
            return f.clone();
        }
        let f = tracefs::read_format(&self.root, sys, ev).ok().map(Arc::new);
        if f.is_some() {
            self.reads.fetch_add(1, Ordering::Relaxed);
        }
        formats.insert(key, f.clone());
        f
    }

    /// Builds a listed probe from its formats.
    fn build(&self, e: &Entry) -> Option<Probe> {
        match &e.source {
            Source::Built => None,
            Source::SyscallEntry(name) => {
                let enter = self.format("syscalls", &format!("sys_enter_{name}"))?;
                let exit = self.format("syscalls", &format!("sys_exit_{name}"));
                Some(syscall::entry_probe(name, &enter, exit.as_deref()))
            }
            Source::SyscallReturn(name) => {
                let exit = self.format("syscalls", &format!("sys_exit_{name}"))?;
                syscall::return_probe(name, &exit)
            }
            Source::Sdt(sys, ev) => Some(sdt::probe(sys, ev, &*self.format(sys, ev)?)),
            Source::FbtGroupExit => self.fbt()?.group_exit_probe(),
            Source::FbtThreadExit(tracepoint) => Some(
                self.fbt()
                    .and_then(|f| f.thread_exit_probe())
                    .unwrap_or_else(|| (**tracepoint).clone()),
            ),
            Source::FbtSched(name) => sched_fbt::probe(self.fbt()?, name),
        }
    }

    /// The probe of an entry, built at the first asking.
    fn resolve<'a>(&self, e: &'a Entry) -> Option<&'a Probe> {
        e.built.get_or_init(|| self.build(e)).as_ref()
    }

    /// The tracefs root this catalogue was read from.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The names of every listed probe, in the catalogue's order (no format is read).
    pub fn descs(&self) -> impl Iterator<Item = &ProbeDesc> + '_ {
        self.entries.iter().map(|e| &e.desc)
    }

    /// How many probes are listed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no probe is listed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many format files this catalogue has read and parsed so far.
    pub fn formats_read(&self) -> usize {
        self.reads.load(Ordering::Relaxed)
    }

    /// Every listed probe, built (this reads the format of every one not built yet; a probe whose
    /// format cannot be read is left out). `profile-N`/`tick-N` exist for any N; the usual rates
    /// are listed.
    pub fn probes(&self) -> Vec<Probe> {
        self.entries
            .iter()
            .filter_map(|e| self.resolve(e).cloned())
            .collect()
    }

    /// The `fbt` functions of this kernel (read at the first asking), when it has the provider.
    pub fn fbt(&self) -> Option<&fbt::FbtCatalog> {
        self.fbt
            .get_or_init(|| {
                crate::features::fbt_support().ok()?;
                fbt::FbtCatalog::load(&self.root).ok()
            })
            .as_ref()
    }

    /// The names of the `fbt` and `rawfbt` probes matching `pattern` (none of a provider the
    /// kernel has not).
    pub fn fbt_descs(&self, pattern: &ProbeDesc) -> Vec<ProbeDesc> {
        let Some(f) = self.fbt() else {
            return Vec::new();
        };
        fbt::PROVIDERS
            .into_iter()
            .filter(|p| glob::matches(&pattern.provider, p))
            .filter(|p| *p != fbt::RAW_PROVIDER || crate::features::rawfbt_support().is_ok())
            .flat_map(|p| f.descs_matching(p, pattern))
            .collect()
    }

    /// The probe with exactly this name, including `profile-N`/`tick-N` for any rate.
    pub fn get(&self, desc: &ProbeDesc) -> Option<Probe> {
        if fbt::is_provider(&desc.provider) {
            return self.fbt()?.probe(desc).ok();
        }
        if let Some(i) = self.index.get(desc) {
            return self.entries.get(*i).and_then(|e| self.resolve(e).cloned());
        }
        if desc.provider == "profile" && desc.module.is_empty() && desc.function.is_empty() {
            return profile::probe(&desc.name);
        }
        None
    }

    /// Every probe matching a description whose parts may use `*`, `?` and `[...]` (an empty part
    /// matches everything). A `fbt` description on a kernel without kprobes or fentry is an error
    /// saying so; one that matches nothing is [`LinuxError::NoSuchProbe`]. Only the matching
    /// probes' formats are read.
    pub fn matching(&self, pattern: &ProbeDesc) -> Result<Vec<Probe>> {
        if glob::matches(&pattern.provider, fbt::PROVIDER) && !pattern.provider.is_empty() {
            crate::features::fbt_support()?;
        }
        if pattern.provider == fbt::RAW_PROVIDER {
            crate::features::rawfbt_support()?;
        }
        let mut out: Vec<Probe> = self
            .entries
            .iter()
            .filter(|e| {
                let d = &e.desc;
                glob::matches(&pattern.provider, &d.provider)
                    && glob::matches(&pattern.module, &d.module)
                    && glob::matches(&pattern.function, &d.function)
                    && glob::matches(&pattern.name, &d.name)
            })
            .filter_map(|e| self.resolve(e).cloned())
            .collect();
        out.extend(self.fbt_matching(pattern)?);
        if out.is_empty() && !glob::has_meta(&pattern.name) {
            if let Some(p) = self.get(pattern) {
                out.push(p);
            }
        }
        if out.is_empty() {
            return Err(LinuxError::NoSuchProbe(pattern.to_string()));
        }
        Ok(out)
    }
}

impl Catalog {
    /// The `fbt` probes matching `pattern`: functions that cannot be traced are left out of a
    /// glob, and named alone they are an error saying why.
    fn fbt_matching(&self, pattern: &ProbeDesc) -> Result<Vec<Probe>> {
        let descs = self.fbt_descs(pattern);
        let exact =
            descs.len() == 1 && !glob::has_meta(&pattern.function) && !pattern.function.is_empty();
        let Some(f) = self.fbt() else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(descs.len());
        for d in &descs {
            match f.probe(d) {
                Ok(p) => out.push(p),
                Err(reason) if exact => {
                    return Err(LinuxError::Untraceable {
                        probe: d.to_string(),
                        reason,
                    })
                }
                Err(_) => {}
            }
        }
        Ok(out)
    }
}

/// The D type for a tracepoint field: pointers and plain integer types keep their C name; anything
/// else becomes the signed or unsigned integer of its size.
pub fn dtype_for(f: &tracefs::Field) -> String {
    if f.data_loc || f.array_len.is_some() && f.ctype.starts_with("char") {
        return "string".into();
    }
    if f.ctype.contains('*') || f.array_len.is_some() {
        return f.ctype.clone();
    }
    let bits = f.size * 8;
    match (f.signed, f.size) {
        (true, 1 | 2 | 4 | 8) => format!("int{bits}_t"),
        (false, 1 | 2 | 4 | 8) => format!("uint{bits}_t"),
        _ => f.ctype.clone(),
    }
}

/// The argument source and copy for one tracepoint field.
pub fn field_arg(f: &tracefs::Field) -> (ArgSource, ProbeArg) {
    use crate::capture::{AddrBase, AddrExpr, MemKind};
    let dtype = dtype_for(f);
    if f.data_loc {
        let copy = CopyRequest {
            addr: AddrExpr {
                base: AddrBase::DataLoc(f.offset as u16),
                offset: 0,
                derefs: Vec::new(),
                user_derefs: Vec::new(),
                index: None,
            },
            kind: MemKind::KernelString,
            size: 256,
            size_arg: None,
        };
        return (
            ArgSource::Zero,
            ProbeArg {
                native: f.ctype.clone(),
                dtype,
                copy: Some(copy),
            },
        );
    }
    if f.array_len.is_some() || !matches!(f.size, 1 | 2 | 4 | 8) {
        let kind = if dtype == "string" {
            MemKind::KernelString
        } else {
            MemKind::KernelBytes
        };
        let copy = CopyRequest {
            addr: AddrExpr {
                base: AddrBase::Context(f.offset as u16),
                offset: 0,
                derefs: Vec::new(),
                user_derefs: Vec::new(),
                index: None,
            },
            kind,
            size: f.size.clamp(1, 8192) as u32,
            size_arg: None,
        };
        return (
            ArgSource::Zero,
            ProbeArg {
                native: f.ctype.clone(),
                dtype,
                copy: Some(copy),
            },
        );
    }
    (
        ArgSource::Field {
            offset: f.offset as u16,
            size: f.size as u8,
            signed: f.signed,
        },
        ProbeArg {
            native: f.ctype.clone(),
            dtype,
            copy: None,
        },
    )
}
