//! An exact `vtimestamp`: the current thread's on-CPU nanoseconds at the instant a probe fires.
//!
//! The kernel keeps a thread's run time in `se.sum_exec_runtime`, brought up to date only when the
//! scheduler accounts (a tick, a context switch, a wake-up on the same run queue): between two
//! accountings it lags by up to a tick, so deltas inside one time slice would read 0. The
//! accounting time is `se.exec_start`, on the run queue's task clock, which no BPF clock reads.
//! But `sum_exec_runtime - exec_start` does not change while the thread runs (each accounting adds
//! to one what it adds to the other), so the exact value is
//! `sum_exec_runtime + (task clock now - exec_start)`, and only "task clock now" is missing.
//!
//! The [`Vclock`] supplies it, as DTrace's own scheduler hook does when a clause uses
//! `vtimestamp`: a program on the `sched_switch` tracepoint (BTF-typed where the kernel allows)
//! records, per CPU, the offset between `bpf_ktime_get_ns()` and the task clock (the incoming
//! thread's `exec_start` was set from that clock just before the tracepoint) and the time of the
//! switch. At a probe, [`emit_exact_vtime`] computes `sum + (now - offset - exec_start)`, bounded
//! by the time since this CPU's last switch, and falls back to the plain `sum_exec_runtime` on a
//! CPU that has not switched since tracing began ([`Vclock::start`] makes every CPU switch once).
//!
//! Steal time: a kernel built with `CONFIG_PARAVIRT_TIME_ACCOUNTING` leaves the time a hypervisor
//! took the CPU away out of the task clock (and so out of `sum_exec_runtime` and the thread CPU
//! clocks). Where it does, the switch program also records this CPU's steal total and a probe
//! subtracts the steal since the switch, so values stay on the task clock within a slice as across
//! slices. The total is the KVM per-CPU `steal_time` record where a program can read it (its BTF
//! names it; the loader finds its address in kallsyms, which takes `CONFIG_KALLSYMS_ALL`), else
//! the run queue's own count of the steal its clock left out (`rq->prev_steal_time_rq`, reached
//! from the current task), which lags the hypervisor's by the steal since the run queue's clock
//! was last updated (a tick at most). Without either, a thread spinning on a VM with steal reads
//! values ahead of its task clock within a slice, and then stands still at its floor (below) in
//! the next until the task clock catches up: a quarter of the samples of a spinning thread stood
//! still that way on a loaded 2-CPU VM.
//!
//! Errors: the offset measured at the switch lags the task clock by the time between the
//! scheduler reading its clock and the tracepoint, which errs low (harmless); time the task clock
//! leaves out and the probe cannot see (steal where the record cannot be read, interrupt time
//! with IRQ time accounting) is counted from the thread's switch-in to the probe, so a delta
//! within a slice errs high by it and one spanning slices errs either way; a thread could read a
//! value below one it read in its previous slice: [`VtimeFloor`] keeps each thread's values
//! non-decreasing in capture order, and for the values clauses read at the probe
//! ([`VtimeAt::R0`]) an LRU hash of threads does the same in the kernel. (A program on `sched_stat_runtime` measuring the offset again
//! at each accounting would bound that to one tick, but was seen to make values err by a tick
//! under emulated CPUs; not used.)
//!
//! Nothing here runs unless an enabled clause reads `vtimestamp`. Unlike DTrace, the value includes
//! the time of the capture programs themselves (DTrace subtracts its probe processing), so a delta
//! spanning a probe counts that probe's cost.

use crate::attach::Attachment;
use crate::bpf::insn::{helper, op, Asm, Insn, Size, R0, R1, R10, R2, R3, R4, R5, R6, R7, R8, R9};
use crate::bpf::{Map, MapKind, ProgKind, Program};
use crate::btf::Btf;
use crate::capture::layout::hdr;
use crate::error::{LinuxError, Result};
use std::collections::HashMap;

/// Offsets of the two scheduler fields read, in `struct task_struct`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VclockOffsets {
    /// `se.exec_start` (task-clock time of the last accounting).
    pub exec_start: u32,
    /// `se.sum_exec_runtime` (on-CPU nanoseconds up to that accounting).
    pub sum_exec_runtime: u32,
}

