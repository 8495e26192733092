//! `alloca()`, the loads and stores through its pointers, `bcopy()`, `copyinto()` and its
//! memory as a string, run as a clause's DIF objects in order both ways: each object's value
//! (the interpreter's recorded value, or its string) and the first fault must agree.

use super::*;

/// Where [`AllocaProbe`] keeps the alloca area: after the strings, in the emulator's scratch.
const AREA_AT: u64 = 2048;
/// Its size.
const AREA_SIZE: u32 = 1024;
/// The stack slot of the bytes allocated so far (above [`FRAME`]).
pub(super) const TOP_AT: i16 = -8;

/// The stack slot of thread-local (`thread`) or global scalar `var`: below the clause-locals'.
pub(super) fn var_slot(thread: bool, var: u32) -> Result<i16, String> {
    let i = var
        .checked_sub(0x500)
        .filter(|i| *i < 4)
        .ok_or("too many variables")?;
    let i = i as i16 + if thread { 0 } else { 4 };
    Ok(FRAME.base - Frame::SIZE - 8 * 16 - 8 * (i + 1))
}

/// [`Probe`] with an alloca area, and clause-locals (as [`ArrayProbe`]'s), thread-locals and
/// global scalars in stack slots.
pub(super) struct AllocaProbe {
    pub(super) p: Probe,
    /// The clause-locals that hold alloca pointers.
    pub(super) locals: Vec<u32>,
    /// The thread-locals (`true`) and globals that hold alloca pointers.
    pub(super) vars: Vec<(bool, u32)>,
    /// The scratch the clause may allocate (`scratchsize`).
    pub(super) limit: u64,
    /// The clause calls `alloca()` (its `copyin()` calls take from the area).
    pub(super) allocates: bool,
}

impl ProbeContext for AllocaProbe {
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
        if offset + len > AREA_AT as usize {
            return Err("out of string scratch".into());
        }
        self.p.emit_string_scratch(a, offset, len)
    }

    fn emit_local_load(&self, a: &mut Asm, var: u32) -> Result<(), String> {
        a.load(Size::DW, R0, R10, local_slot(var)?);
        Ok(())
    }

    fn emit_local_store(&self, a: &mut Asm, var: u32, value_at: i16) -> Result<(), String> {
        a.load(Size::DW, R1, R10, value_at)
            .store(Size::DW, R10, local_slot(var)?, R1);
        Ok(())
    }

    fn emit_thread_load(&self, a: &mut Asm, var: u32) -> Result<(), String> {
        a.load(Size::DW, R0, R10, var_slot(true, var)?);
        Ok(())
    }

    fn emit_thread_store(&self, a: &mut Asm, var: u32, value_at: i16) -> Result<(), String> {
        a.load(Size::DW, R1, R10, value_at)
            .store(Size::DW, R10, var_slot(true, var)?, R1);
        Ok(())
    }

    fn emit_global_load(&self, a: &mut Asm, var: u32) -> Result<(), String> {
        a.load(Size::DW, R0, R10, var_slot(false, var)?);
        Ok(())
    }

    fn emit_global_store(&self, a: &mut Asm, var: u32, value_at: i16) -> Result<(), String> {
        a.load(Size::DW, R1, R10, value_at)
            .store(Size::DW, R10, var_slot(false, var)?, R1);
        Ok(())
    }

    fn alloca_area(&self) -> Result<AllocaArea, String> {
        Ok(AllocaArea {
            top_at: TOP_AT,
            size: AREA_SIZE,
            limit: self.limit,
            room: 2 * AREA_SIZE,
        })
    }

    fn emit_alloca_base(&self, a: &mut Asm) -> Result<(), String> {
        a.mov_imm(R1, -1).mov_imm(R2, -1);
        a.ld_imm64(R0, SCRATCH_ADDR + AREA_AT);
        Ok(())
    }

    fn local_holds_alloca(&self, var: u32) -> bool {
        self.locals.contains(&var)
    }

    fn var_holds_alloca(&self, thread: bool, var: u32) -> bool {
        self.vars.contains(&(thread, var))
    }

    fn copyin_allocates(&self) -> bool {
        self.allocates
    }
}

/// Whether the DIF objects `objs` of a clause call `alloca()`.
fn allocates(objs: &[DifObject]) -> bool {
    objs.iter().any(|o| {
        o.subrs_called()
            .any(|s| s == dtrace_dif::subr::Subr::Alloca)
    })
}

/// What one DIF object of a clause gave: its recorded value, its string, or a fault (kind,
/// instruction, address).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    Int(u64),
    Str(Vec<u8>),
    /// The bytes of an object recorded by reference (or of `tracemem()`).
    Bytes(Vec<u8>),
    Fault(u32, u32, u64),
}

