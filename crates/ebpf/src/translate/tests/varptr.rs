//! Pointers into `alloca()` and `copyin()` memory kept in `self->` and global scalars: the
//! clauses of a program run both ways over several firings (the variables live on from one
//! firing to the next, the alloca area starts empty at each clause), each DIF object's recorded
//! value and each clause's first fault must agree, stale pointers included.

use super::*;
use dtrace_dif::vm::ALLOCA_BASE;

use super::alloca::{var_slot, AllocaProbe, TOP_AT};

/// What one DIF object gave: its recorded value, its string, or a fault (kind, instruction,
/// address) that ends its clause.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Int(u64),
    Str(Vec<u8>),
    Fault(u32, u32, u64),
}

/// The DIF objects of each clause of `src`: its predicate, then its actions'.
fn program_clauses(src: &str) -> Vec<Vec<DifObject>> {
    let p = dtrace_compiler::compile(src, &dtrace_compiler::CompileOptions::default())
        .unwrap_or_else(|e| panic!("{src}: {e:?}"));
    p.ecbs
        .iter()
        .map(|e| {
            e.predicate
                .iter()
                .cloned()
                .chain(e.actions.iter().filter_map(|a| a.difo.clone()))
                .collect()
        })
        .collect()
}

/// The `self->` and global scalars of the program that hold alloca pointers, as a context
/// finds them: [`alloca_vars`] over every clause until nothing changes.
fn program_vars(clauses: &[Vec<DifObject>]) -> Vec<(bool, u32)> {
    let mut vars = Vec::new();
    loop {
        let before = vars.len();
        for c in clauses {
            vars = alloca_vars(c, &vars);
        }
        if vars.len() == before {
            return vars;
        }
    }
}

/// The interpreter's outcomes over `firings` firings of the clauses, in order.
fn interpreted(clauses: &[Vec<DifObject>], p: &Probe, firings: usize) -> Vec<Outcome> {
    let (mut ctx, mut mem) = fake_env(p);
    let mut state = VarState::new(VmOptions::default());
    let mut m = Machine::new();
    let mut out = Vec::new();
    for _ in 0..firings {
        m.begin_firing();
        for objs in clauses {
            m.begin_clause();
            for o in objs {
                match m.run(o, &mut state, &mut ctx, &mut mem) {
                    Ok(v) if o.rtype.is_string() => match m.read_string_result(o, &mut mem, v) {
                        Ok(s) => out.push(Outcome::Str(s)),
                        Err(f) => {
                            let last = o.text.len() as u32 - 1;
                            out.push(Outcome::Fault(f.kind.code(), last, f.addr));
                            break;
                        }
                    },
                    Ok(v) => out.push(Outcome::Int(m.export_value(v))),
                    Err(f) => {
                        out.push(Outcome::Fault(f.kind.code(), f.pc, f.addr));
                        break;
                    }
                }
            }
        }
    }
    out
}

/// Translates each clause as the Linux context does: its `copyin()` copies in its alloca area
/// when it calls `alloca()`, or when a use of a copy asks for it (`Untranslatable::CopyUse`).
fn translate_clauses(
    clauses: &[Vec<DifObject>],
    p: &Probe,
) -> Result<Vec<Vec<Value>>, Untranslatable> {
    let vars = program_vars(clauses);
    clauses
        .iter()
        .map(|objs| {
            let calls = objs.iter().any(|o| {
                o.subrs_called()
                    .any(|s| s == dtrace_dif::subr::Subr::Alloca)
            });
            let with = |allocates: bool| {
                let ctx = AllocaProbe {
                    p: p.clone(),
                    locals: alloca_locals_in(objs, allocates, &vars),
                    vars: vars.clone(),
                    limit: 1 << 20,
                    allocates,
                };
                objs.iter()
                    .map(|o| translate_value(o, &ctx, 257, FRAME))
                    .collect::<Result<Vec<_>, _>>()
            };
            match with(calls) {
                Err(Untranslatable::CopyUse { .. }) if !calls => with(true),
                t => t,
            }
        })
        .collect()
}

