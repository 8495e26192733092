//! Kernel memory read by D clauses through `curthread` and probe arguments, on the running kernel:
//! the needs analysis asks the probe's eBPF program for each step of a chain
//! (`curthread->real_parent->tgid`, `stringof(curthread->comm)`, the D library's `curpsinfo`,
//! `((struct sk_buff *)arg0)->len`), and the interpreter's own walk finds every step in the capture.
//! A chain through a NULL pointer faults as DTrace faults. Compiled against the kernel's BTF types;
//! skipped where the kernel publishes none.

mod common;

use common::kernel_ok;
use dtrace_compiler::ctf_types::CtfTypes;
use dtrace_compiler::{compile_with_types, CompileOptions};
use dtrace_ctf::{KernelTypes, SYS_KERNEL_BTF};
use dtrace_framework::{Enabling, Framework, Options};
use dtrace_linux::process::{spawn_held, ExitStatus};
use dtrace_linux::provider::framework_ncpus;
use std::path::Path;
use std::sync::{Arc, OnceLock};

fn kernel_types() -> Option<Arc<KernelTypes>> {
    static TYPES: OnceLock<Option<Arc<KernelTypes>>> = OnceLock::new();
    TYPES
        .get_or_init(|| {
            KernelTypes::load(Path::new(SYS_KERNEL_BTF))
                .ok()
                .map(Arc::new)
        })
        .clone()
}

fn ready(test: &str) -> bool {
    kernel_ok(test)
        && dtrace_testkit::skip_unless(
            kernel_types().is_some(),
            test,
            "no kernel BTF (/sys/kernel/btf/vmlinux)",
        )
}

