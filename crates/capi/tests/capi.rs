//! The C interface from C: programs compiled with `cc` against `include/dtrace.h` and the
//! `libdtrace.so` (and `libdtrace.a`) cargo built, run, and their output checked.
//!
//! - `example35`: the guide's Example 35 (`../shared/consumer/example35.c`, unchanged; a copy of
//!   it is not kept here) profiles kernel stacks for ten seconds and prints its aggregation
//!   (root, perf events and tracefs; skipped otherwise). When the library and header are
//!   installed (`scripts/install`), it is built a second time with plain `cc example35.c
//!   -ldtrace` against them.
//! - `callbacks`: the probe and record callbacks, buffered output, the error handler, `exit()`
//!   read by the record callback, compile and option errors through `dtrace_errmsg`, the
//!   aggregation printed and walked sorted (no kernel probes needed), shared and static.
//! - `bad_handles`: NULL, foreign and closed handles, NULL arguments and calls out of order
//!   fail with DTrace's errors and never crash.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use dtrace_testkit::{have_program, is_root, link_c, skip_unless, CSource};

/// The directory holding the `libdtrace.so` and `libdtrace.a` cargo built with this test.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps directory").to_path_buf();
    [deps.clone(), deps.join("..")]
        .into_iter()
        .find(|d| d.join("libdtrace.so").is_file())
        .unwrap_or_else(|| panic!("no libdtrace.so beside {}", deps.display()))
}

fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include")
}

fn c_source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(name)
}

fn scratch(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("dtrace-capi-{tag}-{}", std::process::id()))
}

/// Builds `src` against the header and the shared library (found at run time through the
/// executable's run path).
fn build_shared(src: &Path, out: &Path) -> PathBuf {
    let lib = lib_dir();
    let inc = include_dir();
    let rpath = format!("-Wl,-rpath,{}", lib.display());
    let l = format!("-L{}", lib.display());
    let i = format!("-I{}", inc.display());
    link_c(
        CSource::File(src),
        out,
        &["-Wall", "-Werror", &i],
        &[&l, "-ldtrace", &rpath],
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn run(exe: &Path) -> Output {
    Command::new(exe)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", exe.display()))
}

fn expected(name: &str) -> String {
    std::fs::read_to_string(c_source(name)).expect("expected output")
}

/// Lines of a C program's output with the pcs of fault messages (the compiler's
/// business, not the library's) replaced by `N`.
fn normalized(out: &[u8]) -> String {
    let s = String::from_utf8_lossy(out);
    let mut r = String::new();
    let mut rest = &*s;
    while let Some(i) = rest.find("at BPF pc ") {
        let (head, tail) = rest.split_at(i + "at BPF pc ".len());
        r.push_str(head);
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            r.push('N');
        }
        rest = &tail[digits..];
    }
    r.push_str(rest);
    r
}

/// Runs `exe`, which must succeed and print what `tests/c/<golden>` holds.
fn check_output(exe: &Path, golden: &str) {
    let o = run(exe);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(normalized(&o.stdout), expected(golden));
}

fn needs_gcc(test: &str) -> bool {
    skip_unless(have_program("gcc"), test, "needs gcc")
}

#[test]
fn callbacks() {
    if !needs_gcc("callbacks") {
        return;
    }
    let dir = scratch("callbacks");
    let exe = build_shared(&c_source("callbacks.c"), &dir.join("callbacks"));
    check_output(&exe, "callbacks.out");

    // The same program linked with the static library.
    let lib = lib_dir().join("libdtrace.a");
    let i = format!("-I{}", include_dir().display());
    let lib_s = lib.display().to_string();
    let exe = link_c(
        CSource::File(&c_source("callbacks.c")),
        &dir.join("callbacks-static"),
        &["-Wall", "-Werror", &i],
        &[
            &lib_s,
            "-lgcc_s",
            "-lutil",
            "-lrt",
            "-lpthread",
            "-lm",
            "-ldl",
            "-lc",
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    check_output(&exe, "callbacks.out");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_handles() {
    if !needs_gcc("bad_handles") {
        return;
    }
    let dir = scratch("bad");
    let exe = build_shared(&c_source("badhandles.c"), &dir.join("badhandles"));
    check_output(&exe, "badhandles.out");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Keeps a CPU in the kernel (reading /dev/zero) until dropped, so profile samples land there.
struct KernelLoad(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl KernelLoad {
    fn start() -> KernelLoad {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        std::thread::spawn(move || {
            use std::io::Read;
            let mut buf = vec![0u8; 1 << 16];
            if let Ok(mut f) = std::fs::File::open("/dev/zero") {
                while !s.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = f.read(&mut buf);
                }
            }
        });
        KernelLoad(stop)
    }
}

impl Drop for KernelLoad {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Checks Example 35's printed aggregation: a blank line, then entries of kernel frames
/// (`vmlinux`...` or a module's), each ending in its count, counts in ascending order.
fn check_stacks(out: &str) {
    assert!(out.starts_with('\n'), "{out}");
    let mut counts = Vec::new();
    let mut frames = 0;
    for entry in out.trim_matches('\n').split("\n\n") {
        let lines: Vec<&str> = entry.lines().collect();
        let (count, stack) = lines.split_last().expect("an entry");
        for f in stack {
            assert!(f.starts_with("              "), "frame line {f:?} in {out}");
            assert!(f.trim().contains('`'), "frame {f:?} in {out}");
            frames += 1;
        }
        let n: u64 = count
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("count line {count:?} in {out}"));
        assert!(n > 0);
        counts.push(n);
    }
    assert!(frames > 0, "{out}");
    assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
    assert!(out.contains("vmlinux`"), "{out}");
}

#[test]
fn example35() {
    if !needs_gcc("example35") {
        return;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/consumer/example35.c");
    if !src.is_file() {
        eprintln!("SKIP example35: {} is not here", src.display());
        return;
    }
    let kernel = is_root() && Path::new("/sys/kernel/tracing/events").is_dir();
    if !skip_unless(
        kernel,
        "example35",
        "needs root and tracefs (kernel stacks)",
    ) {
        return;
    }
    let dir = scratch("example35");
    let exe = build_shared(&src, &dir.join("example35"));
    let load = KernelLoad::start();
    let o = run(&exe);
    assert!(o.status.success(), "{o:?}");
    check_stacks(&String::from_utf8_lossy(&o.stdout));

    // As the README installs it: plain `cc example35.c -ldtrace`, when the installed library is
    // this build's.
    let installed = Path::new("/usr/local/lib/libdtrace.so");
    let same = |a: &Path, b: &Path| matches!((std::fs::read(a), std::fs::read(b)), (Ok(x), Ok(y)) if x == y);
    if same(installed, &lib_dir().join("libdtrace.so"))
        && same(
            Path::new("/usr/local/include/dtrace.h"),
            &include_dir().join("dtrace.h"),
        )
    {
        let exe = link_c(
            CSource::File(&src),
            &dir.join("example35-installed"),
            &[],
            &["-ldtrace"],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let o = run(&exe);
        assert!(o.status.success(), "{o:?}");
        check_stacks(&String::from_utf8_lossy(&o.stdout));
    } else {
        eprintln!(
            "example35: the installed libdtrace is not this build's; plain -ldtrace not tried"
        );
    }
    drop(load);
    let _ = std::fs::remove_dir_all(&dir);
}
