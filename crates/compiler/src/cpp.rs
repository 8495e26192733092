//! Optional C preprocessing (`-C`): runs the system `cpp` over the program as DTrace does, with the
//! `-D`, `-U` and `-I` options, the `cppargs` option's arguments and DTrace's predefined macros; its
//! `# line "file"` markers are understood by the lexer.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use crate::error::{CResult, CompileError, ErrTag};
use crate::options::{CompileOptions, StdcMode};
use crate::types::DataModel;

/// The D language version `__SUNW_D_VERSION` names: DTrace for Linux's 2.0, as its
/// major, minor and micro numbers packed 8, 12 and 12 bits wide.
const D_VERSION: u32 = 2 << 24;

/// Runs the preprocessor over `src`; under `-H` the list of included files it prints goes to
/// standard error, as DTrace lets `cpp -H` print it.
pub fn preprocess(src: &str, opts: &CompileOptions) -> CResult<String> {
    let (text, headers) = preprocess_with_headers(src, opts)?;
    if !headers.is_empty() {
        let _ = std::io::stderr().write_all(headers.as_bytes());
    }
    Ok(text)
}

/// Runs the preprocessor over `src` and returns its output and, under `-H`, the pathnames of the
/// included files as `cpp -H` lists them (one per line, dots giving the nesting depth).
pub fn preprocess_with_headers(src: &str, opts: &CompileOptions) -> CResult<(String, String)> {
    let mut cmd = Command::new(&opts.cpp_path);
    // As DTrace, the preprocessor's argv[0] is the base name of its path (its messages name it so).
    if let Some(base) = std::path::Path::new(&opts.cpp_path).file_name() {
        cmd.arg0(base);
    }
    if opts.cpp_headers {
        cmd.arg("-H");
    }
    // DTrace for Linux's predefinitions: its system's names, __GNUC__ undefined (D is not GNU C),
    // the data model's, and the D version's.
    cmd.args([
        "-D__linux",
        "-D__unix",
        "-D__SVR4",
        "-D__SUNW_D=1",
        "-U__GNUC__",
    ]);
    let lp64 = opts.model == DataModel::Lp64;
    cmd.arg(if lp64 {
        "-D__SUNW_D_64"
    } else {
        "-D__SUNW_D_32"
    });
    // `-D__<uname's sysname>`, always Linux here.
    cmd.arg("-D__Linux");
    if cfg!(target_arch = "x86_64") || cfg!(target_arch = "x86") {
        cmd.arg(if lp64 { "-D__amd64" } else { "-D__i386" });
    }
    cmd.arg(if lp64 { "-D_LP64" } else { "-D_ILP32" });
    for d in &opts.defines {
        cmd.arg(format!("-D{d}"));
    }
    for u in &opts.undefs {
        cmd.arg(format!("-U{u}"));
    }
    for i in &opts.includes {
        cmd.arg(format!("-I{i}"));
    }
    cmd.args(&opts.cpp_args);
    cmd.arg(format!("-D__SUNW_D_VERSION=0x{D_VERSION:08x}"));
    // The `stdc` option: ISO C with extensions (the default) reads the program as C99, whose
    // strict mode leaves out system headers' GNU extensions (their inline functions and
    // statement expressions, which D does not have); `s` is K&R C, without __STDC__.
    match opts.stdc {
        StdcMode::Xa => {
            cmd.arg("-std=c99");
        }
        StdcMode::Xs => {
            cmd.arg("-traditional-cpp");
        }
        StdcMode::Xc | StdcMode::Xt => {}
    }
    // The program is read from /dev/stdin, the name DTrace gives it, so cpp's messages say
    // "/dev/stdin:LINE: ...". Those go straight to dtrace's standard error, as DTrace lets them;
    // under -H they are read to pick out the list of included files.
    cmd.arg("/dev/stdin");
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(if opts.cpp_headers {
            Stdio::piped()
        } else {
            Stdio::inherit()
        });
    let fail = |m: String| CompileError::new(ErrTag::D_UNKNOWN, 0, m);
    let mut child = cmd
        .spawn()
        .map_err(|e| fail(format!("failed to run {}: {e}", opts.cpp_path)))?;
    // The program is written on a thread of its own while cpp's output is read here: a
    // preprocessor (`cpppath`) may write before it has read everything, and a program larger than
    // a pipe's buffer would then leave both sides waiting on full pipes.
    let stdin = child.stdin.take();
    let (written, out) = std::thread::scope(|scope| {
        let writer = scope.spawn(move || match stdin {
            Some(mut stdin) => match stdin.write_all(src.as_bytes()) {
                // A preprocessor that quit before reading everything: its exit status says why.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r,
            },
            None => Ok(()),
        });
        let out = child.wait_with_output();
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the writing thread panicked")));
        (written, out)
    });
    written.map_err(|e| fail(format!("failed to write to {}: {e}", opts.cpp_path)))?;
    let out = out.map_err(|e| fail(format!("failed to run {}: {e}", opts.cpp_path)))?;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    // `cpp -H` lists included files as lines starting with dots; its other messages pass on.
    let (headers, other): (Vec<&str>, Vec<&str>) = stderr.lines().partition(|l| l.starts_with('.'));
    for l in other {
        eprintln!("{l}");
    }
    if !out.status.success() {
        // EDT_CPPERR
        return Err(fail(
            "Preprocessor failed to process input program".to_string(),
        ));
    }
    let headers = headers.iter().map(|l| format!("{l}\n")).collect();
    Ok((String::from_utf8_lossy(&out.stdout).to_string(), headers))
}
