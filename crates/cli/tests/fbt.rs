//! The `fbt` provider through `dtrace`: on kernels with BPF trampolines or kprobes (Debian 12's
//! 6.1 has both, run by `scripts/vmtest`), entry and return probes of kernel functions count,
//! quantize and chain through their BTF-typed arguments, and globs of a thousand functions attach
//! and detach, on each mechanism the kernel has (chosen with `DTRACE_FBT`); `-l` lists every
//! traceable function; on kernels with neither kprobes nor fentry, every `fbt` description fails
//! with one line saying so. `rawfbt` offers the same functions and the synthetic ones, on kprobes,
//! untyped.

mod common;
use common::{dtrace, dtrace_with_env};
use dtrace_testkit::{kernel_has, KernelFeature};
use std::path::PathBuf;
use std::sync::OnceLock;

/// Reads 64 bytes from /dev/zero seven times (static, so no loader reads anything first).
const PROG: &str = r#"
#include <fcntl.h>
#include <unistd.h>
int main(void) {
    char buf[64];
    int fd = open("/dev/zero", O_RDONLY);
    for (int i = 0; i < 7; i++)
        read(fd, buf, sizeof buf);
    close(fd);
    return 0;
}
"#;

const FBT_UNAVAILABLE: &str = "fbt provider unavailable: this kernel has no kprobes or fentry";

fn fentry_ok(test: &str) -> bool {
    common::kernel_ok(test) && common::have_gcc(test) && kernel_has(KernelFeature::Fentry, test)
}

/// The `fbt` mechanisms (`DTRACE_FBT` values) this kernel has, each skipped with its reason where
/// it is missing.
fn mechanisms(test: &str) -> Vec<&'static str> {
    if !common::kernel_ok(test) || !common::have_gcc(test) {
        return Vec::new();
    }
    [
        (KernelFeature::Fentry, "fentry"),
        (KernelFeature::Kprobes, "kprobe"),
    ]
    .into_iter()
    .filter(|(f, _)| kernel_has(*f, &format!("{test} ({})", f.name())))
    .map(|(_, m)| m)
    .collect()
}

fn prog() -> &'static PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        common::compile_c(
            &common::test_dir("fbt"),
            "fbtprog",
            PROG,
            &["-O1", "-static"],
        )
    })
}

/// Runs `dtrace -q -n D -c fbtprog` with `fbt` on `mechanism`; returns stdout.
fn on_prog(mechanism: &str, d: &str) -> String {
    let exe = prog().display().to_string();
    let (rc, out, err) =
        dtrace_with_env(&[("DTRACE_FBT", mechanism)], &["-q", "-n", d, "-c", &exe]);
    assert_eq!(rc, 0, "{mechanism}: {err}");
    out
}

#[test]
fn without_kprobes_or_fentry_every_fbt_description_says_why() {
    if !common::kernel_ok("fbt_unavailable")
        || KernelFeature::Kprobes.present()
        || KernelFeature::Fentry.present()
    {
        return;
    }
    for d in [
        "fbt::vfs_read:entry",
        "fbt:::",
        "fbt:vmlinux:vfs_*:return { trace(arg1); }",
    ] {
        let (rc, out, err) = dtrace(&["-n", d]);
        assert_ne!(rc, 0);
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(FBT_UNAVAILABLE), "{err}");
    }
    let (rc, _, err) = dtrace(&["-l", "-P", "fbt"]);
    assert_ne!(rc, 0);
    assert_eq!(
        err.trim_end(),
        format!("dtrace: failed to list probes: {FBT_UNAVAILABLE}")
    );
}

/// `DTRACE_FBT` naming a mechanism the kernel lacks, or no mechanism at all, says so in one line.
#[test]
fn asking_for_a_missing_fbt_mechanism_says_which_is_missing() {
    if !common::kernel_ok("fbt_mechanism_missing") {
        return;
    }
    let refused = |m: &str| {
        let (rc, out, err) = dtrace_with_env(&[("DTRACE_FBT", m)], &["-n", "fbt::vfs_read:entry"]);
        assert_ne!(rc, 0, "{m}: {out}");
        assert_eq!(err.lines().count(), 1, "{err}");
        err
    };
    assert!(refused("trampoline")
        .contains("the fbt provider: DTRACE_FBT=trampoline is neither fentry nor kprobe"));
    for (feature, m, what) in [
        (
            KernelFeature::Fentry,
            "fentry",
            "no fentry (BPF trampolines)",
        ),
        (KernelFeature::Kprobes, "kprobe", "no kprobes"),
    ] {
        if feature.present() {
            eprintln!("SKIP fbt_mechanism_missing ({m}): this kernel has it");
            continue;
        }
        let err = refused(m);
        let want = format!("the fbt provider on {m} (DTRACE_FBT={m}): this kernel has {what}");
        assert!(err.contains(&want), "{err}");
    }
}

