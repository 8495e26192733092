//! Fuzzes buffer decoding: arbitrary descriptions, buffers and aggregation records.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dtrace_consumer::fuzz_entry::consume_bytes(data);
});
