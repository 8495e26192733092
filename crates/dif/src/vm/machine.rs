//! The per-firing machine state and the VM's address space.
//!
//! DIF code sees 64-bit addresses. Memory the VM owns lives at fixed, non-canonical addresses that no
//! x86-64 or arm64 kernel or user pointer can have: scratch space at [`SCRATCH_BASE`], the alloca
//! area at [`ALLOCA_BASE`] and the running object's string table at [`STRTAB_BASE`]. Every other address is kernel memory, read through the
//! [`Memory`] trait (user memory only by the `uld*` instructions and `copyin*`). Global and clause-local
//! by-reference variables that are not strings (D arrays, structs, unions) are loaded as the address of
//! their real storage at [`VAR_BASE`], so `st*` into `a[2]` or `s.x` persists, as in DTrace; by-reference
//! dynamic variables (`self->s`, `a[k]` of struct or array type) likewise at [`DYN_BASE`]. Strings and
//! string built-ins are copied into scratch when loaded. Stores are allowed only into scratch and
//! variable storage, so they can never reach the traced system.
//!
//! Scratch and clause-local variables live for one probe firing ([`Machine::begin_firing`]); clause-locals
//! persist across the clauses (DIF objects) run for that firing, as in DTrace.
//!
//! The alloca area is DTrace for Linux's: what `alloca()` and `copyin()` return, `scratchsize` bytes
//! of it, emptied at each clause ([`Machine::begin_clause`]). Accesses through its pointers are
//! checked against what the clause allocated: one that starts past the top faults with an invalid
//! address, one that starts below it and runs past it with an invalid size. Scratch proper holds
//! the temporaries the VM makes (string results, loaded strings), bounded by `scratchsize` or
//! [`TEMP_MIN`], whichever is more, as DTrace for Linux keeps those apart from the alloca area.

use crate::object::DifObject;
use crate::vm::env::Memory;
use crate::vm::fault::{Fault, FaultKind};
use crate::vm::state::{Stored, VmOptions};

/// Address of the first byte of scratch space.
pub const SCRATCH_BASE: u64 = 0x5ca7_0000_0000_0000;
/// Address of the first byte of the alloca area.
pub const ALLOCA_BASE: u64 = 0xa11c_0000_0000_0000;
/// Bytes DTrace for Linux reserves at the start of its scratch area, before the alloca area.
pub const ALLOCA_RESERVED: u64 = 8;
/// Least room for temporaries in scratch, whatever `scratchsize` is.
pub const TEMP_MIN: usize = 1 << 20;
/// Address of the first byte of the running object's string table.
pub const STRTAB_BASE: u64 = 0x57a6_0000_0000_0000;
/// Address of the storage of global by-reference variables; clause-locals follow at
/// `VAR_BASE + (1 << 44)`. Variable `DIF_VAR_OTHER_UBASE + i` starts at `(i << 20)` in its half.
pub const VAR_BASE: u64 = 0x7a55_0000_0000_0000;
/// Address of the storage of by-reference dynamic variables (thread-locals and associative-array
/// elements that are structs or arrays): slot `n` of the dynamic variable space starts at `n << 20`.
pub const DYN_BASE: u64 = 0x6479_0000_0000_0000;
/// Size of the dynamic-variable region.
const DYN_SPAN: u64 = 1 << 44;
/// Size of the address range reserved for each VM region.
const REGION_SPAN: u64 = 1 << 40;
/// Size of the variable-storage region (globals, then clause-locals).
const VAR_SPAN: u64 = 1 << 45;
/// Bit of a variable address that selects clause-locals.
const VAR_LOCAL_BIT: u64 = 1 << 44;
/// Log2 of the room each variable has (variables are at most 1 MiB).
const VAR_SHIFT: u32 = 20;

/// The address of byte 0 of the dynamic variable in `slot`.
pub(crate) fn dyn_addr(slot: u32) -> u64 {
    DYN_BASE + ((slot as u64) << VAR_SHIFT)
}

/// The slot and offset of an address in the dynamic-variable region, if it is in it.
pub(crate) fn split_dyn_addr(addr: u64) -> Option<(u32, usize)> {
    let rel = addr.wrapping_sub(DYN_BASE);
    (rel < DYN_SPAN).then_some({
        (
            (rel >> VAR_SHIFT) as u32,
            (rel & ((1 << VAR_SHIFT) - 1)) as usize,
        )
    })
}

