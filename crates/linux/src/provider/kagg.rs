//! Aggregations computed in the kernel, the consumer's side (the probe's side is
//! `capture::kagg`): which clauses qualify ([`plan_clause`]), the maps each aggregating action
//! updates, the switch that turns them on after BEGIN and off before END, and the snapshot that
//! drains them into the framework's records (`AggRecord`), keys expanded to the framework's
//! layout, so the consumer merges and prints them exactly as the ones the interpreter computes.
//!
//! Clauses that store thread-locals living in the kernel (`provider::kvars`) run here whole too,
//! their store actions planned with their aggregations ([`ClausePlan`]), and so do clauses that
//! record data the probe's code can compute: their record is laid out here as the framework lays
//! it out ([`plan_clause`]), built at the probe (`capture::kagg`) and committed by dtrace.
//!
//! A snapshot switches the generation the programs update, waits until no program can still be
//! updating the old one (an update of an array of maps returns after an RCU grace period, and
//! every capture program runs inside one), then reads every CPU's values of the old generation and
//! empties it (deletes a hash map's keys; zeroes a keyless aggregation's array value, flag words
//! included): each snapshot carries what accumulated since the previous one, as the framework's
//! do, so `clear()`, `trunc()` and the other consumer actions keep their meaning, and a CPU's
//! value whose flag word is zero (it did not fire since) is no record.

use crate::bpf::{Map, MapKind};
use crate::capture::spec::{
    kernel_key_layout, string_key_hash, AggBases, AggStore, CodeBase, KernelAgg, KernelRecord,
    KeyKind, RecordAction, KEYLESS_SLOTS, MAX_KAGG_KEY, MAX_KAGG_VALUE, STRING_CONST_MARK,
};
use crate::error::Result;
use dtrace_dif::object::DifObject;
use dtrace_dif::program::{ActionKind, EcbDesc, RecDesc};
use dtrace_framework::records::AggRecord;
use std::collections::HashMap;

/// Environment variable that, set to `0`, keeps every aggregation in dtrace's interpreter (read
/// by `dtrace_open`'s tracer, which turns kernel aggregations on otherwise).
pub const KERNEL_AGGREGATIONS_ENV: &str = "DTRACE_KERNEL_AGGREGATIONS";

/// Drops per CPU: `(cpu, count)`.
pub type CpuDrops = Vec<(u32, u64)>;

/// What the kernel aggregated since the previous snapshot, as the framework's records, and what
/// is left to do with the symbol tables before they are: cut the tracing machinery's frames off
/// the kernel stacks ([`Snapshot::cut_tracing_frames`]), note the processes of user keys.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The records (one per key and CPU that updated it).
    pub records: Vec<AggRecord>,
    /// Kernel stacks taken at a probe that is not sampled, which start with the frames of the
    /// tracing machinery, as at delivery: `(record, offset in its key, frames it holds, the
    /// program counters taken)`.
    pub cuts: Vec<(usize, usize, usize, Vec<u64>)>,
    /// The processes of the user stacks and addresses in the keys.
    pub pids: Vec<u32>,
}

impl Snapshot {
    /// Cuts each stack of [`Snapshot::cuts`] as delivery cuts a captured one: the frames
    /// `prefix` counts go, the rest move up, zeros follow.
    pub fn cut_tracing_frames(&mut self, prefix: impl Fn(&[u64]) -> usize) {
        for (r, off, frames, pcs) in &self.cuts {
            let Some(bytes) = self
                .records
                .get_mut(*r)
                .and_then(|rec| rec.key.get_mut(*off..off + frames * 8))
            else {
                continue;
            };
            let n = pcs.iter().position(|pc| *pc == 0).unwrap_or(pcs.len());
            let skip = prefix(&pcs[..n]).min(n);
            let pcs = &pcs[..n];
            for (i, chunk) in bytes.chunks_exact_mut(8).enumerate() {
                let pc = pcs.get(i + skip).copied().unwrap_or(0);
                chunk.copy_from_slice(&pc.to_ne_bytes());
            }
        }
    }
}

/// Entries a kernel aggregation map holds at most.
const MAX_MAP_ENTRIES: u64 = 1 << 20;

/// One aggregating action of a clause planned for the kernel (its maps not yet made).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedAgg {
    /// The function.
    pub kind: ActionKind,
    /// Its parameters.
    pub arg: u64,
    /// Keys: each one's expression (none for a stack) and kind.
    pub keys: Vec<(Option<DifObject>, KeyKind)>,
    /// Value expression (none for count()).
    pub value: Option<DifObject>,
    /// Weight expression.
    pub incr: Option<DifObject>,
    /// Value words in the framework's layout.
    pub value_words: usize,
    /// Where each expression's code starts in the clause's.
    pub bases: AggBases,
}

impl PlannedAgg {
    /// The aggregation as the probe's code updates it, its values kept in `store`.
    pub fn with_store(&self, store: AggStore) -> KernelAgg {
        KernelAgg {
            kind: self.kind,
            arg: self.arg,
            keys: self.keys.clone(),
            value: self.value.clone(),
            incr: self.incr.clone(),
            value_words: self.value_words,
            store,
            bases: self.bases.clone(),
        }
    }
}

/// A clause as the kernel would run it: its aggregating actions, the actions that record data
/// (built into the ECB's record at the probe) and its store actions, in the clause's order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClausePlan {
    /// The aggregating actions.
    pub aggs: Vec<PlannedAgg>,
    /// The actions that store variables and record nothing (they run in the kernel only when the
    /// variables they store live there, see `provider::kvars`), each with the number of
    /// aggregating and recording actions before it.
    pub stores: Vec<(usize, CodeBase, DifObject)>,
    /// The record the clause builds, when it records data (`trace()`, `printf()`...).
    pub record: Option<KernelRecord>,
    /// A store action calls `copyout()` or `copyoutstr()`: the clause writes into the traced
    /// process's memory, which only means something at the probe, so it runs there or nowhere.
    pub writes_user: bool,
    /// The bytes a `copyin()` sized at the probe may take (the program's `scratchsize`), when it
    /// is the clause's only allocation of the interpreter's alloca area (`None`: such a copy is
    /// made in dtrace).
    pub copy_scratch: Option<u64>,
}

impl ClausePlan {
    /// Whether the clause writes a record.
    pub fn records(&self) -> bool {
        self.record.is_some()
    }

    /// Whether the clause calls `exit()`.
    pub fn exits(&self) -> bool {
        self.record.iter().flat_map(|r| &r.actions).any(|a| a.exit)
    }
}

/// Whether data-recording action `a` can be built at the probe: `trace()`, the arguments of
/// `printf()`-like actions (`system()` and `freopen()` among them: dtrace acts on their records;
/// the value itself then decides, at translation), `tracemem()` (the
/// memory at an address), `stack()`, `ustack()` and `jstack()` (their frames taken past the
/// record, completed by dtrace when it commits it), `exit()`, signals, speculation actions,
/// symbols (`sym()`, `usym()`...: an address, after the process's id for a user one),
/// `chill()` (it records nothing; it spins at the probe, see `capture::chill`) and the
/// consumer's actions, `print()` among them (its pointer, then the object it points to, see
/// [`records_object`]).
fn records_at_probe(a: &dtrace_dif::program::ActionDesc) -> bool {
    match a.kind {
        ActionKind::DifExpr
        | ActionKind::Printf
        | ActionKind::System
        | ActionKind::Freopen
        | ActionKind::Exit
        | ActionKind::Raise
        | ActionKind::Stop
        | ActionKind::Tracemem
        | ActionKind::TracememDynsize
        | ActionKind::Printa
        | ActionKind::Stack
        | ActionKind::Sym
        | ActionKind::Mod
        | ActionKind::Usym
        | ActionKind::Umod
        | ActionKind::Uaddr
        | ActionKind::Ustack
        | ActionKind::Jstack
        | ActionKind::Speculate
        | ActionKind::Commit
        | ActionKind::Discard
        | ActionKind::Chill => true,
        // The consumer's actions (`clear()`, `trunc()`, `normalize()`, `setopt()`...) record
        // values (an aggregation's id, a factor, an option's name) as `trace()` does; `print()`
        // records its pointer, then the object it points to (by reference).
        ActionKind::LibAct => true,
        _ => false,
    }
}

