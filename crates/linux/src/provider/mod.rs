//! The Linux probe catalogue as framework providers (`syscall`, `sdt`, `proc`, `sched`): probes are
//! published with their argument types, enabled through one capture [`Session`] (one enabling per
//! probe, tagged with the framework's probe id, capturing the union of what the clauses enabled on it
//! read), and the captured events are delivered to the framework as firings ([`deliver`]).
//!
//! Use: build a [`LinuxTracing`], [`LinuxTracing::register`] it with the [`Framework`], call
//! [`LinuxTracing::plan`] with each program before `Framework::enable`, then alternate
//! [`LinuxTracing::pump`] and `Framework::poll` while tracing, and [`LinuxTracing::finish`] before
//! `Framework::stop`. The framework's `profile` provider keeps naming its probes; `register` makes
//! them fire from perf events of the same session ([`profile::PerfProfileDriver`]) when the kernel
//! allows it, and leaves the framework's timers in charge otherwise.

pub mod deliver;
pub mod file_usdt;
pub mod kagg;
pub mod kvars;
pub mod needs;
mod proc_scan;
pub mod profile;
pub mod signal;
pub mod speculation;
pub mod user;
pub mod ustack_maps;

use crate::capture::spec::MAX_COPIES;
use crate::capture::Identity;
use crate::catalog::{AttachPoint, Catalog, Probe};
use crate::error::{LinuxError, Result};
use crate::session::{Session, SessionOptions};
use crate::symbols::Symbolizer;
use dtrace_dif::program::RecDesc;
use dtrace_dif::program::{ProbeDesc as DifProbeDesc, Program};
use dtrace_framework::provider::{
    ArgDesc, Attribute, DepClass, ProbeSink, ProviderAttributes, ProviderError, Stability,
};
use dtrace_framework::records::{AggRecord, ProbeInfo};
use dtrace_framework::{Framework, FrameworkError, Provider};
use needs::ClauseNeeds;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

/// Providers of the catalogue that are registered with the framework (in this order).
pub const PROVIDERS: [&str; 7] = ["syscall", "proc", "sched", "io", "sdt", "fbt", "rawfbt"];

/// The state the providers share: the catalogue, the session (created at the first enabling, so
/// listing probes needs no BPF), the capture needs of the planned programs and the enabled tags.
pub(crate) struct Shared {
    pub(crate) catalog: Catalog,
    pub(crate) session: Option<Session>,
    session_opts: SessionOptions,
    clauses: Vec<(DifProbeDesc, ClauseNeeds)>,
    strsize: u32,
    /// The programs' `scratchsize` (the interpreter's limit for `alloca()`), when they agree
    /// on it (`None`: `alloca()` runs in dtrace).
    scratchsize: Option<u64>,
    /// Tags enabled in the session (a session cannot take a tag back).
    in_session: HashSet<u32>,
    /// Tags whose events are delivered.
    pub(crate) active: crate::fasthash::TagSet,
    /// Per tag: `(argument, copy index)` of arguments delivered as the address of a capture.
    pub(crate) arg_copies: crate::fasthash::TagMap<Vec<(usize, usize)>>,
    /// `profile-N`/`tick-N` fire from perf events of the session ([`LinuxTracing::drive_profile`]),
    /// so their clauses can run in the kernel.
    perf_profile: bool,
    /// Tags of perf-event probes (`profile-N`, `tick-N`): their kernel stacks start at the
    /// interrupted instruction, so nothing is trimmed off them.
    pub(crate) sampled: crate::fasthash::TagSet,
    /// Tags of probes whose cut kernel stacks start at the probed function's own address (`fbt`'s,
    /// see `capture::kstack::starts_in_probed_function`): `caller` is the frame after it, the
    /// function that called it, as DTrace reads `caller` at `fbt` probes.
    pub(crate) own_frame: crate::fasthash::TagSet,
    /// Probes whose `execargs` are read from `/proc/<pid>/cmdline` at delivery (at most this many
    /// bytes): the thread the record speaks for is not the one whose memory is mapped at the probe.
    pub(crate) execargs_from_proc: crate::fasthash::TagMap<u32>,
    /// Tags of probes at the entry of a call that replaces the process's image (`execve`): their
    /// user memory is read at the probe only, as at the call's return or at delivery the addresses
    /// belong to the new program.
    pub(crate) image_replaced: crate::fasthash::TagSet,
    /// A planned program prints user symbols (`ustack()`, `usym()`, `%A`...): the mappings of each
    /// process an event or a record built at the probe comes from are remembered at delivery.
    pub(crate) note_processes: bool,
    /// Framework clock minus CLOCK_MONOTONIC, fixed at the first delivery.
    pub(crate) clock_offset: Option<i64>,
    /// CLOCK_MONOTONIC time tracing went live (after BEGIN): events from before it are not
    /// delivered, as no probe fires before `dtrace_go` in DTrace.
    pub(crate) live_since: Option<u64>,
    /// What all the consumer's programs do with thread-locals, for the mirror of each.
    pub(crate) mirror_ctx: needs::MirrorContext,
    /// The probes of per-process providers (`pid<PID>`, USDT).
    pub(crate) user: user::UserProbes,
    /// Per clause of `clauses`: where its predicate runs at each probe it is enabled on.
    kernel: Vec<ClauseKernel>,
    /// The programs planned so far (planning one again adds nothing), each with where its
    /// clauses start in `clauses`.
    planned: Vec<(Program, usize)>,
    /// Predicates are evaluated in the kernel (off: every firing is recorded, as before; for
    /// comparing the two paths, see [`KERNEL_PREDICATES_ENV`]).
    kernel_predicates: bool,
    /// The switch that turns every kernel filter off (see [`crate::capture::KernelFilter::bypass`]),
    /// created with the first filter.
    bypass: Option<crate::bpf::Map>,
    /// The EPIDs the code at the probes reads (`epid`, see `capture::filter::EpidAt`): made with
    /// the first clause reading it at a probe, filled by [`LinuxTracing::bind_record`] (clauses
    /// run whole there) and [`LinuxTracing::bind_epid`] (predicates run alone there).
    epids: Option<crate::bpf::Map>,
    /// The kernel's tracing address ranges, from the symbol table dtrace cuts captured stacks
    /// with, read when a planned clause reads `caller` or `stackdepth`
    /// ([`LinuxTracing::plan`]).
    tracing_ranges: Option<Vec<crate::symbols::kallsyms::TracingRange>>,
    /// The maps the code at the probes reads `caller` and `stackdepth` with (see
    /// `capture::kstack`): made with the first clause reading them at a probe.
    kstacks: Option<KernelStackMaps>,
    /// The probes enabled with a kernel filter: a clause planned later that matches one turns the
    /// filters off, as that probe's program was built without it.
    filtered: Vec<ProbeInfo>,
    /// The filters were turned off.
    bypassed: bool,
    /// The kernel's BTF, held from the first program planned with a clause outside the `dtrace`
    /// provider until its probes are attached, so that planning (the task offsets, the probes'
    /// shapes) and enabling share one parse (see `crate::btf::Btf::load_vmlinux`).
    btf_hold: Option<Arc<crate::btf::Btf>>,
    /// Per clause of `clauses`: its aggregations as the kernel would compute them, or why it
    /// cannot (see [`kagg::plan_clause`]).
    kplans: Vec<std::result::Result<kagg::ClausePlan, String>>,
    /// Per clause of `clauses`: the D variables (thread-locals, globals) it uses.
    tvars: Vec<Vec<kvars::ThreadVar>>,
    /// Where the D variables live (see [`kvars::place`]).
    placement: kvars::Placement,
    /// The kernel's maps of D variables, made with the first probe that uses them.
    kvar_maps: Option<kvars::KernelVarMaps>,
    /// `nspec`, for the speculations kept in the kernel.
    nspec: u32,
    /// `specsize`, for the speculations kept in the kernel.
    specsize: u64,
    /// The kernel's maps of the speculations, made with the first probe that uses them.
    pub(crate) kspec_maps: Option<speculation::KernelSpecMaps>,
    /// The values `BEGIN` left in the global scalars kept in the kernel (see
    /// [`LinuxTracing::push_globals`]), for maps made after it ran.
    begin_globals: Option<Vec<(u32, dtrace_dif::vm::Stored)>>,
    /// Likewise the elements `BEGIN` left in the global associative arrays kept there.
    begin_arrays: Vec<kvars::ArrayElem>,
    /// `dynvarsize` for that map.
    dynvarsize: u64,
    /// The programs' largest tuple and largest dynamic variable (`Program::max_tuple_size`),
    /// which size that map's entries as the framework's.
    dynvar_sizes: (u32, u32),
    /// Thread-locals may live in the kernel (off: [`kvars::KERNEL_VARIABLES_ENV`] is `0`).
    kernel_variables: bool,
    /// A probe runs clauses with D variables in the kernel.
    kvars_enabled: bool,
    /// Aggregation-only clauses aggregate in the kernel, or why not (see
    /// [`LinuxTracing::set_kernel_aggregations`]).
    kernel_aggregations: std::result::Result<(), String>,
    /// The maps of the kernel aggregations, made with the first.
    kaggs: Option<kagg::KernelAggState>,
    /// `aggsize` for the kernel aggregations' maps.
    aggsize: u64,
    /// (clause of `clauses`, probe id) pairs whose aggregations the kernel computes.
    kernel_aggregated: HashSet<(usize, u32)>,
    /// A planned clause at a kernel probe calls `exit()` (its description): tracing then stops
    /// at that very firing, which only dtrace knows of, so aggregations stay there.
    exit_at_kernel_probe: Option<String>,
    /// Why the clause of [`Shared::exit_at_kernel_probe`] cannot run whole at its probe, when
    /// known (a `copyout()` the kernel refuses, a string read there may hand over...).
    exit_at_kernel_probe_why: Option<String>,
    /// Clauses may build their records at the probe (off: [`KERNEL_RECORDS_ENV`] is `0`).
    kernel_records: bool,
    /// Destructive actions are allowed (`-w`): without, a clause that writes user memory is
    /// left for the framework to refuse when tracing starts, as DTrace refuses it.
    destructive: bool,
    /// `ustack()` keys may be walked in the kernel (off: [`kagg::KERNEL_USTACKS_ENV`] is `0`).
    kernel_ustacks: bool,
    /// The maps of `ustack()` keys walked in the kernel, made when the first program that
    /// walks user stacks is planned.
    ustack_maps: Option<ustack_maps::UstackMaps>,
    /// Why user stacks cannot be walked in the kernel (its maps or programs failed).
    ustack_walk_failed: Option<String>,
    /// (clause of `clauses`, probe id) to the clause's number among the probe's kernel clauses
    /// (which names it in the records it builds and the faults it reports there).
    built_at: std::collections::HashMap<(usize, u32), u16>,
    /// (clause of `clauses`, probe id) pairs whose `raise()`/`stop()` the probe sends.
    signalled: HashSet<(usize, u32)>,
    /// A clause is enabled whose `raise()` or `stop()` dtrace may send, once it reads the
    /// record: the ring is then read at least every [`SIGNAL_POLL`].
    signals_polled: bool,
    /// (probe id, the clause's number among the probe's kernel clauses) to the EPID of the
    /// records it builds and the faults it reports at the probe, and what dtrace completes in
    /// those records (see [`LinuxTracing::bind_record`]).
    pub(crate) built_epids: std::collections::HashMap<(u32, u16), deliver::BuiltAt>,
    /// The (file probe, process) pairs whose probes dtrace knows, for the kernel clauses of
    /// file probes (see `file_usdt`), made with the first.
    known_processes: Option<crate::bpf::Map>,
    /// The processes whose first firing at a file probe the ring had no room for (see
    /// `KernelAggs::missed`), made with `known_processes`.
    missed_announcements: Option<crate::bpf::Map>,
}

/// The most (clause, probe) pairs whose code at the probe reads `epid` (entries of
/// `Shared::epids`).
const EPID_ENTRIES: u32 = 1 << 16;

/// The map of the EPIDs the code at the probes reads (`Shared::epids`).
fn new_epid_map() -> std::result::Result<crate::bpf::Map, String> {
    crate::bpf::Map::create(crate::bpf::MapKind::Hash, "dt_epids", 8, 8, EPID_ENTRIES)
        .map_err(|e| e.to_string())
}

/// Why clause `c`, which calls exit() at a kernel probe, keeps the session's clauses in dtrace
/// (`why`: why it cannot run whole there, when known).
fn exit_reason_of(c: &str, why: Option<&str>) -> String {
    match why {
        Some(why) => {
            format!("clause {c} calls exit() at a kernel probe, where it cannot run whole: {why}")
        }
        None => format!("clause {c} calls exit() at a kernel probe"),
    }
}

/// The maps of [`crate::capture::KernelStacks`].
struct KernelStackMaps {
    frames: crate::bpf::Map,
    ranges: crate::bpf::Map,
    capacity: u32,
}

impl KernelStackMaps {
    /// The maps for `ranges`, the ranges written.
    fn new(
        ranges: &[crate::symbols::kallsyms::TracingRange],
    ) -> std::result::Result<KernelStackMaps, String> {
        use crate::capture::spec::{KEY_SCRATCH_SLOTS, MAX_STACK_DEPTH};
        let (value, capacity) = crate::capture::kstack::ranges_value(ranges)?;
        let size = u32::try_from(value.len()).map_err(|_| "too many tracing ranges")?;
        let e = |e: crate::error::LinuxError| e.to_string();
        let frames = crate::bpf::Map::create(
            crate::bpf::MapKind::PerCpuArray,
            "dt_kstack",
            4,
            8 * MAX_STACK_DEPTH,
            KEY_SCRATCH_SLOTS,
        )
        .map_err(e)?;
        let map = crate::bpf::Map::create(crate::bpf::MapKind::Array, "dt_tracing", 4, size, 1)
            .map_err(e)?;
        map.update(&0u32.to_ne_bytes(), &value).map_err(e)?;
        Ok(KernelStackMaps {
            frames,
            ranges: map,
            capacity,
        })
    }

