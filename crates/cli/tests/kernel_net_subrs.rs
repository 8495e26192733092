//! `inet_ntoa()`, `inet_ntoa6()`, `inet_ntop()` and `random()` translated to eBPF (issue 13):
//! clauses that show kernel memory as IPv4 and IPv6 addresses, in records built at the probe and
//! as aggregation keys, run in the kernel (`-v` says so) and print exactly what dtrace's
//! interpreter prints with every kernel path off, faults included (root, BPF, tracepoints,
//! BTF for `curthread`; `dd`).

mod common;
use common::{kernel_ok, same_with_kernel_paths_off};

/// Four writes of 300 bytes to /dev/null by the traced `dd`.
const DD: &str = "dd if=/dev/zero of=/dev/null bs=300 count=4 status=none";

fn ready(t: &str) -> bool {
    kernel_ok(t)
        && common::have_btf(t)
        && dtrace_testkit::skip_unless(dtrace_testkit::have_program("dd"), t, "no dd")
}

#[test]
fn inet_text_of_kernel_memory_runs_at_the_probe_as_in_dtrace() {
    let t = "inet_text_of_kernel_memory_runs_at_the_probe_as_in_dtrace";
    if !ready(t) {
        return;
    }
    // `dd`'s comm: its bytes 'd' 'd' and fourteen zeros.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
         printf("%s|%s|%s|%s|%s\n", inet_ntoa((ipaddr_t *)&curthread->comm[0]),
             inet_ntop(AF_INET, (void *)&curthread->comm[1]),
             inet_ntop(AF_INET6, (void *)&curthread->comm[0]),
             inet_ntoa6((void *)&curthread->comm[0]), inet_ntoa6((void *)&curthread->comm[0], 1)); }"#,
        &[],
        DD,
        &[(1, "runs whole in the kernel")],
    );
    assert_eq!(
        out.matches("100.100.0.0|100.0.0.0|6464::|6464::|6464::\n")
            .count(),
        4,
        "{out}"
    );
}

#[test]
fn inet_keys_count_in_the_kernel_as_in_dtrace() {
    let t = "inet_keys_count_in_the_kernel_as_in_dtrace";
    if !ready(t) {
        return;
    }
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
         @[inet_ntop(AF_INET6, (void *)&curthread->comm[0]), inet_ntoa((ipaddr_t *)&curthread->comm[2])] = count();
         @hi = max(random() >> 32 != 0); }"#,
        &[],
        DD,
        &[(1, "aggregations run in the kernel")],
    );
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().eq(["6464::", "0.0.0.0", "4"])),
        "{out}"
    );
    // random()'s 64 bits: the high half of four numbers is not zero every time.
    assert!(out.contains("\n                1\n"), "{out}");
}

#[test]
fn inet_of_a_bad_address_faults_at_the_probe_as_in_dtrace() {
    let t = "inet_of_a_bad_address_faults_at_the_probe_as_in_dtrace";
    if !ready(t) {
        return;
    }
    // arg0 is the file descriptor (1): not an address. Each write faults as the interpreter's
    // read faults, then the clause after it runs.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ { printf("%s\n", inet_ntop(AF_INET6, (void *)arg0)); }
         syscall::write:entry /pid == $target/ { printf("%s\n", inet_ntoa((ipaddr_t *)arg0)); }
         syscall::write:entry /pid == $target/ { printf("after %d\n", arg2); }"#,
        &[],
        DD,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
        ],
    );
    assert_eq!(out.matches("after 300\n").count(), 4, "{out}");
}
