//! USDT probes from DOF: a provider declared in D becomes a C header (`dtrace -h`), a C program
//! uses its macros and an is-enabled test, `dtrace -G` rewrites the program's object and writes
//! the DOF object, and the program links with gcc and runs with its probes costing nops (the
//! is-enabled path not taken). Traced, the probes fire a known number of times with their typed
//! arguments and the is-enabled path is taken only while enabled (root, BPF, uprobes; gcc).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

const PROVIDER: &str = "provider myprov {
    probe probe1(int, string, long);
    probe probe2__tick(int);
};
#pragma D attributes Evolving/Evolving/Common provider myprov provider
#pragma D attributes Private/Private/Unknown provider myprov function
";

const PROG: &str = r#"
#include "provider.h"
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    long enabled = 0;
    for (int i = 0; i < n; i++) {
        char buf[16];
        snprintf(buf, sizeof buf, "hello%d", i);
        MYPROV_PROBE1(i, buf, (long)i * -10);
        if (MYPROV_PROBE2_TICK_ENABLED()) {
            enabled++;
            MYPROV_PROBE2_TICK(i);
        }
    }
    printf("enabled=%ld\n", enabled);
    return 0;
}
"#;

fn run_in(dir: &Path, prog: &str, args: &[&str]) -> String {
    let o = Command::new(prog)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{prog} {args:?}: {err}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Builds the program in `dir/tag` with gcc `flags`: header, object, `dtrace -G`, link.
fn build(dir: &Path, tag: &str, flags: &[&str]) -> PathBuf {
    build_source(dir, tag, PROG, flags)
}

/// As [`build`], of source `src`.
fn build_source(dir: &Path, tag: &str, src: &str, flags: &[&str]) -> PathBuf {
    build_with(dir, tag, PROVIDER, src, flags)
}

/// As [`build_source`], with provider declaration `provider`.
fn build_with(dir: &Path, tag: &str, provider: &str, src: &str, flags: &[&str]) -> PathBuf {
    let d = dir.join(tag);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("provider.d"), provider).unwrap();
    std::fs::write(d.join("prog.c"), src).unwrap();
    let dt = env!("CARGO_BIN_EXE_dtrace");
    run_in(&d, dt, &["-h", "-s", "provider.d"]);
    let mut cc: Vec<&str> = flags.to_vec();
    cc.extend(["-c", "prog.c", "-o", "prog.o"]);
    run_in(&d, "gcc", &cc);
    // Twice, as a build may: the second run finds the sites the first rewrote.
    run_in(&d, dt, &["-G", "-s", "provider.d", "prog.o"]);
    run_in(&d, dt, &["-G", "-s", "provider.d", "prog.o"]);
    let mut ld: Vec<&str> = flags.to_vec();
    ld.extend(["-o", "prog", "prog.o", "provider.o"]);
    run_in(&d, "gcc", &ld);
    d.join("prog")
}

const BUILDS: [(&str, &[&str]); 3] = [
    ("O2-pie", &["-O2", "-fPIE", "-pie"]),
    ("O0-nopie", &["-O0", "-fno-pie", "-no-pie"]),
    ("O2-static", &["-O2", "-static"]),
];

