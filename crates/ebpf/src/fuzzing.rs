//! Fuzz entry points (see `fuzz/`): arbitrary bytes as a DIF object for the translator, which must
//! answer with a reason or a fragment whose jumps stay inside it and whose stack use stays in its
//! frame.

use crate::insn::{op, Asm, Insn, Size, R0, R10};
use crate::translate::{translate, Array, Builtin, Frame, KeyPart, ProbeContext, ProbeNames};
use dtrace_dif::object::DifObject;

struct Fixed(ProbeNames);

impl ProbeContext for Fixed {
    fn emit_builtin(&self, a: &mut Asm, b: Builtin) -> Result<(), String> {
        match b {
            Builtin::Gid => Err("not here".into()),
            _ => {
                a.mov_imm(R0, 7);
                Ok(())
            }
        }
    }

    fn emit_execname(&self, _: &mut Asm, _: i16) -> Result<(), String> {
        Ok(())
    }

    fn names(&self) -> &ProbeNames {
        &self.0
    }

    // Every variable is kept at the probe, so the fuzzer reaches the loads and stores; a store's
    // value must be in the fragment's frame, which `check` sees of the load emitted here.
    fn emit_thread_load(&self, a: &mut Asm, _: u32) -> Result<(), String> {
        a.mov_imm(R0, 7);
        Ok(())
    }

    fn emit_thread_store(&self, a: &mut Asm, _: u32, value_at: i16) -> Result<(), String> {
        a.load(Size::DW, R0, R10, value_at);
        Ok(())
    }

    fn emit_global_load(&self, a: &mut Asm, _: u32) -> Result<(), String> {
        a.mov_imm(R0, 7);
        Ok(())
    }

    fn emit_global_store(&self, a: &mut Asm, _: u32, value_at: i16) -> Result<(), String> {
        a.load(Size::DW, R0, R10, value_at);
        Ok(())
    }

    fn emit_local_load(&self, a: &mut Asm, _: u32) -> Result<(), String> {
        a.mov_imm(R0, 7);
        Ok(())
    }

    fn emit_local_store(&self, a: &mut Asm, _: u32, value_at: i16) -> Result<(), String> {
        a.load(Size::DW, R0, R10, value_at);
        Ok(())
    }

    // An array's key parts are in the frame too: each is loaded where the translator says.
    fn emit_array_load(&self, a: &mut Asm, _: Array, key: &[KeyPart]) -> Result<(), String> {
        for part in key {
            if let KeyPart::Int(at) | KeyPart::Execname(at) | KeyPart::Scratch(at) = *part {
                a.load(Size::DW, R0, R10, at);
            }
        }
        a.mov_imm(R0, 7);
        Ok(())
    }

    fn emit_array_store(
        &self,
        a: &mut Asm,
        array: Array,
        key: &[KeyPart],
        value_at: i16,
    ) -> Result<(), String> {
        self.emit_array_load(a, array, key)?;
        a.load(Size::DW, R0, R10, value_at);
        Ok(())
    }

    fn emit_dropped(&self, a: &mut Asm, abandon: crate::insn::Label) -> bool {
        a.ja(abandon);
        true
    }

    // arg1 is a user string the probe copies (as `proc:::exec`'s path).
    fn user_string_arg(&self, n: u8) -> Option<u32> {
        (n == 1).then_some(256)
    }
}

/// Checks what a fragment must be: jumps land inside it or at its end, stack accesses through the
/// frame pointer lie in `frame`.
fn check(insns: &[Insn], frame: Frame) {
    let mut pc = 0;
    while pc < insns.len() {
        let i = insns[pc];
        if i.code == (op::LD | op::DW | op::IMM) {
            pc += 2;
            continue;
        }
        if i.code & 7 == op::JMP && !matches!(i.code & 0xf0, op::CALL | op::EXIT) {
            let t = pc as i64 + 1 + i64::from(i.off);
            assert!(
                (0..=insns.len() as i64).contains(&t),
                "jump from {pc} leaves the fragment"
            );
        }
        let base = match i.code & 7 {
            0x01 => Some((i.src, i.off)),
            0x02 | 0x03 => Some((i.dst, i.off)),
            _ => None,
        };
        if let Some((10, off)) = base {
            assert!(
                (frame.base - Frame::SIZE..frame.base).contains(&off),
                "stack access at {off} outside the frame"
            );
        }
        pc += 1;
    }
}

/// The first byte: entries of the integer table (8 bytes each) that follow; the rest: instruction
/// words, little-endian.
pub fn translate_bytes(data: &[u8]) {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(n % 8).min(rest.len() / 8);
    let (ints, words) = rest.split_at(8 * n);
    let obj = DifObject {
        text: words
            .chunks_exact(4)
            .take(256)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect(),
        inttab: ints
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().unwrap_or([0; 8])))
            .collect(),
        strtab: b"dd\0write\0".to_vec(),
        ..DifObject::default()
    };
    let frame = Frame { base: -16 };
    let ctx = Fixed(ProbeNames::default());
    if let Ok(f) = translate(&obj, &ctx, 256, frame) {
        check(&f.insns, frame);
    }
    // As an aggregation key: a string result is allowed, and stays in the frame too.
    if let Ok(v) = crate::translate::translate_value(&obj, &ctx, 256, frame) {
        check(&v.fragment.insns, frame);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fuzz_smoke() {
        let mut rng = dtrace_testkit::XorShift(0x0bad_cafe_f00d_0001);
        // Opcodes the translator handles, so random words often reach its code.
        let ops = [
            0x01u32, 0x02, 0x03, 0x07, 0x08, 0x09, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12,
            0x13, 0x14, 0x1b, 0x1c, 0x23, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2c, 0x2d, 0x30,
            0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39,
        ];
        for _ in 0..5000 {
            let len = rng.below(40);
            let mut data = vec![rng.next() as u8];
            for _ in 0..len {
                let w = rng.next() as u32;
                let w = if w & 1 == 0 {
                    (ops[rng.below(ops.len())] << 24) | (w & 0x0007_0707)
                } else {
                    w
                };
                data.extend_from_slice(&w.to_le_bytes());
            }
            super::translate_bytes(&data);
        }
    }
}

#[cfg(test)]
mod tuple_tests {
    use dtrace_dif::instr::Instr;
    use dtrace_dif::opcode::Opcode;

    #[test]
    fn a_tuple_and_its_arrays_stay_in_the_frame() {
        let code = [
            Instr::Setx { idx: 0, rd: 1 },
            Instr::Flushts,
            Instr::Pushtv { ty: 0, rs: 1 },
            Instr::Pushtv { ty: 0, rs: 0 },
            Instr::LoadVar {
                op: Opcode::Ldgaa,
                var: 0x500,
                rd: 2,
            },
            Instr::Flushts,
            Instr::Pushtv { ty: 0, rs: 2 },
            Instr::StoreVar {
                op: Opcode::Sttaa,
                var: 0x501,
                rs: 1,
            },
            Instr::Ret { rd: 2 },
        ];
        let mut data = vec![1u8];
        data.extend_from_slice(&7u64.to_le_bytes());
        for i in code {
            data.extend_from_slice(&i.encode().to_le_bytes());
        }
        super::translate_bytes(&data);
    }
}