impl VclockOffsets {
    /// From parsed kernel BTF.
    pub fn from_btf(btf: &Btf) -> Result<VclockOffsets> {
        let missing = |what: &str| {
            LinuxError::Unavailable(format!(
                "an exact vtimestamp needs {what} in the kernel's BTF"
            ))
        };
        let task = btf
            .struct_id("task_struct")
            .ok_or_else(|| missing("struct task_struct"))?;
        let se = btf
            .member_offset(task, "se")
            .ok_or_else(|| missing("task_struct.se"))?;
        let sid = btf
            .struct_id("sched_entity")
            .ok_or_else(|| missing("struct sched_entity"))?;
        let field = |name: &str| {
            btf.member_offset(sid, name)
                .map(|o| se + o)
                .ok_or_else(|| missing(&format!("sched_entity.{name}")))
        };
        Ok(VclockOffsets {
            exec_start: field("exec_start")?,
            sum_exec_runtime: field("sum_exec_runtime")?,
        })
    }

    /// From the running kernel's BTF.
    pub fn from_vmlinux() -> Result<VclockOffsets> {
        Self::from_btf(&*Btf::load_vmlinux()?)
    }
}

/// Per-CPU record written at each context switch (a per-CPU array of one value).
pub mod slot {
    /// `bpf_ktime_get_ns()` minus the task clock (wrapping), at the last switch on this CPU.
    pub const OFFSET: i16 = 0;
    /// `bpf_ktime_get_ns()` at the last switch on this CPU (0: none seen yet).
    pub const SWITCH_NS: i16 = 8;
    /// This CPU's steal-time total at the last switch (when steal is subtracted).
    pub const STEAL: i16 = 16;
    /// The `bpf_ktime_get_ns()` time of the firing whose clauses last read `vtimestamp` at the
    /// probe on this CPU (`VtimeAt::R0`), and the value they read ([`FIRING_VTIME`]): the
    /// firing's later clauses read it again rather than compute it anew.
    pub const FIRING: i16 = 24;
    /// The `vtimestamp` of the firing at [`FIRING`].
    pub const FIRING_VTIME: i16 = 32;
    /// Bytes per value.
    pub const SIZE: u32 = 40;
}

/// Where a program reads this CPU's steal-time total.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StealClock {
    /// The KVM per-CPU record `steal_time` (`struct kvm_steal_time`), through `bpf_this_cpu_ptr`:
    /// the hypervisor's live total. Takes the record's address, which the kernel finds in
    /// kallsyms only with `CONFIG_KALLSYMS_ALL`.
    Record {
        /// BTF id of the `steal_time` variable in the kernel's BTF.
        var: u32,
        /// Offset of its `steal` member (nanoseconds stolen, maintained by the hypervisor).
        offset: i16,
    },
    /// The run queue's `prev_steal_time_rq`, reached from the current task
    /// (`task->se.cfs_rq->rq`, with group scheduling): the steal the run queue's clock has left
    /// out, as of its last update (every tick, switch and wake-up on this CPU), so a value errs by
    /// the steal since then at most rather than since the thread's switch-in.
    RunQueue {
        /// Offset of `se.cfs_rq` in `struct task_struct`.
        cfs_rq: u32,
        /// Offset of `rq` in `struct cfs_rq`.
        rq: u32,
        /// Offset of `prev_steal_time_rq` in `struct rq`.
        prev_steal: u32,
    },
}

impl StealClock {
    /// The steal clocks a program could subtract on the running kernel, best first: only where the
    /// kernel's task clock leaves steal time out (`CONFIG_PARAVIRT_TIME_ACCOUNTING`, not booted
    /// with `no-steal-acc`) and its BTF names the fields.
    fn for_running_kernel(btf: &Btf) -> Vec<StealClock> {
        let config = crate::kconfig::running();
        let subtracted =
            crate::kconfig::setting(config.as_deref(), "CONFIG_PARAVIRT_TIME_ACCOUNTING")
                == crate::kconfig::Setting::Set
                && !crate::kconfig::boot_flag("no-steal-acc");
        if !subtracted {
            return Vec::new();
        }
        let record = (|| {
            let (var, ty) = btf.var("steal_time")?;
            let offset = i16::try_from(btf.member_offset(ty, "steal")?).ok()?;
            Some(StealClock::Record { var, offset })
        })();
        let run_queue = (|| {
            let task = btf.struct_id("task_struct")?;
            let se = btf.member_offset(task, "se")?;
            let entity = btf.member_offset(btf.struct_id("sched_entity")?, "cfs_rq")?;
            let rq = btf.member_offset(btf.struct_id("cfs_rq")?, "rq")?;
            let prev_steal = btf.member_offset(btf.struct_id("rq")?, "prev_steal_time_rq")?;
            Some(StealClock::RunQueue {
                cfs_rq: se + entity,
                rq,
                prev_steal,
            })
        })();
        record.into_iter().chain(run_queue).collect()
    }

