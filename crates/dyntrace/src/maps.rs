//! The memory map of a traced process (`/proc/PID/maps`): parsing, and classifying each mapping into the
//! region types the profile groups counts by.

/// Region types, from least to most specific; the order is the output order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RegionType {
    /// Not in any mapping we know.
    Unknown,
    /// The main program's executable file.
    TextProgram,
    /// Another executable file mapping (shared libraries, the dynamic linker).
    TextLibrary,
    /// The kernel's virtual dynamic shared object.
    TextVdso,
    /// A file mapping that is not executable.
    NonText,
    /// Anonymous memory (JIT code, thread stacks, other data).
    Data,
    /// The brk heap.
    DataHeap,
    /// The main thread's stack.
    Stack,
}

impl RegionType {
    /// Every type, in output order.
    pub const ALL: [RegionType; 8] = [
        RegionType::Unknown,
        RegionType::TextProgram,
        RegionType::TextLibrary,
        RegionType::TextVdso,
        RegionType::NonText,
        RegionType::Data,
        RegionType::DataHeap,
        RegionType::Stack,
    ];

    /// The name written in the profile.
    pub fn name(self) -> &'static str {
        match self {
            RegionType::Unknown => "unknown",
            RegionType::TextProgram => "text:program",
            RegionType::TextLibrary => "text:library",
            RegionType::TextVdso => "text:vdso",
            RegionType::NonText => "non-text",
            RegionType::Data => "data",
            RegionType::DataHeap => "data:heap",
            RegionType::Stack => "stack",
        }
    }
}

/// One line of a maps file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Readable.
    pub read: bool,
    /// Writable.
    pub write: bool,
    /// Executable.
    pub exec: bool,
    /// Shared (writes reach the file or other processes).
    pub shared: bool,
    /// File path or pseudo-name (`[stack]`, `[heap]`, `[vdso]`), empty when anonymous.
    pub path: String,
}

/// Why a maps line is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} of the memory map: {reason}")]
pub struct MapsError {
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub reason: &'static str,
}

/// Parses the text of `/proc/PID/maps`.
pub fn parse_maps(text: &str) -> Result<Vec<Mapping>, MapsError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let e = |reason| MapsError {
            line: i + 1,
            reason,
        };
        let mut fields = line.splitn(6, ' ');
        let range = fields.next().ok_or(e("no address range"))?;
        let perms = fields.next().ok_or(e("no permissions"))?;
        let _offset = fields.next().ok_or(e("no offset"))?;
        let _dev = fields.next().ok_or(e("no device"))?;
        let _inode = fields.next().ok_or(e("no inode"))?;
        let path = fields.next().unwrap_or("").trim_start().to_string();
        let (s, t) = range
            .split_once('-')
            .ok_or(e("address range without '-'"))?;
        let start = u64::from_str_radix(s, 16).map_err(|_| e("bad start address"))?;
        let end = u64::from_str_radix(t, 16).map_err(|_| e("bad end address"))?;
        if end < start {
            return Err(e("end address before start"));
        }
        let p = perms.as_bytes();
        if p.len() < 3 {
            return Err(e("short permissions"));
        }
        out.push(Mapping {
            start,
            end,
            read: p[0] == b'r',
            write: p[1] == b'w',
            exec: p[2] == b'x',
            shared: p.get(3) == Some(&b's'),
            path,
        });
    }
    out.sort_by_key(|m| m.start);
    Ok(out)
}

/// A process's mappings, classified and searchable by address.
#[derive(Debug, Clone, Default)]
pub struct MemoryMap {
    entries: Vec<(Mapping, RegionType)>,
}

/// What an address is: its region type, and whether code there may change under us (writable memory,
/// where decoded instructions must not be cached).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// Region type.
    pub region: RegionType,
    /// Code here can be rewritten by the process.
    pub writable: bool,
    /// A shared mapping (never patched with breakpoints).
    pub shared: bool,
    /// The mapping's bounds (0..0 when unknown).
    pub start: u64,
    /// One past the mapping's end.
    pub end: u64,
}

