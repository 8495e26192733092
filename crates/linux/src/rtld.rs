//! Watching a traced process's run-time linker, as DTrace's rtld agent does: the dynamic linker
//! calls `_dl_debug_state` (the `r_brk` address of its `r_debug`) before and after it changes the
//! list of loaded objects (`dlopen`, `dlclose`). The address is read from the `r_debug` the linker
//! exports (`_r_debug`), as a debugger finds it, since ld.so's own symbol table is usually
//! stripped (the name serves where `r_debug` cannot be read and debuginfo is installed). A uprobe
//! there, in that process only, runs a small program that stops the process (`SIGSTOP` through
//! `bpf_send_signal`, noted first in the held map of [`crate::rlc`], so the process runs on
//! however `dtrace` ends) and then counts the call, before the linker returns, so before a newly
//! loaded library's initialisers or functions run. `dtrace` sees the count move (the stop is then
//! already sent; the program then rings [`RunOnClose`]'s doorbell, which wakes `dtrace`'s wait),
//! reads the process's mappings again, places the probes the new objects bring,
//! and lets the process go on (`SIGCONT`), as DTrace creates pid and USDT probes at the linker's
//! `RT_CONSISTENT` event.

use crate::attach::Attachment;
use crate::bpf::insn::{helper, op, R0, R1, R10, R2, R3, R4, R6};
use crate::bpf::{Asm, Map, MapKind, ProgKind, Program, Size};
use crate::capture::MemKind;
use crate::catalog::pid::ProcessImage;
use crate::error::{LinuxError, Result};
use crate::rlc::RunOnClose;

/// The linker's hook (glibc, and static glibc programs that can `dlopen`).
pub const HOOK: &str = "_dl_debug_state";

/// The hook of one process, placed while it is traced.
#[derive(Debug)]
pub struct RtldWatch {
    pid: u32,
    /// One u64: how many times the hook ran.
    count: Map,
    attach: Option<Attachment>,
    _prog: Program,
    /// The count last handled.
    seen: u64,
}

impl RtldWatch {
    /// Where the hook is in the process of `image`: the object and file offset. `None` when no
    /// object has it (a static program without `dlopen`): the process loads nothing later.
    pub fn site(image: &ProcessImage) -> Option<(String, u64)> {
        let by_name = || {
            image.objects.iter().find_map(|o| {
                o.table
                    .get(HOOK)
                    .map(|f| (o.table.path.clone(), f.file_offset))
            })
        };
        r_brk_site(image).or_else(by_name)
    }

    /// Places the hook at `site` (see [`RtldWatch::site`]) in the process of `image`; its stops
    /// are noted in `rlc`'s held map.
    pub fn place(image: &ProcessImage, site: (String, u64), rlc: &RunOnClose) -> Result<RtldWatch> {
        let (path, offset) = site;
        let count = Map::create(MapKind::Array, "dt_rtld", 4, 8, 1)?;
        let mut a = Asm::new();
        // Stop first, count after: once dtrace sees the count move, its SIGCONT cannot come
        // before the stop it answers.
        rlc.emit_hold(&mut a, 0);
        a.ld_map_value(R6, count.raw_fd(), 0)
            .mov_imm(R1, 1)
            .atomic_add64(R6, 0, R1);
        // Then wake dtrace, which sleeps until something is due.
        rlc.emit_ring(&mut a, 0);
        a.mov_imm(R0, 0).exit();
        let what = format!("the run-time linker of pid {}", image.pid);
        let prog = Program::load(ProgKind::Kprobe, &a.finish()?, "dt_rtld", &what)?;
        let site = crate::uprobe::UprobeSite {
            path: &path,
            offset,
            retprobe: false,
            pid: image.pid,
            ref_ctr_offset: 0,
        };
        let attach = crate::uprobe::attach(&prog, &site, &what)?;
        Ok(RtldWatch {
            pid: image.pid,
            count,
            attach: Some(attach),
            _prog: prog,
            seen: 0,
        })
    }

    /// The process watched.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    fn count(&self) -> Result<u64> {
        let v = self.count.lookup(&0u32.to_ne_bytes())?.unwrap_or_default();
        let bytes: [u8; 8] = v
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| LinuxError::Process("short rtld counter".into()))?;
        Ok(u64::from_ne_bytes(bytes))
    }

    /// Whether the linker changed the process's objects since the last call: the process is then
    /// stopped (or about to stop) in the hook until [`RtldWatch::resume`].
    pub fn changed(&mut self) -> bool {
        match self.count() {
            Ok(n) if n != self.seen => {
                self.seen = n;
                true
            }
            _ => false,
        }
    }

    /// Lets the process go on after a change. A `SIGCONT` sent before the stop took effect
    /// discards the pending stop, so the process never stays stopped.
    pub fn resume(&self) {
        // A process that is gone has nothing to resume.
        let _ = crate::process::continue_process(self.pid);
    }
}

/// The linker's hook in every process that maps one linker file, for the provider globs that
/// place USDT probes on files (see [`crate::provider::file_usdt`]): a process already looked at
/// for object files that loads a library later (`dlopen`) is looked at again. It stops nothing
/// (a `dtrace` that stalls must not stall every program that loads a library): the program
/// notes the process in an LRU hash that dtrace empties at each look, so a library's probes fire
/// from the look that finds it on, as for a process started later.
#[derive(Debug)]
pub struct LinkerWatch {
    /// The processes whose linker changed their objects since the last look (pid to nothing).
    changed: Map,
    _attach: Attachment,
    _prog: Program,
}

/// How many processes [`LinkerWatch`] notes between two looks (the least recently noted go
/// first; more in one interval than this are mostly processes just started, looked at anyway).
const CHANGED_ENTRIES: u32 = 8192;

