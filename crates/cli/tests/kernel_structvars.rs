//! Struct-typed D variables in the kernel: a thread-local struct, a global struct and a global
//! associative array of structs, their integer, array and string members stored and read back
//! at other probes, run whole in the kernel (`-v` says so) and print exactly what the
//! interpreter prints with every kernel path off. A struct variable a `BEGIN` or `END` clause
//! uses stays in dtrace with the clauses that use it, and `-v` says why.

mod common;
use common::same_with_kernel_paths_off as same_both_ways;
use common::{clause_lines, dtrace_with_env, have_dd, kernel_ok, DD_WRITES};

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
fn a_struct_variable_an_end_clause_reads_stays_in_dtrace() {
    let t = "a_struct_variable_an_end_clause_reads_stays_in_dtrace";
    if !kernel_ok(t) || !have_dd(t) {
        return;
    }
    let script = format!(
        "{DECLS} syscall::write:entry /pid == $target/ {{ g.n = g.n + 1; }} \
         END {{ printf(\"g %d\\n\", g.n); }}"
    );
    let (rc, out, err) = dtrace_with_env(&[], &["-qv", "-n", &script, "-c", DD_WRITES]);
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("g 4"), "{out}");
    assert!(
        !clause_lines(&err, 1)
            .iter()
            .any(|l| l.contains("runs whole in the kernel")),
        "{err}"
    );
}