    fn stacks(&self) -> crate::capture::KernelStacks {
        crate::capture::KernelStacks {
            frames: self.frames.raw_fd(),
            ranges: self.ranges.raw_fd(),
            capacity: self.capacity,
        }
    }
}

/// Environment variable that, set to `0`, builds every record in dtrace's interpreter (clauses
/// that record data then run there, with the variables they use).
pub const KERNEL_RECORDS_ENV: &str = "DTRACE_KERNEL_RECORDS";

/// Environment variable that, set to `0`, keeps every predicate in dtrace's interpreter (the
/// kernel then records every firing of an enabled probe).
pub const KERNEL_PREDICATES_ENV: &str = "DTRACE_KERNEL_PREDICATES";

/// Where one clause's predicate runs, over the probes it is enabled on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClauseKernel {
    /// The clause's probe description.
    pub desc: String,
    /// The clause has a predicate.
    pub has_predicate: bool,
    /// Kernel probes the clause is enabled on.
    pub probes: usize,
    /// Probes where the predicate runs in the kernel before anything is captured.
    pub in_kernel: usize,
    /// Probes where it runs in dtrace only, with the reason.
    pub in_dtrace: Vec<(String, String)>,
    /// The clause aggregates: `Ok` when it may aggregate in the kernel, else why not.
    pub aggregates: Option<std::result::Result<(), String>>,
    /// Probes where its aggregations run in the kernel (the clause records nothing there).
    pub aggs_in_kernel: usize,
    /// Probes where they run in dtrace, with the reason.
    pub aggs_in_dtrace: Vec<(String, String)>,
    /// Of the probes where it runs whole in the kernel, those (syscall entries) where a firing
    /// whose strings cannot be read yet runs at the syscall's return instead
    /// (`capture::spec::Replay`).
    pub replayed: usize,
    /// The clause uses D variables: `Ok` with their names when they live in the kernel (the
    /// clause then runs whole there, counted in `aggs_in_kernel`), else why they stay in dtrace.
    pub variables: Option<std::result::Result<String, String>>,
    /// A `BEGIN` or `END` clause (run in dtrace) sharing globals with clauses run in the kernel:
    /// their names (copied into the kernel after `BEGIN`, out of it before `END`).
    pub shares_globals: Option<String>,
    /// The clause records data (`trace()`, `printf()`...): `Ok` when it may build its record at
    /// the probe (it then runs whole there, counted in `aggs_in_kernel`), else why not.
    pub records: Option<std::result::Result<(), String>>,
    /// The clause calls `raise()` or `stop()`: `Ok` when the probe may send the signal, else
    /// why dtrace sends it.
    pub signals: Option<std::result::Result<(), String>>,
    /// Probes where the probe's program sends it.
    pub signals_in_kernel: usize,
    /// Probes where dtrace sends it, with the reason.
    pub signals_in_dtrace: Vec<(String, String)>,
}

impl ClauseKernel {
    /// The line for `dtrace -v` of a `BEGIN` or `END` clause that shares globals with clauses
    /// run in the kernel (these clauses are not numbered: they fire at no kernel probe).
    pub fn describe_shared(&self) -> Option<String> {
        let names = self.shares_globals.as_ref()?;
        let when = match self.desc.ends_with("END") {
            true => "after the kernel's clauses stop, reading",
            false => "before the kernel's clauses start, writing",
        };
        Some(format!(
            "clause ({}): runs in dtrace {when} variables {names} kept in the kernel",
            self.desc
        ))
    }

    /// The lines for `dtrace -v`: where the clause numbered `n` (from 1) runs (its predicate,
    /// then its aggregations); none for a clause enabled on no kernel probe (`BEGIN`,
    /// `profile`...).
    pub fn describe(&self, n: usize) -> Vec<String> {
        if self.probes == 0 {
            return Vec::new();
        }
        let head = format!("clause {n} ({})", self.desc);
        let probes = |k: usize| format!("{k} probe{}", if k == 1 { "" } else { "s" });
        // "WHAT in the kernel at N probes[, in dtrace at M probes (at PROBE: WHY)]"
        let placement = |what: &str, in_kernel: usize, in_dtrace: &[(String, String)]| {
            let mut line = format!("{head}: {what} in the kernel at {}", probes(in_kernel));
            if let Some((probe, why)) = in_dtrace.first() {
                line.push_str(&format!(
                    ", in dtrace at {} (at {probe}: {why})",
                    probes(in_dtrace.len())
                ));
            }
            line
        };
        let mut out = Vec::new();
        // A clause run whole in the kernel runs its predicate there too; one whose probes all
        // run it in dtrace (the kernel refused their programs) says where its predicate runs.
        let whole_somewhere = matches!(self.variables, Some(Ok(_))) && self.aggs_in_kernel > 0;
        if self.has_predicate && !whole_somewhere {
            out.push(placement("predicate runs", self.in_kernel, &self.in_dtrace));
        } else if self.aggs_in_kernel == 0 {
            out.push(format!(
                "{head}: no predicate; every firing is recorded and runs in dtrace"
            ));
        }
        let whole = matches!(self.variables, Some(Ok(_)));
        match &self.aggregates {
            None => {}
            _ if whole => {}
            Some(Err(why)) => out.push(format!("{head}: aggregations run in dtrace ({why})")),
            Some(Ok(())) => out.push(placement(
                "aggregations run",
                self.aggs_in_kernel,
                &self.aggs_in_dtrace,
            )),
        }
        match &self.variables {
            None => {}
            // Run in dtrace at every probe (the kernel refused their programs): its variables
            // live nowhere else.
            Some(Ok(_)) if self.aggs_in_kernel == 0 => {
                out.push(placement("runs whole", 0, &self.aggs_in_dtrace))
            }
            Some(Ok(names)) => {
                let mut line = placement("runs whole", self.aggs_in_kernel, &self.aggs_in_dtrace);
                // A note after the names (`kvars::reads_at_probe_note`) follows them.
                let (names, note) = names.split_once("; ").unwrap_or((names, ""));
                let replayed = match self.replayed {
                    n if n == self.aggs_in_kernel => String::new(),
                    n => format!(" at {}", probes(n)),
                };
                let note = match note.strip_prefix(&kvars::COPYINSTR_AT_PROBE[2..]) {
                    Some(rest) if self.replayed > 0 => format!(
                        "copyinstr() reads at the probe, and a firing whose string is on a \
                         page not yet read in runs at the syscall's return instead{replayed}{rest}"
                    ),
                    _ => note.to_string(),
                };
                let sep = if note.is_empty() { "" } else { "; " };
                line.push_str(&format!(
                    " (variables {names} live in the kernel{sep}{note})"
                ));
                out.push(line);
            }
            Some(Err(why)) => out.push(format!("{head}: variables stay in dtrace ({why})")),
        }
        match &self.signals {
            None => {}
            Some(Err(why)) => out.push(format!(
                "{head}: raise() and stop() are sent by dtrace ({why})"
            )),
            Some(Ok(())) => out.push(placement(
                "raise() and stop() are sent",
                self.signals_in_kernel,
                &self.signals_in_dtrace,
            )),
        }
        match &self.records {
            None => {}
            _ if whole => {}
            Some(Err(why)) => out.push(format!("{head}: records are built in dtrace ({why})")),
            Some(Ok(())) if self.aggs_in_kernel == 0 => {
                let (probe, why) = self
                    .aggs_in_dtrace
                    .first()
                    .map_or(("every probe", "not enabled"), |(p, w)| (p, w));
                out.push(format!(
                    "{head}: records are built in dtrace (at {probe}: {why})"
                ));
            }
            Some(Ok(())) => {
                let mut line = format!(
                    "{head}: runs whole in the kernel at {} (records built at the probe)",
                    probes(self.aggs_in_kernel)
                );
                if let Some((probe, why)) = self.aggs_in_dtrace.first() {
                    line.push_str(&format!(
                        ", in dtrace at {} (at {probe}: {why})",
                        probes(self.aggs_in_dtrace.len())
                    ));
                }
                out.push(line);
            }
        }
        out
    }
}

/// The framework's description of argument `index` of `probe` (kernel and user probes alike).
pub(crate) fn arg_desc_of(probe: &Probe, index: u32) -> Option<ArgDesc> {
    let a = probe.args.get(index as usize)?;
    Some(ArgDesc {
        native: a.native.clone(),
        xlate: (a.dtype != a.native).then(|| a.dtype.clone()),
        mapping: index,
    })
}

