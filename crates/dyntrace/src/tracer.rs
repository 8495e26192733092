//! The tracing engine: the wait loop over every traced thread, counting each instruction when it has
//! executed, following threads, forks (when asked) and execs, checkpoints, and the clean detach.
//!
//! Counting rule: when a thread is resumed, the instruction at its program counter is *pending*; it is
//! counted at the next stop that shows it completed (a step trap with the program counter moved, a
//! completed system call, an exec). A stop that shows no progress (a REP iteration, a restarted system
//! call, the report at a fresh exec or signal handler) leaves it pending; a signal with a handler
//! discards it, since the handler runs first and the instruction runs again later.

use crate::block::{Block, Breakpoints};
use crate::decode::{decode, Decoded, Kind};
use crate::error::{Error, Result};
use crate::maps::{MemoryMap, RegionType};
use crate::oplist::{OpId, OpList, MAX_INSN_LEN};
use crate::perf::CycleCounter;
use crate::profile::{Cell, Profile, State};
use crate::ptrace::{self, Status};
use crate::signals;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;
use std::path::PathBuf;
use std::rc::Rc;

/// How instructions are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One trap per instruction.
    Step,
    /// One trap per basic block, single-stepping wherever exactness needs it.
    Block,
}

/// What to trace.
#[derive(Debug, Clone)]
pub enum Target {
    /// Run this command.
    Command(Vec<String>),
    /// Attach to this process.
    Pid(i32),
}

/// Settings of a trace.
#[derive(Debug, Clone)]
pub struct Options {
    /// `-v` count.
    pub verbose: u8,
    /// `-z`.
    pub zeros: bool,
    /// Follow children across fork.
    pub follow_forks: bool,
    /// Counting mode.
    pub mode: Mode,
    /// Output file.
    pub output: PathBuf,
    /// Pin tracer and tracee to one CPU.
    pub pin: bool,
    /// Time instructions with this counter (only when the machine has it).
    pub timing: Option<crate::perf::TimingEvent>,
    /// Block mode: run hot blocks of simple integer instructions in the tracer's emulator.
    pub emulate: bool,
}

/// A fast hasher for program counters.
#[derive(Default, Clone, Copy)]
pub struct PcHasher(u64);

impl std::hash::Hasher for PcHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v ^ (v >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Map keyed by program counter.
pub type PcMap<V> = HashMap<u64, V, BuildHasherDefault<PcHasher>>;

/// A traced process (thread group).
pub(crate) struct Proc {
    pub(crate) program: u32,
    pub(crate) exe: String,
    pub(crate) map: MemoryMap,
    pub(crate) maps_stale: bool,
    pub(crate) cache: PcMap<(RegionType, Decoded, bool)>,
    pub(crate) bps: Breakpoints,
    /// Block mode: straight-line runs decoded so far, by first address.
    pub(crate) blocks: PcMap<Rc<Block>>,
    /// Block mode is off for this process (it shares its memory with a vfork parent).
    pub(crate) no_blocks: bool,
    /// The process uses a shadow stack: calls and returns are stepped, not emulated.
    pub(crate) shadow_stack: bool,
    /// vfork children sharing this process's memory right now: no breakpoints until they let go.
    pub(crate) vforks: u32,
}

impl Proc {
    fn forget_code(&mut self) {
        self.cache.clear();
        self.blocks.clear();
    }
}

/// Whether the thread has the x86 shadow stack enabled.
fn shadow_stack_enabled(tid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("x86_Thread_features:") && l.contains("shstk"))
        })
        .unwrap_or(false)
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Pending {
    pub(crate) pc: u64,
    pub(crate) cell: Cell,
    pub(crate) kind: Kind,
    pub(crate) sysno: u64,
    /// Code segment width (32 or 64).
    pub(crate) bits: u32,
    /// Armed at a stop that was not a step trap: a first trap at the same pc shows no execution.
    pub(crate) fresh: bool,
}

