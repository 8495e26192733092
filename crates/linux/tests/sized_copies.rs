//! Kernel tests of copies sized at the probe and of user pointer chains: `copyin(arg1, arg2)` of
//! write(2) takes exactly the bytes written, 6000 and 20000 of them included (records the probe
//! sizes; at most a page in records of one size, the path of kernels before 5.19), also from
//! pages the program never touched (re-read at the syscall's return, at any length), and execve's
//! argv strings are reached through the pointers the probe reads from the argument vector.

mod common;
use common::*;
use dtrace_linux::capture::spec::{MAX_SIZED_COPY, SIZED_COPY_CAP};
use dtrace_linux::capture::{
    AddrBase, AddrExpr, CaptureSpec, CapturedEvent, CopyRequest, CopySource, MemKind,
};
use dtrace_linux::process::ExitStatus;
use dtrace_linux::{Session, SessionOptions};

const WRITER: &str = r#"
#define _GNU_SOURCE
#include <sys/mman.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>
/* Alone in a 64 KiB-aligned window of .rodata: not resident until write(2) itself copies it. */
__attribute__((aligned(65536))) const char cold[65536] = "from a cold page";
__attribute__((aligned(65536))) const char after[65536] = "padding";
int main(void) {
    int p[2];
    if (pipe(p)) return 1;
    int fd = p[1];
    write(fd, "hello", 5);
    char *big = malloc(20000);
    for (int i = 0; i < 20000; i++) big[i] = 'a' + i % 26;
    write(fd, big, 6000);
    write(fd, cold, 16);
    write(fd, "", 0);
    /* The vector is on the (resident) stack; the bytes it points at are in a shared mapping never
       touched by this process (written through the file, not the mapping). */
    int m = memfd_create("cold", 0);
    if (m < 0 || pwrite(m, "cold via iov", 13, 0) != 13) return 2;
    char *cold2 = mmap(NULL, 4096, PROT_READ, MAP_SHARED, m, 0);
    if (cold2 == MAP_FAILED) return 3;
    struct iovec iov = { cold2, 12 };
    writev(fd, &iov, 1);
    write(fd, big, 20000);
    /* Five pages of a shared mapping never touched: re-read at the return. */
    int m2 = memfd_create("cold3", 0);
    if (m2 < 0 || pwrite(m2, big, 20000, 0) != 20000) return 4;
    char *cold3 = mmap(NULL, 20000, PROT_READ, MAP_SHARED, m2, 0);
    if (cold3 == MAP_FAILED) return 5;
    write(fd, cold3, 20000);
    return 0;
}
"#;

fn letters(n: usize) -> Vec<u8> {
    (0..n).map(|i| b'a' + (i % 26) as u8).collect()
}

/// The write(2) and writev(2) events of the writer, traced by a session made with `opts`, its
/// write buffers captured by their count as the needs analysis asks (at most `MAX_SIZED_COPY`).
fn traced_writes(opts: SessionOptions) -> Option<(Vec<CapturedEvent>, Vec<CapturedEvent>)> {
    let exe = compile("sized_writer", WRITER);
    let cat = catalog();
    let p = probe(&cat, "syscall::write:entry");
    let pv = probe(&cat, "syscall::writev:entry");
    let mut s = Session::new(opts).unwrap();
    // copyinstr(*(uint64_t *)copyin(arg1, 8)): iov[0].iov_base, one user hop from the argument.
    let via_iov = CopyRequest {
        addr: AddrExpr {
            user_derefs: vec![0],
            ..AddrExpr::arg(1)
        },
        kind: MemKind::UserString,
        size: 64,
        size_arg: None,
    };
    let mut copy = CopyRequest::new(AddrExpr::arg(1), MemKind::UserBytes, MAX_SIZED_COPY);
    copy.size_arg = Some(2);
    let (pid, st, events) = run_traced(&mut s, &[exe.display().to_string()], |s, pid| {
        let spec = CaptureSpec {
            filter_pid: Some(pid),
            copies: vec![copy],
            ..CaptureSpec::new()
        };
        s.enable(&p, 5, &spec).unwrap();
        let spec = CaptureSpec {
            filter_pid: Some(pid),
            copies: vec![via_iov],
            ..CaptureSpec::new()
        };
        s.enable(&pv, 6, &spec).unwrap();
    });
    assert_eq!(st, ExitStatus::Exited(0));
    assert!(events.iter().all(|e| e.pid == pid));
    assert_eq!(s.held_count(), 0);
    assert_eq!(s.bad_records(), 0);
    let (writes, v): (Vec<_>, Vec<_>) = events.into_iter().partition(|e| e.tag == 5);
    Some((writes, v))
}

