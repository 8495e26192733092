//! BPF maps: creation (array, per-CPU array, hash, ring buffer, stack trace) and element access from
//! user space. A [`Map`] owns its file descriptor; dropping it releases the map.

use super::sys::{self, cmd, map_type, MapCreateAttr, MapElemAttr};
use crate::error::{LinuxError, Result};
use std::os::fd::{AsRawFd, OwnedFd};

/// The kinds of map we create.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapKind {
    /// `BPF_MAP_TYPE_ARRAY`.
    Array,
    /// `BPF_MAP_TYPE_PERCPU_ARRAY`.
    PerCpuArray,
    /// `BPF_MAP_TYPE_HASH`.
    Hash,
    /// `BPF_MAP_TYPE_PERCPU_HASH` (one value per possible CPU for each key), created without
    /// preallocation: entries are allocated as they are first updated.
    PerCpuHash,
    /// `BPF_MAP_TYPE_ARRAY_OF_MAPS` (values are map descriptors, of maps like the template given
    /// at creation). An update from user space returns once every program that may have seen
    /// the old value has finished (the kernel waits for an RCU grace period).
    ArrayOfMaps,
    /// `BPF_MAP_TYPE_LRU_HASH` (old entries are evicted when full).
    LruHash,
    /// `BPF_MAP_TYPE_PROG_ARRAY` (tail-call targets; values are program descriptors).
    ProgArray,
    /// `BPF_MAP_TYPE_RINGBUF` (key and value size 0; max_entries is the byte size, a power of two
    /// multiple of the page size).
    RingBuf,
    /// `BPF_MAP_TYPE_STACK_TRACE` (value is `depth` u64 frames).
    StackTrace,
}

impl MapKind {
    fn code(self) -> u32 {
        match self {
            MapKind::Array => map_type::ARRAY,
            MapKind::PerCpuArray => map_type::PERCPU_ARRAY,
            MapKind::Hash => map_type::HASH,
            MapKind::PerCpuHash => map_type::PERCPU_HASH,
            MapKind::ArrayOfMaps => map_type::ARRAY_OF_MAPS,
            MapKind::LruHash => map_type::LRU_HASH,
            MapKind::ProgArray => map_type::PROG_ARRAY,
            MapKind::RingBuf => map_type::RINGBUF,
            MapKind::StackTrace => map_type::STACK_TRACE,
        }
    }
}

/// An open BPF map.
#[derive(Debug)]
pub struct Map {
    fd: OwnedFd,
    kind: MapKind,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
}

impl Map {
    /// Creates a map. `name` is shown by `bpftool map` (truncated to 15 characters).
    pub fn create(
        kind: MapKind,
        name: &str,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
    ) -> Result<Map> {
        Map::create_inner(kind, name, key_size, value_size, max_entries, None, 0)
    }

    /// Creates a [`MapKind::Hash`] whose entries are allocated as they are first updated
    /// (`BPF_F_NO_PREALLOC`): for large values few of whose keys are used at once.
    pub fn create_hash_on_demand(
        name: &str,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
    ) -> Result<Map> {
        /// `BPF_F_NO_PREALLOC`.
        const NO_PREALLOC: u32 = 1;
        Map::create_inner(
            MapKind::Hash,
            name,
            key_size,
            value_size,
            max_entries,
            None,
            NO_PREALLOC,
        )
    }

    /// Creates a [`MapKind::Array`] of `max_entries` values of `value_size` bytes that user space
    /// may map into its memory (`BPF_F_MMAPABLE`): its values are then read and written there
    /// with no system call, while programs look them up as any array's.
    pub fn create_mmapable(name: &str, value_size: u32, max_entries: u32) -> Result<Map> {
        /// `BPF_F_MMAPABLE`.
        const MMAPABLE: u32 = 1 << 10;
        Map::create_inner(
            MapKind::Array,
            name,
            4,
            value_size,
            max_entries,
            None,
            MMAPABLE,
        )
    }

    /// Creates an [`MapKind::ArrayOfMaps`] of `max_entries` slots for maps like `template`.
    pub fn create_array_of_maps(name: &str, template: &Map, max_entries: u32) -> Result<Map> {
        Map::create_inner(
            MapKind::ArrayOfMaps,
            name,
            4,
            4,
            max_entries,
            Some(template.raw_fd()),
            0,
        )
    }