#[test]
fn header_object_and_link_give_a_program_whose_probes_are_nops() {
    let test = "header_object_and_link_give_a_program_whose_probes_are_nops";
    if !common::have_gcc(test) {
        return;
    }
    let dir = common::test_dir(test);
    for (tag, flags) in BUILDS {
        let exe = build(&dir, tag, flags);
        // Untraced, the is-enabled test is false and the probe sites are nops.
        let out = run_in(&dir, exe.to_str().unwrap(), &["7"]);
        assert_eq!(out, "enabled=0\n", "{tag}");
        let bytes = std::fs::read(&exe).unwrap();
        let dofs = dtrace_dof::dof_sections_from_elf(&bytes).unwrap().unwrap();
        assert_eq!(dofs.len(), 1, "{tag}");
        let provs = dtrace_dof::read_dof(&dofs[0])
            .unwrap()
            .usdt_providers()
            .unwrap();
        assert_eq!(provs.len(), 1, "{tag}");
        let mut probes: Vec<_> = provs[0]
            .probes
            .iter()
            .map(|p| {
                (
                    p.name.as_str(),
                    p.function.as_str(),
                    p.offsets.len(),
                    p.enabled_offsets.len(),
                )
            })
            .collect();
        probes.sort();
        assert_eq!(
            probes,
            [("probe1", "main", 1, 0), ("probe2-tick", "main", 1, 1)],
            "{tag}"
        );
        assert_eq!(provs[0].probes[0].native_args.len(), 3);
        // Stability from the pragmas, else Unstable/Unstable/Common.
        assert_eq!(
            provs[0].attrs,
            [
                dtrace_dof::dof_attr(5, 5, 5),
                dtrace_dof::dof_attr(4, 4, 5),
                dtrace_dof::dof_attr(1, 1, 0),
                dtrace_dof::dof_attr(4, 4, 5),
                dtrace_dof::dof_attr(4, 4, 5),
            ]
        );
    }
    // DTRACE_PROBES_DISABLED compiles the macros away: no DTrace object needed.
    let d = dir.join("O2-pie");
    run_in(
        &d,
        "gcc",
        &["-DDTRACE_PROBES_DISABLED", "-O2", "-o", "plain", "prog.c"],
    );
    assert_eq!(run_in(&d, "./plain", &["3"]), "enabled=0\n");
}

#[test]
fn objects_with_bad_sites_or_undeclared_probes_are_errors() {
    let test = "objects_with_bad_sites_or_undeclared_probes_are_errors";
    if !common::have_gcc(test) {
        return;
    }
    let dir = common::test_dir(test);
    std::fs::write(dir.join("provider.d"), PROVIDER).unwrap();
    std::fs::write(
        dir.join("other.c"),
        "extern void __dtrace_myprov___nosuch(int);\nvoid f(int i) { __dtrace_myprov___nosuch(i); }\n",
    )
    .unwrap();
    run_in(&dir, "gcc", &["-c", "-O2", "other.c"]);
    let before = std::fs::read(dir.join("other.o")).unwrap();
    let (rc, _, err) = common::dtrace(&[
        "-G",
        "-o",
        dir.join("p.o").to_str().unwrap(),
        "-s",
        dir.join("provider.d").to_str().unwrap(),
        dir.join("other.o").to_str().unwrap(),
    ]);
    assert_eq!(rc, 1);
    assert!(err.contains("probe myprov:nosuch is not declared"), "{err}");
    assert_eq!(
        std::fs::read(dir.join("other.o")).unwrap(),
        before,
        "object untouched"
    );
    std::fs::write(dir.join("junk.o"), b"junk").unwrap();
    let (rc, _, err) = common::dtrace(&[
        "-G",
        "-o",
        dir.join("p.o").to_str().unwrap(),
        "-s",
        dir.join("provider.d").to_str().unwrap(),
        dir.join("junk.o").to_str().unwrap(),
    ]);
    assert_eq!(rc, 1);
    assert!(err.contains("failed to process"), "{err}");
}

fn traceable(test: &str) -> bool {
    common::kernel_ok(test)
        && common::have_gcc(test)
        && dtrace_testkit::skip_unless(dtrace_linux::uprobe::available(), test, "no uprobe PMU")
}

