//! The consumer handle (`dtrace_hdl_t` and the API of the Oracle guide, in Rust form): open, compile a
//! string or file, exec, setopt/getopt, go, sleep, work, consume, stop, aggregate snap/walk/print,
//! error and drop handlers, errno/errmsg, close.
//!
//! The compiler and the framework are reached through two small seams, [`Compiler`] and [`Tracer`], so
//! the handle works against any execution substrate (the in-process framework, eBPF, or a test double)
//! that produces the record format of `dtrace_framework::records`.

use std::io::Write;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use dtrace_dif::program::{ProbeDesc, Program};
use dtrace_framework::records::{AggDesc, AggRecord, BufferSnapshot, EprobeDesc, ProbeInfo};

use crate::consume::{ConsumeAction, Decoder, DropFn, ErrFn, ProbeFn, RecFn};
use crate::error::{ConsumerError, Result};
use crate::status::{self, DropReport, ErrorReport, StatusCounters};

/// Which part of a probe description a bare `-P/-m/-f/-n` argument names (`dtrace_probespec_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeSpec {
    /// `-P provider`.
    Provider,
    /// `-m module`.
    Module,
    /// `-f function`.
    Function,
    /// `-n name` (or a full description).
    Name,
    /// A whole D program (`-s`, or `dtrace_program_strcompile` of a script).
    Script,
}

/// Compilation flags (`DTRACE_C_*`) the command line can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CompileFlags {
    /// `-Z`: permit descriptions that match no probes.
    pub zero_defs: bool,
    /// `-C`: run the C preprocessor.
    pub cpp: bool,
    /// `-S`: show the intermediate code.
    pub show_dif: bool,
    /// `-e`: exit after compiling.
    pub no_exec: bool,
}

/// The compiler seam: D source to a [`Program`].
pub trait Compiler {
    /// Compiles `source` (a probe description or a whole script per `spec`) with macro arguments
    /// `argv` (`$0` is `argv[0]`).
    fn compile(
        &mut self,
        source: &str,
        spec: ProbeSpec,
        flags: CompileFlags,
        argv: &[String],
        options: &crate::options::Options,
    ) -> Result<Program>;

    /// Defines the named macro variable `$name` (e.g. `target` once `-c`/`-p` made a process) for
    /// the compilations that follow. Compilers without named macros ignore it.
    fn set_macro(&mut self, name: &str, value: &str) {
        let _ = (name, value);
    }
}

/// What enabling a program produced (`dtrace_proginfo_t` plus the descriptions the consumer needs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecInfo {
    /// Number of probes matched.
    pub matches: usize,
    /// The enabled probe descriptions created.
    pub eprobes: Vec<EprobeDesc>,
    /// The probes involved.
    pub probes: Vec<ProbeInfo>,
    /// The aggregations created.
    pub aggs: Vec<AggDesc>,
    /// The statement ids the tracer gave the program's clauses (the `clause` of its enabled
    /// probes, including those it creates later).
    pub clauses: std::ops::Range<u32>,
}