/// The DIF objects of the first clause of `src`: its predicate, then its actions'.
fn clause_objects(src: &str) -> Vec<DifObject> {
    let p = dtrace_compiler::compile(src, &dtrace_compiler::CompileOptions::default())
        .unwrap_or_else(|e| panic!("{src}: {e:?}"));
    let e = &p.ecbs[0];
    e.predicate
        .iter()
        .cloned()
        .chain(e.actions.iter().filter_map(|a| a.difo.clone()))
        .collect()
}

/// The interpreter's outcomes, object by object, up to the first fault.
fn interpreted(objs: &[DifObject], p: &Probe, limit: u64) -> Vec<Outcome> {
    let (mut ctx, mut mem) = fake_env(p);
    let mut state = VarState::new(VmOptions {
        scratch_size: limit as usize,
        ..VmOptions::default()
    });
    let mut m = Machine::new();
    m.begin_firing();
    m.begin_clause();
    let mut out = Vec::new();
    for o in objs {
        match m.run(o, &mut state, &mut ctx, &mut mem) {
            // A string is read as the action records it: a fault there is the expression's
            // last instruction's.
            Ok(v) if o.rtype.is_string() => match m.read_string_result(o, &mut mem, v) {
                Ok(s) => out.push(Outcome::Str(s)),
                Err(f) => {
                    let last = o.text.len() as u32 - 1;
                    out.push(Outcome::Fault(f.kind.code(), last, f.addr));
                    break;
                }
            },
            // So is an object recorded by reference (`Machine::read_result_into`).
            Ok(v) if o.rtype.is_by_ref() => {
                let mut b = vec![0; o.rtype.size as usize];
                match m.read_result_into(o, &mut mem, v, &mut b) {
                    Ok(()) => out.push(Outcome::Bytes(b)),
                    Err(f) => {
                        let last = o.text.len() as u32 - 1;
                        out.push(Outcome::Fault(f.kind.code(), last, f.addr));
                        break;
                    }
                }
            }
            Ok(v) => out.push(Outcome::Int(m.export_value(v))),
            Err(f) => {
                out.push(Outcome::Fault(f.kind.code(), f.pc, f.addr));
                break;
            }
        }
    }
    out
}

/// The translated objects' outcomes: for each object, the objects up to it run in one program
/// (the alloca top and the clause-locals zeroed first, as at a clause's start).
fn translated(objs: &[DifObject], ctx: &AllocaProbe) -> Vec<Outcome> {
    let frags = objs
        .iter()
        .map(|o| translate_value(o, ctx, 257, FRAME).unwrap_or_else(|e| panic!("{e}")))
        .collect::<Vec<_>>();
    // What the context checks: the clause's allocations fit the area.
    let bytes: u64 = frags.iter().map(|f| f.fragment.alloca_bytes).sum();
    assert!(
        bytes <= u64::from(AREA_SIZE),
        "the context refuses {bytes} bytes"
    );
    let mut out = Vec::new();
    for i in 0..frags.len() {
        let mut a = Asm::new();
        a.store_imm(Size::DW, R10, TOP_AT, 0);
        for v in 0..16 {
            a.store_imm(Size::DW, R10, local_slot(0x500 + v).unwrap(), 0);
        }
        let stop = a.label();
        for f in &frags[..i] {
            f.fragment.emit(&mut a);
            // Stops at a fault (its word set), not at a value of 2.
            a.load(Size::DW, R1, R10, FRAME.fault_at());
            a.jmp_imm(op::JNE, R1, 0, stop);
        }
        frags[i].fragment.emit(&mut a);
        a.bind(stop);
        let insns = a.finish().unwrap();
        assert_reachable(&frags[i].fragment.insns);
        let (r0, stack, scratch) = emulate_all(&insns, &ctx.p);
        // A fault leaves FAULTED and its word (a value of 2 leaves no word).
        if let (true, Some((k, pc, addr))) = (r0 == FAULTED as u64, frame_fault(&stack)) {
            out.push(Outcome::Fault(k, pc, addr));
            break;
        }
        out.push(match frags[i].kind {
            ValueKind::Scratch => {
                let at = (r0 - SCRATCH_ADDR) as usize;
                let s = &scratch[at..];
                Outcome::Str(s[..s.iter().position(|&c| c == 0).unwrap()].to_vec())
            }
            ValueKind::Buffer(n) => {
                let at = (r0 - SCRATCH_ADDR) as usize;
                Outcome::Bytes(scratch[at..at + n as usize].to_vec())
            }
            _ => Outcome::Int(r0),
        });
    }
    out
}

