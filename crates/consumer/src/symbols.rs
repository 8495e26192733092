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
    /// The lowest address of the kernel module holding `addr` (so `mod()` keys of one module
    /// aggregate together).
    fn kernel_object_base(&self, _addr: u64) -> Option<u64> {
        None
    }
    /// The lowest address of the object holding user address `addr` of process `pid` (so `umod()`
    /// keys of one object aggregate together).
    fn user_object_base(&self, _pid: u64, _addr: u64) -> Option<u64> {
        None
    }
    /// The object (file basename) mapped at user address `addr` of process `pid`, and the start
    /// of that mapping.
    fn user_mapping(&self, _pid: u64, _addr: u64) -> Option<(String, u64)> {
        None
    }
    /// How user address `addr` of process `pid` prints when symbols are not to be resolved
    /// (`-x noresolve`): `object:0xoffset` into the mapping holding it, or `0xaddr`. `None` (the
    /// default): resolve it.
    fn user_unresolved(&self, _pid: u64, _addr: u64) -> Option<String> {
        None
    }
    /// Remembers process `pid`'s mappings now (a `-c` command held before its first instruction,
    /// a `-p` process), so its addresses resolve after it has exited.
    fn note_process(&self, _pid: u64) {}
}

/// The value an address-like aggregation key is replaced with before keys are compared, as
/// `dt_aggregate` does: `sym()`/`usym()` by the start of their symbol, `mod()`/`umod()` by the base
/// of their object, so every address in one function (object) is one key. Other records, and
/// addresses nothing is known about, are left alone.
pub fn normalize_key(
    syms: &dyn Symbolizer,
    action: dtrace_dif::program::ActionKind,
    rec: &mut [u8],
) {
    use dtrace_dif::program::ActionKind as K;
    let word = |b: &[u8], i: usize| -> Option<u64> {
        Some(u64::from_ne_bytes(
            b.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    let (slot, new) = match action {
        K::Sym | K::Mod => {
            let Some(pc) = word(rec, 0) else { return };
            let new = if action == K::Sym {
                syms.kernel(pc).and_then(|i| i.symbol).map(|(_, base)| base)
            } else {
                syms.kernel_object_base(pc)
            };
            (0, new)
        }
        K::Usym | K::Umod => {
            let (Some(pid), Some(pc)) = (word(rec, 0), word(rec, 1)) else {
                return;
            };
            let new = if action == K::Usym {
                syms.user(pid, pc)
                    .and_then(|i| i.symbol)
                    .map(|(_, base)| base)
            } else {
                syms.user_object_base(pid, pc)
            };
            (1, new)
        }
        _ => return,
    };
    if let Some(v) = new {
        rec[slot * 8..slot * 8 + 8].copy_from_slice(&v.to_ne_bytes());
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

/// `dtrace_uaddr2str`: a user address of process `pid` as `ustack()`, `uaddr()` and `%A` print
/// it (see [`addr_to_string`] and [`Symbolizer::user_unresolved`]).
pub fn uaddr_to_string(syms: &dyn Symbolizer, pid: u64, addr: u64) -> String {
    match syms.user_unresolved(pid, addr) {
        Some(s) => s,
        None => addr_to_string(syms.user(pid, addr), addr),
    }
}

/// `usym()` spelling: the user symbol without offset (under `-x noresolve`, the symbol's start
/// as [`uaddr_to_string`] prints it).
pub fn usym_to_string(syms: &dyn Symbolizer, pid: u64, addr: u64) -> String {
    let info = syms.user(pid, addr);
    let start = info
        .as_ref()
        .and_then(|i| i.symbol.as_ref())
        .map_or(addr, |(_, base)| *base);
    match syms.user_unresolved(pid, start) {
        Some(s) => s,
        None => sym_to_string(info, addr),
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

    struct Fixed;
    impl Symbolizer for Fixed {
        fn kernel(&self, addr: u64) -> Option<SymInfo> {
            (addr >= 0x1000).then(|| SymInfo {
                object: "vmlinux".into(),
                symbol: Some(("f".into(), addr & !0xff)),
            })
        }
        fn user(&self, _pid: u64, addr: u64) -> Option<SymInfo> {
            self.kernel(addr)
        }
        fn kernel_object_base(&self, _addr: u64) -> Option<u64> {
            Some(0x1000)
        }
        fn user_object_base(&self, _pid: u64, _addr: u64) -> Option<u64> {
            Some(0x2000)
        }
    }

    #[test]
    fn address_keys_normalize_to_their_symbol_or_object() {
        use dtrace_dif::program::ActionKind as K;
        let words = |w: &[u64]| w.iter().flat_map(|v| v.to_ne_bytes()).collect::<Vec<u8>>();
        let mut k = words(&[0x1234]);
        normalize_key(&Fixed, K::Sym, &mut k);
        assert_eq!(k, words(&[0x1200]));
        let mut k = words(&[0x1234]);
        normalize_key(&Fixed, K::Mod, &mut k);
        assert_eq!(k, words(&[0x1000]));
        let mut k = words(&[7, 0x5678]);
        normalize_key(&Fixed, K::Usym, &mut k);
        assert_eq!(k, words(&[7, 0x5600]));
        let mut k = words(&[7, 0x5678]);
        normalize_key(&Fixed, K::Umod, &mut k);
        assert_eq!(k, words(&[7, 0x2000]));
        // Unknown addresses, other records and short records stay as they are.
        let mut k = words(&[0x10]);
        normalize_key(&Fixed, K::Sym, &mut k);
        assert_eq!(k, words(&[0x10]));
        let mut k = words(&[7, 0x5678]);
        normalize_key(&Fixed, K::Uaddr, &mut k);
        assert_eq!(k, words(&[7, 0x5678]));
        let mut short = vec![1u8, 2, 3];
        normalize_key(&Fixed, K::Usym, &mut short);
        assert_eq!(short, vec![1, 2, 3]);
    }

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

    /// A symbolizer that leaves user addresses unresolved, as `-x noresolve` does.
    struct Offsets;
    impl Symbolizer for Offsets {
        fn user(&self, pid: u64, addr: u64) -> Option<SymInfo> {
            Fixed.user(pid, addr)
        }
        fn user_unresolved(&self, _pid: u64, addr: u64) -> Option<String> {
            Some(format!("libc.so.6:0x{:x}", addr - 0x1000))
        }
    }

    #[test]
    fn user_addresses_print_resolved_or_as_offsets() {
        assert_eq!(uaddr_to_string(&Fixed, 7, 0x1234), "vmlinux`f+0x34");
        assert_eq!(usym_to_string(&Fixed, 7, 0x1234), "vmlinux`f");
        assert_eq!(uaddr_to_string(&Fixed, 7, 0x10), "0x10");
        assert_eq!(uaddr_to_string(&Offsets, 7, 0x1234), "libc.so.6:0x234");
        // usym() prints its symbol's start.
        assert_eq!(usym_to_string(&Offsets, 7, 0x1234), "libc.so.6:0x200");
    }
}
