//! User D libraries: the `.d` files of the directories `-L dir` (option `libdir`) names, declared
//! before the first program a handle compiles, as DTrace's `dt_load_libs` does. A library's
//! `#pragma D depends_on library name` names another file of its own directory; the libraries are
//! declared in an order that puts each after those it depends on (DTrace's topological sort of the
//! dependency graph, over the files in name order), and a dependency on a file that is not there,
//! or a cycle, fails the compilation ("Invalid library dependency in ...", "Cyclic dependency
//! detected: ..."). A library that depends on a kernel module that is not loaded
//! (`depends_on module`), or on a library left out, is left out silently, as DTrace skips a
//! library whose compilation fails on a dependency. Missing directories and unreadable files are
//! skipped. Libraries declare types, inlines and translators; their clauses are ignored.

use std::collections::HashSet;
use std::path::Path;

use crate::ast::Item;
use crate::check::Checker;
use crate::error::{CResult, CompileError, ErrTag};
use crate::macros::MacroEnv;
use crate::parser::Parser;

/// One library file.
#[derive(Debug, Clone, PartialEq)]
pub struct UserLib {
    /// Its path, `dir/name.d`.
    pub path: String,
    text: String,
    /// The paths of the libraries it depends on.
    libs: Vec<String>,
    /// The kernel modules it depends on.
    modules: Vec<String>,
}

impl UserLib {
    /// A library at `path` with text `text`, its dependencies read from its pragmas.
    pub fn new(path: &str, text: String) -> UserLib {
        let dir = Path::new(path).parent().unwrap_or(Path::new(""));
        let mut libs = Vec::new();
        let mut modules = Vec::new();
        for line in text.lines() {
            let Some(rest) = line.trim_start().strip_prefix('#') else {
                continue;
            };
            let words: Vec<&str> = rest.split_whitespace().collect();
            if let ["pragma", "D", "depends_on", kind, name, ..] = words.as_slice() {
                match *kind {
                    "library" => libs.push(dir.join(name).to_string_lossy().into_owned()),
                    "module" => modules.push(name.to_string()),
                    _ => {}
                }
            }
        }
        UserLib {
            path: path.to_string(),
            text,
            libs,
            modules,
        }
    }
}

/// The `.d` files of `dirs` (each directory's in name order), in dependency order.
pub fn read_dirs(dirs: &[String]) -> CResult<Vec<UserLib>> {
    let mut libs = Vec::new();
    for dir in dirs {
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.rsplit_once('.').is_some_and(|(_, ext)| ext == "d"))
            .collect();
        names.sort();
        for n in names {
            let path = format!("{}/{n}", dir.trim_end_matches('/'));
            if let Ok(text) = std::fs::read_to_string(&path) {
                libs.push(UserLib::new(&path, text));
            }
        }
    }
    sort(libs)
}

/// Orders `libs` so that each comes after the libraries it depends on, as DTrace's
/// `dt_lib_depend_sort` does (a depth-first walk of the dependents, each library put in front of
/// the list when its dependents are done).
pub fn sort(libs: Vec<UserLib>) -> CResult<Vec<UserLib>> {
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); libs.len()];
    for (i, l) in libs.iter().enumerate() {
        for d in &l.libs {
            let Some(j) = libs.iter().position(|x| &x.path == d) else {
                return Err(CompileError::new(
                    ErrTag::D_UNKNOWN,
                    0,
                    format!("Invalid library dependency in {}: {d}", l.path),
                ));
            };
            dependents[j].push(i);
        }
    }
    let mut start = vec![0u32; libs.len()];
    let mut finish = vec![0u32; libs.len()];
    let mut order = Vec::with_capacity(libs.len());
    let mut count = 0;
    for i in 0..libs.len() {
        if start[i] == 0 {
            visit(
                i,
                &dependents,
                &mut start,
                &mut finish,
                &mut count,
                &mut order,
            );
        }
    }
    // a dependent that finished after what it depends on is on a cycle
    for (i, ds) in dependents.iter().enumerate() {
        if let Some(&j) = ds.iter().find(|&&j| finish[j] > finish[i]) {
            return Err(CompileError::new(
                ErrTag::D_UNKNOWN,
                0,
                format!(
                    "Cyclic dependency detected: {} => {}",
                    libs[i].path, libs[j].path
                ),
            ));
        }
    }
    let mut slots: Vec<Option<UserLib>> = libs.into_iter().map(Some).collect();
    Ok(order
        .into_iter()
        .rev()
        .filter_map(|i| slots[i].take())
        .collect())
}

