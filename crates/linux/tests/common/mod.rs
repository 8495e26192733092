//! Shared helpers of the kernel tests: capability checks, compiling small C programs, and running a
//! held command under a session until it exits.

#![allow(dead_code)]

use dtrace_framework::{Framework, Options};
use dtrace_linux::capture::CapturedEvent;
use dtrace_linux::process::{spawn_held, ExitStatus};
use dtrace_linux::provider::framework_ncpus;
use dtrace_linux::{Catalog, LinuxTracing, Probe, ProbeDesc, Session, SessionOptions};
use std::path::PathBuf;

/// Whether kernel tests can run; prints SKIP (or panics under DTRACE_TEST_REQUIRE_KERNEL=1) if not.
pub fn kernel_ok(test: &str) -> bool {
    if !dtrace_testkit::skip_unless(dtrace_testkit::is_root(), test, "needs root") {
        return false;
    }
    if !dtrace_testkit::skip_unless(dtrace_linux::bpf_available(), test, "bpf(2) unavailable") {
        return false;
    }
    dtrace_testkit::skip_unless(
        dtrace_linux::tracefs::ensure_tracefs().is_ok(),
        test,
        "no tracefs",
    )
}

/// Whether gcc is there.
pub fn gcc_ok(test: &str) -> bool {
    dtrace_testkit::skip_unless(dtrace_testkit::have_program("gcc"), test, "needs gcc")
}

/// Compiles `src` into an executable named `name` in a temporary directory of its own: tests of
/// one binary run in parallel, and two compiling the same program into one path raced (gcc
/// rewriting the file while the other test executed it: "Permission denied").
pub fn compile(name: &str, src: &str) -> PathBuf {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "dtrace-linux-test-{}-{n}-{name}",
        std::process::id()
    ));
    dtrace_testkit::compile_c(
        dtrace_testkit::CSource::Text(src),
        &dir.join(name),
        &["-O0", "-g", "-fno-omit-frame-pointer", "-Wl,--build-id"],
    )
    .unwrap_or_else(|e| panic!("gcc failed for {name}: {e}"))
}

/// The catalogue (loaded once per call; cheap enough for tests).
pub fn catalog() -> Catalog {
    Catalog::load().unwrap()
}

/// The probe named `desc`.
pub fn probe(cat: &Catalog, desc: &str) -> Probe {
    let mut m = cat
        .matching(&ProbeDesc::parse(desc))
        .unwrap_or_else(|e| panic!("{desc}: {e}"));
    assert_eq!(m.len(), 1, "{desc} matches {} probes", m.len());
    m.remove(0)
}

/// Session options whose kernel objects carry a prefix unique to this test.
pub fn session_opts(tag: &str) -> SessionOptions {
    SessionOptions {
        name_prefix: format!("dt{}{tag}", std::process::id() % 10000),
        ..Default::default()
    }
}

/// A session whose kernel objects carry a prefix unique to this test.
pub fn session(tag: &str) -> Session {
    Session::new(session_opts(tag)).unwrap()
}

/// The Linux providers over the running kernel's catalogue, their kernel objects named as
/// [`session`]'s.
pub fn linux_tracing(tag: &str) -> LinuxTracing {
    LinuxTracing::new(Catalog::load().unwrap(), session_opts(tag))
}

/// [`linux_tracing`]'s providers registered in a framework of the machine's CPUs.
pub fn registered(tag: &str) -> (LinuxTracing, Framework) {
    let linux = linux_tracing(tag);
    let mut fw = Framework::new(Options::default(), framework_ncpus().unwrap());
    linux.register(&mut fw).unwrap();
    (linux, fw)
}

/// Starts `argv` held, runs `enable` (which enables probes for the child's pid), releases it, and
/// collects events until it exits and the ring is drained.
pub fn run_traced(
    s: &mut Session,
    argv: &[String],
    enable: impl FnOnce(&mut Session, u32),
) -> (u32, ExitStatus, Vec<CapturedEvent>) {
    let mut child = spawn_held(argv).unwrap();
    let pid = child.pid();
    enable(s, pid);
    child.release().unwrap();
    let mut events = Vec::new();
    let status = loop {
        s.poll(50, &mut |e| events.push(e)).unwrap();
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
    };
    s.drain(&mut |e| events.push(e));
    s.flush_held(&mut |e| events.push(e));
    (pid, status, events)
}

/// The objects `bpftool -j <what> show` lists (`prog`, `link`, `map`), each as the text of its
/// JSON object; `None` without bpftool.
pub fn bpftool_show(what: &str) -> Option<Vec<String>> {
    let out = std::process::Command::new("bpftool")
        .args(["-j", what, "show"])
        .output()
        .ok()?;
    Some(
        String::from_utf8_lossy(&out.stdout)
            .split("},{")
            .map(str::to_string)
            .collect(),
    )
}

/// Field `name` of a bpftool object (a number or string, as text).
pub fn bpftool_field(obj: &str, name: &str) -> Option<String> {
    let at = obj.find(&format!("\"{name}\":"))? + name.len() + 3;
    let v = obj[at..].split([',', '}']).next()?;
    Some(v.trim_matches(['"', ']', '[']).to_string())
}

/// Names of loaded BPF programs (from bpftool), for teardown checks.
pub fn bpf_prog_names() -> Option<Vec<String>> {
    Some(
        bpftool_show("prog")?
            .iter()
            .filter_map(|o| bpftool_field(o, "name"))
            .collect(),
    )
}
