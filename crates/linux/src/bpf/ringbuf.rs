//! Ring-buffer consumption: maps a `BPF_MAP_TYPE_RINGBUF` into our address space, walks committed
//! records, and waits for new ones with epoll. Unmapped and closed on drop.

use super::map::{Map, MapKind};
use crate::error::{LinuxError, Result};
use crate::mapping::{page_size, Mapping};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

const BUSY_BIT: u32 = 1 << 31;
const DISCARD_BIT: u32 = 1 << 30;
const HDR_SIZE: usize = 8;

/// A BPF ring buffer and its user-space mapping.
#[derive(Debug)]
pub struct RingBuf {
    map: Map,
    /// The consumer page (read-write): the consumer position.
    consumer: Mapping,
    /// The producer page, then the data area twice (read-only).
    producer: Mapping,
    page: usize,
    size: usize,
    epoll: OwnedFd,
}

impl RingBuf {
    /// Creates a ring buffer of `size` bytes (rounded up to a power of two of at least one page).
    pub fn create(name: &str, size: usize) -> Result<RingBuf> {
        let page = page_size();
        let size = size
            .max(page)
            .checked_next_power_of_two()
            .filter(|s| *s <= 1 << 30)
            .ok_or_else(|| LinuxError::BadCapture {
                probe: name.into(),
                reason: format!("ring buffer size {size} too large"),
            })?;
        let map = Map::create(MapKind::RingBuf, name, 0, 0, size as u32)?;
        let fd = map.raw_fd();
        // The consumer page read-write, the producer page and the data area mapped twice back
        // to back read-only, as the ring buffer map's mmap contract specifies.
        let consumer = Mapping::shared(fd, page, 0, true, "ring buffer consumer page")?;
        let producer = Mapping::shared(fd, page + 2 * size, page, false, "ring buffer data")?;
        // SAFETY: epoll_create1 has no memory preconditions.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(LinuxError::last_os("epoll_create1"));
        }
        // SAFETY: fresh descriptor.
        let epoll = unsafe { OwnedFd::from_raw_fd(ep) };
        let rb = RingBuf {
            map,
            consumer,
            producer,
            page,
            size,
            epoll,
        };
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: 0,
        };
        // SAFETY: valid epoll and map descriptors and event structure.
        if unsafe { libc::epoll_ctl(rb.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(LinuxError::last_os("epoll_ctl on ring buffer"));
        }
        Ok(rb)
    }

    /// The map, for `ld_map_fd` in programs.
    pub fn map(&self) -> &Map {
        &self.map
    }

    /// The data area size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    fn consumer_pos(&self) -> Option<&AtomicU64> {
        // The consumer page starts with the consumer position.
        self.consumer.u64_at(0)
    }

    fn producer_pos(&self) -> Option<&AtomicU64> {
        // The producer page starts with the producer position.
        self.producer.u64_at(0)
    }

    /// Hands every record committed before the call to `f`, in order, and frees their space.
    /// Returns how many.
    pub fn consume(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        let (Some(cons_pos), Some(prod_pos)) = (self.consumer_pos(), self.producer_pos()) else {
            return 0;
        };
        let mask = (self.size - 1) as u64;
        let mut n = 0;
        let mut cons = cons_pos.load(Ordering::Acquire);
        // Only what was produced before this call: a producer as fast as we are cannot keep us here.
        let prod = prod_pos.load(Ordering::Acquire);
        while cons < prod {
            // The data area starts a page into the producer mapping; a header is 8-aligned.
            let off = self.page + (cons & mask) as usize;
            let Some(hdr) = self.producer.u32_at(off).map(|h| h.load(Ordering::Acquire)) else {
                break;
            };
            if hdr & BUSY_BIT != 0 {
                break;
            }
            let len = (hdr & !(BUSY_BIT | DISCARD_BIT)) as usize;
            if len > self.size {
                // Cannot happen with a sane kernel; stop rather than read out of bounds.
                break;
            }
            if hdr & DISCARD_BIT == 0 {
                // The data area is mapped twice back to back: a record that wraps is contiguous.
                let Some(rec) = self.producer.bytes(off + HDR_SIZE, len) else {
                    break;
                };
                f(rec);
                n += 1;
            }
            cons += (len + HDR_SIZE).div_ceil(8) as u64 * 8;
            cons_pos.store(cons, Ordering::Release);
        }
        n
    }

    /// Waits up to `timeout_ms` (-1: forever) for data. Returns `false` on timeout or when a signal
    /// interrupted the wait.
    pub fn wait(&self, timeout_ms: i32) -> Result<bool> {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: one event slot, valid epoll descriptor.
        let r = unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), &mut ev, 1, timeout_ms) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                return Ok(false);
            }
            return Err(LinuxError::from_io("epoll_wait on ring buffer", e));
        }
        Ok(r > 0)
    }
}
