//! DTrace's run-time reports: drops (`12 drops on CPU 0`, `3 dynamic variable drops with non-empty
//! dirty list`, `1 speculative drop`, ...), the ERROR-probe message in DTrace for Linux's form (`error in
//! dt_clause_0 for probe ID 1 (dtrace:::BEGIN): invalid address (0x0) at BPF pc 3`), fault names, and the
//! status counters the framework reports.

use dtrace_framework::records::ProbeInfo;

/// What was dropped (`dtrace_dropkind_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropKind {
    /// Principal buffer records.
    Principal,
    /// Aggregation buffer records.
    Aggregation,
    /// Dynamic variables.
    Dynamic,
    /// Dynamic variables, rinsing list not empty.
    DynamicRinse,
    /// Dynamic variables, dirty list not empty.
    DynamicDirty,
    /// Speculative data.
    Speculative,
    /// Speculations failed, buffers busy.
    SpeculationBusy,
    /// Speculations failed, none available.
    SpeculationUnavailable,
    /// ustack()/jstack() string table overflow.
    StackStringOverflow,
    /// Errors in the ERROR probe's own enabling.
    DoubleError,
}

/// One drop report (`dtrace_dropdata_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropReport {
    /// CPU, when per-CPU.
    pub cpu: Option<u32>,
    /// Kind.
    pub kind: DropKind,
    /// How many since the last report.
    pub drops: u64,
    /// DTrace's message (without `dtrace: ` and newline).
    pub msg: String,
}

/// One ERROR-probe report (`dtrace_errdata_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorReport {
    /// CPU it happened on.
    pub cpu: u32,
    /// Id of the probe whose clause faulted.
    pub probe_id: u32,
    /// Statement id of the faulting clause (`dt_clause_N`), -1 when none.
    pub clause: i64,
    /// pc of the fault in the clause's code, or -1.
    pub offset: i64,
    /// Fault code (`DTRACEFLT_*`).
    pub fault: i32,
    /// Faulting address or value.
    pub addr: u64,
    /// DTrace's message, ending in a newline.
    pub msg: String,
}

/// Counters the framework reports through its status (`dtrace_status_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatusCounters {
    /// Dynamic variable drops.
    pub dyndrops: u64,
    /// ... with non-empty rinsing list.
    pub dyndrops_rinsing: u64,
    /// ... with non-empty dirty list.
    pub dyndrops_dirty: u64,
    /// Speculative drops.
    pub specdrops: u64,
    /// Failed speculations, busy.
    pub specdrops_busy: u64,
    /// Failed speculations, unavailable.
    pub specdrops_unavail: u64,
    /// Stack string table overflows.
    pub stkstroverflows: u64,
    /// Errors in the ERROR enabling.
    pub dblerrors: u64,
    /// The run was killed by the deadman.
    pub killed: bool,
    /// exit() has been called (tracing is draining).
    pub exited: bool,
}

/// DTrace's name of a fault code (`dtrace_faultstr`).
pub fn fault_name(code: i32) -> &'static str {
    match code {
        1 => "invalid address",
        2 => "invalid alignment",
        3 => "illegal operation",
        4 => "divide-by-zero",
        5 => "out of scratch space",
        6 => "invalid kernel access",
        7 => "invalid user access",
        8 => "tuple stack overflow",
        9 => "bad stack",
        10 => "invalid size",
        11 => "index out of bounds",
        1000 => "library-level fault",
        _ => "unknown fault",
    }
}

/// The tag `-x droptags` puts before a drop message (`dt_droptag`).
pub fn droptag(kind: DropKind) -> &'static str {
    match kind {
        DropKind::Principal => "DTRACEDROP_PRINCIPAL",
        DropKind::Aggregation => "DTRACEDROP_AGGREGATION",
        DropKind::Dynamic => "DTRACEDROP_DYNAMIC",
        DropKind::DynamicRinse => "DTRACEDROP_DYNRINSE",
        DropKind::DynamicDirty => "DTRACEDROP_DYNDIRTY",
        DropKind::Speculative => "DTRACEDROP_SPEC",
        DropKind::SpeculationBusy => "DTRACEDROP_SPECBUSY",
        DropKind::SpeculationUnavailable => "DTRACEDROP_SPECUNAVAIL",
        DropKind::StackStringOverflow => "DTRACEDROP_STKSTROVERFLOW",
        DropKind::DoubleError => "DTRACEDROP_DBLERROR",
    }
}

