//! Speculations kept in the kernel: `speculation()`, `speculate()`, `commit()` and `discard()`
//! run at the probe, in clauses that run whole there; dtrace keeps the speculative buffers
//! (`dtrace_framework::speculation`) and the kernel the speculations' states.
//!
//! Each of the `nspec` speculations has a u64 state in an array map (`KernelSpecs::states`),
//! following the interpreter's state machine (`dtrace_framework::speculation`): [`INACTIVE`],
//! [`ACTIVE`] (handed out by `speculation()`), speculated on one CPU ([`one_cpu`]), on
//! [`MANY`] CPUs, or [`SETTLING`] (committed or discarded with records on other CPUs, until
//! dtrace consumed it). `speculation()` takes the first inactive one with an atomic
//! compare-and-exchange; when none is free the failure is counted per CPU as DTrace counts it,
//! *busy* when some speculation is settling, else *unavailable* (`KernelSpecs::fails`), and
//! dtrace reports them as the interpreter's failures. `speculate(id)` of a speculation in use
//! tags the clause's record with the id (the `built::SPEC` field): dtrace appends it to that
//! speculation's buffer for the CPU, bounded by `specsize` (speculative drops counted there); an
//! id that is 0, beyond `nspec` or not in use abandons the clause silently, as in the
//! interpreter. `commit(id)` or `discard(id)` writes a [`KIND_SPEC`](super::layout::KIND_SPEC)
//! ring record, after the records speculated before it: dtrace copies every CPU's buffer of it
//! to the principal buffers (a commit) or empties them (a discard). As in the interpreter, a
//! speculation with nothing speculated, or speculated on this CPU only, is free again at once
//! (a discard of one with nothing speculated, or one speculated elsewhere, is settling); any
//! other is settling until dtrace consumed the record and freed it (the record says so). So a
//! later speculation with the same id comes after the record in the ring, and dtrace has
//! emptied the old buffers by then. An id beyond `nspec` faults (`DTRACEFLT_ILLOP`) as in the
//! interpreter; 0 or an inactive one does nothing.
//!
//! A clause whose record is larger than `specsize` never speculates: `speculate()` of a
//! speculation in use counts a speculative drop (`KernelSpecs::fails`, reported at once as
//! DTrace for Linux reports them) and abandons the clause, its later stores included, as the
//! interpreter does.
//!
//! A `commit()` or `discard()` the ring has no room for leaves the speculation [`lost`]: settling,
//! with the CPU that ran it and whether it committed, and counted in the states' last element
//! ([`lost_count`]). dtrace finds it there, settles it once the records speculated before it were
//! consumed, then frees it: as DTrace does with a principal buffer full at `commit()`, that CPU's
//! speculative data is lost (one drop on the CPU, counted by dtrace when the buffer held some),
//! the other CPUs' is committed, and a discard discards. A `commit()` with nothing speculated
//! anywhere frees it at once, as when the ring has room.
//!
//! dtrace writes a state only when it is settling, which the kernel leaves alone, so the two
//! never write one state at once.

use super::spec::{KernelSpecs, SpecOp};
use crate::bpf::insn::{helper, op, Asm, Label, Size, R0, R1, R10, R2, R3, R7, R8, R9};

/// A speculation's state: free.
pub const INACTIVE: u64 = 0;
/// A speculation's state: handed out by `speculation()`.
pub const ACTIVE: u64 = 1;
/// A speculation's state: committed or discarded at the probe with records on other CPUs, not
/// yet consumed by dtrace.
pub const SETTLING: u64 = 2;
/// The low byte of a speculation's state speculated on one CPU (see [`one_cpu`]).
pub const ONE: u64 = 3;
/// A speculation's state: speculated on several CPUs.
pub const MANY: u64 = 4;

