//! Fuzzes the ELF/DWARF to CTF conversion.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dtrace_ctf::fuzz_entry::dwarf(data);
});
