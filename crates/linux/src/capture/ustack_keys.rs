//! `ustack()` and `jstack()` aggregation keys walked at the probe as dtrace walks them: once per
//! firing, before any clause running at the probe does anything that lasts (after the first
//! clause's predicate when it is the only one that walks, else before it: `kagg::WalkAt`)
//! ([`emit_walk_once`]), the probe copies the user registers and stack
//! (`codegen::emit_user_unwind`) and walks the copy with the files' `.eh_frame` rows
//! (`capture::uunwind`, the process's ranges found by its id); unless that walk reached the
//! outermost frame, it takes the kernel's frame-pointer walk as deep as the probe's capture
//! takes it too. The key's frames are then those of the walk that reached the outermost frame,
//! or else of the longer walk, as `provider::deliver::ustack::complete_walk` chooses for a
//! captured firing ([`emit_key_frames`]). A PC no range of the process holds (a process or a library
//! dtrace has not loaded yet) hands the firing over to dtrace whole (`kagg::HANDED_OVER`): every
//! clause of the probe runs there on the captured firing, its aggregations merged with the
//! kernel's, and dtrace loads the process's ranges (`provider::ustack_maps`) so later firings
//! are walked here. Where D variables live in the kernel at the probe the firing cannot go to
//! dtrace whole (its clauses would run there without them): the walk is marked unplaced
//! ([`emit_mark_unplaced`]), the clauses run here, and each aggregation update with a user stack
//! key goes to dtrace alone with the stack the probe took (`layout::KIND_AGG_UPDATE`,
//! [`emit_copy_taken`]), which walks it as it walks a captured firing's and aggregates it with
//! the kernel's (`provider::kagg::KernelAggState::defer`).
//!
//! Everything lives in one per-CPU scratch value (slot 1 for programs of perf events, as the key
//! scratch): the choice, the frame-pointer walk's result, the copy, the walk's output.

use super::codegen::{emit_user_unwind, ProbeShape};
use super::layout::UNWIND_HDR;
use super::spec::{MAX_STACK_DEPTH, USTACK_UNWIND_BYTES};
use super::uunwind::{self, WalkMaps};
use crate::bpf::insn::{helper, op, Asm, Label, Size, R0, R1, R10, R2, R3, R4, R6, R7};
use crate::bpf::Insn;
use crate::error::{LinuxError, Result};
use crate::symbols::unwind_rows::ROW_SEARCH_STEPS;

/// Ranges of one process the walk searches (a process with more is never placed: its firings
/// go to dtrace).
pub const RANGE_CAPACITY: u32 = 1 << 10;

/// Where the walk at a probe finds its maps (see `provider::ustack_maps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserWalk {
    /// The array of every file's rows.
    pub rows: i32,
    /// The hash map of each process's ranges, by its id.
    pub ranges: i32,
    /// The per-CPU array of two [`SCRATCH_BYTES`] values.
    pub scratch: i32,
    /// Frames the kernel's frame-pointer walk takes: as many as the probe's capture takes.
    pub fp_frames: u32,
    /// The maps of the walk's way to a PC by its file (`uunwind::FileRoute`), if it takes it
    /// (only where its frames are callbacks).
    pub files: Option<RouteMaps>,
    /// How the walk goes from frame to frame.
    pub frames: uunwind::FrameLoop,
}

impl UserWalk {
    /// The walk a probe's program whose own code takes `depth` bytes of stack can load with on
    /// the running kernel, if not this one: by callbacks without the file route, or by the
    /// bounded loop (`features::loop_beside`, `features::file_route_beside`).
    pub fn beside(&self, depth: u32) -> Option<UserWalk> {
        let mut w = *self;
        if w.frames == uunwind::FrameLoop::Callback && crate::features::loop_beside(depth).is_err()
        {
            w.frames = uunwind::FrameLoop::Bounded;
        }
        if w.files.is_some()
            && (w.frames != uunwind::FrameLoop::Callback
                || !crate::features::file_route_beside(depth))
        {
            w.files = None;
        }
        (w != *self).then_some(w)
    }
}