/// The bit of a [`SETTLING`] state whose `commit()` or `discard()` the ring had no room for
/// (see [`lost`]).
pub const LOST: u64 = 1 << 8;
/// The bit of a [`LOST`] state that was a `commit()`.
pub const LOST_COMMIT: u64 = 1 << 9;

/// The state of a speculation whose `commit()` (`commit`) or `discard()` on CPU `cpu` the ring
/// had no room for: settling until dtrace settled it.
pub fn lost(commit: bool, cpu: u32) -> u64 {
    SETTLING | LOST | if commit { LOST_COMMIT } else { 0 } | (u64::from(cpu) + 1) << 32
}

/// What a [`lost`] state says: (whether it was a `commit()`, the CPU that ran it); `None` for
/// any other state.
pub fn decode_lost(state: u64) -> Option<(bool, u32)> {
    let cpu = u32::try_from((state >> 32).checked_sub(1)?).ok()?;
    (state & 0xff == SETTLING && state & LOST != 0).then_some((state & LOST_COMMIT != 0, cpu))
}

/// The index in the states' map of the count of [`lost`] settles (after the `nspec` states).
pub fn lost_count(nspec: u32) -> u32 {
    nspec.min(MAX_KERNEL_NSPEC)
}

/// The byte offset in a CPU's value of `KernelSpecs::fails` of the speculative drops counted at
/// the probe (after the busy and unavailable failures).
pub const SPEC_DROPS_AT: i32 = 16;

/// The state of a speculation speculated on CPU `cpu` only.
pub fn one_cpu(cpu: u32) -> u64 {
    ONE | (u64::from(cpu) + 1) << 8
}

/// Leaves in r9 the state [`one_cpu`] of the CPU running (uses r0).
fn emit_one_here(a: &mut Asm) {
    a.call(helper::GET_SMP_PROCESSOR_ID);
    a.mov(R9, R0)
        .alu_imm(op::ADD, R9, 1)
        .alu_imm(op::LSH, R9, 8)
        .alu_imm(op::OR, R9, ONE as i32);
}

/// The most speculations (`nspec`) kept in the kernel: `speculation()` tries each in turn.
pub const MAX_KERNEL_NSPEC: u32 = 16;

/// The stack slot the emitters use for a map key (the capture program's scratch slot, free
/// while clauses run).
const KEY: i16 = -8;

/// Leaves in r0 the address of the state of the speculation whose index (id - 1) is in r2, or
/// jumps to `none` when the map has no such entry. Uses r0-r5.
fn emit_state(a: &mut Asm, specs: &KernelSpecs, none: Label) {
    a.store(Size::W, R10, KEY, R2);
    a.ld_map_fd(R1, specs.states)
        .frame_addr(R2, i32::from(KEY))
        .call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, none);
}

/// Leaves in r0 the address of this CPU's value of `KernelSpecs::fails` (the failures of
/// `speculation()`, then the speculative drops at [`SPEC_DROPS_AT`]), or jumps to `none` when
/// the map has no value (it always has). Uses r0-r5.
fn emit_fails(a: &mut Asm, specs: &KernelSpecs, none: Label) {
    a.store_imm(Size::W, R10, KEY, 0);
    a.ld_map_fd(R1, specs.fails)
        .frame_addr(R2, i32::from(KEY))
        .call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, none);
}

