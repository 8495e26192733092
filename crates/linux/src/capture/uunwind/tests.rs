//! The walk at the probe against the reference: a raw tracepoint program run in this thread
//! (`BPF_PROG_TEST_RUN`) copies this thread's user stack as a probe copies it and walks it with
//! the rows of this process's files; the frames are those `unwind_rows::walk` and
//! `Symbolizer::unwind_user` give from the same copy (this test binary is built without frame
//! pointers, so they come from `.eh_frame`).

use super::*;
use crate::bpf::{Map, MapKind, ProgKind, Program};
use crate::capture::codegen::emit_user_unwind;
use crate::capture::spec::{MAX_STACK_DEPTH, USTACK_UNWIND_BYTES};
use crate::symbols::procmaps::FileId;
use crate::symbols::unwind::{StackBytes, Unwound, UserRegs};
use crate::symbols::unwind_rows::{
    self, file_key, Range, Row, RowArena, FILE_KEY_BYTES, FILE_VALUE_BYTES, KIND_OUTERMOST,
    KIND_STOP,
};
use crate::symbols::Symbolizer;

const WINDOW: usize = USTACK_UNWIND_BYTES as usize;
const COPY: usize = 0;
const OUT: usize = COPY + UNWIND_HDR + WINDOW;
const KEY: i16 = -64;

fn program(maps: &WalkMaps, value: i32, max: u32, frames: FrameLoop) -> Vec<crate::bpf::Insn> {
    let mut a = Asm::new();
    let out = a.label();
    a.mov(R6, R1);
    a.store_imm(Size::W, R10, KEY, 0);
    a.ld_map_fd(R1, value)
        .frame_addr(R2, i32::from(KEY))
        .call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, out).mov(R7, R0);
    emit_user_unwind(&mut a, COPY, WINDOW).unwrap();
    emit_walk(&mut a, maps, COPY, WINDOW, OUT, max, frames).unwrap();
    a.bind(out).mov_imm(R0, 0).exit();
    a.finish().unwrap()
}

fn word(v: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(v[o..o + 8].try_into().unwrap())
}

/// The stack the kernel copied in `v` (registers and bytes).
fn copied(v: &[u8]) -> (UserRegs, &[u8]) {
    let len = word(v, COPY) as usize;
    assert!((512..=WINDOW).contains(&len), "copied {len}");
    let regs = UserRegs {
        pc: word(v, COPY + 8),
        sp: word(v, COPY + 16),
        fp: word(v, COPY + 24),
    };
    (regs, &v[COPY + UNWIND_HDR..COPY + UNWIND_HDR + len])
}

/// The ways from frame to frame this kernel has: a bounded loop everywhere, callbacks of
/// `bpf_loop` where it is (Linux 5.17; these tests' programs have small stacks, so Linux 6.1's
/// count of the callback's frame on top of theirs does not refuse them).
fn frame_loops() -> Vec<FrameLoop> {
    let mut v = vec![FrameLoop::Bounded];
    if crate::features::have_bpf_loop() {
        v.push(FrameLoop::Callback);
    }
    v
}

/// The files map's entries of a walk by file (see [`FileRoute`]).
type Files = [(FileId, [u8; FILE_VALUE_BYTES])];