pub(crate) struct Thread {
    pub(crate) tgid: i32,
    pub(crate) pending: Option<Pending>,
    pub(crate) counter: Option<CycleCounter>,
    pub(crate) awaiting_first_stop: bool,
    pub(crate) detach_on_first_stop: bool,
    /// Block mode: the block the thread is running free through, to the breakpoint at its end.
    pub(crate) run: Option<Rc<Block>>,
    /// Block mode: the breakpoint lifted while the thread steps over its instruction.
    pub(crate) lifted: Option<u64>,
}

impl Thread {
    fn new(tgid: i32) -> Self {
        Thread {
            tgid,
            pending: None,
            counter: None,
            awaiting_first_stop: true,
            detach_on_first_stop: false,
            run: None,
            lifted: None,
        }
    }
}

/// The tracer.
pub struct Tracer {
    pub(crate) ops: OpList,
    pub(crate) opts: Options,
    /// The profile being built.
    pub profile: Profile,
    pub(crate) procs: HashMap<i32, Proc>,
    pub(crate) threads: HashMap<i32, Thread>,
    early: HashMap<i32, Status>,
    /// Stops taken out of order (while stopping a process's other threads), handled next.
    pub(crate) deferred: std::collections::VecDeque<(i32, Status)>,
    /// Block mode: breakpoints in the memory of forked children we let go.
    pub(crate) child_bps: HashMap<i32, Breakpoints>,
    warned: HashSet<u64>,
    /// Traps taken (stops handled), for the benchmark.
    pub stops: u64,
}

fn os(call: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Os { call, source }
}

fn is_errno(e: &std::io::Error, n: i32) -> bool {
    e.raw_os_error() == Some(n)
}

fn bitness(regs: &libc::user_regs_struct) -> u32 {
    if regs.cs == 0x23 {
        32
    } else {
        64
    }
}

/// Whether system call `nr` (of a `bits`-bit process) can change the memory map.
fn changes_maps(nr: u64, bits: u32) -> bool {
    if bits == 64 {
        matches!(nr, 9 | 10 | 11 | 12 | 25 | 30 | 31 | 67 | 158 | 329 | 330)
    } else {
        matches!(nr, 45 | 90 | 91 | 125 | 163 | 192)
    }
}

fn is_exit_syscall(nr: u64, bits: u32) -> bool {
    if bits == 64 {
        matches!(nr, 60 | 231)
    } else {
        matches!(nr, 1 | 252)
    }
}

/// Whether the process has a handler installed for `sig` (SigCgt in /proc/PID/status).
fn signal_caught(tid: i32, sig: i32) -> bool {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return false;
    };
    s.lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .is_some_and(|mask| (1..=64).contains(&sig) && mask & (1u64 << (sig - 1)) != 0)
}

/// Whether a SIGTRAP is pending for thread `tid` (SigPnd in /proc/TID/status).
fn sigtrap_pending(tid: i32) -> bool {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return false;
    };
    s.lines()
        .find_map(|l| l.strip_prefix("SigPnd:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .is_some_and(|mask| mask & (1u64 << (libc::SIGTRAP - 1)) != 0)
}

fn tgid_of(tid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The path of a process's program image.
pub fn exe_of(pid: i32) -> String {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into())
        })
}

impl Tracer {
    /// A tracer counting with `ops`.
    pub fn new(ops: OpList, opts: Options) -> Self {
        let profile = Profile {
            timer: opts.timing,
            ..Default::default()
        };
        Tracer {
            ops,
            opts,
            profile,
            procs: HashMap::new(),
            threads: HashMap::new(),
            early: HashMap::new(),
            deferred: Default::default(),
            child_bps: HashMap::new(),
            warned: HashSet::new(),
            stops: 0,
        }
    }

    pub(crate) fn log(&self, level: u8, msg: impl FnOnce() -> String) {
        if self.opts.verbose >= level {
            eprintln!("dyntrace: {}", msg());
        }
    }

    /// The ptrace options for our tracees.
    pub fn ptrace_options(&self) -> libc::c_int {
        let mut o = ptrace::BASE_OPTIONS;
        if self.opts.follow_forks || self.opts.mode == Mode::Block {
            o |= ptrace::FORK_OPTIONS | libc::PTRACE_O_TRACEVFORKDONE;
        }
        if self.opts.mode == Mode::Block {
            // Blocks ending in a system call run to its entry (PTRACE_SYSCALL) instead of a breakpoint.
            o |= libc::PTRACE_O_TRACESYSGOOD;
        }
        o
    }

