//! The consumer's error type: every way decoding, formatting, option handling or the handle API can fail,
//! with DTrace's messages (`dtrace_errmsg`) where DTrace has one.

use thiserror::Error;

/// Errors of the consumer library.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ConsumerError {
    /// A record lies (partly) outside its buffer.
    #[error("record at offset {offset} of size {size} lies outside the {len}-byte buffer")]
    RecordOutOfBounds {
        /// Offset of the record.
        offset: usize,
        /// Size of the record.
        size: usize,
        /// Length of the data.
        len: usize,
    },
    /// A record's size does not fit its use (`EDT_DMISMATCH`).
    #[error("data record has unexpected size ({size} bytes) for {what}")]
    SizeMismatch {
        /// The record size.
        size: usize,
        /// What it was decoded as.
        what: &'static str,
    },
    /// A record is misaligned (`EDT_DALIGN`).
    #[error("data record at offset {0} is not properly aligned")]
    Misaligned(usize),
    /// The buffer names an EPID we have no description for (`EDT_BADEPID`).
    #[error("invalid enabled probe ID {0}")]
    BadEpid(u32),
    /// An ERROR record names a probe we have no description for (`EDT_BADERROR`).
    #[error("invalid probe ID {0} in an error record")]
    BadErrorProbe(u32),
    /// An aggregation id we have no description for (`EDT_BADAGGVAR`).
    #[error("invalid aggregation ID {0}")]
    BadAggId(u32),
    /// A record names a format string that does not exist.
    #[error("invalid format string index {0}")]
    BadFormat(u32),
    /// A `print()` record names a type the program does not describe, or a description too deep or
    /// too large to walk.
    #[error("invalid print( ) type description {0}")]
    BadPrintType(u32),
    /// A printf-like format string could not be parsed.
    #[error("printf( ) format conversion #{index} {reason}")]
    FormatSyntax {
        /// One-based conversion number.
        index: usize,
        /// What is wrong, in DTrace's words.
        reason: String,
    },
    /// The format needs more data records than the action supplied.
    #[error(
        "printf( ) prototype mismatch: conversion #{0} is missing a corresponding value argument"
    )]
    MissingArgument(usize),
    /// An unknown option name (`EDT_BADOPTNAME`).
    #[error("Invalid option name")]
    BadOptionName(String),
    /// A bad option value (`EDT_BADOPTVAL`).
    #[error("Invalid value for specified option")]
    BadOptionValue(String),
    /// An option that cannot change once tracing is running (`EDT_ACTIVE`).
    #[error("Operation illegal when tracing is active")]
    Active,
    /// `go` before any program was executed, or work without `go`.
    #[error("operation not supported in this state: {0}")]
    BadState(&'static str),
    /// A consume callback returned abort (`EDT_DIRABORT`).
    #[error("abort requested by consumer callback")]
    DirectAbort,
    /// A program could not be compiled.
    #[error("{0}")]
    Compile(String),
    /// A probe description matched no probe (`EDT_NOPROBE`); DTrace reports it as a compile error
    /// (`D_PDESC_ZERO`) at the description's line.
    #[error("probe description {desc} does not match any probes")]
    NoMatch {
        /// The description, `provider:module:function:name`.
        desc: String,
        /// Its source line (0 when unknown).
        line: u32,
    },
    /// A provider refused a probe description while matching it (the `pid` provider's
    /// `D_PROC_*` errors); DTrace reports it as a compile error with that tag at the
    /// description's line.
    #[error("{message}")]
    BadDescription {
        /// The compiler error tag (`D_PROC_FUNC`).
        tag: &'static str,
        /// DTrace's message.
        message: String,
        /// The description's source line (0 when unknown).
        line: u32,
    },
    /// The execution substrate reported an error.
    #[error("{0}")]
    Backend(String),
    /// A wide character (`%lc`, `%ls`) with no multibyte form: negative, a UTF-16 surrogate or
    /// above U+10FFFF (`EILSEQ` from the C library's conversion).
    #[error("wide character {0:#x} has no multibyte form: Illegal byte sequence")]
    BadWideChar(i64),
    /// A feature that is not implemented yet; says which.
    #[error("not yet supported: {0}")]
    NotSupported(String),
    /// Writing the output failed.
    #[error("failed to write output: {0}")]
    Io(String),
}

impl From<std::io::Error> for ConsumerError {
    fn from(e: std::io::Error) -> Self {
        ConsumerError::Io(e.to_string())
    }
}

/// Result alias of the crate.
pub type Result<T> = std::result::Result<T, ConsumerError>;
