//! `dtrace -G`: the ELF object it writes (named as DTrace names it) links with `gcc` and `ld -r`,
//! `dofdump` shows its DOF sections, and the DOF read back is the compiled program.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use dtrace_compiler::{compile, CompileOptions};
use dtrace_dof::program::{canonical_options, program_from_dof_bytes};

const SCRIPT: &str = r#"#!/usr/sbin/dtrace -s
#pragma D option quiet
#pragma D option bufsize=2m
BEGIN
/arg0 == 0/
{
    printf("hello %d\n", 7);
    @c[probefunc] = count();
    @q = quantize(arg1);
}
END
{
    printa("%s %@d\n", @c);
    exit(0);
}
"#;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dtrace-link-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn dtrace(dir: &Path, args: &[&str]) -> (i32, String) {
    let (rc, _, err) = common::outcome(
        &Command::new(env!("CARGO_BIN_EXE_dtrace"))
            .args(args)
            .current_dir(dir)
            .env_remove("DTRACE_OPT_QUIET")
            .output()
            .unwrap(),
    );
    (rc, err)
}

#[test]
fn script_becomes_an_object_holding_its_program() {
    let dir = scratch("script");
    std::fs::write(dir.join("hello.d"), SCRIPT).unwrap();
    let (rc, err) = dtrace(&dir, &["-G", "-s", "hello.d"]);
    assert_eq!((rc, err.as_str()), (0, ""));
    // A script named x.d gives x.o.
    let obj = std::fs::read(dir.join("hello.o")).unwrap();
    assert!(obj.starts_with(b"\x7fELF"));
    // The DOF read back is the program compiled from the script (less what DOF does not carry:
    // aggregation names, option spellings).
    let src = SCRIPT.split_once('\n').unwrap().1;
    let mut want = compile(src, &CompileOptions::default()).unwrap();
    for a in &mut want.aggregations {
        a.name.clear();
    }
    want.options = canonical_options(&want.options).unwrap();
    want.attrs.clear();
    // DOF's ECB descriptions carry no source line, nor does DOF carry the program's largest
    // tuple and dynamic variable (a program read from DOF sizes each variable by its own cost).
    for e in &mut want.ecbs {
        e.line = 0;
    }
    (want.max_tuple_size, want.max_dvar_size) = (0, 0);
    let got = program_from_dof_bytes(&obj).unwrap();
    assert_eq!(got, want);
    assert_eq!(
        got.options,
        vec![
            ("quiet".to_string(), None),
            ("bufsize".to_string(), Some("2097152".to_string()))
        ]
    );
    // dofdump's view of it: the string table first, then the first ECB's probe description; the
    // comments carry the compiler's version.
    let f = dtrace_dof::read_dof(&dtrace_dof::dof_sections_from_elf(&obj).unwrap().unwrap()[0])
        .unwrap();
    let text = dtrace_dof::dump::dump(&f);
    assert!(
        text.contains("[0] DOF_SECT_STRTAB align=1 flags=LOAD"),
        "{text}"
    );
    assert!(
        text.contains("[1] DOF_SECT_PROBEDESC align=4 flags=LOAD entsize=24 size=24\n  \"\":\"\":\"\":\"BEGIN\""),
        "{text}"
    );
    for s in [
        "DOF_SECT_ECBDESC",
        "DOF_SECT_ACTDESC",
        "DOF_SECT_OPTDESC",
        "DOF_SECT_COMMENTS",
        "DOF_SECT_UTSNAME",
    ] {
        assert!(text.contains(s), "{s}: {text}");
    }
    let dofdump = Path::new(env!("CARGO_BIN_EXE_dtrace")).with_file_name("dofdump");
    if dofdump.is_file() {
        let o = Command::new(&dofdump)
            .arg(dir.join("hello.o"))
            .output()
            .unwrap();
        assert!(o.status.success());
        // (The binary may be older than this build: compare the section lines only.)
        let sections = |t: &str| -> Vec<String> {
            t.lines()
                .filter(|l| l.starts_with('['))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(
            sections(&String::from_utf8_lossy(&o.stdout)),
            sections(&text)
        );
    } else {
        eprintln!(
            "note: {} not built; its text checked in-process",
            dofdump.display()
        );
    }
    // The object links: into a program with gcc, and into another object with ld -r.
    if dtrace_testkit::skip_unless(
        dtrace_testkit::have_program("gcc") && dtrace_testkit::have_program("ld"),
        "script_becomes_an_object_holding_its_program (linking)",
        "gcc or ld not installed",
    ) {
        std::fs::write(dir.join("main.c"), "int main(void) { return 0; }\n").unwrap();
        let o = Command::new("gcc")
            .args(["-o", "prog", "main.c", "hello.o"])
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let o = Command::new("ld")
            .args(["-r", "-o", "joined.o", "hello.o"])
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            o.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let linked = std::fs::read(dir.join("prog")).unwrap();
        assert_eq!(program_from_dof_bytes(&linked).unwrap(), got);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn output_names_follow_dtrace() {
    let dir = scratch("names");
    std::fs::write(dir.join("a.d"), "BEGIN { exit(0); }\n").unwrap();
    std::fs::write(dir.join("script"), "BEGIN { exit(1); }\n").unwrap();
    // -o names the object.
    assert_eq!(dtrace(&dir, &["-G", "-o", "out.o", "-s", "a.d"]).0, 0);
    assert!(dir.join("out.o").is_file());
    assert!(!dir.join("a.o").exists());
    // A description, or a script not named *.d, gives d.out.
    assert_eq!(dtrace(&dir, &["-G", "-n", "BEGIN { exit(2); }"]).0, 0);
    let p = program_from_dof_bytes(&std::fs::read(dir.join("d.out")).unwrap()).unwrap();
    assert_eq!(p.ecbs[0].probe.name, "BEGIN");
    std::fs::remove_file(dir.join("d.out")).unwrap();
    assert_eq!(dtrace(&dir, &["-G", "-s", "script"]).0, 0);
    assert!(dir.join("d.out").is_file());
    // Several programs without -o: x.o for x.d, d.out.N for the others (N their position).
    assert_eq!(
        dtrace(&dir, &["-G", "-s", "a.d", "-s", "script", "-n", "END"]).0,
        0
    );
    assert!(dir.join("a.o").is_file());
    assert!(dir.join("d.out.1").is_file());
    assert!(dir.join("d.out.2").is_file());
    let p = program_from_dof_bytes(&std::fs::read(dir.join("d.out.2")).unwrap()).unwrap();
    assert_eq!(p.ecbs[0].probe.name, "END");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn link_errors() {
    let dir = scratch("errors");
    let (rc, err) = dtrace(&dir, &["-G"]);
    assert_eq!(rc, 2);
    assert_eq!(
        err,
        "dtrace: -G requires one or more scripts or enabling options\n"
    );
    let (rc, err) = dtrace(&dir, &["-G", "-s", "nosuch.d"]);
    assert_eq!(rc, 1);
    assert_eq!(
        err,
        "dtrace: failed to open nosuch.d: No such file or directory\n"
    );
    std::fs::write(dir.join("bad.d"), "BEGIN { x = ; }\n").unwrap();
    let (rc, err) = dtrace(&dir, &["-G", "-s", "bad.d"]);
    assert_eq!(rc, 1);
    assert!(
        err.starts_with("dtrace: failed to compile script bad.d: line 1: "),
        "{err}"
    );
    assert!(!dir.join("bad.o").exists());
    // Operands are object files with USDT probe sites to process (tests/dof_usdt.rs).
    std::fs::write(dir.join("ok.d"), "BEGIN {}\n").unwrap();
    let (rc, err) = dtrace(&dir, &["-G", "-s", "ok.d", "app.o"]);
    assert_eq!(rc, 1);
    assert_eq!(
        err,
        "dtrace: failed to open app.o: No such file or directory\n"
    );
    assert!(!dir.join("ok.o").exists());
    // -G is a mode of its own.
    let (rc, err) = dtrace(&dir, &["-G", "-l", "-n", "BEGIN"]);
    assert_eq!(rc, 2);
    assert!(
        err.starts_with("dtrace: only one of the [-AGhlV] options can be specified at a time\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}
