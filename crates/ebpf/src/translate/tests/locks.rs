//! The lock queries at the probe, checked against the interpreter: mutexes held (with flags in
//! the owner word) and free, rwlocks free, read-held, write-held and in between, and a lock that
//! cannot be read.

use super::strbuild::agree;
use super::*;

/// Where the fake kernel memory holding the locks starts.
const KADDR: u64 = 0xffff_8000_0000_4000;

/// The lock words laid 8 bytes apart from [`KADDR`].
const WORDS: [u64; 7] = [
    0,
    0xffff_8880_0123_4500 | 0x1,
    0xffff_8880_0123_4500,
    0x3 << 9,
    0xff,
    (0x1 << 9) | 0xff,
    (0x2 << 9) | 0x100,
];

#[test]
fn lock_queries_answer_as_the_interpreter() {
    let mut p = Probe::new();
    p.kernel = vec![(KADDR, WORDS.iter().flat_map(|w| w.to_le_bytes()).collect())];
    for i in 0..WORDS.len() as u64 {
        let at = KADDR + 8 * i;
        for q in [
            "mutex_owned",
            "mutex_owner",
            "mutex_type_adaptive",
            "mutex_type_spin",
            "rw_read_held",
            "rw_write_held",
            "rw_iswriter",
        ] {
            let want = agree(&format!("(long){q}((void *){at:#x})"), &p, 256);
            assert!(want.is_some(), "{q} of {at:#x} faulted");
        }
    }
    let held = KADDR + 8;
    assert_eq!(
        agree(&format!("mutex_owned((void *){held:#x})"), &p, 256),
        Some(1)
    );
    assert_eq!(
        agree(&format!("(long)mutex_owner((void *){held:#x})"), &p, 256),
        Some(0xffff_8880_0123_4500)
    );
    let read = KADDR + 24;
    assert_eq!(
        agree(&format!("rw_read_held((void *){read:#x})"), &p, 256),
        Some(1)
    );
}

#[test]
fn a_lock_query_of_an_unreadable_lock_faults_as_the_interpreter() {
    let mut p = Probe::new();
    p.kernel = vec![(KADDR, vec![0; 8])];
    for s in [
        "mutex_owned((void *)0xffff800000009000)",
        "mutex_type_spin((void *)0)",
        "rw_iswriter((void *)arg0)",
        // Half of it readable.
        "mutex_owner((void *)0xffff800000004004)",
    ] {
        assert_eq!(agree(&format!("(long){s}"), &p, 256), None, "{s}");
    }
}