/// Whether recording action `a` records the object its value points to: a value held by
/// reference that is not a string (`trace(*p)` of a struct, a union or an array,
/// `trace(curthread->comm)`, `print()`'s object), whose record holds the `rtype.size` bytes at
/// that address, as the framework copies them (`Machine::read_result_into`), built at the probe
/// as `tracemem()`'s record is (see `capture::tracemem`). An object in user memory (a type
/// marked `DIF_TF_BYUREF`) is not: the framework reads it as user memory.
fn records_object(a: &dtrace_dif::program::ActionDesc) -> bool {
    use dtrace_dif::object::DIF_TF_BYUREF;
    a.kind != ActionKind::Tracemem
        && a.difo.as_ref().is_some_and(|o| {
            let t = &o.rtype;
            t.is_by_ref() && !t.is_string() && t.flags & DIF_TF_BYUREF == 0
        })
}

/// The probe arguments whose user strings clause `n`'s `copyinstr()` calls read, with those of
/// `user_strings` (bit n: argument n, whose string the probe copies: `proc:::exec`'s path) it
/// reads, or why they are not all known (see `KernelAggClause::string_args`).
pub fn string_args(
    n: &super::needs::ClauseNeeds,
    user_strings: u16,
) -> std::result::Result<Vec<u8>, String> {
    use crate::capture::spec::{AddrExpr, MemKind};
    if n.any_string_arg {
        return Err("copyinstr() of an address other than a probe argument".into());
    }
    let mut args: Vec<u8> = (0..16u8)
        .filter(|&a| n.used_args & user_strings & 1 << a != 0)
        .collect();
    for c in n.copies.iter().filter(|c| c.kind == MemKind::UserString) {
        let arg = (0..crate::capture::layout::NARGS)
            .find(|&i| c.addr == AddrExpr::arg(i))
            .and_then(|i| u8::try_from(i).ok())
            .ok_or("copyinstr() of an address other than a probe argument")?;
        if !args.contains(&arg) {
            args.push(arg);
        }
    }
    Ok(args)
}

/// Whether string key `o` can only be `execname` or a constant (string constants, the probe's
/// names and compares only: no subroutine call, no D variable, no integer, which would be the
/// address of a string, `stringof(curthread->comm)`): the kernel then keeps it in 16
/// bytes ([`KeyKind::String`]); any other string takes its bytes whole
/// ([`KeyKind::StringBytes`]).
fn names_a_known_string(o: &dtrace_dif::object::DifObject) -> bool {
    use dtrace_dif::instr::Instr;
    use dtrace_dif::opcode::Opcode;
    use dtrace_dif::vars;
    o.text.iter().all(|w| match Instr::decode(*w) {
        Ok(
            Instr::Sets { .. }
            | Instr::Mov { .. }
            | Instr::Ret { .. }
            | Instr::Nop
            | Instr::Cmp { .. }
            | Instr::Tst { .. }
            | Instr::Scmp { .. }
            | Instr::Branch { .. },
        ) => true,
        Ok(Instr::LoadVar { op, var, .. }) => {
            op == Opcode::Ldgs
                && matches!(
                    u32::from(var),
                    vars::DIF_VAR_EXECNAME
                        | vars::DIF_VAR_PROBEPROV
                        | vars::DIF_VAR_PROBEMOD
                        | vars::DIF_VAR_PROBEFUNC
                        | vars::DIF_VAR_PROBENAME
                        | vars::DIF_VAR_ZONENAME
                )
        }
        _ => false,
    })
}

/// Environment variable that, set to `0`, keeps `ustack()` and `jstack()` aggregation keys in
/// dtrace. Else the kernel walks them as dtrace does: the longer of its frame-pointer walk and
/// the walk with the files' `.eh_frame` (see `capture::ustack_keys`), a firing whose stack it
/// cannot place handed over to dtrace.
pub const KERNEL_USTACKS_ENV: &str = "DTRACE_KERNEL_USTACKS";

/// The kind of key the kernel keeps for the stack or symbol key action `key` (`ustacks`:
/// `ustack()` keys may be walked there, see [`KERNEL_USTACKS_ENV`]), or why none.
fn key_kind(
    key: &dtrace_dif::program::ActionDesc,
    ustacks: bool,
) -> std::result::Result<KeyKind, String> {
    use crate::capture::spec::MAX_STACK_DEPTH;
    use crate::provider::needs::{stack_frames, ustack_frames};
    let int64 = || match &key.difo {
        Some(o) if !o.rtype.is_by_ref() && o.rtype.size == 8 => Ok(()),
        _ => Err("a symbol key that is not a 64-bit address".to_string()),
    };
    Ok(match key.kind {
        ActionKind::Stack => KeyKind::KernelStack(stack_frames(key.arg).min(MAX_STACK_DEPTH)),
        // jstack() is ustack() where no Java helper annotates the frames (its string space
        // stays zero, as the framework's): the same frames (as many as ustack() would take,
        // cut to `jstackframes` when the key is expanded).
        ActionKind::Ustack | ActionKind::Jstack if !ustacks => {
            return Err(format!(
                "{} keys are walked in dtrace ({KERNEL_USTACKS_ENV}=0)",
                action_name(key.kind)
            ))
        }
        ActionKind::Ustack | ActionKind::Jstack => {
            KeyKind::UserStack(ustack_frames(key.arg).min(MAX_STACK_DEPTH))
        }
        ActionKind::Sym | ActionKind::Mod => {
            int64()?;
            KeyKind::Int(8)
        }
        ActionKind::Usym | ActionKind::Umod | ActionKind::Uaddr => {
            int64()?;
            KeyKind::UserAddr
        }
        _ => return Err("an aggregation key of a kind the kernel does not keep".into()),
    })
}

