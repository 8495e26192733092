//! State the caller owns across probe firings: options, global scalar variables and the dynamic
//! variable space (thread-local variables and associative arrays) bounded by `dynvarsize`.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

pub use crate::vm::dynvar::DynVarSpace;

/// A fast non-cryptographic hasher (the Fx multiply-rotate scheme) for dynamic-variable keys: keys come
/// from D programs, not from an adversary that could exploit collisions.
#[derive(Debug, Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const FX_SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.hash = (self.hash.rotate_left(5) ^ w).wrapping_mul(FX_SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

pub(crate) type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Options that bound the interpreter (DTrace's `strsize`, `dynvarsize` and the scratch size).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VmOptions {
    /// Bytes of a string's storage, its NUL included: one more than DTrace's `strsize` option, as
    /// DTrace for Linux keeps `strsize` characters and the NUL (default 257).
    pub strsize: usize,
    /// Bytes of dynamic variable space (`dynvarsize`, default 1 MiB).
    pub dynvarsize: usize,
    /// Bytes of scratch space per probe firing (default 1 MiB).
    pub scratch_size: usize,
}

impl Default for VmOptions {
    fn default() -> VmOptions {
        VmOptions {
            strsize: 257,
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
#[repr(u8)]
pub enum DynScope {
    /// A thread-local scalar (`self->x`).
    ThreadScalar,
    /// A thread-local associative array (`self->a[k]`).
    ThreadArray,
    /// A global associative array (`a[k]`).
    GlobalArray,
}

/// The key of a dynamic variable: variable id, scope, thread key (0 for globals) and the tuple, the
/// tuple flattened into bytes so a key can be rebuilt in place without allocating, and its hash computed
/// as it is built so lookups do not rehash it.
#[derive(Debug, Clone, Default)]
pub struct DynKey {
    scope: DynScopeTag,
    var: u32,
    thread: u64,
    nelems: u32,
    /// Per element a tag byte (0 integer, 1 bytes), then 8 bytes of integer or a 4-byte length and the
    /// bytes.
    tuple: Vec<u8>,
    hash: u64,
}

impl PartialEq for DynKey {
    fn eq(&self, o: &DynKey) -> bool {
        self.hash == o.hash
            && self.var == o.var
            && self.thread == o.thread
            && self.scope == o.scope
            && self.nelems == o.nelems
            && self.tuple == o.tuple
    }
}

impl Eq for DynKey {}

impl std::hash::Hash for DynKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

pub(crate) fn mix(h: u64, w: u64) -> u64 {
    (h.rotate_left(5) ^ w).wrapping_mul(FX_SEED)
}

/// [`DynScope`] wrapped so [`DynKey`] can have a `Default`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DynScopeTag(pub DynScope);

impl Default for DynScopeTag {
    fn default() -> DynScopeTag {
        DynScopeTag(DynScope::GlobalArray)
    }
}

impl DynKey {
    /// A key with an empty tuple.
    pub fn new(scope: DynScope, var: u32, thread: u64) -> DynKey {
        let mut k = DynKey::default();
        k.reset(scope, var, thread);
        k
    }

    /// Resets this key for reuse, keeping its buffer.
    pub fn reset(&mut self, scope: DynScope, var: u32, thread: u64) {
        self.scope = DynScopeTag(scope);
        self.var = var;
        self.thread = thread;
        self.nelems = 0;
        self.tuple.clear();
        self.hash = mix(mix(mix(0, scope as u64), var as u64), thread);
    }

    /// Appends an integer element.
    pub fn push_int(&mut self, v: u64) {
        self.tuple.push(0);
        self.tuple.extend_from_slice(&v.to_le_bytes());
        self.nelems += 1;
        self.hash = mix(self.hash, v);
    }

    /// Appends a by-reference element.
    pub fn push_bytes(&mut self, b: &[u8]) {
        self.tuple.push(1);
        self.tuple
            .extend_from_slice(&(b.len() as u32).to_le_bytes());
        self.tuple.extend_from_slice(b);
        self.nelems += 1;
        let mut h = mix(self.hash, 1 << 63 | b.len() as u64);
        let mut chunks = b.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            h = mix(h, u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            h = mix(h, u64::from_le_bytes(w));
        }
        self.hash = h;
    }

    /// Bytes the key costs in the dynamic variable space when the program's tuple sizes are not
    /// known: its encoded elements.
    pub(crate) fn cost(&self) -> usize {
        self.tuple.len()
    }

    /// The kind of variable.
    pub fn scope(&self) -> DynScope {
        self.scope.0
    }

    /// The variable id.
    pub fn var(&self) -> u32 {
        self.var
    }

    /// The thread key (0 for global arrays).
    pub fn thread(&self) -> u64 {
        self.thread
    }

    /// The tuple's elements, decoded.
    pub fn elems(&self) -> Vec<KeyElem> {
        let mut out = Vec::new();
        let t = &self.tuple[..];
        let mut i = 0;
        while i < t.len() {
            let tag = t[i];
            i += 1;
            if tag == 0 {
                let mut w = [0u8; 8];
                w.copy_from_slice(&t[i..i + 8]);
                out.push(KeyElem::Int(u64::from_le_bytes(w)));
                i += 8;
            } else {
                let mut w = [0u8; 4];
                w.copy_from_slice(&t[i..i + 4]);
                let n = u32::from_le_bytes(w) as usize;
                i += 4;
                out.push(KeyElem::Bytes(t[i..i + n].to_vec().into_boxed_slice()));
                i += n;
            }
        }
        out
    }
}

/// The variable state of a consumer's enabling that persists across probe firings: global scalars and
/// the dynamic variable space. One per DTrace state (per `dtrace -s` run), shared by all its clauses.
#[derive(Debug, Clone)]
pub struct VarState {
    /// Options.
    pub options: VmOptions,
    pub(crate) globals: Vec<Option<Stored>>,
    /// Bytes of by-reference values in `globals`.
    pub(crate) global_bytes: usize,
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
            global_bytes: 0,
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
        if id > 0xffff {
            return;
        }
        let i = i as usize;
        if i >= self.globals.len() {
            self.globals.resize(i + 1, None);
        }
        let len = |s: &Option<Stored>| match s {
            Some(Stored::Bytes(b)) => b.len(),
            _ => 0,
        };
        let old = len(&self.globals[i]);
        self.globals[i] = Some(value);
        self.global_bytes = self.global_bytes.saturating_sub(old) + len(&self.globals[i]);
    }

    /// Dynamic-variable drops so far (stores that found the space full).
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
    use crate::vm::dynvar::DynVarSpace;

    fn key(n: u64) -> DynKey {
        let mut k = DynKey::new(DynScope::GlobalArray, 0x500, 0);
        k.push_int(n);
        k
    }

    #[test]
    fn keys_decode() {
        let mut k = DynKey::new(DynScope::ThreadArray, 0x501, 7);
        k.push_int(5);
        k.push_bytes(b"ab");
        assert_eq!(
            k.elems(),
            vec![
                KeyElem::Int(5),
                KeyElem::Bytes(b"ab".to_vec().into_boxed_slice())
            ]
        );
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
        // A freed entry's space is free at once (its slot number waits for the cleaner).
        s.remove(&key(0));
        assert!(s.put(key(1000), Stored::Int(1)));
        assert!(!s.put(key(1001), Stored::Int(1)));
        assert_eq!(s.drops(), 100 - stored + 1);
    }

    #[test]
    fn every_variable_costs_the_entry_size() {
        // int a[int]: a tuple of 4 + 4 + 8 bytes and a 4-byte value, as DTrace for Linux lays them
        // out: 80 bytes hold four.
        let entry = crate::vm::dynvar::tuple_size([(4, true)]) + 4;
        assert_eq!(entry, 20);
        let mut s = DynVarSpace::new(80);
        s.set_entry_size(entry as usize);
        for n in 1..=4 {
            assert!(s.put(key(n), Stored::Int(n)));
        }
        assert!(!s.put(key(5), Stored::Int(5)));
        // Storing 0 deletes: the next store fits in the same firing.
        s.remove(&key(1));
        assert!(s.put(key(5), Stored::Int(5)));
        assert_eq!(s.drops(), 1);
    }

    #[test]
    fn one_variable_fits_however_small_the_space() {
        // As `capacity` sizes the kernel's map: at least one entry.
        let mut s = DynVarSpace::new(8);
        s.set_entry_size(20);
        assert!(s.put(key(1), Stored::Int(1)));
        assert!(s.put(key(1), Stored::Int(2)));
        assert!(!s.put(key(2), Stored::Int(3)));
        s.remove(&key(1));
        assert!(s.put(key(2), Stored::Int(3)));
        assert_eq!(s.drops(), 1);
    }

    #[test]
    fn freed_slots_wait_for_two_cleaner_passes() {
        let mut s = DynVarSpace::new(1 << 20);
        s.set_entry_size(16);
        let slot = s.put_slot(&key(1), Stored::Int(1)).unwrap();
        s.remove(&key(1));
        // Not reused while DIF code may still hold its address.
        assert_ne!(s.put_slot(&key(2), Stored::Int(2)), Some(slot));
        s.clean();
        assert_ne!(s.put_slot(&key(3), Stored::Int(3)), Some(slot));
        s.clean();
        assert_eq!(s.put_slot(&key(4), Stored::Int(4)), Some(slot));
    }

    #[test]
    fn tuples_are_laid_out_as_dtrace_for_linux_assembles_them() {
        use crate::vm::dynvar::{capacity, tuple_size};
        assert_eq!(tuple_size([]), 12);
        assert_eq!(tuple_size([(8, true)]), 24);
        assert_eq!(tuple_size([(1, true), (8, true)]), 24);
        // A string of strsize 256 (and its NUL) is not aligned.
        assert_eq!(tuple_size([(4, true), (257, false), (8, true)]), 288);
        assert_eq!(capacity(15, 4), 3);
        assert_eq!(capacity(5, 8), 1);
    }

    #[test]
    fn remove_thread_frees_only_that_thread() {
        let mut s = DynVarSpace::new(1 << 20);
        for t in 1..=2 {
            s.put(
                DynKey::new(DynScope::ThreadScalar, 0x500, t),
                Stored::Int(5),
            );
        }
        s.put(key(1), Stored::Int(1));
        s.remove_thread(1);
        assert_eq!(s.len(), 2);
    }
}
