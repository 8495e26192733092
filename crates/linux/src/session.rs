//! A capture session: the ring buffer and drop counter shared by every enabled probe, one generated
//! program and attachment per probe, and the loop that turns records into [`CapturedEvent`]s. Entry
//! events whose user copies faulted are held until the re-read at the syscall's return arrives (or,
//! failing that, are completed from `/proc/<pid>/mem`). Dropping the session detaches everything.

use crate::attach::Attachment;
use crate::bpf::{Map, MapKind, ProgKind, Program, RingBuf};
use crate::capture::codegen::{
    gen_cookie_dispatcher, gen_retry, gen_syscall_dispatcher, CaptureReport, ExitStages, MapFds,
    MAX_SYSCALL_NR, PENDING_KEY_SIZE, PENDING_VALUE_SIZE,
};
use crate::capture::layout::SizedCopies;
use crate::capture::{
    decode_record, ArgSource, CaptureSpec, CapturedEvent, Condition, CopySource, CtxKind, Identity,
    ProbeShape, Record, RecordLayout,
};
use crate::catalog::{AttachPoint, Probe};
use crate::error::{LinuxError, Result};
use std::collections::HashMap;

/// Session settings.
#[derive(Clone, Debug)]
pub struct SessionOptions {
    /// Ring buffer bytes (rounded up to a power of two).
    pub ring_bytes: usize,
    /// Prefix of the kernel object names (`bpftool prog` shows `<prefix>_<tag>`).
    pub name_prefix: String,
    /// How long an entry event may wait for its return-time re-read once dtrace read it, in
    /// nanoseconds.
    pub retry_wait_ns: u64,
    /// Wake the consumer when 1/n of the ring is filled; between wake-ups it reads at its poll
    /// timeout (DTrace's switchrate), so a record raises no wake-up (whose interrupt costs the
    /// traced thread more than the rest of the probe in a VM) until the ring is filling up. 0
    /// wakes it at every record.
    pub wakeup_divisor: u32,
    /// Records of one size per probe even where the kernel lets the probe size them: copies
    /// sized at the probe hold at most a page there, as on kernels before 5.19 (see
    /// `capture::sized`; for tests of that path).
    pub capped_sized_copies: bool,
    /// The CPU the `cpu` option keeps tracing to: every probe's code returns at once on the
    /// others, so nothing of theirs is recorded, aggregated or stored.
    pub only_cpu: Option<u32>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            ring_bytes: 8 << 20,
            name_prefix: "dtrace".into(),
            retry_wait_ns: 2_000_000_000,
            wakeup_divisor: 8,
            capped_sized_copies: false,
            only_cpu: None,
        }
    }
}

struct Enabled {
    // Field order is drop order: detach before closing programs and maps.
    _attachments: Vec<Attachment>,
    _programs: Vec<Program>,
    /// The count of retries the probe's entry armed, where its retry is on the return's own
    /// tracepoint (in the `sys_exit` chain the chain's count serves).
    _armed: Option<Map>,
}

/// The exit side of a syscall on its function's trampoline (fexit of `__x64_sys_<name>`, see
/// [`Session::exit_on_trampoline`]): its programs in the order they run, as in the `sys_exit`
/// dispatcher's chain (the replay of its entry's kept firings, the retry of its entry's copies,
/// its return probes').
struct TrampolineExit {
    btf_id: u32,
    progs: Vec<ExitProg>,
}

/// The kind of an fexit program of vmlinux function `btf_id` (a syscall's, see
/// [`Session::exit_on_trampoline`]).
fn vmlinux_fexit(btf_id: u32) -> ProgKind {
    ProgKind::Fexit {
        btf_id,
        btf_obj_fd: 0,
    }
}

/// Which of a syscall's exit programs one is: they run in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum ExitStage {
    Replay,
    Retry,
    Return,
}

/// A program on the exit of a syscall's trampoline, kept with its code to load and attach it
/// again (see [`Session::attach_on_exit`]).
struct ExitProg {
    // Field order is drop order: detach before closing the program.
    link: Option<Attachment>,
    prog: Program,
    stage: ExitStage,
    insns: Vec<crate::bpf::Insn>,
    obj: String,
    name: String,
}

/// A uprobe site enabled but not yet placed: its capture program, loaded for a uprobe-multi link.
struct PendingUprobe {
    path: String,
    pid: u32,
    retprobe: bool,
    offset: u64,
    ref_ctr_offset: u64,
    prog: Program,
    name: String,
}

/// A kernel function's kprobe enabled but not yet placed: its capture program, loaded for a
/// kprobe-multi link.
struct PendingKprobe {
    func: String,
    retprobe: bool,
    prog: Program,
    name: String,
}

/// The uprobes of one object, process and kind (entry or return), placed by one uprobe-multi link;
/// or the kprobes of one kind on kernel functions, placed by one kprobe-multi link.
///
/// Design: each probe keeps its own capture program (its tag, its clauses' capture spec and, for
/// USDT, each site's argument locations), exactly as on the per-probe perf path; the link's program
/// is a three-instruction dispatcher that tail-calls slot `bpf_get_attach_cookie()` of a prog
/// array, the cookie of each offset being its slot. Merging every probe's capture into one
/// program that branches on the cookie would hit the verifier's size limits with thousands of
/// probes, and one link per probe would wait for a grace period per probe on removal again, which
/// is the cost the link exists to avoid.
struct ProbeGroup {
    // Field order is drop order: the link first, so nothing fires into what follows.
    _link: Attachment,
    _dispatcher: Program,
    _slots: Map,
    _programs: Vec<Program>,
}

/// How errors name a group of `n` probes whose first is `first`.
fn group_name(first: &str, n: usize) -> String {
    match n {
        1 => first.to_string(),
        _ => format!("{first} and {} more probes", n - 1),
    }
}

/// Where [`Session::set_up_replay`] sets a replay up: the syscall, and the entry's program's
/// shape, layout, tag, maps and names.
struct ReplayAt<'a> {
    nr: u32,
    entry_shape: &'a ProbeShape,
    layout: &'a RecordLayout,
    tag: u32,
    fds: &'a MapFds,
    obj: &'a str,
    name: &'a str,
    /// The syscall's name.
    func: &'a str,
}

/// A replay set up by [`Session::set_up_replay`].
struct KeptFirings {
    /// The entry's spec, in the mode that keeps firings.
    keep: CaptureSpec,
    /// The program at the return, in its slot (on the syscall's trampoline, the trampoline's).
    replay: Option<Program>,
}

/// One raw syscall tracepoint with its dispatcher and the per-syscall tail-call slots.
struct Dispatch {
    _link: Attachment,
    _prog: Program,
    slots: Map,
    used: std::collections::HashSet<u32>,
    /// `sys_exit`'s only: the stages the dispatcher runs before a syscall's slot.
    chain: Option<ExitChain>,
    /// The kind of the dispatcher's program, which every program its prog arrays take shares
    /// (a tail call joins programs of one kind), and their context: BTF-typed (`tp_btf`) where
    /// the kernel's BTF names the tracepoint, so the saved registers are read by plain loads.
    kind: ProgKind,
    ctx: CtxKind,
}

/// The stages of the `sys_exit` dispatcher (`capture::codegen::ExitStages`): the replays of the
/// firings syscall entries keep (`capture::spec::Replay`, `gen_replay`), then the retries of
/// entries' copies (`gen_retry`), each tail-calling the next when done (a replay the retry,
/// a retry the syscall's slot of [`Dispatch::slots`]).
struct ExitChain {
    replays: Stage,
    retries: Stage,
    /// The syscalls whose return has a program in [`Dispatch::slots`] (an array map of one
    /// u64): while it and the stages' counts are zero the dispatcher does nothing.
    returns: Map,
}

/// One stage of an [`ExitChain`]: a program by syscall, which the dispatcher tail-calls only
/// while `count` (an array map of one u64: the firings kept, the retries armed) is not zero.
struct Stage {
    slots: Map,
    used: std::collections::HashSet<u32>,
    count: Map,
}

/// A count the programs keep and test (`ld_map_value` of key 0): an array map of one u64.
fn count_map(name: &str) -> Result<Map> {
    Map::create(MapKind::Array, name, 4, 8, 1)
}

impl Stage {
    fn create(slots_name: &str, count_name: &str) -> Result<Stage> {
        Ok(Stage {
            slots: Map::create(MapKind::ProgArray, slots_name, 4, 4, MAX_SYSCALL_NR)?,
            used: Default::default(),
            count: count_map(count_name)?,
        })
    }

    /// Puts `prog` in syscall `nr`'s slot.
    fn install(&mut self, nr: u32, prog: &Program) -> Result<()> {
        self.slots
            .update(&nr.to_le_bytes(), &(prog.raw_fd() as u32).to_le_bytes())?;
        self.used.insert(nr);
        Ok(())
    }
}

struct ProbeInfo {
    layout: RecordLayout,
    syscall_return: bool,
    identity_from_fields: bool,
    /// Its clauses read `vtimestamp`, which its records carry exactly (computed at the probe, or
    /// the scheduler's total of a thread just switched in): kept non-decreasing per thread.
    exact_vtime: bool,
    /// A uprobe (`pid`, USDT): faulted user copies are completed from the process at delivery.
    user_probe: bool,
}

