//! `progenyof(pid)` in translated code, as the interpreter's: true when the current process is
//! `pid`, or `pid` is among its ancestors up the `task_struct.real_parent` chain. DTrace walks to
//! the root; here, as in the ancestors a probe records for the interpreter, the walk is unrolled
//! and bounded by [`TaskLinks::most`] parents (the verifier accepts no unbounded loop), and it
//! stops after a task whose `tgid` is 1 or 0 (init, or the idle task above kernel threads) or
//! at a `real_parent` that cannot be read. A parent's `tgid` that cannot be read reads as 0, as
//! the recorded ancestors have it.

use super::{Kind, State, Translator, Untranslatable};
use crate::insn::{helper, op, Size, R0, R1, R10, R2, R3, R8, R9};

/// Where the current task's ancestors are found, as the kernel's BTF gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskLinks {
    /// Offset of `task_struct.real_parent` (a `struct task_struct *`).
    pub real_parent: u32,
    /// Offset of `task_struct.tgid` (a 32-bit process id).
    pub tgid: u32,
    /// The most parents walked.
    pub most: usize,
}

impl Translator<'_> {
    /// `progenyof()` of the integer on the tuple stack into `rd` (see the module notes).
    pub(super) fn progenyof(
        &mut self,
        pc: usize,
        s: &mut State,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let refused = super::refusal(pc, "progenyof()");
        let links = self.ctx.task_links().map_err(refused)?;
        let (parent, tgid) = match (i32::try_from(links.real_parent), i32::try_from(links.tgid)) {
            (Ok(p), Ok(t)) => (p, t),
            _ => return Err(refused("task_struct offsets out of range".into())),
        };
        let args = self.int_args(pc, s)?;
        let [x] = args[..] else {
            return Err(Untranslatable::Invalid {
                pc,
                what: format!("progenyof() with {} arguments", args.len()),
            });
        };
        let buf = self.frame.load_buf();
        let a = &mut self.a;
        let (yes, no, out) = (a.label(), a.label(), a.label());
        // r9: the pid asked of; r8: the task walked.
        a.load(Size::DW, R9, R10, x);
        a.call(helper::GET_CURRENT_PID_TGID)
            .alu_imm(op::RSH, R0, 32);
        a.jmp_reg(op::JEQ, R0, R9, yes);
        a.call(helper::GET_CURRENT_TASK).mov(R8, R0);
        for _ in 0..links.most {
            // r8 = r8->real_parent (0 when unreadable: the helper zeroes what it cannot read).
            a.frame_addr(R1, i32::from(buf)).mov_imm(R2, 8);
            a.mov(R3, R8).alu_imm(op::ADD, R3, parent);
            a.call(helper::PROBE_READ_KERNEL);
            a.load(Size::DW, R8, R10, buf);
            a.jmp_imm(op::JEQ, R8, 0, no);
            // r0 = r8->tgid
            a.frame_addr(R1, i32::from(buf)).mov_imm(R2, 4);
            a.mov(R3, R8).alu_imm(op::ADD, R3, tgid);
            a.call(helper::PROBE_READ_KERNEL);
            a.load(Size::W, R0, R10, buf);
            a.jmp_reg(op::JEQ, R0, R9, yes);
            a.jmp_imm(op::JLE, R0, 1, no);
        }
        a.bind(no).mov_imm(R1, 0).ja(out);
        a.bind(yes).mov_imm(R1, 1);
        a.bind(out);
        self.put(s, rd, R1, Kind::Int(None));
        Ok(())
    }
}
