//! The D library: declarations every program sees when the types they need are present, as
//! DTrace's `/usr/lib/dtrace/*.d` files provide them. Our library is written for Linux kernels:
//! `procfs.d` (`psinfo_t`, `lwpsinfo_t`, their translators from `struct task_struct *`,
//! `curpsinfo`, `curlwpsinfo` and the constants they use), `io.d` (`fileinfo_t` from
//! `struct file *`), `bio.d` (`bufinfo_t`, `devinfo_t` from `struct bio *`) and `regs.d` (the
//! `R_*` register indices of `uregs[]` for x86-64, needing no kernel type), `net.d` (`AF_INET`,
//! `AF_INET6` and the `ARPHRD_*` link types, Linux's values), `sched.d` (`cpuinfo_t` and `curcpu`,
//! `pset`, from the built-in `cpu`, `chip` and `lgrp`). A file is loaded only when the kernel type it translates from is known (kernel
//! BTF given as a [`crate::TypeSource`]); without it `curpsinfo` is an unknown identifier, as in
//! DTrace without the library. An item the running kernel's types cannot satisfy is left out, so
//! using what it declares fails as an unknown name rather than failing every compilation. A file is
//! also loaded only when the program names something it declares (`curpsinfo`, `fileinfo_t`,
//! `B_READ`...), so a program that uses none of it never makes the kernel's types load.

use std::collections::HashSet;

use crate::ast::{BaseType, DeclSpec, Item};
use crate::check::Checker;
use crate::macros::MacroEnv;
use crate::parser::Parser;

/// The library files: a type that must be present ("" for none), name, text.
const FILES: &[(&str, &str, &str)] = &[
    (
        "struct task_struct",
        "procfs.d",
        include_str!("dlib/procfs.d"),
    ),
    ("struct file", "io.d", include_str!("dlib/io.d")),
    ("struct bio", "bio.d", include_str!("dlib/bio.d")),
    ("", "regs.d", include_str!("dlib/regs.d")),
    ("", "net.d", include_str!("dlib/net.d")),
    ("", "sched.d", include_str!("dlib/sched.d")),
];

/// Subroutines the library expands (the compiler calls the expansion instead, where it is
/// declared): a program calling one needs the file declaring its expansion.
const EXPANDED: &[(&str, &str)] = &[("getf", "__getf")];

/// Kernel typedef names the library files use (with the built-in ones, enough to parse them without
/// the kernel's types, to learn what they declare).
const KERNEL_TYPEDEFS: &[&str] = &["loff_t", "caddr_t", "sector_t", "blkcnt_t"];

/// What each library file declares (by [`FILES`] index), parsed once per process; `None` for a file
/// that cannot be parsed so (it is then loaded whenever its type is present, as before).
fn file_names() -> &'static [Option<HashSet<String>>] {
    static NAMES: std::sync::OnceLock<Vec<Option<HashSet<String>>>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        let (types, _) = crate::types::TypeTable::new(crate::DataModel::Lp64);
        let mut typedefs: HashSet<String> = types.typedef_names().into_iter().collect();
        typedefs.extend(KERNEL_TYPEDEFS.iter().map(|s| s.to_string()));
        FILES
            .iter()
            .map(|(_, _, text)| {
                let p = Parser::new(text, MacroEnv::default(), typedefs.clone(), true);
                let (prog, _) = p.program_with_names_always();
                prog.ok()
                    .map(|prog| declared_names(&prog.items).map(str::to_string).collect())
            })
            .collect()
    })
}

