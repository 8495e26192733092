//! Uprobes through the uprobe PMU (`/sys/bus/event_source/devices/uprobe`): one perf event per
//! probe, opened for one process (the kernel places the breakpoint only in that process's memory)
//! with the capture program attached. A USDT probe's semaphore is given as the event's
//! `ref_ctr_offset`, so the kernel raises it while the probe is attached and lowers it when the
//! event is closed (also when `dtrace` dies): the traced process is never left with a breakpoint or a
//! raised semaphore.
//!
//! Where the kernel has uprobe-multi links (`BPF_TRACE_UPROBE_MULTI`, found by trying), every
//! probe of one object, process and kind (entry or return) is placed by ONE link instead
//! ([`attach_multi`]): closing a uprobe perf event waits for a grace period (~0.1 s) each, so
//! thousands of them took minutes to place and remove, while a link waits once. The link carries
//! each offset's semaphore and a cookie, which its program reads to pick the probe's capture
//! program (see `Session`).

use crate::attach::{attach_perf, open_perf_event_for, Attachment, ProbePmu};
use crate::bpf::sys::{self, attach_type, cmd, UprobeMultiAttr};
use crate::bpf::{ProgKind, Program};
use crate::error::{LinuxError, Result};
use std::ffi::CString;
use std::sync::OnceLock;

const PMU: &str = "/sys/bus/event_source/devices/uprobe";
/// The kernel's internal `ENOTSUPP` (not in libc).
const ENOTSUPP: i32 = 524;

/// The uprobe PMU (read once).
fn pmu() -> Result<ProbePmu> {
    static PMU_INFO: OnceLock<Option<ProbePmu>> = OnceLock::new();
    PMU_INFO
        .get_or_init(|| ProbePmu::read(PMU))
        .ok_or_else(|| LinuxError::Unavailable(format!("uprobes ({PMU} not readable)")))
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
    /// The process (0: every process that maps the file, see [`EVERY_PROCESS`]).
    pub pid: u32,
    /// File offset of a USDT semaphore (0: none).
    pub ref_ctr_offset: u64,
}

/// The `pid` of a uprobe placed on the file itself: it fires in every process that maps the file,
/// now or later (a perf event with pid -1, opened on one CPU, as perf requires: its program runs
/// at every hit on any CPU, the CPU choosing only where perf's own samples would go; uprobe-multi
/// links: no pid filter).
pub const EVERY_PROCESS: u32 = 0;

