//! Fuzzes the minimal BTF reader (struct members, function signatures, type names).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(b) = dtrace_linux::btf::Btf::parse(data) {
        if let Some(id) = b.struct_id("task_struct") {
            let _ = b.member_offset(id, "tgid");
        }
        let _ = dtrace_linux::btf::TaskOffsets::from_btf(&b);
        for id in b.func_ids().into_values() {
            let _ = b.func_signature(id);
        }
        for id in 0..b.len() as u32 + 2 {
            let _ = b.type_name(id, 0);
        }
    }
});
