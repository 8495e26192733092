//! Struct-, union- and array-typed variables at the probe, checked against the interpreter: a
//! clause's actions run in both (one variable state, one firing), then an integer expression
//! over the variables; both must agree on its value, or on its fault.

use super::*;

/// [`Probe`] whose by-reference variables live in the emulator's scratch past the string slots
/// it hands out (the first [`STRING_ROOM`] bytes): per variable a flag word (set once the
/// variable exists) and its storage, which starts as garbage and is zeroed when the variable
/// is created, as a map's new element is. `self->`, global and `this->` variables by id (the
/// first two or three of each scope), and the elements 0 to 2 of one associative array keyed by an
/// integer.
struct RefProbe {
    p: Probe,
}

/// The bytes of the string scratch [`RefProbe`] hands out to strings.
const STRING_ROOM: usize = 1536;
/// Bytes of a variable's place: its flag word and the largest storage the tests use.
const PLACE: u64 = 8 + 296;
/// Places: two thread-locals, three globals, two clause-locals, three array elements.
const PLACES: u64 = 10;

const _: () = assert!(STRING_ROOM as u64 + PLACES * PLACE <= SCRATCH_LEN as u64);

fn place_at(i: u64) -> u64 {
    SCRATCH_ADDR + STRING_ROOM as u64 + i * PLACE
}

impl RefProbe {
    fn new() -> RefProbe {
        RefProbe { p: string_probe() }
    }

    /// Code that marks every place as not existing (the scratch starts as garbage).
    fn prologue() -> Vec<Insn> {
        let mut a = Asm::new();
        for i in 0..PLACES {
            a.ld_imm64(R1, place_at(i));
            a.store_imm(Size::DW, R1, 0, 0);
        }
        a.finish().unwrap()
    }
}

impl ProbeContext for RefProbe {
    fn emit_builtin(&self, a: &mut Asm, b: Builtin) -> Result<(), String> {
        self.p.emit_builtin(a, b)
    }

    fn emit_execname(&self, a: &mut Asm, at: i16) -> Result<(), String> {
        self.p.emit_execname(a, at)
    }

    fn names(&self) -> &ProbeNames {
        self.p.names()
    }

    fn emit_string_scratch(&self, a: &mut Asm, offset: usize, len: usize) -> Result<(), String> {
        if offset + len > STRING_ROOM {
            return Err("out of string scratch".into());
        }
        self.p.emit_string_scratch(a, offset, len)
    }

    fn emit_ref_var(&self, a: &mut Asm, var: StringVar<'_>, size: u32) -> Result<(), String> {
        if u64::from(size) > PLACE - 8 {
            return Err(format!("a variable of {size} bytes"));
        }
        let ubase = vars::DIF_VAR_OTHER_UBASE;
        let fixed = |id: u32, first: u64, n: u32| -> Result<u64, String> {
            match id.checked_sub(ubase) {
                Some(i) if i < n => Ok(place_at(first + u64::from(i))),
                _ => Err("too many variables of this scope here".into()),
            }
        };
        let (have, done) = (a.label(), a.label());
        match var {
            StringVar::Thread(id) => {
                a.ld_imm64(R0, fixed(id, 0, 2)?);
            }
            StringVar::Global(id) => {
                a.ld_imm64(R0, fixed(id, 2, 3)?);
            }
            StringVar::Local(id) => {
                a.ld_imm64(R0, fixed(id, 5, 2)?);
            }
            StringVar::Array(_, key) => {
                let none = a.label();
                let [KeyPart::Int(at)] = key else {
                    return Err("one integer key here".into());
                };
                // Elements past 2 find the space full: the creation is dropped.
                a.load(Size::DW, R1, R10, *at);
                a.jmp_imm(op::JGT, R1, 2, none);
                a.alu_imm(op::MUL, R1, PLACE as i32);
                a.ld_imm64(R0, place_at(7));
                a.alu(op::ADD, R0, R1);
                let found = a.label();
                a.ja(found);
                a.bind(none);
                a.mov_imm(R0, 0);
                a.ja(done);
                a.bind(found);
            }
        }
        // Created zero-filled on first use.
        a.load(Size::DW, R1, R0, 0);
        a.jmp_imm(op::JNE, R1, 0, have);
        a.store_imm(Size::DW, R0, 0, 1);
        for w in (8..PLACE as i16).step_by(8) {
            a.store_imm(Size::DW, R0, w, 0);
        }
        a.bind(have);
        a.alu_imm(op::ADD, R0, 8);
        a.bind(done);
        Ok(())
    }
}

