//! DWARF to CTF: a C program compiled here with `gcc -g` (two units, linked with `ld -r`) gives its
//! structs, unions, enums, typedefs and bit-fields with the offsets `gdb`'s `ptype /o` reports.

use std::path::{Path, PathBuf};
use std::process::Command;

use dtrace_ctf::*;

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Compiles the two test units and links them into one relocatable object.
fn build_object(name: &str) -> Option<PathBuf> {
    if !dtrace_testkit::skip_unless(
        have("gcc") && have("ld"),
        name,
        "gcc/ld not installed (scripts/setup installs gcc)",
    ) {
        return None;
    }
    let dir = std::env::temp_dir().join(format!("dtrace-ctf-dwarf-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    for unit in ["types", "types2"] {
        dtrace_testkit::compile_c(
            dtrace_testkit::CSource::File(&data.join(format!("{unit}.c"))),
            &dir.join(format!("{unit}.o")),
            &["-g", "-O0", "-c"],
        )
        .unwrap();
    }
    let out = dir.join("both.o");
    let st = Command::new("ld")
        .arg("-r")
        .arg("-o")
        .arg(&out)
        .arg(dir.join("types.o"))
        .arg(dir.join("types2.o"))
        .status()
        .unwrap();
    assert!(st.success());
    Some(out)
}

#[derive(Debug, PartialEq)]
struct GdbMember {
    name: String,
    offset_bits: u64,
    size: u64,
    bits: Option<u64>,
}

fn member_name(decl: &str) -> String {
    let d = decl.trim().trim_end_matches(';');
    let d = d.split(" : ").next().unwrap();
    if let Some(i) = d.find("(*") {
        return d[i + 2..].split(')').next().unwrap().to_string();
    }
    let d = d.split('[').next().unwrap();
    d.rsplit([' ', '*']).next().unwrap().to_string()
}

/// Parses the top-level members of `ptype /o` output.
fn parse_ptype(text: &str) -> Vec<GdbMember> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    for line in text.lines() {
        let (comment, rest) = match line
            .trim_start()
            .strip_prefix("/*")
            .and_then(|l| l.split_once("*/"))
        {
            Some((c, r))
                if !c.contains("XXX") && !c.contains("offset") && !c.contains("total size") =>
            {
                (Some(c), r)
            }
            _ => (None, line),
        };
        let body = rest.trim();
        if let Some(c) = comment {
            if depth == 1 {
                let (off, size) = match c.split_once('|') {
                    Some((o, s)) => (o.trim(), s.trim()),
                    None => ("0", c.trim()),
                };
                let (byte, bit) = match off.split_once(':') {
                    Some((b, bit)) => (
                        b.trim().parse::<u64>().unwrap(),
                        bit.trim().parse::<u64>().unwrap(),
                    ),
                    None => (off.parse::<u64>().unwrap(), 0),
                };
                let bits = body
                    .split(" : ")
                    .nth(1)
                    .map(|b| b.trim_end_matches(';').trim().parse().unwrap());
                let name = if body.ends_with('{') {
                    String::from("{nested}")
                } else {
                    member_name(body)
                };
                out.push(GdbMember {
                    name,
                    offset_bits: byte * 8 + bit,
                    size: size.parse().unwrap(),
                    bits,
                });
            }
        }
        if body.ends_with('{') {
            depth += 1;
        }
        if body.starts_with('}') {
            depth -= 1;
            if depth == 1 {
                // the closing line of a nested aggregate names it: "} pos;" or "};"
                let name = body
                    .trim_start_matches('}')
                    .trim()
                    .trim_end_matches(';')
                    .to_string();
                if let Some(m) = out.iter_mut().rev().find(|m| m.name == "{nested}") {
                    m.name = name;
                }
            }
        }
    }
    out
}

