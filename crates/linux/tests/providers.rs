//! Kernel tests of the proc, sched, sdt and profile providers, and of the catalogue.

mod common;
use common::*;
use dtrace_linux::capture::CaptureSpec;
use dtrace_linux::process::ExitStatus;
use dtrace_linux::symbols::Symbolizer;
use dtrace_linux::{LinuxError, ProbeDesc};

#[test]
fn catalogue_lists_every_syscall_twice_and_the_named_providers() {
    if !kernel_ok("catalogue_lists_every_syscall_twice_and_the_named_providers") {
        return;
    }
    let cat = catalog();
    let root = cat.root().to_path_buf();
    let enters = std::fs::read_dir(root.join("events/syscalls"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("sys_enter_"))
        .count();
    let entry = cat
        .probes()
        .iter()
        .filter(|p| p.desc.provider == "syscall" && p.desc.name == "entry")
        .count();
    let ret = cat
        .probes()
        .iter()
        .filter(|p| p.desc.provider == "syscall" && p.desc.name == "return")
        .count();
    assert_eq!(entry, enters);
    assert_eq!(ret, enters);
    let read = probe(&cat, "syscall:vmlinux:read:entry");
    assert_eq!(read.args.len(), 3);
    assert_eq!(read.args[1].dtype, "char *");
    for name in [
        "proc:::exec-success",
        "proc:::exit",
        "proc:::create",
        "proc:::start",
        "proc:::lwp-start",
        "sched:::on-cpu",
        "sched:::off-cpu",
        "sched:::wakeup",
        "proc:::signal-send",
        "profile:::profile-997",
        "profile:::tick-1sec",
        "sdt:sched::sched_switch",
    ] {
        probe(&cat, name);
    }
    // Any rate exists on demand; nonsense does not.
    assert!(cat
        .get(&ProbeDesc::parse("profile:::profile-1234"))
        .is_some());
    assert!(matches!(
        cat.matching(&ProbeDesc::parse("syscall::no_such_call:entry")),
        Err(LinuxError::NoSuchProbe(_))
    ));
    let reads = cat
        .matching(&ProbeDesc::parse("syscall::read*:entry"))
        .unwrap();
    assert!(
        reads.len() >= 3,
        "read, readv, readlink...: {}",
        reads.len()
    );
    let sw = probe(&cat, "sdt:sched::sched_switch");
    assert_eq!(sw.args[0].dtype, "string");
    assert!(sw.args[0].copy.is_some());
}

#[test]
fn fbt_says_why_it_is_unavailable() {
    if !kernel_ok("fbt_says_why_it_is_unavailable") {
        return;
    }
    let cat = catalog();
    let r = cat.matching(&ProbeDesc::parse("fbt::vfs_read:entry"));
    if dtrace_linux::features::have_fentry() {
        let p = r.expect("fbt::vfs_read:entry on a kernel with fentry");
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].args[0].native, "struct file *");
        return;
    }
    let e = r.unwrap_err();
    if dtrace_linux::features::have_kprobes() {
        assert!(matches!(e, LinuxError::NotYetSupported(_)), "{e}");
    } else {
        assert!(matches!(e, LinuxError::FbtUnavailable), "{e}");
        assert_eq!(
            e.to_string(),
            "fbt provider unavailable: this kernel has no kprobes or fentry"
        );
    }
}