    fn new_proc(&mut self, tgid: i32) -> Proc {
        let exe = exe_of(tgid);
        let program = self.profile.add_program(&exe, tgid);
        let map = MemoryMap::read(tgid, &exe).unwrap_or_default();
        self.log(1, || format!("tracing {exe} (pid {tgid})"));
        Proc {
            program,
            exe,
            map,
            maps_stale: false,
            cache: PcMap::default(),
            bps: Breakpoints::default(),
            blocks: PcMap::default(),
            no_blocks: false,
            shadow_stack: shadow_stack_enabled(tgid),
            vforks: 0,
        }
    }

    /// Starts tracing a command that [`crate::launch::spawn`] left stopped at its exec.
    pub fn adopt_spawned(&mut self, pid: i32) -> Result<()> {
        let p = self.new_proc(pid);
        self.procs.insert(pid, p);
        let mut t = Thread::new(pid);
        t.awaiting_first_stop = false;
        self.threads.insert(pid, t);
        self.start_counter(pid);
        self.arm(pid, true).map_err(os("ptrace(PTRACE_GETREGS)"))?;
        self.resume(pid, 0).map_err(os("ptrace(PTRACE_SINGLESTEP)"))
    }

    /// Starts tracing threads [`crate::launch::attach`] seized.
    pub fn adopt_attached(&mut self, pid: i32, tids: &[i32]) {
        let p = self.new_proc(pid);
        self.procs.insert(pid, p);
        for &t in tids {
            self.threads.insert(t, Thread::new(pid));
        }
    }

    fn start_counter(&mut self, tid: i32) {
        if let Some(event) = self.opts.timing {
            if let Some(t) = self.threads.get_mut(&tid) {
                t.counter = CycleCounter::open(tid, event).ok();
            }
        }
    }

    /// Decodes the instruction at `pc` in thread `tid`: its region, the instruction, and whether it
    /// lies in private read-only memory (where decodings are cached and breakpoints may go).
    pub(crate) fn decode_at(
        &mut self,
        tid: i32,
        tgid: i32,
        pc: u64,
        bits: u32,
    ) -> (RegionType, Decoded, bool) {
        let Some(proc) = self.procs.get_mut(&tgid) else {
            let d = decode(&self.ops, &[], pc, bits);
            return (RegionType::Unknown, d, false);
        };
        if proc.maps_stale {
            if let Ok(m) = MemoryMap::read(tgid, &proc.exe) {
                proc.map = m;
            }
            proc.forget_code();
            proc.bps.revalidate(tid);
            proc.shadow_stack = shadow_stack_enabled(tid);
            proc.maps_stale = false;
        }
        if let Some(hit) = proc.cache.get(&pc) {
            return *hit;
        }
        let mut place = proc.map.lookup(pc);
        if place.is_none() {
            if let Ok(m) = MemoryMap::read(tgid, &proc.exe) {
                proc.map = m;
                proc.forget_code();
            }
            place = proc.map.lookup(pc);
        }
        let mut buf = [0u8; MAX_INSN_LEN];
        let n = ptrace::read_mem(tid, pc, &mut buf);
        // Our own breakpoints are not the program's bytes.
        proc.bps.unpatch(pc, &mut buf[..n]);
        let d = decode(&self.ops, &buf[..n], pc, bits);
        let region = place.map_or(RegionType::Unknown, |p| p.region);
        let stable = place.is_some_and(|p| !p.writable && !p.shared);
        if place.is_some_and(|p| !p.writable) {
            proc.cache.insert(pc, (region, d, stable));
        }
        if matches!(d.key.op, OpId::Unknown(_)) && self.warned.insert(pc) {
            eprintln!("dyntrace: warning: unknown opcode at pc 0x{pc:x}");
        }
        (region, d, stable)
    }

