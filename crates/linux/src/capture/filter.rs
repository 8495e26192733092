//! Predicates in the kernel: the capture program evaluates the predicates of the clauses enabled on
//! its probe (translated by `dtrace_ebpf::translate`) before it reserves a record, so a firing for
//! which every predicate is false costs no record, no copy and no consumer work.
//!
//! The kernel's verdict only filters: a firing with a true predicate is captured and delivered as
//! before, and the interpreter runs the clause (predicate included) as the reference. A predicate that
//! faults in the kernel (division by zero, an unreadable address) records too, so the interpreter
//! reports the fault exactly as it always has. When one predicate of the probe cannot be translated,
//! the probe records every firing (no filter), and [`FilterReport`] says why.

use super::address::Slot;
use super::codegen::{read_kernel, ProbeShape};
use super::spec::{ArgSource, Identity, KernelFilter};
use crate::bpf::insn::{helper, op, Asm, Label, Reg, Size, R0, R1, R10, R2, R3, R6, R8};
use dtrace_ebpf::translate::{
    self, Array, Builtin, Frame, KeyPart, ProbeContext, ProbeNames, StringVar, Untranslatable,
};

/// Per predicate of a [`KernelFilter`], in its order: `Ok` when it runs in the kernel at this probe,
/// else why not.
pub type FilterReport = Vec<Result<(), Untranslatable>>;

/// Stack slot the context's reads use (the capture program's scratch slot).
const SCRATCH: i16 = -8;
/// Where the fragments keep their state: below the capture program's two scratch slots, which are
/// free again once the filter has run.
pub(crate) const FRAME: Frame = Frame { base: -16 };

/// A probe's shape as the translator's [`ProbeContext`].
pub(crate) struct ShapeContext<'a> {
    pub(crate) shape: &'a ProbeShape,
    pub(crate) names: &'a ProbeNames,
    pub(crate) opaque_args: super::spec::OpaqueArgs,
    /// The thread-locals kept in the kernel (`None`: all live in dtrace).
    pub(crate) vars: Option<&'a super::spec::KernelVars>,
    /// The per-CPU scratch map (`KernelAggs::keys`) whose values hold, after the key being
    /// built, the strings a clause that runs whole at the probe builds (`None`: strings are
    /// built in dtrace).
    pub(crate) strings: Option<i32>,
    /// The clocks of a clause that runs whole at the probe (`None`: `timestamp`, `walltimestamp`
    /// and `vtimestamp` are not read at the probe).
    pub(crate) clocks: Option<Clocks>,
    /// The probe arguments whose user strings the probe's program reads before the clauses run
    /// (`kagg::emit_string_checks`), each into its slot at the end of the string scratch, in
    /// this order ([`pre_read_offset`]); slots `width` bytes wide.
    pub(crate) pre_read: PreRead<'a>,
    /// The speculations, when they live in the kernel (`None`: in dtrace).
    pub(crate) specs: Option<super::spec::KernelSpecs>,
    /// `scratchsize` for a clause that runs whole at the probe, whose `alloca()` memory is
    /// after the strings in the scratch of [`ShapeContext::strings`] (`None`: `alloca()` runs
    /// in dtrace).
    pub(crate) scratchsize: Option<u64>,
    /// The clause-locals of the clause being translated that hold `alloca()` pointers
    /// (`dtrace_ebpf::translate::alloca_locals`).
    pub(crate) alloca_locals: &'a [u32],
    /// Whether the clause being translated calls `alloca()`: its `copyin()` calls then take
    /// their copies from its alloca area, as the interpreter's do.
    pub(crate) allocates: bool,
    /// The bytes a `copyin()` sized at the probe may take in the clause being translated
    /// (`KernelAggClause::copy_scratch`; `None`: such a copy is made in dtrace).
    pub(crate) copy_scratch: Option<u64>,
    /// Where the clause being translated reads its EPID, or why `epid` is read in dtrace.
    pub(crate) epid: Result<EpidAt, &'static str>,
    /// Where `caller` and `stackdepth` are read (`None`: in dtrace).
    pub(crate) stacks: Option<super::spec::KernelStacks>,
    /// Where `ucaller` and `ustackdepth` are read, after the firing's user stack was walked
    /// (`capture::ustack_keys`; `None`: in dtrace).
    pub(crate) ustack: Option<super::ustack_keys::UserWalk>,
}

/// Where the code at a probe reads its clause's EPID: the framework assigns EPIDs once the
/// probe's program is built, and dtrace writes each in a hash map when it learns it, before
/// tracing starts or the probe is placed: a clause run whole at the probe by its number there
/// ([`epid_key`], `LinuxTracing::bind_record`), a predicate run alone there by its clause
/// ([`clause_epid_key`], `LinuxTracing::bind_epid`). A key not there reads 0, on which the
/// translated code faults (see `translate::Builtin::Epid`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EpidAt {
    /// The map (`u64` key, `u64` EPID); -1 while planning, which only checks translations.
    pub(crate) map: i32,
    /// The clause's key there ([`epid_key`]).
    pub(crate) key: u64,
}

