//! Aggregations in probe context: the nine aggregating functions on DTrace's value layouts (see
//! [`crate::records`]), the value sizes and initial values, and the per-CPU aggregation buffer (entries
//! keyed by aggregation id and key bytes, bounded by `aggsize`, counting drops). Snapshots drain the
//! buffer, as DTrace's do: the consumer accumulates them with [`merge_value`].

use dtrace_dif::program::ActionKind;
use std::collections::HashMap;
use thiserror::Error;

/// Number of `quantize()` buckets (`DTRACE_QUANTIZE_NBUCKETS`).
pub const QUANTIZE_NBUCKETS: usize = 127;
/// Index of the zero bucket (`DTRACE_QUANTIZE_ZEROBUCKET`).
pub const QUANTIZE_ZEROBUCKET: usize = 63;

/// Bytes each aggregation entry costs beyond its key and value (hash entry and bookkeeping), charged
/// against `aggsize`.
pub const AGG_ENTRY_OVERHEAD: usize = 32;

/// Bytes of `aggsize` one entry costs: its key (aggregation id included) of `key_len` bytes, its
/// value of `value_words` words and [`AGG_ENTRY_OVERHEAD`].
pub fn entry_cost(key_len: usize, value_words: usize) -> usize {
    crate::buffer::align8(key_len) + value_words * 8 + AGG_ENTRY_OVERHEAD
}

/// Errors in an aggregating action's parameters (DTrace refuses these at enabling time).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AggParamError {
    /// `lquantize` with zero step or zero levels.
    #[error("lquantize() step and number of levels must be non-zero")]
    Lquantize,
    /// `llquantize` parameters that DTrace rejects.
    #[error("llquantize() factor, magnitudes or steps are invalid")]
    Llquantize,
}

/// The value of quantize bucket `b` (`DTRACE_QUANTIZE_BUCKETVAL`).
pub fn quantize_bucket_value(b: usize) -> i64 {
    if b < QUANTIZE_ZEROBUCKET {
        -(1i64 << (QUANTIZE_ZEROBUCKET - 1 - b))
    } else if b == QUANTIZE_ZEROBUCKET {
        0
    } else {
        1i64 << (b - QUANTIZE_ZEROBUCKET - 1)
    }
}

/// The `quantize()` bucket of a value.
pub fn quantize_bucket(val: i64) -> usize {
    if val < 0 {
        // Bucket i holds values v with BUCKETVAL(i) >= v > BUCKETVAL(i+1) ... the first i with
        // val <= BUCKETVAL(i) counting from the most negative.
        let mag = val.unsigned_abs(); // 1 ..= 2^63
                                      // -(2^(62-i)) >= val  <=>  mag >= 2^(62-i)  ; smallest i: 62 - floor(log2(mag)).
        let log = 63 - mag.leading_zeros() as usize;
        62usize.saturating_sub(log)
    } else if val == 0 {
        QUANTIZE_ZEROBUCKET
    } else {
        // Highest bucket i with BUCKETVAL(i) <= val: 2^(i-64) <= val.
        let log = 63 - (val as u64).leading_zeros() as usize;
        QUANTIZE_ZEROBUCKET + 1 + log
    }
}

/// Decoded `lquantize` parameters.
fn lq_params(arg: u64) -> (i32, u16, u16) {
    (arg as u32 as i32, (arg >> 32) as u16, (arg >> 48) as u16)
}

/// Decoded `llquantize` parameters: factor, low, high, nsteps.
fn llq_params(arg: u64) -> (u16, u16, u16, u16) {
    (
        (arg >> 48) as u16,
        (arg >> 32) as u16,
        (arg >> 16) as u16,
        arg as u16,
    )
}

/// The most buckets an `llquantize()` value may have on either side of zero.
pub const LLQUANTIZE_MAX_BUCKETS: u64 = 1 << 16;

/// One magnitude of `llquantize()`: its first value, the next magnitude's and its step.
type Magnitude = (u128, u128, u128);

