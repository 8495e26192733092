//! The batch path ([`fill_firing`] into a reused context, [`captured_memory_of`] taking the
//! copies' bytes) gives each firing exactly what [`firing_of`] gives it.

use super::*;
use crate::capture::{CapturedMemory as Copy, CopySource, MemKind};

fn event(comm: &[u8], kstack: Option<Vec<u64>>, ustack: Vec<u64>, execargs: bool) -> CapturedEvent {
    let mut c = [0u8; 16];
    c[..comm.len()].copy_from_slice(comm);
    CapturedEvent {
        tag: 3,
        ktime_ns: 9_000,
        pid: 40,
        tid: 41,
        ppid: 1,
        comm: c,
        task: 0xffff_8888_0000_2000,
        args: [9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
        vtime_ns: 77,
        copies: vec![
            Copy {
                addr: 0x7fff_1000,
                kind: MemKind::UserString,
                data: Ok(b"/tmp/x".to_vec()),
                source: CopySource::AtProbe,
                requested: None,
            },
            Copy {
                addr: 0xffff_9999_0000_0000,
                kind: MemKind::KernelBytes,
                data: Ok(vec![1, 2, 3, 4]),
                source: CopySource::AtProbe,
                requested: None,
            },
            Copy {
                addr: 0x2000,
                kind: MemKind::UserBytes,
                data: Err(-14),
                source: CopySource::AtProbe,
                requested: None,
            },
        ],
        kstack: kstack.map(Ok),
        ustack: Some(Ok(ustack)),
        execargs: execargs.then(|| Ok(b"sh\0-c\0true\0".to_vec())),
        ancestors: Some(vec![1, 40]),
        ..Default::default()
    }
}

#[test]
fn reused_context_matches_a_fresh_one_at_every_firing() {
    let events = [
        event(
            b"longer-name-xyz",
            Some(vec![1, 2, 3]),
            vec![10, 20, 30],
            true,
        ),
        // Shorter name, no kernel stack, no execargs: nothing of the previous firing may remain.
        event(b"sh", None, vec![], false),
        event(b"\xffbad", Some(vec![5]), vec![10], false),
    ];
    let mut ctx = FiringContext::default();
    for ev in events {
        let (want_ctx, want_mem) = firing_of(&ev, 100);
        let mut owned = ev.clone();
        fill_firing(&mut ctx, &mut owned, 100);
        assert_eq!(ctx, want_ctx);
        assert_eq!(captured_memory_of(&mut owned), want_mem);
    }
}