/// Whether clause `e` can run in the kernel (before translation, which the probe's program
/// does): its aggregating, recording and store actions, or why not. Its record is laid out as
/// the framework lays it out with strings of `strsize` characters (the framework's layout is
/// checked against it when the clause is bound, see [`super::LinuxTracing::bind_record`]);
/// `ustacks`: whether `ustack()` keys may be kept in the kernel ([`KERNEL_USTACKS_ENV`]).
pub fn plan_clause(
    e: &EcbDesc,
    strsize: u32,
    ustacks: bool,
) -> std::result::Result<ClausePlan, String> {
    let acts = &e.actions;
    if acts.is_empty() {
        return Err("the clause has no action (it records the firing)".into());
    }
    let mut used = vec![false; acts.len()];
    let mut out = Vec::new();
    let bases = dtrace_framework::framework::code_base(e);
    let base = |i: usize| {
        bases
            .get(i)
            .map_or(0, |&b| u32::try_from(b).unwrap_or(u32::MAX))
    };
    for (i, a) in acts.iter().enumerate() {
        if !a.kind.is_aggregation() {
            continue;
        }
        if !crate::capture::kagg::computes(a.kind) {
            return Err(format!(
                "{}() is not yet computed in the kernel",
                agg_name(a.kind)
            ));
        }
        let k = a.ntuple as usize;
        let first = i.checked_sub(k).ok_or("malformed aggregation keys")?;
        let quantizing = matches!(
            a.kind,
            ActionKind::AggQuantize | ActionKind::AggLquantize | ActionKind::AggLlquantize
        );
        let mut keys = Vec::new();
        let mut incr = None;
        let mut agg_bases = AggBases {
            value: base(i),
            ..AggBases::default()
        };
        for (j, key) in acts.iter().enumerate().take(i).skip(first) {
            used[j] = true;
            if key.kind != ActionKind::DifExpr {
                keys.push((key.difo.clone(), key_kind(key, ustacks)?));
                agg_bases.keys.push(base(j));
                continue;
            }
            let Some(o) = &key.difo else {
                return Err("an aggregation key without an expression".into());
            };
            let t = &o.rtype;
            if quantizing && j + 1 == i && t.size == 0 && !t.is_string() {
                incr = Some(o.clone());
                agg_bases.incr = base(j);
                continue;
            }
            let kind = if t.is_string() && names_a_known_string(o) {
                KeyKind::String
            } else if t.is_string() {
                let width = dtrace_ebpf::translate::string_key_width(strsize as usize + 1);
                KeyKind::StringBytes(u32::try_from(width).map_err(|_| "strsize too large")?)
            } else if !t.is_by_ref() && matches!(t.size, 1 | 2 | 4 | 8) {
                KeyKind::Int(t.size as u8)
            } else {
                return Err("an aggregation key of a type the kernel does not keep".into());
            };
            keys.push((Some(o.clone()), kind));
            agg_bases.keys.push(base(j));
        }
        let kinds: Vec<KeyKind> = keys.iter().map(|(_, k)| *k).collect();
        if kernel_key_layout(&kinds).0 > MAX_KAGG_KEY {
            return Err(format!(
                "its keys take more than the kernel's {MAX_KAGG_KEY} bytes"
            ));
        }
        let bytes = dtrace_framework::aggregate::value_size(a.kind, a.arg)
            .map_err(|e| e.to_string())? as usize;
        if bytes + 8 > MAX_KAGG_VALUE {
            return Err(format!(
                "its value takes more than the kernel's {MAX_KAGG_VALUE} bytes"
            ));
        }
        used[i] = true;
        out.push(PlannedAgg {
            kind: a.kind,
            arg: a.arg,
            keys,
            value: a.difo.clone(),
            incr,
            value_words: bytes / 8,
            bases: agg_bases,
        });
    }
    let recording: Vec<usize> = (0..acts.len())
        .filter(|&i| !used[i] && !is_store(&acts[i]))
        .collect();
    if let Some(&i) = recording.iter().find(|&&i| !records_at_probe(&acts[i])) {
        return Err(format!(
            "{} is not yet built at the probe",
            action_name(acts[i].kind)
        ));
    }
    if recording.iter().any(|&i| acts[i].kind == ActionKind::Chill) {
        crate::features::chill_at_probe()?;
    }
    let record = if recording.is_empty() {
        None
    } else {
        let opts = dtrace_framework::options::Options {
            strsize: u64::from(strsize),
            ..Default::default()
        };
        let layout = dtrace_framework::layout::layout_ecb(e, &opts).map_err(|e| e.to_string())?;
        if layout.size as usize > crate::capture::spec::MAX_KERNEL_RECORD {
            return Err(format!(
                "its record takes more than the {} bytes built at the probe",
                crate::capture::spec::MAX_KERNEL_RECORD
            ));
        }
        let mut actions = Vec::with_capacity(recording.len());
        for &i in &recording {
            let rec = layout.actions.get(i).ok_or("malformed layout")?.rec;
            actions.push(RecordAction {
                step: steps_before(acts, &used, i),
                difo: acts[i].difo.clone(),
                offset: rec.offset,
                size: rec.size,
                exit: acts[i].kind == ActionKind::Exit,
                signal: match acts[i].kind {
                    ActionKind::Raise => Some(crate::capture::spec::SignalAction::Raise),
                    ActionKind::Stop => Some(crate::capture::spec::SignalAction::Stop),
                    _ => None,
                },
                memory: acts[i].kind == ActionKind::Tracemem || records_object(&acts[i]),
                object: records_object(&acts[i]),
                user_symbol: matches!(
                    acts[i].kind,
                    ActionKind::Usym | ActionKind::Umod | ActionKind::Uaddr
                ),
                stack: (acts[i].kind == ActionKind::Stack).then_some(rec.size / 8),
                // (The layout's argument: the frames, the string space in the high half.)
                ustack: matches!(acts[i].kind, ActionKind::Ustack | ActionKind::Jstack)
                    .then_some((rec.arg & 0xffff_ffff) as u32),
                spec: match acts[i].kind {
                    ActionKind::Speculate => Some(crate::capture::spec::SpecOp::Speculate),
                    ActionKind::Commit => Some(crate::capture::spec::SpecOp::Commit),
                    ActionKind::Discard => Some(crate::capture::spec::SpecOp::Discard),
                    _ => None,
                },
                chill: acts[i].kind == ActionKind::Chill,
                base: base(i),
            });
        }
        // The kernel walks as many user frames as the capture would for the clause (see
        // `KernelRecord::walk_user_frames`, which makes it the probe's).
        let ustack_walk = recording
            .iter()
            .filter(|&&i| matches!(acts[i].kind, ActionKind::Ustack | ActionKind::Jstack))
            .map(|&i| {
                crate::provider::needs::ustack_frames(acts[i].arg)
                    .min(crate::capture::spec::MAX_STACK_DEPTH)
            })
            .max()
            .unwrap_or(0);
        let record = KernelRecord {
            size: layout.size,
            recs: layout.principal_recs(),
            actions,
            ustack_walk,
        };
        if record.ring_bytes() > crate::capture::spec::MAX_KERNEL_RING_RECORD {
            return Err(format!(
                "its record and the stacks taken with it take more than the {} bytes of a \
                 record built at the probe",
                crate::capture::spec::MAX_KERNEL_RING_RECORD
            ));
        }
        Some(record)
    };
    let mut stores = Vec::new();
    for (i, a) in acts.iter().enumerate() {
        if used[i] || !is_store(a) {
            continue;
        }
        if let Some(o) = &a.difo {
            stores.push((steps_before(acts, &used, i), base(i), o.clone()));
        }
    }
    let writes_user = stores
        .iter()
        .any(|(_, _, o)| dtrace_framework::framework::calls_destructive(o));
    Ok(ClausePlan {
        aggs: out,
        stores,
        record,
        writes_user,
        copy_scratch: None,
    })
}

/// The aggregating and recording actions before action `i` (keys, weights and stores are not
/// counted): the steps a store runs after.
fn steps_before(acts: &[dtrace_dif::program::ActionDesc], used: &[bool], i: usize) -> usize {
    acts[..i]
        .iter()
        .zip(used)
        .filter(|(a, &u)| a.kind.is_aggregation() || (!u && !is_store(a)))
        .count()
}

/// Whether clause `e` records data: an action other than aggregating functions, their keys and
/// stores.
pub fn records_data(e: &EcbDesc) -> bool {
    let acts = &e.actions;
    let mut key = vec![false; acts.len()];
    for (i, a) in acts.iter().enumerate() {
        if a.kind.is_aggregation() {
            let first = i.saturating_sub(a.ntuple as usize);
            key[first..i].iter_mut().for_each(|k| *k = true);
        }
    }
    acts.iter()
        .zip(&key)
        .any(|(a, &k)| !k && !a.kind.is_aggregation() && !is_store(a))
}

/// How `dtrace -v` names an action the kernel does not build.
fn action_name(kind: ActionKind) -> String {
    use ActionKind as K;
    match kind {
        K::Printa => "printa()".into(),
        K::Exit => "exit()".into(),
        K::Stack => "stack()".into(),
        K::Ustack => "ustack()".into(),
        K::Jstack => "jstack()".into(),
        K::Sym => "sym()".into(),
        K::Mod => "mod()".into(),
        K::Usym => "usym()".into(),
        K::Umod => "umod()".into(),
        K::Uaddr => "uaddr()".into(),
        K::Tracemem | K::TracememDynsize => "tracemem()".into(),
        K::Speculate | K::Commit | K::Discard => "a speculation action".into(),
        K::LibAct => "print()".into(),
        other => format!("the {other:?} action"),
    }
}

/// Whether action `a` only evaluates an expression for its effect on variables (`self->ts =
/// timestamp;`): it records nothing.
fn is_store(a: &dtrace_dif::program::ActionDesc) -> bool {
    a.kind == ActionKind::DifExpr && a.difo.as_ref().is_some_and(|o| o.rtype.size == 0)
}

fn agg_name(kind: ActionKind) -> &'static str {
    use ActionKind as K;
    match kind {
        K::AggCount => "count",
        K::AggSum => "sum",
        K::AggMin => "min",
        K::AggMax => "max",
        K::AggAvg => "avg",
        K::AggStddev => "stddev",
        K::AggQuantize => "quantize",
        K::AggLquantize => "lquantize",
        K::AggLlquantize => "llquantize",
        _ => "aggregating function",
    }
}

/// The maps of one aggregating action of one clause (shared by every probe the clause is
/// enabled on).
struct AggMaps {
    clause: usize,
    index: usize,
    /// The aggregating function and its parameters (for the updates dtrace aggregates, see
    /// [`KernelAggState::defer`]).
    kind: ActionKind,
    arg: u64,
    value_words: usize,
    maps: Storage,
    /// The framework's aggregation id and its key records, once the clause is enabled.
    bound: Option<(u32, Vec<RecDesc>)>,
    keys: KeyDecoder,
}