fn visit(
    i: usize,
    dependents: &[Vec<usize>],
    start: &mut [u32],
    finish: &mut [u32],
    count: &mut u32,
    order: &mut Vec<usize>,
) {
    *count += 1;
    start[i] = *count;
    for &j in &dependents[i] {
        if start[j] == 0 {
            visit(j, dependents, start, finish, count, order);
        }
    }
    *count += 1;
    finish[i] = *count;
    order.push(i);
}

/// Whether kernel module `name` is loaded (`vmlinux` always is).
fn module_loaded(name: &str) -> bool {
    name == "vmlinux"
        || std::fs::read_to_string("/proc/modules")
            .is_ok_and(|m| m.lines().any(|l| l.split_whitespace().next() == Some(name)))
}

/// Declares `libs` (in their order) with `ck`, leaving out those whose dependencies are not
/// there; returns `typenames` with the typedef names they add. A library that does not compile
/// fails the compilation, as in DTrace.
pub fn declare(
    ck: &mut Checker<'_>,
    typenames: HashSet<String>,
    libs: &[UserLib],
) -> CResult<HashSet<String>> {
    let mut names = typenames;
    let mut loaded: HashSet<&str> = HashSet::new();
    for l in libs {
        if !l.modules.iter().all(|m| module_loaded(m))
            || !l.libs.iter().all(|d| loaded.contains(d.as_str()))
        {
            continue;
        }
        let p = Parser::new(
            &l.text,
            MacroEnv::default(),
            std::mem::take(&mut names),
            true,
        );
        let (prog, n) = p.program_with_names_always();
        names = n;
        for item in &prog?.items {
            if !matches!(item, Item::Clause(_) | Item::Pragma(..)) {
                ck.declare_library(item)?;
            }
        }
        loaded.insert(&l.path);
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lib(path: &str, text: &str) -> UserLib {
        UserLib::new(path, text.to_string())
    }

    fn paths(v: &[UserLib]) -> Vec<&str> {
        v.iter().map(|l| l.path.as_str()).collect()
    }

    #[test]
    fn libraries_come_after_what_they_depend_on() {
        let dep = |n: &str| format!("#pragma D depends_on library {n}\n");
        let libs = vec![
            lib("/l/a.d", &dep("d.d")),
            lib("/l/b.d", ""),
            lib("/l/c.d", &dep("e.d")),
            lib("/l/d.d", &dep("b.d")),
            lib("/l/e.d", &dep("a.d")),
        ];
        let sorted = sort(libs).unwrap();
        // DTrace's order for this graph (pragma/tst.libdepfullyconnected): b d a e c, each
        // after its dependency
        assert_eq!(
            paths(&sorted),
            ["/l/b.d", "/l/d.d", "/l/a.d", "/l/e.d", "/l/c.d"]
        );
    }

    #[test]
    fn a_missing_dependency_or_a_cycle_is_an_error() {
        let e = sort(vec![lib(
            "/l/a.d",
            "#pragma D depends_on library nothere.d\n",
        )])
        .unwrap_err();
        assert_eq!(
            e.message,
            "Invalid library dependency in /l/a.d: /l/nothere.d"
        );
        let e = sort(vec![
            lib("/l/a.d", "#pragma D depends_on library b.d\n"),
            lib("/l/b.d", "#pragma D depends_on library a.d\n"),
        ])
        .unwrap_err();
        assert!(
            e.message.starts_with("Cyclic dependency detected: "),
            "{}",
            e.message
        );
    }

    #[test]
    fn module_and_library_dependencies_are_read_from_pragmas() {
        let l = lib(
            "/l/a.d",
            "#pragma D depends_on library b.d\n  #pragma D depends_on module no_such_mod\ninline int x = 1;\n",
        );
        assert_eq!(l.libs, ["/l/b.d"]);
        assert_eq!(l.modules, ["no_such_mod"]);
        assert!(!module_loaded("no_such_mod"));
        assert!(module_loaded("vmlinux"));
    }
}