    fn create_inner(
        kind: MapKind,
        name: &str,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        inner: Option<i32>,
        flags: u32,
    ) -> Result<Map> {
        /// `BPF_F_NO_PREALLOC`.
        const NO_PREALLOC: u32 = 1;
        let mut attr = MapCreateAttr {
            map_type: kind.code(),
            key_size,
            value_size,
            max_entries,
            map_flags: flags
                | if kind == MapKind::PerCpuHash {
                    NO_PREALLOC
                } else {
                    0
                },
            inner_map_fd: inner.map_or(0, |fd| fd as u32),
            map_name: sys::object_name(name),
            ..Default::default()
        };
        // SAFETY: attr is a MAP_CREATE attribute with no pointers.
        let fd = unsafe {
            sys::bpf_fd(
                cmd::MAP_CREATE,
                &mut attr,
                &format!("creating BPF map {name}"),
            )
        }?;
        Ok(Map {
            fd,
            kind,
            key_size,
            value_size,
            max_entries,
        })
    }

    /// The raw descriptor, for `ld_map_fd` in programs.
    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// The owned descriptor.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// The map kind.
    pub fn kind(&self) -> MapKind {
        self.kind
    }

    /// Bytes per value as seen by user space (for per-CPU maps: one slot per possible CPU, each
    /// rounded up to 8 bytes).
    pub fn user_value_size(&self) -> Result<usize> {
        match self.kind {
            MapKind::PerCpuArray | MapKind::PerCpuHash => {
                Ok(round8(self.value_size as usize) * possible_cpus()?)
            }
            _ => Ok(self.value_size as usize),
        }
    }

    /// The number of entries.
    pub fn max_entries(&self) -> u32 {
        self.max_entries
    }

    /// The values of an array made by [`Map::create_mmapable`], mapped shared and read-write
    /// into this process: value `i` at byte `i` times the value size rounded up to 8 (the
    /// kernel's element size for it). `what` names it in the error.
    pub fn map_values(&self, what: &str) -> Result<crate::mapping::Mapping> {
        let len = (round8(self.value_size as usize) * self.max_entries as usize)
            .next_multiple_of(crate::mapping::page_size());
        crate::mapping::Mapping::shared(self.raw_fd(), len, 0, true, what)
    }

    fn check_key(&self, key: &[u8]) -> Result<()> {
        if key.len() != self.key_size as usize {
            return Err(LinuxError::Asm(format!(
                "map key of {} bytes given, map has {}-byte keys",
                key.len(),
                self.key_size
            )));
        }
        Ok(())
    }

    /// Looks up `key`; `None` when absent.
    pub fn lookup(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_key(key)?;
        let mut value = vec![0u8; self.user_value_size()?];
        let mut attr = MapElemAttr {
            map_fd: self.raw_fd() as u32,
            key: key.as_ptr() as u64,
            value: value.as_mut_ptr() as u64,
            ..Default::default()
        };
        // SAFETY: key and value buffers have the sizes the map expects and outlive the call.
        match unsafe { sys::bpf(cmd::MAP_LOOKUP_ELEM, &mut attr) } {
            Ok(_) => Ok(Some(value)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(LinuxError::from_io("bpf(BPF_MAP_LOOKUP_ELEM)", e)),
        }
    }

    /// Inserts or replaces `key` with `value` (for per-CPU maps `value` holds every CPU's slot).
    pub fn update(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_key(key)?;
        if value.len() != self.user_value_size()? {
            return Err(LinuxError::Asm(format!(
                "map value of {} bytes given",
                value.len()
            )));
        }
        let mut attr = MapElemAttr {
            map_fd: self.raw_fd() as u32,
            key: key.as_ptr() as u64,
            value: value.as_ptr() as u64,
            ..Default::default()
        };
        // SAFETY: buffers sized as the map expects, alive for the call.
        unsafe { sys::bpf(cmd::MAP_UPDATE_ELEM, &mut attr) }
            .map(|_| ())
            .map_err(|e| LinuxError::from_io("bpf(BPF_MAP_UPDATE_ELEM)", e))
    }

    /// Deletes `key`; `false` when it was absent.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.check_key(key)?;
        let mut attr = MapElemAttr {
            map_fd: self.raw_fd() as u32,
            key: key.as_ptr() as u64,
            ..Default::default()
        };
        // SAFETY: key buffer sized as the map expects.
        match unsafe { sys::bpf(cmd::MAP_DELETE_ELEM, &mut attr) } {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(LinuxError::from_io("bpf(BPF_MAP_DELETE_ELEM)", e)),
        }
    }

