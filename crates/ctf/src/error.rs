//! The error type of every CTF, BTF and DWARF operation in this crate.

use thiserror::Error;

/// What went wrong while decoding, encoding, converting or querying type information.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CtfError {
    /// The input ends before a structure that must be there.
    #[error("truncated {what}: need {need} bytes at offset {offset}, have {have}")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Where it starts.
        offset: u64,
        /// How many bytes it needs.
        need: u64,
        /// How many bytes the input has.
        have: u64,
    },
    /// The magic number is not the CTF (or BTF) one.
    #[error("bad magic 0x{0:x}")]
    BadMagic(u32),
    /// A version this crate does not read.
    #[error("unsupported {format} version {version}")]
    BadVersion {
        /// "CTF" or "BTF".
        format: &'static str,
        /// The version found.
        version: u32,
    },
    /// A header field is inconsistent (section order, alignment, bounds, flags).
    #[error("bad header: {0}")]
    BadHeader(String),
    /// A string reference points outside the string table or at an unterminated string.
    #[error("bad string reference 0x{0:x}")]
    BadString(u32),
    /// A type record is malformed.
    #[error("bad type record {id}: {why}")]
    BadType {
        /// The id of the record.
        id: u32,
        /// What is wrong with it.
        why: String,
    },
    /// A reference to a type id that does not exist.
    #[error("type {0} does not exist")]
    NoSuchType(u32),
    /// A type was asked for something its kind does not have (members of an int, ...).
    #[error("type {id} is {kind}, not {wanted}")]
    WrongKind {
        /// The type.
        id: u32,
        /// Its kind.
        kind: &'static str,
        /// What the caller needed.
        wanted: &'static str,
    },
    /// Following references went deeper than any real type graph does (a cycle through typedefs or
    /// qualifiers, or hostile input).
    #[error("type {0} refers to itself through typedefs, qualifiers or arrays")]
    Cycle(u32),
    /// The container does not fit the limits of the requested CTF version.
    #[error("does not fit CTF version {version}: {why}")]
    TooLarge {
        /// The version that was requested.
        version: u8,
        /// Which limit was exceeded.
        why: String,
    },
    /// A child container refers to parent types but no parent was attached.
    #[error("child container refers to parent type {0} but has no parent")]
    NoParent(u32),
    /// The zlib stream of a compressed container is bad.
    #[error("bad compressed data: {0}")]
    Decompress(String),
    /// An ELF file could not be read, or has no usable debugging information.
    #[error("object file: {0}")]
    Object(String),
    /// A DWARF entry could not be decoded.
    #[error("DWARF: {0}")]
    Dwarf(String),
    /// A feature of the input that this crate does not implement yet.
    #[error("not yet supported: {0}")]
    Unsupported(String),
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, CtfError>;