    /// Makes the instruction at thread `tid`'s program counter pending. `fresh`: armed at a stop that was
    /// not a step trap (a system call interrupted there may be restarted).
    pub(crate) fn arm(&mut self, tid: i32, fresh: bool) -> std::io::Result<()> {
        let regs = ptrace::getregs(tid)?;
        self.arm_with(tid, &regs, fresh);
        Ok(())
    }

    pub(crate) fn arm_with(&mut self, tid: i32, regs: &libc::user_regs_struct, fresh: bool) {
        let Some(tgid) = self.threads.get(&tid).map(|t| t.tgid) else {
            return;
        };
        let mut pc = regs.rip;
        let mut sysno = regs.rax;
        if fresh
            && (regs.orig_rax as i64) >= 0
            && matches!(regs.rax as i64, -512 | -513 | -514 | -516)
        {
            // The kernel will back up over the system call instruction and run it again.
            pc = pc.wrapping_sub(2);
            sysno = regs.orig_rax;
        }
        let bits = bitness(regs);
        let (region, d, _) = self.decode_at(tid, tgid, pc, bits);
        let program = self.procs.get(&tgid).map_or(0, |p| p.program);
        if let Some(t) = self.threads.get_mut(&tid) {
            if let Some(c) = t.counter.as_mut() {
                c.lap();
            }
            t.pending = Some(Pending {
                pc,
                cell: (program, region, d.key),
                kind: d.kind,
                sysno,
                bits,
                fresh,
            });
        }
    }

    /// Counts thread `tid`'s pending instruction as executed.
    pub(crate) fn complete(&mut self, tid: i32) -> Option<Pending> {
        let t = self.threads.get_mut(&tid)?;
        let p = t.pending.take()?;
        let cycles = t.counter.as_mut().and_then(|c| c.lap());
        let tgid = t.tgid;
        self.profile.count(
            p.cell,
            1,
            if self.opts.timing.is_some() {
                cycles
            } else {
                None
            },
        );
        if p.kind == Kind::Syscall && changes_maps(p.sysno, p.bits) {
            if let Some(proc) = self.procs.get_mut(&tgid) {
                proc.maps_stale = true;
            }
        }
        Some(p)
    }

    /// Resumes a thread the way the mode wants.
    pub(crate) fn resume(&mut self, tid: i32, sig: i32) -> std::io::Result<()> {
        if self.opts.mode == Mode::Block {
            return crate::block::resume(self, tid, sig);
        }
        ptrace::singlestep(tid, sig)
    }

    /// Runs until every traced thread is gone or a stop is requested; writes checkpoints on request.
    pub fn run(&mut self) -> Result<()> {
        loop {
            if signals::stop_requested() {
                self.log(1, || "stop requested: detaching".into());
                self.detach_all();
                return Ok(());
            }
            if signals::take_checkpoint() {
                self.checkpoint();
            }
            if self.threads.is_empty() {
                return Ok(());
            }
            let next = match self.deferred.pop_front() {
                Some(x) => Ok(x),
                None => ptrace::wait(-1),
            };
            let (tid, st) = match next {
                Ok(x) => x,
                Err(e) if is_errno(&e, libc::EINTR) => continue,
                Err(e) if is_errno(&e, libc::ECHILD) => return Ok(()),
                Err(e) => {
                    return Err(Error::Os {
                        call: "waitpid",
                        source: e,
                    })
                }
            };
            self.stops += 1;
            if let Err(e) = self.handle(tid, st) {
                if is_errno(&e, libc::ESRCH) {
                    // The thread died under us (killed by another thread's exit_group); its exit
                    // status is still to come.
                    continue;
                }
                return Err(Error::Os {
                    call: "ptrace",
                    source: e,
                });
            }
        }
    }

    /// Writes a checkpoint, warning (not failing) when it cannot.
    pub fn checkpoint(&mut self) {
        self.log(1, || {
            format!("checkpoint to {}", self.opts.output.display())
        });
        let text = self
            .profile
            .render(&self.ops, self.opts.zeros, State::Checkpoint);
        if let Err(e) = crate::profile::write_atomically(&self.opts.output, &text) {
            eprintln!(
                "dyntrace: warning: checkpoint to {} failed: {e}",
                self.opts.output.display()
            );
        }
    }

