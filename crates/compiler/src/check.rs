//! The checker's state ("cooking" in DTrace's vocabulary): variable scopes (global, `self->`,
//! `this->`), aggregations, inlines, enum constants, the format table and pragma options, and the
//! per-clause driver that cooks a clause's predicate and statements into typed expressions and planned
//! actions. Expression rules are in [`crate::check_expr`], actions in [`crate::check_action`],
//! declarations in [`crate::check_decl`].

use std::collections::HashMap;

use dtrace_dif::program::{ActionKind, ProbeDesc};

use crate::ast::{Clause, Stmt, VarScope};
use crate::error::{CResult, CompileError, ErrTag};
use crate::options::CompileOptions;
use crate::tree::TExpr;
use crate::types::{Basic, TypeId, TypeTable};
use dtrace_dif::vars::DIF_VAR_OTHER_UBASE;

/// A user variable as the checker knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct VarInfo {
    pub id: u32,
    /// Type, once declared or assigned.
    pub ty: Option<TypeId>,
    /// Associative array with this key signature (once known).
    pub keys: Option<Vec<TypeId>>,
    pub array: bool,
    /// Whether it holds alloca pointers (`Some(true)`) or other pointers, once assigned one.
    pub alloca: Option<bool>,
}

/// One namespace of user variables.
#[derive(Debug, Clone, Default)]
pub struct VarTable {
    pub vars: HashMap<String, VarInfo>,
    next: u32,
    order: Vec<String>,
}

impl VarTable {
    /// An empty table whose first variable takes id `DIF_VAR_OTHER_UBASE + next` (clause-locals
    /// of a later program on the same handle).
    pub fn starting_at(next: u32) -> VarTable {
        VarTable {
            next,
            ..VarTable::default()
        }
    }

    /// The index the next variable created takes (its id less `DIF_VAR_OTHER_UBASE`).
    pub fn next_index(&self) -> u32 {
        self.next
    }

    /// A point to roll back to.
    pub fn mark(&self) -> usize {
        self.order.len()
    }

    /// Forgets the variables created since `mark`.
    pub fn rollback(&mut self, mark: usize) {
        for n in self.order.drain(mark..) {
            self.vars.remove(&n);
            self.next -= 1;
        }
    }

    /// Creates `name` (scalar or array) with the next id.
    pub fn create(&mut self, name: &str, array: bool, line: u32, scope: &str) -> CResult<VarInfo> {
        if self.next >= 0xffff - DIF_VAR_OTHER_UBASE {
            return Err(CompileError::new(
                ErrTag::D_ID_OFLOW,
                line,
                format!("cannot create {name}: limit on number of {scope} variables exceeded"),
            ));
        }
        let v = VarInfo {
            id: DIF_VAR_OTHER_UBASE + self.next,
            ty: None,
            keys: None,
            array,
            alloca: None,
        };
        self.next += 1;
        self.vars.insert(name.to_string(), v.clone());
        self.order.push(name.to_string());
        Ok(v)
    }
}

/// The aggregating functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggFunc {
    Count,
    Sum,
    Avg,
    Min,
    Max,
    Stddev,
    Quantize,
    Lquantize,
    Llquantize,
}

impl AggFunc {
    /// Name.
    pub fn name(self) -> &'static str {
        match self {
            AggFunc::Count => "count",
            AggFunc::Sum => "sum",
            AggFunc::Avg => "avg",
            AggFunc::Min => "min",
            AggFunc::Max => "max",
            AggFunc::Stddev => "stddev",
            AggFunc::Quantize => "quantize",
            AggFunc::Lquantize => "lquantize",
            AggFunc::Llquantize => "llquantize",
        }
    }

    /// The action kind.
    pub fn kind(self) -> ActionKind {
        match self {
            AggFunc::Count => ActionKind::AggCount,
            AggFunc::Sum => ActionKind::AggSum,
            AggFunc::Avg => ActionKind::AggAvg,
            AggFunc::Min => ActionKind::AggMin,
            AggFunc::Max => ActionKind::AggMax,
            AggFunc::Stddev => ActionKind::AggStddev,
            AggFunc::Quantize => ActionKind::AggQuantize,
            AggFunc::Lquantize => ActionKind::AggLquantize,
            AggFunc::Llquantize => ActionKind::AggLlquantize,
        }
    }
}

