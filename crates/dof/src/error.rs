//! The error type of DOF decoding, validation, encoding and ELF embedding.

use thiserror::Error;

/// What is wrong with a DOF object (or the ELF file around it).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DofError {
    /// The input ends before a structure that must be there.
    #[error("truncated {what}: need {need} bytes at offset {offset}, have {have}")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Where.
        offset: u64,
        /// How many bytes.
        need: u64,
        /// How many bytes the input has.
        have: u64,
    },
    /// Not DOF: the magic bytes are wrong.
    #[error("bad DOF magic")]
    BadMagic,
    /// A header field is invalid (model, encoding, versions, sizes, flags, padding).
    #[error("bad DOF header: {0}")]
    BadHeader(String),
    /// A section header is invalid (alignment, bounds, entry size, flags).
    #[error("section {index} ({kind}): {why}")]
    BadSection {
        /// Section index.
        index: u32,
        /// Section type name.
        kind: &'static str,
        /// What is wrong.
        why: String,
    },
    /// A link from one section to another is wrong (missing, wrong type, not loadable).
    #[error("section {from}: link to section {to}: {why}")]
    BadLink {
        /// The section holding the link.
        from: u32,
        /// The linked section index.
        to: u32,
        /// What is wrong.
        why: String,
    },
    /// A string reference is outside its string table.
    #[error("section {section}: string offset {offset} is outside string table {strtab}")]
    BadString {
        /// The section holding the reference.
        section: u32,
        /// The string table.
        strtab: u32,
        /// The offset.
        offset: u32,
    },
    /// The object file around the DOF could not be read or written.
    #[error("ELF: {0}")]
    Elf(String),
    /// The object would encode to more than [`crate::MAX_DOF_SIZE`] bytes (alignments of hostile
    /// input can demand huge padding).
    #[error("DOF would be {0} bytes, more than the {max} byte limit", max = crate::MAX_DOF_SIZE)]
    TooLarge(u64),
    /// A feature of the input that is not implemented yet.
    #[error("not yet supported: {0}")]
    Unsupported(String),
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, DofError>;
