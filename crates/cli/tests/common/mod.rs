//! Helpers shared by the cli's test files that run `dtrace` on the live kernel: whether the kernel
//! providers can run here, running `dtrace`, and compiling the small C programs the tests trace.

// Each test file uses the helpers it needs.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};

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

/// Four writes of 300 bytes to /dev/null, the traced program of the subroutine tests.
pub const DD_WRITES: &str = "dd if=/dev/zero of=/dev/null bs=300 count=4 status=none";

/// The state letter of process `pid` in `/proc/<pid>/stat` (`T` stopped, `Z` zombie), `None`
/// once it is gone.
pub fn process_state(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The state follows the command name in parentheses.
    s.get(s.rfind(')')? + 2..)?.chars().next()
}

/// Whether `dd` (of [`DD_WRITES`]) is there; prints SKIP (or fails as [`kernel_ok`]) if not.
pub fn have_dd(test: &str) -> bool {
    dtrace_testkit::skip_unless(dtrace_testkit::have_program("dd"), test, "no dd")
}

/// Whether the kernel publishes its BTF (the kernel's types for `curthread->...`).
pub fn have_btf(test: &str) -> bool {
    dtrace_testkit::skip_unless(
        Path::new("/sys/kernel/btf/vmlinux").exists(),
        test,
        "no kernel BTF",
    )
}

/// Whether a test of `curthread` memory over [`DD_WRITES`] can run: the kernel
/// ([`kernel_ok`]), its BTF and `dd`; prints SKIP (or fails) if not.
pub fn kernel_btf_dd(test: &str) -> bool {
    kernel_ok(test) && have_btf(test) && have_dd(test)
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
    outcome(
        &Command::new(env!("CARGO_BIN_EXE_dtrace"))
            .envs(env.iter().copied())
            .args(args)
            .output()
            .unwrap(),
    )
}

/// Runs `dtrace args` as a plain shell would: with none of the environment's `DTRACE_OPT_*`
/// variables nor `_DTRACE_TESTING` (each sets an option; the harness may export them), and with
/// `env` set.
pub fn dtrace_plain(env: &[(&str, &str)], args: &[&str]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dtrace"));
    c.args(args).env_remove("_DTRACE_TESTING");
    for (k, _) in std::env::vars() {
        if k.starts_with("DTRACE_OPT_") {
            c.env_remove(k);
        }
    }
    c.envs(env.iter().copied());
    outcome(&c.output().unwrap())
}

/// A finished `dtrace`'s exit status, stdout and stderr, named (from [`outcome`]'s triple).
pub struct Out {
    pub rc: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<(i32, String, String)> for Out {
    fn from((rc, stdout, stderr): (i32, String, String)) -> Out {
        Out { rc, stdout, stderr }
    }
}

/// A finished command's exit status (-1 when a signal ended it), stdout and stderr.
pub fn outcome(o: &std::process::Output) -> (i32, String, String) {
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

/// Builds C program `src` as `name` in test directory `tag`: the `-c` command running it.
pub fn traced_program(tag: &str, name: &str, src: &str) -> String {
    compile_c(&test_dir(tag), name, src, &["-O1"])
        .display()
        .to_string()
}

/// What `-v` says of a probe's clauses that aggregate in the kernel.
pub const AGGS_AT_ONE_PROBE: &str = "aggregations run in the kernel at 1 probe";
/// What `-v` says of a clause run whole at the probe whose records are built there.
pub const RECORDS_AT_ONE_PROBE: &str =
    "runs whole in the kernel at 1 probe (records built at the probe)";

/// Runs `dtrace args` as it runs by default (`kernel`), or with the environment variable
/// `switch` set to `0` (which keeps some kind of work in dtrace's interpreter). dtrace, and so
/// its `-c` command, runs on one CPU: records print CPU buffer by CPU buffer (as DTrace prints
/// them), so a traced process that moved between CPUs could print its firings in another order
/// one of the two ways.
pub fn dtrace_way(switch: &str, kernel: bool, args: &[&str]) -> (i32, String, String) {
    let env: &[(&str, &str)] = if kernel { &[] } else { &[(switch, "0")] };
    outcome(
        &Command::new("taskset")
            .args(["-c", &one_cpu(), env!("CARGO_BIN_EXE_dtrace")])
            .envs(env.iter().copied())
            .args(args)
            .output()
            .unwrap(),
    )
}

/// The first CPU this process may run on (of `Cpus_allowed_list`), `0` if unknown.
fn one_cpu() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|list| {
            list.trim()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
        })
        .filter(|cpu| !cpu.is_empty())
        .unwrap_or_else(|| "0".to_string())
}

