//! Generation of capture programs: from a probe's argument sources and a [`CaptureSpec`] to eBPF
//! instructions that fill one ring-buffer record laid out by [`RecordLayout`]. Also the companion
//! program that re-reads user memory at a syscall's return when it was not resident at entry.

use super::address::{Evaluator, Slot};
use super::layout::{
    hdr, RecordLayout, ANCESTORS_HDR, BUILD_ID_FRAME, COPY_HDR, EXECARGS_HDR, FLAG_HANDED_OVER,
    FLAG_RETRY_ARMED, KIND_EVENT, KIND_RETRY, NARGS, STACK_HDR, UNWIND_HDR, UREGS_COUNT, UREGS_HDR,
};
use super::spec::{
    ArgSource, CaptureSpec, Condition, Identity, MemKind, MAX_ANCESTORS, MAX_COPIES,
};
use crate::bpf::insn::{
    helper, op, Asm, Insn, Label, Size, R0, R1, R10, R2, R3, R4, R6, R7, R8, R9,
};
use crate::error::{LinuxError, Result};

/// The context a program receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtxKind {
    /// A tracefs tracepoint record.
    Tracepoint,
    /// A raw tracepoint's u64 argument array.
    RawTracepoint,
    /// The same array in a BTF-typed raw tracepoint (`tp_btf`): task arguments are typed pointers
    /// helpers accept (the incoming task's kernel stack at `on-cpu`).
    TypedRawTracepoint,
    /// `struct bpf_perf_event_data` (pt_regs first).
    PerfEvent,
    /// A uprobe's `struct pt_regs` of the user registers.
    Uprobe,
    /// A kprobe's `struct pt_regs` of the kernel registers at a traced function's entry or return
    /// (`fbt` without BPF trampolines): its arguments and return value are read from them.
    Kprobe,
}

/// How a probe's context is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeShape {
    /// The context kind.
    pub ctx: CtxKind,
    /// Argument sources, arg0 first (at most [`NARGS`]).
    pub args: Vec<ArgSource>,
    /// Tests that must hold for the probe to fire.
    pub conditions: Vec<Condition>,
    /// Whose identity the record carries.
    pub identity: Identity,
    /// `task_struct` offsets (from BTF) to read the parent's pid at the probe; without them the
    /// session fills ppid from /proc.
    pub task: Option<crate::btf::TaskOffsets>,
}

/// Map descriptors a program refers to.
#[derive(Clone, Copy, Debug)]
pub struct MapFds {
    /// The ring buffer.
    pub ring: i32,
    /// The per-CPU drop counter (array of one u64).
    pub drops: i32,
    /// The principal buffers' room for records built at the probe (one account per CPU, see
    /// [`crate::room`] and `Session::set_record_room`): a clause whose record does not fit is
    /// skipped whole.
    pub room: i32,
    /// The pending-retry hash (tid -> ktime and addresses), when retry at return is on.
    pub pending: Option<i32>,
    /// With [`MapFds::pending`]: an array of one u64 counting the entries armed and not yet
    /// served (never fewer than the hash holds; more once the LRU evicts one), so the return
    /// side of a syscall whose entries never arm a retry (their strings were readable) costs a
    /// load, not a hash lookup, per return.
    pub pending_armed: Option<i32>,
    /// When the consumer is woken (`None`: at every record, as the kernel wakes a reader that
    /// had read everything). Between wake-ups the consumer reads at its own rate (its poll
    /// timeout), as DTrace's switchrate does; sparing a wake-up per record is most of the cost of
    /// a capture.
    pub wakeup: Option<Wakeup>,
    /// Wake the consumer at every record, whatever [`MapFds::wakeup`] says (see
    /// [`crate::capture::CaptureSpec::wake_at_once`]).
    pub wake_at_once: bool,
    /// The thread-variable mirror (`(tid, variable) -> address`), when a probe saves or copies
    /// thread-local addresses.
    pub mirror: Option<i32>,
    /// The per-CPU switch records of an exact `vtimestamp`, when a clause reads it
    /// ([`crate::vtime`]); without it `vtimestamp` is the scheduler's last accounting.
    pub vclock: Option<crate::vtime::VclockRef>,
}

/// When a record wakes the consumer: once this many bytes wait in the ring, and only while the
/// consumer sleeps on it (see [`crate::wakeup`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wakeup {
    /// The bytes waiting in the ring that make a record wake the consumer.
    pub bytes: u32,
    /// The consumer's sleep word (an array of one u64, [`crate::wakeup::SleepWord`]).
    pub sleep_word: i32,
}

const BPF_RB_NO_WAKEUP: i32 = 1;
const BPF_RB_FORCE_WAKEUP: i32 = 2;
const BPF_RB_AVAIL_DATA: i32 = 0;

/// Submits the record in r7, waking the consumer only when enough data waits and it sleeps: it
/// sleeps until then, or until its own next deadline, and drains the ring whenever it wakes. The
/// record that wakes it clears its sleep word, so the records after it, while it reads, raise no
/// wake-up of their own. A probe whose records dtrace must act on at once wakes it at every
/// record (forced: the adaptive wake-up of flags 0 wakes only a consumer that had read
/// everything, and records batched before this one may still wait).
pub(crate) fn emit_submit(a: &mut Asm, maps: &MapFds) {
    emit_submit_record(a, maps, false);
}

/// [`emit_submit`], of a record reserved through its dynptr when `tails` (see
/// [`super::sized`]).
fn emit_submit_record(a: &mut Asm, maps: &MapFds, tails: bool) {
    let submit = |a: &mut Asm| match tails {
        true => super::sized::emit_tail_submit(a),
        false => {
            a.mov(R1, R7).call(helper::RINGBUF_SUBMIT);
        }
    };
    if maps.wake_at_once {
        a.mov_imm(R2, BPF_RB_FORCE_WAKEUP);
        submit(a);
        return;
    }
    let Some(wakeup) = maps.wakeup else {
        a.mov_imm(R2, 0);
        submit(a);
        return;
    };
    let quiet = a.label();
    a.ld_map_fd(R1, maps.ring)
        .mov_imm(R2, BPF_RB_AVAIL_DATA)
        .call(helper::RINGBUF_QUERY);
    a.mov_imm(R2, BPF_RB_NO_WAKEUP);
    a.jmp_imm(op::JLT, R0, wakeup.bytes as i32, quiet);
    a.ld_map_value(R1, wakeup.sleep_word, crate::wakeup::ASLEEP);
    a.load(Size::DW, R0, R1, 0);
    a.jmp_imm(op::JEQ, R0, 0, quiet);
    a.store_imm(Size::DW, R1, 0, 0);
    a.mov_imm(R2, BPF_RB_FORCE_WAKEUP);
    a.bind(quiet);
    submit(a);
}

/// Stack slots.
const SCRATCH: i16 = -8;
const KEY: i16 = -16;
/// Bytes of a pending retry's key: the thread id and the probe's tag (one map serves a session's
/// probes; a thread is in one syscall at a time).
pub const PENDING_KEY_SIZE: u32 = 8;
/// The pending value: ktime, one address per copy (before its user pointer hops), then one length
/// per copy (the sizing argument's value, for copies sized at the probe).
pub const PENDING_VALUE_SIZE: u32 = 8 * (1 + 2 * MAX_COPIES as u32);
/// Offset in the pending value of copy `i`'s length.
const fn pending_len(i: usize) -> i16 {
    (8 * (1 + MAX_COPIES + i)) as i16
}
const PENDING: i16 = KEY - PENDING_VALUE_SIZE as i16;

// pt_regs offsets on x86-64 (ip and cs).
const REGS_IP: i16 = super::regs::RIP as i16;
const REGS_CS: i16 = 17 * 8;
const BPF_F_USER_STACK: i32 = 1 << 8;
/// The lowest offset of the system call argument registers (`%r10`) and the bytes from there to
/// the end of `%rdi`: one read copies all six.
const REGS_FIRST: i32 = super::regs::R10 as i32;
const REGS_SPAN: i32 = super::regs::RDI as i32 + 8 - REGS_FIRST;
/// Stack slot of that copy (below the pending value).
const REGS_COPY: i16 = PENDING - REGS_SPAN as i16;
/// The lowest stack slot a record's body uses (see [`super::sized::DYNPTR`], below it).
pub(super) const BODY_STACK_END: i16 = REGS_COPY;

/// Copies the saved argument registers (`ctx[0]`, a `struct pt_regs *`) to the stack.
fn emit_syscall_regs(a: &mut Asm, shape: &ProbeShape) {
    emit_saved_regs(a, shape.ctx, REGS_FIRST, REGS_SPAN / 8, REGS_COPY);
}

/// `-EFAULT`.
const EFAULT: i32 = -14;

/// Copies `words` words of the saved registers (`ctx[0]`, a `struct pt_regs *`, of a raw
/// tracepoint's program, context in r6) from their offset `from` to the stack at `to`: loads
/// where the context is BTF-typed (the verifier knows the pointer's type and checks each load:
/// no helper call), else one `bpf_probe_read_kernel()`. Leaves 0 in r0, or a negative errno
/// when the registers could not be read (the stack slots then hold zeros). Uses r0-r5.
pub(super) fn emit_saved_regs(a: &mut Asm, ctx: CtxKind, from: i32, words: i32, to: i16) {
    if ctx == CtxKind::TypedRawTracepoint {
        let (null, done) = (a.label(), a.label());
        a.load(Size::DW, R3, R6, 0);
        a.jmp_imm(op::JEQ, R3, 0, null);
        for w in 0..words {
            a.load(Size::DW, R1, R3, (from + 8 * w) as i16).store(
                Size::DW,
                R10,
                to + 8 * w as i16,
                R1,
            );
        }
        a.mov_imm(R0, 0).ja(done);
        a.bind(null);
        for w in 0..words {
            a.store_imm(Size::DW, R10, to + 8 * w as i16, 0);
        }
        a.mov_imm(R0, EFAULT);
        a.bind(done);
    } else {
        a.load(Size::DW, R3, R6, 0).alu_imm(op::ADD, R3, from);
        a.frame_addr(R1, i32::from(to))
            .mov_imm(R2, 8 * words)
            .call(helper::PROBE_READ_KERNEL);
    }
}

