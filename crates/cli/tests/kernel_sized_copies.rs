//! `dtrace` copying user memory whose size or address is known only at the probe (root, BPF and
//! tracefs; skipped otherwise), with `-c` programs that exit right after their system calls:
//! `copyin(arg1, arg2)` of write(2) prints exactly the bytes written, 5000 and 20000 of them
//! included, all taken at the probe (the writer is gone when dtrace prints them); a length
//! limited to a page prints the first 4096 bytes; a copy longer than the scratch space is
//! DTrace's out-of-scratch error, and a string made of it is cut at `strsize`; a copy that faults
//! part way is DTrace's invalid address error at the copy's address; a sized copy
//! as an aggregation key and in a speculation is whole; and execve's argv strings are reached
//! through the pointers in the vector.

mod common;
use common::{compile_c, dtrace, error_lines, have_gcc, kernel_ok, test_dir};

const WRITER: &str = r#"
#define _GNU_SOURCE
#include <sched.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    /* One CPU: records print in per-CPU buffer order (as DTrace's), so the expected order
       holds only for a process that stays on one. */
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    sched_setaffinity(0, sizeof one, &one);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return 1;
    write(fd, "hello, world\n", 13);
    write(fd, "x", 1);
    char *mid = malloc(3000), *big = malloc(5000), *huge = malloc(20000);
    for (int i = 0; i < 3000; i++) mid[i] = 'A' + i % 26;
    for (int i = 0; i < 5000; i++) big[i] = 'a' + i % 26;
    for (int i = 0; i < 20000; i++) huge[i] = 'a' + i % 26;
    write(fd, mid, 3000);
    write(fd, big, 5000);
    write(fd, huge, 20000);
    return 0;
}
"#;

fn pattern(first: u8, n: usize) -> String {
    (0..n).map(|i| (first + (i % 26) as u8) as char).collect()
}

/// Builds the writer in test directory `tag`; the `-c` command running it.
fn writer(tag: &str) -> String {
    let dir = test_dir(tag);
    let exe = compile_c(&dir, "writer", WRITER, &["-O1"]);
    format!("{} {}", exe.display(), dir.join("out").display())
}

