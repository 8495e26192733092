//! The built-ins `epid` and `id` at the probe: records, aggregation keys and predicates of
//! clauses run whole in the kernel read the clause's EPID and the probe's id there (`-v` says
//! the clause runs in the kernel) and print exactly what the interpreter prints with every
//! kernel path off, over several clauses and several probes, system calls' and a process's
//! `pid` probes alike, and so do predicates run alone in the kernel (records built in dtrace).
//! `caller` and `stackdepth` are read at the probe as dtrace reads them from the stacks it
//! captures. `ppid` is read at `proc` probes by clauses run whole there.
mod common;
use common::same_with_kernel_paths_off as same_both_ways;
use common::{have_dd, have_gcc, kernel_ok, DD_WRITES};

const RECORDS: &str = common::RECORDS_AT_ONE_PROBE;
const AGGS: &str = common::AGGS_AT_ONE_PROBE;

/// The distinct values of the first field of `out`'s lines that end with `tail`.
fn firsts(out: &str, tail: &str) -> Vec<String> {
    let mut v: Vec<String> = out
        .lines()
        .filter(|l| l.ends_with(tail))
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn epid_and_id_print_as_the_interpreters_in_records_built_at_the_probe() {
    let t = "epid_and_id_print_as_the_interpreters_in_records_built_at_the_probe";
    if !kernel_ok(t) || !have_dd(t) {
        return;
    }
    let script = "syscall::read:entry,syscall::write:entry /pid == $target/ { \
                  printf(\"%d %d %s a\\n\", epid, id, probefunc); trace(epid); trace(id); \
                  printf(\" b\\n\"); } \
                  syscall::write:entry /pid == $target/ { \
                  printf(\"%d %d %s c\\n\", epid, id, probefunc); }";
    let out = same_both_ways(
        script,
        &[],
        DD_WRITES,
        &[(1, RECORDS), (2, RECORDS), (3, RECORDS)],
    );
    // Three ECBs, three EPIDs; two probes, two ids.
    let mut epids = firsts(&out, " a");
    epids.extend(firsts(&out, " c"));
    epids.sort();
    epids.dedup();
    assert_eq!(epids.len(), 3, "{out}");
    let ids: Vec<&str> = out
        .lines()
        .filter(|l| l.ends_with(" a"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(ids.len(), 2, "{out}");
    assert_eq!(
        out.lines().filter(|l| l.ends_with("write c")).count(),
        4,
        "{out}"
    );
}

#[test]
fn epid_and_id_key_aggregations_and_choose_in_predicates_at_the_probe() {
    let t = "epid_and_id_key_aggregations_and_choose_in_predicates_at_the_probe";
    if !kernel_ok(t) || !have_dd(t) {
        return;
    }
    let script = "syscall::read:entry,syscall::write:entry /pid == $target/ { \
                  @[probefunc, epid, id] = count(); @s[probefunc] = sum(id * 10 + epid); } \
                  syscall::write:entry /pid == $target && epid % 2 == 1/ { @o[epid] = count(); } \
                  END { printa(\"%s %d %d %@d\\n\", @); printa(\"%s %@d\\n\", @s); \
                  printa(\"odd %d %@d\\n\", @o); }";
    let out = same_both_ways(script, &[], DD_WRITES, &[(1, AGGS), (2, AGGS), (3, AGGS)]);
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with("write ") && l.split_whitespace().count() == 4)
            .count(),
        1,
        "{out}"
    );
    assert!(out.lines().any(|l| l.starts_with("odd 3 4")), "{out}");
}

/// The traced program (`kbuiltins`): calls `work()` three times, each writing nothing.
const WORKER: &str = r#"
#include <unistd.h>
__attribute__((noinline)) int work(int n) { return (int)write(1, "", 0) + n; }
int main(void) {
    int s = 0;
    for (int i = 0; i < 3; i++)
        s += work(i);
    return s == 3 ? 0 : 1;
}
"#;

#[test]
fn epid_and_id_at_a_processs_pid_probes_are_those_of_its_probes() {
    let t = "epid_and_id_at_a_processs_pid_probes_are_those_of_its_probes";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = common::traced_program("kbuiltins-pid", "kbuiltins", WORKER);
    let script = "pid$target::work:entry,pid$target::work:return { \
                  printf(\"%d %d %s\\n\", epid, id, probename); } \
                  syscall::write:entry /pid == $target/ { @[epid, id] = count(); } \
                  END { printa(\"%d %d %@d\\n\", @); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, RECORDS), (2, RECORDS), (3, AGGS)]);
    assert_eq!(firsts(&out, " entry").len(), 1, "{out}");
    assert_eq!(firsts(&out, " return").len(), 1, "{out}");
    assert_ne!(firsts(&out, " entry"), firsts(&out, " return"), "{out}");
}

#[test]
fn predicates_run_alone_at_the_probe_read_epid_there() {
    let t = "predicates_run_alone_at_the_probe_read_epid_there";
    if !kernel_ok(t) || !have_dd(t) {
        return;
    }
    // With records built in dtrace, the predicates alone run at the probe, `epid` read from
    // the map dtrace fills once the framework assigned the EPIDs: only the first clause's
    // holds.
    let script = "syscall::write:entry /pid == $target && id > 0 && epid == 1/ { \
                  printf(\"%d %d\\n\", epid, id); } \
                  syscall::write:entry /pid == $target && epid == 1/ { printf(\"two\\n\"); }";
    let args = ["-qv", "-n", script, "-c", DD_WRITES];
    let off = [("DTRACE_KERNEL_RECORDS", "0")];
    let (rc, out, err) = common::dtrace_with_env(&off, &args);
    assert_eq!(rc, 0, "{err}");
    for n in [1, 2] {
        assert!(
            common::clause_lines(&err, n)
                .iter()
                .any(|l| l.ends_with("predicate runs in the kernel at 1 probe")),
            "{err}"
        );
    }
    let (rc, iout, ierr) = common::dtrace_with_env(&common::kernel_paths_off(), &args);
    assert_eq!(rc, 0, "{ierr}");
    assert_eq!(out, iout);
    assert_eq!(
        out.lines().filter(|l| l.starts_with("1 ")).count(),
        4,
        "{out}"
    );
    assert!(!out.contains("two"), "{out}");
}

#[test]
fn caller_and_stackdepth_are_read_at_the_probe_as_dtrace_cuts_its_stacks() {
    let t = "caller_and_stackdepth_are_read_at_the_probe_as_dtrace_cuts_its_stacks";
    if !kernel_ok(t) || !have_dd(t) {
        return;
    }
    // The probe's code takes the stack and cuts the tracing frames by the address ranges of
    // the symbol table dtrace cuts captured stacks with: the same caller (by name) and depth,
    // in a key, a record and a predicate, several times in one clause.
    let script = "syscall::write:entry /pid == $target && stackdepth > 0/ { \
                  @[caller, stackdepth] = count(); printf(\"%a %d\\n\", caller, stackdepth); } \
                  END { printa(\"%a %d %@d\\n\", @); }";
    let out = same_both_ways(script, &[], DD_WRITES, &[(1, RECORDS), (1, AGGS)]);
    let printed: Vec<&str> = out.lines().filter(|l| l.contains('`')).collect();
    assert_eq!(printed.len(), 5, "{out}");
    // The caller is the probed code, not the tracing machinery.
    assert!(
        printed
            .iter()
            .all(|l| !l.contains("bpf") && !l.contains("perf_")),
        "{out}"
    );
    assert!(out.lines().any(|l| l.ends_with(" 4")), "{out}");
    // A sampled probe's stack is not cut: its second frame is the caller.
    let script = "profile-997 /stackdepth > 0/ { @[caller != 0] = count(); } \
                  tick-200ms { exit(0); }";
    let (rc, _, err) = common::dtrace(&["-qv", "-n", script]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        common::clause_lines(&err, 1)
            .iter()
            .any(|l| l.contains(AGGS)),
        "{err}"
    );
}

#[test]
fn caller_and_stackdepth_at_fbt_probes_are_those_of_dtrace() {
    let t = "caller_and_stackdepth_at_fbt_probes_are_those_of_dtrace";
    if !kernel_ok(t)
        || !have_dd(t)
        || !dtrace_testkit::kernel_has(dtrace_testkit::KernelFeature::Kprobes, t)
    {
        return;
    }
    // fentry's trampoline or the kprobe's handler sits above the probed function: cut alike.
    let script = "fbt::vfs_write:entry /pid == $target/ { \
                  @[caller, stackdepth] = count(); } \
                  END { printa(\"%a %d %@d\\n\", @); }";
    let out = same_both_ways(script, &[], DD_WRITES, &[(1, AGGS)]);
    assert!(
        out.lines()
            .any(|l| l.contains("ksys_write") && l.ends_with(" 4")),
        "{out}"
    );
}

#[test]
fn ppid_at_a_proc_probe_runs_whole_in_the_kernel() {
    let t = "ppid_at_a_proc_probe_runs_whole_in_the_kernel";
    if !kernel_ok(t) {
        return;
    }
    // Planning checks the clauses with the task_struct offsets the probes' programs get, so a
    // clause reading `ppid` with thread-locals runs whole at the probe (it once stayed in dtrace,
    // and its thread-locals with it).
    let script = "proc:::exec-success /ppid == $target/ { self->e = 1; } \
                  syscall::exit_group:entry /self->e/ { @[ppid == $target, execname] = count(); }";
    let whole = "runs whole in the kernel at 1 probe";
    let out = same_both_ways(
        script,
        &[],
        "sh -c /bin/true;/bin/true",
        &[(1, whole), (2, whole)],
    );
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().take(2).eq(["1", "true"])),
        "{out}"
    );
}
