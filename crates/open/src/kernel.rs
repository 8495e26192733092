//! The kernel providers of `dtrace-linux` (`syscall`, `proc`, `sched`, `sdt`) joined to the
//! in-process framework: a [`Tracer`] over [`FrameworkTracer`] that plans each program's captures
//! before enabling it, delivers captured events whenever the consumer polls, and drains them before
//! END fires. Between polls the consumer sleeps in [`Tracer::wait`] on the capture ring (whose
//! programs wake it once the ring is filling up) until the next deadline: its rates, the
//! framework's timers, the user providers' looks for new processes; while records keep coming it
//! polls every [`SLEEP_POLL`] as before.

use std::os::fd::RawFd;
use std::time::Duration;

use dtrace_consumer::error::{ConsumerError, Result};
use dtrace_consumer::fwtracer::FrameworkTracer;
use dtrace_consumer::handle::{ExecInfo, Tracer, SLEEP_POLL};
use dtrace_consumer::listing::ProbeDetail;
use dtrace_consumer::options::Options;
use dtrace_consumer::status::StatusCounters;
use dtrace_dif::program::{ProbeDesc, Program};
use dtrace_framework::records::{AggRecord, BufferSnapshot, ProbeInfo};
use dtrace_framework::DestructiveRequest;
use dtrace_linux::LinuxTracing;

/// How far before a pump an event may be stamped and still reach the ring after it (the time a
/// probe program takes between reading the clock and committing its record, interrupts included).
const RING_ORDER_SLACK_NS: u64 = 10_000_000;

/// The framework with the Linux providers registered.
pub struct KernelTracer {
    inner: FrameworkTracer,
    linux: LinuxTracing,
    /// Kernel drops per CPU already reported (or lost before tracing went).
    reported_drops: Vec<u64>,
    /// The kernel's refusals for the principal buffer's room per CPU already seen (see
    /// `LinuxTracing::cpu_room_refusals`): a new one fills a `fill` buffer.
    room_refusals_seen: Vec<u64>,
    /// The kernel's drop counts per CPU when `exit()` was first seen: from then on the ring is no
    /// longer pumped, and what it loses are firings after the exit, which DTrace (draining) never
    /// records, so they are no drops of its.
    drops_at_exit: Option<Vec<u64>>,
    /// When (framework clock) the last pump of the kernel's ring began: events before it have been
    /// delivered, later ones may still be in the ring.
    pumped_from: Option<u64>,
    /// When (framework clock) the kernel's exit flag was first seen set while the framework had
    /// not exited: the exit's own record may still be on its way to the ring (see
    /// [`RING_ORDER_SLACK_NS`]), behind records of earlier firings not pumped yet.
    kernel_exit_seen: Option<u64>,
    /// Aggregation drops in the kernel's maps not yet reported, per CPU.
    kernel_agg_drops: Vec<(u32, u64)>,
    /// Speculations whose `commit()` or `discard()` the kernel's ring had no room for, with
    /// when (framework clock) they were seen: each is settled once a pump that began
    /// [`RING_ORDER_SLACK_NS`] later brought the records speculated before it.
    lost_settles: Vec<(dtrace_linux::provider::speculation::LostSettle, u64)>,
    /// Per enabled program: its first clause's framework statement id, its number of clauses,
    /// and where its clauses start among the Linux side's planned clauses.
    clause_bases: Vec<(u32, u32, usize)>,
    /// ECBs created for probes that appeared after their programs were enabled, not yet handed
    /// to the consumer.
    new_probes: Option<ExecInfo>,
    /// What the last poll found in the capture ring, which decides how the next wait treats it.
    ring: RingState,
    /// An exit() or a settle the ring had no room for waits for a pump a slack later: the
    /// consumer wakes for it.
    settling: bool,
    /// The processes `-c` and `-p` hold until tracing goes (see [`Tracer::hold_processes`]).
    held: Vec<u32>,
}

