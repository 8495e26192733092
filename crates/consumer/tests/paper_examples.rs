//! The DTrace paper's examples (Cantrill, Shapiro, Leventhal, USENIX 2004: shared/spec/001_*.txt) run
//! unchanged through the whole pipeline — D compiler, framework, consumer — over providers that fire
//! the paper's probes with the paper's data, and print what the paper prints. The probes are
//! synthetic (no kernel is needed: the `linux` crate and `cli` kernel tests run the Linux forms on the
//! live kernel); the scripts, the option handling and every byte of output are the real thing.
//!
//! Where DTrace's output changed after 2004 the test expects today's DTrace and says so: the quantize
//! graph is 40 columns wide (the paper's was 32), and aggregation rows with equal values are ordered by
//! key (the paper's 2004 build left ties unordered).

mod synthetic;
use synthetic::{Run, Synthetic};

use dtrace_framework::{CapturedMemory, FiringContext};

/// A firing by process `pid` (thread `tid`) of `execname` with arguments `args`.
fn ctx(execname: &str, pid: u64, tid: u64, args: &[u64]) -> FiringContext {
    let mut c = FiringContext {
        pid,
        tid,
        execname: execname.into(),
        ..Default::default()
    };
    c.args[..args.len()].copy_from_slice(args);
    c
}

fn syscalls(names: &[&str]) -> Synthetic {
    let probes: Vec<(&str, &str, &str)> = names
        .iter()
        .flat_map(|n| [("", *n, "entry"), ("", *n, "return")])
        .collect();
    Synthetic::new("syscall", &probes)
}

/// §6.2: write(2) calls counted by application name ("write.d").
#[test]
fn write_counts_by_execname() {
    let mut r = Run::start(
        vec![syscalls(&["write", "read"])],
        "syscall::write:entry\n{\n        @counts[execname] = count();\n}\n",
        &[],
    );
    let table: &[(&str, u64)] = &[
        ("dtrace", 1),
        ("cat", 4),
        ("sed", 9),
        ("head", 9),
        ("grep", 14),
        ("find", 15),
        ("tail", 25),
        ("mountd", 28),
        ("expr", 72),
        ("sh", 291),
        ("tee", 814),
        ("sshd", 1996),
        ("make.bin", 2010),
    ];
    for (i, (name, n)) in table.iter().enumerate() {
        for _ in 0..*n {
            r.fire(
                "syscall::write:entry",
                ctx(name, 100 + i as u64, 1, &[1, 0, 8]),
            );
        }
        // Reads are not counted.
        r.fire(
            "syscall::read:entry",
            ctx(name, 100 + i as u64, 1, &[0, 0, 8]),
        );
    }
    assert_eq!(
        r.finish(),
        "\
         \x20 dtrace                                                            1\n\
         \x20 cat                                                               4\n\
         \x20 head                                                              9\n\
         \x20 sed                                                               9\n\
         \x20 grep                                                             14\n\
         \x20 find                                                             15\n\
         \x20 tail                                                             25\n\
         \x20 mountd                                                           28\n\
         \x20 expr                                                             72\n\
         \x20 sh                                                              291\n\
         \x20 tee                                                             814\n\
         \x20 sshd                                                           1996\n\
         \x20 make.bin                                                       2010\n"
    );
}

/// §6.2: the distribution of sshd's write sizes per file descriptor, `quantize(arg2)`.
#[test]
fn sshd_write_sizes_quantized_by_fd() {
    let mut r = Run::start(
        vec![syscalls(&["write"])],
        "syscall::write:entry\n/execname == \"sshd\"/\n{\n        @[arg0] = quantize(arg2);\n}\n",
        &[],
    );
    // fd 5: one write of 32-63 bytes, 13 of 256-511, 13 of 512-1023, 199 of 1024-2047.
    for (size, n) in [(40u64, 1), (300, 13), (700, 13), (1460, 199)] {
        for _ in 0..n {
            r.fire("syscall::write:entry", ctx("sshd", 77, 1, &[5, 0, size]));
        }
    }
    // Others' writes are filtered by the predicate.
    r.fire("syscall::write:entry", ctx("cat", 78, 1, &[5, 0, 1 << 20]));
    assert_eq!(
        r.finish(),
        "\
         \x20               5\n\
         \x20          value  ------------- Distribution ------------- count    \n\
         \x20             16 |                                         0        \n\
         \x20             32 |                                         1        \n\
         \x20             64 |                                         0        \n\
         \x20            128 |                                         0        \n\
         \x20            256 |@@                                       13       \n\
         \x20            512 |@@                                       13       \n\
         \x20           1024 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@      199      \n\
         \x20           2048 |                                         0        \n\
         \n"
    );
}

