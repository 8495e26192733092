//! Every verifier rule, each violation with its location and message.

use dtrace_dif::asm::assemble;
use dtrace_dif::object::{DifObject, DifType, VarEntry};
use dtrace_dif::verify::{verify, Location};

fn errors(o: &DifObject) -> Vec<(Location, String)> {
    match verify(o) {
        Ok(()) => Vec::new(),
        Err(e) => e.violations.into_iter().map(|v| (v.at, v.msg)).collect(),
    }
}

fn words(text: &[u32]) -> DifObject {
    DifObject {
        text: text.to_vec(),
        inttab: vec![1],
        strtab: b"a\0".to_vec(),
        rtype: DifType::integer(8),
        ..Default::default()
    }
}

fn has(o: &DifObject, pc: u32, msg: &str) {
    let e = errors(o);
    assert!(
        e.iter()
            .any(|(at, m)| *at == Location::Instr(pc) && m == msg),
        "expected {msg:?} at {pc}, got {e:?}"
    );
}

const RET: u32 = 0x2300_0001;

#[test]
fn good_objects_pass() {
    let o = assemble(
        ".var x 0x500 scl glb int 8\nsetx 1, %r1\nstgs %r1, x\ncall strlen, %r2\nret %r1\n",
    )
    .unwrap();
    assert_eq!(errors(&o), vec![]);
}

#[test]
fn registers() {
    has(&words(&[0x0709_0102, RET]), 0, "invalid register 9");
    has(&words(&[0x0701_0902, RET]), 0, "invalid register 9");
    has(&words(&[0x0701_0209, RET]), 0, "invalid register 9");
    has(&words(&[0x0701_0200, RET]), 0, "cannot write to %r0");
    has(&words(&[0x2300_0009]), 0, "invalid register 9");
    has(&words(&[0x3c01_0000, RET]), 0, "cannot write to 0 address");
    has(&words(&[0x2500_0000, RET]), 0, "cannot write to %r0");
}

#[test]
fn reserved_bits() {
    has(&words(&[0x0e01_0102, RET]), 0, "non-zero reserved bits"); // mov with r2
    has(&words(&[0x0f01_0201, RET]), 0, "non-zero reserved bits"); // cmp with rd
    has(&words(&[0x1001_0100, RET]), 0, "non-zero reserved bits"); // tst with r2
    has(&words(&[0x2400_0001, RET]), 0, "non-zero reserved bits"); // nop
    has(&words(&[0x2301_0001]), 0, "non-zero reserved bits"); // ret with r1
    has(&words(&[0x1f01_0102, RET]), 0, "non-zero reserved bits"); // ldub with r2
}

#[test]
fn branches() {
    has(&words(&[0x1100_0000, RET]), 0, "backward branch to 0");
    has(
        &words(&[0x2400_0000, 0x1200_0000, RET]),
        1,
        "backward branch to 0",
    );
    has(&words(&[0x1100_0005, RET]), 0, "invalid branch target 5");
    assert_eq!(errors(&words(&[0x1100_0001, RET])), vec![]);
}

#[test]
fn tables_and_variables() {
    has(&words(&[0x2500_0501, RET]), 0, "invalid integer ref 5");
    has(&words(&[0x2600_0501, RET]), 0, "invalid string ref 5");
    has(&words(&[0x2900_0101, RET]), 0, "invalid variable 1"); // ldgs below OTHER_MIN
    has(&words(&[0x2904_0001, RET]), 0, "invalid variable 1024"); // unknown built-in
    has(&words(&[0x2a01_0001, RET]), 0, "invalid variable 256"); // stgs to built-in
    has(
        &words(&[0x2c05_0001, RET]),
        0,
        "variable 1280 is not a thread-local scalar of the variable table",
    );
    has(
        &words(&[0x3405_0001, RET]),
        0,
        "variable 1280 is not a global array of the variable table",
    );
    has(
        &words(&[0x3805_0001, RET]),
        0,
        "variable 1280 is not a clause-local scalar of the variable table",
    );
    has(&words(&[0x2805_0001, RET]), 0, "invalid array 5");
    has(&words(&[0x2b00_0001, RET]), 0, "invalid array 0"); // ldta
    has(&words(&[0x2fff_ff01, RET]), 0, "invalid subr 65535");
    has(&words(&[0x3005_0001, RET]), 0, "invalid ref type 5");
    has(&words(&[0x3101_0001, RET]), 0, "invalid val type 1");
    has(
        &words(&[0x4e00_0001, RET]),
        0,
        "xlate is resolved by the compiler and cannot be executed",
    );
    has(&words(&[0x0000_0000, RET]), 0, "invalid opcode 0");
    has(&words(&[0x5000_0000, RET]), 0, "invalid opcode 80");
}