impl LinkerWatch {
    /// Whether the object file at `path` may be a run-time linker: it exports `r_debug` (ld.so,
    /// or a static program that can `dlopen`).
    pub fn may_be_linker(path: &str) -> bool {
        r_debug_vaddr(path).is_some()
    }

    /// Places the hook of the linker file `path` for every process that maps it, its site read
    /// from process `pid`, which maps it (`None`: not a linker, or its `r_debug` is not set up).
    pub fn place(pid: u32, path: &str) -> Result<Option<LinkerWatch>> {
        let Some(obj) = crate::catalog::pid::MappedObject::load(path, false) else {
            return Ok(None);
        };
        let image = ProcessImage {
            pid,
            objects: vec![obj],
        };
        let Some((site_path, offset)) = RtldWatch::site(&image) else {
            return Ok(None);
        };
        let changed = Map::create(MapKind::LruHash, "dt_rtld_every", 4, 8, CHANGED_ENTRIES)?;
        let mut a = Asm::new();
        a.call(helper::GET_CURRENT_PID_TGID)
            .alu_imm(op::RSH, R0, 32)
            .store(Size::W, R10, -8, R0)
            .store_imm(Size::DW, R10, -16, 0)
            .ld_map_fd(R1, changed.raw_fd())
            .frame_addr(R2, -8)
            .frame_addr(R3, -16)
            .mov_imm(R4, 0)
            .call(helper::MAP_UPDATE_ELEM)
            .mov_imm(R0, 0)
            .exit();
        let what = format!("the run-time linker {site_path} in every process");
        let prog = Program::load(ProgKind::Kprobe, &a.finish()?, "dt_rtld_every", &what)?;
        let site = crate::uprobe::UprobeSite {
            path: &site_path,
            offset,
            retprobe: false,
            pid: crate::uprobe::EVERY_PROCESS,
            ref_ctr_offset: 0,
        };
        let attach = crate::uprobe::attach(&prog, &site, &what)?;
        Ok(Some(LinkerWatch {
            changed,
            _attach: attach,
            _prog: prog,
        }))
    }

    /// The processes whose linker ran its hook since the last call, forgotten here: one whose
    /// hook runs again after this call is returned by the next, so reading a process's objects
    /// after this call sees every change reported by it.
    pub fn take_changed(&self) -> Vec<u32> {
        let mut out = Vec::new();
        for k in self.changed.keys().unwrap_or_default() {
            let Some(pid) = k
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_ne_bytes)
            else {
                continue;
            };
            let _ = self.changed.delete(&k);
            out.push(pid);
        }
        out
    }
}

/// The address of `r_debug` (its exported symbol `_r_debug`) in the object at `path`.
fn r_debug_vaddr(path: &str) -> Option<u64> {
    use object::{Object, ObjectSymbol};
    let f = std::fs::File::open(path).ok()?;
    let cache = object::read::ReadCache::new(f);
    let file = object::File::parse(&cache).ok()?;
    let found = file
        .dynamic_symbols()
        .chain(file.symbols())
        .find(|s| s.name() == Ok(R_DEBUG) && s.address() != 0)
        .map(|s| s.address());
    found
}

/// `r_debug`'s exported name.
const R_DEBUG: &str = "_r_debug";
/// Offset of `r_brk` in `struct r_debug` (x86-64: `int r_version; struct link_map *r_map;`).
const R_BRK: u64 = 16;

/// Where the linker's hook is in the process of `image`, as a debugger finds it: the `r_brk`
/// address of the `r_debug` the linker (or a static program) exports, read from the process's
/// memory and turned into a file offset through its mappings. `None` where there is no such
/// structure or it is not set up.
fn r_brk_site(image: &ProcessImage) -> Option<(String, u64)> {
    let maps = crate::symbols::procmaps::read_maps(image.pid).ok()?;
    for o in &image.objects {
        let Some(vaddr) = r_debug_vaddr(&o.table.path) else {
            continue;
        };
        // The object's load bias: where its first page (file offset 0) is mapped, less the
        // address the file gives that page (0 for a shared object or PIE).
        let first = maps
            .iter()
            .find(|m| m.path == o.table.path && m.offset == 0)?;
        let bias = first.start.checked_sub(o.table.first_page_vaddr()?)?;
        let at = bias.checked_add(vaddr)?.checked_add(R_BRK)?;
        let bytes = crate::process::read_memory(image.pid, at, MemKind::UserBytes, 8).ok()?;
        let r_brk = u64::from_ne_bytes(bytes.get(..8)?.try_into().ok()?);
        let m = maps
            .iter()
            .find(|m| m.exec && (m.start..m.end).contains(&r_brk))?;
        return Some((m.path.clone(), r_brk - m.start + m.offset));
    }
    None
}

impl Drop for RtldWatch {
    fn drop(&mut self) {
        // Take the hook out first, then let go of a process it stopped that was not resumed.
        drop(self.attach.take());
        if self.changed() {
            self.resume();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_linker_hook_of_this_process_is_found_through_r_debug() {
        let image = ProcessImage::read(std::process::id()).expect("own image");
        let (path, offset) = r_brk_site(&image).expect("r_brk of a dynamically linked test");
        let ld = image
            .objects
            .iter()
            .find(|o| o.table.path == path)
            .expect("r_brk lies in a mapped object");
        // Where ld.so's symbols are known (debuginfo), r_brk is the hook function's first byte.
        if let Some(f) = ld.table.get(HOOK) {
            assert_eq!(offset, f.file_offset);
        }
        assert!(r_debug_vaddr(&path).is_some(), "{path} exports {R_DEBUG}");
    }
}
