//! The consumer's copy of the aggregations (`dt_aggregate`): per-CPU snapshot records merged by
//! aggregation variable and key with each function's rule (count/sum add, min/max keep the extreme,
//! avg/stddev add their parts, quantizations add buckets), DTrace's sort orders (by value then key, or
//! by key with `aggsortkey`, reversed by `aggsortrev`, key rotation by `aggsortkeypos`), and the
//! consumer-side actions `clear()`, `trunc()`, `normalize()` and `denormalize()`.
//!
//! Snapshots carry what accumulated since the previous snapshot (DTrace's semantics: the framework
//! resets its per-CPU aggregation buffers when it hands them over), so merging adds.
//!
//! With the `aggpercpu` option ([`Aggregations::set_percpu`]) each entry also keeps what every CPU
//! aggregated (`dtada_percpu`), which the default layout prints under the value, one line per CPU,
//! a CPU that never updated the entry showing the function's initial value ([`initial`]).

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use dtrace_dif::program::ActionKind;
use dtrace_framework::records::{AggDesc, AggRecord};

use crate::aggvalue;
use crate::error::{ConsumerError, Result};
use crate::quantize;
use crate::recdata;

/// Every CPU's value of one entry under `aggpercpu`, CPU by CPU.
pub type CpuValues = Vec<(u32, Vec<u8>)>;

/// One merged aggregation entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggEntry {
    /// Aggregation variable id (`AggDesc::varid`).
    pub varid: u32,
    /// The aggregation id whose description lays the key out (one variable may be fed by clauses
    /// with differently sized keys, such as `@[stack(2)]` and `@[stack(5)]`).
    pub aggid: u32,
    /// Key bytes (laid out by the description's key records).
    pub key: Vec<u8>,
    /// Value bytes in the function's layout.
    pub value: Vec<u8>,
}

/// How to order entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SortOrder {
    /// `aggsortkey`: by key first.
    pub by_key: bool,
    /// `aggsortrev`: reverse.
    pub reverse: bool,
    /// `aggsortkeypos`: the key position compared first.
    pub keypos: usize,
}

/// All aggregations a handle knows.
#[derive(Debug, Clone, Default)]
pub struct Aggregations {
    descs: HashMap<u32, AggDesc>,
    by_var: BTreeMap<u32, u32>,
    /// (variable, key) -> (aggregation id that laid the key out, value).
    entries: BTreeMap<(u32, Vec<u8>), (u32, Vec<u8>)>,
    normals: HashMap<u32, u64>,
    /// `aggpercpu`: the number of CPUs whose values are kept and printed.
    percpu: Option<u32>,
    /// (variable, key) -> CPU -> what that CPU aggregated (kept under `aggpercpu` only).
    cpu_values: BTreeMap<(u32, Vec<u8>), BTreeMap<u32, Vec<u8>>>,
}

fn merge_value(action: ActionKind, into: &mut [u8], from: &[u8]) {
    let n = into.len().min(from.len()) / 8;
    let get = |b: &[u8], i: usize| recdata::i64_at(b, i).unwrap_or(0);
    let put =
        |b: &mut [u8], i: usize, v: i64| b[i * 8..i * 8 + 8].copy_from_slice(&v.to_ne_bytes());
    match action {
        ActionKind::AggMin | ActionKind::AggMax if n >= 1 => {
            let (a, b) = (get(into, 0), get(from, 0));
            let v = if action == ActionKind::AggMin {
                a.min(b)
            } else {
                a.max(b)
            };
            put(into, 0, v);
        }
        ActionKind::AggStddev if n >= 4 => {
            for i in 0..2 {
                put(into, i, get(into, i).wrapping_add(get(from, i)));
            }
            let sq = |b: &[u8]| (get(b, 3) as u64 as u128) << 64 | get(b, 2) as u64 as u128;
            let s = sq(into).wrapping_add(sq(from));
            put(into, 2, s as u64 as i64);
            put(into, 3, (s >> 64) as u64 as i64);
        }
        ActionKind::AggLquantize | ActionKind::AggLlquantize => {
            for i in 1..n {
                put(into, i, get(into, i).wrapping_add(get(from, i)));
            }
        }
        _ => {
            for i in 0..n {
                put(into, i, get(into, i).wrapping_add(get(from, i)));
            }
        }
    }
}

