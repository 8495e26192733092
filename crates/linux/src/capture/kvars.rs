//! D variables in the kernel, the probe's side (the consumer's is `provider::kvars`):
//! the integer `self->` variables and the associative arrays with integer keys and values
//! (`a[k1, k2]`, `self->a[k]`) that only clauses running whole at the probe use live in one BPF
//! hash map, DTrace's dynamic variable space, so `self->ts = timestamp` at one probe and
//! `timestamp - self->ts` at another cost no record at either.
//!
//! A key is [`key_size`] bytes, built in a per-CPU scratch value: the thread id (4 bytes, 0
//! for a global array), the variable's id with its kind ([`THREAD_ARRAY`], [`GLOBAL_ARRAY`];
//! nothing for a thread-local scalar), then the tuple's elements: an integer in 8 bytes, a string
//! (a constant or `execname`) in `strsize` bytes rounded up to 8, zero-padded, so two keys are
//! equal when their strings are equal up to the NUL, as DTrace compares them; the key is
//! zero-padded to the map's key size (the largest tuple of any kernel array).
//!
//! DTrace's rules hold: a variable never stored, or stored zero, reads as zero; storing zero
//! frees its entry (a delete); a store that finds the map full (its size comes from
//! `dynvarsize`) is lost, counted in a per-CPU drop counter, which dtrace reports as dynamic
//! variable drops, and ends its clause (as in the interpreter): it sets the stack flag
//! `kagg::DVAR_DROPPED`, which the clause's code tests after the store. The translator
//! (`dtrace_ebpf::translate`) asks for these loads and stores through the `ProbeContext`.
//!
//! Integer global scalars placed in the kernel are the 8-byte words of the one value of an array
//! map, read and written in place (no helper call): zero until stored, never freed. Integer
//! clause-locals (`this->`) are stack slots of the probe's program, zeroed when a firing starts,
//! so they live for the firing and are shared by its kernel clauses, as the framework's are.
//!
//! String-valued variables (`spec::StringVars`): thread-locals and array elements of strings
//! live in a second hash map, keyed as the first, whose values are the strings' `width` bytes
//! (NUL-terminated within `strsize`, zero-padded, as the translator's string scratch holds
//! them), so a store is one map update straight from the scratch and a load one copy into it;
//! no entry is NULL (never stored, or stored 0 and freed). Global string scalars follow the
//! integer globals in the globals' value, each a flag word (set: NULL) and its string: zero
//! until stored, the empty string, as the interpreter's globals. String clause-locals
//! (`this->s`) are a flag each in a clause-local stack slot (after the integers'; zeroed when a
//! firing starts: the empty string until stored in the firing, as in the interpreter; or NULL,
//! or set) and their strings in the one per-CPU value of a map of their own.
//!
//! Struct, union and array variables (`spec::RefVars`): thread-locals, global scalars and
//! array elements live in a third hash map, keyed as the first (a global scalar by its id with
//! [`GLOBAL_REF`]), whose values are the largest such variable's bytes; the translated code
//! reaches a member through a pointer into the value ([`emit_ref_var`]). A load that finds
//! none creates it zero-filled (from an array map's zero value), as the interpreter's loads
//! do; a creation that finds the map full is a drop, as a store's. Nothing frees them. Struct
//! clause-locals are in the one per-CPU value of a map of their own, each with a flag in a
//! clause-local stack slot (after the strings'), zeroed when a firing starts: the firing's
//! first use zeroes its storage, so it lives for the firing, shared by the probe's kernel
//! clauses.
//!
//! A key's string element may be a string in the translator's scratch (`a[copyinstr(arg1)]`,
//! `a[self->p]`, [`KeyPart::Scratch`]): its first key-wide bytes are copied, zero-padded there
//! after the NUL, so keys compare as DTrace compares strings.

use super::spec::KernelVars;
use crate::bpf::insn::{helper, op, update_flag, Asm, Label, Size, R0, R1, R10, R2, R3, R4, R9};
use dtrace_dif::vm::KeyElem;
use dtrace_ebpf::translate::{string_key_width, Array, KeyPart, StringVar, COMM_LEN};

/// Bytes of a value: the integer.
pub const VALUE_SIZE: u32 = 8;
/// The stack slot of the scratch's index and of the drop counter's.
pub(crate) const KEY: i16 = super::kagg::VARS_KEY;
/// Marks the variable id of a thread-local array in a key.
pub const THREAD_ARRAY: u32 = 1 << 16;
/// Marks the variable id of a global array in a key.
pub const GLOBAL_ARRAY: u32 = 2 << 16;

/// Bytes of a key whose tuples take at most `tuple` bytes.
pub fn key_size(tuple: usize) -> u32 {
    8 + tuple.min(MAX_KEY_SIZE as usize) as u32
}

/// The largest key of a BPF hash map (the kernel's limit).
pub const MAX_KEY_SIZE: u32 = 512;

