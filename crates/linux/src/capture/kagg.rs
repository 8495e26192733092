//! Aggregations in the kernel: an aggregation-only clause (every action an aggregating function or
//! one of its keys) whose predicate, keys and values translate (`dtrace_ebpf::translate`) updates a
//! per-CPU hash map at the probe instead of recording the firing, so it costs no record and loses
//! no event however fast the probe fires.
//!
//! Each aggregating action keeps one value place per generation (see `KernelAggs::control`,
//! `AggStore`): the consumer switches the generation, waits for the programs running on the old
//! one to finish, and drains it, as DTrace switches its per-CPU aggregation buffers. An
//! aggregation with keys has a per-CPU hash map per generation, keyed by its keys laid out by
//! [`kernel_key_layout`] (integers in 8 bytes, strings in 16); one without keys (`@ = count()`)
//! has a per-CPU array of one value per generation, found with one lookup that never inserts.
//! A value is the framework's value words (`dtrace_framework::aggregate`) followed by a flag
//! word set when the CPU's value was first updated (a per-CPU hash entry created on one CPU starts
//! at zero on the others, an array's value exists before its aggregation fires, and
//! `min`/`max`/`lquantize` start elsewhere): a value whose flag is zero is no data. The consumer
//! side expands keys to the framework's layout, so every output is byte for byte the same
//! (`provider::kagg`).
//!
//! A clause may also store thread-locals that live in the kernel (`capture::kvars`): its store
//! actions run between its aggregating actions in the clause's order, and such a clause (and any
//! reading those variables) runs whole here. `timestamp` is read once per firing, before the
//! first clause, as the framework stamps a firing once: the kernel's clock plus the offset to the
//! framework's clock that dtrace writes into the control map when tracing starts. `walltimestamp`
//! is the same instant plus the wall clock's offset, also in the control map (the one dtrace
//! adds to the kernel's clock for records); `vtimestamp` is computed at that instant as for
//! records ([`crate::vtime`]), one value per firing, kept from going backwards per thread by the
//! kernel's floor as records' are by dtrace's.
//!
//! A clause whose other actions record data (`trace()`, `printf()` of integers, string constants
//! and `execname`; `exit()`; `tracemem()`, see `capture::tracemem`; `stack()`, `ustack()` and
//! `jstack()`, whose frames the kernel takes past the record and dtrace completes when it commits
//! it, see `StackTail` and `capture::ustack`; `printa()`, whose record is
//! the aggregations' ids: dtrace snapshots the kernel's maps after it drains the ring and before
//! it reads the buffers, so the printed values hold every update made before the `printa()`
//! fired) builds the ECB's record here, as the framework lays it out (a zero
//! EPID that dtrace fills in, the firing's timestamp, the data at its record descriptions'
//! offsets, zeros elsewhere), in a ring record of kind `KIND_BUILT` that dtrace commits to the
//! CPU's principal buffer unchanged (`Framework::commit_elsewhere`). It does so only when every
//! clause of the probe runs here, so one firing's records keep the clauses' order. The record is
//! reserved before the clause does anything that lasts (after a predicate without side effects,
//! before one with them): a full ring counts a drop on the CPU and skips the clause whole, its
//! stores, aggregations and signals too, as DTrace skips an ECB it has no buffer room for. `exit()` also sets the
//! exit flag, which stops every kernel clause from the next one of that firing on; `raise()` and
//! `stop()` send their signal there and then (`capture::signal`).
//!
//! A clause may copy user strings (`copyinstr()` of probe arguments: a key kept whole, a
//! compare, a record's string): they are read before any clause runs, and a firing whose string
//! cannot be read at the probe goes to dtrace whole (see [`emit_aggs`]).
//!
//! A clause whose code faults (a division by zero, a failed or misaligned load) ends at the fault
//! as in the interpreter: what it did before stays (aggregation updates, variable stores), its
//! record is discarded, the probe's later clauses run; the fault (the kind, the instruction in
//! the clause's code, the address, the faulting thread's context: its ids, `execname`, `ppid`,
//! `vtimestamp`, `arg0` for `errno`, the firing's time) goes to dtrace in a ring record of kind
//! `KIND_FAULT`, which dtrace reports as the interpreter reports its faults
//! (`Framework::fault_elsewhere`: the error message, the fault record, `dtrace:::ERROR` in that
//! context, as DTrace fires ERROR in the faulting thread's). A full ring counts a drop. What the translator does not handle stays in dtrace, with the reason in
//! the report.

use super::codegen::ProbeShape;
use super::filter::{Clocks, ShapeContext, FRAME};
use super::spec::{
    deep_stack_flag_at, kernel_key_layout, short_keys, string_key_hash, AggStore, CodeBase,
    KernelAgg, KernelAggClause, KernelAggs, KeyKind, Replay, ReplayMaps, SignalAction,
    MAX_KAGG_KEY, REPLAY_ARGS, REPLAY_ARGS_AT, SHORT_STACK_WORDS, SHORT_STRING_KEY,
    STRING_CONST_MARK,
};
use crate::bpf::insn::{
    helper, op, update_flag, Asm, Label, Reg, Size, R0, R1, R10, R2, R3, R4, R5, R6, R7,
};
use crate::room::{GRANTED, REFUSALS, USED};
use dtrace_dif::object::DifObject;
use dtrace_dif::program::ActionKind;
use dtrace_ebpf::translate::{self, Fragment, Frame, Untranslatable, ValueKind};
use dtrace_framework::aggregate::{llquantize_magnitudes, llquantize_positive_buckets};

/// Per clause of a [`KernelAggs`], in its order: `Ok` when the clause aggregates in the kernel at
/// this probe, else why not.
pub type AggReport = Vec<Result<(), Untranslatable>>;

/// Stack slots below the fragments' frame: the generation, the value, the weight, the address
/// of the key being built (in the scratch value of `KernelAggs::keys`).
const GEN: i16 = FRAME.base - Frame::SIZE - 8;
const VAL: i16 = GEN - 8;
const INCR: i16 = VAL - 8;
const KEYPTR: i16 = INCR - 8;
/// The firing's `timestamp`.
const TIMESTAMP: i16 = KEYPTR - 8;
/// The key of a kernel thread-local (see `capture::kvars`).
pub(crate) const VARS_KEY: i16 = TIMESTAMP - 8;
/// The address of the clause's record in the ring (zero when the ring was full). The fixed
/// slots come first and the slots a probe may use more or fewer of (thread-locals kept, the
/// clause-locals of `capture::kvars`) below them, so that a program uses the stack it needs: a
/// kernel before Linux 6.2 or so counts a `bpf_loop` callback's frame on top of the probe's
/// stack, so a walk of a user stack by callbacks (and `chill()`) needs the probe's code under
/// 480 bytes there (`features::loop_beside`).
const REC: i16 = VARS_KEY - 8;
/// 1 when [`REC`] holds a reserved record, 0 when the ring was full. The record is submitted on
/// this flag, a constant the verifier tracks exactly, not on the reloaded pointer: a verifier
/// before Linux 6.2 or so follows the null branch of a test of a reloaded ring pointer too, and
/// finds the record unreleased there.
const REC_OK: i16 = REC - 8;
/// Non-zero once a store to a dynamic variable was dropped (`capture::kvars`): the clause ends
/// there, without its record, as in the interpreter.
pub(crate) const DVAR_DROPPED: i16 = REC_OK - 8;
/// The bytes a clause running in the kernel allocated so far (`alloca()`, see
/// `translate::AllocaArea::top_at`), zeroed at the start of each clause (one that does not
/// allocate may follow a `self->` or global pointer into its empty area, which faults). Below
/// it: the thread's id and the thread-locals' cache slots of `capture::kvars` (or the pre-read
/// arguments' slots), then the clause-locals, around [`HANDOVER`].
pub(crate) const ALLOCA_TOP: i16 = DVAR_DROPPED - 8;
/// Non-zero when the probe's kernel clauses handed the firing over to dtrace (a string they
/// copy could not be read at the probe); the record path reads it (see [`emit_aggs`]) after it
/// reserved its record, so it is below the slots of the record's body (`capture::sized`), the
/// clauses' other slots being dead by then.
pub(crate) const HANDOVER: i16 = super::sized::LOWEST_SLOT - 8;
const _: () = assert!(HANDOVER < ALLOCA_TOP && HANDOVER >= -512);

/// The value of [`HANDOVER`] that hands the firing over whole (dtrace runs every clause).
pub(crate) const HANDED_OVER: i32 = 1;
/// The value of [`HANDOVER`] that records the firing for dtrace's clauses whatever their filter
/// says, the kernel's clauses having run (the first firing of a process at a probe placed for
/// every process, see `KernelAggs::known`).
pub(crate) const ANNOUNCE: i32 = 2;

/// `bpf_get_stack()`'s flag for the user stack.
const BPF_F_USER_STACK: i32 = 1 << 8;

/// The translated code of one clause.
struct Translated {
    predicate: Option<Fragment>,
    aggs: Vec<TranslatedAgg>,
    /// The store actions, with the number of aggregating and recording actions before each and
    /// where each one's code starts in the clause's.
    stores: Vec<(usize, CodeBase, Fragment)>,
    /// The data-recording actions of the clause's record: each one's step, whether it is
    /// `tracemem()`, and its value.
    records: Vec<(usize, bool, Option<translate::Value>)>,
    /// It calls `commit()` or `discard()`, which fault on an id beyond `nspec`.
    settles: bool,
    /// It calls `speculate()`, which may abandon it.
    speculates: bool,
    /// It calls `chill()`, which faults past its budget.
    chills: bool,
    /// Its `alloca()` and `copyin()` calls take from its alloca area (see `translate_clause`).
    allocates: bool,
}

/// Where a clause's code goes when a fragment ends it early.
#[derive(Clone, Copy)]
struct Exits {
    /// A store to a dynamic variable was dropped.
    dropped: Label,
    /// The code faulted (the fault is in the frame, its pc counted in the clause's code).
    faulted: Label,
}

impl Translated {
    /// Whether some fragment of the clause can fault, or its `tracemem()` of kernel memory.
    fn can_fault(&self) -> bool {
        self.fragments().any(|f| f.can_fault) || self.reads_memory() || self.settles || self.chills
    }

    /// Whether the clause records kernel memory (`tracemem()` of an address), a read that can
    /// fault after its record was reserved.
    fn reads_memory(&self) -> bool {
        self.records
            .iter()
            .any(|(_, m, v)| *m && v.as_ref().is_some_and(|v| v.kind == ValueKind::Int))
    }

    /// Whether some fragment of the clause copies a user string (`copyinstr()`).
    fn copies_strings(&self) -> bool {
        self.fragments().any(|f| {
            f.fault_sites
                .iter()
                .any(|s| s.addr == translate::FaultAddr::Stored)
        })
    }

    /// Whether some fragment of the clause can drop a store.
    fn can_drop(&self) -> bool {
        self.fragments().any(|f| f.can_drop)
    }

    /// The clause's fragments, its predicate's first.
    fn fragments(&self) -> impl Iterator<Item = &Fragment> {
        self.predicate
            .iter()
            .chain(self.stores.iter().map(|(_, _, f)| f))
            .chain(
                self.records
                    .iter()
                    .flat_map(|(_, _, v)| v)
                    .map(|v| &v.fragment),
            )
            .chain(self.aggs.iter().flat_map(|g| {
                g.keys
                    .iter()
                    .flatten()
                    .map(|v| &v.fragment)
                    .chain(g.value.iter())
                    .chain(g.incr.iter())
            }))
    }
}

struct TranslatedAgg {
    /// Each key's value (none for a stack, which the probe gives).
    keys: Vec<Option<translate::Value>>,
    value: Option<Fragment>,
    incr: Option<Fragment>,
}

/// Whether the kernel computes this aggregating function.
pub fn computes(kind: ActionKind) -> bool {
    use ActionKind as K;
    matches!(
        kind,
        K::AggCount
            | K::AggSum
            | K::AggMin
            | K::AggMax
            | K::AggAvg
            | K::AggStddev
            | K::AggQuantize
            | K::AggLquantize
            | K::AggLlquantize
    )
}

/// Translates clause `c`. A clause that calls `alloca()` takes its `copyin()` copies from its
/// alloca area, as the interpreter does; one that does not keeps them in the string scratch,
/// which records and the string functions read, and, where that cannot serve a use of a copy
/// (a load through it: `*(int *)copyin(arg1, 4)`, `this->p = (struct foo *)copyin(...)` then
/// `this->p->bar`; an object recorded past its end), takes them from the alloca area too.
fn translate_clause(
    ctx: &ShapeContext<'_>,
    c: &KernelAggClause,
    strsize: usize,
) -> Result<Translated, Untranslatable> {
    let allocates = calls_alloca(c);
    match translate_clause_in(ctx, c, strsize, allocates) {
        Err(Untranslatable::CopyUse { .. }) if !allocates => {
            translate_clause_in(ctx, c, strsize, true)
        }
        t => t,
    }
}

/// [`translate_clause`], its `copyin()` copies in its alloca area when `allocates`.
fn translate_clause_in(
    ctx: &ShapeContext<'_>,
    c: &KernelAggClause,
    strsize: usize,
    allocates: bool,
) -> Result<Translated, Untranslatable> {
    // The clause's own `this->` variables that hold alloca() pointers (alloca() memory lives
    // for one clause: see `translate::alloca`).
    // A this-> variable stored from a self-> or global pointer holds them too.
    let vars: Vec<(bool, u32)> = ctx.vars.map_or_else(Vec::new, |kv| {
        let thread = kv.alloca_ids.iter().map(|&id| (true, id));
        thread
            .chain(kv.alloca_global_ids.iter().map(|&id| (false, id)))
            .collect()
    });
    let locals = translate::alloca_locals_in(clause_objects(c), allocates, &vars);
    if let Some(name) = translate::foreign_local_with(clause_objects(c), allocates) {
        let how = if calls_alloca(c) {
            "it calls alloca()"
        } else {
            "its copyin() copies are in its alloca area"
        };
        return Err(Untranslatable::Placement(format!(
            "{how} and reads {name}, which another clause stores (dtrace's interpreter follows \
             a pointer of that clause's alloca() memory into this one's)"
        )));
    }
    // The scratch a copy sized at the probe may take is the clause's own.
    let ctx = &ShapeContext {
        alloca_locals: &locals,
        // Its copyin() calls take from its alloca area too, as the interpreter's.
        allocates,
        copy_scratch: c.copy_scratch,
        ..*ctx
    };
    let mut t = translate_clause_with(ctx, c, strsize)?;
    t.allocates = allocates;
    let bytes: u64 = t.fragments().map(|f| f.alloca_bytes).sum();
    if bytes > super::spec::ALLOCA_SCRATCH as u64 {
        return Err(Untranslatable::Value {
            pc: 0,
            what: format!(
                "its alloca() calls take more than the kernel's {} bytes",
                super::spec::ALLOCA_SCRATCH
            ),
        });
    }
    Ok(t)
}

/// Why a clause using an alloca() pointer as `what` stays in dtrace: the interpreter takes its
/// own address there, not the value it records (`translate::Fragment::alloca_value`).
fn alloca_value(what: &str) -> Untranslatable {
    Untranslatable::Value {
        pc: 0,
        what: format!("an alloca() pointer as {what} (not yet at the probe)"),
    }
}

/// Whether clause `c` calls `alloca()`.
fn calls_alloca(c: &KernelAggClause) -> bool {
    calls(c, dtrace_dif::subr::Subr::Alloca)
}

/// Whether clause `c` calls subroutine `which`.
fn calls(c: &KernelAggClause, which: dtrace_dif::subr::Subr) -> bool {
    clause_objects(c)
        .flat_map(DifObject::subrs_called)
        .any(|s| s == which)
}

/// The DIF objects of clause `c`.
fn clause_objects(c: &KernelAggClause) -> impl Iterator<Item = &DifObject> {
    c.predicate
        .iter()
        .chain(c.stores.iter().map(|(_, _, o)| o))
        .chain(
            c.record
                .iter()
                .flat_map(|r| &r.actions)
                .flat_map(|r| &r.difo),
        )
        .chain(c.aggs.iter().flat_map(|g| {
            g.keys
                .iter()
                .flat_map(|(o, _)| o)
                .chain(g.value.iter())
                .chain(g.incr.iter())
        }))
}

fn translate_clause_with(
    ctx: &ShapeContext<'_>,
    c: &KernelAggClause,
    strsize: usize,
) -> Result<Translated, Untranslatable> {
    let int = |o: &DifObject| translate::translate(o, ctx, strsize, FRAME);
    // The user stack may be walked after the predicate (see `WalkAt`): ucaller and ustackdepth
    // are read there only where the predicate reads them (the walk then comes first).
    let before_walk = ShapeContext {
        ustack: None,
        ..*ctx
    };
    let pctx = match predicate_reads_user_stack(c) {
        true => ctx,
        false => &before_walk,
    };
    let predicate = c
        .predicate
        .as_ref()
        .map(|o| translate::translate(o, pctx, strsize, FRAME))
        .transpose()?;
    let mut aggs = Vec::with_capacity(c.aggs.len());
    for agg in &c.aggs {
        let mut keys = Vec::with_capacity(agg.keys.len());
        for (o, kind) in &agg.keys {
            if !kind.has_value() || *kind == KeyKind::UserAddr {
                check_probe_stack(ctx.shape, *kind)?;
            }
            let Some(o) = o else {
                if kind.has_value() {
                    return Err(Untranslatable::Value {
                        pc: 0,
                        what: "an aggregation key without an expression".into(),
                    });
                }
                keys.push(None);
                continue;
            };
            let v = translate::translate_value(o, ctx, strsize, FRAME)?;
            let fits = matches!(
                (&v.kind, kind),
                (ValueKind::Int, KeyKind::Int(_) | KeyKind::UserAddr)
                    | (ValueKind::Execname | ValueKind::Str(_), KeyKind::String)
                    | (
                        ValueKind::Execname | ValueKind::Str(_) | ValueKind::Scratch,
                        KeyKind::StringBytes(_)
                    )
            );
            if !fits {
                return Err(Untranslatable::Value {
                    pc: 0,
                    what: "an aggregation key of a kind the kernel does not keep".into(),
                });
            }
            keys.push(Some(v));
        }
        let (value, incr) = (
            agg.value.as_ref().map(int).transpose()?,
            agg.incr.as_ref().map(int).transpose()?,
        );
        if value.iter().chain(&incr).any(|f| f.alloca_value) {
            return Err(alloca_value("an aggregated value"));
        }
        aggs.push(TranslatedAgg { keys, value, incr });
    }
    let stores = c
        .stores
        .iter()
        .map(|(before, base, o)| Ok((*before, *base, int(o)?)))
        .collect::<Result<Vec<_>, Untranslatable>>()?;
    let mut records = Vec::new();
    let (mut settles, mut speculates, mut chills) = (false, false, false);
    for r in c.record.iter().flat_map(|r| &r.actions) {
        if let Some(frames) = r.stack {
            check_probe_stack(ctx.shape, KeyKind::KernelStack(frames))?;
        }
        if let Some(frames) = r.ustack {
            check_probe_stack(ctx.shape, KeyKind::UserStack(frames))?;
        }
        let Some(o) = &r.difo else {
            records.push((r.step, r.memory, None));
            continue;
        };
        let v = translate::translate_value(o, ctx, strsize, FRAME)?;
        let object = r.object;
        if v.fragment.alloca_value && (r.spec.is_some() || r.memory) {
            return Err(alloca_value(if object {
                "the address of an object recorded by reference"
            } else if r.memory {
                "tracemem()'s address"
            } else {
                "a speculation's id"
            }));
        }
        if let Some(op) = r.spec {
            if ctx.specs.is_none() {
                return Err(Untranslatable::Value {
                    pc: 0,
                    what: "speculations live in dtrace at this probe".into(),
                });
            }
            if v.kind != ValueKind::Int {
                return Err(Untranslatable::Value {
                    pc: 0,
                    what: "a speculation id that is not an integer".into(),
                });
            }
            settles |= op != super::spec::SpecOp::Speculate;
            speculates |= op == super::spec::SpecOp::Speculate;
            records.push((r.step, false, Some(v)));
            continue;
        }
        if r.chill {
            if v.kind != ValueKind::Int {
                return Err(Untranslatable::Value {
                    pc: 0,
                    what: "a chill() time that is not an integer".into(),
                });
            }
            chills = true;
            records.push((r.step, false, Some(v)));
            continue;
        }
        if r.memory {
            let checked = if object {
                super::tracemem::check_object(
                    &v.kind,
                    r.size,
                    translate::string_scratch_width(strsize),
                )
            } else {
                super::tracemem::check(&v.kind, r.size)
            };
            checked.map_err(|what| match v.kind {
                // Its copy in the alloca area serves it (see `translate_clause`).
                ValueKind::Buffer(_) | ValueKind::SizedCopy(_) => {
                    Untranslatable::CopyUse { pc: 0, what }
                }
                _ => Untranslatable::Value { pc: 0, what },
            })?;
            records.push((r.step, true, Some(v)));
            continue;
        }
        let t = &o.rtype;
        let fits = match &v.kind {
            ValueKind::Int if r.user_symbol => !t.is_by_ref() && r.size == 16,
            ValueKind::Int => !t.is_by_ref() && matches!(r.size, 1 | 2 | 4 | 8),
            ValueKind::Execname | ValueKind::Str(_) | ValueKind::Scratch => {
                t.is_string() && r.size > 0
            }
            ValueKind::Buffer(_) | ValueKind::SizedCopy(_) => false,
        };
        if !fits {
            let what = if t.is_by_ref() && !t.is_string() {
                // By reference and not an object the record copies: user memory.
                "an object in user memory recorded by reference (not yet at the probe)"
            } else {
                "a recorded value of a kind not built at the probe"
            };
            return Err(Untranslatable::Value {
                pc: 0,
                what: what.into(),
            });
        }
        records.push((r.step, false, Some(v)));
    }
    Ok(Translated {
        predicate,
        aggs,
        stores,
        records,
        settles,
        speculates,
        chills,
        allocates: false,
    })
}