/// An aggregation.
#[derive(Debug, Clone)]
pub struct AggInfo {
    pub id: u32,
    pub name: String,
    /// Function and the line of its first use.
    pub func: Option<(AggFunc, u32, u64)>,
    pub keys: Option<Vec<TypeId>>,
    /// Whether each key is a D value (not a `stack()`, `sym()`... record), once known.
    pub key_values: Vec<bool>,
    /// Whether each key is a stack record (`stack()`, `ustack()`, `jstack()`), once known.
    pub key_stacks: Vec<bool>,
}

/// One action to lower: its kind, arguments and the expression its DIF object computes.
#[derive(Debug, Clone)]
pub struct Plan {
    pub kind: ActionKind,
    pub arg: u64,
    pub uarg: u64,
    pub ntuple: u32,
    pub expr: Option<TExpr>,
    /// The object's value is not recorded (statement expressions): void return type.
    pub void_result: bool,
}

impl Plan {
    /// A plan with no arguments.
    pub fn new(kind: ActionKind, expr: Option<TExpr>) -> Plan {
        Plan {
            kind,
            arg: 0,
            uarg: 0,
            ntuple: 0,
            expr,
            void_result: false,
        }
    }
}

/// A cooked clause.
#[derive(Debug, Clone)]
pub struct Cooked {
    pub pred: Option<TExpr>,
    pub plans: Vec<Plan>,
}

/// A translator: member conversions from an input type to a struct or union.
#[derive(Debug, Clone)]
pub struct Xlator {
    pub input: TypeId,
    pub output: TypeId,
    pub param: String,
    pub members: Vec<crate::ast::XlatorMember>,
    /// Declared by the D library, where a translation may stand for data DTrace for Linux keeps
    /// itself (`curcpu` points at a real `cpuinfo_t` there).
    pub library: bool,
}

/// An inline definition.
#[derive(Debug, Clone)]
pub struct Inline {
    pub ty: TypeId,
    pub expr: TExpr,
}

/// An inline associative array (`inline fileinfo_t fds[int fd] = ...;`): its body is cooked at
/// each use with the parameters bound to the keys.
#[derive(Debug, Clone)]
pub struct InlineArray {
    pub ty: TypeId,
    pub params: Vec<(String, TypeId)>,
    pub body: crate::ast::Expr,
}

/// The options that give `stack()`, `ustack()` and `jstack()` without arguments their sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackDefaults {
    /// `stackframes`.
    pub stackframes: u32,
    /// `ustackframes`.
    pub ustackframes: u32,
    /// `jstackframes`.
    pub jstackframes: u32,
    /// `jstackstrsize`.
    pub jstackstrsize: u32,
}

