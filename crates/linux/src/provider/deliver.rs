//! Delivering captured events to the framework: each [`CapturedEvent`] becomes a firing of its
//! probe (the tag is the framework's probe id) with the probe context (arguments, identity,
//! `execname`, CPU, timestamp, errno, `curthread`, stacks) and the memory captured with it, so that
//! built-in variables and `copyinstr(arg1)` read what the probe saw. Kernel reads
//! (`curthread->real_parent->pid`, `args[0]->field`) are served from the kernel copies the needs
//! analysis asked for, found by the address the interpreter computes at each step of its walk. User
//! reads the capture could not foresee (computed addresses) go to the process's memory while it can
//! still be read; everything else faults as DTrace faults ([`EventMemory`]). A copy sized at the probe
//! (`copyin(arg1, arg2)`) holds every byte the firing asked for where the probe sizes its records
//! (`capture::sized`), up to the program's `scratchsize`; a read past it faults. Only where it holds
//! fewer ([`sized_prefixes`]: records of one size per probe, on kernels without ring-buffer dynptrs,
//! which hold a page; or a `scratchsize` above `capture::spec::MAX_SIZED_COPY`) is a longer read
//! from it served from the process's memory as a whole while the process lives, faulting after.

use super::file_usdt;
use super::LinuxTracing;
use crate::capture::{CapturedEvent, DeferredUpdate};
use crate::session::Delivery;
use dtrace_dif::vm::{FaultKind, Memory};
use dtrace_framework::{CapturedMemory, FiringContext, Framework};
use std::fs::File;
use std::os::fd::RawFd;
use std::os::unix::fs::FileExt;

mod ustack;

/// The memory a clause reads at one firing: the bytes captured at the probe, and for user addresses
/// outside every captured range, the process's memory read through `/proc/<pid>/mem` (opened at the
/// first such read). A read starting inside a captured range never goes to the process: the VM then
/// retries byte by byte within the capture, so what the probe saw is what the clause reads.
pub struct EventMemory {
    captured: CapturedMemory,
    /// The `d_path()` paths recorded at the probe, by `struct path` address.
    paths: Vec<(u64, Option<Vec<u8>>)>,
    pid: u32,
    /// `None`: not tried yet; `Some(None)`: cannot be opened.
    proc_mem: Option<Option<File>>,
    /// User ranges `(address, bytes held)` of copies sized at the probe: a read starting in one and
    /// running past what it holds goes to the process whole.
    prefixes: Vec<(u64, u64)>,
    /// Ranges `(address, bytes)` of captured user copies that arguments' values were replaced with.
    arg_copy_addrs: Vec<(u64, u64)>,
}

/// The process whose memory completes what a firing of process `pid` did not capture (see
/// [`EventMemory::new`]): none after an exec (`exec`: the memory is the new program's), nor for
/// dtrace's own firings: its memory is read in (what its probe could not read is a bad
/// address), and reading it would fire the syscall probes again (the open and reads of
/// /proc/self/mem), so each firing of dtrace's own process would feed the next.
fn memory_pid(pid: u32, exec: bool) -> u32 {
    if exec || pid == crate::process::own_pid() {
        0
    } else {
        pid
    }
}

impl EventMemory {
    /// Captured memory of an event of process `pid` (0: no process memory to fall back on).
    pub fn new(captured: CapturedMemory, pid: u32) -> EventMemory {
        EventMemory {
            captured,
            paths: Vec::new(),
            pid,
            proc_mem: None,
            prefixes: Vec::new(),
            arg_copy_addrs: Vec::new(),
        }
    }

    /// Adds the paths recorded with the event (those that could not be made fault when read).
    pub fn with_paths(mut self, paths: &[crate::capture::CapturedPath]) -> EventMemory {
        self.paths = paths
            .iter()
            .map(|p| (p.addr, p.path.as_ref().ok().cloned()))
            .collect();
        self
    }

    /// [`EventMemory::with_paths`], taking the paths rather than copying them.
    pub fn with_owned_paths(mut self, paths: Vec<crate::capture::CapturedPath>) -> EventMemory {
        if paths.is_empty() {
            return self;
        }
        self.paths = paths.into_iter().map(|p| (p.addr, p.path.ok())).collect();
        self
    }

    /// The same, knowing which of `ev`'s user copies were sized at the probe ([`sized_prefixes`]).
    /// With the addresses of the captured user copies that arguments' values were replaced with
    /// ([`set_copy_args`]): the VM reads those strings as it reads strings, from kernel memory.
    pub fn with_arg_copies(mut self, addrs: Vec<(u64, u64)>) -> EventMemory {
        self.arg_copy_addrs = addrs;
        self
    }

    pub fn with_prefixes(mut self, prefixes: Vec<(u64, u64)>) -> EventMemory {
        self.prefixes = prefixes;
        self
    }

    fn in_prefix(&self, addr: u64) -> bool {
        self.prefixes
            .iter()
            .any(|&(at, n)| addr >= at && addr - at < n.max(1))
    }

    fn in_capture(&self, addr: u64) -> bool {
        self.captured
            .regions()
            .iter()
            .any(|r| r.user && addr >= r.addr && addr - r.addr < r.bytes.len() as u64)
    }

    /// Whether `addr` is in a captured user copy that an argument's value was replaced with.
    fn arg_user_copy(&self, addr: u64) -> bool {
        self.arg_copy_addrs
            .iter()
            .any(|&(a, n)| addr >= a && addr - a < n)
    }

