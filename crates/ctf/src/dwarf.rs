//! DWARF to CTF (placeholder while the converter is written).
use crate::container::Container;
use crate::error::{CtfError, Result};
/// Converts the DWARF of an ELF file.
pub fn dwarf_to_ctf_from_elf(_b: &[u8]) -> Result<Container> {
    Err(CtfError::Unsupported("DWARF conversion".into()))
}
