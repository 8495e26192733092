//! User-space symbols from ELF files (via the `object` crate): function symbols of `.symtab` and
//! `.dynsym`, and the loadable segments that turn a file offset into a symbol address. Files are
//! outside data: a malformed one yields an error, never a panic.

use crate::error::{LinuxError, Result};
use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// The symbol table of one ELF file.
#[derive(Clone, Debug, Default)]
pub struct ElfSymbols {
    syms: Vec<(u64, u64, String)>,
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
        let mut syms: Vec<(u64, u64, String)> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            .filter_map(|s| {
                s.name()
                    .ok()
                    .filter(|n| !n.is_empty())
                    .map(|n| (s.address(), s.size(), n.to_string()))
            })
            .collect();
        // Prefer sized, global-looking names when several symbols share an address.
        syms.sort_by(|a, b| {
            a.0.cmp(&b.0)
                .then(b.1.cmp(&a.1))
                .then(a.2.len().cmp(&b.2.len()))
        });
        syms.dedup_by_key(|s| s.0);
        let segments = file
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (s.address(), off, size)
            })
            .collect();
        let build_id = file.build_id().ok().flatten().map(|b| b.to_vec());
        Ok(ElfSymbols {
            syms,
            segments,
            build_id,
        })
    }

    /// Reads and parses the file at `path`.
    pub fn load(path: &str) -> Result<ElfSymbols> {
        let meta = std::fs::metadata(path).map_err(|e| LinuxError::from_io(path, e))?;
        if meta.len() > MAX_ELF {
            return Err(LinuxError::BadFile {
                path: path.into(),
                reason: "too large".into(),
            });
        }
        let data = std::fs::File::open(path)
            .and_then(|f| super::elfimage::read_image(&f, meta.len()))
            .map_err(|e| LinuxError::from_io(path, e))?;
        Self::parse(&data).map_err(|e| match e {
            LinuxError::BadFile { reason, .. } => LinuxError::BadFile {
                path: path.into(),
                reason,
            },
            e => e,
        })
    }

    /// The symbol address of file offset `off` (through the segment containing it).
    pub fn vaddr_of_file_offset(&self, off: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(_, foff, fsize)| off >= *foff && off - foff < *fsize)
            .map(|(vaddr, foff, _)| vaddr.wrapping_add(off - foff))
    }

    /// The function containing `vaddr` and the offset into it.
    pub fn lookup(&self, vaddr: u64) -> Option<(&str, u64)> {
        let i = self.syms.partition_point(|s| s.0 <= vaddr);
        let (addr, size, name) = self.syms.get(i.checked_sub(1)?)?;
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
        self.syms.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }
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
}
