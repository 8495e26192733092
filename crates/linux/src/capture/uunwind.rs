//! The `.eh_frame` walk of a user stack at the probe: the code of [`emit_walk`] walks the frames
//! from the registers and the stack bytes the probe copied (`codegen::emit_user_unwind`) with the
//! rules dtrace compiled into rows (`symbols::unwind_rows`: the rows of every file in one array
//! map, the process's mapped ranges in another), as `unwind_rows::walk`, the reference, walks the
//! same layout: for each frame, a search of the ranges (skipped where the last frame's range
//! holds the PC) and then of the file's rows, halving steps up to a fixed count (in the bounded
//! loop without branches: each step adds its half or 0, as `capture::kstack` searches); the
//! CFA, return address and saved `rbp` from the row, or one frame-pointer step
//! where no row describes the PC; saved values read only from the copied bytes; the walk stops
//! where the reference stops (a stop row, a value past the copy, the stack pointer not moving up,
//! a zero PC, the frame limit). A PC no range of the process holds (or any PC of a process
//! dtrace has not loaded) is looked up by the file it is in where the kernel can
//! ([`FileRoute`]); one no known file holds ends the walk *unplaced*: dtrace must walk that stack
//! itself.
//!
//! Where the kernel lets a probe's program loop with `bpf_loop`, each frame is a call of one
//! callback, whose code the verifier follows once ([`FrameLoop::Callback`]); elsewhere the frame
//! loop is a bounded loop ([`FrameLoop::Bounded`]) that keeps the walk's state in the output
//! (every register cleared at its head but the frame count, a constant to the verifier), so the
//! states of every way through one frame meet there and the verifier follows each frame once:
//! 127 times the frame's code, a quarter of a second a program, which a glob of hundreds of
//! probes (`syscall:::entry`) pays for each.

use super::layout::UNWIND_HDR;
use crate::bpf::insn::{helper, op, Asm, Label, Reg, Size, R0, R1, R10, R2, R3, R4, R5, R6, R7};
use crate::bpf::insn::{update_flag, R8, R9};
use crate::error::{LinuxError, Result};
use crate::symbols::unwind::Unwound;
use crate::symbols::unwind_rows::{
    Range, Row, FILE_PIECES, FLAG_FP_SAVED, KIND_CFA_FP, KIND_CFA_SP, KIND_NO_ENTRY,
    KIND_OUTERMOST, PIECE_BYTES, RANGE_BYTES, ROW_BYTES,
};

/// Where the walk finds its maps and how far its searches go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkMaps {
    /// The array of rows (4-byte keys, [`ROW_BYTES`] values).
    pub rows: i32,
    /// The ranges: one value, the count (u64) then `range_capacity` ranges of [`RANGE_BYTES`].
    pub ranges: i32,
    /// Whether [`WalkMaps::ranges`] is a hash map of such values keyed by the process's id
    /// (`tgid`, 4 bytes): a process without one is unplaced. Else an array of one value.
    pub by_process: bool,
    /// Ranges the value holds (a power of two).
    pub range_capacity: u32,
    /// Halving steps of a file's rows search: enough for the file with the most rows.
    pub row_steps: u32,
    /// Where a PC no range of the process holds (or of a process without ranges) is looked up
    /// by its file, if anywhere.
    pub files: Option<FileRoute>,
}

/// The way to a PC's rows by the file it is in, without the process's ranges: `bpf_find_vma()`
/// finds the mapping holding the PC, whose file (device and inode) keys the files map, each
/// file's pieces turning the PC's offset in it into the address its rows are searched with
/// (`unwind_rows::file_value`). A process dtrace has not loaded yet is then walked at the probe
/// when the files it maps are known from other processes (a shell loop's commands, a build's
/// compilers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileRoute {
    /// The files map (`unwind_rows::FILE_KEY_BYTES` keys, `FILE_VALUE_BYTES` values).
    pub files: i32,
    /// The map of the value r7 points to, and where its key is: the callback of
    /// `bpf_find_vma()`, which has no stack to spare (the probe's code fills it), finds the
    /// value again with a key in an array map's value (`keys`, at byte `key_at`).
    pub scratch: i32,
    /// The array map whose first value holds the key (see [`FileRoute::scratch`]).
    pub keys: i32,
    /// The key's byte offset in that value.
    pub key_at: i32,
    /// The hash map where a walk that took this route notes its process (its id, 4 bytes, to
    /// an 8-byte value; dtrace then loads the process's ranges, the cheaper way).
    pub routed: i32,
    /// The kernel's offsets of what a mapping says of its file.
    pub vma: crate::btf::VmaFileOffsets,
    /// log2 of the page size (`vm_pgoff` counts pages).
    pub page_shift: i32,
}

/// The walk's result, as the code leaves it in its output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Walked {
    /// The frames, and whether they end at the outermost frame.
    Frames(Unwound),
    /// A PC no range holds: dtrace walks this stack.
    Unplaced,
    /// No stack was copied (no user registers): nothing to walk.
    NoCopy,
}

/// The output's status words.
pub(crate) const STATUS_DONE: i32 = 0;
pub(crate) const STATUS_UNPLACED: i32 = 1;
const STATUS_NO_COPY: i32 = 2;
/// Done at the outermost frame (`unwind::Step::Outermost`).
pub(crate) const STATUS_OUTERMOST: i32 = 3;