    /// Renders the final profile.
    pub fn render_final(&self) -> String {
        self.profile
            .render(&self.ops, self.opts.zeros, State::Final)
    }

    fn gone(&mut self, tid: i32) {
        if let Some(t) = self.threads.get(&tid) {
            if let Some(p) = t.pending {
                if p.kind == Kind::Syscall && is_exit_syscall(p.sysno, p.bits) {
                    self.complete(tid);
                }
            }
        }
        if let Some(t) = self.threads.remove(&tid) {
            if !self.threads.values().any(|o| o.tgid == t.tgid) {
                self.procs.remove(&t.tgid);
                self.log(1, || format!("process {} exited", t.tgid));
            }
        }
    }

    fn handle(&mut self, tid: i32, st: Status) -> std::io::Result<()> {
        if !self.threads.contains_key(&tid) {
            // A new task whose creation event we have not seen yet.
            if matches!(st, Status::Stopped { .. }) {
                self.early.insert(tid, st);
            }
            return Ok(());
        }
        let (sig, event) = match st {
            Status::Exited(_) | Status::Killed(_) => {
                self.gone(tid);
                return Ok(());
            }
            Status::Stopped { sig, event } => (sig, event),
        };
        let first = self
            .threads
            .get(&tid)
            .is_some_and(|t| t.awaiting_first_stop);
        if first && (event == libc::PTRACE_EVENT_STOP || sig == libc::SIGSTOP) {
            return self.first_stop(tid);
        }
        match event {
            0 if sig == libc::SIGTRAP => self.step_trap(tid),
            0 if sig == libc::SIGTRAP | 0x80 => crate::block::on_syscall_stop(self, tid),
            0 => self.signal_stop(tid, sig),
            libc::PTRACE_EVENT_EXEC => self.exec_event(tid),
            libc::PTRACE_EVENT_CLONE | libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK => {
                self.clone_event(tid, event)
            }
            libc::PTRACE_EVENT_VFORK_DONE => {
                crate::block::vfork_done(self, tid);
                self.resume(tid, 0)
            }
            libc::PTRACE_EVENT_STOP
                if matches!(
                    sig,
                    libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
                ) =>
            {
                // A group-stop (job control): stay stopped until SIGCONT, without letting go.
                crate::block::settle(self, tid)?;
                self.log(2, || format!("thread {tid} stopped by signal {sig}"));
                ptrace::listen(tid)
            }
            _ => {
                // An interrupt or the end of a group-stop: carry on from here.
                crate::block::settle(self, tid)?;
                self.rearm_fresh(tid)?;
                self.resume(tid, 0)
            }
        }
    }

    fn rearm_fresh(&mut self, tid: i32) -> std::io::Result<()> {
        let keep = self.threads.get(&tid).and_then(|t| t.pending);
        let regs = ptrace::getregs(tid)?;
        match keep {
            Some(p) if p.pc == regs.rip => Ok(()),
            _ => {
                self.arm_with(tid, &regs, true);
                Ok(())
            }
        }
    }

    fn first_stop(&mut self, tid: i32) -> std::io::Result<()> {
        let detach = self
            .threads
            .get(&tid)
            .is_some_and(|t| t.detach_on_first_stop);
        if detach {
            self.threads.remove(&tid);
            crate::block::strip_child(self, tid);
            return ptrace::detach(tid, 0);
        }
        if let Some(t) = self.threads.get_mut(&tid) {
            t.awaiting_first_stop = false;
        }
        self.start_counter(tid);
        self.arm(tid, true)?;
        self.resume(tid, 0)
    }

    fn step_trap(&mut self, tid: i32) -> std::io::Result<()> {
        if self.opts.mode == Mode::Block && crate::block::on_trap(self, tid)? {
            return Ok(());
        }
        let regs = ptrace::getregs(tid)?;
        let mut deliver = 0;
        if let Some(p) = self.threads.get(&tid).and_then(|t| t.pending) {
            let moved = regs.rip != p.pc;
            let executed = moved || (!p.fresh && matches!(p.kind, Kind::Branch | Kind::Trap));
            if executed {
                self.complete(tid);
                if p.kind == Kind::Trap {
                    deliver = libc::SIGTRAP;
                }
            } else if let Some(t) = self.threads.get_mut(&tid) {
                if let Some(q) = t.pending.as_mut() {
                    q.fresh = false;
                }
                return self.resume(tid, 0);
            }
        }
        self.arm_with(tid, &regs, false);
        self.resume(tid, deliver)
    }

