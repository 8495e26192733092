//! Structured output for today's tools: `-x oformat=json` ([`json`], one JSON document per line in
//! the names of FreeBSD's libxo output), `-x oformat=folded` ([`folded`], the `frame;frame count`
//! lines flame-graph tools read), SVG flame graphs drawn from those lines ([`flamegraph`], through
//! the `inferno` crate) and the OpenMetrics text of the aggregations a Prometheus server scrapes
//! ([`openmetrics`]). [`buckets`] gives each distribution bucket its bounds for the last two.
//!
//! Everything here formats into memory; serving or writing files is the embedding program's business.

pub mod buckets;
pub mod flamegraph;
pub mod folded;
pub mod json;
pub mod openmetrics;

use dtrace_dif::program::{ActionKind, RecDesc};
use dtrace_framework::records::AggDesc;

use crate::error::{ConsumerError, Result};
use crate::options::Options;
use crate::printf::FmtEnv;
use crate::{aggprint, recdata, stack};

/// The output format chosen with the `oformat` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OFormat {
    /// DTrace's own text (the default; `oformat=text`).
    #[default]
    Text = 0,
    /// One JSON document per line (`oformat=json`).
    Json = 1,
    /// Aggregations as folded stacks (`oformat=folded`).
    Folded = 2,
}

impl OFormat {
    /// Parses an `oformat` value.
    pub fn parse(v: &str) -> Result<OFormat> {
        match v {
            "text" | "none" => Ok(OFormat::Text),
            "json" => Ok(OFormat::Json),
            "folded" => Ok(OFormat::Folded),
            _ => Err(ConsumerError::BadOptionValue(v.to_string())),
        }
    }

    /// The format the options select.
    pub fn of(options: &Options) -> OFormat {
        match options.value("oformat") {
            1 => OFormat::Json,
            2 => OFormat::Folded,
            _ => OFormat::Text,
        }
    }
}

/// The key records of an aggregation description (every record but the value).
pub(crate) fn key_recs(desc: &AggDesc) -> &[RecDesc] {
    &desc.recs[..desc.recs.len().saturating_sub(1)]
}

/// Whether a record is a stack (`stack()`, `ustack()`, `jstack()`).
pub(crate) fn is_stack(action: ActionKind) -> bool {
    matches!(
        action,
        ActionKind::Stack | ActionKind::Ustack | ActionKind::Jstack
    )
}

/// A stack record's frames as DTrace prints them (`module`function+0x1c`, or an address), leaf
/// first.
pub(crate) fn stack_frames(env: &FmtEnv<'_>, rec: &RecDesc, b: &[u8]) -> Result<Vec<String>> {
    let mut text = Vec::new();
    stack::print_any(&mut text, env.symbols, rec, b, 0, None)?;
    Ok(String::from_utf8_lossy(&text)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// A key or scalar datum as one line of text, as `printa()` would print it without its column
/// padding (strings bare, integers in decimal, symbols resolved).
pub(crate) fn datum_text(env: &FmtEnv<'_>, rec: &RecDesc, b: &[u8]) -> Result<String> {
    let mut text = Vec::new();
    aggprint::print_datum(&mut text, env, rec, b, 1, false)?;
    Ok(String::from_utf8_lossy(&text).trim().to_string())
}

/// An integer record by its size (8 and 4 bytes signed, 2 and 1 unsigned, as `trace()` prints them).
pub(crate) fn int_value(b: &[u8]) -> Option<i64> {
    match b.len() {
        8 => recdata::sint(b),
        4 => recdata::sint(b),
        2 | 1 => recdata::uint(b).map(|v| v as i64),
        _ => None,
    }
}

/// The single value of a scalar aggregating function (count, sum, min, max, avg, stddev), divided by
/// the normalization factor as DTrace prints it; `None` for distributions.
pub(crate) fn scalar_value(action: ActionKind, b: &[u8], normal: u64) -> Result<Option<i64>> {
    let normal = normal.max(1);
    Ok(match action {
        ActionKind::AggAvg => Some(crate::aggvalue::average(b, normal)?),
        ActionKind::AggStddev => Some(crate::aggvalue::stddev(b, normal)? as i64),
        ActionKind::AggQuantize | ActionKind::AggLquantize | ActionKind::AggLlquantize => None,
        _ => Some(
            recdata::sint(b)
                .ok_or(ConsumerError::SizeMismatch {
                    size: b.len(),
                    what: "an aggregation value",
                })?
                .wrapping_div(normal as i64),
        ),
    })
}

/// The name DTrace gives an aggregating function (`count`, `quantize`, ...).
pub fn function_name(action: ActionKind) -> &'static str {
    match action {
        ActionKind::AggCount => "count",
        ActionKind::AggMin => "min",
        ActionKind::AggMax => "max",
        ActionKind::AggAvg => "avg",
        ActionKind::AggSum => "sum",
        ActionKind::AggStddev => "stddev",
        ActionKind::AggQuantize => "quantize",
        ActionKind::AggLquantize => "lquantize",
        ActionKind::AggLlquantize => "llquantize",
        _ => "value",
    }
}

/// An [`FmtEnv`] for formatting keys outside a consumption pass.
pub(crate) fn env_of(d: &crate::consume::Decoder) -> FmtEnv<'_> {
    FmtEnv {
        symbols: d.symbols.as_ref(),
        stackindent: 0,
        target: d.target,
        style: Default::default(),
        agghist: false,
        aggpack: false,
        zone: &d.zone,
    }
}

/// `printa()` of `varids` in the structured formats; false when the format is text (the caller
/// prints as DTrace does).
pub(crate) fn printa(
    d: &crate::consume::Decoder,
    varids: &[u32],
    out: &mut Vec<u8>,
) -> Result<bool> {
    let env = env_of(d);
    match OFormat::of(&d.options) {
        OFormat::Text => Ok(false),
        OFormat::Json => {
            json::print_aggregations(out, &env, &d.aggs, &d.agg_names, varids, d.sort_order())?;
            Ok(true)
        }
        OFormat::Folded => {
            folded::print_aggregations(out, &env, &d.aggs, varids, d.sort_order())?;
            Ok(true)
        }
    }
}

/// The end-of-run print of every aggregation not printed by `printa()`, in the structured formats;
/// false when the format is text.
pub(crate) fn print_all(d: &crate::consume::Decoder, out: &mut Vec<u8>) -> Result<bool> {
    let varids: Vec<u32> = d
        .aggs
        .varids()
        .into_iter()
        .filter(|v| !d.printed.contains(v))
        .collect();
    printa(d, &varids, out)
}

/// The OpenMetrics text of a handle's aggregations as they are now ([`openmetrics::render`]).
pub fn metrics_text(d: &crate::consume::Decoder) -> Result<String> {
    openmetrics::render(&env_of(d), &d.aggs, &d.agg_names)
}

/// The folded stacks of every aggregation with a stack key and the variables they came from (for
/// flame graphs), skipping those `printa()` already printed.
pub fn stack_lines(d: &crate::consume::Decoder) -> Result<(Vec<String>, Vec<u32>)> {
    let env = env_of(d);
    let (mut lines, mut used) = (Vec::new(), Vec::new());
    for v in d.aggs.varids() {
        if d.printed.contains(&v) || !folded::has_stack_key(&d.aggs, v) {
            continue;
        }
        lines.extend(folded::lines(&env, &d.aggs, v, d.sort_order())?);
        used.push(v);
    }
    Ok((lines, used))
}
