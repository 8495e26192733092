//! `copyin(addr, size)` and `copyinstr(addr [, maxlen])` in translated code. `copyin()` of a
//! constant size up to [`MAX_COPYIN`] is copied whole (for `tracemem()`, or read as a string);
//! one sized at run time is exact where it is the clause's only allocation of scratch, and a
//! string reads it, or a recording of its first bytes (`tracemem()`, `trace()` of an object in
//! it), which faults past the copy's size as the interpreter's (see
//! `Translator::copyin_sized`). In a clause that calls `alloca()`, where
//! the interpreter takes the copy from the clause's alloca area, it is taken there too (see
//! `alloca`). `copyinstr()` as
//! the interpreter's: at most `strsize`
//! bytes (D's option; `maxlen` if less, at least 1), the NUL among them, read from the user
//! memory of the thread that fired the probe with `bpf_probe_read_user_str` into a slot of the
//! context's per-CPU string scratch, zeroed first (so the string is zero-padded, as a key needs).
//!
//! A read that fails is the interpreter's fault: `DTRACEFLT_BADADDR` at the first byte it could
//! not read, which is the string's address when its first page is unreadable and else the start
//! of the first unreadable page after it (user memory is readable by whole pages). DTrace reads
//! user memory at the probe, where a page not yet faulted in cannot be read; so does this code.
//! (dtrace's own capture of a syscall entry's strings may read such a page again at the
//! syscall's return; a clause run here does not wait for the return: it reports the fault as
//! DTrace does.)

use super::{FaultAddr, Kind, Pushed, State, Translator, Untranslatable};
use crate::insn::{helper, op, Size, R0, R1, R10, R2, R3, R8, R9};
use dtrace_dif::vm::FaultKind;

/// User memory is readable or not by pages of this many bytes.
const PAGE: i32 = 4096;

