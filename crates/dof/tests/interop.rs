//! Interoperability with an independent DOF implementation (the `dof` crate from crates.io, used by
//! Oxide's `usdt`): the DOF we write is accepted by it, and DOF it writes is accepted by ours.

mod common;

use std::collections::BTreeMap;

use dtrace_dof::*;

/// (name, function, address, offsets, is-enabled offsets, argument types)
type ProbeSummary = (String, String, u64, Vec<u32>, Vec<u32>, Vec<String>);

#[test]
fn independent_reader_accepts_our_dof() {
    let mut f = DofFile::new();
    f.add_usdt_provider(&common::usdt());
    let bytes = write_dof(&f).unwrap();
    let theirs = dof::des::deserialize_section(&bytes).expect("the dof crate reads our DOF");
    assert_eq!(theirs.ident.version, DOF_VERSION_2);
    assert_eq!(theirs.ident.dif_vers, DIF_VERSION_2);
    assert_eq!(theirs.ident.dif_ireg, DIF_DIR_NREGS);
    let p = &theirs.providers["myprov"];
    assert_eq!(p.name, "myprov");
    let start = &p.probes["start"];
    assert_eq!(start.function, "main");
    assert_eq!(start.offsets, vec![0x10, 0x24]);
    assert_eq!(start.enabled_offsets, vec![0x30]);
    assert_eq!(
        start.arguments,
        vec!["char *".to_string(), "int".to_string()]
    );
    let done = &p.probes["done"];
    assert_eq!(
        (done.function.as_str(), done.offsets.as_slice()),
        ("work", &[0x8u32][..])
    );
    assert!(done.enabled_offsets.is_empty());
}

#[test]
fn our_reader_accepts_independent_dof() {
    let mut probes = BTreeMap::new();
    probes.insert(
        "request-start".to_string(),
        dof::Probe {
            name: "request-start".into(),
            function: "handle".into(),
            address: 0x1000,
            offsets: vec![0x14, 0x40],
            enabled_offsets: vec![0x8],
            arguments: vec!["uint64_t".into(), "char *".into()],
        },
    );
    probes.insert(
        "request-done".to_string(),
        dof::Probe {
            name: "request-done".into(),
            function: "finish".into(),
            address: 0x2000,
            offsets: vec![0x4],
            enabled_offsets: vec![],
            arguments: vec![],
        },
    );
    let mut providers = BTreeMap::new();
    providers.insert(
        "web".to_string(),
        dof::Provider {
            name: "web".into(),
            probes,
        },
    );
    let section = dof::Section {
        providers,
        ..Default::default()
    };
    let bytes = section.as_bytes();
    let f = read_dof(&bytes).expect("our reader accepts the dof crate's DOF");
    assert_eq!(f.ident, DofIdent::default());
    let ps = f.usdt_providers().unwrap();
    assert_eq!(ps.len(), 1);
    assert_eq!(ps[0].name, "web");
    let mut got: Vec<ProbeSummary> = ps[0]
        .probes
        .iter()
        .map(|p| {
            (
                p.name.clone(),
                p.function.clone(),
                p.addr,
                p.offsets.clone(),
                p.enabled_offsets.clone(),
                p.native_args.clone(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            (
                "request-done".into(),
                "finish".into(),
                0x2000,
                vec![4],
                vec![],
                vec![]
            ),
            (
                "request-start".into(),
                "handle".into(),
                0x1000,
                vec![0x14, 0x40],
                vec![8],
                vec!["uint64_t".into(), "char *".into()]
            ),
        ]
    );
    // and what we read, we write back identically enough for them to read again
    let again = dof::des::deserialize_section(&write_dof(&f).unwrap()).unwrap();
    assert_eq!(again.providers["web"].probes.len(), 2);
}
