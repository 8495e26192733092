//! `memstr(addr, c, size)` in translated code, as the interpreter's: the `size - 1` bytes at
//! `addr`, read as the interpreter reads a subroutine's argument bytes (kernel memory with
//! `bpf_probe_read_kernel`, alloca() memory checked as its reads check it, or a `copyin()`'s
//! copy that holds them all (past it the interpreter reads its scratch); a read that fails
//! faults `DTRACEFLT_BADADDR` at `addr`), each NUL among them made `c`, as a string. A constant
//! `size` of 0 (D's NULL string), 1 (no bytes read, yet the interpreter checks the address) or
//! above 4096 (always `DTRACEFLT_ILLOP` at 0 in the interpreter) keeps the clause in dtrace. A
//! size computed at run time is read as the interpreter reads it (`Translator::memstr_sized`:
//! NULL at 0, the string or NULL after it as a string variable's), where the most it may be (a
//! mask's) fits the string scratch: the bytes read are the scratch taken.
//!
//! The bytes are read whole into a work area of the context's string scratch (so a read the
//! interpreter would fault faults here too, past `strsize` as well), then the first `strsize`
//! of them are copied into the zeroed result slot before it, each NUL replaced without a
//! branch (a loop of a constant count the verifier walks once). As `lltostr()`'s, the string
//! keeps `strsize` characters where the interpreter's readers may read them (a compare), a zero
//! word after the slot ending it when it is full.

use super::alloca::{Access, Amount};
use super::{FaultAddr, Kind, State, Translator, Untranslatable};
use crate::insn::{helper, op, Size, R0, R1, R10, R2, R3, R4, R5, R9};
use dtrace_dif::vm::subr::MEMSTR_MAX;
use dtrace_dif::vm::FaultKind;

impl Translator<'_> {
    /// `memstr()` of the arguments on the tuple stack into `rd` (see the module notes).
    pub(super) fn memstr(
        &mut self,
        pc: usize,
        s: &mut State,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let refused = super::refusal(pc, "memstr()");
        if s.tuple.as_ref().map_or(0, Vec::len) != 3 {
            return Err(Untranslatable::Invalid {
                pc,
                what: "memstr() without 3 arguments".into(),
            });
        }
        let (addr, from) = self.pushed_arg(pc, s, 0)?;
        let c = match self.pushed_arg(pc, s, 1)? {
            (at, Kind::Int(_)) => at,
            _ => return Err(refused("a character other than an integer".into())),
        };
        let size = match self.pushed_amount(pc, s, 2)? {
            Amount::Const(n) => n,
            Amount::Run(at, most) => {
                return self.memstr_sized(pc, s, rd, (addr, from), c, (at, most));
            }
        };
        if size == 0 {
            // D's NULL string: the interpreter returns 0 without reading.
            return Err(refused("a size of 0 (a NULL string)".into()));
        }
        if size > MEMSTR_MAX {
            // Always an illegal operation: the interpreter's, where the clause's value kind
            // needs no following.
            return Err(refused(format!(
                "a size above {MEMSTR_MAX} (an illegal operation)"
            )));
        }
        if size == 1 {
            // No bytes: the interpreter still checks the address as its reads do.
            return Err(refused("a size of 1 (no bytes read)".into()));
        }
        let n = (size - 1) as usize;
        let (most, _) = self.string_bound().map_err(refused)?;
        let copied = n.min(most + 1);
        let width = super::string_scratch_width(self.strsize);
        // The result's slot, a zero word, the bytes read.
        let work = width + 8;
        let slots = (work + n).div_ceil(width);
        let buf = self.frame.load_buf();
        // Where the bytes are: the argument (kernel memory, or a copyin()'s copy holding them
        // all), or the checked address in alloca() memory its pointer names (kept in the
        // fault address's slot meanwhile).
        let src = match from {
            Kind::Alloca => {
                self.alloca_bytes_at(pc, addr, n as u32)?;
                let src = self.frame.fault_addr_at();
                self.a.store(Size::DW, R10, src, R1);
                src
            }
            Kind::Buffer(m) if n <= m as usize => addr,
            Kind::Buffer(m) => {
                return Err(refused(format!(
                    "{n} bytes of a copyin() copy of {m} (past it the interpreter reads its \
                     scratch)"
                )))
            }
            Kind::Int(_) => addr,
            _ => return Err(refused("an address the translator does not follow".into())),
        };
        let bad = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Frame(addr));
        self.scratch_area(pc, slots, buf, work).map_err(refused)?;
        let a = &mut self.a;
        a.mov(R1, R0).alu_imm(op::ADD, R1, work as i32);
        a.mov_imm(R2, n as i32);
        a.load(Size::DW, R3, R10, src);
        a.call(helper::PROBE_READ_KERNEL);
        a.jmp_imm(op::JNE, R0, 0, bad);
        emit_nuls_made_c(a, (buf, work), copied, c, None);
        a.load(Size::DW, R1, R10, buf);
        self.put(s, rd, R1, Kind::Scratch);
        Ok(())
    }

    /// `memstr(addr, c, size)` of a size known only at the probe (at `fp + size.0`, at most
    /// `size.1` where a mask says so), `addr` at `fp + src.0` of kind `src.1`, `c` at `fp + c`,
    /// as the interpreter's: a size of 0 gives NULL (the result is [`Kind::VarStr`], NULL or
    /// a string, as a string variable's), one above [`MEMSTR_MAX`] an illegal operation (at
    /// 0), any other reads its bytes less one, checked as the constant size's are (alloca()
    /// memory as [`Access::CopySized`] checks a copy of them), a size of 1 reading none (as
    /// `bpf_probe_read_kernel` of none, which never faults). The most it may read must fit
    /// the string scratch beside the result's slot: an unmasked size (up to 4095 bytes) does
    /// not, and stays in dtrace with that reason.
    fn memstr_sized(
        &mut self,
        pc: usize,
        s: &mut State,
        rd: u8,
        src: (i16, Kind),
        c: i16,
        size: (i16, Option<u64>),
    ) -> Result<(), Untranslatable> {
        let refused = super::refusal(pc, "memstr()");
        let (addr, from) = src;
        let (size_at, most) = size;
        // The most bytes read: one less than the most the size can be that does not fault.
        let most_n = most.unwrap_or(MEMSTR_MAX).min(MEMSTR_MAX).saturating_sub(1) as usize;
        if most_n == 0 {
            return Err(refused("a size of at most 1 computed at run time".into()));
        }
        let (chars, _) = self.string_bound().map_err(refused)?;
        let copied = most_n.min(chars + 1);
        let width = super::string_scratch_width(self.strsize);
        let work = width + 8;
        let slots = (work + most_n).div_ceil(width);
        let buf = self.frame.load_buf();
        // The bytes read (the size less one) where the size was pushed: the tuple's slot of its
        // position, free at the call (a size pushed from a register is read from there).
        let n_at = self.frame.tuple(2);
        let illop = self.fault_site(pc, FaultKind::IllOp, FaultAddr::Zero);
        let no_scratch = self.fault_site(pc, FaultKind::NoScratch, FaultAddr::Zero);
        let (null, done) = (self.a.label(), self.a.label());
        {
            let a = &mut self.a;
            a.load(Size::DW, R2, R10, size_at);
            a.jmp_imm(op::JEQ, R2, 0, null);
            a.jmp_imm(op::JGT, R2, MEMSTR_MAX as i32, illop);
            a.alu_imm(op::SUB, R2, 1).store(Size::DW, R10, n_at, R2);
        }
        let src = match from {
            Kind::Alloca => {
                self.alloca_access(pc, addr, Access::CopySized(n_at))?;
                let src = self.frame.fault_addr_at();
                self.a.store(Size::DW, R10, src, R1);
                src
            }
            Kind::Buffer(m) if most_n <= m as usize => addr,
            Kind::Buffer(m) => {
                return Err(refused(format!(
                    "up to {most_n} bytes of a copyin() copy of {m} (past it the interpreter \
                     reads its scratch)"
                )))
            }
            Kind::Int(_) => addr,
            _ => return Err(refused("an address the translator does not follow".into())),
        };
        let bad = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Frame(addr));
        self.scratch_area(pc, slots, buf, work).map_err(|why| {
            refused(format!(
                "a size computed at run time of up to {} bytes: {why} (a size masked to fewer \
                 runs at the probe)",
                most_n + 1
            ))
        })?;
        let a = &mut self.a;
        a.mov(R1, R0).alu_imm(op::ADD, R1, work as i32);
        a.load(Size::DW, R2, R10, n_at);
        // Never taken (checked above, the mask's bound): the verifier's.
        a.jmp_imm(op::JGT, R2, most_n as i32, no_scratch);
        a.load(Size::DW, R3, R10, src);
        a.call(helper::PROBE_READ_KERNEL);
        a.jmp_imm(op::JNE, R0, 0, bad);
        emit_nuls_made_c(a, (buf, work), copied, c, Some((n_at, done)));
        a.ja(done);
        a.bind(null);
        a.store_imm(Size::DW, R10, buf, 0);
        a.bind(done);
        a.load(Size::DW, R1, R10, buf);
        self.put(s, rd, R1, Kind::VarStr);
        Ok(())
    }
}

