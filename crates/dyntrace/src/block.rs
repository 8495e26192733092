//! Block mode: one trap per basic block instead of one per instruction, with identical counts.
//!
//! From a thread's program counter the straight-line run of instructions up to the next one that
//! transfers control or enters the kernel (the block's *terminator*) is decoded once and cached. A
//! breakpoint (`int3`) goes on the terminator and the thread runs free to it; every instruction of the
//! block then counts once. Direct jumps, conditional jumps, direct calls and returns are emulated at the
//! breakpoint (no second trap); any other terminator is single-stepped with its breakpoint lifted, and
//! everything that needs exactness stays single-stepped: signal delivery, writable or shared memory
//! (self-modifying code), 32-bit code, processes with more than one thread (breakpoints lifted for a
//! step would race), and a vfork child sharing its parent's memory. A stop inside a block (a fault, a
//! signal) counts the instructions before it. Breakpoints are removed from forked children we do not
//! follow and before every detach.

use crate::decode::{Decoded, Kind};
use crate::emu::{self, Cpu, Op};
use crate::profile::Cell;
use crate::ptrace;
use crate::tracer::{Mode, PcMap, Tracer};
use iced_x86::{FlowControl, OpKind};
use std::io;
use std::rc::Rc;

/// Most instructions in one block.
const MAX_BLOCK: usize = 512;

const INT3: u8 = 0xcc;

/// Breakpoints placed in one address space: address to original byte.
#[derive(Debug, Clone, Default)]
pub struct Breakpoints {
    sites: PcMap<u8>,
}

fn patch_byte(tid: i32, addr: u64, byte: u8) -> io::Result<u8> {
    let base = addr & !7;
    let shift = 8 * (addr - base);
    let word = ptrace::peek(tid, base)?;
    let old = (word >> shift) as u8;
    let new = (word & !(0xffu64 << shift)) | ((byte as u64) << shift);
    ptrace::poke(tid, base, new)?;
    Ok(old)
}

impl Breakpoints {
    /// Puts the original bytes back into `buf`, read at `pc`.
    pub fn unpatch(&self, pc: u64, buf: &mut [u8]) {
        if self.sites.is_empty() {
            return;
        }
        for (i, b) in buf.iter_mut().enumerate() {
            if let Some(orig) = self.sites.get(&(pc.wrapping_add(i as u64))) {
                *b = *orig;
            }
        }
    }

    /// Whether a breakpoint is placed at `addr`.
    pub fn contains(&self, addr: u64) -> bool {
        self.sites.contains_key(&addr)
    }

    /// Number of breakpoints placed.
    pub fn len(&self) -> usize {
        self.sites.len()
    }

    /// Whether none are placed.
    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }

    fn insert(&mut self, tid: i32, addr: u64) -> io::Result<()> {
        if self.sites.contains_key(&addr) {
            return Ok(());
        }
        let orig = patch_byte(tid, addr, INT3)?;
        self.sites.insert(addr, orig);
        Ok(())
    }

    fn lift(&self, tid: i32, addr: u64) -> io::Result<()> {
        match self.sites.get(&addr) {
            Some(&orig) => patch_byte(tid, addr, orig).map(|_| ()),
            None => Ok(()),
        }
    }

    fn relay(&self, tid: i32, addr: u64) -> io::Result<()> {
        if self.sites.contains_key(&addr) {
            patch_byte(tid, addr, INT3)?;
        }
        Ok(())
    }

    /// The addresses of the breakpoints.
    pub fn addresses(&self) -> Vec<u64> {
        self.sites.keys().copied().collect()
    }

    /// Removes the breakpoint at `addr` (through stopped thread `tid`).
    pub fn remove(&mut self, tid: i32, addr: u64) {
        if let Some(orig) = self.sites.remove(&addr) {
            let _ = patch_byte(tid, addr, orig);
        }
    }

    /// Removes every breakpoint (through stopped thread `tid`).
    pub fn strip(&mut self, tid: i32) {
        for (&addr, &orig) in &self.sites {
            let _ = patch_byte(tid, addr, orig);
        }
        self.sites.clear();
    }

    /// Forgets breakpoints whose memory was unmapped or replaced (their byte is no longer `int3`).
    pub fn revalidate(&mut self, tid: i32) {
        self.sites.retain(|&addr, _| {
            let mut b = [0u8; 1];
            ptrace::read_mem(tid, addr, &mut b) == 1 && b[0] == INT3
        });
    }
}

