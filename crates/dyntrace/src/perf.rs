//! Per-thread counters (`perf_event_open`) used to time instructions: hardware CPU cycles in user mode
//! where the machine has them, or, when asked for, the thread's software task clock (nanoseconds of CPU
//! time, which also counts the kernel's cost of each single-step trap) on machines without them.

use std::io;

/// `struct perf_event_attr` as of its first published size (PERF_ATTR_SIZE_VER0, 64 bytes).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;

/// What the timing counters count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimingEvent {
    /// Hardware CPU cycles in user mode (`PERF_COUNT_HW_CPU_CYCLES`).
    Cycles,
    /// The thread's task clock in nanoseconds (`PERF_COUNT_SW_TASK_CLOCK`), kernel time included.
    TaskClock,
}

impl TimingEvent {
    /// The name used on the command line and in the profile's `timer` attribute.
    pub fn name(self) -> &'static str {
        match self {
            TimingEvent::Cycles => "cycles",
            TimingEvent::TaskClock => "task-clock",
        }
    }

    /// The event named `s`.
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "cycles" => Some(TimingEvent::Cycles),
            "task-clock" => Some(TimingEvent::TaskClock),
            _ => None,
        }
    }

    fn attr(self) -> PerfEventAttr {
        let (type_, config, flags) = match self {
            TimingEvent::Cycles => (
                PERF_TYPE_HARDWARE,
                PERF_COUNT_HW_CPU_CYCLES,
                FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV,
            ),
            TimingEvent::TaskClock => (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, 0),
        };
        PerfEventAttr {
            type_,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config,
            flags,
            ..Default::default()
        }
    }
}

/// A counter of one [`TimingEvent`] on one thread.
#[derive(Debug)]
pub struct CycleCounter {
    fd: i32,
    last: u64,
}

impl CycleCounter {
    /// Opens a counter of `event` on thread `tid` (any CPU).
    pub fn open(tid: i32, event: TimingEvent) -> io::Result<Self> {
        let attr = event.attr();
        // SAFETY: the attribute struct is live and its size field says how much the kernel may read.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                tid,
                -1i32,
                -1i32,
                8u64, // PERF_FLAG_FD_CLOEXEC
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut c = CycleCounter {
            fd: fd as i32,
            last: 0,
        };
        c.last = c.value().unwrap_or(0);
        Ok(c)
    }

    fn value(&self) -> Option<u64> {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a live u64.
        let n = unsafe { libc::read(self.fd, (&mut v as *mut u64).cast(), 8) };
        (n == 8).then_some(v)
    }

    /// Counts since the previous call (or since opening).
    pub fn lap(&mut self) -> Option<u64> {
        let v = self.value()?;
        let d = v.wrapping_sub(self.last);
        self.last = v;
        Some(d)
    }
}

impl Drop for CycleCounter {
    fn drop(&mut self) {
        // SAFETY: we own the descriptor.
        unsafe { libc::close(self.fd) };
    }
}

/// Whether this machine can count `event` for a thread; the error says why not.
pub fn probe(event: TimingEvent) -> io::Result<()> {
    // SAFETY: gettid has no arguments.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
    CycleCounter::open(tid, event).map(|_| ())
}