#[test]
fn write_buffers_are_captured_by_their_count() {
    if !kernel_ok("write_buffers_are_captured_by_their_count") || !gcc_ok("sized_write") {
        return;
    }
    let Some((writes, v)) = traced_writes(SessionOptions {
        name_prefix: format!("dt{}sz", std::process::id() % 10000),
        ..Default::default()
    }) else {
        return;
    };
    assert_eq!(writes.len(), 6, "{writes:#?}");
    let data = |i: usize| writes[i].copies[0].data.clone();
    assert_eq!(data(0), Ok(b"hello".to_vec()));
    assert_eq!(writes[0].copies[0].requested, Some(5));
    if !dtrace_linux::features::have_ringbuf_dynptr() {
        println!(
            "SKIP (in part) write_buffers_are_captured_by_their_count: no ring-buffer dynptrs"
        );
        assert_eq!(data(1), Ok(letters(SIZED_COPY_CAP as usize)));
        return;
    }
    // Longer than a page: every byte, taken at the probe.
    assert_eq!(data(1), Ok(letters(6000)));
    assert_eq!(writes[1].copies[0].requested, Some(6000));
    assert_eq!(writes[1].copies[0].source, CopySource::AtProbe);
    // Not resident at entry: read again at the return, with the same length.
    assert_eq!(data(2), Ok(b"from a cold page".to_vec()));
    assert_eq!(
        writes[2].copies[0].source,
        CopySource::AtReturn,
        "{:#?}",
        writes[2]
    );
    assert_eq!(writes[2].copies[0].requested, Some(16));
    assert_eq!(data(3), Ok(Vec::new()));
    assert_eq!(data(4), Ok(letters(20000)));
    assert_eq!(writes[4].copies[0].source, CopySource::AtProbe);
    // Twenty thousand bytes of cold pages: all of them, read again at the return.
    assert_eq!(data(5), Ok(letters(20000)));
    assert_eq!(writes[5].copies[0].source, CopySource::AtReturn);
    assert_eq!(writes[5].copies[0].requested, Some(20000));
    // The chain's last read faulted at entry: the retry follows the hop again at the return.
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(
        v[0].copies[0].data,
        Ok(b"cold via iov".to_vec()),
        "{:#?}",
        v[0]
    );
    assert_eq!(v[0].copies[0].source, CopySource::AtReturn);
}

#[test]
fn records_of_one_size_hold_a_page_of_a_sized_copy() {
    if !kernel_ok("records_of_one_size_hold_a_page_of_a_sized_copy") || !gcc_ok("sized_write") {
        return;
    }
    let Some((writes, _)) = traced_writes(SessionOptions {
        name_prefix: format!("dt{}sc", std::process::id() % 10000),
        capped_sized_copies: true,
        ..Default::default()
    }) else {
        return;
    };
    assert_eq!(writes.len(), 6, "{writes:#?}");
    let data = |i: usize| writes[i].copies[0].data.clone();
    assert_eq!(data(0), Ok(b"hello".to_vec()));
    // Longer than the cap: the first SIZED_COPY_CAP bytes, and the length asked for (delivery
    // reads the rest from the process).
    assert_eq!(data(1), Ok(letters(SIZED_COPY_CAP as usize)));
    assert_eq!(writes[1].copies[0].requested, Some(6000));
    assert_eq!(data(2), Ok(b"from a cold page".to_vec()));
    assert_eq!(writes[2].copies[0].source, CopySource::AtReturn);
    assert_eq!(data(4), Ok(letters(SIZED_COPY_CAP as usize)));
    assert_eq!(writes[4].copies[0].requested, Some(20000));
}

#[test]
fn execve_argv_strings_through_user_pointers() {
    if !kernel_ok("execve_argv_strings_through_user_pointers") {
        return;
    }
    let cat = catalog();
    let p = probe(&cat, "syscall::execve:entry");
    let mut s = session("av");
    // argv[k] is the user pointer at arg1 + 8k; its string is one user hop away.
    let argv_str = |k: i32| CopyRequest {
        addr: AddrExpr {
            user_derefs: vec![0],
            ..AddrExpr::kernel(AddrBase::Arg(1), 8 * k, Vec::new())
        },
        kind: MemKind::UserString,
        size: 64,
        size_arg: None,
    };
    let argv: Vec<String> = ["/bin/true", "alpha", "beta gamma"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (pid, st, events) = run_traced(&mut s, &argv, |s, pid| {
        let spec = CaptureSpec {
            filter_pid: Some(pid),
            copies: vec![
                CopyRequest::new(AddrExpr::arg(1), MemKind::UserBytes, 32),
                argv_str(0),
                argv_str(1),
                argv_str(2),
                argv_str(3),
            ],
            ..CaptureSpec::new()
        };
        s.enable(&p, 9, &spec).unwrap();
    });
    assert_eq!(st, ExitStatus::Exited(0));
    let ev = events
        .iter()
        .find(|e| e.pid == pid)
        .unwrap_or_else(|| panic!("no execve of {pid} among {events:#?}"));
    let strs: Vec<_> = ev.copies[1..].iter().map(|c| c.data.clone()).collect();
    assert_eq!(strs[0], Ok(b"/bin/true".to_vec()), "{ev:#?}");
    assert_eq!(strs[1], Ok(b"alpha".to_vec()));
    assert_eq!(strs[2], Ok(b"beta gamma".to_vec()));
    // argv[3] is the NULL that ends the vector: nothing to read there.
    assert!(strs[3].is_err(), "{:?}", strs[3]);
    // Each string's address is the pointer the probe read from the vector it copied.
    let vec_bytes = ev.copies[0].data.clone().unwrap();
    for k in 0..3 {
        let ptr = u64::from_le_bytes(vec_bytes[8 * k..8 * k + 8].try_into().unwrap());
        assert_eq!(ev.copies[1 + k].addr, ptr);
    }
    assert_eq!(ev.copies[4].addr, 0);
}
