//! Block mode in multithreaded processes. Threads share the text, so a breakpoint is never lifted
//! while another thread could run through the gap: once a process has a second thread its blocks end
//! only at terminators the tracer emulates (jumps, calls, returns; see [`crate::block`]) or at a
//! `syscall` (run to with PTRACE_SYSCALL, no breakpoint at all), and breakpoints placed earlier that
//! might be lifted are removed while the process's only other thread is stopped at the thread's
//! creation. When a vfork child is about to share the memory, the other threads are stopped (their
//! partial blocks counted) before the breakpoints go, and the process is single-stepped until the child
//! lets the memory go.

use crate::block::{emulated_terminator, multithreaded, settle, strip_all};
use crate::ptrace::{self, Status};
use crate::tracer::Tracer;

/// At the creation of a thread (thread `tid` stopped at the event): removes the breakpoints whose
/// terminators are not emulated, and forgets cached blocks so they are rebuilt for threads.
pub(crate) fn strip_liftable(t: &mut Tracer, tid: i32) {
    let Some(tgid) = t.threads.get(&tid).map(|th| th.tgid) else {
        return;
    };
    let Some(p) = t.procs.get(&tgid) else {
        return;
    };
    let shadow = p.shadow_stack;
    let sites = p.bps.addresses();
    let mut liftable = Vec::new();
    for addr in sites {
        let (_, d, _) = t.decode_at(tid, tgid, addr, 64);
        if !emulated_terminator(&d, shadow) {
            liftable.push(addr);
        }
    }
    if let Some(p) = t.procs.get_mut(&tgid) {
        for addr in liftable {
            p.bps.remove(tid, addr);
        }
        p.blocks.clear();
    }
}

/// Stops every other running thread of thread `tid`'s process and counts what their free runs
/// executed. Returns the threads stopped this way (to be resumed by the caller); stops they had
/// reported first are kept for the wait loop.
pub(crate) fn stop_others(t: &mut Tracer, tid: i32) -> Vec<i32> {
    let Some(tgid) = t.threads.get(&tid).map(|th| th.tgid) else {
        return Vec::new();
    };
    let others: Vec<i32> = t
        .threads
        .iter()
        .filter(|(o, th)| **o != tid && th.tgid == tgid && !th.awaiting_first_stop)
        .map(|(o, _)| *o)
        .filter(|o| !t.deferred.iter().any(|(d, _)| d == o))
        .collect();
    for &o in &others {
        let _ = ptrace::interrupt(o);
    }
    let mut parked = Vec::new();
    for o in others {
        let st = loop {
            match ptrace::wait(o) {
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(_) => break None,
                Ok((_, st)) => break Some(st),
            }
        };
        match st {
            Some(Status::Stopped {
                sig: libc::SIGTRAP,
                event: libc::PTRACE_EVENT_STOP,
            }) if settle(t, o).is_ok() => parked.push(o),
            Some(Status::Stopped {
                sig: libc::SIGTRAP,
                event: libc::PTRACE_EVENT_STOP,
            }) => {}
            Some(st) => t.deferred.push_back((o, st)),
            None => {}
        }
    }
    parked
}

/// A vfork child is about to share the memory of thread `parent`'s process: every breakpoint goes (the
/// child would hit them) and the process is single-stepped until the child execs or exits.
pub(crate) fn vfork_started(t: &mut Tracer, parent: i32) {
    let Some(tgid) = t.threads.get(&parent).map(|th| th.tgid) else {
        return;
    };
    let parked = if multithreaded(t, tgid) {
        stop_others(t, parent)
    } else {
        Vec::new()
    };
    strip_all(t, parent);
    if let Some(p) = t.procs.get_mut(&tgid) {
        p.vforks += 1;
    }
    for o in parked {
        let _ = t.resume(o, 0);
    }
}