impl Shared {
    /// The indexes of the enabled clauses whose descriptions match probe `info`.
    fn clauses_matching(&self, info: &dtrace_framework::records::ProbeInfo) -> Vec<usize> {
        self.clauses
            .iter()
            .enumerate()
            .filter(|(_, (d, _))| {
                dtrace_framework::glob::desc_matches(
                    d,
                    &info.provider,
                    &info.module,
                    &info.function,
                    &info.name,
                )
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// [`Shared::enable`] for a framework provider's `enable`, naming the probe in its error.
    pub(crate) fn enable_for_framework(
        &mut self,
        probe: &ProbeInfo,
    ) -> std::result::Result<(), ProviderError> {
        self.enable(probe).map_err(|reason| ProviderError::Enable {
            probe: format!(
                "{}:{}:{}:{}",
                probe.provider, probe.module, probe.function, probe.name
            ),
            reason,
        })
    }

    fn enable(&mut self, info: &ProbeInfo) -> std::result::Result<(), String> {
        if self.in_session.contains(&info.id) {
            self.active.insert(info.id);
            return Ok(());
        }
        if self.serve_from_file(info)? {
            return Ok(());
        }
        let desc = crate::ProbeDesc::new(&info.provider, &info.module, &info.function, &info.name);
        let probe = match self
            .catalog
            .fbt()
            .filter(|_| crate::catalog::fbt::is_provider(&desc.provider))
        {
            Some(fbt) => fbt.probe(&desc)?,
            None => self
                .catalog
                .get(&desc)
                .or_else(|| self.user.get(&desc).cloned())
                .ok_or_else(|| "no such probe in the kernel's catalogue".to_string())?,
        };
        let matching_idx = self.clauses_matching(info);
        // The aggregation-only clauses that aggregate in the kernel here, and the others.
        let kernel_aggs = self.kernel_predicates
            && self.kernel_aggregations.is_ok()
            && self.exit_at_kernel_probe.is_none();
        if !kernel_aggs && !self.placement.kernel.is_empty() {
            let why = match (&self.kernel_aggregations, &self.exit_at_kernel_probe) {
                (Err(why), _) => why.clone(),
                (Ok(()), Some(c)) => self.exit_reason(c),
                (Ok(()), None) => "kernel predicates are off".to_string(),
            };
            if self.kvars_enabled {
                return Err(format!(
                    "D variables live in the kernel, where clauses no longer run: {why}"
                ));
            }
            // Nothing runs in the kernel yet: every variable stays in dtrace.
            self.demote_variables(&why);
        }
        let matching: Vec<&ClauseNeeds> =
            matching_idx.iter().map(|&i| &self.clauses[i].1).collect();
        let (mut spec, lacks) = needs::spec_or_kernel_only(
            &matching,
            (&string_args(&probe), kernel_args(&probe)),
            self.strsize,
        )?;
        let used = matching.iter().fold(0u16, |m, n| m | n.used_args);
        if !self.kernel_predicates {
            spec.filter = None;
        }
        let placement = &self.placement;
        // A clause's store actions run at the probe when its variables live there, or when it
        // has none (an expression statement: `((uint8_t *)copyin(arg1, 32))[0];`).
        let (k_idx, r_idx): (Vec<usize>, Vec<usize>) = matching_idx.iter().partition(|&&i| {
            kernel_aggs
                && match self.kplans.get(i) {
                    Some(Ok(p)) => {
                        p.stores.is_empty()
                            || placement.in_kernel(i)
                            || p.writes_user
                            || self.tvars.get(i).is_some_and(|v| v.is_empty())
                    }
                    _ => false,
                }
        });
        // A clause that uses a kernel thread-local runs in the kernel, or nothing runs (the
        // firing's strtok() state: where it lives at this probe).
        let at = probe.desc.to_string();
        for &i in &r_idx {
            if let Some(v) = self.tvars[i]
                .iter()
                .find(|v| self.placement.keeps(v, Some(&at)))
            {
                return Err(format!(
                    "clause {}: {} lives in the kernel, where this clause cannot run (planned \
                     after the programs that placed it there)",
                    self.kernel.get(i).map_or("?", |c| c.desc.as_str()),
                    v.name
                ));
            }
        }
        if let Some(why) = lacks {
            // Only the kernel's code can serve these clauses (see `record_path_lacks`).
            if k_idx.is_empty() || !r_idx.is_empty() {
                return Err(format!("not yet supported: {why}"));
            }
            spec.record_path_lacks = Some(why);
        }
        let others = if k_idx.is_empty() {
            None
        } else {
            let r: Vec<&ClauseNeeds> = r_idx.iter().map(|&i| &self.clauses[i].1).collect();
            Some(needs::spec_for(
                &r,
                (&string_args(&probe), kernel_args(&probe)),
                self.strsize,
            )?)
        };
        if (spec.filter.is_some() || others.is_some()) && self.bypass.is_none() {
            let map = crate::bpf::Map::create(crate::bpf::MapKind::Array, "dt_nofilter", 4, 8, 1)
                .map_err(|e| e.to_string())?;
            self.bypass = Some(map);
        }
        let bypass = self.bypass.as_ref().map(|m| m.raw_fd());
        let names = probe.names_as(info.id);
        let opaque_args = opaque_args(&probe);
        // The predicates reading `epid` read it from the map dtrace fills once the framework
        // assigned the EPIDs (see `bind_epid`).
        if self.epids.is_none() && matching.iter().any(|n| n.epid && n.predicate.is_some()) {
            self.epids = Some(new_epid_map()?);
        }
        let epids = self.epids.as_ref().map(|m| m.raw_fd());
        let epids_of = |clauses: &[usize]| epids.map(|fd| (fd, clauses.to_vec()));
        // So do those reading `caller` or `stackdepth`, with the kernel's tracing ranges.
        let stacks = self.kernel_stacks(
            matching
                .iter()
                .any(|n| (n.caller || n.stackdepth) && n.predicate.is_some()),
        )?;
        if let Some(f) = &mut spec.filter {
            f.place_at(&names, opaque_args, bypass);
            f.epids = epids_of(&matching_idx);
            f.stacks = stacks;
        }
        if let Some(mut o) = others {
            if let Some(f) = &mut o.filter {
                f.place_at(&names, opaque_args, bypass);
                f.epids = epids_of(&r_idx);
                f.stacks = stacks;
            }
            let (aggs, numbers) = self.kernel_clauses(
                &k_idx,
                &r_idx,
                (o.filter, o.filter_pid),
                &names,
                opaque_args,
                bypass,
                &[&info.provider, &info.module, &info.function, &info.name],
                &at,
            )?;
            for (i, n) in numbers {
                self.built_at.insert((i, info.id), n);
            }
            let mut aggs = aggs;
            if let Some(frames) = spec.ustack {
                // A record's user stack is walked as deep as the probe's capture walks it.
                for r in aggs.clauses.iter_mut().filter_map(|c| c.record.as_mut()) {
                    r.walk_user_frames(frames);
                }
            }
            aggs.walk_key_frames(spec.ustack.filter(|_| !spec.ustack_build_id));
            spec.aggs = Some(aggs);
        }
        let probe_name = format!(
            "{}:{}:{}:{}",
            info.provider, info.module, info.function, info.name
        );
        let (sig_idx, signals) = self.plan_signals(&r_idx, &probe_name, &names, opaque_args)?;
        spec.signals = signals;
        // A raise() or stop() dtrace may have to send (the probe's program refused, or the
        // clause runs in dtrace) is sent once its record is read: the ring is then read every
        // few milliseconds (see `SIGNAL_POLL`, and why these records do not wake dtrace).
        self.signals_polled |= r_idx
            .iter()
            .any(|&i| self.ecb(i).and_then(signal::plan_signal).is_some());
        if replaces_image(info) {
            spec.retry_at_return = false;
            self.image_replaced.insert(info.id);
        }
        // A record that speaks for another thread (`on-cpu`) is filtered in the kernel on that
        // thread's id, not its process id: leave such predicates to the framework.
        if let AttachPoint::Tracepoint {
            identity: Identity::FromFields { .. },
            ..
        } = probe.attach
        {
            spec.filter_pid = None;
            if let Some(Some((_, pid))) = spec.aggs.as_mut().map(|k| k.others.as_mut()) {
                *pid = None;
            }
        }
        if let AttachPoint::RawTracepoint {
            identity: Identity::RawTask(_),
            ..
        } = probe.attach
        {
            // The record speaks for the thread going on CPU while the outgoing one still runs:
            // its user memory is not the one mapped.
            if spec.uregs {
                return Err("not yet supported: uregs[] of the thread going on CPU".into());
            }
            if spec.ustack.is_some() {
                return Err(
                    "not yet supported: the user stack (ustack(), ucaller, ustackdepth) \
                     of the thread going on CPU"
                        .into(),
                );
            }
            if let Some(cap) = spec.execargs.take() {
                self.execargs_from_proc.insert(info.id, cap);
            }
            // User reads are served from the process's memory at delivery instead, while it
            // lives: its records wake dtrace, which reads them at once.
            spec.copies.retain(|c| !c.kind.is_user());
            spec.wake_at_once = true;
        }
        if spec.ustack.is_some() && !spec.ustack_build_id {
            // Unwound at delivery with .eh_frame where the kernel's frame-pointer walk stops.
            spec.ustack_unwind = Some(crate::capture::spec::USTACK_UNWIND_BYTES);
        }
        if self.session.is_none() {
            self.session =
                Some(Session::new(self.session_opts.clone()).map_err(|e| e.to_string())?);
        }
        let arg_copies = copies_of_args(&probe, used, &mut spec)?;
        let session = self
            .session
            .as_mut()
            .ok_or_else(|| "no capture session".to_string())?;
        session
            .enable(&probe, info.id, &spec)
            .map_err(|e| e.to_string())?;
        let report = session.capture_report(info.id).cloned().unwrap_or_default();
        if spec.filter.is_some() || spec.aggs.is_some() {
            self.filtered.push(info.clone());
        }
        for (k, &i) in sig_idx.iter().enumerate() {
            let sent = report.signals.get(k).cloned().unwrap_or(Ok(()));
            if let Some(c) = self.kernel.get_mut(i) {
                match sent {
                    Ok(()) => c.signals_in_kernel += 1,
                    Err(e) => c
                        .signals_in_dtrace
                        .push((probe_name.clone(), e.to_string())),
                }
            }
            if report.signals.get(k).is_some_and(|r| r.is_ok()) {
                self.signalled.insert((i, info.id));
            }
        }
        // Where each clause's predicate and aggregations run at this probe.
        let at_kernel_probe = !fires_in_dtrace(&info.provider, &info.name);
        let run_here = self.report_placement(
            &Placed {
                matching: &matching_idx,
                kernel: &k_idx,
                others: &r_idx,
                report: &report,
                spec: &spec,
                kernel_aggs,
                at_kernel_probe,
                kept_out: &[],
                filter_off: None,
            },
            &probe_name,
        )?;
        for i in run_here {
            self.kernel_aggregated.insert((i, info.id));
        }
        self.in_session.insert(info.id);
        self.active.insert(info.id);
        if matches!(probe.attach, AttachPoint::Profile { .. }) {
            self.sampled.insert(info.id);
        }
        let ctx = crate::session::planning_shapes(&probe.attach)
            .ok()
            .and_then(|s| s.first().map(|s| s.ctx));
        if ctx.is_some_and(|ctx| {
            crate::capture::kstack::starts_in_probed_function(
                &probe.desc.provider,
                &probe.desc.name,
                ctx,
            )
        }) {
            self.own_frame.insert(info.id);
        }
        if !arg_copies.is_empty() {
            self.arg_copies.insert(info.id, arg_copies);
        }
        Ok(())
    }
}

/// What was placed at one probe, for [`Shared::report_placement`].
struct Placed<'a> {
    /// The clauses that match the probe.
    matching: &'a [usize],
    /// Those asked to run in the kernel.
    kernel: &'a [usize],
    /// The others.
    others: &'a [usize],
    /// What the capture program runs in the kernel.
    report: &'a crate::capture::codegen::CaptureReport,
    /// The probe's capture.
    spec: &'a crate::capture::CaptureSpec,
    /// Clauses may run in the kernel at all.
    kernel_aggs: bool,
    /// The probe fires in the kernel (not `BEGIN`, `END`...).
    at_kernel_probe: bool,
    /// Clauses the probe keeps out of the kernel, with why (a probe of every process).
    kept_out: &'a [(usize, String)],
    /// Why the probe's predicates run in dtrace only, when it says.
    filter_off: Option<&'a str>,
}

impl Shared {
    /// Notes in each clause's report where its predicate, aggregations and records run at
    /// probe `probe_name` (see [`Placed`]). Returns the clauses that run whole in the kernel.
    fn report_placement(
        &mut self,
        placed: &Placed<'_>,
        probe_name: &str,
    ) -> std::result::Result<Vec<usize>, String> {
        let Placed {
            matching: matching_idx,
            kernel: k_idx,
            others: r_idx,
            report,
            spec,
            kernel_aggs,
            at_kernel_probe,
            kept_out,
            filter_off,
        } = *placed;
        let kept_out = |i: usize| kept_out.iter().find(|(k, _)| *k == i).map(|(_, w)| w);
        let mut run_here = Vec::new();
        let filter_used = if report.filter_over_others {
            spec.aggs
                .as_ref()
                .and_then(|k| k.others.as_ref())
                .and_then(|(f, _)| f.as_ref())
        } else {
            spec.filter.as_ref()
        };
        let filtered_clauses: &[usize] = if report.filter_over_others {
            r_idx
        } else {
            matching_idx
        };
        // The kernel refused the probe's whole program: no clause runs there (see below).
        let whole_probe_refused = report.aggs.iter().all(|r| r.is_err());
        for &i in matching_idx {
            let in_kernel = k_idx
                .iter()
                .position(|&x| x == i)
                .map(|p| report.aggs.get(p).cloned().unwrap_or(Ok(())));
            if let Some(Ok(())) = in_kernel {
                run_here.push(i);
                self.kvars_enabled |= self.placement.in_kernel(i);
                // Its raise() or stop() is sent where its record is built.
                if let Some(c) = self.kernel.get_mut(i).filter(|c| c.signals.is_some()) {
                    c.signals_in_kernel += 1;
                }
            }
            // A clause whose variables live for the firing only (`this->`, the firing's
            // `strtok()` state) runs in dtrace with the rest of the probe when the kernel refused
            // the probe's whole program: no clause of its firings runs in the kernel there, so
            // none shares those variables from there.
            let vars_stuck_in_kernel = self.placement.in_kernel(i)
                && !(whole_probe_refused && self.placement.firing_only.contains(&i));
            if let (Some(Err(e)), true) = (&in_kernel, vars_stuck_in_kernel) {
                return Err(format!(
                    "clause {}: its variables live in the kernel, which refused it at \
                         {probe_name} ({e}); {}=0 keeps the variables in dtrace",
                    self.kernel.get(i).map_or("?", |c| c.desc.as_str()),
                    kvars::KERNEL_VARIABLES_ENV
                ));
            }
            if !matches!(in_kernel, Some(Ok(()))) {
                if let Some(why) = self.user_write_refused(i, &in_kernel, kernel_aggs) {
                    return Err(format!(
                        "clause {}: copyout() and copyoutstr() write at the probe, which cannot \
                         run them at {probe_name} ({why})",
                        self.kernel.get(i).map_or("?", |c| c.desc.as_str())
                    ));
                }
            }
            let exits = matches!(self.kplans.get(i), Some(Ok(p)) if p.exits());
            if kernel_aggs && exits && at_kernel_probe && !matches!(in_kernel, Some(Ok(()))) {
                let why = match &in_kernel {
                    Some(Err(e)) => e.to_string(),
                    _ => "the clause was planned after its probe was enabled".into(),
                };
                return Err(format!(
                    "clause {}: its exit() would stop the clauses run in the kernel, which \
                         refused it at {probe_name} ({why})",
                    self.kernel.get(i).map_or("?", |c| c.desc.as_str())
                ));
            }
            let Some(c) = self.kernel.get_mut(i) else {
                continue;
            };
            c.probes += 1;
            match (&in_kernel, &c.aggregates) {
                (Some(Ok(())), _) => {
                    c.aggs_in_kernel += 1;
                    c.replayed += usize::from(report.replay);
                }
                (Some(Err(e)), _) => {
                    c.aggs_in_dtrace
                        .push((probe_name.to_string(), e.to_string()));
                    // The kernel refused the clause, so dtrace runs it, and sends its signals.
                    if c.signals.is_some() {
                        c.signals_in_dtrace
                            .push((probe_name.to_string(), e.to_string()));
                    }
                }
                (None, _)
                    if matches!(c.aggregates, Some(Ok(())))
                        || matches!(c.records, Some(Ok(()))) =>
                {
                    let vars_stay = match self.placement.clauses.get(i) {
                        Some(Some(Err(why))) if !self.placement.in_kernel(i) => Some(why),
                        _ => None,
                    };
                    let why = match &self.kernel_aggregations {
                        _ if kept_out(i).is_some() => kept_out(i).cloned().unwrap_or_default(),
                        // It writes variables that live in dtrace, so it runs there.
                        _ if vars_stay.is_some() && self.kernel_predicates => format!(
                            "its variables stay in dtrace: {}",
                            vars_stay.map_or("", String::as_str)
                        ),
                        _ if !self.kernel_predicates => {
                            format!("kernel predicates are off ({KERNEL_PREDICATES_ENV}=0)")
                        }
                        Err(why) => why.clone(),
                        Ok(()) if self.exit_at_kernel_probe.is_some() => format!(
                            "{}; counting stops at that firing, which only dtrace sees",
                            exit_reason_of(
                                self.exit_at_kernel_probe.as_deref().unwrap_or("?"),
                                self.exit_at_kernel_probe_why.as_deref()
                            )
                        ),
                        Ok(()) => "the clause was planned after its probe was enabled".into(),
                    };
                    c.aggs_in_dtrace.push((probe_name.to_string(), why));
                }
                _ => {}
            }
            if !c.has_predicate {
                continue;
            }
            let why = match (in_kernel, filter_used) {
                (Some(Ok(())), _) => None,
                (_, Some(_)) => {
                    let k = filtered_clauses.iter().position(|&x| x == i);
                    match k.and_then(|k| report.filter.get(k)) {
                        Some(Ok(())) if report.filter.iter().all(|r| r.is_ok()) => None,
                        Some(Ok(())) => Some(
                            "another clause's predicate at the probe stays in dtrace".to_string(),
                        ),
                        Some(Err(e)) => Some(e.to_string()),
                        None => Some("a clause without a predicate is enabled on the probe".into()),
                    }
                }
                _ if !self.kernel_predicates => Some(format!(
                    "kernel predicates are off ({KERNEL_PREDICATES_ENV}=0)"
                )),
                _ if filter_off.is_some() => filter_off.map(str::to_string),
                _ => Some("a clause without a predicate is enabled on the probe".to_string()),
            };
            match why {
                None => c.in_kernel += 1,
                Some(w) => c.in_dtrace.push((probe_name.to_string(), w)),
            }
        }
        Ok(run_here)
    }
}

impl Shared {
    /// The kernel side of clauses `k_idx` (run in the kernel at a probe named `names`, with
    /// `key_names` the names its aggregation keys may hold, `probe` its description as the
    /// placement of variables names it), `r_idx` those run in dtrace there
    /// with `others` their filter and pid filter: the maps made, and each clause's number among
    /// the probe's kernel clauses (which names it in its records and faults).
    #[allow(clippy::too_many_arguments)]
    fn kernel_clauses(
        &mut self,
        k_idx: &[usize],
        r_idx: &[usize],
        others: (Option<crate::capture::KernelFilter>, Option<u32>),
        names: &dtrace_ebpf::translate::ProbeNames,
        opaque_args: crate::capture::spec::OpaqueArgs,
        bypass: Option<i32>,
        key_names: &[&str],
        probe: &str,
    ) -> std::result::Result<(crate::capture::KernelAggs, Vec<(usize, u16)>), String> {
        self.ensure_kaggs()?;
        let uses_vars = k_idx.iter().any(|&i| self.placement.in_kernel(i));
        if uses_vars && self.kvar_maps.is_none() {
            self.kvar_maps = Some(
                kvars::KernelVarMaps::new(
                    self.dynvarsize,
                    dtrace_dif::vm::dynvar::entry_size(self.dynvar_sizes.0, self.dynvar_sizes.1),
                    &self.placement,
                    self.strsize,
                )
                .map_err(|e| e.to_string())?,
            );
            // Made after BEGIN ran (a process's probe found later): its globals as BEGIN left
            // them.
            if let (Some(m), Some(values)) = (&self.kvar_maps, &self.begin_globals) {
                m.push_globals(|id| {
                    values
                        .iter()
                        .find(|(v, _)| *v == id)
                        .map(|(_, s)| s.clone())
                })
                .map_err(|e| e.to_string())?;
                m.push_arrays(&self.begin_arrays)
                    .map_err(|e| e.to_string())?;
            }
        }
        let vars = match (&self.kvar_maps, uses_vars) {
            (Some(m), true) => Some(m.kernel_vars(&self.placement, probe)),
            _ => None,
        };
        // The EPIDs of the clauses reading `epid`, which dtrace learns once the program is
        // built (see `bind_record`).
        if self.epids.is_none() && k_idx.iter().any(|&i| self.clauses[i].1.epid) {
            self.epids = Some(new_epid_map()?);
        }
        let epids = self.epids.as_ref().map(|m| m.raw_fd());
        let stacks = self.kernel_stacks(k_idx.iter().any(|&i| {
            let n = &self.clauses[i].1;
            n.caller || n.stackdepth
        }))?;
        // The maps of ustack() keys walked here (the walk's depth is set with the probe's).
        let walks = self.kernel_ustacks
            && k_idx.iter().any(|&i| {
                let n = &self.clauses[i].1;
                n.ucaller
                    || n.ustack.is_some()
                    || matches!(self.kplans.get(i), Some(Ok(p)) if p.aggs.iter().any(|g| g
                    .keys
                    .iter()
                    .any(|(_, k)| matches!(k, crate::capture::spec::KeyKind::UserStack(_)))))
            });
        if walks && self.ustack_maps.is_none() {
            self.ustack_maps = Some(ustack_maps::UstackMaps::new().map_err(|e| e.to_string())?);
        }
        let uwalk = self
            .ustack_maps
            .as_ref()
            .filter(|_| walks)
            .map(|m| m.walk(0));
        let state = self.kaggs.as_mut().ok_or("no kernel aggregations")?;
        let (control, zeros, drops, exit) = state.fds();
        let keys = state.key_scratch_fd();
        let chill = state.chill_fd();
        let mut clauses = Vec::with_capacity(k_idx.len());
        let mut numbers = Vec::with_capacity(k_idx.len());
        for &i in k_idx {
            let Some(Ok(plan)) = self.kplans.get(i) else {
                continue;
            };
            let strings = kagg::key_strings(
                &plan.aggs,
                key_names,
                self.strsize.saturating_sub(1) as usize,
            );
            let aggs = plan
                .aggs
                .iter()
                .enumerate()
                .map(|(j, p)| state.agg_for(i, j, p, &strings))
                .collect::<Result<Vec<_>>>()
                .map_err(|e| e.to_string())?;
            // Its number at the probe names it in the records it builds and the faults it
            // reports there.
            let n = u16::try_from(clauses.len()).map_err(|_| "too many clauses")?;
            numbers.push((i, n));
            clauses.push(crate::capture::KernelAggClause {
                predicate: self.clauses[i].1.predicate.clone(),
                aggs,
                stores: plan.stores.clone(),
                record: plan.record.clone(),
                after_dtrace: r_idx.iter().any(|&r| r < i),
                string_args: kagg::string_args(&self.clauses[i].1, opaque_args.user_string_mask()),
                keeps_vars: self.placement.keeps_lasting(i),
                firing_vars: self.placement.firing_only.contains(&i),
                copy_scratch: plan.copy_scratch,
            });
        }
        // The speculations, when a clause here keeps them in the kernel.
        let spec_key = (kvars::Scope::Speculations, 0);
        let specs = match k_idx.iter().any(|&i| {
            self.placement.in_kernel(i)
                && self
                    .tvars
                    .get(i)
                    .is_some_and(|v| v.iter().any(|t| t.key == spec_key))
        }) {
            false => None,
            true => {
                if self.kspec_maps.is_none() {
                    self.kspec_maps = Some(
                        speculation::KernelSpecMaps::new(self.nspec, self.specsize)
                            .map_err(|e| e.to_string())?,
                    );
                }
                self.kspec_maps
                    .as_ref()
                    .map(speculation::KernelSpecMaps::specs)
            }
        };
        let aggs = crate::capture::KernelAggs {
            clauses,
            control,
            zeros,
            drops,
            keys,
            exit,
            chill,
            strsize: self.strsize,
            scratchsize: self.scratchsize,
            names: names.clone(),
            opaque_args,
            others: (!r_idx.is_empty()).then_some(others),
            bypass,
            epids,
            stacks,
            vars,
            lasting_vars: k_idx.iter().any(|&i| self.placement.keeps_lasting(i)),
            specs,
            known: None,
            missed: None,
            uwalk,
            replay: None,
        };
        Ok((aggs, numbers))
    }
}

impl Shared {
    /// When clause `i` writes into the traced process (`copyout()`) but does not run at the probe
    /// (`in_kernel`: what the probe's program said of it, `None` when it was not planned there;
    /// `kernel_aggs`: clauses may run there at all), why: dtrace would write too late, after the
    /// thread ran on, so such a clause is refused rather than run there.
    fn user_write_refused(
        &self,
        i: usize,
        in_kernel: &Option<std::result::Result<(), dtrace_ebpf::translate::Untranslatable>>,
        kernel_aggs: bool,
    ) -> Option<String> {
        let ecb = self.ecb(i)?;
        let writes = ecb
            .predicate
            .iter()
            .chain(ecb.actions.iter().filter_map(|a| a.difo.as_ref()))
            .any(dtrace_framework::framework::calls_destructive);
        if !writes || !self.destructive {
            return None;
        }
        let vars_stay = match self.placement.clauses.get(i) {
            Some(Some(Err(why))) => Some(why),
            _ => None,
        };
        Some(match (in_kernel, self.kplans.get(i), vars_stay) {
            // Why its variables stay in dtrace says more than the translation refused without
            // them.
            (Some(Err(_)), _, Some(why)) => format!("its variables stay in dtrace: {why}"),
            (Some(Err(e)), _, _) => e.to_string(),
            (_, Some(Err(why)), _) => why.clone(),
            _ if !self.kernel_predicates => {
                format!("kernel predicates are off ({KERNEL_PREDICATES_ENV}=0)")
            }
            _ if !kernel_aggs => match (&self.kernel_aggregations, &self.exit_at_kernel_probe) {
                (Err(why), _) => why.clone(),
                (Ok(()), Some(c)) => self.exit_reason(c),
                (Ok(()), None) => "clauses do not run at this probe".into(),
            },
            _ => "the clause was planned after its probe was enabled".into(),
        })
    }

    /// Why clauses do not run in the kernel when clause `c` calls `exit()` at a kernel probe
    /// where it cannot run whole, with that clause's own reason when known.
    fn exit_reason(&self, c: &str) -> String {
        exit_reason_of(c, self.exit_at_kernel_probe_why.as_deref())
    }

    /// Makes the maps of the kernel clauses (their control switch, exit flag...), if not yet made.
    fn ensure_kaggs(&mut self) -> std::result::Result<(), String> {
        if self.kaggs.is_some() {
            return Ok(());
        }
        let mut k = kagg::KernelAggState::new(self.aggsize).map_err(|e| e.to_string())?;
        // Made after tracing started: the clock is already fixed.
        if let Some(offset) = self.clock_offset {
            k.set_clock_offset(offset);
        }
        // Made after tracing went live (a library loaded later): aggregating at once.
        if self.live_since.is_some() {
            k.set_on(true).map_err(|e| e.to_string())?;
        }
        self.kaggs = Some(k);
        Ok(())
    }

    /// Planned clause `i`.
    fn ecb(&self, i: usize) -> Option<&dtrace_dif::program::EcbDesc> {
        self.planned
            .iter()
            .rev()
            .find_map(|(p, base)| p.ecbs.get(i.checked_sub(*base)?))
    }

    /// The signals (`raise()`, `stop()`) of `clauses` (run in dtrace at a probe named by `names`
    /// with arguments `opaque_args` replaced) that the probe's program sends: the clauses, and
    /// what the program needs (none when no clause qualifies). Says in each clause's report why
    /// dtrace sends the others.
    fn plan_signals(
        &mut self,
        clauses: &[usize],
        probe_name: &str,
        names: &dtrace_ebpf::translate::ProbeNames,
        opaque_args: crate::capture::spec::OpaqueArgs,
    ) -> std::result::Result<(Vec<usize>, Option<crate::capture::KernelSignals>), String> {
        let mut idx = Vec::new();
        let mut out = Vec::new();
        for &i in clauses {
            let plan = match self.ecb(i).and_then(signal::plan_signal) {
                None => continue,
                Some(_) if !self.kernel_predicates => Err(format!(
                    "kernel predicates are off ({KERNEL_PREDICATES_ENV}=0)"
                )),
                Some(p) => p,
            };
            match plan {
                Ok(s) => {
                    idx.push(i);
                    out.push(s);
                }
                Err(why) => {
                    if let Some(c) = self.kernel.get_mut(i) {
                        c.signals_in_dtrace.push((probe_name.to_string(), why));
                    }
                }
            }
        }
        if out.is_empty() {
            return Ok((idx, None));
        }
        self.ensure_kaggs()?;
        let (control, _, _, exit) = self.kaggs.as_ref().ok_or("no kernel clauses")?.fds();
        // The clauses reading `epid` read it from the map dtrace fills (see `bind_epid`).
        if self.epids.is_none()
            && idx
                .iter()
                .any(|&i| self.clauses.get(i).is_some_and(|(_, n)| n.epid))
        {
            self.epids = Some(new_epid_map()?);
        }
        let epids = self.epids.as_ref().map(|m| (m.raw_fd(), idx.clone()));
        Ok((
            idx,
            Some(crate::capture::KernelSignals {
                clauses: out,
                control,
                exit,
                strsize: self.strsize,
                names: names.clone(),
                opaque_args,
                epids,
            }),
        ))
    }

    /// [`kagg::plan_clause`] of clause `e` of `program`, unless records are built in dtrace
    /// only.
    fn plan_clause(
        &self,
        e: &dtrace_dif::program::EcbDesc,
        program: &Program,
    ) -> std::result::Result<kagg::ClausePlan, String> {
        let strsize = needs::program_strsize(program).saturating_sub(1);
        let mut plan =
            kagg::plan_clause(e, strsize, self.kernel_ustacks).map_err(|why| {
                match &self.ustack_walk_failed {
                    Some(w) if why.contains(kagg::KERNEL_USTACKS_ENV) => {
                        format!("user stacks are walked in dtrace (not at the probe: {w})")
                    }
                    _ => why,
                }
            })?;
        plan.copy_scratch =
            (kvars::scratch_allocations(e) <= 1).then(|| needs::program_scratchsize(program));
        if plan.records() && !self.kernel_records {
            return Err(format!("kernel records are off ({KERNEL_RECORDS_ENV}=0)"));
        }
        Ok(plan)
    }

    /// Places the D variables of every planned clause (see [`kvars::place`]).
    fn place_variables(&mut self) {
        if self.kvars_enabled {
            // Variables already in use in the kernel stay there: a clause planned now that uses
            // one fails to enable (see `enable`), the others keep their variables in dtrace.
            let placed = self.placement.clauses.len();
            for vars in self.tvars.iter().skip(placed) {
                let why = "planned after the programs that placed variables in the kernel started";
                self.placement
                    .clauses
                    .push((!vars.is_empty()).then(|| Err(why.to_string())));
            }
            self.report_variables();
            return;
        }
        let off = if !self.kernel_variables {
            Some(format!(
                "kernel variables are off ({}=0)",
                kvars::KERNEL_VARIABLES_ENV
            ))
        } else if !self.kernel_predicates {
            Some(format!(
                "kernel predicates are off ({KERNEL_PREDICATES_ENV}=0)"
            ))
        } else if let Err(why) = &self.kernel_aggregations {
            Some(why.clone())
        } else {
            self.exit_at_kernel_probe
                .as_ref()
                .map(|c| self.exit_reason(c))
        };
        let vars_off_only =
            !self.kernel_variables && self.kernel_predicates && self.kernel_aggregations.is_ok();
        // The variables pointing into alloca() memory, across every planned clause.
        let alloca = kvars::alloca_vars(self.planned.iter().flat_map(|(program, _)| {
            program.ecbs.iter().map(|e| {
                e.predicate
                    .iter()
                    .chain(e.actions.iter().filter_map(|a| a.difo.as_ref()))
                    .collect::<Vec<_>>()
            })
        }));
        let mut facts = Vec::with_capacity(self.clauses.len());
        for (program, base) in &self.planned {
            for (k, e) in program.ecbs.iter().enumerate() {
                let i = base + k;
                let vars = self.tvars.get(i).cloned().unwrap_or_default();
                let plan = self.kplans.get(i);
                let records = matches!(plan, Some(Ok(p)) if p.records());
                let probes =
                    kvars::kernel_probes(e, &self.catalog, &mut self.user, self.perf_profile);
                // With only the kernel's variables off, a clause without variables may still run
                // whole in the kernel.
                let off = off.as_ref().filter(|_| !(vars_off_only && vars.is_empty()));
                let whole = match (off, plan, &probes) {
                    // Nothing to check: a variable the kernel does not keep.
                    _ if vars.iter().any(|v| v.not_kept().is_some()) => Ok(false),
                    (_, _, Err(why)) => Err(why.clone()),
                    (Some(why), _, _) => Err(why.clone()),
                    (None, Some(plan), Ok(probes)) => kvars::runs_whole(
                        e,
                        plan,
                        probes,
                        &vars,
                        &alloca,
                        (self.strsize, self.scratchsize),
                        (self.nspec, self.specsize),
                    ),
                    (None, None, _) => Err("not planned".into()),
                };
                let faults = matches!(whole, Ok(true));
                let whole = whole.map(|_| ());
                facts.push(kvars::ClauseFacts {
                    desc: self
                        .kernel
                        .get(i)
                        .map_or_else(String::new, |c| c.desc.clone()),
                    vars,
                    whole,
                    records,
                    faults,
                    probes: probes
                        .map(|ps| ps.iter().map(|p| p.desc.to_string()).collect())
                        .unwrap_or_default(),
                    bookend: kvars::is_bookend(&e.probe),
                });
            }
        }
        self.placement = kvars::place(&facts);
        self.placement.alloca = alloca;
        // A clause kept whole in the kernel reads its strings there, as DTrace does: -v says so
        // (one whose variables live for the firing only reads them first, as one without).
        for (program, base) in &self.planned {
            for (k, e) in program.ecbs.iter().enumerate() {
                let i = base + k;
                let firing_only = self.tvars.get(i).is_some_and(|vs| {
                    !vs.is_empty() && vs.iter().all(|v| v.key.0 == kvars::Scope::Clause)
                });
                if firing_only && self.placement.in_kernel(i) && !exits_at_kernel_probe(e) {
                    self.placement.firing_only.insert(i);
                    continue;
                }
                if let Some(Some(Ok(names))) = self.placement.clauses.get_mut(i) {
                    if let Some(note) = kvars::reads_at_probe_note(e) {
                        names.push_str(note);
                    }
                }
            }
        }
        // A clause calling exit() at a kernel probe that cannot run whole there keeps every
        // clause in dtrace: only dtrace would know when tracing stopped.
        let mut exiting = None;
        for (program, base) in &self.planned {
            for (k, e) in program.ecbs.iter().enumerate() {
                let i = base + k;
                if exiting.is_none() && exits_at_kernel_probe(e) {
                    if let Some(why) = kvars::kept_from_kernel(&facts, i, &self.placement) {
                        exiting = Some((desc_of(e), Some(why)));
                    }
                }
            }
        }
        // (Where nothing runs in the kernel anyway, there is nothing to stop.)
        let kernel_runs = off.is_none() || vars_off_only;
        if let (Some((c, why)), true, true) =
            (exiting, kernel_runs, self.exit_at_kernel_probe.is_none())
        {
            self.exit_at_kernel_probe = Some(c);
            self.exit_at_kernel_probe_why = why;
            return self.place_variables();
        }
        self.report_variables();
    }

    /// The maps the code at a probe reads `caller` and `stackdepth` with, made when `wanted` and
    /// not made yet; `None` when not wanted or no tracing ranges were read (the clauses then
    /// read them in dtrace).
    fn kernel_stacks(
        &mut self,
        wanted: bool,
    ) -> std::result::Result<Option<crate::capture::KernelStacks>, String> {
        if !wanted {
            return Ok(None);
        }
        if self.kstacks.is_none() {
            let Some(ranges) = &self.tracing_ranges else {
                return Ok(None);
            };
            self.kstacks = Some(KernelStackMaps::new(ranges)?);
        }
        Ok(self.kstacks.as_ref().map(KernelStackMaps::stacks))
    }

    /// Keeps every thread-local in dtrace, saying `why`.
    fn demote_variables(&mut self, why: &str) {
        for c in self.placement.clauses.iter_mut().flatten() {
            *c = Err(why.to_string());
        }
        self.placement.kernel.clear();
        self.placement.arrays.clear();
        self.placement.shared.clear();
        self.placement.strtok.clear();
        self.report_variables();
    }

    fn report_variables(&mut self) {
        for (i, (c, p)) in self
            .kernel
            .iter_mut()
            .zip(&self.placement.clauses)
            .enumerate()
        {
            c.variables = p.clone();
            c.shares_globals = self.placement.shared.get(&i).cloned();
        }
    }
}

/// Arguments of `probe` whose data lives in the record (`__data_loc` strings, inline arrays) are
/// captured when a clause reads them (bit n of `used`: argument n); the argument's value becomes
/// the captured address. Adds their copies to `spec`; returns (argument, copy index) pairs.
fn copies_of_args(
    probe: &Probe,
    used: u16,
    spec: &mut crate::capture::CaptureSpec,
) -> std::result::Result<Vec<(usize, usize)>, String> {
    let mut arg_copies = Vec::new();
    for (i, a) in probe.args.iter().enumerate().take(10) {
        let Some(c) = &a.copy else { continue };
        if used & (1 << i) == 0 {
            continue;
        }
        let idx = match spec.copies.iter().position(|o| o == c) {
            Some(idx) => idx,
            None => {
                if spec.copies.len() >= MAX_COPIES {
                    return Err(format!(
                        "not yet supported: more than {MAX_COPIES} distinct memory copies at one probe"
                    ));
                }
                spec.copies.push(c.clone());
                spec.copies.len() - 1
            }
        };
        arg_copies.push((i, idx));
    }
    Ok(arg_copies)
}

/// The arguments of `probe` whose value delivery replaces (the address of data copied at the
/// probe): the kernel cannot read them as the interpreter does, but for the strings of the
/// tracepoint's own record and the user strings at the arguments' values.
pub(crate) fn opaque_args(probe: &Probe) -> crate::capture::spec::OpaqueArgs {
    use crate::capture::spec::{OpaqueArgs, RecordString};
    use crate::capture::{AddrBase, MemKind};
    let mut o = OpaqueArgs::default();
    for (i, a) in probe.args.iter().enumerate().take(16) {
        let Some(c) = &a.copy else { continue };
        o.mask |= 1 << i;
        let plain = c.addr.offset == 0
            && c.addr.derefs.is_empty()
            && c.addr.user_derefs.is_empty()
            && c.addr.index.is_none()
            && c.size_arg.is_none();
        if plain
            && c.kind == MemKind::KernelString
            && matches!(c.addr.base, AddrBase::Context(_) | AddrBase::DataLoc(_))
        {
            o.record_strings[i] = Some(RecordString {
                base: c.addr.base,
                size: c.size,
            });
        }
        if plain && c.kind == MemKind::UserString && c.addr.base == AddrBase::Arg(i) {
            o.user_strings[i] = Some(c.size);
        }
    }
    o
}

/// `provider:module:function:name` of clause `e`.
fn desc_of(e: &dtrace_dif::program::EcbDesc) -> String {
    let d = &e.probe;
    format!("{}:{}:{}:{}", d.provider, d.module, d.function, d.name)
}

/// Whether a probe named `name` of `provider` is `BEGIN`, `END`, `ERROR` or a `tick-N` timer,
/// whose `exit()` dtrace sees first (timers fire in dtrace where perf events cannot drive them).
fn fires_in_dtrace(provider: &str, name: &str) -> bool {
    provider == "dtrace" || matches!(name, "BEGIN" | "END" | "ERROR") || name.starts_with("tick-")
}

/// Whether clause `e` calls `exit()` at a probe other than `BEGIN`, `END`, `ERROR` and the
/// `tick-N` timers (see [`fires_in_dtrace`]).
fn exits_at_kernel_probe(e: &dtrace_dif::program::EcbDesc) -> bool {
    let d = &e.probe;
    !fires_in_dtrace(&d.provider, &d.name)
        && e.actions
            .iter()
            .any(|a| a.kind == dtrace_dif::program::ActionKind::Exit)
}

/// Whether `info` is the entry of a system call that replaces the process's image when it succeeds.
fn replaces_image(info: &ProbeInfo) -> bool {
    info.provider == "syscall"
        && info.name == "entry"
        && matches!(info.function.as_str(), "execve" | "execveat")
}

/// Whether `program` records user stacks or user symbols, or formats with `%A`: then the
/// consumer will resolve user addresses, perhaps after the process is gone.
pub fn prints_user_symbols(program: &Program) -> bool {
    use dtrace_dif::program::ActionKind as K;
    let by_action = program
        .ecbs
        .iter()
        .flat_map(|e| &e.actions)
        .any(|a| matches!(a.kind, K::Ustack | K::Jstack | K::Usym | K::Umod | K::Uaddr));
    by_action || program.formats.iter().any(|f| has_uaddr_conversion(f))
}

/// Whether a printf format has a `%A` conversion (flags, width and precision allowed).
fn has_uaddr_conversion(format: &[u8]) -> bool {
    let b = format;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        i += 1;
        if b.get(i) == Some(&b'%') {
            i += 1;
            continue;
        }
        while i < b.len() && b"-+ #0123456789.*?@'".contains(&b[i]) {
            i += 1;
        }
        if b.get(i) == Some(&b'A') {
            return true;
        }
    }
    false
}

/// Arguments of `probe` that point at user strings (`char *`), for clauses whose `copyinstr`
/// address is computed.
/// Whether probe `probe`'s arguments are kernel values (`fbt`'s: the traced function's own), so
/// a string at an argument's value is kernel memory.
fn kernel_args(probe: &Probe) -> bool {
    probe.desc.provider == "fbt"
}

fn string_args(probe: &Probe) -> Vec<usize> {
    probe
        .args
        .iter()
        .enumerate()
        .filter(|(_, a)| a.copy.is_none() && a.native.contains("char") && a.native.contains('*'))
        .map(|(i, _)| i)
        .take(MAX_COPIES)
        .collect()
}

/// How often the ring is read at least while a clause's `raise()` or `stop()` may be sent by
/// dtrace: the one clock left on the ring (records dtrace completes from the process at delivery
/// wake it instead, see `CaptureSpec::wake_at_once`). These records do not wake dtrace: the
/// harness of Oracle's suite starts a trigger as `bash -c "exec TRIGGER"` just before dtrace,
/// and bash's own `ioctl()`s (the trigger's pid, before the exec) can fire
/// actions/raise/tst.raise1.d's probe; its SIGINT sent at once kills bash, one sent a few
/// milliseconds later usually finds the trigger, which blocks it (the test passed 7 runs in 10
/// with these records waking dtrace, 9 in 10 on this clock).
pub const SIGNAL_POLL: std::time::Duration = std::time::Duration::from_millis(5);

/// The Linux providers of one tracing session, shared between the framework (which owns the
/// [`Provider`] handles) and the thread driving the framework (which pumps events).
#[derive(Clone)]
pub struct LinuxTracing {
    shared: Arc<Mutex<Shared>>,
    symbols: Arc<Mutex<Symbolizer>>,
}

impl LinuxTracing {
    /// Providers over `catalog`; kernel objects are created with `opts` at the first enabling.
    pub fn new(catalog: Catalog, opts: SessionOptions) -> LinuxTracing {
        LinuxTracing {
            shared: Arc::new(Mutex::new(Shared {
                catalog,
                session: None,
                session_opts: opts,
                clauses: Vec::new(),
                strsize: needs::DEFAULT_STRING_STORAGE,
                scratchsize: None,
                in_session: HashSet::new(),
                active: Default::default(),
                arg_copies: Default::default(),
                sampled: Default::default(),
                own_frame: Default::default(),
                perf_profile: false,
                execargs_from_proc: Default::default(),
                image_replaced: Default::default(),
                note_processes: false,
                clock_offset: None,
                live_since: None,
                mirror_ctx: needs::MirrorContext::default(),
                user: Default::default(),
                kernel: Vec::new(),
                planned: Vec::new(),
                kernel_predicates: std::env::var_os(KERNEL_PREDICATES_ENV).is_none_or(|v| v != "0"),
                bypass: None,
                epids: None,
                tracing_ranges: None,
                kstacks: None,
                filtered: Vec::new(),
                known_processes: None,
                missed_announcements: None,
                bypassed: false,
                btf_hold: None,
                kplans: Vec::new(),
                tvars: Vec::new(),
                placement: kvars::Placement::default(),
                kvar_maps: None,
                nspec: 1,
                specsize: dtrace_framework::options::Options::default().specsize,
                kspec_maps: None,
                begin_globals: None,
                begin_arrays: Vec::new(),
                dynvarsize: 1 << 20,
                dynvar_sizes: (0, 0),
                kernel_variables: std::env::var_os(kvars::KERNEL_VARIABLES_ENV)
                    .is_none_or(|v| v != "0"),
                kvars_enabled: false,
                kernel_aggregations: Err("kernel aggregations are off".into()),
                kaggs: None,
                aggsize: 4 << 20,
                kernel_aggregated: HashSet::new(),
                exit_at_kernel_probe: None,
                exit_at_kernel_probe_why: None,
                kernel_records: std::env::var_os(KERNEL_RECORDS_ENV).is_none_or(|v| v != "0"),
                destructive: false,
                kernel_ustacks: std::env::var_os(kagg::KERNEL_USTACKS_ENV).is_none_or(|v| v != "0"),
                ustack_maps: None,
                ustack_walk_failed: None,
                built_at: Default::default(),
                signalled: HashSet::new(),
                signals_polled: false,
                built_epids: Default::default(),
            })),
            symbols: Arc::new(Mutex::new(Symbolizer::new())),
        }
    }

