//! The `proc` and `sched` providers, built on the scheduler, task and signal tracepoints of this
//! kernel. Each probe names the tracepoint it fires from, any test on the record (e.g. `create` only
//! for new processes, `lwp-create` only for new threads), and its arguments. A probe whose DTrace
//! arguments describe a thread and its process (`lwpsinfo_t *`, `psinfo_t *`: the thread woken by
//! `wakeup`, the child of `create`, the target of `signal-send`) fires from the tracepoint's raw form,
//! whose arguments are the kernel's own `struct task_struct *` pointers: each such argument is the task
//! pointer, native type `struct task_struct *`, D type the translated one, so the compiler applies the
//! D library's translator (`args[1]->pr_fname` is `xlate<psinfo_t *>(task)->pr_fname`). Probes with
//! no tracepoint behind them on the running kernel are simply absent; [`unavailable`] says why for
//! the ones DTrace defines.
//!
//! Each probe fires in the context DTrace documents for it: `on-cpu` in the thread going on CPU (the
//! `sched_switch` raw tracepoint's `next` task supplies every identity value and `curthread`, since
//! the tracepoint itself runs on the outgoing thread), `off-cpu`, `sleep` and `preempt` in the
//! outgoing thread, `wakeup` in the waking thread (`sched_waking`, which runs in the waker, where
//! `sched_wakeup` may run on the target CPU), and the `proc` probes in the acting process. `start`
//! and `lwp-start` fire in the new task itself, as it returns from the `fork`/`vfork`/`clone`/`clone3`
//! that made it (`sys_exit` returning 0), before it runs any instruction of its program.

use super::fbt::KERNEL_MODULE;
use super::syscall_nr::syscall_nr;
use super::{field_arg, AttachPoint, Probe, ProbeArg, ProbeDesc};
use crate::capture::{ArgSource, Condition, Identity};
use crate::tracefs::{EventFormat, Field};
use std::collections::HashMap;

const CLONE_THREAD: u32 = 0x0001_0000;
const TRACE_SIGNAL_IGNORED: i32 = 1;
/// The task states `sched_switch`'s record reports as a sleep (`TASK_REPORT`: running,
/// interruptible, uninterruptible, stopped, traced, the exit states and parked), and the state of an
/// RT lock's waiter, which the record reports as uninterruptible.
const TASK_REPORT: u32 = 0x7f;
const TASK_RTLOCK_WAIT: u32 = 0x1000;

