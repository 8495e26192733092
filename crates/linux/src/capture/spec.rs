//! What to capture at a probe: the [`CaptureSpec`] a consumer hands in (memory copies, stacks, an
//! in-kernel pid filter) and the [`ArgSource`]/[`Condition`]/[`Identity`] vocabulary a probe uses to
//! say where its arguments come from. Pure data; the code generator turns it into eBPF.

/// Which address space a copy reads, and whether it stops at a NUL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemKind {
    /// A NUL-terminated user string (`copyinstr`).
    UserString,
    /// User bytes (`copyin`).
    UserBytes,
    /// A NUL-terminated kernel string.
    KernelString,
    /// Kernel bytes (`args[0]->field`, `stringof` of kernel memory).
    KernelBytes,
}

impl MemKind {
    /// Whether it reads user memory.
    pub fn is_user(self) -> bool {
        matches!(self, MemKind::UserString | MemKind::UserBytes)
    }

    /// Whether it stops at a NUL.
    pub fn is_string(self) -> bool {
        matches!(self, MemKind::UserString | MemKind::KernelString)
    }

    /// Stable code used in records.
    pub fn code(self) -> u8 {
        match self {
            MemKind::UserString => 0,
            MemKind::UserBytes => 1,
            MemKind::KernelString => 2,
            MemKind::KernelBytes => 3,
        }
    }
}

// Address expressions are values of the DIF data-flow (`dtrace_dif::flow`): a copy is made from one.
pub use dtrace_dif::flow::{AddrBase, AddrExpr, ArgIndex};

/// One memory copy to make at the probe.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CopyRequest {
    /// Where.
    pub addr: AddrExpr,
    /// What kind of memory.
    pub kind: MemKind,
    /// Bytes to copy (strings: the most bytes, NUL included). With `size_arg`, the most bytes
    /// (user bytes: at most [`MAX_SIZED_COPY`], of which a record of one size per probe holds
    /// [`SIZED_COPY_CAP`]).
    pub size: u32,
    /// The copy's length is the value of this probe argument at the probe (`copyin(arg1, arg2)`,
    /// `copyinstr(arg1, arg2)`), at most `size` bytes (strings: at most that many characters and
    /// the NUL, within `size`). User copies only.
    pub size_arg: Option<usize>,
}

impl CopyRequest {
    /// A copy of a constant `size` bytes.
    pub fn new(addr: AddrExpr, kind: MemKind, size: u32) -> Self {
        CopyRequest {
            addr,
            kind,
            size,
            size_arg: None,
        }
    }
}

/// The probe arguments whose value delivery replaces with the address of data copied at the
/// probe (the argument's [`CopyRequest`]): the code at the probe cannot read them as the
/// interpreter does, except the strings a tracepoint's own record holds and the user strings at
/// the arguments' own values, which it reads there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OpaqueArgs {
    /// The arguments (bit n: argument n).
    pub mask: u16,
    /// For each argument whose copy is a string of the tracepoint's record (a `__data_loc` or
    /// `char[]` field), where the copy reads it.
    pub record_strings: [Option<RecordString>; 16],
    /// For each argument whose copy is the user string at its value (`proc:::exec`'s path, a
    /// USDT `string` argument), the most bytes the copy takes, its NUL included: the argument's
    /// value stays its user address, and the code at the probe reads the string there.
    pub user_strings: [Option<u32>; 16],
}

/// A string a probe copies from its tracepoint's record for an argument (see [`OpaqueArgs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecordString {
    /// Where in the record: [`AddrBase::Context`] or [`AddrBase::DataLoc`].
    pub base: AddrBase,
    /// The most bytes the copy takes, its NUL included.
    pub size: u32,
}

impl OpaqueArgs {
    /// Whether argument `n` is one of them.
    pub fn has(&self, n: u8) -> bool {
        n < 16 && self.mask & (1 << n) != 0
    }

    /// The most bytes of the user string copied at argument `n`'s value, where it is one.
    pub fn user_string(&self, n: u8) -> Option<u32> {
        self.user_strings.get(usize::from(n)).copied().flatten()
    }

    /// The arguments whose user strings are copied (bit n: argument n).
    pub fn user_string_mask(&self) -> u16 {
        (0..16u8)
            .filter(|&n| self.user_string(n).is_some())
            .fold(0, |m, n| m | 1 << n)
    }
}

/// The most copies one probe may request.
pub const MAX_COPIES: usize = 8;
/// The most bytes one copy may take (a distribution kernel's `task_struct`, ~10 KB, fits).
pub const MAX_COPY_SIZE: u32 = 16384;
/// The deepest stack we capture (the kernel's default `perf_event_max_stack`).
pub const MAX_STACK_DEPTH: u32 = 127;
/// Kernel frames taken beyond those wanted at a probe that is not sampled: its stack starts
/// with the frames of the tracing machinery (the BPF program, the tracepoint's or kprobe's
/// dispatch), which are cut before the stack is shown.
pub const TRACING_FRAMES: u32 = 16;

/// The kernel frames taken for a stack of `frames` frames at a probe that is not sampled.
pub fn kernel_stack_room(frames: u32) -> u32 {
    frames.saturating_add(TRACING_FRAMES).min(MAX_STACK_DEPTH)
}
/// The most pointer hops in one address.
pub const MAX_DEREFS: usize = 8;
/// The most user pointer hops in one address (`**argv` chains).
pub const MAX_USER_DEREFS: usize = 4;
/// The most bytes a copy whose length comes from a probe argument (`copyin(arg1, arg2)`) takes
/// where records are of one size per probe (kernels without ring-buffer dynptrs, before 5.19; see
/// [`super::layout::SizedCopies`]): one page. Every record of the probe reserves this much in the
/// ring buffer, whatever the length at the firing, so it is kept small; a longer read is served
/// from the process's memory at delivery while the process lives, and faults after.
pub const SIZED_COPY_CAP: u32 = 4096;
/// The most bytes a copy sized at the probe takes where the probe sizes its records (see
/// [`super::layout::SizedCopies::AtProbe`]): the framework's default `scratchsize`, the most one
/// `copyin()` of the interpreter may allocate. A larger `scratchsize` takes this much at the probe
/// and the rest from the process's memory at delivery.
pub const MAX_SIZED_COPY: u32 = 1 << 20;

