//! User-space symbols from ELF files (via the `object` crate): function symbols of `.symtab` and
//! `.dynsym` (and of the separate debuginfo file under `/usr/lib/debug/.build-id` where one is
//! installed), and the loadable segments that turn a file offset into a symbol address. A file
//! loaded by path has its segments read at once and its symbols when first looked up (the user
//! stack walk at the probe needs the segments of a process's files at its first firing, its
//! symbols only when a stack prints). Files are outside data: a malformed one yields an error,
//! never a panic.

use super::prefer::{self, Candidate};
use crate::error::{LinuxError, Result};
use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// A function symbol: (address, size, name, local).
type Symbol = (u64, u64, String, bool);

/// The symbol table of one ELF file.
#[derive(Clone, Debug, Default)]
pub struct ElfSymbols {
    /// By address, one per address (see [`sort_symbols`]); read from [`ElfSymbols::source`] when
    /// first needed where it is not set.
    syms: std::sync::OnceLock<Vec<Symbol>>,
    /// The path the symbols are read from, for a file loaded by path.
    source: Option<String>,
    segments: Vec<(u64, u64, u64)>,
    build_id: Option<Vec<u8>>,
}

/// The largest ELF file we read (bigger ones are skipped, frames print as addresses).
pub const MAX_ELF: u64 = 1 << 30;

impl ElfSymbols {
    /// Parses ELF bytes.
    pub fn parse(data: &[u8]) -> Result<ElfSymbols> {
        let file = object::File::parse(data).map_err(|e| LinuxError::BadFile {
            path: "<elf>".into(),
            reason: e.to_string(),
        })?;
        let mut syms = text_symbols(&file);
        sort_symbols(&mut syms);
        Ok(ElfSymbols {
            syms: syms.into(),
            ..Self::layout(&file)
        })
    }

    /// The segments and build-id of `file`, its symbols not read.
    fn layout<'d, R: object::ReadRef<'d>>(file: &object::File<'d, R>) -> ElfSymbols {
        let segments = file
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (s.address(), off, size)
            })
            .collect();
        let build_id = file.build_id().ok().flatten().map(|b| b.to_vec());
        ElfSymbols {
            segments,
            build_id,
            ..ElfSymbols::default()
        }
    }

    /// Reads the segments of the file at `path` (its headers and notes: a few small reads,
    /// as [`read_build_id`] reads); its symbols (with its separate debuginfo's, when that is
    /// installed) are read when first looked up.
    pub fn load(path: &str) -> Result<ElfSymbols> {
        let bad = |e: object::Error| LinuxError::BadFile {
            path: path.into(),
            reason: e.to_string(),
        };
        let (f, _) = open_elf(path)?;
        let cache = object::ReadCache::new(f);
        let file = object::File::parse(&cache).map_err(bad)?;
        Ok(ElfSymbols {
            source: Some(path.to_string()),
            ..Self::layout(&file)
        })
    }

    /// The symbols, read from the file they were loaded from the first time: none when it can
    /// no longer be read, or is no longer the file whose segments were read (its build-id
    /// changed).
    fn symbols(&self) -> &[Symbol] {
        self.syms.get_or_init(|| {
            let Some(path) = &self.source else {
                return Vec::new();
            };
            let Ok(image) = read_elf_image(path) else {
                return Vec::new();
            };
            let Ok(file) = object::File::parse(&*image) else {
                return Vec::new();
            };
            if file.build_id().ok().flatten() != self.build_id.as_deref() {
                return Vec::new();
            }
            let mut syms = text_symbols(&file);
            if let Some(debug) = self.build_id().and_then(debuginfo_path) {
                // A debuginfo file that cannot be read or parsed only leaves the names out.
                if let Ok(data) = read_elf_image(&debug) {
                    let _ = add_debuginfo(&mut syms, &data);
                }
            }
            sort_symbols(&mut syms);
            syms
        })
    }

    /// The symbol address of file offset `off` (through the segment containing it).
    pub fn vaddr_of_file_offset(&self, off: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(_, foff, fsize)| off >= *foff && off - foff < *fsize)
            .map(|(vaddr, foff, _)| vaddr.wrapping_add(off - foff))
    }

    /// The file offsets `[off, off + len)` split where [`ElfSymbols::vaddr_of_file_offset`]
    /// changes segment: `(first offset, end offset, symbol address of the first)` for each piece,
    /// in order, with `None` for a piece no segment holds.
    pub fn file_offset_pieces(&self, off: u64, len: u64) -> Vec<(u64, u64, Option<u64>)> {
        let end = off.saturating_add(len);
        let mut cuts: Vec<u64> = vec![off, end];
        for (_, foff, fsize) in &self.segments {
            for c in [*foff, foff.saturating_add(*fsize)] {
                if c > off && c < end {
                    cuts.push(c);
                }
            }
        }
        cuts.sort_unstable();
        cuts.dedup();
        let mut out: Vec<(u64, u64, Option<u64>)> = Vec::new();
        for w in cuts.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            let vaddr = self.vaddr_of_file_offset(lo);
            // Two pieces through the same segment make one.
            match out.last_mut() {
                Some(last)
                    if last.1 == lo
                        && match (last.2, vaddr) {
                            (None, None) => true,
                            (Some(a), Some(b)) => a.wrapping_add(lo - last.0) == b,
                            _ => false,
                        } =>
                {
                    last.1 = hi
                }
                _ => out.push((lo, hi, vaddr)),
            }
        }
        out
    }

    /// The function containing `vaddr` and the offset into it.
    pub fn lookup(&self, vaddr: u64) -> Option<(&str, u64)> {
        let syms = self.symbols();
        let i = syms.partition_point(|s| s.0 <= vaddr);
        let (addr, size, name, _) = syms.get(i.checked_sub(1)?)?;
        let off = vaddr - addr;
        if *size != 0 && off >= *size {
            return None;
        }
        Some((name.as_str(), off))
    }

    /// The file's GNU build-id, if it has one.
    pub fn build_id(&self) -> Option<&[u8]> {
        self.build_id.as_deref()
    }

    /// Number of function symbols.
    pub fn len(&self) -> usize {
        self.symbols().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.symbols().is_empty()
    }
}

