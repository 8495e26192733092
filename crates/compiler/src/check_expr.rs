//! Cooking expressions: resolving identifiers (variables, built-ins, inlines, enum constants), typing
//! every operator by C's rules as D relaxes them (strings compare as values, pointers are numbers),
//! creating variables on first assignment, associative-array signatures, subroutine prototype checks,
//! and constant folding of integer operations. Errors carry DTrace's tags and messages.

use crate::ast::{BinOp, Expr, ExprKind, UnOp, VarScope};
use crate::check::Checker;
use crate::error::{err, CResult, ErrTag};
use crate::idents::{builtin_var, subr_proto};
use crate::lexer::IntSuffix;
use crate::tree::{CmpKind, Place, TExpr, VarRef, TK};
use crate::types::{TypeId, TypeKind};
use dtrace_dif::subr::Subr;

/// The highest `uregs[]` index on x86-64 (`R_TRAPNO` of the D library's `regs.d`).
const UREGS_MAX: u64 = 25;

/// The D library's inline array that `getf(fd)` expands to (`dlib/io.d`): the current process's
/// `struct file *` of a descriptor, NULL when it is not open, as DTrace's `getf()` gives its
/// `file_t *`.
const GETF_INLINE: &str = "__getf";

fn bx<T>(t: T) -> Box<T> {
    Box::new(t)
}

pub(crate) fn scope_prefix(s: VarScope) -> &'static str {
    match s {
        VarScope::Global => "",
        VarScope::Thread => "self->",
        VarScope::Local => "this->",
    }
}

pub(crate) fn scope_name(s: VarScope) -> &'static str {
    match s {
        VarScope::Global => "global",
        VarScope::Thread => "thread local",
        VarScope::Local => "clause local",
    }
}

/// Whether a name is an action or aggregating function (not usable in expressions).
pub fn is_action_name(n: &str) -> bool {
    crate::actions::action_func(n).is_some()
}

impl<'o> Checker<'o> {
    /// The type name for messages.
    pub fn tname(&self, t: TypeId) -> String {
        self.types.name(t)
    }

    /// The type of an integer constant (the first of int, unsigned int, long, unsigned long,
    /// long long, unsigned long long that holds it and agrees with the suffix; unsuffixed decimal
    /// constants take only the signed ones, as in C).
    pub fn int_type(&self, v: u64, s: IntSuffix, line: u32) -> CResult<TypeId> {
        let b = &self.basic;
        let cands = [b.int, b.uint, b.long, b.ulong, b.llong, b.ullong];
        for &t in &cands {
            let size = self.types.size(t);
            let signed = self.types.is_signed(t);
            let longs = if t == b.long || t == b.ulong {
                1
            } else if t == b.llong || t == b.ullong {
                2
            } else {
                0
            };
            // a decimal constant without a `u` takes a signed type as in C (-2147483657 is a
            // long, not an unsigned int negated); only a value beyond every signed type is
            // left to unsigned long long
            let decimal_signed_only = !s.unsigned && !s.radix_not_decimal && t != b.ullong;
            if (s.unsigned && signed) || longs < s.longs || (decimal_signed_only && !signed) {
                continue;
            }
            let max = match (size, signed) {
                (4, true) => i32::MAX as u64,
                (4, false) => u32::MAX as u64,
                (_, true) => i64::MAX as u64,
                _ => u64::MAX,
            };
            if v <= max {
                return Ok(t);
            }
        }
        err(
            ErrTag::D_INT_OFLOW,
            line,
            format!("integer constant 0x{v:x} cannot be represented in any built-in integral type"),
        )
    }

    /// Converts an integer expression to `to` (folding constants).
    pub fn convert(&self, e: TExpr, to: TypeId) -> TExpr {
        if !self.types.is_integer(to)
            || !(self.types.is_integer(e.ty) || self.types.is_pointer(e.ty))
        {
            return TExpr { ty: to, ..e };
        }
        let size = self.types.size(to);
        let same =
            self.types.size(e.ty) == size && self.types.is_signed(e.ty) == self.types.is_signed(to);
        if size >= 8 || same {
            // The value in its register is already right; but a memory read's own type says how
            // many bytes it loads (and a conversion's or bit-field's how it extends), so it keeps
            // it under a change of type.
            // Widened, an integer computed in 64 bits is first its own type's value.
            let e = if size >= 8 { self.settled(e) } else { e };
            let sized_by_type = match &e.kind {
                TK::Read(p) => matches!(p.as_ref(), Place::Mem(..) | Place::Bits(..)),
                TK::Convert(_) => true,
                _ => false,
            };
            if sized_by_type && e.ty != to {
                let line = e.line;
                return TExpr {
                    kind: TK::Retype(bx(e)),
                    ty: to,
                    line,
                };
            }
            return TExpr { ty: to, ..e };
        }
        if let Some(v) = e.as_const() {
            return TExpr::int(self.fold_convert(v, to), to, e.line);
        }
        let line = e.line;
        TExpr {
            kind: TK::Convert(bx(e)),
            ty: to,
            line,
        }
    }

    /// `e`, an integer of a type narrower than 64 bits computed by arithmetic, narrowed to its
    /// type: as in DTrace for Linux, arithmetic runs in 64 bits and its result is narrowed only
    /// where its type's value is read (stored, widened, compared), so that an int `x + x` of
    /// 1 << 30 is INT_MIN as a long, while `i * i / i` of an int i keeps the product's bits.
    fn settled(&self, e: TExpr) -> TExpr {
        let arithmetic = matches!(
            e.kind,
            TK::Binary(..) | TK::Unary(UnOp::Neg | UnOp::BitNot, _)
        );
        let size = self.types.size(e.ty);
        if !arithmetic || !self.types.is_integer(e.ty) || size == 0 || size >= 8 {
            return e;
        }
        let (ty, line) = (e.ty, e.line);
        TExpr {
            kind: TK::Convert(bx(e)),
            ty,
            line,
        }
    }

    /// The 64-bit representation of `v` converted to `to`.
    pub fn fold_convert(&self, v: u64, to: TypeId) -> u64 {
        let size = self.types.size(to);
        if size == 0 || size >= 8 {
            return v;
        }
        let bits = size * 8;
        let m = v & ((1u64 << bits) - 1);
        if self.types.is_signed(to) && (m >> (bits - 1)) & 1 == 1 {
            m | !((1u64 << bits) - 1)
        } else {
            m
        }
    }

    /// Cooks an expression for its value (a translation is expanded into the struct it builds).
    pub fn cook(&mut self, e: &Expr) -> CResult<TExpr> {
        let t = self.cook_any(e)?;
        if matches!(t.kind, TK::Xlate(..)) {
            return self.expand_xlate(t);
        }
        Ok(t)
    }

