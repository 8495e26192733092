//! The aggregations in the OpenMetrics text format (what `-x metrics=ADDR:PORT` serves at
//! `/metrics` for Prometheus): one metric family per aggregation, named `dtrace_` and the
//! aggregation's name (`dtrace` alone for the anonymous `@`); `count()` and `sum()` as counters
//! (samples `..._total`), `min()`, `max()`, `avg()` and `stddev()` as gauges, `quantize()`,
//! `lquantize()` and `llquantize()` as histograms whose `le` bounds are the highest value each of
//! DTrace's buckets holds (cumulative counts, `+Inf` last, then `_count`). Keys become the labels
//! `key0`, `key1`, ... (stacks as their frames root first joined by `;`), escaped as the format
//! requires (`\\`, `\"`, `\n`). The text ends with `# EOF`.

use std::collections::BTreeMap;
use std::fmt::Write;

use dtrace_dif::program::ActionKind;

use crate::aggregate::{AggEntry, Aggregations, SortOrder};
use crate::error::Result;
use crate::oformat::stack_frames;
use crate::oformat::{buckets, datum_text, function_name, is_stack, key_recs, scalar_value};
use crate::printf::FmtEnv;
use crate::recdata;

/// The content type of the text [`render`] produces.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A metric family name for aggregation `name` (`[a-zA-Z_:][a-zA-Z0-9_:]*`; D identifiers already
/// are, anything else becomes `_`).
pub fn metric_name(name: &str) -> String {
    let mut s = String::from("dtrace");
    if !name.is_empty() {
        s.push('_');
        s.extend(name.chars().map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        }));
    }
    s
}

/// Escapes a label value (`\\`, `\"`, `\n`).
pub fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

fn labels(env: &FmtEnv<'_>, aggs: &Aggregations, e: &AggEntry) -> Result<Vec<(String, String)>> {
    let Some(desc) = aggs.desc_of(e) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (i, r) in key_recs(desc).iter().enumerate() {
        let b = recdata::slice(&e.key, r.offset as usize, r.size as usize)?;
        let v = if is_stack(r.action) {
            let mut f = stack_frames(env, r, b)?;
            f.reverse();
            f.join(";")
        } else {
            datum_text(env, r, b)?
        };
        out.push((format!("key{i}"), v));
    }
    Ok(out)
}

fn label_text(labels: &[(String, String)], extra: Option<(&str, &str)>) -> String {
    let all: Vec<String> = labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .chain(extra)
        .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
        .collect();
    if all.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", all.join(","))
    }
}

/// Renders every aggregation of `aggs` (names from `names`, by variable id).
pub fn render(
    env: &FmtEnv<'_>,
    aggs: &Aggregations,
    names: &BTreeMap<u32, String>,
) -> Result<String> {
    let mut s = String::new();
    let order = SortOrder {
        by_key: true,
        ..Default::default()
    };
    let sorted = aggs.sorted(order);
    let mut seen = std::collections::HashSet::new();
    for varid in aggs.varids() {
        let Some(action) = aggs.action_of(varid) else {
            continue;
        };
        let name = names.get(&varid).map_or("", String::as_str);
        let mut family = metric_name(name);
        if !seen.insert(family.clone()) {
            family = format!("{family}_{varid}");
        }
        let kind = match action {
            ActionKind::AggCount | ActionKind::AggSum => "counter",
            ActionKind::AggQuantize | ActionKind::AggLquantize | ActionKind::AggLlquantize => {
                "histogram"
            }
            _ => "gauge",
        };
        let _ = writeln!(s, "# TYPE {family} {kind}");
        let _ = writeln!(
            s,
            "# HELP {family} DTrace aggregation @{name} ({}())",
            function_name(action)
        );
        let normal = aggs.normal(varid);
        for e in sorted.iter().filter(|e| e.varid == varid) {
            let l = labels(env, aggs, e)?;
            match buckets::buckets(action, &e.value)? {
                Some(bs) => {
                    let mut cum: i64 = 0;
                    for b in &bs {
                        cum = cum.saturating_add(b.count.wrapping_div(normal.max(1) as i64));
                        let le = b.upper.map_or("+Inf".to_string(), |u| u.to_string());
                        let _ = writeln!(
                            s,
                            "{family}_bucket{} {cum}",
                            label_text(&l, Some(("le", &le)))
                        );
                    }
                    let _ = writeln!(s, "{family}_count{} {cum}", label_text(&l, None));
                }
                None => {
                    let v = scalar_value(action, &e.value, normal)?.unwrap_or(0);
                    let suffix = if kind == "counter" { "_total" } else { "" };
                    let _ = writeln!(s, "{family}{suffix}{} {v}", label_text(&l, None));
                }
            }
        }
    }
    s.push_str("# EOF\n");
    Ok(s)
}