/// Why `epid` is read in dtrace at a probe placed for every process.
pub(crate) const SHARED_EPID: &str =
    "one program serves the probe of every process, each with its own EPIDs";

/// Why `ucaller` and `ustackdepth` are not read at the probe where no walk of the user stack
/// comes before (a predicate, a filter) (see `capture::ustack_keys`).
pub(crate) const NO_USTACK: &str = "read at the probe only in a clause's actions, after the \
    user stack is walked (DTRACE_KERNEL_USTACKS=0 keeps them in dtrace)";

/// Why `caller` and `stackdepth` are read in dtrace where no map of the kernel's tracing
/// address ranges serves the code (a `raise()` or `stop()` sent at the probe).
pub(crate) const NO_STACKS: &str = "dtrace cuts the tracing machinery's frames (BPF, perf and \
     tracepoint glue) off the kernel stack by their kernel symbols, and no map of their address \
     ranges serves this code";

/// Why `epid` is read in dtrace where no map of EPIDs serves the code (a probe placed before
/// dtrace knew of `epid` there).
pub(crate) const NO_EPID: &str = "the framework assigns EPIDs after the probe's program is \
     built, and no map of them serves this code";

/// Where the code of the `j`th of a probe's clauses (`epids`: the map and each clause's number
/// among the session's planned clauses, see `KernelFilter::epids`) reads its EPID at the probe
/// `id`, or why `epid` is read in dtrace.
pub(crate) fn epid_at(
    epids: Option<&(i32, Vec<usize>)>,
    id: translate::ProbeId,
    j: usize,
) -> Result<EpidAt, &'static str> {
    match (epids, id) {
        (Some((map, clauses)), translate::ProbeId::Is(probe)) => clauses
            .get(j)
            .and_then(|&c| clause_epid_key(probe, c))
            .map(|key| EpidAt { map: *map, key })
            .ok_or(NO_EPID),
        (_, translate::ProbeId::Shared) => Err(SHARED_EPID),
        _ => Err(NO_EPID),
    }
}

/// The key of the EPID at probe `probe` of planned clause `clause` (its number among the
/// session's planned clauses), for a predicate run alone at the probe (the filter), in the map
/// of [`EpidAt`]: the high bit of the low word apart from [`epid_key`]'s. A key not there yet
/// faults the predicate, which records the firing for the interpreter: always sound.
/// `None` past the low word's other 31 bits.
pub fn clause_epid_key(probe: u32, clause: usize) -> Option<u64> {
    let clause = u32::try_from(clause).ok().filter(|&c| c < 1 << 31)?;
    Some((u64::from(probe) << 32) | 1 << 31 | u64::from(clause))
}

/// The key of the EPID of the clause numbered `n` among the kernel clauses of probe `probe`
/// (the number its records and faults carry) in the map of [`EpidAt`].
pub fn epid_key(probe: u32, n: u16) -> u64 {
    (u64::from(probe) << 32) | u64::from(n)
}

/// See [`ShapeContext::pre_read`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PreRead<'a> {
    pub(crate) args: &'a [u8],
    pub(crate) width: usize,
    /// The stack slot of the first argument's value, the next ones' below it, which
    /// `kagg::emit_string_checks` keeps before the clauses run: a clause reading one of these
    /// arguments loads it there, not through a helper call again (`None`: while those checks
    /// read them).
    pub(crate) values: Option<i16>,
}

/// The offset in the string scratch of the copy of pre-read argument number `index` of slots
/// `width` bytes wide: the last slots, the first argument's last.
pub(crate) fn pre_read_offset(index: usize, width: usize) -> usize {
    super::spec::STRING_SCRATCH.saturating_sub((index + 1) * width)
}

/// Where the code of a clause that runs whole at the probe reads the firing's clocks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clocks {
    /// The stack slot holding the firing's `timestamp` (the kernel's clock plus the offset to
    /// the framework's, read once per firing).
    pub(crate) timestamp: i16,
    /// The kernel clauses' control map (`KernelAggs::control`), whose value holds the offsets from
    /// the kernel's clock to the framework's and to the wall clock (`walltimestamp`).
    pub(crate) control: i32,
    /// The exact-`vtimestamp` clock ([`crate::vtime`]); without it `vtimestamp` is the
    /// scheduler's last accounting, as in the probe's records.
    pub(crate) vclock: Option<crate::vtime::VclockRef>,
}

