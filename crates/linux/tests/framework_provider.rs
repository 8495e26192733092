//! The Linux providers driving the framework end to end: D compiled by `dtrace-compiler`, enabled
//! through the framework on real syscall probes, run over a gcc-compiled program.

mod common;

use common::{compile, gcc_ok, kernel_ok};
use dtrace_compiler::{compile as compile_d, CompileOptions};
use dtrace_framework::records::RecordIter;
use dtrace_framework::{Enabling, Framework, Options};
use dtrace_linux::process::{spawn_held, ExitStatus};
use dtrace_linux::provider::framework_ncpus;
use dtrace_linux::LinuxTracing;

const WRITER: &str = r#"
#include <stdlib.h>
#include <unistd.h>
#include <fcntl.h>
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    int fd = open("/dev/null", O_WRONLY);
    for (int i = 0; i < n; i++)
        if (write(fd, "x", 1) != 1) return 1;
    if (argc > 2) {
        int f = openat(AT_FDCWD, argv[2], O_RDONLY);
        if (f >= 0) close(f);
    }
    return 0;
}
"#;

fn tracing(tag: &str) -> LinuxTracing {
    common::linux_tracing(tag)
}

/// Compiles `src` (with `PID` replaced by the held child's pid, which is also `$target`), runs `argv` under it and returns the
/// framework after `stop` with its principal buffers' contents.
fn run(tag: &str, argv: &[String], src: &str) -> (Framework, Enabling, Vec<u8>) {
    let linux = tracing(tag);
    let mut fw = Framework::new(Options::default(), framework_ncpus().unwrap());
    fw.set_option("bufsize", Some("1m")).unwrap();
    linux.register(&mut fw).unwrap();
    let mut child = spawn_held(argv).unwrap();
    let pid = child.pid().to_string();
    let src = src.replace("PID", &pid);
    // `$target` as dtrace -c/-p define it.
    let opts = CompileOptions {
        macros: vec![("target".into(), pid)],
        ..CompileOptions::default()
    };
    let program = compile_d(&src, &opts).unwrap_or_else(|e| panic!("{e:?}"));
    linux.plan(&program);
    let en = fw.enable(&program, false).unwrap();
    assert!(en.matched >= 1);
    assert_eq!(linux.enabled_count(), en.matched);
    fw.go().unwrap();
    child.release().unwrap();
    let status = loop {
        linux.pump(&mut fw, 50).unwrap();
        fw.poll();
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
    };
    assert_eq!(status, ExitStatus::Exited(0));
    // Every record of the child is in the ring by the time it has exited.
    linux.finish(&mut fw);
    assert_eq!(linux.drops().unwrap(), 0);
    fw.stop().unwrap();
    linux.close();
    assert_eq!(linux.enabled_count(), 0);
    let mut data = Vec::new();
    for snap in fw.switch_all() {
        data.extend_from_slice(&snap.data);
    }
    (fw, en, data)
}

#[test]
fn counts_exactly_the_writes_of_the_target() {
    if !kernel_ok("counts_exactly_the_writes_of_the_target") || !gcc_ok("counts_exactly_the_writes")
    {
        return;
    }
    let exe = compile("fwwriter", WRITER);
    for n in [0u64, 1, 37] {
        let argv = vec![exe.display().to_string(), n.to_string()];
        let (mut fw, en, _) = run(
            "cw",
            &argv,
            "syscall::write:entry /pid == $target/ { @c = count(); @e[execname] = count(); }",
        );
        let aggs = fw.snapshot_aggregations();
        assert_eq!(en.aggs.len(), 2);
        let recs = |i: usize| {
            let id = en.aggs[i].aggid;
            aggs.iter()
                .flat_map(|a| a.records.iter())
                .filter(move |r| r.aggid == id)
        };
        let total: u64 = recs(0)
            .map(|r| u64::from_ne_bytes(r.value[..8].try_into().unwrap()))
            .sum();
        assert_eq!(total, n, "@c for {n} writes");
        let by_name: u64 = recs(1)
            .filter(|r| r.key.starts_with(b"fwwriter\0"))
            .map(|r| u64::from_ne_bytes(r.value[..8].try_into().unwrap()))
            .sum();
        assert_eq!(by_name, n, "@e[execname] for {n} writes");
    }
}

