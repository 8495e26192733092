//! Fuzzes the minimal BTF reader (struct members, function signatures, type names), whole and as
//! a module's split BTF over a blob of its own.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let half = data.len() / 2;
    if let Ok(base) = dtrace_linux::btf::Btf::parse(&data[..half]) {
        if let Ok(m) = dtrace_linux::btf::Btf::parse_split(&data[half..], Some(base.into())) {
            for id in m.func_ids().into_values() {
                let _ = m.func_signature(id);
            }
            for id in 0..m.len() as u32 + 2 {
                let _ = m.type_name(id, 0);
                let _ = m.member_offset(id, "a");
            }
        }
    }
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
