//! Struct-typed D variables in the kernel: a thread-local struct, a global struct, a global
//! associative array of structs and a thread-local one, their integer, pointer, array and string
//! members stored and read back at other probes (in predicates, as aggregation keys and values,
//! in `printf()`), run whole in the kernel (`-v` says so) and print exactly what the
//! interpreter prints with every kernel path off. A struct global (or an array of structs) a
//! `BEGIN` or `END` clause uses is copied between dtrace and the kernel, its bytes whole.

mod common;
use common::same_with_kernel_paths_off as same_both_ways;
use common::{clause_lines, have_dd, have_gcc, kernel_ok, DD_WRITES};

const DECLS: &str = "struct s { string str; int n; long arr[3]; }; \
    struct s g; self struct s v; struct s c[int];";

#[test]
fn struct_members_stored_at_entry_are_read_at_return_in_the_kernel() {
    let t = "struct_members_stored_at_entry_are_read_at_return_in_the_kernel";
    if !kernel_ok(t) || !have_dd(t) {
        return;
    }
    let script = format!(
        "{DECLS} \
         syscall::write:entry /pid == $target/ {{ self->v.n = arg2; self->v.arr[1] = 7; \
             g.n = g.n + 1; c[1].str = \"dd-write\"; c[1].n = c[1].n + arg2; }} \
         syscall::write:return /self->v.n && c[1].str == \"dd-write\"/ {{ \
             @[self->v.arr[1]] = sum(self->v.n); @g = max(g.n); @c = max(c[1].n); \
             self->v.n = 0; }} \
         END {{ printa(\"dd-write %d %@d\\n\", @); printa(\"g %@d\\n\", @g); \
             printa(\"c %@d\\n\", @c); }}"
    );
    let out = same_both_ways(
        &script,
        &[],
        DD_WRITES,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
        ],
    );
    assert!(out.contains("dd-write 7 1200"), "{out}");
    assert!(out.contains("g 4"), "{out}");
    assert!(out.contains("c 1200"), "{out}");
}

#[test]
fn string_members_key_aggregations_and_are_printed_from_the_kernel() {
    let t = "string_members_key_aggregations_and_are_printed_from_the_kernel";
    if !kernel_ok(t) || !have_dd(t) {
        return;
    }
    let script = format!(
        "{DECLS} \
         syscall::write:entry /pid == $target/ {{ c[arg2].str = \"big\"; c[1].str = \"one\"; \
             c[2].str = c[1].str; }} \
         syscall::write:return /pid == $target/ {{ @[c[300].str, c[2].str] = count(); \
             printf(\"%s-%s\\n\", c[1].str, c[7].str); }} \
         END {{ printa(\"%s %s %@d\\n\", @); }}"
    );
    let out = same_both_ways(
        &script,
        &[],
        DD_WRITES,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
        ],
    );
    assert!(out.contains("big one 4"), "{out}");
    assert_eq!(out.matches("one-\n").count(), 4, "{out}");
}

#[test]
fn a_thread_local_array_of_structs_keeps_a_pointer_and_the_pid() {
    let t = "a_thread_local_array_of_structs_keeps_a_pointer_and_the_pid";
    if !kernel_ok(t) || !have_dd(t) {
        return;
    }
    // As the suite's scalars/tst.selfarray2.d does it, at one process.
    let script = "struct bar { int pid; struct task_struct *curthread; }; \
        self struct bar foo[int]; \
        syscall::write:entry /pid == $target && !self->foo[0].pid/ { \
            self->foo[0].pid = pid; self->foo[0].curthread = curthread; } \
        syscall::write:entry /pid == $target && self->foo[0].pid == pid \
            && self->foo[0].curthread == curthread/ { @ok = count(); } \
        syscall::write:entry /pid == $target && self->foo[0].pid != pid/ { @bad = count(); } \
        END { printa(\"ok %@d\\n\", @ok); printa(\"bad %@d\\n\", @bad); }";
    let out = same_both_ways(
        script,
        &[],
        DD_WRITES,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
            (3, "runs whole in the kernel"),
        ],
    );
    assert!(out.contains("ok 4"), "{out}");
    assert!(!out.contains("bad"), "{out}");
}

#[test]
fn a_struct_clause_local_lives_for_the_firing_in_the_kernel() {
    let t = "a_struct_clause_local_lives_for_the_firing_in_the_kernel";
    if !kernel_ok(t) || !have_dd(t) {
        return;
    }
    // Stored by one clause and read by the next at the same firing; zero again at the next
    // firing before the first clause stores it.
    let script = format!(
        "{DECLS} this struct s t; \
         syscall::write:entry /pid == $target/ {{ @before = max(this->t.n + this->t.arr[2]); \
             this->t.n = arg2; this->t.arr[2] = 5; this->t.str = \"local\"; }} \
         syscall::write:entry /pid == $target && this->t.str == \"local\"/ {{ \
             @[this->t.str] = sum(this->t.n + this->t.arr[2]); }} \
         END {{ printa(\"%s %@d\\n\", @); printa(\"before %@d\\n\", @before); }}"
    );
    let out = same_both_ways(
        &script,
        &[],
        DD_WRITES,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
        ],
    );
    assert!(out.contains("local 1220"), "{out}");
    assert!(out.contains("before 0"), "{out}");
}

