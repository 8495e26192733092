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
        .env("MAN_KEEP_FORMATTING", "0")
        .env("LC_ALL", "C.UTF-8")
        .output()
        .expect("run man");
    assert!(o.status.success(), "man -l {} failed", path.display());
    Some((
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    ))
}

/// Whether the rendered page documents the option `opt` (e.g. `-c` or `--mode`): some line starts
/// with it, followed by the end of the line, a space, a comma or `|`.
pub fn documents(rendered: &str, opt: &str) -> bool {
    rendered.lines().any(|l| {
        l.trim_start()
            .strip_prefix(opt)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', ',', '|', '=']))
    })
}
