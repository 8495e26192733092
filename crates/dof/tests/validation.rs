//! The reader rejects malformed DOF with typed errors: header, section header and cross-section checks.

mod common;

use dtrace_dof::*;

fn good() -> (common::Sample, Vec<u8>) {
    let s = common::sample(2, DOF_ENCODE_LSB);
    let b = write_dof(&s.f).unwrap();
    (s, b)
}

fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}
fn put64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn header_errors() {
    let (_, b) = good();
    let check = |f: &dyn Fn(&mut Vec<u8>), what: &str| {
        let mut x = b.clone();
        f(&mut x);
        assert!(read_dof(&x).is_err(), "{what} accepted");
    };
    assert_eq!(
        read_dof(&b[..63]).unwrap_err(),
        DofError::Truncated {
            what: "DOF header",
            offset: 0,
            need: 64,
            have: 63
        }
    );
    check(&|x| x[1] = b'X', "bad magic");
    check(&|x| x[DOF_ID_MODEL] = 7, "bad model");
    check(&|x| x[DOF_ID_ENCODING] = 0, "bad encoding");
    check(&|x| x[DOF_ID_VERSION] = 4, "DOF version 4");
    check(&|x| x[DOF_ID_DIFVERS] = 3, "DIF version 3");
    check(&|x| x[DOF_ID_DIFIREG] = 9, "9 registers");
    check(&|x| x[12] = 1, "padding");
    check(&|x| put32(x, 16, 1), "flags");
    check(&|x| put32(x, 24, 16), "section header size");
    check(&|x| put64(x, 32, 60), "misaligned section headers");
    check(&|x| put64(x, 48, u64::MAX), "file size beyond the input");
    check(&|x| put64(x, 40, 64), "section headers beyond loadsz");
    check(&|x| put32(x, 28, u32::MAX), "huge section count");
    assert!(matches!(
        read_dof(&{
            let mut x = b.clone();
            x[0] = 0;
            x
        }),
        Err(DofError::BadMagic)
    ));
}

fn section_header_offset(b: &[u8], kind: u32) -> usize {
    let (i, h) = read_header(b).unwrap();
    let raws = read_section_headers(b, &i, &h).unwrap();
    64 + 32 * raws.iter().position(|r| r.kind == kind).unwrap()
}

#[test]
fn section_header_errors() {
    let (_, b) = good();
    let dif = section_header_offset(&b, sect::DIF);
    let mut x = b.clone();
    put32(&mut x, dif + 4, 3); // alignment 3
    assert!(matches!(read_dof(&x), Err(DofError::BadSection { .. })));
    let mut x = b.clone();
    let off = u64::from_le_bytes(x[dif + 16..dif + 24].try_into().unwrap());
    put64(&mut x, dif + 16, off + 2); // misaligned offset
    assert!(matches!(read_dof(&x), Err(DofError::BadSection { .. })));
    let mut x = b.clone();
    put64(&mut x, dif + 24, 1 << 40); // beyond loadsz
    assert!(matches!(read_dof(&x), Err(DofError::BadSection { .. })));
    let mut x = b.clone();
    put32(&mut x, dif + 12, 8); // DIF entry size 8
    assert!(read_dof(&x).is_err());
    let mut x = b.clone();
    put32(&mut x, dif + 8, 0); // DIF not loadable, linked from a loadable DIFOHDR
    assert!(read_dof(&x).is_err());
}

#[test]
fn link_and_string_errors() {
    let s = common::sample(2, DOF_ENCODE_LSB);
    let with = |f: &dyn Fn(&mut DofFile)| {
        let mut x = s.f.clone();
        f(&mut x);
        let v = validate(&x);
        let r = read_dof(&write_dof(&x).unwrap());
        assert_eq!(v.is_err(), r.is_err());
        r
    };
    let ecb = s.ecb as usize;
    let r = with(&|f| {
        if let SectionData::EcbDesc(e) = &mut f.sections[ecb].data {
            e.probes = 9999;
        }
    });
    assert!(matches!(r, Err(DofError::BadLink { to: 9999, .. })));
    let r = with(&|f| {
        if let SectionData::EcbDesc(e) = &mut f.sections[ecb].data {
            e.pred = e.actions; // an ACTDESC where a DIFOHDR belongs
        }
    });
    assert!(matches!(r, Err(DofError::BadLink { .. })));
    let r = with(&|f| {
        for sec in &mut f.sections {
            if let SectionData::ProbeDesc(p) = &mut sec.data {
                p.name = 10_000;
            }
        }
    });
    assert!(matches!(r, Err(DofError::BadString { offset: 10_000, .. })));
    let r = with(&|f| {
        for sec in &mut f.sections {
            if let SectionData::StrTab(t) = &mut sec.data {
                t.push(b'x');
            }
        }
    });
    assert!(r.is_err(), "string table without a final NUL");
    let pred = s.pred as usize;
    let r = with(&|f| {
        if let SectionData::DifoHdr(h) = &mut f.sections[pred].data {
            h.links.remove(0); // no DIF text
        }
    });
    assert!(matches!(
        r,
        Err(DofError::BadSection {
            kind: "DIFOHDR",
            ..
        })
    ));
    let r = with(&|f| {
        if let SectionData::DifoHdr(h) = &mut f.sections[pred].data {
            let first = h.links[0];
            h.links.push(first); // two DIF sections
        }
    });
    assert!(r.is_err());
    let r = with(&|f| {
        for sec in &mut f.sections {
            if let SectionData::RelTab(rs) = &mut sec.data {
                rs[0].offset = 16; // target is 16 bytes: a setx at 16 runs past it
            }
        }
    });
    assert!(r.is_err());
    let r = with(&|f| {
        for sec in &mut f.sections {
            if let SectionData::Probes(ps) = &mut sec.data {
                ps[1].noffs = 50;
            }
        }
    });
    assert!(r.is_err());
    let r = with(&|f| {
        for sec in &mut f.sections {
            if let SectionData::PrArgs(a) = &mut sec.data {
                a[1] = 5; // maps to native argument 5 of 2
            }
        }
    });
    assert!(r.is_err());
}
