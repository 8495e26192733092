//! `d_path()` at the probe, checked against the interpreter over a made-up kernel (dentries,
//! mounts, the task's root, pseudo files, laid out at offsets of the test's own), its steps in
//! `bpf_loop` callbacks and unrolled: the string it builds is measured and compared with the path the interpreter is given (the capture's) and
//! with its prefixes, at D's default `strsize` and at sizes that cut it in each of its parts;
//! an address the walk cannot read, or a pseudo file system whose names are not made up,
//! faults as the interpreter's `d_path()` faults on a path it was not given.

use super::strbuild::{agree, builds};
use super::*;
use crate::dpath::PathOffsets;

/// Where the made-up kernel's objects are.
const WORLD: u64 = 0xffff_9000_0000_0000;

/// The made-up kernel's layout: a `struct mount` is its parent, its mount point, then its
/// `vfsmount` (whose first member is its root dentry).
const OFFSETS: PathOffsets = PathOffsets {
    task_fs: 0,
    fs_root: 0,
    fs_pwd: 16,
    task_files: 8,
    files_fdt: 0,
    fdt_fd: 0,
    fdt_max_fds: 8,
    f_path: 0,
    path_mnt: 0,
    path_dentry: 8,
    d_parent: 0,
    d_name: 8,
    d_hash_pprev: 16,
    d_op: 24,
    d_inode: 32,
    d_sb: 40,
    d_dname: 8,
    i_ino: 16,
    s_type: 0,
    fs_name: 0,
    mnt_root: 0,
    mount_mnt: 16,
    mnt_parent: 0,
    mnt_mountpoint: 8,
};

/// The made-up kernel's memory, allocated upwards from [`WORLD`].
#[derive(Default)]
struct World {
    bytes: Vec<u8>,
}

impl World {
    fn alloc(&mut self, n: usize) -> u64 {
        let at = self.bytes.len();
        self.bytes.resize(at + n.next_multiple_of(8), 0);
        WORLD + at as u64
    }

    fn set(&mut self, addr: u64, off: u32, v: u64) {
        let at = (addr - WORLD) as usize + off as usize;
        self.bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }

    fn string(&mut self, s: &str) -> u64 {
        let at = self.alloc(s.len() + 1);
        let o = (at - WORLD) as usize;
        self.bytes[o..o + s.len()].copy_from_slice(s.as_bytes());
        at
    }

    /// A hashed dentry named `name` under `parent` (its own parent when none).
    fn dentry(&mut self, parent: Option<u64>, name: &str) -> u64 {
        let d = self.alloc(48);
        let n = self.string(name);
        self.set(d, OFFSETS.d_parent, parent.unwrap_or(d));
        self.set(d, OFFSETS.d_name, n);
        self.set(d, OFFSETS.d_hash_pprev, 1);
        d
    }

    /// A mount of `root` on `mountpoint` of the mount whose `vfsmount` is `parent` (its own
    /// parent when none): the address of its `vfsmount`.
    fn mount(&mut self, parent: Option<u64>, mountpoint: u64, root: u64) -> u64 {
        let m = self.alloc(24);
        let vfs = m + u64::from(OFFSETS.mount_mnt);
        let parent = parent.map_or(m, |p| p - u64::from(OFFSETS.mount_mnt));
        self.set(m, OFFSETS.mnt_parent, parent);
        self.set(m, OFFSETS.mnt_mountpoint, mountpoint);
        self.set(vfs, OFFSETS.mnt_root, root);
        vfs
    }

    /// A `struct path`.
    fn path(&mut self, mnt: u64, dentry: u64) -> u64 {
        let p = self.alloc(16);
        self.set(p, OFFSETS.path_mnt, mnt);
        self.set(p, OFFSETS.path_dentry, dentry);
        p
    }

    /// A file of pseudo file system `fs` named `name` (by the file system's root), inode `ino`.
    fn pseudo(&mut self, fs: &str, name: &str, ino: u64) -> u64 {
        let root = self.dentry(None, "/");
        let d = self.dentry(Some(root), name);
        let ops = self.alloc(16);
        self.set(ops, OFFSETS.d_dname, 0xffff_ffff_8100_0000);
        self.set(d, OFFSETS.d_op, ops);
        let inode = self.alloc(24);
        self.set(inode, OFFSETS.i_ino, ino);
        self.set(d, OFFSETS.d_inode, inode);
        let fst = self.alloc(8);
        let fs_name = self.string(fs);
        self.set(fst, OFFSETS.fs_name, fs_name);
        let sb = self.alloc(8);
        self.set(sb, OFFSETS.s_type, fst);
        self.set(d, OFFSETS.d_sb, sb);
        let mnt = self.mount(None, root, root);
        self.path(mnt, d)
    }
}