/// What a consumer wants recorded at a probe, beyond the fixed header (ids, cpu, time, comm, args).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaptureSpec {
    /// Memory copies, in the order the clause wants them.
    pub copies: Vec<CopyRequest>,
    /// Why the record path cannot serve the probe's clauses (their copies are more than a
    /// probe takes, and were left out): the probe's program is made only when every clause runs
    /// whole in the kernel and no firing is handed over to dtrace, and is not made without its
    /// kernel code (see `codegen::gen_capture_reporting`).
    pub record_path_lacks: Option<String>,
    /// Kernel stack frames to capture (`stack()`), if any.
    pub kstack: Option<u32>,
    /// User stack frames to capture (`ustack()`), if any.
    pub ustack: Option<u32>,
    /// Capture the user stack as (ELF build-id, file offset) pairs instead of addresses, so frames
    /// resolve from the files themselves even after the process (and its mappings) are gone. The
    /// kernel falls back to the plain address for a frame whose build-id it cannot read.
    pub ustack_build_id: bool,
    /// Also record the user registers (pc, sp, fp) and up to this many bytes of the user stack
    /// above the stack pointer, so the stack can be unwound with the files' `.eh_frame`
    /// information where the kernel's frame-pointer walk stops (code without frame pointers).
    pub ustack_unwind: Option<u32>,
    /// Record the thread's saved user registers (`struct pt_regs`, for `uregs[]`).
    pub uregs: bool,
    /// Only fire for this process id (a `pid == $target` predicate pushed into the kernel).
    pub filter_pid: Option<u32>,
    /// For syscall entry probes: when a user copy faults at entry (page not resident), read it again
    /// at the syscall's return and deliver the entry event with those bytes. On by default through
    /// [`CaptureSpec::new`].
    pub retry_at_return: bool,
    /// Each record wakes the consumer at once (a forced ring wake-up), for a record dtrace must
    /// act on when it comes: one completed from the live process at delivery (`sched:::on-cpu`'s
    /// `execargs` and user reads). Other records wake it once the ring holds its wake-up size.
    pub wake_at_once: bool,
    /// Copy at most this many bytes of the process's argument area (`mm->arg_start..arg_end`, the
    /// NUL-separated arguments), for `execargs`.
    pub execargs: Option<u32>,
    /// Record the process ids of the task's ancestors (a bounded walk of `real_parent`), for
    /// `progenyof()`.
    pub ancestors: bool,
    /// Thread-local variables whose address the probe saves in (or removes from) the
    /// thread-variable mirror map, for copies at other probes ([`AddrBase::ThreadVar`]).
    pub mirror: Vec<MirrorOp>,
    /// Record the paths of the `struct path` objects at these addresses (a bounded walk of the
    /// dentries and mounts, see [`super::path`]), for `d_path()`.
    pub paths: Vec<AddrExpr>,
    /// Compute `vtimestamp` exactly at the probe (see [`crate::vtime`]) rather than reading the
    /// scheduler's last accounting, which lags by up to a tick.
    pub exact_vtime: bool,
    /// The predicates of the clauses enabled on the probe, evaluated in the kernel before anything
    /// is captured: the probe records only when one of them is true (or faults). See
    /// [`super::filter`].
    pub filter: Option<KernelFilter>,
    /// Aggregation-only clauses that aggregate in the kernel at the probe (see [`super::kagg`]).
    pub aggs: Option<KernelAggs>,
    /// The `raise()` and `stop()` actions sent at the probe (see [`super::signal`]).
    pub signals: Option<KernelSignals>,
}

/// The `raise()` and `stop()` actions of the clauses enabled on a probe that the probe's program
/// sends itself, when each clause's predicate holds (the clauses still run in dtrace, which
/// records the firing and sends nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSignals {
    /// One per clause that signals, in the clauses' order.
    pub clauses: Vec<KernelSignal>,
    /// The kernel clauses' control map (`KernelAggs::control`): nothing is sent while it is 0
    /// (before BEGIN, after END).
    pub control: i32,
    /// The flag `exit()` sets in the kernel (`KernelAggs::exit`): nothing is sent after it.
    pub exit: i32,
    /// `strsize`: how far string compares look.
    pub strsize: u32,
    /// The probe's names (constants there).
    pub names: dtrace_ebpf::translate::ProbeNames,
    /// Arguments whose value delivery replaces.
    pub opaque_args: OpaqueArgs,
    /// Where the clauses read `epid`, as [`KernelFilter::epids`] (a number per clause here).
    pub epids: Option<(i32, Vec<usize>)>,
}

/// One clause's `raise()` or `stop()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSignal {
    /// The clause's predicate.
    pub predicate: Option<dtrace_dif::object::DifObject>,
    /// The clause's actions before the signal: the signal is sent only when none of them can
    /// fault (a fault would end the clause before it in dtrace).
    pub before: Vec<dtrace_dif::object::DifObject>,
    /// `raise()`'s signal; `None` for `stop()`.
    pub signal: Option<dtrace_dif::object::DifObject>,
}

/// The aggregation-only clauses enabled on a probe that update per-CPU maps at the probe instead
/// of recording the firing (see [`super::kagg`]), and what the record path does when all of them
/// do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelAggs {
    /// The clauses, in the order of the probe's clauses.
    pub clauses: Vec<KernelAggClause>,
    /// An array map of one [`CONTROL_SIZE`]-byte value: first a u64, 0 while the kernel clauses
    /// are off (before BEGIN, after END), 1 or 2 for the generation of maps updated (see
    /// `KernelAgg::store`); then the framework's clock less `bpf_ktime_get_ns()` (an i64), which
    /// makes `timestamp`; then the wall clock less `bpf_ktime_get_ns()` (an i64), which makes
    /// `walltimestamp`.
    pub control: i32,
    /// An array map of one zeroed value of [`MAX_KAGG_VALUE`] bytes (new entries start from it).
    pub zeros: i32,
    /// A per-CPU array of one u64: updates lost because a map was full.
    pub drops: i32,
    /// A per-CPU array of [`KEY_SCRATCH_SLOTS`] values of [`KEY_SCRATCH_SIZE`] bytes, where keys
    /// are built (the first [`MAX_KAGG_KEY`] bytes), strings (`copyinstr()`, the
    /// [`STRING_SCRATCH`] bytes after) and a clause's `alloca()` memory (the [`ALLOCA_SCRATCH`]
    /// bytes after those, then [`ALLOCA_ROOM`]): slot 1 for programs of perf events (which may
    /// interrupt another program on the CPU), slot 0 for the others.
    pub keys: i32,
    /// An array map of one [`EXIT_SIZE`]-byte value: a u64 set when a clause called `exit()`
    /// in the kernel, then the status it gave. Once set, no clause runs in the kernel (as no
    /// clause fires after `exit()` in the framework), and dtrace ends tracing.
    pub exit: i32,
    /// A per-CPU array of one [`super::chill::STATE_SIZE`]-byte value: `chill()`'s budget (see
    /// [`super::chill`]).
    pub chill: i32,
    /// `strsize`, for string compares.
    pub strsize: u32,
    /// `scratchsize` (the interpreter's, past which `alloca()` faults), when the session's
    /// programs agree on it (`None`: `alloca()` runs in dtrace).
    pub scratchsize: Option<u64>,
    /// The probe's names.
    pub names: dtrace_ebpf::translate::ProbeNames,
    /// Arguments whose value delivery replaces (see [`KernelFilter::opaque_args`]).
    pub opaque_args: OpaqueArgs,
    /// The record path when every clause here runs in the kernel: `None` when no other clause
    /// is enabled on the probe (nothing is recorded), else the other clauses' filter (`None`:
    /// every firing records) and `pid` filter. When one clause here cannot run in the kernel,
    /// the spec's own filter (over every clause) applies instead.
    pub others: Option<(Option<KernelFilter>, Option<u32>)>,
    /// The switch that turns the filters off (see [`KernelFilter::bypass`]).
    pub bypass: Option<i32>,
    /// The hash map of the EPIDs of the clauses here that read `epid` (see
    /// `capture::filter::EpidAt`), when one does.
    pub epids: Option<i32>,
    /// Where the clauses read `caller` and `stackdepth` (`None`: in dtrace).
    pub stacks: Option<KernelStacks>,
    /// The thread-locals that live in the kernel (see `capture::kvars`), when some do.
    pub vars: Option<KernelVars>,
    /// Some of those outlive the firing (a clause keeps them: `KernelAggClause::keeps_vars`):
    /// a firing can then not be handed over to dtrace whole.
    pub lasting_vars: bool,
    /// The speculations, when they live in the kernel (see `capture::speculation`).
    pub specs: Option<KernelSpecs>,
    /// At a probe placed for every process (a file probe, `provider::file_usdt`): a hash map
    /// whose keys are the (tag << 32 | process id) pairs whose first firing was seen
    /// ([`known_process_key`]). The first firing of a process not in it is recorded for dtrace
    /// whatever the filters say (the kernel's clauses run as for any firing), so dtrace names
    /// the process's probes.
    pub known: Option<i32>,
    /// With [`KernelAggs::known`]: a hash map where such a first firing whose record the ring
    /// had no room for notes its key, for dtrace to name the process all the same (what the
    /// kernel's clauses counted for it is then not lost); the record is no drop when no clause
    /// runs in dtrace at the probe (it only named the process).
    pub missed: Option<i32>,
    /// Where `ustack()` and `jstack()` keys are walked with `.eh_frame` (see
    /// `capture::ustack_keys`; `None`: the kernel's frame-pointer walk).
    pub uwalk: Option<super::ustack_keys::UserWalk>,
    /// At a syscall's entry whose clauses keep D variables in the kernel and copy user strings:
    /// how a firing whose string is not readable yet runs again at the syscall's return (see
    /// [`Replay`]); `None` (the default): such a string faults at the probe, as in DTrace.
    pub replay: Option<Replay>,
}

