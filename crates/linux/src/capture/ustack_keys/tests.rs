//! The firing's walk and a key's frames at the probe against dtrace's: a raw tracepoint program
//! run in this thread (`BPF_PROG_TEST_RUN`) walks this thread's user stack with the ranges
//! `provider::ustack_maps` loaded for this process, then writes a key's frames; they are the
//! longer of the kernel's frame-pointer walk and `Symbolizer::unwind_user`'s walk of the same
//! copy, as `complete_walk` chooses (this test binary is built without frame pointers: the
//! `.eh_frame` walk goes further). Before the process's ranges are loaded, and after they are
//! forgotten, the firing is handed over.

use super::*;
use crate::bpf::{Map, MapKind, ProgKind, Program};
use crate::capture::codegen::CtxKind;
use crate::capture::spec::Identity;
use crate::provider::ustack_maps::UstackMaps;
use crate::symbols::unwind::{StackBytes, UserRegs};
use crate::symbols::Symbolizer;

/// Output value: the status (1 walked, 2 handed over), the deep flag (`kagg::emit_deep_flag`),
/// the key's frames, then the scratch.
const DEEP_AT: usize = 8;
const KEY_AT: usize = 16;
const SCRATCH_AT: usize = KEY_AT + 8 * MAX_STACK_DEPTH as usize;
const OUT_BYTES: usize = SCRATCH_AT + SCRATCH_BYTES;
const OUT_PTR: i16 = -200;
const OUT_KEY: i16 = -208;

fn shape() -> ProbeShape {
    ProbeShape {
        ctx: CtxKind::RawTracepoint,
        args: Vec::new(),
        conditions: Vec::new(),
        identity: Identity::Current,
        task: None,
    }
}

fn lookup_out(a: &mut Asm, out: i32, end: Label) {
    a.store_imm(Size::W, R10, OUT_KEY, 0);
    a.ld_map_fd(R1, out)
        .frame_addr(R2, i32::from(OUT_KEY))
        .call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, end);
}

fn program(w: &UserWalk, out: i32) -> Vec<Insn> {
    let mut a = Asm::new();
    let (handover, end) = (a.label(), a.label());
    a.mov(R6, R1);
    emit_walk_once(&mut a, &shape(), w, handover).unwrap();
    lookup_out(&mut a, out, end);
    a.store(Size::DW, R10, OUT_PTR, R0);
    a.store_imm(Size::DW, R0, 0, 1);
    emit_key_frames(
        &mut a,
        &shape(),
        w,
        (OUT_PTR, KEY_AT as i16),
        (MAX_STACK_DEPTH, Some(DEEP_AT as i16)),
        |a| {
            a.mov(R1, R6);
            a.load(Size::DW, R2, R10, OUT_PTR)
                .alu_imm(op::ADD, R2, KEY_AT as i32);
            a.mov_imm(R3, 8 * MAX_STACK_DEPTH as i32)
                .mov_imm(R4, 1 << 8)
                .call(helper::GET_STACK);
            Ok(())
        },
    )
    .unwrap();
    // The scratch, copied whole for the reference.
    emit_scratch(&mut a, &shape(), w, end);
    a.mov(R3, R0);
    a.load(Size::DW, R1, R10, OUT_PTR)
        .alu_imm(op::ADD, R1, SCRATCH_AT as i32);
    a.mov_imm(R2, SCRATCH_BYTES as i32)
        .call(helper::PROBE_READ_KERNEL);
    a.ja(end);
    a.bind(handover);
    lookup_out(&mut a, out, end);
    a.store_imm(Size::DW, R0, 0, 2);
    a.bind(end).mov_imm(R0, 0).exit();
    a.finish().unwrap()
}

fn word(v: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(v[o..o + 8].try_into().unwrap())
}

/// Runs the program in this thread: the output value.
fn run(prog: &Program, out: &Map) -> Vec<u8> {
    // The deep flag set, so that the walk is seen to write it either way.
    let mut v = vec![0u8; OUT_BYTES];
    v[DEEP_AT..DEEP_AT + 8].fill(0xff);
    out.update(&0u32.to_ne_bytes(), &v).unwrap();
    prog.test_run_raw_tp(&[0]).unwrap();
    out.lookup(&0u32.to_ne_bytes()).unwrap().unwrap()
}

