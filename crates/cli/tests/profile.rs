//! `profile-N` and `tick-N` on perf events, and symbol names, through `dtrace` (root, BPF, tracefs
//! and gcc; skipped otherwise): user stacks of a `-c` program compiled here with frame pointers
//! resolve to its functions after it has exited (`jstack()` too, as the user stack without a Java
//! helper), kernel stacks of a workload making system calls
//! resolve to `vmlinux` frames (at tracepoints with no tracing machinery on top), `tick-1s` fires once a second on
//! one CPU while `profile-N` fires on every CPU, arg0/arg1 are the kernel/user PC in the right mode,
//! and `%a`, `%A`, `sym()`, `usym()`, `mod()`, `umod()`, `func()`, `ufunc()` print DTrace's formats.
//! The checks are on formats and on the names this program defines, never on kernel offsets.

mod common;
use common::dtrace;
use std::path::PathBuf;
use std::sync::OnceLock;

/// Spins in `spin` (user mode) for 400 ms, then reads /dev/zero in `readzero` (kernel mode, in
/// `read(2)`) for 400 ms.
const PROG: &str = r#"
#include <fcntl.h>
#include <time.h>
#include <unistd.h>
volatile long sink;
static char buf[1 << 16];
static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}
__attribute__((noinline)) void spin(long ns) {
    long end = now_ns() + ns;
    do {
        for (int i = 0; i < 100000; i++) sink += i;
    } while (now_ns() < end);
}
__attribute__((noinline)) void readzero(long ns) {
    int fd = open("/dev/zero", O_RDONLY);
    long end = now_ns() + ns;
    do {
        for (int i = 0; i < 16; i++) sink += read(fd, buf, sizeof buf);
    } while (now_ns() < end);
    close(fd);
}
int main(void) {
    spin(400000000L);
    readzero(400000000L);
    return 0;
}
"#;

fn kernel_ok(test: &str) -> bool {
    common::kernel_ok(test)
        && dtrace_testkit::skip_unless(
            dtrace_linux::provider::profile::perf_profile_available(),
            test,
            "no cpu-clock perf events",
        )
        && common::have_gcc(test)
}

/// The test program, compiled once (`lpspin`, with frame pointers so user stacks can be walked).
fn prog() -> &'static PathBuf {
    static PROG_PATH: OnceLock<PathBuf> = OnceLock::new();
    PROG_PATH.get_or_init(|| {
        let flags = ["-O1", "-fno-omit-frame-pointer"];
        common::compile_c(&common::test_dir("profile"), "lpspin", PROG, &flags)
    })
}

/// Runs `script` with `-c` on the test program.
fn run_on_prog(script: &str) -> String {
    let exe = prog().display().to_string();
    let (rc, out, err) = dtrace(&["-q", "-n", script, "-c", &exe]);
    assert_eq!(rc, 0, "{err}");
    out
}

/// Whether `s` is `0x` and lowercase hex digits.
fn is_hex(s: &str) -> bool {
    s.strip_prefix("0x").is_some_and(|h| {
        !h.is_empty()
            && h.bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    })
}

/// Whether `s` is a C identifier, possibly with the `.cold`/`.isra.0` suffixes compilers add.
fn is_symbol(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
}

/// Whether `line` is a stack frame as DTrace prints it: `object`symbol+0xoff`, `object`symbol`,
/// `object`0xaddr` or `0xaddr`, indented by 14.
fn is_frame(line: &str) -> bool {
    let Some(f) = line.strip_prefix(&" ".repeat(14)) else {
        return false;
    };
    if f.starts_with(' ') {
        return false;
    }
    match f.split_once('`') {
        None => is_hex(f),
        Some((obj, rest)) => {
            !obj.is_empty()
                && !obj.contains(' ')
                && match rest.split_once('+') {
                    Some((sym, off)) => is_symbol(sym) && is_hex(off),
                    None => is_symbol(rest) || is_hex(rest),
                }
        }
    }
}

/// The stacks of an `@[stack()] = count()` style aggregation: each entry is a blank line, its frames
/// and its count; the output starts with the blank line `dtrace` prints before aggregations.
fn stacks(out: &str) -> Vec<(Vec<String>, u64)> {
    let mut entries = Vec::new();
    let mut frames = Vec::new();
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some(""), "{out}");
    for line in lines {
        if line.is_empty() {
            assert!(frames.is_empty(), "blank line inside a stack: {out}");
            continue;
        }
        if let Ok(n) = line.trim().parse::<u64>() {
            assert_eq!(line, format!("{n:>17}"), "count misplaced");
            entries.push((std::mem::take(&mut frames), n));
        } else {
            assert!(is_frame(line), "not a frame: {line:?}\n{out}");
            frames.push(line.trim().to_string());
        }
    }
    assert!(frames.is_empty(), "frames without a count: {out}");
    entries
}