/// A set of enabled probes feeding one ring buffer.
pub struct Session {
    enabled: Vec<Enabled>,
    /// Uprobe sites waiting for [`Session::attach_pending`].
    pending_uprobes: Vec<PendingUprobe>,
    /// Kernel-function kprobes waiting for [`Session::attach_pending`].
    pending_kprobes: Vec<PendingKprobe>,
    /// Uprobe-multi and kprobe-multi links and what they run.
    groups: Vec<ProbeGroup>,
    /// The `sys_enter` and `sys_exit` dispatchers, created with the first syscall probe.
    dispatch: [Option<Dispatch>; 2],
    /// The firings syscall entries keep for their returns (`capture::spec::Replay`), by thread
    /// (a thread is in one syscall at a time): created with the first replay.
    kept: Option<Map>,
    /// The entries' copies waiting for their retry at the syscall's return (`gen_retry`), by
    /// thread and probe (`capture::codegen::PENDING_KEY_SIZE`): created with the first retry.
    pending_retries: Option<Map>,
    /// The syscalls whose return has a program of a probe on the return's own tracepoint (its
    /// dispatcher slot was taken), which may run before the dispatcher's.
    exits_elsewhere: std::collections::HashSet<u32>,
    info: crate::fasthash::TagMap<ProbeInfo>,
    /// Per enabled tag: which predicates of its spec's kernel filter run in the kernel.
    reports: crate::fasthash::TagMap<CaptureReport>,
    /// Entry events waiting for their return-time re-read, by thread and capture time, with
    /// when dtrace read each (monotonic ns): the wait for the re-read counts from then, so a
    /// consumer that fell behind does not give up on re-reads still in the ring.
    held: HashMap<(u32, u64), (u64, Box<CapturedEvent>), crate::fasthash::Fast>,
    tgid_of: crate::fasthash::TagMap<u32>,
    ppid_of: crate::fasthash::TagMap<u32>,
    /// The decoded records of one drain, kept for its capacity.
    scratch: Vec<Record>,
    /// BTF ids of typed raw tracepoints, by tracepoint name (`None`: not typed on this kernel).
    tp_btf: HashMap<String, Option<u32>>,
    /// The syscall functions entry probes can go on trampolines of, read with the first.
    syscall_funcs: Option<crate::syscall_fentry::SyscallFuncs>,
    /// The BTF ids of the syscall functions entry or return probes are on.
    syscall_trampolines: std::collections::HashSet<u32>,
    /// The syscalls whose exit side is on their functions' trampolines, by number.
    exits_on_trampolines: HashMap<u32, TrampolineExit>,
    /// The kernel's BTF, held from the first probe that reads it (a syscall's, a raw
    /// tracepoint's, an fbt probe's) while probes are enabled, so that its users share one parse
    /// (see `Btf::load_vmlinux`); let go by [`Session::attach_pending`].
    enabling_btf: Option<std::sync::Arc<crate::btf::Btf>>,
    bad_records: u64,
    task: Option<crate::btf::TaskOffsets>,
    wall_offset_ns: i64,
    opts: SessionOptions,
    /// The exact-`vtimestamp` clock, started with the first probe whose clauses read it.
    vclock: Option<crate::vtime::Vclock>,
    vfloor: crate::vtime::VtimeFloor,
    drops: Map,
    /// The room each CPU's principal buffer has for records built at the probe (see
    /// [`Session::set_record_room`]).
    room: std::sync::Arc<crate::room::RoomMap>,
    /// Says when dtrace sleeps on the ring, so that the programs wake it only then (see
    /// [`crate::wakeup`]).
    sleep_word: crate::wakeup::SleepWord,
    /// The thread-variable mirror, created with the first probe that uses it.
    mirror: Option<Map>,
    ring: RingBuf,
}

/// Every enabled probe holds a program descriptor (and a perf event or link): enabling all syscalls
/// needs more than the usual soft limit of 1024, so raise the soft limit to the hard one (best effort).
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid rlimit out-parameter, then the same structure in.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// CLOCK_REALTIME minus CLOCK_MONOTONIC, to turn probe timestamps into `walltimestamp`: measured
/// once per process, so records and the clauses that run whole in the kernel (`capture::kagg`)
/// make the same `walltimestamp` of one instant.
pub(crate) fn wall_offset_ns() -> i64 {
    static OFFSET: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *OFFSET.get_or_init(|| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid timespec out-parameter.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
        let real = ts.tv_sec * 1_000_000_000 + ts.tv_nsec;
        real - monotonic_ns() as i64
    })
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The shape a program at one site of a `pid` or USDT probe reads its context with.
fn uprobe_shape(
    site: &crate::catalog::UserSite,
    task: Option<crate::btf::TaskOffsets>,
) -> ProbeShape {
    ProbeShape {
        ctx: CtxKind::Uprobe,
        args: site.args.clone(),
        conditions: Vec::new(),
        identity: Identity::Current,
        task,
    }
}

/// The shape a `profile-N`/`tick-N` perf event's program reads its context with.
fn profile_shape(task: Option<crate::btf::TaskOffsets>) -> ProbeShape {
    ProbeShape {
        ctx: CtxKind::PerfEvent,
        args: vec![ArgSource::KernelPc, ArgSource::UserPc],
        conditions: Vec::new(),
        identity: Identity::Current,
        task,
    }
}

/// The shapes the programs of a probe attached at `at` read their context with, as
/// [`Session::enable`] builds them (one per site of a user probe; a syscall tracepoint's raw
/// form reads the same values as its tracefs record; `fbt` by this kernel's mechanism), for
/// planning what translates there before anything is enabled. With the `task_struct` offsets
/// the session's programs get ([`crate::btf::TaskOffsets::of_running_kernel`]), so what needs
/// them (`ppid`) is accepted here exactly where it is at the probe.
pub(crate) fn planning_shapes(at: &AttachPoint) -> std::result::Result<Vec<ProbeShape>, String> {
    let task = crate::btf::TaskOffsets::of_running_kernel();
    let shape =
        |ctx, args: &Vec<ArgSource>, conditions: &Vec<Condition>, identity: &Identity| ProbeShape {
            ctx,
            args: args.clone(),
            conditions: conditions.clone(),
            identity: *identity,
            task,
        };
    Ok(match at {
        AttachPoint::Tracepoint {
            args,
            conditions,
            identity,
            ..
        } => vec![shape(CtxKind::Tracepoint, args, conditions, identity)],
        AttachPoint::RawTracepoint {
            args,
            conditions,
            identity,
            ..
        } => vec![shape(CtxKind::RawTracepoint, args, conditions, identity)],
        AttachPoint::Uprobe { sites, .. } => sites.iter().map(|s| uprobe_shape(s, task)).collect(),
        AttachPoint::Fbt {
            btf_id,
            args,
            conditions,
            ..
        } => {
            let ctx = match crate::catalog::fbt::mechanism(*btf_id).map_err(|e| e.to_string())? {
                crate::features::FbtMechanism::Kprobe => CtxKind::Kprobe,
                crate::features::FbtMechanism::Fentry => CtxKind::TypedRawTracepoint,
            };
            vec![shape(ctx, args, conditions, &Identity::Current)]
        }
        AttachPoint::Profile { .. } => vec![profile_shape(task)],
    })
}

/// Whether records of probes at `attach` speak for the thread running the probe (whose
/// `vtimestamp` the capture computes).
fn speaks_for_current(attach: &AttachPoint) -> bool {
    match attach {
        AttachPoint::Tracepoint { identity, .. } | AttachPoint::RawTracepoint { identity, .. } => {
            *identity == Identity::Current
        }
        AttachPoint::Profile { .. } | AttachPoint::Uprobe { .. } | AttachPoint::Fbt { .. } => true,
    }
}

/// Whether records of probes at `attach` carry a thread's `vtimestamp`: the running thread's, or
/// (`on-cpu`) that of the thread switched in, whose total the scheduler has just brought up to date.
fn vtime_of_a_task(attach: &AttachPoint) -> bool {
    match attach {
        AttachPoint::Tracepoint { identity, .. } | AttachPoint::RawTracepoint { identity, .. } => {
            !matches!(identity, Identity::FromFields { .. })
        }
        AttachPoint::Profile { .. } | AttachPoint::Uprobe { .. } | AttachPoint::Fbt { .. } => true,
    }
}

/// Threads used to detach many probes at once.
const DETACH_THREADS: usize = 32;

impl Drop for Session {
    fn drop(&mut self) {
        // Detaching a tracepoint program waits for an RCU grace period in the kernel; detaching on
        // several threads lets those waits overlap (hundreds of probes detach in a fraction of the
        // time a sequential close takes).
        let enabled = std::mem::take(&mut self.enabled);
        if enabled.len() < 8 {
            return;
        }
        let per = enabled.len().div_ceil(DETACH_THREADS);
        let mut chunks: Vec<Vec<Enabled>> = Vec::new();
        let mut it = enabled.into_iter().peekable();
        while it.peek().is_some() {
            chunks.push(it.by_ref().take(per).collect());
        }
        std::thread::scope(|s| {
            for c in chunks {
                s.spawn(move || drop(c));
            }
        });
    }
}