/// The maps of the walk's way to a PC by its file (see `uunwind::FileRoute`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteMaps {
    /// The files map.
    pub files: i32,
    /// The array holding the scratch's keys.
    pub keys: i32,
    /// Where a walk that took the route notes its process.
    pub routed: i32,
}

/// The scratch value: 1 when the keys take the `.eh_frame` walk's frames, else 0.
const CHOICE: usize = 0;
/// The frame-pointer walk: its result (bytes or -errno), then its frames.
const FP: usize = 8;
/// The copied registers and stack.
const COPY: usize = FP + 8 + 8 * MAX_STACK_DEPTH as usize;
const WINDOW: usize = USTACK_UNWIND_BYTES as usize;
/// The walk's output (`uunwind::read_walk`).
const OUT: usize = COPY + UNWIND_HDR + WINDOW;
/// Bytes of a scratch value.
pub const SCRATCH_BYTES: usize = OUT + uunwind::out_bytes(MAX_STACK_DEPTH);

/// Bytes of the frame-pointer walk and the copy together, as an aggregation update the probe
/// defers to dtrace carries them (`layout::kupdate::STACK`, see [`emit_copy_taken`]).
pub const TAKEN_BYTES: usize = OUT - FP;
/// Where the copy starts in those bytes.
pub const TAKEN_WALK: usize = COPY - FP;
/// The value of the choice that marks a walk the probe could not place, where the firing cannot
/// go to dtrace whole (D variables live in the kernel at the probe): its aggregation updates with
/// user stack keys go to dtrace, which walks the stack ([`emit_mark_unplaced`]).
const CHOICE_UNPLACED: i32 = 2;

/// A stack slot the walk leaves alone (inside the fragments' frame, free before any clause
/// runs), where the probe's context waits while the walk uses r6.
const SAVED_CTX: i16 = -64;
/// The lookup key of the scratch value.
const SCRATCH_KEY: i16 = -72;

fn off(v: usize) -> Result<i16> {
    i16::try_from(v).map_err(|_| LinuxError::Asm(format!("user walk offset {v} out of range")))
}

/// The scratch value a program of `shape` uses (its key): 1 for programs of perf events, which
/// may interrupt the others, else 0.
fn scratch_slot(shape: &ProbeShape) -> i32 {
    i32::from(shape.ctx == super::codegen::CtxKind::PerfEvent)
}

/// Points r0 at this program's scratch value (its key built at stack slot `key`), or jumps to
/// `missing` (it is always there). Uses r0-r5.
fn emit_scratch_at(a: &mut Asm, shape: &ProbeShape, w: &UserWalk, key: i16, missing: Label) {
    a.store_imm(Size::W, R10, key, scratch_slot(shape));
    a.ld_map_fd(R1, w.scratch)
        .frame_addr(R2, i32::from(key))
        .call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, missing);
}

fn emit_scratch(a: &mut Asm, shape: &ProbeShape, w: &UserWalk, missing: Label) {
    emit_scratch_at(a, shape, w, SCRATCH_KEY, missing);
}

/// Leaves in r0 the firing's `ustackdepth` (`depth`) or `ucaller`, from the walk
/// [`emit_walk_once`] made: the frames of the walk chosen, the second of them (0 when there is
/// none), as dtrace takes them from the stack it completed. The scratch's key is built at stack
/// slot `key`. Uses r0-r5.
pub fn emit_stack_value(
    a: &mut Asm,
    shape: &ProbeShape,
    w: &UserWalk,
    depth: bool,
    key: i16,
) -> Result<()> {
    let (none, fp, done) = (a.label(), a.label(), a.label());
    emit_scratch_at(a, shape, w, key, none);
    a.load(Size::DW, R1, R0, off(CHOICE)?);
    a.jmp_imm(op::JEQ, R1, 0, fp);
    // Past their count, both walks' frames are zero.
    if depth {
        a.load(Size::DW, R0, R0, off(OUT + uunwind::OUT_COUNT)?);
    } else {
        a.load(Size::DW, R0, R0, off(OUT + uunwind::OUT_FRAMES + 8)?);
    }
    a.ja(done);
    a.bind(fp);
    if depth {
        let counted = a.label();
        a.load(Size::DW, R0, R0, off(FP)?);
        a.jmp_imm(op::JSGE, R0, 0, counted);
        a.mov_imm(R0, 0);
        a.bind(counted);
        a.alu_imm(op::RSH, R0, 3);
    } else {
        a.load(Size::DW, R0, R0, off(FP + 16)?);
    }
    a.ja(done);
    a.bind(none);
    a.mov_imm(R0, 0);
    a.bind(done);
    Ok(())
}

