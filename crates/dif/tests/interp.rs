//! Interpreter semantics: every instruction, the cc flags, faults with address and offset.

mod common;
use common::{kind, run, H};
use dtrace_dif::vm::machine::TEMP_MIN;
use dtrace_dif::vm::{FaultKind, ALLOCA_BASE, SCRATCH_BASE};

fn alu(op: &str, a: u64, b: u64) -> Result<u64, dtrace_dif::vm::Fault> {
    run(&format!(
        "setx {a:#x}, %r1\nsetx {b:#x}, %r2\n{op} %r1, %r2, %r3\nret %r3\n"
    ))
}

#[test]
fn arithmetic_and_logic() {
    assert_eq!(alu("or", 0xf0, 0x0f), Ok(0xff));
    assert_eq!(alu("xor", 0xff, 0x0f), Ok(0xf0));
    assert_eq!(alu("and", 0xff, 0x0f), Ok(0x0f));
    assert_eq!(alu("sll", 1, 63), Ok(1 << 63));
    assert_eq!(alu("sll", 1, 64), Ok(1)); // shift counts are taken mod 64
    assert_eq!(alu("srl", 1 << 63, 63), Ok(1));
    assert_eq!(alu("sra", 1 << 63, 63), Ok(u64::MAX));
    assert_eq!(alu("sub", 1, 2), Ok(u64::MAX));
    assert_eq!(alu("add", u64::MAX, 2), Ok(1));
    assert_eq!(alu("mul", 1 << 63, 2), Ok(0));
    assert_eq!(alu("sdiv", (-7i64) as u64, 2), Ok((-3i64) as u64));
    assert_eq!(alu("sdiv", i64::MIN as u64, u64::MAX), Ok(i64::MIN as u64));
    assert_eq!(alu("udiv", (-7i64) as u64, 2), Ok(((-7i64) as u64) / 2));
    assert_eq!(alu("srem", (-7i64) as u64, 2), Ok((-1i64) as u64));
    assert_eq!(alu("srem", i64::MIN as u64, u64::MAX), Ok(0));
    assert_eq!(alu("urem", 7, 4), Ok(3));
    for op in ["sdiv", "udiv", "srem", "urem"] {
        let f = alu(op, 1, 0).unwrap_err();
        assert_eq!(f.kind, FaultKind::DivZero);
        assert_eq!(f.pc, 2);
        assert_eq!(f.dif_offset(), 8);
    }
    assert_eq!(run("setx 5, %r1\nnot %r1, %r2\nret %r2\n"), Ok(!5));
    assert_eq!(run("setx 5, %r1\nmov %r1, %r2\nret %r2\n"), Ok(5));
    assert_eq!(run("nop\nret %r0\n"), Ok(0));
}

/// Runs `cmp`/`tst` then branch `b`; returns whether the branch was taken.
fn taken(setup: &str, b: &str) -> bool {
    run(&format!(
        "{setup}\n{b} yes\nsetx 0, %r7\nret %r7\nyes:\nsetx 1, %r7\nret %r7\n"
    ))
    .unwrap()
        == 1
}

fn cmp(a: i64, b: i64) -> String {
    format!(
        "setx {:#x}, %r1\nsetx {:#x}, %r2\ncmp %r1, %r2",
        a as u64, b as u64
    )
}

