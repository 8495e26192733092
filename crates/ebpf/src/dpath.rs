//! `d_path()` at the probe: the bounded walk of a `struct path`'s dentries and mounts that
//! records its names ([`Walk`]), shared by the capture program that records paths for dtrace
//! (`dtrace-linux`'s `capture::path`, which assembles them in dtrace) and by the translated
//! `d_path()` (`translate::d_path`), which assembles them at the probe into a D string
//! ([`emit_assemble`]).
//!
//! A tracepoint program may not call `bpf_d_path()`, so the walk is made by hand, as
//! `fs/d_path.c` makes it: from the path's dentry up its `d_parent` chain, recording each name
//! (leaf first, NUL-separated, each name's length kept beside), crossing a mount at its root
//! dentry to the dentry it is mounted on (`mount.mnt_mountpoint`, in `mount.mnt_parent`; the
//! `struct mount` found from its embedded `vfsmount`), and stopping at the task's root
//! (`task->fs->root`) or at the global root. A path deeper than [`MAX_PATH_STEPS`] or longer than
//! [`NAMES_CAP`] bytes is recorded as truncated, given with a leading `...` (never as a shorter,
//! wrong path); an unlinked file gets `" (deleted)"`; files of pseudo file systems whose names
//! Linux makes up (`d_op->d_dname`) are recorded by file system type and inode: `pipe:[ino]`,
//! `socket:[ino]`, `anon_inode:name`. The walk keeps its state in its slot (not in registers or
//! the stack), so that the verifier sees the same state at every step and the cost of verifying
//! it grows linearly with the bound; the assembly likewise. Both unroll their steps, or run one
//! step in a `bpf_loop` callback ([`Steps`]), which the verifier walks once.

use crate::insn::{helper, op, Asm, Label, Reg, Size, R0, R1, R2, R3, R4, R8, R9};

/// The most steps of one walk: names recorded plus mounts crossed.
pub const MAX_PATH_STEPS: usize = 48;
/// Bytes of names a walk records before it stops (a name starts below this offset).
pub const NAMES_CAP: usize = 1024;
/// The most bytes of one name, its NUL included (Linux's `NAME_MAX` + 1).
pub const NAME_MAX: usize = 256;

/// Slot header field offsets: the `struct path` address, flags, bytes of names, inode number
/// (pseudo files), then the walk's state, the task whose root ends the walk, and the names'
/// count and lengths.
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
    /// The `struct task_struct *` whose `fs->root` ends the walk (set before it).
    pub const TASK: i16 = 80;
    /// The names recorded (a `u32`).
    pub const COUNT: i16 = 88;
    /// Each name's bytes, its NUL included (`u16`s, in recording order).
    pub const LENS: i16 = 96;
    /// Size of the header; the names follow.
    pub const HDR: usize = LENS as usize + 2 * super::MAX_PATH_STEPS;
}

/// Bytes of one path slot.
pub const PATH_SLOT: usize = slot::HDR + NAMES_CAP + NAME_MAX;

