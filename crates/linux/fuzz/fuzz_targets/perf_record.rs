//! Fuzzes the parsing of the perf mapping records (mmap2, comm, fork) the symbolizer follows.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = dtrace_linux::symbols::mmaptrack::parse_record(data);
});
