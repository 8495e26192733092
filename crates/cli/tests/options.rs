//! DTrace for Linux's option set through `-x`, pragmas and the environment: the messages of bad names
//! and values, and the options that change what is recorded or printed (`maxframes`, `noresolve`).

use std::process::Command;

mod common;
use common::kernel_ok;

fn dtrace(args: &[&str]) -> (i32, String, String) {
    common::dtrace_plain(&[], args)
}

#[test]
fn libdtrace_messages_for_bad_options() {
    let (rc, _, err) = dtrace(&["-x", "bufsize=-1", "-n", "BEGIN"]);
    assert_eq!(
        (rc, err.as_str()),
        (
            1,
            "dtrace: failed to set -x bufsize: Invalid value for specified option\n"
        )
    );
    let (rc, _, err) = dtrace(&["-x", "lockmem", "-n", "BEGIN"]);
    assert_eq!(
        (rc, err.as_str()),
        (
            1,
            "dtrace: failed to set -x lockmem: Invalid value for specified option\n"
        )
    );
    for opt in ["stdc=X", "strsize=1", "linkmode=foo", "evaltime=later"] {
        let (rc, _, err) = dtrace(&["-x", opt, "-n", "BEGIN"]);
        let name = opt.split('=').next().unwrap();
        assert_eq!(
            (rc, err),
            (
                1,
                format!("dtrace: failed to set -x {name}: Invalid value for specified option\n")
            )
        );
    }
    let (rc, _, err) = dtrace(&["-x", "nosuchoption", "-n", "BEGIN"]);
    assert_eq!(
        (rc, err.as_str()),
        (
            1,
            "dtrace: failed to set -x nosuchoption: Invalid option name\n"
        )
    );
}

#[test]
fn dtrace_for_linux_options_are_accepted() {
    for opt in [
        "lockmem=unlimited",
        "lockmem=256m",
        "maxframes=10",
        "noresolve",
        "scratchsize=0x100",
        "pcapsize=1k",
        "bpflogsize=1t",
        "quietresize",
    ] {
        let (rc, out, err) = dtrace(&["-x", opt, "-qn", "BEGIN { trace(1); exit(0); }"]);
        assert_eq!((rc, out.as_str(), err.as_str()), (0, "1\n", ""), "{opt}");
    }
}

#[test]
fn options_without_their_mechanism_are_refused() {
    let (rc, _, err) = dtrace(&["-x", "ctfpath=/nonexistent", "-n", "BEGIN"]);
    assert_eq!(rc, 1);
    assert_eq!(
        err,
        "dtrace: failed to set -x ctfpath: not yet supported: a CTF archive path (ctfpath); types come from BTF\n"
    );
}

#[test]
fn pragma_option_names_are_checked_against_the_same_table() {
    let (rc, _, err) = dtrace(&[
        "-n",
        "#pragma D option noresolve\n#pragma D option nosuch\nBEGIN { exit(0); }",
    ]);
    assert_eq!(rc, 1);
    assert!(
        err.ends_with(": failed to set option 'nosuch': Invalid option name\n"),
        "{err}"
    );
}

/// `-x noresolve` (DTrace for Linux): user addresses print as `object:0xoffset` into the
/// mapping that holds them, in stacks, `uaddr()` and `%A` alike.
#[test]
fn noresolve_prints_user_addresses_as_object_offsets() {
    if !kernel_ok("noresolve_prints_user_addresses_as_object_offsets") {
        return;
    }
    let prog = "syscall::exit_group:entry /pid == $target/ \
                { ustack(1); uaddr(ucaller); printf(\"\\n%A\\n\", ucaller); }";
    let (rc, out, err) = dtrace(&["-x", "noresolve", "-qc", "/bin/true", "-n", prog]);
    assert_eq!(rc, 0, "{err}");
    let words: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(words.len(), 3, "{out:?}");
    for w in words {
        let (object, off) = w.split_once(':').unwrap_or_else(|| panic!("{out:?}"));
        assert!(object.starts_with("libc.so"), "{out:?}");
        let hex = off.strip_prefix("0x").unwrap_or_else(|| panic!("{out:?}"));
        assert!(u64::from_str_radix(hex, 16).is_ok(), "{out:?}");
    }
    let (rc, out, _) = dtrace(&["-qc", "/bin/true", "-n", prog]);
    assert_eq!(rc, 0);
    assert!(out.contains("libc.so.6`"), "{out:?}");
}

