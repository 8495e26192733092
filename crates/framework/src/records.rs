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
//! Faults are reported in the principal buffer as records with EPID [`FAULT_EPID`].

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
    /// Index of the ECB (clause) in the program it came from.
    pub ecb_index: u32,
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

/// The EPID of fault records: when DIF faults in probe context the framework writes, into the firing
/// CPU's principal buffer, a record with this EPID (laid out by [`fault_eprobe_desc`]) carrying what
/// `dtrace: error on enabled probe ID ...` prints, in order with the other records.
pub const FAULT_EPID: u32 = u32::MAX;

/// The DIF offset in a fault record when the fault did not happen in DIF (DTrace's -1).
pub const FAULT_NO_OFFSET: u64 = u64::MAX;

/// Layout of fault records: after the 12-byte header (EPID [`FAULT_EPID`], timestamp) and 4 bytes of
/// padding, five u64s as the ERROR probe's `arg1`..`arg5`: the faulting EPID, the action index (0 for
/// the predicate, N for action #N), the DIF offset ([`FAULT_NO_OFFSET`] when not in DIF), the fault kind
/// (`DTRACEFLT_*`, `dtrace_dif::vm::FaultKind::code`) and the faulting address. The probe id is that of
/// `dtrace:::ERROR` (3).
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
        ecb_index: u32::MAX,
        size: 56,
        recs: (0..5).map(rec).collect(),
    }
}

/// One fault decoded from a fault record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultRecord {
    /// EPID of the enabled probe whose clause faulted.
    pub epid: u32,
    /// 0 for the predicate, N for action #N.
    pub action: u64,
    /// Byte offset of the faulting DIF instruction, or [`FAULT_NO_OFFSET`].
    pub dif_offset: u64,
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
            self.epid as u64,
            self.action,
            self.dif_offset,
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
            epid: word(16)? as u32,
            action: word(24)?,
            dif_offset: word(32)?,
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
