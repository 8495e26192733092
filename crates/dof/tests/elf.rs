//! ELF embedding: a relocatable object with the DOF in `.SUNW_dof`, as `dtrace -G` makes, that the
//! system linker links into a program with the probe addresses relocated.

mod common;

use object::{Object, ObjectSection, ObjectSymbol};

use dtrace_dof::*;

fn probe_addr_offsets(dof: &[u8]) -> Vec<u64> {
    let (i, h) = read_header(dof).unwrap();
    let raws = read_section_headers(dof, &i, &h).unwrap();
    let p = raws.iter().find(|r| r.kind == sect::PROBES).unwrap();
    (0..p.size / 48).map(|k| p.offset + 48 * k).collect()
}

#[test]
fn relocatable_object_carries_the_dof() {
    let s = common::sample(2, DOF_ENCODE_LSB);
    let dof = write_dof(&s.f).unwrap();
    let offs = probe_addr_offsets(&dof);
    let relocs: Vec<DofElfReloc> = offs
        .iter()
        .zip(["main", "work"])
        .map(|(&o, f)| DofElfReloc {
            offset: o,
            symbol: f.into(),
            addend: 0,
        })
        .collect();
    let elf = dof_to_elf(&dof, object::Architecture::X86_64, &relocs).unwrap();
    let obj = object::File::parse(&*elf).unwrap();
    assert_eq!(obj.kind(), object::ObjectKind::Relocatable);
    let sec = obj.section_by_name(SUNW_DOF_SECTION).unwrap();
    match sec.flags() {
        object::SectionFlags::Elf { sh_flags } => {
            assert_ne!(sh_flags & u64::from(object::elf::SHF_ALLOC), 0)
        }
        f => panic!("{f:?}"),
    }
    let object::File::Elf64(e) = &obj else {
        panic!("not ELF64")
    };
    let hdr = e
        .elf_section_table()
        .section(object::SectionIndex(sec.index().0))
        .unwrap();
    assert_eq!(hdr.sh_type.get(object::Endianness::Little), SHT_SUNW_DOF);
    assert_eq!(sec.data().unwrap(), &dof[..]);
    assert_eq!(sec.relocations().count(), 2);
    let sym = obj
        .symbols()
        .find(|s| s.name() == Ok(SUNW_DOF_SYMBOL))
        .unwrap();
    assert!(sym.is_global());
    assert_eq!(sym.size(), dof.len() as u64);
    assert_eq!(
        dof_sections_from_elf(&elf).unwrap().unwrap(),
        vec![dof.clone()]
    );
    assert_eq!(
        dof_sections_from_elf(&dof).unwrap(),
        None,
        "plain DOF is not ELF"
    );
    assert!(dof_to_elf(
        &dof,
        object::Architecture::X86_64,
        &[DofElfReloc {
            offset: dof.len() as u64,
            symbol: "x".into(),
            addend: 0
        }]
    )
    .is_err());
}

#[test]
fn linked_program_has_relocated_probe_addresses() {
    let gcc_ok = std::process::Command::new("gcc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !dtrace_testkit::skip_unless(
        gcc_ok,
        "linked_program_has_relocated_probe_addresses",
        "gcc not installed",
    ) {
        return;
    }
    if !dtrace_testkit::skip_unless(
        cfg!(target_arch = "x86_64"),
        "linked_program_has_relocated_probe_addresses",
        "x86-64 only",
    ) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("dtrace-dof-elf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut f = DofFile::new();
    f.add_usdt_provider(&common::usdt());
    let dof = write_dof(&f).unwrap();
    let offs = probe_addr_offsets(&dof);
    let relocs = vec![
        DofElfReloc {
            offset: offs[0],
            symbol: "main".into(),
            addend: 0,
        },
        DofElfReloc {
            offset: offs[1],
            symbol: "work".into(),
            addend: 0,
        },
    ];
    std::fs::write(
        dir.join("dof.o"),
        dof_to_elf(&dof, object::Architecture::X86_64, &relocs).unwrap(),
    )
    .unwrap();
    let dof_o = dir.join("dof.o");
    dtrace_testkit::compile_c(
        dtrace_testkit::CSource::Text("void work(void) {}\nint main(void) { work(); return 0; }\n"),
        &dir.join("prog"),
        &["-no-pie", &dof_o.to_string_lossy()],
    )
    .unwrap_or_else(|e| panic!("link failed: {e}"));
    let exe = std::fs::read(dir.join("prog")).unwrap();
    let dofs = dof_sections_from_elf(&exe).unwrap().unwrap();
    assert_eq!(dofs.len(), 1);
    let linked = read_dof(&dofs[0]).unwrap();
    let obj = object::File::parse(&*exe).unwrap();
    let addr = |n: &str| obj.symbols().find(|s| s.name() == Ok(n)).unwrap().address();
    let ps = linked.usdt_providers().unwrap();
    let by_name: std::collections::HashMap<&str, u64> = ps[0]
        .probes
        .iter()
        .map(|p| (p.function.as_str(), p.addr))
        .collect();
    assert_eq!(by_name["main"], addr("main"));
    assert_eq!(by_name["work"], addr("work"));
    assert_ne!(addr("work"), 0);
    let _ = std::fs::remove_dir_all(&dir);
}
