//! The room of DTrace's per-CPU principal buffers, kept where both the probe's programs and
//! dtrace reach it: one account per CPU, in an array map that dtrace maps into its memory
//! (`BPF_F_MMAPABLE`). A program building a clause's record at the probe looks its CPU's account
//! up once and, through that one pointer, checks its record against the grant, takes its room
//! or counts a refusal (see `capture::kagg`); dtrace sets the grant at each switch of its buffers
//! and reads the refusals with no system call. Each account sits in a cache line of its own, so
//! CPUs never share one.
//!
//! An account holds three u64 (byte offsets [`GRANTED`], [`REFUSALS`], [`USED`]): the bytes of
//! records the CPU may have built at the probe since tracing began (written by dtrace only), the
//! records refused for lack of room (drops of the principal buffer, which fill a `fill` buffer),
//! and the bytes taken, less those given back (a record fits while this plus its size stays
//! within the grant). The records dtrace builds itself for a CPU's buffer (clauses that run there)
//! take their room from the same account ([`RoomMap`] is the framework's
//! [`SharedRoom`](dtrace_framework::buffer::SharedRoom)), so that the records of both sides never
//! pass the buffer between two switches; both sides take with an atomic add, and give back what
//! passed the grant.

use crate::bpf::Map;
use crate::error::{LinuxError, Result};
use crate::mapping::Mapping;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes between two CPUs' accounts (a cache line).
pub const SLOT: usize = 64;
/// Offset in an account of the bytes granted since tracing began (dtrace writes it).
pub const GRANTED: i16 = 0;
/// Offset in an account of the records refused for lack of room.
pub const REFUSALS: i16 = 8;
/// Offset in an account of the bytes taken by records, less those given back.
pub const USED: i16 = 16;

/// The accounts of every possible CPU, mapped into dtrace's memory.
#[derive(Debug)]
pub struct RoomMap {
    map: Map,
    mapping: Mapping,
    ncpus: usize,
    /// Per CPU, the bytes of records that reached dtrace's buffer through this account since
    /// tracing began (those built at the probe once read from the ring, dtrace's own at once):
    /// the rest of [`USED`] is on its way, and takes room from the next grant.
    landed: Vec<AtomicU64>,
}

impl RoomMap {
    /// Creates the accounts of `ncpus` CPUs, every grant without limit (`u64::MAX`) until dtrace
    /// gives one.
    pub fn create(name: &str, ncpus: usize) -> Result<RoomMap> {
        let ncpus = ncpus.max(1);
        let entries = u32::try_from(ncpus)
            .map_err(|_| LinuxError::Unavailable(format!("{ncpus} CPUs for the room map")))?;
        let map = Map::create_mmapable(name, SLOT as u32, entries)?;
        let mapping = map.map_values("the room map")?;
        let room = RoomMap {
            map,
            mapping,
            ncpus,
            landed: (0..ncpus).map(|_| AtomicU64::new(0)).collect(),
        };
        for cpu in 0..ncpus {
            room.set_granted(cpu, u64::MAX);
        }
        Ok(room)
    }

    /// The map's descriptor, for the programs.
    pub fn raw_fd(&self) -> i32 {
        self.map.raw_fd()
    }

    /// The number of CPUs with an account.
    pub fn ncpus(&self) -> usize {
        self.ncpus
    }

    fn field(&self, cpu: usize, off: i16) -> Option<&AtomicU64> {
        if cpu >= self.ncpus {
            return None;
        }
        self.mapping.u64_at(cpu * SLOT + off as usize)
    }

    /// Sets `cpu`'s grant (bytes since tracing began; the kernel only reads it).
    pub fn set_granted(&self, cpu: usize, bytes: u64) {
        if let Some(f) = self.field(cpu, GRANTED) {
            f.store(bytes, Ordering::Release);
        }
    }

    /// Counts `bytes` of a record built at the probe for `cpu` as arrived in dtrace's buffer.
    pub fn land(&self, cpu: usize, bytes: u64) {
        if let Some(l) = self.landed.get(cpu) {
            l.fetch_add(bytes, Ordering::AcqRel);
        }
    }

    /// The bytes of `cpu`'s records that reached dtrace's buffer (see [`RoomMap::land`]).
    pub fn landed(&self, cpu: usize) -> u64 {
        self.landed
            .get(cpu)
            .map_or(0, |l| l.load(Ordering::Acquire))
    }

