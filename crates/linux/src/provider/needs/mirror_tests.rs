//! Needs-analysis tests of the thread-variable mirror: thread-locals stored from a probe argument
//! at one probe and copied from at another (`self->buf = arg1` at `read:entry`, `copyin(self->buf,
//! arg0)` at `read:return`), from D source through the compiler's DIF to the mirror ops and the
//! copies of each probe's [`CaptureSpec`].

use super::*;
use crate::capture::spec::{MAX_MIRROR_OPS, MAX_SIZED_COPY};
use crate::capture::{AddrBase, AddrExpr, CopyRequest, MemKind, MirrorOp};
use dtrace_dif::flow::Value;
use dtrace_dif::object::DifObject;

fn needs(src: &str) -> ProgramNeeds {
    let p = dtrace_compiler::compile(src, &dtrace_compiler::CompileOptions::default())
        .unwrap_or_else(|e| panic!("{e:?}"));
    program_needs(&p)
}

/// The variable id of the thread-variable copy in `c` (there must be exactly one).
fn thread_var(c: &ClauseNeeds) -> u32 {
    let ids: Vec<u32> = c
        .copies
        .iter()
        .filter_map(|r| match r.addr.base {
            AddrBase::ThreadVar(v) => Some(v),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 1, "{c:?}");
    ids[0]
}

fn tv(var: u32) -> AddrExpr {
    AddrExpr::kernel(AddrBase::ThreadVar(var), 0, Vec::new())
}

#[test]
fn read_buffer_saved_at_entry_is_copied_at_return() {
    let n = needs(
        r#"syscall::read:entry { self->buf = arg1; }
           syscall::read:return /self->buf/ { printf("%s", stringof(copyin(self->buf, arg0))); self->buf = 0; }"#,
    );
    let (entry, ret) = (&n.clauses[0].1, &n.clauses[1].1);
    let var = thread_var(ret);
    assert_eq!(
        ret.copies,
        vec![CopyRequest {
            addr: tv(var),
            kind: MemKind::UserBytes,
            size: MAX_SIZED_COPY,
            size_arg: Some(0),
        }]
    );
    assert!(!ret.unresolved_copyin && !ret.any_string_arg, "{ret:?}");
    // The entry saves arg1 under the variable; the return clears it.
    assert_eq!(
        entry.mirror,
        vec![MirrorOp {
            var,
            value: Some(AddrExpr::arg(1))
        }]
    );
    assert!(entry.copies.is_empty(), "{entry:?}");
    assert_eq!(ret.mirror, vec![MirrorOp { var, value: None }]);
    // Each probe's spec: the entry only saves, the return copies then removes.
    let es = spec_for(&[entry], (&[], false), DEFAULT_STRING_STORAGE).unwrap();
    assert_eq!(es.mirror, entry.mirror);
    assert!(es.copies.is_empty());
    let rs = spec_for(&[ret], (&[], false), DEFAULT_STRING_STORAGE).unwrap();
    assert_eq!(rs.copies.len(), 1);
    assert_eq!(rs.mirror, vec![MirrorOp { var, value: None }]);
}

#[test]
fn opensnoop_path_saved_at_entry() {
    let n = needs(
        r#"syscall::openat:entry { self->path = arg1; }
           syscall::openat:return /self->path/ { printf("%d %s\n", arg0, copyinstr(self->path)); self->path = 0; }"#,
    );
    let var = thread_var(&n.clauses[1].1);
    assert_eq!(
        n.clauses[1].1.copies,
        vec![CopyRequest::new(
            tv(var),
            MemKind::UserString,
            DEFAULT_STRING_STORAGE
        )]
    );
    assert!(!n.clauses[1].1.any_string_arg);
    assert_eq!(
        n.clauses[0].1.mirror,
        vec![MirrorOp {
            var,
            value: Some(AddrExpr::arg(1))
        }]
    );
    // A constant size and an offset from the saved address.
    let n = needs(
        r#"syscall::write:entry { self->b = arg1; }
           syscall::write:return /self->b/ { tracemem(copyin(self->b + 4, 16), 16); }"#,
    );
    let var = thread_var(&n.clauses[1].1);
    assert_eq!(
        n.clauses[1].1.copies,
        vec![CopyRequest::new(
            AddrExpr::kernel(AddrBase::ThreadVar(var), 4, Vec::new()),
            MemKind::UserBytes,
            16
        )]
    );
}

#[test]
fn stores_from_curthread_chains_and_several_variables() {
    // self->c has two different stores (so it is not one curthread chain read where it is used):
    // each probe saves what it stores.
    let n = needs(
        r#"struct foo { int a; long b; struct foo *next; };
           syscall::read:entry { self->a = arg1; self->c = ((struct foo *)curthread)->next->b; }
           syscall::write:entry { self->c = arg0; }
           syscall::read:return { trace(copyinstr(self->c)); tracemem(copyin(self->a, 8), 8); }"#,
    );
    let ret = &n.clauses[2].1;
    let vars: Vec<u32> = ret
        .copies
        .iter()
        .filter_map(|c| match c.addr.base {
            AddrBase::ThreadVar(v) => Some(v),
            _ => None,
        })
        .collect();
    assert_eq!(vars.len(), 2, "{ret:?}");
    let entry = &n.clauses[0].1;
    assert_eq!(entry.mirror.len(), 2, "{entry:?}");
    assert!(entry
        .mirror
        .iter()
        .any(|m| m.value == Some(AddrExpr::arg(1)) && vars.contains(&m.var)));
    // The value of curthread->next->b: two kernel pointer loads.
    let task_chain = AddrExpr::kernel(AddrBase::CurrentTask, 16, vec![8, 0]);
    let c = entry
        .mirror
        .iter()
        .find(|m| m.value == Some(task_chain.clone()))
        .unwrap_or_else(|| panic!("{entry:?}"));
    assert!(vars.contains(&c.var));
    assert_eq!(
        n.clauses[1].1.mirror,
        vec![MirrorOp {
            var: c.var,
            value: Some(AddrExpr::arg(0))
        }]
    );
}

#[test]
fn variables_not_copied_from_are_not_mirrored() {
    // Stored from an argument but only traced, or used as a kernel pointer: nothing to save.
    let n = needs(
        r#"struct foo { int a; };
           syscall::read:entry { self->fd = arg0; self->p = arg1; self->ts = timestamp; }
           syscall::read:return { trace(self->fd); trace(((struct foo *)self->p)->a); trace(timestamp - self->ts); }"#,
    );
    for (_, c) in &n.clauses {
        assert!(c.mirror.is_empty(), "{c:?}");
        assert!(c.copies.is_empty(), "{c:?}");
    }
    // Stored only from values the probe cannot compute: the copy stays unresolved.
    let n = needs(
        r#"syscall::read:entry { self->b = arg1 + arg2; }
           syscall::read:return { tracemem(copyin(self->b, 8), 8); }"#,
    );
    assert!(n.clauses[1].1.unresolved_copyin, "{:?}", n.clauses[1].1);
    assert!(n.clauses[1].1.copies.is_empty());
    assert!(n.clauses[0].1.mirror.is_empty());
    // A store of something else beside the argument removes the entry at that probe.
    let n = needs(
        r#"syscall::read:entry { self->b = arg1; }
           syscall::write:entry { self->b = arg1 + arg2; }
           syscall::read:return { tracemem(copyin(self->b, 8), 8); }"#,
    );
    let var = thread_var(&n.clauses[2].1);
    assert_eq!(n.clauses[1].1.mirror, vec![MirrorOp { var, value: None }]);
}

#[test]
fn curthread_variables_are_still_read_directly() {
    // Every store is the same curthread chain: the copy is made from the chain, no mirror.
    let n = needs(
        r#"struct foo { int a; long b; struct foo *next; };
           syscall::read:entry { self->c = ((struct foo *)curthread)->next->b; }
           syscall::read:return { trace(copyinstr(self->c)); }"#,
    );
    let c = &n.clauses[1].1;
    assert_eq!(c.copies.len(), 1, "{c:?}");
    assert_eq!(c.copies[0].addr.base, AddrBase::CurrentTask);
    assert!(n.clauses[0].1.mirror.is_empty());
}

#[test]
fn predicated_stores_and_clears_merge_per_probe() {
    // Two clauses of one probe: the save wins over the clear (a clause whose predicate fails
    // stores nothing); the mirror may then differ from the D variable, which delivery checks.
    let n = needs(
        r#"syscall::read:entry /execname == "a"/ { self->b = arg1; }
           syscall::read:entry /execname != "a"/ { self->b = 0; }
           syscall::read:return /self->b/ { tracemem(copyin(self->b, 8), 8); }"#,
    );
    let var = thread_var(&n.clauses[2].1);
    let spec = spec_for(&[&n.clauses[1].1, &n.clauses[0].1], (&[], false), 256).unwrap();
    assert_eq!(
        spec.mirror,
        vec![MirrorOp {
            var,
            value: Some(AddrExpr::arg(1))
        }]
    );
    let mut acc = Vec::new();
    mirror::merge_ops(
        &mut acc,
        &[
            MirrorOp {
                var: 1,
                value: Some(AddrExpr::arg(0)),
            },
            MirrorOp {
                var: 1,
                value: Some(AddrExpr::arg(2)),
            },
            MirrorOp {
                var: 2,
                value: None,
            },
        ],
    );
    assert_eq!(acc[0].value, Some(AddrExpr::arg(2)));
    // Past the limit, removals are dropped first.
    let many: Vec<MirrorOp> = (10..10 + MAX_MIRROR_OPS as u32)
        .map(|var| MirrorOp {
            var,
            value: Some(AddrExpr::arg(1)),
        })
        .collect();
    mirror::merge_ops(&mut acc, &many);
    assert_eq!(acc.len(), MAX_MIRROR_OPS);
    assert!(acc.iter().all(|m| m.value.is_some()));
}

#[test]
fn by_reference_variables_are_never_mirrored() {
    use dtrace_dif::object::{DifType, VarEntry, DIFV_SCOPE_THREAD};
    let obj = DifObject {
        vartab: vec![VarEntry {
            name: 0,
            id: 7,
            kind: 0,
            scope: DIFV_SCOPE_THREAD,
            flags: 0,
            ty: DifType::string(256),
        }],
        ..DifObject::default()
    };
    assert_eq!(mirror::store(&obj, 7, &Value::Addr(AddrExpr::arg(1))), None);
    assert!(mirror::store(&obj, 8, &Value::Addr(AddrExpr::arg(1))).is_some());
}

#[test]
fn a_load_after_a_store_in_the_same_clause_reads_what_was_stored() {
    let n = needs(
        r#"syscall::openat:entry { self->p = arg1; printf("%s", copyinstr(self->p)); }
           syscall::openat:return /self->p/ { printf("%s", copyinstr(self->p)); self->p = 0; }"#,
    );
    let entry = &n.clauses[0].1;
    // The entry copies its own argument; the return reads the mirror the entry saves.
    assert_eq!(
        entry.copies,
        vec![CopyRequest::new(
            AddrExpr::arg(1),
            MemKind::UserString,
            DEFAULT_STRING_STORAGE
        )]
    );
    let var = thread_var(&n.clauses[1].1);
    assert_eq!(
        entry.mirror,
        vec![MirrorOp {
            var,
            value: Some(AddrExpr::arg(1))
        }]
    );
    // Alone, nothing is mirrored.
    let n = needs(r#"syscall::openat:entry { self->p = arg1; printf("%s", copyinstr(self->p)); }"#);
    assert!(n.clauses[0].1.mirror.is_empty());
    assert_eq!(n.clauses[0].1.copies.len(), 1);
}

#[test]
fn programs_sharing_thread_locals_mirror_for_each_other() {
    let compile = |src: &str| {
        dtrace_compiler::compile(src, &dtrace_compiler::CompileOptions::default())
            .unwrap_or_else(|e| panic!("{e:?}"))
    };
    let store = compile("syscall::read:entry { self->buf = arg1; }");
    // Compiled apart here, so the variable is declared (the consumer shares one identifier table).
    let load = compile(
        "self uint64_t buf; syscall::read:return /self->buf/ { tracemem(copyin(self->buf, arg0), 64); self->buf = 0; }",
    );
    // Alone, neither mirrors anything.
    assert!(program_needs(&store).clauses[0].1.mirror.is_empty());
    assert!(program_needs(&load).clauses[0].1.unresolved_copyin);
    let ctx = mirror_context(&[&store, &load]);
    let s = program_needs_in(&store, &ctx);
    let l = program_needs_in(&load, &ctx);
    let var = thread_var(&l.clauses[0].1);
    assert_eq!(
        s.clauses[0].1.mirror,
        vec![MirrorOp {
            var,
            value: Some(AddrExpr::arg(1))
        }]
    );
    assert_eq!(l.clauses[0].1.mirror, vec![MirrorOp { var, value: None }]);
    assert_eq!(ctx.loaded, [var].into_iter().collect());
    // A context of programs that copy from nothing changes nothing.
    let other = compile("syscall::write:entry { self->x = arg1; }");
    let ctx = mirror_context(&[&store, &other]);
    assert!(ctx.loaded.is_empty());
    assert!(program_needs_in(&store, &ctx).clauses[0]
        .1
        .mirror
        .is_empty());
}

#[test]
fn a_later_clause_of_the_storing_probe_copies_from_the_stored_address() {
    let n = needs(
        r#"syscall::write:entry { self->b = arg1; }
           syscall::write:entry /self->b/ { tracemem(copyin(self->b + 2, 8), 8); }"#,
    );
    let (store, load) = (&n.clauses[0].1, &n.clauses[1].1);
    let var = thread_var(load);
    // In clause order the copy is made from arg1 + 2 itself.
    let spec = spec_for(&[store, load], (&[], false), DEFAULT_STRING_STORAGE).unwrap();
    assert_eq!(
        spec.copies,
        vec![CopyRequest::new(
            AddrExpr::kernel(AddrBase::Arg(1), 2, Vec::new()),
            MemKind::UserBytes,
            8
        )]
    );
    assert_eq!(
        spec.mirror,
        vec![MirrorOp {
            var,
            value: Some(AddrExpr::arg(1))
        }]
    );
    // A clause before the store reads what an earlier firing saved: the mirror.
    let spec = spec_for(&[load, store], (&[], false), DEFAULT_STRING_STORAGE).unwrap();
    assert_eq!(
        spec.copies[0].addr,
        AddrExpr::kernel(AddrBase::ThreadVar(var), 2, Vec::new())
    );
}
