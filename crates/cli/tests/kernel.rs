//! `dtrace` with the kernel providers (root, BPF and tracefs; skipped otherwise): syscall probes
//! counted for a `-c` command, the kernel's probes in `dtrace -l`, and a kernel-probe predicate on
//! `$target` that sees only the target.

mod common;
use common::{dtrace, kernel_ok};

#[test]
fn syscall_writes_of_the_target_are_counted() {
    if !kernel_ok("syscall_writes_of_the_target_are_counted") {
        return;
    }
    for n in [1, 37] {
        let cmd = format!("dd if=/dev/zero of=/dev/null bs=1 count={n} status=none");
        let (rc, out, err) = dtrace(&[
            "-n",
            "syscall::write:entry /pid == $target/ { @ = count(); }",
            "-c",
            &cmd,
        ]);
        assert_eq!(rc, 0, "{err}");
        assert_eq!(out, format!("\n{n:>17}\n"));
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(
            lines[0],
            "dtrace: description 'syscall::write:entry ' matched 1 probe"
        );
        assert!(
            lines[1].starts_with("dtrace: pid ") && lines[1].ends_with(" has exited"),
            "{err}"
        );
    }
}

#[test]
fn execname_and_probefunc_of_kernel_probes() {
    if !kernel_ok("execname_and_probefunc_of_kernel_probes") {
        return;
    }
    let (rc, out, err) = dtrace(&[
        "-qn",
        "syscall::write:entry /pid == $target/ { printf(\"%s %s %s %d\\n\", execname, probeprov, probefunc, arg2); }",
        "-c",
        "dd if=/dev/zero of=/dev/null bs=3 count=2 status=none",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out, "dd syscall write 3\ndd syscall write 3\n\n");
}

#[test]
fn listing_shows_kernel_probes() {
    if !kernel_ok("listing_shows_kernel_probes") {
        return;
    }
    let (rc, out, err) = dtrace(&["-l", "-n", "syscall::write:"]);
    assert_eq!(rc, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[1].ends_with("syscall           vmlinux                             write entry"));
    assert!(
        lines[2].ends_with("syscall           vmlinux                             write return")
    );
    let (rc, out, _) = dtrace(&["-l"]);
    assert_eq!(rc, 0);
    for p in ["syscall", "proc", "sched"] {
        assert!(
            out.lines().any(|l| l.split_whitespace().nth(1) == Some(p)),
            "provider {p} not listed"
        );
    }
}

#[test]
fn ring_buffer_drops_are_reported_per_cpu() {
    if !kernel_ok("ring_buffer_drops_are_reported_per_cpu") {
        return;
    }
    // A 4k buffer per CPU (a ring of a page or two) cannot hold a burst of 200000 writes: what
    // is lost is reported, and what was counted plus what was dropped is every write. (The
    // count runs in dtrace, so that every write is a record: in the kernel nothing is lost, see
    // kernel_aggregations.rs.)
    let n = 200_000u64;
    let cmd = format!("dd if=/dev/zero of=/dev/null bs=1 count={n} status=none");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .env("DTRACE_KERNEL_AGGREGATIONS", "0")
        .args([
            "-b",
            "4k",
            "-n",
            "syscall::write:entry /pid == $target/ { @ = count(); }",
            "-c",
            &cmd,
        ])
        .output()
        .unwrap();
    let (rc, out, err) = common::outcome(&o);
    assert_eq!(rc, 0, "{err}");
    let counted: u64 = out.trim().parse().unwrap_or_else(|_| panic!("{out:?}"));
    let mut dropped = 0;
    for l in err.lines().filter(|l| l.contains("drop")) {
        let words: Vec<&str> = l.split(' ').collect();
        assert_eq!(words.len(), 6, "{l}");
        let d: u64 = words[1].parse().unwrap();
        assert_eq!(words[0], "dtrace:", "{l}");
        assert_eq!(words[2], if d == 1 { "drop" } else { "drops" }, "{l}");
        assert_eq!(&words[3..5], ["on", "CPU"], "{l}");
        assert!(words[5].parse::<u32>().is_ok(), "{l}");
        dropped += d;
    }
    assert!(dropped > 0, "no drops reported: {err}");
    assert_eq!(counted + dropped, n, "{out}\n{err}");
}

#[test]
fn verbose_listing_of_a_syscall_probe() {
    if !kernel_ok("verbose_listing_of_a_syscall_probe") {
        return;
    }
    let (rc, out, err) = dtrace(&["-lv", "-n", "syscall::write:entry"]);
    assert_eq!(rc, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[1].ends_with("syscall           vmlinux                             write entry"));
    // The module and function are named: the description is as stable as the least stable of
    // the provider's provider, module, function and name attributes.
    assert_eq!(
        lines[2..].join("\n"),
        "
\tProbe Description Attributes
\t\tIdentifier Names: Private
\t\tData Semantics:   Private
\t\tDependency Class: Unknown

\tArgument Attributes
\t\tIdentifier Names: Private
\t\tData Semantics:   Private
\t\tDependency Class: ISA

\tArgument Types
\t\targs[0]: uint64_t
\t\targs[1]: const char *
\t\targs[2]: uint64_t
"
    );
}

#[test]
fn verbose_stability_report_of_a_syscall_probe() {
    if !kernel_ok("verbose_stability_report_of_a_syscall_probe") {
        return;
    }
    // The description names the syscall provider, function and name: the minimum of Evolving
    // provider and name and Private/Private/ISA function. probename takes the name's Evolving
    // attributes, execname is Stable.
    let (rc, out, err) = dtrace(&[
        "-qv",
        "-n",
        "syscall::read:entry /probename == \"entry\"/ { @[execname] = count(); }",
        "-n",
        "BEGIN { exit(0); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    let report = |what: &str, d: [&str; 3], s: [&str; 3]| {
        format!(
            "\nStability attributes for description {what}:\n\
             \n\tMinimum Probe Description Attributes\n\
             \t\tIdentifier Names: {}\n\t\tData Semantics:   {}\n\t\tDependency Class: {}\n\
             \n\tMinimum Statement Attributes\n\
             \t\tIdentifier Names: {}\n\t\tData Semantics:   {}\n\t\tDependency Class: {}\n\n",
            d[0], d[1], d[2], s[0], s[1], s[2]
        )
    };
    let want = report(
        "syscall::read:entry ",
        ["Private", "Private", "ISA"],
        ["Evolving", "Evolving", "Common"],
    ) + &report(
        "BEGIN ",
        ["Unstable", "Unstable", "Common"],
        ["Stable", "Stable", "Common"],
    );
    assert!(out.starts_with(&want), "{out}");
}

#[test]
fn print_of_a_kernel_type_copied_in_at_a_syscall() {
    if !kernel_ok("print_of_a_kernel_type_copied_in_at_a_syscall") {
        return;
    }
    // sleep 1.5 asks clock_nanosleep for { 1, 500000000 }
    let (rc, out, err) = dtrace(&[
        "-qn",
        "syscall::clock_nanosleep:entry /pid == $target/ { print((struct __kernel_timespec *)copyin(arg2, sizeof (struct __kernel_timespec))); exit(0); }",
        "-c",
        "sleep 1.5",
    ]);
    assert_eq!(rc, 0, "{err}");
    let m = " ".repeat(44);
    let (addr, object) = out.split_once(" = *\n").unwrap_or(("", ""));
    assert!(addr.starts_with("0x"), "{out}");
    assert_eq!(
        object,
        format!("{m}(struct __kernel_timespec) {{\n{m} .tv_sec = (__kernel_time64_t)1,\n{m} .tv_nsec = (long long int)500000000,\n{m}}}\n\n")
    );
}

#[test]
fn print_of_curthread_shows_the_whole_task() {
    if !kernel_ok("print_of_curthread_shows_the_whole_task") {
        return;
    }
    let (rc, out, err) = dtrace(&[
        "-qn",
        "syscall::clock_nanosleep:entry /pid == $target/ { print(curthread); exit(0); }",
        "-c",
        "sleep 0.2",
    ]);
    assert_eq!(rc, 0, "{err}");
    let m = " ".repeat(44);
    assert!(
        out.contains(&format!(" = *\n{m}(struct task_struct) {{\n")),
        "{out}"
    );
    // (and the new line dtrace adds at the end)
    assert!(out.ends_with(&format!("\n{m}}}\n\n")), "{out}");
    // members by name and type, nested structs, the command name character by character
    assert!(
        out.contains(&format!(
            "\n{m} .comm = (char [16]) [\n{m}  (char)'s',\n{m}  (char)'l',\n"
        )),
        "{out}"
    );
    assert!(out.contains(&format!("\n{m} .pid = (pid_t)")), "{out}");
    // (A nested struct never all zero, which print() leaves out: `thread_info`'s flags are zero
    // unless something traces the task's syscalls, as the sys_enter dispatcher does and a
    // trampoline on clock_nanosleep's own function does not.)
    assert!(
        out.contains(&format!("\n{m} .se = (struct sched_entity) {{\n")),
        "{out}"
    );
    assert!(out.lines().count() > 100);
}

#[test]
fn temporal_orders_records_of_every_cpu_by_time() {
    if !kernel_ok("temporal_orders_records_of_every_cpu_by_time") {
        return;
    }
    // Samples on every CPU and system calls, switched often so that records are held across
    // switches; BEGIN and END bracket them.
    let (rc, out, err) = dtrace(&[
        "-x",
        "temporal",
        "-x",
        "switchrate=20ms",
        "-qn",
        "BEGIN { printf(\"%d %d B\\n\", timestamp, cpu); }
         profile-997 { printf(\"%d %d\\n\", timestamp, cpu); }
         syscall::read:entry, syscall::write:entry { printf(\"%d %d\\n\", timestamp, cpu); }
         tick-400ms { exit(0); }
         END { printf(\"%d %d E\\n\", timestamp, cpu); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert!(lines.first().is_some_and(|l| l.ends_with(" B")), "{out}");
    assert!(lines.last().is_some_and(|l| l.ends_with(" E")), "{out}");
    let mut last = 0u64;
    let mut cpus = std::collections::HashSet::new();
    for l in &lines {
        let mut f = l.split(' ');
        let ts: u64 = f.next().unwrap().parse().unwrap();
        let cpu: u32 = f.next().unwrap().parse().unwrap();
        assert!(ts >= last, "{ts} after {last}:\n{out}");
        last = ts;
        cpus.insert(cpu);
    }
    let online = dtrace_linux::bpf::map::online_cpus().unwrap().len();
    assert_eq!(cpus.len(), online, "records not from every CPU:\n{out}");
    assert!(lines.len() > 100, "{out}");
}

#[test]
fn strsize_from_the_command_line_sizes_strings_copied_at_the_probe() {
    if !kernel_ok("strsize_from_the_command_line") {
        return;
    }
    // A path of 414 characters (no such file: cat's open fails, after the probe has seen it).
    let path = format!("/nonexistent/{}x", "abcdefghi/".repeat(40));
    assert_eq!(path.len(), 414);
    let cmd = format!("cat {path}");
    let d = "syscall::openat:entry /pid == $target/ { @ = max(strlen(copyinstr(arg1))); }";
    let longest = |opts: &[&str]| {
        let mut args = vec!["-q"];
        args.extend_from_slice(opts);
        args.extend_from_slice(&["-n", d, "-c", &cmd]);
        let (_, out, err) = dtrace(&args);
        out.trim()
            .parse::<u64>()
            .unwrap_or_else(|_| panic!("{opts:?}: {out:?} {err}"))
    };
    // copyinstr() copies strsize bytes, its NUL included (DTrace for Linux).
    assert_eq!(longest(&["-x", "strsize=600"]), 414);
    assert_eq!(longest(&[]), 255);
    assert_eq!(longest(&["-x", "strsize=100"]), 99);
}

/// `raise()` sends its signal to the thread that fired the probe (the firing still prints its
/// probe line, as DTrace's raise records), and `stop()` stops the process: `sleep 30` dies of
/// SIGUSR1 at its first sleep, and a stopped one is reported by its state.
/// Calls ioctl() until SIGUSR1 arrives, and says whether it had arrived when the first call
/// returned.
const RAISED: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>
static volatile sig_atomic_t got;
static void on_usr1(int sig) { (void)sig; got = 1; }
int main(void) {
    signal(SIGUSR1, on_usr1);
    ioctl(-1, 0x5401, 0);
    if (got) {
        printf("signalled before the first call returned\n");
        return 0;
    }
    for (int i = 0; i < 30000 && !got; i++) {
        ioctl(-1, 0x5401, 0);
        usleep(1000);
    }
    printf(got ? "signalled later\n" : "never signalled\n");
    return 0;
}
"#;

#[test]
fn raise_at_the_probe_reaches_the_thread_before_it_returns_to_user_space() {
    let t = "raise_at_the_probe";
    if !kernel_ok(t) || !common::have_gcc(t) {
        return;
    }
    let exe = common::compile_c(&common::test_dir("raised"), "raised", RAISED, &[]);
    let exe = exe.display().to_string();
    let d = "syscall::ioctl:entry /pid == $target && arg1 == 0x5401/ { raise(SIGUSR1); }";
    let (rc, out, err) = dtrace(&["-wv", "-n", d, "-c", &exe]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.contains(
            "clause 1 (syscall::ioctl:entry): raise() and stop() are sent in the kernel at 1 probe"
        ),
        "{err}"
    );
    assert!(
        out.contains("signalled before the first call returned"),
        "{out}"
    );
    // Each firing that raised still prints its probe line.
    assert!(out.contains("ioctl:entry"), "{out}");
    // A clause that runs whole at the probe, its thread-local there, sends it there too.
    let d = "syscall::ioctl:entry /pid == $target && !self->done/ { raise(SIGUSR1); \
        self->done = 1; }";
    let (rc, out, err) = dtrace(&["-wv", "-n", d, "-c", &exe]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.contains(
            "runs whole in the kernel at 1 probe (variables self->done live in the kernel)"
        ) && err.contains("raise() and stop() are sent in the kernel at 1 probe"),
        "{err}"
    );
    assert!(
        out.contains("signalled before the first call returned"),
        "{out}"
    );
    let lines = out.lines().filter(|l| l.trim().ends_with("ioctl:entry"));
    assert_eq!(lines.count(), 1, "{out}");
    // A predicate only dtrace decides keeps the signal there: it arrives, later.
    let d =
        "syscall::ioctl:entry /pid == $target && strtoll(json(lltostr(arg1), \"\")) == 21505 && !self->done/ \
        { raise(SIGUSR1); self->done = 1; }";
    let (rc, out, err) = dtrace(&["-wv", "-n", d, "-c", &exe]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.contains("raise() and stop() are sent in the kernel at 0 probes, in dtrace at 1 probe"),
        "{err}"
    );
    assert!(out.contains("signalled"), "{out}");
    assert!(!out.contains("never signalled"), "{out}");
}

/// A clause calling `raise()` that dtrace runs is reported with what keeps it there, and its
/// signal is still sent: its variables stay in dtrace (BEGIN, which fires in dtrace, writes its
/// thread-local), or another clause at the probe runs in dtrace (records keep the clauses'
/// order). `-v` never falls back to a reason that does not apply.
#[test]
fn raise_run_in_dtrace_is_reported_with_the_real_reason() {
    let t = "raise_run_in_dtrace_is_reported_with_the_real_reason";
    if !kernel_ok(t) || !common::have_gcc(t) {
        return;
    }
    let exe = common::compile_c(&common::test_dir("raised_why"), "raised", RAISED, &[]);
    let exe = exe.display().to_string();
    let d = "BEGIN { self->done = 0; } \
        syscall::ioctl:entry /pid == $target && !self->done/ { raise(SIGUSR1); self->done = 1; }";
    let (rc, out, err) = dtrace(&["-wqv", "-n", d, "-c", &exe]);
    assert_eq!(rc, 0, "{err}");
    let lines = common::clause_lines(&err, 1);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("records are built in dtrace (at syscall:")
                && l.contains(
                    "ioctl:entry: its variables stay in dtrace: clause :::BEGIN runs in dtrace"
                )),
        "{err}"
    );
    assert!(
        lines.iter().any(|l| l.contains(
            "raise() and stop() are sent in the kernel at 0 probes, in dtrace at 1 probe"
        )),
        "{err}"
    );
    assert!(!err.contains("planned after"), "{err}");
    assert!(out.contains("signalled"), "{out}");
    assert!(!out.contains("never signalled"), "{out}");
    // Clause 1 could run at the probe, but clause 2 after it runs in dtrace.
    let d = "BEGIN { self->n = 0; } \
        syscall::ioctl:entry /pid == $target/ { raise(SIGUSR1); } \
        syscall::ioctl:entry /pid == $target/ { self->n++; }";
    let (rc, out, err) = dtrace(&["-wqv", "-n", d, "-c", &exe]);
    assert_eq!(rc, 0, "{err}");
    let lines = common::clause_lines(&err, 1);
    assert!(
        lines.iter().any(|l| l.contains(
            "raise() and stop() are sent in the kernel at 0 probes, in dtrace at 1 probe (at \
             syscall:"
        ) && l.contains("another clause at the probe runs in dtrace")),
        "{err}"
    );
    assert!(!err.contains("planned after"), "{err}");
    assert!(out.contains("signalled"), "{out}");
    assert!(!out.contains("never signalled"), "{out}");
}

#[test]
fn raise_and_stop_reach_the_thread_that_fired() {
    if !kernel_ok("raise_and_stop") {
        return;
    }
    let (rc, out, err) = dtrace(&[
        "-w",
        "-n",
        "syscall::clock_nanosleep:entry,syscall::nanosleep:entry /pid == $target/ \
         { raise(SIGUSR1); }",
        "-c",
        "sleep 30",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("terminated by SIGUSR1"), "{err}");
    assert!(out.contains("nanosleep:entry"), "{out}");
    // Without -w, raise() is refused as DTrace refuses destructive actions.
    let (rc, _, err) = dtrace(&["-n", "BEGIN { raise(SIGUSR1); }"]);
    assert_ne!(rc, 0);
    assert!(err.contains("Destructive actions not allowed"), "{err}");

    // stop(): `yes` stops at its next write and stays stopped after dtrace has gone.
    let mut child = std::process::Command::new("yes")
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("yes");
    let pid = child.id().to_string();
    let (rc, _, err) = dtrace(&[
        "-w",
        "-q",
        "-n",
        &format!("syscall::write:entry /pid == {pid}/ {{ stop(); exit(0); }}"),
    ]);
    let state = common::process_state(child.id());
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(rc, 0, "{err}");
    assert_eq!(state, Some('T'), "{pid}");
}

/// A clause whose only action is `stop()` records nothing (the framework writes no record for
/// it): its program at the probe reserved a header-only record and wrote past it, so the kernel
/// refused it and the stop came late, from dtrace.
#[test]
fn a_clause_of_stop_alone_stops_at_the_probe() {
    if !kernel_ok("a_clause_of_stop_alone") {
        return;
    }
    let mut child = std::process::Command::new("yes")
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("yes");
    let pid = child.id().to_string();
    let (rc, out, err) = dtrace(&[
        "-wv",
        "-n",
        &format!("syscall::write:entry /pid == {pid}/ {{ stop(); }} tick-1s {{ exit(0); }}"),
    ]);
    // The stop takes effect as the write returns to user mode, which on a slow machine (the
    // 6.1 guest) may come after dtrace has gone: the state is looked at for a while.
    let mut state = None;
    for _ in 0..100 {
        state = common::process_state(child.id());
        if state == Some('T') {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.contains(
            "clause 1 (syscall::write:entry): raise() and stop() are sent in the kernel at 1 probe"
        ),
        "{err}"
    );
    assert!(!err.contains("refused"), "{err}");
    // No probe line: the clause records nothing.
    assert!(
        !out.lines().any(|l| l.trim_end().ends_with("write:entry")),
        "{out}"
    );
    assert_eq!(state, Some('T'), "{pid}");
}

/// A clause run in dtrace whose `raise()` the probe sends reads `epid` there from the map of
/// EPIDs (`capture::filter::EpidAt`): predicated on its own EPID (2: the clauses' order), its
/// SIGUSR2 ends `dd` at its first write, before it writes again (dtrace sending it would be
/// late); predicated on another's, nothing is sent.
#[test]
fn raise_predicated_on_epid_is_sent_at_the_probe() {
    let t = "raise_predicated_on_epid_is_sent_at_the_probe";
    if !kernel_ok(t) || !common::have_dd(t) {
        return;
    }
    for (epid, writes) in [(2, "writes 1"), (3, "writes 5")] {
        let script = format!(
            "syscall::write:entry /pid == $target/ {{ @w = count(); }} \
             syscall::write:entry /pid == $target && epid == {epid}/ {{ raise(12); }} \
             END {{ printa(\"writes %@d\\n\", @w); }}"
        );
        let (rc, out, err) = common::dtrace_with_env(
            &[("DTRACE_KERNEL_RECORDS", "0")],
            &[
                "-qvw",
                "-n",
                &script,
                "-c",
                "dd if=/dev/zero of=/dev/null bs=1 count=5 status=none",
            ],
        );
        assert_eq!(rc, 0, "{err}");
        assert!(
            err.contains(
                "clause 2 (syscall::write:entry): raise() and stop() are sent in the kernel \
                 at 1 probe"
            ),
            "{err}"
        );
        assert!(out.contains(writes), "{epid}: {out}");
    }
}
