//! Builders for constructed trace data: enabled-probe descriptions laid out as the framework lays them
//! out, records in the principal-buffer format, aggregation descriptions and records.
#![allow(dead_code)]

use dtrace_dif::program::{ActionKind, RecDesc};
use dtrace_framework::records::{AggDesc, AggRecord, EprobeDesc, ProbeInfo, RECHDR_SIZE};

/// A record to lay out: action, size, format index + 1, arg.
pub type Spec = (ActionKind, u32, u16, u64);

fn layout(specs: &[Spec], start: u32) -> (Vec<RecDesc>, u32) {
    let mut off = start;
    let mut recs = Vec::new();
    for &(action, size, format, arg) in specs {
        let align = if size >= 8 || size == 0 {
            8
        } else {
            size.next_power_of_two().min(8)
        };
        off = off.div_ceil(align) * align;
        recs.push(RecDesc {
            action,
            size,
            offset: off,
            alignment: align as u16,
            format,
            arg,
        });
        off += size;
    }
    (recs, off)
}

/// An enabled probe description with records laid out after the 12-byte header.
pub fn eprobe(epid: u32, probe_id: u32, specs: &[Spec]) -> EprobeDesc {
    let (recs, end) = layout(specs, RECHDR_SIZE);
    EprobeDesc {
        epid,
        probe_id,
        clause: epid,
        size: end.div_ceil(8) * 8,
        recs,
    }
}

/// One principal-buffer record for `ed` with the given data per record.
pub fn record(ed: &EprobeDesc, values: &[Vec<u8>]) -> Vec<u8> {
    let mut b = vec![0u8; ed.size as usize];
    b[..4].copy_from_slice(&ed.epid.to_ne_bytes());
    for (r, v) in ed.recs.iter().zip(values) {
        let o = r.offset as usize;
        let n = v.len().min(r.size as usize);
        b[o..o + n].copy_from_slice(&v[..n]);
    }
    b
}

/// A probe.
pub fn probe(id: u32, p: &str, m: &str, f: &str, n: &str) -> ProbeInfo {
    ProbeInfo {
        id,
        provider: p.into(),
        module: m.into(),
        function: f.into(),
        name: n.into(),
    }
}

/// Integer bytes.
pub fn i64b(v: i64) -> Vec<u8> {
    v.to_ne_bytes().to_vec()
}
/// Integer bytes.
pub fn i32b(v: i32) -> Vec<u8> {
    v.to_ne_bytes().to_vec()
}
/// A string padded with NULs to `size`.
pub fn strb(s: &str, size: usize) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.resize(size, 0);
    v
}
/// Several i64 values as bytes.
pub fn words(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

/// An aggregation description: key records then the value record.
pub fn aggdesc(aggid: u32, varid: u32, keys: &[Spec], value: Spec) -> AggDesc {
    let mut all: Vec<Spec> = keys.to_vec();
    all.push(value);
    let (recs, _) = layout(&all, 0);
    AggDesc {
        aggid,
        varid,
        epid: 1,
        recs,
    }
}

/// Key bytes laid out for `d`.
pub fn aggkey(d: &AggDesc, keys: &[Vec<u8>]) -> Vec<u8> {
    let n = d.recs.len() - 1;
    let end = if n == 0 {
        0
    } else {
        (d.recs[n - 1].offset + d.recs[n - 1].size) as usize
    };
    let mut b = vec![0u8; end];
    for (r, v) in d.recs[..n].iter().zip(keys) {
        let o = r.offset as usize;
        let k = v.len().min(r.size as usize);
        b[o..o + k].copy_from_slice(&v[..k]);
    }
    b
}

/// One aggregation record.
pub fn aggrec(d: &AggDesc, keys: &[Vec<u8>], value: Vec<u8>) -> AggRecord {
    AggRecord {
        aggid: d.aggid,
        key: aggkey(d, keys),
        value,
        cpu: 0,
    }
}