/// The translated clauses' outcomes over `firings` firings: for each object that runs, the
/// firings and clauses before it and its clause's objects up to it run in one program (the
/// variables zeroed at its start, the clause-locals at each firing's, the alloca top at each
/// clause's; a clause's fault ends it).
fn translated(clauses: &[Vec<Value>], p: &Probe, firings: usize) -> Vec<Outcome> {
    let mut out = Vec::new();
    let mut plan: Vec<(usize, usize, usize)> = Vec::new();
    for f in 0..firings {
        for (c, vals) in clauses.iter().enumerate() {
            for j in 0..vals.len() {
                let mut a = Asm::new();
                for v in 0..4 {
                    a.store_imm(Size::DW, R10, var_slot(true, 0x500 + v).unwrap(), 0);
                    a.store_imm(Size::DW, R10, var_slot(false, 0x500 + v).unwrap(), 0);
                }
                // What ran before: each object run to its end or its clause's fault.
                let mut fired = usize::MAX;
                for &(pf, pc, pj) in plan.iter().chain(std::iter::once(&(f, c, j))) {
                    if pf != fired {
                        fired = pf;
                        for v in 0..16 {
                            a.store_imm(Size::DW, R10, local_slot(0x500 + v).unwrap(), 0);
                        }
                    }
                    if pj == 0 {
                        a.store_imm(Size::DW, R10, TOP_AT, 0);
                    }
                    a.store_imm(Size::DW, R10, FRAME.fault_at(), 0);
                    clauses[pc][pj].fragment.emit(&mut a);
                    if (pf, pc, pj) != (f, c, j) {
                        // A fault before the object measured is recorded in the plan: none here.
                        let next = a.label();
                        a.load(Size::DW, R1, R10, FRAME.fault_at());
                        a.jmp_imm(op::JEQ, R1, 0, next);
                        a.mov_imm(R0, 99).exit();
                        a.bind(next);
                    }
                }
                let insns = a.finish().unwrap();
                let (r0, stack, scratch) = emulate_all(&insns, p);
                assert_ne!(r0, 99, "a fault the plan did not record");
                if let (true, Some((k, pc, addr))) = (r0 == FAULTED as u64, frame_fault(&stack)) {
                    out.push(Outcome::Fault(k, pc, addr));
                    break;
                }
                plan.push((f, c, j));
                out.push(match clauses[c][j].kind {
                    ValueKind::Scratch => {
                        let at = (r0 - SCRATCH_ADDR) as usize;
                        let s = &scratch[at..];
                        Outcome::Str(s[..s.iter().position(|&c| c == 0).unwrap()].to_vec())
                    }
                    _ => Outcome::Int(r0),
                });
            }
        }
    }
    out
}

/// A probe whose `arg1` is the user string's address ("hello\0world").
fn user_probe() -> Probe {
    let mut p = Probe::new();
    p.args[1] = 0x7fff_0000_1000;
    p
}

/// Runs the clauses of `src` over `firings` firings both ways and checks that they agree; the
/// outcomes.
fn agree(src: &str, firings: usize) -> Vec<Outcome> {
    let p = user_probe();
    let clauses = program_clauses(src);
    let vals = translate_clauses(&clauses, &p).unwrap_or_else(|e| panic!("{src}: {e}"));
    let want = interpreted(&clauses, &p, firings);
    assert_eq!(translated(&vals, &p, firings), want, "{src}");
    want
}

#[test]
fn a_copy_kept_in_a_thread_local_is_read_through_as_the_interpreters() {
    let out = agree(
        "syscall::write:entry { self->data = copyin(arg1, 8); \
         trace(*(uint64_t *)self->data); trace(*(uint32_t *)self->data); \
         trace(*(uint16_t *)self->data); trace(*(uint8_t *)self->data); \
         trace((uint64_t)self->data); trace(self->data != NULL); }",
        1,
    );
    assert_eq!(out[1], Outcome::Int(u64::from_le_bytes(*b"hello\0wo")));
    assert_eq!(
        out[5],
        Outcome::Int(8),
        "recorded as DTrace for Linux records it"
    );
}

