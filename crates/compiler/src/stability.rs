//! Stability attributes of clauses (DTrace's `dt_node_attr_assign`/`dt_attr_min` over the parse
//! tree): every built-in variable, subroutine, action and aggregating function has attributes
//! (those of libdtrace's identifier table: nearly all `Stable/Stable/Common`, `curthread`'s data
//! `Private`, the byte-order and lock subroutines `Evolving`), kernel symbols are
//! `Private/Private/Unknown`, and everything else of D's own (constants, user variables, operators)
//! is `Stable/Stable/Common`. An expression's attributes are the minimum over its parts; a clause's,
//! the minimum over its predicate and statements. `probeprov`, `probemod`, `probefunc`,
//! `probename` and `args[]` take the attributes of the probe's provider, recorded as
//! [`ProviderDeps`] for the consumer to resolve.

use dtrace_dif::attr::{Attribute, DepClass, EcbAttrs, ProviderDeps, Stability};

use crate::ast::{Clause, Expr, ExprKind, Stmt};

/// Subroutines whose attributes are `Evolving/Evolving/Common`; every other subroutine, action and
/// aggregating function is `Stable/Stable/Common`.
const EVOLVING_SUBRS: &[&str] = &[
    "ddi_pathname",
    "getmajor",
    "getminor",
    "htonl",
    "htonll",
    "htons",
    "ntohl",
    "ntohll",
    "ntohs",
    "mutex_owned",
    "mutex_owner",
    "mutex_type_adaptive",
    "mutex_type_spin",
    "rw_iswriter",
    "rw_read_held",
    "rw_write_held",
    "sx_isexclusive",
    "sx_shared_held",
    "sx_exclusive_held",
];

/// The attributes of a function called by name.
fn call_attr(name: &str) -> Attribute {
    if EVOLVING_SUBRS.contains(&name) {
        Attribute::EVOLVING
    } else if let Some(a) = crate::actions::action_func(name) {
        a.attr
    } else {
        Attribute::DEFAULT
    }
}

/// The attributes of identifier `name`, recording in `deps` the provider's it takes.
fn ident_attr(name: &str, deps: &mut ProviderDeps) -> Attribute {
    if name.contains('`') {
        // a kernel symbol (`_dtrace_symattr`)
        return Attribute::PRIVATE;
    }
    match name {
        "curthread" => Attribute::new(Stability::Stable, Stability::Private, DepClass::Common),
        "probeprov" => {
            deps.provider = true;
            Attribute::DEFAULT
        }
        "probemod" => {
            deps.module = true;
            Attribute::DEFAULT
        }
        "probefunc" => {
            deps.function = true;
            Attribute::DEFAULT
        }
        "probename" => {
            deps.name = true;
            Attribute::DEFAULT
        }
        "args" => {
            deps.args = true;
            Attribute::DEFAULT
        }
        // other built-in variables, user variables, inlines, enumerators
        _ => Attribute::DEFAULT,
    }
}

/// The attributes of expression `e`.
pub fn expr_attr(e: &Expr, deps: &mut ProviderDeps) -> Attribute {
    match &e.kind {
        ExprKind::Int(..)
        | ExprKind::Char(_)
        | ExprKind::Float(_)
        | ExprKind::Str(_)
        | ExprKind::Agg(_)
        | ExprKind::ScopedVar(..)
        | ExprKind::SizeofType(_)
        | ExprKind::SizeofExpr(_)
        | ExprKind::Offsetof(..) => Attribute::DEFAULT,
        ExprKind::Ident(name) => ident_attr(name, deps),
        ExprKind::Unary(_, x)
        | ExprKind::Cast(_, x)
        | ExprKind::Stringof(x)
        | ExprKind::Xlate(_, x)
        // a member takes the attributes of what it is a member of
        | ExprKind::Member(x, _, _) => expr_attr(x, deps),
        // an aggregation's are those of its keys (DTrace's `dt_cook_aggregation`): the
        // aggregating function's arguments do not count
        ExprKind::Assign(None, l, r) if is_agg(l) && matches!(r.kind, ExprKind::Call(..)) => {
            match &l.kind {
                ExprKind::Index(_, keys) => min_of(keys, deps),
                _ => Attribute::DEFAULT,
            }
        }
        ExprKind::Binary(_, l, r) | ExprKind::Assign(_, l, r) | ExprKind::Comma(l, r) => {
            expr_attr(l, deps).min(expr_attr(r, deps))
        }
        ExprKind::Cond(c, t, f) => expr_attr(c, deps)
            .min(expr_attr(t, deps))
            .min(expr_attr(f, deps)),
        ExprKind::Call(name, args) => call_attr(name).min(min_of(args, deps)),
        ExprKind::Index(base, idx) => expr_attr(base, deps).min(min_of(idx, deps)),
    }
}

/// The minimum attributes of `parts` (`Stable/Stable/Common` for none, as `dt_node_list_cook`).
fn min_of(parts: &[Expr], deps: &mut ProviderDeps) -> Attribute {
    parts
        .iter()
        .fold(Attribute::DEFAULT, |a, p| a.min(expr_attr(p, deps)))
}

