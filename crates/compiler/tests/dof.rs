//! Compiled programs as DOF: every action kind and aggregating function, predicates, formats and
//! pragma options survive compile -> DOF (model and bytes, and inside an ELF object) -> program, and
//! the DOF of one small program has DTrace's section layout, byte for byte.

use dtrace_compiler::{compile, CompileOptions};
use dtrace_dif::program::{ActionKind, Program};
use dtrace_dof::program::{
    canonical_options, program_from_dof, program_from_dof_bytes, program_to_dof,
    program_to_dof_bytes, ProgramDofError, ProgramDofExtras,
};
use dtrace_dof::*;

fn cw(src: &str) -> Program {
    let o = CompileOptions {
        destructive: true,
        ..Default::default()
    };
    compile(src, &o).unwrap_or_else(|e| panic!("{src}: {e}"))
}

/// The program as DOF gives it back: aggregation names, option spellings, print() types and
/// stability attributes are not carried.
fn expected(p: &Program) -> Program {
    let mut e = p.clone();
    e.print_types.clear();
    e.attrs.clear();
    for a in &mut e.aggregations {
        a.name.clear();
    }
    // DOF's ECB descriptions carry no source line, nor does DOF carry the program's largest tuple
    // and dynamic variable (a program read from DOF sizes each variable by its own cost).
    for ecb in &mut e.ecbs {
        ecb.line = 0;
    }
    (e.max_tuple_size, e.max_dvar_size) = (0, 0);
    e.options = canonical_options(&p.options).unwrap();
    e
}

const SCRIPTS: &[&str] = &[
    include_str!("scripts/actions.d"),
    include_str!("scripts/latency.d"),
    include_str!("scripts/opens.d"),
    include_str!("scripts/speculation.d"),
    include_str!("scripts/types.d"),
    r#"
#pragma D option quiet
#pragma D option bufsize=4m
#pragma D option switchrate=10hz
#pragma D option aggrate=1ms
#pragma D option bufpolicy=ring
#pragma D option bufresize=manual
#pragma D option nspec=0x4
#pragma D option defaultargs
#pragma D option flowindent
syscall::read:entry, syscall::write:entry
/execname == "bash" && arg2 > 10/
{
    @c[probefunc] = count();
    @mn[pid] = min(arg2);
    @mx[pid] = max(arg2);
    @av[pid, tid] = avg(arg2);
    @sm = sum(arg2);
    @sd = stddev(arg2);
    @q = quantize(arg2);
    @l[execname] = lquantize(arg2, 0, 100, 10);
    @ll = llquantize(arg2, 10, 0, 6, 20);
}
END
{
    printa(@c);
    printa("%s %@d\n", @c);
    printa("%d %@d %@d\n", @mn, @mx);
    normalize(@sm, 10);
    denormalize(@sm);
    trunc(@l, 3);
    trunc(@q);
    clear(@c);
    printf("%d %s %d\n", pid, execname, 42);
    printf("%d %s %d\n", tid, execname, 43);
    trace(timestamp);
    sym(arg0); mod(arg0); usym(arg1); umod(arg1); uaddr(arg1); func(arg0); ufunc(arg1);
    stack(); ustack(); ustack(5, 200); jstack();
    tracemem(arg0, 64); tracemem(arg0, 64, arg1);
    setopt("quiet"); setopt("bufsize", "4m");
    ftruncate(); print((int *)arg0);
    exit(0);
}
"#,
    r#"
BEGIN { raise(9); stop(); system("echo %d", pid); chill(100); breakpoint(); panic(); freopen("/tmp/x"); freopen(""); copyoutstr("a", arg0, 2); }
BEGIN { printf("%s", "x"); printf("%d\n", 1); printf("%s", "y"); }
tick-1s { x = 1; self->y = 2; this->z = 3; a[1, "b"] = 4; self->t[pid] = 5; trace(x + self->y + this->z + a[1, "b"] + self->t[pid]); }
"#,
];

#[test]
fn every_script_round_trips_through_dof() {
    for src in SCRIPTS {
        let p = cw(src);
        let f = program_to_dof(&p, &ProgramDofExtras::default()).unwrap();
        validate(&f).unwrap();
        assert_eq!(program_from_dof(&f).unwrap(), expected(&p), "{src}");
        let bytes = write_dof(&f).unwrap();
        assert_eq!(read_dof(&bytes).unwrap(), f);
        assert_eq!(program_from_dof_bytes(&bytes).unwrap(), expected(&p));
        let extras = ProgramDofExtras {
            comments: Some("Sun D 1.13".into()),
            utsname: Some(Utsname::new(["Linux", "h", "6", "#1", "x86_64"])),
        };
        let dt = program_to_dof_bytes(&p, &extras).unwrap();
        assert_eq!(program_from_dof_bytes(&dt).unwrap(), expected(&p));
        let elf = dof_to_elf(&dt, object::Architecture::X86_64, &[]).unwrap();
        assert_eq!(program_from_dof_bytes(&elf).unwrap(), expected(&p));
    }
}

