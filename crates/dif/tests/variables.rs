//! Global, thread-local and clause-local scalars, associative arrays and the dynamic variable space.

mod common;
use common::{kind, H};
use dtrace_dif::vm::{FaultKind, VmOptions};

const DECLS: &str = ".var g 0x500 scl glb int 8\n.var gs 0x501 scl glb string 256\n.var t 0x502 scl tls int 8\n.var ts 0x503 scl tls string 256\n.var l 0x504 scl loc int 8\n.var ls 0x505 scl loc string 256\n.var a 0x506 arr glb int 8\n.var ta 0x507 arr tls int 8\n.var as 0x508 arr glb string 256\n";

fn src(body: &str) -> String {
    format!("{DECLS}{body}")
}

fn src_str(body: &str) -> String {
    format!(".rtype string 256\n{DECLS}{body}")
}

#[test]
fn global_scalars_persist_across_firings() {
    let mut h = H::new();
    assert_eq!(h.run(&src("ldgs g, %r1\nret %r1\n")), Ok(0));
    h.run(&src("setx 42, %r1\nstgs %r1, g\nret %r0\n")).unwrap();
    h.m.begin_firing();
    assert_eq!(h.run(&src("ldgs g, %r1\nret %r1\n")), Ok(42));
    // Strings are copied by value.
    assert_eq!(h.run_str(&src_str("ldgs gs, %r1\nret %r1\n")).unwrap(), "");
    h.run(&src("sets \"hello\", %r1\nstgs %r1, gs\nret %r0\n"))
        .unwrap();
    h.m.begin_firing();
    assert_eq!(
        h.run_str(&src_str("ldgs gs, %r1\nret %r1\n")).unwrap(),
        "hello"
    );
}

#[test]
fn thread_locals_are_per_thread_and_freed_by_zero() {
    let mut h = H::new();
    h.run(&src("setx 7, %r1\nstts %r1, t\nret %r0\n")).unwrap();
    assert_eq!(h.run(&src("ldts t, %r1\nret %r1\n")), Ok(7));
    h.ctx.thread = 2;
    assert_eq!(h.run(&src("ldts t, %r1\nret %r1\n")), Ok(0));
    h.ctx.thread = 1;
    assert_eq!(h.state.dynvars.len(), 1);
    h.run(&src("stts %r0, t\nret %r0\n")).unwrap();
    assert_eq!(h.state.dynvars.len(), 0);
    assert_eq!(h.run(&src("ldts t, %r1\nret %r1\n")), Ok(0));
    // String thread-locals: unset is NULL (0).
    assert_eq!(h.run(&src("ldts ts, %r1\nret %r1\n")), Ok(0));
    h.run(&src("sets \"abc\", %r1\nstts %r1, ts\nret %r0\n"))
        .unwrap();
    h.m.begin_firing();
    assert_eq!(
        h.run_str(&src_str("ldts ts, %r1\nret %r1\n")).unwrap(),
        "abc"
    );
}

#[test]
fn clause_locals_live_for_one_firing() {
    let mut h = H::new();
    h.run(&src(
        "setx 5, %r1\nstls %r1, l\nsets \"x\", %r2\nstls %r2, ls\nret %r0\n",
    ))
    .unwrap();
    // Next clause of the same firing sees them.
    assert_eq!(h.run(&src("ldls l, %r1\nret %r1\n")), Ok(5));
    assert_eq!(h.run_str(&src_str("ldls ls, %r1\nret %r1\n")).unwrap(), "x");
    h.m.begin_firing();
    assert_eq!(h.run(&src("ldls l, %r1\nret %r1\n")), Ok(0));
}

#[test]
fn associative_arrays_keyed_by_int_and_string_tuples() {
    let mut h = H::new();
    let store = "flushts\nsetx 1, %r1\npushtv int, %r1\nsets \"k\", %r2\npushtr string, %r0, %r2\nsetx 99, %r3\nstgaa %r3, a\nret %r0\n";
    h.run(&src(store)).unwrap();
    let load = |k: &str| {
        src(&format!(
            "flushts\nsetx 1, %r1\npushtv int, %r1\nsets \"{k}\", %r2\npushtr string, %r0, %r2\nldgaa a, %r3\nret %r3\n"
        ))
    };
    assert_eq!(h.run(&load("k")), Ok(99));
    assert_eq!(h.run(&load("kk")), Ok(0));
    // The same string from another address (scratch) finds the same entry.
    let from_scratch = "flushts\nsetx 1, %r1\npushtv int, %r1\nsets \"k\", %r2\nsetx 2, %r4\nallocs %r4, %r5\ncopys %r2, %r4, %r5\npushtr string, %r0, %r5\nldgaa a, %r3\nret %r3\n";
    assert_eq!(h.run(&src(from_scratch)), Ok(99));
    // Thread-local arrays are per thread.
    let tstore = "flushts\npushtv int, %r0\nsetx 3, %r3\nsttaa %r3, ta\nret %r0\n";
    let tload = "flushts\npushtv int, %r0\nldtaa ta, %r3\nret %r3\n";
    h.run(&src(tstore)).unwrap();
    assert_eq!(h.run(&src(tload)), Ok(3));
    h.ctx.thread = 9;
    assert_eq!(h.run(&src(tload)), Ok(0));
    // Assigning zero frees.
    let n = h.state.dynvars.len();
    h.run(&src("flushts\nsetx 1, %r1\npushtv int, %r1\nsets \"k\", %r2\npushtr string, %r0, %r2\nstgaa %r0, a\nret %r0\n")).unwrap();
    assert_eq!(h.state.dynvars.len(), n - 1);
    // String values.
    h.run(&src(
        "flushts\npushtv int, %r0\nsets \"val\", %r1\nstgaa %r1, as\nret %r0\n",
    ))
    .unwrap();
    assert_eq!(
        h.run_str(&src_str(
            "flushts\npushtv int, %r0\nldgaa as, %r1\nret %r1\n"
        ))
        .unwrap(),
        "val"
    );
}