/// Builds the key of variable `tag` (its id and kind) of the current thread (`thread`) or of
/// none, with `tuple`, in the per-CPU scratch, and leaves its address in r9; jumps to `none`
/// with r0 zero if the scratch is missing (it never is). Uses r0-r5.
fn emit_key(
    a: &mut Asm,
    kv: &KernelVars,
    thread: bool,
    tag: u32,
    tuple: &[KeyPart],
    none: Label,
) -> Result<(), String> {
    let width = string_key_width(kv.strsize as usize);
    let bytes: usize = tuple
        .iter()
        .map(|p| match p {
            KeyPart::Int(_) => 8,
            KeyPart::Str(_) | KeyPart::Execname(_) | KeyPart::Scratch(_) => width,
        })
        .sum();
    if 8 + bytes > kv.key_size as usize {
        return Err(format!(
            "a key of {bytes} bytes is larger than the kernel's keys"
        ));
    }
    a.store_imm(Size::DW, R10, KEY, 0);
    a.ld_map_fd(R1, kv.keys).frame_addr(R2, i32::from(KEY));
    a.call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, none);
    a.mov(R9, R0);
    if thread {
        // The thread's id, read once a firing (see [`TID`]).
        let have = a.label();
        a.load(Size::DW, R0, R10, TID);
        a.jmp_imm(op::JNE, R0, 0, have);
        a.call(helper::GET_CURRENT_PID_TGID);
        a.store(Size::DW, R10, TID, R0);
        a.bind(have);
        a.store(Size::W, R9, 0, R0);
    } else {
        a.store_imm(Size::W, R9, 0, 0);
    }
    a.store_imm(Size::W, R9, 4, tag as i32);
    let mut off = 8i16;
    for part in tuple {
        match part {
            KeyPart::Int(at) => {
                a.load(Size::DW, R1, R10, *at).store(Size::DW, R9, off, R1);
                off += 8;
            }
            KeyPart::Str(b) => {
                if b.len() > kv.strsize as usize {
                    return Err("a string key longer than strsize".into());
                }
                let mut padded = b.clone();
                padded.resize(width, 0);
                for chunk in padded.chunks(8) {
                    let mut word = [0u8; 8];
                    word.copy_from_slice(chunk);
                    match u64::from_le_bytes(word) {
                        0 => a.store_imm(Size::DW, R9, off, 0),
                        w => a.ld_imm64(R1, w).store(Size::DW, R9, off, R1),
                    };
                    off += 8;
                }
            }
            KeyPart::Execname(at) => {
                // A key keeps `strsize` characters of a string, as the interpreter's.
                let n = COMM_LEN.min(kv.strsize as usize) as i16;
                for i in (0..width as i16).step_by(8) {
                    a.store_imm(Size::DW, R9, off + i, 0);
                }
                // Whole words where the name is kept whole (the probe's copy is zero after its
                // NUL), bytes where strsize cuts it.
                let (step, size) = match n as usize == COMM_LEN {
                    true => (8, Size::DW),
                    false => (1, Size::B),
                };
                for i in (0..n).step_by(step) {
                    a.load(size, R1, R10, at + i).store(size, R9, off + i, R1);
                }
                off += width as i16;
            }
            KeyPart::Scratch(at) => {
                // Zero-padded after its NUL in the scratch: its first `width` bytes are the
                // key's (`strsize` characters at most, as the interpreter keeps).
                a.load(Size::DW, R3, R10, *at);
                for i in (0..width as i16).step_by(8) {
                    a.load(Size::DW, R1, R3, i).store(Size::DW, R9, off + i, R1);
                }
                off += width as i16;
            }
        }
    }
    while (off as u32) < kv.key_size {
        a.store_imm(Size::DW, R9, off, 0);
        off += 8;
    }
    Ok(())
}

/// The key [`emit_key`] builds for element `elems` of global array `id` (dtrace's tuple: its
/// strings without their NUL), in a map of `key_size`-byte keys with strings of `strsize`
/// characters (D's), for dtrace to write the kernel's copy of an element it stored (`BEGIN`'s).
/// A string is cut to `strsize` characters, as a key keeps it; `None` when the key does not
/// fit.
pub fn global_array_key(
    key_size: u32,
    strsize: u32,
    id: u32,
    elems: &[KeyElem],
) -> Option<Vec<u8>> {
    let width = string_key_width(strsize as usize);
    let mut key = Vec::with_capacity(key_size as usize);
    key.extend_from_slice(&0u32.to_ne_bytes());
    key.extend_from_slice(&(id | GLOBAL_ARRAY).to_ne_bytes());
    for e in elems {
        match e {
            KeyElem::Int(v) => key.extend_from_slice(&v.to_ne_bytes()),
            KeyElem::Bytes(b) => {
                let s = b.split(|&c| c == 0).next().unwrap_or_default();
                let s = &s[..s.len().min(strsize as usize)];
                let at = key.len();
                key.extend_from_slice(s);
                key.resize(at + width, 0);
            }
        }
    }
    (key.len() <= key_size as usize).then(|| {
        key.resize(key_size as usize, 0);
        key
    })
}

/// The tuple of the kernel's key `key` of global array `id`, whose elements are strings where
/// `shape` says (see [`dtrace_ebpf::translate::array_key_strings`]), with strings of
/// `strsize` characters (D's): dtrace's tuple, for `END` to read what the kernel stored.
/// `None` when the key is another variable's.
pub fn global_array_elems(
    key: &[u8],
    strsize: u32,
    id: u32,
    shape: &[bool],
) -> Option<Vec<KeyElem>> {
    let width = string_key_width(strsize as usize);
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(key.get(at..at + 4)?.try_into().ok()?))
    };
    if word(0)? != 0 || word(4)? != id | GLOBAL_ARRAY {
        return None;
    }
    let mut at = 8;
    let mut elems = Vec::with_capacity(shape.len());
    for &string in shape {
        if string {
            let b = key.get(at..at + width)?;
            let s = b.split(|&c| c == 0).next().unwrap_or_default();
            elems.push(KeyElem::Bytes(s[..s.len().min(strsize as usize)].into()));
            at += width;
        } else {
            let w = key.get(at..at + 8)?;
            elems.push(KeyElem::Int(u64::from_ne_bytes(w.try_into().ok()?)));
            at += 8;
        }
    }
    Some(elems)
}

/// r0 = the value under the key [`emit_key`] builds (0 when there is none).
fn emit_lookup(
    a: &mut Asm,
    kv: &KernelVars,
    thread: bool,
    tag: u32,
    tuple: &[KeyPart],
) -> Result<(), String> {
    let done = a.label();
    emit_key(a, kv, thread, tag, tuple, done)?;
    a.ld_map_fd(R1, kv.map).mov(R2, R9);
    a.call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, done);
    a.load(Size::DW, R0, R0, 0);
    a.bind(done);
    Ok(())
}

