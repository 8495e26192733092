//! Kernel symbols from `/proc/kallsyms`: text symbols sorted by address, with their module
//! (`vmlinux` for the core kernel), looked up by address; data symbols (variables) by name, for
//! `` `sym `` in D. The file is outside data; bad lines are skipped, never trusted.

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
#[derive(Clone, Debug)]
pub struct KernelSymbols {
    syms: Vec<KernelSym>,
    /// Lowest symbol address of each module.
    bases: std::collections::HashMap<String, u64>,
    /// The addresses that belong to the tracing machinery ([`KernelSymbols::tracing_ranges`]).
    tracing: Vec<TracingRange>,
    /// Where each loaded module lies (`/proc/modules`: its first address and one past its last):
    /// a module's symbol holds no address past its module (a BPF trampoline or program the
    /// kernel placed after it, listed in kallsyms only after this table was read).
    extents: std::collections::HashMap<String, (u64, u64)>,
    /// Data symbols (`d`, `D`, `b`, `B`, `r`, `R`) of the core kernel by name; the first of a
    /// name wins.
    data: std::collections::HashMap<String, u64>,
}

/// A kernel built with `CONFIG_KALLSYMS_ALL` lists tens of thousands of data symbols; one built
/// without it lists only a few dozen (those in text-like sections). Fewer than this many means
/// the kernel's variables are not listed.
pub const MIN_DATA_SYMBOLS_WHEN_LISTED: usize = 1000;

/// No kernel function is this large: an address further into its nearest symbol lies outside
/// every symbol.
pub const MAX_SYMBOL_SIZE: u64 = 1 << 20;

/// The most lines we read (the running kernel has a few hundred thousand).
pub const MAX_LINES: usize = 4_000_000;

impl Default for KernelSymbols {
    /// No symbols: every address is unnamed.
    fn default() -> Self {
        KernelSymbols::parse("")
    }
}

impl KernelSymbols {
    /// Reads `/proc/kallsyms`. Without privileges the kernel shows zero addresses; that yields an
    /// error, since no lookup could succeed.
    pub fn load() -> Result<KernelSymbols> {
        let text = std::fs::read_to_string("/proc/kallsyms")
            .map_err(|e| LinuxError::from_io("/proc/kallsyms", e))?;
        // Without module support there is no such file: no module, no extent.
        let modules = std::fs::read_to_string("/proc/modules").unwrap_or_default();
        let k = Self::parse_with_modules(&text, &modules);
        if k.syms.is_empty() {
            return Err(LinuxError::BadFile {
                path: "/proc/kallsyms".into(),
                reason: "no usable symbols (addresses hidden: needs root or kptr_restrict=0)"
                    .into(),
            });
        }
        Ok(k)
    }

    /// Parses kallsyms text, keeping text symbols (`t`, `T`, `w`, `W`) with non-zero addresses,
    /// and the core kernel's data symbols apart.
    pub fn parse(text: &str) -> KernelSymbols {
        Self::parse_with_modules(text, "")
    }

