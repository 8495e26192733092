//! `copyin()` read as a string at the probe, against the interpreter: a size known only at run
//! time (0, 1, around `strsize`, several pages, past the readable memory, past `scratchsize`),
//! bytes with a NUL among them, a bad address, and `stringof()` of a copy of constant size.

use super::*;

/// A probe whose clause's only allocation of scratch is the `copyin()` under test, with this
/// much scratch.
struct CopyProbe(Probe, u64);

impl ProbeContext for CopyProbe {
    fn emit_builtin(&self, a: &mut Asm, b: Builtin) -> Result<(), String> {
        self.0.emit_builtin(a, b)
    }
    fn emit_execname(&self, a: &mut Asm, at: i16) -> Result<(), String> {
        self.0.emit_execname(a, at)
    }
    fn names(&self) -> &ProbeNames {
        self.0.names()
    }
    fn emit_string_scratch(&self, a: &mut Asm, offset: usize, len: usize) -> Result<(), String> {
        self.0.emit_string_scratch(a, offset, len)
    }
    fn copy_scratch(&self) -> Result<u64, String> {
        Ok(self.1)
    }
}

/// Three readable pages (`a` to `z` over and over; user memory reads by whole pages), unreadable
/// after.
const A: u64 = 0x7fff_0001_0000;
const A_LEN: usize = 3 * 4096;
/// Bytes with a NUL among them.
const B: u64 = 0x7fff_0004_0000;

fn copy_probe(addr: u64, size: u64, scratch: u64) -> CopyProbe {
    let mut p = Probe::new();
    p.user = vec![
        (A, (0..A_LEN).map(|i| b'a' + (i % 26) as u8).collect()),
        (B, b"ab\0cd".to_vec()),
    ];
    p.args = vec![addr, 0, 0, size, 0, 0, 0, 0];
    CopyProbe(p, scratch)
}

/// The string `src` (an aggregation key) makes in the interpreter, with `strsize` (D's) and
/// `scratch` bytes of scratch, or its fault (kind, pc, address); and the same translated and
/// emulated, which must agree. Returns the interpreter's.
fn string_both_ways(src: &str, p: &CopyProbe, strsize: usize) -> Result<Vec<u8>, (u32, u32, u64)> {
    let obj = key(src);
    let (mut ctx, mut mem) = fake_env(&p.0);
    let mut state = VarState::new(VmOptions {
        strsize: strsize + 1,
        scratch_size: p.1 as usize,
        ..VmOptions::default()
    });
    let mut m = Machine::new();
    let want = m
        .run(&obj, &mut state, &mut ctx, &mut mem)
        .and_then(|addr| {
            let mut out = Vec::new();
            m.read_string_into(&obj, &mut mem, addr, &mut out)
                .map(|_| out)
        })
        // An address in the alloca area is reported as DTrace for Linux records one.
        .map_err(|f| (f.kind.code(), f.pc, m.export_value(f.addr)));
    let v = translate_value(&obj, p, strsize + 1, FRAME)
        .unwrap_or_else(|e| panic!("{src}: untranslatable: {e}"));
    assert_eq!(v.kind, ValueKind::Scratch, "{src}");
    assert_reachable(&v.fragment.insns);
    let (r0, stack, scratch) = emulate_all(&v.fragment.insns, &p.0);
    let got = if r0 == FAULTED as u64 {
        Err(frame_fault(&stack).expect("a fault in the frame"))
    } else {
        // NUL-terminated within strsize and zero-padded, as every string in the scratch.
        let at = (r0 - SCRATCH_ADDR) as usize;
        let slot = &scratch[at..at + string_scratch_width(strsize + 1)];
        let n = slot.iter().position(|&c| c == 0).expect("a NUL");
        assert!(n <= strsize, "{src}: {n} bytes");
        assert!(slot[n..].iter().all(|&c| c == 0), "{src}: not zero-padded");
        Ok(slot[..n].to_vec())
    };
    let args = &p.0.args;
    assert_eq!(got, want, "{src} at {:#x}, {} bytes", args[0], args[3]);
    want
}

fn pattern(from: usize, n: usize) -> Vec<u8> {
    (from..from + n).map(|i| b'a' + (i % 26) as u8).collect()
}