/// Stores the integer at `fp + value_at` under the key [`emit_key`] builds: zero deletes, a
/// full map counts a drop and sets the clause's drop flag.
fn emit_update(
    a: &mut Asm,
    kv: &KernelVars,
    thread: bool,
    tag: u32,
    tuple: &[KeyPart],
    value_at: i16,
) -> Result<(), String> {
    let (free, done) = (a.label(), a.label());
    emit_key(a, kv, thread, tag, tuple, done)?;
    a.load(Size::DW, R1, R10, value_at);
    a.jmp_imm(op::JEQ, R1, 0, free);
    a.ld_map_fd(R1, kv.map)
        .mov(R2, R9)
        .frame_addr(R3, i32::from(value_at))
        .mov_imm(R4, update_flag::ANY);
    a.call(helper::MAP_UPDATE_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, done);
    // The map is full: a dynamic variable drop, which ends the clause.
    a.store_imm(Size::DW, R10, super::kagg::DVAR_DROPPED, 1);
    super::kagg::emit_count_drop(a, kv.drops, KEY, done);
    a.bind(free);
    a.ld_map_fd(R1, kv.map).mov(R2, R9);
    a.call(helper::MAP_DELETE_ELEM);
    a.bind(done);
    Ok(())
}

/// Jumps to `abandon` when a store of this firing's clause was dropped (see [`emit_update`]).
pub fn emit_dropped(a: &mut Asm, abandon: Label) {
    a.load(Size::DW, R1, R10, super::kagg::DVAR_DROPPED);
    a.jmp_imm(op::JNE, R1, 0, abandon);
}

/// The tag of `array` in a key.
fn array_tag(array: Array) -> u32 {
    array.var
        | if array.thread {
            THREAD_ARRAY
        } else {
            GLOBAL_ARRAY
        }
}

/// r0 = element `tuple` of `array` (0 when there is none).
pub fn emit_array_load(
    a: &mut Asm,
    kv: &KernelVars,
    array: Array,
    tuple: &[KeyPart],
) -> Result<(), String> {
    emit_lookup(a, kv, array.thread, array_tag(array), tuple)
}

/// Stores the integer at `fp + value_at` in element `tuple` of `array` (zero deletes it).
pub fn emit_array_store(
    a: &mut Asm,
    kv: &KernelVars,
    array: Array,
    tuple: &[KeyPart],
    value_at: i16,
) -> Result<(), String> {
    emit_update(a, kv, array.thread, array_tag(array), tuple, value_at)
}

/// r0 = global scalar number `index` of the globals' value.
pub fn emit_global_load(a: &mut Asm, kv: &KernelVars, index: usize) {
    a.ld_map_value(R1, kv.globals, 0);
    a.load(Size::DW, R0, R1, global_offset(index));
}

/// Stores the integer at `fp + value_at` in global scalar number `index` (a zero too: a global
/// is never freed).
pub fn emit_global_store(a: &mut Asm, kv: &KernelVars, index: usize, value_at: i16) {
    a.ld_map_value(R1, kv.globals, 0);
    a.load(Size::DW, R2, R10, value_at);
    a.store(Size::DW, R1, global_offset(index), R2);
}

/// The offset of global number `index` in the globals' value (planning bounds the number).
pub(crate) fn global_offset(index: usize) -> i16 {
    i16::try_from(index * 8).unwrap_or(i16::MAX & !7)
}

/// Most global scalars kept in the kernel.
pub const MAX_GLOBALS: usize = 512;

/// Most clause-locals kept in the kernel (each a stack slot, the first at [`LOCALS`], around
/// `kagg::HANDOVER`).
pub const MAX_LOCALS: usize = 24;

/// The stack slot of clause-local number `index` (below `MAX_LOCALS`).
fn local_slot(index: usize) -> i16 {
    let at = LOCALS - 8 * index.min(MAX_LOCALS - 1) as i16;
    // Around the handover flag.
    if at <= super::kagg::HANDOVER {
        at - 8
    } else {
        at
    }
}

/// Zeroes the clause-locals' slots of `kv` (the integers', then the string flags'): a firing
/// starts with none stored (and the verifier wants every slot written before it is read); and
/// the thread's id and the thread-locals kept by the firing ([`TID`], [`cache_slots`]): none
/// read yet.
pub fn emit_zero_locals(a: &mut Asm, kv: &KernelVars) {
    let n = kv.local_ids.len() + kv.strings.local_ids.len() + kv.refs.locals_of.len();
    for i in 0..n.min(MAX_LOCALS) {
        a.store_imm(Size::DW, R10, local_slot(i), 0);
    }
    a.store_imm(Size::DW, R10, TID, 0);
    for &id in kv.ids.iter().take(CACHED_THREAD_VARS) {
        if let Some((value, valid)) = cache_slots(kv, id) {
            a.store_imm(Size::DW, R10, value, 0)
                .store_imm(Size::DW, R10, valid, 0);
        }
    }
}

/// Makes the thread id in r0 the firing's (after [`emit_zero_locals`]): its thread-locals are
/// that thread's, where the probe's record speaks for another thread than the running one
/// (`on-cpu`'s incoming thread, whose clauses see it as `curthread`, as DTrace's do). Bit 32 is
/// set, so the slot never reads as "not read yet" (the idle thread's id is 0). Uses r1, r2.
pub fn emit_record_thread(a: &mut Asm) {
    a.mov(R1, R0);
    a.ld_imm64(R2, 1 << 32);
    a.alu(op::OR, R1, R2).store(Size::DW, R10, TID, R1);
}

/// The stack slot of the firing's `bpf_get_current_pid_tgid()` (zero until a key of a
/// thread-local needs it: one helper call a firing, not one per load and store).
pub(crate) const TID: i16 = super::kagg::ALLOCA_TOP - 8;

