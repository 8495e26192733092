//! Entry points shared by the cargo-fuzz targets and the in-tree fuzz smoke: decode untrusted bytes
//! (DOF or ELF), and on success exercise the dump, the DIFO and provider views, the program loader,
//! and write/read round trips. None may panic, hang or allocate without bound.

/// DOF bytes (or an ELF file carrying DOF).
pub fn dof(data: &[u8]) {
    if let Ok(Some(secs)) = crate::dof_sections_from_elf(data) {
        for s in secs {
            one(&s);
        }
        return;
    }
    one(data);
}

fn one(data: &[u8]) {
    let Ok(f) = crate::read_dof(data) else { return };
    let _ = crate::dump::dump(&f);
    let _ = f.usdt_providers();
    for i in 0..f.sections.len() as u32 {
        let _ = f.difo(i);
    }
    // A program loaded from DOF is a fixed point of writing and loading again.
    if let Ok(p) = crate::program::program_from_dof(&f) {
        let extras = crate::program::ProgramDofExtras::default();
        let again = crate::program::program_to_dof(&p, &extras)
            .and_then(|g| crate::program::program_from_dof(&g))
            .expect("a loaded program must write and load again");
        assert_eq!(
            again, p,
            "a loaded program changed when written and loaded again"
        );
    }
    let bytes = match crate::write_dof(&f) {
        Ok(b) => b,
        Err(crate::DofError::TooLarge(_)) => return, // hostile alignments: refused, not allocated
        Err(e) => panic!("a valid object failed to encode: {e}"),
    };
    let back = crate::read_dof(&bytes).expect("our own output must read back");
    if back != f {
        let differs = f
            .sections
            .iter()
            .zip(&back.sections)
            .position(|(a, b)| a != b);
        panic!("round trip changed the object (first differing section: {differs:?})");
    }
}

/// A relocatable object given to `dtrace -G`: its probe sites are found and rewritten, and those
/// grouped into providers, without panics; rewriting never changes the object's size.
pub fn usdt_object(data: &[u8]) {
    let Ok(p) = crate::usdt_link::process_object(data) else {
        return;
    };
    assert_eq!(p.bytes.len(), data.len(), "rewriting changed the size");
    let decls: Vec<dtrace_dif::program::ProviderDecl> = p
        .sites
        .iter()
        .map(|s| dtrace_dif::program::ProviderDecl {
            attrs: Default::default(),
            name: s.provider.clone(),
            probes: vec![dtrace_dif::program::ProbeDecl {
                name: s.probe.clone(),
                ..Default::default()
            }],
        })
        .collect();
    let _ = crate::usdt_link::providers_from_sites(&decls, &p.sites);
}
