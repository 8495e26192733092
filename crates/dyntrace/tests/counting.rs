//! Exact instruction counts and region classification, in both counting modes.

mod common;
use common::*;

const N: i64 = 2000;

/// Counts in text:program for spin(n) and spin(2n) differ by exactly three instructions (ADD, DEC, JNZ)
/// per extra iteration.
fn exact_loop(mode: &str, opcodes: Option<&str>) {
    let Some(prog) = setup(&format!("exact_loop_{mode}")) else {
        return;
    };
    let dir = scratch(&format!("exact-{mode}-{}", opcodes.is_some()));
    let mut opts = vec!["-m", mode];
    if let Some(f) = opcodes {
        opts.extend(["-f", f]);
    }
    let n1 = N.to_string();
    let n2 = (2 * N).to_string();
    let a = trace(&dir, "a", &opts, &prog, &["spin", &n1]);
    let b = trace(&dir, "b", &opts, &prog, &["spin", &n2]);
    assert_eq!(a.state, "final");
    assert_eq!(a.programs.len(), 1);
    let (pa, pb) = (&a.programs[0], &b.programs[0]);
    assert_eq!(
        pb.total("text:program") - pa.total("text:program"),
        3 * N as u64
    );
    assert_eq!(
        pb.mnemonic("text:program", "DEC") - pa.mnemonic("text:program", "DEC"),
        N as u64
    );
    assert!(
        pa.total("text:library") > 0,
        "libc code is counted as text:library"
    );
}

#[test]
fn exact_loop_counts_step_mode() {
    exact_loop("step", None);
}

#[test]
fn exact_loop_counts_block_mode() {
    exact_loop("block", None);
}

#[test]
fn exact_loop_counts_with_the_original_ia32_opcode_file() {
    let f = "/work/shared/dyntrace/oplist-x86.xml";
    let f = if std::path::Path::new(f).exists() {
        f.to_string()
    } else {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/dyntrace/oplist-x86.xml"
        )
        .to_string()
    };
    if !dtrace_testkit::skip_unless(
        std::path::Path::new(&f).exists(),
        "original opcode file",
        "shared/dyntrace/oplist-x86.xml is not beside the project",
    ) {
        return;
    }
    exact_loop("step", Some(&f));
}

#[test]
fn both_modes_give_identical_profiles() {
    if setup("identical_profiles").is_none() {
        return;
    }
    let Some(prog) = static_probe_program() else {
        dtrace_testkit::skip_unless(
            false,
            "identical_profiles",
            "gcc cannot link statically (libc6-dev)",
        );
        return;
    };
    let dir = scratch("identical");
    // Without address randomization a static program takes the same path every run (alignment-
    // sensitive string functions included), so whole profiles must agree.
    for args in [
        &["spin", "500"][..],
        &["signal", "300"],
        &["rep", "4096"],
        &["regions", "50"],
    ] {
        let s = trace(&dir, "s", &["--no-randomize", "-m", "step"], &prog, args);
        let b = trace(&dir, "b", &["--no-randomize", "-m", "block"], &prog, args);
        assert_eq!(s.programs.len(), 1);
        assert_eq!(b.programs.len(), 1);
        let (mut x, mut y) = (s.programs[0].clone(), b.programs[0].clone());
        // The vDSO's clock reader retries when it races the kernel's clock update: its count
        // depends on timing, not on the tracer.
        x.regions.remove("text:vdso");
        y.regions.remove("text:vdso");
        assert!(x.total("text:program") > 1000);
        assert_eq!(
            x.regions, y.regions,
            "{args:?}: step and block counts differ"
        );
    }
    // Threads: how often libc's join and futex paths spin depends on scheduling, so only the
    // threads' own loops are compared (2 x 300 iterations either way).
    let s = trace(&dir, "s", &["-m", "step"], &prog, &["threads", "300"]);
    let b = trace(&dir, "b", &["-m", "block"], &prog, &["threads", "300"]);
    let spin_dec = ("DEC".to_string(), "o64 FF /1".to_string(), "L".to_string());
    for t in [&s, &b] {
        assert_eq!(
            t.programs[0].regions["text:program"].get(&spin_dec),
            Some(&600)
        );
    }
}

#[test]
fn regions_are_classified() {
    let Some(prog) = setup("regions") else { return };
    let dir = scratch("regions");
    let t = trace(&dir, "r", &[], &prog, &["regions", "10"]);
    let p = &t.programs[0];
    assert_eq!(p.name, prog.to_string_lossy());
    for (region, at_least) in [
        ("text:program", 30),
        ("text:library", 1000),
        ("text:vdso", 1),
        ("data", 1),
        ("stack", 1),
        ("data:heap", 1),
    ] {
        assert!(
            p.total(region) >= at_least,
            "region {region}: {:?}",
            p.regions.keys()
        );
    }
    // Exactly one RET ran in each of the anonymous mapping, the stack and the heap.
    for region in ["data", "stack", "data:heap"] {
        assert_eq!(p.total(region), 1, "{region}");
        assert_eq!(p.mnemonic(region, "RET"), 1, "{region}");
    }
}

