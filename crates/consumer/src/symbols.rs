//! Address-to-symbol translation as the consumer needs it for `%a`, `%A`, `sym()`, `mod()`, `stack()` and
//! `ustack()`: a [`Symbolizer`] trait that the OS layer implements (kallsyms, ELF, DWARF live in
//! `dtrace-linux`), and DTrace's spellings of a resolved address (`mod`sym+0x10`, `0x1234`).

/// What a symbol lookup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymInfo {
    /// Object (module or library basename).
    pub object: String,
    /// Symbol name and start address, when a symbol contains the address.
    pub symbol: Option<(String, u64)>,
}

/// Resolves addresses to symbols. The default methods resolve nothing.
pub trait Symbolizer {
    /// A kernel address.
    fn kernel(&self, _addr: u64) -> Option<SymInfo> {
        None
    }
    /// A user address in process `pid`.
    fn user(&self, _pid: u64, _addr: u64) -> Option<SymInfo> {
        None
    }
}

/// A symbolizer that knows no symbols: every address prints in hex.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSymbols;

impl Symbolizer for NoSymbols {}

/// `dtrace_addr2str`: `obj`sym+0xoff`, `obj`sym`, `obj`0xaddr` or `0xaddr`.
pub fn addr_to_string(info: Option<SymInfo>, addr: u64) -> String {
    match info {
        Some(SymInfo {
            object,
            symbol: Some((name, base)),
        }) => {
            if addr > base {
                format!("{object}`{name}+0x{:x}", addr - base)
            } else {
                format!("{object}`{name}")
            }
        }
        Some(SymInfo {
            object,
            symbol: None,
        }) => format!("{object}`0x{addr:x}"),
        None => format!("0x{addr:x}"),
    }
}

/// `sym()` spelling: the symbol without offset.
pub fn sym_to_string(info: Option<SymInfo>, addr: u64) -> String {
    match info {
        Some(SymInfo {
            object,
            symbol: Some((name, _)),
        }) => format!("{object}`{name}"),
        Some(SymInfo {
            object,
            symbol: None,
        }) => format!("{object}`0x{addr:x}"),
        None => format!("0x{addr:x}"),
    }
}

/// `mod()` spelling: the object alone.
pub fn mod_to_string(info: Option<SymInfo>, addr: u64) -> String {
    match info {
        Some(i) => i.object,
        None => format!("0x{addr:x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings() {
        let i = SymInfo {
            object: "genunix".into(),
            symbol: Some(("read".into(), 0x1000)),
        };
        assert_eq!(addr_to_string(Some(i.clone()), 0x1010), "genunix`read+0x10");
        assert_eq!(addr_to_string(Some(i.clone()), 0x1000), "genunix`read");
        assert_eq!(sym_to_string(Some(i.clone()), 0x1010), "genunix`read");
        assert_eq!(mod_to_string(Some(i), 0x1010), "genunix");
        assert_eq!(addr_to_string(None, 0xbeef), "0xbeef");
    }
}