/// Parses and declares the library files whose types are present and whose names the program
/// mentions, leaving out those in `loaded` (declared by an earlier program on the same handle) and
/// adding those it declares; returns `typenames` with the typedef names they add (for the parser
/// of the program). `also` is more text naming what the program uses implicitly (the D types
/// of the `args[]` of its probes).
pub fn load(
    ck: &mut Checker<'_>,
    typenames: HashSet<String>,
    program: &str,
    also: &[String],
    loaded: &mut HashSet<&'static str>,
) -> HashSet<String> {
    let mut names = typenames;
    let mut mentioned = identifiers(program);
    for t in also {
        mentioned.extend(identifiers(t));
    }
    for (subr, expansion) in EXPANDED {
        if mentioned.contains(subr) {
            mentioned.insert(expansion);
        }
    }
    for ((needs, name, text), declared) in FILES.iter().zip(file_names()) {
        if loaded.contains(name) {
            continue;
        }
        if let Some(d) = declared {
            if !mentioned.iter().any(|m| d.contains(*m)) {
                continue;
            }
        }
        if !needs.is_empty() && ck.types.lookup(needs).is_none() {
            continue;
        }
        let p = Parser::new(text, MacroEnv::default(), std::mem::take(&mut names), true);
        let (prog, n) = p.program_with_names_always();
        names = n;
        let Ok(prog) = prog else {
            continue;
        };
        loaded.insert(name);
        for item in &prog.items {
            if matches!(item, Item::Clause(_)) {
                continue;
            }
            let _ = ck.declare_library(item);
        }
    }
    names
}

/// Whether `text` has the identifier `name`.
pub fn mentions(text: &str, name: &str) -> bool {
    identifiers(text).contains(name)
}

/// The identifiers of a program's text (words of letters, digits and `_`, not starting with a digit).
fn identifiers(text: &str) -> HashSet<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
        .collect()
}

/// The names a library file declares: variables, inlines, typedefs, struct/union/enum tags and enum
/// constants, and translator output types.
fn declared_names(items: &[Item]) -> impl Iterator<Item = &str> {
    fn spec_names<'a>(spec: &'a DeclSpec, out: &mut Vec<&'a str>) {
        match &spec.base {
            BaseType::Sou(_, name, _) => out.extend(name.as_deref()),
            BaseType::Enum(name, consts) => {
                out.extend(name.as_deref());
                for (c, _, _) in consts.iter().flatten() {
                    out.push(c);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for item in items {
        match item {
            Item::Decl(spec, decls) => {
                spec_names(spec, &mut out);
                out.extend(decls.iter().filter_map(|(d, _)| d.name.as_deref()));
            }
            Item::Inline(t, _, _) => out.extend(t.decl.name.as_deref()),
            Item::Translator { out: t, .. } => {
                spec_names(&t.spec, &mut out);
                if let BaseType::Named(n) = &t.spec.base {
                    out.push(n);
                }
            }
            _ => {}
        }
    }
    out.into_iter()
}

/// The library texts by file name (for tests and `-l`-style listings).
pub fn files() -> impl Iterator<Item = (&'static str, &'static str)> {
    FILES.iter().map(|(_, n, t)| (*n, *t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_of(file: &str) -> Vec<String> {
        let i = FILES
            .iter()
            .position(|f| f.1 == file)
            .expect("a library file");
        let names = file_names()[i].as_ref().expect("the library parses");
        names.iter().cloned().collect()
    }

    #[test]
    fn library_files_declare_the_names_that_load_them() {
        let procfs = names_of("procfs.d");
        for n in [
            "curpsinfo",
            "curlwpsinfo",
            "psinfo_t",
            "lwpsinfo_t",
            "SRUN",
            "PR_MODEL_LP64",
            "timestruc_t",
        ] {
            assert!(
                procfs.iter().any(|d| d == n),
                "procfs.d declares {n}: {procfs:?}"
            );
        }
        let io = names_of("io.d");
        for n in ["fileinfo_t", "fds", "O_RDONLY", "__getf"] {
            assert!(io.iter().any(|d| d == n), "io.d declares {n}: {io:?}");
        }
        let regs = names_of("regs.d");
        for n in ["R_RAX", "R_PC", "R_SP", "R_FP", "R_TRAPNO", "R_EAX"] {
            assert!(regs.iter().any(|d| d == n), "regs.d declares {n}: {regs:?}");
        }
        let bio = names_of("bio.d");
        for n in ["bufinfo_t", "devinfo_t", "B_READ"] {
            assert!(bio.iter().any(|d| d == n), "bio.d declares {n}: {bio:?}");
        }
    }

    #[test]
    fn program_identifiers() {
        let ids = identifiers("BEGIN { trace(curpsinfo->pr_pid + 1); x = \"B_READ\"; }");
        assert!(ids.contains("curpsinfo") && ids.contains("pr_pid") && ids.contains("BEGIN"));
        assert!(!ids.contains("1"));
    }
}