/// Highest syscall number the dispatcher accepts (exclusive).
pub const MAX_SYSCALL_NR: u32 = 1024;
const BPF_F_USER_BUILD_ID: i32 = 1 << 11;

fn off16(v: usize, what: &str) -> Result<i16> {
    i16::try_from(v).map_err(|_| LinuxError::Asm(format!("{what} offset {v} out of range")))
}

fn load_field(
    a: &mut Asm,
    dst: crate::bpf::Reg,
    offset: u16,
    size: u8,
    signed: bool,
) -> Result<()> {
    let sz = Size::for_bytes(size as usize)
        .ok_or_else(|| LinuxError::Asm(format!("field of {size} bytes")))?;
    a.load(sz, dst, R6, off16(offset as usize, "field")?);
    if signed {
        a.sign_extend(dst, size as usize);
    }
    Ok(())
}

/// `bpf_probe_read_kernel(dst + dst_off, size, src + src_off)`.
pub(super) fn read_kernel(
    a: &mut Asm,
    dst: crate::bpf::Reg,
    dst_off: i32,
    size: i32,
    src: crate::bpf::Reg,
    src_off: i32,
) {
    a.mov(R3, src).alu_imm(op::ADD, R3, src_off);
    a.mov(R1, dst)
        .alu_imm(op::ADD, R1, dst_off)
        .mov_imm(R2, size)
        .call(helper::PROBE_READ_KERNEL);
}

/// The task offsets a probe needs, or an error saying what needs them.
fn task_offsets(shape: &ProbeShape, what: &str) -> Result<crate::btf::TaskOffsets> {
    shape.task.ok_or_else(|| {
        LinuxError::Unavailable(format!(
            "{what} needs task_struct offsets from the kernel's BTF (/sys/kernel/btf/vmlinux)"
        ))
    })
}

/// Fills the identity part of the header (tid, pid, ppid, comm, uid, gid, task, vtime) from the
/// `struct task_struct *` in r8.
fn emit_task_identity(a: &mut Asm, shape: &ProbeShape) -> Result<()> {
    let t = task_offsets(shape, "the identity of another thread")?;
    let o = t.other.ok_or_else(|| {
        LinuxError::Unavailable("task_struct pid/comm/cred offsets missing from the BTF".into())
    })?;
    let rec = |f: usize| f as i32;
    a.store(Size::DW, R7, hdr::TASK as i16, R8);
    read_kernel(a, R7, rec(hdr::TID), 4, R8, o.pid as i32);
    read_kernel(a, R7, rec(hdr::PID), 4, R8, t.tgid as i32);
    read_kernel(a, R7, rec(hdr::COMM), 16, R8, o.comm as i32);
    read_kernel(a, R10, SCRATCH as i32, 8, R8, t.real_parent as i32);
    a.load(Size::DW, R4, R10, SCRATCH);
    read_kernel(a, R7, rec(hdr::PPID), 4, R4, t.tgid as i32);
    read_kernel(a, R10, SCRATCH as i32, 8, R8, o.cred as i32);
    a.load(Size::DW, R4, R10, SCRATCH);
    read_kernel(a, R7, rec(hdr::UID), 4, R4, o.uid as i32);
    a.load(Size::DW, R4, R10, SCRATCH);
    read_kernel(a, R7, rec(hdr::GID), 4, R4, o.gid as i32);
    a.store_imm(Size::DW, R7, hdr::VTIME as i16, 0);
    if let Some(off) = t.sum_exec_runtime {
        read_kernel(a, R7, rec(hdr::VTIME), 8, R8, off as i32);
    }
    Ok(())
}

/// Copies the process's argument area (`mm->arg_start..arg_end`, at most `cap` bytes) into the
/// record's slot at `at`: its header gets the bytes copied, 0 for a task without memory (a kernel
/// thread), or the read's negative errno.
fn emit_execargs(a: &mut Asm, shape: &ProbeShape, at: usize, cap: usize) -> Result<()> {
    if shape.identity != Identity::Current {
        return Err(LinuxError::Unavailable(
            "execargs of a thread other than the current one (its memory is not mapped)".into(),
        ));
    }
    let aa = task_offsets(shape, "execargs")?.args_area.ok_or_else(|| {
        LinuxError::Unavailable("mm_struct.arg_start missing from the BTF".into())
    })?;
    let res = off16(at, "execargs")?;
    let (done, pos, fits) = (a.label(), a.label(), a.label());
    a.store_imm(Size::DW, R7, res, 0);
    a.load(Size::DW, R4, R7, hdr::TASK as i16);
    read_kernel(a, R10, SCRATCH as i32, 8, R4, aa.mm as i32);
    a.load(Size::DW, R8, R10, SCRATCH);
    a.jmp_imm(op::JEQ, R8, 0, done);
    read_kernel(a, R10, KEY as i32, 8, R8, aa.arg_end as i32);
    read_kernel(a, R10, SCRATCH as i32, 8, R8, aa.arg_start as i32);
    a.load(Size::DW, R8, R10, SCRATCH);
    a.load(Size::DW, R2, R10, KEY).alu(op::SUB, R2, R8);
    a.jmp_imm(op::JSGT, R2, 0, pos).ja(done);
    a.bind(pos);
    a.jmp_imm(op::JLE, R2, cap as i32, fits)
        .mov_imm(R2, cap as i32);
    a.bind(fits).store(Size::DW, R10, KEY, R2);
    a.mov(R1, R7)
        .alu_imm(op::ADD, R1, (at + EXECARGS_HDR) as i32)
        .mov(R3, R8)
        .call(helper::PROBE_READ_USER);
    let ok = a.label();
    a.jmp_imm(op::JEQ, R0, 0, ok);
    a.store(Size::DW, R7, res, R0).ja(done);
    a.bind(ok).load(Size::DW, R0, R10, KEY);
    a.store(Size::DW, R7, res, R0);
    a.bind(done);
    Ok(())
}

/// Records the process ids up the task's `real_parent` chain, nearest first, stopping after pid 1
/// (or 0) or [`MAX_ANCESTORS`] of them, in the slot at `at` (count, then the pids).
fn emit_ancestors(a: &mut Asm, shape: &ProbeShape, at: usize) -> Result<()> {
    let t = task_offsets(shape, "progenyof()")?;
    let done = a.label();
    a.store_imm(Size::W, R7, off16(at, "ancestors")?, 0);
    a.load(Size::DW, R8, R7, hdr::TASK as i16);
    for i in 0..MAX_ANCESTORS {
        let slot = at + ANCESTORS_HDR + 4 * i;
        read_kernel(a, R10, SCRATCH as i32, 8, R8, t.real_parent as i32);
        a.load(Size::DW, R8, R10, SCRATCH);
        a.jmp_imm(op::JEQ, R8, 0, done);
        read_kernel(a, R7, slot as i32, 4, R8, t.tgid as i32);
        a.store_imm(Size::W, R7, off16(at, "ancestors")?, (i + 1) as i32);
        a.load(Size::W, R0, R7, off16(slot, "ancestors")?);
        a.jmp_imm(op::JLE, R0, 1, done);
    }
    a.bind(done);
    Ok(())
}

/// The `struct pt_regs` offset holding a traced function's argument or return value at a kprobe.
fn func_reg(src: ArgSource) -> Result<i16> {
    match src {
        ArgSource::FuncRet => Ok(super::regs::RAX as i16),
        ArgSource::FuncArg(n) => super::regs::CALL_ARGS
            .get(n as usize)
            .map(|&r| r as i16)
            .ok_or_else(|| {
                LinuxError::Asm(format!("argument {n} of a function is not in a register"))
            }),
        _ => Err(LinuxError::Asm(format!(
            "{src:?} is not a function's value"
        ))),
    }
}

fn need_ctx(shape: &ProbeShape, want: CtxKind, what: &str) -> Result<()> {
    let have = match shape.ctx {
        CtxKind::TypedRawTracepoint => CtxKind::RawTracepoint,
        k => k,
    };
    if have != want {
        return Err(LinuxError::Asm(format!(
            "{what} needs a {want:?} context, probe has {:?}",
            shape.ctx
        )));
    }
    Ok(())
}

/// Where `struct pt_regs` keeps a system call's number (`orig_ax` on x86-64).
const ORIG_AX: i32 = 15 * 8;

/// At the `sys_exit` raw tracepoint (context of kind `ctx` in r6; its first argument the saved
/// registers): reads the system call's number from the registers' `orig_ax` into [`SCRATCH`],
/// 0 in r0 (or a negative errno when it could not be read). Uses r0-r5.
fn emit_exit_syscall_nr(a: &mut Asm, ctx: CtxKind) {
    emit_saved_regs(a, ctx, ORIG_AX, 1, SCRATCH);
}

/// Skips to `out` unless the running task returns 0 from one of the system calls `nrs` at the
/// `sys_exit` raw tracepoint: a task's first return to user mode, from the call that made it (only
/// the new task gets 0; its parent gets the new id or an error), and with `process_only` only
/// where it is a process's first thread. (A new task's first switch-in is no such test: on some
/// kernels no `sched_switch` program sees a new thread's first switch-in, now and then.)
fn emit_fork_child(
    a: &mut Asm,
    shape: &ProbeShape,
    nrs: [i32; 4],
    process_only: bool,
    out: Label,
) -> Result<()> {
    need_ctx(shape, CtxKind::RawTracepoint, "a new task's return")?;
    a.load(Size::DW, R0, R6, 8);
    a.jmp_imm(op::JNE, R0, 0, out);
    emit_exit_syscall_nr(a, shape.ctx);
    a.jmp_imm(op::JNE, R0, 0, out);
    a.load(Size::DW, R0, R10, SCRATCH);
    let made = a.label();
    for nr in nrs.into_iter().filter(|&n| n >= 0) {
        a.jmp_imm(op::JEQ, R0, nr, made);
    }
    a.ja(out);
    a.bind(made);
    if process_only {
        a.call(helper::GET_CURRENT_PID_TGID);
        a.mov(R1, R0).alu_imm(op::RSH, R1, 32);
        a.alu_imm(op::LSH, R0, 32).alu_imm(op::RSH, R0, 32);
        a.jmp_reg(op::JNE, R0, R1, out);
    }
    Ok(())
}

