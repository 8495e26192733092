//! Per-thread cycle counters (`perf_event_open`, hardware CPU cycles, user mode only) used to time
//! instructions when the machine has them.

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
const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;

/// A user-mode cycle counter on one thread.
#[derive(Debug)]
pub struct CycleCounter {
    fd: i32,
    last: u64,
}

impl CycleCounter {
    /// Opens a counter on thread `tid` (any CPU).
    pub fn open(tid: i32) -> io::Result<Self> {
        let attr = PerfEventAttr {
            type_: PERF_TYPE_HARDWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_HW_CPU_CYCLES,
            flags: FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV,
            ..Default::default()
        };
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

    /// Cycles since the previous call (or since opening).
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

/// Whether this machine can count cycles for a thread; the error says why not.
pub fn probe() -> io::Result<()> {
    // SAFETY: gettid has no arguments.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
    CycleCounter::open(tid).map(|_| ())
}
