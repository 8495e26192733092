//! The C structures and constants of `dtrace.h`, laid out as the header declares them
//! (`#[repr(C)]`, DTrace's field names in the comments), and their construction from the Rust
//! consumer's descriptions.

use std::ffi::{c_char, c_int, c_void};

use dtrace_dif::program::RecDesc;
use dtrace_framework::records::ProbeInfo;

/// `DTRACE_VERSION`.
pub const DTRACE_VERSION: c_int = 3;

/// `DTRACE_O_NODEV`.
pub const DTRACE_O_NODEV: c_int = 0x01;
/// `DTRACE_O_NOSYS`.
pub const DTRACE_O_NOSYS: c_int = 0x02;
/// `DTRACE_O_LP64`.
pub const DTRACE_O_LP64: c_int = 0x04;
/// `DTRACE_O_ILP32`.
pub const DTRACE_O_ILP32: c_int = 0x08;
/// `DTRACE_O_MASK`.
pub const DTRACE_O_MASK: c_int = 0x0f;

/// `DTRACE_C_DIFV`.
pub const DTRACE_C_DIFV: u32 = 0x0001;
/// `DTRACE_C_EMPTY`.
pub const DTRACE_C_EMPTY: u32 = 0x0002;
/// `DTRACE_C_ZDEFS`.
pub const DTRACE_C_ZDEFS: u32 = 0x0004;
/// `DTRACE_C_EATTR`.
pub const DTRACE_C_EATTR: u32 = 0x0008;
/// `DTRACE_C_CPP`.
pub const DTRACE_C_CPP: u32 = 0x0010;
/// `DTRACE_C_ETAGS`.
pub const DTRACE_C_ETAGS: u32 = 0x0100;
/// `DTRACE_C_DEFARG`.
pub const DTRACE_C_DEFARG: u32 = 0x0800;
/// `DTRACE_C_CTL`.
pub const DTRACE_C_CTL: u32 = 0x2000;
/// `DTRACE_C_MASK`.
pub const DTRACE_C_MASK: u32 = 0x3bff;

/// `DTRACE_PROBESPEC_NONE` .. `DTRACE_PROBESPEC_NAME`.
pub const DTRACE_PROBESPEC_NONE: c_int = -1;
/// `DTRACE_PROBESPEC_PROVIDER`.
pub const DTRACE_PROBESPEC_PROVIDER: c_int = 0;
/// `DTRACE_PROBESPEC_MOD`.
pub const DTRACE_PROBESPEC_MOD: c_int = 1;
/// `DTRACE_PROBESPEC_FUNC`.
pub const DTRACE_PROBESPEC_FUNC: c_int = 2;
/// `DTRACE_PROBESPEC_NAME`.
pub const DTRACE_PROBESPEC_NAME: c_int = 3;

/// `DTRACE_CONSUME_ERROR`.
pub const DTRACE_CONSUME_ERROR: c_int = -1;
/// `DTRACE_CONSUME_THIS`.
pub const DTRACE_CONSUME_THIS: c_int = 0;
/// `DTRACE_CONSUME_NEXT`.
pub const DTRACE_CONSUME_NEXT: c_int = 1;
/// `DTRACE_CONSUME_ABORT`.
pub const DTRACE_CONSUME_ABORT: c_int = 2;

/// `DTRACE_STATUS_NONE`.
pub const DTRACE_STATUS_NONE: c_int = 0;
/// `DTRACE_STATUS_OKAY`.
pub const DTRACE_STATUS_OKAY: c_int = 1;
/// `DTRACE_STATUS_EXITED`.
pub const DTRACE_STATUS_EXITED: c_int = 2;
/// `DTRACE_STATUS_STOPPED`.
pub const DTRACE_STATUS_STOPPED: c_int = 4;

/// `DTRACE_WORKSTATUS_ERROR`.
pub const DTRACE_WORKSTATUS_ERROR: c_int = -1;
/// `DTRACE_WORKSTATUS_OKAY`.
pub const DTRACE_WORKSTATUS_OKAY: c_int = 0;
/// `DTRACE_WORKSTATUS_DONE`.
pub const DTRACE_WORKSTATUS_DONE: c_int = 1;