    /// Cooks an expression, leaving a translation ([`TK::Xlate`]) unexpanded.
    pub fn cook_any(&mut self, e: &Expr) -> CResult<TExpr> {
        let line = e.line;
        match &e.kind {
            ExprKind::Int(v, s) => {
                let t = self.int_type(*v, *s, line)?;
                Ok(TExpr::int(*v, t, line))
            }
            ExprKind::Char(c) => Ok(TExpr::int(*c as u64, self.basic.int, line)),
            ExprKind::Float(_) => err(
                ErrTag::D_SYNTAX,
                line,
                "floating-point constants are not permitted",
            ),
            ExprKind::Str(s) => Ok(TExpr {
                kind: TK::Str(s.clone()),
                ty: self.basic.string,
                line,
            }),
            ExprKind::Ident(n) => self.cook_ident(n, line),
            ExprKind::Agg(a) => {
                // the value of an aggregation reference is its id (printa, clear, ...)
                let id = self.agg_ref(a, line)?;
                Ok(TExpr::int(id, self.basic.int, line))
            }
            ExprKind::ScopedVar(sc, n) => {
                let (p, ty) = self.var_place(*sc, n, line, false)?;
                Ok(TExpr {
                    kind: TK::Read(bx(p)),
                    ty,
                    line,
                })
            }
            ExprKind::Unary(op, x) => self.cook_unary(*op, x, line),
            ExprKind::Binary(op, l, r) => self.cook_binary(*op, l, r, line),
            ExprKind::Assign(op, l, r) => self.cook_assign(*op, l, r, line),
            ExprKind::Cond(c, a, b) => self.cook_cond(c, a, b, line),
            ExprKind::Call(n, args) => self.cook_call(n, args, line),
            ExprKind::Index(b, keys) if self.is_builtin_array(b) => {
                self.cook_builtin_index(b, keys, line)
            }
            ExprKind::Index(b, keys) if matches!(&b.kind, ExprKind::Ident(n) if self.inline_arrays.contains_key(n)) => {
                self.cook_inline_array(b, keys, line)
            }
            ExprKind::Index(b, keys) => {
                let (p, ty) = self.index_place(b, keys, line, false)?;
                Ok(self.read_place(p, ty, line))
            }
            ExprKind::Member(b, m, arrow) => {
                let base = self.cook_any(b)?;
                if matches!(base.kind, TK::Xlate(..)) {
                    return self.xlate_member(base, m, *arrow, line);
                }
                let (p, ty) = self.member_place_of(base, m, *arrow, line)?;
                Ok(self.read_place(p, ty, line))
            }
            ExprKind::Cast(tn, x) => {
                let to = self.resolve_type_name(tn)?;
                let v = self.cook_any(x)?;
                // a translated pointer points at data the translation builds: it is no address
                // to make an integer of (the library's translations stand for real data)
                if let TK::Xlate(i, _) = &v.kind {
                    let library = self.translators.get(*i).is_some_and(|x| x.library);
                    if !library && self.types.is_pointer(v.ty) && !self.types.is_pointer(to) {
                        return err(
                            ErrTag::D_CAST_INVAL,
                            line,
                            format!(
                                "invalid cast expression: \"pointer to translated data\" to \"{}\"",
                                self.tname(to)
                            ),
                        );
                    }
                }
                let v = if matches!(v.kind, TK::Xlate(..)) {
                    self.expand_xlate(v)?
                } else {
                    v
                };
                self.cook_cast(v, to, line)
            }
            ExprKind::SizeofType(tn) => {
                let t = self.resolve_type_name(tn)?;
                self.sizeof(t, line)
            }
            ExprKind::SizeofExpr(x) => {
                let v = self.cook(x)?;
                if v.is_bitfield() {
                    return err(
                        ErrTag::D_SIZEOF_BITFIELD,
                        line,
                        "cannot apply sizeof to a bit-field",
                    );
                }
                self.sizeof(v.ty, line)
            }
            ExprKind::Stringof(x) => {
                let v = self.cook(x)?;
                if !self.types.is_scalar(v.ty) && !self.types.is_strcompat(v.ty) {
                    return err(
                        ErrTag::D_STRINGOF_TYPE,
                        line,
                        format!(
                            "cannot apply stringof to a value of type {}",
                            self.tname(v.ty)
                        ),
                    );
                }
                Ok(TExpr {
                    kind: TK::Retype(bx(v)),
                    ty: self.basic.string,
                    line,
                })
            }
            ExprKind::Offsetof(tn, m) => {
                let t = self.resolve_type_name(tn)?;
                // a kernel struct first named as a pointer's target is only forward-declared
                self.types.complete(t);
                // a struct or union with no definition is no operand either
                if !matches!(
                    self.types.rkind(t),
                    TypeKind::Sou {
                        members: Some(_),
                        ..
                    }
                ) {
                    return err(
                        ErrTag::D_OFFSETOF_TYPE,
                        line,
                        "offsetof operand must be a struct or union type",
                    );
                }
                match self.types.member(t, m) {
                    Some(mb) if mb.bits.is_some() => err(
                        ErrTag::D_OFFSETOF_BITFIELD,
                        line,
                        format!("cannot take offset of a bit-field: {m}"),
                    ),
                    Some(mb) => Ok(TExpr::int(mb.offset as u64, self.basic.size_t, line)),
                    // DTrace reports the type library's failure here
                    None => err(
                        ErrTag::D_UNKNOWN,
                        line,
                        format!("failed to determine offset of {m}: Member name not found"),
                    ),
                }
            }
            ExprKind::Xlate(tn, x) => self.cook_xlate(tn, x, line),
            ExprKind::Comma(a, b) => {
                let a = self.cook(a)?;
                let b = self.cook(b)?;
                let ty = b.ty;
                Ok(TExpr {
                    kind: TK::Comma(bx(a), bx(b)),
                    ty,
                    line,
                })
            }
        }
    }

    fn sizeof(&mut self, t: TypeId, line: u32) -> CResult<TExpr> {
        self.types.complete(t);
        let sz = if self.types.is_string(t) {
            self.strsize as u64
        } else {
            self.types.size(t)
        };
        if sz == 0 {
            return err(
                ErrTag::D_SIZEOF_TYPE,
                line,
                "cannot apply sizeof to an operand of unknown size",
            );
        }
        Ok(TExpr::int(sz, self.basic.size_t, line))
    }

    /// Reading a place: by-reference objects yield their address.
    pub fn read_place(&self, p: Place, ty: TypeId, line: u32) -> TExpr {
        TExpr {
            kind: TK::Read(bx(p)),
            ty,
            line,
        }
    }

