//! The function table of one ELF object for the `pid` provider: every named function of `.symtab`
//! and `.dynsym` (and of the separate debuginfo file under `/usr/lib/debug/.build-id` where one is
//! installed), with its address, size and the file offset a uprobe is placed at, plus the bytes of
//! a function for checking instruction boundaries. Files are outside data: a malformed one is an
//! error, never a panic; they are read lazily (symbol tables, not the whole file).

use super::prefer::{self, Candidate};
use crate::error::{LinuxError, Result};
use object::read::ReadCache;
use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, OnceLock};

/// One function of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// Its symbol name.
    pub name: String,
    /// Its symbol address.
    pub vaddr: u64,
    /// Its size in bytes (0 when the symbol table does not say).
    pub size: u64,
    /// The offset in the file of its first byte (where an entry uprobe goes).
    pub file_offset: u64,
    /// Whether the symbol is local to the object (a `static` function).
    pub local: bool,
}

impl Function {
    fn candidate(&self) -> Candidate<'_> {
        Candidate {
            name: &self.name,
            size: self.size,
            local: self.local,
        }
    }
}

/// The functions of one ELF file, by name.
#[derive(Clone, Debug, Default)]
pub struct FunctionTable {
    /// Path of the file.
    pub path: String,
    funcs: BTreeMap<String, Function>,
    /// The names of the functions at each address, the one that names the address first
    /// ([`super::prefer`]).
    aliases: BTreeMap<u64, Vec<String>>,
    /// The address the file gives its first page (the loadable segment at file offset 0).
    first_page: Option<u64>,
    /// The file, opened at the first [`FunctionTable::code`] and kept for the next (placing an
    /// entry probe on every function of libc reads each function's first instruction).
    file: Arc<OnceLock<Option<File>>>,
}

/// Where `vaddr` lies in the file, through the loadable segment that maps it.
fn file_offset(segments: &[(u64, u64, u64, u64)], vaddr: u64) -> Option<u64> {
    segments
        .iter()
        .find(|(addr, _, fsize, _)| vaddr >= *addr && vaddr - addr < *fsize)
        .map(|(addr, off, _, _)| off + (vaddr - addr))
}

/// The loadable segments of `file` as `(vaddr, file offset, file size, memory size)`.
fn segments<'d, R: object::ReadRef<'d>>(file: &object::File<'d, R>) -> Vec<(u64, u64, u64, u64)> {
    file.segments()
        .map(|s| {
            let (off, fsize) = s.file_range();
            (s.address(), off, fsize, s.size())
        })
        .collect()
}

/// The page-aligned address of the loadable segment that starts at file offset 0.
fn first_page(segments: &[(u64, u64, u64, u64)]) -> Option<u64> {
    segments
        .iter()
        .find(|(_, off, _, _)| *off == 0)
        .map(|(addr, _, _, _)| addr & !0xfff)
}

fn bad(path: &str, reason: impl std::fmt::Display) -> LinuxError {
    LinuxError::BadFile {
        path: path.into(),
        reason: reason.to_string(),
    }
}

/// The function symbols of one parsed file, added to `funcs` (first name wins).
fn add_symbols<'d, R: object::ReadRef<'d>>(
    file: &object::File<'d, R>,
    segs: &[(u64, u64, u64, u64)],
    funcs: &mut BTreeMap<String, Function>,
) {
    for s in file.symbols().chain(file.dynamic_symbols()) {
        if s.kind() != SymbolKind::Text || s.address() == 0 || s.is_undefined() {
            continue;
        }
        let Ok(name) = s.name() else { continue };
        if name.is_empty() || funcs.contains_key(name) {
            continue;
        }
        let Some(file_offset) = file_offset(segs, s.address()) else {
            continue;
        };
        funcs.insert(
            name.to_string(),
            Function {
                name: name.to_string(),
                vaddr: s.address(),
                size: s.size(),
                file_offset,
                local: s.is_local(),
            },
        );
    }
}

/// The names of `funcs` at each address, in the order of [`prefer::order`].
fn aliases(funcs: &BTreeMap<String, Function>) -> BTreeMap<u64, Vec<String>> {
    let mut by_addr: BTreeMap<u64, Vec<&Function>> = BTreeMap::new();
    for f in funcs.values() {
        by_addr.entry(f.vaddr).or_default().push(f);
    }
    by_addr
        .into_iter()
        .map(|(addr, mut fs)| {
            fs.sort_by(|a, b| prefer::order(a.candidate(), b.candidate()));
            (addr, fs.into_iter().map(|f| f.name.clone()).collect())
        })
        .collect()
}

