//! Option values, probe description globs, profile probe names and record bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dtrace_framework::fuzzing::parse_inputs(data);
});