#[test]
fn copyinstr_of_openat_path() {
    if !kernel_ok("copyinstr_of_openat_path") || !gcc_ok("copyinstr_of_openat_path") {
        return;
    }
    let exe = compile("fwopener", WRITER);
    let path = format!("/tmp/dtrace-linuxprov-{}-no-such-file", std::process::id());
    let argv = vec![exe.display().to_string(), "0".into(), path.clone()];
    let (fw, _, data) = run(
        "oa",
        &argv,
        r#"syscall::openat:entry /pid == PID/ { printf("%s|%d|%d", copyinstr(arg1), errno, tid == pid); }"#,
    );
    let mut seen = Vec::new();
    for r in RecordIter::new(&data, |e| fw.eprobe(e).map(|d| d.size)) {
        let (_, _, bytes) = r.unwrap();
        seen.push(bytes.to_vec());
    }
    // The loader opens libraries, then /dev/null, then our path: all through openat.
    let hay: Vec<u8> = seen.concat();
    let needle = path.as_bytes();
    assert!(
        hay.windows(needle.len()).any(|w| w == needle),
        "path not among {} records",
        seen.len()
    );
    assert!(
        hay.windows(11)
            .any(|w| w == b"/dev/null\0\0" || w.starts_with(b"/dev/null\0")),
        "/dev/null not seen"
    );
}

#[test]
fn probes_are_listed_with_argument_types() {
    if !kernel_ok("probes_are_listed_with_argument_types") {
        return;
    }
    let linux = tracing("ls");
    let mut fw = Framework::new(Options::default(), 1);
    linux.register(&mut fw).unwrap();
    let desc = |p: &str, f: &str, n: &str| dtrace_dif::program::ProbeDesc {
        provider: p.into(),
        function: f.into(),
        name: n.into(),
        ..Default::default()
    };
    let open = fw.list_probes(&desc("syscall", "openat", "entry"));
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].module, "vmlinux");
    let a1 = fw.arg_desc(open[0].id, 1).unwrap();
    assert!(
        a1.native.contains("char") && a1.native.contains('*'),
        "{a1:?}"
    );
    assert!(fw.arg_desc(open[0].id, 40).is_none());
    assert!(fw.list_probes(&desc("syscall", "", "return")).len() > 100);
    assert!(!fw.list_probes(&desc("proc", "", "exec-success")).is_empty());
    assert!(fw.provider_attributes("syscall").is_some());
    // The framework's own profile provider stays; ours does not clash with it.
    assert!(!fw.list_probes(&desc("profile", "", "tick-1")).is_empty());
    // Listing needs no BPF objects.
    assert_eq!(linux.enabled_count(), 0);
}

#[test]
fn return_probe_errno_and_identity() {
    if !kernel_ok("return_probe_errno_and_identity") || !gcc_ok("return_probe_errno_and_identity") {
        return;
    }
    let exe = compile("fwerrno", WRITER);
    let path = format!("/tmp/dtrace-linuxprov-{}-absent", std::process::id());
    let argv = vec![exe.display().to_string(), "0".into(), path];
    // The last openat of the program is of a path that does not exist: ENOENT (2). Keys: errno,
    // whether arg0 is -1 as DTrace reports it, and whether the identity variables are the child's.
    let (mut fw, en, _) = run(
        "er",
        &argv,
        "syscall::openat:return /pid == PID/ { @r[errno, (int)arg0, ppid > 0, uid == 0, tid == PID, execname] = count(); }",
    );
    let aggs = fw.snapshot_aggregations();
    let keys: Vec<Vec<u8>> = aggs
        .iter()
        .flat_map(|a| a.records.iter())
        .filter(|r| r.aggid == en.aggs[0].aggid)
        .map(|r| r.key.clone())
        .collect();
    assert!(!keys.is_empty());
    // Keys are five 4-byte ints, then the string.
    let ints = |k: &[u8]| -> Vec<i32> {
        k.chunks(4)
            .take(5)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    };
    let all: Vec<Vec<i32>> = keys.iter().map(|k| ints(k)).collect();
    let enoent: Vec<&Vec<i32>> = all.iter().filter(|v| v[0] == 2).collect();
    assert!(!enoent.is_empty(), "no ENOENT among {all:?}");
    for v in &all {
        // arg0 is the kernel's return value: negative on failure (the catalogue's convention).
        assert_eq!(v[0] != 0, v[1] < 0, "errno and arg0 agree: {v:?}");
        assert_eq!(&v[2..], &[1, 1, 1], "ppid/uid/tid: {v:?}");
    }
    assert!(all.iter().any(|v| v[0] == 0), "successful openat calls");
    assert!(keys.iter().all(|k| k.windows(7).any(|w| w == b"fwerrno")));
}

