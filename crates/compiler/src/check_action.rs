//! Statements to planned actions: `trace`, `printf`, `printa`, `exit`, `tracemem`, the stack actions,
//! speculations, aggregation library actions, destructive actions (gated on `-w`), aggregations with
//! their keys and argument checks, and the ordering rules around `speculate()`/`commit()`.

use dtrace_dif::program::{
    llquantize_arg, lquantize_arg, print_arg, print_object_arg, ActionKind, LibAction,
};

use crate::actions::{action_func, agg_func, record_kind, ActionFunc};
use crate::ast::VarScope;
use crate::ast::{Expr, ExprKind};
use crate::check::{AggFunc, Checker, Plan};
use crate::check_expr::is_action_name;
use crate::error::{err, CResult, CompileError, ErrTag};
use crate::printf::{self, ConvArg};
use crate::tree::{Place, TExpr, VarRef, TK};
use crate::types::{TypeId, TypeKind};

/// The `arg` of a `printa()` without a format string.
pub const NO_FORMAT: u64 = u64::MAX;

/// Tracks `speculate()`/`commit()` ordering within a clause.
#[derive(Debug, Default)]
pub struct SpecState {
    spec: bool,
    commit: bool,
    data: bool,
}

fn e(tag: ErrTag, line: u32, m: &str) -> CResult<()> {
    Err(CompileError::new(tag, line, m))
}

