//! Fuzzes the `/proc/PID/maps` parser and the region lookup over what it accepts.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(maps) = dtrace_dyntrace::maps::parse_maps(text) {
            let probes: Vec<u64> = maps.iter().flat_map(|m| [m.start, m.end, m.end.wrapping_sub(1)]).collect();
            let map = dtrace_dyntrace::maps::MemoryMap::new(maps, "/bin/x");
            for a in probes {
                let _ = map.lookup(a);
            }
        }
    }
});
