//! Address expressions evaluated at the probe: the one emitter of the eBPF that turns an
//! [`AddrExpr`] (a base, an offset, kernel pointer hops, user pointer hops, an index by a probe
//! argument) into an address in r3, for every capture program that needs one: the memory copies
//! and the return-time retry of [`super::codegen`], the `d_path()` walks of [`super::path`] and the
//! thread-local saves of [`super::mirror`].
//!
//! An [`Evaluator`] says how its caller wants the address reached:
//! - which bases the program can read ([`AddrBase::Arg`] and [`AddrBase::CurrentTask`] from the
//!   record always; [`AddrBase::Context`] and [`AddrBase::DataLoc`] only at a tracepoint, whose
//!   record is in r6; [`AddrBase::ThreadVar`] only with the mirror map);
//! - the 8-byte slot each hop reads its pointer through ([`Slot`]: the stack, or a record slot
//!   where the caller keeps its state there, as the path walk does);
//! - what a hop that cannot be read does: by default the evaluation goes on from the zeroed
//!   pointer (the helpers zero their destination on a fault), so the read at the end faults on its
//!   own and is reported with the copy; with [`Evaluator::faulting_to`] a hop that fails or reads
//!   NULL branches to the caller's fault label instead;
//! - a thread-local with no mirrored address on the thread is no address at all: the evaluation
//!   branches to a label it hands back for the caller to bind where it records "no copy".
//!
//! The address is evaluated in two parts, [`Evaluator::emit_kernel`] (base to the last kernel
//! hop) then [`Evaluator::emit_user`] (the user hops), because a copy retried at a syscall's
//! return saves the address between them and restarts the user hops from it
//! ([`Evaluator::emit`] does both). Every part uses r0-r5 (helper calls) and reads the record in r7.
//!
//! What does not fit the shape and stays with its owner:
//! - the fixed kernel reads of the header (`current->real_parent->tgid` and the other identity
//!   fields of [`super::codegen`]) and the path walk's own pointer chasing past the `struct path`
//!   (its steps branch on what they read, not only on faults): known offsets of known structures,
//!   not a D expression, and each read lands in its own record field rather than in r3;
//! - argument sources that read a value at the probe (`ArgSource::UserMem`, a USDT argument such as
//!   `8@16(%rbp)`; `ArgSource::RawArgLoad`): a sized, sign-extended load that reads 0 on a fault,
//!   a value rather than an address;
//! - the loads of D clauses run whole at the probe (`dtrace_ebpf::translate`): DIF's own
//!   instructions, faulting to the ERROR probe with the DIF offset, as the interpreter does.

use super::codegen::CtxKind;
use super::layout::{hdr, NARGS};
use super::spec::{AddrBase, AddrExpr};
use crate::bpf::insn::{helper, op, Asm, Label, Size, R0, R1, R10, R2, R3, R6, R7};
use crate::bpf::Reg;
use crate::error::{LinuxError, Result};

/// An 8-byte slot at `base + off` through which a hop reads its pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Slot {
    /// The register holding the slot's base: r10 for the stack, else a pointer into the record.
    pub base: Reg,
    /// The slot's offset from it.
    pub off: i16,
}

impl Slot {
    /// The stack slot at `off` from the frame pointer.
    pub const fn stack(off: i16) -> Slot {
        Slot { base: R10, off }
    }
}

/// How a capture program evaluates address expressions (see the module's doc).
#[derive(Clone, Copy, Debug)]
pub(super) struct Evaluator {
    /// What the address is for, in errors ("a copy", "d_path() of a struct path").
    what: &'static str,
    /// Where hops read their pointer.
    slot: Slot,
    /// The probe's context kind, when its context (in r6) may be a base.
    context: Option<CtxKind>,
    /// The thread-variable mirror map and an 8-byte stack slot for its key, when a thread-local
    /// may be a base.
    mirror: Option<(i32, i16)>,
    /// Where a hop that cannot be read, or reads NULL, branches.
    fault: Option<Label>,
}

