//! Fuzzes the minimal BTF reader.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(b) = dtrace_linux::btf::Btf::parse(data) {
        if let Some(id) = b.struct_id("task_struct") {
            let _ = b.member_offset(id, "tgid");
        }
        let _ = dtrace_linux::btf::TaskOffsets::from_btf(&b);
    }
});