/// The first bucket of each magnitude and its step, walked as DTrace for Linux walks them: from
/// `factor^low` to `factor^(high + 1)`, each magnitude `[this, this * factor)` cut at the multiples of
/// its step (`this * factor / nsteps`, or 1 when the magnitude is smaller than `nsteps`), its first
/// bucket starting at `this`. `None` when a bound does not fit 64 bits.
fn llq_magnitudes(factor: u16, low: u16, high: u16, nsteps: u16) -> Option<(u128, Vec<Magnitude>)> {
    let (f, n) = (factor as u128, nsteps.max(1) as u128);
    if f < 2 || low > high {
        return None;
    }
    let mut this: u128 = 1;
    for _ in 0..low {
        this = this.checked_mul(f).filter(|v| *v <= u64::MAX as u128)?;
    }
    let zero_limit = this;
    let mut mags = Vec::new();
    for _ in low..=high {
        let next = this.checked_mul(f).filter(|v| *v <= u64::MAX as u128)?;
        let step = if next > n { next / n } else { 1 };
        mags.push((this, next, step));
        this = next;
    }
    Some((zero_limit, mags))
}

/// The buckets of one magnitude `[this, next)` cut at multiples of `step`, the first starting at `this`.
fn llq_count(this: u128, next: u128, step: u128) -> u128 {
    (next - 1) / step - this / step + 1
}

/// One magnitude of an `llquantize()` as [`llquantize_bucket`] walks it: the values `[first, next)`,
/// cut at multiples of `step`; `base` counts the positive buckets of the magnitudes below it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LlqMagnitude {
    /// The magnitude's first value.
    pub first: u64,
    /// The next magnitude's first value.
    pub next: u64,
    /// The width of its buckets.
    pub step: u64,
    /// The positive buckets below it.
    pub base: u64,
}

/// The layout [`llquantize_bucket`] uses, for code that computes the same buckets elsewhere (the
/// kernel's aggregation programs): the zero bucket's limit (`factor^low`) and every magnitude.
/// `None` for parameters that have no layout.
pub fn llquantize_magnitudes(
    factor: u16,
    low: u16,
    high: u16,
    nsteps: u16,
) -> Option<(u64, Vec<LlqMagnitude>)> {
    let (zero_limit, mags) = llq_magnitudes(factor, low, high, nsteps)?;
    let mut base: u128 = 0;
    let mut out = Vec::with_capacity(mags.len());
    for (first, next, step) in mags {
        out.push(LlqMagnitude {
            first: u64::try_from(first).ok()?,
            next: u64::try_from(next).ok()?,
            step: u64::try_from(step).ok()?,
            base: u64::try_from(base).ok()?,
        });
        base += llq_count(first, next, step);
    }
    Some((u64::try_from(zero_limit).ok()?, out))
}

/// The number of `llquantize()` buckets above zero below the overflow bucket, or `None` for
/// parameters DTrace refuses (or more than [`LLQUANTIZE_MAX_BUCKETS`]).
pub fn llquantize_positive_buckets(factor: u16, low: u16, high: u16, nsteps: u16) -> Option<u64> {
    let (_, mags) = llq_magnitudes(factor, low, high, nsteps)?;
    let n: u128 = mags.iter().map(|&(t, x, s)| llq_count(t, x, s)).sum();
    (n <= LLQUANTIZE_MAX_BUCKETS as u128).then_some(n as u64)
}

/// The `llquantize()` bucket of a value, in DTrace for Linux's layout, which is symmetric about zero:
/// bucket 0 holds values at or below `-factor^(high + 1)`, then the negative buckets from the largest
/// magnitude down, the zero bucket (`abs(value) < factor^low`), the positive buckets and last the
/// overflow bucket (`>= factor^(high + 1)`): `2 * P + 3` buckets for `P` positive ones.
pub fn llquantize_bucket(factor: u16, low: u16, high: u16, nsteps: u16, value: i64) -> u64 {
    let Some((zero_limit, mags)) = llq_magnitudes(factor, low, high, nsteps) else {
        return 0;
    };
    let npos: u128 = mags.iter().map(|&(t, x, s)| llq_count(t, x, s)).sum();
    let zero = npos + 1;
    let a = value.unsigned_abs() as u128;
    if a < zero_limit {
        return zero as u64;
    }
    let mut k: u128 = 0;
    let mut found = None;
    for &(this, next, step) in &mags {
        if a < next {
            found = Some(k + a / step - this / step);
            break;
        }
        k += llq_count(this, next, step);
    }
    let k = found.unwrap_or(npos);
    (if value > 0 {
        zero + 1 + k
    } else {
        zero - 1 - k
    }) as u64
}

