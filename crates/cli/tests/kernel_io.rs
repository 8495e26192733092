//! `dtrace` with the `io` provider (root, BPF, tracefs, the kernel's BTF and loop devices; skipped
//! otherwise): real block I/O to a loop device made for the test, written and read with O_DIRECT
//! so that every `dd` block is one request, is seen by `io:::start` with DTrace's `bufinfo_t` and
//! `devinfo_t` arguments (device name, direction, byte count), and `io:::done` fires once for each
//! request `io:::start` saw. The probes are listed with their translated argument types.

mod common;
use common::dtrace;
use std::path::PathBuf;
use std::process::Command;

fn ready(test: &str) -> bool {
    common::kernel_ok(test)
        && common::have_btf(test)
        && dtrace_testkit::skip_unless(
            std::path::Path::new("/sys/kernel/tracing/events/block/block_rq_issue").exists()
                || std::path::Path::new("/sys/kernel/debug/tracing/events/block/block_rq_issue")
                    .exists(),
            test,
            "no block tracepoints",
        )
}

/// A loop device over a file of the test's own, detached (and the file removed) when dropped.
struct Loop {
    dev: String,
    file: PathBuf,
}

impl Loop {
    /// A 1 MiB loop device, or `None` (with the reason printed) where the machine cannot make one.
    fn new(test: &str) -> Option<Loop> {
        let file = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("{test}-{}.img", std::process::id()));
        std::fs::write(&file, vec![0u8; 1 << 20]).unwrap();
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&file)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Loop {
                dev: String::from_utf8_lossy(&o.stdout).trim().to_string(),
                file,
            }),
            other => {
                let _ = std::fs::remove_file(&file);
                eprintln!("skipping {test}: cannot set up a loop device ({other:?})");
                None
            }
        }
    }

    /// The device's name as `devinfo_t.dev_statname` gives it (`loop3`).
    fn statname(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
        let _ = std::fs::remove_file(&self.file);
    }
}

#[test]
fn io_probes_are_listed_with_translated_argument_types() {
    if !ready("io_probes_are_listed_with_translated_argument_types") {
        return;
    }
    let (rc, out, err) = dtrace(&["-l", "-P", "io"]);
    assert_eq!(rc, 0, "{err}");
    let names: Vec<String> = out
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            format!("{}:{}", f[1], f[f.len() - 1])
        })
        .collect();
    assert_eq!(names, ["io:start", "io:done"], "{out}");
    for p in ["io:::start", "io:::done"] {
        let (rc, out, err) = dtrace(&["-lv", "-n", p]);
        assert_eq!(rc, 0, "{err}");
        let args: Vec<&str> = out
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("args["))
            .collect();
        assert_eq!(
            args,
            [
                "args[0]: bufinfo_t *",
                "args[1]: devinfo_t *",
                "args[2]: fileinfo_t *"
            ],
            "{out}"
        );
        // The io provider's stability (the Dynamic Tracing Guide's table): the arguments are
        // Evolving/Evolving/ISA as the probe names are.
        let attrs = out
            .split("Argument Attributes")
            .nth(1)
            .and_then(|s| s.split("Argument Types").next())
            .unwrap_or_default();
        let attrs: Vec<&str> = attrs
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(
            attrs,
            [
                "Identifier Names: Evolving",
                "Data Semantics:   Evolving",
                "Dependency Class: ISA"
            ],
            "{out}"
        );
    }
}

