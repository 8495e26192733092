//! Following every process's executable mappings as they are made, so user addresses resolve even
//! when the process has exited before the consumer reads its events (a `-c` command that runs for a
//! millisecond): one dummy software perf event per CPU with `mmap`, `mmap2`, `comm` and `task`
//! records (as `perf record` tracks mappings), read from its ring buffer whenever symbols are
//! looked up. `/proc/<pid>/maps` still serves the processes that were running before tracing
//! started. Records are outside bytes: every length is checked, a bad record ends the read of
//! that ring.

use super::procmaps::{FileId, Mapping};
use crate::attach::{open_perf_event, ATTR_SIZE, PERF_ATTR_WORDS};
use crate::error::Result;
use crate::mapping::{page_size, Mapping as Shared};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;

const PERF_TYPE_SOFTWARE: u64 = 1;
const PERF_COUNT_SW_DUMMY: u64 = 9;
// perf_event_attr flag bits.
const F_MMAP: u64 = 1 << 8;
const F_COMM: u64 = 1 << 9;
const F_TASK: u64 = 1 << 13;
const F_SAMPLE_ID_ALL: u64 = 1 << 18;
const PERF_SAMPLE_TIME: u64 = 1 << 2;
const F_MMAP2: u64 = 1 << 23;
const F_COMM_EXEC: u64 = 1 << 24;
// Record types.
const RECORD_COMM: u32 = 3;
const RECORD_FORK: u32 = 7;
const RECORD_MMAP2: u32 = 10;
const MISC_COMM_EXEC: u16 = 1 << 13;
const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
const PROT_EXEC: u32 = 4;
/// Data pages per CPU ring (a power of two).
const DATA_PAGES: usize = 64;

/// What a ring says about a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapEvent {
    /// Process `pid` mapped an executable file range.
    Map {
        /// Process.
        pid: u32,
        /// The mapping.
        mapping: Mapping,
    },
    /// Process `pid` replaced its image (its mappings are gone).
    Exec {
        /// Process.
        pid: u32,
    },
    /// Process `pid` was forked from `ppid` (it starts with the parent's mappings).
    Fork {
        /// New process.
        pid: u32,
        /// Its parent.
        ppid: u32,
    },
}

struct CpuRing {
    _fd: OwnedFd,
    /// The metadata page, then the data area.
    ring: Shared,
    data_off: usize,
    data_size: usize,
}

impl CpuRing {
    fn open(cpu: i32) -> Result<CpuRing> {
        let mut attr = [0u64; PERF_ATTR_WORDS];
        attr[0] = PERF_TYPE_SOFTWARE | (u64::from(ATTR_SIZE) << 32);
        attr[1] = PERF_COUNT_SW_DUMMY;
        // Every record ends with its time, so the rings of all CPUs merge in order.
        attr[3] = PERF_SAMPLE_TIME;
        attr[5] = F_MMAP | F_COMM | F_TASK | F_MMAP2 | F_COMM_EXEC | F_SAMPLE_ID_ALL;
        let fd = open_perf_event(&mut attr, cpu, "mapping records")?;
        let page = page_size();
        let len = page * (1 + DATA_PAGES);
        // The perf ring of a descriptor we own, read-write as perf requires.
        let ring = Shared::shared(fd.as_raw_fd(), len, 0, true, "a perf ring")?;
        Ok(CpuRing {
            _fd: fd,
            ring,
            data_off: page,
            data_size: page * DATA_PAGES,
        })
    }

