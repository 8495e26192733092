//! Strings at kernel addresses in translated code: an integer used where D wants a string
//! (`stringof(p)`, `(string)p`, a `char *` or `char[]` member such as `curthread->comm`), read
//! as DTrace reads it: from kernel memory at the address, with `bpf_probe_read_kernel_str` (a
//! string's storage at most, the NUL included, into a zeroed slot of the string scratch); a read
//! that fails faults `DTRACEFLT_BADADDR` at the address (a user address among them: the kernel
//! never reads user memory as its own). The interpreter reads the same string from the kernel
//! memory the probe copied for it, which the capture planner copies for an address computed
//! from `curthread` or a probe argument through constant offsets and kernel pointer hops (DIF's
//! data-flow, `dtrace_dif::flow`, says which): both paths print the same there (the probe's
//! copy is whole or nothing, so a string running into unreadable memory faults at its address on
//! both). Where the probe copies nothing (an address computed from a variable, an array index
//! kept in one: `fds[self->fd].fi_fs`), the interpreter faults where DTrace reads the string;
//! the code here reads it, as DTrace does. A constant address is never copied, so it faults at
//! its value on both paths. A probe argument itself is kernel memory only at a probe whose
//! arguments are kernel values (`fbt`); anywhere else (its string is user memory or the probe's
//! own copy), and for an address reached through user pointers or the probe's own record, the
//! clause is left to the interpreter: it stays in dtrace.
//!
//! A probe argument whose value is the probe's own copy of a string in kernel memory (a
//! tracepoint's `__data_loc` or `char[]` field, `ProbeContext::copied_string_arg`) is read as a
//! string where it is loaded, from where the probe copies it and no further than the copy
//! reaches: the interpreter's `argN` is the copy's address, which the code at the probe does
//! not have, so such an argument used as an integer keeps its clause in dtrace.

use super::{FaultAddr, Kind, ProbeContext, State, Translator, Untranslatable, NREGS};
use crate::insn::{helper, op, Size, R0, R1, R10, R2, R3};
use dtrace_dif::flow::{self, AddrBase, Value};
use dtrace_dif::instr::Instr;
use dtrace_dif::object::DifObject;
use dtrace_dif::vm::FaultKind;

/// Probe arguments a capture carries (the interpreter's copies index nothing past them).
const CAPTURED_ARGS: usize = 8;

/// What the data-flow knows each register holds before each instruction (`None`: not reached),
/// and on each edge into a join: (from, to) and the registers that path carries.
#[derive(Debug, Default)]
pub(super) struct FlowRegs {
    before: Vec<Option<Vec<Value>>>,
    edges: std::collections::HashMap<(usize, usize), Vec<Value>>,
}

/// The data-flow's register values before each instruction of `obj`, and on its joins' edges.
pub(super) fn flow_regs(obj: &DifObject) -> FlowRegs {
    struct Record(FlowRegs);
    impl flow::Visitor for Record {
        fn visit(&mut self, pc: usize, _: &Instr, s: &flow::State) -> Option<Value> {
            if let Some(slot) = self.0.before.get_mut(pc) {
                *slot = Some((0..NREGS as u8).map(|r| s.reg(r)).collect());
            }
            None
        }

        fn edge(&mut self, from: usize, to: usize, regs: &[Value; flow::NREGS]) {
            self.0.edges.insert((from, to), regs.to_vec());
        }
    }
    let mut r = Record(FlowRegs {
        before: vec![None; obj.text.len()],
        edges: Default::default(),
    });
    flow::walk(obj, flow::Limits { user_hops: 0 }, &mut r);
    r.0
}

/// Register `r` of the data-flow's registers `regs` (unknown where the flow has none).
fn register(regs: Option<&Vec<Value>>, r: u8) -> Value {
    regs.and_then(|regs| regs.get(usize::from(r & 7)))
        .cloned()
        .unwrap_or(Value::Unknown)
}

/// How the interpreter reads a string at an address the data-flow describes as `v`.
enum Source {
    /// From the kernel memory the probe copied.
    Kernel,
    /// From the user string the probe copies for probe argument `arg`, at most `size` bytes
    /// (see [`ProbeContext::user_string_arg`]).
    User { arg: u8, size: u32 },
    /// Nowhere: a constant is never copied.
    Nothing,
}