/// A provider glob or an empty provider also matches `fbt`, but is not refused where the kernel
/// has no fbt: it matches the other providers' probes (`*:::tick-10ms` is profile's tick), as on
/// a kernel with fbt.
#[test]
fn a_provider_glob_matches_other_providers_whatever_fbt_can_do() {
    if !common::kernel_ok("provider_glob_without_fbt") {
        return;
    }
    for d in [
        "*:::tick-10ms { trace(probeprov); exit(0); }",
        ":::tick-10ms { trace(probeprov); exit(0); }",
    ] {
        let (rc, out, err) = dtrace(&["-q", "-n", d]);
        assert_eq!(rc, 0, "{d}: {err}");
        // (A slow guest may fire the tick again before the exit is seen.)
        let lines: Vec<&str> = out.split_whitespace().collect();
        assert!(
            !lines.is_empty() && lines.iter().all(|l| *l == "profile"),
            "{d}: {out} {err}"
        );
        assert!(!err.contains("fbt"), "{d}: {err}");
    }
}

#[test]
fn vfs_read_entry_counts_exactly_the_reads_of_the_program() {
    for m in mechanisms("vfs_read_entry_counts") {
        let out = on_prog(
            m,
            "fbt::vfs_read:entry /pid == $target/ { @[execname] = count(); }",
        );
        assert_eq!(
            out.trim(),
            "fbtprog                                                           7",
            "{m}"
        );
    }
}

#[test]
fn vfs_read_return_has_the_return_value_in_arg1_and_args1() {
    for m in mechanisms("vfs_read_return") {
        let out = on_prog(
            m,
            "fbt::vfs_read:return /pid == $target/ { @q = quantize(arg1); @s = sum(args[1]); } \
             END { printa(\"sum %@d\\n\", @s); printa(@q); }",
        );
        assert!(out.contains("sum 448\n"), "{m}: {out}");
        let row = out
            .lines()
            .find(|l| l.trim_start().starts_with("64 |"))
            .unwrap_or_else(|| panic!("{m}: no 64 bucket: {out}"));
        assert!(row.trim_end().ends_with(" 7"), "{m}: {out}");
    }
}

#[test]
fn entry_arguments_are_typed_from_btf_and_chain() {
    for m in mechanisms("fbt_args_chain") {
        let out = on_prog(
            m,
            "fbt::vfs_read:entry /pid == $target/ { \
             printf(\"%s %d\\n\", stringof(args[0]->f_path.dentry->d_name.name), args[2]); }",
        );
        assert_eq!(out.trim_end(), "zero 64\n".repeat(7).trim_end(), "{m}");
    }
}

#[test]
fn the_entry_return_idiom_runs_whole_in_the_kernel_on_each_mechanism() {
    // The sizes read kept from entry to return in a thread-local, and a global counting the
    // reads: both live in the kernel, and print what they print in dtrace.
    let d = "int n; fbt::vfs_read:entry /pid == $target/ { self->size = arg2; n = n + 1; } \
             fbt::vfs_read:return /self->size/ { @s = sum(self->size); @m = max(n); \
             @r = sum(arg1); self->size = 0; } \
             END { printa(\"%@d\\n\", @s); printa(\"%@d\\n\", @m); printa(\"%@d\\n\", @r); }";
    let exe = prog().display().to_string();
    for m in mechanisms("fbt_entry_return_idiom") {
        let mut outs = Vec::new();
        for kernel in ["1", "0"] {
            let (rc, out, err) = dtrace_with_env(
                &[("DTRACE_FBT", m), ("DTRACE_KERNEL_VARIABLES", kernel)],
                &["-qv", "-n", d, "-c", &exe],
            );
            assert_eq!(rc, 0, "{m}: {err}");
            for n in [1, 2] {
                let whole = err.lines().any(|l| {
                    l.starts_with(&format!("dtrace: clause {n} "))
                        && l.contains("runs whole in the kernel at 1 probe (variables")
                });
                assert_eq!(whole, kernel == "1", "{m}: clause {n}: {err}");
            }
            let nums: Vec<i64> = out.lines().filter_map(|l| l.trim().parse().ok()).collect();
            assert_eq!(nums, [448, 7, 448], "{m}: {out}");
            outs.push(out);
        }
        assert_eq!(outs[0], outs[1], "{m}");
    }
}

