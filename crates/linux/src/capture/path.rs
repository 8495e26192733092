//! Paths of `struct path` objects recorded at the probe, for `d_path()` (and through it `cwd`,
//! `root` and `fileinfo_t`'s `fi_pathname`): the kernel offsets the walk needs ([`PathOffsets`],
//! from BTF), the bounded walk the capture program makes ([`emit_path_walk`]) and the assembly of
//! the recorded components into the path Linux's `d_path()` prints ([`decode_path`]).
//!
//! A tracepoint program may not call `bpf_d_path()`, so the walk is made by hand, as
//! `fs/d_path.c` makes it: from the path's dentry up its `d_parent` chain, recording each name
//! (leaf first, NUL-separated), crossing a mount at its root dentry to the dentry it is mounted on
//! (`mount.mnt_mountpoint`, in `mount.mnt_parent`; the `struct mount` found from its embedded
//! `vfsmount`), and stopping at the current process's root (`current->fs->root`) or at the global
//! root. A path deeper than [`MAX_PATH_STEPS`] or longer than [`NAMES_CAP`] bytes is recorded as
//! truncated and delivered with a leading `...` (never as a shorter, wrong path); an unlinked
//! file gets `" (deleted)"`; files of pseudo file systems whose names Linux makes up
//! (`d_op->d_dname`) are recorded by file system type and inode: `pipe:[ino]`, `socket:[ino]`,
//! `anon_inode:name`. The walk keeps its state in the record slot (not in registers or the
//! stack), so that the verifier sees the same state at every step and the cost of verifying it
//! grows linearly with the bound.

use super::address::{Evaluator, Slot};
use super::layout::hdr;
use super::spec::{AddrBase, AddrExpr};
use crate::bpf::insn::{helper, op, Asm, Label, Size, R0, R1, R2, R3, R7, R8};
use crate::btf::Btf;
use crate::error::{LinuxError, Result};

/// The most `d_path()` paths one probe records.
pub const MAX_PATHS: usize = 4;
/// The most steps of one walk: names recorded plus mounts crossed.
pub const MAX_PATH_STEPS: usize = 48;
/// Bytes of names a walk records before it stops (a name starts below this offset).
pub const NAMES_CAP: usize = 1024;
/// The most bytes of one name, its NUL included (Linux's `NAME_MAX` + 1).
pub const NAME_MAX: usize = 256;

/// Slot header field offsets: the `struct path` address, flags, bytes of names, inode number
/// (pseudo files), then the walk's state.
#[allow(missing_docs)]
pub mod slot {
    pub const ADDR: i16 = 0;
    pub const FLAGS: i16 = 8;
    pub const USED: i16 = 12;
    pub const INO: i16 = 16;
    /// `VFSMNT`/`DENTRY` and `ROOT_MNT`/`ROOT_DENTRY` are laid out as a `struct path` is (mount
    /// first), so that each pair is read with one copy where the kernel's layout allows.
    pub const VFSMNT: i16 = 24;
    pub const DENTRY: i16 = 32;
    pub const ROOT_MNT: i16 = 40;
    pub const ROOT_DENTRY: i16 = 48;
    pub const PARENT: i16 = 56;
    pub const TMP: i16 = 64;
    /// The current mount's root dentry (read again only when the walk crosses a mount).
    pub const MNT_ROOT: i16 = 72;
    /// Size of the header; the names follow.
    pub const HDR: usize = 80;
}

/// Bytes of one path slot in a record.
pub const PATH_SLOT: usize = slot::HDR + NAMES_CAP + NAME_MAX;

/// Flags of a recorded walk.
#[allow(missing_docs)]
pub mod flag {
    /// The walk reached the process's root or the global root.
    pub const DONE: u32 = 1;
    /// Too deep or too long: the names recorded are the leaf end of the path.
    pub const TRUNCATED: u32 = 2;
    /// The leaf is unlinked.
    pub const DELETED: u32 = 4;
    /// A pseudo file: names are the file system type and the leaf's name, with the inode.
    pub const PSEUDO: u32 = 8;
    /// The walk met a dentry that is its own parent outside a mount's root (Linux prints "/").
    pub const ESCAPED: u32 = 16;
    /// A pointer could not be read: no path.
    pub const FAULT: u32 = 32;
}

