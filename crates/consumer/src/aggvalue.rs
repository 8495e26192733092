//! Values of the aggregating functions as DTrace computes them for printing: `avg()` from count and sum,
//! `stddev()` from count, sum and the 128-bit sum of squares, and the integer square root it needs.

use crate::error::{ConsumerError, Result};
use crate::recdata;

fn short(size: usize, what: &'static str) -> ConsumerError {
    ConsumerError::SizeMismatch { size, what }
}

/// `avg()`: sum / normal / count (signed), 0 when nothing was counted.
pub fn average(data: &[u8], normal: u64) -> Result<i64> {
    let (Some(count), Some(sum)) = (recdata::i64_at(data, 0), recdata::i64_at(data, 1)) else {
        return Err(short(data.len(), "avg()"));
    };
    if count == 0 {
        return Ok(0);
    }
    Ok(sum.wrapping_div((normal as i64).max(1)).wrapping_div(count))
}

/// Floor of the square root of a 128-bit value.
pub fn isqrt128(v: u128) -> u128 {
    if v < 2 {
        return v;
    }
    // Bit-by-bit method: exact, no floating point.
    let mut rem = v;
    let mut res: u128 = 0;
    let mut bit: u128 = 1 << ((127 - v.leading_zeros()) & !1);
    while bit != 0 {
        if rem >= res + bit {
            rem -= res + bit;
            res = (res >> 1) + bit;
        } else {
            res >>= 1;
        }
        bit >>= 2;
    }
    res
}

/// `stddev()`: sqrt(avg(x^2) - avg(x)^2) with DTrace's integer arithmetic and normalization.
pub fn stddev(data: &[u8], normal: u64) -> Result<u64> {
    let vals: Option<Vec<u64>> = (0..4).map(|i| recdata::u64_at(data, i)).collect();
    let Some(v) = vals else {
        return Err(short(data.len(), "stddev()"));
    };
    if v[0] == 0 {
        return Ok(0);
    }
    let normal = normal.max(1);
    let sumsq = (v[3] as u128) << 64 | v[2] as u128;
    let avg_sq = sumsq / normal as u128 / normal as u128 / v[0] as u128;
    let avg = (v[1] as i64)
        .wrapping_div(normal as i64)
        .wrapping_div(v[0] as i64)
        .unsigned_abs() as u128;
    let sq_avg = avg * avg;
    let diff = avg_sq.saturating_sub(sq_avg);
    Ok(isqrt128(diff).min(u64::MAX as u128) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(v: &[u64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn average_and_stddev() {
        assert_eq!(average(&bytes(&[4, 10]), 1).unwrap(), 2);
        assert_eq!(average(&bytes(&[2, (-9i64) as u64]), 1).unwrap(), -4);
        assert_eq!(average(&bytes(&[0, 0]), 1).unwrap(), 0);
        // values 2, 4, 4, 4, 5, 5, 7, 9: mean 5, population stddev 2
        let xs = [2u64, 4, 4, 4, 5, 5, 7, 9];
        let sum: u64 = xs.iter().sum();
        let sq: u64 = xs.iter().map(|x| x * x).sum();
        assert_eq!(stddev(&bytes(&[8, sum, sq, 0]), 1).unwrap(), 2);
        assert!(stddev(&[0u8; 8], 1).is_err());
    }

    #[test]
    fn isqrt_is_floor() {
        for v in [0u128, 1, 2, 3, 4, 15, 16, 17, 1 << 100, u128::MAX] {
            let r = isqrt128(v);
            assert!(r * r <= v);
            assert!((r + 1).checked_mul(r + 1).is_none_or(|s| s > v));
        }
    }
}