#[test]
fn ustack_of_the_target_names_its_functions_after_it_exited() {
    if !kernel_ok("ustack_of_the_target_names_its_functions_after_it_exited") {
        return;
    }
    let out = run_on_prog("profile-997 /pid == $target/ { @[ustack()] = count(); }");
    let entries = stacks(&out);
    let in_spin = entries.iter().find(|(f, _)| {
        f.len() >= 2 && f[0].starts_with("lpspin`spin+0x") && f[1].starts_with("lpspin`main+0x")
    });
    assert!(
        in_spin.is_some(),
        "no lpspin`spin <- lpspin`main stack:\n{out}"
    );
    // Every frame of the program's own text is named (it has a symbol table).
    for (frames, _) in &entries {
        for f in frames.iter().filter(|f| f.starts_with("lpspin`")) {
            assert!(!f.starts_with("lpspin`0x"), "unnamed frame {f}\n{out}");
        }
    }
}

#[test]
fn ustack_with_a_depth_and_string_space_keeps_that_many_frames() {
    if !kernel_ok("ustack_with_a_depth_and_string_space_keeps_that_many_frames") {
        return;
    }
    let out = run_on_prog("profile-997 /pid == $target && arg1/ { @[ustack(2, 64)] = count(); }");
    let entries = stacks(&out);
    assert!(entries.iter().all(|(f, _)| f.len() <= 2), "{out}");
    assert!(
        entries.iter().any(|(f, _)| f.len() == 2
            && f[0].starts_with("lpspin`spin+0x")
            && f[1].starts_with("lpspin`main+0x")),
        "{out}"
    );
}

#[test]
fn jstack_without_a_java_helper_is_the_user_stack() {
    if !kernel_ok("jstack_without_a_java_helper_is_the_user_stack") {
        return;
    }
    // With no helper to translate frames, jstack() records and prints the user stack as ustack()
    // does, `jstackframes` deep (default 50).
    let out = run_on_prog("profile-997 /pid == $target && arg1/ { @[jstack()] = count(); }");
    let entries = stacks(&out);
    assert!(
        entries.iter().any(|(f, _)| f.len() >= 2
            && f[0].starts_with("lpspin`spin+0x")
            && f[1].starts_with("lpspin`main+0x")),
        "no lpspin`spin <- lpspin`main stack:\n{out}"
    );
    let exe = prog().display().to_string();
    let (rc, out, err) = dtrace(&[
        "-x",
        "jstackframes=1",
        "-x",
        "jstackstrsize=64",
        "-qn",
        "profile-997 /pid == $target && arg1/ { @[jstack()] = count(); }",
        "-c",
        &exe,
    ]);
    assert_eq!(rc, 0, "{err}");
    let entries = stacks(&out);
    assert!(entries.iter().all(|(f, _)| f.len() == 1), "{out}");
    assert!(
        entries
            .iter()
            .any(|(f, _)| f[0].starts_with("lpspin`spin+0x")),
        "{out}"
    );
}

#[test]
fn kernel_stacks_of_samples_are_vmlinux_frames() {
    if !kernel_ok("kernel_stacks_of_samples_are_vmlinux_frames") {
        return;
    }
    let out = run_on_prog("profile-997 /pid == $target && arg0 != 0/ { @[stack()] = count(); }");
    let entries = stacks(&out);
    assert!(!entries.is_empty(), "no kernel samples:\n{out}");
    let frames: Vec<&String> = entries.iter().flat_map(|(f, _)| f).collect();
    assert!(
        frames.iter().any(|f| f.starts_with("vmlinux`")),
        "no vmlinux frame:\n{out}"
    );
}

#[test]
fn kernel_stacks_at_tracepoints_start_past_the_tracing_machinery() {
    if !kernel_ok("kernel_stacks_at_tracepoints_start_past_the_tracing_machinery") {
        return;
    }
    let out = run_on_prog(
        "syscall::read:entry, syscall::read:return, sched:::on-cpu /pid == $target/ { @[stack()] = count(); }",
    );
    let entries = stacks(&out);
    assert!(!entries.is_empty(), "no stacks:\n{out}");
    for (f, _) in &entries {
        let top = f.first().map(String::as_str).unwrap_or("");
        let (module, name) = top.split_once('`').unwrap_or(("", top));
        let name = name.split('+').next().unwrap_or("");
        // A kernel frame (of vmlinux or a module: a thread switched in while waiting in a
        // file system module, e.g. 9p, shows that module's function first).
        assert!(
            !module.is_empty()
                && !name.is_empty()
                && !dtrace_linux::symbols::kallsyms::is_tracing_symbol(module, name),
            "tracing frame (or no frame) on top: {top:?}\n{out}"
        );
    }
}

