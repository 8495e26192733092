//! Printing aggregations: the default layout (`dt_print_aggs`: each key as `trace()` would print it in
//! its column width, then the value — ` %16lld` for count/sum/min/max/avg, the graph for quantizations),
//! `printa()` with and without a format string, one or several aggregations joined by key, and the
//! print-everything-unprinted pass at the end of a run. With `agghist` or `aggpack` set, the
//! sorted print of one aggregation takes the layouts of [`aggdisplay`].

use std::collections::BTreeMap;

use dtrace_dif::program::{ActionKind, RecDesc};
use dtrace_framework::records::AggDesc;

use crate::aggdisplay;
use crate::aggregate::{AggEntry, Aggregations, CpuValues, SortOrder};
use crate::aggvalue;
use crate::bytes;
use crate::cformat::{self, Spec};
use crate::error::{ConsumerError, Result};
use crate::printf::{AggValue, FmtEnv, PrintfFormat};
use crate::quantize;
use crate::recdata;
use crate::stack;

/// One datum in the default layout (`dt_print_datum`); `packed` (under `agghist` and `aggpack`)
/// gives byte and string data a right-justified 16-column field instead of a left-justified 50.
pub fn print_datum(
    out: &mut Vec<u8>,
    env: &FmtEnv<'_>,
    rec: &RecDesc,
    b: &[u8],
    normal: u64,
    packed: bool,
) -> Result<()> {
    let normal = normal.max(1);
    match rec.action {
        ActionKind::Stack | ActionKind::Ustack | ActionKind::Jstack => {
            return stack::print_any(out, env.symbols, rec, b, env.stackindent, None)
        }
        ActionKind::Sym
        | ActionKind::Mod
        | ActionKind::Usym
        | ActionKind::Umod
        | ActionKind::Uaddr => return stack::print_symbol_record(out, env.symbols, rec.action, b),
        ActionKind::AggQuantize => return quantize::print_quantize(out, b, normal, &env.style),
        ActionKind::AggLquantize => return quantize::print_lquantize(out, b, normal, &env.style),
        ActionKind::AggLlquantize => return quantize::print_llquantize(out, b, normal, &env.style),
        ActionKind::AggAvg => {
            let v = aggvalue::average(b, normal)?;
            out.push(b' ');
            cformat::fmt_signed(out, &Spec::width(16), v);
            return Ok(());
        }
        ActionKind::AggStddev => {
            let v = aggvalue::stddev(b, normal)?;
            out.push(b' ');
            cformat::fmt_unsigned(out, &Spec::width(16), v, b'u');
            return Ok(());
        }
        _ => {}
    }
    match b.len() {
        8 => {
            let v = recdata::sint(b).unwrap_or(0).wrapping_div(normal as i64);
            out.push(b' ');
            cformat::fmt_signed(out, &Spec::width(16), v);
        }
        4 | 2 | 1 => {
            let (w, v) = match b.len() {
                4 => (8, recdata::uint(b).unwrap_or(0) as u32 / normal as u32),
                2 => (5, recdata::uint(b).unwrap_or(0) as u32 / normal as u32),
                _ => (3, recdata::uint(b).unwrap_or(0) as u32 / normal as u32),
            };
            out.push(b' ');
            cformat::fmt_signed(out, &Spec::width(w), v as i32 as i64);
        }
        _ => bytes::print_bytes(out, b, if packed { 16 } else { -50 }, false, false),
    }
    Ok(())
}

fn key_recs(desc: &AggDesc) -> &[RecDesc] {
    &desc.recs[..desc.recs.len().saturating_sub(1)]
}

fn value_rec(desc: &AggDesc) -> Result<&RecDesc> {
    desc.recs.last().ok_or(ConsumerError::BadAggId(desc.aggid))
}

/// One row in the default layout: the keys, then each value, then a newline. Under
/// `aggpercpu` (`percpu`, one per value) each value is followed by every CPU's, each on a line of
/// its own after `    [CPU n]`.
pub fn print_row(
    out: &mut Vec<u8>,
    env: &FmtEnv<'_>,
    desc: &AggDesc,
    key: &[u8],
    values: &[(&RecDesc, &[u8], u64)],
    percpu: &[Option<CpuValues>],
) -> Result<()> {
    print_keys(out, env, desc, key, false)?;
    for (i, (r, v, normal)) in values.iter().enumerate() {
        print_datum(out, env, r, v, *normal, false)?;
        for (cpu, cv) in percpu.get(i).into_iter().flatten().flatten() {
            out.extend_from_slice(format!("\n    [CPU {cpu}]").as_bytes());
            print_datum(out, env, r, cv, *normal, false)?;
        }
    }
    out.push(b'\n');
    Ok(())
}