/// Whether clause `c` translates whole at a probe of `shape` (its names and opaque arguments as
/// given, `vars` the thread-locals in the kernel), as [`emit_aggs`] would translate it: the
/// planning of kernel variables checks every probe a clause will run at before anything is
/// enabled, so a variable never ends up split between the kernel and dtrace. `Ok(true)` when its
/// code can fault.
pub fn check_clause(
    shape: &ProbeShape,
    names: &translate::ProbeNames,
    opaque_args: super::spec::OpaqueArgs,
    vars: &super::spec::KernelVars,
    c: &KernelAggClause,
    (strsize, scratchsize): (u32, Option<u64>),
    specs: Option<super::spec::KernelSpecs>,
) -> Result<bool, Untranslatable> {
    if reads_user_stack_values(c) {
        // A firing whose user stack the walk cannot place goes to dtrace whole for these,
        // where variables kept in the kernel are not (see `emit_aggs`); an update with a user
        // stack key alone goes to dtrace.
        return Err(Untranslatable::Placement(UCALLER_WITH_VARS.into()));
    }
    let ctx = ShapeContext {
        shape,
        names,
        opaque_args,
        vars: Some(vars),
        // A clause keeping D variables in the kernel cannot hand a firing over to dtrace (see
        // `emit_aggs`): it builds its strings at the probe as it runs; for another, whether its
        // strings are built here depends on the probe's other clauses.
        strings: c.keeps_vars.then_some(-1),
        // The maps' descriptors are not part of a translation, nor is the clock `vtimestamp`
        // is read with (its emitter does not fail once the record speaks for the thread).
        clocks: Some(Clocks {
            timestamp: TIMESTAMP,
            control: -1,
            vclock: None,
        }),
        pre_read: Default::default(),
        specs,
        scratchsize,
        alloca_locals: &[],
        allocates: false,
        copy_scratch: None,
        // Nor is the map of the EPIDs, nor are those of the stacks.
        epid: match names.id {
            translate::ProbeId::Shared => Err(super::filter::SHARED_EPID),
            _ => Ok(super::filter::EpidAt { map: -1, key: 0 }),
        },
        stacks: Some(super::spec::KernelStacks {
            frames: -1,
            ranges: -1,
            capacity: 1,
        }),
        // A clause keeping variables in the kernel reads ucaller and ustackdepth in dtrace: it
        // may run after another clause at the probe (see `emit_aggs`).
        ustack: None,
    };
    translate_clause(&ctx, c, strsize as usize).map(|t| t.can_fault())
}

/// Whether the probe's program can take the stack (or the process id) a key of `kind` holds:
/// of the thread that fired the probe only (a record that speaks for another thread, as
/// `on-cpu`'s, keeps its clause in dtrace).
fn check_probe_stack(shape: &ProbeShape, kind: KeyKind) -> Result<(), Untranslatable> {
    if shape.identity != super::spec::Identity::Current {
        let what = match kind {
            KeyKind::KernelStack(_) => "the kernel stack",
            KeyKind::UserStack(_) => "the user stack",
            _ => "the process",
        };
        return Err(Untranslatable::Value {
            pc: 0,
            what: format!("{what} of a thread other than the one that fired the probe"),
        });
    }
    Ok(())
}

/// Whether `c` reads `timestamp` or `walltimestamp` (which the firing's `timestamp` makes).
fn reads_timestamp(c: &KernelAggClause) -> bool {
    let objects = c
        .predicate
        .iter()
        .chain(c.stores.iter().map(|(_, _, o)| o))
        .chain(c.aggs.iter().flat_map(|g| {
            g.keys
                .iter()
                .filter_map(|(o, _)| o.as_ref())
                .chain(g.value.iter())
                .chain(g.incr.iter())
        }));
    objects.into_iter().any(|o| {
        o.text.iter().any(|w| {
            matches!(dtrace_dif::instr::Instr::decode(*w),
                Ok(dtrace_dif::instr::Instr::LoadVar { op: dtrace_dif::opcode::Opcode::Ldgs, var, .. })
                    if u32::from(var) == dtrace_dif::vars::DIF_VAR_TIMESTAMP
                        || u32::from(var) == dtrace_dif::vars::DIF_VAR_WALLTIMESTAMP
                        || u32::from(var) == dtrace_dif::vars::DIF_VAR_VTIMESTAMP)
        })
    })
}

/// Emits the kernel aggregations of `k` (those whose clauses translate at this probe) and returns
/// the report, and whether the clauses may hand a firing over to dtrace: then [`HANDOVER`] is
/// non-zero when they did, and the record path records the firing for every clause. Control
/// falls through to what follows (the record path) in every case.
///
/// The user strings the clauses copy (`copyinstr()` of probe arguments) are read first, before
/// any clause runs: when one cannot be read at the probe (a page not yet faulted in: dtrace's
/// capture reads it again at a syscall's return, or from the process at delivery), no clause
/// runs here and the firing goes to dtrace, where every clause of the probe runs on the
/// captured memory as it would with the kernel paths off. So both paths print the same. A clause
/// keeping D variables in the kernel cannot run in dtrace: at a syscall's entry whose clauses
/// allow it ([`replayable`], `KernelAggs::replay`) the strings are read first all the same, and a
/// firing with one not readable is kept for the syscall's return, which runs the clauses on it
/// ([`Replay`]); elsewhere it reads its strings as it runs, and one it cannot read faults there,
/// as DTrace's `copyinstr()` does at the probe, and at a probe where such a clause runs, a clause
/// copying strings without variables stays in dtrace; so does one copying from an address other
/// than a probe argument (it cannot be read before the clause runs).
pub fn emit_aggs(
    a: &mut Asm,
    shape: &ProbeShape,
    k: &KernelAggs,
    ring: &super::codegen::MapFds,
    tag: u32,
) -> crate::error::Result<(AggReport, bool)> {
    // The arguments whose strings may be read before the clauses run (see below), each once:
    // a clause's `copyinstr(argN)` takes that copy.
    let mut pre_read: Vec<u8> = Vec::new();
    // A firing kept for a syscall's return (`spec::Replay`): the entry reads every clause's
    // strings first (`keep`); the return runs the clauses on the kept firing, reading them as
    // they run; both place the clauses alike (`replay`).
    let kept = match k.replay {
        Some(Replay::Keep(m)) => Some(m),
        _ => None,
    };
    let keep = kept.is_some();
    let replay = k.replay.is_some();
    if !k.lasting_vars || keep {
        // (Not those of a clause that reads them as it runs: see below.)
        for c in k
            .clauses
            .iter()
            .filter(|c| keep || !(c.keeps_vars || c.firing_vars && writes(c)))
        {
            for &n in c.string_args.as_deref().unwrap_or_default() {
                if !pre_read.contains(&n) && pre_read.len() < MAX_PRE_READ {
                    pre_read.push(n);
                }
            }
        }
    }
    let width = translate::string_scratch_width(k.strsize as usize);
    // The strings are read after the first clause's predicate where it is the only clause
    // copying them and its predicate reads neither them nor the arguments (a false one then
    // costs no read): the arguments' values are not kept for it then.
    let after_predicate = !pre_read.is_empty() && checks_after_first_predicate(&k.clauses);
    let ctx = ShapeContext {
        shape,
        names: &k.names,
        opaque_args: k.opaque_args,
        vars: k.vars.as_ref(),
        strings: Some(k.keys),
        clocks: Some(Clocks {
            timestamp: TIMESTAMP,
            control: k.control,
            vclock: ring.vclock,
        }),
        pre_read: super::filter::PreRead {
            args: &pre_read,
            width,
            // Where variables live in the kernel, their slots are these: the values go in the
            // slots they leave free, if there are enough (else each read reads its argument).
            values: match (&k.vars, keep) {
                _ if after_predicate => None,
                (_, false) => Some(PRE_READ_ARGS),
                (None, true) => Some(PRE_READ_ARGS),
                (Some(kv), true) => super::kvars::free_slots(kv)
                    .filter(|&(_, n)| pre_read.len() <= n)
                    .map(|(base, _)| base),
            },
        },
        specs: k.specs,
        scratchsize: k.scratchsize,
        alloca_locals: &[],
        allocates: false,
        copy_scratch: None,
        epid: Err(super::filter::NO_EPID),
        stacks: k.stacks,
        ustack: k.uwalk,
    };
    // A clause's EPID is keyed by its number at the probe (its index here).
    let mut results: Vec<Result<Translated, Untranslatable>> = k
        .clauses
        .iter()
        .enumerate()
        .map(|(n, c)| {
            let epid = match (k.epids, k.names.id, u16::try_from(n)) {
                (Some(map), translate::ProbeId::Is(probe), Ok(n)) => Ok(super::filter::EpidAt {
                    map,
                    key: super::filter::epid_key(probe, n),
                }),
                (_, translate::ProbeId::Shared, _) => Err(super::filter::SHARED_EPID),
                _ => Err("no map of the clauses' EPIDs at this probe"),
            };
            translate_clause(&ShapeContext { epid, ..ctx }, c, k.strsize as usize)
        })
        .collect();
    // The strings read before the clauses run (see above).
    let mut string_args: Vec<u8> = Vec::new();
    for (c, r) in k.clauses.iter().zip(results.iter_mut()) {
        if !r.as_ref().is_ok_and(Translated::copies_strings) {
            continue;
        }
        if c.keeps_vars {
            // Read first only where a firing that cannot read them is kept for the return.
            for n in c.string_args.as_deref().unwrap_or_default() {
                if keep && !string_args.contains(n) {
                    string_args.push(*n);
                }
            }
            continue;
        }
        // A clause whose variables live for the firing reads its strings first where it can;
        // else as it runs, as one keeping variables (a firing another clause hands over is
        // still run whole in dtrace, this clause with it).
        let first = match &c.string_args {
            Ok(args) => !args.is_empty(),
            Err(_) => false,
        };
        if c.firing_vars && (k.lasting_vars && !replay || !first || writes(c)) {
            continue;
        }
        if k.lasting_vars && !replay {
            *r = Err(Untranslatable::Placement(
                "it copies strings, and a clause at the probe keeps D variables in the kernel (a \
                 firing whose string cannot be read at the probe could not go to dtrace)"
                    .into(),
            ));
            continue;
        }
        if writes(c) {
            // A string not readable at the probe hands the firing over to dtrace, where
            // copyout() would write too late.
            *r = Err(Untranslatable::Placement(
                "it copies in a string, which may not be readable at the probe (the firing \
                 then goes to dtrace, too late for copyout())"
                    .into(),
            ));
            continue;
        }
        match &c.string_args {
            Ok(args) if !args.is_empty() => {
                for n in args {
                    if !string_args.contains(n) {
                        string_args.push(*n);
                    }
                }
            }
            Ok(_) => {
                *r = Err(Untranslatable::Placement(
                    "copyinstr() of an address dtrace's planner does not follow".into(),
                ))
            }
            Err(why) => {
                *r = Err(Untranslatable::Placement(format!(
                    "{why} (the strings of a kernel clause are read before it runs)"
                )))
            }
        }
    }
    // ustack() keys: the firing's user stack is walked once, before any clause running here does
    // anything that lasts, so a firing whose stack the walk cannot place can still go to dtrace
    // whole (see `super::ustack_keys`): after the predicate of the first clause running here
    // when that clause is the only one that walks (a false predicate then costs no walk), else
    // before the first clause (see `WalkAt`).
    // Where D variables live in the kernel the firing cannot go to dtrace whole (the clauses
    // keeping them would run there without them): an aggregation update whose user stack key the
    // walk cannot place goes to dtrace alone, which walks it (`layout::KIND_AGG_UPDATE`), and
    // clauses reading ucaller or ustackdepth stay in dtrace.
    let deferred = k.uwalk.is_some() && k.lasting_vars;
    if deferred {
        for (c, r) in k.clauses.iter().zip(results.iter_mut()) {
            if r.is_ok() && reads_user_stack_values(c) {
                *r = Err(Untranslatable::Placement(UCALLER_WITH_VARS.into()));
            }
        }
    }
    // Records are built here only when every clause of the probe runs here: the records of one
    // firing then reach the buffer in the clauses' order.
    let all_here = k.others.is_none() && results.iter().all(|r| r.is_ok());
    if !all_here {
        for (c, r) in k.clauses.iter().zip(results.iter_mut()) {
            if c.record.is_some() && r.is_ok() {
                *r = Err(Untranslatable::Placement(
                    "it records, and another clause at the probe runs in dtrace (records \
                     keep the clauses' order)"
                        .into(),
                ));
            }
        }
    }
    // A fault is reported in the clauses' order only when no clause before the faulting one
    // runs in dtrace (whose output would follow the fault's).
    let mut dtrace_before = false;
    for (c, r) in k.clauses.iter().zip(results.iter_mut()) {
        dtrace_before |= c.after_dtrace;
        if dtrace_before && r.as_ref().is_ok_and(Translated::can_fault) {
            *r = Err(Untranslatable::Placement(
                "its code can fault, and a clause before it at the probe runs in dtrace \
                 (faults are reported in the clauses' order)"
                    .into(),
            ));
        }
        dtrace_before |= r.is_err();
    }
    let report = results
        .iter()
        .map(|r| r.as_ref().map(|_| ()).map_err(Clone::clone))
        .collect();
    if results.iter().all(|r| r.is_err()) {
        return Ok((report, false));
    }
    // Only the strings of the clauses that run here.
    let string_args: Vec<u8> = string_args
        .into_iter()
        .filter(|n| {
            k.clauses.iter().zip(&results).any(|(c, r)| {
                r.as_ref().is_ok_and(Translated::copies_strings)
                    && c.string_args.as_ref().is_ok_and(|a| a.contains(n))
            })
        })
        .collect();
    // Where the user stack of the ustack() keys is walked.
    let walk_at = k
        .uwalk
        .and_then(|w| Some((WalkAt::of(&k.clauses, &results, deferred)?, w)));
    // The return's side reads its strings as its clauses run (a firing kept at the entry).
    let string_args = if keep || !replay {
        string_args
    } else {
        Vec::new()
    };
    let handover =
        !string_args.is_empty() && !keep || k.known.is_some() || (walk_at.is_some() && !deferred);
    if handover {
        a.store_imm(Size::DW, R10, HANDOVER, 0);
    }
    let done = a.label();
    // Off before BEGIN and after END; else the generation to update.
    a.ld_map_value(R1, k.control, 0);
    a.load(Size::DW, R1, R1, 0);
    a.jmp_imm(op::JEQ, R1, 0, done);
    a.store(Size::DW, R10, GEN, R1);
    // After exit() at any probe, no clause runs (as no probe fires in the framework).
    emit_exited(a, k.exit, done);
    if let Some(known) = k.known {
        emit_known_check(a, known, tag);
    }
    // The variables' slots first: the thread id's is the first pre-read argument's (never
    // both: strings are read first only where no variable outlives the firing).
    if let Some(kv) = &k.vars {
        super::kvars::emit_zero_locals(a, kv);
        if matches!(shape.identity, super::spec::Identity::RawTask(_)) {
            // The thread-locals of the thread the record speaks for (`on-cpu`'s incoming one),
            // when the probe can read its id.
            use translate::ProbeContext;
            let tid = translate::Builtin::Tid;
            if ctx.emit_builtin(&mut Asm::new(), tid).is_ok() {
                ctx.emit_builtin(a, tid)
                    .map_err(crate::error::LinuxError::Asm)?;
                super::kvars::emit_record_thread(a);
            }
        }
        a.store_imm(Size::DW, R10, DVAR_DROPPED, 0);
    }
    let drops = k.vars.as_ref().map(|kv| kv.drops);
    let checks = |a: &mut Asm| {
        emit_string_checks(
            a,
            &ctx,
            &string_args,
            (k.strsize as usize, kept, drops),
            done,
        )
    };
    if !string_args.is_empty() && !after_predicate {
        checks(a)?;
    }
    // The other arguments a clause's code takes from PRE_READ_ARGS (those of clauses that do
    // not run here need no string).
    for (i, &n) in pre_read.iter().enumerate() {
        if !string_args.contains(&n) && ctx.pre_read.values.is_some() {
            translate::ProbeContext::emit_builtin(
                &reading_args(&ctx),
                a,
                translate::Builtin::Arg(n),
            )
            .map_err(crate::error::LinuxError::Asm)?;
            if let Some(base) = ctx.pre_read.values {
                a.store(Size::DW, R10, pre_read_slot(base, i), R0);
            }
        }
    }
    let stamps = k
        .clauses
        .iter()
        .zip(&results)
        .any(|(c, t)| t.is_ok() && (reads_timestamp(c) || c.record.is_some()));
    if let Some(Replay::Run(m)) = k.replay {
        // The kept firing's time.
        emit_kept_stamp(a, k.control, m);
    } else if stamps {
        emit_stamp(a, k.control);
    } else if results
        .iter()
        .any(|t| t.as_ref().is_ok_and(Translated::can_fault))
    {
        // Not stamped yet: the first fault of the firing stamps it (see `emit_fault`).
        a.store_imm(Size::DW, R10, TIMESTAMP, 0);
    }
    let emit_walk = |a: &mut Asm, w: &super::ustack_keys::UserWalk| -> crate::error::Result<()> {
        // A PC no loaded range holds: every clause runs in dtrace on the captured firing
        // (nothing lasting was done yet).
        let (walked, unplaced) = (a.label(), a.label());
        super::ustack_keys::emit_walk_once(a, shape, w, unplaced)?;
        a.ja(walked);
        a.bind(unplaced);
        if deferred {
            // The updates with user stack keys go to dtrace (see `emit_agg`).
            super::ustack_keys::emit_mark_unplaced(a, shape, w, done)?;
            a.ja(walked);
        } else {
            a.store_imm(Size::DW, R10, HANDOVER, HANDED_OVER);
            a.ja(done);
        }
        a.bind(walked);
        Ok(())
    };
    if let Some((WalkAt::Start, w)) = &walk_at {
        emit_walk(a, w)?;
    }
    let mut exited_before = false;
    for (n, (c, t)) in k.clauses.iter().zip(&results).enumerate() {
        let Ok(t) = t else { continue };
        // Its alloca() memory starts empty (see `translate::alloca`), whether it allocates or
        // follows a pointer another clause or firing kept in a variable.
        a.store_imm(Size::DW, R10, ALLOCA_TOP, 0);
        if exited_before {
            // After exit() in an earlier clause of this firing no clause runs.
            emit_exited(a, k.exit, done);
        }
        let (next, report, abandon) = (a.label(), a.label(), a.label());
        let exits = Exits {
            dropped: a.label(),
            faulted: a.label(),
        };
        let clause = u16::try_from(n)
            .map_err(|_| crate::error::LinuxError::Asm("too many clauses".into()))?;
        // The clause's record is reserved before anything it does lasts: a full ring skips the
        // clause whole, as DTrace skips an ECB whose room it cannot reserve. A predicate without
        // side effects runs first (a false one then costs no record); one with them runs after
        // the reservation (see `framework::has_side_effects`).
        let reserve_first = c.record.is_some()
            && c.predicate
                .as_ref()
                .is_some_and(dtrace_framework::framework::has_side_effects);
        // Its user stacks are the probe's walk where it walked before the reservation.
        let walk = walk_at
            .filter(|(at, _)| {
                !deferred
                    && (*at == WalkAt::Start || *at == WalkAt::AfterPredicate(n) && !reserve_first)
            })
            .map(|(_, w)| w);
        let walked = walk.as_ref().map(|w| (shape, w));
        if let (true, Some(r)) = (reserve_first, &c.record) {
            emit_reserve(a, r, ring, (tag, clause), walked, next)?;
        }
        if let Some(p) = &t.predicate {
            // The predicate's code starts the clause's; no record is reserved yet when it
            // faults, unless it was reserved first.
            let before_record = Exits {
                faulted: if reserve_first { exits.faulted } else { report },
                ..exits
            };
            emit_fragment(a, p, 0, before_record);
            if reserve_first {
                let holds = a.label();
                a.jmp_imm(op::JNE, R0, 0, holds);
                emit_discard(a, ring.room, c.record.as_ref().map_or(0, |r| r.size));
                a.ja(next);
                a.bind(holds);
            } else {
                a.jmp_imm(op::JEQ, R0, 0, next);
            }
        }
        if n == 0 && after_predicate && !string_args.is_empty() {
            // (Nothing lasting was done yet: this is the first clause, its predicate pure.)
            checks(a)?;
        }
        if let Some((_, w)) = walk_at.filter(|(at, _)| *at == WalkAt::AfterPredicate(n)) {
            emit_walk(a, &w)?;
        }
        if let (false, Some(r)) = (reserve_first, &c.record) {
            emit_reserve(a, r, ring, (tag, clause), walked, next)?;
        }
        let stores_before = |a: &mut Asm, j: usize| {
            for (_, base, f) in t.stores.iter().filter(|(b, _, _)| *b == j) {
                emit_fragment(a, f, *base, exits);
            }
        };
        // The aggregating and recording actions in the clause's order, stores between them.
        let steps = c.aggs.len() + t.records.len();
        let mut aggs = c.aggs.iter().zip(&t.aggs);
        for j in 0..steps {
            stores_before(a, j);
            match t.records.iter().find(|(s, _, _)| *s == j) {
                Some((_, _, v)) => {
                    let action = c
                        .record
                        .iter()
                        .flat_map(|r| &r.actions)
                        .find(|x| x.step == j);
                    if let (Some(v), Some(action), Some(op), Some(specs)) =
                        (v, action, action.and_then(|x| x.spec), &k.specs)
                    {
                        emit_fragment(a, &v.fragment, action.base, exits);
                        let spec_exits = super::speculation::SpecExits {
                            abandon,
                            faulted: exits.faulted,
                        };
                        super::speculation::emit_action(
                            a,
                            specs,
                            op,
                            ring,
                            tag,
                            (REC, c.record.as_ref().map_or(0, |r| r.size)),
                            VAL,
                            last_pc(action)?,
                            spec_exits,
                        );
                    } else if let (Some(v), Some(action)) = (v, action.filter(|x| x.chill)) {
                        emit_fragment(a, &v.fragment, action.base, exits);
                        let pc = last_pc(action)?;
                        super::chill::emit(a, k.chill, pc, (INCR, VAL), exits.faulted);
                    } else if let (Some(v), Some(action)) = (v, action) {
                        emit_record_value(a, v, action, exits, k.strsize.max(1) as usize)?;
                        if action.exit {
                            emit_exit(a, k.exit);
                            exited_before = true;
                        }
                        if action.signal == Some(SignalAction::Raise) {
                            super::signal::emit_raise(a);
                        }
                    }
                    if let (Some(r), Some(x)) = (&c.record, action.filter(|x| x.stack.is_some())) {
                        emit_record_stack(a, r, x)?;
                    }
                    if action.is_some_and(|x| x.signal == Some(SignalAction::Stop)) {
                        super::signal::emit_stop(a);
                    }
                }
                None => {
                    if let Some((agg, ta)) = aggs.next() {
                        emit_agg(a, shape, (k, ring), agg, ta, exits)?;
                    }
                }
            }
        }
        stores_before(a, steps);
        if let Some(r) = &c.record {
            let none = a.label();
            a.load(Size::DW, R1, R10, REC_OK);
            a.jmp_imm(op::JEQ, R1, 0, none);
            a.load(Size::DW, R7, R10, REC);
            if t.speculates {
                // A speculated record goes to its speculation's buffer, not the principal one:
                // the room it took there comes back now, once it is sure to be submitted (a
                // clause abandoned or faulting after `speculate()` gives it back as it
                // discards the record).
                let principal = a.label();
                a.load(Size::W, R1, R7, super::layout::built::SPEC as i16);
                a.jmp_imm(op::JEQ, R1, 0, principal);
                emit_give_room(a, ring.room, r.size, REC);
                a.bind(principal);
            }
            super::codegen::emit_submit(a, ring);
            a.bind(none);
        }
        let (can_drop, can_fault) = (t.can_drop(), t.can_fault());
        if can_drop || can_fault || t.speculates {
            a.ja(next);
        }
        if t.speculates {
            // speculate() of a speculation not active: the clause ends silently, its record
            // goes nowhere.
            a.bind(abandon);
            if c.record.is_some() {
                emit_discard(a, ring.room, c.record.as_ref().map_or(0, |r| r.size));
            }
            if can_drop || can_fault {
                a.ja(next);
            }
        }
        a.bind(exits.dropped);
        if can_drop {
            // A dropped store ended the clause: its record goes nowhere.
            a.store_imm(Size::DW, R10, DVAR_DROPPED, 0);
            if c.record.is_some() {
                emit_discard(a, ring.room, c.record.as_ref().map_or(0, |r| r.size));
            }
            if can_fault {
                a.ja(next);
            }
        }
        a.bind(exits.faulted);
        if c.record.is_some()
            && (t.reads_memory()
                || t.settles
                || t.chills
                || t.fragments()
                    .skip(usize::from(t.predicate.is_some() && !reserve_first))
                    .any(|f| f.can_fault))
        {
            // A fault after the record was reserved ended the clause: its record goes nowhere.
            emit_discard(a, ring.room, c.record.as_ref().map_or(0, |r| r.size));
        }
        a.bind(report);
        if can_fault {
            let fault = FaultSite {
                tag,
                clause,
                stamped: stamps,
            };
            emit_fault(a, &ctx, k.control, ring, fault);
        }
        a.bind(next);
    }
    a.bind(done);
    Ok((report, handover))
}