impl ShapeContext<'_> {
    fn clocks(&self) -> Result<Clocks, String> {
        self.clocks.ok_or_else(|| {
            "read at the probe only by clauses that run whole there (dtrace stamps records)"
                .to_string()
        })
    }

    /// r0 = the task the probe's record speaks for: the running thread's, or (`on-cpu`) the
    /// incoming one's, a raw tracepoint's argument (the probe's context in r6). Uses r0.
    fn emit_record_task(&self, a: &mut Asm, what: &str) -> Result<(), String> {
        match self.shape.identity {
            Identity::RawTask(n) => {
                a.load(Size::DW, R0, R6, 8 * i16::from(n));
                Ok(())
            }
            _ => {
                self.current(what)?;
                a.call(helper::GET_CURRENT_TASK);
                Ok(())
            }
        }
    }

    /// Writes the name (`execname`, `COMM_LEN` bytes, zeros after its NUL) of the thread the
    /// probe's record speaks for at `at` of the memory `dst` points to: the running thread's, or
    /// (`on-cpu`) the incoming one's, read from its task. Emits nothing when it cannot. Uses
    /// r0-r5.
    pub(crate) fn emit_comm_into(&self, a: &mut Asm, (dst, at): (Reg, i16)) -> Result<(), String> {
        let incoming = match self.shape.identity {
            Identity::RawTask(_) => Some(
                self.shape
                    .task
                    .and_then(|t| t.other)
                    .ok_or("task_struct.comm is not in the kernel's BTF")?,
            ),
            _ => {
                self.current("execname")?;
                None
            }
        };
        // Zeroed first: kernels before 6.12 copy the name with strscpy, which leaves the bytes
        // after its NUL as they were, and a key or compare takes all of them.
        for i in (0..translate::COMM_LEN as i16).step_by(8) {
            a.store_imm(Size::DW, dst, at + i, 0);
        }
        let read = match incoming {
            Some(o) => {
                // The incoming thread's name, up to its NUL (zeros after it, as above).
                self.emit_record_task(a, "execname")?;
                a.mov(R3, R0).alu_imm(op::ADD, R3, o.comm as i32);
                helper::PROBE_READ_KERNEL_STR
            }
            None => helper::GET_CURRENT_COMM,
        };
        a.mov(R1, dst)
            .alu_imm(op::ADD, R1, i32::from(at))
            .mov_imm(R2, translate::COMM_LEN as i32)
            .call(read);
        Ok(())
    }

    /// Whether the probe's code keys the thread-locals of the thread its record speaks for: the
    /// running thread's, or (`on-cpu`) the incoming one's, whose id its task holds (see
    /// `kvars::emit_zero_locals`).
    fn thread_locals(&self) -> Result<(), String> {
        match self.shape.identity {
            Identity::RawTask(_) if self.shape.task.is_some_and(|t| t.other.is_some()) => Ok(()),
            _ => self.current("a thread-local"),
        }
    }

    fn current(&self, what: &str) -> Result<(), String> {
        match self.shape.identity {
            Identity::Current => Ok(()),
            _ => Err(format!(
                "the probe's record speaks for another thread than the one running ({what})"
            )),
        }
    }
}