/// Checks `llquantize` parameters: DTrace's compiler refuses the ones its documentation rules out;
/// here only what would make the layout unbounded is refused.
fn llq_valid(factor: u16, low: u16, high: u16, nsteps: u16) -> bool {
    nsteps >= 1 && llquantize_positive_buckets(factor, low, high, nsteps).is_some()
}

/// The size in bytes of an aggregating function's value, validating its parameters.
pub fn value_size(kind: ActionKind, arg: u64) -> Result<u32, AggParamError> {
    Ok(match kind {
        ActionKind::AggAvg => 16,
        ActionKind::AggStddev => 32,
        ActionKind::AggQuantize => (QUANTIZE_NBUCKETS * 8) as u32,
        ActionKind::AggLquantize => {
            let (_, levels, step) = lq_params(arg);
            if step == 0 || levels == 0 {
                return Err(AggParamError::Lquantize);
            }
            (levels as u32 + 3) * 8
        }
        ActionKind::AggLlquantize => {
            let (f, lo, hi, n) = llq_params(arg);
            if !llq_valid(f, lo, hi, n) {
                return Err(AggParamError::Llquantize);
            }
            let Some(npos) = llquantize_positive_buckets(f, lo, hi, n) else {
                return Err(AggParamError::Llquantize);
            };
            // the parameter word, then 2 * npos + 3 buckets
            ((2 * npos + 4) * 8) as u32
        }
        _ => 8,
    })
}

/// A fresh value: zero, `INT64_MAX` for min, `INT64_MIN` for max, and the encoded parameters in word 0
/// of lquantize/llquantize.
pub fn initial_value(kind: ActionKind, arg: u64, words: usize) -> Vec<u64> {
    let mut v = vec![0u64; words];
    match kind {
        ActionKind::AggMin => v[0] = i64::MAX as u64,
        ActionKind::AggMax => v[0] = i64::MIN as u64,
        ActionKind::AggLquantize | ActionKind::AggLlquantize => v[0] = arg,
        _ => {}
    }
    v
}

/// Applies one aggregating function to a value (`incr` is the weight, 1 unless given).
pub fn apply(kind: ActionKind, data: &mut [u64], val: u64, incr: u64) {
    match kind {
        ActionKind::AggCount => data[0] = data[0].wrapping_add(1),
        ActionKind::AggSum => data[0] = data[0].wrapping_add(val),
        ActionKind::AggMin if (val as i64) < data[0] as i64 => data[0] = val,
        ActionKind::AggMax if (val as i64) > data[0] as i64 => data[0] = val,
        ActionKind::AggAvg => {
            data[0] = data[0].wrapping_add(1);
            data[1] = data[1].wrapping_add(val);
        }
        ActionKind::AggStddev => {
            let v = val as i64;
            data[0] = data[0].wrapping_add(1);
            data[1] = data[1].wrapping_add(val);
            let sq = (v as i128 * v as i128) as u128;
            let cur = (data[2] as u128) | ((data[3] as u128) << 64);
            let sum = cur.wrapping_add(sq);
            data[2] = sum as u64;
            data[3] = (sum >> 64) as u64;
        }
        ActionKind::AggQuantize => {
            let b = quantize_bucket(val as i64);
            data[b] = data[b].wrapping_add(incr);
        }
        ActionKind::AggLquantize => {
            let (base, levels, step) = lq_params(data[0]);
            // The whole 64-bit value, signed, as DTrace compares it (a value past 2^31 is not
            // below the base).
            let v = val as i64;
            let idx = if v < i64::from(base) {
                0
            } else {
                let level = (i128::from(v) - i128::from(base)) / i128::from(step.max(1));
                if level < i128::from(levels) {
                    level as usize + 1
                } else {
                    levels as usize + 1
                }
            };
            if let Some(b) = data.get_mut(1 + idx) {
                *b = b.wrapping_add(incr);
            }
        }
        ActionKind::AggLlquantize => {
            let (f, lo, hi, n) = llq_params(data[0]);
            let idx = llquantize_bucket(f, lo, hi, n, val as i64) as usize;
            if let Some(b) = data.get_mut(1 + idx) {
                *b = b.wrapping_add(incr);
            }
        }
        _ => {}
    }
}

