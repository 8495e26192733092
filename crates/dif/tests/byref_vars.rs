//! By-reference variables (D arrays and structs) have real storage: `ldgs`/`ldls` return its address and
//! `st*` through it persist, as the compiler's code for `int a[4]; a[2] = 7;` and `s.x = 1;` expects.

mod common;
use common::{kind, H};
use dtrace_dif::vm::{FaultKind, Stored};

/// `int a[4]` (global, 16 bytes), `struct { int x; long y; } s` (global, 16 bytes), a 16-byte clause-local
/// and a string global.
const DECLS: &str = ".var a 0x500 scl glb r/w ref 16\n.var s 0x501 scl glb r/w ref 16\n.var l 0x502 scl loc r/w ref 16\n.var str 0x503 scl glb r/w string 256\n";

fn src(body: &str) -> String {
    format!("{DECLS}{body}")
}

/// What the compiler emits for `a[2] = v`: the array's address, plus index times element size, `stw`.
fn store_a2(v: u64) -> String {
    src(&format!(
        "ldgs a, %r1\nsetx 2, %r2\nsetx 4, %r3\nmul %r2, %r3, %r2\nadd %r1, %r2, %r1\nsetx {v}, %r4\nstw %r4, [%r1]\nret %r0\n"
    ))
}

const LOAD_A2: &str = "ldgs a, %r1\nsetx 8, %r2\nadd %r1, %r2, %r1\nlduw [%r1], %r3\nret %r3\n";

#[test]
fn array_element_stores_persist_across_clauses_and_firings() {
    let mut h = H::new();
    assert_eq!(h.run(&src(LOAD_A2)), Ok(0));
    h.run(&store_a2(7)).unwrap();
    // The next clause of the same firing and a later firing both see it.
    assert_eq!(h.run(&src(LOAD_A2)), Ok(7));
    h.m.begin_firing();
    assert_eq!(h.run(&src(LOAD_A2)), Ok(7));
    // The caller's state holds the bytes: element 2 at offset 8.
    let Some(Stored::Bytes(b)) = h.state.global(0x500) else {
        panic!("no storage for a");
    };
    assert_eq!(&b[8..12], &7u32.to_le_bytes());
    assert_eq!(b.len(), 16);
    // Other elements are untouched.
    let other = src("ldgs a, %r1\nlduw [%r1], %r3\nret %r3\n");
    assert_eq!(h.run(&other), Ok(0));
}

#[test]
fn struct_member_stores_persist_and_whole_struct_reads_back() {
    let mut h = H::new();
    // s.x = 1; s.y = -1;
    h.run(&src(
        "ldgs s, %r1\nsetx 1, %r2\nstw %r2, [%r1]\nsetx 8, %r3\nadd %r1, %r3, %r1\nsetx -1, %r2\nstx %r2, [%r1]\nret %r0\n",
    ))
    .unwrap();
    h.m.begin_firing();
    assert_eq!(
        h.run(&src("ldgs s, %r1\nldsw [%r1], %r2\nret %r2\n")),
        Ok(1)
    );
    // trace(s): the result is the variable's address, readable after the run.
    let o = H::obj(&format!(".rtype ref 16\n{}", src("ldgs s, %r1\nret %r1\n")));
    let addr = h.run_obj(&o).unwrap();
    let b = h.m.read_result(&o, &mut h.mem, addr, 16).unwrap();
    let mut want = 1u32.to_le_bytes().to_vec();
    want.extend_from_slice(&[0; 4]);
    want.extend_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(b, want);
}

#[test]
fn whole_variable_assignment_copies_bytes() {
    let mut h = H::new();
    h.run(&store_a2(9)).unwrap();
    // s = a (same size): stgs copies a's bytes; a later store into a does not change s.
    h.run(&src("ldgs a, %r1\nstgs %r1, s\nret %r0\n")).unwrap();
    h.run(&store_a2(10)).unwrap();
    assert_eq!(
        h.run(&src(
            "ldgs s, %r1\nsetx 8, %r2\nadd %r1, %r2, %r1\nlduw [%r1], %r3\nret %r3\n"
        )),
        Ok(9)
    );
    assert_eq!(h.run(&src(LOAD_A2)), Ok(10));
}

#[test]
fn clause_local_storage_lives_for_one_firing() {
    let mut h = H::new();
    let store = src("ldls l, %r1\nsetx 5, %r2\nstx %r2, [%r1]\nret %r0\n");
    let load = src("ldls l, %r1\nldx [%r1], %r2\nret %r2\n");
    h.run(&store).unwrap();
    assert_eq!(h.run(&load), Ok(5));
    h.m.begin_firing();
    assert_eq!(h.run(&load), Ok(0));
}

