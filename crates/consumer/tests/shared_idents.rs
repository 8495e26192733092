//! Programs compiled on one handle share their identifiers, as in DTrace (`dtrace -n ... -n ...`): a
//! `self->` variable set by one program's clause is the one another program's predicate reads, a
//! global keeps one value across programs, and two programs' aggregations stay apart. Runs through
//! the D compiler, the framework and the consumer over a synthetic provider (no kernel needed).

mod synthetic;
use synthetic::{Run, Synthetic};

use dtrace_consumer::handle::ProbeSpec;
use dtrace_framework::FiringContext;

/// Compiles each of `programs` as a `-n` argument (quiet), enables them in order and starts tracing
/// over `syscall::read:entry` and `syscall::read:return`.
fn start(programs: &[&str]) -> Run {
    let sys = Synthetic::new("syscall", &[("", "read", "entry"), ("", "read", "return")]);
    let programs: Vec<(ProbeSpec, &str)> = programs.iter().map(|p| (ProbeSpec::Name, *p)).collect();
    Run::start_programs(vec![sys], &programs, &[], &["quiet"], 1)
}

/// Fires `syscall::read:NAME` in thread `tid` of process 10 at `timestamp`.
fn fire(r: &mut Run, name: &str, tid: u64, timestamp: u64) {
    let ctx = FiringContext {
        pid: 10,
        tid,
        timestamp: Some(timestamp),
        ..Default::default()
    };
    r.fire(&format!("syscall::read:{name}"), ctx);
}

#[test]
fn thread_local_set_by_one_program_is_read_by_the_other() {
    let mut r = start(&[
        "syscall::read:entry { self->t = timestamp; }",
        "syscall::read:return /self->t/ { printf(\"%d %d\\n\", tid, timestamp - self->t); self->t = 0; }",
    ]);
    fire(&mut r, "entry", 7, 1000);
    fire(&mut r, "return", 8, 1500); // another thread: no self->t
    fire(&mut r, "return", 7, 1250);
    fire(&mut r, "return", 7, 1300); // cleared by the return clause
    assert_eq!(r.finish(), "7 250\n");
}

#[test]
fn globals_are_one_variable_and_aggregations_stay_apart() {
    let mut r = start(&[
        "syscall::read:entry { n++; @a[tid] = count(); }",
        "syscall::read:return { @b = sum(n); printf(\"n=%d\\n\", n); }",
    ]);
    fire(&mut r, "entry", 1, 1);
    fire(&mut r, "entry", 2, 2);
    fire(&mut r, "return", 1, 3);
    assert_eq!(
        r.finish(),
        "n=2\n        1                1\n        2                1\n                2\n"
    );
}