#[test]
fn tick_fires_once_a_second_on_one_cpu_and_profile_on_every_cpu() {
    if !kernel_ok("tick_fires_once_a_second_on_one_cpu_and_profile_on_every_cpu") {
        return;
    }
    let (rc, out, err) = dtrace(&[
        "-qn",
        "BEGIN { printf(\"begin\\n\"); }
         tick-1s { @t[cpu] = count(); }
         profile-97 { @p[cpu] = count(); }
         tick-2500ms { exit(0); }
         END { printa(\"tick %d %@d\\n\", @t); printa(\"profile %d\\n\", @p); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.first(), Some(&"begin"), "BEGIN fires first:\n{out}");
    let ticks: Vec<&&str> = lines.iter().filter(|l| l.starts_with("tick ")).collect();
    assert_eq!(ticks.len(), 1, "tick-1s fired on several CPUs:\n{out}");
    assert!(ticks[0].ends_with(" 2"), "tick-1s in 2.5 s:\n{out}");
    let cpus = dtrace_linux::bpf::map::online_cpus().unwrap();
    let profiled = lines.iter().filter(|l| l.starts_with("profile ")).count();
    assert_eq!(profiled, cpus.len(), "profile-97 not on every CPU:\n{out}");
}

#[test]
fn pcs_are_kernel_or_user_by_mode_and_print_as_symbols() {
    if !kernel_ok("pcs_are_kernel_or_user_by_mode_and_print_as_symbols") {
        return;
    }
    let out = run_on_prog(
        "profile-997 /pid == $target/ { @m[arg0 != 0, arg1 != 0] = count(); }
         profile-997 /pid == $target && arg1/ { @u[usym(arg1), umod(arg1), ufunc(arg1)] = count(); }
         profile-997 /pid == $target && arg0/ { @k[sym(arg0), mod(arg0), func(arg0)] = count(); }
         profile-997 /pid == $target && arg1 && ++nuser == 10/ { printf(\"A %A\\n\", arg1); }
         profile-997 /pid == $target && arg0 && !done[1]/ { done[1] = 1; printf(\"a %a\\n\", arg0); }
         END {
             printa(\"mode %d %d\\n\", @m);
             printa(\"user %s %s %s\\n\", @u);
             printa(\"kern %s %s %s\\n\", @k);
         }",
    );
    let lines: Vec<&str> = out.lines().collect();
    let has = |l: &str| lines.contains(&l);
    // User-mode samples have only a user PC, kernel-mode ones only a kernel PC.
    assert!(has("mode 0 1"), "{out}");
    assert!(has("mode 1 0"), "{out}");
    assert!(!has("mode 1 1") && !has("mode 0 0"), "{out}");
    // usym() keys are normalized to the function: one line for spin.
    let spin: Vec<&&str> = lines
        .iter()
        .filter(|l| l.starts_with("user lpspin`spin "))
        .collect();
    assert_eq!(spin, vec![&"user lpspin`spin lpspin lpspin`spin"], "{out}");
    let kern: Vec<&&str> = lines.iter().filter(|l| l.starts_with("kern ")).collect();
    assert!(!kern.is_empty(), "{out}");
    let mut seen = std::collections::HashSet::new();
    for l in &kern {
        let parts: Vec<&str> = l.split(' ').collect();
        assert_eq!(parts.len(), 4, "{l}");
        let (sym, module, func) = (parts[1], parts[2], parts[3]);
        assert_eq!(sym, func, "{l}");
        match sym.split_once('`') {
            Some((m, name)) => assert!(is_symbol(name) && m == module, "{l}"),
            // An address no symbol covers (a BPF program another tool runs in this process).
            None => assert!(is_hex(sym) && is_hex(module), "{l}"),
        }
        assert!(seen.insert(sym), "sym() key {sym} not merged:\n{out}");
    }
    assert!(kern.iter().any(|l| l.contains(" vmlinux ")), "{out}");
    let a = lines
        .iter()
        .find_map(|l| l.strip_prefix("A "))
        .unwrap_or("");
    // Resolved in $target's mappings (the 10th user sample is most likely in lpspin`spin, but
    // any object of the program will do).
    assert!(
        is_frame(&format!("{:14}{a}", "")) && a.contains('`'),
        "%A: {a}\n{out}"
    );
    let k = lines
        .iter()
        .find_map(|l| l.strip_prefix("a "))
        .unwrap_or("");
    assert!(is_frame(&format!("{:14}{k}", "")), "%a: {k}\n{out}");
    assert!(!is_hex(k), "%a of a kernel PC unresolved: {k}");
}