/// Flags of a recorded walk.
#[allow(missing_docs)]
pub mod flag {
    /// The walk reached the task's root or the global root.
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

/// `bpf_probe_read_kernel(slot + dst, size, src + src_off)` (R8 holds the slot).
fn rk(a: &mut Asm, dst: i16, size: i32, src: Reg, src_off: u32) {
    a.mov(R3, src).alu_imm(op::ADD, R3, src_off as i32);
    a.mov(R1, R8)
        .alu_imm(op::ADD, R1, i32::from(dst))
        .mov_imm(R2, size)
        .call(helper::PROBE_READ_KERNEL);
}

/// R3 = the pointer at `src + off` (0 when it cannot be read: the helper zeroes its buffer).
fn ptr(a: &mut Asm, src: Reg, off: u32) {
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
/// Jumps to `to` when the slot's dentry is (`op::JEQ`) or is not (`op::JNE`) its own parent
/// (a root). Uses r0-r3.
fn own_parent(a: &mut Asm, o: &PathOffsets, jump: u8, to: Label) {
    a.load(Size::DW, R0, R8, slot::DENTRY);
    ptr(a, R0, o.d_parent);
    a.load(Size::DW, R0, R8, slot::DENTRY);
    a.jmp_reg(jump, R3, R0, to);
}

fn set_flag(a: &mut Asm, f: u32) {
    a.load(Size::W, R0, R8, slot::FLAGS)
        .alu_imm(op::OR, R0, f as i32)
        .store(Size::W, R8, slot::FLAGS, R0);
}

/// Reads the string at the pointer in R3 into the names at offset `used`, adding its length
/// (NUL included) to `used` and to the lengths; jumps to `trunc` when no room is left and to
/// `fault` when it cannot be read.
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
    // Its length, at `lens[count++]` (there is always room: one name a step, two for a pseudo
    // file, which takes no step).
    let full = a.label();
    a.load(Size::W, R2, R8, slot::COUNT);
    a.jmp_imm(op::JGE, R2, MAX_PATH_STEPS as i32, full);
    a.mov(R1, R2).alu_imm(op::ADD, R1, 1);
    a.store(Size::W, R8, slot::COUNT, R1);
    a.alu_imm(op::LSH, R2, 1).alu(op::ADD, R2, R8);
    a.store(Size::H, R2, slot::LENS, R0);
    a.bind(full);
}

/// A walk being emitted: [`Walk::begin`] clears the slot's header, the caller then stores the
/// `struct path` address at [`slot::ADDR`] and the task at [`slot::TASK`] (jumping to
/// [`Walk::fault`] when it cannot have the address), and [`Walk::finish`] emits the walk.
pub struct Walk {
    fault: Label,
}

impl Walk {
    /// Clears the header of the slot whose address is in R8.
    pub fn begin(a: &mut Asm) -> Walk {
        for f in [slot::ADDR, slot::INO, slot::ROOT_DENTRY, slot::ROOT_MNT] {
            a.store_imm(Size::DW, R8, f, 0);
        }
        a.store_imm(Size::W, R8, slot::FLAGS, 0)
            .store_imm(Size::W, R8, slot::USED, 0)
            .store_imm(Size::W, R8, slot::COUNT, 0);
        Walk { fault: a.label() }
    }

    /// Where the caller jumps when the `struct path`'s address cannot be had (no path).
    pub fn fault(&self) -> Label {
        self.fault
    }

