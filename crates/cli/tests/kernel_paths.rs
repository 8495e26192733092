//! `dtrace` printing real file paths (root, BPF, tracefs, the kernel's BTF and gcc; skipped
//! otherwise): `fds[arg0].fi_pathname`, `fi_dirname` and `fi_name` at `close(2)`, `cwd` and `root`
//! of a `-c` command started in a directory of the test's own, across a mount point (`/dev/shm`),
//! after the command's `chdir(2)`, for an unlinked file, a pipe, a descriptor that is not open, and
//! a path deeper than the capture walks (marked with a leading `...`, never cut silently); and in
//! BEGIN and END, `dtrace`'s own. `d_path()` built at the probe (aggregation keys, records, cut to
//! several `strsize`s, a socket and an eventfd too) prints what dtrace prints from the capture,
//! and runs there beside `fi_fs`, which dtrace's capture cannot serve with it.

mod common;
use std::path::{Path, PathBuf};
use std::process::Command;

fn ready(test: &str) -> bool {
    common::kernel_ok(test) && common::have_btf(test) && common::have_gcc(test)
}

/// Runs `dtrace args` in directory `cwd`: (exit status, stdout, stderr).
fn dtrace_in(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    common::outcome(
        &Command::new(env!("CARGO_BIN_EXE_dtrace"))
            .args(args)
            .current_dir(cwd)
            .output()
            .unwrap(),
    )
}

const PROG: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
/* argv[1]: a directory on /dev/shm holding sub/f.txt; argv[2]: a deep file. Starts in the
   directory dtrace runs in. Marks each step with a getppid() the script prints at. */
int main(int argc, char **argv) {
    char p[4096];
    if (argc < 3) return 1;
    getppid();
    close(open("known.txt", O_RDONLY));
    snprintf(p, sizeof p, "%s/sub/f.txt", argv[1]);
    close(open(p, O_RDONLY));
    snprintf(p, sizeof p, "%s/sub", argv[1]);
    if (chdir(p) != 0) return 2;
    int fd = open("gone.txt", O_CREAT | O_RDWR, 0600);
    unlink("gone.txt");
    close(fd);
    int pp[2];
    if (pipe(pp) != 0) return 3;
    close(pp[1]);
    close(open(argv[2], O_RDONLY));
    close(77);
    return 0;
}
"#;

const SCRIPT: &str = r#"
syscall::getppid:entry /pid == $target/ { self->on = 1; }
syscall::close:entry /self->on/ {
    printf("%d|%s|%s|%s|%s|%s\n", arg0, fds[arg0].fi_pathname, fds[arg0].fi_dirname,
        fds[arg0].fi_name, cwd, root);
}
"#;

