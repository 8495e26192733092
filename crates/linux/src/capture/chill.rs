//! `chill(ns)` at the probe: the probe's program spins until `bpf_ktime_get_ns()` has advanced by
//! `ns`, as DTrace's `dtrace_action_chill` spins in probe context, so the traced thread is the
//! one delayed (the interpreter can only sleep in dtrace). The budget is DTrace's and the
//! interpreter's: per CPU, at most `CHILL_MAX` nanoseconds in each interval of a second
//! (`NANOSEC`), kept in a per-CPU array ([`KernelAggs::chill`](super::spec::KernelAggs::chill):
//! the interval's start, then the nanoseconds chilled in it); a `chill()` past it spins not at
//! all and faults (`DTRACEFLT_ILLOP`, outside DIF, at its expression's last instruction) as the
//! interpreter's does.
//!
//! The spin is `bpf_loop` (Linux 5.17) calling back a subprogram of the program
//! (`insn::Asm::ld_callback`, with the BTF function records the loader adds), each call
//! reading the clock [`BURST`] times: the verifier sees each instruction once however long the
//! spin, where a bounded loop in the program itself is walked iteration by iteration and could
//! not reach a fraction of the budget. The loop's bound, [`LOOPS`] calls of [`BURST`] reads, is
//! far past the budget (each read takes some nanoseconds), and the budget, checked before the
//! spin, bounds it to half a second per second of each CPU whatever the clause asks. A kernel
//! without `bpf_loop`, or whose verifier counts the callback's frame on top of the probe code's
//! whole stack (Linux 6.1), keeps such a clause in dtrace with the reason
//! ([`crate::features::chill_at_probe`]).

use crate::bpf::insn::{helper, op, Asm, Label, Size, R0, R1, R10, R2, R3, R4, R6, R7, R8};
use dtrace_framework::exec::CHILL_MAX;
use dtrace_framework::options::NANOSEC;

/// Bytes of a CPU's value in the budget's per-CPU array: the start of the current interval,
/// then the nanoseconds chilled in it.
pub const STATE_SIZE: u32 = 16;
/// The callback's calls `bpf_loop` makes at most (the kernel's bound is 1 << 23).
const LOOPS: i32 = 1 << 23;
/// Clock reads per callback call.
const BURST: usize = 16;

/// `chill()` of the nanoseconds in r0, with the budget in per-CPU array `state`: spins, or on
/// a budget exceeded writes an illegal-operation fault at instruction `pc` of the clause's code
/// into the frame and jumps to `faulted`. `key_at` and `deadline_at` are free stack slots.
/// Uses r0-r5 and r8.
pub fn emit(a: &mut Asm, state: i32, pc: u32, (key_at, deadline_at): (i16, i16), faulted: Label) {
    let (done, reset, counted, illegal) = (a.label(), a.label(), a.label(), a.label());
    // The time asked, kept in the deadline's slot until the deadline replaces it.
    a.store(Size::DW, R10, deadline_at, R0);
    a.store_imm(Size::W, R10, key_at, 0);
    a.ld_map_fd(R1, state)
        .frame_addr(R2, i32::from(key_at))
        .call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, done);
    a.mov(R8, R0);
    a.call(helper::KTIME_GET_NS);
    // A new interval when more than a second passed since the current one started.
    a.load(Size::DW, R1, R8, 0);
    a.jmp_reg(op::JLE, R0, R1, counted);
    a.mov(R2, R0).alu(op::SUB, R2, R1);
    a.ld_imm64(R3, NANOSEC);
    a.jmp_reg(op::JGT, R2, R3, reset);
    a.ja(counted);
    a.bind(reset);
    a.store(Size::DW, R8, 0, R0);
    a.store_imm(Size::DW, R8, 8, 0);
    a.bind(counted);
    // Past the budget: nothing spent, an illegal operation.
    a.load(Size::DW, R1, R10, deadline_at);
    a.ld_imm64(R3, CHILL_MAX);
    a.jmp_reg(op::JGT, R1, R3, illegal);
    a.load(Size::DW, R2, R8, 8);
    a.alu(op::ADD, R2, R1);
    a.jmp_reg(op::JGT, R2, R3, illegal);
    a.store(Size::DW, R8, 8, R2);
    a.alu(op::ADD, R1, R0);
    a.store(Size::DW, R10, deadline_at, R1);
    a.mov_imm(R1, LOOPS);
    a.ld_callback(R2, "dt_chill_spin", spin);
    a.frame_addr(R3, i32::from(deadline_at))
        .mov_imm(R4, 0)
        .call(helper::LOOP);
    a.ja(done);
    a.bind(illegal);
    super::kagg::emit_illegal_op(a, pc, faulted);
    a.bind(done);
}