    /// The walk of the `struct path` at [`slot::ADDR`] (R8 holds the slot), ending with its
    /// [`flag`]s set, its steps as `steps` says. Uses R0-R5.
    pub fn finish(self, a: &mut Asm, o: &PathOffsets, steps: Steps) {
        let fault = self.fault;
        let (trunc, done, out) = (a.label(), a.label(), a.label());
        // Its mount and dentry.
        a.load(Size::DW, R3, R8, slot::ADDR);
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
        own_parent(a, o, op::JNE, pseudo);
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
        own_parent(a, o, op::JEQ, linked);
        set_flag(a, flag::DELETED);
        a.bind(linked);
        // The task's root (none for a task without an fs_struct: the walk goes to the global
        // root).
        let no_fs = a.label();
        a.load(Size::DW, R0, R8, slot::TASK);
        a.jmp_imm(op::JEQ, R0, 0, no_fs);
        ptr(a, R0, o.task_fs);
        a.jmp_imm(op::JEQ, R3, 0, no_fs);
        read_path(a, o, slot::ROOT_MNT, o.fs_root, no_fs);
        a.bind(no_fs);
        a.load(Size::DW, R0, R8, slot::VFSMNT);
        rk(a, slot::MNT_ROOT, 8, R0, o.mnt_root);
        let escaped = a.label();
        let exits = Exits {
            done,
            trunc,
            escaped,
            fault,
        };
        match steps {
            Steps::Unrolled => {
                for _ in 0..MAX_PATH_STEPS {
                    step(a, o, exits);
                }
            }
            Steps::Looped { ctx, to_slot } => {
                let o = *o;
                a.mov_imm(R1, MAX_PATH_STEPS as i32);
                a.ld_callback(R2, format!("dt_dpath_step_{ctx}_{to_slot}"), move |a| {
                    let exits = Exits {
                        done: a.label(),
                        trunc: a.label(),
                        escaped: a.label(),
                        fault: a.label(),
                    };
                    a.load(Size::DW, R8, R2, 0).alu_imm(op::ADD, R8, to_slot);
                    step(a, &o, exits);
                    a.mov_imm(R0, 0).exit();
                    let stop = a.label();
                    a.bind(exits.trunc);
                    set_flag(a, flag::TRUNCATED);
                    a.ja(stop);
                    a.bind(exits.escaped);
                    set_flag(a, flag::ESCAPED);
                    a.bind(exits.done);
                    set_flag(a, flag::DONE);
                    a.ja(stop);
                    a.bind(exits.fault);
                    set_flag(a, flag::FAULT);
                    a.bind(stop);
                    a.mov_imm(R0, 1).exit();
                });
                a.frame_addr(R3, i32::from(ctx));
                a.mov_imm(R4, 0).call(helper::LOOP);
                // Ended by a step, or too deep.
                a.load(Size::W, R0, R8, slot::FLAGS);
                a.alu_imm(
                    op::AND,
                    R0,
                    (flag::DONE | flag::TRUNCATED | flag::FAULT) as i32,
                );
                a.jmp_imm(op::JNE, R0, 0, out);
            }
        }
        a.bind(trunc);
        set_flag(a, flag::TRUNCATED);
        a.ja(out);
        // Only the unrolled steps come here (the verifier refuses code nothing reaches).
        if steps == Steps::Unrolled {
            a.bind(escaped);
            set_flag(a, flag::ESCAPED);
        }
        a.bind(done);
        set_flag(a, flag::DONE);
        a.ja(out);
        a.bind(fault);
        set_flag(a, flag::FAULT);
        a.bind(out);
    }
}

/// How a walk's steps (or an assembly's names) are emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steps {
    /// One after the other, [`MAX_PATH_STEPS`] of them.
    Unrolled,
    /// One, in a `bpf_loop` callback run [`MAX_PATH_STEPS`] times at most (the verifier walks it
    /// once): the callback finds the slot `to_slot` bytes past the pointer at `ctx` in the
    /// frame.
    Looped {
        /// The frame offset of the pointer.
        ctx: i16,
        /// The slot's offset from it.
        to_slot: i32,
    },
}

/// Where a step goes when the walk ends.
#[derive(Clone, Copy)]
struct Exits {
    done: Label,
    trunc: Label,
    escaped: Label,
    fault: Label,
}

/// One step of the walk (the slot in R8): done at the task's root or the global root, across a
/// mount at its root, else a name recorded and up to the parent.
fn step(a: &mut Asm, o: &PathOffsets, x: Exits) {
    let (next, not_root, not_mnt_root) = (a.label(), a.label(), a.label());
    // At the task's root: done.
    a.load(Size::DW, R0, R8, slot::DENTRY);
    a.load(Size::DW, R1, R8, slot::ROOT_DENTRY);
    a.jmp_reg(op::JNE, R0, R1, not_root);
    a.load(Size::DW, R0, R8, slot::VFSMNT);
    a.load(Size::DW, R1, R8, slot::ROOT_MNT);
    a.jmp_reg(op::JEQ, R0, R1, x.done);
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
    a.jmp_reg(op::JEQ, R3, R0, x.done);
    a.jmp_imm(op::JEQ, R3, 0, x.fault);
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
    a.jmp_reg(op::JEQ, R3, R0, x.escaped);
    a.jmp_imm(op::JEQ, R3, 0, x.fault);
    ptr(a, R0, o.d_name);
    append_name(a, x.trunc, x.fault);
    a.load(Size::DW, R0, R8, slot::PARENT);
    a.store(Size::DW, R8, slot::DENTRY, R0);
    a.bind(next);
}

