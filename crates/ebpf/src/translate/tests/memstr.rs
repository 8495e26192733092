//! `memstr()` at the probe, checked against the interpreter: kernel memory and alloca() memory
//! (a `copyin()`'s copy) made strings with their NULs replaced, every size up to past the
//! readable bytes (the interpreter's fault at the address), `c` of 0, and at a `strsize` the
//! bytes overflow; sizes it does not take stay in dtrace saying why.

use super::alloca::agree_clause;
use super::strbuild::agree;
use super::*;

/// Where [`probe`]'s kernel bytes are: `kernel\0string\0\0x`.
const KADDR: u64 = 0xffff_8000_0000_2000;

fn probe() -> Probe {
    let mut p = Probe::new();
    p.kernel.push((KADDR, b"kernel\0string\0\0x".to_vec()));
    p.args[1] = 0x7fff_0000_1000;
    p.args[3] = u64::from(b'-');
    p
}

#[test]
fn memstr_of_kernel_memory_builds_the_interpreters_string() {
    let p = probe();
    for size in 2..=20u64 {
        for c in ["' '", "0", "arg3", "'x' + 256"] {
            let m = format!("memstr((void *){KADDR:#x}, {c}, {size})");
            for strsize in [255, 8, 3, 1] {
                agree(&format!("strlen({m})"), &p, strsize);
                for want in [
                    "kernel string",
                    "kernel",
                    "kernel string  x",
                    "kernel-string--x",
                ] {
                    for cut in [want.len(), want.len().min(strsize), 3] {
                        agree(
                            &format!(r#"{m} == "{}""#, &want[..cut.min(want.len())]),
                            &p,
                            strsize,
                        );
                    }
                }
            }
        }
    }
    assert_eq!(
        agree(
            &format!(r#"memstr((void *){KADDR:#x}, ' ', 17) == "kernel string  x""#),
            &p,
            255
        ),
        Some(1)
    );
    assert_eq!(
        agree(
            &format!(r#"memstr((void *){KADDR:#x}, arg3, 17) == "kernel-string--x""#),
            &p,
            255
        ),
        Some(1)
    );
    assert_eq!(
        agree(
            &format!(r#"memstr((void *){KADDR:#x}, 0, 17) == "kernel""#),
            &p,
            255
        ),
        Some(1)
    );
}

#[test]
fn memstr_faults_as_the_interpreter() {
    let p = probe();
    // Past the readable bytes, at an unreadable address, above 4096.
    for m in [
        format!("memstr((void *){KADDR:#x}, ' ', 18)"),
        format!("memstr((void *){KADDR:#x}, ' ', 100)"),
        "memstr((void *)0x10, ' ', 2)".to_string(),
    ] {
        assert_eq!(agree(&format!("strlen({m})"), &p, 255), None, "{m}");
    }
}

#[test]
fn memstr_stays_in_dtrace_for_a_size_it_cannot_take() {
    let p = probe();
    for (m, why) in [
        (
            "memstr((void *)arg0, ' ', arg2)",
            "a size computed at run time of up to 4096 bytes",
        ),
        (
            "memstr((void *)arg0, ' ', arg2 & 0xfff)",
            "a size computed at run time of up to 4095 bytes",
        ),
        (
            "memstr((void *)arg0, ' ', arg2 & 1)",
            "a size of at most 1 computed at run time",
        ),
        ("memstr((void *)arg0, ' ', 0)", "a size of 0"),
        ("memstr((void *)arg0, ' ', 1)", "a size of 1"),
        ("memstr((void *)arg0, ' ', 4000)", "out of string scratch"),
        ("memstr((void *)arg0, ' ', 4097)", "a size above 4096"),
        (
            "memstr(copyin(arg1, 4), ' ', 6)",
            "5 bytes of a copyin() copy of 4",
        ),
    ] {
        let obj = predicate(&clause(&format!("strlen({m}) == 1")));
        let e = translate(&obj, &p, 256, FRAME).unwrap_err().to_string();
        assert!(e.contains(why), "{m}: {e}");
    }
}

#[test]
fn memstr_of_alloca_memory_builds_the_interpreters_string() {
    let mut p = probe();
    p.user.push((0x7fff_0000_1000, b"hello\0world\0".to_vec()));
    for body in [
        "this->a = alloca(1); trace(memstr(copyin(arg1, 12), ' ', 12));",
        "this->a = alloca(1); trace(memstr(copyin(arg1, 12), '.', 7));",
        "this->a = alloca(1); this->p = (char *)copyin(arg1, 12); \
         trace(memstr(this->p + 2, '_', 9));",
        // Past the copy: the interpreter's bounds fault.
        "this->a = alloca(1); this->p = (char *)copyin(arg1, 12); \
         trace(memstr(this->p + 4, '_', 10));",
        "trace(memstr((void *)arg0, ' ', 8));",
        // A copy made without alloca(): in the string scratch.
        "trace(memstr(copyin(arg1, 12), ' ', 13)); trace(memstr(copyin(arg1 + 2, 6), 'x', 5));",
        "this->p = (char *)alloca(1); trace(memstr(copyin(arg1, 12), ' ', 12));",
    ] {
        agree_clause(body, &p, 1 << 20);
    }
}

#[test]
fn memstr_of_a_size_known_only_at_the_probe_builds_the_interpreters_string() {
    let mut p = probe();
    // 0 (NULL), 1 (no bytes), within the bytes, all of them, past them (a fault at the
    // address), and sizes the mask cuts.
    for size in [0, 1, 2, 7, 8, 16, 17, 18, 30, 63, 64, 65, u64::MAX] {
        p.args[2] = size;
        for c in ["' '", "0", "arg3"] {
            let m = format!("memstr((void *){KADDR:#x}, {c}, arg2 & 0x3f)");
            for strsize in [255, 8, 3, 1] {
                agree(&format!("strlen({m})"), &p, strsize);
                agree(&format!("{m} == NULL"), &p, strsize);
                for want in ["kernel string  x", "kernel-string--x", "kernel", "", "ker"] {
                    agree(&format!(r#"{m} == "{want}""#), &p, strsize);
                }
            }
        }
    }
    p.args[2] = 17;
    assert_eq!(
        agree(
            &format!(r#"memstr((void *){KADDR:#x}, arg3, arg2 & 0xff) == "kernel-string--x""#),
            &p,
            255
        ),
        Some(1)
    );
    // NULL at 0, whose string faults where it is read.
    p.args[2] = 0;
    assert_eq!(
        agree(
            &format!("memstr((void *){KADDR:#x}, ' ', arg2 & 0xff) == NULL"),
            &p,
            255
        ),
        Some(1)
    );
    assert_eq!(
        agree(
            &format!("strlen(memstr((void *){KADDR:#x}, ' ', arg2 & 0xff))"),
            &p,
            255
        ),
        None
    );
    // Of alloca() memory: checked as a copy of the bytes read (an invalid size past what was
    // allocated, that many bytes; an invalid address past it, whatever the size).
    p.user.push((0x7fff_0000_1000, b"hello\0world\0".to_vec()));
    for size in [0, 1, 5, 12, 13, 14, 40] {
        p.args[2] = size;
        for body in [
            "this->p = (char *)copyin(arg1, 12); this->a = alloca(1); \
             trace(memstr(this->p, ' ', arg2 & 0xff));",
            "this->p = (char *)copyin(arg1, 12); this->a = alloca(1); \
             trace(memstr(this->p + 4, '_', arg2 & 0x3f));",
            "this->p = (char *)alloca(8); trace(memstr(this->p + 8, '_', arg2 & 0x3f));",
        ] {
            agree_clause(body, &p, 1 << 20);
        }
    }
}
