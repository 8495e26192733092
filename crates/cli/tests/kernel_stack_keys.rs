//! Stack and symbol keys of aggregations kept in the kernel: `@[stack()]`, `@[sym(arg0)]`,
//! `@[usym(arg1)]`, `@[ufunc(arg0)]`... key per-CPU maps at the probe and print exactly what the
//! interpreter prints when the clause runs in dtrace (DTRACE_KERNEL_AGGREGATIONS=0), on a program
//! with known call chains; `ustack()` and `jstack()` keys are walked at the probe as dtrace
//! walks them (the longer of the frame-pointer walk and the `.eh_frame` walk), in programs
//! built without frame pointers too, a firing in code whose ranges are not loaded yet (a `-c`
//! command's first, a library opened after tracing started) handed over to dtrace
//! (DTRACE_KERNEL_USTACKS=0 keeps the keys in dtrace) (root, BPF, uprobes; gcc).

mod common;
use common::{clause_lines, compile_c, dtrace_with_env, have_gcc, kernel_ok, test_dir};
use std::path::PathBuf;

/// Writes through a call chain of its own (level1 -> level2 -> level3 -> write), and calls
/// `call` with a function pointer, 100 times each.
const CHAIN: &str = r#"
#include <fcntl.h>
#include <unistd.h>
static char buf[64];
static int fd;
__attribute__((noinline)) void level3(int i) {
    if (write(fd, buf, i % 7) < 0)
        _exit(1);
}
__attribute__((noinline)) void level2(int i) { level3(i); level3(i + 1); }
__attribute__((noinline)) void level1(int i) { level2(i); }
__attribute__((noinline)) void call(void (*f)(int), int i) { f(i); }
int main(void) {
    fd = open("/dev/null", O_WRONLY);
    for (int i = 0; i < 100; i++) {
        call(level1, i);
        call(level2, i);
    }
    return 0;
}
"#;

/// The chain program, with frame pointers in every function (leaves too) and at fixed
/// addresses (so `uaddr()` of its data prints the same in two runs).
fn chain(tag: &str) -> PathBuf {
    compile_c(
        &test_dir(tag),
        "chain",
        CHAIN,
        &[
            "-O1",
            "-g",
            "-no-pie",
            "-fno-omit-frame-pointer",
            "-mno-omit-leaf-frame-pointer",
            "-fcf-protection=none",
        ],
    )
}

/// Runs `script` on `cmd` with aggregations in the kernel and in dtrace (`env` set both
/// ways); asserts both succeed without drops and print the same non-empty output, and that
/// clause `n`'s aggregations ran in the kernel for each of `clauses`. Returns the output.
fn same_both_ways(env: &[(&str, &str)], script: &str, cmd: &str, clauses: &[usize]) -> String {
    same_both_ways_where(env, script, cmd, clauses, |l| {
        l.ends_with("aggregations run in the kernel at 1 probe")
    })
}

/// [`same_both_ways`], where a line of `-v` that `in_kernel` accepts tells that a clause ran
/// in the kernel.
fn same_both_ways_where(
    env: &[(&str, &str)],
    script: &str,
    cmd: &str,
    clauses: &[usize],
    in_kernel: impl Fn(&str) -> bool,
) -> String {
    let args = ["-qv", "-n", script, "-c", cmd];
    let (rc, kout, kerr) = dtrace_with_env(env, &args);
    assert_eq!(rc, 0, "{script}: {kerr}");
    for &n in clauses {
        assert!(
            clause_lines(&kerr, n).iter().any(|l| in_kernel(l)),
            "clause {n} of {script}: {kerr}"
        );
    }
    assert!(!kerr.contains("drop"), "{script}: {kerr}");
    let mut off = env.to_vec();
    off.push(("DTRACE_KERNEL_AGGREGATIONS", "0"));
    let (rc, iout, ierr) = dtrace_with_env(&off, &args);
    assert_eq!(rc, 0, "{script}: {ierr}");
    assert!(
        ierr.contains("are off (DTRACE_KERNEL_AGGREGATIONS=0)"),
        "{ierr}"
    );
    assert_eq!(kout, iout, "{script}: {kerr}");
    assert!(!kout.trim().is_empty(), "{script}");
    kout
}

