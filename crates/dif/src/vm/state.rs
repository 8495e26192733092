//! State the caller owns across probe firings: options, global scalar variables and the dynamic
//! variable space (thread-local variables and associative arrays) bounded by `dynvarsize`.

use std::collections::HashMap;

/// Options that bound the interpreter (DTrace's `strsize`, `dynvarsize` and the scratch size).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VmOptions {
    /// Maximum size of a string, its NUL included (`strsize`, default 256).
    pub strsize: usize,
    /// Bytes of dynamic variable space (`dynvarsize`, default 1 MiB).
    pub dynvarsize: usize,
    /// Bytes of scratch space per probe firing (default 1 MiB).
    pub scratch_size: usize,
}

impl Default for VmOptions {
    fn default() -> VmOptions {
        VmOptions {
            strsize: 256,
            dynvarsize: 1 << 20,
            scratch_size: 1 << 20,
        }
    }
}

impl VmOptions {
    /// The options with every size clamped to what the VM supports (strsize 2 .. 1 MiB, scratch at most
    /// 256 MiB), so bad option values cannot make it allocate without bound.
    pub fn clamped(self) -> VmOptions {
        VmOptions {
            strsize: self.strsize.clamp(2, 1 << 20),
            dynvarsize: self.dynvarsize,
            scratch_size: self.scratch_size.min(1 << 28),
        }
    }
}

/// A stored variable value: an integer, or the bytes of a by-reference value (strings NUL-padded).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Stored {
    /// A by-value integer.
    Int(u64),
    /// The bytes of a by-reference value.
    Bytes(Box<[u8]>),
}

/// One element of an associative-array key tuple.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyElem {
    /// An integer key (pushed with `pushtv`).
    Int(u64),
    /// A by-reference key (pushed with `pushtr`): its bytes; strings up to and without their NUL.
    Bytes(Box<[u8]>),
}

/// Which kind of dynamic variable a key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DynScope {
    /// A thread-local scalar (`self->x`).
    ThreadScalar,
    /// A thread-local associative array (`self->a[k]`).
    ThreadArray,
    /// A global associative array (`a[k]`).
    GlobalArray,
}

/// The key of a dynamic variable: variable id, scope, thread key (0 for globals) and the tuple.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DynKey {
    /// Kind of variable.
    pub scope: DynScope,
    /// The variable id (`DIF_VAR_OTHER_UBASE` and up).
    pub var: u32,
    /// The thread key for thread-local variables, 0 otherwise.
    pub thread: u64,
    /// The array key tuple (empty for scalars).
    pub tuple: Vec<KeyElem>,
}

/// Fixed cost charged per dynamic variable, like DTrace's `dtrace_dynvar_t` header.
const ENTRY_OVERHEAD: usize = 64;
/// Cost charged per key element (DTrace's `dtrace_key_t`).
const KEY_OVERHEAD: usize = 16;

fn entry_cost(key: &DynKey, value: &Stored) -> usize {
    let keys: usize = key
        .tuple
        .iter()
        .map(|k| match k {
            KeyElem::Int(_) => KEY_OVERHEAD,
            KeyElem::Bytes(b) => KEY_OVERHEAD + b.len(),
        })
        .sum();
    let val = match value {
        Stored::Int(_) => 8,
        Stored::Bytes(b) => b.len().max(8),
    };
    ENTRY_OVERHEAD + 2 * KEY_OVERHEAD + keys + val
}

/// The dynamic variable space: thread-local variables and associative arrays, bounded by `dynvarsize`.
/// Storing zero frees an entry; a store that does not fit is dropped and counted.
#[derive(Debug, Clone, Default)]
pub struct DynVarSpace {
    map: HashMap<DynKey, Stored>,
    used: usize,
    limit: usize,
    drops: u64,
}

impl DynVarSpace {
    /// An empty space of `limit` bytes.
    pub fn new(limit: usize) -> DynVarSpace {
        DynVarSpace {
            map: HashMap::new(),
            used: 0,
            limit,
            drops: 0,
        }
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &DynKey) -> Option<&Stored> {
        self.map.get(key)
    }

