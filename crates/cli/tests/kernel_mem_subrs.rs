//! The subroutines that make strings of memory translated to eBPF (issue 13): `memstr()` of
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
