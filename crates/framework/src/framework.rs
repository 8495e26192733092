//! The [`Framework`]: one tracing session (DTrace's `dtrace_state_t`). The consumer creates it with
//! options, registers providers, enables programs (getting EPID and aggregation descriptions back),
//! calls [`Framework::go`] (which fires BEGIN), feeds probe firings ([`Framework::fire`], events sent
//! from other threads through an [`EventSender`] and processed by [`Framework::process_events`], timers by
//! [`Framework::poll`]), takes buffer and aggregation snapshots, reads the status, and finally calls
//! [`Framework::stop`] (which fires END).
//!
//! Threads: the framework is driven by one thread (the consumer's); it is `Send` but not shared. Providers
//! that see events on other threads send them through a cloned [`EventSender`]; they are fired in the
//! order received, each on the CPU it names. This keeps probe context single-threaded and lock-free.

use crate::aggregate::AggBuffer;
use crate::buffer::PrincipalBuffer;
use crate::context::{CpuPlace, FiringContext};
use crate::error::FrameworkError;
use crate::layout::{layout_ecb, EcbLayout};
use crate::options::{BufResize, Options};
use crate::provider::{desc_string, ProbeRegistry, Provider, ProviderAttributes};
use crate::providers::dtrace::{DtraceProvider, BEGIN, END, ERROR};
use crate::providers::profile::ProfileProvider;
use crate::records::{AggDesc, AggRecord, AggSnapshot, BufferSnapshot, EprobeDesc, ProbeInfo};
use crate::speculation::Speculations;
use dtrace_dif::object::DifObject;
use dtrace_dif::program::{ActionDesc, ActionKind, ProbeDesc, Program};
use dtrace_dif::vm::{Machine, Memory, NoMemory, Prepared, VarState, VmOptions};
use dtrace_dif::{Instr, Subr};
use std::sync::mpsc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Where time comes from: `timestamp` (monotonic ns) and `walltimestamp` (ns since the epoch).
pub trait Clock: Send {
    /// Monotonic nanoseconds.
    fn now(&self) -> u64;
    /// Wall-clock nanoseconds since 1970.
    fn wall(&self) -> u64;
}

/// A reader of the calling thread's on-CPU nanoseconds (for `vtimestamp` in the consumer's
/// context; see [`Framework::set_consumer_vtime`]).
type ThreadCpuClock = Box<dyn Fn() -> u64 + Send>;

/// The system clock.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
}

impl Default for SystemClock {
    fn default() -> SystemClock {
        SystemClock {
            origin: Instant::now(),
        }
    }
}

impl Clock for SystemClock {
    fn now(&self) -> u64 {
        // Offset by one second so that no firing has timestamp 0.
        self.origin.elapsed().as_nanos() as u64 + crate::options::NANOSEC
    }
    fn wall(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    }
}

/// A clock that moves only when told (tests, replay).
#[derive(Debug, Clone, Default)]
pub struct ManualClock(pub std::sync::Arc<std::sync::atomic::AtomicU64>);

impl ManualClock {
    /// Sets the time.
    pub fn set(&self, ns: u64) {
        self.0.store(ns, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
    fn wall(&self) -> u64 {
        self.now()
    }
}

/// A probe firing sent from another thread.
pub struct ProbeEvent {
    /// Probe id.
    pub probe: u32,
    /// CPU it fired on.
    pub cpu: u32,
    /// Its context.
    pub ctx: FiringContext,
    /// Memory captured with it (reads outside it fault), if any.
    pub memory: Option<Box<dyn Memory + Send>>,
}

/// Sends probe firings to the framework from any thread.
#[derive(Clone)]
pub struct EventSender(mpsc::Sender<ProbeEvent>);

impl EventSender {
    /// Queues a firing; returns `false` if the framework is gone.
    pub fn send(&self, ev: ProbeEvent) -> bool {
        self.0.send(ev).is_ok()
    }
}

/// A destructive action the framework cannot carry out itself; the caller (the `linux` layer) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DestructiveRequest {
    /// `stop()`: stop process `pid`.
    Stop {
        /// Process.
        pid: u64,
    },
    /// `raise(sig)`: send `signal` to thread `tid` of `pid`.
    Raise {
        /// Process.
        pid: u64,
        /// Thread.
        tid: u64,
        /// Signal number.
        signal: u64,
    },
}

/// Activity of the session (`dtrace_activity_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// Not started.
    Inactive,
    /// Tracing.
    Active,
    /// Stopped (END has fired).
    Stopped,
}

/// What an enabling produced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Enabling {
    /// One per enabled probe (ECB), in EPID order.
    pub eprobes: Vec<EprobeDesc>,
    /// One per aggregating action of each ECB.
    pub aggs: Vec<AggDesc>,
    /// The probes enabled, in id order, without duplicates.
    pub probes: Vec<ProbeInfo>,
    /// Sum over the program's ECB descriptions of the probes each matched ("matched N probes").
    pub matched: usize,
}

/// Cumulative counters (the consumer reports the increase since it last looked, as `dtrace` does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Status {
    /// Activity.
    pub activity: Option<Activity>,
    /// `exit()` was called; the value of the first call.
    pub exit_status: Option<i32>,
    /// A fill-policy buffer filled.
    pub filled: bool,
    /// Faults in probe context.
    pub errors: u64,
    /// Faults in ERROR probe clauses.
    pub dblerrors: u64,
    /// Dynamic variable drops (stores that found the space full; freed space is reusable at once,
    /// as in DTrace for Linux, so no drop waits on a dirty or rinsing list).
    pub dynvar_drops: u64,
    /// Speculative records dropped (speculation buffer full).
    pub spec_drops: u64,
    /// `speculation()` failures with busy buffers.
    pub spec_busy: u64,
    /// `speculation()` failures with no buffer available.
    pub spec_unavail: u64,
}