    /// Stores `value` under `key`; returns false (and counts a dynamic-variable drop) when the space is
    /// full.
    pub fn put(&mut self, key: DynKey, value: Stored) -> bool {
        if let Some(old) = self.map.get_mut(&key) {
            let old_cost = entry_cost(&key, old);
            let new_cost = entry_cost(&key, &value);
            if self.used - old_cost + new_cost > self.limit {
                self.drops += 1;
                return false;
            }
            self.used = self.used - old_cost + new_cost;
            *old = value;
            return true;
        }
        let cost = entry_cost(&key, &value);
        if self.used.saturating_add(cost) > self.limit {
            self.drops += 1;
            return false;
        }
        self.used += cost;
        self.map.insert(key, value);
        true
    }

    /// Counts a dynamic-variable drop for a store that could not be made.
    pub fn count_drop(&mut self) {
        self.drops += 1;
    }

    /// Frees the entry under `key`, if any.
    pub fn remove(&mut self, key: &DynKey) {
        if let Some((k, v)) = self.map.remove_entry(key) {
            self.used -= entry_cost(&k, &v);
        }
    }

    /// Frees every thread-local variable of a thread (when it exits).
    pub fn remove_thread(&mut self, thread: u64) {
        let keys: Vec<DynKey> = self
            .map
            .keys()
            .filter(|k| k.thread == thread && k.scope != DynScope::GlobalArray)
            .cloned()
            .collect();
        for k in keys {
            self.remove(&k);
        }
    }

    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there are no live entries.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Bytes in use.
    pub fn used(&self) -> usize {
        self.used
    }

    /// Dynamic-variable drops so far (stores that did not fit).
    pub fn drops(&self) -> u64 {
        self.drops
    }

    /// Every entry, in no particular order (for inspection and tests).
    pub fn iter(&self) -> impl Iterator<Item = (&DynKey, &Stored)> {
        self.map.iter()
    }
}

/// The variable state of a consumer's enabling that persists across probe firings: global scalars and
/// the dynamic variable space. One per DTrace state (per `dtrace -s` run), shared by all its clauses.
#[derive(Debug, Clone)]
pub struct VarState {
    /// Options.
    pub options: VmOptions,
    globals: Vec<Option<Stored>>,
    /// Thread-locals and associative arrays.
    pub dynvars: DynVarSpace,
}

impl VarState {
    /// Fresh state with these options.
    pub fn new(options: VmOptions) -> VarState {
        let options = options.clamped();
        VarState {
            options,
            globals: Vec::new(),
            dynvars: DynVarSpace::new(options.dynvarsize),
        }
    }

    /// The value of global scalar `id` (`DIF_VAR_OTHER_UBASE` and up), `None` when never stored.
    pub fn global(&self, id: u32) -> Option<&Stored> {
        let i = id.checked_sub(crate::vars::DIF_VAR_OTHER_UBASE)? as usize;
        self.globals.get(i)?.as_ref()
    }

    /// Sets global scalar `id`.
    pub fn set_global(&mut self, id: u32, value: Stored) {
        let Some(i) = id.checked_sub(crate::vars::DIF_VAR_OTHER_UBASE) else {
            return;
        };
        let i = i as usize;
        if i >= self.globals.len() {
            self.globals.resize(i + 1, None);
        }
        self.globals[i] = Some(value);
    }

    /// Dynamic-variable drops so far.
    pub fn dynvar_drops(&self) -> u64 {
        self.dynvars.drops()
    }
}

impl Default for VarState {
    fn default() -> VarState {
        VarState::new(VmOptions::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u64) -> DynKey {
        DynKey {
            scope: DynScope::GlobalArray,
            var: 0x500,
            thread: 0,
            tuple: vec![KeyElem::Int(n)],
        }
    }

    #[test]
    fn space_is_bounded_and_drops_are_counted() {
        let mut s = DynVarSpace::new(1000);
        let mut stored = 0;
        for n in 0..100 {
            if s.put(key(n), Stored::Int(n + 1)) {
                stored += 1;
            }
        }
        assert!(stored > 0 && stored < 100);
        assert_eq!(s.drops(), 100 - stored);
        assert!(s.used() <= 1000);
        s.remove(&key(0));
        assert!(s.put(key(1000), Stored::Int(1)));
    }

    #[test]
    fn remove_thread_frees_only_that_thread() {
        let mut s = DynVarSpace::new(1 << 20);
        for t in 1..=2 {
            s.put(
                DynKey {
                    scope: DynScope::ThreadScalar,
                    var: 0x500,
                    thread: t,
                    tuple: vec![],
                },
                Stored::Int(5),
            );
        }
        s.put(key(1), Stored::Int(1));
        s.remove_thread(1);
        assert_eq!(s.len(), 2);
    }
}
