//! `.eh_frame` unwinding of user stacks (dtrace_linux::symbols::unwind) on a real process: a program
//! built without frame pointers, stopped inside three nested calls, unwinds through all of them
//! from its registers and a copy of its stack, where a frame-pointer walk cannot (gcc; ptrace).
//! The rules compiled into rows for the kernel (`symbols::unwind_rows`) give the same rule at
//! every address of the program and of libc, and the reference walk over the kernel's layout the
//! same frames, however much of the stack was copied.

use dtrace_linux::symbols::unwind::{self, StackBytes, UnwindTable, UserRegs};
use dtrace_linux::symbols::unwind_rows::{self, RowArena, UnwindRows};
use dtrace_linux::symbols::Symbolizer;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::process::{Command, Stdio};

const SRC: &str = r#"
#include <unistd.h>
__attribute__((noinline)) int level3(int x) { char b; volatile int r = read(0, &b, 1); return r + x; }
__attribute__((noinline)) int level2(int x) { return level3(x * 3) + 1; }
__attribute__((noinline)) int level1(int x) { return level2(x + 5) * 2; }
int main(void) { return level1(1) > 0 ? 0 : 1; }
"#;

/// The same calls through a frame whose size is known only at run time (its CFA is `rbp` plus
/// an offset, `rbp` saved) and one built with frame pointers.
const SRC_VLA: &str = r#"
#include <unistd.h>
__attribute__((noinline)) int level3(int x) { char b; volatile int r = read(0, &b, 1); return r + x; }
__attribute__((noinline)) int level2(int x) { volatile char v[x + 16]; v[0] = 1; return level3(v[0] * 3) + 1; }
__attribute__((noinline, optimize("no-omit-frame-pointer"))) int level1(int x) { return level2(x + 5) * 2; }
int main(void) { return level1(1) > 0 ? 0 : 1; }
"#;

const FLAGS: &[&str] = &[
    "-O2",
    "-fomit-frame-pointer",
    "-fasynchronous-unwind-tables",
];

fn compile(dir: &std::path::Path) -> std::path::PathBuf {
    compile_src(dir, SRC)
}

fn compile_src(dir: &std::path::Path, src: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    dtrace_testkit::compile_c(dtrace_testkit::CSource::Text(src), &dir.join("nofp"), FLAGS).unwrap()
}