#[test]
fn stores_are_bounds_checked_like_scratch_and_loads_read_zeros_past_the_end() {
    let mut h = H::new();
    // One past the end of a (16 bytes).
    let past = src("ldgs a, %r1\nsetx 16, %r2\nadd %r1, %r2, %r1\nstb %r2, [%r1]\nret %r0\n");
    assert_eq!(kind(h.run(&past)), FaultKind::BadAddr);
    // A word straddling the end.
    let straddle = src("ldgs a, %r1\nsetx 12, %r2\nadd %r1, %r2, %r1\nstx %r2, [%r1]\nret %r0\n");
    assert_eq!(kind(h.run(&straddle)), FaultKind::BadAddr);
    // Misaligned.
    let mis = src("ldgs a, %r1\nsetx 1, %r2\nadd %r1, %r2, %r1\nstw %r2, [%r1]\nret %r0\n");
    assert_eq!(kind(h.run(&mis)), FaultKind::BadAlign);
    // Into the next variable's slot, never allocated: faults rather than reaching other storage.
    let next = src("ldgs a, %r1\nsetx 0x100000, %r2\nadd %r1, %r2, %r1\nstb %r2, [%r1]\nret %r0\n");
    assert_eq!(kind(h.run(&next)), FaultKind::BadAddr);
    // Loads past the end read zeros, as DTrace's through a cast ("out-of-bounds array
    // dereferences work as long as you cast"), within the variable's room.
    let load_past = src("ldgs a, %r1\nsetx 16, %r2\nadd %r1, %r2, %r1\nldub [%r1], %r3\nret %r3\n");
    assert_eq!(h.run(&load_past), Ok(0));
    let word_past = src("ldgs a, %r1\nsetx 40, %r2\nadd %r1, %r2, %r1\nldx [%r1], %r3\nret %r3\n");
    assert_eq!(h.run(&word_past), Ok(0));
    let load_next =
        src("ldgs a, %r1\nsetx 0x100000, %r2\nadd %r1, %r2, %r1\nldub [%r1], %r3\nret %r3\n");
    assert_eq!(kind(h.run(&load_next)), FaultKind::BadAddr);
    // Nothing was written.
    assert_eq!(h.run(&src(LOAD_A2)), Ok(0));
}

#[test]
fn strings_keep_copy_semantics() {
    let mut h = H::new();
    h.run(&src("sets \"abc\", %r1\nstgs %r1, str\nret %r0\n"))
        .unwrap();
    // Storing through the loaded address changes a scratch copy, not the variable.
    h.run(&src(
        "ldgs str, %r1\nsetx 0x7a, %r2\nstb %r2, [%r1]\nret %r0\n",
    ))
    .unwrap();
    assert_eq!(
        h.run_str(&format!(
            ".rtype string 256\n{}",
            src("ldgs str, %r1\nret %r1\n")
        ))
        .unwrap(),
        "abc"
    );
}

#[test]
fn non_allocating_result_readers_match_the_allocating_ones() {
    let mut h = H::new();
    // A scratch string, a string-table string and a kernel string.
    h.mem.kernel.insert(0x1000, b"kernel-string\0tail".to_vec());
    for body in [
        "sets \"abc\", %r1\nsetx 1, %r2\npushtr string, %r0, %r1\nsets \"de\", %r3\npushtr string, %r0, %r3\ncall strjoin, %r1\nret %r1\n",
        "sets \"table\", %r1\nret %r1\n",
        "setx 0x1000, %r1\nret %r1\n",
    ] {
        let o = H::obj(&format!(".rtype string 256\n{body}"));
        let a = h.run_obj(&o).unwrap();
        let want = h.m.read_string_result(&o, &mut h.mem, a).unwrap();
        let mut v = vec![9u8; 3];
        h.m.read_string_into(&o, &mut h.mem, a, &mut v).unwrap();
        assert_eq!(v, want);
        let mut dst = [0xffu8; 64];
        let n = h.m.copy_string_result(&o, &mut h.mem, a, &mut dst).unwrap();
        assert_eq!(&dst[..n], &want[..]);
        // A short destination gets a prefix.
        let mut short = [0u8; 2];
        assert_eq!(h.m.copy_string_result(&o, &mut h.mem, a, &mut short), Ok(2));
        assert_eq!(&short, &want[..2]);
        let mut raw = [0u8; 3];
        h.m.read_result_into(&o, &mut h.mem, a, &mut raw).unwrap();
        assert_eq!(&raw, &want[..3]);
    }
    // Unreadable and NULL addresses fault like read_string_result.
    let o = H::obj(".rtype string 256\nsetx 0x9000, %r1\nret %r1\n");
    let a = h.run_obj(&o).unwrap();
    let mut dst = [0u8; 16];
    assert_eq!(
        h.m.copy_string_result(&o, &mut h.mem, a, &mut dst)
            .map_err(|f| f.kind),
        Err(FaultKind::BadAddr)
    );
    assert!(h.m.copy_string_result(&o, &mut h.mem, 0, &mut dst).is_err());
}

#[test]
fn static_storage_is_bounded() {
    // 80 globals of 1 MiB each: the first 64 get storage, then loads fault with NoScratch.
    let mut decls = String::new();
    let mut body = String::new();
    for i in 0..80 {
        decls.push_str(&format!(
            ".var v{i} {} scl glb r/w ref 1048576\n",
            0x500 + i
        ));
        body.push_str(&format!("ldgs v{i}, %r1\n"));
    }
    let mut h = H::new();
    let r = h.run(&format!("{decls}{body}ret %r0\n"));
    assert_eq!(kind(r), FaultKind::NoScratch);
    // What was created stays usable.
    assert_eq!(
        h.run(&format!("{decls}ldgs v3, %r1\nldx [%r1], %r2\nret %r2\n")),
        Ok(0)
    );
}