fn print_keys(
    out: &mut Vec<u8>,
    env: &FmtEnv<'_>,
    desc: &AggDesc,
    key: &[u8],
    packed: bool,
) -> Result<()> {
    for r in key_recs(desc) {
        let b = recdata::slice(key, r.offset as usize, r.size as usize)?;
        print_datum(out, env, r, b, 1, packed)?;
    }
    Ok(())
}

/// `printa(@a)` without a format, and the end-of-run print of one aggregation: sorted rows.
pub fn print_aggregation(
    out: &mut Vec<u8>,
    env: &FmtEnv<'_>,
    aggs: &Aggregations,
    varid: u32,
    order: SortOrder,
) -> Result<()> {
    let Some(desc) = aggs.desc_for_var(varid) else {
        return Ok(());
    };
    let vrec = *value_rec(desc)?;
    let normal = aggs.normal(varid);
    let entries: Vec<AggEntry> = aggs
        .sorted(order)
        .into_iter()
        .filter(|e| e.varid == varid)
        .collect();
    if entries.is_empty() {
        return Ok(());
    }
    if env.agghist && print_hist(out, env, desc, &entries, vrec.action, normal)? {
        return Ok(());
    }
    if env.aggpack && print_packed(out, env, desc, &entries, vrec.action)? {
        return Ok(());
    }
    for e in &entries {
        let d = aggs.desc_of(e).unwrap_or(desc);
        let percpu = [aggs.percpu_values(varid, &e.key)];
        print_row(out, env, d, &e.key, &[(&vrec, &e.value, normal)], &percpu)?;
    }
    Ok(())
}

/// `agghist`: one histogram over the entries, when the function is one it applies to.
fn print_hist(
    out: &mut Vec<u8>,
    env: &FmtEnv<'_>,
    desc: &AggDesc,
    entries: &[AggEntry],
    action: ActionKind,
    normal: u64,
) -> Result<bool> {
    let mut values = Vec::with_capacity(entries.len());
    for e in entries {
        match aggdisplay::hist_value(action, &e.value)? {
            Some(v) => values.push(v),
            None => return Ok(false),
        }
    }
    let (total, signs) = aggdisplay::hist_totals(&values, env.style.zoom);
    aggdisplay::hist_header(out, aggdisplay::keys_width(key_recs(desc)));
    for (e, &v) in entries.iter().zip(&values) {
        print_keys(out, env, desc, &e.key, true)?;
        aggdisplay::hist_line(out, v, normal, total, signs, &env.style);
    }
    Ok(true)
}

