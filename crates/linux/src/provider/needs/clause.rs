//! What one clause needs captured ([`ClauseNeeds`]): the copies, stacks and process context its
//! objects read, the predicate the kernel may filter with, and the thread-locals it mirrors.

use crate::capture::{AddrExpr, CopyRequest, MirrorOp};
use dtrace_dif::object::DifObject;

/// What one clause needs captured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClauseNeeds {
    /// Copies of memory addressed by a probe argument.
    pub copies: Vec<CopyRequest>,
    /// The clause calls `copyinstr` on something other than a plain argument: capture every
    /// string-pointer argument of the probe.
    pub any_string_arg: bool,
    /// The probe arguments (a bit each, arg0 the lowest) the clause reads as strings at their
    /// value (`stringof(arg0)`, `(string)arg1`): at a probe whose arguments are kernel values
    /// (`fbt`) each is a kernel string the probe copies (see `spec_for`).
    pub string_at_args: u8,
    /// The clause calls `copyin` with an address or a length the probe cannot compute (`arg1 +
    /// arg2`, `arg2 * 2`): it is served from the process's memory at delivery (see
    /// `deliver::EventMemory`).
    pub unresolved_copyin: bool,
    /// Kernel stack frames.
    pub kstack: Option<u32>,
    /// User stack frames.
    pub ustack: Option<u32>,
    /// Probe arguments the clause reads (bit n: `argN`/`args[N]`; all when an index is computed).
    pub used_args: u16,
    /// The clause's predicate is exactly `pid == N` (or `N == pid`): the probe may be filtered in the
    /// kernel when every clause on it has the same filter.
    pub filter_pid: Option<u32>,
    /// A read the capture cannot make (why, in a "not yet supported" message): enabling the
    /// probe fails with it.
    pub unsupported: Option<String>,
    /// The clause reads `caller` (the kernel stack's first frames are captured).
    pub caller: bool,
    /// The clause reads `stackdepth` (the whole kernel stack is captured).
    pub stackdepth: bool,
    /// The clause reads `epid` (run whole at the probe, it reads its EPID from the map that
    /// [`crate::provider::LinuxTracing::bind_record`] fills, see `capture::filter::EpidAt`).
    pub epid: bool,
    /// The clause reads `ucaller` (the user stack's first frames are captured).
    pub ucaller: bool,
    /// The clause reads `execargs` (the process's argument area is captured).
    pub execargs: bool,
    /// The clause reads `uregs[]` (the thread's saved user registers are captured).
    pub uregs: bool,
    /// The clause calls `progenyof()` (the task's ancestors are captured).
    pub ancestors: bool,
    /// Thread-local variables the clause stores whose addresses other probes copy from (see
    /// `needs/mirror.rs`), in the order it stores them.
    pub mirror: Vec<MirrorOp>,
    /// The `struct path` addresses the clause calls `d_path()` on (`cwd`, `root`, `fi_pathname`):
    /// their paths are walked at the probe.
    pub paths: Vec<AddrExpr>,
    /// The clause reads `vtimestamp` (computed exactly at the probe, see [`crate::vtime`]).
    pub vtimestamp: bool,
    /// The clause's predicate, for the kernel to evaluate before capturing (see
    /// [`crate::capture::filter`]); `None` for a clause without one.
    pub predicate: Option<DifObject>,
}

impl ClauseNeeds {
    pub(super) fn add_copy(&mut self, c: CopyRequest) {
        if !self.copies.contains(&c) {
            self.copies.push(c);
        }
    }
}

/// `used_args` when an `args[]` index is computed.
pub const ALL_ARGS: u16 = 0x3ff;
