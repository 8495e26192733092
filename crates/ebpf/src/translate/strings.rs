//! String compares in translated code (`scmp`): the strings the translator follows are constants
//! (string-table entries, the probe's names), the current thread's `execname`, read once into the
//! fragment's frame, and strings built in the context's scratch (`copyinstr()`), whose address a
//! DIF register holds, and string variables loaded into that scratch, whose register holds 0 for
//! NULL. As in the interpreter, NULL (such a register, or the constant 0) compares as the empty
//! string. Bytes compare unsigned, up to `strsize`, as in the interpreter; the code is unrolled
//! over the bytes that can differ (no loop for the verifier to bound).

use super::{Kind, Untranslatable, COMM_LEN};
use crate::insn::{op, Asm, Reg, Size, R1, R10, R2, R4, R5};

/// Where the bytes of one operand come from.
#[derive(Clone, Copy)]
enum Src<'k> {
    /// A constant, its bytes before the NUL.
    Const(&'k [u8]),
    /// `execname` in the frame (cut to `strsize - 1` bytes, as the interpreter cuts built-in
    /// strings).
    Comm,
    /// A string in scratch, its address in this register.
    Ptr(Reg),
    /// As [`Src::Ptr`], or NULL (the empty string) when the register holds 0.
    Nullable(Reg),
}

impl Src<'_> {
    /// Bytes to compare at most: by then this operand has ended.
    fn limit(self, strsize: usize) -> usize {
        match self {
            Src::Const(c) => c.len() + 1,
            Src::Comm => COMM_LEN,
            Src::Ptr(_) | Src::Nullable(_) => strsize,
        }
    }
}

/// Emits code leaving the sign of the compare of `x` with `y` in R1 (negative, zero, positive);
/// each operand is a kind and the frame offset of its DIF register.
pub(super) fn compare(
    a: &mut Asm,
    pc: usize,
    x: (&Kind, i16),
    y: (&Kind, i16),
    strsize: usize,
    comm: i16,
) -> Result<(), Untranslatable> {
    let ((sx, px), (sy, py)) = (source(pc, x, R4)?, source(pc, y, R5)?);
    match (sx, sy) {
        (Src::Const(p), Src::Const(q)) => {
            a.mov_imm(R1, constant_compare(p, q, strsize));
            return Ok(());
        }
        (Src::Comm, Src::Comm) => {
            a.mov_imm(R1, 0);
            return Ok(());
        }
        _ => {}
    }
    for (p, r) in [(px, R4), (py, R5)] {
        if let Some(slot) = p {
            a.load(Size::DW, r, R10, slot);
        }
    }
    let n = strsize.min(sx.limit(strsize)).min(sy.limit(strsize));
    let (done, ended) = (a.label(), a.label());
    // NULL is the empty string: its compare with `s` is the sign of `-s[0]`.
    if let Src::Nullable(r) = sx {
        let not_null = a.label();
        a.jmp_imm(op::JNE, r, 0, not_null);
        if let Src::Nullable(q) = sy {
            let y_not_null = a.label();
            a.jmp_imm(op::JNE, q, 0, y_not_null);
            a.mov_imm(R1, 0).ja(done);
            a.bind(y_not_null);
        }
        byte(a, R1, sy, 0, strsize, comm);
        a.alu_imm(op::NEG, R1, 0).ja(done);
        a.bind(not_null);
    }
    if let Src::Nullable(r) = sy {
        let not_null = a.label();
        a.jmp_imm(op::JNE, r, 0, not_null);
        byte(a, R1, sx, 0, strsize, comm);
        a.ja(done);
        a.bind(not_null);
    }
    let mut ends = false;
    for i in 0..n {
        let same = a.label();
        match (sx, sy) {
            (Src::Const(c), other) | (other, Src::Const(c)) => {
                let k = i32::from(c.get(i).copied().unwrap_or(0));
                byte(a, R1, other, i, strsize, comm);
                a.jmp_imm(op::JEQ, R1, k, same);
                if matches!(sx, Src::Const(_)) {
                    // The constant is the left operand: k - byte.
                    a.mov(R2, R1).mov_imm(R1, k).alu(op::SUB, R1, R2);
                } else {
                    a.alu_imm(op::SUB, R1, k);
                }
                a.ja(done);
                a.bind(same);
                if k == 0 {
                    // Both ended here.
                    a.ja(ended);
                    ends = true;
                    break;
                }
            }
            _ => {
                byte(a, R1, sx, i, strsize, comm);
                byte(a, R2, sy, i, strsize, comm);
                a.jmp_reg(op::JEQ, R1, R2, same);
                a.alu(op::SUB, R1, R2).ja(done);
                a.bind(same);
                a.jmp_imm(op::JEQ, R1, 0, ended);
                ends = true;
            }
        }
    }
    // Equal over the bytes compared.
    if ends {
        a.bind(ended);
    }
    a.mov_imm(R1, 0);
    a.bind(done);
    Ok(())
}

