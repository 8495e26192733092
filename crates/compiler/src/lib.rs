//! The D compiler: D source text to the program description the framework executes.
//!
//! It owns D's lexer ([`lexer`]), parser ([`parser`], [`ast`]), macro variables ([`macros`]), types
//! ([`types`], with [`types::TypeSource`] and [`ctf_types`] for CTF-backed types), the checker that types and resolves
//! every expression and reports DTrace's `D_*` errors ([`check`], [`check_expr`], [`check_place`], [`check_decl`],
//! [`check_action`], [`check_xlate`], [`printf`], [`print_types`], [`ifsplit`]), code generation to DIF ([`cg`]), lowering to ECB descriptions
//! ([`lower`]), stability attributes ([`stability`]), identifiers shared by the programs of one handle
//! ([`shared`]), the `dtrace -S` listing ([`mod@listing`]) and the D library of translators ([`dlib`]). It does not execute DIF (that is
//! `dtrace-dif`/`dtrace-framework`) nor know which probes exist (the consumer matches descriptions).
//!
//! Entry points: [`compile`] (and [`compile_with`] for CTF-backed [`TypeSource`]s and a
//! [`ProbeInfo`] giving `args[]` types and symbols); errors are [`CompileError`]s that render as
//! `dtrace(1)` prints them for `-s` ([`CompileError::render_script`]) and `-n`
//! ([`CompileError::render_specifier`]); [`listing()`] is the `-S` listing.
//!
//! Conventions beyond those of `dtrace_dif::program` (what the framework and consumer must know):
//! - a statement that records nothing (`x = 1;`) is a `DifExpr` action whose object returns a
//!   zero-size type: no record;
//! - `quantize`/`lquantize`/`llquantize` increments are a zero-size `DifExpr` just before the
//!   aggregating action, counted in its `ntuple` (DTrace's `dtag_hasarg`);
//! - `printa()` without a format has `arg` = [`NO_FORMAT`];
//! - `trunc(@a, n)`, `normalize(@a, n)`, `setopt(name, value)`: the library action's object yields
//!   the aggregation id (or option name); the second argument follows as a `DifExpr`;
//! - `sym()`/`func()`/`mod()`/`usym()`/`ufunc()`/`umod()`/`uaddr()` keys and `printf` arguments are
//!   actions of those kinds; `stack()`/`ustack()`/`jstack()` likewise;
//! - `if`/`else` is compiled by splitting the clause into several ECBs for the same probes guarded by
//!   clause-local variables, so clause-locals must keep their values across the ECBs of one firing;
//! - `cpu` is built-in variable `0x0200` (`idents::DIF_VAR_CPU`).

pub mod actions;
pub mod alloca;
pub mod ast;
pub mod cg;
pub mod check;
pub mod check_action;
pub mod check_decl;
pub mod check_expr;
pub mod check_place;
pub mod check_xlate;
pub mod cpp;
pub mod ctf_types;
pub mod dlib;
pub mod error;
pub mod idents;
pub mod ifsplit;
pub mod lexer;
pub mod listing;
pub mod lower;
pub mod macros;
pub mod options;
pub mod parser;
pub mod prelude;
pub mod print_types;
pub mod printf;
pub mod shared;
pub mod stability;
pub mod tree;
pub mod types;
pub mod userlib;

use std::collections::HashSet;

use dtrace_dif::program::{AggregationDesc, Program};

pub use check_action::NO_FORMAT;
pub use error::{CompileError, ErrTag};
pub use options::{CompileOptions, SourceKind, StdcMode};
pub use shared::SharedState;
pub use types::{DataModel, TypeSource};

use dtrace_dif::program::ProbeDesc;

/// What the compiler may learn about the traced system: the native argument types (`args[]`) of the
/// probes a description matches, and kernel or user symbols, with C type names (`"int"`,
/// `"char *"`, `"struct file *"`) resolved through the type table and its [`TypeSource`]s.
pub trait ProbeInfo: Sync {
    /// Argument types of the probes `desc` matches, or `None` when unknown or not uniform.
    fn arg_types(&self, desc: &ProbeDesc) -> Option<Vec<String>>;

    /// The native types (`dtrace -lv`'s "native" column) of the same arguments, when they differ
    /// from the D types somewhere: an `args[n]` whose D type is a translator's output (`psinfo_t *`)
    /// and whose native type is that translator's input (`struct task_struct *`) is the translation
    /// of the native value (`xlate<psinfo_t *>(task)`). `None`: every argument is as its D type says.
    fn arg_native_types(&self, desc: &ProbeDesc) -> Option<Vec<String>> {
        let _ = desc;
        None
    }