/// Attaches `prog` (a kprobe-type program) at `site`. `what` names the probe for errors.
pub fn attach(prog: &Program, site: &UprobeSite<'_>, what: &str) -> Result<Attachment> {
    let pmu = pmu()?;
    let path = CString::new(site.path)
        .map_err(|_| LinuxError::BadProbe(format!("{what}: object path has a NUL byte")))?;
    // A file-wide uprobe: one event for every process (one per CPU would run the program once
    // per CPU at each hit).
    let (pid, cpu) = if site.pid == EVERY_PROCESS {
        let cpu = crate::bpf::map::online_cpus()?
            .first()
            .copied()
            .unwrap_or(0);
        (-1, cpu as i32)
    } else {
        let pid = i32::try_from(site.pid).map_err(|_| LinuxError::NoProcess(site.pid))?;
        (pid, -1)
    };
    // The `ref_ctr_offset` format field is config:32-63; config1 is the path (`uprobe_path`),
    // config2 the offset (`probe_offset`).
    let mut attr = pmu.attr(
        site.retprobe,
        site.ref_ctr_offset << 32,
        path.as_ptr() as u64,
        site.offset,
    );
    let fd = open_perf_event_for(&mut attr, pid, cpu, what).map_err(|e| match e {
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

/// `BPF_F_UPROBE_MULTI_RETURN`.
const MULTI_RETURN: u32 = 1;

fn link_create(attr: &mut UprobeMultiAttr, what: &str) -> Result<std::os::fd::OwnedFd> {
    // SAFETY: a BPF_LINK_CREATE attribute whose pointers (path, offsets, semaphores, cookies) the
    // caller keeps alive for the call, each array holding `cnt` u64 values.
    unsafe { sys::bpf_fd(cmd::LINK_CREATE, attr, what) }
}

/// Whether uprobe-multi links work here, with their process filter matching every thread of the
/// process (the first kernels with the links, 6.6 to 6.9, matched only the thread whose id is the
/// pid). Found once by trying: a link on `/` (not a regular file) fails with `EBADF` where the
/// link type exists and `EINVAL` where it does not; with pid -1 the fixed kernels refuse the pid
/// (`EINVAL`) before looking at the path.
pub fn multi_available() -> bool {
    static MULTI: OnceLock<bool> = OnceLock::new();
    *MULTI.get_or_init(|| {
        let Ok(prog) = Program::load_empty(ProgKind::UprobeMulti, "dt_umprobe", "uprobe-multi")
        else {
            return false;
        };
        let root = b"/\0";
        let offsets = [0u64];
        let errno = |pid: u32| {
            let mut attr = UprobeMultiAttr {
                prog_fd: prog.raw_fd() as u32,
                attach_type: attach_type::TRACE_UPROBE_MULTI,
                path: root.as_ptr() as u64,
                offsets: offsets.as_ptr() as u64,
                cnt: 1,
                pid,
                ..Default::default()
            };
            match link_create(&mut attr, "uprobe-multi probe") {
                Ok(_) => None,
                Err(LinuxError::Sys { source, .. }) => source.raw_os_error(),
                Err(_) => None,
            }
        };
        errno(0) == Some(libc::EBADF) && errno(u32::MAX) == Some(libc::EINVAL)
    })
}

/// Probes of one object in one process placed by one link: `offsets[i]` with semaphore
/// `ref_ctr_offsets[i]` fires `prog` with cookie `cookies[i]`.
pub struct MultiSites<'a> {
    /// The object file.
    pub path: &'a str,
    /// The process ([`EVERY_PROCESS`]: no filter).
    pub pid: u32,
    /// Return probes.
    pub retprobe: bool,
    /// File offsets of the instructions.
    pub offsets: &'a [u64],
    /// File offsets of USDT semaphores (0: none).
    pub ref_ctr_offsets: &'a [u64],
    /// Each offset's cookie.
    pub cookies: &'a [u64],
}

/// Attaches `prog` (loaded as [`ProgKind::UprobeMulti`]) at every site of `sites` with one
/// uprobe-multi link. `what` names the probes for errors.
pub fn attach_multi(prog: &Program, sites: &MultiSites<'_>, what: &str) -> Result<Attachment> {
    let n = sites.offsets.len();
    if n == 0 || sites.ref_ctr_offsets.len() != n || sites.cookies.len() != n {
        return Err(LinuxError::BadProbe(format!(
            "{what}: malformed uprobe set"
        )));
    }
    let path = CString::new(sites.path)
        .map_err(|_| LinuxError::BadProbe(format!("{what}: object path has a NUL byte")))?;
    let any_sem = sites.ref_ctr_offsets.iter().any(|o| *o != 0);
    let mut attr = UprobeMultiAttr {
        prog_fd: prog.raw_fd() as u32,
        attach_type: attach_type::TRACE_UPROBE_MULTI,
        path: path.as_ptr() as u64,
        offsets: sites.offsets.as_ptr() as u64,
        ref_ctr_offsets: if any_sem {
            sites.ref_ctr_offsets.as_ptr() as u64
        } else {
            0
        },
        cookies: sites.cookies.as_ptr() as u64,
        cnt: u32::try_from(n)
            .map_err(|_| LinuxError::BadProbe(format!("{what}: too many uprobes")))?,
        flags: if sites.retprobe { MULTI_RETURN } else { 0 },
        pid: sites.pid,
        ..Default::default()
    };
    let fd = link_create(&mut attr, &format!("uprobe-multi link for {what}")).map_err(|e| match e {
        LinuxError::Sys { source, .. } if source.raw_os_error() == Some(libc::ESRCH) => {
            LinuxError::NoProcess(sites.pid)
        }
        LinuxError::Sys { source, .. } if source.raw_os_error() == Some(ENOTSUPP) => {
            LinuxError::BadProbe(format!(
                "{what}: an instruction at one of the probed offsets of {} cannot be traced by uprobes",
                sites.path
            ))
        }
        e => e,
    })?;
    drop(path);
    Ok(Attachment::from_link(fd))
}
