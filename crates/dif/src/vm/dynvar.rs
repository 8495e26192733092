//! The dynamic variable space (`dtrace_dstate_t`): thread-local variables and associative-array
//! elements, bounded by `dynvarsize`.
//!
//! Each live variable has a slot whose number is stable while it lives, so by-reference values (structs,
//! arrays) have an address in the VM ([`crate::vm::machine::DYN_BASE`]) that DIF code loads and stores
//! through.
//!
//! The space is sized as DTrace for Linux sizes its map of dynamic variables: every variable costs
//! the same, the program's largest tuple (see [`tuple_size`]) plus its largest dynamic variable
//! ([`DynVarSpace::set_entry_size`]), so `dynvarsize` holds `dynvarsize / entry` variables
//! ([`capacity`]). Storing 0 frees a variable, and its space is reusable at once, as a deleted map
//! element is; only its slot number waits on a dirty list, which the cleaner
//! ([`DynVarSpace::clean`], run by the framework between probe firings) moves to a rinsing list and
//! then back to the free slots, so an address DIF code still holds never names a new variable in
//! the same firing. A store that does not fit is dropped and counted.

use crate::vm::state::{DynKey, DynScope, FxMap, Stored};

/// Most slots: slot numbers are part of VM addresses.
pub(crate) const MAX_SLOTS: usize = 1 << 24;

/// Bytes a tuple of keys of these sizes takes, laid out as DTrace for Linux assembles one: a 4-byte
/// variable id, each element after it (an integer of `n` bytes, `(n, true)`, aligned to `n`; a
/// string or other by-reference element of `n` bytes, `(n, false)`, unaligned), then an 8-byte
/// thread key (0 for global arrays).
pub fn tuple_size(elems: impl IntoIterator<Item = (u32, bool)>) -> u32 {
    let mut size = 4u32;
    for (n, integer) in elems {
        if integer && n > 0 {
            size = size.next_multiple_of(n.min(8));
        }
        size = size.saturating_add(n);
    }
    size.saturating_add(8)
}

/// How many dynamic variables of `entry` bytes each fit in `dynvarsize` bytes (at least one, as a
/// program that uses dynamic variables always gets a map).
pub fn capacity(dynvarsize: u64, entry: u64) -> u64 {
    (dynvarsize / entry.max(1)).max(1)
}

/// What each dynamic variable costs given the programs' largest tuple and largest dynamic variable
/// (`Program::max_tuple_size`, `max_dvar_size`); 0 when those are not known.
pub fn entry_size(max_tuple: u32, max_dvar: u32) -> u64 {
    match max_dvar {
        0 => 0,
        dvar => max_tuple as u64 + dvar as u64,
    }
}

/// What a variable costs when the program's sizes are not known (DIF not compiled here, as a
/// program read from DOF): its key's bytes and its value's.
fn own_cost(key: &DynKey, value: &Stored) -> usize {
    let val = match value {
        Stored::Int(_) => 8,
        Stored::Bytes(b) => b.len().max(1),
    };
    key.cost() + val
}

#[derive(Debug, Clone)]
struct Entry {
    key: DynKey,
    value: Stored,
    cost: usize,
}

/// The dynamic variable space; see the module documentation. (One pointer, so the interpreter can move
/// it in and out of the machine cheaply around each run.)
#[derive(Debug, Clone, Default)]
pub struct DynVarSpace {
    s: Box<Space>,
}

#[derive(Debug, Clone, Default)]
struct Space {
    index: FxMap<DynKey, u32>,
    slots: Vec<Option<Entry>>,
    free: Vec<u32>,
    dirty: Vec<u32>,
    rinsing: Vec<u32>,
    /// Bytes of live variables.
    used: usize,
    limit: usize,
    /// What every variable costs (0: each its own size, [`own_cost`]).
    entry: usize,
    drops: u64,
}

impl DynVarSpace {
    /// An empty space of `limit` bytes.
    pub fn new(limit: usize) -> DynVarSpace {
        DynVarSpace {
            s: Box::new(Space {
                limit,
                ..Space::default()
            }),
        }
    }

    /// Makes every variable cost `bytes` (the program's largest tuple and largest dynamic variable);
    /// 0 charges each its own size.
    pub fn set_entry_size(&mut self, bytes: usize) {
        self.s.entry = bytes;
    }

    /// What `key` holding `value` costs.
    fn cost(&self, key: &DynKey, value: &Stored) -> usize {
        if self.s.entry > 0 {
            self.s.entry
        } else {
            own_cost(key, value)
        }
    }

    /// The slot of the variable under `key`.
    pub fn slot_of(&self, key: &DynKey) -> Option<u32> {
        self.s.index.get(key).copied()
    }

    /// The value in `slot`, if a variable lives there.
    pub fn value(&self, slot: u32) -> Option<&Stored> {
        self.s.slots.get(slot as usize)?.as_ref().map(|e| &e.value)
    }