/// Copies `copied` bytes from `work` bytes past the result's slot (its address at `fp + buf`)
/// into the slot, each NUL made `c` (at `fp + c`) without a branch, in a loop of that constant
/// count the verifier walks once; with `read`, it ends too once the bytes read (their count at
/// `fp + read.0`, known only at the probe) are copied, jumping to `read.1`. Uses r0-r5, and r9
/// with `read`.
fn emit_nuls_made_c(
    a: &mut crate::insn::Asm,
    (buf, work): (i16, usize),
    copied: usize,
    c: i16,
    read: Option<(i16, crate::insn::Label)>,
) {
    // R1: the byte read, R2: where it goes, R3: the bytes left of `copied` (a constant count,
    // which older verifiers see end where a count read at run time would not), R9: the bytes
    // left of those read, R5: `c`.
    let top = a.label();
    a.load(Size::DW, R2, R10, buf);
    a.mov(R1, R2).alu_imm(op::ADD, R1, work as i32);
    a.mov_imm(R3, copied as i32);
    if let Some((n_at, _)) = read {
        a.load(Size::DW, R9, R10, n_at);
    }
    a.load(Size::DW, R5, R10, c).alu_imm(op::AND, R5, 0xff);
    a.bind(top);
    if let Some((_, done)) = read {
        a.jmp_imm(op::JEQ, R9, 0, done);
    }
    a.load(Size::B, R4, R1, 0);
    // 1 when the byte is NUL (0 - 1 has the top bit), times `c`, added.
    a.mov(R0, R4)
        .alu_imm(op::SUB, R0, 1)
        .alu_imm(op::RSH, R0, 63);
    a.alu(op::MUL, R0, R5).alu(op::ADD, R4, R0);
    a.store(Size::B, R2, 0, R4);
    a.alu_imm(op::ADD, R1, 1).alu_imm(op::ADD, R2, 1);
    a.alu_imm(op::SUB, R3, 1);
    if read.is_some() {
        a.alu_imm(op::SUB, R9, 1);
    }
    a.jmp_imm(op::JNE, R3, 0, top);
}