    fn signal_stop(&mut self, tid: i32, sig: i32) -> std::io::Result<()> {
        if self.opts.verbose >= 3 {
            if let Ok(r) = ptrace::getregs(tid) {
                let th = self.threads.get(&tid);
                eprintln!(
                    "dyntrace: thread {tid} signal {sig} at rip {:#x} rsp {:#x} (run {:?}, pending {:?})",
                    r.rip,
                    r.rsp,
                    th.and_then(|t| t.run.as_ref().map(|b| (b.insns[0].0, b.term))),
                    th.and_then(|t| t.pending.map(|p| p.pc))
                );
            }
        }
        self.log(2, || format!("thread {tid} gets signal {sig}"));
        crate::block::settle(self, tid)?;
        if signal_caught(tid, sig) {
            // The handler runs first; the interrupted instruction runs (and is counted) later.
            if let Some(t) = self.threads.get_mut(&tid) {
                t.pending = None;
            }
        }
        self.resume(tid, sig)
    }

    fn exec_event(&mut self, tid: i32) -> std::io::Result<()> {
        let former = ptrace::event_msg(tid).map(|m| m as i32).unwrap_or(tid);
        if former != tid {
            if let Some(t) = self.threads.remove(&former) {
                self.threads.insert(tid, t);
            }
        }
        // The execve instruction completed in the old program.
        self.complete(tid);
        let tgid = self.threads.get(&tid).map_or(tid, |t| t.tgid);
        // Every other thread of the process is gone.
        let others: Vec<i32> = self
            .threads
            .iter()
            .filter(|(t, th)| th.tgid == tgid && **t != tid)
            .map(|(t, _)| *t)
            .collect();
        for o in others {
            self.threads.remove(&o);
        }
        let p = self.new_proc(tgid);
        self.log(1, || format!("process {tgid} exec'd {}", p.exe));
        self.procs.insert(tgid, p);
        if let Some(t) = self.threads.get_mut(&tid) {
            t.run = None;
            t.lifted = None;
        }
        self.arm(tid, true)?;
        self.resume(tid, 0)
    }

    fn clone_event(&mut self, tid: i32, event: i32) -> std::io::Result<()> {
        let new = ptrace::event_msg(tid)? as i32;
        let parent_tgid = self.threads.get(&tid).map_or(tid, |t| t.tgid);
        let is_thread = event == libc::PTRACE_EVENT_CLONE && tgid_of(new) == Some(parent_tgid);
        let mut t = Thread::new(parent_tgid);
        if is_thread {
            self.log(1, || format!("process {parent_tgid} started thread {new}"));
            // Threads share the text: breakpoints placed while the process had one thread may be ones
            // that are lifted to step over; they go, and blocks are rebuilt with only breakpoints that
            // are never lifted.
            crate::block_threads::strip_liftable(self, tid);
        } else if self.opts.follow_forks {
            self.log(1, || format!("process {parent_tgid} forked {new}"));
            t.tgid = new;
            let exe = self
                .procs
                .get(&parent_tgid)
                .map(|p| p.exe.clone())
                .unwrap_or_default();
            let program = self.profile.add_program(&exe, new);
            let (map, cache) = match self.procs.get(&parent_tgid) {
                Some(p) => (p.map.clone(), p.cache.clone()),
                None => Default::default(),
            };
            let bps = crate::block::inherited(self, tid);
            let shares_mm = event == libc::PTRACE_EVENT_VFORK;
            self.procs.insert(
                new,
                Proc {
                    program,
                    exe,
                    map,
                    maps_stale: true,
                    cache,
                    bps: if shares_mm {
                        Breakpoints::default()
                    } else {
                        bps
                    },
                    blocks: PcMap::default(),
                    no_blocks: shares_mm,
                    shadow_stack: false,
                    vforks: 0,
                },
            );
            if shares_mm {
                crate::block::vfork_started(self, tid);
            }
        } else {
            self.log(1, || {
                format!("process {parent_tgid} forked {new} (not followed)")
            });
            t.tgid = new;
            t.detach_on_first_stop = true;
            if event == libc::PTRACE_EVENT_VFORK {
                crate::block::vfork_started(self, tid);
            }
            // The child's copy of the parent's breakpoints is removed before it runs.
            let bps = crate::block::inherited(self, tid);
            crate::block::remember_child_bps(self, new, bps, event == libc::PTRACE_EVENT_VFORK);
        }
        self.threads.insert(new, t);
        if let Some(st) = self.early.remove(&new) {
            self.handle(new, st)?;
        }
        self.resume(tid, 0)
    }

