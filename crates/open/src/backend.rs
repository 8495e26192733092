//! Where a consumer (`dtrace(1)`, `libdtrace`) gets its compiler and its execution substrate: the D compiler, and the in-process
//! framework with its `dtrace` (BEGIN/END/ERROR) and `profile` (tick-N, profile-N) providers, joined
//! by the kernel providers of `dtrace-linux` (`syscall`, `proc`, `sched`, `sdt`) when this kernel's
//! probe catalogue can be read (tracefs, usually root), which also move `profile` onto perf events;
//! without it the kernel probes are simply not offered and profile probes run on timers. Stacks and
//! symbols print through the Linux symbol tables ([`crate::symbols`]). The compiler sees the kernel's
//! types and the Linux probes' argument types ([`crate::ktypes`]).

use dtrace_consumer::dcompile::DCompiler;
use dtrace_consumer::fwtracer::FrameworkTracer;
use dtrace_consumer::handle::{Compiler, NoTracer, Tracer};
use dtrace_consumer::symbols::Symbolizer;

use crate::ktypes::{KernelTypeLoader, LinuxProbeArgs};
use crate::symbols::LinuxSymbols;
use dtrace_compiler::ProbeInfo;
use dtrace_framework::FiringContext;

/// The tracer (framework plus providers) over every CPU of the machine, the symbol lookups its
/// stacks and addresses print with, and the D compiler for what it traces. Unless `compiles` (D
/// will be compiled), the kernel's types are read only if a lookup asks for them.
/// `ilp32` (`-32`) compiles D for the ILP32 data model.
pub fn open(
    compiles: bool,
    ilp32: bool,
) -> (Box<dyn Tracer>, Box<dyn Symbolizer>, Box<dyn Compiler>) {
    let types = if compiles {
        KernelTypeLoader::start()
    } else {
        KernelTypeLoader::on_demand()
    };
    let linux = match dtrace_linux::LinuxTracing::load() {
        Ok(l) => Some(l),
        Err(e) => {
            let _ = KERNEL_DENIED.set(denied(&e));
            None
        }
    };
    let compiler = DCompiler {
        types: Some(Box::new(move |complete| types.sources(complete))),
        probes: linux
            .clone()
            .map(|l| Box::new(LinuxProbeArgs(l)) as Box<dyn ProbeInfo + Send>),
        model: if ilp32 {
            dtrace_compiler::DataModel::Ilp32
        } else {
            dtrace_compiler::DataModel::Lp64
        },
        ..DCompiler::default()
    };
    let (tracer, symbols) = tracer(linux);
    (tracer, symbols, Box::new(compiler))
}

/// Whether the kernel providers could not be joined for want of privileges.
static KERNEL_DENIED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Whether this error says the process may not trace the kernel (tracefs or bpf(2) refused).
fn denied(e: &dtrace_linux::LinuxError) -> bool {
    use std::io::ErrorKind;
    match e {
        dtrace_linux::LinuxError::Permission(_) => true,
        dtrace_linux::LinuxError::Sys { source, .. } => {
            source.kind() == ErrorKind::PermissionDenied
        }
        // Mounting tracefs where it is not mounted (or not reachable) is refused to non-root.
        dtrace_linux::LinuxError::Unavailable(m) => m.contains("not permitted"),
        _ => false,
    }
}

/// Whether the kernel's probes are missing because this process lacks the privileges to trace
/// the kernel: DTrace then says "DTrace requires additional privileges" rather than that a
/// description matches nothing.
pub fn kernel_denied() -> bool {
    KERNEL_DENIED.get().copied().unwrap_or(false)
}

/// The D compiler alone (nothing traced, as for `-G`), with the kernel's types.
pub fn compiler() -> Box<dyn Compiler> {
    let types = KernelTypeLoader::start();
    Box::new(DCompiler {
        types: Some(Box::new(move |complete| types.sources(complete))),
        ..DCompiler::default()
    })
}

fn tracer(linux: Option<dtrace_linux::LinuxTracing>) -> (Box<dyn Tracer>, Box<dyn Symbolizer>) {
    let ncpus = dtrace_linux::provider::framework_ncpus()
        .ok()
        .or_else(|| {
            std::thread::available_parallelism()
                .ok()
                .map(|n| n.get() as u32)
        })
        .unwrap_or(1);
    let mut t = FrameworkTracer::new(ncpus);
    t.framework()
        .set_cpu_places(dtrace_linux::topology::cpu_places(ncpus));
    let mut ctx = consumer_context();
    // BEGIN and END run in this thread: with a kernel reader, `curthread` is its task and kernel
    // reads through it are made now (without one, they fault as before).
    if linux.is_some() {
        if let Ok(reader) = dtrace_linux::live::KernelReader::new() {
            if let Ok(task) = reader.current_task() {
                ctx.curthread = task;
                t.framework()
                    .set_consumer_memory(Box::new(dtrace_linux::live::LiveMemory::new(reader)));
            }
        }
    }
    t.framework().set_consumer_context(ctx);
    t.framework().set_consumer_vtime(Box::new(thread_cpu_ns));
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

/// The calling thread's on-CPU nanoseconds: `vtimestamp` of BEGIN, END and the timer probes, which
/// fire in this process's thread as in DTrace.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec out-parameter.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
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
        ancestors: ancestors_of(ppid as u32),
        ..FiringContext::default()
    }
}

/// The ancestors of the process whose parent is `ppid`, from it up to `init` (pid 1) included, for
/// `progenyof()` in BEGIN and END; a bounded walk of `/proc/<pid>/stat`.
fn ancestors_of(ppid: u32) -> Vec<u64> {
    let mut out = Vec::new();
    let mut pid = ppid;
    while pid > 0 && out.len() < 256 {
        out.push(u64::from(pid));
        if pid == 1 {
            break;
        }
        match dtrace_linux::process::ppid_of(pid) {
            Some(p) => pid = p,
            None => break,
        }
    }
    out
}