/// The replay of a syscall entry's firing at its return (`capture::kagg`): a string the
/// syscall's caller passes is often on a page not read in yet at the entry (the dynamic loader's
/// first opens), and the kernel reads it in while serving the call. A firing at the entry whose
/// strings cannot all be read before its kernel clauses run runs none of them there: its
/// arguments and time are kept per thread, and the program at the syscall's return runs the
/// entry's clauses on them first (as the entry, with the entry's `timestamp`), before the
/// return's own clauses. Where the string still cannot be read there, the clause faults as it
/// would have at the entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replay {
    /// The entry's side: the strings are read first, and a firing with one not readable is kept.
    Keep(ReplayMaps),
    /// The return's side: a kept firing's clauses run on its arguments.
    Run(ReplayMaps),
}

/// The maps of a [`Replay`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayMaps {
    /// A hash map of thread ids to the kept firing (one per thread: a thread is in one syscall
    /// at a time): its `bpf_ktime_get_ns()`, its syscall's number, then its [`REPLAY_ARGS`]
    /// arguments ([`REPLAY_VALUE_SIZE`] bytes).
    pub pending: i32,
    /// An array map of one u64, the number of firings kept (its thread's return not reached
    /// yet): the `sys_exit` dispatcher's replay stage looks no firing up while it is 0. `None`
    /// where the return's side runs for its syscall alone (on its function's trampoline) and
    /// looks its thread's firing up every time.
    pub armed: Option<i32>,
    /// An array map of one zeroed value of at least [`REPLAY_VALUE_SIZE`] bytes, a kept
    /// firing's start ([`KernelAggs::zeros`]).
    pub zeros: i32,
    /// The syscall's number: a return runs only the firings its entry kept.
    pub nr: u32,
}

/// Arguments a kept firing holds (a syscall's).
pub const REPLAY_ARGS: usize = 6;
/// Bytes of a value of [`ReplayMaps::pending`].
pub const REPLAY_VALUE_SIZE: usize = 8 * (2 + REPLAY_ARGS);
/// Offset of the first argument in a value of [`ReplayMaps::pending`].
pub const REPLAY_ARGS_AT: usize = 16;

impl KernelAggs {
    /// Sets the depth of the frame-pointer walk of the `ustack()` keys walked with `.eh_frame`
    /// to `frames`, the probe's capture's (see [`KernelRecord::walk_user_frames`]): dtrace
    /// keeps the longer of the two walks. `None` (dtrace does not complete the walk with
    /// `.eh_frame`): the keys take the kernel's frame-pointer walk only, as dtrace does.
    pub fn walk_key_frames(&mut self, frames: Option<u32>) {
        self.uwalk = match (self.uwalk, frames) {
            (Some(w), Some(fp_frames)) => Some(super::ustack_keys::UserWalk { fp_frames, ..w }),
            _ => None,
        };
    }
}

/// The key of [`KernelAggs::known`] for probe tag `tag` in process `pid`.
pub fn known_process_key(tag: u32, pid: u32) -> u64 {
    (u64::from(tag) << 32) | u64::from(pid)
}

/// Values of [`KernelAggs::keys`].
pub const KEY_SCRATCH_SLOTS: u32 = 2;
/// Bytes of the strings a clause's fragment builds (`copyinstr()`), after the key in each value of
/// [`KernelAggs::keys`]: one `dtrace_ebpf::translate::string_scratch_width` per call site.
pub const STRING_SCRATCH: usize = 4096;
/// Bytes of a clause's `alloca()` memory at the probe, after the strings in each value of
/// [`KernelAggs::keys`] (a clause whose `alloca()` calls may take more runs in dtrace).
pub const ALLOCA_SCRATCH: usize = 2048;
/// Bytes after a clause's `alloca()` memory in each value of [`KernelAggs::keys`]: where a
/// `bcopy()` between two of its ranges passes, and what lets the verifier see a `copyin()`
/// sized at run time whose start and size it bounds apart
/// (`dtrace_ebpf::translate::AllocaArea::room`).
pub const ALLOCA_ROOM: usize = ALLOCA_SCRATCH;
/// Bytes of each value of [`KernelAggs::keys`].
pub const KEY_SCRATCH_SIZE: usize = MAX_KAGG_KEY + STRING_SCRATCH + ALLOCA_SCRATCH + ALLOCA_ROOM;

/// Bytes of the value of [`KernelAggs::exit`].
pub const EXIT_SIZE: usize = 16;

