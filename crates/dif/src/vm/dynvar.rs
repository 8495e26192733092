//! The dynamic variable space (`dtrace_dstate_t`): thread-local variables and associative-array
//! elements, bounded by `dynvarsize`.
//!
//! Each live variable has a slot whose number is stable while it lives, so by-reference values (structs,
//! arrays) have an address in the VM ([`crate::vm::machine::DYN_BASE`]) that DIF code loads and stores
//! through. As in DTrace, a freed variable's space is not reusable at once: it goes on a dirty list,
//! which the cleaner ([`DynVarSpace::clean`], run by the framework between probe firings) moves to a
//! rinsing list and then back to free space. A store that does not fit is dropped and counted by why:
//! with a non-empty dirty list, with a non-empty rinsing list, or plainly out of space.

use crate::vm::state::{DynKey, DynScope, FxMap, Stored};

/// Fixed cost charged per dynamic variable, like DTrace's `dtrace_dynvar_t` header.
const ENTRY_OVERHEAD: usize = 64;
/// Cost charged per key element (DTrace's `dtrace_key_t`).
const KEY_OVERHEAD: usize = 16;
/// Most slots: slot numbers are part of VM addresses.
pub(crate) const MAX_SLOTS: usize = 1 << 24;

fn entry_cost(key: &DynKey, value: &Stored) -> usize {
    let val = match value {
        Stored::Int(_) => 8,
        Stored::Bytes(b) => b.len().max(8),
    };
    ENTRY_OVERHEAD + 2 * KEY_OVERHEAD + key.cost() + val
}

/// Bytes an integer thread-local (`self->x`) costs in the space: what bounds a store elsewhere
/// that must fill up as this space does (the kernel's map of thread-locals).
pub fn integer_thread_local_cost() -> usize {
    entry_cost(
        &DynKey::new(crate::vm::state::DynScope::ThreadScalar, 0, 0),
        &Stored::Int(0),
    )
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
    dirty_bytes: usize,
    rinsing_bytes: usize,
    /// Bytes of live, dirty and rinsing variables.
    used: usize,
    limit: usize,
    drops: u64,
    dirty_drops: u64,
    rinsing_drops: u64,
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
        let cost = entry_cost(key, &value);
        if let Some(slot) = self.slot_of(key) {
            let e = self.s.slots[slot as usize].as_mut()?;
            if self.s.used - e.cost + cost > self.s.limit {
                self.count_full();
                return None;
            }
            self.s.used = self.s.used - e.cost + cost;
            e.cost = cost;
            e.value = value;
            return Some(slot);
        }
        if self.s.used.saturating_add(cost) > self.s.limit {
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

    /// Counts a drop for a store that found no space, by why (as DTrace's `dtrace_dynvar` does).
    fn count_full(&mut self) {
        if !self.s.dirty.is_empty() {
            self.s.dirty_drops += 1;
        } else if !self.s.rinsing.is_empty() {
            self.s.rinsing_drops += 1;
        } else {
            self.s.drops += 1;
        }
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

    /// Frees the variable under `key`, if any: its space goes on the dirty list.
    pub fn remove(&mut self, key: &DynKey) {
        if let Some(slot) = self.s.index.remove(key) {
            self.free_slot(slot);
        }
    }

    fn free_slot(&mut self, slot: u32) {
        if let Some(e) = self.s.slots.get_mut(slot as usize).and_then(Option::take) {
            self.s.dirty.push(slot);
            self.s.dirty_bytes += e.cost;
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

    /// The cleaner: rinsing space becomes free, dirty space becomes rinsing. Run it only when no DIF code
    /// holds addresses of variables (between probe firings).
    pub fn clean(&mut self) {
        if self.s.rinsing.is_empty() && self.s.dirty.is_empty() {
            return;
        }
        self.s.used -= self.s.rinsing_bytes;
        self.s.free.append(&mut self.s.rinsing);
        std::mem::swap(&mut self.s.rinsing, &mut self.s.dirty);
        self.s.rinsing_bytes = std::mem::take(&mut self.s.dirty_bytes);
    }

    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.s.index.len()
    }

    /// Whether there are no live entries.
    pub fn is_empty(&self) -> bool {
        self.s.index.is_empty()
    }

    /// Bytes in use (live variables and space not yet cleaned).
    pub fn used(&self) -> usize {
        self.s.used
    }

    /// Drops with empty dirty and rinsing lists (out of space), and stores that could never fit.
    pub fn drops(&self) -> u64 {
        self.s.drops
    }

    /// Drops while freed space was waiting on the dirty list.
    pub fn dirty_drops(&self) -> u64 {
        self.s.dirty_drops
    }

    /// Drops while freed space was waiting on the rinsing list.
    pub fn rinsing_drops(&self) -> u64 {
        self.s.rinsing_drops
    }

    /// Every entry, in no particular order (for inspection and tests).
    pub fn iter(&self) -> impl Iterator<Item = (&DynKey, &Stored)> {
        self.s.slots.iter().flatten().map(|e| (&e.key, &e.value))
    }
}