/// Where the assembly keeps its positions in the slot, once the walk no longer needs it: the
/// length of the prefix (`...`), the end of the path so far, the offset of the next name.
const PREFIX: i16 = slot::VFSMNT;
const END: i16 = slot::DENTRY;
const NEXT: i16 = slot::PARENT;
/// Where a pseudo file's inode number is written (its digits end there), after the two names it
/// records.
const DIGITS_END: usize = slot::HDR + NAMES_CAP + 24;

/// Bytes at and after the path's first byte that the assembly's copies may reach, as the
/// verifier bounds them (each copy's largest start plus its largest size): the result's area
/// must be this wide, the string's own storage (`most + 1`) first.
pub fn assembly_reach(most: usize) -> usize {
    2 * most
}

/// Assembles the path the walk recorded in the slot at R8 into the string at `R8 - before`: as
/// `d_path()` prints it, cut to its first `most` bytes (the string is zeroed before: it stays
/// NUL-terminated). Jumps to `no_path` when the walk found none (a pointer it could not read, a
/// pseudo file system whose names are not made up here), where the interpreter faults. The path
/// is written back to front as `fs/d_path.c`'s `prepend` writes it, each part where it goes in
/// the whole path and only what falls within the first `most` bytes (see [`assembly_reach`]).
/// The names are put as `steps` says (the callback uses R9 too). Uses R0-R5.
pub fn emit_assemble(a: &mut Asm, most: i32, before: i32, no_path: Label, steps: Steps) {
    let (pseudo, out) = (a.label(), a.label());
    a.load(Size::W, R0, R8, slot::FLAGS);
    a.jmp_imm(op::JSET, R0, flag::FAULT as i32, no_path);
    a.jmp_imm(op::JSET, R0, flag::PSEUDO as i32, pseudo);
    a.mov(R1, R0)
        .alu_imm(op::AND, R1, (flag::DONE | flag::TRUNCATED) as i32);
    a.jmp_imm(op::JEQ, R1, 0, no_path);
    // The prefix of a truncated path.
    let (prefix, names) = (a.label(), a.label());
    a.store_imm(Size::DW, R8, PREFIX, 0);
    a.jmp_imm(op::JSET, R0, flag::TRUNCATED as i32, prefix);
    a.ja(names);
    a.bind(prefix);
    put_const(a, most, before, None, b"...");
    a.store_imm(Size::DW, R8, PREFIX, 3);
    a.bind(names);
    // The names, leaf first, each ending where the names after it (towards the root) start.
    let names_done = a.label();
    a.load(Size::DW, R0, R8, PREFIX);
    a.store(Size::DW, R8, END, R0);
    a.load(Size::W, R1, R8, slot::FLAGS);
    a.jmp_imm(op::JSET, R1, flag::ESCAPED as i32, names_done);
    a.load(Size::W, R1, R8, slot::USED);
    a.alu(op::ADD, R0, R1).store(Size::DW, R8, END, R0);
    a.store_imm(Size::DW, R8, NEXT, 0);
    match steps {
        Steps::Unrolled => {
            for i in 0..MAX_PATH_STEPS {
                a.load(Size::W, R0, R8, slot::COUNT);
                a.jmp_imm(op::JLE, R0, i as i32, names_done);
                let len = move |a: &mut Asm, dst: Reg| {
                    a.load(Size::H, dst, R8, slot::LENS + 2 * i as i16);
                };
                put_name(a, most, before, len);
            }
        }
        Steps::Looped { ctx, to_slot } => {
            a.mov_imm(R1, MAX_PATH_STEPS as i32);
            let name = format!("dt_dpath_name_{ctx}_{to_slot}_{most}_{before}");
            a.ld_callback(R2, name, move |a| {
                let stop = a.label();
                a.load(Size::DW, R8, R2, 0).alu_imm(op::ADD, R8, to_slot);
                // R9: the name's index.
                a.mov(R9, R1);
                a.load(Size::W, R0, R8, slot::COUNT);
                a.jmp_reg(op::JGE, R9, R0, stop);
                a.jmp_imm(op::JGE, R9, MAX_PATH_STEPS as i32, stop);
                let len = |a: &mut Asm, dst: Reg| {
                    a.mov(dst, R9)
                        .alu_imm(op::LSH, dst, 1)
                        .alu(op::ADD, dst, R8);
                    a.load(Size::H, dst, dst, slot::LENS);
                };
                put_name(a, most, before, len);
                a.mov_imm(R0, 0).exit();
                a.bind(stop);
                a.mov_imm(R0, 1).exit();
            });
            a.frame_addr(R3, i32::from(ctx));
            a.mov_imm(R4, 0).call(helper::LOOP);
        }
    }
    a.bind(names_done);
    // Nothing (the root, or a walk that escaped it): "/".
    let some = a.label();
    a.load(Size::DW, R0, R8, END);
    a.jmp_imm(op::JNE, R0, 0, some);
    put_const(a, most, before, None, b"/");
    a.store_imm(Size::DW, R8, END, 1);
    a.bind(some);
    a.load(Size::W, R0, R8, slot::FLAGS);
    a.alu_imm(op::AND, R0, flag::DELETED as i32);
    a.jmp_imm(op::JEQ, R0, 0, out);
    put_const(a, most, before, Some(END), b" (deleted)");
    a.ja(out);
    // A pseudo file: its file system type names it.
    a.bind(pseudo);
    let (not_pipe, not_socket, not_anon, not_pidfs) = (a.label(), a.label(), a.label(), a.label());
    name_is(a, b"pipefs", not_pipe);
    put_inode(a, most, before, b"pipe:[");
    a.ja(out);
    a.bind(not_pipe);
    name_is(a, b"sockfs", not_socket);
    put_inode(a, most, before, b"socket:[");
    a.ja(out);
    a.bind(not_socket);
    name_is(a, b"anon_inodefs", not_anon);
    put_const(a, most, before, None, b"anon_inode:");
    // The leaf's name, the second recorded.
    a.load(Size::W, R0, R8, slot::COUNT);
    a.jmp_imm(op::JLT, R0, 2, out);
    a.load(Size::H, R3, R8, slot::LENS);
    a.jmp_imm(op::JGT, R3, NAME_MAX as i32, out);
    a.alu_imm(op::ADD, R3, slot::HDR as i32)
        .alu(op::ADD, R3, R8);
    a.load(Size::H, R2, R8, slot::LENS + 2);
    a.jmp_imm(op::JEQ, R2, 0, out);
    a.alu_imm(op::SUB, R2, 1);
    a.mov_imm(R1, 11);
    put(a, most, before);
    a.ja(out);
    a.bind(not_anon);
    name_is(a, b"pidfs", not_pidfs);
    put_const(a, most, before, None, b"anon_inode:[pidfd]");
    a.ja(out);
    a.bind(not_pidfs);
    a.ja(no_path);
    a.bind(out);
}

