//! Fuzzes the capture-needs analysis of DIF (programs may come from outside, through DOF).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dtrace_linux::provider::needs::fuzz_entry(data);
});
