//! `dtrace` reading user memory at an address saved in a thread-local at another probe (root, BPF
//! and tracefs; skipped otherwise), with a `-c` program that overwrites its buffers and exits right
//! after its system calls, so nothing can be read from the process later: `self->buf = arg1` at
//! read:entry then `copyin(self->buf, arg0)` at read:return prints exactly the bytes read, the
//! opensnoop idiom (`self->path = arg1` at openat:entry, `copyinstr(self->path)` at the return)
//! prints the paths, and when a predicate keeps the D variable from following the probe's
//! argument, the read is never served the other buffer's bytes.

mod common;
use common::{compile_c, dtrace, have_gcc, kernel_ok, test_dir};

const READER: &str = r#"
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int p[2];
    char buf[64] = {0}, other[64] = {0}, path[256];
    /* Written from the stack, which is in memory: a clause run whole in the kernel reads the
       buffer at write's entry, where (as in DTrace) a page not yet read in would fault. */
    char first[] = "first bytes", second[] = "the second read";
    /* The read end at a descriptor the dynamic loader's reads never use. */
    if (argc < 2 || pipe(p) || dup2(p[0], 42) != 42) return 1;
    if (write(p[1], first, 11) != 11) return 2;
    if (read(42, buf, 61) != 11) return 3;
    if (write(p[1], second, 15) != 15) return 4;
    if (read(42, other, 62) != 15) return 5;
    strncpy(path, argv[1], sizeof path - 1);
    path[sizeof path - 1] = 0;
    int fd = openat(AT_FDCWD, path, O_RDONLY);
    int bad = openat(AT_FDCWD, "/nonexistent/mirror-test", O_RDONLY);
    /* What was read and opened is gone before the process is. */
    memset(buf, 'x', sizeof buf);
    memset(other, 'y', sizeof other);
    memset(path, 'z', sizeof path);
    return fd >= 0 && bad < 0 && buf[0] == 'x' && other[0] == 'y' && path[0] == 'z' ? 0 : 6;
}
"#;

fn setup(test: &str) -> Option<(std::path::PathBuf, String)> {
    if !kernel_ok(test) || !have_gcc(test) {
        return None;
    }
    let dir = test_dir(test);
    let exe = compile_c(&dir, "mirror_reader", READER, &["-O1"]);
    let data = dir.join("data");
    std::fs::write(&data, "x").unwrap();
    let cmd = format!("{} {}", exe.display(), data.display());
    Some((data, cmd))
}

fn error_lines(err: &str) -> Vec<&str> {
    err.lines()
        .filter(|l| l.contains("dtrace: error in dt_clause_"))
        .collect()
}

#[test]
fn read_return_prints_the_bytes_read_into_the_buffer_saved_at_entry() {
    let Some((_, cmd)) = setup("read_return_prints_the_bytes_read") else {
        return;
    };
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"syscall::read:entry /pid == $target && arg0 == 42/ { self->buf = arg1; }
           syscall::read:return /self->buf/ {
               printf("<%d:%s>\n", arg0, stringof(copyin(self->buf, arg0))); self->buf = 0; }"#,
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(error_lines(&err).is_empty(), "{err}");
    assert_eq!(
        out.trim_end_matches('\n'),
        "<11:first bytes>\n<15:the second read>"
    );
}

#[test]
fn the_store_and_the_copy_may_be_in_different_programs() {
    let Some((_, cmd)) = setup("store_and_copy_in_different_programs") else {
        return;
    };
    // Two -n programs share self->buf, as in DTrace.
    let (rc, out, err) = dtrace(&[
        "-q",
        "-n",
        "syscall::read:entry /pid == $target && arg0 == 42/ { self->buf = arg1; }",
        "-n",
        r#"syscall::read:return /self->buf/ {
               printf("<%d:%s>\n", arg0, stringof(copyin(self->buf, arg0))); self->buf = 0; }"#,
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(error_lines(&err).is_empty(), "{err}");
    assert_eq!(
        out.trim_end_matches('\n'),
        "<11:first bytes>\n<15:the second read>"
    );
}

#[test]
fn a_later_clause_of_the_storing_probe_reads_the_stored_buffer() {
    let Some((_, cmd)) = setup("later_clause_of_the_storing_probe") else {
        return;
    };
    let (rc, out, err) = dtrace(&[
        "-qvn",
        r#"syscall::write:entry /pid == $target/ { self->b = arg1; }
           syscall::write:entry /self->b/ {
               printf("[%s]\n", stringof(copyin(self->b, arg2))); self->b = 0; }"#,
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(error_lines(&err).is_empty(), "{err}");
    // (-v's stability report is on stdout too.)
    let printed: Vec<&str> = out.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(printed, ["[first bytes]", "[the second read]"], "{out}");
    // The clause runs whole in the kernel, and -v says where its copy is read.
    assert!(
        err.contains("copyin() reads at the probe, where memory on a page not yet read in faults"),
        "{err}"
    );
}

#[test]
fn opensnoop_prints_the_paths_saved_at_entry() {
    let Some((data, cmd)) = setup("opensnoop_prints_the_paths") else {
        return;
    };
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"syscall::openat:entry /pid == $target/ { self->path = arg1; }
           syscall::openat:return /self->path/ {
               printf("%s %s\n", (int)arg0 < 0 ? "fail" : "ok", copyinstr(self->path));
               self->path = 0; }"#,
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(error_lines(&err).is_empty(), "{err}");
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    // The program's own two opens are there, each path whole. Not necessarily last: as in
    // DTrace, records print CPU by CPU, so a process that moved to another CPU after the loader's
    // opens can have those printed after its own.
    for want in [
        format!("ok {}", data.display()),
        "fail /nonexistent/mirror-test".to_string(),
    ] {
        assert!(lines.contains(&want.as_str()), "{want}: {out}");
    }
    // The loader's opens (some of them failing) print whole absolute paths too.
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("ok /") || l.starts_with("fail /")),
        "{out}"
    );
}

#[test]
fn a_predicate_on_the_store_never_serves_the_other_buffer() {
    let Some((_, cmd)) = setup("a_predicate_on_the_store") else {
        return;
    };
    // Only the first read stores: at the second return the D variable still holds the first
    // buffer while the probe saved (and copied) the second one. The read must not be served from
    // that copy: it goes to the process, gone by now (an invalid address), or, if it still lives,
    // reads the first buffer.
    let (rc, out, err) = dtrace(&[
        "-qn",
        r#"syscall::read:entry /pid == $target && arg0 == 42 && arg2 == 61/ { self->buf = arg1; }
           syscall::read:return /self->buf/ { printf("<%s>\n", stringof(copyin(self->buf, arg0))); }"#,
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(!out.contains("second"), "{out}");
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    let errors = error_lines(&err);
    match lines.as_slice() {
        ["<first bytes>"] => {
            assert_eq!(errors.len(), 1, "{err}");
            assert!(
                errors[0].contains("invalid address (0x")
                    && errors[0].contains("syscall:vmlinux:read:return"),
                "{err}"
            );
        }
        ["<first bytes>", "<first bytes>"] => assert!(errors.is_empty(), "{err}"),
        _ => panic!("{out}\n{err}"),
    }
}
