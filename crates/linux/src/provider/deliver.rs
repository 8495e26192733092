//! Delivering captured events to the framework: each [`CapturedEvent`] becomes a firing of its
//! probe (the tag is the framework's probe id) with the probe context (arguments, identity,
//! `execname`, CPU, timestamp, errno, `curthread`, stacks) and the memory captured with it, so that
//! built-in variables and `copyinstr(arg1)` read what the probe saw.

use super::LinuxTracing;
use crate::capture::CapturedEvent;
use crate::error::Result;
use dtrace_framework::{CapturedMemory, FiringContext, Framework};

/// The framework's view of one captured event. `clock_offset` turns `bpf_ktime_get_ns()` into the
/// framework's clock.
pub fn firing_of(ev: &CapturedEvent, clock_offset: i64) -> (FiringContext, CapturedMemory) {
    let mut ctx = FiringContext {
        pid: u64::from(ev.pid),
        ppid: u64::from(ev.ppid),
        tid: u64::from(ev.tid),
        uid: u64::from(ev.uid),
        gid: u64::from(ev.gid),
        errno: ev.errno as i64 as u64,
        curthread: ev.task,
        execname: ev.execname(),
        vtimestamp: ev.vtime_ns,
        timestamp: Some((ev.ktime_ns as i64).saturating_add(clock_offset).max(0) as u64),
        ..FiringContext::default()
    };
    for (dst, src) in ctx.args.iter_mut().zip(ev.args.iter()) {
        *dst = *src;
    }
    if let Some(Ok(frames)) = &ev.kstack {
        ctx.kstack = frames.clone();
    }
    if let Some(Ok(frames)) = &ev.ustack {
        ctx.ustack = frames.clone();
    }
    let mut mem = CapturedMemory::new();
    for c in &ev.copies {
        if let Ok(bytes) = &c.data {
            let mut b = bytes.clone();
            if c.kind.is_string() {
                // Strings come without their NUL; copyinstr() stops at it.
                b.push(0);
            }
            mem.add(c.addr, b, c.kind.is_user());
        }
    }
    (ctx, mem)
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl LinuxTracing {
    /// Waits up to `timeout_ms` for captured events and fires each in `fw`. Returns how many were
    /// fired. Call it from the thread driving the framework, alongside `Framework::poll`.
    pub fn pump(&self, fw: &mut Framework, timeout_ms: i32) -> Result<usize> {
        let mut events = Vec::new();
        let offset = {
            let mut sh = self.lock();
            let offset = *sh
                .clock_offset
                .get_or_insert_with(|| fw.now() as i64 - monotonic_ns() as i64);
            if let Some(s) = sh.session.as_mut() {
                s.poll(timeout_ms, &mut |e| events.push(e))?;
            }
            offset
        };
        Ok(self.fire_all(fw, events, offset))
    }

    /// Delivers everything still pending (ring contents and entry events held for a re-read). Call
    /// once the traced work is over, before `Framework::stop`.
    pub fn finish(&self, fw: &mut Framework) -> usize {
        let mut events = Vec::new();
        let offset = {
            let mut sh = self.lock();
            let offset = *sh
                .clock_offset
                .get_or_insert_with(|| fw.now() as i64 - monotonic_ns() as i64);
            if let Some(s) = sh.session.as_mut() {
                s.drain(&mut |e| events.push(e));
                s.flush_held(&mut |e| events.push(e));
            }
            offset
        };
        self.fire_all(fw, events, offset)
    }

    fn fire_all(&self, fw: &mut Framework, events: Vec<CapturedEvent>, offset: i64) -> usize {
        if events.is_empty() {
            return 0;
        }
        let active = self.lock().active.clone();
        let mut n = 0;
        for ev in events.iter().filter(|e| active.contains(&e.tag)) {
            let (ctx, mut mem) = firing_of(ev, offset);
            fw.fire_with_memory(ev.tag, ev.cpu, &ctx, &mut mem);
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::{CapturedMemory as Copy, CopySource, MemKind};
    use dtrace_dif::vm::Memory;

    fn event() -> CapturedEvent {
        let mut comm = [0u8; 16];
        comm[..4].copy_from_slice(b"true");
        CapturedEvent {
            tag: 7,
            ktime_ns: 1_000,
            cpu: 1,
            pid: 10,
            tid: 11,
            ppid: 1,
            uid: 1000,
            gid: 100,
            comm,
            task: 0xffff_8888_0000_1000,
            args: [1, 0x7fff_0000, 3, 4, 5, 6, 7, 8],
            vtime_ns: 55,
            walltime_ns: 0,
            errno: 2,
            copies: vec![
                Copy {
                    addr: 0x7fff_0000,
                    kind: MemKind::UserString,
                    data: Ok(b"/etc/passwd".to_vec()),
                    source: CopySource::AtProbe,
                },
                Copy {
                    addr: 0x1000,
                    kind: MemKind::UserBytes,
                    data: Err(-14),
                    source: CopySource::AtProbe,
                },
            ],
            kstack: Some(Ok(vec![0xffff_ffff_8100_0000])),
            ustack: Some(Err(-14)),
            ustack_files: None,
            retry_armed: false,
        }
    }

    #[test]
    fn context_and_memory_of_an_event() {
        let (ctx, mut mem) = firing_of(&event(), 500);
        assert_eq!(ctx.pid, 10);
        assert_eq!(ctx.tid, 11);
        assert_eq!(ctx.ppid, 1);
        assert_eq!((ctx.uid, ctx.gid), (1000, 100));
        assert_eq!(ctx.execname, "true");
        assert_eq!(ctx.errno, 2);
        assert_eq!(ctx.curthread, 0xffff_8888_0000_1000);
        assert_eq!(ctx.timestamp, Some(1_500));
        assert_eq!(ctx.vtimestamp, 55);
        assert_eq!(&ctx.args[..8], &[1, 0x7fff_0000, 3, 4, 5, 6, 7, 8]);
        assert_eq!(ctx.args[8..], [0, 0]);
        assert_eq!(ctx.kstack, vec![0xffff_ffff_8100_0000]);
        assert!(ctx.ustack.is_empty());
        let mut b = [0u8; 12];
        mem.read_user(0x7fff_0000, &mut b).unwrap();
        assert_eq!(&b, b"/etc/passwd\0");
        // The failed copy is not memory: reading it faults.
        let mut one = [0u8; 1];
        assert!(mem.read_user(0x1000, &mut one).is_err());
        // User copies are not kernel memory.
        assert!(mem.read_kernel(0x7fff_0000, &mut one).is_err());
        assert_eq!(mem.regions().len(), 1);
    }

    #[test]
    fn timestamps_never_go_negative() {
        let (ctx, _) = firing_of(&event(), -5_000);
        assert_eq!(ctx.timestamp, Some(0));
    }
}
