//! The `proc` and `sched` providers, built on the scheduler, task and signal tracepoints of this
//! kernel. Each probe names the tracepoint it fires from, any test on the record (e.g. `create` only
//! for new processes, `lwp-create` only for new threads), and its arguments. Where a tracepoint lacks
//! DTrace's documented argument (a `psinfo_t *` built from a task), the argument is the pid the
//! translator needs, typed as the kernel gives it. Probes with no tracepoint behind them on the running
//! kernel are simply absent; [`unavailable`] says why for the ones DTrace defines.
//!
//! Each probe fires in the context DTrace documents for it: `on-cpu` in the thread going on CPU (the
//! `sched_switch` raw tracepoint's `next` task supplies every identity value and `curthread`, since
//! the tracepoint itself runs on the outgoing thread), `off-cpu`, `sleep` and `preempt` in the
//! outgoing thread, `wakeup` in the waking thread (`sched_waking`, which runs in the waker, where
//! `sched_wakeup` may run on the target CPU), and the `proc` probes in the acting process. `start`
//! and `lwp-start` fire at a new user task's first switch-in (before it runs any instruction), with
//! the new task's identity, as `on-cpu` does.

use super::{field_arg, AttachPoint, Probe, ProbeArg, ProbeDesc};
use crate::capture::{ArgSource, Condition, Identity};
use crate::tracefs::{EventFormat, Field};
use std::collections::HashMap;

const CLONE_THREAD: u32 = 0x0001_0000;
const TRACE_SIGNAL_IGNORED: i32 = 1;
const TASK_REPORT_MAX: u32 = 0x100;

