//! Every construct compiles, with the action shapes of `dtrace_dif::program` and the DIF shapes that
//! matter (short-circuit branches, `scmp`, the tuple stack, deduplicated tables); every object of a
//! corpus of real-world scripts passes structural checks.

use dtrace_compiler::{compile, CompileOptions, SourceKind};
use dtrace_dif::instr::Instr;
use dtrace_dif::opcode::Opcode;
use dtrace_dif::program::{lquantize_arg, ActionKind, LibAction, Program};
use dtrace_dif::DifObject;

fn c(src: &str) -> Program {
    compile(src, &CompileOptions::default()).unwrap_or_else(|e| panic!("{src}: {e}"))
}

fn cw(src: &str) -> Program {
    let o = CompileOptions {
        destructive: true,
        ..Default::default()
    };
    compile(src, &o).unwrap_or_else(|e| panic!("{src}: {e}"))
}

fn kinds(p: &Program) -> Vec<ActionKind> {
    p.ecbs[0].actions.iter().map(|a| a.kind).collect()
}

fn instrs(o: &DifObject) -> Vec<Instr> {
    o.text
        .iter()
        .map(|w| Instr::decode(*w).expect("valid"))
        .collect()
}

fn ops(o: &DifObject) -> Vec<Opcode> {
    instrs(o).iter().map(|i| i.opcode()).collect()
}

/// Structural rules the verifier enforces: valid opcodes and registers, forward in-range branches,
/// table references in range, ends with `ret`, no writes to `%r0`.
fn check_object(o: &DifObject) {
    let is = instrs(o);
    assert!(
        matches!(is.last(), Some(Instr::Ret { .. })),
        "ends with ret"
    );
    for (pc, i) in is.iter().enumerate() {
        assert_eq!(i.encode(), o.text[pc], "reserved bits clear");
        match *i {
            Instr::Branch { label, .. } => {
                assert!(
                    label as usize > pc && (label as usize) < is.len(),
                    "forward branch"
                )
            }
            Instr::Setx { idx, rd } => {
                assert!((idx as usize) < o.inttab.len());
                assert!(rd > 0 && rd < 8);
            }
            Instr::Sets { idx, rd } => {
                assert!(o.string_at(idx as usize).is_some());
                assert!(rd > 0 && rd < 8);
            }
            Instr::Alu { r1, r2, rd, .. } => assert!(r1 < 8 && r2 < 8 && rd > 0 && rd < 8),
            Instr::Mov { r1, rd } | Instr::Not { r1, rd } => assert!(r1 < 8 && rd > 0 && rd < 8),
            Instr::LoadVar { var, .. } | Instr::StoreVar { var, .. } if var >= 0x500 => {
                assert!(o.vartab.iter().any(|v| v.id == var as u32), "var in vartab");
            }
            _ => {}
        }
    }
    for v in &o.vartab {
        assert!(o.string_at(v.name as usize).is_some());
    }
    let mut ints = o.inttab.clone();
    ints.sort();
    ints.dedup();
    assert_eq!(ints.len(), o.inttab.len(), "integer table deduplicated");
}

fn check_program(p: &Program) {
    for e in &p.ecbs {
        if let Some(pr) = &e.predicate {
            check_object(pr);
        }
        for a in &e.actions {
            if let Some(o) = &a.difo {
                check_object(o);
            }
        }
    }
}