/// The maps of an aggregating action (see [`AggStore`]).
enum Storage {
    /// With keys: the hash maps of the two generations, and those of the keys whose last
    /// string or stack is short, with their key kinds (see [`crate::capture::spec::short_keys`]).
    Keyed {
        maps: [Map; 2],
        short: Option<([Map; 2], Vec<KeyKind>)>,
    },
    /// Without keys: the per-CPU array of one value per generation.
    Keyless(Map),
}

impl Storage {
    /// The descriptors the probe's code updates.
    fn store(&self) -> AggStore {
        match self {
            Storage::Keyed { maps, short } => AggStore::Keyed {
                maps: [maps[0].raw_fd(), maps[1].raw_fd()],
                short: short.as_ref().map(|(m, _)| [m[0].raw_fd(), m[1].raw_fd()]),
            },
            Storage::Keyless(slots) => AggStore::Keyless(slots.raw_fd()),
        }
    }
}

/// How a kernel key turns into the framework's key bytes.
struct KeyDecoder {
    keys: Vec<KeyKind>,
    /// The string constants the keys may hold, by [`string_key_hash`].
    strings: HashMap<u64, Vec<u8>>,
}

/// The kernel aggregations of a session.
pub struct KernelAggState {
    control: Map,
    barrier_template: Map,
    barrier: Map,
    zeros: Map,
    /// Set by the first `exit()` of a clause run in the kernel (see `KernelAggs::exit`).
    exit: Map,
    drops: Map,
    /// `chill()`'s budget per CPU (see `KernelAggs::chill`).
    chill: Map,
    /// Where the probes' programs build keys (see `KernelAggs::keys`).
    key_scratch: Map,
    reported_drops: Vec<u64>,
    /// The generation updated while on (1 or 2).
    generation: u64,
    on: bool,
    aggs: Vec<AggMaps>,
    /// `aggsize`: bounds each map's entries.
    aggsize: u64,
    /// The framework's clock less the kernel's (`timestamp` in the kernel).
    clock_offset: i64,
    /// Updates the probes sent to dtrace, aggregated here, for the next snapshot (see
    /// [`KernelAggState::defer`]).
    pending: Snapshot,
}

impl KernelAggState {
    /// Creates the switch, the barrier, the zeroed value, the drop counter and `chill()`'s
    /// budget.
    pub fn new(aggsize: u64) -> Result<KernelAggState> {
        let barrier_template = Map::create(MapKind::Array, "dt_agg_tmpl", 4, 8, 1)?;
        let barrier = Map::create_array_of_maps("dt_agg_sync", &barrier_template, 1)?;
        Ok(KernelAggState {
            control: Map::create(
                MapKind::Array,
                "dt_agg_ctl",
                4,
                crate::capture::spec::CONTROL_SIZE as u32,
                1,
            )?,
            zeros: Map::create(MapKind::Array, "dt_agg_zero", 4, MAX_KAGG_VALUE as u32, 1)?,
            exit: Map::create(
                MapKind::Array,
                "dt_exit",
                4,
                crate::capture::spec::EXIT_SIZE as u32,
                1,
            )?,
            drops: Map::create(MapKind::PerCpuArray, "dt_agg_drops", 4, 8, 1)?,
            chill: Map::create(
                MapKind::PerCpuArray,
                "dt_chill",
                4,
                crate::capture::chill::STATE_SIZE,
                1,
            )?,
            key_scratch: Map::create(
                MapKind::PerCpuArray,
                "dt_agg_keys",
                4,
                crate::capture::spec::KEY_SCRATCH_SIZE as u32,
                crate::capture::spec::KEY_SCRATCH_SLOTS,
            )?,
            barrier_template,
            barrier,
            reported_drops: Vec::new(),
            generation: 1,
            on: false,
            aggs: Vec::new(),
            aggsize,
            clock_offset: 0,
            pending: Snapshot::default(),
        })
    }

    /// Sets the framework's clock less `bpf_ktime_get_ns()`, which the kernel adds to make
    /// `timestamp` (written with the next switch).
    pub fn set_clock_offset(&mut self, offset: i64) {
        self.clock_offset = offset;
    }

    /// Writes the control value: the generation updated (0: off), the clock offset and the wall
    /// clock's offset (the one records' `walltimestamp` is made with).
    fn write_control(&self, generation: u64) -> Result<()> {
        use crate::capture::spec::{CONTROL_CLOCK, CONTROL_WALL};
        let mut v = [0u8; crate::capture::spec::CONTROL_SIZE];
        v[..8].copy_from_slice(&generation.to_ne_bytes());
        v[CONTROL_CLOCK..CONTROL_CLOCK + 8].copy_from_slice(&self.clock_offset.to_ne_bytes());
        v[CONTROL_WALL..CONTROL_WALL + 8]
            .copy_from_slice(&crate::session::wall_offset_ns().to_ne_bytes());
        self.control.update(&0u32.to_ne_bytes(), &v)
    }

    /// The descriptors programs use: (control, zeros, drops, exit).
    pub fn fds(&self) -> (i32, i32, i32, i32) {
        (
            self.control.raw_fd(),
            self.zeros.raw_fd(),
            self.drops.raw_fd(),
            self.exit.raw_fd(),
        )
    }

    /// The descriptor of `chill()`'s per-CPU budget.
    pub fn chill_fd(&self) -> i32 {
        self.chill.raw_fd()
    }

    /// The descriptor of the per-CPU scratch value where programs build keys.
    pub fn key_scratch_fd(&self) -> i32 {
        self.key_scratch.raw_fd()
    }

    /// The status of the first `exit()` a clause called in the kernel, if one did.
    pub fn exited(&self) -> Result<Option<i32>> {
        let Some(v) = self.exit.lookup(&0u32.to_ne_bytes())? else {
            return Ok(None);
        };
        let word = |o: usize| {
            v.get(o..o + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_ne_bytes)
        };
        Ok(match word(0) {
            Some(0) | None => None,
            Some(_) => word(8).map(|s| s as u32 as i32),
        })
    }

    /// The kernel form of aggregation `index` of clause `clause` (its maps made at first use),
    /// remembering the string constants `strings` its keys may take.
    pub fn agg_for(
        &mut self,
        clause: usize,
        index: usize,
        p: &PlannedAgg,
        strings: &[Vec<u8>],
    ) -> Result<KernelAgg> {
        let pos = match self
            .aggs
            .iter()
            .position(|a| a.clause == clause && a.index == index)
        {
            Some(i) => i,
            None => {
                let kinds: Vec<KeyKind> = p.keys.iter().map(|(_, k)| *k).collect();
                let value_size = p.value_words * 8 + 8;
                let aggsize = self.aggsize;
                let make = |kinds: &[KeyKind], g: usize, tier: &str| {
                    let key_size = kernel_key_layout(kinds).0;
                    let per_entry = (key_size + value_size + 4 + 32) as u64;
                    let entries = (aggsize / per_entry).clamp(1, MAX_MAP_ENTRIES) as u32;
                    Map::create(
                        MapKind::PerCpuHash,
                        &format!("dt_agg_{clause}_{index}_{g}{tier}"),
                        key_size as u32,
                        value_size as u32,
                        entries,
                    )
                };
                let maps = if kinds.is_empty() {
                    Storage::Keyless(Map::create(
                        MapKind::PerCpuArray,
                        &format!("dt_agg_{clause}_{index}"),
                        4,
                        value_size as u32,
                        KEYLESS_SLOTS,
                    )?)
                } else {
                    let maps = [make(&kinds, 0, "")?, make(&kinds, 1, "")?];
                    let short = match crate::capture::spec::short_keys(&kinds) {
                        Some(short) => {
                            Some(([make(&short, 0, "s")?, make(&short, 1, "s")?], short))
                        }
                        None => None,
                    };
                    Storage::Keyed { maps, short }
                };
                self.aggs.push(AggMaps {
                    clause,
                    index,
                    kind: p.kind,
                    arg: p.arg,
                    value_words: p.value_words,
                    maps,
                    bound: None,
                    keys: KeyDecoder {
                        keys: kinds,
                        strings: HashMap::new(),
                    },
                });
                self.aggs.len() - 1
            }
        };
        let a = &mut self.aggs[pos];
        for s in strings {
            a.keys.strings.insert(string_key_hash(s), s.clone());
        }
        Ok(p.with_store(a.maps.store()))
    }

