//! Kernel tests of the eBPF layer on its own: maps from user space, a hand-assembled program on a raw
//! tracepoint counting into a per-CPU array, and detachment when the attachment is dropped.

mod common;
use common::kernel_ok;
use dtrace_linux::attach::Attachment;
use dtrace_linux::bpf::insn::{helper, op, Asm, Size, R0, R1, R10, R2};
use dtrace_linux::bpf::{Map, MapKind, ProgKind, Program};

#[test]
fn hash_map_roundtrip_from_user_space() {
    if !kernel_ok("hash_map_roundtrip_from_user_space") {
        return;
    }
    let m = Map::create(MapKind::Hash, "dt_test_hash", 4, 8, 16).unwrap();
    for k in 0u32..5 {
        m.update(&k.to_le_bytes(), &(k as u64 * 10).to_le_bytes())
            .unwrap();
    }
    assert_eq!(
        m.lookup(&3u32.to_le_bytes()).unwrap(),
        Some(30u64.to_le_bytes().to_vec())
    );
    assert!(m.delete(&3u32.to_le_bytes()).unwrap());
    assert!(!m.delete(&3u32.to_le_bytes()).unwrap());
    assert_eq!(m.lookup(&3u32.to_le_bytes()).unwrap(), None);
    let mut keys: Vec<u32> = m
        .keys()
        .unwrap()
        .iter()
        .map(|k| u32::from_le_bytes(k[..4].try_into().unwrap()))
        .collect();
    keys.sort();
    assert_eq!(keys, vec![0, 1, 2, 4]);
    assert!(
        m.lookup(&[1, 2]).is_err(),
        "wrong key size is an error, not UB"
    );
}

#[test]
fn raw_tracepoint_program_counts_and_stops_when_dropped() {
    if !kernel_ok("raw_tracepoint_program_counts_and_stops_when_dropped") {
        return;
    }
    let counter = Map::create(MapKind::PerCpuArray, "dt_test_cnt", 4, 8, 1).unwrap();
    let mut a = Asm::new();
    let out = a.label();
    a.store_imm(Size::W, R10, -4, 0);
    a.ld_map_fd(R1, counter.raw_fd())
        .frame_addr(R2, -4)
        .call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, out)
        .mov_imm(R1, 1)
        .atomic_add64(R0, 0, R1);
    a.bind(out).mov_imm(R0, 0).exit();
    let prog = Program::load(
        ProgKind::RawTracepoint,
        &a.finish().unwrap(),
        "dt_test_rawtp",
        "raw sched_switch",
    )
    .unwrap();
    let att = Attachment::raw_tracepoint(&prog, "sched_switch").unwrap();
    for _ in 0..5 {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let seen = counter.percpu_sum_u64(0).unwrap();
    assert!(
        seen >= 5,
        "sched_switch fired {seen} times while this thread slept 5 times"
    );
    drop(att);
    drop(prog);
    // Detached: more context switches no longer count (allow for a firing already in flight).
    std::thread::sleep(std::time::Duration::from_millis(20));
    let after = counter.percpu_sum_u64(0).unwrap();
    for _ in 0..5 {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert_eq!(
        counter.percpu_sum_u64(0).unwrap(),
        after,
        "program still attached after drop"
    );
    let mut b = Asm::new();
    b.mov_imm(R0, 0).exit();
    let noop = Program::load(
        ProgKind::RawTracepoint,
        &b.finish().unwrap(),
        "dt_test_none",
        "x",
    )
    .unwrap();
    let e = Attachment::raw_tracepoint(&noop, "no_such_tracepoint_dtrace").unwrap_err();
    assert!(e.to_string().contains("no_such_tracepoint_dtrace"), "{e}");
}
