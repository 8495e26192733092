//! The distribution graphs of `quantize()`, `lquantize()` and `llquantize()`, byte for byte as DTrace
//! draws them: the `value  ---- Distribution ---- count` header, one row per bucket from one below the
//! first non-zero bucket to one above the last, `@` bars scaled to 40 columns (half-width bars either side
//! of a centre line when there are negative counts), and the `< base` / `>= limit` rows of lquantize.
//! [`GraphStyle`] carries the options that change the bars: `aggzoom` (scale to the largest bucket,
//! drawn at 95% of the bar) and `encoding=utf8` (block elements with eighth-cell resolution).

use crate::error::{ConsumerError, Result};
use crate::recdata;

/// Number of `quantize()` buckets (`DTRACE_QUANTIZE_NBUCKETS`).
pub const QUANTIZE_NBUCKETS: usize = 127;
/// Index of the zero bucket (`DTRACE_QUANTIZE_ZEROBUCKET`).
pub const QUANTIZE_ZEROBUCKET: usize = 63;

/// The lower bound of quantize bucket `i` (`DTRACE_QUANTIZE_BUCKETVAL`).
pub fn quantize_bucket_value(i: usize) -> i64 {
    if i < QUANTIZE_ZEROBUCKET {
        -(1i64 << (QUANTIZE_ZEROBUCKET - 1 - i))
    } else if i == QUANTIZE_ZEROBUCKET {
        0
    } else {
        1i64 << (i - QUANTIZE_ZEROBUCKET - 1)
    }
}

/// Decoded `lquantize()` parameters: base, step and number of levels.
pub fn lquantize_params(arg: u64) -> (i32, u16, u16) {
    (arg as u32 as i32, (arg >> 48) as u16, (arg >> 32) as u16)
}

/// Decoded `llquantize()` parameters: factor, low, high, steps.
pub fn llquantize_params(arg: u64) -> (u16, u16, u16, u16) {
    (
        (arg >> 48) as u16,
        (arg >> 32) as u16,
        (arg >> 16) as u16,
        arg as u16,
    )
}

fn mismatch(size: usize, what: &'static str) -> ConsumerError {
    ConsumerError::SizeMismatch { size, what }
}

fn buckets(data: &[u8]) -> Vec<i64> {
    (0..data.len() / 8)
        .map(|i| recdata::i64_at(data, i).unwrap_or(0))
        .collect()
}

const ATS: &str = "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@";
const SPACES: &str = "                                        ";

/// The height of the largest bar under `aggzoom`, as a fraction of the full bar
/// (`DTRACE_AGGZOOM_MAX`).
pub const AGGZOOM_MAX: f64 = 0.95;

/// Display options that change how bars are drawn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GraphStyle {
    /// `aggzoom`: bars scale to the largest bucket rather than to the sum of all buckets.
    pub zoom: bool,
    /// `encoding=utf8` given explicitly: all-positive bars drawn with Unicode block elements.
    pub utf8: bool,
    /// `aggpack` cells drawn with Unicode block elements (else the ASCII `_xX` / `vV` letters).
    pub packed_utf8: bool,
}

/// Adds one bucket to a graph's total (`dt_quantize_total`): the sum of magnitudes, or under
/// `aggzoom` the largest magnitude scaled up so that it draws at [`AGGZOOM_MAX`] of the bar.
pub fn add_total(total: &mut f64, datum: i64, zoom: bool) {
    let v = (datum as f64).abs();
    if !zoom {
        *total += v;
        return;
    }
    let v = v * (1.0 / AGGZOOM_MAX);
    if *total < v {
        *total = v;
    }
}

const FULL_BLOCK: char = '\u{2588}';

/// An all-positive bar drawn with block elements (`dt_print_quantline_utf8`): whole cells, then one
/// partial cell of 1/8 to 7/8 width.
fn quantline_utf8(out: &mut String, val: i64, normal: u64, total: f64) {
    use std::fmt::Write;
    let f = (val.unsigned_abs() as f64 * 40.0) / total;
    let whole = f as u32;
    let partial = ((f - whole as f64) * 8.0) as u32;
    out.push('|');
    let mut used = whole as usize;
    for _ in 0..whole {
        out.push(FULL_BLOCK);
    }
    if partial != 0 {
        // U+258F is the one-eighth block, U+2589 the seven-eighths one.
        out.push(char::from_u32(0x258f - (partial - 1)).unwrap_or(FULL_BLOCK));
        used += 1;
    }
    let shown = val.wrapping_div((normal as i64).max(1));
    let _ = writeln!(out, "{} {:<9}", &SPACES[used.min(40)..], shown);
}