#[test]
fn every_action_kind_and_aggregation_is_covered() {
    let mut seen = std::collections::HashSet::new();
    for src in SCRIPTS {
        for e in cw(src).ecbs {
            for a in e.actions {
                seen.insert(a.kind);
            }
        }
    }
    use ActionKind::*;
    for k in [
        DifExpr,
        Exit,
        Printf,
        Printa,
        LibAct,
        Tracemem,
        TracememDynsize,
        Ustack,
        Jstack,
        Usym,
        Umod,
        Uaddr,
        Stop,
        Raise,
        System,
        Freopen,
        Stack,
        Sym,
        Mod,
        Breakpoint,
        Panic,
        Chill,
        Speculate,
        Commit,
        Discard,
        AggCount,
        AggMin,
        AggMax,
        AggAvg,
        AggSum,
        AggStddev,
        AggQuantize,
        AggLquantize,
        AggLlquantize,
    ] {
        assert!(seen.contains(&k), "{k:?} not covered");
    }
}

#[test]
fn options_go_as_dtrace_numbers() {
    let p = cw("#pragma D option bufsize=4m\n#pragma D option quiet\n#pragma D option switchrate=10hz\n#pragma D option bufpolicy=fill\n#pragma D option defaultargs\nBEGIN { exit(0); }");
    let f = program_to_dof(&p, &ProgramDofExtras::default()).unwrap();
    let opts: Vec<OptDesc> = f
        .sections
        .iter()
        .find_map(|s| match &s.data {
            SectionData::OptDesc(o) => Some(o.clone()),
            _ => None,
        })
        .unwrap();
    let got: Vec<(u32, u32, u64)> = opts.iter().map(|o| (o.option, o.strtab, o.value)).collect();
    // DTRACEOPT_BUFSIZE 0, QUIET 12, SWITCHRATE 16, BUFPOLICY 1 (FILL = 1); defaultargs acts at
    // compile time and is not written.
    assert_eq!(
        got,
        vec![
            (0, DOF_SECIDX_NONE, 4 << 20),
            (12, DOF_SECIDX_NONE, 0),
            (16, DOF_SECIDX_NONE, 100_000_000),
            (1, DOF_SECIDX_NONE, 1),
        ]
    );
    assert_eq!(
        program_from_dof(&f).unwrap().options,
        vec![
            ("bufsize".to_string(), Some("4194304".to_string())),
            ("quiet".to_string(), None),
            ("switchrate".to_string(), Some("100000000".to_string())),
            ("bufpolicy".to_string(), Some("fill".to_string())),
        ]
    );
    let z = cw("#pragma D option zone=global\nBEGIN { exit(0); }");
    assert_eq!(
        program_to_dof(&z, &ProgramDofExtras::default()).unwrap_err(),
        ProgramDofError::OptionNotCarried("zone".into())
    );
}

#[test]
fn loader_rejects_what_dtrace_rejects() {
    let p = cw("#pragma D option quiet\nBEGIN { printf(\"%d\", 1); }");
    let mut f = program_to_dof(&p, &ProgramDofExtras::default()).unwrap();
    let k = f
        .sections
        .iter()
        .position(|s| matches!(s.data, SectionData::ActDesc(_)))
        .unwrap();
    if let SectionData::ActDesc(a) = &mut f.sections[k].data {
        a[0].kind = 0x0999;
    }
    assert!(matches!(
        program_from_dof(&f),
        Err(ProgramDofError::UnknownAction { kind: 0x0999, .. })
    ));
    // printf needs its format string.
    if let SectionData::ActDesc(a) = &mut f.sections[k].data {
        a[0].kind = ActionKind::Printf as u32;
        a[0].strtab = DOF_SECIDX_NONE;
    }
    assert!(matches!(
        program_from_dof(&f),
        Err(ProgramDofError::BadSection { .. })
    ));
    let mut f = program_to_dof(&p, &ProgramDofExtras::default()).unwrap();
    let k = f
        .sections
        .iter()
        .position(|s| matches!(s.data, SectionData::OptDesc(_)))
        .unwrap();
    if let SectionData::OptDesc(o) = &mut f.sections[k].data {
        o[0].value = (-2i64) as u64;
    }
    assert!(matches!(
        program_from_dof(&f),
        Err(ProgramDofError::BadOption { option: 12, .. })
    ));
    if let SectionData::OptDesc(o) = &mut f.sections[k].data {
        o[0].option = 40;
        o[0].value = 0;
    }
    assert!(program_from_dof(&f).is_err());
    // A DIF object the verifier refuses (its last instruction is not `ret`) is not loaded.
    let mut f = program_to_dof(&p, &ProgramDofExtras::default()).unwrap();
    let k = f
        .sections
        .iter()
        .position(|s| matches!(s.data, SectionData::Dif(_)))
        .unwrap();
    if let SectionData::Dif(w) = &mut f.sections[k].data {
        w.pop();
        w.push(0x0000_0000);
    }
    assert!(matches!(
        program_from_dof(&f),
        Err(ProgramDofError::BadDifo { .. })
    ));
}