/// Runs the clause `body` at `syscall::write:entry` both ways and checks that they agree; the
/// outcomes.
pub(super) fn agree_clause(body: &str, p: &Probe, limit: u64) -> Vec<Outcome> {
    let src = format!("#pragma D option scratchsize={limit}\nsyscall::write:entry {{ {body} }}");
    let objs = clause_objects(&src);
    let ctx = AllocaProbe {
        p: p.clone(),
        locals: alloca_locals(&objs),
        vars: Vec::new(),
        limit,
        allocates: allocates(&objs),
    };
    let want = interpreted(&objs, p, limit);
    assert_eq!(translated(&objs, &ctx), want, "{body}");
    want
}

/// A probe whose `arg0` is the kernel bytes' address and `arg1` the user string's.
fn memory_probe() -> Probe {
    let mut p = Probe::new();
    p.args[0] = 0xffff_8000_0000_1000;
    p.args[1] = 0x7fff_0000_1000;
    p.kernel
        .push((0xffff_8000_0000_2000, b"kernel\0string".to_vec()));
    p
}

#[test]
fn alloca_memory_is_zeroed_and_its_pointer_recorded_as_the_interpreters() {
    let p = memory_probe();
    let out = agree_clause(
        "this->p = (char *)alloca(3); this->q = (char *)alloca(12); trace(this->p); \
         trace(this->q); trace(this->q - this->p); trace(*(uint64_t *)this->q); \
         trace(this->q[11]); trace(this->p != NULL);",
        &p,
        1 << 20,
    );
    assert_eq!(out[2], Outcome::Int(8), "the first alloca() is 8: {out:?}");
    assert_eq!(out[3], Outcome::Int(16), "{out:?}");
    assert_eq!(out[5], Outcome::Int(0), "zeroed: {out:?}");
}

#[test]
fn stores_and_loads_through_alloca_pointers_at_constant_and_computed_offsets() {
    let p = memory_probe();
    for body in [
        "this->p = (int *)alloca(16); this->p[1] = -5; this->p[3] = 7; trace(this->p[1]); \
         trace(this->p[3]); trace(this->p[0]);",
        "this->p = (char *)alloca(16); this->p[arg3] = 200; trace(this->p[arg3]); \
         trace(((unsigned char *)this->p)[arg3]); trace(*(short *)(this->p + 6));",
        "this->p = (uint64_t *)alloca(8); *this->p = arg1; trace(*this->p); \
         trace(*(int *)(this->p));",
    ] {
        agree_clause(body, &p, 1 << 20);
    }
}

#[test]
fn accesses_outside_the_allocation_fault_as_the_interpreters() {
    let p = memory_probe();
    for body in [
        // Past the top: an invalid address (the interpreter's); running past it: its size.
        "this->p = (char *)alloca(5); trace(this->p[arg3]);",
        "this->p = (char *)alloca(5); trace(*(int *)(this->p + 4));",
        "this->p = (char *)alloca(16); trace(*(int *)(this->p + 14));",
        "this->p = (char *)alloca(5); this->p[arg3] = 1;",
        "this->p = (char *)alloca(16); *(int *)(this->p + 14) = 1;",
        // Misaligned: the load checks alignment first, the store last.
        "this->p = (char *)alloca(16); trace(*(int *)(this->p + 2));",
        "this->p = (char *)alloca(16); *(int *)(this->p + 2) = 1;",
        "this->p = (char *)alloca(16); *(int *)(this->p + 15) = 1;",
        // Below the area, and a pointer never stored (NULL).
        "this->p = (char *)alloca(16); trace(*(this->p - 9));",
        "this->p = (char *)alloca(16); trace(*(this->p - arg0));",
        "this->q = (char *)alloca(4); this->p = this->q; trace(this->p[2]);",
    ] {
        let out = agree_clause(body, &p, 1 << 20);
        assert!(
            body.contains("trace(this->p[2])") || matches!(out.last(), Some(Outcome::Fault(..))),
            "{body}: {out:?}"
        );
    }
}

#[test]
fn alloca_past_scratchsize_is_out_of_scratch_space() {
    let p = memory_probe();
    let out = agree_clause(
        "this->p = (char *)alloca(40); this->q = (char *)alloca(30); trace(this->q);",
        &p,
        64,
    );
    assert!(
        matches!(out.last(), Some(Outcome::Fault(k, _, 0)) if *k == FaultKind::NoScratch.code())
    );
}

