//! The D library: declarations every program sees when the types they need are present, as
//! DTrace's `/usr/lib/dtrace/*.d` files provide them. Our library is written for Linux kernels:
//! `procfs.d` (`psinfo_t`, `lwpsinfo_t`, their translators from `struct task_struct *`,
//! `curpsinfo`, `curlwpsinfo` and the constants they use), `io.d` (`fileinfo_t` from
//! `struct file *`) and `bio.d` (`bufinfo_t`, `devinfo_t` from `struct bio *`). A file is loaded only when the kernel type it translates from is known (kernel
//! BTF given as a [`crate::TypeSource`]); without it `curpsinfo` is an unknown identifier, as in
//! DTrace without the library. An item the running kernel's types cannot satisfy is left out, so
//! using what it declares fails as an unknown name rather than failing every compilation.

use std::collections::HashSet;

use crate::ast::Item;
use crate::check::Checker;
use crate::macros::MacroEnv;
use crate::parser::Parser;

/// The library files: a type that must be present, name, text.
const FILES: &[(&str, &str, &str)] = &[
    (
        "struct task_struct",
        "procfs.d",
        include_str!("dlib/procfs.d"),
    ),
    ("struct file", "io.d", include_str!("dlib/io.d")),
    ("struct bio", "bio.d", include_str!("dlib/bio.d")),
];

/// Parses and declares the library files whose types are present; returns `typenames` with the
/// typedef names they add (for the parser of the program).
pub fn load(ck: &mut Checker<'_>, typenames: HashSet<String>) -> HashSet<String> {
    let mut names = typenames;
    for (needs, _name, text) in FILES {
        if ck.types.lookup(needs).is_none() {
            continue;
        }
        let p = Parser::new(text, MacroEnv::default(), std::mem::take(&mut names), true);
        let (prog, n) = p.program_with_names_always();
        names = n;
        let Ok(prog) = prog else {
            continue;
        };
        for item in &prog.items {
            if matches!(item, Item::Clause(_)) {
                continue;
            }
            let _ = ck.declare(item);
        }
    }
    names
}

/// The library texts by file name (for tests and `-l`-style listings).
pub fn files() -> impl Iterator<Item = (&'static str, &'static str)> {
    FILES.iter().map(|(_, n, t)| (*n, *t))
}