    /// `cpu`'s grant.
    pub fn granted(&self, cpu: usize) -> u64 {
        self.field(cpu, GRANTED)
            .map_or(0, |f| f.load(Ordering::Acquire))
    }

    /// The bytes `cpu`'s records took, less those given back.
    pub fn used(&self, cpu: usize) -> u64 {
        self.field(cpu, USED)
            .map_or(0, |f| f.load(Ordering::Acquire))
    }

    /// The records each CPU refused for lack of room, indexed by CPU number (the counts only
    /// grow).
    pub fn refusals(&self) -> Vec<u64> {
        (0..self.ncpus)
            .map(|cpu| {
                self.field(cpu, REFUSALS)
                    .map_or(0, |f| f.load(Ordering::Acquire))
            })
            .collect()
    }
}

impl dtrace_framework::buffer::SharedRoom for RoomMap {
    fn take(&self, cpu: u32, bytes: u64) -> bool {
        let cpu = cpu as usize;
        let Some(used) = self.field(cpu, USED) else {
            return true;
        };
        let before = used.fetch_add(bytes, Ordering::AcqRel);
        if before.saturating_add(bytes) > self.granted(cpu) {
            used.fetch_sub(bytes, Ordering::AcqRel);
            return false;
        }
        // A record dtrace builds reaches its buffer at once.
        self.land(cpu, bytes);
        true
    }

    fn give(&self, cpu: u32, bytes: u64) {
        let cpu = cpu as usize;
        if let Some(used) = self.field(cpu, USED) {
            used.fetch_sub(bytes, Ordering::AcqRel);
        }
        if let Some(l) = self.landed.get(cpu) {
            l.fetch_sub(bytes, Ordering::AcqRel);
        }
    }

    fn close(&self, cpu: u32) {
        self.set_granted(cpu as usize, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use dtrace_framework::buffer::SharedRoom;

    /// The accounts, or `None` (with the reason printed) where BPF maps cannot be created,
    /// unless `DTRACE_TEST_REQUIRE_KERNEL=1` demands them.
    fn room(t: &str) -> Option<RoomMap> {
        match RoomMap::create("dt_test_room", 2) {
            Ok(r) => Some(r),
            Err(e) if std::env::var("DTRACE_TEST_REQUIRE_KERNEL").as_deref() != Ok("1") => {
                eprintln!("{t}: skipped: {e}");
                None
            }
            Err(e) => panic!("{t}: {e}"),
        }
    }

    #[test]
    fn the_mapping_is_the_maps_values() {
        let Some(room) = room("the_mapping_is_the_maps_values") else {
            return;
        };
        // Every grant starts without limit; one set through the mapping is the map's value,
        // as a program looking CPU 1's account up reads it.
        assert_eq!(room.granted(0), u64::MAX);
        room.set_granted(1, 4096);
        let v = room.map.lookup(&1u32.to_le_bytes()).unwrap().unwrap();
        assert_eq!(v.len(), SLOT);
        assert_eq!(&v[GRANTED as usize..][..8], &4096u64.to_ne_bytes());
        assert_eq!(&v[USED as usize..][..8], &[0; 8]);
    }

    #[test]
    fn dtrace_takes_its_records_room_from_the_account() {
        let Some(room) = room("dtrace_takes_its_records_room_from_the_account") else {
            return;
        };
        room.set_granted(0, 100);
        // The probe's records took 40 bytes, 16 of them read from the ring.
        room.field(0, USED).unwrap().store(40, Ordering::SeqCst);
        room.land(0, 16);
        assert!(room.take(0, 48));
        assert_eq!((room.used(0), room.landed(0)), (88, 64));
        // Past the grant: refused, nothing taken.
        assert!(!room.take(0, 16));
        assert_eq!(room.used(0), 88);
        // A record that did not reach the buffer gives its room back.
        room.give(0, 48);
        assert_eq!((room.used(0), room.landed(0)), (40, 16));
        // Another CPU's account is its own; a filled buffer closes the grant.
        assert!(room.take(1, 1 << 20));
        room.close(1);
        assert_eq!(room.granted(1), 0);
        assert!(!room.take(1, 8));
    }
}