impl SpecState {
    /// Checks the plans of one statement against what came before.
    pub fn check(&mut self, plans: &[Plan], line: u32) -> CResult<()> {
        let Some(last) = plans.last() else {
            return Ok(());
        };
        let k = last.kind;
        // a destructive subroutine (`copyout()`) is a destructive action to these rules
        let destructive_call = plans.iter().filter_map(|p| p.expr.as_ref()).any(|e| {
            crate::tree::calls(e, &|s| {
                crate::idents::SUBR_PROTOS
                    .iter()
                    .any(|p| p.subr as u16 == s && p.destructive)
            })
        });
        if destructive_call && self.spec {
            return e(
                ErrTag::D_ACT_SPEC,
                line,
                "destructive actions may not follow speculate( )",
            );
        }
        if k == ActionKind::DifExpr && last.void_result {
            return Ok(());
        }
        match k {
            ActionKind::Speculate => {
                if self.spec {
                    return e(
                        ErrTag::D_SPEC_SPEC,
                        line,
                        "speculate( ) may not follow speculate( )",
                    );
                }
                if self.commit {
                    return e(
                        ErrTag::D_SPEC_COMM,
                        line,
                        "speculate( ) may not follow commit( )",
                    );
                }
                if self.data {
                    return e(
                        ErrTag::D_SPEC_DREC,
                        line,
                        "speculate( ) may not follow data-recording action(s)",
                    );
                }
                self.spec = true;
            }
            // DTrace for Linux lets a clause commit several speculations
            ActionKind::Commit => {
                if self.data {
                    return e(
                        ErrTag::D_COMM_DREC,
                        line,
                        "commit( ) may not follow data-recording action(s)",
                    );
                }
                self.commit = true;
            }
            ActionKind::Discard => {}
            k if k.is_aggregation() => {
                if self.spec {
                    return e(
                        ErrTag::D_AGG_SPEC,
                        line,
                        "aggregating actions may not follow speculate( )",
                    );
                }
                if self.commit {
                    return e(
                        ErrTag::D_AGG_COMM,
                        line,
                        "aggregating actions may not follow commit( )",
                    );
                }
            }
            ActionKind::Exit => {
                // exit( ) records its status: a data-recording action to commit( )
                if self.commit {
                    return e(
                        ErrTag::D_DREC_COMM,
                        line,
                        "data-recording actions may not follow commit( )",
                    );
                }
                if self.spec {
                    return e(
                        ErrTag::D_EXIT_SPEC,
                        line,
                        "exit( ) may not follow speculate( )",
                    );
                }
            }
            k if k.is_destructive() => {
                if self.spec {
                    return e(
                        ErrTag::D_ACT_SPEC,
                        line,
                        "destructive actions may not follow speculate( )",
                    );
                }
            }
            _ => {
                if self.commit {
                    return e(
                        ErrTag::D_DREC_COMM,
                        line,
                        "data-recording actions may not follow commit( )",
                    );
                }
                self.data = true;
            }
        }
        Ok(())
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

impl<'o> Checker<'o> {
    /// The two records of `print(ptr)`: the pointer, then the object it points to (type `pointee`,
    /// entry `index` of the print types). The pointer is kept in a hidden clause-local between
    /// them, so an argument with side effects is evaluated once.
    fn print_plans(
        &mut self,
        ptr: TExpr,
        pointee: TypeId,
        index: u32,
        line: u32,
    ) -> CResult<Vec<Plan>> {
        let name = "%print";
        let info = match self.locals.vars.get(name) {
            Some(v) => v.clone(),
            None => {
                let mut v = self.locals.create(name, false, line, "clause local")?;
                v.ty = Some(ptr.ty);
                self.locals.vars.insert(name.to_string(), v.clone());
                v
            }
        };
        let var = VarRef {
            scope: VarScope::Local,
            id: info.id,
            name: name.to_string(),
            array: false,
            ty: ptr.ty,
        };
        let pty = ptr.ty;
        let saved = TExpr {
            kind: TK::Assign(Box::new(Place::Var(var.clone())), Box::new(ptr)),
            ty: pty,
            line,
        };
        let addr = self.read_place(Place::Var(var), pty, line);
        let mut first = Plan::new(ActionKind::LibAct, Some(saved));
        first.arg = print_arg(index);
        let mut plans = vec![first];
        // a pointer to void or to a function has nothing to show but its address
        let function = matches!(self.types.rkind(pointee), TypeKind::Function(..));
        if !self.types.is_void(pointee) && !function {
            let object = self.read_place(Place::Mem(Box::new(addr), false), pointee, line);
            let mut second = Plan::new(ActionKind::LibAct, Some(object));
            second.arg = print_object_arg(index);
            plans.push(second);
        }
        Ok(plans)
    }

    fn proto_len(&self, name: &str, got: usize, min: usize, max: usize, line: u32) -> CResult<()> {
        if got < min || got > max {
            let (tag, want) = if min == max {
                (ErrTag::D_PROTO_LEN, format!("{min}"))
            } else if got < min {
                (ErrTag::D_PROTO_LEN, format!("at least {min}"))
            } else {
                (ErrTag::D_PROTO_LEN, format!("at most {max}"))
            };
            return err(
                tag,
                line,
                format!(
                    "{name}( ) prototype mismatch: {got} arg{} passed, {want} expected",
                    plural(got)
                ),
            );
        }
        Ok(())
    }

    /// Checks the arguments of a tracing function against the integer parameters of its
    /// prototype (`exit(int)`, `stack(uint32_t)`, `normalize(@, uint64_t)`): another type is
    /// `D_PROTO_ARG`, printed with the prototype's type name as DTrace does.
    fn check_action_params(&mut self, f: &ActionFunc, args: &[Expr], line: u32) -> CResult<()> {
        for (i, (a, p)) in args.iter().zip(f.params).enumerate() {
            if *p == "@" || p.ends_with('*') {
                continue;
            }
            let v = self.cook(a)?;
            if !self.types.is_integer(v.ty) {
                return err(
                    ErrTag::D_PROTO_ARG,
                    line,
                    format!(
                        "{}( ) argument #{} is incompatible with prototype:\n\tprototype: {p}\n\t argument: {}",
                        f.name,
                        i + 1,
                        self.tname(v.ty)
                    ),
                );
            }
        }
        Ok(())
    }

    /// The integer constant value of an argument, if it is one.
    fn const_arg(&mut self, a: &Expr) -> CResult<Option<(i64, TExpr)>> {
        let t = self.cook(a)?;
        if !self.types.is_integer(t.ty) {
            return Ok(None);
        }
        Ok(t.as_const().map(|v| (v as i64, t)))
    }

    /// The value of an argument that must be an integer constant, or the error `tag` with `msg`.
    fn required_const(
        &mut self,
        a: &Expr,
        tag: ErrTag,
        line: u32,
        msg: impl Into<String>,
    ) -> CResult<i64> {
        match self.const_arg(a)? {
            Some((v, _)) => Ok(v),
            None => err(tag, line, msg),
        }
    }

    /// The value of an argument that must be a positive integer constant, or the error `tag` with `msg`.
    fn positive_const(
        &mut self,
        a: &Expr,
        tag: ErrTag,
        line: u32,
        msg: impl Into<String>,
    ) -> CResult<u64> {
        match self.const_arg(a)? {
            Some((v, _)) if v > 0 => Ok(v as u64),
            _ => err(tag, line, msg),
        }
    }

    /// A plan recording one value: a D expression, or a record function (`sym()`, `stack()`...).
    fn value_plan(&mut self, a: &Expr) -> CResult<Plan> {
        let p = self.value_plan_any(a)?;
        if p.expr
            .as_ref()
            .is_some_and(|v| p.kind == ActionKind::DifExpr && self.types.is_void(v.ty))
        {
            return err(
                ErrTag::D_TRACE_VOID,
                a.line,
                "trace( ) may not be applied to a void expression",
            );
        }
        Ok(p)
    }

    /// [`Self::value_plan`] that lets a `void` value through, for the callers (printf-like
    /// conversions, aggregation keys) that report it against their own prototypes.
    fn value_plan_any(&mut self, a: &Expr) -> CResult<Plan> {
        if let ExprKind::Call(n, args) = &a.kind {
            if let (Some(k), Some(f)) = (record_kind(n), action_func(n)) {
                self.proto_len(n, args.len(), f.required, f.max_args(), a.line)?;
                let v = self.cook(&args[0])?;
                // the argument is a uintptr_t: a narrower integer (`sym(0)`) is converted to it
                let v = if self.types.is_integer(v.ty) && self.types.size(v.ty) < 8 {
                    let ul = self.basic.ulong;
                    self.convert(v, ul)
                } else {
                    v
                };
                return Ok(Plan::new(k, Some(v)));
            }
            if matches!(n.as_str(), "stack" | "ustack" | "jstack") {
                let mut v = Vec::new();
                self.cook_action(n, args, a.line, &mut v)?;
                if let Some(p) = v.pop() {
                    return Ok(p);
                }
            }
        }
        let v = self.cook(a)?;
        Ok(Plan::new(ActionKind::DifExpr, Some(v)))
    }

    /// Cooks one statement into plans.
    pub fn cook_statement(&mut self, e: &Expr, plans: &mut Vec<Plan>) -> CResult<()> {
        match &e.kind {
            ExprKind::Assign(None, l, r)
                if matches!(l.kind, ExprKind::Agg(_))
                    || matches!(&l.kind, ExprKind::Index(b, _) if matches!(b.kind, ExprKind::Agg(_))) =>
            {
                self.cook_aggregation(l, r, e.line, plans)
            }
            ExprKind::Call(n, args) if is_action_name(n) && agg_func(n).is_none() => {
                self.cook_action(n, args, e.line, plans)
            }
            // an aggregation named with nothing assigned to it
            ExprKind::Agg(n) => err(
                ErrTag::D_AGG_NULL,
                e.line,
                format!("expression has null effect: @{n}"),
            ),
            ExprKind::Index(b, _) if matches!(&b.kind, ExprKind::Agg(_)) => {
                let name = match &b.kind {
                    ExprKind::Agg(n) => n.as_str(),
                    _ => "",
                };
                err(
                    ErrTag::D_AGG_NULL,
                    e.line,
                    format!("expression has null effect: @{name}[ ]"),
                )
            }
            _ => {
                let t = self.cook_result(e)?;
                let mut p = Plan::new(ActionKind::DifExpr, Some(t));
                p.void_result = true;
                plans.push(p);
                Ok(())
            }
        }
    }

    fn agg_arg(&mut self, fname: &str, i: usize, a: &Expr) -> CResult<u64> {
        match a.kind {
            ExprKind::Agg(ref n) => self.agg_ref(n, a.line),
            _ => {
                let t = self.cook(a)?;
                let tag = match fname {
                    "clear" => ErrTag::D_CLEAR_AGGARG,
                    "trunc" => ErrTag::D_TRUNC_AGGARG,
                    "normalize" | "denormalize" => ErrTag::D_NORMALIZE_AGGARG,
                    _ => ErrTag::D_PRINTA_AGGARG,
                };
                err(
                    tag,
                    a.line,
                    format!(
                        "{fname}( ) argument #{} is incompatible with prototype:\n\tprototype: aggregation\n\t argument: {}",
                        i + 1,
                        self.tname(t.ty)
                    ),
                )
            }
        }
    }

    /// `printa()` of several aggregations: their key signatures must match (`dt_printa_validate`).
    fn printa_keys_match(&self, ids: &[u64], line: u32) -> CResult<()> {
        let find = |id: u64| self.aggs.iter().find(|a| a.id as u64 == id);
        let Some(first) = ids.first().and_then(|i| find(*i)) else {
            return Ok(());
        };
        let lk = first.keys.clone().unwrap_or_default();
        for id in &ids[1..] {
            let Some(other) = find(*id) else { continue };
            let rk = other.keys.clone().unwrap_or_default();
            if lk.len() != rk.len() {
                return err(
                    ErrTag::D_PRINTA_AGGKEY,
                    line,
                    format!(
                        "printa( ): @{} and @{} do not have matching key signatures: @{} has {} key{}, @{} has {} key{}",
                        first.name,
                        other.name,
                        first.name,
                        lk.len(),
                        plural(lk.len()),
                        other.name,
                        rk.len(),
                        plural(rk.len())
                    ),
                );
            }
            for (k, (a, b)) in lk.iter().zip(&rk).enumerate() {
                let probe = TExpr::int(1, *b, line);
                if !(self.types.compat(*a, *b) || self.argcompat(*a, &probe)) {
                    return err(
                        ErrTag::D_PRINTA_AGGPROTO,
                        line,
                        format!(
                            "printa( ): @{}[ ] key #{} is incompatible with @{}:\n{:>9} key #{}: {}\n{:>9} key #{}: {}",
                            other.name,
                            k + 1,
                            first.name,
                            first.name,
                            k + 1,
                            self.tname(*a),
                            other.name,
                            k + 1,
                            self.tname(*b)
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    fn agg_id_expr(&self, id: u64, line: u32) -> TExpr {
        TExpr::int(id, self.basic.int, line)
    }

    fn format_arg(&mut self, fname: &str, a: &Expr) -> CResult<Vec<u8>> {
        match &a.kind {
            ExprKind::Str(s) => Ok(s.clone()),
            _ => {
                let t = self.cook(a)?;
                // DTrace for Linux checks the type against the prototype's `string` first; a
                // string that is not a constant is refused after that
                if !self.types.is_string(t.ty) {
                    return err(
                        ErrTag::D_PROTO_ARG,
                        a.line,
                        format!(
                            "{fname}( ) argument #1 is incompatible with prototype:\n\tprototype: string\n\t argument: {}",
                            self.tname(t.ty)
                        ),
                    );
                }
                err(
                    ErrTag::D_PRINTF_ARG_FMT,
                    a.line,
                    format!(
                        "{fname}( ) argument #1 is incompatible with prototype:\n\tprototype: string constant\n\t argument: {}",
                        self.tname(t.ty)
                    ),
                )
            }
        }
    }

    /// Validates printf-style arguments against the format and returns their plans.
    fn printf_args(
        &mut self,
        fname: &str,
        fmt: &[u8],
        args: &[Expr],
        line: u32,
    ) -> CResult<Vec<Plan>> {
        if fmt.is_empty() && fname != "freopen" {
            return err(
                ErrTag::D_PRINTF_FMT_EMPTY,
                line,
                format!("{fname}( ) format string is empty"),
            );
        }
        let convs = printf::parse(fmt, line)?;
        let mut plans = Vec::new();
        let mut j = 0;
        for (i, c) in convs.iter().enumerate() {
            if c.arg == ConvArg::None {
                continue;
            }
            for d in 0..c.dynamic {
                let Some(a) = args.get(j) else {
                    return err(
                        ErrTag::D_PRINTF_DYN_PROTO,
                        line,
                        format!(
                            "{fname}( ) prototype mismatch: conversion #{} (%{}) is missing a corresponding \"{}\" argument",
                            i + 1,
                            c.name,
                            dyn_name(c, d)
                        ),
                    );
                };
                let p = self.value_plan_any(a)?;
                if let Some(v) = p.expr.as_ref().filter(|_| p.kind == ActionKind::DifExpr) {
                    if !self.types.is_integer(v.ty) {
                        return err(
                            ErrTag::D_PRINTF_DYN_TYPE,
                            line,
                            format!(
                                "{fname}( ) argument #{} is incompatible with conversion #{} prototype:\n\tconversion: % {} {}\n\t prototype: int\n\t  argument: {}",
                                j + 2,
                                i + 1,
                                dyn_name(c, d),
                                c.name,
                                self.tname(v.ty)
                            ),
                        );
                    }
                }
                plans.push(p);
                j += 1;
            }
            if c.agg {
                return err(
                    ErrTag::D_PRINTF_AGG_CONV,
                    line,
                    format!(
                        "%@ conversion requires an aggregation and is not for use with {fname}( )"
                    ),
                );
            }
            let Some(a) = args.get(j) else {
                return err(
                    ErrTag::D_PRINTF_ARG_PROTO,
                    line,
                    format!("{fname}( ) prototype mismatch: conversion #{} (%{}) is missing a corresponding value argument", i + 1, c.name),
                );
            };
            if matches!(a.kind, ExprKind::Agg(_)) {
                // an aggregation is not a value a conversion can print
                return err(
                    ErrTag::D_PRINTF_ARG_TYPE,
                    line,
                    format!(
                        "{fname}( ) argument #{} is incompatible with conversion #{} prototype:\n\tconversion: %{}\n\t prototype: {}\n\t  argument: aggregation",
                        j + 2,
                        i + 1,
                        c.name,
                        c.arg.proto()
                    ),
                );
            }
            let mut p = self.value_plan_any(a)?;
            if let Some(v) = p.expr.as_ref().filter(|_| p.kind == ActionKind::DifExpr) {
                if !self.conv_accepts(c.arg, v.ty) {
                    return err(
                        ErrTag::D_PRINTF_ARG_TYPE,
                        line,
                        self.conv_mismatch(fname, &format!("argument #{}", j + 2), i, c, v.ty),
                    );
                }
                if self.types.is_integer(v.ty) && !self.types.is_signed(v.ty) {
                    p.arg = dtrace_dif::program::PRINTF_UNSIGNED;
                }
            }
            plans.push(p);
            j += 1;
        }
        if j < args.len() {
            return err(
                ErrTag::D_PRINTF_ARG_EXTRA,
                line,
                format!("{fname}( ) prototype mismatch: only {j} arguments required by this format string"),
            );
        }
        Ok(plans)
    }

    /// Whether conversion kind `c` accepts a value of type `ty` (DTrace's `pfcheck_*`).
    fn conv_accepts(&mut self, c: ConvArg, ty: crate::types::TypeId) -> bool {
        match c {
            ConvArg::Int => self.types.is_integer(ty),
            ConvArg::Csi => self.types.is_integer(ty) && self.types.size(ty) <= 4,
            ConvArg::Time => self.types.is_integer(ty) && self.types.size(ty) == 8,
            ConvArg::Exact(name) => {
                let want = self.named_type(name);
                let enc = |t: &crate::types::TypeTable, id| match t.rkind(id) {
                    TypeKind::Int { signed, size } => Some((*signed, *size)),
                    _ => None,
                };
                enc(&self.types, ty).is_some_and(|e| enc(&self.types, want) == Some(e))
            }
            ConvArg::XShort => self.c_int_name(ty).is_some_and(|(n, _)| n == "short"),
            ConvArg::XLong => self.c_int_name(ty).is_some_and(|(n, _)| n == "long"),
            ConvArg::XLongLong => {
                self.c_int_name(ty).is_some_and(|(n, _)| n == "long long")
                    || self.typedef_chain_has(ty, &["int64_t", "uint64_t"])
            }
            ConvArg::Addr | ConvArg::KAddr => {
                self.types.is_integer(ty) || self.types.is_pointer(ty)
            }
            // a plain value names a user address only when there is a target process (-p/-c);
            // uaddr() records are not checked here
            ConvArg::UAddr => {
                self.has_target() && (self.types.is_integer(ty) || self.types.is_pointer(ty))
            }
            ConvArg::Str => self.types.is_strcompat(ty),
            ConvArg::WideStr => self.types.is_wstrcompat(ty),
            ConvArg::Float => self.types.is_float(ty),
            ConvArg::LongDouble => {
                matches!(self.types.rkind(ty), TypeKind::Float { size: 16 })
            }
            ConvArg::Stack => false,
            ConvArg::None => true,
        }
    }

    /// Whether the `$target` macro names a process (`-p`/`-c`), as DTrace's `pfcheck_uaddr` asks.
    fn has_target(&self) -> bool {
        self.opts
            .macros
            .iter()
            .any(|(n, v)| n == "target" && v.trim() != "0" && !v.trim().is_empty())
    }

    /// The C base name of the integer type `ty` resolves to, without `signed`/`unsigned` and
    /// with `int` dropped where other words name it (`short unsigned int` is `short`), and
    /// whether it is unsigned: what DTrace's `pfcheck_xshort`/`xlong`/`xlonglong` compare by
    /// name, for GCC's word orders (BTF, DWARF) too.
    fn c_int_name(&self, ty: crate::types::TypeId) -> Option<(String, bool)> {
        let r = self.types.resolve(ty);
        if !matches!(self.types.rkind(r), TypeKind::Int { .. }) {
            return None;
        }
        let name = self.tname(r);
        let words: Vec<&str> = name.split_whitespace().collect();
        let unsigned = words.contains(&"unsigned");
        let longs = words.iter().filter(|w| **w == "long").count();
        let base = if words.contains(&"short") {
            "short"
        } else if words.contains(&"char") {
            "char"
        } else if longs == 1 {
            "long"
        } else if longs == 2 {
            "long long"
        } else if words
            .iter()
            .all(|w| matches!(*w, "int" | "signed" | "unsigned"))
        {
            "int"
        } else {
            return None;
        };
        Some((base.to_string(), unsigned))
    }

    /// Whether one of the typedefs `ty` goes through (itself first) is named one of `names`.
    fn typedef_chain_has(&self, mut ty: crate::types::TypeId, names: &[&str]) -> bool {
        for _ in 0..64 {
            let TypeKind::Typedef(next) = self.types.kind(ty) else {
                return false;
            };
            if names.contains(&self.tname(ty).as_str()) {
                return true;
            }
            ty = *next;
        }
        false
    }

    /// DTrace's D_PRINTF_ARG_TYPE message for conversion `i` and the value named `what`.
    fn conv_mismatch(
        &self,
        fname: &str,
        what: &str,
        i: usize,
        c: &printf::Conv,
        ty: crate::types::TypeId,
    ) -> String {
        format!(
            "{fname}( ) {what} is incompatible with conversion #{} prototype:\n\tconversion: %{}\n\t prototype: {}\n\t  argument: {}",
            i + 1,
            c.name,
            c.arg.proto(),
            self.tname(ty)
        )
    }

    /// A `printa()` format checked against aggregation `id`: its conversions take the keys in
    /// order (`*` widths too), `%@` the value (`uint64_t` for `count()`, `int64_t` otherwise), as
    /// `dt_printf_validate` does for aggregations. Keys that are records (`stack()`, `sym()`...)
    /// are not type-checked.
    fn printa_format(&mut self, fmt: &[u8], id: u64, line: u32) -> CResult<()> {
        let fname = "printa";
        let convs = printf::parse(fmt, line)?;
        let Some(agg) = self.aggs.iter().find(|a| a.id as u64 == id).cloned() else {
            return Ok(());
        };
        let keys = agg.keys.clone().unwrap_or_default();
        let value_ty = match agg.func {
            Some((AggFunc::Count, ..)) => self.basic.uint64,
            _ => self.basic.int64,
        };
        let mut j = 0;
        for (i, c) in convs.iter().enumerate() {
            if c.arg == ConvArg::None {
                continue;
            }
            for d in 0..c.dynamic {
                let Some(kt) = keys.get(j) else {
                    return err(
                        ErrTag::D_PRINTF_DYN_PROTO,
                        line,
                        format!(
                            "{fname}( ) prototype mismatch: conversion #{} (%{}) is missing a corresponding \"{}\" argument",
                            i + 1,
                            c.name,
                            dyn_name(c, d)
                        ),
                    );
                };
                if agg.key_values.get(j).copied().unwrap_or(true) && !self.types.is_integer(*kt) {
                    return err(
                        ErrTag::D_PRINTF_DYN_TYPE,
                        line,
                        format!(
                            "{fname}( ) argument #{} is incompatible with conversion #{} prototype:\n\tconversion: % {} {}\n\t prototype: int\n\t  argument: {}",
                            j + 2,
                            i + 1,
                            dyn_name(c, d),
                            c.name,
                            self.tname(*kt)
                        ),
                    );
                }
                j += 1;
            }
            let (what, ty, checked) = if c.agg {
                ("aggregating action".to_string(), value_ty, true)
            } else {
                let Some(kt) = keys.get(j) else {
                    return err(
                        ErrTag::D_PRINTF_ARG_PROTO,
                        line,
                        format!("{fname}( ) prototype mismatch: conversion #{} (%{}) is missing a corresponding value argument", i + 1, c.name),
                    );
                };
                let checked = agg.key_values.get(j).copied().unwrap_or(true);
                // a stack key prints only with %k (or as text); DTrace names its type "stack"
                if agg.key_stacks.get(j).copied().unwrap_or(false)
                    && !matches!(c.arg, ConvArg::Stack | ConvArg::Str | ConvArg::WideStr)
                {
                    return err(
                        ErrTag::D_PRINTF_ARG_TYPE,
                        line,
                        format!(
                            "{fname}( ) argument #{} is incompatible with conversion #{} prototype:\n\tconversion: %{}\n\t prototype: {}\n\t  argument: stack",
                            j + 2,
                            i + 1,
                            c.name,
                            c.arg.proto()
                        ),
                    );
                }
                j += 1;
                (format!("argument #{j}", j = j + 1), *kt, checked)
            };
            if checked && !self.conv_accepts(c.arg, ty) {
                let shown = c.clone();
                return err(
                    ErrTag::D_PRINTF_ARG_TYPE,
                    line,
                    self.conv_mismatch(fname, &what, i, &shown, ty),
                );
            }
        }
        Ok(())
    }

    /// Cooks an action call.
    pub fn cook_action(
        &mut self,
        n: &str,
        args: &[Expr],
        line: u32,
        plans: &mut Vec<Plan>,
    ) -> CResult<()> {
        // arity and argument types from the one table; printa( ) words its own mismatches
        if let Some(a) = action_func(n) {
            if n != "printa" {
                self.proto_len(n, args.len(), a.required, a.max_args(), line)?;
            }
            self.check_action_params(a, args, line)?;
        }
        match n {
            "trace" => {
                if matches!(args[0].kind, ExprKind::Agg(_)) {
                    return err(
                        ErrTag::D_TRACE_DYN,
                        line,
                        "trace( ) may not be applied to a dynamic expression",
                    );
                }
                let v = self.cook_result(&args[0])?;
                if self.types.is_void(v.ty) {
                    return err(
                        ErrTag::D_TRACE_VOID,
                        line,
                        "trace( ) may not be applied to a void expression",
                    );
                }
                let signed = self.types.is_signed(v.ty);
                let string = self.types.is_string(v.ty);
                let byref = self.types.is_by_ref(v.ty) && !string;
                let mut p = Plan::new(ActionKind::DifExpr, Some(v));
                if byref {
                    p.arg = dtrace_dif::program::TRACE_BYREF;
                } else if string {
                    p.arg = dtrace_dif::program::TRACE_STRING;
                } else if signed {
                    p.arg = dtrace_dif::program::TRACE_SIGNED;
                }
                plans.push(p);
            }
            "print" => {
                if matches!(args[0].kind, ExprKind::Agg(_)) {
                    return err(
                        ErrTag::D_PRINT_AGG,
                        line,
                        "print( ) may not be applied to an aggregation -- did you mean printa()?",
                    );
                }
                let v = self.cook(&args[0])?;
                if self.types.is_void(v.ty) {
                    return err(
                        ErrTag::D_PRINT_VOID,
                        line,
                        "print( ) may not be applied to a void expression",
                    );
                }
                if matches!(v.kind, TK::Xlate(..) | TK::XlateStruct(..))
                    && self.types.is_pointer(v.ty)
                {
                    return err(
                        ErrTag::D_PRINT_DYN,
                        line,
                        "print( ) may not be applied to a translated pointer",
                    );
                }
                // DTrace for Linux's print() takes a pointer (prototype `void *`) and prints what
                // it points to
                let Some(r) = self.types.pointee(v.ty) else {
                    return err(
                        ErrTag::D_PROTO_ARG,
                        line,
                        format!(
                            "print( ) argument #1 is incompatible with prototype:\n\tprototype: void *\n\t argument: {}",
                            self.tname(v.ty)
                        ),
                    );
                };
                self.types.complete(r);
                // a struct or union of no size cannot be printed
                let sou = matches!(self.types.rkind(r), TypeKind::Sou { .. });
                if sou && self.types.size(r) == 0 {
                    return err(
                        ErrTag::D_PRINT_SIZE,
                        line,
                        format!(
                            "print( ) argument #1 reference has type '{}' with size 0; cannot print( ) it.",
                            self.tname(r)
                        ),
                    );
                }
                let index = self.print_type_index(r);
                plans.extend(self.print_plans(v, r, index, line)?);
            }
            "printf" | "system" | "freopen" => {
                let fmt = self.format_arg(n, &args[0])?;
                // "." would name the current directory, not a file to write
                if n == "freopen" && fmt == b"." {
                    return err(
                        ErrTag::D_FREOPEN_INVALID,
                        line,
                        "freopen( ) argument #1 cannot be \".\"",
                    );
                }
                let mut vals = self.printf_args(n, &fmt, &args[1..], line)?;
                let kind = match n {
                    "printf" => ActionKind::Printf,
                    "system" => ActionKind::System,
                    _ => ActionKind::Freopen,
                };
                let fi = self.format_index(&fmt);
                let first = if vals.is_empty() {
                    None
                } else {
                    Some(vals.remove(0))
                };
                let mut p = Plan::new(kind, first.as_ref().and_then(|f| f.expr.clone()));
                p.arg = fi;
                if first
                    .as_ref()
                    .is_some_and(|f| f.arg == dtrace_dif::program::PRINTF_UNSIGNED)
                {
                    p.uarg = dtrace_dif::program::PRINTF_FIRST_UNSIGNED;
                }
                plans.push(p);
                plans.extend(vals);
            }
            "printa" => {
                if args.is_empty() {
                    self.proto_len(n, 0, 1, usize::MAX, line)?;
                }
                let (fmt, rest) = match &args[0].kind {
                    ExprKind::Str(_) => (Some(self.format_arg(n, &args[0])?), &args[1..]),
                    _ => (None, args),
                };
                if rest.is_empty() {
                    return err(
                        ErrTag::D_PRINTA_PROTO,
                        line,
                        "printa( ) prototype mismatch: 1 args passed, 2 expected",
                    );
                }
                let off = usize::from(fmt.is_some());
                let mut ids = Vec::new();
                for (i, a) in rest.iter().enumerate() {
                    ids.push(self.agg_arg(n, i + off, a)?);
                }
                self.printa_keys_match(&ids, line)?;
                // the arguments are valid aggregations with matching keys (reported above as
                // DTrace does); several of them without a format are not supported here
                if fmt.is_none() && rest.len() > 1 {
                    return err(
                        ErrTag::D_PRINTA_PROTO,
                        line,
                        format!(
                            "printa( ) prototype mismatch: {} args passed, 1 expected",
                            rest.len()
                        ),
                    );
                }
                let arg = match &fmt {
                    Some(f) => {
                        for id in &ids {
                            self.printa_format(f, *id, line)?;
                        }
                        self.printa_format_index(f)
                    }
                    None => NO_FORMAT,
                };
                // One printa record per aggregation, all with the statement's format (libdtrace's
                // dt_action_printa): a format may use fewer %@ than there are aggregations.
                for id in &ids {
                    let mut p = Plan::new(ActionKind::Printa, Some(self.agg_id_expr(*id, line)));
                    p.arg = arg;
                    plans.push(p);
                }
            }
            "exit" | "raise" | "chill" | "speculate" | "commit" | "discard" => {
                let v = self.cook(&args[0])?;
                let kind = match n {
                    "exit" => ActionKind::Exit,
                    "raise" => ActionKind::Raise,
                    "chill" => ActionKind::Chill,
                    "speculate" => ActionKind::Speculate,
                    "commit" => ActionKind::Commit,
                    _ => ActionKind::Discard,
                };
                let ty = self.basic.int;
                let v = if kind == ActionKind::Exit {
                    self.convert(v, ty)
                } else {
                    v
                };
                plans.push(Plan::new(kind, Some(v)));
            }
            "stop" | "breakpoint" | "panic" => {
                let kind = match n {
                    "stop" => ActionKind::Stop,
                    "breakpoint" => ActionKind::Breakpoint,
                    _ => ActionKind::Panic,
                };
                plans.push(Plan::new(kind, None));
            }
            "ftruncate" => {
                // As DTrace's: a library action records a value, here the ignored constant 0,
                // so the clause has a record for the consumer to act on.
                let zero = TExpr::int(0, self.basic.int, line);
                let mut p = Plan::new(ActionKind::LibAct, Some(zero));
                p.arg = LibAction::Ftruncate as u64;
                plans.push(p);
            }
            "tracemem" => {
                let addr = self.cook(&args[0])?;
                if !self.types.is_scalar(addr.ty) {
                    return err(
                        ErrTag::D_TRACEMEM_ADDR,
                        line,
                        format!("tracemem( ) argument #1 is incompatible with prototype:\n\tprototype: pointer or integer\n\t argument: {}", self.tname(addr.ty)),
                    );
                }
                let size = self.positive_const(&args[1], ErrTag::D_TRACEMEM_SIZE, line, "tracemem( ) argument #2 must be a non-zero positive integral constant expression")?;
                if args.len() == 3 {
                    // As libdtrace lays it out: the dynamic size first (an integer record), then
                    // the memory.
                    let d = self.cook(&args[2])?;
                    if !self.types.is_scalar(d.ty) {
                        return err(
                            ErrTag::D_TRACEMEM_DYNSIZE,
                            line,
                            "tracemem ( ) dynamic size (argument #3) must be of scalar type",
                        );
                    }
                    plans.push(Plan::new(ActionKind::TracememDynsize, Some(d)));
                }
                // The object returns the address by reference: `size` bytes are recorded.
                let mut p = Plan::new(ActionKind::Tracemem, Some(addr));
                p.arg = size;
                plans.push(p);
            }
            "stack" => {
                let frames = match args.first() {
                    None => self.stack_defaults.stackframes as u64,
                    Some(a) => self.positive_const(
                        a,
                        ErrTag::D_STACK_SIZE,
                        line,
                        "stack( ) argument #1 must be a non-zero positive integer constant",
                    )?,
                };
                let mut p = Plan::new(ActionKind::Stack, None);
                p.arg = frames;
                plans.push(p);
            }
            "ustack" | "jstack" => {
                let (df, ds) = if n == "ustack" {
                    (self.stack_defaults.ustackframes as u64, 0)
                } else {
                    (
                        self.stack_defaults.jstackframes as u64,
                        self.stack_defaults.jstackstrsize as u64,
                    )
                };
                let frames = match args.first() {
                    None => df,
                    Some(a) => self.positive_const(
                        a,
                        ErrTag::D_USTACK_FRAMES,
                        line,
                        "ustack( ) argument #1 must be a non-zero positive integer constant",
                    )?,
                };
                let strsize = match args.get(1) {
                    None => ds,
                    Some(a) => match self.const_arg(a)? {
                        Some((v, _)) if v >= 0 => v as u64,
                        _ => {
                            return err(
                                ErrTag::D_USTACK_STRSIZE,
                                line,
                                "ustack( ) argument #2 must be a positive integer constant",
                            )
                        }
                    },
                };
                let mut p = Plan::new(
                    if n == "ustack" {
                        ActionKind::Ustack
                    } else {
                        ActionKind::Jstack
                    },
                    None,
                );
                p.arg = (frames & 0xffff_ffff) | (strsize << 32);
                plans.push(p);
            }
            "clear" | "denormalize" => {
                let id = self.agg_arg(n, 0, &args[0])?;
                let mut p = Plan::new(ActionKind::LibAct, Some(self.agg_id_expr(id, line)));
                p.arg = if n == "clear" {
                    LibAction::Clear
                } else {
                    LibAction::Denormalize
                } as u64;
                plans.push(p);
            }
            "trunc" | "normalize" => {
                let stag = if n == "trunc" {
                    ErrTag::D_TRUNC_SCALAR
                } else {
                    ErrTag::D_NORMALIZE_SCALAR
                };
                let id = self.agg_arg(n, 0, &args[0])?;
                let mut p = Plan::new(ActionKind::LibAct, Some(self.agg_id_expr(id, line)));
                p.arg = if n == "trunc" {
                    LibAction::Trunc
                } else {
                    LibAction::Normalize
                } as u64;
                let p_arg = p.arg;
                plans.push(p);
                if let Some(a) = args.get(1) {
                    if matches!(a.kind, ExprKind::Agg(_)) {
                        return err(
                            ErrTag::D_PROTO_ARG,
                            line,
                            format!("{n}( ) argument #2 is incompatible with prototype:\n\tprototype: uint64_t\n\t argument: aggregation"),
                        );
                    }
                    let v = self.cook(a)?;
                    if !self.types.is_scalar(v.ty) {
                        return err(
                            stag,
                            line,
                            format!("{n}( ) argument #2 must be of scalar type"),
                        );
                    }
                    // The count is a record of the same library action (DTrace's form), so no
                    // later trace() can be taken for it.
                    let mut c = Plan::new(ActionKind::LibAct, Some(v));
                    c.arg = p_arg;
                    plans.push(c);
                }
            }
            "setopt" => {
                let mut vals = Vec::new();
                for (i, a) in args.iter().enumerate() {
                    let v = self.cook(a)?;
                    if !self.types.is_strcompat(v.ty) {
                        return err(
                            ErrTag::D_PROTO_ARG,
                            line,
                            format!(
                                "setopt( ) argument #{} is incompatible with prototype:\n\tprototype: char *\n\t argument: {}",
                                i + 1,
                                self.tname(v.ty)
                            ),
                        );
                    }
                    vals.push(v);
                }
                // The value record always follows, as in DTrace: without a value it is the
                // constant 0, which the consumer reads as "set" (so the next action's record is
                // never taken for this option's value).
                if vals.len() == 1 {
                    vals.push(self.cook(&Expr {
                        kind: ExprKind::Int(0, Default::default()),
                        line,
                    })?);
                }
                // Both as records of the same library action (DTrace's form).
                for v in vals {
                    let mut p = Plan::new(ActionKind::LibAct, Some(v));
                    p.arg = LibAction::Setopt as u64;
                    plans.push(p);
                }
            }
            _ if record_kind(n).is_some() => {
                let p = self.value_plan(&Expr {
                    kind: ExprKind::Call(n.to_string(), args.to_vec()),
                    line,
                })?;
                plans.push(p);
            }
            _ => {
                return err(
                    ErrTag::D_CG_EXPR,
                    line,
                    format!(
                        "{n}( ) may not be called from a D expression (D program context required)"
                    ),
                )
            }
        }
        // destructive actions compile without -w; enabling refuses them, as in DTrace (see
        // [`crate::destructive`])
        Ok(())
    }

    fn cook_aggregation(
        &mut self,
        l: &Expr,
        r: &Expr,
        line: u32,
        plans: &mut Vec<Plan>,
    ) -> CResult<()> {
        let (name, keys): (String, &[Expr]) = match &l.kind {
            ExprKind::Agg(a) => (a.clone(), &[]),
            ExprKind::Index(b, k) => match &b.kind {
                ExprKind::Agg(a) => (a.clone(), k.as_slice()),
                _ => unreachable_agg(line)?,
            },
            _ => unreachable_agg(line)?,
        };
        let (fname, args) = match &r.kind {
            ExprKind::Call(f, a) if agg_func(f).is_some() => (f.clone(), a.as_slice()),
            // DTrace cooks the right-hand side first: a function no one defined is that error
            ExprKind::Call(f, _)
                if action_func(f).is_none() && crate::idents::subr_proto(f).is_none() =>
            {
                return err(
                    ErrTag::D_FUNC_UNDEF,
                    line,
                    format!("undefined function name: {f}"),
                );
            }
            _ => {
                return err(
                    ErrTag::D_AGG_FUNC,
                    line,
                    format!("@{name} must be assigned the result of an aggregating function"),
                )
            }
        };
        let func = agg_func(&fname).unwrap_or(AggFunc::Count);
        // keys
        let mut key_plans = Vec::new();
        let mut key_types = Vec::new();
        for k in keys {
            let mut p = self.value_plan_any(k)?;
            // A `char [n]` key (`curpsinfo->pr_fname`) is keyed and printed as the string it holds.
            if let Some(ex) = p.expr.take() {
                let chars = self.types.is_strcompat(ex.ty)
                    && matches!(self.types.rkind(ex.ty), crate::types::TypeKind::Array(..));
                p.expr = Some(if p.kind == ActionKind::DifExpr && chars {
                    let line = ex.line;
                    crate::tree::TExpr {
                        kind: crate::tree::TK::Retype(Box::new(ex)),
                        ty: self.basic.string,
                        line,
                    }
                } else {
                    ex
                });
            }
            let kt = p.expr.as_ref().map(|e| e.ty).unwrap_or(self.basic.uint64);
            if let Some(ex) = &p.expr {
                // a translated pointer (`curpsinfo`) points at data built for the expression
                let translated = matches!(ex.kind, TK::Xlate(..) | TK::XlateStruct(..))
                    && self.types.is_pointer(ex.ty);
                if p.kind == ActionKind::DifExpr && translated {
                    return err(
                        ErrTag::D_KEY_TYPE,
                        k.line,
                        format!(
                            "@{name}[ ] key #{} is of invalid type: pointer to translated data",
                            key_types.len() + 1
                        ),
                    );
                }
                if p.kind == ActionKind::DifExpr
                    && !self.types.is_scalar(ex.ty)
                    && !self.types.is_string(ex.ty)
                {
                    return err(
                        ErrTag::D_KEY_TYPE,
                        k.line,
                        format!(
                            "@{name}[ ] key #{} is of invalid type: {}",
                            key_types.len() + 1,
                            self.tname(ex.ty)
                        ),
                    );
                }
            }
            key_types.push(kt);
            key_plans.push(p);
        }
        // arguments
        if let Some(a) = action_func(&fname) {
            self.proto_len(&fname, args.len(), a.required, a.max_args(), line)?;
        }
        let value = match args.first() {
            Some(a) => {
                let v = self.cook(a)?;
                if !self.types.is_scalar(v.ty) {
                    return err(
                        ErrTag::D_AGG_SCALAR,
                        line,
                        format!("{fname}( ) argument #1 must be of scalar type"),
                    );
                }
                Some(v)
            }
            None => None,
        };
        let incr_pos = match func {
            AggFunc::Quantize => 1,
            AggFunc::Lquantize => 4,
            AggFunc::Llquantize => 5,
            _ => usize::MAX,
        };
        // the increment: a DIFEXPR of size 0 just before the aggregating action, counted in ntuple
        // (DTrace's `dtag_hasarg` convention)
        let incr = match args.get(incr_pos) {
            Some(a) => {
                let v = self.cook(a)?;
                if !self.types.is_scalar(v.ty) {
                    // the increment is checked against the function's prototype
                    return err(
                        ErrTag::D_PROTO_ARG,
                        line,
                        format!(
                            "{fname}( ) argument #{} is incompatible with prototype:\n\tprototype: int64_t\n\t argument: {}",
                            incr_pos + 1,
                            self.tname(v.ty)
                        ),
                    );
                }
                let mut p = Plan::new(ActionKind::DifExpr, Some(v));
                p.void_result = true;
                Some(p)
            }
            None => None,
        };
        let arg = match func {
            AggFunc::Lquantize => self.lquantize_params(&args[1..], line)?,
            AggFunc::Llquantize => self.llquantize_params(&args[1..], line)?,
            _ => 0,
        };
        let idx = self.agg(&name);
        let agg = self.aggs[idx].clone();
        self.agg_undo.push((idx, agg.clone()));
        if let Some((f, fline, farg)) = agg.func {
            if f != func {
                return err(
                    ErrTag::D_AGG_REDEF,
                    line,
                    format!(
                        "aggregation redefined: @{name}\n\t current: @{name} = {}( )\n\tprevious: @{name} = {}( ) : line {fline}",
                        func.name(),
                        f.name()
                    ),
                );
            }
            if farg != arg {
                return Err(quantize_mismatch(func, farg, arg, line));
            }
        } else {
            self.aggs[idx].func = Some((func, line, arg));
        }
        match &agg.keys {
            Some(sig) => {
                if sig.len() != key_types.len() {
                    return err(
                        ErrTag::D_PROTO_LEN,
                        line,
                        format!(
                            "@{name}[ ] prototype mismatch: {} arg{} passed, {} expected",
                            key_types.len(),
                            plural(key_types.len()),
                            sig.len()
                        ),
                    );
                }
                for (i, (a, b)) in sig.iter().zip(&key_types).enumerate() {
                    let probe = TExpr::int(1, *b, line);
                    let compat = self.types.compat(*a, *b)
                        || (self.types.is_integer(*a) && self.types.is_integer(*b))
                        || (self.types.is_strcompat(*a) && self.types.is_strcompat(*b))
                        || self.argcompat(*a, &probe);
                    if !compat {
                        return err(
                            ErrTag::D_PROTO_ARG,
                            line,
                            format!(
                                "@{name}[ ] argument #{} is incompatible with prototype:\n\tprototype: {}\n\t argument: {}",
                                i + 1,
                                self.tname(*a),
                                self.tname(*b)
                            ),
                        );
                    }
                }
                // an integer key of another type is converted to the declared key's type, so
                // `@[(int32_t)1] ` and `@[(int64_t)1]` are one key
                for (i, a) in sig.iter().enumerate() {
                    let b = key_types[i];
                    if !self.types.is_integer(*a)
                        || !self.types.is_integer(b)
                        || self.types.compat(*a, b)
                    {
                        continue;
                    }
                    if let Some(p) = key_plans
                        .get_mut(i)
                        .filter(|p| p.kind == ActionKind::DifExpr)
                    {
                        if let Some(ex) = p.expr.take() {
                            p.expr = Some(self.convert(ex, *a));
                        }
                    }
                }
            }
            None => {
                self.aggs[idx].keys = Some(key_types.clone());
                self.aggs[idx].key_values = key_plans
                    .iter()
                    .map(|p| p.kind == ActionKind::DifExpr)
                    .collect();
                self.aggs[idx].key_stacks = key_plans
                    .iter()
                    .map(|p| {
                        matches!(
                            p.kind,
                            ActionKind::Stack | ActionKind::Ustack | ActionKind::Jstack
                        )
                    })
                    .collect();
            }
        }
        let ntuple = (key_plans.len() + usize::from(incr.is_some())) as u32;
        plans.extend(key_plans);
        plans.extend(incr);
        let mut p = Plan::new(func.kind(), value);
        p.arg = arg;
        p.uarg = agg.id as u64;
        p.ntuple = ntuple;
        plans.push(p);
        Ok(())
    }

    fn lquantize_params(&mut self, a: &[Expr], line: u32) -> CResult<u64> {
        let base = self.required_const(
            &a[0],
            ErrTag::D_LQUANT_BASETYPE,
            line,
            "lquantize( ) argument #2 must be a constant integer",
        )?;
        if base < i32::MIN as i64 || base > i32::MAX as i64 {
            return err(
                ErrTag::D_LQUANT_BASEVAL,
                line,
                "lquantize( ) argument #2 must be a 32-bit quantity",
            );
        }
        let limit = self.required_const(
            &a[1],
            ErrTag::D_LQUANT_LIMTYPE,
            line,
            "lquantize( ) argument #3 must be a constant integer",
        )?;
        if limit < i32::MIN as i64 || limit > i32::MAX as i64 {
            return err(
                ErrTag::D_LQUANT_LIMVAL,
                line,
                "lquantize( ) argument #3 must be a 32-bit quantity",
            );
        }
        if limit <= base {
            return err(
                ErrTag::D_LQUANT_MISMATCH,
                line,
                "lquantize( ) base (argument #2) must be less than limit (argument #3)",
            );
        }
        let step = match a.get(2) {
            None => 1,
            Some(s) => self.required_const(
                s,
                ErrTag::D_LQUANT_STEPTYPE,
                line,
                "lquantize( ) argument #4 must be a constant integer",
            )?,
        };
        if step <= 0 {
            return err(
                ErrTag::D_LQUANT_STEPTYPE,
                line,
                "lquantize( ) argument #4 must be a non-zero positive integer constant",
            );
        }
        if step > u16::MAX as i64 {
            return err(
                ErrTag::D_LQUANT_STEPVAL,
                line,
                "lquantize( ) argument #4 must be a non-zero positive 16-bit quantity",
            );
        }
        let levels = (limit - base) / step;
        if levels == 0 {
            return err(
                ErrTag::D_LQUANT_STEPLARGE,
                line,
                format!(
                    "lquantize( ) step (argument #4) too large (must be at most {})",
                    limit - base
                ),
            );
        }
        if levels > u16::MAX as i64 {
            return err(
                ErrTag::D_LQUANT_STEPSMALL,
                line,
                format!(
                    "lquantize( ) step (argument #4) too small to quantize from {base} to {limit}"
                ),
            );
        }
        Ok(lquantize_arg(base as i32, levels as u16, step as u16))
    }

    fn llquantize_params(&mut self, a: &[Expr], line: u32) -> CResult<u64> {
        let mut v = [0i64; 4];
        let tags = [
            (ErrTag::D_LLQUANT_FACTORTYPE, "factor"),
            (ErrTag::D_LLQUANT_LMAGTYPE, "low magnitude"),
            (ErrTag::D_LLQUANT_HMAGTYPE, "high magnitude"),
            (ErrTag::D_LLQUANT_STEPTYPE, "linear steps per magnitude"),
        ];
        for i in 0..4 {
            v[i] = self.required_const(
                &a[i],
                tags[i].0,
                line,
                format!(
                    "llquantize( ) argument #{} ({}) must be a constant integer",
                    i + 2,
                    tags[i].1
                ),
            )?;
        }
        let [factor, low, high, nsteps] = v;
        if !(2..=u16::MAX as i64).contains(&factor) {
            return err(ErrTag::D_LLQUANT_FACTORVAL, line, "llquantize( ) argument #2 (factor) must be a 16-bit quantity greater than or equal to 2");
        }
        if !(0..=u16::MAX as i64).contains(&low) {
            return err(
                ErrTag::D_LLQUANT_LMAGVAL,
                line,
                "llquantize( ) argument #3 (low magnitude) must be a 16-bit quantity",
            );
        }
        if !(0..=u16::MAX as i64).contains(&high) {
            return err(
                ErrTag::D_LLQUANT_HMAGVAL,
                line,
                "llquantize( ) argument #4 (high magnitude) must be a 16-bit quantity",
            );
        }
        if high < low {
            return err(ErrTag::D_LLQUANT_HMAGVAL, line, "llquantize( ) argument #4 (high magnitude) must be at least argument #3 (low magnitude)");
        }
        if nsteps <= 0 {
            return err(
                ErrTag::D_LLQUANT_STEPTYPE,
                line,
                "llquantize( ) argument #5 (linear steps per magnitude) must be a non-zero positive integer constant",
            );
        }
        if nsteps > u16::MAX as i64 {
            return err(
                ErrTag::D_LLQUANT_STEPVAL,
                line,
                "llquantize( ) argument #5 (linear steps per magnitude) must be a 16-bit quantity",
            );
        }
        if nsteps % factor != 0 && factor % nsteps != 0 {
            return err(ErrTag::D_LLQUANT_STEPVAL, line, "llquantize( ) argument #5 (linear steps per magnitude) must evenly divide or be evenly divisible by argument #2 (factor)");
        }
        // more steps than the factor: each magnitude's steps must divide evenly, so the factor
        // raised to the low magnitude plus one (at least squared) must be a multiple of the steps
        let exp = (low as u32 + 1).max(2);
        if nsteps > factor
            && (factor as u128)
                .checked_pow(exp)
                .is_some_and(|p| p % nsteps as u128 != 0)
        {
            return err(ErrTag::D_LLQUANT_STEPVAL, line, "llquantize( ) argument #5 (linear steps per magnitude) must evenly divide argument #2 (factor) raised to the power of argument #3 (low magnitude) plus one");
        }
        let mut p: u64 = 1;
        for _ in 0..=high {
            p = match p.checked_mul(factor as u64) {
                Some(x) => x,
                None => return err(ErrTag::D_LLQUANT_HMAGVAL, line, "llquantize( ) argument #2 (factor) raised to power of argument #4 (high magnitude) plus 1 overflows 64-bits"),
            };
        }
        Ok(llquantize_arg(
            factor as u16,
            low as u16,
            high as u16,
            nsteps as u16,
        ))
    }
}

fn unreachable_agg(line: u32) -> CResult<(String, &'static [Expr])> {
    err(ErrTag::D_SYNTAX, line, "invalid aggregation reference")
}

/// The name DTrace gives the `k`th dynamic argument of a conversion: the width (`*`) is consumed
/// before the precision (`.*`), as `dt_printf_validate` orders them.
fn dyn_name(c: &printf::Conv, k: u32) -> &'static str {
    if c.dyn_prec && k + 1 == c.dynamic {
        ".*"
    } else {
        "*"
    }
}

/// The error for a quantizing aggregation whose parameters differ from its earlier use: DTrace for
/// Linux names the first parameter that differs (`D_LQUANT_MATCH*`, `D_LLQUANT_MATCH*`), comparing the
/// encoded action arguments field by field.
fn quantize_mismatch(func: AggFunc, prev: u64, cur: u64, line: u32) -> CompileError {
    let field = |v: u64, shift: u32, bits: u32| (v >> shift) & ((1u64 << bits) - 1);
    if func == AggFunc::Lquantize {
        let (pbase, cbase) = (
            field(prev, 0, 32) as u32 as i32,
            field(cur, 0, 32) as u32 as i32,
        );
        let limit =
            |v: u64, base: i32| base as i64 + field(v, 32, 16) as i64 * field(v, 48, 16) as i64;
        let (plim, clim) = (limit(prev, pbase), limit(cur, cbase));
        let (pstep, cstep) = (field(prev, 48, 16), field(cur, 48, 16));
        let (tag, what, p, c) = if pbase != cbase {
            (
                ErrTag::D_LQUANT_MATCHBASE,
                "base (argument #2)",
                pbase as i64,
                cbase as i64,
            )
        } else if plim != clim {
            (ErrTag::D_LQUANT_MATCHLIM, "limit (argument #3)", plim, clim)
        } else {
            (
                ErrTag::D_LQUANT_MATCHSTEP,
                "step (argument #4)",
                pstep as i64,
                cstep as i64,
            )
        };
        return CompileError::new(
            tag,
            line,
            format!(
                "lquantize( ) {what} doesn't match previous declaration: expected {p}, found {c}"
            ),
        );
    }
    let fields = [
        (48, ErrTag::D_LLQUANT_MATCHFACTOR, "factor (argument #2)"),
        (
            32,
            ErrTag::D_LLQUANT_MATCHLMAG,
            "low magnitude (argument #3)",
        ),
        (
            16,
            ErrTag::D_LLQUANT_MATCHHMAG,
            "high magnitude (argument #4)",
        ),
        (
            0,
            ErrTag::D_LLQUANT_MATCHSTEPS,
            "linear steps per magnitude (argument #5)",
        ),
    ];
    let (shift, tag, what) = fields
        .into_iter()
        .find(|(sh, _, _)| field(prev, *sh, 16) != field(cur, *sh, 16))
        .unwrap_or(fields[3]);
    CompileError::new(
        tag,
        line,
        format!(
            "llquantize( ) {what} doesn't match previous declaration: expected {}, found {}",
            field(prev, shift, 16),
            field(cur, shift, 16)
        ),
    )
}
