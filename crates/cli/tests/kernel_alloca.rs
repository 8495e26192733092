//! `alloca()`, the loads and stores through its pointers, `bcopy()`, `copyinto()` (of constant
//! sizes and of sizes known only at the probe) and
//! `stringof()` of its memory translated to eBPF (issue 13): clauses that fill alloca() memory
//! from the kernel and from the traced process and print it run whole in the kernel (`-v` says
//! so) and print exactly what dtrace's interpreter prints with every kernel path off, faults
//! included (root, BPF, tracepoints, BTF for `curthread`; `dd`, `echo`).

mod common;
use common::same_with_kernel_paths_off;

use common::DD_WRITES as DD;

use common::kernel_btf_dd as ready;

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
        &[(
            1,
            "alloca() of a size computed at run time that may be more than the kernel's 2048 \
             bytes",
        )],
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
    // records: an aggregated value (tracemem()'s bytes are read at the probe: kernel_print).
    for (script, why) in [
        (
            "this->p = (char *)alloca(16); @ = sum((uint64_t)this->p);",
            "an alloca() pointer as an aggregated value",
        ),
        // A string's bytes: the interpreter reads what follows it in its own scratch.
        (
            "this->p = (char *)alloca(8); bcopy(execname, this->p, 4); trace(this->p[0]);",
            "bcopy(): a string as its source",
        ),
        // copyin() takes the interpreter's alloca area too, by as much as it may.
        (
            "this->p = (char *)alloca(4); this->b = (char *)copyin(arg1, arg2); trace(this->b);",
            "copyin() of a size computed at run time that may be more than the kernel's 2048",
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

#[test]
fn alloca_of_a_size_computed_at_run_time_as_in_dtrace() {
    let t = "alloca_of_a_size_computed_at_run_time_as_in_dtrace";
    if !ready(t) {
        return;
    }
    // Sizes masked to fit the kernel's area (arg2 is 300, arg0 1): rounded up to 8 bytes,
    // zeroed, pointers as DTrace for Linux records them.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(arg2 & 0x1ff);
             this->q = (char *)alloca(arg0 & 0xff);
             this->p[arg2 - 1] = 'z';
             printf("%d %d %d %d %d\n", (uint64_t)this->p, (uint64_t)this->q,
                 this->p[arg2 - 1], this->p[arg2 - 2], this->q[0]); }"#,
        &[],
        DD,
        &[(1, "runs whole in the kernel")],
    );
    assert_eq!(out.matches("8 312 122 0 0\n").count(), 4, "{out}");
    // Unmasked where scratchsize is no larger than the kernel's area: past it, out of scratch
    // space as the interpreter's; a size in a this-> variable.
    let out = same_with_kernel_paths_off(
        r#"#pragma D option scratchsize=1024
         syscall::write:entry /pid == $target/ {
             this->n = arg2; this->p = (char *)alloca(this->n); this->p[299] = 1;
             printf("%d %d\n", (uint64_t)this->p, this->p[299]); }
         syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(arg2); this->q = (char *)alloca(arg2 * 3); }
         syscall::write:entry /pid == $target/ { printf("after %d\n", arg2); }
         dtrace:::ERROR { printf("fault %d %d %x\n", arg3, arg4, arg5); }"#,
        &[],
        DD,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
        ],
    );
    assert_eq!(out.matches("8 1\n").count(), 4, "{out}");
    let no_scratch = out
        .lines()
        .filter(|l| l.starts_with("fault ") && l.ends_with(" 5 0"))
        .count();
    assert_eq!(no_scratch, 4, "{out}");
    assert_eq!(out.matches("after 300\n").count(), 4, "{out}");
    // The same scratchsize from the command line: planned with it as with the pragma.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             this->n = arg2; this->p = (char *)alloca(this->n); this->p[299] = 1;
             printf("%d %d\n", (uint64_t)this->p, this->p[299]); }"#,
        &["-x", "scratchsize=1024"],
        DD,
        &[(1, "runs whole in the kernel")],
    );
    assert_eq!(out.matches("8 1\n").count(), 4, "{out}");
}

