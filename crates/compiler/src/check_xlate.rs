//! Translations. `xlate<T>(e)` and `xlate<T *>(e)` find the translator from the type of `e` to `T`
//! and cook to an unexpanded [`TK::Xlate`]. A member of it (`xlate<T *>(e)->m`, `curpsinfo->pr_pid`)
//! is the translator's conversion for `m` with the translator's parameter bound to `e`, so it
//! compiles to the plain loads the conversion names (nothing is built). Any other use of a
//! translation (`this->ps = xlate<psinfo_t>(curthread)`, `*curpsinfo`) expands it into
//! [`TK::XlateStruct`]: the whole struct built in scratch, member by member. A translated pointer
//! is no value of its own: an expression compiled by itself (a statement, a predicate, `trace()`'s
//! argument) that ends in one (`xlate<mine_t *>(curthread);`) is DTrace's `D_CG_DYN`, unless the
//! translation is the D library's (`trace(curcpu)` traces the pointer, as DTrace for Linux's
//! `curcpu` is real data there).
//!
//! Inline associative arrays (`fds[fd]`) live here too: their body, usually a translation, is
//! cooked at each use with the parameters bound to the keys.

use crate::ast::{Expr, ExprKind, TypeName};
use crate::check::{Checker, Inline};
use crate::error::{err, CResult, ErrTag};
use crate::tree::{TExpr, TK};
use crate::types::{TypeId, TypeKind};

fn bx<T>(t: T) -> Box<T> {
    Box::new(t)
}

