//! Arbitrary bytes -> DIF object -> decode, verify, disassemble, run.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dtrace_dif::fuzzing::decode_verify_run(data);
});
