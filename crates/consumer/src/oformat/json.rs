//! `-x oformat=json`: every probe firing, aggregation, drop and error as one JSON document per
//! line, in the names FreeBSD's DTrace gives them in its libxo output (`dtrace -x oformat=json`):
//!
//! - a firing: `{"timestamp", "cpu", "id", "provider", "module", "function", "name", "output": [...]}`
//!   where each record of the clause is one object in `output`: `{"value": 42}` or `{"value":
//!   "str"}` for `trace()`, `{"message": "text"}` for `printf()` followed by a `{"value": ..}` per
//!   argument (as FreeBSD's, one placeholder value when there are none), `{"stack-frames": [{"symbol",
//!   "module", "name", "offset"}, ...]}` (`ustack-frames`, `jstack-frames`) for stacks,
//!   `{"sym": ..}` (`usym`, `mod`, `umod`, `uaddr`) for symbols, `{"print": text}`,
//!   `{"tracemem": text}`, and the aggregations a `printa()` printed;
//! - an aggregation: `{"aggregation-name": "x", "aggregation-data": [{"keys": [...], "count": 3}]}`
//!   with the function's name holding a scalar value, or `"buckets": [{"value": 64, "count": 17}]`
//!   for `quantize()`, `lquantize()` and `llquantize()` (the rows DTrace's graph prints; the `< base`
//!   bucket has `"underflow": true`);
//! - drops and errors: pseudo-probes `dtrace:INTERNAL:INTERNAL:DROP` and `...:ERROR` with `count`,
//!   `kind` and `msg` (drops) or `epid`, `action`, `offset`, `fault`, `addr` and `msg` (errors).
//!
//! Probe timestamps are the records' (the `timestamp` clock, nanoseconds); those of drops and errors
//! are the wall clock when they were reported, in nanoseconds since the epoch.

use std::collections::BTreeMap;

use dtrace_dif::program::{split_libact_arg, ActionKind, RecDesc};
use serde_json::{json, Map, Value};

use crate::aggregate::{AggEntry, Aggregations, SortOrder};
use crate::consume::{ConsumeAction, ProbeData};
use crate::error::Result;
use crate::oformat::{buckets, datum_text, function_name, int_value, is_stack, key_recs};
use crate::oformat::{scalar_value, stack_frames};
use crate::printf::FmtEnv;
use crate::recdata;
use crate::status::{DropKind, DropReport, ErrorReport};

/// The probe and record callbacks of JSON output (the counterpart of
/// [`crate::consume::DefaultOutput`]): the library formats each record as usual, and the text it
/// printed becomes that record's object in the firing's `output` list; at the end of a firing the
/// whole document is written as one line.
#[derive(Debug, Default)]
pub struct JsonOutput {
    items: Vec<Value>,
    cur: Option<RecDesc>,
    mark: usize,
}

impl JsonOutput {
    /// The per-probe callback.
    #[allow(clippy::ptr_arg)] // the callback type of `ProbeFn` takes the library's Vec
    pub fn probe(&mut self, _pd: &ProbeData<'_>, out: &mut Vec<u8>) -> ConsumeAction {
        self.items.clear();
        self.cur = None;
        self.mark = out.len();
        ConsumeAction::This
    }

    /// The per-record callback.
    pub fn record(
        &mut self,
        pd: &ProbeData<'_>,
        rec: Option<&RecDesc>,
        out: &mut Vec<u8>,
    ) -> ConsumeAction {
        self.finish_record(pd, rec, out);
        match rec {
            None => {
                let doc = probe_document(pd, std::mem::take(&mut self.items));
                push_line(out, &doc);
                self.mark = out.len();
                ConsumeAction::Next
            }
            Some(r) if matches!(r.action, ActionKind::Exit | ActionKind::Raise) => {
                ConsumeAction::Next
            }
            Some(r) => {
                self.cur = Some(*r);
                self.mark = out.len();
                ConsumeAction::This
            }
        }
    }