impl Checker<'_> {
    /// `xlate<to>(x)`: the translator from the type of `x` to `to` (or to what `to` points to).
    pub(crate) fn cook_xlate(&mut self, tn: &TypeName, x: &Expr, line: u32) -> CResult<TExpr> {
        let to = self.resolve_type_name(tn)?;
        let out = if self.types.is_pointer(to) {
            self.types.pointee(to).unwrap_or(to)
        } else {
            to
        };
        let v = self.cook(x)?;
        let Some(i) = self.find_translator(v.ty, out) else {
            return err(
                ErrTag::D_XLATE_NONE,
                line,
                format!(
                    "cannot translate from \"{}\" to \"{}\"",
                    self.tname(v.ty),
                    self.tname(to)
                ),
            );
        };
        let arg = self.convert(v, self.translators[i].input);
        Ok(TExpr {
            kind: TK::Xlate(i, bx(arg)),
            ty: to,
            line,
        })
    }

    /// For `args[i]` of D type `ty`: when the probe's native type for it differs and names a type
    /// a translator converts to `ty` (or to what `ty` points to), that translator and the native
    /// type. Native types that do not resolve, or with no such translator, leave `args[i]` as is.
    pub(crate) fn native_for_translation(
        &mut self,
        i: usize,
        ty: TypeId,
    ) -> Option<(usize, TypeId)> {
        let name = self.probe_natives.as_ref()?.get(i)?.clone();
        let native = self.parse_type_name(&name)?;
        if self.types.compat(native, ty) {
            return None;
        }
        let out = if self.types.is_pointer(ty) {
            self.types.pointee(ty).unwrap_or(ty)
        } else {
            ty
        };
        let to_out = (0..self.translators.len())
            .filter(|&x| self.types.compat(self.translators[x].output, out))
            .find(|&x| self.types.compat(self.translators[x].input, native))?;
        Some((to_out, native))
    }

    /// The translator to `out` whose input best matches `input`: the same type first, then any
    /// integer for an integer input, then any pointer for a pointer input.
    fn find_translator(&self, input: TypeId, out: TypeId) -> Option<usize> {
        let t = &self.types;
        let to_out: Vec<usize> = (0..self.translators.len())
            .filter(|&i| t.compat(self.translators[i].output, out))
            .collect();
        let by = |f: &dyn Fn(TypeId) -> bool| {
            to_out
                .iter()
                .copied()
                .find(|&i| f(self.translators[i].input))
        };
        by(&|x| t.compat(x, input))
            .or_else(|| by(&|x| t.is_integer(x) && t.is_integer(input)))
            .or_else(|| by(&|x| t.is_pointer(x) && t.is_pointer(input)))
    }

    /// Member `m` of the unexpanded translation `base` (`.` on a translated struct, `->` on a
    /// translated pointer).
    pub(crate) fn xlate_member(
        &mut self,
        base: TExpr,
        m: &str,
        arrow: bool,
        line: u32,
    ) -> CResult<TExpr> {
        let TK::Xlate(i, arg) = base.kind else {
            return err(ErrTag::D_UNKNOWN, line, "internal error: not a translation");
        };
        let is_ptr = self.types.is_pointer(base.ty);
        if arrow && !is_ptr {
            return err(
                ErrTag::D_OP_PTR,
                line,
                "operator -> must be applied to a pointer",
            );
        }
        if !arrow && is_ptr {
            return err(
                ErrTag::D_OP_SOU,
                line,
                format!(
                    "operator . cannot be applied to type \"{}\"; must be applied to a struct or union",
                    self.tname(base.ty)
                ),
            );
        }
        self.xlate_member_value(i, *arg, m, line)
    }

    /// Translator `i`'s conversion of member `m` for input `arg`, converted to the member's type.
    pub(crate) fn xlate_member_value(
        &mut self,
        i: usize,
        arg: TExpr,
        m: &str,
        line: u32,
    ) -> CResult<TExpr> {
        let xl = self.translators[i].clone();
        let Some(target) = self.types.member(xl.output, m) else {
            return err(
                ErrTag::D_TYPE_MEMBER,
                line,
                format!("{m} is not a member of {}", self.tname(xl.output)),
            );
        };
        let Some(mb) = xl.members.iter().find(|mb| mb.name == m) else {
            return err(
                ErrTag::D_XLATE_NOCONV,
                line,
                format!("translator does not define conversion for member: {m}"),
            );
        };
        let saved = self.inlines.insert(
            xl.param.clone(),
            Inline {
                ty: xl.input,
                expr: arg,
            },
        );
        let r = self.cook(&mb.expr);
        match saved {
            Some(s) => {
                self.inlines.insert(xl.param.clone(), s);
            }
            None => {
                self.inlines.remove(&xl.param);
            }
        }
        let mut r = r?;
        if !self.argcompat(target.ty, &r) {
            return err(
                ErrTag::D_XLATE_INCOMPAT,
                mb.line,
                format!(
                    "translator member {m} definition uses incompatible types: \"{}\" = \"{}\"",
                    self.tname(target.ty),
                    self.tname(r.ty)
                ),
            );
        }
        r.line = line;
        Ok(self.convert(r, target.ty))
    }

    /// The whole translated struct of `e` (a [`TK::Xlate`]): every member the translator converts,
    /// in the struct's order; members it does not convert stay zero.
    pub(crate) fn expand_xlate(&mut self, e: TExpr) -> CResult<TExpr> {
        let TK::Xlate(i, arg) = e.kind else {
            return Ok(e);
        };
        let out = self.translators[i].output;
        self.types.complete(out);
        let size = self.types.size(out);
        let members = match self.types.rkind(out) {
            TypeKind::Sou {
                members: Some(ms), ..
            } => ms.clone(),
            _ => Vec::new(),
        };
        let mut stores = Vec::new();
        for mb in members {
            let converted = self.translators[i]
                .members
                .iter()
                .any(|x| x.name == mb.name);
            if !converted {
                continue;
            }
            let v = self.xlate_member_value(i, (*arg).clone(), &mb.name, e.line)?;
            let v = TExpr { ty: mb.ty, ..v };
            stores.push((mb.offset, mb.bits, v));
        }
        let x = TExpr {
            kind: TK::XlateStruct(size, stores),
            ty: e.ty,
            line: e.line,
        };
        let (nodes, depth) = crate::tree::stats(&x);
        if nodes > 16384 || depth > 128 {
            return err(
                ErrTag::D_NOT_SUPPORTED,
                e.line,
                "not yet supported: translation expands to an expression too large to compile",
            );
        }
        Ok(x)
    }

    /// Cooks `e`, an expression compiled by itself (a statement, a predicate, an action's value):
    /// `D_CG_DYN` when it evaluates to a translated pointer (`xlate<T *>(x)`), which points at
    /// data built only for a member's use, so DTrace refuses it as a result. The D library's
    /// translations are exempt: they stand for data DTrace for Linux keeps itself (`curcpu`).
    pub(crate) fn cook_result(&mut self, e: &Expr) -> CResult<TExpr> {
        let t = self.cook_any(e)?;
        if let TK::Xlate(i, _) = &t.kind {
            let library = self.translators.get(*i).is_some_and(|x| x.library);
            if !library && self.types.is_pointer(t.ty) {
                return err(
                    ErrTag::D_CG_DYN,
                    t.line,
                    "expression cannot evaluate to result of a translated pointer",
                );
            }
            return self.expand_xlate(t);
        }
        Ok(t)
    }

    /// `name[keys]` for an inline associative array: the keys checked against its parameters as
    /// for an associative array, then its body cooked with each parameter bound to its key.
    pub(crate) fn cook_inline_array(
        &mut self,
        b: &Expr,
        keys: &[Expr],
        line: u32,
    ) -> CResult<TExpr> {
        let ExprKind::Ident(name) = &b.kind else {
            return err(
                ErrTag::D_UNKNOWN,
                line,
                "internal error: not an inline array",
            );
        };
        let Some(ia) = self.inline_arrays.get(name).cloned() else {
            return err(ErrTag::D_UNKNOWN, line, "internal error: lost inline array");
        };
        if self.inline_depth >= 32 {
            return err(
                ErrTag::D_NOT_SUPPORTED,
                line,
                format!("not yet supported: inline {name} expands itself"),
            );
        }
        let tk = self.cook_keys(keys)?;
        let proto: Vec<TypeId> = ia.params.iter().map(|p| p.1).collect();
        self.check_keys(name, &tk, &proto, line)?;
        let mut saved = Vec::new();
        for ((p, t), k) in ia.params.iter().zip(tk) {
            let k = self.convert(k, *t);
            saved.push((
                p.clone(),
                self.inlines.insert(p.clone(), Inline { ty: *t, expr: k }),
            ));
        }
        self.inline_depth += 1;
        let r = self.cook_any(&ia.body);
        self.inline_depth -= 1;
        for (p, old) in saved.into_iter().rev() {
            match old {
                Some(o) => {
                    self.inlines.insert(p, o);
                }
                None => {
                    self.inlines.remove(&p);
                }
            }
        }
        let mut r = r?;
        if !self.argcompat(ia.ty, &r) {
            return err(
                ErrTag::D_OP_INCOMPAT,
                line,
                format!(
                    "inline {name} definition uses incompatible types: \"{}\" = \"{}\"",
                    self.tname(ia.ty),
                    self.tname(r.ty)
                ),
            );
        }
        r.line = line;
        Ok(self.convert(r, ia.ty))
    }
}