#[test]
fn ustack_keys_are_the_unwinders_walk_once_the_process_is_loaded() {
    let t = "ustack_keys_are_the_unwinders_walk_once_the_process_is_loaded";
    if !dtrace_testkit::skip_unless(crate::bpf_available(), t, "needs bpf(2)") {
        return;
    }
    let mut maps = UstackMaps::new().unwrap();
    let w = maps.walk(100);
    let out = Map::create(MapKind::Array, "dt_ukeytest", 4, OUT_BYTES as u32, 1).unwrap();
    let prog = Program::load(
        ProgKind::RawTracepoint,
        &program(&w, out.raw_fd()),
        "dt_ukeys",
        "the ustack() key walk",
    )
    .unwrap();
    // Not loaded yet: handed over.
    assert_eq!(word(&run(&prog, &out), 0), 2);
    let pid = std::process::id();
    let mut syms = Symbolizer::new();
    assert!(maps.load(&mut syms, pid, 0).unwrap());
    let v = run(&prog, &out);
    assert_eq!(word(&v, 0), 1);
    let s = &v[SCRATCH_AT..];
    let fp_len = (word(s, FP) as i64).max(0) as usize / 8;
    let fp: Vec<u64> = (0..fp_len).map(|i| word(s, FP + 8 + 8 * i)).collect();
    let len = word(s, COPY) as usize;
    let regs = UserRegs {
        pc: word(s, COPY + 8),
        sp: word(s, COPY + 16),
        fp: word(s, COPY + 24),
    };
    let stack = StackBytes {
        base: regs.sp,
        bytes: &s[COPY + UNWIND_HDR..COPY + UNWIND_HDR + len],
    };
    let unwound = syms.unwind_user(pid, regs, stack, MAX_STACK_DEPTH as usize);
    // A test thread's stack ends at its first function's outermost frame: the walk at the probe
    // takes it whole, with no frame-pointer walk (the scratch keeps the first run's, which was
    // handed over).
    assert!(unwound.outermost, "{unwound:x?}");
    let unwound = unwound.frames;
    // Without frame pointers the .eh_frame walk goes further (through libc's bpf() and this
    // test's frames).
    assert!(unwound.len() > fp.len(), "{unwound:x?} {fp:x?}");
    assert!(unwound.len() >= 4, "{unwound:x?}");
    assert_eq!(word(s, CHOICE), 1);
    let key: Vec<u64> = (0..MAX_STACK_DEPTH as usize)
        .map(|i| word(&v, KEY_AT + 8 * i))
        .collect();
    let mut want = unwound.clone();
    want.resize(MAX_STACK_DEPTH as usize, 0);
    assert_eq!(key, want);
    // Deep for an aggregation's short maps by the frames it took.
    let deep = unwound.len() > crate::capture::spec::SHORT_STACK_WORDS as usize;
    assert_eq!(word(&v, DEEP_AT), u64::from(deep), "{unwound:x?}");
    // Forgotten (as at an exec): ranges read before the exec are not kept; read after it, they
    // are. Meanwhile the walk goes by the files the process maps, which its load made known
    // (`uunwind::FileRoute`), or, where the kernel cannot, it is handed over again.
    let forgotten = if crate::features::file_route_at_probe() {
        1
    } else {
        2
    };
    // On the kernel's clock, as dtrace's loads are: a firing from before a load does not load
    // again.
    let exec_at =
        maps.forget_for_test(&pid.to_ne_bytes(), crate::provider::deliver::monotonic_ns());
    assert_eq!(word(&run(&prog, &out), 0), forgotten);
    assert!(!maps.load(&mut syms, pid, exec_at - 1).unwrap());
    assert_eq!(word(&run(&prog, &out), 0), forgotten);
    assert!(maps.load(&mut syms, pid, exec_at + 1).unwrap());
    assert_eq!(word(&run(&prog, &out), 0), 1);
    // Forgotten by dtrace (its mappings were replaced): by its files, or handed over, until
    // loaded again.
    maps.forget(&[pid]).unwrap();
    assert_eq!(word(&run(&prog, &out), 0), forgotten);
    if forgotten == 1 {
        // A walk by its files noted the process: dtrace loads its ranges from that note, and
        // the walks by them note nothing.
        assert_eq!(maps.load_routed(&mut syms, exec_at + 2).unwrap(), vec![pid]);
        assert_eq!(word(&run(&prog, &out), 0), 1);
        assert!(maps.load_routed(&mut syms, exec_at + 3).unwrap().is_empty());
    } else {
        assert!(maps.load(&mut syms, pid, exec_at + 2).unwrap());
    }
    assert_eq!(word(&run(&prog, &out), 0), 1);
}