    /// Providers over this kernel's catalogue (read from tracefs, mounting it if needed).
    pub fn load() -> Result<LinuxTracing> {
        Ok(LinuxTracing::new(
            Catalog::load()?,
            SessionOptions::default(),
        ))
    }

    /// The types D sees for `args[]` of the probes `desc` matches (globs allowed), when every
    /// matching probe has the same ones; `None` when none match or they differ (as DTrace leaves
    /// `args[]` untyped then).
    pub fn arg_types(&self, desc: &crate::ProbeDesc) -> Option<Vec<String>> {
        let probes = self.probes_for_types(desc)?;
        let mut common: Option<Vec<String>> = None;
        for p in probes {
            let t: Vec<String> = p.args.iter().map(|a| a.dtype.clone()).collect();
            match &common {
                Some(c) if *c != t => return None,
                Some(_) => {}
                None => common = Some(t),
            }
        }
        common
    }

    /// Whether `desc` names one of the kernel's providers (exactly, not a per-process one) and
    /// matches none of its probes: a kernel's probes are all known, so such a description never
    /// matches (`sched:::enqueue` where the kernel offers no run-queue probe).
    pub fn matches_no_kernel_probe(&self, desc: &crate::ProbeDesc) -> bool {
        if crate::catalog::glob::has_meta(&desc.provider)
            || crate::catalog::pid::split_provider(&desc.provider).is_some()
        {
            return false;
        }
        let sh = self.lock();
        sh.catalog.descs().any(|d| d.provider == desc.provider)
            && matches!(
                sh.catalog.matching(desc),
                Err(crate::LinuxError::NoSuchProbe(_))
            )
    }

