//! `caller` and `stackdepth` at the probe: the code of a clause takes the kernel stack itself
//! and cuts the tracing machinery's frames off its top as dtrace cuts a captured stack
//! (`KernelSymbols::tracing_prefix`), searching the same tracing address ranges
//! (`KernelSymbols::tracing_ranges`, from the one symbol table dtrace reads), which dtrace
//! writes in an array map when the session needs them.
//!
//! The stack is taken as the capture takes it for dtrace: `bpf_get_stack()` of the running
//! thread, [`CALLER_FRAMES`] frames for `caller`, [`MAX_STACK_DEPTH`] for `stackdepth`, into a
//! per-CPU buffer ([`KernelStacks::frames`], slot 1 for programs of perf events, which may
//! interrupt another program on the CPU). At a probe that is not sampled, `caller` is the first
//! frame past the tracing ones (0 when there is none) and `stackdepth` the frames past them; at a
//! sampled probe, whose stack starts at the interrupted PC and is not cut, `caller` is the second
//! frame and `stackdepth` every frame. A failed walk is an empty stack, as for dtrace.
//!
//! The search is a binary search over the ranges, padded to a power of two with empty ranges,
//! without branches (a verifier-friendly form: each step adds its stride or 0). Kernel addresses
//! all have the top bit set, so two of them compare by the sign of their difference; an address
//! without it is never a tracing one (no range starts there: [`ranges_value`] refuses such
//! ranges).

use super::codegen::{CtxKind, ProbeShape};
use super::spec::{KernelStacks, MAX_STACK_DEPTH, TRACING_FRAMES};
use crate::bpf::insn::{helper, op, Asm, Label, Size, R0, R1, R2, R3, R4, R5, R6, R8, R9};
use crate::symbols::kallsyms::TracingRange;

/// Frames taken for `caller`, as the capture takes them for dtrace (`needs::CALLER_FRAMES`).
pub const CALLER_FRAMES: u32 = TRACING_FRAMES;

/// The most tracing ranges the map holds (a distribution kernel has ~8,000).
pub const MAX_TRACING_RANGES: usize = 1 << 16;

/// Bytes of one range in the map: its first and its last address.
const RANGE_SIZE: usize = 16;

/// Which value the code reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackValue {
    /// `caller`.
    Caller,
    /// `stackdepth`.
    Depth,
}

/// The value of the ranges map for `ranges` (sorted, disjoint) and its capacity (a power of two):
/// each range's first and last address, then empty ranges (first above last) to the capacity.
/// `Err` says why the probe's code cannot search them.
pub fn ranges_value(ranges: &[TracingRange]) -> Result<(Vec<u8>, u32), String> {
    if ranges.len() > MAX_TRACING_RANGES {
        return Err(format!(
            "the kernel has {} tracing address ranges, more than the {MAX_TRACING_RANGES} the \
             probe's code searches",
            ranges.len()
        ));
    }
    if ranges.iter().any(|r| r.first >> 63 == 0) {
        return Err("a tracing address range lies outside the kernel's half".into());
    }
    let capacity = ranges.len().max(1).next_power_of_two();
    let mut v = Vec::with_capacity(capacity * RANGE_SIZE);
    let empty = TracingRange {
        first: u64::MAX,
        last: 0,
    };
    for r in ranges
        .iter()
        .chain(std::iter::repeat(&empty))
        .take(capacity)
    {
        v.extend_from_slice(&r.first.to_ne_bytes());
        v.extend_from_slice(&r.last.to_ne_bytes());
    }
    Ok((v, capacity as u32))
}

/// Emits code that leaves `what` in r0, with the context in r6 (kept), the stack slot `scratch`
/// and registers r0-r5, r8, r9. The value is read back from the per-CPU buffer, so the verifier
/// sees one unknown value however many frames were cut (no state per frame count).
pub(crate) fn emit_stack_value(
    a: &mut Asm,
    shape: &ProbeShape,
    stacks: &KernelStacks,
    what: StackValue,
    scratch: i16,
) {
    let depth = match what {
        StackValue::Caller => CALLER_FRAMES,
        StackValue::Depth => MAX_STACK_DEPTH,
    } as i32;
    let sampled = shape.ctx == CtxKind::PerfEvent;
    let (zero, done) = (a.label(), a.label());
    super::kagg::emit_key_scratch_lookup(a, shape, stacks.frames, scratch, zero);
    a.mov(R8, R0);
    a.mov(R1, R6)
        .mov(R2, R8)
        .mov_imm(R3, depth * 8)
        .mov_imm(R4, 0)
        .call(helper::GET_STACK);
    // r0: the frames taken (a failed walk takes none).
    let taken = a.label();
    a.jmp_imm(op::JSGE, R0, 0, taken);
    a.mov_imm(R0, 0);
    a.bind(taken);
    a.alu_imm(op::RSH, R0, 3);
    let result = a.label();
    if sampled {
        // Not cut: the second frame is the caller.
        match what {
            StackValue::Depth => {}
            StackValue::Caller => {
                let second = a.label();
                a.jmp_imm(op::JGT, R0, 1, second);
                a.mov_imm(R0, 0).ja(result);
                a.bind(second);
                a.load(Size::DW, R0, R8, 8);
            }
        }
        a.ja(result);
    } else {
        emit_cut(a, stacks, what, depth, result);
    }
    a.bind(result);
    // Through the buffer: one unknown value for the verifier, whatever path made it, and the
    // other registers cleared, so every path from here is the same state.
    a.store(Size::DW, R8, 0, R0);
    a.load(Size::DW, R0, R8, 0);
    for r in [R1, R2, R3, R4, R5, R8, R9] {
        a.mov_imm(r, 0);
    }
    a.ja(done);
    a.bind(zero);
    a.mov_imm(R0, 0);
    a.bind(done);
}