impl FunctionTable {
    /// Reads the function table of the ELF file at `path`.
    pub fn load(path: &str) -> Result<FunctionTable> {
        let f = File::open(path).map_err(|e| LinuxError::from_io(path, e))?;
        let cache = ReadCache::new(f);
        let file = object::File::parse(&cache).map_err(|e| bad(path, e))?;
        let segs = segments(&file);
        let mut funcs = BTreeMap::new();
        add_symbols(&file, &segs, &mut funcs);
        let debug = file
            .build_id()
            .ok()
            .flatten()
            .and_then(super::elf::debuginfo_path)
            .and_then(|p| File::open(p).ok());
        if let Some(d) = debug {
            let dcache = ReadCache::new(d);
            if let Ok(dfile) = object::File::parse(&dcache) {
                // The debuginfo file's addresses are the object's; its offsets are not.
                add_symbols(&dfile, &segs, &mut funcs);
            }
        }
        Ok(FunctionTable {
            path: path.to_string(),
            aliases: aliases(&funcs),
            funcs,
            first_page: first_page(&segs),
            file: Arc::default(),
        })
    }

    /// Builds a table from parsed bytes (for tests and fuzzing).
    pub fn parse(path: &str, data: &[u8]) -> Result<FunctionTable> {
        let file = object::File::parse(data).map_err(|e| bad(path, e))?;
        let segs = segments(&file);
        let mut funcs = BTreeMap::new();
        add_symbols(&file, &segs, &mut funcs);
        Ok(FunctionTable {
            path: path.to_string(),
            aliases: aliases(&funcs),
            funcs,
            first_page: first_page(&segs),
            file: Arc::default(),
        })
    }

    /// The address the file gives its first page (0 for a shared object or PIE), from which the
    /// load bias of a mapping of it follows.
    pub fn first_page_vaddr(&self) -> Option<u64> {
        self.first_page
    }

    /// The function named `name`.
    pub fn get(&self, name: &str) -> Option<&Function> {
        self.funcs.get(name)
    }

    /// The function that names the address of `f` ([`super::prefer`]): `go` for its weak alias
    /// `_go`, as DTrace names the probes of a function looked up by an alias.
    pub fn canonical<'a>(&'a self, f: &'a Function) -> &'a Function {
        self.aliases
            .get(&f.vaddr)
            .and_then(|names| names.first())
            .and_then(|n| self.funcs.get(n))
            .unwrap_or(f)
    }

    /// The functions whose names `matches` accepts, once per address, each named by the first
    /// accepted of the names at its address in the order of [`super::prefer`] (DTrace takes an
    /// address once when a glob matches several of its aliases), by address.
    pub fn matching<'a>(&'a self, matches: impl Fn(&str) -> bool + 'a) -> Vec<&'a Function> {
        self.aliases
            .values()
            .filter_map(|names| names.iter().find(|n| matches(n)))
            .filter_map(|n| self.funcs.get(n))
            .collect()
    }

    /// The function whose bytes hold `vaddr` (the sized one of the lowest address when several do).
    pub fn containing(&self, vaddr: u64) -> Option<&Function> {
        self.funcs
            .values()
            .filter(|f| vaddr >= f.vaddr && vaddr - f.vaddr < f.size.max(1))
            .min_by(|a, b| {
                a.vaddr
                    .cmp(&b.vaddr)
                    .then_with(|| prefer::order(a.candidate(), b.candidate()))
            })
    }

    /// Every function, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Function> + '_ {
        self.funcs.values()
    }

    /// Number of functions.
    pub fn len(&self) -> usize {
        self.funcs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.funcs.is_empty()
    }

    /// The bytes of `f` read from the file (at most 1 MiB).
    pub fn code(&self, f: &Function) -> Result<Vec<u8>> {
        let len = usize::try_from(f.size.min(1 << 20)).unwrap_or(0);
        let mut buf = vec![0u8; len];
        let file = match self.file.get_or_init(|| File::open(&self.path).ok()) {
            Some(file) => file,
            None => {
                let e = File::open(&self.path).err();
                let e = e.unwrap_or_else(|| std::io::ErrorKind::NotFound.into());
                return Err(LinuxError::from_io(&self.path, e));
            }
        };
        file.read_exact_at(&mut buf, f.file_offset)
            .map_err(|e| LinuxError::from_io(&self.path, e))?;
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_executable_lists_functions_with_offsets_and_garbage_is_an_error() {
        let me = std::fs::read_link("/proc/self/exe").unwrap();
        let t = FunctionTable::load(me.to_str().unwrap()).unwrap();
        assert!(!t.is_empty());
        let f = t.iter().find(|f| f.size > 0).unwrap();
        assert_eq!(t.code(f).unwrap().len() as u64, f.size.min(1 << 20));
        assert!(FunctionTable::parse("x", b"\x7fELFgarbage").is_err());
        assert!(FunctionTable::load("/nonexistent/file").is_err());
    }
}
