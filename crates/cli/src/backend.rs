//! Where `dtrace(1)` gets its compiler and its execution substrate. This is the seam to the crates
//! being written in parallel: until `dtrace-compiler` and the framework's execution engine are on main,
//! compiling reports "not yet supported" through the consumer's error path, and nothing else pretends.

use dtrace_consumer::handle::{Compiler, NoTracer, Tracer};

/// The D compiler, when one is linked in.
pub fn compiler() -> Option<Box<dyn Compiler>> {
    None
}

/// The tracer (framework plus providers).
pub fn tracer() -> Box<dyn Tracer> {
    Box::new(NoTracer(
        "tracing: the framework's execution engine is not linked into dtrace yet".into(),
    ))
}