    fn cook_ident(&mut self, n: &str, line: u32) -> CResult<TExpr> {
        if n == "self" || n == "this" {
            return err(ErrTag::D_SYNTAX, line, format!("syntax error near \"{n}\""));
        }
        if let Some(inl) = self.inlines.get(n) {
            let mut e = inl.expr.clone();
            e.line = line;
            let ty = inl.ty;
            return Ok(self.convert(e, ty));
        }
        if let Some(v) = self.globals.vars.get(n).cloned() {
            if v.array {
                return err(
                    ErrTag::D_IDENT_BADREF,
                    line,
                    format!("array '{n}' may not be referenced as scalar"),
                );
            }
            let Some(ty) = v.ty else {
                return err(
                    ErrTag::D_VAR_UNDEF,
                    line,
                    format!("{n} has not yet been declared or assigned"),
                );
            };
            let r = VarRef {
                scope: VarScope::Global,
                id: v.id,
                name: n.to_string(),
                array: false,
                ty,
            };
            return Ok(self.read_place(Place::Var(r), ty, line));
        }
        if let Some(b) = builtin_var(n) {
            if b.array {
                return err(
                    ErrTag::D_IDENT_BADREF,
                    line,
                    format!("array '{n}' may not be referenced as scalar"),
                );
            }
            let mut ty = self.named_type(b.ty);
            if b.id == dtrace_dif::vars::DIF_VAR_CURTHREAD {
                // on Linux the current thread is a `struct task_struct` when types are known
                if let Some(t) = self.types.lookup("struct task_struct") {
                    ty = self.types.pointer_to(t);
                }
            }
            return Ok(TExpr {
                kind: TK::Builtin(b.id),
                ty,
                line,
            });
        }
        if let Some((v, t)) = self.enums.get(n) {
            return Ok(TExpr::int(*v as u64, *t, line));
        }
        if n.contains('`') {
            return self.cook_symbol(n, line);
        }
        if is_action_name(n) || subr_proto(n).is_some() {
            return err(
                ErrTag::D_IDENT_BADREF,
                line,
                format!("function '{n}' may not be referenced as scalar"),
            );
        }
        if let Some(why) = crate::idents::unsupported_builtin(n) {
            return err(
                ErrTag::D_IDENT_UNDEF,
                line,
                format!("not yet supported: built-in variable {n} ({why})"),
            );
        }
        err(
            ErrTag::D_IDENT_UNDEF,
            line,
            format!("failed to resolve {n}: Unknown variable name"),
        )
    }

    /// A type by name from the built-in table (names in our own tables always exist).
    pub fn named_type(&mut self, name: &str) -> TypeId {
        if let Some(base) = name.strip_suffix(" *") {
            // a pointer to a type this system lacks (a kernel struct without the kernel's
            // types) is a `void *`
            if !base.ends_with('*') && self.types.lookup(base).is_none() {
                return self.basic.void_ptr;
            }
            let b = self.named_type(base);
            return self.types.pointer_to(b);
        }
        self.types.lookup(name).unwrap_or(self.basic.int64)
    }

    fn cook_unary(&mut self, op: UnOp, x: &Expr, line: u32) -> CResult<TExpr> {
        match op {
            UnOp::PreInc | UnOp::PreDec | UnOp::PostInc | UnOp::PostDec => {
                let (place, ty) = self.lvalue(x, line, op.text(), true)?;
                let ty = if self.types.is_void(ty) {
                    // a variable created by ++: int64_t
                    let t = self.basic.int64;
                    self.set_place_type(&place, t);
                    t
                } else {
                    ty
                };
                if !self.types.is_scalar(ty) {
                    return err(
                        ErrTag::D_OP_SCALAR,
                        line,
                        format!("operator {} requires operand of scalar type", op.text()),
                    );
                }
                if self.types.is_vfptr(ty) {
                    return err(
                        ErrTag::D_OP_VFPTR,
                        line,
                        format!("operator {} requires an operand of known size", op.text()),
                    );
                }
                let step = match self.types.pointee(ty) {
                    Some(p) if self.types.is_pointer(ty) => self.types.size(p) as i64,
                    _ => 1,
                };
                let delta = if matches!(op, UnOp::PreInc | UnOp::PostInc) {
                    step
                } else {
                    -step
                };
                let place = self.retype_place(place, ty);
                Ok(TExpr {
                    kind: TK::IncDec {
                        place: bx(place),
                        delta,
                        post: matches!(op, UnOp::PostInc | UnOp::PostDec),
                    },
                    ty,
                    line,
                })
            }
            UnOp::Deref => {
                let v = self.cook(x)?;
                let Some(t) = self.types.pointee(v.ty) else {
                    return err(
                        ErrTag::D_DEREF_NONPTR,
                        line,
                        "cannot dereference non-pointer type",
                    );
                };
                self.types.complete(t);
                if self.types.is_void(t) {
                    return err(
                        ErrTag::D_DEREF_VOID,
                        line,
                        "cannot dereference pointer to void",
                    );
                }
                let addr = if self.types.is_pointer(v.ty) {
                    v
                } else {
                    self.address_of(v)
                        .unwrap_or_else(|| TExpr::int(0, self.basic.void_ptr, line))
                };
                Ok(self.read_place(Place::Mem(bx(addr), false), t, line))
            }
            UnOp::AddrOf => {
                let v = self.cook(x)?;
                if v.is_bitfield() {
                    return err(
                        ErrTag::D_ADDROF_BITFIELD,
                        line,
                        "cannot take address of bit-field",
                    );
                }
                if let TK::Read(p) = &v.kind {
                    match p.as_ref() {
                        Place::Mem(a, _) => {
                            let pt = self.types.pointer_to(v.ty);
                            // an address computed, not a read through a `->` base
                            let mut a = crate::check_place::without_null_check((**a).clone());
                            a.ty = pt;
                            return Ok(a);
                        }
                        _ => {
                            return err(
                                ErrTag::D_ADDROF_VAR,
                                line,
                                "cannot take address of dynamic variable",
                            )
                        }
                    }
                }
                err(
                    ErrTag::D_ADDROF_LVAL,
                    line,
                    "unacceptable operand for unary & operator",
                )
            }
            UnOp::Neg | UnOp::Pos => {
                let v = self.cook(x)?;
                if !self.types.is_arith(v.ty) {
                    return err(
                        ErrTag::D_OP_ARITH,
                        line,
                        format!(
                            "operator {} requires an operand of arithmetic type",
                            op.text()
                        ),
                    );
                }
                if op == UnOp::Pos {
                    return Ok(v);
                }
                let ty = self.types.promote_one(v.ty, &self.basic);
                if let Some(c) = v.as_const() {
                    return Ok(TExpr::int(
                        self.fold_convert(c.wrapping_neg(), ty),
                        ty,
                        line,
                    ));
                }
                Ok(TExpr {
                    kind: TK::Unary(op, bx(v)),
                    ty,
                    line,
                })
            }
            UnOp::BitNot => {
                let v = self.cook(x)?;
                if !self.types.is_integer(v.ty) {
                    return err(
                        ErrTag::D_OP_INT,
                        line,
                        "operator ~ requires an operand of integral type",
                    );
                }
                let ty = self.types.promote_one(v.ty, &self.basic);
                if let Some(c) = v.as_const() {
                    return Ok(TExpr::int(self.fold_convert(!c, ty), ty, line));
                }
                Ok(TExpr {
                    kind: TK::Unary(op, bx(v)),
                    ty,
                    line,
                })
            }
            UnOp::LogNot => {
                let v = self.cook(x)?;
                if !self.types.is_scalar(v.ty) {
                    return err(
                        ErrTag::D_OP_SCALAR,
                        line,
                        "operator ! requires an operand of scalar type",
                    );
                }
                if let Some(c) = v.as_const() {
                    return Ok(TExpr::int((c == 0) as u64, self.basic.int, line));
                }
                Ok(TExpr {
                    kind: TK::Unary(op, bx(v)),
                    ty: self.basic.int,
                    line,
                })
            }
        }
    }