impl Session {
    /// Creates the ring buffer and the drop counter.
    pub fn new(opts: SessionOptions) -> Result<Session> {
        raise_fd_limit();
        let ring = RingBuf::create(&format!("{}_ring", opts.name_prefix), opts.ring_bytes)?;
        let drops = Map::create(
            MapKind::PerCpuArray,
            &format!("{}_drops", opts.name_prefix),
            4,
            8,
            1,
        )?;
        let n = crate::bpf::map::possible_cpus()?;
        // No limit until the framework's buffers give one.
        let room = std::sync::Arc::new(crate::room::RoomMap::create(
            &format!("{}_room", opts.name_prefix),
            n,
        )?);
        let session_room = room;
        let sleep_word = crate::wakeup::SleepWord::create(&format!("{}_sleep", opts.name_prefix))?;
        Ok(Session {
            enabled: Vec::new(),
            pending_uprobes: Vec::new(),
            pending_kprobes: Vec::new(),
            groups: Vec::new(),
            dispatch: [None, None],
            kept: None,
            pending_retries: None,
            exits_elsewhere: Default::default(),
            info: Default::default(),
            reports: Default::default(),
            held: Default::default(),
            tgid_of: Default::default(),
            ppid_of: Default::default(),
            scratch: Vec::new(),
            tp_btf: HashMap::new(),
            syscall_funcs: None,
            syscall_trampolines: Default::default(),
            exits_on_trampolines: HashMap::new(),
            enabling_btf: None,
            bad_records: 0,
            task: crate::btf::TaskOffsets::of_running_kernel(),
            wall_offset_ns: wall_offset_ns(),
            opts,
            vclock: None,
            vfloor: crate::vtime::VtimeFloor::new(),
            drops,
            room: session_room,
            sleep_word,
            mirror: None,
            ring,
        })
    }