/// Runs `dd` under `dtrace -q` with `program` and returns the output lines.
fn traced_dd(program: &str, dd: &str) -> Vec<String> {
    let (rc, out, err) = dtrace(&["-q", "-n", program, "-c", dd]);
    assert_eq!(rc, 0, "{err}");
    assert!(!err.contains("error"), "{err}");
    out.lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn direct_writes_and_reads_of_a_loop_device_are_counted_with_their_bytes() {
    let test = "direct_writes_and_reads_of_a_loop_device_are_counted_with_their_bytes";
    if !ready(test) {
        return;
    }
    let Some(lo) = Loop::new(test) else { return };
    let name = lo.statname();
    // Only this device's requests: udev may read a new loop device at any time, so writes are
    // checked for the write test and reads for the read test.
    let program = format!(
        r#"io:::start /args[1]->dev_statname == "{name}"/ {{
            @n[args[1]->dev_statname, args[0]->b_flags & B_READ ? "R" : "W"] = count();
            @b[args[0]->b_flags & B_READ ? "R" : "W"] = sum(args[0]->b_bcount);
            started[arg0] = 1;
        }}
        io:::done /started[arg0]/ {{
            @d[args[0]->b_flags & B_READ ? "R" : "W", args[1]->dev_pathname] = count();
            started[arg0] = 0;
        }}
        END {{
            printa("start %s %s %@d\n", @n);
            printa("bytes %s %@d\n", @b);
            printa("done %s %s %@d\n", @d);
        }}"#
    );
    let dd = format!(
        "dd if=/dev/zero of={} bs=4k count=64 oflag=direct status=none",
        lo.dev
    );
    let lines = traced_dd(&program, &dd);
    let path = &lo.dev;
    for want in [
        format!("start {name} W 64"),
        "bytes W 262144".to_string(),
        format!("done W {path} 64"),
    ] {
        assert!(lines.contains(&want), "{want} in {lines:?}");
    }
    let dd = format!(
        "dd if={} of=/dev/null bs=8k count=16 iflag=direct status=none",
        lo.dev
    );
    let lines = traced_dd(&program, &dd);
    for want in [
        format!("start {name} R 16"),
        "bytes R 131072".to_string(),
        format!("done R {path} 16"),
    ] {
        assert!(lines.contains(&want), "{want} in {lines:?}");
    }
}

#[test]
fn device_numbers_and_the_missing_file_are_what_the_kernel_says() {
    let test = "device_numbers_and_the_missing_file_are_what_the_kernel_says";
    if !ready(test) {
        return;
    }
    let Some(lo) = Loop::new(test) else { return };
    let name = lo.statname();
    let sys = std::fs::read_to_string(format!("/sys/block/{name}/dev")).unwrap();
    let (major, minor) = sys.trim().split_once(':').unwrap();
    let (major, minor): (u64, u64) = (major.parse().unwrap(), minor.parse().unwrap());
    let program = format!(
        r#"io:::start /args[1]->dev_statname == "{name}"/ {{
            @[args[1]->dev_major, args[1]->dev_minor, args[0]->b_edev, args[2]->fi_name,
              args[0]->b_bufsize] = count();
        }}
        END {{ printa("%d %d %d %s %d %@d\n", @); }}"#
    );
    let dd = format!(
        "dd if=/dev/zero of={} bs=16k count=3 oflag=direct status=none",
        lo.dev
    );
    let lines = traced_dd(&program, &dd);
    // The kernel's dev_t: major << 20 | minor.
    let want = format!("{major} {minor} {} <none> 16384 3", (major << 20) | minor);
    assert!(lines.contains(&want), "{want} in {lines:?}");
}

#[test]
fn the_classic_execname_one_liner_counts_dd() {
    let test = "the_classic_execname_one_liner_counts_dd";
    if !ready(test) {
        return;
    }
    let Some(lo) = Loop::new(test) else { return };
    let dd = format!(
        "dd if=/dev/zero of={} bs=4k count=32 oflag=direct status=none",
        lo.dev
    );
    let (rc, out, err) = dtrace(&["-n", "io:::start { @[execname] = count(); }", "-c", &dd]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.starts_with("dtrace: description 'io:::start ' matched 1 probe\n"),
        "{err}"
    );
    let dd_count: Option<u64> = out.lines().find_map(|l| {
        let (name, n) = l.trim().rsplit_once(' ')?;
        (name.trim() == "dd").then(|| n.trim().parse().ok())?
    });
    // Every request of dd's 32 direct writes is issued in dd's own context; other I/O of the
    // machine may add to it (the root file system's, for instance).
    assert!(dd_count.is_some_and(|n| n >= 32), "{out}");
}