#[test]
fn a_copy_sized_at_run_time_is_the_interpreters_string() {
    let sized = "stringof(copyin(arg0, arg3))";
    let mb = 1u64 << 20;
    for strsize in [256usize, 16] {
        let s = strsize as u64;
        for (addr, size) in [
            (A, 1),
            (A, 100),
            (A, s - 1),
            (A, s),
            (A, s + 1),
            (A, 5000),
            (A, A_LEN as u64),
            (A + 4000, 200),
            (A + 100, A_LEN as u64 - 100),
            (B, 5),
            (B, 2),
        ] {
            let got = string_both_ways(sized, &copy_probe(addr, size, mb), strsize);
            let want = if addr == B {
                b"ab".to_vec()
            } else {
                pattern((addr - A) as usize, (size as usize).min(strsize))
            };
            assert_eq!(
                got,
                Ok(want),
                "{addr:#x}, {size} bytes at strsize {strsize}"
            );
        }
    }
}

#[test]
fn a_copy_sized_at_run_time_faults_as_the_interpreter() {
    let sized = "stringof(copyin(arg0, arg3))";
    let mb = 1u64 << 20;
    let (bad, none) = (FaultKind::BadAddr.code(), FaultKind::NoScratch.code());
    for (addr, size, scratch, kind, at) in [
        // No bytes: the interpreter's empty alloca area.
        (A, 0, mb, bad, None),
        // A bad address, and memory unreadable part way (in the string, past it, on the
        // last byte).
        (16, 10, mb, bad, Some(16)),
        (A + A_LEN as u64 - 50, 100, mb, bad, None),
        (A + 9000, A_LEN as u64 - 8999, mb, bad, None),
        (A, A_LEN as u64 + 1, mb, bad, None),
        (A + 100, A_LEN as u64 - 99, mb, bad, None),
        // Past the scratch, before anything is read.
        (A, mb + 1, mb, none, Some(0)),
        (16, u64::MAX, mb, none, Some(0)),
        (A, 65, 64, none, Some(0)),
    ] {
        let got = string_both_ways(sized, &copy_probe(addr, size, scratch), 256);
        let Err((k, _, a)) = got else {
            panic!("{addr:#x}, {size} bytes: no fault");
        };
        assert_eq!(k, kind, "{addr:#x}, {size} bytes");
        // A read that fails faults at the copy's address.
        assert_eq!(a, at.unwrap_or(if size == 0 { a } else { addr }));
    }
    // The whole scratch is the copy's.
    let got = string_both_ways(sized, &copy_probe(A, 64, 64), 256);
    assert_eq!(got, Ok(pattern(0, 64)));
}

#[test]
fn a_copy_of_constant_size_reads_as_the_interpreters_string() {
    let mb = 1u64 << 20;
    for (src, addr, want) in [
        ("stringof(copyin(arg0, 10))", A, pattern(0, 10)),
        ("stringof(copyin(arg0, 5))", B, b"ab".to_vec()),
        ("stringof(copyin(arg0, 300))", A, pattern(0, 256)),
        ("stringof(copyin(arg0, 1024))", A, pattern(0, 256)),
        // Past what the probe copies whole: sized at run time.
        ("stringof(copyin(arg0, 2000))", A, pattern(0, 256)),
    ] {
        let got = string_both_ways(src, &copy_probe(addr, 0, mb), 256);
        assert_eq!(got, Ok(want), "{src}");
    }
    let got = string_both_ways("stringof(copyin(arg0, 0))", &copy_probe(A, 0, mb), 256);
    assert!(got.is_err(), "{got:?}");
}

#[test]
fn a_copy_sized_at_run_time_compares_and_measures_as_a_string() {
    let mb = 1u64 << 20;
    for (addr, size) in [(A, 3), (A, 2), (B, 5), (A, 300), (A, 0), (16, 3)] {
        let p = copy_probe(addr, size, mb);
        for pred in [
            r#"stringof(copyin(arg0, arg3)) == "abc""#,
            r#"stringof(copyin(arg0, arg3)) < "abc""#,
            "strlen(stringof(copyin(arg0, arg3))) == 2",
        ] {
            let obj = predicate(&clause(pred));
            let (mut ctx, mut mem) = fake_env(&p.0);
            let mut state = VarState::new(VmOptions::default());
            let mut m = Machine::new();
            let want = m.run(&obj, &mut state, &mut ctx, &mut mem);
            let f = translate(&obj, &p, 257, FRAME).unwrap_or_else(|e| panic!("{pred}: {e}"));
            assert_reachable(&f.insns);
            let (r0, stack) = emulate_frame(&f.insns, &p.0);
            match want {
                Ok(v) => assert_eq!(r0 != 0, v != 0, "{pred} at {addr:#x}, {size}"),
                Err(fault) => {
                    assert_eq!(r0, FAULTED as u64, "{pred} at {addr:#x}, {size}");
                    assert_eq!(
                        frame_fault(&stack),
                        Some((fault.kind.code(), fault.pc, m.export_value(fault.addr))),
                        "{pred}: the interpreter's fault"
                    );
                }
            }
        }
    }
}