/// Figure 1: the time each thread spends in read(2), in a thread-local variable.
#[test]
fn figure1_thread_local_read_latency() {
    let script = "syscall::read:entry\n{\n        self->t = timestamp;\n}\n\n\
                  syscall::read:return\n/self->t != 0/\n{\n        printf(\"%d/%d spent %d nsecs in read\\n\",\n            pid, tid, timestamp - self->t);\n}\n";
    let mut r = Run::start(vec![syscalls(&["read"])], script, &[]);
    let at = |mut c: FiringContext, ts: u64| {
        c.timestamp = Some(ts);
        c
    };
    // Two threads of one process interleave; a return without an entry prints nothing.
    r.fire("syscall::read:return", at(ctx("cat", 1203, 2, &[]), 500));
    r.fire("syscall::read:entry", at(ctx("cat", 1203, 1, &[]), 1_000));
    r.fire("syscall::read:entry", at(ctx("cat", 1203, 2, &[]), 1_500));
    r.fire("syscall::read:return", at(ctx("cat", 1203, 1, &[]), 5_000));
    r.fire("syscall::read:return", at(ctx("cat", 1203, 2, &[]), 11_500));
    let out = r.finish();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "CPU     ID                    FUNCTION:NAME");
    let id = lines[1].split_whitespace().nth(1).expect("id").to_string();
    assert_eq!(
        out,
        format!(
            "CPU     ID                    FUNCTION:NAME\n\
             \x20 0 {id:>6}                      read:return 1203/1 spent 4000 nsecs in read\n\n\
             \x20 0 {id:>6}                      read:return 1203/2 spent 10000 nsecs in read\n\n"
        )
    );
}

/// The probes of Figures 2-4: user functions of the traced process and kernel functions.
fn fbt(funcs: &[&str]) -> Synthetic {
    let probes: Vec<(&str, &str, &str)> = funcs
        .iter()
        .flat_map(|f| [("genunix", *f, "entry"), ("genunix", *f, "return")])
        .collect();
    Synthetic::new("fbt", &probes)
}

/// Figure 4: speculative tracing of every kernel function called from ioctl(2) calls that fail,
/// printed with flowindent.
#[test]
fn figure4_speculation_commits_failing_ioctls_only() {
    let script = "#pragma D option flowindent\n\n\
                  syscall::ioctl:entry\n/pid != $pid/\n{\n        self->spec = speculation();\n}\n\n\
                  fbt:::\n/self->spec/\n{\n        speculate(self->spec);\n        printf(\"%s: %d\", execname, errno);\n}\n\n\
                  syscall::ioctl:return\n/self->spec && errno != 0/\n{\n        commit(self->spec);\n        self->spec = 0;\n}\n\n\
                  syscall::ioctl:return\n/self->spec && errno == 0/\n{\n        discard(self->spec);\n        self->spec = 0;\n}\n";
    let mut r = Run::start(
        vec![
            syscalls(&["ioctl"]),
            fbt(&[
                "ioctl",
                "getf",
                "set_active_fd",
                "fop_ioctl",
                "ufs_ioctl",
                "releasef",
            ]),
        ],
        script,
        &[],
    );
    let calls = |r: &mut Run, who: &str, pid: u64, errno: u64| {
        let c = || ctx(who, pid, 1, &[]);
        r.fire("syscall::ioctl:entry", c());
        for (f, n) in [
            ("ioctl", "entry"),
            ("getf", "entry"),
            ("set_active_fd", "entry"),
            ("set_active_fd", "return"),
            ("getf", "return"),
            ("fop_ioctl", "entry"),
            ("ufs_ioctl", "entry"),
            ("ufs_ioctl", "return"),
            ("fop_ioctl", "return"),
            ("releasef", "entry"),
            ("releasef", "return"),
            ("ioctl", "return"),
        ] {
            r.fire(&format!("fbt:genunix:{f}:{n}"), c());
        }
        let mut ret = c();
        ret.errno = errno;
        r.fire("syscall::ioctl:return", ret);
    };
    calls(&mut r, "sendmail", 300, 0); // succeeds: discarded
    calls(&mut r, "dhcpagent", 301, 25); // fails (ENOTTY): committed
                                         // dtrace itself ($pid, the consumer's process): never speculated.
    calls(&mut r, "dtrace", std::process::id() as u64, 25);
    assert_eq!(
        r.finish(),
        "CPU FUNCTION                                 \n\
         \x20 0  -> ioctl                                 dhcpagent: 0\n\
         \x20 0    -> getf                                dhcpagent: 0\n\
         \x20 0      -> set_active_fd                     dhcpagent: 0\n\
         \x20 0      <- set_active_fd                     dhcpagent: 0\n\
         \x20 0    <- getf                                dhcpagent: 0\n\
         \x20 0    -> fop_ioctl                           dhcpagent: 0\n\
         \x20 0      -> ufs_ioctl                         dhcpagent: 0\n\
         \x20 0      <- ufs_ioctl                         dhcpagent: 0\n\
         \x20 0    <- fop_ioctl                           dhcpagent: 0\n\
         \x20 0    -> releasef                            dhcpagent: 0\n\
         \x20 0    <- releasef                            dhcpagent: 0\n\
         \x20 0  <- ioctl                                 dhcpagent: 0\n"
    );
}

