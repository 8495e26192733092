//! Run-time detection of kernel features: kprobes and fentry (for `fbt`), BTF, BPF itself.

use crate::error::{LinuxError, Result};

/// Whether the kernel offers kprobes (a `kprobe_events` file in tracefs or the kprobe PMU).
pub fn have_kprobes() -> bool {
    std::path::Path::new("/sys/bus/event_source/devices/kprobe").exists()
        || crate::tracefs::find_tracefs().is_some_and(|r| r.join("kprobe_events").exists())
}

/// Whether the kernel can attach fentry programs: BTF, plus an ftrace function tracer whose function
/// list we may read (sandboxed kernels refuse it with EPERM, and refuse BPF trampolines with it).
pub fn have_fentry() -> bool {
    use std::io::Read;
    let Some(root) = crate::tracefs::find_tracefs() else {
        return false;
    };
    let mut buf = [0u8; 64];
    have_btf()
        && std::fs::File::open(root.join("available_filter_functions"))
            .and_then(|mut f| f.read(&mut buf))
            .is_ok_and(|n| n > 0)
}

/// Whether the kernel publishes its BTF.
pub fn have_btf() -> bool {
    std::path::Path::new("/sys/kernel/btf/vmlinux").exists()
}

/// `Ok` when this kernel has the `fbt` provider (BPF trampolines); otherwise why not, as the user
/// should see it.
pub fn fbt_support() -> Result<()> {
    if have_fentry() {
        return Ok(());
    }
    if have_kprobes() {
        return Err(LinuxError::NotYetSupported(
            "the fbt provider on kprobes (this kernel has kprobes but no fentry)".into(),
        ));
    }
    Err(LinuxError::FbtUnavailable)
}