/// Bytes of the value of [`KernelAggs::control`].
pub const CONTROL_SIZE: usize = 24;
/// Offset in the value of [`KernelAggs::control`] of the framework's clock less the kernel's.
pub const CONTROL_CLOCK: usize = 8;
/// Offset in the value of [`KernelAggs::control`] of the wall clock less the kernel's
/// (`walltimestamp`).
pub const CONTROL_WALL: usize = 16;

/// The D variables kept in the kernel (see `capture::kvars`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelVars {
    /// The hash map of dynamic variables (see `capture::kvars` for its keys) to values.
    pub map: i32,
    /// A per-CPU array of one u64: stores lost because the map was full.
    pub drops: i32,
    /// The ids of the thread-locals that live there (every other is dtrace's).
    pub ids: Vec<u32>,
    /// An array map of one value: the global scalars that live in the kernel, 8 bytes each.
    pub globals: i32,
    /// The ids of those globals, in their order in the value.
    pub global_ids: Vec<u32>,
    /// The ids of the clause-locals kept on the stack (`capture::kvars::local_slot`), in order.
    pub local_ids: Vec<u32>,
    /// The ids of the thread-local associative arrays kept in `map`.
    pub thread_arrays: Vec<u32>,
    /// The ids of the global associative arrays kept in `map`.
    pub global_arrays: Vec<u32>,
    /// A per-CPU array of one value of `key_size` bytes, where keys are built.
    pub keys: i32,
    /// Bytes of `map`'s keys (`capture::kvars::key_size`).
    pub key_size: u32,
    /// D's `strsize` (a key keeps `strsize` characters of a string, in `string_key_width`
    /// bytes).
    pub strsize: u32,
    /// The string-valued variables that live in the kernel (see `capture::kvars`).
    pub strings: StringVars,
    /// The thread-locals among `ids` that hold `alloca()` or `copyin()` pointers
    /// (`dtrace_ebpf::translate::alloca_vars`), kept as the interpreter keeps them (its own
    /// addresses of the memory) and read back as pointers into the clause's alloca area.
    pub alloca_ids: Vec<u32>,
    /// The globals among `global_ids` that hold them.
    pub alloca_global_ids: Vec<u32>,
    /// The struct, union and array variables that live in the kernel (see `capture::kvars`).
    pub refs: RefVars,
}

/// The struct, union and array D variables kept in the kernel (stored by reference, not
/// strings): thread-locals, global scalars and associative array elements in one hash map
/// keyed as the integers' map (a global scalar by its id with `capture::kvars::GLOBAL_REF`),
/// whose values are [`RefVars::size`] bytes, each variable the first bytes of its value; a
/// load that finds none creates it from the zeros of `zeros`. Clause-locals are in a per-CPU
/// value of their own, for one firing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RefVars {
    /// The hash map.
    pub map: i32,
    /// An array map of one value of [`RefVars::size`] zero bytes, never written.
    pub zeros: i32,
    /// Bytes of a value: the largest variable's, rounded up to 8.
    pub size: u32,
    /// The ids of the thread-locals.
    pub ids: Vec<u32>,
    /// The ids of the global scalars.
    pub global_ids: Vec<u32>,
    /// The ids of the thread-local associative arrays.
    pub thread_arrays: Vec<u32>,
    /// The ids of the global associative arrays.
    pub global_arrays: Vec<u32>,
    /// The clause-locals (`this->t`), each its id and size, in order: each a flag in a stack
    /// slot after the clause-local strings' (zeroed when a firing starts: its storage is zeroed
    /// by the firing's first use) and its storage in the per-CPU value of `locals`, 8-aligned.
    pub locals_of: Vec<(u32, u32)>,
    /// The per-CPU array whose one value holds the clause-locals' storage (-1: none).
    pub locals: i32,
}

/// The string-valued D variables kept in the kernel: thread-locals and array elements in a hash
/// map of their own, keyed as the integers' map, whose values are strings of
/// [`StringVars::width`] bytes (NUL-terminated within `strsize`, zero-padded); global scalars in
/// the globals' value after the integers, each a NULL flag word and its string.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StringVars {
    /// The hash map of string dynamic variables.
    pub map: i32,
    /// Bytes of a string value (`dtrace_ebpf::translate::string_scratch_width` of the strings'
    /// storage).
    pub width: u32,
    /// The ids of the string thread-locals.
    pub ids: Vec<u32>,
    /// The ids of the string global scalars, in their order in the globals' value.
    pub global_ids: Vec<u32>,
    /// The ids of the thread-local associative arrays of strings.
    pub thread_arrays: Vec<u32>,
    /// The ids of the global associative arrays of strings.
    pub global_arrays: Vec<u32>,
    /// The ids of the string clause-locals (`this->s`), in their order: each a flag in a stack
    /// slot after the integer clause-locals' and its string in the per-CPU value of `locals`.
    pub local_ids: Vec<u32>,
    /// The per-CPU array whose one value holds the clause-local strings, [`Self::width`] bytes
    /// each (-1: none).
    pub locals: i32,
}

/// One clause run whole in the kernel: its actions are aggregating functions and stores to
/// thread-locals that live there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelAggClause {
    /// The clause's predicate.
    pub predicate: Option<dtrace_dif::object::DifObject>,
    /// Its aggregating actions.
    pub aggs: Vec<KernelAgg>,
    /// Its other actions (each stores variables and records nothing), with the number of
    /// aggregating and recording actions before each (they run in the clause's order) and
    /// where its code starts in the clause's ([`CodeBase`]).
    pub stores: Vec<(usize, CodeBase, dtrace_dif::object::DifObject)>,
    /// The record it builds at the probe, when it records data.
    pub record: Option<KernelRecord>,
    /// A clause before it at the probe runs in dtrace: its faults, reported before that
    /// clause's output, would not keep the clauses' order, so code that can fault keeps it in
    /// dtrace too.
    pub after_dtrace: bool,
    /// The probe arguments whose user strings its `copyinstr()` calls read (each read at the
    /// start of the probe's kernel clauses, a firing whose string cannot be read there handed
    /// to dtrace, see `capture::kagg`), or why they cannot be known before it runs.
    pub string_args: Result<Vec<u8>, String>,
    /// It keeps D variables in the kernel that outlive the firing (thread-locals, globals,
    /// arrays, speculations): it cannot be handed over to dtrace, so its strings are read as it
    /// runs, and one that cannot be read faults, as DTrace's `copyinstr()` does at the probe
    /// (see `capture::kagg`), unless the firing is kept for a syscall's return
    /// ([`KernelAggs::replay`]).
    pub keeps_vars: bool,
    /// Its D variables in the kernel all live for the firing (`this->`, the `strtok()` state):
    /// a firing handed over to dtrace runs it there as well (with its own clause-locals), so it
    /// reads its strings before it runs, as a clause without variables does, where the probe
    /// allows it (else as one keeping variables).
    pub firing_vars: bool,
    /// The bytes a `copyin()` sized at the probe may take, when it is the clause's only
    /// allocation of scratch (`provider::kagg::ClausePlan::copy_scratch`).
    pub copy_scratch: Option<u64>,
}

