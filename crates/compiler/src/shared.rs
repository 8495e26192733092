//! Identifier state shared by the programs compiled on one consumer handle, as libdtrace keeps it in
//! the handle (`dt_globals`, `dt_tls`, `dt_aggs`, its D type container, inlines and translators):
//! a global, a `self->` variable or an aggregation declared or inferred by one program is known,
//! with its type and variable id, to the programs compiled after it, so both refer to the same
//! storage when enabled together. Clause-local (`this->`) variables stay private to each program
//! but take ids from a handle-wide counter, so two programs' locals never share a slot.
//!
//! A compilation that fails leaves the variables and aggregations as they were before it.

use std::collections::{HashMap, HashSet};

use crate::check::{AggInfo, Checker, Inline, InlineArray, VarTable, Xlator};
use crate::error::CResult;
use crate::options::CompileOptions;
use crate::types::{Basic, TypeId, TypeSource, TypeTable};

/// The state one handle's compilations share; empty until the first compilation.
#[derive(Default)]
pub struct SharedState {
    state: Option<State>,
    /// The D library files declared so far (each is declared once, by the first program that
    /// names something of it).
    library: HashSet<&'static str>,
    /// Whether the `-L` libraries ([`crate::userlib`]) have been declared.
    user_libraries: bool,
}

impl std::fmt::Debug for SharedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("SharedState");
        if let Some(s) = &self.state {
            d.field("globals", &s.globals.vars.len())
                .field("tls", &s.tls.vars.len())
                .field("aggs", &s.aggs.len());
        }
        d.finish()
    }
}

/// What a checker keeps from one compilation to the next.
pub(crate) struct State {
    types: TypeTable,
    basic: Basic,
    typenames: HashSet<String>,
    globals: VarTable,
    tls: VarTable,
    next_local: u32,
    aggs: Vec<AggInfo>,
    inlines: HashMap<String, Inline>,
    inline_arrays: HashMap<String, InlineArray>,
    enums: HashMap<String, (i64, TypeId)>,
    translators: Vec<Xlator>,
    declared_types: Vec<String>,
}

/// What to restore when a compilation fails: the variables, aggregations and declarations
/// (inlines, enums, translators, the names of D types) as they were before it, so that a program
/// compiled again (the consumer retries once the kernel's types are loaded) reports its own
/// error rather than its declarations as redeclared.
pub(crate) struct Undo {
    globals: VarTable,
    tls: VarTable,
    next_local: u32,
    aggs: Vec<AggInfo>,
    decls: Option<Decls>,
}

/// The declarations a failed compilation must not leave behind.
pub(crate) struct Decls {
    inlines: HashMap<String, Inline>,
    inline_arrays: HashMap<String, InlineArray>,
    enums: HashMap<String, (i64, TypeId)>,
    translators: Vec<Xlator>,
    declared_types: Vec<String>,
}

impl Undo {
    /// Also restores the checker's declarations as they are now, and the names of the D types
    /// declared from now on (the type table's journal starts here).
    pub(crate) fn restart_here(&mut self, ck: &mut Checker<'_>) {
        self.globals = ck.globals.clone();
        self.tls = ck.tls.clone();
        self.aggs = ck.aggs.clone();
        self.decls = Some(Decls {
            inlines: ck.inlines.clone(),
            inline_arrays: ck.inline_arrays.clone(),
            enums: ck.enums.clone(),
            translators: ck.translators.clone(),
            declared_types: ck.declared_types.clone(),
        });
        ck.types.begin_journal();
    }
}

impl SharedState {
    /// An empty state (the first compilation creates the type table and loads the D library).
    pub fn new() -> SharedState {
        SharedState::default()
    }

    /// Whether a compilation has run (later ones ignore the type sources they are given: the
    /// table of the first one, with its sources, is kept).
    pub fn is_started(&self) -> bool {
        self.state.is_some()
    }

    /// The type of global variable `name`, as the checker prints types (`"int"`, `"string"`).
    pub fn global_type(&self, name: &str) -> Option<String> {
        let s = self.state.as_ref()?;
        let ty = s.globals.vars.get(name)?.ty?;
        Some(s.types.name(ty))
    }

    /// The variable id of global `name`, or of thread-local `name` when `thread`.
    pub fn var_id(&self, name: &str, thread: bool) -> Option<u32> {
        let s = self.state.as_ref()?;
        let t = if thread { &s.tls } else { &s.globals };
        t.vars.get(name).map(|v| v.id)
    }