/// The address of byte 0 of by-reference variable slot `index` (`id - DIF_VAR_OTHER_UBASE`).
pub(crate) fn var_addr(local: bool, index: usize) -> u64 {
    VAR_BASE + if local { VAR_LOCAL_BIT } else { 0 } + ((index as u64) << VAR_SHIFT)
}

/// Extends `area` by `size` zeroed bytes starting on an 8-byte boundary, within `limit` bytes;
/// returns the start.
fn grow(area: &mut Vec<u8>, size: u64, limit: usize) -> Result<usize, Fault> {
    let start = area.len().next_multiple_of(8);
    let end = usize::try_from(size)
        .ok()
        .and_then(|n| start.checked_add(n))
        .filter(|&e| e <= limit)
        .ok_or(Fault::new(FaultKind::NoScratch, 0))?;
    area.resize(end, 0);
    Ok(start)
}

/// Number of tuple-stack registers (`DIF_DTR_NREGS`).
pub const TUPLE_REGS: usize = 8;

/// The state of one probe firing: scratch, clause-local variables, `strtok` position. Reuse one
/// `Machine` per CPU/thread of the framework; call [`begin_firing`](Machine::begin_firing) at each firing.
#[derive(Debug, Clone, Default)]
pub struct Machine {
    pub(crate) opts: VmOptions,
    pub(crate) scratch: Vec<u8>,
    /// The alloca area of the running clause.
    pub(crate) alloca: Vec<u8>,
    pub(crate) locals: Vec<Option<Stored>>,
    /// Global scalar variables: the caller's during a run (moved in from the `VarState` and back), after
    /// it at most a copy of the variable a by-reference result points into, for `read_result`.
    pub(crate) globals: Vec<Option<Stored>>,
    /// Bytes of by-reference values in `locals` and (during a run) `globals`.
    pub(crate) local_bytes: usize,
    pub(crate) global_bytes: usize,
    /// Where `strtok(NULL, ...)` continues: an address and the end of its string, 0 when none.
    pub(crate) strtok: u64,
    pub(crate) strtok_end: u64,
    /// Reused buffers.
    pub(crate) tmp: Vec<u8>,
    pub(crate) tmp2: Vec<u8>,
    /// Reused dynamic-variable key.
    pub(crate) key: crate::vm::state::DynKey,
    /// What `key` was built from, while it is still valid (see `dyn_key`).
    pub(crate) key_from: Option<KeySource>,
    /// The probe context's thread key, once asked in this run.
    pub(crate) thread: Option<u64>,
    /// String built-ins copied into scratch in this firing: id and address.
    pub(crate) builtin_strs: Vec<(u32, u64)>,
    /// The fault of the last out-of-line instruction that faulted.
    pub(crate) fault: Fault,
    /// The slot of the variable `key` names, while `key_from` is valid and it was looked up.
    pub(crate) key_slot: Option<u32>,
    /// The dynamic variable space: the caller's during a run (moved in from the `VarState` and back).
    pub(crate) dynvars: crate::vm::dynvar::DynVarSpace,
    /// After a run whose result points into a dynamic variable: that variable's slot and bytes, for
    /// `read_result`.
    pub(crate) dyn_kept: Option<(u32, Box<[u8]>)>,
    /// The last run stopped because a dynamic-variable store was dropped.
    pub(crate) dropped_exit: bool,
}

/// The inputs a dynamic-variable key was built from: same inputs and no memory written since means the
/// same key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeySource {
    pub scope: crate::vm::state::DynScope,
    pub id: u32,
    pub with_tuple: bool,
    pub top: usize,
    pub args: [(u64, u64); TUPLE_REGS],
}

/// Splits an address of the variable region into (clause-local?, slot index, offset in the variable).
fn split_var_addr(addr: u64) -> (bool, usize, u64) {
    let rel = addr - VAR_BASE;
    let local = rel & VAR_LOCAL_BIT != 0;
    let rel = rel & (VAR_LOCAL_BIT - 1);
    (
        local,
        (rel >> VAR_SHIFT) as usize,
        rel & ((1 << VAR_SHIFT) - 1),
    )
}

/// Where a VM address points.
pub(crate) enum Region<'a> {
    /// VM-owned bytes.
    Vm(&'a [u8]),
    /// Outside the VM (kernel memory).
    Outside,
}

impl Machine {
    /// A machine with default options; the options of the [`VarState`](crate::vm::VarState) passed to
    /// `run` take effect at each run.
    pub fn new() -> Machine {
        Machine::default()
    }