/// The `-v` lines about where clause `n` runs.
pub fn clause_lines(err: &str, n: usize) -> Vec<String> {
    let head = format!("dtrace: clause {n} ");
    err.lines()
        .filter(|l| l.starts_with(&head))
        .map(String::from)
        .collect()
}

/// Runs `dtrace -qv EXTRA -n script -c cmd` by default and with `switch=0`; asserts both succeed
/// without drops and print the same non-empty output, that `in_kernel` holds of the default
/// way's stderr and that the other way's says `switch` is off. Returns the output.
pub fn same_both_ways(
    switch: &str,
    script: &str,
    extra: &[&str],
    cmd: &str,
    in_kernel: &dyn Fn(&str) -> bool,
) -> String {
    let mut args = vec!["-qv"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-n", script, "-c", cmd]);
    let (rc, kout, kerr) = dtrace_way(switch, true, &args);
    assert_eq!(rc, 0, "{script}: {kerr}");
    assert!(in_kernel(&kerr), "{script}: {kerr}");
    assert!(!kerr.contains("drop"), "{script}: {kerr}");
    let (rc, iout, ierr) = dtrace_way(switch, false, &args);
    assert_eq!(rc, 0, "{script}: {ierr}");
    assert!(ierr.contains(&format!("are off ({switch}=0)")), "{ierr}");
    assert_eq!(kout, iout, "{script}");
    assert!(!kout.trim().is_empty(), "{script}");
    kout
}

/// Takes `child`'s stderr (piped) and reads its first line: a running `dtrace` reports the match
/// once every probe is in place. Returns the rest of the stream (keep it open while dtrace runs)
/// and the line.
pub fn first_stderr_line(child: &mut Child) -> (BufReader<ChildStderr>, String) {
    let mut err = BufReader::new(child.stderr.take().expect("stderr piped"));
    let mut line = String::new();
    let _ = err.read_line(&mut line);
    (err, line)
}

/// Starts `dtrace args -p pid` with its stdout to `stdout` and waits until it reports the match
/// (see [`first_stderr_line`]): the running dtrace, its stderr and the match line.
pub fn grab(args: &[&str], pid: u32, stdout: Stdio) -> (Child, BufReader<ChildStderr>, String) {
    let mut dt = Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .args(args)
        .args(["-p", &pid.to_string()])
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (err, line) = first_stderr_line(&mut dt);
    (dt, err, line)
}

/// Runs a two-phase program (it runs phase one when its stdin gives a line, phase two at the
/// next) while a `dtrace -n D -p PID` (`script(pid)`) that exits during phase one is attached,
/// and returns the program's output: what the program's is-enabled checks saw while traced and
/// after dtrace left.
pub fn phases_under_grab(exe: &Path, script: impl Fn(u32) -> String) -> String {
    use std::io::Write;
    let mut child = Command::new(exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut dt, _err, line) = grab(&["-n", &script(child.id())], child.id(), Stdio::null());
    assert!(line.contains("matched 1 probe"), "{line}");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"one\n").unwrap();
    stdin.flush().unwrap();
    assert_eq!(dt.wait().unwrap().code(), Some(0));
    stdin.write_all(b"two\n").unwrap();
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Writes `argv[1]` times to /dev/null, of sizes (i * 37) % 300, then reads as often from
/// /dev/zero, 7 bytes at a time.
const SIZED_WRITER: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    int out = open("/dev/null", O_WRONLY), in = open("/dev/zero", O_RDONLY);
    static char buf[512];
    for (int i = 0; i < n; i++)
        if (write(out, buf, (i * 37) % 300) < 0)
            return 1;
    for (int i = 0; i < n; i++)
        if (read(in, buf, 7) != 7)
            return 1;
    return 0;
}
"#;

/// The writer of [`SIZED_WRITER`], built in the test directory `tag` (its process is named
/// `writer`).
pub fn sized_writer(tag: &str) -> PathBuf {
    compile_c(&test_dir(tag), "writer", SIZED_WRITER, &["-O2"])
}