/// The next name (at `NEXT` of the names; `len` loads its bytes, NUL included, into a
/// register) with its '/', where it goes: it ends where the names after it (towards the root)
/// start, at `END - NEXT`.
fn put_name(a: &mut Asm, most: i32, before: i32, len: impl Fn(&mut Asm, Reg)) {
    len(a, R4);
    a.load(Size::DW, R1, R8, END);
    a.load(Size::DW, R0, R8, NEXT);
    a.alu(op::SUB, R1, R0).alu(op::SUB, R1, R4);
    a.store(Size::DW, R8, slot::TMP, R1);
    put_byte(a, most, before, b'/');
    a.load(Size::DW, R1, R8, slot::TMP).alu_imm(op::ADD, R1, 1);
    len(a, R2);
    a.alu_imm(op::SUB, R2, 1);
    let past = a.label();
    a.load(Size::DW, R3, R8, NEXT);
    a.jmp_imm(op::JGT, R3, (NAMES_CAP + NAME_MAX) as i32, past);
    a.alu_imm(op::ADD, R3, slot::HDR as i32)
        .alu(op::ADD, R3, R8);
    put(a, most, before);
    a.bind(past);
    a.load(Size::DW, R0, R8, NEXT);
    len(a, R4);
    a.alu(op::ADD, R0, R4).store(Size::DW, R8, NEXT, R0);
}

