//! `dtrace -G`'s processing of relocatable objects: probe calls found through their relocations
//! become nops, is-enabled calls stay, sites are reported against their functions, the DOF's
//! providers carry them, and malformed objects are errors; plus a mutation smoke of the decoder.

use dtrace_dif::program::{ProbeDecl, ProviderDecl};
use dtrace_dof::usdt_link::*;
use dtrace_dof::*;
use dtrace_testkit::XorShift as Rng;
use object::write::{Object, Relocation, Symbol, SymbolSection};
use object::{
    Architecture, BinaryFormat, Endianness, RelocationFlags, SectionKind, SymbolFlags, SymbolKind,
    SymbolScope,
};

/// `f`: `call probe1; call enabled; nop; jmp probe2` (a tail call), with a local function `g`
/// after it holding one more `call probe1`.
fn object_with_sites(opcode: u8, r_type: u32) -> Vec<u8> {
    let mut o = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    let text = o.add_section(Vec::new(), b".text".to_vec(), SectionKind::Text);
    let mut code = vec![opcode, 0, 0, 0, 0, 0xe8, 0, 0, 0, 0, 0x90, 0xe9, 0, 0, 0, 0];
    code.extend_from_slice(&[0xe8, 0, 0, 0, 0, 0xc3]);
    o.append_section_data(text, &code, 16);
    let sym = |o: &mut Object, name: &str, value, size, scope, section| {
        o.add_symbol(Symbol {
            name: name.as_bytes().to_vec(),
            value,
            size,
            kind: SymbolKind::Text,
            scope,
            weak: false,
            section,
            flags: SymbolFlags::None,
        })
    };
    sym(
        &mut o,
        "f",
        0,
        16,
        SymbolScope::Dynamic,
        SymbolSection::Section(text),
    );
    sym(
        &mut o,
        "g",
        16,
        6,
        SymbolScope::Compilation,
        SymbolSection::Section(text),
    );
    for (at, name) in [
        (1, "__dtrace_myprov___probe1"),
        (6, "__dtraceenabled_myprov___probe1"),
        (12, "__dtrace_myprov___query__done"),
        (17, "__dtrace_myprov___probe1"),
    ] {
        let s = o.symbol_id(name.as_bytes()).unwrap_or_else(|| {
            sym(
                &mut o,
                name,
                0,
                0,
                SymbolScope::Dynamic,
                SymbolSection::Undefined,
            )
        });
        o.add_relocation(
            text,
            Relocation {
                offset: at,
                symbol: s,
                addend: -4,
                flags: RelocationFlags::Elf { r_type },
            },
        )
        .unwrap();
    }
    o.write().unwrap()
}

fn decls() -> Vec<ProviderDecl> {
    vec![ProviderDecl {
        attrs: Default::default(),
        name: "myprov".into(),
        probes: vec![
            ProbeDecl {
                name: "probe1".into(),
                native: vec!["int".into(), "char *".into()],
                xlated: vec!["int".into(), "string".into()],
                mapping: vec![0, 1],
            },
            ProbeDecl {
                name: "query-done".into(),
                ..Default::default()
            },
        ],
    }]
}

#[test]
fn probe_calls_become_nops_and_sites_are_found() {
    let obj = object_with_sites(0xe8, object::elf::R_X86_64_PLT32);
    let p = process_object(&obj).unwrap();
    assert_eq!(p.bytes.len(), obj.len());
    let text = |b: &[u8]| {
        let f = object::File::parse(b).unwrap();
        use object::{Object as _, ObjectSection as _};
        f.section_by_name(".text").unwrap().data().unwrap().to_vec()
    };
    let t = text(&p.bytes);
    assert_eq!(&t[0..5], &NOP5);
    assert_eq!(t[5], 0xe8, "is-enabled calls stay");
    assert_eq!(&t[11..16], &RET_NOP4);
    assert_eq!(&t[16..21], &NOP5);
    let got: Vec<_> = p
        .sites
        .iter()
        .map(|s| {
            (
                s.probe.as_str(),
                s.enabled,
                s.function.as_str(),
                s.base.as_str(),
                s.addend,
                s.offset,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("probe1", false, "f", "f", 0, 0),
            ("probe1", true, "f", "f", 0, 5),
            ("query-done", false, "f", "f", 0, 11),
            ("probe1", false, "g", "f", 16, 0),
        ]
    );
    // The rewritten relocations are R_X86_64_NONE: processing again finds the same sites and
    // changes nothing.
    let again = process_object(&p.bytes).unwrap();
    assert_eq!(again.sites, p.sites);
    assert_eq!(again.bytes, p.bytes);

    let provs = providers_from_sites(&decls(), &p.sites).unwrap();
    assert_eq!(provs.len(), 1);
    let (pv, bases) = &provs[0];
    assert_eq!(
        bases,
        &[
            ("f".to_string(), 0),
            ("f".to_string(), 16),
            ("f".to_string(), 0)
        ]
    );
    let p1 = pv
        .probes
        .iter()
        .find(|q| q.name == "probe1" && q.function == "f")
        .unwrap();
    assert_eq!(p1.offsets, [0]);
    assert_eq!(p1.enabled_offsets, [5]);
    assert_eq!(p1.xlated_args, ["int", "string"]);

    // The DOF carries them, with a relocation per probe address.
    let f = program::program_to_dof(&Default::default(), &Default::default()).unwrap();
    let (dof, relocs) = encode_with_providers(f, &provs).unwrap();
    assert_eq!(relocs.len(), 3);
    let back = read_dof(&dof).unwrap().usdt_providers().unwrap();
    assert_eq!(back, vec![pv.clone()]);
    let elf =
        dof_to_elf_with_stubs(&dof, Architecture::X86_64, &relocs, &stub_names(&decls())).unwrap();
    assert_eq!(dof_sections_from_elf(&elf).unwrap().unwrap(), vec![dof]);
}

#[test]
fn bad_objects_and_sites_are_errors() {
    // not a call
    let e = process_object(&object_with_sites(0x90, object::elf::R_X86_64_PLT32)).unwrap_err();
    assert!(matches!(e, UsdtLinkError::BadSite { .. }), "{e}");
    // a 64-bit relocation is no call's
    let e = process_object(&object_with_sites(0xe8, object::elf::R_X86_64_64)).unwrap_err();
    assert!(matches!(e, UsdtLinkError::BadSite { .. }), "{e}");
    assert!(matches!(
        process_object(b"not an object"),
        Err(UsdtLinkError::NotObject(_))
    ));
    // an undeclared probe
    let p = process_object(&object_with_sites(0xe8, object::elf::R_X86_64_PLT32)).unwrap();
    let mut d = decls();
    d[0].probes.pop();
    let e = providers_from_sites(&d, &p.sites).unwrap_err();
    assert!(matches!(e, UsdtLinkError::Undeclared { .. }), "{e}");
    assert!(parse_probe_symbol("__dtrace_noprobe").unwrap().is_err());
    assert!(parse_probe_symbol("memcpy").is_none());
}

#[test]
fn object_processing_survives_mutations() {
    let seed = object_with_sites(0xe8, object::elf::R_X86_64_PLT32);
    let mut rng = Rng(0x05d7);
    for _ in 0..3000 {
        let mut d = seed.clone();
        for _ in 0..1 + rng.below(3) {
            let i = rng.below(d.len());
            match rng.below(3) {
                0 => d[i] ^= 1 << rng.below(8),
                1 => d[i] = rng.next() as u8,
                _ => d.truncate(i),
            }
        }
        fuzz_entry::usdt_object(&d);
    }
}