/// `aggpack`: one packed line per entry, when the function is `quantize()` or `lquantize()`.
fn print_packed(
    out: &mut Vec<u8>,
    env: &FmtEnv<'_>,
    desc: &AggDesc,
    entries: &[AggEntry],
    action: ActionKind,
) -> Result<bool> {
    let width = aggdisplay::keys_width(key_recs(desc));
    match action {
        ActionKind::AggQuantize => {
            let (minbin, maxbin) =
                aggdisplay::quantize_minmax(entries.iter().map(|e| e.value.as_slice()));
            aggdisplay::quantize_packed_header(out, width, minbin, maxbin);
            for e in entries {
                print_keys(out, env, desc, &e.key, true)?;
                aggdisplay::print_quantize_packed(out, &e.value, minbin, maxbin, &env.style)?;
            }
        }
        ActionKind::AggLquantize => {
            let levels = (entries[0].value.len() / 8).saturating_sub(3);
            aggdisplay::lquantize_packed_header(out, width, levels);
            for e in entries {
                print_keys(out, env, desc, &e.key, true)?;
                aggdisplay::print_lquantize_packed(out, &e.value, &env.style)?;
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// A key with the value of each joined aggregation (zero where an aggregation lacks the key).
pub struct JoinedRow {
    /// Key bytes.
    pub key: Vec<u8>,
    /// The aggregation id whose description lays the key out.
    pub aggid: u32,
    /// Value bytes per aggregation, in the order asked for.
    pub values: Vec<Vec<u8>>,
}

/// Joins several aggregations by key and sorts the rows (`dtrace_aggregate_walk_joined`): by the value
/// of the aggregation at `sortpos`, then by key; by key first with `aggsortkey`.
pub fn joined_rows(
    aggs: &Aggregations,
    varids: &[u32],
    order: SortOrder,
    sortpos: usize,
) -> Vec<JoinedRow> {
    let per: Vec<Vec<AggEntry>> = varids.iter().map(|&v| aggs.entries_of(v)).collect();
    let keys: BTreeMap<Vec<u8>, u32> = per
        .iter()
        .flatten()
        .map(|e| (e.key.clone(), e.aggid))
        .collect();
    let mut rows: Vec<JoinedRow> = keys
        .into_iter()
        .map(|(k, aggid)| {
            let values = per
                .iter()
                .zip(varids)
                .map(|(ents, &v)| match ents.iter().find(|e| e.key == k) {
                    Some(e) => e.value.clone(),
                    None => zero_like(aggs, v, ents),
                })
                .collect();
            JoinedRow {
                key: k,
                aggid,
                values,
            }
        })
        .collect();
    let pos = sortpos.min(varids.len().saturating_sub(1));
    let desc = varids.first().and_then(|&v| aggs.desc_for_var(v));
    let action = varids
        .get(pos)
        .and_then(|&v| aggs.action_of(v))
        .unwrap_or(ActionKind::AggSum);
    rows.sort_by(|a, b| {
        let key = || Aggregations::key_cmp(desc, order.keypos, &a.key, &b.key);
        let val = || match (a.values.get(pos), b.values.get(pos)) {
            (Some(x), Some(y)) => Aggregations::value_cmp(action, x, y),
            _ => std::cmp::Ordering::Equal,
        };
        let c = if order.by_key {
            key().then_with(val)
        } else {
            val().then_with(key)
        };
        if order.reverse {
            c.reverse()
        } else {
            c
        }
    });
    rows
}

fn zero_like(aggs: &Aggregations, varid: u32, ents: &[AggEntry]) -> Vec<u8> {
    let rec = aggs.desc_for_var(varid).and_then(|d| d.recs.last());
    let size = rec.map(|r| r.size as usize).unwrap_or(8);
    let mut z = vec![0u8; size];
    if matches!(
        aggs.action_of(varid),
        Some(ActionKind::AggLquantize | ActionKind::AggLlquantize)
    ) && z.len() >= 8
    {
        // the encoded parameters: an entry's, or the record's when the aggregation has none
        match (ents.first(), rec) {
            (Some(e), _) if e.value.len() >= 8 => z[..8].copy_from_slice(&e.value[..8]),
            (_, Some(r)) => z[..8].copy_from_slice(&r.arg.to_ne_bytes()),
            _ => {}
        }
    }
    z
}

/// `printa(@a, @b, ...)` without a format: joined rows in the default layout.
pub fn print_joined(
    out: &mut Vec<u8>,
    env: &FmtEnv<'_>,
    aggs: &Aggregations,
    varids: &[u32],
    order: SortOrder,
    sortpos: usize,
) -> Result<()> {
    let Some(desc) = varids.first().and_then(|&v| aggs.desc_for_var(v)) else {
        return Ok(());
    };
    let mut vrecs = Vec::new();
    for &v in varids {
        let d = aggs.desc_for_var(v).ok_or(ConsumerError::BadAggId(v))?;
        vrecs.push((*value_rec(d)?, aggs.normal(v)));
    }
    for row in joined_rows(aggs, varids, order, sortpos) {
        let vals: Vec<(&RecDesc, &[u8], u64)> = vrecs
            .iter()
            .zip(&row.values)
            .map(|((r, n), v)| (r, v.as_slice(), *n))
            .collect();
        let percpu: Vec<_> = varids
            .iter()
            .map(|&v| aggs.percpu_values(v, &row.key))
            .collect();
        print_row(
            out,
            env,
            aggs.desc(row.aggid).unwrap_or(desc),
            &row.key,
            &vals,
            &percpu,
        )?;
    }
    Ok(())
}

/// `printa(fmt, @a, ...)`: the format once per (joined) row, keys feeding the plain conversions and
/// the aggregation values feeding `%@` conversions.
pub fn print_formatted(
    out: &mut Vec<u8>,
    env: &FmtEnv<'_>,
    aggs: &Aggregations,
    fmt: &PrintfFormat,
    varids: &[u32],
    order: SortOrder,
    sortpos: usize,
) -> Result<()> {
    let Some(desc) = varids.first().and_then(|&v| aggs.desc_for_var(v)) else {
        return Ok(());
    };
    let mut actions = Vec::new();
    for &v in varids {
        actions.push((
            aggs.action_of(v).ok_or(ConsumerError::BadAggId(v))?,
            aggs.normal(v),
        ));
    }
    let keys = key_recs(desc);
    for row in joined_rows(aggs, varids, order, sortpos) {
        let vals: Vec<AggValue<'_>> = actions
            .iter()
            .zip(&row.values)
            .map(|((a, n), v)| AggValue {
                action: *a,
                data: v,
                normal: *n,
            })
            .collect();
        let keys = aggs.desc(row.aggid).map_or(keys, key_recs);
        fmt.format(out, env, keys, &row.key, &vals)?;
    }
    Ok(())
}