#[test]
fn maxframes_caps_the_default_stack_depth() {
    if !kernel_ok("maxframes_caps_the_default_stack_depth") {
        return;
    }
    let prog = "syscall::exit_group:entry /pid == $target/ { ustack(); }";
    let (rc, out, err) = dtrace(&["-x", "maxframes=1", "-qc", "/bin/true", "-n", prog]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out.trim().lines().count(), 1, "{out:?}");
}

#[test]
fn argref_allows_unreferenced_macro_arguments() {
    let (rc, out, err) = dtrace(&["-x", "argref", "-qn", "BEGIN { exit(0); }", "1234"]);
    assert_eq!((rc, out.as_str(), err.as_str()), (0, "\n", ""));
}

#[test]
fn command_line_only_options_are_refused_in_pragmas() {
    let (rc, _, err) = dtrace(&[
        "-xerrtags",
        "-n",
        "#pragma D option ldpath=/nonexistent\nBEGIN { exit(0); }",
    ]);
    assert_eq!(rc, 1);
    assert!(err.contains("[D_PRAGMA_OPTSET] "), "{err}");
    assert!(
        err.ends_with(
            "failed to set option 'ldpath' to '/nonexistent': Option cannot be used from within a D program\n"
        ),
        "{err}"
    );
}

#[test]
fn scratchsize_bounds_alloca() {
    let prog = "#pragma D option scratchsize=64\nBEGIN { sz = 65; alloca(sz); exit(0); } ERROR { exit(1); }";
    let (rc, _, err) = dtrace(&["-qn", prog]);
    assert_eq!(rc, 1, "{err}");
    let prog = "#pragma D option scratchsize=64\nBEGIN { sz = 64; alloca(sz); exit(0); } ERROR { exit(1); }";
    let (rc, _, err) = dtrace(&["-qn", prog]);
    assert_eq!(rc, 0, "{err}");
}

/// `strsize` counts a string's characters, not its NUL (DTrace for Linux keeps `strsize` characters
/// and the NUL): constants, built-in results and `strjoin` are cut to `strsize` characters, and a
/// string whose record is four or eight bytes still prints as a string.
#[test]
fn strsize_counts_characters_not_the_nul() {
    let (rc, out, err) = dtrace(&[
        "-q",
        "-x",
        "strsize=5",
        "-n",
        r#"BEGIN { trace("abcdefgh"); trace("|"); trace(lltostr(-1234567)); trace("|");
            trace(strjoin("dtr", "acebegin")); trace("|"); trace(strlen("0123456789")); exit(0); }"#,
    ]);
    assert_eq!((rc, out.as_str()), (0, "abcde|-1234|dtrac|5\n"), "{err}");
    for (size, s) in [("4", "abcd"), ("7", "abcdefg")] {
        let prog = format!(r#"BEGIN {{ self->x = "{s}"; trace(self->x); exit(0); }}"#);
        let (rc, out, err) = dtrace(&["-q", "-x", &format!("strsize={size}"), "-n", &prog]);
        assert_eq!((rc, out.trim_end()), (0, s), "{err}");
    }
}