enum Cond {
    MaskSet(&'static str, u32),
    MaskClear(&'static str, u32),
    Equals(&'static str, i32),
    Negative(&'static str),
    /// The incoming task's first run (see [`Condition::NewTask`]); for the first thread of a
    /// process only when true.
    FirstRun(bool),
}

enum Arg {
    /// A record field, with the D type DTrace documents (None: from the format file).
    Field(&'static str, Option<&'static str>),
    /// A negated record field (errno from a return value).
    Neg(&'static str, &'static str),
    /// Not provided by this tracepoint.
    Zero(&'static str),
    /// The exit reason (`CLD_*`) from the exiting task's `exit_code`.
    ExitReason,
}

/// The raw tracepoint `on-cpu` attaches to, and the argument holding the incoming task.
const SWITCH_RAW: &str = "sched_switch";
const SWITCH_NEXT_ARG: u8 = 2;

struct Spec {
    provider: &'static str,
    name: &'static str,
    sys: &'static str,
    event: &'static str,
    args: &'static [Arg],
    conds: &'static [Cond],
    next_identity: bool,
}

const SPECS: &[Spec] = &[
    Spec {
        provider: "proc",
        name: "exec",
        sys: "sched",
        event: "sched_prepare_exec",
        args: &[Arg::Field("filename", Some("string"))],
        conds: &[],
        next_identity: false,
    },
    Spec {
        provider: "proc",
        name: "exec-success",
        sys: "sched",
        event: "sched_process_exec",
        args: &[],
        conds: &[],
        next_identity: false,
    },
    Spec {
        provider: "proc",
        name: "exec-failure",
        sys: "syscalls",
        event: "sys_exit_execve",
        args: &[Arg::Neg("ret", "int")],
        conds: &[Cond::Negative("ret")],
        next_identity: false,
    },
    Spec {
        provider: "proc",
        name: "exit",
        sys: "sched",
        event: "sched_process_exit",
        args: &[Arg::ExitReason],
        conds: &[Cond::Equals("group_dead", 1)],
        next_identity: false,
    },
    Spec {
        provider: "proc",
        name: "lwp-exit",
        sys: "sched",
        event: "sched_process_exit",
        args: &[],
        conds: &[],
        next_identity: false,
    },
    Spec {
        provider: "proc",
        name: "create",
        sys: "task",
        event: "task_newtask",
        args: &[Arg::Field("pid", None)],
        conds: &[Cond::MaskClear("clone_flags", CLONE_THREAD)],
        next_identity: false,
    },
    Spec {
        provider: "proc",
        name: "lwp-create",
        sys: "task",
        event: "task_newtask",
        args: &[Arg::Field("pid", None), Arg::Field("pid", None)],
        conds: &[Cond::MaskSet("clone_flags", CLONE_THREAD)],
        next_identity: false,
    },
    Spec {
        provider: "proc",
        name: "signal-send",
        sys: "signal",
        event: "signal_generate",
        args: &[
            Arg::Field("pid", None),
            Arg::Field("pid", None),
            Arg::Field("sig", Some("int")),
        ],
        conds: &[],
        next_identity: false,
    },
    Spec {
        provider: "proc",
        name: "signal-discard",
        sys: "signal",
        event: "signal_generate",
        args: &[
            Arg::Field("pid", None),
            Arg::Field("pid", None),
            Arg::Field("sig", Some("int")),
        ],
        conds: &[Cond::Equals("result", TRACE_SIGNAL_IGNORED)],
        next_identity: false,
    },
    Spec {
        provider: "proc",
        name: "signal-handle",
        sys: "signal",
        event: "signal_deliver",
        args: &[
            Arg::Field("sig", Some("int")),
            Arg::Zero("siginfo_t *"),
            Arg::Field("sa_handler", Some("void (*)(void)")),
        ],
        conds: &[],
        next_identity: false,
    },
    Spec {
        provider: "proc",
        name: "start",
        sys: "sched",
        event: "sched_switch",
        args: &[],
        conds: &[Cond::FirstRun(true)],
        next_identity: true,
    },
    Spec {
        provider: "proc",
        name: "lwp-start",
        sys: "sched",
        event: "sched_switch",
        args: &[],
        conds: &[Cond::FirstRun(false)],
        next_identity: true,
    },
    Spec {
        provider: "sched",
        name: "on-cpu",
        sys: "sched",
        event: "sched_switch",
        args: &[],
        conds: &[],
        next_identity: true,
    },
    Spec {
        provider: "sched",
        name: "off-cpu",
        sys: "sched",
        event: "sched_switch",
        args: &[Arg::Field("next_pid", None), Arg::Field("next_pid", None)],
        conds: &[],
        next_identity: false,
    },
    Spec {
        provider: "sched",
        name: "sleep",
        sys: "sched",
        event: "sched_switch",
        args: &[],
        conds: &[Cond::MaskSet("prev_state", TASK_REPORT_MAX - 1)],
        next_identity: false,
    },
    Spec {
        provider: "sched",
        name: "preempt",
        sys: "sched",
        event: "sched_switch",
        args: &[],
        conds: &[Cond::MaskSet("prev_state", TASK_REPORT_MAX)],
        next_identity: false,
    },
    Spec {
        provider: "sched",
        name: "wakeup",
        sys: "sched",
        event: "sched_waking",
        args: &[Arg::Field("pid", None), Arg::Field("pid", None)],
        conds: &[],
        next_identity: false,
    },
    Spec {
        provider: "sched",
        name: "change-pri",
        sys: "sched",
        event: "sched_pi_setprio",
        args: &[
            Arg::Field("pid", None),
            Arg::Field("pid", None),
            Arg::Field("newprio", Some("int")),
        ],
        conds: &[],
        next_identity: false,
    },
];

/// DTrace `proc`/`sched` probes this substrate cannot offer, with the reason.
pub fn unavailable(name: &str) -> Option<&'static str> {
    match name {
        "enqueue" | "dequeue" => {
            Some("the kernel has no run-queue tracepoints (needs fbt on enqueue_task/dequeue_task)")
        }
        "tick" | "surrender" | "remain-cpu" | "cpucaps-sleep" | "cpucaps-wakeup"
        | "schedctl-nopreempt" | "schedctl-preempt" | "schedctl-yield" => {
            Some("no tracepoint of this kernel corresponds")
        }
        "fault" => Some("no tracepoint of this kernel corresponds"),
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
            Arg::Neg(n, dt) => {
                let fl = field(f, n)?;
                args.push(ArgSource::NegField {
                    offset: fl.offset as u16,
                    size: fl.size as u8,
                });
                types.push(ProbeArg {
                    native: fl.ctype.clone(),
                    dtype: (*dt).into(),
                    copy: None,
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
            Arg::Zero(dt) => {
                args.push(ArgSource::Zero);
                types.push(ProbeArg {
                    native: "(not provided by the tracepoint)".into(),
                    dtype: (*dt).into(),
                    copy: None,
                });
            }
        }
    }
    let mut conditions = Vec::new();
    for c in spec.conds {
        if let Cond::FirstRun(process_only) = *c {
            conditions.push(Condition::NewTask {
                arg: SWITCH_NEXT_ARG,
                process_only,
            });
            continue;
        }
        let name = match c {
            Cond::MaskSet(n, _)
            | Cond::MaskClear(n, _)
            | Cond::Equals(n, _)
            | Cond::Negative(n) => *n,
            Cond::FirstRun(_) => continue,
        };
        let fl = field(f, name)?;
        if !matches!(fl.size, 1 | 2 | 4 | 8) {
            return None;
        }
        let (offset, size) = (fl.offset as u16, fl.size as u8);
        conditions.push(match *c {
            Cond::MaskSet(_, mask) => Condition::MaskSet { offset, size, mask },
            Cond::MaskClear(_, mask) => Condition::MaskClear { offset, size, mask },
            Cond::Equals(_, value) => Condition::Equals {
                offset,
                size,
                value,
            },
            Cond::Negative(_) => Condition::Negative { offset, size },
            Cond::FirstRun(_) => continue,
        });
    }
    if spec.next_identity {
        // The incoming thread is a task pointer of the raw tracepoint, not a record field.
        return Some(Probe {
            desc: ProbeDesc::new(spec.provider, "", "", spec.name),
            args: types,
            attach: AttachPoint::RawTracepoint {
                name: SWITCH_RAW.into(),
                args,
                conditions,
                identity: Identity::RawTask(SWITCH_NEXT_ARG),
            },
        });
    }
    let identity = Identity::Current;
    Some(Probe {
        desc: ProbeDesc::new(spec.provider, "", "", spec.name),
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