    fn assemble_kernel(&self, addr: u64, buf: &mut [u8]) -> Option<()> {
        let regions = self.captured.regions();
        for (i, b) in buf.iter_mut().enumerate() {
            let at = addr.checked_add(i as u64)?;
            *b = regions.iter().filter(|r| !r.user).find_map(|r| {
                let off = at.checked_sub(r.addr)?;
                r.bytes.get(usize::try_from(off).ok()?).copied()
            })?;
        }
        Some(())
    }

    fn read_process(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), FaultKind> {
        if self.pid == 0 {
            return Err(FaultKind::BadAddr);
        }
        let pid = self.pid;
        let f = self
            .proc_mem
            .get_or_insert_with(|| File::open(format!("/proc/{pid}/mem")).ok());
        let f = f.as_ref().ok_or(FaultKind::BadAddr)?;
        match f.read_exact_at(buf, addr) {
            Ok(()) => Ok(()),
            Err(_) => Err(FaultKind::BadAddr),
        }
    }
}

impl Memory for EventMemory {
    fn read_kernel(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), FaultKind> {
        match self.captured.read_kernel(addr, buf) {
            Ok(()) => Ok(()),
            // Copies of the same instant that together cover the range (a string beside a field,
            // ranges of one object too far apart to merge) serve it byte by byte.
            Err(e) => self
                .assemble_kernel(addr, buf)
                .or_else(|| {
                    // A `string` argument whose value delivery replaced with its user copy (USDT
                    // `args[]`), read where the VM reads strings.
                    (self.arg_user_copy(addr) && self.captured.read_user(addr, buf).is_ok())
                        .then_some(())
                })
                .ok_or(e),
        }
    }

    fn read_user(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), FaultKind> {
        match self.captured.read_user(addr, buf) {
            Ok(()) => Ok(()),
            // Longer than a sized copy holds: the whole read from the process, never a mix.
            Err(_) if self.in_prefix(addr) => self.read_process(addr, buf),
            Err(e) if self.in_capture(addr) => Err(e),
            Err(_) => self.read_process(addr, buf),
        }
    }

    fn write_user(&mut self, _addr: u64, _data: &[u8]) -> Result<(), FaultKind> {
        Err(FaultKind::UPriv)
    }

    fn d_path(&mut self, path: u64) -> Result<Vec<u8>, FaultKind> {
        self.paths
            .iter()
            .find(|(a, _)| *a == path)
            .and_then(|(_, p)| p.clone())
            .ok_or(FaultKind::BadAddr)
    }
}

/// The framework's view of one captured event. `clock_offset` turns `bpf_ktime_get_ns()` into the
/// framework's clock. (Delivery builds the same in place with `fill_firing` and
/// `captured_memory_of`, reusing buffers and taking the event's bytes; this is that on a copy.)
pub fn firing_of(ev: &CapturedEvent, clock_offset: i64) -> (FiringContext, CapturedMemory) {
    let mut ev = ev.clone();
    let mut ctx = FiringContext::default();
    fill_firing(&mut ctx, &mut ev, clock_offset);
    (ctx, captured_memory_of(&mut ev))
}

/// The firing context of an event, built in `ctx` (every field set anew, its buffers reused)
/// from an event about to be fired and dropped: its stacks are copied into the reused buffers,
/// its `execname` written in place.
fn fill_firing(ctx: &mut FiringContext, ev: &mut CapturedEvent, clock_offset: i64) {
    let mut execname = std::mem::take(&mut ctx.execname);
    execname.clear();
    let end = ev
        .comm
        .iter()
        .position(|b| *b == 0)
        .unwrap_or(ev.comm.len());
    match std::str::from_utf8(&ev.comm[..end]) {
        Ok(s) => execname.push_str(s),
        Err(_) => execname.push_str(&String::from_utf8_lossy(&ev.comm[..end])),
    }
    let mut kstack = std::mem::take(&mut ctx.kstack);
    kstack.clear();
    if let Some(Ok(frames)) = &ev.kstack {
        kstack.extend_from_slice(frames);
    }
    let mut ustack = std::mem::take(&mut ctx.ustack);
    ustack.clear();
    if let Some(Ok(frames)) = &ev.ustack {
        ustack.extend_from_slice(frames);
    }
    let mut ancestors = std::mem::take(&mut ctx.ancestors);
    ancestors.clear();
    if let Some(pids) = &ev.ancestors {
        ancestors.extend(pids.iter().map(|p| u64::from(*p)));
    }
    let execargs = match &ev.execargs {
        Some(Ok(bytes)) => execargs_string(bytes),
        _ => String::new(),
    };
    *ctx = FiringContext {
        pid: u64::from(ev.pid),
        ppid: u64::from(ev.ppid),
        tid: u64::from(ev.tid),
        uid: u64::from(ev.uid),
        gid: u64::from(ev.gid),
        errno: ev.errno as i64 as u64,
        curthread: ev.task,
        execname,
        execargs,
        vtimestamp: ev.vtime_ns,
        walltimestamp: (ev.walltime_ns != 0).then_some(ev.walltime_ns),
        timestamp: Some((ev.ktime_ns as i64).saturating_add(clock_offset).max(0) as u64),
        ucaller: ustack.get(1).copied().unwrap_or(0),
        kstack,
        ustack,
        ancestors,
        handed_over: ev.handed_over,
        ..FiringContext::default()
    };
    for (dst, src) in ctx.args.iter_mut().zip(ev.args.iter()) {
        *dst = *src;
    }
}

/// The memory captured with an event, taking the bytes out of the event's copies.
fn captured_memory_of(ev: &mut CapturedEvent) -> CapturedMemory {
    let mut mem = CapturedMemory::new();
    for c in &mut ev.copies {
        if let Ok(bytes) = &mut c.data {
            let mut b = std::mem::take(bytes);
            if c.kind.is_string() {
                // Strings come without their NUL; copyinstr() stops at it.
                b.push(0);
            }
            mem.add(c.addr, b, c.kind.is_user());
        }
    }
    mem
}