/// What the last poll found in the capture ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RingState {
    /// Empty: the next wait sleeps on it until its programs' wake-up or the next deadline.
    Quiet,
    /// Records came: the next wait is a sleep of [`SLEEP_POLL`] at most that records do not
    /// end, so a ring that keeps filling is read in batches, as a ring never waited on.
    Busy,
    /// Not read (after `exit()` nothing more fires): waits ignore it.
    Unread,
}

fn be<E: std::fmt::Display>(e: E) -> ConsumerError {
    ConsumerError::Backend(e.to_string())
}

/// `prog` as the Linux side plans and enables it: it sizes the strings and sized copies it takes
/// at the probe from the program's options, so a program that sets no strsize (scratchsize) gets
/// the handle's (`-x strsize`, `-x scratchsize`), both when planned and when enabled.
fn with_handle_sizes<'a>(prog: &'a Program, options: &Options) -> std::borrow::Cow<'a, Program> {
    let inherit: Vec<&str> = ["strsize", "scratchsize"]
        .into_iter()
        .filter(|o| options.is_set(o) && !prog.options.iter().any(|(n, _)| n == o))
        .collect();
    if inherit.is_empty() {
        return std::borrow::Cow::Borrowed(prog);
    }
    let mut p = prog.clone();
    for o in inherit {
        p.options
            .push((o.into(), Some(options.value(o).to_string())));
    }
    std::borrow::Cow::Owned(p)
}

/// The value of size option `name` a program runs with: its last `#pragma D option`, else the
/// handle's.
fn size_option(prog: &Program, options: &Options, name: &str) -> i64 {
    let pragma = prog
        .options
        .iter()
        .rev()
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| v.as_deref())
        .and_then(dtrace_consumer::options::parse_size)
        .map(|n| n as i64);
    pragma.unwrap_or_else(|| options.value(name))
}

/// The CPU the `cpu` option keeps tracing to: the program's last `#pragma D option cpu`, else
/// the handle's (`None`: every CPU).
fn cpu_of(prog: &Program, options: &Options) -> Option<u32> {
    let v = size_option(prog, options, "cpu");
    u32::try_from(v).ok()
}

/// The `aggsize` a program runs with: its last `#pragma D option aggsize`, else the handle's.
fn aggsize_of(prog: &Program, options: &Options) -> Option<u64> {
    let v = size_option(prog, options, "aggsize");
    (v > 0).then_some(v as u64)
}

/// The verifier log a program asks for with `bpflog` (its `#pragma D option`, else the
/// handle's): the level given (the kernel's `log_level` bits), DTrace for Linux's when the option
/// has no value, in a buffer of `bpflogsize` bytes (DTrace for Linux's default when unset).
fn verifier_log_of(
    prog: &Program,
    options: &Options,
) -> Option<dtrace_linux::bpf::prog::VerifierLog> {
    use dtrace_linux::bpf::prog::{VerifierLog, DEFAULT_LOG_LEVEL, DEFAULT_LOG_SIZE};
    let pragma = prog.options.iter().rev().find(|(n, _)| n == "bpflog");
    let level = match pragma {
        Some((_, None)) => 0,
        Some((_, Some(v))) => match v.as_str() {
            "yes" | "on" | "true" | "set" | "enable" | "enabled" => 1,
            "no" | "off" | "false" | "unset" | "disable" | "disabled" => return None,
            v => dtrace_dif::optval::parse_c_unsigned(v).and_then(|n| i64::try_from(n).ok())?,
        },
        None => options.value("bpflog"),
    };
    if level == dtrace_consumer::options::UNSET || !(0..=7).contains(&level) {
        return None;
    }
    let size = size_option(prog, options, "bpflogsize");
    Some(VerifierLog {
        level: if level == 0 {
            DEFAULT_LOG_LEVEL
        } else {
            level as u32
        },
        size: if size > 0 {
            usize::try_from(size).unwrap_or(usize::MAX)
        } else {
            DEFAULT_LOG_SIZE
        },
    })
}

/// The kernel ring's size for a per-CPU `bufsize` (DTrace's buffers are per CPU; the ring is shared
/// by every CPU): `bufsize` times the number of CPUs, at least a page.
fn ring_bytes(bufsize: u64, ncpus: u32) -> usize {
    usize::try_from(bufsize.saturating_mul(ncpus.max(1) as u64))
        .unwrap_or(usize::MAX)
        .max(4096)
}