impl ProbeContext for ShapeContext<'_> {
    fn loops(&self) -> Result<(), String> {
        crate::features::loop_at_probe().map_err(|why| why.to_string())
    }

    fn emit_builtin(&self, a: &mut Asm, b: Builtin) -> Result<(), String> {
        match b {
            Builtin::Arg(n) => {
                // A user string's argument keeps its value (the string's address).
                if self.opaque_args.has(n) && self.opaque_args.user_string(n).is_none() {
                    return Err("its value is the address of data copied at the probe".into());
                }
                let kept = self.pre_read.args.iter().position(|&m| m == n);
                if let (Some(base), Some(i)) = (self.pre_read.values, kept) {
                    a.load(Size::DW, R0, R10, base - 8 * i as i16);
                    return Ok(());
                }
                match self.shape.args.get(n as usize).copied() {
                    None => {
                        a.mov_imm(R0, 0);
                    }
                    Some(ArgSource::SyscallArg(i)) => {
                        let off = super::regs::SYSCALL_ARGS
                            .get(i as usize)
                            .map(|&r| i32::from(r))
                            .ok_or_else(|| format!("syscall argument {i}"))?;
                        // ctx[0] is the saved `struct pt_regs *`.
                        super::codegen::emit_saved_regs(a, self.shape.ctx, off, 1, SCRATCH);
                        a.load(Size::DW, R0, R10, SCRATCH);
                    }
                    Some(src) => {
                        super::codegen::emit_arg(a, self.shape, src).map_err(|e| e.to_string())?
                    }
                }
            }
            Builtin::Pid | Builtin::Tid if matches!(self.shape.identity, Identity::RawTask(_)) => {
                // The incoming thread's ids, from its task, as its record has them.
                let t = self
                    .shape
                    .task
                    .ok_or("task_struct offsets are not in the kernel's BTF")?;
                let off = match b {
                    Builtin::Pid => t.tgid,
                    _ => {
                        t.other
                            .ok_or("task_struct.pid is not in the kernel's BTF")?
                            .pid
                    }
                };
                self.emit_record_task(a, &b.name())?;
                a.store_imm(Size::DW, R10, SCRATCH, 0);
                read_kernel(a, R10, i32::from(SCRATCH), 4, R0, off as i32);
                a.load(Size::W, R0, R10, SCRATCH);
            }
            Builtin::Pid | Builtin::Tid => {
                self.current(&b.name())?;
                a.call(helper::GET_CURRENT_PID_TGID);
                if b == Builtin::Pid {
                    a.alu_imm(op::RSH, R0, 32);
                } else {
                    a.alu_imm(op::LSH, R0, 32).alu_imm(op::RSH, R0, 32);
                }
            }
            Builtin::Uid | Builtin::Gid if matches!(self.shape.identity, Identity::RawTask(_)) => {
                // The incoming thread's credentials, as its record has them.
                let o = self
                    .shape
                    .task
                    .and_then(|t| t.other)
                    .ok_or("task_struct.cred is not in the kernel's BTF")?;
                let off = if b == Builtin::Uid { o.uid } else { o.gid };
                self.emit_record_task(a, &b.name())?;
                a.store_imm(Size::DW, R10, SCRATCH, 0);
                read_kernel(a, R10, i32::from(SCRATCH), 8, R0, o.cred as i32);
                a.load(Size::DW, R0, R10, SCRATCH);
                a.store_imm(Size::DW, R10, SCRATCH, 0);
                read_kernel(a, R10, i32::from(SCRATCH), 4, R0, off as i32);
                a.load(Size::W, R0, R10, SCRATCH);
            }
            Builtin::Uid | Builtin::Gid => {
                self.current(&b.name())?;
                a.call(helper::GET_CURRENT_UID_GID);
                if b == Builtin::Gid {
                    a.alu_imm(op::RSH, R0, 32);
                } else {
                    a.alu_imm(op::LSH, R0, 32).alu_imm(op::RSH, R0, 32);
                }
            }
            Builtin::Cpu => {
                a.call(helper::GET_SMP_PROCESSOR_ID);
            }
            Builtin::Timestamp => {
                a.load(Size::DW, R0, R10, self.clocks()?.timestamp);
            }
            Builtin::Walltimestamp => {
                // The firing's `timestamp` less the framework's offset plus the wall clock's: the
                // kernel's clock plus the wall clock's offset, as dtrace computes it for records.
                let c = self.clocks()?;
                a.load(Size::DW, R0, R10, c.timestamp);
                a.ld_map_value(R1, c.control, 0);
                a.load(Size::DW, R2, R1, super::spec::CONTROL_CLOCK as i16);
                a.alu(op::SUB, R0, R2);
                a.load(Size::DW, R2, R1, super::spec::CONTROL_WALL as i16);
                a.alu(op::ADD, R0, R2);
            }
            Builtin::Vtimestamp => {
                let c = self.clocks()?;
                self.current("vtimestamp")?;
                match (&c.vclock, self.shape.task.and_then(|t| t.sum_exec_runtime)) {
                    (Some(v), _) => {
                        crate::vtime::emit_vtime(
                            a,
                            v,
                            crate::vtime::VtimeAt::R0 {
                                timestamp: c.timestamp,
                                control: c.control,
                            },
                        );
                    }
                    // As the probe's record has it without the exact clock.
                    (None, Some(off)) => {
                        a.call(helper::GET_CURRENT_TASK);
                        a.store_imm(Size::DW, R10, SCRATCH, 0);
                        read_kernel(a, R10, i32::from(SCRATCH), 8, R0, off as i32);
                        a.load(Size::DW, R0, R10, SCRATCH);
                    }
                    (None, None) => {
                        a.mov_imm(R0, 0);
                    }
                }
            }
            Builtin::Curthread => {
                self.emit_record_task(a, "curthread")?;
            }
            Builtin::Caller | Builtin::Stackdepth => {
                self.current(&b.name())?;
                let stacks = self.stacks.as_ref().ok_or(NO_STACKS)?;
                let what = match b {
                    Builtin::Caller => {
                        super::kstack::StackValue::Caller(super::kstack::starts_in_probed_function(
                            &self.names.provider,
                            &self.names.name,
                            self.shape.ctx,
                        ))
                    }
                    _ => super::kstack::StackValue::Depth,
                };
                super::kstack::emit_stack_value(a, self.shape, stacks, what, SCRATCH);
            }
            Builtin::Ucaller | Builtin::Ustackdepth => {
                self.current(&b.name())?;
                let w = self.ustack.as_ref().ok_or(NO_USTACK)?;
                let depth = b == Builtin::Ustackdepth;
                super::ustack_keys::emit_stack_value(a, self.shape, w, depth, SCRATCH)
                    .map_err(|e| e.to_string())?;
            }
            Builtin::Epid => {
                let at = self.epid?;
                let found = a.label();
                a.ld_imm64(R1, at.key).store(Size::DW, R10, SCRATCH, R1);
                super::codegen::emit_keyed_call(a, at.map, SCRATCH, helper::MAP_LOOKUP_ELEM);
                a.jmp_imm(op::JEQ, R0, 0, found);
                a.load(Size::DW, R0, R0, 0);
                a.bind(found);
            }
            Builtin::Ppid => {
                let t = self
                    .shape
                    .task
                    .ok_or("task_struct offsets are not in the kernel's BTF")?;
                // curthread->real_parent->tgid, as the record's header has it.
                self.emit_record_task(a, "ppid")?;
                read_kernel(a, R10, i32::from(SCRATCH), 8, R0, t.real_parent as i32);
                a.load(Size::DW, R0, R10, SCRATCH);
                a.store_imm(Size::DW, R10, SCRATCH, 0);
                read_kernel(a, R10, i32::from(SCRATCH), 4, R0, t.tgid as i32);
                a.load(Size::W, R0, R10, SCRATCH);
            }
        }
        Ok(())
    }

    fn emit_ureg(&self, a: &mut Asm, i: u64, none: Label) -> Result<(), String> {
        use super::layout::UREGS_COUNT;
        self.current("uregs[]")?;
        let Some(off) = i
            .checked_mul(8)
            .filter(|_| i < UREGS_COUNT as u64)
            .and_then(|o| i32::try_from(o).ok())
        else {
            // No such register: a jump the verifier knows is taken (no dead code follows).
            a.mov_imm(R0, 0).jmp_imm(op::JEQ, R0, 0, none);
            return Ok(());
        };
        // The registers the capture records for `uregs[]` (its `struct pt_regs`), where it
        // records them (a thread in user mode).
        super::codegen::emit_user_pt_regs(a, none);
        read_kernel(a, R10, i32::from(SCRATCH), 8, R8, off);
        a.jmp_imm(op::JNE, R0, 0, none);
        a.load(Size::DW, R0, R10, SCRATCH);
        Ok(())
    }

    fn emit_execname(&self, a: &mut Asm, at: i16) -> Result<(), String> {
        self.emit_comm_into(a, (R10, at))
    }

    fn names(&self) -> &ProbeNames {
        self.names
    }

    fn alloca_area(&self) -> Result<translate::AllocaArea, String> {
        match (self.scratchsize, self.strings) {
            (Some(limit), Some(_)) => Ok(translate::AllocaArea {
                top_at: super::kagg::ALLOCA_TOP,
                size: super::spec::ALLOCA_SCRATCH as u32,
                limit,
                room: (super::spec::ALLOCA_SCRATCH + super::spec::ALLOCA_ROOM) as u32,
            }),
            (None, Some(_)) => Err("the session's programs differ in scratchsize".into()),
            _ => Err("alloca() runs at the probe only in clauses that run whole there".into()),
        }
    }

    fn emit_alloca_base(&self, a: &mut Asm) -> Result<(), String> {
        self.alloca_area()?;
        self.emit_scratch_at(a, super::spec::STRING_SCRATCH)
    }

    fn local_holds_alloca(&self, var: u32) -> bool {
        self.alloca_locals.contains(&var)
    }

    fn var_holds_alloca(&self, thread: bool, var: u32) -> bool {
        self.vars.is_some_and(|kv| {
            if thread {
                kv.alloca_ids.contains(&var)
            } else {
                kv.alloca_global_ids.contains(&var)
            }
        })
    }

    fn copyin_allocates(&self) -> bool {
        self.allocates
    }

    fn emit_string_scratch(&self, a: &mut Asm, offset: usize, len: usize) -> Result<(), String> {
        // The pre-read strings' slots are at the end.
        let room = super::spec::STRING_SCRATCH
            .saturating_sub(self.pre_read.args.len() * self.pre_read.width);
        if offset + len > room {
            return Err(format!(
                "its strings take more than the kernel's {room} bytes of string scratch"
            ));
        }
        self.emit_scratch_at(a, offset)
    }

    fn copied_string_arg(&self, n: u8) -> Option<u32> {
        // The record is in r6 at a tracepoint's program only.
        let at_tracepoint = self.shape.ctx == super::codegen::CtxKind::Tracepoint;
        let s = self
            .opaque_args
            .record_strings
            .get(usize::from(n))
            .copied()??;
        at_tracepoint.then_some(s.size)
    }

    fn user_string_arg(&self, n: u8) -> Option<u32> {
        self.opaque_args.user_string(n)
    }

    fn emit_copied_string_address(&self, a: &mut Asm, n: u8) -> Result<(), String> {
        let s = self
            .opaque_args
            .record_strings
            .get(usize::from(n))
            .copied()
            .flatten()
            .ok_or("no string of the record is copied for this argument")?;
        // Reached as the probe's copy reaches it.
        let e = super::AddrExpr {
            base: s.base,
            offset: 0,
            derefs: Vec::new(),
            user_derefs: Vec::new(),
            index: None,
        };
        super::address::Evaluator::new("a copied string argument", Slot::stack(SCRATCH))
            .with_context(self.shape.ctx)
            .emit_kernel(a, &e)
            .map_err(|e| e.to_string())?;
        a.mov(R0, R3);
        Ok(())
    }

    fn pre_reads_string(&self, n: u8) -> bool {
        self.pre_read.args.contains(&n)
    }

    fn emit_pre_read_string(&self, a: &mut Asm, n: u8) -> Result<(), String> {
        let i = self
            .pre_read
            .args
            .iter()
            .position(|&m| m == n)
            .ok_or("no string is read before the clauses run")?;
        self.emit_scratch_at(a, pre_read_offset(i, self.pre_read.width))
    }

    fn reads_user_memory(&self) -> Result<(), String> {
        self.current("user memory")
    }

    fn copy_scratch(&self) -> Result<u64, String> {
        self.copy_scratch.ok_or_else(|| {
            "the clause's other copyin() or alloca() calls share its scratch, or it runs in dtrace"
                .to_string()
        })
    }

    fn writes_user_memory(&self) -> Result<(), String> {
        self.current("user memory")?;
        crate::bpf::prog::write_user_allowed()
    }

    fn emit_thread_load(&self, a: &mut Asm, var: u32) -> Result<(), String> {
        let kv = self.kernel_var(var)?;
        super::kvars::emit_load(a, kv, var)
    }

    fn emit_thread_store(&self, a: &mut Asm, var: u32, value_at: i16) -> Result<(), String> {
        let kv = self.kernel_var(var)?;
        super::kvars::emit_store(a, kv, var, value_at)
    }

    fn emit_local_load(&self, a: &mut Asm, var: u32) -> Result<(), String> {
        super::kvars::emit_local_load(a, self.kernel_local(var)?);
        Ok(())
    }

    fn emit_local_store(&self, a: &mut Asm, var: u32, value_at: i16) -> Result<(), String> {
        super::kvars::emit_local_store(a, self.kernel_local(var)?, value_at);
        Ok(())
    }

    fn emit_global_load(&self, a: &mut Asm, var: u32) -> Result<(), String> {
        let (kv, i) = self.kernel_global(var)?;
        super::kvars::emit_global_load(a, kv, i);
        Ok(())
    }

    fn emit_global_store(&self, a: &mut Asm, var: u32, value_at: i16) -> Result<(), String> {
        let (kv, i) = self.kernel_global(var)?;
        super::kvars::emit_global_store(a, kv, i, value_at);
        Ok(())
    }

    fn emit_array_load(&self, a: &mut Asm, array: Array, key: &[KeyPart]) -> Result<(), String> {
        let kv = self.kernel_array(array)?;
        super::kvars::emit_array_load(a, kv, array, key)
    }

    fn emit_array_store(
        &self,
        a: &mut Asm,
        array: Array,
        key: &[KeyPart],
        value_at: i16,
    ) -> Result<(), String> {
        let kv = self.kernel_array(array)?;
        super::kvars::emit_array_store(a, kv, array, key, value_at)
    }

    fn emit_string_load(&self, a: &mut Asm, var: StringVar<'_>, dst_at: i16) -> Result<(), String> {
        let kv = self.kernel_strings(var)?;
        super::kvars::emit_string_load(a, kv, var, dst_at)
    }

    fn emit_string_store(
        &self,
        a: &mut Asm,
        var: StringVar<'_>,
        src_at: i16,
    ) -> Result<(), String> {
        let kv = self.kernel_strings(var)?;
        super::kvars::emit_string_store(a, kv, var, src_at)
    }

    fn emit_ref_var(&self, a: &mut Asm, var: StringVar<'_>, size: u32) -> Result<(), String> {
        let kv = self.vars.ok_or("struct variables live in dtrace")?;
        if matches!(var, StringVar::Thread(_))
            || matches!(var, StringVar::Array(array, _) if array.thread)
        {
            self.thread_locals()?;
        }
        super::kvars::emit_ref_var(a, kv, var, size)
    }

    fn emit_dropped(&self, a: &mut Asm, abandon: Label) -> bool {
        if self.vars.is_none() {
            return false;
        }
        super::kvars::emit_dropped(a, abandon);
        true
    }

    fn emit_speculation(&self, a: &mut Asm) -> Result<(), String> {
        let specs = self
            .specs
            .as_ref()
            .ok_or("speculations live in dtrace at this probe")?;
        super::speculation::emit_speculation(a, specs);
        Ok(())
    }

    fn emit_strtok_state(&self, a: &mut Asm) -> Result<i16, String> {
        let kv = self.vars.ok_or(super::kvars::STRTOK_IN_DTRACE)?;
        super::kvars::emit_strtok_state(a, kv)
    }

    fn task_links(&self) -> Result<translate::TaskLinks, String> {
        self.current("progenyof()")?;
        let t = self
            .shape
            .task
            .ok_or("task_struct offsets are not in the kernel's BTF")?;
        // The bound of the ancestors a probe records for the interpreter.
        Ok(translate::TaskLinks {
            real_parent: t.real_parent,
            tgid: t.tgid,
            most: super::spec::MAX_ANCESTORS,
        })
    }

    fn path_offsets(&self) -> Result<dtrace_ebpf::dpath::PathOffsets, String> {
        self.shape
            .task
            .and_then(|t| t.paths)
            .ok_or_else(|| "dentry and mount offsets are not in the kernel's BTF".into())
    }
}