/// Where the bytes of string `k` (its DIF register at frame offset `slot`) come from; a scratch
/// string's address is to be loaded into `reg` from that slot.
fn source<'k>(
    pc: usize,
    (k, slot): (&'k Kind, i16),
    reg: Reg,
) -> Result<(Src<'k>, Option<i16>), Untranslatable> {
    Ok(match k {
        Kind::StrConst(b) => (
            Src::Const(b.split(|&c| c == 0).next().unwrap_or_default()),
            None,
        ),
        Kind::Execname => (Src::Comm, None),
        Kind::Scratch => (Src::Ptr(reg), Some(slot)),
        Kind::VarStr => (Src::Nullable(reg), Some(slot)),
        // NULL (`s == NULL`): the interpreter compares it as the empty string.
        Kind::Int(Some(0)) => (Src::Const(b""), None),
        Kind::Mixed(m) => {
            return Err(Untranslatable::Value {
                pc,
                what: format!(
                    "string compare of values of different kinds on different paths ({})",
                    m.describe()
                ),
            })
        }
        _ => {
            return Err(Untranslatable::Value {
                pc,
                what: "string compare of a value the translator does not follow".into(),
            })
        }
    })
}

/// Loads byte `i` of `src` into `dst`.
fn byte(a: &mut Asm, dst: Reg, src: Src<'_>, i: usize, strsize: usize, comm: i16) {
    match src {
        Src::Const(c) => {
            a.mov_imm(dst, i32::from(c.get(i).copied().unwrap_or(0)));
        }
        // The interpreter keeps `strsize - 1` bytes of a built-in string.
        Src::Comm if i + 1 >= strsize => {
            a.mov_imm(dst, 0);
        }
        Src::Comm => {
            a.load(Size::B, dst, R10, comm + i as i16);
        }
        Src::Ptr(r) | Src::Nullable(r) => {
            a.load(Size::B, dst, r, i as i16);
        }
    }
}

/// The interpreter's compare of two known strings, as -1, 0 or 1.
fn constant_compare(p: &[u8], q: &[u8], strsize: usize) -> i32 {
    for i in 0..strsize {
        let (c1, c2) = (
            p.get(i).copied().unwrap_or(0),
            q.get(i).copied().unwrap_or(0),
        );
        if c1 != c2 {
            return if c1 < c2 { -1 } else { 1 };
        }
        if c1 == 0 {
            break;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::constant_compare;

    #[test]
    fn constants_compare_as_the_interpreter_does() {
        assert_eq!(constant_compare(b"dd", b"dd", 256), 0);
        assert_eq!(constant_compare(b"dd", b"de", 256), -1);
        assert_eq!(constant_compare(b"dd", b"d", 256), 1);
        assert_eq!(constant_compare(b"abcdef", b"abcxyz", 3), 0);
        assert_eq!(constant_compare(&[0xff], b"a", 256), 1);
    }
}
