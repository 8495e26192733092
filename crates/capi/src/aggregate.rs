//! Aggregations (`dt_aggregate`): `dtrace_aggregate_snap`, `_print`, `_clear` and the walks, each
//! entry handed to the caller as a `dtrace_aggdata_t` whose data is laid out as DTrace's: the
//! aggregation id first (record 0 of its description), the keys from offset 8 (records 1 to
//! n-2), the value last, 8-byte aligned.

use std::ffi::{c_int, c_void};

use dtrace_consumer::aggregate::{AggEntry, SortOrder};

use crate::consume::Output;
use crate::ctypes::{
    AggDataC, AggregateFn, DTRACE_AGD_PRINTED, DTRACE_AGGWALK_ABORT, DTRACE_AGGWALK_CLEAR,
    DTRACE_AGGWALK_DENORMALIZE, DTRACE_AGGWALK_ERROR, DTRACE_AGGWALK_NEXT,
    DTRACE_AGGWALK_NORMALIZE, DTRACE_AGGWALK_REMOVE,
};
use crate::errno::{Edt, Fail};
use crate::ffi;
use crate::hdl::Hdl;

/// The order of a walk: the walkers' names without `dtrace_aggregate_walk_`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walk {
    /// `dtrace_aggregate_walk`: variables in id order, keys in byte order.
    Unsorted,
    /// `_sorted`: as the `aggsort*` options say (as printing does).
    Sorted,
    /// `_keysorted`/`_keyvarsorted` (reversed with `rev`).
    Key { rev: bool },
    /// `_valsorted`/`_valvarsorted` (reversed with `rev`).
    Val { rev: bool },
}

fn order_of(walk: Walk, options: SortOrder) -> Option<SortOrder> {
    match walk {
        Walk::Unsorted => None,
        Walk::Sorted => Some(options),
        Walk::Key { rev } => Some(SortOrder {
            by_key: true,
            reverse: rev,
            keypos: 0,
        }),
        Walk::Val { rev } => Some(SortOrder {
            by_key: false,
            reverse: rev,
            keypos: 0,
        }),
    }
}

/// `dtrace_aggregate_snap`.
pub fn snap(hdl: &Hdl) -> Result<c_int, Fail> {
    let mut inner = crate::consume::started(hdl)?;
    inner.h.aggregate_snap().map_err(Fail::from)?;
    Ok(0)
}

/// `dtrace_aggregate_clear`: zeroes every value, keeping the keys.
pub fn clear(hdl: &Hdl) -> Result<(), Fail> {
    let mut inner = hdl.inner()?;
    let aggs = &mut inner.h.decoder.aggs;
    for v in aggs.varids() {
        aggs.clear(v);
    }
    Ok(())
}

/// `dtrace_aggregate_print` in `walk`'s order (the default: as the options say).
pub fn print(hdl: &Hdl, fp: *mut libc::FILE, walk: Walk) -> Result<c_int, Fail> {
    let inner = hdl.inner()?;
    let d = &inner.h.decoder;
    let order = order_of(walk, d.sort_order()).unwrap_or_else(|| d.sort_order());
    let mut text = Vec::new();
    d.print_aggregations_in(&mut text, order)
        .map_err(Fail::from)?;
    let fail = std::cell::RefCell::new(None);
    let out = Output::new(hdl, &inner, fp, &fail);
    let mut w = &out;
    let r = std::io::Write::write_all(&mut w, &text).and_then(|_| std::io::Write::flush(&mut w));
    if r.is_err() {
        return Err(fail.borrow_mut().take().unwrap_or(Fail::code(libc::EIO)));
    }
    Ok(0)
}

/// One entry's data as DTrace lays it out, and the offset of its value.
fn entry_data(e: &AggEntry) -> (Vec<u8>, usize) {
    let mut data = Vec::with_capacity(16 + e.key.len() + e.value.len());
    data.extend_from_slice(&e.aggid.to_ne_bytes());
    data.resize(8, 0);
    data.extend_from_slice(&e.key);
    let value_at = data.len().next_multiple_of(8);
    data.resize(value_at, 0);
    data.extend_from_slice(&e.value);
    (data, value_at)
}