/// Creates a memfd named `kspec` (the kernel names its file `memfd:kspec`).
const MEMFD_PROG: &str = r#"
#define _GNU_SOURCE
#include <sys/mman.h>
int main(void) {
    return memfd_create("kspec", 0) < 0;
}
"#;

#[test]
fn stringof_an_argument_reads_the_kernel_string_at_the_probe_on_each_mechanism() {
    // fbt's arguments are the traced function's values: stringof(arg0) is the kernel string
    // shmem_file_setup() is given, read at the probe (compared there, and recorded) as in
    // dtrace's interpreter, which reads the copy the probe made.
    let d = "fbt::shmem_file_setup:entry /pid == $target/ { printf(\"%s|\\n\", stringof(arg0)); } \
             fbt::shmem_file_setup:entry /pid == $target && stringof(arg0) == \"memfd:kspec\"/ \
             { printf(\"%d\\n\", strlen((string)arg0)); }";
    let exe = common::compile_c(
        &common::test_dir("fbt-memfd"),
        "memfd",
        MEMFD_PROG,
        &["-O1"],
    );
    let exe = exe.display().to_string();
    for m in mechanisms("fbt_stringof_argument") {
        let mut outs = Vec::new();
        for kernel in [true, false] {
            let mut env = vec![("DTRACE_FBT", m)];
            if !kernel {
                env.extend(common::kernel_paths_off());
            }
            let (rc, out, err) = dtrace_with_env(&env, &["-qv", "-n", d, "-c", &exe]);
            assert_eq!(rc, 0, "{m}: {err}");
            for n in [1, 2] {
                let whole = err.lines().any(|l| {
                    l.starts_with(&format!("dtrace: clause {n} "))
                        && l.contains("runs whole in the kernel at 1 probe")
                });
                assert_eq!(whole, kernel, "{m}: clause {n}: {err}");
            }
            assert!(out.ends_with("memfd:kspec|\n11\n\n"), "{m}: {out}");
            outs.push(out);
        }
        assert_eq!(outs[0], outs[1], "{m}");
    }
}

/// How many functions have trampolines now (`enabled_functions` lines).
fn enabled_functions() -> usize {
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .find_map(|r| std::fs::read_to_string(format!("{r}/enabled_functions")).ok())
        .map_or(0, |s| s.lines().count())
}

#[test]
fn a_glob_of_a_thousand_functions_attaches_and_detaches() {
    for m in mechanisms("fbt_glob") {
        let env = [("DTRACE_FBT", m)];
        // The smallest set of functions sharing a first letter that has 1,000 or more (those this
        // mechanism can trace are listed).
        let (rc, out, err) = dtrace_with_env(&env, &["-l", "-n", "fbt:vmlinux::entry"]);
        assert_eq!(rc, 0, "{m}: {err}");
        let mut by_letter = std::collections::BTreeMap::<char, usize>::new();
        for f in out
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().nth(3))
        {
            *by_letter
                .entry(f.chars().next().unwrap_or(' '))
                .or_default() += 1;
        }
        let (letter, listed) = by_letter
            .into_iter()
            .filter(|&(c, n)| c.is_ascii_lowercase() && n >= 1000)
            .min_by_key(|&(_, n)| n)
            .expect("a letter with 1,000 functions");
        let glob = format!("fbt:vmlinux:{letter}*:entry");
        let before = enabled_functions();
        let d = format!("{glob} {{ @ = count(); }} BEGIN {{ exit(0); }}");
        let t = std::time::Instant::now();
        let (rc, _, err) = dtrace_with_env(&env, &["-n", &d]);
        assert_eq!(rc, 0, "{m}: {err}");
        // A figure, not a threshold.
        eprintln!(
            "fbt_glob: {listed} functions on {m}: attached and detached in {:.2?}",
            t.elapsed()
        );
        assert!(
            err.contains(&format!("matched {} probes", listed + 1)),
            "{m}: {err}"
        );
        // Trampolines and probes are released after an RCU grace period: wait for it, up to a
        // minute.
        let mut left = enabled_functions();
        for _ in 0..600 {
            if left <= before {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
            left = enabled_functions();
        }
        assert!(
            left <= before,
            "{m}: {left} functions still traced (was {before})"
        );
    }
}