#[test]
fn bcopy_copyinto_and_the_string_of_alloca_memory() {
    let p = memory_probe();
    for body in [
        "this->p = (char *)alloca(16); bcopy((void *)0xffff800000002000, this->p, 6); \
         trace(stringof(this->p)); trace(this->p[5]);",
        "this->p = (char *)alloca(16); bcopy((void *)0xffff800000002000, this->p, 13); \
         trace(stringof(this->p + 7));",
        // No NUL before the end of the allocation: the string stops there.
        "this->p = (char *)alloca(4); bcopy((void *)0xffff800000002000, this->p, 4); \
         trace(stringof(this->p)); trace(stringof(this->p + 2));",
        "this->p = (char *)alloca(8); copyinto(arg1, 5, this->p); trace(stringof(this->p));",
        "this->p = (char *)alloca(16); copyinto(arg1, 11, this->p); \
         printf(\"%s %s\", stringof(this->p), stringof(this->p + 6));",
        // Faults: a source that cannot be read, a destination too small or not allocated.
        "this->p = (char *)alloca(16); bcopy((void *)0xffff800000009000, this->p, 6);",
        "this->p = (char *)alloca(4); bcopy((void *)0xffff800000002000, this->p, 6);",
        "this->p = (char *)alloca(4); copyinto(arg1, 8, this->p);",
        "this->p = (char *)alloca(16); copyinto(arg1 + 4096, 8, this->p);",
        "this->p = (char *)alloca(4); trace(stringof(this->p + 4));",
    ] {
        agree_clause(body, &p, 1 << 20);
    }
}

#[test]
fn what_the_translator_does_not_follow_stays_in_dtrace_with_a_reason() {
    let p = memory_probe();
    for (body, why) in [
        (
            "this->p = (char *)alloca(arg3); trace(this->p);",
            "computed at run time that may be more than the kernel's 1024 bytes",
        ),
        (
            "this->p = (char *)alloca(arg3 & 0x7ff); trace(this->p);",
            "computed at run time that may be more than the kernel's 1024 bytes",
        ),
        (
            "this->p = (char *)alloca(8); this->q = copyin(arg1, arg3);",
            "copyin() of a size computed at run time that may be more",
        ),
        (
            "self->p = (char *)alloca(8);",
            "stored in self->p (a this-> variable, or a self-> or global scalar kept in the kernel",
        ),
        (
            "p = (char *)alloca(8);",
            "stored in p (a this-> variable, or a self-> or global scalar kept in the kernel",
        ),
        (
            "this->p = (char *)alloca(8); bcopy(\"abc\", this->p, 5);",
            "bcopy(): a string as its source, 5 bytes past the 4",
        ),
        (
            "this->p = (char *)alloca(8); bcopy(execname, this->p, 4);",
            "bcopy(): a string as its source, 4 bytes past the 1",
        ),
        (
            "this->p = (char *)alloca(300); bcopy(copyinstr(arg1), this->p + strlen(execname), 260);",
            "bcopy(): a string as its source, 260 bytes past the 256",
        ),
        (
            "this->p = (char *)alloca(300); bcopy(copyinstr(arg1), this->p, 300);",
            "bcopy(): 300 bytes of a string, more than a string's 257 bytes",
        ),
        ("this->p = (char *)alloca(2048);", "more than the kernel's"),
    ] {
        let src = format!("syscall::write:entry {{ {body} }}");
        let objs = clause_objects(&src);
        let ctx = AllocaProbe {
            p: p.clone(),
            locals: alloca_locals(&objs),
            vars: Vec::new(),
            limit: 1 << 20,
            allocates: allocates(&objs),
        };
        let errs: Vec<String> = objs
            .iter()
            .filter_map(|o| translate_value(o, &ctx, 257, FRAME).err())
            .map(|e| e.to_string())
            .collect();
        assert!(errs.iter().any(|e| e.contains(why)), "{body}: {errs:?}");
    }
    // Without an area (the default context), alloca() stays in dtrace.
    let objs = clause_objects("syscall::write:entry { this->p = alloca(8); }");
    let e = translate_value(&objs[0], &p, 257, FRAME).unwrap_err();
    assert!(e.to_string().contains("alloca() runs in dtrace"), "{e}");
}

#[test]
fn inet_text_of_alloca_memory() {
    let p = memory_probe();
    for body in [
        "this->p = (char *)alloca(16); bcopy((void *)0xffff800000001000, this->p, 16); \
         trace(inet_ntoa((ipaddr_t *)this->p)); trace(inet_ntop(AF_INET6, (void *)this->p)); \
         trace(inet_ntoa6((void *)(this->p)));",
        "this->p = (char *)alloca(8); this->p[3] = 9; \
         trace(inet_ntop(AF_INET, (void *)(this->p + 4 * arg3 - 28)));",
        // Past the allocation: its size, or its address.
        "this->p = (char *)alloca(8); trace(inet_ntop(AF_INET6, (void *)this->p));",
        "this->p = (char *)alloca(8); trace(inet_ntoa((ipaddr_t *)(this->p + 8)));",
    ] {
        agree_clause(body, &p, 1 << 20);
    }
}