/// The execution seam: the framework (probe context) side of DTrace.
pub trait Tracer {
    /// Learns every program that will be enabled before any is: the kernel providers share their
    /// thread-locals between programs (an address one stores in `self->buf` is copied for
    /// another's `copyin(self->buf, ...)`). Tracers with nothing to plan ignore it.
    /// `options` are the handle's when planning starts (each program's pragmas apply to them as
    /// it is executed, in order).
    fn plan(&mut self, programs: &[&Program], options: &crate::options::Options) {
        let _ = (programs, options);
    }
    /// For `dtrace -v`: one line per clause saying where it runs (its predicate in the kernel
    /// before anything is captured, or in dtrace, and why). Tracers that run everything in
    /// their own process have nothing to say.
    fn placement_report(&self) -> Vec<String> {
        Vec::new()
    }
    /// Learns the processes `-c` and `-p` hold until tracing goes and they are let go
    /// (`dtrace_proc_create`, `dtrace_proc_grab`): a tracer may prepare for their first events
    /// by [`Tracer::go`], while their mappings are those they start with. Tracers with nothing to
    /// prepare ignore it.
    fn hold_processes(&mut self, pids: &[u32]) {
        let _ = pids;
    }
    /// Enables a program's ECBs.
    fn exec(&mut self, prog: &Program, options: &crate::options::Options) -> Result<ExecInfo>;
    /// Starts tracing (fires BEGIN).
    fn go(&mut self) -> Result<()>;
    /// Stops tracing (fires END).
    fn stop(&mut self) -> Result<()>;
    /// Switches and returns every CPU's principal buffer.
    fn switch_buffers(&mut self) -> Result<Vec<BufferSnapshot>>;
    /// Aggregation records accumulated since the previous snapshot, all CPUs.
    fn aggregate_snapshot(&mut self) -> Result<Vec<AggRecord>>;
    /// Status counters (drops, exit requested).
    fn status(&mut self) -> Result<StatusCounters>;
    /// Runs what is due in the tracer itself (timer probes, queued events); called often.
    fn poll(&mut self) -> Result<()> {
        Ok(())
    }
    /// The ECBs the tracer created by itself since the last call, without a program being enabled
    /// (a traced process loaded a library with probes the enabled descriptions match), for
    /// decoding their records. Tracers whose probes never appear later have none.
    fn take_new_probes(&mut self) -> Option<ExecInfo> {
        None
    }
    /// How long until the tracer next has timer work, if it has any.
    fn time_to_next_event(&self) -> Option<Duration> {
        None
    }
    /// Sleeps until the tracer has something to deliver (its kernel buffers need reading),
    /// one of `also` is readable (the caller's: a signal's self-pipe, a traced process's pidfd),
    /// or `timeout` passes, whichever comes first; [`Tracer::poll`] follows. Tracers that
    /// cannot wait on their sources sleep at most [`SLEEP_POLL`], and the caller looks at its
    /// own conditions after each return.
    fn wait(&mut self, timeout: Duration, also: &[RawFd]) -> Result<()> {
        let _ = also;
        std::thread::sleep(timeout.min(SLEEP_POLL));
        Ok(())
    }
    /// The time (in the records' clock) before which every record has reached the buffers
    /// [`Tracer::switch_buffers`] returned or earlier ones: records stamped later may still be
    /// joined by older ones from another CPU, so the `temporal` option holds them for the next
    /// switch. None (the default): the buffers hold everything fired so far.
    fn complete_through(&self) -> Option<u64> {
        None
    }
    /// The CPU BEGIN and END fire on, if known: as DTrace does, the first time the buffers are
    /// read its buffer's BEGIN records come first and the rest of it after the other CPUs', and
    /// once tracing has stopped it comes last (END's output last).
    fn end_cpu(&self) -> Option<u32> {
        None
    }
    /// The number of CPUs records and aggregations come from (CPU ids `0..ncpus`: DTrace's
    /// `max_cpuid + 1`), over which `aggpercpu` prints each CPU's value.
    fn ncpus(&self) -> u32 {
        1
    }
    /// Aggregation drops per CPU (cpu, count) since the previous call.
    fn take_aggregation_drops(&mut self) -> Vec<(u32, u64)> {
        Vec::new()
    }
    /// The probes matching a description (for `-l`).
    fn list(&mut self, desc: &ProbeDesc) -> Result<Vec<ProbeInfo>> {
        let _ = desc;
        Err(ConsumerError::NotSupported(
            "listing probes with this tracer".into(),
        ))
    }
    /// A probe's provider attributes and argument types (for `-l -v`).
    fn probe_detail(&mut self, probe: &ProbeInfo) -> Result<crate::listing::ProbeDetail> {
        let _ = probe;
        Err(ConsumerError::NotSupported(
            "probe attributes with this tracer".into(),
        ))
    }
}

