//! What the D compiler of `dtrace(1)` knows about the running system: the kernel's C types (vmlinux
//! BTF converted to CTF) for `curthread->pid`, `curpsinfo`, casts to kernel structs and typed probe
//! arguments; and the `args[]` types of the Linux providers' probes. When dtrace will compile
//! something, the conversion (about 35 ms of CPU) runs on a thread of its own from the start, so
//! that it overlaps the rest of startup (listing the probe catalogue, compiling); when it will
//! not (a plain `-l` listing), nothing is converted unless a lookup asks for it. A compilation
//! waits for the kernel's types only when it looks a type up in them, so a program that uses none
//! starts as fast as without them. The converted types live until the process exits and are never
//! freed (freeing some 100,000 types at exit would cost more than a third of the conversion).
//! A kernel module's types (its split BTF) join them once one of the module's probes is looked
//! at (`fbt:ext4:...`), consulted after the kernel's own.

use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use dtrace_compiler::ctf_types::CtfTypes;
use dtrace_compiler::types::{TypeId, TypeTable};
use dtrace_compiler::{ProbeInfo, TypeSource};
use dtrace_ctf::{Container, KernelTypes, SYS_KERNEL_BTF};
use dtrace_dif::program::ProbeDesc;
use std::collections::HashMap;

/// The kernel's types, loading in the background (or on demand) until first asked for.
pub struct KernelTypeLoader {
    loading: Mutex<Option<JoinHandle<Option<Arc<KernelTypes>>>>>,
    loaded: OnceLock<Option<Arc<KernelTypes>>>,
    /// Modules whose types the compiler consults after the kernel's, in the order they were asked
    /// for.
    modules: Mutex<Vec<String>>,
}

/// Reads and converts `/sys/kernel/btf/vmlinux` (a kernel without BTF gives no types), keeping the
/// result for the life of the process: one reference is never released, so the last owner to
/// go (at exit) does not spend its time freeing every type.
fn load_kept() -> Option<Arc<KernelTypes>> {
    let types = Arc::new(KernelTypes::load(Path::new(SYS_KERNEL_BTF)).ok()?);
    std::mem::forget(Arc::clone(&types));
    Some(types)
}

impl KernelTypeLoader {
    /// Starts reading `/sys/kernel/btf/vmlinux` on a thread of its own, for a process that will
    /// compile D (a kernel without BTF gives no types).
    pub fn start() -> Arc<KernelTypeLoader> {
        let has_btf = Path::new(SYS_KERNEL_BTF).join("vmlinux").exists();
        let handle = has_btf.then(|| {
            std::thread::Builder::new()
                .name("dtrace-ktypes".into())
                .spawn(load_kept)
                .ok()
        });
        Arc::new(KernelTypeLoader {
            loading: Mutex::new(handle.flatten()),
            loaded: OnceLock::new(),
            modules: Mutex::new(Vec::new()),
        })
    }

    /// A loader that converts nothing until a lookup first asks for the kernel's types, for a
    /// process that will most likely compile nothing.
    pub fn on_demand() -> Arc<KernelTypeLoader> {
        Arc::new(KernelTypeLoader {
            loading: Mutex::new(None),
            loaded: OnceLock::new(),
            modules: Mutex::new(Vec::new()),
        })
    }

    /// The kernel's types, waiting for the load to finish (or loading them now, on demand).
    pub fn get(&self) -> Option<Arc<Container>> {
        self.kernel().map(|k| Arc::clone(&k.vmlinux))
    }

    /// Lets compilations find module `module`'s types (after the kernel's own).
    pub fn add_module(&self, module: &str) {
        let mut m = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        if !m.iter().any(|n| n == module) {
            m.push(module.to_string());
        }
    }

    /// The modules added, in order.
    fn modules(&self) -> Vec<String> {
        self.modules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The kernel's type containers, waiting for the load as [`Self::get`] does.
    fn kernel(&self) -> Option<Arc<KernelTypes>> {
        self.loaded
            .get_or_init(|| {
                let h = self
                    .loading
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take();
                match h {
                    Some(h) => h.join().ok().flatten(),
                    None => load_kept(),
                }
            })
            .clone()
    }

    /// The type sources of one compilation: the kernel's types, waited for at the first lookup.
    /// Unless `complete`, the kernel's typedef names (which the parser needs to read casts such as
    /// `(u64)arg0`) are offered only if the types are already loaded: the consumer compiles again
    /// with `complete` when a compilation without them fails.
    pub fn sources(self: &Arc<Self>, complete: bool) -> Vec<Box<dyn TypeSource>> {
        if complete {
            self.get();
        }
        vec![Box::new(LazyKernelTypes {
            loader: Arc::clone(self),
            types: OnceLock::new(),
            modules: Mutex::new(HashMap::new()),
        })]
    }
}

/// The kernel's types as a [`TypeSource`] that waits for them only when first asked.
struct LazyKernelTypes {
    loader: Arc<KernelTypeLoader>,
    types: OnceLock<Option<CtfTypes>>,
    /// The added modules' types, converted when first consulted (`None`: the module has none).
    modules: Mutex<HashMap<String, Option<CtfTypes>>>,
}

impl LazyKernelTypes {
    fn types(&self) -> Option<&CtfTypes> {
        self.types
            .get_or_init(|| self.loader.get().map(CtfTypes::new))
            .as_ref()
    }

