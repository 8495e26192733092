//! Symbolization of captured stacks, printed as DTrace prints frames: `module`function+0xoff` (no
//! `+0x0` at a function's first byte), `module`0xaddr` when only the module is known, and `0xaddr`
//! otherwise. Kernel frames come from `/proc/kallsyms` (`vmlinux` or the module name); user frames from
//! the ELF symbols of the file mapped at the address, with the process's mappings cached at first
//! sight so stacks of processes that have exited still resolve.

pub mod elf;
pub mod kallsyms;
pub mod procmaps;

pub use elf::{read_build_id, ElfSymbols};
pub use kallsyms::KernelSymbols;
pub use procmaps::{parse_maps, read_maps, Mapping};

use crate::capture::UserFrame;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Formats one frame from its parts.
pub fn format_frame(module: Option<&str>, func: Option<(&str, u64)>, addr: u64) -> String {
    match (module, func) {
        (Some(m), Some((f, 0))) => format!("{m}`{f}"),
        (Some(m), Some((f, off))) => format!("{m}`{f}+0x{off:x}"),
        (Some(m), None) => format!("{m}`0x{addr:x}"),
        (None, _) => format!("0x{addr:x}"),
    }
}

/// Resolves kernel and user addresses; caches process mappings and ELF tables.
#[derive(Default)]
pub struct Symbolizer {
    kernel: Option<KernelSymbols>,
    maps: HashMap<u32, Vec<Mapping>>,
    files: HashMap<String, Option<Arc<ElfSymbols>>>,
    by_build_id: HashMap<Vec<u8>, String>,
    scanned: HashSet<String>,
    missing: HashSet<Vec<u8>>,
}

impl Symbolizer {
    /// A symbolizer; the kernel table is read on first use.
    pub fn new() -> Self {
        Self::default()
    }

    /// A symbolizer with the given kernel table (tests, or a saved one).
    pub fn with_kernel(k: KernelSymbols) -> Self {
        Symbolizer {
            kernel: Some(k),
            ..Default::default()
        }
    }

    /// Records the mappings of `pid` now (call at first sight of a process, while it is alive), and
    /// reads the ELF tables of its executable mappings so later lookups need nothing from the process.
    pub fn note_process(&mut self, pid: u32) {
        if self.maps.contains_key(&pid) {
            return;
        }
        if let Ok(m) = read_maps(pid) {
            for map in m.iter().filter(|m| m.exec && m.path.starts_with('/')) {
                self.elf(&map.path);
            }
            self.maps.insert(pid, m);
        }
    }

    /// Forgets `pid`'s mappings (when the pid may be reused).
    pub fn forget_process(&mut self, pid: u32) {
        self.maps.remove(&pid);
    }

    fn elf(&mut self, path: &str) -> Option<Arc<ElfSymbols>> {
        if let Some(e) = self.files.get(path) {
            return e.clone();
        }
        let e = ElfSymbols::load(path).ok().map(Arc::new);
        if let Some(id) = e.as_ref().and_then(|e| e.build_id()) {
            self.by_build_id
                .entry(id.to_vec())
                .or_insert_with(|| path.to_string());
        }
        self.files.insert(path.to_string(), e.clone());
        e
    }

    /// Makes the file at `path` known for build-id lookups (e.g. a `-c` command's executable).
    pub fn index_file(&mut self, path: &str) {
        if self.scanned.insert(path.to_string()) {
            if let Some(id) = read_build_id(path) {
                self.by_build_id
                    .entry(id)
                    .or_insert_with(|| path.to_string());
            }
        }
    }

    /// Indexes the build-ids of every executable mapping of every running process (done once per
    /// unknown build-id; each file is read only for its notes, once).
    fn scan_running(&mut self) {
        let Ok(rd) = std::fs::read_dir("/proc") else {
            return;
        };
        let pids: Vec<u32> = rd
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        for pid in pids {
            if let Ok(maps) = read_maps(pid) {
                for m in maps.iter().filter(|m| m.exec && m.path.starts_with('/')) {
                    self.index_file(&m.path);
                }
            }
        }
    }