#[test]
fn kernel_stack_and_symbol_keys_print_as_in_dtrace() {
    let t = "kernel_stack_and_symbol_keys_print_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let exe = chain("kstack-keys");
    let cmd = exe.display().to_string();
    let script = "syscall::write:entry /pid == $target/ { @k[stack()] = count(); \
        @s[execname, stack(3)] = count(); @a[uaddr(arg1)] = count(); \
        @u[usym(arg1), umod(arg1)] = count(); @y[sym(arg0), func(arg0), mod(arg0)] = count(); } \
        pid$target::call:entry { @f[ufunc(arg0)] = count(); @g[usym(arg0), arg1 % 3] = sum(arg1); }";
    let out = same_both_ways(&[], script, &cmd, &[1, 2]);
    // The system call's kernel path, its tracing frames cut: three frames of stack(3) show.
    assert!(out.contains("vmlinux`do_syscall_64+"), "{out}");
    let frames: Vec<&str> = out
        .lines()
        .skip_while(|l| l.trim() != "chain")
        .skip(1)
        .take_while(|l| l.contains('`'))
        .collect();
    assert_eq!(frames.len(), 3, "{out}");
    // The functions call() was given, 100 times each.
    for f in ["chain`level1", "chain`level2"] {
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == [f, "100"]),
            "{f}: {out}"
        );
    }
}

/// Program `name` (C source `src`) built without frame pointers (`-O2 -fomit-frame-pointer`):
/// the kernel's frame-pointer walk stops early in it, the `.eh_frame` walk does not.
fn without_frame_pointers(tag: &str, name: &str, src: &str) -> PathBuf {
    compile_c(
        &test_dir(tag),
        name,
        src,
        &["-O2", "-g", "-fomit-frame-pointer", "-fcf-protection=none"],
    )
}

/// Whether `out` holds a stack whose frames start with `chain` (in order, as prefixes).
fn has_stack(out: &str, chain: &[&str]) -> bool {
    out.split("\n\n").any(|s| {
        let frames: Vec<&str> = s.lines().map(str::trim).collect();
        frames.len() >= chain.len() && frames.iter().zip(chain).all(|(f, c)| f.starts_with(c))
    })
}

