//! `.eh_frame` unwinding of user stacks (dtrace_linux::symbols::unwind) on a real process: a program
//! built without frame pointers, stopped inside three nested calls, unwinds through all of them
//! from its registers and a copy of its stack, where a frame-pointer walk cannot (gcc; ptrace).

use dtrace_linux::symbols::unwind::{StackBytes, UserRegs};
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

fn compile(dir: &std::path::Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    dtrace_testkit::compile_c(
        dtrace_testkit::CSource::Text(SRC),
        &dir.join("nofp"),
        &[
            "-O2",
            "-fomit-frame-pointer",
            "-fasynchronous-unwind-tables",
        ],
    )
    .unwrap()
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
    wait_in_read(pid);
    let r = regs_of(pid as i32);
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    // As much of the stack above sp as can be read, up to 8 KiB.
    let mut stack = Vec::new();
    for n in [8192usize, 4096, 2048, 1024, 512] {
        let mut b = vec![0u8; n];
        if mem.read_exact_at(&mut b, r.rsp).is_ok() {
            stack = b;
            break;
        }
    }
    assert!(!stack.is_empty(), "stack unreadable");
    let mut syms = Symbolizer::new();
    syms.note_process(pid);
    let regs = UserRegs {
        pc: r.rip,
        sp: r.rsp,
        fp: r.rbp,
    };
    let frames = syms.unwind_user(
        pid,
        regs,
        StackBytes {
            base: r.rsp,
            bytes: &stack,
        },
        32,
    );
    let names: Vec<String> = frames.iter().map(|pc| syms.user_frame(pid, *pc)).collect();
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
    // main's caller is libc's start code; the walk ends at the outermost frame, never in garbage.
    assert!(names.len() > m + 1 && names.len() < 12, "{names:#?}");
}
