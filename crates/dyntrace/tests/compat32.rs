//! 32-bit (compat) processes: an `-m32` program is counted exactly in both modes, with the same
//! profile either way.

mod common;
use common::*;
use std::path::PathBuf;

fn compile32(extra: &[&str]) -> Option<PathBuf> {
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/progs/spin32.c");
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "dyntrace-spin32{}-{}",
        extra.join(""),
        std::process::id()
    ));
    let flags = [&["-m32", "-O1"], extra].concat();
    dtrace_testkit::compile_c(
        dtrace_testkit::CSource::File(std::path::Path::new(src)),
        &out,
        &flags,
    )
    .ok()
}

#[test]
fn m32_programs_count_exactly_in_both_modes() {
    if setup("m32").is_none() {
        return;
    }
    let (dynamic, fixed) = (compile32(&[]), compile32(&["-static"]));
    if !dtrace_testkit::skip_unless(
        dynamic.is_some() && fixed.is_some(),
        "m32",
        "gcc cannot build -m32 programs (gcc-multilib)",
    ) {
        return;
    }
    let (Some(dynamic), Some(fixed)) = (dynamic, fixed) else {
        return;
    };
    let dir = scratch("m32");
    let strip = |t: &Trace| {
        let mut p = t.programs[0].clone();
        p.regions.remove("text:vdso");
        p.regions
    };
    let mut small = Vec::new();
    for mode in ["step", "block"] {
        let opts = ["--no-randomize", "-m", mode];
        let a = trace(&dir, "a", &opts, &fixed, &["1000"]);
        let b = trace(&dir, "b", &opts, &fixed, &["2000"]);
        let (pa, pb) = (&a.programs[0], &b.programs[0]);
        assert!(pa.total("text:program") > 1500);
        assert_eq!(
            pb.total("text:program") - pa.total("text:program"),
            3 * 1000,
            "{mode}"
        );
        assert_eq!(
            pb.mnemonic("text:program", "DEC") - pa.mnemonic("text:program", "DEC"),
            1000,
            "{mode}"
        );
        small.push(strip(&a));
    }
    assert_eq!(small[0], small[1], "step and block profiles differ");
    // Dynamically linked: the 32-bit loader and libc count as text:library.
    let d = trace(&dir, "d", &["-m", "block"], &dynamic, &["100"]);
    assert!(d.programs[0].total("text:library") > 10000);
    assert!(d.programs[0].mnemonic("text:program", "DEC") >= 100);
}
