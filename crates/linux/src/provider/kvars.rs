//! D variables in the kernel, the consumer's side (the probe's side is `capture::kvars`): where
//! each thread-local (`self->x`, `self->a[k]`), global (`x`, `a[k1, k2]`) and clause-local
//! (`this->x`) lives ([`place`]), and their maps.
//!
//! A variable lives in the kernel only when every clause that reads or writes it, in every
//! program of the session (all `-n`/`-s` programs are planned together), runs whole at the probe:
//! its probes fire in the kernel (tracepoints, `fbt`, `pid` and USDT uprobes, `profile` and
//! `tick` perf events; never `BEGIN`/`END`, which fire in dtrace), its actions are aggregating
//! functions, stores and records the probe's code builds ([`ClausePlan`]), and it translates at
//! every probe it matches (`capture::kagg::check_clause`). One clause that cannot keeps every
//! variable it uses in dtrace, and with them every other clause that uses those, until nothing
//! changes: the two paths never share a variable, so nothing changes meaning. A clause that
//! records runs there only when every clause at its probes does (records keep the clauses'
//! order). Integer and string scalars (thread-locals, globals and clause-locals) and associative
//! arrays of integers or strings, keyed by integers and strings the translator follows
//! (constants, `execname`, `copyinstr()`, string variables), qualify, and so do struct, union
//! and array variables (thread-locals, globals and associative arrays of them, in a map of their
//! own: `capture::kvars::emit_ref_var`; a global struct or array of structs is copied between
//! dtrace and the kernel for `BEGIN` and `END` as the integers are, its bytes whole), and struct
//! clause-locals (for the firing, as the integers').
//! Scalars that hold `alloca()` or `copyin()` pointers ([`alloca_vars`], [`Placement::alloca`])
//! keep them as the interpreter does, its own addresses of that memory, so the two paths agree
//! on them (`dtrace_ebpf::translate`'s `alloca` notes).
//! The firing's `strtok()` state counts as a clause-local string every clause calling `strtok()`
//! uses ([`STRTOK_STATE_NAME`], `capture::kvars::STRTOK_STATE`), one per probe (clauses at
//! different probes never share a firing; a clause at several probes links their states, and
//! one whose probes are not known links every probe's), so the clauses calling it at a probe
//! all run in the kernel or all in dtrace: one firing's tokenizing never continues on the other
//! path ([`Placement::strtok`] names the probes where it lives in the kernel).
//! `BEGIN` and `END` clauses run in dtrace, before the kernel's clauses start and after they
//! stop: the global scalars and associative arrays they share with kernel clauses live in the
//! kernel all the same, copied from dtrace's variables after `BEGIN` and back before `END`
//! ([`KernelVarMaps::push_globals`], [`KernelVarMaps::push_arrays`],
//! [`KernelVarMaps::pull_globals`], [`KernelVarMaps::pull_arrays`]: an array's elements are
//! keyed as the probe keys them, its tuple's shape read from the clauses' DIF); their
//! thread-locals (dtrace's own thread's) keep what they share in dtrace. A clause that keeps
//! variables in the kernel cannot hand a firing over to dtrace: its `copyinstr()` reads at the
//! probe, where a string on a page not yet read in faults, as DTrace's does (dtrace's own
//! capture of a syscall's entry would read it again at the return; at a syscall's entry the
//! kernel keeps such a firing and runs it at the return instead: `capture::spec::Replay`), and
//! `-v` says so. A clause whose
//! variables live in the kernel runs there at every probe or the enabling fails with a one-line reason (a verifier limit no translation
//! foresees); a clause that uses one and runs in dtrace (a program planned after the placement)
//! fails alike.
//!
//! Thread-locals and array elements share one map, DTrace's dynamic variable space: (thread id,
//! variable, tuple) to value (`capture::kvars`), as many entries as `dynvarsize` gives dynamic
//! variables in the framework's space (`dynvar::capacity` of the programs' entry size, an 8-byte
//! integer when that is not known); stores that find it full are counted per CPU and reported as
//! dynamic variable drops. String thread-locals and array elements have a second map of the same
//! keys and capacity, whose values are strings of `strsize` bytes. Global scalars are the words
//! of one array value (integers, then each string's NULL flag and bytes), zero (the empty
//! string) until stored, never freed, shared by every CPU (as racy as DTrace's own).

use super::kagg::ClausePlan;
use crate::bpf::{Map, MapKind};
use crate::capture::spec::{AggStore, KernelAggClause, KernelVars};
use crate::catalog::{Catalog, Probe};
use crate::error::Result;
use dtrace_dif::object::{
    DifObject, DIFV_KIND_ARRAY, DIFV_KIND_SCALAR, DIFV_SCOPE_GLOBAL, DIFV_SCOPE_LOCAL,
    DIFV_SCOPE_THREAD,
};
use dtrace_dif::program::EcbDesc;
use std::collections::{BTreeMap, BTreeSet};

/// Environment variable that, set to `0`, keeps every D variable in dtrace (the clauses that
/// use them too).
pub const KERNEL_VARIABLES_ENV: &str = "DTRACE_KERNEL_VARIABLES";

/// The tracepoint providers (with `fbt`, the per-process `pid` and USDT providers and
/// `profile` on perf events, the probes where a clause can run whole: see [`kernel_probes`]).
pub(crate) const KERNEL_PROVIDERS: [&str; 5] = ["syscall", "proc", "sched", "io", "sdt"];

/// Where a D variable is visible.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// `self->x`.
    Thread,
    /// `x`.
    Global,
    /// `this->x` (for one firing).
    Clause,
    /// The speculations (`provider::speculation`), which every clause using them shares as one
    /// variable.
    Speculations,
    /// The firing's `strtok()` state at one probe, while [`place`] places it (its id numbers the
    /// probe; [`STRTOK_ANY`]: a clause whose probes are not known). A [`Placement`] holds it as
    /// the clause-local [`STRTOK_KEY`] and the probes where it lives in the kernel.
    Strtok,
}

/// The key of the firing's `strtok()` state among a clause's variables: a clause-local string
/// no one named (see `capture::kvars::STRTOK_STATE`).
pub const STRTOK_KEY: VarKey = (Scope::Clause, crate::capture::kvars::STRTOK_STATE);

/// The `strtok()` state of a clause whose probes are not known (they do not all fire in the
/// kernel, or matching them failed): it may fire at any probe, and shares the state of each.
pub const STRTOK_ANY: u32 = u32::MAX;

/// A variable: its scope and its id (ids are numbered per scope).
pub type VarKey = (Scope, u32);

/// A D variable a clause uses (a thread-local or a global).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadVar {
    /// Global or thread-local, and its id.
    pub key: VarKey,
    /// `self->NAME` or `NAME`.
    pub name: String,
    /// An integer scalar, or an associative array of integers (what the kernel keeps).
    pub integer: bool,
    /// A string scalar, or an associative array of strings (the kernel keeps them too).
    pub string: bool,
    /// An associative array, and the most bytes its tuples take in the clause.
    pub array: Option<usize>,
    /// A struct, union or array variable (stored by reference, not a string), and its size.
    pub by_ref: Option<u32>,
}

impl ThreadVar {
    /// Why the kernel cannot keep the variable (`None`: it can).
    pub fn not_kept(&self) -> Option<String> {
        match (self.integer, self.string, self.key.0) {
            (true, _, _) => None,
            (_, true, _) => None,
            _ if self.by_ref.is_some() => None,
            _ => Some(format!(
                "{} is neither an integer nor a string (structs are not yet kept in the kernel)",
                self.name
            )),
        }
    }
}

/// The thread-locals, user globals and clause-locals clause `e` reads or writes (from its
/// objects' variable tables), the strings of arrays' keys `strsize` (D's) bytes.
pub fn thread_vars(e: &EcbDesc, strsize: u32) -> Vec<ThreadVar> {
    let mut out: Vec<ThreadVar> = Vec::new();
    for o in clause_objects(e) {
        for v in &o.vartab {
            let (scope, prefix) = match v.scope {
                DIFV_SCOPE_THREAD => (Scope::Thread, "self->"),
                DIFV_SCOPE_LOCAL => (Scope::Clause, "this->"),
                DIFV_SCOPE_GLOBAL if v.id >= dtrace_dif::vars::DIF_VAR_OTHER_UBASE => {
                    (Scope::Global, "")
                }
                _ => continue,
            };
            let array = (v.kind == DIFV_KIND_ARRAY && scope != Scope::Clause).then(|| {
                dtrace_ebpf::translate::array_key_bytes(
                    o,
                    scope == Scope::Thread,
                    v.id,
                    strsize as usize,
                )
            });
            let integer = (v.kind == DIFV_KIND_SCALAR || array.is_some())
                && !v.ty.is_string()
                && !v.ty.is_by_ref()
                && matches!(v.ty.size, 1 | 2 | 4 | 8);
            let string = (v.kind == DIFV_KIND_SCALAR || array.is_some()) && v.ty.is_string();
            let by_ref = ((v.kind == DIFV_KIND_SCALAR || array.is_some())
                && v.ty.is_by_ref()
                && !v.ty.is_string()
                && v.ty.size > 0
                && v.ty.size <= MAX_REF_SIZE)
                .then_some(v.ty.size);
            let name = o
                .string_at(v.name as usize)
                .map(|n| format!("{prefix}{}", String::from_utf8_lossy(n)))
                .unwrap_or_else(|| format!("{prefix}#{}", v.id));
            let key = (scope, v.id);
            match out.iter_mut().find(|t| t.key == key) {
                Some(t) => {
                    t.integer &= integer;
                    t.string &= string;
                    t.array = t.array.max(array);
                    t.by_ref = t.by_ref.filter(|n| by_ref == Some(*n));
                }
                None => out.push(ThreadVar {
                    key,
                    name,
                    integer,
                    string,
                    array,
                    by_ref,
                }),
            }
        }
    }
    if calls_strtok(e) {
        // The firing's strtok() state, a clause-local string no one named (see
        // `capture::kvars::STRTOK_STATE`): every clause calling strtok() shares it, so they run
        // on one path, never some in the kernel and some in dtrace.
        out.push(ThreadVar {
            key: STRTOK_KEY,
            name: STRTOK_STATE_NAME.into(),
            integer: false,
            string: true,
            array: None,
            by_ref: None,
        });
    }
    if super::speculation::uses_speculations(e) {
        out.push(ThreadVar {
            key: (Scope::Speculations, 0),
            name: super::speculation::SPECULATIONS.into(),
            integer: true,
            string: false,
            array: None,
            by_ref: None,
        });
    }
    out
}

fn clause_objects(e: &EcbDesc) -> impl Iterator<Item = &DifObject> {
    e.predicate
        .iter()
        .chain(e.actions.iter().filter_map(|a| a.difo.as_ref()))
}

/// What decides where a clause's thread-locals may live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClauseFacts {
    /// The clause's probe description.
    pub desc: String,
    /// The thread-locals it uses.
    pub vars: Vec<ThreadVar>,
    /// `Ok` when it can run whole in the kernel at every probe it matches, else why not.
    pub whole: std::result::Result<(), String>,
    /// It builds a record at the probe (see `capture::kagg`): it runs there only when every
    /// clause at its probes does, so one firing's records keep the clauses' order.
    pub records: bool,
    /// Its code can fault: it runs in the kernel only when no clause before it at its probes
    /// runs in dtrace, so its faults are reported in the clauses' order (see `capture::kagg`).
    pub faults: bool,
    /// The kernel probes it matches.
    pub probes: Vec<String>,
    /// It fires in dtrace before tracing starts or after it stops (`BEGIN`, `END`), when no
    /// clause runs in the kernel: the global scalars it shares with kernel clauses live in the
    /// kernel all the same, copied out of dtrace after `BEGIN` and back before `END`
    /// ([`KernelVarMaps::push_globals`], [`KernelVarMaps::pull_globals`]).
    pub bookend: bool,
}

