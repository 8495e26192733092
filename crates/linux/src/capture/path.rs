//! Paths of `struct path` objects recorded at the probe, for `d_path()` (and through it `cwd`,
//! `root` and `fileinfo_t`'s `fi_pathname`): the kernel offsets the walk needs ([`PathOffsets`],
//! from BTF, [`offsets_from_btf`]), the bounded walk the capture program makes ([`emit_path_walk`]) and the assembly of
//! the recorded components into the path Linux's `d_path()` prints ([`decode_path`]).
//!
//! The walk itself (its slot, flags and bounds) is `dtrace_ebpf::dpath`'s, which the translated
//! `d_path()` makes too: from the path's dentry up to the record's task's root, leaf first, a
//! path deeper or longer than its bounds recorded as truncated (delivered with a leading `...`),
//! an unlinked file with `" (deleted)"`, a pseudo file by its file system type and inode
//! (`pipe:[ino]`, `socket:[ino]`, `anon_inode:name`).

use super::address::{Evaluator, Slot};
use super::layout::hdr;
use super::spec::{AddrBase, AddrExpr};
use crate::bpf::insn::{op, Asm, Size, R3, R7, R8};
use crate::btf::Btf;
use crate::error::{LinuxError, Result};
pub use dtrace_ebpf::dpath::{
    flag, slot, PathOffsets, Steps, Walk, MAX_PATH_STEPS, NAMES_CAP, NAME_MAX, PATH_SLOT,
};

/// The most `d_path()` paths one probe records.
pub const MAX_PATHS: usize = 4;

/// The walk's offsets from parsed BTF, given the id of `struct task_struct`; `None` when a member
/// is missing.
pub fn offsets_from_btf(btf: &Btf, task: u32) -> Option<PathOffsets> {
    let s = |name: &str| btf.struct_id(name);
    let m = |id: u32, member: &str| btf.member_offset(id, member);
    let (fs, path, dentry) = (s("fs_struct")?, s("path")?, s("dentry")?);
    let (qstr, node, ops) = (s("qstr")?, s("hlist_bl_node")?, s("dentry_operations")?);
    let (inode, sb, fst) = (s("inode")?, s("super_block")?, s("file_system_type")?);
    let (vfsmount, mount) = (s("vfsmount")?, s("mount")?);
    let (files, fdt, file) = (s("files_struct")?, s("fdtable")?, s("file")?);
    Some(PathOffsets {
        task_fs: m(task, "fs")?,
        fs_root: m(fs, "root")?,
        fs_pwd: m(fs, "pwd")?,
        task_files: m(task, "files")?,
        files_fdt: m(files, "fdt")?,
        fdt_fd: m(fdt, "fd")?,
        fdt_max_fds: m(fdt, "max_fds")?,
        f_path: m(file, "f_path")?,
        path_mnt: m(path, "mnt")?,
        path_dentry: m(path, "dentry")?,
        d_parent: m(dentry, "d_parent")?,
        d_name: m(dentry, "d_name")? + m(qstr, "name")?,
        d_hash_pprev: m(dentry, "d_hash")? + m(node, "pprev")?,
        d_op: m(dentry, "d_op")?,
        d_dname: m(ops, "d_dname")?,
        d_inode: m(dentry, "d_inode")?,
        i_ino: m(inode, "i_ino")?,
        d_sb: m(dentry, "d_sb")?,
        s_type: m(sb, "s_type")?,
        fs_name: m(fst, "name")?,
        mnt_root: m(vfsmount, "mnt_root")?,
        mount_mnt: m(mount, "mnt")?,
        mnt_parent: m(mount, "mnt_parent")?,
        mnt_mountpoint: m(mount, "mnt_mountpoint")?,
    })
}