    /// Emits `dst = this CPU's steal total`. Clobbers r0-r5 and the stack slot at `slot`
    /// (8 bytes).
    fn emit_read(&self, a: &mut Asm, dst: crate::bpf::insn::Reg, slot: i16) {
        match *self {
            StealClock::Record { var, offset } => {
                a.ld_btf_var(R1, var).call(helper::THIS_CPU_PTR);
                a.load(Size::DW, dst, R0, offset);
            }
            StealClock::RunQueue {
                cfs_rq,
                rq,
                prev_steal,
            } => {
                // Three reads down the chain; a failed read zeroes the slot, so a broken chain
                // reads from a null page and ends in 0 (nothing subtracted).
                a.call(helper::GET_CURRENT_TASK).mov(R3, R0);
                for (i, off) in [cfs_rq, rq, prev_steal].into_iter().enumerate() {
                    if i > 0 {
                        a.load(Size::DW, R3, R10, slot);
                    }
                    a.alu_imm(op::ADD, R3, off as i32);
                    a.frame_addr(R1, slot as i32)
                        .mov_imm(R2, 8)
                        .call(helper::PROBE_READ_KERNEL);
                }
                a.load(Size::DW, dst, R10, slot);
            }
        }
    }
}

/// What a capture program needs to compute an exact `vtimestamp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VclockRef {
    /// The per-CPU switch record map.
    pub map: i32,
    /// Task field offsets.
    pub offsets: VclockOffsets,
    /// Every capture program type may read the current task's fields directly (through
    /// `bpf_get_current_task_btf`) rather than with `bpf_probe_read_kernel`.
    pub direct: bool,
    /// The steal clock to subtract within a slice (see the module notes), if any.
    pub steal: Option<StealClock>,
    /// The per-thread floor of the values computed for clauses at the probe ([`VtimeAt::R0`]):
    /// an LRU hash of a thread's key (its task address xor its thread id) to the last value
    /// given it, the kernel's [`VtimeFloor`].
    pub floor: i32,
}

/// Threads whose last `vtimestamp` the kernel's floor remembers ([`VclockRef::floor`]).
const FLOOR_THREADS: u32 = 1 << 16;

/// `raw_tp/sched_switch` arguments: `(bool preempt, struct task_struct *prev, struct task_struct
/// *next, unsigned int prev_state)`.
const SWITCH_NEXT: i16 = 2 * 8;

/// Generates the `sched_switch` program: for the incoming task, records
/// `ktime - next->se.exec_start`, `ktime` (and the steal total, where subtracted) in this CPU's
/// slot. `typed`: a BTF-typed raw tracepoint (`tp_btf`), which reads the field directly;
/// otherwise a plain raw tracepoint, which reads it with `bpf_probe_read_kernel`.
pub fn gen_switch(v: &VclockRef, typed: bool) -> Result<Vec<Insn>> {
    let mut a = Asm::new();
    let out = a.label();
    a.load(Size::DW, R6, R1, SWITCH_NEXT);
    a.store_imm(Size::W, R10, -4, 0);
    a.ld_map_fd(R1, v.map)
        .frame_addr(R2, -4)
        .call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, out).mov(R7, R0);
    if typed {
        a.load(Size::DW, R1, R6, off16(v.offsets.exec_start)?);
        a.store(Size::DW, R10, -16, R1);
    } else {
        a.frame_addr(R1, -16)
            .mov_imm(R2, 8)
            .mov(R3, R6)
            .alu_imm(op::ADD, R3, v.offsets.exec_start as i32)
            .call(helper::PROBE_READ_KERNEL);
        a.jmp_imm(op::JNE, R0, 0, out);
    }
    if let Some(steal) = v.steal {
        steal.emit_read(&mut a, R1, -8);
        a.store(Size::DW, R7, slot::STEAL, R1);
    }
    a.call(helper::KTIME_GET_NS);
    a.load(Size::DW, R1, R10, -16);
    a.mov(R2, R0).alu(op::SUB, R2, R1);
    a.store(Size::DW, R7, slot::OFFSET, R2);
    a.store(Size::DW, R7, slot::SWITCH_NS, R0);
    a.bind(out).mov_imm(R0, 0).exit();
    Ok(a.finish()?)
}