    /// Tells which framework aggregation (its id and key records) aggregation `index` of clause
    /// `clause` feeds (the first one told is kept: every probe of a clause lays keys out alike).
    pub fn bind(&mut self, clause: usize, index: usize, aggid: u32, recs: &[RecDesc]) {
        if let Some(a) = self
            .aggs
            .iter_mut()
            .find(|a| a.clause == clause && a.index == index && a.bound.is_none())
        {
            a.bound = Some((aggid, recs.to_vec()));
        }
    }

    /// Turns the aggregations on (after BEGIN) or off (before END: what the kernel counted
    /// until then is in the next snapshot, nothing after it).
    pub fn set_on(&mut self, on: bool) -> Result<()> {
        if self.on == on {
            return Ok(());
        }
        self.on = on;
        self.write_control(if on { self.generation } else { 0 })?;
        if !on {
            self.wait_for_programs()?;
        }
        Ok(())
    }

    /// Returns once no program can still be running with what it read before the call.
    fn wait_for_programs(&self) -> Result<()> {
        let fd = self.barrier_template.raw_fd() as u32;
        self.barrier.update(&0u32.to_ne_bytes(), &fd.to_ne_bytes())
    }

    /// Aggregates update `u`, which a probe sent to dtrace because it could not make it: with
    /// `pcs`, the user stack of its key as dtrace walked it (the probe could not), which its key's
    /// user stacks take (zeros past them, as the probe's keys); without, its key whole, which
    /// the map the probe named (the whole keys' or the short ones', see [`Storage::Keyed`])
    /// could not take. The update is in the next snapshot, as a CPU's value the probe's maps
    /// would have held. An update of an aggregation not bound or no longer here, or whose key is
    /// short, is dropped (it cannot be).
    pub fn defer(&mut self, u: &crate::capture::DeferredUpdate, pcs: Option<&[u64]>) {
        // The aggregation, and the kinds of the keys of the map named.
        let Some((a, kinds)) = self.aggs.iter().find_map(|a| match &a.maps {
            Storage::Keyed { maps, .. } if maps[0].raw_fd() == u.agg => Some((a, &a.keys.keys)),
            Storage::Keyed {
                short: Some((maps, kinds)),
                ..
            } if maps[0].raw_fd() == u.agg => Some((a, kinds)),
            _ => None,
        }) else {
            return;
        };
        let Some((aggid, recs)) = &a.bound else {
            return;
        };
        let (ksize, offs) = kernel_key_layout(kinds);
        let Some(key) = u.key.get(..ksize) else {
            return;
        };
        let mut key = key.to_vec();
        for (kind, off) in kinds.iter().zip(offs) {
            if let (KeyKind::UserStack(n), Some(pcs)) = (kind, pcs) {
                for i in 0..*n as usize {
                    let pc = pcs.get(i).copied().unwrap_or(0);
                    if let Some(b) = key.get_mut(off + 8 + 8 * i..off + 16 + 8 * i) {
                        b.copy_from_slice(&pc.to_ne_bytes());
                    }
                }
            }
        }
        let Some(fw_key) = a.keys.expand(kinds, &key, recs) else {
            return;
        };
        let mut data = dtrace_framework::aggregate::initial_value(a.kind, a.arg, a.value_words);
        dtrace_framework::aggregate::apply(a.kind, &mut data, u.val, u.incr);
        let value = data.iter().flat_map(|w| w.to_ne_bytes()).collect();
        self.pending.pids.extend(&fw_key.pids);
        push_value(&mut self.pending, *aggid, &fw_key, value, u.cpu);
    }

    /// What the kernel aggregated since the previous snapshot (see [`Snapshot`]), with the
    /// updates dtrace aggregated for it ([`KernelAggState::defer`]).
    pub fn snapshot(&mut self) -> Result<Snapshot> {
        let mut snap = std::mem::take(&mut self.pending);
        if self.aggs.is_empty() {
            return Ok(snap);
        }
        let old = self.generation;
        if self.on {
            self.generation = 3 - old;
            self.write_control(self.generation)?;
            self.wait_for_programs()?;
        }
        let slot = (old - 1) as usize;
        for a in &self.aggs {
            // Not bound yet (a clause of a probe of every process whose first process's probes
            // are not named yet, see `file_usdt`): its entries wait in their generation.
            let Some((aggid, recs)) = &a.bound else {
                continue;
            };
            let (maps, short) = match &a.maps {
                Storage::Keyed { maps, short } => (maps, short),
                Storage::Keyless(slots) => {
                    // The generation's value: emptied (every flag word zero) once read.
                    let index = (slot as u32).to_ne_bytes();
                    let Some(values) = slots.lookup(&index)? else {
                        continue;
                    };
                    if values.iter().any(|b| *b != 0) {
                        slots.update(&index, &vec![0u8; values.len()])?;
                    }
                    if let Some(fw_key) = a.keys.expand(&[], &[], recs) {
                        push_values(&mut snap, *aggid, &fw_key, &values, a.value_words);
                    }
                    continue;
                }
            };
            // The maps of the whole keys, then those of the short strings' (a key is in one).
            let tiers = std::iter::once((&maps[slot], &a.keys.keys))
                .chain(short.as_ref().map(|(m, kinds)| (&m[slot], kinds)));
            for (map, kinds) in tiers {
                let keys = map.keys()?;
                for key in keys {
                    let Some(values) = map.lookup(&key)? else {
                        continue;
                    };
                    let _ = map.delete(&key)?;
                    let Some(fw_key) = a.keys.expand(kinds, &key, recs) else {
                        continue;
                    };
                    snap.pids.extend(&fw_key.pids);
                    push_values(&mut snap, *aggid, &fw_key, &values, a.value_words);
                }
            }
        }
        snap.pids.sort_unstable();
        snap.pids.dedup();
        Ok(snap)
    }

    /// Updates lost in the kernel (a map was full) per CPU since the previous call.
    pub fn take_drops(&mut self) -> Result<CpuDrops> {
        let now = self.drops.percpu_u64(0)?;
        self.reported_drops.resize(now.len(), 0);
        let mut out = Vec::new();
        for (cpu, (&n, seen)) in now.iter().zip(self.reported_drops.iter_mut()).enumerate() {
            if n > *seen {
                out.push((cpu as u32, n - *seen));
                *seen = n;
            }
        }
        Ok(out)
    }
}

/// Adds to `snap` a record of aggregation `aggid` under `key` for each CPU's slot of `values`
/// (a per-CPU value: `value_words` words then the flag word, one slot per possible CPU in CPU
/// order) whose flag says it was updated.
fn push_values(
    snap: &mut Snapshot,
    aggid: u32,
    key: &ExpandedKey,
    values: &[u8],
    value_words: usize,
) {
    for (cpu, slot) in values.chunks(value_words * 8 + 8).enumerate() {
        let Some((value, flag)) = slot.split_at_checked(value_words * 8) else {
            continue;
        };
        if flag.iter().all(|b| *b == 0) {
            continue;
        }
        push_value(snap, aggid, key, value.to_vec(), cpu as u32);
    }
}

/// Adds CPU `cpu`'s `value` of aggregation `aggid` under `key` to `snap`.
fn push_value(snap: &mut Snapshot, aggid: u32, key: &ExpandedKey, value: Vec<u8>, cpu: u32) {
    let r = snap.records.len();
    snap.cuts.extend(
        key.cuts
            .iter()
            .map(|(off, frames, pcs)| (r, *off, *frames, pcs.clone())),
    );
    snap.records.push(AggRecord {
        aggid,
        key: key.bytes.clone(),
        value,
        cpu,
    });
}

/// A kernel key expanded to the framework's key bytes.
#[derive(Debug)]
struct ExpandedKey {
    bytes: Vec<u8>,
    /// Kernel stacks whose tracing frames are still to cut: `(offset, frames the framework's
    /// record holds, the program counters taken)`.
    cuts: Vec<(usize, usize, Vec<u64>)>,
    /// The processes of its user stacks and addresses.
    pids: Vec<u32>,
}

