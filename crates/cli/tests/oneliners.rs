//! The one-liners and short scripts DTrace users type (Brendan Gregg's one-liners, the DTrace
//! Guide's examples), run unchanged through `dtrace` with golden outputs: BEGIN-only scripts
//! everywhere, and kernel-probe scripts (root, BPF, tracefs and gcc; skipped otherwise) with `-c`
//! on a small program compiled here, so that nothing depends on the machine.

mod common;
use common::dtrace;
use std::path::PathBuf;
use std::sync::OnceLock;

/// Opens /dev/zero three times and reads 64 bytes from it each time, writes "hello\n" to
/// /dev/null, fails to open a missing file, runs `/bin/true` in a child, and exits with status 3.
const PROG: &str = r#"
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    char buf[64];
    for (int i = 0; i < 3; i++) {
        int fd = open("/dev/zero", O_RDONLY);
        read(fd, buf, sizeof buf);
        close(fd);
    }
    int null = open("/dev/null", O_WRONLY);
    write(null, "hello\n", 6);
    open("/nonexistent/olprog", O_RDONLY);
    pid_t p = fork();
    if (p == 0) {
        execl("/bin/true", "true", (char *)0);
        _exit(1);
    }
    waitpid(p, 0, 0);
    return 3;
}
"#;

fn kernel_ok(test: &str) -> bool {
    common::kernel_ok(test) && common::have_gcc(test)
}

/// The test program, compiled once.
fn prog() -> &'static PathBuf {
    static PROG_PATH: OnceLock<PathBuf> = OnceLock::new();
    PROG_PATH
        .get_or_init(|| common::compile_c(&common::test_dir("oneliners"), "olprog", PROG, &["-O1"]))
}

/// Runs `dtrace ARGS -c olprog`; returns stdout and stderr.
fn on_prog(args: &[&str]) -> (String, String) {
    let exe = prog().display().to_string();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-c", &exe]);
    let (rc, out, err) = dtrace(&all);
    assert_eq!(rc, 0, "{err}");
    (out, err)
}

/// `syscall:::entry /pid == $target/ { @[execname] = count(); }`: the command is held from just
/// after its exec, so nothing of the forked `dtrace` (its name, its wait for the go-ahead, the
/// execve itself) is counted.
#[test]
fn target_syscalls_are_only_the_commands_own() {
    if !kernel_ok("target_syscalls_are_only_the_commands_own") {
        return;
    }
    let (out, err) = on_prog(&[
        "-n",
        "syscall:::entry /pid == $target/ { @[execname] = count(); } \
         syscall::execve:entry /pid == $target/ { @execs = count(); }",
    ]);
    let rows: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(rows.len(), 1, "{out}");
    let words: Vec<&str> = rows[0].split_whitespace().collect();
    assert_eq!(words[0], "olprog", "{out}");
    assert!(words[1].parse::<u64>().unwrap() > 10, "{out}");
    assert!(err.ends_with(" exited with status 3\n"), "{err}");
}

