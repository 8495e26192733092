//! Block mode: one trap per basic block instead of one per instruction.
//!
//! (Being written: in this version every hook is inert and block mode single-steps.)

use crate::tracer::{PcMap, Tracer};

/// Breakpoints placed in one address space: address to original byte.
#[derive(Debug, Clone, Default)]
pub struct Breakpoints {
    sites: PcMap<u8>,
}

impl Breakpoints {
    /// Puts the original bytes back into `buf`, read at `pc`.
    pub fn unpatch(&self, pc: u64, buf: &mut [u8]) {
        if self.sites.is_empty() {
            return;
        }
        for (i, b) in buf.iter_mut().enumerate() {
            if let Some(orig) = self.sites.get(&(pc + i as u64)) {
                *b = *orig;
            }
        }
    }
}

pub(crate) fn resume(_t: &mut Tracer, tid: i32, sig: i32) -> std::io::Result<()> {
    crate::ptrace::singlestep(tid, sig)
}
pub(crate) fn on_trap(_t: &mut Tracer, _tid: i32) -> std::io::Result<bool> {
    Ok(false)
}
pub(crate) fn before_signal(_t: &mut Tracer, _tid: i32) {}
pub(crate) fn vfork_started(_t: &mut Tracer, _tid: i32) {}
pub(crate) fn vfork_done(_t: &mut Tracer, _tid: i32) {}
pub(crate) fn strip_child(_t: &mut Tracer, _tid: i32) {}
pub(crate) fn strip_all(_t: &mut Tracer, _tid: i32) {}
pub(crate) fn remember_child_bps(_t: &mut Tracer, _tid: i32, _b: Breakpoints, _shared: bool) {}
pub(crate) fn fix_trap_pc(_t: &mut Tracer, _tid: i32, _regs: libc::user_regs_struct) {}