/// The value a CPU that never updated an entry holds (DTrace's initial aggregation value):
/// `min()` starts at the largest 64-bit integer, `max()` at the smallest, the others at zero
/// (quantization parameters kept).
pub fn initial(action: ActionKind, v: &[u8]) -> Vec<u8> {
    let mut z = zeroed(action, v);
    let start = match action {
        ActionKind::AggMin => i64::MAX,
        ActionKind::AggMax => i64::MIN,
        _ => return z,
    };
    if let Some(w) = z.get_mut(..8) {
        w.copy_from_slice(&start.to_ne_bytes());
    }
    z
}

/// A zero value of the shape of `v` (quantization parameters kept).
fn zeroed(action: ActionKind, v: &[u8]) -> Vec<u8> {
    let mut z = vec![0u8; v.len()];
    if matches!(action, ActionKind::AggLquantize | ActionKind::AggLlquantize) && v.len() >= 8 {
        z[..8].copy_from_slice(&v[..8]);
    }
    z
}

impl Aggregations {
    /// `aggpercpu`: keeps (with `Some(ncpus)`) what each of `ncpus` CPUs aggregated, for
    /// [`Aggregations::percpu_values`].
    pub fn set_percpu(&mut self, ncpus: Option<u32>) {
        self.percpu = ncpus.map(|n| n.max(1));
    }

    /// Under `aggpercpu`, every CPU's value of one entry, CPU by CPU (the initial value where a
    /// CPU never updated it); `None` without the option.
    pub fn percpu_values(&self, varid: u32, key: &[u8]) -> Option<CpuValues> {
        let ncpus = self.percpu?;
        let (_, value) = self.entries.get(&(varid, key.to_vec()))?;
        let action = self.action_of(varid)?;
        let cpus = self.cpu_values.get(&(varid, key.to_vec()));
        Some(
            (0..ncpus)
                .map(|c| {
                    let v = cpus
                        .and_then(|m| m.get(&c))
                        .cloned()
                        .unwrap_or_else(|| initial(action, value));
                    (c, v)
                })
                .collect(),
        )
    }

    /// Records the description of an aggregation id.
    pub fn add_desc(&mut self, desc: AggDesc) {
        self.by_var.entry(desc.varid).or_insert(desc.aggid);
        self.descs.insert(desc.aggid, desc);
    }

    /// The description of an aggregation id.
    pub fn desc(&self, aggid: u32) -> Option<&AggDesc> {
        self.descs.get(&aggid)
    }

    /// The description laying out `e`'s key (the variable's first one if its own is unknown).
    pub fn desc_of(&self, e: &AggEntry) -> Option<&AggDesc> {
        self.desc(e.aggid).or_else(|| self.desc_for_var(e.varid))
    }

    /// The description used to lay out entries of a variable.
    pub fn desc_for_var(&self, varid: u32) -> Option<&AggDesc> {
        self.by_var.get(&varid).and_then(|a| self.descs.get(a))
    }

    /// The aggregating function of a variable.
    pub fn action_of(&self, varid: u32) -> Option<ActionKind> {
        self.desc_for_var(varid)
            .and_then(|d| d.recs.last())
            .map(|r| r.action)
    }

    /// Merges one snapshot's records after normalizing their address-like keys through `syms`
    /// ([`crate::symbols::normalize_key`]: every `sym()` address in one function is one key).
    pub fn merge_symbolized(
        &mut self,
        records: &[AggRecord],
        syms: &dyn crate::symbols::Symbolizer,
    ) -> Result<()> {
        let mut normalized: Option<Vec<AggRecord>> = None;
        for (i, r) in records.iter().enumerate() {
            let Some(desc) = self.descs.get(&r.aggid) else {
                continue;
            };
            let keys = &desc.recs[..desc.recs.len().saturating_sub(1)];
            for k in keys.iter().filter(|k| {
                matches!(
                    k.action,
                    ActionKind::Sym | ActionKind::Mod | ActionKind::Usym | ActionKind::Umod
                )
            }) {
                let recs = normalized.get_or_insert_with(|| records.to_vec());
                let (off, size) = (k.offset as usize, k.size as usize);
                if let Some(b) = off
                    .checked_add(size)
                    .and_then(|end| recs[i].key.get_mut(off..end))
                {
                    crate::symbols::normalize_key(syms, k.action, b);
                }
            }
        }
        self.merge(normalized.as_deref().unwrap_or(records))
    }