    /// Whether `desc` can match no probe on this system at all (it names a provider whose probes
    /// are all known, and none of them matches): without `-Z` its clause is an error
    /// (`D_PDESC_ZERO`), said before the clause's body is compiled, as DTrace says it.
    fn matches_nothing(&self, desc: &ProbeDesc) -> bool {
        let _ = desc;
        false
    }

    /// Address and type of symbol `name` (in `module`, or any module; `user` for ``` `` ```).
    fn symbol(&self, module: Option<&str>, name: &str, user: bool) -> Option<(u64, String)> {
        let _ = (module, name, user);
        None
    }

    /// Why no symbol of this kind can be found on this system at all (a kernel that does not list
    /// its variables), said after DTrace's "Unknown symbol name"; `None` when symbols are listed
    /// and `name` simply is not one of them.
    fn symbols_unlisted(&self, module: Option<&str>, user: bool) -> Option<String> {
        let _ = (module, user);
        None
    }
}

use ast::Item;
use check::Checker;
use error::CResult;
use macros::MacroEnv;

/// Compiles a D program.
pub fn compile(source: &str, opts: &CompileOptions) -> Result<Program, CompileError> {
    compile_with_types(source, opts, Vec::new())
}

/// Compiles a D program with extra type sources (CTF, BTF).
///
/// The passes run on a thread of their own with a large stack, so that the recursion the depth limits
/// allow never exhausts a small caller stack.
pub fn compile_with_types(
    source: &str,
    opts: &CompileOptions,
    sources: Vec<Box<dyn TypeSource>>,
) -> Result<Program, CompileError> {
    compile_with(source, opts, sources, None)
}

/// Compiles a D program with extra type sources and a source of probe argument types.
pub fn compile_with(
    source: &str,
    opts: &CompileOptions,
    sources: Vec<Box<dyn TypeSource>>,
    probes: Option<&dyn ProbeInfo>,
) -> Result<Program, CompileError> {
    compile_shared(source, opts, sources, probes, &mut SharedState::new())
}

/// Compiles a D program in the identifier state `shared` of earlier compilations on the same
/// handle (their globals, thread-locals, aggregations, types, inlines and translators), and adds
/// this program's to it. `sources` are used by the first compilation only.
pub fn compile_shared(
    source: &str,
    opts: &CompileOptions,
    sources: Vec<Box<dyn TypeSource>>,
    probes: Option<&dyn ProbeInfo>,
    shared: &mut SharedState,
) -> Result<Program, CompileError> {
    std::thread::scope(|s| {
        match std::thread::Builder::new()
            .name("dtrace-compile".into())
            .stack_size(COMPILE_STACK)
            .spawn_scoped(s, || compile_here(source, opts, sources, probes, shared))
        {
            Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            Err(_) => Err(CompileError::new(
                ErrTag::D_UNKNOWN,
                0,
                "failed to start the compiler thread",
            )),
        }
    })
}

/// Stack size of the compiler thread.
const COMPILE_STACK: usize = 64 << 20;

fn compile_here(
    source: &str,
    opts: &CompileOptions,
    sources: Vec<Box<dyn TypeSource>>,
    probes: Option<&dyn ProbeInfo>,
    shared: &mut SharedState,
) -> Result<Program, CompileError> {
    let pre;
    let text = if opts.cpp || opts.cpp_headers {
        pre = cpp::preprocess(source, opts)?;
        pre.as_str()
    } else {
        source
    };
    let (mut ck, names, mut undo) = shared.checker(opts, sources);
    let arg_names = probe_arg_type_names(text, &names, opts, probes);
    let names = shared.load_library(&mut ck, names, text, &arg_names);
    let names = match shared.load_user_libraries(&mut ck, names.clone(), opts) {
        Ok(n) => n,
        Err(e) => {
            shared.keep(ck, names, Some(undo));
            return Err(e);
        }
    };
    // the library files loaded stay loaded; what the program declares goes if it fails
    undo.restart_here(&mut ck);
    let names_before = names.clone();
    ck.probe_info = probes;
    let (r, names) = compile_program(&mut ck, text, opts, names);
    match r {
        Ok(p) => {
            shared.keep(ck, names, None);
            Ok(p)
        }
        Err(e) => {
            shared.keep(ck, names_before, Some(undo));
            Err(e)
        }
    }
}

/// Parses, checks and lowers one program with checker `ck`; returns the typedef names known at
/// its end with the result.
fn compile_program(
    ck: &mut Checker<'_>,
    text: &str,
    opts: &CompileOptions,
    names: HashSet<String>,
) -> (Result<Program, CompileError>, HashSet<String>) {
    let env = MacroEnv {
        args: opts.args.clone(),
        named: opts.macros.clone(),
        default_args: opts.default_args,
    };
    let mut parser = parser::Parser::new(text, env, names, opts.source == SourceKind::File);
    parser.pspec = opts.pspec;
    let (ast, names) = parser.program_with_names_always();
    (ast.and_then(|ast| check_program(ck, &ast, opts)), names)
}