    /// The probes `desc` matches, of the kernel's catalog or of a per-process provider
    /// (`myprov1234`, whose USDT probes type their arguments).
    fn probes_for_types(&self, desc: &crate::ProbeDesc) -> Option<Vec<crate::catalog::Probe>> {
        let mut sh = self.lock();
        if crate::catalog::pid::split_provider(&desc.provider).is_some() {
            return sh.user.matching_for_types(desc);
        }
        sh.catalog.matching(desc).ok()
    }

    /// The native types of the same arguments (as [`Self::arg_types`]), for the compiler to
    /// translate an argument whose D type differs (`psinfo_t *` from `struct task_struct *`).
    pub fn arg_native_types(&self, desc: &crate::ProbeDesc) -> Option<Vec<String>> {
        let probes = self.probes_for_types(desc)?;
        let mut common: Option<Vec<String>> = None;
        for p in probes {
            let t: Vec<String> = p.args.iter().map(|a| a.native.clone()).collect();
            match &common {
                Some(c) if *c != t => return None,
                Some(_) => {}
                None => common = Some(t),
            }
        }
        common
    }

    /// The symbolizer that remembers the mappings of every process an event came from (noted at
    /// delivery, while the process lives), for the consumer to print stacks and symbols with.
    pub fn symbolizer(&self) -> Arc<Mutex<Symbolizer>> {
        self.symbols.clone()
    }