    /// Enables `probe`, tagging its records with `tag` (the framework's probe id), capturing what
    /// `spec` asks for. Errors name the probe. Uprobes are placed where the kernel has
    /// uprobe-multi links by [`Session::attach_pending`], all of one object at once (polling does
    /// it too); elsewhere at once.
    pub fn enable(&mut self, probe: &Probe, tag: u32, spec: &CaptureSpec) -> Result<()> {
        let reads_btf = matches!(
            probe.attach,
            AttachPoint::Tracepoint {
                syscall: Some(_),
                ..
            } | AttachPoint::RawTracepoint { .. }
                | AttachPoint::Fbt { .. }
        );
        if reads_btf && self.enabling_btf.is_none() {
            self.enabling_btf = crate::btf::Btf::load_vmlinux().ok();
        }
        let name = probe.desc.to_string();
        if self.info.contains_key(&tag) {
            return Err(LinuxError::BadCapture {
                probe: name,
                reason: format!("tag {tag} is already enabled"),
            });
        }
        let layout = RecordLayout::for_spec_sized(spec, &name, self.sized_copies(spec))?;
        let obj = format!("{}_{tag}", self.opts.name_prefix);
        let mut fds = MapFds {
            ring: self.ring.map().raw_fd(),
            drops: self.drops.raw_fd(),
            room: self.room.raw_fd(),
            pending: None,
            pending_armed: None,
            mirror: self.mirror_fd(spec)?,
            wakeup: match self.opts.wakeup_divisor {
                0 => None,
                d => Some(crate::capture::codegen::Wakeup {
                    bytes: (self.ring.size() / d as usize).max(1) as u32,
                    sleep_word: self.sleep_word.raw_fd(),
                }),
            },
            wake_at_once: spec.wake_at_once,
            vclock: None,
        };
        if spec.exact_vtime && speaks_for_current(&probe.attach) {
            fds.vclock = Some(self.vclock()?);
        }
        let exact_vtime = spec.exact_vtime && vtime_of_a_task(&probe.attach);
        let mut programs = Vec::new();
        let mut attachments = Vec::new();
        let mut armed = None;
        let mut replayed = false;
        let mut capture_report = CaptureReport::default();
        // Every capture program of this probe loads the same way; only its kind, shape and maps
        // differ (and, at a syscall's entry keeping firings for the return, its spec).
        let only_cpu = self.opts.only_cpu;
        let load =
            |kind: ProgKind, shape: &ProbeShape, spec: &CaptureSpec, fds: &MapFds| match only_cpu {
                Some(cpu) => {
                    let mut on_cpu = shape.clone();
                    on_cpu.conditions.insert(0, Condition::OnCpu(cpu));
                    load_capture(kind, &on_cpu, spec, &layout, tag, fds, &obj, &name)
                }
                None => load_capture(kind, shape, spec, &layout, tag, fds, &obj, &name),
            };
        let (syscall_return, identity_from_fields) = match &probe.attach {
            AttachPoint::Tracepoint {
                id,
                args,
                conditions,
                identity,
                return_event,
                syscall_return,
                syscall,
                ..
            } => {
                // An entry goes on its syscall's own function's trampoline where the kernel has
                // them (see `crate::syscall_fentry`), else in the `sys_enter` dispatcher's slot;
                // a return on the trampoline's exit side where the syscall's exit side is there
                // (see `Session::exit_on_trampoline`), else in the `sys_exit` dispatcher's slot.
                let fentry = match syscall {
                    Some(_) if !*syscall_return => self.syscall_fentry_id(&probe.desc.function),
                    Some(r) => self.exit_on_trampoline(r.nr, &probe.desc.function),
                    _ => None,
                };
                let raw = syscall
                    .as_ref()
                    .filter(|r| fentry.is_none() && self.slot_free(*syscall_return, r.nr));
                if let (true, Some(r), None, None) = (*syscall_return, syscall, raw, fentry) {
                    // Its order beside the dispatcher's programs is not known: no replay runs
                    // there (see `Session::set_up_replay`).
                    self.exits_elsewhere.insert(r.nr);
                }
                // A firing at the entry whose strings are not readable yet is kept for the
                // syscall's return (see `capture::spec::Replay`).
                let routed = match (fentry, raw) {
                    (Some(btf_id), _) if *syscall_return => {
                        Some((vmlinux_fexit(btf_id), CtxKind::TypedRawTracepoint))
                    }
                    (Some(btf_id), _) => Some((
                        ProgKind::Fentry {
                            btf_id,
                            btf_obj_fd: 0,
                        },
                        CtxKind::TypedRawTracepoint,
                    )),
                    (None, Some(_)) => {
                        let d = self.syscall_dispatch(*syscall_return)?;
                        Some((d.kind, d.ctx))
                    }
                    (None, None) => None,
                };
                let entry_shape = match syscall.as_ref().zip(routed) {
                    Some((route, (_, ctx))) => ProbeShape {
                        ctx,
                        args: route.args.clone(),
                        conditions: Vec::new(),
                        identity: *identity,
                        task: self.task,
                    },
                    None => ProbeShape {
                        ctx: CtxKind::Tracepoint,
                        args: args.clone(),
                        conditions: conditions.clone(),
                        identity: *identity,
                        task: self.task,
                    },
                };
                // (Not where the entry's firing cannot be run at the return: an exec's replaces
                // the memory its strings were in; an exit never returns.)
                let returns = !matches!(
                    probe.desc.function.as_str(),
                    "execve" | "execveat" | "exit" | "exit_group"
                );
                let kept = match syscall.as_ref().filter(|_| !*syscall_return && returns) {
                    Some(r) => {
                        let func = probe.desc.function.as_str();
                        let at = ReplayAt {
                            nr: r.nr,
                            entry_shape: &entry_shape,
                            layout: &layout,
                            tag,
                            fds: &fds,
                            obj: &obj,
                            name: &name,
                            func,
                        };
                        self.set_up_replay(spec, at)?
                    }
                    None => None,
                };
                let kept_spec;
                let spec = match kept {
                    Some(k) => {
                        programs.extend(k.replay);
                        replayed = true;
                        kept_spec = k.keep;
                        &kept_spec
                    }
                    None => spec,
                };
                let wants_retry = spec.retry_at_return
                    && !*syscall_return
                    && spec.copies.iter().any(|c| c.kind.is_user());
                // The retry goes on the exit of the syscall's function's trampoline where its
                // exit side is there, before the return's program; else in the `sys_exit`
                // dispatcher's chain, before the return's own program (a tracepoint of its own
                // costs a grace period to detach); else on the return's tracepoint.
                let on_exit = match syscall.as_ref() {
                    Some(r) if wants_retry => self.exit_on_trampoline(r.nr, &probe.desc.function),
                    _ => None,
                };
                let chained = match syscall.as_ref().filter(|r| r.nr < MAX_SYSCALL_NR) {
                    Some(r) if wants_retry && on_exit.is_none() => {
                        let (slots, chain) = self.exit_chain()?;
                        let retries = &chain.retries;
                        (!retries.used.contains(&r.nr))
                            .then(|| ((slots, r.nr), retries.count.raw_fd()))
                    }
                    _ => None,
                };
                if wants_retry && (chained.is_some() || on_exit.is_some() || return_event.is_some())
                {
                    fds.pending = Some(self.retry_pending()?);
                    fds.pending_armed = Some(match chained {
                        Some((_, a)) => a,
                        None => {
                            let count = count_map(&format!("{obj}_pn"))?;
                            let fd = count.raw_fd();
                            armed = Some(count);
                            fd
                        }
                    });
                    // The return-side program goes in first, so no entry can arm a retry nobody serves.
                    let insns = gen_retry(spec, &layout, tag, &fds, chained.map(|(c, _)| c))?;
                    let rname = format!("{obj}_r");
                    match (chained, on_exit.zip(syscall.as_ref()), return_event) {
                        (Some(((_, nr), _)), _, _) => {
                            let kind = self.syscall_dispatch(true)?.kind;
                            let prog = Program::load(kind, &insns, &rname, &name)?;
                            self.exit_chain()?.1.retries.install(nr, &prog)?;
                            programs.push(prog);
                        }
                        (None, Some((btf_id, r)), _) => {
                            let prog = Program::load(vmlinux_fexit(btf_id), &insns, &rname, &name)?;
                            let at = (r.nr, ExitStage::Retry);
                            self.attach_on_exit(at, prog, insns, &rname, &name)?;
                        }
                        (None, None, Some(ret_id)) => {
                            let prog = Program::load(ProgKind::Tracepoint, &insns, &rname, &name)?;
                            attachments.push(Attachment::tracepoint(&prog, *ret_id, &name)?);
                            programs.push(prog);
                        }
                        _ => {}
                    }
                }
                let kind = routed.map_or(ProgKind::Tracepoint, |(kind, _)| kind);
                let (prog, report, insns) = load(kind, &entry_shape, spec, &fds)?;
                capture_report = CaptureReport {
                    replay: replayed,
                    ..report
                };
                match (fentry, raw, syscall) {
                    (Some(_), _, Some(r)) if *syscall_return => {
                        self.attach_on_exit((r.nr, ExitStage::Return), prog, insns, &obj, &name)?;
                    }
                    (Some(_), _, _) => {
                        attachments.push(Attachment::tp_btf(&prog, &name)?);
                        programs.push(prog);
                    }
                    (None, Some(route), _) => {
                        self.install(*syscall_return, route.nr, &prog)?;
                        programs.push(prog);
                    }
                    (None, None, _) => {
                        attachments.push(Attachment::tracepoint(&prog, *id, &name)?);
                        programs.push(prog);
                    }
                }
                (
                    *syscall_return,
                    matches!(identity, Identity::FromFields { .. }),
                )
            }
            AttachPoint::RawTracepoint {
                name: tp,
                args,
                conditions,
                identity,
            } => {
                let mut shape = ProbeShape {
                    ctx: CtxKind::TypedRawTracepoint,
                    args: args.clone(),
                    conditions: conditions.clone(),
                    identity: *identity,
                    task: self.task,
                };
                // Typed (tp_btf) where the kernel's BTF names the tracepoint, so the stack of the
                // task an argument points at can be taken; plain otherwise.
                let typed = self.tp_btf_id(tp).and_then(|btf_id| {
                    let (prog, report, _) =
                        load(ProgKind::TpBtf { btf_id }, &shape, spec, &fds).ok()?;
                    capture_report = report;
                    Some(prog)
                });
                let (prog, attachment) = match typed {
                    Some(prog) => {
                        let at = Attachment::tp_btf(&prog, &name)?;
                        (prog, at)
                    }
                    None => {
                        shape.ctx = CtxKind::RawTracepoint;
                        let (prog, report, _) = load(ProgKind::RawTracepoint, &shape, spec, &fds)?;
                        capture_report = report;
                        let at = Attachment::raw_tracepoint(&prog, tp)?;
                        (prog, at)
                    }
                };
                attachments.push(attachment);
                programs.push(prog);
                (false, false)
            }
            AttachPoint::Uprobe {
                path,
                retprobe,
                pid,
                sites,
            } => {
                // One program per site: a USDT probe's sites read their arguments differently.
                let multi = crate::uprobe::multi_available();
                for at in sites {
                    let shape = uprobe_shape(at, self.task);
                    let kind = match multi {
                        true => ProgKind::UprobeMulti,
                        false => ProgKind::Kprobe,
                    };
                    let (prog, report, _) = load(kind, &shape, spec, &fds)?;
                    capture_report = report;
                    if multi {
                        self.pending_uprobes.push(PendingUprobe {
                            path: path.clone(),
                            pid: *pid,
                            retprobe: *retprobe,
                            offset: at.offset,
                            ref_ctr_offset: at.ref_ctr_offset,
                            prog,
                            name: name.clone(),
                        });
                        continue;
                    }
                    let site = crate::uprobe::UprobeSite {
                        path,
                        offset: at.offset,
                        retprobe: *retprobe,
                        pid: *pid,
                        ref_ctr_offset: at.ref_ctr_offset,
                    };
                    attachments.push(crate::uprobe::attach(&prog, &site, &name)?);
                    programs.push(prog);
                }
                (false, false)
            }
            AttachPoint::Fbt {
                module,
                function,
                btf_id,
                ret,
                args,
                conditions,
                also,
            } => {
                // See `catalog::fbt::mechanism`; a module's kprobes are single ones (kprobe-multi
                // links reach module functions only on newer kernels).
                let in_module = module != crate::catalog::fbt::KERNEL_MODULE;
                let mechanism = crate::catalog::fbt::mechanism(*btf_id)?;
                let btf_obj_fd = match (in_module, mechanism) {
                    (true, crate::features::FbtMechanism::Fentry) => {
                        crate::bpf::btf_obj::module_btf_fd(module)? as u32
                    }
                    _ => 0,
                };
                let mut shape = ProbeShape {
                    ctx: CtxKind::TypedRawTracepoint,
                    args: args.clone(),
                    conditions: conditions.clone(),
                    identity: Identity::Current,
                    task: self.task,
                };
                let functions: Vec<(&String, u32)> = std::iter::once((function, *btf_id))
                    .chain(also.iter().map(|(f, id)| (f, *id)))
                    .collect();
                match mechanism {
                    crate::features::FbtMechanism::Fentry => {
                        // A trampoline program is loaded for one function (its BTF id).
                        for (_, id) in &functions {
                            let kind = match ret {
                                true => ProgKind::Fexit {
                                    btf_id: *id,
                                    btf_obj_fd,
                                },
                                false => ProgKind::Fentry {
                                    btf_id: *id,
                                    btf_obj_fd,
                                },
                            };
                            let (prog, report, _) = load(kind, &shape, spec, &fds)?;
                            capture_report = report;
                            attachments.push(Attachment::tp_btf(&prog, &name)?);
                            programs.push(prog);
                        }
                    }
                    crate::features::FbtMechanism::Kprobe => {
                        shape.ctx = CtxKind::Kprobe;
                        // A probe on a family of functions places one program with a single
                        // kprobe on each.
                        let multi =
                            !in_module && functions.len() == 1 && crate::kprobe::multi_available();
                        let kind = match multi {
                            true => ProgKind::KprobeMulti,
                            false => ProgKind::Kprobe,
                        };
                        let (prog, report, _) = load(kind, &shape, spec, &fds)?;
                        capture_report = report;
                        if multi {
                            self.pending_kprobes.push(PendingKprobe {
                                func: function.clone(),
                                retprobe: *ret,
                                prog,
                                name: name.clone(),
                            });
                        } else {
                            for (func, _) in &functions {
                                attachments.push(crate::kprobe::attach(&prog, func, *ret, &name)?);
                            }
                            programs.push(prog);
                        }
                    }
                }
                (false, false)
            }
            AttachPoint::Profile {
                period_ns,
                all_cpus,
            } => {
                let shape = profile_shape(self.task);
                let (prog, report, _) = load(ProgKind::PerfEvent, &shape, spec, &fds)?;
                capture_report = report;
                let online = crate::bpf::map::online_cpus()?;
                let cpus: Vec<u32> = if *all_cpus {
                    online
                } else {
                    online.into_iter().take(1).collect()
                };
                attachments.push(Attachment::cpu_clock(&prog, *period_ns, &cpus, &name)?);
                programs.push(prog);
                (false, false)
            }
        };
        self.reports.insert(tag, capture_report);
        self.enabled.push(Enabled {
            _attachments: attachments,
            _programs: programs,
            _armed: armed,
        });
        self.info.insert(
            tag,
            ProbeInfo {
                layout,
                syscall_return,
                identity_from_fields,
                exact_vtime,
                user_probe: matches!(probe.attach, AttachPoint::Uprobe { .. }),
            },
        );
        Ok(())
    }

    /// How the records of a probe capturing `spec` hold its copies sized at the probe: the probe
    /// sizes each record where the kernel lets it (see `capture::sized`).
    fn sized_copies(&self, spec: &CaptureSpec) -> SizedCopies {
        let sized = spec
            .copies
            .iter()
            .any(|c| c.size_arg.is_some() && c.kind == crate::capture::MemKind::UserBytes);
        if sized && !self.opts.capped_sized_copies && crate::features::have_ringbuf_dynptr() {
            SizedCopies::AtProbe
        } else {
            SizedCopies::Capped
        }
    }