impl ShapeContext<'_> {
    /// r0 = the address of byte `offset` of the string scratch (0 when the scratch could not be
    /// had). Uses r0-r5.
    pub(crate) fn emit_scratch_at(&self, a: &mut Asm, offset: usize) -> Result<(), String> {
        let map = self
            .strings
            .ok_or("strings are built at the probe only by clauses that run whole there")?;
        // The value of the key scratch this program's kind uses (see `KernelAggs::keys`).
        let null = a.label();
        super::kagg::emit_key_scratch_lookup(a, self.shape, map, SCRATCH, null);
        a.alu_imm(op::ADD, R0, (super::spec::MAX_KAGG_KEY + offset) as i32);
        a.bind(null);
        Ok(())
    }

    /// `var`'s place among the kernel's clause-locals, when it is one of them.
    fn kernel_local(&self, var: u32) -> Result<usize, String> {
        self.vars
            .and_then(|kv| kv.local_ids.iter().position(|&l| l == var))
            .filter(|&i| i < super::kvars::MAX_LOCALS)
            .ok_or_else(|| "this clause-local lives in dtrace".to_string())
    }

    /// The kernel's globals and `var`'s place among them, when it is one of them.
    fn kernel_global(&self, var: u32) -> Result<(&super::spec::KernelVars, usize), String> {
        self.vars
            .and_then(|kv| Some((kv, kv.global_ids.iter().position(|&g| g == var)?)))
            .ok_or_else(|| "this global lives in dtrace".to_string())
    }

    /// The kernel's dynamic variables, when `array` lives there (and the probe runs for its
    /// thread, for a thread-local array).
    fn kernel_array(&self, array: Array) -> Result<&super::spec::KernelVars, String> {
        let kv = self
            .vars
            .filter(|kv| {
                if array.thread {
                    kv.thread_arrays.contains(&array.var)
                } else {
                    kv.global_arrays.contains(&array.var)
                }
            })
            .ok_or("this associative array lives in dtrace")?;
        if array.thread {
            self.thread_locals()?;
        }
        Ok(kv)
    }

    /// The kernel's variables, when string variable `var` lives there (and the probe runs for
    /// its thread, for a thread-local).
    fn kernel_strings(&self, var: StringVar<'_>) -> Result<&super::spec::KernelVars, String> {
        let kv = self.vars.ok_or("string variables live in dtrace")?;
        let s = &kv.strings;
        let (kept, thread) = match var {
            StringVar::Thread(id) => (s.ids.contains(&id), true),
            StringVar::Global(id) => (s.global_ids.contains(&id), false),
            StringVar::Local(id) => (s.local_ids.contains(&id), false),
            StringVar::Array(array, _) if array.thread => {
                (s.thread_arrays.contains(&array.var), true)
            }
            StringVar::Array(array, _) => (s.global_arrays.contains(&array.var), false),
        };
        if !kept {
            return Err("this string variable lives in dtrace".into());
        }
        if thread {
            self.thread_locals()?;
        }
        Ok(kv)
    }

    /// The kernel's thread-locals, when `var` is one of them and the probe runs for its thread.
    fn kernel_var(&self, var: u32) -> Result<&super::spec::KernelVars, String> {
        let kv = self
            .vars
            .filter(|kv| kv.ids.contains(&var))
            .ok_or("this thread-local lives in dtrace")?;
        self.thread_locals()?;
        Ok(kv)
    }
}

