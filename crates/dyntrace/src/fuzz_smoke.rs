//! A short deterministic fuzz run over the same entry points as the cargo-fuzz targets in `fuzz/`
//! (opcode files, memory maps, instruction classification), so every test run exercises them.

#[cfg(test)]
mod tests {
    use crate::decode::decode;
    use crate::maps::{parse_maps, MemoryMap};
    use crate::oplist::{OpList, BUILTIN_OPLIST};

    /// xorshift64*: a small deterministic generator.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
        let mut v = seed.to_vec();
        for _ in 0..1 + rng.below(8) {
            let pos = rng.below(v.len() + 1);
            match rng.below(4) {
                0 if pos < v.len() => v[pos] = rng.next() as u8,
                1 if pos < v.len() => {
                    v.remove(pos);
                }
                2 => {
                    let b = b"<>/=\"x01 \n-rwxp[]"[rng.below(17)];
                    v.insert(pos, b);
                }
                _ => v.truncate(pos),
            }
        }
        v
    }

    const OPLIST_SEED: &str = r#"<?xml version="1.0"?>
<oplist>
    <prefix bitmask="11110000" detail="LOCK" />
    <op bitmask="0000000x11" mnemonic="ADD" detail="r to r"><arg direction="input" type="reg"/><description>Add</description></op>
    <op bitmask="10010000" mnemonic="NOP"><description>nop</description></op>
</oplist>"#;

    const MAPS_SEED: &str = "00400000-00401000 r-xp 00000000 08:01 12 /bin/x\n\
7ffd0000-7ffd1000 rw-p 00000000 00:00 0 [stack]\n";

    #[test]
    fn oplist_parser_survives_mutations() {
        let mut rng = Rng(0x1234_5678);
        let mut accepted = 0;
        for _ in 0..3000 {
            let input = mutate(&mut rng, OPLIST_SEED.as_bytes());
            if let Ok(text) = std::str::from_utf8(&input) {
                if let Ok(l) = OpList::parse(text, "fuzz") {
                    accepted += 1;
                    let _ = l.match_bits(&input, 64);
                    let _ = decode(&l, &input, 0x1000, 64);
                }
            }
        }
        assert!(accepted > 0, "the mutations never kept a valid file");
    }

    #[test]
    fn maps_parser_survives_mutations() {
        let mut rng = Rng(0x9abc_def0);
        for _ in 0..3000 {
            let input = mutate(&mut rng, MAPS_SEED.as_bytes());
            if let Ok(text) = std::str::from_utf8(&input) {
                if let Ok(m) = parse_maps(text) {
                    let probes: Vec<u64> = m.iter().flat_map(|x| [x.start, x.end]).collect();
                    let map = MemoryMap::new(m, "/bin/x");
                    for a in probes {
                        let _ = map.lookup(a);
                    }
                }
            }
        }
    }

    #[test]
    fn classification_survives_random_bytes() {
        let builtin = OpList::parse(BUILTIN_OPLIST, "builtin").unwrap();
        let bits = OpList::parse(OPLIST_SEED, "seed").unwrap();
        let mut rng = Rng(42);
        for _ in 0..5000 {
            let len = rng.below(17);
            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            for l in [&builtin, &bits] {
                for b in [32, 64] {
                    let d = decode(l, &bytes, u64::MAX - 4, b);
                    let _ = l.describe(d.key.op);
                    assert!(d.len >= 1 && d.len as usize <= 15);
                }
            }
        }
    }
}
