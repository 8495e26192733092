//! The consumer's [`Symbolizer`] over `dtrace-linux`'s symbol tables: kernel addresses through
//! `/proc/kallsyms` (`vmlinux` or the module), user addresses through the ELF symbols of the file
//! mapped there in the process, whose mappings the Linux providers remember at delivery (so stacks
//! of processes that have exited still resolve).

use std::sync::{Arc, Mutex, MutexGuard};

use dtrace_consumer::symbols::{SymInfo, Symbolizer};
use dtrace_linux::symbols::{Resolved, Symbolizer as Tables};

/// Symbol lookups shared with the Linux providers.
pub struct LinuxSymbols {
    tables: Arc<Mutex<Tables>>,
}

impl LinuxSymbols {
    /// Lookups through `tables` (the one the providers note processes in).
    pub fn new(tables: Arc<Mutex<Tables>>) -> LinuxSymbols {
        LinuxSymbols { tables }
    }

    /// Lookups of our own (no kernel providers: processes are read when first asked about).
    pub fn standalone() -> LinuxSymbols {
        LinuxSymbols::new(Arc::new(Mutex::new(Tables::new())))
    }

    fn lock(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn info(r: Resolved) -> SymInfo {
    SymInfo {
        object: r.object,
        symbol: r.symbol,
    }
}

impl Symbolizer for LinuxSymbols {
    fn kernel(&self, addr: u64) -> Option<SymInfo> {
        self.lock().resolve_kernel(addr).map(info)
    }

    fn user(&self, pid: u64, addr: u64) -> Option<SymInfo> {
        let pid = u32::try_from(pid).ok()?;
        self.lock().resolve_user(pid, addr).map(info)
    }

    fn kernel_object_base(&self, addr: u64) -> Option<u64> {
        self.lock().kernel_object_base(addr)
    }

    fn user_object_base(&self, pid: u64, addr: u64) -> Option<u64> {
        let pid = u32::try_from(pid).ok()?;
        self.lock().user_object_base(pid, addr)
    }

    fn note_process(&self, pid: u64) {
        if let Ok(pid) = u32::try_from(pid) {
            self.lock().note_process(pid);
        }
    }

    fn user_mapping(&self, pid: u64, addr: u64) -> Option<(String, u64)> {
        let pid = u32::try_from(pid).ok()?;
        self.lock().user_mapping(pid, addr)
    }
}

/// `-x noresolve`, as DTrace for Linux has it: user addresses (`ustack()`, `uaddr()`, `usym()`,
/// `%A`) print as `object:0xoffset` into the mapping that holds them (`0xaddr` outside every
/// mapping) instead of as symbols; kernel addresses and `umod()` print as ever, and aggregation
/// keys still merge by symbol and object.
pub struct Unresolved {
    inner: Box<dyn Symbolizer>,
}

impl Unresolved {
    /// Lookups through `inner`, user addresses left unresolved.
    pub fn new(inner: Box<dyn Symbolizer>) -> Unresolved {
        Unresolved { inner }
    }
}

impl Symbolizer for Unresolved {
    fn kernel(&self, addr: u64) -> Option<SymInfo> {
        self.inner.kernel(addr)
    }

    fn user(&self, pid: u64, addr: u64) -> Option<SymInfo> {
        self.inner.user(pid, addr)
    }

    fn kernel_object_base(&self, addr: u64) -> Option<u64> {
        self.inner.kernel_object_base(addr)
    }

    fn user_object_base(&self, pid: u64, addr: u64) -> Option<u64> {
        self.inner.user_object_base(pid, addr)
    }

    fn user_unresolved(&self, pid: u64, addr: u64) -> Option<String> {
        Some(match self.inner.user_mapping(pid, addr) {
            Some((object, start)) => format!("{object}:0x{:x}", addr.wrapping_sub(start)),
            None => format!("0x{addr:x}"),
        })
    }

    fn user_mapping(&self, pid: u64, addr: u64) -> Option<(String, u64)> {
        self.inner.user_mapping(pid, addr)
    }

    fn note_process(&self, pid: u64) {
        self.inner.note_process(pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_functions_resolve_and_junk_does_not() {
        let s = LinuxSymbols::standalone();
        let pc = own_functions_resolve_and_junk_does_not as *const () as usize as u64;
        let got = s.user(u64::from(std::process::id()), pc + 1).unwrap();
        // This crate's unit-test executable.
        assert!(got.object.starts_with("dtrace_open-"), "{got:?}");
        let (name, base) = got.symbol.unwrap();
        assert!(
            name.contains("own_functions_resolve_and_junk_does_not"),
            "{name}"
        );
        assert!(base <= pc + 1);
        assert_eq!(s.user(u64::from(std::process::id()), 8), None);
        assert_eq!(s.user(u64::MAX, pc), None);
        assert_eq!(s.kernel(0x10), None);
    }
}
