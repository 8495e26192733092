//! The ring's keeper: a thread that empties the ring buffer into memory whenever its programs
//! wake its readers (once it is 1/`wakeup_divisor` full, or a record asks for it), so that a
//! burst of records is never lost to a full ring while dtrace is busy elsewhere: loading the
//! programs of a library a traced process just mapped, or the symbols and unwind tables of the
//! first firings of a process (a program calling `malloc()` thousands of times in its first
//! milliseconds, each firing's record carrying its user stack, fills an 8 MiB ring in that time).
//!
//! The reader (dtrace's thread) still reads the ring itself ([`RingKeeper::drain`]): the records
//! the keeper took first (they are older), then what the ring holds, both under the ring's lock,
//! so the order is the ring's. The keeper takes records only on a wake-up (edge-triggered: a
//! ring filling slowly is left to the reader, which reads it in batches) and holds at most
//! [`RingKeeper::start`]'s `cap` bytes of them: past that, the ring fills and the probes count
//! their drops, as without a keeper. It tells the reader of what it took through an eventfd,
//! which the reader's waits watch.

use super::ringbuf::RingBuf;
use crate::error::{LinuxError, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, PoisonError};

/// What the keeper took from the ring, oldest first, and their bytes.
#[derive(Default)]
struct Backlog {
    records: Vec<Vec<u8>>,
    bytes: usize,
}

struct Shared {
    ring: Mutex<RingBuf>,
    backlog: Mutex<Backlog>,
    cap: usize,
}

/// A ring buffer and the thread that keeps it from filling.
pub struct RingKeeper {
    shared: Arc<Shared>,
    /// Written by the keeper when it took records: the reader's waits watch it.
    taken: OwnedFd,
    /// Written by the reader to end the keeper.
    stop: OwnedFd,
    /// The ring's epoll (its own descriptor), which watches `taken` too, for the reader's waits.
    waiter: OwnedFd,
    map_fd: RawFd,
    size: usize,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for RingKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingKeeper")
            .field("map_fd", &self.map_fd)
            .field("size", &self.size)
            .finish()
    }
}

fn eventfd() -> Result<OwnedFd> {
    // SAFETY: eventfd has no memory preconditions.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(LinuxError::last_os("eventfd"));
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn epoll() -> Result<OwnedFd> {
    // SAFETY: epoll_create1 has no memory preconditions.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
        return Err(LinuxError::last_os("epoll_create1"));
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn watch(epoll: RawFd, fd: RawFd, events: u32, what: &'static str) -> Result<()> {
    let mut ev = libc::epoll_event {
        events,
        u64: fd as u64,
    };
    // SAFETY: valid epoll and watched descriptors and an event structure alive for the call.
    if unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
        return Err(LinuxError::last_os(what));
    }
    Ok(())
}

/// Adds 1 to eventfd `fd`.
fn post(fd: RawFd) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: 8 bytes from a live buffer; a full counter (EAGAIN) already says the same.
    unsafe { libc::write(fd, one.as_ptr().cast(), one.len()) };
}

/// Resets eventfd `fd` (nonblocking).
fn clear(fd: RawFd) {
    let mut buf = [0u8; 8];
    // SAFETY: 8 bytes into a live buffer; nothing to read (EAGAIN) is as good.
    unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
}

/// Waits up to `timeout_ms` (-1: forever) for an event of `epoll`: whether one came (`false`
/// on a timeout or a signal).
fn wait_on(epoll: RawFd, timeout_ms: i32) -> Result<bool> {
    let mut ev = libc::epoll_event { events: 0, u64: 0 };
    // SAFETY: one event slot, a valid epoll descriptor.
    let r = unsafe { libc::epoll_wait(epoll, &mut ev, 1, timeout_ms) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok(false);
        }
        return Err(LinuxError::from_io("epoll_wait on ring buffer", e));
    }
    Ok(r > 0)
}