/// The record a clause builds at the probe (see `capture::kagg`): the ECB's record as the
/// framework lays it out, which dtrace commits to the CPU's principal buffer unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelRecord {
    /// Bytes of the record, its 12-byte header (EPID, timestamp) included.
    pub size: u32,
    /// The record descriptions the framework publishes for the ECB (checked against its own
    /// when the clause is bound).
    pub recs: Vec<dtrace_dif::program::RecDesc>,
    /// The actions that write data, in the clause's order.
    pub actions: Vec<RecordAction>,
    /// Frames of the user stack the kernel's frame-pointer walk takes for the record's
    /// `ustack()` and `jstack()` actions (0 without them; see `super::ustack::UstackTail`).
    pub ustack_walk: u32,
}

/// One data-recording action of a [`KernelRecord`] (by default a plain value's record).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordAction {
    /// The aggregating and recording actions before it in the clause.
    pub step: usize,
    /// Its expression (`None`: the data stays zero, as a `printf()` without arguments).
    pub difo: Option<dtrace_dif::object::DifObject>,
    /// Offset of its data in the record.
    pub offset: u32,
    /// Bytes of its data.
    pub size: u32,
    /// It is `exit()`: tracing ends with this firing (see [`KernelAggs::exit`]).
    pub exit: bool,
    /// It is `raise()` or `stop()`: it sends its signal (see [`super::signal`]).
    pub signal: Option<SignalAction>,
    /// It is `tracemem()`, or it records an object ([`Self::object`]): its value is an
    /// address, and the record holds the [`Self::size`] bytes there (see [`super::tracemem`]).
    pub memory: bool,
    /// It records an object by reference (`trace(*p)`, `print()`'s object: its expression's
    /// type is by reference and neither a string nor user memory), as `tracemem()` records
    /// memory ([`Self::memory`] is set too).
    pub object: bool,
    /// It is `speculate()`, `commit()` or `discard()` of the speculation its value names (see
    /// [`super::speculation`]).
    pub spec: Option<SpecOp>,
    /// It is `chill()` of the nanoseconds its value gives (see [`super::chill`]); it records
    /// nothing.
    pub chill: bool,
    /// It is `stack()`: the record holds this many frames of the kernel stack (see
    /// [`KernelRecord::stack_tails`]).
    pub stack: Option<u32>,
    /// It is `usym()`, `umod()` or `uaddr()`: the record holds the process's id, then the
    /// address (8 bytes each), which dtrace resolves with the process's mappings.
    pub user_symbol: bool,
    /// It is `ustack()` or `jstack()`: the record holds the pid, then this many frames of the
    /// user stack, then zeroed string space (see [`KernelRecord::ustack_tail`]).
    pub ustack: Option<u32>,
    /// Where its code starts in the clause's.
    pub base: CodeBase,
}

/// Where a `stack()` of a record built at the probe is taken: the frames wanted and the
/// tracing machinery's (the BPF program, the tracepoint's or kprobe's dispatch, see
/// [`kernel_stack_room`]) go past the framework's record, in the ring's copy only; dtrace cuts the
/// machinery's frames as it cuts a captured stack's and moves the rest into the record when it
/// commits it (`provider::deliver`), so the record is the one the interpreter writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackTail {
    /// Offset of the stack's data in the framework's record.
    pub offset: u32,
    /// Frames the record holds.
    pub frames: u32,
    /// Offset of the frames taken, from the start of the framework's record.
    pub tail: u32,
    /// Frames taken there (zeros after the last).
    pub room: u32,
}

impl KernelRecord {
    /// Where each `stack()` action's frames are taken, in the actions' order.
    pub fn stack_tails(&self) -> Vec<StackTail> {
        let mut tail = (self.size as usize).next_multiple_of(8) as u32;
        let mut out = Vec::new();
        for a in &self.actions {
            if let Some(frames) = a.stack {
                let room = kernel_stack_room(frames);
                out.push(StackTail {
                    offset: a.offset,
                    frames,
                    tail,
                    room,
                });
                tail += 8 * room;
            }
        }
        out
    }

    /// Bytes of the framework's record, rounded up to 8 bytes, and the frames of its `stack()`
    /// actions: what the probe zeroes before it builds the record (the user stack's tail after
    /// them is written whole where it is taken, see `super::ustack`).
    pub fn stack_bytes(&self) -> usize {
        let tails = self.stack_tails();
        tails
            .last()
            .map_or((self.size as usize).next_multiple_of(8), |t| {
                (t.tail + 8 * t.room) as usize
            })
    }

    /// Bytes of the record in the ring (after its header there) at most: the framework's
    /// record, rounded up to 8 bytes, then the frames of its `stack()` actions, then the user
    /// stack of its `ustack()` and `jstack()` actions as the capture path takes it.
    pub fn ring_bytes(&self) -> usize {
        self.ring_bytes_as(super::ustack::TailForm::Copied)
    }

    /// [`Self::ring_bytes`] with the user stack's tail of form `form`.
    pub fn ring_bytes_as(&self, form: super::ustack::TailForm) -> usize {
        let user = match self.records_user_stack() {
            true => super::ustack::UstackTail::bytes(form),
            false => 0,
        };
        self.stack_bytes() + user
    }
}

/// Where a DIF object's code starts in its clause's code taken as one sequence (predicate, then
/// the actions: `dtrace_framework::framework::code_base`), in instructions: a fault at its
/// instruction `pc` is reported at `base + pc`, as the interpreter reports it.
pub type CodeBase = u32;

/// Where the code of each DIF object of a [`KernelAgg`] starts in its clause's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AggBases {
    /// Each key's (0 for a key without an expression).
    pub keys: Vec<CodeBase>,
    /// The value's.
    pub value: CodeBase,
    /// The weight's.
    pub incr: CodeBase,
}

/// A destructive action that sends a signal at the probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalAction {
    /// `raise(sig)`: its value, to the thread that fired the probe.
    Raise,
    /// `stop()`: `SIGSTOP` to the process of that thread.
    Stop,
}

/// A speculation action built at the probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecOp {
    /// `speculate(id)`: the clause's record goes to the speculation.
    Speculate,
    /// `commit(id)`.
    Commit,
    /// `discard(id)`.
    Discard,
}

/// The speculations kept in the kernel (see [`super::speculation`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelSpecs {
    /// An array map of `nspec` u64 states (see `capture::speculation`).
    pub states: i32,
    /// A per-CPU array of one value of three u64: `speculation()` calls that failed while a
    /// speculation was busy, and with every one in use; speculative drops counted at the probe
    /// (see `capture::speculation`).
    pub fails: i32,
    /// `nspec`.
    pub nspec: u32,
    /// `specsize`: a clause whose record is larger never speculates (see
    /// `capture::speculation`).
    pub specsize: u64,
}

