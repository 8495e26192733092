//! A string indexed as characters (`execname[0]`, `copyinstr(arg1, 8)[4]`, `self->s[1]`) at the
//! probe: in records built there, predicates, aggregation keys, of string variables and of
//! strings built at the probe, run in the kernel (`-v` says so) and print exactly what the
//! interpreter prints with every kernel path off, faults included (a NULL string indexed). An
//! index the kernel does not hold alike stays in dtrace, `-v` saying why, and prints the same.

mod common;
use common::same_with_kernel_paths_off as same_both_ways;
use common::{have_gcc, kernel_ok};

/// The traced program (`kstrindex`): writes "hey yes", then "ab", to /dev/null three times over.
const WRITER: &str = r#"
#include <fcntl.h>
#include <unistd.h>
int main(void) {
    int fd = open("/dev/null", O_WRONLY);
    if (fd < 0)
        return 1;
    for (int r = 0; r < 3; r++) {
        write(fd, "hey yes", 7);
        write(fd, "ab", 2);
    }
    return 0;
}
"#;

fn writer(tag: &str) -> String {
    common::traced_program(tag, "kstrindex", WRITER)
}

/// What `-v` says of a clause run whole at the probe.
const WHOLE: &str = "runs whole in the kernel at 1 probe";
const AGGS: &str = common::AGGS_AT_ONE_PROBE;
const PRINTA: &str = r#"END { printa("%d %@d\n", @); }"#;

#[test]
fn indexed_strings_print_in_records_built_at_the_probe() {
    let t = "indexed_strings_print_in_records_built_at_the_probe";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("ksi-records");
    let script = "syscall::write:entry /pid == $target/ { \
                  printf(\"%d %d %d %d %d %d|\\n\", execname[0], copyinstr(arg1, 8)[4], \
                  copyinstr(arg1)[2], copyinstr(arg1)[200], \"hello\"[1], probefunc[0]); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, WHOLE)]);
    assert_eq!(out.matches("107 121 121 0 101 119|").count(), 3, "{out}");
    assert_eq!(out.matches("107 0 0 0 101 119|").count(), 3, "{out}");
    // The suite's form: the copy stored in a global and indexed, at strsizes that cut it; at
    // 3 the index lies past the copy's storage (the interpreter faults at an address of its
    // own scratch): the clause stays in dtrace, saying why.
    for (strsize, said) in [
        ("256", WHOLE),
        ("12", WHOLE),
        ("5", WHOLE),
        ("3", "index 4 of the string in %r1: past the 3 bytes"),
    ] {
        let script = "syscall::write:entry /pid == $target/ { \
                      printf(\"%s|%s\\n\", (s = copyinstr(arg1, 96))[4] == 'y' ? \"good\" : \
                      \"BAD\", s); }";
        same_both_ways(
            script,
            &["-x", &format!("strsize={strsize}")],
            &cmd,
            &[(1, said)],
        );
    }
}

#[test]
fn an_indexed_string_decides_a_predicate_and_keys_an_aggregation_in_the_kernel() {
    let t = "an_indexed_string_decides_a_predicate_and_keys_an_aggregation_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("ksi-aggs");
    let script = format!(
        "syscall::write:entry /pid == $target && copyinstr(arg1)[4] == 'y'/ {{ \
         @[copyinstr(arg1)[arg0 & 1]] = count(); }} {PRINTA}"
    );
    let out = same_both_ways(&script, &[], &cmd, &[(1, AGGS)]);
    assert!(out.lines().any(|l| l.trim() == "101 3"), "{out}");
    let script = format!(
        "syscall::write:entry /pid == $target/ {{ @[substr(copyinstr(arg1), 1)[1]] = count(); \
         @[toupper(copyinstr(arg1))[0]] = count(); }} {PRINTA}"
    );
    let out = same_both_ways(&script, &[], &cmd, &[(1, AGGS)]);
    for w in ["121 3", "0 3", "72 3", "65 3"] {
        assert!(out.lines().any(|l| l.trim() == w), "{w:?} in {out}");
    }
}