/// The user ranges of `ev`'s copies sized at the probe that were captured holding fewer bytes than
/// the firing asked for: `(address, bytes held)`. A read starting in one and running past it goes
/// to the process's memory (see the module notes); a copy that holds all it asked for is not one.
pub fn sized_prefixes(ev: &CapturedEvent) -> Vec<(u64, u64)> {
    ev.copies
        .iter()
        .filter(|c| c.kind == crate::capture::MemKind::UserBytes)
        .filter_map(|c| {
            let held = c.data.as_ref().ok()?.len() as u64;
            (held < c.requested?).then_some((c.addr, held))
        })
        .collect()
}

/// `execargs` from the process's argument area: the arguments separated by spaces (the area's NULs
/// become spaces, its final NUL and anything after it dropped).
pub fn execargs_string(area: &[u8]) -> String {
    let end = area.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    let joined: Vec<u8> = area[..end]
        .iter()
        .map(|b| if *b == 0 { b' ' } else { *b })
        .collect();
    String::from_utf8_lossy(&joined).into_owned()
}

/// Replaces the user stack the kernel walked (frame pointers) by the one unwound from the
/// registers and stack bytes copied at the probe with the files' `.eh_frame`, when that one goes
/// further (see [`ustack::complete_walk`]).
fn unwind_ustack(
    syms: &mut crate::symbols::Symbolizer,
    pid: u32,
    u: &crate::capture::UserStackCopy,
    ctx: &mut FiringContext,
) {
    if ustack::complete_walk(syms, pid, u, &mut ctx.ustack) {
        ctx.ucaller = ctx.ustack.get(1).copied().unwrap_or(0);
    }
}

impl LinuxTracing {
    /// Aggregates update `u`, which a probe could not make (see `layout::KIND_AGG_UPDATE`), for
    /// the next snapshot of the kernel's aggregations: a whole key as it is; else the user stack
    /// of its key walked first, as a captured firing's is walked (the process's mappings noted
    /// with the name it ran under; its ranges loaded first, for its later firings). (Holds
    /// `syms`, then the shared state.)
    fn aggregate_deferred(&self, syms: &mut crate::symbols::Symbolizer, u: &DeferredUpdate) {
        if u.whole {
            if let Some(k) = self.lock().kaggs.as_mut() {
                k.defer(u, None);
            }
            return;
        }
        let mut pcs = u.walked.clone();
        if u.pid != 0 {
            syms.note_process_as(u.pid, &u.execname);
            // Loaded before this update is walked, as a handed-over firing's process is.
            if let Some(m) = self.lock().ustack_maps.as_mut() {
                // A process whose ranges cannot be loaded has its updates walked here.
                let _ = m.load(syms, u.pid, u.ktime_ns);
            }
        }
        if let Some(c) = &u.unwind {
            ustack::complete_walk(syms, u.pid, c, &mut pcs);
        }
        let mut sh = self.lock();
        if let Some(k) = sh.kaggs.as_mut() {
            k.defer(u, Some(&pcs));
        }
    }
}

/// `caller` from a kernel stack whose tracing frames were removed: the first frame, the function
/// the probe site is in; for a stack that starts at the probe site's own address (a sampled one,
/// at the interrupted PC; an `fbt` probe's, at the probed function), the second.
pub fn caller_of(kstack: &[u64], own_frame: bool) -> u64 {
    kstack.get(usize::from(own_frame)).copied().unwrap_or(0)
}

/// Gives each argument whose data was captured (`__data_loc` strings, inline arrays) the address
/// of its capture, so `stringof(args[n])` reads it; `map` holds `(argument, copy index)`.
pub fn set_copy_args(
    ctx: &mut FiringContext,
    ev: &CapturedEvent,
    map: &[(usize, usize)],
) -> Vec<(u64, u64)> {
    let mut user = Vec::new();
    for &(arg, copy) in map {
        if let (Some(slot), Some(c)) = (ctx.args.get_mut(arg), ev.copies.get(copy)) {
            if c.data.is_ok() {
                *slot = c.addr;
                if let (true, Ok(d)) = (c.kind.is_user(), &c.data) {
                    user.push((c.addr, d.len() as u64 + 1));
                }
            }
        }
    }
    user
}

pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// How long firing a batch of deliveries goes before the ring is read again (see
/// [`LinuxTracing::fire_all`]).
const READ_WHILE_FIRING: std::time::Duration = std::time::Duration::from_millis(2);

/// The most deliveries a batch takes from the ring while it fires (about 80 MiB of records
/// carrying user stacks), and the most it takes in all: firing one may make records (dtrace's own
/// syscalls, traced by `-P syscall`), and a batch that read them as it went would never end.
const BACKLOG_RECORDS: usize = 8192;

impl LinuxTracing {
    /// Marks tracing live (call once BEGIN has fired): events captured before now (probes are
    /// attached when programs are enabled, before `go`) are discarded rather than fired after
    /// BEGIN with earlier timestamps.
    pub fn go_live(&self) {
        let mut sh = self.lock();
        sh.live_since = Some(monotonic_ns());
        sh.user.end_enabling();
    }

    /// Waits up to `timeout_ms` for captured events and fires each in `fw`. Returns how many were
    /// fired. Call it from the thread driving the framework, alongside `Framework::poll`.
    pub fn pump(&self, fw: &mut Framework, timeout_ms: i32) -> crate::error::Result<usize> {
        let mut events: Vec<Delivery> = Vec::new();
        let offset = {
            let mut sh = self.lock();
            let offset = *sh
                .clock_offset
                .get_or_insert_with(|| fw.now() as i64 - monotonic_ns() as i64);
            if let Some(s) = sh.session.as_mut() {
                s.poll_boxed(timeout_ms, &mut |e| events.push(e))?;
            }
            offset
        };
        Ok(self.fire_all(fw, events, offset))
    }