impl Evaluator {
    /// Reads bases from the record only; hops go through `slot`; a faulting hop goes on from 0.
    pub fn new(what: &'static str, slot: Slot) -> Self {
        Evaluator {
            what,
            slot,
            context: None,
            mirror: None,
            fault: None,
        }
    }

    /// Also reads bases from the probe's context (a tracepoint record, in r6), of kind `ctx`.
    pub fn with_context(mut self, ctx: CtxKind) -> Self {
        self.context = Some(ctx);
        self
    }

    /// Also reads thread-local bases from the mirror map `map`, building its key at the stack
    /// slot `key`.
    pub fn with_mirror(mut self, map: i32, key: i16) -> Self {
        self.mirror = Some((map, key));
        self
    }

    /// A hop (kernel or user) that cannot be read or reads NULL branches to `fault`.
    pub fn faulting_to(mut self, fault: Label) -> Self {
        self.fault = Some(fault);
        self
    }

    /// The whole of `e` into r3: [`Evaluator::emit_kernel`] then [`Evaluator::emit_user`].
    pub fn emit(&self, a: &mut Asm, e: &AddrExpr) -> Result<Option<Label>> {
        let missing = self.emit_kernel(a, e)?;
        self.emit_user(a, &e.user_derefs, None);
        Ok(missing)
    }

    /// `e` up to its last kernel hop into r3: the base, plus the offset, then each kernel hop
    /// (the pointer at r3, plus the hop's offset), with the argument index added after the hops
    /// it names. Returns the label the code branches to when the base is a thread-local with no
    /// mirrored address on this thread (to be bound by the caller), if it can be.
    pub fn emit_kernel(&self, a: &mut Asm, e: &AddrExpr) -> Result<Option<Label>> {
        let missing = self.emit_base(a, e.base)?;
        if e.offset != 0 {
            a.alu_imm(op::ADD, R3, e.offset);
        }
        self.emit_index(a, e, 0)?;
        for (hop, &d) in e.derefs.iter().enumerate() {
            self.emit_hop(a, helper::PROBE_READ_KERNEL, d, None);
            self.emit_index(a, e, hop + 1)?;
        }
        Ok(missing)
    }

    /// The user hops `hops` from the address in r3, leaving the final address in r3. With
    /// `fault_flag`, a hop that faults also sets that register to 1 (a retry at return is armed).
    pub fn emit_user(&self, a: &mut Asm, hops: &[i32], fault_flag: Option<Reg>) {
        for &d in hops {
            self.emit_hop(a, helper::PROBE_READ_USER, d, fault_flag);
        }
    }

    /// The base into r3.
    fn emit_base(&self, a: &mut Asm, base: AddrBase) -> Result<Option<Label>> {
        let refused = |why: &str| LinuxError::Asm(format!("{} at {base:?}{why}", self.what));
        match base {
            AddrBase::Arg(n) if n < NARGS => {
                a.load(Size::DW, R3, R7, (hdr::ARGS + 8 * n) as i16);
            }
            AddrBase::Arg(_) => return Err(refused(" (past the arguments records carry)")),
            AddrBase::CurrentTask => {
                a.load(Size::DW, R3, R7, hdr::TASK as i16);
            }
            AddrBase::Context(off) => {
                self.need_record(&refused)?;
                a.mov(R3, R6).alu_imm(op::ADD, R3, i32::from(off));
            }
            AddrBase::DataLoc(off) => {
                self.need_record(&refused)?;
                let off = i16::try_from(off).map_err(|_| refused(" (offset out of range)"))?;
                // The field's low 16 bits are the data's offset in the record.
                a.load(Size::W, R3, R6, off);
                a.alu_imm(op::AND, R3, 0xffff).alu(op::ADD, R3, R6);
            }
            AddrBase::ThreadVar(var) => {
                let (map, key) = self
                    .mirror
                    .ok_or_else(|| refused(" (no thread-local mirror map)"))?;
                let missing = a.label();
                super::mirror::emit_lookup(a, map, var, key, missing);
                return Ok(Some(missing));
            }
        }
        Ok(None)
    }