/// Waits until `pid` sleeps in read(2) (syscall 0 in /proc/PID/syscall).
fn wait_in_read(pid: u32) {
    for _ in 0..500 {
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/syscall")) {
            if s.starts_with("0 ") {
                return;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("process {pid} never blocked in read");
}

/// The registers of a stopped-by-ptrace thread.
fn regs_of(pid: i32) -> libc::user_regs_struct {
    // SAFETY: plain ptrace calls on our own child, with a zeroed register buffer to fill.
    unsafe {
        assert_eq!(libc::ptrace(libc::PTRACE_SEIZE, pid, 0, 0), 0, "seize");
        assert_eq!(
            libc::ptrace(libc::PTRACE_INTERRUPT, pid, 0, 0),
            0,
            "interrupt"
        );
        let mut st = 0;
        assert_eq!(libc::waitpid(pid, &mut st, libc::__WALL), pid);
        let mut regs: libc::user_regs_struct = std::mem::zeroed();
        assert_eq!(
            libc::ptrace(libc::PTRACE_GETREGS, pid, 0, &mut regs as *mut _),
            0,
            "getregs"
        );
        assert_eq!(libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0), 0, "detach");
        regs
    }
}

/// Waits until `pid` sleeps in read(2) and takes its registers and as much of its stack above
/// sp as can be read, up to 8 KiB.
fn stopped_in_read(pid: u32) -> (UserRegs, Vec<u8>) {
    wait_in_read(pid);
    let r = regs_of(pid as i32);
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut stack = Vec::new();
    for n in [8192usize, 4096, 2048, 1024, 512] {
        let mut b = vec![0u8; n];
        if mem.read_exact_at(&mut b, r.rsp).is_ok() {
            stack = b;
            break;
        }
    }
    assert!(!stack.is_empty(), "stack unreadable");
    let regs = UserRegs {
        pc: r.rip,
        sp: r.rsp,
        fp: r.rbp,
    };
    (regs, stack)
}

#[test]
fn eh_frame_unwinding_walks_code_without_frame_pointers() {
    if !dtrace_testkit::skip_unless(
        dtrace_testkit::have_program("gcc"),
        "eh_frame_unwinding_walks_code_without_frame_pointers",
        "needs gcc",
    ) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("dtrace-unwind-{}", std::process::id()));
    let exe = compile(&dir);
    let mut child = Command::new(&exe).stdin(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let (regs, stack) = stopped_in_read(pid);
    let mut syms = Symbolizer::new();
    syms.note_process(pid);
    let frames = syms.unwind_user(
        pid,
        regs,
        StackBytes {
            base: regs.sp,
            bytes: &stack,
        },
        32,
    );
    let names: Vec<String> = frames
        .frames
        .iter()
        .map(|pc| syms.user_frame(pid, *pc))
        .collect();
    child.stdin.take().unwrap().write_all(b"x").unwrap();
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
    let pos = |f: &str| {
        names
            .iter()
            .position(|n| n.starts_with(&format!("nofp`{f}+")))
            .unwrap_or_else(|| panic!("{f} missing from {names:#?}"))
    };
    // Innermost first: read in libc, then our three levels and main, in order.
    assert!(names[0].starts_with("libc.so.6`"), "{names:#?}");
    let (l3, l2, l1, m) = (pos("level3"), pos("level2"), pos("level1"), pos("main"));
    assert!(l3 < l2 && l2 < l1 && l1 < m, "{names:#?}");
    assert_eq!(l2, l3 + 1, "{names:#?}");
    assert_eq!(m, l1 + 1, "{names:#?}");
    // main's caller is libc's start code; the walk ends at the outermost frame (`_start`, whose
    // return address is undefined), never in garbage.
    assert!(names.len() > m + 1 && names.len() < 12, "{names:#?}");
    assert!(frames.outermost, "{names:#?}");
    assert!(names[names.len() - 1].contains("`_start+"), "{names:#?}");
}

/// Every address an entry of `path`'s `.eh_frame` covers (and those just outside each range):
/// the compiled rows give the rule the table gives. Returns the number of addresses checked.
fn rows_agree_with_table(path: &str) -> usize {
    let table = UnwindTable::load(path).unwrap_or_else(|| panic!("{path}: no .eh_frame"));
    let rows = UnwindRows::compile(&table).unwrap();
    let mut checked = 0;
    for (lo, hi, _) in table.ranges() {
        for a in lo.saturating_sub(1)..=hi {
            assert_eq!(rows.rule_at(a), table.rule_at(a), "{path} at {a:#x}");
            checked += 1;
        }
    }
    assert!(checked > 0, "{path}: no ranges");
    // Rows of kinds past the table's start: a frame-pointer step before the first, and after the
    // last.
    assert_eq!(rows.rule_at(0), None);
    assert_eq!(rows.rule_at(u64::MAX), None);
    checked
}

/// The compiled rows and the reference walk over the kernel's layout agree with the unwinder on
/// the stacks of two programs stopped in read(2) (one without frame pointers, one mixing an
/// `rbp`-based CFA and a frame-pointer frame), and on libc, for every length of the copied stack.
#[test]
fn compiled_rows_walk_as_the_unwinder_walks() {
    if !dtrace_testkit::skip_unless(
        dtrace_testkit::have_program("gcc"),
        "compiled_rows_walk_as_the_unwinder_walks",
        "needs gcc",
    ) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("dtrace-unwind-rows-{}", std::process::id()));
    for (i, src) in [SRC, SRC_VLA].into_iter().enumerate() {
        let exe = compile_src(&dir.join(i.to_string()), src);
        let mut child = Command::new(&exe).stdin(Stdio::piped()).spawn().unwrap();
        let pid = child.id();
        let (regs, stack) = stopped_in_read(pid);
        let mut syms = Symbolizer::new();
        syms.note_process(pid);
        let mut arena = RowArena::new();
        let ranges = syms.unwind_ranges(pid, &mut arena).unwrap();
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
        child.stdin.take().unwrap().write_all(b"x").unwrap();
        assert!(child.wait().unwrap().success());
        let libc = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("libc.so"))
            .expect("libc mapped")
            .to_string();
        let exe = exe.to_str().unwrap();
        assert!(rows_agree_with_table(exe) > 100);
        if i == 0 {
            assert!(rows_agree_with_table(&libc) > 100_000);
        }
        // The program's and libc's rows are in the arena, behind the ranges that map them.
        for path in [exe, libc.as_str()] {
            let (first, count) = arena.file_rows(path, || None).unwrap().unwrap();
            assert!(ranges
                .iter()
                .any(|r| (r.first, r.count) == (first, count) && r.count > 0));
        }
        if i == 1 {
            // level2's CFA is rbp-based, its rbp saved.
            let (first, count) = arena.file_rows(exe, || None).unwrap().unwrap();
            let rows = &arena.rows()[first as usize..(first + count) as usize];
            assert!(rows
                .iter()
                .any(|r| r.kind == unwind_rows::KIND_CFA_FP | unwind_rows::FLAG_FP_SAVED));
        }
        let mut full = Default::default();
        for len in (0..=stack.len()).step_by(8) {
            let bytes = StackBytes {
                base: regs.sp,
                bytes: &stack[..len],
            };
            for max in [1, 3, 32] {
                let want = syms.unwind_user(pid, regs, bytes, max);
                let got = unwind_rows::walk(regs, bytes, max, arena.rows(), &ranges);
                assert_eq!(
                    got.as_ref(),
                    Ok(&want),
                    "program {i}, {len} bytes, {max} frames"
                );
                if len == stack.len() && max == 32 {
                    full = want;
                }
            }
        }
        let unwind::Unwound { frames, outermost } = full;
        assert!(outermost, "program {i}");
        let names: Vec<String> = frames.iter().map(|pc| syms.user_frame(pid, *pc)).collect();
        for f in ["level3", "level2", "level1", "main"] {
            assert!(
                names.iter().any(|n| n.starts_with(&format!("nofp`{f}+"))),
                "{f} missing from {names:#?}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
