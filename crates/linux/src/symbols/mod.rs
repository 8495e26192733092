//! Symbolization of captured stacks, printed as DTrace prints frames: `module`function+0xoff` (no
//! `+0x0` at a function's first byte), `module`0xaddr` when only the module is known, and `0xaddr`
//! otherwise. Kernel frames come from `/proc/kallsyms` (`vmlinux` or the module name); user frames from
//! the ELF symbols of the file mapped at the address, with the process's mappings cached at first
//! sight so stacks of processes that have exited still resolve.

pub mod elf;
pub mod elfimage;
pub mod functions;
pub mod kallsyms;
pub mod mmaptrack;
pub mod prefer;
pub mod procmaps;
pub mod unwind;
pub mod unwind_rows;

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

/// A resolved address: the object holding it (kernel module, `vmlinux`, or the basename of the
/// mapped file) and, when a symbol contains it, the symbol's name and start address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// Module or file basename.
    pub object: String,
    /// Symbol name and start address.
    pub symbol: Option<(String, u64)>,
}

impl Resolved {
    /// DTrace's spelling of `addr` as this resolution: `obj`sym+0xoff`, `obj`sym`, `obj`0xaddr`.
    pub fn format(&self, addr: u64) -> String {
        match &self.symbol {
            Some((name, base)) => format_frame(
                Some(&self.object),
                Some((name, addr.wrapping_sub(*base))),
                addr,
            ),
            None => format_frame(Some(&self.object), None, addr),
        }
    }
}

/// The name of the kernel's vDSO mapping in `/proc/<pid>/maps`.
pub const VDSO: &str = "[vdso]";

/// The name an address in a mapping of `path` is attributed to: the file's basename (a file
/// removed since it was mapped is still named by its path); `None` for an anonymous mapping.
fn object_name(path: &str) -> Option<String> {
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    let object = path.rsplit('/').next().unwrap_or(path);
    (!object.is_empty()).then(|| object.to_string())
}

/// The vDSO's symbols (`__vdso_clock_gettime`...), read from this process's own copy: the kernel
/// maps the same image into every process, so offsets into the mapping resolve alike in all.
pub fn load_vdso() -> Option<ElfSymbols> {
    use std::os::unix::fs::FileExt;
    let map = read_maps(std::process::id())
        .ok()?
        .into_iter()
        .find(|m| m.path == VDSO)?;
    let len = usize::try_from(map.end - map.start)
        .ok()
        .filter(|&l| l <= 1 << 20)?;
    let mut image = vec![0u8; len];
    std::fs::File::open("/proc/self/mem")
        .ok()?
        .read_exact_at(&mut image, map.start)
        .ok()?;
    ElfSymbols::parse(&image).ok()
}

/// The most processes whose mappings are remembered at once (the oldest half is forgotten past it).
pub const MAX_PROCESSES: usize = 1 << 15;

/// The most thread names remembered for one process (past it, names no longer trigger a re-read).
pub const MAX_NAMES: usize = 32;

/// The mappings of one process as first seen, with the thread names (`execname`) seen since they
/// were read: a name never seen means it has probably exec'd, and the mappings are read again.
struct ProcessMaps {
    comms: Vec<String>,
    maps: Vec<Mapping>,
    /// Read again once since, for an address outside every mapping.
    refreshed: bool,
    seq: u64,
    /// Changes whenever `maps` may have (from [`Symbolizer::versions`]): what was resolved
    /// against another version is stale.
    version: u64,
}

/// Resolves kernel and user addresses; caches process mappings and ELF tables.
#[derive(Default)]
pub struct Symbolizer {
    kernel: Option<KernelSymbols>,
    maps: HashMap<u32, ProcessMaps>,
    seq: u64,
    files: HashMap<String, Option<Arc<ElfSymbols>>>,
    by_build_id: HashMap<Vec<u8>, String>,
    scanned: HashSet<String>,
    missing: HashSet<Vec<u8>>,
    unwind_tables: HashMap<String, Option<Arc<unwind::UnwindTable>>>,
    tracker: Option<mmaptrack::MmapTracker>,
    /// Processes a new mapping replaced part of whose mappings since [`Symbolizer::take_remapped`]
    /// (at most [`MAX_REMAPPED`]).
    remapped: Vec<u32>,
    /// The last version given to a process's mappings ([`ProcessMaps::version`]).
    versions: u64,
    /// User addresses resolved (a stack's frames, printed record after record), each with the
    /// version of its process's mappings it was resolved against (at most
    /// [`MAX_RESOLVED_USER`]).
    resolved_user: HashMap<(u32, u64), (u64, Option<Resolved>), crate::fasthash::Fast>,
}