    /// Reads the kernel's symbols (once) and keeps their tracing ranges for the probes' code
    /// (`Shared::tracing_ranges`). Takes one lock at a time.
    fn note_tracing_ranges(&self) {
        if self.lock().tracing_ranges.is_some() {
            return;
        }
        let ranges = self
            .lock_symbols()
            .kernel_symbols()
            .tracing_ranges()
            .to_vec();
        self.lock().tracing_ranges = Some(ranges);
    }

    pub(crate) fn lock_symbols(&self) -> MutexGuard<'_, Symbolizer> {
        self.symbols.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic while holding the lock leaves plain data behind; keep using it.
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The provider handles to register, one per provider name of [`PROVIDERS`] the catalogue has.
    pub fn providers(&self) -> Vec<Box<dyn Provider>> {
        let mut names: BTreeSet<String> = self
            .lock()
            .catalog
            .descs()
            .map(|d| d.provider.clone())
            .collect();
        if crate::features::fbt_support().is_ok() {
            names.insert("fbt".into());
        }
        if crate::features::rawfbt_support().is_ok() {
            names.insert("rawfbt".into());
        }
        PROVIDERS
            .iter()
            .filter(|n| names.contains(**n))
            .map(|n| {
                Box::new(LinuxProvider {
                    name: n.to_string(),
                    shared: self.clone(),
                }) as Box<dyn Provider>
            })
            .collect()
    }

    /// Registers every provider with `fw`, and drives its `profile` probes from perf events when
    /// [`profile::perf_profile_available`].
    pub fn register(&self, fw: &mut Framework) -> std::result::Result<(), FrameworkError> {
        for p in self.providers() {
            fw.register_provider(p)?;
        }
        if profile::perf_profile_available() {
            self.drive_profile(fw);
        }
        Ok(())
    }

    /// Makes `fw`'s `profile` probes fire from perf events of this session.
    pub fn drive_profile(&self, fw: &mut Framework) {
        fw.set_profile_driver(Box::new(profile::PerfProfileDriver::new(self.clone())));
        self.lock().perf_profile = true;
    }

    /// Records what `program`'s clauses read, so the probes they enable capture it. Call before
    /// `Framework::enable(program)`.
    pub fn plan(&self, program: &Program) {
        if self.lock().planned.iter().any(|(p, _)| p == program) {
            return;
        }
        let ctx = self.lock().mirror_ctx.clone();
        let n = needs::program_needs_in(program, &ctx);
        if n.clauses
            .iter()
            .any(|(_, c)| c.kstack.is_some() || c.caller)
        {
            // Kernel stacks are trimmed at delivery with the kernel's symbols: read them now,
            // not while events wait in the ring; the probes' code cuts its own with the same.
            self.note_tracing_ranges();
        }
        let user_symbols = prints_user_symbols(program);
        if user_symbols {
            // Mappings followed from now on: processes that exit before their events are read
            // still resolve (without the rings, /proc at delivery, as before).
            let _ = self.lock_symbols().track_mappings();
        }
        let mut sh = self.lock();
        let beyond_dtrace = n
            .clauses
            .iter()
            .any(|(d, _)| !kvars::names_dtrace_probes_only(d));
        if sh.btf_hold.is_none() && beyond_dtrace {
            sh.btf_hold = crate::btf::Btf::load_vmlinux().ok();
        }
        if sh.kernel_ustacks
            && sh.ustack_maps.is_none()
            && n.clauses
                .iter()
                .any(|(_, c)| c.ustack.is_some() || c.ucaller)
        {
            // The walk's maps, made now: when they cannot be, user stacks are walked in dtrace.
            match ustack_maps::UstackMaps::new() {
                Ok(m) => sh.ustack_maps = Some(m),
                Err(e) => {
                    sh.kernel_ustacks = false;
                    sh.ustack_walk_failed = Some(e.to_string());
                }
            }
        }
        let late = n.clauses.iter().any(|(d, _)| {
            sh.filtered.iter().any(|p| {
                dtrace_framework::glob::desc_matches(
                    d,
                    &p.provider,
                    &p.module,
                    &p.function,
                    &p.name,
                )
            })
        });
        if late && !sh.bypassed {
            // A probe already filtered in the kernel gets a clause its filter does not know: every
            // firing records from now on, and the interpreter decides.
            if let Some(m) = &sh.bypass {
                let _ = m.update(&0u32.to_ne_bytes(), &1u64.to_ne_bytes());
            }
            sh.bypassed = true;
        }
        sh.note_processes |= user_symbols;
        // The largest of the programs' (the default is a program's until one is planned).
        let strsize = needs::program_strsize(program);
        let scratchsize = needs::program_scratchsize(program);
        (sh.strsize, sh.scratchsize) = if sh.clauses.is_empty() {
            (strsize, Some(scratchsize))
        } else {
            (
                sh.strsize.max(strsize),
                sh.scratchsize.filter(|&s| s == scratchsize),
            )
        };
        let base = sh.clauses.len();
        if sh.exit_at_kernel_probe.is_none() {
            // A clause that builds its exit() record at the probe stops the kernel's clauses
            // itself; whether it can is checked once every program is planned.
            let refused = program.ecbs.iter().find_map(|e| {
                if !exits_at_kernel_probe(e) {
                    return None;
                }
                Some((desc_of(e), sh.plan_clause(e, program).err()?))
            });
            if let Some((c, why)) = refused {
                sh.exit_at_kernel_probe = Some(c);
                sh.exit_at_kernel_probe_why = Some(why);
            }
        }
        for ((d, c), e) in n.clauses.iter().zip(&program.ecbs) {
            let desc = format!("{}:{}:{}:{}", d.provider, d.module, d.function, d.name);
            let plan = sh.plan_clause(e, program);
            let has_aggs = e.actions.iter().any(|a| a.kind.is_aggregation());
            let strsize = sh.strsize;
            sh.tvars
                .push(kvars::thread_vars(e, strsize.saturating_sub(1)));
            sh.kernel.push(ClauseKernel {
                desc,
                has_predicate: c.predicate.is_some(),
                // Stores run in the kernel only with the variables they store (see
                // `place_variables`, which says so in `variables`).
                aggregates: has_aggs.then(|| match &plan {
                    Ok(p) if p.stores.is_empty() => Ok(()),
                    Ok(_) => Err("the clause has actions other than aggregations".into()),
                    Err(e) => Err(e.clone()),
                }),
                records: kagg::records_data(e)
                    .then(|| plan.as_ref().map(|_| ()).map_err(Clone::clone)),
                signals: signal::plan_signal(e).map(|p| p.map(|_| ())),
                ..ClauseKernel::default()
            });
            sh.kplans.push(plan);
        }
        sh.clauses.extend(n.clauses);
        sh.planned.push((program.clone(), base));
        drop(sh);
        self.warm_user_walks();
    }

    /// Lays out the rows of dtrace's own libraries for the user stack walks at the probe, when
    /// some clause walks there (see `UstackMaps::warm`). (Holds the symbols, then the shared
    /// state.)
    fn warm_user_walks(&self) {
        if self.lock().ustack_maps.is_none() {
            return;
        }
        let mut syms = self.lock_symbols();
        if let Some(m) = self.lock().ustack_maps.as_mut() {
            m.warm(&mut syms);
        }
    }