/// The output, at its offset in the value r7 points to: status, frame count, the walk's pc, sp
/// and fp, the walk's own words, then the frames.
pub(crate) const OUT_STATUS: usize = 0;
pub(crate) const OUT_COUNT: usize = 8;
const OUT_PC: usize = 16;
const OUT_SP: usize = 24;
const OUT_FP: usize = 32;
/// The words the searches keep between their steps (in the value, not the stack: a callback of
/// `bpf_loop` with a stack of its own is refused beside a probe's full one).
const OUT_WORDS: usize = 40;
pub(crate) const OUT_FRAMES: usize = OUT_WORDS + 8 * WORDS;

/// The walk's words, by index from [`OUT_WORDS`]: the rows left to search and half of them, a
/// map key, the address looked up; the start and page offset of the mapping holding it, and
/// its file's key in the files map (two words: see [`FileRoute`]); the range the last frame's
/// PC was found in (see [`emit_range_search`]): its start and end, what turns an address into
/// its file's terms, its file's first row and their count; whether the walk took the file
/// route.
const WORD_LEN: usize = 0;
const WORD_HALF: usize = 1;
const WORD_KEY: usize = 2;
const WORD_LOOKUP: usize = 3;
const WORD_VM_START: usize = 4;
const WORD_VM_PGOFF: usize = 5;
const WORD_FILE_DEV: usize = 6;
const WORD_FILE_INO: usize = 7;
const WORD_LAST_START: usize = 8;
const WORD_LAST_END: usize = 9;
const WORD_LAST_BIAS: usize = 10;
const WORD_LAST_FIRST: usize = 11;
const WORD_LAST_COUNT: usize = 12;
/// Non-zero once a PC was found by its file ([`FileRoute`]).
const WORD_ROUTED: usize = 13;
/// The row cache's slot of the address looked up, and its file's first row (see
/// [`emit_row_cache_lookup`]).
const WORD_CACHE_SLOT: usize = 14;
const WORD_CACHE_FIRST: usize = 15;
/// The range found before the last one, as the last one's five words (a stack goes back and
/// forth between two files most often: a program and its C library).
const WORD_PREV_START: usize = 16;
const WORDS: usize = 21;
/// The words of a range found, from its start's: start, end, bias, first row, count.
const RANGE_WORDS: usize = 5;

/// Slots of the row cache (a power of two), after the frames: each the address looked up (in
/// its file's terms), its file's first row plus one (0: empty), then the row found.
const CACHE_SLOTS: usize = 64;
const CACHE_ENTRY: usize = 16 + ROW_BYTES;
const CACHE_BYTES: usize = CACHE_SLOTS * CACHE_ENTRY;

/// The stack slot where the walk on callbacks keeps r7 for them (clear of the capture's slots at
/// -8 and -16).
const SLOT_VALUE: i16 = -24;

/// Bytes of the output for a walk of `max` frames.
pub const fn out_bytes(max: u32) -> usize {
    OUT_FRAMES + 8 * max as usize + CACHE_BYTES
}

/// The value of the ranges map for `ranges` (sorted, disjoint) and its capacity (a power of two,
/// at least `ranges.len()`): the count, then the ranges, then zeros.
pub fn ranges_value(ranges: &[Range]) -> (Vec<u8>, u32) {
    let capacity = ranges.len().max(1).next_power_of_two();
    let mut v = Vec::with_capacity(8 + capacity * RANGE_BYTES);
    v.extend_from_slice(&(ranges.len() as u64).to_le_bytes());
    for r in ranges {
        v.extend_from_slice(&r.to_bytes());
    }
    v.resize(8 + capacity * RANGE_BYTES, 0);
    (v, capacity as u32)
}

/// Halving steps that search `n` sorted items.
pub fn steps_for(n: usize) -> u32 {
    n.max(1).next_power_of_two().trailing_zeros()
}

/// Reads back what the code left at `data` (the output, `max` frames).
pub fn read_walk(data: &[u8], max: u32) -> Option<Walked> {
    let word = |o: usize| {
        data.get(o..o + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    };
    match word(OUT_STATUS)? {
        s if s == STATUS_DONE as u64 || s == STATUS_OUTERMOST as u64 => {
            let n = usize::try_from(word(OUT_COUNT)?).ok()?.min(max as usize);
            let frames = (0..n)
                .map(|i| word(OUT_FRAMES + 8 * i))
                .collect::<Option<Vec<u64>>>()?;
            Some(Walked::Frames(Unwound {
                frames,
                outermost: s == STATUS_OUTERMOST as u64,
            }))
        }
        s if s == STATUS_UNPLACED as u64 => Some(Walked::Unplaced),
        _ => Some(Walked::NoCopy),
    }
}

fn imm(v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| LinuxError::Asm(format!("user unwind offset {v} out of range")))
}

fn off(v: usize) -> Result<i16> {
    i16::try_from(v).map_err(|_| LinuxError::Asm(format!("user unwind offset {v} out of range")))
}

/// How the walk goes from one frame to the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameLoop {
    /// A loop the verifier follows frame by frame (any kernel; a walk of 127 frames costs it
    /// some 300,000 instructions, a quarter of a second a program).
    Bounded,
    /// `bpf_loop` calling back one frame's code, which the verifier follows once (Linux 5.17,
    /// where its callback may run beside the probe's stack: `features::loop_at_probe`).
    Callback,
}