#[test]
fn branches_follow_the_cc_flags() {
    let pairs = [(1i64, 2i64), (2, 1), (3, 3), (-1, 1), (1, -1)];
    for (a, b) in pairs {
        let s = cmp(a, b);
        let (ua, ub) = (a as u64, b as u64);
        assert!(taken(&s, "ba"));
        assert_eq!(taken(&s, "be"), a == b, "be {a} {b}");
        assert_eq!(taken(&s, "bne"), a != b);
        assert_eq!(taken(&s, "bg"), a > b, "bg {a} {b}");
        assert_eq!(taken(&s, "bge"), a >= b);
        assert_eq!(taken(&s, "bl"), a < b);
        assert_eq!(taken(&s, "ble"), a <= b);
        assert_eq!(taken(&s, "bgu"), ua > ub, "bgu {a} {b}");
        assert_eq!(taken(&s, "bgeu"), ua >= ub);
        assert_eq!(taken(&s, "blu"), ua < ub);
        assert_eq!(taken(&s, "bleu"), ua <= ub);
    }
    // cc_v is always 0, so signed comparisons follow the sign of the wrapped difference (as in DTrace).
    let s = cmp(i64::MIN, 1);
    assert!(taken(&s, "bg"));
    // tst sets only Z.
    assert!(taken("setx 0, %r1\ntst %r1", "be"));
    assert!(!taken("setx 5, %r1\ntst %r1", "be"));
    assert!(taken("setx 0xffffffffffffffff, %r1\ntst %r1", "bge"));
    assert!(!taken("setx 5, %r1\ntst %r1", "blu"));
}

#[test]
fn r0_reads_zero_and_ret_returns() {
    assert_eq!(run("add %r0, %r0, %r1\nret %r1\n"), Ok(0));
    assert_eq!(run("ret %r0\n"), Ok(0));
}

#[test]
fn scratch_allocation_stores_and_loads() {
    let src = "setx 16, %r1\nallocs %r1, %r2\nsetx 0x1122334455667788, %r3\nstx %r3, [%r2]\nldx [%r2], %r4\nret %r4\n";
    assert_eq!(run(src), Ok(0x1122334455667788));
    let src = "setx 16, %r1\nallocs %r1, %r2\nsetx 0xff80, %r3\nsth %r3, [%r2]\nldsh [%r2], %r4\nret %r4\n";
    assert_eq!(run(src), Ok((-128i64) as u64));
    let src = "setx 16, %r1\nallocs %r1, %r2\nsetx 0xff80, %r3\nsth %r3, [%r2]\nlduh [%r2], %r4\nret %r4\n";
    assert_eq!(run(src), Ok(0xff80));
    let src = "setx 16, %r1\nallocs %r1, %r2\nsetx 0x80, %r3\nstb %r3, [%r2]\nldsb [%r2], %r4\nldub [%r2], %r5\nadd %r4, %r5, %r6\nret %r6\n";
    assert_eq!(run(src), Ok(0));
    let src = "setx 16, %r1\nallocs %r1, %r2\nsetx 0x80000000, %r3\nstw %r3, [%r2]\nldsw [%r2], %r4\nlduw [%r2], %r5\nrldsw [%r2], %r6\nsub %r5, %r6, %r6\nret %r6\n";
    assert_eq!(run(src), Ok(0x8000_0000u64.wrapping_add(0x8000_0000)));
    // allocs returns 8-aligned zeroed memory
    let src = "setx 3, %r1\nallocs %r1, %r2\nallocs %r1, %r3\nsub %r3, %r2, %r4\nret %r4\n";
    assert_eq!(run(src), Ok(8));
}

/// Loads may read past this firing's scratch allocations (DTrace checks loads against the scratch
/// region, so a `copys` of `strsize` bytes from a shorter `strjoin` result works); unallocated bytes
/// read as zero (up to the scratch size).
#[test]
fn loads_read_past_scratch_allocations_within_the_region() {
    let src =
        "setx 4, %r1\nallocs %r1, %r2\nsetx 0x7f, %r3\nstb %r3, [%r2]\nldx [%r2], %r4\nret %r4\n";
    assert_eq!(run(src), Ok(0x7f));
    let src = "setx 8, %r1\nallocs %r1, %r2\nsetx 0x55, %r3\nstb %r3, [%r2]\nsetx 64, %r5\nallocs %r5, %r6\nsetx 32, %r5\ncopys %r2, %r5, %r6\nldx [%r6], %r4\nret %r4\n";
    assert_eq!(run(src), Ok(0x55));
    // A load that starts past every allocation still faults.
    let f = run(
        "setx 8, %r1\nallocs %r1, %r2\nsetx 64, %r3\nadd %r2, %r3, %r2\nldx [%r2], %r4\nret %r4\n",
    )
    .unwrap_err();
    assert_eq!((f.kind, f.addr), (FaultKind::BadAddr, SCRATCH_BASE + 64));
}

