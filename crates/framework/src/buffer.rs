//! Principal buffers: one per CPU, holding whole records (each 8-byte aligned, padded with
//! [`EPID_NONE`](crate::records::EPID_NONE) words) under one of DTrace's policies. `switch` keeps records
//! until the consumer switches the buffer and drops what does not fit; `fill` records until full, then
//! drops and reports itself filled (space for END records is reserved so END always fits); `ring` keeps
//! the newest records, evicting the oldest. Every record refused is counted as a drop. A clause's
//! room is taken before the clause runs ([`PrincipalBuffer::reserve`], DTrace's `dte_needed`): a
//! clause without room is skipped whole. Records built where their probe fired took their room
//! there ([`PrincipalBuffer::room_elsewhere`]) and are kept ([`PrincipalBuffer::append_reserved`]).
//! When some clauses run there and others here, a buffer has one account of its room with the
//! place where probes fire ([`SharedRoom`]): what either side builds for a CPU counts against
//! that CPU's one buffer, as in DTrace, where every ECB reserves in the same buffer.

use crate::options::BufPolicy;
use std::collections::VecDeque;
use std::sync::Arc;

/// A CPU's principal-buffer room kept with the place where probes fire, which builds records
/// for the same buffer (see [`crate::Framework::share_room`]): the room it grants for an interval
/// between switches is the buffer's, and records built here take theirs from it too, so that
/// together they never pass the buffer. `switch` and `fill` buffers use it (a `ring` always has
/// room); records for END, built once probes no longer fire, do not.
pub trait SharedRoom: Send + Sync {
    /// Takes `bytes` of `cpu`'s room; `false` (nothing taken) when they would pass its grant.
    fn take(&self, cpu: u32, bytes: u64) -> bool;
    /// Gives back `bytes` taken from `cpu`'s room by [`SharedRoom::take`] for a record that did
    /// not reach the buffer.
    fn give(&self, cpu: u32, bytes: u64);
    /// `cpu`'s `fill` buffer has filled: no record built where probes fire is kept any more.
    fn close(&self, cpu: u32);
}

/// Rounds `n` up to a multiple of 8.
pub fn align8(n: usize) -> usize {
    (n + 7) & !7
}

/// One CPU's principal buffer.
#[derive(Debug)]
pub struct PrincipalBuffer {
    policy: BufPolicy,
    size: usize,
    /// Bytes kept free for END records under the fill policy.
    reserve: usize,
    data: Vec<u8>,
    /// Ring policy: the bytes, oldest first, and the length of each record in them.
    ring: VecDeque<u8>,
    ring_lens: VecDeque<usize>,
    drops: u64,
    full: bool,
    /// The room shared with the place where probes fire, and this buffer's CPU there.
    shared: Option<(Arc<dyn SharedRoom>, u32)>,
    /// Bytes taken from [`PrincipalBuffer::shared`] by [`PrincipalBuffer::reserve`] for a
    /// record not appended yet.
    pending: u64,
}

impl std::fmt::Debug for dyn SharedRoom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedRoom")
    }
}

impl PrincipalBuffer {
    /// A buffer of `size` bytes (rounded down to a multiple of 8) under `policy`. `data` is a vector
    /// already holding that capacity (the framework allocates it fallibly).
    pub fn new(policy: BufPolicy, size: usize, data: Vec<u8>) -> PrincipalBuffer {
        PrincipalBuffer {
            policy,
            size: size & !7,
            reserve: 0,
            data,
            ring: VecDeque::new(),
            ring_lens: VecDeque::new(),
            drops: 0,
            full: false,
            shared: None,
            pending: 0,
        }
    }

    /// Keeps this buffer's room in one account with the place where probes fire (see
    /// [`SharedRoom`]), as CPU `cpu` there; `None` keeps it here alone.
    pub fn share_room(&mut self, shared: Option<Arc<dyn SharedRoom>>, cpu: u32) {
        self.shared = shared.map(|s| (s, cpu));
    }

