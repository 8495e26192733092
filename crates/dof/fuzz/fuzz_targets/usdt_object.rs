//! Fuzzes `dtrace -G`'s processing of relocatable objects (probe sites found through relocations).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dtrace_dof::fuzz_entry::usdt_object(data);
});
