//! DTrace's run-time reports: drops (`12 drops on CPU 0`, `3 dynamic variable drops with non-empty
//! dirty list`, `1 speculative drop`, ...), the ERROR-probe message (`error on enabled probe ID 2 (ID 1:
//! dtrace:::BEGIN): invalid address (0x0) in action #1 at DIF offset 12`), fault names, and the status
//! counters the framework reports.

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
    /// EPID of the faulting enabling.
    pub epid: u32,
    /// Action number (0: the predicate).
    pub action: i32,
    /// DIF offset, or -1.
    pub offset: i32,
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
        1000 => "library-level fault",
        _ => "unknown fault",
    }
}

/// `N drops on CPU c` / `N aggregation drops on CPU c`.
pub fn cpu_drop_message(kind: DropKind, n: u64, cpu: u32) -> String {
    format!(
        "{n} {}drop{} on CPU {cpu}",
        if kind == DropKind::Aggregation {
            "aggregation "
        } else {
            ""
        },
        if n > 1 { "s" } else { "" }
    )
}

/// Reports for every status counter that grew between `old` and `new`.
pub fn status_drops(old: &StatusCounters, new: &StatusCounters) -> Vec<DropReport> {
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
                msg: format!("{d} {what}{}{tail}", if d > 1 { "s" } else { "" }),
            }
        })
        .collect()
}

/// Builds the ERROR-probe report with DTrace's message.
pub fn error_report(
    cpu: u32,
    epid: u32,
    probe: &ProbeInfo,
    action: i32,
    offset: i32,
    fault: i32,
    addr: u64,
) -> ErrorReport {
    let where_ = if action == 0 {
        "predicate".to_string()
    } else {
        format!("action #{action}")
    };
    let offinfo = if offset != -1 {
        format!(" at DIF offset {offset}")
    } else {
        String::new()
    };
    let details = match fault {
        1 | 2 | 9 => format!(" (0x{addr:x})"),
        _ => String::new(),
    };
    let msg = format!(
        "error on enabled probe ID {epid} (ID {}: {}:{}:{}:{}): {}{details} in {where_}{offinfo}\n",
        probe.id,
        probe.provider,
        probe.module,
        probe.function,
        probe.name,
        fault_name(fault)
    );
    ErrorReport {
        cpu,
        epid,
        action,
        offset,
        fault,
        addr,
        msg,
    }
}

/// A library-level fault in a probe's processing (`dt_handle_liberr`), e.g. a failed `setopt()`.
pub fn library_error(cpu: u32, epid: u32, probe: &ProbeInfo, fault: String) -> ErrorReport {
    ErrorReport {
        cpu,
        epid,
        action: -1,
        offset: -1,
        fault: 1000,
        addr: 0,
        msg: format!(
            "error on enabled probe ID {epid} (ID {}: {}:{}:{}:{}): {fault}\n",
            probe.id, probe.provider, probe.module, probe.function, probe.name
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_match_dtrace() {
        assert_eq!(
            cpu_drop_message(DropKind::Principal, 12, 0),
            "12 drops on CPU 0"
        );
        assert_eq!(
            cpu_drop_message(DropKind::Aggregation, 1, 3),
            "1 aggregation drop on CPU 3"
        );
        let new = StatusCounters {
            dyndrops_dirty: 5,
            specdrops: 1,
            ..Default::default()
        };
        let r = status_drops(&StatusCounters::default(), &new);
        let msgs: Vec<&str> = r.iter().map(|d| d.msg.as_str()).collect();
        assert_eq!(
            msgs,
            vec![
                "5 dynamic variable drops with non-empty dirty list",
                "1 speculative drop"
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
            error_report(0, 2, &p, 1, 12, 1, 0).msg,
            "error on enabled probe ID 2 (ID 1: dtrace:::BEGIN): invalid address (0x0) in action #1 at DIF offset 12\n"
        );
        assert_eq!(
            error_report(0, 3, &p, 0, -1, 4, 0).msg,
            "error on enabled probe ID 3 (ID 1: dtrace:::BEGIN): divide-by-zero in predicate\n"
        );
    }
}