/// Places the path slots of `spec` at `*off` (advancing it), checking the requests' bounds.
pub fn layout_paths(
    spec: &super::spec::CaptureSpec,
    off: &mut usize,
) -> std::result::Result<Vec<usize>, String> {
    if spec.paths.len() > MAX_PATHS {
        return Err(format!(
            "{} d_path() paths requested, at most {MAX_PATHS}",
            spec.paths.len()
        ));
    }
    let mut out = Vec::with_capacity(spec.paths.len());
    for p in &spec.paths {
        if p.derefs.len() > super::spec::MAX_DEREFS {
            return Err(format!(
                "d_path() address of more than {} pointer hops",
                super::spec::MAX_DEREFS
            ));
        }
        if !p.user_derefs.is_empty() {
            return Err("d_path() of a struct path in user memory".into());
        }
        if p.index
            .is_some_and(|i| usize::from(i.arg) >= super::layout::NARGS)
        {
            return Err("d_path() address indexed by an argument past those carried".into());
        }
        match p.base {
            AddrBase::Arg(n) if n < super::layout::NARGS => {}
            AddrBase::CurrentTask => {}
            b => return Err(format!("d_path() of a struct path at {b:?}")),
        }
        out.push(*off);
        *off += PATH_SLOT;
    }
    Ok(out)
}

/// Records the path of the `struct path` at `addr` in the slot at record offset `at`, the walk
/// ending at the record's task's root. Uses R0-R5 and R8; the record is in R7.
pub fn emit_path_walk(a: &mut Asm, o: &PathOffsets, addr: &AddrExpr, at: usize) -> Result<()> {
    let at = i32::try_from(at).map_err(|_| LinuxError::Asm(format!("path slot at {at}")))?;
    a.mov(R8, R7).alu_imm(op::ADD, R8, at);
    let walk = Walk::begin(a);
    // The address of the struct path; a hop that cannot be read, or reads NULL, is no path.
    if !addr.user_derefs.is_empty() {
        return Err(LinuxError::Asm(
            "d_path() of a struct path in user memory".into(),
        ));
    }
    // Neither the context nor a thread-local is a base here, so there is always an address.
    Evaluator::new(
        "d_path() of a struct path",
        Slot {
            base: R8,
            off: slot::TMP,
        },
    )
    .faulting_to(walk.fault())
    .emit(a, addr)?;
    a.store(Size::DW, R8, slot::ADDR, R3);
    a.load(Size::DW, R3, R7, hdr::TASK as i16);
    a.store(Size::DW, R8, slot::TASK, R3);
    walk.finish(a, o, Steps::Unrolled);
    Ok(())
}

/// Why a recorded path cannot be given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// A pointer on the way could not be read (a NULL or stale `struct path`).
    #[error("the path's dentry or mount could not be read")]
    Unreadable,
    /// A pseudo file system whose names we do not make up.
    #[error("pseudo file system {0} names its files itself")]
    Pseudo(String),
    /// The record is inconsistent.
    #[error("bad path record: {0}")]
    Bad(String),
}

/// One recorded path: the `struct path` address and the path, or why there is none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedPath {
    /// Address of the `struct path`.
    pub addr: u64,
    /// The path as `d_path()` prints it.
    pub path: std::result::Result<Vec<u8>, PathError>,
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// Decodes the path slot at `at` of record `b`; `None` when the record is too short.
pub fn decode_path(b: &[u8], at: usize) -> Option<CapturedPath> {
    let slot_bytes = b.get(at..at + PATH_SLOT)?;
    let addr = u64_at(slot_bytes, slot::ADDR as usize)?;
    let flags = u32_at(slot_bytes, slot::FLAGS as usize)?;
    let used = (u32_at(slot_bytes, slot::USED as usize)? as usize).min(NAMES_CAP + NAME_MAX);
    let ino = u64_at(slot_bytes, slot::INO as usize)?;
    let names_area = &slot_bytes[slot::HDR..slot::HDR + used];
    let mut names: Vec<&[u8]> = names_area.split(|c| *c == 0).collect();
    // The area ends with a NUL: the split leaves an empty piece after it.
    if names.last().is_some_and(|n| n.is_empty()) {
        names.pop();
    }
    Some(CapturedPath {
        addr,
        path: assemble(flags, &names, ino),
    })
}