#[test]
fn copyin_in_a_clause_that_allocates_takes_from_its_alloca_area_as_in_dtrace() {
    let t = "copyin_in_a_clause_that_allocates_takes_from_its_alloca_area_as_in_dtrace";
    if !ready(t) || !dtrace_testkit::skip_unless(dtrace_testkit::have_program("echo"), t, "no echo")
    {
        return;
    }
    // copyin()'s copies are alloca() memory: their pointers and alloca()'s follow each other,
    // they can be written, and read as strings up to what was allocated.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             this->c = (char *)copyin(arg1, 5);
             this->p = (char *)alloca(2);
             this->d = (char *)copyin(arg1, arg2 & 0xff);
             this->c[0] = 'j';
             printf("%d %d %d [%s] [%s] %d\n", (uint64_t)this->c, (uint64_t)this->p,
                 (uint64_t)this->d, stringof(this->c), stringof(this->d), this->d[5]); }"#,
        &[],
        "echo hello",
        &[(1, "runs whole in the kernel")],
    );
    assert!(out.contains("8 16 24 [jello] [hello\n] 10\n"), "{out}");
    // The string a copyinstr() just made, copied with the zeros after it.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(16);
             this->p[9] = 7;
             bcopy(copyinstr(arg1, 4), this->p + 1, 12);
             this->p[0] = '<';
             printf("%s %d %d\n", stringof(this->p), this->p[5], this->p[9]); }"#,
        &[],
        "echo hello",
        &[(1, "runs whole in the kernel")],
    );
    assert!(out.contains("<hel 0 0\n"), "{out}");
    // Faults: an unreadable source, a copy of nothing (an invalid address: its own), past
    // scratchsize; then the clause after them runs.
    let out = same_with_kernel_paths_off(
        r#"#pragma D option scratchsize=64
         syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(8); this->c = (char *)copyin(0, arg2 & 0xf); }
         syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(8); this->c = (char *)copyin(arg1, (arg0 - 1) & 0xff); }
         syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(60); this->c = (char *)copyin(arg1, 5); }
         syscall::write:entry /pid == $target/ { printf("after %d\n", arg2); }
         dtrace:::ERROR { printf("fault %d %x\n", arg4, arg5); }"#,
        &[],
        "echo hello",
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
            (3, "runs whole in the kernel"),
        ],
    );
    assert!(out.contains("after 6\n"), "{out}");
    // An invalid address at 0, at the empty copy's own address (recorded as DTrace for Linux
    // records an alloca() address: 8 past the 8 bytes before it), out of scratch space.
    for fault in ["fault 1 0\n", "fault 1 10\n", "fault 5 0\n"] {
        assert!(out.contains(fault), "{fault}: {out}");
    }
}

#[test]
fn bcopy_between_alloca_ranges_as_in_dtrace() {
    let t = "bcopy_between_alloca_ranges_as_in_dtrace";
    if !ready(t) {
        return;
    }
    // Overlapping ranges copy as the interpreter's (it reads the whole source first).
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(16);
             bcopy((void *)&curthread->comm[0], this->p, 16);
             this->p[2] = 'x';
             bcopy(this->p, this->p + arg0, 8);
             this->q = (char *)alloca(8);
             bcopy(this->p + arg0, this->q, 8);
             bcopy(this->q + arg0, this->q, 4);
             printf("%s %s\n", stringof(this->p), stringof(this->q)); }
         syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(16); this->q = (char *)alloca(8);
             bcopy(this->p, this->q, 16); }
         syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(8); this->q = (char *)alloca(16);
             bcopy(this->q + 8, this->q, 16); }
         syscall::write:entry /pid == $target/ { printf("after %d\n", arg2); }
         dtrace:::ERROR { printf("fault %d %d\n", arg4, arg5); }"#,
        &[],
        DD,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
            (3, "runs whole in the kernel"),
        ],
    );
    assert_eq!(out.matches("dddx dx\n").count(), 4, "{out}");
    // The destination too small (its size), then the source.
    assert_eq!(out.matches("fault 10 16\n").count(), 8, "{out}");
    assert_eq!(out.matches("after 300\n").count(), 4, "{out}");
}

#[test]
fn loads_through_copyin_run_at_the_probe_as_in_dtrace() {
    let t = "loads_through_copyin_run_at_the_probe_as_in_dtrace";
    if !ready(t) || !dtrace_testkit::skip_unless(dtrace_testkit::have_program("echo"), t, "no echo")
    {
        return;
    }
    // The idiom of reading the process's structures: a clause without alloca() whose copies
    // are read through (a cast's load, a struct's members, a this-> pointer) takes them from its
    // alloca area, as the interpreter takes them from its scratch; a clause that only records
    // or compares its copy keeps it in the string scratch.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             this->s = (short *)copyin(arg1, 6);
             printf("%x %x %c %d ", *(int *)this->s, this->s[2], ((char *)this->s)[4],
                 *(short *)copyin(arg1 + 1, 2));
             printf("%d %d\n", (uint64_t)this->s, *(char *)copyin(arg1, 1) == 'h');
             @[this->s[1]] = count(); }"#,
        &[],
        "echo hello",
        &[(1, "runs whole in the kernel")],
    );
    assert!(out.contains("6c6c6568 a6f o 27749 8 1\n"), "{out}");
    // Faults as the interpreter's: an unreadable address, a copy of nothing (at its own
    // address, the first past the area's 8 reserved bytes).
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ { trace(*(int *)copyin(0, 4)); }
         syscall::write:entry /pid == $target/ { trace(*(char *)copyin(arg1, 0)); }
         syscall::write:entry /pid == $target/ { printf("after %d\n", arg2); }
         dtrace:::ERROR { printf("fault %d %x\n", arg4, arg5); }"#,
        &[],
        "echo hello",
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
        ],
    );
    for want in ["after 6\n", "fault 1 0\n", "fault 1 8\n"] {
        assert!(out.contains(want), "{want}: {out}");
    }
}

