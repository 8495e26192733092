//! A short deterministic fuzz run over every decoder of outside bytes (the same entry points as the
//! cargo-fuzz targets in `fuzz/`): mutated real inputs must give values or errors, never panics.

use dtrace_linux::capture::{
    decode_record, AddrExpr, CaptureSpec, CopyRequest, MemKind, RecordLayout,
};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn mutate(&mut self, seed: &[u8]) -> Vec<u8> {
        let mut v = seed.to_vec();
        for _ in 0..1 + self.next() % 8 {
            let r = self.next();
            let at = if v.is_empty() {
                0
            } else {
                (r >> 8) as usize % v.len()
            };
            match r % 5 {
                0 if !v.is_empty() => v[at] = (r >> 32) as u8,
                1 => v.insert(at.min(v.len()), (r >> 40) as u8),
                2 if !v.is_empty() => {
                    v.remove(at);
                }
                3 => v.truncate(at),
                _ => {
                    let tok: &[u8] = [
                        b"field:".as_slice(),
                        b";",
                        b"offset:",
                        b"[",
                        b"]",
                        b"\n",
                        b"99999999999",
                        b"-",
                    ][(r >> 16) as usize % 8];
                    let at = at.min(v.len());
                    v.splice(at..at, tok.iter().copied());
                }
            }
        }
        v
    }
}

const FORMAT: &str = "name: sched_switch\nID: 372\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:__data_loc char[] name;\toffset:28;\tsize:4;\tsigned:0;\n\nprint fmt: \"prev_comm=%s\", REC->prev_comm\n";

#[test]
fn format_parser_survives_mutations() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut ok = 0;
    for _ in 0..4000 {
        let m = rng.mutate(FORMAT.as_bytes());
        let text = String::from_utf8_lossy(&m);
        if let Ok(f) = dtrace_linux::tracefs::parse_format(&text, "<smoke>") {
            ok += 1;
            for field in &f.fields {
                let _ = dtrace_linux::catalog::field_arg(field);
            }
        }
    }
    assert!(ok > 0, "no mutant parsed at all: the seed itself must");
}

