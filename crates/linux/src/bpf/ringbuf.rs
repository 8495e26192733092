//! Ring-buffer consumption: maps a `BPF_MAP_TYPE_RINGBUF` into our address space, walks committed
//! records, and waits for new ones with epoll. Unmapped and closed on drop.

use super::map::{Map, MapKind};
use crate::error::{LinuxError, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const BUSY_BIT: u32 = 1 << 31;
const DISCARD_BIT: u32 = 1 << 30;
const HDR_SIZE: usize = 8;

/// A BPF ring buffer and its user-space mapping.
#[derive(Debug)]
pub struct RingBuf {
    map: Map,
    consumer: *mut u8,
    producer: *mut u8,
    data: *const u8,
    page: usize,
    size: usize,
    epoll: OwnedFd,
}

// SAFETY: the mappings belong to this value alone and are only touched through &mut self or atomics.
unsafe impl Send for RingBuf {}

impl RingBuf {
    /// Creates a ring buffer of `size` bytes (rounded up to a power of two of at least one page).
    pub fn create(name: &str, size: usize) -> Result<RingBuf> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
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
        // SAFETY: mapping the consumer page read-write and producer page + data twice read-only, as the
        // ring buffer map's mmap contract specifies; results are checked.
        let consumer = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if consumer == libc::MAP_FAILED {
            return Err(LinuxError::last_os("mmap of ring buffer consumer page"));
        }
        // SAFETY: as above.
        let producer = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page + 2 * size,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                page as i64,
            )
        };
        if producer == libc::MAP_FAILED {
            let e = LinuxError::last_os("mmap of ring buffer data");
            // SAFETY: unmapping what we just mapped.
            unsafe { libc::munmap(consumer, page) };
            return Err(e);
        }
        // SAFETY: epoll_create1 has no memory preconditions.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            let e = LinuxError::last_os("epoll_create1");
            // SAFETY: unmapping what we mapped.
            unsafe {
                libc::munmap(consumer, page);
                libc::munmap(producer, page + 2 * size);
            }
            return Err(e);
        }
        // SAFETY: fresh descriptor.
        let epoll = unsafe { OwnedFd::from_raw_fd(ep) };
        let rb = RingBuf {
            map,
            consumer: consumer as *mut u8,
            producer: producer as *mut u8,
            // SAFETY: data starts one page into the producer mapping.
            data: unsafe { (producer as *const u8).add(page) },
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

    fn consumer_pos(&self) -> &AtomicU64 {
        // SAFETY: the consumer page starts with the 8-byte aligned consumer position.
        unsafe { &*(self.consumer as *const AtomicU64) }
    }

    fn producer_pos(&self) -> &AtomicU64 {
        // SAFETY: the producer page starts with the 8-byte aligned producer position.
        unsafe { &*(self.producer as *const AtomicU64) }
    }

    /// Hands every record committed before the call to `f`, in order, and frees their space.
    /// Returns how many.
    pub fn consume(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        let mask = (self.size - 1) as u64;
        let mut n = 0;
        let mut cons = self.consumer_pos().load(Ordering::Acquire);
        // Only what was produced before this call: a producer as fast as we are cannot keep us here.
        let prod = self.producer_pos().load(Ordering::Acquire);
        loop {
            if cons >= prod {
                break;
            }
            let off = (cons & mask) as usize;
            // SAFETY: off < size and the header is 8-byte aligned inside the data area.
            let hdr = unsafe { &*(self.data.add(off) as *const AtomicU32) }.load(Ordering::Acquire);
            if hdr & BUSY_BIT != 0 {
                break;
            }
            let len = (hdr & !(BUSY_BIT | DISCARD_BIT)) as usize;
            if len > self.size {
                // Cannot happen with a sane kernel; stop rather than read out of bounds.
                break;
            }
            if hdr & DISCARD_BIT == 0 {
                // SAFETY: the data area is mapped twice back to back, so off + 8 + len <= 2 * size
                // is readable contiguously.
                let rec = unsafe { std::slice::from_raw_parts(self.data.add(off + HDR_SIZE), len) };
                f(rec);
                n += 1;
            }
            cons += (len + HDR_SIZE).div_ceil(8) as u64 * 8;
            self.consumer_pos().store(cons, Ordering::Release);
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

impl Drop for RingBuf {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the regions mapped in `create`.
        unsafe {
            libc::munmap(self.consumer as *mut libc::c_void, self.page);
            libc::munmap(
                self.producer as *mut libc::c_void,
                self.page + 2 * self.size,
            );
        }
    }
}