#[test]
fn a_clause_that_allocates_names_the_this_variables_it_reads_from_other_clauses() {
    let objs =
        |body: &str| clause_objects(&format!("this char *p; syscall::write:entry {{ {body} }}"));
    let foreign = |body: &str| foreign_local_in_allocating_clause(&objs(body));
    assert_eq!(
        foreign("this->q = (char *)alloca(4); this->q[0] = this->p[1];"),
        Some("this->p".into())
    );
    // Its own variables, and a clause that does not allocate.
    assert_eq!(
        foreign("this->n = 3; this->q = (char *)alloca(4); this->q[0] = this->n;"),
        None
    );
    assert_eq!(foreign("trace(this->p[1]);"), None);
    // Pointers moved or offset into another variable hold alloca() memory too; integers not.
    assert_eq!(
        alloca_locals(&objs(
            "this->q = (char *)alloca(8); this->r = this->q + 2; this->n = 1;"
        ))
        .len(),
        2
    );
}

#[test]
fn a_fragment_returning_an_alloca_pointer_says_so() {
    let src = "syscall::write:entry { this->p = (char *)alloca(8); trace(this->p); \
               trace(*this->p); trace(this->p - this->p); }";
    let objs = clause_objects(src);
    let ctx = AllocaProbe {
        p: Probe::new(),
        locals: alloca_locals(&objs),
        vars: Vec::new(),
        limit: 1 << 20,
        allocates: true,
    };
    let flags: Vec<bool> = objs
        .iter()
        .map(|o| {
            translate_value(o, &ctx, 257, FRAME)
                .unwrap()
                .fragment
                .alloca_value
        })
        .collect();
    // The store's value is the pointer too.
    assert_eq!(flags, [true, true, false, false]);
}

#[test]
fn strings_in_alloca_memory_compare_and_go_to_string_functions() {
    let p = memory_probe();
    for body in [
        "this->p = (char *)alloca(8); this->p[0] = 'h'; this->p[1] = 'i'; \
         trace(stringof(this->p) == \"hi\"); trace(\"hi\" == stringof(this->p)); \
         trace(stringof(this->p) < \"ha\"); trace(strlen(stringof(this->p)));",
        "this->p = (char *)alloca(4); bcopy((void *)0xffff800000002000, this->p, 4); \
         trace(strlen(stringof(this->p))); trace(stringof(this->p) == \"kern\"); \
         trace(strjoin(stringof(this->p), \"!\"));",
        // Past the allocation: the compare's, and the push's, fault.
        "this->p = (char *)alloca(4); trace(stringof(this->p + 4) == \"\");",
        "this->p = (char *)alloca(4); trace(strlen(stringof(this->p + 4)));",
    ] {
        agree_clause(body, &p, 1 << 20);
    }
}

#[test]
fn alloca_of_a_size_computed_at_run_time() {
    let mut p = memory_probe();
    for (arg3, limit) in [
        (5, 1 << 20),
        (0, 1 << 20),
        (300, 1 << 20),
        (9, 24),
        (17, 24),
    ] {
        p.args[3] = arg3;
        for body in [
            // Masked: the most it can be fits the kernel's area whatever scratchsize is.
            "this->p = (char *)alloca(arg3 & 0xff); this->q = (char *)alloca(arg3 & 0x7f); \
             trace(this->p); trace(this->q); trace(this->q - this->p); \
             trace(*(uint64_t *)this->p); this->q[arg3 & 0x7f] = 1;",
            "this->n = arg3 & 0x1ff; this->p = (char *)alloca(this->n & 0x1ff); \
             this->p[this->n - 1] = 'x'; trace(this->p[this->n - 1]); \
             trace(stringof(this->p + this->n - 1));",
            // A misaligned start rounded up, the bytes zeroed whatever was there.
            "this->p = (char *)alloca(3); this->p[2] = 1; \
             this->q = (char *)alloca(arg3 & 0x3f); trace(this->q); \
             trace(this->q[(arg3 & 0x3f) - 1]);",
        ] {
            agree_clause(body, &p, limit);
        }
    }
    // Bounded by a remainder, a shift, a quotient.
    for arg3 in [0, 99, 1000, u64::MAX] {
        p.args[3] = arg3;
        for body in [
            "this->p = (char *)alloca(arg3 % 100); this->q = (char *)alloca(arg3 >> 56); \
             trace(this->q - this->p);",
            "this->p = (char *)alloca((arg3 & 0xfff) / 8); trace(this->p); \
             this->q = (char *)alloca(1); trace(this->q);",
        ] {
            agree_clause(body, &p, 1 << 20);
        }
    }
    // Unmasked, where scratchsize is no larger than the kernel's area: its own limit.
    for (arg3, want) in [
        (24, None),
        (25, Some(FaultKind::NoScratch)),
        (u64::MAX, Some(FaultKind::NoScratch)),
    ] {
        p.args[3] = arg3;
        let out = agree_clause(
            "this->p = (char *)alloca(arg3); trace(this->p); \
             this->q = (char *)alloca(arg3 - 16); trace(this->q);",
            &p,
            24,
        );
        match want {
            Some(k) => assert!(
                matches!(out.last(), Some(Outcome::Fault(c, _, 0)) if *c == k.code()),
                "{arg3}: {out:?}"
            ),
            None => assert!(
                matches!(out.last(), Some(Outcome::Fault(..))),
                "{arg3}: {out:?}"
            ),
        }
    }
    p.args[3] = 16;
    agree_clause(
        "this->p = (char *)alloca(arg3); this->p[15] = 7; trace(this->p[15]);",
        &p,
        1024,
    );
}