/// One ECB in the framework.
#[derive(Clone)]
pub(crate) struct Ecb {
    pub(crate) epid: u32,
    /// Statement id of the clause (DTrace for Linux's `dt_clause_N`), counted over every program
    /// enabled in this session.
    pub(crate) clause: u32,
    pub(crate) probe: u32,
    /// Where each DIF object of the clause starts when the predicate's and the actions' code are
    /// counted as one sequence (DTrace for Linux compiles a clause into one program): the predicate
    /// at 0, then action `i` at `code_base[i]`; the last entry is the clause's length.
    pub(crate) code_base: Vec<u64>,
    /// The predicate, decoded once for the interpreter.
    pub(crate) predicate: Option<Prepared>,
    pub(crate) actions: Vec<ActionDesc>,
    /// Each action's DIF object, decoded once for the interpreter (`None` where it has none).
    pub(crate) difos: Vec<Option<Prepared>>,
    pub(crate) layout: EcbLayout,
    /// Framework aggregation id of each of `layout.aggs`.
    pub(crate) aggids: Vec<u32>,
    /// The clause runs where the probe fires, not here (see [`Framework::run_elsewhere`]).
    pub(crate) elsewhere: bool,
    /// Its `raise()` and `stop()` are sent where the probe fires (see
    /// [`Framework::signal_elsewhere`]).
    pub(crate) signals_elsewhere: bool,
    /// Its predicate has side effects ([`has_side_effects`]): the record's room is taken before
    /// the predicate runs, not after.
    pub(crate) reserve_before_predicate: bool,
}

/// An enabled clause as [`Framework::enable_new`] matches it again.
#[derive(Clone)]
struct Retained {
    clause: u32,
    ecb: dtrace_dif::program::EcbDesc,
    layout: EcbLayout,
}

/// One CPU's buffers.
pub(crate) struct CpuState {
    pub(crate) principal: PrincipalBuffer,
    pub(crate) aggs: AggBuffer,
    /// Chill accounting: start of the current interval and nanoseconds chilled in it.
    pub(crate) chill_mark: u64,
    pub(crate) chilled: u64,
}

/// One tracing session.
pub struct Framework {
    pub(crate) options: Options,
    pub(crate) ncpus: u32,
    pub(crate) registry: ProbeRegistry,
    /// Taken out of the framework while a probe fires (so probe context can read them while mutating the
    /// rest), and put back after.
    pub(crate) ecbs: Vec<Ecb>,
    /// ECB indices per probe id.
    pub(crate) probe_ecbs: Vec<Vec<usize>>,
    pub(crate) enabled: Vec<u32>,
    pub(crate) cpus: Vec<CpuState>,
    pub(crate) specs: Speculations,
    pub(crate) vars: VarState,
    /// The largest tuple and largest dynamic variable of the enabled programs (see
    /// `Program::max_tuple_size`): what each dynamic variable costs.
    dynvar_sizes: (u32, u32),
    pub(crate) machine: Machine,
    pub(crate) error_machine: Machine,
    pub(crate) clock: Box<dyn Clock>,
    pub(crate) activity: Activity,
    pub(crate) status: Status,
    pub(crate) in_error: bool,
    pub(crate) firing_end: bool,
    pub(crate) record: Vec<u8>,
    pub(crate) key: Vec<u8>,
    /// End of the significant bytes in `key` (kept across the actions of an ECB).
    pub(crate) key_end: usize,
    pub(crate) rng: u64,
    pub(crate) requests: Vec<DestructiveRequest>,
    pub(crate) next_aggid: u32,
    /// Statement id the next enabled clause gets.
    pub(crate) next_clause: u32,
    /// Every enabled clause, kept for matching its description again ([`Framework::enable_new`]).
    retained: Vec<Retained>,
    pub(crate) last_clean: u64,
    /// The context BEGIN and END fire in (the consumer's process).
    pub(crate) consumer_ctx: FiringContext,
    /// The memory BEGIN and END read (none: every read faults).
    consumer_mem: Option<Box<dyn Memory + Send>>,
    /// Reads the on-CPU nanoseconds of the thread firing consumer-context probes (their
    /// `vtimestamp`), when the embedder supplies it.
    consumer_vtime: Option<ThreadCpuClock>,
    /// Where each CPU sits (`chip`, `lgrp`), by CPU number, when the embedder told.
    pub(crate) cpu_places: Vec<CpuPlace>,
    /// Whether faults also write [`crate::records::FAULT_EPID`] records.
    pub(crate) fault_records: bool,
    /// An enabled ECB has a destructive action (checked against the option at `go`).
    destructive_enabled: bool,
    tx: mpsc::Sender<ProbeEvent>,
    rx: mpsc::Receiver<ProbeEvent>,
}

/// Whether a DIF object calls a destructive subroutine (`copyout`, `copyoutstr`): it writes into
/// the traced process's memory.
pub fn calls_destructive(d: &DifObject) -> bool {
    d.subrs_called().any(Subr::is_destructive)
}

/// Whether running a DIF object changes anything beyond its result: it stores to a variable
/// (global, thread-local, clause-local, an associative array's element) or to memory, or calls a
/// subroutine that does (`speculation()` takes a speculation, `copyout()`/`copyoutstr()` write
/// into the traced process). A clause's record room is taken before its predicate runs when the
/// predicate has such effects (DTrace reserves before the predicate); a predicate without them
/// runs first, on both paths (the kernel's too, where a false predicate must cost no record):
/// skipping it or not leaves everything the same.
pub fn has_side_effects(d: &DifObject) -> bool {
    d.text.iter().any(|&w| match Instr::decode(w) {
        Ok(Instr::Store { .. } | Instr::StoreVar { .. }) => true,
        Ok(Instr::Call { subr, .. }) => {
            Subr::from_u16(subr).is_some_and(|s| s == Subr::Speculation || s.is_destructive())
        }
        _ => false,
    })
}

