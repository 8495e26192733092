//! Rendering the project's manual pages as `man -l` does, for tests that check they format without
//! warnings and document every option.

use std::path::Path;
use std::process::Command;

/// The page at `path` rendered at 80 columns, and what `man --warnings` said on stderr; `None`
/// (after printing why, under the skip policy of [`crate::skip_unless`]) when `man` is missing.
pub fn render(test: &str, path: &Path) -> Option<(String, String)> {
    if !crate::skip_unless(
        crate::have_program("man"),
        test,
        "man(1) is not installed (scripts/setup installs man-db)",
    ) {
        return None;
    }
    let o = Command::new("man")
        .args(["--warnings", "-l"])
        .arg(path)
        .env("MANWIDTH", "80")
        .env("LC_ALL", "C")
        .output()
        .expect("run man");
    assert!(o.status.success(), "man -l {} failed", path.display());
    Some((
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    ))
}

/// Whether the rendered page documents the option `opt` (e.g. `-c` or `--mode`): a line that starts
/// with an option lists it among its first words (`-F, --follow-forks`, `-c seconds`, `-32`).
pub fn documents(rendered: &str, opt: &str) -> bool {
    rendered
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .any(|l| l.split([' ', ',', '|', '=']).take(8).any(|w| w == opt))
}