impl ClauseFacts {
    /// Whether variable `v` of this clause may live in the kernel although the clause runs in
    /// dtrace: a global scalar or associative array of a `BEGIN` or `END` clause (copied
    /// between the two), or a
    /// clause-local of one (it lives for a firing, and no kernel clause shares its firings).
    fn shares_from_dtrace(&self, v: &ThreadVar) -> bool {
        self.bookend
            && (v.array.is_none() || v.key.0 == Scope::Global)
            && matches!(v.key.0, Scope::Global | Scope::Clause | Scope::Strtok)
            && v.not_kept().is_none()
    }
}

/// Where the thread-locals of the planned clauses live.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// The variables kept in the kernel.
    pub kernel: BTreeSet<VarKey>,
    /// Those of them that are associative arrays, with the most bytes of their tuples.
    pub arrays: BTreeMap<VarKey, usize>,
    /// Those of them that hold strings.
    pub strings: BTreeSet<VarKey>,
    /// The thread-locals and global scalars of every planned clause that hold `alloca()` or
    /// `copyin()` pointers ([`alloca_vars`]).
    pub alloca: BTreeSet<VarKey>,
    /// Those of them that are structs, unions or arrays, with their sizes.
    pub refs: BTreeMap<VarKey, u32>,
    /// Per clause: `None` when it uses no thread-local; `Ok` with the names of its variables
    /// when they live in the kernel (it runs there whole); else why they stay in dtrace.
    pub clauses: Vec<Option<std::result::Result<String, String>>>,
    /// Per `BEGIN` or `END` clause (by index) that shares globals with kernel clauses: their
    /// names (copied into the kernel after `BEGIN`, out of it before `END`).
    pub shared: BTreeMap<usize, String>,
    /// The probes where the firing's `strtok()` state lives in the kernel (`kernel` then holds
    /// [`STRTOK_KEY`]): every clause calling `strtok()` there runs in the kernel, at the others
    /// every one runs in dtrace.
    pub strtok: BTreeSet<String>,
    /// The clauses running whole in the kernel whose variables there all live for the firing
    /// (`this->`, the `strtok()` state) and that do not stop tracing: a firing may be handed
    /// over to dtrace whole past them (see `KernelAggClause::firing_vars`).
    pub firing_only: BTreeSet<usize>,
}

impl Placement {
    /// Whether clause `i` runs whole in the kernel for its variables.
    pub fn in_kernel(&self, i: usize) -> bool {
        matches!(self.clauses.get(i), Some(Some(Ok(_))))
    }

    /// Whether clause `i` keeps variables in the kernel that outlive a firing (see
    /// [`Placement::firing_only`]).
    pub fn keeps_lasting(&self, i: usize) -> bool {
        self.in_kernel(i) && !self.firing_only.contains(&i)
    }

    /// Whether variable `v` of a clause lives in the kernel at `probe` (its description as
    /// [`ClauseFacts::probes`] names it; `None`: at some probe, where the probe is not known).
    pub fn keeps(&self, v: &ThreadVar, probe: Option<&str>) -> bool {
        match (v.key == STRTOK_KEY, probe) {
            (true, Some(p)) => self.strtok.contains(p),
            _ => self.kernel.contains(&v.key),
        }
    }
}

/// `facts` with each clause's `strtok()` state ([`STRTOK_KEY`]) made one variable per probe
/// the clause matches ([`Scope::Strtok`], its id the probe's index in the names returned; one
/// [`STRTOK_ANY`] for a clause whose probes are not known): clauses at different probes never
/// share a firing, so the state of one probe may live in the kernel while another's stays in
/// dtrace.
fn strtok_per_probe(facts: &[ClauseFacts]) -> (Vec<ClauseFacts>, Vec<String>) {
    let names: Vec<String> = facts
        .iter()
        .filter(|c| c.vars.iter().any(|v| v.key == STRTOK_KEY))
        .flat_map(|c| c.probes.iter().cloned())
        .collect::<BTreeSet<String>>()
        .into_iter()
        .collect();
    let expanded = facts
        .iter()
        .map(|c| {
            let mut c = c.clone();
            if let Some(at) = c.vars.iter().position(|v| v.key == STRTOK_KEY) {
                let state = c.vars.remove(at);
                let ids = c
                    .probes
                    .iter()
                    .filter_map(|p| names.binary_search(p).ok())
                    .map(|i| i as u32)
                    .collect::<BTreeSet<u32>>();
                let ids = match ids.is_empty() {
                    true => vec![STRTOK_ANY],
                    false => ids.into_iter().collect(),
                };
                for (k, id) in ids.into_iter().enumerate() {
                    c.vars.insert(
                        at + k,
                        ThreadVar {
                            key: (Scope::Strtok, id),
                            ..state.clone()
                        },
                    );
                }
            }
            c
        })
        .collect();
    (expanded, names)
}

/// The key a variable of [`strtok_per_probe`]'s facts has in a [`Placement`] (and among the
/// clause-locals the limits count).
fn placed_key(k: VarKey) -> VarKey {
    match k.0 {
        Scope::Strtok => STRTOK_KEY,
        _ => k,
    }
}