fn emit_conditions(a: &mut Asm, shape: &ProbeShape, out: Label) -> Result<()> {
    for c in &shape.conditions {
        if let Condition::ForkChild { nrs, process_only } = *c {
            emit_fork_child(a, shape, nrs, process_only, out)?;
            continue;
        }
        match *c {
            Condition::MaskSet { offset, size, mask } => {
                cond_load(a, shape, offset, size, false)?;
                a.alu_imm(op::AND, R0, mask as i32);
                a.jmp_imm(op::JEQ, R0, 0, out);
            }
            Condition::MaskClear { offset, size, mask } => {
                cond_load(a, shape, offset, size, false)?;
                a.alu_imm(op::AND, R0, mask as i32);
                a.jmp_imm(op::JNE, R0, 0, out);
            }
            Condition::Equals {
                offset,
                size,
                value,
            } => {
                cond_load(a, shape, offset, size, true)?;
                a.jmp_imm(op::JNE, R0, value, out);
            }
            Condition::Negative { offset, size } => {
                cond_load(a, shape, offset, size, true)?;
                a.jmp_imm(op::JSGE, R0, 0, out);
            }
            Condition::Positive { offset, size } => {
                cond_load(a, shape, offset, size, true)?;
                a.jmp_imm(op::JSLE, R0, 0, out);
            }
            Condition::Fault { sig, info, task } => {
                need_ctx(shape, CtxKind::RawTracepoint, "a fault condition")?;
                let at = |n: u8| off16(8 * n as usize, "raw argument");
                super::fault::emit_condition(a, at(sig)?, at(info)?, at(task)?, SCRATCH, out);
            }
            Condition::OnCpu(cpu) => {
                a.call(helper::GET_SMP_PROCESSOR_ID);
                a.jmp_imm(op::JNE, R0, cpu as i32, out);
            }
            Condition::ForkChild { .. } => {}
        }
    }
    Ok(())
}

/// Loads the value a condition tests into R0: a field of a tracepoint record, or in a raw
/// tracepoint's context the argument at `offset` (a multiple of 8; every argument is widened to 8
/// bytes there), of which the low `size` bytes are tested.
fn cond_load(a: &mut Asm, shape: &ProbeShape, offset: u16, size: u8, signed: bool) -> Result<()> {
    if matches!(
        shape.ctx,
        CtxKind::RawTracepoint | CtxKind::TypedRawTracepoint | CtxKind::Kprobe
    ) {
        if !offset.is_multiple_of(8) {
            return Err(LinuxError::Asm(format!(
                "raw tracepoint condition at offset {offset}"
            )));
        }
        // A kprobe on a traced function tests argument offset / 8 in its register.
        let at = match shape.ctx {
            CtxKind::Kprobe => func_reg(ArgSource::FuncArg((offset / 8) as u8))?,
            _ => off16(offset as usize, "raw argument")?,
        };
        a.load(Size::DW, R0, R6, at);
        if size < 8 {
            if signed {
                a.sign_extend(R0, size as usize);
            } else {
                let bits = 64 - 8 * i32::from(size);
                a.alu_imm(op::LSH, R0, bits).alu_imm(op::RSH, R0, bits);
            }
        }
        return Ok(());
    }
    need_ctx(shape, CtxKind::Tracepoint, "a record condition")?;
    load_field(a, R0, offset, size, signed)
}

/// Leaves the value of argument source `src` in r0 (the context in r6; uses r0-r5, r8 and the
/// scratch and key slots).
/// Calls map helper `call` on map `map` with the key at `fp + slot`: r1 the map, r2 the key
/// (a caller of `bpf_map_update_elem` sets r3 and r4 first); r0 the result. Uses r0-r5.
pub(crate) fn emit_keyed_call(a: &mut Asm, map: i32, slot: i16, call: i32) {
    a.ld_map_fd(R1, map)
        .frame_addr(R2, i32::from(slot))
        .call(call);
}

/// The key of the current thread's pending retry of probe `tag` at [`KEY`] (see
/// [`PENDING_KEY_SIZE`]). Uses r0-r5.
fn emit_pending_key(a: &mut Asm, tag: u32) {
    emit_thread_key(a, KEY);
    a.store_imm(Size::W, R10, KEY + 4, tag as i32);
}

/// Stores the current thread's id at `fp + slot`: the 4-byte key of the maps kept by thread
/// (kept firings; with the probe's tag, pending retries). Uses r0-r5.
pub(crate) fn emit_thread_key(a: &mut Asm, slot: i16) {
    a.call(helper::GET_CURRENT_PID_TGID)
        .store(Size::W, R10, slot, R0);
}

pub(crate) fn emit_arg(a: &mut Asm, shape: &ProbeShape, src: ArgSource) -> Result<()> {
    match src {
        ArgSource::Field {
            offset,
            size,
            signed,
        } => {
            need_ctx(shape, CtxKind::Tracepoint, "a record field")?;
            load_field(a, R0, offset, size, signed)?;
        }
        ArgSource::RawArg(n) => {
            need_ctx(shape, CtxKind::RawTracepoint, "a raw argument")?;
            a.load(Size::DW, R0, R6, off16(8 * n as usize, "raw argument")?);
        }
        ArgSource::FuncArg(_) | ArgSource::FuncRet if shape.ctx == CtxKind::Kprobe => {
            a.load(Size::DW, R0, R6, func_reg(src)?);
        }
        ArgSource::FuncArg(_) | ArgSource::FuncRet => {
            if shape.ctx != CtxKind::TypedRawTracepoint {
                return Err(LinuxError::Asm(format!(
                    "a traced function's argument needs an fentry/fexit context, probe has {:?}",
                    shape.ctx
                )));
            }
            a.store_imm(Size::DW, R10, SCRATCH, 0);
            a.mov(R1, R6);
            if let ArgSource::FuncArg(n) = src {
                a.mov_imm(R2, i32::from(n));
                a.frame_addr(R3, SCRATCH as i32);
                a.call(helper::GET_FUNC_ARG);
            } else {
                a.frame_addr(R2, SCRATCH as i32);
                a.call(helper::GET_FUNC_RET);
            }
            a.load(Size::DW, R0, R10, SCRATCH);
        }
        ArgSource::RawArgLoad { arg, offset } => {
            need_ctx(shape, CtxKind::RawTracepoint, "a raw argument")?;
            let done = a.label();
            a.store_imm(Size::DW, R10, SCRATCH, 0);
            a.load(Size::DW, R8, R6, off16(8 * arg as usize, "raw argument")?);
            a.jmp_imm(op::JEQ, R8, 0, done);
            read_kernel(a, R10, SCRATCH as i32, 8, R8, i32::from(offset));
            a.bind(done).load(Size::DW, R0, R10, SCRATCH);
        }
        ArgSource::FaultCode { sig, info } => {
            need_ctx(shape, CtxKind::RawTracepoint, "a fault code")?;
            let at = |n: u8| off16(8 * n as usize, "raw argument");
            super::fault::emit_code(a, at(sig)?, at(info)?, SCRATCH);
        }
        ArgSource::KernelPc | ArgSource::UserPc => {
            need_ctx(shape, CtxKind::PerfEvent, "a sampled PC")?;
            let (user, done) = (a.label(), a.label());
            a.load(Size::DW, R0, R6, REGS_CS).alu_imm(op::AND, R0, 3);
            a.jmp_imm(op::JNE, R0, 0, user);
            // Kernel mode.
            if src == ArgSource::KernelPc {
                a.load(Size::DW, R0, R6, REGS_IP);
            } else {
                a.mov_imm(R0, 0);
            }
            a.ja(done).bind(user);
            if src == ArgSource::UserPc {
                a.load(Size::DW, R0, R6, REGS_IP);
            } else {
                a.mov_imm(R0, 0);
            }
            a.bind(done);
        }
        ArgSource::Const(v) => {
            a.mov_imm(R0, v);
        }
        ArgSource::Kept { map, n } if usize::from(n) < super::spec::REPLAY_ARGS => {
            let none = a.label();
            emit_thread_key(a, SCRATCH);
            emit_keyed_call(a, map, SCRATCH, helper::MAP_LOOKUP_ELEM);
            a.jmp_imm(op::JEQ, R0, 0, none);
            let at = super::spec::REPLAY_ARGS_AT + 8 * n as usize;
            a.load(Size::DW, R0, R0, off16(at, "kept argument")?);
            a.bind(none);
        }
        ArgSource::Kept { .. } => {
            a.mov_imm(R0, 0);
        }
        ArgSource::UserReg {
            offset,
            size,
            signed,
        } => {
            need_ctx(shape, CtxKind::Uprobe, "a user register")?;
            load_field(a, R0, offset, size, signed)?;
        }
        ArgSource::UserMem {
            reg,
            disp,
            size,
            signed,
        } => {
            need_ctx(shape, CtxKind::Uprobe, "a user register")?;
            a.store_imm(Size::DW, R10, SCRATCH, 0);
            a.load(Size::DW, R3, R6, off16(reg as usize, "register")?)
                .alu_imm(op::ADD, R3, disp);
            a.frame_addr(R1, SCRATCH as i32)
                .mov_imm(R2, i32::from(size.clamp(1, 8)))
                .call(helper::PROBE_READ_USER);
            let sz = Size::for_bytes(size as usize)
                .ok_or_else(|| LinuxError::Asm(format!("user value of {size} bytes")))?;
            a.load(sz, R0, R10, SCRATCH);
            if signed {
                a.sign_extend(R0, size as usize);
            }
        }
        ArgSource::SyscallArg(n) => {
            // Read from the copy of the argument registers made once by `emit_syscall_regs`.
            need_ctx(shape, CtxKind::RawTracepoint, "a syscall argument")?;
            let off = super::regs::SYSCALL_ARGS
                .get(n as usize)
                .map(|&r| i32::from(r))
                .ok_or_else(|| LinuxError::Asm(format!("syscall argument {n}")))?;
            a.load(Size::DW, R0, R10, REGS_COPY + (off - REGS_FIRST) as i16);
        }
        ArgSource::PiNewPrio { task, donor } => {
            need_ctx(shape, CtxKind::RawTracepoint, "a task argument")?;
            let (normal, prio) = task_offsets(shape, "sched:::change-pri")?
                .prios
                .ok_or_else(|| {
                    LinuxError::Unavailable(
                        "task_struct priority offsets missing from the BTF".into(),
                    )
                })?;
            let (no_donor, done) = (a.label(), a.label());
            a.load(Size::DW, R8, R6, off16(8 * task as usize, "raw argument")?);
            read_kernel(a, R10, SCRATCH as i32, 4, R8, normal as i32);
            a.store_imm(Size::W, R10, KEY, i32::MAX);
            a.load(Size::DW, R8, R6, off16(8 * donor as usize, "raw argument")?);
            a.jmp_imm(op::JEQ, R8, 0, no_donor);
            read_kernel(a, R10, KEY as i32, 4, R8, prio as i32);
            a.bind(no_donor);
            a.load(Size::W, R0, R10, SCRATCH);
            a.load(Size::W, R1, R10, KEY);
            a.jmp_reg(op::JLE, R0, R1, done);
            a.mov(R0, R1);
            a.bind(done);
        }
        ArgSource::ExitReason => {
            let off = task_offsets(shape, "the exit reason")?
                .exit_code
                .ok_or_else(|| {
                    LinuxError::Unavailable("task_struct.exit_code missing from the BTF".into())
                })?;
            const CLD_EXITED: i32 = 1;
            const CLD_KILLED: i32 = 2;
            const CLD_DUMPED: i32 = 3;
            let (done, signalled) = (a.label(), a.label());
            a.call(helper::GET_CURRENT_TASK);
            read_kernel(a, R10, SCRATCH as i32, 4, R0, off as i32);
            a.load(Size::W, R0, R10, SCRATCH);
            // The wait status: signal number in the low 7 bits, 0x80 when core was dumped.
            a.mov(R1, R0).alu_imm(op::AND, R1, 0x7f);
            a.jmp_imm(op::JNE, R1, 0, signalled);
            a.mov_imm(R0, CLD_EXITED).ja(done);
            a.bind(signalled).alu_imm(op::AND, R0, 0x80);
            let killed = a.label();
            a.jmp_imm(op::JEQ, R0, 0, killed);
            a.mov_imm(R0, CLD_DUMPED).ja(done);
            a.bind(killed).mov_imm(R0, CLD_KILLED);
            a.bind(done);
        }
        ArgSource::CurrentTask => {
            a.call(helper::GET_CURRENT_TASK);
        }
        ArgSource::Zero => {
            a.mov_imm(R0, 0);
        }
    }
    Ok(())
}