fn tag_prefix(kind: DropKind, tags: bool) -> String {
    if tags {
        format!("[{}] ", droptag(kind))
    } else {
        String::new()
    }
}

/// `N drops on CPU c` / `N aggregation drops on CPU c`, after `[DTRACEDROP_...] ` when `tags`
/// (`-x droptags`).
pub fn cpu_drop_message(kind: DropKind, n: u64, cpu: u32, tags: bool) -> String {
    format!(
        "{}{n} {}drop{} on CPU {cpu}",
        tag_prefix(kind, tags),
        if kind == DropKind::Aggregation {
            "aggregation "
        } else {
            ""
        },
        if n > 1 { "s" } else { "" }
    )
}

/// Reports for every status counter that grew between `old` and `new` (tagged when `tags`).
pub fn status_drops(old: &StatusCounters, new: &StatusCounters, tags: bool) -> Vec<DropReport> {
    let table: [(DropKind, u64, u64, &str, &str); 8] = [
        (
            DropKind::Dynamic,
            old.dyndrops,
            new.dyndrops,
            "dynamic variable drop",
            "",
        ),
        (
            DropKind::DynamicRinse,
            old.dyndrops_rinsing,
            new.dyndrops_rinsing,
            "dynamic variable drop",
            " with non-empty rinsing list",
        ),
        (
            DropKind::DynamicDirty,
            old.dyndrops_dirty,
            new.dyndrops_dirty,
            "dynamic variable drop",
            " with non-empty dirty list",
        ),
        (
            DropKind::Speculative,
            old.specdrops,
            new.specdrops,
            "speculative drop",
            "",
        ),
        (
            DropKind::SpeculationBusy,
            old.specdrops_busy,
            new.specdrops_busy,
            "failed speculation",
            " (available buffer(s) still busy)",
        ),
        (
            DropKind::SpeculationUnavailable,
            old.specdrops_unavail,
            new.specdrops_unavail,
            "failed speculation",
            " (no speculative buffer available)",
        ),
        (
            DropKind::StackStringOverflow,
            old.stkstroverflows,
            new.stkstroverflows,
            "jstack()/ustack() string table overflow",
            "",
        ),
        (
            DropKind::DoubleError,
            old.dblerrors,
            new.dblerrors,
            "error",
            " in ERROR probe enabling",
        ),
    ];
    table
        .iter()
        .filter(|(_, o, n, _, _)| n > o)
        .map(|&(kind, o, n, what, tail)| {
            let d = n - o;
            DropReport {
                cpu: None,
                kind,
                drops: d,
                msg: format!(
                    "{}{d} {what}{}{tail}",
                    tag_prefix(kind, tags),
                    if d > 1 { "s" } else { "" }
                ),
            }
        })
        .collect()
}

/// The name DTrace for Linux gives the code of statement `clause` (`dt_clause_N`).
pub fn clause_name(clause: u32) -> String {
    format!("dt_clause_{clause}")
}

/// Builds the ERROR-probe report with DTrace for Linux's message (`dt_handle_err`): `error in
/// dt_clause_N for probe ID P (prov:mod:func:name): fault[ (detail)][ at BPF pc N]`. The detail is the
/// address for bad addresses (but not an unknown one, -1), alignments, stacks and sizes, the signed
/// index for an index out of bounds. The pc is that of the fault in the clause's code: the
/// instruction index in its DIF, which stands where DTrace for Linux's BPF program counter stands.
pub fn error_report(
    cpu: u32,
    probe: &ProbeInfo,
    clause: u32,
    offset: i64,
    fault: i32,
    addr: u64,
) -> ErrorReport {
    let offinfo = if offset != -1 {
        format!(" at BPF pc {offset}")
    } else {
        String::new()
    };
    let details = match fault {
        1 if addr as i64 == -1 => String::new(),
        1 | 2 | 9 | 10 => format!(" (0x{addr:x})"),
        11 => format!(" ({})", addr as i64),
        _ => String::new(),
    };
    let msg = format!(
        "error in {} for probe ID {} ({}:{}:{}:{}): {}{details}{offinfo}\n",
        clause_name(clause),
        probe.id,
        probe.provider,
        probe.module,
        probe.function,
        probe.name,
        fault_name(fault)
    );
    ErrorReport {
        cpu,
        probe_id: probe.id,
        clause: clause as i64,
        offset,
        fault,
        addr,
        msg,
    }
}