/// Adds to `syms` the function symbols of a file's separate debuginfo (`data`, the file its
/// build-id names under `/usr/lib/debug/.build-id`): its `.symtab` names the local functions a
/// stripped library's `.dynsym` leaves out (`__libc_start_call_main`), at the same addresses.
fn add_debuginfo(syms: &mut Vec<Symbol>, data: &[u8]) -> Result<()> {
    let file = object::File::parse(data).map_err(|e| LinuxError::BadFile {
        path: "<debuginfo>".into(),
        reason: e.to_string(),
    })?;
    syms.extend(text_symbols(&file));
    Ok(())
}

/// Orders symbols by address, one per address: when several share one, the one
/// [`super::prefer`] chooses names it, with the largest size among them.
fn sort_symbols(syms: &mut Vec<Symbol>) {
    fn candidate(s: &Symbol) -> Candidate<'_> {
        Candidate {
            name: &s.2,
            size: s.1,
            local: s.3,
        }
    }
    syms.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| prefer::order(candidate(a), candidate(b)))
    });
    syms.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 = kept.1.max(later.1);
        }
        same
    });
}

/// The function symbols (text, named, at a non-zero address) of `.symtab` and `.dynsym`, as
/// (address, size, name, local).
fn text_symbols<'d, R: object::ReadRef<'d>>(file: &object::File<'d, R>) -> Vec<Symbol> {
    file.symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
        .filter_map(|s| {
            s.name()
                .ok()
                .filter(|n| !n.is_empty())
                .map(|n| (s.address(), s.size(), n.to_string(), s.is_local()))
        })
        .collect()
}

/// The parts of the ELF file at `path` that symbolization reads (see [`super::elfimage`]).
fn read_elf_image(path: &str) -> Result<Vec<u8>> {
    let (f, len) = open_elf(path)?;
    super::elfimage::read_image(&f, len).map_err(|e| LinuxError::from_io(path, e))
}

/// The ELF file at `path`, open, and its length: an error for one larger than [`MAX_ELF`].
fn open_elf(path: &str) -> Result<(std::fs::File, u64)> {
    let f = std::fs::File::open(path).map_err(|e| LinuxError::from_io(path, e))?;
    let len = f
        .metadata()
        .map_err(|e| LinuxError::from_io(path, e))?
        .len();
    if len > MAX_ELF {
        return Err(LinuxError::BadFile {
            path: path.into(),
            reason: "too large".into(),
        });
    }
    Ok((f, len))
}

/// The separate debuginfo file of a build-id, when installed.
pub(crate) fn debuginfo_path(build_id: &[u8]) -> Option<String> {
    let (first, rest) = build_id.split_first()?;
    let hex: String = rest.iter().map(|b| format!("{b:02x}")).collect();
    let p = format!("/usr/lib/debug/.build-id/{first:02x}/{hex}.debug");
    std::path::Path::new(&p).is_file().then_some(p)
}