/// The made-up kernel's paths: (the `struct path`'s address, the path the interpreter is given,
/// none where it faults), and the probe whose current task's root is `/`, or `/etc` when
/// `chrooted`.
fn world(chrooted: bool) -> (Probe, Vec<(u64, Option<String>)>) {
    let mut w = World::default();
    let root = w.dentry(None, "/");
    let m0 = w.mount(None, root, root);
    let etc = w.dentry(Some(root), "etc");
    let passwd = w.dentry(Some(etc), "passwd");
    let gone = w.dentry(Some(etc), "gone");
    w.set(gone, OFFSETS.d_hash_pprev, 0);
    let mnt = w.dentry(Some(root), "mnt");
    let r1 = w.dentry(None, "/");
    let m1 = w.mount(Some(m0), mnt, r1);
    let f = w.dentry(Some(r1), "f.txt");
    let empty = w.dentry(Some(etc), "");
    let mut deep = root;
    for i in 0..59 {
        deep = w.dentry(Some(deep), &format!("d{i}"));
    }
    let leaf = w.dentry(Some(deep), "leaf");
    let fs = w.alloc(32);
    w.set(fs, OFFSETS.fs_root + OFFSETS.path_mnt, m0);
    w.set(
        fs,
        OFFSETS.fs_root + OFFSETS.path_dentry,
        if chrooted { etc } else { root },
    );
    let in_root = |s: &str| {
        if chrooted {
            s.strip_prefix("/etc")
                .map(|s| if s.is_empty() { "/" } else { s })
        } else {
            Some(s)
        }
        .map(str::to_string)
    };
    let deep_path = format!(
        "...{}/leaf",
        (12..59).map(|i| format!("/d{i}")).collect::<String>()
    );
    let mut paths = vec![
        (w.path(m0, passwd), in_root("/etc/passwd")),
        (w.path(m0, gone), in_root("/etc/gone (deleted)")),
        (w.path(m0, empty), in_root("/etc/")),
        (w.path(m0, etc), in_root("/etc")),
        // Outside the task's root: up to the global root, as Linux's walk goes.
        (w.path(m1, f), Some("/mnt/f.txt".to_string())),
        (w.path(m1, r1), Some("/mnt".to_string())),
        (w.path(m0, leaf), Some(deep_path)),
        (w.pseudo("pipefs", "", 4242), Some("pipe:[4242]".into())),
        (
            w.pseudo("sockfs", "TCP", u64::MAX),
            Some(format!("socket:[{}]", u64::MAX)),
        ),
        (w.pseudo("sockfs", "UDP", 0), Some("socket:[0]".into())),
        (
            w.pseudo("anon_inodefs", "[eventfd]", 9),
            Some("anon_inode:[eventfd]".into()),
        ),
        (w.pseudo("pidfs", "", 9), Some("anon_inode:[pidfd]".into())),
        (w.pseudo("nsfs", "net", 9), None),
        (0, None),
        (WORLD - 64, None),
    ];
    if !chrooted {
        paths.push((w.path(m0, root), Some("/".into())));
    }
    let mut task = vec![0u8; 64];
    task[..8].copy_from_slice(&fs.to_le_bytes());
    let mut p = Probe::new();
    p.kernel = vec![(CURTHREAD, task), (WORLD, w.bytes)];
    p.path_offsets = Some(OFFSETS);
    p.paths = paths
        .iter()
        .filter_map(|(a, s)| Some((*a, s.clone()?.into_bytes())))
        .collect();
    (p, paths)
}

const D_PATH: &str = "d_path((struct path *)arg0)";

#[test]
fn d_path_builds_the_path_the_interpreter_is_given() {
    // Its steps in bpf_loop callbacks, and unrolled where the probe may not loop.
    for (chrooted, no_loops) in [(false, None), (true, None), (false, Some("unrolled"))] {
        let (mut p, paths) = world(chrooted);
        p.no_loops = no_loops;
        for (addr, want) in paths {
            p.args[0] = addr;
            match want {
                Some(want) => {
                    for strsize in [256, 40, 12, 4, 1] {
                        builds(D_PATH, &want, &p, strsize);
                    }
                }
                None => {
                    let len = format!("strlen({D_PATH})");
                    assert_eq!(agree(&len, &p, 256), None, "{addr:#x}");
                }
            }
        }
    }
}

#[test]
fn d_path_stays_in_dtrace_without_the_kernels_offsets() {
    let (mut p, _) = world(false);
    p.path_offsets = None;
    let obj = predicate(&clause(&format!("strlen({D_PATH}) > 0")));
    let e = translate(&obj, &p, 257, FRAME).unwrap_err();
    assert!(e.to_string().contains("d_path(): no d_path() here"), "{e}");
    // Nor where its strings do not fit in the scratch.
    let (p, _) = world(false);
    let e = translate(&obj, &p, 4000, FRAME).unwrap_err();
    assert!(e.to_string().contains("out of string scratch"), "{e}");
}