/// The `bufsize` a program runs with: its last `#pragma D option bufsize`, else the handle's.
fn bufsize_of(prog: &Program, options: &Options) -> u64 {
    let v = size_option(prog, options, "bufsize");
    if v > 0 {
        v as u64
    } else {
        4 << 20
    }
}

impl KernelTracer {
    /// Registers `linux`'s providers with `inner`'s framework.
    pub fn new(mut inner: FrameworkTracer, linux: LinuxTracing) -> Result<KernelTracer> {
        linux
            .register(inner.framework())
            .map_err(|e| ConsumerError::Backend(e.to_string()))?;
        // Aggregation-only clauses aggregate in the kernel (this tracer feeds their snapshots to
        // the consumer) unless DTRACE_KERNEL_AGGREGATIONS=0 keeps them in the interpreter.
        let env = dtrace_linux::provider::kagg::KERNEL_AGGREGATIONS_ENV;
        linux.set_kernel_aggregations(match std::env::var_os(env) {
            Some(v) if v == "0" => Err(format!("kernel aggregations are off ({env}=0)")),
            _ => Ok(()),
        });
        Ok(KernelTracer {
            inner,
            linux,
            reported_drops: Vec::new(),
            room_refusals_seen: Vec::new(),
            drops_at_exit: None,
            pumped_from: None,
            kernel_exit_seen: None,
            kernel_agg_drops: Vec::new(),
            lost_settles: Vec::new(),
            clause_bases: Vec::new(),
            new_probes: None,
            ring: RingState::Quiet,
            settling: false,
            held: Vec::new(),
        })
    }

    /// After ECBs are created (by enabling a program, or for probes that appeared later): the
    /// enabled probes whose aggregations the kernel computes no longer run in the framework, the
    /// kernel's maps learn the aggregation each feeds, and the records built at the probe their
    /// EPIDs.
    fn run_kernel_aggregations(&mut self, info: &ExecInfo) -> Result<()> {
        for ep in &info.eprobes {
            let Some(clause) = self.clause_bases.iter().find_map(|&(first, n, base)| {
                let k = ep.clause.checked_sub(first).filter(|&k| k < n)?;
                Some(base + k as usize)
            }) else {
                continue;
            };
            self.linux.bind_epid(clause, ep.probe_id, ep.epid);
            if self.linux.signals_in_kernel(clause, ep.probe_id) {
                self.inner.framework().signal_elsewhere(ep.epid);
            }
            if !self.linux.aggregates_in_kernel(clause, ep.probe_id) {
                continue;
            }
            self.inner.framework().run_elsewhere(ep.epid);
            for (j, a) in info.aggs.iter().filter(|a| a.epid == ep.epid).enumerate() {
                self.linux.bind_aggregation(clause, j, a.aggid, &a.recs);
            }
            self.linux
                .bind_record(clause, ep.probe_id, ep.epid, ep.size, &ep.recs)
                .map_err(be)?;
        }
        Ok(())
    }
}

impl KernelTracer {
    /// When a traced process's run-time linker changed its objects (it is stopped there): matches
    /// the enabled descriptions again, so the probes of a library it loaded are created, enabled
    /// and placed, then lets it go on. The new ECBs wait in `new_probes` for the consumer.
    fn place_loaded_probes(&mut self) -> Result<()> {
        let pids = self.linux.loads_changed();
        if pids.is_empty() {
            return Ok(());
        }
        let placed = (|| -> Result<()> {
            // Providers a glob names that a library those processes loaded brought are
            // registered first.
            self.linux
                .register_glob_providers(self.inner.framework(), &pids)
                .map_err(be)?;
            self.enable_new_for(&pids)?;
            self.linux.attach_pending().map_err(be)
        })();
        self.linux.resume_loads(&pids);
        placed
    }