    /// Stops every thread, counts what completed, removes breakpoints and detaches, leaving the
    /// processes running untraced.
    pub fn detach_all(&mut self) {
        // Stops taken out of order go back to their threads first (detaching delivers their signals).
        for (tid, st) in std::mem::take(&mut self.deferred) {
            if let Status::Stopped { sig, event: 0 } = st {
                if sig != libc::SIGTRAP && sig != libc::SIGTRAP | 0x80 {
                    let _ = ptrace::detach(tid, sig);
                    self.threads.remove(&tid);
                    continue;
                }
            }
            if !matches!(st, Status::Stopped { .. }) {
                self.gone(tid);
            }
        }
        let tids: Vec<i32> = self.threads.keys().copied().collect();
        for tid in &tids {
            let _ = ptrace::interrupt(*tid);
        }
        while !self.threads.is_empty() {
            let (tid, st) = match ptrace::wait(-1) {
                Ok(x) => x,
                Err(e) if is_errno(&e, libc::EINTR) => continue,
                Err(_) => break,
            };
            let Status::Stopped { sig, event } = st else {
                self.gone(tid);
                continue;
            };
            if !self.threads.contains_key(&tid) {
                crate::block::strip_child(self, tid);
                let _ = ptrace::detach(tid, 0);
                continue;
            }
            if event == libc::PTRACE_EVENT_STOP && sigtrap_pending(tid) {
                // A step trap is queued behind our interrupt: take it first, or it would kill the
                // process once we let go.
                if ptrace::cont(tid, 0).is_ok() {
                    continue;
                }
            }
            let mut deliver = 0;
            match event {
                0 if sig == libc::SIGTRAP => {
                    let _ = crate::block::settle(self, tid);
                    if let Ok(regs) = ptrace::getregs(tid) {
                        let p = self.threads.get(&tid).and_then(|t| t.pending);
                        if p.is_some_and(|p| p.pc != regs.rip) {
                            self.complete(tid);
                        }
                    }
                }
                0 if sig == libc::SIGTRAP | 0x80 => {
                    // At the entry of the system call ending a block: the block ran, the system call
                    // completes after we let go.
                    let _ = crate::block::settle(self, tid);
                }
                0 => {
                    let _ = crate::block::settle(self, tid);
                    deliver = sig;
                }
                libc::PTRACE_EVENT_CLONE | libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK => {
                    if let Ok(new) = ptrace::event_msg(tid) {
                        let mut t = Thread::new(new as i32);
                        t.detach_on_first_stop = true;
                        self.threads.insert(new as i32, t);
                        if self.early.remove(&(new as i32)).is_some() {
                            self.threads.remove(&(new as i32));
                            crate::block::strip_child(self, new as i32);
                            let _ = ptrace::detach(new as i32, 0);
                        }
                    }
                }
                _ => {
                    let _ = crate::block::settle(self, tid);
                }
            }
            // Any stopped thread can restore the text of its process.
            crate::block::strip_all(self, tid);
            let _ = ptrace::detach(tid, deliver);
            let tg = self.threads.remove(&tid).map(|t| t.tgid);
            if let Some(tg) = tg {
                if !self.threads.values().any(|o| o.tgid == tg) {
                    self.procs.remove(&tg);
                }
            }
        }
    }
}
