//! `ustack()` and `jstack()` records built at the probe (see `capture::kagg`): the kernel takes
//! the user stack past the framework's record, in the ring's copy only ([`UstackTail`]), in one
//! of two forms the tail's first word tells apart. Where the probe walks the user stack itself
//! (`capture::ustack_keys::emit_walk_once`, its `.eh_frame` walk or the kernel's frame-pointer
//! walk, chosen as dtrace chooses for a captured firing) the tail holds that walk's frames
//! ([`TailForm::Walked`]), and dtrace only moves them into the record. Else it holds what the
//! capture path takes for a user stack ([`TailForm::Copied`]): the kernel's frame-pointer walk
//! (`bpf_get_stack()` with `BPF_F_USER_STACK`), and the user registers with the user stack
//! above sp ([`USTACK_UNWIND_BYTES`], as `codegen` copies them for a captured firing), which
//! dtrace completes with the files' `.eh_frame` when it commits the record
//! (`provider::deliver`, the one unwinder the capture path uses). Both hold the thread's `comm`
//! (which tells dtrace whether the process exec'd since it noted its mappings). dtrace fills
//! each action's pid and program counters and cuts what was past the record, so the record is
//! the one the interpreter writes from the same frames.
//!
//! One tail serves every `ustack()` and `jstack()` of a record: the user stack does not change
//! while a clause runs. The walk takes as many frames as the probe's capture would take (see
//! [`KernelRecord::walk_user_frames`]), so dtrace chooses between the walk and the unwound stack
//! as it chooses for a captured firing.

use super::codegen::{emit_user_unwind, ProbeShape};
use super::layout::{STACK_HDR, UNWIND_HDR};
use super::record::{decode_stack, decode_unwind, UserStackCopy};
use super::spec::{KernelRecord, MAX_STACK_DEPTH, USTACK_UNWIND_BYTES};
use super::ustack_keys::UserWalk;
use crate::bpf::insn::{helper, op, Asm, Size, R0, R1, R2, R3, R4, R6, R7};
use crate::error::{LinuxError, Result};

/// `bpf_get_stack()`'s flag for the user stack.
const BPF_F_USER_STACK: i32 = 1 << 8;
/// Bytes of `comm`.
const COMM_BYTES: usize = 16;

/// What a [`UstackTail`] holds, as its first word says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TailForm {
    /// The kernel's frame-pointer walk, then the user registers and stack bytes, which dtrace
    /// unwinds with the files' `.eh_frame`.
    Copied = 1,
    /// The frames of the walk the probe made and chose (dtrace does no more).
    Walked = 2,
}

impl TailForm {
    /// The form of a tail whose probe `walked` the user stack before the record.
    pub fn of(walked: bool) -> TailForm {
        match walked {
            true => TailForm::Walked,
            false => TailForm::Copied,
        }
    }
}

/// Where the user stack of a record's `ustack()` and `jstack()` actions is taken, past the
/// framework's record (after the frames of its `stack()` actions, see `StackTail`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UstackTail {
    /// Offset of the tail, from the start of the framework's record.
    pub tail: u32,
    /// Frames the kernel's frame-pointer walk takes (at most [`MAX_STACK_DEPTH`]).
    pub walk: u32,
    /// Each action's offset of its data in the record and the frames its record holds.
    pub actions: Vec<(u32, u32)>,
}

impl UstackTail {
    /// The tail's form ([`TailForm`]).
    const FORM: usize = 0;
    /// The thread's `comm`.
    const COMM: usize = 8;
    /// The walk, as a stack is taken: its bytes (or -errno), then room for [`MAX_STACK_DEPTH`]
    /// frames.
    const WALK: usize = Self::COMM + COMM_BYTES;
    /// The registers and stack bytes for unwinding (as a captured firing's, `layout::UNWIND_HDR`),
    /// in a [`TailForm::Copied`] tail.
    const UNWIND: usize = Self::WALK + STACK_HDR + 8 * MAX_STACK_DEPTH as usize;
    /// Bytes of a [`TailForm::Copied`] tail.
    pub const BYTES: usize = Self::UNWIND + UNWIND_HDR + USTACK_UNWIND_BYTES as usize;
    /// Bytes of a [`TailForm::Walked`] tail.
    pub const WALKED_BYTES: usize = Self::UNWIND;

    /// Bytes of a tail of form `form`.
    pub fn bytes(form: TailForm) -> usize {
        match form {
            TailForm::Copied => Self::BYTES,
            TailForm::Walked => Self::WALKED_BYTES,
        }
    }