impl Framework {
    /// A session over `ncpus` CPUs with these options, with the `dtrace` and `profile` providers
    /// registered (probes 1-3 are BEGIN, END, ERROR).
    pub fn new(options: Options, ncpus: u32) -> Framework {
        let (tx, rx) = mpsc::channel();
        let ncpus = ncpus.max(1);
        let mut registry = ProbeRegistry::default();
        // Registering into an empty registry cannot collide.
        let _ = registry.register(Box::new(DtraceProvider));
        let _ = registry.register(Box::new(ProfileProvider::new()));
        Framework {
            specs: Speculations::new(0, ncpus as usize, 0),
            vars: VarState::new(VmOptions::default()),
            dynvar_sizes: (0, 0),
            options,
            ncpus,
            registry,
            ecbs: Vec::new(),
            probe_ecbs: Vec::new(),
            enabled: Vec::new(),
            cpus: Vec::new(),
            machine: Machine::new(),
            error_machine: Machine::new(),
            clock: Box::new(SystemClock::default()),
            activity: Activity::Inactive,
            status: Status::default(),
            in_error: false,
            firing_end: false,
            record: Vec::new(),
            key: Vec::new(),
            key_end: 4,
            rng: 0x9e37_79b9_7f4a_7c15,
            requests: Vec::new(),
            next_aggid: 1,
            next_clause: 0,
            retained: Vec::new(),
            last_clean: 0,
            consumer_ctx: FiringContext::default(),
            consumer_mem: None,
            consumer_vtime: None,
            cpu_places: Vec::new(),
            destructive_enabled: false,
            fault_records: false,
            tx,
            rx,
        }
    }

    /// Sets the context `dtrace:::BEGIN`, `dtrace:::END` and the timer probes (tick-N, profile-N, run
    /// on the consumer's timer thread) fire in: in DTrace BEGIN and END fire in the consumer
    /// process, so `pid`, `tid`, `execname`... are the consumer's (the CLI fills them in).
    pub fn set_consumer_context(&mut self, ctx: FiringContext) {
        self.consumer_ctx = ctx;
    }

    /// Sets the memory BEGIN and END read (kernel memory through `curthread`, the consumer's own
    /// user memory); without it their reads fault.
    pub fn set_consumer_memory(&mut self, mem: Box<dyn Memory + Send>) {
        self.consumer_mem = Some(mem);
    }

    /// Fires BEGIN or END in the consumer's context, with the consumer's memory.
    fn fire_consumer_probe(&mut self, probe: u32) {
        let cpu = self.consumer_cpu();
        let ctx = self.consumer_context();
        match self.consumer_mem.take() {
            Some(mut m) => {
                self.fire_with_memory(probe, cpu, &ctx, m.as_mut());
                self.consumer_mem = Some(m);
            }
            None => self.fire(probe, cpu, &ctx),
        }
    }

    /// Sets how `vtimestamp` is read for the probes that fire in the consumer's context (BEGIN,
    /// END, timer probes the framework runs): `f` returns the calling thread's on-CPU nanoseconds
    /// (the framework makes no system calls itself). Without it their `vtimestamp` is the consumer
    /// context's.
    pub fn set_consumer_vtime(&mut self, f: Box<dyn Fn() -> u64 + Send>) {
        self.consumer_vtime = Some(f);
    }

    /// Where each CPU sits, by CPU number (`chip` and `lgrp`; the framework reads no topology
    /// itself, and a CPU not told of is on chip 0, node 0).
    pub fn set_cpu_places(&mut self, places: Vec<CpuPlace>) {
        self.cpu_places = places;
    }

    /// The consumer context of a firing now, with its `vtimestamp` read.
    fn consumer_context(&self) -> FiringContext {
        let mut ctx = self.consumer_ctx.clone();
        if let Some(f) = &self.consumer_vtime {
            ctx.vtimestamp = f();
        }
        ctx
    }

    /// Whether faults also write a [`crate::records::FAULT_EPID`] record into the principal buffer
    /// (default off). A consumer that enables DTrace's own ERROR program
    /// (`dtrace:::ERROR{trace(arg1);trace(arg2);trace(arg3);trace(arg4);trace(arg5);}`, as libdtrace
    /// does) gets every fault through it and leaves this off; a consumer that does not can turn it on.
    pub fn set_fault_records(&mut self, on: bool) {
        self.fault_records = on;
    }

    /// Replaces the clock.
    pub fn set_clock(&mut self, clock: Box<dyn Clock>) {
        self.clock = clock;
    }

    /// Number of CPUs.
    pub fn ncpus(&self) -> u32 {
        self.ncpus
    }

    /// The options in effect (after [`Framework::go`], sizes are the ones actually allocated).
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Sets a framework option. Before `go` any option; afterwards only the rates.
    pub fn set_option(&mut self, name: &str, value: Option<&str>) -> Result<(), FrameworkError> {
        if self.activity != Activity::Inactive
            && !crate::options::RUNTIME_OPTIONS.contains(&name)
            && crate::options::FRAMEWORK_OPTIONS.contains(&name)
        {
            return Err(FrameworkError::AlreadyActive);
        }
        self.options.set(name, value)?;
        Ok(())
    }

    /// Makes enabled `profile` probes fire from `driver` (perf events) instead of the framework's
    /// timers. Call before enabling any profile probe.
    pub fn set_profile_driver(
        &mut self,
        driver: Box<dyn crate::providers::profile::ProfileDriver>,
    ) {
        self.registry
            .replace(Box::new(ProfileProvider::with_driver(driver)));
    }

    /// Registers a provider; it creates its standing probes now.
    pub fn register_provider(&mut self, p: Box<dyn Provider>) -> Result<(), FrameworkError> {
        self.registry.register(p)?;
        Ok(())
    }

    /// The probes matching a description (after letting providers create matching probes), for
    /// `dtrace -l`.
    pub fn list_probes(&mut self, desc: &ProbeDesc) -> Vec<ProbeInfo> {
        self.registry
            .matching(desc)
            .into_iter()
            .filter_map(|id| self.registry.probe(id).map(|p| p.info.clone()))
            .collect()
    }

    /// A probe by id.
    pub fn probe_info(&self, id: u32) -> Option<&ProbeInfo> {
        self.registry.probe(id).map(|p| &p.info)
    }

