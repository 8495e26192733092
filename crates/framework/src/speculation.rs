//! Speculative tracing: `nspec` speculation buffers, each with one [`SpecBuffer`] per CPU bounded by
//! `specsize`, and DTrace's state machine (`dtrace_speculation*`): `speculation()` hands out an inactive
//! buffer (or fails, counted as *busy* when some buffer is still being committed or discarded, else as
//! *unavailable*); `speculate(id)` sends a clause's record to the buffer; `commit(id)` copies this CPU's
//! buffer to its principal buffer (other CPUs' buffers are committed by the cleaner); `discard(id)` throws
//! it away. An id beyond `nspec` is an illegal operation; id 0 or an inactive id silently does nothing.

use crate::buffer::SpecBuffer;

/// States of a speculation (`dtrace_speculation_state_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecState {
    /// Free.
    Inactive,
    /// Handed out by `speculation()`, nothing speculated yet.
    Active,
    /// Speculated on exactly one CPU.
    ActiveOne,
    /// Speculated on several CPUs.
    ActiveMany,
    /// Being committed by the CPU that speculated.
    Committing,
    /// Committed; other CPUs' buffers wait for the cleaner.
    CommittingMany,
    /// Discarded; buffers wait for the cleaner.
    Discarding,
}

/// Result of looking up a speculation for `speculate()`, `commit()` or `discard()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecLookup {
    /// Proceed with this speculation index.
    Use(usize),
    /// Silently nothing to do (id 0 or not active).
    Nothing,
    /// The id is beyond `nspec`: an illegal-operation fault (for `commit()` and `discard()`).
    Illegal,
}

/// A speculation id beyond `nspec` (an illegal-operation fault in probe context).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IllegalSpecId(pub u64);

/// One speculation.
#[derive(Debug, Clone)]
struct Speculation {
    state: SpecState,
    /// The CPU it was speculated on, while [`SpecState::ActiveOne`] (a clause that records
    /// nothing speculates too: DTrace reserves its record's header in the buffer).
    one_cpu: usize,
    bufs: Vec<SpecBuffer>,
}

/// All speculations of a tracing session and their counters.
#[derive(Debug, Clone)]
pub struct Speculations {
    specs: Vec<Speculation>,
    specsize: usize,
    /// `speculation()` failures while some buffer was busy.
    pub busy: u64,
    /// `speculation()` failures with every buffer in use.
    pub unavail: u64,
    /// Records dropped because a speculative buffer was full (accumulated at commit/discard).
    pub drops: u64,
}

impl Speculations {
    /// `nspec` speculations over `ncpus` CPUs of `specsize` bytes each.
    pub fn new(nspec: usize, ncpus: usize, specsize: usize) -> Speculations {
        Speculations {
            specs: vec![
                Speculation {
                    state: SpecState::Inactive,
                    one_cpu: 0,
                    bufs: vec![SpecBuffer::default(); ncpus],
                };
                nspec
            ],
            specsize,
            busy: 0,
            unavail: 0,
            drops: 0,
        }
    }

    /// The state of speculation `id` (1-based), if it exists.
    pub fn state(&self, id: u64) -> Option<SpecState> {
        let i = (id as usize).checked_sub(1)?;
        self.specs.get(i).map(|s| s.state)
    }

    /// `speculation()`: a new speculation id, or 0 (counting busy/unavailable).
    pub fn speculation(&mut self) -> u64 {
        let mut busy = false;
        for (i, s) in self.specs.iter_mut().enumerate() {
            match s.state {
                SpecState::Inactive => {
                    s.state = SpecState::Active;
                    return i as u64 + 1;
                }
                SpecState::Committing | SpecState::CommittingMany | SpecState::Discarding => {
                    busy = true
                }
                _ => {}
            }
        }
        if busy {
            self.busy += 1;
        } else {
            self.unavail += 1;
        }
        0
    }