/// Jumps to `no` unless the first name recorded is `name`.
fn name_is(a: &mut Asm, name: &[u8], no: Label) {
    for (j, c) in name.iter().chain(&[0]).enumerate() {
        a.load(Size::B, R0, R8, (slot::HDR + j) as i16);
        a.jmp_imm(op::JNE, R0, i32::from(*c), no);
    }
}

/// The byte `c` at the path's position in R1, when it is among its first `most` bytes.
fn put_byte(a: &mut Asm, most: i32, before: i32, c: u8) {
    let skip = a.label();
    a.jmp_imm(op::JGE, R1, most, skip);
    a.alu(op::ADD, R1, R8);
    a.store_imm(Size::B, R1, -(before as i16), i32::from(c));
    a.bind(skip);
}

/// `text` at the path's position held at `at` in the slot (`None`: 0), byte by byte.
fn put_const(a: &mut Asm, most: i32, before: i32, at: Option<i16>, text: &[u8]) {
    for (j, c) in text.iter().enumerate() {
        match at {
            Some(at) => {
                a.load(Size::DW, R1, R8, at);
                a.alu_imm(op::ADD, R1, j as i32);
                put_byte(a, most, before, *c);
            }
            // A position known here: the byte is stored or not.
            None if (j as i32) < most => {
                a.store_imm(Size::B, R8, j as i16 - before as i16, i32::from(*c));
            }
            None => {}
        }
    }
}

/// R2 bytes from the address in R3 at the path's position in R1, as much of them as falls
/// within its first `most` bytes.
fn put(a: &mut Asm, most: i32, before: i32) {
    let (skip, fits) = (a.label(), a.label());
    a.jmp_imm(op::JGE, R1, most, skip);
    a.mov_imm(R4, most).alu(op::SUB, R4, R1);
    a.jmp_reg(op::JLE, R2, R4, fits);
    a.mov(R2, R4);
    a.bind(fits);
    a.jmp_imm(op::JEQ, R2, 0, skip);
    a.jmp_imm(op::JGT, R2, most, skip);
    a.alu(op::ADD, R1, R8).alu_imm(op::SUB, R1, before);
    a.call(helper::PROBE_READ_KERNEL);
    a.bind(skip);
}

/// `prefix`, the inode number in decimal, then `]`: a pipe's or a socket's name.
fn put_inode(a: &mut Asm, most: i32, before: i32, prefix: &[u8]) {
    put_const(a, most, before, None, prefix);
    // The digits, right to left, ending at DIGITS_END; R4 counts them.
    let spent = a.label();
    a.load(Size::DW, R1, R8, slot::INO);
    a.mov(R3, R8).alu_imm(op::ADD, R3, DIGITS_END as i32);
    a.mov_imm(R4, 0);
    for _ in 0..20 {
        a.mov(R2, R1).alu_imm(op::MOD, R2, 10);
        a.alu_imm(op::ADD, R2, i32::from(b'0'));
        a.alu_imm(op::SUB, R3, 1).alu_imm(op::ADD, R4, 1);
        a.store(Size::B, R3, 0, R2);
        a.alu_imm(op::DIV, R1, 10);
        a.jmp_imm(op::JEQ, R1, 0, spent);
    }
    a.bind(spent);
    a.store(Size::DW, R8, slot::TMP, R4);
    a.mov_imm(R1, prefix.len() as i32).mov(R2, R4);
    put(a, most, before);
    a.load(Size::DW, R1, R8, slot::TMP);
    a.alu_imm(op::ADD, R1, prefix.len() as i32);
    put_byte(a, most, before, b']');
}