/// The largest record a clause builds at the probe.
pub const MAX_KERNEL_RECORD: usize = 4096;
/// The most bytes a record built at the probe takes in the ring with what the kernel takes past
/// it ([`KernelRecord::ring_bytes`]: the stacks dtrace completes when it commits the record): a
/// record of [`MAX_KERNEL_RECORD`] bytes with a user stack's tail and a few kernel stacks fits,
/// and every offset in it is one a BPF store can name.
pub const MAX_KERNEL_RING_RECORD: usize = 16 * 1024;

/// One aggregating action run in the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelAgg {
    /// The aggregating function.
    pub kind: dtrace_dif::program::ActionKind,
    /// Its encoded parameters (lquantize, llquantize).
    pub arg: u64,
    /// The keys: each one's expression (none for a stack) and kind.
    pub keys: Vec<(Option<dtrace_dif::object::DifObject>, KeyKind)>,
    /// The value's expression (`None`: count()).
    pub value: Option<dtrace_dif::object::DifObject>,
    /// The weight of a quantization (`None`: 1).
    pub incr: Option<dtrace_dif::object::DifObject>,
    /// Words of the value in the framework's layout (a flag word follows them in the kernel).
    pub value_words: usize,
    /// Where its values are kept.
    pub store: AggStore,
    /// Where each expression's code starts in the clause's.
    pub bases: AggBases,
}

/// Where the probe's code keeps an aggregation's values: one place per generation (see
/// [`KernelAggs::control`]), each value the framework's value words then a flag word set when
/// the CPU's value was first updated (see `capture::kagg`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggStore {
    /// An aggregation with keys: the per-CPU hash maps of the two generations, keyed by the
    /// kernel key ([`kernel_key_layout`]).
    Keyed {
        /// The maps of the two generations.
        maps: [i32; 2],
        /// When the keys' last part is a long string or a deep stack ([`short_keys`]): the maps
        /// of the two generations for the keys whose string or stack is short.
        short: Option<[i32; 2]>,
    },
    /// An aggregation without keys (`@ = count()`): a per-CPU array of [`KEYLESS_SLOTS`]
    /// values, generation `g`'s at index `g - 1`. The probe finds its value with one array
    /// lookup, builds no key, and never inserts (nor runs out of room); a value whose flag word
    /// is zero never fired, and dtrace zeroes a generation's value when it drains it.
    Keyless(i32),
}

impl AggStore {
    /// A store whose maps are not made (a translation does not depend on them): keyless or
    /// keyed as an aggregation with `keys` key parts is.
    pub fn unmade(keys: usize) -> AggStore {
        match keys {
            0 => AggStore::Keyless(-1),
            _ => AggStore::Keyed {
                maps: [-1, -1],
                short: None,
            },
        }
    }
}

/// Values of the array of [`AggStore::Keyless`]: one per generation.
pub const KEYLESS_SLOTS: u32 = 2;

/// Bytes of the last string of a key kept in the short maps of an aggregation
/// ([`AggStore::Keyed`]): a string of at most this many bytes less one (its NUL) is kept
/// there, a longer one in the maps of the whole width. A map hashes and compares its whole key,
/// so `@[copyinstr(arg0)]` would otherwise hash `strsize` bytes (264 by default) for every
/// path however short; a string is in one map only (its length decides), so the two maps'
/// keys are still compared exactly as DTrace compares strings.
pub const SHORT_STRING_KEY: u32 = 64;

/// Frame words of the last part of a key kept in the short maps of an aggregation
/// ([`AggStore::Keyed`]) when that part is a stack: a stack of at most this many frames taken
/// (a kernel stack's tracing frames included) is kept there, a deeper one in the maps of the
/// whole width. `@[ustack()]` would otherwise hash and compare `ustackframes` frames (808 bytes
/// by default) at every update however shallow the stack; the probe says which map a stack
/// belongs in by the frames it took ([`deep_stack_flag_at`]), so a stack is in one map only and
/// the two maps' keys are still compared exactly.
pub const SHORT_STACK_WORDS: u32 = 24;

/// The key kinds of an aggregation's short maps (see [`AggStore::Keyed`]): `keys` with its last
/// part cut, when it is a string of more than [`SHORT_STRING_KEY`] bytes, to that many, or, when
/// it is a stack of more than [`SHORT_STACK_WORDS`] frame words, to that many (the short key is
/// the first bytes of the whole key, whose string bytes past its NUL, or stack words past its
/// frames, are zero). `None` when the last part is no such string or stack, or a stack whose
/// key leaves no room for the probe's flag ([`deep_stack_flag_at`]).
pub fn short_keys(keys: &[KeyKind]) -> Option<Vec<KeyKind>> {
    let short = match *keys.last()? {
        KeyKind::StringBytes(n) if n > SHORT_STRING_KEY => KeyKind::StringBytes(SHORT_STRING_KEY),
        KeyKind::UserStack(n) if n > SHORT_STACK_WORDS => KeyKind::UserStack(SHORT_STACK_WORDS),
        KeyKind::KernelStack(n) if kernel_stack_room(n) > SHORT_STACK_WORDS => {
            KeyKind::KernelStack(SHORT_STACK_WORDS - TRACING_FRAMES)
        }
        _ => return None,
    };
    if deep_stack_flag_at(keys).is_some_and(|at| at + 8 > MAX_KAGG_KEY) {
        return None;
    }
    let mut out = keys.to_vec();
    *out.last_mut()? = short;
    Some(out)
}

/// Where, in the key scratch past the key built (`KernelAggs::keys`), the probe notes whether the
/// stack that is the key's last part is deep: more frame words taken than
/// [`SHORT_STACK_WORDS`] (1; else 0). A stack's frames end at its first zero word only where
/// the kernel's walk never takes a zero program counter, which a frame-pointer walk of user code
/// can (a saved `rbp` that is no frame pointer), so the probe decides by the count it took.
/// `None` when the last part is no stack.
pub fn deep_stack_flag_at(keys: &[KeyKind]) -> Option<usize> {
    matches!(
        keys.last()?,
        KeyKind::UserStack(_) | KeyKind::KernelStack(_)
    )
    .then(|| kernel_key_layout(keys).0.next_multiple_of(8))
}

/// The kind of an aggregation key as the kernel's map keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// An integer of this many bytes (1, 2, 4 or 8), kept in 8 (`sym()`, `func()` and `mod()`
    /// keys too: a kernel address, resolved when printed).
    Int(u8),
    /// A string: `execname` (its 16 bytes, NUL-terminated), or a constant known at the probe,
    /// kept as its [`string_key_hash`] in the first 8 bytes and [`STRING_CONST_MARK`] in the
    /// last (a NUL-terminated `execname` never has a non-zero last byte).
    String,
    /// `stack()` of this many frames: a word that is 1 when the probe is sampled (its stack
    /// starts at the interrupted PC), then the kernel's program counters, zero-filled; where the
    /// probe is not sampled, the stack starts with the tracing machinery's frames, cut when the
    /// key is read, so [`TRACING_FRAMES`] more are taken.
    KernelStack(u32),
    /// A string of any origin the translator follows (`copyinstr()` too): its bytes,
    /// NUL-terminated and zero-padded, in this many bytes (`translate::string_key_width`).
    StringBytes(u32),
    /// `ustack()` of this many frames: the process id, then the user program counters of the
    /// kernel's frame-pointer walk, zero-filled.
    UserStack(u32),
    /// `usym()`, `ufunc()`, `umod()`, `uaddr()`: the process id, then the user address.
    UserAddr,
}