fn shm_dir(tag: &str) -> PathBuf {
    let d = PathBuf::from(format!("/dev/shm/dtrace-cli-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::write(d.join("sub/f.txt"), "x").unwrap();
    d
}

/// A file 60 directories down `top` (deeper than the walk goes): `top/d0/.../d59/leaf.txt`.
fn deep_file(top: &Path) -> PathBuf {
    let mut deep = top.to_path_buf();
    for i in 0..60 {
        deep.push(format!("d{i}"));
    }
    std::fs::create_dir_all(&deep).unwrap();
    deep.push("leaf.txt");
    std::fs::write(&deep, "x").unwrap();
    deep
}

#[test]
fn file_paths_cwd_and_root_of_a_command() {
    if !ready("file_paths_cwd_and_root_of_a_command") {
        return;
    }
    let dir = common::test_dir("paths").canonicalize().unwrap();
    let exe = common::compile_c(&dir, "paths", PROG, &[]);
    std::fs::write(dir.join("known.txt"), "x").unwrap();
    let shm = shm_dir("paths");
    let deep = deep_file(&shm);
    let cmd = format!("{} {} {}", exe.display(), shm.display(), deep.display());
    let (st, out, err) = dtrace_in(&dir, &["-q", "-n", SCRIPT, "-c", &cmd]);
    let _ = std::fs::remove_dir_all(&shm);
    assert_eq!(st, 0, "{err}");
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    let d = dir.display().to_string();
    let sub = shm.join("sub").display().to_string();
    let s = shm.display().to_string();
    assert_eq!(lines.len(), 6, "{out}\n{err}");
    assert_eq!(lines[0], format!("3|{d}/known.txt|{d}|known.txt|{d}|/"));
    assert_eq!(lines[1], format!("3|{sub}/f.txt|{sub}|f.txt|{d}|/"));
    assert_eq!(
        lines[2],
        format!("3|{sub}/gone.txt (deleted)|{sub}|gone.txt|{sub}|/")
    );
    // A pipe: Linux's name for it, which has no directory.
    let f: Vec<&str> = lines[3].split('|').collect();
    assert_eq!(f[0], "4");
    assert!(
        f[1].starts_with("pipe:[") && f[1].ends_with(']'),
        "{}",
        lines[3]
    );
    assert_eq!(&f[2..], [".", "", sub.as_str(), "/"]);
    // Deeper than the walk: the leaf end of the path after "...", its dirname alike.
    let f: Vec<&str> = lines[4].split('|').collect();
    assert!(
        f[1].starts_with(".../d") && f[1].ends_with("/d58/d59/leaf.txt"),
        "{}",
        lines[4]
    );
    assert!(!f[1].contains(&s), "{}", lines[4]);
    assert_eq!(f[2], f[1].trim_end_matches("/leaf.txt"));
    assert_eq!(&f[3..], ["leaf.txt", sub.as_str(), "/"]);
    // Not open: DTrace's "<none>".
    assert_eq!(lines[5], format!("77|<none>|<none>|<none>|{sub}|/"));
    assert!(!err.contains("error"), "{err}");
}

#[test]
fn d_path_errors() {
    if !ready("d_path_errors") {
        return;
    }
    // A struct path at an address computed from the probe's arguments: the kernel's code walks
    // it (and faults at a bad one, as DTrace does); dtrace's capture cannot copy it, so with
    // the kernel paths off the clause cannot be enabled.
    let script = "syscall::close:entry /pid == $target/ \
        { trace(d_path((struct path *)(arg0 + arg1))); }";
    let (st, _, err) = common::dtrace(&["-n", script, "-c", "cat /etc/hostname"]);
    assert_eq!(st, 0, "{err}");
    assert!(err.contains("invalid address (0x"), "{err}");
    let (st, _, err) = common::dtrace_with_env(
        &common::kernel_paths_off(),
        &["-n", script, "-c", "/bin/true"],
    );
    assert_ne!(st, 0);
    assert!(
        err.contains("not yet supported: d_path() of a struct path whose address"),
        "{err}"
    );
    let (st, _, err) = common::dtrace(&["-n", "BEGIN { trace(d_path(1)); }"]);
    assert_ne!(st, 0);
    assert!(
        err.contains("d_path( ) argument #1 is incompatible with prototype"),
        "{err}"
    );
}

#[test]
fn begin_and_end_see_dtrace_own_paths() {
    if !ready("begin_and_end_see_dtrace_own_paths") {
        return;
    }
    let dir = common::test_dir("begin-paths").canonicalize().unwrap();
    let (st, out, err) = dtrace_in(
        &dir,
        &[
            "-q",
            "-n",
            "BEGIN { printf(\"%s|%s|%s\\n\", cwd, root, fds[0].fi_pathname); exit(0); } \
             END { printf(\"%s\\n\", cwd); }",
        ],
    );
    assert_eq!(st, 0, "{err}");
    let d = dir.display().to_string();
    // The test runs dtrace with stdin from /dev/null.
    assert_eq!(out.trim_end(), format!("{d}|/|/dev/null\n{d}"), "{err}");
}

/// Writes to a file whose path is longer than `strsize`, to a file deeper than the walk, to an
/// unlinked file, a pipe, a socket and an eventfd; then opens a file from a directory whose path
/// is longer than `strsize` (its cwd).
const WRITER: &str = r#"
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
/* argv[1]: a directory with a long path; argv[2]: a deep file; argv[3]: a directory. */
int main(int argc, char **argv) {
    char p[4096];
    if (argc < 4) return 1;
    snprintf(p, sizeof p, "%s/f.txt", argv[1]);
    int f = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (write(f, "x", 1) != 1) return 2;
    int d = open(argv[2], O_WRONLY);
    if (write(d, "x", 1) != 1) return 3;
    if (chdir(argv[1]) != 0) return 4;
    snprintf(p, sizeof p, "%s/gone.txt", argv[3]);
    int g = open(p, O_CREAT | O_RDWR, 0600);
    unlink(p);
    if (write(g, "x", 1) != 1) return 5;
    int pp[2];
    if (pipe(pp) != 0 || write(pp[1], "x", 1) != 1) return 6;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || write(sv[0], "x", 1) != 1) return 7;
    uint64_t one = 1;
    int e = eventfd(0, 0);
    if (write(e, &one, sizeof one) != sizeof one) return 8;
    if (write(f, "y", 1) != 1) return 9;
    close(open("f.txt", O_RDONLY));
    return 0;
}
"#;

/// The writer's command, with its long directory (a path of more than 300 characters) and its
/// deep file (60 directories down /dev/shm, whose top the unlinked file is in, which the caller
/// removes).
fn writer(tag: &str) -> (String, PathBuf, PathBuf) {
    let dir = common::test_dir(tag).canonicalize().unwrap();
    let exe = common::compile_c(&dir, "writer", WRITER, &[]);
    let mut long = dir.clone();
    for c in ['a', 'b', 'c'] {
        long.push(c.to_string().repeat(100));
    }
    std::fs::create_dir_all(&long).unwrap();
    let shm = shm_dir(tag);
    let deep = deep_file(&shm);
    let cmd = format!(
        "{} {} {} {}",
        exe.display(),
        long.display(),
        deep.display(),
        shm.display()
    );
    (cmd, long, shm)
}

const AT_PROBE: &str = "runs whole in the kernel at 1 probe (records built at the probe)";
const AGGS_AT_PROBE: &str = "aggregations run in the kernel at 1 probe";

/// `out` with the inode numbers of pipes' and sockets' names left out (they differ between runs,
/// in length too: a name cut to `strsize` may or may not reach its `]`, which goes with them),
/// and the spaces an aggregation pads its keys with to their longest (which they change) made one.
fn without_inodes(out: &str) -> String {
    let digits_out = out.chars().fold(String::new(), |mut s, c| {
        if !((c.is_ascii_digit() || c == ']') && s.ends_with(":[")) {
            s.push(c);
        }
        s
    });
    digits_out
        .lines()
        .map(|l| {
            l.split(' ')
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn d_path_at_the_probe_prints_what_dtrace_prints() {
    if !ready("d_path_at_the_probe_prints_what_dtrace_prints") {
        return;
    }
    let (cmd, long, shm) = writer("kdpath");
    let aggs = "syscall::write:entry /pid == $target/ { @[fds[arg0].fi_pathname] = count(); }
        syscall::openat:entry /pid == $target/ { @c[cwd] = count(); }";
    let out = common::same_with_kernel_paths_off_as(
        aggs,
        &[],
        &cmd,
        &[(1, AGGS_AT_PROBE), (2, AGGS_AT_PROBE)],
        without_inodes,
    );
    // The long path cut to strsize (256 characters), the deep one after "...", Linux's names.
    let l = long.display().to_string();
    let cut = |s: &str| s.chars().take(256).collect::<String>();
    let keys: Vec<&str> = out.split_whitespace().collect();
    assert!(keys.contains(&cut(&format!("{l}/f.txt")).as_str()), "{out}");
    assert!(keys.contains(&cut(&l).as_str()), "{out}");
    assert!(
        keys.iter()
            .any(|k| k.starts_with(".../d") && k.ends_with("/d59/leaf.txt")),
        "{out}"
    );
    for name in ["pipe:[", "socket:[", "anon_inode:[eventfd]"] {
        assert!(keys.iter().any(|k| k.starts_with(name)), "{name}: {out}");
    }
    assert!(out.contains("(deleted)"), "{out}");
    let records = "syscall::write:entry /pid == $target/ {
        printf(\"%d|%s|%s|%s\\n\", arg0, fds[arg0].fi_pathname, fds[arg0].fi_dirname, cwd); }";
    let out =
        common::same_with_kernel_paths_off_as(records, &[], &cmd, &[(1, AT_PROBE)], without_inodes);
    assert!(out.contains(" (deleted)|"), "{out}");
    // Cut to a strsize shorter than the paths, at each part of them: a name, a '/', the
    // "..." of the deep path, a pipe's inode, " (deleted)" (" (de" of it). Not below 6, where
    // "<none>" is longer than strsize, which keeps the clause in dtrace.
    let deleted = shm.join("gone.txt").display().to_string().len() + 4;
    for strsize in [7, 12, deleted] {
        common::same_with_kernel_paths_off_as(
            records,
            &["-x", &format!("strsize={strsize}")],
            &cmd,
            &[(1, AT_PROBE)],
            without_inodes,
        );
    }
    let _ = std::fs::remove_dir_all(&shm);
}

#[test]
fn d_path_beside_other_copies_runs_at_the_probe() {
    if !ready("d_path_beside_other_copies_runs_at_the_probe") {
        return;
    }
    // fi_fs beside fi_pathname: more copies than dtrace's capture takes, so only the probe's own
    // code serves the clause.
    let (cmd, long, shm) = writer("kdpath-fs");
    let script = "syscall::write:entry /pid == $target && arg0 == 3/ {
        printf(\"%s|%s|%s\\n\", fds[arg0].fi_fs, fds[arg0].fi_pathname, fds[arg0].fi_name); }";
    let (rc, out, err) = common::dtrace_with_env(&[], &["-qv", "-n", script, "-c", &cmd]);
    let _ = std::fs::remove_dir_all(&shm);
    assert_eq!(rc, 0, "{err}");
    assert!(
        common::clause_lines(&err, 1)
            .iter()
            .any(|l| l.contains(AT_PROBE)),
        "{err}"
    );
    let f = format!("{}/f.txt", long.display());
    let lines: Vec<&str> = out.lines().filter(|l| l.contains('|')).collect();
    assert_eq!(lines.len(), 2, "{out}");
    for l in lines {
        let parts: Vec<&str> = l.split('|').collect();
        assert_eq!(parts.len(), 3, "{l}");
        assert!(!parts[0].is_empty() && parts[0] != "<none>", "{l}");
        assert_eq!(parts[1], f.chars().take(256).collect::<String>(), "{l}");
        assert_eq!(parts[2], "f.txt", "{l}");
    }
    // More paths than dtrace's capture walks at one probe (four): where the probe's code may
    // loop (bpf_loop), they fit its program; else (Linux 6.1) their unrolled walks do not.
    let (cmd, long, shm) = writer("kdpath-five");
    let script = "syscall::write:entry /pid == $target && arg0 == 3/ {
        printf(\"%s|%s|%s|%s|%s\\n\", fds[0].fi_pathname, fds[1].fi_pathname,
            fds[2].fi_pathname, cwd, root); }";
    let (rc, out, err) = common::dtrace_with_env(&[], &["-qv", "-n", script, "-c", &cmd]);
    let _ = std::fs::remove_dir_all(&shm);
    if dtrace_linux::features::loop_at_probe().is_err() {
        assert_ne!(rc, 0, "{out}");
        assert!(
            err.contains(
                "not yet supported: more than 4 d_path() paths at one probe (the probe's \
                 program is too large"
            ),
            "{err}"
        );
        return;
    }
    assert_eq!(rc, 0, "{err}");
    assert!(
        common::clause_lines(&err, 1)
            .iter()
            .any(|l| l.contains(AT_PROBE)),
        "{err}"
    );
    let here = std::env::current_dir().unwrap().display().to_string();
    let lines: Vec<&str> = out.lines().filter(|l| l.contains('|')).collect();
    assert_eq!(lines.len(), 2, "{out}");
    // The writer's second write to its file is after its chdir().
    let there: String = long.display().to_string().chars().take(256).collect();
    for (l, cwd) in lines.iter().zip([here, there]) {
        let parts: Vec<&str> = l.split('|').collect();
        assert_eq!(parts[0], "/dev/null", "{l}");
        assert!(
            parts[1].starts_with("pipe:[") && parts[2].starts_with("pipe:["),
            "{l}"
        );
        assert_eq!(&parts[3..], [cwd.as_str(), "/"], "{l}");
    }
}

#[test]
fn d_path_faults_at_the_probe_as_in_dtrace() {
    if !ready("d_path_faults_at_the_probe_as_in_dtrace") {
        return;
    }
    // A file descriptor is no struct path: the walk cannot read it.
    let script = "syscall::write:entry /pid == $target/ {
            printf(\"%s\\n\", d_path((struct path *)arg0)); }
        syscall::write:entry /pid == $target/ { printf(\"%d\\n\", arg0); }";
    let (_, _, err) = common::dtrace(&["-qn", script, "-c", "cat /etc/hostname"]);
    assert!(err.contains("invalid address (0x1)"), "{err}");
    common::same_with_kernel_paths_off(
        script,
        &[],
        "cat /etc/hostname",
        &[(1, AT_PROBE), (2, AT_PROBE)],
    );
}

#[test]
fn d_path_too_large_for_the_probe_stays_in_dtrace() {
    if !ready("d_path_too_large_for_the_probe_stays_in_dtrace") {
        return;
    }
    // Eight clauses of five paths each: more code than one probe's program can jump over.
    let one = "syscall::write:entry /pid == $target/ { printf(\"%s|%s|%s|%s|%s\\n\",
        fds[arg0].fi_pathname, fds[arg0].fi_dirname, cwd, root, fds[arg0].fi_name); }";
    let script = [one; 8].join("\n");
    let out = common::same_with_kernel_paths_off_as(
        &script,
        &[],
        "cat /etc/hostname",
        &[(1, "the probe's program is too large"), (8, "too large")],
        without_inodes,
    );
    assert_eq!(out.matches("pipe:[").count(), 8, "{out}");
}

/// `fds[self->fd].fi_pathname` at a syscall's return, the descriptor kept in a thread-local at
/// its entry: the path of a `struct file` reached through an index only the kernel knows is
/// walked there, as DTrace does (dtrace's capture cannot copy it: the probe's enabling once
/// failed with "not yet supported" even where the clause could run whole at the probe). With
/// the variables in dtrace it still cannot, and says so.
#[test]
fn a_path_at_a_descriptor_kept_in_a_thread_local_is_walked_in_the_kernel() {
    let test = "a_path_at_a_descriptor_kept_in_a_thread_local_is_walked_in_the_kernel";
    if !(ready(test) && common::have_dd(test)) {
        return;
    }
    let script = "syscall::write:entry /pid == $target/ { self->fd = arg0; } \
        syscall::write:return /self->fd/ { printf(\"%s %s %d\\n\", fds[self->fd].fi_pathname, \
        basename(fds[self->fd].fi_pathname), arg0); self->fd = 0; }";
    let (rc, out, err) = common::dtrace(&["-qv", "-n", script, "-c", common::DD_WRITES]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        common::clause_lines(&err, 2)
            .iter()
            .any(|l| l.contains("runs whole in the kernel")),
        "{err}"
    );
    assert_eq!(out.matches("/dev/null null 300\n").count(), 4, "{out}");
    let (rc, _, err) = common::dtrace_with_env(
        &[("DTRACE_KERNEL_VARIABLES", "0")],
        &["-qn", script, "-c", common::DD_WRITES],
    );
    assert_ne!(rc, 0);
    assert!(err.contains("not yet supported: d_path()"), "{err}");
}
