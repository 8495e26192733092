//! Places: where values live and how expressions name them. `self->`/`this->`/global variables
//! (created on first assignment), associative-array elements and their key signatures, built-in
//! arrays, pointer and array indexing, struct and union members (bit-fields as [`Place::Bits`],
//! read, assigned and stepped like any member), lvalues for assignment and `++`/`--`
//! (members of translations are in [`crate::check_xlate`]).

use dtrace_dif::subr::Subr;

use crate::ast::{BinOp, Expr, ExprKind, UnOp, VarScope};
use crate::check::Checker;
use crate::error::{err, CResult, ErrTag};
use crate::idents::builtin_var;
use crate::tree::{Place, TExpr, VarRef, TK};
use crate::types::{TypeId, TypeKind};

use crate::check_expr::{scope_name, scope_prefix};

fn bx<T>(t: T) -> Box<T> {
    Box::new(t)
}

impl<'o> Checker<'o> {
    /// The place of `self->n` / `this->n` / global `n`; `create` makes it when missing.
    pub(crate) fn var_place(
        &mut self,
        sc: VarScope,
        n: &str,
        line: u32,
        create: bool,
    ) -> CResult<(Place, TypeId)> {
        let existing = self.table(sc).vars.get(n).cloned();
        let v = match existing {
            Some(v) => v,
            None if create => self.table(sc).create(n, false, line, scope_name(sc))?,
            None => {
                return err(
                    ErrTag::D_VAR_UNDEF,
                    line,
                    format!(
                        "{}{n} has not yet been declared or assigned",
                        scope_prefix(sc)
                    ),
                )
            }
        };
        if v.array {
            return err(
                ErrTag::D_IDENT_BADREF,
                line,
                format!("array '{n}' may not be referenced as scalar"),
            );
        }
        let ty = match v.ty {
            Some(t) => t,
            None if create => self.basic.void,
            None => {
                return err(
                    ErrTag::D_VAR_UNDEF,
                    line,
                    format!(
                        "{}{n} has not yet been declared or assigned",
                        scope_prefix(sc)
                    ),
                )
            }
        };
        Ok((
            Place::Var(VarRef {
                scope: sc,
                id: v.id,
                name: n.to_string(),
                array: false,
                ty,
            }),
            ty,
        ))
    }

    pub(crate) fn check_keys(
        &mut self,
        name: &str,
        keys: &[TExpr],
        proto: &[TypeId],
        line: u32,
    ) -> CResult<()> {
        if keys.len() != proto.len() {
            return err(
                ErrTag::D_PROTO_LEN,
                line,
                format!(
                    "{name}[ ] prototype mismatch: {} key{} passed, {} expected",
                    keys.len(),
                    if keys.len() == 1 { "" } else { "s" },
                    proto.len()
                ),
            );
        }
        for (i, (k, p)) in keys.iter().zip(proto).enumerate() {
            if !self.argcompat(*p, k) {
                return err(
                    ErrTag::D_PROTO_ARG,
                    line,
                    format!(
                        "{name}[ ] key #{} is incompatible with prototype:\n\tprototype: {}\n\t      key: {}",
                        i + 1,
                        self.tname(*p),
                        self.tname(k.ty)
                    ),
                );
            }
        }
        Ok(())
    }

