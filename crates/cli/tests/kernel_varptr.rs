//! Pointers into `alloca()` and `copyin()` memory kept in `self->` and global variables, run
//! at the probe (issue 13): clauses that keep such a pointer, read through it in the same
//! clause, in another clause or in a later firing, run whole in the kernel (`-v` says so) and
//! print exactly what dtrace's interpreter prints with every kernel path off, the faults of a
//! stale pointer included (root, BPF, tracepoints; `dd`, `echo`).

mod common;
use common::{kernel_ok, same_with_kernel_paths_off};

use common::DD_WRITES as DD;

fn ready(t: &str) -> bool {
    kernel_ok(t) && common::have_dd(t)
}

fn have_echo(t: &str) -> bool {
    dtrace_testkit::skip_unless(dtrace_testkit::have_program("echo"), t, "no echo")
}

#[test]
fn a_copy_kept_in_a_thread_local_is_read_through_at_the_probe() {
    let t = "a_copy_kept_in_a_thread_local_is_read_through_at_the_probe";
    if !ready(t) || !have_echo(t) {
        return;
    }
    // The idiom of reading a structure the process passed: its copy kept in self->, read
    // as words of each size; the pointer prints as DTrace for Linux records one.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             self->data = copyin(arg1, 8);
             self->l = *(uint64_t *)self->data;
             self->w = *(uint32_t *)self->data;
             self->h = *(uint16_t *)self->data;
             self->b = *(uint8_t *)self->data;
             printf("%x %x %x %x %d %d\n", self->l, self->w, self->h, self->b,
                 (uint64_t)self->data, self->data != NULL); }"#,
        &[],
        "echo hello",
        &[(1, "runs whole in the kernel")],
    );
    assert!(out.contains("a6f6c6c6568 6c6c6568 6568 68 8 1\n"), "{out}");
}

#[test]
fn alloca_memory_kept_in_a_global_is_filled_and_printed_at_the_probe() {
    let t = "alloca_memory_kept_in_a_global_is_filled_and_printed_at_the_probe";
    if !ready(t) || !have_echo(t) {
        return;
    }
    // copyinto() into a global's alloca() memory, read as characters, a string and an
    // address; another global pointing past it.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             ptr = (char *)alloca(32);
             copyinto(arg1, 6, ptr);
             q = ptr + 1;
             ptr[0] = 'j';
             printf("%s %s %c %d %d %s\n", ptr[4] == 'o' ? "good" : "BAD", stringof(ptr),
                 *q, (uint64_t)ptr, (uint64_t)q, inet_ntoa((ipaddr_t *)ptr)); }"#,
        &[],
        "echo hello",
        &[(1, "runs whole in the kernel")],
    );
    assert!(
        out.contains("good jello\n e 8 9 106.101.108.108\n"),
        "{out}"
    );
}

#[test]
fn a_pointer_used_in_another_clause_or_firing_faults_or_reads_as_in_dtrace() {
    let t = "a_pointer_used_in_another_clause_or_firing_faults_or_reads_as_in_dtrace";
    if !ready(t) {
        return;
    }
    // A self-> pointer from the last firing: NULL at the first; a clause that allocated as
    // much reads its own memory through it (alloca() memory is per clause); one that
    // allocated nothing faults at the interpreter's address (the area's 26th byte, recorded
    // as 0x1a); the clause after it runs.
    let out = same_with_kernel_paths_off(
        r#"self char *p;
         syscall::write:entry /pid == $target/ {
             printf("%d %d\n", (uint64_t)self->p, self->p == NULL); }
         syscall::write:entry /pid == $target/ {
             this->a = (char *)alloca(16); self->p = (char *)alloca(8) + 2;
             self->p[0] = 3; printf("%d\n", *self->p); }
         syscall::write:entry /pid == $target/ {
             this->b = (char *)alloca(32); this->b[18] = 4;
             printf("%d %d\n", *self->p, self->p[5]); }
         syscall::write:entry /pid == $target/ { trace(self->p[0]); }
         syscall::write:entry /pid == $target/ { printf("after %d\n", arg2); }
         dtrace:::ERROR { printf("fault %d %d %x\n", arg3, arg4, arg5); }"#,
        &[],
        DD,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
            (3, "runs whole in the kernel"),
            (4, "runs whole in the kernel"),
        ],
    );
    assert_eq!(out.matches("0 1\n").count(), 1, "{out}");
    assert_eq!(out.matches("26 0\n").count(), 3, "{out}");
    assert_eq!(out.matches("4 0\n").count(), 4, "{out}");
    assert_eq!(out.matches("fault 11 1 1a\n").count(), 4, "{out}");
    assert_eq!(out.matches("after 300\n").count(), 4, "{out}");
    // A global pointer followed in the next clause, which allocated nothing; a NULL one.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             s = (char *)alloca(1); *s = 'a'; printf("%c\n", *s); }
         syscall::write:entry /pid == $target/ { trace(*s); }
         syscall::write:entry /pid == $target/ { self->n = (char *)alloca(4); self->n = 0; }
         syscall::write:entry /pid == $target/ { trace(*self->n); }
         syscall::write:entry /pid == $target/ { printf("after %d\n", arg2); }
         dtrace:::ERROR { printf("fault %d %x\n", arg4, arg5); }"#,
        &[],
        DD,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
            (3, "runs whole in the kernel"),
            (4, "runs whole in the kernel"),
        ],
    );
    assert_eq!(out.matches("a\n").count(), 4, "{out}");
    assert_eq!(out.matches("fault 1 8\n").count(), 4, "{out}");
    assert_eq!(out.matches("fault 1 0\n").count(), 4, "{out}");
    assert_eq!(out.matches("after 300\n").count(), 4, "{out}");
}

