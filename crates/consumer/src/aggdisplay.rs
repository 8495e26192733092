//! The `agghist` and `aggpack` display options, as libdtrace draws them when it walks one aggregation
//! in sorted order (`printa(@a)` without a format, and the print of every unprinted aggregation at the
//! end of a run):
//!
//! - `agghist`: `count()`, `sum()`, `avg()` and `stddev()` aggregations print as one histogram whose
//!   bars are each key's share of the aggregation's total (or, with `aggzoom`, of its largest value),
//!   under a `key  --- Distribution --- count` header printed once per aggregation.
//! - `aggpack`: `quantize()` and `lquantize()` values print as one line per key: the lowest bucket
//!   value, one cell per bucket (`_ x X` or Unicode block elements, `v V` for negative counts, a space
//!   for an empty bucket), the highest bucket value and the total count, under a
//!   `key  min .-----. max | count` header. `quantize()` rows share the bucket range that holds data
//!   in any key; `lquantize()` rows always show the whole range.
//!
//! Keys print in their usual form except that byte and string keys take a right-justified 16-column
//! field (the "packed width") instead of the left-justified 50-column one.

use dtrace_dif::program::{ActionKind, RecDesc};

use crate::aggvalue;
use crate::error::{ConsumerError, Result};
use crate::quantize::{self, GraphStyle, QUANTIZE_NBUCKETS, QUANTIZE_ZEROBUCKET};
use crate::recdata;

/// The column width of a key of `size` bytes in histogram and packed output (`packedwidth` of
/// `dt_print_datum`'s table).
pub fn packed_width(size: u32) -> usize {
    match size {
        1 => 3,
        2 => 5,
        4 => 8,
        _ => 16,
    }
}

/// The width of the key columns: each key's packed width plus its separating space.
pub fn keys_width(keys: &[RecDesc]) -> usize {
    keys.iter().map(|r| packed_width(r.size) + 1).sum()
}

/// DTrace's digit count for packed range labels (`dt_ndigits`): at least 4, one more for a minus
/// sign. It counts a power of ten as having one digit fewer than it prints with, as DTrace does.
pub fn ndigits(val: i64) -> usize {
    let mut n = 1;
    let mut v = val;
    if v < 0 {
        v = if v == i64::MIN { i64::MAX } else { -v };
        n += 1;
    }
    let mut cmp: i64 = 10;
    while v > cmp && cmp > 0 {
        n += 1;
        cmp = cmp.wrapping_mul(10);
    }
    n.max(4)
}

/// Whether packed cells may use UTF-8 when no `encoding` option is given: not on terminals known
/// not to draw it (`TERM` of `sun`, `sun-color` or `dumb`), nor without a `TERM` at all.
pub fn utf8_for_term(term: Option<&str>) -> bool {
    !matches!(term, None | Some("sun" | "sun-color" | "dumb"))
}

// ---------------------------------------------------------------------------------------------
// agghist
// ---------------------------------------------------------------------------------------------

/// The value an `agghist` bar shows for one entry, for the functions `agghist` applies to
/// (`count`, `sum`, `avg`, `stddev`); `None` for the others, which print as usual.
pub fn hist_value(action: ActionKind, data: &[u8]) -> Result<Option<i64>> {
    let word = |i| {
        recdata::i64_at(data, i).ok_or(ConsumerError::SizeMismatch {
            size: data.len(),
            what: "an agghist value",
        })
    };
    Ok(Some(match action {
        ActionKind::AggCount | ActionKind::AggSum => word(0)?,
        ActionKind::AggAvg => {
            let n = word(0)?;
            if n == 0 {
                0
            } else {
                word(1)?.wrapping_div(n)
            }
        }
        ActionKind::AggStddev => aggvalue::stddev(data, 1)? as i64,
        _ => return Ok(None),
    }))
}

/// `|v| / AGGZOOM_MAX` truncated to an integer, computed as libdtrace does on x86: the double
/// constant `1 / 0.95` multiplied in 64-bit-mantissa extended precision. (Plain `f64` arithmetic
/// gives 20 for 19, where DTrace gets 19.)
pub fn zoomed(v: i64) -> i64 {
    let c = 1.0 / quantize::AGGZOOM_MAX;
    let bits = c.to_bits();
    // c = m * 2^e with a 53-bit integer mantissa m.
    let m = (bits & ((1u64 << 52) - 1)) | (1u64 << 52);
    let e = ((bits >> 52) & 0x7ff) as i32 - 1075;
    let p = v.unsigned_abs() as u128 * m as u128;
    // Round the exact product to 64 significant bits (to nearest, ties to even).
    let nbits = 128 - p.leading_zeros() as i32;
    let (p, e) = if nbits > 64 {
        let sh = (nbits - 64) as u32;
        let half = 1u128 << (sh - 1);
        let rem = p & ((1u128 << sh) - 1);
        let mut q = p >> sh;
        if rem > half || (rem == half && q & 1 == 1) {
            q += 1;
        }
        (q, e + sh as i32)
    } else {
        (p, e)
    };
    let t = if e >= 0 {
        p.checked_shl(e as u32).unwrap_or(u128::MAX)
    } else if -e >= 128 {
        0
    } else {
        p >> (-e) as u32
    };
    t.min(i64::MAX as u128) as i64
}

