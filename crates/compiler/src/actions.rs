//! The tracing and aggregating functions D programs call (spec ch.10 and 11): one table giving each
//! its name, what kind of function it is, its prototype (parameter types as DTrace's messages print
//! them, how many are required, whether more may follow), whether it is destructive, and its
//! stability. The checker takes arity, kinds and names from here; [`crate::idents`] holds the
//! subroutines the same way.

use crate::check::AggFunc;
use dtrace_dif::attr::Attribute;
use dtrace_dif::program::ActionKind;

/// What a function named in a D program does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FuncKind {
    /// A tracing function (an action of a clause's body).
    Tracing,
    /// An aggregating function (`@a = count()`).
    Aggregating(AggFunc),
    /// A function that records a value as a symbol, module or address (`sym()`, `umod()`...),
    /// usable wherever a value is traced.
    Record(ActionKind),
}

/// One tracing or aggregating function.
#[derive(Debug, Clone, Copy)]
pub struct ActionFunc {
    pub name: &'static str,
    pub kind: FuncKind,
    /// Parameter types as DTrace's prototypes print them (`@` is any type).
    pub params: &'static [&'static str],
    /// How many of `params` are required.
    pub required: usize,
    /// More arguments may follow `params` (`printf(@, ...)`).
    pub varargs: bool,
    /// Needs `-w` (destructive actions).
    pub destructive: bool,
    /// Its name/data/dependency-class stability.
    pub attr: Attribute,
}

impl ActionFunc {
    /// The most arguments it takes.
    pub fn max_args(&self) -> usize {
        if self.varargs {
            usize::MAX
        } else {
            self.params.len()
        }
    }
}

const fn f(
    name: &'static str,
    kind: FuncKind,
    params: &'static [&'static str],
    required: usize,
    varargs: bool,
) -> ActionFunc {
    ActionFunc {
        name,
        kind,
        params,
        required,
        varargs,
        destructive: false,
        attr: Attribute::DEFAULT,
    }
}

const fn destructive(a: ActionFunc) -> ActionFunc {
    ActionFunc {
        destructive: true,
        ..a
    }
}

const T: FuncKind = FuncKind::Tracing;
const fn agg(a: AggFunc) -> FuncKind {
    FuncKind::Aggregating(a)
}
const fn rec(k: ActionKind) -> FuncKind {
    FuncKind::Record(k)
}

/// Every tracing and aggregating function, with the prototypes DTrace for Linux declares.
pub const ACTION_FUNCS: &[ActionFunc] = &[
    f("trace", T, &["@"], 1, false),
    f("printf", T, &["@"], 1, true),
    f("printa", T, &["@"], 1, true),
    f("print", T, &["@"], 1, false),
    f("exit", T, &["int"], 1, false),
    f("tracemem", T, &["@", "size_t", "@"], 2, false),
    f("stack", T, &["uint32_t"], 0, false),
    f("ustack", T, &["uint32_t", "uint32_t"], 0, false),
    f("jstack", T, &["uint32_t", "uint32_t"], 0, false),
    f("speculate", T, &["int"], 1, false),
    f("commit", T, &["int"], 1, false),
    f("discard", T, &["int"], 1, false),
    f("clear", T, &["@"], 1, false),
    f("trunc", T, &["@", "uint64_t"], 1, false),
    f("normalize", T, &["@", "uint64_t"], 2, false),
    f("denormalize", T, &["@"], 1, false),
    f("setopt", T, &["char *", "char *"], 1, false),
    destructive(f("freopen", T, &["@"], 1, true)),
    f("ftruncate", T, &[], 0, false),
    destructive(f("raise", T, &["int"], 1, false)),
    destructive(f("stop", T, &[], 0, false)),
    destructive(f("system", T, &["@"], 1, true)),
    destructive(f("chill", T, &["int"], 1, false)),
    destructive(f("breakpoint", T, &[], 0, false)),
    destructive(f("panic", T, &[], 0, false)),
    f("sym", rec(ActionKind::Sym), &["uintptr_t"], 1, false),
    f("func", rec(ActionKind::Sym), &["uintptr_t"], 1, false),
    f("mod", rec(ActionKind::Mod), &["uintptr_t"], 1, false),
    f("usym", rec(ActionKind::Usym), &["uintptr_t"], 1, false),
    f("ufunc", rec(ActionKind::Usym), &["uintptr_t"], 1, false),
    f("umod", rec(ActionKind::Umod), &["uintptr_t"], 1, false),
    f("uaddr", rec(ActionKind::Uaddr), &["uintptr_t"], 1, false),
    f("count", agg(AggFunc::Count), &[], 0, false),
    f("sum", agg(AggFunc::Sum), &["@"], 1, false),
    f("avg", agg(AggFunc::Avg), &["@"], 1, false),
    f("min", agg(AggFunc::Min), &["@"], 1, false),
    f("max", agg(AggFunc::Max), &["@"], 1, false),
    f("stddev", agg(AggFunc::Stddev), &["@"], 1, false),
    f("quantize", agg(AggFunc::Quantize), &["@", "@"], 1, false),
    f(
        "lquantize",
        agg(AggFunc::Lquantize),
        &["@", "int32_t", "int32_t", "int32_t", "@"],
        3,
        false,
    ),
    f(
        "llquantize",
        agg(AggFunc::Llquantize),
        &["@", "int32_t", "int32_t", "int32_t", "int32_t", "@"],
        5,
        false,
    ),
];

/// Looks a tracing or aggregating function up by name.
pub fn action_func(name: &str) -> Option<&'static ActionFunc> {
    ACTION_FUNCS.iter().find(|a| a.name == name)
}

/// The aggregating function of that name.
pub fn agg_func(name: &str) -> Option<AggFunc> {
    match action_func(name)?.kind {
        FuncKind::Aggregating(a) => Some(a),
        _ => None,
    }
}

/// The record kind of a value-recording function (`sym`, `mod`, `usym`, `umod`, `uaddr`...).
pub fn record_kind(name: &str) -> Option<ActionKind> {
    match action_func(name)?.kind {
        FuncKind::Record(k) => Some(k),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_entry_per_name_and_every_aggregating_function() {
        for (i, a) in ACTION_FUNCS.iter().enumerate() {
            assert!(
                ACTION_FUNCS[i + 1..].iter().all(|b| b.name != a.name),
                "{}",
                a.name
            );
            assert!(a.required <= a.params.len(), "{}", a.name);
            if let FuncKind::Aggregating(g) = a.kind {
                assert_eq!(g.name(), a.name);
            }
        }
        assert_eq!(agg_func("llquantize"), Some(AggFunc::Llquantize));
        assert_eq!(agg_func("trace"), None);
        assert_eq!(record_kind("ufunc"), Some(ActionKind::Usym));
        assert!(action_func("raise").is_some_and(|a| a.destructive));
        // ftruncate() is a data recording action in DTrace, not a destructive one.
        assert!(action_func("ftruncate").is_some_and(|a| !a.destructive));
        assert!(action_func("rand").is_none());
    }
}
