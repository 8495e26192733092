//! Fuzzes `print()` of typed data against arbitrary type descriptions and record bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dtrace_consumer::fuzz_entry::print_typed_bytes(data);
});