/// A tracer that cannot trace: every operation reports what is missing.
#[derive(Debug, Clone, Default)]
pub struct NoTracer(pub String);

impl NoTracer {
    fn err<T>(&self) -> Result<T> {
        Err(ConsumerError::NotSupported(self.0.clone()))
    }
}

impl Tracer for NoTracer {
    fn exec(&mut self, _: &Program, _: &crate::options::Options) -> Result<ExecInfo> {
        self.err()
    }
    fn go(&mut self) -> Result<()> {
        self.err()
    }
    fn stop(&mut self) -> Result<()> {
        self.err()
    }
    fn switch_buffers(&mut self) -> Result<Vec<BufferSnapshot>> {
        self.err()
    }
    fn aggregate_snapshot(&mut self) -> Result<Vec<AggRecord>> {
        self.err()
    }
    fn status(&mut self) -> Result<StatusCounters> {
        self.err()
    }
}

/// What `work` found (`dtrace_workstatus_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkStatus {
    /// Keep going.
    Okay,
    /// Tracing has stopped and everything was consumed.
    Done,
}

/// Information about an executed program (`dtrace_proginfo_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgInfo {
    /// Probes matched.
    pub matches: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Idle,
    Going,
    Stopped,
}

/// The longest a tracer that cannot wait on its sources sleeps between polls (the default
/// [`Tracer::wait`]), and the longest one that can waits while its buffers keep filling.
pub const SLEEP_POLL: Duration = Duration::from_millis(5);

/// The library's ERROR program (`_dt_errprog`).
pub const ERROR_PROGRAM: &str =
    "dtrace:::ERROR{trace(arg1);trace(arg2);trace(arg3);trace(arg4);trace(arg5);}";

/// A consumer handle.
pub struct Handle {
    compiler: Option<Box<dyn Compiler>>,
    tracer: Box<dyn Tracer>,
    /// The decoding state (options, aggregations, descriptions).
    pub decoder: Decoder,
    state: State,
    last_error: Option<ConsumerError>,
    err_handler: Option<Box<ErrFn<'static>>>,
    /// The library's ERROR program, compiled by `handle_err` and enabled by `go` after every program
    /// of the user's, so that the user's clauses are numbered from 0 (`dt_clause_0`) as in DTrace.
    error_program: Option<Program>,
    drop_handler: Option<Box<DropFn<'static>>>,
    status: StatusCounters,
    last_switch: Option<Instant>,
    last_status: Option<Instant>,
    last_agg: Option<Instant>,
    /// Records held for time order (`temporal`).
    temporal: crate::temporal::TemporalQueue,
    /// Per enabled program: its clauses' statement ids, its index in the decoder, and whether it
    /// is the ERROR program (for the ECBs the tracer creates later).
    programs: Vec<(std::ops::Range<u32>, usize, bool)>,
    /// Returns of [`Handle::wait`] so far.
    wakeups: u64,
}

impl Handle {
    /// `dtrace_open`: a handle over a tracer and, when available, a compiler.
    pub fn open(tracer: Box<dyn Tracer>, compiler: Option<Box<dyn Compiler>>) -> Handle {
        Handle {
            compiler,
            tracer,
            decoder: Decoder::default(),
            programs: Vec::new(),
            state: State::Idle,
            last_error: None,
            err_handler: None,
            error_program: None,
            drop_handler: None,
            status: StatusCounters::default(),
            last_switch: None,
            last_status: None,
            last_agg: None,
            temporal: Default::default(),
            wakeups: 0,
        }
    }