fn source(v: &Value, ctx: &dyn ProbeContext) -> Option<Source> {
    match v {
        Value::Const(_) => Some(Source::Nothing),
        // At a probe whose arguments are kernel values, the string at one is kernel memory; an
        // argument whose user string the probe copies is read as that string; anywhere else a
        // plain argument is left to the interpreter (see the module notes).
        v if v.plain_arg().is_some() => {
            v.plain_arg().filter(|&n| n < CAPTURED_ARGS).and_then(|n| {
                let arg = u8::try_from(n).ok()?;
                match ctx.user_string_arg(arg) {
                    Some(size) => Some(Source::User { arg, size }),
                    None => ctx.args_are_kernel().then_some(Source::Kernel),
                }
            })
        }
        Value::Addr(e) => match e.base {
            // The probe's own copy of its record, and what user pointers lead to: the
            // interpreter reads them from copies the code here does not have.
            AddrBase::Context(_) | AddrBase::DataLoc(_) => None,
            _ if !e.user_derefs.is_empty() => None,
            AddrBase::Arg(n) if n >= CAPTURED_ARGS => None,
            _ => Some(Source::Kernel),
        },
        Value::Scratch(_) | Value::StrConst => None,
        // Any other integer (computed from variables, array indexes that are not arguments,
        // longer pointer chains) is an address in kernel memory, as DTrace reads it.
        Value::Unknown | Value::ArgHigh(_) | Value::Index { .. } | Value::ArgAtMost { .. } => {
            Some(Source::Kernel)
        }
    }
}

impl Translator<'_> {
    /// What the data-flow knows register `r` holds before instruction `pc`.
    fn flow_value(&self, pc: usize, r: u8) -> Value {
        register(self.flow.before.get(pc).and_then(Option::as_ref), r)
    }

    /// Whether register `r` on the edge from instruction `from` into the join at `to` holds an
    /// address whose string the interpreter reads from the kernel memory the probe copied for
    /// it.
    pub(super) fn kernel_string_on_edge(&self, (from, to): (usize, usize), r: u8) -> bool {
        let v = register(self.flow.edges.get(&(from, to)), r);
        matches!(source(&v, self.ctx), Some(Source::Kernel))
    }

    /// DIF register `r`, an integer, used as a string at `pc`: reads the string at its address
    /// into a fresh slot of the string scratch, whose address is left at frame offset `at` (the
    /// register's own slot, the load buffer, the fault address's slot or a tuple slot; see the
    /// module notes).
    pub(super) fn kernel_string(
        &mut self,
        pc: usize,
        s: &super::State,
        r: u8,
        at: i16,
    ) -> Result<(), Untranslatable> {
        let r = r & 7;
        let joined = s.regs[usize::from(r)] == Kind::KernelStr;
        if !joined {
            self.int(s, pc, r)?;
        }
        let refused = |what: &str| Untranslatable::Value {
            pc,
            what: format!("a string at {what} is read in dtrace"),
        };
        let v = self.flow_value(pc, r);
        let how = match joined {
            // Strings joined with a kernel string's address (see `cond`): kernel memory on
            // every path.
            true => Source::Kernel,
            false => source(&v, self.ctx).ok_or_else(|| match v.plain_arg() {
                Some(n) => refused(&format!("probe argument arg{n}")),
                None => refused("an address the translator does not follow"),
            })?,
        };
        // Where the address is read from: the register, or the load buffer when the string's
        // address is to replace the register's value (a `ret`).
        let mut reg = self.frame.reg(r);
        if at == reg {
            let buf = self.frame.load_buf();
            self.a
                .load(Size::DW, R1, R10, reg)
                .store(Size::DW, R10, buf, R1);
            reg = buf;
        }
        if let Source::User { arg, size } = how {
            return self.user_string_arg(pc, arg, size, reg, at);
        }
        let storage = i32::try_from(self.strsize).map_err(|_| Untranslatable::Value {
            pc,
            what: "a string at a kernel address: strsize too large".into(),
        })?;
        let bad = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Frame(reg));
        self.string_slot(pc, at, true)
            .map_err(|why| Untranslatable::Value {
                pc,
                what: format!("a string at a kernel address: {why}"),
            })?;
        let a = &mut self.a;
        match how {
            Source::User { .. } | Source::Nothing => {
                // Always taken; a conditional jump keeps what follows reachable as the
                // verifier sees the code's shape.
                a.load(Size::DW, R1, R10, reg);
                a.jmp_imm(op::JGE, R1, 0, bad);
            }
            Source::Kernel => {
                a.mov(R1, R0).mov_imm(R2, storage);
                a.load(Size::DW, R3, R10, reg);
                a.call(helper::PROBE_READ_KERNEL_STR);
                a.jmp_imm(op::JSLT, R0, 0, bad);
            }
        }
        Ok(())
    }
}

