//! CTF, the Compact C Type Format (spec ch.4), for DTrace on Linux.
//!
//! This crate owns type information: the CTF container in memory ([`Container`], a typed graph of
//! [`Type`]s with hash indexes), its on-disk encoding (reader with full validation and writer, CTF
//! versions 2 and 3, optionally zlib-compressed), the query API the D compiler uses (lookup by name
//! in the ordinary and `struct`/`union`/`enum` namespaces, by id, sizes, alignments, members and
//! offsets, resolution through typedefs and qualifiers, C declaration names), and converters into CTF
//! from Linux BTF ([`btf_to_ctf`], e.g. `/sys/kernel/btf/vmlinux`) and from DWARF in ELF files
//! ([`dwarf_to_ctf_from_elf`]). It does not read kernel memory or open files except where a caller hands it a
//! path; it knows nothing of D, DIF or DOF.
//!
//! ```
//! use dtrace_ctf::*;
//! let mut c = Container::new();
//! let int = c.add(Type::new("int", TypeKind::Integer(IntEncoding { flags: CTF_INT_SIGNED, offset: 0, bits: 32 }), 4));
//! let s = c.add(Type::new("point", TypeKind::Struct(vec![
//!     Member { name: "x".into(), type_id: int, offset_bits: 0 },
//!     Member { name: "y".into(), type_id: int, offset_bits: 32 },
//! ]), 8));
//! assert_eq!(c.lookup_by_name("struct point"), Some(s));
//! assert_eq!(c.member(s, "y").unwrap().unwrap().offset_bits, 32);
//! let bytes = write_ctf(&c, WriteOptions::default()).unwrap();
//! assert_eq!(read_ctf(&bytes).unwrap(), c);
//! ```

//! # The API at a glance
//! - Build: [`Container::new`], [`Container::new_child`], [`Container::add`], [`Container::replace`]
//!   (reserve an id, fill it in later), [`Container::pointer_to`], [`Container::derived_or_add`].
//! - Query: [`Container::lookup_by_name`] (`"struct task_struct"`, `"unsigned int"`, `"const char *"`),
//!   [`Container::lookup_in`] (one namespace), [`Container::get`] (by id), [`Container::resolve`]
//!   (through typedefs and qualifiers), [`Container::size_of`], [`Container::align_of`],
//!   [`Container::members`], [`Container::member`] (offset in bits, through anonymous members),
//!   [`Container::enumerators`], [`Container::enum_value`], [`Container::type_name`] (C spelling),
//!   [`Container::iter`]. Ids are [`TypeId`]s; `TypeId::VOID` (0) is `void`.
//! - Bytes: [`read_ctf`] / [`write_ctf`] (v2 when it fits, else v3; optional zlib), [`read_header`],
//!   [`elf_ctf_section`].
//! - Converters: [`btf_to_ctf`], [`btf_to_ctf_child`], [`KernelTypes`] (vmlinux plus modules on
//!   demand), [`dwarf_to_ctf_from_elf`].
//! - Text: [`dump::dump`], as `ctfdump` prints it.
//!
//! Every error is a [`CtfError`]; nothing here panics on bad input.

mod bytes;
pub mod consts;
mod container;
mod decl;
pub mod dump;
mod error;
#[doc(hidden)]
pub mod fuzz_entry;
mod lookup;
mod model;
mod read;
mod write;

pub mod btf;
pub mod dwarf;
mod elf;
pub mod kernel;

pub use btf::{btf_to_ctf, btf_to_ctf_child, Btf};
pub use consts::*;
pub use container::{Container, Namespace};
pub use dwarf::dwarf_to_ctf_from_elf;
pub use elf::elf_ctf_section;
pub use error::{CtfError, Result};
pub use kernel::{KernelTypes, SYS_KERNEL_BTF};
pub use lookup::MemberInfo;
pub use model::*;
pub use read::{read_ctf, read_header, CtfHeader};
pub use write::{check_fits, write_ctf, WriteOptions};
