//! DTrace for Linux's environment conventions, as its test harness relies on them: `DTRACE_OPT_<NAME>`
//! sets any option, `cppargs` hands further arguments to the preprocessor, and `_DTRACE_TESTING`
//! drops the CPU and ID columns of probe lines and their heading; what an unprivileged user is told,
//! and that `exit()` ends a run even when dtrace's own output fires the probe.

use std::io::Write;
use std::process::Command;

mod common;
use common::Out;

/// Runs `dtrace` with a clean slate of DTrace variables plus `env`.
fn dtrace(env: &[(&str, &str)], args: &[&str]) -> Out {
    common::dtrace_plain(env, args).into()
}

fn script(name: &str, text: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("dtrace-conv-{}-{name}", std::process::id()));
    std::fs::File::create(&p)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .unwrap();
    p
}

#[test]
fn testing_mode_drops_cpu_and_id_columns() {
    let prog = "BEGIN { trace(42); exit(0); }";
    let o = dtrace(&[("_DTRACE_TESTING", "t")], &["-n", prog]);
    assert_eq!(o.rc, 0);
    assert_eq!(
        o.stdout,
        format!("{:>32}\n{:>32} {:>11}\n\n", "FUNCTION:NAME", ":BEGIN", "42")
    );
    assert_eq!(o.stderr, "dtrace: description 'BEGIN ' matched 1 probe\n");
    // Without it, the columns are there.
    let o = dtrace(&[], &["-n", prog]);
    assert!(o
        .stdout
        .starts_with("CPU     ID                    FUNCTION:NAME\n"));
}

#[test]
fn testing_mode_flowindent_heading() {
    let o = dtrace(&[("_DTRACE_TESTING", "t")], &["-Fn", "BEGIN { exit(0); }"]);
    assert_eq!(o.rc, 0);
    assert_eq!(
        o.stdout,
        format!("{:<41}\n{:<41} \n\n", "FUNCTION", "| :BEGIN")
    );
}

#[test]
fn environment_sets_every_option() {
    // A runtime option.
    let o = dtrace(
        &[("DTRACE_OPT_QUIET", "yes")],
        &["-n", "BEGIN { trace(7); exit(0); }"],
    );
    assert_eq!(o.rc, 0);
    assert_eq!((o.stdout.as_str(), o.stderr.as_str()), ("7\n", ""));
    // A size, checked like -x's.
    let o = dtrace(&[("DTRACE_OPT_BUFSIZE", "4q")], &["-n", "BEGIN"]);
    assert_eq!(o.rc, 1);
    assert_eq!(
        o.stderr,
        "dtrace: failed to set option bufsize from the environment: Invalid value for specified option\n"
    );
    // A variable naming no option is ignored, as DTrace looks up only the names it knows.
    let o = dtrace(
        &[("DTRACE_OPT_NOSUCHOPTION", "1"), ("DTRACE_OPT_QUIET", "")],
        &["-n", "BEGIN { exit(0); }"],
    );
    assert_eq!(o.rc, 0);
    assert_eq!(o.stderr, "");
}

#[test]
fn cppargs_reach_the_preprocessor() {
    let p = script(
        "cppargs.d",
        "#if FOO == 3 && !defined(BAR)\nBEGIN { trace(\"foo3\"); exit(0); }\n#else\nBEGIN { trace(\"other\"); exit(0); }\n#endif\n",
    );
    let path = p.to_str().unwrap();
    let o = dtrace(
        &[(
            "DTRACE_OPT_CPPARGS",
            "-DFOO=3\t-DBAR -fno-show-column  -UBAR",
        )],
        &["-Cqs", path],
    );
    assert_eq!(
        (o.rc, o.stdout.as_str(), o.stderr.as_str()),
        (0, "foo3\n", "")
    );
    let o = dtrace(&[], &["-x", "cppargs=-DFOO=4", "-Cqs", path]);
    assert_eq!((o.rc, o.stdout.as_str()), (0, "other\n"));
    // The option wants a value.
    let o = dtrace(&[], &["-x", "cppargs", "-Cqs", path]);
    assert_eq!(o.rc, 1);
    assert!(o.stderr.starts_with("dtrace: failed to set -x cppargs: "));
    let _ = std::fs::remove_file(p);
}

#[test]
fn exit_ends_the_run_though_dtrace_output_fires_the_probe() {
    if !common::kernel_ok("exit_ends_the_run_though_dtrace_output_fires_the_probe") {
        return;
    }
    // dtrace's own writes fire syscall::write:entry; once exit() is seen, it stops consuming.
    let o = dtrace(&[], &["-n", "syscall::write:entry { exit(0); }"]);
    assert_eq!(o.rc, 0);
    assert!(o.stdout.contains(" write:entry"), "{}", o.stdout);
}

#[test]
fn unprivileged_users_are_told_privileges_are_missing() {
    let ok = dtrace_testkit::skip_unless(
        dtrace_testkit::is_root() && dtrace_testkit::have_program("setpriv"),
        "unprivileged_users_are_told_privileges_are_missing",
        "needs root and setpriv to run as nobody",
    );
    if !ok {
        return;
    }
    // A copy nobody can run, wherever the build tree is.
    let dir = std::env::temp_dir().join(format!("dtrace-conv-priv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bin = dir.join("dtrace");
    std::fs::copy(env!("CARGO_BIN_EXE_dtrace"), &bin).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = |prog: &str| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .args(["-n", prog])
            .current_dir(&dir)
            .env_remove("_DTRACE_TESTING")
            .output()
            .unwrap()
    };
    let o = run("syscall::read:entry");
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "dtrace: failed to initialize dtrace: DTrace requires additional privileges\n"
    );
    // The probes of dtrace itself need no privileges.
    let o = run("BEGIN { exit(0); }");
    assert_eq!(o.status.code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn preprocessor_messages_pass_through() {
    let p = script("unterminated.d", "BEGIN\n{\n#if 1\n\texit(0);\n}\n");
    let path = p.to_str().unwrap();
    let o = dtrace(&[], &["-Cs", path]);
    assert_eq!(o.rc, 1);
    // cpp reads the program as /dev/stdin and says so; DTrace's own message follows.
    assert!(o.stderr.starts_with("/dev/stdin:3: "), "{}", o.stderr);
    assert!(
        o.stderr.ends_with(&format!(
            "\ndtrace: failed to compile script {path}: Preprocessor failed to process input program\n"
        )),
        "{}",
        o.stderr
    );
    // The preprocessor runs under the base name of its path.
    let o = dtrace(&[], &["-x", "cpppath=/bin/cat", "-Cs", path]);
    assert_eq!(o.rc, 1);
    assert!(o.stderr.starts_with("cat: "), "{}", o.stderr);
    // whether cat quit before or after reading the program, its failure is the preprocessor's
    assert!(
        o.stderr
            .ends_with(": Preprocessor failed to process input program\n"),
        "{}",
        o.stderr
    );
    let _ = std::fs::remove_file(p);
}
