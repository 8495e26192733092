//! Which of several function symbols at one address names it (aliases: `go` and its weak alias
//! `_go`, `malloc` and `__libc_malloc`), as DTrace's process symbol tables decide: a global or
//! weak symbol before a local (static) one, then the name with fewer leading underscores, then
//! the smaller symbol. Here a sized symbol also comes before an unsized one (only a sized one
//! covers the function's bytes), and equal candidates fall back to the names' order, so the
//! choice never depends on the order of the symbol tables. The `pid` provider names a probe of
//! a function looked up by an alias for the preferred name, and `ustack()`, `usym()` and
//! `ufunc()` print it.

use std::cmp::Ordering;

/// The facts of a function symbol that decide whether it names its address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate<'a> {
    /// The symbol's name.
    pub name: &'a str,
    /// Its size (0 when the symbol table does not say).
    pub size: u64,
    /// Whether it is local to its object (`STB_LOCAL`: a `static` function).
    pub local: bool,
}

fn leading_underscores(name: &str) -> usize {
    name.bytes().take_while(|&b| b == b'_').count()
}

/// `Less` when `a` rather than `b` names the address both are at.
pub fn order(a: Candidate<'_>, b: Candidate<'_>) -> Ordering {
    (a.size == 0)
        .cmp(&(b.size == 0))
        .then(a.local.cmp(&b.local))
        .then(leading_underscores(a.name).cmp(&leading_underscores(b.name)))
        .then(a.size.cmp(&b.size))
        .then(a.name.cmp(b.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(name: &str, size: u64, local: bool) -> Candidate<'_> {
        Candidate { name, size, local }
    }

    #[test]
    fn a_global_or_weak_symbol_names_the_address_before_a_local_one() {
        // A weak _go before a static go (DTrace's pid/tst.weak2.d).
        assert_eq!(order(c("_go", 8, false), c("go", 8, true)), Ordering::Less);
        assert_eq!(
            order(c("go", 8, true), c("_go", 8, false)),
            Ordering::Greater
        );
    }

    #[test]
    fn then_fewer_leading_underscores_then_the_smaller_then_the_name() {
        // A global go before its weak alias _go (DTrace's pid/tst.weak1.d): binding alone
        // does not decide between global and weak.
        assert_eq!(order(c("go", 8, false), c("_go", 8, false)), Ordering::Less);
        assert_eq!(
            order(c("__libc_malloc", 8, false), c("malloc", 8, false)),
            Ordering::Greater
        );
        assert_eq!(order(c("b", 4, false), c("a", 8, false)), Ordering::Less);
        assert_eq!(order(c("a", 8, false), c("b", 8, false)), Ordering::Less);
    }

    #[test]
    fn a_sized_symbol_comes_first() {
        assert_eq!(order(c("_x", 8, true), c("x", 0, false)), Ordering::Less);
    }
}
