//! Compatibility of our data files with the original dyntrace's: its IA-32 opcode file validates
//! against our oplist.dtd and loads; our own files validate against our DTDs.

mod common;
use common::*;
use dtrace_dyntrace::oplist::{OpList, BUILTIN_OPLIST};
use std::path::{Path, PathBuf};
use std::process::Command;

fn shared(file: &str) -> Option<PathBuf> {
    [
        PathBuf::from("/work/shared/dyntrace").join(file),
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/dyntrace")
            .join(file),
    ]
    .into_iter()
    .find(|p| p.exists())
}

fn xmllint_valid(dtd: &Path, file: &Path) -> Result<(), String> {
    let o = Command::new("xmllint")
        .args(["--noout", "--dtdvalid"])
        .arg(dtd)
        .arg(file)
        .output()
        .map_err(|e| e.to_string())?;
    if o.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&o.stderr).into_owned())
    }
}

fn share(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("share/dyntrace")
        .join(file)
}

#[test]
fn original_ia32_file_loads_with_rex_added() {
    let Some(f) = shared("oplist-x86.xml") else {
        dtrace_testkit::skip_unless(
            false,
            "original_ia32_file",
            "shared/dyntrace is not beside the project",
        );
        return;
    };
    let text = std::fs::read_to_string(&f).unwrap();
    let l = OpList::parse(&text, "oplist-x86.xml").unwrap();
    assert_eq!(l.ops.len(), 948);
    assert_eq!(l.prefixes.len(), 10, "9 declared, REX added");
    assert!(!l.is_decoder_keyed());
}

#[test]
fn data_files_validate_against_our_dtds() {
    if !dtrace_testkit::skip_unless(
        dtrace_testkit::have_program("xmllint"),
        "dtd_validation",
        "xmllint is not installed",
    ) {
        return;
    }
    xmllint_valid(&share("oplist.dtd"), &share("oplist-x86_64.xml")).unwrap();
    if let Some(f) = shared("oplist-x86.xml") {
        xmllint_valid(&share("oplist.dtd"), &f).unwrap();
    }
    // Our generated file covers every instruction the decoder knows.
    let l = OpList::parse(BUILTIN_OPLIST, "builtin").unwrap();
    assert_eq!(
        l.ops.len(),
        dtrace_dyntrace::oplist_gen::described_codes().count()
    );
    assert!(l.ops.len() > 4000);
}

#[test]
fn profiles_from_the_original_opcode_file_validate() {
    let Some(prog) = setup("original_file_profile") else {
        return;
    };
    let Some(f) = shared("oplist-x86.xml") else {
        dtrace_testkit::skip_unless(
            false,
            "original_file_profile",
            "shared/dyntrace is not beside the project",
        );
        return;
    };
    let dir = scratch("compat");
    let out = dir.join("o.trace");
    let o = Command::new(dyntrace())
        .arg("-f")
        .arg(&f)
        .arg("-o")
        .arg(&out)
        .arg(&prog)
        .args(["spin", "10"])
        .output()
        .unwrap();
    assert!(o.status.success());
    // IA-32 has no SYSCALL: it counts as unknown, with a warning.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("warning: unknown opcode at pc 0x"), "{err}");
    validate(&out);
    let t = read_trace(&out);
    assert!(t
        .prefixes
        .iter()
        .any(|(id, d)| id == "J" && d.starts_with("REX")));
    assert!(t.programs[0].mnemonic("text:library", "(unknown)") > 0);
    assert_eq!(t.programs[0].mnemonic("text:program", "DEC"), 10);
}
