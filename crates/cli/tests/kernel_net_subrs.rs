//! `inet_ntoa()`, `inet_ntoa6()`, `inet_ntop()`, `link_ntop()` and `random()` translated to eBPF (issue 13):
//! clauses that show kernel memory as IPv4 and IPv6 addresses, in records built at the probe and
//! as aggregation keys, run in the kernel (`-v` says so) and print exactly what dtrace's
//! interpreter prints with every kernel path off, faults included (root, BPF, tracepoints,
//! BTF for `curthread`; `dd`).

mod common;
use common::{kernel_ok, same_with_kernel_paths_off};

use common::DD_WRITES as DD;

use common::kernel_btf_dd as ready;

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
fn link_ntop_of_kernel_memory_runs_at_the_probe_as_in_dtrace() {
    let t = "link_ntop_of_kernel_memory_runs_at_the_probe_as_in_dtrace";
    if !ready(t) {
        return;
    }
    // `dd`'s comm as a hardware address: 'd' (0x64) twice, then zeros (the 20 bytes from
    // comm[1] end in the task's `nameidata`, NULL in a write).
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ {
         printf("%s|%s\n", link_ntop(ARPHRD_ETHER, (void *)&curthread->comm[0]),
             link_ntop(ARPHRD_INFINIBAND, (void *)&curthread->comm[1])); }"#,
        &[],
        DD,
        &[(1, "runs whole in the kernel")],
    );
    let ib = format!("64{}", ":00".repeat(19));
    assert_eq!(
        out.matches(&format!("64:64:00:00:00:00|{ib}\n")).count(),
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

/// The traced program (`knet`): non-blocking TCP connects to 127.0.0.1, then to ::1, an
/// IPv4-mapped address and a documentation address (none of them need to succeed).
const CONNECTS: &str = r#"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
int main(void) {
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(9) };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    connect(s, (struct sockaddr *)&a, sizeof a);
    close(s);
    const char *v6[] = { "::1", "::ffff:127.0.0.1", "2001:db8::a:0:0:1" };
    for (int i = 0; i < 3; i++) {
        struct sockaddr_in6 b = { .sin6_family = AF_INET6, .sin6_port = htons(9) };
        inet_pton(AF_INET6, v6[i], &b.sin6_addr);
        s = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
        connect(s, (struct sockaddr *)&b, sizeof b);
        close(s);
    }
    return 0;
}
"#;

#[test]
fn inet_text_of_connect_addresses_runs_at_fbt_probes_as_in_dtrace() {
    let t = "inet_text_of_connect_addresses_runs_at_fbt_probes_as_in_dtrace";
    if !kernel_ok(t)
        || !common::have_gcc(t)
        || !dtrace_testkit::kernel_has(dtrace_testkit::KernelFeature::Kprobes, t)
    {
        return;
    }
    let dir = common::test_dir("knet");
    let cmd = common::compile_c(&dir, "knet", CONNECTS, &["-O1"])
        .display()
        .to_string();
    let out = same_with_kernel_paths_off(
        r#"fbt::tcp_v4_connect:entry /pid == $target/ {
             printf("4 %s %s\n", inet_ntop(AF_INET, &((struct sockaddr_in *)args[1])->sin_addr),
                 inet_ntoa((ipaddr_t *)&((struct sockaddr_in *)args[1])->sin_addr)); }
         fbt::tcp_v6_connect:entry /pid == $target/ {
             printf("6 %s %s %s\n", inet_ntop(AF_INET6, &((struct sockaddr_in6 *)args[1])->sin6_addr),
                 inet_ntoa6((void *)&((struct sockaddr_in6 *)args[1])->sin6_addr),
                 inet_ntoa6((void *)&((struct sockaddr_in6 *)args[1])->sin6_addr, 1)); }"#,
        &[],
        &cmd,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
        ],
    );
    for want in [
        "4 127.0.0.1 127.0.0.1\n",
        "6 ::1 ::1 ::1\n",
        "6 ::ffff:127.0.0.1 127.0.0.1 ::ffff:127.0.0.1\n",
        "6 2001:db8::a:0:0:1 2001:db8::a:0:0:1 2001:db8::a:0:0:1\n",
    ] {
        assert!(out.contains(want), "{want:?} not in {out}");
    }
}

#[test]
fn inet_of_kernel_bytes_bcopied_into_alloca_scratch_reads_them() {
    let t = "inet_of_kernel_bytes_bcopied_into_alloca_scratch_reads_them";
    if !ready(t) {
        return;
    }
    // alloca(), bcopy() and inet_ntoa() of alloca() memory run at the probe too.
    let out = same_with_kernel_paths_off(
        r#"syscall::write:entry /pid == $target/ { this->p = alloca(4);
             bcopy(&curthread->comm[0], this->p, 4); printf("%s\n", inet_ntoa(this->p)); }"#,
        &[],
        DD,
        &[(1, "runs whole in the kernel")],
    );
    assert_eq!(out.matches("100.100.0.0\n").count(), 4, "{out}");
}
