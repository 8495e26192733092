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
    /// The mapped file's device and inode (zero for anonymous memory, or where not known).
    pub file: FileId,
}

/// A file as the kernel names it: its filesystem's device, in the kernel's own encoding
/// (`MKDEV`: major << 20 | minor, as `super_block.s_dev` holds it), and its inode number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FileId {
    /// `s_dev`.
    pub dev: u32,
    /// `i_ino`.
    pub ino: u64,
}

impl FileId {
    /// From the major and minor numbers a maps file or a perf record prints.
    pub fn from_parts(major: u32, minor: u32, ino: u64) -> FileId {
        FileId {
            dev: (major << 20) | (minor & 0xf_ffff),
            ino,
        }
    }

    /// Whether it names a file.
    pub fn is_known(&self) -> bool {
        self.ino != 0
    }
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
        let (Some(range), Some(perms), Some(off), Some(dev), Some(inode)) =
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
        // "08:01 1234567": an unreadable device or inode leaves the file unknown.
        let file = dev
            .split_once(':')
            .and_then(|(ma, mi)| {
                Some(FileId::from_parts(
                    u32::from_str_radix(ma, 16).ok()?,
                    u32::from_str_radix(mi, 16).ok()?,
                    inode.parse().ok()?,
                ))
            })
            .unwrap_or_default();
        out.push(Mapping {
            start,
            end,
            offset,
            exec: perms.as_bytes().get(2) == Some(&b'x'),
            path,
            file,
        });
    }
    out
}

/// The file at `path` now, as the kernel names it (`stat`'s device in the kernel's encoding).
pub fn file_id_of(path: &str) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(path).ok()?;
    // glibc's dev_t: the major's low 12 bits at 8, its high bits at 32; the minor's low 8 bits
    // at 0, its high bits at 12.
    let d = md.dev();
    let major = ((d >> 8) & 0xfff) | ((d >> 32) & !0xfff);
    let minor = (d & 0xff) | ((d >> 12) & !0xff);
    Some(FileId::from_parts(
        u32::try_from(major).ok()?,
        u32::try_from(minor).ok()?,
        md.ino(),
    ))
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
        assert_eq!(m[0].file, FileId::from_parts(8, 1, 123));
        assert_eq!(m[1].file, FileId::default());
        assert_eq!(m[0].offset, 0x1000);
        assert_eq!(m[1].path, "");
    }

    /// A file's id from `stat` is the one the maps file prints for its mapping.
    #[test]
    fn a_files_id_is_the_one_its_mappings_show() {
        let maps = read_maps(std::process::id()).unwrap();
        let exe = maps
            .iter()
            .find(|m| m.exec && m.path.starts_with('/') && m.file.is_known())
            .expect("an executable file mapping");
        assert_eq!(file_id_of(&exe.path), Some(exe.file), "{exe:?}");
    }
}
