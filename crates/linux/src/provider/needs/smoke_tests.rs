//! Arbitrary DIF never makes the analysis panic nor ask for more than a capture makes.

use super::*;
use crate::capture::spec::{MAX_COPIES, MAX_COPY_SIZE, MAX_STACK_DEPTH};
use dtrace_dif::object::DifObject;
use dtrace_dif::program::{ActionDesc, EcbDesc};
use dtrace_dif::program::{ActionKind, ProbeDesc, Program};

/// Arbitrary instruction words and tables (a program may come from outside, through DOF) never
/// make the analysis panic, and what it asks for stays within the capture limits.
#[test]
fn random_dif_never_panics() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Opcodes that matter here, so random words often reach them.
    // setx, ldga, ldgs, call, pushtr, pushtv, popts, flushts, add, the kernel loads, ret,
    // scmp, copys, stls/ldls.
    let ops = [
        0x0e, 0x25, 0x28, 0x29, 0x2f, 0x30, 0x31, 0x32, 0x33, 0x07, 0x1c, 0x1e, 0x22, 0x22, 0x23,
        0x27, 0x3b, 0x39, 0x38,
    ];
    for _ in 0..4000 {
        let len = (next() % 24) as usize;
        let text: Vec<u32> = (0..len)
            .map(|_| {
                let w = next() as u32;
                if w & 1 == 0 {
                    let op = ops[(w as usize >> 1) % ops.len()];
                    if op == 0x2f {
                        // call copyin / copyinstr / copyinto
                        let subr = [8, 9, 17][(w as usize >> 8) % 3];
                        (op << 24) | (subr << 8) | (w & 7)
                    } else if op == 0x29 && w & 0x100 != 0 {
                        // ldgs curthread
                        (op << 24) | (0x100 << 8) | (w & 7)
                    } else {
                        (op << 24) | (w & 0x00ff_ff07)
                    }
                } else {
                    w
                }
            })
            .collect();
        let inttab: Vec<u64> = (0..(next() % 4)).map(|_| next() % 20_000).collect();
        let obj = DifObject {
            text,
            inttab,
            ..DifObject::default()
        };
        let action = ActionDesc {
            kind: if next() % 2 == 0 {
                ActionKind::Stack
            } else {
                ActionKind::Ustack
            },
            difo: Some(obj.clone()),
            arg: next(),
            uarg: 0,
            ntuple: 0,
        };
        let p = Program {
            ecbs: vec![EcbDesc {
                probe: ProbeDesc::default(),
                predicate: Some(obj),
                actions: vec![action],
                line: 0,
            }],
            ..Program::default()
        };
        let n = program_needs(&p);
        let c = &n.clauses[0].1;
        assert!(c
            .copies
            .iter()
            .all(|c| c.size >= 1 && c.size <= MAX_COPY_SIZE));
        assert!(c.kstack.unwrap_or(0) <= MAX_STACK_DEPTH);
        assert!(c.ustack.unwrap_or(0) <= MAX_STACK_DEPTH);
        if let Ok(spec) = spec_for(&[c], (&[0, 1], false), DEFAULT_STRING_STORAGE) {
            assert!(spec.copies.len() <= MAX_COPIES);
        }
    }
}

/// The fuzz target's entry point over pseudo-random and truncated inputs.
#[test]
fn fuzz_entry_smoke() {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for i in 0..3000usize {
        let len = i % 97;
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        fuzz_entry(&bytes);
    }
    fuzz_entry(&[]);
    fuzz_entry(&[1]);
}
