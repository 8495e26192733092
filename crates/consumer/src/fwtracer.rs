//! The in-process framework behind the handle's [`Tracer`] seam: options handed on as they were set,
//! programs enabled with `-Z` honoured, BEGIN/END through `go`/`stop`, timers run by `poll`, buffers and
//! aggregation snapshots (with their drops) taken as DTrace takes them, and status counters mapped to
//! DTrace's drop reports.

use std::time::Duration;

use dtrace_dif::program::{ProbeDesc, Program};
use dtrace_framework::records::{AggRecord, BufferSnapshot, ProbeInfo};
use dtrace_framework::{Activity, Framework, FrameworkError, OptionError};

use crate::error::{ConsumerError, Result};
use crate::handle::{ExecInfo, Tracer};
use crate::listing::ProbeDetail;
use crate::options::{OptKind, Options};
use crate::status::StatusCounters;

/// The most arguments a probe is asked to describe.
const MAX_PROBE_ARGS: u32 = 128;

/// A [`Tracer`] over [`Framework`].
pub struct FrameworkTracer {
    fw: Framework,
    applied: usize,
    agg_drops: Vec<(u32, u64)>,
}

fn be<E: std::fmt::Display>(e: E) -> ConsumerError {
    ConsumerError::Backend(e.to_string())
}

impl FrameworkTracer {
    /// A session over `ncpus` CPUs.
    pub fn new(ncpus: u32) -> FrameworkTracer {
        FrameworkTracer {
            fw: Framework::new(Default::default(), ncpus),
            applied: 0,
            agg_drops: Vec::new(),
        }
    }

    /// The framework, e.g. to register providers or fire probes.
    pub fn framework(&mut self) -> &mut Framework {
        &mut self.fw
    }

    /// Whether tracing is draining: `exit()` was called or a `fill` buffer filled (the consumer
    /// notices it at its next status check).
    pub fn exit_requested(&mut self) -> bool {
        let s = self.fw.status();
        s.exit_status.is_some() || s.filled
    }

    fn apply_options(&mut self, o: &Options) -> Result<()> {
        for (name, value) in &o.explicit()[self.applied..] {
            if matches!(
                Options::kind(name),
                Some((OptKind::Compile | OptKind::CppArgs | OptKind::Choice(_), _))
            ) {
                continue;
            }
            match self.fw.set_option(name, value.as_deref()) {
                Ok(()) => {}
                Err(FrameworkError::Option(OptionError::UnknownOption(_))) => {}
                Err(e) => return Err(be(e)),
            }
        }
        self.applied = o.explicit().len();
        Ok(())
    }
}

impl Tracer for FrameworkTracer {
    fn exec(&mut self, prog: &Program, options: &Options) -> Result<ExecInfo> {
        self.apply_options(options)?;
        let first = self.fw.next_clause();
        let e = self
            .fw
            .enable(prog, options.is_set("zdefs"))
            .map_err(|e| match e {
                FrameworkError::NoMatch { desc, line } => ConsumerError::NoMatch { desc, line },
                e => be(e),
            })?;
        Ok(ExecInfo {
            matches: e.matched,
            eprobes: e.eprobes,
            probes: e.probes,
            aggs: e.aggs,
            clauses: first..self.fw.next_clause(),
        })
    }
    fn go(&mut self) -> Result<()> {
        self.fw.go().map_err(be)
    }
    fn stop(&mut self) -> Result<()> {
        if self.fw.activity() == Activity::Active {
            self.fw.stop().map_err(be)?;
        }
        Ok(())
    }
    fn switch_buffers(&mut self) -> Result<Vec<BufferSnapshot>> {
        Ok(self.fw.switch_all())
    }
    fn aggregate_snapshot(&mut self) -> Result<Vec<AggRecord>> {
        let mut out = Vec::new();
        for s in self.fw.snapshot_aggregations() {
            if s.drops > 0 {
                self.agg_drops.push((s.cpu, s.drops));
            }
            out.extend(s.records);
        }
        Ok(out)
    }
    fn take_aggregation_drops(&mut self) -> Vec<(u32, u64)> {
        std::mem::take(&mut self.agg_drops)
    }
    fn ncpus(&self) -> u32 {
        self.fw.ncpus()
    }
    fn status(&mut self) -> Result<StatusCounters> {
        let s = self.fw.status();
        Ok(StatusCounters {
            dyndrops: s.dynvar_drops,
            dyndrops_dirty: 0,
            dyndrops_rinsing: 0,
            specdrops: s.spec_drops,
            specdrops_busy: s.spec_busy,
            specdrops_unavail: s.spec_unavail,
            dblerrors: s.dblerrors,
            exited: s.exit_status.is_some() || s.filled,
            ..StatusCounters::default()
        })
    }
    fn poll(&mut self) -> Result<()> {
        // After exit() DTrace fires nothing but END: stop running timers.
        if self.fw.status().exit_status.is_none() {
            self.fw.poll();
        }
        Ok(())
    }
    fn end_cpu(&self) -> Option<u32> {
        Some(self.fw.consumer_cpu())
    }
    fn time_to_next_event(&self) -> Option<Duration> {
        let d = self.fw.next_deadline()?;
        Some(Duration::from_nanos(d.saturating_sub(self.fw.now())))
    }
    fn list(&mut self, desc: &ProbeDesc) -> Result<Vec<ProbeInfo>> {
        Ok(self.fw.list_probes(desc))
    }
    fn probe_detail(&mut self, probe: &ProbeInfo) -> Result<ProbeDetail> {
        let attributes = self
            .fw
            .provider_attributes(&probe.provider)
            .ok_or_else(|| {
                ConsumerError::Backend(format!("no provider named {}", probe.provider))
            })?;
        // Argument descriptions are numbered from 0 without gaps (DTrace's dtargd_ndx).
        let args = (0..MAX_PROBE_ARGS)
            .map_while(|i| self.fw.arg_desc(probe.id, i))
            .map(|a| a.xlate.unwrap_or(a.native))
            .collect();
        Ok(ProbeDetail { attributes, args })
    }
}