impl RingKeeper {
    /// Starts keeping `ring`, holding at most `cap` bytes of records the reader has not read.
    pub fn start(ring: RingBuf, cap: usize) -> Result<RingKeeper> {
        let (taken, stop) = (eventfd()?, eventfd()?);
        let map_fd = ring.map().raw_fd();
        let size = ring.size();
        // The reader's waits: the ring's readiness (as its own epoll reports it) or a backlog.
        // SAFETY: dup of a descriptor the ring owns; the copy is ours.
        let dup = unsafe { libc::fcntl(ring.epoll_fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return Err(LinuxError::last_os("dup of the ring's epoll"));
        }
        // SAFETY: a fresh descriptor we own.
        let waiter = unsafe { OwnedFd::from_raw_fd(dup) };
        watch(
            waiter.as_raw_fd(),
            taken.as_raw_fd(),
            libc::EPOLLIN as u32,
            "epoll_ctl on the ring's backlog",
        )?;
        // The keeper's own: wake-ups of the ring (edge-triggered) and the stop.
        let mine = epoll()?;
        watch(
            mine.as_raw_fd(),
            map_fd,
            (libc::EPOLLIN | libc::EPOLLET) as u32,
            "epoll_ctl on ring buffer",
        )?;
        watch(
            mine.as_raw_fd(),
            stop.as_raw_fd(),
            libc::EPOLLIN as u32,
            "epoll_ctl on the keeper's stop",
        )?;
        let shared = Arc::new(Shared {
            ring: Mutex::new(ring),
            backlog: Mutex::new(Backlog::default()),
            cap,
        });
        let (keep, taken_fd, stop_fd) = (shared.clone(), taken.as_raw_fd(), stop.as_raw_fd());
        let thread = std::thread::Builder::new()
            .name("dtrace-ring".into())
            .spawn(move || keep_ring(&keep, &mine, taken_fd, stop_fd))
            .map_err(|e| LinuxError::from_io("spawning the ring's keeper", e))?;
        Ok(RingKeeper {
            shared,
            taken,
            stop,
            waiter,
            map_fd,
            size,
            thread: Some(thread),
        })
    }

    /// The ring's map descriptor, for `ld_map_fd` in programs.
    pub fn map_fd(&self) -> RawFd {
        self.map_fd
    }

    /// The ring's data area size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Readable once the keeper took records the reader has not read (for waits among other
    /// descriptors, beside the ring's own).
    pub fn taken_fd(&self) -> RawFd {
        self.taken.as_raw_fd()
    }

    /// Hands every record committed before the call to `f`, in the ring's order (what the keeper
    /// took first), and frees their space. Returns how many.
    pub fn drain(&self, mut f: impl FnMut(&[u8])) -> usize {
        let mut ring = self
            .shared
            .ring
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let taken = std::mem::take(
            &mut *self
                .shared
                .backlog
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        clear(self.taken.as_raw_fd());
        let n = taken.records.len();
        for r in &taken.records {
            f(r);
        }
        n + ring.consume(f)
    }

    /// Waits up to `timeout_ms` (-1: forever) for the ring's programs to wake its readers, or for
    /// records the keeper took. Returns `false` on a timeout or a signal.
    pub fn wait(&self, timeout_ms: i32) -> Result<bool> {
        wait_on(self.waiter.as_raw_fd(), timeout_ms)
    }
}

/// The keeper's loop: on each wake-up of the ring, the records it holds move to the backlog
/// (while it has room), and the reader hears of them.
fn keep_ring(shared: &Shared, epoll: &OwnedFd, taken: RawFd, stop: RawFd) {
    let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 2];
    loop {
        // SAFETY: two event slots, a valid epoll descriptor.
        let r = unsafe { libc::epoll_wait(epoll.as_raw_fd(), evs.as_mut_ptr(), 2, -1) };
        if r < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
        if evs[..r as usize].iter().any(|e| e.u64 == stop as u64) {
            return;
        }
        let mut ring = shared.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let mut backlog = shared
            .backlog
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if backlog.bytes >= shared.cap {
            continue;
        }
        let n = ring.consume(|b| {
            backlog.bytes += b.len();
            backlog.records.push(b.to_vec());
        });
        drop(backlog);
        drop(ring);
        if n > 0 {
            post(taken);
        }
    }
}

impl Drop for RingKeeper {
    fn drop(&mut self) {
        post(self.stop.as_raw_fd());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
