//! The value lattice of the data-flow: what a DIF register is known to hold (a constant, an address
//! computed from a probe argument or `curthread`, an index by an argument, a length limited by a
//! constant), how the ALU operations and loads transform it, and what two paths agree on where
//! they join.

use super::addr::{AddrBase, AddrExpr, ArgIndex};
use crate::opcode::Opcode;

/// What a register is known to hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// Nothing known.
    Unknown,
    /// An integer constant.
    Const(u64),
    /// A value computable at the probe: the address (or, after the last hop, the pointer) an
    /// [`AddrExpr`] evaluates to. A plain probe argument is `Arg(n)` with no offset and no hops.
    Addr(AddrExpr),
    /// A string constant (`sets`): at a join with an address, the address (the `"<none>"` arm of
    /// `F == 0 ? "<none>" : stringof(F->...)`).
    StrConst,
    /// Argument `n` shifted left by 32 (the first half of its conversion to `int`).
    ArgHigh(u8),
    /// An array offset by a probe argument (`argN * scale`), to be added to an address.
    Index {
        /// The argument.
        arg: u8,
        /// Bytes per element.
        scale: i32,
        /// Converted to `int` first.
        sext32: bool,
    },
    /// The scratch buffer a `copyin` filled from the user address an [`AddrExpr`] gives, moved by
    /// the same offset as that address (`this->argv[1]` after `this->argv = copyin(arg1, 32)`):
    /// a pointer loaded from it is a user pointer hop of that address.
    Scratch(AddrExpr),
    /// A length taken from probe argument `arg` and limited to `max` (`arg2 & 0xfff`, or the
    /// constant arm of `arg2 > 64 ? 64 : arg2`): a copy it sizes takes at most `max` bytes of it.
    /// The limit is only a hint: the value itself may be larger.
    ArgAtMost {
        /// The argument.
        arg: usize,
        /// The limit.
        max: u64,
    },
}

impl Value {
    /// `argN` itself, unchanged.
    pub fn plain_arg(&self) -> Option<usize> {
        match self {
            Value::Addr(e) => e.plain_arg(),
            _ => None,
        }
    }

    /// The value of a register where two paths join: what they agree on, or the address one of
    /// them computed when the other holds a constant (the NULL arm of `T->mm ? T->mm->arg_start :
    /// 0`), or a probe argument limited by the non-zero constant of the other arm; else unknown.
    pub fn join(self, other: Value) -> Value {
        if let Some(v) = join_length(&self, &other) {
            return v;
        }
        match (self, other) {
            (a, b) if a == b => a,
            (Value::Addr(e), Value::Const(_) | Value::StrConst)
            | (Value::Const(_) | Value::StrConst, Value::Addr(e)) => Value::Addr(e),
            _ => Value::Unknown,
        }
    }

    /// The value of ALU operation `op` on `x` and `y`: constants folded, constant offsets added to
    /// addresses (and to scratch copies), arrays indexed by a probe argument, arguments masked by
    /// a constant; anything else unknown.
    pub fn alu(op: Opcode, x: &Value, y: &Value) -> Value {
        if let Some(v) = index_op(op, x, y) {
            return v;
        }
        match (op, x, y) {
            (Opcode::Add, Value::Addr(e), Value::Const(c))
            | (Opcode::Add, Value::Const(c), Value::Addr(e)) => {
                e.offset_by(*c as i64).map_or(Value::Unknown, Value::Addr)
            }
            (Opcode::Sub, Value::Addr(e), Value::Const(c)) => e
                .offset_by((*c as i64).wrapping_neg())
                .map_or(Value::Unknown, Value::Addr),
            (op, Value::Const(x), Value::Const(y)) => {
                fold(op, *x, *y).map_or(Value::Unknown, Value::Const)
            }
            (op, x, y) => alu_scratch_or_length(op, x, y),
        }
    }

    /// The value of a load by `op` from the address this value gives: a pointer read from a
    /// scratch copy of user memory is one more user hop (unknown past `max_user_hops`); a 64-bit
    /// kernel load from an address with no user hop is a pointer to follow; anything else unknown.
    pub fn load(&self, op: Opcode, max_user_hops: usize) -> Value {
        match (op, self) {
            (Opcode::Ldx, Value::Scratch(e)) if e.user_derefs.len() < max_user_hops => {
                let mut e = e.clone();
                e.user_derefs.push(0);
                Value::Addr(e)
            }
            (Opcode::Ldx, Value::Addr(e)) if e.user_derefs.is_empty() => {
                let mut next = e.clone();
                next.derefs.push(0);
                Value::Addr(next)
            }
            _ => Value::Unknown,
        }
    }
}

