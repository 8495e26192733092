//! Programs planned and enabled one after the other (as a library consumer may): a probe the first
//! program enabled with a kernel filter (its predicate `pid == 1`, false for the writer) still
//! delivers the firings the second program's clause on the same probe wants, because planning that
//! clause turns the kernel filters off.

mod common;

use common::{compile, gcc_ok, kernel_ok};
use dtrace_compiler::{compile as compile_d, CompileOptions};
use dtrace_linux::process::{spawn_held, ExitStatus};

const WRITER: &str = r#"
#include <stdlib.h>
#include <unistd.h>
#include <fcntl.h>
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    int fd = open("/dev/null", O_WRONLY);
    for (int i = 0; i < n; i++)
        if (write(fd, "x", 1) != 1) return 1;
    return 0;
}
"#;

#[test]
fn a_later_program_on_a_filtered_probe_sees_its_firings() {
    if !kernel_ok("a_later_program_on_a_filtered_probe_sees_its_firings")
        || !gcc_ok("a_later_program_on_a_filtered_probe_sees_its_firings")
    {
        return;
    }
    let exe = compile("lateprog", WRITER);
    let (linux, mut fw) = common::registered("lp");
    let n = 23u64;
    let mut child = spawn_held(&[exe.display().to_string(), n.to_string()]).unwrap();
    let opts = CompileOptions {
        macros: vec![("target".into(), child.pid().to_string())],
        ..CompileOptions::default()
    };
    let first = compile_d(
        "syscall::write:entry /pid == 1 && arg2 == 1/ { @a = count(); }",
        &opts,
    )
    .unwrap();
    linux.plan(&first);
    fw.enable(&first, false).unwrap();
    let report = linux.kernel_report();
    assert_eq!(
        (report[0].in_kernel, report[0].probes),
        (1, 1),
        "{report:?}"
    );
    let second = compile_d(
        "syscall::write:entry /pid == $target/ { @b = count(); }",
        &opts,
    )
    .unwrap();
    linux.plan(&second);
    let en = fw.enable(&second, false).unwrap();
    // The filters are off now, and said to be.
    assert!(linux.kernel_report().iter().all(|c| c.in_kernel == 0));
    fw.go().unwrap();
    child.release().unwrap();
    let status = loop {
        linux.pump(&mut fw, 50).unwrap();
        fw.poll();
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
    };
    assert_eq!(status, ExitStatus::Exited(0));
    linux.finish(&mut fw);
    fw.stop().unwrap();
    let id = en.aggs[0].aggid;
    let counted: u64 = fw
        .snapshot_aggregations()
        .iter()
        .flat_map(|a| a.records.iter())
        .filter(|r| r.aggid == id)
        .map(|r| u64::from_ne_bytes(r.value[..8].try_into().unwrap()))
        .sum();
    assert_eq!(counted, n);
    linux.close();
}
