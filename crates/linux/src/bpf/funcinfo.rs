//! BTF function information for programs with subprograms: the kernel splits a program into
//! functions where a `BPF_PSEUDO_FUNC` load points (a callback such as `bpf_loop`'s, see
//! `insn::Asm::ld_callback`) and refuses such a load without BTF naming every function ("missing
//! btf func_info"), a callback's with static linkage. One small BTF object, loaded once per
//! process, describes the main program (`int dt_probe(void *ctx)`) and the callback shape
//! (`int dt_callback(int i, void *ctx)`); each program's records point its functions at them.

use super::insn::{subprograms, Insn};
use super::sys::{self, cmd, BtfLoadAttr};
use crate::error::{LinuxError, Result};
use std::os::fd::{AsRawFd, OwnedFd};

/// `struct bpf_func_info`: a function's first instruction and its `BTF_KIND_FUNC` type.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FuncInfo {
    /// The function's first instruction.
    pub insn_off: u32,
    /// Its type in the BTF object.
    pub type_id: u32,
}

/// The type of the main program's function in [`btf_blob`].
const MAIN_FUNC: u32 = 4;
/// The type of a callback's function in [`btf_blob`].
const CALLBACK_FUNC: u32 = 6;

/// BTF kinds and the header's constants (`include/uapi/linux/btf.h`).
const BTF_MAGIC: u16 = 0xeb9f;
const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const INT_SIGNED: u32 = 1;
/// A `BTF_KIND_FUNC`'s linkage (its `vlen`): static.
const LINKAGE_STATIC: u32 = 0;

/// The records for `insns`: none without subprograms, else the main program's and one per
/// subprogram.
pub fn func_infos(insns: &[Insn]) -> Vec<FuncInfo> {
    let subs = subprograms(insns);
    if subs.is_empty() {
        return Vec::new();
    }
    let mut out = vec![FuncInfo {
        insn_off: 0,
        type_id: MAIN_FUNC,
    }];
    out.extend(subs.into_iter().map(|s| FuncInfo {
        insn_off: s as u32,
        type_id: CALLBACK_FUNC,
    }));
    out
}

/// The BTF object's bytes: `int`, `void *`, the two prototypes and their functions.
fn btf_blob() -> Vec<u8> {
    let mut strings = vec![0u8];
    let mut name = |s: &str| -> u32 {
        let at = strings.len() as u32;
        strings.extend(s.as_bytes());
        strings.push(0);
        at
    };
    let info = |kind: u32, vlen: u32| (kind << 24) | vlen;
    let words: Vec<u32> = vec![
        // 1: int
        name("int"),
        info(KIND_INT, 0),
        4,
        (INT_SIGNED << 24) | 32,
        // 2: void *
        0,
        info(KIND_PTR, 0),
        0,
        // 3: int (void *ctx)
        0,
        info(KIND_FUNC_PROTO, 1),
        1,
        name("ctx"),
        2,
        // 4: dt_probe
        name("dt_probe"),
        info(KIND_FUNC, LINKAGE_STATIC),
        3,
        // 5: int (int i, void *ctx)
        0,
        info(KIND_FUNC_PROTO, 2),
        1,
        name("i"),
        1,
        name("ctx"),
        2,
        // 6: dt_callback
        name("dt_callback"),
        info(KIND_FUNC, LINKAGE_STATIC),
        5,
    ];
    let types: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut out = Vec::with_capacity(24 + types.len() + strings.len());
    out.extend(BTF_MAGIC.to_le_bytes());
    out.extend([1u8, 0]);
    for w in [
        24u32,
        0,
        types.len() as u32,
        types.len() as u32,
        strings.len() as u32,
    ] {
        out.extend(w.to_le_bytes());
    }
    out.extend(types);
    out.extend(strings);
    out
}

/// The descriptor of the BTF object [`func_infos`]' types are in, loaded once.
pub fn btf_fd() -> Result<i32> {
    static LOADED: std::sync::OnceLock<std::result::Result<OwnedFd, String>> =
        std::sync::OnceLock::new();
    LOADED
        .get_or_init(|| {
            let blob = btf_blob();
            let mut attr = BtfLoadAttr {
                btf: blob.as_ptr() as u64,
                btf_size: blob.len() as u32,
                ..Default::default()
            };
            // SAFETY: `btf` points at `blob`, valid for the call and of the declared size; no
            // log buffer.
            unsafe { sys::bpf_fd(cmd::BTF_LOAD, &mut attr, "loading the programs' BTF") }
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map(|fd| fd.as_raw_fd())
        .map_err(|e| LinuxError::Unavailable(e.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::insn::{Asm, R0, R2};

    #[test]
    fn names_point_at_their_strings() {
        let b = btf_blob();
        let str_off = 24 + u32::from_le_bytes(b[16..20].try_into().unwrap()) as usize;
        let at = |off: u32| {
            let s = &b[str_off + off as usize..];
            String::from_utf8_lossy(&s[..s.iter().position(|&c| c == 0).unwrap()]).into_owned()
        };
        let word = |i: usize| u32::from_le_bytes(b[24 + 4 * i..28 + 4 * i].try_into().unwrap());
        assert_eq!(at(word(0)), "int");
        assert_eq!(at(word(10)), "ctx");
        assert_eq!(at(word(12)), "dt_probe");
        assert_eq!(at(word(18)), "i");
        assert_eq!(at(word(22)), "dt_callback");
    }

    #[test]
    fn a_program_with_a_callback_names_each_function() {
        let mut a = Asm::new();
        assert!(func_infos(&{
            let mut b = Asm::new();
            b.mov_imm(R0, 0).exit();
            b.finish().unwrap()
        })
        .is_empty());
        a.ld_callback(R2, "stop", |a| {
            a.mov_imm(R0, 1).exit();
        });
        a.mov_imm(R0, 0).exit();
        let p = a.finish().unwrap();
        assert_eq!(
            func_infos(&p),
            vec![
                FuncInfo {
                    insn_off: 0,
                    type_id: MAIN_FUNC
                },
                FuncInfo {
                    insn_off: 4,
                    type_id: CALLBACK_FUNC
                }
            ]
        );
    }
}