#[test]
fn signal_handlers_are_counted_exactly() {
    let Some(prog) = setup_static("signals") else {
        return;
    };
    let dir = scratch("signals");
    // Statically linked: the C library's code counts as the program's, and some of its string
    // routines take a few more or fewer instructions with the stack's random alignment (seen: 1 run
    // in ~80 differs by 3 to 19 instructions): run both without address-space randomization.
    let opts = ["--no-randomize"];
    let a = trace(&dir, "a", &opts, &prog, &["signal", "1000"]);
    let b = trace(&dir, "b", &opts, &prog, &["signal", "2000"]);
    // spin runs twice: in the handler and after it.
    let d = b.programs[0].mnemonic("text:program", "DEC")
        - a.programs[0].mnemonic("text:program", "DEC");
    assert_eq!(d, 2000);
    assert_eq!(
        b.programs[0].total("text:program") - a.programs[0].total("text:program"),
        6000
    );
}

#[test]
fn rep_string_instructions_count_once() {
    let Some(prog) = setup("rep") else { return };
    let dir = scratch("rep");
    let a = trace(&dir, "a", &[], &prog, &["rep", "16"]);
    let b = trace(&dir, "b", &[], &prog, &["rep", "5000"]);
    let stos = |t: &Trace| t.programs[0].mnemonic("text:program", "STOSB");
    assert_eq!(stos(&a), 1);
    assert_eq!(stos(&b), 1);
    assert_eq!(
        a.programs[0].total("text:program"),
        b.programs[0].total("text:program")
    );
}

#[test]
fn zero_counts_are_listed_with_z() {
    let Some(prog) = setup_static("zeros") else {
        return;
    };
    let dir = scratch("zeros");
    let t = trace(&dir, "z", &["-z"], &prog, &["spin", "1"]);
    let p = &t.programs[0];
    let region = &p.regions["text:program"];
    assert!(region.values().any(|n| *n == 0));
    assert!(region.len() > 4000, "every op is listed");
}

/// Stops dyntrace -v reports for one trace.
fn stops_of(stderr: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(stderr);
    text.lines()
        .find_map(|l| {
            l.split(" instructions counted in ")
                .nth(1)?
                .split(" stops")
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no stop count in:\n{text}"))
}

#[test]
fn emulated_blocks_give_identical_profiles() {
    if setup("emulated_profiles").is_none() {
        return;
    }
    let Some(prog) = static_probe_program() else {
        dtrace_testkit::skip_unless(
            false,
            "emulated_profiles",
            "gcc cannot link statically (libc6-dev)",
        );
        return;
    };
    let dir = scratch("emulated");
    for args in [&["spin", "3000"][..], &["mix", "1500"], &["alu", "1500"]] {
        let s = trace(&dir, "s", &["--no-randomize", "-m", "step"], &prog, args);
        let b = trace(&dir, "b", &["--no-randomize", "-m", "block"], &prog, args);
        let n = trace(
            &dir,
            "n",
            &["--no-randomize", "-m", "block", "--no-emulate"],
            &prog,
            args,
        );
        let strip = |t: &Trace| {
            let mut p = t.programs[0].clone();
            p.regions.remove("text:vdso");
            p.regions
        };
        assert!(s.programs[0].total("text:program") > 4000);
        assert_eq!(strip(&s), strip(&b), "{args:?}: step and block differ");
        assert_eq!(
            strip(&s),
            strip(&n),
            "{args:?}: step and block --no-emulate differ"
        );
    }
    // The loops really are emulated: far fewer stops than loop iterations (a native block run
    // costs at least one stop per iteration).
    let out = dir.join("v.trace");
    let o = run(&[
        "-v",
        "-m",
        "block",
        "-o",
        out.to_str().unwrap(),
        prog.to_str().unwrap(),
        "spin",
        "20000",
    ]);
    assert!(o.status.success());
    let emulated = stops_of(&o.stderr);
    let o = run(&[
        "-v",
        "-m",
        "block",
        "--no-emulate",
        "-o",
        out.to_str().unwrap(),
        prog.to_str().unwrap(),
        "spin",
        "20000",
    ]);
    let native = stops_of(&o.stderr);
    assert!(native > 20000, "{native} stops without emulation");
    assert!(
        emulated + 15000 < native,
        "{emulated} stops with emulation, {native} without"
    );
}