/// `speculation()`: leaves a new speculation's id in r0, or 0 (the failure counted). Uses
/// r0-r5, r8.
pub fn emit_speculation(a: &mut Asm, specs: &KernelSpecs) {
    let (done, failed) = (a.label(), a.label());
    for i in 0..specs.nspec.min(MAX_KERNEL_NSPEC) {
        let next = a.label();
        a.mov_imm(R2, i as i32);
        emit_state(a, specs, next);
        a.mov(R1, R0)
            .mov_imm(R2, ACTIVE as i32)
            .mov_imm(R0, INACTIVE as i32);
        a.atomic_cmpxchg64(R1, 0, R2);
        a.jmp_imm(op::JNE, R0, INACTIVE as i32, next);
        a.mov_imm(R0, i as i32 + 1).ja(done);
        a.bind(next);
    }
    // None free: busy when one is settling, else unavailable.
    a.mov_imm(R8, 8);
    for i in 0..specs.nspec.min(MAX_KERNEL_NSPEC) {
        let next = a.label();
        a.mov_imm(R2, i as i32);
        emit_state(a, specs, next);
        a.load(Size::DW, R1, R0, 0);
        // Settling, lost settles included.
        a.alu_imm(op::AND, R1, 0xff);
        a.jmp_imm(op::JNE, R1, SETTLING as i32, next);
        a.mov_imm(R8, 0);
        a.bind(next);
    }
    emit_fails(a, specs, failed);
    a.alu(op::ADD, R0, R8);
    a.load(Size::DW, R1, R0, 0).alu_imm(op::ADD, R1, 1);
    a.store(Size::DW, R0, 0, R1);
    a.bind(failed).mov_imm(R0, 0);
    a.bind(done);
}

/// Where a speculation action's code goes.
#[derive(Clone, Copy)]
pub struct SpecExits {
    /// The clause is abandoned (its record discarded, no fault).
    pub abandon: Label,
    /// The action faulted (the fault is in the frame).
    pub faulted: Label,
}