#[test]
fn exec_success_sees_the_spawned_command() {
    if !kernel_ok("exec_success_sees_the_spawned_command") {
        return;
    }
    let cat = catalog();
    let exec = probe(&cat, "proc:::exec-success");
    let sdt_exec = probe(&cat, "sdt:sched::sched_process_exec");
    let exit = probe(&cat, "proc:::exit");
    let mut s = session("e");
    let (pid, st, events) = run_traced(&mut s, &["true".to_string()], |s, _| {
        s.enable(&exec, 1, &CaptureSpec::new()).unwrap();
        // The sdt probe's filename is a __data_loc string: capture it through its catalogue copy.
        let copy = sdt_exec.args[0].copy.clone().unwrap();
        s.enable(
            &sdt_exec,
            2,
            &CaptureSpec {
                copies: vec![copy],
                ..CaptureSpec::new()
            },
        )
        .unwrap();
        // The process's arguments and ancestors, as execargs and progenyof() want them.
        s.enable(
            &exit,
            3,
            &CaptureSpec {
                execargs: Some(64),
                ancestors: true,
                ..CaptureSpec::new()
            },
        )
        .unwrap();
    });
    assert_eq!(st, ExitStatus::Exited(0));
    let ex = events
        .iter()
        .find(|e| e.tag == 3 && e.pid == pid)
        .expect("proc:::exit of the child");
    // CLD_EXITED, and the argument area of `true` (its one argument and the NUL after it).
    assert_eq!(ex.args[0], 1);
    assert_eq!(ex.execargs, Some(Ok(b"true\0".to_vec())));
    let anc = ex.ancestors.clone().unwrap();
    assert_eq!(anc.first(), Some(&std::process::id()), "{anc:?}");
    assert_eq!(anc.last(), Some(&1), "{anc:?}");
    let e = events
        .iter()
        .find(|e| e.tag == 1 && e.pid == pid)
        .expect("exec-success of the child");
    assert_eq!(e.execname(), "true");
    let sdt = events
        .iter()
        .find(|e| e.tag == 2 && e.pid == pid)
        .expect("sdt exec of the child");
    let file = String::from_utf8(sdt.copies[0].data.clone().unwrap()).unwrap();
    assert!(file.ends_with("/true"), "{file}");
    assert!(
        events.iter().any(|e| e.tag == 3 && e.pid == pid),
        "proc:::exit of the child"
    );
}

#[test]
fn sched_on_cpu_fires_for_the_thread_switched_in() {
    if !kernel_ok("sched_on_cpu_fires_for_the_thread_switched_in") {
        return;
    }
    let cat = catalog();
    let on = probe(&cat, "sched:::on-cpu");
    let off = probe(&cat, "sched:::off-cpu");
    let mut s = session("s");
    let argv: Vec<String> = ["sleep", "0.05"].iter().map(|s| s.to_string()).collect();
    let (pid, _st, events) = run_traced(&mut s, &argv, |s, pid| {
        // `/pid == $target/` pushed into the kernel: for on-cpu it tests the incoming thread.
        let only = CaptureSpec {
            filter_pid: Some(pid),
            ..CaptureSpec::new()
        };
        s.enable(&on, 1, &only).unwrap();
        s.enable(&off, 2, &only).unwrap();
        // Unfiltered on-cpu too: the child shows up as the thread switched in.
        s.enable(&on, 3, &CaptureSpec::new()).unwrap();
    });
    let all_on: Vec<_> = events.iter().filter(|e| e.tag == 3).collect();
    assert!(all_on
        .iter()
        .any(|e| e.tid == pid && e.execname() == "sleep"));
    let ons: Vec<_> = events
        .iter()
        .filter(|e| e.tag == 1 && e.tid == pid)
        .collect();
    assert!(!ons.is_empty(), "no on-cpu for the sleeping child");
    assert!(ons.iter().any(|e| e.execname() == "sleep"));
    assert!(ons.iter().all(|e| e.pid == pid));
    // Every identity value is the incoming thread's, read from its task: its parent is this test,
    // and its CPU time (zero at its first switch-in when it had not run before the probes were
    // in place) grows.
    assert!(ons
        .iter()
        .all(|e| e.ppid == std::process::id() && e.task != 0));
    assert!(ons.windows(2).all(|w| w[0].vtime_ns <= w[1].vtime_ns));
    assert!(ons.last().is_some_and(|e| e.vtime_ns > 0), "{ons:#?}");
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    assert!(ons.iter().all(|e| e.uid == uid));
    assert!(
        events.iter().any(|e| e.tag == 2 && e.pid == pid),
        "no off-cpu for the child"
    );
}

const SPINNER: &str = r#"
#include <time.h>
volatile unsigned long sink;
__attribute__((noinline)) void spin_here(void) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        for (int i = 0; i < 100000; i++) sink += i;
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 300000000L);
}
int main(void) { spin_here(); return 0; }
"#;

