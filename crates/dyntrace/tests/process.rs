//! Whole-process behaviour: checkpoints, attaching and detaching, threads, fork-following, exec chains,
//! and the exit codes for bad input.

mod common;
use common::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Polls `cond` every 20 ms, at most `tries` times.
fn eventually(tries: u32, mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..tries {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: plain system call.
    unsafe { libc::kill(pid as i32, sig) };
}

fn status_field(pid: u32, field: &str) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .map(|v| v.trim().to_string())
}

fn trace_state(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(parse_trace(&text).state)
}

fn spawn_dyntrace(args: &[&str]) -> Child {
    Command::new(dyntrace())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dyntrace")
}

fn finish(child: Child) -> std::process::Output {
    child.wait_with_output().expect("wait dyntrace")
}

#[test]
fn checkpoint_on_sigusr1_then_final() {
    let Some(prog) = setup("checkpoint_usr1") else {
        return;
    };
    let dir = scratch("usr1");
    let out = dir.join("c.trace");
    let flag = dir.join("flag");
    let p = prog.to_string_lossy().into_owned();
    let child = spawn_dyntrace(&[
        "-c",
        "0",
        "-o",
        out.to_str().unwrap(),
        &p,
        "wait",
        "100",
        flag.to_str().unwrap(),
    ]);
    // Wait until dyntrace catches SIGUSR1, then ask for checkpoints until one is written.
    let ready = eventually(1500, || {
        status_field(child.id(), "SigCgt:")
            .and_then(|h| u64::from_str_radix(&h, 16).ok())
            .is_some_and(|m| m & (1 << (libc::SIGUSR1 - 1)) != 0)
    });
    assert!(ready, "dyntrace never installed its SIGUSR1 handler");
    let got = eventually(1500, || {
        signal(child.id(), libc::SIGUSR1);
        trace_state(&out).as_deref() == Some("checkpoint")
    });
    std::fs::write(&flag, "").unwrap();
    let o = finish(child);
    assert!(got, "no checkpoint appeared");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    validate(&out);
    let t = read_trace(&out);
    assert_eq!(t.state, "final");
    // Both spins ran.
    assert_eq!(t.programs[0].mnemonic("text:program", "DEC"), 200);
}

#[test]
fn periodic_checkpoints() {
    let Some(prog) = setup("checkpoint_periodic") else {
        return;
    };
    let dir = scratch("periodic");
    let out = dir.join("c.trace");
    let flag = dir.join("flag");
    let p = prog.to_string_lossy().into_owned();
    let child = spawn_dyntrace(&[
        "-c",
        "1",
        "-o",
        out.to_str().unwrap(),
        &p,
        "wait",
        "10",
        flag.to_str().unwrap(),
    ]);
    let got = eventually(1500, || trace_state(&out).as_deref() == Some("checkpoint"));
    if got {
        validate(&out);
    }
    std::fs::write(&flag, "").unwrap();
    let o = finish(child);
    assert!(got, "no periodic checkpoint appeared");
    assert!(o.status.success());
    assert_eq!(trace_state(&out).as_deref(), Some("final"));
}

#[test]
fn attach_and_detach_on_term_leaves_the_process_running() {
    attach_detach("step");
}

#[test]
fn attach_and_detach_in_block_mode_removes_breakpoints() {
    attach_detach("block");
}

fn attach_detach(mode: &str) {
    let Some(prog) = setup("attach_detach") else {
        return;
    };
    let dir = scratch(&format!("attach-{mode}"));
    let out = dir.join("a.trace");
    let flag = dir.join("flag");
    let mut target = Command::new(&prog)
        .args(["wait", "10"])
        .arg(&flag)
        .spawn()
        .expect("start target");
    let pid = target.id();
    let pid_s = pid.to_string();
    let child = spawn_dyntrace(&["-m", mode, "-p", &pid_s, "-o", out.to_str().unwrap()]);
    let attached = eventually(1500, || {
        status_field(pid, "TracerPid:").is_some_and(|t| t != "0")
    });
    // Let it trace a few iterations of the wait loop, then stop the trace.
    std::thread::sleep(Duration::from_millis(100));
    signal(child.id(), libc::SIGTERM);
    let o = finish(child);
    assert!(attached, "dyntrace never attached");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Untraced and not stopped.
    assert_eq!(status_field(pid, "TracerPid:").as_deref(), Some("0"));
    let state = status_field(pid, "State:").unwrap_or_default();
    assert!(
        !state.starts_with('t') && !state.starts_with('T'),
        "state {state}"
    );
    validate(&out);
    let t = read_trace(&out);
    assert_eq!(t.state, "final");
    assert_eq!(t.programs.len(), 1);
    assert_eq!(t.programs[0].pid, pid as i32);
    assert!(
        t.programs[0].total("text:library") > 0,
        "the wait loop's library calls were traced"
    );
    // The process goes on and finishes normally.
    std::fs::write(&flag, "").unwrap();
    let st = target.wait().unwrap();
    assert!(st.success(), "{st:?}");
}

