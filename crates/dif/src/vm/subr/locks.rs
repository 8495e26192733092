//! The lock queries on Linux's locks: `mutex_owned()`, `mutex_owner()`, `mutex_type_adaptive()`,
//! `mutex_type_spin()` on a `struct mutex *`, and `rw_read_held()`, `rw_write_held()`,
//! `rw_iswriter()` on an `rwlock_t *`, from the lock's first word as the subroutine reads it
//! (8 bytes of a mutex, 4 of an rwlock: [`word_bytes`]); a lock that cannot be read faults as a
//! load from its address does. The interpreter calls [`answer`]; the eBPF translator emits the
//! same arithmetic (`dtrace_ebpf::translate::locks`).
//!
//! A `struct mutex` (Linux 4.10 and later, not `PREEMPT_RT`) begins with its `owner` word: the
//! owning task's address with the mutex's flags in its low [`MUTEX_FLAGS`] bits, 0 when free. So
//! `mutex_owned()` is whether the word less its flags is non-zero and `mutex_owner()` that
//! address (the `struct task_struct *` of the owner, NULL when none), as DTrace's answer for an
//! adaptive mutex. Every Linux mutex spins while its owner runs and sleeps otherwise: adaptive,
//! never a spin mutex (`mutex_type_adaptive()` 1, `mutex_type_spin()` 0).
//!
//! An `rwlock_t` begins with its queued lock's count word (`qrwlock.cnts`): the writer's byte
//! ([`RW_WRITE_LOCKED`] when a writer holds it) below the readers' count (from bit
//! [`RW_READER_SHIFT`]). `rw_read_held()` is whether readers hold it and no writer does;
//! `rw_write_held()` whether a writer holds it. The queued lock does not record which thread
//! writes, so `rw_iswriter()` answers as `rw_write_held()`.

use crate::subr::Subr;

/// The low bits of a mutex's owner word that are flags, not address.
pub const MUTEX_FLAGS: u64 = 0x07;
/// The writer's byte of an rwlock's count word when a writer holds the lock (`_QW_LOCKED`).
pub const RW_WRITE_LOCKED: u32 = 0xff;
/// The bit the readers' count starts at in an rwlock's count word (`_QR_SHIFT`).
pub const RW_READER_SHIFT: u32 = 9;

/// How many bytes of its lock subroutine `s` reads (at its only argument), if it is a lock query.
pub fn word_bytes(s: Subr) -> Option<usize> {
    use Subr::*;
    match s {
        MutexOwned | MutexOwner | MutexTypeAdaptive | MutexTypeSpin => Some(8),
        RwReadHeld | RwWriteHeld | RwIswriter => Some(4),
        _ => None,
    }
}

/// Lock query `s`'s answer from the lock's first word (`word_bytes(s)` bytes, zero-extended).
pub fn answer(s: Subr, word: u64) -> u64 {
    use Subr::*;
    let owner = word & !MUTEX_FLAGS;
    let writer = (word as u32) & RW_WRITE_LOCKED;
    let readers = (word as u32) >> RW_READER_SHIFT;
    match s {
        MutexOwned => u64::from(owner != 0),
        MutexOwner => owner,
        MutexTypeAdaptive => 1,
        RwReadHeld => u64::from(readers != 0 && writer == 0),
        RwWriteHeld | RwIswriter => u64::from(writer == RW_WRITE_LOCKED),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mutex_is_owned_by_the_address_its_word_holds_less_its_flags() {
        let task = 0xffff_8880_1234_5680u64;
        assert_eq!(answer(Subr::MutexOwned, 0), 0);
        assert_eq!(answer(Subr::MutexOwner, 0), 0);
        // Flags alone (a waiter noted after the owner left) are no owner.
        assert_eq!(answer(Subr::MutexOwned, 0x01), 0);
        assert_eq!(answer(Subr::MutexOwned, task | 0x03), 1);
        assert_eq!(answer(Subr::MutexOwner, task | 0x03), task);
        assert_eq!(answer(Subr::MutexTypeAdaptive, 0), 1);
        assert_eq!(answer(Subr::MutexTypeSpin, task), 0);
    }

    #[test]
    fn an_rwlock_is_read_held_by_readers_and_write_held_by_its_writer() {
        let readers = |n: u32| n << RW_READER_SHIFT;
        let free = 0u64;
        let read = u64::from(readers(2));
        let written = u64::from(RW_WRITE_LOCKED);
        // A writer waiting (0x100) and a reader passing through its slow path while a writer
        // holds the lock.
        let waiting = u64::from(readers(1) | 0x100);
        let busy = u64::from(readers(1) | RW_WRITE_LOCKED);
        for (w, read_held, write_held) in [
            (free, 0, 0),
            (read, 1, 0),
            (written, 0, 1),
            (waiting, 1, 0),
            (busy, 0, 1),
        ] {
            assert_eq!(answer(Subr::RwReadHeld, w), read_held, "{w:#x}");
            assert_eq!(answer(Subr::RwWriteHeld, w), write_held, "{w:#x}");
            assert_eq!(answer(Subr::RwIswriter, w), write_held, "{w:#x}");
        }
    }

    #[test]
    fn only_the_lock_queries_read_a_lock_word() {
        assert_eq!(word_bytes(Subr::MutexOwner), Some(8));
        assert_eq!(word_bytes(Subr::RwIswriter), Some(4));
        assert_eq!(word_bytes(Subr::Strlen), None);
    }
}