/// The shared total of an `agghist` aggregation (`dt_aggregate_total`) and whether any value is
/// positive or negative.
pub fn hist_totals(values: &[i64], zoom: bool) -> (f64, (bool, bool)) {
    let mut total = 0.0f64;
    let (mut pos, mut neg) = (false, false);
    for &v in values {
        pos |= v > 0;
        neg |= v < 0;
        if zoom {
            let z = zoomed(v) as f64;
            if z > total {
                total = z;
            }
        } else {
            total += v.unsigned_abs() as f64;
        }
    }
    (total, (pos, neg))
}

/// The header above an `agghist` aggregation (`dt_print_quanthdr` with the key width).
pub fn hist_header(out: &mut Vec<u8>, width: usize) {
    let (w, label) = if width == 0 {
        (16, "value")
    } else {
        (width, "key")
    };
    out.extend_from_slice(
        format!(
            "\n{label:>w$} {:>41} {:<9}\n",
            "------------- Distribution -------------", "count"
        )
        .as_bytes(),
    );
}

/// One `agghist` bar after the keys: a space, then the bar and count as in a distribution graph.
pub fn hist_line(
    out: &mut Vec<u8>,
    val: i64,
    normal: u64,
    total: f64,
    signs: (bool, bool),
    style: &GraphStyle,
) {
    let mut s = String::from(" ");
    quantize::quantline(&mut s, val, normal, total, signs, style);
    out.extend_from_slice(s.as_bytes());
}

// ---------------------------------------------------------------------------------------------
// aggpack
// ---------------------------------------------------------------------------------------------

/// One packed cell (`dt_print_packed`).
fn packed_cell(out: &mut String, datum: i64, total: f64, utf8: bool) {
    const ASCII: &[u8] = b"__xxxxXX";
    const NEG: &[u8] = b"vvvvVV";
    if datum == 0 {
        out.push(' ');
        return;
    }
    let d = datum as f64;
    if datum < 0 {
        let v = (d * (NEG.len() - 1) as f64).abs() / total;
        let i = ((v + 0.5) as usize).min(NEG.len() - 1);
        out.push(NEG[i] as char);
        return;
    }
    let v = (d * 7.0) / total + 0.5;
    if utf8 {
        // U+2581 (lower one-eighth block) to U+2588 (full block).
        let level = (v as u32).min(7);
        out.push(char::from_u32(0x2581 + level).unwrap_or('\u{2588}'));
    } else {
        out.push(ASCII[(v as usize).min(ASCII.len() - 1)] as char);
    }
}

/// The bucket range of a packed `quantize()` aggregation: the first and last buckets holding data
/// in any entry (`dt_aggregate_minmaxbin`), or the zero bucket when none does.
pub fn quantize_minmax<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> (usize, usize) {
    let mut range: Option<(usize, usize)> = None;
    for v in values {
        for i in 0..(v.len() / 8).min(QUANTIZE_NBUCKETS) {
            if recdata::i64_at(v, i).unwrap_or(0) == 0 {
                continue;
            }
            range = Some(match range {
                None => (i, i),
                Some((lo, hi)) => (lo.min(i), hi.max(i)),
            });
        }
    }
    range.unwrap_or((QUANTIZE_ZEROBUCKET, QUANTIZE_ZEROBUCKET))
}

/// The shown range: one empty bucket either side of the data, except below bucket 0 and the zero
/// bucket, and above the last bucket.
fn quantize_shown(minbin: usize, maxbin: usize) -> (usize, usize) {
    let min = if minbin != 0 && minbin != QUANTIZE_ZEROBUCKET {
        minbin - 1
    } else {
        minbin
    };
    let max = if maxbin < QUANTIZE_NBUCKETS - 1 {
        maxbin + 1
    } else {
        maxbin
    };
    (min, max)
}

fn packed_header_line(
    out: &mut Vec<u8>,
    width: usize,
    minwidth: usize,
    ncells: usize,
    maxwidth: usize,
) {
    let key = if width > 0 { "key" } else { "" };
    out.extend_from_slice(
        format!(
            "\n{key:>width$} {:>minwidth$} .{}. {:<maxwidth$} | count\n",
            "min",
            "-".repeat(ncells),
            "max"
        )
        .as_bytes(),
    );
}

/// The header above a packed `quantize()` aggregation (`dt_print_quanthdr_packed`).
pub fn quantize_packed_header(out: &mut Vec<u8>, width: usize, minbin: usize, maxbin: usize) {
    let (min, max) = quantize_shown(minbin, maxbin);
    packed_header_line(
        out,
        width,
        ndigits(quantize::quantize_bucket_value(min)),
        max - min + 1,
        ndigits(quantize::quantize_bucket_value(max)),
    );
}

