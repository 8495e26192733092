//! `tracemem(addr, size [, dsize])` built at the probe: the record holds `size` bytes of the
//! memory at `addr`, read where the interpreter reads it (`Machine::read_result_into`): what
//! `copyin()` copied from user memory into the scratch (`tracemem(copyin(arg1, 16), 16)`) is
//! copied from there, any other address is kernel memory, read with `bpf_probe_read_kernel`. A read that
//! fails is the interpreter's fault: `DTRACEFLT_BADADDR` at `addr`, placed at the last
//! instruction of the action's expression (the interpreter's read is outside the DIF code, and
//! such a fault is placed there). `dsize` is an integer record of its own (`TracememDynsize`), built as
//! `trace()`'s; the consumer prints only that many bytes, as it does for the interpreter's
//! records.
//!
//! A value recorded by reference that is not a string (`trace(*p)` of a struct, a union or an
//! array, `trace(curthread->comm)`, the object `print(p)` records after its pointer) is recorded
//! the same way: the framework copies `rtype.size` bytes from the value's address
//! (`Machine::read_result_into`), kernel memory or `copyin()`'s copy, and a failed read is the
//! same fault at the same place ([`check_object`]).

use super::filter::FRAME;
use crate::bpf::insn::{helper, op, Asm, Label, Reg, Size, R0, R1, R10, R2, R3};
use dtrace_dif::vm::FaultKind;
use dtrace_ebpf::translate::{FaultWord, ValueKind};

/// Whether a `tracemem()` of `size` bytes of a value of `kind` is built at the probe, or why
/// not: an address (an integer), or `copyin()`'s copy when it holds the `size` bytes (past them
/// the interpreter's read faults, as a copy taken in the clause's alloca area does: a clause
/// whose translation fails here takes its copies there), or a copy sized at the probe when
/// `size` is no more than the bytes kept of it (the size is compared with the copy's at run
/// time, see [`emit`]).
pub fn check(kind: &ValueKind, size: u32) -> Result<(), String> {
    match kind {
        ValueKind::Int if size > 0 => Ok(()),
        ValueKind::Buffer(n) if size <= *n => Ok(()),
        ValueKind::Buffer(n) => Err(format!(
            "tracemem() of {size} bytes of the {n} copyin() copied"
        )),
        ValueKind::SizedCopy(n) if size <= *n => Ok(()),
        ValueKind::SizedCopy(n) => Err(format!(
            "tracemem() of {size} bytes of a copyin() sized at the probe (its first {n} are \
             kept there: a larger strsize keeps more)"
        )),
        _ => Err("tracemem() of memory other than an address or copyin()'s copy".into()),
    }
}

/// Whether an object of `size` bytes recorded by reference from a value of `kind` is built at
/// the probe, or why not: at a kernel address (an integer), or in `copyin()`'s copy when the
/// copy holds the object (as [`check`]), or in a copy sized at the probe, or in a string the
/// code built (a translator's `char[]` member made by a subroutine, `curpsinfo->pr_psargs`)
/// when its slot of the string scratch, `scratch_width` bytes zero-padded past the NUL, holds
/// the object: the interpreter reads the same bytes from its scratch, zeros past the string.
pub fn check_object(kind: &ValueKind, size: u32, scratch_width: usize) -> Result<(), String> {
    match kind {
        ValueKind::Int if size > 0 => Ok(()),
        ValueKind::Scratch if size as usize <= scratch_width => Ok(()),
        ValueKind::Scratch => Err(format!(
            "an object of {size} bytes recorded from a string of {scratch_width} (a larger \
             strsize holds it)"
        )),
        ValueKind::Buffer(n) if size <= *n => Ok(()),
        ValueKind::Buffer(n) => Err(format!(
            "an object of {size} bytes recorded from the {n} copyin() copied"
        )),
        ValueKind::SizedCopy(n) if size <= *n => Ok(()),
        ValueKind::SizedCopy(n) => Err(format!(
            "an object of {size} bytes recorded from a copyin() sized at the probe (its first \
             {n} are kept there: a larger strsize keeps more)"
        )),
        _ => Err(
            "an object recorded by reference from memory other than an address or \
                  copyin()'s copy"
                .into(),
        ),
    }
}