/// Checker state for one compilation.
pub struct Checker<'o> {
    /// `#pragma D attributes ... provider <name> <part>`: provider, part index, attributes.
    pub provider_attrs: Vec<(String, usize, [u8; 3])>,
    pub types: TypeTable,
    pub basic: Basic,
    pub opts: &'o CompileOptions,
    pub globals: VarTable,
    pub tls: VarTable,
    /// Clause-local (`this->`) variables: their names, ids and types are program-wide, as in
    /// DTrace; their values live for one probe firing and are shared by the clauses it runs.
    pub locals: VarTable,
    /// Current string size (`-x strsize`, `#pragma D option strsize`).
    pub strsize: u32,
    /// The `scratchsize` option: bytes of scratch space a firing may allocate.
    pub scratchsize: u64,
    /// The default depths of `stack()`, `ustack()` and `jstack()` and `jstack()`'s string space
    /// (`-x stackframes`... or `#pragma D option stackframes=`... before the action).
    pub stack_defaults: StackDefaults,
    pub aggs: Vec<AggInfo>,
    /// Ids of the aggregations this compilation names (`aggs` also holds those of earlier
    /// programs on the handle).
    pub aggs_used: std::collections::BTreeSet<u32>,
    /// Earlier states of aggregations changed while cooking the current clause (for the retry).
    pub agg_undo: Vec<(usize, AggInfo)>,
    pub inlines: HashMap<String, Inline>,
    pub inline_arrays: HashMap<String, InlineArray>,
    /// Nesting of inline array expansions (bounds self-reference).
    pub inline_depth: u32,
    pub enums: HashMap<String, (i64, TypeId)>,
    /// The program's format strings, as bytes (`Program::formats`).
    pub formats: Vec<Vec<u8>>,
    /// Types of `print()` values (`Program::print_types`).
    pub print_types: crate::print_types::PrintTypes,
    pub options: Vec<(String, Option<String>)>,
    /// "action list" or "predicate" while cooking those.
    pub region: Option<&'static str>,
    /// Typedef names known to the parser.
    pub declared_types: Vec<String>,
    /// Argument type names of the probes of the clause being cooked, when known (resolved to
    /// types on the first use of `args[]`).
    pub probe_args: Option<Vec<String>>,
    /// Native argument type names of the same probes, when the [`crate::ProbeInfo`] gives them
    /// (an argument whose native type differs from its D type is translated).
    pub probe_natives: Option<Vec<String>>,
    /// The clause's first probe description (for messages).
    pub probe_name: String,
    /// Where probe argument types come from.
    pub probe_info: Option<&'o dyn crate::ProbeInfo>,
    /// Translators declared.
    pub translators: Vec<Xlator>,
}