    /// Stability attributes of a provider.
    pub fn provider_attributes(&self, provider: &str) -> Option<ProviderAttributes> {
        self.registry.attributes(provider)
    }

    /// Typed argument `index` of probe `id`, if its provider describes one.
    pub fn arg_desc(&self, id: u32, index: u32) -> Option<crate::provider::ArgDesc> {
        let info = &self.registry.probe(id)?.info;
        self.registry.provider_of(id)?.arg_desc(info, index)
    }

    /// A sender providers on other threads use to deliver firings.
    pub fn event_sender(&self) -> EventSender {
        EventSender(self.tx.clone())
    }

    /// Enables a program: applies its option pragmas, lays out and creates an ECB for every probe each
    /// ECB description matches, and enables those probes. A description matching nothing is an error
    /// unless `allow_zero_matches` (`-Z`). Nothing is enabled when an error is returned.
    pub fn enable(
        &mut self,
        program: &Program,
        allow_zero_matches: bool,
    ) -> Result<Enabling, FrameworkError> {
        if self.activity != Activity::Inactive {
            return Err(FrameworkError::AlreadyActive);
        }
        let mut opts = self.options.clone();
        for (name, value) in &program.options {
            match opts.set(name, value.as_deref()) {
                Ok(()) | Err(crate::options::OptionError::UnknownOption(_)) => {}
                Err(source) => {
                    return Err(FrameworkError::PragmaOption {
                        name: name.clone(),
                        source,
                    })
                }
            }
        }
        // Check every clause before creating anything.
        let mut planned = Vec::new();
        let mut matched = 0usize;
        let mut has_destructive = false;
        for (i, e) in program.ecbs.iter().enumerate() {
            let desc = desc_string(&e.probe);
            for a in &e.actions {
                if matches!(a.kind, ActionKind::Breakpoint | ActionKind::Panic) {
                    let what = if a.kind == ActionKind::Panic {
                        "panic()"
                    } else {
                        "breakpoint()"
                    };
                    return Err(FrameworkError::Unsupported(format!("{what} on Linux")));
                }
                // destructive actions are refused when tracing starts (`go`), as DTrace does
                has_destructive |=
                    a.kind.is_destructive() || a.difo.as_ref().is_some_and(calls_destructive);
            }
            has_destructive |= e.predicate.as_ref().is_some_and(calls_destructive);
            // Every DIF object passes the verifier before anything is enabled.
            let objects = e
                .predicate
                .iter()
                .chain(e.actions.iter().filter_map(|a| a.difo.as_ref()));
            for obj in objects {
                if let Err(err) = dtrace_dif::verify::verify(obj) {
                    return Err(FrameworkError::InvalidDif {
                        desc: desc.clone(),
                        reason: err.to_string(),
                    });
                }
            }
            let layout = layout_ecb(e, &opts).map_err(|source| FrameworkError::Layout {
                desc: desc.clone(),
                source,
            })?;
            let ids = self.registry.matching(&e.probe);
            if ids.is_empty() && !allow_zero_matches {
                return Err(FrameworkError::NoMatch { desc, line: e.line });
            }
            matched += ids.len();
            planned.push((i, layout, ids));
        }
        self.options = opts;
        self.destructive_enabled |= has_destructive;
        self.dynvar_sizes = (
            self.dynvar_sizes.0.max(program.max_tuple_size),
            self.dynvar_sizes.1.max(program.max_dvar_size),
        );
        let mut out = Enabling {
            matched,
            ..Enabling::default()
        };
        // Enable the probes not enabled yet; if a provider refuses, undo and create nothing.
        let mut newly: Vec<u32> = Vec::new();
        for (_, _, ids) in &planned {
            for &id in ids {
                if !self.enabled.contains(&id) && !newly.contains(&id) {
                    newly.push(id);
                }
            }
        }
        // In probe id order, not clause order: probes that fire at one kernel point (a new task's
        // `proc:::start` and `lwp-start`) then fire in the order their provider lists them, which
        // is the order DTrace fires them in, whichever clause names them first.
        newly.sort_unstable();
        for (n, &id) in newly.iter().enumerate() {
            if let Err(e) = self.registry.enable(id) {
                for &done in &newly[..n] {
                    self.registry.disable(done);
                }
                return Err(e.into());
            }
        }
        self.enabled.extend_from_slice(&newly);
        for (i, layout, ids) in planned {
            let clause = self.next_clause + i as u32;
            self.retained.push(Retained {
                clause,
                ecb: program.ecbs[i].clone(),
                layout: layout.clone(),
            });
            for id in ids {
                self.create_ecb(&program.ecbs[i], clause, &layout, id, &mut out);
            }
        }
        self.next_clause += program.ecbs.len() as u32;
        out.probes = self.enabled_probe_infos();
        Ok(out)
    }

    /// The probes with ECBs, in id order.
    fn enabled_probe_infos(&self) -> Vec<ProbeInfo> {
        let mut probes: Vec<u32> = self.ecbs.iter().map(|e| e.probe).collect();
        probes.sort_unstable();
        probes.dedup();
        probes
            .into_iter()
            .filter_map(|id| self.probe_info(id).cloned())
            .collect()
    }

    /// Creates the ECB of clause `e` (statement id `clause`, laid out as `layout`) on probe `id`,
    /// adding its enabled-probe and aggregation descriptions to `out`.
    fn create_ecb(
        &mut self,
        e: &dtrace_dif::program::EcbDesc,
        clause: u32,
        layout: &EcbLayout,
        id: u32,
        out: &mut Enabling,
    ) {
        let epid = self.ecbs.len() as u32 + 1;
        let mut aggids = Vec::new();
        for a in &layout.aggs {
            let aggid = self.next_aggid;
            self.next_aggid += 1;
            aggids.push(aggid);
            out.aggs.push(AggDesc {
                aggid,
                varid: e.actions[a.action].uarg as u32,
                epid,
                recs: a.recs.clone(),
            });
        }
        out.eprobes.push(EprobeDesc {
            epid,
            probe_id: id,
            clause,
            size: layout.size,
            recs: layout.principal_recs(),
        });
        if self.probe_ecbs.len() <= id as usize {
            self.probe_ecbs.resize(id as usize + 1, Vec::new());
        }
        self.probe_ecbs[id as usize].push(self.ecbs.len());
        self.ecbs.push(Ecb {
            epid,
            clause,
            probe: id,
            code_base: code_base(e),
            predicate: e.predicate.clone().map(Prepared::new),
            actions: e.actions.clone(),
            difos: e
                .actions
                .iter()
                .map(|a| a.difo.clone().map(Prepared::new))
                .collect(),
            layout: layout.clone(),
            aggids,
            elsewhere: false,
            signals_elsewhere: false,
            reserve_before_predicate: e.predicate.as_ref().is_some_and(has_side_effects),
        });
    }

