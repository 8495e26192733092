//! USDT probes of processes started after dtrace: a provider glob (`myapp*`) places uprobes on
//! the files that define matching probes, for every process, so processes started while tracing
//! fire them under their own `myapp<PID>` provider, counted exactly, their semaphores raised by
//! the kernel (root, BPF, uprobes; gcc, systemtap-sdt-dev).

mod common;

use common::dtrace;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Fires `myapp:work-done` n times (`argv[1]`) with `arg0` = i, and `myapp:tick` n times while
/// its semaphore is raised; prints its pid and how often the semaphore was up. With n < 0 it
/// only maps its file and waits for its standard input to close; with a second argument (a
/// path) it first fires `myapp:ready` every millisecond until that file exists (a minute at
/// most): the tracer creates it once it has seen a firing, so the process knows its probes
/// are in place (a raised semaphore does not say so: where uprobes are perf events, the
/// kernel raises it when the event is opened, before dtrace attaches its program).
const PROG: &str = r#"
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
unsigned short myapp_work__done_semaphore __attribute__((section(".probes")));
unsigned short myapp_tick_semaphore __attribute__((section(".probes")));
unsigned short myapp_ready_semaphore __attribute__((section(".probes")));
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    if (n < 0) {
        char b[16];
        while (read(0, b, sizeof b) > 0) {}
        return 0;
    }
    for (int t = 0; argc > 2 && access(argv[2], F_OK) != 0 && t < 60000; t++) {
        DTRACE_PROBE(myapp, ready);
        usleep(1000);
    }
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
    // process fires once dtrace has seen it (its `ready` firings: dtrace then creates the file
    // it waits for), the next ones from their start.
    let ready = dir.join("ready");
    let _ = std::fs::remove_file(&ready);
    let first = format!("4 {}", ready.display());
    let cmd = script(&dir, "found.sh", &exe, &[first.as_str(), "6", "2"]);
    let d = format!(
        "myapp*:late-found::ready {{ system(\"touch {}\"); }}
         myapp*:late-found::work-done {{ @n[probeprov] = count(); @s[probeprov] = sum(arg0); }}
         END {{ printa(\"n %s %@d\\n\", @n); printa(\"s %s %@d\\n\", @s); }}",
        ready.display()
    );
    let (rc, out, err) = dtrace(&["-wZqn", &d, "-c", &cmd]);
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

/// Runs `dtrace -qv -n d -c cmd` with a process of `exe` mapping its file meanwhile (so the
/// glob finds the file at start).
fn with_holder(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut holder = Command::new(exe)
        .arg("-1")
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let r = common::dtrace_with_env(env, args);
    drop(holder.stdin.take());
    let _ = holder.wait();
    r
}

#[test]
fn clauses_at_a_provider_glob_run_in_the_kernel_as_at_a_per_process_probe() {
    let test = "clauses_at_a_provider_glob_run_in_the_kernel_as_at_a_per_process_probe";
    if !ready(test) {
        return;
    }
    let dir = common::test_dir(test);
    let exe = common::compile_c(&dir, "late-kernel", PROG, &["-O2"]);
    let cmd = script(&dir, "kernel.sh", &exe, &["3", "5", "7"]);
    // Aggregations, a predicate and records, none reading the process's provider name: run in
    // the kernel for every process, the same output as in dtrace.
    let d = "myapp*:late-kernel::work-done { @c[execname] = count(); @s = sum(arg0); }
             myapp*:late-kernel::work-done /arg0 >= 5/ { @q = quantize(arg0); }
             myapp*:late-kernel::work-done /arg0 == 6/ { printf(\"six %d %s\\n\", arg1, probefunc); }
             myapp*:late-kernel:main:tick /arg0 == 2/ { @t = count(); }
             END { printa(\"c %s %@d\\n\", @c); printa(\"s %@d\\n\", @s); printa(@q);
                   printa(\"t %@d\\n\", @t); }";
    let args = ["-qv", "-n", d, "-c", &cmd];
    let switch = dtrace_linux::provider::kagg::KERNEL_AGGREGATIONS_ENV;
    let (rc, kout, kerr) = with_holder(&exe, &args, &[]);
    assert_eq!(rc, 0, "{kerr}");
    let lines = |n| common::clause_lines(&kerr, n).join("\n");
    assert!(
        lines(1).contains("aggregations run in the kernel at 1 probe")
            && !lines(1).contains("in dtrace"),
        "{kerr}"
    );
    assert!(
        lines(2).contains("predicate runs in the kernel at 1 probe"),
        "{kerr}"
    );
    assert!(
        lines(3).contains("runs whole in the kernel at 1 probe (records built at the probe)"),
        "{kerr}"
    );
    assert!(lines(4).contains("in the kernel at 1 probe"), "{kerr}");
    let (rc, iout, ierr) = with_holder(&exe, &args, &[(switch, "0")]);
    assert_eq!(rc, 0, "{ierr}");
    assert!(ierr.contains(&format!("are off ({switch}=0)")), "{ierr}");
    // The traced processes' own lines (pids) differ between the runs; the rest is the same.
    let traced = |o: &str| {
        o.lines()
            .filter(|l| !l.starts_with("pid "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(traced(&kout), traced(&iout));
    // 15 firings (3 + 5 + 7), arg0 summing to 3 + 10 + 21; 5 and 6 once each; one six; one
    // tick with arg0 == 2 in each process (its semaphore raised in each).
    assert!(kout.contains("c late-kernel 15\n"), "{kout}");
    assert!(kout.contains("s 34\n"), "{kout}");
    assert!(kout.contains("six -60 main\n"), "{kout}");
    assert!(kout.contains("t 3\n"), "{kout}");
    assert_eq!(runs(&kout).len(), 3, "{kout}");
}

#[test]
fn clauses_that_depend_on_the_process_stay_in_dtrace_at_a_provider_glob() {
    let test = "clauses_that_depend_on_the_process_stay_in_dtrace_at_a_provider_glob";
    if !ready(test) {
        return;
    }
    let dir = common::test_dir(test);
    let exe = common::compile_c(&dir, "late-names", PROG, &["-O2"]);
    let cmd = script(&dir, "names.sh", &exe, &["3", "4"]);
    // probeprov names the firing process; `myapp9*` matches only some processes' probes: both
    // run in dtrace, the others in the kernel, and every count is exact.
    let d = "myapp*:late-names::work-done { @p[probeprov] = count(); }
             myapp9*:late-names::work-done { @n = count(); }
             myapp*:late-names::work-done { @a = count(); }
             END { printa(\"p %s %@d\\n\", @p); printa(\"a %@d\\n\", @a); }";
    let (rc, out, err) = with_holder(&exe, &["-Zqv", "-n", d, "-c", &cmd], &[]);
    assert_eq!(rc, 0, "{err}");
    let lines = |n| common::clause_lines(&err, n).join("\n");
    assert!(lines(1).contains("it reads probeprov"), "{err}");
    assert!(
        lines(2).contains("its description matches the probe in some processes only"),
        "{err}"
    );
    assert!(
        lines(3).contains("aggregations run in the kernel at 1 probe")
            && !lines(3).contains("in dtrace"),
        "{err}"
    );
    let runs = runs(&out);
    assert_eq!(runs.len(), 2, "{out}");
    let p = agg(&out, "p");
    for (pid, (k, _)) in &runs {
        assert_eq!(
            p.get(&format!("myapp{pid}")),
            Some(&(*k as i64)),
            "{out}{err}"
        );
    }
    assert!(out.contains("a 7\n"), "{out}");
}

#[test]
fn a_pid_provider_glob_over_processes_matches_nothing_as_in_dtrace() {
    let test = "a_pid_provider_glob_over_processes_matches_nothing_as_in_dtrace";
    if !common::kernel_ok(test) {
        return;
    }
    // DTrace creates pid probes only for a provider naming one process (`pid123`,
    // `pid$target`): `pid*` matches the probes that exist, none here.
    let (rc, _, err) = dtrace(&["-n", "pid*:libc.so.6:malloc:entry"]);
    assert_ne!(rc, 0);
    assert!(
        err.contains("probe description pid*:libc.so.6:malloc:entry does not match any probes"),
        "{err}"
    );
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

/// A library whose `fire(n, ready)` first fires `mylib:ready` every millisecond until the file
/// `ready` exists (a minute at most), then `mylib:hit` n times with `arg0` = i, then
/// `mylib:done`.
const LATE_LIB: &str = r#"
#include <sys/sdt.h>
#include <unistd.h>
void fire(int n, const char *ready) {
    for (int t = 0; access(ready, F_OK) != 0 && t < 60000; t++) {
        DTRACE_PROBE(mylib, ready);
        usleep(1000);
    }
    for (int i = 0; i < n; i++)
        DTRACE_PROBE1(mylib, hit, i);
    DTRACE_PROBE(mylib, done);
}
"#;

/// Waits for a line, then loads the library `argv[1]` and calls its `fire(argv[2], argv[3])`;
/// prints its pid and n.
const LATE_LOADER: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char line[16];
    if (argc < 4 || !fgets(line, sizeof line, stdin))
        return 2;
    void *h = dlopen(argv[1], RTLD_NOW);
    void (*fire)(int, const char *) = h ? (void (*)(int, const char *))dlsym(h, "fire") : 0;
    if (!fire)
        return 1;
    fire(atoi(argv[2]), argv[3]);
    printf("pid %d n %d enabled 0\n", (int)getpid(), atoi(argv[2]));
    return 0;
}
"#;

/// Starts dtrace with `args` (its output piped) and waits until its BEGIN clause has created
/// `started` (tracing has begun); if it does not within a minute, or dtrace exits first, kills
/// dtrace and `child` and fails.
fn begin_tracing(args: &[&str], started: &Path, child: Option<&mut Child>) -> Child {
    let mut dt = Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !started.exists() {
        if t0.elapsed().as_secs() > 60 || dt.try_wait().unwrap().is_some() {
            if let Some(c) = child {
                let _ = c.kill();
            }
            let _ = dt.kill();
            panic!("dtrace did not begin tracing");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    dt
}

#[test]
fn a_process_looked_at_before_gets_the_probes_of_a_library_it_loads_later() {
    let test = "a_process_looked_at_before_gets_the_probes_of_a_library_it_loads_later";
    if !ready(test) {
        return;
    }
    use std::io::{Read, Write};
    let dir = common::test_dir(test);
    let lib = common::compile_c(&dir, "liblate.so", LATE_LIB, &["-O1", "-shared", "-fPIC"]);
    let exe = common::compile_c(&dir, "late-loader", LATE_LOADER, &["-O1", "-ldl"]);
    let (started, ready) = (dir.join("started"), dir.join("ready"));
    for f in [&started, &ready] {
        let _ = std::fs::remove_file(f);
    }
    const N: u64 = 7;
    // The process runs, without the library, when tracing starts: dtrace looks at it then.
    let mut child = Command::new(&exe)
        .arg(&lib)
        .arg(N.to_string())
        .arg(&ready)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // -Z: no object has `mylib` at start. BEGIN says tracing has begun; the library, once
    // loaded, fires `ready` until dtrace has seen a firing; `done` ends tracing (a minute's
    // ticks end a run that never sees it).
    let d = format!(
        "BEGIN {{ system(\"touch {}\"); }}
         mylib*:liblate.so::ready {{ system(\"touch {}\"); }}
         mylib*:liblate.so::hit {{ @n[probeprov] = count(); @s[probeprov] = sum(arg0); }}
         mylib*:liblate.so::done {{ exit(0); }}
         tick-1s /++ticks > 60/ {{ exit(1); }}
         END {{ printa(\"n %s %@d\\n\", @n); printa(\"s %s %@d\\n\", @s); }}",
        started.display(),
        ready.display()
    );
    let dt = begin_tracing(&["-wZq", "-n", &d], &started, Some(&mut child));
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let o = dt.wait_with_output().unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    let mut child_out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut child_out)
        .unwrap();
    assert!(child.wait().unwrap().success(), "{child_out}");
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert_eq!(runs(&child_out).get(&pid), Some(&(N, 0)), "{child_out}");
    let prov = format!("mylib{pid}");
    assert_eq!(agg(&out, "n").get(&prov), Some(&(N as i64)), "{out}{err}");
    assert_eq!(
        agg(&out, "s").get(&prov),
        Some(&((N * (N - 1) / 2) as i64)),
        "{out}{err}"
    );
}

#[test]
fn variables_at_a_provider_glob_live_in_the_kernel_as_at_a_per_process_probe() {
    let test = "variables_at_a_provider_glob_live_in_the_kernel_as_at_a_per_process_probe";
    if !ready(test) {
        return;
    }
    let dir = common::test_dir(test);
    let exe = common::compile_c(&dir, "late-vars", PROG, &["-O2"]);
    let cmd = script(&dir, "vars.sh", &exe, &["3", "5", "7"]);
    // A thread-local, a thread-local array and a global, stored and read at the probes of every
    // process: the clauses run whole in the kernel, the output the same with every kernel path
    // off. The processes run in turn, so the global counts on from one to the next (END, which
    // runs in dtrace, does not read it).
    let d = "myapp*:late-vars::work-done { self->last = arg0; n++; @w[execname] = sum(arg1); }
             myapp*:late-vars:main:tick /self->last == arg0 && arg0 % 2 == 0/
             { @even = count(); self->seen[arg0] = 1; }
             myapp*:late-vars:main:tick /self->seen[arg0]/ { printf(\"seen %d of %d\\n\", arg0, n); }
             END { printa(\"w %s %@d\\n\", @w); printa(\"even %@d\\n\", @even); }";
    let args = ["-qv", "-n", d, "-c", &cmd];
    let (rc, kout, kerr) = with_holder(&exe, &args, &[]);
    assert_eq!(rc, 0, "{kerr}");
    for n in 1..=3 {
        let lines = common::clause_lines(&kerr, n).join("\n");
        assert!(
            lines.contains("runs whole in the kernel at 1 probe")
                && lines.contains("live in the kernel"),
            "clause {n}: {kerr}"
        );
    }
    let (rc, iout, ierr) = with_holder(&exe, &args, &common::kernel_paths_off());
    assert_eq!(rc, 0, "{ierr}");
    assert!(ierr.contains("are off (DTRACE_KERNEL_"), "{ierr}");
    let traced = |o: &str| {
        let mut v: Vec<String> = o
            .lines()
            .filter(|l| !l.starts_with("pid "))
            .map(String::from)
            .collect();
        v.sort();
        v
    };
    assert_eq!(traced(&kout), traced(&iout));
    for want in [
        "seen 0 of 1\n",
        "seen 2 of 3\n",
        "seen 4 of 8\n",
        "seen 6 of 15\n",
        "w late-vars -340\n",
        "even 9\n",
    ] {
        assert!(kout.contains(want), "{want:?} not in {kout}");
    }
    assert_eq!(runs(&kout).len(), 3, "{kout}");
    // A clause matching the probe in some processes only (`myapp9*`) runs in dtrace, and the
    // variables it uses stay there with every clause using them, saying why (-Z: it may match
    // no process at start; its predicate never holds, whatever the processes' ids).
    let d2 = format!("{d} myapp9*:late-vars::work-done /self->last < 0/ {{ @never = count(); }}");
    let (rc, out2, err2) = with_holder(&exe, &["-Zqv", "-n", &d2, "-c", &cmd], &[]);
    assert_eq!(rc, 0, "{err2}");
    assert!(
        common::clause_lines(&err2, 4)
            .join("\n")
            .contains("matches myapp:late-vars:main:work-done in some processes only"),
        "{err2}"
    );
    assert!(out2.contains("even 9\n"), "{out2}");
}

/// Waits for a line, then fires `myapp:work-done` n times (`argv[1]`) with `arg0` = i, then
/// `myapp:done`.
const WAITER: &str = r#"
#include <sys/sdt.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    char line[16];
    if (argc < 2 || !fgets(line, sizeof line, stdin))
        return 2;
    int n = atoi(argv[1]);
    for (int i = 0; i < n; i++)
        DTRACE_PROBE1(myapp, work__done, i);
    DTRACE_PROBE(myapp, done);
    return 0;
}
"#;

#[test]
fn a_process_running_at_start_is_counted_once_at_a_provider_glob_run_in_the_kernel() {
    let test = "a_process_running_at_start_is_counted_once_at_a_provider_glob_run_in_the_kernel";
    if !ready(test) {
        return;
    }
    use std::io::Write;
    let dir = common::test_dir(test);
    let exe = common::compile_c(&dir, "late-waiter", WAITER, &["-O1"]);
    let started = dir.join("started");
    let _ = std::fs::remove_file(&started);
    const N: i64 = 6;
    // Its probes are created when the program is enabled, before the file probes they are
    // served from are placed: the clauses run in the kernel for it too, counted once, and
    // its exit() (run in the kernel) ends tracing.
    let mut child = Command::new(&exe)
        .arg(N.to_string())
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let d = format!(
        "BEGIN {{ system(\"touch {}\"); }}
         myapp*:late-waiter::work-done {{ @n = count(); @s = sum(arg0); }}
         myapp*:late-waiter::done {{ exit(0); }}
         END {{ printa(\"n %@d\\n\", @n); printa(\"s %@d\\n\", @s); }}",
        started.display()
    );
    let dt = begin_tracing(&["-wqv", "-n", &d], &started, Some(&mut child));
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success());
    let o = dt.wait_with_output().unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        common::clause_lines(&err, 1)
            .join("\n")
            .contains("aggregations run in the kernel at 1 probe"),
        "{err}"
    );
    assert!(out.contains(&format!("n {N}\n")), "{out}{err}");
    assert!(
        out.contains(&format!("s {}\n", N * (N - 1) / 2)),
        "{out}{err}"
    );
}

/// Says it waits, waits for a line, then calls `getppid()` `argv[1]` times, then fires
/// `myapp:hit` `argv[2]` times with `arg0` = i, and says so.
const FILLER: &str = r#"
#include <sys/sdt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char line[16];
    if (argc < 3)
        return 2;
    printf("waiting\n");
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin))
        return 2;
    long fills = atol(argv[1]);
    int n = atoi(argv[2]);
    for (long i = 0; i < fills; i++)
        getppid();
    for (int i = 0; i < n; i++)
        DTRACE_PROBE1(myapp, hit, i);
    printf("fired %d\n", n);
    return 0;
}
"#;

/// Fires `myready:ready` every 20 ms until the file `argv[1]` exists, waits until the file
/// `argv[2]` exists, then fires `myready:stop` every 10 ms (a minute at most each). (`ready` fires
/// no faster: the records of its firings while dtrace makes the file share the small ring the
/// test then fills, and dtrace reads the ring once a second; at a firing a millisecond, the 6.1
/// guest's slow `system()` left the ring all but full of them, with no room for a getppid()
/// record once the records grew by 16 bytes.)
const READY: &str = r#"
#include <sys/sdt.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    for (int t = 0; access(argv[1], F_OK) != 0 && t < 3000; t++) {
        DTRACE_PROBE(myready, ready);
        usleep(20000);
    }
    for (int t = 0; access(argv[2], F_OK) != 0 && t < 60000; t++)
        usleep(1000);
    for (int t = 0; t < 6000; t++) {
        DTRACE_PROBE(myready, stop);
        usleep(10000);
    }
    return 0;
}
"#;

#[test]
fn what_the_kernel_counted_for_a_process_whose_first_firing_the_ring_lost_is_kept() {
    let test = "what_the_kernel_counted_for_a_process_whose_first_firing_the_ring_lost_is_kept";
    if !ready(test) {
        return;
    }
    use std::io::{BufRead, Write};
    let dir = common::test_dir(test);
    let filler = common::compile_c(&dir, "late-fill", FILLER, &["-O1"]);
    let readier = common::compile_c(&dir, "late-ready", READY, &["-O1"]);
    let (started, ready, end) = (dir.join("started"), dir.join("ready"), dir.join("end"));
    for f in [&started, &ready, &end] {
        let _ = std::fs::remove_file(f);
    }
    const N: i64 = 6;
    // No process maps either file at start (-Z). Once tracing has begun, the hit process
    // starts, then the ready one:
    // dtrace finds the hit process's file no later than the ready one's, and the ready
    // process's first firing makes dtrace create the file `ready` (naming the ready process
    // only: the hit process is not named, nor are its probes created). Then dtrace is
    // stopped, and the getppid() records of a small ring (-b 4k) fill it, so the ring has no
    // room for the record of the hit process's first firing, the one that tells dtrace of the
    // process. The kernel counts every hit all the same; dtrace must name the process to bind
    // and print them. The ready process's `stop` ends tracing once dtrace runs again.
    let d = format!(
        "BEGIN {{ system(\"touch {}\"); }}
         myready*:late-ready::ready /!seen/ {{ seen = 1; system(\"touch {}\"); }}
         syscall::getppid:entry /execname == \"late-fill\"/ {{ printf(\"f\\n\"); }}
         myapp*:late-fill::hit {{ @n = count(); @s = sum(arg0); }}
         myready*:late-ready::stop {{ exit(0); }}
         END {{ printa(\"n %@d\\n\", @n); printa(\"s %@d\\n\", @s); }}",
        started.display(),
        ready.display()
    );
    let mut dt = begin_tracing(&["-Zwq", "-b", "4k", "-n", &d], &started, None);
    let mut hit = Command::new(&filler)
        .args(["200000", &N.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut hit_out = std::io::BufReader::new(hit.stdout.take().unwrap());
    let mut line = String::new();
    hit_out.read_line(&mut line).unwrap();
    assert_eq!(line, "waiting\n");
    let mut readier = Command::new(&readier)
        .arg(&ready)
        .arg(&end)
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !ready.exists() {
        if t0.elapsed().as_secs() > 60 || dt.try_wait().unwrap().is_some() {
            for c in [&mut hit, &mut readier, &mut dt] {
                let _ = c.kill();
            }
            panic!("dtrace did not see the ready process");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let dt_pid = dt.id() as i32;
    // SAFETY: kill takes two integers.
    assert_eq!(unsafe { libc::kill(dt_pid, libc::SIGSTOP) }, 0);
    hit.stdin.take().unwrap().write_all(b"go\n").unwrap();
    line.clear();
    hit_out.read_line(&mut line).unwrap();
    let hit_ok = hit.wait().unwrap().success();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(dt_pid, libc::SIGCONT) }, 0);
    std::fs::write(&end, "").unwrap();
    let out = dt.wait_with_output().unwrap();
    let _ = readier.kill();
    let _ = readier.wait();
    assert!(hit_ok);
    assert_eq!(line, format!("fired {N}\n"));
    let (stdout, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{err}");
    // The ring was full: the getppid() records it had no room for are drops.
    assert!(err.contains("drop"), "{err}");
    assert!(stdout.contains(&format!("\nn {N}\n")), "{stdout:?}\n{err}");
    assert!(
        stdout.contains(&format!("\ns {}\n", N * (N - 1) / 2)),
        "{stdout:?}\n{err}"
    );
}