fn read_helper(kind: MemKind) -> i32 {
    match kind {
        MemKind::UserString => helper::PROBE_READ_USER_STR,
        MemKind::UserBytes => helper::PROBE_READ_USER,
        MemKind::KernelString => helper::PROBE_READ_KERNEL_STR,
        MemKind::KernelBytes => helper::PROBE_READ_KERNEL,
    }
}

fn emit_ring_reserve(a: &mut Asm, maps: &MapFds, size: usize) -> Result<()> {
    a.ld_map_fd(R1, maps.ring)
        .mov_imm(R2, size as i32)
        .mov_imm(R3, 0)
        .call(helper::RINGBUF_RESERVE);
    Ok(())
}

fn emit_count_drop(a: &mut Asm, maps: &MapFds, out: Label) {
    a.store_imm(Size::W, R10, KEY, 0);
    a.ld_map_fd(R1, maps.drops).frame_addr(R2, KEY as i32);
    a.call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, out);
    a.mov_imm(R1, 1).atomic_add64(R0, 0, R1);
    a.ja(out);
}

fn emit_header(a: &mut Asm, kind: u16, tag: u32) {
    a.store_imm(Size::H, R7, hdr::KIND as i16, kind as i32);
    a.store_imm(Size::H, R7, hdr::FLAGS as i16, 0);
    a.store_imm(Size::W, R7, hdr::TAG as i16, tag as i32);
}

/// Generates the capture program of one enabled probe.
pub fn gen_capture(
    shape: &ProbeShape,
    spec: &CaptureSpec,
    layout: &RecordLayout,
    tag: u32,
    maps: &MapFds,
) -> Result<Vec<Insn>> {
    Ok(gen_capture_reporting(shape, spec, layout, tag, maps)?.0)
}

/// What a capture program runs in the kernel: which predicates of its filter (see
/// [`super::filter`]) and which aggregation-only clauses (see [`super::kagg`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaptureReport {
    /// Per predicate of the filter used.
    pub filter: super::filter::FilterReport,
    /// The filter used is the one of the clauses other than the kernel aggregations'
    /// (`KernelAggs::others`), not the spec's own.
    pub filter_over_others: bool,
    /// Per clause of the spec's kernel aggregations.
    pub aggs: super::kagg::AggReport,
    /// Per clause of the spec's signals sent at the probe.
    pub signals: super::signal::SignalReport,
    /// A firing of the probe (a syscall's entry) whose strings cannot be read there yet runs at
    /// the syscall's return instead (`spec::Replay`).
    pub replay: bool,
}

/// [`gen_capture`], with the report of what runs in the kernel.
pub fn gen_capture_reporting(
    shape: &ProbeShape,
    spec: &CaptureSpec,
    layout: &RecordLayout,
    tag: u32,
    maps: &MapFds,
) -> Result<(Vec<Insn>, CaptureReport)> {
    with_walk_that_fits(spec, |spec| {
        gen_capture_once(shape, spec, layout, tag, maps)
    })
}

/// The program `generate` makes of `spec`, made again when its user stack walk's frames are
/// callbacks the kernel refuses beside that program's stack (`ustack_keys::UserWalk::beside`):
/// with the same walk by the bounded loop or without the file route.
fn with_walk_that_fits<T>(
    spec: &CaptureSpec,
    generate: impl Fn(&CaptureSpec) -> Result<(Vec<Insn>, T)>,
) -> Result<(Vec<Insn>, T)> {
    let got = generate(spec)?;
    let fits = |w: super::ustack_keys::UserWalk| w.beside(crate::bpf::insn::stack_depth(&got.0));
    let Some(w) = spec.aggs.as_ref().and_then(|k| fits(k.uwalk?)) else {
        return Ok(got);
    };
    let mut spec = spec.clone();
    if let Some(k) = spec.aggs.as_mut() {
        k.uwalk = Some(w);
    }
    generate(&spec)
}