    /// Matches the descriptions of every clause enabled so far again, as DTrace does when a
    /// provider's probes appear after its enablings (the pid and USDT probes of a library a
    /// traced process loads): each probe a description matches now and that has no ECB of that
    /// clause yet gets one, and is enabled. Only the descriptions `only` selects are matched (the
    /// caller knows which providers may have new probes). Returns what was created (nothing:
    /// empty); tracing may be under way. A provider that refuses a probe leaves the ECBs made
    /// before it in place.
    pub fn enable_new(
        &mut self,
        only: &dyn Fn(&ProbeDesc) -> bool,
    ) -> Result<Enabling, FrameworkError> {
        let mut out = Enabling::default();
        let have: std::collections::HashSet<(u32, u32)> =
            self.ecbs.iter().map(|e| (e.clause, e.probe)).collect();
        let retained = std::mem::take(&mut self.retained);
        let mut result: Result<(), FrameworkError> = Ok(());
        for r in retained.iter().filter(|r| only(&r.ecb.probe)) {
            for id in self.registry.matching(&r.ecb.probe) {
                if have.contains(&(r.clause, id)) {
                    continue;
                }
                if !self.enabled.contains(&id) {
                    if let Err(e) = self.registry.enable(id) {
                        result = Err(e.into());
                        break;
                    }
                    self.enabled.push(id);
                }
                out.matched += 1;
                self.create_ecb(&r.ecb, r.clause, &r.layout, id, &mut out);
            }
            if result.is_err() {
                break;
            }
        }
        self.retained = retained;
        result?;
        if !out.eprobes.is_empty() {
            out.probes = self.enabled_probe_infos();
        }
        Ok(out)
    }

    /// The statement id the next enabled clause gets (the first clause of the next
    /// [`Framework::enable`]).
    pub fn next_clause(&self) -> u32 {
        self.next_clause
    }

    /// Marks the enabled probe `epid` as run where its probe fires (the provider computes its
    /// aggregations in the kernel): its firings no longer run it here. Its aggregations keep
    /// their ids and descriptions, and the provider feeds their snapshots to the consumer.
    pub fn run_elsewhere(&mut self, epid: u32) {
        if let Some(e) = self.ecb_mut(epid) {
            e.elsewhere = true;
        }
    }

    /// ECB `epid` (EPIDs count from 1).
    fn ecb(&self, epid: u32) -> Option<&Ecb> {
        self.ecbs.get((epid as usize).checked_sub(1)?)
    }

    /// ECB `epid`, to change.
    fn ecb_mut(&mut self, epid: u32) -> Option<&mut Ecb> {
        self.ecbs.get_mut((epid as usize).checked_sub(1)?)
    }

    /// Marks ECB `epid`'s `raise()` and `stop()` as sent where its probe fires, when its
    /// predicate holds there: the clause still runs here and records the firing, and queues
    /// no [`DestructiveRequest`].
    pub fn signal_elsewhere(&mut self, epid: u32) {
        if let Some(e) = self.ecb_mut(epid) {
            e.signals_elsewhere = true;
        }
    }

    /// The description of an enabled probe.
    pub fn eprobe(&self, epid: u32) -> Option<EprobeDesc> {
        let e = self.ecb(epid)?;
        Some(EprobeDesc {
            epid,
            probe_id: e.probe,
            clause: e.clause,
            size: e.layout.size,
            recs: e.layout.principal_recs(),
        })
    }

    /// Allocates a buffer of `size` bytes, halving under `bufresize=auto` until it can.
    fn alloc(
        &self,
        what: &'static str,
        size: u64,
        min: u64,
    ) -> Result<(Vec<u8>, u64), FrameworkError> {
        let mut size = size & !7;
        loop {
            if size < min {
                return Err(FrameworkError::BufferTooSmall);
            }
            let mut v: Vec<u8> = Vec::new();
            match usize::try_from(size)
                .ok()
                .filter(|_| v.try_reserve_exact(size as usize).is_ok())
            {
                Some(_) => return Ok((v, size)),
                None if self.options.bufresize == BufResize::Auto && size > 8 => {
                    size = (size / 2) & !7
                }
                None => return Err(FrameworkError::NoMemory { what, size }),
            }
        }
    }

