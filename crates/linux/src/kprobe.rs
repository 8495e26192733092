//! Kprobes on kernel functions, for the `fbt` provider where the kernel has no BPF trampolines (or
//! `DTRACE_FBT=kprobe` asks for them): one perf event of the kprobe PMU
//! (`/sys/bus/event_source/devices/kprobe`) per probe, or, where the kernel has kprobe-multi links
//! (`BPF_TRACE_KPROBE_MULTI`, found by trying), ONE link for every function of one kind (entry or
//! return), whose cookie picks the probe's capture program. A link is placed through ftrace in one
//! step, so a glob over thousands of functions attaches and detaches in about the time of one.
//!
//! The program's context is the kernel's `struct pt_regs` at the function's first instruction (the
//! arguments in rdi, rsi, rdx, rcx, r8, r9) or at its return (the value in rax). Closing the event
//! or the link removes the probe, also when `dtrace` dies.

use crate::attach::{attach_perf, open_perf_event_for, Attachment, ProbePmu};
use crate::bpf::sys::{self, attach_type, cmd, KprobeMultiAttr};
use crate::bpf::{ProgKind, Program};
use crate::error::{LinuxError, Result};
use std::ffi::CString;
use std::sync::OnceLock;

const PMU: &str = "/sys/bus/event_source/devices/kprobe";
/// `BPF_F_KPROBE_MULTI_RETURN`.
const MULTI_RETURN: u32 = 1;

/// The kprobe PMU (read once).
fn pmu() -> Result<ProbePmu> {
    static PMU_INFO: OnceLock<Option<ProbePmu>> = OnceLock::new();
    PMU_INFO
        .get_or_init(|| ProbePmu::read(PMU))
        .ok_or_else(|| LinuxError::Unavailable(format!("kprobes ({PMU} not readable)")))
}

/// Whether this kernel offers kprobes through perf.
pub fn available() -> bool {
    pmu().is_ok()
}

/// Attaches `prog` (a [`ProgKind::Kprobe`] program) at the entry, or with `retprobe` the return, of
/// kernel function `func`. `what` names the probe for errors.
pub fn attach(prog: &Program, func: &str, retprobe: bool, what: &str) -> Result<Attachment> {
    let pmu = pmu()?;
    let name = CString::new(func)
        .map_err(|_| LinuxError::BadProbe(format!("{what}: function name has a NUL byte")))?;
    // config1 is the function's name (`kprobe_func`), config2 the offset in it.
    let mut attr = pmu.attr(retprobe, 0, name.as_ptr() as u64, 0);
    let fd = open_perf_event_for(&mut attr, -1, 0, what)?;
    drop(name);
    attach_perf(&fd, prog, what)?;
    Ok(Attachment::from_perf_fds(vec![fd]))
}

fn link_create(attr: &mut KprobeMultiAttr, what: &str) -> Result<std::os::fd::OwnedFd> {
    // SAFETY: a BPF_LINK_CREATE attribute whose pointers (names, cookies) the caller keeps alive
    // for the call, each array holding `cnt` entries.
    unsafe { sys::bpf_fd(cmd::LINK_CREATE, attr, what) }
}

/// Whether kprobe-multi links work here. Found once by trying: a link on a function name that
/// cannot exist fails with `ENOENT` (or `ESRCH`) where the link type exists, and with `EINVAL`
/// where it does not.
pub fn multi_available() -> bool {
    static MULTI: OnceLock<bool> = OnceLock::new();
    *MULTI.get_or_init(|| {
        let Ok(prog) = Program::load_empty(ProgKind::KprobeMulti, "dt_kmprobe", "kprobe-multi")
        else {
            return false;
        };
        let name = c"dtrace_no_such_function";
        let syms = [name.as_ptr() as u64];
        let mut attr = KprobeMultiAttr {
            prog_fd: prog.raw_fd() as u32,
            attach_type: attach_type::TRACE_KPROBE_MULTI,
            cnt: 1,
            syms: syms.as_ptr() as u64,
            ..Default::default()
        };
        match link_create(&mut attr, "kprobe-multi probe") {
            Ok(_) => false,
            Err(LinuxError::Sys { source, .. }) => {
                matches!(
                    source.raw_os_error(),
                    Some(libc::ENOENT) | Some(libc::ESRCH)
                )
            }
            Err(_) => false,
        }
    })
}

/// Attaches `prog` (loaded as [`ProgKind::KprobeMulti`]) at the entry (or with `retprobe` the
/// return) of every function of `funcs` with one kprobe-multi link, function `i` firing `prog`
/// with cookie `cookies[i]`. `what` names the probes for errors.
pub fn attach_multi(
    prog: &Program,
    funcs: &[&str],
    cookies: &[u64],
    retprobe: bool,
    what: &str,
) -> Result<Attachment> {
    let n = funcs.len();
    if n == 0 || cookies.len() != n {
        return Err(LinuxError::BadProbe(format!(
            "{what}: malformed kprobe set"
        )));
    }
    let names = funcs
        .iter()
        .map(|f| {
            CString::new(*f).map_err(|_| {
                LinuxError::BadProbe(format!("{what}: function name {f:?} has a NUL byte"))
            })
        })
        .collect::<Result<Vec<CString>>>()?;
    let syms: Vec<u64> = names.iter().map(|c| c.as_ptr() as u64).collect();
    let mut attr = KprobeMultiAttr {
        prog_fd: prog.raw_fd() as u32,
        attach_type: attach_type::TRACE_KPROBE_MULTI,
        flags: if retprobe { MULTI_RETURN } else { 0 },
        cnt: u32::try_from(n)
            .map_err(|_| LinuxError::BadProbe(format!("{what}: too many kprobes")))?,
        syms: syms.as_ptr() as u64,
        cookies: cookies.as_ptr() as u64,
        ..Default::default()
    };
    let fd = link_create(&mut attr, &format!("kprobe-multi link for {what}"))?;
    drop(names);
    Ok(Attachment::from_link(fd))
}