/// The search of the tracing ranges over the frames in r8 (r0 of them, at most `depth`), which
/// jumps to `result` with `what` in r0.
fn emit_cut(a: &mut Asm, stacks: &KernelStacks, what: StackValue, depth: i32, result: Label) {
    let (next, end) = (a.label(), a.label());
    a.ld_map_value(R9, stacks.ranges, 0);
    // r4: the frame looked at (the tracing ones before it).
    a.mov_imm(R4, 0);
    a.bind(next);
    a.jmp_reg(op::JGE, R4, R0, end);
    a.jmp_imm(op::JGE, R4, depth, end);
    // r1: its address.
    a.mov(R1, R4).alu_imm(op::LSH, R1, 3).alu(op::ADD, R1, R8);
    a.load(Size::DW, R1, R1, 0);
    let found = a.label();
    // Not a kernel address: not a tracing one.
    a.jmp_imm(op::JSGE, R1, 0, found);
    // r2: the last range starting at or below it (or the first range).
    a.mov_imm(R2, 0);
    let mut stride = stacks.capacity / 2;
    while stride > 0 {
        a.mov(R3, R2)
            .alu_imm(op::ADD, R3, stride as i32)
            .alu_imm(op::LSH, R3, 4);
        a.alu(op::ADD, R3, R9).load(Size::DW, R3, R3, 0);
        // The sign of the address less the range's start: 1 when it is below, else 0; then
        // the other way round, and the stride or 0.
        a.mov(R5, R1).alu(op::SUB, R5, R3);
        a.alu_imm(op::RSH, R5, 63).alu_imm(op::XOR, R5, 1);
        a.alu_imm(op::LSH, R5, stride.trailing_zeros() as i32)
            .alu(op::ADD, R2, R5);
        stride /= 2;
    }
    a.alu_imm(op::LSH, R2, 4).alu(op::ADD, R2, R9);
    a.load(Size::DW, R3, R2, 0);
    a.jmp_reg(op::JLT, R1, R3, found);
    a.load(Size::DW, R3, R2, 8);
    a.jmp_reg(op::JGT, R1, R3, found);
    a.alu_imm(op::ADD, R4, 1).ja(next);
    // A frame past the tracing ones: r1 is the caller, r0 - r4 frames remain.
    a.bind(found);
    match what {
        StackValue::Caller => {
            a.mov(R0, R1);
        }
        StackValue::Depth => {
            a.alu(op::SUB, R0, R4);
        }
    }
    a.ja(result);
    // Every frame is a tracing one.
    a.bind(end);
    a.mov_imm(R0, 0);
    a.ja(result);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(first: u64, last: u64) -> TracingRange {
        TracingRange { first, last }
    }

    #[test]
    fn ranges_are_padded_to_a_power_of_two_with_empty_ones() {
        let r = [
            range(0xffff_ffff_8100_0000, 0xffff_ffff_8100_01ff),
            range(0xffff_ffff_8100_0300, 0xffff_ffff_8100_03ff),
            range(0xffff_ffff_a000_0000, u64::MAX),
        ];
        let (v, cap) = ranges_value(&r).unwrap();
        assert_eq!((cap, v.len()), (4, 4 * RANGE_SIZE));
        let word = |i: usize| u64::from_ne_bytes(v[8 * i..8 * i + 8].try_into().unwrap());
        assert_eq!((word(0), word(1)), (r[0].first, r[0].last));
        assert_eq!((word(4), word(5)), (r[2].first, r[2].last));
        // The padding holds no address: its first is above its last.
        assert_eq!((word(6), word(7)), (u64::MAX, 0));
        assert_eq!(ranges_value(&[]).unwrap().1, 1);
    }

    #[test]
    fn ranges_the_code_cannot_search_are_refused() {
        assert!(ranges_value(&[range(0x1000, 0x2000)]).is_err());
        let many = vec![range(u64::MAX, u64::MAX); MAX_TRACING_RANGES + 1];
        assert!(ranges_value(&many).is_err());
    }
}
