//! Tests of the DIF data-flow.

use super::*;
use crate::asm::assemble;
use crate::instr::Instr;
use crate::opcode::Opcode;

/// Records the state before every `ret` and every `call`.
#[derive(Default)]
struct Seen {
    rets: Vec<Value>,
    calls: Vec<Vec<Value>>,
}

impl Visitor for Seen {
    fn visit(&mut self, _pc: usize, ins: &Instr, state: &State) -> Option<Value> {
        match *ins {
            Instr::Ret { rd } => self.rets.push(state.reg(rd)),
            Instr::Call { .. } => {
                self.calls.push(state.stack.clone());
                return Some(Value::Const(99));
            }
            _ => {}
        }
        None
    }
}

fn run(src: &str) -> Seen {
    let obj = assemble(src).unwrap_or_else(|e| panic!("{e}"));
    let mut seen = Seen::default();
    walk(&obj, Limits { user_hops: 2 }, &mut seen);
    seen
}

#[test]
fn chains_of_members_from_curthread() {
    // curthread->(at 16)->(at 8): two loads, each a hop.
    let s = run(
        "ldgs curthread, %r1\nsetx 16, %r2\nadd %r1, %r2, %r1\nldx [%r1], %r1\n\
         setx 8, %r2\nadd %r1, %r2, %r1\nldx [%r1], %r1\nret %r1",
    );
    assert_eq!(
        s.rets,
        vec![Value::Addr(AddrExpr::kernel(
            AddrBase::CurrentTask,
            16,
            vec![8, 0]
        ))]
    );
}

#[test]
fn constants_fold_and_arguments_are_addresses() {
    let s = run("setx 6, %r1\nsetx 7, %r2\nmul %r1, %r2, %r3\nret %r3");
    assert_eq!(s.rets, vec![Value::Const(42)]);
    let s = run("ldgs arg3, %r1\nret %r1");
    assert_eq!(s.rets, vec![Value::Addr(AddrExpr::arg(3))]);
    assert_eq!(s.rets[0].plain_arg(), Some(3));
    // %r0 is zero whatever is written to it.
    let s = run("ldgs arg3, %r0\nret %r0");
    assert_eq!(s.rets, vec![Value::Const(0)]);
}

#[test]
fn branches_join_an_address_with_a_constant_arm() {
    // arg0 ? arg0 + 8 : 0
    let s = run(
        "ldgs arg0, %r1\ntst %r1\nbe zero\nsetx 8, %r2\nadd %r1, %r2, %r3\nba out\n\
         zero:\nmov %r0, %r3\nout:\nret %r3",
    );
    assert_eq!(
        s.rets,
        vec![Value::Addr(AddrExpr::kernel(AddrBase::Arg(0), 8, vec![]))]
    );
    // Two different addresses: unknown.
    let s = run(
        "ldgs arg0, %r1\ntst %r1\nbe other\nldgs arg1, %r3\nba out\n\
         other:\nldgs arg2, %r3\nout:\nret %r3",
    );
    assert_eq!(s.rets, vec![Value::Unknown]);
    // An argument and a non-zero constant: a length limited by the constant.
    assert_eq!(
        Value::Addr(AddrExpr::arg(2)).join(Value::Const(64)),
        Value::ArgAtMost { arg: 2, max: 64 }
    );
}

#[test]
fn the_tuple_stack_gives_a_call_its_arguments() {
    let s = run(
        "ldgs arg1, %r1\nsetx 32, %r2\nflushts\npushtv int, %r1\npushtv int, %r2\n\
         call copyin, %r3\nret %r3",
    );
    assert_eq!(
        s.calls,
        vec![vec![Value::Addr(AddrExpr::arg(1)), Value::Const(32)]]
    );
    // The visitor decided the call's value.
    assert_eq!(s.rets, vec![Value::Const(99)]);
}

#[test]
fn arrays_indexed_by_an_argument() {
    // ((int)arg0) * 8 added to curthread + 24.
    let s = run(
        "ldgs arg0, %r1\nsetx 32, %r2\nsll %r1, %r2, %r1\nsra %r1, %r2, %r1\n\
         setx 8, %r2\nmul %r1, %r2, %r1\nldgs curthread, %r3\nsetx 24, %r2\n\
         add %r3, %r2, %r3\nadd %r3, %r1, %r3\nret %r3",
    );
    let mut want = AddrExpr::kernel(AddrBase::CurrentTask, 24, vec![]);
    want.index = Some(ArgIndex {
        hop: 0,
        arg: 0,
        scale: 8,
        sext32: true,
    });
    assert_eq!(s.rets, vec![Value::Addr(want)]);
}

#[test]
fn user_hops_through_scratch_stop_at_the_limit() {
    let e = AddrExpr::arg(1);
    let one = Value::Scratch(e.clone()).load(Opcode::Ldx, 1);
    let mut want = e.clone();
    want.user_derefs.push(0);
    assert_eq!(one, Value::Addr(want.clone()));
    assert_eq!(Value::Scratch(want).load(Opcode::Ldx, 1), Value::Unknown);
    // A narrow load of a pointer is not a pointer.
    assert_eq!(Value::Scratch(e).load(Opcode::Lduw, 1), Value::Unknown);
}

#[test]
fn offsets_that_leave_32_bits_are_unknown() {
    let e = AddrExpr::kernel(AddrBase::CurrentTask, i32::MAX, vec![]);
    assert_eq!(e.offset_by(1), None);
    assert_eq!(
        Value::alu(Opcode::Add, &Value::Addr(e), &Value::Const(1)),
        Value::Unknown
    );
    assert_eq!(fold(Opcode::Sll, 1, 64), None);
    assert_eq!(kernel_load_size(Opcode::Lduh), Some(2));
}

#[test]
fn arbitrary_words_never_panic() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..2000 {
        let text: Vec<u32> = (0..16)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u32
            })
            .collect();
        let obj = crate::object::DifObject {
            text,
            inttab: vec![32, 8],
            ..Default::default()
        };
        walk(&obj, Limits { user_hops: 4 }, &mut Seen::default());
    }
}