/// The header above a packed `lquantize()` aggregation of `levels` levels: one dash per bucket,
/// the `< base` and `>= limit` buckets included.
pub fn lquantize_packed_header(out: &mut Vec<u8>, width: usize, levels: usize) {
    packed_header_line(out, width, 7, levels + 2, 8);
}

/// One packed `quantize()` row after the keys (`dt_print_quantize_packed`). The count is the sum of
/// the shown buckets, not normalized.
pub fn print_quantize_packed(
    out: &mut Vec<u8>,
    data: &[u8],
    minbin: usize,
    maxbin: usize,
    style: &GraphStyle,
) -> Result<()> {
    if data.len() != QUANTIZE_NBUCKETS * 8 {
        return Err(ConsumerError::SizeMismatch {
            size: data.len(),
            what: "quantize()",
        });
    }
    let (min, max) = quantize_shown(minbin, maxbin.min(QUANTIZE_NBUCKETS - 1));
    let min = min.min(max);
    let d: Vec<i64> = (0..QUANTIZE_NBUCKETS)
        .map(|i| recdata::i64_at(data, i).unwrap_or(0))
        .collect();
    let minval = quantize::quantize_bucket_value(min);
    let maxval = quantize::quantize_bucket_value(max);
    let mut s = format!(" {minval:>w$} :", w = ndigits(minval));
    packed_cells(&mut s, &d[min..=max], style);
    let count = d[min..=max].iter().fold(0i64, |a, &v| a.wrapping_add(v));
    s.push_str(&format!(": {maxval:<w$} | {count}\n", w = ndigits(maxval)));
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

fn packed_cells(s: &mut String, buckets: &[i64], style: &GraphStyle) {
    let mut total = 0.0;
    for &v in buckets {
        quantize::add_total(&mut total, v, style.zoom);
    }
    for &v in buckets {
        packed_cell(s, v, total, style.packed_utf8);
    }
}

/// One packed `lquantize()` row after the keys (`dt_print_lquantize_packed`): every bucket, from
/// `< base` to `>= limit`.
pub fn print_lquantize_packed(out: &mut Vec<u8>, data: &[u8], style: &GraphStyle) -> Result<()> {
    let bad = || ConsumerError::SizeMismatch {
        size: data.len(),
        what: "lquantize()",
    };
    let arg = recdata::u64_at(data, 0).ok_or_else(bad)?;
    let (base, step, levels) = quantize::lquantize_params(arg);
    let levels = levels as usize;
    if data.len() != 8 * (levels + 3) {
        return Err(bad());
    }
    let d: Vec<i64> = (1..levels + 3)
        .map(|i| recdata::i64_at(data, i).unwrap_or(0))
        .collect();
    let mut s = format!("{:>8} :", format!("< {base}"));
    packed_cells(&mut s, &d, style);
    let limit = base as i64 + levels as i64 * step as i64;
    let count = d.iter().fold(0i64, |a, &v| a.wrapping_add(v));
    s.push_str(&format!(": {:<8} | {count}\n", format!(">= {limit}")));
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ndigits_as_dtrace_counts() {
        assert_eq!(ndigits(0), 4);
        assert_eq!(ndigits(1), 4);
        assert_eq!(ndigits(-1), 4);
        assert_eq!(ndigits(1024), 4);
        assert_eq!(ndigits(10000), 4); // DTrace's `val > cmp` undercounts powers of ten
        assert_eq!(ndigits(16384), 5);
        assert_eq!(ndigits(-16384), 6);
        assert_eq!(ndigits(i64::MIN), 20);
        assert_eq!(ndigits(i64::MAX), 19);
    }

    #[test]
    fn zoom_truncates_like_extended_precision() {
        assert_eq!(zoomed(19), 19);
        assert_eq!(zoomed(20), 21);
        assert_eq!(zoomed(-38), 39);
        assert_eq!(zoomed(0), 0);
        assert_eq!(zoomed(100), 105);
        assert!(zoomed(i64::MAX) == i64::MAX);
    }

    #[test]
    fn terminals_without_utf8() {
        assert!(utf8_for_term(Some("xterm-256color")));
        assert!(!utf8_for_term(Some("dumb")));
        assert!(!utf8_for_term(Some("sun-color")));
        assert!(!utf8_for_term(None));
    }

    #[test]
    fn packed_cells_by_share() {
        let mut s = String::new();
        for v in [0, 1, 2, 4, 7, -7, -1] {
            packed_cell(&mut s, v, 7.0, false);
        }
        assert_eq!(s, " _xxXVv");
        let mut s = String::new();
        for v in [1, 7] {
            packed_cell(&mut s, v, 7.0, true);
        }
        assert_eq!(s, "\u{2582}\u{2588}");
    }
}