fn off16(off: u32) -> Result<i16> {
    i16::try_from(off).map_err(|_| LinuxError::Asm(format!("task field offset {off} out of range")))
}

/// Stack slots used while computing (free at this point of a capture program).
const READ_AT: i16 = -16;

/// Where [`emit_vtime`] finds the firing and leaves the `vtimestamp` it computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VtimeAt {
    /// In a capture program whose record is in r7, with `hdr::TASK` (the current task) and
    /// `hdr::KTIME` already filled: the value goes to `hdr::VTIME`, which also holds the steal
    /// total meanwhile. Clobbers r0-r5 and r8.
    Record,
    /// In a clause's code at the probe (`vtimestamp` translated, see `capture::filter`): the
    /// current task is read there and then, the firing's time from the stack slot `timestamp`
    /// (the framework's clock, read once per firing) less the offset in the control map's value
    /// at `clock`, and the value is left in r0. Every clause of a firing reads one value, as
    /// DTrace's `vtimestamp` does not advance within a firing: the first computes it and keeps
    /// it in this CPU's switch record ([`slot::FIRING`]), the others read it there (the
    /// scheduler's fields and the steal total a computation reads may move between two
    /// clauses: a tick, another CPU's wake-up on this run queue). Clobbers r1-r5, r8 and r9
    /// (the steal total meanwhile).
    R0 {
        /// The stack slot of the firing's `timestamp`.
        timestamp: i16,
        /// The control map (its value's [`crate::capture::spec::CONTROL_CLOCK`] word).
        control: i32,
    },
}

/// Emits, at the end of the [`VtimeAt::R0`] computation, the kernel's floor: r0 becomes at least
/// the last value given the current thread, and is remembered. Uses the stack slots at -16..-1.
fn emit_floor(a: &mut Asm, v: &VclockRef) {
    let (keep, done) = (a.label(), a.label());
    a.store(Size::DW, R10, READ_AT + 8, R0);
    a.call(helper::GET_CURRENT_TASK)
        .store(Size::DW, R10, READ_AT, R0);
    a.call(helper::GET_CURRENT_PID_TGID);
    a.alu_imm(op::LSH, R0, 32).alu_imm(op::RSH, R0, 32);
    a.load(Size::DW, R1, R10, READ_AT).alu(op::XOR, R0, R1);
    a.store(Size::DW, R10, READ_AT, R0);
    a.ld_map_fd(R1, v.floor)
        .frame_addr(R2, READ_AT as i32)
        .call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, keep);
    a.load(Size::DW, R1, R0, 0);
    a.load(Size::DW, R2, R10, READ_AT + 8);
    let raise = a.label();
    a.jmp_reg(op::JGT, R1, R2, raise);
    a.store(Size::DW, R0, 0, R2);
    a.ja(done);
    a.bind(raise).store(Size::DW, R10, READ_AT + 8, R1).ja(done);
    // A thread not seen yet (or forgotten): remembered from this value.
    a.bind(keep);
    a.ld_map_fd(R1, v.floor)
        .frame_addr(R2, READ_AT as i32)
        .frame_addr(R3, (READ_AT + 8) as i32)
        .mov_imm(R4, 0)
        .call(helper::MAP_UPDATE_ELEM);
    a.bind(done).load(Size::DW, R0, R10, READ_AT + 8);
}

/// Emits, in a capture program whose record is in r7 with `hdr::TASK` (the current task) and
/// `hdr::KTIME` already filled, the computation of the exact `vtimestamp` into `hdr::VTIME`.
/// Clobbers r0-r5, r8 and the stack slots at -16..-1.
pub fn emit_exact_vtime(a: &mut Asm, v: &VclockRef) {
    emit_vtime(a, v, VtimeAt::Record);
}