#[test]
fn ret_and_return_type() {
    has(
        &words(&[0x2400_0000]),
        0,
        "expected 'ret' as last DIF instruction",
    );
    let e = errors(&DifObject::default());
    assert_eq!(e[0].0, Location::Object);
    let mut o = words(&[RET]);
    o.rtype = DifType::integer(3);
    assert_eq!(
        errors(&o),
        vec![(Location::Object, "bad return size".to_string())]
    );
    o.rtype = DifType::string(256);
    assert_eq!(errors(&o), vec![]);
}

#[test]
fn tuple_stack_depth() {
    let mut text = vec![0x3100_0001; 9];
    text.push(RET);
    has(&words(&text), 8, "tuple stack overflow: depth 9 exceeds 8");
    let mut ok = vec![0x3100_0001; 8];
    ok.push(0x3300_0000); // flushts
    ok.push(0x3100_0001);
    ok.push(RET);
    assert_eq!(errors(&words(&ok)), vec![]);
    // Depth flows through branches: 5 pushes, branch over 3 more, then 1 more is still fine on the
    // branch path but the fall-through path has 9.
    let mut b = vec![0x3100_0001; 5];
    b.push(0x1100_000a); // ba 10
    b.extend([0x3100_0001; 4]); // 6..9
    b.push(0x3100_0001); // 10
    b.push(RET);
    assert_eq!(errors(&words(&b)), vec![]); // ba skips 6..9
    let mut c = vec![0x3100_0001; 5];
    c.push(0x1200_000a); // be 10
    c.extend([0x3100_0001; 4]);
    c.push(0x3100_0001);
    c.push(RET);
    has(&words(&c), 9, "tuple stack overflow: depth 9 exceeds 8");
}

#[test]
fn variable_table_entries() {
    let var = |id, kind, scope, ty| VarEntry {
        name: 0,
        id,
        kind,
        scope,
        flags: 1,
        ty,
    };
    let mut o = words(&[RET]);
    o.vartab = vec![
        var(0x500, 1, 7, DifType::integer(8)),
        var(0x501, 5, 0, DifType::integer(8)),
        var(0x10000, 1, 0, DifType::integer(8)),
        var(0x502, 1, 0, DifType::string(0)),
        var(0x503, 0, 2, DifType::integer(8)),
        var(0x504, 1, 0, DifType::string(1 << 21)),
        VarEntry {
            name: 99,
            ..var(0x505, 1, 0, DifType::integer(8))
        },
    ];
    let e = errors(&o);
    let want = [
        (0, "unrecognized variable scope 7"),
        (1, "unrecognized variable type 5"),
        (2, "65536 exceeds variable id limit"),
        (3, "zero-sized variable"),
        (4, "clause-local arrays are not supported"),
        (5, "oversized by-ref variable"),
        (6, "invalid variable name ref 99"),
    ];
    for (i, m) in want {
        assert!(e.contains(&(Location::Var(i), m.to_string())), "{m}: {e:?}");
    }
}

#[test]
fn every_violation_is_reported_and_displayed() {
    let o = words(&[0x0709_0100, 0x1100_0000]);
    let err = verify(&o).unwrap_err();
    assert!(err.violations.len() >= 4);
    let text = err.to_string();
    assert!(
        text.contains("DIF offset 0 (instruction 0): invalid register 9"),
        "{text}"
    );
    assert!(
        text.contains("DIF offset 4 (instruction 1): backward branch to 0"),
        "{text}"
    );
}
