//! Entry points shared by the cargo-fuzz targets (`crates/dif/fuzz`) and the fuzz smoke tests: arbitrary
//! bytes become a DIF object that is decoded, verified and run; arbitrary text is assembled and
//! disassembled. None of them may panic, hang or allocate without bound.

use crate::object::{DifObject, DifType, VarEntry};
use crate::vm::fake::{FakeContext, FakeMemory};
use crate::vm::{Machine, VarState, VmOptions};
use crate::Instr;

struct Bytes<'a> {
    b: &'a [u8],
}

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let (f, r) = self
            .b
            .split_first()
            .map(|(f, r)| (*f, r))
            .unwrap_or((0, &[]));
        self.b = r;
        f
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn u64(&mut self) -> u64 {
        (self.u32() as u64) | ((self.u32() as u64) << 32)
    }
}

/// Builds a DIF object from arbitrary bytes: small tables, a variable table whose entries mostly name
/// user variables, then instruction words until the input ends.
pub fn object_from_bytes(data: &[u8]) -> DifObject {
    let mut b = Bytes { b: data };
    let nint = b.u8() % 8;
    let inttab = (0..nint).map(|_| b.u64()).collect();
    let nstr = (b.u8() % 32) as usize;
    let mut strtab: Vec<u8> = (0..nstr).map(|_| b.u8() % 4 + b'a' - 1).collect();
    for c in strtab.iter_mut() {
        if *c == b'a' - 1 {
            *c = 0;
        }
    }
    strtab.push(0);
    let nvar = b.u8() % 6;
    let vartab = (0..nvar)
        .map(|_| {
            let sel = b.u8();
            let ty = match sel % 4 {
                0 => DifType::integer(8),
                1 => DifType::string(b.u8() as u32 + 1),
                2 => DifType {
                    kind: 0,
                    ckind: 6,
                    flags: 1,
                    size: b.u8() as u32,
                },
                _ => DifType::integer(4),
            };
            VarEntry {
                name: 0,
                id: 0x500 + (b.u8() % 4) as u32,
                kind: (sel >> 2) % 2,
                scope: (sel >> 3) % 3,
                flags: 3,
                ty,
            }
        })
        .collect();
    let rtype = match b.u8() % 3 {
        0 => DifType::integer(8),
        1 => DifType::string(256),
        _ => DifType::integer(4),
    };
    let mut text = Vec::new();
    while !b.b.is_empty() && text.len() < 512 {
        text.push(b.u32());
    }
    DifObject {
        text,
        inttab,
        strtab,
        vartab,
        rtype,
    }
}

/// Decode, verify and run arbitrary bytes; also runs the object unverified (which must be safe too).
pub fn decode_verify_run(data: &[u8]) {
    let obj = object_from_bytes(data);
    for &w in &obj.text {
        if let Ok(i) = Instr::decode(w) {
            let _ = Instr::decode(i.encode());
        }
    }
    let verified = crate::verify::verify(&obj).is_ok();
    let _ = crate::disasm::disassemble(&obj, "0");
    let opts = VmOptions {
        strsize: 32,
        dynvarsize: 4096,
        scratch_size: 4096,
    };
    let mut state = VarState::new(opts);
    let mut m = Machine::new();
    let mut ctx = FakeContext::new();
    ctx.args = vec![0x1000, 0x7000, 3, u64::MAX];
    let mut mem = FakeMemory::new();
    mem.kernel
        .insert(0x1000, b"kernel string\0 more bytes here".to_vec());
    mem.user.insert(0x7000, b"user/path/../x\0".to_vec());
    mem.writable = true;
    let prepared = crate::vm::Prepared::new(obj.clone());
    for _ in 0..3 {
        // As the framework does between firings: the dynamic-variable cleaner, then a new firing.
        state.dynvars.clean();
        m.begin_firing();
        let r = m.run_prepared(&prepared, &mut state, &mut ctx, &mut mem);
        if let Ok(v) = r {
            if obj.rtype.is_string() {
                let _ = m.read_string_result(&obj, &mut mem, v);
                let mut dst = [0u8; 40];
                let _ = m.copy_string_result(&obj, &mut mem, v, &mut dst);
            } else {
                let mut dst = [0u8; 24];
                let _ = m.read_result_into(&obj, &mut mem, v, &mut dst);
            }
        }
        let _ = verified;
    }
}

/// Assemble arbitrary text, and if it assembles, disassemble and re-assemble it.
pub fn assemble_text(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(o) = crate::asm::assemble(s) {
        let l = crate::disasm::disassemble(&o, "0");
        let _ = crate::asm::assemble(&l);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic fuzz smoke: random and mutated inputs through the same entry points.
    #[test]
    fn fuzz_smoke() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        // Seeds: valid programs, as bytes.
        let progs = [
            "setx 1, %r1\nret %r1\n",
            ".var x 0x500 scl glb int 8\nsetx 1, %r1\nstgs %r1, x\nldgs x, %r2\nret %r2\n",
            "flushts\nsets \"ab\", %r1\npushtr string, %r0, %r1\npushtr string, %r0, %r1\ncall strjoin, %r2\nret %r2\n",
        ];
        let mut seeds: Vec<Vec<u8>> = Vec::new();
        for p in progs {
            let o = crate::asm::assemble(p).unwrap();
            let mut b = vec![o.inttab.len() as u8];
            for v in &o.inttab {
                b.extend_from_slice(&v.to_le_bytes());
            }
            b.extend_from_slice(&[0, 0, 0]);
            for w in &o.text {
                b.extend_from_slice(&w.to_le_bytes());
            }
            seeds.push(b);
        }
        for i in 0..4000 {
            let mut input = if i % 2 == 0 {
                seeds[i % seeds.len()].clone()
            } else {
                let n = (next() % 128) as usize;
                (0..n).map(|_| next() as u8).collect()
            };
            let flips = next() % 6;
            for _ in 0..flips {
                if !input.is_empty() {
                    let at = (next() as usize) % input.len();
                    input[at] = next() as u8;
                }
            }
            decode_verify_run(&input);
            if i % 8 == 0 {
                let text: Vec<u8> = progs[i % progs.len()]
                    .bytes()
                    .map(|c| {
                        if next() % 23 == 0 {
                            next() as u8 % 128
                        } else {
                            c
                        }
                    })
                    .collect();
                assemble_text(&text);
            }
        }
    }
}