    /// Matches the enabled descriptions that can name the providers of processes `pids` again
    /// (`Framework::enable_new`); the new ECBs wait in `new_probes` for the consumer.
    fn enable_new_for(&mut self, pids: &[u32]) -> Result<()> {
        // Only descriptions that can name those processes' providers can match anything new.
        let names_them =
            |d: &ProbeDesc| dtrace_linux::provider::user::may_name_process(&d.provider, pids);
        let e = self.inner.framework().enable_new(&names_them).map_err(be)?;
        if e.eprobes.is_empty() {
            return Ok(());
        }
        let info = ExecInfo {
            matches: e.matched,
            eprobes: e.eprobes,
            probes: e.probes,
            aggs: e.aggs,
            clauses: 0..0,
        };
        self.run_kernel_aggregations(&info)?;
        let pending = self.new_probes.get_or_insert_with(ExecInfo::default);
        pending.matches += info.matches;
        pending.eprobes.extend(info.eprobes);
        pending.probes = info.probes;
        pending.aggs.extend(info.aggs);
        Ok(())
    }

    /// Settles the speculations whose `commit()` or `discard()` the kernel's ring had no room
    /// for (see `capture::speculation`): each once a pump that began a slack after it was seen
    /// brought the records speculated before it, or all of them (`all`) once the ring was
    /// emptied for good; then frees it in the kernel.
    fn settle_lost_speculations(&mut self, all: bool) -> Result<()> {
        let now = self.inner.framework().now();
        for lost in self.linux.kernel_lost_speculations().map_err(be)? {
            self.lost_settles.push((lost, now));
        }
        let pumped = self.pumped_from;
        let (due, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut self.lost_settles)
            .into_iter()
            .partition(|(_, seen)| {
                all || pumped.is_some_and(|p| p >= seen.saturating_add(RING_ORDER_SLACK_NS))
            });
        self.lost_settles = wait;
        for (lost, _) in due {
            self.inner.framework().settle_lost_speculation_elsewhere(
                u64::from(lost.id),
                lost.commit,
                lost.cpu,
            );
            self.linux.release_lost_speculation(lost.id).map_err(be)?;
        }
        Ok(())
    }

    /// Keeps the kernel's drop counts at the first `exit()` seen (see `drops_at_exit`). A `fill`
    /// buffer that filled is no exit: what the ring loses after it are drops the framework would
    /// have counted itself.
    fn note_drops_at_exit(&mut self) -> Result<()> {
        if self.drops_at_exit.is_none() && self.inner.framework().draining() {
            self.drops_at_exit = Some(self.linux.cpu_drops().map_err(be)?);
        }
        Ok(())
    }

    /// Processes that fired USDT probes placed on their files before dtrace knew them (started
    /// after tracing began, see `dtrace_linux::provider::file_usdt`): their providers are
    /// registered and the enabled descriptions matched again, creating their probes; then the
    /// events that waited for them fire.
    fn adopt_new_processes(&mut self) -> Result<()> {
        let pids = self
            .linux
            .adopt_new_processes(self.inner.framework())
            .map_err(be)?;
        if pids.is_empty() {
            return Ok(());
        }
        self.enable_new_for(&pids)?;
        self.linux.fire_waiting(self.inner.framework());
        Ok(())
    }
}

/// Why a description naming the `fbt` provider (or exactly `rawfbt`) cannot be served on this
/// kernel (`None`: it can, or the description does not name it; an empty provider or a glob
/// (`*:::tick-10ms`) matches other providers too and is left alone: without fbt it matches their
/// probes only).
fn fbt_refusal(desc: &ProbeDesc) -> Option<ConsumerError> {
    let support = if desc.provider == dtrace_linux::catalog::fbt::RAW_PROVIDER {
        dtrace_linux::features::rawfbt_support()
    } else if desc.provider != dtrace_linux::catalog::fbt::PROVIDER {
        return None;
    } else {
        dtrace_linux::features::fbt_support()
    };
    support.err().map(|e| ConsumerError::Backend(e.to_string()))
}

