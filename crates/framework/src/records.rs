//! The record format between the framework and the consumer (spec ch.5): what a principal buffer and an
//! aggregation snapshot contain, and the metadata (per EPID and per aggregation) that decodes them.
//!
//! Principal buffer: a sequence of records, each starting on an 8-byte boundary with a 12-byte header
//! (`dtrace_rechdr_t`: EPID as native-endian u32, then the timestamp's high and low 32-bit halves), followed
//! by the data records laid out by the [`EprobeDesc`]'s `recs` (offsets count from the header's start).
//! The total length of one record is `EprobeDesc::size`.
//!
//! Aggregation data: per CPU, per aggregation, per distinct key, one [`AggRecord`]: the key bytes laid out
//! by the [`AggDesc`]'s key records and the value bytes in DTrace's layout for the aggregating function
//! (count/sum/min/max: one i64; avg: count, sum; stddev: count, sum, sum of squares as a 128-bit value in two
//! u64 (low first); quantize: 127 i64 buckets (`DTRACE_QUANTIZE_NBUCKETS`, zero bucket at index 63);
//! lquantize: the encoded arg u64 then levels+2 buckets; llquantize: the encoded arg u64 then its buckets).
//! The consumer merges CPUs by key bytes.
//!
//! Details of this implementation: records are padded to 8 bytes with zero bytes (the consumer skips
//! to the next 8-byte boundary after `EprobeDesc::size` bytes, and skips 4-byte [`EPID_NONE`] words);
//! key records of an aggregation start at offset 0 of [`AggRecord::key`], each at its natural alignment,
//! and the value record's offset is `key.len()` (the key bytes padded to 8); strings are NUL-padded to
//! their record size, so equal keys have equal bytes. Records of size 0 (`speculate()`, `commit()`,
//! `printf()` without arguments, ...) are listed in `EprobeDesc::recs` with the offset they would have.
//! Faults fire `dtrace:::ERROR` (arg1..arg5 as DTrace defines them), so a consumer enabling DTrace's ERROR
//! program sees them in order with the other records; on request (`Framework::set_fault_records`) they
//! are also written as records with EPID [`FAULT_EPID`].

pub use dtrace_dif::program::RecDesc;

/// Size of the record header that precedes an enabled probe's data.
pub const RECHDR_SIZE: u32 = 12;

/// The EPID that marks padding in a principal buffer (`DTRACE_EPIDNONE`).
pub const EPID_NONE: u32 = 0;

/// Metadata for one enabled probe (`dtrace_eprobedesc_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EprobeDesc {
    /// Enabled probe id.
    pub epid: u32,
    /// Id of the probe it enables.
    pub probe_id: u32,
    /// Statement id of the clause it runs (DTrace for Linux's `dt_clause_N`): clauses are numbered
    /// from 0 over every program enabled, one per probe description of a clause.
    pub clause: u32,
    /// Total size in bytes of one record, header included.
    pub size: u32,
    /// The data records, in action order.
    pub recs: Vec<RecDesc>,
}

/// A probe's identity (`dtrace_probedesc_t`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProbeInfo {
    /// Probe id.
    pub id: u32,
    /// Provider name.
    pub provider: String,
    /// Module name.
    pub module: String,
    /// Function name.
    pub function: String,
    /// Probe name.
    pub name: String,
}

/// Metadata for one aggregation (`dtrace_aggdesc_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggDesc {
    /// Aggregation id in the framework.
    pub aggid: u32,
    /// The program's aggregation variable id (`Program::aggregations[..].id`).
    pub varid: u32,
    /// The EPID of the enabling that updates it.
    pub epid: u32,
    /// Key records (offsets from the start of the key bytes), then the value record last.
    pub recs: Vec<RecDesc>,
}

/// One aggregation entry from one CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggRecord {
    /// Which aggregation.
    pub aggid: u32,
    /// Key bytes.
    pub key: Vec<u8>,
    /// Value bytes in the aggregating function's layout.
    pub value: Vec<u8>,
    /// The CPU that aggregated it (the `aggpercpu` option prints each CPU's value).
    pub cpu: u32,
}