#[test]
fn alloca_memory_kept_in_a_global_is_filled_and_read_as_the_interpreters() {
    agree(
        "syscall::write:entry { ptr = (char *)alloca(32); copyinto(arg1, 6, ptr); \
         trace(stringof(ptr)); trace(ptr[4]); trace((uint64_t)ptr); \
         q = (int *)alloca(8); q[1] = ptr[1]; trace(q[1]); trace((uint64_t)q); }",
        1,
    );
}

#[test]
fn a_pointer_used_in_another_clause_or_firing_faults_or_reads_as_the_interpreters() {
    // Another clause allocated nothing: an invalid address, the interpreter's own.
    let out = agree(
        "syscall::write:entry { s = (char *)alloca(1); *s = 'a'; trace(*s); } \
         syscall::write:entry { trace(*s); } \
         syscall::write:entry { trace((uint64_t)s); }",
        1,
    );
    assert!(
        out.iter()
            .any(|o| matches!(o, Outcome::Fault(1, _, a) if *a == ALLOCA_BASE)),
        "{out:?}"
    );
    // A later firing: the pointer from the last one, read before and after this clause
    // allocates; another clause that allocated more reads its own memory through it.
    agree(
        "self char *p; \
         syscall::write:entry { trace((uint64_t)self->p); trace(self->p == NULL); } \
         syscall::write:entry { this->a = (char *)alloca(16); \
             self->p = (char *)alloca(8) + 2; self->p[0] = 3; trace(*self->p); } \
         syscall::write:entry { this->b = (char *)alloca(32); this->b[18] = 4; \
             trace(*self->p); trace(self->p[5]); } \
         syscall::write:entry { trace(self->p[0]); }",
        2,
    );
    // Never stored: NULL.
    agree(
        "self char *q; syscall::write:entry { trace(*self->q); } \
         syscall::write:entry { self->q = (char *)alloca(4); self->q = 0; trace(*self->q); }",
        2,
    );
}

#[test]
fn pointers_kept_in_variables_move_between_them_as_the_interpreters() {
    agree(
        "syscall::write:entry { self->p = (char *)copyin(arg1, 11); this->x = self->p + 6; \
         g = this->x; trace(stringof(g)); trace(g - self->p); trace(stringof(self->p)); \
         self->p[1] = 'u'; trace(stringof(this->x - 6)); }",
        1,
    );
}

#[test]
fn a_variable_holding_pointers_and_other_values_stays_in_dtrace_with_a_reason() {
    // The compiler keeps an identifier to alloca() pointers or to other values
    // (D_ALLOCA_INCOMPAT): a context that says otherwise gets a reason, not wrong code.
    let objs = &program_clauses("syscall::write:entry { self->n = arg0; }")[0];
    let ctx = AllocaProbe {
        p: user_probe(),
        locals: Vec::new(),
        vars: vec![(true, 0x500)],
        limit: 1 << 20,
        allocates: false,
    };
    let e = translate_value(&objs[0], &ctx, 257, FRAME).unwrap_err();
    assert!(
        e.to_string()
            .contains("self->n holds alloca() pointers and another value"),
        "{e}"
    );
    // Without the program's knowledge (a context that keeps no such variable): the old reason.
    let objs = &program_clauses("syscall::write:entry { self->p = (char *)alloca(8); }")[0];
    let ctx = AllocaProbe {
        p: user_probe(),
        locals: Vec::new(),
        vars: Vec::new(),
        limit: 1 << 20,
        allocates: true,
    };
    let e = translate_value(&objs[0], &ctx, 257, FRAME).unwrap_err();
    assert!(
        e.to_string()
            .contains("an alloca() pointer stored in self->p"),
        "{e}"
    );
}

#[test]
fn the_variables_holding_pointers_are_found_across_clauses() {
    let clauses = program_clauses(
        "syscall::write:entry { self->a = (char *)alloca(8); b = 1; } \
         syscall::read:entry { c = self->a + 1; this->l = (char *)copyin(arg1, 2); self->d = this->l; } \
         syscall::read:entry { self->e = self->d - 1; self->f = self->d - self->d; }",
    );
    let vars = program_vars(&clauses);
    // self->a, c, self->d, self->e; not b (an integer) nor self->f (a difference).
    assert_eq!(vars.len(), 4, "{vars:?}");
    assert!(vars.iter().filter(|(t, _)| *t).count() == 3, "{vars:?}");
}