/// Why a clause reading `ucaller` or `ustackdepth` stays in dtrace where D variables live in the
/// kernel at its probe.
const UCALLER_WITH_VARS: &str = "it reads ucaller or ustackdepth, which the probe cannot always \
    walk there (a PC of code dtrace has not loaded yet hands the firing over to dtrace), where \
    variables kept in the kernel are not";

/// Where a probe's code walks the user stack, once a firing, before any clause running there
/// does anything that lasts: a firing whose stack the walk cannot place goes to dtrace whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WalkAt {
    /// After the predicate of clause `n`, the first running here and the only one that walks,
    /// whose predicate has no side effects (a false predicate costs no walk).
    AfterPredicate(usize),
    /// Before the first clause running here: another runs before the first that walks (it
    /// would run twice, in the kernel and in dtrace, were the firing handed over after it), or
    /// several walk (each reads the one walk, which a false predicate must not skip), or the
    /// walking clause's predicate has side effects (it would run twice) or reads the walk
    /// (`/ustackdepth > 3/`).
    Start,
}

impl WalkAt {
    /// Where the probe's code walks, `None` when no clause running there walks.
    fn of(
        clauses: &[KernelAggClause],
        results: &[Result<Translated, Untranslatable>],
        deferred: bool,
    ) -> Option<WalkAt> {
        let here: Vec<(usize, &KernelAggClause)> = clauses
            .iter()
            .zip(results)
            .enumerate()
            .filter(|(_, (_, r))| r.is_ok())
            .map(|(n, (c, _))| (n, c))
            .collect();
        let mut walking = here.iter().filter(|(_, c)| walks_user_stack(c, deferred));
        let &(n, c) = walking.next()?;
        let alone = walking.next().is_none();
        let first = here.first().is_some_and(|(f, _)| *f == n);
        let pure = !c
            .predicate
            .as_ref()
            .is_some_and(dtrace_framework::framework::has_side_effects);
        Some(
            if alone && first && pure && !predicate_reads_user_stack(c) {
                WalkAt::AfterPredicate(n)
            } else {
                WalkAt::Start
            },
        )
    }
}

/// Whether the probe's strings may be read after the predicate of its first clause, not before
/// any clause runs (`emit_aggs`): that clause is the only one copying the user strings of
/// probe arguments, and its predicate has no side effects and reads no argument and no user
/// memory (it could read the strings' copies or their arguments' kept values before they are
/// made). Then a firing its predicate rejects reads no string.
fn checks_after_first_predicate(clauses: &[KernelAggClause]) -> bool {
    use dtrace_dif::instr::Instr;
    use dtrace_dif::subr::Subr;
    use dtrace_dif::vars;
    let copies = |c: &KernelAggClause| c.string_args.as_ref().is_ok_and(|a| !a.is_empty());
    let Some((first, rest)) = clauses.split_first() else {
        return false;
    };
    let Some(p) = first.predicate.as_ref() else {
        return false;
    };
    let reads_args = p.text.iter().any(|w| match Instr::decode(*w) {
        Ok(Instr::LoadVar { var, .. }) => {
            (vars::DIF_VAR_ARG0..=vars::DIF_VAR_ARG9).contains(&u32::from(var))
        }
        Ok(Instr::LoadArray { var, .. }) => u32::from(var) == vars::DIF_VAR_ARGS,
        _ => false,
    });
    let reads_user = p.subrs_called().any(|s| {
        matches!(
            s,
            Subr::Copyinstr | Subr::Copyin | Subr::Copyinto | Subr::Copyout | Subr::Copyoutstr
        )
    });
    copies(first)
        && !rest.iter().any(copies)
        && !reads_args
        && !reads_user
        && !dtrace_framework::framework::has_side_effects(p)
}

/// Whether clause `c` walks the user stack: it has `ustack()` or `jstack()` keys, reads
/// `ucaller` or `ustackdepth`, or records a user stack its probe walks (unless `deferred`, see
/// [`records_user_stack`]).
fn walks_user_stack(c: &KernelAggClause, deferred: bool) -> bool {
    let keys = c.aggs.iter().any(|g| {
        g.keys
            .iter()
            .any(|(_, kind)| matches!(kind, KeyKind::UserStack(_)))
    });
    keys || reads_user_stack_values(c) || !deferred && records_user_stack(c)
}

/// Whether clause `c`'s record holds `ustack()` or `jstack()` actions. Its user stack is the
/// probe's walk ([`super::ustack::TailForm::Walked`]) unless D variables live in the kernel at
/// the probe (`deferred`: a firing whose stack the walk cannot place cannot go to dtrace whole,
/// and its record takes the stack for dtrace to walk).
fn records_user_stack(c: &KernelAggClause) -> bool {
    c.record
        .as_ref()
        .is_some_and(super::spec::KernelRecord::records_user_stack)
}

/// Whether clause `c` reads `ucaller` or `ustackdepth`: values of the walk that only a firing
/// handed over to dtrace whole has when the probe cannot place the stack (where an aggregation
/// update with a user stack key goes to dtrace alone, see `ustack_keys::emit_mark_unplaced`).
fn reads_user_stack_values(c: &KernelAggClause) -> bool {
    clause_objects(c).any(reads_walk)
}

/// Whether the predicate of clause `c` reads `ucaller` or `ustackdepth`.
fn predicate_reads_user_stack(c: &KernelAggClause) -> bool {
    c.predicate.as_ref().is_some_and(reads_walk)
}

/// Whether `o` reads `ucaller` or `ustackdepth`.
fn reads_walk(o: &DifObject) -> bool {
    use dtrace_dif::instr::Instr;
    use dtrace_dif::opcode::Opcode;
    use dtrace_dif::vars;
    o.text.iter().any(|w| {
        matches!(Instr::decode(*w), Ok(Instr::LoadVar { op: Opcode::Ldgs, var, .. })
            if matches!(u32::from(var), vars::DIF_VAR_UCALLER | vars::DIF_VAR_USTACKDEPTH))
    })
}

/// Stores the key of the current process at probe `tag` (tag << 32 | pid) in VAL. Uses r0-r1.
fn emit_process_key(a: &mut Asm, tag: u32) {
    a.call(helper::GET_CURRENT_PID_TGID)
        .alu_imm(op::RSH, R0, 32)
        .mov_imm(R1, tag as i32)
        .alu_imm(op::LSH, R1, 32)
        .alu(op::OR, R0, R1)
        .store(Size::DW, R10, VAL, R0);
}

/// Adds the process key in VAL (see [`emit_process_key`]) to the hash map `map`, with the
/// value 1 (in INCR). Uses r0-r4.
fn emit_note_process(a: &mut Asm, map: i32) {
    a.store_imm(Size::DW, R10, INCR, 1);
    a.ld_map_fd(R1, map)
        .frame_addr(R2, i32::from(VAL))
        .frame_addr(R3, i32::from(INCR))
        .mov_imm(R4, 0)
        .call(helper::MAP_UPDATE_ELEM);
}

/// At a probe placed for every process: the first firing of a process the map `known` does
/// not hold (see `KernelAggs::known`) adds it there and sets [`HANDOVER`] to [`ANNOUNCE`], so the
/// record path records the firing whatever the other clauses' filter says (unflagged: dtrace
/// runs only the clauses it runs anyway), which tells dtrace of the process; the kernel clauses
/// run as for any firing. Uses r0-r3.
fn emit_known_check(a: &mut Asm, known: i32, tag: u32) {
    let found = a.label();
    // The key and the value in VAL and INCR, free until the clauses run.
    emit_process_key(a, tag);
    a.ld_map_fd(R1, known)
        .frame_addr(R2, i32::from(VAL))
        .call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JNE, R0, 0, found);
    emit_note_process(a, known);
    a.store_imm(Size::DW, R10, HANDOVER, ANNOUNCE);
    a.bind(found);
}

/// When the ring had no room for the record of a firing that announces its process (see
/// [`emit_known_check`]): notes the process's key in the map `missed` (see
/// `KernelAggs::missed`), then jumps to `no_drop` when given (nothing else was recorded for
/// dtrace). Other firings go on. Uses r0-r4.
pub(crate) fn emit_missed_announcement(a: &mut Asm, missed: i32, tag: u32, no_drop: Option<Label>) {
    let other = a.label();
    a.load(Size::DW, R1, R10, HANDOVER)
        .jmp_imm(op::JNE, R1, ANNOUNCE, other);
    emit_process_key(a, tag);
    emit_note_process(a, missed);
    if let Some(l) = no_drop {
        a.ja(l);
    }
    a.bind(other);
}

/// Most probe arguments whose strings are read before the clauses run.
const MAX_PRE_READ: usize = 4;

/// Whether clause `c` calls a destructive subroutine (`copyout()`), which must write at the
/// probe: a firing handed over to dtrace would write too late.
fn writes(c: &KernelAggClause) -> bool {
    c.stores
        .iter()
        .any(|(_, _, o)| dtrace_framework::framework::calls_destructive(o))
}

/// The stack slot of the value of the first argument whose string is read before the clauses
/// run (`PreRead::values`), the next ones' below it. A probe reads strings first only when no D
/// variable of its clauses lives in the kernel, so these are the slots `capture::kvars` keeps
/// the thread's id and thread-locals in otherwise.
const PRE_READ_ARGS: i16 = super::kvars::TID;

/// The slot of pre-read argument number `i` (below [`MAX_PRE_READ`]) of the slots from `base`
/// down ([`PRE_READ_ARGS`], or `kvars::free_slots` where variables live in the kernel).
fn pre_read_slot(base: i16, i: usize) -> i16 {
    base - 8 * i.min(MAX_PRE_READ - 1) as i16
}

const _: () = assert!(PRE_READ_ARGS - 8 * (MAX_PRE_READ as i16 - 1) >= -512);

/// `ctx` reading the probe's arguments as the probe has them (not from the slots where the
/// checks keep them for the clauses).
fn reading_args<'a>(ctx: &ShapeContext<'a>) -> ShapeContext<'a> {
    ShapeContext {
        shape: ctx.shape,
        names: ctx.names,
        opaque_args: ctx.opaque_args,
        vars: ctx.vars,
        strings: ctx.strings,
        clocks: ctx.clocks,
        pre_read: super::filter::PreRead {
            values: None,
            ..ctx.pre_read
        },
        ..*ctx
    }
}

