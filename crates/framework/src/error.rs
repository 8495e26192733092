//! The framework's errors (what `dtrace_program_exec`, `dtrace_go` and option setting report).

use crate::layout::LayoutError;
use crate::options::OptionError;
use crate::provider::ProviderError;
use thiserror::Error;

/// Errors from the framework's API.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameworkError {
    /// A probe description matched no probe (and `-Z` was not given).
    #[error("probe description {desc} does not match any probes")]
    NoMatch {
        /// The description, `provider:module:function:name`.
        desc: String,
        /// Its source line (0 when unknown).
        line: u32,
    },
    /// A bad option name or value.
    #[error("{0}")]
    Option(#[from] OptionError),
    /// An option in a program pragma is bad.
    #[error("failed to set option {name}: {source}")]
    PragmaOption {
        /// Option name.
        name: String,
        /// Why.
        source: OptionError,
    },
    /// An ECB's actions cannot be laid out.
    #[error("enabling {desc}: {source}")]
    Layout {
        /// Probe description of the ECB.
        desc: String,
        /// Why.
        source: LayoutError,
    },
    /// Destructive actions without the `destructive` option (`-w`).
    #[error("Destructive actions not allowed")]
    Destructive,
    /// A DIF object failed verification.
    #[error("enabling {desc}: invalid DIF: {reason}")]
    InvalidDif {
        /// Probe description of the ECB.
        desc: String,
        /// The verifier's message.
        reason: String,
    },
    /// Something the framework does not do yet (or cannot do on Linux).
    #[error("not yet supported: {0}")]
    Unsupported(String),
    /// A provider failed.
    #[error("{0}")]
    Provider(#[from] ProviderError),
    /// The operation needs tracing not to have started yet.
    #[error("Operation illegal when tracing is active")]
    AlreadyActive,
    /// The operation needs tracing to be active.
    #[error("tracing is not active")]
    NotActive,
    /// A buffer of the requested size could not be allocated.
    #[error("Not enough space to allocate {what} of {size} bytes")]
    NoMemory {
        /// Which buffer (`principal buffer`, ...).
        what: &'static str,
        /// Bytes requested.
        size: u64,
    },
    /// The buffer size is too small for the records enabled.
    #[error("Enabling exceeds size of buffer")]
    BufferTooSmall,
    /// Under `bufpolicy=fill`, the END clauses' records, which the buffer keeps room for, do not
    /// fit in it (DTrace's `EDT_ENDTOOBIG`).
    #[error("END enablings exceed size of principal buffer")]
    EndTooBig,
    /// No such CPU.
    #[error("CPU {0} is not being traced")]
    BadCpu(u32),
}