    /// `dt_node_is_argcompat`: whether a value of `r`'s type may be stored in or passed as `l`.
    pub fn argcompat(&self, l: TypeId, r: &TExpr) -> bool {
        let t = &self.types;
        if t.compat(l, r.ty) {
            return true;
        }
        if t.is_integer(l) && t.is_integer(r.ty) {
            return true;
        }
        if t.is_strcompat(l) && t.is_strcompat(r.ty) {
            return true;
        }
        if t.is_pointer(l) && t.is_pointer(r.ty) {
            return t.is_vfptr(l) || t.is_vfptr(r.ty) || t.compat(l, r.ty);
        }
        // an array is its first element's address, as in C
        if let (TypeKind::Pointer(pe), TypeKind::Array(ae, _)) = (t.rkind(l), t.rkind(r.ty)) {
            if t.compat(*pe, *ae) {
                return true;
            }
        }
        // dt_node_is_ptrcompat: a zero constant (`NULL`) fits any pointer, and D's string, an array
        // of char to DTrace's type system, is one of those.
        if (t.is_pointer(l) || t.is_string(l)) && r.as_const() == Some(0) {
            return true;
        }
        false
    }

    fn cook_assign(&mut self, op: Option<BinOp>, l: &Expr, r: &Expr, line: u32) -> CResult<TExpr> {
        let optext = op
            .map(|o| format!("{}=", o.text()))
            .unwrap_or_else(|| "=".into());
        let Some(bop) = op else {
            let (place, lty) = self.lvalue(l, line, &optext, true)?;
            let rv = self.cook(r)?;
            if let TK::Action(n) = &rv.kind {
                // DTrace types the new variable as void and leaves the refusal to code generation
                return err(
                    ErrTag::D_CG_EXPR,
                    line,
                    format!(
                        "{n}( ) may not be called from a D expression (D program context required)"
                    ),
                );
            }
            if self.types.is_void(rv.ty) {
                return err(
                    ErrTag::D_OP_INCOMPAT,
                    line,
                    format!(
                        "operands have incompatible types: \"{}\" = \"void\"",
                        self.tname(lty)
                    ),
                );
            }
            let lty = if self.types.is_void(lty) {
                self.set_place_type(&place, rv.ty);
                rv.ty
            } else {
                lty
            };
            if matches!(
                self.types.rkind(lty),
                TypeKind::Array(..) | TypeKind::Function(..)
            ) && !self.types.is_string(lty)
            {
                return err(
                    ErrTag::D_OP_ARRFUN,
                    line,
                    format!(
                        "operator = may not be applied to operand of type \"{}\"",
                        self.tname(lty)
                    ),
                );
            }
            // zero stored into a dynamic variable (an associative array element or a thread-local)
            // of any type frees it
            let dynamic = match &place {
                Place::Assoc(..) => true,
                Place::Var(v) => v.scope == VarScope::Thread,
                _ => false,
            };
            let frees = dynamic && rv.as_const() == Some(0) && self.types.is_integer(rv.ty);
            if !frees && !self.argcompat(lty, &rv) {
                return err(
                    ErrTag::D_OP_INCOMPAT,
                    line,
                    format!(
                        "operands have incompatible types: \"{}\" = \"{}\"",
                        self.tname(lty),
                        self.tname(rv.ty)
                    ),
                );
            }
            self.assign_alloca(&place, &rv, line)?;
            let place = self.retype_place(place, lty);
            let rv = self.convert(rv, lty);
            return Ok(TExpr {
                kind: TK::Assign(bx(place), bx(rv)),
                ty: lty,
                line,
            });
        };
        let (place, lty) = self.lvalue(l, line, &optext, true)?;
        // An associative array first used by a compound assignment (`x[k] += v`) is declared
        // by that use, as by `x[k]++`: its values are int64_t.
        let lty = if self.types.is_void(lty) && matches!(place, Place::Assoc(..)) {
            let t = self.basic.int64;
            self.set_place_type(&place, t);
            t
        } else {
            lty
        };
        if self.types.is_void(lty) {
            let name = match &l.kind {
                ExprKind::ScopedVar(sc, n) => format!("{}{n}", scope_prefix(*sc)),
                ExprKind::Ident(n) => n.clone(),
                _ => "variable".into(),
            };
            return err(
                ErrTag::D_VAR_UNDEF,
                line,
                format!("{name} has not yet been declared or assigned"),
            );
        }
        let place = self.retype_place(place, lty);
        let cur = TExpr {
            kind: TK::Read(bx(place.clone())),
            ty: lty,
            line,
        };
        let rv = self.cook(r)?;
        if matches!(bop, BinOp::Add | BinOp::Sub) {
            self.check_additive_assign(lty, &rv, &optext, line)?;
        }
        let val = self.binary_typed(bop, cur, rv, line, &optext)?;
        if !self.argcompat(lty, &val) {
            return err(
                ErrTag::D_OP_INCOMPAT,
                line,
                format!(
                    "operands have incompatible types: \"{}\" {optext} \"{}\"",
                    self.tname(lty),
                    self.tname(val.ty)
                ),
            );
        }
        let val = self.convert(val, lty);
        Ok(TExpr {
            kind: TK::Assign(bx(place), bx(val)),
            ty: lty,
            line,
        })
    }