/// Compiles `src` against the kernel's types (`$target` is the held child's pid), runs `argv` under
/// it, calling `during` once the child runs, and returns the framework after `stop`.
fn run(tag: &str, argv: &[&str], src: &str, during: impl FnOnce()) -> (Framework, Enabling) {
    let types = kernel_types().expect("kernel types");
    let linux = common::linux_tracing(tag);
    let mut fw = Framework::new(Options::default(), framework_ncpus().unwrap());
    fw.set_option("bufsize", Some("1m")).unwrap();
    fw.set_option("aggsize", Some("1m")).unwrap();
    linux.register(&mut fw).unwrap();
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    let mut child = spawn_held(&argv).unwrap();
    let opts = CompileOptions {
        macros: vec![("target".into(), child.pid().to_string())],
        ..CompileOptions::default()
    };
    let program = compile_with_types(
        src,
        &opts,
        vec![Box::new(CtfTypes::new(Arc::clone(&types.vmlinux)))],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    linux.plan(&program);
    let en = fw.enable(&program, false).unwrap();
    assert!(en.matched >= 1);
    fw.go().unwrap();
    linux.go_live();
    child.release().unwrap();
    during();
    let status = loop {
        linux.pump(&mut fw, 20).unwrap();
        fw.poll();
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
    };
    assert_eq!(status, ExitStatus::Exited(0));
    linux.finish(&mut fw);
    fw.stop().unwrap();
    linux.close();
    (fw, en)
}

/// `(key, count)` of every key, its records summed over the CPUs, per aggregation of `en` (one
/// snapshot).
fn aggs(fw: &mut Framework, en: &Enabling) -> Vec<Vec<(Vec<u8>, u64)>> {
    let snap = fw.snapshot_aggregations();
    en.aggs
        .iter()
        .map(|d| {
            // Each key once, its counts summed over the CPUs (the traced program may move from
            // one to another between its writes): in the key's first order.
            let mut merged: Vec<(Vec<u8>, u64)> = Vec::new();
            let records = snap.iter().flat_map(|a| a.records.iter());
            for r in records.filter(|r| r.aggid == d.aggid) {
                let n = u64::from_ne_bytes(r.value[..8].try_into().unwrap());
                match merged.iter_mut().find(|(k, _)| *k == r.key) {
                    Some((_, total)) => *total += n,
                    None => merged.push((r.key.clone(), n)),
                }
            }
            merged
        })
        .collect()
}

fn ints(k: &[u8]) -> Vec<i32> {
    k.chunks(4)
        .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

const DD: [&str; 6] = [
    "/bin/dd",
    "if=/dev/zero",
    "of=/dev/null",
    "bs=1",
    "count=3",
    "status=none",
];

#[test]
fn curthread_chains_agree_with_the_builtin_variables() {
    if !ready("curthread_chains_agree_with_the_builtin_variables") {
        return;
    }
    let (mut fw, en) = run(
        "kc",
        &DD,
        r#"syscall::write:entry /pid == $target/ {
            @ids[curthread->pid == tid, curthread->tgid == pid, curthread->real_parent->tgid == ppid,
                 stringof(curthread->comm) == execname, curlwpsinfo->pr_lwpid == tid,
                 curpsinfo->pr_pid == pid, curpsinfo->pr_ppid == ppid,
                 stringof(curpsinfo->pr_fname) == execname] = count();
            @pid[curthread->pid] = count();
            @ppid[curthread->real_parent->tgid] = count();
            @name[stringof(curthread->comm)] = count();
        }"#,
        || {},
    );
    let a = aggs(&mut fw, &en);
    let ids = &a[0];
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(ints(&ids[0].0), vec![1; 8], "{ids:?}");
    assert_eq!(ids[0].1, 3);
    let pids = &a[1];
    assert_eq!(pids.len(), 1);
    assert!(ints(&pids[0].0)[0] > 1, "{pids:?}");
    // dd's parent is this test process.
    let ppids = &a[2];
    assert_eq!(ints(&ppids[0].0)[0], std::process::id() as i32);
    let names = &a[3];
    assert_eq!(names.len(), 1);
    assert!(names[0].0.starts_with(b"dd\0"), "{names:?}");
}

#[test]
fn a_chain_through_null_faults_at_its_address() {
    if !ready("a_chain_through_null_faults_at_its_address") {
        return;
    }
    // vfork_done is NULL in a running program that was not vforked (or has exec'd since);
    // `done` is the first member of struct completion: DTrace reports address 0.
    let (mut fw, en) = run(
        "kn",
        &DD,
        r#"syscall::write:entry /pid == $target/ { @[curthread->vfork_done->done] = count(); }
           dtrace:::ERROR { @err[arg4, arg5] = count(); }"#,
        || {},
    );
    let a = aggs(&mut fw, &en);
    assert!(a[0].is_empty());
    let err = &a[1];
    let keys: Vec<(u64, u64)> = err
        .iter()
        .map(|(k, _)| {
            (
                u64::from_ne_bytes(k[..8].try_into().unwrap()),
                u64::from_ne_bytes(k[8..16].try_into().unwrap()),
            )
        })
        .collect();
    // DTRACEFLT_BADADDR at address 0, once per write.
    assert_eq!(keys, vec![(1, 0)]);
    assert_eq!(err[0].1, 3);
}

#[test]
fn tracepoint_pointer_argument_chain() {
    if !ready("tracepoint_pointer_argument_chain") {
        return;
    }
    // net_dev_queue's skbaddr is a struct sk_buff *, its len the skb's length: both read at the
    // probe, one from the record, one through the pointer. Loopback datagrams make it fire.
    let (mut fw, en) = run(
        "kq",
        &["/bin/sleep", "0.3"],
        r#"sdt:net::net_dev_queue { @[((struct sk_buff *)arg0)->len == args[1], args[1] > 0] = count(); }"#,
        || {
            let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let r = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            for n in 1..=5 {
                s.send_to(&vec![b'x'; 10 * n], r.local_addr().unwrap())
                    .unwrap();
            }
        },
    );
    let a = &aggs(&mut fw, &en)[0];
    let total: u64 = a.iter().map(|(_, c)| c).sum();
    assert!(total >= 5, "{a:?}");
    for (k, _) in a {
        assert_eq!(ints(k), vec![1, 1], "{a:?}");
    }
}

#[test]
fn sched_switch_fields_agree_with_curthread() {
    if !ready("sched_switch_fields_agree_with_curthread") {
        return;
    }
    // sched_switch is reported by the outgoing thread: its prev_comm and prev_pid are curthread's.
    let (mut fw, en) = run(
        "ks",
        &["/bin/sleep", "0.1"],
        r#"sdt:sched::sched_switch {
            @[curthread->pid == args[1], stringof(curthread->comm) == stringof(args[0])] = count();
        }"#,
        || {},
    );
    let a = &aggs(&mut fw, &en)[0];
    let total: u64 = a.iter().map(|(_, c)| c).sum();
    assert!(total >= 1, "{a:?}");
    for (k, _) in a {
        assert_eq!(ints(k), vec![1, 1], "{a:?}");
    }
}

#[test]
fn a_thread_local_holding_curthread_is_read_at_a_later_probe() {
    if !ready("a_thread_local_holding_curthread_is_read_at_a_later_probe") {
        return;
    }
    let (mut fw, en) = run(
        "kt",
        &DD,
        r#"syscall::write:entry /pid == $target/ { self->t = curthread; }
           syscall::write:return /self->t/ {
               @[self->t->pid == tid, self->t->real_parent->tgid == ppid] = count(); self->t = 0;
           }"#,
        || {},
    );
    let a = &aggs(&mut fw, &en)[0];
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!(ints(&a[0].0), vec![1, 1], "{a:?}");
    assert_eq!(a[0].1, 3);
}
