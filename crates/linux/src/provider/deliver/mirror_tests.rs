//! Delivery of copies made at an address mirrored from a thread-local: the capture serves a read
//! only at the address it recorded; a read at another address (the D variable was not stored as
//! the mirror was) goes to the process, and faults when there is none; a copy whose mirror had no
//! entry serves nothing.

use super::*;
use crate::capture::{CapturedMemory as Copy, CopySource, MemKind};
use dtrace_dif::vm::{FaultKind, Memory};

fn event_with(pid: u32, copies: Vec<Copy>) -> CapturedEvent {
    CapturedEvent {
        tag: 1,
        pid,
        args: [15, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        copies,
        ..Default::default()
    }
}

fn memory(ev: &CapturedEvent) -> EventMemory {
    let (_, captured) = firing_of(ev, 0);
    EventMemory::new(captured, ev.pid).with_prefixes(sized_prefixes(ev))
}

#[test]
fn a_mirrored_copy_serves_only_its_own_address() {
    // The mirror held the second buffer; the D variable still holds the first.
    let first = *b"first bytes\0\0\0\0";
    let second = *b"the second read";
    let (a1, a2) = (first.as_ptr() as u64, second.as_ptr() as u64);
    let copy = Copy {
        addr: a2,
        kind: MemKind::UserBytes,
        data: Ok(b"the second read".to_vec()),
        source: CopySource::AtProbe,
        requested: Some(15),
    };
    // The process lives: the first buffer's own bytes.
    let ev = event_with(std::process::id(), vec![copy.clone()]);
    let mut m = memory(&ev);
    let mut b = [0u8; 15];
    m.read_user(a1, &mut b).unwrap();
    assert_eq!(&b, &first[..15]);
    m.read_user(a2, &mut b).unwrap();
    assert_eq!(&b, b"the second read");
    // Gone: a fault at the first buffer, never the second buffer's bytes.
    let ev = event_with(0, vec![copy]);
    let mut m = memory(&ev);
    assert_eq!(m.read_user(a1, &mut b), Err(FaultKind::BadAddr));
    m.read_user(a2, &mut b).unwrap();
    assert_eq!(&b, b"the second read");
}

#[test]
fn a_missing_mirror_entry_serves_nothing() {
    // No entry for the thread: the probe recorded no address and no bytes.
    let ev = event_with(
        0,
        vec![Copy {
            addr: 0,
            kind: MemKind::UserBytes,
            data: Err(-i64::from(libc::ENOENT)),
            source: CopySource::AtProbe,
            requested: Some(15),
        }],
    );
    let (_, captured) = firing_of(&ev, 0);
    assert!(captured.regions().is_empty());
    assert!(sized_prefixes(&ev).is_empty());
    let mut m = memory(&ev);
    let mut b = [0u8; 4];
    assert_eq!(m.read_user(0, &mut b), Err(FaultKind::BadAddr));
    assert_eq!(m.read_user(0x1000, &mut b), Err(FaultKind::BadAddr));
}