    /// Refuses a base in the probe's context unless that is a tracepoint record.
    fn need_record(&self, refused: &dyn Fn(&str) -> LinuxError) -> Result<()> {
        match self.context {
            Some(CtxKind::Tracepoint) => Ok(()),
            Some(k) => Err(refused(&format!(
                " (needs a tracepoint record, probe has {k:?})"
            ))),
            None => Err(refused(" (not read here)")),
        }
    }

    /// One hop: r3 = the pointer at r3 (read with `read`) + `d`, through the slot; branches to
    /// the fault label when the read fails or the pointer is NULL, and sets `fault_flag` to 1 when
    /// the read fails.
    fn emit_hop(&self, a: &mut Asm, read: i32, d: i32, fault_flag: Option<Reg>) {
        let Slot { base, off } = self.slot;
        a.mov(R1, base)
            .alu_imm(op::ADD, R1, i32::from(off))
            .mov_imm(R2, 8)
            .call(read);
        if let Some(flag) = fault_flag {
            let fine = a.label();
            a.jmp_imm(op::JSGE, R0, 0, fine).mov_imm(flag, 1).bind(fine);
        }
        if let Some(fault) = self.fault {
            a.jmp_imm(op::JNE, R0, 0, fault);
        }
        a.load(Size::DW, R3, base, off);
        if let Some(fault) = self.fault {
            a.jmp_imm(op::JEQ, R3, 0, fault);
        }
        if d != 0 {
            a.alu_imm(op::ADD, R3, d);
        }
    }

