//! The integer subroutines translated to eBPF (issue 13): the byte-order family (`htons`,
//! `htonl`, `htonll`, `ntohs`, `ntohl`, `ntohll`), `rand()`, `progenyof()`, `getmajor()`,
//! `getminor()`, `strtoll()` (its illegal-operation fault included), `getf()` and the lock queries
//! (`mutex_owned()`...) run at the probe and print what dtrace's interpreter prints with the
//! kernel paths off; `-v` says the clauses run in the kernel (root, BPF, tracepoints; `dd`).

mod common;
use common::{kernel_ok, same_with_kernel_paths_off};

use common::DD_WRITES as DD;

#[test]
fn byte_order_and_rand_run_at_the_probe_as_in_dtrace() {
    let t = "byte_order_and_rand_run_at_the_probe_as_in_dtrace";
    if !kernel_ok(t) || !common::have_dd(t) {
        return;
    }
    let out = same_with_kernel_paths_off(
        "syscall::write:entry /pid == $target/ { @[htons(arg2), htonl(arg2), htonll(arg2)] =
         count(); @r = max(rand() >= 0); @hi = max(rand() >> 32);
         printf(\"%x %x %x\\n\", ntohs(arg2), ntohl(arg2), ntohll(arg2)); }",
        &[],
        DD,
        &[(1, "runs whole in the kernel")],
    );
    // 300 is 0x012c: its bytes swapped in 16, 32 and 64 bits.
    assert_eq!(
        out.matches("2c01 2c010000 2c01000000000000\n").count(),
        4,
        "{out}"
    );
    assert!(
        out.contains(" 11265 738263040 3170815612645539840                4\n"),
        "{out}"
    );
    // rand() >= 0 always, and its value is 32 bits (nothing above them).
    assert!(
        out.contains("\n                1\n                0\n"),
        "{out}"
    );
}

#[test]
fn progenyof_runs_at_the_probe_as_in_dtrace() {
    let t = "progenyof_runs_at_the_probe_as_in_dtrace";
    if !kernel_ok(t) || !common::have_btf(t) || !common::have_dd(t) {
        return;
    }
    // dd is dtrace's child (-c): the progeny of dtrace ($pid), of itself and of init, not of a
    // pid past the last.
    let out = same_with_kernel_paths_off(
        "syscall::write:entry /pid == $target && progenyof($pid)/ {
         @[progenyof(1), progenyof($target), progenyof($pid), progenyof(4194305)] = count(); }",
        &[],
        DD,
        &[
            (1, "predicate runs in the kernel"),
            (1, "aggregations run in the kernel"),
        ],
    );
    assert!(
        out.contains("        1        1        1        0                4\n"),
        "{out}"
    );
}

#[test]
fn getmajor_and_getminor_run_at_the_probe_as_in_dtrace() {
    let t = "getmajor_and_getminor_run_at_the_probe_as_in_dtrace";
    if !kernel_ok(t) || !common::have_dd(t) {
        return;
    }
    let out = same_with_kernel_paths_off(
        "syscall::write:entry /pid == $target && getminor(arg2) == 300/ {
         printf(\"%d %d %d %d\\n\", getmajor(arg2 << 20 | 7), getminor(arg2 << 20 | 7),
             getmajor(0xfffffffffff00001), getminor(0xfffffffffff00001));
         @[getmajor(arg2 << 24), getminor(arg2 << 12)] = count(); }",
        &[],
        DD,
        &[(1, "runs whole in the kernel")],
    );
    // 300 << 20 | 7: major 300, minor 7; the 32 bits of a wider value only.
    assert_eq!(out.matches("300 7 4095 1\n").count(), 4, "{out}");
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().eq(["704", "180224", "4"])),
        "{out}"
    );
}