/// The first clause-local's slot (the next ones' below it), below the thread's id and the
/// thread-locals' cache slots ([`cache_slots`]).
const LOCALS: i16 = TID - 16 * CACHED_THREAD_VARS as i16 - 8;

/// How many of a probe's integer thread-locals (the first of `KernelVars::ids`) a firing
/// keeps once it loaded or stored one ([`cache_slots`]).
pub const CACHED_THREAD_VARS: usize = 2;

/// The stack slots of thread-local `var`'s value as this firing last loaded or stored it and
/// of the flag saying it did, when it is one the firing keeps ([`CACHED_THREAD_VARS`]): a
/// thread-local is the thread's own, and every load and store of it in the kernel is the probe's
/// code, so a second load in a firing (`/self->ts/ { ... timestamp - self->ts ... }`) needs no
/// hash lookup.
fn cache_slots(kv: &KernelVars, var: u32) -> Option<(i16, i16)> {
    let i = kv.ids.iter().position(|&id| id == var)?;
    (i < CACHED_THREAD_VARS).then(|| {
        let at = TID - 16 * i as i16;
        (at - 8, at - 16)
    })
}

// The lowest cache slot is on the eBPF stack.
const _: () = assert!(TID - 16 * CACHED_THREAD_VARS as i16 >= -512);

/// The stack slots below the thread-locals' cache of `kv` ([`cache_slots`]) that no variable
/// of the firing takes, above the clause-locals' slots: the first's offset and how many (the next
/// ones below it), or `None` when there are none (a syscall entry keeping its firing for the
/// return keeps the arguments it pre-reads there: `kagg::emit_aggs`).
pub fn free_slots(kv: &KernelVars) -> Option<(i16, usize)> {
    let cached = kv.ids.len().min(CACHED_THREAD_VARS) as i16;
    let first = TID - 16 * cached - 8;
    let n = (first - LOCALS) / 8;
    (n > 0).then_some((first, n as usize))
}

/// Most clause-local strings kept in the kernel (their flags are clause-local slots too).
pub const MAX_LOCAL_STRINGS: usize = 8;

/// A clause-local string's flag (in its stack slot): not stored in this firing (the empty
/// string, as the interpreter reads it), NULL, or its string is in the per-CPU value.
const LOCAL_UNSET: i32 = 0;
const LOCAL_NULL: i32 = 1;
const LOCAL_SET: i32 = 2;

/// r0 = clause-local number `index` (clause-locals live for one firing, shared by the clauses
/// of the probe that run in the kernel).
pub fn emit_local_load(a: &mut Asm, index: usize) {
    a.load(Size::DW, R0, R10, local_slot(index));
}

/// Stores the integer at `fp + value_at` in clause-local number `index`.
pub fn emit_local_store(a: &mut Asm, index: usize, value_at: i16) {
    a.load(Size::DW, R1, R10, value_at);
    a.store(Size::DW, R10, local_slot(index), R1);
}

// The lowest clause-local's slot is on the eBPF stack.
const _: () = assert!(
    LOCALS - 8 * MAX_LOCALS as i16 >= -512
        && LOCALS > super::kagg::HANDOVER
        && LOCALS - 8 * (MAX_LOCALS as i16 - 1) < super::kagg::HANDOVER
);

/// r0 = the current thread's `var` (0 when it has none); a second load in a firing takes the
/// value the first found ([`cache_slots`]).
pub fn emit_load(a: &mut Asm, kv: &KernelVars, var: u32) -> Result<(), String> {
    let Some((value, valid)) = cache_slots(kv, var) else {
        return emit_lookup(a, kv, true, var, &[]);
    };
    let (miss, done) = (a.label(), a.label());
    a.load(Size::DW, R0, R10, valid);
    a.jmp_imm(op::JEQ, R0, 0, miss);
    a.load(Size::DW, R0, R10, value);
    a.ja(done);
    a.bind(miss);
    emit_lookup(a, kv, true, var, &[])?;
    a.store(Size::DW, R10, value, R0)
        .store_imm(Size::DW, R10, valid, 1);
    a.bind(done);
    Ok(())
}

/// Stores the integer at `fp + value_at` in the current thread's `var`: zero frees it, a full
/// map counts a drop. The firing keeps what it stored ([`cache_slots`]), unless the store was
/// dropped (the variable is then as it was: the next load looks it up).
pub fn emit_store(a: &mut Asm, kv: &KernelVars, var: u32, value_at: i16) -> Result<(), String> {
    emit_update(a, kv, true, var, &[], value_at)?;
    if let Some((value, valid)) = cache_slots(kv, var) {
        let (dropped, done) = (a.label(), a.label());
        a.load(Size::DW, R1, R10, super::kagg::DVAR_DROPPED);
        a.jmp_imm(op::JNE, R1, 0, dropped);
        a.load(Size::DW, R1, R10, value_at)
            .store(Size::DW, R10, value, R1)
            .store_imm(Size::DW, R10, valid, 1);
        a.ja(done);
        a.bind(dropped);
        a.store_imm(Size::DW, R10, valid, 0);
        a.bind(done);
    }
    Ok(())
}

/// Most global string scalars kept in the kernel (their flags and strings follow the integers
/// in the globals' value, whose offsets the instructions hold in 16 bits).
pub const MAX_STRING_GLOBALS: usize = 64;

/// Bytes of the globals' value: the integers' words (at least one), then each string global's
/// flag word and `width` bytes.
pub fn globals_size(int_globals: usize, string_globals: usize, width: u32) -> u32 {
    let ints = 8 * int_globals.clamp(1, MAX_GLOBALS);
    let strings = string_globals.min(MAX_STRING_GLOBALS) * (8 + width as usize);
    (ints + strings) as u32
}

/// The offset of string global `index`'s flag word (its string follows) in the value of
/// `int_globals` integer globals and strings `width` bytes wide.
pub fn string_global_at(int_globals: usize, index: usize, width: u32) -> usize {
    globals_size(int_globals, index, width) as usize
}

