//! Bounds-checked little-endian reads from untrusted byte slices.

use crate::error::{CtfError, Result};

/// Reads a `u16` at `off`.
pub(crate) fn u16_at(b: &[u8], off: usize, what: &'static str) -> Result<u16> {
    let s = slice(b, off, 2, what)?;
    Ok(u16::from_le_bytes([s[0], s[1]]))
}

/// Reads a `u32` at `off`.
pub(crate) fn u32_at(b: &[u8], off: usize, what: &'static str) -> Result<u32> {
    let s = slice(b, off, 4, what)?;
    Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// Reads a type id of `width` bytes (2 or 4) at `off`.
pub(crate) fn id_at(b: &[u8], off: usize, width: usize, what: &'static str) -> Result<u32> {
    if width == 2 {
        u16_at(b, off, what).map(u32::from)
    } else {
        u32_at(b, off, what)
    }
}

/// The `len` bytes at `off`.
pub(crate) fn slice<'a>(
    b: &'a [u8],
    off: usize,
    len: usize,
    what: &'static str,
) -> Result<&'a [u8]> {
    let end = off.checked_add(len);
    match end {
        Some(end) if end <= b.len() => Ok(&b[off..end]),
        _ => Err(CtfError::Truncated {
            what,
            offset: off as u64,
            need: len as u64,
            have: b.len() as u64,
        }),
    }
}

/// The NUL-terminated string at `off` of a string table.
pub(crate) fn cstr_at(strtab: &[u8], off: u32) -> Result<&str> {
    let start = off as usize;
    if start >= strtab.len() {
        return Err(CtfError::BadString(off));
    }
    let rest = &strtab[start..];
    let len = rest
        .iter()
        .position(|&c| c == 0)
        .ok_or(CtfError::BadString(off))?;
    std::str::from_utf8(&rest[..len]).map_err(|_| CtfError::BadString(off))
}
