//! Fuzzes the decoding of `.note.stapsdt` sections and of their argument operands.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(notes) = dtrace_linux::catalog::usdt::parse_notes(data) {
        for n in notes {
            for a in n.args.split_whitespace() {
                let _ = dtrace_linux::catalog::usdt::parse_arg(a);
                let _ = dtrace_linux::catalog::usdt::arg_type(a);
            }
        }
    }
    let _ = dtrace_linux::catalog::usdt::parse_arg(&String::from_utf8_lossy(data));
});
