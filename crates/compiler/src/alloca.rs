//! alloca pointers as a property of values (DTrace for Linux's `DT_NF_ALLOCA`): what `alloca()`
//! (or `copyin()`) returns, and what casts, pointer arithmetic and variables holding it carry on, points into the
//! scratch space. A variable holds alloca pointers or other pointers, never both, whichever clause
//! assigns it; a `?:` whose arms differ in this cannot be assigned to one (`D_ALLOCA_INCOMPAT`).

use dtrace_dif::subr::Subr;

use crate::ast::BinOp;
use crate::check::Checker;
use crate::error::{err, CResult, ErrTag};
use crate::tree::{Place, TExpr, TK};

/// What kind of pointer a value is, as far as alloca goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocaKind {
    /// Not a pointer, or NULL (either kind may hold it).
    Neither,
    /// Points into the scratch space.
    Alloca,
    /// Any other pointer.
    Plain,
    /// Either, depending on a condition.
    Mixed,
}

impl AllocaKind {
    fn join(self, other: AllocaKind) -> AllocaKind {
        use AllocaKind::*;
        match (self, other) {
            (Neither, k) | (k, Neither) => k,
            (a, b) if a == b => a,
            _ => Mixed,
        }
    }
}

impl Checker<'_> {
    /// The alloca kind of the value of `e`.
    pub(crate) fn alloca_kind(&self, e: &TExpr) -> AllocaKind {
        let pointer = self.types.is_pointer(e.ty);
        match &e.kind {
            // copyin() copies into scratch space it allocates as alloca() does
            TK::Call(s, _) if *s == Subr::Alloca as u16 || *s == Subr::Copyin as u16 => {
                AllocaKind::Alloca
            }
            TK::NonNull(x) => self.alloca_kind(x),
            TK::Retype(x) | TK::Convert(x) => match self.alloca_kind(x) {
                // an integer made a pointer (`(char *)50`) is a plain one
                AllocaKind::Neither if pointer && x.as_const() != Some(0) => AllocaKind::Plain,
                k => k,
            },
            TK::Binary(BinOp::Add | BinOp::Sub, l, r) if pointer => {
                self.alloca_kind(l).join(self.alloca_kind(r))
            }
            TK::Cond(_, a, b) => self.alloca_kind(a).join(self.alloca_kind(b)),
            TK::Assign(_, v) | TK::Comma(_, v) => self.alloca_kind(v),
            TK::Read(p) if matches!(**p, Place::Var(_) | Place::Assoc(..)) => {
                let (Place::Var(v) | Place::Assoc(v, _)) = &**p else {
                    return AllocaKind::Neither;
                };
                match self.var_alloca(v.scope, &v.name) {
                    Some(true) => AllocaKind::Alloca,
                    Some(false) => AllocaKind::Plain,
                    None if pointer => AllocaKind::Plain,
                    None => AllocaKind::Neither,
                }
            }
            _ if pointer && e.as_const() != Some(0) => AllocaKind::Plain,
            _ => AllocaKind::Neither,
        }
    }

    fn var_alloca(&self, scope: crate::ast::VarScope, name: &str) -> Option<bool> {
        let t = match scope {
            crate::ast::VarScope::Global => &self.globals,
            crate::ast::VarScope::Thread => &self.tls,
            crate::ast::VarScope::Local => &self.locals,
        };
        t.vars.get(name).and_then(|v| v.alloca)
    }

    /// Notes that `place` is assigned `v`: a variable's first pointer decides whether it holds
    /// alloca pointers; a pointer of the other kind later is an error, as is a `?:` of both.
    pub(crate) fn assign_alloca(&mut self, place: &Place, v: &TExpr, line: u32) -> CResult<()> {
        let (Place::Var(var) | Place::Assoc(var, _)) = place else {
            return Ok(());
        };
        let is_alloca = match self.alloca_kind(v) {
            AllocaKind::Neither => return Ok(()),
            AllocaKind::Alloca => true,
            AllocaKind::Plain => false,
            AllocaKind::Mixed => {
                return err(
                    ErrTag::D_ALLOCA_INCOMPAT,
                    line,
                    "ternary conditional with alloca and non-alloca branches cannot be assigned to a variable",
                )
            }
        };
        let Some(info) = self.table(var.scope).vars.get_mut(&var.name) else {
            return Ok(());
        };
        match info.alloca {
            Some(was) if was != is_alloca => err(
                ErrTag::D_ALLOCA_INCOMPAT,
                line,
                format!(
                    "{}: cannot reuse the same identifier for both alloca and non-alloca allocations",
                    var.name
                ),
            ),
            _ => {
                info.alloca = Some(is_alloca);
                Ok(())
            }
        }
    }
}