impl FrameLoop {
    /// The loop a probe's program walks with first on the running kernel: callbacks where it
    /// has `bpf_loop`. A kernel that counts their frame on top of the probe's stack (Linux
    /// 6.1) may refuse them beside a program's whole stack: the program is then generated again
    /// with the bounded loop (`codegen::gen_capture_reporting`, `features::loop_beside`).
    pub fn at_probe() -> FrameLoop {
        if crate::features::have_bpf_loop() {
            FrameLoop::Callback
        } else {
            FrameLoop::Bounded
        }
    }
}

/// The walk's offsets in the value r7 points to, checked once (the frame's code is emitted
/// where it cannot fail: inside a callback's body).
#[derive(Clone, Copy, Debug)]
struct Offsets {
    /// Whether the searches' steps branch (on callbacks, whose code the verifier follows once)
    /// rather than add a half or 0 (the bounded loop, whose frames' states must meet).
    branches: bool,
    /// The copy: its length word, then pc, sp and fp, then the stack bytes.
    copy: i16,
    copy_bytes: i16,
    /// The last offset in the copied bytes an 8-byte read may start at.
    window_last: i32,
    out_status: i16,
    out_count: i16,
    out_pc: i16,
    out_sp: i16,
    out_fp: i16,
    /// The walk's words.
    words: [i16; WORDS],
    out_frames: i16,
    /// The row cache (walks on callbacks only: see [`emit_row_cache_lookup`]).
    cache: i16,
    max: i32,
    range_capacity: i32,
    range_mask: i32,
}

impl Offsets {
    fn new(
        maps: &WalkMaps,
        frames: FrameLoop,
        copy: usize,
        window: usize,
        out: usize,
        max: u32,
    ) -> Result<Offsets> {
        if !maps.range_capacity.is_power_of_two() || window < 8 {
            return Err(LinuxError::Asm("user unwind: bad layout".into()));
        }
        // The copy's words (at 8 to 24) fit when its bytes' start does.
        off(copy + 24)?;
        Ok(Offsets {
            branches: frames == FrameLoop::Callback,
            copy: off(copy)?,
            copy_bytes: off(copy + UNWIND_HDR)?,
            window_last: imm(window - 8)?,
            out_status: off(out + OUT_STATUS)?,
            out_count: off(out + OUT_COUNT)?,
            out_pc: off(out + OUT_PC)?,
            out_sp: off(out + OUT_SP)?,
            out_fp: off(out + OUT_FP)?,
            words: {
                let mut w = [0i16; WORDS];
                for (i, slot) in w.iter_mut().enumerate() {
                    *slot = off(out + OUT_WORDS + 8 * i)?;
                }
                w
            },
            out_frames: off(out + OUT_FRAMES)?,
            cache: {
                off(out + out_bytes(max))?;
                off(out + OUT_FRAMES + 8 * max as usize)?
            },
            max: imm(max as usize)?,
            range_capacity: imm(maps.range_capacity as usize)?,
            range_mask: imm(maps.range_capacity as usize - 1)?,
        })
    }
}

/// Emits the walk of up to `max` frames over the copy at `copy` of the value r7 points to
/// (`UNWIND_HDR` then `window` bytes, as `emit_user_unwind` writes them), leaving the result at
/// `out` of it (see [`read_walk`]), going from frame to frame as `frames` says. Uses r0-r9 but
/// r7, and the stack slot -24.
pub fn emit_walk(
    a: &mut Asm,
    maps: &WalkMaps,
    copy: usize,
    window: usize,
    out: usize,
    max: u32,
    frames: FrameLoop,
) -> Result<()> {
    let o = Offsets::new(maps, frames, copy, window, out, max)?;
    let (no_copy, walked, end) = (a.label(), a.label(), a.label());
    // No copy (no user registers, or an unreadable stack): nothing to walk.
    a.load(Size::DW, R1, R7, o.copy);
    a.jmp_imm(op::JSLE, R1, 0, no_copy);
    for (from, to) in [(8, o.out_pc), (16, o.out_sp), (24, o.out_fp)] {
        a.load(Size::DW, R1, R7, o.copy + from)
            .store(Size::DW, R7, to, R1);
    }
    // No range found yet (the value keeps an earlier firing's).
    for start in [WORD_LAST_START, WORD_PREV_START] {
        a.store_imm(Size::DW, R7, o.words[start], 0);
        a.store_imm(Size::DW, R7, o.words[start + 1], 0);
    }
    a.store_imm(Size::DW, R7, o.words[WORD_ROUTED], 0);
    match frames {
        FrameLoop::Bounded => {
            let ends = Ends {
                done: a.label(),
                outermost: a.label(),
                unplaced: a.label(),
            };
            let head = a.label();
            a.mov_imm(R9, 0);
            a.bind(head);
            emit_frame(a, maps, &o, head, ends);
            a.bind(ends.outermost);
            emit_done(a, &o, STATUS_OUTERMOST);
            a.ja(walked);
            a.bind(ends.done);
            emit_done(a, &o, STATUS_DONE);
            a.ja(walked);
            a.bind(ends.unplaced);
            a.store_imm(Size::DW, R7, o.out_status, STATUS_UNPLACED);
            a.ja(walked);
        }
        FrameLoop::Callback => {
            // One call a frame, and one more that finds the walk at its limit; the callback
            // finds the value through the slot holding r7. Its name tells its maps and layout.
            let maps = *maps;
            let name = format!(
                "dt_uwalk_{}_{}_{}_{}_{}_{}_{}_{}_{}",
                maps.rows,
                maps.ranges,
                u8::from(maps.by_process),
                maps.range_capacity,
                maps.row_steps,
                o.copy,
                o.out_status,
                o.max,
                maps.files.map_or(0, |f| f.files),
            );
            a.store(Size::DW, R10, SLOT_VALUE, R7);
            a.mov_imm(R1, o.max + 1);
            a.ld_callback(R2, name, move |a| {
                let ends = Ends {
                    done: a.label(),
                    outermost: a.label(),
                    unplaced: a.label(),
                };
                let next = a.label();
                a.mov(R9, R1);
                a.load(Size::DW, R7, R2, 0);
                emit_frame(a, &maps, &o, next, ends);
                a.bind(next);
                a.mov_imm(R0, 0).exit();
                a.bind(ends.outermost);
                emit_done(a, &o, STATUS_OUTERMOST);
                a.mov_imm(R0, 1).exit();
                a.bind(ends.done);
                emit_done(a, &o, STATUS_DONE);
                a.mov_imm(R0, 1).exit();
                a.bind(ends.unplaced);
                a.store_imm(Size::DW, R7, o.out_status, STATUS_UNPLACED);
                a.mov_imm(R0, 1).exit();
            });
            a.frame_addr(R3, i32::from(SLOT_VALUE));
            a.mov_imm(R4, 0).call(helper::LOOP);
            a.ja(walked);
        }
    }
    a.bind(walked);
    if let Some(route) = &maps.files {
        emit_note_routed(a, route, &o);
    }
    a.ja(end);
    a.bind(no_copy);
    a.store_imm(Size::DW, R7, o.out_status, STATUS_NO_COPY);
    a.bind(end);
    Ok(())
}

