//! Attaching loaded programs: perf events (tracepoint ids, cpu-clock per CPU) with
//! `PERF_EVENT_IOC_SET_BPF`, and raw tracepoints with `BPF_RAW_TRACEPOINT_OPEN`. An [`Attachment`] owns
//! its descriptors; dropping it disables and detaches (the kernel also detaches when our process dies,
//! since nothing is pinned).

use crate::bpf::sys::{self, cmd, RawTpAttr};
use crate::bpf::Program;
use crate::error::{LinuxError, Result};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
const PERF_EVENT_IOC_ENABLE: u64 = 0x2400;
const PERF_EVENT_IOC_DISABLE: u64 = 0x2401;
const PERF_EVENT_IOC_SET_BPF: u64 = 0x4004_2408;
const PERF_FLAG_FD_CLOEXEC: u64 = 1 << 3;
pub(crate) const ATTR_SIZE: u32 = 128;
const FLAG_DISABLED: u64 = 1;

/// One attached program (possibly on several CPUs).
#[derive(Debug)]
pub struct Attachment {
    perf_fds: Vec<OwnedFd>,
    raw_fd: Option<OwnedFd>,
}

fn perf_event_open(typ: u32, config: u64, period: u64, cpu: i32, what: &str) -> Result<OwnedFd> {
    let mut attr = [0u64; PERF_ATTR_WORDS];
    attr[0] = typ as u64 | ((ATTR_SIZE as u64) << 32);
    attr[1] = config;
    attr[2] = period;
    attr[5] = FLAG_DISABLED;
    attr[6] = 1; // wakeup_events
    open_perf_event(&mut attr, cpu, what)
}

/// Words of a `perf_event_attr` of [`ATTR_SIZE`] bytes.
pub(crate) const PERF_ATTR_WORDS: usize = (ATTR_SIZE / 8) as usize;

/// `perf_event_open(attr, -1, cpu)` (every process on `cpu`), close-on-exec. `attr` must carry
/// its size in its first word.
pub(crate) fn open_perf_event(
    attr: &mut [u64; PERF_ATTR_WORDS],
    cpu: i32,
    what: &str,
) -> Result<OwnedFd> {
    open_perf_event_for(attr, -1, cpu, what)
}

/// `perf_event_open(attr, pid, cpu)`, close-on-exec (`pid` -1: every process; `cpu` -1: every
/// CPU). `attr` must carry its size in its first word.
pub(crate) fn open_perf_event_for(
    attr: &mut [u64; PERF_ATTR_WORDS],
    pid: i32,
    cpu: i32,
    what: &str,
) -> Result<OwnedFd> {
    // SAFETY: attr is a zero-filled perf_event_attr of the declared size.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_mut_ptr(),
            pid as libc::pid_t,
            cpu,
            -1,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ESRCH) => LinuxError::NoProcess(pid.max(0) as u32),
            Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::EOPNOTSUPP) => {
                LinuxError::Unavailable(format!("{what}: {e}"))
            }
            _ => LinuxError::from_io(format!("perf_event_open for {what}"), e),
        });
    }
    // SAFETY: fresh descriptor from the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// A dynamic-probe PMU (`kprobe`, `uprobe`): its type and the bit of `config` that makes a return
/// probe.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ProbePmu {
    typ: u32,
    ret_bit: u32,
}

impl ProbePmu {
    /// Reads the PMU from its directory under `/sys/bus/event_source/devices`; `None` where it is
    /// absent.
    pub(crate) fn read(dir: &str) -> Option<ProbePmu> {
        let typ = std::fs::read_to_string(format!("{dir}/type")).ok()?;
        let ret = std::fs::read_to_string(format!("{dir}/format/retprobe")).ok()?;
        let ret_bit = ret.trim().strip_prefix("config:")?.parse().ok()?;
        Some(ProbePmu {
            typ: typ.trim().parse().ok()?,
            ret_bit,
        })
    }

    /// The `perf_event_attr` of one probe, created disabled: `config` holds the PMU's other bits
    /// (a uprobe's semaphore offset), `config1` the address of its name (function or path) and
    /// `config2` its offset.
    pub(crate) fn attr(
        &self,
        retprobe: bool,
        config: u64,
        config1: u64,
        config2: u64,
    ) -> [u64; PERF_ATTR_WORDS] {
        let mut attr = [0u64; PERF_ATTR_WORDS];
        attr[0] = u64::from(self.typ) | (u64::from(ATTR_SIZE) << 32);
        attr[1] = config | if retprobe { 1u64 << self.ret_bit } else { 0 };
        attr[2] = 1; // sample_period
        attr[5] = FLAG_DISABLED;
        attr[6] = 1; // wakeup_events
        attr[7] = config1;
        attr[8] = config2;
        attr
    }
}