#[test]
fn struct_globals_are_copied_for_begin_and_end() {
    let t = "struct_globals_are_copied_for_begin_and_end";
    if !kernel_ok(t) || !have_dd(t) {
        return;
    }
    // BEGIN's values reach the kernel's clauses, and theirs END.
    let script = format!(
        "{DECLS} BEGIN {{ g.n = 10; g.str = \"begun\"; c[5].n = 50; c[5].arr[2] = 2; }} \
         syscall::write:entry /pid == $target/ {{ g.n = g.n + 1; c[5].n = c[5].n + 1; \
             c[6].str = g.str; }} \
         END {{ printf(\"g %d %s c %d %d %s\\n\", g.n, g.str, c[5].n, c[5].arr[2], \
             c[6].str); }}"
    );
    let out = same_both_ways(&script, &[], DD_WRITES, &[(1, "runs whole in the kernel")]);
    assert!(out.contains("g 14 begun c 54 2 begun"), "{out}");
}

#[test]
fn a_full_space_drops_the_creation_and_ends_the_clause_the_same_both_ways() {
    let t = "a_full_space_drops_the_creation_and_ends_the_clause_the_same_both_ways";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let w = common::sized_writer("kstructvars-drops");
    let cmd = format!("{} 300", w.display());
    // A few structs fit: an element loaded for a new key past them is not created, the clause
    // ends before its count; an element created before the space filled is updated in place.
    let script = format!(
        "{DECLS} syscall::write:entry /pid == $target/ {{ c[arg2].n = arg2 + 1; @w = count(); }} \
         syscall::read:entry /pid == $target/ {{ c[0].n = c[0].n + 1; @r = count(); }} \
         syscall::read:return /pid == $target/ {{ @z = max(c[0].n); }}"
    );
    let args = ["-q", "-x", "dynvarsize=2048", "-n", &script, "-c", &cmd];
    let (rc, kout, kerr) = common::dtrace_way("DTRACE_KERNEL_VARIABLES", true, &args);
    assert_eq!(rc, 0, "{kerr}");
    let (rc, iout, ierr) = common::dtrace_way("DTRACE_KERNEL_VARIABLES", false, &args);
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
    let (_, _, err) = common::dtrace_way("DTRACE_KERNEL_VARIABLES", true, &v);
    for n in 1..=3 {
        assert!(
            clause_lines(&err, n)
                .iter()
                .any(|l| l.contains("runs whole in the kernel")),
            "{err}"
        );
    }
}

/// A string member after another, assigned a string that is not a constant (`execname`, a
/// copied-in string): the copy fills the member's `strsize` bytes and no more, so the member
/// after it keeps its value (the interpreter once wrote the NUL past the member, and faulted at
/// a global's end), and the kernel copies the name from its frame.
#[test]
fn a_string_member_assigned_execname_ends_at_its_storage() {
    let t = "a_string_member_assigned_execname_ends_at_its_storage";
    if !kernel_ok(t) || !have_dd(t) {
        return;
    }
    let script = "struct t { int n; string name; int after; }; struct t x; \
         self struct t v; \
         syscall::write:entry /pid == $target/ { x.after = 5; x.n = arg2; x.name = execname; \
             self->v.after = 6; self->v.name = execname; } \
         syscall::write:return /self->v.after/ { @[self->v.name, self->v.after] = count(); \
             self->v.after = 0; } \
         END { printf(\"%s %d %d\\n\", x.name, x.n, x.after); \
             printa(\"%s %d %@d\\n\", @); }";
    let out = same_both_ways(
        script,
        &[],
        DD_WRITES,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
        ],
    );
    assert!(out.contains("dd 300 5\n"), "{out}");
    assert!(out.contains("dd 6 4\n"), "{out}");
}

/// A struct variable assigned whole (`y = x`, `g = self->v`, an array element `c[7] = g`): its
/// bytes are copied in the kernel, string members with them, and read back at another probe
/// and in `END`.
#[test]
fn a_struct_assigned_whole_is_copied_in_the_kernel() {
    let t = "a_struct_assigned_whole_is_copied_in_the_kernel";
    if !kernel_ok(t) || !have_dd(t) {
        return;
    }
    let script = format!(
        "{DECLS} \
         syscall::write:entry /pid == $target/ {{ self->v.n = arg2; self->v.str = execname; \
             self->v.arr[2] = 3; g = self->v; self->v.n = 1; c[7] = g; c[7].n++; }} \
         syscall::write:return /pid == $target/ {{ @[g.str, g.n, g.arr[2], self->v.n] = count(); }} \
         END {{ printa(\"%s %d %d %d %@d\\n\", @); printf(\"end %s %d %s %d\\n\", g.str, g.n, \
             c[7].str, c[7].n); }}"
    );
    let out = same_both_ways(
        &script,
        &[],
        DD_WRITES,
        &[
            (1, "runs whole in the kernel"),
            (2, "runs whole in the kernel"),
        ],
    );
    assert!(out.contains("dd 300 3 1 4\n"), "{out}");
    assert!(out.contains("end dd 300 dd 301\n"), "{out}");
}
