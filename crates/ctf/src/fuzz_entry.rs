//! Entry points shared by the cargo-fuzz targets and the in-tree fuzz smoke tests: each decodes
//! untrusted bytes and, when they are accepted, exercises everything a consumer would call on the
//! result. None may panic, hang or allocate without bound.

use crate::container::Container;

fn exercise(c: &Container) {
    for (id, _) in c.iter().take(2000) {
        let _ = c.type_name(id);
        let _ = c.size_of(id);
        let _ = c.align_of(id);
        let _ = c.resolve(id);
        let _ = c.member(id, "x");
        let _ = c.enumerators(id);
    }
    let _ = c.lookup_by_name("struct x *");
    let _ = c.lookup_by_name("const int");
    let _ = crate::dump::dump(c, None, crate::dump::DumpOptions::default());
    if let Ok(b) = crate::write_ctf(c, crate::WriteOptions::default()) {
        let back = crate::read_ctf(&b).expect("our own output must read back");
        assert!(back == *c, "round trip changed the container");
    }
}

/// CTF bytes.
pub fn ctf(data: &[u8]) {
    if let Ok(c) = crate::read_ctf(data) {
        exercise(&c);
    }
}

/// BTF bytes.
pub fn btf(data: &[u8]) {
    if let Ok(c) = crate::btf_to_ctf(data) {
        exercise(&c);
    }
}

/// ELF bytes with DWARF.
pub fn dwarf(data: &[u8]) {
    if let Ok(c) = crate::dwarf_to_ctf_from_elf(data) {
        exercise(&c);
    }
}
