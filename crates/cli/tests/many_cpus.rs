//! Many CPUs at once (the paper's per-CPU buffers and aggregations, issue 13): sixteen threads of
//! one process, released together, write on every CPU the machine has, and every write is
//! counted, recorded and kept in its thread's variables exactly as if one thread had made them,
//! with the clauses running whole at the probe. `scripts/test` runs these again in a guest of 16
//! CPUs, where no machine of that size is at hand (root, BPF, tracepoints; gcc).

mod common;
use common::{clause_lines, compile_c, dtrace, have_gcc, kernel_ok, test_dir};

/// `argv[1]` threads (64 at most), released together by a barrier, each making `argv[2]`
/// one-byte writes to /dev/null.
const THREADS: &str = r#"
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
static int fd, n;
static pthread_barrier_t go;
static void *run(void *a) {
    char c = 0;
    pthread_barrier_wait(&go);
    for (int i = 0; i < n; i++)
        if (write(fd, &c, 1) != 1)
            exit(1);
    return a;
}
int main(int argc, char **argv) {
    int t = atoi(argv[1]);
    n = atoi(argv[2]);
    fd = open("/dev/null", O_WRONLY);
    pthread_t th[64];
    if (t < 1 || t > 64 || pthread_barrier_init(&go, 0, t))
        return 2;
    for (int i = 0; i < t; i++)
        pthread_create(&th[i], 0, run, 0);
    for (int i = 0; i < t; i++)
        pthread_join(th[i], 0);
    return 0;
}
"#;

const THREAD_COUNT: u64 = 16;

/// The `-c` command: sixteen threads of `writes` writes each.
fn sixteen_threads(tag: &str, writes: u64) -> String {
    let w = compile_c(&test_dir(tag), "threads", THREADS, &["-O2", "-pthread"]);
    format!("{} {THREAD_COUNT} {writes}", w.display())
}

/// The lines of `out` starting with `tag`, split into their words after it.
fn rows(out: &str, tag: &str) -> Vec<Vec<String>> {
    out.lines()
        .filter_map(|l| l.strip_prefix(tag))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// The number a row ends with (0 when it ends otherwise).
fn last_number(r: &[String]) -> u64 {
    r.last().and_then(|c| c.parse().ok()).unwrap_or(0)
}

/// Runs `dtrace args`; asserts it succeeds and reports no drop: (stdout, stderr).
fn traced(args: &[&str]) -> (String, String) {
    let (rc, out, err) = dtrace(args);
    assert_eq!(rc, 0, "{err}");
    assert!(!err.contains("drop"), "{err}");
    (out, err)
}

/// Asserts that `-v`'s stderr says `what` of clause `n` (`runs whole in the kernel`,
/// `aggregations run in the kernel`).
fn in_kernel(err: &str, n: usize, what: &str) {
    assert!(
        clause_lines(err, n).iter().any(|l| l.contains(what)),
        "clause {n}: {err}"
    );
}

/// The keyless count, the `execname` key every thread creates at once as they start together,
/// one key per thread: each holds every write, and the counts by CPU, from more than one CPU
/// where there are several, add up to the same.
#[test]
fn sixteen_threads_writing_at_once_are_counted_exactly_on_every_cpu() {
    let t = "sixteen_threads_writing_at_once_are_counted_exactly_on_every_cpu";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let writes = 20_000u64;
    let cmd = sixteen_threads("cpus-count", writes);
    let (out, err) = traced(&[
        "-qv",
        "-n",
        "syscall::write:entry /pid == $target/ { @ = count(); @n[execname] = count(); \
         @t[tid] = count(); @c[cpu] = count(); }",
        "-n",
        "END { printa(\"all %@d\\n\", @); printa(\"name %s %@d\\n\", @n); \
         printa(\"tid %d %@d\\n\", @t); printa(\"cpu %d %@d\\n\", @c); }",
        "-c",
        &cmd,
    ]);
    in_kernel(&err, 1, "aggregations run in the kernel");
    let total = THREAD_COUNT * writes;
    assert_eq!(rows(&out, "all "), vec![vec![total.to_string()]], "{out}");
    assert_eq!(
        rows(&out, "name "),
        vec![vec!["threads".to_string(), total.to_string()]],
        "{out}"
    );
    let tids = rows(&out, "tid ");
    assert_eq!(tids.len() as u64, THREAD_COUNT, "{out}");
    assert!(tids.iter().all(|r| last_number(r) == writes), "{out}");
    let cpus = rows(&out, "cpu ");
    assert_eq!(
        cpus.iter().map(|r| last_number(r)).sum::<u64>(),
        total,
        "{out}"
    );
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    eprintln!("{t}: writes counted on {} of {online} CPUs", cpus.len());
    assert!(cpus.len() >= online.min(2), "{out}");
}

/// A record built at the probe for every write, from every CPU at once: each thread's are all
/// there, with buffers large enough for them (DTrace's policy drops what does not fit, and says
/// so: none here).
#[test]
fn sixteen_threads_writing_at_once_have_every_record_built_at_the_probe() {
    let t = "sixteen_threads_writing_at_once_have_every_record_built_at_the_probe";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let writes = 2_000u64;
    let cmd = sixteen_threads("cpus-records", writes);
    let (out, err) = traced(&[
        "-qv",
        "-b",
        "16m",
        "-x",
        "switchrate=50hz",
        "-n",
        "syscall::write:entry /pid == $target/ { printf(\"rec %d\\n\", tid); }",
        "-c",
        &cmd,
    ]);
    in_kernel(&err, 1, "runs whole in the kernel");
    let mut per_tid = std::collections::BTreeMap::<String, u64>::new();
    for r in rows(&out, "rec ") {
        *per_tid.entry(r.join(" ")).or_default() += 1;
    }
    assert_eq!(per_tid.len() as u64, THREAD_COUNT, "{per_tid:?}");
    assert!(per_tid.values().all(|&n| n == writes), "{per_tid:?}");
}

/// Thread-local and associative variables kept in the kernel, written from every CPU at once:
/// each thread's `self->n` and its `x[tid]` entry count its own writes, read back at its exit.
#[test]
fn sixteen_threads_writing_at_once_keep_their_own_variables() {
    let t = "sixteen_threads_writing_at_once_keep_their_own_variables";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let writes = 2_000u64;
    let cmd = sixteen_threads("cpus-vars", writes);
    let (out, err) = traced(&[
        "-qv",
        "-n",
        "syscall::write:entry /pid == $target/ { self->n++; x[tid]++; }",
        "-n",
        "syscall::exit:entry /pid == $target && self->n/ { @s[tid] = sum(self->n); \
         @x[tid] = sum(x[tid]); }",
        "-n",
        "END { printa(\"self %d %@d\\n\", @s); printa(\"assoc %d %@d\\n\", @x); }",
        "-c",
        &cmd,
    ]);
    in_kernel(&err, 1, "runs whole in the kernel");
    in_kernel(&err, 2, "runs whole in the kernel");
    for tag in ["self ", "assoc "] {
        let r = rows(&out, tag);
        assert_eq!(r.len() as u64, THREAD_COUNT, "{tag}: {out}");
        assert!(r.iter().all(|r| last_number(r) == writes), "{tag}: {out}");
    }
}