const DECLS: &str = "struct s { string str; int a; char c; short h; int arr[4]; long l; }; \
    union u { int i; char b[4]; }; \
    struct s g; struct s g2; union u un; self struct s v; struct s command[int];";

/// Runs the actions of `setup` (one clause), then `expr` (an integer), both ways: they agree on
/// the value or on the fault. Returns the interpreter's value.
fn agree(setup: &str, expr: &str) -> Option<u64> {
    let src = format!(
        "{DECLS} this struct s t; syscall::write:entry {{ {setup} }} \
         syscall::write:entry / ({expr}) + 1000 / {{ @ = count(); }}"
    );
    let prog = dtrace_compiler::compile(&src, &dtrace_compiler::CompileOptions::default())
        .unwrap_or_else(|e| panic!("{src}: {e:?}"));
    let ctxp = RefProbe::new();
    let (mut ctx, mut mem) = fake_env(&ctxp.p);
    let mut state = VarState::new(VmOptions::default());
    // One firing: the clause-locals live across both clauses.
    let mut m = Machine::new();
    let mut insns = RefProbe::prologue();
    for a in &prog.ecbs[0].actions {
        let o = a.difo.as_ref().unwrap();
        m.run(o, &mut state, &mut ctx, &mut mem)
            .unwrap_or_else(|e| panic!("{setup}: {e:?}"));
        let f = translate(o, &ctxp, 257, FRAME).unwrap_or_else(|e| panic!("{setup}: {e}"));
        assert_reachable(&f.insns);
        insns.extend(f.insns);
    }
    let obj = prog.ecbs[1].predicate.clone().unwrap();
    let want = m.run(&obj, &mut state, &mut ctx, &mut mem);
    let f = translate(&obj, &ctxp, 257, FRAME).unwrap_or_else(|e| panic!("{expr}: {e}"));
    assert_reachable(&f.insns);
    insns.extend(f.insns);
    let (r0, stack) = emulate_frame(&insns, &ctxp.p);
    match want {
        Ok(v) => {
            assert_eq!(r0, v, "{setup} / {expr}");
            Some(v.wrapping_sub(1000))
        }
        Err(fault) => {
            assert_eq!(r0, FAULTED as u64, "{setup} / {expr}");
            assert_eq!(
                frame_fault(&stack),
                Some((fault.kind.code(), fault.pc, fault.addr)),
                "{setup} / {expr}: the interpreter's fault"
            );
            None
        }
    }
}

#[test]
fn members_stored_and_loaded_through_struct_variables_agree() {
    let cases: &[(&str, &str, u64)] = &[
        ("g.a = 5;", "g.a", 5),
        ("g.a = -3;", "g.a", (-3i64) as u64),
        ("g.c = 200;", "g.c", (200u8 as i8) as i64 as u64),
        ("g.h = -2; g.l = 1 << 40;", "g.h + g.l", (1u64 << 40) - 2),
        (
            "g.arr[2] = 7; g.arr[0] = 1;",
            "g.arr[2] * 10 + g.arr[0] + g.arr[3]",
            71,
        ),
        ("", "g.a + g.arr[1] + g2.l", 0),
        (
            "self->v.a = 3; self->v.arr[3] = 4;",
            "self->v.a * self->v.arr[3]",
            12,
        ),
        ("", "self->v.a", 0),
        ("this->t.a = 9;", "this->t.a", 9),
        (
            "command[1].a = 5; command[2].a = 6;",
            "command[1].a * 10 + command[2].a",
            56,
        ),
        (
            "command[1].a = 5;",
            "command[0].a + command[1].l + command[1].a",
            5,
        ),
        ("un.i = 0x01020304;", "un.b[0] * 100 + un.b[3]", 401),
        ("g.a = 1; g2.a = 2;", "g.a * 10 + g2.a", 12),
        // Assigned whole: every byte, a string member's too.
        (
            r#"g.a = 7; g.l = 9; g.str = "ab"; g2 = g; g.a = 1;"#,
            r#"g2.a * 100 + g2.l * 10 + g.a + (g2.str == "ab")"#,
            792,
        ),
        (
            "g.arr[3] = 4; self->v = g; this->t = self->v; command[1].a = 2;",
            "self->v.arr[3] * 10 + this->t.arr[3] + command[1].a * 100",
            244,
        ),
        ("g2.a = 5; g2 = g;", "g2.a", 0),
        (
            "g.a = 3; command[1] = g; command[2] = command[1]; command[2].l = 5;",
            "command[1].a * 100 + command[2].a * 10 + command[2].l + command[1].l",
            335,
        ),
    ];
    for &(setup, expr, want) in cases {
        assert_eq!(agree(setup, expr), Some(want), "{setup} / {expr}");
    }
}

