//! `-x oformat=folded`: aggregations as folded stacks, the input of Brendan Gregg's
//! `flamegraph.pl`, `inferno-flamegraph` and speedscope: one line per entry, its frames root first
//! separated by `;`, a space, then the value. Each key is a frame in key order; a `stack()`,
//! `ustack()` or `jstack()` key expands into its frames, outermost caller first (DTrace prints them
//! leaf first). Scalar functions give their value; distributions the number of values they counted.
//! Frames never contain `;` or line breaks (replaced by `:` and a space); entries whose value is
//! not positive, or that have no frames, are left out (flame graphs cannot draw them).

use dtrace_dif::program::ActionKind;

use crate::aggregate::{AggEntry, Aggregations, SortOrder};
use crate::error::Result;
use crate::oformat::{buckets, datum_text, is_stack, key_recs, scalar_value, stack_frames};
use crate::printf::FmtEnv;
use crate::recdata;

/// Whether an aggregation variable has a stack among its keys.
pub fn has_stack_key(aggs: &Aggregations, varid: u32) -> bool {
    aggs.desc_for_var(varid)
        .is_some_and(|d| key_recs(d).iter().any(|r| is_stack(r.action)))
}

fn clean(frame: &str) -> String {
    frame.replace(';', ":").replace(['\n', '\r'], " ")
}

/// The folded line of one entry, if it has frames and a positive value.
fn entry_line(env: &FmtEnv<'_>, aggs: &Aggregations, e: &AggEntry) -> Result<Option<String>> {
    let Some(desc) = aggs.desc_of(e) else {
        return Ok(None);
    };
    let mut frames = Vec::new();
    for r in key_recs(desc) {
        let b = recdata::slice(&e.key, r.offset as usize, r.size as usize)?;
        if is_stack(r.action) {
            let mut f = stack_frames(env, r, b)?;
            f.reverse();
            frames.extend(f.iter().map(|s| clean(s)));
        } else {
            let t = datum_text(env, r, b)?;
            if !t.is_empty() {
                frames.push(clean(&t));
            }
        }
    }
    let action = desc.recs.last().map_or(ActionKind::AggCount, |r| r.action);
    let normal = aggs.normal(e.varid);
    let value = match buckets::buckets(action, &e.value)? {
        Some(bs) => bs
            .iter()
            .fold(0i64, |t, b| t.wrapping_add(b.count))
            .wrapping_div(normal.max(1) as i64),
        None => scalar_value(action, &e.value, normal)?.unwrap_or(0),
    };
    if frames.is_empty() || value <= 0 {
        return Ok(None);
    }
    Ok(Some(format!("{} {value}", frames.join(";"))))
}

/// The folded lines of one aggregation, in DTrace's print order.
pub fn lines(
    env: &FmtEnv<'_>,
    aggs: &Aggregations,
    varid: u32,
    order: SortOrder,
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for e in aggs.sorted(order).iter().filter(|e| e.varid == varid) {
        if let Some(l) = entry_line(env, aggs, e)? {
            out.push(l);
        }
    }
    Ok(out)
}

/// Writes the folded lines of each of `varids`.
pub fn print_aggregations(
    out: &mut Vec<u8>,
    env: &FmtEnv<'_>,
    aggs: &Aggregations,
    varids: &[u32],
    order: SortOrder,
) -> Result<()> {
    for &v in varids {
        for l in lines(env, aggs, v, order)? {
            out.extend_from_slice(l.as_bytes());
            out.push(b'\n');
        }
    }
    Ok(())
}
