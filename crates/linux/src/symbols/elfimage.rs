//! Reading only the parts of an ELF file that symbolization needs: the ELF header, the program and
//! section header tables, the symbol and string tables and the notes (build-id), laid out at their
//! file offsets in a zero-filled image of the file's size (whose untouched pages cost no memory).
//! A 200 MB shared library then costs a few megabytes of reads instead of the whole file. Anything
//! that is not a 64-bit little-endian ELF file, or is small, is read whole. Offsets and sizes come
//! from the file and are clamped to it, never trusted.

use std::fs::File;
use std::io::{Error, ErrorKind, Result};
use std::os::unix::fs::FileExt;

/// Where the bytes come from: `read_at(buf, offset)` fills `buf` from `offset` or fails.
pub trait Source {
    /// Fills `buf` with the bytes at `off`.
    fn read_at(&self, buf: &mut [u8], off: u64) -> Result<()>;
}

impl Source for File {
    fn read_at(&self, buf: &mut [u8], off: u64) -> Result<()> {
        self.read_exact_at(buf, off)
    }
}

impl Source for [u8] {
    fn read_at(&self, buf: &mut [u8], off: u64) -> Result<()> {
        let src = usize::try_from(off)
            .ok()
            .and_then(|o| self.get(o..o.checked_add(buf.len())?))
            .ok_or_else(|| Error::from(ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// Files up to this size are read whole.
pub const READ_WHOLE_BELOW: u64 = 1 << 20;

const SHT_SYMTAB: u32 = 2;
const SHT_STRTAB: u32 = 3;
const SHT_NOTE: u32 = 7;
const SHT_DYNSYM: u32 = 11;
const PT_NOTE: u32 = 4;

pub(crate) fn u16_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?) as u64)
}

pub(crate) fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}

pub(crate) fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?))
}

/// Copies `[off, off + size)` of `file` (clamped to `img`) into `img` at the same offset.
pub(crate) fn fill(
    file: &(impl Source + ?Sized),
    img: &mut [u8],
    off: u64,
    size: u64,
) -> Result<()> {
    let len = img.len() as u64;
    let start = off.min(len);
    let end = off.saturating_add(size).min(len);
    if start < end {
        file.read_at(&mut img[start as usize..end as usize], start)?;
    }
    Ok(())
}

/// A table of `num` entries of `entsize` bytes at `off`, read into `img` and returned.
fn table(
    file: &(impl Source + ?Sized),
    img: &mut [u8],
    off: u64,
    entsize: u64,
    num: u64,
) -> Result<Vec<u8>> {
    let size = entsize.saturating_mul(num);
    fill(file, img, off, size)?;
    let len = img.len() as u64;
    let (s, e) = (
        off.min(len) as usize,
        off.saturating_add(size).min(len) as usize,
    );
    Ok(img[s..e].to_vec())
}

/// The image of `file` (of `len` bytes) with what symbolization reads filled in.
pub fn read_image(file: &(impl Source + ?Sized), len: u64) -> Result<Vec<u8>> {
    if len < READ_WHOLE_BELOW {
        let n = usize::try_from(len).map_err(|_| Error::other("file too large"))?;
        let mut img = vec![0u8; n];
        file.read_at(&mut img, 0)?;
        return Ok(img);
    }
    sparse_image(file, len)
}

/// The sparse image of `file` whatever its size (the whole file when it is not a 64-bit
/// little-endian ELF file).
pub fn sparse_image(file: &(impl Source + ?Sized), len: u64) -> Result<Vec<u8>> {
    let n = usize::try_from(len).map_err(|_| Error::other("file too large"))?;
    let mut img = vec![0u8; n];
    if n < 64 {
        file.read_at(&mut img, 0)?;
        return Ok(img);
    }
    fill(file, &mut img, 0, 64)?;
    let h = &img[..64];
    let shnum = u16_at(h, 0x3c).unwrap_or(0);
    if &h[..4] != b"\x7fELF" || h[4] != 2 || h[5] != 1 || shnum == 0 {
        // Not 64-bit little-endian, or extended section numbering: read it all.
        file.read_at(&mut img, 0)?;
        return Ok(img);
    }
    let (phoff, phentsize, phnum) = (
        u64_at(h, 0x20).unwrap_or(0),
        u16_at(h, 0x36).unwrap_or(0),
        u16_at(h, 0x38).unwrap_or(0),
    );
    let (shoff, shentsize) = (u64_at(h, 0x28).unwrap_or(0), u16_at(h, 0x3a).unwrap_or(0));
    let phdrs = table(file, &mut img, phoff, phentsize, phnum)?;
    for ph in phdrs.chunks_exact(phentsize.max(1) as usize) {
        if u32_at(ph, 0) == Some(PT_NOTE) {
            let (off, size) = (u64_at(ph, 8).unwrap_or(0), u64_at(ph, 32).unwrap_or(0));
            fill(file, &mut img, off, size)?;
        }
    }
    let shdrs = table(file, &mut img, shoff, shentsize, shnum)?;
    for sh in shdrs.chunks_exact(shentsize.max(1) as usize) {
        let kind = u32_at(sh, 4).unwrap_or(0);
        if matches!(kind, SHT_SYMTAB | SHT_STRTAB | SHT_NOTE | SHT_DYNSYM) {
            let (off, size) = (u64_at(sh, 0x18).unwrap_or(0), u64_at(sh, 0x20).unwrap_or(0));
            fill(file, &mut img, off, size)?;
        }
    }
    Ok(img)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::ElfSymbols;

    #[test]
    fn a_partial_image_has_the_same_symbols_as_the_whole_file() {
        let me = std::fs::read_link("/proc/self/exe").unwrap();
        let f = File::open(&me).unwrap();
        let len = f.metadata().unwrap().len();
        assert!(len >= READ_WHOLE_BELOW, "test binary unexpectedly small");
        let img = read_image(&f, len).unwrap();
        // The same from bytes in memory, through the sparse path.
        let whole_bytes = std::fs::read(&me).unwrap();
        assert_eq!(
            ElfSymbols::parse(&sparse_image(whole_bytes.as_slice(), len).unwrap())
                .unwrap()
                .len(),
            ElfSymbols::parse(&img).unwrap().len()
        );
        let whole = std::fs::read(&me).unwrap();
        let (a, b) = (
            ElfSymbols::parse(&img).unwrap(),
            ElfSymbols::parse(&whole).unwrap(),
        );
        assert_eq!(a.len(), b.len());
        assert_eq!(a.build_id(), b.build_id());
        let pc = a_partial_image_has_the_same_symbols_as_the_whole_file as *const () as u64;
        // Same answers for addresses of the text (symbol addresses are file-independent).
        for probe in [pc, pc + 3] {
            assert_eq!(a.lookup(probe), b.lookup(probe));
        }
    }

    #[test]
    fn garbage_headers_are_clamped() {
        let dir = std::env::temp_dir().join(format!("dtrace-elfimage-{}", std::process::id()));
        let mut bytes = vec![0xffu8; (READ_WHOLE_BELOW + 100) as usize];
        bytes[..6].copy_from_slice(b"\x7fELF\x02\x01");
        std::fs::write(&dir, &bytes).unwrap();
        let f = File::open(&dir).unwrap();
        let img = read_image(&f, bytes.len() as u64).unwrap();
        let _ = std::fs::remove_file(&dir);
        assert_eq!(img.len(), bytes.len());
        assert!(ElfSymbols::parse(&img).is_err());
    }
}