#[test]
fn dynamic_space_exhaustion_counts_drops() {
    let mut h = H::with(VmOptions {
        dynvarsize: 500,
        ..Default::default()
    });
    let store = |i: u64| {
        src(&format!(
            "flushts\nsetx {i}, %r1\npushtv int, %r1\nstgaa %r1, a\nret %r0\n"
        ))
    };
    for i in 1..=50 {
        match h.run(&store(i)) {
            Ok(_) => assert!(!h.m.take_dropped_exit()),
            // a dropped store ends the run, and the machine says it is no fault
            Err(_) => assert!(h.m.take_dropped_exit()),
        }
    }
    assert!(h.state.dynvar_drops() > 0);
    assert!(h.state.dynvars.used() <= 500);
    let stored = h.state.dynvars.len() as u64;
    assert_eq!(stored + h.state.dynvar_drops(), 50);
}

#[test]
fn variable_table_mismatch_faults_when_unverified() {
    let mut h = H::new();
    // ldgs of a user variable not in the table.
    let o = dtrace_dif::asm::assemble("ldgs DT_VAR(1300), %r1\nret %r1\n").unwrap();
    assert!(dtrace_dif::verify::verify(&o).is_err());
    assert_eq!(kind(h.run_obj(&o)), FaultKind::IllOp);
    // stgs to a built-in.
    let o = dtrace_dif::asm::assemble("stgs %r1, DT_VAR(280)\nret %r1\n").unwrap();
    assert_eq!(kind(h.run_obj(&o)), FaultKind::IllOp);
}

#[test]
fn keys_follow_memory_changes_within_a_run() {
    // Key "ab" stored, then the key bytes in scratch are changed to "xb" by a store between two
    // lookups with the same tuple registers: the second lookup must see the new key.
    let mut h = H::new();
    h.run(&src(
        "flushts\nsets \"ab\", %r1\npushtr string, %r0, %r1\nsetx 5, %r2\nstgaa %r2, a\nret %r0\n",
    ))
    .unwrap();
    let body = "sets \"ab\", %r1\nsetx 3, %r2\nallocs %r2, %r3\ncopys %r1, %r2, %r3\nflushts\npushtr string, %r0, %r3\nldgaa a, %r4\nsetx 0x78, %r5\nstb %r5, [%r3]\nldgaa a, %r6\nsetx 10, %r7\nmul %r4, %r7, %r4\nadd %r4, %r6, %r4\nret %r4\n";
    // First lookup finds 5, second ("xb") finds nothing: 5 * 10 + 0.
    assert_eq!(h.run(&src(body)), Ok(50));
}

#[test]
fn a_string_variable_set_to_null_loads_as_null() {
    let mut h = H::new();
    // Never stored: the empty string.
    assert_ne!(h.run(&src("ldgs gs, %r1\nret %r1\n")), Ok(0));
    // Set to NULL: NULL again, so s[1] faults at address 1 as in DTrace for Linux.
    h.run(&src("stgs %r0, gs\nret %r0\n")).unwrap();
    assert_eq!(h.run(&src("ldgs gs, %r1\nret %r1\n")), Ok(0));
    let f = h
        .run(&src(
            "ldgs gs, %r1\nsetx 1, %r2\nadd %r1, %r2, %r1\nldub [%r1], %r3\nret %r3\n",
        ))
        .unwrap_err();
    assert_eq!((f.kind, f.addr), (FaultKind::BadAddr, 1));
    // A clause-local likewise; a string stored again is a string.
    h.run(&src("stls %r0, ls\nldls ls, %r1\nret %r1\n"))
        .unwrap();
    h.run(&src("sets \"x\", %r1\nstgs %r1, gs\nret %r0\n"))
        .unwrap();
    assert_eq!(h.run_str(&src_str("ldgs gs, %r1\nret %r1\n")).unwrap(), "x");
}
