//! Fuzzes the opcode description file parser (`-f opcodefile`), then matches the input's own bytes
//! against whatever it accepted.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(list) = dtrace_dyntrace::oplist::OpList::parse(text, "fuzz") {
            let _ = list.match_bits(data, 64);
            let _ = list.match_bits(data, 32);
            let _ = dtrace_dyntrace::decode::decode(&list, data, 0x1000, 64);
        }
    }
});
