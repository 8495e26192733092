//! Bounds-checked reads and writes of DOF's fixed-size fields in either byte order.

use crate::error::{DofError, Result};

/// Byte order of a DOF object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Endian {
    pub big: bool,
}

impl Endian {
    pub fn u16(self, b: &[u8], off: usize, what: &'static str) -> Result<u16> {
        let s = slice(b, off, 2, what)?;
        let a = [s[0], s[1]];
        Ok(if self.big {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        })
    }
    pub fn u32(self, b: &[u8], off: usize, what: &'static str) -> Result<u32> {
        let s = slice(b, off, 4, what)?;
        let a = [s[0], s[1], s[2], s[3]];
        Ok(if self.big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        })
    }
    pub fn u64(self, b: &[u8], off: usize, what: &'static str) -> Result<u64> {
        let s = slice(b, off, 8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(if self.big {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        })
    }
    pub fn put16(self, out: &mut Vec<u8>, v: u16) {
        out.extend_from_slice(&if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    pub fn put32(self, out: &mut Vec<u8>, v: u32) {
        out.extend_from_slice(&if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    pub fn put64(self, out: &mut Vec<u8>, v: u64) {
        out.extend_from_slice(&if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
}

/// The `len` bytes at `off`.
pub(crate) fn slice<'a>(
    b: &'a [u8],
    off: usize,
    len: usize,
    what: &'static str,
) -> Result<&'a [u8]> {
    match off.checked_add(len) {
        Some(end) if end <= b.len() => Ok(&b[off..end]),
        _ => Err(DofError::Truncated {
            what,
            offset: off as u64,
            need: len as u64,
            have: b.len() as u64,
        }),
    }
}