#[test]
fn copyin_sized_by_the_write_count_prints_the_bytes_written() {
    let test = "copyin_sized_by_the_write_count_prints_the_bytes_written";
    if !kernel_ok(test) || !have_gcc(test) {
        return;
    }
    let cmd = writer("sized");
    let (rc, out, err) = dtrace(&[
        "-q",
        "-x",
        "strsize=32768",
        "-n",
        r#"syscall::write:entry /pid == $target/ { printf("<%d:%s>\n", arg2, stringof(copyin(arg1, arg2))); }"#,
        "-n",
        r#"syscall::write:entry /pid == $target && arg2 > 4096/ { printf("[%d:%s]\n", arg2, stringof(copyin(arg1, arg2 > 4096 ? 4096 : arg2))); }"#,
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    // Every byte was taken at the probe: the writer exits right after its last write, and its
    // memory is never read.
    assert!(error_lines(&err).is_empty(), "{err}");
    let want = format!(
        "<13:hello, world\n>\n<1:x>\n<3000:{}>\n<5000:{}>\n[5000:{}]\n<20000:{}>\n[20000:{}]\n",
        pattern(b'A', 3000),
        pattern(b'a', 5000),
        pattern(b'a', 4096),
        pattern(b'a', 20000),
        pattern(b'a', 4096),
    );
    assert_eq!(out.trim_end_matches('\n'), want.trim_end_matches('\n'));
}

#[test]
fn copies_longer_than_the_limits_are_cut_as_dtrace_cuts() {
    let test = "copies_longer_than_the_limits_are_cut_as_dtrace_cuts";
    if !kernel_ok(test) || !have_gcc(test) {
        return;
    }
    let cmd = writer("sized_limits");
    // copyin() allocates its bytes in the scratch space: the 20000-byte copy does not fit 8k,
    // and is DTrace's out-of-scratch error; the 5000-byte one fits.
    let (rc, out, err) = dtrace(&[
        "-q",
        "-x",
        "strsize=32768",
        "-x",
        "scratchsize=8k",
        "-n",
        r#"syscall::write:entry /pid == $target && arg2 > 4000/ { printf("<%d:%s>\n", arg2, stringof(copyin(arg1, arg2))); }"#,
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out.trim_end(), format!("<5000:{}>", pattern(b'a', 5000)));
    let errors = error_lines(&err);
    assert_eq!(errors.len(), 1, "{err}");
    assert!(
        errors[0].contains("out of scratch space")
            && errors[0].contains("syscall:vmlinux:write:entry"),
        "{err}"
    );
    // A string made of a copy is cut at strsize, the copy itself taken whole.
    let (rc, out, err) = dtrace(&[
        "-q",
        "-x",
        "strsize=1000",
        "-n",
        r#"syscall::write:entry /pid == $target && arg2 > 4000/ { printf("<%d:%s>\n", arg2, stringof(copyin(arg1, arg2))); }"#,
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(error_lines(&err).is_empty(), "{err}");
    let cut = pattern(b'a', 1000);
    assert_eq!(out.trim_end(), format!("<5000:{cut}>\n<20000:{cut}>"));
}

const FAULTER: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
int main(void) {
    int fd = open("/dev/null", O_WRONLY);
    /* Two pages, the second unmapped: a 6000-byte write from the first faults part way. */
    char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    for (int i = 0; i < 4096; i++) p[i] = 'a' + i % 26;
    munmap(p + 4096, 4096);
    fprintf(stderr, "start=%p\n", (void *)p);
    write(fd, p, 6000);
    write(fd, p, 4096);
    return 0;
}
"#;

#[test]
fn a_sized_copy_that_faults_is_dtraces_invalid_address() {
    let test = "a_sized_copy_that_faults_is_dtraces_invalid_address";
    if !kernel_ok(test) || !have_gcc(test) {
        return;
    }
    let exe = compile_c(&test_dir("sized_fault"), "faulter", FAULTER, &["-O1"]);
    let (rc, out, err) = dtrace(&[
        "-q",
        "-x",
        "strsize=8192",
        "-n",
        // Not its message on stderr (fd 2): its writes to /dev/null.
        r#"syscall::write:entry /pid == $target && arg0 > 2/ { printf("<%d:%s>\n", arg2, stringof(copyin(arg1, arg2))); }"#,
        "-c",
        &exe.display().to_string(),
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out.trim_end(), format!("<4096:{}>", pattern(b'a', 4096)));
    // The copy's address, as DTrace for Linux reports a copyin() that faults (never a part of
    // the bytes).
    let start = err
        .lines()
        .find_map(|l| l.strip_prefix("start="))
        .unwrap_or_else(|| panic!("{err}"));
    let errors = error_lines(&err);
    assert_eq!(errors.len(), 1, "{err}");
    assert!(
        errors[0].contains(&format!("invalid address ({start})"))
            && errors[0].contains("syscall:vmlinux:write:entry"),
        "{err}"
    );
}

#[test]
fn sized_copies_as_keys_and_in_speculations_are_whole() {
    let test = "sized_copies_as_keys_and_in_speculations_are_whole";
    if !kernel_ok(test) || !have_gcc(test) {
        return;
    }
    let cmd = writer("sized_keys");
    let (rc, out, err) = dtrace(&[
        "-q",
        "-x",
        "strsize=32768",
        "-x",
        "nspec=4",
        "-x",
        "specsize=1m",
        "-n",
        r#"syscall::write:entry /pid == $target && arg2 > 4096/ { @[arg2, stringof(copyin(arg1, arg2))] = count(); }"#,
        "-n",
        r#"syscall::write:entry /pid == $target && arg2 > 4096/ { self->spec = speculation(); speculate(self->spec); printf("{%d:%s}\n", arg2, stringof(copyin(arg1, arg2))); }"#,
        "-n",
        r#"syscall::write:entry /self->spec/ { commit(self->spec); self->spec = 0; }"#,
        "-n",
        "END { printa(\"(%d:%s:%@d)\\n\", @); }",
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(error_lines(&err).is_empty(), "{err}");
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    let (p5, p20) = (pattern(b'a', 5000), pattern(b'a', 20000));
    assert_eq!(
        lines,
        vec![
            format!("{{5000:{p5}}}"),
            format!("{{20000:{p20}}}"),
            format!("(5000:{p5}:1)"),
            format!("(20000:{p20}:1)"),
        ],
        "{out}"
    );
}

const EXEC: &str = r#"
#include <unistd.h>
int main(void) {
    char a0[] = "true", a1[] = "alpha", a2[] = "beta gamma";
    char *argv[] = {a0, a1, a2, NULL};
    char *envp[] = {NULL};
    execve("/bin/true", argv, envp);
    return 1;
}
"#;

#[test]
fn execve_argv_printed_through_user_pointer_chains() {
    let test = "execve_argv_printed_through_user_pointer_chains";
    if !kernel_ok(test) || !have_gcc(test) {
        return;
    }
    let dir = test_dir("argv");
    let exe = compile_c(&dir, "execer", EXEC, &["-O1"]);
    let exe = exe.display().to_string();
    for prog in [
        r#"syscall::execve:entry /pid == $target && execname == "execer"/ {
            printf("%s|%s|%s\n", copyinstr(*(uint64_t *)copyin(arg1, 8)),
                copyinstr(*(uint64_t *)copyin(arg1 + 8, 8)),
                copyinstr(*(uint64_t *)copyin(arg1 + 16, 8)));
        }"#,
        r#"syscall::execve:entry /pid == $target && execname == "execer"/ {
            this->argv = (uint64_t *)copyin(arg1, 8 * 4);
            printf("%s|%s|%s|%d\n", copyinstr(this->argv[0]), copyinstr(this->argv[1]),
                copyinstr(this->argv[2]), this->argv[3]);
        }"#,
    ] {
        let (rc, out, err) = dtrace(&["-qn", prog, "-c", &exe]);
        assert_eq!(rc, 0, "{err}");
        assert!(!err.contains("error"), "{prog}: {err}");
        let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
        let want = if prog.contains("this->argv") {
            "true|alpha|beta gamma|0"
        } else {
            "true|alpha|beta gamma"
        };
        assert_eq!(lines, vec![want], "{prog}: {out}");
    }
}