    /// Turns the text the library printed for the current record into its objects; `next` is the
    /// record the library hands over next (None: the firing's end), so the records in between are
    /// the ones the current action used (a `printf()`'s arguments).
    fn finish_record(&mut self, pd: &ProbeData<'_>, next: Option<&RecDesc>, out: &mut Vec<u8>) {
        let Some(r) = self.cur.take() else { return };
        // system(), freopen() and ftruncate() flush (and empty) the pending output.
        let mark = self.mark.min(out.len());
        let text = String::from_utf8_lossy(&out[mark..]).into_owned();
        out.truncate(mark);
        let bytes = recdata::slice(pd.data, r.offset as usize, r.size as usize).unwrap_or(&[]);
        self.items.extend(record_items(&r, bytes, &text));
        if r.action == ActionKind::Printf {
            // As FreeBSD's: each argument's value after the message, as trace() would record it.
            // The printf record itself holds the first (a placeholder when there is none).
            self.items.push(json!({ "value": data_value(bytes) }));
            for a in used_records(&pd.edesc.recs, &r, next) {
                if a.action == ActionKind::DifExpr {
                    let b = recdata::slice(pd.data, a.offset as usize, a.size as usize);
                    self.items
                        .push(json!({ "value": data_value(b.unwrap_or(&[])) }));
                }
            }
        }
    }
}

/// The records after `cur` and before `next` (or the end) in a firing's descriptions.
fn used_records<'a>(recs: &'a [RecDesc], cur: &RecDesc, next: Option<&RecDesc>) -> &'a [RecDesc] {
    let at = |x: &RecDesc| {
        recs.iter()
            .position(|r| r.offset == x.offset && r.action == x.action)
    };
    let Some(i) = at(cur) else { return &[] };
    let j = next.and_then(at).unwrap_or(recs.len()).max(i + 1);
    &recs[i + 1..j]
}

fn push_line(out: &mut Vec<u8>, doc: &Value) {
    // Serializing a Value cannot fail (its keys are strings).
    if let Ok(s) = serde_json::to_vec(doc) {
        out.extend_from_slice(&s);
        out.push(b'\n');
    }
}

fn probe_document(pd: &ProbeData<'_>, output: Vec<Value>) -> Value {
    let p = pd.pdesc;
    json!({
        "timestamp": pd.timestamp,
        "cpu": pd.cpu,
        "id": p.id,
        "provider": p.provider,
        "module": p.module,
        "function": p.function,
        "name": p.name,
        "output": output,
    })
}

/// A symbol as `{"symbol", "module", "name", "offset"}` (the parts DTrace's `module`name+0x1c`
/// text has; a bare address has only `symbol`).
fn frame(text: &str) -> Value {
    let mut m = Map::new();
    m.insert("symbol".into(), text.into());
    if let Some((module, rest)) = text.split_once('`') {
        m.insert("module".into(), module.into());
        let (name, offset) = match rest.rsplit_once('+') {
            Some((n, o)) if o.starts_with("0x") => (n, Some(o)),
            _ => (rest, None),
        };
        m.insert("name".into(), name.into());
        if let Some(o) = offset {
            m.insert("offset".into(), o.into());
        }
    }
    Value::Object(m)
}

fn frames_key(action: ActionKind) -> &'static str {
    match action {
        ActionKind::Ustack => "ustack-frames",
        ActionKind::Jstack => "jstack-frames",
        _ => "stack-frames",
    }
}

fn symbol_key(action: ActionKind) -> Option<&'static str> {
    Some(match action {
        ActionKind::Sym => "sym",
        ActionKind::Usym => "usym",
        ActionKind::Mod => "mod",
        ActionKind::Umod => "umod",
        ActionKind::Uaddr => "uaddr",
        _ => return None,
    })
}

/// By-reference data: a string when it looks like one (printable characters, then only NULs), else
/// the bytes as numbers.
fn bytes_value(b: &[u8]) -> Value {
    let s = recdata::cstr(b);
    let printable = |c: &u8| (0x20..0x7f).contains(c) || matches!(c, b'\t' | b'\n' | b'\r');
    if s.iter().all(printable) && b[s.len()..].iter().all(|&c| c == 0) && !s.is_empty() {
        return Value::String(String::from_utf8_lossy(s).into_owned());
    }
    Value::Array(b.iter().map(|&c| Value::from(c)).collect())
}

