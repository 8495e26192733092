//! Kernel symbols from `/proc/kallsyms`: text symbols sorted by address, with their module
//! (`vmlinux` for the core kernel), looked up by address. The file is outside data; bad lines are
//! skipped, never trusted.

use crate::error::{LinuxError, Result};

/// One kernel symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSym {
    /// Address.
    pub addr: u64,
    /// Name.
    pub name: String,
    /// Module (`vmlinux` for the core kernel).
    pub module: String,
}

/// The kernel's symbol table.
#[derive(Clone, Debug, Default)]
pub struct KernelSymbols {
    syms: Vec<KernelSym>,
}

/// The most lines we read (the running kernel has a few hundred thousand).
pub const MAX_LINES: usize = 4_000_000;

impl KernelSymbols {
    /// Reads `/proc/kallsyms`. Without privileges the kernel shows zero addresses; that yields an
    /// error, since no lookup could succeed.
    pub fn load() -> Result<KernelSymbols> {
        let text = std::fs::read_to_string("/proc/kallsyms")
            .map_err(|e| LinuxError::from_io("/proc/kallsyms", e))?;
        let k = Self::parse(&text);
        if k.syms.is_empty() {
            return Err(LinuxError::BadFile {
                path: "/proc/kallsyms".into(),
                reason: "no usable symbols (addresses hidden: needs root or kptr_restrict=0)"
                    .into(),
            });
        }
        Ok(k)
    }

    /// Parses kallsyms text, keeping text symbols (`t`, `T`, `w`, `W`) with non-zero addresses.
    pub fn parse(text: &str) -> KernelSymbols {
        let mut syms = Vec::new();
        for line in text.lines().take(MAX_LINES) {
            let mut it = line.split_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            if !matches!(kind, "t" | "T" | "w" | "W") {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr == 0 {
                continue;
            }
            let module = it
                .next()
                .and_then(|m| m.strip_prefix('[').and_then(|m| m.strip_suffix(']')))
                .unwrap_or("vmlinux")
                .to_string();
            syms.push(KernelSym {
                addr,
                name: name.to_string(),
                module,
            });
        }
        syms.sort_by_key(|s| s.addr);
        KernelSymbols { syms }
    }

    /// Number of symbols.
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The symbol containing `addr` (the last one at or below it) and the offset into it.
    pub fn lookup(&self, addr: u64) -> Option<(&KernelSym, u64)> {
        let i = self.syms.partition_point(|s| s.addr <= addr);
        let s = self.syms.get(i.checked_sub(1)?)?;
        Some((s, addr - s.addr))
    }

    /// The address of symbol `name`, if present.
    pub fn address_of(&self, name: &str) -> Option<u64> {
        self.syms.iter().find(|s| s.name == name).map(|s| s.addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_core_and_module_symbols_and_skips_junk() {
        let k = KernelSymbols::parse(
            "ffffffff81000000 T _stext\nffffffff81000100 t do_thing\nffffffff81000200 D some_data\nzz T bad\n\
             ffffffffc0001000 t ext4_write\t[ext4]\n0000000000000000 T hidden\n",
        );
        assert_eq!(k.len(), 3);
        let (s, off) = k.lookup(0xffffffff8100011c).unwrap();
        assert_eq!(
            (s.module.as_str(), s.name.as_str(), off),
            ("vmlinux", "do_thing", 0x1c)
        );
        let (s, _) = k.lookup(0xffffffffc0001004).unwrap();
        assert_eq!(s.module, "ext4");
        assert!(k.lookup(0x1000).is_none());
    }
}