    /// The value in `slot`, for an update in place (the size must not change).
    pub(crate) fn value_mut(&mut self, slot: u32) -> Option<&mut Stored> {
        self.s
            .slots
            .get_mut(slot as usize)?
            .as_mut()
            .map(|e| &mut e.value)
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &DynKey) -> Option<&Stored> {
        self.value(self.slot_of(key)?)
    }

    /// Stores `value` under `key`; returns false (and counts a dynamic-variable drop) when the space is
    /// full.
    pub fn put(&mut self, key: DynKey, value: Stored) -> bool {
        self.put_ref(&key, value)
    }

    /// Like [`put`](DynVarSpace::put), cloning the key only when it is new.
    pub fn put_ref(&mut self, key: &DynKey, value: Stored) -> bool {
        self.put_slot(key, value).is_some()
    }

    /// Stores `value` under `key` and returns its slot; `None` (a drop, counted) when it does not fit.
    pub fn put_slot(&mut self, key: &DynKey, value: Stored) -> Option<u32> {
        let cost = self.cost(key, &value);
        if let Some(slot) = self.slot_of(key) {
            let e = self.s.slots[slot as usize].as_mut()?;
            let others = self.s.used - e.cost;
            // At least one variable fits, however small the space (as `capacity` says).
            if others > 0 && others + cost > self.s.limit {
                self.count_full();
                return None;
            }
            self.s.used = self.s.used - e.cost + cost;
            e.cost = cost;
            e.value = value;
            return Some(slot);
        }
        if self.s.used > 0 && self.s.used.saturating_add(cost) > self.s.limit {
            self.count_full();
            return None;
        }
        let slot = match self.s.free.pop() {
            Some(s) => s,
            None if self.s.slots.len() < MAX_SLOTS => {
                self.s.slots.push(None);
                self.s.slots.len() as u32 - 1
            }
            None => {
                self.count_full();
                return None;
            }
        };
        self.s.used += cost;
        self.s.slots[slot as usize] = Some(Entry {
            key: key.clone(),
            value,
            cost,
        });
        self.s.index.insert(key.clone(), slot);
        Some(slot)
    }

    /// Counts a drop for a store that found no space.
    fn count_full(&mut self) {
        self.s.drops += 1;
    }

    /// Overwrites the bytes stored under `key` when an entry exists with exactly `bytes.len()` bytes;
    /// returns whether it did.
    pub fn overwrite_bytes(&mut self, key: &DynKey, bytes: &[u8]) -> bool {
        match self.slot_of(key).and_then(|s| self.value_mut(s)) {
            Some(Stored::Bytes(old)) if old.len() == bytes.len() => {
                old.copy_from_slice(bytes);
                true
            }
            _ => false,
        }
    }

    /// Counts a dynamic-variable drop for a store that could not be made.
    pub fn count_drop(&mut self) {
        self.s.drops += 1;
    }

    /// Frees the variable under `key`, if any: its space is free at once, its slot goes on the dirty
    /// list.
    pub fn remove(&mut self, key: &DynKey) {
        if let Some(slot) = self.s.index.remove(key) {
            self.free_slot(slot);
        }
    }

    fn free_slot(&mut self, slot: u32) {
        if let Some(e) = self.s.slots.get_mut(slot as usize).and_then(Option::take) {
            self.s.dirty.push(slot);
            self.s.used -= e.cost;
        }
    }

    /// Frees every thread-local variable of a thread (when it exits).
    pub fn remove_thread(&mut self, thread: u64) {
        let keys: Vec<DynKey> = self
            .s
            .index
            .keys()
            .filter(|k| k.thread() == thread && k.scope() != DynScope::GlobalArray)
            .cloned()
            .collect();
        for k in keys {
            self.remove(&k);
        }
    }

    /// The cleaner: rinsing slots become free, dirty slots become rinsing. Run it only when no DIF
    /// code holds addresses of variables (between probe firings).
    pub fn clean(&mut self) {
        if self.s.rinsing.is_empty() && self.s.dirty.is_empty() {
            return;
        }
        self.s.free.append(&mut self.s.rinsing);
        std::mem::swap(&mut self.s.rinsing, &mut self.s.dirty);
    }

    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.s.index.len()
    }

    /// Whether there are no live entries.
    pub fn is_empty(&self) -> bool {
        self.s.index.is_empty()
    }

    /// Bytes in use by live variables.
    pub fn used(&self) -> usize {
        self.s.used
    }

    /// Stores dropped for want of space, and stores that could never fit.
    pub fn drops(&self) -> u64 {
        self.s.drops
    }

    /// Every entry, in no particular order (for inspection and tests).
    pub fn iter(&self) -> impl Iterator<Item = (&DynKey, &Stored)> {
        self.s.slots.iter().flatten().map(|e| (&e.key, &e.value))
    }
}