/// Emits the computation of the exact `vtimestamp` of the current thread, reading the firing and
/// leaving the value as `at` says. Uses the stack slots at -16..-1.
pub fn emit_vtime(a: &mut Asm, v: &VclockRef, at: VtimeAt) {
    let store = a.label();
    let o = v.offsets;
    if let Some(steal) = v.steal {
        // Kept aside until the value is computed.
        steal.emit_read(a, R1, READ_AT);
        match at {
            VtimeAt::Record => {
                a.store(Size::DW, R7, hdr::VTIME as i16, R1);
            }
            VtimeAt::R0 { .. } => {
                a.mov(R9, R1);
            }
        }
    }
    a.store_imm(Size::W, R10, READ_AT, 0);
    a.ld_map_fd(R1, v.map)
        .frame_addr(R2, READ_AT as i32)
        .call(helper::MAP_LOOKUP_ELEM);
    a.mov(R8, R0);
    // A clause at the probe reads the value an earlier clause of the firing computed, if any.
    let computed = a.label();
    if let VtimeAt::R0 { timestamp, control } = at {
        let compute = a.label();
        a.jmp_imm(op::JEQ, R8, 0, compute);
        emit_firing_ktime(a, R3, timestamp, control);
        a.load(Size::DW, R1, R8, slot::FIRING);
        a.jmp_reg(op::JNE, R1, R3, compute);
        a.load(Size::DW, R0, R8, slot::FIRING_VTIME);
        a.ja(computed);
        a.bind(compute);
    }
    // exec_start at READ_AT, sum_exec_runtime at READ_AT + 8: direct loads where allowed, else
    // one read when the fields are adjacent.
    let direct = v
        .direct
        .then(|| Some((off16(o.exec_start).ok()?, off16(o.sum_exec_runtime).ok()?)))
        .flatten();
    let read = |a: &mut Asm, to: i16, off: u32, len: i32| {
        match at {
            VtimeAt::Record => {
                a.load(Size::DW, R3, R7, hdr::TASK as i16);
            }
            VtimeAt::R0 { .. } => {
                a.call(helper::GET_CURRENT_TASK).mov(R3, R0);
            }
        }
        a.alu_imm(op::ADD, R3, off as i32);
        a.frame_addr(R1, to as i32)
            .mov_imm(R2, len)
            .call(helper::PROBE_READ_KERNEL);
    };
    if let Some((start, sum)) = direct {
        a.call(helper::GET_CURRENT_TASK_BTF);
        a.load(Size::DW, R1, R0, start)
            .store(Size::DW, R10, READ_AT, R1);
        a.load(Size::DW, R1, R0, sum)
            .store(Size::DW, R10, READ_AT + 8, R1);
    } else if o.sum_exec_runtime == o.exec_start + 8 {
        read(a, READ_AT, o.exec_start, 16);
    } else {
        read(a, READ_AT, o.exec_start, 8);
        read(a, READ_AT + 8, o.sum_exec_runtime, 8);
    }
    a.load(Size::DW, R0, R10, READ_AT + 8);
    a.jmp_imm(op::JEQ, R8, 0, store);
    // r3 = the firing's time.
    match at {
        VtimeAt::Record => {
            a.load(Size::DW, R3, R7, hdr::KTIME as i16);
        }
        VtimeAt::R0 { timestamp, control } => emit_firing_ktime(a, R3, timestamp, control),
    }
    a.load(Size::DW, R2, R8, slot::SWITCH_NS);
    a.jmp_imm(op::JEQ, R2, 0, store);
    // r4 = time since this CPU's last switch: the current thread has run at most that long since.
    a.mov(R4, R3).alu(op::SUB, R4, R2);
    a.jmp_imm(op::JSLE, R4, 0, store);
    // r3 = task clock now - exec_start.
    a.load(Size::DW, R1, R8, slot::OFFSET);
    a.alu(op::SUB, R3, R1);
    a.load(Size::DW, R5, R10, READ_AT);
    a.alu(op::SUB, R3, R5);
    a.jmp_imm(op::JSLE, R3, 0, store);
    if v.steal.is_some() {
        // Less the steal since the switch.
        let none = a.label();
        match at {
            VtimeAt::Record => {
                a.load(Size::DW, R5, R7, hdr::VTIME as i16);
            }
            VtimeAt::R0 { .. } => {
                a.mov(R5, R9);
            }
        }
        a.load(Size::DW, R1, R8, slot::STEAL);
        a.alu(op::SUB, R5, R1);
        a.jmp_imm(op::JSLE, R5, 0, none);
        a.alu(op::SUB, R3, R5);
        a.jmp_imm(op::JSLE, R3, 0, store);
        a.bind(none);
    }
    let add = a.label();
    a.jmp_reg(op::JLE, R3, R4, add);
    a.mov(R3, R4);
    a.bind(add).alu(op::ADD, R0, R3);
    a.bind(store);
    match at {
        VtimeAt::Record => {
            a.store(Size::DW, R7, hdr::VTIME as i16, R0);
        }
        // dtrace keeps records' values from going backwards ([`VtimeFloor`]); the kernel does
        // for the values clauses read there, and keeps the firing's for its later clauses.
        VtimeAt::R0 { timestamp, control } => {
            emit_floor(a, v);
            let kept = a.label();
            a.jmp_imm(op::JEQ, R8, 0, kept);
            emit_firing_ktime(a, R3, timestamp, control);
            a.store(Size::DW, R8, slot::FIRING, R3);
            a.store(Size::DW, R8, slot::FIRING_VTIME, R0);
            a.bind(kept);
        }
    }
    a.bind(computed);
}