#[test]
fn record_decoder_survives_mutations() {
    let spec = CaptureSpec {
        copies: vec![
            CopyRequest {
                addr: AddrExpr::arg(1),
                kind: MemKind::UserString,
                size: 64,
                size_arg: None,
            },
            CopyRequest {
                addr: AddrExpr::arg(0),
                kind: MemKind::KernelBytes,
                size: 16,
                size_arg: None,
            },
        ],
        kstack: Some(8),
        ustack: Some(8),
        execargs: Some(24),
        ancestors: true,
        ..CaptureSpec::new()
    };
    let layout = RecordLayout::for_spec(&spec, "smoke").unwrap();
    let mut seed = vec![0u8; layout.size];
    seed[0] = 1; // KIND_EVENT
    let c0 = layout.copies[0].offset;
    seed[c0..c0 + 8].copy_from_slice(&5i64.to_le_bytes());
    seed[c0 + 16..c0 + 21].copy_from_slice(b"abcd\0");
    let (ea, _) = layout.execargs.unwrap();
    seed[ea..ea + 8].copy_from_slice(&7i64.to_le_bytes());
    seed[ea + 8..ea + 15].copy_from_slice(b"sh\0-c\0x");
    let an = layout.ancestors.unwrap();
    seed[an..an + 4].copy_from_slice(&2u32.to_le_bytes());
    seed[an + 8..an + 12].copy_from_slice(&77u32.to_le_bytes());
    seed[an + 12..an + 16].copy_from_slice(&1u32.to_le_bytes());
    match decode_record(&seed, |_| Some(&layout)).unwrap() {
        dtrace_linux::capture::Record::Event(e) => {
            assert_eq!(e.execargs, Some(Ok(b"sh\0-c\0x".to_vec())));
            assert_eq!(e.ancestors, Some(vec![77, 1]));
        }
        other => panic!("{other:?}"),
    }
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut decoded = 0;
    for _ in 0..4000 {
        let m = rng.mutate(&seed);
        if decode_record(&m, |_| Some(&layout)).is_ok() {
            decoded += 1;
        }
    }
    assert!(decoded > 0);
    // The same with a build-id user stack.
    let bspec = CaptureSpec {
        ustack_build_id: true,
        ..spec.clone()
    };
    let blayout = RecordLayout::for_spec(&bspec, "smoke").unwrap();
    let (uoff, _) = blayout.ustack.unwrap();
    let mut bseed = vec![0u8; blayout.size];
    bseed[0] = 1;
    bseed[uoff..uoff + 8].copy_from_slice(&64i64.to_le_bytes());
    bseed[uoff + 8] = 1; // status VALID
    bseed[uoff + 8 + 32] = 2; // status IP
    bseed[uoff + 8 + 32 + 24] = 0x40;
    match decode_record(&bseed, |_| Some(&blayout)).unwrap() {
        dtrace_linux::capture::Record::Event(e) => {
            let frames = e.ustack_files.unwrap().unwrap();
            assert_eq!(frames.len(), 2);
            assert_eq!(frames[1], dtrace_linux::capture::UserFrame::Ip(0x40));
        }
        other => panic!("{other:?}"),
    }
    for _ in 0..2000 {
        let m = rng.mutate(&bseed);
        let _ = decode_record(&m, |_| Some(&blayout));
    }
    let ev = decode_record(&seed, |_| Some(&layout)).unwrap();
    match ev {
        dtrace_linux::capture::Record::Event(e) => {
            assert_eq!(e.copies[0].data.as_deref(), Ok(b"abcd".as_slice()))
        }
        other => panic!("{other:?}"),
    }
    // A copy sized at the probe whose bytes follow the fixed part (their place in its slot).
    use dtrace_linux::capture::layout::{SizedCopies, TAIL_AT, TAIL_LEN};
    let mut tspec = spec;
    tspec.copies[0] = CopyRequest {
        addr: AddrExpr::arg(1),
        kind: MemKind::UserBytes,
        size: 4096,
        size_arg: Some(2),
    };
    let tlayout = RecordLayout::for_spec_sized(&tspec, "smoke", SizedCopies::AtProbe).unwrap();
    let mut tseed = vec![0u8; tlayout.size];
    tseed[0] = 1;
    let t0 = tlayout.copies[0].offset;
    tseed[t0 + TAIL_AT..t0 + TAIL_AT + 4].copy_from_slice(&(tlayout.size as u32).to_le_bytes());
    tseed[t0 + TAIL_LEN..t0 + TAIL_LEN + 4].copy_from_slice(&5u32.to_le_bytes());
    tseed.extend_from_slice(b"hello\0\0\0");
    match decode_record(&tseed, |_| Some(&tlayout)).unwrap() {
        dtrace_linux::capture::Record::Event(e) => {
            assert_eq!(e.copies[0].data.as_deref(), Ok(b"hello".as_slice()))
        }
        other => panic!("{other:?}"),
    }
    for _ in 0..4000 {
        let m = rng.mutate(&tseed);
        let _ = decode_record(&m, |_| Some(&tlayout));
    }
}

#[test]
fn proc_text_parsers_survive_mutations() {
    let seed = b"ffffffff81000000 T _stext\nffffffffc0001000 t f\t[m]\n55d0c000-55d0d000 r-xp 00001000 08:01 1 /bin/x\n1 (a) S 2";
    let mut rng = Rng(42);
    for _ in 0..4000 {
        let m = rng.mutate(seed);
        let text = String::from_utf8_lossy(&m);
        let k = dtrace_linux::symbols::KernelSymbols::parse(&text);
        let _ = k.lookup(0xffff_ffff_8100_0010);
        let _ = k.module_base(0xffff_ffff_c000_1004);
        let _ = k.tracing_prefix(&[0xffff_ffff_c000_1004, 0xffff_ffff_8100_0010, 0]);
        let _ = dtrace_linux::symbols::parse_maps(&text);
        let _ = dtrace_linux::process::parse_stat_ppid(&text);
        let _ = dtrace_linux::bpf::map::parse_cpu_list(&text);
        let d = dtrace_linux::ProbeDesc::parse(&text);
        let _ = dtrace_linux::catalog::glob::matches(&d.name, &d.function);
        let _ = dtrace_linux::catalog::profile::probe(&text);
        let _ = dtrace_linux::catalog::fbt::parse_functions(&text);
    }
}

