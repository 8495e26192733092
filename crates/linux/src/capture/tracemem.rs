//! `tracemem(addr, size [, dsize])` built at the probe: the record holds `size` bytes of the
//! memory at `addr`, read where the interpreter reads it (`Machine::read_result_into`): a string
//! the clause built in the string scratch (`tracemem(copyinstr(arg0), 16)`) is copied from
//! there, any other address is kernel memory, read with `bpf_probe_read_kernel`. A read that
//! fails is the interpreter's fault: `DTRACEFLT_BADADDR` at `addr`, placed at the last
//! instruction of the action's expression (the interpreter's read is outside the DIF code, and
//! such a fault is placed there). `dsize` is an integer record of its own (`TracememDynsize`), built as
//! `trace()`'s; the consumer prints only that many bytes, as it does for the interpreter's
//! records.

use super::filter::FRAME;
use crate::bpf::insn::{helper, op, Asm, Label, Reg, Size, R0, R1, R10, R2, R3};
use dtrace_dif::vm::FaultKind;
use dtrace_ebpf::translate::{self, FaultWord, ValueKind};

/// Whether a `tracemem()` of `size` bytes of a value of `kind` is built at the probe, or why
/// not: an address (an integer), or a string built in the scratch whose slot holds the `size`
/// bytes (`strsize`: a string's storage, its NUL included).
pub fn check(kind: &ValueKind, size: u32, strsize: usize) -> Result<(), String> {
    match kind {
        ValueKind::Int if size > 0 => Ok(()),
        ValueKind::Scratch if size as usize <= translate::string_scratch_width(strsize) => Ok(()),
        ValueKind::Scratch => Err(format!(
            "tracemem() of {size} bytes of a string of {strsize}: past its storage"
        )),
        _ => Err("tracemem() of memory other than an address or a built string".into()),
    }
}

/// Writes the `size` bytes at the address in r0 (of a value of `kind`) to `rec + at`, where
/// `rec` holds the reserved record (kept). A failed read stores the fault (at instruction `pc`
/// of the clause's code, the address kept at `fp + addr_at`) in the frame and jumps to
/// `faulted`. Uses r0-r3.
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
        ValueKind::Scratch => {
            let too_far = || asm("tracemem() past the record's end".into());
            let mut i = 0usize;
            while i < size as usize {
                let step = if size as usize - i >= 8 {
                    Size::DW
                } else {
                    Size::B
                };
                let off = i16::try_from(i).map_err(|_| too_far())?;
                let to = at.checked_add(off).ok_or_else(too_far)?;
                a.load(step, R1, R0, off).store(step, rec, to, R1);
                i += if step == Size::DW { 8 } else { 1 };
            }
        }
        _ => return Err(asm("tracemem() of a value not built at the probe".into())),
    }
    Ok(())
}