/// `dst` = the firing's `bpf_ktime_get_ns()` time: its `timestamp` (in the stack slot
/// `timestamp`) less the offset in the control map's value. Uses r1.
fn emit_firing_ktime(a: &mut Asm, dst: crate::bpf::insn::Reg, timestamp: i16, control: i32) {
    a.load(Size::DW, dst, R10, timestamp);
    a.ld_map_value(R1, control, 0);
    a.load(Size::DW, R1, R1, crate::capture::spec::CONTROL_CLOCK as i16);
    a.alu(op::SUB, dst, R1);
}

/// The kernel side of an exact `vtimestamp`: the per-CPU switch records and the `sched_switch`
/// program filling them. Dropping it detaches the program.
pub struct Vclock {
    // Field order is drop order: detach first.
    _switch: (Attachment, Program),
    map: Map,
    _floor: Map,
    reference: VclockRef,
}

impl Vclock {
    /// Creates the map, attaches the `sched_switch` program, then has every online CPU this
    /// process may run on switch once (a helper thread visits each), so that threads already
    /// running get exact values from their next probe rather than from their next switch.
    pub fn start(name_prefix: &str) -> Result<Vclock> {
        let btf = Btf::load_vmlinux()?;
        let offsets = VclockOffsets::from_btf(&btf)?;
        let map = Map::create(
            MapKind::PerCpuArray,
            &format!("{name_prefix}_vclk"),
            4,
            slot::SIZE,
            1,
        )?;
        let switch_btf = btf.typedef_id("btf_trace_sched_switch");
        let steal = StealClock::for_running_kernel(&btf)
            .into_iter()
            .find(|s| steal_reads(s, switch_btf));
        let floor = Map::create(
            MapKind::LruHash,
            &format!("{name_prefix}_vfloor"),
            8,
            8,
            FLOOR_THREADS,
        )?;
        let r = VclockRef {
            map: map.raw_fd(),
            offsets,
            direct: direct_task_loads(&offsets, switch_btf),
            steal,
            floor: floor.raw_fd(),
        };
        let switch = attach_switch(&r, switch_btf, name_prefix)?;
        visit_cpus();
        Ok(Vclock {
            _switch: switch,
            map,
            _floor: floor,
            reference: r,
        })
    }

    /// What capture programs refer to.
    pub fn reference(&self) -> VclockRef {
        self.reference
    }

    /// Each CPU's last switch time (0: none seen), indexed by CPU number.
    pub fn switch_times(&self) -> Result<Vec<u64>> {
        let all = self.map.lookup(&0u32.to_le_bytes())?.unwrap_or_default();
        let per = slot::SIZE as usize;
        Ok(all
            .chunks(per.div_ceil(8) * 8)
            .map(|c| {
                let b = c.get(8..16).and_then(|b| <[u8; 8]>::try_from(b).ok());
                b.map_or(0, u64::from_le_bytes)
            })
            .collect())
    }
}

