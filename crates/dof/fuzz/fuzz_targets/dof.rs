//! Fuzzes the DOF reader (plain DOF, or ELF with .SUNW_dof), the dump, and the write/read round trip.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dtrace_dof::fuzz_entry::dof(data);
});