/// `DTRACE_HANDLE_OK`.
pub const DTRACE_HANDLE_OK: c_int = 0;

/// `DTRACE_AGGWALK_ERROR`.
pub const DTRACE_AGGWALK_ERROR: c_int = -1;
/// `DTRACE_AGGWALK_NEXT`.
pub const DTRACE_AGGWALK_NEXT: c_int = 0;
/// `DTRACE_AGGWALK_ABORT`.
pub const DTRACE_AGGWALK_ABORT: c_int = 1;
/// `DTRACE_AGGWALK_CLEAR`.
pub const DTRACE_AGGWALK_CLEAR: c_int = 2;
/// `DTRACE_AGGWALK_NORMALIZE`.
pub const DTRACE_AGGWALK_NORMALIZE: c_int = 3;
/// `DTRACE_AGGWALK_DENORMALIZE`.
pub const DTRACE_AGGWALK_DENORMALIZE: c_int = 4;
/// `DTRACE_AGGWALK_REMOVE`.
pub const DTRACE_AGGWALK_REMOVE: c_int = 5;

/// `DTRACE_AGD_PRINTED`.
pub const DTRACE_AGD_PRINTED: c_int = 0x1;
/// `DTRACE_CPUALL`.
pub const DTRACE_CPUALL: c_int = -1;
/// `DTRACEACT_DIFEXPR`.
pub const DTRACEACT_DIFEXPR: u16 = 1;

/// `DTRACE_PROVNAMELEN`, `DTRACE_MODNAMELEN`, `DTRACE_FUNCNAMELEN`, `DTRACE_NAMELEN`.
pub const DTRACE_PROVNAMELEN: usize = 64;
/// `DTRACE_MODNAMELEN`.
pub const DTRACE_MODNAMELEN: usize = 64;
/// `DTRACE_FUNCNAMELEN`.
pub const DTRACE_FUNCNAMELEN: usize = 128;
/// `DTRACE_NAMELEN`.
pub const DTRACE_NAMELEN: usize = 64;

/// `dtrace_attribute_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attribute {
    /// `dtat_name`.
    pub name: u8,
    /// `dtat_data`.
    pub data: u8,
    /// `dtat_class`.
    pub class: u8,
}

impl From<dtrace_dif::attr::Attribute> for Attribute {
    fn from(a: dtrace_dif::attr::Attribute) -> Attribute {
        Attribute {
            name: a.name as u8,
            data: a.data as u8,
            class: a.class as u8,
        }
    }
}

/// `dtrace_proginfo_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProgInfo {
    /// `dpi_descattr`.
    pub descattr: Attribute,
    /// `dpi_stmtattr`.
    pub stmtattr: Attribute,
    /// `dpi_aggregates`.
    pub aggregates: u32,
    /// `dpi_recgens`.
    pub recgens: u32,
    /// `dpi_matches`.
    pub matches: u32,
    /// `dpi_speculations`.
    pub speculations: u32,
}

/// `dtrace_probedesc_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ProbeDescC {
    /// `dtpd_id`.
    pub id: u32,
    /// `dtpd_provider`.
    pub provider: [c_char; DTRACE_PROVNAMELEN],
    /// `dtpd_mod`.
    pub module: [c_char; DTRACE_MODNAMELEN],
    /// `dtpd_func`.
    pub func: [c_char; DTRACE_FUNCNAMELEN],
    /// `dtpd_name`.
    pub name: [c_char; DTRACE_NAMELEN],
}

/// Copies `s` into a NUL-terminated C array, cut to fit.
fn fill<const N: usize>(s: &str) -> [c_char; N] {
    let mut a = [0 as c_char; N];
    for (d, b) in a.iter_mut().zip(s.bytes().take(N - 1)) {
        *d = b as c_char;
    }
    a
}

impl From<&ProbeInfo> for ProbeDescC {
    fn from(p: &ProbeInfo) -> ProbeDescC {
        ProbeDescC {
            id: p.id,
            provider: fill(&p.provider),
            module: fill(&p.module),
            func: fill(&p.function),
            name: fill(&p.name),
        }
    }
}