/// Whether programs of every type a capture uses accept direct loads of the current task's
/// fields (a small program of each kind is loaded and dropped).
fn direct_task_loads(o: &VclockOffsets, switch_btf: Option<u32>) -> bool {
    let (Ok(start), Ok(sum)) = (off16(o.exec_start), off16(o.sum_exec_runtime)) else {
        return false;
    };
    let mut a = Asm::new();
    a.call(helper::GET_CURRENT_TASK_BTF);
    a.load(Size::DW, R1, R0, start).load(Size::DW, R1, R0, sum);
    a.mov_imm(R0, 0).exit();
    let Ok(insns) = a.finish() else {
        return false;
    };
    program_kinds(switch_btf)
        .into_iter()
        .all(|k| Program::load_check(k, &insns, "dt_vclk_probe", "a direct task read").is_ok())
}

/// Loads and attaches the `sched_switch` program: BTF-typed where the kernel's BTF names the
/// tracepoint (`btf_id`; a direct read of the field, about half the program's cost), plain
/// otherwise.
fn attach_switch(
    r: &VclockRef,
    btf_id: Option<u32>,
    name_prefix: &str,
) -> Result<(Attachment, Program)> {
    let name = format!("{name_prefix}_vclk");
    let what = "vtimestamp (sched_switch)";
    let typed = btf_id.and_then(|btf_id| {
        let insns = gen_switch(r, true).ok()?;
        let prog = Program::load(ProgKind::TpBtf { btf_id }, &insns, &name, what).ok()?;
        let link = Attachment::tp_btf(&prog, what).ok()?;
        Some((link, prog))
    });
    match typed {
        Some(p) => Ok(p),
        None => {
            let insns = gen_switch(r, false)?;
            let prog = Program::load(ProgKind::RawTracepoint, &insns, &name, what)?;
            let link = Attachment::raw_tracepoint(&prog, "sched_switch")?;
            Ok((link, prog))
        }
    }
}

/// Program kinds a capture or the switch program may be.
fn program_kinds(switch_btf: Option<u32>) -> Vec<ProgKind> {
    let mut kinds = vec![
        ProgKind::Tracepoint,
        ProgKind::RawTracepoint,
        ProgKind::PerfEvent,
    ];
    kinds.extend(switch_btf.map(|btf_id| ProgKind::TpBtf { btf_id }));
    kinds
}

/// Whether programs of every kind may read the steal clock (a small program of each kind is
/// loaded and dropped).
fn steal_reads(steal: &StealClock, switch_btf: Option<u32>) -> bool {
    let mut a = Asm::new();
    steal.emit_read(&mut a, R1, -8);
    a.mov_imm(R0, 0).exit();
    let Ok(insns) = a.finish() else {
        return false;
    };
    program_kinds(switch_btf)
        .into_iter()
        .all(|k| Program::load_check(k, &insns, "dt_vclk_steal", "a steal clock read").is_ok())
}

/// Runs a short-lived thread on each online CPU in turn (where this process's affinity allows):
/// its arrival on a CPU is a context switch there.
fn visit_cpus() {
    let Ok(cpus) = crate::bpf::map::online_cpus() else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("dtrace-vclock".into())
        .spawn(move || {
            for cpu in cpus {
                // SAFETY: a zeroed cpu_set_t filled by CPU_SET, passed with its size, for the
                // calling thread (pid 0).
                unsafe {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    if cpu as usize >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
                        continue;
                    }
                    libc::CPU_SET(cpu as usize, &mut set);
                    if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
                    {
                        libc::sched_yield();
                    }
                }
            }
        })
        .map(|h| h.join());
}

/// Entries after which threads not heard of for [`FLOOR_STALE_NS`] are forgotten.
const FLOOR_PRUNE_AT: usize = 1 << 16;
/// See [`FLOOR_PRUNE_AT`].
const FLOOR_STALE_NS: u64 = 10_000_000_000;

/// Keeps each thread's `vtimestamp` from going backwards across its time slices (see the module
/// notes). Threads are told apart by thread id and task address, so a reused thread id starts
/// afresh, and the idle threads (all thread 0) are one each.
#[derive(Debug, Default)]
pub struct VtimeFloor {
    /// (tid, task) -> (last value, ktime of its event).
    last: HashMap<(u32, u64), (u64, u64)>,
}

impl VtimeFloor {
    /// A floor with no thread seen.
    pub fn new() -> VtimeFloor {
        VtimeFloor::default()
    }