#[test]
fn a_pointer_begin_kept_in_a_global_reaches_the_kernel_as_dtraces() {
    let t = "a_pointer_begin_kept_in_a_global_reaches_the_kernel_as_dtraces";
    if !ready(t) {
        return;
    }
    // BEGIN runs in dtrace: its global, copied into the kernel, is the interpreter's own
    // address of BEGIN's alloca() memory, which no kernel clause allocated.
    let out = same_with_kernel_paths_off(
        r#"BEGIN { g = (char *)alloca(8); g[0] = 1; }
         syscall::write:entry /pid == $target/ { printf("%d\n", (uint64_t)g); trace(*g); }
         syscall::write:entry /pid == $target/ { printf("after %d\n", arg2); }
         dtrace:::ERROR { printf("fault %d %x\n", arg4, arg5); }"#,
        &[],
        DD,
        &[(2, "runs whole in the kernel")],
    );
    assert_eq!(out.matches("8\n").count(), 4, "{out}");
    assert_eq!(out.matches("fault 1 8\n").count(), 4, "{out}");
}

#[test]
fn a_copy_sized_at_the_probe_kept_in_a_variable_runs_there_when_bounded() {
    let t = "a_copy_sized_at_the_probe_kept_in_a_variable_runs_there_when_bounded";
    if !ready(t) || !have_echo(t) {
        return;
    }
    // A clause without alloca() keeping copyin(arg1, arg2) in this-> (or self->): its copy
    // is in its alloca area, exact where scratchsize is no larger than the kernel's area (the
    // interpreter's faults past it: out of scratch space), or where a mask bounds the size;
    // a copy of nothing, an unreadable source and a read past the copy fault as the
    // interpreter's; the clause after them runs.
    let out = same_with_kernel_paths_off(
        r#"#pragma D option scratchsize=2048
         syscall::write:entry /pid == $target/ {
             this->b = (char *)copyin(arg1, arg2);
             printf("%d [%s] %c %d\n", arg2, stringof(this->b), this->b[1], (uint64_t)this->b); }
         syscall::write:entry /pid == $target/ {
             self->c = (char *)copyin(arg1 + 1, arg2 & 0x7ff); self->c[0] = 'a';
             printf("[%s]\n", stringof(self->c)); }
         syscall::write:entry /pid == $target/ {
             this->z = (char *)copyin(arg1, arg2 - arg2); trace(this->z[0]); }
         syscall::write:entry /pid == $target/ { this->u = (char *)copyin(0, arg2); }
         syscall::write:entry /pid == $target/ {
             this->n = (char *)copyin(arg1, arg2 * 1000); trace(this->n[0]); }
         syscall::write:entry /pid == $target/ {
             this->s = (char *)copyin(arg1, arg2); trace(this->s[arg2]); }
         syscall::write:entry /pid == $target/ { printf("after %d\n", arg2); }
         dtrace:::ERROR { printf("fault %d %x\n", arg4, arg5); }"#,
        &[],
        "echo hello",
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
            (3, "runs whole in the kernel"),
            (4, "runs whole in the kernel"),
            (5, "runs whole in the kernel"),
            (6, "runs whole in the kernel"),
        ],
    );
    assert!(out.contains("6 [hello\n] e 8\n"), "{out}");
    assert!(out.contains("[allo\n]\n"), "{out}");
    // A copy of nothing (at its own address), an unreadable source, past scratchsize, past
    // the copy (the byte after it: 8 reserved, then 6 copied).
    for fault in ["fault 1 8\n", "fault 1 0\n", "fault 5 0\n", "fault 1 e\n"] {
        assert!(out.contains(fault), "{fault}: {out}");
    }
    assert!(out.contains("after 6\n"), "{out}");
    // Unbounded where scratchsize is larger than the kernel's area: dtrace's, with the way out.
    same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             this->b = (char *)copyin(arg1, arg2); printf("%c\n", this->b[1]); }"#,
        &[],
        "echo hello",
        &[(
            1,
            "copyin() of a size computed at run time that may be more than the kernel's 2048 \
             bytes (scratchsize is 1048576: a size masked to at most 2048, or a scratchsize of \
             at most 2048, runs at the probe)",
        )],
    );
}