/// Reads the user string at each probe argument of `args` (as `copyinstr()` would, into its
/// slot of the string scratch, zeroed first: see `ShapeContext::pre_read`, where the clauses'
/// `copyinstr(argN)` take it); when one cannot be read, sets [`HANDOVER`] and jumps to `done`,
/// where no kernel clause runs. An argument of 0 is not read: `copyinstr(0)` faults alike on
/// both paths.
fn emit_string_checks(
    a: &mut Asm,
    ctx: &ShapeContext<'_>,
    args: &[u8],
    (strsize, kept, drops): (usize, Option<ReplayMaps>, Option<i32>),
    done: Label,
) -> crate::error::Result<()> {
    use dtrace_ebpf::translate::{Builtin, ProbeContext};
    let asm = |e: String| crate::error::LinuxError::Asm(e);
    let width = translate::string_scratch_width(strsize);
    let most = i32::try_from(strsize.saturating_sub(1).max(1))
        .map_err(|_| asm("strsize too large".into()))?;
    let (handover, checked) = (a.label(), a.label());
    let reading = reading_args(ctx);
    for &n in args {
        let next = a.label();
        reading.emit_builtin(a, Builtin::Arg(n)).map_err(asm)?;
        // Kept for the clauses' code (see `PreRead::values`).
        if let (Some(i), Some(base)) = (
            ctx.pre_read.args.iter().position(|&m| m == n),
            ctx.pre_read.values,
        ) {
            a.store(Size::DW, R10, pre_read_slot(base, i), R0);
        }
        a.jmp_imm(op::JEQ, R0, 0, next);
        a.store(Size::DW, R10, VAL, R0);
        if ctx.pre_reads_string(n) {
            ctx.emit_pre_read_string(a, n).map_err(asm)?;
            a.jmp_imm(op::JEQ, R0, 0, handover);
            for w in (0..width as i16).step_by(8) {
                a.store_imm(Size::DW, R0, w, 0);
            }
        } else {
            ctx.emit_string_scratch(a, 0, width).map_err(asm)?;
            a.jmp_imm(op::JEQ, R0, 0, handover);
        }
        a.mov(R1, R0).mov_imm(R2, most);
        a.load(Size::DW, R3, R10, VAL);
        a.call(helper::PROBE_READ_USER_STR);
        a.jmp_imm(op::JSLT, R0, 0, handover);
        a.bind(next);
    }
    a.ja(checked);
    a.bind(handover);
    match kept {
        Some(m) => emit_keep_firing(a, &reading, (m, drops), done)?,
        None => {
            a.store_imm(Size::DW, R10, HANDOVER, HANDED_OVER);
        }
    }
    a.ja(done);
    a.bind(checked);
    Ok(())
}

/// Keeps the firing for the syscall's return (`spec::Replay`), where it runs no clause: its
/// `bpf_ktime_get_ns()`, syscall number and arguments (as `ctx` reads them at the probe) in
/// `m.pending` under the thread's id, counted in `m.armed` (where there is one). When the map
/// is full nothing is kept: the clauses do not run, a dynamic variable drop (`drops`, the kernel
/// variables' count).
/// Uses r0-r5, INCR and KEYPTR (no clause runs after it).
fn emit_keep_firing(
    a: &mut Asm,
    ctx: &ShapeContext<'_>,
    (m, drops): (ReplayMaps, Option<i32>),
    done: Label,
) -> crate::error::Result<()> {
    use dtrace_ebpf::translate::{Builtin, ProbeContext};
    let asm = |e: String| crate::error::LinuxError::Asm(e);
    use super::codegen::{emit_keyed_call, emit_thread_key};
    emit_thread_key(a, INCR);
    // A zeroed value (the aggregations' zeros), then its fields.
    a.ld_map_value(R3, m.zeros, 0).mov_imm(R4, 0);
    emit_keyed_call(a, m.pending, INCR, helper::MAP_UPDATE_ELEM);
    emit_keyed_call(a, m.pending, INCR, helper::MAP_LOOKUP_ELEM);
    let kept = a.label();
    a.jmp_imm(op::JNE, R0, 0, kept);
    match drops {
        Some(d) => emit_count_drop(a, d, INCR, done),
        None => {
            a.ja(done);
        }
    }
    a.bind(kept);
    a.store(Size::DW, R10, KEYPTR, R0);
    let nr = i32::try_from(m.nr).map_err(|_| asm("syscall number".into()))?;
    a.store_imm(Size::DW, R0, 8, nr);
    a.call(helper::KTIME_GET_NS);
    a.load(Size::DW, R1, R10, KEYPTR).store(Size::DW, R1, 0, R0);
    for n in 0..ctx.shape.args.len().min(REPLAY_ARGS) {
        let n8 = u8::try_from(n).map_err(|_| asm("argument number".into()))?;
        ctx.emit_builtin(a, Builtin::Arg(n8)).map_err(asm)?;
        let at = i16::try_from(REPLAY_ARGS_AT + 8 * n).map_err(|_| asm("argument".into()))?;
        a.load(Size::DW, R1, R10, KEYPTR)
            .store(Size::DW, R1, at, R0);
    }
    // One more firing kept (the return's side counts it off).
    if let Some(armed) = m.armed {
        a.ld_map_value(R2, armed, 0).mov_imm(R1, 1);
        a.atomic_add64(R2, 0, R1);
    }
    Ok(())
}

/// Stamps the firing with the time the kept firing of `m` was taken at (see [`emit_stamp`]);
/// a thread holding none (never: the return's side looks it up first) stamps 0.
fn emit_kept_stamp(a: &mut Asm, control: i32, m: ReplayMaps) {
    let none = a.label();
    a.store_imm(Size::DW, R10, TIMESTAMP, 0);
    super::codegen::emit_thread_key(a, INCR);
    super::codegen::emit_keyed_call(a, m.pending, INCR, helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, none);
    a.load(Size::DW, R0, R0, 0);
    a.ld_map_value(R1, control, 0);
    a.load(Size::DW, R1, R1, super::spec::CONTROL_CLOCK as i16);
    a.alu(op::ADD, R0, R1);
    a.store(Size::DW, R10, TIMESTAMP, R0);
    a.bind(none);
}

/// Whether a firing of `k`'s clauses at a syscall's entry may be kept for the syscall's return
/// when a string they copy cannot be read yet (`spec::Replay`): their variables outlive the
/// firing (else a firing is handed over to dtrace), a clause copies the user string of a probe
/// argument, and nothing they read or do differs at the return but the arguments and the time
/// the replay restores: no kernel stack (`stack()`, `caller`, `stackdepth`), no `vtimestamp`,
/// `errno` or `uregs[]`, no `copyout()` (which would write after the call).
pub fn replayable(k: &KernelAggs) -> bool {
    use dtrace_dif::instr::Instr;
    use dtrace_dif::vars;
    let differs = |o: &DifObject| {
        o.text.iter().any(|w| match Instr::decode(*w) {
            Ok(Instr::LoadVar { var, .. }) => matches!(
                u32::from(var),
                vars::DIF_VAR_VTIMESTAMP
                    | vars::DIF_VAR_CALLER
                    | vars::DIF_VAR_STACKDEPTH
                    | vars::DIF_VAR_ERRNO
            ),
            Ok(Instr::LoadArray { var, .. }) => u32::from(var) == vars::DIF_VAR_UREGS,
            _ => false,
        })
    };
    let kernel_stack = |c: &KernelAggClause| {
        c.record
            .iter()
            .flat_map(|r| &r.actions)
            .any(|x| x.stack.is_some())
            || c.aggs
                .iter()
                .flat_map(|g| &g.keys)
                .any(|(_, kind)| matches!(kind, KeyKind::KernelStack(_)))
    };
    let copies = k
        .clauses
        .iter()
        .any(|c| c.string_args.as_ref().is_ok_and(|a| !a.is_empty()));
    k.lasting_vars
        && copies
        && k.known.is_none()
        && !k
            .clauses
            .iter()
            .any(|c| writes(c) || kernel_stack(c) || clause_objects(c).any(differs))
}

/// Reserves the ring's record for clause number `clause` of the probe and writes its headers
/// (the ring's, then the framework's: a zero EPID that dtrace fills in, and the firing's
/// timestamp); the rest is zeroed, as the framework's record starts, and the user stack of its
/// `ustack()` actions is taken past it (see `super::ustack`). The record's address is
/// kept at [`REC`]. The CPU's principal buffer (dtrace's) must have room for it too (the room
/// map, `MapFds::room`, which dtrace sets at each switch of its buffers). When the ring is full
/// or the buffer has no room, a drop is counted on the CPU (a DTrace drop), [`REC`]
/// holds zero and control goes to `skip`: the clause is skipped whole (no store, no aggregation,
/// no signal), as DTrace's `dtrace_probe()` skips an ECB whose `dte_needed` bytes it cannot
/// reserve in the principal buffer. A refusal for the buffer's room is also counted at
/// the account's [`REFUSALS`] (it fills a `fill` buffer); a refusal of the ring's gives the room back.
/// A record of no size (`stop()` alone) reserves nothing. `walked`: the probe walked the user
/// stack before (`ustack_keys::emit_walk_once`), and the record takes that walk's frames.
fn emit_reserve(
    a: &mut Asm,
    r: &super::spec::KernelRecord,
    ring: &super::codegen::MapFds,
    (tag, clause): (u32, u16),
    walked: Option<(&ProbeShape, &super::ustack_keys::UserWalk)>,
    skip: Label,
) -> crate::error::Result<()> {
    use super::layout::{built, KIND_BUILT};
    if r.size == 0 {
        // Actions that record nothing (`stop()` alone): the framework writes no record either.
        a.store_imm(Size::DW, R10, REC, 0);
        a.store_imm(Size::DW, R10, REC_OK, 0);
        return Ok(());
    }
    // The framework's record, then the frames its stack() actions take (see `StackTail`), then
    // the user stack of its ustack() actions (see `super::ustack`).
    let form = super::ustack::TailForm::of(walked.is_some());
    let total = built::SIZE + r.ring_bytes_as(form);
    let total32 = i32::try_from(total)
        .map_err(|_| crate::error::LinuxError::Asm("record too large".into()))?;
    let needed = i32::try_from((r.size as usize).next_multiple_of(8))
        .map_err(|_| crate::error::LinuxError::Asm("record too large".into()))?;
    let (have, refused, lost) = (a.label(), a.label(), a.label());
    // The CPU (kept at REC until the record's header takes it), then its account of the
    // principal buffer's room (dtrace's, see `Session::set_record_room`), one pointer for the
    // whole reservation: taken first, so dtrace never refuses the record.
    a.call(helper::GET_SMP_PROCESSOR_ID)
        .store(Size::DW, R10, REC, R0);
    emit_room_account(a, ring.room, VAL, lost);
    // Taken at once (dtrace takes room from the same account, see `crate::room`), and given
    // back when it passed the grant.
    let fits = a.label();
    a.mov_imm(R2, needed).atomic_fetch_add64(R0, USED, R2);
    a.alu_imm(op::ADD, R2, needed);
    a.load(Size::DW, R1, R0, GRANTED);
    a.jmp_reg(op::JLE, R2, R1, fits);
    a.mov_imm(R2, -needed).atomic_add64(R0, USED, R2);
    a.ja(refused);
    a.bind(fits);
    a.store(Size::DW, R10, VAL, R0);
    a.ld_map_fd(R1, ring.ring)
        .mov_imm(R2, total32)
        .mov_imm(R3, 0)
        .call(helper::RINGBUF_RESERVE);
    a.jmp_imm(op::JNE, R0, 0, have);
    // The ring had no room: a drop, but not the principal buffer's, whose room comes back.
    a.load(Size::DW, R1, R10, VAL);
    a.mov_imm(R2, -needed).atomic_add64(R1, USED, R2);
    a.ja(lost);
    // The principal buffer had no room: counted apart too (see `Session::cpu_room_refusals`),
    // as such a drop fills a `fill` buffer.
    a.bind(refused);
    a.mov_imm(R1, 1).atomic_add64(R0, REFUSALS, R1);
    a.bind(lost);
    a.store_imm(Size::DW, R10, REC, 0);
    a.store_imm(Size::DW, R10, REC_OK, 0);
    let counted = a.label();
    emit_count_drop(a, ring.drops, VAL, counted);
    a.bind(counted).ja(skip);
    a.bind(have).mov(R7, R0);
    a.load(Size::DW, R1, R10, REC).store(Size::DW, R10, REC, R7);
    a.mov_imm(R2, 1).store(Size::DW, R10, REC_OK, R2);
    // (The user stack's tail is written whole where it is taken, below.)
    for off in (0..built::SIZE + r.stack_bytes()).step_by(8) {
        let off = i16::try_from(off)
            .map_err(|_| crate::error::LinuxError::Asm("record too large".into()))?;
        a.store_imm(Size::DW, R7, off, 0);
    }
    a.store_imm(Size::H, R7, built::KIND as i16, i32::from(KIND_BUILT));
    a.store_imm(Size::H, R7, built::CLAUSE as i16, i32::from(clause));
    a.store_imm(Size::W, R7, built::TAG as i16, tag as i32);
    a.store(Size::W, R7, built::CPU as i16, R1);
    a.call(helper::GET_CURRENT_PID_TGID)
        .alu_imm(op::RSH, R0, 32)
        .store(Size::W, R7, built::PID as i16, R0);
    // The framework's header: EPID (0 here), then the timestamp's high and low words.
    let at = built::SIZE as i16;
    a.load(Size::DW, R1, R10, TIMESTAMP);
    a.store(Size::W, R7, at + 8, R1);
    a.alu_imm(op::RSH, R1, 32).store(Size::W, R7, at + 4, R1);
    // The user stack of its ustack() actions, taken once for them all: it does not change while
    // the clause runs.
    if let Some(t) = r.ustack_tail() {
        t.emit(a, built::SIZE, walked)?;
    }
    Ok(())
}

/// Discards the clause's record of `size` bytes at [`REC`] (when one was reserved) and gives
/// its room back to the CPU's principal buffer (`room`, see [`emit_give_room`]); uses r0-r5.
fn emit_discard(a: &mut Asm, room: i32, size: u32) {
    let none = a.label();
    a.load(Size::DW, R1, R10, REC_OK);
    a.jmp_imm(op::JEQ, R1, 0, none);
    a.load(Size::DW, R1, R10, REC);
    a.mov_imm(R2, 0).call(helper::RINGBUF_DISCARD);
    emit_give_room(a, room, size, REC);
    a.bind(none);
}

/// Looks up this CPU's account of the principal buffer's room (map `room`, see
/// [`crate::room`]), its address in r0, the CPU's number written to the stack slot `slot` as the
/// key; to `missing` when there is none. Uses r0-r5.
fn emit_room_account(a: &mut Asm, room: i32, slot: i16, missing: crate::bpf::Label) {
    a.call(helper::GET_SMP_PROCESSOR_ID)
        .store(Size::W, R10, slot, R0);
    a.ld_map_fd(R1, room).frame_addr(R2, i32::from(slot));
    a.call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, missing);
}

/// Gives the room a record of `size` bytes took in the CPU's principal buffer back (map `room`,
/// see `Session::set_record_room`): the record will not reach it (discarded, or speculated, whose
/// data goes to the speculation's buffer), as DTrace's principal buffer does not advance past a
/// reservation its ECB did not use. `slot` is a stack slot it may overwrite. Uses r0-r5.
pub(crate) fn emit_give_room(a: &mut Asm, room: i32, size: u32, slot: i16) {
    let needed = i32::try_from(u64::from(size).next_multiple_of(8)).unwrap_or(i32::MAX);
    if needed == 0 {
        return;
    }
    let none = a.label();
    emit_room_account(a, room, slot, none);
    a.mov_imm(R1, -needed).atomic_add64(R0, USED, R1);
    a.bind(none);
}

/// Stamps the firing: its `timestamp` (the kernel's clock plus the offset to the framework's in
/// the control map `control`) goes to [`TIMESTAMP`]. Uses r0, r1.
fn emit_stamp(a: &mut Asm, control: i32) {
    a.call(helper::KTIME_GET_NS);
    a.ld_map_value(R1, control, 0);
    a.load(Size::DW, R1, R1, super::spec::CONTROL_CLOCK as i16);
    a.alu(op::ADD, R0, R1);
    a.store(Size::DW, R10, TIMESTAMP, R0);
}

/// Where a fault is reported from.
#[derive(Clone, Copy)]
struct FaultSite {
    /// The probe's tag.
    tag: u32,
    /// The clause's number among the probe's kernel clauses.
    clause: u16,
    /// Whether the firing was stamped before its first clause ([`TIMESTAMP`] holds its
    /// `timestamp`); if not, [`TIMESTAMP`] is 0 until a fault of the firing stamps it, so every
    /// fault of one firing reports one time, as the interpreter's ERROR probes share theirs.
    stamped: bool,
}

/// Writes the fault the frame holds (its pc already counted in the clause's code) for the
/// clause of `site` into the ring, a `KIND_FAULT` record with the faulting thread's context (as
/// `ctx` reads it at the probe: its ids, `ppid`, `vtimestamp`, `arg0`, the firing's time), which
/// the ERROR probe's clauses see as the interpreter's see their faulting firing's; a full ring
/// counts a drop on the CPU. Uses r0-r5, r7-r9.
fn emit_fault(
    a: &mut Asm,
    ctx: &ShapeContext,
    control: i32,
    ring: &super::codegen::MapFds,
    site: FaultSite,
) {
    use super::layout::{kfault, KIND_FAULT};
    use dtrace_ebpf::translate::{Builtin, ProbeContext};
    let FaultSite { tag, clause, .. } = site;
    let (have, done) = (a.label(), a.label());
    a.ld_map_fd(R1, ring.ring)
        .mov_imm(R2, kfault::SIZE as i32)
        .mov_imm(R3, 0)
        .call(helper::RINGBUF_RESERVE);
    a.jmp_imm(op::JNE, R0, 0, have);
    emit_count_drop(a, ring.drops, VAL, done);
    a.bind(have).mov(R7, R0);
    a.store_imm(Size::H, R7, kfault::KIND as i16, i32::from(KIND_FAULT));
    a.store_imm(Size::H, R7, kfault::CLAUSE as i16, i32::from(clause));
    a.store_imm(Size::W, R7, kfault::TAG as i16, tag as i32);
    a.store_imm(Size::W, R7, kfault::CPU as i16 + 4, 0);
    a.call(helper::GET_SMP_PROCESSOR_ID)
        .store(Size::W, R7, kfault::CPU as i16, R0);
    a.load(Size::DW, R1, R10, FRAME.fault_at())
        .store(Size::DW, R7, kfault::WORD as i16, R1);
    a.load(Size::DW, R1, R10, FRAME.fault_addr_at())
        .store(Size::DW, R7, kfault::ADDR as i16, R1);
    // The firing's time, as the interpreter's ERROR probe shares its firing's `timestamp`
    // (stamped at the firing's first fault when no clause reads a clock; `vtimestamp` is read
    // at that time).
    if !site.stamped {
        let stamped = a.label();
        a.load(Size::DW, R0, R10, TIMESTAMP);
        a.jmp_imm(op::JNE, R0, 0, stamped);
        emit_stamp(a, control);
        a.bind(stamped);
    }
    a.load(Size::DW, R0, R10, TIMESTAMP);
    a.ld_map_value(R1, control, 0);
    a.load(Size::DW, R1, R1, super::spec::CONTROL_CLOCK as i16);
    a.alu(op::SUB, R0, R1);
    a.store(Size::DW, R7, kfault::KTIME as i16, R0);
    // What the probe's clauses would read: 0 where they could not read it at this probe.
    for (b, at) in [
        (Builtin::Ppid, kfault::PPID),
        (Builtin::Vtimestamp, kfault::VTIME),
        (Builtin::Arg(0), kfault::ARG0),
    ] {
        // Tried aside first: a builtin the probe cannot read leaves no code behind.
        if ctx.emit_builtin(&mut Asm::new(), b).is_ok() && ctx.emit_builtin(a, b).is_ok() {
            a.store(Size::DW, R7, at as i16, R0);
        } else {
            a.store_imm(Size::DW, R7, at as i16, 0);
        }
    }
    if matches!(ctx.shape.identity, super::spec::Identity::Current) {
        a.call(helper::GET_CURRENT_PID_TGID)
            .store(Size::DW, R7, kfault::PID_TGID as i16, R0);
        a.call(helper::GET_CURRENT_UID_GID)
            .store(Size::DW, R7, kfault::UID_GID as i16, R0);
        a.call(helper::GET_CURRENT_TASK)
            .store(Size::DW, R7, kfault::TASK as i16, R0);
    } else {
        // The thread the probe's record speaks for (`on-cpu`'s incoming one), as the
        // interpreter's ERROR probe sees its faulting firing's; what the probe cannot read of it
        // is 0.
        for (b, at, size) in [
            (Builtin::Tid, kfault::PID_TGID, Size::W),
            (Builtin::Pid, kfault::PID_TGID + 4, Size::W),
            (Builtin::Uid, kfault::UID_GID, Size::W),
            (Builtin::Gid, kfault::UID_GID + 4, Size::W),
            (Builtin::Curthread, kfault::TASK, Size::DW),
        ] {
            if ctx.emit_builtin(&mut Asm::new(), b).is_ok() && ctx.emit_builtin(a, b).is_ok() {
                a.store(size, R7, at as i16, R0);
            } else {
                a.store_imm(size, R7, at as i16, 0);
            }
        }
    }
    // The thread's name, as the probe's record has it (zeros where the probe cannot read it).
    if ctx
        .emit_comm_into(&mut Asm::new(), (R7, kfault::COMM as i16))
        .is_err()
    {
        a.store_imm(Size::DW, R7, kfault::COMM as i16, 0).store_imm(
            Size::DW,
            R7,
            kfault::COMM as i16 + 8,
            0,
        );
    } else {
        let _ = ctx.emit_comm_into(a, (R7, kfault::COMM as i16));
    }
    super::codegen::emit_submit(a, ring);
    a.bind(done);
}

