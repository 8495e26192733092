//! BTF to CTF: every BTF kind on a hand-built blob, split (module) BTF, and the running kernel's
//! `vmlinux` cross-checked against `bpftool btf dump`.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use dtrace_ctf::*;

#[test]
fn every_btf_kind_converts() {
    let blob = common::sample_btf();
    let c = btf_to_ctf(&blob).unwrap();
    c.validate().unwrap();
    let s = c.lookup_by_name("struct s").unwrap();
    assert_eq!(c.size_of(s).unwrap(), 24);
    let y = c.member(s, "y").unwrap().unwrap();
    assert_eq!(
        (y.offset_bits, c.type_name(y.type_id).unwrap().as_str()),
        (64, "int *")
    );
    let f = c.member(s, "flags").unwrap().unwrap();
    assert_eq!(f.offset_bits, 128);
    assert!(matches!(
        c.get(f.type_id).unwrap(),
        Type {
            kind: TypeKind::Integer(IntEncoding {
                bits: 3,
                flags: 0,
                ..
            }),
            root: false,
            size: 4,
            ..
        }
    ));
    let g = c.member(s, "more").unwrap().unwrap();
    assert_eq!(g.offset_bits, 131);
    assert!(matches!(
        c.get(g.type_id).unwrap().kind,
        TypeKind::Integer(IntEncoding { bits: 5, .. })
    ));
    assert_eq!(
        c.lookup_by_name("unsigned int")
            .map(|u| c.size_of(u).unwrap()),
        Some(4)
    );
    assert!(c.lookup_by_name("union u").is_some());
    assert!(c.lookup_by_name("union fwd_u").is_some());
    assert_eq!(
        c.enum_value(c.lookup_by_name("enum color").unwrap(), "GREEN")
            .unwrap(),
        Some(7)
    );
    let e64 = c.lookup_by_name("enum e64").unwrap();
    assert_eq!(c.size_of(e64).unwrap(), 8);
    assert_eq!(c.enum_value(e64, "SMALL").unwrap(), Some(5));
    let myint = c.lookup_by_name("myint").unwrap();
    assert_eq!(c.type_name(c.resolve(myint).unwrap()).unwrap(), "int");
    let p = c.lookup_by_name("my_printf").unwrap();
    let TypeKind::Function(fi) = &c.get(p).unwrap().kind else {
        panic!("not a function")
    };
    assert!(fi.varargs);
    assert_eq!(fi.args.len(), 1);
    assert_eq!(c.type_name(fi.args[0]).unwrap(), "int *");
    assert_eq!(
        c.lookup_by_name("double").map(|d| c.size_of(d).unwrap()),
        Some(8)
    );
    // VAR, DATASEC, DECL_TAG dropped; TYPE_TAG transparent: the pointer to the tagged int is int *
    assert!(c.lookup_by_name("counter").is_none());
    let names: Vec<String> = c.iter().map(|(id, _)| c.type_name(id).unwrap()).collect();
    assert_eq!(
        names.iter().filter(|n| *n == "int *").count(),
        2,
        "{names:?}"
    );
    let back = read_ctf(&write_ctf(&c, WriteOptions::default()).unwrap()).unwrap();
    assert_eq!(back, c);
}

#[test]
fn split_btf_becomes_a_child_container() {
    let base = common::sample_btf();
    let base_btf = Btf::parse(&base).unwrap();
    let str_len = u32::from_le_bytes(base[20..24].try_into().unwrap());
    let mut m = common::BtfBuilder::split(str_len);
    let pid = m.s("pid");
    let s_of_base = 5u32;
    let next = base_btf.max_id() + 1;
    let sp = m.s("sp");
    m.t("mod_s", 4, 2, false, 16, &[pid, 1, 0, sp, next + 1, 64]); // next: struct mod_s
    m.t("", 2, 0, false, s_of_base, &[]); // next+1: struct s *
    let module = m.finish();
    let parent = Arc::new(btf_to_ctf(&base).unwrap());
    let child = btf_to_ctf_child(&module, &base, parent.clone(), "vmlinux").unwrap();
    assert!(child.is_child());
    let ms = child.lookup_by_name("struct mod_s").unwrap();
    assert!(ms.is_child());
    let sp = child.member(ms, "sp").unwrap().unwrap();
    assert_eq!(child.type_name(sp.type_id).unwrap(), "struct s *");
    assert_eq!(
        child
            .size_of(child.lookup_by_name("struct s").unwrap())
            .unwrap(),
        24
    );
    let bytes = write_ctf(&child, WriteOptions::default()).unwrap();
    let mut back = read_ctf(&bytes).unwrap();
    back.set_parent(parent).unwrap();
    assert_eq!(back, child);
}

#[test]
fn malformed_btf_is_rejected() {
    let good = common::sample_btf();
    assert!(Btf::parse(&good[..10]).is_err());
    let mut bad = good.clone();
    bad[0] = 0;
    assert!(matches!(Btf::parse(&bad), Err(CtfError::BadMagic(_))));
    let mut bad = good.clone();
    // pointer (type 3) to a missing type
    let t3 = 24 + 12 + 4 + 12 + 4;
    bad[t3 + 8..t3 + 12].copy_from_slice(&999u32.to_le_bytes());
    assert!(matches!(Btf::parse(&bad), Err(CtfError::BadType { .. })));
}

struct BpfStruct {
    kind: String,
    size: u64,
    members: Vec<(String, u64, u32)>,
}