    /// DTrace's rules for `+=` and `-=`: no strings; unless both sides are integers, the left
    /// must be a pointer of known size (not `void *`), and a right-hand pointer must be
    /// compatible with it.
    fn check_additive_assign(&self, lty: TypeId, rv: &TExpr, op: &str, line: u32) -> CResult<()> {
        let t = &self.types;
        let incompat = || {
            err(
                ErrTag::D_OP_INCOMPAT,
                line,
                format!(
                    "operands have incompatible types: \"{}\" {op} \"{}\"",
                    self.tname(lty),
                    self.tname(rv.ty)
                ),
            )
        };
        if t.is_string(lty) || t.is_string(rv.ty) {
            return incompat();
        }
        if t.is_integer(lty) && t.is_integer(rv.ty) {
            return Ok(());
        }
        if !t.is_pointer(lty) || t.is_vfptr(lty) {
            return err(
                ErrTag::D_OP_VFPTR,
                line,
                format!("operator {op} requires left-hand scalar operand of known size"),
            );
        }
        if !t.is_integer(rv.ty) && !t.ptr_compat(lty, rv.ty) {
            return incompat();
        }
        Ok(())
    }

    fn cook_cond(&mut self, c: &Expr, a: &Expr, b: &Expr, line: u32) -> CResult<TExpr> {
        let c = self.cook(c)?;
        let a = self.cook(a)?;
        let b = self.cook(b)?;
        if matches!(a.kind, TK::Action(_)) || matches!(b.kind, TK::Action(_)) {
            return err(
                ErrTag::D_OP_ACT,
                line,
                "action cannot be used in a conditional context",
            );
        }
        if !self.types.is_scalar(c.ty) {
            return err(
                ErrTag::D_OP_SCALAR,
                line,
                "operator ?: expression must be of scalar type",
            );
        }
        let t = &self.types;
        let ty = if t.compat(a.ty, b.ty) {
            a.ty
        } else if t.is_integer(a.ty) && t.is_integer(b.ty) {
            t.promote(a.ty, b.ty, &self.basic)
        } else if t.is_strcompat(a.ty)
            && t.is_strcompat(b.ty)
            && (t.is_string(a.ty) || t.is_string(b.ty))
        {
            self.basic.string
        } else if (t.is_pointer(a.ty) || t.is_string(a.ty))
            && (t.is_pointer(b.ty) || b.as_const() == Some(0))
        {
            a.ty
        } else if (t.is_pointer(b.ty) || t.is_string(b.ty)) && a.as_const() == Some(0) {
            b.ty
        } else {
            return err(
                ErrTag::D_OP_INCOMPAT,
                line,
                "operator ?: operands must have compatible types",
            );
        };
        if let Some(v) = c.as_const() {
            return Ok(if v != 0 {
                TExpr { ty, ..a }
            } else {
                TExpr { ty, ..b }
            });
        }
        Ok(TExpr {
            kind: TK::Cond(bx(c), bx(a), bx(b)),
            ty,
            line,
        })
    }

    fn cook_binary(&mut self, op: BinOp, l: &Expr, r: &Expr, line: u32) -> CResult<TExpr> {
        // an aggregation is not a value an operator can take
        if matches!(l.kind, ExprKind::Agg(_)) || matches!(r.kind, ExprKind::Agg(_)) {
            let name = |e: &Expr, s: &mut Self| -> CResult<String> {
                Ok(if matches!(e.kind, ExprKind::Agg(_)) {
                    "aggregation".to_string()
                } else {
                    let t = s.cook(e)?;
                    s.tname(t.ty)
                })
            };
            let (ln, rn) = (name(l, self)?, name(r, self)?);
            return err(
                ErrTag::D_OP_INCOMPAT,
                line,
                format!(
                    "operands have incompatible types: \"{ln}\" {} \"{rn}\"",
                    op.text()
                ),
            );
        }
        let lv = self.cook(l)?;
        let rv = self.cook(r)?;
        self.binary_typed(op, lv, rv, line, op.text())
    }

