//! Kernel tests of syscall capture: exact write(2) counts by pid, and `copyinstr(arg1)` of openat on
//! a page the program never touched.

mod common;
use common::*;
use dtrace_linux::capture::{AddrBase, AddrExpr, CaptureSpec, CopyRequest, CopySource, MemKind};
use dtrace_linux::process::ExitStatus;

const WRITER: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    int fd = open("/dev/null", O_WRONLY);
    for (int i = 0; i < n; i++) write(fd, "abc", 3);
    return 0;
}
"#;

#[test]
fn write_entry_counts_exactly_n_for_the_target() {
    if !kernel_ok("write_entry_counts_exactly_n_for_the_target") || !gcc_ok("write_entry_counts") {
        return;
    }
    let exe = compile("writer", WRITER);
    let cat = catalog();
    let p = probe(&cat, "syscall::write:entry");
    let mut s = session("w");
    const N: usize = 137;
    let argv = vec![exe.display().to_string(), N.to_string()];
    let (pid, st, events) = run_traced(&mut s, &argv, |s, pid| {
        // Tag 1: the `pid == $target` predicate pushed into the kernel; tag 2: every write, filtered here.
        s.enable(
            &p,
            1,
            &CaptureSpec {
                filter_pid: Some(pid),
                ..CaptureSpec::new()
            },
        )
        .unwrap();
        // Tag 3: `stringof(curthread->comm)` and `curthread->real_parent->tgid` as copies reached
        // from the task pointer with BTF member offsets.
        let btf = dtrace_linux::btf::Btf::load_vmlinux().unwrap();
        let task = btf.struct_id("task_struct").unwrap();
        let comm = btf.member_offset(task, "comm").unwrap() as i32;
        let parent = btf.member_offset(task, "real_parent").unwrap() as i32;
        let tgid = btf.member_offset(task, "tgid").unwrap() as i32;
        let at = |offset, derefs| AddrExpr {
            base: AddrBase::CurrentTask,
            offset,
            derefs,
            user_derefs: Vec::new(),
            index: None,
        };
        let copies = vec![
            CopyRequest {
                addr: at(comm, vec![]),
                kind: MemKind::KernelString,
                size: 16,
                size_arg: None,
            },
            CopyRequest {
                addr: at(parent, vec![tgid]),
                kind: MemKind::KernelBytes,
                size: 4,
                size_arg: None,
            },
        ];
        s.enable(
            &p,
            3,
            &CaptureSpec {
                filter_pid: Some(pid),
                copies,
                ..CaptureSpec::new()
            },
        )
        .unwrap();
        s.enable(&p, 2, &CaptureSpec::new()).unwrap();
    });
    let via_task: Vec<_> = events.iter().filter(|e| e.tag == 3).collect();
    assert_eq!(via_task.len(), N);
    for e in via_task {
        assert_eq!(e.copies[0].data.as_deref(), Ok(b"writer".as_slice()));
        assert_eq!(
            e.copies[1].data.as_deref(),
            Ok(std::process::id().to_le_bytes().as_slice())
        );
    }
    assert_eq!(st, ExitStatus::Exited(0));
    let kernel_filtered: Vec<_> = events.iter().filter(|e| e.tag == 1).collect();
    let user_filtered = events.iter().filter(|e| e.tag == 2 && e.pid == pid).count();
    assert_eq!(kernel_filtered.len(), N, "kernel-filtered count");
    assert_eq!(user_filtered, N, "user-filtered count");
    for e in &kernel_filtered {
        assert_eq!((e.pid, e.tid), (pid, pid));
        assert_eq!(e.execname(), "writer");
        assert_eq!(e.args[2], 3, "arg2 is the byte count");
        assert_eq!(
            e.ppid,
            std::process::id(),
            "ppid is the test process that forked the child"
        );
        assert_eq!(e.uid, 0);
        assert!(e.vtime_ns > 0, "vtimestamp captured");
    }
    // Timestamps and the thread's virtual time never go backwards within one thread.
    for w in kernel_filtered.windows(2) {
        assert!(w[0].ktime_ns <= w[1].ktime_ns && w[0].vtime_ns <= w[1].vtime_ns);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i128;
    let wall = kernel_filtered[0].walltime_ns as i128;
    assert!(
        (now - wall).abs() < 3_600_000_000_000,
        "walltimestamp {wall} far from now {now}"
    );
    assert_eq!(s.drops().unwrap(), 0);
    assert_eq!(s.bad_records(), 0);
}

const OPENER: &str = r#"
#include <fcntl.h>
#include <unistd.h>
/* The path sits alone in a 64 KiB-aligned window of .rodata (fault-around maps at most 64 KiB), so
   the first touch of its page is the kernel's own copy inside openat(2). */
__attribute__((aligned(65536))) const char path[65536] = "/etc/hostname";
__attribute__((aligned(65536))) const char after[65536] = "padding";
int main(void) {
    int fd = openat(AT_FDCWD, path, O_RDONLY);
    return fd < 0;
}
"#;

/// A capture of `openat`'s path (the user string at argument 1).
fn path_copy() -> CaptureSpec {
    CaptureSpec {
        copies: vec![CopyRequest {
            addr: AddrExpr::arg(1),
            kind: MemKind::UserString,
            size: 256,
            size_arg: None,
        }],
        ..CaptureSpec::new()
    }
}

#[test]
fn openat_path_is_captured_even_from_an_untouched_page() {
    if !kernel_ok("openat_path_is_captured_even_from_an_untouched_page") || !gcc_ok("openat_path") {
        return;
    }
    let exe = compile("opener", OPENER);
    let cat = catalog();
    let p = probe(&cat, "syscall::openat:entry");
    let mut s = session("o");
    let spec = path_copy();
    let (pid, st, events) = run_traced(&mut s, &[exe.display().to_string()], |s, pid| {
        s.enable(
            &p,
            7,
            &CaptureSpec {
                filter_pid: Some(pid),
                ..spec.clone()
            },
        )
        .unwrap();
    });
    assert_eq!(st, ExitStatus::Exited(0));
    let ev = events
        .iter()
        .filter(|e| e.pid == pid)
        .find(|e| e.copies[0].data.as_deref() == Ok(b"/etc/hostname".as_slice()))
        .unwrap_or_else(|| panic!("no openat of /etc/hostname among {:#?}", events));
    assert_eq!(ev.copies[0].addr, ev.args[1]);
    // The page was not resident at entry: the bytes come from the re-read at the syscall's return.
    assert_eq!(ev.copies[0].source, CopySource::AtReturn, "{ev:#?}");
    assert_eq!(s.held_count(), 0);
}

/// The entry's retry and the return's own program share the syscall's exit (the `sys_exit`
/// dispatcher runs the retry first, which then runs the return's program): both report,
/// whichever is enabled first.
#[test]
fn an_entry_retried_at_the_return_and_the_return_probe_both_report() {
    let t = "an_entry_retried_at_the_return_and_the_return_probe_both_report";
    if !kernel_ok(t) || !gcc_ok("openat_both") {
        return;
    }
    let exe = compile("opener", OPENER);
    let cat = catalog();
    let (entry, ret) = (
        probe(&cat, "syscall::openat:entry"),
        probe(&cat, "syscall::openat:return"),
    );
    let copy = path_copy();
    for return_first in [false, true] {
        let mut s = session("b");
        let (pid, st, events) = run_traced(&mut s, &[exe.display().to_string()], |s, pid| {
            let entry_spec = CaptureSpec {
                filter_pid: Some(pid),
                ..copy.clone()
            };
            let ret_spec = CaptureSpec {
                filter_pid: Some(pid),
                ..CaptureSpec::new()
            };
            if return_first {
                s.enable(&ret, 8, &ret_spec).unwrap();
            }
            s.enable(&entry, 7, &entry_spec).unwrap();
            if !return_first {
                s.enable(&ret, 8, &ret_spec).unwrap();
            }
        });
        assert_eq!(st, ExitStatus::Exited(0));
        let ev = events
            .iter()
            .filter(|e| e.pid == pid && e.tag == 7)
            .find(|e| e.copies[0].data.as_deref() == Ok(b"/etc/hostname".as_slice()))
            .unwrap_or_else(|| panic!("no openat of /etc/hostname among {events:#?}"));
        assert_eq!(ev.copies[0].source, CopySource::AtReturn, "{ev:#?}");
        let returns = events.iter().filter(|e| e.pid == pid && e.tag == 8).count();
        let entries = events.iter().filter(|e| e.pid == pid && e.tag == 7).count();
        assert_eq!(returns, entries, "{events:#?}");
        assert_eq!(s.held_count(), 0);
    }
}

/// An opener that checks a path with faccessat(2) before opening another with openat(2), each
/// in a mapping of its own of a file the process wrote and has not read since (a page the
/// kernel has and the process's page tables have not: the probe cannot read it; two mappings,
/// so the fault of one maps nothing of the other, as a large folio's might in one mapping).
const CHECKER: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
static const char *mapped(const char *s) {
    char name[] = "/tmp/dtrace-checker-XXXXXX";
    int fd = mkstemp(name);
    if (fd < 0)
        exit(3);
    unlink(name);
    if (write(fd, s, strlen(s) + 1) < 0)
        exit(3);
    const char *p = mmap(0, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
        exit(3);
    return p;
}
int main(void) {
    const char *checked = mapped("/etc/passwd"), *path = mapped("/etc/hostname");
    if (syscall(SYS_faccessat, AT_FDCWD, checked, R_OK) != 0)
        return 2;
    int fd = openat(AT_FDCWD, path, O_RDONLY);
    return fd < 0;
}
"#;

/// The maps of pending retries of the session named `prefix` (those bpftool lists as
/// `<prefix>_pending`; other tests' sessions run beside this one in the process).
fn pending_maps(prefix: &str) -> usize {
    let name = format!("{prefix}_pending");
    bpftool_show("map")
        .expect("bpftool")
        .iter()
        .filter(|o| bpftool_field(o, "name").is_some_and(|n| n == name))
        .count()
}

/// Retries of several syscalls' entries share one map of pending copies (keyed by thread and
/// probe), not one each: `syscall:::entry { self->p = copyinstr(arg0); }` once created ~370
/// maps of 3 MB. Each probe's retry still serves its own entry only.
#[test]
fn the_entries_retries_share_one_map_and_each_serves_its_own() {
    let t = "the_entries_retries_share_one_map_and_each_serves_its_own";
    if !kernel_ok(t) || !gcc_ok("checker") {
        return;
    }
    let exe = compile("checker", CHECKER);
    let cat = catalog();
    let (access, open) = (
        probe(&cat, "syscall::faccessat:entry"),
        probe(&cat, "syscall::openat:entry"),
    );
    let mut s = session("m");
    let prefix = format!("dt{}m", std::process::id() % 10000);
    let before = pending_maps(&prefix);
    let (mut one, mut two) = (0, 0);
    let (pid, st, events) = run_traced(&mut s, &[exe.display().to_string()], |s, pid| {
        let spec = CaptureSpec {
            filter_pid: Some(pid),
            ..path_copy()
        };
        s.enable(&access, 5, &spec).unwrap();
        one = pending_maps(&prefix);
        s.enable(&open, 6, &spec).unwrap();
        two = pending_maps(&prefix);
    });
    assert_eq!(st, ExitStatus::Exited(0));
    assert!(one > before, "no map of pending retries: {before} -> {one}");
    assert_eq!(one, two, "a second probe's retries took another map");
    for (tag, path) in [(5, "/etc/passwd"), (6, "/etc/hostname")] {
        let ev = events
            .iter()
            .filter(|e| e.pid == pid && e.tag == tag)
            .find(|e| e.copies[0].data.as_deref() == Ok(path.as_bytes()))
            .unwrap_or_else(|| panic!("no {path} of probe {tag} among {events:#?}"));
        assert_eq!(ev.copies[0].source, CopySource::AtReturn, "{ev:#?}");
    }
    assert_eq!(s.held_count(), 0);
}

#[test]
fn syscall_return_carries_value_and_errno() {
    if !kernel_ok("syscall_return_carries_value_and_errno") {
        return;
    }
    let cat = catalog();
    let p = probe(&cat, "syscall::openat:return");
    let mut s = session("r");
    let argv: Vec<String> = ["cat", "/nonexistent/dtrace-test-file"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (pid, _st, events) = run_traced(&mut s, &argv, |s, pid| {
        s.enable(
            &p,
            3,
            &CaptureSpec {
                filter_pid: Some(pid),
                ..CaptureSpec::new()
            },
        )
        .unwrap();
    });
    let failed: Vec<_> = events
        .iter()
        .filter(|e| e.pid == pid && e.errno == libc::ENOENT)
        .collect();
    assert!(!failed.is_empty(), "no ENOENT openat return in {events:#?}");
    assert_eq!(failed[0].args[0] as i64, -(libc::ENOENT as i64));
    assert!(events
        .iter()
        .any(|e| e.pid == pid && e.errno == 0 && (e.args[0] as i64) >= 0));
}

#[test]
fn full_ring_buffer_counts_every_lost_record() {
    if !kernel_ok("full_ring_buffer_counts_every_lost_record") || !gcc_ok("full_ring") {
        return;
    }
    let exe = compile("writer2", WRITER);
    let cat = catalog();
    let p = probe(&cat, "syscall::write:entry");
    let mut s = dtrace_linux::Session::new(dtrace_linux::SessionOptions {
        ring_bytes: 4096,
        name_prefix: format!("dt{}d", std::process::id() % 10000),
        ..Default::default()
    })
    .unwrap();
    const N: u64 = 200;
    let mut child =
        dtrace_linux::process::spawn_held(&[exe.display().to_string(), N.to_string()]).unwrap();
    // Records of ~1.2 KiB into a 4 KiB ring that nobody reads while the writes happen.
    let spec = CaptureSpec {
        filter_pid: Some(child.pid()),
        ustack: Some(127),
        ..CaptureSpec::new()
    };
    s.enable(&p, 1, &spec).unwrap();
    child.release().unwrap();
    assert_eq!(child.wait().unwrap(), ExitStatus::Exited(0));
    let mut got = 0u64;
    s.drain(&mut |_| got += 1);
    let drops = s.drops().unwrap();
    assert!(drops > 0, "no drops counted");
    assert_eq!(
        got + drops,
        N,
        "every write is either delivered or counted as dropped"
    );
}

/// The links of the programs of the session named `prefix`: each link's type and, for a raw
/// tracepoint's, the tracepoint's name.
fn links_of(prefix: &str) -> Vec<(String, String)> {
    let ours: Vec<String> = bpftool_show("prog")
        .expect("bpftool")
        .iter()
        .filter(|o| bpftool_field(o, "name").is_some_and(|n| n.starts_with(prefix)))
        .filter_map(|o| bpftool_field(o, "id"))
        .collect();
    bpftool_show("link")
        .expect("bpftool")
        .iter()
        .filter(|o| bpftool_field(o, "prog_id").is_some_and(|id| ours.contains(&id)))
        .map(|o| {
            let text = |f| bpftool_field(o, f).unwrap_or_default();
            (text("type"), text("tp_name"))
        })
        .collect()
}

/// Where the kernel has BPF trampolines, the entries of a session's first few syscalls go on
/// their own functions' trampolines (fentry of `__x64_sys_<name>`), so the syscalls nobody traces
/// run no program; the ones after those share the `sys_enter` dispatcher.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_few_syscalls_entries_go_on_their_own_functions() {
    let test = "a_few_syscalls_entries_go_on_their_own_functions";
    if !kernel_ok(test)
        || !dtrace_testkit::kernel_has(dtrace_testkit::KernelFeature::Fentry, test)
        || !gcc_ok(test)
    {
        return;
    }
    let exe = compile("writer", WRITER);
    let cat = catalog();
    // (Syscalls with arguments: Debian's 6.1 has no BTF or ftrace entry for argument-less
    // ones such as `__x64_sys_getppid`, whose entries stay in the dispatcher.)
    let first = [
        "write",
        "read",
        "openat",
        "close",
        "lseek",
        "dup",
        "umask",
        "faccessat",
    ];
    let mut s = session("fe");
    let prefix = format!("dt{}fe", std::process::id() % 10000);
    const N: usize = 41;
    let argv = vec![exe.display().to_string(), N.to_string()];
    let (pid, st, events) = run_traced(&mut s, &argv, |s, pid| {
        for (i, name) in first.iter().enumerate() {
            let p = probe(&cat, &format!("syscall::{name}:entry"));
            let spec = CaptureSpec {
                filter_pid: Some(pid),
                ..CaptureSpec::new()
            };
            s.enable(&p, i as u32 + 1, &spec).unwrap();
        }
        let links = links_of(&prefix);
        assert_eq!(links.len(), first.len(), "{links:?}");
        assert!(links.iter().all(|(ty, _)| ty == "tracing"), "{links:?}");
    });
    assert_eq!(st, ExitStatus::Exited(0));
    let writes: Vec<_> = events.iter().filter(|e| e.tag == 1).collect();
    assert_eq!(writes.len(), N);
    assert!(writes.iter().all(|e| e.pid == pid && e.args[2] == 3));
    // A ninth syscall's entry goes in the dispatcher's slot.
    s.enable(
        &probe(&cat, "syscall::getpgrp:entry"),
        9,
        &CaptureSpec::new(),
    )
    .unwrap();
    let links = links_of(&prefix);
    assert!(links.iter().any(|(_, tp)| tp == "sys_enter"), "{links:?}");
}

/// Where the kernel has BPF trampolines, a syscall's exit side goes on the exit of its
/// function's (fexit of `__x64_sys_<name>`, whose second argument is the syscall's value): its
/// return probes and its entry's retried copies, the retry first whichever is enabled first;
/// the `sys_exit` dispatcher, which runs for every syscall's return, is not there.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_syscalls_exit_side_goes_on_its_functions_exit() {
    let test = "a_syscalls_exit_side_goes_on_its_functions_exit";
    if !kernel_ok(test)
        || !dtrace_testkit::kernel_has(dtrace_testkit::KernelFeature::Fentry, test)
        || !gcc_ok(test)
    {
        return;
    }
    let cat = catalog();
    let writer = compile("writer", WRITER);
    let mut s = session("fx");
    let prefix = format!("dt{}fx", std::process::id() % 10000);
    const N: usize = 23;
    let argv = vec![writer.display().to_string(), N.to_string()];
    let (pid, st, events) = run_traced(&mut s, &argv, |s, pid| {
        let spec = CaptureSpec {
            filter_pid: Some(pid),
            ..CaptureSpec::new()
        };
        s.enable(&probe(&cat, "syscall::write:return"), 1, &spec)
            .unwrap();
        s.enable(&probe(&cat, "syscall::write:entry"), 2, &spec)
            .unwrap();
        let links = links_of(&prefix);
        assert_eq!(links.len(), 2, "{links:?}");
        assert!(links.iter().all(|(ty, _)| ty == "tracing"), "{links:?}");
    });
    assert_eq!(st, ExitStatus::Exited(0));
    let returns: Vec<_> = events.iter().filter(|e| e.tag == 1).collect();
    assert_eq!(returns.len(), N, "{events:#?}");
    assert!(returns
        .iter()
        .all(|e| e.pid == pid && e.args[0] == 3 && e.args[1] == 3 && e.errno == 0));
    assert_eq!(events.iter().filter(|e| e.tag == 2).count(), N);

    // openat's return first, on its function's exit; then its entry, whose copy of the path
    // (not resident at entry) is retried at the return: the retry goes on the function's exit
    // too, and the return's program is attached again after it.
    let opener = compile("opener", OPENER);
    let (pid, st, events) = run_traced(&mut s, &[opener.display().to_string()], |s, pid| {
        let ret = CaptureSpec {
            filter_pid: Some(pid),
            ..CaptureSpec::new()
        };
        s.enable(&probe(&cat, "syscall::openat:return"), 3, &ret)
            .unwrap();
        assert!(
            !links_of(&prefix).iter().any(|(_, tp)| tp == "sys_exit"),
            "{:?}",
            links_of(&prefix)
        );
        let entry = CaptureSpec {
            filter_pid: Some(pid),
            ..path_copy()
        };
        s.enable(&probe(&cat, "syscall::openat:entry"), 4, &entry)
            .unwrap();
        // write's entry and return, openat's entry, retry and return. (The return's first link
        // goes with its last descriptor, which a child another test forked and holds before
        // its exec may share for a while.)
        let tracing =
            |links: &[(String, String)]| links.iter().filter(|(ty, _)| ty == "tracing").count();
        let mut links = links_of(&prefix);
        for _ in 0..200 {
            if tracing(&links) == 5 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            links = links_of(&prefix);
        }
        assert_eq!(tracing(&links), 5, "{links:?}");
        assert_eq!(links.len(), 5, "no dispatcher: {links:?}");
    });
    assert_eq!(st, ExitStatus::Exited(0));
    let ev = events
        .iter()
        .filter(|e| e.pid == pid && e.tag == 4)
        .find(|e| e.copies[0].data.as_deref() == Ok(b"/etc/hostname".as_slice()))
        .unwrap_or_else(|| panic!("no openat of /etc/hostname among {events:#?}"));
    assert_eq!(ev.copies[0].source, CopySource::AtReturn, "{ev:#?}");
    let returns = events.iter().filter(|e| e.pid == pid && e.tag == 3).count();
    let entries = events.iter().filter(|e| e.pid == pid && e.tag == 4).count();
    assert_eq!(returns, entries, "{events:#?}");
    assert_eq!(s.held_count(), 0);
}