/// The callback: reads the clock [`BURST`] times, returning 1 (stop) once it reached the
/// deadline its context points at, else 0.
fn spin(a: &mut Asm) {
    let reached = a.label();
    a.mov(R6, R2);
    a.load(Size::DW, R7, R6, 0);
    for _ in 0..BURST {
        a.call(helper::KTIME_GET_NS);
        a.jmp_reg(op::JGE, R0, R7, reached);
    }
    a.mov_imm(R0, 0).exit();
    a.bind(reached);
    a.mov_imm(R0, 1).exit();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::{Map, MapKind, ProgKind, Program};

    /// A raw tracepoint program chilling the nanoseconds of its first argument; returns 1 when
    /// the chill faulted (the fault word's kind in the frame), else 0.
    fn chill_program(state: &Map) -> Program {
        use dtrace_ebpf::translate::Frame;
        let frame = super::super::filter::FRAME;
        let mut a = Asm::new();
        let faulted = a.label();
        a.mov(R6, R1);
        a.load(Size::DW, R0, R6, 0);
        let slots = (frame.base - Frame::SIZE - 8, frame.base - Frame::SIZE - 16);
        emit(&mut a, state.raw_fd(), 3, slots, faulted);
        a.mov_imm(R0, 0).exit();
        a.bind(faulted);
        a.load(Size::DW, R0, R10, frame.fault_at());
        a.exit();
        let insns = a.finish().unwrap();
        crate::bpf::insn::check_flow(&insns).unwrap();
        Program::load(
            ProgKind::RawTracepoint,
            &insns,
            "dt_chill_test",
            "chill test",
        )
        .unwrap()
    }

    /// Sets every CPU's budget: the interval started `ago` nanoseconds ago, `spent` chilled.
    fn set_budget(state: &Map, ago: u64, spent: u64) {
        let now = crate::provider::deliver::monotonic_ns();
        let cpus = crate::bpf::map::possible_cpus().unwrap();
        let mut v = Vec::new();
        for _ in 0..cpus {
            v.extend(now.saturating_sub(ago).to_ne_bytes());
            v.extend(spent.to_ne_bytes());
        }
        state.update(&0u32.to_ne_bytes(), &v).unwrap();
    }

    #[test]
    fn time_passes_within_the_budget_and_past_it_faults() {
        use std::time::{Duration, Instant};
        if !crate::features::have_bpf_loop() {
            eprintln!("skipped: no bpf_loop here (not root, or Linux before 5.17)");
            return;
        }
        let state = Map::create(MapKind::PerCpuArray, "dt_chill_t", 4, STATE_SIZE, 1).unwrap();
        let p = chill_program(&state);
        let run = |ns: u64| {
            let t = Instant::now();
            let r = p.test_run_raw_tp(&[ns]).unwrap();
            // The fault word's low half: its kind (0: no fault).
            (r, t.elapsed())
        };
        let illop = dtrace_dif::vm::FaultKind::IllOp.code();
        // Nothing spent: the whole budget at once is allowed, a nanosecond more is not.
        let (r, _) = run(CHILL_MAX + 1);
        assert_eq!(r, illop);
        // 450 of 500 ms spent in this second on every CPU: 30 ms pass, 80 more do not.
        set_budget(&state, 0, 450_000_000);
        let (r, took) = run(30_000_000);
        assert_eq!(r, 0);
        assert!(took >= Duration::from_millis(30), "{took:?}");
        let (r, took) = run(60_000_000);
        assert_eq!(r, illop);
        assert!(took < Duration::from_millis(60), "{took:?}");
        // An interval over a second old starts afresh.
        set_budget(&state, 1_100_000_000, CHILL_MAX);
        let (r, took) = run(100_000_000);
        assert_eq!(r, 0);
        assert!(took >= Duration::from_millis(100), "{took:?}");
    }
}
