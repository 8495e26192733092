//! Tests of what clauses need captured and of the capture specs built from them.

use super::merge::merge_kernel_copies;
use super::*;
use crate::capture::spec::{MAX_COPIES, MAX_COPY_SIZE, MAX_DEREFS, MAX_STACK_DEPTH};
use crate::capture::{AddrBase, AddrExpr, CaptureSpec, CopyRequest, MemKind};

fn needs(src: &str) -> ProgramNeeds {
    let p = dtrace_compiler::compile(src, &dtrace_compiler::CompileOptions::default())
        .unwrap_or_else(|e| panic!("{e:?}"));
    program_needs(&p)
}

#[test]
fn copyinstr_of_an_argument_is_found() {
    let n = needs(r#"syscall::openat:entry { printf("%s", copyinstr(arg1)); }"#);
    assert_eq!(n.clauses.len(), 1);
    assert_eq!(n.clauses[0].0.function, "openat");
    let c = &n.clauses[0].1;
    assert!(!c.any_string_arg);
    assert_eq!(
        c.copies,
        vec![CopyRequest::new(
            AddrExpr::arg(1),
            MemKind::UserString,
            DEFAULT_STRING_STORAGE
        )]
    );
}

#[test]
fn args_array_and_copyin_with_constant_size() {
    let n = needs(
        r#"syscall::write:entry { trace(copyinstr(args[1])); tracemem(copyin(arg1, 16), 16); }"#,
    );
    let c = &n.clauses[0].1;
    assert!(c
        .copies
        .iter()
        .any(|c| c.addr == AddrExpr::arg(1) && c.kind == MemKind::UserBytes && c.size == 16));
    assert!(!c.unresolved_copyin);
}

#[test]
fn computed_addresses_fall_back() {
    let n = needs(r#"syscall::write:entry { trace(copyinstr(arg1 + arg2)); }"#);
    assert!(n.clauses[0].1.any_string_arg);
    let spec = spec_for(&[&n.clauses[0].1], (&[1], false), 64).unwrap();
    assert_eq!(spec.copies.len(), 1);
    assert_eq!(spec.copies[0].size, 64);
    let n = needs(r#"syscall::write:entry { trace(*(int *)copyin(arg1 + arg2, 4)); }"#);
    assert!(n.clauses[0].1.unresolved_copyin);
    assert!(spec_for(&[&n.clauses[0].1], (&[], false), 64)
        .unwrap()
        .copies
        .is_empty());
}

#[test]
fn stacks_and_union() {
    let n = needs(
        r#"syscall::read:entry { stack(); } syscall::read:entry { ustack(5); trace(copyinstr(arg0)); }"#,
    );
    let all: Vec<&ClauseNeeds> = n.clauses.iter().map(|(_, c)| c).collect();
    let spec = spec_for(&all, (&[], false), DEFAULT_STRING_STORAGE).unwrap();
    // The tracing machinery's frames, cut at delivery, are taken beyond those shown.
    assert_eq!(spec.kstack, Some(DEFAULT_STACKFRAMES + CALLER_FRAMES));
    assert_eq!(spec.ustack, Some(5));
    assert_eq!(spec.copies.len(), 1);
    assert!(spec.retry_at_return);
}

#[test]
fn no_needs_for_counting() {
    let n = needs("syscall::write:entry /execname == \"sh\"/ { @c = count(); }");
    let c = &n.clauses[0].1;
    // Nothing to capture; the predicate goes to the kernel filter.
    assert!(c.predicate.is_some());
    assert_eq!(
        ClauseNeeds {
            predicate: None,
            ..c.clone()
        },
        ClauseNeeds::default()
    );
}

#[test]
fn a_probe_is_filtered_when_every_clause_has_a_predicate() {
    let two = needs(
        "syscall::write:entry /pid == 1/ { @a = count(); } \
         syscall::write:entry /execname == \"sh\"/ { @b = count(); }",
    );
    let all: Vec<&ClauseNeeds> = two.clauses.iter().map(|(_, n)| n).collect();
    let spec = spec_for(&all, (&[], false), 64).unwrap();
    let f = spec.filter.expect("a kernel filter");
    assert_eq!(f.predicates.len(), 2);
    assert_eq!(f.strsize, 64);
    let mixed = needs(
        "syscall::write:entry /pid == 1/ { @a = count(); } syscall::write:entry { @b = count(); }",
    );
    let all: Vec<&ClauseNeeds> = mixed.clauses.iter().map(|(_, n)| n).collect();
    assert_eq!(spec_for(&all, (&[], false), 64).unwrap().filter, None);
}

#[test]
fn pid_predicates_filter_in_the_kernel() {
    let pid = |src: &str| needs(src).clauses[0].1.filter_pid;
    assert_eq!(
        pid("syscall::write:entry /pid == 1234/ { @c = count(); }"),
        Some(1234)
    );
    assert_eq!(
        pid("syscall::write:entry /1234 == pid/ { @c = count(); }"),
        Some(1234)
    );
    assert_eq!(
        pid("syscall::write:entry /pid != 1234/ { @c = count(); }"),
        None
    );
    assert_eq!(
        pid("syscall::write:entry /tid == 1234/ { @c = count(); }"),
        None
    );
    assert_eq!(
        pid("syscall::write:entry /pid == 1234 && arg0 == 1/ { @c = count(); }"),
        None
    );
    assert_eq!(
        pid("syscall::write:entry /pid == 0/ { @c = count(); }"),
        None
    );
    assert_eq!(
        pid("syscall::write:entry /pid == 5000000000/ { @c = count(); }"),
        None
    );
    assert_eq!(pid("syscall::write:entry { @c = count(); }"), None);
    // The union: one filter only when every clause on the probe has the same one.
    let n = needs(
        "syscall::write:entry /pid == 7/ { @c = count(); } syscall::write:entry /pid == 7/ { trace(1); }",
    );
    let all: Vec<&ClauseNeeds> = n.clauses.iter().map(|(_, c)| c).collect();
    assert_eq!(
        spec_for(&all, (&[], false), 256).unwrap().filter_pid,
        Some(7)
    );
    let n = needs(
        "syscall::write:entry /pid == 7/ { @c = count(); } syscall::write:entry { trace(1); }",
    );
    let all: Vec<&ClauseNeeds> = n.clauses.iter().map(|(_, c)| c).collect();
    assert_eq!(spec_for(&all, (&[], false), 256).unwrap().filter_pid, None);
}

#[test]
fn target_predicates_filter_in_the_kernel() {
    let opts = dtrace_compiler::CompileOptions {
        macros: vec![("target".into(), "4321".into())],
        ..dtrace_compiler::CompileOptions::default()
    };
    let p = dtrace_compiler::compile(
        "syscall::write:entry /pid == $target/ { @c = count(); }",
        &opts,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(program_needs(&p).clauses[0].1.filter_pid, Some(4321));
}

#[test]
fn used_arguments() {
    let used = |src: &str| needs(src).clauses[0].1.used_args;
    assert_eq!(used("sdt:::x { trace(arg2); }"), 1 << 2);
    assert_eq!(used("sdt:::x /args[0] == 1/ { trace(args[3]); }"), 0b1001);
    assert_eq!(used("sdt:::x { trace(args[arg1]); }"), ALL_ARGS);
    assert_eq!(used("sdt:::x { trace(pid); }"), 0);
}

const FOO: &str = "struct foo { int a; long b; struct foo *next; char name[16]; };";

fn kcopy(base: AddrBase, offset: i32, derefs: &[i32], kind: MemKind, size: u32) -> CopyRequest {
    CopyRequest::new(AddrExpr::kernel(base, offset, derefs.to_vec()), kind, size)
}

#[test]
fn kernel_chains_through_arguments_ask_for_each_step() {
    let n = needs(&format!(
        "{FOO} sdt:::x {{ trace(((struct foo *)arg0)->next->a); trace(((struct foo *)args[1])->b); trace(args[2]); }}"
    ));
    let c = &n.clauses[0].1;
    let bytes = MemKind::KernelBytes;
    // The pointer `next` (8 bytes at 16), then `a` (4 bytes at 0 of what it points at).
    assert!(
        c.copies
            .contains(&kcopy(AddrBase::Arg(0), 16, &[], bytes, 8)),
        "{c:?}"
    );
    assert!(
        c.copies
            .contains(&kcopy(AddrBase::Arg(0), 16, &[0], bytes, 4)),
        "{c:?}"
    );
    assert!(
        c.copies
            .contains(&kcopy(AddrBase::Arg(1), 8, &[], bytes, 8)),
        "{c:?}"
    );
    // Arguments only traced are not memory.
    assert_eq!(c.copies.len(), 3, "{c:?}");
    assert_eq!(c.used_args, 0b111);
    assert!(c.unsupported.is_none());
}

#[test]
fn kernel_chains_from_curthread_merge_per_object() {
    let n = needs(&format!(
        "{FOO} sdt:::x /((struct foo *)curthread)->a == 1/ {{ trace(((struct foo *)curthread)->b);
           trace(stringof(((struct foo *)curthread)->name)); trace(((struct foo *)curthread)->name[3]);
           trace(((struct foo *)curthread)->next->next->b); }}"
    ));
    let c = &n.clauses[0].1;
    let (bytes, string) = (MemKind::KernelBytes, MemKind::KernelString);
    let task = AddrBase::CurrentTask;
    for want in [
        kcopy(task, 0, &[], bytes, 4),
        kcopy(task, 8, &[], bytes, 8),
        kcopy(task, 24, &[], string, DEFAULT_STRING_STORAGE),
        kcopy(task, 27, &[], bytes, 1),
        kcopy(task, 16, &[], bytes, 8),
        kcopy(task, 16, &[16], bytes, 8),
        kcopy(task, 16, &[16, 8], bytes, 8),
    ] {
        assert!(c.copies.contains(&want), "{want:?} not in {:?}", c.copies);
    }
    let spec = spec_for(&[c], (&[], false), DEFAULT_STRING_STORAGE).unwrap();
    // The task's own fields in one copy, bytes 0..28; the string apart; one copy per hop.
    assert!(
        spec.copies.contains(&kcopy(task, 0, &[], bytes, 28)),
        "{:?}",
        spec.copies
    );
    assert!(spec
        .copies
        .contains(&kcopy(task, 24, &[], string, DEFAULT_STRING_STORAGE)));
    assert!(spec.copies.contains(&kcopy(task, 16, &[16], bytes, 8)));
    assert!(spec.copies.contains(&kcopy(task, 16, &[16, 8], bytes, 8)));
    assert_eq!(spec.copies.len(), 4, "{:?}", spec.copies);
}

#[test]
fn clause_locals_carry_chains() {
    let n = needs(&format!(
        "{FOO} sdt:::x {{ this->t = (struct foo *)curthread; }} sdt:::x {{ this->t = (struct foo *)curthread; trace(this->t->next->a); }}"
    ));
    let c = &n.clauses[1].1;
    assert!(
        c.copies.contains(&kcopy(
            AddrBase::CurrentTask,
            16,
            &[0],
            MemKind::KernelBytes,
            4
        )),
        "{c:?}"
    );
    assert!(n.clauses[0].1.copies.is_empty());
}

#[test]
fn thread_locals_holding_curthread_chains() {
    // Every store of self->t is curthread (or a clear): its reads are captured where they are.
    let n = needs(&format!(
        "{FOO} sdt:::a {{ self->t = (struct foo *)curthread; self->p = (struct foo *)arg0; }}
         sdt:::b /self->t/ {{ trace(self->t->next->a); trace(self->p->a); self->t = 0; }}"
    ));
    let c = &n.clauses[1].1;
    assert!(
        c.copies.contains(&kcopy(
            AddrBase::CurrentTask,
            16,
            &[0],
            MemKind::KernelBytes,
            4
        )),
        "{c:?}"
    );
    // self->p came from another probe's argument: not known at b.
    assert_eq!(c.copies.len(), 2, "{c:?}");
    // Two different stores: not followed.
    let n = needs(&format!(
        "{FOO} sdt:::a {{ self->t = (struct foo *)curthread; }}
         sdt:::c {{ self->t = ((struct foo *)curthread)->next; }}
         sdt:::b {{ trace(self->t->a); }}"
    ));
    assert!(n.clauses[2].1.copies.is_empty(), "{:?}", n.clauses[2].1);
}

#[test]
fn strtok_reads_the_string_at_a_pointer() {
    // strtok((char *)p, d): the pointer is pushed by value, the string at it read all the same.
    let n = needs(&format!(
        r#"{FOO} sdt:::x {{ trace(strtok((char *)((struct foo *)curthread)->name, ",")); }}
           sdt:::x {{ trace(strtok((char *)((struct foo *)curthread)->next, ",")); }}
           fbt::x:entry {{ trace(strtok((char *)arg2, ",")); }}"#
    ));
    let string = MemKind::KernelString;
    let task = AddrBase::CurrentTask;
    let c = &n.clauses[0].1;
    assert!(
        c.copies
            .contains(&kcopy(task, 24, &[], string, DEFAULT_STRING_STORAGE)),
        "{c:?}"
    );
    let c = &n.clauses[1].1;
    assert!(
        c.copies
            .contains(&kcopy(task, 16, &[0], string, DEFAULT_STRING_STORAGE)),
        "{c:?}"
    );
    assert_eq!(n.clauses[2].1.string_at_args, 1 << 2);
}

#[test]
fn strings_of_plain_arguments_and_user_pointers() {
    // A plain argument used as a string is a tracepoint array delivered as its capture's address:
    // nothing to ask for.
    let n = needs("sdt:::x { trace(stringof(args[0])); }");
    assert!(n.clauses[0].1.copies.is_empty());
    let spec = spec_for(&[&n.clauses[0].1], (&[], false), 64).unwrap();
    assert!(spec.copies.is_empty());
    // At fbt an argument's value is a kernel address: the string at it is copied at the probe.
    let n =
        needs(r#"fbt::x:entry { trace(stringof(arg1)); } fbt::x:entry /(string)arg3 == "a"/ {}"#);
    let all: Vec<&ClauseNeeds> = n.clauses.iter().map(|(_, c)| c).collect();
    assert_eq!(
        (all[0].string_at_args, all[1].string_at_args),
        (1 << 1, 1 << 3)
    );
    let spec = spec_for(&all, (&[], true), 64).unwrap();
    for arg in [1, 3] {
        assert!(
            spec.copies.iter().any(|c| c.addr == AddrExpr::arg(arg)
                && c.kind == MemKind::KernelString
                && c.size == 64),
            "{:?}",
            spec.copies
        );
    }
    // A user pointer read from the kernel: a user string at the end of the chain.
    let n = needs(&format!(
        "{FOO} sdt:::x {{ trace(copyinstr(((struct foo *)curthread)->next->b)); }}"
    ));
    let c = &n.clauses[0].1;
    assert!(!c.any_string_arg);
    assert!(c.copies.contains(&kcopy(
        AddrBase::CurrentTask,
        16,
        &[8, 0],
        MemKind::UserString,
        DEFAULT_STRING_STORAGE
    )));
    let n = needs(&format!(
        "{FOO} sdt:::x {{ tracemem(copyin(((struct foo *)curthread)->next->b, 80), 80); }}"
    ));
    let c = &n.clauses[0].1;
    assert!(!c.unresolved_copyin);
    assert!(c.copies.contains(&kcopy(
        AddrBase::CurrentTask,
        16,
        &[8, 0],
        MemKind::UserBytes,
        80
    )));
}

#[test]
fn both_arms_of_a_conditional_chain() {
    // The NULL arm of the ternary does not hide the chain of the other arm.
    let n = needs(&format!(
        "{FOO} sdt:::x {{ this->f = (struct foo *)curthread;
           trace(copyinstr(this->f->next ? this->f->next->b : 0));
           trace(this->f->a > 0 ? this->f->next->a : this->f->next->next->a); }}"
    ));
    let c = &n.clauses[0].1;
    let task = AddrBase::CurrentTask;
    for want in [
        kcopy(
            task,
            16,
            &[8, 0],
            MemKind::UserString,
            DEFAULT_STRING_STORAGE,
        ),
        kcopy(task, 16, &[0], MemKind::KernelBytes, 4),
        kcopy(task, 16, &[16, 0], MemKind::KernelBytes, 4),
    ] {
        assert!(c.copies.contains(&want), "{want:?} not in {:?}", c.copies);
    }
    assert!(!c.any_string_arg);
}

#[test]
fn chains_past_the_hop_limit_are_refused() {
    let deep = format!(
        "((struct foo *)curthread){}->a",
        "->next".repeat(MAX_DEREFS + 1)
    );
    let n = needs(&format!("{FOO} sdt:::x {{ trace({deep}); }}"));
    let c = &n.clauses[0].1;
    let e = spec_for(&[c], (&[], false), DEFAULT_STRING_STORAGE).unwrap_err();
    assert!(e.starts_with("not yet supported:"), "{e}");
    // One copy per hop: the copy limit comes first.
    let ok = format!(
        "((struct foo *)curthread){}->a",
        "->next".repeat(MAX_COPIES - 1)
    );
    let n = needs(&format!("{FOO} sdt:::x {{ trace({ok}); }}"));
    assert!(spec_for(&[&n.clauses[0].1], (&[], false), DEFAULT_STRING_STORAGE).is_ok());
}

#[test]
fn merging_keeps_within_the_copy_limit() {
    let task = AddrBase::CurrentTask;
    // Far apart fields of one object: joined, closest first, down to the limit.
    let far: Vec<CopyRequest> = (0..12)
        .map(|i| kcopy(task, i * 600, &[], MemKind::KernelBytes, 8))
        .collect();
    let m = merge_kernel_copies(far);
    assert_eq!(m.len(), MAX_COPIES);
    assert!(m.iter().all(|c| c.size <= MAX_COPY_SIZE));
    // Every original range is inside one merged copy.
    for i in 0..12 {
        assert!(m
            .iter()
            .any(|c| c.addr.offset <= i * 600 && i * 600 + 8 <= c.addr.offset + c.size as i32));
    }
    // Different objects and kinds are never joined; overlapping ones are.
    let m = merge_kernel_copies(vec![
        kcopy(task, 0, &[], MemKind::KernelBytes, 8),
        kcopy(task, 4, &[], MemKind::KernelBytes, 8),
        kcopy(task, 0, &[0], MemKind::KernelBytes, 8),
        kcopy(AddrBase::Arg(0), 0, &[0], MemKind::KernelBytes, 8),
        kcopy(task, 8, &[], MemKind::KernelString, 8),
        kcopy(AddrBase::Arg(1), 0, &[], MemKind::UserString, 8),
    ]);
    assert_eq!(m.len(), 5, "{m:?}");
    assert!(m.contains(&kcopy(task, 0, &[], MemKind::KernelBytes, 12)));
    // Too large to join: left apart, and the spec says so.
    let big: Vec<CopyRequest> = (0..9)
        .map(|i| {
            kcopy(
                task,
                i * MAX_COPY_SIZE as i32,
                &[],
                MemKind::KernelBytes,
                8000,
            )
        })
        .collect();
    assert_eq!(merge_kernel_copies(big.clone()).len(), 9);
    let n = ClauseNeeds {
        copies: big,
        ..ClauseNeeds::default()
    };
    assert!(spec_for(&[&n], (&[], false), 64)
        .unwrap_err()
        .starts_with("not yet supported"));
}

#[test]
fn process_context_variables_ask_for_their_captures() {
    let n = needs(
        "syscall::write:entry { trace(caller); } syscall::write:entry { trace(ucaller); }
         syscall::write:entry { trace(execargs); } syscall::write:entry /progenyof(1)/ { trace(1); }
         syscall::write:entry { trace(stackdepth); trace(ustackdepth); }",
    );
    let c: Vec<&ClauseNeeds> = n.clauses.iter().map(|(_, c)| c).collect();
    assert!(c[0].caller && !c[0].ucaller && !c[0].execargs && !c[0].ancestors);
    assert!(c[1].ucaller && !c[1].caller);
    assert!(c[2].execargs);
    assert!(c[3].ancestors);
    assert_eq!(
        (c[4].kstack, c[4].ustack),
        (Some(MAX_STACK_DEPTH), Some(MAX_STACK_DEPTH))
    );
    let one = |i: usize| spec_for(&[c[i]], (&[], false), 300).unwrap();
    assert_eq!((one(0).kstack, one(0).ustack), (Some(CALLER_FRAMES), None));
    assert_eq!((one(1).kstack, one(1).ustack), (None, Some(UCALLER_FRAMES)));
    assert_eq!(one(2).execargs, Some(300));
    assert!(one(3).ancestors && !one(2).ancestors);
    // A stack() deeper than the caller's frames keeps its depth, and the tracing frames.
    let n = needs("syscall::write:entry { stack(40); trace(caller); }");
    assert_eq!(
        spec_for(&[&n.clauses[0].1], (&[], false), 256)
            .unwrap()
            .kstack,
        Some(40 + CALLER_FRAMES)
    );
    // Nothing is captured for clauses that do not read them.
    assert_eq!(
        spec_for(
            &[&needs("syscall::write:entry { trace(pid); }").clauses[0].1],
            (&[], false),
            256
        )
        .unwrap(),
        CaptureSpec::new()
    );
}

#[test]
fn stack_frames_from_action_arguments() {
    assert_eq!(stack_frames(0), DEFAULT_STACKFRAMES);
    assert_eq!(stack_frames(12), 12);
    // Too many to count: as many as a capture takes, never a truncated count.
    assert_eq!(stack_frames(1 << 40), u32::MAX);
    assert_eq!(ustack_frames(0), DEFAULT_USTACKFRAMES);
    // ustack(7, 64): the string space in the high half is not frames.
    assert_eq!(ustack_frames(7 | (64 << 32)), 7);
    assert_eq!(ustack_frames(64 << 32), DEFAULT_USTACKFRAMES);
    let n = needs("syscall::write:entry { stack(); ustack(3, 64); }");
    let spec = spec_for(&[&n.clauses[0].1], (&[], false), 256).unwrap();
    assert_eq!(spec.kstack, Some(DEFAULT_STACKFRAMES + CALLER_FRAMES));
    assert_eq!(spec.ustack, Some(3));
}

#[test]
fn inet_subroutines_ask_for_the_address_bytes() {
    let n = needs(
        "sdt:::x { trace(inet_ntoa((ipaddr_t *)arg0)); trace(inet_ntop(AF_INET, (void *)(arg1 + 4)));
           trace(inet_ntop(AF_INET6, (void *)arg2)); trace(inet_ntoa6((void *)arg3, 1));
           trace(inet_ntop(arg4, (void *)arg5)); }",
    );
    let c = &n.clauses[0].1;
    let bytes = MemKind::KernelBytes;
    for want in [
        kcopy(AddrBase::Arg(0), 0, &[], bytes, 4),
        kcopy(AddrBase::Arg(1), 4, &[], bytes, 4),
        kcopy(AddrBase::Arg(2), 0, &[], bytes, 16),
        kcopy(AddrBase::Arg(3), 0, &[], bytes, 16),
        // A family known only at the probe: an IPv6 address's bytes, the most it reads.
        kcopy(AddrBase::Arg(5), 0, &[], bytes, 16),
    ] {
        assert!(c.copies.contains(&want), "{want:?} not in {:?}", c.copies);
    }
}

#[test]
fn bcopy_asks_for_the_source_bytes() {
    let n = needs(
        "sdt:::x { this->p = alloca(8); bcopy((void *)arg0, this->p, 8); trace(*(int *)this->p);
           bcopy((void *)(arg1 + 2), this->p, 3); bcopy((void *)arg2, this->p, arg3); }",
    );
    let c = &n.clauses[0].1;
    let bytes = MemKind::KernelBytes;
    for want in [
        kcopy(AddrBase::Arg(0), 0, &[], bytes, 8),
        kcopy(AddrBase::Arg(1), 2, &[], bytes, 3),
    ] {
        assert!(c.copies.contains(&want), "{want:?} not in {:?}", c.copies);
    }
    // A size known only at the probe: nothing the capture can size.
    assert!(
        !c.copies.iter().any(|c| c.addr.base == AddrBase::Arg(2)),
        "{:?}",
        c.copies
    );
}
