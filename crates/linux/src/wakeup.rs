//! The reader's sleep word: when dtrace sleeps on the capture ring it says so here, in an array
//! map it maps into its memory (`BPF_F_MMAPABLE`), and the probe's programs wake it once the ring
//! is filling up only while the word says it sleeps (see `capture::codegen::emit_submit`).
//!
//! A wake-up is an interrupt work item the kernel raises on the probe's CPU (a self-IPI: in a
//! virtual machine an exit to the host, microseconds of the traced thread's time). Without the
//! word, every record past the ring's wake-up mark raised one while dtrace was busy reading
//! (a slow consumer, a `ustack()` symbolized per record) and no one waited to be woken. With it,
//! one sleep takes at most one wake-up: the program that finds the word set clears it and wakes
//! the reader; dtrace sets it again before its next sleep. Two programs may both find it set and
//! both wake the reader (a spare wake-up, never a lost one): the word is read and written plainly.
//!
//! No wake-up is lost: dtrace sets the word before it sleeps, and its sleep (`ppoll` or
//! `epoll_wait` on the ring) first looks whether records wait. A program that read the word
//! clear reserved its record before, so that look finds it.

use crate::bpf::Map;
use crate::error::Result;
use crate::mapping::Mapping;
use std::sync::atomic::{AtomicU64, Ordering};

/// Offset in the map's one value of the word (non-zero: dtrace sleeps on the ring).
pub const ASLEEP: i32 = 0;

/// The sleep word, mapped into dtrace's memory.
#[derive(Debug)]
pub struct SleepWord {
    map: Map,
    mapping: Mapping,
}

impl SleepWord {
    /// Creates the word, clear (dtrace is not asleep yet).
    pub fn create(name: &str) -> Result<SleepWord> {
        let map = Map::create_mmapable(name, 8, 1)?;
        let mapping = map.map_values("the sleep word")?;
        Ok(SleepWord { map, mapping })
    }

    /// The map's descriptor, for the programs.
    pub fn raw_fd(&self) -> i32 {
        self.map.raw_fd()
    }

    fn word(&self) -> Option<&AtomicU64> {
        self.mapping.u64_at(ASLEEP as usize)
    }

    /// Says dtrace is about to sleep on the ring: the next program to find the ring filling up
    /// wakes it.
    pub fn set(&self) {
        if let Some(w) = self.word() {
            w.store(1, Ordering::SeqCst);
        }
    }

    /// Whether the word says dtrace sleeps (no program has woken it since [`SleepWord::set`]).
    pub fn is_set(&self) -> bool {
        self.word().is_some_and(|w| w.load(Ordering::SeqCst) != 0)
    }
}
