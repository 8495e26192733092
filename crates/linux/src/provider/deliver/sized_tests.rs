//! Delivery of copies sized at the probe: reads within what the probe took come from the capture;
//! a longer read comes from the process's memory as a whole, and faults when there is none.

use super::*;
use crate::capture::{CapturedMemory as Copy, CopySource, MemKind};
use dtrace_dif::vm::Memory;

fn event_with(copy: Copy) -> CapturedEvent {
    CapturedEvent {
        tag: 1,
        pid: std::process::id(),
        copies: vec![copy],
        ..Default::default()
    }
}

#[test]
fn longer_reads_of_a_sized_copy_come_whole_from_the_process() {
    // The process now holds other bytes than the probe saw.
    let now = *b"NOW-NOW-NOW-NOW-";
    let addr = now.as_ptr() as u64;
    let ev = event_with(Copy {
        addr,
        kind: MemKind::UserBytes,
        data: Ok(b"then".to_vec()),
        source: CopySource::AtProbe,
        requested: Some(16),
    });
    assert_eq!(sized_prefixes(&ev), vec![(addr, 4)]);
    let (_, captured) = firing_of(&ev, 0);
    let mut m = EventMemory::new(captured.clone(), ev.pid).with_prefixes(sized_prefixes(&ev));
    let mut b = [0u8; 4];
    m.read_user(addr, &mut b).unwrap();
    assert_eq!(&b, b"then");
    let mut b = [0u8; 2];
    m.read_user(addr + 2, &mut b).unwrap();
    assert_eq!(&b, b"en");
    // Past the capture: all 16 bytes from the process, none from the capture.
    let mut all = [0u8; 16];
    m.read_user(addr, &mut all).unwrap();
    assert_eq!(&all, &now);
    // The process is gone: a fault, never the captured prefix alone.
    let mut gone = EventMemory::new(captured.clone(), 0).with_prefixes(sized_prefixes(&ev));
    assert_eq!(gone.read_user(addr, &mut all), Err(FaultKind::BadAddr));
    // Without the sized mark (a constant-size copy), a longer read faults as before.
    let mut plain = EventMemory::new(captured, ev.pid);
    assert_eq!(plain.read_user(addr, &mut all), Err(FaultKind::BadAddr));
}

#[test]
fn only_captured_sized_byte_copies_are_prefixes() {
    let mut c = Copy {
        addr: 0x1000,
        kind: MemKind::UserBytes,
        data: Err(-14),
        source: CopySource::AtProbe,
        requested: Some(8),
    };
    assert!(sized_prefixes(&event_with(c.clone())).is_empty());
    c.data = Ok(vec![1; 8]);
    c.requested = None;
    assert!(sized_prefixes(&event_with(c.clone())).is_empty());
    c.kind = MemKind::UserString;
    c.requested = Some(8);
    assert!(sized_prefixes(&event_with(c)).is_empty());
}

#[test]
fn a_sized_copy_holding_every_byte_asked_for_never_reads_the_process() {
    // The probe took all 16 bytes (a record the probe sized): what the process holds now is
    // never read, even for a read running past them.
    let now = *b"NOW-NOW-NOW-NOW-NOW-";
    let addr = now.as_ptr() as u64;
    let then = b"then-then-then-t".to_vec();
    let ev = event_with(Copy {
        addr,
        kind: MemKind::UserBytes,
        data: Ok(then.clone()),
        source: CopySource::AtProbe,
        requested: Some(16),
    });
    assert!(sized_prefixes(&ev).is_empty());
    let (_, captured) = firing_of(&ev, 0);
    let mut m = EventMemory::new(captured, ev.pid).with_prefixes(sized_prefixes(&ev));
    let mut all = [0u8; 16];
    m.read_user(addr, &mut all).unwrap();
    assert_eq!(all.to_vec(), then);
    let mut past = [0u8; 20];
    assert_eq!(m.read_user(addr, &mut past), Err(FaultKind::BadAddr));
}