    pub(crate) fn binary_typed(
        &mut self,
        op: BinOp,
        lv: TExpr,
        rv: TExpr,
        line: u32,
        optext: &str,
    ) -> CResult<TExpr> {
        use BinOp::*;
        let incompat = |s: &Self, lv: &TExpr, rv: &TExpr| {
            err(
                ErrTag::D_OP_INCOMPAT,
                line,
                format!(
                    "operands have incompatible types: \"{}\" {optext} \"{}\"",
                    s.tname(lv.ty),
                    s.tname(rv.ty)
                ),
            )
        };
        match op {
            LogAnd | LogOr | LogXor => {
                if !self.types.is_scalar(lv.ty) || !self.types.is_scalar(rv.ty) {
                    return err(
                        ErrTag::D_OP_SCALAR,
                        line,
                        format!("operator {optext} requires operands of scalar type"),
                    );
                }
                if let (Some(a), Some(b)) = (lv.as_const(), rv.as_const()) {
                    let (a, b) = (a != 0, b != 0);
                    let v = match op {
                        LogAnd => a && b,
                        LogOr => a || b,
                        _ => a ^ b,
                    };
                    return Ok(TExpr::int(v as u64, self.basic.int, line));
                }
                Ok(TExpr {
                    kind: TK::Logical(op, bx(lv), bx(rv)),
                    ty: self.basic.int,
                    line,
                })
            }
            Lt | Le | Gt | Ge | Eq | Ne => {
                let t = &self.types;
                let kind = if (t.is_strcompat(lv.ty)
                    && t.is_strcompat(rv.ty)
                    && (t.is_string(lv.ty) || t.is_string(rv.ty)))
                    || (t.is_string(lv.ty) && rv.as_const() == Some(0))
                    || (t.is_string(rv.ty) && lv.as_const() == Some(0))
                {
                    // A string against `NULL` compares as DTrace's string compare does: NULL is
                    // the empty string.
                    CmpKind::String
                } else if t.is_integer(lv.ty) && t.is_integer(rv.ty) {
                    if t.is_signed(t.promote(lv.ty, rv.ty, &self.basic)) {
                        CmpKind::Signed
                    } else {
                        CmpKind::Unsigned
                    }
                } else if t.compat(lv.ty, rv.ty)
                    || (t.is_pointer(lv.ty) && (t.is_pointer(rv.ty) || t.is_integer(rv.ty)))
                    || (t.is_pointer(rv.ty) && t.is_integer(lv.ty))
                {
                    if t.is_string(lv.ty) {
                        CmpKind::String
                    } else if t.is_scalar(lv.ty) {
                        CmpKind::Unsigned
                    } else {
                        return incompat(self, &lv, &rv);
                    }
                } else {
                    return incompat(self, &lv, &rv);
                };
                if let (Some(a), Some(b), CmpKind::Signed | CmpKind::Unsigned) =
                    (lv.as_const(), rv.as_const(), kind)
                {
                    let ord = if kind == CmpKind::Signed {
                        (a as i64).cmp(&(b as i64))
                    } else {
                        a.cmp(&b)
                    };
                    let v = match op {
                        Lt => ord.is_lt(),
                        Le => ord.is_le(),
                        Gt => ord.is_gt(),
                        Ge => ord.is_ge(),
                        Eq => ord.is_eq(),
                        _ => ord.is_ne(),
                    };
                    return Ok(TExpr::int(v as u64, self.basic.int, line));
                }
                let (lv, rv) = match kind {
                    CmpKind::Signed | CmpKind::Unsigned => (self.settled(lv), self.settled(rv)),
                    _ => (lv, rv),
                };
                Ok(TExpr {
                    kind: TK::Cmp(op, bx(lv), bx(rv), kind),
                    ty: self.basic.int,
                    line,
                })
            }
            Add | Sub => {
                let t = &self.types;
                let lp = t.is_string(lv.ty) || (t.is_pointer(lv.ty) && !t.is_vfptr(lv.ty));
                let rp = t.is_string(rv.ty) || (t.is_pointer(rv.ty) && !t.is_vfptr(rv.ty));
                let li = t.is_integer(lv.ty);
                let ri = t.is_integer(rv.ty);
                if li && ri {
                    let ty = t.promote(lv.ty, rv.ty, &self.basic);
                    return self.arith(op, lv, rv, ty, line);
                }
                if lp && ri && !t.is_string(lv.ty) {
                    let elem = t.pointee(lv.ty).unwrap_or(self.basic.char);
                    return Ok(self.ptr_add(lv, rv, elem, op, line));
                }
                // DTrace for Linux: a string plus an integer is the string from that many
                // characters on (`"abc" + 1` is "bc")
                let (ls, rs) = (t.is_string(lv.ty), t.is_string(rv.ty));
                if op == Add && ((ls && ri) || (li && rs)) {
                    let ty = if ls { lv.ty } else { rv.ty };
                    return Ok(TExpr {
                        kind: TK::Binary(Add, bx(lv), bx(rv)),
                        ty,
                        line,
                    });
                }
                if li && rp && op == Add && !t.is_string(rv.ty) {
                    let elem = t.pointee(rv.ty).unwrap_or(self.basic.char);
                    return Ok(self.ptr_add(rv, lv, elem, Add, line));
                }
                if lp && rp && op == Sub && t.compat(lv.ty, rv.ty) && !t.is_string(lv.ty) {
                    let elem = t.pointee(lv.ty).unwrap_or(self.basic.char);
                    let size = t.size(elem).max(1);
                    let pd = self.basic.ptrdiff_t;
                    let diff = TExpr {
                        kind: TK::Binary(Sub, bx(lv), bx(rv)),
                        ty: pd,
                        line,
                    };
                    if size == 1 {
                        return Ok(diff);
                    }
                    return Ok(TExpr {
                        kind: TK::Binary(Div, bx(diff), bx(TExpr::int(size, pd, line))),
                        ty: pd,
                        line,
                    });
                }
                incompat(self, &lv, &rv)
            }
            Mul | Div => {
                if !self.types.is_arith(lv.ty) || !self.types.is_arith(rv.ty) {
                    return err(
                        ErrTag::D_OP_ARITH,
                        line,
                        format!("operator {optext} requires operands of arithmetic type"),
                    );
                }
                let ty = self.types.promote(lv.ty, rv.ty, &self.basic);
                self.arith(op, lv, rv, ty, line)
            }
            Mod | BitAnd | BitOr | BitXor => {
                if !self.types.is_integer(lv.ty) || !self.types.is_integer(rv.ty) {
                    return err(
                        ErrTag::D_OP_INT,
                        line,
                        format!("operator {optext} requires operands of integral type"),
                    );
                }
                let ty = self.types.promote(lv.ty, rv.ty, &self.basic);
                self.arith(op, lv, rv, ty, line)
            }
            Shl | Shr => {
                if !self.types.is_integer(lv.ty) || !self.types.is_integer(rv.ty) {
                    return err(
                        ErrTag::D_OP_INT,
                        line,
                        format!("operator {optext} requires operands of integral type"),
                    );
                }
                // As DTrace types every integer operator's result, a shift's is both operands'
                // promoted type (C's is the left operand's): `1 << shift` of an int64_t shift is
                // an int64_t, never narrowed to an int.
                let ty = self.types.promote(lv.ty, rv.ty, &self.basic);
                self.arith(op, lv, rv, ty, line)
            }
        }
    }

    /// An integer or pointer arithmetic node of type `ty`, folded when both sides are constant.
    fn arith(&self, op: BinOp, lv: TExpr, rv: TExpr, ty: TypeId, line: u32) -> CResult<TExpr> {
        use BinOp::*;
        if matches!(op, Div | Mod) && rv.as_const() == Some(0) {
            return err(
                ErrTag::D_DIV_ZERO,
                line,
                "expression contains division by zero",
            );
        }
        // An operand widened to the result's type is first its own type's value.
        let widened = |e: TExpr| match self.types.size(e.ty) < self.types.size(ty) {
            true => self.settled(e),
            false => e,
        };
        let (lv, rv) = (widened(lv), widened(rv));
        if let (Some(a), Some(b)) = (lv.as_const(), rv.as_const()) {
            let signed = self.types.is_signed(ty);
            let v = match op {
                Add => a.wrapping_add(b),
                Sub => a.wrapping_sub(b),
                Mul => a.wrapping_mul(b),
                Div if signed => (a as i64).wrapping_div(b as i64) as u64,
                Div => a / b,
                Mod if signed => (a as i64).wrapping_rem(b as i64) as u64,
                Mod => a % b,
                BitAnd => a & b,
                BitOr => a | b,
                BitXor => a ^ b,
                Shl => a.wrapping_shl(b as u32),
                Shr if signed => ((a as i64).wrapping_shr(b as u32)) as u64,
                Shr => a.wrapping_shr(b as u32),
                _ => a,
            };
            // Folded as DTrace folds, in 64 bits and not narrowed to the type: the same value the
            // operation computes at run time in a 64-bit register (`(1 << 63) - 1` is INT64_MAX as
            // an aggregation's increment); storing it or tracing it narrows it to its type.
            return Ok(TExpr::int(v, ty, line));
        }
        Ok(TExpr {
            kind: TK::Binary(op, bx(lv), bx(rv)),
            ty,
            line,
        })
    }

    /// A cast of `v` to `to`.
    pub fn cook_cast(&mut self, v: TExpr, to: TypeId, line: u32) -> CResult<TExpr> {
        let t = &self.types;
        let ok = t.compat(to, v.ty)
            || (t.is_scalar(to) && t.is_scalar(v.ty))
            || t.is_void(to)
            || (t.is_pointer(to) && t.pointee(v.ty).is_some())
            || (t.is_string(to) && (t.is_scalar(v.ty) || t.is_strcompat(v.ty)));
        if !ok {
            return err(
                ErrTag::D_CAST_INVAL,
                line,
                format!(
                    "invalid cast expression: \"{}\" to \"{}\"",
                    self.tname(v.ty),
                    self.tname(to)
                ),
            );
        }
        if t.is_integer(to) {
            return Ok(self.convert(v, to));
        }
        if t.is_pointer(to) && t.is_integer(v.ty) && t.size(v.ty) < t.size(to) {
            let ul = self.basic.ulong;
            let w = self.convert(v, ul);
            return Ok(TExpr {
                kind: TK::Retype(bx(w)),
                ty: to,
                line,
            });
        }
        if let Some(c) = v.as_const() {
            return Ok(TExpr::int(c, to, line));
        }
        Ok(TExpr {
            kind: TK::Retype(bx(v)),
            ty: to,
            line,
        })
    }