/// What one switch of one CPU's principal buffer yields.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BufferSnapshot {
    /// CPU number.
    pub cpu: u32,
    /// Records, as described above.
    pub data: Vec<u8>,
    /// Records dropped on this CPU since the last snapshot.
    pub drops: u64,
}

/// The EPID of fault records: when DIF faults in probe context and fault records are on, the framework
/// writes, into the firing CPU's principal buffer, a record with this EPID (laid out by [`fault_eprobe_desc`]) carrying what
/// `dtrace: error on enabled probe ID ...` prints, in order with the other records.
pub const FAULT_EPID: u32 = u32::MAX;

/// The pc in a fault record when the fault has no place in the clause's code (DTrace's -1).
pub const FAULT_NO_OFFSET: u64 = u64::MAX;

/// Layout of fault records: after the 12-byte header (EPID [`FAULT_EPID`], timestamp) and 4 bytes of
/// padding, five u64s as DTrace for Linux's ERROR probe's `arg1`..`arg5`: the id of the probe that
/// fired, the statement id of the faulting clause, the pc of the fault in the clause's code (its
/// predicate's and actions' DIF counted as one sequence of instructions; [`FAULT_NO_OFFSET`] when it has
/// none), the fault kind (`DTRACEFLT_*`, `dtrace_dif::vm::FaultKind::code`) and the faulting address or
/// value. The probe id is that of `dtrace:::ERROR` (3).
pub fn fault_eprobe_desc() -> EprobeDesc {
    let rec = |i: u32| RecDesc {
        action: dtrace_dif::program::ActionKind::DifExpr,
        size: 8,
        offset: 16 + 8 * i,
        alignment: 8,
        format: 0,
        arg: 0,
    };
    EprobeDesc {
        epid: FAULT_EPID,
        probe_id: 3,
        clause: u32::MAX,
        size: 56,
        recs: (0..5).map(rec).collect(),
    }
}

/// One fault decoded from a fault record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultRecord {
    /// Id of the probe whose clause faulted.
    pub probe: u32,
    /// Statement id of the faulting clause.
    pub clause: u32,
    /// Instruction of the fault in the clause's code, or [`FAULT_NO_OFFSET`].
    pub pc: u64,
    /// `DTRACEFLT_*` code.
    pub kind: u32,
    /// Faulting address or illegal value.
    pub addr: u64,
}

impl FaultRecord {
    /// Encodes the record (header included) with timestamp `ts`.
    pub fn encode(&self, ts: u64) -> [u8; 56] {
        let mut b = [0u8; 56];
        b[0..4].copy_from_slice(&FAULT_EPID.to_ne_bytes());
        b[4..8].copy_from_slice(&((ts >> 32) as u32).to_ne_bytes());
        b[8..12].copy_from_slice(&(ts as u32).to_ne_bytes());
        let vals = [
            self.probe as u64,
            self.clause as u64,
            self.pc,
            self.kind as u64,
            self.addr,
        ];
        for (i, v) in vals.iter().enumerate() {
            b[16 + 8 * i..24 + 8 * i].copy_from_slice(&v.to_ne_bytes());
        }
        b
    }

    /// Decodes a fault record (header included); `None` if it is not one or is short.
    pub fn decode(b: &[u8]) -> Option<FaultRecord> {
        let word = |o: usize| -> Option<u64> {
            Some(u64::from_ne_bytes(b.get(o..o + 8)?.try_into().ok()?))
        };
        if u32::from_ne_bytes(b.get(0..4)?.try_into().ok()?) != FAULT_EPID {
            return None;
        }
        Some(FaultRecord {
            probe: word(16)? as u32,
            clause: word(24)? as u32,
            pc: word(32)?,
            kind: word(40)? as u32,
            addr: word(48)?,
        })
    }
}

/// Reads a record header: EPID and timestamp; `None` when fewer than 12 bytes remain.
pub fn read_header(b: &[u8]) -> Option<(u32, u64)> {
    let w =
        |o: usize| -> Option<u32> { Some(u32::from_ne_bytes(b.get(o..o + 4)?.try_into().ok()?)) };
    Some((w(0)?, (w(4)? as u64) << 32 | w(8)? as u64))
}

