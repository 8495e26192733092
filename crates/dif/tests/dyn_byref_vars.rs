//! By-reference dynamic variables (thread-locals and associative-array elements that are structs or
//! arrays) live in the dynamic variable space: loads return the address of their storage, stores
//! through it persist; the cleaner and the three kinds of dynamic-variable drops.

mod common;
use common::{kind, H};
use dtrace_dif::vm::{FaultKind, VmOptions, DYN_BASE};

/// `self struct { int x; long y; } s` (16 bytes) and `struct ... a[int]`.
const DECLS: &str = ".var s 0x500 scl tls r/w ref 16\n.var a 0x501 arr glb r/w ref 16\n.var n 0x502 arr glb r/w int 8\n";

fn src(body: &str) -> String {
    format!("{DECLS}{body}")
}

/// What the compiler emits for a by-reference `self->s` access: create it zero-filled when missing.
const LOAD_S: &str =
    "ldts s, %r1\ntst %r1\nbne 6\nsetx 16, %r1\nallocs %r1, %r1\nstts %r1, s\nldts s, %r1\n";

#[test]
fn missing_variables_load_as_null_and_creation_gives_an_address() {
    let mut h = H::new();
    assert_eq!(h.run(&src("ldts s, %r1\nret %r1\n")), Ok(0));
    let a = h.run(&src(&format!("{LOAD_S}ret %r1\n"))).unwrap();
    assert!(a.wrapping_sub(DYN_BASE) < 1 << 44, "{a:#x}");
    assert_eq!(h.state.dynvars.len(), 1);
}

#[test]
fn member_stores_persist_across_firings_and_read_back_whole() {
    let mut h = H::new();
    // self->s.x = 7; self->s.y = -2;
    h.run(&src(&format!(
        "{LOAD_S}setx 7, %r2\nstw %r2, [%r1]\nsetx 8, %r3\nadd %r1, %r3, %r1\nsetx -2, %r2\nstx %r2, [%r1]\nret %r0\n"
    )))
    .unwrap();
    h.state.dynvars.clean();
    h.m.begin_firing();
    assert_eq!(
        h.run(&src(&format!("{LOAD_S}ldsw [%r1], %r2\nret %r2\n"))),
        Ok(7)
    );
    // trace(self->s): the result address is readable after the run.
    let o = H::obj(&format!(".rtype ref 16\n{}", src("ldts s, %r1\nret %r1\n")));
    let addr = h.run_obj(&o).unwrap();
    let b = h.m.read_result(&o, &mut h.mem, addr, 16).unwrap();
    assert_eq!(&b[..4], &7u32.to_le_bytes());
    assert_eq!(&b[8..], &(-2i64).to_le_bytes());
}

#[test]
fn whole_values_are_copied_and_elements_are_separate() {
    let mut h = H::new();
    // a[1] = self->s (a copy), then self->s.x = 9: a[1].x stays 7.
    h.run(&src(&format!("{LOAD_S}setx 7, %r2\nstw %r2, [%r1]\nflushts\nsetx 1, %r3\npushtv int, %r3\nstgaa %r1, a\nsetx 9, %r2\nstw %r2, [%r1]\nret %r0\n")))
        .unwrap();
    let a1 = "flushts\nsetx 1, %r3\npushtv int, %r3\nldgaa a, %r1\nldsw [%r1], %r2\nret %r2\n";
    assert_eq!(h.run(&src(a1)), Ok(7));
    assert_eq!(
        h.run(&src(&format!("{LOAD_S}ldsw [%r1], %r2\nret %r2\n"))),
        Ok(9)
    );
    // a[2] does not exist.
    assert_eq!(
        h.run(&src(
            "flushts\nsetx 2, %r3\npushtv int, %r3\nldgaa a, %r1\nret %r1\n"
        )),
        Ok(0)
    );
}

#[test]
fn stores_are_bounds_checked_and_freed_storage_faults() {
    let mut h = H::new();
    let past = format!("{LOAD_S}setx 16, %r2\nadd %r1, %r2, %r1\nstb %r2, [%r1]\nret %r0\n");
    assert_eq!(kind(h.run(&src(&past))), FaultKind::BadAddr);
    let straddle = format!("{LOAD_S}setx 12, %r2\nadd %r1, %r2, %r1\nstx %r2, [%r1]\nret %r0\n");
    assert_eq!(kind(h.run(&src(&straddle))), FaultKind::BadAddr);
    let mis = format!("{LOAD_S}setx 2, %r2\nadd %r1, %r2, %r1\nstw %r2, [%r1]\nret %r0\n");
    assert_eq!(kind(h.run(&src(&mis))), FaultKind::BadAlign);
    // Freed (stts 0) while its address is held: the address no longer reaches any storage.
    let freed = format!("{LOAD_S}stts %r0, s\nsetx 1, %r2\nstb %r2, [%r1]\nret %r0\n");
    assert_eq!(kind(h.run(&src(&freed))), FaultKind::BadAddr);
    assert!(h.state.dynvars.is_empty());
    // An address in the region that names no slot.
    let wild = format!(
        "setx {:#x}, %r1\nldub [%r1], %r2\nret %r2\n",
        DYN_BASE + (77 << 20)
    );
    assert_eq!(kind(h.run(&src(&wild))), FaultKind::BadAddr);
}

#[test]
fn drops_are_counted_and_freed_space_is_reused_at_once() {
    let mut h = H::with(VmOptions {
        dynvarsize: 500,
        ..VmOptions::default()
    });
    let store = |i: u64| {
        src(&format!(
            "flushts\nsetx {i}, %r1\npushtv int, %r1\nstgaa %r1, n\nret %r0\n"
        ))
    };
    let free = |i: u64| {
        src(&format!(
            "flushts\nsetx {i}, %r1\npushtv int, %r1\nstgaa %r0, n\nret %r0\n"
        ))
    };
    let mut stored = 0;
    for i in 1..=50 {
        // a dropped store ends the run, which the machine says is no fault
        if h.run(&store(i)).is_err() {
            assert!(h.m.take_dropped_exit());
        }
        stored = h.state.dynvars.len();
    }
    let plain = h.state.dynvar_drops();
    assert!(plain > 0);
    assert_eq!(stored as u64 + plain, 50);
    // Free one: its space is free at once (a deleted element's, as in DTrace for Linux).
    h.run(&free(1)).unwrap();
    h.run(&store(100)).unwrap();
    assert_eq!(h.state.dynvars.len(), stored);
    assert_eq!(h.state.dynvar_drops(), plain);
    assert!(h.state.dynvars.used() <= 500);
}
