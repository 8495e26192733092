//! Error type of dyntrace and its mapping onto the sysexits(3) exit codes the manual page promises.

use std::path::PathBuf;

/// Exit codes from `<sysexits.h>`.
pub mod sysexits {
    /// Successful termination.
    pub const EX_OK: i32 = 0;
    /// Command line usage error.
    pub const EX_USAGE: i32 = 64;
    /// Data format error (a malformed opcode file).
    pub const EX_DATAERR: i32 = 65;
    /// Cannot open input (a missing command, opcode file or process).
    pub const EX_NOINPUT: i32 = 66;
    /// Internal software error.
    pub const EX_SOFTWARE: i32 = 70;
    /// System error (a ptrace or fork failure).
    pub const EX_OSERR: i32 = 71;
    /// Cannot create the output file.
    pub const EX_CANTCREAT: i32 = 73;
    /// Input/output error while writing the output file.
    pub const EX_IOERR: i32 = 74;
    /// Permission denied.
    pub const EX_NOPERM: i32 = 77;
}

/// Everything that can make dyntrace give up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line is wrong.
    #[error("{0}")]
    Usage(String),
    /// The opcode description file could not be read.
    #[error("cannot read opcode file {path}: {source}")]
    OpcodeFileRead {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The opcode description file is malformed.
    #[error("malformed opcode file {path}: {reason}")]
    OpcodeFile {
        /// The file (or `<built-in>`).
        path: String,
        /// What is wrong, with a line number when known.
        reason: String,
    },
    /// The command to run does not exist.
    #[error("{0}: command not found")]
    CommandNotFound(String),
    /// The command exists but may not be executed.
    #[error("{0}: permission denied")]
    CommandNotExecutable(String),
    /// The process to attach to does not exist.
    #[error("process {0} does not exist")]
    NoSuchProcess(i32),
    /// The operating system refused to let us trace the process.
    #[error("cannot trace process {pid}: {reason}")]
    PermissionDenied {
        /// The process.
        pid: i32,
        /// The refusal.
        reason: String,
    },
    /// The output file cannot be created.
    #[error("cannot create output file {path}: {source}")]
    CantCreate {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Writing the output file failed.
    #[error("cannot write output file {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A system call failed.
    #[error("{call}: {source}")]
    Os {
        /// What we were doing.
        call: &'static str,
        /// The errno.
        source: std::io::Error,
    },
}

impl Error {
    /// The sysexits code for this error.
    pub fn exit_code(&self) -> i32 {
        use sysexits::*;
        match self {
            Error::Usage(_) => EX_USAGE,
            Error::OpcodeFileRead { .. } => EX_NOINPUT,
            Error::OpcodeFile { .. } => EX_DATAERR,
            Error::CommandNotFound(_) => EX_NOINPUT,
            Error::CommandNotExecutable(_) => EX_NOPERM,
            Error::NoSuchProcess(_) => EX_NOINPUT,
            Error::PermissionDenied { .. } => EX_NOPERM,
            Error::CantCreate { .. } => EX_CANTCREAT,
            Error::Write { .. } => EX_IOERR,
            Error::Os { .. } => EX_OSERR,
        }
    }

    /// An [`Error::Os`] from the current `errno`.
    pub fn last_os(call: &'static str) -> Self {
        Error::Os {
            call,
            source: std::io::Error::last_os_error(),
        }
    }
}

/// Result with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