/// Places the thread-locals of `facts` (every clause of the session, in planning order).
pub fn place(facts: &[ClauseFacts]) -> Placement {
    let (expanded, strtok_probes) = strtok_per_probe(facts);
    let facts = &expanded[..];
    // Variables kept in dtrace, with why.
    let mut dtrace: BTreeMap<VarKey, String> = BTreeMap::new();
    // Clause-locals of both kinds take stack slots: counted together as integers.
    let count = |scope: Scope, string: bool| {
        facts
            .iter()
            .flat_map(|c| &c.vars)
            .map(|v| (placed_key(v.key), v))
            .filter(|(k, v)| {
                k.0 == scope
                    && v.array.is_none()
                    && (v.string == string || (scope == Scope::Clause && !string))
            })
            .map(|(k, _)| k.1)
            .collect::<BTreeSet<u32>>()
            .len()
    };
    let too_many = [
        (
            Scope::Global,
            false,
            crate::capture::kvars::MAX_GLOBALS,
            "globals",
        ),
        (
            Scope::Global,
            true,
            crate::capture::kvars::MAX_STRING_GLOBALS,
            "string globals",
        ),
        (
            Scope::Clause,
            false,
            crate::capture::kvars::MAX_LOCALS,
            "clause-locals",
        ),
        (
            Scope::Clause,
            true,
            crate::capture::kvars::MAX_LOCAL_STRINGS,
            "clause-local strings",
        ),
    ]
    .into_iter()
    .filter(|&(scope, string, most, _)| count(scope, string) > most)
    .map(|(scope, string, most, what)| ((scope, string), format!("more than {most} {what}")))
    .collect::<BTreeMap<(Scope, bool), String>>();
    for c in facts {
        for v in &c.vars {
            if let Some(why) = v.not_kept() {
                dtrace.entry(v.key).or_insert(why);
            } else if v.array.is_some_and(|n| {
                crate::capture::kvars::key_size(n) >= crate::capture::kvars::MAX_KEY_SIZE
            }) {
                dtrace.entry(v.key).or_insert_with(|| {
                    format!(
                        "{}'s keys are larger than a kernel map's ({} bytes)",
                        v.name,
                        crate::capture::kvars::MAX_KEY_SIZE
                    )
                });
            } else if let Some(why) = [(placed_key(v.key).0, v.string), (Scope::Clause, false)]
                .iter()
                // A clause-local string counts among the clause-locals too.
                .take(if placed_key(v.key).0 == Scope::Clause {
                    2
                } else {
                    1
                })
                .find_map(|k| too_many.get(k))
                .filter(|_| v.array.is_none())
            {
                dtrace.entry(v.key).or_insert_with(|| why.clone());
            }
        }
    }
    loop {
        let mut changed = false;
        for c in facts {
            let why = match &c.whole {
                Err(why) => format!("clause {} runs in dtrace: {why}", c.desc),
                Ok(()) => match c.vars.iter().find(|v| dtrace.contains_key(&v.key)) {
                    Some(v) => format!(
                        "it shares {} with clause {}, which stays in dtrace",
                        v.name, c.desc
                    ),
                    None => match order_blocker(c, facts, &dtrace) {
                        Some((other, probe)) if c.records => format!(
                            "it records, and clause {} runs in dtrace at {probe} (records keep \
                             the clauses' order)",
                            other.desc
                        ),
                        Some((other, probe)) => format!(
                            "its code can fault, and clause {} before it runs in dtrace at \
                             {probe} (faults are reported in the clauses' order)",
                            other.desc
                        ),
                        None => continue,
                    },
                },
            };
            for v in c.vars.iter().filter(|v| !c.shares_from_dtrace(v)) {
                if let std::collections::btree_map::Entry::Vacant(e) = dtrace.entry(v.key) {
                    e.insert(why.clone());
                    changed = true;
                }
            }
        }
        // A clause that may fire at any probe and stays in dtrace keeps every probe's
        // strtok() state there.
        if let Some(why) = dtrace.get(&(Scope::Strtok, STRTOK_ANY)).cloned() {
            for id in 0..strtok_probes.len() as u32 {
                if let std::collections::btree_map::Entry::Vacant(e) =
                    dtrace.entry((Scope::Strtok, id))
                {
                    e.insert(why.clone());
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    let mut out = Placement::default();
    for c in facts {
        if c.vars.is_empty() {
            out.clauses.push(None);
            continue;
        }
        // The compiler's spill slots (`this->%spill0`...) are clause-locals no one named.
        let names = || {
            let named = |v: &&ThreadVar| !v.name.starts_with("this->%");
            let shown = match c.vars.iter().any(|v| named(&v)) {
                true => c.vars.iter().filter(named).collect::<Vec<_>>(),
                false => c.vars.iter().collect(),
            };
            // (The strtok() state of each probe, named once.)
            let mut names: Vec<&str> = Vec::new();
            for v in shown {
                if !names.contains(&v.name.as_str()) {
                    names.push(&v.name);
                }
            }
            names.join(", ")
        };
        let placed = match (&c.whole, c.vars.iter().find_map(|v| dtrace.get(&v.key))) {
            _ if c.vars.iter().any(|v| v.not_kept().is_some()) => Err(c
                .vars
                .iter()
                .find_map(ThreadVar::not_kept)
                .unwrap_or_default()),
            (Err(why), _) => Err(why.clone()),
            (Ok(()), Some(why)) => Err(why.clone()),
            (Ok(()), None) => {
                out.kernel.extend(c.vars.iter().map(|v| placed_key(v.key)));
                out.strings.extend(
                    c.vars
                        .iter()
                        .filter(|v| v.string)
                        .map(|v| placed_key(v.key)),
                );
                out.strtok.extend(
                    c.vars
                        .iter()
                        .filter(|v| v.key.0 == Scope::Strtok)
                        .filter_map(|v| strtok_probes.get(v.key.1 as usize).cloned()),
                );
                for v in &c.vars {
                    if let Some(n) = v.by_ref {
                        out.refs.insert(v.key, n);
                    }
                    if let Some(n) = v.array {
                        let most = out.arrays.entry(v.key).or_default();
                        *most = (*most).max(n);
                    }
                }
                Ok(names())
            }
        };
        out.clauses.push(Some(placed));
    }
    for (i, c) in facts.iter().enumerate().filter(|(_, c)| c.bookend) {
        let shared: Vec<&str> = c
            .vars
            .iter()
            .filter(|v| v.key.0 == Scope::Global && out.kernel.contains(&v.key))
            .map(|v| v.name.as_str())
            .collect();
        if !shared.is_empty() {
            out.shared.insert(i, shared.join(", "));
        }
    }
    out
}

/// For a clause `c` that records: another clause that runs in dtrace at one of its probes (its
/// translation fails, or a variable it uses stays in dtrace), and that probe; for a clause whose
/// code can fault, such a clause before it.
fn order_blocker<'a>(
    c: &ClauseFacts,
    facts: &'a [ClauseFacts],
    dtrace: &BTreeMap<VarKey, String>,
) -> Option<(&'a ClauseFacts, String)> {
    if !c.records && !c.faults {
        return None;
    }
    let at = facts.iter().position(|d| std::ptr::eq(d, c));
    facts
        .iter()
        .enumerate()
        .filter(|&(j, d)| !std::ptr::eq(d, c) && (c.records || at.is_some_and(|a| j < a)))
        .map(|(_, d)| d)
        .filter(|d| d.whole.is_err() || d.vars.iter().any(|v| dtrace.contains_key(&v.key)))
        .find_map(|d| {
            let shared = d.probes.iter().find(|p| c.probes.contains(p))?;
            Some((d, shared.clone()))
        })
}

/// Why clause `i` of `facts` (as [`place`] made `placement` of them) does not run whole in the
/// kernel at every probe it matches; `None` when it does.
pub fn kept_from_kernel(facts: &[ClauseFacts], i: usize, placement: &Placement) -> Option<String> {
    let (facts, strtok_probes) = strtok_per_probe(facts);
    let Some(c) = facts.get(i) else {
        return Some("not planned".into());
    };
    if let Err(why) = &c.whole {
        return Some(why.clone());
    }
    // Each probe's strtok() state lives where the placement put it.
    let kept = |v: &ThreadVar| match v.key {
        (Scope::Strtok, id) => strtok_probes
            .get(id as usize)
            .is_some_and(|p| placement.strtok.contains(p)),
        k => placement.kernel.contains(&k),
    };
    if let Some(v) = c.vars.iter().find(|v| !kept(v)) {
        return Some(format!("its variable {} stays in dtrace", v.name));
    }
    let dtrace: BTreeMap<VarKey, String> = facts
        .iter()
        .flat_map(|f| &f.vars)
        .filter(|v| !kept(v))
        .map(|v| (v.key, String::new()))
        .collect();
    order_blocker(c, &facts, &dtrace).map(|(d, probe)| {
        format!(
            "clause {} runs in dtrace at {probe}, where it fires too",
            d.desc
        )
    })
}

/// Whether `d` names `BEGIN` or `END` alone (`dtrace:::BEGIN`, `END`): probes that fire in
/// dtrace before the kernel's clauses start or after they stop (see [`ClauseFacts::bookend`]).
pub fn is_bookend(d: &dtrace_dif::program::ProbeDesc) -> bool {
    matches!(d.provider.as_str(), "" | "dtrace")
        && d.module.is_empty()
        && d.function.is_empty()
        && matches!(d.name.as_str(), "BEGIN" | "END")
}

/// Whether `d` names probes of the `dtrace` provider alone (`dtrace:::...`, or `BEGIN`, `END`,
/// `ERROR` alone): none of them reads the kernel's types.
pub fn names_dtrace_probes_only(d: &dtrace_dif::program::ProbeDesc) -> bool {
    d.provider == "dtrace"
        || d.provider.is_empty()
            && d.module.is_empty()
            && d.function.is_empty()
            && matches!(d.name.as_str(), "BEGIN" | "END" | "ERROR")
}

/// Why a clause of `e`'s description runs in dtrace whatever it does: its probes fire there
/// (`BEGIN`, `END`, `ERROR`, timers without perf events), or it may match some that do (a glob
/// or empty provider matching the `dtrace` provider's probes or a timer's). `None` for a
/// description whose probes [`kernel_probes`] can enumerate.
fn fires_elsewhere(d: &dtrace_dif::program::ProbeDesc, perf_profile: bool) -> Option<String> {
    let provider = d.provider.as_str();
    // `profile-N`/`tick-N`, named with their provider or alone.
    let timer = provider == "profile"
        || (provider.is_empty()
            && d.module.is_empty()
            && d.function.is_empty()
            && crate::catalog::profile::probe(&d.name).is_some());
    let in_dtrace = "its probes fire in dtrace (BEGIN, END, ERROR, and tick and profile without \
                     perf events)";
    if KERNEL_PROVIDERS.contains(&provider)
        || crate::catalog::fbt::is_provider(provider)
        || (timer && perf_profile)
        || (!crate::catalog::glob::has_meta(provider)
            && crate::catalog::pid::split_provider(provider).is_some())
    {
        return None;
    }
    if timer || super::fires_in_dtrace(provider, &d.name) {
        return Some(in_dtrace.into());
    }
    if !provider.is_empty() && !crate::catalog::glob::has_meta(provider) {
        return Some(format!(
            "its provider '{provider}' is not one whose probes fire in the kernel"
        ));
    }
    // A glob or empty provider: its probes are enumerated, unless it may match one that fires in
    // dtrace, or a timer's (which [`kernel_probes`] does not enumerate).
    let glob = crate::catalog::glob::matches;
    let unnamed = glob(&d.module, "") && glob(&d.function, "");
    let dtrace_probe = glob(provider, "dtrace")
        && unnamed
        && ["BEGIN", "END", "ERROR"].iter().any(|n| glob(&d.name, n));
    let timer_probe = glob(provider, "profile")
        && unnamed
        && (crate::catalog::glob::has_meta(&d.name)
            || crate::catalog::profile::probe(&d.name).is_some());
    if dtrace_probe {
        return Some(format!(
            "its provider description '{provider}' matches BEGIN, END or ERROR, which fire in \
             dtrace"
        ));
    }
    if timer_probe {
        return Some(format!(
            "its provider description '{provider}' may match profile or tick probes (name them \
             with their provider)"
        ));
    }
    None
}

/// The probes clause `e` fires at, each placed in the kernel by the capture session (tracepoints,
/// `fbt`, `pid` and USDT uprobes of the processes `user` reads, `profile`/`tick` perf events
/// when `perf_profile`), or why its clauses run in dtrace there. A glob or empty provider
/// (`syscall::read*:entry` is not one; `sys*::read:entry` and `::read:entry` are) matches the
/// kernel's probes known now; a per-process probe it matches later (a process's USDT probe) is
/// checked when it is enabled, where a clause whose variables live in the kernel runs whole or
/// the enabling fails saying why. A glob with a literal prefix (`myapp*`) also matches the USDT
/// probes placed on files for every process (see `file_usdt`), found now; one it matches in some
/// processes only (`myapp9*`), or a clause reading `probeprov` there, runs in dtrace.
pub(crate) fn kernel_probes(
    e: &EcbDesc,
    catalog: &Catalog,
    user: &mut super::user::UserProbes,
    perf_profile: bool,
) -> std::result::Result<Vec<Probe>, String> {
    let d = &e.probe;
    if let Some(why) = fires_elsewhere(d, perf_profile) {
        return Err(why);
    }
    let timer = d.provider.is_empty()
        && d.module.is_empty()
        && d.function.is_empty()
        && crate::catalog::profile::probe(&d.name).is_some();
    let provider = if timer {
        "profile"
    } else {
        d.provider.as_str()
    };
    let desc = crate::ProbeDesc::new(provider, &d.module, &d.function, &d.name);
    if crate::catalog::pid::split_provider(provider).is_some()
        && !crate::catalog::glob::has_meta(provider)
    {
        return user.matching(provider, &desc).map_err(|e| e.to_string());
    }
    let kernel = catalog.matching(&desc).map_err(|e| e.to_string());
    if !crate::catalog::glob::has_meta(provider)
        || super::file_usdt::glob_prefix(provider).is_empty()
    {
        return kernel;
    }
    // `myapp*`: the USDT probes of every process, placed on files (see `file_usdt`), besides
    // the kernel's probes it matches; none may be matched yet (-Z, processes started later).
    let files = user.file_probes_for(d);
    if let Some(f) = files.iter().find(|f| !f.matches_every_process(d)) {
        return Err(format!(
            "its description matches {} in some processes only",
            f.probe.desc
        ));
    }
    if !files.is_empty() && super::file_usdt::reads_probeprov(e) {
        return Err(
            "it reads probeprov, the firing process's provider, which only dtrace \
                    knows at a probe of every process"
                .into(),
        );
    }
    let mut probes = kernel.unwrap_or_default();
    probes.extend(files.into_iter().map(|f| f.probe));
    Ok(probes)
}

/// Whether clause `e` (planned as `plan`) can run whole in the kernel at each of `probes` (see
/// [`kernel_probes`]), its thread-locals `vars` kept there, comparing strings up to `strsize`:
/// `Ok` (with whether its code can fault), or why not.
pub fn runs_whole(
    e: &EcbDesc,
    plan: &std::result::Result<ClausePlan, String>,
    probes: &[Probe],
    vars: &[ThreadVar],
    alloca: &BTreeSet<VarKey>,
    (strsize, scratchsize): (u32, Option<u64>),
    (nspec, specsize): (u32, u64),
) -> std::result::Result<bool, String> {
    let plan = plan.as_ref().map_err(Clone::clone)?;
    // The maps' descriptors are not part of a translation.
    let specs = match vars.iter().any(|v| v.key.0 == Scope::Speculations) {
        false => None,
        true => match super::speculation::not_kept(nspec) {
            Some(why) => return Err(why),
            None => Some(crate::capture::spec::KernelSpecs {
                states: -1,
                fails: -1,
                nspec,
                specsize,
            }),
        },
    };
    let clause = KernelAggClause {
        predicate: e.predicate.clone(),
        // The maps' descriptors are not part of a translation.
        aggs: plan
            .aggs
            .iter()
            .map(|p| p.with_store(AggStore::unmade(p.keys.len())))
            .collect(),
        stores: plan.stores.clone(),
        record: plan.record.clone(),
        after_dtrace: false,
        string_args: Ok(Vec::new()),
        // A clause calling exit() at a kernel probe runs whole there or not at all (the kernel
        // stops its clauses itself; see `Shared::place_variables`): one that copies no string
        // in never hands a firing over to dtrace, so it builds its strings at the probe, like
        // one keeping variables.
        keeps_vars: !vars.is_empty() || (super::exits_at_kernel_probe(e) && !calls_copyinstr(e)),
        firing_vars: false,
        copy_scratch: plan.copy_scratch,
    };
    let arrays: BTreeMap<VarKey, usize> = vars
        .iter()
        .filter_map(|v| Some((v.key, v.array?)))
        .collect();
    let strings: BTreeSet<VarKey> = vars.iter().filter(|v| v.string).map(|v| v.key).collect();
    let refs: BTreeMap<VarKey, u32> = vars
        .iter()
        .filter_map(|v| Some((v.key, v.by_ref?)))
        .collect();
    let kv = with_alloca(
        kernel_vars_of(
            vars.iter().map(|v| v.key).collect(),
            (&arrays, &strings, &refs),
            [-1; 9],
            crate::capture::kvars::key_size(arrays.values().copied().max().unwrap_or(0)),
            strsize,
        ),
        alloca,
    );
    // Probes that read their context alike translate alike (a glob over a library's functions
    // or the kernel's has thousands): each shape is checked once, with the probe's names when
    // the clause reads them.
    let named = reads_probe_names(e);
    let mut checked = std::collections::HashSet::new();
    let mut faults = false;
    for p in probes {
        let names = p.names();
        let opaque = super::opaque_args(p);
        let shapes = crate::session::planning_shapes(&p.attach)
            .map_err(|why| format!("at {}: {why}", p.desc))?;
        for shape in shapes {
            let seen = format!(
                "{shape:?} {opaque:?} {}",
                if named {
                    p.desc.to_string()
                } else {
                    String::new()
                }
            );
            if !checked.insert(seen) {
                continue;
            }
            faults |= crate::capture::kagg::check_clause(
                &shape,
                &names,
                opaque,
                &kv,
                &clause,
                (strsize, scratchsize),
                specs,
            )
            .map_err(|why| format!("at {}: {why}", p.desc))?;
        }
    }
    Ok(faults)
}

/// What `-v` adds to the variables of a clause kept whole in the kernel that calls
/// `copyinstr()`: it cannot be handed over to dtrace (whose capture of a syscall's entry reads a
/// string again at its return), so it reads the string at the probe, as DTrace does.
pub const COPYINSTR_AT_PROBE: &str = "; copyinstr() reads at the probe, where a string on a \
    page not yet read in faults, as in DTrace";

/// What `-v` adds to the variables of a clause kept whole in the kernel that reads user memory
/// (`copyin()`, `copyinto()`, `copyinstr()`): like a string, the bytes are read at the probe,
/// where a page not yet read in faults, as in DTrace (dtrace's own capture retries a syscall
/// entry's copies at its return; a clause run whole at the probe does not wait for it).
pub fn reads_at_probe_note(e: &EcbDesc) -> Option<&'static str> {
    use dtrace_dif::subr::Subr;
    let copies = subr_calls(e).any(|s| matches!(s, Subr::Copyin | Subr::Copyinto));
    match (copies, calls_copyinstr(e)) {
        (false, false) => None,
        (false, true) => Some(COPYINSTR_AT_PROBE),
        (true, false) => Some(
            "; copyin() reads at the probe, where memory on a page not yet read in faults, \
             as in DTrace",
        ),
        (true, true) => Some(
            "; copyin() and copyinstr() read at the probe, where memory on a page not yet read \
             in faults, as in DTrace",
        ),
    }
}

/// The subroutines clause `e`'s code calls, once per call site.
fn subr_calls(e: &EcbDesc) -> impl Iterator<Item = dtrace_dif::subr::Subr> + '_ {
    clause_objects(e).flat_map(DifObject::subrs_called)
}

/// Whether clause `e` calls `copyinstr()`.
pub fn calls_copyinstr(e: &EcbDesc) -> bool {
    subr_calls(e).any(|s| s == dtrace_dif::subr::Subr::Copyinstr)
}

/// How many `copyin()` and `alloca()` calls clause `e`'s code makes: the interpreter takes
/// each from the clause's alloca area, so a copy sized at the probe is exact there only as the
/// clause's one allocation (see `ClausePlan::copy_scratch`).
pub fn scratch_allocations(e: &EcbDesc) -> usize {
    use dtrace_dif::subr::Subr;
    subr_calls(e)
        .filter(|s| matches!(s, Subr::Copyin | Subr::Alloca))
        .count()
}

/// How `-v` names the firing's `strtok()` state among a clause's variables.
pub const STRTOK_STATE_NAME: &str = "strtok()'s state";

/// Whether clause `e` calls `strtok()`.
pub fn calls_strtok(e: &EcbDesc) -> bool {
    subr_calls(e).any(|s| s == dtrace_dif::subr::Subr::Strtok)
}

/// Whether clause `e` reads `probeprov`, `probemod`, `probefunc`, `probename` or `errno`.
fn reads_probe_names(e: &EcbDesc) -> bool {
    use dtrace_dif::instr::Instr;
    use dtrace_dif::vars::{
        DIF_VAR_EPID, DIF_VAR_ERRNO, DIF_VAR_ID, DIF_VAR_PROBEFUNC, DIF_VAR_PROBEMOD,
        DIF_VAR_PROBENAME, DIF_VAR_PROBEPROV,
    };
    // (`errno` is read as the probe's `ProbeNames::syscall_return` says, `id` and `epid` as
    // its `ProbeNames::id` does.)
    clause_objects(e).flat_map(|o| &o.text).any(|w| {
        matches!(Instr::decode(*w), Ok(Instr::LoadVar { var, .. })
            if matches!(u32::from(var), DIF_VAR_PROBEPROV | DIF_VAR_PROBEMOD
                | DIF_VAR_PROBEFUNC | DIF_VAR_PROBENAME | DIF_VAR_ERRNO | DIF_VAR_ID
                | DIF_VAR_EPID))
    })
}

/// The probe's view of the variables `kernel` (`arrays` and `strings` among them), in the maps
/// `fds` (the dynamic variables, their drops, the globals, the key scratch, the string dynamic
/// variables, the clause-local strings) whose keys are `key_size` bytes, with strings of
/// `strsize` bytes (their storage, D's `strsize` and the NUL).
fn kernel_vars_of(
    kernel: BTreeSet<VarKey>,
    (arrays, strings, refs): (
        &BTreeMap<VarKey, usize>,
        &BTreeSet<VarKey>,
        &BTreeMap<VarKey, u32>,
    ),
    fds: [i32; 9],
    key_size: u32,
    strsize: u32,
) -> KernelVars {
    let of = |string: bool, array: bool| {
        kernel.iter().copied().filter(move |k| {
            !refs.contains_key(k)
                && strings.contains(k) == string
                && arrays.contains_key(k) == array
        })
    };
    let refs_of = |array: bool| {
        kernel
            .iter()
            .copied()
            .filter(move |k| refs.contains_key(k) && arrays.contains_key(k) == array)
    };
    KernelVars {
        map: fds[0],
        drops: fds[1],
        ids: ids_of(of(false, false), Scope::Thread),
        globals: fds[2],
        global_ids: ids_of(of(false, false), Scope::Global),
        local_ids: ids_of(of(false, false), Scope::Clause),
        thread_arrays: ids_of(of(false, true), Scope::Thread),
        global_arrays: ids_of(of(false, true), Scope::Global),
        keys: fds[3],
        key_size,
        // D's strsize (the storage less its NUL).
        strsize: strsize.saturating_sub(1),
        strings: crate::capture::spec::StringVars {
            map: fds[4],
            width: string_width(strsize),
            ids: ids_of(of(true, false), Scope::Thread),
            global_ids: ids_of(of(true, false), Scope::Global),
            thread_arrays: ids_of(of(true, true), Scope::Thread),
            global_arrays: ids_of(of(true, true), Scope::Global),
            local_ids: ids_of(of(true, false), Scope::Clause),
            locals: fds[5],
        },
        // See `with_alloca`.
        alloca_ids: Vec::new(),
        alloca_global_ids: Vec::new(),
        refs: crate::capture::spec::RefVars {
            map: fds[6],
            zeros: fds[7],
            size: ref_value_size(refs),
            ids: ids_of(refs_of(false), Scope::Thread),
            global_ids: ids_of(refs_of(false), Scope::Global),
            thread_arrays: ids_of(refs_of(true), Scope::Thread),
            global_arrays: ids_of(refs_of(true), Scope::Global),
            locals_of: ids_of(refs_of(false), Scope::Clause)
                .into_iter()
                .map(|id| (id, refs.get(&(Scope::Clause, id)).copied().unwrap_or(8)))
                .collect(),
            locals: fds[8],
        },
    }
}

/// `kv` with the variables among `alloca` (those holding alloca() pointers, see
/// [`alloca_vars`]) that it keeps, marked so.
fn with_alloca(mut kv: KernelVars, alloca: &BTreeSet<VarKey>) -> KernelVars {
    let of = |scope: Scope, kept: &[u32]| {
        ids_of(alloca.iter().copied(), scope)
            .into_iter()
            .filter(|id| kept.contains(id))
            .collect::<Vec<u32>>()
    };
    kv.alloca_ids = of(Scope::Thread, &kv.ids);
    kv.alloca_global_ids = of(Scope::Global, &kv.global_ids);
    kv
}

/// The thread-locals and global scalars that the clauses `clauses` (each its DIF objects)
/// point into `alloca()` or `copyin()` memory (`dtrace_ebpf::translate::alloca_vars`, until
/// nothing changes: a clause may copy a pointer another stores). The compiler keeps such a
/// variable to those pointers (`D_ALLOCA_INCOMPAT`), which the kernel keeps as the interpreter
/// does, so the two paths share them.
pub fn alloca_vars<'o>(clauses: impl IntoIterator<Item = Vec<&'o DifObject>>) -> BTreeSet<VarKey> {
    let clauses: Vec<Vec<&DifObject>> = clauses.into_iter().collect();
    let mut vars: Vec<(bool, u32)> = Vec::new();
    loop {
        let before = vars.len();
        for c in &clauses {
            vars = dtrace_ebpf::translate::alloca_vars(c.iter().copied(), &vars);
        }
        if vars.len() == before {
            break;
        }
    }
    vars.into_iter()
        .map(|(thread, id)| (if thread { Scope::Thread } else { Scope::Global }, id))
        .collect()
}