#[test]
fn elf_reader_survives_mutations() {
    let exe = std::fs::read("/proc/self/exe").unwrap();
    // The first 64 KiB hold the headers the parser walks first; mutate that part.
    let seed = &exe[..exe.len().min(65536)];
    let mut rng = Rng(7);
    for _ in 0..1500 {
        let m = rng.mutate(seed);
        if let Ok(e) = dtrace_linux::symbols::ElfSymbols::parse(&m) {
            let _ = e.lookup(0x1000);
            let _ = e.vaddr_of_file_offset(0x1000);
        }
        // The partial reader follows the same headers' offsets and sizes.
        if let Ok(img) = dtrace_linux::symbols::elfimage::sparse_image(m.as_slice(), m.len() as u64)
        {
            assert_eq!(img.len(), m.len());
            let _ = dtrace_linux::symbols::ElfSymbols::parse(&img);
        }
    }
}

#[test]
fn btf_reader_survives_mutations() {
    // A small valid BTF: a struct `s` {int a; struct {int b;} (anonymous)} built by hand.
    let mut strings = b"\0s\0a\0b\0int\0".to_vec();
    strings.push(0);
    let mut types = Vec::new();
    let mut ty = |words: &[u32]| {
        words
            .iter()
            .for_each(|w| types.extend_from_slice(&w.to_le_bytes()))
    };
    ty(&[7, 1 << 24, 4, 32]); // 1: int (INT, 4 bytes, 32 bits)
    ty(&[0, (4 << 24) | 1, 4, 5, 1, 0]); // 2: anonymous struct { int b; }
    ty(&[1, (4 << 24) | 2, 8, 3, 1, 0, 0, 2, 32]); // 3: struct s { int a; <anon> at bit 32 }
    ty(&[0, 2 << 24, 3]); // 4: struct s *
    ty(&[0, (13 << 24) | 1, 1, 0, 4]); // 5: int (struct s *)
    ty(&[3, 12 << 24, 5]); // 6: function a, of prototype 5
    let mut btf = Vec::new();
    btf.extend_from_slice(&0xeb9fu16.to_le_bytes());
    btf.extend_from_slice(&[1, 0]);
    for w in [
        24u32,
        0,
        types.len() as u32,
        types.len() as u32,
        strings.len() as u32,
    ] {
        btf.extend_from_slice(&w.to_le_bytes());
    }
    btf.extend_from_slice(&types);
    btf.extend_from_slice(&strings);
    let b = dtrace_linux::btf::Btf::parse(&btf).unwrap();
    let id = b.struct_id("s").unwrap();
    assert_eq!(b.member_offset(id, "a"), Some(0));
    assert_eq!(
        b.member_offset(id, "b"),
        Some(4),
        "found through the anonymous member"
    );
    let f = b.func_ids()["a"];
    let sig = b.func_signature(f).unwrap();
    assert_eq!(sig.params[0].native, "struct s *");
    assert_eq!(sig.ret.unwrap().dtype, "uint32_t");
    let mut rng = Rng(99);
    let base = std::sync::Arc::new(b);
    let exercise = |b: &dtrace_linux::btf::Btf| {
        if let Some(id) = b.struct_id("s") {
            let _ = b.member_offset(id, "b");
        }
        for id in b.func_ids().into_values() {
            let _ = b.func_signature(id);
        }
        for id in 0..b.len() as u32 + 2 {
            let _ = b.type_name(id, 0);
        }
    };
    for _ in 0..4000 {
        let m = rng.mutate(&btf);
        if let Ok(b) = dtrace_linux::btf::Btf::parse(&m) {
            exercise(&b);
        }
        // The same bytes as a module's split BTF over the good blob.
        if let Ok(b) = dtrace_linux::btf::Btf::parse_split(&m, Some(std::sync::Arc::clone(&base))) {
            exercise(&b);
        }
    }
}

