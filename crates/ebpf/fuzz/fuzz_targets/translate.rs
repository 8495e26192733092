//! Arbitrary DIF words and integer table -> translator: an error or a well-formed fragment, never a
//! panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dtrace_ebpf::fuzzing::translate_bytes(data);
});