    /// Reads every record written since the last call into `out`.
    fn read(&mut self, out: &mut Vec<(u64, MapEvent)>) {
        // The metadata page's data_head and data_tail.
        let (Some(head_pos), Some(tail_pos)) = (self.ring.u64_at(1024), self.ring.u64_at(1032))
        else {
            return;
        };
        let head = head_pos.load(Ordering::Acquire);
        let mut tail = tail_pos.load(Ordering::Relaxed);
        let size = self.data_size as u64;
        let byte = |i: u64| -> u8 {
            let at = self.data_off + (i % size) as usize;
            self.ring.bytes(at, 1).map_or(0, |b| b[0])
        };
        let mut rec = Vec::new();
        while tail < head && head - tail <= size {
            if head - tail < 8 {
                break;
            }
            let len = u64::from(u16::from_ne_bytes([byte(tail + 6), byte(tail + 7)]));
            if len < 8 || len > head - tail {
                break;
            }
            rec.clear();
            rec.extend((0..len).map(|i| byte(tail + i)));
            if let Some(e) = parse_record(&rec) {
                let time = rec
                    .len()
                    .checked_sub(8)
                    .and_then(|o| u64_at(&rec, o))
                    .unwrap_or(0);
                out.push((time, e));
            }
            tail += len;
        }
        // Everything up to head is consumed (a bad record ends the read; what it hid is lost).
        tail_pos.store(head, Ordering::Release);
    }
}

fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(o..o + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(o..o + 8)?.try_into().ok()?))
}

/// Parses one perf record (header included) into what it says about mappings, if anything.
pub fn parse_record(b: &[u8]) -> Option<MapEvent> {
    let kind = u32_at(b, 0)?;
    let misc = u16::from_ne_bytes(b.get(4..6)?.try_into().ok()?);
    match kind {
        RECORD_MMAP2 => {
            let pid = u32_at(b, 8)?;
            let (addr, len, pgoff) = (u64_at(b, 16)?, u64_at(b, 24)?, u64_at(b, 32)?);
            // The file's device and inode (a record with a build id instead, which dtrace does
            // not ask for, leaves it unknown).
            let file = match misc & MISC_MMAP_BUILD_ID {
                0 => FileId::from_parts(u32_at(b, 40)?, u32_at(b, 44)?, u64_at(b, 48)?),
                _ => FileId::default(),
            };
            let prot = u32_at(b, 64)?;
            let name = b.get(72..)?;
            let name = &name[..name.iter().position(|c| *c == 0)?];
            if prot & PROT_EXEC == 0 || name.is_empty() {
                return None;
            }
            Some(MapEvent::Map {
                pid,
                mapping: Mapping {
                    start: addr,
                    end: addr.checked_add(len)?,
                    offset: pgoff,
                    exec: true,
                    path: String::from_utf8_lossy(name).into_owned(),
                    file,
                },
            })
        }
        RECORD_COMM if misc & MISC_COMM_EXEC != 0 => {
            let (pid, tid) = (u32_at(b, 8)?, u32_at(b, 12)?);
            (pid == tid).then_some(MapEvent::Exec { pid })
        }
        RECORD_FORK => {
            let (pid, ppid, tid) = (u32_at(b, 8)?, u32_at(b, 12)?, u32_at(b, 16)?);
            (pid == tid && pid != ppid).then_some(MapEvent::Fork { pid, ppid })
        }
        _ => None,
    }
}

/// The per-CPU rings of mapping records.
pub struct MmapTracker {
    rings: Vec<CpuRing>,
}

impl std::fmt::Debug for MmapTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MmapTracker({} CPUs)", self.rings.len())
    }
}

impl MmapTracker {
    /// Opens a ring on every online CPU (root or CAP_PERFMON).
    pub fn open() -> Result<MmapTracker> {
        let cpus = crate::bpf::map::online_cpus()?;
        let rings = cpus
            .iter()
            .map(|c| CpuRing::open(*c as i32))
            .collect::<Result<Vec<_>>>()?;
        Ok(MmapTracker { rings })
    }

    /// Every record written since the last call, in the order they happened.
    pub fn read(&mut self) -> Vec<MapEvent> {
        let mut out = Vec::new();
        for r in &mut self.rings {
            r.read(&mut out);
        }
        out.sort_by_key(|(t, _)| *t);
        out.into_iter().map(|(_, e)| e).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut r = kind.to_ne_bytes().to_vec();
        r.extend_from_slice(&misc.to_ne_bytes());
        r.extend_from_slice(&((8 + body.len()) as u16).to_ne_bytes());
        r.extend_from_slice(body);
        r
    }