/// Runs the walk of up to `max` frames in this thread over the layout `rows` and `ranges`,
/// frame to frame as `frames` says; returns the program's value (the copy, then the output) and
/// what the reference walk gives from the same copy. With `files`, the kernel holds no ranges
/// for this process (the reference still walks `ranges`) and finds each PC by its file in
/// them.
fn walk_here(
    rows: &[Row],
    ranges: &[Range],
    max: u32,
    frames: FrameLoop,
    files: Option<&Files>,
) -> (Vec<u8>, Walked) {
    let rmap = Map::create(
        MapKind::Array,
        "dt_urows",
        4,
        ROW_BYTES as u32,
        rows.len().max(1) as u32,
    )
    .unwrap();
    for (i, v) in row_values(rows).enumerate() {
        rmap.update(&(i as u32).to_ne_bytes(), &v).unwrap();
    }
    let (rv, capacity) = ranges_value(ranges);
    let gmap = match files {
        // This process has no ranges there.
        Some(_) => Map::create(MapKind::Hash, "dt_uranges", 4, rv.len() as u32, 1).unwrap(),
        None => {
            let m = Map::create(MapKind::Array, "dt_uranges", 4, rv.len() as u32, 1).unwrap();
            m.update(&0u32.to_ne_bytes(), &rv).unwrap();
            m
        }
    };
    let most = ranges.iter().map(|r| r.count as usize).max().unwrap_or(1);
    let value = Map::create(
        MapKind::Array,
        "dt_uwalk",
        4,
        (OUT + out_bytes(max)) as u32,
        1,
    )
    .unwrap();
    let fmaps = files.map(|files| {
        let fmap = Map::create(
            MapKind::Hash,
            "dt_ufiles",
            FILE_KEY_BYTES as u32,
            FILE_VALUE_BYTES as u32,
            files.len().max(1) as u32,
        )
        .unwrap();
        for (id, v) in files {
            fmap.update(&file_key(*id), v).unwrap();
        }
        let keys = Map::create(MapKind::Array, "dt_ukeys", 4, 8, 1).unwrap();
        keys.update(&0u32.to_ne_bytes(), &[0; 8]).unwrap();
        let routed = Map::create(MapKind::Hash, "dt_urouted", 4, 8, 4).unwrap();
        (fmap, keys, routed)
    });
    let maps = WalkMaps {
        rows: rmap.raw_fd(),
        ranges: gmap.raw_fd(),
        by_process: files.is_some(),
        range_capacity: capacity,
        row_steps: steps_for(most),
        files: fmaps.as_ref().map(|(fmap, keys, routed)| FileRoute {
            files: fmap.raw_fd(),
            scratch: value.raw_fd(),
            keys: keys.raw_fd(),
            routed: routed.raw_fd(),
            key_at: 0,
            vma: crate::btf::VmaFileOffsets::of_running_kernel().unwrap(),
            page_shift: crate::mapping::page_size().trailing_zeros() as i32,
        }),
    };
    let prog = Program::load(
        ProgKind::RawTracepoint,
        &program(&maps, value.raw_fd(), max, frames),
        "dt_uwalk",
        "the user stack walk",
    )
    .unwrap();
    let run = || {
        prog.test_run_raw_tp(&[0]).unwrap();
        value.lookup(&0u32.to_ne_bytes()).unwrap().unwrap()
    };
    // Twice: on callbacks, the second walk takes the rows the first found from its row cache
    // (kept in the value); each walks as the reference walks its copy (the callers check the
    // second's).
    let first = run();
    let v = run();
    if files.is_none() {
        let want = reference(&first, max, rows, ranges);
        assert_eq!(read_walk(&first[OUT..], max), Some(want));
    }
    if let Some((_, _, routed)) = &fmaps {
        // A walk that found a PC by its file notes its process, once; else none.
        let noted = routed.keys().unwrap();
        let by_file = files.is_some_and(|f| !f.is_empty());
        let want: Vec<Vec<u8>> = match by_file {
            true => vec![std::process::id().to_ne_bytes().to_vec()],
            false => Vec::new(),
        };
        assert_eq!(noted, want);
    }
    let want = reference(&v, max, rows, ranges);
    (v, want)
}

/// What the reference walk gives from the copy in value `v` over `rows` and `ranges`.
fn reference(v: &[u8], max: u32, rows: &[Row], ranges: &[Range]) -> Walked {
    let (regs, bytes) = copied(v);
    let stack = StackBytes {
        base: regs.sp,
        bytes,
    };
    match unwind_rows::walk(regs, stack, max as usize, rows, ranges) {
        Ok(f) => Walked::Frames(f),
        Err(_) => Walked::Unplaced,
    }
}

/// The rows the walk's row cache in value `v` holds (of a walk of up to `max` frames).
fn cached_rows(v: &[u8], max: u32) -> usize {
    let cache = OUT + out_bytes(max) - CACHE_BYTES;
    (0..CACHE_SLOTS)
        .filter(|i| {
            let at = cache + i * CACHE_ENTRY + 8;
            v[at..at + 8] != [0; 8]
        })
        .count()
}

