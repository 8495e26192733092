//! The `fbt` provider's catalogue: `fbt:<module>:<function>:entry` and `:return` for every function
//! the kernel lets ftrace trace (`available_filter_functions`, whose `[module]` tags name the module;
//! `vmlinux` otherwise), attached as fentry/fexit programs (BPF trampolines) on the function's BTF
//! id, or as kprobes where the kernel has no trampolines (`crate::kprobe`: the same probes, their
//! arguments read from the registers; untyped where the kernel has no BTF). A module's functions
//! are typed from the module's split BTF (`/sys/kernel/btf/<module>`) and placed on trampolines
//! by the module's BTF object, or with kprobes, untyped, where the module has no BTF.
//! `args[]` are typed from the function's BTF prototype and `arg0..` are the raw values; a
//! return probe has the return value in `arg1` and `args[1]` (its `arg0`, the offset of the return
//! instruction in DTrace, is 0: a trampoline does not know which return was taken).
//!
//! `rawfbt` offers the same functions and also the synthetic ones (names the compiler made, with a
//! `.`: `foo.isra.0`, `foo.constprop.0`), which `fbt` leaves out as DTrace for Linux does; its
//! probes are always kprobes and untyped (`arg0..` only).
//!
//! Listing reads only `available_filter_functions`; the kernel's BTF is read the first time a probe
//! is built.

use super::{glob, AttachPoint, Probe, ProbeArg, ProbeDesc};
use crate::btf::{Btf, FuncSignature};
use crate::capture::{ArgSource, Condition};
use crate::error::{LinuxError, Result};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::OnceLock;

/// The most arguments a BPF trampoline passes on x86-64.
pub const MAX_TRAMPOLINE_ARGS: usize = 6;

/// Functions the kernel refuses to build trampolines for, because it calls them around BPF programs
/// themselves (the verifier's `btf_id_deny` set, over the kernels we know).
pub const DENIED: &[&str] = &[
    "migrate_disable",
    "migrate_enable",
    "rcu_read_unlock_strict",
    "preempt_count_add",
    "preempt_count_sub",
    "__rcu_read_lock",
    "__rcu_read_unlock",
];

/// The module name of functions built into the kernel image.
pub const KERNEL_MODULE: &str = "vmlinux";

/// The provider of the kernel's functions, typed where the kernel's BTF allows.
pub const PROVIDER: &str = "fbt";
/// The provider of every traceable function, synthetic ones included, on kprobes, untyped.
pub const RAW_PROVIDER: &str = "rawfbt";
/// Both, in the order they are listed.
pub const PROVIDERS: [&str; 2] = [PROVIDER, RAW_PROVIDER];

/// Whether `provider` is `fbt` or `rawfbt`.
pub fn is_provider(provider: &str) -> bool {
    PROVIDERS.contains(&provider)
}

/// Whether `function` is a synthetic function (a copy the compiler made and renamed, such as
/// `foo.isra.0`), which only `rawfbt` offers.
pub fn synthetic(function: &str) -> bool {
    function.contains('.')
}

/// The BTF of the kernel or of one module (split over the kernel's), and its functions by name.
struct FbtTypes {
    btf: std::sync::Arc<Btf>,
    ids: HashMap<String, u32>,
    /// Names of several functions in the BTF (the kernel attaches by name, to the first).
    several: HashSet<String>,
}

impl FbtTypes {
    fn of(btf: std::sync::Arc<Btf>) -> FbtTypes {
        let (ids, several) = btf.func_index();
        FbtTypes { btf, ids, several }
    }
}

impl std::fmt::Debug for FbtTypes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FbtTypes({} functions)", self.ids.len())
    }
}