#[test]
fn ustack_keys_in_the_kernel_are_walked_as_in_dtrace() {
    let t = "ustack_keys_in_the_kernel_are_walked_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    // Built without frame pointers: only .eh_frame finds level3's callers at write(), in the
    // kernel as in dtrace (the -c command's first firing is handed over: its ranges are loaded
    // then).
    let exe = without_frame_pointers("kstack-ustack-nofp", "chain", CHAIN);
    let cmd = exe.display().to_string();
    let script = "syscall::write:entry /pid == $target/ { @[ustack()] = count(); \
        @e[execname, ustack(4)] = count(); @n = count(); } \
        pid$target::level3:entry { @l[ustack(3)] = count(); }";
    let out = same_both_ways(&[], script, &cmd, &[1, 2]);
    // (-O2 makes level1's and call's calls tail calls: they leave no frame.)
    for chain in [
        &[
            "libc.so.6`write+",
            "chain`level3+",
            "chain`level2+",
            "chain`main+",
        ][..],
        &["libc.so.6`write+", "chain`level3+", "chain`main+"],
        &["chain`level3", "chain`level2+", "chain`main+"],
    ] {
        assert!(has_stack(&out, chain), "{chain:?}: {out}");
    }
    // The walk comes before any clause running at the probe does anything that lasts (a
    // firing the walk cannot place goes to dtrace whole): with a counting clause before the
    // walking one, and with two walking clauses, each runs in the kernel, nothing counted twice
    // (the -c command's first firings are handed over), and prints as in dtrace.
    for script in [
        "syscall::write:entry /pid == $target/ { @n = count(); } \
         syscall::write:entry /pid == $target/ { @[ustack(3)] = count(); @m = count(); }",
        "syscall::write:entry /pid == $target/ { @[ustack(3)] = count(); } \
         syscall::write:entry /pid == $target/ { @b[ustack(2)] = count(); @n = count(); }",
        "syscall::write:entry /pid == $target/ { @[ustack(3)] = count(); } \
         syscall::write:entry /pid == $target && arg2 == 1/ { @b[ustack(2)] = count(); }",
    ] {
        let out = same_both_ways(&[], script, &cmd, &[1, 2]);
        assert!(out.contains("chain`level3+"), "{out}");
        // 400 writes: the counters count each once.
        assert!(
            out.lines().any(|l| l.trim() == "400") || script.contains("arg2 =="),
            "{script}: {out}"
        );
    }
    // A clause keeping variables in the kernel runs there too (an update whose stack the probe
    // cannot place goes to dtrace alone, which walks it), and prints the same; one reading
    // ucaller keeps them in dtrace, saying why.
    let script = "pid$target::level3:entry { self->n++; @[ustack(2), self->n > 100] = count(); }";
    let off = [("DTRACE_KERNEL_AGGREGATIONS", "0")];
    let (rc, kout, err) = dtrace_with_env(&[], &["-qv", "-n", script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        clause_lines(&err, 1).iter().any(|l| l.ends_with(
            "runs whole in the kernel at 1 probe (variables self->n live in the kernel)"
        )),
        "{err}"
    );
    let (rc, iout, err) = dtrace_with_env(&off, &["-qv", "-n", script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(kout, iout);
    assert!(kout.contains("chain`level2+"), "{kout}");
    let script =
        "pid$target::level3:entry { self->n++; @[ufunc(ucaller), self->n > 100] = count(); }";
    let (rc, kout, err) = dtrace_with_env(&[], &["-qv", "-n", script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        clause_lines(&err, 1)
            .iter()
            .any(|l| l.contains("variables stay in dtrace (at pid")
                && l.contains("it reads ucaller or ustackdepth")),
        "{err}"
    );
    let (rc, iout, err) = dtrace_with_env(&off, &["-qv", "-n", script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(kout, iout);
    // With frame pointers, inside level3's body, as well.
    let exe = chain("kstack-ustack");
    let cmd = exe.display().to_string();
    let script =
        "pid$target::level3:4 { @[ustack(3)] = count(); @e[execname, ustack(4)] = count(); }";
    let out = same_both_ways(&[], script, &cmd, &[1]);
    assert!(
        has_stack(
            &out,
            &["chain`level3+0x4", "chain`level2+", "chain`level1+"]
        ),
        "{out}"
    );
    // Kept in dtrace when asked, saying why.
    let script = "pid$target::level3:entry { @[ustack()] = count(); }";
    let env = [("DTRACE_KERNEL_USTACKS", "0")];
    let (rc, _, err) = dtrace_with_env(&env, &["-qv", "-n", script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        clause_lines(&err, 1).iter().any(|l| l
            .contains("aggregations run in dtrace (ustack() keys are walked in dtrace (DTRACE_KERNEL_USTACKS=0))")),
        "{err}"
    );
}

/// A C function of the traced programs below: `descend(d)` calls itself down `d` deep and writes
/// one byte to `fd` at the bottom (the recursion the deep stacks come from).
macro_rules! descend {
    () => {
        r#"
static char buf[8];
static int fd;
__attribute__((noipa)) int descend(int d) {
    if (d == 0) {
        if (write(fd, buf, 1) < 0)
            _exit(1);
        return 0;
    }
    return descend(d - 1) + 1;
}
"#
    };
}

/// Calls down a recursion `d` deep, for each `d` from 0 to 39, and writes at its bottom: user
/// stacks of every depth from a few frames to more than forty.
const DEEP: &str = concat!(
    "#include <fcntl.h>\n#include <unistd.h>\n",
    descend!(),
    r#"int main(void) {
    fd = open("/dev/null", O_WRONLY);
    for (int d = 0; d < 40; d++)
        descend(d);
    return 0;
}
"#
);

/// Stacks as deep as the short maps keep (`capture::spec::SHORT_STACK_WORDS`, 24 frame words)
/// and deeper under one aggregation: a stack is kept in the short maps or in the whole ones by
/// the frames the probe took, and each prints once, with its count, as in dtrace; with frame
/// pointers and without, and as the last key part beside another.
#[test]
fn stacks_deeper_than_the_short_maps_print_as_in_dtrace() {
    let t = "stacks_deeper_than_the_short_maps_print_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let common = [
        "-O1",
        "-g",
        "-fno-optimize-sibling-calls",
        "-fcf-protection=none",
    ];
    for (tag, fp) in [
        ("kstack-deep-fp", "-fno-omit-frame-pointer"),
        ("kstack-deep-nofp", "-fomit-frame-pointer"),
    ] {
        let mut flags = common.to_vec();
        flags.push(fp);
        let exe = compile_c(&test_dir(tag), "deep", DEEP, &flags);
        let cmd = exe.display().to_string();
        let script = "syscall::write:entry /pid == $target/ { @u[ustack()] = count(); \
            @e[execname, ustack(30)] = count(); @k[stack()] = count(); }";
        // (What dtrace loaded for the walk at the probe goes to stderr, which a failure shows.)
        let out = same_both_ways(&[("DTRACE_DEBUG", "1")], script, &cmd, &[1]);
        // @u: forty stacks, one per depth, each counted once, from write, descend()'s frames,
        // main and the start's frames (six) to 39 frames more.
        // @u's entries: frame lines up to a count (@e's start with execname, @k's are the
        // kernel's).
        let mut user = Vec::new();
        let (mut frames, mut other) = (0, false);
        for l in out.lines().map(str::trim) {
            if l.parse::<u64>().is_ok() {
                if !other && frames > 0 {
                    user.push(frames);
                }
                (frames, other) = (0, false);
            } else if l.starts_with("vmlinux`") {
                other = true;
            } else if l.contains('`') {
                frames += 1;
            } else if l == "deep" {
                other = true;
            }
        }
        let (least, most) = (user.iter().min(), user.iter().max());
        assert!(
            least.zip(most).is_some_and(|(l, m)| m - l == 39 && *l < 10),
            "{tag}: {user:?} {out}"
        );
        // @u's forty, and @e's (ustack(30)): the stacks of depths 0 to 27 differ in their
        // first thirty frames, the deeper twelve do not.
        let ones = out.lines().filter(|l| l.trim() == "1").count();
        assert_eq!(ones, 40 + 28, "{tag}: {out}");
        assert!(out.lines().any(|l| l.trim() == "12"), "{tag}: {out}");
    }
}

/// A library the program opens after tracing started (built without frame pointers): the
/// probe finds PCs no loaded range holds, hands those firings over to dtrace, which loads the
/// process's ranges again; the counts of every stack are those dtrace alone counts.
#[test]
fn ustack_keys_through_a_library_opened_later_print_as_in_dtrace() {
    let t = "ustack_keys_through_a_library_opened_later_print_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let dir = test_dir("kstack-ustack-dlopen");
    let lib = compile_c(
        &dir,
        "libhop.so",
        r#"
#include <unistd.h>
__attribute__((noinline)) void hop2(int fd, int i) {
    if (write(fd, "x", i % 3) < 0)
        _exit(1);
}
__attribute__((noinline)) void hop1(int fd, int i) { hop2(fd, i); hop2(fd, i + 1); }
"#,
        &["-O2", "-g", "-shared", "-fPIC", "-fomit-frame-pointer"],
    );
    let src = format!(
        r#"
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>
__attribute__((noinline)) void before(int fd, int i) {{
    if (write(fd, "y", i % 2) < 0)
        _exit(1);
}}
int main(void) {{
    int fd = open("/dev/null", O_WRONLY);
    for (int i = 0; i < 50; i++)
        before(fd, i);
    usleep(100000);
    void *h = dlopen("{}", RTLD_NOW);
    if (!h)
        return 2;
    void (*hop1)(int, int) = (void (*)(int, int))dlsym(h, "hop1");
    for (int i = 0; i < 50; i++)
        hop1(fd, i);
    return 0;
}}
"#,
        lib.display()
    );
    let exe = compile_c(
        &dir,
        "opener",
        &src,
        &["-O2", "-g", "-fomit-frame-pointer", "-ldl"],
    );
    let cmd = exe.display().to_string();
    let script = "syscall::write:entry /pid == $target/ { @[ustack()] = count(); \
        @j[jstack(4)] = sum(arg2); }";
    let out = same_both_ways(&[], script, &cmd, &[1]);
    assert!(
        has_stack(
            &out,
            &[
                "libc.so.6`write+",
                "libhop.so`hop2+",
                "libhop.so`hop1+",
                "opener`main+"
            ]
        ),
        "{out}"
    );
    assert!(
        has_stack(
            &out,
            &["libc.so.6`write+", "opener`before+", "opener`main+"]
        ),
        "{out}"
    );
}

/// Writes through w2 -> w3 -> write in three rounds of 40 writes, 200 ms apart: the probe cannot
/// place the first round's stacks (dtrace loads the ranges once it sees one), it places the
/// later rounds'.
const ROUNDS: &str = r#"
#include <fcntl.h>
#include <unistd.h>
__attribute__((noinline)) void w3(int fd, int i) {
    if (write(fd, "x", i % 3) < 0)
        _exit(1);
}
__attribute__((noinline)) void w2(int fd, int i) { w3(fd, i); w3(fd, i + 1); }
int main(void) {
    int fd = open("/dev/null", O_WRONLY);
    for (int r = 0; r < 3; r++) {
        for (int i = 0; i < 20; i++)
            w2(fd, i);
        usleep(200000);
    }
    return 0;
}
"#;

/// The latency-by-stack idiom: a thread-local kept in the kernel from entry to return, and
/// `ustack()` keys at the return. The firing cannot go to dtrace whole there (its clauses keep
/// variables in the kernel): an update whose stack the probe cannot place (the first round's,
/// before dtrace loaded the process's ranges) goes to dtrace alone, which walks the stack and
/// aggregates it with the kernel's; the totals and stacks are dtrace's own.
#[test]
fn ustack_keys_where_variables_live_in_the_kernel_print_as_in_dtrace() {
    let t = "ustack_keys_where_variables_live_in_the_kernel_print_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let exe = without_frame_pointers("kstack-ustack-vars", "rounds", ROUNDS);
    let cmd = exe.display().to_string();
    let script = "syscall::write:entry /pid == $target/ { self->ts = timestamp; } \
        syscall::write:return /self->ts/ { @[ustack()] = count(); @n = count(); \
        @q[ustack(2)] = quantize(timestamp - self->ts > 0 ? 1 : 0); self->ts = 0; }";
    let kout = same_both_ways_where(&[], script, &cmd, &[1, 2], |l| {
        l.ends_with("runs whole in the kernel at 1 probe (variables self->ts live in the kernel)")
    });
    // 120 writes, each counted once, under stacks walked through the code without frame
    // pointers.
    assert!(kout.lines().any(|l| l.trim() == "120"), "{kout}");
    assert!(has_stack(&kout, &ROUNDS_WRITE), "{kout}");
}

/// The frames of the rounds program's writes, innermost first (as prefixes).
const ROUNDS_WRITE: [&str; 4] = [
    "libc.so.6`write+",
    "rounds`w3+",
    "rounds`w2+",
    "rounds`main+",
];

/// A clause whose clause-locals take much of the probe's stack: its `ustack()` keys are walked
/// at the probe all the same, as dtrace walks them. Where the kernel counts the walk's callbacks
/// on top of that stack (Linux 6.1), the program is generated again with a walk that fits:
/// with 12 locals all of it fits, with 20 the callbacks without the file route (its nested
/// callback's frame does not), with 24 (the most) the bounded loop.
#[test]
fn ustack_keys_beside_many_clause_locals_print_as_in_dtrace() {
    let t = "ustack_keys_beside_many_clause_locals_print_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let exe = without_frame_pointers("kstack-ustack-locals", "rounds", ROUNDS);
    let cmd = exe.display().to_string();
    for n in [12, 20, 24] {
        let sets: String = (0..n)
            .map(|i| format!("this->v{i} = arg0 + {i}; "))
            .collect();
        let sum: Vec<String> = (0..n).map(|i| format!("this->v{i}")).collect();
        let script = format!(
            "syscall::write:entry /pid == $target/ {{ {sets}@[ustack(), {}] = count(); \
             @n = count(); }}",
            sum.join(" + ")
        );
        let out = same_both_ways_where(&[], &script, &cmd, &[1], |l| {
            l.contains("runs whole in the kernel at 1 probe")
        });
        assert!(out.lines().any(|l| l.trim() == "120"), "{n}: {out}");
        assert!(has_stack(&out, &ROUNDS_WRITE), "{n}: {out}");
    }
}

/// The distinct stacks an output of stack records prints.
fn stacks(out: &str) -> std::collections::BTreeSet<String> {
    out.split("\n\n")
        .map(str::trim)
        .filter(|s| s.contains('`'))
        .map(String::from)
        .collect()
}

/// `jstack()` is `ustack()` where no Java helper annotates the frames (DTrace for Linux has
/// none): its frames default to `jstackframes` (50), `jstack(n)` and `jstack(n, strsize)` print
/// what `ustack(n)` and `ustack(n, strsize)` print, and its aggregation keys follow ustack()'s:
/// walked at the probe by default, in dtrace with DTRACE_KERNEL_USTACKS=0, printing the same
/// either way.
#[test]
fn jstack_prints_as_ustack_where_no_java_helper_exists() {
    let t = "jstack_prints_as_ustack_where_no_java_helper_exists";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let exe = chain("kstack-jstack");
    let cmd = exe.display().to_string();
    let body = "pid$target::level3:4";
    let run = |env: &[(&str, &str)], extra: &[&str], action: &str| {
        let script = format!("{body} {{ {action}; }}");
        let mut args = vec!["-q"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-n", &script, "-c", &cmd]);
        let (rc, out, err) = dtrace_with_env(env, &args);
        assert_eq!(rc, 0, "{script}: {err}");
        out
    };
    for (extra, jstack, ustack) in [
        (&[][..], "jstack()", "ustack(50)"),
        (&[], "jstack(3)", "ustack(3)"),
        (&[], "jstack(3, 100)", "ustack(3, 100)"),
        (&["-x", "jstackframes=2"], "jstack()", "ustack(2)"),
    ] {
        let j = stacks(&run(&[], extra, jstack));
        assert!(
            j.iter().any(|s| s.contains("chain`level3+0x4")),
            "{jstack}: {j:?}"
        );
        assert_eq!(j, stacks(&run(&[], extra, ustack)), "{jstack} {extra:?}");
    }
    // The frames default to jstackframes: 3 here, where ustack() shows main's callers too.
    let three = stacks(&run(&[], &["-x", "jstackframes=3"], "jstack()"));
    assert!(!three.is_empty());
    for s in &three {
        assert_eq!(s.lines().count(), 3, "{s}");
    }
    // Aggregation keys: in dtrace when asked, saying why.
    let script = format!("{body} {{ @[jstack(3)] = count(); }}");
    let off = [("DTRACE_KERNEL_USTACKS", "0")];
    let (rc, _, err) = dtrace_with_env(&off, &["-qv", "-n", &script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        clause_lines(&err, 1).iter().any(|l| l
            .contains("aggregations run in dtrace (jstack() keys are walked in dtrace (DTRACE_KERNEL_USTACKS=0))")),
        "{err}"
    );
    // In the kernel by default, as ustack()'s: the same output both ways, and as ustack()'s.
    let env: [(&str, &str); 0] = [];
    let out = same_both_ways(&env, &script, &cmd, &[1]);
    let ustack = same_both_ways(
        &env,
        &format!("{body} {{ @[ustack(3)] = count(); }}"),
        &cmd,
        &[1],
    );
    assert_eq!(out, ustack);
    assert!(out.contains("chain`level2+"), "{out}");
    // jstack() keys: the kernel walks as many frames as ustack() would, cut to jstackframes.
    let kernel_keys = |extra: &[&str], action: &str| {
        let script = format!("{body} {{ @[{action}] = count(); }}");
        let mut args = vec!["-qv"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-n", &script, "-c", &cmd]);
        let (rc, out, err) = dtrace_with_env(&env, &args);
        assert_eq!(rc, 0, "{script}: {err}");
        assert!(
            clause_lines(&err, 1)
                .iter()
                .any(|l| l.ends_with("aggregations run in the kernel at 1 probe")),
            "{script}: {err}"
        );
        out
    };
    let out = kernel_keys(&[], "jstack()");
    assert!(out.contains("chain`main+"), "{out}");
    assert_eq!(out, kernel_keys(&[], "ustack(50)"));
    let two = kernel_keys(&["-x", "jstackframes=2"], "jstack()");
    assert_eq!(two, kernel_keys(&[], "ustack(2)"));
    assert_ne!(out, two);
}

/// `ucaller` and `ustackdepth` are read at the probe from the same walk as `ustack()` keys
/// (the longer of the frame-pointer walk and the `.eh_frame` walk), in the actions of the first
/// clause running there, printing what dtrace prints; in a predicate, or with
/// DTRACE_KERNEL_USTACKS=0, the clause stays in dtrace, saying why.
#[test]
fn ucaller_and_ustackdepth_at_the_probe_print_as_in_dtrace() {
    let t = "ucaller_and_ustackdepth_at_the_probe_print_as_in_dtrace";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let exe = without_frame_pointers("kstack-ucaller", "chain", CHAIN);
    let cmd = exe.display().to_string();
    let script = "pid$target::level3:entry { @[usym(ucaller)] = count(); \
        @d[ustackdepth] = count(); @s = sum(ustackdepth); } \
        syscall::write:entry /pid == $target/ { @w[ufunc(ucaller), ustackdepth] = count(); }";
    let out = same_both_ways(&[], script, &cmd, &[1, 2]);
    // level3's callers (level1's and call's calls are tail calls at -O2), found by .eh_frame.
    for caller in ["chain`level2", "chain`main"] {
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == [caller, "200"]),
            "{caller}: {out}"
        );
    }
    // write()'s caller is level3, 6 or 7 frames deep (past main, to _start).
    assert!(out.contains("chain`level3"), "{out}");
    // In a predicate: the walk comes before it, alone or beside other clauses.
    let script = "pid$target::level3:entry /ustackdepth > 1/ { @ = count(); } \
        syscall::write:entry /pid == $target && ucaller != 0 && ustackdepth > 2/ \
        { @w[ustackdepth > 4] = count(); }";
    let out = same_both_ways(&[], script, &cmd, &[1, 2]);
    assert!(out.contains("400"), "{out}");
    let script = "pid$target::level3:entry { @n = count(); } \
        pid$target::level3:entry /ucaller != 0 && ustackdepth < 2/ { @few = count(); }";
    same_both_ways(&[], script, &cmd, &[1, 2]);
    // Where no clause of the probe runs whole in the kernel, the predicate stays in dtrace.
    let script = "pid$target::level3:entry /ustackdepth > 1/ { @ = count(); json(\"{}\", \"x\"); }";
    let (rc, _, err) = dtrace_with_env(&[], &["-qv", "-n", script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        clause_lines(&err, 1)
            .iter()
            .any(|l| l.contains("ustackdepth") && l.contains("in dtrace")),
        "{err}"
    );
    let env = [("DTRACE_KERNEL_USTACKS", "0")];
    let script = "pid$target::level3:entry { @ = sum(ustackdepth); }";
    let (rc, _, err) = dtrace_with_env(&env, &["-qv", "-n", script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        clause_lines(&err, 1)
            .iter()
            .any(|l| l.contains("DTRACE_KERNEL_USTACKS=0")),
        "{err}"
    );
}

/// Allocates 5000 times in a loop as soon as it starts, each firing's record with its user
/// stack (about 9 KiB) where the stack cannot be walked at the probe.
const ALLOCATOR: &str = r#"
#include <stdlib.h>
static void *volatile kept;
int main(void) {
    for (int i = 0; i < 5000; i++) {
        kept = malloc(16 + i % 64);
        free(kept);
    }
    return 0;
}
"#;

/// The `total N` line a burst test's END prints (its `@n = count()`), and the sum of the stack
/// aggregation's counts printed beside it.
fn total_and_summed(out: &str) -> (u64, u64) {
    let total = out
        .lines()
        .find_map(|l| l.strip_prefix("total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    let summed = out
        .lines()
        .filter(|l| !l.starts_with("total"))
        .filter_map(|l| l.trim().parse::<u64>().ok())
        .sum();
    (total, summed)
}

/// `pid$target::malloc:entry { @[ustack()] = count(); }`, the classic, on a program that
/// allocates in a burst at its start: not one firing is lost, since the ranges of what the
/// process maps are loaded while `-c` holds it, so every firing is walked at the probe (before,
/// its first firings were handed over with their stacks until dtrace loaded the ranges at the
/// first it read, and an 8 MiB ring filled in milliseconds: a third of the firings were
/// drops). The stacks' counts add up to the calls.
#[test]
fn a_burst_of_firings_at_a_programs_start_loses_none() {
    let t = "a_burst_of_firings_at_a_programs_start_loses_none";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let exe = compile_c(&test_dir("kstack-burst"), "allocator", ALLOCATOR, &["-O1"]);
    let cmd = exe.display().to_string();
    let (rc, out, err) = dtrace_with_env(
        &[],
        &[
            "-q",
            "-n",
            "pid$target::malloc:entry { @[ustack()] = count(); @n = count(); } \
             END { printa(\"total %@d\\n\", @n); }",
            "-c",
            &cmd,
        ],
    );
    assert_eq!(rc, 0, "{err}");
    let (total, summed) = total_and_summed(&out);
    assert_eq!(summed, total, "{out}");
    assert!(total == 5000 && !err.contains("drop"), "{total}: {err}");
}

/// The same burst at a syscall probe, which names no process: `syscall::write:entry /pid ==
/// $target/ { @[ustack()] = count(); }` over `dd bs=1` (a write a microsecond from its first
/// instruction). The ranges of what `-c` holds are loaded before it goes, whatever the probes
/// (before, only processes a provider named were: dd's first firings were handed over with
/// their stacks until dtrace loaded its ranges, and a few thousand were drops).
#[test]
fn a_burst_of_syscalls_at_a_commands_start_loses_none() {
    let t = "a_burst_of_syscalls_at_a_commands_start_loses_none";
    if !kernel_ok(t) {
        return;
    }
    const WRITES: u64 = 100_000;
    let cmd = format!("dd if=/dev/zero of=/dev/null bs=1 count={WRITES} status=none");
    let (rc, out, err) = dtrace_with_env(
        &[],
        &[
            "-q",
            "-n",
            "syscall::write:entry /pid == $target/ { @[ustack()] = count(); @n = count(); } \
             END { printa(\"total %@d\\n\", @n); }",
            "-c",
            &cmd,
        ],
    );
    assert_eq!(rc, 0, "{err}");
    let (total, summed) = total_and_summed(&out);
    assert_eq!(summed, total, "{out}");
    assert!(total == WRITES && !err.contains("drop"), "{total}: {err}");
}

/// A churn of new processes (a shell loop's commands): the probe holds no ranges of a process
/// dtrace has not loaded yet, but finds each PC by the file it is in (`uunwind::FileRoute`),
/// known from the other processes that map it (the shell's libc and loader, the first
/// command's program), so the commands' firings are walked at the probe, not handed over with
/// their stacks: none is lost (before, a few hundred of a loop of 400 commands were drops).
/// Where the kernel cannot take that route (Linux 6.1), the firings handed over may be drops,
/// reported, and what was counted adds up.
#[test]
fn a_churn_of_new_processes_loses_no_firing() {
    let t = "a_churn_of_new_processes_loses_no_firing";
    if !kernel_ok(t) {
        return;
    }
    let dir = test_dir("kstack-churn");
    let script = dir.join("churn.sh");
    std::fs::write(&script, "for i in $(seq 400); do /bin/true; done\n").unwrap();
    let cmd = format!("/bin/sh {}", script.display());
    let (rc, out, err) = dtrace_with_env(
        &[],
        &[
            "-q",
            // Each command's stacks are keys of their own (the pid is in a user stack's key).
            "-x",
            "aggsize=64m",
            "-n",
            "syscall:::entry /progenyof($target) && pid != $target/ { @[ustack()] = count(); \
             @n = count(); } END { printa(\"total %@d\\n\", @n); }",
            "-c",
            &cmd,
        ],
    );
    assert_eq!(rc, 0, "{err}");
    let (total, summed) = total_and_summed(&out);
    assert_eq!(summed, total, "{err}");
    if !dtrace_linux::features::file_route_at_probe() {
        return;
    }
    // Every command makes a few dozen syscalls.
    assert!(total >= 400 * 10 && !err.contains("drop"), "{total}: {err}");
}

/// Drops the page after its initial stack pointer's (`mm->start_stack`, from /proc/self/stat)
/// when that pointer lies in the last 512 bytes of its page, as the random gap the kernel leaves
/// below the environment's strings may leave that page untouched, says `walked` and writes one
/// byte from each depth of a recursion 0 to 63 calls deep; else says `retry`.
const LAST_PAGE: &str = concat!(
    "#include <fcntl.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n",
    "#include <sys/mman.h>\n#include <unistd.h>\n",
    descend!(),
    r#"int main(void) {
    static char stat[2048];
    int f = open("/proc/self/stat", O_RDONLY);
    ssize_t n = f < 0 ? -1 : read(f, stat, sizeof stat - 1);
    if (n <= 0)
        return 2;
    close(f);
    stat[n] = 0;
    /* The fields after the command's closing parenthesis, from the third: startstack is the
       28th. */
    char *p = strrchr(stat, ')');
    unsigned long start = 0;
    int field = 2;
    for (char *t = p ? strtok(p + 1, " ") : NULL; t; t = strtok(NULL, " "))
        if (++field == 28)
            start = strtoul(t, NULL, 10);
    unsigned long page = (unsigned long)sysconf(_SC_PAGESIZE);
    if (start == 0 || (start & (page - 1)) < page - 512) {
        puts("retry");
        return 0;
    }
    madvise((void *)((start | (page - 1)) + 1), page, MADV_DONTNEED);
    fd = open("/dev/null", O_WRONLY);
    puts("walked");
    fflush(stdout);
    for (int d = 0; d < 64; d++)
        descend(d);
    return 0;
}
"#
);

/// Processes whose initial stack pointer lies in the last bytes of its page, the page after it
/// not present: the probe's copy of the stack stops at the end of that page (a copy reaching
/// into the next faulted, and the halves tried then missed the outermost frames), so every stack
/// is walked whole, to `_start`. One process in eight or so has its initial stack pointer there:
/// a hundred run under one dtrace (the first walked in dtrace from the copy, the others at the
/// probe by their files), and those that do write. Before, some depths lost their last frames.
#[test]
fn a_stack_starting_at_the_end_of_its_page_is_walked_whole() {
    let t = "a_stack_starting_at_the_end_of_its_page_is_walked_whole";
    if !kernel_ok(t) || !have_gcc(t) {
        return;
    }
    let dir = test_dir("kstack-last-page");
    let exe = compile_c(
        &dir,
        "lastpage",
        LAST_PAGE,
        &["-O1", "-fno-optimize-sibling-calls", "-fomit-frame-pointer"],
    );
    let run = dir.join("run.sh");
    std::fs::write(
        &run,
        format!(
            "i=0; while [ $i -lt 100 ]; do {}; i=$((i + 1)); done\n",
            exe.display()
        ),
    )
    .unwrap();
    let cmd = format!("sh {}", run.display());
    let script =
        "syscall::write:entry /execname == \"lastpage\" && arg2 == 1/ { @[ustack()] = count(); }";
    let (rc, out, err) = dtrace_with_env(&[], &["-q", "-n", script, "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    let walked = out.lines().filter(|l| *l == "walked").count();
    assert_eq!(
        walked + out.lines().filter(|l| *l == "retry").count(),
        100,
        "{out}"
    );
    assert!(
        walked > 0,
        "no process of 100 had its initial stack pointer there"
    );
    // Sixty-four stacks a process that wrote, each down from `_start`.
    let stacks = common::stack_frames(&out);
    assert!(stacks.len() >= 64, "{out}\n{err}");
    for s in &stacks {
        assert!(
            s.last().is_some_and(|f| f.contains("`_start")),
            "a stack ends before _start: {s:?}\n{out}\n{err}"
        );
    }
}
