//! Bounds-checked reads of data records out of buffer bytes: the only place that turns outside bytes
//! into integers, so a malformed buffer yields an error and never a panic.

use crate::error::{ConsumerError, Result};

/// The `size` bytes at `offset`, or an error when they are not all inside `data`.
pub fn slice(data: &[u8], offset: usize, size: usize) -> Result<&[u8]> {
    offset
        .checked_add(size)
        .and_then(|end| data.get(offset..end))
        .ok_or(ConsumerError::RecordOutOfBounds {
            offset,
            size,
            len: data.len(),
        })
}

/// A native-endian unsigned integer of 1, 2, 4 or 8 bytes, zero-extended.
pub fn uint(b: &[u8]) -> Option<u64> {
    Some(match b.len() {
        1 => b[0] as u64,
        2 => u16::from_ne_bytes([b[0], b[1]]) as u64,
        4 => u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as u64,
        8 => u64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        _ => return None,
    })
}

/// A native-endian signed integer of 1, 2, 4 or 8 bytes, sign-extended.
pub fn sint(b: &[u8]) -> Option<i64> {
    Some(match b.len() {
        1 => b[0] as i8 as i64,
        2 => i16::from_ne_bytes([b[0], b[1]]) as i64,
        4 => i32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as i64,
        8 => i64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        _ => return None,
    })
}

/// The `i`-th native-endian u64 of `b`, if present.
pub fn u64_at(b: &[u8], i: usize) -> Option<u64> {
    let s = b.get(i.checked_mul(8)?..i.checked_mul(8)?.checked_add(8)?)?;
    uint(s)
}

/// The `i`-th native-endian i64 of `b`, if present.
pub fn i64_at(b: &[u8], i: usize) -> Option<i64> {
    u64_at(b, i).map(|v| v as i64)
}

/// The bytes of a NUL-terminated string (without the NUL), or all of `b` when it has none.
pub fn cstr(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(n) => &b[..n],
        None => b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounds_checked() {
        let d = [1u8, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
        assert!(slice(&d, 4, 8).is_err());
        assert!(slice(&d, usize::MAX, 2).is_err());
        assert_eq!(uint(slice(&d, 0, 4).unwrap()), Some(1));
        assert_eq!(sint(slice(&d, 4, 4).unwrap()), Some(-1));
        assert_eq!(uint(&d[..3]), None);
        assert_eq!(u64_at(&d, 1), None);
        assert_eq!(cstr(b"ab\0cd"), b"ab");
    }
}