#[test]
fn a_context_that_does_not_follow_the_scratch_keeps_sized_copies_in_dtrace() {
    let p = copy_probe(A, 10, 1 << 20).0;
    for src in ["stringof(copyin(arg0, arg3))", "stringof(copyin(arg0, 10))"] {
        let e = translate_value(&key(src), &p, 257, FRAME).unwrap_err();
        assert!(e.to_string().contains("copyin()"), "{src}: {e}");
    }
    // More scratch than the probe checks page by page.
    let big = copy_probe(A, 10, (1 << 20) + 8);
    let e = translate_value(&key("stringof(copyin(arg0, arg3))"), &big, 257, FRAME).unwrap_err();
    assert!(e.to_string().contains("scratchsize above"), "{e}");
}

/// The `n` bytes the interpreter records of the memory `copyin(arg0, arg3)` returns
/// (`tracemem(copyin(arg0, arg3), n)`, as `Machine::read_result_into` reads them), with D's
/// `strsize` of 256, or its fault (kind, pc, address); and the same translated and emulated,
/// the record's read as the probe's program makes it (the bytes at r0, the size after them
/// compared with `n`), which must agree. Returns the interpreter's.
fn memory_both_ways(p: &CopyProbe, n: usize) -> Result<Vec<u8>, (u32, u32, u64)> {
    let src = "copyin(arg0, arg3)";
    let obj = key(src);
    let (mut ctx, mut mem) = fake_env(&p.0);
    let mut state = VarState::new(VmOptions {
        strsize: 257,
        scratch_size: p.1 as usize,
        ..VmOptions::default()
    });
    let mut m = Machine::new();
    let want = m
        .run(&obj, &mut state, &mut ctx, &mut mem)
        .and_then(|addr| {
            let mut out = vec![0; n];
            m.read_result_into(&obj, &mut mem, addr, &mut out)
                .map(|_| out)
        })
        .map_err(|f| (f.kind.code(), f.pc, m.export_value(f.addr)));
    let v = translate_value(&obj, p, 257, FRAME).unwrap_or_else(|e| panic!("{src}: {e}"));
    assert_eq!(v.kind, ValueKind::SizedCopy(256), "{src}");
    assert_reachable(&v.fragment.insns);
    let (r0, stack, scratch) = emulate_all(&v.fragment.insns, &p.0);
    let got = if r0 == FAULTED as u64 {
        Err(frame_fault(&stack).expect("a fault in the frame"))
    } else {
        let at = (r0 - SCRATCH_ADDR) as usize;
        let word = scratch[at + 256..at + 264].try_into().expect("8 bytes");
        let size = u64::from_ne_bytes(word);
        assert_eq!(size, p.0.args[3], "the copy's size after its bytes");
        if size < n as u64 {
            // The interpreter's read past its alloca area (a fault outside the DIF code).
            Err((FaultKind::BadSize.code(), 0, n as u64))
        } else {
            Ok(scratch[at..at + n].to_vec())
        }
    };
    let args = &p.0.args;
    assert_eq!(got, want, "{n} bytes of {:#x}, {} bytes", args[0], args[3]);
    want
}

#[test]
fn a_copy_sized_at_run_time_records_as_the_interpreters_memory() {
    let mb = 1u64 << 20;
    for (addr, size) in [
        (A, 1),
        (A, 31),
        (A, 32),
        (A, 256),
        (A, 5000),
        (B, 5),
        (B, 2),
    ] {
        for n in [1, 2, 8, 32, 256] {
            let got = memory_both_ways(&copy_probe(addr, size, mb), n);
            if n as u64 > size {
                assert!(got.is_err(), "{n} bytes of {size}");
                continue;
            }
            // The copy's bytes, NULs among them.
            let want = if addr == B {
                b"ab\0cd"[..n].to_vec()
            } else {
                pattern(0, n)
            };
            assert_eq!(got, Ok(want), "{n} bytes of {addr:#x}, {size} bytes");
        }
    }
    // Faults as the copy's: no bytes, a bad address, past the scratch.
    for (addr, size, scratch) in [(A, 0, mb), (16, 10, mb), (A, 65, 64)] {
        assert!(memory_both_ways(&copy_probe(addr, size, scratch), 32).is_err());
    }
}

#[test]
fn a_copy_sized_at_run_time_used_as_an_integer_says_so() {
    let p = copy_probe(A, 10, 1 << 20);
    let e = translate_value(&key("(uint64_t)copyin(arg0, arg3) + 1"), &p, 257, FRAME).unwrap_err();
    assert!(e.to_string().contains("copyin() sized at the probe"), "{e}");
}