    /// Every key of a hash map (iterating with `BPF_MAP_GET_NEXT_KEY`, bounded by `max_entries`).
    pub fn keys(&self) -> Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        let mut prev: Option<Vec<u8>> = None;
        for _ in 0..=self.max_entries {
            let mut next = vec![0u8; self.key_size as usize];
            let mut attr = MapElemAttr {
                map_fd: self.raw_fd() as u32,
                key: prev.as_ref().map(|k| k.as_ptr() as u64).unwrap_or(0),
                value: next.as_mut_ptr() as u64,
                ..Default::default()
            };
            // SAFETY: key (or null for the first) and next buffers are key-sized.
            match unsafe { sys::bpf(cmd::MAP_GET_NEXT_KEY, &mut attr) } {
                Ok(_) => {
                    out.push(next.clone());
                    prev = Some(next);
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => break,
                Err(e) => return Err(LinuxError::from_io("bpf(BPF_MAP_GET_NEXT_KEY)", e)),
            }
        }
        Ok(out)
    }

    /// The key after `prev` (the first key for `None`) of the map open as `fd`, written to `next`
    /// (sized as the map's keys); false at the end or on an error. One system call and no
    /// allocation, for a forked child of a threaded process (see [`crate::rlc`]).
    pub fn next_key_raw(fd: i32, prev: Option<&[u8]>, next: &mut [u8]) -> bool {
        let mut attr = MapElemAttr {
            map_fd: fd as u32,
            key: prev.map_or(0, |k| k.as_ptr() as u64),
            value: next.as_mut_ptr() as u64,
            ..Default::default()
        };
        // SAFETY: prev (or null) and next are key-sized buffers alive for the call.
        unsafe { sys::bpf(cmd::MAP_GET_NEXT_KEY, &mut attr) }.is_ok()
    }

    /// The value of `key` in the map open as `fd`, written to `value` (sized as the map's values);
    /// false when absent or on an error. One system call and no allocation, as
    /// [`Map::next_key_raw`].
    pub fn lookup_raw(fd: i32, key: &[u8], value: &mut [u8]) -> bool {
        let mut attr = MapElemAttr {
            map_fd: fd as u32,
            key: key.as_ptr() as u64,
            value: value.as_mut_ptr() as u64,
            ..Default::default()
        };
        // SAFETY: key and value are buffers of the map's sizes, alive for the call.
        unsafe { sys::bpf(cmd::MAP_LOOKUP_ELEM, &mut attr) }.is_ok()
    }

    /// Sums a per-CPU array's u64 counter at `index` over every CPU.
    pub fn percpu_sum_u64(&self, index: u32) -> Result<u64> {
        Ok(self
            .percpu_u64(index)?
            .into_iter()
            .fold(0u64, |a, b| a.wrapping_add(b)))
    }

    /// A per-CPU array's u64 counter at `index`, one value per possible CPU (indexed by CPU
    /// number, as the kernel lays per-CPU values out).
    pub fn percpu_u64(&self, index: u32) -> Result<Vec<u64>> {
        let v = self.lookup(&index.to_le_bytes())?.unwrap_or_default();
        let slot = round8(self.value_size as usize).max(8);
        Ok(v.chunks(slot)
            .filter_map(|c| c.get(..8))
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect())
    }
}

fn round8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// Parses a kernel CPU list such as `0-3,5,7-8`.
pub fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 65_536 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

fn cpu_list(path: &str) -> Result<Vec<u32>> {
    let s = std::fs::read_to_string(path).map_err(|e| LinuxError::from_io(path, e))?;
    parse_cpu_list(&s).ok_or_else(|| LinuxError::BadFile {
        path: path.into(),
        reason: format!("bad CPU list {s:?}"),
    })
}

/// Number of possible CPUs (per-CPU map slots). Fixed at boot: read once (every read of a
/// per-CPU map asks).
pub fn possible_cpus() -> Result<usize> {
    static POSSIBLE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    if let Some(&n) = POSSIBLE.get() {
        return Ok(n);
    }
    let n = cpu_list("/sys/devices/system/cpu/possible")?
        .iter()
        .max()
        .map(|m| *m as usize + 1)
        .unwrap_or(1);
    Ok(*POSSIBLE.get_or_init(|| n))
}

/// The online CPUs (where per-CPU perf events are opened).
pub fn online_cpus() -> Result<Vec<u32>> {
    cpu_list("/sys/devices/system/cpu/online")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_and_reject_garbage() {
        assert_eq!(parse_cpu_list("0-3,5\n"), Some(vec![0, 1, 2, 3, 5]));
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
        assert_eq!(parse_cpu_list("0-4294967295"), None);
    }
}