#[test]
fn copyin_in_a_clause_that_allocates_takes_from_the_alloca_area() {
    let mut p = memory_probe();
    p.user.push((0x7fff_0000_1000, b"hello\0world".to_vec()));
    for arg3 in [5, 11, 0, 12] {
        p.args[3] = arg3;
        for body in [
            // copyin() first: its pointer is the first, and alloca() comes after it.
            "this->c = (char *)copyin(arg1, 6); this->p = (char *)alloca(4); trace(this->c); \
             trace(this->p); trace(stringof(this->c)); trace(this->c[4]);",
            "this->p = (char *)alloca(3); this->c = (char *)copyin(arg1, 11); trace(this->c); \
             trace(stringof(this->c + 6)); this->c[0] = 'j'; trace(stringof(this->c));",
            // Sized at run time (masked: it fits the kernel's area).
            "this->p = (char *)alloca(1); this->c = (char *)copyin(arg1, arg3 & 0xff); \
             trace(this->c); trace(stringof(this->c)); this->q = (char *)alloca(2); \
             trace(this->q);",
            // Faults: an unreadable source, and past scratchsize.
            "this->p = (char *)alloca(8); this->c = (char *)copyin(arg1 + 8192, 4);",
            "this->p = (char *)alloca(8); this->c = (char *)copyin(arg1 + 8192, arg3 & 0xf);",
            "this->p = (char *)alloca(8); this->c = (char *)copyin(arg1, 0); trace(this->c);",
            "this->p = (char *)alloca(8); this->c = (char *)copyin(arg1, 12);",
        ] {
            agree_clause(body, &p, 1 << 20);
        }
        agree_clause(
            "this->p = (char *)alloca(8); this->c = (char *)copyin(arg1, arg3); \
             trace(stringof(this->c));",
            &p,
            16,
        );
    }
}

#[test]
fn bcopy_between_alloca_ranges_moves_as_the_interpreter() {
    let mut p = memory_probe();
    for arg3 in [0, 2, 6] {
        p.args[3] = arg3;
        for body in [
            "this->p = (char *)alloca(16); bcopy((void *)0xffff800000002000, this->p, 13); \
             this->q = (char *)alloca(16); bcopy(this->p, this->q, 13); \
             trace(stringof(this->q)); trace(stringof(this->q + 7));",
            // Overlapping, both ways: the whole source is read before the destination is written.
            "this->p = (char *)alloca(16); bcopy((void *)0xffff800000002000, this->p, 13); \
             bcopy(this->p, this->p + arg3, 8); trace(stringof(this->p));",
            "this->p = (char *)alloca(16); bcopy((void *)0xffff800000002000, this->p, 13); \
             bcopy(this->p + arg3, this->p, 8); trace(stringof(this->p));",
            // Faults: the destination checked first, then the source.
            "this->p = (char *)alloca(8); this->q = (char *)alloca(4); bcopy(this->p, this->q, 8);",
            "this->p = (char *)alloca(4); this->q = (char *)alloca(8); bcopy(this->p, this->q, 8);",
            "this->p = (char *)alloca(8); bcopy(this->p + 8 + arg3, this->p, 4);",
            "this->p = (char *)alloca(8); bcopy(this->p, this->p + arg3, 4); trace(this->p[arg3]);",
        ] {
            agree_clause(body, &p, 1 << 20);
        }
    }
}

