//! Kernel tests of the thread-variable mirror: `read:entry` saves its buffer address (arg1) under a
//! thread-local's id, `read:return` copies `arg0` bytes from the address saved for its thread and
//! records that address, then removes the entry; a probe looking up a variable nobody saved (or
//! one already removed) makes no copy.

mod common;
use common::*;
use dtrace_linux::capture::spec::SIZED_COPY_CAP;
use dtrace_linux::capture::{AddrBase, AddrExpr, CaptureSpec, CopyRequest, MemKind, MirrorOp};
use dtrace_linux::process::ExitStatus;

const READER: &str = r#"
#include <unistd.h>
#include <string.h>
int main(void) {
    int p[2];
    char buf[64], other[64];
    if (pipe(p)) return 1;
    if (write(p[1], "first bytes", 11) != 11) return 2;
    if (read(p[0], buf, sizeof buf) != 11) return 3;
    if (write(p[1], "the second read", 15) != 15) return 4;
    if (read(p[0], other, sizeof other) != 15) return 5;
    /* Overwritten before exit: only the capture at the return knows what was read. */
    memset(buf, 'x', sizeof buf);
    memset(other, 'y', sizeof other);
    close(p[0]);
    return buf[0] == 'x' && other[0] == 'y' ? 0 : 6;
}
"#;

const BUF: u32 = 1300;
const NOBODY: u32 = 1301;

fn mirrored(var: u32, kind: MemKind, size: u32, size_arg: Option<usize>) -> CopyRequest {
    CopyRequest {
        addr: AddrExpr::kernel(AddrBase::ThreadVar(var), 0, Vec::new()),
        kind,
        size,
        size_arg,
    }
}

#[test]
fn read_buffers_saved_at_entry_are_copied_at_return() {
    if !kernel_ok("read_buffers_saved_at_entry_are_copied_at_return") || !gcc_ok("mirror_read") {
        return;
    }
    let exe = compile("mirror_reader", READER);
    let cat = catalog();
    let entry = probe(&cat, "syscall::read:entry");
    let ret = probe(&cat, "syscall::read:return");
    let close = probe(&cat, "syscall::close:return");
    let mut s = session("tm");
    let (pid, st, events) = run_traced(&mut s, &[exe.display().to_string()], |s, pid| {
        let save = CaptureSpec {
            filter_pid: Some(pid),
            mirror: vec![MirrorOp {
                var: BUF,
                value: Some(AddrExpr::arg(1)),
            }],
            ..CaptureSpec::new()
        };
        s.enable(&entry, 1, &save).unwrap();
        let copy = CaptureSpec {
            filter_pid: Some(pid),
            copies: vec![
                mirrored(BUF, MemKind::UserBytes, SIZED_COPY_CAP, Some(0)),
                mirrored(NOBODY, MemKind::UserString, 64, None),
            ],
            mirror: vec![MirrorOp {
                var: BUF,
                value: None,
            }],
            ..CaptureSpec::new()
        };
        s.enable(&ret, 2, &copy).unwrap();
        let after = CaptureSpec {
            filter_pid: Some(pid),
            copies: vec![mirrored(BUF, MemKind::UserBytes, 8, None)],
            ..CaptureSpec::new()
        };
        s.enable(&close, 3, &after).unwrap();
    });
    assert_eq!(st, ExitStatus::Exited(0));
    assert!(events.iter().all(|e| e.pid == pid));
    // Every return copied from the buffer its entry saved, as many bytes as were read.
    let mut last_buf = std::collections::HashMap::new();
    let mut datas = Vec::new();
    let mut ordered: Vec<_> = events.iter().filter(|e| e.tag != 3).collect();
    ordered.sort_by_key(|e| e.ktime_ns);
    for e in ordered {
        if e.tag == 1 {
            last_buf.insert(e.tid, e.args[1]);
            continue;
        }
        let c = &e.copies[0];
        let Some(saved) = last_buf.remove(&e.tid) else {
            // The return of the read the held child was waiting in before the probes were on
            // (its entry was not traced): nothing was saved for it.
            assert!(c.data.is_err() && c.addr == 0, "{e:#?}");
            continue;
        };
        assert_eq!(c.addr, saved, "{e:#?}");
        let n = e.args[0] as i64;
        if n >= 0 {
            let data = c.data.clone().unwrap_or_else(|err| panic!("{err}: {e:#?}"));
            assert_eq!(data.len() as i64, n.min(i64::from(SIZED_COPY_CAP)));
            datas.push(data);
        }
        // Nothing saved under the other variable: no copy, no address.
        assert_eq!(e.copies[1].data, Err(-i64::from(libc::ENOENT)), "{e:#?}");
        assert_eq!(e.copies[1].addr, 0);
    }
    assert!(datas.contains(&b"first bytes".to_vec()), "{datas:?}");
    assert!(datas.contains(&b"the second read".to_vec()), "{datas:?}");
    // The returns removed the entries: close(2) finds none.
    let closes: Vec<_> = events.iter().filter(|e| e.tag == 3).collect();
    assert!(!closes.is_empty());
    for e in closes {
        assert!(e.copies[0].data.is_err(), "{e:#?}");
        assert_eq!(e.copies[0].addr, 0);
    }
    assert_eq!(s.bad_records(), 0);
}