#[test]
fn copies_of_a_size_known_only_at_the_probe_run_there_as_in_dtrace() {
    let t = "copies_of_a_size_known_only_at_the_probe_run_there_as_in_dtrace";
    if !ready(t) || !dtrace_testkit::skip_unless(dtrace_testkit::have_program("echo"), t, "no echo")
    {
        return;
    }
    // `echo hello` writes 6 bytes: copyinto() and bcopy() of arg2 bytes and less, and of none.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             this->buf = (char *)alloca(16);
             copyinto(arg1, arg2, this->buf);
             this->k = (char *)alloca(16);
             bcopy(this->buf, this->k, arg2 - 1);
             this->z = (char *)alloca(8);
             copyinto(arg1, arg2 - 6, this->z);
             bcopy(this->buf, this->z, arg2 - 6);
             printf("[%s] [%s] %d %d\n", stringof(this->buf), stringof(this->k), this->buf[5],
                 this->z[0]); }"#,
        &[],
        "echo hello",
        &[(1, "runs whole in the kernel")],
    );
    assert!(out.contains("[hello\n] [hello] 10 0\n"), "{out}");
    // The conformance test tst.copyinto_arg_order.d: a global pointer, a size computed from a
    // global (dtrace's interpreter has the bytes its second, constant, copy captures: a copy of
    // a size known only at the probe alone is not captured for it).
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             ptr = (char *)alloca(16);
             ptr[0] = ptr[1] = ptr[2] = ptr[3] = ptr[4] = ptr[5] = ptr[6] = ptr[7] = ptr[8] =
             ptr[9] = ptr[10] = ptr[11] = ptr[12] = ptr[13] = ptr[14] = ptr[15] = '.';
             n = 2;
             copyinto(arg1 + (n++), (n++), (void *)(ptr + (n++)));
             printf("%c%c%c%c%c%c%c%c%c%c%c%c%c%c%c%c\n", ptr[0], ptr[1], ptr[2], ptr[3],
                 ptr[4], ptr[5], ptr[6], ptr[7], ptr[8], ptr[9], ptr[10], ptr[11], ptr[12],
                 ptr[13], ptr[14], ptr[15]);
             ptr[0] = ptr[1] = ptr[2] = ptr[3] = ptr[4] = ptr[5] = ptr[6] = ptr[7] = ptr[8] =
             ptr[9] = ptr[10] = ptr[11] = ptr[12] = ptr[13] = ptr[14] = ptr[15] = '.';
             copyinto(arg1 + 2, 3, (void *)(ptr + 4));
             printf("%c%c%c%c%c%c%c%c%c%c%c%c%c%c%c%c\n", ptr[0], ptr[1], ptr[2], ptr[3],
                 ptr[4], ptr[5], ptr[6], ptr[7], ptr[8], ptr[9], ptr[10], ptr[11], ptr[12],
                 ptr[13], ptr[14], ptr[15]);
             exit(0); }
         ERROR { exit(1); }"#,
        &[],
        "echo Delay",
        &[(1, "runs whole in the kernel")],
    );
    assert_eq!(out.matches("....lay.........\n").count(), 2, "{out}");
}

#[test]
fn copies_of_a_size_known_only_at_the_probe_fault_as_in_dtrace() {
    let t = "copies_of_a_size_known_only_at_the_probe_fault_as_in_dtrace";
    if !ready(t) || !dtrace_testkit::skip_unless(dtrace_testkit::have_program("echo"), t, "no echo")
    {
        return;
    }
    // `echo hello` writes 6 bytes: more than an allocation of 4 (an invalid size: 6), a
    // negative size (its own), a destination past what was allocated (an invalid address), an
    // unreadable source, bcopy() past its allocation; the same error lines, then the clause
    // after them runs.
    let clauses = r#"syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(4); copyinto(arg1, arg2, this->p); }
         syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(8); copyinto(arg1, arg2 - 7, this->p); }
         syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(8); copyinto(arg1, arg2, this->p + 8); }
         syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(8); copyinto(0, arg2, this->p); }
         syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(8); bcopy(this->p, this->p + 4, arg2); }
         syscall::write:entry /pid == $target/ { printf("after %d\n", arg2); }"#;
    let said = [
        (1, "runs whole in the kernel"),
        (2, "runs whole in the kernel"),
        (3, "runs whole in the kernel"),
        (4, "runs whole in the kernel"),
        (5, "runs whole in the kernel"),
    ];
    let out = same_with_kernel_paths_off(clauses, &[], "echo hello", &said);
    assert!(out.contains("after 6\n"), "{out}");
    let out = same_with_kernel_paths_off(
        &format!("{clauses}\n dtrace:::ERROR {{ printf(\"fault %d %x\\n\", arg4, arg5); }}"),
        &[],
        "echo hello",
        &said,
    );
    // An invalid size (6, then -1), an invalid address past the allocation (its address as the
    // interpreter's alloca region has it), at 0, and bcopy()'s invalid size.
    for fault in ["fault 10 6\n", "fault 10 ffffffffffffffff\n", "fault 1 0\n"] {
        assert!(out.contains(fault), "{fault}: {out}");
    }
    assert_eq!(out.matches("fault 10 6\n").count(), 2, "{out}");
    assert_eq!(out.matches("fault 1 ").count(), 2, "{out}");
}