impl KernelTracer {
    /// [`Tracer::exec`] of `prog`, the processes that provider globs match read once.
    fn exec_program(&mut self, prog: &Program, options: &Options) -> Result<ExecInfo> {
        // As planned (see `Tracer::plan`): with the handle's sizes.
        let original = with_handle_sizes(prog, options);
        if let Some(e) = prog.ecbs.iter().find_map(|e| fbt_refusal(&e.probe)) {
            return Err(e);
        }
        // Per-process providers (`pid123`) are registered for the processes the program names.
        // A description the pid provider refuses is a compile error at its line, as in DTrace.
        let mut descs = Vec::with_capacity(prog.ecbs.len());
        for e in &prog.ecbs {
            let d = self
                .linux
                .prepare_user(self.inner.framework(), std::slice::from_ref(&e.probe))
                .map_err(|err| match err {
                    dtrace_linux::LinuxError::PidRefused { refusal, message } => {
                        ConsumerError::BadDescription {
                            tag: refusal.tag(),
                            message,
                            line: e.line,
                        }
                    }
                    err => ConsumerError::Backend(err.to_string()),
                })?;
            descs.extend(d);
        }
        // The program sized as planned, its descriptions rewritten where they differ.
        let rewritten;
        let prog = if descs.iter().zip(&prog.ecbs).any(|(d, e)| *d != e.probe) {
            let mut p = original.clone().into_owned();
            for (e, d) in p.ecbs.iter_mut().zip(descs) {
                e.probe = d;
            }
            rewritten = p;
            &rewritten
        } else {
            &*original
        };
        // The framework fires probes of that CPU only, and so does the code at every probe.
        if !self.linux.set_only_cpu(cpu_of(prog, options)) {
            // (A session already tracing every CPU, or another one, does not change.)
            self.linux.set_kernel_aggregations(Err(
                "the cpu option differs from the one tracing started with".into(),
            ));
        }
        if let Some(log) = verifier_log_of(prog, options) {
            dtrace_linux::bpf::prog::set_verifier_log(Some(log));
        }
        self.linux.set_destructive(
            options.is_set("destructive") || prog.options.iter().any(|(n, _)| n == "destructive"),
        );
        // Before planning: how many speculations the kernel would keep decides where they live.
        let nspec = size_option(prog, options, "nspec");
        self.linux
            .set_nspec(if nspec > 0 { nspec as u64 } else { 1 });
        let specsize = size_option(prog, options, "specsize");
        self.linux.set_specsize(if specsize > 0 {
            specsize as u64
        } else {
            dtrace_framework::options::Options::default().specsize
        });
        self.linux.plan_replacing(&original, prog);
        self.linux
            .set_aggsize(aggsize_of(prog, options).unwrap_or(4 << 20));
        let dynvarsize = size_option(prog, options, "dynvarsize");
        self.linux.set_dynvarsize(if dynvarsize > 0 {
            dynvarsize as u64
        } else {
            1 << 20
        });
        self.linux
            .note_dynvar_sizes(prog.max_tuple_size, prog.max_dvar_size);
        let ncpus = dtrace_linux::provider::framework_ncpus().unwrap_or(1);
        self.linux
            .set_ring_bytes(ring_bytes(bufsize_of(prog, options), ncpus));
        let first_clause = self.inner.framework().next_clause();
        let info = self.inner.exec(prog, options)?;
        if let Some(base) = self.linux.clause_base(prog) {
            self.clause_bases
                .push((first_clause, prog.ecbs.len() as u32, base));
        }
        self.run_kernel_aggregations(&info)?;
        // USDT probes placed on files for every process, then uprobes (and kprobes on kernel
        // functions) by the group, before the match is reported; then the traced processes'
        // linkers are watched for libraries loaded later.
        self.linux.enable_file_probes(false).map_err(be)?;
        self.linux.attach_pending().map_err(be)?;
        self.linux.watch_loads().map_err(be)?;
        Ok(info)
    }
}