/// Per-CPU aggregation data of one snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AggSnapshot {
    /// CPU number.
    pub cpu: u32,
    /// Entries aggregated on this CPU since the previous snapshot (snapshots drain, as DTrace's
    /// do: the consumer accumulates them with `dtrace_framework::aggregate::merge_value`).
    pub records: Vec<AggRecord>,
    /// New entries dropped on this CPU (aggregation buffer full) since the previous snapshot.
    pub drops: u64,
}

/// Errors walking the records of a principal buffer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// A record's EPID has no description.
    #[error("record at offset {offset} has unknown EPID {epid}")]
    UnknownEpid {
        /// Offset of the record.
        offset: usize,
        /// Its EPID.
        epid: u32,
    },
    /// A record runs past the end of the buffer.
    #[error("record at offset {offset} (EPID {epid}) is truncated")]
    Truncated {
        /// Offset of the record.
        offset: usize,
        /// Its EPID.
        epid: u32,
    },
}

/// Walks the records of a principal buffer: yields `(offset, epid, record bytes)` with the header
/// included, skipping [`EPID_NONE`] padding words, sizing [`FAULT_EPID`] records itself and others with
/// `size_of(epid)` (e.g. from the `EprobeDesc`s of the enabling). Stops at the first error.
pub struct RecordIter<'a, F> {
    data: &'a [u8],
    off: usize,
    size_of: F,
    failed: bool,
}

impl<'a, F: Fn(u32) -> Option<u32>> RecordIter<'a, F> {
    /// Walks `data`.
    pub fn new(data: &'a [u8], size_of: F) -> Self {
        RecordIter {
            data,
            off: 0,
            size_of,
            failed: false,
        }
    }
}

impl<'a, F: Fn(u32) -> Option<u32>> Iterator for RecordIter<'a, F> {
    type Item = Result<(usize, u32, &'a [u8]), RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        loop {
            let rest = self.data.get(self.off..)?;
            if rest.len() < 4 {
                return None;
            }
            let epid = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]);
            if epid == EPID_NONE {
                self.off += 4;
                continue;
            }
            let offset = self.off;
            let size = if epid == FAULT_EPID {
                Some(56)
            } else {
                (self.size_of)(epid)
            };
            let Some(size) = size.filter(|&s| s >= RECHDR_SIZE) else {
                self.failed = true;
                return Some(Err(RecordError::UnknownEpid { offset, epid }));
            };
            let Some(rec) = rest.get(..size as usize) else {
                self.failed = true;
                return Some(Err(RecordError::Truncated { offset, epid }));
            };
            self.off += (size as usize).next_multiple_of(8);
            return Some(Ok((offset, epid, rec)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_records_padding_and_faults() {
        let mut buf = Vec::new();
        let mut rec = vec![0u8; 20];
        rec[..4].copy_from_slice(&7u32.to_ne_bytes());
        buf.extend_from_slice(&rec);
        buf.extend_from_slice(&[0; 4]); // to 24
        buf.extend_from_slice(&[0; 4]); // an EPID_NONE word
        buf.extend_from_slice(&[0; 4]);
        let f = FaultRecord {
            probe: 7,
            clause: 1,
            pc: 12,
            kind: 1,
            addr: 0,
        };
        buf.extend_from_slice(&f.encode(99));
        let got: Vec<_> = RecordIter::new(&buf, |e| (e == 7).then_some(20)).collect();
        assert_eq!(got.len(), 2);
        let (off, epid, bytes) = got[0].clone().unwrap();
        assert_eq!((off, epid, bytes.len()), (0, 7, 20));
        let (off, epid, bytes) = got[1].clone().unwrap();
        assert_eq!((off, epid), (32, FAULT_EPID));
        assert_eq!(FaultRecord::decode(bytes), Some(f));
        assert_eq!(read_header(bytes), Some((FAULT_EPID, 99)));

        let got: Vec<_> = RecordIter::new(&buf, |_| None).collect();
        assert_eq!(
            got,
            vec![Err(RecordError::UnknownEpid { offset: 0, epid: 7 })]
        );
        let got: Vec<_> = RecordIter::new(&buf[..16], |_| Some(20)).collect();
        assert_eq!(
            got,
            vec![Err(RecordError::Truncated { offset: 0, epid: 7 })]
        );
        assert_eq!(fault_eprobe_desc().size, 56);
    }
}
