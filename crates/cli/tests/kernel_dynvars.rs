//! Associative arrays in the kernel: global (`a[k1, k2]`) and thread-local (`self->a[k]`) arrays
//! with integer keys and values that only clauses running whole at the probe use live in the
//! kernel's dynamic variable map, keyed by the tuple, and print what they print when they live in
//! dtrace (DTRACE_KERNEL_VARIABLES=0): a missing element reads 0, zero deletes, and a full space
//! (`dynvarsize`) drops the store, ends the clause and is reported as DTrace reports dynamic
//! variable drops, the same number both ways.

mod common;
use common::{clause_lines, have_gcc, kernel_ok};

const SWITCH: &str = "DTRACE_KERNEL_VARIABLES";

/// Whether clauses `whole` ran whole in the kernel with variables there, in `-v` output `err`.
fn ran_whole(err: &str, whole: &[usize]) -> bool {
    whole.iter().all(|&n| {
        clause_lines(err, n)
            .iter()
            .any(|l| l.contains("runs whole in the kernel at 1 probe (variables"))
    })
}

#[test]
fn associative_arrays_of_integers_run_in_the_kernel_as_in_dtrace() {
    let t = "associative_arrays_of_integers_run_in_the_kernel_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kdynvars-arrays");
    let cmd = format!("{} 600", w.display());
    // A thread-local array from entry to return (its element freed by a zero, written 0 by the
    // zero-sized write), a global array keyed by two integers, negative keys, a missing element.
    let script = "syscall::write:entry /pid == $target/ { self->sz[arg0] = arg2; \
        n[arg2 % 7, arg2 % 3]++; last[-1, arg2 % 5] = arg2; } \
        syscall::write:return /self->sz[3]/ { @s = sum(self->sz[3]); \
        @m[self->sz[3] % 4] = count(); self->sz[3] = 0; } \
        syscall::write:return /pid == $target && !self->sz[3]/ { @z = count(); } \
        syscall::read:entry /pid == $target/ { @n1 = max(n[1, 1]); @n6 = max(n[6, 2]); \
        @none = max(n[100, 0] + 1); @l[last[-1, 4] % 10] = count(); n[1, 1] = 0; \
        @gone = max(n[1, 1]); }";
    let out = common::same_both_ways(SWITCH, script, &[], &cmd, &|err: &str| {
        ran_whole(err, &[1, 2, 3, 4])
    });
    assert!(out.contains("89700"), "{out}");
    let (_, _, err) = common::dtrace_way(SWITCH, true, &["-qv", "-n", script, "-c", &cmd]);
    assert!(
        clause_lines(&err, 1)
            .iter()
            .any(|l| l.contains("(variables self->sz, n, last live in the kernel)")),
        "{err}"
    );
}

#[test]
fn string_keys_compare_by_their_bytes_in_the_kernel_as_in_dtrace() {
    let t = "string_keys_compare_by_their_bytes_in_the_kernel_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kdynvars-strings");
    let cmd = format!("{} 300", w.display());
    // execname and string constants as keys, mixed with integers; a constant that is a prefix
    // of execname is another key, so is a longer one.
    let script = "syscall::write:entry /pid == $target/ { a[execname, arg2 % 3]++; \
        s[\"const\"]++; self->e[execname] = arg2; } \
        syscall::write:return /pid == $target/ { @n[a[\"writer\", 1]] = count(); \
        @c = max(s[\"const\"]); @e = sum(self->e[\"writer\"]); \
        @none = max(a[\"write\", 1] + a[\"writers\", 1] + a[\"\", 0] + 1); }";
    let out = common::same_both_ways(SWITCH, script, &[], &cmd, &|err: &str| {
        ran_whole(err, &[1, 2])
    });
    assert!(out.contains("44850") && out.contains(" 300\n"), "{out}");
    // -x strsize cuts execname in a key, as the interpreter cuts it: "writer" keeps "writ".
    let cut = "syscall::write:entry /pid == $target/ { a[execname]++; } \
        syscall::write:return /pid == $target/ { @[a[\"writ\"], a[\"wri\"]] = count(); }";
    let out = common::same_both_ways(SWITCH, cut, &["-x", "strsize=4"], &cmd, &|err: &str| {
        ran_whole(err, &[1, 2])
    });
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["300", "0", "1"]),
        "{out}"
    );
    // A constant longer than that is no key the kernel keeps: the clauses stay in dtrace.
    let (rc, _, err) = common::dtrace_way(
        SWITCH,
        true,
        &["-qv", "-x", "strsize=4", "-n", script, "-c", &cmd],
    );
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("a string key longer than strsize"), "{err}");
}

#[test]
fn a_full_space_drops_the_store_and_ends_the_clause_the_same_both_ways() {
    let t = "a_full_space_drops_the_store_and_ends_the_clause_the_same_both_ways";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kdynvars-drops");
    let cmd = format!("{} 300", w.display());
    // A few elements fit: new keys past them are dropped, and the clause's count after the
    // store does not run; an element stored before the space filled is updated in place.
    let script = "syscall::write:entry /pid == $target/ { a[arg2, 1] = arg2 + 1; @w = count(); } \
        syscall::read:entry /pid == $target/ { a[0, 1] = a[0, 1] + 1; self->r[arg2] = 1; \
        @r = count(); } \
        syscall::read:return /pid == $target/ { @z = max(a[0, 1]); }";
    let args = ["-q", "-x", "dynvarsize=256", "-n", script, "-c", &cmd];
    let (rc, kout, kerr) = common::dtrace_way(SWITCH, true, &args);
    assert_eq!(rc, 0, "{kerr}");
    let (rc, iout, ierr) = common::dtrace_way(SWITCH, false, &args);
    assert_eq!(rc, 0, "{ierr}");
    assert_eq!(kout, iout);
    let drops = common::reported_drops(&kerr, "dynamic variable");
    assert!(drops > 0, "{kerr}");
    assert_eq!(
        drops,
        common::reported_drops(&ierr, "dynamic variable"),
        "{kerr}\n{ierr}"
    );
    let mut v = vec!["-qv"];
    v.extend_from_slice(&args[1..]);
    let (_, _, err) = common::dtrace_way(SWITCH, true, &v);
    assert!(ran_whole(&err, &[1, 2, 3]), "{err}");
}