/// After a walk that found a PC by its file: notes its process in [`FileRoute::routed`] (once:
/// an update that would replace is refused), for dtrace to load its ranges.
fn emit_note_routed(a: &mut Asm, route: &FileRoute, o: &Offsets) {
    let skip = a.label();
    a.load(Size::DW, R1, R7, o.words[WORD_ROUTED]);
    a.jmp_imm(op::JEQ, R1, 0, skip);
    emit_process_key(a, o);
    // The value: zero (the word, cleared).
    a.store_imm(Size::DW, R7, o.words[WORD_ROUTED], 0);
    a.ld_map_fd(R1, route.routed)
        .mov(R2, R7)
        .alu_imm(op::ADD, R2, i32::from(o.words[WORD_KEY]))
        .mov(R3, R7)
        .alu_imm(op::ADD, R3, i32::from(o.words[WORD_ROUTED]))
        .mov_imm(R4, update_flag::NOEXIST)
        .call(helper::MAP_UPDATE_ELEM);
    a.bind(skip);
}

/// The walk's end with `status` (done, or done at the outermost frame), the frames counted in
/// r9.
fn emit_done(a: &mut Asm, o: &Offsets, status: i32) {
    a.store_imm(Size::DW, R7, o.out_status, status);
    a.store(Size::DW, R7, o.out_count, R9);
}

/// Where a frame of the walk goes when there is no further frame: `done` (the rules stop, or
/// the stack pointer does not move up), `outermost` (the row of the outermost frame), or
/// `unplaced` (a PC no range holds).
#[derive(Clone, Copy)]
struct Ends {
    done: Label,
    outermost: Label,
    unplaced: Label,
}

