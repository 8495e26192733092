//! The `dtrace` provider: `dtrace:::BEGIN` (fired by [`crate::Framework::go`] before any other probe),
//! `dtrace:::END` (fired by [`crate::Framework::stop`] after every other probe) and `dtrace:::ERROR`
//! (fired by the framework on every runtime fault). They are probes 1, 2 and 3, as in DTrace.

use crate::provider::{
    Attribute, DepClass, ProbeSink, Provider, ProviderAttributes, ProviderError, Stability,
};
use crate::records::ProbeInfo;
use dtrace_dif::program::ProbeDesc;

/// Probe id of `dtrace:::BEGIN`.
pub const BEGIN: u32 = 1;
/// Probe id of `dtrace:::END`.
pub const END: u32 = 2;
/// Probe id of `dtrace:::ERROR`.
pub const ERROR: u32 = 3;

/// The `dtrace` provider. Its probes are fired by the framework itself.
#[derive(Debug, Default)]
pub struct DtraceProvider;

impl Provider for DtraceProvider {
    fn name(&self) -> &str {
        "dtrace"
    }

    fn attributes(&self) -> ProviderAttributes {
        let stable = Attribute::new(Stability::Stable, Stability::Stable, DepClass::Common);
        let private = Attribute::new(Stability::Private, Stability::Private, DepClass::Unknown);
        ProviderAttributes {
            provider: stable,
            module: private,
            function: private,
            name: stable,
            args: stable,
        }
    }

    fn provide(&mut self, desc: Option<&ProbeDesc>, sink: &mut ProbeSink<'_>) {
        if desc.is_none() {
            sink.create("", "", "BEGIN");
            sink.create("", "", "END");
            sink.create("", "", "ERROR");
        }
    }

    fn enable(&mut self, _probe: &ProbeInfo) -> Result<(), ProviderError> {
        Ok(())
    }

    fn disable(&mut self, _probe: &ProbeInfo) {}
}
