//! Fuzzes instruction decoding and classification of traced bytes, with our x86-64 file and with a
//! bit-pattern file.
#![no_main]
use dtrace_dyntrace::oplist::{OpList, BUILTIN_OPLIST};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

static LISTS: OnceLock<Vec<OpList>> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let lists = LISTS.get_or_init(|| {
        let bits = r#"<oplist><prefix bitmask="01100110" detail="o"/>
            <op bitmask="0000000x11" mnemonic="ADD"><description/></op>
            <op bitmask="1111111111" mnemonic="Y"><description/></op></oplist>"#;
        [BUILTIN_OPLIST, bits].iter().filter_map(|t| OpList::parse(t, "fuzz").ok()).collect()
    });
    for l in lists {
        for bits in [32, 64] {
            let d = dtrace_dyntrace::decode::decode(l, data, 0x7fff_ffff_f000, bits);
            let _ = l.describe(d.key.op);
        }
    }
});
