//! The `pid` provider end to end on uprobes: C programs built here (with and without frame
//! pointers, PIE and not, static and dynamic) call a function a known number of times; `entry`,
//! `return` and offset probes count exactly that many, `arg1` at `return` is the return value,
//! globs select modules and functions, `-c` and `-p` name the process, several processes are
//! traced in one script (`pid<A>` and `pid<B>`), and bad descriptions (a
//! process that does not exist, a function that does not, an offset inside an instruction) are
//! clear errors (root, BPF, uprobes; gcc).

mod common;

use common::{dtrace, process_state};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Calls `work(i)` for i in 0..N (N the first argument) and `getppid()` as often, after reading a
/// line from stdin when given a second argument (so `-p` can grab it first).
const PROG: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int __attribute__((noinline)) work(int i) { return 3 * i + 1; }
int __attribute__((noinline)) worker2(int i) { return i; }
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    char line[16];
    if (argc > 2 && !fgets(line, sizeof line, stdin))
        return 2;
    long s = 0;
    for (int i = 0; i < n; i++) {
        s += work(i);
        s += worker2(i);
        getppid();
    }
    printf("%ld\n", s);
    return 0;
}
"#;

const N: u64 = 37;

fn ready(test: &str) -> bool {
    common::kernel_ok(test)
        && common::have_gcc(test)
        && dtrace_testkit::skip_unless(dtrace_linux::uprobe::available(), test, "no uprobe PMU")
}

/// The program built with each set of flags the tests cover.
fn builds(test: &str) -> Vec<(String, PathBuf)> {
    let dir = common::test_dir(test);
    let variants: [(&str, &[&str]); 4] = [
        (
            "pie-fp",
            &["-O0", "-fno-omit-frame-pointer", "-pie", "-fPIE"],
        ),
        ("nopie-nofp", &["-O2", "-fomit-frame-pointer", "-no-pie"]),
        ("static", &["-O1", "-static"]),
        ("pie-O2", &["-O2"]),
    ];
    variants
        .iter()
        .map(|(name, flags)| (name.to_string(), common::compile_c(&dir, name, PROG, flags)))
        .collect()
}

/// `key value` lines of a quiet run's `printa("%s %@d\n")` output.
fn counts(out: &str) -> Vec<(String, u64)> {
    out.lines()
        .filter_map(|l| {
            let (k, v) = l.trim().rsplit_once(' ')?;
            Some((k.trim().to_string(), v.parse().ok()?))
        })
        .collect()
}

fn count_of(out: &str, key: &str) -> u64 {
    counts(out)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no {key} in {out}"))
}