    /// Places the probes enabled since the last call that attach by the group: one uprobe-multi
    /// link per object, process and kind, and one kprobe-multi link per kind of kernel-function
    /// probe. On an error the probes not yet placed are dropped. Enabling is then over: the
    /// kernel's BTF is let go (a later enabling reads it again).
    pub fn attach_pending(&mut self) -> Result<()> {
        self.enabling_btf = None;
        let mut groups: Vec<Vec<PendingUprobe>> = Vec::new();
        let mut index: HashMap<(String, u32, bool), usize> = HashMap::new();
        for p in std::mem::take(&mut self.pending_uprobes) {
            let key = (p.path.clone(), p.pid, p.retprobe);
            let i = *index.entry(key).or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
            groups[i].push(p);
        }
        for members in groups {
            let Some(first) = members.first() else {
                continue;
            };
            let what = group_name(&first.name, members.len());
            let progs: Vec<&Program> = members.iter().map(|m| &m.prog).collect();
            let (slots, dispatcher, cookies) =
                self.dispatcher(&progs, ProgKind::UprobeMulti, &what)?;
            let offsets: Vec<u64> = members.iter().map(|m| m.offset).collect();
            let refs: Vec<u64> = members.iter().map(|m| m.ref_ctr_offset).collect();
            let sites = crate::uprobe::MultiSites {
                path: &first.path,
                pid: first.pid,
                retprobe: first.retprobe,
                offsets: &offsets,
                ref_ctr_offsets: &refs,
                cookies: &cookies,
            };
            let link = crate::uprobe::attach_multi(&dispatcher, &sites, &what)?;
            self.groups.push(ProbeGroup {
                _link: link,
                _dispatcher: dispatcher,
                _slots: slots,
                _programs: members.into_iter().map(|m| m.prog).collect(),
            });
        }
        let (ret, entry): (Vec<PendingKprobe>, Vec<PendingKprobe>) =
            std::mem::take(&mut self.pending_kprobes)
                .into_iter()
                .partition(|p| p.retprobe);
        for members in [entry, ret] {
            let Some(first) = members.first() else {
                continue;
            };
            let what = group_name(&first.name, members.len());
            let progs: Vec<&Program> = members.iter().map(|m| &m.prog).collect();
            let (slots, dispatcher, cookies) =
                self.dispatcher(&progs, ProgKind::KprobeMulti, &what)?;
            let funcs: Vec<&str> = members.iter().map(|m| m.func.as_str()).collect();
            let link =
                crate::kprobe::attach_multi(&dispatcher, &funcs, &cookies, first.retprobe, &what)?;
            self.groups.push(ProbeGroup {
                _link: link,
                _dispatcher: dispatcher,
                _slots: slots,
                _programs: members.into_iter().map(|m| m.prog).collect(),
            });
        }
        Ok(())
    }

    /// A prog array holding `progs` in slots 0.. and a dispatcher of `kind` that tail-calls the slot
    /// its link's cookie names; with the cookies (slot numbers) to give the link.
    fn dispatcher(
        &self,
        progs: &[&Program],
        kind: ProgKind,
        what: &str,
    ) -> Result<(Map, Program, Vec<u64>)> {
        let obj = format!("{}_um", self.opts.name_prefix);
        let count = u32::try_from(progs.len())
            .map_err(|_| LinuxError::BadProbe(format!("{what}: too many probes")))?;
        let slots = Map::create(MapKind::ProgArray, &obj, 4, 4, count)?;
        for (i, p) in progs.iter().enumerate() {
            slots.update(
                &(i as u32).to_le_bytes(),
                &(p.raw_fd() as u32).to_le_bytes(),
            )?;
        }
        let insns = gen_cookie_dispatcher(slots.raw_fd())?;
        let dispatcher = Program::load(kind, &insns, &obj, what)?;
        Ok((slots, dispatcher, (0..progs.len() as u64).collect()))
    }

    /// The thread-variable mirror's descriptor when `spec` uses it (created at its first use, shared
    /// by every probe of the session).
    fn mirror_fd(&mut self, spec: &CaptureSpec) -> Result<Option<i32>> {
        if !crate::capture::mirror::uses_mirror(spec) {
            return Ok(None);
        }
        if self.mirror.is_none() {
            self.mirror = Some(Map::create(
                MapKind::LruHash,
                &format!("{}_tls", self.opts.name_prefix),
                crate::capture::mirror::KEY_SIZE,
                crate::capture::mirror::VALUE_SIZE,
                crate::capture::spec::MIRROR_ENTRIES,
            )?);
        }
        Ok(self.mirror.as_ref().map(Map::raw_fd))
    }

    /// The exact-`vtimestamp` clock's references, starting it on first use.
    fn vclock(&mut self) -> Result<crate::vtime::VclockRef> {
        if self.vclock.is_none() {
            self.vclock = Some(crate::vtime::Vclock::start(&self.opts.name_prefix)?);
        }
        self.vclock
            .as_ref()
            .map(|v| v.reference())
            .ok_or_else(|| LinuxError::Unavailable("vtimestamp clock".into()))
    }

    /// Whether the exact-`vtimestamp` clock runs (some enabled probe's clauses read `vtimestamp`).
    pub fn exact_vtime_running(&self) -> bool {
        self.vclock.is_some()
    }

    /// The vmlinux BTF id of raw tracepoint `name`'s `btf_trace_<name>` typedef (looked up once).
    fn tp_btf_id(&mut self, name: &str) -> Option<u32> {
        if !self.tp_btf.contains_key(name) {
            let id = crate::btf::Btf::load_vmlinux()
                .ok()
                .and_then(|b| b.typedef_id(&format!("btf_trace_{name}")));
            self.tp_btf.insert(name.to_string(), id);
        }
        self.tp_btf.get(name).copied().flatten()
    }

    /// The BTF id of syscall `name`'s own function, where its probes go on a trampoline (see
    /// [`crate::syscall_fentry`]): the first [`MAX_SYSCALL_TRAMPOLINES`] syscalls' (and every
    /// further probe of those; a trampoline runs the program attached last first, see
    /// [`Session::attach_on_exit`]).
    ///
    /// [`MAX_SYSCALL_TRAMPOLINES`]: crate::syscall_fentry::MAX_SYSCALL_TRAMPOLINES
    fn syscall_fentry_id(&mut self, name: &str) -> Option<u32> {
        let id = self
            .syscall_funcs
            .get_or_insert_with(crate::syscall_fentry::SyscallFuncs::of_running_kernel)
            .btf_id(name)?;
        let on = &mut self.syscall_trampolines;
        if !on.contains(&id) {
            if on.len() >= crate::syscall_fentry::MAX_SYSCALL_TRAMPOLINES {
                return None;
            }
            on.insert(id);
        }
        Some(id)
    }

    /// The BTF id of syscall `nr`'s function (named `name`) where its exit side (its return
    /// probes, its entry's replay and retry) goes on the exit of the function's trampoline
    /// (fexit of `__x64_sys_<name>`: the same `struct pt_regs *` first and the syscall's value
    /// second that the typed `sys_exit` tracepoint has), decided with the first of them: where
    /// the function has a trampoline (see [`Session::syscall_fentry_id`]) and nothing of the
    /// syscall's is in the `sys_exit` dispatcher. Not the syscalls that return in a new task
    /// too (the child of `fork`, `vfork`, `clone` and `clone3` returns from `ret_from_fork`,
    /// past the function's end, where the tracepoint fires and fexit does not).
    fn exit_on_trampoline(&mut self, nr: u32, name: &str) -> Option<u32> {
        if let Some(t) = self.exits_on_trampolines.get(&nr) {
            return Some(t.btf_id);
        }
        let in_dispatcher = self.dispatch[1].as_ref().is_some_and(|d| {
            d.used.contains(&nr)
                || d.chain
                    .as_ref()
                    .is_some_and(|c| c.replays.used.contains(&nr) || c.retries.used.contains(&nr))
        });
        if matches!(name, "fork" | "vfork" | "clone" | "clone3")
            || in_dispatcher
            || self.exits_elsewhere.contains(&nr)
        {
            return None;
        }
        let btf_id = self.syscall_fentry_id(name)?;
        self.exits_on_trampolines.insert(
            nr,
            TrampolineExit {
                btf_id,
                progs: Vec::new(),
            },
        );
        Some(btf_id)
    }

    /// Attaches `prog` (loaded from `insns` as fexit of the function of syscall `nr`, whose
    /// exit side is on its trampoline) as the exit's `stage` program. A trampoline runs the
    /// program attached last first: those to run before it are loaded and attached again
    /// after it, the first last. Each is detached first, so it misses a firing or two rather
    /// than running twice; loaded again, as a program stays linked while any descriptor of
    /// its link lives (a child forked meanwhile holds one until its exec).
    fn attach_on_exit(
        &mut self,
        (nr, stage): (u32, ExitStage),
        prog: Program,
        insns: Vec<crate::bpf::Insn>,
        obj: &str,
        name: &str,
    ) -> Result<()> {
        let t = self
            .exits_on_trampolines
            .get_mut(&nr)
            .ok_or_else(|| LinuxError::Unavailable(format!("{name}: its syscall's exit")))?;
        let kind = vmlinux_fexit(t.btf_id);
        let link = Some(Attachment::tp_btf(&prog, name)?);
        let at = t.progs.partition_point(|p| p.stage < stage);
        t.progs.insert(
            at,
            ExitProg {
                link,
                prog,
                stage,
                insns,
                obj: obj.to_string(),
                name: name.to_string(),
            },
        );
        for p in t.progs[..at].iter_mut().rev() {
            drop(p.link.take());
            p.prog = Program::load(kind, &p.insns, &p.obj, &p.name)?;
            p.link = Some(Attachment::tp_btf(&p.prog, &p.name)?);
        }
        Ok(())
    }

