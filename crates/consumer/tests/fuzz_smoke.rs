//! A short deterministic fuzz run over the same entry points as the cargo-fuzz targets: thousands of
//! pseudo-random and mutated inputs must all be handled without a panic or a hang.

use dtrace_consumer::fuzz_entry::{consume_bytes, format_bytes, print_typed_bytes};

use dtrace_testkit::XorShift as Rng;

fn seeds() -> Vec<Vec<u8>> {
    let mut s = vec![
        b"%d %s\n\0\x02\x00\x03\x00\x00\x00\x00\x04\x0c\x00\x01".to_vec(),
        b"%*.*d|%-10s|%x\0\x05".to_vec(),
        b"%@d\0\x01\x0c\x05\x00\x00\x00\x00".to_vec(),
    ];
    let mut buf = vec![
        2u8, 3, 0, 3, 12, 1, 0, 5, 0, 1, 3, 20, 0, 0, 0, 40, 1, 1, 2, 1,
    ];
    buf.extend_from_slice(&1u32.to_ne_bytes());
    buf.extend_from_slice(&[0; 60]);
    s.push(buf);
    s
}

#[test]
fn random_and_mutated_inputs_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let seeds = seeds();
    for i in 0..4000 {
        let mut input = if i % 2 == 0 {
            seeds[(rng.next() % seeds.len() as u64) as usize].clone()
        } else {
            let n = (rng.next() % 300) as usize;
            (0..n).map(|_| rng.next() as u8).collect()
        };
        for _ in 0..(rng.next() % 8) {
            if input.is_empty() {
                break;
            }
            let at = (rng.next() % input.len() as u64) as usize;
            input[at] = rng.next() as u8;
        }
        consume_bytes(&input);
        format_bytes(&input);
        print_typed_bytes(&input);
    }
}

#[test]
fn found_by_fuzzing() {
    // A float conversion with an enormous precision.
    format_bytes(b"%.@0+17777777777777777777777777777777777777777777777777777Le+2@e\0\0\0+");
}