/// One frame of the walk, r9 the frames walked so far: it records the frame and jumps to `next`
/// with the walk's pc, sp and fp those of the caller, or to one of `ends` (no further frame).
/// In the bounded loop every register but r7 and r9 is cleared first, so the states of every way
/// through a frame meet at its head and a verifier following the loop follows each frame once. It
/// uses no stack.
fn emit_frame(a: &mut Asm, maps: &WalkMaps, o: &Offsets, next: Label, ends: Ends) {
    let Ends {
        done,
        outermost,
        unplaced,
    } = ends;
    if !o.branches {
        // (A callback's code is followed once: nothing to meet.)
        for r in [R0, R1, R2, R3, R4, R5, R6, R8] {
            a.mov_imm(r, 0);
        }
    }
    a.jmp_imm(op::JGE, R9, o.max, done);
    a.load(Size::DW, R1, R7, o.out_pc);
    a.jmp_imm(op::JEQ, R1, 0, done);
    // The frame, then the address looked up: a return address points after its call.
    a.mov(R2, R9).alu_imm(op::LSH, R2, 3).alu(op::ADD, R2, R7);
    a.store(Size::DW, R2, o.out_frames, R1);
    let first = a.label();
    a.jmp_imm(op::JEQ, R9, 0, first);
    a.alu_imm(op::SUB, R1, 1);
    a.bind(first);
    a.alu_imm(op::ADD, R9, 1);
    a.store(Size::DW, R7, o.words[WORD_LOOKUP], R1);
    let (fp_step, rule) = (a.label(), a.label());
    match &maps.files {
        None => emit_range_search(a, maps, o, unplaced, fp_step),
        Some(route) => {
            let (by_file, placed) = (a.label(), a.label());
            emit_range_search(a, maps, o, by_file, fp_step);
            a.ja(placed);
            a.bind(by_file);
            emit_file_search(a, route, o, unplaced, fp_step);
            a.bind(placed);
        }
    }
    // r6: the address in the file's terms; r2: the first row, r3: their count.
    let found = a.label();
    if o.branches {
        emit_row_cache_lookup(a, o, found);
    }
    emit_row_search(a, maps, o, unplaced, fp_step);
    if o.branches {
        emit_row_cache_fill(a, o);
    }
    a.bind(found);
    // r0: the row.
    a.load(Size::W, R1, R0, 8);
    a.mov(R2, R1).alu_imm(op::AND, R2, !(FLAG_FP_SAVED as i32));
    a.jmp_imm(op::JEQ, R2, KIND_NO_ENTRY as i32, fp_step);
    a.jmp_imm(op::JEQ, R2, KIND_CFA_SP as i32, rule);
    a.jmp_imm(op::JEQ, R2, KIND_CFA_FP as i32, rule);
    a.jmp_imm(op::JEQ, R2, KIND_OUTERMOST as i32, outermost);
    a.ja(done);
    a.bind(rule);
    // r8: the CFA, from sp or fp.
    let from_sp = a.label();
    a.load(Size::DW, R8, R7, o.out_sp);
    a.jmp_imm(op::JEQ, R2, KIND_CFA_SP as i32, from_sp);
    a.load(Size::DW, R8, R7, o.out_fp);
    a.bind(from_sp);
    sign_extended(a, R3, R0, 12);
    a.alu(op::ADD, R8, R3);
    // r6: the caller's fp (saved, or this one).
    let same_fp = a.label();
    a.load(Size::DW, R6, R7, o.out_fp);
    a.mov(R3, R1).alu_imm(op::AND, R3, FLAG_FP_SAVED as i32);
    a.jmp_imm(op::JEQ, R3, 0, same_fp);
    sign_extended(a, R3, R0, 20);
    a.mov(R1, R8).alu(op::ADD, R1, R3);
    emit_window_read(a, o, R1, done);
    a.mov(R6, R1);
    a.bind(same_fp);
    // The return address (r0 is still the row: window reads keep it).
    sign_extended(a, R3, R0, 16);
    a.mov(R1, R8).alu(op::ADD, R1, R3);
    emit_window_read(a, o, R1, done);
    let step = a.label();
    a.ja(step);
    // No row: the caller's fp and return address saved where fp points; sp past them.
    a.bind(fp_step);
    a.load(Size::DW, R8, R7, o.out_fp);
    a.mov(R1, R8);
    emit_window_read(a, o, R1, done);
    a.mov(R6, R1);
    a.mov(R1, R8).alu_imm(op::ADD, R1, 8);
    emit_window_read(a, o, R1, done);
    a.alu_imm(op::ADD, R8, 16);
    // r1: the return address, r8: the new sp, r6: the new fp; sp must move up.
    a.bind(step);
    a.load(Size::DW, R2, R7, o.out_sp);
    a.jmp_reg(op::JLE, R8, R2, done);
    a.store(Size::DW, R7, o.out_pc, R1);
    a.store(Size::DW, R7, o.out_sp, R8);
    a.store(Size::DW, R7, o.out_fp, R6);
    a.ja(next);
}

/// `dst` = the i32 at `off` of `src`, sign-extended.
fn sign_extended(a: &mut Asm, dst: Reg, src: Reg, off: i16) {
    a.load(Size::W, dst, src, off)
        .alu_imm(op::LSH, dst, 32)
        .alu_imm(op::ARSH, dst, 32);
}

/// `ge` = 1 when `x` >= `y` (unsigned), else 0, without a branch: the borrow of `x - y` is the
/// top bit of `(!x & y) | (!(x ^ y) & (x - y))`. Uses `t`.
fn emit_at_or_above(a: &mut Asm, ge: Reg, x: Reg, y: Reg, t: Reg) {
    a.mov(ge, x).alu(op::XOR, ge, y).alu_imm(op::XOR, ge, -1);
    a.mov(t, x).alu(op::SUB, t, y).alu(op::AND, ge, t);
    a.mov(t, x).alu_imm(op::XOR, t, -1).alu(op::AND, t, y);
    a.alu(op::OR, ge, t)
        .alu_imm(op::RSH, ge, 63)
        .alu_imm(op::XOR, ge, 1);
}

