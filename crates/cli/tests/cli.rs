//! Runs the built `dtrace` binary: usage, version, option errors and exit statuses.

mod common;

use std::process::Command;

fn dtrace(args: &[&str]) -> (i32, String, String) {
    common::outcome(
        &Command::new(env!("CARGO_BIN_EXE_dtrace"))
            .args(args)
            .env_remove("DTRACE_OPT_QUIET")
            .output()
            .unwrap(),
    )
}

#[test]
fn no_arguments_prints_usage_and_exits_2() {
    let (rc, out, err) = dtrace(&[]);
    assert_eq!(rc, 2);
    assert!(out.is_empty());
    assert!(err.starts_with("Usage: dtrace [-32|-64] [-aACeFGhHlqSvVwZ] [-b bufsz]"));
    assert!(err.contains("\t-Z  permit probe descriptions that match zero probes\n"));
}

#[test]
fn version() {
    let (rc, out, _) = dtrace(&["-V"]);
    assert_eq!(rc, 0);
    assert_eq!(out, "dtrace: Oracle D 2.0\n");
}

#[test]
fn illegal_option_is_a_usage_error() {
    let (rc, _, err) = dtrace(&["-k"]);
    assert_eq!(rc, 2);
    assert!(err.starts_with("dtrace: illegal option -- k\nUsage: dtrace "));
    let (rc, _, err) = dtrace(&["-n"]);
    assert_eq!(rc, 2);
    assert!(err.starts_with("dtrace: option requires an argument -- n\n"));
}

#[test]
fn bad_option_names_and_values() {
    let (rc, _, err) = dtrace(&["-x", "nosuch", "-n", "BEGIN"]);
    assert_eq!(rc, 1);
    assert_eq!(
        err,
        "dtrace: failed to set -x nosuch: Invalid option name\n"
    );
    let (rc, _, err) = dtrace(&["-b", "4q", "-n", "BEGIN"]);
    assert_eq!(rc, 1);
    assert_eq!(
        err,
        "dtrace: failed to set -b 4q: Invalid value for specified option\n"
    );
    let (rc, _, err) = dtrace(&["-x", "switchrate=fast", "-n", "BEGIN"]);
    assert_eq!(rc, 1);
    assert_eq!(
        err,
        "dtrace: failed to set -x switchrate: Invalid value for specified option\n"
    );
    let (rc, _, err) = dtrace(&["-l", "-V"]);
    assert_eq!(rc, 2);
    assert_eq!(
        err,
        "dtrace: only one of the [-AGhlV] options can be specified at a time\n"
    );
}

#[test]
fn environment_options_are_checked() {
    let o = Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .args(["-n", "BEGIN"])
        .env("DTRACE_OPT_BUFSIZE", "lots")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("failed to set option bufsize"));
}

#[test]
fn unsupported_features_say_so_and_exit_1() {
    // -c is supported now: the run ends with the command.
    let (rc, _, err) = dtrace(&["-c", "true", "-n", "BEGIN"]);
    assert_eq!(rc, 0, "{err}");
    let (rc, _, err) = dtrace(&["-A", "-s", "x.d"]);
    assert_eq!(rc, 1);
    assert!(err.contains("not yet supported"), "{err}");
    // -v with programs is supported now: the stability report (e2e tests check its text).
    let (rc, out, err) = dtrace(&["-ev", "-n", "BEGIN"]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.starts_with("\nStability attributes for description BEGIN:\n"),
        "{out}"
    );
}

#[test]
fn missing_script_is_a_compile_failure() {
    let (rc, _, err) = dtrace(&["-s", "/nonexistent/x.d"]);
    assert_eq!(rc, 1);
    assert_eq!(
        err,
        "dtrace: failed to open /nonexistent/x.d: No such file or directory\n"
    );
}

#[test]
fn options_without_probes() {
    // -e with nothing to compile has nothing to do; the options are still checked.
    let (rc, out, err) = dtrace(&["-b", "1k", "-b", "2k", "-e"]);
    assert_eq!((rc, out.as_str(), err.as_str()), (0, "", ""));
    let (rc, _, err) = dtrace(&["-b", "1q", "-e"]);
    assert_eq!(rc, 1);
    assert_eq!(
        err,
        "dtrace: failed to set -b 1q: Invalid value for specified option\n"
    );
    let (rc, _, err) = dtrace(&["-q"]);
    assert_eq!((rc, err.as_str()), (1, "dtrace: no probes specified\n"));
}

#[test]
fn data_model_flags() {
    let prog = "BEGIN { printf(\"%d %d\\n\", sizeof(long), sizeof(int *)); exit(0); }";
    let (rc, out, _) = dtrace(&["-32", "-qn", prog]);
    assert_eq!((rc, out.as_str()), (0, "4 4\n\n"));
    let (rc, out, _) = dtrace(&["-64", "-qn", prog]);
    assert_eq!((rc, out.as_str()), (0, "8 8\n\n"));
}

/// BEGIN fires in `dtrace` itself, whose ancestry `progenyof()` follows to init: `dtrace` is the
/// progeny of itself, its parent, the test process's parent and init, not of a pid past its own.
#[test]
fn progenyof_in_begin_follows_dtraces_ancestry() {
    let grandparent = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 1..];
            rest.split_whitespace().nth(1)?.parse::<u32>().ok()
        })
        .unwrap();
    let prog = format!(
        "BEGIN {{ printf(\"%d %d %d %d %d\", progenyof($pid), progenyof($ppid), \
         progenyof({grandparent}), progenyof(1), progenyof($pid + 100000)); exit(0); }}"
    );
    let (rc, out, err) = dtrace(&["-qn", &prog]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out, "1 1 1 1 0\n");
}

/// `ftruncate()` empties the `-o` file of what was printed before it (in the same buffer too).
#[test]
fn ftruncate_empties_the_output_file() {
    let dir = std::env::temp_dir().join(format!("dtrace-cli-ftruncate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("out.txt");
    let path = file.to_str().unwrap();
    let (rc, out, err) = dtrace(&[
        "-q",
        "-o",
        path,
        "-n",
        "BEGIN { printf(\"a\\n\"); } BEGIN { ftruncate(); } BEGIN { printf(\"b\\n\"); exit(0); }",
    ]);
    assert_eq!((rc, out.as_str()), (0, ""), "{err}");
    // (dtrace ends its output with a newline of its own)
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "b\n\n");
    let _ = std::fs::remove_dir_all(&dir);
}