    fn slot_free(&self, exit: bool, nr: u32) -> bool {
        nr < MAX_SYSCALL_NR
            && self.dispatch[usize::from(exit)]
                .as_ref()
                .is_none_or(|d| !d.used.contains(&nr))
    }

    /// Puts `prog` in the dispatcher slot of syscall `nr`, creating and attaching the dispatcher on
    /// first use.
    fn install(&mut self, exit: bool, nr: u32, prog: &Program) -> Result<()> {
        let d = self.syscall_dispatch(exit)?;
        d.slots
            .update(&nr.to_le_bytes(), &(prog.raw_fd() as u32).to_le_bytes())?;
        d.used.insert(nr);
        if let Some(c) = &d.chain {
            let n = d.used.len() as u64;
            c.returns.update(&0u32.to_le_bytes(), &n.to_le_bytes())?;
        }
        Ok(())
    }

    /// Sets up the replay at syscall `at.nr`'s return of the firings its entry keeps (see
    /// `capture::spec::Replay`), when the entry's kernel clauses in `spec` call for one
    /// (`capture::kagg::replayable`) and the return can take it: loads the program that runs
    /// them there and puts it in the `sys_exit` dispatcher's replay stage
    /// ([`ExitChain::replays`]). Returns the entry's spec in the mode that keeps such
    /// firings, and the program; `None` where the clauses run without a replay (a string not
    /// readable at the entry then faults there, as in DTrace): the syscall has one, or a
    /// program of its return is on the return's own tracepoint (which could run before the
    /// dispatcher), or the replay would not run the clauses the entry runs, or the kernel
    /// refuses its code. (A return's program enabled after the replay goes to that tracepoint
    /// only when the syscall's slot is taken, which one probe per syscall return never does.)
    fn set_up_replay(
        &mut self,
        spec: &CaptureSpec,
        at: ReplayAt<'_>,
    ) -> Result<Option<KeptFirings>> {
        use crate::capture::spec::{Replay, ReplayMaps, REPLAY_ARGS, REPLAY_VALUE_SIZE};
        let Some(k) = spec
            .aggs
            .as_ref()
            .filter(|k| crate::capture::kagg::replayable(k))
        else {
            return Ok(None);
        };
        if at.nr >= MAX_SYSCALL_NR || self.exits_elsewhere.contains(&at.nr) {
            return Ok(None);
        }
        let prefix = self.opts.name_prefix.clone();
        // On the syscall's trampoline, the replay runs first of its exit's programs and
        // tail-calls nothing; in the dispatcher's replay stage, it tail-calls the retry stage
        // and the syscall's slot.
        let on_exit = self.exit_on_trampoline(at.nr, at.func);
        let (armed, tails, kind, ctx) = match on_exit {
            Some(btf_id) => (
                None,
                None,
                vmlinux_fexit(btf_id),
                CtxKind::TypedRawTracepoint,
            ),
            None => {
                let (slots, chain) = self.exit_chain()?;
                if chain.replays.used.contains(&at.nr) {
                    return Ok(None);
                }
                let armed = Some(chain.replays.count.raw_fd());
                let tails = (chain.retries.slots.raw_fd(), slots);
                let d = self.syscall_dispatch(true)?;
                (armed, Some(tails), d.kind, d.ctx)
            }
        };
        if self.kept.is_none() {
            self.kept = Some(Map::create_hash_on_demand(
                &format!("{prefix}_kept"),
                4,
                REPLAY_VALUE_SIZE as u32,
                16_384,
            )?);
        }
        let pending = self
            .kept
            .as_ref()
            .map(Map::raw_fd)
            .ok_or_else(|| LinuxError::Unavailable("kept firings".into()))?;
        let m = ReplayMaps {
            pending,
            armed,
            zeros: k.zeros,
            nr: at.nr,
        };
        let with = |replay| CaptureSpec {
            aggs: Some(crate::capture::KernelAggs {
                replay: Some(replay),
                ..k.clone()
            }),
            ..spec.clone()
        };
        let (keep, run) = (with(Replay::Keep(m)), with(Replay::Run(m)));
        let shape = ProbeShape {
            ctx,
            args: (0..REPLAY_ARGS as u8)
                .map(|n| ArgSource::Kept { map: m.pending, n })
                .collect(),
            conditions: Vec::new(),
            identity: at.entry_shape.identity,
            task: self.task,
        };
        let Ok((insns, ran)) =
            crate::capture::codegen::gen_replay(&shape, &run, at.tag, at.fds, at.nr, tails)
        else {
            return Ok(None);
        };
        let Ok((_, kept)) = crate::capture::codegen::gen_capture_reporting(
            at.entry_shape,
            &keep,
            at.layout,
            at.tag,
            at.fds,
        ) else {
            return Ok(None);
        };
        let same = kept.aggs.len() == ran.len()
            && kept
                .aggs
                .iter()
                .zip(&ran)
                .all(|(a, b)| a.is_ok() == b.is_ok());
        if !same || !kept.aggs.iter().any(|r| r.is_ok()) {
            return Ok(None);
        }
        let obj = format!("{}_x", at.obj);
        let Ok(prog) = Program::load(kind, &insns, &obj, at.name) else {
            return Ok(None);
        };
        let replay = match on_exit {
            Some(_) => {
                self.attach_on_exit((at.nr, ExitStage::Replay), prog, insns, &obj, at.name)?;
                None
            }
            None => {
                self.exit_chain()?.1.replays.install(at.nr, &prog)?;
                Some(prog)
            }
        };
        Ok(Some(KeptFirings { keep, replay }))
    }

    /// The map of pending retries (`pending_retries`), created on first use: its file
    /// descriptor. One map serves every probe: a thread is in one syscall at a time,
    /// and the key names the probe too.
    fn retry_pending(&mut self) -> Result<i32> {
        if self.pending_retries.is_none() {
            self.pending_retries = Some(Map::create(
                MapKind::LruHash,
                &format!("{}_pending", self.opts.name_prefix),
                PENDING_KEY_SIZE,
                PENDING_VALUE_SIZE,
                16_384,
            )?);
        }
        self.pending_retries
            .as_ref()
            .map(Map::raw_fd)
            .ok_or_else(|| LinuxError::Unavailable("pending retries".into()))
    }

    /// The `sys_exit` dispatcher's slots (their file descriptor) and stages, created and
    /// attached on first use.
    fn exit_chain(&mut self) -> Result<(i32, &mut ExitChain)> {
        let d = self.syscall_dispatch(true)?;
        let slots = d.slots.raw_fd();
        let chain = d
            .chain
            .as_mut()
            .ok_or_else(|| LinuxError::Unavailable("sys_exit dispatcher stages".into()))?;
        Ok((slots, chain))
    }

    /// The `sys_enter` or `sys_exit` dispatcher, created and attached on first use.
    fn syscall_dispatch(&mut self, exit: bool) -> Result<&mut Dispatch> {
        let i = usize::from(exit);
        if self.dispatch[i].is_none() {
            let which = if exit { "sys_exit" } else { "sys_enter" };
            let slots = Map::create(
                MapKind::ProgArray,
                &format!("{}_{which}", self.opts.name_prefix),
                4,
                4,
                MAX_SYSCALL_NR,
            )?;
            let prefix = &self.opts.name_prefix;
            let chain = match exit {
                true => Some(ExitChain {
                    replays: Stage::create(
                        &format!("{prefix}_{which}_k"),
                        &format!("{prefix}_keptn"),
                    )?,
                    retries: Stage::create(
                        &format!("{prefix}_{which}_r"),
                        &format!("{prefix}_retryn"),
                    )?,
                    returns: count_map(&format!("{prefix}_retn"))?,
                }),
                false => None,
            };
            let stages = chain.as_ref().map(|c| ExitStages {
                returns: c.returns.raw_fd(),
                replays: c.replays.slots.raw_fd(),
                kept: c.replays.count.raw_fd(),
                retries: c.retries.slots.raw_fd(),
                armed: c.retries.count.raw_fd(),
            });
            let obj = format!("{prefix}_{}", if exit { "sx" } else { "se" });
            let what = format!("{which} dispatcher");
            let typed = self.tp_btf_id(which).and_then(|btf_id| {
                let ctx = CtxKind::TypedRawTracepoint;
                let insns = gen_syscall_dispatcher(slots.raw_fd(), exit, stages, ctx).ok()?;
                let kind = ProgKind::TpBtf { btf_id };
                let prog = Program::load(kind, &insns, &obj, &what).ok()?;
                let link = Attachment::tp_btf(&prog, &what).ok()?;
                Some((prog, link, kind, ctx))
            });
            let (dprog, link, kind, ctx) = match typed {
                Some(t) => t,
                None => {
                    let ctx = CtxKind::RawTracepoint;
                    let insns = gen_syscall_dispatcher(slots.raw_fd(), exit, stages, ctx)?;
                    let dprog = Program::load(ProgKind::RawTracepoint, &insns, &obj, &what)?;
                    let link = Attachment::raw_tracepoint(&dprog, which)?;
                    (dprog, link, ProgKind::RawTracepoint, ctx)
                }
            };
            self.dispatch[i] = Some(Dispatch {
                _link: link,
                _prog: dprog,
                slots,
                used: Default::default(),
                chain,
                kind,
                ctx,
            });
        }
        self.dispatch[i]
            .as_mut()
            .ok_or_else(|| LinuxError::Unavailable("syscall dispatcher".into()))
    }

