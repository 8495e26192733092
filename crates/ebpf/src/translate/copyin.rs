//! `copyin(addr, size)` and `copyinstr(addr [, maxlen])` in translated code; `copyinstr()` as
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
use crate::insn::{helper, op, Size, R0, R1, R10, R2, R3};
use dtrace_dif::vm::FaultKind;

/// User memory is readable or not by pages of this many bytes.
const PAGE: i32 = 4096;

impl Translator<'_> {
    /// The frame offsets of the integers pushed on the tuple stack (a subroutine's arguments).
    pub(super) fn int_args(&self, pc: usize, s: &State) -> Result<Vec<i16>, Untranslatable> {
        let pushed = s.tuple.as_ref().ok_or_else(|| Untranslatable::Value {
            pc,
            what: "subroutine arguments the translator does not follow".into(),
        })?;
        pushed
            .iter()
            .enumerate()
            .map(|(i, p)| match p {
                Pushed::Reg(r) => {
                    self.int(s, pc, *r)?;
                    Ok(self.frame.reg(*r))
                }
                Pushed::Saved => Ok(self.frame.tuple(i)),
                Pushed::Str(_) => Err(Untranslatable::Value {
                    pc,
                    what: "a string where copyinstr() takes an integer".into(),
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
        let refused = |why: String| Untranslatable::Value {
            pc,
            what: format!("copyinstr(): {why}"),
        };
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
        let no_scratch = self.fault_site(pc, FaultKind::NoScratch, FaultAddr::Zero);
        // A Stored fault site: the clause copies a string in, as the planner sees it.
        let bad = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Stored);
        let refused = |why: String| Untranslatable::Value {
            pc,
            what: format!("copyinstr(): {why}"),
        };
        let (a, at) = (&mut self.a, self.frame.fault_addr_at());
        let read = a.label();
        a.load(Size::DW, R3, R10, args[0]);
        a.jmp_imm(op::JNE, R3, 0, read);
        a.store_imm(Size::DW, R10, at, 0);
        a.ja(bad);
        a.bind(read);
        self.ctx
            .emit_pre_read_string(&mut self.a, n)
            .map_err(refused)?;
        self.a.jmp_imm(op::JEQ, R0, 0, no_scratch);
        self.a.store(Size::DW, R10, buf, R0);
        self.a.mov(R1, R0);
        self.put(s, rd, R1, Kind::Scratch);
        Ok(true)
    }
}

/// The most bytes one `copyin()` copies at the probe (a larger copy stays in dtrace).
pub const MAX_COPYIN: u64 = 1024;

impl Translator<'_> {
    /// `copyin(addr, size)` of the arguments on the tuple stack into `rd`, as the interpreter's:
    /// `size` bytes of the user memory of the thread that fired the probe, read whole with
    /// `bpf_probe_read_user` into the context's scratch (slots of the string scratch, as many as
    /// it takes), a read that fails faulting `DTRACEFLT_BADADDR` at `addr`. Only a constant
    /// `size` of 1 to [`MAX_COPYIN`] bytes is copied at the probe (the interpreter's scratch
    /// bounds any other, which the kernel's cannot follow).
    pub(super) fn copyin(
        &mut self,
        pc: usize,
        s: &mut State,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let refused = |why: String| Untranslatable::Value {
            pc,
            what: format!("copyin(): {why}"),
        };
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
        }
        .filter(|n| (1..=MAX_COPYIN).contains(n))
        .ok_or_else(|| refused(format!("a size other than a constant of 1 to {MAX_COPYIN}")))?;
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
}

/// Reads the user byte at r3 into the load buffer at `buf`; r0 is the helper's result.
fn emit_read_byte(a: &mut crate::insn::Asm, buf: i16) {
    a.mov(R1, R10)
        .alu_imm(op::ADD, R1, i32::from(buf))
        .mov_imm(R2, 1)
        .call(helper::PROBE_READ_USER);
}
