//! USDT probes from `.note.stapsdt` end to end: a C program built here with `<sys/sdt.h>`
//! (semaphores on) fires its probes a known number of times with known arguments; a probe guarded
//! by its semaphore fires only while traced; DTrace's names (`work__done` is `work-done`); and
//! Debian's `python3`, whose `gc-start` count over a script equals bpftrace's `usdt:` count of the
//! same script (root, BPF, uprobes; gcc, systemtap-sdt-dev, python3, bpftrace).

mod common;

use common::dtrace;
use std::path::Path;
use std::process::Command;

const PROG: &str = r#"
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#include <stdio.h>
#include <stdlib.h>
unsigned short myapp_work__done_semaphore __attribute__((section(".probes")));
unsigned short myapp_tick_semaphore __attribute__((section(".probes")));
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    long enabled = 0;
    for (int i = 0; i < n; i++) {
        DTRACE_PROBE2(myapp, work__done, i, (long)i * -10);
        if (__builtin_expect(myapp_tick_semaphore, 0)) {
            enabled++;
            DTRACE_PROBE1(myapp, tick, i);
        }
    }
    printf("enabled=%ld\n", enabled);
    return 0;
}
"#;

fn ready(test: &str) -> bool {
    common::kernel_ok(test)
        && common::have_gcc(test)
        && dtrace_testkit::skip_unless(dtrace_linux::uprobe::available(), test, "no uprobe PMU")
        && dtrace_testkit::skip_unless(
            Path::new("/usr/include/x86_64-linux-gnu/sys/sdt.h").exists()
                || Path::new("/usr/include/sys/sdt.h").exists(),
            test,
            "needs <sys/sdt.h> (systemtap-sdt-dev)",
        )
}

#[test]
fn stapsdt_probes_fire_with_their_arguments_and_semaphores() {
    let test = "stapsdt_probes_fire_with_their_arguments_and_semaphores";
    if !ready(test) {
        return;
    }
    let dir = common::test_dir(test);
    for (name, flags) in [
        ("sdt-O2", &["-O2"][..]),
        ("sdt-O0-static", &["-O0", "-static"][..]),
    ] {
        let exe = common::compile_c(&dir, name, PROG, flags);
        let cmd = format!("{} 12", exe.display());
        let (rc, out, err) = dtrace(&["-l", "-n", "myapp$target:::", "-c", &cmd]);
        assert_eq!(rc, 0, "{err}");
        let names: Vec<&str> = out
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().last())
            .collect();
        assert_eq!(names, ["work-done", "tick"], "{out}");
        assert!(out.contains(&format!(" {name} ")), "{out}");
        let (rc, out, err) = dtrace(&[
            "-qn",
            "myapp$target:::work-done { @n = count(); @a0 = sum(arg0); @a1 = sum(arg1); }
             myapp$target::main:tick { @t = count(); }
             END { printa(\"n %@d\\n\", @n); printa(\"a0 %@d\\n\", @a0);
                   printa(\"a1 %@d\\n\", @a1); printa(\"t %@d\\n\", @t); }",
            "-c",
            &cmd,
        ]);
        assert_eq!(rc, 0, "{name}: {err}");
        // 12 iterations: sum(i) = 66, sum(-10 i) = -660; the semaphore was raised for tick.
        assert!(out.contains("enabled=12\n"), "{name}: {out}");
        for want in ["n 12\n", "a0 66\n", "a1 -660\n", "t 12\n"] {
            assert!(out.contains(want), "{name}: {want:?} not in {out}");
        }
        // Untraced, the semaphore is down.
        let o = Command::new(&exe).arg("12").output().unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout), "enabled=0\n");
    }
}