#[test]
fn profile_samples_with_symbolized_stacks() {
    if !kernel_ok("profile_samples_with_symbolized_stacks") || !gcc_ok("profile_samples") {
        return;
    }
    let exe = compile("spinner", SPINNER);
    let cat = catalog();
    let prof = probe(&cat, "profile:::profile-997");
    let mut s = session("p");
    let mut sym = Symbolizer::new();
    let mut child = dtrace_linux::process::spawn_held(&[exe.display().to_string()]).unwrap();
    let pid = child.pid();
    s.enable(
        &prof,
        1,
        &CaptureSpec {
            kstack: Some(32),
            ustack: Some(32),
            ..CaptureSpec::new()
        },
    )
    .unwrap();
    let by_file = CaptureSpec {
        ustack: Some(32),
        ustack_build_id: true,
        filter_pid: Some(pid),
        ..CaptureSpec::new()
    };
    s.enable(&prof, 2, &by_file).unwrap();
    child.release().unwrap();
    let mut events = Vec::new();
    loop {
        s.poll(50, &mut |e| events.push(e)).unwrap();
        // Mappings are cached at first sight, while the process is alive.
        if events.iter().any(|e| e.pid == pid) {
            sym.note_process(pid);
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
    }
    s.drain(&mut |e| events.push(e));
    drop(s);
    // Build-id frames resolve after the process is gone, from a symbolizer that never saw it alive.
    let mut late = Symbolizer::new();
    late.index_file(&exe.display().to_string());
    let file_frames: Vec<String> = events
        .iter()
        .filter(|e| e.tag == 2)
        .flat_map(|e| e.ustack_files.clone().unwrap().unwrap())
        .map(|f| late.user_file_frame(pid, &f))
        .collect();
    assert!(!file_frames.is_empty(), "no build-id user frames");
    assert!(
        file_frames
            .iter()
            .any(|f| f.starts_with("spinner`spin_here+0x")),
        "{:?}",
        &file_frames[..file_frames.len().min(10)]
    );
    let mine: Vec<_> = events
        .iter()
        .filter(|e| e.pid == pid && e.tag == 1)
        .collect();
    assert!(
        mine.len() > 10,
        "only {} samples of the spinner",
        mine.len()
    );
    // arg1 is the user PC when the sample interrupted user mode; the ustack's first frame is there too.
    let user_samples: Vec<_> = mine.iter().filter(|e| e.args[1] != 0).collect();
    assert!(!user_samples.is_empty());
    let mut spin_frames = 0;
    for e in &user_samples {
        let frames = e.ustack.clone().unwrap().unwrap();
        assert_eq!(frames.first().copied(), Some(e.args[1]));
        let text: Vec<String> = frames.iter().map(|pc| sym.user_frame(pid, *pc)).collect();
        if text.iter().any(|f| f.starts_with("spinner`spin_here+0x")) {
            spin_frames += 1;
        }
    }
    assert!(
        spin_frames > 0,
        "no ustack() frame resolved to spinner`spin_here"
    );
    // Some sample (idle or in a syscall) interrupted the kernel: its stack resolves to vmlinux frames.
    let k = events
        .iter()
        .filter_map(|e| e.kstack.clone().and_then(|s| s.ok()))
        .find(|s| !s.is_empty())
        .expect("a kernel stack");
    let f = sym.kernel_frame(k[0]);
    assert!(f.starts_with("vmlinux`") || f.contains('`'), "{f}");
}

#[test]
fn every_syscall_entry_enables_and_counts_by_execname() {
    if !kernel_ok("every_syscall_entry_enables_and_counts_by_execname") {
        return;
    }
    let cat = catalog();
    let entries = cat.matching(&ProbeDesc::parse("syscall:::entry")).unwrap();
    assert!(
        entries.len() > 300,
        "{} syscall entry probes",
        entries.len()
    );
    let mut s = session("a");
    let t = std::time::Instant::now();
    let mut enabled = 0;
    let (pid, st, events) = run_traced(&mut s, &["true".to_string()], |s, pid| {
        for (i, p) in entries.iter().enumerate() {
            // A syscall whose tracepoint exists but cannot take a program is reported, not fatal.
            match s.enable(
                p,
                i as u32,
                &CaptureSpec {
                    filter_pid: Some(pid),
                    ..CaptureSpec::new()
                },
            ) {
                Ok(()) => enabled += 1,
                Err(e) => eprintln!("{}: {e}", p.desc),
            }
        }
    });
    eprintln!(
        "enabled {enabled} syscall entry probes in {:?}",
        t.elapsed()
    );
    let t = std::time::Instant::now();
    drop(s);
    eprintln!("detached them in {:?}", t.elapsed());
    assert_eq!(enabled, entries.len());
    assert_eq!(st, ExitStatus::Exited(0));
    // @[execname] = count() over the child's syscalls: execve's entry is seen as the parent's
    // name (before exec), everything after as "true".
    let mut by_name: std::collections::BTreeMap<String, usize> = Default::default();
    for e in events.iter().filter(|e| e.pid == pid) {
        *by_name.entry(e.execname()).or_default() += 1;
    }
    assert!(by_name.get("true").copied().unwrap_or(0) > 5, "{by_name:?}");
    let names: std::collections::BTreeSet<&str> = events
        .iter()
        .filter(|e| e.pid == pid)
        .map(|e| entries[e.tag as usize].desc.function.as_str())
        .collect();
    for call in ["execve", "exit_group"] {
        assert!(names.contains(call), "no {call} entry among {names:?}");
    }
}

#[test]
fn thread_and_process_args_are_task_pointers_typed_for_translation() {
    if !kernel_ok("thread_and_process_args_are_task_pointers_typed_for_translation") {
        return;
    }
    let cat = catalog();
    for (name, want) in [
        ("sched:::wakeup", &["lwpsinfo_t *", "psinfo_t *"][..]),
        ("sched:::off-cpu", &["lwpsinfo_t *", "psinfo_t *"][..]),
        ("proc:::create", &["psinfo_t *"][..]),
        ("proc:::lwp-create", &["lwpsinfo_t *", "psinfo_t *"][..]),
        (
            "proc:::signal-send",
            &["lwpsinfo_t *", "psinfo_t *", "int"][..],
        ),
        (
            "proc:::signal-discard",
            &["lwpsinfo_t *", "psinfo_t *", "int"][..],
        ),
        (
            "sched:::change-pri",
            &["lwpsinfo_t *", "psinfo_t *", "int"][..],
        ),
    ] {
        let p = probe(&cat, name);
        let d: Vec<&str> = p.args.iter().map(|a| a.dtype.as_str()).collect();
        assert_eq!(d, want, "{name}");
        for a in &p.args {
            if a.dtype != "int" {
                assert_eq!(a.native, "struct task_struct *", "{name}");
            }
        }
        assert!(
            matches!(
                p.attach,
                dtrace_linux::catalog::AttachPoint::RawTracepoint { .. }
            ),
            "{name}"
        );
    }
}

#[test]
fn signal_and_create_args_name_the_target_task() {
    if !kernel_ok("signal_and_create_args_name_the_target_task") {
        return;
    }
    let cat = catalog();
    let send = probe(&cat, "proc:::signal-send");
    let discard = probe(&cat, "proc:::signal-discard");
    let create = probe(&cat, "proc:::create");
    let mut s = session("g");
    // SIGUSR2 to itself while ignoring it (discarded), then SIGUSR1 to a sleeping child.
    let argv: Vec<String> = [
        "sh",
        "-c",
        "trap '' USR2; kill -USR2 $$; sleep 1 & kill -USR1 $!; wait",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (pid, _st, events) = run_traced(&mut s, &argv, |s, pid| {
        let only = CaptureSpec {
            filter_pid: Some(pid),
            ..CaptureSpec::new()
        };
        s.enable(&send, 1, &only).unwrap();
        s.enable(&discard, 2, &only).unwrap();
        s.enable(&create, 3, &only).unwrap();
    });
    let mine = |tag| -> Vec<_> {
        events
            .iter()
            .filter(|e| e.tag == tag && e.pid == pid)
            .collect()
    };
    let sends = mine(1);
    // The ignored SIGUSR2 to itself: sent (signal-send) and discarded, the target its own task.
    let usr2: Vec<_> = sends.iter().filter(|e| e.args[2] == 12).collect();
    assert_eq!(usr2.len(), 1, "{sends:?}");
    assert_eq!(usr2[0].args[0], usr2[0].task);
    // (The shell's SIGCHLD to this test at its exit is discarded too: SIG_DFL ignores it.)
    let discards: Vec<_> = mine(2).into_iter().filter(|e| e.args[2] != 17).collect();
    assert_eq!(discards.len(), 1, "{discards:?}");
    assert_eq!(discards[0].args[2], 12);
    assert_eq!(discards[0].args[0], discards[0].task);
    assert_eq!(discards[0].args[1], discards[0].task);
    // SIGUSR1 to the child: another task.
    let usr1: Vec<_> = sends.iter().filter(|e| e.args[2] == 10).collect();
    assert_eq!(usr1.len(), 1, "{sends:?}");
    assert!(usr1[0].args[0] != 0 && usr1[0].args[0] != usr1[0].task);
    assert_eq!(usr1[0].args[0], usr1[0].args[1]);
    // The child created for `sleep` is that task.
    let creates = mine(3);
    assert!(
        creates.iter().any(|e| e.args[0] == usr1[0].args[0]),
        "{creates:?}"
    );
    assert!(creates.iter().all(|e| e.args[0] != e.task));
}

#[test]
fn io_start_and_done_carry_the_same_request() {
    if !kernel_ok("io_start_and_done_carry_the_same_request") {
        return;
    }
    let cat = catalog();
    if cat.get(&ProbeDesc::parse("io:::start")).is_none() {
        eprintln!("skipping io_start_and_done_carry_the_same_request: no block tracepoints");
        return;
    }
    let start = probe(&cat, "io:::start");
    let done = probe(&cat, "io:::done");
    // Direct writes to a file (on whatever block device holds the target directory), as dd
    // issues them: every request started is completed, with the same request.
    let file = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("io-start-done-{}", std::process::id()));
    if !on_block_device(env!("CARGO_TARGET_TMPDIR")) {
        eprintln!("skipping io_start_and_done_carry_the_same_request: target dir not on a disk");
        return;
    }
    let mut s = session("io");
    let argv: Vec<String> = [
        "dd",
        "if=/dev/zero",
        &format!("of={}", file.display()),
        "bs=4k",
        "count=16",
        "oflag=direct",
        "status=none",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (pid, st, events) = run_traced(&mut s, &argv, |s, _| {
        s.enable(&start, 1, &CaptureSpec::new()).unwrap();
        s.enable(&done, 2, &CaptureSpec::new()).unwrap();
    });
    let _ = std::fs::remove_file(&file);
    assert_eq!(st, ExitStatus::Exited(0));
    let started: Vec<u64> = events
        .iter()
        .filter(|e| e.tag == 1 && e.pid == pid)
        .map(|e| e.args[0])
        .collect();
    assert!(started.len() >= 16, "{} starts from dd", started.len());
    // A kernel pointer (struct request *), the same one as args[1]; args[2] has no file.
    // Kernel addresses (4- or 5-level page tables).
    assert!(started.iter().all(|&a| a >= 0xff00_0000_0000_0000));
    assert!(events
        .iter()
        .filter(|e| e.tag == 1)
        .all(|e| e.args[1] == e.args[0] && e.args[2] == 0));
    let done: Vec<u64> = events
        .iter()
        .filter(|e| e.tag == 2)
        .map(|e| e.args[0])
        .collect();
    for a in &started {
        assert!(
            done.contains(a),
            "request {a:#x} started by dd never completed"
        );
    }
}

/// Whether `path` lives on a block device (`/sys/dev/block/MAJOR:MINOR` exists for it).
fn on_block_device(path: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::metadata(path) else {
        return false;
    };
    let dev = m.dev();
    let (ma, mi) = (libc::major(dev), libc::minor(dev));
    std::path::Path::new(&format!("/sys/dev/block/{ma}:{mi}")).exists()
}
