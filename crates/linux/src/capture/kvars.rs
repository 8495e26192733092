//! D variables in the kernel, the probe's side (the consumer's is `provider::kvars`):
//! the integer `self->` variables that only clauses running whole at the probe use live in one
//! BPF hash map keyed by (thread id, variable id), so `self->ts = timestamp` at one probe and
//! `timestamp - self->ts` at another cost no record at either.
//!
//! DTrace's rules hold: a variable never stored, or stored zero, reads as zero; storing zero
//! frees its entry (a delete); a store that finds the map full (its size comes from
//! `dynvarsize`) is lost and counted in a per-CPU drop counter, which dtrace reports as dynamic
//! variable drops. The translator (`dtrace_ebpf::translate`) asks for these loads and stores
//! through `ProbeContext::emit_thread_load`/`emit_thread_store`; the emitters here build the key
//! on the stack at [`KEY`] (below every other slot the kernel clauses use, see `capture::kagg`).
//!
//! Integer global scalars placed in the kernel are the 8-byte words of the one value of an array
//! map, read and written in place (no helper call): zero until stored, never freed. Integer
//! clause-locals (`this->`) are stack slots of the probe's program, zeroed when a firing starts,
//! so they live for the firing and are shared by its kernel clauses, as the framework's are.

use super::spec::KernelVars;
use crate::bpf::insn::{helper, op, Asm, Size, R0, R1, R10, R2, R3, R4};

/// Bytes of a key: the thread id (4), then the variable id (4).
pub const KEY_SIZE: u32 = 8;
/// Bytes of a value: the integer.
pub const VALUE_SIZE: u32 = 8;
/// The stack slot of the key (and of the drop counter's index once a store failed).
pub(crate) const KEY: i16 = super::kagg::VARS_KEY;

/// `BPF_ANY`: create or replace.
const BPF_ANY: i32 = 0;

/// Writes the key of `var` for the current thread at [`KEY`]; uses r0, r1.
fn emit_key(a: &mut Asm, var: u32) {
    a.call(helper::GET_CURRENT_PID_TGID);
    a.alu_imm(op::LSH, R0, 32).alu_imm(op::RSH, R0, 32);
    a.ld_imm64(R1, u64::from(var) << 32);
    a.alu(op::OR, R0, R1);
    a.store(Size::DW, R10, KEY, R0);
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
fn global_offset(index: usize) -> i16 {
    i16::try_from(index * 8).unwrap_or(i16::MAX & !7)
}

/// Most global scalars kept in the kernel.
pub const MAX_GLOBALS: usize = 512;

/// Most clause-locals kept in the kernel (each a stack slot below [`KEY`]).
pub const MAX_LOCALS: usize = 24;

/// The stack slot of clause-local number `index` (below `MAX_LOCALS`).
fn local_slot(index: usize) -> i16 {
    KEY - 8 * (index.min(MAX_LOCALS - 1) as i16 + 1)
}

/// Zeroes the first `n` clause-locals' slots: a firing starts with none stored (and the verifier
/// wants every slot written before it is read).
pub fn emit_zero_locals(a: &mut Asm, n: usize) {
    for i in 0..n.min(MAX_LOCALS) {
        a.store_imm(Size::DW, R10, local_slot(i), 0);
    }
}

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
const _: () = assert!(KEY - 8 * MAX_LOCALS as i16 >= -512);

/// r0 = the current thread's `var` (0 when it has none).
pub fn emit_load(a: &mut Asm, kv: &KernelVars, var: u32) {
    emit_key(a, var);
    let done = a.label();
    a.ld_map_fd(R1, kv.map)
        .mov(R2, R10)
        .alu_imm(op::ADD, R2, i32::from(KEY));
    a.call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, done);
    a.load(Size::DW, R0, R0, 0);
    a.bind(done);
}

/// Stores the integer at `fp + value_at` in the current thread's `var`: zero frees it, a full
/// map counts a drop.
pub fn emit_store(a: &mut Asm, kv: &KernelVars, var: u32, value_at: i16) {
    emit_key(a, var);
    let (free, done) = (a.label(), a.label());
    a.load(Size::DW, R1, R10, value_at);
    a.jmp_imm(op::JEQ, R1, 0, free);
    a.ld_map_fd(R1, kv.map)
        .mov(R2, R10)
        .alu_imm(op::ADD, R2, i32::from(KEY))
        .mov(R3, R10)
        .alu_imm(op::ADD, R3, i32::from(value_at))
        .mov_imm(R4, BPF_ANY);
    a.call(helper::MAP_UPDATE_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, done);
    // The map is full: a dynamic variable drop.
    super::kagg::emit_count_drop(a, kv.drops, KEY, done);
    a.bind(free);
    a.ld_map_fd(R1, kv.map)
        .mov(R2, R10)
        .alu_imm(op::ADD, R2, i32::from(KEY));
    a.call(helper::MAP_DELETE_ELEM);
    a.bind(done);
}