    /// What the capture program of the probe enabled with `tag` runs in the kernel: which
    /// predicates of its filter (in the filter's order; empty without one) and which kernel
    /// aggregations (in the order of its spec's [`crate::capture::KernelAggs`]).
    pub fn capture_report(&self, tag: u32) -> Option<&CaptureReport> {
        self.reports.get(&tag)
    }

    /// Number of enabled probes.
    pub fn enabled_count(&self) -> usize {
        self.enabled.len()
    }

    /// Records lost because the ring buffer was full (summed over CPUs).
    pub fn drops(&self) -> Result<u64> {
        self.drops.percpu_sum_u64(0)
    }

    /// Records lost because the ring buffer was full, per CPU (indexed by the CPU the probe fired
    /// on; possible CPUs that never dropped count 0).
    pub fn cpu_drops(&self) -> Result<Vec<u64>> {
        self.drops.percpu_u64(0)
    }

    /// The records each CPU refused because its principal buffer had no room for them (see
    /// [`Session::set_record_room`]), indexed by CPU number; the counts only grow. They are
    /// among [`Session::cpu_drops`], which also counts records the ring had no room for: only
    /// these fill a `fill` buffer, as DTrace's fills when a reservation in it fails.
    pub fn cpu_room_refusals(&self) -> Result<Vec<u64>> {
        Ok(self.room.refusals())
    }

    /// The principal buffers' room shared by the records built at the probe and those dtrace
    /// builds for the same buffers (see [`crate::room`]).
    pub fn shared_room(&self) -> std::sync::Arc<crate::room::RoomMap> {
        self.room.clone()
    }

    /// Sets the room each CPU's principal buffer has for records built at the probe, just
    /// switched (empty), until the next call (indexed by CPU number; a CPU not given gets
    /// none): a clause whose record does not fit in its CPU's room is skipped whole and counted
    /// as a drop, as DTrace skips an ECB it cannot reserve buffer room for, so that dtrace never
    /// refuses a record the kernel built after the clause's stores were made. `u64::MAX`: no
    /// limit (a `ring` buffer). Records built before the call and not yet read from the ring
    /// will land in the buffer after the switch: their room is taken from `room` (the kernel
    /// checks its use against a grant, [`crate::room::GRANTED`],
    /// set here to the bytes already read from the ring plus `room`).
    pub fn set_record_room(&self, room: &[u64]) -> Result<()> {
        for cpu in 0..self.room.ncpus() {
            let granted = self
                .room
                .landed(cpu)
                .saturating_add(room.get(cpu).copied().unwrap_or(0));
            self.room.set_granted(cpu, granted);
        }
        Ok(())
    }

    /// The ring's descriptor to sleep on among others ([`crate::wait::readable`]), readable at
    /// once when records wait in it; its programs wake its sleeper once it is
    /// 1/[`SessionOptions::wakeup_divisor`] full. Says dtrace sleeps (see [`crate::wakeup`]):
    /// call it just before each sleep.
    pub fn ring_fd_to_sleep_on(&self) -> std::os::fd::RawFd {
        self.sleep_word.set();
        self.ring.map().raw_fd()
    }

    /// Waits up to `timeout_ms` (-1: forever) for a wake-up raised by the ring's programs (records
    /// alone raise none until the ring is 1/[`SessionOptions::wakeup_divisor`] full). Returns
    /// whether one came.
    pub fn wait_woken(&self, timeout_ms: i32) -> Result<bool> {
        self.sleep_word.set();
        self.ring.wait(timeout_ms)
    }

    /// Whether the ring's programs would wake dtrace now: it said it sleeps
    /// ([`Session::wait_woken`], [`Session::ring_fd_to_sleep_on`]) and no record has woken it
    /// since.
    pub fn sleeping(&self) -> bool {
        self.sleep_word.is_set()
    }

    /// Records that could not be decoded (should stay 0).
    pub fn bad_records(&self) -> u64 {
        self.bad_records
    }

    /// Entry events still waiting for their return-time re-read.
    pub fn held_count(&self) -> usize {
        self.held.len()
    }

    /// The capture time (`bpf_ktime_get_ns`) of the oldest entry event held for its re-read.
    pub fn oldest_held_ns(&self) -> Option<u64> {
        self.held.values().map(|(_, e)| e.ktime_ns).min()
    }

    /// Waits up to `timeout_ms` for records, then delivers every available event to `f`. Returns the
    /// number delivered.
    pub fn poll(&mut self, timeout_ms: i32, f: &mut dyn FnMut(CapturedEvent)) -> Result<usize> {
        self.poll_boxed(timeout_ms, &mut |d| {
            if let Delivery::Event(e) = d {
                f(*e)
            }
        })
    }

    /// [`Session::poll`], delivering the events boxed as they were decoded (no copy of each),
    /// and the records built at the probes, in the ring's order.
    pub fn poll_boxed(&mut self, timeout_ms: i32, f: &mut dyn FnMut(Delivery)) -> Result<usize> {
        self.attach_pending()?;
        let mut n = self.drain_boxed(f);
        if n == 0 && timeout_ms != 0 {
            self.wait_woken(timeout_ms)?;
            n = self.drain_boxed(f);
        }
        Ok(n)
    }

    /// Delivers every available event without waiting.
    pub fn drain(&mut self, f: &mut dyn FnMut(CapturedEvent)) -> usize {
        self.drain_boxed(&mut |d| {
            if let Delivery::Event(e) = d {
                f(*e)
            }
        })
    }

    /// [`Session::drain`], delivering the events boxed as they were decoded, and the records
    /// built at the probes, in the ring's order.
    pub fn drain_boxed(&mut self, f: &mut dyn FnMut(Delivery)) -> usize {
        let mut records = std::mem::take(&mut self.scratch);
        let info = &self.info;
        let mut bad = 0;
        self.ring.consume(
            |b| match decode_record(b, |t| info.get(&t).map(|i| &i.layout)) {
                Ok(r) => records.push(r),
                Err(_) => bad += 1,
            },
        );
        self.bad_records += bad;
        let read_at = monotonic_ns();
        let mut n = 0;
        for mut r in records.drain(..) {
            if let Record::Event(ev) = &mut r {
                if self.info.get(&ev.tag).is_some_and(|i| i.exact_vtime) {
                    ev.vtime_ns = self.vfloor.apply(ev.tid, ev.task, ev.ktime_ns, ev.vtime_ns);
                }
            }
            match r {
                Record::Event(ev) if ev.retry_armed => {
                    self.held.insert((ev.tid, ev.ktime_ns), (read_at, ev));
                }
                Record::Event(mut ev) => {
                    // A user probe has no return-time re-read: its process (held at most
                    // briefly) is read now.
                    if self.info.get(&ev.tag).is_some_and(|i| i.user_probe)
                        && ev.copies.iter().any(|c| c.data.is_err())
                    {
                        self.complete_from_process(&mut ev);
                    }
                    f(Delivery::Event(self.finish(ev)));
                    n += 1;
                }
                Record::Built(b) => {
                    // Its room comes back at the next switch (a speculated record gave
                    // its room back when it was built).
                    if b.spec == 0 {
                        self.room.land(b.cpu as usize, b.data.len() as u64);
                    }
                    f(Delivery::Built(b));
                    n += 1;
                }
                Record::Settle(k) => {
                    f(Delivery::Settle(k));
                    n += 1;
                }
                Record::Update(u) => {
                    f(Delivery::Update(u));
                    n += 1;
                }
                Record::Fault(mut k) => {
                    self.finish_fault(&mut k);
                    f(Delivery::Fault(k));
                    n += 1;
                }
                Record::Retry {
                    tid,
                    ktime_ns,
                    copies,
                    ..
                } => {
                    if let Some((_, mut ev)) = self.held.remove(&(tid, ktime_ns)) {
                        for (orig, again) in ev.copies.iter_mut().zip(copies) {
                            if orig.data.is_err() && again.data.is_ok() {
                                *orig = again;
                            }
                        }
                        f(Delivery::Event(self.finish(ev)));
                        n += 1;
                    }
                }
            }
        }
        self.scratch = records;
        n + self.release_expired(&mut |e| f(Delivery::Event(e)), false)
    }

