//! The framework: the probe-context half of DTrace (in DTrace, the kernel).
//!
//! It owns the probe registry and the provider trait, ECBs and EPIDs, running predicates and actions
//! through the DIF interpreter, per-CPU principal buffers, aggregation buffers, speculations and the
//! `dtrace` provider. It hands the consumer bytes in the published record format plus the metadata to
//! decode them ([`records`]). It does not compile D nor format output.

pub mod aggregate;
pub mod buffer;
pub mod context;
pub mod error;
pub mod exec;
pub mod framework;
pub mod fuzzing;
pub mod glob;
pub mod layout;
pub mod options;
pub mod provider;
pub mod providers;
pub mod records;
pub mod speculation;

pub use context::FiringContext;
pub use error::FrameworkError;
pub use framework::{
    Activity, Clock, DestructiveRequest, Enabling, EventSender, Framework, ManualClock, ProbeEvent,
    Status, SystemClock,
};
pub use options::{BufPolicy, BufResize, OptionError, Options};
pub use provider::{ProbeRegistry, Provider};