fn gdb(obj: &Path, cmd: &str) -> String {
    let out = Command::new("gdb")
        .args(["-batch", "-nx", "-ex", cmd])
        .arg(obj)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gdb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn dwarf_types_match_gdb_ptype() {
    let Some(obj) = build_object("gdb") else {
        return;
    };
    if !dtrace_testkit::skip_unless(
        have("gdb"),
        "dwarf_types_match_gdb_ptype",
        "gdb not installed (scripts/setup installs it)",
    ) {
        return;
    }
    let bytes = std::fs::read(&obj).unwrap();
    let c = dwarf_to_ctf_from_elf(&bytes).unwrap();
    c.validate().unwrap();
    for name in ["struct node", "struct flags", "union value"] {
        let gm = parse_ptype(&gdb(&obj, &format!("ptype /o {name}")));
        assert!(!gm.is_empty(), "gdb printed no members for {name}");
        let id = c
            .lookup_by_name(name)
            .unwrap_or_else(|| panic!("{name} missing"));
        let ms = c.members(id).unwrap();
        assert_eq!(ms.len(), gm.len(), "{name}: {gm:?}");
        for (m, g) in ms.iter().zip(&gm) {
            assert_eq!(m.name, g.name, "{name}");
            assert_eq!(m.offset_bits, g.offset_bits, "{name}.{}", m.name);
            assert_eq!(
                c.size_of(m.type_id).unwrap(),
                g.size,
                "{name}.{} size",
                m.name
            );
            if let Some(bits) = g.bits {
                let Ok(Type {
                    kind: TypeKind::Integer(e),
                    ..
                }) = c.get(m.type_id)
                else {
                    panic!("{name}.{} not an int", m.name)
                };
                assert_eq!(u64::from(e.bits), bits, "{name}.{} width", m.name);
            }
        }
        let sz: u64 = gdb(&obj, &format!("print sizeof({name})"))
            .split('=')
            .nth(1)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(c.size_of(id).unwrap(), sz, "sizeof({name})");
    }
    // enums, typedefs and function types
    let color = c.lookup_by_name("enum color").unwrap();
    assert_eq!(
        gdb(&obj, "ptype enum color").trim(),
        "type = enum color {RED, GREEN = 5, BLUE = -3}"
    );
    assert_eq!(
        c.enumerators(color)
            .unwrap()
            .iter()
            .map(|e| (e.name.as_str(), e.value))
            .collect::<Vec<_>>(),
        [("RED", 0), ("GREEN", 5), ("BLUE", -3)]
    );
    let node_t = c.lookup_by_name("node_t").unwrap();
    assert_eq!(
        c.resolve(node_t).unwrap(),
        c.lookup_by_name("struct node").unwrap()
    );
    let ulong = c.lookup_by_name("ulong_t").unwrap();
    assert_eq!(
        c.type_name(c.resolve(ulong).unwrap()).unwrap(),
        "long unsigned int"
    );
    let pos = c
        .member(c.lookup_by_name("struct node").unwrap(), "y")
        .unwrap();
    assert_eq!(
        pos, None,
        "pos is a named member: its fields are not promoted"
    );
    let l = c
        .member(c.lookup_by_name("struct node").unwrap(), "p")
        .unwrap()
        .unwrap();
    assert_eq!(l.offset_bits, 24 * 8, "found through the anonymous union");
    let f = c.lookup_by_name("use_node").unwrap();
    assert_eq!(c.type_name(f).unwrap(), "use_node");
    // deduplicated across the two units: one struct flags, one enum color, one ulong_t
    let count = |n: &str, k: &str| {
        c.iter()
            .filter(|(_, t)| t.name == n && t.kind.kind_name() == k)
            .count()
    };
    assert_eq!(count("flags", "struct"), 1);
    assert_eq!(count("color", "enum"), 1);
    assert_eq!(count("ulong_t", "typedef"), 1);
    assert_eq!(
        count("node", "forward"),
        1,
        "the second unit's declaration stays a forward"
    );
    // and the container round-trips through CTF
    let back = read_ctf(&write_ctf(&c, WriteOptions::default()).unwrap()).unwrap();
    assert!(back == c);
}

#[test]
fn malformed_elf_is_an_error() {
    assert!(dwarf_to_ctf_from_elf(b"\x7fELF\x02\x01\x01").is_err());
    assert!(dwarf_to_ctf_from_elf(b"not an elf").is_err());
    let Some(obj) = build_object("trunc") else {
        return;
    };
    let bytes = std::fs::read(obj).unwrap();
    for cut in [64, bytes.len() / 3, bytes.len() / 2, bytes.len() - 1] {
        let _ = dwarf_to_ctf_from_elf(&bytes[..cut]);
    }
}

#[test]
fn dwarf_converter_survives_mutations() {
    let Some(obj) = build_object("fuzz") else {
        return;
    };
    let seed = std::fs::read(obj).unwrap();
    let mut x: u64 = 0xdead_beef;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..800 {
        let mut d = seed.clone();
        for _ in 0..1 + next() % 8 {
            let i = (next() % d.len() as u64) as usize;
            d[i] = next() as u8;
        }
        fuzz_entry::dwarf(&d);
    }
}

#[test]
fn dwarf2_bit_offsets_and_block_locations_agree_with_dwarf5() {
    if !dtrace_testkit::skip_unless(
        have("gcc"),
        "dwarf2_agrees_with_dwarf5",
        "gcc not installed",
    ) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("dtrace-ctf-dwarf2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/types.c");
    let conv = |flags: &[&str], out: &str| {
        let o = dtrace_testkit::compile_c(
            dtrace_testkit::CSource::File(&src),
            &dir.join(out),
            &[flags, &["-c"]].concat(),
        )
        .unwrap();
        dwarf_to_ctf_from_elf(&std::fs::read(o).unwrap()).unwrap()
    };
    let v2 = conv(&["-gdwarf-2", "-gstrict-dwarf"], "v2.o");
    let v5 = conv(&["-gdwarf-5"], "v5.o");
    for name in ["struct node", "struct flags", "union value"] {
        let a = v2.members(v2.lookup_by_name(name).unwrap()).unwrap();
        let b = v5.members(v5.lookup_by_name(name).unwrap()).unwrap();
        let key = |c: &Container, ms: &[Member]| -> Vec<(String, u64, String)> {
            ms.iter()
                .map(|m| {
                    (
                        m.name.clone(),
                        m.offset_bits,
                        c.type_name(m.type_id).unwrap(),
                    )
                })
                .collect()
        };
        assert_eq!(key(&v2, a), key(&v5, b), "{name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