/// The most user addresses [`Symbolizer::resolve_user`] keeps resolved (all are forgotten when
/// there would be more).
const MAX_RESOLVED_USER: usize = 1 << 16;

/// The most processes [`Symbolizer::take_remapped`] gives at once (more between two calls are
/// not noted).
pub const MAX_REMAPPED: usize = 1024;

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

    /// Follows every process's executable mappings from now on (see [`mmaptrack`]), so addresses
    /// of processes that exit before their events are read still resolve. Idempotent.
    pub fn track_mappings(&mut self) -> crate::error::Result<()> {
        if self.tracker.is_none() {
            self.tracker = Some(mmaptrack::MmapTracker::open()?);
        }
        Ok(())
    }

    /// Applies the mapping records read since the last call.
    fn sync_tracker(&mut self) {
        let Some(t) = self.tracker.as_mut() else {
            return;
        };
        for e in t.read() {
            self.apply(e);
        }
    }

    /// The processes a new mapping replaced part of whose mappings (a library mapped where
    /// another was) since the last call: what a walk at the probe loaded of them is stale (see
    /// `provider::ustack_maps`).
    pub fn take_remapped(&mut self) -> Vec<u32> {
        self.sync_tracker();
        std::mem::take(&mut self.remapped)
    }

    /// Applies one mapping record.
    fn apply(&mut self, e: mmaptrack::MapEvent) {
        {
            match e {
                mmaptrack::MapEvent::Map { pid, mapping } => {
                    if !self.maps.contains_key(&pid) {
                        // First heard of: what it mapped before (it is usually still alive).
                        self.read_process(pid, Vec::new());
                    }
                    let p = self.tracked(pid);
                    // (A mapping the process's maps file showed already is no replacement.)
                    let replaced = p
                        .maps
                        .iter()
                        .any(|m| m.end > mapping.start && m.start < mapping.end && *m != mapping);
                    p.maps
                        .retain(|m| m.end <= mapping.start || m.start >= mapping.end);
                    p.maps.push(mapping);
                    if replaced
                        && !self.remapped.contains(&pid)
                        && self.remapped.len() < MAX_REMAPPED
                    {
                        self.remapped.push(pid);
                    }
                }
                mmaptrack::MapEvent::Exec { pid } => {
                    let p = self.tracked(pid);
                    p.maps.clear();
                    p.comms.clear();
                }
                mmaptrack::MapEvent::Fork { pid, ppid } => {
                    let maps = self.maps.get(&ppid).map(|p| p.maps.clone());
                    if let Some(maps) = maps {
                        self.tracked(pid).maps = maps;
                    }
                }
            }
        }
    }

    /// The remembered process `pid` (created empty, its mappings then come from the tracker).
    fn tracked(&mut self, pid: u32) -> &mut ProcessMaps {
        if !self.maps.contains_key(&pid) && self.maps.len() >= MAX_PROCESSES {
            self.forget_oldest();
        }
        self.seq += 1;
        self.versions += 1;
        let (seq, version) = (self.seq, self.versions);
        let p = self.maps.entry(pid).or_insert_with(|| ProcessMaps {
            comms: Vec::new(),
            maps: Vec::new(),
            refreshed: false,
            seq,
            version,
        });
        // The caller changes its mappings.
        p.version = version;
        p
    }

    /// Records the mappings of `pid` now (call at first sight of a process, while it is alive), so
    /// its addresses resolve after it has exited. The ELF files are read when first needed.
    pub fn note_process(&mut self, pid: u32) {
        self.sync_tracker();
        if !self.maps.contains_key(&pid) {
            self.read_process(pid, Vec::new());
        }
    }

    /// Like [`Symbolizer::note_process`] for an event of `pid` whose thread was running `comm`:
    /// the mappings are read again when the process has exec'd since they were read (a new
    /// `execname`). Cheap when nothing changed (one lookup).
    pub fn note_process_as(&mut self, pid: u32, comm: &str) {
        self.sync_tracker();
        let comms = match self.maps.get_mut(&pid) {
            Some(p) if p.comms.is_empty() => {
                p.comms.push(comm.to_string());
                return;
            }
            Some(p) if p.comms.len() >= MAX_NAMES || p.comms.iter().any(|c| c == comm) => return,
            Some(p) => {
                let mut c = std::mem::take(&mut p.comms);
                c.push(comm.to_string());
                c
            }
            None => vec![comm.to_string()],
        };
        self.read_process(pid, comms);
    }

    fn read_process(&mut self, pid: u32, comms: Vec<String>) {
        // A process that is gone is remembered without mappings (and not read again) until it
        // shows up under another name.
        let (maps, gone) = match read_maps(pid) {
            // (A process that has exited but is not reaped yet has an empty maps file.)
            Ok(m) if !m.is_empty() => (m, false),
            // Gone: keep what the tracker recorded of it.
            _ => (self.maps_of(pid), true),
        };
        if self.maps.len() >= MAX_PROCESSES && !self.maps.contains_key(&pid) {
            self.forget_oldest();
        }
        self.seq += 1;
        self.versions += 1;
        self.maps.insert(
            pid,
            ProcessMaps {
                comms,
                maps,
                refreshed: gone,
                seq: self.seq,
                version: self.versions,
            },
        );
    }

    fn forget_oldest(&mut self) {
        let mut seqs: Vec<u64> = self.maps.values().map(|p| p.seq).collect();
        seqs.sort_unstable();
        let cut = seqs[seqs.len() / 2];
        self.maps.retain(|_, p| p.seq > cut);
    }

    /// Forgets `pid`'s mappings (when the pid may be reused).
    pub fn forget_process(&mut self, pid: u32) {
        self.maps.remove(&pid);
    }

    /// Number of processes whose mappings are remembered.
    pub fn processes(&self) -> usize {
        self.maps.len()
    }

    /// The mapping of `pid` holding `addr`: from the remembered mappings, read at first need, and
    /// read once more when `addr` is outside all of them (the process may have mapped more since).
    fn mapping_of(&mut self, pid: u32, addr: u64) -> Option<Mapping> {
        self.sync_tracker();
        let find = |p: &ProcessMaps| {
            p.maps
                .iter()
                .find(|m| addr >= m.start && addr < m.end)
                .cloned()
        };
        match self.maps.get(&pid) {
            None => self.read_process(pid, Vec::new()),
            Some(p) => {
                if let Some(m) = find(p) {
                    return Some(m);
                }
                if p.refreshed {
                    return None;
                }
                self.versions += 1;
                let version = self.versions;
                if let Ok(maps) = read_maps(pid) {
                    if let Some(p) = self.maps.get_mut(&pid).filter(|_| !maps.is_empty()) {
                        p.maps = maps;
                    }
                }
                if let Some(p) = self.maps.get_mut(&pid) {
                    p.refreshed = true;
                    p.version = version;
                }
            }
        }
        self.maps.get(&pid).and_then(find)
    }

    fn elf(&mut self, path: &str) -> Option<Arc<ElfSymbols>> {
        if let Some(e) = self.files.get(path) {
            return e.clone();
        }
        let e = if path == VDSO {
            load_vdso().map(Arc::new)
        } else {
            ElfSymbols::load(path).ok().map(Arc::new)
        };
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

    fn kernel_table(&mut self) -> &KernelSymbols {
        self.kernel
            .get_or_insert_with(|| KernelSymbols::load().unwrap_or_default())
    }

    /// The kernel symbol table (read from `/proc/kallsyms` at first use; empty without privileges).
    pub fn kernel_symbols(&mut self) -> &KernelSymbols {
        self.kernel_table()
    }

    /// What holds kernel address `addr`.
    pub fn resolve_kernel(&mut self, addr: u64) -> Option<Resolved> {
        let (s, _) = self.kernel_table().lookup(addr)?;
        Some(Resolved {
            object: s.module.clone(),
            symbol: Some((s.name.clone(), s.addr)),
        })
    }

    /// What holds user address `addr` of process `pid`.
    pub fn resolve_user(&mut self, pid: u32, addr: u64) -> Option<Resolved> {
        self.sync_tracker();
        let version = self.maps.get(&pid).map(|p| p.version);
        if let Some((v, r)) = self.resolved_user.get(&(pid, addr)) {
            if Some(*v) == version {
                return r.clone();
            }
        }
        let r = self.resolve_user_afresh(pid, addr);
        // Resolving may have read the mappings (first sight, or an address outside them all).
        if let Some(version) = self.maps.get(&pid).map(|p| p.version) {
            if self.resolved_user.len() >= MAX_RESOLVED_USER {
                self.resolved_user.clear();
            }
            self.resolved_user.insert((pid, addr), (version, r.clone()));
        }
        r
    }

    /// [`Symbolizer::resolve_user`] without what it keeps.
    fn resolve_user_afresh(&mut self, pid: u32, addr: u64) -> Option<Resolved> {
        let map = self.mapping_of(pid, addr)?;
        let object = object_name(&map.path)?;
        let sym = if map.path.starts_with('/') || map.path == VDSO {
            self.elf(&map.path)
        } else {
            None
        };
        let symbol = sym.as_ref().and_then(|e| {
            let vaddr = e.vaddr_of_file_offset((addr - map.start).wrapping_add(map.offset))?;
            e.lookup(vaddr)
                .map(|(n, off)| (n.to_string(), addr.wrapping_sub(off)))
        });
        Some(Resolved { object, symbol })
    }

    /// The object (file basename) mapped at user address `addr` of `pid` and the start of that
    /// mapping: what `-x noresolve` prints a user address relative to.
    pub fn user_mapping(&mut self, pid: u32, addr: u64) -> Option<(String, u64)> {
        let map = self.mapping_of(pid, addr)?;
        Some((object_name(&map.path)?, map.start))
    }

    /// The lowest address of the kernel module (or `vmlinux`) holding `addr`.
    pub fn kernel_object_base(&mut self, addr: u64) -> Option<u64> {
        self.kernel_table().module_base(addr)
    }

    /// The lowest mapped address of the file mapped at user address `addr` of `pid`.
    pub fn user_object_base(&mut self, pid: u32, addr: u64) -> Option<u64> {
        let map = self.mapping_of(pid, addr)?;
        let p = self.maps.get(&pid)?;
        p.maps
            .iter()
            .filter(|m| m.path == map.path)
            .map(|m| m.start)
            .min()
    }

    /// `module`function+0xoff` for a kernel address.
    pub fn kernel_frame(&mut self, addr: u64) -> String {
        match self.resolve_kernel(addr) {
            Some(r) => r.format(addr),
            None => format_frame(None, None, addr),
        }
    }

    /// The user stack of `pid` unwound from `regs` through the stack bytes copied at the probe
    /// with the `.eh_frame` information of the files mapped (see [`unwind`]): up to `max` PCs,
    /// and whether they end at the outermost frame.
    pub fn unwind_user(
        &mut self,
        pid: u32,
        regs: unwind::UserRegs,
        stack: unwind::StackBytes<'_>,
        max: usize,
    ) -> unwind::Unwound {
        unwind::unwind(regs, stack, max, |pc| self.unwind_table_at(pid, pc))
    }

    /// The unwind table of the file `pid` maps at `pc`, and its load bias.
    fn unwind_table_at(&mut self, pid: u32, pc: u64) -> Option<(Arc<unwind::UnwindTable>, u64)> {
        let map = self.mapping_of(pid, pc)?;
        if !map.path.starts_with('/') {
            return None;
        }
        let elf = self.elf(&map.path)?;
        let vaddr = elf.vaddr_of_file_offset((pc - map.start).wrapping_add(map.offset))?;
        let table = self.unwind_table(&map.path)?;
        Some((table, pc.wrapping_sub(vaddr)))
    }

    /// The unwind table of the file at `path`, read once.
    fn unwind_table(&mut self, path: &str) -> Option<Arc<unwind::UnwindTable>> {
        self.unwind_tables
            .entry(path.to_string())
            .or_insert_with(|| unwind::UnwindTable::load(path).map(Arc::new))
            .clone()
    }

    /// The mappings of `pid` as the kernel's walk holds them (see [`unwind_rows`]), the rows of
    /// their files added to `arena`: every address placed as [`Symbolizer::unwind_user`] places
    /// it. Empty for a process never noted.
    pub fn unwind_ranges(
        &mut self,
        pid: u32,
        arena: &mut unwind_rows::RowArena,
    ) -> std::result::Result<Vec<unwind_rows::Range>, unwind_rows::RowsError> {
        self.sync_tracker();
        let maps = self.maps_of(pid);
        unwind_rows::process_ranges(&maps, |path| {
            let Some(elf) = self.elf(path) else {
                return Ok(None);
            };
            let rows = arena.file_rows(path, || self.unwind_table(path))?;
            Ok(Some((elf, rows)))
        })
    }

    /// The files process `pid` maps that the kernel can know by their device and inode, each
    /// with its value in the kernel's files map (see [`unwind_rows::file_value`]), their rows
    /// laid out in `arena`: what a walk at the probe needs to find a PC's rows without the
    /// process's ranges (another process mapping the same files).
    pub fn unwind_files(
        &mut self,
        pid: u32,
        arena: &mut unwind_rows::RowArena,
    ) -> Vec<(procmaps::FileId, [u8; unwind_rows::FILE_VALUE_BYTES])> {
        let maps = self.maps_of(pid);
        let mut out: Vec<(procmaps::FileId, [u8; unwind_rows::FILE_VALUE_BYTES])> = Vec::new();
        for m in maps.iter().filter(|m| m.exec && m.file.is_known()) {
            if !m.path.starts_with('/') || out.iter().any(|(f, _)| *f == m.file) {
                continue;
            }
            // The rows are read from the path: only when it is still the file mapped.
            if procmaps::file_id_of(&m.path) != Some(m.file) {
                continue;
            }
            let Some(elf) = self.elf(&m.path) else {
                continue;
            };
            let Ok(rows) = arena.file_rows(&m.path, || self.unwind_table(&m.path)) else {
                continue;
            };
            if let Some(v) = unwind_rows::file_value(&elf, rows) {
                out.push((m.file, v));
            }
        }
        out
    }

    /// The mappings noted of process `pid` (none when it was not noted).
    fn maps_of(&self, pid: u32) -> Vec<Mapping> {
        self.maps
            .get(&pid)
            .map(|p| p.maps.clone())
            .unwrap_or_default()
    }

    /// Lays out in `arena` the rows of the shared libraries process `pid` maps (a file whose name
    /// has `.so`), so that a later process mapping them finds them there.
    pub fn warm_library_rows(&mut self, pid: u32, arena: &mut unwind_rows::RowArena) {
        self.note_process(pid);
        let maps = self.maps_of(pid);
        for m in maps.iter().filter(|m| m.exec && m.path.starts_with('/')) {
            let name = m.path.rsplit('/').next().unwrap_or_default();
            if !name.contains(".so") || self.elf(&m.path).is_none() {
                continue;
            }
            // A file whose rows cannot be made is left to the process that maps it.
            let _ = arena.file_rows(&m.path, || self.unwind_table(&m.path));
        }
    }

    /// `module`function+0xoff` for a user address of `pid`.
    pub fn user_frame(&mut self, pid: u32, addr: u64) -> String {
        match self.resolve_user(pid, addr) {
            Some(r) => r.format(addr),
            None => format_frame(None, None, addr),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mapping that replaces part of another (a library mapped where one was) notes its
    /// process once; the same mapping again, or one beside the others, does not.
    #[test]
    fn a_replaced_mapping_notes_its_process() {
        let mut syms = Symbolizer::new();
        let pid = u32::MAX - 7;
        let map = |start: u64, end: u64, path: &str| mmaptrack::MapEvent::Map {
            pid,
            mapping: Mapping {
                start,
                end,
                offset: 0,
                exec: true,
                path: path.into(),
                file: Default::default(),
            },
        };
        syms.apply(map(0x1000, 0x3000, "/lib/a.so"));
        syms.apply(map(0x3000, 0x4000, "/lib/b.so"));
        syms.apply(map(0x3000, 0x4000, "/lib/b.so"));
        assert!(syms.take_remapped().is_empty());
        syms.apply(map(0x2000, 0x2800, "/lib/c.so"));
        syms.apply(map(0x2800, 0x3000, "/lib/d.so"));
        assert_eq!(syms.take_remapped(), vec![pid]);
        assert!(syms.take_remapped().is_empty());
    }

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
    fn processes_are_read_again_only_under_new_names() {
        let me = std::process::id();
        let mut s = Symbolizer::new();
        s.note_process_as(me, "main");
        assert_eq!(s.processes(), 1);
        let seq = s.maps[&me].seq;
        // Threads of the process with their own names: one re-read each, then none.
        for name in ["main", "worker", "main", "worker", "worker"] {
            s.note_process_as(me, name);
        }
        assert_eq!(s.maps[&me].seq, seq + 1);
        assert_eq!(s.maps[&me].comms, ["main", "worker"]);
        // A gone process is remembered as gone, not read at every event.
        let gone = u32::MAX - 1;
        s.note_process_as(gone, "x");
        s.note_process_as(gone, "x");
        assert!(s.maps[&gone].maps.is_empty() && s.maps[&gone].refreshed);
        assert_eq!(s.resolve_user(gone, 0x1000), None);
    }

    #[test]
    fn vdso_frames_resolve_to_its_functions() {
        let Some(v) = load_vdso() else {
            return; // a kernel without a vDSO
        };
        assert!(!v.is_empty());
        let me = std::process::id();
        let map = read_maps(me)
            .unwrap()
            .into_iter()
            .find(|m| m.path == VDSO)
            .unwrap();
        // Some function of the image, found by scanning the mapping.
        let mut s = Symbolizer::new();
        let named = (map.start..map.end)
            .step_by(16)
            .filter_map(|a| s.resolve_user(me, a))
            .find(|r| r.symbol.is_some())
            .expect("no vDSO symbol");
        assert_eq!(named.object, VDSO);
    }

    #[test]
    fn own_user_frames_resolve_to_a_function() {
        let mut s = Symbolizer::new();
        let pc = frames_format_like_dtrace as *const () as usize as u64;
        let f = s.user_frame(std::process::id(), pc);
        assert!(f.contains("frames_format_like_dtrace"), "{f}");
        assert!(f.starts_with("dtrace_linux-"), "{f}");
    }

    /// A user address resolves once while its process's mappings stay as they were, and afresh
    /// once a mapping replaced the one holding it.
    #[test]
    fn user_addresses_resolve_again_once_their_mapping_changed() {
        let mut s = Symbolizer::new();
        let me = std::process::id();
        let pc = frames_format_like_dtrace as *const () as usize as u64;
        let first = s.resolve_user(me, pc).expect("own address");
        assert!(first.object.starts_with("dtrace_linux-"), "{first:?}");
        assert_eq!(s.resolved_user.len(), 1);
        assert_eq!(s.resolve_user(me, pc), Some(first.clone()));
        // Kept, not resolved again: an entry changed behind the symbolizer's back is what it
        // gives while the mappings stay.
        let kept = Resolved {
            object: "kept".into(),
            symbol: None,
        };
        if let Some(e) = s.resolved_user.get_mut(&(me, pc)) {
            e.1 = Some(kept.clone());
        }
        assert_eq!(s.resolve_user(me, pc), Some(kept));
        // A file mapped over it: the address is resolved against the new mapping.
        let page = pc & !0xfff;
        s.apply(mmaptrack::MapEvent::Map {
            pid: me,
            mapping: Mapping {
                start: page,
                end: page + 0x1000,
                offset: 0,
                exec: true,
                path: "/nonexistent/over.so".into(),
                file: Default::default(),
            },
        });
        let over = s.resolve_user(me, pc).expect("mapped over");
        assert_eq!(over.object, "over.so");
        assert_eq!(over.symbol, None);
    }
}