/// The buffers are read at `switchrate`, also after a `setopt()` changes it: once it is ten
/// seconds, the records of the later firings are read when the run stops, and each `printa()`
/// among them shows the aggregation as it is then.
#[test]
fn setopt_of_switchrate_takes_effect_while_tracing() {
    let (rc, out, err) = dtrace(&[
        "-q",
        "-x",
        "switchrate=1ms",
        "-n",
        "tick-50ms { i++; @ = count(); printa(\"%@d\\n\", @); } \
         tick-50ms /i == 2/ { setopt(\"switchrate\", \"10sec\"); } \
         tick-50ms /i == 8/ { exit(0); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    let values: Vec<u64> = out
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.trim().parse().expect(l))
        .collect();
    assert_eq!(values.len(), 8, "{out}");
    assert!(values[0] < 8, "{out}");
    assert!(values[2..].iter().all(|v| *v == 8), "{out}");
}

/// `-x core` (and `#pragma D option core`): dtrace says it is forcing a core dump and aborts as it
/// exits, with its core size limit lifted; where the kernel's `core_pattern` is a plain `core`,
/// the core file is left in the working directory.
#[test]
fn core_option_dumps_core_at_exit() {
    use std::os::unix::process::ExitStatusExt;
    const SIGABRT: i32 = 6;
    let pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default();
    for (i, args) in [
        vec!["-xcore", "-n", "BEGIN { exit(0); }"],
        vec!["-n", "#pragma D option core\nBEGIN { exit(0); }"],
    ]
    .into_iter()
    .enumerate()
    {
        let dir = common::test_dir(&format!("core-{i}"));
        let o = Command::new(env!("CARGO_BIN_EXE_dtrace"))
            .args(&args)
            .current_dir(&dir)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.signal(), Some(SIGABRT), "{err}");
        assert!(
            err.ends_with("libdtrace DEBUG: [ forcing coredump ]\n"),
            "{err}"
        );
        if pattern.trim() == "core" {
            assert!(dir.join("core").is_file(), "no core in {}", dir.display());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// An `aggrate` that is set makes `printa()` show the snapshot taken at that rate, as DTrace's
/// (Oracle's `options/tst.aggrate-slow.d`): with an hour, the snapshot taken once BEGIN's records
/// are read, the exiting firing's `printa()` included (DTrace's last read after the stop takes its
/// snapshot at the same rate). Left at its default, each `printa()` shows the aggregation as
/// fresh as its record.
#[test]
fn an_aggrate_that_is_set_spaces_the_snapshots_printa_shows() {
    let prog = "BEGIN { @ = count(); } \
                tick-200ms { @ = count(); printa(\"%@d\\n\", @); } \
                tick-200ms /++i == 5/ { exit(0); }";
    let run = |extra: &[&str]| {
        let mut args = vec!["-q", "-x", "switchrate=1ms"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-n", prog]);
        let (rc, out, err) = dtrace(&args);
        assert_eq!(rc, 0, "{err}");
        let values: Vec<u64> = out
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.trim().parse().expect(l))
            .collect();
        assert_eq!(values.len(), 5, "{out}");
        values
    };
    let stale = run(&["-x", "aggrate=3600s"]);
    assert_eq!(stale[0], 1, "{stale:?}");
    assert!(stale.iter().all(|v| *v == 1), "{stale:?}");
    let fresh = run(&[]);
    assert_eq!(fresh[4], 6, "{fresh:?}");
    assert!(
        fresh[0] >= 2 && fresh.windows(2).all(|w| w[0] <= w[1]),
        "{fresh:?}"
    );
}

/// The CPU ids `0..=max online` (DTrace's `max_cpuid + 1` CPUs).
fn cpu_ids() -> std::ops::Range<u32> {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let max = online
        .trim()
        .split([',', '-'])
        .filter_map(|n| n.parse::<u32>().ok())
        .max()
        .unwrap();
    0..max + 1
}

/// `aggpercpu` (DTrace for Linux's `dt_print_aggs`): under each value of the default layout, one
/// line per CPU, `\n    [CPU n]` then that CPU's value in the value's layout; a CPU that never
/// updated the entry shows the function's initial value (zero; for `min()` the largest 64-bit
/// integer, for `max()` the smallest).
#[test]
fn aggpercpu_prints_every_cpus_value_under_each_value() {
    let (rc, out, err) = dtrace(&[
        "-x",
        "aggpercpu",
        "-qn",
        "BEGIN { printf(\"%d\\n\", cpu); @c = count(); @m = min(5); @x = max(7); @s[3] = sum(4); \
         exit(0); }",
    ]);
    assert_eq!((rc, err.as_str()), (0, ""), "{out}");
    let cpu: u32 = out.lines().next().unwrap().parse().unwrap();
    let percpu = |v: i64, init: i64| -> String {
        cpu_ids()
            .map(|c| format!("\n    [CPU {c}] {:>16}", if c == cpu { v } else { init }))
            .collect()
    };
    let expected = format!(
        "{cpu}\n\n {:>16}{}\n {:>16}{}\n {:>16}{}\n {:>8} {:>16}{}\n",
        1,
        percpu(1, 0),
        5,
        percpu(5, i64::MAX),
        7,
        percpu(7, i64::MIN),
        3,
        4,
        percpu(4, 0),
    );
    assert_eq!(out, expected);
    // printa() without a format prints them too (and the end of the run no more: it was
    // printed); with a format it does not.
    let (rc, out, err) = dtrace(&[
        "-x",
        "aggpercpu",
        "-qn",
        "BEGIN { printf(\"%d\\n\", cpu); @c = count(); printa(@c); printa(\"%@d\\n\", @c); \
         exit(0); }",
    ]);
    assert_eq!((rc, err.as_str()), (0, ""), "{out}");
    let cpu: u32 = out.lines().next().unwrap().parse().unwrap();
    let lines: String = cpu_ids()
        .map(|c| format!("\n    [CPU {c}] {:>16}", u32::from(c == cpu)))
        .collect();
    assert_eq!(out, format!("{cpu}\n\n {:>16}{lines}\n1\n\n", 1));
}