/// The sizes of the global struct variables `ids` among `refs`.
fn ref_sizes(refs: &BTreeMap<VarKey, u32>, ids: &[u32]) -> BTreeMap<u32, u32> {
    ids.iter()
        .filter_map(|&id| Some((id, *refs.get(&(Scope::Global, id))?)))
        .collect()
}

/// The most bytes of a struct variable kept in the kernel (a map value's).
pub const MAX_REF_SIZE: u32 = 4096;

/// Bytes of a value of the struct variables' map: the largest of `refs`, rounded up to 8.
fn ref_value_size(refs: &BTreeMap<VarKey, u32>) -> u32 {
    refs.values()
        .copied()
        .max()
        .unwrap_or(8)
        .next_multiple_of(8)
}

/// Bytes of a string variable's value in the kernel, for strings of `strsize` bytes (their
/// storage): the translator's string scratch slot.
fn string_width(strsize: u32) -> u32 {
    dtrace_ebpf::translate::string_scratch_width(strsize as usize) as u32
}

/// The ids of the variables of `scope` among `keys`, in order.
fn ids_of(keys: impl Iterator<Item = VarKey>, scope: Scope) -> Vec<u32> {
    keys.filter(|k| k.0 == scope)
        .map(|k| k.1)
        .collect::<BTreeSet<u32>>()
        .into_iter()
        .collect()
}

/// The kernel's map of dynamic variables (thread-locals and associative arrays), its drop
/// counter and key scratch, the map of string dynamic variables, and the globals' array.
pub struct KernelVarMaps {
    map: Map,
    drops: Map,
    globals: Map,
    keys: Map,
    strings: Option<Map>,
    /// The clause-local strings' per-CPU value, when there are any.
    local_strings: Option<Map>,
    /// The struct variables' hash map and its array of zeros, when there are any.
    refs: Option<(Map, Map)>,
    /// The struct clause-locals' per-CPU value, when there are any.
    ref_locals: Option<Map>,
    /// The struct global scalars and global arrays, by id, with their sizes (copied between
    /// dtrace and the kernel as the integers are).
    ref_globals: BTreeMap<u32, u32>,
    ref_arrays: BTreeMap<u32, u32>,
    /// Bytes of a value of the struct variables' map.
    ref_size: u32,
    key_size: u32,
    strsize: u32,
    global_ids: Vec<u32>,
    string_global_ids: Vec<u32>,
    /// The global associative arrays of integers, and of strings.
    int_arrays: Vec<u32>,
    string_arrays: Vec<u32>,
}

