//! Fuzzes the parsers of /proc and /sys text: kallsyms, maps, stat, CPU lists, probe descriptions, ftrace's function list.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let k = dtrace_linux::symbols::KernelSymbols::parse(text);
        let _ = k.lookup(0xffff_ffff_8100_0000);
        let _ = k.module_base(0xffff_ffff_c000_1004);
        let _ = k.tracing_prefix(&[0xffff_ffff_c000_1004, 0xffff_ffff_8100_0000, 0]);
        let _ = dtrace_linux::symbols::parse_maps(text);
        let _ = dtrace_linux::process::parse_stat_ppid(text);
        let _ = dtrace_linux::bpf::map::parse_cpu_list(text);
        let d = dtrace_linux::ProbeDesc::parse(text);
        let _ = dtrace_linux::catalog::glob::matches(&d.name, &d.function);
        let _ = dtrace_linux::catalog::profile::probe(text);
        let _ = dtrace_linux::catalog::fbt::parse_functions(text);
    }
});