/// §7: open(2) path names counted, read from the process with `copyinstr(arg0)`.
#[test]
fn open_paths_counted_with_copyinstr() {
    let mut r = Run::start(
        vec![syscalls(&["open"])],
        "syscall::open:entry\n{\n        @files[copyinstr(arg0)] = count();\n}\n",
        &[],
    );
    for (path, n) in [("/etc/passwd", 3), ("/lib/libc.so.1", 1), ("/dev/zero", 2)] {
        for _ in 0..n {
            let addr = 0x8000_1000u64;
            let mut m = CapturedMemory::new();
            let mut bytes = path.as_bytes().to_vec();
            bytes.push(0);
            m.add(addr, bytes, true);
            r.fire_with("syscall::open:entry", ctx("sh", 9, 1, &[addr]), Some(m));
        }
    }
    assert_eq!(
        r.finish(),
        "\
         \x20 /lib/libc.so.1                                                    1\n\
         \x20 /dev/zero                                                         2\n\
         \x20 /etc/passwd                                                       3\n"
    );
}

/// §9: who induces cross-calls (sysinfo:::xcalls by execname), then which of Xsun's system calls do.
#[test]
fn section9_xcalls_by_execname_and_by_system_call() {
    let sysinfo = || Synthetic::new("sysinfo", &[("unix", "xc_common", "xcalls")]);
    let mut r = Run::start(
        vec![sysinfo()],
        "sysinfo:::xcalls\n{\n        @[execname] = count();\n}\n",
        &[],
    );
    for (who, n) in [("Xsun", 30), ("sched", 2), ("java", 5)] {
        for _ in 0..n {
            r.fire("sysinfo:unix:xc_common:xcalls", ctx(who, 1, 1, &[]));
        }
    }
    assert_eq!(
        r.finish(),
        "\
         \x20 sched                                                             2\n\
         \x20 java                                                              5\n\
         \x20 Xsun                                                             30\n"
    );

    let script = "syscall:::entry\n/execname == \"Xsun\"/\n{\n        self->sys = probefunc;\n}\n\n\
                  sysinfo:::xcalls\n/execname == \"Xsun\"/\n{\n        @[self->sys != NULL ?\n            self->sys : \"<none>\"] = count();\n}\n\n\
                  syscall:::return\n/self->sys != NULL/\n{\n        self->sys = NULL;\n}\n";
    let mut r = Run::start(vec![syscalls(&["munmap", "poll"]), sysinfo()], script, &[]);
    let x = || ctx("Xsun", 500, 1, &[]);
    for _ in 0..4 {
        r.fire("syscall::munmap:entry", x());
        r.fire("sysinfo:unix:xc_common:xcalls", x());
        r.fire("sysinfo:unix:xc_common:xcalls", x());
        r.fire("syscall::munmap:return", x());
    }
    r.fire("syscall::poll:entry", x());
    r.fire("sysinfo:unix:xc_common:xcalls", x());
    r.fire("syscall::poll:return", x());
    // Outside any system call (an interrupt, say).
    r.fire("sysinfo:unix:xc_common:xcalls", x());
    r.fire("sysinfo:unix:xc_common:xcalls", ctx("java", 7, 1, &[]));
    assert_eq!(
        r.finish(),
        "\
         \x20 <none>                                                            1\n\
         \x20 poll                                                              1\n\
         \x20 munmap                                                            8\n"
    );
}

