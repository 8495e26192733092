//! Syscall probes on BPF trampolines. A program on the fentry or fexit of the syscall's own
//! function (`__x64_sys_<name>`) runs for that syscall alone, where one in a slot of the
//! `sys_enter` or `sys_exit` dispatcher costs every syscall in the system a program run: the cost
//! tracing one syscall adds to all the others (DTrace's disabled-probe effect). The function's
//! only argument is the `struct pt_regs *` of the syscall's registers, as the typed `sys_enter`
//! and `sys_exit` tracepoints' first is, and fexit's second is the syscall's value, as
//! `sys_exit`'s is: a probe's program is the same code either way. A trampoline's detach waits
//! out an RCU tasks grace period, so only the first [`MAX_SYSCALL_TRAMPOLINES`] syscalls a
//! session traces go on them (a one-liner's few); the others share the dispatchers
//! (`syscall:::entry`'s hundreds of detaches took 28 s more on an emulated 6.1 than the
//! dispatcher's one).

/// How many syscalls' functions a session puts trampolines on.
pub const MAX_SYSCALL_TRAMPOLINES: usize = 8;

use crate::bpf::{ProgKind, Program};
use std::collections::HashMap;

/// The prefix of the kernel's syscall functions on this architecture (`None`: not tabulated).
#[cfg(target_arch = "x86_64")]
const PREFIX: Option<&str> = Some("__x64_sys_");
#[cfg(not(target_arch = "x86_64"))]
const PREFIX: Option<&str> = None;

/// The syscall functions a trampoline can be put on, by tracefs syscall name: those the kernel's
/// BTF types once and ftrace can trace. Empty where the kernel has no BPF trampolines.
#[derive(Debug, Default)]
pub struct SyscallFuncs {
    ids: HashMap<String, u32>,
}

impl SyscallFuncs {
    /// The running kernel's, checked by loading an empty program for one of them (attaching it
    /// would cost a grace period at its detach).
    pub fn of_running_kernel() -> SyscallFuncs {
        let ids = Self::listed().unwrap_or_default();
        let Some(&btf_id) = ids.get("getppid").or_else(|| ids.values().next()) else {
            return SyscallFuncs::default();
        };
        let kind = ProgKind::Fentry {
            btf_id,
            btf_obj_fd: 0,
        };
        match Program::load_empty(kind, "dtrace_sysfe", "syscall entry trampolines") {
            Ok(_) => SyscallFuncs { ids },
            Err(_) => SyscallFuncs::default(),
        }
    }

    /// The BTF id of syscall `name`'s function, where a trampoline can be put on it.
    pub fn btf_id(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    fn listed() -> Option<HashMap<String, u32>> {
        let prefix = PREFIX?;
        if !crate::features::have_fentry() {
            return None;
        }
        let (ids, several) = crate::btf::Btf::load_vmlinux().ok()?.func_index();
        let root = crate::tracefs::find_tracefs()?;
        let listed = crate::catalog::fbt::filter_functions(&root).ok()?;
        let traceable: std::collections::HashSet<&str> = listed
            .funcs
            .iter()
            .filter(|f| f.0 == crate::catalog::fbt::KERNEL_MODULE && !listed.twice.contains(*f))
            .filter_map(|(_, f)| f.strip_prefix(prefix))
            .collect();
        Some(
            ids.into_iter()
                .filter(|(f, _)| !several.contains(f))
                .filter_map(|(f, id)| {
                    let name = f.strip_prefix(prefix)?;
                    traceable.contains(name).then(|| (name.to_string(), id))
                })
                .collect(),
        )
    }
}