/// The offset of string global `index`'s flag word in the globals' value (its string follows).
fn string_global_offset(kv: &KernelVars, index: usize) -> Result<i16, String> {
    let at = string_global_at(kv.global_ids.len(), index, kv.strings.width);
    i16::try_from(at + 8 + kv.strings.width as usize)
        .ok()
        .filter(|_| index < MAX_STRING_GLOBALS)
        .map(|_| at as i16)
        .ok_or_else(|| format!("more than {MAX_STRING_GLOBALS} string globals"))
}

/// Where string variable `var` lives: a dynamic variable's key (thread, tag, tuple), or a
/// global's offset in the globals' value.
enum StringPlace<'k> {
    Dynamic(bool, u32, &'k [KeyPart]),
    Global(i16),
    /// A clause-local: its flag's stack slot and its string's offset in the per-CPU value.
    Local(i16, i16),
}

fn string_place<'k>(kv: &KernelVars, var: StringVar<'k>) -> Result<StringPlace<'k>, String> {
    let s = &kv.strings;
    Ok(match var {
        StringVar::Thread(id) if s.ids.contains(&id) => StringPlace::Dynamic(true, id, &[]),
        StringVar::Array(array, key)
            if (array.thread && s.thread_arrays.contains(&array.var))
                || (!array.thread && s.global_arrays.contains(&array.var)) =>
        {
            StringPlace::Dynamic(array.thread, array_tag(array), key)
        }
        StringVar::Global(id) => match s.global_ids.iter().position(|&g| g == id) {
            Some(i) => StringPlace::Global(string_global_offset(kv, i)?),
            None => return Err("this global lives in dtrace".into()),
        },
        StringVar::Local(id) => match s.local_ids.iter().position(|&l| l == id) {
            Some(j) if j < MAX_LOCAL_STRINGS && kv.local_ids.len() + j < MAX_LOCALS => {
                StringPlace::Local(
                    local_slot(kv.local_ids.len() + j),
                    (j * s.width as usize) as i16,
                )
            }
            _ => return Err("this clause-local lives in dtrace".into()),
        },
        StringVar::Thread(_) => return Err("this thread-local lives in dtrace".into()),
        StringVar::Array(..) => return Err("this associative array lives in dtrace".into()),
    })
}

/// The id of the clause-local string that holds the firing's `strtok()` state (no compiler id is
/// this high): its string is the copy being tokenized, its flag slot the position plus one (0:
/// none saved), zeroed when the firing starts with the other clause-locals, so the state lives
/// for the firing and is shared by the probe's kernel clauses, as the interpreter's.
pub const STRTOK_STATE: u32 = u32::MAX;

/// Why a `strtok()` call is not translated at a probe whose firing's state lives in dtrace: the
/// state is one per firing, shared by every clause calling `strtok()` there, and dtrace's
/// interpreter cannot continue what the kernel began (nor the kernel, which runs its clauses
/// first, what dtrace's would), so those clauses run whole in the kernel or all in dtrace.
pub const STRTOK_IN_DTRACE: &str = "strtok()'s state lives in dtrace at this probe (one per \
    firing, shared by every clause calling strtok() there: they run whole in the kernel or all \
    in dtrace)";

/// r0 = the address of this CPU's copy of the firing's `strtok()` string (0 when the value is
/// missing: it never is); returns the stack slot of its position (see [`STRTOK_STATE`] and
/// `dtrace_ebpf::translate::ProbeContext::emit_strtok_state`). Uses r0-r5.
pub fn emit_strtok_state(a: &mut Asm, kv: &KernelVars) -> Result<i16, String> {
    match string_place(kv, StringVar::Local(STRTOK_STATE)) {
        Ok(StringPlace::Local(position, off)) => {
            let none = a.label();
            emit_local_strings(a, kv, none);
            a.alu_imm(op::ADD, R0, i32::from(off));
            a.bind(none);
            Ok(position)
        }
        _ => Err(STRTOK_IN_DTRACE.into()),
    }
}

/// Copies `width` bytes from `src + from` to `dst + 0`, word by word; uses r2.
fn emit_copy_words(
    a: &mut Asm,
    dst: crate::bpf::insn::Reg,
    src: crate::bpf::insn::Reg,
    from: i16,
    width: u32,
) {
    for w in (0..width as i16).step_by(8) {
        a.load(Size::DW, R2, src, from + w)
            .store(Size::DW, dst, w, R2);
    }
}

/// Copies string variable `var` to the scratch slot whose address is at `fp + dst_at` and
/// leaves 1 in r0, or leaves 0 in r0 when it is NULL (see
/// `dtrace_ebpf::translate::ProbeContext::emit_string_load`).
pub fn emit_string_load(
    a: &mut Asm,
    kv: &KernelVars,
    var: StringVar<'_>,
    dst_at: i16,
) -> Result<(), String> {
    let width = kv.strings.width;
    let done = a.label();
    match string_place(kv, var)? {
        StringPlace::Dynamic(thread, tag, tuple) => {
            emit_key(a, kv, thread, tag, tuple, done)?;
            a.ld_map_fd(R1, kv.strings.map).mov(R2, R9);
            a.call(helper::MAP_LOOKUP_ELEM);
            a.jmp_imm(op::JEQ, R0, 0, done);
            a.load(Size::DW, R1, R10, dst_at);
            emit_copy_words(a, R1, R0, 0, width);
        }
        StringPlace::Global(off) => {
            a.ld_map_value(R1, kv.globals, 0);
            a.load(Size::DW, R2, R1, off);
            a.mov_imm(R0, 0);
            a.jmp_imm(op::JNE, R2, 0, done);
            a.load(Size::DW, R3, R10, dst_at);
            emit_copy_words(a, R3, R1, off + 8, width);
        }
        StringPlace::Local(flag, off) => {
            let (unset, set) = (a.label(), a.label());
            a.load(Size::DW, R1, R10, flag);
            a.mov_imm(R0, 0);
            a.jmp_imm(op::JEQ, R1, LOCAL_NULL, done);
            a.jmp_imm(op::JEQ, R1, LOCAL_UNSET, unset);
            emit_local_strings(a, kv, unset);
            a.load(Size::DW, R3, R10, dst_at);
            emit_copy_words(a, R3, R0, off, width);
            a.ja(set);
            a.bind(unset);
            a.load(Size::DW, R3, R10, dst_at);
            for w in (0..width as i16).step_by(8) {
                a.store_imm(Size::DW, R3, w, 0);
            }
            a.bind(set);
        }
    }
    a.mov_imm(R0, 1);
    a.bind(done);
    Ok(())
}