/// `dtrace_recdesc_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecDescC {
    /// `dtrd_action`.
    pub action: u16,
    /// `dtrd_size`.
    pub size: u32,
    /// `dtrd_offset`.
    pub offset: u32,
    /// `dtrd_alignment`.
    pub alignment: u16,
    /// `dtrd_format`.
    pub format: u16,
    /// `dtrd_arg`.
    pub arg: u64,
    /// `dtrd_uarg`.
    pub uarg: u64,
}

impl RecDescC {
    /// The C form of `r`, its offset moved by `shift`.
    pub fn of(r: &RecDesc, shift: u32) -> RecDescC {
        RecDescC {
            action: r.action as u16,
            size: r.size,
            offset: r.offset.saturating_add(shift),
            alignment: r.alignment,
            format: r.format,
            arg: r.arg,
            uarg: 0,
        }
    }
}

/// The fixed part of `dtrace_eprobedesc_t` (its records follow, `dtepd_rec[]`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct EprobeDescHead {
    /// `dtepd_epid`.
    pub epid: u32,
    /// `dtepd_probeid`.
    pub probeid: u32,
    /// `dtepd_uarg`.
    pub uarg: u64,
    /// `dtepd_size`.
    pub size: u32,
    /// `dtepd_nrecs`.
    pub nrecs: c_int,
}

/// The fixed part of `dtrace_aggdesc_t` (its records follow, `dtagd_rec[]`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct AggDescHead {
    /// `dtagd_name`.
    pub name: *mut c_char,
    /// `dtagd_varid`.
    pub varid: i64,
    /// `dtagd_flags`.
    pub flags: c_int,
    /// `dtagd_id`.
    pub id: u32,
    /// `dtagd_epid`.
    pub epid: u32,
    /// `dtagd_size`.
    pub size: u32,
    /// `dtagd_nrecs`.
    pub nrecs: c_int,
    /// `dtagd_pad`.
    pub pad: u32,
}

/// `dtrace_probedata_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ProbeDataC {
    /// `dtpda_handle`.
    pub handle: *mut c_void,
    /// `dtpda_edesc`.
    pub edesc: *mut EprobeDescHead,
    /// `dtpda_pdesc`.
    pub pdesc: *mut ProbeDescC,
    /// `dtpda_cpu`.
    pub cpu: c_int,
    /// `dtpda_data`.
    pub data: *mut c_char,
    /// `dtpda_flow` (`DTRACEFLOW_ENTRY` 0, `_RETURN` 1, `_NONE` 2).
    pub flow: c_int,
    /// `dtpda_prefix`.
    pub prefix: *const c_char,
    /// `dtpda_indent`.
    pub indent: c_int,
}

/// `dtrace_errdata_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ErrDataC {
    /// `dteda_handle`.
    pub handle: *mut c_void,
    /// `dteda_edesc`.
    pub edesc: *mut EprobeDescHead,
    /// `dteda_pdesc`.
    pub pdesc: *mut ProbeDescC,
    /// `dteda_cpu`.
    pub cpu: c_int,
    /// `dteda_action`.
    pub action: c_int,
    /// `dteda_offset`.
    pub offset: c_int,
    /// `dteda_fault`.
    pub fault: c_int,
    /// `dteda_addr`.
    pub addr: u64,
    /// `dteda_msg`.
    pub msg: *const c_char,
}

/// `dtrace_dropdata_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DropDataC {
    /// `dtdda_handle`.
    pub handle: *mut c_void,
    /// `dtdda_cpu`.
    pub cpu: c_int,
    /// `dtdda_kind`.
    pub kind: c_int,
    /// `dtdda_drops`.
    pub drops: u64,
    /// `dtdda_total`.
    pub total: u64,
    /// `dtdda_msg`.
    pub msg: *const c_char,
}