/// Merges value bytes `from` into `into` (both in `kind`'s layout, native-endian u64 words), as the
/// consumer does across CPUs and snapshots: sums for count/sum/avg/stddev and buckets, min/max for
/// min/max. Lengths must match; extra bytes are ignored.
pub fn merge_value(kind: ActionKind, into: &mut [u8], from: &[u8]) {
    let word = |b: &[u8]| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8]));
    let n = into.len().min(from.len()) / 8;
    match kind {
        ActionKind::AggMin | ActionKind::AggMax => {
            if n == 0 {
                return;
            }
            let a = word(&into[..8]) as i64;
            let b = word(&from[..8]) as i64;
            let r = if kind == ActionKind::AggMin {
                a.min(b)
            } else {
                a.max(b)
            };
            into[..8].copy_from_slice(&r.to_ne_bytes());
        }
        ActionKind::AggStddev => {
            if n < 4 {
                return;
            }
            for i in 0..2 {
                let s = word(&into[i * 8..i * 8 + 8]).wrapping_add(word(&from[i * 8..i * 8 + 8]));
                into[i * 8..i * 8 + 8].copy_from_slice(&s.to_ne_bytes());
            }
            let a = word(&into[16..24]) as u128 | (word(&into[24..32]) as u128) << 64;
            let b = word(&from[16..24]) as u128 | (word(&from[24..32]) as u128) << 64;
            let s = a.wrapping_add(b);
            into[16..24].copy_from_slice(&(s as u64).to_ne_bytes());
            into[24..32].copy_from_slice(&((s >> 64) as u64).to_ne_bytes());
        }
        ActionKind::AggLquantize | ActionKind::AggLlquantize => {
            // Word 0 is the encoded parameters, not a count.
            for i in 1..n {
                let s = word(&into[i * 8..i * 8 + 8]).wrapping_add(word(&from[i * 8..i * 8 + 8]));
                into[i * 8..i * 8 + 8].copy_from_slice(&s.to_ne_bytes());
            }
        }
        _ => {
            for i in 0..n {
                let s = word(&into[i * 8..i * 8 + 8]).wrapping_add(word(&from[i * 8..i * 8 + 8]));
                into[i * 8..i * 8 + 8].copy_from_slice(&s.to_ne_bytes());
            }
        }
    }
}

/// A drained entry: aggregation id, key bytes, value bytes.
pub type DrainedEntry = (u32, Vec<u8>, Vec<u8>);

/// One entry of an aggregation buffer.
#[derive(Debug, Clone)]
struct AggEntry {
    aggid: u32,
    /// Aggregation id (4 bytes) followed by the significant key bytes.
    full_key: Box<[u8]>,
    /// Length of the whole key with its id (the rest is zeros).
    full_len: usize,
    value: Vec<u64>,
}

/// One CPU's aggregation buffer.
#[derive(Debug)]
pub struct AggBuffer {
    limit: usize,
    used: usize,
    map: HashMap<Box<[u8]>, usize, foldhash::fast::RandomState>,
    entries: Vec<AggEntry>,
    drops: u64,
}

impl AggBuffer {
    /// An empty buffer of `aggsize` bytes.
    pub fn new(aggsize: usize) -> AggBuffer {
        AggBuffer {
            limit: aggsize,
            used: 0,
            map: HashMap::default(),
            entries: Vec::new(),
            drops: 0,
        }
    }