/// Emits the firing's walk (the probe's context in r6, kept): jumps to `handover` when a PC is
/// unplaced (or the scratch is missing), else falls through with the choice made. Uses r0-r9.
pub fn emit_walk_once(
    a: &mut Asm,
    shape: &ProbeShape,
    w: &UserWalk,
    handover: Label,
) -> Result<()> {
    let fp_frames = w.fp_frames.clamp(1, MAX_STACK_DEPTH);
    emit_scratch(a, shape, w, handover);
    a.mov(R7, R0);
    emit_user_unwind(a, COPY, WINDOW)?;
    a.store(Size::DW, R10, SAVED_CTX, R6);
    // Zeros past the walk's frames (the output keeps an earlier firing's): the walk writes
    // exactly the frames it counts.
    for i in 0..MAX_STACK_DEPTH as usize {
        a.store_imm(Size::DW, R7, off(OUT + uunwind::OUT_FRAMES + 8 * i)?, 0);
    }
    let frames = w.frames;
    // By the file only where the frames are callbacks (see `features::file_route_beside`).
    let files = w
        .files
        .filter(|_| frames == uunwind::FrameLoop::Callback)
        .zip(crate::btf::VmaFileOffsets::of_running_kernel())
        .map(|(m, vma)| uunwind::FileRoute {
            files: m.files,
            scratch: w.scratch,
            keys: m.keys,
            routed: m.routed,
            key_at: 4 * scratch_slot(shape),
            vma,
            page_shift: crate::mapping::page_size().trailing_zeros() as i32,
        });
    let maps = WalkMaps {
        rows: w.rows,
        ranges: w.ranges,
        by_process: true,
        range_capacity: RANGE_CAPACITY,
        row_steps: ROW_SEARCH_STEPS,
        files,
    };
    uunwind::emit_walk(a, &maps, COPY, WINDOW, OUT, MAX_STACK_DEPTH, frames)?;
    a.load(Size::DW, R6, R10, SAVED_CTX);
    // The choice: the walk's frames when it reached the outermost frame (no frame-pointer walk
    // is taken then: in code without frame pointers it only follows what `rbp` holds, often
    // into a fault), or went further than the frame pointers.
    let fp_walk = a.label();
    a.store_imm(Size::DW, R7, off(CHOICE)?, 1);
    a.load(Size::DW, R1, R7, off(OUT + uunwind::OUT_STATUS)?);
    a.jmp_imm(op::JEQ, R1, uunwind::STATUS_OUTERMOST, fp_walk);
    a.mov(R1, R6);
    a.mov(R2, R7).alu_imm(op::ADD, R2, i32::from(off(FP + 8)?));
    a.mov_imm(R3, 8 * fp_frames as i32)
        .mov_imm(R4, 1 << 8)
        .call(helper::GET_STACK);
    a.store(Size::DW, R7, off(FP)?, R0);
    a.store_imm(Size::DW, R7, off(CHOICE)?, 0);
    a.load(Size::DW, R1, R7, off(OUT + uunwind::OUT_STATUS)?);
    a.jmp_imm(op::JEQ, R1, uunwind::STATUS_UNPLACED, handover);
    a.jmp_imm(op::JNE, R1, uunwind::STATUS_DONE, fp_walk);
    a.load(Size::DW, R1, R7, off(OUT + uunwind::OUT_COUNT)?);
    a.load(Size::DW, R2, R7, off(FP)?);
    let counted = a.label();
    a.jmp_imm(op::JSGE, R2, 0, counted);
    a.mov_imm(R2, 0);
    a.bind(counted);
    a.alu_imm(op::RSH, R2, 3);
    a.jmp_reg(op::JLE, R1, R2, fp_walk);
    a.store_imm(Size::DW, R7, off(CHOICE)?, 1);
    a.bind(fp_walk);
    Ok(())
}