    pub(crate) fn cook_keys(&mut self, keys: &[Expr]) -> CResult<Vec<TExpr>> {
        let mut out = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            let t = self.cook(k)?;
            // DTrace for Linux also keys associative arrays by structs and unions (by value).
            let sou = matches!(
                self.types.rkind(t.ty),
                TypeKind::Sou {
                    members: Some(_),
                    ..
                }
            );
            if !self.types.is_scalar(t.ty) && !self.types.is_string(t.ty) && !sou {
                return err(
                    ErrTag::D_KEY_TYPE,
                    k.line,
                    format!("key #{} is of invalid type: {}", i + 1, self.tname(t.ty)),
                );
            }
            out.push(t);
        }
        Ok(out)
    }

    /// `b[keys]`: an associative array element, a built-in array element or pointer indexing.
    pub(crate) fn index_place(
        &mut self,
        b: &Expr,
        keys: &[Expr],
        line: u32,
        create: bool,
    ) -> CResult<(Place, TypeId)> {
        let (scope, name) = match &b.kind {
            ExprKind::Ident(n) => (VarScope::Global, n.clone()),
            ExprKind::ScopedVar(sc, n) => (*sc, n.clone()),
            ExprKind::Index(ib, _) if matches!(&ib.kind, ExprKind::Agg(_)) => {
                let ExprKind::Agg(a) = &ib.kind else {
                    return err(ErrTag::D_UNKNOWN, line, "invalid aggregation reference");
                };
                return err(
                    ErrTag::D_AGG_MDIM,
                    line,
                    format!("improper attempt to reference @{a} as a multi-dimensional array"),
                );
            }
            ExprKind::Agg(a) => {
                return err(
                    ErrTag::D_AGG_FUNC,
                    line,
                    format!("@{a} must be assigned the result of an aggregating function"),
                )
            }
            _ => return self.pointer_index(b, keys, line),
        };
        if scope == VarScope::Global {
            if let Some(bv) = builtin_var(&name) {
                if !bv.array {
                    return self.pointer_index(b, keys, line);
                }
                let _ = bv;
                return err(
                    ErrTag::D_OP_WRITE,
                    line,
                    "operator = can only be applied to a writable variable",
                );
            }
        }
        let existing = self.table(scope).vars.get(&name).cloned();
        if let Some(v) = &existing {
            if !v.array && v.ty.is_some() {
                return self.pointer_index(b, keys, line);
            }
        }
        if scope == VarScope::Local {
            return err(
                ErrTag::D_ARR_LOCAL,
                line,
                format!("local variables may not be used as associative arrays: {name}"),
            );
        }
        let tk = self.cook_keys(keys)?;
        let v = match existing {
            Some(v) if v.array => v,
            Some(_) => {
                // declared or created but never typed: morph to an array
                let t = self.table(scope);
                let Some(v) = t.vars.get_mut(&name) else {
                    return err(
                        ErrTag::D_UNKNOWN,
                        line,
                        format!("internal error: lost variable {name}"),
                    );
                };
                v.array = true;
                v.clone()
            }
            None if create => self
                .table(scope)
                .create(&name, true, line, scope_name(scope))?,
            None => {
                return err(
                    ErrTag::D_VAR_UNDEF,
                    line,
                    format!(
                        "{}{name} has not yet been declared or assigned",
                        scope_prefix(scope)
                    ),
                )
            }
        };
        match &v.keys {
            Some(p) => {
                let p = p.clone();
                self.check_keys(&name, &tk, &p, line)?;
            }
            None => {
                let sig: Vec<TypeId> = tk.iter().map(|k| k.ty).collect();
                if let Some(v) = self.table(scope).vars.get_mut(&name) {
                    v.keys = Some(sig);
                }
            }
        }
        let ty = match v.ty {
            Some(t) => t,
            None if create => self.basic.void,
            None => {
                return err(
                    ErrTag::D_VAR_UNDEF,
                    line,
                    format!(
                        "{}{name} has not yet been declared or assigned",
                        scope_prefix(scope)
                    ),
                )
            }
        };
        Ok((
            Place::Assoc(
                VarRef {
                    scope,
                    id: v.id,
                    name,
                    array: true,
                    ty,
                },
                tk,
            ),
            ty,
        ))
    }

    /// `p[i]` on pointers and arrays, `args[i]` and `regs[i]`.
    pub(crate) fn pointer_index(
        &mut self,
        b: &Expr,
        keys: &[Expr],
        line: u32,
    ) -> CResult<(Place, TypeId)> {
        let base = self.cook(b)?;
        if keys.len() != 1 {
            return err(
                ErrTag::D_ARR_BADREF,
                line,
                "cannot access expression as an associative array",
            );
        }
        let idx = self.cook(&keys[0])?;
        if !self.types.is_integer(idx.ty) {
            return err(
                ErrTag::D_OP_INT,
                line,
                "operator [ ] requires an integer index",
            );
        }
        // a constant index into an array of known size is checked against it
        if let (TypeKind::Array(_, n), Some(i)) = (self.types.rkind(base.ty), idx.as_const()) {
            let n = *n;
            let i = i as i64;
            if n > 0 && (i < 0 || i >= n as i64) {
                return err(
                    ErrTag::D_ARR_BOUNDS,
                    line,
                    format!("index outside array bounds: {i}, max is {n}"),
                );
            }
        }
        // an index computed at run time into an array variable declared with a size is checked
        // there: past the end, DTrace for Linux faults with "index out of bounds"
        let declared = matches!(&base.kind, TK::Read(p) if matches!(p.as_ref(), Place::Var(_) | Place::Assoc(..)));
        let idx = match self.types.rkind(base.ty) {
            TypeKind::Array(_, n) if *n > 0 && declared && idx.as_const().is_none() => {
                let n = TExpr::int(u64::from(*n), self.basic.uint64, line);
                let ty = idx.ty;
                TExpr {
                    kind: TK::Call(Subr::Bounds as u16, vec![idx, n]),
                    ty,
                    line,
                }
            }
            _ => idx,
        };
        // DTrace for Linux indexes a string as the array of its characters (`s[1]`,
        // `execname[0]`): a string's value is the address of its bytes
        let base = if self.types.is_string(base.ty) {
            let ty = self.types.pointer_to(self.basic.char);
            TExpr {
                kind: TK::Retype(bx(base)),
                ty,
                line,
            }
        } else {
            base
        };
        let Some(elem) = self.types.pointee(base.ty) else {
            return err(
                ErrTag::D_OP_INCOMPAT,
                line,
                format!(
                    "operands have incompatible types: \"{}\" [ ] \"{}\"",
                    self.tname(base.ty),
                    self.tname(idx.ty)
                ),
            );
        };
        let addr = self.ptr_add(base, idx, elem, BinOp::Add, line);
        Ok((Place::Mem(bx(addr), false), elem))
    }

    /// `ptr op idx * sizeof (elem)` typed as the pointer.
    pub(crate) fn ptr_add(
        &self,
        ptr: TExpr,
        idx: TExpr,
        elem: TypeId,
        op: BinOp,
        line: u32,
    ) -> TExpr {
        let size = self.types.size(elem).max(1);
        let pty = ptr.ty;
        let idx = self.convert(idx, self.basic.long);
        let scaled = if size == 1 {
            idx
        } else if let Some(v) = idx.as_const() {
            TExpr::int(v.wrapping_mul(size), self.basic.long, line)
        } else {
            TExpr {
                kind: TK::Binary(
                    BinOp::Mul,
                    bx(idx),
                    bx(TExpr::int(size, self.basic.long, line)),
                ),
                ty: self.basic.long,
                line,
            }
        };
        TExpr {
            kind: TK::Binary(op, bx(ptr), bx(scaled)),
            ty: pty,
            line,
        }
    }

    /// The address of an object: for memory places, the address; for by-reference values, the value.
    pub(crate) fn address_of(&self, e: TExpr) -> Option<TExpr> {
        if let TK::Read(p) = &e.kind {
            if let Place::Mem(a, _) = p.as_ref() {
                // `&p->m` is an address computed, not a read through `p`: no NULL check
                // (`&((struct s *)0)->m` is the member's offset)
                return Some(without_null_check((**a).clone()));
            }
        }
        if self.types.is_by_ref(e.ty) {
            return Some(e);
        }
        None
    }

    pub(crate) fn member_place(
        &mut self,
        b: &Expr,
        m: &str,
        arrow: bool,
        line: u32,
    ) -> CResult<(Place, TypeId)> {
        let base = self.cook(b)?;
        self.member_place_of(base, m, arrow, line)
    }

    /// The place of member `m` of the cooked `base` (`base.m`, or `base->m` when `arrow`) and its
    /// type; a bit-field is a [`Place::Bits`] in the word holding it.
    pub(crate) fn member_place_of(
        &mut self,
        base: TExpr,
        m: &str,
        arrow: bool,
        line: u32,
    ) -> CResult<(Place, TypeId)> {
        let op = if arrow { "->" } else { "." };
        // a member of an object in user memory (a user symbol's struct) is in user memory too
        let mut user = false;
        let (sou, addr) = if arrow {
            let Some(t) = self
                .types
                .pointee(base.ty)
                .filter(|_| self.types.is_pointer(base.ty))
            else {
                return err(
                    ErrTag::D_OP_PTR,
                    line,
                    "operator -> must be applied to a pointer",
                );
            };
            (t, base)
        } else {
            let t = base.ty;
            user = is_user_mem(&base);
            let a = self.address_of(base);
            (
                t,
                a.unwrap_or_else(|| TExpr::int(0, self.basic.void_ptr, line)),
            )
        };
        self.types.complete(sou);
        match self.types.rkind(sou) {
            TypeKind::Sou { members: Some(_), .. } => {}
            TypeKind::Sou { members: None, .. } => {
                return err(
                    ErrTag::D_OP_INCOMPLETE,
                    line,
                    format!(
                        "operator {op} cannot be applied to a forward declaration: no {} definition is available",
                        self.tname(sou)
                    ),
                )
            }
            _ if arrow => {
                return err(
                    ErrTag::D_OP_SOU,
                    line,
                    format!(
                        "operator -> cannot be applied to pointer to type \"{}\"; must be applied to a struct or union pointer",
                        self.tname(sou)
                    ),
                )
            }
            _ => {
                return err(
                    ErrTag::D_OP_SOU,
                    line,
                    format!(
                        "operator . cannot be applied to type \"{}\"; must be applied to a struct or union",
                        self.tname(sou)
                    ),
                )
            }
        }
        let Some(mb) = self.types.member(sou, m) else {
            return err(
                ErrTag::D_TYPE_MEMBER,
                line,
                format!(
                    "{m} is not a member of {}",
                    self.tname(self.types.resolve(sou))
                ),
            );
        };
        let ty = addr.ty;
        let a = if mb.offset == 0 {
            addr
        } else {
            // a read at a member's offset from a NULL pointer faults at address 0, as DTrace's
            // check of the pointer of `->` reports it (at offset 0 the read itself faults there)
            let addr = match arrow {
                true => TExpr {
                    ty: addr.ty,
                    line: addr.line,
                    kind: TK::NonNull(bx(addr)),
                },
                false => addr,
            };
            TExpr {
                kind: TK::Binary(
                    BinOp::Add,
                    bx(addr),
                    bx(TExpr::int(mb.offset as u64, self.basic.long, line)),
                ),
                ty,
                line,
            }
        };
        if let Some(bf) = mb.bits {
            return Ok((Place::Bits(bx(a), user, bf), mb.ty));
        }
        Ok((Place::Mem(bx(a), user), mb.ty))
    }

    pub(crate) fn retype_place(&self, p: Place, ty: TypeId) -> Place {
        match p {
            Place::Var(mut v) => {
                v.ty = ty;
                Place::Var(v)
            }
            Place::Assoc(mut v, k) => {
                v.ty = ty;
                Place::Assoc(v, k)
            }
            m => m,
        }
    }

    pub(crate) fn set_place_type(&mut self, p: &Place, ty: TypeId) {
        let (v, _) = match p {
            Place::Var(v) => (v, false),
            Place::Assoc(v, _) => (v, true),
            Place::Mem(..) | Place::Bits(..) => return,
        };
        if let Some(info) = self.table(v.scope).vars.get_mut(&v.name) {
            if info.ty.is_none() {
                info.ty = Some(ty);
            }
        }
    }

    /// A writable place for an assignment or `++`/`--`; `create` instantiates variables.
    pub(crate) fn lvalue(
        &mut self,
        x: &Expr,
        line: u32,
        op: &str,
        create: bool,
    ) -> CResult<(Place, TypeId)> {
        match &x.kind {
            ExprKind::Ident(n) if n == "self" || n == "this" => {
                err(ErrTag::D_SYNTAX, line, format!("syntax error near \"{n}\""))
            }
            ExprKind::Ident(n) => {
                if self.inlines.contains_key(n)
                    || builtin_var(n).is_some()
                    || self.enums.contains_key(n)
                {
                    return err(
                        ErrTag::D_OP_WRITE,
                        line,
                        format!("operator {op} can only be applied to a writable variable"),
                    );
                }
                if n.contains('`') {
                    return err(
                        ErrTag::D_IDENT_UNDEF,
                        line,
                        format!("failed to resolve {n}: Unknown symbol name"),
                    );
                }
                self.var_place(VarScope::Global, n, line, create)
            }
            ExprKind::ScopedVar(sc, n) => self.var_place(*sc, n, line, create),
            ExprKind::Index(b, _) if matches!(&b.kind, ExprKind::Ident(n) if self.inline_arrays.contains_key(n)) => {
                err(
                    ErrTag::D_OP_WRITE,
                    line,
                    format!("operator {op} can only be applied to a writable variable"),
                )
            }
            ExprKind::Index(b, keys) => {
                let (p, t) = self.index_place(b, keys, line, create)?;
                self.writable_mem(p, t, line, op)
            }
            ExprKind::Member(b, m, arrow) => {
                let (p, t) = self.member_place(b, m, *arrow, line)?;
                self.writable_mem(p, t, line, op)
            }
            ExprKind::Unary(UnOp::Deref, _) => {
                let v = self.cook(x)?;
                match v.kind {
                    TK::Read(p) => self.writable_mem(*p, v.ty, line, op),
                    _ => err(
                        ErrTag::D_OP_LVAL,
                        line,
                        format!("operator {op} requires modifiable lvalue as an operand"),
                    ),
                }
            }
            ExprKind::Agg(a) => err(
                ErrTag::D_AGG_FUNC,
                line,
                format!("@{a} must be assigned the result of an aggregating function"),
            ),
            _ => {
                let _ = self.cook(x)?;
                err(
                    ErrTag::D_OP_LVAL,
                    line,
                    format!("operator {op} requires modifiable lvalue as an operand"),
                )
            }
        }
    }

    /// Memory places are writable only inside D variables (scalar arrays, struct members of D
    /// variables), as DTrace's `DT_NF_WRITABLE` propagation allows; variables pass through.
    fn writable_mem(&self, p: Place, t: TypeId, line: u32, op: &str) -> CResult<(Place, TypeId)> {
        let (Place::Mem(a, _) | Place::Bits(a, _, _)) = &p else {
            return Ok((p, t));
        };
        // a struct or union inside a D variable takes a whole struct or union (copied)
        let sou = matches!(
            self.types.rkind(t),
            TypeKind::Sou {
                members: Some(_),
                ..
            }
        );
        // ... and so does a string (its characters copied)
        if in_variable(a) && (!self.types.is_by_ref(t) || sou || self.types.is_string(t)) {
            return Ok((p, t));
        }
        err(
            ErrTag::D_OP_WRITE,
            line,
            format!("operator {op} can only be applied to a writable variable"),
        )
    }
}