    /// Aggregates `val` into the entry `key` (the aggregation id as native-endian u32, then the
    /// significant key bytes: the full key is `key` zero-padded to `full_len` bytes), creating it (charged
    /// against `aggsize`) if new. Returns `false` on a drop.
    #[allow(clippy::too_many_arguments)]
    pub fn aggregate(
        &mut self,
        full_key: &[u8],
        full_len: usize,
        kind: ActionKind,
        arg: u64,
        value_words: usize,
        val: u64,
        incr: u64,
    ) -> bool {
        if let Some(&i) = self.map.get(full_key) {
            apply(kind, &mut self.entries[i].value, val, incr);
            return true;
        }
        let cost = entry_cost(full_len.max(full_key.len()), value_words);
        if self.used + cost > self.limit {
            self.drops += 1;
            return false;
        }
        self.used += cost;
        let aggid = full_key
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_ne_bytes)
            .unwrap_or(0);
        let mut value = initial_value(kind, arg, value_words);
        apply(kind, &mut value, val, incr);
        let key: Box<[u8]> = full_key.into();
        self.entries.push(AggEntry {
            aggid,
            full_key: key.clone(),
            full_len,
            value,
        });
        self.map.insert(key, self.entries.len() - 1);
        true
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Drains the entries (in creation order) as `(aggid, key bytes, value bytes)` and the drops.
    pub fn drain(&mut self) -> (Vec<DrainedEntry>, u64) {
        self.map.clear();
        self.used = 0;
        let out = self
            .entries
            .drain(..)
            .map(|e| {
                let value = e.value.iter().flat_map(|w| w.to_ne_bytes()).collect();
                let mut key = e.full_key.get(4..).unwrap_or(&[]).to_vec();
                key.resize(e.full_len.saturating_sub(4).max(key.len()), 0);
                (e.aggid, key, value)
            })
            .collect();
        (out, std::mem::take(&mut self.drops))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_buckets_match_bucketval() {
        for b in 0..QUANTIZE_NBUCKETS {
            let v = quantize_bucket_value(b);
            assert_eq!(quantize_bucket(v), b, "bucket {b} value {v}");
        }
        assert_eq!(quantize_bucket(3), QUANTIZE_ZEROBUCKET + 2);
        assert_eq!(quantize_bucket(4), QUANTIZE_ZEROBUCKET + 3);
        assert_eq!(quantize_bucket(-3), QUANTIZE_ZEROBUCKET - 2);
        assert_eq!(quantize_bucket(-4), QUANTIZE_ZEROBUCKET - 3);
        assert_eq!(quantize_bucket(i64::MAX), QUANTIZE_NBUCKETS - 1);
        assert_eq!(quantize_bucket(i64::MIN), 0);
        // Reference: the first bucket whose value exceeds val, minus one (DTrace's loop).
        for val in [-1000i64, -7, -1, 0, 1, 2, 5, 1023, 1024, 1 << 40] {
            let b = quantize_bucket(val);
            if val >= 0 {
                assert!(quantize_bucket_value(b) <= val);
                if b + 1 < QUANTIZE_NBUCKETS {
                    assert!(quantize_bucket_value(b + 1) > val);
                }
            } else {
                assert!(val <= quantize_bucket_value(b));
                if b > 0 {
                    assert!(val > quantize_bucket_value(b - 1));
                }
            }
        }
    }

    #[test]
    fn lquantize_layout() {
        let arg = dtrace_dif::program::lquantize_arg(0, 10, 10);
        assert_eq!(value_size(ActionKind::AggLquantize, arg), Ok(13 * 8));
        let mut v = initial_value(ActionKind::AggLquantize, arg, 13);
        for x in [-5i64, 0, 9, 10, 55, 99, 100, 1000] {
            apply(ActionKind::AggLquantize, &mut v, x as u64, 1);
        }
        assert_eq!(v[0], arg);
        assert_eq!(v[1], 1); // underflow
        assert_eq!(v[2], 2); // 0..9
        assert_eq!(v[3], 1); // 10..19
        assert_eq!(v[7], 1); // 50..59
        assert_eq!(v[11], 1); // 90..99
        assert_eq!(v[12], 2); // overflow
                              // A value whose low 32 bits read negative is still above the top (all 64 bits count).
        apply(ActionKind::AggLquantize, &mut v, 0x10_8000_0000, 1);
        apply(ActionKind::AggLquantize, &mut v, i64::MAX as u64, 1);
        assert_eq!((v[1], v[12]), (1, 4));
        assert_eq!(
            value_size(
                ActionKind::AggLquantize,
                dtrace_dif::program::lquantize_arg(0, 0, 1)
            ),
            Err(AggParamError::Lquantize)
        );
    }

    #[test]
    fn llquantize_layout() {
        // llquantize(x, 10, 0, 6, 20): 9 buckets in magnitude 0, 18 in each of the six others.
        let arg = dtrace_dif::program::llquantize_arg(10, 0, 6, 20);
        let size = value_size(ActionKind::AggLlquantize, arg).unwrap();
        let npos = 9 + 6 * 18;
        assert_eq!(llquantize_positive_buckets(10, 0, 6, 20), Some(npos));
        assert_eq!(size as u64, (2 * npos + 4) * 8);
        // Symmetric about the zero bucket.
        let z = npos + 1;
        assert_eq!(llquantize_bucket(10, 0, 6, 20, 0), z);
        assert_eq!(llquantize_bucket(10, 0, 6, 20, 1), z + 1);
        assert_eq!(llquantize_bucket(10, 0, 6, 20, -1), z - 1);
        assert_eq!(llquantize_bucket(10, 0, 6, 20, 9), z + 9);
        // 10..99 step 5.
        assert_eq!(llquantize_bucket(10, 0, 6, 20, 10), z + 10);
        assert_eq!(llquantize_bucket(10, 0, 6, 20, 15), z + 11);
        assert_eq!(llquantize_bucket(10, 0, 6, 20, -15), z - 11);
        assert_eq!(llquantize_bucket(10, 0, 6, 20, 10_000_000), 2 * npos + 2);
        assert_eq!(llquantize_bucket(10, 0, 6, 20, i64::MIN), 0);
        // Fewer steps than the factor: 1000, 2000, 4000, 6000, 8000 in magnitude 3.
        let z = 1 + llquantize_positive_buckets(10, 3, 5, 5).unwrap();
        assert_eq!(llquantize_bucket(10, 3, 5, 5, 999), z);
        assert_eq!(llquantize_bucket(10, 3, 5, 5, -999), z);
        assert_eq!(llquantize_bucket(10, 3, 5, 5, 1999), z + 1);
        assert_eq!(llquantize_bucket(10, 3, 5, 5, 2000), z + 2);
        assert_eq!(llquantize_bucket(10, 3, 5, 5, 3999), z + 2);
        // One magnitude (low == high) is allowed.
        assert_eq!(llquantize_positive_buckets(4, 0, 0, 4), Some(3));
        assert!(value_size(
            ActionKind::AggLlquantize,
            dtrace_dif::program::llquantize_arg(10, 6, 5, 20)
        )
        .is_err());
        assert!(value_size(
            ActionKind::AggLlquantize,
            dtrace_dif::program::llquantize_arg(10, 0, 30, 10)
        )
        .is_err());
    }

    #[test]
    fn scalar_functions() {
        let mut c = initial_value(ActionKind::AggMin, 0, 1);
        for x in [5i64, -3, 7] {
            apply(ActionKind::AggMin, &mut c, x as u64, 1);
        }
        assert_eq!(c[0] as i64, -3);
        let mut m = initial_value(ActionKind::AggMax, 0, 1);
        for x in [5i64, -3, 7] {
            apply(ActionKind::AggMax, &mut m, x as u64, 1);
        }
        assert_eq!(m[0], 7);
        let mut s = initial_value(ActionKind::AggStddev, 0, 4);
        for x in [2u64, 4, 4, 4, 5, 5, 7, 9] {
            apply(ActionKind::AggStddev, &mut s, x, 1);
        }
        assert_eq!(&s, &[8, 40, 232, 0]);
        let mut a = initial_value(ActionKind::AggAvg, 0, 2);
        apply(ActionKind::AggAvg, &mut a, 10, 1);
        apply(ActionKind::AggAvg, &mut a, 20, 1);
        assert_eq!(&a, &[2, 30]);
    }

    #[test]
    fn merge() {
        let b = |v: &[i64]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
        let mut x = b(&[5]);
        merge_value(ActionKind::AggMin, &mut x, &b(&[3]));
        assert_eq!(x, b(&[3]));
        let mut x = b(&[5]);
        merge_value(ActionKind::AggCount, &mut x, &b(&[3]));
        assert_eq!(x, b(&[8]));
        let mut x = b(&[77, 1, 2]);
        merge_value(ActionKind::AggLquantize, &mut x, &b(&[77, 1, 1]));
        assert_eq!(x, b(&[77, 2, 3]));
    }

    #[test]
    fn buffer_bounds_and_drains() {
        let mut buf = AggBuffer::new(120);
        let key = |id: u32, k: u8| {
            let mut v = id.to_ne_bytes().to_vec();
            v.extend_from_slice(&[k; 8]);
            v
        };
        assert!(buf.aggregate(&key(1, 1), 12, ActionKind::AggCount, 0, 1, 0, 1));
        assert!(buf.aggregate(&key(1, 1), 12, ActionKind::AggCount, 0, 1, 0, 1));
        assert!(buf.aggregate(&key(1, 2), 12, ActionKind::AggCount, 0, 1, 0, 1));
        assert!(!buf.aggregate(&key(1, 3), 12, ActionKind::AggCount, 0, 1, 0, 1));
        let (entries, drops) = buf.drain();
        assert_eq!(drops, 1);
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].0, 1);
        assert_eq!(entries[0].1, vec![1; 8]);
        assert_eq!(entries[0].2, 2u64.to_ne_bytes().to_vec());
        assert!(buf.is_empty());
    }
}