/// Kernel structure offsets the walk reads (from BTF).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathOffsets {
    /// `task_struct.fs`.
    pub task_fs: u32,
    /// `fs_struct.root`.
    pub fs_root: u32,
    /// `fs_struct.pwd`.
    pub fs_pwd: u32,
    /// `task_struct.files`.
    pub task_files: u32,
    /// `files_struct.fdt`.
    pub files_fdt: u32,
    /// `fdtable.fd` (the `struct file **` array).
    pub fdt_fd: u32,
    /// `fdtable.max_fds`.
    pub fdt_max_fds: u32,
    /// `file.f_path`.
    pub f_path: u32,
    /// `path.mnt`.
    pub path_mnt: u32,
    /// `path.dentry`.
    pub path_dentry: u32,
    /// `dentry.d_parent`.
    pub d_parent: u32,
    /// `dentry.d_name.name`.
    pub d_name: u32,
    /// `dentry.d_hash.pprev` (NULL when the dentry is unhashed).
    pub d_hash_pprev: u32,
    /// `dentry.d_op`.
    pub d_op: u32,
    /// `dentry_operations.d_dname`.
    pub d_dname: u32,
    /// `dentry.d_inode`.
    pub d_inode: u32,
    /// `inode.i_ino`.
    pub i_ino: u32,
    /// `dentry.d_sb`.
    pub d_sb: u32,
    /// `super_block.s_type`.
    pub s_type: u32,
    /// `file_system_type.name`.
    pub fs_name: u32,
    /// `vfsmount.mnt_root`.
    pub mnt_root: u32,
    /// `mount.mnt` (the embedded `vfsmount`).
    pub mount_mnt: u32,
    /// `mount.mnt_parent`.
    pub mnt_parent: u32,
    /// `mount.mnt_mountpoint`.
    pub mnt_mountpoint: u32,
}

