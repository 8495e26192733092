//! Needs-analysis tests of copies sized at the probe (`copyin(arg1, arg2)`) and of user pointer
//! chains (`copyinstr(this->argv[1])`): from D source through the compiler's DIF to the capture
//! requests and the merged [`CaptureSpec`].

use super::*;
use crate::capture::spec::{MAX_SIZED_COPY, MAX_USER_DEREFS};
use crate::capture::{AddrBase, AddrExpr, CopyRequest, MemKind};

fn needs(src: &str) -> ProgramNeeds {
    let p = dtrace_compiler::compile(src, &dtrace_compiler::CompileOptions::default())
        .unwrap_or_else(|e| panic!("{e:?}"));
    program_needs(&p)
}

fn one(src: &str) -> ClauseNeeds {
    needs(src).clauses.remove(0).1
}

fn user(addr: AddrExpr, kind: MemKind, size: u32, size_arg: Option<usize>) -> CopyRequest {
    CopyRequest {
        addr,
        kind,
        size,
        size_arg,
    }
}

fn hops(arg: usize, offset: i32, user_derefs: &[i32]) -> AddrExpr {
    AddrExpr {
        user_derefs: user_derefs.to_vec(),
        ..AddrExpr::kernel(AddrBase::Arg(arg), offset, Vec::new())
    }
}