/// The DTrace Guide's `trussrw.d`, on the reads the program makes of /dev/zero.
#[test]
fn trussrw_of_the_target() {
    if !kernel_ok("trussrw_of_the_target") {
        return;
    }
    let (out, _) = on_prog(&[
        "-n",
        "#pragma D option quiet
         syscall::read:entry /pid == $target && arg2 == 64/
         { printf(\"%s(%d, %4d)\", probefunc, arg0, arg2); self->r = 1; }
         syscall::read:return /self->r/ { printf(\"\\t\\t = %d\\n\", arg1); self->r = 0; }",
    ]);
    assert_eq!(out, "read(3,   64)\t\t = 64\n".repeat(3) + "\n");
}

/// `copyinstr(addr, maxlen)` copies maxlen bytes, the NUL among them (as DTrace for Linux's
/// `copyinstr(a, 8)` gives seven characters), and `%S` escapes them.
#[test]
fn copyinstr_with_a_length_keeps_that_many_characters() {
    if !kernel_ok("copyinstr_with_a_length_keeps_that_many_characters") {
        return;
    }
    let (out, _) = on_prog(&[
        "-qn",
        "syscall::write:entry /pid == $target/ \
         { printf(\"[%S] [%s]\\n\", copyinstr(arg1, arg2 + 1), copyinstr(arg1, 4)); }",
    ]);
    assert_eq!(out, "[hello\\n] [hel]\n\n");
}

/// `tracemem()` of what `copyinto()` fetched into `alloca()`'d scratch: the constant size is
/// recorded (the scratch past the copied bytes reads as zeros), and a third argument limits what
/// is printed.
#[test]
fn tracemem_of_copied_in_bytes() {
    if !kernel_ok("tracemem_of_copied_in_bytes") {
        return;
    }
    let (out, _) = on_prog(&[
        "-qn",
        "syscall::write:entry /pid == $target/ \
         { this->p = (char *)alloca(16); copyinto(arg1, 6, this->p); \
         tracemem(this->p, 16); tracemem(this->p, 16, arg2); }",
    ]);
    let head = "             0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f  0123456789abcdef\n";
    assert_eq!(
        out,
        format!(
            "\n{head}         0: 68 65 6c 6c 6f 0a 00 00 00 00 00 00 00 00 00 00  hello...........\n\
             \n{head}         0: 68 65 6c 6c 6f 0a                                hello.\n\n"
        )
    );
}

/// Runs a BEGIN-only script quietly; returns stdout.
fn begin_only(script: &str) -> String {
    let (rc, out, err) = dtrace(&["-qn", script]);
    assert_eq!(rc, 0, "{err}");
    out
}

/// `printa()` of several aggregations joins them by key (a missing value is 0), sorted by the
/// first one's values, whether or not the format has a `%@` for each; a printed aggregation is
/// not printed again at exit.
#[test]
fn printa_joins_its_aggregations() {
    let out = begin_only(
        r#"BEGIN { @a["x"] = count(); @b["y"] = count(); @b["y"] = count();
           printa("%s %@d\n", @a, @b); printa("%s %@d %@d\n", @a, @b);
           printa("%s %@d\n", @b); printa("%s %@d\n", @b); exit(0); }"#,
    );
    assert_eq!(out, "y 0\nx 1\ny 0 2\nx 1 0\ny 2\ny 2\n\n");
}

/// `proc:::exec-success` and `proc:::exit` of the target's progeny: the command's own exec
/// happened before tracing (it is held after it), its child's exec and both exits are seen.
#[test]
fn exec_and_exit_of_the_targets_progeny() {
    if !kernel_ok("exec_and_exit_of_the_targets_progeny") {
        return;
    }
    // -x temporal: the parent and its child run on different CPUs, whose buffers would otherwise
    // print one after the other.
    let (out, _) = on_prog(&[
        "-x",
        "temporal",
        "-qn",
        "proc:::exec-success /progenyof($target)/ { printf(\"exec %s\\n\", execname); } \
         proc:::exit /progenyof($target)/ { printf(\"exit %s\\n\", execname); }",
    ]);
    assert_eq!(out, "exec true\nexit true\nexit olprog\n\n");
}

/// `tracemem()` records its constant size, and a dynamic size (any integer type) limits what is
/// printed, in quiet mode too.
#[test]
fn tracemem_of_scratch_with_a_dynamic_size() {
    let out = begin_only(
        "BEGIN { this->p = (char *)alloca(20); this->p[0] = 0x41; this->p[1] = 0x42; \
         tracemem(this->p, 20); tracemem(this->p, 20, 3); exit(0); }",
    );
    let head = "             0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f  0123456789abcdef\n";
    assert_eq!(
        out,
        format!(
            "\n{head}         0: 41 42 00 00 00 00 00 00 00 00 00 00 00 00 00 00  AB..............\n\
             \x20       10: 00 00 00 00                                      ....\n\
             \n{head}         0: 41 42 00                                         AB.\n\n"
        )
    );
}

/// Several `-n` programs run together without sharing storage by accident: each one's globals
/// and aggregations are its own.
#[test]
fn programs_of_several_descriptions_keep_their_own_variables() {
    let (rc, out, err) = dtrace(&[
        "-q",
        "-n",
        "BEGIN { x = 7; @a = count(); }",
        "-n",
        "int y; BEGIN { @b = sum(5); exit(0); } END { printf(\"y=%d\\n\", y); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    // (Before, the second program's y and @b were the first one's x and @a: "y=7" and "6".)
    assert_eq!(out, "y=0\n\n                1\n                5\n");
}