enum Cond {
    Negative(&'static str),
    Positive(&'static str),
    /// A new task's return from the call that made it (see [`Condition::ForkChild`]); for the
    /// first thread of a process only when true.
    ForkChild(bool),
    /// Raw tracepoint argument `n` has a bit of the mask set.
    RawMaskSet(u8, u32),
    /// Raw tracepoint argument `n` has every bit of the mask clear.
    RawMaskClear(u8, u32),
    /// Raw tracepoint argument `n` (an `int`) equals the value.
    RawEquals(u8, i32),
    /// Raw tracepoint argument `n`, a `bool`, is true; the tracefs record carries it as the named
    /// field, and the probe exists only where it does (the kernels that pass the argument).
    RawFlag(u8, &'static str),
    /// `signal_generate` reports a machine fault of the running thread.
    Fault,
}

enum Arg {
    /// A record field, with the D type DTrace documents (None: from the format file).
    Field(&'static str, Option<&'static str>),
    /// The exit reason (`CLD_*`) from the exiting task's `exit_code`.
    ExitReason,
    /// A record field holding a user string's address: D sees the string (copied at the probe).
    UserString(&'static str),
    /// Raw tracepoint argument `n`, a `struct task_struct *`, seen in D as the translated type.
    Task(u8, &'static str),
    /// Raw tracepoint argument `n`, of this native and D type.
    Raw(u8, &'static str, &'static str),
    /// The 8 bytes at an offset of the object raw tracepoint argument `n` points at, of this
    /// native and D type.
    RawLoad(u8, u16, &'static str, &'static str),
    /// `sched_pi_setprio(task, pi_task)`'s new priority (see [`ArgSource::PiNewPrio`]).
    PiNewPrio,
    /// `signal_generate`'s fault code (see [`ArgSource::FaultCode`]).
    FaultCode,
}

/// The native type of a task argument.
pub(super) const TASK: &str = "struct task_struct *";
/// DTrace's type for the thread a probe describes.
pub(super) const LWPSINFO: &str = "lwpsinfo_t *";
/// DTrace's type for the process a probe describes.
pub(super) const PSINFO: &str = "psinfo_t *";

/// The raw tracepoint `on-cpu` attaches to, and the argument holding the incoming task.
/// `sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next,
/// unsigned int prev_state)` (the state argument since Linux 5.18).
const SWITCH_RAW: &str = "sched_switch";
const SWITCH_PREEMPT_ARG: u8 = 0;
const SWITCH_NEXT_ARG: u8 = 2;
const SWITCH_STATE_ARG: u8 = 3;
/// `sched_process_exit(struct task_struct *p, bool group_dead)`: `group_dead` (true in a thread
/// group's last thread) since Linux 6.16, where the record has the field too; before, `exit` is
/// placed on `fbt` (see `fbt::GROUP_EXIT_FUNCTION`).
const EXIT_GROUP_DEAD: u8 = 1;
/// `signal_generate(int sig, struct kernel_siginfo *info, struct task_struct *task, int group,
/// int result)`: the target task and the result.
const SIGNAL_SIG: u8 = 0;
const SIGNAL_INFO: u8 = 1;
const SIGNAL_TASK: u8 = 2;
const SIGNAL_RESULT: u8 = 4;
/// `signal_deliver(int sig, struct kernel_siginfo *info, struct k_sigaction *ka)`: the handler is
/// `ka->sa.sa_handler`, the first member of `struct sigaction` (first in `struct k_sigaction`) on
/// every architecture but MIPS. `info` is the kernel's siginfo, whose fields (`si_signo`,
/// `si_errno`, `si_code`, the `_sifields` union) lie as in the user `siginfo_t`.
const SA_HANDLER_OFFSET: u16 = 0;

struct Spec {
    provider: &'static str,
    name: &'static str,
    sys: &'static str,
    event: &'static str,
    args: &'static [Arg],
    conds: &'static [Cond],
    next_identity: bool,
    /// Fire from the raw tracepoint `event` (for task pointer arguments); the tracefs event must
    /// still exist for the probe to be offered.
    raw: bool,
}

/// Probes that fire at one kernel point are listed in the order DTrace fires them (a thread's
/// `lwp-exit` before its process's `exit`; `sleep` or `preempt`, then `off-cpu`, then `on-cpu`;
/// `fault` before `signal-send`): probes are enabled in id order, and each of them is a raw
/// tracepoint program, which the kernel runs in the order they were attached on every kernel
/// (a tracepoint's probe functions are called in the order they were registered). Perf-event
/// programs are not used at a shared point: they run from the one perf probe of the event, whose
/// place among the raw programs depends on when the event's first perf user came. Where `exit`
/// is placed on `fbt` (no `group_dead` here), `lwp-exit` moves with it (see
/// `fbt::FbtCatalog::thread_exit_probe`).
const SPECS: &[Spec] = &[
    // `exec` fires before the attempt, so an exec that fails fires it too (followed by
    // `exec-failure`): the entry of execve(2), whose path is read from the caller's memory.
    // (`sched_prepare_exec` would give the path from the kernel, but only for an exec that
    // already succeeded.)
    Spec {
        provider: "proc",
        name: "exec",
        sys: "syscalls",
        event: "sys_enter_execve",
        args: &[Arg::UserString("filename")],
        conds: &[],
        next_identity: false,
        raw: false,
    },
    Spec {
        provider: "proc",
        name: "exec-success",
        sys: "sched",
        event: "sched_process_exec",
        args: &[],
        conds: &[],
        next_identity: false,
        raw: false,
    },
    Spec {
        provider: "proc",
        name: "exec-failure",
        sys: "syscalls",
        event: "sys_exit_execve",
        // As DTrace for Linux: the system call's result, a negative errno (`-ENOENT`).
        args: &[Arg::Field("ret", Some("int"))],
        conds: &[Cond::Negative("ret")],
        next_identity: false,
        raw: false,
    },
    Spec {
        provider: "proc",
        name: "lwp-exit",
        sys: "sched",
        event: "sched_process_exit",
        args: &[],
        conds: &[],
        next_identity: false,
        raw: true,
    },
    Spec {
        provider: "proc",
        name: "exit",
        sys: "sched",
        event: "sched_process_exit",
        args: &[Arg::ExitReason],
        conds: &[Cond::RawFlag(EXIT_GROUP_DEAD, "group_dead")],
        next_identity: false,
        raw: true,
    },
    Spec {
        provider: "proc",
        name: "create",
        sys: "task",
        event: "task_newtask",
        args: &[Arg::Task(0, PSINFO)],
        conds: &[Cond::RawMaskClear(1, CLONE_THREAD)],
        next_identity: false,
        raw: true,
    },
    Spec {
        provider: "proc",
        name: "lwp-create",
        sys: "task",
        event: "task_newtask",
        args: &[Arg::Task(0, LWPSINFO), Arg::Task(0, PSINFO)],
        conds: &[Cond::RawMaskSet(1, CLONE_THREAD)],
        next_identity: false,
        raw: true,
    },
    // A fault of the running thread that raises a signal (see `capture::fault`), before the
    // signal is delivered, and before `signal-send` tells of that signal (DTrace's trap handler
    // fires `fault`, then posts the signal).
    Spec {
        provider: "proc",
        name: "fault",
        sys: "signal",
        event: "signal_generate",
        args: &[
            Arg::FaultCode,
            Arg::Raw(SIGNAL_INFO, "siginfo_t *", "siginfo_t *"),
        ],
        conds: &[Cond::Fault],
        next_identity: false,
        raw: true,
    },
    Spec {
        provider: "proc",
        name: "signal-send",
        sys: "signal",
        event: "signal_generate",
        args: &[
            Arg::Task(SIGNAL_TASK, LWPSINFO),
            Arg::Task(SIGNAL_TASK, PSINFO),
            Arg::Raw(0, "int", "int"),
        ],
        conds: &[],
        next_identity: false,
        raw: true,
    },
    Spec {
        provider: "proc",
        name: "signal-discard",
        sys: "signal",
        event: "signal_generate",
        args: &[
            Arg::Task(SIGNAL_TASK, LWPSINFO),
            Arg::Task(SIGNAL_TASK, PSINFO),
            Arg::Raw(0, "int", "int"),
        ],
        conds: &[Cond::RawEquals(SIGNAL_RESULT, TRACE_SIGNAL_IGNORED)],
        next_identity: false,
        raw: true,
    },
    // A pending signal taken by a thread waiting for it (sigwait(3), sigwaitinfo(2),
    // sigtimedwait(2), all rt_sigtimedwait(2) here): the call returns the signal's number.
    Spec {
        provider: "proc",
        name: "signal-clear",
        sys: "syscalls",
        event: "sys_exit_rt_sigtimedwait",
        args: &[Arg::Field("ret", Some("int"))],
        conds: &[Cond::Positive("ret")],
        next_identity: false,
        raw: false,
    },
    Spec {
        provider: "proc",
        name: "signal-handle",
        sys: "signal",
        event: "signal_deliver",
        args: &[
            Arg::Raw(0, "int", "int"),
            Arg::Raw(1, "siginfo_t *", "siginfo_t *"),
            Arg::RawLoad(2, SA_HANDLER_OFFSET, "unsigned long", "void (*)(void)"),
        ],
        conds: &[],
        next_identity: false,
        raw: true,
    },
    Spec {
        provider: "proc",
        name: "start",
        sys: "raw_syscalls",
        event: "sys_exit",
        args: &[],
        conds: &[Cond::ForkChild(true)],
        next_identity: false,
        raw: true,
    },
    Spec {
        provider: "proc",
        name: "lwp-start",
        sys: "raw_syscalls",
        event: "sys_exit",
        args: &[],
        conds: &[Cond::ForkChild(false)],
        next_identity: false,
        raw: true,
    },
    Spec {
        provider: "sched",
        name: "sleep",
        sys: "sched",
        event: "sched_switch",
        args: &[],
        conds: &[
            Cond::RawEquals(SWITCH_PREEMPT_ARG, 0),
            Cond::RawMaskSet(SWITCH_STATE_ARG, TASK_REPORT | TASK_RTLOCK_WAIT),
        ],
        next_identity: false,
        raw: true,
    },
    Spec {
        provider: "sched",
        name: "preempt",
        sys: "sched",
        event: "sched_switch",
        args: &[],
        conds: &[Cond::RawMaskSet(SWITCH_PREEMPT_ARG, 1)],
        next_identity: false,
        raw: true,
    },
    Spec {
        provider: "sched",
        name: "off-cpu",
        sys: "sched",
        event: "sched_switch",
        args: &[
            Arg::Task(SWITCH_NEXT_ARG, LWPSINFO),
            Arg::Task(SWITCH_NEXT_ARG, PSINFO),
        ],
        conds: &[],
        next_identity: false,
        raw: true,
    },
    Spec {
        provider: "sched",
        name: "on-cpu",
        sys: "sched",
        event: "sched_switch",
        args: &[],
        conds: &[],
        next_identity: true,
        raw: false,
    },
    Spec {
        provider: "sched",
        name: "wakeup",
        sys: "sched",
        event: "sched_waking",
        args: &[Arg::Task(0, LWPSINFO), Arg::Task(0, PSINFO)],
        conds: &[],
        next_identity: false,
        raw: true,
    },
    Spec {
        provider: "sched",
        name: "change-pri",
        sys: "sched",
        event: "sched_pi_setprio",
        args: &[Arg::Task(0, LWPSINFO), Arg::Task(0, PSINFO), Arg::PiNewPrio],
        conds: &[],
        next_identity: false,
        raw: true,
    },
];

/// DTrace `proc`/`sched` probes this substrate cannot offer, with the reason.
pub fn unavailable(name: &str) -> Option<&'static str> {
    match name {
        "enqueue" | "dequeue" => Some(
            "the kernel has no run-queue tracepoints, and fbt cannot trace its \
             enqueue_task_*/dequeue_task_* functions here",
        ),
        "tick" => Some(
            "no tracepoint of this kernel corresponds, and fbt cannot trace its \
             sched_tick/scheduler_tick here",
        ),
        "surrender" => Some(
            "no tracepoint of this kernel corresponds, and fbt cannot trace its do_sched_yield here",
        ),
        "remain-cpu" | "cpucaps-sleep" | "cpucaps-wakeup" | "schedctl-nopreempt"
        | "schedctl-preempt" | "schedctl-yield" => {
            Some("no tracepoint of this kernel corresponds")
        }
        "fault" => Some("the kernel has no signal:signal_generate tracepoint"),
        _ => None,
    }
}

fn field<'a>(f: &'a EventFormat, name: &str) -> Option<&'a Field> {
    f.fields.iter().find(|x| x.name == name)
}

fn build(spec: &Spec, f: &EventFormat) -> Option<Probe> {
    let mut args = Vec::new();
    let mut types = Vec::new();
    for a in spec.args {
        match a {
            Arg::Field(n, dt) => {
                let fl = field(f, n)?;
                let (src, mut ty) = field_arg(fl);
                if let Some(dt) = dt {
                    ty.dtype = (*dt).to_string();
                }
                args.push(src);
                types.push(ty);
            }
            Arg::UserString(n) => {
                use crate::capture::{AddrBase, AddrExpr, CopyRequest, MemKind};
                let fl = field(f, n)?;
                let copy = CopyRequest {
                    addr: AddrExpr {
                        base: AddrBase::Arg(args.len()),
                        offset: 0,
                        derefs: Vec::new(),
                        user_derefs: Vec::new(),
                        index: None,
                    },
                    kind: MemKind::UserString,
                    size: 256,
                    size_arg: None,
                };
                args.push(ArgSource::Field {
                    offset: fl.offset as u16,
                    size: fl.size as u8,
                    signed: false,
                });
                types.push(ProbeArg {
                    native: fl.ctype.clone(),
                    dtype: "string".into(),
                    copy: Some(copy),
                });
            }
            Arg::ExitReason => {
                args.push(ArgSource::ExitReason);
                types.push(ProbeArg {
                    native: "int".into(),
                    dtype: "int".into(),
                    copy: None,
                });
            }
            Arg::Task(n, dt) => {
                args.push(ArgSource::RawArg(*n));
                types.push(ProbeArg {
                    native: TASK.into(),
                    dtype: (*dt).into(),
                    copy: None,
                });
            }
            Arg::Raw(n, native, dt) => {
                args.push(ArgSource::RawArg(*n));
                types.push(ProbeArg {
                    native: (*native).into(),
                    dtype: (*dt).into(),
                    copy: None,
                });
            }
            Arg::RawLoad(n, offset, native, dt) => {
                args.push(ArgSource::RawArgLoad {
                    arg: *n,
                    offset: *offset,
                });
                types.push(ProbeArg {
                    native: (*native).into(),
                    dtype: (*dt).into(),
                    copy: None,
                });
            }
            Arg::FaultCode => {
                args.push(ArgSource::FaultCode {
                    sig: SIGNAL_SIG,
                    info: SIGNAL_INFO,
                });
                types.push(ProbeArg {
                    native: "int".into(),
                    dtype: "int".into(),
                    copy: None,
                });
            }
            Arg::PiNewPrio => {
                args.push(ArgSource::PiNewPrio { task: 0, donor: 1 });
                types.push(ProbeArg {
                    native: "int".into(),
                    dtype: "int".into(),
                    copy: None,
                });
            }
        }
    }
    let mut conditions = Vec::new();
    for c in spec.conds {
        let raw_at = |n: u8| (8 * n as u16, 8u8);
        match *c {
            Cond::ForkChild(process_only) => {
                let mut nrs = [-1; 4];
                let calls = ["fork", "vfork", "clone", "clone3"];
                for (slot, nr) in nrs
                    .iter_mut()
                    .zip(calls.iter().filter_map(|c| syscall_nr(c)))
                {
                    *slot = nr as i32;
                }
                conditions.push(Condition::ForkChild { nrs, process_only });
                continue;
            }
            Cond::RawMaskSet(n, mask) => {
                let (offset, size) = raw_at(n);
                conditions.push(Condition::MaskSet { offset, size, mask });
                continue;
            }
            Cond::RawMaskClear(n, mask) => {
                let (offset, size) = raw_at(n);
                conditions.push(Condition::MaskClear { offset, size, mask });
                continue;
            }
            Cond::Fault => {
                conditions.push(Condition::Fault {
                    sig: SIGNAL_SIG,
                    info: SIGNAL_INFO,
                    task: SIGNAL_TASK,
                });
                continue;
            }
            Cond::RawFlag(n, name) => {
                field(f, name)?;
                let (offset, _) = raw_at(n);
                conditions.push(Condition::Equals {
                    offset,
                    size: 4,
                    value: 1,
                });
                continue;
            }
            Cond::RawEquals(n, value) => {
                // An `int` argument: its low 4 bytes (the raw context holds it widened).
                let (offset, _) = raw_at(n);
                conditions.push(Condition::Equals {
                    offset,
                    size: 4,
                    value,
                });
                continue;
            }
            _ => {}
        }
        let name = match c {
            Cond::Negative(n) | Cond::Positive(n) => *n,
            _ => continue,
        };
        let fl = field(f, name)?;
        if !matches!(fl.size, 1 | 2 | 4 | 8) {
            return None;
        }
        let (offset, size) = (fl.offset as u16, fl.size as u8);
        conditions.push(match *c {
            Cond::Negative(_) => Condition::Negative { offset, size },
            Cond::Positive(_) => Condition::Positive { offset, size },
            _ => continue,
        });
    }
    if spec.next_identity {
        // The incoming thread is a task pointer of the raw tracepoint, not a record field.
        return Some(Probe {
            desc: ProbeDesc::new(spec.provider, KERNEL_MODULE, "", spec.name),
            args: types,
            attach: AttachPoint::RawTracepoint {
                name: SWITCH_RAW.into(),
                args,
                conditions,
                identity: Identity::RawTask(SWITCH_NEXT_ARG),
            },
        });
    }
    if spec.raw {
        return Some(Probe {
            desc: ProbeDesc::new(spec.provider, KERNEL_MODULE, "", spec.name),
            args: types,
            attach: AttachPoint::RawTracepoint {
                name: spec.event.into(),
                args,
                conditions,
                identity: Identity::Current,
            },
        });
    }
    let identity = Identity::Current;
    Some(Probe {
        desc: ProbeDesc::new(spec.provider, KERNEL_MODULE, "", spec.name),
        args: types,
        attach: AttachPoint::Tracepoint {
            subsystem: spec.sys.into(),
            event: spec.event.into(),
            id: f.id,
            args,
            conditions,
            identity,
            return_event: None,
            syscall_return: false,
            syscall: None,
        },
    })
}

/// The `(subsystem, event)` tracepoints the `proc` and `sched` probes are built from (the formats
/// [`probes`] looks at).
pub fn events() -> impl Iterator<Item = (&'static str, &'static str)> {
    SPECS.iter().map(|s| (s.sys, s.event))
}

/// The `proc` and `sched` probes whose tracepoints exist in `formats`.
pub fn probes(formats: &HashMap<(String, String), EventFormat>) -> Vec<Probe> {
    SPECS
        .iter()
        .filter_map(|s| {
            formats
                .get(&(s.sys.to_string(), s.event.to_string()))
                .and_then(|f| build(s, f))
        })
        .collect()
}