/// Jumps to `done` when a clause called `exit()` in the kernel; uses r1.
fn emit_exited(a: &mut Asm, exit: i32, done: Label) {
    a.ld_map_value(R1, exit, 0);
    a.load(Size::DW, R1, R1, 0);
    a.jmp_imm(op::JNE, R1, 0, done);
}

/// `exit()` with the status in r0: the first call's status is kept, and the flag stops every
/// kernel clause from now on; uses r1, r2.
fn emit_exit(a: &mut Asm, exit: i32) {
    let first = a.label();
    a.ld_map_value(R1, exit, 0);
    a.load(Size::DW, R2, R1, 0);
    a.jmp_imm(op::JNE, R2, 0, first);
    a.store(Size::DW, R1, 8, R0);
    a.store_imm(Size::DW, R1, 0, 1);
    a.bind(first);
}

/// Writes the value of one recording action into the record at [`REC`] (nothing when the ring
/// was full): an integer's low bytes, a string's characters (its NUL and padding are the
/// record's zeros).
fn emit_record_value(
    a: &mut Asm,
    v: &translate::Value,
    action: &super::spec::RecordAction,
    exits: Exits,
    strsize: usize,
) -> crate::error::Result<()> {
    let at = i16::try_from(super::layout::built::SIZE + action.offset as usize)
        .map_err(|_| crate::error::LinuxError::Asm("record too large".into()))?;
    let skip = a.label();
    emit_fragment(a, &v.fragment, action.base, exits);
    a.load(Size::DW, R7, R10, REC);
    a.jmp_imm(op::JEQ, R7, 0, skip);
    let size = action.size as usize;
    if action.memory {
        let pc = last_pc(action)?;
        super::tracemem::emit(a, &v.kind, R7, at, action.size, pc, VAL, exits.faulted)?;
        a.bind(skip);
        return Ok(());
    }
    match &v.kind {
        ValueKind::Int if action.user_symbol => {
            // The process's id, then the address (as the framework's `usym()` record).
            a.store(Size::DW, R7, at + 8, R0);
            a.call(helper::GET_CURRENT_PID_TGID)
                .alu_imm(op::RSH, R0, 32)
                .store(Size::DW, R7, at, R0);
        }
        ValueKind::Int => {
            let s = Size::for_bytes(size).unwrap_or(Size::DW);
            a.store(s, R7, at, R0);
        }
        ValueKind::Str(bytes) => {
            for (i, b) in bytes.iter().take(size.saturating_sub(1)).enumerate() {
                if *b == 0 {
                    break;
                }
                a.store_imm(Size::B, R7, at + i as i16, i32::from(*b));
            }
        }
        ValueKind::Execname => {
            let c = FRAME.execname_at();
            let n = translate::COMM_LEN.min(size.saturating_sub(1));
            for i in 0..n as i16 {
                a.load(Size::B, R1, R10, c + i)
                    .store(Size::B, R7, at + i, R1);
            }
        }
        ValueKind::Scratch => {
            // The string is NUL-terminated within strsize and zero-padded: its bytes up to
            // the record's last (its NUL), word by word where whole words fit.
            let n = (strsize - 1).min(size.saturating_sub(1));
            emit_copy(a, R7, at, R0, n)?;
        }
        ValueKind::Buffer(_) | ValueKind::SizedCopy(_) => {
            return Err(crate::error::LinuxError::Asm(
                "copyin()'s copy recorded as a value".into(),
            ))
        }
    }
    a.bind(skip);
    Ok(())
}

/// Takes the kernel stack of `stack()` action `action` of record `r` at [`REC`] (nothing when the
/// ring was full) into its frames past the framework's record (see `StackTail`), which the
/// helper zero-fills after the last frame (all of them when it fails, as the capture's stack
/// reads then). Uses r0-r5 and r7.
fn emit_record_stack(
    a: &mut Asm,
    r: &super::spec::KernelRecord,
    action: &super::spec::RecordAction,
) -> crate::error::Result<()> {
    use super::layout::built;
    let t = r
        .stack_tails()
        .into_iter()
        .find(|t| t.offset == action.offset)
        .ok_or_else(|| crate::error::LinuxError::Asm("a stack() without its frames".into()))?;
    let at = i32::try_from(built::SIZE + t.tail as usize)
        .map_err(|_| crate::error::LinuxError::Asm("record too large".into()))?;
    let skip = a.label();
    a.load(Size::DW, R7, R10, REC);
    a.jmp_imm(op::JEQ, R7, 0, skip);
    a.mov(R1, R6);
    a.mov(R2, R7).alu_imm(op::ADD, R2, at);
    a.mov_imm(R3, 8 * t.room as i32)
        .mov_imm(R4, 0)
        .call(helper::GET_STACK);
    a.bind(skip);
    Ok(())
}

/// Where a fault of action `action` outside its DIF code is reported: at its expression's last
/// instruction in the clause's code, as the interpreter places such faults.
/// An illegal operation outside DIF, as the interpreter reports one of an action (an id beyond
/// `nspec`, `chill()` past its budget): kind `DTRACEFLT_ILLOP` at instruction `pc` of the
/// clause's code (its expression's last), address 0, into the frame; then to `faulted`. Uses
/// r1.
pub(crate) fn emit_illegal_op(a: &mut Asm, pc: u32, faulted: Label) {
    let word = translate::FaultWord {
        kind: dtrace_dif::vm::FaultKind::IllOp.code(),
        pc,
    };
    a.ld_imm64(R1, word.encode());
    a.store(Size::DW, R10, FRAME.fault_at(), R1);
    a.store_imm(Size::DW, R10, FRAME.fault_addr_at(), 0);
    a.ja(faulted);
}

fn last_pc(action: &super::spec::RecordAction) -> crate::error::Result<u32> {
    let len = action.difo.as_ref().map_or(1, |o| o.text.len().max(1));
    u32::try_from(len - 1)
        .ok()
        .and_then(|n| action.base.checked_add(n))
        .ok_or_else(|| crate::error::LinuxError::Asm("expression too long".into()))
}

/// Copies `n` bytes from `src + 0` to `dst + at` (both registers kept), word by word while whole
/// words fit; uses r1.
pub(crate) fn emit_copy(
    a: &mut Asm,
    dst: Reg,
    at: i16,
    src: Reg,
    n: usize,
) -> crate::error::Result<()> {
    let too_far = || crate::error::LinuxError::Asm("string past the record's end".into());
    let mut i = 0;
    while i < n {
        let step = if n - i >= 8 { Size::DW } else { Size::B };
        let (off, to) = (
            i16::try_from(i).map_err(|_| too_far())?,
            at.checked_add(i16::try_from(i).map_err(|_| too_far())?)
                .ok_or_else(too_far)?,
        );
        a.load(step, R1, src, off).store(step, dst, to, R1);
        i += if step == Size::DW { 8 } else { 1 };
    }
    Ok(())
}

/// Writes a string value of `kind` (r0 its address for [`ValueKind::Scratch`], in a scratch slot
/// of `scratch` bytes) as a key of `n` bytes ([`KeyKind::StringBytes`]) at `key + at`,
/// NUL-terminated and zero-padded (the key's words are zero already); uses r1.
fn emit_string_bytes(
    a: &mut Asm,
    kind: &ValueKind,
    key: Reg,
    at: i16,
    n: usize,
    scratch: usize,
) -> crate::error::Result<()> {
    match kind {
        ValueKind::Scratch if scratch <= n => emit_copy(a, key, at, R0, scratch)?,
        ValueKind::Scratch => emit_copy(a, key, at, R0, n - 1)?,
        ValueKind::Execname => {
            let c = FRAME.execname_at();
            let words = translate::COMM_LEN.min(n) / 8;
            for i in 0..words as i16 {
                a.load(Size::DW, R1, R10, c + 8 * i)
                    .store(Size::DW, key, at + 8 * i, R1);
            }
        }
        ValueKind::Str(bytes) => {
            for (i, b) in bytes.iter().take(n.saturating_sub(1)).enumerate() {
                if *b == 0 {
                    break;
                }
                a.store_imm(Size::B, key, at + i as i16, i32::from(*b));
            }
        }
        ValueKind::Int | ValueKind::Buffer(_) | ValueKind::SizedCopy(_) => {
            return Err(crate::error::LinuxError::Asm(
                "an integer as a string key".into(),
            ))
        }
    }
    Ok(())
}

/// Emits `f`, whose code starts at `base` in the clause's; when a store in it may be dropped,
/// jumps to `exits.dropped` if one was; when it may fault, counts the fault's pc in the clause's
/// code and jumps to `exits.faulted` if it did (r0 is kept).
fn emit_fragment(a: &mut Asm, f: &Fragment, base: CodeBase, exits: Exits) {
    f.emit(a);
    if f.can_drop {
        super::kvars::emit_dropped(a, exits.dropped);
    }
    if f.can_fault {
        let ok = a.label();
        a.load(Size::DW, R1, R10, FRAME.fault_at());
        a.jmp_imm(op::JEQ, R1, 0, ok);
        if base != 0 {
            // The pc is in the word's high half.
            a.ld_imm64(R2, u64::from(base) << 32).alu(op::ADD, R1, R2);
            a.store(Size::DW, R10, FRAME.fault_at(), R1);
        }
        a.ja(exits.faulted);
        a.bind(ok);
    }
}

/// Loads the map of the current generation into r1.
fn emit_map(a: &mut Asm, maps: [i32; 2]) {
    let (second, have) = (a.label(), a.label());
    a.load(Size::DW, R1, R10, GEN);
    a.jmp_imm(op::JEQ, R1, 2, second);
    a.ld_map_fd(R1, maps[0]).ja(have);
    a.bind(second).ld_map_fd(R1, maps[1]);
    a.bind(have);
}

fn emit_lookup(a: &mut Asm, maps: [i32; 2]) {
    emit_map(a, maps);
    a.load(Size::DW, R2, R10, KEYPTR);
    a.call(helper::MAP_LOOKUP_ELEM);
}

fn emit_agg(
    a: &mut Asm,
    shape: &ProbeShape,
    (k, ring): (&KernelAggs, &super::codegen::MapFds),
    agg: &KernelAgg,
    t: &TranslatedAgg,
    exits: Exits,
) -> crate::error::Result<()> {
    let (maps, short_maps) = match agg.store {
        AggStore::Keyed { maps, short } => (maps, short),
        AggStore::Keyless(slots) => {
            if !agg.keys.is_empty() {
                return Err(crate::error::LinuxError::Asm(
                    "an aggregation with keys in a keyless array".into(),
                ));
            }
            return emit_keyless_agg(a, agg, t, slots, exits);
        }
    };
    let kinds: Vec<KeyKind> = agg.keys.iter().map(|(_, kind)| *kind).collect();
    let (ksize, offs) = kernel_key_layout(&kinds);
    if ksize > MAX_KAGG_KEY {
        return Err(crate::error::LinuxError::Asm(format!(
            "aggregation key of {ksize} bytes"
        )));
    }
    let skip = a.label();
    emit_key_scratch(a, shape, k.keys, skip);
    let scratch = translate::string_scratch_width(k.strsize as usize);
    let short = short_keys(&kinds).zip(short_maps);
    // Where the probe notes that the last part, a stack, is too deep for the short maps.
    let deep_flag = match (&short, deep_stack_flag_at(&kinds)) {
        (Some(_), Some(at)) => Some(
            i16::try_from(at)
                .map_err(|_| crate::error::LinuxError::Asm("aggregation key too large".into()))?,
        ),
        _ => None,
    };
    let last_part = kinds.len().checked_sub(1);
    // A last string in the scratch that is short is kept in the short maps, whose keys are the
    // built key's first bytes: only its first bytes are copied then (the rest of the built key
    // is left as it was: nothing reads it), unless a deferred update sends the whole key.
    let short_copy = match (&short, t.keys.last(), offs.last()) {
        (Some(_), Some(Some(v)), Some(&last))
            if v.kind == ValueKind::Scratch
                && scratch > SHORT_STRING_KEY as usize
                && !kinds.iter().any(|k| matches!(k, KeyKind::UserStack(_))) =>
        {
            Some(last)
        }
        _ => None,
    };
    // Zero what no key part writes whole (stacks are zero-filled by bpf_get_stack(); a string
    // from the scratch is copied zero-padded over the scratch's width).
    let mut zeroed = vec![true; ksize / 8];
    for ((kind, off), v) in kinds.iter().zip(&offs).zip(&t.keys) {
        let scratch_string = v.as_ref().is_some_and(|v| v.kind == ValueKind::Scratch);
        match kind {
            _ if !kind.has_value() => {
                zeroed[off / 8 + 1..(off + kind.kernel_size()) / 8].fill(false)
            }
            KeyKind::StringBytes(n) if scratch_string && scratch <= *n as usize => {
                zeroed[off / 8..(off + scratch) / 8].fill(false)
            }
            _ => {}
        }
    }
    let late_zeroed = match short_copy {
        Some(last) => zeroed.split_off(last / 8),
        None => Vec::new(),
    };
    for (i, z) in zeroed.iter().enumerate() {
        if *z {
            a.store_imm(Size::DW, R0, (i * 8) as i16, 0);
        }
    }
    for (i, ((v, kind), off)) in t
        .keys
        .iter()
        .zip(&kinds)
        .zip(offs.iter().copied())
        .enumerate()
    {
        let at = i16::try_from(off)
            .map_err(|_| crate::error::LinuxError::Asm("aggregation key too large".into()))?;
        if let Some(v) = v {
            let base = agg.bases.keys.get(i).copied().unwrap_or(0);
            emit_fragment(a, &v.fragment, base, exits);
        }
        a.load(Size::DW, R2, R10, KEYPTR);
        // The last part, a stack, notes whether it is too deep for the short maps.
        let deep = deep_flag.filter(|_| last_part == Some(i));
        match (v.as_ref().map(|v| &v.kind), kind) {
            (Some(ValueKind::Int), KeyKind::Int(n)) => {
                let size = Size::for_bytes(usize::from(*n)).unwrap_or(Size::DW);
                a.store(size, R2, at, R0);
            }
            (Some(ValueKind::Int), KeyKind::UserAddr) => {
                a.store(Size::DW, R2, at + 8, R0);
                emit_key_pid(a, at);
            }
            (Some(kind), KeyKind::StringBytes(n)) if short_copy == Some(off) => {
                // The string's first bytes; the whole of it (and the zeros the whole key needs)
                // only when it is not short.
                let (whole, built) = (a.label(), a.label());
                let short_len = SHORT_STRING_KEY as usize;
                a.load(Size::B, R1, R0, (short_len - 1) as i16);
                a.jmp_imm(op::JNE, R1, 0, whole);
                emit_copy(a, R2, at, R0, short_len)?;
                a.ja(built);
                a.bind(whole);
                for (j, z) in late_zeroed.iter().enumerate() {
                    if *z {
                        a.store_imm(Size::DW, R2, at + 8 * j as i16, 0);
                    }
                }
                emit_string_bytes(a, kind, R2, at, *n as usize, scratch)?;
                a.bind(built);
            }
            (Some(kind), KeyKind::StringBytes(n)) => {
                emit_string_bytes(a, kind, R2, at, *n as usize, scratch)?;
            }
            (Some(ValueKind::Execname), _) => {
                let c = FRAME.execname_at();
                a.load(Size::DW, R1, R10, c).store(Size::DW, R2, at, R1);
                a.load(Size::DW, R1, R10, c + 8)
                    .store(Size::DW, R2, at + 8, R1);
            }
            (Some(ValueKind::Str(s)), _) => {
                a.ld_imm64(R1, string_key_hash(s))
                    .store(Size::DW, R2, at, R1);
                a.store_imm(Size::B, R2, at + 15, i32::from(STRING_CONST_MARK));
            }
            (None, KeyKind::KernelStack(n)) => {
                // A sampled stack starts at the interrupted PC: the frames wanted, then zeros.
                let sampled = shape.ctx == super::codegen::CtxKind::PerfEvent;
                let room = kind.kernel_size() / 8 - 1;
                let take = if sampled { *n as usize } else { room };
                a.store_imm(Size::DW, R2, at, i32::from(sampled));
                for i in take..room {
                    a.store_imm(Size::DW, R2, at + 8 + 8 * i as i16, 0);
                }
                emit_key_stack(a, at + 8, take as u32, 0, deep)?;
            }
            (None, KeyKind::UserStack(n)) => {
                emit_key_pid(a, at);
                let fp_walk = |a: &mut Asm| emit_key_stack(a, at + 8, *n, BPF_F_USER_STACK, deep);
                match &k.uwalk {
                    Some(w) => super::ustack_keys::emit_key_frames(
                        a,
                        shape,
                        w,
                        (KEYPTR, at + 8),
                        (*n, deep),
                        fp_walk,
                    )?,
                    None => fp_walk(a)?,
                }
            }
            _ => {
                return Err(crate::error::LinuxError::Asm(
                    "a key value of the wrong kind".into(),
                ))
            }
        }
    }
    emit_value_and_weight(a, agg, t, exits);
    if let (Some(w), true, true) = (
        &k.uwalk,
        k.lasting_vars,
        kinds
            .iter()
            .any(|kind| matches!(kind, KeyKind::UserStack(_))),
    ) {
        // A walk the probe could not place: the update goes to dtrace, which walks the stack.
        let placed = a.label();
        super::ustack_keys::emit_unplaced_check(a, shape, w, placed)?;
        emit_deferred_update(a, shape, (k, ring), w, (maps[0], ksize), skip)?;
        a.bind(placed);
    }
    let found = a.label();
    if let Some((short, maps)) = short {
        // The last part is a string or a stack: a string whose NUL is within the short maps'
        // bytes of it is kept there (its bytes past the NUL are zero), where its key is the
        // first bytes of the one built; a stack, when the probe took no more frames than they
        // hold (the flag it noted is clear).
        let (last, whole) = (offs.last().copied(), a.label());
        let short_len = short.last().map(|k| k.kernel_size());
        let (Some(last), Some(short_len)) = (last, short_len) else {
            return Err(crate::error::LinuxError::Asm(
                "a short key without parts".into(),
            ));
        };
        let (at, size) = match deep_flag {
            Some(flag) => (flag, Size::DW),
            None => (
                i16::try_from(last + short_len - 1).map_err(|_| {
                    crate::error::LinuxError::Asm("aggregation key too large".into())
                })?,
                Size::B,
            ),
        };
        a.load(Size::DW, R2, R10, KEYPTR);
        a.load(size, R1, R2, at);
        a.jmp_imm(op::JNE, R1, 0, whole);
        let short_size = kernel_key_layout(&short).0;
        emit_find(a, (k, ring), (maps, short_size), found, skip)?;
        a.bind(whole);
    }
    emit_find(a, (k, ring), (maps, ksize), found, skip)?;
    a.bind(found).mov(R7, R0);
    emit_apply(a, agg, skip)?;
    a.bind(skip);
    Ok(())
}