impl<'o> Checker<'o> {
    /// A checker for `opts`.
    pub fn new(opts: &'o CompileOptions, mut types: TypeTable, basic: Basic) -> Checker<'o> {
        types.strsize = opts.strsize;
        let mut inlines = HashMap::new();
        for (name, v) in crate::prelude::ERRNO
            .iter()
            .chain(crate::prelude::SIGNALS)
            .chain(crate::prelude::UNISTD)
        {
            inlines.insert(
                name.to_string(),
                Inline {
                    ty: basic.int,
                    expr: TExpr::int(*v as u64, basic.int, 0),
                },
            );
        }
        Checker {
            types,
            basic,
            opts,
            globals: VarTable::default(),
            tls: VarTable::default(),
            locals: VarTable::default(),
            strsize: opts.strsize,
            scratchsize: opts.scratchsize,
            stack_defaults: StackDefaults {
                stackframes: opts.stackframes,
                ustackframes: opts.ustackframes,
                jstackframes: opts.jstackframes,
                jstackstrsize: opts.jstackstrsize,
            },
            aggs: Vec::new(),
            aggs_used: Default::default(),
            agg_undo: Vec::new(),
            inlines,
            inline_arrays: HashMap::new(),
            inline_depth: 0,
            enums: HashMap::new(),
            formats: Vec::new(),
            print_types: Default::default(),
            provider_attrs: Vec::new(),
            options: Vec::new(),
            region: None,
            declared_types: Vec::new(),
            translators: Vec::new(),
            probe_args: None,
            probe_natives: None,
            probe_name: String::new(),
            probe_info: None,
        }
    }

    /// The variable table of a scope.
    pub fn table(&mut self, scope: VarScope) -> &mut VarTable {
        match scope {
            VarScope::Global => &mut self.globals,
            VarScope::Thread => &mut self.tls,
            VarScope::Local => &mut self.locals,
        }
    }

    /// A format entry of its own for one `printa()` statement: the consumer takes the run of
    /// `printa` records sharing a format as the aggregations of one statement, as libdtrace does
    /// with its per-statement format pointer.
    pub fn printa_format_index(&mut self, s: &[u8]) -> u64 {
        self.formats.push(s.to_vec());
        (self.formats.len() - 1) as u64
    }

    /// Index of a format string in the program's table (deduplicated).
    pub fn format_index(&mut self, s: &[u8]) -> u64 {
        if let Some(i) = self.formats.iter().position(|f| f == s) {
            return i as u64;
        }
        self.formats.push(s.to_vec());
        (self.formats.len() - 1) as u64
    }

    /// The aggregation named `name`, created on first use.
    pub fn agg(&mut self, name: &str) -> usize {
        if let Some(i) = self.aggs.iter().position(|a| a.name == name) {
            self.aggs_used.insert(self.aggs[i].id);
            return i;
        }
        self.aggs_used.insert(self.aggs.len() as u32 + 1);
        self.aggs.push(AggInfo {
            id: self.aggs.len() as u32 + 1,
            name: name.to_string(),
            func: None,
            keys: None,
            key_values: Vec::new(),
            key_stacks: Vec::new(),
        });
        self.aggs.len() - 1
    }

    /// Looks up the argument types of the clause's probes: known only when every description
    /// yields the same types.
    fn set_probe_args(&mut self, c: &Clause) -> CResult<()> {
        self.probe_args = None;
        self.probe_natives = None;
        self.probe_name = c.probes.first().map(|p| p.0.clone()).unwrap_or_default();
        let begin_or_end = !c.probes.is_empty()
            && c.probes.iter().all(|(spec, line)| {
                crate::lower::probe_desc(spec, *line).is_ok_and(|d| is_begin_or_end(&d))
            });
        if begin_or_end {
            // BEGIN and END have no arguments: any args[n] is out of range (D_ARGS_IDX).
            self.probe_args = Some(Vec::new());
            return Ok(());
        }
        let Some(info) = self.probe_info else {
            return Ok(());
        };
        let zdefs = self.opts.zdefs || self.options.iter().any(|(n, _)| n == "zdefs");
        for (spec, line) in &c.probes {
            let d = crate::lower::probe_desc(spec, *line)?;
            if !zdefs && info.matches_nothing(&d) {
                return Err(CompileError::new(
                    ErrTag::D_PDESC_ZERO,
                    *line,
                    format!(
                        "probe description {}:{}:{}:{} does not match any probes",
                        d.provider, d.module, d.function, d.name
                    ),
                ));
            }
        }
        let mut common: Option<Vec<String>> = None;
        let mut natives: Option<Option<Vec<String>>> = None;
        for (spec, line) in &c.probes {
            let desc = crate::lower::probe_desc(spec, *line)?;
            let Some(t) = info.arg_types(&desc) else {
                return Ok(());
            };
            match &common {
                Some(c) if *c != t => return Ok(()),
                _ => common = Some(t),
            }
            let n = info.arg_native_types(&desc);
            match &natives {
                // Translations apply only where every description agrees on the native types.
                Some(prev) if *prev != n => natives = Some(None),
                Some(_) => {}
                None => natives = Some(n),
            }
        }
        self.probe_args = common;
        self.probe_natives = natives.flatten();
        Ok(())
    }

    /// A type named by a string such as `char *` or `struct file *`.
    pub fn parse_type_name(&mut self, s: &str) -> Option<TypeId> {
        let (base, ptrs) = {
            let t = s.trim_end();
            let n = t
                .chars()
                .rev()
                .take_while(|c| *c == '*' || *c == ' ')
                .filter(|c| *c == '*')
                .count();
            (t.trim_end_matches(['*', ' ']).trim(), n)
        };
        let Some(mut t) = self.types.lookup(base) else {
            // Declarators the simple form does not cover (`void (*)(void)`, `char [16]`, a
            // qualified pointer as in `const char *const *`): the parser's type-name rule.
            let qualified = s
                .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                .any(|w| w == "const" || w == "volatile");
            if !s.contains(['(', '[']) && !qualified {
                return None;
            }
            let mut p = crate::parser::Parser::new(
                s,
                crate::macros::MacroEnv::default(),
                Default::default(),
                false,
            );
            let tn = p.type_name().ok()?;
            return self.resolve_type_name(&tn).ok();
        };
        for _ in 0..ptrs {
            t = self.types.pointer_to(t);
        }
        Some(t)
    }

    /// The id of an aggregation referenced (not assigned): it must have been assigned before.
    pub fn agg_ref(&mut self, name: &str, line: u32) -> CResult<u64> {
        match self
            .aggs
            .iter()
            .find(|a| a.name == name && a.func.is_some())
        {
            Some(a) => {
                let id = a.id;
                self.aggs_used.insert(id);
                Ok(id as u64)
            }
            None => Err(CompileError::new(
                ErrTag::D_IDENT_UNDEF,
                line,
                format!("failed to resolve @{name}: Unknown variable name"),
            )),
        }
    }

    /// Cooks a clause: actions first, then the predicate; if the actions refer to a variable the
    /// predicate creates, the predicate first (DTrace's `dt_cook_clause` order).
    pub fn cook_clause(&mut self, c: &Clause) -> CResult<Cooked> {
        self.cook_clause_inner(c).map_err(|e| {
            let e = self.in_region(e);
            self.region = None;
            e
        })
    }

    fn cook_clause_inner(&mut self, c: &Clause) -> CResult<Cooked> {
        self.set_probe_args(c)?;
        let saved = (
            self.globals.mark(),
            self.tls.mark(),
            self.aggs.len(),
            self.formats.len(),
            self.locals.mark(),
        );
        self.agg_undo.clear();
        let body: &[Stmt] = c.body.as_deref().unwrap_or(&[]);
        self.region = Some("action list");
        let first = self.cook_stmts(body);
        let (pred, plans) = match first {
            Ok(plans) => {
                self.region = Some("predicate");
                let pred = self.cook_pred(c)?;
                (pred, plans)
            }
            Err(e)
                if c.pred.is_some()
                    && (e.tag == ErrTag::D_IDENT_UNDEF || e.tag == ErrTag::D_VAR_UNDEF) =>
            {
                self.globals.rollback(saved.0);
                self.tls.rollback(saved.1);
                while let Some((i, old)) = self.agg_undo.pop() {
                    if i < self.aggs.len() {
                        self.aggs[i] = old;
                    }
                }
                self.aggs.truncate(saved.2);
                self.formats.truncate(saved.3);
                self.locals.rollback(saved.4);
                self.region = Some("predicate");
                let pred = self.cook_pred(c)?;
                self.region = Some("action list");
                let plans = self.cook_stmts(body)?;
                (pred, plans)
            }
            Err(e) => return Err(e),
        };
        self.region = None;
        Ok(Cooked { pred, plans })
    }

    fn cook_pred(&mut self, c: &Clause) -> CResult<Option<TExpr>> {
        let Some(p) = &c.pred else { return Ok(None) };
        let e = self.cook_result(p)?;
        if !self.types.is_scalar(e.ty) {
            return Err(CompileError::new(
                ErrTag::D_PRED_SCALAR,
                p.line,
                "predicate result must be of scalar type",
            ));
        }
        Ok(Some(e))
    }

    fn cook_stmts(&mut self, body: &[Stmt]) -> CResult<Vec<Plan>> {
        let mut plans = Vec::new();
        let mut state = crate::check_action::SpecState::default();
        for s in body {
            match s {
                Stmt::Expr(e) => {
                    let start = plans.len();
                    self.cook_statement(e, &mut plans)?;
                    state.check(&plans[start..], e.line)?;
                }
                Stmt::If(_, _, _, line) => {
                    // split into clauses by `ifsplit` before cooking
                    return Err(CompileError::new(
                        ErrTag::D_UNKNOWN,
                        *line,
                        "internal error: if statement reached the checker",
                    ));
                }
            }
        }
        Ok(plans)
    }

    /// Attaches the current region to an error that has none.
    pub fn in_region(&self, mut e: CompileError) -> CompileError {
        if e.region.is_none() {
            e.region = self.region;
        }
        e
    }
}

/// Whether `d` names exactly the `dtrace` provider's BEGIN or END probe (`BEGIN`, `dtrace:::END`),
/// the probes that have no arguments.
fn is_begin_or_end(d: &ProbeDesc) -> bool {
    matches!(d.provider.as_str(), "" | "dtrace")
        && d.module.is_empty()
        && d.function.is_empty()
        && matches!(d.name.as_str(), "BEGIN" | "END")
}
