//! The probe context a provider hands in with each firing ([`FiringContext`]), and its adapter to the
//! DIF interpreter's [`ProbeContext`] trait: built-in variables from the firing and the probe, thread
//! keys, `speculation()` from the framework's speculations, `progenyof()` and random numbers.

use crate::records::ProbeInfo;
use crate::speculation::Speculations;
use dtrace_dif::vars;
use dtrace_dif::vm::{FaultKind, ProbeContext};

/// `cpu`, numbered as in FreeBSD/OpenDTrace (re-exported from `dtrace_dif::vars`).
pub use dtrace_dif::vars::DIF_VAR_CPU;

/// What a provider knows about one probe firing. Fields not known are left at their defaults (0, empty).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FiringContext {
    /// `arg0`..`arg9` (also `args[]`).
    pub args: [u64; 10],
    /// `pid`.
    pub pid: u64,
    /// `ppid`.
    pub ppid: u64,
    /// `tid`.
    pub tid: u64,
    /// `uid`.
    pub uid: u64,
    /// `gid`.
    pub gid: u64,
    /// `errno`.
    pub errno: u64,
    /// `curthread` (an opaque thread pointer).
    pub curthread: u64,
    /// `caller`.
    pub caller: u64,
    /// `ucaller`.
    pub ucaller: u64,
    /// `execname`.
    pub execname: String,
    /// `execargs`.
    pub execargs: String,
    /// Kernel stack, innermost first (`stack()`, `stackdepth`).
    pub kstack: Vec<u64>,
    /// User stack, innermost first (`ustack()`, `ustackdepth`).
    pub ustack: Vec<u64>,
    /// Pids of the process's ancestors (for `progenyof()`).
    pub ancestors: Vec<u64>,
    /// When the probe fired (monotonic nanoseconds), if the provider captured it; the framework's clock
    /// otherwise.
    pub timestamp: Option<u64>,
    /// `vtimestamp`, if known.
    pub vtimestamp: u64,
    /// `walltimestamp` (nanoseconds since 1970) when the probe fired, if the provider captured
    /// it; the framework's clock when the clause runs otherwise.
    pub walltimestamp: Option<u64>,
    /// The thread's user registers (`uregs[]`) in the order of the `R_*` indexes, when the
    /// provider captured them; reading any other index, or with none captured, faults.
    pub uregs: Option<Vec<u64>>,
    /// The clauses that run where the probe fires (see `Framework::run_elsewhere`) handed this
    /// firing over (the provider could not read there what they read): they run here too.
    pub handed_over: bool,
}

/// Where a CPU sits in the machine (`chip` and `lgrp`, `curcpu->cpu_chip` and `cpu_lgrp`), as the
/// embedder reads the system's topology; unknown is 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuPlace {
    /// Physical package (socket).
    pub chip: u32,
    /// Locality group: the NUMA node.
    pub lgrp: u32,
}

/// The key of thread `tid`'s thread-local variables: never 0, so thread 0 (an idle or unknown thread)
/// still gets its own.
pub fn thread_key(tid: u64) -> u64 {
    tid | (1 << 63)
}

/// Adapter from a firing to the interpreter's [`ProbeContext`].
pub struct ContextAdapter<'a> {
    /// The firing.
    pub ctx: &'a FiringContext,
    /// The probe that fired.
    pub probe: &'a ProbeInfo,
    /// The EPID of the ECB running.
    pub epid: u32,
    /// The CPU the probe fired on (`cpu`).
    pub cpu: u32,
    /// Where that CPU sits (`chip`, `lgrp`).
    pub place: CpuPlace,
    /// `timestamp`.
    pub timestamp: u64,
    /// The clock `walltimestamp` is read from (only when a clause uses it).
    pub clock: &'a dyn crate::framework::Clock,
    /// Speculations.
    pub specs: &'a mut Speculations,
    /// Random state.
    pub rng: &'a mut u64,
}

impl ProbeContext for ContextAdapter<'_> {
    fn int_var(&mut self, id: u32) -> Result<u64, FaultKind> {
        let c = self.ctx;
        if (vars::DIF_VAR_ARG0..=vars::DIF_VAR_ARG9).contains(&id) {
            return Ok(c.args[(id - vars::DIF_VAR_ARG0) as usize]);
        }
        Ok(match id {
            vars::DIF_VAR_CURTHREAD => c.curthread,
            vars::DIF_VAR_TIMESTAMP => self.timestamp,
            vars::DIF_VAR_VTIMESTAMP => c.vtimestamp,
            vars::DIF_VAR_IPL => 0,
            vars::DIF_VAR_EPID => self.epid as u64,
            vars::DIF_VAR_ID => self.probe.id as u64,
            vars::DIF_VAR_STACKDEPTH => c.kstack.len() as u64,
            vars::DIF_VAR_CALLER => c.caller,
            vars::DIF_VAR_PID => c.pid,
            vars::DIF_VAR_TID => c.tid,
            vars::DIF_VAR_WALLTIMESTAMP => c.walltimestamp.unwrap_or_else(|| self.clock.wall()),
            vars::DIF_VAR_USTACKDEPTH => c.ustack.len() as u64,
            vars::DIF_VAR_UCALLER => c.ucaller,
            vars::DIF_VAR_PPID => c.ppid,
            vars::DIF_VAR_UID => c.uid,
            vars::DIF_VAR_GID => c.gid,
            vars::DIF_VAR_ERRNO => c.errno,
            DIF_VAR_CPU => self.cpu as u64,
            vars::DIF_VAR_CHIP => self.place.chip as u64,
            vars::DIF_VAR_LGRP => self.place.lgrp as u64,
            _ => return Err(FaultKind::IllOp),
        })
    }

    fn str_var(&mut self, id: u32, out: &mut Vec<u8>) -> Result<(), FaultKind> {
        let s: &str = match id {
            vars::DIF_VAR_PROBEPROV => &self.probe.provider,
            vars::DIF_VAR_PROBEMOD => &self.probe.module,
            vars::DIF_VAR_PROBEFUNC => &self.probe.function,
            vars::DIF_VAR_PROBENAME => &self.probe.name,
            vars::DIF_VAR_EXECNAME => &self.ctx.execname,
            vars::DIF_VAR_ZONENAME => "global",
            vars::DIF_VAR_EXECARGS => &self.ctx.execargs,
            _ => return Err(FaultKind::IllOp),
        };
        out.extend_from_slice(s.as_bytes());
        Ok(())
    }

    fn array_var(&mut self, id: u32, index: u64) -> Result<u64, FaultKind> {
        match id {
            vars::DIF_VAR_ARGS => self
                .ctx
                .args
                .get(index as usize)
                .copied()
                .ok_or(FaultKind::IllOp),
            vars::DIF_VAR_UREGS => self
                .ctx
                .uregs
                .as_ref()
                .and_then(|r| r.get(usize::try_from(index).ok()?))
                .copied()
                .ok_or(FaultKind::IllOp),
            _ => Err(FaultKind::IllOp),
        }
    }

    fn thread_key(&mut self) -> u64 {
        thread_key(self.ctx.tid)
    }

    fn speculation(&mut self) -> u64 {
        self.specs.speculation()
    }

    fn progenyof(&mut self, pid: u64) -> bool {
        // The parent counts even when the provider gave no ancestor chain.
        self.ctx.pid == pid || self.ctx.ppid == pid || self.ctx.ancestors.contains(&pid)
    }

    fn random(&mut self) -> u64 {
        // xorshift64*
        let mut x = *self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        *self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}
