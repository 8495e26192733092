//! Fuzzes the CTF reader and, on what it accepts, the query API and the writer.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dtrace_ctf::fuzz_entry::ctf(data);
});