#[test]
fn string_members_copy_compare_and_measure_as_the_interpreter_keeps_them() {
    let cases: &[(&str, &str, u64)] = &[
        (r#"g.str = "foo";"#, r#"g.str == "foo""#, 1),
        (r#"g.str = "foo";"#, "strlen(g.str)", 3),
        ("", r#"g.str == """#, 1),
        (r#"g.str = "foobar"; g.str = "ab";"#, r#"g.str == "ab""#, 1),
        (
            r#"command[1].str = "foobarbaz"; command[2].str = command[1].str;"#,
            r#"command[2].str == "foobarbaz" && command[1].str == command[2].str"#,
            1,
        ),
        (
            r#"self->v.str = "x"; g.str = self->v.str;"#,
            "strlen(g.str)",
            1,
        ),
        (r#"g.str = "abc";"#, r#"index(g.str, "c")"#, 2),
        (r#"g.str = "hello";"#, r#"g.str != "hellp""#, 1),
        (r#"g.str = copyinstr(arg1);"#, r#"g.str == "hello""#, 1),
    ];
    for &(setup, expr, want) in cases {
        assert_eq!(agree(setup, expr), Some(want), "{setup} / {expr}");
    }
}

#[test]
fn a_dropped_creation_ends_the_clause_as_the_interpreters() {
    // Element 3 does not fit (the context's space holds three): the clause ends before its
    // second store, in both.
    let ctxp = RefProbe::new();
    let src = format!("{DECLS} syscall::write:entry {{ command[3].a = 1; g.a = 4; }}");
    let prog = dtrace_compiler::compile(&src, &dtrace_compiler::CompileOptions::default())
        .unwrap_or_else(|e| panic!("{src}: {e:?}"));
    let o = prog.ecbs[0].actions[0].difo.as_ref().unwrap();
    let f = translate(o, &ctxp, 257, FRAME).unwrap();
    assert!(f.can_drop);
    assert_reachable(&f.insns);
}

#[test]
fn what_the_translator_cannot_bound_stays_in_dtrace_with_its_reason() {
    let ctxp = RefProbe::new();
    for (src, why) in [
        // An element at an index known only at the probe.
        (
            "syscall::write:entry { g.arr[arg0] = 1; }",
            "computed at run time",
        ),
        // The variable's address as a number.
        (
            "syscall::write:entry { trace(g); }",
            "used where the translator follows only integers",
        ),
        // A struct assigned whole from kernel memory.
        (
            "syscall::write:entry { g = *(struct s *)arg0; }",
            "assigned whole from other than a struct variable",
        ),
    ] {
        let prog = dtrace_compiler::compile(
            &format!("{DECLS} {src}"),
            &dtrace_compiler::CompileOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{src}: {e:?}"));
        let o = prog.ecbs[0].actions[0].difo.as_ref().unwrap();
        let e = translate(o, &ctxp, 257, FRAME).expect_err(src);
        assert!(e.to_string().contains(why), "{src}: {e}");
    }
    // A probe whose context keeps them in dtrace says so.
    let prog = dtrace_compiler::compile(
        &format!("{DECLS} syscall::write:entry / g.a == 1 / {{ @ = count(); }}"),
        &dtrace_compiler::CompileOptions::default(),
    )
    .unwrap();
    let e = translate(
        prog.ecbs[0].predicate.as_ref().unwrap(),
        &Probe::new(),
        257,
        FRAME,
    )
    .expect_err("struct variables live in dtrace");
    assert!(
        e.to_string().contains("struct variables live in dtrace"),
        "{e}"
    );
}

#[test]
fn a_string_member_recorded_is_read_into_the_scratch() {
    let ctxp = RefProbe::new();
    let src = format!("{DECLS} syscall::write:entry {{ @[g.str] = count(); }}");
    let prog = dtrace_compiler::compile(&src, &dtrace_compiler::CompileOptions::default())
        .unwrap_or_else(|e| panic!("{src}: {e:?}"));
    let key = prog.ecbs[0].actions[0].difo.as_ref().expect("a key");
    let v = translate_value(key, &ctxp, 257, FRAME).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.kind, ValueKind::Scratch);
    assert_reachable(&v.fragment.insns);
    // The empty string of a global never stored, in the scratch where r0 says.
    let mut insns = RefProbe::prologue();
    insns.extend(v.fragment.insns);
    let (r0, _, scratch) = emulate_all(&insns, &ctxp.p);
    let at = (r0 - SCRATCH_ADDR) as usize;
    assert!(at < STRING_ROOM, "{r0:#x}");
    assert_eq!(scratch[at], 0);
}