#[test]
fn bcopy_of_the_string_copyinstr_made_copies_it_and_zeros_after_it() {
    let mut p = memory_probe();
    p.user.push((0x7fff_0000_1000, b"hello\0world".to_vec()));
    for body in [
        "this->p = (char *)alloca(16); bcopy(copyinstr(arg1), this->p, 16); \
         trace(stringof(this->p)); trace(this->p[4]); trace(this->p[6]); trace(this->p[15]);",
        "this->p = (char *)alloca(256); this->p[200] = 1; \
         bcopy(copyinstr(arg1, 3), this->p + 1, 255); \
         trace(stringof(this->p + 1)); trace(this->p[3]); trace(this->p[200]);",
        // Faults: the destination first, then the string's own.
        "this->p = (char *)alloca(4); bcopy(copyinstr(arg1), this->p, 8);",
        "this->p = (char *)alloca(8); bcopy(copyinstr(arg1 + 8192), this->p, 8);",
    ] {
        agree_clause(body, &p, 1 << 20);
    }
}

#[test]
fn objects_in_alloca_memory_are_recorded_and_fault_as_the_interpreters() {
    let p = memory_probe();
    // A struct and an array recorded whole, tracemem()'s bytes, and objects past what was
    // allocated (an invalid size), at a pointer past it (an invalid address), and at NULL.
    for (body, faults) in [
        (
            "this->p = (uint64_t *)alloca(24); this->p[0] = 0x0102030405060708; \
             this->p[2] = arg0; trace(*(struct { uint64_t a; uint64_t b; } *)this->p); \
             trace(*(char (*)[24])this->p); tracemem(this->p, 24); tracemem(this->p + 1, 16);",
            None,
        ),
        (
            "this->p = (char *)alloca(12); this->p[0] = 65; \
             trace(*(struct { uint64_t a; uint64_t b; } *)this->p);",
            Some(FaultKind::BadSize),
        ),
        (
            "this->p = (char *)alloca(12); tracemem(this->p + 4, 9);",
            Some(FaultKind::BadSize),
        ),
        (
            "this->p = (char *)alloca(8); tracemem(this->p + 8, 1);",
            Some(FaultKind::BadAddr),
        ),
        (
            "this->p = (char *)alloca(8); this->p = 0; tracemem(this->p, 4);",
            Some(FaultKind::BadAddr),
        ),
    ] {
        let out = agree_clause(body, &p, 1 << 20);
        let last = out.last().expect("an outcome");
        match faults {
            None => assert!(
                out.iter()
                    .filter(|o| matches!(o, Outcome::Bytes(_)))
                    .count()
                    == 4,
                "{body}: {out:?}"
            ),
            Some(k) => assert!(
                matches!(last, Outcome::Fault(code, _, _) if *code == k.code()),
                "{body}: {out:?}"
            ),
        }
    }
}

#[test]
fn copyinto_of_a_size_known_only_at_the_probe_checks_it_as_the_interpreter() {
    let mut p = memory_probe();
    p.user
        .push((0x7fff_0000_1000, b"hello\0world, and more".to_vec()));
    // Within the allocation, none of it, all of it, one byte past it, far past it, negative.
    for arg3 in [5, 0, 8, 9, 16, 4096, u64::MAX, (-8i64) as u64] {
        p.args[3] = arg3;
        for body in [
            "this->p = (char *)alloca(8); this->p[7] = 'z'; copyinto(arg1, arg3, this->p); \
             trace(stringof(this->p)); trace(this->p[7]);",
            "this->p = (char *)alloca(16); copyinto(arg1 + 6, arg3, this->p + 8); \
             trace(stringof(this->p + 8)); trace(this->p[15]);",
            // Its destination checked first: past what was allocated (whatever the size), NULL.
            "this->p = (char *)alloca(8); copyinto(arg1, arg3, this->p + 8);",
            "this->p = (char *)alloca(8); this->p = 0; copyinto(arg1, arg3, this->p);",
            // A size computed from another (the conformance test's, tst.copyinto_arg_order.d).
            "this->p = (char *)alloca(16); this->n = 2; \
             copyinto(arg1 + this->n++, this->n++, (void *)(this->p + this->n++)); \
             trace(stringof(this->p + 4));",
        ] {
            agree_clause(body, &p, 1 << 20);
        }
        // An unreadable source faults at it (a size of 0 reads nothing: the fake memory has
        // no bytes there to read none of).
        if arg3 != 0 {
            agree_clause(
                "this->p = (char *)alloca(16); copyinto(arg1 + 8192, arg3 & 0xf, this->p);",
                &p,
                1 << 20,
            );
        }
    }
    // The faults, and the size reported: an invalid size (the size), an invalid address.
    p.args[3] = 9;
    let out = agree_clause(
        "this->p = (char *)alloca(8); copyinto(arg1, arg3, this->p);",
        &p,
        1 << 20,
    );
    assert!(
        matches!(out.last(), Some(Outcome::Fault(k, _, 9)) if *k == FaultKind::BadSize.code()),
        "{out:?}"
    );
    p.args[3] = u64::MAX;
    let out = agree_clause(
        "this->p = (char *)alloca(8); copyinto(arg1, arg3, this->p);",
        &p,
        1 << 20,
    );
    assert!(
        matches!(out.last(), Some(Outcome::Fault(k, _, u64::MAX)) if *k == FaultKind::BadSize.code()),
        "{out:?}"
    );
    // Constants the kernel's area does not hold are checked at the probe too.
    for n in ["0", "-1", "4096"] {
        agree_clause(
            &format!(
                "this->p = (char *)alloca(8); copyinto(arg1, {n}, this->p); trace(this->p[0]);"
            ),
            &p,
            1 << 20,
        );
    }
}

