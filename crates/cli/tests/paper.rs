//! The DTrace paper's kernel-probe examples (Cantrill, Shapiro, Leventhal, USENIX 2004) in their Linux
//! form, end to end through `dtrace -c` on a program compiled here (root, BPF, tracefs and gcc;
//! skipped otherwise): write(2) counts by execname, `quantize(arg2)` of write sizes per file
//! descriptor, the thread-local read(2) latency script (Figure 1, and its quantize form), and the
//! Xsun mmap count by pid and file descriptor with its `printa` table. The program makes a known
//! set of calls under names it gives itself (`prctl(PR_SET_NAME)`, so the loader's own calls stay
//! out), which makes the outputs exact: headers, keys, counts and graph rows.

mod common;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// `paperprog MODE`: makes the calls of one example.
const PROG: &str = r#"
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
static char buf[8192];
static void named(const char *name) { prctl(PR_SET_NAME, name, 0, 0, 0); }
static void child_writes(const char *name, int fd, int n) {
    pid_t p = fork();
    if (p == 0) {
        named(name);
        for (int i = 0; i < n; i++) write(fd, buf, 1);
        _exit(0);
    }
    waitpid(p, 0, 0);
}
int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    int null = open("/dev/null", O_WRONLY);
    if (!strcmp(mode, "names")) {
        named("tee");
        for (int i = 0; i < 3; i++) write(null, buf, 1);
        child_writes("sshd", null, 7);
        child_writes("make.bin", null, 11);
    } else if (!strcmp(mode, "sizes")) {
        /* fd 5, as in the paper; sizes 1 x1, 3 x2, 100 x4, 1000 x8, 5000 x3 */
        dup2(null, 5);
        named("sshd");
        int sizes[] = {1, 3, 100, 1000, 5000};
        int counts[] = {1, 2, 4, 8, 3};
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < counts[i]; j++) write(5, buf, sizes[i]);
        write(null, buf, 2048); /* another descriptor, another graph */
    } else if (!strcmp(mode, "reads")) {
        int z = open("/dev/zero", O_RDONLY);
        named("reader");
        for (int i = 0; i < 10; i++) read(z, buf, 64);
    } else if (!strcmp(mode, "mmap")) {
        /* /dev/zero on descriptor 4, as the X servers had it */
        int z = open("/dev/zero", O_RDWR);
        dup2(z, 4);
        named("Xsun");
        for (int i = 0; i < 7; i++) mmap(0, 4096, PROT_READ, MAP_PRIVATE, 4, 0);
        dup2(z, 6);
        for (int i = 0; i < 3; i++) mmap(0, 4096, PROT_READ, MAP_PRIVATE, 6, 0);
    }
    return 0;
}
"#;

fn kernel_ok(test: &str) -> bool {
    common::kernel_ok(test) && common::have_gcc(test)
}

/// The test program, compiled once.
fn prog() -> &'static PathBuf {
    static PROG_PATH: OnceLock<PathBuf> = OnceLock::new();
    PROG_PATH
        .get_or_init(|| common::compile_c(&common::test_dir("paper"), "paperprog", PROG, &["-O1"]))
}

struct Run {
    stdout: String,
    stderr: String,
}

/// Runs `dtrace` with `args` and `-c 'paperprog MODE'`; it must succeed.
fn run(args: &[&str], mode: &str) -> Run {
    let cmd = format!("{} {mode}", prog().display());
    let o = Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .args(args)
        .args(["-c", &cmd])
        .output()
        .unwrap();
    let r = Run {
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    };
    assert_eq!(o.status.code(), Some(0), "{}", r.stderr);
    r
}