fn u32s(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64s(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// `BEGIN /arg0 == 0/ { printf("hi %d\n", 7); exit(0); }`: DTrace's section sequence and each
/// section's header and bytes.
#[test]
fn small_program_section_layout() {
    let p = cw("BEGIN /arg0 == 0/ { printf(\"hi %d\\n\", 7); exit(0); }");
    let extras = ProgramDofExtras {
        comments: Some("D test".into()),
        utsname: Some(Utsname::new(["Linux", "host", "6.1", "#1", "x86_64"])),
    };
    let b = program_to_dof_bytes(&p, &extras).unwrap();
    // dof_hdr_t: magic, LP64, LSB, DOF version 1, DIF version 2, 8 + 8 registers.
    assert_eq!(&b[..10], b"\x7fDOF\x02\x01\x01\x02\x08\x08");
    assert_eq!(u32s(&b, 16), 0); // dofh_flags
    assert_eq!(u32s(&b, 20), 64); // dofh_hdrsize
    assert_eq!(u32s(&b, 24), 32); // dofh_secsize
    let n = u32s(&b, 28) as usize;
    assert_eq!(u64s(&b, 32), 64); // dofh_secoff
    let pred = &p.ecbs[0].predicate.as_ref().unwrap();
    let printf = p.ecbs[0].actions[0].difo.as_ref().unwrap();
    let exit = p.ecbs[0].actions[1].difo.as_ref().unwrap();
    // Each object's sections: DIF, then INTTAB/STRTAB/VARTAB when not empty, then the DIFOHDR.
    let difo_types = |o: &dtrace_dif::DifObject| {
        let mut t = vec![sect::DIF];
        if !o.inttab.is_empty() {
            t.push(sect::INTTAB);
        }
        if !o.strtab.is_empty() {
            t.push(sect::STRTAB);
        }
        if !o.vartab.is_empty() {
            t.push(sect::VARTAB);
        }
        t.push(sect::DIFOHDR);
        t
    };
    let mut types = vec![sect::STRTAB, sect::PROBEDESC];
    types.extend(difo_types(pred));
    types.extend(difo_types(printf));
    types.extend(difo_types(exit));
    types.extend([sect::ACTDESC, sect::ECBDESC, sect::COMMENTS, sect::UTSNAME]);
    assert_eq!(n, types.len());
    let hdr = |i: usize| {
        let o = 64 + 32 * i;
        (
            u32s(&b, o),
            u32s(&b, o + 4),
            u32s(&b, o + 8),
            u32s(&b, o + 12),
            u64s(&b, o + 16) as usize,
            u64s(&b, o + 24) as usize,
        )
    };
    // DTrace's layout: after the header and section headers, each loadable section's data in
    // section order at its alignment, the string table's after them all, then from the next 8-byte
    // boundary the unloadable sections'.
    let mut pos = 64 + 32 * n;
    let mut want_off = vec![0; n];
    for i in (1..n - 2).chain([0]) {
        let (_, align, _, _, _, size) = hdr(i);
        pos = pos.div_ceil(align as usize) * align as usize;
        want_off[i] = pos;
        pos += size;
    }
    let want_loadsz = pos;
    pos = pos.div_ceil(8) * 8;
    for (i, w) in want_off.iter_mut().enumerate().skip(n - 2) {
        *w = pos;
        pos += hdr(i).5;
    }
    assert_eq!(
        (0..n).map(|i| hdr(i).4).collect::<Vec<_>>(),
        want_off,
        "section offsets"
    );
    assert_eq!(pos, b.len());
    assert_eq!(u64s(&b, 40) as usize, want_loadsz);
    let mut loadsz = 0;
    for (i, &t) in types.iter().enumerate() {
        let (ty, align, flags, entsize, off, size) = hdr(i);
        assert_eq!(ty, t, "section {i}");
        let (want_align, want_ent) = match t {
            sect::STRTAB | sect::COMMENTS | sect::UTSNAME => (1, 0),
            sect::PROBEDESC => (4, 24),
            sect::DIF => (4, 4),
            sect::INTTAB => (8, 8),
            sect::VARTAB => (4, 20),
            sect::DIFOHDR => (4, 0),
            sect::ACTDESC => (8, 32),
            sect::ECBDESC => (8, 0),
            _ => unreachable!(),
        };
        assert_eq!((align, entsize), (want_align, want_ent), "section {i}");
        let loadable = !matches!(t, sect::COMMENTS | sect::UTSNAME);
        assert_eq!(flags, u32::from(loadable), "section {i}");
        assert_eq!(off % align as usize, 0);
        if loadable {
            loadsz = loadsz.max(off + size);
        }
    }
    assert_eq!(u64s(&b, 40) as usize, loadsz); // dofh_loadsz
    assert_eq!(u64s(&b, 48) as usize, b.len()); // dofh_filesz
                                                // The string table: "" then the probe description's fields, then the format.
    let (_, _, _, _, off, size) = hdr(0);
    assert_eq!(&b[off..off + size], b"\0BEGIN\0hi %d\n\0");
    // PROBEDESC: strtab 0, provider "", module "", function "", name at 1, id 0.
    let (_, _, _, _, off, size) = hdr(1);
    assert_eq!(size, 24);
    let words: Vec<u32> = (0..6).map(|k| u32s(&b, off + 4 * k)).collect();
    assert_eq!(words, vec![0, 0, 0, 0, 1, 0]);
    // The predicate's DIF text, word for word.
    let (_, _, _, _, off, size) = hdr(2);
    assert_eq!(size, 4 * pred.text.len());
    let text: Vec<u32> = (0..pred.text.len())
        .map(|k| u32s(&b, off + 4 * k))
        .collect();
    assert_eq!(text, pred.text);
    // The predicate's DIFOHDR: rtype (kind, ckind, flags, pad, size) then its links.
    let pred_hdr = 1 + difo_types(pred).len();
    let (_, _, _, _, off, size) = hdr(pred_hdr);
    let links = difo_types(pred).len() - 1;
    assert_eq!(size, 8 + 4 * links);
    assert_eq!(
        &b[off..off + 4],
        &[pred.rtype.kind, pred.rtype.ckind, pred.rtype.flags, 0]
    );
    assert_eq!(u32s(&b, off + 4), pred.rtype.size);
    let l: Vec<u32> = (0..links).map(|k| u32s(&b, off + 8 + 4 * k)).collect();
    assert_eq!(l, (2..2 + links as u32).collect::<Vec<_>>());
    // ACTDESC: printf (DIFO, string table 0, kind 3, ntuple 0, arg = format offset 7, uarg 0), exit.
    let act = n - 4;
    let (_, _, _, _, off, size) = hdr(act);
    assert_eq!(size, 64);
    let printf_hdr = (pred_hdr + difo_types(printf).len()) as u32;
    let exit_hdr = printf_hdr + difo_types(exit).len() as u32;
    assert_eq!(
        (
            u32s(&b, off),
            u32s(&b, off + 4),
            u32s(&b, off + 8),
            u32s(&b, off + 12)
        ),
        (printf_hdr, 0, 3, 0)
    );
    assert_eq!((u64s(&b, off + 16), u64s(&b, off + 24)), (7, 0));
    assert_eq!(
        (u32s(&b, off + 32), u32s(&b, off + 36), u32s(&b, off + 40)),
        (exit_hdr, DOF_SECIDX_NONE, 2)
    );
    // ECBDESC: probes 1, predicate, actions, pad 0, uarg 0.
    let (_, _, _, _, off, size) = hdr(act + 1);
    assert_eq!(size, 24);
    assert_eq!(
        (
            u32s(&b, off),
            u32s(&b, off + 4),
            u32s(&b, off + 8),
            u32s(&b, off + 12)
        ),
        (1, pred_hdr as u32, act as u32, 0)
    );
    assert_eq!(u64s(&b, off + 16), 0);
    // COMMENTS: the string with its NUL; UTSNAME: five 257-byte fields.
    let (_, _, _, _, off, size) = hdr(act + 2);
    assert_eq!(&b[off..off + size], b"D test\0");
    let (_, _, _, _, off, size) = hdr(act + 3);
    assert_eq!(size, 5 * 257);
    assert_eq!(&b[off..off + 6], b"Linux\0");
    assert_eq!(&b[off + 257..off + 262], b"host\0");
}