    /// Merges one snapshot's records (from any number of CPUs).
    pub fn merge(&mut self, records: &[AggRecord]) -> Result<()> {
        for r in records {
            let desc = self
                .descs
                .get(&r.aggid)
                .ok_or(ConsumerError::BadAggId(r.aggid))?;
            let action = desc
                .recs
                .last()
                .map(|x| x.action)
                .ok_or(ConsumerError::BadAggId(r.aggid))?;
            match self.entries.get_mut(&(desc.varid, r.key.clone())) {
                Some((_, v)) => merge_value(action, v, &r.value),
                None => {
                    self.entries
                        .insert((desc.varid, r.key.clone()), (r.aggid, r.value.clone()));
                }
            }
            if self.percpu.is_some() {
                let cpus = self
                    .cpu_values
                    .entry((desc.varid, r.key.clone()))
                    .or_default();
                match cpus.get_mut(&r.cpu) {
                    Some(v) => merge_value(action, v, &r.value),
                    None => {
                        cpus.insert(r.cpu, r.value.clone());
                    }
                }
            }
        }
        Ok(())
    }

    /// The normalization factor of a variable (1 when not normalized).
    pub fn normal(&self, varid: u32) -> u64 {
        self.normals.get(&varid).copied().unwrap_or(1).max(1)
    }

    /// `normalize(@a, n)`.
    pub fn normalize(&mut self, varid: u32, n: u64) {
        self.normals.insert(varid, n.max(1));
    }

    /// `denormalize(@a)`.
    pub fn denormalize(&mut self, varid: u32) {
        self.normals.remove(&varid);
    }

    /// `clear(@a)`: zero every value, keep the keys.
    pub fn clear(&mut self, varid: u32) {
        let Some(action) = self.action_of(varid) else {
            return;
        };
        for ((v, _), (_, val)) in self.entries.iter_mut() {
            if *v == varid {
                *val = zeroed(action, val);
            }
        }
        for ((v, _), cpus) in self.cpu_values.iter_mut() {
            if *v == varid {
                cpus.values_mut().for_each(|val| *val = zeroed(action, val));
            }
        }
    }

    /// `trunc(@a, n)`: keep the `n` largest entries (the `-n` smallest when negative).
    pub fn trunc(&mut self, varid: u32, n: i64) {
        let order = SortOrder {
            reverse: n >= 0,
            ..SortOrder::default()
        };
        let keep: Vec<Vec<u8>> = self
            .sorted(order)
            .into_iter()
            .filter(|e| e.varid == varid)
            .take(n.unsigned_abs() as usize)
            .map(|e| e.key)
            .collect();
        self.entries
            .retain(|(v, k), _| *v != varid || keep.contains(k));
        self.cpu_values
            .retain(|(v, k), _| *v != varid || keep.contains(k));
    }

    /// Zeroes one entry's value (`DTRACE_AGGWALK_CLEAR`).
    pub fn clear_entry(&mut self, varid: u32, key: &[u8]) {
        let Some(action) = self.action_of(varid) else {
            return;
        };
        if let Some((_, val)) = self.entries.get_mut(&(varid, key.to_vec())) {
            *val = zeroed(action, val);
        }
        if let Some(cpus) = self.cpu_values.get_mut(&(varid, key.to_vec())) {
            cpus.values_mut().for_each(|val| *val = zeroed(action, val));
        }
    }

    /// Forgets one entry (`DTRACE_AGGWALK_REMOVE`).
    pub fn remove_entry(&mut self, varid: u32, key: &[u8]) {
        self.entries.remove(&(varid, key.to_vec()));
        self.cpu_values.remove(&(varid, key.to_vec()));
    }