/// Writes a D script to a temporary file named `name`.
fn script(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dtrace-cli-paper-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The default aggregation line of a key and a count.
fn agg_line(key: &str, n: u64) -> String {
    format!("  {key:<52}{n:>15}\n")
}

#[test]
fn write_counts_by_execname() {
    if !kernel_ok("write_counts_by_execname") {
        return;
    }
    // write.d, limited to the target and its children.
    let d = script(
        "write.d",
        "syscall::write:entry\n/pid == $target || ppid == $target/\n{\n\t@counts[execname] = count();\n}\n",
    );
    let path = d.display().to_string();
    let r = run(&["-s", &path], "names");
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(
        lines[0],
        format!("dtrace: script '{path}' matched 1 probe"),
        "{}",
        r.stderr
    );
    assert_eq!(
        r.stdout,
        format!(
            "\n{}{}{}",
            agg_line("tee", 3),
            agg_line("sshd", 7),
            agg_line("make.bin", 11)
        )
    );
}

#[test]
fn quantize_of_write_sizes_per_descriptor() {
    if !kernel_ok("quantize_of_write_sizes_per_descriptor") {
        return;
    }
    let r = run(
        &[
            "-n",
            "syscall::write:entry /execname == \"sshd\" && pid == $target/ { @[arg0] = quantize(arg2); }",
        ],
        "sizes",
    );
    assert_eq!(
        r.stderr.lines().next(),
        Some("dtrace: description 'syscall::write:entry ' matched 1 probe")
    );
    // Keys print in order of their totals: descriptor 3 (one write) before 5 (eighteen).
    let expected = "                3
           value  ------------- Distribution ------------- count    
            1024 |                                         0        
            2048 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@ 1        
            4096 |                                         0        

                5
           value  ------------- Distribution ------------- count    
               0 |                                         0        
               1 |@@                                       1        
               2 |@@@@                                     2        
               4 |                                         0        
               8 |                                         0        
              16 |                                         0        
              32 |                                         0        
              64 |@@@@@@@@@                                4        
             128 |                                         0        
             256 |                                         0        
             512 |@@@@@@@@@@@@@@@@@@                       8        
            1024 |                                         0        
            2048 |                                         0        
            4096 |@@@@@@@                                  3        
            8192 |                                         0        

";
    assert_eq!(r.stdout, format!("\n{expected}"));
}

/// The rows of a quantize graph: (value, count).
fn graph_rows(out: &str) -> Vec<(i64, u64)> {
    out.lines()
        .filter_map(|l| {
            let (value, rest) = l.split_once(" |")?;
            let value = value.trim().parse().ok()?;
            let count = rest.split_whitespace().last()?.parse().ok()?;
            Some((value, count))
        })
        .collect()
}

#[test]
fn read_latency_with_a_thread_local_variable() {
    if !kernel_ok("read_latency_with_a_thread_local_variable") {
        return;
    }
    // Figure 1, as it prints.
    let r = run(
        &[
            "-q",
            "-n",
            "syscall::read:entry /execname == \"reader\" && pid == $target/ { self->t = timestamp; }
             syscall::read:return /self->t != 0/ { printf(\"%d/%d spent %d nsecs in read\\n\", pid, tid, timestamp - self->t); self->t = 0; }",
        ],
        "reads",
    );
    let lines: Vec<&str> = r.stdout.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 10, "{}", r.stdout);
    let first: Vec<&str> = lines[0].split(' ').collect();
    let (pid, tid) = first[0].split_once('/').unwrap();
    assert_eq!(pid, tid, "a single-threaded program: {}", r.stdout);
    for l in &lines {
        let rest = l
            .strip_prefix(&format!("{pid}/{tid} spent "))
            .and_then(|r| r.strip_suffix(" nsecs in read"))
            .unwrap_or_else(|| panic!("bad line {l:?}"));
        assert!(rest.parse::<u64>().unwrap() > 0, "{l}");
    }

    // The same latencies as a distribution.
    let r = run(
        &[
            "-n",
            "syscall::read:entry /execname == \"reader\" && pid == $target/ { self->ts = timestamp; }
             syscall::read:return /self->ts/ { @[\"read\"] = quantize(timestamp - self->ts); self->ts = 0; }",
        ],
        "reads",
    );
    let mut lines = r.stdout.lines();
    assert_eq!(lines.next(), Some(""));
    assert_eq!(lines.next(), Some(format!("  {:<50}", "read").as_str()));
    assert_eq!(
        lines.next(),
        Some("           value  ------------- Distribution ------------- count    ")
    );
    let rows = graph_rows(&r.stdout);
    assert!(rows.len() >= 3, "{}", r.stdout);
    // Zero rows bracket the data; the values double from row to row; every read is counted once.
    assert_eq!(rows[0].1, 0, "{}", r.stdout);
    assert_eq!(rows[rows.len() - 1].1, 0, "{}", r.stdout);
    for w in rows.windows(2) {
        assert!(
            w[1].0 == w[0].0 * 2 || (w[0].0 == 0 && w[1].0 == 1),
            "{}",
            r.stdout
        );
    }
    assert_eq!(rows.iter().map(|r| r.1).sum::<u64>(), 10, "{}", r.stdout);
    assert!(rows.iter().all(|r| r.0 > 0), "latencies are positive");
}

#[test]
fn xsun_mmaps_by_pid_and_descriptor() {
    if !kernel_ok("xsun_mmaps_by_pid_and_descriptor") {
        return;
    }
    let d = script(
        "xsun.d",
        r#"syscall::mmap:entry
/execname == "Xsun" && pid == $target/
{
        @[pid, arg4] = count();
}

END
{
        printf("%9s %13s %16s\n",
            "PID", "FD", "COUNT");
        printa("%9d %13d %16@d\n", @);
}
"#,
    );
    let r = run(&["-q", "-s", &d.display().to_string()], "mmap");
    let mut lines = r.stdout.lines();
    assert_eq!(
        lines.next(),
        Some("      PID            FD            COUNT")
    );
    let rows: Vec<&str> = lines.by_ref().take(2).collect();
    let pid = rows[0].split_whitespace().next().unwrap().to_string();
    assert!(pid.parse::<u32>().is_ok(), "{}", r.stdout);
    assert_eq!(
        rows,
        vec![
            format!("{pid:>9} {:>13} {:>16}", 6, 3),
            format!("{pid:>9} {:>13} {:>16}", 4, 7)
        ],
        "{}",
        r.stdout
    );
    // printa() printed the aggregation: nothing is left to print at the end.
    assert_eq!(lines.collect::<Vec<_>>(), vec![""], "{}", r.stdout);
}
