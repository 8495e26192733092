//! USDT probes of processes started after dtrace: a provider glob (`myapp*`) places uprobes on
//! the files that define matching probes, for every process, so processes started while tracing
//! fire them under their own `myapp<PID>` provider, counted exactly, their semaphores raised by
//! the kernel (root, BPF, uprobes; gcc, systemtap-sdt-dev).

mod common;

use common::dtrace;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

/// Fires `myapp:work-done` n times (`argv[1]`) with `arg0` = i, and `myapp:tick` n times while
/// its semaphore is raised; prints its pid and how often the semaphore was up. With n < 0 it
/// only maps its file and waits for its standard input to close; with a second argument it
/// first waits (a minute at most) for `work-done`'s semaphore to be raised, that is for the
/// probe to be placed on its file.
const PROG: &str = r#"
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
unsigned short myapp_work__done_semaphore __attribute__((section(".probes")));
unsigned short myapp_tick_semaphore __attribute__((section(".probes")));
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    if (n < 0) {
        char b[16];
        while (read(0, b, sizeof b) > 0) {}
        return 0;
    }
    for (int t = 0; argc > 2 && !myapp_work__done_semaphore && t < 60000; t++)
        usleep(1000);
    long enabled = 0;
    for (int i = 0; i < n; i++) {
        DTRACE_PROBE2(myapp, work__done, i, (long)i * -10);
        if (__builtin_expect(myapp_tick_semaphore, 0)) {
            enabled++;
            DTRACE_PROBE1(myapp, tick, i);
        }
    }
    printf("pid %d n %d enabled %ld\n", (int)getpid(), n, enabled);
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

/// The `pid N n K enabled E` lines the traced processes printed: pid to (n, enabled).
fn runs(out: &str) -> BTreeMap<u32, (u64, u64)> {
    out.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["pid", p, "n", n, "enabled", e] => {
                    Some((p.parse().ok()?, (n.parse().ok()?, e.parse().ok()?)))
                }
                _ => None,
            }
        })
        .collect()
}

/// The `KEY VALUE` lines of aggregation `tag` printed as `tag KEY VALUE`.
fn agg(out: &str, tag: &str) -> BTreeMap<String, i64> {
    out.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                [t, k, v] if *t == tag => Some((k.to_string(), v.parse().ok()?)),
                _ => None,
            }
        })
        .collect()
}

/// A shell script `dir/name` that runs `exe` once with each of `runs` (arguments), in turn.
fn script(dir: &Path, name: &str, exe: &Path, runs: &[&str]) -> String {
    let path = dir.join(name);
    let mut text = String::from("#!/bin/sh\n");
    for r in runs {
        text.push_str(&format!("{} {r}\n", exe.display()));
    }
    std::fs::write(&path, text).unwrap();
    Command::new("chmod").arg("+x").arg(&path).status().unwrap();
    path.display().to_string()
}