/// A library-level fault in a probe's processing (`dt_handle_liberr`), e.g. a failed `setopt()`:
/// `error in dt_clause_N for probe ID P (prov:mod:func:name): <fault>`.
pub fn library_error(cpu: u32, clause: u32, probe: &ProbeInfo, fault: String) -> ErrorReport {
    ErrorReport {
        cpu,
        probe_id: probe.id,
        clause: -1,
        offset: -1,
        fault: 1000,
        addr: 0,
        msg: format!(
            "error in {} for probe ID {} ({}:{}:{}:{}): {fault}\n",
            clause_name(clause),
            probe.id,
            probe.provider,
            probe.module,
            probe.function,
            probe.name
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_match_dtrace() {
        assert_eq!(
            cpu_drop_message(DropKind::Principal, 12, 0, false),
            "12 drops on CPU 0"
        );
        assert_eq!(
            cpu_drop_message(DropKind::Principal, 1, 0, true),
            "[DTRACEDROP_PRINCIPAL] 1 drop on CPU 0"
        );
        assert_eq!(
            cpu_drop_message(DropKind::Aggregation, 1, 3, false),
            "1 aggregation drop on CPU 3"
        );
        let new = StatusCounters {
            dyndrops_dirty: 5,
            specdrops: 1,
            ..Default::default()
        };
        let r = status_drops(&StatusCounters::default(), &new, false);
        let msgs: Vec<&str> = r.iter().map(|d| d.msg.as_str()).collect();
        assert_eq!(
            msgs,
            vec![
                "5 dynamic variable drops with non-empty dirty list",
                "1 speculative drop"
            ]
        );
        let r = status_drops(&StatusCounters::default(), &new, true);
        let msgs: Vec<&str> = r.iter().map(|d| d.msg.as_str()).collect();
        assert_eq!(
            msgs,
            vec![
                "[DTRACEDROP_DYNDIRTY] 5 dynamic variable drops with non-empty dirty list",
                "[DTRACEDROP_SPEC] 1 speculative drop"
            ]
        );
        let p = ProbeInfo {
            id: 1,
            provider: "dtrace".into(),
            module: String::new(),
            function: String::new(),
            name: "BEGIN".into(),
        };
        assert_eq!(
            error_report(0, &p, 0, 12, 1, 0).msg,
            "error in dt_clause_0 for probe ID 1 (dtrace:::BEGIN): invalid address (0x0) at BPF pc 12\n"
        );
        assert_eq!(
            error_report(0, &p, 3, -1, 4, 0).msg,
            "error in dt_clause_3 for probe ID 1 (dtrace:::BEGIN): divide-by-zero\n"
        );
        // An unknown bad address shows no detail; an index out of bounds shows the signed index.
        assert_eq!(
            error_report(0, &p, 1, 7, 1, u64::MAX).msg,
            "error in dt_clause_1 for probe ID 1 (dtrace:::BEGIN): invalid address at BPF pc 7\n"
        );
        assert_eq!(
            error_report(0, &p, 0, 9, 11, 8).msg,
            "error in dt_clause_0 for probe ID 1 (dtrace:::BEGIN): index out of bounds (8) at BPF pc 9\n"
        );
        assert_eq!(
            error_report(0, &p, 0, 9, 10, 0x20).msg,
            "error in dt_clause_0 for probe ID 1 (dtrace:::BEGIN): invalid size (0x20) at BPF pc 9\n"
        );
        assert_eq!(
            library_error(0, 2, &p, "couldn't set option \"x\" to \"1\": Invalid option name".into()).msg,
            "error in dt_clause_2 for probe ID 1 (dtrace:::BEGIN): couldn't set option \"x\" to \"1\": Invalid option name\n"
        );
    }
}
