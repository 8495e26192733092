//! Arbitrary text -> assembler -> disassembler -> assembler.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dtrace_dif::fuzzing::assemble_text(data);
});