/// Sums the count() values of aggregation `i` of `en` whose key starts with `key`.
fn count_of(fw: &mut Framework, en: &Enabling, i: usize, key: &[u8]) -> u64 {
    let id = en.aggs[i].aggid;
    fw.snapshot_aggregations()
        .iter()
        .flat_map(|a| a.records.iter())
        .filter(|r| r.aggid == id && r.key.starts_with(key))
        .map(|r| u64::from_ne_bytes(r.value[..8].try_into().unwrap()))
        .sum()
}

#[test]
fn proc_and_sched_probes_fire_for_the_target() {
    if !kernel_ok("proc_and_sched_probes_fire_for_the_target")
        || !gcc_ok("proc_and_sched_probes_fire_for_the_target")
    {
        return;
    }
    let exe = compile("fwexec", WRITER);
    let argv = vec![exe.display().to_string(), "3".into()];
    // exec-success fires once, in the new image.
    let (mut fw, en, _) = run(
        "ex",
        &argv,
        "proc:::exec-success /pid == PID/ { @[execname] = count(); }",
    );
    assert_eq!(count_of(&mut fw, &en, 0, b"fwexec\0"), 1);
    // on-cpu reports the incoming thread from the outgoing one's context: the pid predicate runs in
    // the framework (not pushed into the kernel) and still sees the target.
    let (mut fw, en, _) = run(
        "oc",
        &argv,
        "sched:::on-cpu /pid == PID/ { @[tid == PID] = count(); }",
    );
    let on = count_of(&mut fw, &en, 0, &1i32.to_ne_bytes());
    assert!(on >= 1, "on-cpu of the target: {on}");
}

#[test]
fn sdt_data_loc_string_argument() {
    if !kernel_ok("sdt_data_loc_string_argument") || !gcc_ok("sdt_data_loc_string_argument") {
        return;
    }
    let exe = compile("fwsdt", WRITER);
    let argv = vec![exe.display().to_string(), "0".into()];
    // sched_process_exec's filename is a __data_loc string in the tracepoint record.
    let (fw, _, data) = run(
        "sd",
        &argv,
        r#"sdt:sched::sched_process_exec /pid == PID/ { printf("<%s>", stringof(args[0])); }"#,
    );
    let hay: Vec<u8> = RecordIter::new(&data, |e| fw.eprobe(e).map(|d| d.size))
        .flat_map(|r| r.unwrap().2.to_vec())
        .collect();
    let needle = exe.display().to_string();
    assert!(
        hay.windows(needle.len()).any(|w| w == needle.as_bytes()),
        "{needle} not in {:?}",
        String::from_utf8_lossy(&hay)
    );
}

/// Writes 100 one-byte, then (once `argv[1]` is opened for writing) 100 two-byte, then (once
/// `argv[2]` is) 100 three-byte writes to /dev/null: the FIFOs' opens meet the test's between
/// the batches.
const PHASED_WRITER: &str = r#"
#include <fcntl.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char buf[3] = "xyz";
    int fd = open("/dev/null", O_WRONLY);
    for (int phase = 1; phase <= 3; phase++) {
        if (phase > 1) {
            int f = open(argv[phase - 1], O_RDONLY);
            if (f < 0 || read(f, buf, 1) != 1) return 2;
            close(f);
        }
        for (int i = 0; i < 100; i++)
            if (write(fd, buf, phase) != phase) return 1;
    }
    return 0;
}
"#;