/// One bar with its count (`dt_print_quantline`).
pub(crate) fn quantline(
    out: &mut String,
    val: i64,
    normal: u64,
    total: f64,
    (pos, neg): (bool, bool),
    style: &GraphStyle,
) {
    use std::fmt::Write;
    if !neg && pos && style.utf8 {
        quantline_utf8(out, val, normal, total);
        return;
    }
    let shown = val.wrapping_div((normal as i64).max(1));
    let depth_of = |len: usize| -> usize {
        if total == 0.0 {
            return 0;
        }
        let f = (val.unsigned_abs() as f64 * len as f64) / total;
        ((f + 0.5) as usize).min(len)
    };
    if !neg {
        let depth = if pos { depth_of(40) } else { 0 };
        let _ = writeln!(
            out,
            "|{}{} {:<9}",
            &ATS[..depth],
            &SPACES[..40 - depth],
            shown
        );
        return;
    }
    if !pos {
        let depth = depth_of(40);
        let _ = writeln!(
            out,
            "{}{}| {:<9}",
            &SPACES[..40 - depth],
            &ATS[..depth],
            shown
        );
        return;
    }
    let depth = depth_of(20);
    if val <= 0 {
        let _ = writeln!(
            out,
            "{}{}|{:20} {:<9}",
            &SPACES[..20 - depth],
            &ATS[..depth],
            "",
            shown
        );
    } else {
        let _ = writeln!(
            out,
            "{:20}|{}{} {:<9}",
            "",
            &ATS[..depth],
            &SPACES[..20 - depth],
            shown
        );
    }
}

pub(crate) fn header(out: &mut String) {
    out.push_str(&format!(
        "\n{:>16} {:>41} {:<9}\n",
        "value", "------------- Distribution -------------", "count"
    ));
}

/// First and last rows to show: one zero row either side of the non-zero ones, or `empty` when all
/// buckets are zero.
fn row_range(data: &[i64], empty: (usize, usize)) -> (usize, usize) {
    let n = data.len();
    let Some(first) = data.iter().position(|&v| v != 0) else {
        return empty;
    };
    let last = data.iter().rposition(|&v| v != 0).unwrap_or(first);
    (first.saturating_sub(1), (last + 1).min(n - 1))
}

fn totals(data: &[i64], first: usize, last: usize, zoom: bool) -> (f64, (bool, bool)) {
    let mut total = 0.0;
    let (mut pos, mut neg) = (false, false);
    for &v in &data[first..=last] {
        pos |= v > 0;
        neg |= v < 0;
        add_total(&mut total, v, zoom);
    }
    (total, (pos, neg))
}