/// r0 = this CPU's value of the clause-local strings; jumps to `none` if it is missing (it
/// never is). Uses r0-r5.
fn emit_local_strings(a: &mut Asm, kv: &KernelVars, none: Label) {
    a.store_imm(Size::DW, R10, KEY, 0);
    a.ld_map_fd(R1, kv.strings.locals)
        .frame_addr(R2, i32::from(KEY));
    a.call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, none);
}

/// Stores in string variable `var` the string whose scratch slot's address is at
/// `fp + src_at`, or NULL when it is 0: a dynamic variable is freed, a global reads NULL; a
/// dynamic variable's store that finds the map full is dropped as an integer's (see
/// [`emit_update`]).
pub fn emit_string_store(
    a: &mut Asm,
    kv: &KernelVars,
    var: StringVar<'_>,
    src_at: i16,
) -> Result<(), String> {
    let (null, done) = (a.label(), a.label());
    match string_place(kv, var)? {
        StringPlace::Dynamic(thread, tag, tuple) => {
            emit_key(a, kv, thread, tag, tuple, done)?;
            a.load(Size::DW, R3, R10, src_at);
            a.jmp_imm(op::JEQ, R3, 0, null);
            a.ld_map_fd(R1, kv.strings.map)
                .mov(R2, R9)
                .mov_imm(R4, update_flag::ANY);
            a.call(helper::MAP_UPDATE_ELEM);
            a.jmp_imm(op::JEQ, R0, 0, done);
            // The map is full: a dynamic variable drop, which ends the clause.
            a.store_imm(Size::DW, R10, super::kagg::DVAR_DROPPED, 1);
            super::kagg::emit_count_drop(a, kv.drops, KEY, done);
            a.bind(null);
            a.ld_map_fd(R1, kv.strings.map).mov(R2, R9);
            a.call(helper::MAP_DELETE_ELEM);
        }
        StringPlace::Global(off) => {
            a.ld_map_value(R1, kv.globals, 0);
            a.load(Size::DW, R3, R10, src_at);
            a.jmp_imm(op::JEQ, R3, 0, null);
            a.store_imm(Size::DW, R1, off, 0);
            a.alu_imm(op::ADD, R1, i32::from(off) + 8);
            emit_copy_words(a, R1, R3, 0, kv.strings.width);
            a.ja(done);
            a.bind(null);
            a.store_imm(Size::DW, R1, off, 1);
        }
        StringPlace::Local(flag, off) => {
            a.load(Size::DW, R3, R10, src_at);
            a.jmp_imm(op::JEQ, R3, 0, null);
            emit_local_strings(a, kv, done);
            a.alu_imm(op::ADD, R0, i32::from(off));
            a.load(Size::DW, R3, R10, src_at);
            emit_copy_words(a, R0, R3, 0, kv.strings.width);
            a.store_imm(Size::DW, R10, flag, LOCAL_SET);
            a.ja(done);
            a.bind(null);
            a.store_imm(Size::DW, R10, flag, LOCAL_NULL);
        }
    }
    a.bind(done);
    Ok(())
}

/// Marks the variable id of a struct global scalar in a key of the struct variables' map.
pub const GLOBAL_REF: u32 = 3 << 16;

/// `-EEXIST`: another CPU created the element first.
const EEXIST: i32 = -17;

/// r0 = the address of struct variable `var`'s storage in the struct variables' value (see
/// `spec::RefVars`): looked up, or created from the zeros when there is none; 0 when the
/// map is full, a dynamic variable drop counted as a store's (the clause's drop flag set).
/// Uses r0-r5 and r9.
pub fn emit_ref_var(
    a: &mut Asm,
    kv: &KernelVars,
    var: StringVar<'_>,
    size: u32,
) -> Result<(), String> {
    let r = &kv.refs;
    if size > r.size {
        return Err(format!(
            "a struct of {size} bytes, larger than the kernel's"
        ));
    }
    if let StringVar::Local(id) = var {
        return emit_ref_local(a, kv, id, size);
    }
    let (thread, tag, tuple) = match var {
        StringVar::Thread(id) if r.ids.contains(&id) => (true, id, &[][..]),
        StringVar::Global(id) if r.global_ids.contains(&id) => (false, id | GLOBAL_REF, &[][..]),
        StringVar::Array(array, key)
            if (array.thread && r.thread_arrays.contains(&array.var))
                || (!array.thread && r.global_arrays.contains(&array.var)) =>
        {
            (array.thread, array_tag(array), key)
        }
        _ => return Err("this struct variable lives in dtrace".into()),
    };
    let (created, full, done) = (a.label(), a.label(), a.label());
    // (No key scratch, which never happens, is taken as a full map: the clause ends.)
    emit_key(a, kv, thread, tag, tuple, full)?;
    a.ld_map_fd(R1, r.map).mov(R2, R9);
    a.call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JNE, R0, 0, done);
    a.ld_map_fd(R1, r.map).mov(R2, R9);
    a.ld_map_value(R3, r.zeros, 0);
    a.mov_imm(R4, update_flag::NOEXIST);
    a.call(helper::MAP_UPDATE_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, created);
    a.jmp_imm(op::JNE, R0, EEXIST, full);
    a.bind(created);
    a.ld_map_fd(R1, r.map).mov(R2, R9);
    a.call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JNE, R0, 0, done);
    // The map is full (or the element went between the two): a dynamic variable drop, which
    // ends the clause.
    a.bind(full);
    a.store_imm(Size::DW, R10, super::kagg::DVAR_DROPPED, 1);
    let counted = a.label();
    super::kagg::emit_count_drop(a, kv.drops, KEY, counted);
    a.bind(counted);
    a.mov_imm(R0, 0);
    a.bind(done);
    Ok(())
}

