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
