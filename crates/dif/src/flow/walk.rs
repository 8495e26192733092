//! The walk of one DIF object: a single forward pass over its instructions (DIF branches only go
//! forward) that keeps what each register holds ([`Value`]) and what the tuple stack holds,
//! joining register states where branches meet, and hands each instruction with the state before
//! it to a [`Visitor`]. The visitor records what the object does (the memory it reads, the
//! variables it uses) and decides the values the lattice cannot know by itself: variables other
//! than the probe arguments and `curthread`, and subroutine results.

use super::value::{curthread, kernel_load_size, Value};
use crate::instr::{Instr, Reg};
use crate::object::DifObject;
use crate::opcode::Opcode;
use crate::vars;
use std::collections::HashMap;

/// Registers of a DIF object (`DIF_DIR_NREGS`).
pub const NREGS: usize = crate::verify::NREGS as usize;

/// What the walk knows before an instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    /// The registers (`%r0` always holds 0).
    pub regs: [Value; NREGS],
    /// The values pushed on the tuple stack (`pushtr`, `pushtv`) since the last `flushts`, in
    /// order: a subroutine's arguments at its `call`.
    pub stack: Vec<Value>,
}

impl Default for State {
    fn default() -> Self {
        State {
            regs: std::array::from_fn(|_| Value::Unknown),
            stack: Vec::new(),
        }
    }
}

impl State {
    /// What register `r` holds (`%r0` is 0; a register past the last is unknown).
    pub fn reg(&self, r: Reg) -> Value {
        match r {
            0 => Value::Const(0),
            _ => self
                .regs
                .get(usize::from(r))
                .cloned()
                .unwrap_or(Value::Unknown),
        }
    }

    fn set(&mut self, rd: Reg, v: Value) {
        if let Some(r) = self.regs.get_mut(usize::from(rd)) {
            *r = if rd == 0 { Value::Const(0) } else { v };
        }
    }
}

/// What an analysis does with each instruction of a walk.
pub trait Visitor {
    /// Sees `ins` at `pc` with the state before it. Returns the value the instruction's
    /// destination register takes when the visitor decides it (a variable load, a subroutine's
    /// result, a load it will not follow); `None` leaves it to the lattice, which knows constants,
    /// moves, ALU operations, loads through addresses, `argN`, `args[N]`, `curthread` and string
    /// constants, and takes everything else as unknown.
    fn visit(&mut self, pc: usize, ins: &Instr, state: &State) -> Option<Value>;

    /// Sees the registers one path carries into instruction `to`, where paths join, before
    /// they are joined: from the branch at `from`, or falling through from `from` (after it).
    /// The default ignores them.
    fn edge(&mut self, from: usize, to: usize, regs: &[Value; NREGS]) {
        let _ = (from, to, regs);
    }
}

/// Limits of a walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// User pointer hops followed through scratch copies of user memory (past them a loaded
    /// pointer is unknown).
    pub user_hops: usize,
}