impl Translator<'_> {
    /// The frame offsets of the integers pushed on the tuple stack (a subroutine's arguments).
    pub(super) fn int_args(&self, pc: usize, s: &State) -> Result<Vec<i16>, Untranslatable> {
        self.int_args_from(pc, s, 0)
    }

    /// [`Self::int_args`] of the arguments from the `first`th on (those before it, strings,
    /// are the caller's).
    pub(super) fn int_args_from(
        &self,
        pc: usize,
        s: &State,
        first: usize,
    ) -> Result<Vec<i16>, Untranslatable> {
        let pushed = s.tuple.as_ref().ok_or_else(|| Untranslatable::Value {
            pc,
            what: "subroutine arguments the translator does not follow".into(),
        })?;
        pushed
            .iter()
            .enumerate()
            .skip(first)
            .map(|(i, p)| match p {
                Pushed::Reg(r) => {
                    self.int(s, pc, *r)?;
                    Ok(self.frame.reg(*r))
                }
                Pushed::Saved => Ok(self.frame.tuple(i)),
                Pushed::Str(_) => Err(Untranslatable::Value {
                    pc,
                    what: "a string where an integer argument goes".into(),
                }),
            })
            .collect()
    }

    /// `copyinstr()` of the arguments on the tuple stack into `rd` (see the module notes).
    pub(super) fn copyinstr(
        &mut self,
        pc: usize,
        s: &mut State,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let refused = super::refusal(pc, "copyinstr()");
        self.ctx.reads_user_memory().map_err(refused)?;
        let args = self.int_args(pc, s)?;
        if args.is_empty() || args.len() > 2 {
            return Err(Untranslatable::Invalid {
                pc,
                what: format!("copyinstr() with {} arguments", args.len()),
            });
        }
        // D's strsize: the most bytes copied, the NUL included.
        let (most, most32) = self.string_bound().map_err(refused)?;
        // The scratch's address is kept in the load buffer across the helper calls.
        let buf = self.frame.load_buf();
        if self.pre_read(pc, s, &args, rd)? {
            return Ok(());
        }
        self.string_slot(pc, buf, true).map_err(refused)?;
        let bad = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Stored);
        let a = &mut self.a;
        // R2: the bytes to copy, as the interpreter sizes them.
        let (sized, read, done, failed) = (a.label(), a.label(), a.label(), a.label());
        if let Some(&n) = args.get(1) {
            let small = a.label();
            a.load(Size::DW, R2, R10, n);
            a.jmp_imm(op::JLT, R2, most32, small);
            a.mov_imm(R2, most32).ja(sized);
            a.bind(small);
            a.jmp_imm(op::JNE, R2, 0, sized);
            a.mov_imm(R2, 1);
        } else {
            a.mov_imm(R2, most32);
        }
        a.bind(sized);
        a.load(Size::DW, R3, R10, args[0]);
        // One byte holds only the NUL: the interpreter reads nothing, but faults on address 0.
        a.jmp_imm(op::JNE, R2, 1, read);
        a.jmp_imm(op::JNE, R3, 0, done);
        a.store_imm(Size::DW, R10, self.frame.fault_addr_at(), 0);
        a.ja(bad);
        a.bind(read);
        a.load(Size::DW, R1, R10, buf);
        a.call(helper::PROBE_READ_USER_STR);
        a.jmp_imm(op::JSLT, R0, 0, failed);
        a.ja(done);
        // The first byte the interpreter could not read: the string's first, else the first
        // byte of a later page (the fault address is kept at its slot as it is searched).
        a.bind(failed);
        let at = self.frame.fault_addr_at();
        let found = a.label();
        a.load(Size::DW, R3, R10, args[0]);
        a.store(Size::DW, R10, at, R3);
        emit_read_byte(a, buf);
        a.jmp_imm(op::JNE, R0, 0, found);
        a.load(Size::DW, R3, R10, at);
        a.alu_imm(op::OR, R3, PAGE - 1).alu_imm(op::ADD, R3, 1);
        for _ in 0..most / PAGE as usize + 1 {
            a.store(Size::DW, R10, at, R3);
            emit_read_byte(a, buf);
            a.jmp_imm(op::JNE, R0, 0, found);
            a.load(Size::DW, R3, R10, at).alu_imm(op::ADD, R3, PAGE);
        }
        // Every page reads now (the memory changed): the string's address.
        a.load(Size::DW, R3, R10, args[0]);
        a.store(Size::DW, R10, at, R3);
        a.bind(found);
        a.ja(bad);
        a.bind(done);
        a.load(Size::DW, R1, R10, buf);
        self.put(s, rd, R1, Kind::Scratch);
        Ok(())
    }
}

impl Translator<'_> {
    /// Leaves in r0 the address of the copy of probe argument `n`'s user string that the
    /// probe's program read before the clauses ran (`ProbeContext::pre_reads_string`), the
    /// argument's value at frame offset `value` (`what` names the reader in a refusal). As the
    /// interpreter, address 0 faults `DTRACEFLT_BADADDR` at 0, at a [`FaultAddr::Stored`] site
    /// (the clause copies a string in, as the planner sees it); no scratch faults
    /// `DTRACEFLT_NOSCRATCH`.
    pub(super) fn pre_read_copy(
        &mut self,
        pc: usize,
        n: u8,
        value: i16,
        what: &str,
    ) -> Result<(), Untranslatable> {
        let no_scratch = self.fault_site(pc, FaultKind::NoScratch, FaultAddr::Zero);
        let bad = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Stored);
        let (a, at) = (&mut self.a, self.frame.fault_addr_at());
        let read = a.label();
        a.load(Size::DW, R3, R10, value);
        a.jmp_imm(op::JNE, R3, 0, read);
        a.store_imm(Size::DW, R10, at, 0);
        a.ja(bad);
        a.bind(read);
        self.ctx
            .emit_pre_read_string(&mut self.a, n)
            .map_err(super::refusal(pc, what))?;
        self.a.jmp_imm(op::JEQ, R0, 0, no_scratch);
        Ok(())
    }

    /// `copyinstr(argN)` (`args`, the frame offsets of the pushed arguments) of a string the
    /// probe's program read before the clauses ran: its copy into `rd`, read once per firing.
    /// As the interpreter, address 0 faults there. False when there is no such copy.
    fn pre_read(
        &mut self,
        pc: usize,
        s: &mut State,
        args: &[i16],
        rd: u8,
    ) -> Result<bool, Untranslatable> {
        let arg = match (args, s.tuple.as_deref()) {
            ([_], Some([Pushed::Reg(r)])) => s.args[(r & 7) as usize],
            _ => None,
        };
        let Some(n) = arg.filter(|&n| self.ctx.pre_reads_string(n)) else {
            return Ok(false);
        };
        let buf = self.frame.load_buf();
        self.pre_read_copy(pc, n, args[0], "copyinstr()")?;
        self.a.store(Size::DW, R10, buf, R0);
        self.a.mov(R1, R0);
        self.put(s, rd, R1, Kind::Scratch);
        Ok(true)
    }
}