#[test]
fn clauses_and_probe_descriptions() {
    let p = c(
        "syscall::read:entry, syscall::write:entry /pid == 1/ { trace(arg0); } BEGIN {} END { }",
    );
    assert_eq!(p.ecbs.len(), 4);
    assert_eq!(p.ecbs[0].probe.function, "read");
    assert_eq!(p.ecbs[1].probe.function, "write");
    assert!(p.ecbs[0].predicate.is_some());
    assert_eq!(p.ecbs[0].actions, p.ecbs[1].actions);
    assert!(p.ecbs[2].actions.is_empty());
    let p = c(
        "fbt::vfs_*:entry, pid123:libc.so.6:mal?oc:entry, tick-1sec, profile:::profile-[0-9]* { }",
    );
    assert_eq!(p.ecbs[0].probe.function, "vfs_*");
    assert_eq!(p.ecbs[2].probe.name, "tick-1sec");
    let o = CompileOptions {
        source: SourceKind::String,
        ..Default::default()
    };
    let p = compile("BEGIN", &o).unwrap();
    assert_eq!(p.ecbs.len(), 1);
    let o = CompileOptions {
        macros: vec![("target".into(), "42".into())],
        ..Default::default()
    };
    let p = compile("pid$target::malloc:entry { }", &o).unwrap();
    assert_eq!(p.ecbs[0].probe.provider, "pid42");
}

#[test]
fn trace_and_printf_shapes() {
    let p = c("BEGIN { trace(1); trace(\"s\"); printf(\"%d %s %x\\n\", arg0, execname, 3); printf(\"hi\\n\"); }");
    assert_eq!(
        kinds(&p),
        [
            ActionKind::DifExpr,
            ActionKind::DifExpr,
            ActionKind::Printf,
            ActionKind::DifExpr,
            ActionKind::DifExpr,
            ActionKind::Printf
        ]
    );
    let a = &p.ecbs[0].actions;
    assert_eq!(p.formats, [b"%d %s %x\n".to_vec(), b"hi\n".to_vec()]);
    assert_eq!(a[2].arg, 0);
    assert_eq!(a[5].arg, 1);
    assert!(a[5].difo.is_none());
    assert_eq!(a[0].difo.as_ref().unwrap().rtype.size, 4);
    assert!(a[1].difo.as_ref().unwrap().rtype.is_string());
    // strsize (256) characters and the NUL, as DTrace for Linux records a string
    assert_eq!(a[1].difo.as_ref().unwrap().rtype.size, 257);
    // a statement expression records nothing
    let p = c("BEGIN { x = 1; }");
    assert_eq!(p.ecbs[0].actions[0].difo.as_ref().unwrap().rtype.size, 0);
}

#[test]
fn format_strings_keep_escaped_bytes_that_are_not_utf8() {
    let p = c("BEGIN { printf(\"\\xc0\\xa8%d\\n\", 1); }");
    assert_eq!(p.formats, [b"\xc0\xa8%d\n".to_vec()]);
}

#[test]
fn aggregation_shapes() {
    let p = c(r#"BEGIN {
        @c[execname, pid] = count();
        @s = sum(arg0); @a = avg(arg0); @mn = min(arg0); @mx = max(arg0); @sd = stddev(arg0);
        @q = quantize(arg0); @l = lquantize(arg0, 0, 100, 10); @ll = llquantize(arg0, 10, 0, 6, 20);
        @[probefunc] = count();
    }"#);
    let a = &p.ecbs[0].actions;
    assert_eq!(a[0].kind, ActionKind::DifExpr);
    assert_eq!(a[1].kind, ActionKind::DifExpr);
    assert_eq!(a[2].kind, ActionKind::AggCount);
    assert_eq!(a[2].ntuple, 2);
    assert_eq!(a[2].uarg, 1);
    assert!(a[2].difo.is_none());
    let ks: Vec<ActionKind> = a[3..].iter().map(|x| x.kind).collect();
    assert_eq!(
        ks,
        [
            ActionKind::AggSum,
            ActionKind::AggAvg,
            ActionKind::AggMin,
            ActionKind::AggMax,
            ActionKind::AggStddev,
            ActionKind::AggQuantize,
            ActionKind::AggLquantize,
            ActionKind::AggLlquantize,
            ActionKind::DifExpr,
            ActionKind::AggCount
        ]
    );
    assert_eq!(a[9].arg, lquantize_arg(0, 10, 10));
    assert_eq!(a[10].arg, dtrace_dif::program::llquantize_arg(10, 0, 6, 20));
    let names: Vec<&str> = p.aggregations.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["c", "s", "a", "mn", "mx", "sd", "q", "l", "ll", ""]);
    assert_eq!(a[12].uarg, 10);
    // key records from sym()/ustack()
    let p = c("BEGIN { @[func(arg0), ustack(5)] = count(); @k[stack()] = count(); }");
    let ks = kinds(&p);
    assert_eq!(
        ks,
        [
            ActionKind::Sym,
            ActionKind::Ustack,
            ActionKind::AggCount,
            ActionKind::Stack,
            ActionKind::AggCount
        ]
    );
}