#[test]
fn strtoll_runs_at_the_probe_as_in_dtrace() {
    let t = "strtoll_runs_at_the_probe_as_in_dtrace";
    if !kernel_ok(t) || !common::have_dd(t) {
        return;
    }
    let out = same_with_kernel_paths_off(
        "syscall::write:entry /pid == $target && arg2 == 300/ {
         printf(\"%d %d %d %d\\n\", strtoll(lltostr(arg2, 16), 16), strtoll(execname, 36),
             strtoll(\" -0x12c\", 16), strtoll(\"777\", arg2 / 100 + 5));
         @[strtoll(lltostr(arg2, 2), 2), strtoll(execname)] = count(); }",
        &[],
        DD,
        &[(1, "runs whole in the kernel")],
    );
    // dd in base 36 is 13 * 36 + 13; 777 in base 8 is 511.
    assert_eq!(out.matches("300 481 -300 511\n").count(), 4, "{out}");
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().eq(["300", "0", "4"])),
        "{out}"
    );
}

#[test]
fn strtoll_of_a_base_out_of_range_faults_at_the_probe_as_in_dtrace() {
    let t = "strtoll_of_a_base_out_of_range_faults_at_the_probe_as_in_dtrace";
    if !kernel_ok(t) || !common::have_dd(t) {
        return;
    }
    // arg2 / 10 is 30; less 29 is 1: an illegal operation, then the next clause runs.
    let out = same_with_kernel_paths_off(
        "syscall::write:entry /pid == $target/ { printf(\"%d\\n\", strtoll(\"12\", arg2 / 10 - 29)); }
         syscall::write:entry /pid == $target/ { printf(\"after %d\\n\", strtoll(\"12\", arg2 / 10)); }",
        &[],
        DD,
        &[(1, "runs whole in the kernel"), (2, "runs whole in the kernel")],
    );
    // 12 in base 30.
    assert_eq!(out.matches("after 32\n").count(), 4, "{out}");
    assert!(!out.contains("\n12\n"), "{out}");
}

#[test]
fn lock_queries_run_at_the_probe_as_in_dtrace() {
    let t = "lock_queries_run_at_the_probe_as_in_dtrace";
    if !kernel_ok(t) || !common::have_btf(t) {
        return;
    }
    // env execs true in the traced process: the exec renames it holding the process's
    // cred_guard_mutex, which is free again at its exit; the network namespace's IPv6 walker
    // lock (an rwlock) is free.
    let m = "&curthread->signal->cred_guard_mutex";
    let rw = "&curthread->nsproxy->net_ns->ipv6.fib6_walker_lock";
    let script = format!(
        "sdt:task::task_rename /pid == $target/ {{
             printf(\"rename %d %d %d %d\\n\", mutex_owned({m}), mutex_owner({m}) == curthread,
                 mutex_type_adaptive({m}), mutex_type_spin({m})); }}
         syscall::exit_group:entry /pid == $target/ {{
             printf(\"exit %d %d\\n\", mutex_owned({m}), mutex_owner({m}) != NULL);
             printf(\"rw %d %d %d\\n\", rw_read_held({rw}), rw_write_held({rw}),
                 rw_iswriter({rw})); }}"
    );
    let out = same_with_kernel_paths_off(
        &script,
        &[],
        "env true",
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
        ],
    );
    assert_eq!(out.matches("rename 1 1 1 0\n").count(), 1, "{out}");
    assert_eq!(out.matches("exit 0 0\n").count(), 1, "{out}");
    assert_eq!(out.matches("rw 0 0 0\n").count(), 1, "{out}");
}

#[test]
fn getf_is_the_open_file_of_a_descriptor_as_in_dtrace() {
    let t = "getf_is_the_open_file_of_a_descriptor_as_in_dtrace";
    if !kernel_ok(t) || !common::have_btf(t) || !common::have_dd(t) {
        return;
    }
    // dd writes to /dev/null: getf() of the write's descriptor is that file; a descriptor that
    // cannot be open gives NULL.
    let out = same_with_kernel_paths_off(
        "syscall::write:entry /pid == $target/ {
         printf(\"%s %d\\n\", stringof(getf(arg0)->f_path.dentry->d_name.name),
             getf(-1) == NULL); }",
        &[],
        DD,
        &[(1, "runs whole in the kernel")],
    );
    assert_eq!(out.matches("null 1\n").count(), 4, "{out}");
}