    /// `name` from the added modules' types, in the order they were added.
    fn import_from_modules(&self, name: &str, table: &mut TypeTable) -> Option<TypeId> {
        let added = self.loader.modules();
        if added.is_empty() {
            return None;
        }
        let kernel = self.loader.kernel()?;
        let mut cache = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        for m in added {
            let types = cache
                .entry(m.clone())
                .or_insert_with(|| kernel.module(&m).ok().map(CtfTypes::new));
            if let Some(id) = types.as_ref().and_then(|t| t.import(name, table)) {
                return Some(id);
            }
        }
        None
    }
}

impl TypeSource for LazyKernelTypes {
    fn import(&self, name: &str, table: &mut TypeTable) -> Option<TypeId> {
        self.types()?
            .import(name, table)
            .or_else(|| self.import_from_modules(name, table))
    }

    fn typedef_names(&self) -> Vec<String> {
        if self.loader.loaded.get().is_none() {
            return Vec::new();
        }
        self.types().map(|t| t.typedef_names()).unwrap_or_default()
    }
}

/// The `args[]` types of the Linux providers' probes; the types of a kernel module whose probe is
/// looked at join the compiler's (through the loader).
pub struct LinuxProbeArgs(pub dtrace_linux::LinuxTracing, pub Arc<KernelTypeLoader>);

impl ProbeInfo for LinuxProbeArgs {
    fn arg_types(&self, desc: &ProbeDesc) -> Option<Vec<String>> {
        let d =
            dtrace_linux::ProbeDesc::new(&desc.provider, &desc.module, &desc.function, &desc.name);
        let types = self.0.arg_types(&d)?;
        let in_module = !desc.module.is_empty()
            && desc.module != dtrace_linux::catalog::fbt::KERNEL_MODULE
            && desc.provider == "fbt";
        if in_module {
            self.1.add_module(&desc.module);
        }
        Some(types)
    }

    fn matches_nothing(&self, desc: &ProbeDesc) -> bool {
        let d =
            dtrace_linux::ProbeDesc::new(&desc.provider, &desc.module, &desc.function, &desc.name);
        self.0.matches_no_kernel_probe(&d)
    }

    fn arg_native_types(&self, desc: &ProbeDesc) -> Option<Vec<String>> {
        let d =
            dtrace_linux::ProbeDesc::new(&desc.provider, &desc.module, &desc.function, &desc.name);
        self.0.arg_native_types(&d)
    }

    /// Kernel symbols from `/proc/kallsyms`. The kernel's BTF describes no global variables (only
    /// per-CPU ones, whose addresses are offsets), so a symbol found there has no type: the
    /// compiler then says so (`D_SYM_NOTYPES`) rather than that the name is unknown.
    fn symbol(&self, module: Option<&str>, name: &str, user: bool) -> Option<(u64, String)> {
        if user || module.is_some_and(|m| m != "vmlinux") {
            return None;
        }
        let syms = self.0.symbolizer();
        let mut syms = syms.lock().ok()?;
        let addr = syms.kernel_symbols().address_of(name)?;
        Some((addr, String::new()))
    }

    /// A kernel built without `CONFIG_KALLSYMS_ALL` lists no variables in `/proc/kallsyms`, and
    /// its BTF describes none but the per-CPU ones: no `` `variable `` can be found there.
    fn symbols_unlisted(&self, module: Option<&str>, user: bool) -> Option<String> {
        if user || module.is_some_and(|m| m != "vmlinux") {
            return None;
        }
        let syms = self.0.symbolizer();
        let mut syms = syms.lock().ok()?;
        (!syms.kernel_symbols().lists_data_symbols()).then(|| {
            "this kernel lists no variables in /proc/kallsyms: it is built without \
             CONFIG_KALLSYMS_ALL"
                .to_string()
        })
    }
}
