//! `link_ntop()` at the probe, checked against the interpreter: the text of
//! kernel memory and of alloca() memory, its length, cut at a small `strsize`, a fault on an
//! unreadable address, and a hardware type the translator does not take staying in dtrace.

use super::alloca::agree_clause;
use super::strbuild::agree;
use super::*;
use dtrace_dif::vm::subr::strfn;

/// Where the fake kernel memory holding the bytes starts.
const KADDR: u64 = 0xffff_8000_0000_3000;

/// Pseudo-random bytes, 20 at a time, after two fixed patterns.
fn byte_cases() -> Vec<[u8; 20]> {
    let mut v = vec![[0u8; 20], [0xff; 20]];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..12 {
        let mut b = [0u8; 20];
        for c in &mut b {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *c = (x >> 24) as u8;
        }
        v.push(b);
    }
    v
}

fn probe(cases: &[[u8; 20]]) -> Probe {
    let mut p = Probe::new();
    p.kernel = vec![(KADDR, cases.iter().flatten().copied().collect())];
    p
}

/// Checks that `s` is `want` both ways, and that both ways agree at small `strsize`s.
fn text_agrees(s: &str, want: &str, p: &Probe) {
    assert_eq!(
        agree(&format!(r#"{s} == "{want}""#), p, 255),
        Some(1),
        "{s}"
    );
    assert_eq!(
        agree(&format!("strlen({s})"), p, 255),
        Some(want.len() as u64),
        "{s}"
    );
    for strsize in [8, 3, 1] {
        agree(&format!("strlen({s})"), p, strsize);
        let cut = &want[..strsize.min(want.len())];
        agree(&format!(r#"{s} == "{cut}""#), p, strsize);
    }
}

#[test]
fn link_ntop_builds_the_interpreters_text() {
    let cases = byte_cases();
    let p = probe(&cases);
    for (i, b) in cases.iter().enumerate() {
        let at = KADDR + 20 * i as u64;
        let eth = String::from_utf8(strfn::link_ntop(&b[..6])).unwrap();
        text_agrees(
            &format!("link_ntop(ARPHRD_ETHER, (void *){at:#x})"),
            &eth,
            &p,
        );
        let ib = String::from_utf8(strfn::link_ntop(b)).unwrap();
        text_agrees(
            &format!("link_ntop(ARPHRD_INFINIBAND, (void *){at:#x})"),
            &ib,
            &p,
        );
    }
}

#[test]
fn link_ntop_faults_as_the_interpreter() {
    let p = probe(&byte_cases()[..1]);
    for s in [
        "link_ntop(ARPHRD_ETHER, (void *)0x10)",
        // Past the readable bytes.
        &format!("link_ntop(ARPHRD_ETHER, (void *){:#x})", KADDR + 16),
        &format!("link_ntop(ARPHRD_INFINIBAND, (void *){:#x})", KADDR + 1),
    ] {
        assert_eq!(agree(&format!("strlen({s})"), &p, 255), None, "{s}");
    }
    let obj = predicate(&clause("strlen(link_ntop(arg0, (void *)arg1)) == 1"));
    let e = translate(&obj, &p, 256, FRAME).unwrap_err().to_string();
    assert!(e.contains("a hardware type other than a constant"), "{e}");
}

#[test]
fn link_ntop_of_alloca_memory() {
    let mut p = Probe::new();
    p.args[0] = 0xffff_8000_0000_1000;
    for body in [
        "this->p = (char *)alloca(20); bcopy((void *)arg0, this->p, 20); \
         trace(link_ntop(ARPHRD_ETHER, this->p)); \
         trace(link_ntop(ARPHRD_INFINIBAND, this->p + 0));",
        // Past the allocation.
        "this->p = (char *)alloca(8); trace(link_ntop(ARPHRD_INFINIBAND, this->p));",
        "this->p = (char *)alloca(8); trace(link_ntop(ARPHRD_ETHER, this->p + 4));",
    ] {
        agree_clause(body, &p, 1 << 20);
    }
}
