//! The manual page `man/dyntrace.1`: it renders with `man -l` without warnings and documents every
//! option `dyntrace --help` lists.

use std::path::PathBuf;
use std::process::Command;

use dtrace_testkit::man;

fn page() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../man/dyntrace.1")
}

#[test]
fn dyntrace_page_renders_and_documents_every_option() {
    let Some((text, warnings)) =
        man::render("dyntrace_page_renders_and_documents_every_option", &page())
    else {
        return;
    };
    assert_eq!(warnings, "", "man --warnings said:\n{warnings}");
    let help = Command::new(env!("CARGO_BIN_EXE_dyntrace"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let mut opts = Vec::new();
    for l in help
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
    {
        for w in l.split_whitespace().take(2) {
            let w = w.trim_end_matches(',').trim_end_matches("...");
            if w.starts_with('-') && w != "-h" && w != "--help" {
                opts.push(w.to_string());
            }
        }
    }
    assert!(opts.len() >= 12, "{help}");
    let missing: Vec<&String> = opts.iter().filter(|o| !man::documents(&text, o)).collect();
    assert!(
        missing.is_empty(),
        "options not documented: {missing:?}\n{text}"
    );
}