#[test]
fn a_provider_glob_traces_processes_started_after_dtrace() {
    let test = "a_provider_glob_traces_processes_started_after_dtrace";
    if !ready(test) {
        return;
    }
    let dir = common::test_dir(test);
    for (name, flags) in [
        ("late-O2", &["-O2"][..]),
        ("late-O0-static", &["-O0", "-static"][..]),
    ] {
        let exe = common::compile_c(&dir, name, PROG, flags);
        // A process that maps the file when tracing starts: the glob finds the file through it.
        let mut holder = Command::new(&exe)
            .arg("-1")
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let holder_pid = holder.id();
        // Three processes started by the command, after tracing began.
        let cmd = script(&dir, &format!("{name}.sh"), &exe, &["3", "5", "7"]);
        // The module (the file's name) keeps other tests' processes out.
        let script = format!(
            "myapp*:{name}::work-done {{ @n[probeprov] = count(); @s[probeprov] = sum(arg0);
                                        @m[probemod] = count(); }}
             myapp*:{name}:main:tick {{ @t[probeprov] = count(); }}
             END {{ printa(\"n %s %@d\\n\", @n); printa(\"s %s %@d\\n\", @s);
                   printa(\"t %s %@d\\n\", @t); printa(\"m %s %@d\\n\", @m); }}"
        );
        let (rc, out, err) = dtrace(&["-qn", &script, "-c", &cmd]);
        drop(holder.stdin.take());
        let _ = holder.wait();
        assert_eq!(rc, 0, "{name}: {err}");
        let runs = runs(&out);
        assert_eq!(runs.len(), 3, "{name}: {out}");
        assert!(!runs.contains_key(&holder_pid));
        let (n, s, t, m) = (
            agg(&out, "n"),
            agg(&out, "s"),
            agg(&out, "t"),
            agg(&out, "m"),
        );
        assert_eq!(n.len(), 3, "{name}: {out}{err}");
        for (pid, (k, enabled)) in &runs {
            let prov = format!("myapp{pid}");
            // The semaphore was raised in the new process by the kernel.
            assert_eq!(*enabled, *k, "{name}: {out}");
            assert_eq!(n.get(&prov), Some(&(*k as i64)), "{name}: {out}{err}");
            assert_eq!(
                s.get(&prov),
                Some(&((*k * (*k - 1) / 2) as i64)),
                "{name}: {out}"
            );
            assert_eq!(t.get(&prov), Some(&(*k as i64)), "{name}: {out}");
        }
        assert_eq!(m.get(name), Some(&15), "{name}: {out}");
        // Untraced, the semaphore is down again.
        let o = Command::new(&exe).arg("4").output().unwrap();
        assert!(
            String::from_utf8_lossy(&o.stdout).ends_with("n 4 enabled 0\n"),
            "{name}"
        );
    }
}

#[test]
fn with_no_process_at_start_the_files_of_processes_started_later_are_found() {
    let test = "with_no_process_at_start_the_files_of_processes_started_later_are_found";
    if !ready(test) {
        return;
    }
    let dir = common::test_dir(test);
    let exe = common::compile_c(&dir, "late-found", PROG, &["-O2"]);
    // Nothing maps the file when tracing starts: -Z lets the glob match nothing. The first
    // process fires once its file's probes are placed (its semaphore tells it), the next ones
    // from their start.
    let cmd = script(&dir, "found.sh", &exe, &["4 wait", "6", "2"]);
    let (rc, out, err) = dtrace(&[
        "-Zqn",
        "myapp*:late-found::work-done { @n[probeprov] = count(); @s[probeprov] = sum(arg0); }
         END { printa(\"n %s %@d\\n\", @n); printa(\"s %s %@d\\n\", @s); }",
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    let runs = runs(&out);
    assert_eq!(runs.len(), 3, "{out}");
    let (n, s) = (agg(&out, "n"), agg(&out, "s"));
    assert_eq!(n.len(), 3, "{out}{err}");
    for (pid, (k, _)) in &runs {
        let prov = format!("myapp{pid}");
        assert_eq!(n.get(&prov), Some(&(*k as i64)), "{out}{err}");
        assert_eq!(s.get(&prov), Some(&((*k * (*k - 1) / 2) as i64)), "{out}");
    }
    // Without -Z the description matching nothing at start is an error, as before.
    let (rc, _, err) = dtrace(&["-qn", "myapp*:late-found::work-done", "-c", &cmd]);
    assert_ne!(rc, 0);
    assert!(err.contains("does not match any probes"), "{err}");
}

#[test]
fn python_processes_started_later_fire_gc_start_under_their_own_provider() {
    let test = "python_processes_started_later_fire_gc_start_under_their_own_provider";
    if !ready(test) {
        return;
    }
    let python = "/usr/bin/python3.11";
    let notes = Command::new("readelf")
        .args(["-n", python])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("gc__start"))
        .unwrap_or(false);
    if !dtrace_testkit::skip_unless(notes, test, "needs Debian's python3.11 with stapsdt notes") {
        return;
    }
    let dir = common::test_dir(test);
    let gc = dir.join("gc.py");
    std::fs::write(
        &gc,
        "import gc, os, sys\nfor i in range(int(sys.argv[1])):\n    gc.collect(2)\n\
         print('pid', os.getpid(), 'n', sys.argv[1], 'enabled 0', flush=True)\n",
    )
    .unwrap();
    // A python running when tracing starts: the glob finds python3.11 through it (other
    // pythons on the machine may fire too: only the command's are looked at).
    let mut holder = Command::new(python)
        .args(["-c", "import sys; sys.stdin.read()"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let runs_of = [format!("{} 5", gc.display()), format!("{} 9", gc.display())];
    let cmd = script(
        &dir,
        "gc.sh",
        Path::new(python),
        &[runs_of[0].as_str(), runs_of[1].as_str()],
    );
    let (rc, out, err) = dtrace(&[
        "-qn",
        "python*:python3.11::gc-start /arg0 == 2/ { @[probeprov] = count(); }
         END { printa(\"g %s %@d\\n\", @); }",
        "-c",
        &cmd,
    ]);
    drop(holder.stdin.take());
    let _ = holder.wait();
    assert_eq!(rc, 0, "{err}");
    let runs = runs(&out);
    assert_eq!(runs.len(), 2, "{out}");
    let g = agg(&out, "g");
    let count = |n: u64| {
        let pid = runs.iter().find(|(_, (k, _))| *k == n).map(|(p, _)| *p);
        pid.and_then(|p| g.get(&format!("python{p}")).copied())
    };
    let (five, nine) = (count(5), count(9));
    // Each run collects its n times, and as many more at start-up and exit.
    assert!(five.is_some_and(|c| c >= 5), "{out}{err}");
    assert_eq!(nine.zip(five).map(|(a, b)| a - b), Some(4), "{out}{err}");
}