#[test]
fn every_thread_is_traced() {
    let Some(prog) = setup("threads") else { return };
    let dir = scratch("threads");
    let a = trace(&dir, "a", &[], &prog, &["threads", "1000"]);
    let b = trace(&dir, "b", &[], &prog, &["threads", "2000"]);
    assert_eq!(a.programs.len(), 1);
    let d = b.programs[0].mnemonic("text:program", "DEC")
        - a.programs[0].mnemonic("text:program", "DEC");
    assert_eq!(d, 2000, "two threads, 1000 more iterations each");
    assert_eq!(
        b.programs[0].total("text:program") - a.programs[0].total("text:program"),
        6000
    );
}

#[test]
fn exec_chains_give_one_program_each() {
    let Some(prog) = setup("exec") else { return };
    let dir = scratch("exec");
    let t = trace(
        &dir,
        "e",
        &[],
        Path::new("/bin/sh"),
        &["-c", &format!("exec {} exec 300", prog.display())],
    );
    let names: Vec<&str> = t.programs.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    let me = prog.to_string_lossy();
    assert_eq!(names[1], me);
    assert_eq!(names[2], me);
    assert!(t.programs.iter().all(|p| p.pid == t.programs[0].pid));
    assert_eq!(t.programs[1].mnemonic("text:program", "DEC"), 0);
    assert_eq!(t.programs[2].mnemonic("text:program", "DEC"), 300);
}

#[test]
fn children_are_followed_only_when_asked() {
    let Some(prog) = setup("fork") else { return };
    let dir = scratch("fork");
    let status = dir.join("status");
    let st = status.to_str().unwrap();
    for mode in ["step", "block"] {
        let t = trace(&dir, "f", &["-F", "-m", mode], &prog, &["fork", "700", st]);
        assert_eq!(t.programs.len(), 2);
        assert_ne!(t.programs[0].pid, t.programs[1].pid);
        assert_eq!(t.programs[0].mnemonic("text:program", "DEC"), 0);
        assert_eq!(t.programs[1].mnemonic("text:program", "DEC"), 700);
        assert_eq!(std::fs::read_to_string(&status).unwrap().trim(), "7");
        std::fs::remove_file(&status).unwrap();
    }
    for mode in ["step", "block"] {
        let t = trace(&dir, "n", &["-m", mode], &prog, &["fork", "700", st]);
        assert_eq!(t.programs.len(), 1);
        assert_eq!(t.programs[0].mnemonic("text:program", "DEC"), 0);
        // The untraced child ran normally.
        assert_eq!(
            std::fs::read_to_string(&status).unwrap().trim(),
            "7",
            "{mode}"
        );
        std::fs::remove_file(&status).unwrap();
    }
}

#[test]
fn bad_input_gets_sysexits_codes() {
    let dir = scratch("bad");
    let out = dir.join("x.trace");
    let o = out.to_str().unwrap();
    let code = |args: &[&str]| {
        let r = run(args);
        (
            r.status.code(),
            String::from_utf8_lossy(&r.stderr).into_owned(),
        )
    };
    let (c, msg) = code(&["-o", o, "/no/such/command"]);
    assert_eq!(c, Some(66), "{msg}");
    assert!(msg.contains("command not found"), "{msg}");
    let (c, _) = code(&["-o", o, "no-such-command-anywhere"]);
    assert_eq!(c, Some(66));
    let (c, msg) = code(&["-o", o]);
    assert_eq!(c, Some(64), "{msg}");
    let (c, _) = code(&["-o", o, "-p", "1", "true"]);
    assert_eq!(c, Some(64));
    let (c, _) = code(&["-o", o, "-c", "soon", "true"]);
    assert_eq!(c, Some(64));
    // A pid that does not exist.
    let (c, msg) = code(&["-o", o, "-p", "2147483000"]);
    assert_eq!(c, Some(66), "{msg}");
    // Opcode files: missing, malformed.
    let (c, _) = code(&["-f", "/no/such/oplist.xml", "-o", o, "true"]);
    assert_eq!(c, Some(66));
    let bad = dir.join("bad.xml");
    std::fs::write(
        &bad,
        "<oplist><op bitmask=\"10x2\" mnemonic=\"X\"><description/></op></oplist>",
    )
    .unwrap();
    let (c, msg) = code(&["-f", bad.to_str().unwrap(), "-o", o, "true"]);
    assert_eq!(c, Some(65));
    assert!(msg.contains("line 1"), "{msg}");
    // An output file that cannot be created: the command must not even start.
    let marker = dir.join("ran");
    let (c, msg) = code(&[
        "-o",
        "/no/such/dir/x.trace",
        "/bin/sh",
        "-c",
        &format!("touch {}", marker.display()),
    ]);
    assert_eq!(c, Some(73), "{msg}");
    assert!(!marker.exists());
    assert!(!out.exists());
}

