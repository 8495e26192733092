//! Memory dtrace shares with the kernel through `mmap(2)` of a descriptor: a BPF ring buffer's
//! pages, an mmap-able array's values (the room accounts, the unwind rows), a perf event's ring.
//! One owner of the mapping calls, and bounds-checked access to what lies in it: aligned words
//! read and written atomically (the positions and counters both sides update), bytes the kernel
//! has published, and bytes dtrace writes before it publishes them.

use crate::error::{LinuxError, Result};
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64};

/// The size of a memory page (at least 4096).
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page).unwrap_or(4096).max(4096)
}

/// One shared mapping of `len` bytes of a descriptor, unmapped when dropped.
#[derive(Debug)]
pub struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping belongs to this value alone, lives as long as it, and is reached only
// through atomics and reads of bytes the kernel published (see `bytes`).
unsafe impl Send for Mapping {}
// SAFETY: as above: no access through a shared reference writes but through an atomic.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` from `offset` (page multiples), shared, read-only or read-write;
    /// `what` names it in the error.
    pub fn shared(
        fd: RawFd,
        len: usize,
        offset: usize,
        writable: bool,
        what: &str,
    ) -> Result<Self> {
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| LinuxError::Unavailable(format!("{what}: offset {offset}")))?;
        // SAFETY: a new mapping chosen by the kernel (no address given), of a descriptor the
        // caller holds open; the result is checked before use.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                fd,
                offset,
            )
        };
        if at == libc::MAP_FAILED {
            return Err(LinuxError::last_os(format!("mmap of {what}")));
        }
        let base = NonNull::new(at.cast::<u8>())
            .ok_or_else(|| LinuxError::Unavailable(format!("mmap of {what}")))?;
        Ok(Mapping { base, len })
    }

    /// The mapping's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it maps nothing (never, for a mapping made).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address `off` bytes in, when `size` bytes from there are inside and `off` is a
    /// multiple of `align`.
    fn at(&self, off: usize, size: usize, align: usize) -> Option<*mut u8> {
        let end = off.checked_add(size)?;
        (end <= self.len && off.is_multiple_of(align)).then(|| {
            // SAFETY: off + size <= len: inside the mapping.
            unsafe { self.base.as_ptr().add(off) }
        })
    }

    /// The 64-bit word at `off` (8-aligned: the mapping starts on a page), shared with the kernel.
    pub fn u64_at(&self, off: usize) -> Option<&AtomicU64> {
        let p = self.at(off, 8, 8)?;
        // SAFETY: in bounds and 8-aligned (page-aligned base); AtomicU64 has u64's layout, and
        // every access to shared words goes through atomics; borrowed no longer than `self`.
        Some(unsafe { &*p.cast::<AtomicU64>() })
    }

    /// The 32-bit word at `off` (4-aligned), shared with the kernel.
    pub fn u32_at(&self, off: usize) -> Option<&AtomicU32> {
        let p = self.at(off, 4, 4)?;
        // SAFETY: as for `u64_at`, with 4-byte alignment.
        Some(unsafe { &*p.cast::<AtomicU32>() })
    }

    /// The `len` bytes at `off`. The caller reads only bytes the kernel published before an
    /// acquire load of the position that covers them, and which it does not write again until
    /// the caller releases them (a ring's committed records).
    pub fn bytes(&self, off: usize, len: usize) -> Option<&[u8]> {
        let p = self.at(off, len, 1)?;
        // SAFETY: in bounds; the bytes stay unchanged while borrowed, per the contract above.
        Some(unsafe { std::slice::from_raw_parts(p, len) })
    }
}

impl Mapping {
    /// Writes `bytes` at `off`, when they lie inside the mapping. Only for bytes no program
    /// reads until the caller publishes them by a later system call (the rows of an mmap-able
    /// array that no map entry points at yet): `&mut self`, so no [`Mapping::bytes`] borrow is
    /// alive meanwhile.
    pub fn write(&mut self, off: usize, bytes: &[u8]) -> Option<()> {
        let p = self.at(off, bytes.len(), 1)?;
        // SAFETY: in bounds (checked by `at`); no reference into the mapping is alive (`&mut
        // self`), and the kernel does not read these bytes until the caller publishes them.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) };
        Some(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping, once, exactly the mapping `shared` made.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::sync::atomic::Ordering;

    #[test]
    fn a_mapped_file_is_read_and_written_in_bounds_only() {
        let path = std::env::temp_dir().join(format!("dtrace-mapping-{}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let page = page_size();
        let mut content = vec![0u8; page];
        content[8..12].copy_from_slice(b"dtra");
        std::fs::write(&path, &content).unwrap();
        let m = Mapping::shared(file.as_raw_fd(), page, 0, true, "a test file").unwrap();
        assert_eq!(m.len(), page);
        assert_eq!(m.bytes(8, 4), Some(&b"dtra"[..]));
        m.u64_at(16).unwrap().store(7, Ordering::Release);
        assert_eq!(m.bytes(16, 1), Some(&[7u8][..]));
        assert!(m.u64_at(page - 8).is_some());
        assert!(m.u64_at(page - 4).is_none(), "past the end");
        assert!(m.u64_at(4).is_none(), "misaligned");
        assert!(m.u32_at(4).is_some());
        assert!(m.bytes(page, 1).is_none());
        assert!(m.bytes(usize::MAX, 2).is_none(), "overflow");
        let mut m = m;
        assert_eq!(m.write(page - 3, b"end"), Some(()));
        assert_eq!(m.bytes(page - 3, 3), Some(&b"end"[..]));
        assert!(m.write(page - 2, b"end").is_none(), "past the end");
        assert!(m.write(usize::MAX, b"xy").is_none(), "overflow");
        drop(m);
        assert_eq!(
            &std::fs::read(&path).unwrap()[page - 3..],
            b"end",
            "written to the file"
        );
        let err = Mapping::shared(-1, page, 0, false, "nothing").unwrap_err();
        assert!(err.to_string().contains("mmap of nothing"), "{err}");
        std::fs::remove_file(&path).unwrap();
    }
}