    /// Adds `e`'s argument index to the address in r3 when it applies after `hop` hops (uses r2).
    fn emit_index(&self, a: &mut Asm, e: &AddrExpr, hop: usize) -> Result<()> {
        let Some(i) = e.index.filter(|i| usize::from(i.hop) == hop) else {
            return Ok(());
        };
        if usize::from(i.arg) >= NARGS {
            return Err(LinuxError::Asm(format!(
                "{} indexed by arg{}, past the arguments records carry",
                self.what, i.arg
            )));
        }
        a.load(
            Size::DW,
            R2,
            R7,
            (hdr::ARGS + 8 * usize::from(i.arg)) as i16,
        );
        if i.sext32 {
            a.alu_imm(op::LSH, R2, 32).alu_imm(op::ARSH, R2, 32);
        }
        a.alu_imm(op::MUL, R2, i.scale).alu(op::ADD, R3, R2);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::insn::{Insn, R8, R9};
    use dtrace_dif::flow::ArgIndex;

    /// One readable line per instruction (those the emitter uses), jumps with their target's
    /// index.
    fn show(insns: &[Insn]) -> Vec<String> {
        let mut out = Vec::new();
        let mut pcs = insns.iter().enumerate();
        while let Some((pc, i)) = pcs.next() {
            let (d, s, off, imm) = (i.dst, i.src, i.off, i.imm);
            let to = pc as i64 + 1 + i64::from(off);
            out.push(match i.code {
                0x79 => format!("r{d} = *(u64 *)(r{s} {off:+})"),
                0x61 => format!("r{d} = *(u32 *)(r{s} {off:+})"),
                0x63 => format!("*(u32 *)(r{d} {off:+}) = r{s}"),
                0x62 => format!("*(u32 *)(r{d} {off:+}) = {imm}"),
                0xbf => format!("r{d} = r{s}"),
                0xb7 => format!("r{d} = {imm}"),
                0x07 => format!("r{d} += {imm}"),
                0x0f => format!("r{d} += r{s}"),
                0x57 => format!("r{d} &= {imm}"),
                0x27 => format!("r{d} *= {imm}"),
                0x67 => format!("r{d} <<= {imm}"),
                0xc7 => format!("r{d} s>>= {imm}"),
                0x85 => format!("call {imm}"),
                0x15 => format!("if r{d} == {imm} goto {to}"),
                0x55 => format!("if r{d} != {imm} goto {to}"),
                0x75 => format!("if r{d} s>= {imm} goto {to}"),
                0x18 => {
                    pcs.next();
                    format!("r{d} = map {imm}")
                }
                c => format!("code {c:#x}"),
            });
        }
        out
    }

    fn emitted(ev: &Evaluator, e: &AddrExpr) -> Vec<String> {
        let mut a = Asm::new();
        let missing = ev.emit(&mut a, e).unwrap();
        if let Some(l) = missing {
            a.bind(l);
        }
        show(&a.finish().unwrap())
    }

    const READ_KERNEL: &str = "call 113";
    const READ_USER: &str = "call 112";

    #[test]
    fn a_base_and_an_offset() {
        let ev = Evaluator::new("a copy", Slot::stack(-8));
        // Arguments and the task come from the record's header (arg2 at 64 + 16, the task at 56).
        assert_eq!(
            emitted(&ev, &AddrExpr::kernel(AddrBase::Arg(2), 24, Vec::new())),
            ["r3 = *(u64 *)(r7 +80)", "r3 += 24"]
        );
        assert_eq!(
            emitted(&ev, &AddrExpr::kernel(AddrBase::CurrentTask, 0, Vec::new())),
            ["r3 = *(u64 *)(r7 +56)"]
        );
    }

    #[test]
    fn two_kernel_hops_read_their_pointers_through_the_slot() {
        let ev = Evaluator::new("a copy", Slot::stack(-8));
        // curthread->a->b: the pointer at task + 16, plus 8, then the pointer there.
        let e = AddrExpr::kernel(AddrBase::CurrentTask, 16, vec![8, 0]);
        let hop = [
            "r1 = r10",
            "r1 += -8",
            "r2 = 8",
            READ_KERNEL,
            "r3 = *(u64 *)(r10 -8)",
        ];
        let mut want = vec!["r3 = *(u64 *)(r7 +56)", "r3 += 16"];
        want.extend(hop);
        want.push("r3 += 8");
        want.extend(hop);
        assert_eq!(emitted(&ev, &e), want);
    }

    #[test]
    fn a_hop_that_faults_or_reads_null_branches_to_the_fault_label() {
        let mut a = Asm::new();
        let fault = a.label();
        // A slot in the record (r8), as the path walk keeps its state there.
        let ev = Evaluator::new("d_path()", Slot { base: R8, off: 64 }).faulting_to(fault);
        let e = AddrExpr::kernel(AddrBase::Arg(0), 8, vec![0, 24]);
        ev.emit(&mut a, &e).unwrap();
        let end = a.len();
        a.bind(fault);
        let got = show(&a.finish().unwrap());
        let hop = |d: Option<&str>| {
            let mut h = vec![
                "r1 = r8".to_string(),
                "r1 += 64".into(),
                "r2 = 8".into(),
                READ_KERNEL.into(),
                format!("if r0 != 0 goto {end}"),
                "r3 = *(u64 *)(r8 +64)".into(),
                format!("if r3 == 0 goto {end}"),
            ];
            h.extend(d.map(String::from));
            h
        };
        let mut want = vec!["r3 = *(u64 *)(r7 +64)".to_string(), "r3 += 8".into()];
        want.extend(hop(None));
        want.extend(hop(Some("r3 += 24")));
        assert_eq!(got, want);
        // Without the label, the same chain has no branch.
        let mut a = Asm::new();
        Evaluator::new("a copy", Slot { base: R8, off: 64 })
            .emit(&mut a, &e)
            .unwrap();
        assert!(show(&a.finish().unwrap())
            .iter()
            .all(|l| !l.starts_with("if")));
    }

    #[test]
    fn user_hops_read_user_memory_and_can_flag_their_faults() {
        let ev = Evaluator::new("a copy", Slot::stack(-8));
        let mut e = AddrExpr::arg(1);
        e.offset = 8;
        e.user_derefs = vec![0];
        assert_eq!(
            emitted(&ev, &e),
            [
                "r3 = *(u64 *)(r7 +72)",
                "r3 += 8",
                "r1 = r10",
                "r1 += -8",
                "r2 = 8",
                READ_USER,
                "r3 = *(u64 *)(r10 -8)",
            ]
        );
        // The retry's flag: set to 1 when the read fails.
        let mut a = Asm::new();
        ev.emit_user(&mut a, &[16], Some(R9));
        assert_eq!(
            show(&a.finish().unwrap()),
            [
                "r1 = r10",
                "r1 += -8",
                "r2 = 8",
                READ_USER,
                "if r0 s>= 0 goto 6",
                "r9 = 1",
                "r3 = *(u64 *)(r10 -8)",
                "r3 += 16",
            ]
        );
    }

    #[test]
    fn an_argument_index_is_added_after_the_hops_it_names() {
        let ev = Evaluator::new("a copy", Slot::stack(-8));
        // curthread->files->fdt->fd[arg0]-like: index by (int) arg0 * 8 after one hop.
        let mut e = AddrExpr::kernel(AddrBase::CurrentTask, 0, vec![0]);
        e.index = Some(ArgIndex {
            hop: 1,
            arg: 0,
            scale: 8,
            sext32: true,
        });
        let got = emitted(&ev, &e);
        assert_eq!(
            got[got.len() - 5..],
            [
                "r2 = *(u64 *)(r7 +64)",
                "r2 <<= 32",
                "r2 s>>= 32",
                "r2 *= 8",
                "r3 += r2",
            ]
        );
        assert_eq!(got[4], READ_KERNEL);
        e.index = Some(ArgIndex {
            hop: 0,
            arg: NARGS as u8,
            scale: 8,
            sext32: false,
        });
        assert!(ev.emit(&mut Asm::new(), &e).is_err());
    }

    #[test]
    fn bases_are_read_only_where_the_program_has_them() {
        let plain = Evaluator::new("a copy", Slot::stack(-8));
        let at = |base| AddrExpr::kernel(base, 0, Vec::new());
        let refused = |ev: &Evaluator, base| ev.emit(&mut Asm::new(), &at(base)).is_err();
        for base in [
            AddrBase::Context(12),
            AddrBase::DataLoc(8),
            AddrBase::ThreadVar(3),
            AddrBase::Arg(NARGS),
        ] {
            assert!(refused(&plain, base), "{base:?}");
        }
        // The context only at a tracepoint, whose record is in r6.
        assert!(refused(
            &plain.with_context(CtxKind::RawTracepoint),
            AddrBase::Context(12)
        ));
        let tp = plain.with_context(CtxKind::Tracepoint);
        assert_eq!(
            emitted(&tp, &at(AddrBase::Context(12))),
            ["r3 = r6", "r3 += 12"]
        );
        assert_eq!(
            emitted(&tp, &at(AddrBase::DataLoc(8))),
            ["r3 = *(u32 *)(r6 +8)", "r3 &= 65535", "r3 += r6"]
        );
        // A thread-local from the mirror: its lookup, branching to the label handed back when the
        // thread has none.
        let mut a = Asm::new();
        let ev = plain.with_mirror(5, -16);
        let missing = ev.emit(&mut a, &at(AddrBase::ThreadVar(3))).unwrap();
        let end = a.len();
        a.bind(missing.expect("a label for no address"));
        let got = show(&a.finish().unwrap());
        assert!(got.contains(&"r1 = map 5".to_string()), "{got:?}");
        assert!(
            got.contains(&"*(u32 *)(r10 -12) = 3".to_string()),
            "{got:?}"
        );
        assert!(got.contains(&format!("if r0 == 0 goto {end}")), "{got:?}");
        assert_eq!(got.last().map(String::as_str), Some("r3 = *(u64 *)(r0 +0)"));
        // Other bases give no label.
        assert_eq!(ev.emit(&mut Asm::new(), &AddrExpr::arg(0)).unwrap(), None);
    }
}