impl KeyKind {
    /// Bytes the kernel's key gives it.
    pub fn kernel_size(self) -> usize {
        match self {
            KeyKind::Int(_) => 8,
            KeyKind::String | KeyKind::UserAddr => 16,
            KeyKind::StringBytes(n) => n as usize,
            KeyKind::KernelStack(n) => 8 + 8 * kernel_stack_room(n) as usize,
            KeyKind::UserStack(n) => 8 + 8 * n as usize,
        }
    }

    /// Whether the key's value comes from an expression (stacks come from the probe).
    pub fn has_value(self) -> bool {
        !matches!(self, KeyKind::KernelStack(_) | KeyKind::UserStack(_))
    }
}

/// Largest aggregation value (the framework's words and the kernel's flag word) the kernel keeps.
pub const MAX_KAGG_VALUE: usize = 8192;
/// Largest key (all parts) the kernel keeps: it is built in a per-CPU scratch value
/// ([`KernelAggs::keys`]); two stacks of [`MAX_STACK_DEPTH`] frames fit.
pub const MAX_KAGG_KEY: usize = 2048;
/// The last byte of a string key part that holds a constant's hash.
pub const STRING_CONST_MARK: u8 = 1;

/// The kernel key's size for these keys (at least 8: a map key is never empty), and each key's
/// offset in it.
pub fn kernel_key_layout(keys: &[KeyKind]) -> (usize, Vec<usize>) {
    let mut off = 0;
    let mut offs = Vec::with_capacity(keys.len());
    for k in keys {
        offs.push(off);
        off += k.kernel_size();
    }
    (off.max(8), offs)
}

/// The 64-bit FNV-1a hash a string constant key is kept as.
pub fn string_key_hash(s: &[u8]) -> u64 {
    s.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The predicates a capture program evaluates before it records anything (every clause enabled on
/// the probe has one; a clause without a predicate always records, so there is then no filter).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelFilter {
    /// One predicate per clause, in the clauses' order.
    pub predicates: Vec<dtrace_dif::object::DifObject>,
    /// `strsize`: how far string compares look.
    pub strsize: u32,
    /// The probe's names (constants there).
    pub names: dtrace_ebpf::translate::ProbeNames,
    /// Arguments whose value delivery replaces (with the address of a capture): a predicate
    /// reading them stays in the interpreter, but for the strings the record holds.
    pub opaque_args: OpaqueArgs,
    /// An array map of one u64 which, when non-zero, turns the filter off (every firing records):
    /// set when a program planned after the probe was enabled has clauses on it.
    pub bypass: Option<i32>,
    /// Where the predicates read `epid`: the map of EPIDs (see `capture::filter::EpidAt`) and,
    /// per predicate, its clause's number among the session's planned clauses, whose EPID at
    /// this probe dtrace writes there once the framework assigned it
    /// (`LinuxTracing::bind_epid`). `None`: `epid` is read in dtrace.
    pub epids: Option<(i32, Vec<usize>)>,
    /// Where the predicates read `caller` and `stackdepth` (`None`: in dtrace).
    pub stacks: Option<KernelStacks>,
}

/// Where the code at a probe takes its kernel stack and finds the tracing frames to cut, for
/// `caller` and `stackdepth` (see `capture::kstack`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelStacks {
    /// A per-CPU array of [`KEY_SCRATCH_SLOTS`] values of [`MAX_STACK_DEPTH`] frames, where the
    /// stack is taken (slot 1 for programs of perf events, as [`KernelAggs::keys`]).
    pub frames: i32,
    /// An array map of one value: the kernel's tracing address ranges, sorted, as
    /// `capture::kstack::ranges_value` lays them out.
    pub ranges: i32,
    /// The ranges the value holds (a power of two).
    pub capacity: u32,
}

impl KernelFilter {
    /// Sets what the filter knows of the probe it is placed at: its names, the arguments delivery
    /// replaces and the bypass switch.
    pub fn place_at(
        &mut self,
        names: &dtrace_ebpf::translate::ProbeNames,
        opaque_args: OpaqueArgs,
        bypass: Option<i32>,
    ) {
        self.names = names.clone();
        self.opaque_args = opaque_args;
        self.bypass = bypass;
    }
}

/// What a probe does to the mirror of one thread-local variable, after its copies: save the
/// address `value` computes (the D store `self->buf = arg1`), or with `None` remove the entry (a
/// clear, `self->buf = 0`, or a store of a value the probe cannot compute).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MirrorOp {
    /// The variable (the key's second half, beside the thread id).
    pub var: u32,
    /// The address stored, or `None` to remove the entry.
    pub value: Option<AddrExpr>,
}

/// The most mirror operations one probe makes.
pub const MAX_MIRROR_OPS: usize = 8;
/// Entries of the thread-variable mirror map (an LRU hash of `(tid, variable) -> address`, 16
/// bytes of key and value each): threads that stored and never cleared are evicted oldest first.
pub const MIRROR_ENTRIES: u32 = 16_384;

/// Bytes of user stack copied for unwinding (as much of it as is mapped, down to 512 bytes).
pub const USTACK_UNWIND_BYTES: u32 = 8192;

/// The most ancestors recorded (the walk stops at pid 1, the root of every user process tree).
pub const MAX_ANCESTORS: usize = 32;

impl CaptureSpec {
    /// No copies, no stacks, no filter, retry at return on.
    pub fn new() -> Self {
        CaptureSpec {
            retry_at_return: true,
            ..Default::default()
        }
    }
}