    /// Starts a probe firing: empties scratch, forgets clause-local variables and the `strtok` position.
    pub fn begin_firing(&mut self) {
        self.scratch.clear();
        self.alloca.clear();
        self.locals.clear();
        self.local_bytes = 0;
        self.globals.clear();
        self.dyn_kept = None;
        self.builtin_strs.clear();
        self.strtok = 0;
        self.strtok_end = 0;
    }

    /// Starts a clause (its predicate and actions): empties the alloca area.
    pub fn begin_clause(&mut self) {
        self.alloca.clear();
    }

    /// Bytes of scratch in use in this firing.
    pub fn scratch_used(&self) -> usize {
        self.scratch.len()
    }

    /// Resolves `len` bytes at `addr` if they are VM-owned; `Err(BadAddr)` when the address is in a VM
    /// region but the range is not valid there.
    pub(crate) fn region<'a>(
        &'a self,
        obj: &'a DifObject,
        addr: u64,
        len: usize,
    ) -> Result<Region<'a>, Fault> {
        if let Some(off) = self.alloca_offset(addr) {
            return self
                .alloca_range(addr, off, len)
                .map(|r| Region::Vm(&self.alloca[r]));
        }
        let (bytes, off) = match self.vm_bytes(obj, addr)? {
            Some(b) => b,
            None => return Ok(Region::Outside),
        };
        let off = usize::try_from(off).map_err(|_| Fault::new(FaultKind::BadAddr, addr))?;
        let end = off
            .checked_add(len)
            .ok_or(Fault::new(FaultKind::BadAddr, addr))?;
        bytes
            .get(off..end)
            .map(Region::Vm)
            .ok_or(Fault::new(FaultKind::BadAddr, addr))
    }

    /// Reads `buf.len()` bytes at `addr` (VM memory or kernel memory).
    pub(crate) fn read(
        &self,
        obj: &DifObject,
        mem: &mut dyn Memory,
        addr: u64,
        buf: &mut [u8],
    ) -> Result<(), Fault> {
        if let Some(r) = self.read_scratch(addr, buf) {
            return r;
        }
        if let Some(r) = self.read_var_past_end(addr, buf) {
            return r;
        }
        match self.region(obj, addr, buf.len())? {
            Region::Vm(b) => {
                buf.copy_from_slice(b);
                Ok(())
            }
            Region::Outside => mem.read_kernel(addr, buf).map_err(|k| Fault::new(k, addr)),
        }
    }

    /// A read that starts in allocated scratch and runs past what this firing allocated: as in
    /// DTrace, whose loads may read anywhere in the scratch region (`dtrace_canload` of scratch
    /// checks the region, not the allocations), it succeeds up to `scratchsize`; bytes not allocated
    /// read as zero. `None` for every other read.
    fn read_scratch(&self, addr: u64, buf: &mut [u8]) -> Option<Result<(), Fault>> {
        let off = usize::try_from(addr.checked_sub(SCRATCH_BASE)?).ok()?;
        if off >= self.scratch.len() || off + buf.len() <= self.scratch.len() {
            return None;
        }
        if off + buf.len() > self.temp_limit() {
            return Some(Err(Fault::new(FaultKind::BadAddr, addr)));
        }
        let have = self.scratch.len() - off;
        buf[..have].copy_from_slice(&self.scratch[off..]);
        buf[have..].fill(0);
        Some(Ok(()))
    }

    /// A read in the storage of a by-reference variable that runs past the variable's end: in
    /// DTrace the variables share one region, and a load through a cast pointer may go past one
    /// ("out-of-bounds array dereferences work as long as you cast"); here the bytes past the end
    /// read as zero, within the room each variable has. Stores past the end still fault. `None`
    /// for every other read.
    fn read_var_past_end(&self, addr: u64, buf: &mut [u8]) -> Option<Result<(), Fault>> {
        if addr.wrapping_sub(VAR_BASE) >= VAR_SPAN {
            return None;
        }
        let (local, index, off) = split_var_addr(addr);
        let vars = if local { &self.locals } else { &self.globals };
        let Some(Some(Stored::Bytes(b))) = vars.get(index) else {
            return None;
        };
        let off = usize::try_from(off).ok()?;
        let end = off.checked_add(buf.len())?;
        if end <= b.len() {
            return None;
        }
        if end > 1 << VAR_SHIFT {
            return Some(Err(Fault::new(FaultKind::BadAddr, addr)));
        }
        let have = b.len().saturating_sub(off);
        if have > 0 {
            buf[..have].copy_from_slice(&b[off..]);
        }
        buf[have..].fill(0);
        Some(Ok(()))
    }

    /// Reads a NUL-terminated string at `addr` of at most `max` bytes (NUL excluded) into `out`
    /// (cleared first). `user` selects user memory for addresses outside the VM. Address 0 faults.
    pub(crate) fn read_str(
        &self,
        obj: &DifObject,
        mem: &mut dyn Memory,
        addr: u64,
        max: usize,
        user: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), Fault> {
        out.clear();
        if addr == 0 {
            return Err(Fault::new(FaultKind::BadAddr, 0));
        }
        if let Some(bytes) = self.vm_tail(obj, addr)? {
            let b = &bytes[..bytes.len().min(max)];
            let n = b.iter().position(|&c| c == 0).unwrap_or(b.len());
            out.extend_from_slice(&b[..n]);
            return Ok(());
        }
        let mut chunk = [0u8; 64];
        let mut a = addr;
        while out.len() < max {
            // Read up to the next 64-byte boundary so a chunk never crosses a page.
            let want = (64 - (a % 64) as usize).min(max - out.len());
            let buf = &mut chunk[..want];
            let ok = if user {
                mem.read_user(a, buf)
            } else {
                mem.read_kernel(a, buf)
            };
            if ok.is_err() {
                // Retry byte by byte: the string may end before the unreadable part.
                for i in 0..want {
                    let at = a.wrapping_add(i as u64);
                    let mut one = [0u8; 1];
                    let r = if user {
                        mem.read_user(at, &mut one)
                    } else {
                        mem.read_kernel(at, &mut one)
                    };
                    r.map_err(|k| Fault::new(k, at))?;
                    if one[0] == 0 {
                        return Ok(());
                    }
                    out.push(one[0]);
                }
            } else if let Some(n) = buf.iter().position(|&c| c == 0) {
                out.extend_from_slice(&buf[..n]);
                return Ok(());
            } else {
                out.extend_from_slice(buf);
            }
            a = a.wrapping_add(want as u64);
        }
        Ok(())
    }

    /// The VM-owned bytes `addr` is in (a whole region or variable) and its offset there; `None` when
    /// `addr` is outside the VM, `BadAddr` when it is in the variable region but names no variable.
    fn vm_bytes<'a>(
        &'a self,
        obj: &'a DifObject,
        addr: u64,
    ) -> Result<Option<(&'a [u8], u64)>, Fault> {
        Ok(Some(if addr.wrapping_sub(SCRATCH_BASE) < REGION_SPAN {
            (&self.scratch[..], addr - SCRATCH_BASE)
        } else if let Some(off) = self.alloca_offset(addr) {
            (&self.alloca[..], off as u64)
        } else if addr.wrapping_sub(STRTAB_BASE) < REGION_SPAN {
            (&obj.strtab[..], addr - STRTAB_BASE)
        } else if addr.wrapping_sub(VAR_BASE) < VAR_SPAN {
            let (local, index, off) = split_var_addr(addr);
            let vars = if local { &self.locals } else { &self.globals };
            match vars.get(index) {
                Some(Some(Stored::Bytes(b))) => (&b[..], off),
                _ => return Err(Fault::new(FaultKind::BadAddr, addr)),
            }
        } else if let Some((slot, off)) = split_dyn_addr(addr) {
            match (self.dynvars.value(slot), &self.dyn_kept) {
                (Some(Stored::Bytes(b)), _) => (&b[..], off as u64),
                (None, Some((s, b))) if *s == slot => (&b[..], off as u64),
                _ => return Err(Fault::new(FaultKind::BadAddr, addr)),
            }
        } else {
            return Ok(None);
        }))
    }

    /// The VM-owned bytes from `addr` to the end of its region, or `None` when `addr` is outside.
    pub(crate) fn vm_tail<'a>(
        &'a self,
        obj: &'a DifObject,
        addr: u64,
    ) -> Result<Option<&'a [u8]>, Fault> {
        let (bytes, off) = match self.vm_bytes(obj, addr)? {
            Some(b) => b,
            None => return Ok(None),
        };
        let off = usize::try_from(off).map_err(|_| Fault::new(FaultKind::BadAddr, addr))?;
        match bytes.get(off..) {
            Some(b) if off < bytes.len() => Ok(Some(b)),
            _ => Err(Fault::new(FaultKind::BadAddr, addr)),
        }
    }

    /// Allocates `size` zeroed bytes of scratch for a temporary, aligned on 8 bytes; `NoScratch`
    /// when it does not fit.
    pub(crate) fn alloc(&mut self, size: u64) -> Result<u64, Fault> {
        let limit = self.temp_limit();
        let start = grow(&mut self.scratch, size, limit)?;
        Ok(SCRATCH_BASE + start as u64)
    }

    /// Bytes of scratch for temporaries.
    fn temp_limit(&self) -> usize {
        self.opts.scratch_size.max(TEMP_MIN)
    }

    /// `alloca(size)`: `size` zeroed bytes of the clause's alloca area, aligned on 8 bytes;
    /// `NoScratch` past `scratchsize`.
    pub(crate) fn alloca(&mut self, size: u64) -> Result<u64, Fault> {
        let start = grow(&mut self.alloca, size, self.opts.scratch_size)?;
        Ok(ALLOCA_BASE + start as u64)
    }

    /// A value as it leaves the VM into a record: an alloca pointer becomes what DTrace for Linux
    /// records for one, its offset in the scratch area, whose first 8 bytes are reserved (so the
    /// clause's first `alloca()` is 8, and no alloca pointer is NULL); every other value is itself.
    pub fn export_value(&self, v: u64) -> u64 {
        match self.alloca_offset(v) {
            Some(off) => off as u64 + ALLOCA_RESERVED,
            None => v,
        }
    }

    /// The offset of `addr` in the alloca area, if it is in that region.
    fn alloca_offset(&self, addr: u64) -> Option<usize> {
        let rel = addr.wrapping_sub(ALLOCA_BASE);
        (rel < REGION_SPAN).then_some(rel as usize)
    }

    /// The range of `len` bytes at offset `off` of the alloca area (`addr`): an invalid address when
    /// it starts at or past what the clause allocated, an invalid size when it runs past it.
    fn alloca_range(
        &self,
        addr: u64,
        off: usize,
        len: usize,
    ) -> Result<std::ops::Range<usize>, Fault> {
        let top = self.alloca.len();
        if off >= top {
            return Err(Fault::new(FaultKind::BadAddr, addr));
        }
        match off.checked_add(len) {
            Some(end) if end <= top => Ok(off..end),
            _ => Err(Fault::new(FaultKind::BadSize, len as u64)),
        }
    }

    /// Whether `len` bytes at `addr` are allocated scratch or alloca area (the only memory DIF may
    /// store into besides variables).
    pub(crate) fn scratch_mut(&mut self, addr: u64, len: u64) -> Result<&mut [u8], Fault> {
        let bad = Fault::new(FaultKind::BadAddr, addr);
        if let Some(off) = self.alloca_offset(addr) {
            let len = usize::try_from(len).map_err(|_| Fault::new(FaultKind::BadSize, len))?;
            let r = self.alloca_range(addr, off, len)?;
            return Ok(&mut self.alloca[r]);
        }
        if addr.wrapping_sub(SCRATCH_BASE) >= REGION_SPAN {
            return Err(bad);
        }
        let off = usize::try_from(addr - SCRATCH_BASE).map_err(|_| bad)?;
        let len = usize::try_from(len).map_err(|_| bad)?;
        let end = off.checked_add(len).ok_or(bad)?;
        self.scratch.get_mut(off..end).ok_or(bad)
    }

    /// The `len` bytes at `addr` for a store: allocated scratch or variable storage.
    pub(crate) fn store_mut(&mut self, addr: u64, len: u64) -> Result<&mut [u8], Fault> {
        let bad = Fault::new(FaultKind::BadAddr, addr);
        if let Some((slot, off)) = split_dyn_addr(addr) {
            let Some(Stored::Bytes(b)) = self.dynvars.value_mut(slot) else {
                return Err(bad);
            };
            let len = usize::try_from(len).map_err(|_| bad)?;
            let end = off.checked_add(len).ok_or(bad)?;
            return b.get_mut(off..end).ok_or(bad);
        }
        if addr.wrapping_sub(VAR_BASE) >= VAR_SPAN {
            return self.scratch_mut(addr, len);
        }
        let (local, index, off) = split_var_addr(addr);
        let vars = if local {
            &mut self.locals
        } else {
            &mut self.globals
        };
        let Some(Some(Stored::Bytes(b))) = vars.get_mut(index) else {
            return Err(bad);
        };
        let off = usize::try_from(off).map_err(|_| bad)?;
        let len = usize::try_from(len).map_err(|_| bad)?;
        let end = off.checked_add(len).ok_or(bad)?;
        b.get_mut(off..end).ok_or(bad)
    }

    /// Copies `bytes` plus a NUL into fresh scratch and returns its address.
    pub(crate) fn put_str(&mut self, bytes: &[u8]) -> Result<u64, Fault> {
        let len = bytes.len() as u64 + 1;
        let addr = self.alloc(len)?;
        let dst = self.scratch_mut(addr, len)?;
        dst[..bytes.len()].copy_from_slice(bytes);
        Ok(addr)
    }

    /// Copies `bytes` into fresh scratch and returns its address.
    pub(crate) fn put_bytes(&mut self, bytes: &[u8]) -> Result<u64, Fault> {
        let addr = self.alloc(bytes.len() as u64)?;
        self.scratch_mut(addr, bytes.len() as u64)?
            .copy_from_slice(bytes);
        Ok(addr)
    }

    /// Reads back `len` bytes of a by-reference result (a string-table string, scratch, a copied variable
    /// or kernel memory) after [`run`](Machine::run) returned its address, before the next firing.
    pub fn read_result(
        &self,
        obj: &DifObject,
        mem: &mut dyn Memory,
        addr: u64,
        len: usize,
    ) -> Result<Vec<u8>, Fault> {
        if len > self.opts.scratch_size.max(self.opts.strsize).max(1 << 20) {
            return Err(Fault::new(FaultKind::BadSize, len as u64));
        }
        let mut v = vec![0u8; len];
        self.read(obj, mem, addr, &mut v)?;
        Ok(v)
    }

    /// Like [`read_result`](Machine::read_result), into `dst` (its length is the size read), without
    /// allocating.
    pub fn read_result_into(
        &self,
        obj: &DifObject,
        mem: &mut dyn Memory,
        addr: u64,
        dst: &mut [u8],
    ) -> Result<(), Fault> {
        self.read(obj, mem, addr, dst)
    }

    /// Like [`read_string_result`](Machine::read_string_result), into `out` (cleared first), so a
    /// caller that reuses `out` does not allocate.
    pub fn read_string_into(
        &self,
        obj: &DifObject,
        mem: &mut dyn Memory,
        addr: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), Fault> {
        self.read_str(
            obj,
            mem,
            addr,
            self.opts.strsize.saturating_sub(1),
            false,
            out,
        )
    }

    /// Copies a string result into `dst` without allocating: at most `dst.len()` bytes and at most
    /// `strsize - 1`, stopping at the NUL (not copied). Returns the number of bytes copied. Memory past
    /// what fits in `dst` is not read.
    pub fn copy_string_result(
        &self,
        obj: &DifObject,
        mem: &mut dyn Memory,
        addr: u64,
        dst: &mut [u8],
    ) -> Result<usize, Fault> {
        let max = dst.len().min(self.opts.strsize.saturating_sub(1));
        if addr == 0 {
            return Err(Fault::new(FaultKind::BadAddr, 0));
        }
        if let Some(bytes) = self.vm_tail(obj, addr)? {
            let b = &bytes[..bytes.len().min(max)];
            let n = b.iter().position(|&c| c == 0).unwrap_or(b.len());
            dst[..n].copy_from_slice(&b[..n]);
            return Ok(n);
        }
        let mut n = 0;
        let mut a = addr;
        while n < max {
            // Up to the next 64-byte boundary so a read never crosses a page.
            let want = (64 - (a % 64) as usize).min(max - n);
            let buf = &mut dst[n..n + want];
            if mem.read_kernel(a, buf).is_err() {
                // Byte by byte: the string may end before the unreadable part.
                for i in 0..want {
                    let at = a.wrapping_add(i as u64);
                    mem.read_kernel(at, &mut buf[i..i + 1])
                        .map_err(|k| Fault::new(k, at))?;
                    if buf[i] == 0 {
                        return Ok(n + i);
                    }
                }
            } else if let Some(z) = buf.iter().position(|&c| c == 0) {
                return Ok(n + z);
            }
            n += want;
            a = a.wrapping_add(want as u64);
        }
        Ok(n)
    }

    /// Reads back a string result: its bytes without the NUL, at most `strsize - 1` of them.
    pub fn read_string_result(
        &self,
        obj: &DifObject,
        mem: &mut dyn Memory,
        addr: u64,
    ) -> Result<Vec<u8>, Fault> {
        let mut v = Vec::new();
        self.read_str(
            obj,
            mem,
            addr,
            self.opts.strsize.saturating_sub(1),
            false,
            &mut v,
        )?;
        Ok(v)
    }
}