/// The capture-needs analysis over mutations of real kernel-chain DIF (`curthread->a->b`,
/// `args[N]->field`, strings and struct copies of kernel memory, clause-local variables), in the
/// fuzz target's input format: never a panic, and every spec it accepts stays within the capture's
/// limits and lays out.
#[test]
fn needs_analysis_survives_mutated_kernel_chains() {
    use dtrace_linux::provider::needs::fuzz_entry;
    let src = "struct foo { int a; long b; struct foo *next; char name[16]; };
        sdt:::x /((struct foo *)curthread)->next->a == 3/ {
            this->f = (struct foo *)arg0;
            trace(this->f->next->next->b);
            trace(stringof(((struct foo *)curthread)->name));
            trace(*((struct foo *)args[1])->next);
            @[stringof(((struct foo *)curthread)->next->name)] = count();
            trace(copyinstr(((struct foo *)curthread)->next->b));
        }";
    let p = dtrace_compiler::compile(src, &dtrace_compiler::CompileOptions::default())
        .unwrap_or_else(|e| panic!("{e:?}"));
    let objs: Vec<&dtrace_dif::object::DifObject> = p.ecbs[0]
        .predicate
        .iter()
        .chain(p.ecbs[0].actions.iter().filter_map(|a| a.difo.as_ref()))
        .collect();
    assert!(objs.len() >= 5);
    // The real program asks for kernel copies.
    let n = dtrace_linux::provider::needs::program_needs(&p);
    assert!(n.clauses[0]
        .1
        .copies
        .iter()
        .any(|c| c.kind == MemKind::KernelBytes && c.addr.derefs.len() == 2));
    let mut rng = Rng(0x5eed_0fc4_a100_0001);
    for obj in objs {
        // fuzz_entry's format: action byte, integer-table count, the table, the instruction words.
        let mut seed = vec![2u8, obj.inttab.len().min(7) as u8];
        for v in obj.inttab.iter().take(7) {
            seed.extend_from_slice(&v.to_le_bytes());
        }
        for w in &obj.text {
            seed.extend_from_slice(&w.to_le_bytes());
        }
        fuzz_entry(&seed);
        for _ in 0..1500 {
            fuzz_entry(&rng.mutate(&seed));
        }
    }
}

#[test]
fn unwinder_survives_mutations() {
    // A real .eh_frame (this test binary's) beside stack-like bytes.
    let exe = std::fs::read("/proc/self/exe").unwrap();
    let file = object::File::parse(exe.as_slice()).unwrap();
    use object::{Object, ObjectSection};
    let eh = file.section_by_name(".eh_frame").unwrap().data().unwrap();
    let eh = &eh[..eh.len().min(4096)];
    let mut seed = eh.to_vec();
    let mut stack = vec![0u8; eh.len()];
    for (i, w) in stack.chunks_mut(8).enumerate() {
        let v = (0x1000 + 16 * i as u64).to_le_bytes();
        w.copy_from_slice(&v[..w.len()]);
    }
    seed.extend_from_slice(&stack);
    let mut rng = Rng(11);
    for _ in 0..1500 {
        let m = rng.mutate(&seed);
        assert!(dtrace_linux::symbols::unwind::fuzz_unwind(&m).len() <= 64);
    }
}