/// The most bytes one `copyin()` of a constant size copies whole at the probe, where
/// `tracemem()` can record them (a larger constant size is copied as one sized at run time).
pub const MAX_COPYIN: u64 = 1024;

/// The most bytes a `copyin()` sized at run time may take (the scratch a context gives,
/// [`ProbeContext::copy_scratch`](super::ProbeContext::copy_scratch), at most this: the pages
/// past the string are checked one by one, in a loop the verifier walks once per page).
pub const MAX_SIZED_COPYIN: u64 = 1 << 20;

/// The address the interpreter reports for a `copyin()` of no bytes when it is the clause's only
/// allocation: the start of its empty alloca area, which DTrace for Linux records as its offset
/// in the scratch past 8 reserved bytes.
const EMPTY_COPY_ADDR: i32 = 8;

impl Translator<'_> {
    /// `copyin(addr, size)` of the arguments on the tuple stack into `rd`, as the interpreter's:
    /// `size` bytes of the user memory of the thread that fired the probe, a read that fails
    /// faulting `DTRACEFLT_BADADDR` at `addr`. A constant `size` of 1 to [`MAX_COPYIN`] bytes is
    /// read whole with `bpf_probe_read_user` into the context's scratch (slots of the string
    /// scratch, as many as it takes), for `tracemem()` or a string; any other is a copy sized at
    /// run time, which only a string can read ([`Translator::copyin_sized`]).
    pub(super) fn copyin(
        &mut self,
        pc: usize,
        s: &mut State,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let refused = super::refusal(pc, "copyin()");
        self.ctx.reads_user_memory().map_err(refused)?;
        let args = self.int_args(pc, s)?;
        if args.len() != 2 {
            return Err(Untranslatable::Invalid {
                pc,
                what: format!("copyin() with {} arguments", args.len()),
            });
        }
        let size = match s.tuple.as_deref() {
            Some([_, Pushed::Reg(r)]) => match &s[(r & 7) as usize] {
                Kind::Int(Some(n)) => Some(*n),
                _ => None,
            },
            _ => None,
        };
        let Some(size) = size.filter(|n| (1..=MAX_COPYIN).contains(n)) else {
            return self.copyin_sized(pc, s, rd, &args);
        };
        // A size past the scratch faults in the interpreter before it reads: left to it.
        if let Ok(most) = self.ctx.copy_scratch() {
            if size > most {
                return Err(refused(format!("a size larger than scratchsize ({most})")));
            }
        }
        let n32 = size as u32;
        // Whole string slots, so later slots stay where string_slot() puts them.
        let width = super::string_scratch_width(self.strsize);
        let slots = (size as usize).div_ceil(width);
        let offset = self.scratch_slots * width;
        self.scratch_slots += slots;
        let buf = self.frame.load_buf();
        let no_scratch = self.fault_site(pc, FaultKind::NoScratch, FaultAddr::Zero);
        let bad = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Frame(args[0]));
        self.ctx
            .emit_string_scratch(&mut self.a, offset, slots * width)
            .map_err(refused)?;
        let a = &mut self.a;
        a.jmp_imm(op::JEQ, R0, 0, no_scratch);
        a.store(Size::DW, R10, buf, R0);
        a.mov(R1, R0).mov_imm(R2, n32 as i32);
        a.load(Size::DW, R3, R10, args[0]);
        a.call(helper::PROBE_READ_USER);
        a.jmp_imm(op::JNE, R0, 0, bad);
        a.load(Size::DW, R1, R10, buf);
        self.put(s, rd, R1, Kind::Buffer(n32));
        Ok(())
    }

    /// `copyin(addr, size)` (`args`: the frame offsets of the two) whose size is known only at
    /// the probe, as the interpreter's when it is the clause's only allocation of scratch (the
    /// context says how much that is): a size past it faults `DTRACEFLT_NOSCRATCH` (at 0), a
    /// size of 0 `DTRACEFLT_BADADDR` at the empty area's address ([`EMPTY_COPY_ADDR`]), and
    /// every byte of `size` is read, the first unreadable one faulting `DTRACEFLT_BADADDR` at
    /// `addr`. Its first `strsize` bytes (D's) are read with `bpf_probe_read_user` into a slot
    /// of the string scratch, zeroed first, the pages past them checked a byte each (a page
    /// reads whole or not at all), and the string, up to the first NUL, copied from there into
    /// the next slot, zeroed first: `rd` holds its address, a string as `copyinstr()` builds
    /// it. The copy's size is kept in the first slot's last word (past D's `strsize` bytes at
    /// most: the slot is `strsize` and its NUL rounded up to 8). A `ret` of the copy as memory
    /// rather than a string takes the first slot instead ([`super::ValueKind::SizedCopy`]:
    /// `State::sized` says which registers hold such a copy).
    fn copyin_sized(
        &mut self,
        pc: usize,
        s: &mut State,
        rd: u8,
        args: &[i16],
    ) -> Result<(), Untranslatable> {
        let refused = super::refusal(pc, "copyin(): a size known only at the probe");
        let most = self.ctx.copy_scratch().map_err(refused)?;
        if most > MAX_SIZED_COPYIN {
            return Err(refused(format!(
                "scratchsize above {MAX_SIZED_COPYIN} bytes"
            )));
        }
        let most32 = most as i32;
        let (chars, chars32) = self.string_bound().map_err(refused)?;
        let width = super::string_scratch_width(self.strsize);
        let w16 = i16::try_from(width).map_err(|_| refused("strsize too large".into()))?;
        // The pages past the string's bytes: at most one per page of the rest, and one more
        // for a rest that starts and ends part way into pages.
        let pages = (most.saturating_sub(chars as u64) / PAGE as u64 + 2) as i32;
        let (addr, size) = (args[0], args[1]);
        let offset = self.scratch_slots * width;
        self.scratch_slots += 2;
        let buf = self.frame.load_buf();
        let no_scratch = self.fault_site(pc, FaultKind::NoScratch, FaultAddr::Zero);
        // The empty area's address is kept at the fault address's own slot (not `Stored`,
        // which says a string copy faulted, see `FaultAddr::Stored`).
        let at = self.frame.fault_addr_at();
        let empty = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Frame(at));
        let bad = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Frame(addr));
        let a = &mut self.a;
        let some = a.label();
        a.load(Size::DW, R2, R10, size);
        a.jmp_imm(op::JGT, R2, most32, no_scratch);
        a.jmp_imm(op::JNE, R2, 0, some);
        a.store_imm(Size::DW, R10, at, EMPTY_COPY_ADDR);
        a.ja(empty);
        a.bind(some);
        self.ctx
            .emit_string_scratch(&mut self.a, offset, 2 * width)
            .map_err(refused)?;
        let a = &mut self.a;
        a.jmp_imm(op::JEQ, R0, 0, no_scratch);
        a.store(Size::DW, R10, buf, R0);
        // The string's bytes (at most D's strsize), into the first slot, zeroed first: they are
        // the copy's as a recording of the memory reads them (`ValueKind::SizedCopy`).
        for w in (0..w16).step_by(8) {
            a.store_imm(Size::DW, R0, w, 0);
        }
        let fits = a.label();
        a.mov(R1, R0);
        a.load(Size::DW, R2, R10, size);
        a.jmp_imm(op::JLE, R2, chars32, fits).mov_imm(R2, chars32);
        a.bind(fits);
        a.load(Size::DW, R3, R10, addr);
        a.call(helper::PROBE_READ_USER);
        a.jmp_imm(op::JNE, R0, 0, bad);
        // The rest, a byte of each page (into the second slot, zeroed after): r9 the next
        // byte to check, r8 the pages left to the bound.
        let (checked, page) = (a.label(), a.label());
        a.load(Size::DW, R2, R10, size);
        a.jmp_imm(op::JLE, R2, chars32, checked);
        a.load(Size::DW, R9, R10, addr)
            .alu_imm(op::ADD, R9, chars32);
        a.mov_imm(R8, pages);
        a.bind(page);
        a.load(Size::DW, R1, R10, buf)
            .alu_imm(op::ADD, R1, i32::from(w16));
        a.mov_imm(R2, 1).mov(R3, R9);
        a.call(helper::PROBE_READ_USER);
        a.jmp_imm(op::JNE, R0, 0, bad);
        a.alu_imm(op::OR, R9, PAGE - 1).alu_imm(op::ADD, R9, 1);
        a.load(Size::DW, R1, R10, addr)
            .load(Size::DW, R2, R10, size);
        a.alu(op::ADD, R1, R2);
        a.jmp_reg(op::JGE, R9, R1, checked);
        a.alu_imm(op::SUB, R8, 1).jmp_imm(op::JNE, R8, 0, page);
        a.bind(checked);
        // The string: up to the first NUL of those bytes, zero-padded.
        a.load(Size::DW, R1, R10, buf)
            .alu_imm(op::ADD, R1, i32::from(w16));
        for w in (0..w16).step_by(8) {
            a.store_imm(Size::DW, R1, w, 0);
        }
        let cut = a.label();
        a.load(Size::DW, R2, R10, size);
        a.jmp_imm(op::JLE, R2, chars32, cut).mov_imm(R2, chars32);
        a.bind(cut).alu_imm(op::ADD, R2, 1);
        a.load(Size::DW, R3, R10, buf);
        a.call(helper::PROBE_READ_KERNEL_STR);
        // The copy's size in the first slot's last word, past the bytes a recording of the
        // memory takes (`ValueKind::SizedCopy`; the string was made of them already).
        a.load(Size::DW, R1, R10, buf)
            .load(Size::DW, R2, R10, size)
            .store(Size::DW, R1, w16 - 8, R2);
        a.load(Size::DW, R1, R10, buf)
            .alu_imm(op::ADD, R1, i32::from(w16));
        self.put(s, rd, R1, Kind::Scratch);
        if let Some(r) = s.sized.get_mut((rd & 7) as usize).filter(|_| rd & 7 != 0) {
            *r = Some(u32::from(w16.unsigned_abs()) - 8);
        }
        Ok(())
    }

    /// `stringof()` of a copy of `n` bytes (`Kind::Buffer`) in DIF register `rd`, as the
    /// interpreter reads it when the copy is the clause's only allocation of scratch: its bytes
    /// up to the first NUL, at most D's `strsize` of them, copied into a fresh slot of the
    /// string scratch, zeroed first, whose address replaces the copy's in `rd`'s slot.
    pub(super) fn buffer_string(
        &mut self,
        pc: usize,
        rd: u8,
        n: u32,
    ) -> Result<(), Untranslatable> {
        let refused = super::refusal(pc, "copyin()'s copy as a string");
        self.ctx.copy_scratch().map_err(refused)?;
        let (chars, _) = self.string_bound().map_err(refused)?;
        let len = chars.min(n as usize) as i32 + 1;
        let at = self.frame.fault_addr_at();
        self.string_slot(pc, at, true).map_err(refused)?;
        let reg = self.frame.reg(rd & 7);
        let a = &mut self.a;
        a.mov(R1, R0).mov_imm(R2, len);
        a.load(Size::DW, R3, R10, reg);
        a.call(helper::PROBE_READ_KERNEL_STR);
        a.load(Size::DW, R1, R10, at).store(Size::DW, R10, reg, R1);
        Ok(())
    }
}

/// Reads the user byte at r3 into the load buffer at `buf`; r0 is the helper's result.
fn emit_read_byte(a: &mut crate::insn::Asm, buf: i16) {
    a.frame_addr(R1, i32::from(buf))
        .mov_imm(R2, 1)
        .call(helper::PROBE_READ_USER);
}