impl PathOffsets {
    /// From parsed BTF, given the id of `struct task_struct`; `None` when a member is missing.
    pub fn from_btf(btf: &Btf, task: u32) -> Option<PathOffsets> {
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

/// `bpf_probe_read_kernel(slot + dst, size, src + src_off)` (R8 holds the slot).
fn rk(a: &mut Asm, dst: i16, size: i32, src: crate::bpf::Reg, src_off: u32) {
    a.mov(R3, src).alu_imm(op::ADD, R3, src_off as i32);
    a.mov(R1, R8)
        .alu_imm(op::ADD, R1, i32::from(dst))
        .mov_imm(R2, size)
        .call(helper::PROBE_READ_KERNEL);
}

/// R3 = the pointer at `src + off` (0 when it cannot be read: the helper zeroes its buffer).
fn ptr(a: &mut Asm, src: crate::bpf::Reg, off: u32) {
    rk(a, slot::TMP, 8, src, off);
    a.load(Size::DW, R3, R8, slot::TMP);
}

/// Reads the `struct path` at R3 + `at` (mount, dentry) into the slot's pair at `dst`, jumping to
/// `fail` when it cannot be read. One copy when the kernel keeps the two pointers side by side.
fn read_path(a: &mut Asm, o: &PathOffsets, dst: i16, at: u32, fail: Label) {
    a.store(Size::DW, R8, slot::TMP, R3);
    if o.path_dentry == o.path_mnt + 8 {
        a.load(Size::DW, R0, R8, slot::TMP);
        rk(a, dst, 16, R0, at + o.path_mnt);
        a.jmp_imm(op::JNE, R0, 0, fail);
        return;
    }
    a.load(Size::DW, R0, R8, slot::TMP);
    rk(a, dst, 8, R0, at + o.path_mnt);
    a.jmp_imm(op::JNE, R0, 0, fail);
    a.load(Size::DW, R0, R8, slot::TMP);
    rk(a, dst + 8, 8, R0, at + o.path_dentry);
    a.jmp_imm(op::JNE, R0, 0, fail);
}

/// `flags |= f`.
fn set_flag(a: &mut Asm, f: u32) {
    a.load(Size::W, R0, R8, slot::FLAGS)
        .alu_imm(op::OR, R0, f as i32)
        .store(Size::W, R8, slot::FLAGS, R0);
}

/// Reads the string at the pointer in R3 into the names at offset `used`, adding its length
/// (NUL included) to `used`; jumps to `trunc` when no room is left and to `fault` when it cannot be
/// read.
fn append_name(a: &mut Asm, trunc: Label, fault: Label) {
    a.store(Size::DW, R8, slot::TMP, R3);
    a.load(Size::W, R2, R8, slot::USED);
    a.jmp_imm(op::JGE, R2, NAMES_CAP as i32, trunc);
    a.mov(R1, R8)
        .alu_imm(op::ADD, R1, slot::HDR as i32)
        .alu(op::ADD, R1, R2);
    a.load(Size::DW, R3, R8, slot::TMP)
        .mov_imm(R2, NAME_MAX as i32)
        .call(helper::PROBE_READ_KERNEL_STR);
    a.jmp_imm(op::JSLE, R0, 0, fault);
    a.load(Size::W, R2, R8, slot::USED)
        .alu(op::ADD, R2, R0)
        .store(Size::W, R8, slot::USED, R2);
}

/// Records the path of the `struct path` at `addr` in the slot at record offset `at`. Uses R0-R5 and
/// R8; the record is in R7.
pub fn emit_path_walk(a: &mut Asm, o: &PathOffsets, addr: &AddrExpr, at: usize) -> Result<()> {
    let at = i32::try_from(at).map_err(|_| LinuxError::Asm(format!("path slot at {at}")))?;
    a.mov(R8, R7).alu_imm(op::ADD, R8, at);
    for f in [slot::ADDR, slot::INO, slot::ROOT_DENTRY, slot::ROOT_MNT] {
        a.store_imm(Size::DW, R8, f, 0);
    }
    a.store_imm(Size::W, R8, slot::FLAGS, 0)
        .store_imm(Size::W, R8, slot::USED, 0);
    let (fault, trunc, done, out) = (a.label(), a.label(), a.label(), a.label());
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
    .faulting_to(fault)
    .emit(a, addr)?;
    a.store(Size::DW, R8, slot::ADDR, R3);
    // Its mount and dentry.
    read_path(a, o, slot::VFSMNT, 0, fault);
    a.load(Size::DW, R0, R8, slot::VFSMNT);
    a.jmp_imm(op::JEQ, R0, 0, fault);
    a.load(Size::DW, R0, R8, slot::DENTRY);
    a.jmp_imm(op::JEQ, R0, 0, fault);
    // A pseudo file whose name Linux makes up (d_op->d_dname), unless it is its mount's root.
    let (plain, pseudo) = (a.label(), a.label());
    a.load(Size::DW, R0, R8, slot::DENTRY);
    ptr(a, R0, o.d_op);
    a.jmp_imm(op::JEQ, R3, 0, plain);
    ptr(a, R3, o.d_dname);
    a.jmp_imm(op::JEQ, R3, 0, plain);
    a.load(Size::DW, R0, R8, slot::DENTRY);
    ptr(a, R0, o.d_parent);
    a.load(Size::DW, R0, R8, slot::DENTRY);
    a.jmp_reg(op::JNE, R3, R0, pseudo);
    a.load(Size::DW, R0, R8, slot::VFSMNT);
    ptr(a, R0, o.mnt_root);
    a.load(Size::DW, R0, R8, slot::DENTRY);
    a.jmp_reg(op::JEQ, R3, R0, plain);
    a.bind(pseudo);
    set_flag(a, flag::PSEUDO);
    let no_inode = a.label();
    a.load(Size::DW, R0, R8, slot::DENTRY);
    ptr(a, R0, o.d_inode);
    a.jmp_imm(op::JEQ, R3, 0, no_inode);
    rk(a, slot::INO, 8, R3, o.i_ino);
    a.bind(no_inode);
    a.load(Size::DW, R0, R8, slot::DENTRY);
    ptr(a, R0, o.d_sb);
    a.jmp_imm(op::JEQ, R3, 0, fault);
    ptr(a, R3, o.s_type);
    a.jmp_imm(op::JEQ, R3, 0, fault);
    ptr(a, R3, o.fs_name);
    append_name(a, trunc, fault);
    a.load(Size::DW, R0, R8, slot::DENTRY);
    ptr(a, R0, o.d_name);
    append_name(a, trunc, fault);
    a.ja(done);
    a.bind(plain);
    // Unlinked: unhashed and not a root.
    let linked = a.label();
    a.load(Size::DW, R0, R8, slot::DENTRY);
    ptr(a, R0, o.d_hash_pprev);
    a.jmp_imm(op::JNE, R3, 0, linked);
    a.load(Size::DW, R0, R8, slot::DENTRY);
    ptr(a, R0, o.d_parent);
    a.load(Size::DW, R0, R8, slot::DENTRY);
    a.jmp_reg(op::JEQ, R3, R0, linked);
    set_flag(a, flag::DELETED);
    a.bind(linked);
    // The process's root (none for a task without an fs_struct: the walk goes to the global root).
    let no_fs = a.label();
    a.load(Size::DW, R0, R7, hdr::TASK as i16);
    ptr(a, R0, o.task_fs);
    a.jmp_imm(op::JEQ, R3, 0, no_fs);
    read_path(a, o, slot::ROOT_MNT, o.fs_root, no_fs);
    a.bind(no_fs);
    a.load(Size::DW, R0, R8, slot::VFSMNT);
    rk(a, slot::MNT_ROOT, 8, R0, o.mnt_root);
    let escaped = a.label();
    for _ in 0..MAX_PATH_STEPS {
        let (next, not_root, not_mnt_root) = (a.label(), a.label(), a.label());
        // At the process's root: done.
        a.load(Size::DW, R0, R8, slot::DENTRY);
        a.load(Size::DW, R1, R8, slot::ROOT_DENTRY);
        a.jmp_reg(op::JNE, R0, R1, not_root);
        a.load(Size::DW, R0, R8, slot::VFSMNT);
        a.load(Size::DW, R1, R8, slot::ROOT_MNT);
        a.jmp_reg(op::JEQ, R0, R1, done);
        a.bind(not_root);
        // At the root of a mount: on to where it is mounted, or done at the global root.
        a.load(Size::DW, R3, R8, slot::MNT_ROOT);
        a.load(Size::DW, R0, R8, slot::DENTRY);
        a.jmp_reg(op::JNE, R3, R0, not_mnt_root);
        a.load(Size::DW, R0, R8, slot::VFSMNT);
        a.alu_imm(op::SUB, R0, o.mount_mnt as i32);
        a.store(Size::DW, R8, slot::PARENT, R0);
        ptr(a, R0, o.mnt_parent);
        a.load(Size::DW, R0, R8, slot::PARENT);
        a.jmp_reg(op::JEQ, R3, R0, done);
        a.jmp_imm(op::JEQ, R3, 0, fault);
        a.alu_imm(op::ADD, R3, o.mount_mnt as i32);
        a.store(Size::DW, R8, slot::VFSMNT, R3);
        rk(a, slot::MNT_ROOT, 8, R3, o.mnt_root);
        a.load(Size::DW, R0, R8, slot::PARENT);
        rk(a, slot::DENTRY, 8, R0, o.mnt_mountpoint);
        a.ja(next);
        a.bind(not_mnt_root);
        // A name, then up to the parent.
        a.load(Size::DW, R0, R8, slot::DENTRY);
        ptr(a, R0, o.d_parent);
        a.store(Size::DW, R8, slot::PARENT, R3);
        a.load(Size::DW, R0, R8, slot::DENTRY);
        a.jmp_reg(op::JEQ, R3, R0, escaped);
        a.jmp_imm(op::JEQ, R3, 0, fault);
        ptr(a, R0, o.d_name);
        append_name(a, trunc, fault);
        a.load(Size::DW, R0, R8, slot::PARENT);
        a.store(Size::DW, R8, slot::DENTRY, R0);
        a.bind(next);
    }
    a.bind(trunc);
    set_flag(a, flag::TRUNCATED);
    a.ja(out);
    a.bind(escaped);
    set_flag(a, flag::ESCAPED);
    a.bind(done);
    set_flag(a, flag::DONE);
    a.ja(out);
    a.bind(fault);
    set_flag(a, flag::FAULT);
    a.bind(out);
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