/// A data value: integers by their size, by-reference data as a string or bytes.
fn data_value(b: &[u8]) -> Value {
    match int_value(b) {
        Some(v) => Value::from(v),
        None => bytes_value(b),
    }
}

/// The objects one record contributes to a firing's `output`, from its bytes and the text the library
/// printed for it.
fn record_items(r: &RecDesc, bytes: &[u8], text: &str) -> Vec<Value> {
    match r.action {
        ActionKind::Printf => vec![json!({ "message": text })],
        ActionKind::Printa => {
            let parsed: Option<Vec<Value>> = text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str(l).ok())
                .collect();
            parsed.unwrap_or_else(|| vec![json!({ "printa": text })])
        }
        a if is_stack(a) => {
            let frames: Vec<Value> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(frame)
                .collect();
            vec![json!({ frames_key(a): frames })]
        }
        a if symbol_key(a).is_some() => {
            let t = text.trim();
            let mut item = match frame(t) {
                Value::Object(m) if a == ActionKind::Sym || a == ActionKind::Usym => m,
                _ => Map::new(),
            };
            item.remove("symbol");
            item.insert(symbol_key(a).unwrap_or("sym").into(), t.into());
            vec![Value::Object(item)]
        }
        ActionKind::Tracemem => vec![json!({ "tracemem": text.trim_matches('\n') })],
        ActionKind::LibAct if split_libact_arg(r.arg).0 == 7 => {
            vec![json!({ "print": text.trim_matches('\n') })]
        }
        ActionKind::System | ActionKind::Freopen | ActionKind::LibAct => Vec::new(),
        _ => vec![json!({ "value": data_value(bytes) })],
    }
}

/// A key of an aggregation entry: stacks as their frames, symbols as text, integers as numbers,
/// strings as strings.
fn key_value(env: &FmtEnv<'_>, rec: &RecDesc, b: &[u8]) -> Result<Value> {
    if is_stack(rec.action) {
        let frames: Vec<Value> = stack_frames(env, rec, b)?
            .iter()
            .map(|f| frame(f))
            .collect();
        return Ok(json!({ frames_key(rec.action): frames }));
    }
    if symbol_key(rec.action).is_some() {
        return Ok(Value::String(datum_text(env, rec, b)?));
    }
    Ok(data_value(b))
}

/// The rows of a distribution DTrace's graph prints: one bucket either side of the non-zero ones.
fn bucket_rows(action: ActionKind, b: &[u8], normal: u64) -> Result<Option<Vec<Value>>> {
    let Some(all) = buckets::buckets(action, b)? else {
        return Ok(None);
    };
    let nonzero: Vec<usize> = (0..all.len()).filter(|&i| all[i].count != 0).collect();
    let (Some(&first), Some(&last)) = (nonzero.first(), nonzero.last()) else {
        return Ok(Some(Vec::new()));
    };
    let (first, last) = (first.saturating_sub(1), (last + 1).min(all.len() - 1));
    let rows = all[first..=last]
        .iter()
        .map(|k| {
            let mut m = Map::new();
            m.insert("value".into(), k.value.into());
            m.insert(
                "count".into(),
                k.count.wrapping_div(normal.max(1) as i64).into(),
            );
            if k.underflow {
                m.insert("underflow".into(), true.into());
            }
            Value::Object(m)
        })
        .collect();
    Ok(Some(rows))
}

