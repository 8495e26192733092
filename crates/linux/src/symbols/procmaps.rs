//! `/proc/<pid>/maps`: the executable mappings of a process (address range, file offset, path),
//! parsed defensively.

/// One mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// Start address.
    pub start: u64,
    /// End address (exclusive).
    pub end: u64,
    /// Offset in the file.
    pub offset: u64,
    /// Whether it is executable.
    pub exec: bool,
    /// Path of the mapped file (or `[vdso]`, `[stack]`...), empty for anonymous memory.
    pub path: String,
}

/// The most mappings we keep for one process.
pub const MAX_MAPPINGS: usize = 1 << 16;

/// Parses the text of a maps file.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    let mut out = Vec::new();
    for line in text.lines() {
        if out.len() >= MAX_MAPPINGS {
            break;
        }
        let mut it = line.splitn(6, ' ');
        let (Some(range), Some(perms), Some(off), Some(_dev), Some(_inode)) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        else {
            continue;
        };
        let path = it.next().unwrap_or("").trim().to_string();
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end), Ok(offset)) = (
            u64::from_str_radix(a, 16),
            u64::from_str_radix(b, 16),
            u64::from_str_radix(off, 16),
        ) else {
            continue;
        };
        if end <= start {
            continue;
        }
        out.push(Mapping {
            start,
            end,
            offset,
            exec: perms.as_bytes().get(2) == Some(&b'x'),
            path,
        });
    }
    out
}

/// Reads the mappings of `pid`.
pub fn read_maps(pid: u32) -> std::io::Result<Vec<Mapping>> {
    Ok(parse_maps(&std::fs::read_to_string(format!(
        "/proc/{pid}/maps"
    ))?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_maps_lines() {
        let m = parse_maps(
            "55d0c000-55d0d000 r-xp 00001000 08:01 123   /usr/bin/true\n7ffd000-7ffe000 rw-p 00000000 00:00 0 \nbad line\n\
             7f00-7e00 r-xp 0 0 0 x\n",
        );
        assert_eq!(m.len(), 2);
        assert!(m[0].exec);
        assert_eq!(m[0].path, "/usr/bin/true");
        assert_eq!(m[0].offset, 0x1000);
        assert_eq!(m[1].path, "");
    }
}