/// Marks this firing's walk unplaced (see [`CHOICE_UNPLACED`]); jumps to `missing` when the
/// scratch is missing (it never is). Uses r0-r5.
pub fn emit_mark_unplaced(
    a: &mut Asm,
    shape: &ProbeShape,
    w: &UserWalk,
    missing: Label,
) -> Result<()> {
    emit_scratch(a, shape, w, missing);
    a.store_imm(Size::DW, R0, off(CHOICE)?, CHOICE_UNPLACED);
    Ok(())
}

/// Jumps to `placed` unless this firing's walk was marked unplaced ([`emit_mark_unplaced`]).
/// Uses r0-r5.
pub fn emit_unplaced_check(
    a: &mut Asm,
    shape: &ProbeShape,
    w: &UserWalk,
    placed: Label,
) -> Result<()> {
    emit_scratch(a, shape, w, placed);
    a.load(Size::DW, R1, R0, off(CHOICE)?);
    a.jmp_imm(op::JNE, R1, CHOICE_UNPLACED, placed);
    Ok(())
}

/// Copies the frame-pointer walk and the copy of the user stack ([`TAKEN_BYTES`]) to `at` of the
/// memory `dst` points to (a record in the ring); jumps to `missing` when the scratch is missing
/// (it never is). Uses r0-r5.
pub fn emit_copy_taken(
    a: &mut Asm,
    shape: &ProbeShape,
    w: &UserWalk,
    (dst, at): (crate::bpf::insn::Reg, usize),
    missing: Label,
) -> Result<()> {
    emit_scratch(a, shape, w, missing);
    let imm = |v: usize| {
        i32::try_from(v).map_err(|_| LinuxError::Asm("user stack copy out of range".into()))
    };
    a.mov(R3, R0).alu_imm(op::ADD, R3, imm(FP)?);
    a.mov(R1, dst).alu_imm(op::ADD, R1, imm(at)?);
    a.mov_imm(R2, imm(TAKEN_BYTES)?)
        .call(helper::PROBE_READ_KERNEL);
    Ok(())
}

/// Copies the firing's user stack as its walk chose it ([`emit_walk_once`]) to `at` of the memory
/// `dst` points to (a record in the ring), as a stack is taken (`layout::STACK_HDR`): its bytes
/// (-errno of a failed frame-pointer walk), at most `frames` frames', then `frames` program
/// counters: the `.eh_frame` walk's when it was chosen, else the frame-pointer walk's. Jumps to
/// `missing` when the scratch is missing (it never is). Uses r0-r5.
pub fn emit_copy_walk(
    a: &mut Asm,
    shape: &ProbeShape,
    w: &UserWalk,
    (dst, at): (crate::bpf::insn::Reg, usize),
    frames: u32,
    missing: Label,
) -> Result<()> {
    let frames = frames.clamp(1, MAX_STACK_DEPTH) as i32;
    let imm = |v: usize| {
        i32::try_from(v).map_err(|_| LinuxError::Asm("user stack copy out of range".into()))
    };
    let (fp, copy, within) = (a.label(), a.label(), a.label());
    emit_scratch(a, shape, w, missing);
    a.load(Size::DW, R1, R0, off(CHOICE)?);
    a.jmp_imm(op::JEQ, R1, 0, fp);
    a.load(Size::DW, R1, R0, off(OUT + uunwind::OUT_COUNT)?)
        .alu_imm(op::LSH, R1, 3);
    a.mov(R3, R0)
        .alu_imm(op::ADD, R3, imm(OUT + uunwind::OUT_FRAMES)?);
    a.ja(copy);
    a.bind(fp);
    a.load(Size::DW, R1, R0, off(FP)?);
    a.mov(R3, R0).alu_imm(op::ADD, R3, imm(FP + 8)?);
    a.bind(copy);
    // Past `frames`, the tail holds what the ring held before.
    a.jmp_imm(op::JSLE, R1, 8 * frames, within);
    a.mov_imm(R1, 8 * frames);
    a.bind(within);
    a.store(Size::DW, dst, off(at)?, R1);
    a.mov(R1, dst).alu_imm(op::ADD, R1, imm(at + 8)?);
    a.mov_imm(R2, 8 * frames).call(helper::PROBE_READ_KERNEL);
    Ok(())
}

