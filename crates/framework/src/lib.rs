//! The framework: the probe-context half of DTrace (in DTrace, the kernel).
//!
//! It owns the probe registry and the provider trait, ECBs and EPIDs, running predicates and actions
//! through the DIF interpreter, per-CPU principal buffers, aggregation buffers, speculations and the
//! `dtrace` provider. It hands the consumer bytes in the published record format plus the metadata to
//! decode them ([`records`]). It does not compile D nor format output.

pub mod aggregate;
pub mod buffer;
pub mod glob;
pub mod layout;
pub mod options;
pub mod provider;
pub mod records;
pub mod speculation;