#[test]
fn stores_only_into_scratch() {
    // A store to kernel memory faults with the address.
    let f = run("setx 0x1000, %r1\nstb %r0, [%r1]\nret %r0\n").unwrap_err();
    assert_eq!((f.kind, f.addr, f.pc), (FaultKind::BadAddr, 0x1000, 1));
    // Past the end of what was allocated.
    let f = run("setx 8, %r1\nallocs %r1, %r2\nadd %r2, %r1, %r2\nstb %r0, [%r2]\nret %r0\n")
        .unwrap_err();
    assert_eq!(f.kind, FaultKind::BadAddr);
    assert_eq!(f.addr, SCRATCH_BASE + 8);
    // Into the string table.
    let f = run("sets \"abc\", %r1\nstb %r0, [%r1]\nret %r0\n").unwrap_err();
    assert_eq!(f.kind, FaultKind::BadAddr);
    // Misaligned.
    let f = run(
        "setx 16, %r1\nallocs %r1, %r2\nsetx 1, %r3\nadd %r2, %r3, %r2\nstw %r0, [%r2]\nret %r0\n",
    )
    .unwrap_err();
    assert_eq!((f.kind, f.addr), (FaultKind::BadAlign, SCRATCH_BASE + 1));
}

#[test]
fn scratch_is_bounded_and_reset_per_firing() {
    let mut h = H::with(dtrace_dif::vm::VmOptions {
        scratch_size: 64,
        ..Default::default()
    });
    // Temporaries have room for at least TEMP_MIN bytes, whatever scratchsize says.
    let src = format!("setx {}, %r1\nallocs %r1, %r2\nret %r2\n", TEMP_MIN - 8);
    assert_eq!(h.run(&src), Ok(SCRATCH_BASE));
    let f = h.run(&src).unwrap_err();
    assert_eq!(f.kind, FaultKind::NoScratch);
    h.m.begin_firing();
    assert_eq!(h.run(&src), Ok(SCRATCH_BASE));
    assert_eq!(
        kind(h.run("setx 0xffffffffffffffff, %r1\nallocs %r1, %r2\nret %r2\n")),
        FaultKind::NoScratch
    );
}

fn alloca(n: u64) -> String {
    format!("flushts\nsetx {n}, %r1\npushtv int, %r1\ncall alloca, %r2\n")
}

#[test]
fn alloca_takes_scratchsize_bytes_per_clause() {
    let mut h = H::with(dtrace_dif::vm::VmOptions {
        scratch_size: 9,
        ..Default::default()
    });
    // alloca(9) fits in scratchsize=9, whatever temporaries the clause makes.
    let src = format!("{}sets \"abcdefghij\", %r3\nret %r2\n", alloca(9));
    assert_eq!(h.run(&src), Ok(ALLOCA_BASE));
    let f = h
        .run(&format!("{}{}ret %r2\n", alloca(1), alloca(9)))
        .unwrap_err();
    assert_eq!(f.kind, FaultKind::NoScratch);
    // Each clause starts with an empty area.
    h.m.begin_clause();
    assert_eq!(h.run(&format!("{}ret %r2\n", alloca(8))), Ok(ALLOCA_BASE));
}