/// Translates every predicate of `filter` for `shape`: the fragments when all of them translate,
/// and the report either way.
pub fn translate_filter(
    shape: &ProbeShape,
    filter: &KernelFilter,
) -> (Option<Vec<translate::Fragment>>, FilterReport) {
    let ctx = ShapeContext {
        shape,
        names: &filter.names,
        opaque_args: filter.opaque_args,
        vars: None,
        strings: None,
        clocks: None,
        pre_read: PreRead::default(),
        specs: None,
        scratchsize: None,
        alloca_locals: &[],
        allocates: false,
        copy_scratch: None,
        epid: Err(NO_EPID),
        stacks: filter.stacks,
        ustack: None,
    };
    let results: Vec<Result<translate::Fragment, Untranslatable>> = filter
        .predicates
        .iter()
        .enumerate()
        .map(|(j, p)| {
            let epid = epid_at(filter.epids.as_ref(), filter.names.id, j);
            let ctx = ShapeContext { epid, ..ctx };
            translate::translate(p, &ctx, filter.strsize as usize, FRAME)
        })
        .collect();
    let report = results
        .iter()
        .map(|r| r.as_ref().map(|_| ()).map_err(Clone::clone))
        .collect();
    (results.into_iter().collect::<Result<_, _>>().ok(), report)
}

