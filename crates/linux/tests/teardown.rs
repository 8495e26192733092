//! Kernel tests of teardown: after a session is dropped, or its process is told to stop by SIGTERM or
//! SIGINT, none of its programs (or their perf events) remain; a verifier rejection carries the log.

mod common;
use common::*;
use dtrace_linux::bpf::insn::{Asm, R0};
use dtrace_linux::bpf::{ProgKind, Program};
use dtrace_linux::capture::{AddrExpr, CaptureSpec, CopyRequest, MemKind};
use dtrace_linux::LinuxError;
use std::io::BufRead;

fn ours(prefix: &str) -> usize {
    bpf_prog_names()
        .unwrap_or_default()
        .iter()
        .filter(|n| n.starts_with(prefix))
        .count()
}

/// Programs detached from tracepoints are freed after an RCU grace period: give the kernel up to a few
/// seconds to release them before declaring a leak.
fn ours_after_release(prefix: &str) -> usize {
    for _ in 0..100 {
        if ours(prefix) == 0 {
            return 0;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    ours(prefix)
}

fn perf_fds_of_self() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().contains("perf_event"))
        })
        .count()
}

#[test]
fn dropping_a_session_detaches_everything() {
    if !kernel_ok("dropping_a_session_detaches_everything")
        || !dtrace_testkit::skip_unless(
            dtrace_testkit::have_program("bpftool"),
            "teardown",
            "needs bpftool",
        )
    {
        return;
    }
    let cat = catalog();
    let prefix = format!("dt{}t", std::process::id() % 10000);
    let perf_before = perf_fds_of_self();
    let mut s = dtrace_linux::Session::new(dtrace_linux::SessionOptions {
        name_prefix: prefix.clone(),
        ..Default::default()
    })
    .unwrap();
    let copy = CopyRequest {
        addr: AddrExpr::arg(1),
        kind: MemKind::UserString,
        size: 64,
        size_arg: None,
    };
    s.enable(
        &probe(&cat, "syscall::openat:entry"),
        1,
        &CaptureSpec {
            copies: vec![copy],
            ..CaptureSpec::new()
        },
    )
    .unwrap();
    // `exec-success` fires from the sched_process_exec tracefs event (a perf event; the `sched`
    // probes are raw tracepoint links).
    s.enable(&probe(&cat, "proc:::exec-success"), 2, &CaptureSpec::new())
        .unwrap();
    s.enable(
        &probe(&cat, "profile:::profile-97"),
        3,
        &CaptureSpec {
            kstack: Some(8),
            ..CaptureSpec::new()
        },
    )
    .unwrap();
    // openat has its entry program and its return-side re-read program, on its function's
    // trampoline (fentry and fexit) where the kernel has them, else in slots of the sys_enter
    // and sys_exit dispatchers (two more programs); exec-success and profile one each.
    let dispatchers = if on_trampolines() { 0 } else { 2 };
    assert_eq!(ours(&prefix), 4 + dispatchers);
    let cpus = dtrace_linux::bpf::map::online_cpus().unwrap().len();
    assert_eq!(
        perf_fds_of_self(),
        perf_before + 1 + cpus,
        "one perf event for the exec tracepoint, one per CPU for profile (syscalls use raw tracepoint links)"
    );
    drop(s);
    assert_eq!(
        perf_fds_of_self(),
        perf_before,
        "perf events left open after drop"
    );
    assert_eq!(
        ours_after_release(&prefix),
        0,
        "programs left loaded after drop"
    );
}

fn capture_example() -> Option<std::path::PathBuf> {
    // target/<profile>/deps/teardown-xxxx -> target/<profile>/examples/capture
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.parent()?.join("examples").join("capture");
    p.is_file().then_some(p)
}

#[test]
fn a_terminated_tracer_leaves_nothing_attached() {
    if !kernel_ok("a_terminated_tracer_leaves_nothing_attached")
        || !dtrace_testkit::skip_unless(
            dtrace_testkit::have_program("bpftool"),
            "teardown",
            "needs bpftool",
        )
    {
        return;
    }
    let Some(tool) = capture_example() else {
        // Examples are built by `cargo test`; a filtered build may lack it.
        assert!(
            !dtrace_testkit::skips_forbidden(),
            "capture example not built"
        );
        eprintln!("SKIP a_terminated_tracer_leaves_nothing_attached: capture example not built");
        return;
    };
    for (i, sig) in [libc::SIGTERM, libc::SIGINT].into_iter().enumerate() {
        let prefix = format!("dt{}k{i}", std::process::id() % 10000);
        let mut child = std::process::Command::new(&tool)
            // A time limit, so a failing assertion below cannot leave the tracer running for good.
            .args(["-p", &prefix, "-t", "60", "syscall::write:entry"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        assert!(line.contains("matched 1 probes"), "{line}");
        // (On its function's trampoline where the kernel has them: no dispatcher.)
        assert_eq!(
            ours(&prefix),
            if on_trampolines() { 1 } else { 2 },
            "the write:entry program and the sys_enter dispatcher"
        );
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let st = child.wait().unwrap();
        assert!(
            st.success(),
            "tracer did not exit cleanly on signal {sig}: {st:?}"
        );
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
        assert!(rest.contains("drops"), "{rest}");
        assert_eq!(
            ours_after_release(&prefix),
            0,
            "programs left loaded after signal {sig}"
        );
    }
}

#[test]
fn verifier_rejection_returns_the_log() {
    if !kernel_ok("verifier_rejection_returns_the_log") {
        return;
    }
    // Reading r0 before it is written: the verifier refuses and says why.
    let mut a = Asm::new();
    a.exit();
    let insns = a.finish().unwrap();
    let e = Program::load(
        ProgKind::Tracepoint,
        &insns,
        "dt_bad",
        "syscall::read:entry",
    )
    .unwrap_err();
    match &e {
        LinuxError::VerifierRejected { probe, log, .. } => {
            assert_eq!(probe, "syscall::read:entry");
            assert!(log.contains("R0 !read_ok"), "{log}");
        }
        other => panic!("expected a verifier rejection, got {other}"),
    }
    let mut ok = Asm::new();
    ok.mov_imm(R0, 0).exit();
    Program::load(ProgKind::Tracepoint, &ok.finish().unwrap(), "dt_ok", "t").unwrap();
}

/// Whether syscall entries go on their functions' trampolines here (`dtrace_linux::syscall_fentry`).
fn on_trampolines() -> bool {
    cfg!(target_arch = "x86_64") && dtrace_testkit::KernelFeature::Fentry.present()
}
