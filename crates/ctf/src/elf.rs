//! Finding CTF inside ELF files: the `.SUNW_ctf` (illumos, FreeBSD) or `.ctf` section.

use object::{Object, ObjectSection};

use crate::error::{CtfError, Result};

/// The bytes of the CTF section of an ELF file; `Ok(None)` if `bytes` is not ELF at all, an error if it
/// is ELF without a CTF section.
pub fn elf_ctf_section(bytes: &[u8]) -> Result<Option<Vec<u8>>> {
    if !bytes.starts_with(b"\x7fELF") {
        return Ok(None);
    }
    let f = object::File::parse(bytes).map_err(|e| CtfError::Object(e.to_string()))?;
    for name in [".SUNW_ctf", ".ctf"] {
        if let Some(s) = f.section_by_name(name) {
            let data = s
                .uncompressed_data()
                .map_err(|e| CtfError::Object(e.to_string()))?;
            return Ok(Some(data.into_owned()));
        }
    }
    Err(CtfError::Object("no .SUNW_ctf or .ctf section".into()))
}