#[test]
fn alloca_accesses_past_the_top_fault_as_dtrace_for_linux_does() {
    let mut h = H::new();
    // A store starting at the top: invalid address.
    let f = h
        .run(&format!(
            "{}setx 16, %r3\nadd %r2, %r3, %r3\nstb %r0, [%r3]\nret %r0\n",
            alloca(16)
        ))
        .unwrap_err();
    assert_eq!((f.kind, f.addr), (FaultKind::BadAddr, ALLOCA_BASE + 16));
    // A load starting below the top and crossing it: invalid size.
    h.m.begin_clause();
    let f = h
        .run(&format!(
            "{}setx 8, %r3\nadd %r2, %r3, %r3\nldx [%r3], %r4\nret %r4\n",
            alloca(12)
        ))
        .unwrap_err();
    assert_eq!((f.kind, f.addr), (FaultKind::BadSize, 8));
    // Within: fine.
    h.m.begin_clause();
    let src = format!(
        "{}setx 7, %r3\nstb %r3, [%r2]\nldub [%r2], %r4\nret %r4\n",
        alloca(1)
    );
    assert_eq!(h.run(&src), Ok(7));
    // The previous clause's area is gone.
    h.m.begin_clause();
    let f = h
        .run(&format!(
            "setx {ALLOCA_BASE:#x}, %r2\nldub [%r2], %r4\nret %r4\n"
        ))
        .unwrap_err();
    assert_eq!(f.kind, FaultKind::BadAddr);
}

#[test]
fn kernel_and_user_loads_go_through_memory() {
    let mut h = H::new();
    h.mem.kernel.insert(0x1000, vec![1, 2, 3, 4, 5, 6, 7, 8]);
    h.mem.user.insert(0x4000, vec![0xff, 0xff, 0, 0]);
    assert_eq!(
        h.run("setx 0x1000, %r1\nldx [%r1], %r2\nret %r2\n"),
        Ok(0x0807060504030201)
    );
    assert_eq!(
        h.run("setx 0x1004, %r1\nrlduw [%r1], %r2\nret %r2\n"),
        Ok(0x08070605)
    );
    assert_eq!(
        h.run("setx 0x4000, %r1\nuldsh [%r1], %r2\nret %r2\n"),
        Ok(u64::MAX)
    );
    assert_eq!(
        h.run("setx 0x4000, %r1\nulduh [%r1], %r2\nret %r2\n"),
        Ok(0xffff)
    );
    assert_eq!(
        h.run("setx 0x4000, %r1\nuldub [%r1], %r2\nret %r2\n"),
        Ok(0xff)
    );
    assert_eq!(
        h.run("setx 0x4000, %r1\nuldsb [%r1], %r2\nret %r2\n"),
        Ok(u64::MAX)
    );
    assert_eq!(
        h.run("setx 0x4000, %r1\nulduw [%r1], %r2\nret %r2\n"),
        Ok(0xffff)
    );
    assert_eq!(
        h.run("setx 0x4000, %r1\nuldsw [%r1], %r2\nret %r2\n"),
        Ok(0xffff)
    );
    let f = h
        .run("setx 0x4000, %r1\nuldx [%r1], %r2\nret %r2\n")
        .unwrap_err();
    assert_eq!((f.kind, f.addr), (FaultKind::BadAddr, 0x4000));
    let f = h
        .run("setx 0x1001, %r1\nlduh [%r1], %r2\nret %r2\n")
        .unwrap_err();
    assert_eq!((f.kind, f.addr), (FaultKind::BadAlign, 0x1001));
    let f = h.run("ldx [%r0], %r2\nret %r2\n").unwrap_err();
    assert_eq!((f.kind, f.addr, f.dif_offset()), (FaultKind::BadAddr, 0, 0));
    assert_eq!(h.run("setx 0x1000, %r1\nldub [%r1], %r2\nldsb [%r1], %r3\nldsh [%r1], %r4\nlduh [%r1], %r5\nldsw [%r1], %r6\nret %r6\n"), Ok(0x04030201));
    for op in ["rldsb", "rldub", "rldsh", "rlduh", "rldx"] {
        assert!(h
            .run(&format!("setx 0x1000, %r1\n{op} [%r1], %r2\nret %r2\n"))
            .is_ok());
    }
}

