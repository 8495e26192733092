//! Fuzzes format-string parsing and formatting against arbitrary records.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dtrace_consumer::fuzz_entry::format_bytes(data);
});