impl Tracer for KernelTracer {
    fn plan(&mut self, programs: &[&Program], options: &Options) {
        // Planned as each will be executed: with the handle's options as the pragmas of the
        // programs before it left them (see `with_handle_sizes`).
        let mut options = options.clone();
        let mut sized = Vec::with_capacity(programs.len());
        for p in programs {
            for (name, value) in &p.options {
                let _ = options.set(name, value.as_deref(), false);
            }
            sized.push(with_handle_sizes(p, &options));
        }
        let sized: Vec<&Program> = sized.iter().map(|p| &**p).collect();
        self.linux.plan_all(&sized);
    }
    fn placement_report(&self) -> Vec<String> {
        let report = self.linux.kernel_report();
        report
            .iter()
            .filter(|c| c.probes > 0)
            .enumerate()
            .flat_map(|(i, c)| c.describe(i + 1))
            .chain(report.iter().filter_map(|c| c.describe_shared()))
            .collect()
    }
    fn exec(&mut self, prog: &Program, options: &Options) -> Result<ExecInfo> {
        let r = self.exec_program(prog, options);
        // The processes read to match provider globs are read again by the next enabling.
        self.linux.end_enabling();
        r
    }
    fn hold_processes(&mut self, pids: &[u32]) {
        self.held.extend_from_slice(pids);
    }