/// One entry of `aggregation-data`.
fn entry_value(env: &FmtEnv<'_>, aggs: &Aggregations, e: &AggEntry) -> Result<Value> {
    let mut m = Map::new();
    let Some(desc) = aggs.desc_of(e) else {
        return Ok(Value::Object(m));
    };
    let mut keys = Vec::new();
    for r in key_recs(desc) {
        let b = recdata::slice(&e.key, r.offset as usize, r.size as usize)?;
        keys.push(key_value(env, r, b)?);
    }
    m.insert("keys".into(), Value::Array(keys));
    let action = desc.recs.last().map_or(ActionKind::AggCount, |r| r.action);
    let normal = aggs.normal(e.varid);
    if let Some(rows) = bucket_rows(action, &e.value, normal)? {
        m.insert("buckets".into(), Value::Array(rows));
    } else if let Some(v) = scalar_value(action, &e.value, normal)? {
        m.insert(function_name(action).into(), v.into());
    }
    Ok(Value::Object(m))
}

/// One aggregation as `{"aggregation-name", "aggregation-data"}`, entries in DTrace's print order.
pub fn aggregation(
    env: &FmtEnv<'_>,
    aggs: &Aggregations,
    varid: u32,
    name: &str,
    order: SortOrder,
) -> Result<Value> {
    let mut data = Vec::new();
    for e in aggs.sorted(order).iter().filter(|e| e.varid == varid) {
        data.push(entry_value(env, aggs, e)?);
    }
    Ok(json!({ "aggregation-name": name, "aggregation-data": data }))
}

/// Writes each of `varids` as one line (by `printa()` and at the end of a run).
pub fn print_aggregations(
    out: &mut Vec<u8>,
    env: &FmtEnv<'_>,
    aggs: &Aggregations,
    names: &BTreeMap<u32, String>,
    varids: &[u32],
    order: SortOrder,
) -> Result<()> {
    for &v in varids {
        let name = names.get(&v).map_or("", String::as_str);
        push_line(out, &aggregation(env, aggs, v, name, order)?);
    }
    Ok(())
}

fn drop_kind_number(kind: DropKind) -> i64 {
    // dtrace_dropkind_t
    match kind {
        DropKind::Principal => 0,
        DropKind::Aggregation => 1,
        DropKind::Dynamic => 2,
        DropKind::DynamicRinse => 3,
        DropKind::DynamicDirty => 4,
        DropKind::Speculative => 5,
        DropKind::SpeculationBusy => 6,
        DropKind::SpeculationUnavailable => 7,
        DropKind::StackStringOverflow => 8,
        DropKind::DoubleError => 9,
    }
}

fn internal(name: &str, cpu: i64, wall_ns: u128) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("timestamp".into(), json!(wall_ns as u64));
    m.insert("cpu".into(), cpu.into());
    m.insert("id".into(), (-1).into());
    m.insert("provider".into(), "dtrace".into());
    m.insert("module".into(), "INTERNAL".into());
    m.insert("function".into(), "INTERNAL".into());
    m.insert("name".into(), name.into());
    m
}

/// A drop report as one line (`name` `DROP`); `wall_ns` is when it was reported.
pub fn drop_line(d: &DropReport, wall_ns: u128) -> String {
    let mut m = internal("DROP", d.cpu.map_or(-1, i64::from), wall_ns);
    m.insert("count".into(), d.drops.into());
    m.insert("kind".into(), drop_kind_number(d.kind).into());
    m.insert("msg".into(), d.msg.as_str().into());
    let mut out = Vec::new();
    push_line(&mut out, &Value::Object(m));
    String::from_utf8_lossy(&out).into_owned()
}

/// An error report as one line (`name` `ERROR`); `wall_ns` is when it was reported.
pub fn error_line(e: &ErrorReport, wall_ns: u128) -> String {
    let mut m = internal("ERROR", i64::from(e.cpu), wall_ns);
    m.insert("probe-id".into(), e.probe_id.into());
    m.insert("clause".into(), e.clause.into());
    m.insert("offset".into(), e.offset.into());
    m.insert("fault".into(), crate::status::fault_name(e.fault).into());
    m.insert("addr".into(), e.addr.into());
    m.insert("msg".into(), e.msg.trim_end().into());
    let mut out = Vec::new();
    push_line(&mut out, &Value::Object(m));
    String::from_utf8_lossy(&out).into_owned()
}
