//! `d_path()` on the running kernel: the needs analysis turns the `struct path` addresses of `cwd`,
//! `root` and `fds[arg0].fi_pathname` into path walks (an index by `arg0` included), and the capture
//! program's bounded walk records paths that decode to what Linux prints: across a mount
//! (`/dev/shm`), after a `chdir`, for an unlinked file, a pipe, and past the walk's bound (marked,
//! never silently short). Skipped without root, BPF or kernel BTF.

mod common;
use common::*;
use dtrace_compiler::ctf_types::CtfTypes;
use dtrace_compiler::{compile_with_types, CompileOptions};
use dtrace_ctf::{KernelTypes, SYS_KERNEL_BTF};
use dtrace_linux::btf::Btf;
use dtrace_linux::capture::layout::hdr;
use dtrace_linux::capture::path::{MAX_PATH_STEPS, PATH_SLOT};
use dtrace_linux::capture::spec::ArgIndex;
use dtrace_linux::capture::{AddrBase, AddrExpr, CaptureSpec, PathError, RecordLayout};
use dtrace_linux::process::ExitStatus;
use dtrace_linux::provider::needs::{program_needs, spec_for};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn btf_ok(test: &str) -> bool {
    dtrace_testkit::skip_unless(
        Path::new(SYS_KERNEL_BTF).join("vmlinux").exists(),
        test,
        "no kernel BTF",
    )
}

/// The addresses `cwd`, `root` and `fds[arg0]`'s `f_path` compile to, from the kernel's BTF.
fn addresses(btf: &Btf) -> (AddrExpr, AddrExpr, AddrExpr) {
    let id = |s: &str| btf.struct_id(s).unwrap_or_else(|| panic!("struct {s}"));
    let off = |s: &str, m: &str| btf.member_offset(id(s), m).unwrap() as i32;
    let fs = |m: &str| AddrExpr {
        base: AddrBase::CurrentTask,
        offset: off("task_struct", "fs"),
        derefs: vec![off("fs_struct", m)],
        user_derefs: Vec::new(),
        index: None,
    };
    let file = AddrExpr {
        base: AddrBase::CurrentTask,
        offset: off("task_struct", "files"),
        derefs: vec![
            off("files_struct", "fdt"),
            off("fdtable", "fd"),
            0,
            off("file", "f_path"),
        ],
        user_derefs: Vec::new(),
        index: Some(ArgIndex {
            hop: 3,
            arg: 0,
            scale: 8,
            sext32: true,
        }),
    };
    (fs("pwd"), fs("root"), file)
}

