//! The running processes and the object files each maps, read from `/proc`: what a provider
//! glob with a literal prefix (`python*:::`) is matched against (see [`super::user`]).
//!
//! Enabling a program looks at every process for each glob clause twice (its description is
//! prepared, then its variables placed), and a script of several clauses more often still: one
//! [`ProcScan`] is read at the first look and serves every later look of the same enabling
//! ([`ScanCache`]), until the enabling ends ([`ScanCache::forget`]). The looks made while tracing
//! (the processes started since the last poll, a process that loaded a library) read `/proc`
//! afresh ([`list`], [`ProcessObjects::read`]).

use std::collections::HashSet;
use std::path::PathBuf;

/// A process and the executable it runs (`None` when `/proc/<pid>/exe` cannot be read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Process {
    /// Its id.
    pub(crate) pid: u32,
    /// Its executable.
    pub(crate) exe: Option<PathBuf>,
}

/// The processes running now, dtrace itself left out, each with its executable.
pub(crate) fn list() -> Vec<Process> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .map(|pid| Process {
            pid,
            exe: std::fs::read_link(format!("/proc/{pid}/exe")).ok(),
        })
        .collect()
}

/// A process and the object files it maps executable, each once, in the order of its mappings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProcessObjects {
    /// The process.
    pub(crate) process: Process,
    /// The paths of its executable mappings of files.
    pub(crate) objects: Vec<String>,
}

impl ProcessObjects {
    /// The objects of `process`, read now (`None` when its mappings cannot be read: gone).
    pub(crate) fn of(process: Process) -> Option<ProcessObjects> {
        let maps = crate::symbols::procmaps::read_maps(process.pid).ok()?;
        let mut seen: HashSet<&str> = HashSet::new();
        let objects = maps
            .iter()
            .filter(|m| m.exec && m.path.starts_with('/'))
            .filter(|m| seen.insert(&m.path))
            .map(|m| m.path.clone())
            .collect();
        Some(ProcessObjects { process, objects })
    }

    /// The objects process `pid` maps now, and its executable.
    pub(crate) fn read(pid: u32) -> Option<ProcessObjects> {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        ProcessObjects::of(Process { pid, exe })
    }

    /// Whether object `path` is the process's executable.
    pub(crate) fn is_main(&self, path: &str) -> bool {
        self.process.exe.as_deref() == Some(std::path::Path::new(path))
    }
}

/// Every process running at one moment with its objects (those whose mappings could be read).
#[derive(Clone, Debug, Default)]
pub(crate) struct ProcScan {
    /// The processes, in `/proc`'s order.
    pub(crate) processes: Vec<ProcessObjects>,
}

impl ProcScan {
    /// Reads every process but dtrace.
    pub(crate) fn read() -> ProcScan {
        ProcScan {
            processes: list().into_iter().filter_map(ProcessObjects::of).collect(),
        }
    }
}

/// The [`ProcScan`] of the enabling under way, read at its first look.
#[derive(Debug, Default)]
pub(crate) struct ScanCache {
    scan: Option<std::sync::Arc<ProcScan>>,
    /// Scans read so far (for tests).
    reads: usize,
}

impl ScanCache {
    /// The processes as this enabling first saw them (read now if it has not looked yet).
    pub(crate) fn get(&mut self) -> std::sync::Arc<ProcScan> {
        if let Some(s) = &self.scan {
            return s.clone();
        }
        self.reads += 1;
        let s = std::sync::Arc::new(ProcScan::read());
        self.scan = Some(s.clone());
        s
    }

    /// The enabling has ended: the next one reads `/proc` again.
    pub(crate) fn forget(&mut self) {
        self.scan = None;
    }

    /// How many times `/proc` was read through this cache.
    pub(crate) fn reads(&self) -> usize {
        self.reads
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_sees_running_processes_but_not_dtrace() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = child.id();
        // Scan once the child has exec'd sleep and mapped it (a scan made between fork and exec
        // sees the test's own program).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .is_ok_and(|m| m.lines().any(|l| l.ends_with("/sleep")))
        {
            assert!(std::time::Instant::now() < deadline, "sleep never mapped");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let s = ProcScan::read();
        let _ = child.kill();
        let _ = child.wait();
        let me = std::process::id();
        assert!(s.processes.iter().all(|p| p.process.pid != me));
        let p = s
            .processes
            .iter()
            .find(|p| p.process.pid == pid)
            .expect("the child is seen");
        let exe = p.process.exe.as_deref().expect("its executable");
        let exe = exe.to_str().expect("a path");
        assert!(exe.ends_with("/sleep"), "{exe}");
        assert!(p.is_main(exe));
        assert!(p.objects.iter().any(|o| o == exe), "{:?}", p.objects);
        let unique: HashSet<&String> = p.objects.iter().collect();
        assert_eq!(unique.len(), p.objects.len());
    }

    #[test]
    fn the_cache_reads_once_until_forgotten() {
        let mut c = ScanCache::default();
        let a = c.get();
        let b = c.get();
        assert!(std::sync::Arc::ptr_eq(&a, &b));
        assert_eq!(c.reads(), 1);
        c.forget();
        let d = c.get();
        assert!(!std::sync::Arc::ptr_eq(&a, &d));
        assert_eq!(c.reads(), 2);
    }

    #[test]
    fn a_process_that_is_gone_has_no_objects() {
        let mut child = std::process::Command::new("true").spawn().expect("true");
        let pid = child.id();
        let _ = child.wait();
        assert_eq!(ProcessObjects::read(pid), None);
    }
}