/// The frames `Symbolizer::unwind_user` gives for process `pid` from the copy in value `v`.
fn unwound(syms: &mut Symbolizer, pid: u32, v: &[u8], max: u32) -> Unwound {
    let (regs, bytes) = copied(v);
    let stack = StackBytes {
        base: regs.sp,
        bytes,
    };
    syms.unwind_user(pid, regs, stack, max as usize)
}

#[test]
fn the_walk_at_the_probe_gives_the_unwinders_frames() {
    let t = "the_walk_at_the_probe_gives_the_unwinders_frames";
    if !dtrace_testkit::skip_unless(crate::bpf_available(), t, "needs bpf(2)") {
        return;
    }
    let pid = std::process::id();
    let mut syms = Symbolizer::new();
    syms.note_process(pid);
    let mut arena = RowArena::new();
    let ranges = syms.unwind_ranges(pid, &mut arena).unwrap();
    for (max, frames) in [MAX_STACK_DEPTH, 2]
        .into_iter()
        .flat_map(|max| frame_loops().into_iter().map(move |f| (max, f)))
    {
        let (v, reference) = walk_here(arena.rows(), &ranges, max, frames, None);
        // The reference walk is the unwinder's.
        let want = unwound(&mut syms, pid, &v, max);
        assert_eq!(reference, Walked::Frames(want.clone()));
        if max == MAX_STACK_DEPTH {
            // Through libc's bpf() and this test's frames, by `.eh_frame`.
            assert!(want.frames.len() >= 4, "{frames:?}: {want:x?}");
            // Their rows in the cache, where the walk has one.
            let cached = cached_rows(&v, max);
            match frames {
                FrameLoop::Callback => assert!(cached >= 4, "{cached} rows cached"),
                FrameLoop::Bounded => assert_eq!(cached, 0),
            }
        }
        assert_eq!(
            read_walk(&v[OUT..], max),
            Some(Walked::Frames(want)),
            "{frames:?}"
        );
    }
}

/// Every way through a frame, over a layout made for them and a frame chain this test lays out in
/// its own stack frame (inside the copied bytes): the first PC's rule (CFA from sp, rbp saved)
/// leads into the chain, then a frame-pointer step (no rows), a rule with an `rbp`-based CFA, and
/// a frame-pointer step that would move sp down (or read outside the copy), where the walk stops.
/// The reference walk over the same layout gives the same; and with no range at all the walk is
/// unplaced. Both ways from frame to frame.
#[test]
fn the_walk_at_the_probe_takes_every_kind_of_step_as_the_reference() {
    let t = "the_walk_at_the_probe_takes_every_kind_of_step_as_the_reference";
    if !dtrace_testkit::skip_unless(crate::bpf_available(), t, "needs bpf(2)") {
        return;
    }
    let mut chain = [0u64; 16];
    let at = |chain: &[u64; 16], i: usize| chain.as_ptr() as u64 + 8 * i as u64;
    chain[0] = at(&chain, 4);
    chain[1] = 0x5000;
    chain[4] = at(&chain, 8);
    chain[5] = 0x6000;
    chain[8] = at(&chain, 12);
    chain[9] = 0x7000;
    chain[12] = at(&chain, 2);
    chain[13] = 0x7800;
    chain[2] = at(&chain, 14);
    chain[3] = 0x9000;
    let rule = |kind: u32, cfa_offset: i32| Row {
        start: 0,
        kind: kind | FLAG_FP_SAVED,
        cfa_offset,
        ra_offset: -8,
        fp_offset: -16,
    };
    let range = |start: u64, end: u64, rows: Option<u32>| Range {
        start,
        end,
        bias: 0,
        first: rows.unwrap_or(0),
        count: u32::from(rows.is_some()),
    };
    let ranges = [
        range(0, 0x5000, None),
        range(0x5000, 0x7000, Some(1)),
        range(0x7000, 0x8000, None),
        range(0x10000, u64::MAX, Some(0)),
    ];
    for frames in frame_loops() {
        chain[12] = at(&chain, 2);
        // The first run finds sp; the next, from the same call, walk from it into the chain;
        // the last with the chain's last frame pointer outside the copied bytes (the walk
        // stops as well).
        let mut sp = None;
        for round in 0..3 {
            if round == 2 {
                chain[12] = 0x10;
            }
            let cfa = sp.map_or(0, |sp: u64| (at(&chain, 2) - sp) as i32);
            let rows = [rule(KIND_CFA_SP, cfa), rule(KIND_CFA_FP, 16)];
            let (v, reference) = walk_here(&rows, &ranges, MAX_STACK_DEPTH, frames, None);
            std::hint::black_box(&chain);
            let (regs, _) = copied(&v);
            if sp.replace(regs.sp).is_some() {
                let frames = vec![regs.pc, 0x5000, 0x6000, 0x7000, 0x7800];
                assert_eq!(
                    reference,
                    Walked::Frames(Unwound {
                        frames,
                        outermost: false
                    })
                );
                assert_eq!(read_walk(&v[OUT..], MAX_STACK_DEPTH), Some(reference));
            }
        }
        // A stop row at the first PC: one frame; the outermost frame's row: one frame, the
        // stack whole.
        for (kind, outermost) in [(KIND_STOP, false), (KIND_OUTERMOST, true)] {
            let stop = [Row { kind, ..rule(0, 0) }];
            let (v, reference) = walk_here(&stop, &ranges, MAX_STACK_DEPTH, frames, None);
            let frames = vec![copied(&v).0.pc];
            assert_eq!(reference, Walked::Frames(Unwound { frames, outermost }));
            assert_eq!(read_walk(&v[OUT..], MAX_STACK_DEPTH), Some(reference));
        }
        let stop = [Row {
            kind: KIND_STOP,
            ..rule(0, 0)
        }];
        let (v, reference) = walk_here(&stop, &[], MAX_STACK_DEPTH, frames, None);
        assert_eq!(reference, Walked::Unplaced);
        assert_eq!(
            read_walk(&v[OUT..], MAX_STACK_DEPTH),
            Some(Walked::Unplaced)
        );
    }
}

