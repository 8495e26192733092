//! Speculations kept in the kernel: `speculation()`, `speculate()`, `commit()` and `discard()`
//! run at the probe, in clauses that run whole there; dtrace keeps the speculative buffers
//! (`dtrace_framework::speculation`) and the kernel the speculations' states.
//!
//! Each of the `nspec` speculations has a u64 state in an array map (`KernelSpecs::states`):
//! [`INACTIVE`], [`ACTIVE`] (handed out by `speculation()`), [`SETTLING`] (a `commit()` or
//! `discard()` ran, dtrace has not yet consumed it). `speculation()` takes the first inactive one
//! with an atomic compare-and-exchange; when none is free the failure is counted per CPU as
//! DTrace counts it, *busy* when some speculation is settling, else *unavailable*
//! (`KernelSpecs::fails`), and dtrace reports them as the interpreter's failures. `speculate(id)`
//! of an active speculation tags the clause's record with the id (the `built::SPEC` field): dtrace
//! appends it to that speculation's buffer for the CPU, bounded by `specsize` (speculative drops
//! counted there); an id that is 0, beyond `nspec` or not active abandons the clause silently, as
//! in the interpreter. `commit(id)` or `discard(id)` of an active speculation makes it settling
//! and writes a [`KIND_SPEC`](super::layout::KIND_SPEC) ring record, after the records speculated
//! before it: dtrace copies every CPU's buffer of it to the principal buffers (a commit) or empties
//! them (a discard), then sets the state back to inactive. So a speculation is busy from its
//! `commit()` until dtrace consumed it (DTrace's is until its cleaner ran). An id beyond `nspec`
//! faults (`DTRACEFLT_ILLOP`) as in the interpreter; 0 or an inactive one does nothing.
//!
//! The kernel writes a state only from inactive or active (by compare-and-exchange), dtrace
//! only from settling, so the two never write one state at once.

use super::spec::{KernelSpecs, SpecOp};
use crate::bpf::insn::{helper, op, Asm, Label, Size, R0, R1, R10, R2, R3, R7, R8};
use dtrace_dif::vm::FaultKind;
use dtrace_ebpf::translate::FaultWord;

/// A speculation's state: free.
pub const INACTIVE: u64 = 0;
/// A speculation's state: handed out by `speculation()`.
pub const ACTIVE: u64 = 1;
/// A speculation's state: committed or discarded at the probe, not yet consumed by dtrace.
pub const SETTLING: u64 = 2;

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
/// record in `ring`: when the ring has no room the speculation stays active and a drop is
/// counted), an id beyond `nspec` faulting at instruction `pc` of the clause's code. `id_at` is
/// a stack slot it may use. Uses r0-r5, r7, r8.
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
    let settle = match op_kind {
        SpecOp::Speculate => {
            a.jmp_imm(op::JEQ, R0, 0, exits.abandon);
            a.jmp_imm(op::JGT, R0, nspec, exits.abandon);
            a.mov(R2, R0).alu_imm(op::SUB, R2, 1);
            emit_state(a, specs, exits.abandon);
            a.load(Size::DW, R1, R0, 0);
            a.jmp_imm(op::JNE, R1, ACTIVE as i32, exits.abandon);
            a.load(Size::DW, R7, R10, rec);
            a.jmp_imm(op::JEQ, R7, 0, done);
            a.load(Size::DW, R1, R10, id_at);
            a.store(Size::W, R7, built::SPEC as i16, R1);
            a.bind(done);
            return;
        }
        SpecOp::Commit => kspec::COMMIT,
        SpecOp::Discard => kspec::DISCARD,
    };
    let (illegal, have) = (a.label(), a.label());
    a.jmp_imm(op::JEQ, R0, 0, done);
    a.jmp_imm(op::JGT, R0, nspec, illegal);
    a.mov(R2, R0).alu_imm(op::SUB, R2, 1);
    emit_state(a, specs, done);
    // The state's address, kept across the helper calls.
    a.mov(R8, R0);
    a.mov(R1, R0)
        .mov_imm(R2, SETTLING as i32)
        .mov_imm(R0, ACTIVE as i32);
    a.atomic_cmpxchg64(R1, 0, R2);
    a.jmp_imm(op::JNE, R0, ACTIVE as i32, done);
    a.ld_map_fd(R1, ring.ring)
        .mov_imm(R2, kspec::SIZE as i32)
        .mov_imm(R3, 0)
        .call(helper::RINGBUF_RESERVE);
    a.jmp_imm(op::JNE, R0, 0, have);
    // No room for it: the speculation stays active, the drop is counted.
    a.mov_imm(R1, ACTIVE as i32).store(Size::DW, R8, 0, R1);
    super::kagg::emit_count_drop(a, ring.drops, id_at, done);
    a.bind(have).mov(R7, R0);
    a.store_imm(Size::H, R7, kspec::KIND as i16, i32::from(KIND_SPEC));
    a.store_imm(Size::H, R7, kspec::OP as i16, i32::from(settle));
    a.store_imm(Size::W, R7, kspec::TAG as i16, tag as i32);
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