    /// [`KernelSymbols::parse`], with the modules' extents from `/proc/modules` text (`name size
    /// refcount users state address` lines; bad ones skipped).
    pub fn parse_with_modules(text: &str, modules: &str) -> KernelSymbols {
        let extents = parse_extents(modules);
        let mut syms = Vec::new();
        let mut data = std::collections::HashMap::new();
        for line in text.lines().take(MAX_LINES) {
            let mut it = line.split_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            let text_kind = matches!(kind, "t" | "T" | "w" | "W");
            let data_kind = matches!(kind, "d" | "D" | "b" | "B" | "r" | "R");
            if !text_kind && !data_kind {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr == 0 {
                continue;
            }
            if data_kind {
                if it.next().is_none() {
                    data.entry(name.to_string()).or_insert(addr);
                }
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
        let mut bases = std::collections::HashMap::new();
        for s in &syms {
            bases.entry(s.module.clone()).or_insert(s.addr);
        }
        let tracing = tracing_ranges_of(&syms, &extents);
        KernelSymbols {
            syms,
            bases,
            data,
            tracing,
            extents,
        }
    }

    /// Number of symbols.
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The symbol containing `addr` (the last one at or below it) and the offset into it; none
    /// when that would put `addr` further than [`MAX_SYMBOL_SIZE`] into it or past the end of its
    /// module (past the last symbol of the kernel or a module: a BPF program's JIT image or a
    /// trampoline, which kallsyms may not list).
    pub fn lookup(&self, addr: u64) -> Option<(&KernelSym, u64)> {
        let i = self.syms.partition_point(|s| s.addr <= addr);
        let s = self.syms.get(i.checked_sub(1)?)?;
        let off = addr - s.addr;
        (addr <= symbol_last(s, &self.extents)).then_some((s, off))
    }

    /// How many frames at the top of a kernel stack captured by a BPF program belong to the
    /// tracing machinery (the BPF program itself, the BPF and perf glue, the tracepoint's
    /// dispatch) rather than to the code that hit the probe. They are cut so the first frame shown
    /// is the probed code, as DTrace shows it.
    pub fn tracing_prefix(&self, pcs: &[u64]) -> usize {
        pcs.iter().take_while(|&&pc| self.is_tracing(pc)).count()
    }

    /// Whether kernel address `pc` belongs to the tracing machinery: its symbol's
    /// ([`is_tracing_symbol`]), or, where no symbol holds it ([`KernelSymbols::lookup`]), the JIT
    /// area (BPF programs' images are listed in kallsyms only with `bpf_jit_kallsyms`).
    pub fn is_tracing(&self, pc: u64) -> bool {
        let i = self.tracing.partition_point(|r| r.first <= pc);
        i.checked_sub(1)
            .and_then(|i| self.tracing.get(i))
            .is_some_and(|r| pc <= r.last)
    }

    /// The addresses [`KernelSymbols::is_tracing`] holds, as sorted, disjoint, non-adjacent
    /// ranges: what a probe's program searches to cut the same frames off its own stack
    /// (`caller`, `stackdepth`).
    pub fn tracing_ranges(&self) -> &[TracingRange] {
        &self.tracing
    }

    /// The lowest symbol address of the module holding `addr`.
    pub fn module_base(&self, addr: u64) -> Option<u64> {
        let (s, _) = self.lookup(addr)?;
        self.bases.get(&s.module).copied()
    }

    /// The names that more than one text symbol has (static functions of several files, in the
    /// kernel or its modules): a kprobe placed by name refuses them (`EADDRNOTAVAIL`).
    pub fn names_defined_more_than_once(&self) -> std::collections::HashSet<&str> {
        let mut seen = std::collections::HashSet::new();
        self.syms
            .iter()
            .filter(|s| !seen.insert(s.name.as_str()))
            .map(|s| s.name.as_str())
            .collect()
    }

    /// The address of symbol `name` (a function or a core kernel variable), if present.
    pub fn address_of(&self, name: &str) -> Option<u64> {
        self.data
            .get(name)
            .copied()
            .or_else(|| self.syms.iter().find(|s| s.name == name).map(|s| s.addr))
    }

    /// Whether the kernel lists its variables (`CONFIG_KALLSYMS_ALL`); see
    /// [`MIN_DATA_SYMBOLS_WHEN_LISTED`].
    pub fn lists_data_symbols(&self) -> bool {
        self.data.len() >= MIN_DATA_SYMBOLS_WHEN_LISTED
    }
}

/// Start of the module and BPF JIT area on x86-64 (an unnamed address there is taken for a BPF
/// program when it tops a stack).
const BPF_JIT_REGION: u64 = 0xffff_ffff_a000_0000;

/// The last address symbol `s` may hold: [`MAX_SYMBOL_SIZE`] bytes at most, and not past its
/// module's extent (when known).
fn symbol_last(s: &KernelSym, extents: &std::collections::HashMap<String, (u64, u64)>) -> u64 {
    let last = s.addr.saturating_add(MAX_SYMBOL_SIZE - 1);
    match extents.get(&s.module) {
        Some(&(first, end)) if (first..end).contains(&s.addr) => last.min(end - 1),
        _ => last,
    }
}

/// The modules' extents in `/proc/modules` text: name to (first address, one past the last).
fn parse_extents(text: &str) -> std::collections::HashMap<String, (u64, u64)> {
    text.lines()
        .take(MAX_LINES)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (name, size, addr) = (f.first()?, f.get(1)?, f.get(5)?);
            let size: u64 = size.parse().ok()?;
            let addr = u64::from_str_radix(addr.strip_prefix("0x")?, 16).ok()?;
            let end = addr.checked_add(size)?;
            (addr != 0 && size != 0).then(|| (name.to_string(), (addr, end)))
        })
        .collect()
}

/// Kernel addresses `first..=last`, all of the tracing machinery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracingRange {
    /// The first address.
    pub first: u64,
    /// The last address (inclusive: a range may end at the top of the address space).
    pub last: u64,
}