/// A process whose ranges the kernel does not hold is walked by the files it maps, when they are
/// known (`FileRoute`): the frames are the unwinder's, as with its ranges; with its files
/// unknown the walk is unplaced, as without ranges before. Where the kernel cannot take the
/// route beside a probe's stack (Linux 6.1), the walk's maps offer none.
#[test]
fn a_process_without_ranges_is_walked_by_the_files_it_maps() {
    let t = "a_process_without_ranges_is_walked_by_the_files_it_maps";
    if !dtrace_testkit::skip_unless(crate::bpf_available(), t, "needs bpf(2)") {
        return;
    }
    if !crate::features::file_route_at_probe() {
        let maps = crate::provider::ustack_maps::UstackMaps::new().unwrap();
        assert_eq!(maps.walk(1).files, None);
        return;
    }
    let pid = std::process::id();
    let mut syms = Symbolizer::new();
    syms.note_process(pid);
    let mut arena = RowArena::new();
    let ranges = syms.unwind_ranges(pid, &mut arena).unwrap();
    let files = syms.unwind_files(pid, &mut arena);
    // This test binary and libc at least.
    assert!(files.len() >= 2, "{}", files.len());
    let (v, reference) = walk_here(
        arena.rows(),
        &ranges,
        MAX_STACK_DEPTH,
        FrameLoop::Callback,
        Some(&files),
    );
    let want = unwound(&mut syms, pid, &v, MAX_STACK_DEPTH);
    assert_eq!(reference, Walked::Frames(want.clone()));
    assert!(want.frames.len() >= 4, "{want:x?}");
    assert_eq!(
        read_walk(&v[OUT..], MAX_STACK_DEPTH),
        Some(Walked::Frames(want))
    );
    // No file known: unplaced.
    let (v, _) = walk_here(
        arena.rows(),
        &ranges,
        MAX_STACK_DEPTH,
        FrameLoop::Callback,
        Some(&[]),
    );
    assert_eq!(
        read_walk(&v[OUT..], MAX_STACK_DEPTH),
        Some(Walked::Unplaced)
    );
}
