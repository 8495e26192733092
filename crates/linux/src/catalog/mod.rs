//! The probe catalogue: every probe this kernel offers, named as DTrace on Linux names them
//! (`syscall:vmlinux:read:entry`, `sdt:sched::sched_switch`, `proc:::exec-success`,
//! `sched:::on-cpu`, `io:::start`, `profile:::profile-997`), each with typed arguments and what it takes to attach it.

pub mod glob;
pub mod io;
pub mod proc_sched;
pub mod profile;
pub mod sdt;
pub mod syscall;
pub mod syscall_nr;

use crate::capture::{ArgSource, Condition, CopyRequest, Identity};
use crate::error::{LinuxError, Result};
use crate::tracefs::{self, EventFormat};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

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
    /// A cpu-clock perf event.
    Profile {
        /// Period in nanoseconds.
        period_ns: u64,
        /// Every CPU (`profile-N`) or one (`tick-N`).
        all_cpus: bool,
    },
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

/// Every probe of the running kernel.
#[derive(Debug, Default)]
pub struct Catalog {
    probes: Vec<Probe>,
    index: HashMap<ProbeDesc, usize>,
    root: PathBuf,
}

impl Catalog {
    /// Enumerates tracefs (mounting it if needed) into probes.
    pub fn load() -> Result<Catalog> {
        let root = tracefs::ensure_tracefs()?;
        Self::load_from(&root)
    }

    /// Enumerates the tracefs at `root`.
    pub fn load_from(root: &Path) -> Result<Catalog> {
        let mut formats: HashMap<(String, String), EventFormat> = HashMap::new();
        for (sys, ev) in tracefs::list_events(root)? {
            // A tracepoint that vanishes or whose format we cannot read is skipped; it is then
            // simply not offered (enabling it by name reports that it does not exist).
            if let Ok(f) = tracefs::read_format(root, &sys, &ev) {
                formats.insert((sys, ev), f);
            }
        }
        let mut probes = Vec::new();
        probes.extend(syscall::probes(&formats));
        probes.extend(proc_sched::probes(&formats));
        probes.extend(io::probes(&formats));
        probes.extend(profile::listed_probes());
        probes.extend(sdt::probes(&formats));
        let mut cat = Catalog {
            probes: Vec::new(),
            index: HashMap::new(),
            root: root.to_path_buf(),
        };
        for p in probes {
            cat.push(p);
        }
        Ok(cat)
    }

    fn push(&mut self, p: Probe) {
        if !self.index.contains_key(&p.desc) {
            self.index.insert(p.desc.clone(), self.probes.len());
            self.probes.push(p);
        }
    }

    /// The tracefs root this catalogue was read from.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every listed probe (`profile-N`/`tick-N` exist for any N; the usual rates are listed).
    pub fn probes(&self) -> &[Probe] {
        &self.probes
    }

    /// The probe with exactly this name, including `profile-N`/`tick-N` for any rate.
    pub fn get(&self, desc: &ProbeDesc) -> Option<Probe> {
        if let Some(i) = self.index.get(desc) {
            return self.probes.get(*i).cloned();
        }
        if desc.provider == "profile" && desc.module.is_empty() && desc.function.is_empty() {
            return profile::probe(&desc.name);
        }
        None
    }

    /// Every probe matching a description whose parts may use `*`, `?` and `[...]` (an empty part
    /// matches everything). A `fbt` description on a kernel without kprobes or fentry is an error
    /// saying so; one that matches nothing is [`LinuxError::NoSuchProbe`].
    pub fn matching(&self, pattern: &ProbeDesc) -> Result<Vec<Probe>> {
        if glob::matches(&pattern.provider, "fbt") && !pattern.provider.is_empty() {
            crate::features::fbt_support()?;
        }
        let mut out: Vec<Probe> = self
            .probes
            .iter()
            .filter(|p| {
                glob::matches(&pattern.provider, &p.desc.provider)
                    && glob::matches(&pattern.module, &p.desc.module)
                    && glob::matches(&pattern.function, &p.desc.function)
                    && glob::matches(&pattern.name, &p.desc.name)
            })
            .cloned()
            .collect();
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
