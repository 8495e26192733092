//! `dtrace` copying user memory whose size or address is known only at the probe (root, BPF and
//! tracefs; skipped otherwise), with `-c` programs that exit right after their system calls:
//! `copyin(arg1, arg2)` of write(2) prints exactly the bytes written up to the capture's cap (4096
//! bytes); a longer read is served from the process's memory while it lives and is an invalid
//! address after (whichever the consumer meets, whole), while a length limited to the cap prints
//! the first 4096 bytes; and execve's argv strings are reached through the pointers in the vector.

mod common;
use common::{compile_c, dtrace, have_gcc, kernel_ok, test_dir};

const WRITER: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return 1;
    write(fd, "hello, world\n", 13);
    write(fd, "x", 1);
    char *mid = malloc(3000), *big = malloc(5000);
    for (int i = 0; i < 3000; i++) mid[i] = 'A' + i % 26;
    for (int i = 0; i < 5000; i++) big[i] = 'a' + i % 26;
    write(fd, mid, 3000);
    write(fd, big, 5000);
    return 0;
}
"#;

fn pattern(first: u8, n: usize) -> String {
    (0..n).map(|i| (first + (i % 26) as u8) as char).collect()
}

#[test]
fn copyin_sized_by_the_write_count_prints_the_bytes_written() {
    let test = "copyin_sized_by_the_write_count_prints_the_bytes_written";
    if !kernel_ok(test) || !have_gcc(test) {
        return;
    }
    let dir = test_dir("sized");
    let exe = compile_c(&dir, "writer", WRITER, &["-O1"]);
    let cmd = format!("{} {}", exe.display(), dir.join("out").display());
    let (rc, out, err) = dtrace(&[
        "-q",
        "-x",
        "strsize=8192",
        "-n",
        r#"syscall::write:entry /pid == $target/ { printf("<%d:%s>\n", arg2, stringof(copyin(arg1, arg2))); }"#,
        "-n",
        r#"syscall::write:entry /pid == $target && arg2 > 4096/ { printf("[%d:%s]\n", arg2, stringof(copyin(arg1, arg2 > 4096 ? 4096 : arg2))); }"#,
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    let errors: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("dtrace: error in dt_clause_"))
        .collect();
    // The 5000-byte read is longer than the 4096 bytes captured: it is served from the writer's
    // memory while the writer lives and is DTrace's invalid address error after. The writer exits
    // right after its last write, so which of the two the consumer meets is a race it may lose
    // either way (the 6.1 guest under load found the writer still there): each outcome is checked
    // whole, never the captured prefix alone and never both.
    let long = format!("<5000:{}>\n", pattern(b'a', 5000));
    let read_live = out.contains("<5000:");
    let want = format!(
        "<13:hello, world\n>\n<1:x>\n<3000:{}>\n{}[5000:{}]\n",
        pattern(b'A', 3000),
        if read_live { long.as_str() } else { "" },
        pattern(b'a', 4096)
    );
    assert_eq!(out.trim_end_matches('\n'), want.trim_end_matches('\n'));
    if read_live {
        assert!(errors.is_empty(), "{err}");
    } else {
        assert_eq!(errors.len(), 1, "{err}");
        assert!(
            errors[0].contains("invalid address (0x")
                && errors[0].contains("syscall:vmlinux:write:entry"),
            "{err}"
        );
    }
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