#[test]
fn entry_return_and_offset_counts_are_exact_in_every_build() {
    let test = "entry_return_and_offset_counts_are_exact_in_every_build";
    if !ready(test) {
        return;
    }
    let n = N.to_string();
    for (name, exe) in builds(test) {
        let cmd = format!("{} {n}", exe.display());
        // The function's instructions, as listed: every one runs once per call (no branches).
        let (rc, out, err) = dtrace(&["-l", "-n", "pid$target:a.out:work:", "-c", &cmd]);
        assert_eq!(rc, 0, "{name}: {err}");
        let offsets: Vec<&str> = out
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().nth(4))
            .filter(|n| *n != "entry" && *n != "return")
            .collect();
        assert!(offsets.len() >= 2, "{name}: {out}");
        assert!(
            out.contains(" work entry") && out.contains(" work return"),
            "{out}"
        );
        let last = offsets[offsets.len() - 1];
        let script = format!(
            "pid$target:a.out:work:entry {{ @c[\"entry\"] = count(); }}
             pid$target:a.out:work:return {{ @c[\"return\"] = count(); @s[\"sum\"] = sum(arg1); }}
             pid$target:a.out:work:{last} {{ @c[\"offset\"] = count(); }}
             END {{ printa(\"%s %@d\\n\", @c); printa(\"%s %@d\\n\", @s); }}"
        );
        let (rc, out, err) = dtrace(&["-qn", &script, "-c", &cmd]);
        assert_eq!(rc, 0, "{name}: {err}");
        assert_eq!(count_of(&out, "entry"), N, "{name}: {out}");
        assert_eq!(count_of(&out, "return"), N, "{name}: {out}");
        assert_eq!(count_of(&out, "offset"), N, "{name}: {out}");
        // sum of 3i+1 for i < N
        assert_eq!(
            count_of(&out, "sum"),
            3 * N * (N - 1) / 2 + N,
            "{name}: {out}"
        );
    }
}

/// `-` names one address of the main executable, as its symbols give it (DTrace's absolute
/// address probes): the probe is named for the function holding it, with the address as its
/// name, and fires each time the instruction there runs.
#[test]
fn an_address_in_a_out_is_probed_with_the_dash_function() {
    let test = "an_address_in_a_out_is_probed_with_the_dash_function";
    if !ready(test) {
        return;
    }
    let n = N.to_string();
    for (name, exe) in builds(test) {
        let table =
            dtrace_linux::symbols::functions::FunctionTable::load(exe.to_str().unwrap()).unwrap();
        let at = format!("{:x}", table.get("work").unwrap().vaddr);
        let cmd = format!("{} {n}", exe.display());
        let script = format!(
            "pid$target:a.out:-:{at} {{ @[probefunc, probename] = count(); }}
             END {{ printa(\"%s:%s %@d\\n\", @); }}"
        );
        let (rc, out, err) = dtrace(&["-qn", &script, "-c", &cmd]);
        assert_eq!(rc, 0, "{name}: {err}");
        assert_eq!(count_of(&out, &format!("work:{at}")), N, "{name}: {out}");
    }
}

#[test]
fn globs_select_functions_and_libraries() {
    let test = "globs_select_functions_and_libraries";
    if !ready(test) {
        return;
    }
    let (_, exe) = builds(test).swap_remove(0);
    let cmd = format!("{} {N}", exe.display());
    let (rc, out, err) = dtrace(&[
        "-qn",
        "pid$target:a.out:wor*:entry { @[probefunc] = count(); }
         pid$target:libc.so.6:getpp*:entry { @[probemod] = count(); }
         END { printa(\"%s %@d\\n\", @); }",
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(count_of(&out, "work"), N, "{out}");
    assert_eq!(count_of(&out, "worker2"), N, "{out}");
    assert_eq!(count_of(&out, "libc.so.6"), N, "{out}");
    assert!(!out.contains("main"), "{out}");
}

/// Calls `twice` N times through its alias `_twice` (the first argument); `twice` is `static`
/// when built with `-DLOCAL`.
const ALIASED: &str = r#"
#include <stdlib.h>
#ifdef LOCAL
static
#endif
int __attribute__((noinline, used)) twice(int i) { return 2 * i; }
extern int _twice(int) __attribute__((weak, alias("twice")));
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10, s = 0;
    for (int i = 0; i < n; i++)
        s += _twice(i);
    return s == -1;
}
"#;

#[test]
fn a_function_with_aliases_is_probed_once_under_the_name_of_its_address() {
    // As DTrace's pid provider: a global name before a weak alias with more leading
    // underscores, a weak alias before a static name; a description naming either alias
    // enables the one probe, and a glob matching both takes the address once.
    let test = "a_function_with_aliases_is_probed_once_under_the_name_of_its_address";
    if !ready(test) {
        return;
    }
    let dir = common::test_dir(test);
    for (flags, want) in [(&["-O1"][..], "twice"), (&["-O1", "-DLOCAL"][..], "_twice")] {
        let exe = common::compile_c(&dir, want, ALIASED, flags);
        let cmd = format!("{} {N}", exe.display());
        for desc in [
            "pid$target:a.out:twice:entry",
            "pid$target:a.out:_twice:entry",
            "pid$target:a.out:*twice:entry",
        ] {
            let script =
                format!("{desc} {{ @[probefunc] = count(); }} END {{ printa(\"%s %@d\\n\", @); }}");
            let (rc, out, err) = dtrace(&["-qn", &script, "-c", &cmd]);
            assert_eq!(rc, 0, "{flags:?} {desc}: {err}");
            assert_eq!(
                counts(&out),
                vec![(want.to_string(), N)],
                "{flags:?} {desc}"
            );
        }
    }
}

#[test]
fn a_grabbed_process_is_traced_with_p() {
    let test = "a_grabbed_process_is_traced_with_p";
    if !ready(test) {
        return;
    }
    let (_, exe) = builds(test).swap_remove(1);
    let mut child = Command::new(&exe)
        .args([N.to_string().as_str(), "wait"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Probes are in place once dtrace reports the match (not quiet, so it does), then the
    // process may go on.
    let (dt, _err, line) = common::grab(
        &[
            "-n",
            "pid$target:a.out:work:return { @ = sum(arg1); } END { printa(\"sum %@d\\n\", @); }",
        ],
        child.id(),
        Stdio::piped(),
    );
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success());
    let o = dt.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{line}");
    // Not quiet: the END line precedes the printed sum on the same line.
    let sum: u64 = out
        .split_whitespace()
        .skip_while(|w| *w != "sum")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(sum, 3 * N * (N - 1) / 2 + N, "{out}");
}

#[test]
fn several_processes_are_traced_in_one_script() {
    // `pid<A>` and `pid<B>` in one description (two builds, so two a.out objects): each
    // process's calls are counted under its own pid, the other's never.
    let test = "several_processes_are_traced_in_one_script";
    if !ready(test) {
        return;
    }
    let mut exes = builds(test);
    let (_, b) = exes.swap_remove(1);
    let (_, a) = exes.swap_remove(0);
    let spawn = |exe: &PathBuf, n: u64| {
        Command::new(exe)
            .args([n.to_string().as_str(), "wait"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    };
    let (mut ca, mut cb) = (spawn(&a, N), spawn(&b, 2 * N));
    let (pa, pb) = (ca.id(), cb.id());
    let script = format!(
        "BEGIN {{ printf(\"ready\\n\"); }} \
         pid{pa}:a.out:work:entry, pid{pb}:a.out:work:entry {{ @[pid] = count(); }} \
         syscall::exit_group:entry /pid == {pa} || pid == {pb}/ {{ gone++; }} \
         syscall::exit_group:entry /gone == 2/ {{ exit(0); }} \
         END {{ printa(\"%d %@d\\n\", @); }}"
    );
    // Tracing has begun once BEGIN has printed (the match is reported before it goes, as
    // DTrace's is): then the processes go.
    let mut dt = Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .args(["-q", "-n", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(dt.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    assert_eq!(line, "ready\n");
    for c in [&mut ca, &mut cb] {
        c.stdin.take().unwrap().write_all(b"go\n").unwrap();
        assert!(c.wait().unwrap().success());
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut out).unwrap();
    let o = dt.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let mut got: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    got.sort();
    let mut want = [format!("{pa} {N}"), format!("{pb} {}", 2 * N)];
    want.sort();
    assert_eq!(got, want, "{out}{err}");
}

#[test]
fn bad_descriptions_are_clear_errors() {
    let test = "bad_descriptions_are_clear_errors";
    if !ready(test) {
        return;
    }
    let (_, exe) = builds(test).swap_remove(1);
    let exe = exe.to_str().unwrap();
    // DTrace's `D_PROC_*` compile errors (`-x errtags` shows the tag).
    let (rc, _, err) = dtrace(&["-xerrtags", "-n", "pid999999999:a.out:work:entry {}"]);
    assert_eq!(rc, 1);
    assert_eq!(
        err,
        "dtrace: invalid probe specifier pid999999999:a.out:work:entry {}: \
         [D_PROC_GRAB] failed to grab process 999999999\n"
    );
    let (rc, _, err) = dtrace(&["-xerrtags", "-n", "pid0:::entry {}"]);
    assert_eq!(rc, 1);
    assert!(
        err.ends_with("[D_PROC_BADPID] pid0 does not contain a valid pid\n"),
        "{err}"
    );
    let (rc, _, err) = dtrace(&["-n", "pid$target:a.out:nosuch:entry {}", "-c", exe]);
    assert_eq!(rc, 1);
    assert!(
        err.ends_with(": failed to lookup 'nosuch' in module 'a.out'\n"),
        "{err}"
    );
    // A module that is not loaded matches nothing.
    let (rc, _, err) = dtrace(&["-n", "pid$target:libnone.so:work:entry {}", "-c", exe]);
    assert_eq!(rc, 1);
    assert!(err.contains("does not match any probes"), "{err}");
    let (rc, _, err) = dtrace(&[
        "-xerrtags",
        "-n",
        "pid$target:a.out:work:start {}",
        "-c",
        exe,
    ]);
    assert_eq!(rc, 1);
    assert!(
        err.ends_with("[D_PROC_NAME] 'start' is an invalid probe name\n"),
        "{err}"
    );
    // `work` starts with a multi-byte instruction at -O2 (lea), so offset 1 is inside it.
    let (rc, _, err) = dtrace(&["-xerrtags", "-n", "pid$target:a.out:work:1 {}", "-c", exe]);
    assert_eq!(rc, 1);
    assert!(
        err.contains("[D_PROC_CREATEFAIL] failed to create probes at 'work+0x1': the offset is not on an instruction boundary"),
        "{err}"
    );
    let (rc, _, err) = dtrace(&["-xerrtags", "-n", "pid$target:a.out:work:fff {}", "-c", exe]);
    assert_eq!(rc, 1);
    assert!(
        err.ends_with("[D_PROC_OFF] offset 0xfff outside of function 'work'\n"),
        "{err}"
    );
    for (d, tag) in [
        ("pid$target:libc:-:800", "D_PROC_LIB"),
        ("pid$target::-:", "D_PROC_NAME"),
    ] {
        let (rc, _, err) = dtrace(&["-xerrtags", "-n", &format!("{d} {{}}"), "-c", exe]);
        assert_eq!(rc, 1);
        assert!(err.contains(&format!("[{tag}] only ")), "{err}");
    }
    // In a script, at the description's line.
    let dir = common::test_dir(test);
    let script = dir.join("bad.d");
    std::fs::write(&script, "BEGIN {}\n\npid$target:a.out:nosuch:entry\n{}\n").unwrap();
    let path = script.to_str().unwrap();
    let (rc, _, err) = dtrace(&["-xerrtags", "-s", path, "-c", exe]);
    assert_eq!(rc, 1);
    assert_eq!(
        err,
        format!(
            "dtrace: failed to compile script {path}: [D_PROC_FUNC] line 3: \
             failed to lookup 'nosuch' in module 'a.out'\n"
        )
    );
}

#[test]
fn flow_indentation_follows_entry_and_return() {
    let test = "flow_indentation_follows_entry_and_return";
    if !ready(test) {
        return;
    }
    let (_, exe) = builds(test).swap_remove(0);
    let cmd = format!("{} 2", exe.display());
    let (rc, out, err) = dtrace(&[
        "-F",
        "-n",
        "pid$target:a.out:main:entry,pid$target:a.out:work:entry,pid$target:a.out:work:return {}",
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    let flow: Vec<String> = out
        .lines()
        .filter(|l| l.contains("->") || l.contains("<-"))
        .map(|l| {
            l.split_once(|c: char| c.is_ascii_digit())
                .map_or("", |x| x.1)
                .trim_end()
                .to_string()
        })
        .collect();
    assert_eq!(
        flow,
        [
            "  -> main",
            "    -> work",
            "    <- work",
            "    -> work",
            "    <- work"
        ],
        "{out}"
    );
}

#[test]
fn every_libc_function_is_probed_and_the_probes_removed() {
    let test = "every_libc_function_is_probed_and_the_probes_removed";
    if !ready(test) {
        return;
    }
    if !dtrace_linux::uprobe::multi_available() {
        // Per-probe perf events take ~0.1 s each to remove: minutes for libc.
        eprintln!("SKIP {test}: no uprobe-multi links on this kernel");
        return;
    }
    let (_, exe) = builds(test).swap_remove(0);
    let cmd = format!("{} {N} wait", exe.display());
    let start = std::time::Instant::now();
    let mut dt = Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .args([
            "-n",
            "pid$target:libc.so.6::entry { @[probefunc] = count(); }
             pid$target:a.out:work:entry { @[probefunc] = count(); }
             END { printf(\"\\n\"); printa(\"%s %@d\\n\", @); }",
            "-c",
            &cmd,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The match is reported once every probe is in place; the process waits for a line first.
    let (mut err, line) = common::first_stderr_line(&mut dt);
    let attached = start.elapsed();
    let matched: u64 = line
        .split_whitespace()
        .skip_while(|w| *w != "matched")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no match count in {line}"));
    // libc has thousands of functions.
    assert!(matched > 1000, "{line}");
    let mut stdin = dt.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    drop(stdin);
    let ran = std::time::Instant::now();
    let o = dt.wait_with_output().unwrap();
    let finished = ran.elapsed();
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut err, &mut rest);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{line}{rest}");
    assert_eq!(count_of(&out, "work"), N, "{out}");
    assert_eq!(count_of(&out, "getppid"), N, "{out}");
    eprintln!(
        "{test}: {matched} probes placed in {:.2?}; run and removal took {:.2?}",
        attached, finished
    );
}

/// Reads a line, calls `after()`, then loads libm with `dlopen` (the run-time linker's hook stops
/// it there while dtrace places the new library's probes) and says whether it did.
const LOADER: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
void __attribute__((noinline)) after(void) { __asm__ volatile(""); }
int main(void) {
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        return 2;
    after();
    void *h = dlopen("libm.so.6", RTLD_NOW);
    printf("loaded %d\n", h != 0);
    return h ? 0 : 1;
}
"#;

/// Waits (a hang guard, not a measure) until `done` holds.
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let t0 = std::time::Instant::now();
    while !done() {
        assert!(t0.elapsed().as_secs() < 60, "still waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Kills the processes of a test that fails half-way.
struct KillOnDrop(Vec<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for &pid in &self.0 {
                // SAFETY: kill takes two integers.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
    }
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill takes two integers.
    assert_eq!(
        unsafe { libc::kill(pid as i32, sig) },
        0,
        "kill {pid} {sig}"
    );
}

#[test]
fn a_process_stopped_in_the_linker_runs_on_when_dtrace_is_killed() {
    let test = "a_process_stopped_in_the_linker_runs_on_when_dtrace_is_killed";
    if !ready(test) {
        return;
    }
    let exe = common::compile_c(&common::test_dir(test), "loader", LOADER, &["-O0"]);
    let mut child = Command::new(&exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (mut dt, _err, line) = common::grab(
        &["-n", "pid$target:a.out:main:entry {}"],
        pid,
        Stdio::null(),
    );
    let _cleanup = KillOnDrop(vec![pid, dt.id()]);
    assert!(line.contains("matched 1 probe"), "{line}");
    // Once dtrace has let the process go (it waits for its line, no longer held by ptrace),
    // dtrace cannot answer the linker's stop: it is stopped itself, then killed.
    wait_until("the release", || process_state(pid) == Some('S'));
    signal(dt.id(), libc::SIGSTOP);
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    wait_until("the stop in the linker", || process_state(pid) == Some('T'));
    signal(dt.id(), libc::SIGKILL);
    dt.wait().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let o = match rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            let state = process_state(pid);
            signal(pid, libc::SIGKILL);
            panic!("the process was left in state {state:?}");
        }
    };
    assert!(o.status.success(), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "loaded 1\n");
}

#[test]
fn a_process_stopped_by_stop_stays_stopped_when_dtrace_exits() {
    let test = "a_process_stopped_by_stop_stays_stopped_when_dtrace_exits";
    if !ready(test) {
        return;
    }
    let exe = common::compile_c(&common::test_dir(test), "loader", LOADER, &["-O0"]);
    let mut child = Command::new(&exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (dt, _err, line) = common::grab(
        &["-wn", "pid$target:a.out:after:entry { stop(); exit(0); }"],
        pid,
        Stdio::null(),
    );
    let _cleanup = KillOnDrop(vec![pid, dt.id()]);
    assert!(line.contains("matched 1 probe"), "{line}");
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let o = dt.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    // DTrace leaves a process its stop() stopped as it is, dtrace gone.
    assert_eq!(process_state(pid), Some('T'));
    signal(pid, libc::SIGCONT);
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "loaded 1\n");
}

/// Loads a library (the linker's hook stops it), calls `between()`, then `after()` at the next line.
const LOAD_THEN_CALL: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
void __attribute__((noinline)) between(void) { __asm__ volatile(""); }
void __attribute__((noinline)) after(void) { __asm__ volatile(""); }
int main(void) {
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        return 2;
    void *h = dlopen("libm.so.6", RTLD_NOW);
    between();
    if (!fgets(line, sizeof line, stdin))
        return 2;
    after();
    return h ? 0 : 1;
}
"#;

/// The children of process `pid` (every thread's).
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let s = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        out.extend(s.split_whitespace().filter_map(|w| w.parse::<u32>().ok()));
    }
    out
}

#[test]
fn a_process_stopped_by_stop_after_a_linker_stop_stays_stopped_when_dtrace_is_killed() {
    let test = "a_process_stopped_by_stop_after_a_linker_stop_stays_stopped_when_dtrace_is_killed";
    if !ready(test) {
        return;
    }
    let exe = common::compile_c(&common::test_dir(test), "loader", LOAD_THEN_CALL, &["-O0"]);
    let mut child = Command::new(&exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let d = "pid$target:a.out:between:entry { printf(\"between\\n\"); } \
             pid$target:a.out:after:entry { stop(); }";
    let (mut dt, _err, line) = common::grab(&["-wn", d], pid, Stdio::piped());
    let _cleanup = KillOnDrop(vec![pid, dt.id()]);
    assert!(line.contains("matched 2 probes"), "{line}");
    // dtrace's run-on-close helper is its child.
    let helpers = children_of(dt.id());
    assert!(!helpers.is_empty(), "no run-on-close helper under dtrace");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    // dtrace prints `between` once it has answered the linker's stops (one loop of dtrace
    // answers them before it consumes what fired after).
    let out = std::io::BufReader::new(dt.stdout.take().unwrap());
    let mut lines = std::io::BufRead::lines(out);
    assert!(
        lines.any(|l| l.is_ok_and(|l| l.ends_with("between:entry between"))),
        "dtrace ended without the firing of between()"
    );
    stdin.write_all(b"go\n").unwrap();
    wait_until("the stop() in after()", || process_state(pid) == Some('T'));
    signal(dt.id(), libc::SIGKILL);
    dt.wait().unwrap();
    // Once the helper has done its work and gone, the process is still stopped: the linker's
    // stops, answered long ago, are not the stop it is in.
    wait_until("the helper's end", || {
        helpers
            .iter()
            .all(|&h| matches!(process_state(h), None | Some('Z')))
    });
    assert_eq!(process_state(pid), Some('T'));
    signal(pid, libc::SIGCONT);
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_command_dies_with_a_killed_dtrace() {
    let test = "a_command_dies_with_a_killed_dtrace";
    if !ready(test) {
        return;
    }
    let exe = common::compile_c(&common::test_dir(test), "loader", LOADER, &["-O0"]);
    // The command waits for a line it never gets (its stdin is dtrace's, a pipe left open).
    let mut dt = Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .args(["-n", "pid$target:a.out:after:entry {}", "-c"])
        .arg(&exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (_err, line) = common::first_stderr_line(&mut dt);
    assert!(line.contains("matched 1 probe"), "{line}");
    let children =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", dt.id())).unwrap();
    let pid: u32 = children
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no child of dtrace: {children:?}"));
    let _cleanup = KillOnDrop(vec![pid, dt.id()]);
    signal(dt.id(), libc::SIGKILL);
    dt.wait().unwrap();
    // As DTrace kills what it created: gone (or a zombie for its new parent to reap).
    wait_until("the command's end", || {
        matches!(process_state(pid), None | Some('Z'))
    });
}

/// Calls `ten(10 * i + 0, ..., 10 * i + 9)` for i in 1..=N (N the first argument, 3 by default):
/// ten integer arguments, the last four passed on the stack (x86-64 SysV).
const TEN_ARGS: &str = r#"
#include <stdio.h>
#include <stdlib.h>
long __attribute__((noipa)) ten(long a0, long a1, long a2, long a3, long a4, long a5, long a6,
                                long a7, long a8, long a9) {
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9;
}
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3;
    long s = 0;
    for (long i = 1; i <= n; i++) {
        long b = 10 * i;
        s += ten(b, b + 1, b + 2, b + 3, b + 4, b + 5, b + 6, b + 7, b + 8, b + 9);
    }
    printf("%ld\n", s);
    return 0;
}
"#;

/// `arg6..arg9` at a pid `entry` probe are the arguments the caller passed on the stack (above
/// the return address, as DTrace reads them), in the kernel and in dtrace alike: printed, in a
/// predicate and as aggregation keys.
#[test]
fn arguments_past_the_registers_are_read_from_the_stack() {
    let test = "arguments_past_the_registers_are_read_from_the_stack";
    if !ready(test) {
        return;
    }
    let dir = common::test_dir(test);
    for (name, flags) in [
        ("O0", &["-O0"][..]),
        ("O2-nofp", &["-O2", "-fomit-frame-pointer"]),
    ] {
        let exe = common::compile_c(&dir, name, TEN_ARGS, flags);
        let cmd = format!("{} 3", exe.display());
        let out = common::same_with_kernel_paths_off(
            "pid$target:a.out:ten:entry {
                 printf(\"%d %d %d %d %d %d %d %d %d %d\\n\", arg0, arg1, arg2, arg3, arg4,
                        arg5, arg6, arg7, arg8, arg9); }
             pid$target:a.out:ten:entry /arg9 == 29/ { printf(\"nine %d\\n\", arg8); }
             pid$target:a.out:ten:entry { @[arg8, arg9] = sum(arg6); }",
            &[],
            &cmd,
            &[
                (2, "runs whole in the kernel"),
                (3, "aggregations run in the kernel"),
            ],
        );
        for i in 1..=3 {
            let line = (0..10)
                .map(|k| (10 * i + k).to_string())
                .collect::<Vec<_>>()
                .join(" ");
            assert!(out.contains(&format!("{line}\n")), "{name}: {out}");
            let agg = format!("{} {} {}", 10 * i + 8, 10 * i + 9, 10 * i + 6);
            let found = out
                .lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>().join(" ") == agg);
            assert!(found, "{name}: no {agg} in {out}");
        }
        assert_eq!(out.matches("nine ").count(), 1, "{name}: {out}");
        assert!(out.contains("nine 28\n"), "{name}: {out}");
    }
}
