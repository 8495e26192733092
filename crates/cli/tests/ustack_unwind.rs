//! `ustack()` of code built without frame pointers (as most distributions build their binaries):
//! the stack is unwound at delivery from the user registers and stack bytes captured at the probe,
//! with the files' `.eh_frame`, so every caller shows, down to the program's entry point (root,
//! BPF, tracefs; gcc).

mod common;
use common::dtrace;

const SRC: &str = r#"
#include <unistd.h>
volatile unsigned long sink;
__attribute__((noinline)) int level3(int x) {
    for (unsigned long i = 0; i < 200000000UL; i++) sink += i ^ (unsigned long)x;
    return (int)getppid() + x;
}
__attribute__((noinline)) int level2(int x) { return level3(x * 3) + 1; }
__attribute__((noinline)) int level1(int x) { return level2(x + 5) * 2; }
int main(void) { return level1(1) > 0 ? 0 : 1; }
"#;

use common::stack_frames as stacks;

/// Runs `actions` at each write(2) of the command `exe`: the output, and its lines that name a
/// frame (`object`symbol...`).
fn at_write(exe: &std::path::Path, actions: &str) -> (String, Vec<String>) {
    let prog = format!("syscall::write:entry /pid == $target/ {{ {actions} }}");
    let (rc, out, err) = dtrace(&["-qn", &prog, "-c", exe.to_str().unwrap()]);
    assert_eq!(rc, 0, "{err}");
    let frames = out
        .lines()
        .map(str::trim)
        .filter(|l| l.contains('`'))
        .map(str::to_string)
        .collect();
    (out, frames)
}

/// Whether `frames` holds level3, level2, level1 and main of `nofp`, consecutive and in order.
fn has_chain(frames: &[String]) -> bool {
    let names = ["level3", "level2", "level1", "main"];
    frames.windows(4).any(|w| {
        w.iter()
            .zip(names)
            .all(|(f, n)| f.starts_with(&format!("nofp`{n}+")))
    })
}

#[test]
fn ustack_unwinds_code_without_frame_pointers() {
    if !common::kernel_ok("ustack_unwinds_code_without_frame_pointers")
        || !common::have_gcc("ustack_unwinds_code_without_frame_pointers")
    {
        return;
    }
    let dir = common::test_dir("ustack-unwind");
    let exe = common::compile_c(
        &dir,
        "nofp",
        SRC,
        &[
            "-O2",
            "-fomit-frame-pointer",
            "-fasynchronous-unwind-tables",
        ],
    );
    let (rc, out, err) = dtrace(&[
        "-qn",
        "syscall::getppid:entry /pid == $target/ { ustack(); }
         profile-997 /pid == $target/ { @[ustack()] = count(); }",
        "-c",
        exe.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    let all = stacks(&out);
    // The syscall's stack: libc's getppid, then every caller, then libc's start code.
    let sys = all
        .iter()
        .find(|s| s[0].starts_with("libc.so.6`getppid"))
        .unwrap_or_else(|| panic!("no getppid stack in {out}"));
    assert!(has_chain(&sys[1..]), "{sys:#?}");
    assert!(sys.last().unwrap().starts_with("nofp`_start+"), "{sys:#?}");
    // Samples in the loop: level3 on top, its callers below.
    assert!(
        all.iter()
            .any(|s| s[0].starts_with("nofp`level3+") && has_chain(s)),
        "{out}"
    );
}

/// A command that exits at once, before its events are read: its user stack still resolves, from
/// the mappings followed as they were made (and read while it was held), not from /proc at
/// delivery.
#[test]
fn ustack_of_a_process_gone_before_delivery_resolves() {
    let test = "ustack_of_a_process_gone_before_delivery_resolves";
    if !common::kernel_ok(test) || !common::have_gcc(test) {
        return;
    }
    let dir = common::test_dir("ustack-gone");
    let exe = common::compile_c(
        &dir,
        "quick",
        "#include <unistd.h>\nvolatile int sink;\n\
         __attribute__((noinline)) void say(void) { write(1, \"x\", 1); sink++; }\n\
         int main(void) { say(); sink++; return 0; }\n",
        &["-O1", "-fno-omit-frame-pointer"],
    );
    for _ in 0..3 {
        let (out, frames) = at_write(&exe, "ustack(); ufunc(uregs[R_PC]);");
        assert!(
            frames.iter().any(|f| f.starts_with("libc.so.6`write")),
            "{out}"
        );
        assert!(frames.iter().any(|f| f.starts_with("quick`say+")), "{out}");
        assert!(frames.iter().any(|f| f.starts_with("quick`main+")), "{out}");
    }
}

/// `ustack()` without a depth records DTrace for Linux's default of 100 frames (a 40-deep call
/// chain shows whole, down to the start code), and a frame in a function only the C library's
/// separate debuginfo names (`__libc_start_call_main`, where installed) prints by that name.
#[test]
fn default_ustack_is_deep_and_names_debuginfo_functions() {
    let test = "default_ustack_is_deep_and_names_debuginfo_functions";
    if !common::kernel_ok(test) || !common::have_gcc(test) {
        return;
    }
    let dir = common::test_dir("ustack-deep");
    let exe = common::compile_c(
        &dir,
        "deep",
        "#include <unistd.h>\nvolatile int sink;\n\
         __attribute__((noinline)) void down(int n) {\n\
             if (n == 0) write(1, \"x\", 1); else down(n - 1);\n\
             sink++;\n\
         }\n\
         int main(void) { down(40); sink++; return 0; }\n",
        &["-O1", "-fno-omit-frame-pointer"],
    );
    let (out, frames) = at_write(&exe, "ustack();");
    let downs = frames
        .iter()
        .filter(|f| f.starts_with("deep`down+"))
        .count();
    assert_eq!(downs, 41, "{out}");
    let main = frames
        .iter()
        .position(|f| f.starts_with("deep`main+"))
        .unwrap_or_else(|| panic!("{out}"));
    // main's caller is in libc's start code, which the stripped library's .dynsym does not name.
    let caller = frames.get(main + 1).unwrap_or_else(|| panic!("{out}"));
    assert!(caller.starts_with("libc.so.6`"), "{out}");
    if libc_debuginfo_installed() {
        assert!(
            caller.starts_with("libc.so.6`__libc_start_call_main+"),
            "{out}"
        );
    }
}

/// Whether the separate debuginfo of this process's C library is installed.
fn libc_debuginfo_installed() -> bool {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let Some(libc) = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so"))
    else {
        return false;
    };
    let Ok(out) = std::process::Command::new("readelf")
        .args(["-n", libc])
        .output()
    else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(id) = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
    else {
        return false;
    };
    id.len() > 2
        && std::path::Path::new(&format!(
            "/usr/lib/debug/.build-id/{}/{}.debug",
            &id[..2],
            &id[2..]
        ))
        .is_file()
}