/// Classifies one mapping; `exe` is the path of the program image.
pub fn classify(m: &Mapping, exe: &str) -> RegionType {
    match m.path.as_str() {
        "[stack]" => return RegionType::Stack,
        "[heap]" => return RegionType::DataHeap,
        "[vdso]" | "[vsyscall]" => return RegionType::TextVdso,
        _ => {}
    }
    if m.path.starts_with("[stack:") {
        return RegionType::Stack;
    }
    if m.path.is_empty() || m.path.starts_with('[') {
        return RegionType::Data;
    }
    // A deleted file keeps " (deleted)" after its name.
    let path = m.path.strip_suffix(" (deleted)").unwrap_or(&m.path);
    if !m.exec {
        return RegionType::NonText;
    }
    if path == exe {
        RegionType::TextProgram
    } else if path.starts_with("/memfd:") || path.starts_with("/dev/") {
        RegionType::Data
    } else {
        RegionType::TextLibrary
    }
}

impl MemoryMap {
    /// Builds from parsed mappings for a program whose image is `exe`.
    pub fn new(maps: Vec<Mapping>, exe: &str) -> Self {
        let entries = maps
            .into_iter()
            .map(|m| {
                let t = classify(&m, exe);
                (m, t)
            })
            .collect();
        MemoryMap { entries }
    }

    /// Reads `/proc/PID/maps`.
    pub fn read(pid: i32, exe: &str) -> std::io::Result<Self> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
        let maps = parse_maps(&text)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        Ok(Self::new(maps, exe))
    }

    /// Where `addr` is, if some mapping holds it.
    pub fn lookup(&self, addr: u64) -> Option<Place> {
        let i = self.entries.partition_point(|(m, _)| m.start <= addr);
        let (m, t) = self.entries.get(i.checked_sub(1)?)?;
        (addr < m.end).then_some(Place {
            region: *t,
            writable: m.write,
            shared: m.shared,
            start: m.start,
            end: m.end,
        })
    }

    /// Number of mappings.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
555555554000-555555555000 r--p 00000000 08:01 1234                       /tmp/a.out
555555555000-555555556000 r-xp 00001000 08:01 1234                       /tmp/a.out
555555559000-55555557a000 rw-p 00000000 00:00 0                          [heap]
7ffff7dd0000-7ffff7f50000 r-xp 00028000 08:01 99                         /usr/lib/x86_64-linux-gnu/libc.so.6
7ffff7f60000-7ffff7f70000 rwxp 00000000 00:00 0 
7ffff7fc1000-7ffff7fc3000 r-xp 00000000 00:00 0                          [vdso]
7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0                          [stack]
";

    #[test]
    fn classifies_every_kind() {
        let m = MemoryMap::new(parse_maps(SAMPLE).unwrap(), "/tmp/a.out");
        let t = |a| m.lookup(a).map(|p| p.region);
        assert_eq!(t(0x555555555100), Some(RegionType::TextProgram));
        assert_eq!(t(0x555555554100), Some(RegionType::NonText));
        assert_eq!(t(0x555555560000), Some(RegionType::DataHeap));
        assert_eq!(t(0x7ffff7dd1000), Some(RegionType::TextLibrary));
        assert_eq!(t(0x7ffff7f60000), Some(RegionType::Data));
        assert!(m.lookup(0x7ffff7f60000).unwrap().writable);
        assert_eq!(t(0x7ffff7fc1000), Some(RegionType::TextVdso));
        assert_eq!(t(0x7fffffffe000), Some(RegionType::Stack));
        assert_eq!(t(0x1000), None);
        assert_eq!(t(0x555555556000), None);
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_maps("zz-10 r-xp 0 0 0").is_err());
        assert!(parse_maps("10-5 r-xp 0 0 0").is_err());
        assert!(parse_maps("10-20").is_err());
        assert!(parse_maps("10-20 r 0 0 0").is_err());
        assert_eq!(parse_maps("").unwrap(), vec![]);
    }
}
