//! Fuzzes `.eh_frame` indexing and stack unwinding: the input's first half is the section, the
//! second the stack bytes (whose first words are also the registers).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dtrace_linux::symbols::unwind::fuzz_unwind(data);
});
