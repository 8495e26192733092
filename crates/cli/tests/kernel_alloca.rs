//! `alloca()`, the loads and stores through its pointers, `bcopy()`, `copyinto()` and
//! `stringof()` of its memory translated to eBPF (issue 13): clauses that fill alloca() memory
//! from the kernel and from the traced process and print it run whole in the kernel (`-v` says
//! so) and print exactly what dtrace's interpreter prints with every kernel path off, faults
//! included (root, BPF, tracepoints, BTF for `curthread`; `dd`, `echo`).

mod common;
use common::{kernel_ok, same_with_kernel_paths_off};

use common::DD_WRITES as DD;

fn ready(t: &str) -> bool {
    kernel_ok(t) && common::have_btf(t) && common::have_dd(t)
}

#[test]
fn alloca_memory_filled_from_the_kernel_prints_as_in_dtrace() {
    let t = "alloca_memory_filled_from_the_kernel_prints_as_in_dtrace";
    if !ready(t) {
        return;
    }
    // `dd`'s comm, copied into alloca() memory and read back as a string, bytes and words; the
    // pointers print as DTrace for Linux records them (offsets past its 8 reserved bytes).
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(16);
             this->q = (int *)alloca(8);
             bcopy((void *)&curthread->comm[0], this->p, 16);
             this->q[1] = this->p[0] + arg0;
             this->p[1] = 'x';
             printf("%s|%s|%d|%d|%d|%d\n", stringof(this->p), stringof(this->p + 1),
                 this->q[1], this->q[0], (uint64_t)this->p, (uint64_t)this->q); }"#,
        &[],
        DD,
        &[(1, "runs whole in the kernel")],
    );
    assert_eq!(out.matches("dx|x|101|0|8|24\n").count(), 4, "{out}");
    // The kernel's whole area (2048 bytes), a large copy into it.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(2000);
             bcopy((void *)curthread, this->p + 40, 1000);
             this->q = (char *)alloca(40);
             this->q[39] = 5;
             printf("%d %d %d\n", this->p[1999], this->q[39], (uint64_t)this->q); }"#,
        &[],
        DD,
        &[(1, "runs whole in the kernel")],
    );
    assert_eq!(out.matches("0 5 2008\n").count(), 4, "{out}");
    // Its string compared, measured, joined and as a key.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(16);
             bcopy((void *)&curthread->comm[0], this->p, 16);
             printf("%d %d %d %s\n", stringof(this->p) == "dd", strlen(stringof(this->p)),
                 "dd" < stringof(this->p), strjoin(stringof(this->p), "!"));
             @[stringof(this->p)] = count(); }"#,
        &[],
        DD,
        &[(1, "runs whole in the kernel")],
    );
    assert_eq!(out.matches("1 2 0 dd!\n").count(), 4, "{out}");
}

#[test]
fn copyinto_fills_alloca_memory_from_the_process_as_in_dtrace() {
    let t = "copyinto_fills_alloca_memory_from_the_process_as_in_dtrace";
    if !ready(t) || !dtrace_testkit::skip_unless(dtrace_testkit::have_program("echo"), t, "no echo")
    {
        return;
    }
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             this->buf = (char *)alloca(8);
             copyinto(arg1, 5, this->buf);
             printf("[%s] %d\n", stringof(this->buf), this->buf[4]); }"#,
        &[],
        "echo hello",
        &[(1, "runs whole in the kernel")],
    );
    assert!(out.contains("[hello] 111\n"), "{out}");
}

#[test]
fn alloca_faults_at_the_probe_as_in_dtrace() {
    let t = "alloca_faults_at_the_probe_as_in_dtrace";
    if !ready(t) {
        return;
    }
    // Past what the clause allocated (arg0 is 1: a computed offset), a misaligned store, a
    // source that cannot be read, and past scratchsize: each write faults as the interpreter's
    // access faults, then the clause after it runs.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(4); trace(this->p[arg0 + 3]); this->p[arg0 + 7] = 1; }
         syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(8); *(int *)(this->p + arg0) = 1; }
         syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(8); bcopy((void *)arg0, this->p, 8); }
         syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(40); this->q = (char *)alloca(30); }
         syscall::write:entry /pid == $target/ { printf("after %d\n", arg2); }"#,
        &["-x", "scratchsize=64"],
        DD,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
            (3, "runs whole in the kernel"),
            (4, "runs whole in the kernel"),
        ],
    );
    assert_eq!(out.matches("after 300\n").count(), 4, "{out}");
}

#[test]
fn alloca_the_kernel_does_not_follow_stays_in_dtrace_with_its_reason() {
    let t = "alloca_the_kernel_does_not_follow_stays_in_dtrace_with_its_reason";
    if !ready(t) {
        return;
    }
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(arg2); this->p[0] = 'a'; printf("%s\n", stringof(this->p)); }"#,
        &[],
        DD,
        &[(1, "alloca() of a size computed at run time")],
    );
    assert_eq!(out.matches("a\n").count(), 4, "{out}");
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(2000); this->q = (char *)alloca(49); trace(this->q); }"#,
        &[],
        DD,
        &[(
            1,
            "its alloca() calls take more than the kernel's 2048 bytes",
        )],
    );
    assert_eq!(out.matches("2008").count(), 4, "{out}");
    // Where the interpreter takes its own address of alloca() memory, not the value it
    // records: tracemem()'s address, an aggregated value.
    for (script, why) in [
        (
            "this->p = (char *)alloca(16); this->p[0] = 65; tracemem(this->p, 16);",
            "an alloca() pointer as tracemem()'s address",
        ),
        (
            "this->p = (char *)alloca(16); @ = sum((uint64_t)this->p);",
            "an alloca() pointer as an aggregated value",
        ),
        // copyin() takes the interpreter's alloca area too.
        (
            "this->b = (char *)copyin(arg1, 4); this->p = (char *)alloca(4); trace(this->p);",
            "it calls alloca() and copyin(), which share the interpreter's alloca area",
        ),
    ] {
        same_with_kernel_paths_off(
            &format!("syscall::write:entry /pid == $target/ {{ {script} }}"),
            &[],
            DD,
            &[(1, why)],
        );
    }
}

#[test]
fn a_clause_that_allocates_and_reads_another_clauses_pointer_stays_in_dtrace() {
    let t = "a_clause_that_allocates_and_reads_another_clauses_pointer_stays_in_dtrace";
    if !ready(t) {
        return;
    }
    // The interpreter reads the second clause's alloca() memory through the first clause's
    // pointer (alloca() memory is per clause); the kernel would not: both clauses stay in
    // dtrace, sharing this->p. A clause that does not allocate reads it as the interpreter does
    // (an invalid address: nothing is allocated in it).
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ { this->p = (char *)alloca(16); this->p[0] = 7; }
         syscall::write:entry /pid == $target/ {
             this->q = (char *)alloca(16); this->q[0] = 9; printf("%d\n", this->p[0]); }"#,
        &[],
        DD,
        &[(
            2,
            "it calls alloca() and reads this->p, which another clause stores",
        )],
    );
    assert_eq!(out.matches("9\n").count(), 4, "{out}");
    same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ { this->p = (char *)alloca(16); this->p[0] = 7; }
         syscall::write:entry /pid == $target/ { printf("%d\n", this->p[0]); }
         syscall::write:entry /pid == $target/ { printf("after %d\n", arg2); }"#,
        &[],
        DD,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
        ],
    );
}
