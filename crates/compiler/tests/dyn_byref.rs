//! Dynamic variables holding structs and arrays (`self->s.x = 1`, `a[k].x = 1`, `self->arr[2] = 5`,
//! `self->s = *p`): compiled D run in the `dif` interpreter; stores go to the variable's storage and
//! persist across clauses and firings, as in DTrace.

use dtrace_compiler::{compile, CompileOptions};
use dtrace_dif::program::Program;
use dtrace_dif::vm::fake::{FakeContext, FakeMemory};
use dtrace_dif::vm::{Machine, Prepared, VarState, VmOptions};

struct Run {
    state: VarState,
    m: Machine,
    ctx: FakeContext,
    mem: FakeMemory,
}

impl Run {
    fn new() -> Run {
        let mut ctx = FakeContext::new();
        ctx.args = vec![0x1000, 2];
        let mut mem = FakeMemory::new();
        // struct foo { int x; long y; } at 0x1000: x = 3, y = 40.
        let mut b = 3u32.to_le_bytes().to_vec();
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&40u64.to_le_bytes());
        mem.kernel.insert(0x1000, b);
        Run {
            state: VarState::new(VmOptions::default()),
            m: Machine::new(),
            ctx,
            mem,
        }
    }

    /// One firing of every ECB of `p` (each its own firing when `per_ecb`); the integer results of
    /// actions that return a value.
    fn fire(&mut self, p: &Program, per_ecb: bool) -> Vec<i64> {
        let mut out = Vec::new();
        self.m.begin_firing();
        for ecb in &p.ecbs {
            if per_ecb {
                self.state.dynvars.clean();
                self.m.begin_firing();
            }
            for a in &ecb.actions {
                let Some(o) = &a.difo else { continue };
                let prepared = Prepared::new(o.clone());
                let r = self
                    .m
                    .run_prepared(&prepared, &mut self.state, &mut self.ctx, &mut self.mem)
                    .unwrap_or_else(|f| panic!("fault {f:?}"));
                if o.rtype.size > 0 {
                    let v = match o.rtype.size {
                        4 => r as u32 as i32 as i64,
                        _ => r as i64,
                    };
                    out.push(v);
                }
            }
        }
        out
    }
}

fn run(src: &str, per_ecb: bool) -> Vec<i64> {
    let p = compile(src, &CompileOptions::default()).unwrap_or_else(|e| panic!("{src}: {e}"));
    Run::new().fire(&p, per_ecb)
}

const FOO: &str = "struct foo { int x; long y; };\n";

#[test]
fn thread_local_struct_members_persist() {
    let src = format!(
        "{FOO}self struct foo s;\nBEGIN {{ self->s.x = 1; self->s.y = 30; }}\nBEGIN {{ trace(self->s.x + self->s.y); trace(self->s.x); }}\n"
    );
    assert_eq!(run(&src, false), [31, 1]);
    // Each clause its own firing: still there.
    assert_eq!(run(&src, true), [31, 1]);
}

#[test]
fn associative_array_struct_elements_persist() {
    let src = format!(
        "{FOO}struct foo a[int];\nBEGIN {{ a[1].x = 5; a[2].y = 7; a[1].x += 2; }}\nBEGIN {{ trace(a[1].x); trace(a[2].y); trace(a[1].y); trace(a[2].x); }}\n"
    );
    assert_eq!(run(&src, true), [7, 7, 0, 0]);
    let src = format!(
        "{FOO}self struct foo t[string];\nBEGIN {{ self->t[\"k\"].y = 9; }}\nBEGIN {{ trace(self->t[\"k\"].y); }}\n"
    );
    assert_eq!(run(&src, true), [9]);
}

#[test]
fn thread_local_arrays_keep_element_stores() {
    let src = "self int arr[4];\nBEGIN { self->arr[2] = 5; self->arr[0] = 1; }\nBEGIN { trace(self->arr[2]); trace(self->arr[0] + self->arr[3]); }\n";
    assert_eq!(run(src, true), [5, 1]);
}

#[test]
fn whole_structs_copy_into_dynamic_storage() {
    let src = format!(
        "{FOO}self struct foo s;\nstruct foo a[int];\nBEGIN {{ self->s = *(struct foo *)arg0; a[arg1] = self->s; self->s.x = 100; }}\n\
         BEGIN {{ trace(self->s.x); trace(self->s.y); trace(a[2].x); trace(a[2].y); }}\n"
    );
    // a[2] got a copy: the later store into self->s does not change it.
    assert_eq!(run(&src, true), [100, 40, 3, 40]);
}

#[test]
fn clause_local_structs_copy_and_store() {
    let src = format!(
        "{FOO}this struct foo l;\nBEGIN {{ this->l = *(struct foo *)arg0; this->l.y += 2; trace(this->l.x); trace(this->l.y); }}\n"
    );
    assert_eq!(run(&src, false), [3, 42]);
}

#[test]
fn clause_local_arrays_keep_element_stores_within_the_firing() {
    let src = "this int a[4];\nBEGIN { this->a[1] = 4; this->a[3] = 6; }\nBEGIN { trace(this->a[1] + this->a[3]); }\n";
    // Clause-locals live for the firing: the second clause sees the first's stores.
    assert_eq!(run(src, false), [10]);
    // A new firing starts them over.
    assert_eq!(run(src, true), [0]);
}

/// The program's largest tuple and dynamic variable, which size every dynamic variable as DTrace
/// for Linux's map does.
#[test]
fn programs_carry_their_largest_tuple_and_dynamic_variable() {
    let sizes = |src: &str| {
        let p = compile(src, &CompileOptions::default()).unwrap();
        (p.max_tuple_size, p.max_dvar_size)
    };
    // A 4-byte id, the int key, an 8-byte thread key; an int value.
    assert_eq!(sizes("BEGIN { a[1] = 1; }"), (16, 4));
    // Thread-locals have no tuple.
    assert_eq!(sizes("BEGIN { self->x = 1; }"), (0, 4));
    assert_eq!(sizes("BEGIN { self->x = (long)1; }"), (0, 8));
    // A string key takes strsize and its NUL; a long key aligns to 8.
    assert_eq!(sizes("BEGIN { a[1, \"x\"] = 1; }"), (4 + 4 + 257 + 8, 4));
    assert_eq!(
        sizes("BEGIN { a[(char)1, (long)2] = 1; }"),
        (4 + 1 + 3 + 8 + 8, 4)
    );
    // Aggregation keys are tuples too.
    assert_eq!(sizes("BEGIN { @[1, 2] = count(); }"), (4 + 4 + 4 + 8, 0));
    assert_eq!(sizes("BEGIN { trace(1); }"), (0, 0));
}