/// [`gen_capture_reporting`] with the walk `spec` says.
fn gen_capture_once(
    shape: &ProbeShape,
    spec: &CaptureSpec,
    layout: &RecordLayout,
    tag: u32,
    maps: &MapFds,
) -> Result<(Vec<Insn>, CaptureReport)> {
    if shape.args.len() > NARGS {
        return Err(LinuxError::Asm(format!(
            "{} arguments, records carry {NARGS}",
            shape.args.len()
        )));
    }
    let retry = maps
        .pending
        .filter(|_| spec.retry_at_return && spec.copies.iter().any(|c| c.kind.is_user()));
    let mut a = Asm::new();
    let out = a.label();
    a.mov(R6, R1);
    emit_conditions(&mut a, shape, out)?;
    let signals = match &spec.signals {
        Some(s) => super::signal::emit_signals(&mut a, shape, s),
        None => Vec::new(),
    };
    let (aggs, handover) = match &spec.aggs {
        Some(k) => super::kagg::emit_aggs(&mut a, shape, k, maps, tag)?,
        None => (Vec::new(), false),
    };
    // When every aggregation-only clause aggregates in the kernel, the record path serves the
    // other clauses only (perhaps none); else every clause, as without kernel aggregations.
    let all_in_kernel = !aggs.is_empty() && aggs.iter().all(|r| r.is_ok());
    if let Some(why) = &spec.record_path_lacks {
        // The record path has none of the copies the clauses read: no firing may take it.
        if !all_in_kernel || handover {
            return Err(LinuxError::NotYetSupported(why.clone()));
        }
    }
    let (filter, filter_pid, records) = match (&spec.aggs, all_in_kernel) {
        (Some(k), true) => match &k.others {
            None => (None, None, false),
            Some((f, pid)) => (f.as_ref(), *pid, true),
        },
        _ => (spec.filter.as_ref(), spec.filter_pid, true),
    };
    let bypass = spec
        .filter
        .as_ref()
        .and_then(|f| f.bypass)
        .or_else(|| spec.aggs.as_ref().and_then(|k| k.bypass));
    let report = CaptureReport {
        filter: Vec::new(),
        filter_over_others: all_in_kernel,
        aggs,
        signals,
        replay: false,
    };
    if !records && bypass.is_none() && !handover {
        // Nothing at this probe records.
        a.bind(out).mov_imm(R0, 0).exit();
        return Ok((a.finish()?, report));
    }
    let past_filters = a.label();
    super::filter::emit_bypass(&mut a, bypass, past_filters);
    if handover {
        // The kernel clauses handed the firing over (it is recorded for every clause) or
        // announce its process (recorded for dtrace's clauses, see `kagg::ANNOUNCE`).
        a.load(Size::DW, R1, R10, super::kagg::HANDOVER);
        a.jmp_imm(op::JNE, R1, 0, past_filters);
    }
    if !records {
        a.ja(out);
    }
    if let Some(pid) = filter_pid {
        match shape.identity {
            Identity::Current => {
                a.call(helper::GET_CURRENT_PID_TGID)
                    .alu_imm(op::RSH, R0, 32);
            }
            // The record speaks for another thread: filter on its id (the main thread's id is the
            // process id).
            Identity::FromFields { tid_offset, .. } => {
                a.load(Size::W, R0, R6, off16(tid_offset as usize, "tid")?);
            }
            Identity::RawTask(n) => {
                need_ctx(shape, CtxKind::RawTracepoint, "a task argument")?;
                let t = task_offsets(shape, "a pid filter on another thread")?;
                a.load(Size::DW, R4, R6, off16(8 * n as usize, "raw argument")?);
                read_kernel(&mut a, R10, SCRATCH as i32, 4, R4, t.tgid as i32);
                a.load(Size::W, R0, R10, SCRATCH);
            }
        }
        a.jmp_imm(op::JNE, R0, pid as i32, out);
    }
    let mut report = report;
    if let Some(f) = filter.filter(|_| records) {
        report.filter = super::filter::emit_filter(&mut a, shape, f, out);
    }
    a.bind(past_filters);
    let tails = layout.has_tails();
    let syscall_regs = shape
        .args
        .iter()
        .any(|a| matches!(a, ArgSource::SyscallArg(_)));
    let (have, failed) = (a.label(), a.label());
    let plain = if tails {
        // The record's size is the fixed part's and the copies' the firing asks for (see
        // `capture::sized`): the lengths are read before it is reserved.
        if syscall_regs {
            emit_syscall_regs(&mut a, shape);
        }
        super::sized::emit_tail_plan(&mut a, layout, layout.size, |a, _, slot| {
            match slot.size_arg.and_then(|n| shape.args.get(n)) {
                Some(src) => emit_arg(a, shape, *src),
                None => {
                    a.mov_imm(R0, 0);
                    Ok(())
                }
            }
        })?;
        super::sized::emit_tail_reserve(&mut a, maps.ring, layout.size, failed);
        a.ja(have);
        None
    } else {
        emit_ring_reserve(&mut a, maps, layout.size)?;
        let plain = a.label();
        a.jmp_imm(op::JNE, R0, 0, plain);
        Some(plain)
    };
    a.bind(failed);
    if let Some(missed) = spec
        .aggs
        .as_ref()
        .and_then(|k| k.missed)
        .filter(|_| handover)
    {
        // A process's first firing at a probe of every process: dtrace is told of it all the
        // same; only a record dtrace's clauses would have run on is a drop.
        super::kagg::emit_missed_announcement(&mut a, missed, tag, (!records).then_some(out));
    }
    emit_count_drop(&mut a, maps, out);
    if let Some(plain) = plain {
        a.bind(plain).mov(R7, R0);
    }
    a.bind(have);
    emit_header(&mut a, KIND_EVENT, tag);
    if handover {
        let kept = a.label();
        a.load(Size::DW, R1, R10, super::kagg::HANDOVER);
        a.jmp_imm(op::JNE, R1, super::kagg::HANDED_OVER, kept);
        a.store_imm(Size::H, R7, hdr::FLAGS as i16, i32::from(FLAG_HANDED_OVER));
        a.bind(kept);
    }
    a.call(helper::KTIME_GET_NS)
        .store(Size::DW, R7, hdr::KTIME as i16, R0);
    a.call(helper::GET_SMP_PROCESSOR_ID)
        .store(Size::W, R7, hdr::CPU as i16, R0);
    match shape.identity {
        Identity::Current => {
            a.call(helper::GET_CURRENT_PID_TGID)
                .store(Size::W, R7, hdr::TID as i16, R0);
            a.alu_imm(op::RSH, R0, 32)
                .store(Size::W, R7, hdr::PID as i16, R0);
            a.mov(R1, R7)
                .alu_imm(op::ADD, R1, hdr::COMM as i32)
                .mov_imm(R2, 16)
                .call(helper::GET_CURRENT_COMM);
        }
        Identity::FromFields {
            tid_offset,
            comm_offset,
        } => {
            need_ctx(shape, CtxKind::Tracepoint, "identity from fields")?;
            a.load(Size::W, R0, R6, off16(tid_offset as usize, "tid")?)
                .store(Size::W, R7, hdr::TID as i16, R0);
            a.store_imm(Size::W, R7, hdr::PID as i16, 0);
            for j in 0..16usize {
                a.load(Size::B, R0, R6, off16(comm_offset as usize + j, "comm")?);
                a.store(Size::B, R7, (hdr::COMM + j) as i16, R0);
            }
        }
        Identity::RawTask(n) => {
            need_ctx(shape, CtxKind::RawTracepoint, "a task argument")?;
            a.load(Size::DW, R8, R6, off16(8 * n as usize, "raw argument")?);
            emit_task_identity(&mut a, shape)?;
        }
    }
    let current_ids = !matches!(shape.identity, Identity::RawTask(_));
    if current_ids {
        emit_current_ids(&mut a, shape, maps.vclock.as_ref());
    }
    if syscall_regs && !tails {
        emit_syscall_regs(&mut a, shape);
    }
    let mirror = match (super::mirror::uses_mirror(spec), maps.mirror) {
        (false, _) => None,
        (true, Some(fd)) => Some(fd),
        (true, None) => {
            return Err(LinuxError::Asm(
                "thread-local mirror without a mirror map".into(),
            ))
        }
    };
    emit_body(&mut a, shape, spec, layout, retry.is_some(), mirror)?;
    if let Some(fd) = mirror {
        super::mirror::emit_ops(&mut a, &spec.mirror, fd, KEY, SCRATCH)?;
    }
    if let Some(pending) = retry {
        let submit = a.label();
        a.jmp_imm(op::JEQ, R9, 0, submit);
        a.load(Size::DW, R1, R7, hdr::KTIME as i16)
            .store(Size::DW, R10, PENDING, R1);
        a.load(Size::W, R1, R7, hdr::TID as i16)
            .store(Size::W, R10, KEY, R1);
        a.store_imm(Size::W, R10, KEY + 4, tag as i32);
        a.ld_map_fd(R1, pending).frame_addr(R2, KEY as i32);
        a.frame_addr(R3, PENDING as i32)
            .mov_imm(R4, 0)
            .call(helper::MAP_UPDATE_ELEM);
        // Armed only when the retry is: a record saying one comes when none will would be held
        // for it, and delivered late, after the records that follow it.
        a.jmp_imm(op::JNE, R0, 0, submit);
        a.load(Size::H, R1, R7, hdr::FLAGS as i16)
            .alu_imm(op::OR, R1, i32::from(FLAG_RETRY_ARMED))
            .store(Size::H, R7, hdr::FLAGS as i16, R1);
        if let Some(armed) = maps.pending_armed {
            a.ld_map_value(R1, armed, 0)
                .mov_imm(R2, 1)
                .atomic_add64(R1, 0, R2);
        }
        a.bind(submit);
    }
    emit_submit_record(&mut a, maps, tails);
    a.bind(out).mov_imm(R0, 0).exit();
    Ok((a.finish()?, report))
}

/// The uid, gid, task, ppid and vtime of the current task (ppid and vtime only when the record
/// speaks for it).
fn emit_current_ids(a: &mut Asm, shape: &ProbeShape, vclock: Option<&crate::vtime::VclockRef>) {
    a.store_imm(Size::W, R7, hdr::PPID as i16, 0);
    a.call(helper::GET_CURRENT_UID_GID)
        .store(Size::W, R7, hdr::UID as i16, R0);
    a.alu_imm(op::RSH, R0, 32)
        .store(Size::W, R7, hdr::GID as i16, R0);
    a.call(helper::GET_CURRENT_TASK)
        .store(Size::DW, R7, hdr::TASK as i16, R0);
    if let (Some(t), Identity::Current) = (shape.task, shape.identity) {
        // ppid = current->real_parent->tgid
        a.mov(R3, R0).alu_imm(op::ADD, R3, t.real_parent as i32);
        a.frame_addr(R1, SCRATCH as i32)
            .mov_imm(R2, 8)
            .call(helper::PROBE_READ_KERNEL);
        a.load(Size::DW, R3, R10, SCRATCH)
            .alu_imm(op::ADD, R3, t.tgid as i32);
        a.mov(R1, R7)
            .alu_imm(op::ADD, R1, hdr::PPID as i32)
            .mov_imm(R2, 4)
            .call(helper::PROBE_READ_KERNEL);
    }
    if let (Some(v), Identity::Current) = (vclock, shape.identity) {
        crate::vtime::emit_exact_vtime(a, v);
        return;
    }
    a.store_imm(Size::DW, R7, hdr::VTIME as i16, 0);
    if let (Some(off), Identity::Current) =
        (shape.task.and_then(|t| t.sum_exec_runtime), shape.identity)
    {
        // vtimestamp = current->se.sum_exec_runtime
        a.load(Size::DW, R3, R7, hdr::TASK as i16)
            .alu_imm(op::ADD, R3, off as i32);
        a.mov(R1, R7)
            .alu_imm(op::ADD, R1, hdr::VTIME as i32)
            .mov_imm(R2, 8)
            .call(helper::PROBE_READ_KERNEL);
    }
}