/// Every traceable function of the running kernel.
#[derive(Debug, Default)]
pub struct FbtCatalog {
    /// The functions ftrace lists: `(module, function)` in the kernel's order, each once, and
    /// the pairs that name several functions (a trampoline attaches by name, so to only one).
    listed: std::sync::Arc<FilterFunctions>,
    /// The pairs, to look one up.
    index: HashSet<(String, String)>,
    types: OnceLock<std::result::Result<FbtTypes, String>>,
    /// Each module's BTF (`None` where it has none), read the first time one of its probes is
    /// built.
    module_types: std::sync::Mutex<HashMap<String, std::sync::Arc<Option<FbtTypes>>>>,
    /// Names several kernel symbols have (kallsyms), read when kprobes are asked for: a kprobe
    /// placed by name refuses them.
    several_symbols: OnceLock<std::result::Result<HashSet<String>, String>>,
}

/// A function's module and name.
pub type ModFunc = (String, String);

/// ftrace's traceable functions (`available_filter_functions`), parsed.
#[derive(Debug, Default)]
pub struct FilterFunctions {
    /// Each `(module, function)` once, in the kernel's order.
    pub funcs: Vec<ModFunc>,
    /// Those listed more than once (several static functions of one name).
    pub twice: HashSet<ModFunc>,
}

/// The traceable functions of the tracefs at `root`, read and parsed once while anyone holds
/// them (the list is a few MB on a distribution kernel): the fbt catalogue holds them, and the
/// syscall functions' trampolines (`crate::syscall_fentry`) read them too.
pub fn filter_functions(root: &Path) -> Result<std::sync::Arc<FilterFunctions>> {
    static SHARED: crate::held::HeldOnce<std::path::PathBuf, FilterFunctions> =
        crate::held::HeldOnce::new();
    SHARED.get_or_load(root.to_path_buf(), |root| {
        let p = root.join("available_filter_functions");
        let text = std::fs::read_to_string(&p)
            .map_err(|e| LinuxError::from_io(p.display().to_string(), e))?;
        let (funcs, twice) = parse_functions(&text);
        Ok(FilterFunctions { funcs, twice })
    })
}

/// The `(module, function)` pairs of an `available_filter_functions` text (`name` or
/// `name [module]` per line), each once, in the text's order, and those listed more than once
/// (several static functions of one name). Lines that are not of that shape are skipped.
pub fn parse_functions(text: &str) -> (Vec<ModFunc>, HashSet<ModFunc>) {
    let mut seen = HashSet::new();
    let mut twice = HashSet::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let Some(func) = words.next() else { continue };
        let module = match words.next() {
            None => KERNEL_MODULE,
            Some(m) => match m.strip_prefix('[').and_then(|m| m.strip_suffix(']')) {
                Some(m) if !m.is_empty() && words.next().is_none() => m,
                _ => continue,
            },
        };
        if func.contains(':') || module.contains(':') {
            continue;
        }
        if seen.insert((module, func)) {
            out.push((module.to_string(), func.to_string()));
        } else {
            twice.insert((module.to_string(), func.to_string()));
        }
    }
    (out, twice)
}

impl FbtCatalog {
    /// Reads the functions ftrace can trace from the tracefs at `root`.
    pub fn load(root: &Path) -> Result<FbtCatalog> {
        Ok(Self::of(filter_functions(root)?))
    }

    /// A catalogue of these `(module, function)` pairs.
    pub fn from_functions(funcs: Vec<(String, String)>) -> FbtCatalog {
        Self::of(std::sync::Arc::new(FilterFunctions {
            funcs,
            twice: HashSet::new(),
        }))
    }

    fn of(listed: std::sync::Arc<FilterFunctions>) -> FbtCatalog {
        FbtCatalog {
            index: listed.funcs.iter().cloned().collect(),
            listed,
            types: OnceLock::new(),
            module_types: Default::default(),
            several_symbols: OnceLock::new(),
        }
    }

    /// How many functions are listed (each has an entry and a return probe).
    pub fn function_count(&self) -> usize {
        self.listed.funcs.len()
    }