    /// Sleeps until the capture ring needs reading (with `ring`: its programs wake the reader
    /// once it is filling up, and it is readable at once when records already wait), a run-time
    /// linker hook stopped a process (its doorbell, see [`crate::rlc`]), one of `also` is
    /// readable (a signal's self-pipe, a traced process's pidfd), or `timeout` passes. Call it
    /// between pumps instead of sleeping: an idle session then costs no wake-up. While records
    /// keep coming, wait without `ring` for a short while: the next pump then reads a batch, not
    /// each record as it comes.
    pub fn wait(
        &self,
        timeout: std::time::Duration,
        ring: bool,
        also: &[RawFd],
    ) -> crate::error::Result<()> {
        // The descriptors stay open: the session and the hooks are closed only by this thread.
        let (ring, doorbell) = {
            let sh = self.lock();
            // Records dtrace must act on at once wake it (`CaptureSpec::wake_at_once`); while
            // records keep coming (`ring` false) it sleeps a few milliseconds instead (the
            // consumer's SLEEP_POLL). Where dtrace may send signals the ring is read on a
            // clock (see `SIGNAL_POLL`).
            let ring = ring && !sh.signals_polled;
            let ring = sh
                .session
                .as_ref()
                .filter(|_| ring)
                .map(|s| s.ring_fd_to_sleep_on());
            (ring, sh.user.doorbell())
        };
        let fds: Vec<RawFd> = ring
            .into_iter()
            .chain(doorbell)
            .chain(also.iter().copied())
            .collect();
        crate::wait::readable(&fds, timeout).map(|_| ())
    }

    /// How long until the providers have work due without a ring record or a doorbell telling
    /// of it: the next look for processes that started with USDT probes a provider glob names,
    /// the next read of a ring whose records may ask dtrace to send a signal
    /// ([`super::SIGNAL_POLL`]). (Records dtrace completes at delivery wake it: see
    /// `CaptureSpec::wake_at_once`.) `None` when there is none.
    pub fn time_to_next_look(&self) -> Option<std::time::Duration> {
        let sh = self.lock();
        let signals = sh.signals_polled.then_some(super::SIGNAL_POLL);
        signals.into_iter().chain(sh.user.time_to_next_look()).min()
    }

    /// The framework-clock time of the oldest event captured but held back for a re-read, if any:
    /// it will fire later with that earlier timestamp.
    pub fn oldest_held(&self) -> Option<u64> {
        let sh = self.lock();
        let offset = sh.clock_offset?;
        let k = sh.session.as_ref()?.oldest_held_ns()?;
        Some((k as i64).saturating_add(offset).max(0) as u64)
    }

    /// Delivers everything still pending (ring contents and entry events held for a re-read). Call
    /// once the traced work is over, before `Framework::stop`.
    pub fn finish(&self, fw: &mut Framework) -> usize {
        let mut events: Vec<Delivery> = Vec::new();
        let offset = {
            let mut sh = self.lock();
            let offset = *sh
                .clock_offset
                .get_or_insert_with(|| fw.now() as i64 - monotonic_ns() as i64);
            if let Some(s) = sh.session.as_mut() {
                s.drain_boxed(&mut |e| events.push(e));
                s.flush_held_boxed(&mut |e| events.push(Delivery::Event(e)));
            }
            offset
        };
        self.fire_all(fw, events, offset)
    }