/// Arguments, memory copies, the argument area, ancestors and stacks.
fn emit_body(
    a: &mut Asm,
    shape: &ProbeShape,
    spec: &CaptureSpec,
    layout: &RecordLayout,
    retry: bool,
    mirror: Option<i32>,
) -> Result<()> {
    for i in 0..NARGS {
        match shape.args.get(i) {
            Some(src) => {
                emit_arg(a, shape, *src)?;
                a.store(Size::DW, R7, (hdr::ARGS + 8 * i) as i16, R0);
            }
            None => {
                a.store_imm(Size::DW, R7, (hdr::ARGS + 8 * i) as i16, 0);
            }
        }
    }
    if retry {
        a.mov_imm(R9, 0);
        for k in 0..PENDING_VALUE_SIZE as i16 / 8 {
            a.store_imm(Size::DW, R10, PENDING + 8 * k, 0);
        }
    }
    let mut addresses = Evaluator::new("a copy", Slot::stack(SCRATCH)).with_context(shape.ctx);
    if let Some(fd) = mirror {
        addresses = addresses.with_mirror(fd, KEY);
    }
    for (i, (req, slot)) in spec.copies.iter().zip(&layout.copies).enumerate() {
        if slot.tail {
            super::sized::emit_tail_slot(a, i, slot)?;
        }
        let missing = addresses.emit_kernel(a, &req.addr)?;
        let hops = &req.addr.user_derefs;
        if !hops.is_empty() {
            // The retry re-reads the chain from its last kernel address.
            if retry {
                a.store(Size::DW, R10, PENDING + 8 + 8 * i as i16, R3);
            }
            addresses.emit_user(a, hops, retry.then_some(R9));
        }
        let so = slot.offset;
        a.store(Size::DW, R7, off16(so + 8, "copy")?, R3);
        if retry && req.kind.is_user() && hops.is_empty() {
            a.store(Size::DW, R10, PENDING + 8 + 8 * i as i16, R3);
        }
        if let (Some(n), true) = (slot.size_arg, retry) {
            // The length the retry asks for: the argument's value.
            let at = super::sized::size_arg_offset(n);
            a.load(Size::DW, R2, R7, off16(at, "argument")?);
            a.store(Size::DW, R10, PENDING + pending_len(i), R2);
        }
        if slot.tail {
            super::sized::emit_tail_copy(a, i, slot)?;
        } else {
            a.mov(R1, R7).alu_imm(op::ADD, R1, (so + COPY_HDR) as i32);
            match slot.size_arg {
                None => {
                    a.mov_imm(R2, slot.size as i32);
                }
                Some(n) => {
                    let at = super::sized::size_arg_offset(n);
                    a.load(Size::DW, R2, R7, off16(at, "argument")?);
                    super::sized::emit_bounded_size(a, slot);
                }
            }
            a.call(read_helper(req.kind));
            a.store(Size::DW, R7, off16(so, "copy")?, R0);
        }
        if retry && req.kind.is_user() {
            let fine = a.label();
            a.jmp_imm(op::JSGE, R0, 0, fine).mov_imm(R9, 1).bind(fine);
        }
        if let Some(l) = missing {
            // No mirrored address on this thread: no copy (a fault, so delivery reads the process).
            let done = a.label();
            a.ja(done).bind(l);
            a.store_imm(Size::DW, R7, off16(so, "copy")?, -libc::ENOENT);
            a.store_imm(Size::DW, R7, off16(so + 8, "copy")?, 0);
            a.bind(done);
        }
    }
    if let Some((at, cap)) = layout.execargs {
        emit_execargs(a, shape, at, cap)?;
    }
    if let Some(at) = layout.ancestors {
        emit_ancestors(a, shape, at)?;
    }
    if !layout.paths.is_empty() {
        let o = task_offsets(shape, "d_path()")?.paths.ok_or_else(|| {
            LinuxError::Unavailable("dentry and mount offsets missing from the BTF".into())
        })?;
        for (addr, at) in spec.paths.iter().zip(&layout.paths) {
            super::path::emit_path_walk(a, &o, addr, *at)?;
        }
    }
    let (uflags, uframe) = if layout.ustack_build_id {
        (BPF_F_USER_STACK | BPF_F_USER_BUILD_ID, BUILD_ID_FRAME)
    } else {
        (BPF_F_USER_STACK, 8)
    };
    let other_task = match shape.identity {
        Identity::RawTask(n) => Some(n),
        _ => None,
    };
    for (at, flags, frame) in [(layout.kstack, 0, 8), (layout.ustack, uflags, uframe)] {
        if let Some((off, depth)) = at {
            let mut call = helper::GET_STACK;
            if let Some(n) = other_task {
                // The stack of the task the record speaks for, not of the one running.
                if flags != 0 || shape.ctx != CtxKind::TypedRawTracepoint {
                    return Err(LinuxError::Unavailable(format!(
                        "the {} stack of a thread other than the current one{}",
                        if flags != 0 { "user" } else { "kernel" },
                        if flags != 0 {
                            ""
                        } else {
                            " (needs BTF-typed raw tracepoints)"
                        }
                    )));
                }
                a.load(Size::DW, R1, R6, off16(8 * n as usize, "raw argument")?);
                call = helper::GET_TASK_STACK;
            } else {
                a.mov(R1, R6);
            }
            a.mov(R2, R7).alu_imm(op::ADD, R2, (off + STACK_HDR) as i32);
            a.mov_imm(R3, (frame * depth) as i32)
                .mov_imm(R4, flags)
                .call(call);
            a.store(Size::DW, R7, off16(off, "stack")?, R0);
        }
    }
    if let Some((at, cap)) = layout.ustack_unwind {
        emit_user_unwind(a, at, cap)?;
    }
    if let Some(at) = layout.uregs {
        emit_uregs(a, at)?;
    }
    Ok(())
}

// x86-64 pt_regs offsets of the frame pointer and stack pointer.
const REGS_BP: i16 = 4 * 8;
const REGS_SP: i16 = 19 * 8;

/// Puts the current thread's saved user registers (`task_pt_regs`) in r8, or jumps to `none` when
/// they are not user-mode registers (a kernel thread). r8 is typed by the kernel's BTF (`struct
/// pt_regs`): a register is one load from it, no helper call.
pub(super) fn emit_user_pt_regs(a: &mut Asm, none: crate::bpf::Label) {
    a.call(helper::GET_CURRENT_TASK_BTF)
        .mov(R1, R0)
        .call(helper::TASK_PT_REGS)
        .mov(R8, R0);
    a.load(Size::DW, R0, R8, REGS_CS).alu_imm(op::AND, R0, 3);
    a.jmp_imm(op::JNE, R0, 3, none);
}

/// The current thread's saved user registers (its `struct pt_regs`) at `at` of the record, for
/// `uregs[]`; a kernel thread (no user mode registers) records -EFAULT. Uses r8.
fn emit_uregs(a: &mut Asm, at: usize) -> Result<()> {
    let done = a.label();
    a.store_imm(Size::DW, R7, off16(at, "user registers")?, -libc::EFAULT);
    emit_user_pt_regs(a, done);
    read_kernel(
        a,
        R7,
        (at + UREGS_HDR) as i32,
        (8 * UREGS_COUNT) as i32,
        R8,
        0,
    );
    a.store(Size::DW, R7, off16(at, "user registers")?, R0);
    a.bind(done);
    Ok(())
}

/// The user registers (pc, sp, fp, from the task's saved user `pt_regs`) and as much of the user
/// stack above sp as is present, up to `cap` bytes, at `at` of the record. On the main thread's
/// stack, up to 512 bytes past the process's initial stack pointer (`mm->start_stack`: above it
/// are the arguments and the environment, no frame) but no further than the end of its page, in
/// one read: the page after it may never have been touched (the random gap the kernel leaves
/// below the environment's strings), and a read reaching into a page not present faults; a
/// first try of `cap` bytes past the stack's top would cost the fault and the zeroing of `cap`
/// bytes at every firing. Elsewhere (a thread's stack), from sp to the end of a page, the
/// furthest first, so that the copy ends at the last page present (halves of `cap`, as tried
/// once, stopped up to half short of it and lost the outermost frames of some stack depths). A
/// kernel thread (no user mode registers) records -EFAULT and no registers. Uses r8.
pub(super) fn emit_user_unwind(a: &mut Asm, at: usize, cap: usize) -> Result<()> {
    let at16 = |o: usize| off16(at + o, "user stack copy");
    let done = a.label();
    a.store_imm(Size::DW, R7, at16(0)?, -libc::EFAULT);
    for o in [8, 16, 24] {
        a.store_imm(Size::DW, R7, at16(o)?, 0);
    }
    emit_user_pt_regs(a, done);
    for (o, reg) in [(8usize, REGS_IP), (16, REGS_SP), (24, REGS_BP)] {
        a.load(Size::DW, R0, R8, reg)
            .store(Size::DW, R7, at16(o)?, R0);
    }
    let page = i32::try_from(crate::mapping::page_size())
        .map_err(|_| LinuxError::Asm("page size".into()))?;
    let cap32 = i32::try_from(cap)
        .map_err(|_| LinuxError::Asm(format!("user stack copy of {cap} bytes")))?;
    if let Some(t) = crate::btf::StackTopOffsets::of_running_kernel() {
        let to_page_ends = a.label();
        a.call(helper::GET_CURRENT_TASK_BTF);
        a.load(Size::DW, R1, R0, t.mm as i16);
        a.jmp_imm(op::JEQ, R1, 0, to_page_ends);
        // r2: the bytes from sp to 512 past the initial stack pointer or the end of its page
        // (r4), whichever comes first, when no more than cap.
        let within = a.label();
        a.load(Size::DW, R2, R1, t.start_stack as i16);
        a.mov(R4, R2)
            .alu_imm(op::AND, R4, -page)
            .alu_imm(op::ADD, R4, page);
        a.alu_imm(op::ADD, R2, 512);
        a.jmp_reg(op::JLE, R2, R4, within);
        a.mov(R2, R4);
        a.bind(within);
        a.load(Size::DW, R3, R7, at16(16)?);
        a.jmp_reg(op::JLE, R2, R3, to_page_ends);
        a.alu(op::SUB, R2, R3);
        a.jmp_imm(op::JGT, R2, cap32, to_page_ends);
        a.alu_imm(op::AND, R2, !7);
        a.jmp_imm(op::JLT, R2, 16, to_page_ends);
        a.store(Size::DW, R7, at16(0)?, R2);
        a.mov(R1, R7).alu_imm(op::ADD, R1, (at + UNWIND_HDR) as i32);
        a.call(helper::PROBE_READ_USER);
        a.jmp_imm(op::JEQ, R0, 0, done);
        a.bind(to_page_ends);
    }
    // Else from sp to the end of a page, the furthest first: a read fails at the first page
    // not present, so the copy ends at the last one that is. The furthest page end tried is the
    // first past `cap` wherever sp lies in its page (those beyond would copy `cap` again).
    let pages = (cap + page as usize - 1).div_ceil(page as usize);
    for n in (1..=pages as i32).rev() {
        let (fits, failed) = (a.label(), a.label());
        // r8: the bytes from sp to the end of the n-th page from sp's, at most cap.
        a.load(Size::DW, R3, R7, at16(16)?);
        a.mov(R2, R3).alu_imm(op::AND, R2, page - 1);
        a.mov_imm(R8, n * page).alu(op::SUB, R8, R2);
        a.jmp_imm(op::JLE, R8, cap32, fits);
        a.mov_imm(R8, cap32);
        a.bind(fits);
        a.mov(R1, R7)
            .alu_imm(op::ADD, R1, (at + UNWIND_HDR) as i32)
            .mov(R2, R8)
            .call(helper::PROBE_READ_USER);
        a.jmp_imm(op::JNE, R0, 0, failed);
        a.store(Size::DW, R7, at16(0)?, R8).ja(done);
        a.bind(failed).store(Size::DW, R7, at16(0)?, R0);
    }
    a.bind(done);
    Ok(())
}