/// `quantize()` graph.
pub fn print_quantize(
    out: &mut Vec<u8>,
    data: &[u8],
    normal: u64,
    style: &GraphStyle,
) -> Result<()> {
    if data.len() != QUANTIZE_NBUCKETS * 8 {
        return Err(mismatch(data.len(), "quantize()"));
    }
    let d = buckets(data);
    // All-zero data shows the rows around zero; data in the last bucket (2^62 and up) shows it and the
    // row before it (DTrace for Linux; illumos skipped the last bucket when looking for data).
    let (first, last) = row_range(&d, (QUANTIZE_ZEROBUCKET - 1, QUANTIZE_ZEROBUCKET + 1));
    let (total, signs) = totals(&d, first, last, style.zoom);
    let mut s = String::new();
    header(&mut s);
    for (i, &v) in d.iter().enumerate().take(last + 1).skip(first) {
        s.push_str(&format!("{:>16} ", quantize_bucket_value(i)));
        quantline(&mut s, v, normal, total, signs, style);
    }
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

/// `lquantize()` graph: the first u64 is the encoded parameters, then levels + 2 buckets.
pub fn print_lquantize(
    out: &mut Vec<u8>,
    data: &[u8],
    normal: u64,
    style: &GraphStyle,
) -> Result<()> {
    let arg = recdata::u64_at(data, 0).ok_or(mismatch(data.len(), "lquantize()"))?;
    let (base, step, levels) = lquantize_params(arg);
    let levels = levels as usize;
    if data.len() != 8 * (levels + 3) {
        return Err(mismatch(data.len(), "lquantize()"));
    }
    let d = buckets(&data[8..]);
    let (first, last) = row_range(&d, (0, 2.min(d.len() - 1)));
    let (total, signs) = totals(&d, first, last, style.zoom);
    let mut s = String::new();
    header(&mut s);
    let (base, step) = (base as i64, step as i64);
    for (i, &v) in d.iter().enumerate().take(last + 1).skip(first) {
        let label = if i == 0 {
            format!("< {base}")
        } else if i == levels + 1 {
            format!(">= {}", base + levels as i64 * step)
        } else {
            (base + (i as i64 - 1) * step).to_string()
        };
        s.push_str(&format!("{label:>16} "));
        quantline(&mut s, v, normal, total, signs, style);
    }
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

/// The bucket layout of an `llquantize()` value, as DTrace for Linux lays it out: symmetric about a
/// zero bucket that holds `abs(value) < factor^low`, with the positive buckets' lowest values in
/// `positive` and the overflow bucket from `overflow` (`factor^(high + 1)`) up; the negative side
/// mirrors it (`<= -overflow` first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlquantizeLayout {
    /// `factor^low`: the zero bucket holds values of smaller magnitude.
    pub zero_limit: i64,
    /// The lowest value of each positive bucket, ascending.
    pub positive: Vec<i64>,
    /// `factor^(high + 1)`: the first value of the overflow bucket.
    pub overflow: i64,
}

impl LlquantizeLayout {
    /// The layout of the encoded parameters `arg`, or `None` for parameters that do not describe one.
    pub fn of(arg: u64) -> Option<Self> {
        let (factor, low, high, nsteps) = llquantize_params(arg);
        let npos =
            dtrace_framework::aggregate::llquantize_positive_buckets(factor, low, high, nsteps)?;
        let (f, n) = (factor as i128, nsteps.max(1) as i128);
        let mut this: i128 = f.checked_pow(low as u32)?;
        let zero_limit = i64::try_from(this).ok()?;
        let mut positive = Vec::with_capacity(npos as usize);
        for _ in low..=high {
            let next = this.checked_mul(f)?;
            let step = if next > n { next / n } else { 1 };
            positive.push(i64::try_from(this).ok()?);
            let mut v = (this / step + 1) * step;
            while v < next {
                positive.push(i64::try_from(v).ok()?);
                v += step;
            }
            this = next;
        }
        let overflow = i64::try_from(this).ok()?;
        (positive.len() as u64 == npos).then_some(Self {
            zero_limit,
            positive,
            overflow,
        })
    }

    /// Number of buckets: both sides, zero and the two overflow buckets.
    pub fn nbuckets(&self) -> usize {
        2 * self.positive.len() + 3
    }

    /// Index of the zero bucket.
    pub fn zero_bucket(&self) -> usize {
        self.positive.len() + 1
    }

    /// The value a bucket stands for: its lowest magnitude, signed (`-overflow` and `overflow` for the
    /// two overflow buckets, 0 for the zero bucket).
    pub fn bucket_value(&self, i: usize) -> i64 {
        let z = self.zero_bucket();
        let n = self.positive.len();
        if i == 0 {
            -self.overflow
        } else if i < z {
            -self.positive[n - i]
        } else if i == z {
            0
        } else if i - z - 1 < n {
            self.positive[i - z - 1]
        } else {
            self.overflow
        }
    }

    /// The label of a bucket's row: `<= -N`, the bucket's value, `0` or `abs() < L` for the zero
    /// bucket, `>= N`.
    pub fn label(&self, i: usize) -> String {
        let z = self.zero_bucket();
        if i == 0 {
            format!("<= -{}", self.overflow)
        } else if i == z {
            if self.zero_limit == 1 {
                "0".to_string()
            } else {
                format!("abs() < {}", self.zero_limit)
            }
        } else if i == self.nbuckets() - 1 {
            format!(">= {}", self.overflow)
        } else {
            self.bucket_value(i).to_string()
        }
    }
}

/// `llquantize()` graph: the first u64 is the encoded parameters, then the buckets.
pub fn print_llquantize(
    out: &mut Vec<u8>,
    data: &[u8],
    normal: u64,
    style: &GraphStyle,
) -> Result<()> {
    let arg = recdata::u64_at(data, 0).ok_or(mismatch(data.len(), "llquantize()"))?;
    let layout = LlquantizeLayout::of(arg).ok_or(mismatch(data.len(), "llquantize()"))?;
    let body = &data[8..];
    if body.len() != layout.nbuckets() * 8 {
        return Err(mismatch(data.len(), "llquantize()"));
    }
    let d = buckets(body);
    // No data: the zero bucket and the two above it.
    let z = layout.zero_bucket();
    let (first, last) = row_range(&d, (z, (z + 2).min(d.len() - 1)));
    let (total, signs) = totals(&d, first, last, style.zoom);
    let mut s = String::new();
    header(&mut s);
    for (i, &v) in d.iter().enumerate().take(last + 1).skip(first) {
        s.push_str(&format!("{:>16} ", layout.label(i)));
        quantline(&mut s, v, normal, total, signs, style);
    }
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

/// The llquantize sort key: bucket values weighted by counts, and the zero bucket's count.
pub fn llquantize_sort_key(data: &[u8]) -> (i128, i64) {
    let Some(layout) = recdata::u64_at(data, 0).and_then(LlquantizeLayout::of) else {
        return (0, 0);
    };
    let d = buckets(data.get(8..).unwrap_or(&[]));
    let mut total: i128 = 0;
    for (i, &v) in d.iter().enumerate().take(layout.nbuckets()) {
        total = total.saturating_add(layout.bucket_value(i) as i128 * v as i128);
    }
    (total, d.get(layout.zero_bucket()).copied().unwrap_or(0))
}

/// Sum of bucket lower bounds weighted by counts and the zero bucket's count, DTrace's sort key for
/// quantized aggregations (summed exactly, so near sums of large values still order).
pub fn quantize_sort_key(data: &[u8]) -> (i128, i64) {
    let d = buckets(data);
    let mut total: i128 = 0;
    let mut zero = 0;
    for (i, &v) in d.iter().enumerate() {
        let b = quantize_bucket_value(i);
        if b == 0 {
            zero = v;
        }
        total = total.saturating_add(b as i128 * v as i128);
    }
    (total, zero)
}

/// The lquantize sort key: weighted sum over buckets and the count of the bucket holding zero.
pub fn lquantize_sort_key(data: &[u8]) -> (i128, i64) {
    let Some(arg) = recdata::u64_at(data, 0) else {
        return (0, 0);
    };
    let (base, step, levels) = lquantize_params(arg);
    let d = buckets(data.get(8..).unwrap_or(&[]));
    let mut total: i128 = 0;
    let mut zero = 0;
    let (base, step) = (base as i64, step as i64);
    for (i, &v) in d.iter().enumerate() {
        let lo = if i == 0 {
            base - 1
        } else if i == levels as usize + 1 {
            base + levels as i64 * step
        } else {
            base + (i as i64 - 1) * step
        };
        if lo == 0 {
            zero = v;
        }
        total = total.saturating_add(lo as i128 * v as i128);
    }
    (total, zero)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quantize_of(bucket: usize, count: i64) -> String {
        let mut data = vec![0u8; QUANTIZE_NBUCKETS * 8];
        data[bucket * 8..bucket * 8 + 8].copy_from_slice(&count.to_ne_bytes());
        let mut out = Vec::new();
        print_quantize(&mut out, &data, 1, &GraphStyle::default()).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn quantize_sort_keys_are_exact() {
        // Sums of counts near INT64_MAX that a double cannot tell apart still order (DTrace sorts on
        // a long double sum).
        let key = |count: i64| {
            let mut data = vec![0u8; QUANTIZE_NBUCKETS * 8];
            let b = QUANTIZE_ZEROBUCKET + 3; // value 4
            data[b * 8..b * 8 + 8].copy_from_slice(&count.to_ne_bytes());
            quantize_sort_key(&data)
        };
        assert!(key(i64::MAX - 3) < key(i64::MAX));
        assert_ne!(key(i64::MAX - 3).0 as f64, 0.0);
    }

    #[test]
    fn data_in_the_last_quantize_bucket_is_shown() {
        // quantize(1 << 62, 1234): the last bucket and the one before it.
        let got = quantize_of(QUANTIZE_NBUCKETS - 1, 1234);
        let rows: Vec<&str> = got.lines().skip(2).collect();
        assert_eq!(
            rows,
            [
                format!("{:>16} |{:40} 0        ", 1i64 << 61, ""),
                format!("{:>16} |{} 1234     ", 1i64 << 62, "@".repeat(40)),
            ]
        );
        // No data: the rows around zero.
        let got = quantize_of(0, 0);
        let labels: Vec<&str> = got
            .lines()
            .skip(2)
            .map(|l| l.split_whitespace().next().unwrap_or(""))
            .collect();
        assert_eq!(labels, ["-1", "0", "1"]);
    }
}
