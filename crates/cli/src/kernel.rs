//! The kernel providers of `dtrace-linux` (`syscall`, `proc`, `sched`, `sdt`) joined to the
//! in-process framework: a [`Tracer`] over [`FrameworkTracer`] that plans each program's captures
//! before enabling it, delivers captured events whenever the consumer polls, and drains them before
//! END fires.

use std::time::Duration;

use dtrace_consumer::error::{ConsumerError, Result};
use dtrace_consumer::fwtracer::FrameworkTracer;
use dtrace_consumer::handle::{ExecInfo, Tracer};
use dtrace_consumer::options::Options;
use dtrace_consumer::status::StatusCounters;
use dtrace_dif::program::{ProbeDesc, Program};
use dtrace_framework::records::{AggRecord, BufferSnapshot, ProbeInfo};
use dtrace_linux::LinuxTracing;

/// The framework with the Linux providers registered.
pub struct KernelTracer {
    inner: FrameworkTracer,
    linux: LinuxTracing,
}

impl KernelTracer {
    /// Registers `linux`'s providers with `inner`'s framework.
    pub fn new(mut inner: FrameworkTracer, linux: LinuxTracing) -> Result<KernelTracer> {
        linux
            .register(inner.framework())
            .map_err(|e| ConsumerError::Backend(e.to_string()))?;
        Ok(KernelTracer { inner, linux })
    }
}

impl Tracer for KernelTracer {
    fn exec(&mut self, prog: &Program, options: &Options) -> Result<ExecInfo> {
        self.linux.plan(prog);
        self.inner.exec(prog, options)
    }
    fn go(&mut self) -> Result<()> {
        self.inner.go()?;
        // BEGIN has fired: nothing captured before it is delivered.
        self.linux.go_live();
        Ok(())
    }
    fn stop(&mut self) -> Result<()> {
        // Everything the traced work produced fires before END.
        self.linux.finish(self.inner.framework());
        self.inner.stop()
    }
    fn switch_buffers(&mut self) -> Result<Vec<BufferSnapshot>> {
        self.inner.switch_buffers()
    }
    fn aggregate_snapshot(&mut self) -> Result<Vec<AggRecord>> {
        self.inner.aggregate_snapshot()
    }
    fn status(&mut self) -> Result<StatusCounters> {
        self.inner.status()
    }
    fn poll(&mut self) -> Result<()> {
        // After exit() nothing but END fires.
        if !self.inner.exit_requested() {
            self.linux
                .pump(self.inner.framework(), 0)
                .map_err(|e| ConsumerError::Backend(e.to_string()))?;
        }
        self.inner.poll()
    }
    fn time_to_next_event(&self) -> Option<Duration> {
        self.inner.time_to_next_event()
    }
    fn exit_requested(&mut self) -> bool {
        self.inner.exit_requested()
    }
    fn take_aggregation_drops(&mut self) -> Vec<(u32, u64)> {
        self.inner.take_aggregation_drops()
    }
    fn list(&mut self, desc: &ProbeDesc) -> Result<Vec<ProbeInfo>> {
        self.inner.list(desc)
    }
}
