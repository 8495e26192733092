//! Fuzzes the BTF parser and the BTF to CTF conversion.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dtrace_ctf::fuzz_entry::btf(data);
});
