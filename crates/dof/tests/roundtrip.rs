//! DOF written then read gives the same sections, in the published layout.

mod common;

use dtrace_dof::*;

#[test]
fn every_section_kind_round_trips() {
    for (version, enc) in [
        (2, DOF_ENCODE_LSB),
        (1, DOF_ENCODE_LSB),
        (3, DOF_ENCODE_LSB),
        (2, DOF_ENCODE_MSB),
    ] {
        let s = common::sample(version, enc);
        validate(&s.f).unwrap();
        let kinds: std::collections::BTreeSet<u32> =
            s.f.sections.iter().map(|x| x.data.sect_type()).collect();
        assert_eq!(
            kinds.len(),
            if version >= 2 { 27 } else { 26 },
            "every section type of Table 6.1 is present"
        );
        let bytes = write_dof(&s.f).unwrap();
        let back = read_dof(&bytes).unwrap();
        assert_eq!(back, s.f, "version {version} encoding {enc}");
        assert_eq!(write_dof(&back).unwrap(), bytes);
        assert_eq!(
            back.difo(s.pred).unwrap().inttab,
            vec![1, u64::MAX, 0x1234_5678_9abc]
        );
        let mut want = common::usdt();
        if version < 2 {
            for p in &mut want.probes {
                p.enabled_offsets.clear();
            }
        }
        assert_eq!(back.usdt_providers().unwrap(), vec![want]);
    }
}

#[test]
fn header_and_section_headers_follow_the_published_layout() {
    let s = common::sample(2, DOF_ENCODE_LSB);
    let b = write_dof(&s.f).unwrap();
    assert_eq!(
        &b[0..10],
        &[
            0x7f,
            b'D',
            b'O',
            b'F',
            DOF_MODEL_LP64,
            DOF_ENCODE_LSB,
            2,
            2,
            8,
            8
        ]
    );
    assert!(b[10..16].iter().all(|&x| x == 0));
    let (ident, h) = read_header(&b).unwrap();
    assert_eq!(ident, DofIdent::default());
    assert_eq!((h.hdrsize, h.secsize, h.secoff), (64, 32, 64));
    assert_eq!(h.secnum as usize, s.f.sections.len());
    assert_eq!(h.filesz as usize, b.len());
    let raws = read_section_headers(&b, &ident, &h).unwrap();
    // loadable data forms a prefix of loadsz bytes; COMMENTS, SOURCE and UTSNAME come after it
    for r in &raws {
        let loadable = r.flags & DOF_SECF_LOAD != 0;
        assert_eq!(loadable, sect_loadable(r.kind), "{}", sect_name(r.kind));
        if r.kind == sect::NONE {
            continue;
        }
        if loadable {
            assert!(r.offset + r.size <= h.loadsz);
        } else {
            assert!(r.offset >= h.loadsz);
        }
        assert_eq!(r.offset % u64::from(r.align), 0);
    }
    let uts = raws.iter().find(|r| r.kind == sect::UTSNAME).unwrap();
    assert_eq!(uts.size, 5 * 257);
    let probes = raws.iter().find(|r| r.kind == sect::PROBES).unwrap();
    assert_eq!((probes.entsize, probes.align, probes.size), (48, 8, 96));
    let prov = raws.iter().find(|r| r.kind == sect::PROVIDER).unwrap();
    assert_eq!(prov.size, 44);
    let dif = raws.iter().find(|r| r.kind == sect::DIF).unwrap();
    assert_eq!((dif.entsize, dif.align, dif.size), (4, 4, 12));
    let vt = raws.iter().find(|r| r.kind == sect::VARTAB).unwrap();
    assert_eq!((vt.entsize, vt.size), (20, 20));
    let v1 = write_dof(&common::sample(1, DOF_ENCODE_LSB).f).unwrap();
    let (i1, h1) = read_header(&v1).unwrap();
    let p1 = read_section_headers(&v1, &i1, &h1)
        .unwrap()
        .into_iter()
        .find(|r| r.kind == sect::PROVIDER)
        .unwrap();
    assert_eq!(p1.size, 40, "version-1 provider records have no prenoffs");
}

#[test]
fn dump_names_sections_and_strings() {
    let s = common::sample(2, DOF_ENCODE_LSB);
    let text = dump::dump(&read_dof(&write_dof(&s.f).unwrap()).unwrap());
    for want in [
        "DOF_SECT_ECBDESC",
        "\"syscall\":\"vmlinux\":\"read\":\"entry\"",
        "\"main\":\"start\"",
        "native=(char *, int) xlated=(string, int)",
        "name=\"myprov\"",
        "DOF_SECT_UTSNAME",
        "Linux host 6.8.0",
        "arg=\"%d",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
}

#[test]
fn dtrace_layout_puts_the_string_table_last_and_reads_back() {
    let mut f = DofFile::new();
    let st = f.add(Section::new(SectionData::StrTab(b"\0abc\0".to_vec())));
    let h = f.add_difo(&Difo {
        text: vec![0x2300_0100],
        inttab: vec![1],
        ..Default::default()
    });
    f.add(Section::new(SectionData::Comments(b"x\0".to_vec())));
    f.add(Section::new(SectionData::Source(Vec::new())));
    let b = write_dof_dtrace_layout(&f, st).unwrap();
    assert_eq!(read_dof(&b).unwrap(), f);
    let (info, hdr) = read_header(&b).unwrap();
    let raws = read_section_headers(&b, &info, &hdr).unwrap();
    let hdrs_end = 64 + 32 * f.sections.len() as u64;
    // DIF, INTTAB (8-aligned), DIFOHDR, then the string table, then unloadable data at 8.
    assert_eq!(raws[1].offset, hdrs_end);
    assert_eq!(raws[2].offset, (hdrs_end + 4).div_ceil(8) * 8);
    assert_eq!(raws[3].offset, raws[2].offset + 8);
    assert_eq!(raws[st as usize].offset, raws[3].offset + raws[3].size);
    let loadsz = raws[0].offset + 5;
    assert_eq!(hdr.loadsz, loadsz);
    assert_eq!(raws[4].offset, loadsz.div_ceil(8) * 8);
    // An empty section still has its place.
    assert_eq!(raws[5].offset, raws[4].offset + 2);
    assert_eq!(hdr.filesz, b.len() as u64);
    assert_eq!(f.difo(h).unwrap().inttab, vec![1]);
}