/// Reads only the build-id of the ELF file at `path` (a few small reads, whatever the file's size).
pub fn read_build_id(path: &str) -> Option<Vec<u8>> {
    let f = std::fs::File::open(path).ok()?;
    let cache = object::ReadCache::new(f);
    let file = object::File::parse(&cache).ok()?;
    file.build_id().ok().flatten().map(|b| b.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_executable_has_symbols_and_garbage_is_an_error() {
        let me = std::fs::read_link("/proc/self/exe").unwrap();
        let e = ElfSymbols::load(me.to_str().unwrap()).unwrap();
        assert!(!e.is_empty());
        assert!(ElfSymbols::parse(b"\x7fELFgarbage").is_err());
        assert!(ElfSymbols::parse(b"").is_err());
    }

    /// The C library this test runs with, from its own mappings.
    fn own_libc() -> Option<String> {
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        maps.lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so"))
            .map(str::to_string)
    }

    /// A file loaded by path has its symbols read when first looked up, and only from the
    /// file whose segments were read: a file replaced meanwhile (another build-id) gives none.
    #[test]
    fn symbols_are_read_at_first_lookup_from_the_file_loaded() {
        let Some(libc) = own_libc() else {
            eprintln!("SKIP: no libc.so mapped");
            return;
        };
        let dir = std::env::temp_dir();
        let path = |n: &str| dir.join(format!("dtrace-elf-{}-{n}", std::process::id()));
        let (kept, replaced) = (path("kept"), path("replaced"));
        for p in [&kept, &replaced] {
            std::fs::copy(&libc, p).unwrap();
        }
        let load = |p: &std::path::PathBuf| ElfSymbols::load(p.to_str().unwrap()).unwrap();
        let (e, r) = (load(&kept), load(&replaced));
        assert!(e.syms.get().is_none(), "symbols read at load");
        let whole = ElfSymbols::parse(&read_elf_image(&libc).unwrap()).unwrap();
        assert_eq!(e.segments, whole.segments);
        assert!(e.build_id().is_some());
        // Another file (the test's own executable) where the library was.
        std::fs::copy(std::fs::read_link("/proc/self/exe").unwrap(), &replaced).unwrap();
        assert!(r.is_empty(), "symbols of another file");
        assert_eq!(r.lookup(whole.symbols()[0].0), None);
        // The kept copy names what the library names (with its debuginfo, if installed).
        let lib = ElfSymbols::load(&libc).unwrap();
        assert!(!e.is_empty());
        assert_eq!(e.len(), lib.len());
        for (addr, ..) in whole.symbols().iter().step_by(97) {
            assert!(e.lookup(*addr).is_some());
            assert_eq!(e.lookup(*addr), lib.lookup(*addr));
        }
        for p in [&kept, &replaced] {
            std::fs::remove_file(p).unwrap();
        }
    }

    #[test]
    fn an_address_with_aliases_is_named_as_dtrace_names_it() {
        // A static `go` and its weak alias `_go` (the weak one names it), a global `f` and
        // `__f` (fewer underscores), with the largest size among them as the extent.
        let mut syms = vec![
            (0x1000, 16, "go".into(), true),
            (0x1000, 16, "_go".into(), false),
            (0x2000, 8, "__f".into(), false),
            (0x2000, 32, "f".into(), false),
        ];
        sort_symbols(&mut syms);
        let e = ElfSymbols {
            syms: syms.into(),
            ..ElfSymbols::default()
        };
        assert_eq!(e.lookup(0x1004), Some(("_go", 4)));
        assert_eq!(e.lookup(0x2010), Some(("f", 0x10)));
        assert_eq!(e.len(), 2);
    }

    #[test]
    fn debuginfo_names_the_local_functions_of_a_stripped_library() {
        let Some(libc) = own_libc() else {
            eprintln!("SKIP: no libc.so mapped");
            return;
        };
        let stripped = ElfSymbols::parse(&read_elf_image(&libc).unwrap()).unwrap();
        let Some(debug) = stripped.build_id().and_then(debuginfo_path) else {
            eprintln!("SKIP: no debuginfo installed for {libc}");
            return;
        };
        let with = ElfSymbols::load(&libc).unwrap();
        assert!(with.len() > stripped.len());
        // Every symbol of the library still resolves to itself or an alias at its address.
        let debug_only = ElfSymbols::parse(&read_elf_image(&debug).unwrap()).unwrap();
        let (addr, size, name, _) = debug_only
            .symbols()
            .iter()
            .find(|(a, sz, _, _)| {
                *sz > 1 && stripped.lookup(*a).is_none() && with.lookup(*a).is_some()
            })
            .expect("a function only the debuginfo names");
        assert_eq!(
            with.lookup(addr + size - 1),
            Some((name.as_str(), size - 1))
        );
        assert!(add_debuginfo(&mut Vec::new(), b"garbage").is_err());
    }
}
