//! A session whose consumer polls on its own clock (`SessionOptions::wakeups` off, as `dtrace(1)`
//! runs it): records raise no wake-up, yet every record is there when the consumer drains it
//! (root, BPF, tracefs).

mod common;
use common::{catalog, kernel_ok, probe};
use dtrace_linux::capture::CaptureSpec;
use dtrace_linux::{Session, SessionOptions};

#[test]
fn records_without_wakeups_are_all_drained() {
    if !kernel_ok("records_without_wakeups_are_all_drained") {
        return;
    }
    let cat = catalog();
    let p = probe(&cat, "syscall::getppid:entry");
    let mut s = Session::new(SessionOptions {
        name_prefix: format!("dt{}pol", std::process::id() % 10000),
        wakeups: false,
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
    const N: usize = 1000;
    for _ in 0..N {
        // SAFETY: getppid has no preconditions.
        unsafe { libc::getppid() };
    }
    let mut events = Vec::new();
    let t = std::time::Instant::now();
    let woke = s.poll(0, &mut |e| events.push(e)).unwrap();
    assert_eq!(woke, N, "a poll without waiting drains what is there");
    s.drain(&mut |e| events.push(e));
    assert_eq!(events.len(), N);
    assert!(events.iter().all(|e| e.pid == me && e.tag == 1));
    assert!(t.elapsed() < std::time::Duration::from_secs(5));
}
