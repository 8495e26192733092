//! `raise()` and `stop()` at the probe: the probe's program sends the signal itself, as DTrace
//! does, so it reaches the thread before the thread returns to user space (dtrace reading the
//! firing later would let the thread run on). For each clause with such an action whose
//! predicate is true (translated, `dtrace_ebpf::translate`), `raise(sig)` is
//! `bpf_send_signal_thread(sig)` to the thread that fired the probe and `stop()` is
//! `bpf_send_signal(SIGSTOP)` to its process; both helpers exist in every program type a probe
//! uses (tracepoints, raw tracepoints, kprobes and uprobes, perf events, fentry).
//!
//! A clause that runs whole at the probe (`capture::kagg`) sends its signal where its record
//! is built, with the same emitters. Otherwise the clause itself still runs in dtrace, which records the firing (the probe line prints) and
//! sends nothing (`Framework::signal_elsewhere`). Nothing is sent before tracing starts, after it
//! stops or after an `exit()` in the kernel (the control map and exit flag of `capture::kagg`).
//! A predicate or signal number that faults at the probe sends nothing (the clause ends at the
//! fault, which dtrace reports when it runs the clause). `epid` is read from the map of EPIDs
//! dtrace fills before tracing starts (`capture::filter::EpidAt`), as a predicate run alone
//! at the probe reads it. A clause whose predicate, signal or
//! earlier actions do not translate, or whose earlier actions could fault (the clause would end
//! there in dtrace), keeps dtrace sending it, with the reason in the report.

use super::codegen::ProbeShape;
use super::filter::{ShapeContext, FRAME};
use super::spec::{KernelSignal, KernelSignals};
use crate::bpf::insn::{helper, op, Asm, Size, R0, R1};
use dtrace_ebpf::translate::{self, Fragment, Untranslatable};

/// Per clause of a [`KernelSignals`]: `Ok` when the probe sends its signal, else why not.
pub type SignalReport = Vec<Result<(), Untranslatable>>;

/// `SIGSTOP` on Linux.
const SIGSTOP: i32 = 19;

/// A clause's code as the probe runs it.
struct Translated {
    predicate: Option<Fragment>,
    signal: Option<Fragment>,
}

fn translate_clause(
    ctx: &ShapeContext<'_>,
    c: &KernelSignal,
    strsize: usize,
) -> Result<Translated, Untranslatable> {
    let int = |o: &dtrace_dif::object::DifObject| translate::translate(o, ctx, strsize, FRAME);
    let predicate = c.predicate.as_ref().map(int).transpose()?;
    for o in &c.before {
        if int(o)?.can_fault {
            return Err(Untranslatable::Placement(
                "an action before it may fault, which ends the clause in dtrace".into(),
            ));
        }
    }
    let signal = c.signal.as_ref().map(int).transpose()?;
    Ok(Translated { predicate, signal })
}

/// Emits the signals of `s` (those whose clauses translate at this probe) and returns the
/// report. Control falls through to what follows in every case; r6 (the context) is kept.
pub fn emit_signals(a: &mut Asm, shape: &ProbeShape, s: &KernelSignals) -> SignalReport {
    let ctx = ShapeContext {
        shape,
        names: &s.names,
        opaque_args: s.opaque_args,
        vars: None,
        strings: None,
        clocks: None,
        pre_read: Default::default(),
        specs: None,
        scratchsize: None,
        alloca_locals: &[],
        allocates: false,
        copy_scratch: None,
        epid: Err(super::filter::NO_EPID),
        stacks: None,
        ustack: None,
    };
    let results: Vec<Result<Translated, Untranslatable>> = s
        .clauses
        .iter()
        .enumerate()
        .map(|(j, c)| {
            let epid = super::filter::epid_at(s.epids.as_ref(), s.names.id, j);
            translate_clause(&ShapeContext { epid, ..ctx }, c, s.strsize as usize)
        })
        .collect();
    let report = results
        .iter()
        .map(|r| r.as_ref().map(|_| ()).map_err(Clone::clone))
        .collect();
    if results.iter().all(|r| r.is_err()) {
        return report;
    }
    let done = a.label();
    // Off before BEGIN and after END, and after exit() at any probe.
    a.ld_map_value(R1, s.control, 0);
    a.load(Size::DW, R1, R1, 0);
    a.jmp_imm(op::JEQ, R1, 0, done);
    a.ld_map_value(R1, s.exit, 0);
    a.load(Size::DW, R1, R1, 0);
    a.jmp_imm(op::JNE, R1, 0, done);
    for t in results.iter().flatten() {
        let next = a.label();
        if let Some(p) = &t.predicate {
            emit_unless_faulted(a, p, next);
            a.jmp_imm(op::JEQ, R0, 0, next);
        }
        match &t.signal {
            Some(f) => {
                emit_unless_faulted(a, f, next);
                emit_raise(a);
            }
            None => emit_stop(a),
        }
        a.bind(next);
    }
    a.bind(done);
    report
}

/// Emits `f`, then jumps to `faulted` if it faulted (r0 is kept); uses r1.
fn emit_unless_faulted(a: &mut Asm, f: &Fragment, faulted: crate::bpf::Label) {
    f.emit(a);
    if f.can_fault {
        a.load(Size::DW, R1, crate::bpf::insn::R10, FRAME.fault_at());
        a.jmp_imm(op::JNE, R1, 0, faulted);
    }
}

/// `raise()` of the signal in r0, to the thread that fired the probe.
pub(crate) fn emit_raise(a: &mut Asm) {
    a.mov(R1, R0);
    a.call(helper::SEND_SIGNAL_THREAD);
}

/// `stop()`: `SIGSTOP` to the process of the thread that fired the probe.
pub(crate) fn emit_stop(a: &mut Asm) {
    a.mov_imm(R1, SIGSTOP);
    a.call(helper::SEND_SIGNAL);
}