#[test]
fn copyin_sized_by_an_argument() {
    let c = one(r#"syscall::write:entry { printf("%s", stringof(copyin(arg1, arg2))); }"#);
    assert!(!c.unresolved_copyin, "{c:?}");
    assert_eq!(
        c.copies,
        vec![user(
            AddrExpr::arg(1),
            MemKind::UserBytes,
            MAX_SIZED_COPY,
            Some(2)
        )]
    );
    let c = one("syscall::write:entry { tracemem(copyin(args[1], args[2]), 64); }");
    assert_eq!(
        c.copies,
        vec![user(
            AddrExpr::arg(1),
            MemKind::UserBytes,
            MAX_SIZED_COPY,
            Some(2)
        )]
    );
    // The spec keeps it apart from a constant copy of the same address.
    let c = one(
        "syscall::write:entry { tracemem(copyin(arg1, arg2), 64); tracemem(copyin(arg1, 16), 16); }",
    );
    let spec = spec_for(&[&c], (&[], false), DEFAULT_STRING_STORAGE).unwrap();
    assert_eq!(spec.copies.len(), 2, "{:?}", spec.copies);
    assert!(spec
        .copies
        .contains(&user(AddrExpr::arg(1), MemKind::UserBytes, 16, None)));
}

#[test]
fn limited_lengths_reserve_less() {
    // A mask or the constant arm of a minimum bounds what the probe takes.
    let c = one("syscall::write:entry { tracemem(copyin(arg1, arg2 & 0x3f), 64); }");
    assert_eq!(
        c.copies,
        vec![user(AddrExpr::arg(1), MemKind::UserBytes, 0x3f, Some(2))]
    );
    let c = one("syscall::write:entry { tracemem(copyin(arg1, arg2 > 100 ? 100 : arg2), 100); }");
    assert_eq!(
        c.copies,
        vec![user(AddrExpr::arg(1), MemKind::UserBytes, 100, Some(2))],
        "{c:?}"
    );
    // A bound above the limit (the default scratchsize) keeps the limit.
    let c = one("syscall::write:entry { tracemem(copyin(arg1, arg2 & 0xffffff), 64); }");
    assert_eq!(c.copies[0].size, MAX_SIZED_COPY);
    // A length computed otherwise is not foreseen: read at delivery as before.
    let c = one("syscall::write:entry { tracemem(copyin(arg1, arg2 * 2), 64); }");
    assert!(c.unresolved_copyin && c.copies.is_empty(), "{c:?}");
    let c = one("syscall::write:entry { tracemem(copyin(arg1, arg2 & 0), 64); }");
    assert!(c.unresolved_copyin && c.copies.is_empty(), "{c:?}");
}

#[test]
fn sized_copies_take_at_most_the_scratch_space() {
    // copyin() allocates its bytes in scratch: a longer copy faults in the interpreter before
    // it reads, so the probe takes at most scratchsize (rounded up to 8, as the framework does).
    let c = one("#pragma D option scratchsize=5000\n\
         syscall::write:entry { tracemem(copyin(arg1, arg2), 64); }");
    assert_eq!(c.copies[0].size, 5000);
    let c = one("#pragma D option scratchsize=4095\n\
         syscall::write:entry { tracemem(copyin(arg1, arg2), 64); }");
    assert_eq!(c.copies[0].size, 4096);
    // A larger scratchsize: the most the probe takes.
    let c = one("#pragma D option scratchsize=64m\n\
         syscall::write:entry { tracemem(copyin(arg1, arg2), 64); }");
    assert_eq!(c.copies[0].size, MAX_SIZED_COPY);
}

#[test]
fn copyinstr_with_an_argument_as_maxlen() {
    let c = one("syscall::write:entry { trace(copyinstr(arg1, arg2)); }");
    assert_eq!(
        c.copies,
        vec![user(
            AddrExpr::arg(1),
            MemKind::UserString,
            DEFAULT_STRING_STORAGE,
            Some(2)
        )]
    );
    // maxlen counts the NUL, as in DTrace for Linux: at most 7 bytes, 6 characters.
    let c = one("syscall::write:entry { trace(copyinstr(arg1, arg2 & 7)); }");
    assert_eq!(
        c.copies,
        vec![user(AddrExpr::arg(1), MemKind::UserString, 7, Some(2))]
    );
    // A constant maxlen: strsize bytes as before.
    let c = one("syscall::write:entry { trace(copyinstr(arg1, 5)); }");
    assert_eq!(
        c.copies,
        vec![user(
            AddrExpr::arg(1),
            MemKind::UserString,
            DEFAULT_STRING_STORAGE,
            None
        )]
    );
}

#[test]
fn argument_plus_constant_is_captured() {
    let c = one("syscall::write:entry { trace(*(int *)copyin(arg1 + 4, 4)); }");
    assert!(!c.unresolved_copyin);
    assert_eq!(
        c.copies,
        vec![user(hops(1, 4, &[]), MemKind::UserBytes, 4, None)]
    );
    // A computed address still falls back.
    let c = one("syscall::write:entry { trace(*(int *)copyin(arg1 + arg2, 4)); }");
    assert!(c.unresolved_copyin && c.copies.is_empty());
}

#[test]
fn user_pointer_chains_of_execve_argv() {
    // *(uint64_t *)copyin(arg1 + 8, 8): argv[1]'s pointer, then its string.
    let c = one("syscall::execve:entry { trace(copyinstr(*(uint64_t *)copyin(arg1 + 8, 8))); }");
    assert!(!c.any_string_arg && !c.unresolved_copyin, "{c:?}");
    assert_eq!(
        c.copies,
        vec![
            user(hops(1, 8, &[]), MemKind::UserBytes, 8, None),
            user(
                hops(1, 8, &[0]),
                MemKind::UserString,
                DEFAULT_STRING_STORAGE,
                None
            ),
        ]
    );
    // Through a clause-local array, indexed by constants, across clauses of one probe.
    let n = needs(
        "syscall::execve:entry { this->argv = (uint64_t *)copyin(arg1, 8 * 4); }
         syscall::execve:entry { this->argv = (uint64_t *)copyin(arg1, 8 * 4);
            printf(\"%s %s %s\", copyinstr(this->argv[0]), copyinstr(this->argv[1]),
                copyinstr(this->argv[2])); }",
    );
    let c = &n.clauses[1].1;
    for want in [
        user(AddrExpr::arg(1), MemKind::UserBytes, 32, None),
        user(
            hops(1, 0, &[0]),
            MemKind::UserString,
            DEFAULT_STRING_STORAGE,
            None,
        ),
        user(
            hops(1, 8, &[0]),
            MemKind::UserString,
            DEFAULT_STRING_STORAGE,
            None,
        ),
        user(
            hops(1, 16, &[0]),
            MemKind::UserString,
            DEFAULT_STRING_STORAGE,
            None,
        ),
    ] {
        assert!(c.copies.contains(&want), "{want:?} not in {:?}", c.copies);
    }
    assert_eq!(c.copies.len(), 4);
    let spec = spec_for(&[c], (&[0], false), DEFAULT_STRING_STORAGE).unwrap();
    assert_eq!(spec.copies.len(), 4);
    crate::capture::RecordLayout::for_spec(&spec, "execve").unwrap();
}

#[test]
fn chains_hop_after_an_offset_and_stop_at_the_limit() {
    // argv[1][2..]: the pointer at argv + 8, plus 2, then a second hop through it.
    let c = one(
        "syscall::execve:entry { trace(*(uint64_t *)copyin(*(uint64_t *)copyin(arg1 + 8, 8) + 16, 8)); }",
    );
    assert!(
        c.copies
            .contains(&user(hops(1, 8, &[16]), MemKind::UserBytes, 8, None)),
        "{:?}",
        c.copies
    );
    // A chain longer than the hop limit is not followed: read at delivery.
    let mut e = "arg1".to_string();
    for _ in 0..=MAX_USER_DEREFS {
        e = format!("*(uint64_t *)copyin({e}, 8)");
    }
    let c = one(&format!(
        "syscall::execve:entry {{ trace(copyinstr({e})); }}"
    ));
    assert!(c
        .copies
        .iter()
        .all(|c| c.addr.user_derefs.len() <= MAX_USER_DEREFS));
    assert!(c.any_string_arg, "{c:?}");
    // A user pointer is never read as kernel memory.
    let c = one("syscall::execve:entry { trace(*(int *)(*(uint64_t *)copyin(arg1, 8))); }");
    assert!(c.copies.iter().all(|c| c.kind.is_user()), "{:?}", c.copies);
}