    /// The value to report for thread `tid` (task `task`) whose probe at `ktime_ns` computed
    /// `vtime`: at least the last value reported for it.
    pub fn apply(&mut self, tid: u32, task: u64, ktime_ns: u64, vtime: u64) -> u64 {
        let key = (tid, task);
        if self.last.len() >= FLOOR_PRUNE_AT && !self.last.contains_key(&key) {
            self.last
                .retain(|_, (_, at)| ktime_ns.saturating_sub(*at) < FLOOR_STALE_NS);
        }
        let e = self.last.entry(key).or_insert((vtime, ktime_ns));
        e.0 = e.0.max(vtime);
        e.1 = ktime_ns;
        e.0
    }

    /// Threads remembered.
    pub fn len(&self) -> usize {
        self.last.len()
    }

    /// Whether no thread is remembered.
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_is_per_thread_and_resets_for_a_new_task() {
        let mut f = VtimeFloor::new();
        assert_eq!(f.apply(10, 0xa, 1, 100), 100);
        assert_eq!(f.apply(10, 0xa, 2, 90), 100);
        assert_eq!(f.apply(11, 0xb, 3, 50), 50);
        assert_eq!(f.apply(10, 0xa, 4, 130), 130);
        // Same id, another task: a new thread (or another CPU's idle thread), its own values.
        assert_eq!(f.apply(10, 0xc, 5, 7), 7);
        assert_eq!(f.apply(10, 0xa, 6, 120), 130);
        assert_eq!(f.apply(10, 0xc, 7, 6), 7);
        assert_eq!(f.len(), 3);
    }

    #[test]
    fn floor_forgets_stale_threads_when_full() {
        let mut f = VtimeFloor::new();
        for t in 0..FLOOR_PRUNE_AT as u32 {
            f.apply(t, 1, 0, 5);
        }
        f.apply(u32::MAX, 1, FLOOR_STALE_NS + 1, 5);
        assert_eq!(f.len(), 1);
    }

    #[test]
    fn programs_assemble() {
        let r = VclockRef {
            map: 3,
            offsets: VclockOffsets {
                exec_start: 200,
                sum_exec_runtime: 208,
            },
            direct: false,
            steal: None,
            floor: 4,
        };
        assert!(gen_switch(&r, true).is_ok());
        assert!(gen_switch(&r, false).is_ok());
        let mut a = Asm::new();
        emit_exact_vtime(&mut a, &r);
        a.mov_imm(R0, 0).exit();
        let one_read = a.finish().unwrap().len();
        let apart = VclockRef {
            offsets: VclockOffsets {
                exec_start: 200,
                sum_exec_runtime: 240,
            },
            ..r
        };
        let mut a = Asm::new();
        emit_exact_vtime(&mut a, &apart);
        a.mov_imm(R0, 0).exit();
        assert!(a.finish().unwrap().len() > one_read);
        let mut a = Asm::new();
        emit_exact_vtime(&mut a, &VclockRef { direct: true, ..r });
        a.mov_imm(R0, 0).exit();
        let insns = a.finish().unwrap();
        assert!(insns.len() < one_read);
        let steal = VclockRef {
            steal: Some(StealClock::Record {
                var: 9232,
                offset: 0,
            }),
            ..r
        };
        assert!(gen_switch(&steal, true).unwrap().len() > gen_switch(&r, true).unwrap().len());
        let mut a = Asm::new();
        emit_exact_vtime(&mut a, &steal);
        a.mov_imm(R0, 0).exit();
        assert!(a.finish().unwrap().len() > one_read);
        // At the probe, for a clause: the same computation, left in r0 (no store at the end).
        let run_queue = VclockRef {
            steal: Some(StealClock::RunQueue {
                cfs_rq: 200,
                rq: 300,
                prev_steal: 3240,
            }),
            ..r
        };
        assert!(
            gen_switch(&run_queue, true).unwrap().len() > gen_switch(&steal, true).unwrap().len()
        );
        for v in [r, apart, steal, run_queue, VclockRef { direct: true, ..r }] {
            let mut a = Asm::new();
            emit_vtime(
                &mut a,
                &v,
                VtimeAt::R0 {
                    timestamp: -24,
                    control: 5,
                },
            );
            a.exit();
            let insns = a.finish().unwrap();
            // No access through r7 (no record there).
            assert!(insns.iter().all(|i| i.dst != R7.0 && i.src != R7.0));
        }
    }

    #[test]
    fn offsets_from_the_running_kernel() {
        if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            return;
        }
        let o = VclockOffsets::from_vmlinux().unwrap();
        assert_ne!(o.exec_start, o.sum_exec_runtime);
    }
}