/// A straight-line run of instructions and the instruction that ends it.
#[derive(Debug)]
pub struct Block {
    /// Address and profile cell of each instruction before the terminator.
    pub insns: Vec<(u64, Cell)>,
    /// Address of the terminator.
    pub term: u64,
    /// Profile cell of the terminator.
    pub term_cell: Cell,
    /// The terminator is a `syscall`: the block runs to the system call's entry (PTRACE_SYSCALL)
    /// with no breakpoint.
    pub to_syscall: bool,
    /// The whole block (terminator last) as emulated instructions, when every one of them can be
    /// emulated and the terminator is a direct jump.
    pub emu: Option<Box<[Op]>>,
}

impl Block {
    fn count_before(&self, t: &mut Tracer, stop: u64) {
        for &(pc, cell) in &self.insns {
            if pc >= stop {
                break;
            }
            t.profile.count(cell, 1, None);
        }
    }
}

fn blocks_allowed(t: &Tracer, tgid: i32) -> bool {
    t.opts.mode == Mode::Block
        && t.procs
            .get(&tgid)
            .is_some_and(|p| !p.no_blocks && p.vforks == 0)
}

/// Whether the process has more than one thread: then a breakpoint is never lifted (another thread
/// could run through the gap), so only terminators that are emulated (or system calls) end blocks.
pub(crate) fn multithreaded(t: &Tracer, tgid: i32) -> bool {
    t.threads
        .values()
        .filter(|th| th.tgid == tgid)
        .nth(1)
        .is_some()
}

/// Whether [`emulate`] handles terminator `d` (barring unreadable memory).
pub(crate) fn emulated_terminator(d: &Decoded, shadow_stack: bool) -> bool {
    use iced_x86::Code;
    let insn = &d.insn;
    let direct = insn.op_count() == 1 && insn.op0_kind() == OpKind::NearBranch64;
    match insn.flow_control() {
        FlowControl::UnconditionalBranch => direct,
        FlowControl::ConditionalBranch => direct && insn.code().is_jcc_short_or_near(),
        FlowControl::Call => direct && !shadow_stack,
        FlowControl::IndirectBranch => insn.code() == Code::Jmp_rm64,
        FlowControl::IndirectCall => insn.code() == Code::Call_rm64 && !shadow_stack,
        FlowControl::Return => {
            !shadow_stack && matches!(insn.code(), Code::Retnq | Code::Retnq_imm16)
        }
        _ => false,
    }
}

fn build(t: &mut Tracer, tid: i32, tgid: i32, pc: u64) -> Option<Rc<Block>> {
    if let Some(b) = t.procs.get(&tgid)?.blocks.get(&pc) {
        return Some(b.clone());
    }
    let program = t.procs.get(&tgid)?.program;
    let shadow = t.procs.get(&tgid)?.shadow_stack;
    let threads = multithreaded(t, tgid);
    let mut insns = Vec::new();
    let mut ops = Some(Vec::new());
    let mut cur = pc;
    let (term_cell, to_syscall) = loop {
        let (region, d, stable) = t.decode_at(tid, tgid, cur, 64);
        if !stable {
            return None;
        }
        let op = emu::compile(&d.insn);
        if insns.len() >= MAX_BLOCK || !matches!(d.kind, Kind::Plain | Kind::RepString) {
            let jumps = matches!(op, Some(Op::Jcc { .. } | Op::Jmp { .. }));
            let to_syscall = d.kind == Kind::Syscall && d.insn.code() == iced_x86::Code::Syscall;
            if threads && !to_syscall && !emulated_terminator(&d, shadow) {
                return None;
            }
            match (&mut ops, op) {
                (Some(v), Some(o)) if jumps => v.push(o),
                _ => ops = None,
            }
            break ((program, region, d.key), to_syscall);
        }
        match (&mut ops, op) {
            (Some(v), Some(o)) => v.push(o),
            _ => ops = None,
        }
        insns.push((cur, (program, region, d.key)));
        cur = cur.wrapping_add(d.len as u64);
    };
    if insns.is_empty() {
        return None;
    }
    let b = Rc::new(Block {
        insns,
        term: cur,
        term_cell,
        to_syscall,
        emu: ops.map(Vec::into_boxed_slice),
    });
    t.procs.get_mut(&tgid)?.blocks.insert(pc, b.clone());
    Some(b)
}