#[test]
fn printa_and_aggregation_library_actions() {
    let p = c(r#"BEGIN { @a[1] = count(); @b[1] = sum(1); }
        END { printa(@a); printa("%d %@d %@d\n", @a, @b); clear(@a); trunc(@a, 5); trunc(@b); normalize(@a, 10); denormalize(@a); }"#);
    let a = &p.ecbs[1].actions;
    let ks: Vec<ActionKind> = a.iter().map(|x| x.kind).collect();
    use ActionKind::*;
    assert_eq!(
        ks,
        [Printa, Printa, Printa, LibAct, LibAct, LibAct, LibAct, LibAct, LibAct, LibAct]
    );
    // A count is a second record of its action (DTrace's form).
    assert_eq!(a[4].arg, a[5].arg);
    assert_eq!(a[7].arg, a[8].arg);
    assert_ne!(a[4].arg, a[7].arg);
    assert_eq!(a[0].arg, dtrace_compiler::NO_FORMAT);
    // Every aggregation of one printa() is a printa record with the statement's format.
    assert_eq!((a[1].arg, a[2].arg), (0, 0));
    assert_eq!(p.formats, [b"%d %@d %@d\n".to_vec()]);
    // Each printa() statement has its own format entry, even when the text repeats.
    let p = c(r#"BEGIN { @a = count(); @b = count(); printa("%@d\n", @a); printa("%@d\n", @b); }"#);
    let args: Vec<u64> = p.ecbs[0].actions[2..].iter().map(|x| x.arg).collect();
    assert_eq!(args, [0, 1]);
    assert_eq!(p.formats, [b"%@d\n".to_vec(), b"%@d\n".to_vec()]);
    assert_eq!(a[3].arg, LibAction::Clear as u64);
    assert_eq!(a[4].arg, LibAction::Trunc as u64);
    assert_eq!(a[6].arg, LibAction::Trunc as u64);
    assert_eq!(a[7].arg, LibAction::Normalize as u64);
    assert_eq!(a[9].arg, LibAction::Denormalize as u64);
    // the objects yield the aggregation ids
    let id = |i: usize| a[i].difo.as_ref().unwrap().inttab[0];
    assert_eq!((id(0), id(1), id(2), id(3)), (1, 1, 2, 1));
}

#[test]
fn other_actions() {
    use ActionKind::*;
    let p = c("BEGIN { exit(0); } BEGIN { stack(); ustack(); ustack(3, 100); jstack(); tracemem(arg0, 32); tracemem(arg0, 32, arg1); }");
    assert_eq!(kinds(&p), [Exit]);
    let a = &p.ecbs[1].actions;
    assert_eq!(a[0].kind, Stack);
    assert_eq!(a[0].arg, 20);
    assert_eq!(a[1].arg, 100);
    assert_eq!(a[2].arg, 3 | (100 << 32));
    assert_eq!(a[3].kind, Jstack);
    assert_eq!(a[3].arg, 50 | (512 << 32));
    assert_eq!((a[4].kind, a[4].arg), (Tracemem, 32));
    // The address comes back by reference, 32 bytes of it (libdtrace's dt_action_tracemem).
    let rt = a[4].difo.as_ref().unwrap().rtype;
    assert!(rt.is_by_ref() && rt.size == 32, "{rt:?}");
    // With a dynamic size, its integer record comes first, then the memory.
    assert_eq!((a[5].kind, a[6].kind), (TracememDynsize, Tracemem));
    assert_eq!(a[5].difo.as_ref().unwrap().rtype.size, 8);
    assert_eq!(a[6].arg, 32);
    // Even an int dynamic size is recorded as 64 bits.
    let p = c("BEGIN { tracemem(arg0, 32, 3); }");
    assert_eq!(p.ecbs[0].actions[0].difo.as_ref().unwrap().rtype.size, 8);
    let p = c("BEGIN { self->spec = speculation(); speculate(self->spec); trace(1); } END { commit(1); } END { discard(1); }");
    assert_eq!(kinds(&p)[1], Speculate);
    assert_eq!(p.ecbs[1].actions[0].kind, Commit);
    assert_eq!(p.ecbs[2].actions[0].kind, Discard);
    let p =
        c("BEGIN { setopt(\"quiet\"); setopt(\"bufsize\", \"4m\"); ftruncate(); print((int *)arg0); }");
    // A setopt() without a value still records one (the constant 0), as DTrace does, as a
    // second record of the action.
    assert_eq!(kinds(&p), [LibAct; 7]);
    let a = &p.ecbs[0].actions;
    assert!(a[..4].iter().all(|x| x.arg == a[0].arg));
    let p = cw("BEGIN { raise(9); stop(); system(\"echo %d\", pid); chill(100); breakpoint(); panic(); freopen(\"/tmp/x\"); copyoutstr(\"a\", arg0, 2); }");
    assert_eq!(
        kinds(&p),
        [Raise, Stop, System, Chill, Breakpoint, Panic, Freopen, DifExpr]
    );
    assert!(kinds(&p).iter().filter(|k| k.is_destructive()).count() >= 6);
}

#[test]
fn short_circuit_uses_forward_branches() {
    let p = c("BEGIN /arg0 && arg1 || arg2/ { }");
    let o = p.ecbs[0].predicate.as_ref().unwrap();
    let is = instrs(o);
    let branches = is
        .iter()
        .filter(|i| matches!(i, Instr::Branch { .. }))
        .count();
    assert!(branches >= 4);
    check_object(o);
    // arg1 is evaluated after the first test-and-branch
    let first_branch = is
        .iter()
        .position(|i| matches!(i, Instr::Branch { .. }))
        .unwrap();
    let ldgs_arg1 = is
        .iter()
        .position(|i| matches!(i, Instr::LoadVar { var: 0x107, .. }))
        .unwrap();
    assert!(first_branch < ldgs_arg1);
}

#[test]
fn strings_compare_with_scmp_and_keys_use_the_tuple_stack() {
    let p = c("BEGIN /execname == \"sh\"/ { a[execname, 1] = 1; }");
    let pr = ops(p.ecbs[0].predicate.as_ref().unwrap());
    assert!(pr.contains(&Opcode::Scmp));
    assert!(!pr.contains(&Opcode::Cmp));
    let act = ops(p.ecbs[0].actions[0].difo.as_ref().unwrap());
    assert_eq!(
        act.iter()
            .filter(|o| matches!(o, Opcode::Pushtr | Opcode::Pushtv))
            .count(),
        2
    );
    assert!(act.contains(&Opcode::Flushts));
    assert!(act.contains(&Opcode::Stgaa));
    let p = c("BEGIN { self->a[1] = 2; trace(self->a[1]); }");
    assert!(ops(p.ecbs[0].actions[0].difo.as_ref().unwrap()).contains(&Opcode::Sttaa));
    assert!(ops(p.ecbs[0].actions[1].difo.as_ref().unwrap()).contains(&Opcode::Ldtaa));
}

#[test]
fn tables_are_deduplicated_and_constants_folded() {
    let p = c("BEGIN { trace(arg0 + 7 + arg1 + 7); trace(\"ab\" == execname || \"ab\" == probefunc); trace(2 * 3 + 4); }");
    let a = &p.ecbs[0].actions;
    assert_eq!(a[0].difo.as_ref().unwrap().inttab, [7]);
    let s = &a[1].difo.as_ref().unwrap().strtab;
    assert_eq!(s.iter().filter(|b| **b == 0).count(), 1);
    let o = a[2].difo.as_ref().unwrap();
    assert_eq!(o.inttab, [10]);
    assert_eq!(o.text.len(), 2);
}

#[test]
fn variables_get_their_scopes_and_types() {
    let p =
        c("int g; self int t; this int l; BEGIN { g = 1; self->t = 2; this->l = 3; s = \"x\"; }");
    let a = &p.ecbs[0].actions;
    let op = |i: usize| ops(a[i].difo.as_ref().unwrap());
    assert!(op(0).contains(&Opcode::Stgs));
    assert!(op(1).contains(&Opcode::Stts));
    assert!(op(2).contains(&Opcode::Stls));
    let v = &a[3].difo.as_ref().unwrap().vartab[0];
    assert!(v.ty.is_string());
    assert_eq!(v.id, 0x501);
    assert_eq!(a[0].difo.as_ref().unwrap().vartab[0].ty.size, 4);
}

#[test]
fn declarations_types_and_casts() {
    c(r#"
        typedef unsigned long long u64_t;
        typedef struct foo { int a; char name[16]; struct foo *next; } foo_t;
        union u { int i; char c[8]; };
        enum dir { IN, OUT = 4 };
        int arr[10];
        u64_t big;
        string names[int, string];
        self foo_t *cur;
        inline string NAME = "me";
        BEGIN {
            big = (u64_t)arg0 << 3;
            self->cur = (foo_t *)arg1;
            trace(self->cur->a);
            trace(stringof(self->cur->name));
            trace(self->cur->next->a);
            trace(sizeof (foo_t) + sizeof (union u) + offsetof(foo_t, next));
            trace(OUT);
            trace(NAME);
            names[1, "a"] = "b";
            trace((long)&((foo_t *)0)->next);
            trace(*(int *)arg0);
            trace(((int *)arg0)[3]);
            trace((uintptr_t)(char *)arg0 + 1);
            trace(((foo_t *)arg1)->name[2]);
        }
    "#);
}

#[test]
fn pragmas_and_options() {
    let p = c("#pragma D option quiet\n#pragma D option bufsize=4m\n#pragma D option strsize=64\n#pragma D depends_on module unix\nBEGIN { trace(execname); }");
    assert_eq!(
        p.options,
        [
            ("quiet".to_string(), None),
            ("bufsize".to_string(), Some("4m".to_string())),
            ("strsize".to_string(), Some("64".to_string()))
        ]
    );
    assert_eq!(p.ecbs[0].actions[0].difo.as_ref().unwrap().rtype.size, 65);
    // trace() of a string is marked as one, so a record of 4 or 8 bytes is not printed as a number
    assert_eq!(p.ecbs[0].actions[0].arg, dtrace_dif::program::TRACE_STRING);
}

#[test]
fn subroutines_compile_with_their_prototypes() {
    let p = c(r#"BEGIN {
        trace(copyinstr(arg0)); trace(copyinstr(arg0, 10)); trace(strlen("abc")); trace(strjoin("a", "b"));
        trace(basename("/a/b")); trace(dirname("/a/b")); trace(cleanpath("/a/../b"));
        trace(strchr("abc", 'b')); trace(strrchr("abc", 'b')); trace(strstr("abc", "b")); trace(strtok("a b", " "));
        trace(substr("abc", 1)); trace(index("abc", "b")); trace(rindex("abc", "b", 2)); trace(lltostr(12));
        trace(htons(1)); trace(htonl(1)); trace(htonll(1)); trace(ntohs(1)); trace(ntohl(1)); trace(ntohll(1));
        trace(toupper("a")); trace(tolower("A")); trace(rand()); trace(random()); trace(progenyof(1));
        trace(inet_ntoa((ipaddr_t *)arg0)); trace(inet_ntop(2, (void *)arg0)); trace(strtoll("12"));
        this->p = alloca(10); bcopy((void *)arg0, this->p, 10); trace((long)copyin(arg0, 8));
        trace(speculation()); trace(getmajor(0)); trace(json("{}", "a"));
    }"#);
    check_program(&p);
    let o = p.ecbs[0].actions[0].difo.as_ref().unwrap();
    assert!(instrs(o).contains(&Instr::Call { subr: 9, rd: 1 }));
}

const CORPUS: &[&str] = &[
    include_str!("scripts/opens.d"),
    r#"#!/usr/sbin/dtrace -qs
BEGIN { printf("%Y\n", walltimestamp); }
"#,
    r#"
#pragma D option quiet
syscall::read:entry
/execname == "bash"/
{
    self->ts = timestamp;
}
syscall::read:return
/self->ts/
{
    @lat["read", execname] = quantize(timestamp - self->ts);
    @bytes[pid] = sum(arg0 > 0 ? arg0 : 0);
    self->ts = 0;
}
tick-10s
{
    printa("%-16s %-16s %@d\n", @lat);
    trunc(@bytes, 10);
    exit(0);
}
"#,
    r#"
proc:::exec-success { printf("%d %s\n", pid, curpsinfo_fake ? "x" : execname); }
"#,
    r#"
syscall:::entry /pid == $target/ { @[probefunc] = count(); }
END { printa(@); }
"#,
    r#"
fbt::do_sys_open:entry
{
    self->path = copyinstr(arg1);
    self->spec = speculation();
    speculate(self->spec);
    printf("%s", self->path);
}
fbt::do_sys_open:return
/self->spec && (int)arg1 < 0/
{
    commit(self->spec);
    self->spec = 0;
}
fbt::do_sys_open:return
/self->spec/
{
    discard(self->spec);
    self->spec = 0;
}
"#,
    r#"
int last[int];
profile-997 /arg0/ { @k[stack(), cpu] = count(); last[cpu] = timestamp; }
profile-997 /arg1/ { @u[ustack(), execname] = count(); @h = lquantize(last[cpu] % 100, 0, 100, 5); }
"#,
];

#[test]
fn corpus_objects_are_well_formed() {
    for (i, src) in CORPUS.iter().enumerate() {
        let src = src.replace("curpsinfo_fake", "arg0");
        let opts = CompileOptions {
            macros: vec![("target".into(), "1".into())],
            ..Default::default()
        };
        let p = compile(&src, &opts).unwrap_or_else(|e| panic!("corpus #{i}: {e}"));
        check_program(&p);
        assert!(!dtrace_compiler::listing(&p).is_empty());
    }
}

#[test]
fn aggregation_increments_follow_dtrace_hasarg() {
    let p = c("BEGIN { @q[pid] = quantize(arg0, 5); @l = lquantize(arg0, 0, 10, 1, arg1); @ll = llquantize(arg0, 10, 0, 3, 10, 2); }");
    let a = &p.ecbs[0].actions;
    use ActionKind::*;
    let ks: Vec<ActionKind> = a.iter().map(|x| x.kind).collect();
    assert_eq!(
        ks,
        [
            DifExpr,
            DifExpr,
            AggQuantize,
            DifExpr,
            AggLquantize,
            DifExpr,
            AggLlquantize
        ]
    );
    // the increment is a zero-size DIFEXPR counted in ntuple
    assert_eq!(a[1].difo.as_ref().unwrap().rtype.size, 0);
    assert_eq!(a[2].ntuple, 2);
    assert_eq!(a[4].ntuple, 1);
    assert_eq!(a[6].ntuple, 1);
}
