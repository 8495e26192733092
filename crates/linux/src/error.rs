//! The crate's error type: every way the kernel-facing layer can fail, each with the probe or object it
//! concerns and the reason, so the CLI can print one clear line.

use std::io;

/// Errors of the Linux substrate.
#[derive(Debug, thiserror::Error)]
pub enum LinuxError {
    /// A system call failed.
    #[error("{what}: {source}")]
    Sys {
        /// What we were doing (e.g. `bpf(BPF_MAP_CREATE) for ring buffer`).
        what: String,
        /// The OS error.
        source: io::Error,
    },
    /// The BPF verifier rejected a program; `log` is its complete log.
    #[error("BPF verifier rejected the program for {probe}: {reason}\n{log}")]
    VerifierRejected {
        /// The probe whose program was rejected.
        probe: String,
        /// The verifier's last word on it, with the errno text (the errno text alone when the
        /// log has none).
        reason: String,
        /// The verifier's log.
        log: String,
    },
    /// The process lacks the privileges tracing needs.
    #[error("permission denied: {0} (DTrace on Linux needs root or CAP_BPF+CAP_PERFMON)")]
    Permission(String),
    /// A probe that does not exist was named.
    #[error("probe description {0} does not match any probes")]
    NoSuchProbe(String),
    /// A feature this kernel lacks.
    #[error("not available on this kernel: {0}")]
    Unavailable(String),
    /// A probe that names a kernel function which cannot be traced.
    #[error("{probe} cannot be traced: {reason}")]
    Untraceable {
        /// The probe.
        probe: String,
        /// Why.
        reason: String,
    },
    /// The kernel has neither kprobes nor fentry.
    #[error("fbt provider unavailable: this kernel has no kprobes or fentry")]
    FbtUnavailable,
    /// A feature we have not built yet.
    #[error("not yet supported: {0}")]
    NotYetSupported(String),
    /// A tracefs `format` file could not be parsed.
    #[error("bad tracepoint format file {path}: line {line}: {reason}")]
    BadFormat {
        /// The file (or `<input>`).
        path: String,
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        reason: String,
    },
    /// A captured record from the ring buffer was malformed.
    #[error("malformed capture record: {0}")]
    BadRecord(String),
    /// An eBPF program could not be assembled (bad label, too long...).
    #[error("eBPF assembly error: {0}")]
    Asm(String),
    /// A capture request that cannot be expressed for this probe.
    #[error("invalid capture request for {probe}: {reason}")]
    BadCapture {
        /// The probe.
        probe: String,
        /// Why.
        reason: String,
    },
    /// A file under /proc or /sys could not be read or parsed.
    #[error("{path}: {reason}")]
    BadFile {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// Process control failed.
    #[error("process control: {0}")]
    Process(String),
    /// A user-space provider named a process that does not exist.
    #[error("failed to grab pid {0}: No such process")]
    NoProcess(u32),
    /// A probe description names a user-space probe that cannot be placed.
    #[error("{0}")]
    BadProbe(String),
    /// The `pid` provider refused a probe description, as DTrace's does: the description is
    /// reported as a compile error with `refusal`'s `D_PROC_*` tag.
    #[error("{message}")]
    PidRefused {
        /// Why, as DTrace classifies it.
        refusal: crate::catalog::pid::PidRefusal,
        /// DTrace's message.
        message: String,
    },
}

/// Result alias of the crate.
pub type Result<T> = std::result::Result<T, LinuxError>;

impl LinuxError {
    /// Wraps the last OS error with a description of the call.
    pub fn last_os(what: impl Into<String>) -> Self {
        Self::from_io(what, io::Error::last_os_error())
    }

    /// Wraps an OS error, turning EPERM/EACCES into [`LinuxError::Permission`].
    pub fn from_io(what: impl Into<String>, source: io::Error) -> Self {
        let what = what.into();
        match source.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => Self::Permission(what),
            _ => Self::Sys { what, source },
        }
    }
}

impl From<dtrace_ebpf::AsmError> for LinuxError {
    fn from(e: dtrace_ebpf::AsmError) -> Self {
        Self::Asm(e.0)
    }
}