/// Whether an address is reached from a D variable (its storage, or memory its pointers lead to
/// through `->`, `.`, `[]` and `*`): DTrace propagates `DT_NF_WRITABLE` from a variable through
/// those operators, leaving stores to memory that is not scratch to fault at run time.
fn in_variable(a: &TExpr) -> bool {
    match &a.kind {
        TK::Read(p) => match p.as_ref() {
            Place::Var(_) | Place::Assoc(..) => true,
            Place::Mem(inner, _) | Place::Bits(inner, _, _) => in_variable(inner),
        },
        TK::Binary(BinOp::Add, l, _) => in_variable(l),
        TK::Retype(x) | TK::NonNull(x) => in_variable(x),
        _ => false,
    }
}

/// The address `a` without the NULL check of a `->` at its base (`base + offset`).
pub(crate) fn without_null_check(a: TExpr) -> TExpr {
    let TExpr { kind, ty, line } = a;
    let kind = match kind {
        TK::Binary(op, l, r) => {
            let l = match *l {
                TExpr {
                    kind: TK::NonNull(base),
                    ..
                } => base,
                l => bx(l),
            };
            TK::Binary(op, l, r)
        }
        kind => kind,
    };
    TExpr { kind, ty, line }
}

/// Whether `e` reads user memory (its members are then in user memory too).
fn is_user_mem(e: &TExpr) -> bool {
    matches!(&e.kind, TK::Read(p) if matches!(p.as_ref(), Place::Mem(_, true)))
}
