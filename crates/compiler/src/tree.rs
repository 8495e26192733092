//! The typed tree the checker produces from the AST and the code generator consumes: every expression
//! carries its type, identifiers are resolved to variables, built-ins or constants, and C's implicit
//! conversions and pointer scaling are explicit.

use crate::ast::{BinOp, UnOp, VarScope};
use crate::types::TypeId;

/// A resolved user variable.
#[derive(Debug, Clone, PartialEq)]
pub struct VarRef {
    /// Scope (global, thread-local, clause-local).
    pub scope: VarScope,
    /// Variable id (from `DIF_VAR_OTHER_UBASE` up, per scope).
    pub id: u32,
    /// Name (for the variable table).
    pub name: String,
    /// Associative array (keys on the tuple stack) or scalar.
    pub array: bool,
    /// Type of the variable (array: element type).
    pub ty: TypeId,
}

/// Something that can be read, and perhaps assigned.
#[derive(Debug, Clone, PartialEq)]
pub enum Place {
    /// A scalar D variable.
    Var(VarRef),
    /// An associative array element.
    Assoc(VarRef, Vec<TExpr>),
    /// Memory at an address (kernel or, with `user`, user space).
    Mem(Box<TExpr>, bool),
    /// A bit-field: the field described by the [`crate::types::BitField`] in the unsigned word of
    /// `load` bytes at the address (kernel or, with `user`, user space). Read, the word is loaded
    /// and the field shifted down, masked or sign-extended per the reading expression's type;
    /// written, the word is loaded, the field's bits replaced, and the word stored back (DTrace's
    /// `dt_cg_field_get`/`dt_cg_field_set`).
    Bits(Box<TExpr>, bool, crate::types::BitField),
}

/// How a comparison compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpKind {
    Signed,
    Unsigned,
    String,
}

/// A typed expression.
#[derive(Debug, Clone, PartialEq)]
pub struct TExpr {
    pub kind: TK,
    pub ty: TypeId,
    pub line: u32,
}

/// Typed expression forms.
#[derive(Debug, Clone, PartialEq)]
pub enum TK {
    /// Integer constant (already converted to `ty`).
    Int(u64),
    /// String constant.
    Str(Vec<u8>),
    /// The value of a place (a load for scalars in memory; the address for by-reference objects).
    Read(Box<Place>),
    /// A built-in scalar variable.
    Builtin(u32),
    /// An element of a built-in array variable (`args[i]`, `regs[i]`).
    BuiltinArray(u32, Box<TExpr>),
    /// `-e`, `~e`, `!e`.
    Unary(UnOp, Box<TExpr>),
    /// Arithmetic or bitwise operation; signedness from `ty`.
    Binary(BinOp, Box<TExpr>, Box<TExpr>),
    /// A comparison yielding 0 or 1.
    Cmp(BinOp, Box<TExpr>, Box<TExpr>, CmpKind),
    /// `&&`, `||`, `^^`.
    Logical(BinOp, Box<TExpr>, Box<TExpr>),
    Cond(Box<TExpr>, Box<TExpr>, Box<TExpr>),
    /// Store into a place; the value is the stored value.
    Assign(Box<Place>, Box<TExpr>),
    /// `++`/`--`: add `delta` to the place; `post` yields the old value.
    IncDec {
        place: Box<Place>,
        delta: i64,
        post: bool,
    },
    /// A subroutine call.
    Call(u16, Vec<TExpr>),
    /// Integer conversion of the operand to `ty` (truncation and sign or zero extension).
    Convert(Box<TExpr>),
    /// A change of type only (casts between pointers, `stringof`).
    Retype(Box<TExpr>),
    /// The pointer of a `->` read through: its value, faulting with an invalid address at 0
    /// when it is NULL (DTrace for Linux checks the pointer before adding the member's offset,
    /// so `((struct task_struct *)NULL)->pid` faults at address 0, not at the member's offset).
    NonNull(Box<TExpr>),
    Comma(Box<TExpr>, Box<TExpr>),
    /// A translation not yet expanded: translator number `.0` of the checker applied to the input
    /// `.1`. It exists only between the checker's steps (the base of `.`/`->` selects one member's
    /// conversion); any other use expands it into [`TK::XlateStruct`].
    Xlate(usize, Box<TExpr>),
    /// A translated struct built in scratch: its size and the members the translator converts
    /// (byte offset, value converted to the member's type). The value is the struct's address.
    XlateStruct(u64, Vec<(u32, Option<crate::types::BitField>, TExpr)>),
    /// A tracing or aggregating function named in an expression: it types as `void` (so that
    /// the operators and functions around it report what they require, as DTrace's `dt_cook_func`
    /// lets them), and code generation refuses it (`D_CG_EXPR`).
    Action(String),
}

