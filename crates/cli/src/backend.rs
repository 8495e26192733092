//! Where `dtrace(1)` gets its compiler and its execution substrate: the D compiler, and the in-process
//! framework with its `dtrace` (BEGIN/END/ERROR) and `profile` (tick-N, profile-N) providers. The
//! kernel providers of `dtrace-linux` join here when they are wired to the framework.

use dtrace_consumer::dcompile::DCompiler;
use dtrace_consumer::fwtracer::FrameworkTracer;
use dtrace_consumer::handle::{Compiler, Tracer};

/// The D compiler.
pub fn compiler() -> Option<Box<dyn Compiler>> {
    Some(Box::new(DCompiler))
}

/// The tracer (framework plus providers), over every CPU of the machine.
pub fn tracer() -> Box<dyn Tracer> {
    let ncpus = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);
    Box::new(FrameworkTracer::new(ncpus))
}