impl KeyDecoder {
    /// The framework's key bytes (laid out by `recs`, whose last record is the value's) of a
    /// kernel key; `None` for a key that does not decode (a constant never seen).
    /// `kinds`: the key's parts as its map keeps them (the decoder's, or those of the short
    /// strings' or stacks' map, see [`crate::capture::spec::short_keys`]).
    fn expand(&self, kinds: &[KeyKind], key: &[u8], recs: &[RecDesc]) -> Option<ExpandedKey> {
        let key_recs = recs.get(..recs.len().checked_sub(1)?)?;
        if key_recs.len() != kinds.len() {
            return None;
        }
        let size = recs.last()?.offset as usize;
        let mut out = ExpandedKey {
            bytes: vec![0u8; size],
            cuts: Vec::new(),
            pids: Vec::new(),
        };
        let (_, offs) = kernel_key_layout(kinds);
        for ((kind, off), rec) in kinds.iter().zip(offs).zip(key_recs) {
            let part = key.get(off..off + kind.kernel_size())?;
            let dst = out
                .bytes
                .get_mut(rec.offset as usize..(rec.offset + rec.size) as usize)?;
            let word = |i: usize| {
                part.get(i * 8..i * 8 + 8)
                    .and_then(|b| b.try_into().ok())
                    .map(u64::from_ne_bytes)
            };
            match kind {
                KeyKind::Int(n) => {
                    let n = usize::from(*n).min(dst.len());
                    dst[..n].copy_from_slice(&part[..n]);
                }
                KeyKind::String => {
                    let bytes: &[u8] = if part[15] == STRING_CONST_MARK {
                        let h = u64::from_ne_bytes(part[..8].try_into().ok()?);
                        self.strings.get(&h)?
                    } else {
                        let end = part.iter().position(|b| *b == 0).unwrap_or(part.len());
                        &part[..end]
                    };
                    // As the framework stores a string: at most the record's size less its
                    // NUL, zero-padded.
                    let n = bytes.len().min(dst.len().saturating_sub(1));
                    dst[..n].copy_from_slice(&bytes[..n]);
                }
                KeyKind::StringBytes(_) => {
                    let end = part.iter().position(|b| *b == 0).unwrap_or(part.len());
                    let n = end.min(dst.len().saturating_sub(1));
                    dst[..n].copy_from_slice(&part[..n]);
                }
                KeyKind::KernelStack(_) => {
                    let frames = dst.len() / 8;
                    if word(0)? == 0 {
                        // Placed once the tracing frames are known (see `Snapshot::cuts`).
                        let pcs = (1..part.len() / 8)
                            .map_while(word)
                            .take_while(|pc| *pc != 0)
                            .collect();
                        out.cuts.push((rec.offset as usize, frames, pcs));
                    } else {
                        // Sampled: the pcs, as many as the framework's record holds.
                        let n = (part.len() - 8).min(frames * 8);
                        dst[..n].copy_from_slice(&part[8..8 + n]);
                    }
                }
                KeyKind::UserStack(_) => {
                    // The process id, then the pcs; the string space the framework's record
                    // may have after them stays zero, as it does there.
                    let n = part.len().min(dst.len()) / 8 * 8;
                    dst[..n].copy_from_slice(&part[..n]);
                    out.pids.push(word(0)? as u32);
                }
                KeyKind::UserAddr => {
                    let n = part.len().min(dst.len());
                    dst[..n].copy_from_slice(&part[..n]);
                    out.pids.push(word(0)? as u32);
                }
            }
        }
        Some(out)
    }
}