fn is_agg(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Agg(_) => true,
        ExprKind::Index(b, _) => matches!(b.kind, ExprKind::Agg(_)),
        _ => false,
    }
}

/// The attributes of a clause's predicate and statements (`if` already split away by
/// [`crate::ifsplit`]; any left are walked into).
pub fn clause_attrs(c: &Clause) -> EcbAttrs {
    let mut deps = ProviderDeps::default();
    let mut stmt = Attribute::DEFAULT;
    fn stmts(body: &[Stmt], deps: &mut ProviderDeps) -> Attribute {
        body.iter().fold(Attribute::DEFAULT, |a, s| {
            a.min(match s {
                Stmt::Expr(e) => expr_attr(e, deps),
                Stmt::If(c, t, f, _) => expr_attr(c, deps).min(stmts(t, deps)).min(stmts(f, deps)),
            })
        })
    }
    if let Some(body) = &c.body {
        stmt = stmt.min(stmts(body, &mut deps));
    }
    if let Some(p) = &c.pred {
        stmt = stmt.min(expr_attr(p, &mut deps));
    }
    EcbAttrs { stmt, deps }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{compile, CompileOptions};

    /// The attributes of each ECB of `src`.
    fn attrs(src: &str) -> Vec<EcbAttrs> {
        let o = CompileOptions {
            destructive: true,
            ..CompileOptions::default()
        };
        let p = compile(src, &o).unwrap_or_else(|e| panic!("{src}: {e}"));
        assert_eq!(p.attrs.len(), p.ecbs.len());
        p.attrs
    }

    fn one(src: &str) -> EcbAttrs {
        let a = attrs(src);
        assert_eq!(a.len(), 1, "{src}");
        a[0]
    }

    const S: Attribute = Attribute::DEFAULT;
    const CURTHREAD: Attribute =
        Attribute::new(Stability::Stable, Stability::Private, DepClass::Common);

    #[test]
    fn constants_variables_and_stable_builtins() {
        for src in [
            "BEGIN { trace(1); }",
            "BEGIN { }",
            "BEGIN { x = execname; self->y = pid + tid; this->z = timestamp; }",
            "BEGIN /arg0 > 1/ { printf(\"%s %d\\n\", strjoin(\"a\", \"b\"), walltimestamp); exit(0); }",
            "BEGIN { @[execname, uid] = quantize(arg1); printa(@); }",
        ] {
            assert_eq!(one(src), EcbAttrs::default(), "{src}");
        }
    }

    #[test]
    fn identifiers_with_lesser_attributes() {
        assert_eq!(one("BEGIN { trace(curthread); }").stmt, CURTHREAD);
        // in the predicate too, and through member access and casts
        assert_eq!(one("BEGIN /curthread/ { trace(1); }").stmt, CURTHREAD);
        assert_eq!(one("BEGIN { trace((long)curthread + 1); }").stmt, CURTHREAD);
        assert_eq!(one("BEGIN { trace(htons(1)); }").stmt, Attribute::EVOLVING);
        assert_eq!(
            one("BEGIN { trace(htons(1)); trace(curthread); }").stmt,
            Attribute::new(Stability::Evolving, Stability::Private, DepClass::Common)
        );
        // an aggregation's keys count, its function's arguments do not (`dt_cook_aggregation`)
        assert_eq!(one("BEGIN { @[curthread] = count(); }").stmt, CURTHREAD);
        assert_eq!(one("BEGIN { @ = sum((long)curthread); }").stmt, S);
    }

    #[test]
    fn provider_dependent_identifiers() {
        let a = one("BEGIN { trace(probefunc); }");
        assert_eq!(a.stmt, S);
        assert_eq!(
            a.deps,
            ProviderDeps {
                function: true,
                ..ProviderDeps::default()
            }
        );
        let a = one(
            "syscall::read:entry /probeprov == \"x\"/ { trace(args[0]); trace(probemod); trace(probename); }",
        );
        assert_eq!(
            a.deps,
            ProviderDeps {
                provider: true,
                module: true,
                function: false,
                name: true,
                args: true,
            }
        );
        // `self->probefunc` and a member named `probefunc` are not the built-in
        assert_eq!(
            one("BEGIN { self->probefunc = 1; }").deps,
            ProviderDeps::default()
        );
    }

    #[test]
    fn each_ecb_has_its_clause_attributes() {
        let a = attrs("BEGIN, END { trace(curthread); } tick-1s { trace(1); }");
        assert_eq!(
            a.iter().map(|e| e.stmt).collect::<Vec<_>>(),
            vec![CURTHREAD, CURTHREAD, S]
        );
        // an `if` splits a clause; each part has the attributes of what it holds
        let a = attrs("BEGIN { if (arg0) { trace(curthread); } else { trace(htons(2)); } }");
        assert!(a.contains(&EcbAttrs {
            stmt: CURTHREAD,
            deps: ProviderDeps::default()
        }));
        assert!(a.iter().any(|e| e.stmt == Attribute::EVOLVING));
    }
}