/// Constant folding of the ALU operations array indexing and member offsets use (`None`: not
/// folded, such as a shift by 64 or more).
pub fn fold(op: Opcode, x: u64, y: u64) -> Option<u64> {
    Some(match op {
        Opcode::Add => x.wrapping_add(y),
        Opcode::Sub => x.wrapping_sub(y),
        Opcode::Mul => x.wrapping_mul(y),
        Opcode::Sll => x.checked_shl(u32::try_from(y).ok()?)?,
        Opcode::Srl => x.checked_shr(u32::try_from(y).ok()?)?,
        Opcode::And => x & y,
        Opcode::Or => x | y,
        Opcode::Xor => x ^ y,
        _ => return None,
    })
}

/// Bytes a kernel load instruction reads (`None`: not a kernel load).
pub fn kernel_load_size(op: Opcode) -> Option<u32> {
    Some(match op {
        Opcode::Ldsb | Opcode::Ldub => 1,
        Opcode::Ldsh | Opcode::Lduh => 2,
        Opcode::Ldsw | Opcode::Lduw => 4,
        Opcode::Ldx => 8,
        _ => return None,
    })
}

/// The value of the ALU operations that index an array by a probe argument: `(int)argN` (a shift
/// left and an arithmetic shift right by 32), its scaling by the element size, and its addition to
/// an address (`fdt->fd[arg0]`). `None` when `op` is not one of them.
fn index_op(op: Opcode, x: &Value, y: &Value) -> Option<Value> {
    let arg = |v: &Value| v.plain_arg().and_then(|n| u8::try_from(n).ok());
    let scaled = |arg: u8, scale: i64, sext32: bool| {
        i32::try_from(scale)
            .ok()
            .map(|scale| Value::Index { arg, scale, sext32 })
    };
    match (op, x, y) {
        (Opcode::Sll, v, Value::Const(32)) => arg(v).map(Value::ArgHigh),
        (Opcode::Sra, Value::ArgHigh(n), Value::Const(32)) => scaled(*n, 1, true),
        (Opcode::Mul, v, Value::Const(c)) | (Opcode::Mul, Value::Const(c), v) => match v {
            Value::Index { arg, scale, sext32 } => {
                scaled(*arg, i64::from(*scale).checked_mul(*c as i64)?, *sext32)
            }
            v => scaled(arg(v)?, *c as i64, false),
        },
        (Opcode::Sll, Value::Index { arg, scale, sext32 }, Value::Const(k)) if *k < 16 => {
            scaled(*arg, i64::from(*scale) << k, *sext32)
        }
        (Opcode::Add, Value::Addr(e), Value::Index { arg, scale, sext32 })
        | (Opcode::Add, Value::Index { arg, scale, sext32 }, Value::Addr(e))
            if e.index.is_none()
                && e.user_derefs.is_empty()
                && x.plain_arg().is_none()
                && y.plain_arg().is_none() =>
        {
            let mut e = e.clone();
            e.index = Some(ArgIndex {
                hop: u8::try_from(e.derefs.len()).ok()?,
                arg: *arg,
                scale: *scale,
                sext32: *sext32,
            });
            Some(Value::Addr(e))
        }
        _ => None,
    }
}

/// ALU operations on scratch copies and lengths: an offset into a copy of user memory
/// (`this->argv + 8`) and a probe argument masked by a constant (`arg2 & 0xfff`).
fn alu_scratch_or_length(op: Opcode, x: &Value, y: &Value) -> Value {
    match (op, x, y) {
        (Opcode::Add, Value::Scratch(e), Value::Const(c))
        | (Opcode::Add, Value::Const(c), Value::Scratch(e)) => e
            .offset_by(*c as i64)
            .map_or(Value::Unknown, Value::Scratch),
        (Opcode::Sub, Value::Scratch(e), Value::Const(c)) => e
            .offset_by((*c as i64).wrapping_neg())
            .map_or(Value::Unknown, Value::Scratch),
        (Opcode::And, v, Value::Const(m)) | (Opcode::And, Value::Const(m), v) => match v {
            Value::ArgAtMost { arg, max } => Value::ArgAtMost {
                arg: *arg,
                max: (*max).min(*m),
            },
            v => v
                .plain_arg()
                .map_or(Value::Unknown, |arg| Value::ArgAtMost { arg, max: *m }),
        },
        _ => Value::Unknown,
    }
}

/// Where a probe argument and a non-zero constant join (`arg2 > 64 ? 64 : arg2`): a length of that
/// argument limited to the constant. Other joins are left to [`Value::join`].
fn join_length(a: &Value, b: &Value) -> Option<Value> {
    let (v, c) = match (a, b) {
        (v, Value::Const(c)) | (Value::Const(c), v) if *c != 0 => (v, *c),
        _ => return None,
    };
    match v {
        Value::ArgAtMost { arg, max } => Some(Value::ArgAtMost {
            arg: *arg,
            max: (*max).max(c),
        }),
        v => v.plain_arg().map(|arg| Value::ArgAtMost { arg, max: c }),
    }
}

/// The address of the current thread's task (`curthread`).
pub(super) fn curthread() -> Value {
    Value::Addr(AddrExpr::kernel(AddrBase::CurrentTask, 0, Vec::new()))
}