    /// Delivers every held event now (at the end of a run), completing faulted copies from the
    /// process's memory where it can still be read.
    pub fn flush_held(&mut self, f: &mut dyn FnMut(CapturedEvent)) -> usize {
        self.release_expired(&mut |e| f(*e), true)
    }

    /// [`Session::flush_held`], delivering the events boxed.
    pub fn flush_held_boxed(&mut self, f: &mut dyn FnMut(Box<CapturedEvent>)) -> usize {
        self.release_expired(f, true)
    }

    fn release_expired(&mut self, f: &mut dyn FnMut(Box<CapturedEvent>), all: bool) -> usize {
        if self.held.is_empty() {
            return 0;
        }
        let now = monotonic_ns();
        let wait = self.opts.retry_wait_ns;
        let mut keys: Vec<(u32, u64)> = self
            .held
            .iter()
            .filter(|(_, (read_at, _))| all || now.saturating_sub(*read_at) > wait)
            .map(|(k, _)| *k)
            .collect();
        keys.sort_by_key(|k| k.1);
        let mut n = 0;
        for k in keys {
            if let Some((_, mut ev)) = self.held.remove(&k) {
                self.complete_from_process(&mut ev);
                f(self.finish(ev));
                n += 1;
            }
        }
        n
    }

    /// Completes the user copies of `ev` that faulted at the probe (memory not paged in) from the
    /// process's memory, where it can still be read.
    fn complete_from_process(&self, ev: &mut CapturedEvent) {
        let sizes: Vec<usize> = self
            .info
            .get(&ev.tag)
            .map(|i| i.layout.copies.iter().map(|c| c.size).collect())
            .unwrap_or_default();
        for (c, cap) in ev.copies.iter_mut().zip(sizes) {
            if c.data.is_err() && c.kind.is_user() {
                // A copy sized at the probe: no more than the probe would have taken.
                let cap = match c.requested {
                    Some(r) if c.kind.is_string() => cap.saturating_sub(1).min(r as usize),
                    Some(r) => cap.min(r as usize),
                    None => cap,
                };
                if let Ok(bytes) = crate::process::read_memory(ev.pid, c.addr, c.kind, cap) {
                    c.data = Ok(bytes);
                    c.source = CopySource::ProcessMemory;
                }
            }
        }
    }

    fn finish(&mut self, mut ev: Box<CapturedEvent>) -> Box<CapturedEvent> {
        ev.walltime_ns = self.walltime_of(ev.ktime_ns);
        if let Some(info) = self.info.get(&ev.tag) {
            if info.syscall_return {
                ev.errno = errno_of(ev.args[0]);
            }
            if info.identity_from_fields && ev.pid == 0 && ev.tid != 0 {
                let tid = ev.tid;
                ev.pid = *self
                    .tgid_of
                    .entry(tid)
                    .or_insert_with(|| crate::process::tgid_of(tid).unwrap_or(tid));
            }
        }
        if ev.ppid == 0 && ev.pid != 0 {
            ev.ppid = self.ppid_of(ev.pid);
        }
        ev
    }

    /// Completes a fault of a clause run at the probe as [`Self::finish`] completes an event:
    /// the firing context its ERROR clauses see is the faulting thread's, as a firing's is.
    fn finish_fault(&mut self, k: &mut crate::capture::record::KernelFault) {
        k.walltime_ns = self.walltime_of(k.ktime_ns);
        if self.info.get(&k.tag).is_some_and(|i| i.syscall_return) {
            k.errno = errno_of(k.arg0);
        }
        if k.ppid == 0 && k.pid != 0 {
            k.ppid = self.ppid_of(k.pid);
        }
    }

    /// `walltimestamp` of the kernel's clock `ktime_ns`.
    fn walltime_of(&self, ktime_ns: u64) -> u64 {
        (ktime_ns as i64).saturating_add(self.wall_offset_ns).max(0) as u64
    }

    /// The parent of process `pid` (remembered), from `/proc` where the probe could not read it.
    fn ppid_of(&mut self, pid: u32) -> u32 {
        *self
            .ppid_of
            .entry(pid)
            .or_insert_with(|| crate::process::ppid_of(pid).unwrap_or(0))
    }
}

/// The `errno` a syscall returning `ret` (its return probe's `arg0`) sets: 0 on success.
fn errno_of(ret: u64) -> i32 {
    let ret = ret as i64;
    if (-4095..0).contains(&ret) {
        (-ret) as i32
    } else {
        0
    }
}

/// What a session delivers from its ring, in order.
#[derive(Debug)]
pub enum Delivery {
    /// A probe firing, for the clauses that run in dtrace.
    Event(Box<CapturedEvent>),
    /// An ECB's record built at the probe, for the principal buffer.
    Built(crate::capture::record::BuiltRecord),
    /// A fault of a clause run at the probe, for the framework to report.
    Fault(crate::capture::record::KernelFault),
    /// `commit()` or `discard()` of a speculation kept in the kernel.
    Settle(crate::capture::record::SpecSettle),
    /// An aggregation update whose user stack key dtrace walks.
    Update(Box<crate::capture::record::DeferredUpdate>),
}

/// Generates and loads the capture program of a probe. When the kernel refuses the program with its
/// kernel aggregations or translated predicates (a verifier limit), the probe does without them
/// (aggregations first, then predicates: it records every firing, as it would without them) and
/// the report says so: the user never sees a verifier log for translated code.
#[allow(clippy::too_many_arguments)]
fn load_capture(
    kind: ProgKind,
    shape: &ProbeShape,
    spec: &CaptureSpec,
    layout: &RecordLayout,
    tag: u32,
    fds: &MapFds,
    obj: &str,
    name: &str,
) -> Result<(Program, CaptureReport, Vec<crate::bpf::Insn>)> {
    let refused = |e: &LinuxError| {
        let why = e.to_string();
        dtrace_ebpf::translate::Untranslatable::Refused(why.lines().next().unwrap_or("").into())
    };
    let (insns, report) =
        match crate::capture::codegen::gen_capture_reporting(shape, spec, layout, tag, fds) {
            // A program eBPF cannot express (its translated code too large for a jump's
            // offset): the probe does without that code, as when the kernel refuses it.
            Err(LinuxError::Asm(e)) if spec.record_path_lacks.is_none() => {
                let why = dtrace_ebpf::translate::Untranslatable::Asm(format!(
                    "{e}: the probe's program is too large"
                ));
                let refuse = |n: usize| (0..n).map(|_| Err(why.clone())).collect::<Vec<_>>();
                let plain = match (&spec.aggs, &spec.filter) {
                    (Some(_), _) => CaptureSpec {
                        aggs: None,
                        ..spec.clone()
                    },
                    (None, Some(_)) => CaptureSpec {
                        filter: None,
                        ..spec.clone()
                    },
                    (None, None) => return Err(LinuxError::Asm(e)),
                };
                let (prog, mut report, insns) =
                    load_capture(kind, shape, &plain, layout, tag, fds, obj, name)?;
                match (&spec.aggs, &spec.filter) {
                    (Some(k), _) => report.aggs = refuse(k.clauses.len()),
                    (None, Some(f)) => report.filter = refuse(f.predicates.len()),
                    (None, None) => {}
                }
                return Ok((prog, report, insns));
            }
            // Without its kernel code no clause is served (see `CaptureSpec::record_path_lacks`).
            Err(LinuxError::Asm(e)) => {
                return Err(LinuxError::NotYetSupported(format!(
                    "{} (the probe's program is too large: {e})",
                    spec.record_path_lacks.as_deref().unwrap_or_default(),
                )))
            }
            r => r?,
        };
    let aggregates = report.aggs.iter().any(|r| r.is_ok());
    let filtered = !report.filter.is_empty() && report.filter.iter().all(|r| r.is_ok());
    match Program::load(kind, &insns, obj, name) {
        // Without its kernel code no clause is served (see `CaptureSpec::record_path_lacks`).
        Err(e) if spec.record_path_lacks.is_some() => Err(LinuxError::NotYetSupported(format!(
            "{} (the kernel refused the clauses' code: {})",
            spec.record_path_lacks.as_deref().unwrap_or_default(),
            e.to_string().lines().next().unwrap_or_default()
        ))),
        Err(e) if aggregates => {
            let plain = CaptureSpec {
                aggs: None,
                ..spec.clone()
            };
            let (prog, mut plain_report, insns) =
                load_capture(kind, shape, &plain, layout, tag, fds, obj, name)?;
            let why = refused(&e);
            plain_report.aggs = report.aggs.iter().map(|_| Err(why.clone())).collect();
            Ok((prog, plain_report, insns))
        }
        Err(e) if filtered => {
            let plain = CaptureSpec {
                filter: None,
                aggs: None,
                ..spec.clone()
            };
            let (insns, _) =
                crate::capture::codegen::gen_capture_reporting(shape, &plain, layout, tag, fds)?;
            let prog = Program::load(kind, &insns, obj, name)?;
            let why = refused(&e);
            let filter = report.filter.iter().map(|_| Err(why.clone())).collect();
            Ok((
                prog,
                CaptureReport {
                    filter,
                    ..CaptureReport::default()
                },
                insns,
            ))
        }
        r => Ok((r?, report, insns)),
    }
}
