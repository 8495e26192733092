//! Random programs (random DIF, actions, options) enabled and fired.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dtrace_framework::fuzzing::fire_program(data);
});