/// The search of the ranges for the address in the lookup slot: jumps to `unplaced` when no
/// range holds it, to `fp_step` when its range has no rows; else leaves the address in the file's
/// terms in r6, the file's first row in r2 and their count in r3. The last two ranges found are
/// kept in the walk's words, and an address in one of them (the next frame's, in the same file
/// or back in the one before, most often) takes it without a search.
fn emit_range_search(a: &mut Asm, maps: &WalkMaps, o: &Offsets, unplaced: Label, fp_step: Label) {
    let w = |i: usize| o.words[i];
    let mask = o.range_mask;
    let (prev, search, found) = (a.label(), a.label(), a.label());
    a.load(Size::DW, R1, R7, w(WORD_LOOKUP));
    a.load(Size::DW, R2, R7, w(WORD_LAST_START));
    a.jmp_reg(op::JLT, R1, R2, prev);
    a.load(Size::DW, R2, R7, w(WORD_LAST_END));
    a.jmp_reg(op::JGE, R1, R2, prev);
    a.ja(found);
    // In the range before: it becomes the last, the last the one before.
    a.bind(prev);
    a.load(Size::DW, R2, R7, w(WORD_PREV_START));
    a.jmp_reg(op::JLT, R1, R2, search);
    a.load(Size::DW, R2, R7, w(WORD_PREV_START + 1));
    a.jmp_reg(op::JGE, R1, R2, search);
    for k in 0..RANGE_WORDS {
        a.load(Size::DW, R2, R7, w(WORD_LAST_START + k));
        a.load(Size::DW, R3, R7, w(WORD_PREV_START + k));
        a.store(Size::DW, R7, w(WORD_LAST_START + k), R3);
        a.store(Size::DW, R7, w(WORD_PREV_START + k), R2);
    }
    a.ja(found);
    a.bind(search);
    if maps.by_process {
        emit_process_key(a, o);
        emit_keyed_lookup(a, maps.ranges, w(WORD_KEY));
        a.jmp_imm(op::JEQ, R0, 0, unplaced);
        a.mov(R8, R0);
    } else {
        a.ld_map_value(R8, maps.ranges, 0);
    }
    a.load(Size::DW, R1, R7, w(WORD_LOOKUP));
    // r4: base, r5: len.
    a.load(Size::DW, R5, R8, 0);
    a.jmp_imm(op::JEQ, R5, 0, unplaced);
    a.jmp_imm(op::JGT, R5, o.range_capacity, unplaced);
    a.mov_imm(R4, 0);
    for _ in 0..maps.range_capacity.trailing_zeros() {
        // r0: half; r2: the range at base + half's start.
        a.mov(R0, R5).alu_imm(op::RSH, R0, 1);
        a.mov(R2, R4)
            .alu(op::ADD, R2, R0)
            .alu_imm(op::AND, R2, mask);
        a.alu_imm(op::MUL, R2, RANGE_BYTES as i32)
            .alu(op::ADD, R2, R8);
        a.load(Size::DW, R2, R2, 8);
        emit_at_or_above(a, R3, R1, R2, R6);
        a.alu(op::MUL, R3, R0).alu(op::ADD, R4, R3);
        a.alu(op::SUB, R5, R0);
    }
    a.jmp_imm(op::JNE, R5, 1, unplaced);
    a.alu_imm(op::AND, R4, mask)
        .alu_imm(op::MUL, R4, RANGE_BYTES as i32)
        .alu(op::ADD, R4, R8);
    a.load(Size::DW, R2, R4, 8);
    a.jmp_reg(op::JLT, R1, R2, unplaced);
    a.load(Size::DW, R3, R4, 16);
    a.jmp_reg(op::JGE, R1, R3, unplaced);
    // The range found, kept for the next frame; the last one becomes the one before.
    for k in 0..RANGE_WORDS {
        a.load(Size::DW, R5, R7, w(WORD_LAST_START + k));
        a.store(Size::DW, R7, w(WORD_PREV_START + k), R5);
    }
    a.store(Size::DW, R7, w(WORD_LAST_START), R2);
    a.store(Size::DW, R7, w(WORD_LAST_END), R3);
    a.load(Size::DW, R2, R4, 8 + 16)
        .store(Size::DW, R7, w(WORD_LAST_BIAS), R2);
    a.load(Size::W, R2, R4, 8 + 24)
        .store(Size::DW, R7, w(WORD_LAST_FIRST), R2);
    a.load(Size::W, R3, R4, 8 + 28)
        .store(Size::DW, R7, w(WORD_LAST_COUNT), R3);
    a.bind(found);
    a.load(Size::DW, R3, R7, w(WORD_LAST_COUNT));
    a.jmp_imm(op::JEQ, R3, 0, fp_step);
    a.load(Size::DW, R6, R7, w(WORD_LAST_BIAS));
    a.mov(R0, R1).alu(op::SUB, R0, R6).mov(R6, R0);
    a.load(Size::DW, R2, R7, w(WORD_LAST_FIRST));
}

