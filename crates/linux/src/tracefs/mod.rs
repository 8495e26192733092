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

/// Every `(subsystem, event)` pair under `root/events`, sorted: each directory of a subsystem's
/// directory is an event (told from the directory entries' types, without a `stat` of each of
/// the thousands of events; an event's `format` file is read by [`read_format`]).
pub fn list_events(root: &Path) -> Result<Vec<(String, String)>> {
    let events = root.join("events");
    let mut out = Vec::new();
    let rd = std::fs::read_dir(&events)
        .map_err(|e| LinuxError::from_io(events.display().to_string(), e))?;
    let is_dir = |e: &std::fs::DirEntry| e.file_type().is_ok_and(|t| t.is_dir());
    for sys in rd.flatten() {
        if !is_dir(&sys) {
            continue;
        }
        let sys_name = sys.file_name().to_string_lossy().into_owned();
        let Ok(evs) = std::fs::read_dir(sys.path()) else {
            continue;
        };
        for ev in evs.flatten() {
            if is_dir(&ev) {
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

/// The text of a tracefs file, which reports a size of 0: read in one go into a buffer large enough
/// for most such files, without the `stat`, `lseek` and small probing read that
/// `std::fs::read_to_string` spends on each file it reads.
fn read_small_file(p: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(p)?;
    let mut buf = vec![0u8; 8192];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        match f.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(len);
    String::from_utf8(buf).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
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
    let text = read_small_file(&p).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            LinuxError::NoSuchProbe(format!("tracepoint {subsystem}:{event}"))
        }
        _ => LinuxError::from_io(p.display().to_string(), e),
    })?;
    parse_format(&text, &p.display().to_string())
}