/// An element of a global associative array as dtrace holds it: the array's id, its tuple and
/// its value.
pub type ArrayElem = (u32, Vec<dtrace_dif::vm::KeyElem>, dtrace_dif::vm::Stored);

/// The elements of the global arrays `ids` in dtrace's variables `vars`.
pub fn array_elems(vars: &dtrace_dif::vm::VarState, ids: &BTreeSet<u32>) -> Vec<ArrayElem> {
    use dtrace_dif::vm::DynScope;
    vars.dynvars
        .iter()
        .filter(|(k, _)| k.scope() == DynScope::GlobalArray && ids.contains(&k.var()))
        .map(|(k, v)| (k.var(), k.elems(), v.clone()))
        .collect()
}

impl KernelVarMaps {
    /// Maps for `dynvarsize` bytes of dynamic variables of `entry` bytes each (0: 8-byte
    /// integers), keyed for the arrays of `placement` (strings of `strsize` bytes, their
    /// storage), and its globals.
    pub fn new(
        dynvarsize: u64,
        entry: u64,
        placement: &Placement,
        strsize: u32,
    ) -> Result<KernelVarMaps> {
        let kv = kernel_vars_of(
            placement.kernel.clone(),
            (&placement.arrays, &placement.strings, &placement.refs),
            [-1; 9],
            0,
            strsize,
        );
        let width = kv.strings.width;
        let entry = if entry == 0 { 8 } else { entry };
        let entries = dtrace_dif::vm::dynvar::capacity(dynvarsize, entry).min(1 << 20) as u32;
        let key_size =
            crate::capture::kvars::key_size(placement.arrays.values().copied().max().unwrap_or(0));
        let s = &kv.strings;
        let dynamic_strings =
            !(s.ids.is_empty() && s.thread_arrays.is_empty() && s.global_arrays.is_empty());
        Ok(KernelVarMaps {
            map: Map::create(
                MapKind::Hash,
                "dt_dvars",
                key_size,
                crate::capture::kvars::VALUE_SIZE,
                entries,
            )?,
            drops: Map::create(MapKind::PerCpuArray, "dt_dvar_drops", 4, 8, 1)?,
            globals: Map::create(
                MapKind::Array,
                "dt_globals",
                4,
                crate::capture::kvars::globals_size(kv.global_ids.len(), s.global_ids.len(), width),
                1,
            )?,
            keys: Map::create(MapKind::PerCpuArray, "dt_dvar_key", 4, key_size, 1)?,
            strings: match dynamic_strings {
                true => Some(Map::create(
                    MapKind::Hash,
                    "dt_dvars_str",
                    key_size,
                    width,
                    entries,
                )?),
                false => None,
            },
            refs: match placement.refs.is_empty() {
                true => None,
                false => {
                    let r = &kv.refs;
                    // Each global scalar takes an entry of its own, never freed.
                    let n = entries.saturating_add(r.global_ids.len() as u32);
                    Some((
                        Map::create(MapKind::Hash, "dt_dvars_ref", key_size, r.size, n)?,
                        Map::create(MapKind::Array, "dt_dvars_zero", 4, r.size, 1)?,
                    ))
                }
            },
            ref_locals: match crate::capture::kvars::ref_locals_size(&kv.refs) {
                0 => None,
                n => Some(Map::create(MapKind::PerCpuArray, "dt_locals_ref", 4, n, 1)?),
            },
            local_strings: match s.local_ids.len() {
                0 => None,
                n => Some(Map::create(
                    MapKind::PerCpuArray,
                    "dt_locals_str",
                    4,
                    (n.min(crate::capture::kvars::MAX_LOCAL_STRINGS) as u32) * width,
                    1,
                )?),
            },
            key_size,
            strsize,
            global_ids: kv.global_ids.clone(),
            string_global_ids: s.global_ids.clone(),
            int_arrays: kv.global_arrays.clone(),
            ref_globals: ref_sizes(&placement.refs, &kv.refs.global_ids),
            ref_arrays: ref_sizes(&placement.refs, &kv.refs.global_arrays),
            ref_size: kv.refs.size,
            string_arrays: s.global_arrays.clone(),
        })
    }

    /// The maps as the probe's code uses them at `probe` (its description as
    /// [`ClauseFacts::probes`] names it), for the variables of `placement` (the globals and the
    /// key size are those the maps were made for).
    pub fn kernel_vars(&self, placement: &Placement, probe: &str) -> KernelVars {
        let mut kernel = placement.kernel.clone();
        // The firing's strtok() state is the kernel's only at the probes placed so: elsewhere
        // the probe's clauses calling strtok() run in dtrace, and one translated here would
        // find none.
        if !placement.strtok.contains(probe) {
            kernel.remove(&STRTOK_KEY);
        }
        let mut kv = kernel_vars_of(
            kernel,
            (&placement.arrays, &placement.strings, &placement.refs),
            [
                self.map.raw_fd(),
                self.drops.raw_fd(),
                self.globals.raw_fd(),
                self.keys.raw_fd(),
                self.strings.as_ref().map_or(-1, Map::raw_fd),
                self.local_strings.as_ref().map_or(-1, Map::raw_fd),
                self.refs.as_ref().map_or(-1, |(m, _)| m.raw_fd()),
                self.refs.as_ref().map_or(-1, |(_, z)| z.raw_fd()),
                self.ref_locals.as_ref().map_or(-1, Map::raw_fd),
            ],
            self.key_size,
            self.strsize,
        );
        kv.global_ids = self.global_ids.clone();
        kv.strings.global_ids = self.string_global_ids.clone();
        with_alloca(kv, &placement.alloca)
    }

    /// The key of struct global `id` in the struct variables' map (see
    /// `capture::kvars::GLOBAL_REF`).
    fn ref_global_key(&self, id: u32) -> Vec<u8> {
        let mut key = vec![0u8; self.key_size as usize];
        key[4..8].copy_from_slice(&(id | crate::capture::kvars::GLOBAL_REF).to_ne_bytes());
        key
    }

    /// A struct variable's bytes `b` as a value of the struct variables' map.
    fn ref_value(&self, b: &[u8]) -> Vec<u8> {
        let size = self.ref_size as usize;
        let mut v = b[..b.len().min(size)].to_vec();
        v.resize(size, 0);
        v
    }

    /// Writes dtrace's values of the global scalars kept in the kernel into the kernel's: after
    /// `BEGIN` (which runs in dtrace) and before any clause runs in the kernel. A global never
    /// stored is zero or the empty string, as in the kernel; a string stored NULL sets its NULL
    /// flag; a string is cut to `strsize`, as a store in the kernel cuts it.
    pub fn push_globals(
        &self,
        value_of: impl Fn(u32) -> Option<dtrace_dif::vm::Stored>,
    ) -> Result<()> {
        use dtrace_dif::vm::Stored;
        if let Some((map, _)) = &self.refs {
            for &id in self.ref_globals.keys() {
                if let Some(Stored::Bytes(b)) = value_of(id) {
                    map.update(&self.ref_global_key(id), &self.ref_value(&b))?;
                }
            }
        }
        if self.global_ids.is_empty() && self.string_global_ids.is_empty() {
            return Ok(());
        }
        let width = string_width(self.strsize);
        let ints = self.global_ids.len();
        let mut value = vec![
            0u8;
            crate::capture::kvars::globals_size(ints, self.string_global_ids.len(), width)
                as usize
        ];
        for (i, &id) in self.global_ids.iter().enumerate() {
            if let Some(Stored::Int(v)) = value_of(id) {
                value[8 * i..8 * i + 8].copy_from_slice(&v.to_ne_bytes());
            }
        }
        let most = self.strsize.saturating_sub(1) as usize;
        for (j, &id) in self.string_global_ids.iter().enumerate() {
            let at = crate::capture::kvars::string_global_at(ints, j, width);
            match value_of(id) {
                Some(Stored::Int(_)) => value[at..at + 8].copy_from_slice(&1u64.to_ne_bytes()),
                Some(Stored::Bytes(b)) => {
                    let s = b.split(|&c| c == 0).next().unwrap_or_default();
                    let s = &s[..s.len().min(most)];
                    value[at + 8..at + 8 + s.len()].copy_from_slice(s);
                }
                None => {}
            }
        }
        self.globals.update(&0u32.to_ne_bytes(), &value)
    }

    /// Reads the kernel's global scalars into dtrace's: after the kernel's clauses stopped and
    /// before `END` (which runs in dtrace).
    pub fn pull_globals(&self, vars: &mut dtrace_dif::vm::VarState) -> Result<()> {
        use dtrace_dif::vm::Stored;
        if let Some((map, _)) = &self.refs {
            // A struct global the kernel never used keeps dtrace's value.
            for (&id, &size) in &self.ref_globals {
                if let Some(v) = map.lookup(&self.ref_global_key(id))? {
                    let n = (size as usize).min(v.len());
                    vars.set_global(id, Stored::Bytes(v[..n].into()));
                }
            }
        }
        if self.global_ids.is_empty() && self.string_global_ids.is_empty() {
            return Ok(());
        }
        let Some(value) = self.globals.lookup(&0u32.to_ne_bytes())? else {
            return Ok(());
        };
        let word = |at: usize| {
            value
                .get(at..at + 8)
                .and_then(|w| <[u8; 8]>::try_from(w).ok())
                .map_or(0, u64::from_ne_bytes)
        };
        for (i, &id) in self.global_ids.iter().enumerate() {
            vars.set_global(id, Stored::Int(word(8 * i)));
        }
        let width = string_width(self.strsize);
        let most = self.strsize.saturating_sub(1) as usize;
        for (j, &id) in self.string_global_ids.iter().enumerate() {
            let at = crate::capture::kvars::string_global_at(self.global_ids.len(), j, width);
            let stored = match word(at) {
                0 => {
                    let bytes = value.get(at + 8..).unwrap_or_default();
                    let s = bytes.split(|&c| c == 0).next().unwrap_or_default();
                    Stored::Bytes(s[..s.len().min(most)].into())
                }
                _ => Stored::Int(0),
            };
            vars.set_global(id, stored);
        }
        Ok(())
    }