#[test]
fn bcopy_of_a_size_known_only_at_the_probe_checks_it_as_the_interpreter() {
    let mut p = memory_probe();
    // Within, none, all, past the allocation, past the interpreter's copy limit, negative.
    for arg3 in [6, 0, 13, 16, 17, 4096, (1 << 20) + 1, u64::MAX] {
        p.args[3] = arg3;
        for body in [
            // From the kernel.
            "this->p = (char *)alloca(16); this->p[0] = 'z'; \
             bcopy((void *)0xffff800000002000, this->p, arg3); \
             trace(stringof(this->p)); trace(stringof(this->p + 7));",
            "this->p = (char *)alloca(16); bcopy((void *)0xffff800000002000, this->p + 3, arg3);",
            // Between alloca ranges, overlapping both ways.
            "this->p = (char *)alloca(16); bcopy((void *)0xffff800000002000, this->p, 13); \
             this->q = (char *)alloca(16); bcopy(this->p, this->q, arg3); \
             trace(stringof(this->q)); trace(this->q[15]);",
            "this->p = (char *)alloca(16); bcopy((void *)0xffff800000002000, this->p, 13); \
             bcopy(this->p, this->p + 2, arg3 & 0xf); trace(stringof(this->p));",
            "this->p = (char *)alloca(16); bcopy((void *)0xffff800000002000, this->p, 13); \
             bcopy(this->p + 2, this->p, arg3 - 2); trace(stringof(this->p));",
            // The destination checked first, then the source; both before the copy limit.
            "this->p = (char *)alloca(8); bcopy((void *)0xffff800000002000, this->p + 8, arg3);",
            "this->p = (char *)alloca(8); this->p = 0; \
             bcopy((void *)0xffff800000002000, this->p, arg3);",
            "this->p = (char *)alloca(8); bcopy(this->p + 8, this->p, arg3);",
        ] {
            agree_clause(body, &p, 1 << 20);
        }
        // An unreadable source faults at it (a size of 0 reads nothing: the fake memory has
        // no bytes there to read none of).
        if arg3 != 0 {
            agree_clause(
                "this->p = (char *)alloca(16); bcopy((void *)0xffff800000009000, this->p, \
                 arg3 & 0xf);",
                &p,
                1 << 20,
            );
        }
    }
    // The faults reported: past the allocation and past the copy limit, the size.
    for (arg3, body) in [
        (17, "this->p = (char *)alloca(16); bcopy((void *)0xffff800000002000, this->p, arg3);"),
        (17, "this->p = (char *)alloca(32); this->q = (char *)alloca(16); bcopy(this->q, this->p, arg3);"),
        ((1 << 20) + 1, "this->p = (char *)alloca(8); bcopy((void *)0xffff800000002000, this->p + 8, arg3);"),
    ] {
        p.args[3] = arg3;
        let out = agree_clause(body, &p, 1 << 20);
        assert!(
            matches!(out.last(), Some(Outcome::Fault(k, _, a)) if *k == FaultKind::BadSize.code() && *a == arg3),
            "{body}: {out:?}"
        );
    }
}

#[test]
fn the_bytes_after_a_copyin_up_to_the_next_allocation_read_as_zeros() {
    let mut p = memory_probe();
    p.user.push((0x7fff_0000_1000, b"hello\0world\0!".to_vec()));
    for arg3 in [12, 13, 15, 9] {
        p.args[3] = arg3;
        for body in [
            "this->p = (char *)copyin(arg1, 12); this->a = alloca(1); trace(this->p[13]); \
             trace(*(uint64_t *)(this->p + 8));",
            "this->p = (char *)copyin(arg1, 13); this->a = alloca(1); trace(this->p[15]);",
            "this->a = alloca(1); this->p = (char *)copyin(arg1, arg3 & 0xf); \
             this->q = (char *)alloca(1); trace(*(uint64_t *)(this->p + 8));",
        ] {
            agree_clause(body, &p, 1 << 20);
        }
    }
}