/// Most instructions emulated in one go before the thread runs natively again (a bound on how long
/// the tracer keeps a thread to itself; the thread just continues natively after).
const EMULATION_BUDGET: u64 = 1 << 22;

/// Runs thread `tid` (registers `regs`, in the tracer) through consecutive emulable blocks from
/// `regs.rip`, counting every instruction; leaves `regs` at the first instruction to run natively.
fn run_emulated(t: &mut Tracer, tid: i32, tgid: i32, regs: &mut libc::user_regs_struct) {
    let mut cpu = Cpu::from_regs(regs);
    let mut ran: Vec<(Rc<Block>, u64)> = Vec::new();
    let mut budget = EMULATION_BUDGET;
    while budget > 0 && ran.len() < 4096 {
        let Some(block) = build(t, tid, tgid, cpu.rip) else {
            break;
        };
        let Some(ops) = block.emu.as_deref() else {
            break;
        };
        let Some((term, body)) = ops.split_last() else {
            break;
        };
        let start = cpu.rip;
        let mut n = 0u64;
        loop {
            for op in body {
                cpu.exec(op);
            }
            n += 1;
            budget = budget.saturating_sub(ops.len() as u64);
            let Some(next) = cpu.exec(term) else {
                // Not a jump: never compiled as a terminator.
                cpu.rip = block.term;
                break;
            };
            cpu.rip = next;
            if next != start || budget == 0 {
                break;
            }
        }
        match ran.iter_mut().find(|(b, _)| Rc::ptr_eq(b, &block)) {
            Some(e) => e.1 += n,
            None => ran.push((block.clone(), n)),
        }
    }
    for (b, n) in ran {
        for &(_, cell) in &b.insns {
            t.profile.count(cell, n, None);
        }
        t.profile.count(b.term_cell, n, None);
    }
    cpu.to_regs(regs);
}

/// Single-steps thread `tid` at `pc`, lifting our breakpoint there first (a thread can come back to a
/// breakpointed terminator other than through its block: a restarted system call, a signal return).
/// In a multithreaded process the breakpoint stays and the terminator is emulated instead; a signal
/// is delivered with the breakpoint in place (lifting it would let another thread run through it
/// uncounted): a handler's first instruction is the step's stop, and where the signal is ignored the
/// thread runs into the `int3`, is moved back to `pc` ([`stepped_into_breakpoint`]) and steps again
/// without the signal.
fn step(t: &mut Tracer, tid: i32, tgid: i32, pc: u64, sig: i32) -> io::Result<()> {
    let lifted = t.threads.get(&tid).and_then(|th| th.lifted);
    if lifted.is_none() && t.procs.get(&tgid).is_some_and(|p| p.bps.contains(pc)) {
        if multithreaded(t, tgid) {
            if sig != 0 {
                return ptrace::singlestep(tid, sig);
            }
            if step_by_emulation(t, tid, tgid, pc)? {
                return Ok(());
            }
        }
        if let Some(p) = t.procs.get(&tgid) {
            p.bps.lift(tid, pc)?;
        }
        if let Some(th) = t.threads.get_mut(&tid) {
            th.lifted = Some(pc);
        }
    }
    ptrace::singlestep(tid, sig)
}

