//! The maps of `ustack()` and `jstack()` keys walked at the probe (`capture::ustack_keys`), the
//! consumer's side: every file's `.eh_frame` rows in one array, each process's mapped ranges by
//! its id, the per-CPU scratch, and the programs that forget a process's ranges when it execs or
//! ends. dtrace loads a process's ranges ([`UstackMaps::load`]) from the mappings it knows
//! (`Symbolizer::unwind_ranges`) when a firing of it is handed over (the probe found a PC no
//! loaded range holds): later firings of the process are then walked at the probe. Ranges read
//! before the process last exec'd or ended are not kept: the forgetting program notes when that
//! happened. Where the kernel can find a PC's mapping at the probe (`bpf_find_vma()`), each file
//! a loaded process maps is also kept by its device and inode (`Symbolizer::unwind_files`), so
//! the processes dtrace has not loaded (a shell loop's commands) are walked there by the files
//! they map (`capture::uunwind::FileRoute`) rather than handed over.

use crate::attach::Attachment;
use crate::bpf::{Map, MapKind, ProgKind, Program};
use crate::capture::spec::KEY_SCRATCH_SLOTS;
use crate::capture::ustack_keys::{self, UserWalk, RANGE_CAPACITY, SCRATCH_BYTES};
use crate::error::LinuxError;
use crate::mapping::Mapping;
use crate::symbols::unwind_rows::{
    file_key, Range, RowArena, RowsError, FILE_KEY_BYTES, FILE_VALUE_BYTES, RANGE_BYTES, ROW_BYTES,
};
use crate::symbols::Symbolizer;

/// Rows the kernel's array holds (of every file loaded).
pub const ROWS_CAPACITY: u32 = 1 << 18;
/// Processes whose ranges are loaded at once.
pub const PROCESSES: u32 = 4096;
/// Files the walk finds by their device and inode (see `capture::uunwind::FileRoute`).
pub const FILES: u32 = 4096;