/// Sends the update of the aggregation whose first map is `agg` (its key of `ksize` bytes built
/// at [`KEYPTR`], its value and weight in [`VAL`] and [`INCR`]) to dtrace in a
/// `KIND_AGG_UPDATE` record with the user stack the probe took, then jumps to `done`; a full ring
/// is an aggregation drop. The probe's context in r6. Uses r0-r5, r7.
fn emit_deferred_update(
    a: &mut Asm,
    shape: &ProbeShape,
    (k, ring): (&KernelAggs, &super::codegen::MapFds),
    w: &super::ustack_keys::UserWalk,
    (agg, ksize): (i32, usize),
    done: Label,
) -> crate::error::Result<()> {
    use super::layout::kupdate;
    let missing = a.label();
    let key_at = emit_update_fields(
        a,
        (k, ring),
        (agg, ksize),
        (kupdate::TO_WALK, super::ustack_keys::TAKEN_BYTES),
        done,
    )?;
    super::ustack_keys::emit_copy_taken(a, shape, w, (R7, kupdate::STACK), missing)?;
    emit_update_key(a, ring, key_at, ksize, done)?;
    a.bind(missing);
    a.mov(R1, R7).mov_imm(R2, 0).call(helper::RINGBUF_DISCARD);
    a.ja(done);
    Ok(())
}

/// Sends the update of the aggregation whose map of the key's tier is `map` (its whole key of
/// `ksize` bytes built at [`KEYPTR`], its value and weight in [`VAL`] and [`INCR`]), which the
/// map could not take, to dtrace in a `KIND_AGG_UPDATE` record of the form
/// [`super::layout::kupdate::WHOLE`], then jumps to `done`; a full ring is an aggregation drop.
/// Uses r0-r5, r7.
fn emit_whole_update(
    a: &mut Asm,
    (k, ring): (&KernelAggs, &super::codegen::MapFds),
    (map, ksize): (i32, usize),
    done: Label,
) -> crate::error::Result<()> {
    use super::layout::kupdate;
    let key_at = emit_update_fields(a, (k, ring), (map, ksize), (kupdate::WHOLE, 0), done)?;
    emit_update_key(a, ring, key_at, ksize, done)
}

/// Reserves a `KIND_AGG_UPDATE` record of form `form` for the update of the aggregation whose
/// map is `agg` (its key of `ksize` bytes, `taken` bytes of user stack before it) in r7 and
/// writes its fields; returns where its key goes. When the ring is full, counts an aggregation
/// drop and jumps to `done`. Uses r0-r5, r7.
fn emit_update_fields(
    a: &mut Asm,
    (k, ring): (&KernelAggs, &super::codegen::MapFds),
    (agg, ksize): (i32, usize),
    (form, taken): (u16, usize),
    done: Label,
) -> crate::error::Result<usize> {
    use super::layout::{kupdate, KIND_AGG_UPDATE};
    let key_at = kupdate::STACK + taken;
    let size = i32::try_from((key_at + ksize).next_multiple_of(8))
        .map_err(|_| crate::error::LinuxError::Asm("update record too large".into()))?;
    let have = a.label();
    a.ld_map_fd(R1, ring.ring)
        .mov_imm(R2, size)
        .mov_imm(R3, 0)
        .call(helper::RINGBUF_RESERVE);
    a.jmp_imm(op::JNE, R0, 0, have);
    emit_count_drop(a, k.drops, INCR, done);
    a.bind(have).mov(R7, R0);
    a.store_imm(
        Size::H,
        R7,
        kupdate::KIND as i16,
        i32::from(KIND_AGG_UPDATE),
    );
    a.store_imm(Size::H, R7, kupdate::FORM as i16, i32::from(form));
    a.store_imm(Size::W, R7, kupdate::TAG as i16, 0);
    a.call(helper::GET_SMP_PROCESSOR_ID)
        .store(Size::W, R7, kupdate::CPU as i16, R0);
    a.call(helper::GET_CURRENT_PID_TGID)
        .alu_imm(op::RSH, R0, 32)
        .store(Size::W, R7, kupdate::PID as i16, R0);
    a.store_imm(Size::W, R7, kupdate::AGG as i16, agg);
    a.store_imm(Size::W, R7, kupdate::PAD as i16, 0);
    a.load(Size::DW, R1, R10, VAL)
        .store(Size::DW, R7, kupdate::VAL as i16, R1);
    a.load(Size::DW, R1, R10, INCR)
        .store(Size::DW, R7, kupdate::INCR as i16, R1);
    a.call(helper::KTIME_GET_NS)
        .store(Size::DW, R7, kupdate::KTIME as i16, R0);
    a.mov(R1, R7)
        .alu_imm(op::ADD, R1, kupdate::COMM as i32)
        .mov_imm(R2, 16)
        .call(helper::GET_CURRENT_COMM);
    Ok(key_at)
}

/// Copies the key of `ksize` bytes at [`KEYPTR`] to `key_at` of the update record in r7, zeroes
/// the padding past it, submits the record and jumps to `done`. Uses r0-r5.
fn emit_update_key(
    a: &mut Asm,
    ring: &super::codegen::MapFds,
    key_at: usize,
    ksize: usize,
    done: Label,
) -> crate::error::Result<()> {
    let imm = |v: usize| {
        i32::try_from(v)
            .map_err(|_| crate::error::LinuxError::Asm("update record too large".into()))
    };
    a.mov(R1, R7).alu_imm(op::ADD, R1, imm(key_at)?);
    a.mov_imm(R2, imm(ksize)?);
    a.load(Size::DW, R3, R10, KEYPTR)
        .call(helper::PROBE_READ_KERNEL);
    for at in key_at + ksize..(key_at + ksize).next_multiple_of(8) {
        a.store_imm(Size::B, R7, imm(at)? as i16, 0);
    }
    super::codegen::emit_submit(a, ring);
    a.ja(done);
    Ok(())
}

/// Computes the aggregating action's value into [`VAL`] (0 for `count()`) and its weight into
/// [`INCR`] (1 when it has none).
fn emit_value_and_weight(a: &mut Asm, agg: &KernelAgg, t: &TranslatedAgg, exits: Exits) {
    let parts = [
        (&t.value, agg.bases.value, VAL, 0),
        (&t.incr, agg.bases.incr, INCR, 1),
    ];
    for (f, base, slot, absent) in parts {
        match f {
            Some(f) => {
                emit_fragment(a, f, base, exits);
                a.store(Size::DW, R10, slot, R0);
            }
            None => {
                a.store_imm(Size::DW, R10, slot, absent);
            }
        }
    }
}

/// An aggregation without keys ([`AggStore::Keyless`]): its value and weight, then this CPU's
/// value in the per-CPU array `slots` at the current generation's index (the generation less
/// one, built in the 4 bytes at [`KEYPTR`]: no key is built), then the function. The lookup
/// cannot miss (the generation is 1 or 2, the array has both); its null test is the verifier's.
fn emit_keyless_agg(
    a: &mut Asm,
    agg: &KernelAgg,
    t: &TranslatedAgg,
    slots: i32,
    exits: Exits,
) -> crate::error::Result<()> {
    let skip = a.label();
    emit_value_and_weight(a, agg, t, exits);
    a.load(Size::DW, R2, R10, GEN).alu_imm(op::SUB, R2, 1);
    a.store(Size::W, R10, KEYPTR, R2);
    a.ld_map_fd(R1, slots).frame_addr(R2, i32::from(KEYPTR));
    a.call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, skip);
    a.mov(R7, R0);
    emit_apply(a, agg, skip)?;
    a.bind(skip);
    Ok(())
}

/// Points r0 at the CPU's value of the key at [`KEYPTR`] (of `ksize` bytes) in the current
/// generation's map of `maps` (created zero when missing) and jumps to `found`; when the map is
/// full, counts an aggregation drop and jumps to `skip`, as DTrace drops an update its full
/// aggregation buffer cannot take. When the map is not full but the entry could not be made
/// (the kernel allocates it at the probe, and may find no memory at once), the update goes to
/// dtrace ([`emit_whole_update`]), which aggregates it. Uses r0-r5, r7.
fn emit_find(
    a: &mut Asm,
    (k, ring): (&KernelAggs, &super::codegen::MapFds),
    (maps, ksize): ([i32; 2], usize),
    found: Label,
    skip: Label,
) -> crate::error::Result<()> {
    /// `E2BIG`, which an update of a full hash map returns.
    const E2BIG: i32 = 7;
    let full = a.label();
    emit_lookup(a, maps);
    a.jmp_imm(op::JNE, R0, 0, found);
    emit_map(a, maps);
    a.load(Size::DW, R2, R10, KEYPTR);
    a.ld_map_value(R3, k.zeros, 0);
    a.mov_imm(R4, update_flag::NOEXIST)
        .call(helper::MAP_UPDATE_ELEM);
    a.mov(R7, R0);
    // Found after all when another CPU made the entry first (the update's -EEXIST).
    emit_lookup(a, maps);
    a.jmp_imm(op::JNE, R0, 0, found);
    a.jmp_imm(op::JEQ, R7, -E2BIG, full);
    emit_whole_update(a, (k, ring), (maps[0], ksize), skip)?;
    a.bind(full);
    emit_count_drop(a, k.drops, INCR, skip);
    Ok(())
}

/// Points r0 and [`KEYPTR`] at this program's key scratch value (see `KernelAggs::keys`);
/// jumps to `skip` if the map has none (it always has).
fn emit_key_scratch(a: &mut Asm, shape: &ProbeShape, keys: i32, skip: Label) {
    emit_key_scratch_lookup(a, shape, keys, KEYPTR, skip);
    a.store(Size::DW, R10, KEYPTR, R0);
}

/// The slot of the key scratch (`KernelAggs::keys`) a program of `shape`'s kind uses: 1 for
/// programs of perf events (which may interrupt another program on the CPU), 0 for the others.
fn key_scratch_slot(shape: &ProbeShape) -> i32 {
    i32::from(shape.ctx == super::codegen::CtxKind::PerfEvent)
}

/// Points r0 at this program's value of the per-CPU key scratch map `keys` (its slot from
/// [`key_scratch_slot`], the lookup key in the 4 bytes at stack offset `at`); jumps to `missing`
/// when the map has none (it always has). Uses r0-r5.
pub(crate) fn emit_key_scratch_lookup(
    a: &mut Asm,
    shape: &ProbeShape,
    keys: i32,
    at: i16,
    missing: Label,
) {
    a.store_imm(Size::W, R10, at, key_scratch_slot(shape));
    a.ld_map_fd(R1, keys).frame_addr(R2, i32::from(at));
    a.call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, missing);
}

/// Writes the process id of the thread that fired the probe at `at` in the key; uses r0-r2.
fn emit_key_pid(a: &mut Asm, at: i16) {
    a.call(helper::GET_CURRENT_PID_TGID);
    a.alu_imm(op::RSH, R0, 32);
    a.load(Size::DW, R2, R10, KEYPTR);
    a.store(Size::DW, R2, at, R0);
}

/// Writes `frames` program counters of the current stack (`flags`: kernel or user) at `at` in
/// the key, zero-filled past the last (and all zero when the walk fails, as a stack the record
/// path could not take), and with `deep` notes there whether it took more frames than the short
/// maps hold ([`emit_deep_flag`]); uses r0-r5.
fn emit_key_stack(
    a: &mut Asm,
    at: i16,
    frames: u32,
    flags: i32,
    deep: Option<i16>,
) -> crate::error::Result<()> {
    let bytes = i32::try_from(frames as usize * 8)
        .map_err(|_| crate::error::LinuxError::Asm("stack too deep".into()))?;
    a.mov(R1, R6);
    a.load(Size::DW, R2, R10, KEYPTR)
        .alu_imm(op::ADD, R2, i32::from(at));
    a.mov_imm(R3, bytes)
        .mov_imm(R4, flags)
        .call(helper::GET_STACK);
    if let Some(flag) = deep {
        emit_deep_flag(a, (KEYPTR, flag), R0, 8 * SHORT_STACK_WORDS as i32);
    }
    Ok(())
}

/// Notes at `flag` in the key scratch (whose address is at the stack slot `keyptr`) whether the
/// stack just taken is too deep for an aggregation's short maps: 1 when `taken` (the bytes
/// `bpf_get_stack()` returned, negative on failure, or the frames a walk took) is above `limit`,
/// else 0 (see [`deep_stack_flag_at`]). Uses r2.
pub(crate) fn emit_deep_flag(a: &mut Asm, (keyptr, flag): (i16, i16), taken: Reg, limit: i32) {
    let shallow = a.label();
    a.load(Size::DW, R2, R10, keyptr);
    a.store_imm(Size::DW, R2, flag, 0);
    a.jmp_imm(op::JSLE, taken, limit, shallow);
    a.store_imm(Size::DW, R2, flag, 1);
    a.bind(shallow);
}

/// Adds one to this CPU's count in the per-CPU array `drops` (of one u64; its index is built at
/// the stack slot `slot`), then jumps to `done`. Uses r0-r5.
pub(crate) fn emit_count_drop(a: &mut Asm, drops: i32, slot: i16, done: Label) {
    a.store_imm(Size::DW, R10, slot, 0);
    a.ld_map_fd(R1, drops).frame_addr(R2, i32::from(slot));
    a.call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, done);
    a.mov_imm(R1, 1).atomic_add64(R0, 0, R1);
    a.ja(done);
}

/// Applies the function to the CPU's value at r7 (the value in `VAL`, the weight in `INCR`).
fn emit_apply(a: &mut Asm, agg: &KernelAgg, skip: Label) -> crate::error::Result<()> {
    use ActionKind as K;
    let flag = i16::try_from(agg.value_words * 8)
        .map_err(|_| crate::error::LinuxError::Asm("aggregation value too large".into()))?;
    let inited = a.label();
    a.load(Size::DW, R1, R7, flag);
    a.jmp_imm(op::JNE, R1, 0, inited);
    let first = match agg.kind {
        K::AggMin => Some(i64::MAX as u64),
        K::AggMax => Some(i64::MIN as u64),
        K::AggLquantize | K::AggLlquantize => Some(agg.arg),
        _ => None,
    };
    if let Some(v) = first {
        a.ld_imm64(R1, v).store(Size::DW, R7, 0, R1);
    }
    a.store_imm(Size::DW, R7, flag, 1);
    a.bind(inited);
    a.load(Size::DW, R2, R10, VAL);
    match agg.kind {
        K::AggCount => {
            a.mov_imm(R1, 1).atomic_add64(R7, 0, R1);
        }
        K::AggSum => {
            a.atomic_add64(R7, 0, R2);
        }
        K::AggAvg | K::AggStddev => {
            a.mov_imm(R1, 1).atomic_add64(R7, 0, R1);
            a.atomic_add64(R7, 8, R2);
            if agg.kind == K::AggStddev {
                emit_square_add(a);
            }
        }
        K::AggMin | K::AggMax => {
            a.load(Size::DW, R1, R7, 0);
            let jop = if agg.kind == K::AggMin {
                op::JSGE
            } else {
                op::JSLE
            };
            a.jmp_reg(jop, R2, R1, skip);
            a.store(Size::DW, R7, 0, R2);
        }
        K::AggQuantize => {
            emit_quantize_bucket(a);
            a.jmp_imm(op::JGT, R1, 126, skip);
            emit_bucket_add(a, 0);
        }
        K::AggLquantize => {
            let base = agg.arg as u32 as i32;
            let levels = i32::from((agg.arg >> 32) as u16);
            let step = i32::from((agg.arg >> 48) as u16).max(1);
            let have = a.label();
            // The whole 64-bit value, signed, as the framework takes it; above the base, the
            // difference is taken unsigned (one too large for 64 signed bits is past the top).
            a.mov_imm(R1, 0);
            a.jmp_imm(op::JSLT, R2, base, have);
            a.alu_imm(op::SUB, R2, base).alu_imm(op::DIV, R2, step);
            a.mov_imm(R1, levels + 1);
            a.jmp_imm(op::JGE, R2, levels, have);
            a.mov(R1, R2).alu_imm(op::ADD, R1, 1);
            a.bind(have);
            a.jmp_imm(op::JGT, R1, levels + 1, skip);
            // Word 0 holds the parameters.
            emit_bucket_add(a, 8);
        }
        K::AggLlquantize => {
            let top = emit_llquantize_bucket(a, agg.arg)?;
            a.jmp_imm(op::JGT, R1, top, skip);
            emit_bucket_add(a, 8);
        }
        other => {
            return Err(crate::error::LinuxError::Asm(format!(
                "{other:?} is not computed in the kernel"
            )))
        }
    }
    Ok(())
}

/// Adds the weight to the bucket whose index is in r1 (bounded), `base` bytes into the value.
fn emit_bucket_add(a: &mut Asm, base: i16) {
    a.alu_imm(op::LSH, R1, 3);
    a.mov(R3, R7).alu(op::ADD, R3, R1);
    a.load(Size::DW, R2, R10, INCR);
    a.atomic_add64(R3, base, R2);
}

/// r1 = floor(log2(x)) of the non-zero `x` (kept); uses r3, r4, r5 (`x` may be r5). Without
/// branches: each halving of the width takes its shift from whether the high half is non-zero,
/// `(t | -t) >> 63`, so the verifier walks the code after it once, not once per result (a
/// branch per halving gave it 64 states to walk, and made the load of a `quantize()` clause
/// ten times slower).
fn emit_log2(a: &mut Asm, x: Reg) {
    a.mov_imm(R1, 0).mov(R3, x);
    for (sh, log) in [(32, 5), (16, 4), (8, 3), (4, 2), (2, 1), (1, 0)] {
        // r4 = (r3 >> sh != 0) << log: the shift that keeps the high half.
        a.mov(R4, R3).alu_imm(op::RSH, R4, sh);
        a.mov(R5, R4).alu_imm(op::NEG, R5, 0);
        a.alu(op::OR, R4, R5).alu_imm(op::RSH, R4, 63);
        a.alu_imm(op::LSH, R4, log);
        a.alu(op::RSH, R3, R4).alu(op::ADD, R1, R4);
    }
}

/// r1 = the `quantize()` bucket of the value in r2 (see `dtrace_framework::aggregate::
/// quantize_bucket`); uses r3, r4, r5.
fn emit_quantize_bucket(a: &mut Asm) {
    let (neg, zero, done) = (a.label(), a.label(), a.label());
    a.jmp_imm(op::JEQ, R2, 0, zero);
    a.jmp_imm(op::JSLT, R2, 0, neg);
    emit_log2(a, R2);
    a.alu_imm(op::ADD, R1, 64).ja(done);
    a.bind(neg);
    a.mov(R5, R2).alu_imm(op::NEG, R5, 0);
    emit_log2(a, R5);
    // 62 - log, at least 0 (the magnitude of INT64_MIN has log 63).
    a.mov_imm(R5, 62).alu(op::SUB, R5, R1);
    a.mov(R1, R5);
    a.jmp_imm(op::JSGE, R1, 0, done);
    a.mov_imm(R1, 0).ja(done);
    a.bind(zero).mov_imm(R1, 63);
    a.bind(done);
}