/// Walks `obj` once, forward, handing each instruction that decodes to `visitor` (words that do not
/// decode are skipped). Where branches join, a register keeps what the paths agree on (see
/// [`Value::join`]); a branch backwards (invalid DIF) carries nothing. The tuple stack follows the
/// instructions in order, not the paths.
pub fn walk(obj: &DifObject, limits: Limits, visitor: &mut impl Visitor) {
    let mut state = State::default();
    // Register states carried by branches to each later instruction; whether the previous
    // instruction falls through.
    let mut incoming: HashMap<usize, Vec<(usize, [Value; NREGS])>> = HashMap::new();
    let mut falls_through = true;
    for (pc, &word) in obj.text.iter().enumerate() {
        if let Some(states) = incoming.remove(&pc) {
            if falls_through {
                visitor.edge(pc.saturating_sub(1), pc, &state.regs);
            }
            let mut joined = falls_through.then(|| state.regs.clone());
            for (from, regs) in states {
                visitor.edge(from, pc, &regs);
                joined = Some(match joined {
                    None => regs,
                    Some(a) => join(a, regs),
                });
            }
            if let Some(j) = joined {
                state.regs = j;
            }
        }
        falls_through = true;
        let Ok(ins) = Instr::decode(word) else {
            continue;
        };
        let decided = visitor.visit(pc, &ins, &state);
        match ins {
            Instr::Branch { op, label } => {
                if label as usize > pc {
                    incoming
                        .entry(label as usize)
                        .or_default()
                        .push((pc, state.regs.clone()));
                }
                falls_through = op != Opcode::Ba;
            }
            Instr::Ret { .. } => falls_through = false,
            Instr::Pushtr { rs, .. } | Instr::Pushtv { rs, .. } => {
                let v = state.reg(rs);
                state.stack.push(v);
            }
            Instr::Popts => {
                state.stack.pop();
            }
            Instr::Flushts => state.stack.clear(),
            _ => {}
        }
        if let Some((rd, v)) = destination(obj, &ins, &state, limits) {
            state.set(rd, decided.unwrap_or(v));
        }
    }
}

/// Registers where two paths join.
fn join(a: [Value; NREGS], b: [Value; NREGS]) -> [Value; NREGS] {
    let mut b = b.into_iter();
    a.map(|x| x.join(b.next().unwrap_or(Value::Unknown)))
}

/// The register `ins` writes and the value the lattice gives it.
fn destination(obj: &DifObject, ins: &Instr, s: &State, limits: Limits) -> Option<(Reg, Value)> {
    Some(match *ins {
        Instr::Setx { idx, rd } => (
            rd,
            obj.inttab
                .get(usize::from(idx))
                .map_or(Value::Unknown, |v| Value::Const(*v)),
        ),
        Instr::Mov { r1, rd } => (rd, s.reg(r1)),
        Instr::Alu { op, r1, r2, rd } => (rd, Value::alu(op, &s.reg(r1), &s.reg(r2))),
        Instr::Not { r1, rd } => (
            rd,
            match s.reg(r1) {
                Value::Const(x) => Value::Const(!x),
                _ => Value::Unknown,
            },
        ),
        Instr::Load { op, r1, rd } if kernel_load_size(op).is_some() => {
            (rd, s.reg(r1).load(op, limits.user_hops))
        }
        Instr::LoadVar {
            op: Opcode::Ldgs,
            var,
            rd,
        } => {
            let var = u32::from(var);
            let v = if (vars::DIF_VAR_ARG0..=vars::DIF_VAR_ARG0 + 9).contains(&var) {
                Value::Addr(super::AddrExpr::arg((var - vars::DIF_VAR_ARG0) as usize))
            } else if var == vars::DIF_VAR_CURTHREAD {
                curthread()
            } else {
                Value::Unknown
            };
            (rd, v)
        }
        Instr::LoadArray { var, r2, rd, .. } => {
            let v = match s.reg(r2) {
                Value::Const(i) if u32::from(var) == vars::DIF_VAR_ARGS && i < 10 => {
                    Value::Addr(super::AddrExpr::arg(i as usize))
                }
                _ => Value::Unknown,
            };
            (rd, v)
        }
        Instr::Sets { rd, .. } => (rd, Value::StrConst),
        Instr::Load { rd, .. }
        | Instr::LoadVar { rd, .. }
        | Instr::Call { rd, .. }
        | Instr::Copys { rd, .. }
        | Instr::Allocs { rd, .. }
        | Instr::Xlate { rd, .. } => (rd, Value::Unknown),
        Instr::Cmp { .. }
        | Instr::Scmp { .. }
        | Instr::Tst { .. }
        | Instr::Branch { .. }
        | Instr::Store { .. }
        | Instr::Ret { .. }
        | Instr::Nop
        | Instr::StoreVar { .. }
        | Instr::Pushtr { .. }
        | Instr::Pushtv { .. }
        | Instr::Popts
        | Instr::Flushts => return None,
    })
}