    /// Formats a user frame captured with its file identity: resolved from the file with that
    /// build-id, which needs nothing from the process (it may be long gone).
    pub fn user_file_frame(&mut self, pid: u32, frame: &UserFrame) -> String {
        let (build_id, offset) = match frame {
            UserFrame::Ip(addr) => return self.user_frame(pid, *addr),
            UserFrame::File { build_id, offset } => (build_id, *offset),
        };
        let mut path = self.path_of_build_id(build_id);
        if path.is_none() && !self.missing.contains(build_id.as_slice()) {
            self.scan_running();
            path = self.path_of_build_id(build_id);
            if path.is_none() {
                self.missing.insert(build_id.to_vec());
            }
        }
        let Some(path) = path else {
            return format!("0x{offset:x}");
        };
        let module = path.rsplit('/').next().unwrap_or(&path).to_string();
        let found = self.elf(&path).and_then(|e| {
            let vaddr = e.vaddr_of_file_offset(offset)?;
            e.lookup(vaddr).map(|(n, off)| (n.to_string(), off))
        });
        match found {
            Some((name, off)) => format_frame(Some(&module), Some((&name, off)), offset),
            None => format_frame(Some(&module), None, offset),
        }
    }

    /// The indexed file whose build-id is `id` (the kernel zero-pads ids shorter than 20 bytes).
    fn path_of_build_id(&self, id: &[u8; 20]) -> Option<String> {
        let mut n = id.len();
        loop {
            if let Some(p) = self.by_build_id.get(&id[..n]) {
                return Some(p.clone());
            }
            if n == 0 || id[n - 1] != 0 {
                return None;
            }
            n -= 1;
        }
    }

    /// `module`function+0xoff` for a kernel address.
    pub fn kernel_frame(&mut self, addr: u64) -> String {
        if self.kernel.is_none() {
            self.kernel = Some(KernelSymbols::load().unwrap_or_default());
        }
        match self.kernel.as_ref().and_then(|k| k.lookup(addr)) {
            Some((s, off)) => format_frame(Some(&s.module), Some((&s.name, off)), addr),
            None => format_frame(None, None, addr),
        }
    }

    /// `module`function+0xoff` for a user address of `pid`.
    pub fn user_frame(&mut self, pid: u32, addr: u64) -> String {
        self.note_process(pid);
        let Some(map) = self
            .maps
            .get(&pid)
            .and_then(|ms| ms.iter().find(|m| addr >= m.start && addr < m.end))
            .cloned()
        else {
            return format_frame(None, None, addr);
        };
        let module = map.path.rsplit('/').next().unwrap_or(&map.path).to_string();
        if module.is_empty() {
            return format_frame(None, None, addr);
        }
        let sym = if map.path.starts_with('/') {
            self.elf(&map.path)
        } else {
            None
        };
        let found = sym.as_ref().and_then(|e| {
            let vaddr = e.vaddr_of_file_offset(addr - map.start + map.offset)?;
            e.lookup(vaddr).map(|(n, off)| (n.to_string(), off))
        });
        match found {
            Some((name, off)) => format_frame(Some(&module), Some((&name, off)), addr),
            None => format_frame(Some(&module), None, addr),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_format_like_dtrace() {
        assert_eq!(
            format_frame(Some("vmlinux"), Some(("pollwake", 0)), 1),
            "vmlinux`pollwake"
        );
        assert_eq!(
            format_frame(Some("vmlinux"), Some(("do_x", 0x1a)), 1),
            "vmlinux`do_x+0x1a"
        );
        assert_eq!(
            format_frame(Some("libc.so.6"), None, 0x7f00),
            "libc.so.6`0x7f00"
        );
        assert_eq!(format_frame(None, None, 0xdead), "0xdead");
    }

    #[test]
    fn own_user_frames_resolve_to_a_function() {
        let mut s = Symbolizer::new();
        let pc = frames_format_like_dtrace as *const () as usize as u64;
        let f = s.user_frame(std::process::id(), pc);
        assert!(f.contains("frames_format_like_dtrace"), "{f}");
        assert!(f.starts_with("dtrace_linux-"), "{f}");
    }
}