/// Generates the program at a syscall's exit that re-reads the user copies of an entry event
/// whose reads faulted, and emits them as a retry record. In the `sys_exit` dispatcher's chain
/// (`then`: its slots and the syscall's number) it tail-calls the syscall's slot when done;
/// else it is attached to the syscall's exit tracepoint alone.
pub fn gen_retry(
    spec: &CaptureSpec,
    layout: &RecordLayout,
    tag: u32,
    maps: &MapFds,
    then: Option<(i32, u32)>,
) -> Result<Vec<Insn>> {
    let pending = maps
        .pending
        .ok_or_else(|| LinuxError::Asm("retry program without a pending map".into()))?;
    let mut a = Asm::new();
    let (out, del) = (a.label(), a.label());
    a.mov(R6, R1);
    if let Some(armed) = maps.pending_armed {
        // No entry armed a retry: nothing to look up.
        a.ld_map_value(R1, armed, 0).load(Size::DW, R1, R1, 0);
        a.jmp_imm(op::JEQ, R1, 0, out);
    }
    emit_pending_key(&mut a, tag);
    emit_keyed_call(&mut a, pending, KEY, helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, out).mov(R8, R0);
    let tails = layout.has_tails();
    let have = a.label();
    if tails {
        // The lengths the entry saw (see `capture::sized`).
        super::sized::emit_tail_plan(&mut a, layout, layout.retry_size, |a, i, _| {
            a.load(Size::DW, R0, R8, pending_len(i));
            Ok(())
        })?;
        let failed = a.label();
        super::sized::emit_tail_reserve(&mut a, maps.ring, layout.retry_size, failed);
        a.ja(have);
        a.bind(failed);
        emit_count_drop(&mut a, maps, del);
    } else {
        emit_ring_reserve(&mut a, maps, layout.retry_size)?;
        a.jmp_imm(op::JNE, R0, 0, have);
        emit_count_drop(&mut a, maps, del);
    }
    a.bind(have);
    if !tails {
        a.mov(R7, R0);
    }
    emit_header(&mut a, KIND_RETRY, tag);
    a.load(Size::DW, R1, R8, 0)
        .store(Size::DW, R7, hdr::KTIME as i16, R1);
    a.load(Size::W, R1, R10, KEY)
        .store(Size::W, R7, hdr::TID as i16, R1);
    // The user hops restart from the address the entry saved before them.
    let addresses = Evaluator::new("a retried copy", Slot::stack(SCRATCH));
    for (i, (req, slot)) in spec.copies.iter().zip(&layout.copies).enumerate() {
        let so = slot.offset;
        if !req.kind.is_user() {
            a.store_imm(Size::DW, R7, off16(so, "copy")?, -libc::EFAULT);
            a.store_imm(Size::DW, R7, off16(so + 8, "copy")?, 0);
            continue;
        }
        if slot.tail {
            super::sized::emit_tail_slot(&mut a, i, slot)?;
        }
        a.load(Size::DW, R3, R8, (8 + 8 * i) as i16);
        addresses.emit_user(&mut a, &req.addr.user_derefs, None);
        a.store(Size::DW, R7, off16(so + 8, "copy")?, R3);
        if slot.tail {
            // The length the entry saw, written where the decoder reads it.
            if let Some(n) = slot.size_arg {
                a.load(Size::DW, R2, R8, pending_len(i));
                let at = super::sized::size_arg_offset(n);
                a.store(Size::DW, R7, off16(at, "argument")?, R2);
            }
            super::sized::emit_tail_copy(&mut a, i, slot)?;
            continue;
        }
        a.mov(R1, R7).alu_imm(op::ADD, R1, (so + COPY_HDR) as i32);
        match slot.size_arg {
            None => {
                a.mov_imm(R2, slot.size as i32);
            }
            Some(n) => {
                // The length the entry saw, written where the decoder reads it.
                a.load(Size::DW, R2, R8, pending_len(i));
                let at = super::sized::size_arg_offset(n);
                a.store(Size::DW, R7, off16(at, "argument")?, R2);
                super::sized::emit_bounded_size(&mut a, slot);
            }
        }
        a.call(read_helper(req.kind))
            .store(Size::DW, R7, off16(so, "copy")?, R0);
    }
    emit_submit_record(&mut a, maps, tails);
    a.bind(del);
    // (A drop's count used the key's slot: the key again.)
    emit_pending_key(&mut a, tag);
    emit_keyed_call(&mut a, pending, KEY, helper::MAP_DELETE_ELEM);
    if let Some(armed) = maps.pending_armed {
        // Served: one fewer armed (this thread's entry counted when it was armed).
        a.jmp_imm(op::JNE, R0, 0, out);
        a.ld_map_value(R1, armed, 0)
            .mov_imm(R2, -1)
            .atomic_add64(R1, 0, R2);
    }
    a.bind(out);
    if let Some((slots, nr)) = then {
        let nr = i32::try_from(nr).map_err(|_| LinuxError::Asm("syscall number".into()))?;
        a.mov(R1, R6)
            .ld_map_fd(R2, slots)
            .mov_imm(R3, nr)
            .call(helper::TAIL_CALL);
    }
    a.mov_imm(R0, 0).exit();
    Ok(a.finish()?)
}

/// The stages the `sys_exit` dispatcher runs before a syscall's slot, each a prog array by
/// syscall number gated by a counter (an array map of one u64): the replays of kept entry
/// firings ([`gen_replay`]), then the retries of entry copies ([`gen_retry`]). While no
/// counter says a stage or a syscall's slot has work, the dispatcher returns at once, without
/// reading the syscall's number (a helper call at every syscall's return in the system).
#[derive(Clone, Copy, Debug)]
pub struct ExitStages {
    /// The syscalls' own return programs in the dispatcher's slots (a count like the stages').
    pub returns: i32,
    /// The replays.
    pub replays: i32,
    /// The firings kept (`spec::ReplayMaps::armed`).
    pub kept: i32,
    /// The retries.
    pub retries: i32,
    /// The retries armed ([`MapFds::pending_armed`] of the retries in the chain).
    pub armed: i32,
}

/// Generates the dispatcher attached to the `sys_enter` or `sys_exit` raw tracepoint: it tail-calls
/// the program in `slots` at the syscall's number (`ctx[1]` at entry is the number; at exit the
/// number is read from the saved registers' `orig_ax`), and does nothing for syscalls nobody traces.
pub fn gen_syscall_dispatcher(
    slots: i32,
    exit: bool,
    stages: Option<ExitStages>,
    ctx: CtxKind,
) -> Result<Vec<Insn>> {
    let mut a = Asm::new();
    let out = a.label();
    a.mov(R6, R1);
    if let (true, Some(s)) = (exit, stages) {
        let busy = a.label();
        for count in [s.returns, s.kept, s.armed] {
            a.ld_map_value(R1, count, 0).load(Size::DW, R1, R1, 0);
            a.jmp_imm(op::JNE, R1, 0, busy);
        }
        a.ja(out);
        a.bind(busy);
    }
    if exit {
        emit_exit_syscall_nr(&mut a, ctx);
        a.load(Size::DW, R3, R10, SCRATCH);
    } else {
        a.load(Size::DW, R3, R6, 8);
    }
    a.jmp_imm(op::JGE, R3, MAX_SYSCALL_NR as i32, out);
    if let Some(s) = stages {
        // While some firing is kept, the syscall's replay first; while some retry is armed,
        // its retry; each tail-calls the next stage when done. None there, or nothing kept or
        // armed: the slot.
        for (stage, count) in [(s.replays, s.kept), (s.retries, s.armed)] {
            let next = a.label();
            a.ld_map_value(R1, count, 0).load(Size::DW, R1, R1, 0);
            a.jmp_imm(op::JEQ, R1, 0, next);
            a.store(Size::DW, R10, SCRATCH, R3);
            a.mov(R1, R6).ld_map_fd(R2, stage).call(helper::TAIL_CALL);
            a.load(Size::DW, R3, R10, SCRATCH);
            a.bind(next);
        }
    }
    a.mov(R1, R6).ld_map_fd(R2, slots).call(helper::TAIL_CALL);
    a.bind(out).mov_imm(R0, 0).exit();
    Ok(a.finish()?)
}

/// Generates the program at a syscall's return that runs the kernel clauses of the syscall's
/// entry on a firing the entry kept for it (`spec::Replay`; `spec`'s aggregations are the
/// entry's, in [`Replay::Run`](super::spec::Replay) mode), then tail-calls slot `nr` of prog
/// array `next` (the dispatcher's), where the return's own program is (when it has one), after
/// the syscall's retry in `retries` (see [`gen_retry`]), if there is one. The dispatcher runs
/// it only while some firing is kept. Without `tails` (`(retries, next)`) it tail-calls
/// nothing: on the exit of the syscall's function's trampoline, whose next programs are the
/// retry and the return's. `shape` reads the kept arguments ([`ArgSource::Kept`]).
/// Returns the program and what runs of the clauses, which must be what runs at the entry.
pub fn gen_replay(
    shape: &ProbeShape,
    spec: &CaptureSpec,
    tag: u32,
    maps: &MapFds,
    nr: u32,
    tails: Option<(i32, i32)>,
) -> Result<(Vec<Insn>, super::kagg::AggReport)> {
    with_walk_that_fits(spec, |spec| {
        gen_replay_once(shape, spec, tag, maps, nr, tails)
    })
}