/// `dtrace_bufdata_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct BufDataC {
    /// `dtbda_handle`.
    pub handle: *mut c_void,
    /// `dtbda_buffered`.
    pub buffered: *const c_char,
    /// `dtbda_probe`.
    pub probe: *mut ProbeDataC,
    /// `dtbda_recdesc`.
    pub recdesc: *const RecDescC,
    /// `dtbda_aggdata`.
    pub aggdata: *const AggDataC,
    /// `dtbda_flags`.
    pub flags: u32,
}

/// `dtrace_aggdata_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct AggDataC {
    /// `dtada_handle`.
    pub handle: *mut c_void,
    /// `dtada_desc`.
    pub desc: *mut AggDescHead,
    /// `dtada_edesc`.
    pub edesc: *mut EprobeDescHead,
    /// `dtada_pdesc`.
    pub pdesc: *mut ProbeDescC,
    /// `dtada_data`.
    pub data: *mut c_char,
    /// `dtada_normal`.
    pub normal: u64,
    /// `dtada_size`.
    pub size: usize,
    /// `dtada_delta`.
    pub delta: *mut c_char,
    /// `dtada_percpu`.
    pub percpu: *mut *mut c_char,
    /// `dtada_percpu_delta`.
    pub percpu_delta: *mut *mut c_char,
    /// `dtada_total`.
    pub total: i64,
    /// `dtada_minbin`.
    pub minbin: u16,
    /// `dtada_maxbin`.
    pub maxbin: u16,
}

/// `dtrace_consume_probe_f`.
pub type ConsumeProbeFn = unsafe extern "C" fn(*const ProbeDataC, *mut c_void) -> c_int;
/// `dtrace_consume_rec_f`.
pub type ConsumeRecFn =
    unsafe extern "C" fn(*const ProbeDataC, *const RecDescC, *mut c_void) -> c_int;
/// `dtrace_handle_err_f`.
pub type HandleErrFn = unsafe extern "C" fn(*const ErrDataC, *mut c_void) -> c_int;
/// `dtrace_handle_drop_f`.
pub type HandleDropFn = unsafe extern "C" fn(*const DropDataC, *mut c_void) -> c_int;
/// `dtrace_handle_buffered_f`.
pub type HandleBufferedFn = unsafe extern "C" fn(*const BufDataC, *mut c_void) -> c_int;
/// `dtrace_aggregate_f`.
pub type AggregateFn = unsafe extern "C" fn(*const AggDataC, *mut c_void) -> c_int;
/// `dtrace_aggregate_walk_f`.
pub type AggregateWalkFn =
    unsafe extern "C" fn(*mut c_void, Option<AggregateFn>, *mut c_void) -> c_int;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    /// The layouts `dtrace.h` declares on LP64.
    #[test]
    fn layouts_match_the_header() {
        assert_eq!(size_of::<RecDescC>(), 32);
        assert_eq!(offset_of!(RecDescC, size), 4);
        assert_eq!(offset_of!(RecDescC, alignment), 12);
        assert_eq!(offset_of!(RecDescC, format), 14);
        assert_eq!(offset_of!(RecDescC, arg), 16);
        assert_eq!(size_of::<EprobeDescHead>(), 24);
        assert_eq!(size_of::<AggDescHead>(), 40);
        assert_eq!(align_of::<RecDescC>(), 8);
        assert_eq!(size_of::<ProbeDescC>(), 4 + 64 + 64 + 128 + 64);
        assert_eq!(size_of::<ProbeDataC>(), 64);
        assert_eq!(offset_of!(ProbeDataC, data), 32);
        assert_eq!(size_of::<ProgInfo>(), 24);
        assert_eq!(offset_of!(ProgInfo, aggregates), 8);
        assert_eq!(size_of::<AggDataC>(), 96);
    }

    #[test]
    fn names_are_cut_to_fit_and_terminated() {
        let p = ProbeInfo {
            id: 7,
            provider: "p".repeat(100),
            module: "vmlinux".into(),
            function: "read".into(),
            name: "entry".into(),
        };
        let c = ProbeDescC::from(&p);
        assert_eq!(c.id, 7);
        assert_eq!(c.provider[62], b'p' as c_char);
        assert_eq!(c.provider[63], 0);
        assert_eq!(c.func[..5], [114, 101, 97, 100, 0].map(|b| b as c_char));
    }
}
