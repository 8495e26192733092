//! Optional C preprocessing (`-C`): runs the system `cpp` over the program as DTrace does, with the
//! `-D`, `-U` and `-I` options and DTrace's predefined macros; its `# line "file"` markers are
//! understood by the lexer.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::error::{CResult, CompileError, ErrTag};
use crate::options::CompileOptions;
use crate::types::DataModel;

/// Runs the preprocessor over `src`.
pub fn preprocess(src: &str, opts: &CompileOptions) -> CResult<String> {
    let mut cmd = Command::new(&opts.cpp_path);
    cmd.arg("-undef").arg("-D__linux").arg("-D__SUNW_D=1");
    cmd.arg(if opts.model == DataModel::Lp64 {
        "-D_LP64"
    } else {
        "-D_ILP32"
    });
    for d in &opts.defines {
        cmd.arg(format!("-D{d}"));
    }
    for u in &opts.undefs {
        cmd.arg(format!("-U{u}"));
    }
    for i in &opts.includes {
        cmd.arg(format!("-I{i}"));
    }
    cmd.arg("-");
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let fail = |m: String| CompileError::new(ErrTag::D_UNKNOWN, 0, m);
    let mut child = cmd
        .spawn()
        .map_err(|e| fail(format!("failed to run {}: {e}", opts.cpp_path)))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(src.as_bytes())
            .map_err(|e| fail(format!("failed to write to {}: {e}", opts.cpp_path)))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| fail(format!("failed to run {}: {e}", opts.cpp_path)))?;
    if !out.status.success() {
        let msg = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(fail(format!("preprocessor failed: {msg}")));
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}
