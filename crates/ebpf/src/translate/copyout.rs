//! `copyout(buf, addr, size)` and `copyoutstr(str, addr, size)` in translated code: DTrace's
//! destructive subroutines that write into the memory of the thread that fired the probe. They
//! only mean something at the probe, before the thread runs on, so the write is
//! `bpf_probe_write_user` there (dtrace, reading the firing later, would write too late; its
//! interpreter refuses such writes).
//!
//! The source is a string the translator follows (a constant, `execname`, a `copyinstr()`
//! result): its storage (`strsize` bytes, the NUL included, zero-padded) is laid out in a slot
//! of the context's per-CPU string scratch and written from there. As DTrace for Linux does:
//! - `copyout` writes `size` bytes of that storage; a size larger than the storage faults with
//!   `DTRACEFLT_BADSIZE` at the size (the interpreter's bound is [`dtrace_dif::vm`]'s copy limit,
//!   far larger than a string), a size of 0 writes nothing;
//! - `copyoutstr` writes the string and its NUL, at most `size` bytes and at most D's `strsize`
//!   (so a size shorter than the string writes that many characters and no NUL);
//! - a write the kernel refuses (an unmapped or read-only address, 0 among them) faults with
//!   `DTRACEFLT_BADADDR` at the destination.

use super::{FaultAddr, Kind, Pushed, State, Translator, Untranslatable};
use crate::insn::{helper, op, Size, R0, R1, R10, R2, R3};
use dtrace_dif::subr::Subr;
use dtrace_dif::vm::FaultKind;

