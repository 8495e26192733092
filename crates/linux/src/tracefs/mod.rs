//! tracefs: finding (and, when absent, mounting) the tracing file system, listing its events and
//! reading their `format` files.

pub mod format;

pub use format::{parse_format, EventFormat, Field};

use crate::error::{LinuxError, Result};
use std::path::{Path, PathBuf};

const CANDIDATES: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The tracefs root if it is mounted (has an `events` directory).
pub fn find_tracefs() -> Option<PathBuf> {
    CANDIDATES
        .iter()
        .map(PathBuf::from)
        .find(|p| p.join("events").is_dir())
}

/// The tracefs root, mounting tracefs on `/sys/kernel/tracing` when it is not mounted yet.
pub fn ensure_tracefs() -> Result<PathBuf> {
    if let Some(p) = find_tracefs() {
        return Ok(p);
    }
    let target = c"/sys/kernel/tracing";
    // SAFETY: all arguments are NUL-terminated strings; data is null.
    let r = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        return Err(LinuxError::Unavailable(format!(
            "tracefs is not mounted and mounting it failed: {e}"
        )));
    }
    find_tracefs().ok_or_else(|| {
        LinuxError::Unavailable("tracefs mounted but has no events directory".into())
    })
}

/// Every `(subsystem, event)` pair under `root/events`, sorted.
pub fn list_events(root: &Path) -> Result<Vec<(String, String)>> {
    let events = root.join("events");
    let mut out = Vec::new();
    let rd = std::fs::read_dir(&events)
        .map_err(|e| LinuxError::from_io(events.display().to_string(), e))?;
    for sys in rd.flatten() {
        if !sys.path().is_dir() {
            continue;
        }
        let sys_name = sys.file_name().to_string_lossy().into_owned();
        let Ok(evs) = std::fs::read_dir(sys.path()) else {
            continue;
        };
        for ev in evs.flatten() {
            if ev.path().join("format").is_file() {
                out.push((
                    sys_name.clone(),
                    ev.file_name().to_string_lossy().into_owned(),
                ));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Reads and parses one event's format file.
pub fn read_format(root: &Path, subsystem: &str, event: &str) -> Result<EventFormat> {
    if [subsystem, event]
        .iter()
        .any(|s| s.is_empty() || s.contains('/') || s.starts_with('.'))
    {
        return Err(LinuxError::NoSuchProbe(format!("{subsystem}:{event}")));
    }
    let p = root
        .join("events")
        .join(subsystem)
        .join(event)
        .join("format");
    let text = std::fs::read_to_string(&p).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            LinuxError::NoSuchProbe(format!("tracepoint {subsystem}:{event}"))
        }
        _ => LinuxError::from_io(p.display().to_string(), e),
    })?;
    parse_format(&text, &p.display().to_string())
}