    /// The names of the probes of `provider` (`fbt` or `rawfbt`) matching `pattern` (its provider
    /// is not looked at), functions in the kernel's order, entry before return.
    pub fn descs_matching(&self, provider: &str, pattern: &ProbeDesc) -> Vec<ProbeDesc> {
        let raw = provider == RAW_PROVIDER;
        let names: Vec<&str> = ["entry", "return"]
            .into_iter()
            .filter(|n| glob::matches(&pattern.name, n))
            .collect();
        let mut out = Vec::new();
        if names.is_empty() {
            return out;
        }
        for (m, f) in &self.listed.funcs {
            if (raw || !synthetic(f))
                && glob::matches(&pattern.module, m)
                && glob::matches(&pattern.function, f)
            {
                for n in &names {
                    out.push(ProbeDesc::new(provider, m, f, n));
                }
            }
        }
        out
    }

    /// Whether `module` has a traceable function `function`.
    pub fn has_function(&self, module: &str, function: &str) -> bool {
        self.index
            .contains(&(module.to_string(), function.to_string()))
    }

    /// The traceable functions of `module` whose names start with `prefix`, in the kernel's
    /// order.
    pub fn functions_starting_with(&self, module: &str, prefix: &str) -> Vec<String> {
        self.listed
            .funcs
            .iter()
            .filter(|(m, f)| m == module && f.starts_with(prefix))
            .map(|(_, f)| f.clone())
            .collect()
    }