#[test]
fn listing_fbt_lists_every_traceable_function() {
    if !fentry_ok("fbt_list") {
        return;
    }
    let (rc, out, err) = dtrace(&["-l", "-P", "fbt"]);
    assert_eq!(rc, 0, "{err}");
    let funcs: std::collections::HashSet<&str> = out
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(3))
        .collect();
    assert!(funcs.len() > 10_000, "{} functions", funcs.len());
    for f in ["vfs_read", "vfs_write", "do_sys_openat2"] {
        assert!(funcs.contains(f), "{f} not listed");
    }
    let avail = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .find_map(|r| std::fs::read_to_string(format!("{r}/available_filter_functions")).ok())
        .unwrap();
    let avail: std::collections::HashSet<&str> = avail
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(funcs.iter().all(|f| avail.contains(f)));
    // Synthetic functions (copies the compiler made, `foo.isra.0`) are rawfbt's only.
    assert!(!funcs.iter().any(|f| f.contains('.')));
    // Every traceable function has both probes.
    let with = |name: &str| -> std::collections::HashSet<&str> {
        out.lines()
            .filter(|l| l.ends_with(name))
            .filter_map(|l| l.split_whitespace().nth(3))
            .collect()
    };
    assert_eq!(with(" entry"), with(" return"));
}

#[test]
fn an_untraceable_function_is_named_with_the_reason() {
    if !fentry_ok("fbt_untraceable") {
        return;
    }
    let (rc, _, err) = dtrace(&["-n", "fbt::no_such_function_dtrace:entry"]);
    assert_ne!(rc, 0);
    assert!(err.contains("does not match any probes"), "{err}");
}

/// Opens the file named by its argument five times (static, so no loader opens anything first).
const OPENER: &str = r#"
#include <fcntl.h>
#include <unistd.h>
int main(int argc, char **argv) {
    for (int i = 0; i < 5 && argc > 1; i++)
        close(open(argv[1], O_RDONLY));
    return 0;
}
"#;

/// The module of the 9P client, which serves every file of a root shared over 9p (as in
/// `scripts/vmtest`'s guest).
const NINEP: &str = "9pnet";

#[test]
fn module_functions_fire_on_each_mechanism_typed_from_the_module_btf() {
    let test = "fbt_module";
    // Each mechanism the kernel has (none: skipped with the reason).
    let mechanisms = mechanisms(test);
    if mechanisms.is_empty() {
        return;
    }
    let (rc, out, _) = dtrace(&["-l", "-n", &format!("fbt:{NINEP}:p9_client_open:entry")]);
    let root_on_9p = std::fs::read_to_string("/proc/mounts").is_ok_and(|m| {
        m.lines()
            .any(|l| l.split_whitespace().nth(1) == Some("/") && l.contains(" 9p "))
    });
    if !dtrace_testkit::skip_unless(
        rc == 0 && root_on_9p,
        test,
        "the root is not a 9p mount served by the 9pnet module (scripts/vmtest's guest has it)",
    ) {
        return;
    }
    assert!(out.contains(NINEP), "{out}");
    // The module's own BTF types its arguments, its own structs included (`struct p9_fid` is
    // 9pnet's, not the kernel's); without it they are untyped registers.
    let module_btf = std::path::Path::new("/sys/kernel/btf").join(NINEP).exists();
    let (rc, out, err) = dtrace(&["-lv", "-n", &format!("fbt:{NINEP}:p9_client_open:entry")]);
    assert_eq!(rc, 0, "{err}");
    let first = match module_btf {
        true => "args[0]: struct p9_fid *",
        false => "args[0]: uint64_t",
    };
    assert!(out.contains(first), "{out}");
    let fid = match module_btf {
        true => "args[0]->fid >= 0",
        false => "arg0 != 0",
    };
    let exe = common::compile_c(
        &common::test_dir("fbtmod"),
        "opener",
        OPENER,
        &["-O1", "-static"],
    );
    let exe = exe.display().to_string();
    // Every open of a file of the 9p root sends Tlopen; the return probe sees the same calls.
    for m in mechanisms {
        let (rc, out, err) = dtrace_with_env(
            &[("DTRACE_FBT", m)],
            &[
                "-q",
                "-n",
                &format!(
                    "fbt:{NINEP}:p9_client_open:entry /pid == $target && {fid}/ {{ @e = count(); }} \
                     fbt:{NINEP}:p9_client_open:return /pid == $target/ {{ @r = count(); @v = max(arg1); }} \
                     END {{ printa(\"%@d\", @e); printa(\" %@d\", @r); printa(\" %@d\\n\", @v); }}"
                ),
                "-c",
                &format!("{exe} /etc/os-release"),
            ],
        );
        assert_eq!(rc, 0, "{m}: {err}");
        let n: Vec<i64> = out
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        assert_eq!(n.len(), 3, "{m}: {out}");
        assert!(n[0] >= 5 && n[0] == n[1], "{m}: {out}");
        // p9_client_open returns 0 on success.
        assert_eq!(n[2], 0, "{m}: {out}");
    }
}