/// The speculation action `op_kind` of the id in r0: `speculate()` writes the id into the
/// clause's record of `record_size` bytes (the stack slot `rec` holds its address, 0 when the
/// ring was full) or abandons the clause (a speculative drop counted when the record is larger
/// than `specsize`); `commit()`/`discard()` settle it (a
/// [`KIND_SPEC`](super::layout::KIND_SPEC) record in `ring`, or when the ring has no room a
/// [`lost`] state), an id beyond `nspec` faulting at instruction `pc` of the clause's code.
/// `id_at` is a stack slot it may use. Uses r0-r5, r7-r9.
#[allow(clippy::too_many_arguments)]
pub fn emit_action(
    a: &mut Asm,
    specs: &KernelSpecs,
    op_kind: SpecOp,
    ring: &super::codegen::MapFds,
    tag: u32,
    (rec, record_size): (i16, u32),
    id_at: i16,
    pc: u32,
    exits: SpecExits,
) {
    use super::layout::{built, kspec, KIND_SPEC};
    let nspec = specs.nspec.min(MAX_KERNEL_NSPEC) as i32;
    let done = a.label();
    a.store(Size::DW, R10, id_at, R0);
    let illegal = a.label();
    let out_of_range = match op_kind {
        SpecOp::Speculate => exits.abandon,
        SpecOp::Commit | SpecOp::Discard => illegal,
    };
    let zero = match op_kind {
        SpecOp::Speculate => exits.abandon,
        SpecOp::Commit | SpecOp::Discard => done,
    };
    a.jmp_imm(op::JEQ, R0, 0, zero);
    a.jmp_imm(op::JGT, R0, nspec, out_of_range);
    a.mov(R2, R0).alu_imm(op::SUB, R2, 1);
    emit_state(a, specs, zero);
    // The state's address, kept across the helper calls.
    a.mov(R8, R0);
    if op_kind == SpecOp::Speculate {
        emit_one_here(a);
        let tagged = a.label();
        // Two tries: another CPU may change the state between the read and the exchange.
        for _ in 0..2 {
            let (to_one, to_many, retry) = (a.label(), a.label(), a.label());
            a.load(Size::DW, R1, R8, 0);
            a.mov(R2, R1).alu_imm(op::AND, R2, 0xff);
            a.jmp_imm(op::JEQ, R2, MANY as i32, tagged);
            a.jmp_reg(op::JEQ, R1, R9, tagged);
            a.jmp_imm(op::JEQ, R2, ONE as i32, to_many);
            a.jmp_imm(op::JEQ, R2, ACTIVE as i32, to_one);
            a.ja(exits.abandon);
            a.bind(to_many);
            a.mov(R0, R1).mov_imm(R2, MANY as i32);
            a.atomic_cmpxchg64(R8, 0, R2);
            a.jmp_reg(op::JEQ, R0, R1, tagged);
            a.ja(retry);
            a.bind(to_one);
            a.mov(R0, R1);
            a.atomic_cmpxchg64(R8, 0, R9);
            a.jmp_reg(op::JEQ, R0, R1, tagged);
            a.bind(retry);
        }
        a.ja(exits.abandon);
        a.bind(tagged);
        if u64::from(record_size).next_multiple_of(8) > specs.specsize {
            // As the interpreter's (and DTrace for Linux's): a record that can never fit the
            // buffer is a speculative drop, and the clause ends here.
            emit_count_spec_drop(a, specs, exits.abandon);
            // Always taken (the count is at least 1); a conditional jump keeps what follows
            // reachable as the verifier sees the code's shape.
            a.jmp_imm(op::JNE, R1, 0, exits.abandon);
        }
        a.load(Size::DW, R7, R10, rec);
        a.jmp_imm(op::JEQ, R7, 0, done);
        a.load(Size::DW, R1, R10, id_at);
        // Its data goes to the speculation's buffer: the principal buffer's room comes back
        // when the record is submitted (`kagg`), not here, where the clause may still fault
        // and discard it (which gives the room back too).
        a.store(Size::W, R7, built::SPEC as i16, R1);
        a.bind(done);
        return;
    }
    let settle = if op_kind == SpecOp::Commit {
        kspec::COMMIT
    } else {
        kspec::DISCARD
    };
    // The record first: once the state changes, the commit must reach dtrace.
    let have = a.label();
    a.ld_map_fd(R1, ring.ring)
        .mov_imm(R2, kspec::SIZE as i32)
        .mov_imm(R3, 0)
        .call(helper::RINGBUF_RESERVE);
    a.jmp_imm(op::JNE, R0, 0, have);
    emit_lost(a, specs, op_kind == SpecOp::Commit, done);
    a.ja(done);
    a.bind(have).mov(R7, R0);
    emit_one_here(a);
    let (free, busy, nothing, fill) = (a.label(), a.label(), a.label(), a.label());
    a.load(Size::DW, R1, R8, 0);
    a.mov(R2, R1).alu_imm(op::AND, R2, 0xff);
    // As the interpreter's: free at once with nothing speculated (a commit) or speculated on
    // this CPU only; else settling until dtrace consumed it.
    a.jmp_reg(op::JEQ, R1, R9, free);
    match op_kind {
        SpecOp::Commit => a.jmp_imm(op::JEQ, R1, ACTIVE as i32, free),
        _ => a.jmp_imm(op::JEQ, R1, ACTIVE as i32, busy),
    };
    a.jmp_imm(op::JEQ, R2, ONE as i32, busy);
    a.jmp_imm(op::JEQ, R2, MANY as i32, busy);
    a.ja(nothing);
    for (label, to, release) in [(free, INACTIVE, 0), (busy, SETTLING, 1)] {
        a.bind(label);
        a.mov(R0, R1).mov_imm(R2, to as i32);
        a.atomic_cmpxchg64(R8, 0, R2);
        a.jmp_reg(op::JNE, R0, R1, nothing);
        a.store_imm(Size::W, R7, kspec::RELEASE as i16, release);
        a.ja(fill);
    }
    a.bind(nothing);
    a.mov(R1, R7).mov_imm(R2, 0).call(helper::RINGBUF_DISCARD);
    a.ja(done);
    a.bind(fill);
    a.store_imm(Size::H, R7, kspec::KIND as i16, i32::from(KIND_SPEC));
    a.store_imm(Size::H, R7, kspec::OP as i16, i32::from(settle));
    a.store_imm(Size::W, R7, kspec::TAG as i16, tag as i32);
    a.store_imm(Size::W, R7, kspec::PAD as i16, 0);
    a.call(helper::GET_SMP_PROCESSOR_ID)
        .store(Size::W, R7, kspec::CPU as i16, R0);
    a.load(Size::DW, R1, R10, id_at)
        .store(Size::W, R7, kspec::ID as i16, R1);
    super::codegen::emit_submit(a, ring);
    a.ja(done);
    // As the interpreter's: an illegal operation outside DIF, at the expression's last
    // instruction, address 0.
    a.bind(illegal);
    super::kagg::emit_illegal_op(a, pc, exits.faulted);
    a.bind(done);
}