/// Why a process's ranges could not be loaded (its firings then stay with dtrace).
#[derive(Debug, thiserror::Error)]
pub enum UstackMapsError {
    /// A map or program failed.
    #[error("{0}")]
    Bpf(#[from] LinuxError),
    /// The rows of a file could not be laid out.
    #[error("{0}")]
    Rows(#[from] RowsError),
    /// The process maps more ranges than the walk searches.
    #[error("{0} mapped ranges (the walk at the probe searches {RANGE_CAPACITY})")]
    TooManyRanges(usize),
    /// The rows of every file loaded fill the kernel's array.
    #[error("the unwind rows of the files loaded are more than {ROWS_CAPACITY}")]
    RowsFull,
}

/// The maps of the walk's way to a PC by its file (`capture::uunwind::FileRoute`).
struct Route {
    /// Each file's rows, by its device and inode.
    files: Map,
    /// The array of the scratch's keys.
    keys: Map,
    /// The processes whose walks took the route (dtrace loads their ranges:
    /// [`UstackMaps::load_routed`]).
    routed: Map,
}

/// The maps and programs of the walk at the probe, with the rows written so far.
pub struct UstackMaps {
    rows: Map,
    /// The rows array's values, mapped read-write (`BPF_F_MMAPABLE`): a file's rows are written
    /// there with no system call (tens of thousands for a C library: a batch update took
    /// milliseconds, while the process's firings went to dtrace).
    rows_mem: Mapping,
    ranges: Map,
    ends: Map,
    scratch: Map,
    /// Where the walk at the probe finds a PC by its file (`features::file_route_at_probe`).
    files: Option<Route>,
    /// The programs forgetting processes' ranges, attached.
    _forget: Vec<(Program, Attachment)>,
    arena: RowArena,
    written: usize,
    retries: Retries,
    /// Whether [`UstackMaps::warm`] ran.
    warmed: bool,
}

impl UstackMaps {
    /// Makes the maps and attaches the programs that forget a process's ranges.
    pub fn new() -> Result<UstackMaps, UstackMapsError> {
        let rows = Map::create_mmapable("dt_urows", ROW_BYTES as u32, ROWS_CAPACITY)?;
        // An mmap-able array's values lie end to end from the mapping's start, each in a
        // multiple of 8 bytes (the kernel's element size for it), as a row is.
        const _: () = assert!(ROW_BYTES.is_multiple_of(8));
        let rows_mem = rows.map_values("the unwind rows")?;
        let ranges = Map::create_hash_on_demand("dt_uranges", 4, range_value_bytes(), PROCESSES)?;
        let ends = Map::create(MapKind::LruHash, "dt_uends", 4, 8, PROCESSES)?;
        let scratch = Map::create(
            MapKind::PerCpuArray,
            "dt_uwalk",
            4,
            SCRATCH_BYTES as u32,
            KEY_SCRATCH_SLOTS,
        )?;
        let mut forget = Vec::new();
        for (tp, exits) in [("sched_process_exec", false), ("sched_process_exit", true)] {
            let insns = ustack_keys::forget_program(ranges.raw_fd(), ends.raw_fd(), exits)?;
            let what = format!("forgetting user stack ranges at {tp}");
            let prog = Program::load(ProgKind::RawTracepoint, &insns, "dt_uforget", &what)?;
            let at = Attachment::raw_tracepoint(&prog, tp)?;
            forget.push((prog, at));
        }
        let files = match crate::features::file_route_at_probe() {
            true => {
                let files = Map::create_hash_on_demand(
                    "dt_ufiles",
                    FILE_KEY_BYTES as u32,
                    FILE_VALUE_BYTES as u32,
                    FILES,
                )?;
                let keys = Map::create(MapKind::Array, "dt_ukeys", 4, 4 * KEY_SCRATCH_SLOTS, 1)?;
                let value: Vec<u8> = (0..KEY_SCRATCH_SLOTS).flat_map(u32::to_ne_bytes).collect();
                keys.update(&0u32.to_ne_bytes(), &value)?;
                let routed = Map::create(MapKind::LruHash, "dt_urouted", 4, 8, PROCESSES)?;
                Some(Route {
                    files,
                    keys,
                    routed,
                })
            }
            false => None,
        };
        Ok(UstackMaps {
            rows,
            rows_mem,
            ranges,
            ends,
            scratch,
            files,
            _forget: forget,
            arena: RowArena::new(),
            written: 0,
            retries: Retries::default(),
            warmed: false,
        })
    }

    /// Where a probe's walk finds the maps, its frame-pointer walk taking `fp_frames`.
    pub fn walk(&self, fp_frames: u32) -> UserWalk {
        UserWalk {
            rows: self.rows.raw_fd(),
            ranges: self.ranges.raw_fd(),
            scratch: self.scratch.raw_fd(),
            fp_frames,
            files: self.files.as_ref().map(|r| ustack_keys::RouteMaps {
                files: r.files.raw_fd(),
                keys: r.keys.raw_fd(),
                routed: r.routed.raw_fd(),
            }),
            frames: crate::capture::uunwind::FrameLoop::at_probe(),
        }
    }

    /// Loads the ranges of process `pid` as `syms` knows its mappings, for a firing of it at
    /// `since` (`bpf_ktime_get_ns()`): not kept when the process exec'd or ended after that
    /// (dtrace may have read the mappings of the image before). Returns whether they were
    /// loaded (a process dtrace knows no mapping of is not).
    /// A process whose ranges failed to load is not tried again for [`RETRY_NS`] of firing
    /// time (its firings meanwhile stay with dtrace, as they would anyway).
    pub fn load(
        &mut self,
        syms: &mut Symbolizer,
        pid: u32,
        since: u64,
    ) -> Result<bool, UstackMapsError> {
        if self.retries.waits(pid, since) {
            return Ok(false);
        }
        // Before the mappings are read: a firing before this saw no later mapping.
        let started = super::deliver::monotonic_ns();
        let loaded = self.try_load(syms, pid, since);
        if let Err(e) = &loaded {
            crate::debug::dprintf(|| format!("user stack walk: pid {pid} not loaded: {e}"));
        }
        match loaded {
            Ok(true) => self.retries.loaded(pid, started),
            Ok(false) => {}
            Err(_) => self.retries.failed(pid, since),
        }
        loaded
    }

    /// Lays out the rows of the libraries dtrace maps itself (the C library and the dynamic
    /// loader, which nearly every process maps), once: a new process's first firings then wait
    /// for its own files only. The C library's rows take about 6 ms to read and compile, while a
    /// new process firing at full speed fills the ring with firings handed over to dtrace (each
    /// with its stack) until its ranges are loaded.
    pub fn warm(&mut self, syms: &mut Symbolizer) {
        if !self.warmed {
            self.warmed = true;
            syms.warm_library_rows(std::process::id(), &mut self.arena);
        }
    }

    fn try_load(
        &mut self,
        syms: &mut Symbolizer,
        pid: u32,
        since: u64,
    ) -> Result<bool, UstackMapsError> {
        syms.note_process(pid);
        let ranges = syms.unwind_ranges(pid, &mut self.arena)?;
        if ranges.is_empty() {
            return Ok(false);
        }
        let value = range_value(&ranges)?;
        // The files it maps, for the walks of other processes that map them.
        let files = match self.files {
            Some(_) => syms.unwind_files(pid, &mut self.arena),
            None => Vec::new(),
        };
        let rows = self.arena.rows();
        if rows.len() > ROWS_CAPACITY as usize {
            return Err(UstackMapsError::RowsFull);
        }
        // The new rows, where no range the walk reads points yet (the ranges' update below
        // publishes them).
        let new: Vec<u8> = rows[self.written..]
            .iter()
            .flat_map(|row| row.to_bytes())
            .collect();
        self.rows_mem
            .write(self.written * ROW_BYTES, &new)
            .ok_or(UstackMapsError::RowsFull)?;
        self.written = rows.len();
        if let Some(route) = &self.files {
            for (id, v) in &files {
                // A full map leaves the file to the process's ranges.
                let _ = update_if_changed(&route.files, &file_key(*id), v);
            }
        }
        let key = pid.to_ne_bytes();
        let wrote = update_if_changed(&self.ranges, &key, &value)?;
        crate::debug::dprintf(|| {
            let list: Vec<String> = ranges
                .iter()
                .map(|r| {
                    format!(
                        "{:#x}-{:#x} bias {:#x} rows {}+{}",
                        r.start, r.end, r.bias, r.first, r.count
                    )
                })
                .collect();
            format!(
                "user stack walk: pid {pid} ranges {} at {since}, published at {} ({}): {}",
                if wrote { "loaded" } else { "unchanged" },
                super::deliver::monotonic_ns(),
                ranges.len(),
                list.join(", ")
            )
        });
        // Forgotten since the firing: what was read may be the image before.
        let ended = self.ends.lookup(&key)?.and_then(|v| {
            v.get(..8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_ne_bytes)
        });
        if ended.is_some_and(|t| t >= since) {
            self.ranges.delete(&key)?;
            crate::debug::dprintf(|| format!("user stack walk: pid {pid} exec'd or ended since"));
            return Ok(false);
        }
        Ok(true)
    }
}

impl UstackMaps {
    /// Loads the ranges of the processes whose walks at the probe found a PC by its file since
    /// the last call (processes dtrace had not loaded, their files known from others'), as of
    /// firing time `now`: their later walks take the ranges, which cost less (no search of the
    /// mapping and the files map at each frame). Returns those loaded. A process that fails to
    /// load is tried again once its walks note it again, after [`RETRY_NS`].
    pub fn load_routed(
        &mut self,
        syms: &mut Symbolizer,
        now: u64,
    ) -> Result<Vec<u32>, UstackMapsError> {
        let Some(route) = &self.files else {
            return Ok(Vec::new());
        };
        let mut pids = Vec::new();
        for key in route.routed.keys()? {
            route.routed.delete(&key)?;
            if let Some(pid) = key.get(..4).and_then(|b| b.try_into().ok()) {
                pids.push(u32::from_ne_bytes(pid));
            }
        }
        let mut loaded = Vec::new();
        for pid in pids {
            if let Ok(true) = self.load(syms, pid, now) {
                loaded.push(pid);
            }
        }
        Ok(loaded)
    }

    /// Forgets what was loaded of each of `pids` (its mappings changed under what was loaded):
    /// its next firing goes to dtrace, which loads it again.
    pub fn forget(&mut self, pids: &[u32]) -> Result<(), UstackMapsError> {
        for pid in pids {
            self.retries.forgot(*pid);
            self.ranges.delete(&pid.to_ne_bytes())?;
        }
        Ok(())
    }
}

#[cfg(test)]
impl UstackMaps {
    /// What the forgetting program does for the process of `key` at time `at`: returns `at`.
    pub(crate) fn forget_for_test(&self, key: &[u8], at: u64) -> u64 {
        let _ = self.ranges.delete(key);
        self.ends.update(key, &at.to_ne_bytes()).ok();
        at
    }
}

/// Firing time (ns) after a process's ranges failed to load before dtrace tries again: a
/// process the walk cannot take (more ranges than it searches, the rows array full) would
/// otherwise have its mappings read and laid out again at every firing handed over.
pub const RETRY_NS: u64 = 1_000_000_000;

/// When to load a process's ranges again: the processes whose ranges failed to load, each with
/// the firing time before which they are not tried again, and those loaded, each with the time
/// its mappings were read.
#[derive(Debug, Default)]
struct Retries {
    after: std::collections::HashMap<u32, u64>,
    loaded: std::collections::HashMap<u32, u64>,
}

impl Retries {
    /// Whether a firing of `pid` at `at` waits for its next try, or needs none: it fired before
    /// the process's mappings were read for the ranges loaded (a new process's firings handed
    /// over while dtrace loaded it: each would read them again, and compare the ranges with the
    /// kernel's, while the ring fills).
    fn waits(&self, pid: u32, at: u64) -> bool {
        self.after.get(&pid).is_some_and(|t| at < *t)
            || self.loaded.get(&pid).is_some_and(|t| at < *t)
    }

    /// The ranges of `pid` failed to load for its firing at `at`.
    fn failed(&mut self, pid: u32, at: u64) {
        if self.after.len() >= PROCESSES as usize {
            self.after.retain(|_, t| *t > at);
        }
        self.after.insert(pid, at.saturating_add(RETRY_NS));
    }

    /// The ranges of `pid` loaded, from its mappings read at `at`.
    fn loaded(&mut self, pid: u32, at: u64) {
        self.after.remove(&pid);
        if self.loaded.len() >= PROCESSES as usize {
            // The oldest half: their firings since are past them.
            let mut times: Vec<u64> = self.loaded.values().copied().collect();
            let (_, mid, _) = times.select_nth_unstable(PROCESSES as usize / 2);
            let mid = *mid;
            self.loaded.retain(|_, t| *t > mid);
        }
        self.loaded.insert(pid, at);
    }

    /// `pid`'s mappings changed under its ranges: its next firing loads them again.
    fn forgot(&mut self, pid: u32) {
        self.loaded.remove(&pid);
    }
}

/// Writes `value` under `key` of hash map `map` unless the map holds it already; returns whether
/// it wrote. A process's ranges are loaded again at each of its firings handed over before the
/// first load reached the kernel, most often the same ranges: each was a 40 KB update (and one
/// per file it maps) replacing the element the walks at the probes read, for nothing.
fn update_if_changed(map: &Map, key: &[u8], value: &[u8]) -> Result<bool, LinuxError> {
    if map.lookup(key)?.as_deref() == Some(value) {
        return Ok(false);
    }
    map.update(key, value)?;
    Ok(true)
}

/// Bytes of a process's ranges value: the count, then [`RANGE_CAPACITY`] ranges.
fn range_value_bytes() -> u32 {
    8 + RANGE_CAPACITY * RANGE_BYTES as u32
}

/// The value of `ranges` (sorted) as the walk reads it.
fn range_value(ranges: &[Range]) -> Result<Vec<u8>, UstackMapsError> {
    if ranges.len() > RANGE_CAPACITY as usize {
        return Err(UstackMapsError::TooManyRanges(ranges.len()));
    }
    let mut v = Vec::with_capacity(range_value_bytes() as usize);
    v.extend_from_slice(&(ranges.len() as u64).to_le_bytes());
    for r in ranges {
        v.extend_from_slice(&r.to_bytes());
    }
    v.resize(range_value_bytes() as usize, 0);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::{update_if_changed, Retries, PROCESSES, RETRY_NS};
    use crate::bpf::{Map, MapKind};

    /// A value already there is not written again (its element stays the one the probes read);
    /// a new one, or one the map lost, is.
    #[test]
    fn a_value_the_map_holds_is_not_written_again() {
        let t = "a_value_the_map_holds_is_not_written_again";
        if !dtrace_testkit::skip_unless(crate::bpf_available(), t, "needs bpf(2)") {
            return;
        }
        let map = Map::create(MapKind::Hash, "dt_utest", 4, 16, 2).unwrap();
        let key = 7u32.to_ne_bytes();
        let (a, b) = ([1u8; 16], [2u8; 16]);
        assert!(update_if_changed(&map, &key, &a).unwrap());
        assert!(!update_if_changed(&map, &key, &a).unwrap());
        assert!(update_if_changed(&map, &key, &b).unwrap());
        assert_eq!(map.lookup(&key).unwrap().as_deref(), Some(&b[..]));
        map.delete(&key).unwrap();
        assert!(update_if_changed(&map, &key, &b).unwrap());
        assert_eq!(map.lookup(&key).unwrap().as_deref(), Some(&b[..]));
    }

    /// A failed load waits [`RETRY_NS`] of firing time for its process only; a load clears
    /// it; the entries past their time go when the table is full.
    #[test]
    fn a_failed_load_is_tried_again_after_its_wait() {
        let mut r = Retries::default();
        assert!(!r.waits(7, 100));
        r.failed(7, 100);
        assert!(r.waits(7, 100));
        assert!(r.waits(7, 100 + RETRY_NS - 1));
        assert!(!r.waits(7, 100 + RETRY_NS));
        assert!(!r.waits(8, 101));
        r.loaded(7, 50);
        assert!(!r.waits(7, 101));
        for pid in 0..PROCESSES {
            r.failed(pid, 0);
        }
        r.failed(PROCESSES, RETRY_NS + 1);
        assert_eq!(r.after.len(), 1);
        assert!(r.waits(PROCESSES, RETRY_NS + 1));
    }

    /// A firing from before a process's mappings were read for its ranges loads nothing again;
    /// one after does, and after a forget every firing does; the table keeps the newer half
    /// when full.
    #[test]
    fn firings_before_a_load_do_not_load_again() {
        let mut r = Retries::default();
        r.loaded(7, 1_000);
        assert!(r.waits(7, 999));
        assert!(!r.waits(7, 1_000));
        assert!(!r.waits(8, 999));
        r.forgot(7);
        assert!(!r.waits(7, 999));
        for pid in 0..PROCESSES {
            r.loaded(pid, u64::from(pid));
        }
        r.loaded(PROCESSES, u64::from(PROCESSES));
        assert!(r.loaded.len() <= PROCESSES as usize / 2 + 1);
        assert!(r.waits(PROCESSES, u64::from(PROCESSES) - 1));
        assert!(r.waits(PROCESSES - 1, u64::from(PROCESSES) - 2));
        assert!(!r.waits(0, 0));
    }

    /// `warm()` lays out the rows of the libraries dtrace maps, once: the C library's are then
    /// in the arena, not made again when a process mapping it loads.
    #[test]
    fn warming_lays_out_dtraces_own_libraries_once() {
        let t = "warming_lays_out_dtraces_own_libraries_once";
        if !dtrace_testkit::skip_unless(crate::bpf_available(), t, "needs bpf(2)") {
            return;
        }
        let maps = crate::symbols::read_maps(std::process::id()).unwrap();
        let Some(libc) = maps
            .iter()
            .filter(|m| m.exec)
            .map(|m| m.path.as_str())
            .find(|p| {
                p.rsplit('/')
                    .next()
                    .is_some_and(|n| n.starts_with("libc.so"))
            })
        else {
            dtrace_testkit::skip_unless(false, t, "this process maps no libc.so");
            return;
        };
        let mut m = super::UstackMaps::new().unwrap();
        let mut syms = crate::symbols::Symbolizer::new();
        m.warm(&mut syms);
        let n = m.arena.rows().len();
        assert!(n > 1000, "{n} rows");
        m.warm(&mut syms);
        assert_eq!(m.arena.rows().len(), n);
        let rows = m
            .arena
            .file_rows(libc, || panic!("{libc}'s rows made again"));
        assert!(rows.unwrap().is_some_and(|(_, count)| count > 1000));
    }
}