/// Writes the `size` bytes at the address in r0 (of a value of `kind`) to `rec + at`, where
/// `rec` holds the reserved record (kept). A failed read stores the fault (at instruction `pc`
/// of the clause's code, the address kept at `fp + addr_at`) in the frame and jumps to
/// `faulted`. Of a copy sized at the probe, more bytes than its size fault as the
/// interpreter's read past its alloca area: `DTRACEFLT_BADSIZE`, the bytes read as the address,
/// at `pc`. Uses r0-r3.
#[allow(clippy::too_many_arguments)]
pub fn emit(
    a: &mut Asm,
    kind: &ValueKind,
    rec: Reg,
    at: i16,
    size: u32,
    pc: u32,
    addr_at: i16,
    faulted: Label,
) -> crate::error::Result<()> {
    let asm = |e: String| crate::error::LinuxError::Asm(e);
    match kind {
        ValueKind::Int => {
            let n = i32::try_from(size).map_err(|_| asm("tracemem() too large".into()))?;
            let ok = a.label();
            a.store(Size::DW, R10, addr_at, R0);
            a.mov(R3, R0)
                .mov(R1, rec)
                .alu_imm(op::ADD, R1, i32::from(at))
                .mov_imm(R2, n)
                .call(helper::PROBE_READ_KERNEL);
            a.jmp_imm(op::JEQ, R0, 0, ok);
            let word = FaultWord {
                kind: FaultKind::BadAddr.code(),
                pc,
            };
            a.ld_imm64(R1, word.encode());
            a.store(Size::DW, R10, FRAME.fault_at(), R1);
            a.load(Size::DW, R1, R10, addr_at);
            a.store(Size::DW, R10, FRAME.fault_addr_at(), R1);
            a.ja(faulted);
            a.bind(ok);
        }
        // A string built at the probe, zero-padded in its slot (see `check_object`).
        ValueKind::Buffer(_) | ValueKind::Scratch => {
            super::kagg::emit_copy(a, rec, at, R0, size as usize)?
        }
        ValueKind::SizedCopy(cap) => {
            // More bytes than the copy holds: the interpreter's read past its alloca area.
            let (n, cap) = (
                i32::try_from(size).map_err(|_| asm("tracemem() too large".into()))?,
                i16::try_from(*cap).map_err(|_| asm("strsize too large".into()))?,
            );
            let ok = a.label();
            a.load(Size::DW, R1, R0, cap);
            a.jmp_imm(op::JGE, R1, n, ok);
            let word = FaultWord {
                kind: FaultKind::BadSize.code(),
                pc,
            };
            a.ld_imm64(R1, word.encode());
            a.store(Size::DW, R10, FRAME.fault_at(), R1);
            a.store_imm(Size::DW, R10, FRAME.fault_addr_at(), n);
            a.ja(faulted);
            a.bind(ok);
            super::kagg::emit_copy(a, rec, at, R0, size as usize)?
        }
        _ => return Err(asm("tracemem() of a value not built at the probe".into())),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_read_at_addresses_and_from_copies_that_hold_them() {
        assert_eq!(check_object(&ValueKind::Int, 24, 8), Ok(()));
        assert_eq!(check_object(&ValueKind::Buffer(16), 16, 8), Ok(()));
        let e = check_object(&ValueKind::Buffer(8), 16, 8).unwrap_err();
        assert!(
            e.contains("16 bytes") && e.contains("the 8 copyin()"),
            "{e}"
        );
        // A string built at the probe holds as many bytes as its slot.
        assert_eq!(check_object(&ValueKind::Scratch, 80, 256), Ok(()));
        let e = check_object(&ValueKind::Scratch, 80, 64).unwrap_err();
        assert!(e.contains("80 bytes") && e.contains("string of 64"), "{e}");
        assert!(check_object(&ValueKind::Execname, 16, 256).is_err());
        assert!(check_object(&ValueKind::Int, 0, 256).is_err());
        assert_eq!(check_object(&ValueKind::SizedCopy(256), 256, 8), Ok(()));
        let e = check_object(&ValueKind::SizedCopy(256), 257, 8).unwrap_err();
        assert!(e.contains("sized at the probe"), "{e}");
        assert_eq!(check(&ValueKind::SizedCopy(256), 32), Ok(()));
        assert!(check(&ValueKind::SizedCopy(256), 300).is_err());
    }
}