/// r1 = the `llquantize()` bucket of the value in r2 (see `dtrace_framework::aggregate::
/// llquantize_bucket`, whose layout is symmetric about the zero bucket): the magnitude of the
/// value finds its bucket counted from zero, unrolled over the orders of magnitude (at most 64:
/// each multiplies by a factor of at least 2), and its sign picks the side. Uses r3 and r5.
/// Returns the highest bucket.
fn emit_llquantize_bucket(a: &mut Asm, arg: u64) -> crate::error::Result<i32> {
    let (factor, low, high, nsteps) = (
        (arg >> 48) as u16,
        (arg >> 32) as u16,
        (arg >> 16) as u16,
        arg as u16,
    );
    let bad = |what: &str| crate::error::LinuxError::Asm(format!("llquantize(): {what}"));
    let (zero_limit, mags) =
        llquantize_magnitudes(factor, low, high, nsteps).ok_or_else(|| bad("no bucket layout"))?;
    let npos = llquantize_positive_buckets(factor, low, high, nsteps)
        .ok_or_else(|| bad("too many buckets"))?;
    let npos = i32::try_from(npos).map_err(|_| bad("too many buckets"))?;
    let zero = npos + 1;
    let top = 2 * npos + 2;
    let (have_k, positive, done) = (a.label(), a.label(), a.label());
    // r3 = |value|, unsigned (INT64_MIN's magnitude is 2^63).
    let nonneg = a.label();
    a.mov(R3, R2);
    a.jmp_imm(op::JSGE, R3, 0, nonneg);
    a.alu_imm(op::NEG, R3, 0);
    a.bind(nonneg);
    a.mov_imm(R1, zero);
    a.ld_imm64(R5, zero_limit);
    a.jmp_reg(op::JLT, R3, R5, done);
    for m in &mags {
        let next = a.label();
        a.ld_imm64(R5, m.next);
        a.jmp_reg(op::JGE, R3, R5, next);
        // k = base + |value| / step - first / step
        a.mov(R1, R3);
        a.ld_imm64(R5, m.step);
        a.alu(op::DIV, R1, R5);
        a.ld_imm64(R5, m.base.wrapping_sub(m.first / m.step));
        a.alu(op::ADD, R1, R5);
        a.ja(have_k);
        a.bind(next);
    }
    // Past the last magnitude: the overflow bucket on either side.
    a.mov_imm(R1, npos);
    a.bind(have_k);
    a.jmp_imm(op::JSGT, R2, 0, positive);
    a.mov_imm(R5, zero - 1).alu(op::SUB, R5, R1);
    a.mov(R1, R5).ja(done);
    a.bind(positive);
    a.alu_imm(op::ADD, R1, zero + 1);
    a.bind(done);
    Ok(top)
}

/// Adds the 128-bit square of the value in r2 to words 2 (low) and 3 (high) at r7; uses r0-r5.
fn emit_square_add(a: &mut Asm) {
    // m = |v|; m * m = hi * 2^64 + (2ab) * 2^32 + b^2 with a, b the halves of m.
    let (pos, nc1, nc2) = (a.label(), a.label(), a.label());
    a.mov(R3, R2);
    a.jmp_imm(op::JSGE, R3, 0, pos);
    a.alu_imm(op::NEG, R3, 0);
    a.bind(pos);
    a.mov(R4, R3).alu_imm(op::RSH, R4, 32); // a
    a.mov(R5, R3)
        .alu_imm(op::LSH, R5, 32)
        .alu_imm(op::RSH, R5, 32); // b
    a.mov(R0, R4).alu(op::MUL, R0, R5); // ab
    a.mov(R1, R5).alu(op::MUL, R1, R5); // low = b^2
    a.alu(op::MUL, R4, R4); // high = a^2
    a.mov(R3, R0).alu_imm(op::LSH, R3, 33); // (2ab) << 32, low word
    a.alu_imm(op::RSH, R0, 31); // its high word
    a.alu(op::ADD, R4, R0);
    a.alu(op::ADD, R1, R3);
    a.jmp_reg(op::JGE, R1, R3, nc1);
    a.alu_imm(op::ADD, R4, 1);
    a.bind(nc1);
    a.load(Size::DW, R3, R7, 16);
    a.alu(op::ADD, R1, R3);
    a.jmp_reg(op::JGE, R1, R3, nc2);
    a.alu_imm(op::ADD, R4, 1);
    a.bind(nc2);
    a.store(Size::DW, R7, 16, R1);
    a.load(Size::DW, R3, R7, 24);
    a.alu(op::ADD, R4, R3);
    a.store(Size::DW, R7, 24, R4);
}

// The slots fit the eBPF stack, 8-aligned.
const _: () = assert!(DVAR_DROPPED >= -512 && GEN % 8 == 0 && KEYPTR % 8 == 0);

#[cfg(test)]
mod tests {
    use super::*;
    use dtrace_framework::aggregate::llquantize_bucket;

    /// The bucket the emitted code computes, step by step as it computes it.
    fn bucket(arg: u64, v: i64) -> i64 {
        let (f, lo, hi, n) = (
            (arg >> 48) as u16,
            (arg >> 32) as u16,
            (arg >> 16) as u16,
            arg as u16,
        );
        let (zero_limit, mags) = llquantize_magnitudes(f, lo, hi, n).unwrap();
        let npos = llquantize_positive_buckets(f, lo, hi, n).unwrap();
        let zero = npos + 1;
        let a = v.unsigned_abs();
        if a < zero_limit {
            return zero as i64;
        }
        let k = mags
            .iter()
            .find(|m| a < m.next)
            .map(|m| (a / m.step).wrapping_add(m.base.wrapping_sub(m.first / m.step)))
            .unwrap_or(npos);
        if v > 0 {
            (zero + 1 + k) as i64
        } else {
            (zero - 1 - k) as i64
        }
    }

    /// The single instruction `f` emits.
    fn one(f: impl FnOnce(&mut Asm)) -> crate::bpf::Insn {
        let mut a = Asm::new();
        f(&mut a);
        a.finish().unwrap()[0]
    }

    /// The capture program of probe tag 9 with `clause` as its kernel clause, `others` its other
    /// clauses' record path.
    fn program(
        clause: super::super::spec::KernelAggClause,
        others: Option<(Option<super::super::spec::KernelFilter>, Option<u32>)>,
    ) -> (Vec<crate::bpf::Insn>, AggReport) {
        program_with(clause, others, None, None, None)
    }

    /// [`program`] at a probe placed for every process, with `known` its map of known
    /// processes and `missed` its map of missed announcements.
    fn program_known(
        clause: super::super::spec::KernelAggClause,
        others: Option<(Option<super::super::spec::KernelFilter>, Option<u32>)>,
        known: Option<i32>,
        missed: Option<i32>,
    ) -> (Vec<crate::bpf::Insn>, AggReport) {
        program_with(clause, others, known, missed, None)
    }

    /// [`program_known`], with `specs` the speculations kept in the kernel.
    fn program_with(
        clause: super::super::spec::KernelAggClause,
        others: Option<(Option<super::super::spec::KernelFilter>, Option<u32>)>,
        known: Option<i32>,
        missed: Option<i32>,
        specs: Option<super::super::spec::KernelSpecs>,
    ) -> (Vec<crate::bpf::Insn>, AggReport) {
        let ids = (translate::ProbeId::Planned, None);
        program_full(clause, others, known, missed, specs, ids)
    }

    /// [`program_with`], at a probe of id `ids.0` whose clauses' EPIDs are in map `ids.1`.
    fn program_full(
        clause: super::super::spec::KernelAggClause,
        others: Option<(Option<super::super::spec::KernelFilter>, Option<u32>)>,
        known: Option<i32>,
        missed: Option<i32>,
        specs: Option<super::super::spec::KernelSpecs>,
        ids: (translate::ProbeId, Option<i32>),
    ) -> (Vec<crate::bpf::Insn>, AggReport) {
        program_edited(clause, (others, known, missed, specs, ids), |_| {})
    }

    /// [`program_full`], its aggregations' spec edited by `edit` first.
    #[allow(clippy::type_complexity)]
    fn program_edited(
        clause: super::super::spec::KernelAggClause,
        (others, known, missed, specs, ids): (
            Option<(Option<super::super::spec::KernelFilter>, Option<u32>)>,
            Option<i32>,
            Option<i32>,
            Option<super::super::spec::KernelSpecs>,
            (translate::ProbeId, Option<i32>),
        ),
        edit: impl FnOnce(&mut KernelAggs),
    ) -> (Vec<crate::bpf::Insn>, AggReport) {
        use crate::capture::codegen::{gen_capture_reporting, CtxKind, MapFds};
        use crate::capture::spec::{ArgSource, CaptureSpec, Identity};
        let shape = ProbeShape {
            ctx: CtxKind::RawTracepoint,
            args: vec![ArgSource::RawArg(0)],
            conditions: Vec::new(),
            identity: Identity::Current,
            task: None,
        };
        let maps = MapFds {
            ring: 3,
            drops: 4,
            room: 9,
            pending: None,
            pending_armed: None,
            wakeup: None,
            wake_at_once: false,
            mirror: None,
            vclock: None,
        };
        let mut spec = CaptureSpec {
            aggs: Some(KernelAggs {
                clauses: vec![clause],
                control: 5,
                zeros: 6,
                drops: 7,
                keys: 10,
                exit: 8,
                chill: 11,
                strsize: 257,
                scratchsize: None,
                names: translate::ProbeNames {
                    id: ids.0,
                    ..Default::default()
                },
                opaque_args: Default::default(),
                others,
                bypass: None,
                epids: ids.1,
                stacks: None,
                vars: None,
                lasting_vars: false,
                specs,
                known,
                missed,
                uwalk: None,
                replay: None,
            }),
            ..CaptureSpec::new()
        };
        if let Some(k) = spec.aggs.as_mut() {
            edit(k);
        }
        let layout = crate::capture::RecordLayout::for_spec(&spec, "p").unwrap();
        let (insns, report) = gen_capture_reporting(&shape, &spec, &layout, 9, &maps).unwrap();
        (insns, report.aggs)
    }

    /// Asserts that every instruction of `insns` can be reached from the first (the verifier
    /// refuses dead code).
    fn assert_reachable(insns: &[crate::bpf::Insn]) {
        if let Err(e) = crate::bpf::insn::check_flow(insns) {
            panic!("{e}");
        }
    }

    #[test]
    fn clauses_copying_strings_read_them_first_and_may_hand_the_firing_over() {
        use super::super::spec::KernelAggClause;
        let p = dtrace_compiler::compile(
            r#"syscall::openat:entry /copyinstr(arg0) == "/etc/passwd"/ { @ = count(); }"#,
            &dtrace_compiler::CompileOptions::default(),
        )
        .unwrap();
        let clause = |string_args| KernelAggClause {
            predicate: p.ecbs[0].predicate.clone(),
            aggs: Vec::new(),
            stores: Vec::new(),
            record: None,
            after_dtrace: false,
            string_args,
            keeps_vars: false,
            firing_vars: false,
            copy_scratch: None,
        };
        // Read at the start: a string that cannot be read sets the hand-over flag, and the
        // record path (none otherwise here) then records the firing with the flag.
        let (insns, report) = program(clause(Ok(vec![0])), None);
        assert_eq!(report, vec![Ok(())]);
        assert_reachable(&insns);
        let flag = one(|a| {
            a.store_imm(Size::DW, R10, HANDOVER, 1);
        });
        assert!(insns.contains(&flag));
        let handed = one(|a| {
            a.store_imm(
                Size::H,
                R7,
                super::super::layout::hdr::FLAGS as i16,
                i32::from(super::super::layout::FLAG_HANDED_OVER),
            );
        });
        assert!(insns.contains(&handed));
        // The argument's value is kept when its string is read, and the clause's code takes
        // it there (one read of the argument a firing).
        let keep = one(|a| {
            a.store(Size::DW, R10, pre_read_slot(PRE_READ_ARGS, 0), R0);
        });
        let take = one(|a| {
            a.load(Size::DW, R0, R10, pre_read_slot(PRE_READ_ARGS, 0));
        });
        assert!(insns.contains(&keep) && insns.contains(&take));
        let reads_ctx = insns
            .iter()
            .filter(|i| i.code == op::LDX | op::MEM | op::DW && i.src == 6)
            .count();
        // The checks' read, and the record of a firing handed over (its arguments); none in
        // the clause's code.
        assert_eq!(reads_ctx, 2, "{insns:?}");
        // A string whose address is not known before the clause runs keeps it in dtrace.
        let (insns, report) = program(
            clause(Err("copyinstr() of a computed address".into())),
            None,
        );
        assert!(
            matches!(&report[0], Err(Untranslatable::Placement(w)) if w.contains("computed")),
            "{report:?}"
        );
        assert!(!insns.contains(&flag));
        let (_, report) = program(clause(Ok(Vec::new())), None);
        assert!(report[0].is_err(), "{report:?}");
    }

    /// The kernel clause of D clause `src`, its actions' code as stores (their values unused),
    /// copying argument 1's string; `keeps_vars`: it keeps variables that outlive the firing.
    fn copying_arg1(src: &str, keeps_vars: bool) -> super::super::spec::KernelAggClause {
        let p = dtrace_compiler::compile(src, &dtrace_compiler::CompileOptions::default()).unwrap();
        super::super::spec::KernelAggClause {
            predicate: p.ecbs[0].predicate.clone(),
            aggs: Vec::new(),
            stores: p.ecbs[0]
                .actions
                .iter()
                .filter_map(|a| a.difo.clone())
                .map(|o| (0, 0, o))
                .collect(),
            record: None,
            after_dtrace: false,
            string_args: Ok(vec![1]),
            keeps_vars,
            firing_vars: false,
            copy_scratch: None,
        }
    }

    #[test]
    fn a_firing_is_kept_for_the_return_only_where_the_return_reads_what_the_entry_would() {
        use super::super::spec::KernelAggClause;
        let clause = |src: &str| copying_arg1(src, true);
        let aggs = |c: KernelAggClause, lasting_vars: bool| KernelAggs {
            clauses: vec![c],
            control: 5,
            zeros: 6,
            drops: 7,
            keys: 10,
            exit: 8,
            chill: 11,
            strsize: 257,
            scratchsize: None,
            names: Default::default(),
            opaque_args: Default::default(),
            others: None,
            bypass: None,
            epids: None,
            stacks: None,
            vars: None,
            lasting_vars,
            specs: None,
            known: None,
            missed: None,
            uwalk: None,
            replay: None,
        };
        let idiom = "syscall::openat:entry { self->p = copyinstr(arg1); self->t = timestamp; }";
        assert!(replayable(&aggs(clause(idiom), true)));
        // Without lasting variables a firing is handed over to dtrace instead.
        assert!(!replayable(&aggs(clause(idiom), false)));
        // Nor where no string of an argument is copied.
        let mut c = clause(idiom);
        c.string_args = Ok(Vec::new());
        assert!(!replayable(&aggs(c, true)));
        // What differs at the return: the thread's virtual time, the kernel stack, errno.
        for read in ["vtimestamp", "caller", "stackdepth", "errno", "uregs[0]"] {
            let src =
                format!("syscall::openat:entry {{ self->p = copyinstr(arg1); self->v = {read}; }}");
            assert!(!replayable(&aggs(clause(&src), true)), "{read}");
        }
    }

    #[test]
    fn strings_are_read_after_a_predicate_that_needs_none_of_them() {
        let clause = |src: &str| copying_arg1(src, false);
        let first = |insns: &[crate::bpf::Insn], helper: i32| {
            insns
                .iter()
                .position(|i| i.code == op::JMP | op::CALL && i.imm == helper)
                .unwrap()
        };
        // `pid` (bpf_get_current_pid_tgid) is tested before the string is read: a firing the
        // predicate rejects reads none.
        let (insns, report) = program(
            clause("syscall::openat:entry /pid == 1234/ { trace(strlen(copyinstr(arg1))); }"),
            None,
        );
        assert_eq!(report, vec![Ok(())]);
        assert_reachable(&insns);
        assert!(
            first(&insns, helper::GET_CURRENT_PID_TGID)
                < first(&insns, helper::PROBE_READ_USER_STR)
        );
        // A predicate reading the arguments runs after the strings are read (it could read
        // their copies).
        let (insns, _) = program(
            clause("syscall::openat:entry /arg2 == 0/ { trace(strlen(copyinstr(arg1))); }"),
            None,
        );
        assert!(!checks_after_first_predicate(&[]));
        let reads = first(&insns, helper::PROBE_READ_USER_STR);
        assert!(insns[..reads]
            .iter()
            .all(|i| i.code != op::JMP | op::CALL || i.imm != helper::GET_CURRENT_PID_TGID));
        assert!(!checks_after_first_predicate(&[clause(
            "syscall::openat:entry /arg2 == 0/ {}"
        )]));
        assert!(checks_after_first_predicate(&[clause(
            "syscall::openat:entry /pid == 1234/ {}"
        )]));
    }

    #[test]
    fn a_clause_reads_its_epid_from_the_map_by_its_number_at_the_probe() {
        use super::super::spec::KernelAggClause;
        use translate::ProbeId;
        let p = dtrace_compiler::compile(
            "syscall::read:entry /epid != id/ { @[epid, id] = count(); }",
            &dtrace_compiler::CompileOptions::default(),
        )
        .unwrap();
        let clause = KernelAggClause {
            predicate: p.ecbs[0].predicate.clone(),
            aggs: Vec::new(),
            stores: Vec::new(),
            record: None,
            after_dtrace: false,
            string_args: Ok(Vec::new()),
            keeps_vars: false,
            firing_vars: false,
            copy_scratch: None,
        };
        let with = |ids| program_full(clause.clone(), None, None, None, None, ids);
        // The key: the probe's id (5) in the high word, the clause's number (0) in the low; the
        // map 11; the id a constant.
        let (insns, report) = with((ProbeId::Is(5), Some(11)));
        assert_eq!(report, vec![Ok(())]);
        assert_reachable(&insns);
        let pair = |f: &dyn Fn(&mut Asm)| {
            let mut a = Asm::new();
            f(&mut a);
            a.finish().unwrap()
        };
        let key = pair(&|a| {
            a.ld_imm64(R1, super::super::filter::epid_key(5, 0));
        });
        let map = pair(&|a| {
            a.ld_map_fd(R1, 11);
        });
        let id = pair(&|a| {
            a.ld_imm64(R1, 5);
        });
        for (what, want) in [("the EPID's key", key), ("the map", map), ("the id", id)] {
            assert!(insns.windows(2).any(|w| w == want.as_slice()), "{what}");
        }
        // No map, no EPID at the probe (the id is still read there).
        let (_, report) = with((ProbeId::Is(5), None));
        assert!(
            matches!(&report[0], Err(Untranslatable::Variable { name, .. }) if name == "epid"),
            "{report:?}"
        );
        // A probe whose program serves every process's probe has no one id nor EPID.
        let (_, report) = with((ProbeId::Shared, None));
        assert!(
            matches!(&report[0], Err(Untranslatable::Variable { why, .. })
                if why.contains("every process")),
            "{report:?}"
        );
    }

