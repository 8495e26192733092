//! The buckets of `quantize()`, `lquantize()` and `llquantize()` values with their bounds: the value
//! DTrace labels each bucket with (its lowest value, or the limit of the `< base` underflow bucket)
//! and the highest value it holds, so that JSON can show DTrace's labels and OpenMetrics histograms
//! DTrace's exact bucket bounds (`le`).

use dtrace_dif::program::ActionKind;

use crate::error::{ConsumerError, Result};
use crate::quantize::{
    lquantize_params, quantize_bucket_value, LlquantizeLayout, QUANTIZE_NBUCKETS,
};
use crate::recdata;

/// One bucket of a distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// The label DTrace prints on the bucket's row: its lowest value, or for the underflow bucket
    /// (`< base`) the base it lies below.
    pub value: i64,
    /// The highest value the bucket holds; `None` for the last bucket (no upper bound).
    pub upper: Option<i64>,
    /// The `< base` bucket of `lquantize()`/`llquantize()`.
    pub underflow: bool,
    /// How many values fell in it (as stored; weighted by the increment).
    pub count: i64,
}

fn mismatch(size: usize, what: &'static str) -> ConsumerError {
    ConsumerError::SizeMismatch { size, what }
}

fn counts(data: &[u8]) -> Vec<i64> {
    (0..data.len() / 8)
        .map(|i| recdata::i64_at(data, i).unwrap_or(0))
        .collect()
}

/// The buckets of a distribution value, in order, or an error for malformed data; `Ok(None)` for
/// functions that are not distributions.
pub fn buckets(action: ActionKind, data: &[u8]) -> Result<Option<Vec<Bucket>>> {
    Ok(Some(match action {
        ActionKind::AggQuantize => quantize(data)?,
        ActionKind::AggLquantize => lquantize(data)?,
        ActionKind::AggLlquantize => llquantize(data)?,
        _ => return Ok(None),
    }))
}

fn quantize(data: &[u8]) -> Result<Vec<Bucket>> {
    if data.len() != QUANTIZE_NBUCKETS * 8 {
        return Err(mismatch(data.len(), "quantize()"));
    }
    let c = counts(data);
    Ok((0..QUANTIZE_NBUCKETS)
        .map(|i| {
            let value = quantize_bucket_value(i);
            // Negative buckets hold (next lower label, label]; zero holds 0; positive buckets
            // hold [label, next label).
            let upper = if value <= 0 {
                Some(value)
            } else if i + 1 < QUANTIZE_NBUCKETS {
                Some(quantize_bucket_value(i + 1) - 1)
            } else {
                None
            };
            Bucket {
                value,
                upper,
                underflow: false,
                count: c[i],
            }
        })
        .collect())
}

fn lquantize(data: &[u8]) -> Result<Vec<Bucket>> {
    let arg = recdata::u64_at(data, 0).ok_or(mismatch(data.len(), "lquantize()"))?;
    let (base, step, levels) = lquantize_params(arg);
    let levels = levels as usize;
    if data.len() != 8 * (levels + 3) || step == 0 {
        return Err(mismatch(data.len(), "lquantize()"));
    }
    let c = counts(&data[8..]);
    let (base, step) = (base as i64, step as i64);
    Ok((0..levels + 2)
        .map(|i| {
            let (value, upper, underflow) = if i == 0 {
                (base, Some(base - 1), true)
            } else if i == levels + 1 {
                (base + levels as i64 * step, None, false)
            } else {
                let lo = base + (i as i64 - 1) * step;
                (lo, Some(lo + step - 1), false)
            };
            Bucket {
                value,
                upper,
                underflow,
                count: c[i],
            }
        })
        .collect())
}

fn llquantize(data: &[u8]) -> Result<Vec<Bucket>> {
    let bad = || mismatch(data.len(), "llquantize()");
    let arg = recdata::u64_at(data, 0).ok_or_else(bad)?;
    let layout = LlquantizeLayout::of(arg).ok_or_else(bad)?;
    let body = &data[8..];
    if body.len() != layout.nbuckets() * 8 {
        return Err(bad());
    }
    let c = counts(body);
    let z = layout.zero_bucket();
    let last = layout.nbuckets() - 1;
    // Each bucket is labelled by its lowest magnitude: negative buckets hold
    // (value of the bucket before, value], the zero bucket (-limit, limit), positive buckets
    // [value, value of the next bucket).
    Ok((0..=last)
        .map(|i| {
            let value = layout.bucket_value(i);
            let (value, upper, underflow) = if i < z {
                (value, Some(value), false)
            } else if i == z {
                (0, Some(layout.zero_limit - 1), false)
            } else if i == last {
                (value, None, false)
            } else {
                (value, Some(layout.bucket_value(i + 1) - 1), false)
            };
            Bucket {
                value,
                upper,
                underflow,
                count: c[i],
            }
        })
        .collect())
}