    /// Plans `program` in place of `original` (the same program with its probe descriptions
    /// rewritten, see [`LinuxTracing::prepare_user`]): the rewritten clauses take the original's
    /// places, so no clause is planned twice. Plans `program` when `original` was not planned.
    pub fn plan_replacing(&self, original: &Program, program: &Program) {
        if original == program {
            return self.plan(program);
        }
        let ctx = self.lock().mirror_ctx.clone();
        let n = needs::program_needs_in(program, &ctx);
        if n.clauses.iter().any(|(_, c)| c.caller || c.stackdepth) {
            self.note_tracing_ranges();
        }
        let mut sh = self.lock();
        let Some(at) = sh.planned.iter().rposition(|(p, _)| p == original) else {
            drop(sh);
            return self.plan(program);
        };
        let base = sh.planned[at].1;
        // The program now carries the handle's strsize (`-x strsize`): the session's is the
        // largest of the programs', and variables are placed again with it.
        let before = sh.strsize;
        sh.strsize = sh
            .planned
            .iter()
            .enumerate()
            .map(|(j, (p, _))| needs::program_strsize(if j == at { program } else { p }))
            .max()
            .unwrap_or(before);
        // Likewise its scratchsize: alloca() runs at the probe while the programs agree on it.
        let sizes: Vec<u64> = (sh.planned.iter().enumerate())
            .map(|(j, (p, _))| needs::program_scratchsize(if j == at { program } else { p }))
            .collect();
        sh.scratchsize = sizes
            .first()
            .copied()
            .filter(|s| sizes.iter().all(|t| t == s));
        let strsize = sh.strsize;
        for (k, ((d, c), e)) in n.clauses.into_iter().zip(&program.ecbs).enumerate() {
            let i = base + k;
            let plan = sh.plan_clause(e, program);
            if let Some(kc) = sh.kernel.get_mut(i) {
                kc.desc = format!("{}:{}:{}:{}", d.provider, d.module, d.function, d.name);
                kc.records =
                    kagg::records_data(e).then(|| plan.as_ref().map(|_| ()).map_err(Clone::clone));
            }
            if let Some(p) = sh.kplans.get_mut(i) {
                *p = plan;
            }
            if let Some(t) = sh.tvars.get_mut(i) {
                *t = kvars::thread_vars(e, strsize.saturating_sub(1));
            }
            if let Some(slot) = sh.clauses.get_mut(i) {
                *slot = (d, c);
            }
        }
        sh.planned[at].0 = program.clone();
        if strsize != before && !sh.kvars_enabled {
            sh.place_variables();
        }
    }

    /// Where the clauses of `program` (planned) start among the planned clauses: its clause `k`
    /// is clause `base + k` of [`LinuxTracing::aggregates_in_kernel`].
    pub fn clause_base(&self, program: &Program) -> Option<usize> {
        let sh = self.lock();
        sh.planned
            .iter()
            .rev()
            .find(|(p, _)| p == program)
            .map(|(_, b)| *b)
    }

    /// Whether the kernel computes the aggregations of planned clause `clause` at probe `probe`
    /// (the framework then does not run the clause there).
    pub fn aggregates_in_kernel(&self, clause: usize, probe: u32) -> bool {
        self.lock().kernel_aggregated.contains(&(clause, probe))
    }

    /// Whether probe `probe` sends the `raise()` or `stop()` of planned clause `clause` itself
    /// (the framework then records the firing and sends nothing, see
    /// `Framework::signal_elsewhere`).
    pub fn signals_in_kernel(&self, clause: usize, probe: u32) -> bool {
        self.lock().signalled.contains(&(clause, probe))
    }

    /// Tells which EPID planned clause `clause` has at probe `probe`, run there by the kernel
    /// (whose faults it reports, and whose record it builds when it records), with the size and
    /// record descriptions the framework laid the ECB out with: they must be those the kernel
    /// writes, else the enabling fails.
    pub fn bind_record(
        &self,
        clause: usize,
        probe: u32,
        epid: u32,
        size: u32,
        recs: &[RecDesc],
    ) -> Result<()> {
        let mut sh = self.lock();
        let Some(&n) = sh.built_at.get(&(clause, probe)) else {
            return Ok(());
        };
        let (planned, records) = match sh.kplans.get(clause) {
            Some(Ok(p)) => (p.record.as_ref(), p.records()),
            _ => (None, true),
        };
        if records && planned.is_none_or(|r| r.size != size || r.recs != recs) {
            return Err(LinuxError::Unavailable(format!(
                "clause {}: the record built at the probe is not laid out as dtrace's",
                sh.kernel.get(clause).map_or("?", |c| c.desc.as_str())
            )));
        }
        if let Some(m) = &sh.epids {
            let key = crate::capture::filter::epid_key(probe, n);
            m.update(&key.to_ne_bytes(), &u64::from(epid).to_ne_bytes())
                .map_err(|e| {
                    LinuxError::Unavailable(format!(
                        "clause {}: its EPID cannot be told to the probe: {e}",
                        sh.kernel.get(clause).map_or("?", |c| c.desc.as_str())
                    ))
                })?;
        }
        let at = deliver::BuiltAt {
            epid,
            size,
            stacks: planned.map(|r| r.stack_tails()).unwrap_or_default(),
            ustack: planned.and_then(|r| r.ustack_tail()),
        };
        sh.built_epids.insert((probe, n), at);
        Ok(())
    }

    /// Tells which EPID planned clause `clause` has at probe `probe`, for its predicate run at
    /// the probe when it reads `epid` (see `capture::filter::clause_epid_key`); call for every
    /// ECB the framework creates, before tracing starts or its probe is placed. A predicate
    /// whose EPID the map lacks (full, or never told) faults at the probe, which records the
    /// firing for the interpreter: what it prints is the same, so a failed update is no error.
    pub fn bind_epid(&self, clause: usize, probe: u32, epid: u32) {
        let sh = self.lock();
        let reads = sh.clauses.get(clause).is_some_and(|(_, n)| n.epid);
        if let (true, Some(m), Some(key)) = (
            reads,
            &sh.epids,
            crate::capture::filter::clause_epid_key(probe, clause),
        ) {
            let _ = m.update(&key.to_ne_bytes(), &u64::from(epid).to_ne_bytes());
        }
    }

    /// Tells which framework aggregation (id and records) aggregation `index` of planned clause
    /// `clause` feeds.
    pub fn bind_aggregation(&self, clause: usize, index: usize, aggid: u32, recs: &[RecDesc]) {
        if let Some(k) = self.lock().kaggs.as_mut() {
            k.bind(clause, index, aggid, recs);
        }
    }

    /// Lets aggregation-only clauses aggregate in the kernel (`Ok`), or says why they do not
    /// (shown by `dtrace -v`), for probes enabled afterwards (off until called). The framework's
    /// driver then has to do its part: mark the enabled probes
    /// whose aggregations run in the kernel with `Framework::run_elsewhere` and bind their
    /// aggregations ([`LinuxTracing::aggregates_in_kernel`], [`LinuxTracing::bind_aggregation`]),
    /// turn them on after BEGIN and off before END ([`LinuxTracing::kernel_aggregations_on`]), and
    /// add [`LinuxTracing::kernel_aggregations`] to each snapshot, as `dtrace_open`'s tracer does.
    pub fn set_kernel_aggregations(&self, on: std::result::Result<(), String>) {
        self.lock().kernel_aggregations = on;
    }

    /// Sets `aggsize`, which bounds the kernel aggregations' maps made afterwards.
    pub fn set_aggsize(&self, bytes: u64) {
        self.lock().aggsize = bytes.max(1);
    }

    /// Turns the kernel aggregations on (after BEGIN) or off (before END).
    pub fn kernel_aggregations_on(&self, on: bool) -> Result<()> {
        match self.lock().kaggs.as_mut() {
            Some(k) => k.set_on(on),
            None => Ok(()),
        }
    }

    /// Forgets, in the kernel, the mappings of the user stack walks of the processes whose
    /// mappings `syms` saw replaced (see `Symbolizer::take_remapped`): their next firings go to
    /// dtrace, which loads them again. (Holds `syms`, then the shared state.)
    pub(crate) fn forget_remapped(&self, syms: &mut Symbolizer) {
        let mut sh = self.lock();
        if let Some(m) = sh.ustack_maps.as_mut() {
            // A process whose ranges cannot be deleted is left as it is: the next remap or
            // exec tries again.
            let _ = m.forget(&syms.take_remapped());
        }
    }

    /// Loads the ranges of the processes the user stack walks at the probe took by their files
    /// (see `UstackMaps::load_routed`). (Holds the symbols, then the shared state.)
    fn load_routed(&self, syms: &mut Symbolizer) {
        let mut sh = self.lock();
        if let Some(m) = sh.ustack_maps.as_mut() {
            // A map that fails to read leaves the processes to their files until the next
            // snapshot.
            let _ = m.load_routed(syms, deliver::monotonic_ns());
        }
    }

    /// What the kernel aggregated since the previous call, as the framework's records, and the
    /// updates it lost per CPU (a map was full).
    pub fn kernel_aggregations(&self) -> Result<(Vec<AggRecord>, kagg::CpuDrops)> {
        {
            let mut syms = self.lock_symbols();
            self.forget_remapped(&mut syms);
            self.load_routed(&mut syms);
        }
        let (mut snap, drops) = match self.lock().kaggs.as_mut() {
            Some(k) => (k.snapshot()?, k.take_drops()?),
            None => return Ok((Vec::new(), Vec::new())),
        };
        if !snap.cuts.is_empty() || !snap.pids.is_empty() {
            let mut syms = self.lock_symbols();
            for &pid in &snap.pids {
                // Remembered while the process lives, as at delivery.
                syms.note_process(pid);
            }
            let kernel = syms.kernel_symbols();
            snap.cut_tracing_frames(|pcs| kernel.tracing_prefix(pcs));
        }
        Ok((snap.records, drops))
    }

    /// Plans every program of the consumer before any is enabled (see [`LinuxTracing::plan`]), so
    /// a probe enabled by the first program already knows the clauses a later one enables on it
    /// (its kernel filters and captures serve them all).
    pub fn plan_all(&self, programs: &[&Program]) {
        self.plan_mirrors(programs);
        for p in programs {
            self.plan(p);
        }
        self.lock().place_variables();
    }

    /// The status of the first `exit()` a clause called in the kernel, if one did (its record
    /// ends tracing when dtrace commits it; this serves when the ring had no room for it).
    pub fn kernel_exit(&self) -> Result<Option<i32>> {
        match self.lock().kaggs.as_ref() {
            Some(k) => k.exited(),
            None => Ok(None),
        }
    }

    /// Sets `dynvarsize`, which bounds the kernel's map of thread-locals (made afterwards).
    pub fn set_dynvarsize(&self, bytes: u64) {
        self.lock().dynvarsize = bytes.max(1);
    }

    /// Sets `nspec`, the speculations the kernel keeps when clauses use them there (planned
    /// afterwards).
    pub fn set_nspec(&self, nspec: u64) {
        let mut sh = self.lock();
        let nspec = u32::try_from(nspec.max(1)).unwrap_or(u32::MAX);
        if sh.nspec != nspec {
            sh.nspec = nspec;
            // Planned already (every program is, before the first is enabled): placed again.
            if !sh.kvars_enabled && !sh.planned.is_empty() {
                sh.place_variables();
            }
        }
    }

    /// Sets `specsize`, the bytes a speculation keeps per CPU: a clause whose record is larger
    /// never speculates at the probe (before its probes are enabled).
    pub fn set_specsize(&self, bytes: u64) {
        self.lock().specsize = bytes;
    }

    /// What the speculations counted in the kernel since the previous call: the
    /// `speculation()` calls that failed, and the speculative drops (see
    /// [`speculation::SpecCounts`]).
    pub fn kernel_speculation_counts(&self) -> Result<speculation::SpecCounts> {
        match self.lock().kspec_maps.as_mut() {
            Some(m) => m.take_counts(),
            None => Ok(speculation::SpecCounts::default()),
        }
    }

    /// The speculations whose `commit()` or `discard()` the ring had no room for, not reported
    /// before (see [`speculation::KernelSpecMaps::lost`]): dtrace settles each once the records
    /// speculated before it were consumed, then frees it with
    /// [`LinuxTracing::release_lost_speculation`].
    pub fn kernel_lost_speculations(&self) -> Result<Vec<speculation::LostSettle>> {
        match self.lock().kspec_maps.as_mut() {
            Some(m) => m.lost(),
            None => Ok(Vec::new()),
        }
    }

    /// Frees a speculation [`LinuxTracing::kernel_lost_speculations`] reported, once dtrace
    /// settled it.
    pub fn release_lost_speculation(&self, id: u32) -> Result<()> {
        match self.lock().kspec_maps.as_mut() {
            Some(m) => m.release_lost(id),
            None => Ok(()),
        }
    }

    /// Notes a program's largest tuple and dynamic variable, which size the kernel's map of
    /// thread-locals' entries (made afterwards).
    pub fn note_dynvar_sizes(&self, max_tuple: u32, max_dvar: u32) {
        let mut s = self.lock();
        s.dynvar_sizes = (
            s.dynvar_sizes.0.max(max_tuple),
            s.dynvar_sizes.1.max(max_dvar),
        );
    }

    /// Stores of thread-locals the kernel lost so far because its map was full (DTrace's dynamic
    /// variable drops).
    pub fn kernel_dynvar_drops(&self) -> Result<u64> {
        match &self.lock().kvar_maps {
            Some(m) => m.drops(),
            None => Ok(0),
        }
    }

    /// Copies the global scalars and associative arrays the kernel keeps from dtrace's
    /// variables (`vars`, as `BEGIN` left them) into the kernel, before its clauses start.
    pub fn push_globals(&self, vars: &dtrace_dif::vm::VarState) -> Result<()> {
        let mut sh = self.lock();
        let values: Vec<(u32, dtrace_dif::vm::Stored)> = sh
            .placement
            .kernel
            .iter()
            .filter(|k| k.0 == kvars::Scope::Global && !sh.placement.arrays.contains_key(k))
            .filter_map(|k| Some((k.1, vars.global(k.1)?.clone())))
            .collect();
        let arrays: BTreeSet<u32> = sh
            .placement
            .arrays
            .keys()
            .filter(|k| k.0 == kvars::Scope::Global)
            .map(|k| k.1)
            .collect();
        let elems = kvars::array_elems(vars, &arrays);
        if let Some(m) = &sh.kvar_maps {
            m.push_globals(|id| vars.global(id).cloned())?;
            m.push_arrays(&elems)?;
        }
        sh.begin_globals = Some(values);
        sh.begin_arrays = elems;
        Ok(())
    }

