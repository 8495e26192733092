//! Uprobes through the uprobe PMU (`/sys/bus/event_source/devices/uprobe`): one perf event per
//! probe, opened for one process (the kernel places the breakpoint only in that process's memory)
//! with the capture program attached. A USDT probe's semaphore is given as the event's
//! `ref_ctr_offset`, so the kernel raises it while the probe is attached and lowers it when the
//! event is closed (also when `dtrace` dies): the traced process is never left with a breakpoint or a
//! raised semaphore.

use crate::attach::{attach_perf, open_perf_event_for, Attachment, ATTR_SIZE, PERF_ATTR_WORDS};
use crate::bpf::Program;
use crate::error::{LinuxError, Result};
use std::ffi::CString;
use std::sync::OnceLock;

const PMU: &str = "/sys/bus/event_source/devices/uprobe";
/// The kernel's internal `ENOTSUPP` (not in libc).
const ENOTSUPP: i32 = 524;
/// `attr.flags` bit `disabled`.
const FLAG_DISABLED: u64 = 1;

/// The uprobe PMU's type and the bit of `config` that makes a return probe (read once).
fn pmu() -> Result<(u32, u32)> {
    static PMU_INFO: OnceLock<Option<(u32, u32)>> = OnceLock::new();
    let info = PMU_INFO.get_or_init(|| {
        let typ = std::fs::read_to_string(format!("{PMU}/type")).ok()?;
        let ret = std::fs::read_to_string(format!("{PMU}/format/retprobe")).ok()?;
        let bit = ret.trim().strip_prefix("config:")?.parse().ok()?;
        Some((typ.trim().parse().ok()?, bit))
    });
    info.ok_or_else(|| LinuxError::Unavailable(format!("uprobes ({PMU} not readable)")))
}

/// Whether this kernel offers uprobes through perf.
pub fn available() -> bool {
    pmu().is_ok()
}

/// Where a uprobe goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UprobeSite<'a> {
    /// The object file.
    pub path: &'a str,
    /// File offset of the instruction (of the function, for a return probe).
    pub offset: u64,
    /// A uretprobe.
    pub retprobe: bool,
    /// The process.
    pub pid: u32,
    /// File offset of a USDT semaphore (0: none).
    pub ref_ctr_offset: u64,
}

/// Attaches `prog` (a kprobe-type program) at `site`. `what` names the probe for errors.
pub fn attach(prog: &Program, site: &UprobeSite<'_>, what: &str) -> Result<Attachment> {
    let (typ, ret_bit) = pmu()?;
    let path = CString::new(site.path)
        .map_err(|_| LinuxError::BadProbe(format!("{what}: object path has a NUL byte")))?;
    let pid = i32::try_from(site.pid).map_err(|_| LinuxError::NoProcess(site.pid))?;
    let mut attr = [0u64; PERF_ATTR_WORDS];
    attr[0] = u64::from(typ) | (u64::from(ATTR_SIZE) << 32);
    let mut config = 0u64;
    if site.retprobe {
        config |= 1u64 << ret_bit;
    }
    // The `ref_ctr_offset` format field is config:32-63.
    config |= site.ref_ctr_offset << 32;
    attr[1] = config;
    attr[2] = 1; // sample_period
    attr[5] = FLAG_DISABLED;
    attr[6] = 1; // wakeup_events
    attr[7] = path.as_ptr() as u64; // uprobe_path (config1)
    attr[8] = site.offset; // probe_offset (config2)
    let fd = open_perf_event_for(&mut attr, pid, -1, what).map_err(|e| match e {
        // ENOTSUPP: the kernel cannot single-step the instruction out of line.
        LinuxError::Sys { source, .. } if source.raw_os_error() == Some(ENOTSUPP) => {
            LinuxError::BadProbe(format!(
                "{what}: the instruction at offset 0x{:x} of {} cannot be traced by uprobes",
                site.offset, site.path
            ))
        }
        e => e,
    })?;
    drop(path);
    attach_perf(&fd, prog, what)?;
    Ok(Attachment::from_perf_fds(vec![fd]))
}