    /// Takes `len` bytes from the shared room (see [`SharedRoom`]) for a record not for END:
    /// `false` when it has none. Always `true` without one, or for a `ring` buffer.
    fn take_shared(&mut self, len: usize, for_end: bool) -> bool {
        match &self.shared {
            Some((s, cpu)) if !for_end && self.policy != BufPolicy::Ring => {
                s.take(*cpu, len as u64)
            }
            _ => true,
        }
    }

    /// Gives `len` bytes taken by [`PrincipalBuffer::take_shared`] back.
    fn give_shared(&mut self, len: u64) {
        if let (Some((s, cpu)), true) = (&self.shared, len > 0) {
            s.give(*cpu, len);
        }
    }

    /// A `fill` buffer is full: so is the shared room.
    fn set_full(&mut self) {
        if self.policy == BufPolicy::Fill {
            if !self.full {
                if let Some((s, cpu)) = &self.shared {
                    s.close(*cpu);
                }
            }
            self.full = true;
        }
    }

    /// Gives back the room [`PrincipalBuffer::reserve`] took for a record that was not
    /// appended (its clause recorded nothing here: a false predicate, a fault, a speculation, a
    /// dropped store); nothing when none is pending.
    pub fn release(&mut self) {
        let len = std::mem::take(&mut self.pending);
        self.give_shared(len);
    }

    /// Sets the space kept for END records (fill policy).
    pub fn set_reserve(&mut self, reserve: usize) {
        self.reserve = align8(reserve).min(self.size);
    }

    /// Size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Bytes of records held.
    pub fn used(&self) -> usize {
        match self.policy {
            BufPolicy::Ring => self.ring.len(),
            _ => self.data.len(),
        }
    }

    /// Whether a fill-policy buffer has filled.
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// Takes the room a clause's record needs before the clause runs (DTrace's `dte_needed`, taken
    /// by `dtrace_buffer_reserve()` before an ECB does anything): whether a record of `needed`
    /// bytes would be kept now. When it would not, one drop is counted (a fill-policy buffer is
    /// then full) and the clause must do nothing at all: no predicate with side effects, no store,
    /// no record. A `ring` buffer always has room for a record no larger than itself; `for_end`
    /// records may use the END reserve. A clause that records nothing (`needed` 0) always has room.
    pub fn reserve(&mut self, needed: usize, for_end: bool) -> bool {
        let len = align8(needed);
        if len == 0 {
            return true;
        }
        let fits = match self.policy {
            BufPolicy::Ring => len <= self.size,
            BufPolicy::Switch | BufPolicy::Fill => {
                let limit = if self.policy == BufPolicy::Fill && !for_end {
                    self.size - self.reserve
                } else {
                    self.size
                };
                (for_end || !self.full) && self.data.len() + len <= limit
            }
        };
        let fits = fits && self.take_shared(len, for_end);
        if !fits {
            self.drops += 1;
            if !for_end {
                self.set_full();
            }
        } else if self.shared.is_some() && !for_end && self.policy != BufPolicy::Ring {
            self.release();
            self.pending = len as u64;
        }
        fits
    }

    /// Appends one whole record; `for_end` records may use the END reserve. Returns `false` (and counts a
    /// drop) when the record is refused.
    pub fn append(&mut self, record: &[u8], for_end: bool) -> bool {
        let len = align8(record.len());
        match self.policy {
            BufPolicy::Ring => {
                if len > self.size {
                    self.drops += 1;
                    return false;
                }
                while self.ring.len() + len > self.size {
                    let Some(old) = self.ring_lens.pop_front() else {
                        break;
                    };
                    self.ring.drain(..old);
                }
                self.ring.extend(record);
                self.ring
                    .extend(std::iter::repeat_n(0u8, len - record.len()));
                self.ring_lens.push_back(len);
                true
            }
            BufPolicy::Switch | BufPolicy::Fill => {
                let limit = if self.policy == BufPolicy::Fill && !for_end {
                    self.size - self.reserve
                } else {
                    self.size
                };
                // Its room was taken by `reserve` (the pending reservation), or is taken now.
                let reserved = self.pending > 0 && self.pending == len as u64;
                if reserved {
                    self.pending = 0;
                }
                let local = (for_end || !self.full) && self.data.len() + len <= limit;
                let shared = local && (reserved || self.take_shared(len, for_end));
                if !shared {
                    if reserved {
                        self.give_shared(len as u64);
                    }
                    self.drops += 1;
                    if !for_end {
                        self.set_full();
                    }
                    return false;
                }
                self.data.extend_from_slice(record);
                self.data.resize(self.data.len() + len - record.len(), 0);
                true
            }
        }
    }