    /// Fires the events in `deliveries` and commits the records built at the probes, in order.
    pub(crate) fn fire_all(
        &self,
        fw: &mut Framework,
        deliveries: Vec<Delivery>,
        offset: i64,
    ) -> usize {
        if deliveries.is_empty() {
            return 0;
        }
        let (active, arg_copies, since, (sampled, own_frame), note, proc_args, exec, built, files) = {
            let sh = self.lock();
            (
                sh.active.clone(),
                sh.arg_copies.clone(),
                sh.live_since.unwrap_or(0),
                (sh.sampled.clone(), sh.own_frame.clone()),
                sh.note_processes,
                sh.execargs_from_proc.clone(),
                sh.image_replaced.clone(),
                sh.built_epids.clone(),
                // Which probe each file probe fires in each process (see `file_usdt`).
                (!sh.user.files.is_empty()).then(|| sh.user.files.served_map()),
            )
        };
        let mut unknown = Vec::new();
        let mut n = 0;
        let mut syms = self.lock_symbols();
        self.forget_remapped(&mut syms);
        // One context for the batch: its strings and stacks keep their buffers from firing to
        // firing.
        let mut ctx = FiringContext::default();
        let mut taken = deliveries.len();
        let mut queue: std::collections::VecDeque<Delivery> = deliveries.into();
        let mut read_at = std::time::Instant::now();
        while let Some(d) = queue.pop_front() {
            // A batch can take a while (the first firings of a process load its files' symbols
            // and unwind tables) while the probes go on writing, as fast as a program runs: the
            // ring is read on the way, what came joins the batch's end (in the ring's order),
            // so a burst waits here rather than overflowing the ring (bounded: past
            // `BACKLOG_RECORDS` the ring keeps it, and drops what it has no room for; the next
            // pump reads it).
            if read_at.elapsed() >= READ_WHILE_FIRING && taken < BACKLOG_RECORDS {
                if let Some(s) = self.lock().session.as_mut() {
                    taken += s.drain_boxed(&mut |e| queue.push_back(e));
                }
                read_at = std::time::Instant::now();
            }
            // After exit() nothing fires: the rest of the batch is of no use (and the ring's
            // drops from now on are of firings DTrace would not have made), but for the
            // aggregation updates the kernel made before it stopped (its clauses run no more
            // after exit(), see `kagg::emit_exited`), which count as its maps' do.
            if fw.draining() {
                if let Delivery::Update(u) = &d {
                    self.aggregate_deferred(&mut syms, u);
                }
                continue;
            }
            // The probe fired: the event's own, or for a file probe the process's probe it serves.
            let (fire, mut ev) = match d {
                Delivery::Event(ev) if file_usdt::is_file_tag(ev.tag) => {
                    let Some(served) = &files else { continue };
                    if ev.ktime_ns < since {
                        continue;
                    }
                    match served.get(&(ev.tag, ev.pid)) {
                        Some(&id) if active.contains(&id) => (id, ev),
                        Some(_) => continue,
                        None => {
                            // Its process's probes are created at the next poll.
                            unknown.push((ev.tag, ev.pid, Delivery::Event(ev)));
                            continue;
                        }
                    }
                }
                Delivery::Event(ev) if active.contains(&ev.tag) && ev.ktime_ns >= since => {
                    (ev.tag, ev)
                }
                Delivery::Event(_) => continue,
                Delivery::Built(mut b) => {
                    // The clause's EPID (the kernel's clauses run only while tracing is live).
                    let Some(probe) = served_probe(files.as_deref(), b.tag, b.pid) else {
                        unknown.push((b.tag, b.pid, Delivery::Built(b)));
                        continue;
                    };
                    if let Some(at) = built.get(&(probe, b.clause)) {
                        if active.contains(&probe) {
                            if let Some(t) = &at.ustack {
                                // (It notes the process, with the name it ran under.)
                                ustack::place_ustacks(&mut syms, note, b.pid, &mut b.data, t);
                            } else if note && b.pid != 0 {
                                // Its user addresses resolve with the mappings the process has
                                // now (the tracker follows its execs and maps from then on).
                                syms.note_process(b.pid);
                            }
                            if at.stacks.is_empty() || sampled.contains(&b.tag) {
                                // (A sampled stack starts at the interrupted PC, as a
                                // captured one.)
                                commit_built(fw, &mut b, at, |_| 0);
                            } else {
                                // The kernel's symbols only for a record with stacks: their
                                // first read takes a while (read at planning for such clauses).
                                let kernel = syms.kernel_symbols();
                                commit_built(fw, &mut b, at, |pcs| kernel.tracing_prefix(pcs));
                            }
                            n += 1;
                        }
                    }
                    continue;
                }
                Delivery::Settle(k) => {
                    // Its speculation's buffers go where the commit or discard sends them, then
                    // it is free again in the kernel (when the probe left it settling).
                    fw.settle_speculation_elsewhere(u64::from(k.id), k.commit);
                    if let Some(m) = self.lock().kspec_maps.as_ref().filter(|_| k.release) {
                        // A state that cannot be written leaves the speculation busy (counted
                        // as such by later speculation() calls).
                        let _ = m.release(k.id);
                    }
                    n += 1;
                    continue;
                }
                Delivery::Update(u) => {
                    self.aggregate_deferred(&mut syms, &u);
                    n += 1;
                    continue;
                }
                Delivery::Fault(k) => {
                    let Some(probe) = served_probe(files.as_deref(), k.tag, k.pid) else {
                        unknown.push((k.tag, k.pid, Delivery::Fault(k)));
                        continue;
                    };
                    if let Some(at) = built.get(&(probe, k.clause)) {
                        if active.contains(&probe) {
                            report_fault(fw, &k, at.epid, offset);
                            n += 1;
                        }
                    }
                    continue;
                }
            };
            fill_firing(&mut ctx, &mut ev, offset);
            if note && ev.pid != 0 {
                // Remember the process's mappings while it lives, for user symbols printed later.
                syms.note_process_as(ev.pid, &ctx.execname);
            }
            if let Some(Ok(r)) = ev.uregs.take() {
                ctx.uregs = Some(r);
            }
            if let Some(Ok(u)) = &ev.ustack_regs {
                if ev.handed_over && ev.pid != 0 {
                    // The probe may have found a PC of the process it could not place: its
                    // ranges as dtrace knows them now, for its later firings, loaded before
                    // this one is walked (its files' first walk here reads them at length,
                    // while the process goes on firing into the ring).
                    if let Some(m) = self.lock().ustack_maps.as_mut() {
                        // A process whose ranges cannot be loaded stays with dtrace.
                        let _ = m.load(&mut syms, ev.pid, ev.ktime_ns);
                    }
                }
                unwind_ustack(&mut syms, ev.pid, u, &mut ctx);
            }
            let is_sampled = sampled.contains(&ev.tag);
            if !ctx.kstack.is_empty() && !is_sampled {
                let skip = syms.kernel_symbols().tracing_prefix(&ctx.kstack);
                ctx.kstack.drain(..skip);
            }
            ctx.caller = caller_of(&ctx.kstack, is_sampled || own_frame.contains(&ev.tag));
            if let Some(&cap) = proc_args.get(&ev.tag) {
                // Empty when the process is gone (or is a kernel thread), as on a kernel thread.
                if let Ok(area) = std::fs::read(format!("/proc/{}/cmdline", ev.pid)) {
                    ctx.execargs = execargs_string(&area[..area.len().min(cap as usize)]);
                }
            }
            let user_copies = match arg_copies.get(&ev.tag) {
                Some(map) => set_copy_args(&mut ctx, &ev, map),
                None => Vec::new(),
            };
            let prefixes = sized_prefixes(&ev);
            let paths = std::mem::take(&mut ev.paths);
            let mem = captured_memory_of(&mut ev);
            let mem_pid = memory_pid(ev.pid, exec.contains(&ev.tag));
            let mut mem = EventMemory::new(mem, mem_pid)
                .with_prefixes(prefixes)
                .with_arg_copies(user_copies)
                .with_owned_paths(paths);
            fw.fire_with_memory(fire, ev.cpu, &ctx, &mut mem);
            n += 1;
        }
        drop(syms);
        if !unknown.is_empty() {
            let mut sh = self.lock();
            for (tag, pid, d) in unknown {
                sh.user.files.hold(d, tag, pid);
            }
        }
        n
    }
}