    /// Forgets every entry (used between runs).
    pub fn remove_all(&mut self) {
        self.entries.clear();
        self.cpu_values.clear();
    }

    /// Every entry of one variable (unsorted).
    pub fn entries_of(&self, varid: u32) -> Vec<AggEntry> {
        self.entries
            .iter()
            .filter(|((v, _), _)| *v == varid)
            .map(|((v, k), (a, val))| AggEntry {
                varid: *v,
                aggid: *a,
                key: k.clone(),
                value: val.clone(),
            })
            .collect()
    }

    /// The variables that have entries, in id order.
    pub fn varids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.entries.keys().map(|(v, _)| *v).collect();
        v.dedup();
        v
    }

    /// Compares two values of the same function as DTrace's sort does.
    pub fn value_cmp(action: ActionKind, a: &[u8], b: &[u8]) -> Ordering {
        let i = |x: &[u8]| recdata::i64_at(x, 0).unwrap_or(0);
        let f = |o: Option<Ordering>| o.unwrap_or(Ordering::Equal);
        match action {
            ActionKind::AggAvg => {
                let v = |x: &[u8]| {
                    let c = i(x);
                    if c == 0 {
                        0.0
                    } else {
                        recdata::i64_at(x, 1).unwrap_or(0) as f64 / c as f64
                    }
                };
                f(v(a).partial_cmp(&v(b)))
            }
            ActionKind::AggStddev => {
                let v = |x: &[u8]| aggvalue::stddev(x, 1).unwrap_or(0);
                v(a).cmp(&v(b))
            }
            ActionKind::AggQuantize | ActionKind::AggLquantize | ActionKind::AggLlquantize => {
                let k = |x: &[u8]| match action {
                    ActionKind::AggQuantize => quantize::quantize_sort_key(x),
                    ActionKind::AggLquantize => quantize::lquantize_sort_key(x),
                    _ => quantize::llquantize_sort_key(x),
                };
                let (ka, kb) = (k(a), k(b));
                ka.0.cmp(&kb.0).then(ka.1.cmp(&kb.1))
            }
            _ => i(a).cmp(&i(b)),
        }
    }

    /// Compares two keys record by record starting at `keypos` (`dt_aggregate_keycmp`).
    pub fn key_cmp(desc: Option<&AggDesc>, keypos: usize, a: &[u8], b: &[u8]) -> Ordering {
        let Some(desc) = desc else { return a.cmp(b) };
        let nkeys = desc.recs.len().saturating_sub(1);
        for j in 0..nkeys {
            let r = &desc.recs[(j + keypos) % nkeys];
            let (o, s) = (r.offset as usize, r.size as usize);
            let (Ok(x), Ok(y)) = (recdata::slice(a, o, s), recdata::slice(b, o, s)) else {
                return a.cmp(b);
            };
            let c = match (recdata::uint(x), recdata::uint(y)) {
                (Some(p), Some(q)) => p.cmp(&q),
                _ => x.cmp(y),
            };
            if c != Ordering::Equal {
                return c;
            }
        }
        Ordering::Equal
    }

    /// All entries in DTrace's print order for `order`.
    pub fn sorted(&self, order: SortOrder) -> Vec<AggEntry> {
        let mut all: Vec<AggEntry> = self
            .entries
            .iter()
            .map(|((v, k), (a, val))| AggEntry {
                varid: *v,
                aggid: *a,
                key: k.clone(),
                value: val.clone(),
            })
            .collect();
        all.sort_by(|x, y| {
            let var = x.varid.cmp(&y.varid);
            let key = || {
                // one layout (the same aggregating action, or another one of the same variable
                // with the same key records): compared key by key from `aggsortkeypos`
                let (dx, dy) = (self.desc_of(x), self.desc_of(y));
                let same_layout = x.aggid == y.aggid
                    || matches!((dx, dy), (Some(a), Some(b)) if a.recs.len() == b.recs.len()
                    && a.recs.iter().zip(&b.recs).rev().skip(1).all(|(p, q)| {
                        p.offset == q.offset && p.size == q.size
                    }));
                if same_layout {
                    Self::key_cmp(dx, order.keypos, &x.key, &y.key)
                } else {
                    // Keys laid out differently: the shorter layout first, then the bytes.
                    x.key
                        .len()
                        .cmp(&y.key.len())
                        .then_with(|| x.key.cmp(&y.key))
                }
            };
            let val = || {
                let act = self.action_of(x.varid).unwrap_or(ActionKind::AggSum);
                Self::value_cmp(act, &x.value, &y.value)
            };
            let c = if order.by_key {
                var.then_with(key).then_with(val)
            } else {
                var.then_with(val).then_with(key)
            };
            if order.reverse {
                c.reverse()
            } else {
                c
            }
        });
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dtrace_dif::program::RecDesc;

    fn desc(aggid: u32, varid: u32, action: ActionKind, vsize: u32) -> AggDesc {
        AggDesc {
            aggid,
            varid,
            epid: 1,
            recs: vec![
                RecDesc {
                    action: ActionKind::DifExpr,
                    size: 8,
                    offset: 0,
                    alignment: 8,
                    format: 0,
                    arg: 0,
                },
                RecDesc {
                    action,
                    size: vsize,
                    offset: 8,
                    alignment: 8,
                    format: 0,
                    arg: 0,
                },
            ],
        }
    }

    fn rec(aggid: u32, key: u64, vals: &[i64]) -> AggRecord {
        AggRecord {
            aggid,
            key: key.to_ne_bytes().to_vec(),
            value: vals.iter().flat_map(|v| v.to_ne_bytes()).collect(),
            cpu: 0,
        }
    }

    #[test]
    fn merges_cpus_and_sorts() {
        let mut a = Aggregations::default();
        a.add_desc(desc(1, 0, ActionKind::AggCount, 8));
        a.add_desc(desc(2, 1, ActionKind::AggMax, 8));
        a.merge(&[
            rec(1, 5, &[3]),
            rec(1, 6, &[1]),
            rec(1, 5, &[4]),
            rec(2, 1, &[9]),
        ])
        .unwrap();
        a.merge(&[rec(2, 1, &[2])]).unwrap();
        let s = a.sorted(SortOrder::default());
        let got: Vec<(u32, i64)> = s
            .iter()
            .map(|e| (e.varid, recdata::i64_at(&e.value, 0).unwrap()))
            .collect();
        assert_eq!(got, vec![(0, 1), (0, 7), (1, 9)]);
        let s = a.sorted(SortOrder {
            by_key: true,
            reverse: true,
            keypos: 0,
        });
        assert_eq!(s[0].varid, 1);
        assert!(a.merge(&[rec(9, 1, &[1])]).is_err());
    }

    #[test]
    fn aggpercpu_keeps_each_cpus_value_with_initial_values_elsewhere() {
        let on = |cpu: u32, r: AggRecord| AggRecord { cpu, ..r };
        let mut a = Aggregations::default();
        a.add_desc(desc(1, 0, ActionKind::AggMin, 8));
        a.add_desc(desc(2, 1, ActionKind::AggCount, 8));
        // Without the option nothing per CPU is kept.
        a.merge(&[on(1, rec(1, 5, &[3]))]).unwrap();
        assert_eq!(a.percpu_values(0, &5u64.to_ne_bytes()), None);
        a.remove_all();
        a.set_percpu(Some(3));
        a.merge(&[
            on(1, rec(1, 5, &[3])),
            on(2, rec(1, 5, &[-4])),
            on(1, rec(2, 6, &[2])),
        ])
        .unwrap();
        a.merge(&[on(1, rec(1, 5, &[1])), on(1, rec(2, 6, &[5]))])
            .unwrap();
        let cpus = |a: &Aggregations, var: u32, key: u64| -> Vec<(u32, i64)> {
            a.percpu_values(var, &key.to_ne_bytes())
                .unwrap()
                .iter()
                .map(|(c, v)| (*c, recdata::i64_at(v, 0).unwrap()))
                .collect()
        };
        assert_eq!(cpus(&a, 0, 5), vec![(0, i64::MAX), (1, 1), (2, -4)]);
        assert_eq!(cpus(&a, 1, 6), vec![(0, 0), (1, 7), (2, 0)]);
        // clear() zeroes every CPU's value; trunc() forgets them with the entry.
        a.clear(1);
        assert_eq!(cpus(&a, 1, 6), vec![(0, 0), (1, 0), (2, 0)]);
        a.trunc(0, 0);
        assert_eq!(a.percpu_values(0, &5u64.to_ne_bytes()), None);
        a.merge(&[on(0, rec(1, 5, &[8]))]).unwrap();
        assert_eq!(cpus(&a, 0, 5), vec![(0, 8), (1, i64::MAX), (2, i64::MAX)]);
    }

    #[test]
    fn aggsortkeypos_orders_entries_of_several_aggregating_actions() {
        // @[1, 3] = sum(0); @[2, 2] = sum(0); @[3, 1] = sum(0): three actions (aggregation ids)
        // of one variable with one key layout; equal values sort by key #2 under aggsortkeypos=1.
        let two_keys = |aggid: u32| {
            let mut d = desc(aggid, 0, ActionKind::AggSum, 8);
            let mut k2 = d.recs[0];
            k2.offset = 8;
            d.recs[1].offset = 16;
            d.recs.insert(1, k2);
            d
        };
        let mut a = Aggregations::default();
        for id in 1..=3 {
            a.add_desc(two_keys(id));
        }
        let key = |x: u64, y: u64| [x.to_ne_bytes(), y.to_ne_bytes()].concat();
        a.merge(&[
            AggRecord {
                aggid: 1,
                key: key(1, 3),
                value: 0i64.to_ne_bytes().to_vec(),
                cpu: 0,
            },
            AggRecord {
                aggid: 2,
                key: key(2, 2),
                value: 0i64.to_ne_bytes().to_vec(),
                cpu: 0,
            },
            AggRecord {
                aggid: 3,
                key: key(3, 1),
                value: 0i64.to_ne_bytes().to_vec(),
                cpu: 0,
            },
        ])
        .unwrap();
        let firsts = |keypos: usize| -> Vec<u64> {
            a.sorted(SortOrder {
                by_key: false,
                reverse: false,
                keypos,
            })
            .iter()
            .map(|e| recdata::u64_at(&e.key, 0).unwrap())
            .collect()
        };
        assert_eq!(firsts(0), vec![1, 2, 3]);
        assert_eq!(firsts(1), vec![3, 2, 1]);
    }

    #[test]
    fn single_entries_clear_and_go() {
        let mut a = Aggregations::default();
        a.add_desc(desc(1, 0, ActionKind::AggSum, 8));
        a.merge(&[rec(1, 1, &[10]), rec(1, 2, &[30])]).unwrap();
        a.clear_entry(0, &1u64.to_ne_bytes());
        a.remove_entry(0, &2u64.to_ne_bytes());
        a.remove_entry(0, &9u64.to_ne_bytes());
        let left: Vec<(Vec<u8>, i64)> = a
            .entries_of(0)
            .into_iter()
            .map(|e| (e.key, recdata::i64_at(&e.value, 0).unwrap()))
            .collect();
        assert_eq!(left, vec![(1u64.to_ne_bytes().to_vec(), 0)]);
    }

    #[test]
    fn clear_trunc_normalize() {
        let mut a = Aggregations::default();
        a.add_desc(desc(1, 0, ActionKind::AggSum, 8));
        a.merge(&[rec(1, 1, &[10]), rec(1, 2, &[30]), rec(1, 3, &[20])])
            .unwrap();
        a.trunc(0, 2);
        let keys: Vec<u64> = a
            .entries_of(0)
            .iter()
            .map(|e| recdata::u64_at(&e.key, 0).unwrap())
            .collect();
        assert_eq!(keys, vec![2, 3]);
        a.normalize(0, 10);
        assert_eq!(a.normal(0), 10);
        a.denormalize(0);
        assert_eq!(a.normal(0), 1);
        a.clear(0);
        assert!(a
            .entries_of(0)
            .iter()
            .all(|e| recdata::i64_at(&e.value, 0) == Some(0)));
        a.trunc(0, -1);
        assert_eq!(a.entries_of(0).len(), 1);
    }
}