/// The `gc-start` count of a script as bpftrace's `usdt:` reports it, or `None` when bpftrace
/// cannot run here.
fn bpftrace_gc_count(python: &str, script: &Path, n: u32) -> Option<u64> {
    let o = Command::new("bpftrace")
        .args([
            "-c",
            &format!("{python} {} {n}", script.display()),
            "-e",
            &format!("usdt:{python}:python:gc__start /arg0 == 2/ {{ @ = count(); }}"),
        ])
        .output()
        .ok()?;
    let out = String::from_utf8_lossy(&o.stdout);
    out.lines()
        .find_map(|l| l.strip_prefix("@: "))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
fn python_gc_start_counts_match_bpftrace() {
    let test = "python_gc_start_counts_match_bpftrace";
    if !ready(test) {
        return;
    }
    let python = "/usr/bin/python3.11";
    let notes = Command::new("readelf")
        .args(["-n", python])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("gc__start"))
        .unwrap_or(false);
    if !dtrace_testkit::skip_unless(notes, test, "needs Debian's python3.11 with stapsdt notes")
        || !dtrace_testkit::skip_unless(
            dtrace_testkit::have_program("bpftrace"),
            test,
            "needs bpftrace",
        )
    {
        return;
    }
    let dir = common::test_dir(test);
    let script = dir.join("gc.py");
    std::fs::write(
        &script,
        "import gc, sys\nfor i in range(int(sys.argv[1])):\n    gc.collect(2)\ngc.collect(1)\n",
    )
    .unwrap();
    let n = 25;
    let (rc, out, err) = dtrace(&[
        "-qn",
        "python$target:::gc-start /arg0 == 2/ { @ = count(); } END { printa(\"n %@d\\n\", @); }",
        "-c",
        &format!("{python} {} {n}", script.display()),
    ]);
    assert_eq!(rc, 0, "{err}");
    let ours: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("n "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{out}\n{err}"));
    // Every explicit collection, plus those of the interpreter's own start and finalization.
    assert!(ours >= n as u64, "{ours}");
    let theirs = bpftrace_gc_count(python, &script, n);
    if !dtrace_testkit::skip_unless(theirs.is_some(), test, "bpftrace usdt: did not run") {
        return;
    }
    assert_eq!(Some(ours), theirs);
}

/// Two phases, each after a line on stdin: the probes of the first are traced by a `dtrace -p`
/// that exits at the phase's last probe; in the second the semaphore must be down again and the
/// breakpoints gone (the program runs on untouched).
const PHASES: &str = r#"
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#include <stdio.h>
unsigned short myapp_tick_semaphore __attribute__((section(".probes")));
static long phase(int n) {
    long enabled = 0;
    for (int i = 0; i < n; i++)
        if (__builtin_expect(myapp_tick_semaphore, 0)) {
            enabled++;
            DTRACE_PROBE1(myapp, tick, i);
        }
    return enabled;
}
int main(void) {
    char line[16];
    if (!fgets(line, sizeof line, stdin)) return 2;
    long a = phase(5);
    if (!fgets(line, sizeof line, stdin)) return 2;
    long b = phase(5);
    printf("%ld %ld\n", a, b);
    return 0;
}
"#;

#[test]
fn semaphores_are_lowered_when_dtrace_exits() {
    let test = "semaphores_are_lowered_when_dtrace_exits";
    if !ready(test) {
        return;
    }
    let dir = common::test_dir(test);
    let exe = common::compile_c(&dir, "phases", PHASES, &["-O2"]);
    let out = common::phases_under_grab(&exe, |_| {
        "myapp$target:::tick /arg0 == 4/ { exit(0); }".to_string()
    });
    assert_eq!(out, "5 0\n");
}

/// A library whose `fire(n)` fires `mylib:hit` n times.
const HIT_LIB: &str = r#"
#include <sys/sdt.h>
void fire(int n) {
    for (int i = 0; i < n; i++)
        DTRACE_PROBE1(mylib, hit, i);
}
"#;

/// Loads the library its first argument names and calls its `fire(5)`.
const HIT_MAIN: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW) : 0;
    void (*fire)(int) = h ? (void (*)(int))dlsym(h, "fire") : 0;
    if (!fire)
        return 1;
    fire(5);
    return 0;
}
"#;

#[test]
fn a_provider_glob_matches_a_library_loaded_later() {
    let test = "a_provider_glob_matches_a_library_loaded_later";
    if !ready(test) {
        return;
    }
    let dir = common::test_dir(test);
    let lib = common::compile_c(&dir, "libhit.so", HIT_LIB, &["-O1", "-shared", "-fPIC"]);
    let exe = common::compile_c(&dir, "hitmain", HIT_MAIN, &["-O1", "-ldl"]);
    let cmd = format!("{} {}", exe.display(), lib.display());
    // No object of the process has `mylib` when tracing starts: -Z lets the glob wait for the
    // library, whose provider it names once the linker has loaded it (before `fire` runs).
    let (rc, out, err) = dtrace(&[
        "-Zqn",
        "pid$target:a.out:main:entry {} mylib*:::hit { @n = count(); @s = sum(arg0); }
         END { printa(\"n %@d\\n\", @n); printa(\"s %@d\\n\", @s); }",
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("n 5\n"), "{out}{err}");
    assert!(out.contains("s 10\n"), "{out}{err}");
}
