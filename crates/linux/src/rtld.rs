//! Watching a traced process's run-time linker, as DTrace's rtld agent does: the dynamic linker
//! calls `_dl_debug_state` (the `r_brk` address of its `r_debug`) before and after it changes the
//! list of loaded objects (`dlopen`, `dlclose`). A uprobe there, in that process only, runs a small
//! program that counts the call and stops the process (`SIGSTOP` through `bpf_send_signal`) before
//! the linker returns, so before a newly loaded library's initialisers or functions run. `dtrace`
//! sees the count move, reads the process's mappings again, places the probes the new objects
//! bring, and lets the process go on (`SIGCONT`), as DTrace creates pid and USDT probes at the
//! linker's `RT_CONSISTENT` event.

use crate::attach::Attachment;
use crate::bpf::insn::{R0, R1, R6};
use crate::bpf::{Asm, Map, MapKind, ProgKind, Program};
use crate::catalog::pid::ProcessImage;
use crate::error::{LinuxError, Result};

/// The linker's hook (glibc, and static glibc programs that can `dlopen`).
pub const HOOK: &str = "_dl_debug_state";
/// `bpf_send_signal`.
const SEND_SIGNAL: i32 = 109;

/// The hook of one process, placed while it is traced.
#[derive(Debug)]
pub struct RtldWatch {
    pid: u32,
    /// One u64: how many times the hook ran.
    count: Map,
    attach: Option<Attachment>,
    _prog: Program,
    /// The count last handled.
    seen: u64,
}

impl RtldWatch {
    /// Places the hook in process `pid`, in the object of `image` that has it. `None` when no
    /// object has (a static program without `dlopen`): the process loads nothing later.
    pub fn place(image: &ProcessImage) -> Result<Option<RtldWatch>> {
        let Some((path, offset)) = image.objects.iter().find_map(|o| {
            o.table
                .get(HOOK)
                .map(|f| (o.table.path.clone(), f.file_offset))
        }) else {
            return Ok(None);
        };
        let count = Map::create(MapKind::Array, "dt_rtld", 4, 8, 1)?;
        let mut a = Asm::new();
        a.ld_map_value(R6, count.raw_fd(), 0)
            .mov_imm(R1, 1)
            .atomic_add64(R6, 0, R1)
            .mov_imm(R1, libc::SIGSTOP)
            .call(SEND_SIGNAL)
            .mov_imm(R0, 0)
            .exit();
        let what = format!("the run-time linker of pid {}", image.pid);
        let prog = Program::load(ProgKind::Kprobe, &a.finish()?, "dt_rtld", &what)?;
        let site = crate::uprobe::UprobeSite {
            path: &path,
            offset,
            retprobe: false,
            pid: image.pid,
            ref_ctr_offset: 0,
        };
        let attach = crate::uprobe::attach(&prog, &site, &what)?;
        Ok(Some(RtldWatch {
            pid: image.pid,
            count,
            attach: Some(attach),
            _prog: prog,
            seen: 0,
        }))
    }

    /// The process watched.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    fn count(&self) -> Result<u64> {
        let v = self.count.lookup(&0u32.to_ne_bytes())?.unwrap_or_default();
        let bytes: [u8; 8] = v
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| LinuxError::Process("short rtld counter".into()))?;
        Ok(u64::from_ne_bytes(bytes))
    }

    /// Whether the linker changed the process's objects since the last call: the process is then
    /// stopped (or about to stop) in the hook until [`RtldWatch::resume`].
    pub fn changed(&mut self) -> bool {
        match self.count() {
            Ok(n) if n != self.seen => {
                self.seen = n;
                true
            }
            _ => false,
        }
    }

    /// Lets the process go on after a change. A `SIGCONT` sent before the stop took effect
    /// discards the pending stop, so the process never stays stopped.
    pub fn resume(&self) {
        // SAFETY: kill has no memory preconditions; a process that is gone makes it fail.
        unsafe { libc::kill(self.pid as i32, libc::SIGCONT) };
    }
}

impl Drop for RtldWatch {
    fn drop(&mut self) {
        // Take the hook out first, then let go of a process it stopped that was not resumed.
        drop(self.attach.take());
        if self.changed() {
            self.resume();
        }
    }
}