impl Translator<'_> {
    /// The user string at the address at frame offset `reg`, probe argument `arg`'s, whose
    /// string the probe copies (at most `size` bytes, the NUL included; see
    /// `ProbeContext::user_string_arg`): the address of its copy is left at `at`. The copy the
    /// probe's program made before the clauses ran where there is one as long as the probe's
    /// (`ProbeContext::pre_reads_string`), else one read here, into a fresh slot of the string
    /// scratch. Address 0, or one that cannot be read, faults `DTRACEFLT_BADADDR` at it, as the
    /// interpreter faults reading a copy the probe could not make (a [`FaultAddr::Stored`] site:
    /// the clause copies a string in, which decides where its firing may run).
    fn user_string_arg(
        &mut self,
        pc: usize,
        arg: u8,
        size: u32,
        reg: i16,
        at: i16,
    ) -> Result<(), Untranslatable> {
        let what = format!("the string of arg{arg}");
        let refused = super::refusal(pc, &what);
        self.ctx.reads_user_memory().map_err(refused)?;
        if self.strsize <= size as usize && self.ctx.pre_reads_string(arg) {
            self.pre_read_copy(pc, arg, reg, &what)?;
            self.a.store(Size::DW, R10, at, R0);
            return Ok(());
        }
        let most = self.strsize.min(size as usize).max(1);
        let storage = i32::try_from(most).map_err(|_| refused("strsize too large".into()))?;
        let bad = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Stored);
        let fault_at = self.frame.fault_addr_at();
        self.a.load(Size::DW, R1, R10, reg);
        self.a.store(Size::DW, R10, fault_at, R1);
        self.a.jmp_imm(op::JEQ, R1, 0, bad);
        self.string_slot(pc, at, true).map_err(refused)?;
        let read = self.a.label();
        let a = &mut self.a;
        a.mov(R1, R0).mov_imm(R2, storage);
        a.load(Size::DW, R3, R10, reg);
        a.call(helper::PROBE_READ_USER_STR);
        a.jmp_imm(op::JSGE, R0, 0, read);
        // The slot's address may have taken the fault address's place (`at`).
        a.load(Size::DW, R1, R10, reg);
        a.store(Size::DW, R10, fault_at, R1);
        a.ja(bad);
        a.bind(read);
        Ok(())
    }

    /// Probe argument `n` into `rd` where the probe copies its string from kernel memory (at
    /// most `size` bytes, the NUL included; see the module notes): the string, read into a
    /// fresh slot of the string scratch; a read that fails faults `DTRACEFLT_BADADDR` at the
    /// address read.
    pub(super) fn copied_string_arg(
        &mut self,
        pc: usize,
        s: &mut State,
        n: u8,
        size: u32,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let refused = |why: String| Untranslatable::Variable {
            pc,
            name: format!("arg{n}"),
            why,
        };
        let storage = i32::try_from(self.strsize.min(size as usize).max(1))
            .map_err(|_| refused("strsize too large".into()))?;
        let (buf, at) = (self.frame.load_buf(), self.frame.fault_addr_at());
        self.ctx
            .emit_copied_string_address(&mut self.a, n)
            .map_err(refused)?;
        self.a.store(Size::DW, R10, at, R0);
        // Not `FaultAddr::Stored`, which tells a string copied in from user memory (its firing
        // may go to dtrace: see `capture::kagg`).
        let bad = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Frame(at));
        self.string_slot(pc, buf, true)
            .map_err(|why| Untranslatable::Value {
                pc,
                what: format!("the string of arg{n}: {why}"),
            })?;
        let a = &mut self.a;
        a.mov(R1, R0).mov_imm(R2, storage);
        a.load(Size::DW, R3, R10, at);
        a.call(helper::PROBE_READ_KERNEL_STR);
        a.jmp_imm(op::JSLT, R0, 0, bad);
        a.load(Size::DW, R1, R10, buf);
        self.put(s, rd, R1, Kind::Scratch);
        Ok(())
    }
}