    fn record<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            self.last_error = Some(e.clone());
        }
        r
    }

    /// `dtrace_errno`: the last error, if any.
    pub fn errno(&self) -> Option<&ConsumerError> {
        self.last_error.as_ref()
    }

    /// `dtrace_errmsg`: the last error's message (`"no error"` when none).
    pub fn errmsg(&self) -> String {
        self.last_error
            .as_ref()
            .map_or_else(|| "no error".to_string(), |e| e.to_string())
    }

    /// `dtrace_setopt`.
    pub fn setopt(&mut self, name: &str, value: Option<&str>) -> Result<()> {
        let active = self.state == State::Going;
        let r = self.decoder.options.set(name, value, active);
        self.record(r)
    }

    /// `dtrace_getopt`.
    pub fn getopt(&mut self, name: &str) -> Result<i64> {
        let r = self.decoder.options.get(name);
        self.record(r)
    }

    /// `dtrace_program_strcompile`.
    pub fn compile_str(
        &mut self,
        source: &str,
        spec: ProbeSpec,
        flags: CompileFlags,
        argv: &[String],
    ) -> Result<Program> {
        let r = match self.compiler.as_mut() {
            Some(c) => c.compile(source, spec, flags, argv, &self.decoder.options),
            None => Err(ConsumerError::NotSupported(
                "compiling D: no compiler is linked into this consumer".into(),
            )),
        };
        // Pragmas take effect when the program is compiled, as DTrace's do (so `quiet` silences
        // the status lines of the command that follows).
        let r = r.and_then(|p| {
            for (name, value) in &p.options {
                self.decoder
                    .options
                    .set(name, value.as_deref(), self.state == State::Going)?;
            }
            Ok(p)
        });
        self.record(r)
    }

    /// Sets the named macro variable `$name` for later compilations (`dtrace_proc_create` and
    /// `dtrace_proc_grab` set `$target` this way).
    pub fn set_macro(&mut self, name: &str, value: &str) {
        if name == "target" {
            self.decoder.target = value.parse().unwrap_or(0);
        }
        if let Some(c) = self.compiler.as_mut() {
            c.set_macro(name, value);
        }
    }

    /// `dtrace_program_fcompile`.
    pub fn compile_file(
        &mut self,
        path: &std::path::Path,
        flags: CompileFlags,
        argv: &[String],
    ) -> Result<Program> {
        let src = match std::fs::read_to_string(path) {
            Ok(s) => s,
            Err(e) => {
                let r = Err(ConsumerError::Compile(format!(
                    "failed to open {}: {e}",
                    path.display()
                )));
                return self.record(r);
            }
        };
        self.compile_script(&src, flags, argv)
    }

    /// `dtrace_program_fcompile` of a script's text (a leading `#!` line is a comment to D).
    pub fn compile_script(
        &mut self,
        src: &str,
        flags: CompileFlags,
        argv: &[String],
    ) -> Result<Program> {
        let src = match src.strip_prefix("#!") {
            Some(rest) => &rest[rest.find('\n').unwrap_or(rest.len())..],
            None => src,
        };
        self.compile_str(src, ProbeSpec::Script, flags, argv)
    }

    /// Tells the tracer about every program that will be enabled, before the first is (see
    /// [`Tracer::plan`]).
    pub fn plan(&mut self, programs: &[&Program]) {
        self.tracer.plan(programs, &self.decoder.options);
    }

    /// Where each enabled clause runs (see [`Tracer::placement_report`]), for `dtrace -v`.
    pub fn placement_report(&self) -> Vec<String> {
        self.tracer.placement_report()
    }

    /// `dtrace_program_exec`: applies the program's pragmas and enables it.
    pub fn exec(&mut self, prog: &Program) -> Result<ProgInfo> {
        let r = self.exec_inner(prog, false);
        self.record(r)
    }

    fn exec_inner(&mut self, prog: &Program, is_error_prog: bool) -> Result<ProgInfo> {
        for (name, value) in &prog.options {
            self.decoder
                .options
                .set(name, value.as_deref(), self.state == State::Going)?;
        }
        let info = self.tracer.exec(prog, &self.decoder.options)?;
        let epids: Vec<u32> = info.eprobes.iter().map(|e| e.epid).collect();
        let idx = self.decoder.add_program(&prog.formats, &epids)?;
        self.programs
            .push((info.clauses.clone(), idx, is_error_prog));
        self.decoder.set_print_types(idx, prog.print_types.clone());
        if is_error_prog {
            self.decoder.error_epids.extend(epids.iter().copied());
        }
        for e in info.eprobes {
            self.decoder.eprobes.insert(e.epid, e);
        }
        for p in info.probes {
            self.decoder.probes.insert(p.id, p);
        }
        for a in info.aggs {
            self.decoder.aggs.add_desc(a);
        }
        for a in &prog.aggregations {
            self.decoder.agg_names.insert(a.id, a.name.clone());
        }
        Ok(ProgInfo {
            matches: info.matches,
        })
    }

    /// `dtrace_handle_err`: installs the error handler and compiles the library's ERROR program,
    /// which `go` enables.
    pub fn handle_err(&mut self, f: Box<ErrFn<'static>>) -> Result<()> {
        let r = self.compile_str(
            ERROR_PROGRAM,
            ProbeSpec::Script,
            CompileFlags::default(),
            &[],
        );
        self.err_handler = Some(f);
        let r = r.map(|p| self.error_program = Some(p));
        self.record(r)
    }

    /// Installs the error handler only (for tracers that enable the ERROR program themselves).
    pub fn set_err_handler(&mut self, f: Box<ErrFn<'static>>) {
        self.err_handler = Some(f);
    }

    /// `dtrace_handle_drop`.
    pub fn handle_drop(&mut self, f: Box<DropFn<'static>>) {
        self.drop_handler = Some(f);
    }

    /// Tells the tracer the processes the caller holds until after [`Handle::go`] (created or
    /// grabbed, as `dtrace_proc_create` and `dtrace_proc_grab` hold them): see
    /// [`Tracer::hold_processes`].
    pub fn hold_processes(&mut self, pids: &[u32]) {
        self.tracer.hold_processes(pids);
    }

    /// `dtrace_go`.
    pub fn go(&mut self) -> Result<()> {
        if self.state != State::Idle {
            let r = Err(ConsumerError::BadState("dtrace_go() called twice"));
            return self.record(r);
        }
        if let Some(p) = self.error_program.take() {
            if let Err(e) = self.exec_inner(&p, true) {
                return self.record(Err(e));
            }
        }
        let r = self.tracer.go();
        if r.is_ok() {
            self.state = State::Going;
        }
        self.record(r)
    }

    /// `dtrace_stop`.
    pub fn stop(&mut self) -> Result<()> {
        if self.state != State::Going {
            return Ok(());
        }
        let r = self.tracer.stop();
        // Probes the tracer created while draining (processes seen in its last events).
        self.adopt_new_probes();
        self.state = State::Stopped;
        self.record(r)
    }

    /// Whether tracing is running (`dtrace_go` succeeded and it has not stopped).
    pub fn going(&self) -> bool {
        self.state == State::Going
    }

    /// Whether tracing has stopped.
    pub fn stopped(&self) -> bool {
        self.state == State::Stopped
    }

    /// Whether the rate `name` has passed since `last` (always before the first time).
    /// Whether `aggrate` was set (`-x`, a pragma, `setopt()`), rather than left at its default.
    fn aggrate_explicit(&self) -> bool {
        self.decoder
            .options
            .explicit()
            .iter()
            .any(|(name, _)| *name == "aggrate")
    }

    fn is_due(&self, last: Option<Instant>, name: &str) -> bool {
        last.is_none_or(|l| l.elapsed() >= self.rate(name))
    }

    fn rate(&self, name: &str) -> Duration {
        let v = self.decoder.options.value(name);
        Duration::from_nanos(if v > 0 { v as u64 } else { 1_000_000_000 })
    }

    /// How long until the next buffer switch, status check, aggregation snapshot or tracer timer.
    pub fn time_to_next(&self) -> Duration {
        match self.tracer.time_to_next_event() {
            Some(t) => t.min(self.time_to_next_rate()),
            None => self.time_to_next_rate(),
        }
    }

    /// Lets the tracer run its due timers and queued events (`dtrace_sleep` does this implicitly).
    pub fn poll(&mut self) -> Result<()> {
        let r = self.tracer.poll();
        self.adopt_new_probes();
        self.record(r)
    }

    /// Learns the ECBs the tracer created after their programs were enabled: each decodes as
    /// the other ECBs of its clause do (the same program's formats, and an ERROR program's
    /// records as errors).
    fn adopt_new_probes(&mut self) {
        let Some(info) = self.tracer.take_new_probes() else {
            return;
        };
        let d = &mut self.decoder;
        for e in info.eprobes {
            let program = self.programs.iter().find(|(c, _, _)| c.contains(&e.clause));
            if let Some(&(_, idx, is_error)) = program {
                d.epid_program.insert(e.epid, idx);
                if is_error {
                    d.error_epids.insert(e.epid);
                }
            }
            d.eprobes.insert(e.epid, e);
        }
        for p in info.probes {
            d.probes.insert(p.id, p);
        }
        for a in info.aggs {
            d.aggs.add_desc(a);
        }
    }

    /// How long until the next buffer switch, status check or aggregation snapshot is due. An
    /// `exit()` is noticed at the next status check, as DTrace's `dtrace_status` checks at the
    /// `statusrate`: END follows `exit()` by up to that interval.
    pub fn time_to_next_rate(&self) -> Duration {
        let now = Instant::now();
        let due = |last: Option<Instant>, every: Duration| last.map_or(now, |l| l + every);
        let next = due(self.last_switch, self.rate("switchrate"))
            .min(due(self.last_status, self.rate("statusrate")));
        // A set aggrate's snapshots are taken when the buffers are read.
        let next = match self.aggrate_explicit() {
            true => next,
            false => next.min(due(self.last_agg, self.rate("aggrate"))),
        };
        next.saturating_duration_since(now)
    }

    /// Waits up to `timeout` for the tracer to have something to deliver or for one of `also`
    /// to be readable (see [`Tracer::wait`]); [`Handle::poll`] delivers it. Counted
    /// ([`Handle::wakeups`]).
    pub fn wait(&mut self, timeout: Duration, also: &[RawFd]) -> Result<()> {
        self.wakeups += 1;
        let r = self.tracer.wait(timeout, also);
        self.record(r)
    }

    /// How many times [`Handle::wait`] has returned: an idle run wakes only when something is
    /// due.
    pub fn wakeups(&self) -> u64 {
        self.wakeups
    }

    /// `dtrace_sleep`: waits until the next buffer switch, status check or aggregation snapshot is
    /// due, running the tracer's timers meanwhile and waking for what the tracer delivers (as
    /// `dtrace(1)`'s loop does).
    pub fn sleep(&mut self) -> Result<()> {
        loop {
            let rate = self.time_to_next_rate();
            if rate.is_zero() {
                return Ok(());
            }
            self.wait(self.time_to_next().min(rate), &[])?;
            self.poll()?;
        }
    }

    /// `dtrace_status` plus drop reporting: checks the framework's counters.
    pub fn check_status(&mut self) -> Result<()> {
        let new = self.tracer.status()?;
        self.last_status = Some(Instant::now());
        let tags = self.decoder.options.is_set("droptags");
        for d in status::status_drops(&self.status, &new, tags) {
            self.report_drop(&d)?;
        }
        if new.killed && !self.status.killed {
            self.status = new;
            return Err(ConsumerError::Backend(
                "aborted: the deadman timer fired (the system was unresponsive)".into(),
            ));
        }
        self.status = new;
        if new.exited && self.state == State::Going {
            self.stop()?;
        }
        Ok(())
    }

    fn report_drop(&mut self, d: &DropReport) -> Result<()> {
        let keep_going = match self.drop_handler.as_mut() {
            Some(h) => h(d),
            None => false,
        };
        if keep_going {
            Ok(())
        } else {
            Err(ConsumerError::DirectAbort)
        }
    }

    /// `dtrace_aggregate_snap`.
    pub fn aggregate_snap(&mut self) -> Result<()> {
        let ncpus = self.tracer.ncpus();
        let r = self.tracer.aggregate_snapshot().and_then(|recs| {
            let d = &mut self.decoder;
            d.aggs
                .set_percpu(d.options.is_set("aggpercpu").then_some(ncpus));
            d.aggs.merge_symbolized(&recs, d.symbols.as_ref())
        });
        self.last_agg = Some(Instant::now());
        self.record(r)?;
        for (cpu, n) in self.tracer.take_aggregation_drops() {
            let d = DropReport {
                cpu: Some(cpu),
                kind: status::DropKind::Aggregation,
                drops: n,
                msg: status::cpu_drop_message(
                    status::DropKind::Aggregation,
                    n,
                    cpu,
                    self.decoder.options.is_set("droptags"),
                ),
            };
            let r = self.report_drop(&d);
            self.record(r)?;
        }
        Ok(())
    }

    /// `dtrace_consume`: switches and consumes every CPU's buffer into `out`.
    pub fn consume(
        &mut self,
        out: &mut dyn Write,
        pfunc: &mut ProbeFn<'_>,
        rfunc: &mut RecFn<'_>,
    ) -> Result<()> {
        let r = self.consume_inner(out, pfunc, rfunc);
        self.record(r)
    }

    fn consume_inner(
        &mut self,
        out: &mut dyn Write,
        pfunc: &mut ProbeFn<'_>,
        rfunc: &mut RecFn<'_>,
    ) -> Result<()> {
        let mut bufs = self.tracer.switch_buffers()?;
        let first = self.last_switch.is_none();
        self.last_switch = Some(Instant::now());
        bufs.sort_by_key(|b| b.cpu);
        let temporal = self.decoder.options.is_set("temporal") || !self.temporal.is_empty();
        if let Some(c) = self.tracer.end_cpu() {
            if first && temporal {
                // BEGIN's CPU first: the records are then merged in time order.
                bufs.sort_by_key(|b| b.cpu != c);
            } else if first || self.state == State::Stopped {
                // END's output last (dt_endedon), and at the first read BEGIN's first
                // (dt_consume_begin): that CPU's buffer up to the end of BEGIN's records, then
                // the other CPUs', then the rest of it, with END's records when the run ended.
                bufs.sort_by_key(|b| b.cpu == c);
                if let Some(last) = bufs.last_mut().filter(|b| first && b.cpu == c) {
                    let k = self.decoder.begin_part(&last.data);
                    let head = BufferSnapshot {
                        cpu: c,
                        data: last.data.drain(..k).collect(),
                        drops: 0,
                    };
                    bufs.insert(0, head);
                }
            }
        }
        let mut noerr = |_: &ErrorReport| false;
        let mut nodrop = |_: &DropReport| false;
        if temporal {
            let through = self.tracer.complete_through();
            let stopped = self.state == State::Stopped;
            let sinks = crate::temporal::Sinks {
                out: &mut *out,
                pfunc,
                rfunc,
                errfn: match self.err_handler.as_mut() {
                    Some(h) => h.as_mut(),
                    None => &mut noerr,
                },
                dropfn: match self.drop_handler.as_mut() {
                    Some(h) => h.as_mut(),
                    None => &mut nodrop,
                },
            };
            self.temporal
                .consume(&mut self.decoder, bufs, through, stopped, sinks)?;
            out.flush()?;
            return Ok(());
        }
        let mut text = Vec::new();
        for b in &bufs {
            let errfn: &mut ErrFn<'_> = match self.err_handler.as_mut() {
                Some(h) => h.as_mut(),
                None => &mut noerr,
            };
            let dropfn: &mut DropFn<'_> = match self.drop_handler.as_mut() {
                Some(h) => h.as_mut(),
                None => &mut nodrop,
            };
            let r = self
                .decoder
                .consume_buffer(b, &mut text, pfunc, rfunc, errfn, dropfn);
            out.write_all(&text)?;
            text.clear();
            r?;
        }
        out.flush()?;
        Ok(())
    }

    /// `dtrace_work`: status, aggregation snapshot and consumption as they fall due.
    pub fn work(
        &mut self,
        out: &mut dyn Write,
        pfunc: &mut ProbeFn<'_>,
        rfunc: &mut RecFn<'_>,
    ) -> Result<WorkStatus> {
        let r = self.tracer.poll();
        self.adopt_new_probes();
        // The status (an exit(), drops) is checked at the statusrate, and a last time once
        // tracing has stopped, so drops made at the end are reported too.
        let r = match self.state == State::Stopped || self.is_due(self.last_status, "statusrate") {
            true => r.and_then(|_| self.check_status()),
            false => r,
        };
        self.record(r)?;
        // The buffers are read when `switchrate` has passed, as DTrace's (it may change with
        // setopt()), and always once tracing has stopped. A snapshot is taken at each call, so
        // what printa() shows is as fresh as the records it comes with, unless `aggrate` was
        // set: then, as DTrace's, a snapshot is taken with the buffers read once `aggrate` has
        // passed (printa() shows the last one), and with the next read after BEGIN's records.
        // The last read once tracing stopped is no exception (DTrace's dtrace_work() takes its
        // rate-limited snapshot then too): the printa() of the firing that called exit() shows
        // the snapshot its earlier ones showed, however soon the stop was noticed.
        let stopped = self.state == State::Stopped;
        let consume = stopped || self.is_due(self.last_switch, "switchrate");
        if !self.aggrate_explicit() || (consume && self.is_due(self.last_agg, "aggrate")) {
            self.aggregate_snap()?;
        }
        if consume {
            let begin = self.last_switch.is_none();
            self.consume(out, pfunc, rfunc)?;
            if begin {
                self.last_agg = None;
            }
        }
        if self.state == State::Stopped {
            // Collect what END produced.
            self.aggregate_snap()?;
            self.consume(out, pfunc, rfunc)?;
            return Ok(WorkStatus::Done);
        }
        Ok(WorkStatus::Okay)
    }

    /// `dtrace_aggregate_print`: every aggregation not printed by `printa()`.
    pub fn aggregate_print(&mut self, out: &mut dyn Write) -> Result<()> {
        let mut text = Vec::new();
        let r = self
            .decoder
            .print_all_aggregations(&mut text)
            .and_then(|_| out.write_all(&text).map_err(ConsumerError::from));
        self.record(r)
    }

    /// `dtrace_aggregate_walk_sorted`: visits each merged entry in print order.
    pub fn aggregate_walk_sorted(
        &self,
        f: &mut dyn FnMut(&crate::aggregate::AggEntry) -> ConsumeAction,
    ) {
        for e in self.decoder.aggs.sorted(self.decoder.sort_order()) {
            if f(&e) == ConsumeAction::Abort {
                break;
            }
        }
    }

    /// `dtrace_probe_iter`: the probes matching a description.
    pub fn list_probes(&mut self, desc: &ProbeDesc) -> Result<Vec<ProbeInfo>> {
        let r = self.tracer.list(desc);
        self.record(r)
    }

    /// `dtrace_probe_info`: a probe's provider attributes and argument types.
    pub fn probe_detail(&mut self, probe: &ProbeInfo) -> Result<crate::listing::ProbeDetail> {
        let r = self.tracer.probe_detail(probe);
        self.record(r)
    }

    /// The status passed to `exit()`, if a record of it was consumed.
    pub fn exit_status(&self) -> Option<i32> {
        self.decoder.exit_status
    }

    /// `dtrace_close`: stops tracing if needed and releases the handle.
    pub fn close(mut self) -> Result<()> {
        self.stop()
    }
}