#[test]
fn copys_copies_into_scratch() {
    let src = "sets \"hello\", %r1\nsetx 6, %r2\nallocs %r2, %r3\ncopys %r1, %r2, %r3\nret %r3\n";
    let mut h = H::new();
    let o = H::obj(&format!(".rtype string 256\n{src}"));
    let a = h.run_obj(&o).unwrap();
    assert_eq!(h.m.read_string_result(&o, &mut h.mem, a).unwrap(), b"hello");
    // Destination outside scratch.
    assert_eq!(
        kind(run(
            "sets \"hello\", %r1\nsetx 6, %r2\ncopys %r1, %r2, %r1\nret %r0\n"
        )),
        FaultKind::BadAddr
    );
    // Source unreadable.
    assert_eq!(
        kind(run(
            "setx 6, %r2\nallocs %r2, %r3\nsetx 0x99, %r1\ncopys %r1, %r2, %r3\nret %r0\n"
        )),
        FaultKind::BadAddr
    );
}

#[test]
fn scmp_compares_bounded_strings() {
    let t = |a: &str, b: &str| {
        let src = format!("sets \"{a}\", %r1\nsets \"{b}\", %r2\nscmp %r1, %r2\nbl lt\nbe eq\nsetx 1, %r3\nret %r3\nlt:\nsetx 0xffffffffffffffff, %r3\nret %r3\neq:\nret %r0\n");
        run(&src).unwrap() as i64
    };
    assert_eq!(t("abc", "abc"), 0);
    assert_eq!(t("abc", "abd"), -1);
    assert_eq!(t("b", "abc"), 1);
    assert_eq!(t("", "a"), -1);
    assert_eq!(t("ab", "abc"), -1);
    // NULL compares as the empty string.
    let src = "sets \"\", %r1\nscmp %r1, %r0\nbe eq\nsetx 1, %r3\nret %r3\neq:\nret %r0\n";
    assert_eq!(run(src), Ok(0));
    // Comparison is bounded by strsize.
    let mut h = H::with(dtrace_dif::vm::VmOptions {
        strsize: 3,
        ..Default::default()
    });
    let src = "sets \"abcX\", %r1\nsets \"abcY\", %r2\nscmp %r1, %r2\nbe eq\nsetx 1, %r3\nret %r3\neq:\nret %r0\n";
    assert_eq!(h.run(src), Ok(0));
}

#[test]
fn builtins_come_from_the_context() {
    let mut h = H::new();
    h.ctx.args = vec![11, 22, 33];
    h.ctx
        .ints
        .insert(dtrace_dif::vars::DIF_VAR_TIMESTAMP, 12345);
    assert_eq!(h.run("ldgs arg1, %r1\nret %r1\n"), Ok(22));
    assert_eq!(h.run("ldgs pid, %r1\nret %r1\n"), Ok(100));
    assert_eq!(h.run("ldgs timestamp, %r1\nret %r1\n"), Ok(12345));
    assert_eq!(h.run("setx 2, %r2\nldga args, %r2, %r1\nret %r1\n"), Ok(33));
    assert_eq!(
        h.run_str(".rtype string\nldgs execname, %r1\nret %r1\n")
            .unwrap(),
        "fake"
    );
    assert_eq!(
        h.run_str(".rtype string\nldgs probefunc, %r1\nret %r1\n")
            .unwrap(),
        "func"
    );
    // Built-ins the context does not have fault.
    assert_eq!(kind(h.run("ldgs ipl, %r1\nret %r1\n")), FaultKind::IllOp);
    assert_eq!(
        kind(h.run("setx 9, %r2\nldga args, %r2, %r1\nret %r1\n")),
        FaultKind::IllOp
    );
}