/// The search of the address in the lookup word by its file (see [`FileRoute`]): jumps to
/// `unplaced` when no mapping holds it, its file is not known, or no piece of the file holds
/// its offset; to `fp_step` when the file has no rows; else leaves what the range search
/// leaves (the address in the file's terms in r6, the file's first row in r2 and their count in
/// r3). Uses r0-r8 but r7.
fn emit_file_search(a: &mut Asm, route: &FileRoute, o: &Offsets, unplaced: Label, fp_step: Label) {
    let w = |i: usize| o.words[i];
    let route = *route;
    let words = o.words;
    a.call(helper::GET_CURRENT_TASK_BTF).mov(R1, R0);
    a.load(Size::DW, R2, R7, w(WORD_LOOKUP));
    a.ld_callback(
        R3,
        format!(
            "dt_uvma_{}_{}_{}_{}",
            route.scratch, route.keys, route.key_at, words[WORD_VM_START]
        ),
        move |a| emit_vma_callback(a, &route, &words),
    );
    a.mov_imm(R4, 0).mov_imm(R5, 0).call(helper::FIND_VMA);
    a.jmp_imm(op::JNE, R0, 0, unplaced);
    a.load(Size::DW, R1, R7, w(WORD_FILE_INO));
    a.jmp_imm(op::JEQ, R1, 0, unplaced);
    // r6: the offset in the file.
    a.load(Size::DW, R6, R7, w(WORD_LOOKUP));
    a.load(Size::DW, R1, R7, w(WORD_VM_START));
    a.alu(op::SUB, R6, R1);
    a.load(Size::DW, R1, R7, w(WORD_VM_PGOFF));
    a.alu_imm(op::LSH, R1, route.page_shift)
        .alu(op::ADD, R6, R1);
    a.ld_map_fd(R1, route.files)
        .mov(R2, R7)
        .alu_imm(op::ADD, R2, i32::from(w(WORD_FILE_DEV)))
        .call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, unplaced);
    a.mov(R8, R0);
    a.load(Size::DW, R5, R8, 0);
    let found = a.label();
    for i in 0..FILE_PIECES {
        let p = (8 + i * PIECE_BYTES) as i16;
        let next = a.label();
        a.jmp_imm(op::JLE, R5, i as i32, unplaced);
        a.load(Size::DW, R1, R8, p);
        a.jmp_reg(op::JLT, R6, R1, next);
        a.load(Size::DW, R1, R8, p + 8);
        a.jmp_reg(op::JGE, R6, R1, next);
        a.load(Size::DW, R1, R8, p + 16).alu(op::ADD, R6, R1);
        a.load(Size::W, R2, R8, p + 24);
        a.load(Size::W, R3, R8, p + 28);
        a.ja(found);
        a.bind(next);
    }
    a.ja(unplaced);
    a.bind(found);
    a.store_imm(Size::DW, R7, o.words[WORD_ROUTED], 1);
    a.jmp_imm(op::JEQ, R3, 0, fp_step);
}

/// `bpf_find_vma()`'s callback (the task in r1, the mapping in r2): finds the walk's value again
/// (see [`FileRoute::scratch`]) and writes there the mapping's start and page offset and its
/// file's key (zero for a mapping of no file).
fn emit_vma_callback(a: &mut Asm, route: &FileRoute, words: &[i16; WORDS]) {
    let out = a.label();
    let v = &route.vma;
    let m = |x: u32| x as i16;
    a.mov(R6, R2);
    a.ld_map_value(R2, route.keys, route.key_at)
        .ld_map_fd(R1, route.scratch)
        .call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, out).mov(R7, R0);
    a.store_imm(Size::DW, R7, words[WORD_FILE_DEV], 0);
    a.store_imm(Size::DW, R7, words[WORD_FILE_INO], 0);
    a.load(Size::DW, R1, R6, m(v.vm_start))
        .store(Size::DW, R7, words[WORD_VM_START], R1);
    a.load(Size::DW, R1, R6, m(v.vm_pgoff))
        .store(Size::DW, R7, words[WORD_VM_PGOFF], R1);
    a.load(Size::DW, R1, R6, m(v.vm_file));
    a.jmp_imm(op::JEQ, R1, 0, out);
    a.load(Size::DW, R1, R1, m(v.f_inode));
    a.jmp_imm(op::JEQ, R1, 0, out);
    a.load(Size::DW, R2, R1, m(v.i_sb));
    a.jmp_imm(op::JEQ, R2, 0, out);
    a.load(Size::W, R2, R2, m(v.s_dev))
        .store(Size::W, R7, words[WORD_FILE_DEV], R2);
    a.load(Size::DW, R2, R1, m(v.i_ino))
        .store(Size::DW, R7, words[WORD_FILE_INO], R2);
    a.bind(out);
    a.mov_imm(R0, 0).exit();
}

/// The search of the file's rows (first in r2, count in r3) for the address in r6: leaves the row
/// holding it in r0, or jumps to `fp_step` when the address is before the first row. Its steps
/// stop once one row is left: as many as the file's rows take (a dozen for a C library), not
/// the most any file takes.
fn emit_row_search(a: &mut Asm, maps: &WalkMaps, o: &Offsets, unplaced: Label, fp_step: Label) {
    let w = |i: usize| o.words[i];
    let (len, half, key) = (w(WORD_LEN), w(WORD_HALF), w(WORD_KEY));
    a.store(Size::DW, R7, len, R3);
    // r8: the first row of those left.
    a.mov(R8, R2);
    let lookup_row = |a: &mut Asm| {
        // r0: the row at r8 + r1.
        a.mov(R2, R8).alu(op::ADD, R2, R1);
        a.store(Size::W, R7, key, R2);
        emit_keyed_lookup(a, maps.rows, key);
        a.jmp_imm(op::JEQ, R0, 0, unplaced);
    };
    let searched = a.label();
    for _ in 0..maps.row_steps {
        a.load(Size::DW, R1, R7, len);
        a.jmp_imm(op::JLE, R1, 1, searched);
        a.alu_imm(op::RSH, R1, 1);
        a.store(Size::DW, R7, half, R1);
        lookup_row(a);
        a.load(Size::DW, R2, R0, 0);
        a.load(Size::DW, R1, R7, half);
        // Past the half's first row when the address is at or above it.
        if o.branches {
            let below = a.label();
            a.jmp_reg(op::JGT, R2, R6, below);
            a.alu(op::ADD, R8, R1);
            a.bind(below);
        } else {
            emit_at_or_above(a, R3, R6, R2, R4);
            a.alu(op::MUL, R3, R1).alu(op::ADD, R8, R3);
        }
        a.load(Size::DW, R2, R7, len).alu(op::SUB, R2, R1);
        a.store(Size::DW, R7, len, R2);
    }
    a.bind(searched);
    a.load(Size::DW, R2, R7, len);
    a.jmp_imm(op::JNE, R2, 1, unplaced);
    a.mov_imm(R1, 0);
    lookup_row(a);
    a.load(Size::DW, R2, R0, 0);
    a.jmp_reg(op::JLT, R6, R2, fp_step);
}