/// Bytes of the per-CPU value of the struct clause-locals of `refs`: each one's storage,
/// 8-aligned.
pub fn ref_locals_size(refs: &crate::capture::spec::RefVars) -> u32 {
    refs.locals_of
        .iter()
        .map(|&(_, n)| n.next_multiple_of(8))
        .sum()
}

/// r0 = the address of struct clause-local `id`'s storage in this CPU's value of the
/// clause-locals, zeroed by the firing's first use (its flag slot says whether it was used);
/// 0 when the value is missing (it never is), as a drop. Uses r0-r5.
fn emit_ref_local(a: &mut Asm, kv: &KernelVars, id: u32, size: u32) -> Result<(), String> {
    let r = &kv.refs;
    let k = r
        .locals_of
        .iter()
        .position(|&(l, _)| l == id)
        .ok_or("this clause-local lives in dtrace")?;
    let slot = kv.local_ids.len() + kv.strings.local_ids.len() + k;
    if slot >= MAX_LOCALS {
        return Err(format!("more than {MAX_LOCALS} clause-locals"));
    }
    let n = r.locals_of[k].1.next_multiple_of(8);
    if size > n {
        return Err(format!(
            "a struct of {size} bytes, larger than the kernel's"
        ));
    }
    let off: u32 = r.locals_of[..k]
        .iter()
        .map(|&(_, n)| n.next_multiple_of(8))
        .sum();
    let off = i32::try_from(off).map_err(|_| "clause-locals too large".to_string())?;
    let (used, missing, done) = (a.label(), a.label(), a.label());
    a.store_imm(Size::DW, R10, KEY, 0);
    a.ld_map_fd(R1, r.locals).frame_addr(R2, i32::from(KEY));
    a.call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, missing);
    a.alu_imm(op::ADD, R0, off);
    a.load(Size::DW, R1, R10, local_slot(slot));
    a.jmp_imm(op::JNE, R1, 0, used);
    for w in (0..n as i16).step_by(8) {
        a.store_imm(Size::DW, R0, w, 0);
    }
    a.store_imm(Size::DW, R10, local_slot(slot), 1);
    a.ja(used);
    a.bind(missing);
    a.store_imm(Size::DW, R10, super::kagg::DVAR_DROPPED, 1);
    a.mov_imm(R0, 0);
    a.ja(done);
    a.bind(used);
    a.bind(done);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_global_array_key_is_built_and_read_back_as_the_probe_builds_it() {
        let elems = vec![
            KeyElem::Bytes(b"opener".to_vec().into()),
            KeyElem::Int(7),
            KeyElem::Bytes(b"0123456789".to_vec().into()),
        ];
        // Strings of 8 characters (D's strsize): 8-byte elements, the long one cut.
        let key = global_array_key(48, 8, 0x501, &elems).expect("fits");
        assert_eq!(key.len(), 48);
        assert_eq!(&key[..4], &0u32.to_ne_bytes());
        assert_eq!(&key[4..8], &(0x501 | GLOBAL_ARRAY).to_ne_bytes());
        assert_eq!(&key[8..16], b"opener\0\0");
        assert_eq!(&key[16..24], &7u64.to_ne_bytes());
        assert_eq!(&key[24..32], b"01234567");
        assert!(key[32..].iter().all(|&b| b == 0));
        let back = global_array_elems(&key, 8, 0x501, &[true, false, true]).expect("ours");
        assert_eq!(back[..2], elems[..2]);
        assert_eq!(back[2], KeyElem::Bytes(b"01234567".to_vec().into()));
        // Another variable's key, or a thread's, is not this array's.
        assert_eq!(
            global_array_elems(&key, 8, 0x502, &[true, false, true]),
            None
        );
        let mut thread = key.clone();
        thread[0] = 1;
        assert_eq!(
            global_array_elems(&thread, 8, 0x501, &[true, false, true]),
            None
        );
        // A tuple larger than the keys does not fit.
        assert_eq!(global_array_key(24, 8, 0x501, &elems), None);
    }
    use crate::capture::spec::StringVars;

    fn kv() -> KernelVars {
        KernelVars {
            map: 3,
            drops: 4,
            ids: vec![0x500],
            globals: 5,
            global_ids: vec![0x500, 0x501],
            local_ids: Vec::new(),
            thread_arrays: Vec::new(),
            global_arrays: Vec::new(),
            keys: 6,
            key_size: key_size(8),
            strsize: 256,
            strings: StringVars {
                map: 7,
                width: 264,
                ids: vec![0x501],
                global_ids: vec![0x502, 0x503],
                thread_arrays: Vec::new(),
                global_arrays: vec![0x504],
                local_ids: vec![0x505],
                locals: 8,
            },
            alloca_ids: Vec::new(),
            alloca_global_ids: Vec::new(),
            refs: Default::default(),
        }
    }

    fn calls(insns: &[crate::bpf::Insn], h: i32) -> usize {
        insns
            .iter()
            .filter(|i| i.code == 0x85 && i.imm == h)
            .count()
    }

    #[test]
    fn a_firing_reads_its_thread_id_once_and_keeps_the_thread_locals_it_loaded_or_stored() {
        let mut kv = kv();
        kv.ids = vec![0x500, 0x506, 0x507];
        // Two loads and a store of a kept variable: the thread's id once (lazily, after the
        // firing zeroed it), one lookup for the two loads, the store's update.
        let mut a = Asm::new();
        emit_zero_locals(&mut a, &kv);
        emit_load(&mut a, &kv, 0x500).unwrap();
        emit_load(&mut a, &kv, 0x500).unwrap();
        emit_store(&mut a, &kv, 0x500, -16).unwrap();
        let insns = a.finish().unwrap();
        crate::bpf::insn::check_flow(&insns).unwrap();
        assert_eq!(
            calls(&insns, helper::GET_CURRENT_PID_TGID),
            3,
            "one per key built"
        );
        let tid_reads = insns
            .iter()
            .filter(|i| i.code == op::LDX | op::MEM | op::DW && i.off == TID)
            .count();
        assert_eq!(tid_reads, 3, "each key reads the kept id first");
        let (value, valid) = cache_slots(&kv, 0x500).unwrap();
        let stores_to = |slot: i16| {
            insns
                .iter()
                .filter(|i| i.dst == 10 && i.off == slot)
                .count()
        };
        // Zeroed at the firing's start; set by each load's lookup and by the store (the flag
        // also cleared when the store was dropped).
        assert_eq!(stores_to(value), 1 + 2 + 1);
        assert_eq!(stores_to(valid), 1 + 2 + 2);
        assert_eq!(stores_to(TID), 1 + 3);
        // The slots of the kept variables are distinct and below the kagg frame's; a third
        // variable is not kept: it is looked up at each load.
        let (v2, f2) = cache_slots(&kv, 0x506).unwrap();
        assert!(v2 < valid && f2 < v2 && f2 >= -512);
        assert!(value < TID && TID < super::super::kagg::ALLOCA_TOP);
        assert_eq!(cache_slots(&kv, 0x507), None);
        let mut a = Asm::new();
        emit_load(&mut a, &kv, 0x507).unwrap();
        let insns = a.finish().unwrap();
        assert_eq!(
            calls(&insns, helper::MAP_LOOKUP_ELEM),
            2,
            "the scratch, the variable"
        );
        assert!(insns.iter().all(|i| i.off != value && i.off != valid));
    }

    #[test]
    fn string_variables_load_and_store_where_they_live() {
        let kv = kv();
        let key = [KeyPart::Int(-8)];
        let array = Array {
            thread: false,
            var: 0x504,
        };
        for var in [
            StringVar::Thread(0x501),
            StringVar::Array(array, &key),
            StringVar::Global(0x503),
        ] {
            let mut a = Asm::new();
            emit_string_load(&mut a, &kv, var, -16).unwrap();
            emit_string_store(&mut a, &kv, var, -16).unwrap();
            let insns = a.finish().unwrap();
            crate::bpf::insn::check_flow(&insns).unwrap();
            let dynamic = !matches!(var, StringVar::Global(_));
            // A dynamic variable: a lookup, an update, a delete (NULL frees), a drop counted;
            // a global is read and written in place.
            assert_eq!(
                calls(&insns, helper::MAP_LOOKUP_ELEM) > 2,
                dynamic,
                "{var:?}"
            );
            assert_eq!(calls(&insns, helper::MAP_UPDATE_ELEM), usize::from(dynamic));
            assert_eq!(calls(&insns, helper::MAP_DELETE_ELEM), usize::from(dynamic));
            // The string's 264 bytes are copied word by word to the scratch, and for a global
            // from it (a dynamic variable's update copies them).
            let copies = insns
                .iter()
                .filter(|i| i.code == (op::STX | op::MEM | op::DW))
                .count();
            let want = if dynamic { 33 } else { 66 };
            assert!(copies >= want, "{var:?}: {copies}");
        }
        // The second string global follows the integers' words and the first one's flag and
        // string.
        assert_eq!(string_global_offset(&kv, 1), Ok((2 * 8 + 8 + 264) as i16));
        assert_eq!(globals_size(2, 2, 264), 2 * 8 + 2 * (8 + 264));
        // A clause-local: its flag in a stack slot after the integer clause-locals', its string
        // in the per-CPU value (one lookup each way), nothing freed or dropped.
        let mut a = Asm::new();
        emit_string_load(&mut a, &kv, StringVar::Local(0x505), -16).unwrap();
        emit_string_store(&mut a, &kv, StringVar::Local(0x505), -16).unwrap();
        let insns = a.finish().unwrap();
        crate::bpf::insn::check_flow(&insns).unwrap();
        assert_eq!(calls(&insns, helper::MAP_LOOKUP_ELEM), 2);
        assert_eq!(calls(&insns, helper::MAP_UPDATE_ELEM), 0);
        let flag = local_slot(0);
        assert!(
            insns
                .iter()
                .any(|i| i.code == (op::ST | op::MEM | op::DW) && i.off == flag && i.imm == 2),
            "the store marks it set"
        );
        // A string in the scratch as a key: its key-wide bytes copied from the scratch.
        let key = [KeyPart::Scratch(-24)];
        let kv = KernelVars {
            key_size: key_size(256),
            ..kv
        };
        let mut a = Asm::new();
        emit_string_load(&mut a, &kv, StringVar::Array(array, &key), -16).unwrap();
        let insns = a.finish().unwrap();
        crate::bpf::insn::check_flow(&insns).unwrap();
        assert!(
            insns
                .iter()
                .any(|i| i.code == (op::LDX | op::MEM | op::DW) && i.off == -24),
            "the key's address is read"
        );
        // Where a variable does not live, the context says so.
        let mut a = Asm::new();
        let e = emit_string_load(&mut a, &kv, StringVar::Thread(0x500), -16).unwrap_err();
        assert!(e.contains("lives in dtrace"), "{e}");
        let e = emit_string_store(&mut a, &kv, StringVar::Global(0x500), -16).unwrap_err();
        assert!(e.contains("lives in dtrace"), "{e}");
    }
}