/// The probe a record of tag `tag` built in process `pid` speaks for: the tag's own, or for a
/// file probe the process's probe it serves (`None` while the process has none: the record
/// waits for it, as the process's events do).
fn served_probe(
    files: Option<&std::collections::HashMap<(u32, u32), u32>>,
    tag: u32,
    pid: u32,
) -> Option<u32> {
    if !file_usdt::is_file_tag(tag) {
        return Some(tag);
    }
    files.and_then(|f| f.get(&(tag, pid))).copied()
}

/// Reports fault `k` of the clause of ECB `epid` run at the probe, as the interpreter reports
/// its faults (`Framework::fault_elsewhere`): the ERROR clauses run in the context of the
/// faulting thread as the fault record gives it (its ids, `execname`, `curthread`, the firing's
/// clocks, `errno`; the stacks and `execargs` are not in it: empty, as they are in the
/// interpreter's firing unless the probe's own clauses took them), over the process's memory.
fn report_fault(
    fw: &mut Framework,
    k: &crate::capture::record::KernelFault,
    epid: u32,
    clock_offset: i64,
) {
    let end = k.comm.iter().position(|b| *b == 0).unwrap_or(k.comm.len());
    let ctx = FiringContext {
        pid: u64::from(k.pid),
        ppid: u64::from(k.ppid),
        tid: u64::from(k.tid),
        uid: u64::from(k.uid),
        gid: u64::from(k.gid),
        errno: k.errno as i64 as u64,
        curthread: k.task,
        execname: String::from_utf8_lossy(&k.comm[..end]).into_owned(),
        vtimestamp: k.vtime_ns,
        walltimestamp: (k.walltime_ns != 0).then_some(k.walltime_ns),
        timestamp: Some((k.ktime_ns as i64).saturating_add(clock_offset).max(0) as u64),
        ..FiringContext::default()
    };
    let mut mem = EventMemory::new(CapturedMemory::new(), memory_pid(k.pid, false));
    fw.fault_elsewhere(epid, k.cpu, u64::from(k.pc), k.kind, k.addr, &ctx, &mut mem);
}

/// What dtrace needs to commit a record built at the probe (see `LinuxTracing::bind_record`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BuiltAt {
    /// The ECB's EPID.
    pub(crate) epid: u32,
    /// Bytes of the framework's record.
    pub(crate) size: u32,
    /// Where its `stack()` actions' frames were taken.
    pub(crate) stacks: Vec<crate::capture::spec::StackTail>,
    /// Where the user stack of its `ustack()` and `jstack()` actions was taken (see
    /// [`ustack::place_ustacks`], done before the record is committed).
    pub(crate) ustack: Option<crate::capture::ustack::UstackTail>,
}

/// Commits record `b`, built at the probe for the ECB `at` describes, to its CPU's principal
/// buffer (or to the speculation it was built for), with its EPID and its stacks in place (see
/// [`place_stacks`]).
fn commit_built(
    fw: &mut Framework,
    b: &mut crate::capture::record::BuiltRecord,
    at: &BuiltAt,
    cut: impl Fn(&[u64]) -> usize,
) {
    place_stacks(&mut b.data, at, cut);
    // What the kernel took past the record goes (a user stack's tail, see `place_ustacks`).
    b.data.truncate((at.size as usize).next_multiple_of(8));
    if let Some(head) = b.data.get_mut(..4) {
        head.copy_from_slice(&at.epid.to_ne_bytes());
        if b.spec != 0 {
            fw.speculate_elsewhere(b.cpu, u64::from(b.spec), &b.data);
        } else {
            fw.commit_elsewhere(b.cpu, &b.data);
        }
    }
}

