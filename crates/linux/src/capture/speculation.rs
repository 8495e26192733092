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
//! dtrace writes a state only when it is settling, which the kernel leaves alone, so the two
//! never write one state at once.

use super::spec::{KernelSpecs, SpecOp};
use crate::bpf::insn::{helper, op, Asm, Label, Size, R0, R1, R10, R2, R3, R7, R8, R9};
use dtrace_dif::vm::FaultKind;
use dtrace_ebpf::translate::FaultWord;

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
        .mov(R2, R10)
        .alu_imm(op::ADD, R2, i32::from(KEY))
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
        a.jmp_imm(op::JNE, R1, SETTLING as i32, next);
        a.mov_imm(R8, 0);
        a.bind(next);
    }
    a.store_imm(Size::W, R10, KEY, 0);
    a.ld_map_fd(R1, specs.fails)
        .mov(R2, R10)
        .alu_imm(op::ADD, R2, i32::from(KEY))
        .call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, failed);
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
/// clause's record (the stack slot `rec` holds its address, 0 when the ring was full) or abandons
/// the clause; `commit()`/`discard()` settle it (a [`KIND_SPEC`](super::layout::KIND_SPEC)
/// record in `ring`: when the ring has no room nothing happens, and a drop is counted), an id
/// beyond `nspec` faulting at instruction `pc` of the clause's code. `id_at` is a stack slot it
/// may use. Uses r0-r5, r7-r9.
#[allow(clippy::too_many_arguments)]
pub fn emit_action(
    a: &mut Asm,
    specs: &KernelSpecs,
    op_kind: SpecOp,
    ring: &super::codegen::MapFds,
    tag: u32,
    rec: i16,
    id_at: i16,
    pc: u32,
    exits: SpecExits,
) {
    use super::filter::FRAME;
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
        a.load(Size::DW, R7, R10, rec);
        a.jmp_imm(op::JEQ, R7, 0, done);
        a.load(Size::DW, R1, R10, id_at);
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
    super::kagg::emit_count_drop(a, ring.drops, id_at, done);
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
    let word = FaultWord {
        kind: FaultKind::IllOp.code(),
        pc,
    };
    a.ld_imm64(R1, word.encode());
    a.store(Size::DW, R10, FRAME.fault_at(), R1);
    a.store_imm(Size::DW, R10, FRAME.fault_addr_at(), 0);
    a.ja(exits.faulted);
    a.bind(done);
}