/// Parses the struct and union records of `bpftool btf dump file F` (raw format).
fn parse_bpftool(text: &str) -> (HashMap<String, BpfStruct>, usize) {
    let mut out: HashMap<String, BpfStruct> = HashMap::new();
    let mut cur: Option<(String, BpfStruct)> = None;
    let mut type_records = 0;
    let field = |line: &str, key: &str| -> Option<u64> {
        let i = line.find(key)? + key.len();
        line[i..]
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    for line in text.lines() {
        if line.starts_with('[') {
            if let Some((n, s)) = cur.take() {
                out.entry(n).or_insert(s);
            }
            let kind = line.split_whitespace().nth(1).unwrap_or("");
            if !matches!(kind, "VAR" | "DATASEC" | "DECL_TAG" | "TYPE_TAG") {
                type_records += 1;
            }
            if kind == "STRUCT" || kind == "UNION" {
                let name = line.split('\'').nth(1).unwrap_or("").to_string();
                if name != "(anon)" {
                    let size = field(line, "size=").unwrap_or(0);
                    cur = Some((
                        format!("{} {name}", kind.to_lowercase()),
                        BpfStruct {
                            kind: kind.into(),
                            size,
                            members: vec![],
                        },
                    ));
                }
            }
        } else if let Some((_, s)) = cur.as_mut() {
            let name = line.split('\'').nth(1).unwrap_or("").to_string();
            let name = if name == "(anon)" {
                String::new()
            } else {
                name
            };
            let off = field(line, "bits_offset=").unwrap_or(u64::MAX);
            let bits = field(line, "bitfield_size=").unwrap_or(0) as u32;
            s.members.push((name, off, bits));
        }
    }
    if let Some((n, s)) = cur.take() {
        out.entry(n).or_insert(s);
    }
    (out, type_records)
}

#[test]
fn vmlinux_btf_matches_bpftool() {
    let path = "/sys/kernel/btf/vmlinux";
    if !dtrace_testkit::skip_unless(
        std::path::Path::new(path).exists(),
        "vmlinux_btf_matches_bpftool",
        "no /sys/kernel/btf/vmlinux",
    ) {
        return;
    }
    let bpftool = ["/usr/sbin/bpftool", "/sbin/bpftool", "/usr/bin/bpftool"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    if !dtrace_testkit::skip_unless(
        bpftool.is_some(),
        "vmlinux_btf_matches_bpftool",
        "bpftool not installed (scripts/setup installs it)",
    ) {
        return;
    }
    let blob = std::fs::read(path).unwrap();
    let c = btf_to_ctf(&blob).unwrap();
    let out = std::process::Command::new(bpftool.unwrap())
        .args(["btf", "dump", "file", path])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "bpftool failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let (structs, type_records) = parse_bpftool(&text);
    let non_root = c.iter().filter(|(_, t)| !t.root).count();
    assert_eq!(
        c.len() - non_root,
        type_records,
        "one CTF type per BTF type record"
    );

    // the check: struct task_struct's comm at the offset BTF gives
    let ts = c
        .lookup_by_name("struct task_struct")
        .expect("struct task_struct");
    let comm = c.member(ts, "comm").unwrap().expect("comm member");
    let want = structs["struct task_struct"]
        .members
        .iter()
        .find(|m| m.0 == "comm")
        .unwrap()
        .1;
    assert_eq!(comm.offset_bits, want);
    assert_eq!(c.type_name(comm.type_id).unwrap(), "char [16]");

    // and every named struct and union, member by member
    let mut checked = 0;
    for (name, s) in &structs {
        let id = c
            .lookup_by_name(name)
            .unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(c.size_of(id).unwrap(), s.size, "{name} size");
        let members = c.members(id).unwrap();
        assert_eq!(members.len(), s.members.len(), "{name} member count");
        for (m, (bn, boff, bbits)) in members.iter().zip(&s.members) {
            assert_eq!((&m.name, m.offset_bits), (bn, *boff), "{name} member");
            if *bbits != 0 {
                match &c.get(m.type_id).unwrap().kind {
                    TypeKind::Integer(e) => {
                        assert_eq!(u32::from(e.bits), *bbits, "{name}.{bn} width")
                    }
                    TypeKind::Enum(_) => {}
                    k => panic!("{name}.{bn}: bit-field of kind {}", k.kind_name()),
                }
            }
        }
        assert_eq!(
            s.kind == "STRUCT",
            matches!(c.get(id).unwrap().kind, TypeKind::Struct(_))
        );
        checked += 1;
    }
    assert!(checked > 1000, "only {checked} structs checked");

    // the CTF we write reads back the same, and ctfdump shows task_struct's comm at that offset
    let bytes = write_ctf(&c, WriteOptions::default()).unwrap();
    assert_eq!(read_header(&bytes).unwrap().version, 3);
    let back = read_ctf(&bytes).unwrap();
    assert!(back == c);
    let dump = dump::dump(
        &back,
        None,
        dump::DumpOptions {
            header: false,
            sections: false,
            types: true,
        },
    );
    let start = dump
        .find(") STRUCT struct task_struct (")
        .or_else(|| dump.find("> STRUCT struct task_struct ("))
        .unwrap();
    let section = &dump[start..];
    let line = section
        .lines()
        .find(|l| l.trim_start().starts_with("comm "))
        .unwrap();
    assert!(line.contains(&format!("off={want} bits")), "{line}");
}
