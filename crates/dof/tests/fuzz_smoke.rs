//! A short deterministic fuzz of the entry point the cargo-fuzz target uses: thousands of mutations of
//! valid DOF (and of an ELF file carrying it) must give errors or objects, never panics or hangs.

mod common;

use dtrace_dof::*;

use dtrace_testkit::XorShift as Rng;

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut d = seed.to_vec();
    for _ in 0..1 + rng.below(3) {
        match rng.below(5) {
            0 if !d.is_empty() => {
                let i = rng.below(d.len());
                d[i] ^= 1 << rng.below(8);
            }
            1 if !d.is_empty() => {
                let i = rng.below(d.len());
                d[i] = rng.next() as u8;
            }
            2 => d.truncate(rng.below(d.len() + 1)),
            3 if d.len() >= 4 => {
                let i = rng.below(d.len() - 3) & !3;
                let v: u32 = [0, 1, 8, 0xffff_ffff, 0x7fff_ffff, 48][rng.below(6)];
                d[i..i + 4].copy_from_slice(&v.to_le_bytes());
            }
            _ => {
                let i = rng.below(d.len() + 1);
                d.insert(i, rng.next() as u8);
            }
        }
    }
    d
}

fn seeds() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = [
        (2, DOF_ENCODE_LSB),
        (1, DOF_ENCODE_LSB),
        (2, DOF_ENCODE_MSB),
    ]
    .into_iter()
    .map(|(ver, e)| write_dof(&common::sample(ver, e).f).unwrap())
    .collect();
    v.push(program_seed());
    let mut usdt = DofFile::new();
    usdt.add_usdt_provider(&common::usdt());
    v.push(write_dof(&usdt).unwrap());
    v
}

/// The DOF of a small compiled-program shape: a predicate, printf with a format and an argument,
/// an aggregation with a key, printa, and options.
fn program_seed() -> Vec<u8> {
    use dtrace_dif::asm::assemble;
    use dtrace_dif::program::*;
    let obj = |src: &str| assemble(src).unwrap();
    let act = |kind, difo, arg, uarg, ntuple| ActionDesc {
        kind,
        difo,
        arg,
        uarg,
        ntuple,
    };
    let p = Program {
        ecbs: vec![EcbDesc {
            probe: ProbeDesc {
                provider: "syscall".into(),
                function: "read".into(),
                name: "entry".into(),
                ..Default::default()
            },
            predicate: Some(obj("ldgs pid, %r1\nret %r1")),
            actions: vec![
                act(
                    ActionKind::Printf,
                    Some(obj("setx 7, %r1\nret %r1")),
                    0,
                    0,
                    0,
                ),
                act(
                    ActionKind::DifExpr,
                    Some(obj("ldgs tid, %r1\nret %r1")),
                    0,
                    0,
                    0,
                ),
                act(ActionKind::AggCount, None, 0, 1, 1),
                act(
                    ActionKind::Printa,
                    Some(obj("setx 1, %r1\nret %r1")),
                    1,
                    0,
                    0,
                ),
                act(
                    ActionKind::Printa,
                    Some(obj("setx 1, %r1\nret %r1")),
                    u64::MAX,
                    0,
                    0,
                ),
            ],
            line: 0,
        }],
        formats: vec!["%d %d\n".into(), "%@d\n".into()],
        aggregations: vec![AggregationDesc {
            id: 1,
            name: String::new(),
        }],
        options: vec![
            ("quiet".into(), None),
            ("bufsize".into(), Some("65536".into())),
            ("bufpolicy".into(), Some("ring".into())),
        ],
        attrs: Vec::new(),
        print_types: Vec::new(),
        providers: Vec::new(),
        ..Default::default()
    };
    let bytes = program::program_to_dof_bytes(&p, &Default::default()).unwrap();
    assert_eq!(program::program_from_dof_bytes(&bytes).unwrap(), p);
    bytes
}

#[test]
fn dof_reader_survives_mutations() {
    let seeds = seeds();
    let mut rng = Rng(0xd0f_5eed);
    let mut accepted = 0;
    for i in 0..5000 {
        let d = mutate(&mut rng, &seeds[i % seeds.len()]);
        if read_dof(&d).is_ok() {
            accepted += 1;
        }
        fuzz_entry::dof(&d);
    }
    assert!(
        accepted > 0,
        "no mutation was accepted: the smoke only tested the error paths"
    );
}

#[test]
fn elf_wrapped_dof_survives_mutations() {
    let dof = seeds().pop().unwrap();
    let elf = dof_to_elf(&dof, object::Architecture::X86_64, &[]).unwrap();
    let mut rng = Rng(0xe1f);
    for _ in 0..1500 {
        fuzz_entry::dof(&mutate(&mut rng, &elf));
    }
}

/// With `DTRACE_FUZZ_SEED_DIR=dir`, writes the smoke's seeds into `dir/dof` for a cargo-fuzz corpus.
#[test]
fn write_fuzz_seeds_when_asked() {
    let Ok(dir) = std::env::var("DTRACE_FUZZ_SEED_DIR") else {
        return;
    };
    let dir = std::path::Path::new(&dir).join("dof");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, s) in seeds().into_iter().enumerate() {
        std::fs::write(dir.join(format!("seed{i}")), s).unwrap();
    }
}

/// Inputs the cargo-fuzz runs found failing, kept so they stay fixed.
#[test]
fn fuzz_regressions() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fuzz_regressions");
    for e in std::fs::read_dir(dir).unwrap() {
        fuzz_entry::dof(&std::fs::read(e.unwrap().path()).unwrap());
    }
}

#[test]
fn program_loader_survives_mutations() {
    let seed = program_seed();
    let mut rng = Rng(0x9_0d0f);
    let mut loaded = 0;
    for _ in 0..3000 {
        let d = mutate(&mut rng, &seed);
        if program::program_from_dof_bytes(&d).is_ok() {
            loaded += 1;
        }
        fuzz_entry::dof(&d);
    }
    assert!(
        loaded > 0,
        "no mutation loaded: only error paths were tested"
    );
}