#[test]
fn string_variables_are_indexed_in_the_kernel() {
    let t = "string_variables_are_indexed_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("ksi-vars");
    let script = "self string never; \
                  syscall::write:entry /pid == $target/ { self->s = copyinstr(arg1); \
                  this->t = strjoin(execname, \"!\"); g = lltostr(arg2); \
                  printf(\"%d %d %d|\\n\", this->t[0], g[0], self->s[0]); } \
                  syscall::write:return /self->s != NULL/ { \
                  printf(\"%d\\n\", self->s[0]); self->s = 0; } \
                  syscall::write:return /pid == $target/ { trace(self->never[0]); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, WHOLE), (2, WHOLE), (3, WHOLE)]);
    assert_eq!(out.matches("107 55 104|").count(), 3, "{out}");
    assert_eq!(out.matches("107 50 97|").count(), 3, "{out}");
    // self->never is NULL: indexing it faults at the index, as in DTrace, both ways.
    let (_, _, err) = common::dtrace(&["-q", "-n", script, "-c", &cmd]);
    assert!(
        err.contains("(syscall:vmlinux:write:return): invalid address (0x0)"),
        "{err}"
    );
}

#[test]
fn an_index_past_what_the_kernel_holds_alike_stays_in_dtrace_saying_why() {
    let t = "an_index_past_what_the_kernel_holds_alike_stays_in_dtrace_saying_why";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("ksi-refused");
    for (index, why) in [
        ("execname[1]", "index 1 of the string"),
        ("copyinstr(arg1, 4)[4]", "index 4 of the string"),
        ("copyinstr(arg1)[arg2]", "computed at run time"),
    ] {
        let script = format!("syscall::write:entry /pid == $target/ {{ trace({index}); }}");
        let out = same_both_ways(&script, &[], &cmd, &[(1, why)]);
        assert!(!out.is_empty(), "{out}");
    }
}

#[test]
fn bcopy_of_a_string_into_alloca_memory_runs_in_the_kernel() {
    let t = "bcopy_of_a_string_into_alloca_memory_runs_in_the_kernel";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let cmd = writer("ksi-bcopy");
    let script = "syscall::write:entry /pid == $target/ { this->p = (char *)alloca(16); \
                  bcopy(substr(copyinstr(arg1), 1), this->p, 16); bcopy(\"yo\", this->p + 8, 3); \
                  printf(\"%s|%s|%d\\n\", stringof(this->p), stringof(this->p + 8), \
                  this->p[15]); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, WHOLE)]);
    assert_eq!(out.matches("ey yes|yo|0").count(), 3, "{out}");
    assert_eq!(out.matches("b|yo|0").count(), 3, "{out}");
    // A string variable's first byte; a NULL one faults at address 0, both ways.
    let script = "self string never; syscall::write:entry /pid == $target/ { \
                  self->s = copyinstr(arg1); this->p = (char *)alloca(2); \
                  bcopy(self->s, this->p, 1); printf(\"%s|\\n\", stringof(this->p)); } \
                  syscall::write:return /pid == $target/ { this->q = (char *)alloca(2); \
                  bcopy(self->never, this->q, 1); }";
    let out = same_both_ways(script, &[], &cmd, &[(1, WHOLE), (2, WHOLE)]);
    assert_eq!(out.matches("h|").count(), 3, "{out}");
    let (_, _, err) = common::dtrace(&["-q", "-n", script, "-c", &cmd]);
    assert!(
        err.contains("(syscall:vmlinux:write:return): invalid address (0x0)"),
        "{err}"
    );
    // Past the bytes both sides hold alike: in dtrace, saying why.
    let script = "syscall::write:entry /pid == $target/ { this->p = (char *)alloca(8); \
                  bcopy(\"yo\", this->p, 4); printf(\"%s|\\n\", stringof(this->p)); }";
    same_both_ways(script, &[], &cmd, &[(1, "4 bytes past the 3")]);
}
