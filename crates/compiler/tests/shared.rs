//! Identifiers shared by the programs of one handle: what one compilation declares or infers is known,
//! with its type and variable id, to the next ones on the same [`SharedState`].

use dtrace_compiler::{compile_shared, CompileError, CompileOptions, SharedState};
use dtrace_dif::object::DIFV_SCOPE_LOCAL;
use dtrace_dif::program::Program;
use dtrace_dif::vm::fake::{FakeContext, FakeMemory};
use dtrace_dif::vm::{Machine, VarState, VmOptions};

fn comp(src: &str, st: &mut SharedState) -> Result<Program, CompileError> {
    compile_shared(src, &CompileOptions::default(), Vec::new(), None, st)
}

fn ok(src: &str, st: &mut SharedState) -> Program {
    comp(src, st).unwrap_or_else(|e| panic!("{src}: {}", e.string_message(false)))
}

fn fails(src: &str, st: &mut SharedState) -> String {
    match comp(src, st) {
        Ok(_) => panic!("{src}: compiled"),
        Err(e) => e.string_message(false),
    }
}

/// The variable ids a program's DIF objects name, with their scopes.
fn var_ids(p: &Program) -> Vec<(u32, u8)> {
    let mut v = Vec::new();
    for e in &p.ecbs {
        let objs = e
            .predicate
            .iter()
            .chain(e.actions.iter().filter_map(|a| a.difo.as_ref()));
        for o in objs {
            for var in &o.vartab {
                v.push((var.id, var.scope));
            }
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

#[test]
fn thread_local_of_one_program_is_known_to_the_next() {
    let mut st = SharedState::new();
    let a = ok("syscall::read:entry { self->t = timestamp; }", &mut st);
    let b = ok(
        "syscall::read:return /self->t/ { trace(timestamp - self->t); self->t = 0; }",
        &mut st,
    );
    let id = st.var_id("t", true).expect("self->t known");
    assert_eq!(var_ids(&a), var_ids(&b));
    assert!(var_ids(&b).iter().any(|(i, _)| *i == id));
    // Without the shared state, the second program alone fails as in DTrace.
    let e = fails(
        "syscall::read:return /self->t/ { trace(1); }",
        &mut SharedState::new(),
    );
    assert!(
        e.contains("self->t has not yet been declared or assigned"),
        "{e}"
    );
}

#[test]
fn globals_keep_their_type_and_id_and_new_ones_do_not_collide() {
    let mut st = SharedState::new();
    ok("BEGIN { x = 1; y = \"s\"; }", &mut st);
    assert_eq!(st.global_type("x").as_deref(), Some("int"));
    let (x, y) = (st.var_id("x", false), st.var_id("y", false));
    ok("BEGIN { z = x + 1; trace(y); }", &mut st);
    assert_eq!(st.var_id("x", false), x);
    assert_eq!(st.var_id("y", false), y);
    let z = st.var_id("z", false).expect("z");
    assert!(Some(z) != x && Some(z) != y);
    // Declarations too.
    ok("int w;", &mut st);
    ok("BEGIN { w = 2; }", &mut st);
    let e = fails("BEGIN { w = \"s\"; }", &mut st);
    assert_eq!(
        e,
        "in action list: operands have incompatible types: \"int\" = \"string\""
    );
}

#[test]
fn type_conflict_across_programs_is_the_same_error_as_within_one() {
    let within = fails(
        "BEGIN { x = 1; } BEGIN { x = \"a\"; }",
        &mut SharedState::new(),
    );
    let mut st = SharedState::new();
    ok("BEGIN { x = 1; }", &mut st);
    let across = fails("BEGIN { x = \"a\"; }", &mut st);
    assert_eq!(within, across);
    assert_eq!(
        across,
        "in action list: operands have incompatible types: \"int\" = \"string\""
    );
}

#[test]
fn aggregations_are_shared_and_checked() {
    let mut st = SharedState::new();
    ok("BEGIN { @a[1] = count(); }", &mut st);
    let p = ok("BEGIN { @b = sum(2); printa(@a); }", &mut st);
    let (a, b) = (st.agg_id("a").expect("@a"), st.agg_id("b").expect("@b"));
    assert_ne!(a, b);
    // A program lists the aggregations it names, its own and earlier programs'.
    let names: Vec<(u32, &str)> = p
        .aggregations
        .iter()
        .map(|d| (d.id, d.name.as_str()))
        .collect();
    assert_eq!(names, vec![(a, "a"), (b, "b")]);
    let p = ok("BEGIN { @c = count(); }", &mut st);
    assert_eq!(p.aggregations.len(), 1);
    assert_eq!(p.aggregations[0].name, "c");
    let within = fails(
        "BEGIN { @a[1] = count(); } BEGIN { @a[1] = sum(1); }",
        &mut SharedState::new(),
    );
    let across = fails("BEGIN { @a[1] = sum(1); }", &mut st);
    assert_eq!(within, across);
    let within = fails(
        "BEGIN { @a[1] = count(); } BEGIN { @a[\"k\"] = count(); }",
        &mut SharedState::new(),
    );
    let across = fails("BEGIN { @a[\"k\"] = count(); }", &mut st);
    assert_eq!(within, across);
}

#[test]
fn clause_locals_are_private_but_take_fresh_ids() {
    let mut st = SharedState::new();
    let a = ok("BEGIN { this->v = 1; trace(this->v); }", &mut st);
    // `this->v` of another program is another variable: it may have another type.
    let b = ok("BEGIN { this->v = \"s\"; trace(this->v); }", &mut st);
    let la: Vec<_> = var_ids(&a)
        .into_iter()
        .filter(|v| v.1 == DIFV_SCOPE_LOCAL)
        .collect();
    let lb: Vec<_> = var_ids(&b)
        .into_iter()
        .filter(|v| v.1 == DIFV_SCOPE_LOCAL)
        .collect();
    assert_eq!((la.len(), lb.len()), (1, 1));
    assert_ne!(la[0].0, lb[0].0);
}

#[test]
fn a_failed_compilation_leaves_no_identifiers() {
    let mut st = SharedState::new();
    ok("BEGIN { x = 1; }", &mut st);
    fails("BEGIN { y = 1; @c = count(); nosuch(); }", &mut st);
    assert_eq!(st.var_id("y", false), None);
    assert_eq!(st.agg_id("c"), None);
    let e = fails("BEGIN { trace(y); }", &mut st);
    assert!(e.contains("failed to resolve y"), "{e}");
    ok("BEGIN { trace(x); }", &mut st);
}

#[test]
fn typedefs_and_inlines_carry_over() {
    let mut st = SharedState::new();
    ok("typedef int myint_t; inline int two = 2;", &mut st);
    ok("BEGIN { v = (myint_t)two; }", &mut st);
    assert_eq!(st.global_type("v").as_deref(), Some("myint_t"));
    // struct types and variables of them
    ok("struct pt { int x; int y; }; struct pt p;", &mut st);
    ok(
        "BEGIN { p.y = 3; q = (struct pt *)0; trace(p.y + sizeof (struct pt)); }",
        &mut st,
    );
    assert_eq!(st.global_type("p").as_deref(), Some("struct pt"));
    assert_eq!(st.global_type("q").as_deref(), Some("struct pt *"));
}

/// A value stored by one program's clause is the one the other program's predicate reads: both
/// name the same variable, so they use the same storage.
#[test]
fn one_storage_at_run_time() {
    let mut st = SharedState::new();
    let a = ok("BEGIN { g = 41; self->t = 7; }", &mut st);
    let b = ok("BEGIN /self->t == 7/ { trace(g + 1); }", &mut st);
    let mut vars = VarState::new(VmOptions::default());
    let mut m = Machine::new();
    let mut ctx = FakeContext::new();
    let mut mem = FakeMemory::new();
    m.begin_firing();
    for act in &a.ecbs[0].actions {
        if let Some(o) = &act.difo {
            m.run(o, &mut vars, &mut ctx, &mut mem).expect("runs");
        }
    }
    m.begin_firing();
    let pred = b.ecbs[0].predicate.as_ref().expect("predicate");
    assert_eq!(m.run(pred, &mut vars, &mut ctx, &mut mem), Ok(1));
    let o = b.ecbs[0].actions[0].difo.as_ref().expect("trace object");
    assert_eq!(m.run(o, &mut vars, &mut ctx, &mut mem), Ok(42));
}