    /// The id of aggregation `@name`.
    pub fn agg_id(&self, name: &str) -> Option<u32> {
        let s = self.state.as_ref()?;
        s.aggs.iter().find(|a| a.name == name).map(|a| a.id)
    }

    /// A checker for one compilation: over the kept state when there is one, else over a new type
    /// table holding `sources`; with the typedef names the parser must know.
    pub(crate) fn checker<'o>(
        &mut self,
        opts: &'o CompileOptions,
        sources: Vec<Box<dyn TypeSource>>,
    ) -> (Checker<'o>, HashSet<String>, Undo) {
        match self.state.take() {
            Some(s) => {
                let undo = Undo {
                    globals: s.globals.clone(),
                    tls: s.tls.clone(),
                    next_local: s.next_local,
                    aggs: s.aggs.clone(),
                    decls: None,
                };
                let mut ck = Checker::new(opts, s.types, s.basic);
                ck.globals = s.globals;
                ck.tls = s.tls;
                ck.locals = VarTable::starting_at(s.next_local);
                ck.aggs = s.aggs;
                ck.inlines = s.inlines;
                ck.inline_arrays = s.inline_arrays;
                ck.enums = s.enums;
                ck.translators = s.translators;
                ck.declared_types = s.declared_types;
                (ck, s.typenames, undo)
            }
            None => {
                let (mut types, basic) = TypeTable::new(opts.model);
                for s in sources {
                    types.add_source(s);
                }
                let names: HashSet<String> = types.typedef_names().into_iter().collect();
                let ck = Checker::new(opts, types, basic);
                let undo = Undo {
                    globals: ck.globals.clone(),
                    tls: ck.tls.clone(),
                    next_local: 0,
                    aggs: ck.aggs.clone(),
                    decls: None,
                };
                (ck, names, undo)
            }
        }
    }

    /// Declares the D library files `program` needs that no earlier program declared (see
    /// [`crate::dlib::load`]); returns `typenames` with the typedef names they add.
    pub(crate) fn load_library(
        &mut self,
        ck: &mut Checker<'_>,
        typenames: HashSet<String>,
        program: &str,
        also: &[String],
    ) -> HashSet<String> {
        crate::dlib::load(ck, typenames, program, also, &mut self.library)
    }

    /// Declares the D libraries of the `-L` directories before the first program (see
    /// [`crate::userlib`]); an error fails this compilation and the next one tries again.
    pub(crate) fn load_user_libraries(
        &mut self,
        ck: &mut Checker<'_>,
        typenames: HashSet<String>,
        opts: &CompileOptions,
    ) -> CResult<HashSet<String>> {
        if self.user_libraries || opts.libdirs.is_empty() {
            return Ok(typenames);
        }
        let libs = crate::userlib::read_dirs(&opts.libdirs)?;
        let names = crate::userlib::declare(ck, typenames, &libs)?;
        self.user_libraries = true;
        Ok(names)
    }

    /// Adds the typedef names the kept type table's sources know now and did not before (a lazily
    /// loaded source offers them once loaded); whether there were any.
    pub fn refresh_typedef_names(&mut self) -> bool {
        let Some(s) = self.state.as_mut() else {
            return false;
        };
        let mut added = false;
        for n in s.types.typedef_names() {
            added |= s.typenames.insert(n);
        }
        added
    }

    /// Keeps the checker's state for the next compilation; when the compilation failed (`undo`),
    /// with the variables and aggregations it had before.
    pub(crate) fn keep(
        &mut self,
        mut ck: Checker<'_>,
        typenames: HashSet<String>,
        undo: Option<Undo>,
    ) {
        match &undo {
            Some(_) => ck.types.rollback(),
            None => ck.types.commit(),
        }
        let mut s = State {
            next_local: ck.locals.next_index(),
            types: ck.types,
            basic: ck.basic,
            typenames,
            globals: ck.globals,
            tls: ck.tls,
            aggs: ck.aggs,
            inlines: ck.inlines,
            inline_arrays: ck.inline_arrays,
            enums: ck.enums,
            translators: ck.translators,
            declared_types: ck.declared_types,
        };
        if let Some(u) = undo {
            s.globals = u.globals;
            s.tls = u.tls;
            s.next_local = u.next_local;
            s.aggs = u.aggs;
            if let Some(d) = u.decls {
                s.inlines = d.inlines;
                s.inline_arrays = d.inline_arrays;
                s.enums = d.enums;
                s.translators = d.translators;
                s.declared_types = d.declared_types;
            }
        }
        self.state = Some(s);
    }
}
