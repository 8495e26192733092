//! Provider globs with a literal prefix (`zzglob*:::`) are matched against the USDT providers of
//! every running process, read from `/proc` once per enabling however many clauses name one
//! (preparing each description and placing the program's variables both look), and read afresh
//! by the next enabling: a process started between two enablings is seen by the second (root,
//! BPF, tracefs, gcc and `<sys/sdt.h>`).

mod common;

use common::{compile, gcc_ok, kernel_ok};
use dtrace_compiler::{compile as compile_d, CompileOptions};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Fires `zzglob:tick` once, says `ready`, then waits for a line on stdin.
const PROG: &str = r#"
#include <stdio.h>
#include <sys/sdt.h>
int main(void) {
    DTRACE_PROBE(zzglob, tick);
    puts("ready");
    fflush(stdout);
    char line[8];
    return fgets(line, sizeof line, stdin) ? 0 : 1;
}
"#;

/// Starts `exe`, waiting on stdin, once it runs `main` (its objects mapped: `/proc/<pid>/exe`
/// names the new program before the kernel has mapped it, so a scan made then can miss it).
fn start(exe: &Path) -> Child {
    use std::io::BufRead;
    let mut child = Command::new(exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut line = String::new();
    let out = child.stdout.take().expect("stdout piped");
    let _ = std::io::BufReader::new(out).read_line(&mut line);
    if line.trim() != "ready" {
        let pid = child.id();
        let _ = child.kill();
        let _ = child.wait();
        panic!("{pid} never ran {}", exe.display());
    }
    child
}

/// Lets `child` exit.
fn finish(mut child: Child) {
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(b"\n");
    }
    let _ = child.wait();
}

#[test]
fn provider_globs_read_the_processes_once_per_enabling() {
    let t = "provider_globs_read_the_processes_once_per_enabling";
    if !kernel_ok(t) || !gcc_ok(t) {
        return;
    }
    if !dtrace_testkit::skip_unless(
        Path::new("/usr/include/x86_64-linux-gnu/sys/sdt.h").exists(),
        t,
        "needs <sys/sdt.h> (systemtap-sdt-dev)",
    ) {
        return;
    }
    let exe = compile("zzglob", PROG).canonicalize().expect("the program");
    let first = start(&exe);
    let (linux, mut fw) = common::registered("pg");
    let program = compile_d(
        "zzglob*:::tick { @a = count(); } zzglob*:::tick { n++; } zzglob*:::tick { @c = sum(n); }",
        &CompileOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    // One enabling: planned, then each clause's description prepared.
    linux.plan_all(&[&program]);
    for e in &program.ecbs {
        linux
            .prepare_user(&mut fw, std::slice::from_ref(&e.probe))
            .unwrap();
    }
    assert_eq!(linux.process_scans(), 1);
    let provider = |pid: u32| format!("zzglob{pid}");
    assert!(fw.provider_attributes(&provider(first.id())).is_some());
    linux.end_enabling();
    // The next enabling reads them again, and sees a process started since.
    let second = start(&exe);
    let d = &program.ecbs[0].probe;
    linux
        .prepare_user(&mut fw, std::slice::from_ref(d))
        .unwrap();
    linux
        .prepare_user(&mut fw, std::slice::from_ref(d))
        .unwrap();
    assert_eq!(linux.process_scans(), 2);
    assert!(fw.provider_attributes(&provider(second.id())).is_some());
    finish(first);
    finish(second);
    linux.close();
}