#[test]
fn needs_ask_for_path_walks() {
    if !btf_ok("needs_ask_for_path_walks") {
        return;
    }
    let k = KernelTypes::load(Path::new(SYS_KERNEL_BTF)).unwrap();
    let compile = |src: &str| {
        compile_with_types(
            src,
            &CompileOptions::default(),
            vec![Box::new(CtfTypes::new(Arc::clone(&k.vmlinux)))],
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let btf = Btf::load_vmlinux().unwrap();
    let (pwd, root, file) = addresses(&btf);
    let p = compile(
        "syscall::close:entry { trace(cwd); trace(root); trace(fds[arg0].fi_pathname); \
         trace(fds[arg0].fi_dirname); trace(cwd); }",
    );
    let n = program_needs(&p);
    assert_eq!(n.clauses[0].1.paths, vec![pwd.clone(), root, file.clone()]);
    assert!(n.clauses[0].1.unsupported.is_none());
    // The union over the clauses of a probe: each path once.
    let p = compile("syscall::close:entry { trace(cwd); } syscall::close:entry { trace(cwd); }");
    let n = program_needs(&p);
    let all: Vec<_> = n.clauses.iter().map(|(_, c)| c).collect();
    assert_eq!(spec_for(&all, (&[], false), 256).unwrap().paths, vec![pwd]);
    // fi_name of fds[arg0] reads the name through the same index.
    let p = compile("syscall::close:entry { trace(fds[arg0].fi_name); }");
    let n = program_needs(&p);
    assert!(
        n.clauses[0]
            .1
            .copies
            .iter()
            .any(|c| c.addr.index == file.index
                && c.kind == dtrace_linux::capture::MemKind::KernelString),
        "{:?}",
        n.clauses[0].1.copies
    );
    // An address the probe cannot compute: the clause cannot be enabled, and says why.
    let p = compile("syscall::close:entry { trace(d_path((struct path *)(arg0 + arg1))); }");
    let n = program_needs(&p);
    let why = n.clauses[0].1.unsupported.clone().expect("refused");
    assert!(why.starts_with("not yet supported: d_path()"), "{why}");
    assert!(spec_for(&[&n.clauses[0].1], (&[], false), 256).is_err());
    // A NULL path: no walk, d_path() faults at run time as DTrace's does.
    let p = compile("syscall::close:entry { trace(d_path((struct path *)0)); }");
    let n = program_needs(&p);
    assert!(n.clauses[0].1.unsupported.is_none() && n.clauses[0].1.paths.is_empty());
}

const WALKER: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
/* argv[1]: a directory on another mount with sub/f.txt; argv[2]: a deep file; argv[3]: the
   directory to start in. Each close() is traced. */
int main(int argc, char **argv) {
    char p[4096];
    if (argc < 4 || chdir(argv[3]) != 0) return 1;
    int fd = open("known.txt", O_RDONLY);
    close(fd);
    snprintf(p, sizeof p, "%s/sub/f.txt", argv[1]);
    fd = open(p, O_RDONLY);
    close(fd);
    snprintf(p, sizeof p, "%s/sub", argv[1]);
    if (chdir(p) != 0) return 2;
    fd = open("gone.txt", O_CREAT | O_RDWR, 0600);
    unlink("gone.txt");
    close(fd);
    int pp[2];
    if (pipe(pp) != 0) return 3;
    close(pp[0]);
    fd = open(argv[2], O_RDONLY);
    close(fd);
    close(50);
    return 0;
}
"#;

/// A directory on /dev/shm (another mount than the test's cwd) with `sub/f.txt`.
fn shm_dir(tag: &str) -> PathBuf {
    let d = PathBuf::from(format!(
        "/dev/shm/dtrace-dpath-{tag}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::write(d.join("sub/f.txt"), "x").unwrap();
    d
}

/// A file `depth` directories below `base`: its path.
fn deep_file(base: &Path, depth: usize) -> PathBuf {
    let mut p = base.to_path_buf();
    for i in 0..depth {
        p.push(format!("d{i}"));
    }
    std::fs::create_dir_all(&p).unwrap();
    p.push("leaf.txt");
    std::fs::write(&p, "x").unwrap();
    p
}

#[test]
fn paths_are_walked_at_the_probe() {
    if !kernel_ok("paths_are_walked_at_the_probe")
        || !gcc_ok("paths_are_walked_at_the_probe")
        || !btf_ok("paths_are_walked_at_the_probe")
    {
        return;
    }
    let exe = compile("dpath_walker", WALKER);
    let dir = exe.parent().unwrap().canonicalize().unwrap();
    std::fs::write(dir.join("known.txt"), "x").unwrap();
    let shm = shm_dir("k");
    let deep = deep_file(&shm, MAX_PATH_STEPS + 10);
    let btf = Btf::load_vmlinux().unwrap();
    let (pwd, root, file) = addresses(&btf);
    let cat = catalog();
    let p = probe(&cat, "syscall::close:entry");
    let mut s = session("dp");
    let spec = CaptureSpec {
        paths: vec![pwd, root, file],
        ..CaptureSpec::new()
    };
    // The cost: three path slots on top of the header.
    let layout = RecordLayout::for_spec(&spec, "close").unwrap();
    assert_eq!(layout.paths.len(), 3);
    assert_eq!(layout.size, hdr::SIZE + 3 * PATH_SLOT);
    let argv = vec![
        exe.display().to_string(),
        shm.display().to_string(),
        deep.display().to_string(),
        dir.display().to_string(),
    ];
    let (_, st, events) = run_traced(&mut s, &argv, |s, pid| {
        s.enable(
            &p,
            1,
            &CaptureSpec {
                filter_pid: Some(pid),
                ..spec.clone()
            },
        )
        .unwrap();
    });
    assert_eq!(st, ExitStatus::Exited(0));
    assert_eq!(s.bad_records(), 0);
    fn text(p: &dtrace_linux::capture::CapturedPath) -> Result<String, PathError> {
        p.path
            .clone()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }
    // The last six closes are the program's own (the loader's come first).
    assert!(events.len() >= 6, "{} events", events.len());
    let ours = &events[events.len() - 6..];
    let d = dir.display().to_string();
    let sub = shm.join("sub").display().to_string();
    let want = [
        (d.clone(), format!("{d}/known.txt")),
        (d.clone(), format!("{sub}/f.txt")),
        (sub.clone(), format!("{sub}/gone.txt (deleted)")),
        (sub.clone(), "pipe:[".to_string()),
    ];
    for (e, (cwd, path)) in ours.iter().zip(&want) {
        assert_eq!(e.paths.len(), 3);
        assert_eq!(text(&e.paths[0]), Ok(cwd.clone()));
        assert_eq!(text(&e.paths[1]), Ok("/".to_string()));
        let got = text(&e.paths[2]).unwrap();
        if path.starts_with("pipe:[") {
            assert!(got.starts_with("pipe:[") && got.ends_with(']'), "{got}");
        } else {
            assert_eq!(&got, path);
        }
        // pwd and root are members of one fs_struct.
        let fs = btf.struct_id("fs_struct").unwrap();
        let delta = i64::from(btf.member_offset(fs, "root").unwrap())
            - i64::from(btf.member_offset(fs, "pwd").unwrap());
        assert_eq!(e.paths[1].addr as i64 - e.paths[0].addr as i64, delta);
    }
    // Deeper than the walk goes: the leaf end, marked as cut.
    let got = text(&ours[4].paths[2]).unwrap();
    assert!(got.starts_with(".../"), "{got}");
    let leaf_dir = format!("/d{}/leaf.txt", MAX_PATH_STEPS + 9);
    assert!(got.ends_with(&leaf_dir), "{got}");
    assert!(!got.contains("/dev/shm"), "{got}");
    assert_eq!(got.matches('/').count(), MAX_PATH_STEPS, "{got}");
    // A descriptor that is not open: the walk meets the NULL file, and no path is given.
    assert_eq!(ours[5].paths[2].path, Err(PathError::Unreadable));
    assert_eq!(text(&ours[5].paths[0]), Ok(sub));
    let _ = std::fs::remove_dir_all(&shm);
}

#[test]
fn path_slots_in_the_record_layout() {
    let at = |offset| AddrExpr {
        base: AddrBase::CurrentTask,
        offset,
        derefs: vec![8],
        user_derefs: Vec::new(),
        index: None,
    };
    let mut spec = CaptureSpec {
        ancestors: true,
        paths: vec![at(0), at(16)],
        ..CaptureSpec::new()
    };
    spec.kstack = Some(4);
    let l = RecordLayout::for_spec(&spec, "p").unwrap();
    // After the ancestors (8 + 4 * 32 bytes), before the stack.
    assert_eq!(l.paths, vec![hdr::SIZE + 136, hdr::SIZE + 136 + PATH_SLOT]);
    assert_eq!(l.kstack, Some((hdr::SIZE + 136 + 2 * PATH_SLOT, 4)));
    // Bounds: at most MAX_PATHS walks, addresses the probe carries.
    spec.paths = vec![at(0); dtrace_linux::capture::path::MAX_PATHS + 1];
    assert!(RecordLayout::for_spec(&spec, "p").is_err());
    let mut far = at(0);
    far.index = Some(ArgIndex {
        hop: 1,
        arg: 10,
        scale: 8,
        sext32: true,
    });
    spec.paths = vec![far];
    assert!(RecordLayout::for_spec(&spec, "p").is_err());
    spec.paths = vec![AddrExpr::arg(10)];
    assert!(RecordLayout::for_spec(&spec, "p").is_err());
}

#[test]
fn path_records_from_arbitrary_bytes_never_panic() {
    use dtrace_linux::capture::decode_record;
    let spec = CaptureSpec {
        paths: vec![AddrExpr::arg(0), AddrExpr::arg(1)],
        ..CaptureSpec::new()
    };
    let layout = RecordLayout::for_spec(&spec, "fuzz").unwrap();
    // xorshift bytes, with the kind field set to an event so the path slots are decoded.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..300 {
        let mut b: Vec<u8> = (0..layout.size + round % 7)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        b[0..2].copy_from_slice(&1u16.to_le_bytes());
        if round % 3 == 0 {
            // Plausible flags and lengths, names anywhere.
            for at in &layout.paths {
                b[at + 8..at + 12].copy_from_slice(&((round as u32) % 64).to_le_bytes());
            }
        }
        if let Ok(dtrace_linux::capture::Record::Event(e)) = decode_record(&b, |_| Some(&layout)) {
            assert_eq!(e.paths.len(), 2);
        }
    }
    // Shorter than the layout: an error, not a panic.
    assert!(decode_record(&[1, 0, 0, 0, 0, 0, 0, 0], |_| Some(&layout)).is_err());
}

#[test]
fn live_memory_gives_this_process_paths() {
    use dtrace_dif::vm::Memory;
    use dtrace_linux::live::{KernelReader, LiveMemory};
    use std::os::fd::AsRawFd;
    if !kernel_ok("live_memory_gives_this_process_paths")
        || !btf_ok("live_memory_gives_this_process_paths")
    {
        return;
    }
    let o = dtrace_linux::btf::TaskOffsets::from_vmlinux()
        .unwrap()
        .paths
        .expect("path offsets");
    let reader = KernelReader::new().expect("kernel reader");
    let ptr = |r: &KernelReader, at: u64| {
        let mut b = [0u8; 8];
        r.read(at, &mut b).expect("read");
        u64::from_ne_bytes(b)
    };
    let task = reader.current_task().unwrap();
    let fs = ptr(&reader, task + u64::from(o.task_fs));
    let fdt = ptr(
        &reader,
        ptr(&reader, task + u64::from(o.task_files)) + u64::from(o.files_fdt),
    );
    let dir = std::env::temp_dir().join(format!("dtrace-live-dpath-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    let name = dir.join("open file.txt");
    let f = std::fs::File::create(&name).unwrap();
    let file = ptr(
        &reader,
        ptr(&reader, fdt + u64::from(o.fdt_fd)) + 8 * f.as_raw_fd() as u64,
    );
    let mut m = LiveMemory::new(reader);
    let text = |v: Vec<u8>| String::from_utf8(v).unwrap();
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(
        text(m.d_path(fs + u64::from(o.fs_pwd)).unwrap()),
        cwd.display().to_string()
    );
    assert_eq!(text(m.d_path(fs + u64::from(o.fs_root)).unwrap()), "/");
    assert_eq!(
        text(m.d_path(file + u64::from(o.f_path)).unwrap()),
        name.display().to_string()
    );
    std::fs::remove_file(&name).unwrap();
    assert_eq!(
        text(m.d_path(file + u64::from(o.f_path)).unwrap()),
        format!("{} (deleted)", name.display())
    );
    // Anything else is not a path of this process.
    assert!(m.d_path(fs + 1).is_err());
    assert!(m.d_path(0).is_err());
    drop(f);
    let _ = std::fs::remove_dir_all(&dir);
}
