//! A short deterministic fuzz of the same entry points the cargo-fuzz targets use: thousands of
//! mutations of valid CTF and BTF must give errors or containers, never panics or hangs.

mod common;

use dtrace_ctf::*;

use dtrace_testkit::XorShift as Rng;

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut d = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(6) {
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
                // overwrite a word with an interesting value
                let i = rng.below(d.len() - 3);
                let v: u32 =
                    [0, 1, 0xffff, 0x8000, 0x7fff_ffff, 0xffff_ffff, 0x10000][rng.below(7)];
                d[i..i + 4].copy_from_slice(&v.to_le_bytes());
            }
            4 => {
                let i = rng.below(d.len() + 1);
                d.insert(i, rng.next() as u8);
            }
            _ if d.len() > 8 => {
                let i = rng.below(d.len() - 8);
                d.drain(i..i + 1 + rng.below(8));
            }
            _ => {}
        }
    }
    d
}

#[test]
fn ctf_reader_survives_mutations() {
    let s = common::sample();
    let seeds: Vec<Vec<u8>> = [Some(2), Some(3)]
        .into_iter()
        .flat_map(|v| {
            [false, true].map(|z| {
                write_ctf(
                    &s.c,
                    WriteOptions {
                        version: v,
                        compress: z,
                    },
                )
                .unwrap()
            })
        })
        .collect();
    let mut rng = Rng(0x5eed_c7f0);
    let mut accepted = 0;
    for i in 0..4000 {
        let d = mutate(&mut rng, &seeds[i % seeds.len()]);
        if read_ctf(&d).is_ok() {
            accepted += 1;
        }
        fuzz_entry::ctf(&d);
    }
    assert!(
        accepted > 0,
        "no mutation was accepted: the smoke only tested the error paths"
    );
}

#[test]
fn btf_converter_survives_mutations() {
    let seed = common::sample_btf();
    let mut rng = Rng(0xb7f0_1234);
    let mut accepted = 0;
    for _ in 0..4000 {
        let d = mutate(&mut rng, &seed);
        if btf_to_ctf(&d).is_ok() {
            accepted += 1;
        }
        fuzz_entry::btf(&d);
    }
    assert!(accepted > 0);
}

/// With `DTRACE_FUZZ_SEED_DIR=dir`, writes the seeds the smoke uses into `dir/ctf` and `dir/btf`, to
/// start a cargo-fuzz corpus from.
#[test]
fn write_fuzz_seeds_when_asked() {
    let Ok(dir) = std::env::var("DTRACE_FUZZ_SEED_DIR") else {
        return;
    };
    let dir = std::path::Path::new(&dir);
    std::fs::create_dir_all(dir.join("ctf")).unwrap();
    std::fs::create_dir_all(dir.join("btf")).unwrap();
    let s = common::sample();
    for (i, (v, z)) in [(2, false), (3, false), (2, true)].into_iter().enumerate() {
        let b = write_ctf(
            &s.c,
            WriteOptions {
                version: Some(v),
                compress: z,
            },
        )
        .unwrap();
        std::fs::write(dir.join("ctf").join(format!("seed{i}")), b).unwrap();
    }
    std::fs::write(dir.join("btf").join("seed0"), common::sample_btf()).unwrap();
}

/// Inputs the cargo-fuzz runs found crashing, kept so they stay fixed.
#[test]
fn fuzz_regressions() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fuzz_regressions");
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let data = std::fs::read(&p).unwrap();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("btf") {
            fuzz_entry::btf(&data);
        } else if name.starts_with("ctf") {
            fuzz_entry::ctf(&data);
        } else {
            fuzz_entry::dwarf(&data);
        }
    }
}
