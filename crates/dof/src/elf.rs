//! ELF embedding: a relocatable object carrying DOF in a `.SUNW_dof` section with a `___SUNW_dof`
//! symbol, as `dtrace -G` produces, and extraction of the DOF sections of an ELF file.

use object::write::{Object, Relocation, StandardSegment, Symbol, SymbolSection};
use object::{
    Architecture, BinaryFormat, Endianness, Object as _, ObjectSection as _, RelocationEncoding,
    RelocationFlags, RelocationKind, SectionKind, SymbolFlags, SymbolKind, SymbolScope,
};

use crate::error::{DofError, Result};

/// `SHT_SUNW_dof`.
pub const SHT_SUNW_DOF: u32 = 0x6fff_fff4;
/// Name of the section.
pub const SUNW_DOF_SECTION: &str = ".SUNW_dof";
/// Name of the symbol marking the DOF.
pub const SUNW_DOF_SYMBOL: &str = "___SUNW_dof";

/// A 64-bit absolute relocation of the DOF: at `offset` bytes into the DOF, put the address of
/// `symbol` plus `addend` (used for probe addresses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DofElfReloc {
    /// Byte offset in the DOF.
    pub offset: u64,
    /// Symbol whose address is stored.
    pub symbol: String,
    /// Addend.
    pub addend: i64,
}

/// Builds a relocatable ELF object (x86-64 or AArch64, little-endian) whose `.SUNW_dof` section holds
/// `dof`, with the hidden global symbol `___SUNW_dof` over it and the given relocations.
pub fn dof_to_elf(dof: &[u8], arch: Architecture, relocs: &[DofElfReloc]) -> Result<Vec<u8>> {
    dof_to_elf_with_stubs(dof, arch, relocs, &[])
}

/// Code of an is-enabled function (x86-64): `movzwl sem(%rip), %eax; ret`, the semaphore's
/// displacement at byte 3.
pub const IS_ENABLED_CODE: [u8; 8] = [0x0f, 0xb7, 0x05, 0, 0, 0, 0, 0xc3];

/// Where `__dtrace_<p>` (a `ret` no code calls: its call sites are nops) is from
/// `__dtraceenabled_<p>`: right after its code. dtrace places the uprobe of a probe the program
/// only tests with `_ENABLED()` there, so that the probe's semaphore is raised while the probe is
/// enabled without a site that fires.
pub const PROBE_STUB_AFTER_ENABLED: u64 = IS_ENABLED_CODE.len() as u64;

/// As [`dof_to_elf`], and for each `<provider>___<probe>` of `stubs` (the probe as its C function
/// names it) the functions a `dtrace -h` header declares: `__dtrace_<p>` (a `ret`; its call sites
/// were turned into nops) and `__dtraceenabled_<p>` ([`IS_ENABLED_CODE`]: it returns the probe's
/// 16-bit semaphore, a local `__dtrace_sem_<p>` in `.data`, which dtrace raises through uprobes'
/// `ref_ctr_offset` while the probe is enabled), hidden so that calls in the same link resolve to
/// them directly. With relocations, `.SUNW_dof` is writable, so that a position-independent link
/// relocates it as data rather than text.
pub fn dof_to_elf_with_stubs(
    dof: &[u8],
    arch: Architecture,
    relocs: &[DofElfReloc],
    stubs: &[String],
) -> Result<Vec<u8>> {
    if !stubs.is_empty() && arch != Architecture::X86_64 {
        return Err(DofError::Unsupported(format!(
            "USDT probe functions for {arch:?}"
        )));
    }
    if !matches!(arch, Architecture::X86_64 | Architecture::Aarch64) {
        return Err(DofError::Unsupported(format!("ELF embedding for {arch:?}")));
    }
    let mut obj = Object::new(BinaryFormat::Elf, arch, Endianness::Little);
    let seg = obj.segment_name(StandardSegment::Data).to_vec();
    let sec = obj.add_section(
        seg,
        SUNW_DOF_SECTION.as_bytes().to_vec(),
        SectionKind::Elf(SHT_SUNW_DOF),
    );
    let write = if relocs.is_empty() {
        0
    } else {
        object::elf::SHF_WRITE
    };
    obj.section_mut(sec).flags = object::SectionFlags::Elf {
        sh_flags: u64::from(object::elf::SHF_ALLOC | write),
    };
    let off = obj.append_section_data(sec, dof, 8);
    // An empty `.note.GNU-stack` says the object needs no executable stack (without it GNU ld warns
    // and marks the stack executable).
    let note = obj.add_section(
        Vec::new(),
        b".note.GNU-stack".to_vec(),
        SectionKind::Elf(object::elf::SHT_PROGBITS),
    );
    obj.section_mut(note).flags = object::SectionFlags::Elf { sh_flags: 0 };
    obj.add_symbol(Symbol {
        name: SUNW_DOF_SYMBOL.as_bytes().to_vec(),
        value: off,
        size: dof.len() as u64,
        kind: SymbolKind::Data,
        scope: SymbolScope::Linkage,
        weak: false,
        section: SymbolSection::Section(sec),
        flags: SymbolFlags::None,
    });
    for r in relocs {
        if r.offset.checked_add(8).is_none_or(|e| e > dof.len() as u64) {
            return Err(DofError::Elf(format!(
                "relocation at {} outside the DOF",
                r.offset
            )));
        }
        let sym = obj.symbol_id(r.symbol.as_bytes()).unwrap_or_else(|| {
            obj.add_symbol(Symbol {
                name: r.symbol.as_bytes().to_vec(),
                value: 0,
                size: 0,
                kind: SymbolKind::Text,
                scope: SymbolScope::Dynamic,
                weak: false,
                section: SymbolSection::Undefined,
                flags: SymbolFlags::None,
            })
        });
        obj.add_relocation(
            sec,
            Relocation {
                offset: off + r.offset,
                symbol: sym,
                addend: r.addend,
                flags: RelocationFlags::Generic {
                    kind: RelocationKind::Absolute,
                    encoding: RelocationEncoding::Generic,
                    size: 64,
                },
            },
        )
        .map_err(|e| DofError::Elf(e.to_string()))?;
    }
    if !stubs.is_empty() {
        add_stubs(&mut obj, stubs)?;
    }
    obj.write().map_err(|e| DofError::Elf(e.to_string()))
}

