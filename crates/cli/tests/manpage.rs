//! The manual page `man/dtrace.1`: it renders with `man -l` without warnings, and documents every
//! flag of the usage message and every option `-x` accepts.

use std::path::PathBuf;
use std::process::Command;

use dtrace_consumer::options::Options;
use dtrace_testkit::man;

fn page() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../man/dtrace.1")
}

#[test]
fn dtrace_page_renders_without_warnings() {
    let Some((text, warnings)) = man::render("dtrace_page_renders_without_warnings", &page())
    else {
        return;
    };
    assert_eq!(warnings, "", "man --warnings said:\n{warnings}");
    assert!(text.contains("dtrace - dynamic tracing compiler"), "{text}");
}

#[test]
fn dtrace_page_documents_every_flag_and_option() {
    let Some((text, _)) = man::render("dtrace_page_documents_every_flag_and_option", &page())
    else {
        return;
    };
    // the flags the usage message lists ("\t-a  claim anonymous tracing state")
    let usage = Command::new(env!("CARGO_BIN_EXE_dtrace")).output().unwrap();
    let usage = String::from_utf8_lossy(&usage.stderr).into_owned();
    let flags: Vec<&str> = usage
        .lines()
        .filter_map(|l| l.strip_prefix('\t'))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.starts_with('-') && w.len() >= 2)
        .collect();
    assert!(flags.len() > 30, "{usage}");
    let missing: Vec<&&str> = flags.iter().filter(|f| !man::documents(&text, f)).collect();
    assert!(missing.is_empty(), "flags not documented: {missing:?}");
    let words: std::collections::HashSet<&str> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    let missing: Vec<&str> = Options::names().filter(|n| !words.contains(n)).collect();
    assert!(missing.is_empty(), "-x options not documented: {missing:?}");
}