    /// Why a lock query (`dtrace_dif::vm::subr::locks`) cannot answer on the lock type the
    /// program's types give, if they give one unlike Linux's usual layout: a `struct mutex`
    /// beginning with its 8-byte `owner` word (not so under `PREEMPT_RT`), an `rwlock_t`
    /// beginning with a queued lock's 4-byte count word (`raw_lock.cnts`). Types this system
    /// lacks (no kernel BTF) leave the pointer unchecked, as the prototype does.
    fn lock_layout_unlike_linuxs(&mut self, subr: Subr) -> Option<&'static str> {
        let first_word = |ck: &mut Self, ty: TypeId, path: &[&str], size: u64| {
            let mut at = ty;
            let mut offset = 0;
            for name in path {
                // a kernel struct first named as a pointer's target is only forward-declared
                ck.types.complete(at);
                let m = ck.types.member(at, name)?;
                offset += m.offset;
                at = m.ty;
            }
            Some(offset == 0 && ck.types.size(at) == size)
        };
        match dtrace_dif::vm::subr::locks::word_bytes(subr)? {
            8 => {
                let t = self.types.lookup("struct mutex")?;
                (first_word(self, t, &["owner"], 8) != Some(true))
                    .then_some("its struct mutex does not begin with an owner word (PREEMPT_RT?)")
            }
            _ => {
                let t = self.types.lookup("rwlock_t")?;
                (first_word(self, t, &["raw_lock", "cnts"], 4) != Some(true))
                    .then_some("its rwlock_t is not a queued rwlock (PREEMPT_RT?)")
            }
        }
    }

    fn cook_call(&mut self, n: &str, args: &[Expr], line: u32) -> CResult<TExpr> {
        let Some(p) = subr_proto(n) else {
            if is_action_name(n) {
                for a in args {
                    self.cook(a)?;
                }
                return Ok(TExpr {
                    kind: TK::Action(n.to_string()),
                    ty: self.basic.void,
                    line,
                });
            }
            if self.globals.vars.contains_key(n) || builtin_var(n).is_some() {
                return err(
                    ErrTag::D_FUNC_IDKIND,
                    line,
                    format!("variable '{n}' may not be referenced as function"),
                );
            }
            return err(
                ErrTag::D_FUNC_UNDEF,
                line,
                format!("undefined function name: {n}"),
            );
        };
        if args.len() < p.required || args.len() > p.params.len() {
            let want = if p.required == p.params.len() {
                format!("{}", p.required)
            } else if args.len() < p.required {
                format!("at least {}", p.required)
            } else {
                format!("at most {}", p.params.len())
            };
            return err(
                ErrTag::D_PROTO_LEN,
                line,
                format!(
                    "{n}( ) prototype mismatch: {} arg{} passed, {want} expected",
                    args.len(),
                    if args.len() == 1 { "" } else { "s" },
                ),
            );
        }
        let mut targs = Vec::new();
        for (i, a) in args.iter().enumerate() {
            let v = self.cook(a)?;
            let pt = self.named_type(p.params[i]);
            // A parameter naming a type this system lacks (a kernel struct without the kernel's
            // types) takes any pointer, as `void *` would.
            let known = p.params[i]
                .strip_suffix(" *")
                .is_none_or(|base| self.types.lookup(base).is_some());
            let ok = if self.types.is_pointer(pt) {
                // D's string is an array of char to DTrace's type system, and an array passes
                // for a pointer to its first element (`substr(execname, 1)` for `char *`,
                // `bcopy(probename, ...)` for `void *`)
                (self.types.is_pointer(v.ty) && (!known || self.types.ptr_compat(pt, v.ty)))
                    || v.as_const() == Some(0)
                    || (self.types.is_strcompat(v.ty)
                        && (self.types.is_strcompat(pt)
                            || crate::idents::BYTE_SOURCES.contains(&(p.subr, i))))
            } else {
                self.argcompat(pt, &v)
            };
            if !ok {
                return err(
                    ErrTag::D_PROTO_ARG,
                    line,
                    format!(
                        "{n}( ) argument #{} is incompatible with prototype:\n\tprototype: {}\n\t argument: {}",
                        i + 1,
                        p.params[i],
                        self.tname(v.ty)
                    ),
                );
            }
            if p.subr == Subr::InetNtoa6 && i == 1 && v.as_const().is_none() {
                return err(
                    ErrTag::D_PROTO_ARG,
                    line,
                    format!(
                        "{n}( ) argument #2 is incompatible with prototype:\n\tprototype: integer constant\n\t argument: {}",
                        self.tname(v.ty)
                    ),
                );
            }
            let v = if self.types.is_integer(pt) {
                self.convert(v, pt)
            } else {
                v
            };
            targs.push(v);
        }
        if let Some(why) = self.lock_layout_unlike_linuxs(p.subr) {
            return err(
                ErrTag::D_NOT_SUPPORTED,
                line,
                format!("not yet supported: {n}( ) on this kernel: {why}"),
            );
        }
        // getf(fd) is the D library's expansion, declared where the kernel's types give it (see
        // GETF_INLINE); without it the compilation fails (the consumer compiles again with the
        // kernel's types loaded).
        if p.subr == Subr::Getf {
            if !self.inline_arrays.contains_key(GETF_INLINE) {
                return err(
                    ErrTag::D_FUNC_UNDEF,
                    line,
                    "getf( ) needs the kernel's types (struct file), which this system lacks",
                );
            }
            let b = Expr {
                kind: ExprKind::Ident(GETF_INLINE.into()),
                line,
            };
            return self.cook_inline_array(&b, args, line);
        }
        // a constant size that cannot fit in the scratch space is refused here
        let size_arg = match p.subr {
            Subr::Alloca => targs.first(),
            Subr::Copyin => targs.get(1),
            _ => None,
        };
        if let Some(size) = size_arg.and_then(TExpr::as_const) {
            if size > self.scratchsize {
                return err(
                    ErrTag::D_ALLOCA_SIZE,
                    line,
                    format!(
                        "{n}( ) size {size} is larger than the scratch space ({} bytes)",
                        self.scratchsize
                    ),
                );
            }
        }
        let ret = self.named_type(p.ret);
        Ok(TExpr {
            kind: TK::Call(p.subr as u16, targs),
            ty: ret,
            line,
        })
    }

    fn is_builtin_array(&self, b: &Expr) -> bool {
        match &b.kind {
            ExprKind::Ident(n) => {
                !self.globals.vars.contains_key(n)
                    && !self.inlines.contains_key(n)
                    && builtin_var(n).is_some_and(|v| v.array)
            }
            _ => false,
        }
    }

    /// The index of `regs[]`/`uregs[]` (DTrace's `dt_idcook_regs`): an integer constant, not
    /// negative, and for `uregs[]` one of the x86-64 register indices of `regs.d` (0 to
    /// `R_TRAPNO`, 25), as DTrace for Linux bounds it.
    fn check_regs_index(&self, n: &str, idx: &TExpr, line: u32) -> CResult<()> {
        let Some(v) = idx.as_const().filter(|_| self.types.is_integer(idx.ty)) else {
            return err(
                ErrTag::D_PROTO_ARG,
                line,
                format!(
                    "{n}[ ] argument #1 is incompatible with prototype:\n\tprototype: integer constant\n\t argument: {}",
                    self.tname(idx.ty)
                ),
            );
        };
        if self.types.is_signed(idx.ty) && (v as i64) < 0 {
            return err(
                ErrTag::D_REGS_IDX,
                line,
                format!("index {} is out of range for array {n}", v as i64),
            );
        }
        if n == "uregs" && v > UREGS_MAX {
            return err(
                ErrTag::D_UNKNOWN,
                line,
                format!("uregs[]: index out of bounds ({v})"),
            );
        }
        Ok(())
    }

    /// `args[i]`, `regs[i]`, `uregs[i]`: `args[]` takes the probe's argument types when the
    /// [`crate::ProbeInfo`] knows them (the index must then be a constant in range).
    fn cook_builtin_index(&mut self, b: &Expr, keys: &[Expr], line: u32) -> CResult<TExpr> {
        let ExprKind::Ident(n) = &b.kind else {
            return err(ErrTag::D_UNKNOWN, line, "invalid built-in array reference");
        };
        let Some(bv) = builtin_var(n) else {
            return err(ErrTag::D_UNKNOWN, line, "invalid built-in array reference");
        };
        if keys.len() != 1 {
            return err(
                ErrTag::D_PROTO_LEN,
                line,
                format!(
                    "{n}[ ] prototype mismatch: {} args passed, 1 expected",
                    keys.len()
                ),
            );
        }
        let idx = self.cook(&keys[0])?;
        if bv.id != dtrace_dif::vars::DIF_VAR_ARGS {
            self.check_regs_index(n, &idx, line)?;
        }
        if !self.types.is_integer(idx.ty) {
            return err(
                ErrTag::D_PROTO_ARG,
                line,
                format!(
                    "{n}[ ] argument #1 is incompatible with prototype:\n\tprototype: int\n\t argument: {}",
                    self.tname(idx.ty)
                ),
            );
        }
        let mut ty = self.named_type(bv.ty);
        let mut xlate_from = None;
        if bv.id == dtrace_dif::vars::DIF_VAR_ARGS {
            if let Some(names) = self.probe_args.clone() {
                let mut types = Vec::new();
                for tn in &names {
                    let Some(t) = self.parse_type_name(tn) else {
                        return err(
                            ErrTag::D_ARGS_TYPE,
                            line,
                            format!(
                                "failed to resolve native argument type {tn} for {}",
                                self.probe_name
                            ),
                        );
                    };
                    types.push(t);
                }
                let Some(i) = idx.as_const() else {
                    return err(
                        ErrTag::D_ARGS_IDX,
                        line,
                        "index for args[ ] must be an integer constant",
                    );
                };
                match types.get(i as usize) {
                    Some(t) => {
                        ty = *t;
                        xlate_from = self.native_for_translation(i as usize, ty);
                    }
                    None => {
                        return err(
                            ErrTag::D_ARGS_IDX,
                            line,
                            format!(
                                "index {} is out of range for {} args[ ]",
                                i as i64, self.probe_name
                            ),
                        )
                    }
                }
            }
        }
        let idx = self.convert(idx, self.basic.int64);
        let raw = TExpr {
            kind: TK::BuiltinArray(bv.id, Box::new(idx)),
            ty: self.basic.int64,
            line,
        };
        if let Some((xl, native)) = xlate_from {
            // `args[n]` of a translated type: the translation of the native value, as
            // `xlate<T *>(native)` would be (members then compile to the translator's loads).
            let arg = TExpr {
                kind: TK::Retype(Box::new(raw)),
                ty: native,
                line,
            };
            let arg = self.convert(arg, self.translators[xl].input);
            return Ok(TExpr {
                kind: TK::Xlate(xl, Box::new(arg)),
                ty,
                line,
            });
        }
        if self.types.is_integer(ty) {
            Ok(self.convert(raw, ty))
        } else {
            Ok(TExpr {
                kind: TK::Retype(Box::new(raw)),
                ty,
                line,
            })
        }
    }

    /// A kernel or user symbol (`` `sym ``, ``mod`sym``, ``` ``sym ```): the object at its address,
    /// typed as the [`crate::ProbeInfo`] describes it.
    fn cook_symbol(&mut self, n: &str, line: u32) -> CResult<TExpr> {
        let (scope, name) = match n.rfind('`') {
            Some(i) => (&n[..i], &n[i + 1..]),
            None => ("", n),
        };
        let user = scope.ends_with('`');
        let module = scope.trim_end_matches('`');
        let module = (!module.is_empty()).then_some(module);
        let found = self.probe_info.and_then(|p| p.symbol(module, name, user));
        let Some((addr, tyname)) = found else {
            // (Only a name that could be a variable's gets the reason.)
            let why = self
                .probe_info
                .filter(|_| is_c_identifier(name))
                .and_then(|p| p.symbols_unlisted(module, user))
                .map(|w| format!(" ({w})"))
                .unwrap_or_default();
            return err(
                ErrTag::D_IDENT_UNDEF,
                line,
                format!("failed to resolve {n}: Unknown symbol name{why}"),
            );
        };
        let Some(ty) = self.parse_type_name(&tyname) else {
            // DTrace names the symbol as object`name and gives the type lookup's error.
            let object = module.unwrap_or(if user { "a.out" } else { "vmlinux" });
            let why = if tyname.is_empty() {
                "No type information available for symbol".to_string()
            } else {
                format!("unknown type {tyname}")
            };
            return err(
                ErrTag::D_SYM_NOTYPES,
                line,
                format!("no symbolic type information is available for {object}`{name}: {why}"),
            );
        };
        let a = TExpr::int(addr, self.types.pointer_to(ty), line);
        Ok(self.read_place(Place::Mem(Box::new(a), user), ty, line))
    }
}

/// Whether `s` is a C identifier (a letter or `_`, then letters, digits and `_`).
fn is_c_identifier(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}