/// Where one probe argument comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgSource {
    /// A scalar field of the tracepoint record.
    Field {
        /// Offset.
        offset: u16,
        /// Size (1, 2, 4 or 8).
        size: u8,
        /// Sign-extend.
        signed: bool,
    },
    /// Argument `n` of a raw tracepoint (`ctx[n]`).
    RawArg(u8),
    /// Argument `n` of the traced function at an fentry/fexit probe, read with `bpf_get_func_arg`
    /// (0 past the last), so the verifier does not check its BTF type (function pointers).
    FuncArg(u8),
    /// The traced function's return value at an fexit probe (`bpf_get_func_ret`).
    FuncRet,
    /// The 8 bytes at `offset` in the kernel object raw tracepoint argument `arg` points at (0 when
    /// the pointer is NULL or the read fails): `signal_deliver`'s handler from its `k_sigaction *`.
    RawArgLoad {
        /// The raw argument holding the pointer.
        arg: u8,
        /// Offset of the value in the object.
        offset: u16,
    },
    /// The kernel PC of a perf-event sample (0 when it interrupted user mode).
    KernelPc,
    /// The user PC of a perf-event sample (0 when it interrupted kernel mode).
    UserPc,
    /// The exit reason of the current task, from its `exit_code` at exit: `CLD_EXITED` (1) for a
    /// normal exit, `CLD_KILLED` (2) for a signal, `CLD_DUMPED` (3) for a signal that dumped core
    /// (the `si_code` values of `<sys/wait.h>`).
    ExitReason,
    /// Syscall argument `n` (0-5) read from the user registers saved at syscall entry (the
    /// `sys_enter` raw tracepoint's `struct pt_regs *`).
    SyscallArg(u8),
    /// Argument `n` of the entry's firing the current thread's syscall kept for its return
    /// (see [`Replay`]): the hash map `map`'s value for the thread (0 when it holds none).
    Kept {
        /// The [`ReplayMaps::pending`] map.
        map: i32,
        /// The argument.
        n: u8,
    },
    /// The priority a task gets when a priority-inheritance donor changes (`sched_pi_setprio`'s
    /// `newprio`): the `normal_prio` of the task in raw argument `task`, or the donor's (raw
    /// argument `donor`, when not NULL) `prio` when that is lower (more urgent).
    PiNewPrio {
        /// The raw argument holding the task.
        task: u8,
        /// The raw argument holding the donor task (may be NULL).
        donor: u8,
    },
    /// The `FLT_*` code of the fault `signal_generate` reports ([`super::fault`]): from the signal
    /// in raw argument `sig` and the `si_code` of the siginfo raw argument `info` points at.
    FaultCode {
        /// The raw argument holding the signal number.
        sig: u8,
        /// The raw argument holding the `struct kernel_siginfo *`.
        info: u8,
    },
    /// The current thread's `struct task_struct *` (`bpf_get_current_task`): the thread a probe
    /// built on a kernel function describes when the function's arguments do not name it.
    CurrentTask,
    /// Not available on this kernel: always 0 (the catalogue documents it).
    Zero,
    /// A constant (a return probe's offset, a USDT argument given as an immediate).
    Const(i32),
    /// A user register from the probe's `struct pt_regs` (uprobes), by its offset there.
    UserReg {
        /// Offset in `struct pt_regs`.
        offset: u16,
        /// Bytes of the register taken (1, 2, 4 or 8).
        size: u8,
        /// Sign-extend.
        signed: bool,
    },
    /// User memory at a register plus a displacement (a USDT argument such as `8@16(%rbp)`), 0 when
    /// the read faults.
    UserMem {
        /// The base register's offset in `struct pt_regs`.
        reg: u16,
        /// The displacement.
        disp: i32,
        /// Bytes read (1, 2, 4 or 8).
        size: u8,
        /// Sign-extend.
        signed: bool,
    },
}

/// A test on the tracepoint record made before anything is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Condition {
    /// `field & mask != 0`.
    MaskSet {
        /// Offset.
        offset: u16,
        /// Size.
        size: u8,
        /// Mask.
        mask: u32,
    },
    /// `field & mask == 0`.
    MaskClear {
        /// Offset.
        offset: u16,
        /// Size.
        size: u8,
        /// Mask.
        mask: u32,
    },
    /// `field == value`.
    Equals {
        /// Offset.
        offset: u16,
        /// Size.
        size: u8,
        /// Value.
        value: i32,
    },
    /// `(signed) field < 0`.
    Negative {
        /// Offset.
        offset: u16,
        /// Size.
        size: u8,
    },
    /// `(signed) field > 0`.
    Positive {
        /// Offset.
        offset: u16,
        /// Size.
        size: u8,
    },
    /// A machine fault of the running thread ([`super::fault`]): the signal in raw argument `sig`
    /// is one a fault raises, the kernel raised it (`si_code` above 0 in the siginfo raw argument
    /// `info` points at), and it is for the thread running (raw argument `task`).
    Fault {
        /// The raw argument holding the signal number.
        sig: u8,
        /// The raw argument holding the `struct kernel_siginfo *`.
        info: u8,
        /// The raw argument holding the target `struct task_struct *`.
        task: u8,
    },
    /// At the `sys_exit` raw tracepoint (arguments: the saved registers, the return value): the
    /// running task is returning 0 from one of the system calls `nrs` (a new task's return from
    /// `fork`, `vfork`, `clone` or `clone3`, the first thing it does in user mode), where
    /// `proc:::start` and `lwp-start` fire. With `process_only`, only a process's first thread
    /// (thread id equal to the process id). Unused entries of `nrs` are -1.
    ForkChild {
        /// The system call numbers of the calls that make a task.
        nrs: [i32; 4],
        /// Only the first thread of a process.
        process_only: bool,
    },
    /// The probe fires on CPU `.0` (the `cpu` option: DTrace traces that CPU only).
    OnCpu(u32),
}

/// Whose identity (tid, comm) the record carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Identity {
    /// The current task (the normal case).
    Current,
    /// The thread named by a record field (sched_switch's `next_pid`/`next_comm` for `on-cpu`, which
    /// the tracepoint reports from the outgoing thread's context). The process id is then resolved in
    /// user space.
    FromFields {
        /// Offset of the tid field (4 bytes).
        tid_offset: u16,
        /// Offset of the 16-byte comm field.
        comm_offset: u16,
    },
    /// The task whose `struct task_struct *` is raw tracepoint argument `n` (sched_switch's `next`
    /// for `on-cpu`): every identity value and `curthread` describe it, read from the task itself.
    RawTask(u8),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_frames_are_taken_past_the_record_in_the_actions_order() {
        let action = |offset, stack: Option<u32>| RecordAction {
            offset,
            size: stack.map_or(8, |f| 8 * f),
            stack,
            ..Default::default()
        };
        let r = KernelRecord {
            size: 12 + 4 + 8 * 20 + 8 + 8 * 2,
            recs: vec![],
            ustack_walk: 0,
            actions: vec![
                action(16, Some(20)),
                action(176, None),
                action(184, Some(2)),
            ],
        };
        let t = r.stack_tails();
        let first = 200;
        assert_eq!(
            t,
            vec![
                StackTail {
                    offset: 16,
                    frames: 20,
                    tail: first,
                    room: 36
                },
                StackTail {
                    offset: 184,
                    frames: 2,
                    tail: first + 8 * 36,
                    room: 18
                },
            ]
        );
        assert_eq!(r.ring_bytes(), (first + 8 * 54) as usize);
        let plain = KernelRecord {
            actions: vec![action(16, None)],
            size: 20,
            recs: vec![],
            ustack_walk: 0,
        };
        assert!(plain.stack_tails().is_empty());
        assert_eq!(plain.ring_bytes(), 24);
    }
}