/// Emits the check of the filters' bypass switch (when there is one): jumps to `past` (after every
/// kernel filter of the probe, the `pid` one included) when the switch is on.
pub fn emit_bypass(a: &mut Asm, bypass: Option<i32>, past: Label) {
    let Some(fd) = bypass else {
        return;
    };
    // The switch's value read in place (no helper call: every firing of the probe pays this).
    a.ld_map_value(R1, fd, 0);
    a.load(Size::DW, R1, R1, 0);
    a.jmp_imm(op::JNE, R1, 0, past);
}

/// Emits the filter of `filter` (when every predicate translates): control goes on when one
/// predicate is true or faulted, to `out` when all are false. Returns the report.
pub fn emit_filter(
    a: &mut Asm,
    shape: &ProbeShape,
    filter: &KernelFilter,
    out: Label,
) -> FilterReport {
    let (fragments, report) = translate_filter(shape, filter);
    if let Some(fragments) = fragments {
        if !fragments.is_empty() {
            let record = a.label();
            for f in &fragments {
                f.emit(a);
                a.jmp_imm(op::JNE, R0, 0, record);
            }
            a.ja(out);
            a.bind(record);
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::codegen::CtxKind;
    use crate::capture::spec::Identity;
    use translate::ProbeId;

    fn epid_filter(id: ProbeId, epids: Option<(i32, Vec<usize>)>) -> KernelFilter {
        let p = dtrace_compiler::compile(
            "syscall::read:entry /epid == 3/ { trace(1); }",
            &dtrace_compiler::CompileOptions::default(),
        )
        .unwrap();
        KernelFilter {
            predicates: vec![p.ecbs[0].predicate.clone().unwrap()],
            strsize: 256,
            names: ProbeNames {
                id,
                ..Default::default()
            },
            epids,
            ..Default::default()
        }
    }

    fn pair(f: impl FnOnce(&mut Asm)) -> Vec<crate::bpf::Insn> {
        let mut a = Asm::new();
        f(&mut a);
        a.finish().unwrap()
    }

    #[test]
    fn a_predicate_reads_its_clauses_epid_at_this_probe_from_the_map() {
        let shape = ProbeShape {
            ctx: CtxKind::RawTracepoint,
            args: Vec::new(),
            conditions: Vec::new(),
            identity: Identity::Current,
            task: None,
        };
        let (frags, report) =
            translate_filter(&shape, &epid_filter(ProbeId::Is(7), Some((11, vec![4]))));
        assert_eq!(report, vec![Ok(())]);
        let insns: Vec<crate::bpf::Insn> = frags.unwrap().remove(0).insns;
        let key = pair(|a| {
            a.ld_imm64(R1, clause_epid_key(7, 4).unwrap());
        });
        let map = pair(|a| {
            a.ld_map_fd(R1, 11);
        });
        assert!(insns.windows(2).any(|w| w == key.as_slice()), "the key");
        assert!(insns.windows(2).any(|w| w == map.as_slice()), "the map");
        // Apart from the keys of the clauses run whole at a probe.
        assert_ne!(clause_epid_key(7, 0), Some(epid_key(7, 0)));
        // Without the map, or where one program serves every process's probe, in dtrace.
        for (f, reason) in [
            (epid_filter(ProbeId::Is(7), None), NO_EPID),
            (
                epid_filter(ProbeId::Shared, Some((11, vec![4]))),
                SHARED_EPID,
            ),
        ] {
            let (frags, report) = translate_filter(&shape, &f);
            assert!(frags.is_none());
            assert!(
                matches!(&report[0], Err(Untranslatable::Variable { why, .. }) if why == reason),
                "{report:?}"
            );
        }
    }
}
