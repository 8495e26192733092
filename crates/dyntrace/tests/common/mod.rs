//! Helpers of dyntrace's integration tests: building the C test program, running dyntrace, reading
//! profiles.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The dyntrace binary under test.
pub fn dyntrace() -> &'static str {
    env!("CARGO_BIN_EXE_dyntrace")
}

/// A fresh scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("dyntrace-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

static PROBE: OnceLock<Option<PathBuf>> = OnceLock::new();
static PROBE_STATIC: OnceLock<Option<PathBuf>> = OnceLock::new();

fn compile(name: &str, extra: &[&str]) -> Option<PathBuf> {
    if !dtrace_testkit::have_program("gcc") {
        return None;
    }
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/progs/probe.c");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("dyntrace-{name}-{}", std::process::id()));
    let flags = [&["-O1", "-pthread", "-z", "execstack"], extra].concat();
    dtrace_testkit::compile_c(dtrace_testkit::CSource::File(Path::new(src)), &out, &flags).ok()
}

/// Compiles tests/progs/probe.c (once); `None` when gcc is missing.
pub fn probe_program() -> Option<PathBuf> {
    PROBE.get_or_init(|| compile("probe", &[])).clone()
}

/// The same, statically linked: its start-up takes the same path on every run, so whole profiles
/// can be compared between runs.
pub fn static_probe_program() -> Option<PathBuf> {
    PROBE_STATIC
        .get_or_init(|| compile("probe-static", &["-static"]))
        .clone()
}

static TRACEABLE: OnceLock<bool> = OnceLock::new();

/// Whether this machine lets us ptrace a child (no seccomp filter forbids it).
pub fn can_ptrace() -> bool {
    *TRACEABLE.get_or_init(|| {
        let d = scratch("ptrace-check");
        Command::new(dyntrace())
            .arg("-o")
            .arg(d.join("t.trace"))
            .arg("true")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    })
}

/// The probe program when tests can trace it, else a printed skip (or a failure under the
/// no-skip policy).
pub fn setup(test: &str) -> Option<PathBuf> {
    let prog = probe_program();
    if !dtrace_testkit::skip_unless(prog.is_some(), test, "gcc is not installed") {
        return None;
    }
    if !dtrace_testkit::skip_unless(can_ptrace(), test, "ptrace is not permitted here") {
        return None;
    }
    prog
}

/// Like [`setup`], but the statically linked probe (fast start-up: no dynamic linking to trace).
pub fn setup_static(test: &str) -> Option<PathBuf> {
    setup(test)?;
    let prog = static_probe_program();
    if !dtrace_testkit::skip_unless(
        prog.is_some(),
        test,
        "gcc cannot link statically (libc6-dev)",
    ) {
        return None;
    }
    prog
}

/// Runs dyntrace with `args`.
pub fn run(args: &[&str]) -> Output {
    Command::new(dyntrace())
        .args(args)
        .output()
        .expect("run dyntrace")
}

/// One `program` element.
#[derive(Debug, Clone, Default)]
pub struct Prog {
    pub name: String,
    pub pid: i32,
    /// region type -> (mnemonic, detail, prefixes) -> n
    pub regions: BTreeMap<String, BTreeMap<(String, String, String), u64>>,
}

impl Prog {
    /// Total count in a region.
    pub fn total(&self, region: &str) -> u64 {
        self.regions.get(region).map_or(0, |r| r.values().sum())
    }

    /// Count of one mnemonic in a region, over all forms.
    pub fn mnemonic(&self, region: &str, m: &str) -> u64 {
        self.regions.get(region).map_or(0, |r| {
            r.iter().filter(|(k, _)| k.0 == m).map(|(_, v)| *v).sum()
        })
    }
}

/// A parsed profile.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    pub state: String,
    pub prefixes: Vec<(String, String)>,
    pub programs: Vec<Prog>,
}

/// Reads a profile file.
pub fn read_trace(path: &Path) -> Trace {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_trace(&text)
}

/// Parses a profile.
pub fn parse_trace(text: &str) -> Trace {
    let doc = roxmltree::Document::parse(text).expect("profile is well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "dyntrace");
    let mut t = Trace {
        state: root.attribute("state").unwrap_or("").to_string(),
        ..Default::default()
    };
    for n in root.children().filter(|n| n.is_element()) {
        match n.tag_name().name() {
            "prefix" => t.prefixes.push((
                n.attribute("id").unwrap().to_string(),
                n.attribute("detail").unwrap().to_string(),
            )),
            "program" => {
                let mut p = Prog {
                    name: n.attribute("name").unwrap().to_string(),
                    pid: n.attribute("pid").unwrap().parse().unwrap(),
                    ..Default::default()
                };
                for r in n.children().filter(|n| n.is_element()) {
                    let counts = p
                        .regions
                        .entry(r.attribute("type").unwrap().to_string())
                        .or_default();
                    for c in r.children().filter(|n| n.is_element()) {
                        let key = (
                            c.attribute("mnemonic").unwrap().to_string(),
                            c.attribute("detail").unwrap_or("").to_string(),
                            c.attribute("prefixes").unwrap_or("").to_string(),
                        );
                        *counts.entry(key).or_default() +=
                            c.attribute("n").unwrap().parse::<u64>().unwrap();
                    }
                }
                t.programs.push(p);
            }
            other => panic!("unexpected <{other}>"),
        }
    }
    t
}

/// Traces `prog args...` with extra dyntrace options; returns the parsed profile.
pub fn trace(dir: &Path, name: &str, opts: &[&str], prog: &Path, args: &[&str]) -> Trace {
    let out = dir.join(format!("{name}.trace"));
    let mut cmd = Command::new(dyntrace());
    cmd.args(opts).arg("-o").arg(&out).arg(prog).args(args);
    let o = cmd.output().expect("run dyntrace");
    assert!(
        o.status.success(),
        "dyntrace failed: {:?}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    validate(&out);
    read_trace(&out)
}

/// Validates a profile against our DTD with xmllint, when it is installed.
pub fn validate(path: &Path) {
    if !dtrace_testkit::skip_unless(
        dtrace_testkit::have_program("xmllint"),
        "xmllint validation",
        "xmllint (libxml2-utils) is not installed",
    ) {
        return;
    }
    let dtd = concat!(env!("CARGO_MANIFEST_DIR"), "/share/dyntrace/dyntrace.dtd");
    let o = Command::new("xmllint")
        .args(["--noout", "--dtdvalid", dtd])
        .arg(path)
        .output()
        .expect("run xmllint");
    assert!(
        o.status.success(),
        "{} is not valid against dyntrace.dtd:\n{}",
        path.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}
