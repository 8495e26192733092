//! `bcopy()` whose source is a string (other than the `copyinstr()` just made, which `alloca`
//! copies itself) into `alloca()` memory, run as a clause both ways (see `alloca`'s tests): the
//! bytes within what the two sides hold alike of each kind of string, a NULL string's fault, and
//! a copy past them kept in dtrace with its reason.

use super::alloca::{agree_clause, Outcome};
use super::*;

/// A probe with "hello" at `arg1` and a 15-character `execname`.
fn probe() -> Probe {
    let mut p = string_probe();
    p.execname = b"abcdefghijklmno".to_vec();
    p
}

#[test]
fn a_string_is_copied_into_alloca_memory_as_the_interpreter_copies_it() {
    let p = probe();
    for body in [
        "this->p = (char *)alloca(8); bcopy(\"abc\", this->p, 4); trace(stringof(this->p));",
        "this->p = (char *)alloca(8); bcopy(\"abc\", this->p, 2); trace(stringof(this->p));",
        "this->p = (char *)alloca(8); bcopy(\"\", this->p, 1); trace(this->p[0]);",
        "this->p = (char *)alloca(8); bcopy(probefunc, this->p, 6); trace(stringof(this->p));",
        "this->p = (char *)alloca(8); bcopy(execname, this->p, 1); trace(this->p[0]); \
         trace(this->p[1]);",
        "this->p = (char *)alloca(16); bcopy(substr(copyinstr(arg1), 1), this->p, 16); \
         trace(stringof(this->p)); trace(this->p[15]);",
        "this->p = (char *)alloca(8); bcopy(toupper(copyinstr(arg1)), this->p, 3); \
         trace(stringof(this->p));",
        "this->p = (char *)alloca(32); bcopy(copyinstr(arg1), this->p + strlen(execname), 8); \
         trace(stringof(this->p + 15));",
        "this->p = (char *)alloca(8); bcopy(strchr(copyinstr(arg1), 'l'), this->p, 1); \
         trace(this->p[0]);",
        // The destination is checked first: too small, it faults before the source is read.
        "this->p = (char *)alloca(2); bcopy(\"abc\", this->p, 4);",
    ] {
        let out = agree_clause(body, &p, 1024);
        assert!(!out.is_empty(), "{body}");
    }
}

#[test]
fn a_null_string_as_the_source_faults_at_address_zero() {
    let out = agree_clause(
        "this->p = (char *)alloca(8); bcopy(strchr(copyinstr(arg1), 'z'), this->p, 1);",
        &probe(),
        1024,
    );
    assert!(
        matches!(out.last(), Some(Outcome::Fault(_, _, 0))),
        "{out:?}"
    );
}
