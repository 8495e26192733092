//! DOF, the DTrace Object Format (spec ch.6), for DTrace on Linux.
//!
//! This crate owns the DOF container: its identification and header, every section kind of Table 6.1
//! in the published layouts and constants (DOF versions 1 to 3, either byte order), a reader that
//! validates everything DTrace's loader checks (bounds, alignment, entry sizes, section links and
//! their types, string references, loadable flags, relocations, provider probe tables), a writer that
//! lays out loadable sections first, plain-data DIF objects ([`Difo`]) and USDT providers
//! ([`UsdtProvider`]) with conversions to and from their sections, `dofdump`-style text, and ELF
//! embedding in a `.SUNW_dof` section as `dtrace -G` does, and (module [`program`]) a compiled D
//! program (`dtrace_dif::Program`) as DOF and back, as libdtrace writes it and DTrace's kernel loads
//! it. It does not interpret DIF (that is the `dif` crate's job) and does no I/O beyond what callers
//! hand it.
//!
//! ```
//! use dtrace_dof::*;
//! let mut f = DofFile::new();
//! let hdr = f.add_difo(&Difo { text: vec![0x2300_0100], ..Default::default() });
//! let bytes = write_dof(&f).unwrap();
//! let back = read_dof(&bytes).unwrap();
//! assert_eq!(back, f);
//! assert_eq!(back.difo(hdr).unwrap().text, vec![0x2300_0100]);
//! ```

mod bytes;
pub mod consts;
mod difo;
pub mod dump;
mod elf;
mod error;
#[doc(hidden)]
pub mod fuzz_entry;
mod model;
pub mod program;
mod read;
pub mod usdt_link;
mod validate;
mod write;

pub use consts::*;
pub use difo::{str_at, str_list, Difo, StrTabBuilder, UsdtProbe, UsdtProvider};
pub use elf::{
    dof_sections_from_elf, dof_to_elf, dof_to_elf_with_stubs, DofElfReloc, IS_ENABLED_CODE,
    PROBE_STUB_AFTER_ENABLED, SHT_SUNW_DOF, SUNW_DOF_SECTION, SUNW_DOF_SYMBOL,
};
pub use error::{DofError, Result};
pub use model::*;
pub use program::{
    program_from_dof, program_from_dof_bytes, program_to_dof, program_to_dof_bytes,
    ProgramDofError, ProgramDofExtras,
};
pub use read::{read_dof, read_header, read_section_headers, DofHeaderInfo, RawSection};
pub use validate::validate;
pub use write::{encoded_size, write_dof, write_dof_dtrace_layout, MAX_DOF_SIZE};
