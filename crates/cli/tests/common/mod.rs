//! Helpers shared by the cli's test files that run `dtrace` on the live kernel: whether the kernel
//! providers can run here, running `dtrace`, and compiling the small C programs the tests trace.

// Each test file uses the helpers it needs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether the kernel providers can run here (root, BPF, tracefs); prints SKIP (or fails under
/// DTRACE_TEST_REQUIRE_KERNEL=1) if not.
pub fn kernel_ok(test: &str) -> bool {
    dtrace_testkit::skip_unless(dtrace_testkit::is_root(), test, "needs root")
        && dtrace_testkit::skip_unless(dtrace_linux::bpf_available(), test, "bpf(2) unavailable")
        && dtrace_testkit::skip_unless(
            dtrace_linux::tracefs::ensure_tracefs().is_ok(),
            test,
            "no tracefs",
        )
}

/// Whether the kernel publishes its BTF (the kernel's types for `curthread->...`).
pub fn have_btf(test: &str) -> bool {
    dtrace_testkit::skip_unless(
        Path::new("/sys/kernel/btf/vmlinux").exists(),
        test,
        "no kernel BTF",
    )
}

/// Whether gcc is here to build the traced programs.
pub fn have_gcc(test: &str) -> bool {
    dtrace_testkit::skip_unless(dtrace_testkit::have_program("gcc"), test, "needs gcc")
}

/// Runs `dtrace args`: (exit status, stdout, stderr).
pub fn dtrace(args: &[&str]) -> (i32, String, String) {
    dtrace_with_env(&[], args)
}

/// Runs `dtrace args` with the variables `env` set: (exit status, stdout, stderr).
pub fn dtrace_with_env(env: &[(&str, &str)], args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .envs(env.iter().copied())
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A scratch directory of this test process: `$TMPDIR/dtrace-cli-TAG-PID`, created.
pub fn test_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dtrace-cli-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Compiles `src` with gcc and `flags` into `dir/name` (the source as `dir/name.c`).
pub fn compile_c(dir: &Path, name: &str, src: &str, flags: &[&str]) -> PathBuf {
    dtrace_testkit::compile_c(dtrace_testkit::CSource::Text(src), &dir.join(name), flags)
        .unwrap_or_else(|e| panic!("gcc failed: {e}"))
}