/// The path `d_path()` prints from the names recorded leaf first.
pub fn assemble(flags: u32, names: &[&[u8]], ino: u64) -> std::result::Result<Vec<u8>, PathError> {
    if flags & flag::FAULT != 0 {
        return Err(PathError::Unreadable);
    }
    if flags & flag::PSEUDO != 0 {
        let fs = names.first().copied().unwrap_or_default();
        let leaf = names.get(1).copied().unwrap_or_default();
        let mut out = Vec::new();
        match fs {
            b"pipefs" => out.extend_from_slice(format!("pipe:[{ino}]").as_bytes()),
            b"sockfs" => out.extend_from_slice(format!("socket:[{ino}]").as_bytes()),
            b"anon_inodefs" => {
                out.extend_from_slice(b"anon_inode:");
                out.extend_from_slice(leaf);
            }
            b"pidfs" => out.extend_from_slice(b"anon_inode:[pidfd]"),
            other => {
                return Err(PathError::Pseudo(
                    String::from_utf8_lossy(other).into_owned(),
                ))
            }
        }
        return Ok(out);
    }
    if flags & (flag::DONE | flag::TRUNCATED) == 0 {
        return Err(PathError::Bad(format!("walk ended with flags {flags:#x}")));
    }
    let mut out = Vec::new();
    if flags & flag::TRUNCATED != 0 {
        // Not a path d_path() prints (those start with '/'): the leading part is missing.
        out.extend_from_slice(b"...");
    }
    if flags & flag::ESCAPED == 0 {
        for n in names.iter().rev() {
            out.push(b'/');
            out.extend_from_slice(n);
        }
    }
    if out.is_empty() {
        out.push(b'/');
    }
    if flags & flag::DELETED != 0 {
        out.extend_from_slice(b" (deleted)");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_assemble_as_d_path_prints_them() {
        let ok = |f, n: &[&[u8]]| String::from_utf8(assemble(f, n, 0).unwrap()).unwrap();
        assert_eq!(ok(flag::DONE, &[b"file", b"tmp"]), "/tmp/file");
        assert_eq!(ok(flag::DONE, &[]), "/");
        assert_eq!(
            ok(flag::DONE | flag::DELETED, &[b"x", b"tmp"]),
            "/tmp/x (deleted)"
        );
        assert_eq!(ok(flag::TRUNCATED, &[b"f", b"d"]), ".../d/f");
        assert_eq!(ok(flag::DONE | flag::ESCAPED, &[b"a"]), "/");
        assert_eq!(
            assemble(flag::FAULT | flag::DONE, &[], 0),
            Err(PathError::Unreadable)
        );
        assert!(assemble(0, &[b"a"], 0).is_err());
        let p = |fs: &[u8], leaf: &[u8]| {
            assemble(flag::PSEUDO, &[fs, leaf], 4242).map(|v| String::from_utf8(v).unwrap())
        };
        assert_eq!(p(b"pipefs", b"").unwrap(), "pipe:[4242]");
        assert_eq!(p(b"sockfs", b"TCP").unwrap(), "socket:[4242]");
        assert_eq!(
            p(b"anon_inodefs", b"[eventfd]").unwrap(),
            "anon_inode:[eventfd]"
        );
        assert_eq!(p(b"nsfs", b""), Err(PathError::Pseudo("nsfs".to_string())));
    }

    #[test]
    fn slots_decode() {
        let mut b = vec![0u8; 8 + PATH_SLOT];
        let at = 8;
        b[at..at + 8].copy_from_slice(&0xffff_8880_1234_0000u64.to_le_bytes());
        b[at + 8..at + 12].copy_from_slice(&(flag::DONE | flag::DELETED).to_le_bytes());
        let names = b"passwd\0etc\0";
        b[at + 12..at + 16].copy_from_slice(&(names.len() as u32).to_le_bytes());
        b[at + slot::HDR..at + slot::HDR + names.len()].copy_from_slice(names);
        let p = decode_path(&b, at).unwrap();
        assert_eq!(p.addr, 0xffff_8880_1234_0000);
        assert_eq!(p.path.unwrap(), b"/etc/passwd (deleted)");
        assert!(decode_path(&b, at + 1).is_none());
        // A count past the area is clamped, never read past the slot.
        b[at + 12..at + 16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_path(&b, at).is_some());
    }
}