/// [`gen_replay`] with the walk `spec` says.
fn gen_replay_once(
    shape: &ProbeShape,
    spec: &CaptureSpec,
    tag: u32,
    maps: &MapFds,
    nr: u32,
    tails: Option<(i32, i32)>,
) -> Result<(Vec<Insn>, super::kagg::AggReport)> {
    let k = spec
        .aggs
        .as_ref()
        .ok_or_else(|| LinuxError::Asm("a replay without clauses".into()))?;
    let Some(super::spec::Replay::Run(m)) = k.replay else {
        return Err(LinuxError::Asm("a replay of clauses not kept".into()));
    };
    let nr = i32::try_from(nr).map_err(|_| LinuxError::Asm("syscall number".into()))?;
    let mut a = Asm::new();
    let out = a.label();
    a.mov(R6, R1);
    emit_thread_key(&mut a, SCRATCH);
    emit_keyed_call(&mut a, m.pending, SCRATCH, helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, out);
    // Another syscall's (one that never returned): dropped.
    let (ours, done) = (a.label(), a.label());
    a.load(Size::DW, R1, R0, 8).jmp_imm(op::JEQ, R1, nr, ours);
    a.ja(done);
    a.bind(ours);
    let (report, _) = super::kagg::emit_aggs(&mut a, shape, k, maps, tag)?;
    a.bind(done);
    // (The clauses' code used the stack: the key again.)
    emit_thread_key(&mut a, SCRATCH);
    emit_keyed_call(&mut a, m.pending, SCRATCH, helper::MAP_DELETE_ELEM);
    if let Some(armed) = m.armed {
        let gone = a.label();
        a.jmp_imm(op::JNE, R0, 0, gone);
        a.ld_map_value(R2, armed, 0).mov_imm(R1, -1);
        a.atomic_add64(R2, 0, R1);
        a.bind(gone);
    }
    a.bind(out);
    for stage in tails.iter().flat_map(|&(retries, next)| [retries, next]) {
        a.mov(R1, R6)
            .ld_map_fd(R2, stage)
            .mov_imm(R3, nr)
            .call(helper::TAIL_CALL);
    }
    a.mov_imm(R0, 0).exit();
    Ok((a.finish()?, report))
}

/// The program of a uprobe-multi link: tail-calls the capture program in slot
/// `bpf_get_attach_cookie()` of prog array `slots` (the link gives each probe's offset its slot as
/// cookie).
pub fn gen_cookie_dispatcher(slots: i32) -> Result<Vec<Insn>> {
    let mut a = Asm::new();
    a.mov(R6, R1).call(helper::GET_ATTACH_COOKIE).mov(R3, R0);
    a.mov(R1, R6).ld_map_fd(R2, slots).call(helper::TAIL_CALL);
    a.mov_imm(R0, 0).exit();
    Ok(a.finish()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kprobe_shape() -> ProbeShape {
        ProbeShape {
            ctx: CtxKind::Kprobe,
            args: Vec::new(),
            conditions: Vec::new(),
            identity: Identity::Current,
            task: None,
        }
    }

    /// The one instruction `emit_arg` gives for `src` at a kprobe: a load from `struct pt_regs`.
    fn kprobe_load(src: ArgSource) -> Result<(u8, u8, i16)> {
        let mut a = Asm::new();
        emit_arg(&mut a, &kprobe_shape(), src)?;
        let insns = a.finish()?;
        assert_eq!(insns.len(), 1, "{insns:?}");
        Ok((insns[0].dst, insns[0].src, insns[0].off))
    }

    #[test]
    fn function_values_at_a_kprobe_are_the_abi_registers() {
        // rdi, rsi, rdx, rcx, r8, r9, and rax at return.
        let want = [112, 104, 96, 88, 72, 64];
        for (n, off) in want.into_iter().enumerate() {
            assert_eq!(
                kprobe_load(ArgSource::FuncArg(n as u8)).unwrap(),
                (0, 6, off)
            );
        }
        assert_eq!(kprobe_load(ArgSource::FuncRet).unwrap(), (0, 6, 80));
        assert!(kprobe_load(ArgSource::FuncArg(6)).is_err());
        // A tracepoint's record field is not there.
        let field = ArgSource::Field {
            offset: 8,
            size: 8,
            signed: false,
        };
        assert!(kprobe_load(field).is_err());
    }

    #[test]
    fn the_exit_dispatcher_runs_a_stage_only_while_its_count_says_one_waits() {
        let tail_calls = |insns: &[Insn]| {
            insns
                .iter()
                .filter(|i| i.code == op::JMP | op::CALL && i.imm == helper::TAIL_CALL)
                .count()
        };
        let plain = gen_syscall_dispatcher(3, true, None, CtxKind::RawTracepoint).unwrap();
        assert_eq!(tail_calls(&plain), 1);
        let stages = ExitStages {
            returns: 8,
            replays: 4,
            kept: 5,
            retries: 6,
            armed: 7,
        };
        let staged = gen_syscall_dispatcher(3, true, Some(stages), CtxKind::RawTracepoint).unwrap();
        assert_eq!(tail_calls(&staged), 3);
        // The three counts are read (map values, no helper) before the syscall's number:
        // all zero, the dispatcher returns.
        let values: Vec<i32> = staged
            .iter()
            .filter(|i| i.code == op::LD | op::IMM | op::DW && i.src == 2)
            .map(|i| i.imm)
            .collect();
        assert_eq!(values[..3], [8, 5, 7]);
        let first_helper = staged
            .iter()
            .position(|i| i.code == op::JMP | op::CALL)
            .unwrap();
        assert_eq!(staged[first_helper].imm, helper::PROBE_READ_KERNEL);
        let value_at = |fd: i32| {
            staged
                .iter()
                .rposition(|i| i.code == op::LD | op::IMM | op::DW && i.src == 2 && i.imm == fd)
                .unwrap()
        };
        assert!(value_at(8) < first_helper);
        // Each stage's count is read again and tested before its tail call, the replay's
        // first; the slot's tail call comes last.
        let prog_array_at = |fd: i32| {
            staged
                .iter()
                .position(|i| i.code == op::LD | op::IMM | op::DW && i.src == 1 && i.imm == fd)
                .unwrap()
        };
        assert!(first_helper < value_at(5));
        assert!(value_at(5) < prog_array_at(4));
        assert!(prog_array_at(4) < value_at(7));
        assert!(value_at(7) < prog_array_at(6));
        assert!(prog_array_at(6) < prog_array_at(3));
        assert!(staged[value_at(5) + 3].code == op::JMP | op::JEQ | op::K);
    }

    #[test]
    fn a_typed_dispatcher_reads_the_syscall_number_without_a_helper() {
        let calls = |insns: &[Insn], h: i32| {
            insns
                .iter()
                .filter(|i| i.code == op::JMP | op::CALL && i.imm == h)
                .count()
        };
        let raw = gen_syscall_dispatcher(3, true, None, CtxKind::RawTracepoint).unwrap();
        assert_eq!(calls(&raw, helper::PROBE_READ_KERNEL), 1);
        let typed = gen_syscall_dispatcher(3, true, None, CtxKind::TypedRawTracepoint).unwrap();
        assert_eq!(calls(&typed, helper::PROBE_READ_KERNEL), 0);
        // ctx[0] (the registers), then orig_ax from it.
        let regs = typed
            .iter()
            .position(|i| i.code == op::LDX | op::MEM | op::DW && i.src == 6 && i.off == 0)
            .unwrap();
        let nr = typed
            .iter()
            .position(|i| i.code == op::LDX | op::MEM | op::DW && i.off == ORIG_AX as i16)
            .unwrap();
        assert!(regs < nr);
        assert_eq!(typed[nr].src, typed[regs].dst);
    }

    #[test]
    fn a_retry_is_looked_up_at_the_return_only_while_an_entry_armed_one() {
        let spec = CaptureSpec::new();
        let layout = RecordLayout::for_spec(&spec, "p").unwrap();
        let mut maps = MapFds {
            ring: 3,
            drops: 4,
            room: 9,
            pending: Some(5),
            pending_armed: None,
            wakeup: None,
            wake_at_once: false,
            mirror: None,
            vclock: None,
        };
        let atomics = |insns: &[Insn]| {
            insns
                .iter()
                .filter(|i| i.code == op::STX | op::ATOMIC | op::DW)
                .count()
        };
        let plain = gen_retry(&spec, &layout, 1, &maps, None).unwrap();
        maps.pending_armed = Some(6);
        let gated = gen_retry(&spec, &layout, 1, &maps, None).unwrap();
        // The count of armed entries is read (a map value, no helper) and tested before the
        // first helper call; a served entry takes one off it.
        assert_eq!((gated[1].src, gated[1].imm), (2, 6));
        let first_call = gated
            .iter()
            .position(|i| i.code == op::JMP | op::CALL)
            .unwrap();
        assert!(gated[..first_call]
            .iter()
            .any(|i| i.code == op::JMP | op::JEQ | op::K && i.imm == 0));
        assert_eq!(atomics(&gated), atomics(&plain) + 1);
        assert!(gated
            .iter()
            .any(|i| i.code == op::ALU64 | op::MOV | op::K && i.imm == -1));
    }

    #[test]
    fn a_condition_at_a_kprobe_tests_the_argument_register() {
        let mut a = Asm::new();
        cond_load(&mut a, &kprobe_shape(), 8, 8, false).unwrap();
        let insns = a.finish().unwrap();
        assert_eq!((insns[0].src, insns[0].off), (6, 104));
        assert!(cond_load(&mut Asm::new(), &kprobe_shape(), 4, 4, false).is_err());
    }
}