    /// Copies the global scalars and associative arrays the kernel keeps into dtrace's
    /// variables (`vars`), once its clauses have stopped, for `END`.
    pub fn pull_globals(&self, vars: &mut dtrace_dif::vm::VarState) -> Result<()> {
        let sh = self.lock();
        let Some(m) = &sh.kvar_maps else {
            return Ok(());
        };
        m.pull_globals(vars)?;
        // The global arrays' key shapes, from any clause that uses them.
        let mut shapes = BTreeMap::new();
        for id in sh
            .placement
            .arrays
            .keys()
            .filter(|k| k.0 == kvars::Scope::Global)
            .map(|k| k.1)
        {
            let shape = sh.planned.iter().find_map(|(p, _)| {
                p.ecbs.iter().find_map(|e| {
                    e.predicate
                        .iter()
                        .chain(e.actions.iter().filter_map(|a| a.difo.as_ref()))
                        .find_map(|o| dtrace_ebpf::translate::array_key_strings(o, false, id))
                })
            });
            if let Some(shape) = shape {
                shapes.insert(id, shape);
            }
        }
        m.pull_arrays(vars, &shapes)
    }

    /// Fixes the offset between the framework's clock (now `fw_now`) and the kernel's, if not
    /// yet fixed: the kernel's `timestamp` and delivered records' then agree.
    pub fn fix_clock(&self, fw_now: u64) {
        let mut sh = self.lock();
        let offset = *sh
            .clock_offset
            .get_or_insert_with(|| fw_now as i64 - deliver::monotonic_ns() as i64);
        if let Some(k) = sh.kaggs.as_mut() {
            k.set_clock_offset(offset);
        }
    }

    /// Whether predicates are evaluated in the kernel before capturing (on by default; off when
    /// [`KERNEL_PREDICATES_ENV`] is `0`). Takes effect for probes enabled afterwards.
    pub fn set_kernel_predicates(&self, on: bool) {
        self.lock().kernel_predicates = on;
    }

    /// Where each planned clause's predicate runs (in the kernel before capturing, or in dtrace),
    /// over the probes enabled so far, in planning order.
    pub fn kernel_report(&self) -> Vec<ClauseKernel> {
        let sh = self.lock();
        let mut out = sh.kernel.clone();
        if sh.bypassed {
            for c in &mut out {
                for _ in 0..std::mem::take(&mut c.in_kernel) {
                    c.in_dtrace.push((
                        "every probe".into(),
                        "a program planned after its probe was enabled shares it".into(),
                    ));
                }
            }
        }
        out
    }

    /// Tells the planning of each of `programs` (all the consumer's programs, which share their
    /// thread-locals) what the others store in and copy from thread-locals, so a `self->` address
    /// stored by one program's probe is mirrored for another program's copy. Call before the
    /// first [`LinuxTracing::plan`] of them.
    pub fn plan_mirrors(&self, programs: &[&Program]) {
        let ctx = needs::mirror_context(programs);
        self.lock().mirror_ctx = ctx;
    }

    /// Records lost in the kernel because the ring buffer was full.
    pub fn drops(&self) -> Result<u64> {
        match &self.lock().session {
            Some(s) => s.drops(),
            None => Ok(0),
        }
    }

    /// Sets the room each CPU's principal buffer has for records built at the probe (see
    /// [`crate::session::Session::set_record_room`]); nothing before the first enabling.
    pub fn set_record_room(&self, room: &[u64]) -> Result<()> {
        match &self.lock().session {
            Some(s) => s.set_record_room(room),
            None => Ok(()),
        }
    }

    /// The principal buffers' room shared by the records built at the probe and those the
    /// framework builds for the same buffers (see [`crate::room`]; `None` before the first
    /// enabling): give it to `Framework::share_room` once tracing has gone.
    pub fn shared_room(&self) -> Option<std::sync::Arc<dyn dtrace_framework::buffer::SharedRoom>> {
        self.lock().session.as_ref().map(|s| {
            let room: std::sync::Arc<dyn dtrace_framework::buffer::SharedRoom> = s.shared_room();
            room
        })
    }

    /// Records lost in the kernel because the ring buffer was full, per CPU (indexed by CPU
    /// number; empty before the first enabling). The counts only grow.
    pub fn cpu_drops(&self) -> Result<Vec<u64>> {
        match &self.lock().session {
            Some(s) => s.cpu_drops(),
            None => Ok(Vec::new()),
        }
    }

    /// Records refused in the kernel because the CPU's principal buffer had no room for them, per
    /// CPU (see [`crate::session::Session::cpu_room_refusals`]; empty before the first
    /// enabling). The counts only grow; they are among [`LinuxTracing::cpu_drops`].
    pub fn cpu_room_refusals(&self) -> Result<Vec<u64>> {
        match &self.lock().session {
            Some(s) => s.cpu_room_refusals(),
            None => Ok(Vec::new()),
        }
    }

    /// Keeps tracing to one CPU (the `cpu` option), before the session starts; `false` once it
    /// has started with another choice.
    pub fn set_only_cpu(&self, cpu: Option<u32>) -> bool {
        let mut sh = self.lock();
        if sh.session.is_some() {
            return sh.session_opts.only_cpu == cpu;
        }
        sh.session_opts.only_cpu = cpu;
        true
    }

    /// Sets the size of the ring buffer the kernel probes write to (rounded up to a power of two of
    /// at least a page). Takes effect when the session is created, at the first enabling; returns
    /// `false` when the session already exists.
    pub fn set_ring_bytes(&self, bytes: usize) -> bool {
        let mut sh = self.lock();
        if sh.session.is_some() {
            return false;
        }
        sh.session_opts.ring_bytes = bytes;
        true
    }

    /// Says whether destructive actions are allowed (`-w`, the `destructive` option): a clause
    /// that writes user memory (`copyout()`) that cannot run at the probe is refused at enable
    /// only when they are (else tracing refuses to start, as DTrace does).
    pub fn set_destructive(&self, allowed: bool) {
        self.lock().destructive = allowed;
    }

    /// Detaches every probe and frees the kernel objects now (otherwise that happens when the
    /// framework, which holds the providers, and every clone of this handle are dropped). Events
    /// not yet delivered are lost: call [`LinuxTracing::finish`] first. Enabling again later
    /// creates a fresh session.
    pub fn close(&self) {
        let mut sh = self.lock();
        let session = sh.session.take();
        sh.in_session.clear();
        sh.active.clear();
        sh.arg_copies.clear();
        sh.sampled.clear();
        sh.own_frame.clear();
        sh.execargs_from_proc.clear();
        sh.image_replaced.clear();
        // The linker hooks come out too (a process stopped in one goes on), then their
        // run-on-close helper stands down.
        let (watches, rlc) = sh.user.take_watches();
        sh.built_at.clear();
        sh.signalled.clear();
        sh.built_epids.clear();
        sh.epids = None;
        drop(sh);
        drop(watches);
        drop(rlc);
        drop(session);
    }

    /// Places the uprobes and kprobes enabled so far (see [`Session::attach_pending`]); call once a program's
    /// probes are enabled, before the traced process goes on.
    pub fn attach_pending(&self) -> Result<()> {
        let mut sh = self.lock();
        sh.btf_hold = None;
        match sh.session.as_mut() {
            Some(s) => s.attach_pending(),
            None => Ok(()),
        }
    }

    /// Number of probes enabled in the kernel.
    pub fn enabled_count(&self) -> usize {
        self.lock()
            .session
            .as_ref()
            .map_or(0, |s| s.enabled_count())
    }
}

/// The number of CPUs to create the framework with: one more than the highest online CPU number, so
/// every CPU an event can come from has a buffer.
pub fn framework_ncpus() -> Result<u32> {
    let cpus = crate::bpf::map::online_cpus()?;
    cpus.iter()
        .max()
        .map(|m| m + 1)
        .ok_or_else(|| LinuxError::Unavailable("no online CPU".into()))
}

/// One provider of the catalogue, as the framework sees it.
struct LinuxProvider {
    name: String,
    shared: LinuxTracing,
}

fn attr(n: Stability, d: Stability, c: DepClass) -> Attribute {
    Attribute::new(n, d, c)
}

impl Provider for LinuxProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn attributes(&self) -> ProviderAttributes {
        use DepClass::*;
        use Stability::*;
        let private = attr(Private, Private, Unknown);
        match self.name.as_str() {
            "syscall" => ProviderAttributes {
                provider: attr(Evolving, Evolving, Common),
                module: private,
                function: attr(Private, Private, Isa),
                name: attr(Evolving, Evolving, Common),
                args: attr(Private, Private, Isa),
            },
            "fbt" | "rawfbt" => ProviderAttributes {
                provider: attr(Evolving, Evolving, Isa),
                module: private,
                function: attr(Private, Private, Isa),
                name: attr(Evolving, Evolving, Isa),
                args: attr(Private, Private, Isa),
            },
            "proc" | "sched" | "io" => ProviderAttributes {
                provider: attr(Evolving, Evolving, Isa),
                module: private,
                function: private,
                name: attr(Evolving, Evolving, Isa),
                args: attr(Evolving, Evolving, Isa),
            },
            _ => ProviderAttributes {
                provider: attr(Evolving, Evolving, Isa),
                module: private,
                function: private,
                name: attr(Evolving, Evolving, Isa),
                args: attr(Private, Private, Isa),
            },
        }
    }

    fn provide(&mut self, desc: Option<&DifProbeDesc>, sink: &mut ProbeSink<'_>) {
        let sh = self.shared.lock();
        // fbt's tens of thousands of probes are created as descriptions name them: every function a
        // glob matches that can be traced, and a function named alone even when it cannot (enabling
        // it then says why).
        if crate::catalog::fbt::is_provider(&self.name) {
            let (Some(desc), Some(fbt)) = (desc, sh.catalog.fbt()) else {
                return;
            };
            // This provider's probes only, whatever the description's provider glob.
            let pattern =
                crate::ProbeDesc::new(&self.name, &desc.module, &desc.function, &desc.name);
            let exact =
                !pattern.function.is_empty() && !crate::catalog::glob::has_meta(&pattern.function);
            for d in sh.catalog.fbt_descs(&pattern) {
                if exact || fbt.probe(&d).is_ok() {
                    sink.create(&d.module, &d.function, &d.name);
                }
            }
            return;
        }
        // Every other probe of the catalogue is created up front (ids then follow the catalogue's
        // order); later descriptions find them already there.
        if desc.is_some() {
            return;
        }
        for d in sh.catalog.descs().filter(|d| d.provider == self.name) {
            sink.create(&d.module, &d.function, &d.name);
        }
    }

    fn enable(&mut self, probe: &ProbeInfo) -> std::result::Result<(), ProviderError> {
        self.shared.lock().enable_for_framework(probe)
    }

    fn disable(&mut self, probe: &ProbeInfo) {
        self.shared.lock().active.remove(&probe.id);
    }

    fn arg_desc(&self, probe: &ProbeInfo, index: u32) -> Option<ArgDesc> {
        let sh = self.shared.lock();
        let desc =
            crate::ProbeDesc::new(&probe.provider, &probe.module, &probe.function, &probe.name);
        arg_desc_of(&sh.catalog.get(&desc)?, index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uaddr_conversions_are_found() {
        assert!(has_uaddr_conversion(b"%A\n"));
        assert!(has_uaddr_conversion(b"x %-20A y"));
        assert!(!has_uaddr_conversion(b"%a %d 100%% A"));
        assert!(!has_uaddr_conversion(b"%%A"));
        assert!(!has_uaddr_conversion(b"%"));
    }

    #[test]
    fn v_says_where_a_firing_with_an_unread_string_runs() {
        let clause = |replayed: usize| ClauseKernel {
            desc: "syscall::open*:entry".into(),
            probes: 2,
            aggs_in_kernel: 2,
            replayed,
            variables: Some(Ok(format!("self->p{}", kvars::COPYINSTR_AT_PROBE))),
            ..ClauseKernel::default()
        };
        let line = |replayed| clause(replayed).describe(1).join("\n");
        assert!(
            line(0).ends_with(
                "(variables self->p live in the kernel; copyinstr() reads at the probe, where a \
                 string on a page not yet read in faults, as in DTrace)"
            ),
            "{}",
            line(0)
        );
        assert!(
            line(2).ends_with(
                "(variables self->p live in the kernel; copyinstr() reads at the probe, and a \
                 firing whose string is on a page not yet read in runs at the syscall's return \
                 instead)"
            ),
            "{}",
            line(2)
        );
        assert!(
            line(1).ends_with("runs at the syscall's return instead at 1 probe)"),
            "{}",
            line(1)
        );
    }
}

#[cfg(test)]
mod exec_tests {
    use super::*;

    #[test]
    fn only_exec_entries_replace_the_image() {
        let info = |function: &str, name: &str| ProbeInfo {
            id: 1,
            provider: "syscall".into(),
            module: "vmlinux".into(),
            function: function.into(),
            name: name.into(),
        };
        assert!(replaces_image(&info("execve", "entry")));
        assert!(replaces_image(&info("execveat", "entry")));
        assert!(!replaces_image(&info("execve", "return")));
        assert!(!replaces_image(&info("write", "entry")));
        let mut p = info("execve", "entry");
        p.provider = "proc".into();
        assert!(!replaces_image(&p));
    }
}