fn check_program(
    ck: &mut Checker<'_>,
    ast: &ast::Program,
    opts: &CompileOptions,
) -> Result<Program, CompileError> {
    if ast.items.is_empty() && !opts.empty {
        return Err(CompileError::new(
            ErrTag::D_EMPTY,
            ast.last_line,
            "empty D program translation unit",
        ));
    }
    check_macro_args(ast, opts)?;
    let mut program = Program::default();
    let mut if_vars = 0;
    for item in &ast.items {
        match item {
            Item::Clause(c) => {
                for c in ifsplit::split(c, &mut if_vars) {
                    let cooked = ck.cook_clause(&c)?;
                    let ecbs = ck.lower(&c.probes, &cooked)?;
                    let attrs = stability::clause_attrs(&c);
                    program.attrs.extend(std::iter::repeat_n(attrs, ecbs.len()));
                    program.ecbs.extend(ecbs);
                }
            }
            Item::Provider(d) => program.providers.push(ck.cook_provider(d)?),
            other => ck.declare(other)?,
        }
    }
    for (name, part, attr) in &ck.provider_attrs {
        for p in program.providers.iter_mut().filter(|p| &p.name == name) {
            if let Some(a) = p.attrs.get_mut(*part) {
                *a = Some(*attr);
            }
        }
    }
    program.formats = ck.formats.clone();
    program.aggregations = ck
        .aggs
        .iter()
        .filter(|a| ck.aggs_used.contains(&a.id))
        .map(|a| AggregationDesc {
            id: a.id,
            name: a.name.clone(),
        })
        .collect();
    program.options = ck.options.clone();
    program.print_types = std::mem::take(&mut ck.print_types.table);
    (program.max_tuple_size, program.max_dvar_size) = ck.dynvar_sizes();
    Ok(program)
}

/// The identifiers in the `args[]` types of the probes a program's clauses name, when it uses
/// `args` (`psinfo_t` for `sched:::wakeup`): the D library files declaring them are then loaded, as
/// if the program had named them.
fn probe_arg_type_names(
    text: &str,
    names: &HashSet<String>,
    opts: &CompileOptions,
    probes: Option<&dyn ProbeInfo>,
) -> Vec<String> {
    let Some(info) = probes else {
        return Vec::new();
    };
    if !dlib::mentions(text, "args") {
        return Vec::new();
    }
    let env = MacroEnv {
        args: opts.args.clone(),
        named: opts.macros.clone(),
        default_args: opts.default_args,
    };
    let mut parser = parser::Parser::new(text, env, names.clone(), opts.source == SourceKind::File);
    parser.pspec = opts.pspec;
    // A program that does not parse without the library fails again (with its message) later.
    let Ok(ast) = parser.program() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for item in &ast.items {
        let Item::Clause(c) = item else { continue };
        for (spec, line) in &c.probes {
            let Ok(desc) = lower::probe_desc(spec, *line) else {
                continue;
            };
            for t in info.arg_types(&desc).into_iter().flatten() {
                if !out.contains(&t) {
                    out.push(t);
                }
            }
        }
    }
    out
}

fn check_macro_args(ast: &ast::Program, opts: &CompileOptions) -> CResult<()> {
    if opts.default_args || opts.argref || ast.default_args {
        return Ok(());
    }
    let n = opts.args.len().saturating_sub(1);
    if n > ast.max_macro_arg {
        let i = ast.max_macro_arg + 1;
        return Err(CompileError::new(
            ErrTag::D_MACRO_UNUSED,
            0,
            format!(
                "extraneous argument '{}' (${i} is not referenced)",
                opts.args[i]
            ),
        ));
    }
    Ok(())
}

/// Whether `p` is destructive: an action that is (`raise`, `system`, `stop`, `copyout`...) or a DIF
/// object calling a destructive subroutine (`copyout`, `copyoutstr`). DTrace compiles such programs
/// without `-w` and refuses them when tracing starts (`dtrace: could not enable tracing:
/// Destructive actions not allowed`); consumers call this before starting.
pub fn destructive(p: &Program) -> bool {
    use dtrace_dif::subr::Subr;
    let calls_destructive = |o: &dtrace_dif::DifObject| o.subrs_called().any(Subr::is_destructive);
    p.ecbs.iter().any(|e| {
        e.predicate.as_ref().is_some_and(calls_destructive)
            || e.actions
                .iter()
                .any(|a| a.kind.is_destructive() || a.difo.as_ref().is_some_and(calls_destructive))
    })
}

/// The `dtrace -S` listing of a compiled program.
pub fn listing(p: &Program) -> String {
    listing::listing(p)
}
