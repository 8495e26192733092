//! Fuzzes ELF symbol-table reading, from whole files and from partial (sparse) images.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(e) = dtrace_linux::symbols::ElfSymbols::parse(data) {
        let _ = e.lookup(0x1000);
        let _ = e.vaddr_of_file_offset(0x1000);
    }
    if let Ok(img) = dtrace_linux::symbols::elfimage::sparse_image(data, data.len() as u64) {
        let _ = dtrace_linux::symbols::ElfSymbols::parse(&img);
    }
});
