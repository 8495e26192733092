//! Fuzzes the tracefs `format` file parser and the catalogue's field typing.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(f) = dtrace_linux::tracefs::parse_format(text, "<fuzz>") {
            for field in &f.fields {
                let _ = dtrace_linux::catalog::field_arg(field);
            }
        }
    }
});
