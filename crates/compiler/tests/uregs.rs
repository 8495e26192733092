//! `uregs[]` and the `R_*` register indices of the D library's `regs.d` (x86-64, numbered as
//! DTrace for Linux numbers them), and the checks DTrace makes of a `regs[]`/`uregs[]` index:
//! an integer constant (`D_PROTO_ARG`), not negative (`D_REGS_IDX`), and for `uregs[]` within
//! the register indices (`D_UNKNOWN`, "index out of bounds").

use dtrace_compiler::{compile, CompileOptions, ErrTag};
use dtrace_dif::instr::Instr;
use dtrace_dif::vars::DIF_VAR_UREGS;
use dtrace_dif::vm::fake::{FakeContext, FakeMemory};
use dtrace_dif::vm::{Machine, VarState, VmOptions};

fn values(src: &str) -> Vec<i64> {
    let p = compile(src, &CompileOptions::default()).unwrap_or_else(|e| panic!("{src}: {e}"));
    let mut state = VarState::new(VmOptions::default());
    let mut m = Machine::new();
    let mut ctx = FakeContext::new();
    let mut mem = FakeMemory::new();
    m.begin_firing();
    p.ecbs[0]
        .actions
        .iter()
        .filter_map(|a| a.difo.as_ref())
        .map(|o| {
            m.run(o, &mut state, &mut ctx, &mut mem)
                .unwrap_or_else(|f| panic!("fault {f:?}")) as i64
        })
        .collect()
}

/// The constants DTrace for Linux's own test prints (tst.uregsarray-constants.x86_64): R_PC R_SP
/// R_R0 R_R1 R_CS R_GS R_ES R_DS R_EDI R_ESI R_EBP R_EAX R_ESP R_EAX R_EBX R_ECX R_EDX R_TRAPNO
/// R_ERR R_EIP R_CS R_EFL R_SS.
#[test]
fn register_constants_are_dtrace_for_linux_numbers() {
    let names = "R_PC R_SP R_R0 R_R1 R_CS R_GS R_ES R_DS R_EDI R_ESI R_EBP R_EAX R_ESP R_EAX \
                 R_EBX R_ECX R_EDX R_TRAPNO R_ERR R_EIP R_CS R_EFL R_SS";
    let body: String = names
        .split_whitespace()
        .map(|n| format!("trace({n});"))
        .collect();
    let v = values(&format!("BEGIN {{ {body} }}"));
    assert_eq!(
        v,
        [16, 19, 10, 5, 17, 24, 22, 21, 14, 13, 4, 10, 19, 10, 5, 11, 12, 25, 15, 16, 17, 18, 20]
    );
    // the 64-bit names: struct pt_regs order
    let names = "R_R15 R_R14 R_R13 R_R12 R_RBP R_RBX R_R11 R_R10 R_R9 R_R8 R_RAX R_RCX R_RDX \
                 R_RSI R_RDI R_ERR R_RIP R_CS R_RFL R_RSP R_SS R_DS R_ES R_FS R_GS R_TRAPNO \
                 R_FP R_PS";
    let body: String = names
        .split_whitespace()
        .map(|n| format!("trace({n});"))
        .collect();
    let v = values(&format!("BEGIN {{ {body} }}"));
    let mut want: Vec<i64> = (0..=25).collect();
    want.extend([4, 18]);
    assert_eq!(v, want);
}

/// `uregs[R_PC]` loads element 16 of the built-in array `uregs` (`ldga`), typed `uint64_t`.
#[test]
fn uregs_element_is_an_ldga_of_the_constant_index() {
    let p = compile("BEGIN { trace(uregs[R_PC]); }", &CompileOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let o = p.ecbs[0].actions[0].difo.as_ref().expect("object");
    assert_eq!(o.rtype.size, 8);
    assert!(o.inttab.contains(&16), "{:?}", o.inttab);
    let ldga = o
        .text
        .iter()
        .filter_map(|w| Instr::decode(*w).ok())
        .any(|i| matches!(i, Instr::LoadArray { var, .. } if u32::from(var) == DIF_VAR_UREGS));
    assert!(ldga, "an ldga of uregs");
    // the library is loaded only when named: a program that does not use it has no R_PC
    let e = compile("BEGIN { trace(R_PCX); }", &CompileOptions::default()).unwrap_err();
    assert_eq!(e.tag, ErrTag::D_IDENT_UNDEF);
}

fn golden(src: &str, tag: ErrTag, msg: &str) {
    let e = compile(src, &CompileOptions::default()).expect_err(src);
    assert_eq!((e.tag, e.message.as_str()), (tag, msg), "{src}");
}

#[test]
fn index_checks_are_dtraces() {
    golden(
        "BEGIN { i = R_SP; trace(uregs[i]); }",
        ErrTag::D_PROTO_ARG,
        "uregs[ ] argument #1 is incompatible with prototype:\n\tprototype: integer constant\n\t argument: int",
    );
    golden(
        "BEGIN { trace(regs[arg0]); }",
        ErrTag::D_PROTO_ARG,
        "regs[ ] argument #1 is incompatible with prototype:\n\tprototype: integer constant\n\t argument: int64_t",
    );
    golden(
        "BEGIN { trace(uregs[\"pc\"]); }",
        ErrTag::D_PROTO_ARG,
        "uregs[ ] argument #1 is incompatible with prototype:\n\tprototype: integer constant\n\t argument: string",
    );
    golden(
        "BEGIN { trace(uregs[42]); }",
        ErrTag::D_UNKNOWN,
        "uregs[]: index out of bounds (42)",
    );
    golden(
        "BEGIN { trace(uregs[R_TRAPNO + 1]); }",
        ErrTag::D_UNKNOWN,
        "uregs[]: index out of bounds (26)",
    );
    golden(
        "BEGIN { trace(uregs[-1]); }",
        ErrTag::D_REGS_IDX,
        "index -1 is out of range for array uregs",
    );
    golden(
        "BEGIN { trace(regs[-2]); }",
        ErrTag::D_REGS_IDX,
        "index -2 is out of range for array regs",
    );
    golden(
        "BEGIN { trace(uregs[FOO]); }",
        ErrTag::D_IDENT_UNDEF,
        "failed to resolve FOO: Unknown variable name",
    );
    golden(
        "BEGIN { trace(uregs[1, 2]); }",
        ErrTag::D_PROTO_LEN,
        "uregs[ ] prototype mismatch: 2 args passed, 1 expected",
    );
    // every index up to R_TRAPNO compiles
    for i in 0..=25 {
        compile(
            &format!("BEGIN {{ trace(uregs[{i}]); }}"),
            &CompileOptions::default(),
        )
        .unwrap_or_else(|e| panic!("uregs[{i}]: {e}"));
    }
}
