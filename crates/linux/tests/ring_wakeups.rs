//! The capture ring wakes its reader only once it is filling up (root, BPF, tracefs): records
//! below 1/`wakeup_divisor` of the ring raise no wake-up (the reader sleeps through them and
//! drains them when it wakes on its own clock), and the wake-up comes before the ring can
//! overflow, so every record is there when the reader drains.

mod common;
use common::{catalog, kernel_ok, probe};
use dtrace_linux::capture::CaptureSpec;
use dtrace_linux::{Session, SessionOptions};

#[test]
fn the_ring_wakes_its_reader_only_once_it_fills_up() {
    if !kernel_ok("the_ring_wakes_its_reader_only_once_it_fills_up") {
        return;
    }
    let cat = catalog();
    let p = probe(&cat, "syscall::getppid:entry");
    const RING: usize = 16 << 20;
    let mut s = Session::new(SessionOptions {
        name_prefix: format!("dt{}wak", std::process::id() % 10000),
        ring_bytes: RING,
        wakeup_divisor: 8,
        ..Default::default()
    })
    .unwrap();
    let me = std::process::id();
    s.enable(
        &p,
        1,
        &CaptureSpec {
            filter_pid: Some(me),
            ..CaptureSpec::new()
        },
    )
    .unwrap();
    let calls = |n: usize| {
        for _ in 0..n {
            // SAFETY: getppid has no preconditions.
            unsafe { libc::getppid() };
        }
    };
    // A few records (far below an eighth of the ring) raise no wake-up: the reader still sleeps.
    const FEW: usize = 100;
    calls(FEW);
    assert!(!s.wait_woken(0).unwrap(), "{FEW} records woke the reader");
    assert!(s.sleeping());
    // More, a batch at a time, until the ring wakes its reader: it does before the ring is full
    // (a record is at least 8 bytes, so RING / 8 calls would fill it).
    let mut made = FEW;
    const BATCH: usize = 100;
    let mut woken = false;
    while made < RING / 8 {
        calls(BATCH);
        made += BATCH;
        if s.wait_woken(0).unwrap() {
            woken = true;
            break;
        }
    }
    // The wake-up is raised from an interrupt work item: it may land just after the last call.
    woken = woken || s.wait_woken(1000).unwrap();
    assert!(woken, "{made} records and no wake-up");
    // A record past the mark wakes a reader that said it sleeps, and says it is awake.
    let one_wakes = |s: &Session, how: &str| {
        assert!(s.sleeping());
        calls(1);
        assert!(!s.sleeping(), "a record past the mark did not wake {how}");
    };
    // The wait said the reader sleeps again: the next record wakes it; the records after it,
    // while the reader reads, wake no one and raise no interrupt work (they raised one each
    // before the sleep word).
    one_wakes(&s, "the sleeping reader");
    made += 1;
    const AWAKE: usize = 20_000;
    let before = irq_work_interrupts();
    calls(AWAKE);
    let after = irq_work_interrupts();
    made += AWAKE;
    match (before, after) {
        (Some(b), Some(a)) => assert!(
            a - b < AWAKE as u64 / 4,
            "{AWAKE} records past the mark with the reader awake raised {} interrupt works",
            a - b
        ),
        _ => println!("SKIP the interrupt count: /proc/interrupts has no IWI line here"),
    }
    assert!(!s.sleeping());
    // Once it sleeps again (on its descriptor, among others), the next record wakes it.
    let _ = s.ring_fd_to_sleep_on();
    one_wakes(&s, "a reader sleeping on its descriptor");
    made += 1;
    assert_eq!(s.drops().unwrap(), 0);
    let mut events = Vec::new();
    s.drain(&mut |e| events.push(e));
    assert_eq!(events.len(), made);
    assert!(events.iter().all(|e| e.pid == me && e.tag == 1));
}

/// The interrupt work items raised on every CPU so far (the `IWI` line of `/proc/interrupts`: a
/// ring's wake-up is one), if the kernel counts them.
fn irq_work_interrupts() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/interrupts").ok()?;
    let line = text.lines().find(|l| l.trim_start().starts_with("IWI:"))?;
    Some(
        line.split_whitespace()
            .skip(1)
            .map_while(|w| w.parse::<u64>().ok())
            .sum(),
    )
}