/// Records each `stack()` of built record `data` as a captured stack is recorded: of the frames
/// taken past the record, the tracing machinery's (`cut` counts them) go, the next ones move into
/// the record, zeros after them; then what was past the record goes.
fn place_stacks(data: &mut Vec<u8>, at: &BuiltAt, cut: impl Fn(&[u64]) -> usize) {
    if at.stacks.is_empty() {
        return;
    }
    for t in &at.stacks {
        let pcs: Vec<u64> = (0..t.room as usize)
            .map_while(|i| {
                let o = t.tail as usize + 8 * i;
                let w = data.get(o..o + 8)?;
                Some(u64::from_ne_bytes(w.try_into().ok()?))
            })
            .take_while(|pc| *pc != 0)
            .collect();
        let skip = cut(&pcs).min(pcs.len());
        let o = t.offset as usize;
        let Some(dst) = data.get_mut(o..o + 8 * t.frames as usize) else {
            continue;
        };
        for (i, w) in dst.chunks_exact_mut(8).enumerate() {
            let pc = pcs.get(skip + i).copied().unwrap_or(0);
            w.copy_from_slice(&pc.to_ne_bytes());
        }
    }
    data.truncate((at.size as usize).next_multiple_of(8));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_stacks_are_cut_and_moved_into_the_record() {
        use crate::capture::spec::StackTail;
        // A 12-byte header, a 3-frame stack at 16 (size 40), its 6 frames taken at 40.
        let at = BuiltAt {
            epid: 9,
            size: 40,
            stacks: vec![StackTail {
                offset: 16,
                frames: 3,
                tail: 40,
                room: 6,
            }],
            ustack: None,
        };
        let mut data = vec![0u8; 40 + 48];
        data[12] = 0xaa;
        for (i, pc) in [0xb1u64, 0xb2, 0xf1, 0xf2, 0].iter().enumerate() {
            data[40 + 8 * i..48 + 8 * i].copy_from_slice(&pc.to_ne_bytes());
        }
        let word = |d: &[u8], o: usize| u64::from_ne_bytes(d[o..o + 8].try_into().unwrap());
        // Two machinery frames cut: the other two, then a zero.
        let mut cut = data.clone();
        place_stacks(&mut cut, &at, |pcs| {
            assert_eq!(pcs, [0xb1, 0xb2, 0xf1, 0xf2]);
            2
        });
        assert_eq!(cut.len(), 40);
        assert_eq!(cut[12], 0xaa);
        assert_eq!(
            [word(&cut, 16), word(&cut, 24), word(&cut, 32)],
            [0xf1, 0xf2, 0]
        );
        // Sampled: nothing cut, the first three kept.
        place_stacks(&mut data, &at, |_| 0);
        assert_eq!(
            [word(&data, 16), word(&data, 24), word(&data, 32)],
            [0xb1, 0xb2, 0xf1]
        );
        // A cut past the frames leaves zeros; a record without stacks is left whole.
        let mut none = vec![1u8; 48];
        let plain = BuiltAt {
            stacks: vec![],
            ..at.clone()
        };
        place_stacks(&mut none, &plain, |_| 99);
        assert_eq!(none, vec![1u8; 48]);
    }
    use crate::capture::{CapturedMemory as Copy, CopySource, MemKind};
    use dtrace_dif::vm::Memory;

    fn event() -> CapturedEvent {
        let mut comm = [0u8; 16];
        comm[..4].copy_from_slice(b"true");
        CapturedEvent {
            tag: 7,
            ktime_ns: 1_000,
            cpu: 1,
            pid: 10,
            tid: 11,
            ppid: 1,
            uid: 1000,
            gid: 100,
            comm,
            task: 0xffff_8888_0000_1000,
            args: [1, 0x7fff_0000, 3, 4, 5, 6, 7, 8, 9, 10],
            vtime_ns: 55,
            errno: 2,
            copies: vec![
                Copy {
                    addr: 0x7fff_0000,
                    kind: MemKind::UserString,
                    data: Ok(b"/etc/passwd".to_vec()),
                    source: CopySource::AtProbe,
                    requested: None,
                },
                Copy {
                    addr: 0x1000,
                    kind: MemKind::UserBytes,
                    data: Err(-14),
                    source: CopySource::AtProbe,
                    requested: None,
                },
            ],
            kstack: Some(Ok(vec![0xffff_ffff_8100_0000])),
            ustack: Some(Err(-14)),
            ..Default::default()
        }
    }

    #[test]
    fn context_and_memory_of_an_event() {
        let (ctx, mut mem) = firing_of(&event(), 500);
        assert_eq!(ctx.pid, 10);
        assert_eq!(ctx.tid, 11);
        assert_eq!(ctx.ppid, 1);
        assert_eq!((ctx.uid, ctx.gid), (1000, 100));
        assert_eq!(ctx.execname, "true");
        assert_eq!(ctx.errno, 2);
        assert_eq!(ctx.curthread, 0xffff_8888_0000_1000);
        assert_eq!(ctx.timestamp, Some(1_500));
        assert_eq!(ctx.vtimestamp, 55);
        assert_eq!(ctx.args, [1, 0x7fff_0000, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(ctx.kstack, vec![0xffff_ffff_8100_0000]);
        assert!(ctx.ustack.is_empty());
        let mut b = [0u8; 12];
        mem.read_user(0x7fff_0000, &mut b).unwrap();
        assert_eq!(&b, b"/etc/passwd\0");
        // The failed copy is not memory: reading it faults.
        let mut one = [0u8; 1];
        assert!(mem.read_user(0x1000, &mut one).is_err());
        // User copies are not kernel memory.
        assert!(mem.read_kernel(0x7fff_0000, &mut one).is_err());
        assert_eq!(mem.regions().len(), 1);
    }

    #[test]
    fn process_context_values_of_an_event() {
        let mut ev = event();
        ev.ustack = Some(Ok(vec![0x40_1000, 0x40_2000, 0x40_3000]));
        ev.execargs = Some(Ok(b"dd\0if=/dev/zero\0count=2\0".to_vec()));
        ev.ancestors = Some(vec![9, 5, 1]);
        let (ctx, _) = firing_of(&ev, 0);
        assert_eq!(ctx.ucaller, 0x40_2000);
        assert_eq!(ctx.execargs, "dd if=/dev/zero count=2");
        assert_eq!(ctx.ancestors, vec![9, 5, 1]);
        // Nothing captured: empty, as on a kernel thread.
        let (ctx, _) = firing_of(&event(), 0);
        assert_eq!((ctx.ucaller, ctx.execargs.as_str()), (0, ""));
        assert!(ctx.ancestors.is_empty());
        ev.execargs = Some(Err(-14));
        ev.ustack = Some(Ok(vec![0x40_1000]));
        let (ctx, _) = firing_of(&ev, 0);
        assert_eq!((ctx.ucaller, ctx.execargs.as_str()), (0, ""));
        assert_eq!(execargs_string(b"a\0\0b\0\0"), "a  b");
        assert_eq!(caller_of(&[1, 2], false), 1);
        assert_eq!(caller_of(&[1, 2], true), 2);
        assert_eq!(caller_of(&[], false), 0);
    }

    #[test]
    fn uncaptured_user_reads_go_to_the_process() {
        let secret = *b"read from the process\0";
        let addr = secret.as_ptr() as u64;
        let mut captured = CapturedMemory::new();
        captured.add(0x10_0000, b"abc\0".to_vec(), true);
        let mut m = EventMemory::new(captured, std::process::id());
        let mut b = [0u8; 4];
        m.read_user(0x10_0000, &mut b).unwrap();
        assert_eq!(&b, b"abc\0");
        // Past the end of a captured range: a fault, never the process's current bytes.
        let mut b8 = [0u8; 8];
        assert_eq!(m.read_user(0x10_0002, &mut b8), Err(FaultKind::BadAddr));
        // Outside every range: this process's memory.
        let mut got = [0u8; 22];
        m.read_user(addr, &mut got).unwrap();
        assert_eq!(&got, &secret);
        // Unmapped: a fault.
        assert_eq!(m.read_user(8, &mut b), Err(FaultKind::BadAddr));
        // Kernel memory never comes from the process; writes are refused.
        assert_eq!(m.read_kernel(addr, &mut b), Err(FaultKind::BadAddr));
        assert_eq!(m.write_user(addr, b"x"), Err(FaultKind::UPriv));
        // No process: nothing to fall back on.
        let mut none = EventMemory::new(CapturedMemory::new(), 0);
        assert_eq!(none.read_user(addr, &mut b), Err(FaultKind::BadAddr));
    }

    #[test]
    fn kernel_chains_are_read_from_their_copies() {
        // curthread->real_parent->pid as captured: the task's bytes around real_parent (the
        // pointer the walk loads), then the parent's pid at the address that pointer gives.
        let task = 0xffff_8888_0000_1000u64;
        let parent = 0xffff_8888_0004_2000u64;
        let mut ev = event();
        let mut around = vec![0u8; 24];
        around[8..16].copy_from_slice(&parent.to_le_bytes());
        ev.copies = vec![
            Copy {
                addr: task + 0x4f8,
                kind: MemKind::KernelBytes,
                data: Ok(around),
                source: CopySource::AtProbe,
                requested: None,
            },
            Copy {
                addr: parent + 0x4f0,
                kind: MemKind::KernelBytes,
                data: Ok(77i32.to_le_bytes().to_vec()),
                source: CopySource::AtProbe,
                requested: None,
            },
            Copy {
                addr: task + 0x510,
                kind: MemKind::KernelString,
                data: Ok(b"sh".to_vec()),
                source: CopySource::AtProbe,
                requested: None,
            },
            Copy {
                addr: 0x4f0,
                kind: MemKind::KernelBytes,
                data: Err(-14),
                source: CopySource::AtProbe,
                requested: None,
            },
        ];
        let (ctx, captured) = firing_of(&ev, 0);
        let mut m = EventMemory::new(captured, ev.pid);
        let mut p = [0u8; 8];
        m.read_kernel(ctx.curthread + 0x500, &mut p).unwrap();
        assert_eq!(u64::from_le_bytes(p), parent);
        let mut pid = [0u8; 4];
        m.read_kernel(u64::from_le_bytes(p) + 0x4f0, &mut pid)
            .unwrap();
        assert_eq!(i32::from_le_bytes(pid), 77);
        // A read across two copies of the same instant that touch: served from both.
        let mut across = [0u8; 10];
        m.read_kernel(task + 0x508, &mut across).unwrap();
        assert_eq!(&across[8..], b"sh");
        // Past the string's NUL, beside every copy, or where the copy failed (a NULL pointer's
        // member): faults, never the process's memory.
        let mut b = [0u8; 4];
        assert_eq!(m.read_kernel(task + 0x511, &mut b), Err(FaultKind::BadAddr));
        assert_eq!(
            m.read_kernel(parent + 0x4f2, &mut b),
            Err(FaultKind::BadAddr)
        );
        assert_eq!(m.read_kernel(0x4f0, &mut b), Err(FaultKind::BadAddr));
    }

    #[test]
    fn data_loc_arguments_take_the_capture_address() {
        let ev = event();
        let (mut ctx, _) = firing_of(&ev, 0);
        set_copy_args(&mut ctx, &ev, &[(3, 0), (4, 1), (12, 0), (5, 9)]);
        assert_eq!(ctx.args[3], 0x7fff_0000);
        // A failed copy or one out of range leaves the argument alone.
        assert_eq!(ctx.args[4], 5);
        assert_eq!(ctx.args[5], 6);
    }

    #[test]
    fn a_string_argument_replaced_by_its_user_copy_reads_where_strings_are_read() {
        let ev = event();
        let (mut ctx, captured) = firing_of(&ev, 0);
        let user = set_copy_args(&mut ctx, &ev, &[(3, 0)]);
        assert_eq!(user, [(0x7fff_0000, 12)]);
        let mut m = EventMemory::new(captured.clone(), 0).with_arg_copies(user);
        let mut b = [0u8; 2];
        m.read_kernel(0x7fff_0000, &mut b).unwrap();
        assert_eq!(&b, b"/e");
        // Without the replacement, a user copy is not kernel memory.
        let mut m = EventMemory::new(captured, 0);
        assert_eq!(m.read_kernel(0x7fff_0000, &mut b), Err(FaultKind::BadAddr));
    }

    #[test]
    fn timestamps_never_go_negative() {
        let (ctx, _) = firing_of(&event(), -5_000);
        assert_eq!(ctx.timestamp, Some(0));
    }
}

#[cfg(test)]
mod sized_tests;

#[cfg(test)]
mod mirror_tests;

#[cfg(test)]
mod reuse_tests;