#[test]
fn perf_mapping_records_survive_mutations() {
    // An mmap2 record as the kernel writes it (header, ids, range, inode fields, prot, flags, name).
    let mut seed = 10u32.to_ne_bytes().to_vec();
    seed.extend_from_slice(&0u16.to_ne_bytes());
    seed.extend_from_slice(&96u16.to_ne_bytes());
    for v in [7u32, 7] {
        seed.extend_from_slice(&v.to_ne_bytes());
    }
    for v in [0x40_0000u64, 0x1000, 0, 0, 0, 0] {
        seed.extend_from_slice(&v.to_ne_bytes());
    }
    seed.extend_from_slice(&5u32.to_ne_bytes());
    seed.extend_from_slice(&2u32.to_ne_bytes());
    seed.extend_from_slice(b"/usr/bin/prog\0\0\0");
    seed.extend_from_slice(&1u64.to_ne_bytes());
    let mut rng = Rng(13);
    for _ in 0..3000 {
        let m = rng.mutate(&seed);
        let _ = dtrace_linux::symbols::mmaptrack::parse_record(&m);
    }
}

#[test]
fn stapsdt_notes_survive_mutations() {
    // A real note as <sys/sdt.h> lays it out: header, owner, three addresses, provider, name, args.
    let mut desc = Vec::new();
    for v in [0x4287f3u64, 0x8cc5a0, 0xa8426e] {
        desc.extend_from_slice(&v.to_le_bytes());
    }
    desc.extend_from_slice(b"python\0gc__start\0-4@%ebp 8@16(%rbp) 4@$5\0");
    let mut seed = 8u32.to_le_bytes().to_vec();
    seed.extend_from_slice(&(desc.len() as u32).to_le_bytes());
    seed.extend_from_slice(&3u32.to_le_bytes());
    seed.extend_from_slice(b"stapsdt\0");
    seed.extend_from_slice(&desc);
    seed.resize(seed.len().next_multiple_of(4), 0);
    let seed = [seed.clone(), seed].concat();
    assert_eq!(
        dtrace_linux::catalog::usdt::parse_notes(&seed)
            .unwrap()
            .len(),
        2
    );
    let mut rng = Rng(17);
    for _ in 0..4000 {
        let m = rng.mutate(&seed);
        if let Ok(notes) = dtrace_linux::catalog::usdt::parse_notes(&m) {
            for n in notes {
                for a in n.args.split_whitespace() {
                    let _ = dtrace_linux::catalog::usdt::parse_arg(a);
                }
            }
        }
        let _ =
            dtrace_linux::catalog::usdt::parse_arg(&String::from_utf8_lossy(&m[m.len().min(70)..]));
    }
}

#[test]
fn dof_usdt_providers_survive_mutations() {
    use dtrace_linux::catalog::{dof_usdt, usdt::FlatImage};
    // A provider with a probe site and an is-enabled site, then the code they point at.
    let mut f = dtrace_dof::DofFile::new();
    f.add_usdt_provider(&dtrace_dof::UsdtProvider {
        name: "myprov".into(),
        attrs: [0; 5],
        probes: vec![dtrace_dof::UsdtProbe {
            function: "main".into(),
            name: "probe1".into(),
            addr: 0,
            offsets: vec![0x10, 0x20],
            enabled_offsets: vec![0x30],
            native_args: vec!["int".into(), "char *".into()],
            xlated_args: vec!["int".into(), "string".into()],
            arg_map: vec![0, 1],
        }],
    });
    let mut seed = dtrace_dof::write_dof(&f).unwrap();
    seed.extend_from_slice(&[0xe8, 0x10, 0, 0, 0]);
    seed.extend_from_slice(&dtrace_dof::IS_ENABLED_CODE);
    let image = |d: &[u8]| FlatImage {
        base: 0,
        bytes: d.to_vec(),
    };
    assert!(dof_usdt::sites(&seed, &image(&seed)).is_ok());
    let mut rng = Rng(0xd0f);
    for _ in 0..4000 {
        let m = rng.mutate(&seed);
        let img = image(&m);
        let _ = dof_usdt::sites(&m, &img);
        for at in (0..m.len() as u64).step_by(13) {
            let _ = dof_usdt::semaphore_of(&img, at);
        }
    }
}