    #[test]
    fn at_a_probe_of_every_process_the_first_firing_of_a_process_is_recorded() {
        use super::super::spec::KernelAggClause;
        let p = dtrace_compiler::compile(
            "myapp*:::work-done /arg0 > 2/ { @[pid] = count(); }",
            &dtrace_compiler::CompileOptions::default(),
        )
        .unwrap();
        let clause = KernelAggClause {
            predicate: p.ecbs[0].predicate.clone(),
            aggs: Vec::new(),
            stores: Vec::new(),
            record: None,
            after_dtrace: false,
            string_args: Ok(Vec::new()),
            keeps_vars: false,
            firing_vars: false,
            copy_scratch: None,
        };
        let announce = one(|a| {
            a.store_imm(Size::DW, R10, HANDOVER, ANNOUNCE);
        });
        let update = one(|a| {
            a.call(helper::MAP_UPDATE_ELEM);
        });
        let (tag, high) = (
            one(|a| {
                a.mov_imm(R1, 9);
            }),
            one(|a| {
                a.alu_imm(op::LSH, R1, 32);
            }),
        );
        // A process not known yet is noted and its firing recorded (unflagged), the clause
        // running here all the same.
        let (insns, report) = program_known(clause.clone(), None, Some(11), None);
        assert_eq!(report, vec![Ok(())]);
        assert_reachable(&insns);
        assert!(insns.contains(&announce) && insns.contains(&update));
        // The key: the tag (9) in the high word, the process in the low.
        assert!(insns.windows(2).any(|w| w == [tag, high]));
        // Only a firing handed over whole is flagged so.
        let flagged = one(|a| {
            let l = a.label();
            a.jmp_imm(op::JNE, R1, HANDED_OVER, l);
            a.bind(l);
        });
        assert!(insns
            .iter()
            .any(|i| i.code == flagged.code && i.dst == flagged.dst && i.imm == flagged.imm));
        // With a map of missed announcements, a first firing the ring has no room for is
        // noted there (with or without other clauses recording at the probe).
        let missed = one(|a| {
            a.ld_map_fd(R1, 12);
        });
        assert!(!insns.contains(&missed));
        for others in [None, Some((None, None))] {
            let (insns, _) = program_known(clause.clone(), others, Some(11), Some(12));
            assert_reachable(&insns);
            assert!(insns.contains(&missed));
        }
        // At a per-process probe, nothing of that.
        let (insns, _) = program_known(clause, None, None, None);
        assert!(!insns.contains(&announce) && !insns.contains(&update));
    }

    #[test]
    fn a_keyless_aggregation_takes_its_array_slot_without_a_key_or_an_insert() {
        use super::super::spec::{AggBases, KernelAggClause};
        use dtrace_dif::asm::assemble;
        let value = assemble("setx 7, %r1\nret %r1\n").unwrap();
        let clause = |keys: Vec<(Option<DifObject>, KeyKind)>, store| KernelAggClause {
            predicate: None,
            aggs: vec![KernelAgg {
                kind: ActionKind::AggQuantize,
                arg: 0,
                keys,
                value: Some(value.clone()),
                incr: None,
                value_words: 127,
                store,
                bases: AggBases::default(),
            }],
            stores: Vec::new(),
            record: None,
            after_dtrace: false,
            string_args: Ok(Vec::new()),
            keeps_vars: false,
            firing_vars: false,
            copy_scratch: None,
        };
        let uses = |insns: &[crate::bpf::Insn], f: &dyn Fn(&mut Asm)| {
            let want = one(|a| f(a));
            insns.iter().filter(|i| **i == want).count()
        };
        let map = |fd: i32| {
            move |a: &mut Asm| {
                a.ld_map_fd(R1, fd);
            }
        };
        let zeros = |a: &mut Asm| {
            a.ld_map_value(R3, 6, 0);
        };
        let update = |a: &mut Asm| {
            a.call(helper::MAP_UPDATE_ELEM);
        };
        let (keyless, report) = program(clause(Vec::new(), AggStore::Keyless(11)), None);
        assert_eq!(report, vec![Ok(())]);
        assert_reachable(&keyless);
        // One lookup in the array; no key scratch (fd 10), no insert from the zeros (fd 6).
        assert_eq!(uses(&keyless, &map(11)), 1);
        assert_eq!(uses(&keyless, &map(10)), 0);
        assert_eq!(uses(&keyless, &zeros), 0);
        assert_eq!(uses(&keyless, &update), 0);
        // With a key: the key built in the scratch, the hash maps, an insert when missing.
        let keyed = clause(
            vec![(Some(value.clone()), KeyKind::Int(8))],
            AggStore::Keyed {
                maps: [12, 13],
                short: None,
            },
        );
        let (keyed, report) = program(keyed, None);
        assert_eq!(report, vec![Ok(())]);
        assert_reachable(&keyed);
        assert_eq!(uses(&keyed, &map(10)), 1);
        assert!(uses(&keyed, &map(12)) > 0 && uses(&keyed, &map(13)) > 0);
        assert_eq!(uses(&keyed, &zeros), 1);
        assert_eq!(uses(&keyed, &update), 1);
        assert!(keyless.len() < keyed.len());
    }

    #[test]
    fn fault_paths_leave_no_dead_code() {
        use super::super::spec::{KernelAggClause, KernelRecord, RecordAction};
        use dtrace_dif::asm::assemble;
        let faulting = assemble("setx 7, %r1\nsetx 0, %r2\nsdiv %r1, %r2, %r3\nret %r3\n").unwrap();
        let fine = assemble("setx 7, %r1\nret %r1\n").unwrap();
        let record = |difo| KernelRecord {
            size: 24,
            recs: Vec::new(),
            ustack_walk: 0,
            actions: vec![RecordAction {
                difo: Some(difo),
                offset: 16,
                size: 8,
                base: 4,
                ..Default::default()
            }],
        };
        // A predicate that faults before the record is reserved, a value that faults after, both.
        for (predicate, value) in [
            (Some(faulting.clone()), fine.clone()),
            (None, faulting.clone()),
            (Some(faulting.clone()), faulting.clone()),
            (Some(fine.clone()), fine.clone()),
        ] {
            let clause = KernelAggClause {
                predicate: predicate.clone(),
                aggs: Vec::new(),
                stores: Vec::new(),
                record: Some(record(value.clone())),
                after_dtrace: false,
                string_args: Ok(Vec::new()),
                keeps_vars: false,
                firing_vars: false,
                copy_scratch: None,
            };
            let (insns, report) = program(clause, None);
            assert_eq!(report, vec![Ok(())]);
            assert_reachable(&insns);
            let faults = predicate.iter().chain([&value]).any(|o| o == &faulting);
            let fault_records = insns
                .iter()
                .filter(|i| {
                    **i == one(|a| {
                        a.store_imm(Size::H, R7, 0, i32::from(super::super::layout::KIND_FAULT));
                    })
                })
                .count();
            assert_eq!(fault_records, usize::from(faults));
        }
    }

    #[test]
    fn a_record_is_built_with_its_headers_and_values() {
        use super::super::spec::{KernelAggClause, KernelRecord, RecordAction};
        use dtrace_dif::asm::assemble;
        let int = assemble("setx 7, %r1\nret %r1\n").unwrap();
        let text = assemble(".rtype string 257\nsets \"hey\", %r1\nret %r1\n").unwrap();
        let record = KernelRecord {
            size: 281,
            recs: Vec::new(),
            ustack_walk: 0,
            actions: vec![
                RecordAction {
                    difo: Some(int),
                    offset: 16,
                    size: 8,
                    ..Default::default()
                },
                RecordAction {
                    step: 1,
                    difo: Some(text),
                    offset: 24,
                    size: 257,
                    ..Default::default()
                },
            ],
        };
        let clause = KernelAggClause {
            predicate: None,
            aggs: Vec::new(),
            stores: Vec::new(),
            record: Some(record),
            after_dtrace: false,
            string_args: Ok(Vec::new()),
            keeps_vars: false,
            firing_vars: false,
            copy_scratch: None,
        };
        let (insns, report) = program(clause.clone(), None);
        assert_eq!(report, vec![Ok(())]);
        let has = |i: crate::bpf::Insn| insns.contains(&i);
        // The ring's record: its header, then the framework's record padded to 8 bytes.
        assert!(has(one(|a| {
            a.mov_imm(R2, 24 + 288);
        })));
        assert!(has(one(|a| {
            a.store_imm(Size::H, R7, 0, i32::from(super::super::layout::KIND_BUILT));
        })));
        assert!(has(one(|a| {
            a.store_imm(Size::W, R7, 4, 9);
        })));
        // The integer's 8 bytes, the constant's characters (its NUL is the zeroed record's).
        assert!(has(one(|a| {
            a.store(Size::DW, R7, 24 + 16, R0);
        })));
        for (i, b) in b"hey".iter().enumerate() {
            assert!(has(one(|a| {
                a.store_imm(Size::B, R7, 24 + 24 + i as i16, i32::from(*b));
            })));
        }
        assert!(!has(one(|a| {
            a.store_imm(Size::B, R7, 24 + 27, 0);
        })));
        let submits = insns
            .iter()
            .filter(|i| i.code == 0x85 && i.imm == helper::RINGBUF_SUBMIT)
            .count();
        assert_eq!(submits, 1);
        // Another clause at the probe runs in dtrace: the record is built there too.
        let (_, report) = program(clause.clone(), Some((None, None)));
        assert!(matches!(&report[..], [Err(Untranslatable::Placement(_))]));
        // A value that can fault is built here too: at a fault the record is discarded and a
        // fault record goes to dtrace, its pc counted from the action's start in the clause.
        let mut faulting = clause;
        if let Some(r) = faulting.record.as_mut() {
            r.actions[0].difo =
                Some(assemble("setx 7, %r1\nsetx 0, %r2\nsdiv %r1, %r2, %r3\nret %r3\n").unwrap());
            r.actions[0].base = 3;
        }
        let (insns, report) = program(faulting, None);
        assert_eq!(report, vec![Ok(())]);
        let calls = |h: i32| {
            insns
                .iter()
                .filter(|i| i.code == 0x85 && i.imm == h)
                .count()
        };
        assert_eq!(calls(helper::RINGBUF_DISCARD), 1);
        // The clause's record and the fault's.
        assert_eq!(calls(helper::RINGBUF_SUBMIT), 2);
        assert!(insns.contains(&one(|a| {
            a.store_imm(Size::H, R7, 0, i32::from(super::super::layout::KIND_FAULT));
        })));
        let mut wide = Asm::new();
        wide.ld_imm64(R2, 3 << 32);
        let wide = wide.finish().unwrap();
        assert!(
            insns.windows(2).any(|w| w == &wide[..]),
            "the base is added"
        );
    }

    #[test]
    fn a_ustack_record_takes_the_user_stack_past_the_record() {
        use super::super::spec::{KernelAggClause, KernelRecord, RecordAction};
        use super::super::ustack::{TailForm, UstackTail};
        // ustack(3) at 16 (the pid, three frames), jstack(1, 8) at 48: 72 bytes; the kernel
        // walks 5 frames (the probe's capture's).
        let action = |step, offset, size, frames| RecordAction {
            step,
            offset,
            size,
            ustack: Some(frames),
            ..Default::default()
        };
        let record = KernelRecord {
            size: 72,
            recs: Vec::new(),
            ustack_walk: 5,
            actions: vec![action(0, 16, 32, 3), action(1, 48, 24, 1)],
        };
        let clause = KernelAggClause {
            predicate: None,
            aggs: Vec::new(),
            stores: Vec::new(),
            record: Some(record),
            after_dtrace: false,
            string_args: Ok(Vec::new()),
            keeps_vars: false,
            firing_vars: false,
            copy_scratch: None,
        };
        let (insns, report) = program(clause.clone(), None);
        assert_eq!(report, vec![Ok(())]);
        assert_reachable(&insns);
        let has = |i: crate::bpf::Insn| insns.contains(&i);
        let calls = |h: i32| {
            insns
                .iter()
                .filter(|i| i.code == 0x85 && i.imm == h)
                .count()
        };
        // One tail for both actions, past the framework's record.
        assert!(has(one(|a| {
            a.mov_imm(R2, (24 + 72 + UstackTail::BYTES) as i32);
        })));
        // The kernel's walk of the user stack, 5 frames deep, its result at the tail's start.
        let mut walk = Asm::new();
        walk.mov_imm(R3, 8 * 5)
            .mov_imm(R4, BPF_F_USER_STACK)
            .call(helper::GET_STACK)
            .store(Size::DW, R7, 24 + 72 + 24, R0);
        let walk = walk.finish().unwrap();
        assert!(insns.windows(walk.len()).any(|w| w == &walk[..]));
        assert_eq!(calls(helper::GET_STACK), 1);
        assert_eq!(calls(helper::GET_CURRENT_COMM), 1);
        // The stack bytes above sp: up to the top of the main thread's frames where the kernel's
        // BTF says where that is, else to the end of the last page present (one try a page end
        // within reach of the 8,192 bytes: three of 4 KB pages).
        let bounded = usize::from(crate::btf::StackTopOffsets::of_running_kernel().is_some());
        let pages = (8192 + crate::mapping::page_size() - 1).div_ceil(crate::mapping::page_size());
        assert_eq!(calls(helper::PROBE_READ_USER), pages + bounded);
        // The framework's record is zeroed, the tail (written whole where it is taken) is not.
        assert!(has(one(|a| {
            a.store_imm(Size::DW, R7, 24 + 64, 0);
        })));
        assert!(!has(one(|a| {
            a.store_imm(Size::DW, R7, 24 + 72, 0);
        })));
        // Its form: copied, as the capture path takes a user stack (no walk at this probe).
        assert!(has(one(|a| {
            a.store_imm(Size::DW, R7, 24 + 72, TailForm::Copied as i32);
        })));
        // Where the probe walks the user stack, the tail takes that walk's frames: a smaller
        // reservation, the one walk, no second copy of the stack; unless D variables live in
        // the kernel there (a firing the walk cannot place cannot go to dtrace whole).
        for lasting in [false, true] {
            let (insns, report) = program_edited(
                clause.clone(),
                (None, None, None, None, (translate::ProbeId::Planned, None)),
                |k| {
                    k.uwalk = Some(super::super::ustack_keys::UserWalk {
                        rows: 12,
                        ranges: 13,
                        scratch: 14,
                        fp_frames: 5,
                        files: None,
                        frames: super::super::uunwind::FrameLoop::Bounded,
                    });
                    k.lasting_vars = lasting;
                },
            );
            assert_eq!(report, vec![Ok(())]);
            assert_reachable(&insns);
            let has = |i: crate::bpf::Insn| insns.contains(&i);
            let (form, bytes) = match lasting {
                false => (TailForm::Walked, UstackTail::WALKED_BYTES),
                true => (TailForm::Copied, UstackTail::BYTES),
            };
            assert!(has(one(|a| {
                a.mov_imm(R2, (24 + 72 + bytes) as i32);
            })));
            assert!(has(one(|a| {
                a.store_imm(Size::DW, R7, 24 + 72, form as i32);
            })));
            let walks = insns
                .iter()
                .filter(|i| i.code == 0x85 && i.imm == helper::GET_STACK)
                .count();
            // (The probe's walk's, or the tail's where the probe does not walk.)
            assert_eq!(walks, 1, "lasting {lasting}");
        }
    }

    #[test]
    fn speculation_actions_tag_settle_and_fault_at_the_probe() {
        use super::super::spec::{
            KernelAggClause, KernelRecord, KernelSpecs, RecordAction, SpecOp,
        };
        use dtrace_dif::asm::assemble;
        let id = assemble("setx 3, %r1\nret %r1\n").unwrap();
        let action = |step, op, offset, size| RecordAction {
            step,
            difo: Some(id.clone()),
            offset,
            size,
            spec: op,
            ..Default::default()
        };
        let clause = |actions: Vec<RecordAction>, size| KernelAggClause {
            predicate: None,
            aggs: Vec::new(),
            stores: Vec::new(),
            record: Some(KernelRecord {
                size,
                recs: Vec::new(),
                ustack_walk: 0,
                actions,
            }),
            after_dtrace: false,
            string_args: Ok(Vec::new()),
            keeps_vars: true,
            firing_vars: false,
            copy_scratch: None,
        };
        let specs = KernelSpecs {
            states: 13,
            fails: 14,
            nspec: 4,
            specsize: 64,
        };
        let speculating = clause(
            vec![
                action(0, Some(SpecOp::Speculate), 0, 0),
                action(1, None, 16, 8),
            ],
            24,
        );
        let committing = clause(vec![action(0, Some(SpecOp::Commit), 0, 0)], 0);
        for c in [&speculating, &committing] {
            // Without speculations in the kernel, the clause stays in dtrace.
            let (_, report) = program_with(c.clone(), None, None, None, None);
            assert!(report[0].is_err(), "{report:?}");
            let (insns, report) = program_with(c.clone(), None, None, None, Some(specs));
            assert_eq!(report, vec![Ok(())]);
            assert_reachable(&insns);
            let has = |i: crate::bpf::Insn| insns.contains(&i);
            let tags = has(one(|a| {
                a.store(Size::W, R7, super::super::layout::built::SPEC as i16, R1);
            }));
            let settles = has(one(|a| {
                a.store_imm(Size::H, R7, 0, i32::from(super::super::layout::KIND_SPEC));
            }));
            let faults = has(one(|a| {
                a.store_imm(Size::H, R7, 0, i32::from(super::super::layout::KIND_FAULT));
            }));
            let commit = std::ptr::eq(c, &committing);
            assert_eq!((tags, settles, faults), (!commit, commit, commit));
        }
        // A record larger than specsize never speculates: a speculative drop is counted and the
        // clause ends, its record never tagged.
        let counts_drop = |insns: &[crate::bpf::Insn]| {
            insns.contains(&one(|a| {
                a.load(
                    Size::DW,
                    R1,
                    R0,
                    super::super::speculation::SPEC_DROPS_AT as i16,
                );
            }))
        };
        let small = KernelSpecs {
            specsize: 16,
            ..specs
        };
        let (insns, report) = program_with(speculating.clone(), None, None, None, Some(small));
        assert_eq!(report, vec![Ok(())]);
        assert_reachable(&insns);
        assert!(counts_drop(&insns));
        let (insns, _) = program_with(speculating.clone(), None, None, None, Some(specs));
        assert!(!counts_drop(&insns));
    }

    #[test]
    fn llquantize_orders_bucket_as_the_framework() {
        for (f, lo, hi, n) in [
            (10, 0, 6, 20),
            (2, 0, 62, 2),
            (10, 3, 4, 10),
            (4, 1, 30, 16),
            (10, 1, 3, 3),
            (3, 0, 39, 7),
            (10, 2, 2, 100),
        ] {
            let arg = dtrace_dif::program::llquantize_arg(f, lo, hi, n);
            let mut values: Vec<i64> = vec![i64::MIN, -1, 0, 1, i64::MAX, i64::MAX - 1];
            let mut p: i64 = 1;
            while let Some(q) = p.checked_mul(i64::from(f)) {
                values.extend([p - 1, p, p + 1, p + p / 2, q - 1]);
                values.extend([1 - p, -p, -p - 1, -p - p / 2, 1 - q]);
                p = q;
            }
            for v in values {
                let want = llquantize_bucket(f, lo, hi, n, v) as i64;
                assert_eq!(
                    bucket(arg, v),
                    want,
                    "llquantize({f}, {lo}, {hi}, {n}) of {v}"
                );
            }
        }
    }
}