fn add_stubs(obj: &mut Object, stubs: &[String]) -> Result<()> {
    let text = obj.add_section(
        obj.segment_name(StandardSegment::Text).to_vec(),
        b".text.dtrace_usdt".to_vec(),
        SectionKind::Text,
    );
    let data = obj.add_section(
        obj.segment_name(StandardSegment::Data).to_vec(),
        b".data.dtrace_usdt".to_vec(),
        SectionKind::Data,
    );
    let data_sym = obj.section_symbol(data);
    let func = |obj: &mut Object, name: String, off: u64, size: u64| {
        obj.add_symbol(Symbol {
            name: name.into_bytes(),
            value: off,
            size,
            kind: SymbolKind::Text,
            scope: SymbolScope::Linkage,
            weak: false,
            section: SymbolSection::Section(text),
            flags: SymbolFlags::None,
        })
    };
    for p in stubs {
        let sem = obj.append_section_data(data, &[0, 0], 2);
        obj.add_symbol(Symbol {
            name: format!("__dtrace_sem_{p}").into_bytes(),
            value: sem,
            size: 2,
            kind: SymbolKind::Data,
            scope: SymbolScope::Compilation,
            weak: false,
            section: SymbolSection::Section(data),
            flags: SymbolFlags::None,
        });
        // `__dtraceenabled_<p>`, then `__dtrace_<p>` right after it.
        let mut code = IS_ENABLED_CODE.to_vec();
        code.push(0xc3);
        let off = obj.append_section_data(text, &code, 16);
        func(
            obj,
            format!("__dtraceenabled_{p}"),
            off,
            IS_ENABLED_CODE.len() as u64,
        );
        func(
            obj,
            format!("__dtrace_{p}"),
            off + PROBE_STUB_AFTER_ENABLED,
            1,
        );
        let addend = i64::try_from(sem).map_err(|_| DofError::Elf("data too large".into()))? - 4;
        obj.add_relocation(
            text,
            Relocation {
                offset: off + 3,
                symbol: data_sym,
                addend,
                flags: RelocationFlags::Generic {
                    kind: RelocationKind::Relative,
                    encoding: RelocationEncoding::Generic,
                    size: 32,
                },
            },
        )
        .map_err(|e| DofError::Elf(e.to_string()))?;
    }
    Ok(())
}

/// The contents of every `.SUNW_dof` section of an ELF file (there may be several in a linked
/// program). `Ok(None)` if `bytes` is not ELF.
pub fn dof_sections_from_elf(bytes: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
    if !bytes.starts_with(b"\x7fELF") {
        return Ok(None);
    }
    let f = object::File::parse(bytes).map_err(|e| DofError::Elf(e.to_string()))?;
    let mut out = Vec::new();
    for s in f.sections() {
        if s.name().ok() == Some(SUNW_DOF_SECTION) {
            out.push(s.data().map_err(|e| DofError::Elf(e.to_string()))?.to_vec());
        }
    }
    Ok(Some(out))
}
