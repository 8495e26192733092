//! The `sched` probes no tracepoint of the kernel gives, built on `fbt` as DTrace for Linux builds
//! them: `enqueue` and `dequeue` on the entry of every scheduling class's `enqueue_task_*` and
//! `dequeue_task_*` (one probe over the whole family: `enqueue_task_fair`, `_rt`, `_dl`, ...), whose
//! arguments are the run queue and the task; `tick` on the scheduler's clock tick
//! (`sched_tick`, `scheduler_tick` before Linux 6.10) and `surrender` on `do_sched_yield`, both in
//! the thread they describe (the one the tick interrupted, the one yielding).
//!
//! Arguments, as DTrace documents them: `args[0]` the thread (`lwpsinfo_t *`), `args[1]` its
//! process (`psinfo_t *`), both translated from the `struct task_struct *`; for `enqueue` and
//! `dequeue`, `args[2]` the CPU whose run queue it is (`cpuinfo_t *`, translated from the
//! `struct rq *`); for `dequeue`, as in DTrace for Linux, `args[3]` the kernel's dequeue flags
//! (`int`: 1, `DEQUEUE_SLEEP`, when the thread goes to sleep). `enqueue` has no `args[3]` there
//! (Solaris's "placed at the front" would need the kernel's private `ENQUEUE_HEAD` value).

use super::fbt::{FbtCatalog, KERNEL_MODULE};
use super::proc_sched::{LWPSINFO, PSINFO, TASK};
use super::{AttachPoint, Probe, ProbeArg, ProbeDesc};
use crate::capture::ArgSource;

/// The native type of a run queue argument.
const RQ: &str = "struct rq *";
/// DTrace's type for the CPU a run queue belongs to.
const CPUINFO: &str = "cpuinfo_t *";

/// Where a probe fires.
enum Functions {
    /// Every traceable function of the kernel image whose name starts so; arguments (run queue,
    /// task, ...).
    Family(&'static str),
    /// The first of these that the kernel has (renamed across versions); no argument names the
    /// thread: it is the current one.
    OneOf(&'static [&'static str]),
}

/// The `sched` probes built here.
const PROBES: &[(&str, Functions)] = &[
    ("enqueue", Functions::Family("enqueue_task_")),
    ("dequeue", Functions::Family("dequeue_task_")),
    ("tick", Functions::OneOf(&["sched_tick", "scheduler_tick"])),
    ("surrender", Functions::OneOf(&["do_sched_yield"])),
];

/// The names of the probes built here.
pub fn names() -> impl Iterator<Item = &'static str> {
    PROBES.iter().map(|(n, _)| *n)
}

/// `sched:::<name>`.
pub fn desc(name: &str) -> ProbeDesc {
    ProbeDesc::new("sched", KERNEL_MODULE, "", name)
}

fn arg(native: &str, dtype: &str) -> ProbeArg {
    ProbeArg {
        native: native.into(),
        dtype: dtype.into(),
        copy: None,
    }
}

/// `sched:::<name>` on this kernel's functions; `None` when it has none of them that `fbt` can
/// trace (the catalogue then says why through [`super::proc_sched::unavailable`]).
pub fn probe(fbt: &FbtCatalog, name: &str) -> Option<Probe> {
    let (_, functions) = PROBES.iter().find(|(n, _)| *n == name)?;
    let (candidates, args, types) = match functions {
        Functions::Family(prefix) => {
            let mut args = vec![
                ArgSource::FuncArg(1),
                ArgSource::FuncArg(1),
                ArgSource::FuncArg(0),
            ];
            let mut types = vec![arg(TASK, LWPSINFO), arg(TASK, PSINFO), arg(RQ, CPUINFO)];
            if name == "dequeue" {
                args.push(ArgSource::FuncArg(2));
                types.push(arg("int", "int"));
            }
            (
                fbt.functions_starting_with(KERNEL_MODULE, prefix),
                args,
                types,
            )
        }
        Functions::OneOf(names) => (
            names
                .iter()
                .map(|n| n.to_string())
                .filter(|n| fbt.has_function(KERNEL_MODULE, n))
                .take(1)
                .collect(),
            vec![ArgSource::CurrentTask, ArgSource::CurrentTask],
            vec![arg(TASK, LWPSINFO), arg(TASK, PSINFO)],
        ),
    };
    let family = matches!(functions, Functions::Family(_));
    let mut placed: Vec<(String, u32)> = Vec::new();
    for f in candidates {
        let Ok(p) = fbt.probe(&ProbeDesc::new("fbt", KERNEL_MODULE, &f, "entry")) else {
            continue;
        };
        // A member of a family takes (run queue, task, ...); where BTF types the arguments, a
        // function of that name that does not is not one.
        let typed = p.args.iter().any(|a| a.native != "uint64_t");
        if family
            && typed
            && (p.args.len() < 2 || p.args[0].native != RQ || p.args[1].native != TASK)
        {
            continue;
        }
        if let AttachPoint::Fbt { btf_id, .. } = p.attach {
            placed.push((f, btf_id));
        }
    }
    let mut placed = placed.into_iter();
    let (function, btf_id) = placed.next()?;
    Some(Probe {
        desc: desc(name),
        args: types,
        attach: AttachPoint::Fbt {
            module: KERNEL_MODULE.into(),
            function,
            btf_id,
            ret: false,
            args,
            conditions: Vec::new(),
            also: placed.collect(),
        },
    })
}