#[test]
fn dof_probes_fire_with_typed_arguments_and_is_enabled() {
    let test = "dof_probes_fire_with_typed_arguments_and_is_enabled";
    if !traceable(test) {
        return;
    }
    let dir = common::test_dir(test);
    for (tag, flags) in BUILDS {
        let exe = build(&dir, tag, flags);
        let cmd = format!("{} 12", exe.display());
        let (rc, out, err) = common::dtrace(&["-l", "-n", "myprov$target:::", "-c", &cmd]);
        assert_eq!(rc, 0, "{tag}: {err}");
        let names: Vec<&str> = out
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().last())
            .collect();
        assert_eq!(names, ["probe1", "probe2-tick"], "{tag}: {out}");
        let (rc, out, err) = common::dtrace(&[
            "-qn",
            "myprov$target:::probe1 { @n = count(); @a0 = sum(arg0); @a2 = sum(args[2]); }
             myprov$target:::probe1 /arg0 == 3/ { printf(\"s=%s\\n\", args[1]); }
             myprov$target::main:probe2-tick { @t = count(); @t0 = sum(args[0]); }
             END { printa(\"n %@d\\n\", @n); printa(\"a0 %@d\\n\", @a0);
                   printa(\"a2 %@d\\n\", @a2); printa(\"t %@d\\n\", @t);
                   printa(\"t0 %@d\\n\", @t0); }",
            "-c",
            &cmd,
        ]);
        assert_eq!(rc, 0, "{tag}: {err}");
        // 12 iterations: sum(i) = 66, sum(-10 i) = -660; the is-enabled test was true each time.
        for want in [
            "enabled=12\n",
            "s=hello3\n",
            "n 12\n",
            "a0 66\n",
            "a2 -660\n",
            "t 12\n",
            "t0 66\n",
        ] {
            assert!(out.contains(want), "{tag}: {want:?} not in {out}");
        }
        // probe2-tick not enabled: its is-enabled test stays false while probe1 fires.
        let (rc, out, err) = common::dtrace(&[
            "-qn",
            "myprov$target:::probe1 { @n = count(); } END { printa(\"n %@d\\n\", @n); }",
            "-c",
            &cmd,
        ]);
        assert_eq!(rc, 0, "{tag}: {err}");
        assert!(
            out.contains("enabled=0\n") && out.contains("n 12\n"),
            "{tag}: {out}"
        );
        // Untraced again: the semaphore went back down.
        assert_eq!(run_in(&dir, exe.to_str().unwrap(), &["4"]), "enabled=0\n");
    }
}

/// Each line read runs five ticks and prints how many found the probe enabled.
const PHASES: &str = r#"
#include "provider.h"
#include <stdio.h>
int main(void) {
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        long enabled = 0;
        for (int i = 0; i < 5; i++) {
            if (MYPROV_PROBE2_TICK_ENABLED())
                enabled++;
            MYPROV_PROBE2_TICK(i);
        }
        printf("%ld\n", enabled);
        fflush(stdout);
    }
    return 0;
}
"#;

#[test]
fn a_grabbed_process_by_provider_pid_has_its_semaphore_lowered_after() {
    let test = "a_grabbed_process_by_provider_pid_has_its_semaphore_lowered_after";
    if !traceable(test) {
        return;
    }
    let dir = common::test_dir(test);
    let exe = build_source(&dir, "phases", PHASES, &["-O2"]);
    let out = common::phases_under_grab(&exe, |pid| {
        format!("myprov{pid}:::probe2-tick /arg0 == 4/ {{ exit(0); }}")
    });
    assert_eq!(out, "5\n0\n");
}

const LIB: &str = r#"
#include "provider.h"
static int helper(int i) {
    MYPROV_PROBE2_TICK(i);
    return MYPROV_PROBE2_TICK_ENABLED();
}
int work(int n) {
    int e = 0;
    for (int i = 0; i < n; i++) {
        MYPROV_PROBE1(i, "x", 1);
        e += helper(i);
    }
    return e;
}
"#;

/// Builds `libw.so` of [`LIB`] in `dir`: header, object, `dtrace -G`, shared link.
fn build_lib(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("provider.d"), PROVIDER).unwrap();
    std::fs::write(dir.join("lib.c"), LIB).unwrap();
    let dt = env!("CARGO_BIN_EXE_dtrace");
    run_in(dir, dt, &["-h", "-s", "provider.d"]);
    run_in(dir, "gcc", &["-O0", "-fPIC", "-c", "lib.c"]);
    run_in(
        dir,
        dt,
        &["-G", "-o", "lib-dof.o", "-s", "provider.d", "lib.o"],
    );
    run_in(
        dir,
        "gcc",
        &["-shared", "-o", "libw.so", "lib.o", "lib-dof.o"],
    );
    dir.join("libw.so")
}

#[test]
fn a_shared_library_with_probes_in_a_static_function() {
    let test = "a_shared_library_with_probes_in_a_static_function";
    if !traceable(test) {
        return;
    }
    let d = common::test_dir(test);
    build_lib(&d);
    std::fs::write(
        d.join("main.c"),
        "#include <stdio.h>\nint work(int);\nint main(void) { printf(\"e=%d\\n\", work(6)); return 0; }\n",
    )
    .unwrap();
    let rpath = format!("-Wl,-rpath,{}", d.display());
    run_in(&d, "gcc", &["-o", "m", "main.c", "-L.", "-lw", &rpath]);
    let exe = d.join("m");
    let exe = exe.to_str().unwrap();
    let (rc, out, err) = common::dtrace(&[
        "-qn",
        "myprov$target:::probe1, myprov$target:::probe2-tick
         { @[probemod, probefunc, probename] = count(); }
         END { printa(\"%s %s %s %@d\\n\", @); }",
        "-c",
        exe,
    ]);
    assert_eq!(rc, 0, "{err}");
    for want in [
        "e=6\n",
        "libw.so work probe1 6\n",
        "libw.so helper probe2-tick 6\n",
    ] {
        assert!(out.contains(want), "{want:?} not in {out}");
    }
}

/// Defines its own `work`, calls it, then loads the library named by its argument with `dlopen`
/// and calls the library's `work`.
const DLOPENER: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
int __attribute__((noinline)) work(int n) { return -n; }
int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    int own = work(1);
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        printf("dlopen: %s\n", dlerror());
        return 1;
    }
    int (*lib_work)(int) = (int (*)(int))dlsym(h, "work");
    if (!lib_work)
        return 1;
    printf("own=%d e=%d\n", own, lib_work(6));
    return 0;
}
"#;

#[test]
fn a_library_loaded_later_gets_its_pid_and_dof_probes_before_it_runs() {
    let test = "a_library_loaded_later_gets_its_pid_and_dof_probes_before_it_runs";
    if !traceable(test) {
        return;
    }
    let d = common::test_dir(test);
    let lib = build_lib(&d);
    std::fs::write(d.join("main.c"), DLOPENER).unwrap();
    run_in(&d, "gcc", &["-O0", "-o", "m", "main.c", "-ldl"]);
    let cmd = format!("{} {}", d.join("m").display(), lib.display());
    // Without -Z, a description of the library's probes matches nothing when the program starts.
    let (rc, _, err) = common::dtrace(&["-qn", "myprov$target:::probe1 {}", "-c", &cmd]);
    assert_eq!(rc, 1, "{err}");
    assert!(err.contains("does not match any probes"), "{err}");
    // With -Z it is matched when the library is loaded, before the library's code runs: every
    // firing is seen and the is-enabled probe's semaphore is raised for its first call.
    let (rc, out, err) = common::dtrace(&[
        "-Zqn",
        "myprov$target:::probe1, myprov$target:::probe2-tick, pid$target:libw.so:work:entry
         { @[probemod, probefunc, probename] = count(); }
         pid$target:libw.so:work:return { @s[probemod, probefunc, \"sum\"] = sum(arg1); }
         END { printa(\"%s %s %s %@d\\n\", @); printa(\"%s %s %s %@d\\n\", @s); }",
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    for want in [
        "own=-1 e=6\n",
        "libw.so work probe1 6\n",
        "libw.so helper probe2-tick 6\n",
        "libw.so work entry 1\n",
        "libw.so work sum 6\n",
    ] {
        assert!(out.contains(want), "{want:?} not in {out}");
    }
    // A description that matches the program's own function when it starts also gets the
    // library's, as DTrace's does (no -Z needed).
    let (rc, out, err) = common::dtrace(&[
        "-qn",
        "pid$target::work:entry { @[probemod] = count(); }
         END { printa(\"%s %@d\\n\", @); }",
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.contains("m 1\n") && out.contains("libw.so 1\n"),
        "{out}"
    );
}

/// Loads the library named by its argument when its stdin gives a line and calls `work(6)`, then
/// calls it again at the next line; prints what `work` returned each time.
const DLOPEN_PHASES: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    char line[16];
    if (argc < 2 || !fgets(line, sizeof line, stdin))
        return 2;
    void *h = dlopen(argv[1], RTLD_NOW);
    int (*work)(int) = h ? (int (*)(int))dlsym(h, "work") : 0;
    if (!work)
        return 1;
    printf("e=%d\n", work(6));
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin))
        return 2;
    printf("e=%d\n", work(6));
    return 0;
}
"#;

#[test]
fn a_grabbed_process_that_loads_a_library_is_traced_in_it_and_let_go_after() {
    let test = "a_grabbed_process_that_loads_a_library_is_traced_in_it_and_let_go_after";
    if !traceable(test) {
        return;
    }
    use std::io::{Read, Write};
    use std::process::Stdio;
    let d = common::test_dir(test);
    let lib = build_lib(&d);
    std::fs::write(d.join("main.c"), DLOPEN_PHASES).unwrap();
    run_in(&d, "gcc", &["-O0", "-o", "m", "main.c", "-ldl"]);
    let mut child = Command::new(d.join("m"))
        .arg(&lib)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let script = format!(
        "myprov{pid}:::probe1 {{ @n = count(); }}
         myprov{pid}:::probe2-tick /arg0 == 5/ {{ exit(0); }}
         END {{ printa(\"n=%@d\\n\", @n); }}"
    );
    // Only END matches before the library is loaded.
    let (mut dt, _err, line) = common::grab(&["-Zn", &script], pid, Stdio::piped());
    assert!(line.contains("matched 1 probe\n"), "{line}");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"one\n").unwrap();
    stdin.flush().unwrap();
    let mut dt_out = String::new();
    dt.stdout
        .take()
        .unwrap()
        .read_to_string(&mut dt_out)
        .unwrap();
    assert_eq!(dt.wait().unwrap().code(), Some(0));
    assert!(dt_out.contains("n=6"), "{dt_out}");
    // dtrace has left: the process runs on, with the library's semaphore lowered.
    stdin.write_all(b"two\n").unwrap();
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stdout), "e=6\ne=0\n");
}

/// A provider whose probe `q` reorders its arguments (and repeats one), declared with its
/// stability, and a probe `only` the program only tests with `_ENABLED()`.
const XPROVIDER: &str = "provider xprov {
    probe q(int a, char *b) : (string b, int a, int a);
    probe only();
};
#pragma D attributes Evolving/Evolving/Common provider xprov provider
#pragma D attributes Evolving/Evolving/Common provider xprov module
#pragma D attributes Evolving/Evolving/Common provider xprov function
#pragma D attributes Evolving/Evolving/Common provider xprov name
#pragma D attributes Stable/Evolving/ISA provider xprov args
";

const XPROG: &str = r#"
#include "provider.h"
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    long only = 0;
    for (int i = 0; i < n; i++) {
        char buf[16];
        snprintf(buf, sizeof buf, "s%d", i);
        XPROV_Q(i, buf);
        if (XPROV_ONLY_ENABLED())
            only++;
    }
    printf("only=%ld\n", only);
    return 0;
}
"#;

#[test]
fn a_translation_that_reorders_arguments_maps_args_and_arg_n() {
    let test = "a_translation_that_reorders_arguments_maps_args_and_arg_n";
    if !common::have_gcc(test) {
        return;
    }
    let dir = common::test_dir(test);
    let exe = build_with(&dir, "x", XPROVIDER, XPROG, &["-O2"]);
    // The header declares the native arguments.
    let h = std::fs::read_to_string(dir.join("x/provider.h")).unwrap();
    assert!(h.contains("XPROV_Q(arg0, arg1)"), "{h}");
    // The DOF maps translated argument i to native argument map[i].
    let bytes = std::fs::read(&exe).unwrap();
    let dofs = dtrace_dof::dof_sections_from_elf(&bytes).unwrap().unwrap();
    let provs = dtrace_dof::read_dof(&dofs[0])
        .unwrap()
        .usdt_providers()
        .unwrap();
    let q = provs[0].probes.iter().find(|p| p.name == "q").unwrap();
    assert_eq!(q.native_args, ["int", "char *"]);
    assert_eq!(q.xlated_args, ["string", "int", "int"]);
    assert_eq!(q.arg_map, [1, 0, 0]);
    if !traceable(test) {
        return;
    }
    let cmd = format!("{} 5", exe.display());
    let (rc, out, err) = common::dtrace(&["-lv", "-n", "xprov$target:::q", "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.contains("\tArgument Types\n\t\targs[0]: string\n\t\targs[1]: int\n\t\targs[2]: int\n"),
        "{out}"
    );
    // args[i] and argi are both native argument map[i], as in DTrace's tst.argmap.
    let (rc, out, err) = common::dtrace(&[
        "-qn",
        "xprov$target:::q /args[1] == 3/ {
             printf(\"%s %d %d %d %d\\n\", args[0], args[1], args[2], arg1, arg2);
         }
         xprov$target:::q { @s = sum(arg1 + args[2]); }
         END { printa(\"sum %@d\\n\", @s); }",
        "-c",
        &cmd,
    ]);
    assert_eq!(rc, 0, "{err}");
    // 5 iterations: 2 * (0 + 1 + 2 + 3 + 4) = 20.
    for want in ["s3 3 3 3 3\n", "sum 20\n"] {
        assert!(out.contains(want), "{want:?} not in {out}");
    }
}

#[test]
fn a_dof_provider_has_the_stability_its_declaration_gives() {
    let test = "a_dof_provider_has_the_stability_its_declaration_gives";
    if !traceable(test) {
        return;
    }
    let dir = common::test_dir(test);
    let exe = build_with(&dir, "x", XPROVIDER, XPROG, &["-O2"]);
    let cmd = format!("{} 1", exe.display());
    let (rc, out, err) = common::dtrace(&["-lv", "-n", "xprov$target:::q", "-c", &cmd]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.contains(
            "\tProbe Description Attributes\n\t\tIdentifier Names: Evolving\n\t\tData Semantics:   Evolving\n\t\tDependency Class: Common\n\n\tArgument Attributes\n\t\tIdentifier Names: Stable\n\t\tData Semantics:   Evolving\n\t\tDependency Class: ISA\n"
        ),
        "{out}"
    );
}

#[test]
fn a_probe_only_tested_with_enabled_is_listed_and_turns_its_test_true() {
    let test = "a_probe_only_tested_with_enabled_is_listed_and_turns_its_test_true";
    if !traceable(test) {
        return;
    }
    let dir = common::test_dir(test);
    for (tag, flags) in BUILDS {
        let exe = build_with(&dir, tag, XPROVIDER, XPROG, flags);
        assert_eq!(
            run_in(&dir, exe.to_str().unwrap(), &["3"]),
            "only=0\n",
            "{tag}"
        );
        let cmd = format!("{} 6", exe.display());
        let (rc, out, err) = common::dtrace(&["-l", "-n", "xprov$target:::", "-c", &cmd]);
        assert_eq!(rc, 0, "{tag}: {err}");
        let probes: Vec<String> = out
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().skip(3).collect::<Vec<_>>().join(" "))
            .collect();
        assert_eq!(probes, ["main only", "main q"], "{tag}: {out}");
        // Enabled, its test is true each time, and it never fires (it has no probe site).
        let (rc, out, err) = common::dtrace(&[
            "-qn",
            "xprov$target:::only { @o = count(); }
             xprov$target:::q { @q = count(); }
             END { printa(\"q %@d\\n\", @q); printa(\"fired %@d\\n\", @o); }",
            "-c",
            &cmd,
        ]);
        assert_eq!(rc, 0, "{tag}: {err}");
        assert!(
            out.contains("only=6\n") && out.contains("q 6\n"),
            "{tag}: {out}"
        );
        assert!(!out.contains("fired"), "{tag}: {out}");
        // Not enabled: false.
        let (rc, out, err) = common::dtrace(&["-qn", "xprov$target:::q {}", "-c", &cmd]);
        assert_eq!(rc, 0, "{tag}: {err}");
        assert!(out.contains("only=0\n"), "{tag}: {out}");
        assert_eq!(run_in(&dir, exe.to_str().unwrap(), &["3"]), "only=0\n");
    }
}

/// A provider of its own, so that other tests' processes stay out of the glob below.
const LATE_PROVIDER: &str = "provider lateprov {
    probe hit(int);
    probe tick(int);
};
";

/// Fires `hit` n times and `tick` while enabled; with n < 0 waits for its input to close.
const LATE_PROG: &str = r#"
#include "provider.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    if (n < 0) {
        char b[16];
        while (read(0, b, sizeof b) > 0) {}
        return 0;
    }
    long enabled = 0;
    for (int i = 0; i < n; i++) {
        LATEPROV_HIT(i);
        if (LATEPROV_TICK_ENABLED()) {
            enabled++;
            LATEPROV_TICK(i);
        }
    }
    printf("pid %d n %d enabled %ld\n", (int)getpid(), n, enabled);
    return 0;
}
"#;

#[test]
fn a_provider_glob_traces_the_dof_probes_of_processes_started_later() {
    let test = "a_provider_glob_traces_the_dof_probes_of_processes_started_later";
    if !traceable(test) {
        return;
    }
    let dir = common::test_dir(test);
    for (tag, flags) in BUILDS {
        let exe = build_with(&dir, tag, LATE_PROVIDER, LATE_PROG, flags);
        // A process that maps the program when tracing starts; two more started after.
        let mut holder = Command::new(&exe)
            .arg("-1")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let script = dir.join(format!("{tag}.sh"));
        let e = exe.display();
        std::fs::write(&script, format!("#!/bin/sh\n{e} 3\n{e} 4\n")).unwrap();
        Command::new("chmod")
            .arg("+x")
            .arg(&script)
            .status()
            .unwrap();
        let (rc, out, err) = common::dtrace(&[
            "-qn",
            "lateprov*:::hit { @n[probeprov] = count(); @s[probeprov] = sum(arg0); }
             lateprov*:::tick { @t[probeprov] = count(); }
             END { printa(\"n %s %@d\\n\", @n); printa(\"s %s %@d\\n\", @s);
                   printa(\"t %s %@d\\n\", @t); }",
            "-c",
            &script.display().to_string(),
        ]);
        drop(holder.stdin.take());
        let _ = holder.wait();
        assert_eq!(rc, 0, "{tag}: {err}");
        let mut runs = 0;
        for l in out.lines() {
            let w: Vec<&str> = l.split_whitespace().collect();
            let ["pid", pid, "n", n, "enabled", enabled] = w.as_slice() else {
                continue;
            };
            runs += 1;
            let k: i64 = n.parse().unwrap();
            // The is-enabled test was true in the new process; each probe fired k times.
            assert_eq!(*enabled, *n, "{tag}: {out}");
            let p = format!("lateprov{pid}");
            for (agg, want) in [("n", k), ("s", k * (k - 1) / 2), ("t", k)] {
                assert!(
                    out.contains(&format!("{agg} {p} {want}\n")),
                    "{tag}: {agg} {p} {want} not in {out}{err}"
                );
            }
        }
        assert_eq!(runs, 2, "{tag}: {out}");
    }
}
