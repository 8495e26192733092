//! The `syscall` provider: `syscall:vmlinux:<name>:entry` and `:return` for every syscall that has
//! `sys_enter_<name>`/`sys_exit_<name>` tracepoints. Entry arguments are the syscall's arguments typed
//! from the format file; return probes carry the return value in arg0 and arg1, and `errno`.

use super::{AttachPoint, Probe, ProbeArg, ProbeDesc, SyscallRoute};
use crate::capture::{ArgSource, Identity};
use crate::tracefs::EventFormat;
use std::collections::HashMap;

/// The syscall probes found in `formats`.
pub fn probes(formats: &HashMap<(String, String), EventFormat>) -> Vec<Probe> {
    let mut names: Vec<&str> = formats
        .keys()
        .filter(|(s, _)| s == "syscalls")
        .filter_map(|(_, e)| e.strip_prefix("sys_enter_"))
        .collect();
    names.sort_unstable();
    let mut out = Vec::new();
    for name in names {
        let Some(enter) = formats.get(&("syscalls".to_string(), format!("sys_enter_{name}")))
        else {
            continue;
        };
        let exit = formats.get(&("syscalls".to_string(), format!("sys_exit_{name}")));
        out.push(entry_probe(name, enter, exit));
        if let Some(probe) = exit.and_then(|exit| return_probe(name, exit)) {
            out.push(probe);
        }
    }
    out
}

/// The names of the syscalls with a `sys_enter_<name>` event among `events` (`(subsystem,
/// event)` pairs), sorted: the order [`probes`] lists them in.
pub fn names(events: &[(String, String)]) -> Vec<String> {
    let mut names: Vec<&str> = events
        .iter()
        .filter(|(s, _)| s == "syscalls")
        .filter_map(|(_, e)| e.strip_prefix("sys_enter_"))
        .collect();
    names.sort_unstable();
    names.dedup();
    names.into_iter().map(str::to_string).collect()
}

/// `syscall:vmlinux:<name>:entry`, from the `sys_enter_<name>` format and, when there is one,
/// the `sys_exit_<name>` format (whose id lets the entry probe re-read user memory at return).
pub fn entry_probe(name: &str, enter: &EventFormat, exit: Option<&EventFormat>) -> Probe {
    let nr = super::syscall_nr::syscall_nr(name);
    let fields: Vec<_> = enter
        .fields
        .iter()
        .filter(|f| f.name != "__syscall_nr")
        .take(8)
        .collect();
    let args = fields
        .iter()
        .map(|f| ArgSource::Field {
            offset: f.offset as u16,
            size: f.size as u8,
            signed: f.signed,
        })
        .collect();
    let arg_types = fields
        .iter()
        .map(|f| ProbeArg {
            native: f.ctype.clone(),
            dtype: if f.ctype.contains('*') {
                f.ctype.clone()
            } else if f.signed {
                "int64_t".into()
            } else {
                "uint64_t".into()
            },
            copy: None,
        })
        .collect();
    Probe {
        desc: ProbeDesc::new("syscall", "vmlinux", name, "entry"),
        args: arg_types,
        attach: AttachPoint::Tracepoint {
            subsystem: "syscalls".into(),
            event: enter.name.clone(),
            id: enter.id,
            args,
            conditions: Vec::new(),
            identity: Identity::Current,
            return_event: exit.map(|e| e.id),
            syscall_return: false,
            syscall: nr.map(|nr| SyscallRoute {
                nr,
                args: (0..fields.len().min(6) as u8)
                    .map(ArgSource::SyscallArg)
                    .collect(),
            }),
        },
    }
}

/// `syscall:vmlinux:<name>:return`, from the `sys_exit_<name>` format (`None` when it has no
/// `ret` field).
pub fn return_probe(name: &str, exit: &EventFormat) -> Option<Probe> {
    let nr = super::syscall_nr::syscall_nr(name);
    let ret = exit.fields.iter().find(|f| f.name == "ret")?;
    let src = ArgSource::Field {
        offset: ret.offset as u16,
        size: ret.size as u8,
        signed: true,
    };
    let arg = ProbeArg {
        native: ret.ctype.clone(),
        dtype: "int64_t".into(),
        copy: None,
    };
    Some(Probe {
        desc: ProbeDesc::new("syscall", "vmlinux", name, "return"),
        args: vec![arg.clone(), arg],
        attach: AttachPoint::Tracepoint {
            subsystem: "syscalls".into(),
            event: exit.name.clone(),
            id: exit.id,
            args: vec![src, src],
            conditions: Vec::new(),
            identity: Identity::Current,
            return_event: None,
            syscall_return: true,
            syscall: nr.map(|nr| SyscallRoute {
                nr,
                args: vec![ArgSource::RawArg(1), ArgSource::RawArg(1)],
            }),
        },
    })
}