/// Every switch that keeps work in dtrace's interpreter.
pub const KERNEL_SWITCHES: [&str; 4] = [
    "DTRACE_KERNEL_AGGREGATIONS",
    "DTRACE_KERNEL_VARIABLES",
    "DTRACE_KERNEL_RECORDS",
    "DTRACE_KERNEL_PREDICATES",
];

/// The environment that turns every kernel path off ([`KERNEL_SWITCHES`] set to `0`).
pub fn kernel_paths_off() -> Vec<(&'static str, &'static str)> {
    KERNEL_SWITCHES.iter().map(|s| (*s, "0")).collect()
}

/// The lines of `out`, sorted.
pub fn sorted(out: &str) -> Vec<&str> {
    let mut v: Vec<&str> = out.lines().collect();
    v.sort_unstable();
    v
}

/// The drops of one kind (`"dynamic variable"`, `"speculative"`, ...) that `err` reports,
/// summed over its lines: dtrace says them as they happen, in one status interval or several,
/// "1 ... drop" or "N ... drops".
pub fn reported_drops(err: &str, kind: &str) -> u64 {
    err.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("dtrace: ")?;
            let rest = rest
                .strip_suffix(" drops")
                .or_else(|| rest.strip_suffix(" drop"))?;
            let n = rest.strip_suffix(kind)?.strip_suffix(' ')?;
            n.parse::<u64>().ok()
        })
        .sum()
}

/// The `dtrace: error` lines of `err`.
pub fn error_lines(err: &str) -> Vec<&str> {
    err.lines()
        .filter(|l| l.starts_with("dtrace: error"))
        .collect()
}

/// Runs `script` (options `extra`, with `-qv`) over `cmd` with every kernel path on, then off;
/// asserts both succeed with the same output (lines sorted: a handed-over firing's records are
/// printed when the syscall returns) and the same errors (sorted), no drops, and that `-v` says
/// each `(clause, text)` of `said` the first way. Returns the output.
pub fn same_with_kernel_paths_off(
    script: &str,
    extra: &[&str],
    cmd: &str,
    said: &[(usize, &str)],
) -> String {
    same_with_kernel_paths_off_as(script, extra, cmd, said, |s| s.to_string())
}

/// [`same_with_kernel_paths_off`], the outputs compared once `same` has rewritten them (what
/// differs from one run to the next, such as the inode numbers of a pipe's name). Returns the
/// first output as it was.
pub fn same_with_kernel_paths_off_as(
    script: &str,
    extra: &[&str],
    cmd: &str,
    said: &[(usize, &str)],
    same: fn(&str) -> String,
) -> String {
    let mut args = vec!["-qv"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-n", script, "-c", cmd]);
    let (rc, kout, kerr) = dtrace_with_env(&[], &args);
    assert_eq!(rc, 0, "{script}: {kerr}");
    for &(n, text) in said {
        assert!(
            clause_lines(&kerr, n).iter().any(|l| l.contains(text)),
            "{script}: clause {n} should say {text:?}: {kerr}"
        );
    }
    assert!(!kerr.contains("drop"), "{script}: {kerr}");
    let (rc, iout, ierr) = dtrace_with_env(&kernel_paths_off(), &args);
    assert_eq!(rc, 0, "{script}: {ierr}");
    assert!(ierr.contains("are off (DTRACE_KERNEL_"), "{ierr}");
    assert_eq!(sorted(&same(&kout)), sorted(&same(&iout)), "{script}");
    // The errors sorted too: records built at the probe are read a CPU's buffer at a time, so
    // a process that moved between CPUs has its errors in another order than the interpreter
    // met them (the order within a CPU is kernel_faults' to check, on one CPU).
    let (mut kerrs, mut ierrs) = (error_lines(&kerr), error_lines(&ierr));
    kerrs.sort_unstable();
    ierrs.sort_unstable();
    assert_eq!(kerrs, ierrs, "{script}");
    assert!(!kout.trim().is_empty(), "{script}");
    kout
}

/// The frames of each stack an output prints, in order: a stack is a run of lines naming a
/// frame (`module`function`), ended by any other line (a blank line, a count, text).
pub fn stack_frames(out: &str) -> Vec<Vec<String>> {
    let mut all = Vec::new();
    let mut cur = Vec::new();
    for l in out.lines().map(str::trim) {
        if l.contains('`') {
            cur.push(l.to_string());
        } else if !cur.is_empty() {
            all.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        all.push(cur);
    }
    all
}