impl Translator<'_> {
    /// `copyout()` or `copyoutstr()` (`which`) of the arguments on the tuple stack; `rd` gets 0.
    pub(super) fn copyout(
        &mut self,
        pc: usize,
        s: &mut State,
        which: Subr,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let name = which.name();
        let named = format!("{name}()");
        let refused = super::refusal(pc, &named);
        self.ctx.reads_user_memory().map_err(refused)?;
        self.ctx.writes_user_memory().map_err(refused)?;
        let pushed = s.tuple.clone().ok_or_else(|| Untranslatable::Value {
            pc,
            what: "subroutine arguments the translator does not follow".into(),
        })?;
        if pushed.len() != 3 {
            return Err(Untranslatable::Invalid {
                pc,
                what: format!("{name}() with {} arguments", pushed.len()),
            });
        }
        let source = match &pushed[0] {
            Pushed::Str(
                k @ (Kind::StrConst(_) | Kind::Execname | Kind::Scratch | Kind::VarStr),
            ) => k.clone(),
            Pushed::Str(_) => {
                return Err(refused("a string the translator does not follow".into()))
            }
            Pushed::Reg(_) | Pushed::Saved => return Err(refused(
                "only strings (constants, execname, copyinstr(), string variables) are written \
                 at the probe, not memory at an address"
                    .into(),
            )),
        };
        // The integer arguments: where each one's value is in the frame.
        let int_at = |i: usize, p: &Pushed| -> Result<i16, Untranslatable> {
            match p {
                Pushed::Reg(r) => {
                    self.int(s, pc, *r)?;
                    Ok(self.frame.reg(*r))
                }
                Pushed::Saved => Ok(self.frame.tuple(i)),
                Pushed::Str(_) => Err(refused(format!("a string as argument #{}", i + 1))),
            }
        };
        let (dst, size) = (int_at(1, &pushed[1])?, int_at(2, &pushed[2])?);
        // The string's storage, and the most bytes copyoutstr() writes (D's strsize).
        let storage = self.strsize;
        let storage32 = i32::try_from(storage).map_err(|_| refused("strsize too large".into()))?;
        let most32 = storage32 - 1;
        if most32 < 1 {
            return Err(refused("strsize 0".into()));
        }
        let bad_dst = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Frame(dst));
        let buf = self.frame.load_buf();
        // The source's storage in the scratch; its address kept in the load buffer.
        match &source {
            Kind::Scratch => {
                // Its address, kept in the tuple slot when it was pushed (see `Pushtr`).
                self.a.load(Size::DW, R0, R10, self.frame.tuple(0));
                self.a.store(Size::DW, R10, buf, R0);
            }
            Kind::VarStr => {
                // A string variable's copy, likewise; NULL (none held) is read at address 0, an
                // invalid address, as in the interpreter.
                let null = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Zero);
                self.a.load(Size::DW, R0, R10, self.frame.tuple(0));
                self.a.jmp_imm(op::JEQ, R0, 0, null);
                self.a.store(Size::DW, R10, buf, R0);
            }
            Kind::StrConst(b) => {
                let b = b.split(|&c| c == 0).next().unwrap_or_default().to_vec();
                self.string_slot(pc, buf, true).map_err(&refused)?;
                let n = b.len().min(storage - 1);
                for (i, chunk) in b[..n].chunks(4).enumerate() {
                    let mut w = [0u8; 4];
                    w[..chunk.len()].copy_from_slice(chunk);
                    self.a
                        .store_imm(Size::W, R0, (i * 4) as i16, i32::from_le_bytes(w));
                }
            }
            Kind::Execname => {
                self.string_slot(pc, buf, true).map_err(&refused)?;
                let comm = self.frame.comm();
                for w in (0..super::COMM_LEN as i16).step_by(8) {
                    self.a.load(Size::DW, R1, R10, comm + w);
                    self.a.store(Size::DW, R0, w, R1);
                }
            }
            _ => unreachable!("matched above"),
        }
        let done = self.a.label();
        // R3: the bytes to write, bounded where the verifier sees it.
        if which == Subr::Copyout {
            let bad_size = self.fault_site(pc, FaultKind::BadSize, FaultAddr::Frame(size));
            let a = &mut self.a;
            a.load(Size::DW, R3, R10, size);
            a.jmp_imm(op::JGT, R3, storage32, bad_size);
            a.jmp_imm(op::JLT, R3, 1, done);
        } else {
            // A string not known here is measured: the string's bytes and its NUL within R3,
            // read into a second slot (the measure needs a destination), whose address waits in
            // the fault address's slot (no fault site here stores there).
            let at = self.frame.fault_addr_at();
            if !matches!(source, Kind::StrConst(_)) {
                self.string_slot(pc, at, false).map_err(&refused)?;
            }
            // R3: the size asked, at most strsize less the NUL.
            let capped = self.a.label();
            let a = &mut self.a;
            a.load(Size::DW, R3, R10, size);
            a.jmp_imm(op::JLE, R3, most32, capped);
            a.mov_imm(R3, most32);
            a.bind(capped);
            a.jmp_imm(op::JLT, R3, 1, done);
            match &source {
                Kind::StrConst(b) => {
                    // The string and its NUL, if fewer.
                    let len = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                    let with_nul = i32::try_from(len + 1).unwrap_or(i32::MAX).min(most32);
                    let fits = a.label();
                    a.jmp_imm(op::JLE, R3, with_nul, fits);
                    a.mov_imm(R3, with_nul);
                    a.bind(fits);
                }
                _ => {
                    a.mov(R2, R3);
                    a.load(Size::DW, R1, R10, at);
                    a.load(Size::DW, R3, R10, buf);
                    a.call(helper::PROBE_READ_KERNEL_STR);
                    a.store_imm(Size::DW, R10, at, 0);
                    a.mov(R3, R0);
                    let (some, fits) = (a.label(), a.label());
                    a.jmp_imm(op::JSGE, R3, 1, some);
                    a.mov_imm(R3, 1);
                    a.bind(some);
                    a.jmp_imm(op::JLE, R3, most32, fits);
                    a.mov_imm(R3, most32);
                    a.bind(fits);
                }
            }
        }
        let a = &mut self.a;
        a.load(Size::DW, R2, R10, buf);
        a.load(Size::DW, R1, R10, dst);
        a.call(helper::PROBE_WRITE_USER);
        a.jmp_imm(op::JNE, R0, 0, bad_dst);
        a.bind(done);
        a.mov_imm(R1, 0);
        self.put(s, rd, R1, Kind::Int(Some(0)));
        Ok(())
    }
}