    fn several_symbols(&self) -> std::result::Result<&HashSet<String>, String> {
        self.several_symbols
            .get_or_init(|| {
                let syms =
                    crate::symbols::kallsyms::KernelSymbols::load().map_err(|e| e.to_string())?;
                let several = syms.names_defined_more_than_once();
                Ok(several.into_iter().map(str::to_string).collect())
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    fn types(&self) -> std::result::Result<&FbtTypes, String> {
        self.types
            .get_or_init(|| {
                let btf = Btf::load_vmlinux().map_err(|e| e.to_string())?;
                Ok(FbtTypes::of(btf))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Module `module`'s BTF (`/sys/kernel/btf/<module>`, split over the kernel's), read once;
    /// `None` where the module publishes none or the kernel has no BTF.
    fn module_types(&self, module: &str) -> std::sync::Arc<Option<FbtTypes>> {
        let mut cache = self.module_types.lock().unwrap_or_else(|p| p.into_inner());
        let entry = cache.entry(module.to_string()).or_insert_with(|| {
            let types = self.types().ok().and_then(|k| {
                Btf::load_module(module, std::sync::Arc::clone(&k.btf))
                    .ok()
                    .map(|m| FbtTypes::of(std::sync::Arc::new(m)))
            });
            std::sync::Arc::new(types)
        });
        std::sync::Arc::clone(entry)
    }

    /// Whether a probe of `desc`'s function is a return probe, once the function is known to be
    /// traceable and to name one function; otherwise why it cannot be traced.
    fn check(&self, desc: &ProbeDesc) -> std::result::Result<bool, String> {
        let ret = match desc.name.as_str() {
            "entry" => false,
            "return" => true,
            _ => {
                return Err(format!(
                    "{} probes are named entry or return, not {:?}",
                    desc.provider, desc.name
                ))
            }
        };
        if !self
            .index
            .contains(&(desc.module.clone(), desc.function.clone()))
        {
            return Err(format!(
                "{}:{} is not a function ftrace can trace (available_filter_functions)",
                desc.module, desc.function
            ));
        }
        if self
            .listed
            .twice
            .contains(&(desc.module.clone(), desc.function.clone()))
        {
            return Err(format!(
                "not yet supported: {} names several functions of {}",
                desc.function, desc.module
            ));
        }
        Ok(ret)
    }

    /// Refuses a function several kernel symbols are named after (kallsyms): a kprobe placed by
    /// name cannot tell them apart.
    fn kprobe_by_name(&self, function: &str) -> std::result::Result<(), String> {
        match self.several_symbols()?.contains(function) {
            true => Err(format!(
                "not yet supported: {function} names several functions of the kernel (kallsyms), \
                 which a kprobe cannot tell apart"
            )),
            false => Ok(()),
        }
    }

    /// The probe `desc` names (`fbt` or `rawfbt`), or why it cannot be traced.
    pub fn probe(&self, desc: &ProbeDesc) -> std::result::Result<Probe, String> {
        if desc.provider == RAW_PROVIDER {
            return self.raw_probe(desc);
        }
        if synthetic(&desc.function) {
            return Err(format!(
                "{} is a synthetic function (a copy the compiler made), which fbt does not \
                 trace: rawfbt does",
                desc.function
            ));
        }
        let ret = self.check(desc)?;
        if DENIED.contains(&desc.function.as_str()) {
            return Err(format!(
                "the kernel runs BPF programs inside {}, so it cannot be traced with them",
                desc.function
            ));
        }
        let module = desc.module != KERNEL_MODULE;
        let kprobes = crate::features::fbt_mechanism().map_err(|e| e.to_string())?
            == crate::features::FbtMechanism::Kprobe;
        let kprobe_by_name = || self.kprobe_by_name(&desc.function);
        if kprobes {
            kprobe_by_name()?;
        }
        if module {
            // A module's functions are typed from the module's BTF where it publishes one (and
            // placed on trampolines by its BTF object, or with kprobes); otherwise they are
            // placed with kprobes, untyped.
            let types = self.module_types(&desc.module);
            let typed = types
                .as_ref()
                .as_ref()
                .filter(|t| !t.several.contains(&desc.function))
                .and_then(|t| Some((t, *t.ids.get(&desc.function)?)));
            if let Some((t, id)) = typed {
                let sig = t
                    .btf
                    .func_signature(id)
                    .ok_or_else(|| format!("{}: malformed BTF prototype", desc.function))?;
                if let Ok(p) = probe_of(desc, id, &sig, ret) {
                    return Ok(p);
                }
            }
            kprobe_by_name()?;
            if !crate::kprobe::available() {
                return Err(format!(
                    "{} of {} cannot be traced: the module has no BTF for it and this kernel \
                     has no kprobes",
                    desc.function, desc.module
                ));
            }
            return Ok(untyped_probe(desc, ret));
        }
        let types = match self.types() {
            Ok(t) => t,
            // kprobes need no BTF: the registers are the arguments, untyped.
            Err(_) if !crate::features::have_btf() => return Ok(untyped_probe(desc, ret)),
            Err(e) => return Err(e),
        };
        if types.several.contains(&desc.function) {
            return Err(format!(
                "not yet supported: {} names several functions of the kernel",
                desc.function
            ));
        }
        let id = *types.ids.get(&desc.function).ok_or_else(|| {
            format!(
                "{} is not in the kernel's BTF (inlined or without type information)",
                desc.function
            )
        })?;
        let sig = types
            .btf
            .func_signature(id)
            .ok_or_else(|| format!("{}: malformed BTF prototype", desc.function))?;
        probe_of(desc, id, &sig, ret)
    }
}

impl FbtCatalog {
    /// The `rawfbt` probe `desc` names: a kprobe on the function, synthetic or not, whose
    /// arguments are `arg0..arg5` (the argument registers) and, at a return, the return value in
    /// `arg1`, with no types (`args[]` is not offered).
    fn raw_probe(&self, desc: &ProbeDesc) -> std::result::Result<Probe, String> {
        let ret = self.check(desc)?;
        crate::features::rawfbt_support().map_err(|e| e.to_string())?;
        self.kprobe_by_name(&desc.function)?;
        let mut p = untyped_probe(desc, ret);
        p.args.clear();
        Ok(p)
    }
}

/// How the probe of function `btf_id` is placed: on a trampoline (by its id in the kernel's or
/// the module's BTF object) only when [`FbtCatalog::probe`] typed it from BTF (`btf_id` not 0)
/// and the kernel has trampolines; otherwise with kprobes (a module without BTF, a kernel without
/// BTF, any `rawfbt` probe).
pub fn mechanism(btf_id: u32) -> Result<crate::features::FbtMechanism> {
    match btf_id {
        0 => Ok(crate::features::FbtMechanism::Kprobe),
        _ => crate::features::fbt_mechanism(),
    }
}

/// `proc:::exit`.
pub fn group_exit_desc() -> ProbeDesc {
    ProbeDesc::new("proc", KERNEL_MODULE, "", "exit")
}

/// `proc:::lwp-exit`.
pub fn thread_exit_desc() -> ProbeDesc {
    ProbeDesc::new("proc", KERNEL_MODULE, "", "lwp-exit")
}

/// The function `proc:::exit` fires from where the exit tracepoint has no `group_dead` field: it
/// is called once by every exiting thread, after its exit code is set, with `group_dead` as its
/// second argument (true for the thread group's last thread). It runs before the exit
/// tracepoint, so `proc:::lwp-exit` fires from it too where it can fire first (see
/// [`FbtCatalog::thread_exit_probe`]).
pub const GROUP_EXIT_FUNCTION: &str = "taskstats_exit";

impl FbtCatalog {
    /// The place of [`GROUP_EXIT_FUNCTION`]'s entry (module, function, BTF id), when it is typed
    /// as expected (a second argument of an integer type).
    fn group_exit_function(&self) -> Option<(String, String, u32)> {
        let d = ProbeDesc::new("fbt", KERNEL_MODULE, GROUP_EXIT_FUNCTION, "entry");
        let p = self.probe(&d).ok()?;
        if p.args.len() != 2 || !p.args[1].dtype.contains("int") {
            return None;
        }
        match p.attach {
            AttachPoint::Fbt {
                module,
                function,
                btf_id,
                ..
            } => Some((module, function, btf_id)),
            _ => None,
        }
    }

    /// Whether `exit` is placed on [`GROUP_EXIT_FUNCTION`]'s return: with trampolines (an fexit
    /// program sees the arguments), so that `lwp-exit`, on its entry, always fires first.
    fn group_exit_at_return(btf_id: u32) -> bool {
        matches!(mechanism(btf_id), Ok(crate::features::FbtMechanism::Fentry))
    }

    /// `proc:::exit` (with its exit reason) on [`GROUP_EXIT_FUNCTION`] when its `group_dead`
    /// argument is true: at its return with trampolines, at its entry with kprobes (a kretprobe
    /// cannot see the argument); `None` when that function cannot be traced here.
    pub fn group_exit_probe(&self) -> Option<Probe> {
        let (module, function, btf_id) = self.group_exit_function()?;
        Some(Probe {
            desc: group_exit_desc(),
            args: vec![ProbeArg {
                native: "int".into(),
                dtype: "int".into(),
                copy: None,
            }],
            attach: AttachPoint::Fbt {
                module,
                function,
                btf_id,
                ret: Self::group_exit_at_return(btf_id),
                args: vec![ArgSource::ExitReason],
                // group_dead (an int, argument 1) is not 0.
                conditions: vec![Condition::MaskSet {
                    offset: 8,
                    size: 4,
                    mask: u32::MAX,
                }],
                also: Vec::new(),
            },
        })
    }

    /// `proc:::lwp-exit` on [`GROUP_EXIT_FUNCTION`]'s entry, where `exit` is on its return (see
    /// [`FbtCatalog::group_exit_probe`]): a thread's `lwp-exit` then fires before its process's
    /// `exit` whatever order the kernel runs programs in. `None` elsewhere (`lwp-exit` stays on the
    /// exit tracepoint; with kprobes, after `exit`, which runs earlier in the exiting thread).
    pub fn thread_exit_probe(&self) -> Option<Probe> {
        let (module, function, btf_id) = self.group_exit_function()?;
        if !Self::group_exit_at_return(btf_id) {
            return None;
        }
        Some(Probe {
            desc: thread_exit_desc(),
            args: Vec::new(),
            attach: AttachPoint::Fbt {
                module,
                function,
                btf_id,
                ret: false,
                args: Vec::new(),
                conditions: Vec::new(),
                also: Vec::new(),
            },
        })
    }
}

/// The probe of a function the kernel's BTF does not describe (kprobes only): arguments `arg0` to
/// `arg5` are the argument registers as `uint64_t`, and a return probe's `arg1` is the return
/// register.
pub fn untyped_probe(desc: &ProbeDesc, ret: bool) -> Probe {
    let arg = |t: &str| ProbeArg {
        native: t.into(),
        dtype: t.into(),
        copy: None,
    };
    let (args, sources) = if ret {
        (
            vec![arg("int"), arg("uint64_t")],
            vec![ArgSource::Zero, ArgSource::FuncRet],
        )
    } else {
        (
            (0..MAX_TRAMPOLINE_ARGS).map(|_| arg("uint64_t")).collect(),
            (0..MAX_TRAMPOLINE_ARGS as u8)
                .map(ArgSource::FuncArg)
                .collect(),
        )
    };
    Probe {
        desc: desc.clone(),
        args,
        attach: AttachPoint::Fbt {
            module: desc.module.clone(),
            function: desc.function.clone(),
            btf_id: 0,
            ret,
            args: sources,
            conditions: Vec::new(),
            also: Vec::new(),
        },
    }
}

/// The probe of function BTF id `id` with signature `sig`.
pub fn probe_of(
    desc: &ProbeDesc,
    id: u32,
    sig: &FuncSignature,
    ret: bool,
) -> std::result::Result<Probe, String> {
    let f = &desc.function;
    if sig.variadic {
        return Err(format!(
            "{f} takes variable arguments, which BPF trampolines do not pass"
        ));
    }
    if sig.params.len() > MAX_TRAMPOLINE_ARGS {
        return Err(format!(
            "{f} takes {} arguments; BPF trampolines pass at most {MAX_TRAMPOLINE_ARGS}",
            sig.params.len()
        ));
    }
    if let Some(p) = sig.params.iter().find(|p| !p.scalar) {
        return Err(format!(
            "{f} takes a {} by value, which BPF trampolines do not pass",
            p.native
        ));
    }
    // A trampoline is built for the whole prototype: a struct returned by value rules out entry
    // and return alike.
    if let Some(r) = sig.ret.as_ref().filter(|r| !r.scalar) {
        return Err(format!(
            "{f} returns a {} by value, which BPF trampolines do not pass",
            r.native
        ));
    }
    let nargs = sig.params.len() as u8;
    let arg = |native: &str, dtype: &str| ProbeArg {
        native: native.into(),
        dtype: dtype.into(),
        copy: None,
    };
    let (args, sources) = if ret {
        let mut args = vec![arg("int", "int")];
        let mut sources = vec![ArgSource::Zero];
        if let Some(r) = &sig.ret {
            args.push(arg(&r.native, &r.dtype));
            sources.push(ArgSource::FuncRet);
        }
        (args, sources)
    } else {
        let args = sig
            .params
            .iter()
            .map(|p| arg(&p.native, &p.dtype))
            .collect();
        let sources = (0..nargs).map(ArgSource::FuncArg).collect();
        (args, sources)
    };
    Ok(Probe {
        desc: desc.clone(),
        args,
        attach: AttachPoint::Fbt {
            module: desc.module.clone(),
            function: desc.function.clone(),
            btf_id: id,
            ret,
            args: sources,
            conditions: Vec::new(),
            also: Vec::new(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::ValueType;

    #[test]
    fn functions_are_read_with_their_modules_once() {
        let (f, twice) =
            parse_functions("vfs_read\nvfs_read\next4_file_read_iter [ext4]\n\nbad [x] y\nz [] \n");
        assert!(twice.contains(&("vmlinux".to_string(), "vfs_read".to_string())));
        assert_eq!(twice.len(), 1);
        assert_eq!(
            f,
            vec![
                ("vmlinux".to_string(), "vfs_read".to_string()),
                ("ext4".to_string(), "ext4_file_read_iter".to_string()),
            ]
        );
    }

    #[test]
    fn descriptions_match_globs_entry_before_return() {
        let c = FbtCatalog::from_functions(parse_functions("vfs_read\nvfs_write\nksys_read\n").0);
        let d = c.descs_matching(PROVIDER, &ProbeDesc::parse("fbt::vfs_*:"));
        let names: Vec<String> = d.iter().map(|d| d.to_string()).collect();
        assert_eq!(
            names,
            [
                "fbt:vmlinux:vfs_read:entry",
                "fbt:vmlinux:vfs_read:return",
                "fbt:vmlinux:vfs_write:entry",
                "fbt:vmlinux:vfs_write:return"
            ]
        );
        assert!(c
            .descs_matching(PROVIDER, &ProbeDesc::parse("fbt::vfs_read:start"))
            .is_empty());
        assert!(c
            .probe(&ProbeDesc::parse("fbt:vmlinux:nope:entry"))
            .is_err());
    }

    fn vt(native: &str, dtype: &str, scalar: bool) -> ValueType {
        ValueType {
            native: native.into(),
            dtype: dtype.into(),
            scalar,
        }
    }

    #[test]
    fn untyped_probes_read_the_argument_registers_and_return_value() {
        let d = ProbeDesc::parse("fbt:vmlinux:vfs_read:entry");
        let e = untyped_probe(&d, false);
        assert_eq!(e.args.len(), 6);
        assert!(e.args.iter().all(|a| a.dtype == "uint64_t"));
        let AttachPoint::Fbt { args, ret, .. } = &e.attach else {
            panic!("{:?}", e.attach)
        };
        assert!(!ret);
        assert_eq!(args[5], ArgSource::FuncArg(5));
        let r = untyped_probe(&ProbeDesc::parse("fbt:vmlinux:vfs_read:return"), true);
        assert_eq!(r.args[1].dtype, "uint64_t");
        let AttachPoint::Fbt { args, ret, .. } = &r.attach else {
            panic!("{:?}", r.attach)
        };
        assert!(ret);
        assert_eq!(args, &vec![ArgSource::Zero, ArgSource::FuncRet]);
    }

    #[test]
    fn return_value_is_arg1_and_limits_are_named() {
        let sig = FuncSignature {
            params: vec![
                vt("struct file *", "struct file *", true),
                vt("size_t", "uint64_t", true),
            ],
            ret: Some(vt("ssize_t", "int64_t", true)),
            variadic: false,
        };
        let d = ProbeDesc::parse("fbt:vmlinux:vfs_read:return");
        let p = probe_of(&d, 7, &sig, true).unwrap();
        assert_eq!(p.args[1].dtype, "int64_t");
        assert_eq!(
            p.attach,
            AttachPoint::Fbt {
                module: "vmlinux".into(),
                function: "vfs_read".into(),
                btf_id: 7,
                ret: true,
                args: vec![ArgSource::Zero, ArgSource::FuncRet],
                conditions: Vec::new(),
                also: Vec::new(),
            }
        );
        let e = probe_of(&d, 7, &sig, false).unwrap();
        assert_eq!(e.args[0].native, "struct file *");
        let mut wide = sig.clone();
        wide.params = vec![vt("int", "int32_t", true); 7];
        assert!(probe_of(&d, 7, &wide, false)
            .unwrap_err()
            .contains("at most 6"));
        let mut varargs = sig.clone();
        varargs.variadic = true;
        assert!(probe_of(&d, 7, &varargs, true)
            .unwrap_err()
            .contains("variable arguments"));
        let mut byval = sig;
        byval.params[0] = vt("struct timespec64", "struct timespec64", false);
        assert!(probe_of(&d, 7, &byval, false)
            .unwrap_err()
            .contains("by value"));
    }
}