/// The tracing ranges of symbols sorted by address: each address is classified as
/// [`KernelSymbols::lookup`] would find it (the last symbol at or below it, within
/// [`MAX_SYMBOL_SIZE`]; none below the first symbol or past that size), adjacent tracing
/// addresses merged.
fn tracing_ranges_of(
    syms: &[KernelSym],
    extents: &std::collections::HashMap<String, (u64, u64)>,
) -> Vec<TracingRange> {
    let mut out: Vec<TracingRange> = Vec::new();
    let mut push = |first: u64, last: u64| {
        if first > last {
            return;
        }
        match out.last_mut() {
            Some(r) if r.last.checked_add(1) == Some(first) => r.last = last,
            _ => out.push(TracingRange { first, last }),
        }
    };
    // Addresses no symbol holds are tracing ones in the JIT area only: from BPF_JIT_REGION on.
    match syms.first() {
        None => push(BPF_JIT_REGION, u64::MAX),
        Some(s) if s.addr > 0 => push(BPF_JIT_REGION, s.addr - 1),
        Some(_) => {}
    }
    for (i, s) in syms.iter().enumerate() {
        // Several symbols at one address: lookup finds the last of them.
        let next = syms.get(i + 1).map(|n| n.addr);
        if next == Some(s.addr) {
            continue;
        }
        let end = next.map_or(u64::MAX, |n| n - 1);
        let named_end = symbol_last(s, extents).min(end);
        if is_tracing_symbol(&s.module, &s.name) {
            push(s.addr, named_end);
        }
        if named_end < end {
            push((named_end + 1).max(BPF_JIT_REGION), end);
        }
    }
    out
}