/// Runs the breakpointed terminator at `pc` (thread `tid`'s pending instruction) in the tracer, then
/// resumes the thread from where it went. `Ok(false)` when it cannot be emulated (unreadable memory)
/// or the thread keeps coming back to breakpoints this way (a tight loop of bare jumps).
fn step_by_emulation(t: &mut Tracer, tid: i32, tgid: i32, pc: u64) -> io::Result<bool> {
    thread_local! {
        static DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    if DEPTH.with(|d| d.get()) >= 64 {
        return Ok(false);
    }
    let regs = ptrace::getregs(tid)?;
    if regs.rip != pc {
        return Ok(false);
    }
    let (_, d, _) = t.decode_at(tid, tgid, pc, 64);
    let shadow = t.procs.get(&tgid).is_some_and(|p| p.shadow_stack);
    let Some(after) = emulate(&d, &regs, tid, shadow)? else {
        return Ok(false);
    };
    ptrace::setregs(tid, &after)?;
    t.complete(tid);
    t.arm_with(tid, &after, false);
    DEPTH.with(|d| d.set(d.get() + 1));
    let r = resume(t, tid, 0);
    DEPTH.with(|d| d.set(d.get() - 1));
    r.map(|()| true)
}

/// Resumes thread `tid`: free-running to the end of its block when it can, else one step.
pub(crate) fn resume(t: &mut Tracer, tid: i32, sig: i32) -> io::Result<()> {
    let Some(th) = t.threads.get(&tid) else {
        return ptrace::singlestep(tid, sig);
    };
    let tgid = th.tgid;
    let pending = th.pending;
    let stepping_over = th.lifted.is_some();
    let Some(p) = pending else {
        return ptrace::singlestep(tid, sig);
    };
    if sig != 0 || p.fresh || p.bits != 64 || stepping_over || !blocks_allowed(t, tgid) {
        return step(t, tid, tgid, p.pc, sig);
    }
    let Some(block) = build(t, tid, tgid, p.pc) else {
        return step(t, tid, tgid, p.pc, sig);
    };
    if block.to_syscall {
        if let Some(th) = t.threads.get_mut(&tid) {
            th.pending = None;
            th.run = Some(block);
        }
        return ptrace::syscall(tid, 0);
    }
    let placed = match t.procs.get_mut(&tgid) {
        Some(proc) => proc.bps.insert(tid, block.term).is_ok(),
        None => false,
    };
    if !placed {
        return ptrace::singlestep(tid, sig);
    }
    if let Some(th) = t.threads.get_mut(&tid) {
        th.pending = None;
        th.run = Some(block);
    }
    ptrace::cont(tid, 0)
}

/// The value of a register for address computation.
fn register_value(reg: iced_x86::Register, r: &libc::user_regs_struct) -> Option<u64> {
    use iced_x86::Register as R;
    let full = reg.full_register();
    let v = match full {
        R::RAX => r.rax,
        R::RBX => r.rbx,
        R::RCX => r.rcx,
        R::RDX => r.rdx,
        R::RSI => r.rsi,
        R::RDI => r.rdi,
        R::RBP => r.rbp,
        R::RSP => r.rsp,
        R::R8 => r.r8,
        R::R9 => r.r9,
        R::R10 => r.r10,
        R::R11 => r.r11,
        R::R12 => r.r12,
        R::R13 => r.r13,
        R::R14 => r.r14,
        R::R15 => r.r15,
        R::RIP => r.rip,
        R::ES | R::CS | R::SS | R::DS => 0,
        R::FS => r.fs_base,
        R::GS => r.gs_base,
        _ => return None,
    };
    if reg.is_segment_register() {
        return Some(v);
    }
    Some(match reg.size() {
        8 => v,
        4 => v & 0xffff_ffff,
        2 => v & 0xffff,
        _ => return None,
    })
}

/// Where an indirect `jmp`/`call r/m64` goes.
fn indirect_target(
    insn: &iced_x86::Instruction,
    r: &libc::user_regs_struct,
    tid: i32,
) -> Option<u64> {
    match insn.op0_kind() {
        OpKind::Register => register_value(insn.op0_register(), r),
        OpKind::Memory => {
            let addr = insn.try_virtual_address(0, 0, |reg, _, _| register_value(reg, r))?;
            let mut b = [0u8; 8];
            (ptrace::read_mem(tid, addr, &mut b) == 8).then(|| u64::from_le_bytes(b))
        }
        _ => None,
    }
}

/// The registers after executing `d` at `regs.rip`, for the terminators we emulate; `None` for others.
fn emulate(
    d: &Decoded,
    regs: &libc::user_regs_struct,
    tid: i32,
    shadow_stack: bool,
) -> io::Result<Option<libc::user_regs_struct>> {
    let insn = &d.insn;
    let next = regs.rip.wrapping_add(d.len as u64);
    let mut r = *regs;
    let direct = insn.op_count() == 1 && insn.op0_kind() == OpKind::NearBranch64;
    match insn.flow_control() {
        FlowControl::UnconditionalBranch if direct => r.rip = d.target,
        FlowControl::ConditionalBranch if direct && insn.code().is_jcc_short_or_near() => {
            match emu::condition_holds(insn.condition_code(), regs.eflags) {
                Some(true) => r.rip = d.target,
                Some(false) => r.rip = next,
                None => return Ok(None),
            }
        }
        FlowControl::Call if direct && !shadow_stack => {
            r.rsp = regs.rsp.wrapping_sub(8);
            ptrace::poke(tid, r.rsp, next)?;
            r.rip = d.target;
        }
        FlowControl::IndirectBranch | FlowControl::IndirectCall
            if matches!(
                insn.code(),
                iced_x86::Code::Jmp_rm64 | iced_x86::Code::Call_rm64
            ) && !(shadow_stack && insn.flow_control() == FlowControl::IndirectCall) =>
        {
            let Some(target) = indirect_target(insn, regs, tid) else {
                return Ok(None);
            };
            if insn.flow_control() == FlowControl::IndirectCall {
                r.rsp = regs.rsp.wrapping_sub(8);
                ptrace::poke(tid, r.rsp, next)?;
            }
            r.rip = target;
        }
        FlowControl::Return
            if !shadow_stack
                && matches!(
                    insn.code(),
                    iced_x86::Code::Retnq | iced_x86::Code::Retnq_imm16
                ) =>
        {
            let mut b = [0u8; 8];
            if ptrace::read_mem(tid, regs.rsp, &mut b) != 8 {
                return Ok(None);
            }
            r.rip = u64::from_le_bytes(b);
            let extra = if insn.code() == iced_x86::Code::Retnq_imm16 {
                insn.immediate16() as u64
            } else {
                0
            };
            r.rsp = regs.rsp.wrapping_add(8 + extra);
        }
        _ => return Ok(None),
    }
    Ok(Some(r))
}

/// A step trap of a thread that was stepping its pending instruction: if another thread's block put a
/// breakpoint on that instruction after the step was requested, or the step delivered a signal with
/// our breakpoint kept in place ([`step`]), the thread ran our `int3` instead. Then it goes back to
/// the instruction, which is run again (emulated, as the breakpoint stays).
fn stepped_into_breakpoint(t: &mut Tracer, tid: i32, tgid: i32) -> io::Result<bool> {
    let Some(p) = t.threads.get(&tid).and_then(|th| th.pending) else {
        return Ok(false);
    };
    if p.kind == Kind::Trap {
        // The program's own int3.
        return Ok(false);
    }
    let mut regs = ptrace::getregs(tid)?;
    if regs.rip != p.pc.wrapping_add(1) {
        return Ok(false);
    }
    // Ours if it is there, and also if it was removed since (a vfork strips every breakpoint while
    // this trap waited to be reported): an int3 reports SI_KERNEL, a completed step TRAP_TRACE.
    let placed = t.procs.get(&tgid).is_some_and(|pr| pr.bps.contains(p.pc));
    if !placed && ptrace::signal_code(tid)? != libc::SI_KERNEL {
        return Ok(false);
    }
    regs.rip = p.pc;
    ptrace::setregs(tid, &regs)?;
    resume(t, tid, 0)?;
    Ok(true)
}

/// Handles a SIGTRAP in block mode; `Ok(false)` hands it to the single-step logic.
pub(crate) fn on_trap(t: &mut Tracer, tid: i32) -> io::Result<bool> {
    let Some(th) = t.threads.get_mut(&tid) else {
        return Ok(false);
    };
    let tgid = th.tgid;
    if let Some(addr) = th.lifted.take() {
        // Stepped over a terminator: put its breakpoint back, then count as usual.
        if let Some(p) = t.procs.get(&tgid) {
            p.bps.relay(tid, addr)?;
        }
        return Ok(false);
    }
    let Some(block) = th.run.take() else {
        return stepped_into_breakpoint(t, tid, tgid);
    };
    let mut regs = ptrace::getregs(tid)?;
    // Our breakpoint (even if it was removed since, as for a vfork, while this trap waited).
    let ours = regs.rip == block.term.wrapping_add(1);
    if !ours {
        // Someone else's SIGTRAP (kill -TRAP): count what ran and deliver it.
        block.count_before(t, regs.rip);
        t.arm_with(tid, &regs, false);
        ptrace::singlestep(tid, libc::SIGTRAP)?;
        return Ok(true);
    }
    block.count_before(t, u64::MAX);
    regs.rip = block.term;
    t.arm_with(tid, &regs, false);
    let (_, d, _) = t.decode_at(tid, tgid, block.term, 64);
    let shadow = t.procs.get(&tgid).is_some_and(|p| p.shadow_stack);
    if let Some(mut after) = emulate(&d, &regs, tid, shadow)? {
        t.complete(tid);
        if t.opts.emulate {
            run_emulated(t, tid, tgid, &mut after);
        }
        ptrace::setregs(tid, &after)?;
        t.arm_with(tid, &after, false);
        resume(t, tid, 0)?;
        return Ok(true);
    }
    if let Some(p) = t.procs.get(&tgid) {
        p.bps.lift(tid, block.term)?;
    }
    ptrace::setregs(tid, &regs)?;
    if let Some(th) = t.threads.get_mut(&tid) {
        th.lifted = Some(block.term);
    }
    ptrace::singlestep(tid, 0)?;
    Ok(true)
}

/// A system-call-entry stop: the thread ran its block to the `syscall` ending it. Counts the block,
/// makes the system call pending and steps it (its completion is the next step trap).
pub(crate) fn on_syscall_stop(t: &mut Tracer, tid: i32) -> io::Result<()> {
    let run = t.threads.get_mut(&tid).and_then(|th| th.run.take());
    let mut regs = ptrace::getregs(tid)?;
    match run {
        Some(block) if block.to_syscall && regs.rip == block.term.wrapping_add(2) => {
            block.count_before(t, u64::MAX);
            regs.rip = block.term;
            regs.rax = regs.orig_rax;
            t.arm_with(tid, &regs, false);
        }
        Some(block) => {
            // Not the block's own system call (cannot happen short of the kernel changing the
            // program counter): count what ran and carry on from here.
            block.count_before(t, regs.rip);
            t.arm_with(tid, &regs, false);
        }
        None => {}
    }
    ptrace::singlestep(tid, 0)
}

/// At a stop that is not a step trap: if the thread was running free, count the part of its block that
/// ran, move it back off a breakpoint it just hit, and make the interrupted instruction pending.
pub(crate) fn settle(t: &mut Tracer, tid: i32) -> io::Result<()> {
    let Some(th) = t.threads.get_mut(&tid) else {
        return Ok(());
    };
    // A lifted breakpoint stays lifted until its step completes: a system call interrupted here is
    // restarted at the same instruction.
    let tgid = th.tgid;
    let Some(block) = th.run.take() else {
        return Ok(());
    };
    let mut regs = ptrace::getregs(tid)?;
    if regs.rip == block.term.wrapping_add(1)
        && t.procs
            .get(&tgid)
            .is_some_and(|p| p.bps.contains(block.term))
    {
        regs.rip = block.term;
        ptrace::setregs(tid, &regs)?;
    }
    block.count_before(t, regs.rip);
    t.arm_with(tid, &regs, false);
    Ok(())
}

/// A vfork child is about to share the parent's memory: take the breakpoints out of it.
pub(crate) fn vfork_started(t: &mut Tracer, parent: i32) {
    crate::block_threads::vfork_started(t, parent);
}

/// The parent of a vfork got its memory back; breakpoints return as blocks are entered.
pub(crate) fn vfork_done(t: &mut Tracer, tid: i32) {
    let Some(tgid) = t.threads.get(&tid).map(|th| th.tgid) else {
        return;
    };
    if let Some(p) = t.procs.get_mut(&tgid) {
        p.vforks = p.vforks.saturating_sub(1);
    }
}

/// The breakpoints a child forked by thread `parent` inherits: the parent's, less one lifted for a step
/// (the child's copy of that byte is the original).
pub(crate) fn inherited(t: &Tracer, parent: i32) -> Breakpoints {
    let Some(th) = t.threads.get(&parent) else {
        return Breakpoints::default();
    };
    let mut b = t
        .procs
        .get(&th.tgid)
        .map(|p| p.bps.clone())
        .unwrap_or_default();
    if let Some(addr) = th.lifted {
        b.sites.remove(&addr);
    }
    b
}

/// Records the breakpoints a forked child inherited (none when it shares the parent's memory).
pub(crate) fn remember_child_bps(
    t: &mut Tracer,
    child: i32,
    bps: Breakpoints,
    shares_memory: bool,
) {
    if !shares_memory && !bps.is_empty() {
        t.child_bps.insert(child, bps);
    }
}

/// Removes inherited breakpoints from a child we are letting go.
pub(crate) fn strip_child(t: &mut Tracer, child: i32) {
    if let Some(mut bps) = t.child_bps.remove(&child) {
        bps.strip(child);
    }
}

/// Removes every breakpoint from the memory of thread `tid`'s process (and of `tid` itself when it is
/// a child being let go).
pub(crate) fn strip_all(t: &mut Tracer, tid: i32) {
    strip_child(t, tid);
    let Some(tgid) = t.threads.get(&tid).map(|th| th.tgid) else {
        return;
    };
    if let Some(p) = t.procs.get_mut(&tgid) {
        p.bps.strip(tid);
        p.blocks.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::ConditionCode;

    fn regs_with_flags(eflags: u64) -> libc::user_regs_struct {
        // SAFETY: plain data.
        let mut r: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        r.eflags = eflags;
        r
    }

    #[test]
    fn conditions_follow_the_flags() {
        let zf = regs_with_flags(1 << 6);
        assert_eq!(
            emu::condition_holds(ConditionCode::e, zf.eflags),
            Some(true)
        );
        assert_eq!(
            emu::condition_holds(ConditionCode::ne, zf.eflags),
            Some(false)
        );
        assert_eq!(
            emu::condition_holds(ConditionCode::le, zf.eflags),
            Some(true)
        );
        let sf = regs_with_flags(1 << 7);
        assert_eq!(
            emu::condition_holds(ConditionCode::l, sf.eflags),
            Some(true)
        );
        assert_eq!(
            emu::condition_holds(ConditionCode::ge, sf.eflags),
            Some(false)
        );
        let sf_of = regs_with_flags((1 << 7) | (1 << 11));
        assert_eq!(
            emu::condition_holds(ConditionCode::ge, sf_of.eflags),
            Some(true)
        );
        let cf = regs_with_flags(1);
        assert_eq!(
            emu::condition_holds(ConditionCode::a, cf.eflags),
            Some(false)
        );
        assert_eq!(
            emu::condition_holds(ConditionCode::be, cf.eflags),
            Some(true)
        );
        assert_eq!(emu::condition_holds(ConditionCode::None, cf.eflags), None);
    }

    #[test]
    fn indirect_targets_from_registers() {
        let mut r = regs_with_flags(0);
        r.rax = 0x1122_3344_5566_7788;
        r.fs_base = 0x7fff_0000_1000;
        use iced_x86::Register as R;
        assert_eq!(register_value(R::RAX, &r), Some(0x1122_3344_5566_7788));
        assert_eq!(register_value(R::EAX, &r), Some(0x5566_7788));
        assert_eq!(register_value(R::FS, &r), Some(0x7fff_0000_1000));
        assert_eq!(register_value(R::XMM0, &r), None);
        // jmp rax
        let insn = iced_x86::Decoder::new(64, &[0xff, 0xe0], 0).decode();
        assert_eq!(indirect_target(&insn, &r, 0), Some(0x1122_3344_5566_7788));
    }

    #[test]
    fn unpatch_restores_original_bytes() {
        let mut b = Breakpoints::default();
        b.sites.insert(0x1002, 0x90);
        let mut buf = [0x48, 0x89, 0xcc, 0xc3];
        b.unpatch(0x1000, &mut buf);
        assert_eq!(buf, [0x48, 0x89, 0x90, 0xc3]);
        assert!(b.contains(0x1002));
        assert_eq!(b.len(), 1);
    }
}