impl TExpr {
    /// Whether this is the value of a bit-field (no address, no `sizeof`).
    pub fn is_bitfield(&self) -> bool {
        matches!(&self.kind, TK::Read(p) if matches!(p.as_ref(), Place::Bits(..)))
    }

    /// A constant.
    pub fn int(v: u64, ty: TypeId, line: u32) -> TExpr {
        TExpr {
            kind: TK::Int(v),
            ty,
            line,
        }
    }

    /// The constant value, if this is a constant.
    pub fn as_const(&self) -> Option<u64> {
        match self.kind {
            TK::Int(v) => Some(v),
            _ => None,
        }
    }
}

/// Node count and depth of a typed expression (bounds inline expansion).
pub fn stats(e: &TExpr) -> (usize, usize) {
    fn place(p: &Place) -> (usize, usize) {
        match p {
            Place::Var(_) => (1, 1),
            Place::Assoc(_, k) => list(k),
            Place::Mem(a, _) | Place::Bits(a, _, _) => stats(a),
        }
    }
    fn list(v: &[TExpr]) -> (usize, usize) {
        v.iter().fold((1, 1), |(n, d), e| {
            let (a, b) = stats(e);
            (n + a, d.max(b + 1))
        })
    }
    let kids: (usize, usize) = match &e.kind {
        TK::Int(_) | TK::Str(_) | TK::Builtin(_) | TK::Action(_) => (0, 0),
        TK::Read(p) => place(p),
        TK::BuiltinArray(_, x)
        | TK::Unary(_, x)
        | TK::Convert(x)
        | TK::Retype(x)
        | TK::NonNull(x) => stats(x),
        TK::Binary(_, a, b) | TK::Cmp(_, a, b, _) | TK::Logical(_, a, b) | TK::Comma(a, b) => {
            let (x, y) = (stats(a), stats(b));
            (x.0 + y.0, x.1.max(y.1))
        }
        TK::Cond(a, b, c) => list(&[(**a).clone(), (**b).clone(), (**c).clone()]),
        TK::Assign(p, v) => {
            let (x, y) = (place(p), stats(v));
            (x.0 + y.0, x.1.max(y.1))
        }
        TK::IncDec { place: p, .. } => place(p),
        TK::Call(_, a) => list(a),
        TK::Xlate(_, x) => stats(x),
        TK::XlateStruct(_, m) => m.iter().fold((1, 1), |(n, d), (_, _, e)| {
            let (a, b) = stats(e);
            (n + a, d.max(b + 1))
        }),
    };
    (kids.0 + 1, kids.1 + 1)
}

/// The expressions directly inside `e` (places' addresses and keys included).
pub fn children(e: &TExpr) -> Vec<&TExpr> {
    fn place(p: &Place) -> Vec<&TExpr> {
        match p {
            Place::Var(_) => vec![],
            Place::Assoc(_, k) => k.iter().collect(),
            Place::Mem(a, _) | Place::Bits(a, _, _) => vec![a],
        }
    }
    match &e.kind {
        TK::Int(_) | TK::Str(_) | TK::Builtin(_) | TK::Action(_) => vec![],
        TK::Read(p) => place(p),
        TK::BuiltinArray(_, x)
        | TK::Unary(_, x)
        | TK::Convert(x)
        | TK::Retype(x)
        | TK::NonNull(x)
        | TK::Xlate(_, x) => vec![x],
        TK::Binary(_, a, b) | TK::Cmp(_, a, b, _) | TK::Logical(_, a, b) | TK::Comma(a, b) => {
            vec![a, b]
        }
        TK::Cond(a, b, c) => vec![a, b, c],
        TK::Assign(p, v) => {
            let mut k = place(p);
            k.push(v);
            k
        }
        TK::IncDec { place: p, .. } => place(p),
        TK::Call(_, a) => a.iter().collect(),
        TK::XlateStruct(_, m) => m.iter().map(|(_, _, e)| e).collect(),
    }
}

/// Whether `e` calls a subroutine for which `pred` holds.
pub fn calls(e: &TExpr, pred: &dyn Fn(u16) -> bool) -> bool {
    matches!(e.kind, TK::Call(s, _) if pred(s)) || children(e).into_iter().any(|c| calls(c, pred))
}