    /// Starts tracing: allocates buffers and fires BEGIN (before any other probe).
    pub fn go(&mut self) -> Result<(), FrameworkError> {
        if self.activity != Activity::Inactive {
            return Err(FrameworkError::AlreadyActive);
        }
        if let Some(c) = self.options.cpu.filter(|&c| c >= self.ncpus) {
            return Err(FrameworkError::BadCpu(c));
        }
        // DTrace enables destructive ECBs but refuses to start without `destructive` (`-w`)
        if self.destructive_enabled && !self.options.destructive {
            return Err(FrameworkError::Destructive);
        }
        let needed = self
            .ecbs
            .iter()
            .map(|e| {
                let aggs = e.layout.aggs.iter().map(|a| a.needed()).max().unwrap_or(0);
                (e.layout.size as u64).max(aggs)
            })
            .max()
            .unwrap_or(0);
        let needed = crate::buffer::align8(needed as usize) as u64;
        let end_reserve: usize = self
            .probe_ecbs
            .get(END as usize)
            .map(|v| {
                v.iter()
                    .map(|&i| crate::buffer::align8(self.ecbs[i].layout.size as usize))
                    .sum()
            })
            .unwrap_or(0);
        let fill = self.options.bufpolicy == crate::options::BufPolicy::Fill;
        if fill && end_reserve > 0 && end_reserve as u64 + needed > self.options.bufsize & !7 {
            return Err(FrameworkError::EndTooBig);
        }
        let min = if fill {
            end_reserve as u64 + needed
        } else {
            needed
        }
        .max(8);
        // As DTrace for Linux sizes its aggregation map: `aggsize` holds at least one entry of the
        // largest aggregation, or the enabling fails.
        let largest_agg = self
            .ecbs
            .iter()
            .flat_map(|e| e.layout.aggs.iter())
            .map(|a| crate::aggregate::entry_cost(4 + a.key_size as usize, a.value_words))
            .max();
        if largest_agg.is_some_and(|n| self.options.aggsize < n as u64) {
            return Err(FrameworkError::BufferTooSmall);
        }
        let mut cpus = Vec::with_capacity(self.ncpus as usize);
        let mut bufsize = self.options.bufsize;
        for _ in 0..self.ncpus {
            let (data, size) = self.alloc("principal buffer", bufsize, min)?;
            bufsize = size;
            let mut principal = PrincipalBuffer::new(self.options.bufpolicy, size as usize, data);
            principal.set_reserve(end_reserve);
            cpus.push(CpuState {
                principal,
                aggs: AggBuffer::new(self.options.aggsize.min(usize::MAX as u64) as usize),
                chill_mark: 0,
                chilled: 0,
            });
        }
        self.options.bufsize = bufsize;
        self.cpus = cpus;
        self.specs = Speculations::new(
            self.options.nspec as usize,
            self.ncpus as usize,
            self.options.specsize.min(usize::MAX as u64) as usize,
        );
        self.vars = VarState::new(VmOptions {
            strsize: self.options.string_storage() as usize,
            dynvarsize: self.options.dynvarsize.min(usize::MAX as u64) as usize,
            scratch_size: self.options.scratchsize.min(usize::MAX as u64) as usize,
        });
        self.vars
            .dynvars
            .set_entry_size(self.dynvar_entry_size() as usize);
        self.activity = Activity::Active;
        self.last_clean = self.clock.now();
        self.fire_consumer_probe(BEGIN);
        Ok(())
    }

    /// Bytes each dynamic variable costs in `dynvarsize`: the enabled programs' largest tuple and
    /// largest dynamic variable, as DTrace for Linux sizes its map of them; 0 when not known (each
    /// variable then costs its own key and value).
    pub fn dynvar_entry_size(&self) -> u64 {
        dtrace_dif::vm::dynvar::entry_size(self.dynvar_sizes.0, self.dynvar_sizes.1)
    }

    /// The CPU BEGIN and END fire on (the `cpu` option's, else CPU 0).
    pub fn consumer_cpu(&self) -> u32 {
        self.options
            .cpu
            .unwrap_or(0)
            .min(self.ncpus.saturating_sub(1))
    }

    /// Fires END (after every other probe) and stops tracing; probes are disabled.
    pub fn stop(&mut self) -> Result<(), FrameworkError> {
        if self.activity != Activity::Active {
            return Err(FrameworkError::NotActive);
        }
        self.process_events();
        // A speculation committed on a CPU other than the one(s) it speculated on waits for
        // the cleaner (`cleanrate`); tracing stops before its next round, so it runs now, and
        // again after END (whose clauses may commit too), or the committed data would be lost.
        self.clean_speculations();
        self.firing_end = true;
        self.fire_consumer_probe(END);
        self.firing_end = false;
        self.clean_speculations();
        self.activity = Activity::Stopped;
        for id in std::mem::take(&mut self.enabled) {
            self.registry.disable(id);
        }
        Ok(())
    }

    /// Activity.
    pub fn activity(&self) -> Activity {
        self.activity
    }

    /// Fires a probe on `cpu` with no memory to read.
    pub fn fire(&mut self, probe: u32, cpu: u32, ctx: &FiringContext) {
        self.fire_with_memory(probe, cpu, ctx, &mut NoMemory);
    }

    /// Fires a probe on `cpu`, reading memory through `mem`.
    pub fn fire_with_memory(
        &mut self,
        probe: u32,
        cpu: u32,
        ctx: &FiringContext,
        mem: &mut dyn Memory,
    ) {
        // After exit() the session drains, as DTrace's DRAINING state: nothing but END fires (so a
        // batch of due timer firings stops at the one that called exit()).
        let draining = self.status.exit_status.is_some();
        let active = match self.activity {
            Activity::Active if probe == END => self.firing_end,
            Activity::Active => !draining,
            _ => false,
        };
        if !active || cpu >= self.ncpus || self.options.cpu.is_some_and(|c| c != cpu) {
            return;
        }
        if probe == ERROR {
            // Only the framework fires ERROR, on faults.
            return;
        }
        let ecbs = std::mem::take(&mut self.ecbs);
        self.run_probe(&ecbs, probe, cpu, ctx, mem);
        self.ecbs = ecbs;
    }