/// Sleeps 1 ms five times, spins for about 50 ms of its own CPU time, then yields three times
/// (static, so the loader does nothing first).
const SCHEDULED: &str = r#"
#include <sched.h>
#include <time.h>
#include <unistd.h>
int main(void) {
    for (int i = 0; i < 5; i++)
        usleep(1000);
    struct timespec t0, t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 50000000L);
    for (int i = 0; i < 3; i++)
        sched_yield();
    return 0;
}
"#;

/// `sched:::enqueue`, `dequeue`, `tick` and `surrender`, which no tracepoint gives, fire from
/// `fbt` (each scheduling class's `enqueue_task_*`/`dequeue_task_*`, the clock tick,
/// `do_sched_yield`) with the thread and process translated as DTrace documents them.
#[test]
fn sched_probes_without_tracepoints_fire_on_fbt() {
    let test = "sched_on_fbt";
    let ms = mechanisms(test);
    if ms.is_empty() {
        return;
    }
    let (rc, out, err) = dtrace(&["-l", "-P", "sched"]);
    assert_eq!(rc, 0, "{err}");
    for p in ["enqueue", "dequeue", "tick"] {
        assert!(
            out.lines().any(|l| l.ends_with(&format!(" {p}"))),
            "sched:::{p} not listed: {out}"
        );
    }
    let surrender = out.lines().any(|l| l.ends_with(" surrender"));
    let exe = common::compile_c(
        &common::test_dir("schedfbt"),
        "scheduled",
        SCHEDULED,
        &["-O1", "-static"],
    );
    let exe = exe.display().to_string();
    for m in ms {
        let (rc, out, err) = dtrace_with_env(
            &[("DTRACE_FBT", m)],
            &[
                "-q",
                "-n",
                "sched:::enqueue /args[1]->pr_pid == $target/ { @e = count(); \
                 @cpu = max(args[2]->cpu_id); } \
                 sched:::dequeue /args[1]->pr_pid == $target/ { @d = count(); } \
                 sched:::dequeue /args[1]->pr_pid == $target && args[3] & 1/ { @s = count(); } \
                 sched:::tick /pid == $target/ { @t[args[1]->pr_fname] = count(); } \
                 END { printa(\"enqueue %@d\\n\", @e); printa(\"dequeue %@d\\n\", @d); \
                 printa(\"cpu %@d\\n\", @cpu); printa(\"sleeps %@d\\n\", @s); \
                 printa(\"tick %s %@d\\n\", @t); }",
                "-c",
                &exe,
            ],
        );
        assert_eq!(rc, 0, "{m}: {err}");
        let count = |what: &str| -> u64 {
            out.lines()
                .find_map(|l| l.strip_prefix(what))
                .and_then(|n| n.trim().rsplit(' ').next()?.parse().ok())
                .unwrap_or(0)
        };
        // Each sleep takes the thread off its run queue and its wakeup puts it back.
        assert!(count("enqueue ") >= 5, "{m}: {out}");
        assert!(count("dequeue ") >= 5, "{m}: {out}");
        // args[3], the dequeue flags, say DEQUEUE_SLEEP for the sleeps.
        assert!(count("sleeps ") >= 5, "{m}: {out}");
        // args[2] is the run queue's CPU.
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
        let cpu = out
            .lines()
            .find_map(|l| l.strip_prefix("cpu ")?.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{m}: no cpu line: {out}"));
        assert!(cpu < cpus, "{m}: {out}");
        // 50 ms of CPU time spans several clock ticks at any HZ.
        assert!(count("tick scheduled ") >= 2, "{m}: {out}");
        if surrender {
            let (rc, out, err) = dtrace_with_env(
                &[("DTRACE_FBT", m)],
                &[
                    "-q",
                    "-n",
                    "sched:::surrender /args[0]->pr_lwpid == $target/ { @ = count(); } \
                     END { printa(\"%@d\\n\", @); }",
                    "-c",
                    &exe,
                ],
            );
            assert_eq!(rc, 0, "{m}: {err}");
            assert_eq!(out.trim(), "3", "{m}");
        }
    }
}

/// `rawfbt` places kprobes on every traceable function, the synthetic ones (copies the compiler
/// made, `foo.isra.0`) included, which `fbt` leaves out; its probes are untyped: `arg0..` are the
/// argument registers and a return's `arg1` the return value, and `args[]` is not offered.
#[test]
fn rawfbt_traces_every_function_on_kprobes_untyped() {
    let test = "rawfbt_traces_every_function_on_kprobes_untyped";
    if !(common::kernel_ok(test)
        && common::have_gcc(test)
        && kernel_has(KernelFeature::Kprobes, test))
    {
        return;
    }
    let exe = prog().display().to_string();
    let (rc, out, err) = dtrace(&[
        "-q",
        "-n",
        "rawfbt::vfs_read:entry /pid == $target/ { @e = count(); @n = sum(arg2); } \
         rawfbt::vfs_read:return /pid == $target/ { @r = sum(arg1); } \
         END { printa(\"entry %@d\\n\", @e); printa(\"asked %@d\\n\", @n); \
         printa(\"returned %@d\\n\", @r); }",
        "-c",
        &exe,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out.trim(), "entry 7\nasked 448\nreturned 448", "{out}");
    let (rc, out, err) = dtrace(&["-lv", "-n", "rawfbt:vmlinux:vfs_read:entry"]);
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("rawfbt"), "{out}");
    assert!(!out.contains("args[0]"), "{out}");
    let (rc, _, err) = dtrace(&["-n", "rawfbt::vfs_read:entry { trace(args[0]); }"]);
    assert_ne!(rc, 0, "args[] compiled at an untyped probe: {err}");
    let avail = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .find_map(|r| std::fs::read_to_string(format!("{r}/available_filter_functions")).ok())
        .unwrap_or_default();
    let synthetic = avail
        .lines()
        .filter(|l| !l.contains('['))
        .filter_map(|l| l.split_whitespace().next())
        .find(|f| f.contains('.'));
    let Some(f) = synthetic else {
        eprintln!("{test}: this kernel lists no synthetic function; that part not checked");
        return;
    };
    let (rc, out, err) = dtrace(&["-l", "-n", &format!("rawfbt:vmlinux:{f}:entry")]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out.lines().count(), 2, "{out}");
    let (_, out, err) = dtrace(&["-l", "-n", &format!("fbt:vmlinux:{f}:entry")]);
    assert!(
        out.lines().count() <= 1 && err.contains("No probe matches description"),
        "fbt offered synthetic {f}: {out}{err}"
    );
}

/// Without kprobes, every `rawfbt` description fails with one line saying so.
#[test]
fn without_kprobes_every_rawfbt_description_says_why() {
    if !common::kernel_ok("rawfbt_unavailable") || KernelFeature::Kprobes.present() {
        return;
    }
    const WHY: &str = "rawfbt provider unavailable: this kernel has no kprobes";
    for d in ["rawfbt::vfs_read:entry", "rawfbt:::"] {
        let (rc, out, err) = dtrace(&["-n", d]);
        assert_ne!(rc, 0);
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(WHY), "{err}");
    }
    let (rc, _, err) = dtrace(&["-l", "-P", "rawfbt"]);
    assert_ne!(rc, 0);
    assert!(err.contains(WHY), "{err}");
}