    /// Writes the elements `elems` of global arrays (dtrace's, `BEGIN`'s: see
    /// [`array_elems`]) kept in the kernel into the kernel's maps, as [`Self::push_globals`]
    /// writes the scalars. An element whose key the kernel's keys cannot hold is left out; a
    /// string value is cut to `strsize`, as a store in the kernel cuts it.
    pub fn push_arrays(&self, elems: &[ArrayElem]) -> Result<()> {
        use dtrace_dif::vm::Stored;
        let most = self.strsize.saturating_sub(1);
        let width = string_width(self.strsize) as usize;
        for (id, tuple, value) in elems {
            if let (Some((map, _)), true, Stored::Bytes(b)) =
                (&self.refs, self.ref_arrays.contains_key(id), value)
            {
                if let Some(key) =
                    crate::capture::kvars::global_array_key(self.key_size, most, *id, tuple)
                {
                    map.update(&key, &self.ref_value(b))?;
                }
                continue;
            }
            let string = self.string_arrays.contains(id);
            if !string && !self.int_arrays.contains(id) {
                continue;
            }
            let Some(key) =
                crate::capture::kvars::global_array_key(self.key_size, most, *id, tuple)
            else {
                continue;
            };
            match (value, string, &self.strings) {
                (Stored::Int(v), false, _) if *v != 0 => self.map.update(&key, &v.to_ne_bytes())?,
                (Stored::Bytes(b), true, Some(m)) => {
                    let s = b.split(|&c| c == 0).next().unwrap_or_default();
                    let mut v = s[..s.len().min(most as usize)].to_vec();
                    v.resize(width, 0);
                    m.update(&key, &v)?
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Replaces dtrace's elements of the global arrays kept in the kernel by the kernel's:
    /// after the kernel's clauses stopped and before `END`, as [`Self::pull_globals`] does the
    /// scalars. `shapes`: per array, which elements of its tuple are strings (see
    /// [`dtrace_ebpf::translate::array_key_strings`]); an array without one is left alone.
    pub fn pull_arrays(
        &self,
        vars: &mut dtrace_dif::vm::VarState,
        shapes: &BTreeMap<u32, Vec<bool>>,
    ) -> Result<()> {
        use dtrace_dif::vm::{DynKey, DynScope, KeyElem, Stored};
        let most = self.strsize.saturating_sub(1);
        // (The third: the array's values are strings; the fourth, structs of this size.)
        let arrays: Vec<(u32, &Vec<bool>, bool, Option<u32>)> = self
            .int_arrays
            .iter()
            .map(|&id| (id, false, None))
            .chain(self.string_arrays.iter().map(|&id| (id, true, None)))
            .chain(self.ref_arrays.iter().map(|(&id, &n)| (id, false, Some(n))))
            .filter_map(|(id, string, r)| Some((id, shapes.get(&id)?, string, r)))
            .collect();
        if arrays.is_empty() {
            return Ok(());
        }
        let stale: Vec<DynKey> = vars
            .dynvars
            .iter()
            .filter(|(k, _)| {
                k.scope() == DynScope::GlobalArray && arrays.iter().any(|a| a.0 == k.var())
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in &stale {
            vars.dynvars.remove(k);
        }
        for (map, string, refs) in [
            (Some(&self.map), false, false),
            (self.strings.as_ref(), true, false),
            (self.refs.as_ref().map(|(m, _)| m), false, true),
        ] {
            let Some(map) = map else { continue };
            for key in map.keys()? {
                let Some((id, elems, size)) = arrays
                    .iter()
                    .filter(|a| a.2 == string && a.3.is_some() == refs)
                    .find_map(|&(id, shape, _, size)| {
                        crate::capture::kvars::global_array_elems(&key, most, id, shape)
                            .map(|e| (id, e, size))
                    })
                else {
                    continue;
                };
                let Some(value) = map.lookup(&key)? else {
                    continue;
                };
                let stored = if let Some(n) = size {
                    Stored::Bytes(value[..(n as usize).min(value.len())].into())
                } else if string {
                    let s = value.split(|&c| c == 0).next().unwrap_or_default();
                    Stored::Bytes(s[..s.len().min(most as usize)].into())
                } else {
                    let w = value.get(..8).and_then(|w| <[u8; 8]>::try_from(w).ok());
                    Stored::Int(w.map_or(0, u64::from_ne_bytes))
                };
                let mut k = DynKey::new(DynScope::GlobalArray, id, 0);
                for e in &elems {
                    match e {
                        KeyElem::Int(v) => k.push_int(*v),
                        KeyElem::Bytes(b) => k.push_bytes(b),
                    }
                }
                vars.dynvars.put(k, stored);
            }
        }
        Ok(())
    }

    /// Stores lost so far because the map was full (all CPUs).
    pub fn drops(&self) -> Result<u64> {
        Ok(self.drops.percpu_u64(0)?.iter().sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(id: u32, integer: bool) -> ThreadVar {
        ThreadVar {
            key: (Scope::Thread, id),
            name: format!("self->v{id}"),
            integer,
            string: false,
            array: None,
            by_ref: None,
        }
    }

    fn facts(vars: Vec<ThreadVar>, whole: std::result::Result<(), String>) -> ClauseFacts {
        ClauseFacts {
            desc: "syscall::read:entry".into(),
            vars,
            whole,
            records: false,
            faults: false,
            probes: vec!["syscall:vmlinux:read:entry".into()],
            bookend: false,
        }
    }

    #[test]
    fn a_variable_lives_in_the_kernel_only_when_every_clause_using_it_runs_there() {
        let p = place(&[
            facts(vec![var(1, true)], Ok(())),
            facts(vec![var(1, true)], Ok(())),
            facts(vec![var(2, true)], Ok(())),
            facts(vec![var(2, true), var(3, true)], Err("printf()".into())),
            facts(vec![var(3, true), var(4, true)], Ok(())),
            facts(vec![var(4, true)], Ok(())),
            facts(vec![var(5, false)], Ok(())),
            facts(vec![], Ok(())),
        ]);
        assert_eq!(p.kernel, BTreeSet::from([(Scope::Thread, 1)]));
        assert!(p.in_kernel(0) && p.in_kernel(1));
        // Variable 2 is shared with a clause in dtrace; 3 and 4 follow it transitively.
        for i in 2..7 {
            assert!(matches!(&p.clauses[i], Some(Err(_))), "clause {i}");
        }
        assert_eq!(p.clauses[7], None);
        let Some(Err(why)) = &p.clauses[6] else {
            unreachable!()
        };
        assert!(why.contains("neither an integer nor a string"), "{why}");
    }

    #[test]
    fn begin_and_end_share_their_global_scalars_with_kernel_clauses() {
        let global = |id: u32, string: bool| ThreadVar {
            key: (Scope::Global, id),
            name: format!("g{id}"),
            integer: !string,
            string,
            array: None,
            by_ref: None,
        };
        let at = |desc: &str, bookend: bool, vars: Vec<ThreadVar>| ClauseFacts {
            desc: desc.into(),
            vars,
            whole: Err("its probes fire in dtrace".into()),
            records: true,
            faults: false,
            probes: vec![],
            bookend,
        };
        let clause_local = ThreadVar {
            key: (Scope::Clause, 1),
            ..var(1, true)
        };
        let begin = at(
            "BEGIN",
            true,
            vec![
                global(1, false),
                global(2, true),
                var(3, true),
                clause_local,
            ],
        );
        let end = at("END", true, vec![global(1, false)]);
        let p = place(&[
            begin.clone(),
            facts(vec![global(1, false), global(2, true)], Ok(())),
            facts(vec![var(3, true)], Ok(())),
            end.clone(),
        ]);
        // The globals live in the kernel; BEGIN's thread-local (dtrace's own thread) does not.
        assert_eq!(
            p.kernel,
            BTreeSet::from([(Scope::Global, 1), (Scope::Global, 2)])
        );
        assert!(p.in_kernel(1) && !p.in_kernel(2) && !p.in_kernel(0));
        assert_eq!(p.shared.get(&0).map(String::as_str), Some("g1, g2"));
        assert_eq!(p.shared.get(&3).map(String::as_str), Some("g1"));
        // A global array BEGIN fills lives in the kernel too; a thread-local array of BEGIN's
        // (dtrace's own thread) keeps its kernel clauses in dtrace.
        let array = |key: VarKey| ThreadVar {
            key,
            name: format!("a{}", key.1),
            integer: true,
            string: false,
            array: Some(16),
            by_ref: None,
        };
        let p = place(&[
            at(
                "BEGIN",
                true,
                vec![array((Scope::Global, 4)), array((Scope::Thread, 5))],
            ),
            facts(vec![array((Scope::Global, 4))], Ok(())),
            facts(vec![array((Scope::Thread, 5))], Ok(())),
        ]);
        assert_eq!(p.kernel, BTreeSet::from([(Scope::Global, 4)]));
        assert_eq!(p.arrays.get(&(Scope::Global, 4)), Some(&16));
        assert!(p.in_kernel(1) && !p.in_kernel(2));
        assert_eq!(p.shared.get(&0).map(String::as_str), Some("a4"));
        // ERROR fires in dtrace while the kernel's clauses run: it shares nothing.
        let p = place(&[
            facts(vec![global(1, false)], Ok(())),
            at("ERROR", false, vec![global(1, false)]),
        ]);
        assert!(p.kernel.is_empty() && p.shared.is_empty(), "{p:?}");
        for (d, bookend) in [
            ("BEGIN", true),
            ("dtrace:::END", true),
            ("ERROR", false),
            ("dtrace:::BEG*", false),
            ("tick-1s", false),
        ] {
            let parts: Vec<&str> = d.split(':').collect();
            let desc = match parts.as_slice() {
                [p, m, f, n] => dtrace_dif::program::ProbeDesc {
                    provider: (*p).into(),
                    module: (*m).into(),
                    function: (*f).into(),
                    name: (*n).into(),
                },
                _ => dtrace_dif::program::ProbeDesc {
                    name: d.into(),
                    ..Default::default()
                },
            };
            assert_eq!(is_bookend(&desc), bookend, "{d}");
        }
    }

    #[test]
    fn a_recording_clause_runs_in_the_kernel_only_with_every_clause_at_its_probes() {
        let at = |probe: &str, vars: Vec<ThreadVar>, whole: std::result::Result<(), String>| {
            ClauseFacts {
                desc: probe.into(),
                vars,
                whole,
                records: true,
                faults: false,
                probes: vec![probe.into()],
                bookend: false,
            }
        };
        // Clause 1 prints in dtrace at write:return: clause 2, printing there too, keeps its
        // variable (and clause 0's) in dtrace; clause 3, alone at read:return, does not.
        let p = place(&[
            at("write:entry", vec![var(1, true), var(2, true)], Ok(())),
            at("write:return", vec![], Err("lltostr()".into())),
            at("write:return", vec![var(1, true)], Ok(())),
            at("read:return", vec![var(2, true)], Ok(())),
        ]);
        assert_eq!(p.kernel, BTreeSet::new());
        let Some(Err(why)) = &p.clauses[2] else {
            unreachable!()
        };
        assert!(why.contains("runs in dtrace at write:return"), "{why}");
        // No clause using self->v2 shares a probe with the one in dtrace.
        let p = place(&[
            at("write:entry", vec![var(2, true)], Ok(())),
            at("write:return", vec![], Err("lltostr()".into())),
            at("read:return", vec![var(2, true)], Ok(())),
        ]);
        assert_eq!(p.kernel, BTreeSet::from([(Scope::Thread, 2)]));
    }

    #[test]
    fn a_clause_that_can_fault_runs_in_the_kernel_only_before_clauses_in_dtrace() {
        let at =
            |vars: Vec<ThreadVar>, whole: std::result::Result<(), String>, faults| ClauseFacts {
                desc: "write:entry".into(),
                vars,
                whole,
                records: false,
                faults,
                probes: vec!["write:entry".into()],
                bookend: false,
            };
        // After the clause in dtrace: its fault would be reported before that clause's output.
        let p = place(&[
            at(vec![], Err("ustack()".into()), false),
            at(vec![var(1, true)], Ok(()), true),
        ]);
        assert_eq!(p.kernel, BTreeSet::new());
        let Some(Err(why)) = &p.clauses[1] else {
            unreachable!()
        };
        assert!(why.contains("its code can fault"), "{why}");
        // Before it, or unable to fault: in the kernel.
        for facts in [
            vec![
                at(vec![var(1, true)], Ok(()), true),
                at(vec![], Err("ustack()".into()), false),
            ],
            vec![
                at(vec![], Err("ustack()".into()), false),
                at(vec![var(1, true)], Ok(()), false),
            ],
        ] {
            assert_eq!(place(&facts).kernel, BTreeSet::from([(Scope::Thread, 1)]));
        }
    }

    #[test]
    fn every_clause_calling_strtok_shares_the_firings_state_and_runs_on_one_path() {
        let src = "syscall::read:entry { trace(strtok(\"a,b\", \",\")); } \
            syscall::read:entry { trace(strtok(NULL, \",\")); } \
            syscall::write:entry { trace(strtok(NULL, \",\")); } \
            syscall::read:entry { trace(arg0); }";
        let p = dtrace_compiler::compile(src, &dtrace_compiler::CompileOptions::default())
            .expect("compiles");
        let vars: Vec<Vec<ThreadVar>> = p.ecbs.iter().map(|e| thread_vars(e, 256)).collect();
        let state = (Scope::Clause, crate::capture::kvars::STRTOK_STATE);
        for v in &vars[..3] {
            assert_eq!(v.len(), 1, "{v:?}");
            assert_eq!((v[0].key, v[0].string), (state, true));
            assert_eq!(v[0].name, STRTOK_STATE_NAME);
        }
        assert!(vars[3].is_empty());
        // All run whole: the state lives in the kernel, a clause-local string of the firing.
        let all = place(
            &vars
                .iter()
                .map(|v| facts(v.clone(), Ok(())))
                .collect::<Vec<_>>(),
        );
        assert!(all.kernel.contains(&state) && all.strings.contains(&state));
        assert!((0..3).all(|i| all.in_kernel(i)), "{all:?}");
        // One in dtrace keeps every other there, saying which clause keeps them.
        let mut f: Vec<ClauseFacts> = vars.iter().map(|v| facts(v.clone(), Ok(()))).collect();
        f[1].whole = Err("subroutine strtoll() not yet translated to eBPF".into());
        f[1].desc = "syscall::read:entry #2".into();
        let one = place(&f);
        assert!(!one.kernel.contains(&state));
        for i in [0, 2] {
            let Some(Some(Err(why))) = one.clauses.get(i) else {
                panic!("clause {i}: {:?}", one.clauses.get(i));
            };
            assert_eq!(
                why,
                "clause syscall::read:entry #2 runs in dtrace: subroutine strtoll() not yet \
                 translated to eBPF"
            );
        }
    }

    /// A clause calling strtok() (and using `more` variables besides) at `probes`, named
    /// `desc`, that runs whole in the kernel or not.
    fn strtok_at(
        desc: &str,
        probes: &[&str],
        more: Vec<ThreadVar>,
        whole: std::result::Result<(), String>,
    ) -> ClauseFacts {
        let mut vars = vec![ThreadVar {
            key: STRTOK_KEY,
            name: STRTOK_STATE_NAME.into(),
            integer: false,
            string: true,
            array: None,
            by_ref: None,
        }];
        vars.extend(more);
        ClauseFacts {
            desc: desc.into(),
            vars,
            whole,
            records: false,
            faults: false,
            probes: probes.iter().map(|p| p.to_string()).collect(),
            bookend: false,
        }
    }

    #[test]
    fn the_strtok_state_is_placed_per_probe() {
        let no = || Err::<(), String>("subroutine strtoll() not yet translated to eBPF".into());
        let f = vec![
            strtok_at("a1", &["A"], vec![], Ok(())),
            strtok_at("a2", &["A"], vec![], no()),
            strtok_at("b1", &["B"], vec![], Ok(())),
            strtok_at("b2", &["B"], vec![], Ok(())),
        ];
        let p = place(&f);
        // A's clauses stay in dtrace with the one that cannot run there; B's run in the kernel.
        assert!(!p.in_kernel(0) && !p.in_kernel(1), "{p:?}");
        assert!(p.in_kernel(2) && p.in_kernel(3), "{p:?}");
        assert_eq!(p.strtok, BTreeSet::from(["B".to_string()]));
        assert!(p.kernel.contains(&STRTOK_KEY) && p.strings.contains(&STRTOK_KEY));
        assert_eq!(
            p.clauses[0],
            Some(Err(
                "clause a2 runs in dtrace: subroutine strtoll() not yet translated to eBPF".into()
            ))
        );
        assert_eq!(p.clauses[2], Some(Ok(STRTOK_STATE_NAME.into())));
        let state = &f[0].vars[0];
        assert!(!p.keeps(state, Some("A")) && p.keeps(state, Some("B")));
        // Where the probe is not known, at some probe.
        assert!(p.keeps(state, None));
        for i in [0, 1] {
            assert!(kept_from_kernel(&f, i, &p).is_some());
        }
        for i in [2, 3] {
            assert_eq!(kept_from_kernel(&f, i, &p), None);
        }
        // The state of every probe in dtrace: none in the kernel.
        let p = place(&f[..2]);
        assert!(
            p.strtok.is_empty() && !p.kernel.contains(&STRTOK_KEY),
            "{p:?}"
        );
    }

    #[test]
    fn a_clause_at_several_probes_joins_their_strtok_states() {
        let no = || Err::<(), String>("ustack()".into());
        // ab stays in dtrace: A's and B's states with it; bc fires at B too, so C's follows;
        // d and the clauses at E alone are not touched.
        let f = vec![
            strtok_at("ab", &["A", "B"], vec![], no()),
            strtok_at("bc", &["B", "C"], vec![], Ok(())),
            strtok_at("c", &["C"], vec![], Ok(())),
            strtok_at("d", &["D", "E"], vec![], Ok(())),
            strtok_at("e", &["E"], vec![], Ok(())),
        ];
        let p = place(&f);
        assert_eq!(
            (0..5).map(|i| p.in_kernel(i)).collect::<Vec<_>>(),
            [false, false, false, true, true],
            "{p:?}"
        );
        assert_eq!(p.strtok, BTreeSet::from(["D".to_string(), "E".to_string()]));
        assert_eq!(
            p.clauses[2],
            Some(Err(
                "it shares strtok()'s state with clause bc, which stays in dtrace".into()
            ))
        );
        // A clause at two probes names the state once.
        assert_eq!(p.clauses[3], Some(Ok(STRTOK_STATE_NAME.into())));
        // Another variable links probes too: c uses self->v1 with a clause at D.
        let mut f = f;
        f[2].vars.push(var(1, true));
        f[4].vars.push(var(1, true));
        let p = place(&f);
        assert!((0..5).all(|i| !p.in_kernel(i)), "{p:?}");
        assert!(p.strtok.is_empty());
    }

    #[test]
    fn a_strtok_clause_whose_probes_are_not_known_keeps_every_probes_state_in_dtrace() {
        // Its description may match any probe (a glob of providers, say): it shares the
        // state of each.
        let f = vec![
            strtok_at("a", &["A"], vec![], Ok(())),
            strtok_at(
                ":::entry",
                &[],
                vec![],
                Err("its provider is a glob".into()),
            ),
            strtok_at("b", &["B"], vec![], Ok(())),
        ];
        let p = place(&f);
        assert!((0..3).all(|i| !p.in_kernel(i)), "{p:?}");
        assert!(p.strtok.is_empty() && !p.kernel.contains(&STRTOK_KEY));
        // BEGIN and END fire in dtrace before and after every kernel clause: theirs does not.
        let mut f = f;
        f[1].bookend = true;
        f[1].desc = "BEGIN".into();
        let p = place(&f);
        assert!(p.in_kernel(0) && !p.in_kernel(1) && p.in_kernel(2), "{p:?}");
        assert_eq!(p.strtok, BTreeSet::from(["A".to_string(), "B".to_string()]));
    }

    #[test]
    fn the_strtok_states_of_many_probes_count_as_one_clause_local_string() {
        use crate::capture::kvars::MAX_LOCAL_STRINGS;
        let names: Vec<String> = (0..MAX_LOCAL_STRINGS + 2)
            .map(|i| format!("P{i}"))
            .collect();
        let probes: Vec<&str> = names.iter().map(String::as_str).collect();
        // Clause-local strings: every one the limit allows, the state among them.
        let locals = (0..MAX_LOCAL_STRINGS as u32 - 1)
            .map(|i| ThreadVar {
                key: (Scope::Clause, dtrace_dif::vars::DIF_VAR_OTHER_UBASE + i),
                name: format!("this->s{i}"),
                integer: false,
                string: true,
                array: None,
                by_ref: None,
            })
            .collect();
        let f = vec![
            strtok_at("all", &probes, locals, Ok(())),
            strtok_at("one", &probes[..1], vec![], Ok(())),
        ];
        let p = place(&f);
        assert!(p.in_kernel(0) && p.in_kernel(1), "{p:?}");
        assert_eq!(p.strtok.len(), probes.len());
    }

    #[test]
    fn associative_arrays_of_integers_are_placed_with_their_longest_tuple() {
        let src = "syscall::read:entry { a[arg0, 1] = 1; self->t[arg0] = a[1, 2, 3]; \
            s[\"k\"] = \"v\"; }";
        let p = dtrace_compiler::compile(src, &dtrace_compiler::CompileOptions::default());
        // `a` is declared with two keys by its first use: three is a compile error.
        assert!(p.is_err());
        let src = "syscall::read:entry { a[arg0, 1] = 1; self->t[arg0] = a[1, 2]; \
            s[arg0] = \"v\"; }";
        let p = dtrace_compiler::compile(src, &dtrace_compiler::CompileOptions::default())
            .expect("compiles");
        let vars = thread_vars(&p.ecbs[0], 256);
        let by_name = |n: &str| vars.iter().find(|v| v.name == n).cloned();
        let a = by_name("a").expect("a");
        assert_eq!(
            (a.key.0, a.integer, a.array),
            (Scope::Global, true, Some(16))
        );
        let t = by_name("self->t").expect("self->t");
        assert_eq!(
            (t.key.0, t.integer, t.array),
            (Scope::Thread, true, Some(8))
        );
        // An array of strings stays in dtrace (for now).
        assert!(!by_name("s").expect("s").integer);
        let f = facts(vec![a.clone(), t.clone()], Ok(()));
        let placed = place(&[f]);
        assert_eq!(
            placed.arrays,
            BTreeMap::from([(a.key, 16), (t.key, 8)]),
            "{placed:?}"
        );
        let kv = kernel_vars_of(
            placed.kernel.clone(),
            (&placed.arrays, &placed.strings, &placed.refs),
            [-1; 9],
            24,
            257,
        );
        assert!(kv.ids.is_empty() && kv.global_ids.is_empty());
        assert_eq!((kv.thread_arrays.len(), kv.global_arrays.len()), (1, 1));
    }
}

#[cfg(test)]
mod string_tests {
    use super::*;

    #[test]
    fn string_variables_are_placed_clause_locals_too() {
        let src = "string g; syscall::read:entry { self->p = copyinstr(arg1); f[pid] = execname; \
            g = \"x\"; this->s = execname; n[execname] = 1; }";
        let p = dtrace_compiler::compile(src, &dtrace_compiler::CompileOptions::default())
            .expect("compiles");
        let vars = thread_vars(&p.ecbs[0], 256);
        let by_name = |n: &str| vars.iter().find(|v| v.name == n).cloned().expect(n);
        for n in ["self->p", "f", "g", "this->s"] {
            let v = by_name(n);
            assert!(v.string && !v.integer && v.not_kept().is_none(), "{v:?}");
        }
        // An integer array keyed by a string is an integer.
        assert!(by_name("n").integer);
        // The clause runs whole with its strings in the kernel.
        let facts = ClauseFacts {
            desc: "syscall::read:entry".into(),
            vars: vars.clone(),
            whole: Ok(()),
            records: false,
            faults: false,
            probes: vec!["syscall:vmlinux:read:entry".into()],
            bookend: false,
        };
        let placed = place(std::slice::from_ref(&facts));
        assert!(placed.in_kernel(0), "{placed:?}");
        assert_eq!(placed.strings.len(), 4, "{placed:?}");
        let kv = kernel_vars_of(
            placed.kernel.clone(),
            (&placed.arrays, &placed.strings, &placed.refs),
            [-1; 9],
            24,
            257,
        );
        assert_eq!(kv.strsize, 256);
        assert_eq!(kv.strings.width, 264);
        assert_eq!(
            (
                kv.strings.ids.len(),
                kv.strings.global_ids.len(),
                kv.strings.global_arrays.len(),
                kv.strings.local_ids.len(),
            ),
            (1, 1, 1, 1)
        );
        assert_eq!(kv.global_arrays.len(), 1, "n[] holds integers");
        // More clause-local strings than the kernel keeps: they stay in dtrace, saying why.
        let locals: Vec<ThreadVar> = (0..=crate::capture::kvars::MAX_LOCAL_STRINGS as u32)
            .map(|i| ThreadVar {
                key: (Scope::Clause, dtrace_dif::vars::DIF_VAR_OTHER_UBASE + i),
                name: format!("this->s{i}"),
                ..by_name("this->s")
            })
            .collect();
        let placed = place(&[ClauseFacts {
            vars: locals,
            ..facts
        }]);
        assert!(placed.kernel.is_empty());
        let Some(Some(Err(why))) = placed.clauses.first() else {
            unreachable!()
        };
        assert!(why.contains("more than 8 clause-local strings"), "{why}");
    }
}

#[cfg(test)]
mod shared_globals_tests {
    use super::*;
    use dtrace_dif::vm::{Stored, VarState};

    #[test]
    fn globals_copied_into_the_kernel_come_back_as_they_went() {
        if !dtrace_testkit::skip_unless(
            crate::bpf_available(),
            "globals_copied_into_the_kernel_come_back_as_they_went",
            "needs bpf(2)",
        ) {
            return;
        }
        let ub = dtrace_dif::vars::DIF_VAR_OTHER_UBASE;
        let placement = Placement {
            kernel: BTreeSet::from([
                (Scope::Global, ub),
                (Scope::Global, ub + 1),
                (Scope::Global, ub + 2),
                (Scope::Global, ub + 3),
                (Scope::Global, ub + 4),
                (Scope::Global, ub + 5),
            ]),
            strings: BTreeSet::from([
                (Scope::Global, ub + 2),
                (Scope::Global, ub + 3),
                (Scope::Global, ub + 4),
                (Scope::Global, ub + 5),
            ]),
            ..Placement::default()
        };
        // strsize 9: eight characters and the NUL.
        let maps = KernelVarMaps::new(1 << 16, 0, &placement, 9).expect("maps");
        let mut dtrace = VarState::default();
        dtrace.set_global(ub, Stored::Int(7));
        // ub + 1 never stored: 0.
        dtrace.set_global(ub + 2, Stored::Bytes((*b"hello").into()));
        dtrace.set_global(ub + 3, Stored::Int(0));
        dtrace.set_global(ub + 4, Stored::Bytes((*b"0123456789").into()));
        // ub + 5 never stored: the empty string.
        maps.push_globals(|id| dtrace.global(id).cloned())
            .expect("push");
        let mut back = VarState::default();
        maps.pull_globals(&mut back).expect("pull");
        let got = |id: u32| back.global(id).cloned();
        assert_eq!(got(ub), Some(Stored::Int(7)));
        assert_eq!(got(ub + 1), Some(Stored::Int(0)));
        assert_eq!(got(ub + 2), Some(Stored::Bytes((*b"hello").into())));
        // NULL stays NULL; a string is cut to strsize, as a store in the kernel cuts it.
        assert_eq!(got(ub + 3), Some(Stored::Int(0)));
        assert_eq!(got(ub + 4), Some(Stored::Bytes((*b"01234567").into())));
        assert_eq!(got(ub + 5), Some(Stored::Bytes(Box::default())));
    }

    #[test]
    fn global_arrays_copied_into_the_kernel_come_back_as_they_went() {
        use dtrace_dif::vm::{DynKey, DynScope, KeyElem};
        if !dtrace_testkit::skip_unless(
            crate::bpf_available(),
            "global_arrays_copied_into_the_kernel_come_back_as_they_went",
            "needs bpf(2)",
        ) {
            return;
        }
        let ub = dtrace_dif::vars::DIF_VAR_OTHER_UBASE;
        // ub: integers keyed by (string, integer); ub + 1: strings keyed by an integer.
        let (ints, strs) = ((Scope::Global, ub), (Scope::Global, ub + 1));
        let placement = Placement {
            kernel: BTreeSet::from([ints, strs]),
            strings: BTreeSet::from([strs]),
            arrays: BTreeMap::from([(ints, 24), (strs, 8)]),
            ..Placement::default()
        };
        // strsize 9: eight characters and the NUL.
        let maps = KernelVarMaps::new(1 << 16, 0, &placement, 9).expect("maps");
        let key = |id: u32, elems: &[KeyElem]| {
            let mut k = DynKey::new(DynScope::GlobalArray, id, 0);
            for e in elems {
                match e {
                    KeyElem::Int(v) => k.push_int(*v),
                    KeyElem::Bytes(b) => k.push_bytes(b),
                }
            }
            k
        };
        let s = |b: &[u8]| KeyElem::Bytes(b.into());
        let mut dtrace = VarState::default();
        dtrace
            .dynvars
            .put(key(ub, &[s(b"a"), KeyElem::Int(1)]), Stored::Int(5));
        dtrace
            .dynvars
            .put(key(ub, &[s(b"bb"), KeyElem::Int(2)]), Stored::Int(6));
        dtrace.dynvars.put(
            key(ub + 1, &[KeyElem::Int(3)]),
            Stored::Bytes((*b"0123456789").into()),
        );
        // A thread-local of dtrace's and another array are not copied.
        dtrace
            .dynvars
            .put(DynKey::new(DynScope::ThreadScalar, ub, 1), Stored::Int(9));
        let elems = array_elems(&dtrace, &BTreeSet::from([ub, ub + 1]));
        assert_eq!(elems.len(), 3, "{elems:?}");
        maps.push_arrays(&elems).expect("push");
        // END's view: what dtrace held of the arrays before is replaced.
        let mut back = VarState::default();
        back.dynvars
            .put(key(ub, &[s(b"old"), KeyElem::Int(0)]), Stored::Int(1));
        let shapes = BTreeMap::from([(ub, vec![true, false]), (ub + 1, vec![false])]);
        maps.pull_arrays(&mut back, &shapes).expect("pull");
        let got = |k: DynKey| back.dynvars.get(&k).cloned();
        assert_eq!(
            got(key(ub, &[s(b"a"), KeyElem::Int(1)])),
            Some(Stored::Int(5))
        );
        assert_eq!(
            got(key(ub, &[s(b"bb"), KeyElem::Int(2)])),
            Some(Stored::Int(6))
        );
        assert_eq!(got(key(ub, &[s(b"old"), KeyElem::Int(0)])), None);
        // A string is cut to strsize, as a store in the kernel cuts it.
        assert_eq!(
            got(key(ub + 1, &[KeyElem::Int(3)])),
            Some(Stored::Bytes((*b"01234567").into()))
        );
        assert_eq!(back.dynvars.len(), 3);
    }
}

#[cfg(test)]
mod glob_tests {
    use super::fires_elsewhere;
    use dtrace_dif::program::ProbeDesc;

    fn desc(p: &str, m: &str, f: &str, n: &str) -> ProbeDesc {
        ProbeDesc {
            provider: p.into(),
            module: m.into(),
            function: f.into(),
            name: n.into(),
        }
    }

    #[test]
    fn glob_and_empty_providers_are_enumerated_unless_they_reach_dtrace_probes() {
        // Enumerated by the catalog (their probes are placed like a named provider's).
        for d in [
            desc("sysc*", "", "read", "entry"),
            desc("", "", "read", "entry"),
            desc("", "", "", "tick-1s"),
            desc("syscall", "", "read*", "entry"),
        ] {
            assert_eq!(fires_elsewhere(&d, true), None, "{d:?}");
        }
        // BEGIN, END and ERROR fire in dtrace; a glob over the timers' names is not enumerated.
        for d in [
            desc("", "", "", "BEGIN"),
            desc("*", "", "", "E*"),
            desc("d*", "", "", ""),
            desc("*", "", "", "tick-1s"),
            desc("", "", "", "tick-1s"),
        ] {
            assert!(fires_elsewhere(&d, false).is_some(), "{d:?}");
        }
        let why = fires_elsewhere(&desc("*", "", "", "E*"), true).unwrap();
        assert!(why.contains("BEGIN, END or ERROR"), "{why}");
        let why = fires_elsewhere(&desc("p*", "", "", "profile-97"), true).unwrap();
        assert!(why.contains("profile or tick"), "{why}");
    }
}

#[cfg(test)]
mod struct_tests {
    use super::*;

    fn facts(src: &str, bookend: bool) -> Vec<ClauseFacts> {
        let p = dtrace_compiler::compile(src, &dtrace_compiler::CompileOptions::default())
            .expect("compiles");
        p.ecbs
            .iter()
            .enumerate()
            .map(|(i, e)| ClauseFacts {
                desc: format!("clause {i}"),
                vars: thread_vars(e, 256),
                whole: match bookend && i == 1 {
                    true => Err("END fires in dtrace".into()),
                    false => Ok(()),
                },
                records: false,
                faults: false,
                probes: vec!["syscall:vmlinux:read:entry".into()],
                bookend: bookend && i == 1,
            })
            .collect()
    }

    #[test]
    fn struct_variables_are_placed_in_their_own_map() {
        let src = "struct s { int a; long b[2]; }; struct s g; self struct s v; \
            struct s c[int]; this struct s t; \
            syscall::read:entry { g.a = 1; self->v.a = 2; c[1].b[1] = 3; } \
            syscall::read:entry { this->t.a = 4; }";
        let f = facts(src, false);
        let by_name = |n: &str| {
            f.iter()
                .flat_map(|c| &c.vars)
                .find(|v| v.name == n)
                .cloned()
                .expect(n)
        };
        for n in ["g", "self->v", "c"] {
            let v = by_name(n);
            assert_eq!(v.by_ref, Some(24), "{v:?}");
            assert!(v.not_kept().is_none() && !v.integer && !v.string, "{v:?}");
        }
        assert!(by_name("this->t").not_kept().is_none());
        let placed = place(&f);
        assert!(placed.in_kernel(0) && placed.in_kernel(1), "{placed:?}");
        assert_eq!(placed.refs.len(), 4, "{placed:?}");
        let kv = kernel_vars_of(
            placed.kernel.clone(),
            (&placed.arrays, &placed.strings, &placed.refs),
            [-1; 9],
            24,
            257,
        );
        // Not among the integers: the struct map holds them, each value 24 bytes.
        assert!(kv.ids.is_empty() && kv.global_ids.is_empty() && kv.global_arrays.is_empty());
        assert_eq!(kv.refs.size, 24);
        assert_eq!(kv.refs.locals_of, [(0x500, 24)]);
        assert_eq!(
            (
                kv.refs.ids.len(),
                kv.refs.global_ids.len(),
                kv.refs.global_arrays.len()
            ),
            (1, 1, 1)
        );
    }

    #[test]
    fn a_struct_global_an_end_clause_uses_is_shared_with_it() {
        let src = "struct s { int a; }; struct s g; \
            syscall::read:entry { g.a = 1; } END { trace(g.a); }";
        let placed = place(&facts(src, true));
        assert!(placed.in_kernel(0), "{placed:?}");
        assert_eq!(placed.refs.len(), 1, "{placed:?}");
        assert_eq!(
            placed.shared.get(&1).map(String::as_str),
            Some("g"),
            "{placed:?}"
        );
    }
}