    /// Emits the code that fills the tail of the record at r7 (its framework's record at
    /// `base`), the probe's context in r6: of form [`TailForm::Walked`] when `walked` names the
    /// probe's program and the walk it made for this firing (`ustack_keys::emit_walk_once`,
    /// which found every PC placed), else [`TailForm::Copied`]. Every byte dtrace reads is
    /// written here (the helpers zero what they cannot read), so the tail needs no zeroing.
    /// Uses r0-r5 and r8.
    pub(crate) fn emit(
        &self,
        a: &mut Asm,
        base: usize,
        walked: Option<(&ProbeShape, &UserWalk)>,
    ) -> Result<()> {
        let at = base + self.tail as usize;
        let imm = |v: usize| {
            i32::try_from(v).map_err(|_| LinuxError::Asm("user stack tail out of range".into()))
        };
        let off = |v: usize| {
            i16::try_from(v).map_err(|_| LinuxError::Asm("user stack tail out of range".into()))
        };
        let walk = self.walk.clamp(1, MAX_STACK_DEPTH);
        let form = TailForm::of(walked.is_some());
        a.store_imm(Size::DW, R7, off(at + Self::FORM)?, form as i32);
        a.mov(R1, R7).alu_imm(op::ADD, R1, imm(at + Self::COMM)?);
        a.mov_imm(R2, COMM_BYTES as i32)
            .call(helper::GET_CURRENT_COMM);
        if let Some((shape, w)) = walked {
            // (The scratch is always there: a failed walk else.)
            let missing = a.label();
            a.store_imm(Size::DW, R7, off(at + Self::WALK)?, -libc::EFAULT);
            super::ustack_keys::emit_copy_walk(a, shape, w, (R7, at + Self::WALK), walk, missing)?;
            a.bind(missing);
            return Ok(());
        }
        a.mov(R1, R6);
        a.mov(R2, R7)
            .alu_imm(op::ADD, R2, imm(at + Self::WALK + STACK_HDR)?);
        a.mov_imm(R3, imm(8 * walk as usize)?)
            .mov_imm(R4, BPF_F_USER_STACK)
            .call(helper::GET_STACK);
        a.store(Size::DW, R7, off(at + Self::WALK)?, R0);
        emit_user_unwind(a, at + Self::UNWIND, USTACK_UNWIND_BYTES as usize)
    }

    /// What the kernel took into this tail of framework record `data` (the ring's copy, the
    /// tail still there): `None` when the record is too short to hold it or its form is unknown.
    pub fn read(&self, data: &[u8]) -> Option<TakenUserStack> {
        let at = self.tail as usize;
        let form = data.get(at + Self::FORM..at + Self::FORM + 8)?;
        let form = u64::from_ne_bytes(form.try_into().ok()?);
        let copied = match form {
            f if f == TailForm::Copied as u64 => true,
            f if f == TailForm::Walked as u64 => false,
            _ => return None,
        };
        // A failed walk (its -errno) holds no frame, as a captured firing's.
        let walked = decode_stack(
            data,
            Some((at + Self::WALK, MAX_STACK_DEPTH as usize)),
            true,
        )
        .ok()??
        .unwrap_or_default();
        let comm = data.get(at + Self::COMM..at + Self::COMM + COMM_BYTES)?;
        let end = comm.iter().position(|b| *b == 0).unwrap_or(COMM_BYTES);
        let unwind = match copied {
            true => decode_unwind(
                data,
                Some((at + Self::UNWIND, USTACK_UNWIND_BYTES as usize)),
            )
            .ok()??
            .ok(),
            false => None,
        };
        Some(TakenUserStack {
            walked,
            execname: String::from_utf8_lossy(&comm[..end]).into_owned(),
            unwind,
        })
    }
}

/// What the kernel took for a record's user stacks (see [`UstackTail::read`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TakenUserStack {
    /// The walk: the kernel's frame-pointer walk of a [`TailForm::Copied`] tail (empty when it
    /// failed), the probe's chosen walk of a [`TailForm::Walked`] one.
    pub walked: Vec<u64>,
    /// The thread's `execname`.
    pub execname: String,
    /// The registers and stack bytes for unwinding (`None`: a walked tail, a thread without
    /// user registers, or the stack could not be read).
    pub unwind: Option<UserStackCopy>,
}

impl KernelRecord {
    /// Where the user stack of the record's `ustack()` and `jstack()` actions is taken, when it
    /// has some: after the framework's record and its `stack()` actions' frames.
    pub fn ustack_tail(&self) -> Option<UstackTail> {
        let actions: Vec<(u32, u32)> = self
            .actions
            .iter()
            .filter_map(|a| Some((a.offset, a.ustack?)))
            .collect();
        if actions.is_empty() {
            return None;
        }
        let tail = u32::try_from(self.stack_bytes()).ok()?;
        Some(UstackTail {
            tail,
            walk: self.ustack_walk,
            actions,
        })
    }

    /// Has the kernel's frame-pointer walk of the record's user stack take `frames` frames (the
    /// probe's capture's, so the walk is the one dtrace completes for a captured firing), at least
    /// as many as its actions record.
    pub fn walk_user_frames(&mut self, frames: u32) {
        if self.records_user_stack() {
            self.ustack_walk = self.ustack_walk.max(frames).min(MAX_STACK_DEPTH);
        }
    }

    /// Whether the record holds `ustack()` or `jstack()` actions (a user stack's tail).
    pub fn records_user_stack(&self) -> bool {
        self.actions.iter().any(|a| a.ustack.is_some())
    }
}