    fn lookup(&self, id: u64) -> SpecLookup {
        if id == 0 {
            return SpecLookup::Nothing;
        }
        if id > self.specs.len() as u64 {
            return SpecLookup::Illegal;
        }
        SpecLookup::Use(id as usize - 1)
    }

    /// `speculate(id)` on `cpu`: which speculation the clause's record goes to. An id beyond
    /// `nspec` is no fault here (DTrace for Linux finds no such speculation and drops the clause's
    /// data), only in `commit()` and `discard()`.
    pub fn speculate(&mut self, id: u64, cpu: usize) -> SpecLookup {
        let i = match self.lookup(id) {
            SpecLookup::Use(i) => i,
            _ => return SpecLookup::Nothing,
        };
        let s = &mut self.specs[i];
        match s.state {
            SpecState::Inactive
            | SpecState::CommittingMany
            | SpecState::Discarding
            | SpecState::Committing => return SpecLookup::Nothing,
            SpecState::ActiveOne => {
                if s.one_cpu != cpu {
                    s.state = SpecState::ActiveMany;
                }
            }
            SpecState::ActiveMany => {}
            SpecState::Active => {
                s.state = SpecState::ActiveOne;
                s.one_cpu = cpu;
            }
        }
        SpecLookup::Use(i)
    }

    /// Whether a record of `len` bytes can ever fit a speculation buffer (`specsize`); when it
    /// cannot, a speculative drop is counted at once (as DTrace for Linux counts it at the probe).
    /// DTrace for Linux checks this when a clause calls `speculate()` and abandons the clause
    /// (its other actions and stores included); a record that fits `specsize` but not the space
    /// left is dropped when recorded.
    pub fn fits(&mut self, len: usize) -> bool {
        if len.div_ceil(8) * 8 <= self.specsize {
            return true;
        }
        self.drops += 1;
        false
    }

    /// Records into speculation `i`'s buffer for `cpu` (after [`Speculations::speculate`]).
    pub fn record(&mut self, i: usize, cpu: usize, record: &[u8]) -> bool {
        let limit = self.specsize;
        match self.specs.get_mut(i).and_then(|s| s.bufs.get_mut(cpu)) {
            Some(b) => b.append(record, limit),
            None => false,
        }
    }

    /// `commit(id)` on `cpu`: returns this CPU's buffer to copy into the principal buffer now, if any.
    pub fn commit(&mut self, id: u64, cpu: usize) -> Result<Option<SpecBuffer>, IllegalSpecId> {
        let i = match self.lookup(id) {
            SpecLookup::Use(i) => i,
            SpecLookup::Nothing => return Ok(None),
            SpecLookup::Illegal => return Err(IllegalSpecId(id)),
        };
        let s = &mut self.specs[i];
        let here_only = s.one_cpu == cpu;
        let current = s.state;
        let new = match current {
            SpecState::CommittingMany => SpecState::CommittingMany,
            SpecState::Inactive | SpecState::Discarding | SpecState::Committing => return Ok(None),
            SpecState::Active => SpecState::Committing,
            SpecState::ActiveOne if here_only => SpecState::Committing,
            SpecState::ActiveOne | SpecState::ActiveMany => SpecState::CommittingMany,
        };
        s.state = new;
        let taken = s.bufs.get_mut(cpu).map(std::mem::take);
        if let Some(b) = &taken {
            self.drops += b.drops;
        }
        if current == SpecState::Active
            || (current == SpecState::ActiveOne && new == SpecState::Committing)
        {
            s.state = SpecState::Inactive;
        }
        Ok(taken.filter(|b| !b.is_empty()))
    }

