//! `inet_ntoa()`, `inet_ntoa6()`, `inet_ntop()` and `random()` at the probe, checked against the
//! interpreter: the text built from addresses in kernel memory (IPv4, IPv6 with runs of zero
//! groups anywhere, IPv4-mapped and -compatible forms, strict and not), its length, a fault on an
//! unreadable address, and at a `strsize` the text overflows.

use super::strbuild::agree;
use super::*;
use dtrace_dif::vm::subr::strfn;

/// Where the fake kernel memory holding the addresses starts.
const KADDR: u64 = 0xffff_8000_0000_2000;

/// A probe whose kernel memory holds `addrs`, 16 bytes apart from [`KADDR`].
fn inet_probe(addrs: &[[u8; 16]]) -> Probe {
    let mut p = Probe::new();
    p.kernel = vec![(KADDR, addrs.iter().flatten().copied().collect())];
    p
}

/// Addresses whose text takes every rule of DTrace's IPv6 form.
fn v6_cases() -> Vec<[u8; 16]> {
    let from_groups = |g: [u16; 8]| {
        let mut b = [0u8; 16];
        for (i, v) in g.iter().enumerate() {
            b[2 * i..2 * i + 2].copy_from_slice(&v.to_be_bytes());
        }
        b
    };
    let mut v = vec![
        [0u8; 16],
        from_groups([0, 0, 0, 0, 0, 0, 0, 1]),
        from_groups([0, 0, 0, 0, 0, 0, 0, 2]),
        from_groups([0xfe80, 0, 0, 0, 0x1, 0x2ff, 0xfe01, 0x2345]),
        from_groups([0x2001, 0xdb8, 0, 0, 1, 0, 0, 1]),
        from_groups([0x2001, 0xdb8, 0, 1, 0, 0, 0, 1]),
        from_groups([1, 0, 2, 0, 3, 0, 4, 0]),
        from_groups([0, 1, 0x10, 0x100, 0x1000, 0xabcd, 0xffff, 0]),
        from_groups([0xffff; 8]),
        from_groups([0, 0, 0, 0, 0, 0xffff, 0x0a00, 0x0001]),
        from_groups([0, 0, 0, 0, 0, 0xffff, 0xffff, 0xffff]),
        from_groups([0, 0, 0, 0, 0, 0, 0xc0a8, 0x0101]),
        from_groups([0, 0, 0, 0, 0, 0, 0, 0x0100]),
        from_groups([0, 0, 0, 0, 0, 0, 0x0100, 0]),
        from_groups([0, 0, 0, 0, 0, 0xfffe, 0x0a00, 0x0001]),
        from_groups([0, 0, 0, 0, 1, 0xffff, 0x0a00, 0x0001]),
    ];
    // Pseudo-random groups, zero about half the time.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..24 {
        let mut g = [0u16; 8];
        for v in &mut g {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *v = if x & 1 == 0 {
                0
            } else {
                (x >> 8) as u16 >> (x >> 40 & 15)
            };
        }
        v.push(from_groups(g));
    }
    v
}

#[test]
fn inet_ntop_and_ntoa_build_the_interpreters_text() {
    let v4 = [
        [127, 0, 0, 1],
        [0, 0, 0, 0],
        [255, 255, 255, 255],
        [10, 9, 99, 100],
        [192, 168, 1, 254],
    ];
    let addrs: Vec<[u8; 16]> = v4
        .iter()
        .map(|b| {
            let mut a = [0u8; 16];
            a[..4].copy_from_slice(b);
            a
        })
        .collect();
    let p = inet_probe(&addrs);
    for (i, b) in v4.iter().enumerate() {
        let at = KADDR + 16 * i as u64;
        let want = String::from_utf8(strfn::ntoa(b)).unwrap();
        for s in [
            format!("inet_ntoa((ipaddr_t *){at:#x})"),
            format!("inet_ntop(AF_INET, (void *){at:#x})"),
        ] {
            assert_eq!(
                agree(&format!(r#"{s} == "{want}""#), &p, 256),
                Some(1),
                "{s}"
            );
            assert_eq!(
                agree(&format!("strlen({s})"), &p, 256),
                Some(want.len() as u64),
                "{s}"
            );
            // Cut as the interpreter's readers cut it.
            for strsize in [8, 3, 1] {
                agree(&format!("strlen({s})"), &p, strsize);
                agree(
                    &format!(r#"{s} == "{}""#, &want[..strsize.min(want.len())]),
                    &p,
                    strsize,
                );
            }
        }
    }
}

#[test]
fn inet_ntop6_and_ntoa6_build_the_interpreters_text() {
    let cases = v6_cases();
    let p = inet_probe(&cases);
    for (i, b) in cases.iter().enumerate() {
        let at = KADDR + 16 * i as u64;
        for (s, strict) in [
            (format!("inet_ntop(AF_INET6, (void *){at:#x})"), true),
            (format!("inet_ntoa6((void *){at:#x})"), false),
            (format!("inet_ntoa6((void *){at:#x}, 1)"), true),
            (format!("inet_ntoa6((void *){at:#x}, 0)"), false),
        ] {
            let want = String::from_utf8(strfn::ntoa6(b, strict)).unwrap();
            assert_eq!(
                agree(&format!(r#"{s} == "{want}""#), &p, 256),
                Some(1),
                "{s}: {want}"
            );
            assert_eq!(
                agree(&format!("strlen({s})"), &p, 256),
                Some(want.len() as u64),
                "{s}: {want}"
            );
        }
        let s = format!("inet_ntop(AF_INET6, (void *){at:#x})");
        agree(&format!("strlen({s})"), &p, 7);
    }
}

#[test]
fn inet_of_an_unreadable_address_faults_as_the_interpreter() {
    let p = inet_probe(&[[1; 16]]);
    for s in [
        "inet_ntoa((ipaddr_t *)0xffff800000003000)",
        "inet_ntop(AF_INET6, (void *)0xffff800000002008)",
        "inet_ntoa6((void *)arg0)",
        "inet_ntop(AF_INET, (void *)0)",
    ] {
        assert_eq!(agree(&format!("strlen({s})"), &p, 256), None, "{s}");
    }
}

#[test]
fn inet_ntop_of_a_family_not_constant_stays_in_dtrace() {
    let p = inet_probe(&[[1; 16]]);
    let obj = predicate(&clause(
        "inet_ntop(arg0, (void *)0xffff800000002000) == \"\"",
    ));
    let e = translate(&obj, &p, 256, FRAME).unwrap_err();
    assert!(
        e.to_string().contains("inet_ntop(): an address family"),
        "{e}"
    );
}

#[test]
fn random_gives_64_bits() {
    let p = Probe::new();
    let obj = predicate(&clause("random() + 1000"));
    let f = translate(&obj, &p, 256, FRAME).unwrap_or_else(|e| panic!("random(): {e}"));
    assert_reachable(&f.insns);
    // Two calls of the helper, the first the high half.
    let word = u64::from(PRANDOM) << 32 | u64::from(PRANDOM);
    assert_eq!(emulate(&f.insns, &p), word.wrapping_add(1000));
}