/// Whether a cpu-clock perf event can be opened on the first online CPU (it is closed at once).
pub fn cpu_clock_available() -> bool {
    let cpu = crate::bpf::map::online_cpus()
        .ok()
        .and_then(|c| c.first().copied())
        .unwrap_or(0);
    perf_event_open(
        PERF_TYPE_SOFTWARE,
        PERF_COUNT_SW_CPU_CLOCK,
        1_000_000_000,
        cpu as i32,
        "cpu-clock",
    )
    .is_ok()
}

fn ioctl(fd: &OwnedFd, req: u64, arg: libc::c_ulong, what: &str) -> Result<()> {
    // SAFETY: perf ioctls on a perf descriptor with an integer argument.
    if unsafe { libc::ioctl(fd.as_raw_fd(), req as _, arg) } < 0 {
        return Err(LinuxError::last_os(what.to_string()));
    }
    Ok(())
}

pub(crate) fn attach_perf(fd: &OwnedFd, prog: &Program, what: &str) -> Result<()> {
    ioctl(
        fd,
        PERF_EVENT_IOC_SET_BPF,
        prog.raw_fd() as libc::c_ulong,
        &format!("attaching BPF program to {what}"),
    )?;
    ioctl(fd, PERF_EVENT_IOC_ENABLE, 0, &format!("enabling {what}"))
}

impl Attachment {
    /// Attaches a tracepoint program to the tracefs event with numeric `id` (one perf event serves
    /// every CPU). `what` names the probe for errors.
    pub fn tracepoint(prog: &Program, id: u64, what: &str) -> Result<Attachment> {
        let fd = perf_event_open(PERF_TYPE_TRACEPOINT, id, 1, 0, what)?;
        attach_perf(&fd, prog, what)?;
        Ok(Attachment {
            perf_fds: vec![fd],
            raw_fd: None,
        })
    }

    /// Attaches a perf-event program to a cpu-clock software event firing every `period_ns`
    /// nanoseconds on each CPU of `cpus`.
    pub fn cpu_clock(
        prog: &Program,
        period_ns: u64,
        cpus: &[u32],
        what: &str,
    ) -> Result<Attachment> {
        let mut fds = Vec::with_capacity(cpus.len());
        for &cpu in cpus {
            let fd = perf_event_open(
                PERF_TYPE_SOFTWARE,
                PERF_COUNT_SW_CPU_CLOCK,
                period_ns.max(1),
                cpu as i32,
                what,
            )?;
            attach_perf(&fd, prog, what)?;
            fds.push(fd);
        }
        Ok(Attachment {
            perf_fds: fds,
            raw_fd: None,
        })
    }

    /// Attaches a raw-tracepoint program to the raw tracepoint `name` (e.g. `sched_switch`).
    pub fn raw_tracepoint(prog: &Program, name: &str) -> Result<Attachment> {
        let cname = CString::new(name).map_err(|_| LinuxError::NoSuchProbe(name.into()))?;
        let mut attr = RawTpAttr {
            name: cname.as_ptr() as u64,
            prog_fd: prog.raw_fd() as u32,
            pad: 0,
        };
        // SAFETY: name is a NUL-terminated string alive for the call.
        let fd = unsafe {
            sys::bpf_fd(
                cmd::RAW_TRACEPOINT_OPEN,
                &mut attr,
                &format!("raw tracepoint {name}"),
            )
        }?;
        Ok(Attachment {
            perf_fds: Vec::new(),
            raw_fd: Some(fd),
        })
    }

    /// Attaches a BTF-typed raw tracepoint program (loaded as [`crate::bpf::ProgKind::TpBtf`],
    /// which names its tracepoint), or an fentry/fexit program (which names its function).
    pub fn tp_btf(prog: &Program, what: &str) -> Result<Attachment> {
        let mut attr = RawTpAttr {
            name: 0,
            prog_fd: prog.raw_fd() as u32,
            pad: 0,
        };
        // SAFETY: a raw-tracepoint attribute without a name, as typed programs require.
        let fd = unsafe {
            sys::bpf_fd(
                cmd::RAW_TRACEPOINT_OPEN,
                &mut attr,
                &format!("attaching {what}"),
            )
        }?;
        Ok(Attachment {
            perf_fds: Vec::new(),
            raw_fd: Some(fd),
        })
    }

    /// An attachment holding perf events already attached.
    pub(crate) fn from_perf_fds(perf_fds: Vec<OwnedFd>) -> Attachment {
        Attachment {
            perf_fds,
            raw_fd: None,
        }
    }

    /// An attachment holding a BPF link.
    pub(crate) fn from_link(fd: OwnedFd) -> Attachment {
        Attachment {
            perf_fds: Vec::new(),
            raw_fd: Some(fd),
        }
    }

    /// Number of kernel objects (perf events or links) held.
    pub fn fd_count(&self) -> usize {
        self.perf_fds.len() + usize::from(self.raw_fd.is_some())
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        for fd in &self.perf_fds {
            // SAFETY: disabling our own perf descriptor; failure is harmless since close detaches.
            unsafe { libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_DISABLE as _, 0) };
        }
    }
}