    /// `discard(id)` on `cpu`.
    pub fn discard(&mut self, id: u64, cpu: usize) -> Result<(), IllegalSpecId> {
        let i = match self.lookup(id) {
            SpecLookup::Use(i) => i,
            SpecLookup::Nothing => return Ok(()),
            SpecLookup::Illegal => return Err(IllegalSpecId(id)),
        };
        let s = &mut self.specs[i];
        let here_only = s.one_cpu == cpu;
        let new = match s.state {
            SpecState::Inactive
            | SpecState::CommittingMany
            | SpecState::Committing
            | SpecState::Discarding => return Ok(()),
            SpecState::Active | SpecState::ActiveMany => SpecState::Discarding,
            SpecState::ActiveOne if here_only => SpecState::Inactive,
            SpecState::ActiveOne => SpecState::Discarding,
        };
        s.state = new;
        if let Some(b) = s.bufs.get_mut(cpu) {
            self.drops += b.drops;
            b.drops = 0;
            b.clear();
        }
        Ok(())
    }

    /// Records into speculation `id`'s buffer for `cpu` a record of a clause that speculated
    /// where its probe fired (a provider keeps the speculations' states there, see
    /// [`Speculations::settle_elsewhere`]): a record larger than `specsize` or than the room
    /// left counts a drop on the buffer. False when not kept (an id beyond `nspec` too).
    pub fn record_elsewhere(&mut self, id: u64, cpu: usize, record: &[u8]) -> bool {
        let SpecLookup::Use(i) = self.lookup(id) else {
            return false;
        };
        self.fits(record.len()) && self.record(i, cpu, record)
    }

    /// `commit(id)` (`commit`) or `discard(id)` of a speculation kept where its probes fire:
    /// every CPU's buffer of it is emptied (its drops counted) and, for a commit, returned as
    /// `(cpu, buffer)` pairs to copy into the principal buffers, in CPU order.
    pub fn settle_elsewhere(&mut self, id: u64, commit: bool) -> Vec<(usize, SpecBuffer)> {
        let SpecLookup::Use(i) = self.lookup(id) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (cpu, b) in self.specs[i].bufs.iter_mut().enumerate() {
            self.drops += b.drops;
            let b = std::mem::take(b);
            if commit && !b.is_empty() {
                out.push((cpu, b));
            }
        }
        out
    }