/// Records built at the probe take their room in the CPU's principal buffer there, from what
/// dtrace granted (`LinuxTracing::set_record_room`, at `go` and at each switch): a record built
/// but not yet read from the ring when the buffer is switched still holds its room, so the room
/// given again does not come on top of it; once read, its room comes back.
#[test]
fn records_on_their_way_keep_their_room_across_a_switch() {
    let t = "records_on_their_way_keep_their_room_across_a_switch";
    if !kernel_ok(t) || !gcc_ok(t) {
        return;
    }
    let exe = compile("fwphased", PHASED_WRITER);
    let dir = std::env::temp_dir().join(format!("dtrace-linux-test-{}-room", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifos: Vec<std::path::PathBuf> = (1..=2).map(|i| dir.join(format!("fifo{i}"))).collect();
    for f in &fifos {
        let c = std::ffi::CString::new(f.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(
            unsafe { libc::mkfifo(c.as_ptr(), 0o600) },
            0,
            "mkfifo {}",
            f.display()
        );
    }
    let linux = tracing("rm");
    // As dtrace's KernelTracer does: clauses the kernel can run whole run at the probe.
    linux.set_kernel_aggregations(Ok(()));
    let ncpus = framework_ncpus().unwrap();
    let mut fw = Framework::new(Options::default(), ncpus);
    linux.register(&mut fw).unwrap();
    // On one CPU: each CPU has its own room, and a writer moved to another between the batches
    // would find room there for the second batch.
    let mut argv: Vec<String> = ["taskset", "-c", "0"].map(String::from).to_vec();
    argv.push(exe.display().to_string());
    argv.extend(fifos.iter().map(|f| f.display().to_string()));
    let mut child = spawn_held(&argv).unwrap();
    let opts = CompileOptions {
        macros: vec![("target".into(), child.pid().to_string())],
        ..CompileOptions::default()
    };
    let program = compile_d(
        "syscall::write:entry /pid == $target/ { trace(arg2); }",
        &opts,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    linux.plan(&program);
    let en = fw.enable(&program, false).unwrap();
    // As dtrace's KernelTracer binds them: the clause runs whole at the probe.
    for ep in &en.eprobes {
        assert!(
            linux.aggregates_in_kernel(ep.clause as usize, ep.probe_id),
            "not at the probe"
        );
        fw.run_elsewhere(ep.epid);
        linux
            .bind_record(ep.clause as usize, ep.probe_id, ep.epid, ep.size, &ep.recs)
            .unwrap();
    }
    fw.go().unwrap();
    linux.go_live();
    linux.fix_clock(fw.now());
    linux.kernel_aggregations_on(true).unwrap();
    // Room for ten records of 24 bytes (an EPID, a timestamp, arg2) on every CPU.
    let room = vec![240u64; ncpus as usize];
    linux.set_record_room(&room).unwrap();
    child.release().unwrap();
    let mut values: Vec<u64> = Vec::new();
    let take = |fw: &mut Framework, values: &mut Vec<u64>| {
        for snap in fw.switch_all() {
            for r in RecordIter::new(&snap.data, |e| fw.eprobe(e).map(|d| d.size)) {
                let (_, _, bytes) = r.unwrap();
                let v = bytes[bytes.len() - 8..].try_into().unwrap();
                values.push(u64::from_ne_bytes(v));
            }
        }
    };
    for (i, f) in fifos.iter().enumerate() {
        // Meets the writer's open: the batch before it was written.
        let mut w = std::fs::OpenOptions::new().write(true).open(f).unwrap();
        if i == 1 {
            // Every record of the first two batches is read and the buffers switched.
            linux.finish(&mut fw);
            take(&mut fw, &mut values);
        }
        // A switch: nothing read from the ring after the first batch.
        linux.set_record_room(&room).unwrap();
        std::io::Write::write_all(&mut w, b"g").unwrap();
    }
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert_eq!(status, ExitStatus::Exited(0));
    linux.finish(&mut fw);
    take(&mut fw, &mut values);
    let drops = linux.drops().unwrap();
    fw.stop().unwrap();
    linux.close();
    let _ = std::fs::remove_dir_all(&dir);
    let batch = |n: u64| values.iter().filter(|v| **v == n).count();
    assert_eq!(batch(1), 10, "{values:?}");
    assert_eq!(
        batch(2),
        0,
        "the first batch's records were on their way: {values:?}"
    );
    assert_eq!(batch(3), 10, "{values:?}");
    assert_eq!(values.len() as u64 + drops, 300, "{values:?}");
}