    fn go(&mut self) -> Result<()> {
        // The held processes' user stacks are walked at the probe from their first firing on.
        self.linux.prepare_held(&self.held);
        // Probes fire from the moment they are attached, DTrace's only once tracing goes: what the
        // ring caught meanwhile is emptied now (the framework, not active yet, fires none of it),
        // so that it leaves room for the first firings, and what it lost is no drop of DTrace's.
        self.linux
            .pump(self.inner.framework(), 0)
            .map_err(|e| ConsumerError::Backend(e.to_string()))?;
        self.reported_drops = self.linux.cpu_drops().map_err(be)?;
        self.room_refusals_seen = self.linux.cpu_room_refusals().map_err(be)?;
        self.inner.go()?;
        // The room the principal buffers give records built at the probe, one account per CPU
        // with the records built here.
        let shared = self.linux.shared_room();
        self.inner.framework().share_room(shared);
        let room = self.inner.framework().record_room_elsewhere();
        self.linux.set_record_room(&room).map_err(be)?;
        // BEGIN has fired: nothing captured before it is delivered, nor aggregated. The globals
        // it shares with the kernel's clauses go there before they start.
        self.linux.go_live();
        self.linux
            .push_globals(self.inner.framework().vars())
            .map_err(be)?;
        // The kernel's `timestamp` is the framework's clock too.
        let now = self.inner.framework().now();
        self.linux.fix_clock(now);
        self.linux.kernel_aggregations_on(true).map_err(be)
    }
    fn stop(&mut self) -> Result<()> {
        // Everything the traced work produced fires (or is aggregated) before END.
        self.linux.kernel_aggregations_on(false).map_err(be)?;
        self.linux.finish(self.inner.framework());
        // Processes seen only in those last events get their probes too.
        self.adopt_new_processes()?;
        // The ring is empty: every record speculated before a lost settle was consumed.
        self.settle_lost_speculations(true)?;
        // END reads the globals the kernel's clauses left.
        self.linux
            .pull_globals(self.inner.framework().vars_mut())
            .map_err(be)?;
        self.inner.stop()
    }
    fn switch_buffers(&mut self) -> Result<Vec<BufferSnapshot>> {
        let mut snaps = self.inner.switch_buffers()?;
        let fill = self.inner.framework().options().bufpolicy
            == dtrace_framework::options::BufPolicy::Fill;
        let now = match &self.drops_at_exit {
            Some(at_exit) => at_exit.clone(),
            None => self
                .linux
                .cpu_drops()
                .map_err(|e| ConsumerError::Backend(e.to_string()))?,
        };
        self.reported_drops.resize(now.len(), 0);
        for (cpu, (&n, seen)) in now.iter().zip(self.reported_drops.iter_mut()).enumerate() {
            let new = n.saturating_sub(*seen);
            if new == 0 {
                continue;
            }
            *seen = n;
            let cpu = cpu as u32;
            match snaps.iter_mut().find(|s| s.cpu == cpu) {
                Some(s) => s.drops += new,
                None => snaps.push(BufferSnapshot {
                    cpu,
                    data: Vec::new(),
                    drops: new,
                }),
            }
        }
        // A record the kernel found no room for in the principal buffer fills a fill buffer,
        // as one refused here does; one the ring had no room for (a capture, or a record built
        // at the probe) is a drop that leaves the buffer as it was.
        if fill && self.drops_at_exit.is_none() {
            let now = self.linux.cpu_room_refusals().map_err(be)?;
            self.room_refusals_seen.resize(now.len(), 0);
            for (cpu, (&n, seen)) in now
                .iter()
                .zip(self.room_refusals_seen.iter_mut())
                .enumerate()
            {
                if n > *seen {
                    *seen = n;
                    self.inner.framework().fill_elsewhere(cpu as u32);
                }
            }
        }
        // The buffers were switched: records built at the probe have their room again (none
        // in a full fill buffer).
        if self.drops_at_exit.is_none() {
            let room = self.inner.framework().record_room_elsewhere();
            self.linux.set_record_room(&room).map_err(be)?;
        }
        Ok(snaps)
    }
    fn aggregate_snapshot(&mut self) -> Result<Vec<AggRecord>> {
        let mut recs = self.inner.aggregate_snapshot()?;
        let (kernel, drops) = self.linux.kernel_aggregations().map_err(be)?;
        recs.extend(kernel);
        self.kernel_agg_drops.extend(drops);
        Ok(recs)
    }
    fn status(&mut self) -> Result<StatusCounters> {
        // speculation() calls that failed in the kernel, and its speculative drops, counted as
        // the framework's.
        let spec = self.linux.kernel_speculation_counts().map_err(be)?;
        if spec.busy + spec.unavail > 0 {
            self.inner
                .framework()
                .count_failed_speculations(spec.busy, spec.unavail);
        }
        if spec.drops > 0 {
            self.inner.framework().count_speculative_drops(spec.drops);
        }
        let mut s = self.inner.status()?;
        // Stores of thread-locals the kernel's map had no room for.
        s.dyndrops += self.linux.kernel_dynvar_drops().map_err(be)?;

        Ok(s)
    }
    fn take_new_probes(&mut self) -> Option<ExecInfo> {
        self.new_probes.take()
    }
    fn poll(&mut self) -> Result<()> {
        self.place_loaded_probes()?;
        // Files with USDT probes a provider glob names, in processes started since.
        self.linux.discover_files().map_err(be)?;
        // After exit() nothing but END fires: the kernel stops aggregating too.
        self.ring = RingState::Unread;
        if !self.inner.exit_requested() {
            self.pumped_from = Some(self.inner.framework().now());
            let pumped = self
                .linux
                .pump(self.inner.framework(), 0)
                .map_err(|e| ConsumerError::Backend(e.to_string()))?;
            self.ring = match pumped {
                0 => RingState::Quiet,
                _ => RingState::Busy,
            };
            self.note_drops_at_exit()?;
            self.adopt_new_processes()?;
            self.settle_lost_speculations(false)?;
            // An exit() run in the kernel whose record the ring had no room for. The flag is set
            // before the exiting firing's records are committed: the framework exits on the
            // exit's record, after the records before it, unless a pump that began a slack after
            // the flag was seen still brought none (taking the flag at once ended tracing before
            // those records were consumed: they were lost).
            if let Some(status) = self.linux.kernel_exit().map_err(be)? {
                let now = self.inner.framework().now();
                let seen = *self.kernel_exit_seen.get_or_insert(now);
                if self
                    .pumped_from
                    .is_some_and(|p| p >= seen.saturating_add(RING_ORDER_SLACK_NS))
                {
                    self.inner.framework().exit_elsewhere(status);
                }
            }
        }
        self.inner.poll()?;
        // raise() and stop() of the clauses just run, sent to the thread or process that fired.
        for r in self.inner.framework().take_requests() {
            match r {
                DestructiveRequest::Raise { pid, tid, signal } => {
                    dtrace_linux::process::raise_in_thread(pid as u32, tid as u32, signal)
                }
                DestructiveRequest::Stop { pid } => dtrace_linux::process::stop_process(pid as u32),
            }
            .map_err(be)?;
        }
        let exited = self.inner.exit_requested();
        if exited {
            self.linux.kernel_aggregations_on(false).map_err(be)?;
            self.note_drops_at_exit()?;
        }
        self.settling =
            !exited && (self.kernel_exit_seen.is_some() || !self.lost_settles.is_empty());
        Ok(())
    }
    fn time_to_next_event(&self) -> Option<Duration> {
        // An exit() or a settle the kernel's ring had no room for is taken once a pump a slack
        // later brought nothing more.
        let slack = self
            .settling
            .then_some(Duration::from_nanos(RING_ORDER_SLACK_NS));
        [
            self.inner.time_to_next_event(),
            self.linux.time_to_next_look(),
            slack,
        ]
        .into_iter()
        .flatten()
        .min()
    }
    fn wait(&mut self, timeout: Duration, also: &[RawFd]) -> Result<()> {
        // While records keep coming the ring is read every SLEEP_POLL, in batches, as a ring
        // that is never waited on (its records then raise no wake-up); a quiet one is slept on.
        let r = match self.ring {
            RingState::Quiet => self.linux.wait(timeout, true, also),
            RingState::Busy => self.linux.wait(timeout.min(SLEEP_POLL), false, also),
            RingState::Unread => self.linux.wait(timeout, false, also),
        };
        r.map_err(be)
    }
    fn complete_through(&self) -> Option<u64> {
        // Kernel events reach the framework's buffers when the ring is pumped, with the time they
        // happened. Those stamped after the last pump began may not be in the ring yet, nor those
        // a little before (the ring takes records in reservation order, and a program interrupted
        // between reading the clock and reserving commits after one that read it later), nor
        // entry events held for a re-read.
        let pumped = self.pumped_from?.saturating_sub(RING_ORDER_SLACK_NS);
        Some(self.linux.oldest_held().map_or(pumped, |h| h.min(pumped)))
    }
    fn end_cpu(&self) -> Option<u32> {
        self.inner.end_cpu()
    }
    fn ncpus(&self) -> u32 {
        self.inner.ncpus()
    }
    fn take_aggregation_drops(&mut self) -> Vec<(u32, u64)> {
        let mut drops = self.inner.take_aggregation_drops();
        for (cpu, n) in std::mem::take(&mut self.kernel_agg_drops) {
            match drops.iter_mut().find(|(c, _)| *c == cpu) {
                Some((_, d)) => *d += n,
                None => drops.push((cpu, n)),
            }
        }
        drops
    }
    fn list(&mut self, desc: &ProbeDesc) -> Result<Vec<ProbeInfo>> {
        if let Some(e) = fbt_refusal(desc) {
            return Err(e);
        }
        let descs = self
            .linux
            .prepare_user(self.inner.framework(), std::slice::from_ref(desc));
        self.linux.end_enabling();
        let descs = descs.map_err(|e| ConsumerError::Backend(e.to_string()))?;
        let desc = descs.first().unwrap_or(desc);
        self.inner.list(desc)
    }
    fn probe_detail(&mut self, probe: &ProbeInfo) -> Result<ProbeDetail> {
        self.inner.probe_detail(probe)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_follows_bufsize_per_cpu() {
        assert_eq!(ring_bytes(4 << 20, 2), 8 << 20);
        assert_eq!(ring_bytes(1, 2), 4096);
        assert_eq!(ring_bytes(u64::MAX, 4), usize::MAX);
        let mut p = Program::default();
        let mut o = Options::default();
        assert_eq!(bufsize_of(&p, &o), 4 << 20);
        o.set("bufsize", Some("16k"), false).unwrap();
        assert_eq!(bufsize_of(&p, &o), 16 << 10);
        p.options.push(("bufsize".into(), Some("2m".into())));
        assert_eq!(bufsize_of(&p, &o), 2 << 20);
    }
}