    /// The room this buffer gives records built where their probe fired, which reserve it there
    /// before their clause runs, for the interval until the buffer is next taken: the whole buffer
    /// under `switch`, less the records it holds (BEGIN's, before the first switch), and less the
    /// END reserve under `fill` (nothing once a fill buffer is full); no limit under `ring`,
    /// which always has room.
    pub fn room_elsewhere(&self) -> u64 {
        let held = self.data.len();
        match self.policy {
            BufPolicy::Ring => u64::MAX,
            BufPolicy::Switch => self.size.saturating_sub(held) as u64,
            BufPolicy::Fill if self.full => 0,
            BufPolicy::Fill => (self.size - self.reserve).saturating_sub(held) as u64,
        }
    }

    /// Appends a record whose room was reserved where its probe fired (see
    /// [`PrincipalBuffer::room_elsewhere`]): its clause's stores were made, so it is kept
    /// even past the buffer's size (the room was given for an interval the record may arrive
    /// just after). A `ring` buffer appends it as any record.
    pub fn append_reserved(&mut self, record: &[u8]) {
        if self.policy == BufPolicy::Ring {
            self.append(record, false);
            return;
        }
        let len = align8(record.len());
        self.data.extend_from_slice(record);
        self.data.resize(self.data.len() + len - record.len(), 0);
    }

    /// Marks a fill-policy buffer full: its room was exhausted where probes fire.
    pub fn fill(&mut self) {
        self.set_full();
    }

    /// Appends bytes that are already a sequence of aligned records (a committed speculation) as one
    /// unit: all or nothing.
    pub fn append_many(&mut self, records: &[u8], lens: &[usize]) -> bool {
        match self.policy {
            BufPolicy::Ring => {
                let mut off = 0;
                for &l in lens {
                    self.append(&records[off..off + l], false);
                    off += l;
                }
                true
            }
            _ => {
                if self.full
                    || self.data.len() + records.len() > self.size - self.reserve
                    || !self.take_shared(records.len(), false)
                {
                    self.drops += 1;
                    self.set_full();
                    return false;
                }
                self.data.extend_from_slice(records);
                true
            }
        }
    }

    /// Counts a drop decided by the caller.
    pub fn count_drop(&mut self) {
        self.drops += 1;
    }

    /// Takes the records (oldest first) and the drops counted since the last take, leaving the buffer
    /// empty. A filled fill-policy buffer stays full.
    pub fn take(&mut self) -> (Vec<u8>, u64) {
        let drops = std::mem::take(&mut self.drops);
        let data = match self.policy {
            BufPolicy::Ring => {
                self.ring_lens.clear();
                self.ring.drain(..).collect()
            }
            _ => {
                let cap = self.data.capacity().min(self.size);
                let mut fresh = Vec::new();
                // Best effort: if the memory is not there now, the buffer grows as records arrive.
                let _ = fresh.try_reserve_exact(cap);
                std::mem::replace(&mut self.data, fresh)
            }
        };
        (data, drops)
    }
}

/// A speculative buffer for one CPU: whole records and their lengths, bounded by `specsize`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SpecBuffer {
    /// Record bytes.
    pub data: Vec<u8>,
    /// Length of each record in `data`.
    pub lens: Vec<usize>,
    /// Records that did not fit.
    pub drops: u64,
}

