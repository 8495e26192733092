//! Compiling the small C programs and objects that tests trace, link or compare against: one
//! `gcc` call of a given source, flags and output, the one way every test suite of the workspace
//! builds its C.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What [`compile_c`] compiles.
#[derive(Debug, Clone, Copy)]
pub enum CSource<'a> {
    /// C text, written beside the output as `OUT.c` first.
    Text(&'a str),
    /// A C file that exists.
    File(&'a Path),
}

/// Runs `gcc FLAGS -o OUT SOURCE` (creating the output's directory) and returns the output's path.
/// The error carries what gcc printed, or why it could not be run; a test that needs the program
/// panics with it, one that can do without skips.
pub fn compile_c(source: CSource<'_>, out: &Path, flags: &[&str]) -> Result<PathBuf, String> {
    link_c(source, out, flags, &[])
}

/// [`compile_c`] with `libs` (`-L`, `-l`, `-Wl,...`) after the source, where the linker wants
/// the libraries a program uses.
pub fn link_c(
    source: CSource<'_>,
    out: &Path,
    flags: &[&str],
    libs: &[&str],
) -> Result<PathBuf, String> {
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let src = match source {
        CSource::File(p) => p.to_path_buf(),
        CSource::Text(text) => {
            let mut c = out.as_os_str().to_owned();
            c.push(".c");
            let c = PathBuf::from(c);
            std::fs::write(&c, text).map_err(|e| format!("{}: {e}", c.display()))?;
            c
        }
    };
    let o = Command::new("gcc")
        .args(flags)
        .arg("-o")
        .arg(out)
        .arg(&src)
        .args(libs)
        .output()
        .map_err(|e| format!("gcc could not be run: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "gcc {} -o {} {} {}: {}\n{}",
            flags.join(" "),
            out.display(),
            src.display(),
            libs.join(" "),
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(out.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory for the test `tag`, or `None` (skipped) without gcc.
    fn scratch(tag: &str) -> Option<PathBuf> {
        crate::skip_unless(crate::have_program("gcc"), tag, "needs gcc").then(|| {
            std::env::temp_dir().join(format!("dtrace-testkit-cc-{tag}-{}", std::process::id()))
        })
    }

    #[test]
    fn text_is_written_beside_the_output_and_built() {
        let Some(dir) = scratch("text") else {
            return;
        };
        let exe = compile_c(
            CSource::Text("int main(void) { return 7; }\n"),
            &dir.join("seven"),
            &["-O0"],
        )
        .unwrap();
        assert_eq!(exe, dir.join("seven"));
        assert!(dir.join("seven.c").is_file());
        let st = Command::new(&exe).status().unwrap();
        assert_eq!(st.code(), Some(7));
        // an existing file, compiled to an object
        let obj = compile_c(
            CSource::File(&dir.join("seven.c")),
            &dir.join("seven.o"),
            &["-c"],
        )
        .unwrap();
        assert!(std::fs::read(obj).unwrap().starts_with(b"\x7fELF"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failure_says_what_gcc_printed() {
        let Some(dir) = scratch("fail") else {
            return;
        };
        let e = compile_c(
            CSource::Text("int main(void) { return no_such_name; }\n"),
            &dir.join("bad"),
            &[],
        )
        .unwrap_err();
        assert!(e.contains("no_such_name"), "{e}");
        assert!(!dir.join("bad").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
