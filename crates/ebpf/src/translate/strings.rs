//! String compares in translated code (`scmp`): the strings the translator follows are constants
//! (string-table entries, the probe's names) and the current thread's `execname`, read once into the
//! fragment's frame. Bytes compare unsigned, up to `strsize`, as in the interpreter.

use super::{Kind, Untranslatable, COMM_LEN};
use crate::insn::{op, Asm, Size, R1, R10};

/// Emits code leaving the sign of the compare of `x` with `y` in R1 (negative, zero, positive).
pub(super) fn compare(
    a: &mut Asm,
    pc: usize,
    x: &Kind,
    y: &Kind,
    strsize: usize,
    comm: i16,
) -> Result<(), Untranslatable> {
    match (x, y) {
        (Kind::StrConst(p), Kind::StrConst(q)) => {
            a.mov_imm(R1, constant_compare(p, q, strsize));
        }
        (Kind::Execname, Kind::Execname) => {
            a.mov_imm(R1, 0);
        }
        (Kind::Execname, Kind::StrConst(c)) => comm_compare(a, c, strsize, comm, false),
        (Kind::StrConst(c), Kind::Execname) => comm_compare(a, c, strsize, comm, true),
        _ => {
            return Err(Untranslatable::Value {
                pc,
                what: "string compare of a value that is not a constant or execname".into(),
            })
        }
    }
    Ok(())
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

/// `execname` (at `fp + comm`, NUL-terminated within [`COMM_LEN`] bytes, and cut to `strsize - 1`
/// bytes as the interpreter cuts built-in strings) compared with the constant `c`; `swap` when the
/// constant is the left operand. Only as many bytes as can differ are compared: `execname` ends by
/// its 16th byte, `c` at its length.
fn comm_compare(a: &mut Asm, c: &[u8], strsize: usize, comm: i16, swap: bool) {
    let lim = strsize.min(COMM_LEN).min(c.len() + 1);
    let done = a.label();
    let mut ended = false;
    for i in 0..lim {
        let k = i32::from(c.get(i).copied().unwrap_or(0));
        let same = a.label();
        if i + 1 == strsize {
            // The interpreter keeps `strsize - 1` bytes of a built-in string.
            a.mov_imm(R1, 0);
        } else {
            a.load(Size::B, R1, R10, comm + i as i16);
        }
        a.jmp_imm(op::JEQ, R1, k, same);
        a.alu_imm(op::SUB, R1, k);
        if swap {
            a.alu_imm(op::NEG, R1, 0);
        }
        a.ja(done);
        a.bind(same);
        if k == 0 {
            // Both ended here.
            a.mov_imm(R1, 0).ja(done);
            ended = true;
        }
    }
    if !ended {
        // Equal over the `strsize` bytes compared.
        a.mov_imm(R1, 0);
    }
    a.bind(done);
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