impl SpecBuffer {
    /// Appends a record if it fits in `limit` bytes; counts a drop otherwise.
    pub fn append(&mut self, record: &[u8], limit: usize) -> bool {
        let len = align8(record.len());
        if self.data.len() + len > limit {
            self.drops += 1;
            return false;
        }
        self.data.extend_from_slice(record);
        self.data.resize(self.data.len() + len - record.len(), 0);
        self.lens.push(len);
        true
    }

    /// Whether anything was speculated on this CPU.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Empties it.
    pub fn clear(&mut self) {
        self.data.clear();
        self.lens.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(epid: u32, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        v[..4].copy_from_slice(&epid.to_ne_bytes());
        v
    }

    #[test]
    fn switch_drops_when_full() {
        let mut b = PrincipalBuffer::new(BufPolicy::Switch, 64, Vec::new());
        assert!(b.append(&rec(1, 12), false));
        assert_eq!(b.used(), 16);
        for _ in 0..3 {
            assert!(b.append(&rec(1, 16), false));
        }
        assert!(!b.append(&rec(1, 12), false));
        let (data, drops) = b.take();
        assert_eq!(data.len(), 64);
        assert_eq!(drops, 1);
        assert_eq!(&data[12..16], &[0, 0, 0, 0]);
        assert!(b.append(&rec(1, 12), false));
        assert_eq!(b.take().1, 0);
    }

    #[test]
    fn fill_reserves_for_end() {
        let mut b = PrincipalBuffer::new(BufPolicy::Fill, 64, Vec::new());
        b.set_reserve(16);
        for _ in 0..3 {
            assert!(b.append(&rec(1, 16), false));
        }
        assert!(!b.append(&rec(1, 16), false));
        assert!(b.is_full());
        assert!(!b.append(&rec(1, 8), false));
        assert!(b.append(&rec(2, 16), true));
        let (data, drops) = b.take();
        assert_eq!(data.len(), 64);
        assert_eq!(drops, 2);
    }

    #[test]
    fn reserve_takes_room_before_a_clause_runs() {
        // switch: room while a record fits; a refusal counts one drop; nothing needed always fits.
        let mut b = PrincipalBuffer::new(BufPolicy::Switch, 32, Vec::new());
        assert!(b.reserve(12, false));
        assert!(b.append(&rec(1, 12), false));
        assert!(b.reserve(16, false));
        assert!(!b.reserve(17, false));
        assert!(b.reserve(0, false));
        assert_eq!(b.take().1, 1);
        // fill: a refusal fills the buffer; only END's records fit after it, in the reserve.
        let mut b = PrincipalBuffer::new(BufPolicy::Fill, 48, Vec::new());
        b.set_reserve(16);
        assert!(b.reserve(16, false));
        assert!(b.append(&rec(1, 16), false));
        assert!(b.reserve(16, false));
        assert!(b.append(&rec(1, 16), false));
        assert!(!b.reserve(16, false));
        assert!(b.is_full());
        assert!(!b.reserve(8, false));
        assert!(b.reserve(0, false));
        assert!(b.reserve(16, true));
        assert_eq!(b.take().1, 2);
        // ring: never full, unless the record is larger than the buffer.
        let mut b = PrincipalBuffer::new(BufPolicy::Ring, 32, Vec::new());
        for _ in 0..4 {
            assert!(b.reserve(16, false));
            assert!(b.append(&rec(1, 16), false));
        }
        assert!(!b.reserve(40, false));
        assert_eq!(b.take().1, 1);
    }

    #[test]
    fn ring_keeps_newest() {
        let mut b = PrincipalBuffer::new(BufPolicy::Ring, 48, Vec::new());
        for epid in 1..=5 {
            assert!(b.append(&rec(epid, 16), false));
        }
        let (data, drops) = b.take();
        assert_eq!(drops, 0);
        let epids: Vec<u32> = data
            .chunks(16)
            .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(epids, vec![3, 4, 5]);
        assert!(!b.append(&rec(9, 56), false));
        assert_eq!(b.take().1, 1);
    }

    #[test]
    fn spec_buffer_bounds() {
        let mut s = SpecBuffer::default();
        assert!(s.append(&rec(1, 12), 32));
        assert!(s.append(&rec(1, 12), 32));
        assert!(!s.append(&rec(1, 12), 32));
        assert_eq!(s.drops, 1);
        assert_eq!(s.lens, vec![16, 16]);
    }

    /// A shared room as the place where probes fire keeps it: a grant, the bytes used, and
    /// whether it was closed.
    #[derive(Default)]
    struct Room {
        granted: std::sync::atomic::AtomicU64,
        used: std::sync::atomic::AtomicU64,
        closed: std::sync::atomic::AtomicBool,
    }

    impl SharedRoom for Room {
        fn take(&self, _cpu: u32, bytes: u64) -> bool {
            use std::sync::atomic::Ordering::SeqCst;
            if self.used.load(SeqCst) + bytes > self.granted.load(SeqCst) {
                return false;
            }
            self.used.fetch_add(bytes, SeqCst);
            true
        }
        fn give(&self, _cpu: u32, bytes: u64) {
            self.used
                .fetch_sub(bytes, std::sync::atomic::Ordering::SeqCst);
        }
        fn close(&self, _cpu: u32) {
            self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn records_built_here_take_their_room_from_the_shared_account() {
        use std::sync::atomic::Ordering::SeqCst;
        let room = Arc::new(Room::default());
        room.granted.store(64, SeqCst);
        let mut b = PrincipalBuffer::new(BufPolicy::Fill, 128, Vec::new());
        b.share_room(Some(room.clone()), 0);
        // The place where probes fire took 40 bytes of the 64 granted (records on their way).
        room.used.store(40, SeqCst);
        // A clause's reservation takes its room at once; its record, appended, keeps it.
        assert!(b.reserve(12, false));
        assert_eq!(room.used.load(SeqCst), 56);
        assert!(b.append(&rec(1, 12), false));
        b.release();
        assert_eq!(room.used.load(SeqCst), 56);
        // A clause that recorded nothing (a false predicate) gives its room back.
        assert!(b.reserve(8, false));
        b.release();
        assert_eq!(room.used.load(SeqCst), 56);
        // A record taken without a reservation (a fault record) takes its room too.
        assert!(b.append(&rec(1, 8), false));
        assert_eq!(room.used.load(SeqCst), 64);
        // The buffer itself has room (24 of 128 bytes held), the account none: a drop, and the
        // fill buffer is full, its shared room closed.
        assert!(!b.reserve(8, false));
        assert!(b.is_full());
        assert!(room.closed.load(SeqCst));
        assert_eq!(room.used.load(SeqCst), 64);
        // END's records do not take from it.
        assert!(b.append(&rec(1, 8), true));
        assert_eq!(b.take().1, 1);
        // A ring buffer does not use it.
        let mut r = PrincipalBuffer::new(BufPolicy::Ring, 32, Vec::new());
        r.share_room(Some(room.clone()), 0);
        assert!(r.reserve(16, false) && r.append(&rec(1, 16), false));
        assert_eq!(room.used.load(SeqCst), 64);
    }

    #[test]
    fn room_elsewhere_leaves_the_records_held_their_room() {
        let mut b = PrincipalBuffer::new(BufPolicy::Switch, 64, Vec::new());
        assert!(b.append(&rec(1, 12), false));
        assert_eq!(b.room_elsewhere(), 48);
        let mut f = PrincipalBuffer::new(BufPolicy::Fill, 64, Vec::new());
        f.set_reserve(16);
        assert!(f.append(&rec(1, 12), false));
        assert_eq!(f.room_elsewhere(), 32);
        f.take();
        assert_eq!(f.room_elsewhere(), 48);
    }
}