/// §9: Xsun's mmap(2) calls by pid and file descriptor, printed by printa() at END: the paper's
/// table, byte for byte.
#[test]
fn section9_mmap_by_pid_and_fd_printa() {
    let script = "syscall::mmap:entry\n/execname == \"Xsun\"/\n{\n        @[pid, arg4] = count();\n}\n\n\
                  END\n{\n        printf(\"%9s %13s %16s\\n\",\n            \"PID\", \"FD\", \"COUNT\");\n        printa(\"%9d %13d %16@d\\n\", @);\n}\n";
    // dtrace -q: the table alone, as the paper shows it.
    let mut r = Run::start_with(vec![syscalls(&["mmap"])], script, &[], &["quiet"]);
    let table: &[(u64, u64)] = &[
        (26744, 50),
        (2219, 56),
        (64907, 65),
        (23468, 65),
        (45317, 68),
        (11077, 1684),
        (63574, 1780),
        (8477, 1826),
        (55758, 1850),
        (38710, 1907),
        (9973, 1948),
    ];
    for &(pid, n) in table {
        for _ in 0..n {
            r.fire(
                "syscall::mmap:entry",
                ctx("Xsun", pid, 1, &[0, 8192, 3, 2, 4, 0]),
            );
        }
        r.fire(
            "syscall::mmap:entry",
            ctx("Xvnc", pid + 1, 1, &[0, 8192, 3, 2, 4, 0]),
        );
    }
    assert_eq!(
        r.finish(),
        "      PID            FD            COUNT\n\
         \x20   26744             4               50\n\
         \x20    2219             4               56\n\
         \x20   23468             4               65\n\
         \x20   64907             4               65\n\
         \x20   45317             4               68\n\
         \x20   11077             4             1684\n\
         \x20   63574             4             1780\n\
         \x20    8477             4             1826\n\
         \x20   55758             4             1850\n\
         \x20   38710             4             1907\n\
         \x20    9973             4             1948\n"
    );
}

/// END's output comes after every other CPU's records drained with it: DTrace consumes the buffer
/// of the CPU END fired on (CPU 0 here) last.
#[test]
fn end_output_comes_last() {
    let mut r = Run::start_on(
        vec![syscalls(&["write"])],
        "syscall::write:entry { printf(\"w%d\\n\", cpu); } END { printf(\"end\\n\"); }",
        &[],
        &["quiet"],
        2,
    );
    r.work(); // a first consumption (BEGIN's CPU goes first in that one)
    r.fire_on("syscall::write:entry", ctx("sh", 1, 1, &[]), 1);
    r.fire_on("syscall::write:entry", ctx("sh", 1, 1, &[]), 0);
    // CPU 1's buffer, then END's CPU 0 (its own earlier record first).
    assert_eq!(r.finish(), "w1\nw0\nend\n");
}

/// BEGIN's output comes first even when the run has ended before anything was consumed: DTrace
/// consumes the BEGIN CPU's buffer first the first time (dt_consume_begin).
#[test]
fn begin_output_comes_first() {
    let mut r = Run::start_on(
        vec![syscalls(&["write"])],
        "BEGIN { printf(\"begin\\n\"); } syscall::write:entry { printf(\"w%d\\n\", cpu); }",
        &[],
        &["quiet"],
        2,
    );
    r.fire_on("syscall::write:entry", ctx("sh", 1, 1, &[]), 1);
    assert_eq!(r.finish(), "begin\nw1\n");
}