/// Whether a kernel function belongs to the machinery that runs a BPF program at a probe. A BPF
/// trampoline is listed in module `bpf`; the ftrace trampoline that calls it where the function
/// has other ftrace users too (a kprobe-multi link, another tracer) in `__builtin__ftrace`.
pub fn is_tracing_symbol(module: &str, name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "bpf_",
        "__bpf_",
        "___bpf_",
        "trace_call_bpf",
        "perf_trace_",
        "perf_tp_",
        "perf_syscall_",
        "perf_swevent_",
        "perf_event_",
        "__perf_event_",
        "perf_prepare_sample",
        "__perf_",
        "___perf_",
        "trace_event_raw_event_",
        "__traceiter_",
        "__trace_",
        "tracing_",
        "__do_trace_",
        "do_trace_",
        "__probestub_",
    ];
    module == "bpf" || module == "__builtin__ftrace" || PREFIXES.iter().any(|p| name.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracing_frames_are_a_prefix() {
        let k = KernelSymbols::parse(
            "ffffffff81000000 T bpf_trace_run2\nffffffff81000100 t __bpf_trace_sys_enter\n\
             ffffffff81000200 T syscall_trace_enter\nffffffff81000300 T do_syscall_64\n\
             ffffffffc0100000 t bpf_prog_abc_dt\t[bpf]\n",
        );
        let pcs = [
            0xffff_ffff_c010_0010,
            0xffff_ffff_8100_0010,
            0xffff_ffff_8100_0110,
            0xffff_ffff_8100_0210,
            0xffff_ffff_8100_0310,
            0xffff_ffff_8100_0010,
        ];
        assert_eq!(k.tracing_prefix(&pcs), 3);
        assert_eq!(k.tracing_prefix(&pcs[3..]), 0);
        assert_eq!(k.tracing_prefix(&[]), 0);
        // An unnamed address in the JIT area tops the stack: a BPF program.
        assert_eq!(k.tracing_prefix(&[0xffff_ffff_c800_0000, pcs[3]]), 1);
        // Also one far past the last symbol of a module (not inside it).
        assert_eq!(k.tracing_prefix(&[0xffff_ffff_c020_0000, pcs[3]]), 1);
        assert!(is_tracing_symbol("vmlinux", "perf_trace_sched_switch"));
        assert!(!is_tracing_symbol("vmlinux", "ksys_write"));
        // The trampolines before a syscall's function at its fentry probe.
        assert!(is_tracing_symbol("bpf", "bpf_trampoline_6442452417"));
        assert!(is_tracing_symbol("__builtin__ftrace", "ftrace_trampoline"));
    }

    #[test]
    fn tracing_ranges_classify_every_address_as_its_symbol() {
        let k = KernelSymbols::parse(
            "ffffffff81000000 T bpf_trace_run2\nffffffff81000100 t __bpf_trace_sys_enter\n\
             ffffffff81000200 T syscall_trace_enter\nffffffff81000300 T do_syscall_64\n\
             ffffffff81000300 T perf_trace_alias\nffffffff81000400 T bpf_alias_first\n\
             ffffffff81000400 T ksys_write\nffffffffc0000000 t ext4_write\t[ext4]\n\
             ffffffffc0100000 t bpf_prog_abc_dt\t[bpf]\nffffffffc0100100 t cleanup\t[xfs]\n",
        );
        // The definition the ranges stand for: the symbol lookup finds, or the JIT area.
        let reference = |pc: u64| match k.lookup(pc) {
            Some((s, _)) => is_tracing_symbol(&s.module, &s.name),
            None => pc >= BPF_JIT_REGION,
        };
        let mut edges = vec![0, 1, BPF_JIT_REGION, u64::MAX];
        for s in &k.syms {
            for a in [s.addr, s.addr + MAX_SYMBOL_SIZE] {
                edges.extend([a.wrapping_sub(1), a, a.wrapping_add(1), a + 0x10]);
            }
        }
        for pc in edges {
            assert_eq!(k.is_tracing(pc), reference(pc), "{pc:#x}");
        }
        let r = k.tracing_ranges();
        assert!(r.windows(2).all(|w| w[0].last + 1 < w[1].first), "{r:x?}");
        // Merged: the two bpf symbols, then perf_trace_alias (the last of its address).
        assert_eq!(
            (r[0].first, r[0].last),
            (0xffff_ffff_8100_0000, 0xffff_ffff_8100_01ff)
        );
        assert_eq!(
            (r[1].first, r[1].last),
            (0xffff_ffff_8100_0300, 0xffff_ffff_8100_03ff)
        );
        // No symbol at all: the JIT area only.
        let none = KernelSymbols::default();
        assert_eq!(
            none.tracing_ranges(),
            [TracingRange {
                first: BPF_JIT_REGION,
                last: u64::MAX
            }]
        );
    }

    #[test]
    fn a_modules_symbols_end_with_the_module() {
        let k = KernelSymbols::parse_with_modules(
            "ffffffff81000000 T vfs_write\nffffffffc0001000 t probe.cold\t[virtio]\n",
            "virtio 8192 0 - Live 0xffffffffc0000000\nbad line\nzero 0 0 - Live 0x0\n",
        );
        assert!(k.lookup(0xffff_ffff_c000_1fff).is_some());
        // Past the module: a trampoline placed after it, a tracing address.
        assert!(k.lookup(0xffff_ffff_c000_2000).is_none());
        assert!(k.is_tracing(0xffff_ffff_c000_2000));
        assert!(!k.is_tracing(0xffff_ffff_c000_1fff));
        // Without extents, a megabyte as before.
        let k = KernelSymbols::parse("ffffffffc0001000 t probe.cold\t[virtio]\n");
        assert!(k.lookup(0xffff_ffff_c000_2000).is_some());
    }

    #[test]
    fn names_of_several_functions_are_found_across_modules() {
        let k = KernelSymbols::parse(
            "ffffffff81000000 t mpage_end_io\nffffffff81000100 T vfs_read\n\
             ffffffff81000200 t mpage_end_io\nffffffff81000300 D data_twice\n\
             ffffffff81000400 D data_twice\nffffffffc0001000 t cleanup\t[ext4]\n\
             ffffffffc0002000 t cleanup\t[xfs]\n",
        );
        let mut several: Vec<&str> = k.names_defined_more_than_once().into_iter().collect();
        several.sort_unstable();
        assert_eq!(several, ["cleanup", "mpage_end_io"]);
    }

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
        assert_eq!(k.module_base(0xffffffffc0001004), Some(0xffffffffc0001000));
        assert_eq!(k.module_base(0xffffffff8100011c), Some(0xffffffff81000000));
        assert_eq!(k.module_base(0x1000), None);
        assert!(k.lookup(0x1000).is_none());
        // Far past the last symbol of the kernel (a JIT image kallsyms does not list): no symbol.
        assert!(k.lookup(0xffffffff81000100 + MAX_SYMBOL_SIZE).is_none());
        assert!(k.lookup(0xffffffff81000100 + MAX_SYMBOL_SIZE - 1).is_some());
    }

    #[test]
    fn data_symbols_are_found_by_name_and_counted() {
        let k = KernelSymbols::parse(
            "ffffffff81000000 T _stext\nffffffff82000000 D max_pfn\nffffffff82000100 d max_pfn\n\
             ffffffff82000200 B crashing_cpu\nffffffff82000300 R linux_banner\n\
             ffffffffc0003000 d mod_data\t[ext4]\n",
        );
        // Data symbols are not text: address lookups and the text count ignore them.
        assert_eq!(k.len(), 1);
        assert_eq!(k.address_of("max_pfn"), Some(0xffffffff82000000));
        assert_eq!(k.address_of("crashing_cpu"), Some(0xffffffff82000200));
        assert_eq!(k.address_of("linux_banner"), Some(0xffffffff82000300));
        assert_eq!(k.address_of("_stext"), Some(0xffffffff81000000));
        // A module's variable is not the core kernel's.
        assert_eq!(k.address_of("mod_data"), None);
        assert!(!k.lists_data_symbols());
        let many: String = (0..MIN_DATA_SYMBOLS_WHEN_LISTED)
            .map(|i| format!("ffffffff8200{i:04x} D var{i}\n"))
            .collect();
        assert!(KernelSymbols::parse(&many).lists_data_symbols());
    }
}
