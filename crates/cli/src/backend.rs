//! Where `dtrace(1)` gets its compiler and its execution substrate: the D compiler, and the in-process
//! framework with its `dtrace` (BEGIN/END/ERROR) and `profile` (tick-N, profile-N) providers, joined
//! by the kernel providers of `dtrace-linux` (`syscall`, `proc`, `sched`, `sdt`) when this kernel's
//! probe catalogue can be read (tracefs, usually root), which also move `profile` onto perf events;
//! without it the kernel probes are simply not offered and profile probes run on timers. Stacks and
//! symbols print through the Linux symbol tables ([`crate::symbols`]).

use dtrace_consumer::dcompile::DCompiler;
use dtrace_consumer::fwtracer::FrameworkTracer;
use dtrace_consumer::handle::{Compiler, NoTracer, Tracer};
use dtrace_consumer::symbols::Symbolizer;

use crate::symbols::LinuxSymbols;
use dtrace_framework::FiringContext;

/// The D compiler.
pub fn compiler() -> Option<Box<dyn Compiler>> {
    Some(Box::new(DCompiler::default()))
}

/// The tracer (framework plus providers), over every CPU of the machine, and the symbol lookups
/// its stacks and addresses print with.
pub fn tracer() -> (Box<dyn Tracer>, Box<dyn Symbolizer>) {
    let linux = dtrace_linux::LinuxTracing::load().ok();
    let ncpus = dtrace_linux::provider::framework_ncpus()
        .ok()
        .or_else(|| {
            std::thread::available_parallelism()
                .ok()
                .map(|n| n.get() as u32)
        })
        .unwrap_or(1);
    let mut t = FrameworkTracer::new(ncpus);
    t.framework().set_consumer_context(consumer_context());
    match linux {
        Some(l) => {
            let syms = Box::new(LinuxSymbols::new(l.symbolizer()));
            match crate::kernel::KernelTracer::new(t, l) {
                Ok(k) => (Box::new(k), syms),
                Err(e) => (Box::new(NoTracer(format!("kernel providers: {e}"))), syms),
            }
        }
        None => (Box::new(t), Box::new(LinuxSymbols::standalone())),
    }
}

/// The context BEGIN and END fire in: this process, as in DTrace.
fn consumer_context() -> FiringContext {
    // SAFETY: these calls only read the process's own credentials and ids.
    let (ppid, uid, gid) = unsafe { (libc::getppid(), libc::getuid(), libc::getgid()) };
    let execname = std::fs::read_to_string("/proc/self/comm")
        .map(|s| s.trim_end().to_string())
        .unwrap_or_else(|_| "dtrace".to_string());
    FiringContext {
        pid: std::process::id() as u64,
        ppid: ppid as u64,
        tid: std::process::id() as u64,
        uid: uid as u64,
        gid: gid as u64,
        execname,
        execargs: std::env::args().collect::<Vec<_>>().join(" "),
        ..FiringContext::default()
    }
}