#[test]
fn default_output_is_procname_trace() {
    let Some(prog) = setup("default_output") else {
        return;
    };
    let dir = scratch("default-out");
    let o = Command::new(dyntrace())
        .current_dir(&dir)
        .arg(&prog)
        .args(["spin", "3"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let name = format!("{}.trace", prog.file_name().unwrap().to_string_lossy());
    assert_eq!(read_trace(&dir.join(name)).state, "final");
}

#[test]
fn a_process_already_traced_is_refused() {
    let Some(prog) = setup("already_traced") else {
        return;
    };
    let dir = scratch("already-traced");
    let flag = dir.join("flag");
    let out = dir.join("first.trace");
    let p = prog.to_string_lossy().into_owned();
    let first = spawn_dyntrace(&[
        "-o",
        out.to_str().unwrap(),
        &p,
        "wait",
        "1",
        flag.to_str().unwrap(),
    ]);
    // Find the traced program: the child whose tracer is the first dyntrace.
    let mut traced = None;
    eventually(1500, || {
        traced = std::fs::read_dir("/proc").ok().and_then(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .find(|pid| {
                    status_field(*pid, "TracerPid:").as_deref() == Some(&first.id().to_string())
                })
        });
        traced.is_some()
    });
    let second = traced.map(|pid| {
        run(&[
            "-o",
            dir.join("second.trace").to_str().unwrap(),
            "-p",
            &pid.to_string(),
        ])
    });
    std::fs::write(&flag, "").unwrap();
    let o = finish(first);
    assert!(o.status.success());
    let second = second.expect("the traced program never appeared");
    assert_eq!(
        second.status.code(),
        Some(77),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert!(String::from_utf8_lossy(&second.stderr).contains("cannot trace process"));
}

#[test]
fn job_control_stops_are_kept() {
    let Some(prog) = setup("job_control") else {
        return;
    };
    let dir = scratch("job-control");
    let flag = dir.join("flag");
    let out = dir.join("j.trace");
    let p = prog.to_string_lossy().into_owned();
    let first = spawn_dyntrace(&[
        "-o",
        out.to_str().unwrap(),
        &p,
        "wait",
        "1",
        flag.to_str().unwrap(),
    ]);
    let mut traced = None;
    eventually(1500, || {
        traced = std::fs::read_dir("/proc").ok().and_then(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .find(|pid| {
                    status_field(*pid, "TracerPid:").as_deref() == Some(&first.id().to_string())
                })
        });
        traced.is_some()
    });
    let pid = traced.expect("the traced program never appeared");
    signal(pid, libc::SIGSTOP);
    // Stopped (group-stop under a tracer shows as 't' or 'T'), and it stays so.
    let stopped = eventually(1500, || {
        status_field(pid, "State:").is_some_and(|s| s.starts_with('t') || s.starts_with('T'))
    });
    // Running, it would sleep in its wait loop (state S) and exit once the flag exists; stopped, it
    // stays in a stopped state all along.
    std::fs::write(&flag, "").unwrap();
    let mut still = true;
    for _ in 0..60 {
        std::thread::sleep(Duration::from_millis(40));
        let st = status_field(pid, "State:").unwrap_or_default();
        if !(st.starts_with('t') || st.starts_with('T')) {
            still = false;
            eprintln!("state while stopped: {st:?}");
            break;
        }
    }
    signal(pid, libc::SIGCONT);
    let o = finish(first);
    assert!(stopped, "SIGSTOP did not stop the traced program");
    assert!(still, "the traced program ran on while stopped");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        read_trace(&out).programs[0].mnemonic("text:program", "DEC"),
        2
    );
}