/// A walk: `f` gets every entry in `walk`'s order; its answer may clear or remove the entry,
/// stop the walk (`DTRACE_AGGWALK_ABORT` fails with `EDT_DIRABORT`, as in DTrace) or fail it.
pub fn walk(
    hdl: &Hdl,
    f: Option<AggregateFn>,
    arg: *mut c_void,
    walk: Walk,
) -> Result<c_int, Fail> {
    let f = f.ok_or(Fail::code(libc::EINVAL))?;
    let mut inner = hdl.inner()?;
    let d = &inner.h.decoder;
    let entries: Vec<AggEntry> = match order_of(walk, d.sort_order()) {
        Some(o) => d.aggs.sorted(o),
        None => d
            .aggs
            .varids()
            .into_iter()
            .flat_map(|v| d.aggs.entries_of(v))
            .collect(),
    };
    let handle = (hdl as *const Hdl).cast_mut().cast::<c_void>();
    for e in entries {
        let d = &inner.h.decoder;
        let Some(desc) = d.aggs.desc_of(&e).cloned() else {
            continue;
        };
        let (mut data, value_at) = entry_data(&e);
        let flags = if d.printed.contains(&e.varid) {
            DTRACE_AGD_PRINTED
        } else {
            0
        };
        let (aggdesc, edesc, pdesc) = {
            let mut c = hdl.descs.borrow_mut();
            let aggdesc = c.agg(&desc, value_at as u32, data.len() as u32, flags);
            let edesc = match d.eprobes.get(&desc.epid) {
                Some(ep) => c.eprobe(ep),
                None => c.eprobe_by_id(desc.epid),
            };
            let pdesc = match d
                .eprobes
                .get(&desc.epid)
                .and_then(|ep| d.probes.get(&ep.probe_id))
            {
                Some(p) => c.probe(p),
                None => std::ptr::null_mut(),
            };
            (aggdesc, edesc, pdesc)
        };
        let mut ad = AggDataC {
            handle,
            desc: aggdesc,
            edesc,
            pdesc,
            data: data.as_mut_ptr().cast(),
            normal: d.aggs.normal(e.varid),
            size: data.len(),
            delta: std::ptr::null_mut(),
            percpu: std::ptr::null_mut(),
            percpu_delta: std::ptr::null_mut(),
            total: 0,
            minbin: 0,
            maxbin: 0,
        };
        match ffi::call_agg(f, &mut ad, arg) {
            DTRACE_AGGWALK_NEXT => {}
            DTRACE_AGGWALK_CLEAR => inner.h.decoder.aggs.clear_entry(e.varid, &e.key),
            DTRACE_AGGWALK_REMOVE => inner.h.decoder.aggs.remove_entry(e.varid, &e.key),
            DTRACE_AGGWALK_ABORT => return Err(Fail::edt(Edt::DirAbort)),
            DTRACE_AGGWALK_ERROR => return Err(Fail::code(hdl.errno.get())),
            DTRACE_AGGWALK_NORMALIZE | DTRACE_AGGWALK_DENORMALIZE => {
                return Err(Fail::unsupported(
                    "normalizing single aggregation elements from a walk",
                ))
            }
            _ => return Err(Fail::edt(Edt::BadRval)),
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_data_puts_id_keys_and_aligned_value() {
        let e = AggEntry {
            varid: 1,
            aggid: 3,
            key: vec![b'a', b'b', 0],
            value: 7u64.to_ne_bytes().to_vec(),
        };
        let (data, at) = entry_data(&e);
        assert_eq!(at, 16);
        assert_eq!(&data[..4], &3u32.to_ne_bytes());
        assert_eq!(&data[8..11], b"ab\0");
        assert_eq!(&data[16..], &7u64.to_ne_bytes());
    }

    #[test]
    fn walkers_order_as_named() {
        let opts = SortOrder {
            by_key: true,
            reverse: true,
            keypos: 2,
        };
        assert_eq!(order_of(Walk::Unsorted, opts), None);
        assert_eq!(order_of(Walk::Sorted, opts), Some(opts));
        let v = order_of(Walk::Val { rev: true }, opts).unwrap();
        assert!(!v.by_key && v.reverse && v.keypos == 0);
        let k = order_of(Walk::Key { rev: false }, opts).unwrap();
        assert!(k.by_key && !k.reverse);
    }
}