#[test]
fn string_builtins_are_truncated_to_strsize() {
    let mut h = H::with(dtrace_dif::vm::VmOptions {
        strsize: 3,
        ..Default::default()
    });
    assert_eq!(
        h.run_str(".rtype string\nldgs execname, %r1\nret %r1\n")
            .unwrap(),
        "fa"
    );
}

#[test]
fn tuple_stack_overflow_faults() {
    // The verifier rejects a provable overflow, so build one the verifier cannot see: a branch joins
    // paths... instead run the unverified object directly.
    let mut src = String::new();
    for _ in 0..9 {
        src.push_str("pushtv int, %r0\n");
    }
    src.push_str("ret %r0\n");
    let o = dtrace_dif::asm::assemble(&src).unwrap();
    assert!(dtrace_dif::verify::verify(&o).is_err());
    let mut h = H::new();
    let f = h.run_obj(&o).unwrap_err();
    assert_eq!((f.kind, f.pc), (FaultKind::TupOflow, 8));
    // popts and flushts make room.
    let src = "pushtv int, %r0\npopts\npopts\nflushts\nret %r0\n";
    assert_eq!(run(src), Ok(0));
}

#[test]
fn unverified_objects_never_loop_or_panic() {
    let mut h = H::new();
    // A backward branch.
    let o = dtrace_dif::asm::assemble("nop\nba 0\nret %r0\n").unwrap();
    assert_eq!(h.run_obj(&o).unwrap_err().kind, FaultKind::IllOp);
    // No ret.
    let o = dtrace_dif::asm::assemble("nop\n").unwrap();
    assert_eq!(h.run_obj(&o).unwrap_err().kind, FaultKind::IllOp);
    // Bad table references and registers.
    let o = dtrace_dif::DifObject {
        text: vec![
            0x2500_0901,
            0x2600_0902,
            0x0709_0a0b,
            0x2300_0001,
            0xff00_0000,
        ],
        ..Default::default()
    };
    assert_eq!(h.run_obj(&o).unwrap_err().kind, FaultKind::IllOp);
    let o = dtrace_dif::DifObject {
        text: vec![0xff00_0000],
        ..Default::default()
    };
    assert_eq!(h.run_obj(&o).unwrap_err().kind, FaultKind::IllOp);
    // xlate cannot run.
    let o = dtrace_dif::DifObject {
        text: vec![0x4e00_0001, 0x2300_0001],
        ..Default::default()
    };
    assert_eq!(h.run_obj(&o).unwrap_err().kind, FaultKind::IllOp);
    // ldta is reserved.
    let o = dtrace_dif::DifObject {
        text: vec![0x2b00_0001, 0x2300_0001],
        ..Default::default()
    };
    assert_eq!(h.run_obj(&o).unwrap_err().kind, FaultKind::IllOp);
}

#[test]
fn tuple_push_edge_cases() {
    // A by-reference push with a size above i64::MAX is an illegal operation.
    let f = run("setx 0xffffffffffffffff, %r1\npushtr int, %r1, %r1\nret %r0\n").unwrap_err();
    assert_eq!((f.kind, f.pc), (FaultKind::IllOp, 1));
    // popts on an empty stack is harmless.
    assert_eq!(run("popts\nret %r0\n"), Ok(0));
    // A string push is sized strlen + 1 with strlen bounded by the r2 limit when given, so the key
    // holds limit + 1 bytes of the string, as DTrace copies them.
    let store = ".var a 0x500 arr glb int 8\nsets \"abcdef\", %r1\nsetx 3, %r2\nflushts\npushtr string, %r2, %r1\nsetx 9, %r3\nstgaa %r3, a\n";
    let mut h = H::new();
    for (k, want) in [("abc", 0), ("abcd", 9)] {
        let src = format!(
            "{store}sets \"{k}\", %r4\nflushts\npushtr string, %r0, %r4\nldgaa a, %r5\nret %r5\n"
        );
        assert_eq!(h.run(&src), Ok(want), "{k}");
    }
}