/// Writes `frames` program counters of the firing's user stack at `at` of the key the stack slot
/// `keyptr` points to: the `.eh_frame` walk's when it was chosen (see [`emit_walk_once`]), else
/// the kernel's frame-pointer walk of `frames` (`fp_walk` emits it). With `deep`, the walk's
/// frames are noted there as deep or not for an aggregation's short maps
/// (`kagg::emit_deep_flag`; `fp_walk` notes its own), and a walk found shallow writes only the
/// frames those maps' keys hold. Uses r0-r5.
pub fn emit_key_frames(
    a: &mut Asm,
    shape: &ProbeShape,
    w: &UserWalk,
    (keyptr, at): (i16, i16),
    (frames, deep): (u32, Option<i16>),
    fp_walk: impl FnOnce(&mut Asm) -> Result<()>,
) -> Result<()> {
    let (fp, done) = (a.label(), a.label());
    emit_scratch(a, shape, w, fp);
    a.load(Size::DW, R1, R0, off(CHOICE)?);
    a.jmp_imm(op::JEQ, R1, 0, fp);
    let copy = |a: &mut Asm, words: std::ops::Range<usize>| -> Result<()> {
        for i in words {
            a.load(Size::DW, R1, R0, off(OUT + uunwind::OUT_FRAMES + 8 * i)?);
            let to = i16::try_from(i32::from(at) + 8 * i as i32)
                .map_err(|_| LinuxError::Asm("user stack key out of range".into()))?;
            a.store(Size::DW, R2, to, R1);
        }
        Ok(())
    };
    let frames = frames.min(MAX_STACK_DEPTH) as usize;
    a.load(Size::DW, R2, R10, keyptr);
    match deep {
        None => copy(a, 0..frames)?,
        Some(flag) => {
            // A walk no deeper than the short maps' frames leaves the rest of the key as it
            // was: those maps' keys end before it (and a deferred update's frames are
            // dtrace's).
            let short = crate::capture::spec::SHORT_STACK_WORDS;
            let head = frames.min(short as usize);
            copy(a, 0..head)?;
            a.load(Size::DW, R1, R0, off(OUT + uunwind::OUT_COUNT)?);
            super::kagg::emit_deep_flag(a, (keyptr, flag), R1, short as i32);
            a.jmp_imm(op::JSLE, R1, short as i32, done);
            copy(a, head..frames)?;
        }
    }
    a.ja(done);
    a.bind(fp);
    fp_walk(a)?;
    a.bind(done);
    Ok(())
}

/// The program run at each exec and at each process's end (its main thread's exit): forgets the
/// process's ranges (its mappings are no longer those dtrace loaded) and notes when, in `ends`
/// (by process id, the time of `bpf_ktime_get_ns()`), so dtrace does not load ranges it read
/// before then (see `provider::ustack_maps`). Exits of other threads change nothing.
pub fn forget_program(ranges: i32, ends: i32, exits: bool) -> Result<Vec<Insn>> {
    let mut a = Asm::new();
    let out = a.label();
    a.call(helper::GET_CURRENT_PID_TGID);
    a.mov(R1, R0).alu_imm(op::RSH, R1, 32);
    a.store(Size::W, R10, -8, R1);
    if exits {
        a.mov(R2, R0)
            .alu_imm(op::LSH, R2, 32)
            .alu_imm(op::RSH, R2, 32);
        a.jmp_reg(op::JNE, R1, R2, out);
    }
    a.ld_map_fd(R1, ranges)
        .frame_addr(R2, -8)
        .call(helper::MAP_DELETE_ELEM);
    a.call(helper::KTIME_GET_NS).store(Size::DW, R10, -16, R0);
    a.ld_map_fd(R1, ends)
        .frame_addr(R2, -8)
        .frame_addr(R3, -16)
        .mov_imm(R4, 0)
        .call(helper::MAP_UPDATE_ELEM);
    a.bind(out).mov_imm(R0, 0).exit();
    Ok(a.finish()?)
}

#[cfg(test)]
mod tests;