    fn mmap2(pid: u32, addr: u64, len: u64, pgoff: u64, prot: u32, name: &str) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&pid.to_ne_bytes());
        b.extend_from_slice(&pid.to_ne_bytes());
        for v in [addr, len, pgoff, 0, 0, 0] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b.extend_from_slice(&prot.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(name.as_bytes());
        b.extend_from_slice(&[0; 8][..8 - name.len() % 8]);
        b.extend_from_slice(&7u64.to_ne_bytes()); // sample_id: time
        record(RECORD_MMAP2, 0, &b)
    }

    #[test]
    fn records_say_what_they_map() {
        assert_eq!(
            parse_record(&mmap2(42, 0x1000, 0x2000, 0x3000, 5, "/bin/x")),
            Some(MapEvent::Map {
                pid: 42,
                mapping: Mapping {
                    start: 0x1000,
                    end: 0x3000,
                    offset: 0x3000,
                    exec: true,
                    path: "/bin/x".into(),
                    file: FileId::default(),
                },
            })
        );
        // The file's device and inode, in the kernel's encoding of the device.
        let mut r = mmap2(42, 0x1000, 0x2000, 0x3000, 5, "/bin/x");
        r[40..44].copy_from_slice(&8u32.to_ne_bytes());
        r[44..48].copy_from_slice(&1u32.to_ne_bytes());
        r[48..56].copy_from_slice(&77u64.to_ne_bytes());
        let Some(MapEvent::Map { mapping, .. }) = parse_record(&r) else {
            panic!("not a mapping");
        };
        assert_eq!(
            mapping.file,
            FileId {
                dev: (8 << 20) | 1,
                ino: 77
            }
        );
        // Data mappings and anonymous ones are not kept.
        assert_eq!(
            parse_record(&mmap2(42, 0x1000, 0x2000, 0, 3, "/bin/x")),
            None
        );
        assert_eq!(parse_record(&mmap2(42, 0x1000, 0x2000, 0, 5, "")), None);
        let ids = |a: u32, b: u32, c: u32| {
            let mut v = a.to_ne_bytes().to_vec();
            v.extend_from_slice(&b.to_ne_bytes());
            v.extend_from_slice(&c.to_ne_bytes());
            v.extend_from_slice(&c.to_ne_bytes());
            v
        };
        let mut comm = ids(9, 9, 0)[..8].to_vec();
        comm.extend_from_slice(b"true\0\0\0\0");
        assert_eq!(
            parse_record(&record(RECORD_COMM, MISC_COMM_EXEC, &comm)),
            Some(MapEvent::Exec { pid: 9 })
        );
        assert_eq!(parse_record(&record(RECORD_COMM, 0, &comm)), None);
        assert_eq!(
            parse_record(&record(RECORD_FORK, 0, &ids(10, 9, 10))),
            Some(MapEvent::Fork { pid: 10, ppid: 9 })
        );
        // A new thread is no new process.
        assert_eq!(parse_record(&record(RECORD_FORK, 0, &ids(9, 9, 11))), None);
        // Truncated records are nothing, never a panic.
        let m = mmap2(42, 0x1000, 0x2000, 0, 5, "/bin/x");
        for n in 0..m.len() {
            let _ = parse_record(&m[..n]);
        }
    }

    #[test]
    fn a_live_tracker_sees_a_new_process_map_its_program() {
        if !dtrace_testkit::skip_unless(
            dtrace_testkit::is_root(),
            "a_live_tracker_sees_a_new_process_map_its_program",
            "needs root (system-wide perf events)",
        ) {
            return;
        }
        let mut t = MmapTracker::open().expect("tracker");
        let st = std::process::Command::new("/bin/true")
            .status()
            .expect("true");
        assert!(st.success());
        let events = t.read();
        let true_pid = events.iter().find_map(|e| match e {
            MapEvent::Map { pid, mapping } if mapping.path.ends_with("/true") => Some(*pid),
            _ => None,
        });
        let pid = true_pid.unwrap_or_else(|| panic!("no mapping of true in {events:#?}"));
        assert!(events.contains(&MapEvent::Exec { pid }));
        assert!(events
            .iter()
            .any(|e| matches!(e, MapEvent::Fork { pid: p, .. } if *p == pid)));
    }
}