/// Counts a speculative drop on this CPU (`KernelSpecs::fails`), leaving the count in r1, then
/// goes on (or to `out` when the map has no value). Uses r0-r3.
fn emit_count_spec_drop(a: &mut Asm, specs: &KernelSpecs, out: Label) {
    emit_fails(a, specs, out);
    a.load(Size::DW, R1, R0, SPEC_DROPS_AT as i16)
        .alu_imm(op::ADD, R1, 1);
    a.store(Size::DW, R0, SPEC_DROPS_AT as i16, R1);
}

/// `commit()` (`commit`) or `discard()` of the speculation whose state's address is in r8, the
/// ring having no room for its record: a commit with nothing speculated frees it; one in use
/// becomes [`lost`] (counted at [`lost_count`]) for dtrace to settle; any other state is left
/// alone. Uses r0-r5, r9.
fn emit_lost(a: &mut Asm, specs: &KernelSpecs, commit: bool, done: Label) {
    let (to_lost, counted) = (a.label(), a.label());
    a.load(Size::DW, R1, R8, 0);
    a.mov(R2, R1).alu_imm(op::AND, R2, 0xff);
    if commit {
        let not_active = a.label();
        a.jmp_imm(op::JNE, R1, ACTIVE as i32, not_active);
        a.mov(R0, R1).mov_imm(R2, INACTIVE as i32);
        a.atomic_cmpxchg64(R8, 0, R2);
        a.ja(done);
        a.bind(not_active);
    } else {
        a.jmp_imm(op::JEQ, R1, ACTIVE as i32, to_lost);
    }
    a.jmp_imm(op::JEQ, R2, ONE as i32, to_lost);
    a.jmp_imm(op::JEQ, R2, MANY as i32, to_lost);
    a.ja(done);
    a.bind(to_lost);
    // The state read stays in r1 across the call (r1-r5 are not: kept in r9 meanwhile).
    a.mov(R9, R1);
    a.call(helper::GET_SMP_PROCESSOR_ID);
    a.alu_imm(op::ADD, R0, 1).alu_imm(op::LSH, R0, 32);
    let bits = (SETTLING | LOST | if commit { LOST_COMMIT } else { 0 }) as i32;
    a.alu_imm(op::OR, R0, bits);
    a.mov(R2, R0).mov(R0, R9);
    a.atomic_cmpxchg64(R8, 0, R2);
    a.jmp_reg(op::JNE, R0, R9, done);
    a.mov_imm(R2, lost_count(specs.nspec) as i32);
    emit_state(a, specs, counted);
    a.mov_imm(R1, 1).atomic_add64(R0, 0, R1);
    a.bind(counted);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_settle_says_what_it_was_and_where() {
        for (commit, cpu) in [(true, 0), (false, 3), (true, 4095)] {
            let state = lost(commit, cpu);
            assert_eq!(state & 0xff, SETTLING, "settling to the probes");
            assert_eq!(decode_lost(state), Some((commit, cpu)));
        }
        for state in [INACTIVE, ACTIVE, SETTLING, one_cpu(2), MANY] {
            assert_eq!(decode_lost(state), None);
        }
        assert_eq!(lost_count(4), 4);
        assert_eq!(lost_count(99), MAX_KERNEL_NSPEC);
    }
}