/// Jumps to `found` with r0 pointing at the row the cache holds for the address in r6 of the
/// file whose rows start at r2, else falls through (r2, r3 and r6 kept). The cache: a slot per
/// address's hash, in the value r7 points to (per CPU, kept from firing to firing), holding the
/// address, the file's first row and the row the search found. A file's rows never change once
/// written (the rows array only grows), so what the cache holds stays true; the frames of a
/// stack walked again and again (a syscall's callers) then take no search. Only on callbacks,
/// where the verifier follows a frame's code once. Uses r0, r4 and r5.
fn emit_row_cache_lookup(a: &mut Asm, o: &Offsets, found: Label) {
    let miss = a.label();
    // r4: the slot, middle bits of the address's multiplicative hash (the multiplier a
    // positive immediate: a negative one is sign-extended, and the high bits of the product of
    // a small address then hardly vary).
    a.mov(R4, R6)
        .alu_imm(op::MUL, R4, 0x61c8_8647)
        .alu_imm(op::RSH, R4, 24)
        .alu_imm(op::AND, R4, CACHE_SLOTS as i32 - 1);
    a.store(Size::DW, R7, o.words[WORD_CACHE_SLOT], R4);
    a.store(Size::DW, R7, o.words[WORD_CACHE_FIRST], R2);
    a.alu_imm(op::MUL, R4, CACHE_ENTRY as i32)
        .alu(op::ADD, R4, R7);
    a.load(Size::DW, R5, R4, o.cache);
    a.jmp_reg(op::JNE, R5, R6, miss);
    a.load(Size::DW, R5, R4, o.cache + 8);
    a.mov(R0, R2).alu_imm(op::ADD, R0, 1);
    a.jmp_reg(op::JNE, R5, R0, miss);
    a.mov(R0, R4).alu_imm(op::ADD, R0, i32::from(o.cache) + 16);
    a.ja(found);
    a.bind(miss);
}

/// Keeps the row r0 points to (the search's) in the cache slot [`emit_row_cache_lookup`] chose
/// for the address in r6. Uses r4 and r5 (r0 kept).
fn emit_row_cache_fill(a: &mut Asm, o: &Offsets) {
    a.load(Size::DW, R4, R7, o.words[WORD_CACHE_SLOT])
        .alu_imm(op::AND, R4, CACHE_SLOTS as i32 - 1)
        .alu_imm(op::MUL, R4, CACHE_ENTRY as i32)
        .alu(op::ADD, R4, R7);
    a.store(Size::DW, R4, o.cache, R6);
    a.load(Size::DW, R5, R7, o.words[WORD_CACHE_FIRST])
        .alu_imm(op::ADD, R5, 1);
    a.store(Size::DW, R4, o.cache + 8, R5);
    for k in (0..ROW_BYTES as i16).step_by(8) {
        a.load(Size::DW, R5, R0, k)
            .store(Size::DW, R4, o.cache + 16 + k, R5);
    }
}

/// The map key word = the current process's id (`tgid`, 4 bytes), the key of the ranges and
/// of the routed processes. Uses r0-r5 (a helper call).
fn emit_process_key(a: &mut Asm, o: &Offsets) {
    a.call(helper::GET_CURRENT_PID_TGID)
        .alu_imm(op::RSH, R0, 32)
        .store(Size::W, R7, o.words[WORD_KEY], R0);
}

/// r0 = the value of `map` under the key at offset `key` of the value r7 points to.
fn emit_keyed_lookup(a: &mut Asm, map: i32, key: i16) {
    a.ld_map_fd(R1, map)
        .mov(R2, R7)
        .alu_imm(op::ADD, R2, i32::from(key))
        .call(helper::MAP_LOOKUP_ELEM);
}

/// Replaces the address in `reg` (r1) by the u64 the copy holds there, or jumps to `fail` when
/// the copy does not hold all 8 bytes. Uses r2-r5 (r0 kept).
fn emit_window_read(a: &mut Asm, o: &Offsets, reg: Reg, fail: Label) {
    // r2: the offset in the copy (an address below it wraps far above it).
    a.load(Size::DW, R2, R7, o.copy + 16);
    a.mov(R3, reg).alu(op::SUB, R3, R2);
    a.jmp_imm(op::JGT, R3, o.window_last, fail);
    a.load(Size::DW, R4, R7, o.copy);
    a.mov(R5, R3).alu_imm(op::ADD, R5, 8);
    a.jmp_reg(op::JGT, R5, R4, fail);
    a.alu(op::ADD, R3, R7);
    a.load(Size::DW, reg, R3, o.copy_bytes);
}

/// The rows as the rows map holds them, one value a row.
pub fn row_values(rows: &[Row]) -> impl Iterator<Item = [u8; ROW_BYTES]> + '_ {
    rows.iter().map(Row::to_bytes)
}

#[cfg(test)]
mod tests;
