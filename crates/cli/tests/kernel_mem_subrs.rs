//! The subroutines that make strings of memory translated to eBPF (issue 13): `memstr()` (of a
//! constant size, or of one known only at the probe that a mask bounds) of
//! kernel memory and of a `copyin()`'s copy runs at the probe, in records and aggregation
//! keys, and prints exactly what dtrace's interpreter prints with every kernel path off, faults
//! included; `-v` says so (root, BPF, tracepoints, BTF for `curthread`; `dd`).

mod common;
use common::same_with_kernel_paths_off;

use common::DD_WRITES as DD;

use common::kernel_btf_dd as ready;

#[test]
fn memstr_of_kernel_and_user_memory_runs_at_the_probe_as_in_dtrace() {
    let t = "memstr_of_kernel_and_user_memory_runs_at_the_probe_as_in_dtrace";
    if !ready(t) {
        return;
    }
    // `dd`'s comm: 'd' 'd' and fourteen NULs; what dd writes: zeros from /dev/zero.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
         printf("%s|%s|%s|%s\n", memstr((void *)&curthread->comm[0], '.', 16),
             memstr((void *)&curthread->comm[1], 0, 16), memstr(copyin(arg1, 8), '-', 8),
             memstr(copyin(arg1, 64), 'z' - arg0, 33));
         @[memstr((void *)&curthread->comm[0], '_', 5)] = count(); }"#,
        &[],
        DD,
        &[(1, "runs whole in the kernel")],
    );
    let zs = "y".repeat(32);
    assert_eq!(
        out.matches(&format!("dd.............|d|-------|{zs}\n"))
            .count(),
        4,
        "{out}"
    );
    assert!(
        out.lines().any(|l| l.split_whitespace().eq(["dd__", "4"])),
        "{out}"
    );
}

#[test]
fn memstr_faults_at_the_probe_as_in_dtrace() {
    let t = "memstr_faults_at_the_probe_as_in_dtrace";
    if !ready(t) {
        return;
    }
    // arg0 is the file descriptor (1): not an address. Each write faults, then the clause
    // after it runs.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ { printf("%s\n", memstr((void *)arg0, ' ', 4)); }
         syscall::write:entry /pid == $target/ { printf("after %d\n", arg2); }"#,
        &[],
        DD,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
        ],
    );
    assert_eq!(out.matches("after 300\n").count(), 4, "{out}");
    // A size above 4096 is an illegal operation, in dtrace, saying why.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ { printf("%s\n", memstr((void *)&curthread->comm[0], ' ', 5000)); }
         syscall::write:entry /pid == $target/ { printf("after %d\n", arg2); }"#,
        &[],
        DD,
        &[(1, "a size above 4096 (an illegal operation)")],
    );
    assert_eq!(out.matches("after 300\n").count(), 4, "{out}");
}

#[test]
fn memstr_of_a_size_known_only_at_the_probe_runs_there_as_in_dtrace() {
    let t = "memstr_of_a_size_known_only_at_the_probe_runs_there_as_in_dtrace";
    if !ready(t) {
        return;
    }
    // arg0 is 1: sizes of 8 and 33 from it, of a copyin()'s copy (zeros from /dev/zero); a
    // size of 0 is NULL, whose string faults where printf() records it, then the clause after
    // it runs.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             printf("%s|%s\n", memstr(copyin(arg1, 16), '-', (arg0 + 7) & 0xf),
                 memstr(copyin(arg1, 64), 'z' - arg0, (arg0 + 32) & 0x3f)); }
         syscall::write:entry /pid == $target/ {
             printf("%s\n", memstr(copyin(arg1, 16), '-', (arg0 - 1) & 0xf)); }
         syscall::write:entry /pid == $target/ { printf("after %d\n", arg2); }"#,
        &[],
        DD,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
        ],
    );
    let zs = "y".repeat(32);
    assert_eq!(out.matches(&format!("-------|{zs}\n")).count(), 4, "{out}");
    assert_eq!(out.matches("after 300\n").count(), 4, "{out}");
    // alloca() memory (in a program of its own: a clause that allocates beside one that
    // copies in stays in dtrace), and past the allocation: an invalid size (the bytes read),
    // as the interpreter's.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(8); this->p[2] = 'x';
             printf("%s\n", memstr(this->p, '+', (arg0 + 5) & 0xf)); }
         syscall::write:entry /pid == $target/ {
             this->p = (char *)alloca(8);
             printf("%s\n", memstr(this->p, '+', (arg0 + 9) & 0xf)); }
         syscall::write:entry /pid == $target/ { printf("after %d\n", arg2); }
         dtrace:::ERROR { printf("fault %d %x\n", arg4, arg5); }"#,
        &[],
        DD,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
        ],
    );
    assert_eq!(out.matches("++x++\n").count(), 4, "{out}");
    assert_eq!(out.matches("fault 10 9\n").count(), 4, "{out}");
    assert_eq!(out.matches("after 300\n").count(), 4, "{out}");
    // Unmasked, it may be more than the string scratch holds: in dtrace, saying why.
    same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
             printf("%s\n", memstr((void *)arg0, '.', arg2)); }
         syscall::write:entry /pid == $target/ { printf("after %d\n", arg2); }"#,
        &[],
        DD,
        &[(
            1,
            "memstr(): a size computed at run time of up to 4096 bytes",
        )],
    );
}