/// The string constants a clause's keys may take at a probe: its string table's and the probe's
/// names (`probefunc`..., also as their first `strsize` bytes, D's `strsize`: the translator cuts
/// built-in strings there as the interpreter does).
pub fn key_strings(aggs: &[PlannedAgg], names: &[&str], strsize: usize) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    for n in names.iter().copied().chain(["global"]) {
        let b = n.as_bytes();
        out.push(b.to_vec());
        out.push(b[..b.len().min(strsize)].to_vec());
    }
    for o in aggs
        .iter()
        .flat_map(|a| &a.keys)
        .filter_map(|(o, _)| o.as_ref())
    {
        out.extend(
            o.strtab
                .split(|b| *b == 0)
                .filter(|s| !s.is_empty())
                .map(<[u8]>::to_vec),
        );
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recs(parts: &[(u32, u32)], value_off: u32) -> Vec<RecDesc> {
        let mut v: Vec<RecDesc> = parts
            .iter()
            .map(|&(offset, size)| RecDesc {
                action: ActionKind::DifExpr,
                size,
                offset,
                alignment: 1,
                format: 0,
                arg: 0,
            })
            .collect();
        v.push(RecDesc {
            action: ActionKind::AggCount,
            size: 8,
            offset: value_off,
            alignment: 8,
            format: 0,
            arg: 0,
        });
        v
    }

    /// Writes every CPU's value of generation `g`'s slot of the keyless aggregation at `pos` of
    /// `state`: `(value, flag)` per CPU, zero for the CPUs not given.
    fn write_keyless(state: &KernelAggState, pos: usize, g: u32, cpus: &[(u64, u64)]) {
        let Storage::Keyless(slots) = &state.aggs[pos].maps else {
            panic!("not keyless");
        };
        let mut v = vec![0u8; slots.user_value_size().unwrap()];
        for (chunk, (value, flag)) in v.chunks_mut(16).zip(cpus) {
            chunk[..8].copy_from_slice(&value.to_ne_bytes());
            chunk[8..].copy_from_slice(&flag.to_ne_bytes());
        }
        slots.update(&g.to_ne_bytes(), &v).unwrap();
    }

    /// The (cpu, value) of each record of `snap`.
    fn per_cpu(snap: &Snapshot) -> Vec<(u32, u64)> {
        snap.records
            .iter()
            .map(|r| (r.cpu, u64::from_ne_bytes(r.value[..8].try_into().unwrap())))
            .collect()
    }

    #[test]
    fn a_keyless_aggregation_is_kept_in_an_array_read_by_its_flags_and_emptied() {
        let t = "a_keyless_aggregation_is_kept_in_an_array_read_by_its_flags_and_emptied";
        if !dtrace_testkit::skip_unless(crate::bpf_available(), t, "needs bpf(2)") {
            return;
        }
        let cpus = crate::bpf::map::possible_cpus().unwrap();
        let mut state = KernelAggState::new(1 << 20).unwrap();
        let planned = |keys: Vec<(Option<DifObject>, KeyKind)>| PlannedAgg {
            kind: ActionKind::AggSum,
            arg: 0,
            keys,
            value: None,
            incr: None,
            value_words: 1,
            bases: AggBases::default(),
        };
        // Without keys: one per-CPU array; with keys: the hash maps of the two generations.
        let keyless = state.agg_for(0, 0, &planned(Vec::new()), &[]).unwrap();
        assert!(matches!(keyless.store, AggStore::Keyless(fd) if fd >= 0));
        let keyed = state
            .agg_for(0, 1, &planned(vec![(None, KeyKind::Int(8))]), &[])
            .unwrap();
        assert!(matches!(keyed.store, AggStore::Keyed { short: None, .. }));
        // Asked again (another probe of the clause): the same array.
        let again = state.agg_for(0, 0, &planned(Vec::new()), &[]).unwrap();
        assert_eq!(again.store, keyless.store);
        state.bind(0, 0, 7, &recs(&[], 0));
        state.bind(0, 1, 8, &recs(&[(0, 8)], 8));
        // Nothing fired: no record at all (no data).
        assert!(state.snapshot().unwrap().records.is_empty());
        // CPU 0 summed 5; the last CPU fired with a sum of 0 (its flag set): both are data;
        // the others never fired.
        let mut values = vec![(0, 0); cpus];
        values[0] = (5, 1);
        values[cpus - 1] = (0, 1);
        write_keyless(&state, 0, 0, &values);
        let snap = state.snapshot().unwrap();
        assert!(snap
            .records
            .iter()
            .all(|r| r.aggid == 7 && r.key.is_empty()));
        let mut want = vec![(0, 5)];
        if cpus > 1 {
            want.push((cpus as u32 - 1, 0));
        }
        assert_eq!(per_cpu(&snap), want);
        // Drained: the next snapshot has nothing.
        assert!(state.snapshot().unwrap().records.is_empty());
        // On, a snapshot switches the generation and drains the old one only.
        state.set_on(true).unwrap();
        write_keyless(&state, 0, 0, &[(2, 1)]);
        write_keyless(&state, 0, 1, &[(3, 1)]);
        assert_eq!(per_cpu(&state.snapshot().unwrap()), vec![(0, 2)]);
        assert_eq!(per_cpu(&state.snapshot().unwrap()), vec![(0, 3)]);
        assert!(state.snapshot().unwrap().records.is_empty());
        state.set_on(false).unwrap();
    }

    #[test]
    fn kernel_keys_expand_to_the_framework_layout() {
        let mut strings = HashMap::new();
        strings.insert(string_key_hash(b"write"), b"write".to_vec());
        let a = KeyDecoder {
            keys: vec![KeyKind::String, KeyKind::Int(4), KeyKind::String],
            strings,
        };
        let mut key = vec![0u8; 40];
        key[..2].copy_from_slice(b"dd");
        key[16..20].copy_from_slice(&7u32.to_ne_bytes());
        key[24..32].copy_from_slice(&string_key_hash(b"write").to_ne_bytes());
        key[39] = STRING_CONST_MARK;
        let r = recs(&[(0, 256), (256, 4), (260, 256)], 520);
        let fw = a.expand(&a.keys, &key, &r).unwrap().bytes;
        assert_eq!(fw.len(), 520);
        assert_eq!(&fw[..3], b"dd\0");
        assert_eq!(&fw[256..260], &7u32.to_ne_bytes());
        assert_eq!(&fw[260..266], b"write\0");
        assert!(fw[266..].iter().all(|b| *b == 0));
        // A constant never seen does not decode.
        key[24] ^= 1;
        assert!(a.expand(&a.keys, &key, &r).is_none());
    }

    #[test]
    fn a_string_key_expands_alike_from_the_whole_and_the_short_maps() {
        use crate::capture::spec::{short_keys, SHORT_STRING_KEY};
        let a = KeyDecoder {
            keys: vec![KeyKind::Int(8), KeyKind::StringBytes(264)],
            strings: HashMap::new(),
        };
        let short = short_keys(&a.keys).unwrap();
        assert_eq!(
            short,
            vec![KeyKind::Int(8), KeyKind::StringBytes(SHORT_STRING_KEY)]
        );
        assert_eq!(kernel_key_layout(&short).0, 8 + SHORT_STRING_KEY as usize);
        let r = recs(&[(0, 8), (8, 257)], 272);
        let key = |len: usize, s: &[u8]| {
            let mut k = vec![0u8; len];
            k[..8].copy_from_slice(&7u64.to_ne_bytes());
            k[8..8 + s.len()].copy_from_slice(s);
            k
        };
        // A short string, as the short maps keep it and as the whole maps would.
        let path = b"/etc/passwd";
        let from_short = a.expand(&short, &key(8 + 64, path), &r).unwrap().bytes;
        let from_whole = a.expand(&a.keys, &key(8 + 264, path), &r).unwrap().bytes;
        assert_eq!(from_short, from_whole);
        assert_eq!(&from_short[8..8 + path.len() + 1], b"/etc/passwd\0");
        // A string of 63 bytes is the longest the short maps keep (its NUL is their last byte).
        let long = [b'x'; 63];
        let e = a.expand(&short, &key(8 + 64, &long), &r).unwrap().bytes;
        assert_eq!(&e[8..8 + 63], &long[..]);
        assert_eq!(e[8 + 63], 0);
        // Other keys have no short maps.
        assert!(short_keys(&[KeyKind::StringBytes(264), KeyKind::Int(8)]).is_none());
        assert!(short_keys(&[KeyKind::StringBytes(SHORT_STRING_KEY)]).is_none());
        assert!(short_keys(&[KeyKind::String]).is_none());
    }

    #[test]
    fn a_stack_key_expands_alike_from_the_whole_and_the_short_maps() {
        use crate::capture::spec::{deep_stack_flag_at, short_keys, SHORT_STACK_WORDS};
        let words = |w: &[u64]| -> Vec<u8> { w.iter().flat_map(|x| x.to_ne_bytes()).collect() };
        let short_words = SHORT_STACK_WORDS as usize;
        // @[execname, ustack()] with ustackframes=100: the short maps keep 24 frames.
        let a = KeyDecoder {
            keys: vec![KeyKind::String, KeyKind::UserStack(100)],
            strings: HashMap::new(),
        };
        let short = short_keys(&a.keys).unwrap();
        assert_eq!(
            short,
            vec![KeyKind::String, KeyKind::UserStack(SHORT_STACK_WORDS)]
        );
        assert_eq!(kernel_key_layout(&short).0, 16 + 8 + 8 * short_words);
        // The flag lies past the whole key.
        assert_eq!(deep_stack_flag_at(&a.keys), Some(16 + 808));
        let r = recs(&[(0, 16), (16, 808)], 824);
        let key = |frames: usize, pcs: &[u64]| {
            let mut k = b"perl\0\0\0\0\0\0\0\0\0\0\0\0".to_vec();
            let mut w = vec![7u64];
            w.extend(pcs);
            w.resize(1 + frames, 0);
            k.extend(words(&w));
            k
        };
        // A stack of 24 frames, the deepest the short maps keep, as they keep it and as the
        // whole maps would.
        let pcs: Vec<u64> = (1..=short_words as u64).map(|i| 0x40_0000 + i).collect();
        let from_short = a.expand(&short, &key(short_words, &pcs), &r).unwrap();
        let from_whole = a.expand(&a.keys, &key(100, &pcs), &r).unwrap();
        assert_eq!(from_short.bytes, from_whole.bytes);
        assert_eq!(from_short.pids, vec![7]);
        assert_eq!(
            &from_short.bytes[24..24 + 8 * short_words],
            &words(&pcs)[..]
        );
        assert!(from_short.bytes[24 + 8 * short_words..]
            .iter()
            .all(|b| *b == 0));
        // A kernel stack's short maps take its tracing frames too; a sampled one or a stack
        // of few frames has none.
        let short = short_keys(&[KeyKind::Int(8), KeyKind::KernelStack(20)]).unwrap();
        assert_eq!(short[1].kernel_size(), 8 + 8 * short_words);
        assert!(short_keys(&[KeyKind::UserStack(SHORT_STACK_WORDS)]).is_none());
        assert!(short_keys(&[KeyKind::KernelStack(8)]).is_none());
        // A stack that is not the last part has none; a key too large for the flag has none.
        assert!(short_keys(&[KeyKind::UserStack(100), KeyKind::Int(8)]).is_none());
        assert!(deep_stack_flag_at(&[KeyKind::UserStack(100), KeyKind::Int(8)]).is_none());
        let wide = [KeyKind::StringBytes(1240), KeyKind::UserStack(100)];
        assert_eq!(kernel_key_layout(&wide).0, 2048);
        assert!(short_keys(&wide).is_none());
    }

    #[test]
    fn stack_and_address_keys_expand_to_the_framework_layout() {
        let words = |w: &[u64]| -> Vec<u8> { w.iter().flat_map(|x| x.to_ne_bytes()).collect() };
        let a = KeyDecoder {
            keys: vec![
                KeyKind::KernelStack(2),
                KeyKind::UserStack(3),
                KeyKind::UserAddr,
            ],
            strings: HashMap::new(),
        };
        // A stack of a probe that is not sampled (its room: 2 + TRACING_FRAMES frames), the
        // user stack of process 42, and process 42's address 0x401000.
        let room = crate::capture::spec::kernel_stack_room(2) as usize;
        let mut kstack = vec![0u64; room + 1];
        kstack[1..5].copy_from_slice(&[0xbf, 0xa1, 0xa2, 0xa3]);
        let mut key = words(&kstack);
        key.extend(words(&[42, 0x40_1000, 0x40_2000, 0]));
        key.extend(words(&[42, 0x40_1000]));
        // The framework's records: 2 frames, pid and 3 frames and 8 bytes of strings, pid and
        // address.
        let r = recs(&[(0, 16), (16, 40), (56, 16)], 72);
        let e = a.expand(&a.keys, &key, &r).unwrap();
        assert_eq!(&e.bytes[..16], &[0u8; 16], "placed once cut");
        assert_eq!(&e.bytes[16..48], &words(&[42, 0x40_1000, 0x40_2000, 0])[..]);
        assert_eq!(&e.bytes[48..56], &[0u8; 8]);
        assert_eq!(&e.bytes[56..72], &words(&[42, 0x40_1000])[..]);
        assert_eq!(e.pids, vec![42, 42]);
        assert_eq!(e.cuts, vec![(0, 2, vec![0xbf, 0xa1, 0xa2, 0xa3])]);
        let mut snap = Snapshot {
            records: vec![AggRecord {
                aggid: 1,
                key: e.bytes.clone(),
                value: Vec::new(),
                cpu: 0,
            }],
            cuts: e.cuts.into_iter().map(|(o, f, p)| (0, o, f, p)).collect(),
            pids: e.pids,
        };
        // The first frame is the tracing machinery's: the next two show.
        snap.cut_tracing_frames(|pcs| pcs.iter().take_while(|pc| **pc == 0xbf).count());
        assert_eq!(&snap.records[0].key[..16], &words(&[0xa1, 0xa2])[..]);
        // A sampled stack is the frames the framework's record holds, as taken.
        kstack[0] = 1;
        let mut key = words(&kstack);
        key.extend(vec![0u8; 48]);
        let e = a.expand(&a.keys, &key, &r).unwrap();
        assert_eq!(&e.bytes[..16], &words(&[0xbf, 0xa1])[..]);
        assert!(e.cuts.is_empty());
    }

    #[test]
    fn print_and_objects_by_reference_are_recorded_as_memory() {
        use dtrace_dif::object::{ctf_kind, DifType, DIF_TF_BYREF, DIF_TF_BYUREF, DIF_TYPE_CTF};
        use dtrace_dif::program::{print_arg, print_object_arg, ActionDesc};
        let obj = |rtype| DifObject {
            rtype,
            ..DifObject::default()
        };
        let act = |kind, arg, rtype| ActionDesc {
            kind,
            arg,
            difo: Some(obj(rtype)),
            uarg: 0,
            ntuple: 0,
        };
        let by = |flags, size| DifType {
            kind: DIF_TYPE_CTF,
            ckind: ctf_kind::STRUCT,
            flags,
            size,
        };
        let clause = |actions| EcbDesc {
            actions,
            probe: dtrace_dif::program::ProbeDesc::default(),
            predicate: None,
            line: 0,
        };
        let flags = |actions| {
            let plan = plan_clause(&clause(actions), 256, false)?;
            let r = plan.record.ok_or("no record")?;
            Ok::<_, String>(
                r.actions
                    .iter()
                    .map(|a| (a.memory, a.object, a.size))
                    .collect::<Vec<_>>(),
            )
        };
        // print(p): the pointer, then the 24 bytes it points to.
        assert_eq!(
            flags(vec![
                act(ActionKind::LibAct, print_arg(0), DifType::integer(8)),
                act(
                    ActionKind::LibAct,
                    print_object_arg(0),
                    by(DIF_TF_BYREF, 24)
                ),
            ]),
            Ok(vec![(false, false, 8), (true, true, 24)])
        );
        // trace(*p) of a struct; a string and tracemem() are not objects; an object in user
        // memory is not read as kernel memory.
        let tracemem_size = flags(vec![act(ActionKind::Tracemem, 16, DifType::integer(8))])
            .map(|f| f[0].2)
            .unwrap_or(0);
        assert_eq!(
            flags(vec![
                act(ActionKind::DifExpr, 0, by(DIF_TF_BYREF, 12)),
                act(ActionKind::DifExpr, 0, DifType::string(256)),
                act(ActionKind::Tracemem, 16, DifType::integer(8)),
                act(ActionKind::DifExpr, 0, by(DIF_TF_BYUREF, 12)),
            ]),
            Ok(vec![
                (true, true, 12),
                (false, false, 256),
                (true, false, tracemem_size),
                (false, false, 12)
            ])
        );
    }

    #[test]
    fn stack_and_symbol_keys_plan_for_the_kernel() {
        use dtrace_dif::program::ActionDesc;
        let addr = DifObject {
            rtype: dtrace_dif::object::DifType::integer(8),
            ..DifObject::default()
        };
        let act = |kind, arg, difo: Option<&DifObject>| ActionDesc {
            kind,
            arg,
            difo: difo.cloned(),
            uarg: 0,
            ntuple: 0,
        };
        let with = |key: ActionDesc| EcbDesc {
            actions: vec![key, {
                let mut c = act(ActionKind::AggCount, 0, None);
                c.ntuple = 1;
                c
            }],
            probe: dtrace_dif::program::ProbeDesc::default(),
            predicate: None,
            line: 0,
        };
        let kind = |key: ActionDesc, ustacks: bool| {
            plan_clause(&with(key), 256, ustacks).map(|p| p.aggs[0].keys[0].1)
        };
        assert_eq!(
            kind(act(ActionKind::Stack, 0, None), false),
            Ok(KeyKind::KernelStack(20))
        );
        assert_eq!(
            kind(act(ActionKind::Stack, 500, None), false),
            Ok(KeyKind::KernelStack(127))
        );
        assert_eq!(
            kind(act(ActionKind::Usym, 0, Some(&addr)), false),
            Ok(KeyKind::UserAddr)
        );
        assert_eq!(
            kind(act(ActionKind::Mod, 0, Some(&addr)), false),
            Ok(KeyKind::Int(8))
        );
        // ustack() keys unless kept in dtrace.
        let e = kind(act(ActionKind::Ustack, 3, None), false).unwrap_err();
        assert!(e.contains(KERNEL_USTACKS_ENV), "{e}");
        assert_eq!(
            kind(act(ActionKind::Ustack, 3, None), true),
            Ok(KeyKind::UserStack(3))
        );
        // jstack() keys as ustack()'s, as many frames as ustack() takes.
        let e = kind(act(ActionKind::Jstack, 3, None), false).unwrap_err();
        assert!(
            e.starts_with("jstack() keys") && e.contains(KERNEL_USTACKS_ENV),
            "{e}"
        );
        assert_eq!(
            kind(act(ActionKind::Jstack, 3 | (100 << 32), None), true),
            Ok(KeyKind::UserStack(3))
        );
        assert_eq!(
            kind(act(ActionKind::Jstack, 0, None), true),
            Ok(KeyKind::UserStack(100))
        );
    }

    #[test]
    fn ustack_and_jstack_records_plan_for_the_probe() {
        use dtrace_dif::program::ActionDesc;
        let act = |kind, arg| ActionDesc {
            kind,
            arg,
            difo: None,
            uarg: 0,
            ntuple: 0,
        };
        let clause = |actions| EcbDesc {
            actions,
            probe: dtrace_dif::program::ProbeDesc::default(),
            predicate: None,
            line: 0,
        };
        // ustack(5, 32) and jstack(2, 16): the pid, the frames, the string space, as the
        // framework lays them out; the kernel walks as deep as the deeper.
        let p = plan_clause(
            &clause(vec![
                act(ActionKind::Ustack, 5 | (32 << 32)),
                act(ActionKind::Jstack, 2 | (16 << 32)),
            ]),
            256,
            false,
        )
        .unwrap();
        let r = p.record.unwrap();
        let tail = r.ustack_tail().unwrap();
        assert_eq!(tail.actions, vec![(16, 5), (96, 2)]);
        assert_eq!(tail.walk, 5);
        assert_eq!(r.size, 96 + 8 * 3 + 16);
        // One kernel stack too many past a large record: the ring's record would be too large.
        let mut big = vec![act(ActionKind::Ustack, 100)];
        big.extend((0..4).map(|_| act(ActionKind::Stack, 100)));
        let e = plan_clause(&clause(big.clone()), 256, false).unwrap_err();
        assert!(e.contains("the stacks taken with it take more than"), "{e}");
        big.pop();
        assert!(plan_clause(&clause(big), 256, false).is_ok());
    }

    #[test]
    fn key_strings_take_the_probe_names_and_the_string_table() {
        let o = DifObject {
            strtab: b"foo\0bar\0".to_vec(),
            ..DifObject::default()
        };
        let p = PlannedAgg {
            kind: ActionKind::AggCount,
            arg: 0,
            keys: vec![(Some(o), KeyKind::String)],
            value: None,
            incr: None,
            value_words: 1,
            bases: AggBases::default(),
        };
        let s = key_strings(&[p], &["syscall", "write"], 4);
        for w in [
            "foo", "bar", "syscall", "sysc", "write", "writ", "global", "glob",
        ] {
            assert!(s.contains(&w.as_bytes().to_vec()), "{w}");
        }
    }
}