    /// The cleaner (`dtrace_speculation_clean`): commits every CPU's buffer of speculations being
    /// committed, empties those being discarded, and frees both. Returns `(cpu, buffer)` pairs to copy
    /// into principal buffers, in speculation then CPU order.
    pub fn clean(&mut self) -> Vec<(usize, SpecBuffer)> {
        let mut out = Vec::new();
        for s in &mut self.specs {
            match s.state {
                SpecState::CommittingMany => {
                    for (cpu, b) in s.bufs.iter_mut().enumerate() {
                        self.drops += b.drops;
                        let b = std::mem::take(b);
                        if !b.is_empty() {
                            out.push((cpu, b));
                        }
                    }
                    s.state = SpecState::Inactive;
                }
                SpecState::Discarding => {
                    for b in &mut s.bufs {
                        self.drops += b.drops;
                        *b = SpecBuffer::default();
                    }
                    s.state = SpecState::Inactive;
                }
                _ => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speculations_kept_elsewhere_record_and_settle_every_cpu() {
        let mut s = Speculations::new(2, 2, 32);
        assert!(s.record_elsewhere(1, 0, &[1u8; 12]));
        assert!(s.record_elsewhere(1, 1, &[2u8; 12]));
        // Larger than specsize, or than the room left: speculative drops.
        assert!(!s.record_elsewhere(1, 0, &[3u8; 40]));
        assert!(s.record_elsewhere(1, 0, &[4u8; 12]));
        assert!(!s.record_elsewhere(1, 0, &[5u8; 12]));
        // An id beyond nspec is nowhere.
        assert!(!s.record_elsewhere(3, 0, &[6u8; 12]));
        let out = s.settle_elsewhere(1, true);
        assert_eq!(
            out.iter()
                .map(|(c, b)| (*c, b.lens.len()))
                .collect::<Vec<_>>(),
            [(0, 2), (1, 1)]
        );
        assert_eq!(s.drops, 2);
        assert!(s.record_elsewhere(2, 1, &[7u8; 12]));
        assert!(s.settle_elsewhere(2, false).is_empty());
        assert!(
            s.settle_elsewhere(2, true).is_empty(),
            "a discard empties it"
        );
    }

    #[test]
    fn allocate_until_unavailable() {
        let mut s = Speculations::new(2, 2, 64);
        assert_eq!(s.speculation(), 1);
        assert_eq!(s.speculation(), 2);
        assert_eq!(s.speculation(), 0);
        assert_eq!(s.unavail, 1);
        assert_eq!(s.busy, 0);
    }

    #[test]
    fn commit_on_same_cpu_frees_at_once() {
        let mut s = Speculations::new(1, 2, 64);
        let id = s.speculation();
        assert_eq!(s.speculate(id, 0), SpecLookup::Use(0));
        assert_eq!(s.state(id), Some(SpecState::ActiveOne));
        assert!(s.record(0, 0, &[1u8; 12]));
        let b = s.commit(id, 0).unwrap().unwrap();
        assert_eq!(b.data.len(), 16);
        assert_eq!(s.state(id), Some(SpecState::Inactive));
    }

    #[test]
    fn a_speculation_speculated_on_one_cpu_with_nothing_recorded_stays_there() {
        // As the kernel's state machine: the CPU that speculated is remembered, not inferred
        // from a non-empty buffer (a clause that records nothing speculates too).
        let mut s = Speculations::new(1, 2, 64);
        let id = s.speculation();
        assert_eq!(s.speculate(id, 1), SpecLookup::Use(0));
        assert_eq!(s.speculate(id, 1), SpecLookup::Use(0));
        assert_eq!(s.state(id), Some(SpecState::ActiveOne));
        assert_eq!(s.commit(id, 1).unwrap(), None);
        assert_eq!(s.state(id), Some(SpecState::Inactive));
        let id = s.speculation();
        s.speculate(id, 1);
        s.speculate(id, 0);
        assert_eq!(s.state(id), Some(SpecState::ActiveMany));
        s.discard(id, 1).unwrap();
        assert_eq!(s.state(id), Some(SpecState::Discarding));
    }

    #[test]
    fn a_record_larger_than_specsize_is_a_drop_at_once() {
        let mut s = Speculations::new(1, 1, 16);
        assert!(!s.fits(17));
        assert_eq!(s.drops, 1);
        assert!(s.fits(16));
    }

    #[test]
    fn commit_on_other_cpu_waits_for_cleaner_and_counts_busy() {
        let mut s = Speculations::new(1, 2, 64);
        let id = s.speculation();
        s.speculate(id, 0);
        s.record(0, 0, &[1u8; 12]);
        assert_eq!(s.commit(id, 1).unwrap(), None);
        assert_eq!(s.state(id), Some(SpecState::CommittingMany));
        assert_eq!(s.speculation(), 0);
        assert_eq!(s.busy, 1);
        assert_eq!(s.speculate(id, 0), SpecLookup::Nothing);
        let out = s.clean();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, 0);
        assert_eq!(s.state(id), Some(SpecState::Inactive));
    }

    #[test]
    fn discard_and_illegal_ids() {
        let mut s = Speculations::new(1, 1, 16);
        let id = s.speculation();
        s.speculate(id, 0);
        assert!(s.record(0, 0, &[1u8; 12]));
        assert!(!s.record(0, 0, &[1u8; 12]));
        s.discard(id, 0).unwrap();
        assert_eq!(s.state(id), Some(SpecState::Inactive));
        assert_eq!(s.drops, 1);
        assert_eq!(s.speculate(0, 0), SpecLookup::Nothing);
        assert_eq!(s.speculate(5, 0), SpecLookup::Nothing);
        assert!(s.commit(5, 0).is_err());
        assert!(s.discard(5, 0).is_err());
        assert_eq!(s.commit(1, 0).unwrap(), None);
    }
}