    /// Commits a record built where its probe fired (the provider ran the clause there, see
    /// [`Framework::run_elsewhere`]): `record` is the ECB's whole record as [`Framework::fire`]
    /// would have built it (EPID, timestamp, data laid out by its record descriptions; bytes
    /// past the ECB's record size are padding and ignored). It goes
    /// to `cpu`'s principal buffer unchanged, under the rules a firing follows: nothing while
    /// tracing is not active or after `exit()` (DTrace's draining), and an `exit()` action in it
    /// ends tracing as the interpreter's would. Its room was taken where the probe fired, before
    /// its clause ran (see [`Framework::record_room_elsewhere`]): it is not refused for lack of
    /// room. Returns whether the
    /// record was kept; a record that names no ECB run elsewhere, or is not its size, is refused
    /// (a bad record).
    pub fn commit_elsewhere(&mut self, cpu: u32, record: &[u8]) -> bool {
        let draining = self.status.exit_status.is_some();
        if self.activity != Activity::Active || draining || cpu >= self.ncpus {
            return false;
        }
        if self.options.cpu.is_some_and(|c| c != cpu) {
            return false;
        }
        let Some(epid) = record
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_ne_bytes)
        else {
            return false;
        };
        let Some(e) = self.ecb(epid) else {
            return false;
        };
        let size = e.layout.size as usize;
        let Some(record) = record.get(..size).filter(|_| e.elsewhere && size >= 12) else {
            return false;
        };
        let exit = e
            .layout
            .actions
            .iter()
            .zip(&e.actions)
            .find(|(_, a)| a.kind == ActionKind::Exit)
            .and_then(|(l, _)| record.get(l.rec.offset as usize..l.rec.offset as usize + 4))
            .and_then(|b| b.try_into().ok())
            .map(i32::from_ne_bytes);
        // Its room in the buffer was taken where the probe fired, before the clause ran (see
        // `Framework::record_room_elsewhere`): it is kept.
        let kept = match self.cpus.get_mut(cpu as usize) {
            Some(c) => {
                c.principal.append_reserved(record);
                true
            }
            None => false,
        };
        if let Some(status) = exit {
            self.status.exit_status = Some(status);
        }
        kept
    }

    /// The room each CPU's principal buffer gives records built where their probe fired (see
    /// [`Framework::commit_elsewhere`]) until the buffers are next switched, indexed by CPU: the
    /// provider takes a record's room there before its clause runs and skips the clause whole
    /// (one drop) when there is none, as DTrace reserves an ECB's room before running it. Call
    /// at `go` and after each switch of the buffers.
    pub fn record_room_elsewhere(&self) -> Vec<u64> {
        self.cpus
            .iter()
            .map(|c| c.principal.room_elsewhere())
            .collect()
    }

    /// Keeps each CPU's principal-buffer room in one account with the place where probes fire
    /// and build records for the same buffers ([`SharedRoom`](crate::buffer::SharedRoom)): the
    /// records built here (by the clauses that do not run there, and ERROR's fault records and
    /// committed speculations) take their room from it too, so that the records of both never
    /// pass a buffer between two switches. Call once tracing has gone (BEGIN's records are in
    /// the buffers, and [`Framework::record_room_elsewhere`] leaves them their room), before the
    /// first grant; `None` ends the sharing.
    pub fn share_room(&mut self, shared: Option<std::sync::Arc<dyn crate::buffer::SharedRoom>>) {
        for (cpu, c) in self.cpus.iter_mut().enumerate() {
            c.principal.share_room(shared.clone(), cpu as u32);
        }
    }

    /// A fill-policy buffer of `cpu` filled where its probes fire (a record found no room
    /// there): it is full here too, and the status says so.
    pub fn fill_elsewhere(&mut self, cpu: u32) {
        if let Some(c) = self.cpus.get_mut(cpu as usize) {
            c.principal.fill();
        }
    }

    /// Records into speculation `id` a record built where its probe fired by a clause that
    /// called `speculate(id)` there (the provider keeps the speculations' states, see
    /// [`Framework::settle_speculation_elsewhere`]), under [`Framework::commit_elsewhere`]'s
    /// rules; the buffer's `specsize` bounds it, counting speculative drops. Returns whether the
    /// record was kept.
    pub fn speculate_elsewhere(&mut self, cpu: u32, id: u64, record: &[u8]) -> bool {
        let draining = self.status.exit_status.is_some();
        if self.activity != Activity::Active || draining || cpu >= self.ncpus {
            return false;
        }
        let Some(e) = record
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_ne_bytes)
            .and_then(|epid| self.ecb(epid))
        else {
            return false;
        };
        let size = e.layout.size as usize;
        let Some(record) = record.get(..size).filter(|_| e.elsewhere && size >= 12) else {
            return false;
        };
        let record = record.to_vec();
        self.specs.record_elsewhere(id, cpu as usize, &record)
    }

    /// `commit(id)` (`commit`) or `discard(id)` run where the probe fired: a committed
    /// speculation's records go to the principal buffers of the CPUs that recorded them, a
    /// discarded one's nowhere (its drops are counted either way).
    pub fn settle_speculation_elsewhere(&mut self, id: u64, commit: bool) {
        for (cpu, buf) in self.specs.settle_elsewhere(id, commit) {
            if let Some(c) = self.cpus.get_mut(cpu) {
                c.principal.append_many(&buf.data, &buf.lens);
            }
        }
    }

    /// `commit(id)` (`commit`) or `discard(id)` run on `cpu` where the probe fired, whose
    /// record could not reach dtrace (the provider's buffer was full): as a `commit()` whose
    /// principal buffer is full, `cpu`'s speculative records are lost (one drop counted on that
    /// CPU when it had some) and the other CPUs' are committed; a discard discards them all.
    pub fn settle_lost_speculation_elsewhere(&mut self, id: u64, commit: bool, cpu: u32) {
        for (c, buf) in self.specs.settle_elsewhere(id, commit) {
            if let Some(p) = self.cpus.get_mut(c) {
                if c == cpu as usize {
                    p.principal.count_drop();
                } else {
                    p.principal.append_many(&buf.data, &buf.lens);
                }
            }
        }
    }

    /// Counts speculative drops made where their probe fired (a clause whose record can never
    /// fit `specsize`).
    pub fn count_speculative_drops(&mut self, drops: u64) {
        self.specs.drops += drops;
    }

    /// Counts `speculation()` calls that failed where their probe fired: `busy` while a
    /// speculation was being committed or discarded, `unavail` with every one in use.
    pub fn count_failed_speculations(&mut self, busy: u64, unavail: u64) {
        self.specs.busy += busy;
        self.specs.unavail += unavail;
    }

    /// Ends tracing as `exit(status)` does, for an `exit()` a provider ran where its probe
    /// fired (when its record did not reach [`Framework::commit_elsewhere`]): the first
    /// status is kept.
    pub fn exit_elsewhere(&mut self, status: i32) {
        if self.activity == Activity::Active && self.status.exit_status.is_none() {
            self.status.exit_status = Some(status);
        }
    }

    /// Fires every queued event from other threads, in order.
    pub fn process_events(&mut self) -> usize {
        let mut n = 0;
        while let Ok(mut ev) = self.rx.try_recv() {
            match ev.memory.as_mut() {
                Some(m) => self.fire_with_memory(ev.probe, ev.cpu, &ev.ctx, m.as_mut()),
                None => self.fire(ev.probe, ev.cpu, &ev.ctx),
            }
            n += 1;
        }
        n
    }

    /// Runs timers due at the current time (profile and tick probes), queued events, and the
    /// speculation cleaner at `cleanrate`. Returns the number of firings.
    pub fn poll(&mut self) -> usize {
        let now = self.clock.now();
        let mut n = self.process_events();
        if self.activity != Activity::Active {
            return n;
        }
        let mut due = Vec::new();
        self.registry.poll(now, self.ncpus, &mut due);
        // Timer probes fire on the consumer's timer thread, so the context they see is the
        // consumer's own (as a tick in DTrace sees whatever ran on the CPU).
        let mut ctx = self.consumer_ctx.clone();
        for (probe, cpu, at) in due {
            ctx.timestamp = Some(at);
            if let Some(f) = &self.consumer_vtime {
                ctx.vtimestamp = f();
            }
            self.fire(probe, cpu, &ctx);
            n += 1;
        }
        if now.saturating_sub(self.last_clean) >= self.options.cleanrate {
            self.clean_speculations();
            self.last_clean = now;
        }
        n
    }

    /// When [`Framework::poll`] next has timer work (monotonic ns), if any.
    pub fn next_deadline(&self) -> Option<u64> {
        self.registry.next_deadline()
    }

    /// The current monotonic time of the framework's clock.
    pub fn now(&self) -> u64 {
        self.clock.now()
    }

    /// Runs the speculation cleaner now: commits speculations committed on other CPUs and frees
    /// discarded ones.
    pub fn clean_speculations(&mut self) {
        for (cpu, buf) in self.specs.clean() {
            if let Some(c) = self.cpus.get_mut(cpu) {
                c.principal.append_many(&buf.data, &buf.lens);
            }
        }
    }

    /// Takes the records of one CPU's principal buffer (switching it) and its drop count.
    pub fn switch_buffer(&mut self, cpu: u32) -> Result<BufferSnapshot, FrameworkError> {
        let c = self
            .cpus
            .get_mut(cpu as usize)
            .ok_or(FrameworkError::BadCpu(cpu))?;
        if c.principal.is_full() {
            self.status.filled = true;
        }
        let (data, drops) = c.principal.take();
        Ok(BufferSnapshot { cpu, data, drops })
    }

    /// Takes every CPU's principal buffer.
    pub fn switch_all(&mut self) -> Vec<BufferSnapshot> {
        (0..self.cpus.len() as u32)
            .filter_map(|c| self.switch_buffer(c).ok())
            .collect()
    }

    /// Drains every CPU's aggregation buffer: the entries aggregated since the previous snapshot.
    pub fn snapshot_aggregations(&mut self) -> Vec<AggSnapshot> {
        self.cpus
            .iter_mut()
            .enumerate()
            .map(|(cpu, c)| {
                let cpu = cpu as u32;
                let (entries, drops) = c.aggs.drain();
                AggSnapshot {
                    cpu,
                    records: entries
                        .into_iter()
                        .map(|(aggid, key, value)| AggRecord {
                            aggid,
                            key,
                            value,
                            cpu,
                        })
                        .collect(),
                    drops,
                }
            })
            .collect()
    }

    /// Whether `exit()` was called: tracing drains, and no probe but END fires any more.
    pub fn draining(&self) -> bool {
        self.status.exit_status.is_some()
    }

    /// The status counters.
    pub fn status(&mut self) -> Status {
        let mut s = self.status;
        s.activity = Some(self.activity);
        s.filled |= self.cpus.iter().any(|c| c.principal.is_full());
        s.dynvar_drops = self.vars.dynvar_drops();
        s.spec_drops = self.specs.drops;
        s.spec_busy = self.specs.busy;
        s.spec_unavail = self.specs.unavail;
        s
    }

    /// Takes the destructive requests (`stop()`, `raise()`) made since the last call.
    pub fn take_requests(&mut self) -> Vec<DestructiveRequest> {
        std::mem::take(&mut self.requests)
    }

    /// A thread has exited: frees its thread-local variables (as DTrace does when a thread dies).
    pub fn thread_exit(&mut self, tid: u64) {
        self.vars
            .dynvars
            .remove_thread(crate::context::thread_key(tid));
    }

    /// The variable state (globals, dynamic variables), e.g. to inspect in tests.
    pub fn vars(&self) -> &VarState {
        &self.vars
    }

    /// The variable state, for a provider that keeps some variables elsewhere and copies them
    /// in and out when no clause runs (the Linux provider's globals in the kernel, around
    /// `BEGIN` and `END`).
    pub fn vars_mut(&mut self) -> &mut VarState {
        &mut self.vars
    }
}

/// The start of each DIF object of clause `e` in the clause's code taken as one sequence (predicate,
/// then the actions in order), and its total length, in instructions: a fault's DIF offset is
/// its instruction's index in that sequence (a provider that runs a clause elsewhere reports its
/// faults with it, see [`Framework::fault_elsewhere`]).
pub fn code_base(e: &dtrace_dif::program::EcbDesc) -> Vec<u64> {
    let len = |o: Option<&dtrace_dif::object::DifObject>| o.map_or(0, |o| o.text.len() as u64);
    let mut at = len(e.predicate.as_ref());
    let mut v = Vec::with_capacity(e.actions.len() + 1);
    for a in &e.actions {
        v.push(at);
        at += len(a.difo.as_ref());
    }
    v.push(at);
    v
}
