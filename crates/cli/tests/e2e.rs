//! `dtrace` end to end on the probes that need no kernel help (BEGIN, END, ERROR, tick-N): golden
//! stdout, stderr and exit statuses, written from DTrace's documented output formats.

mod common;
use common::Out;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

fn dtrace(args: &[&str]) -> Out {
    common::dtrace(args).into()
}

fn script(name: &str, text: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("dtrace-e2e-{}-{name}", std::process::id()));
    std::fs::File::create(&p)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .unwrap();
    p
}

#[test]
fn begin_trace_default_output() {
    let o = dtrace(&["-n", "BEGIN { trace(42); trace(\"hello\"); exit(0); }"]);
    assert_eq!(o.rc, 0);
    assert_eq!(
        o.stdout,
        format!(
            "CPU     ID                    FUNCTION:NAME\n  0      1                           :BEGIN          42  hello{}\n\n",
            " ".repeat(28)
        )
    );
    assert_eq!(o.stderr, "dtrace: description 'BEGIN ' matched 1 probe\n");
}

#[test]
fn quiet_printf_and_exit_status() {
    let o = dtrace(&[
        "-qn",
        "BEGIN { printf(\"%d|%5s|%-4x|%c|%05d|%+d\\n\", -7, \"ab\", 255, 65, 42, 3); exit(3); }",
    ]);
    assert_eq!(o.rc, 3);
    assert_eq!(o.stdout, "-7|   ab|ff  |A|00042|+3\n\n");
    assert_eq!(o.stderr, "");
}

#[test]
fn printf_d_of_an_unsigned_first_argument_prints_it_unsigned() {
    // The first argument is recorded by the printf action itself: an unsigned one (an element of an
    // associative array or a thread-local of an unsigned type) is printed unsigned by %d as well.
    let o = dtrace(&[
        "-qn",
        "unsigned char C[int]; self unsigned long long L; \
         BEGIN { C[0] = -2; self->L = -5; printf(\"%d\", C[0]); printf(\" %d\", self->L); \
         printf(\" %d %d\", C[0] + C[0], C[0]); printf(\" %d\\n\", (char)-3); exit(0); }",
    ]);
    assert_eq!(o.stderr, "");
    assert_eq!(o.stdout, "254 18446744073709551611 252 254 -3\n\n");
    assert_eq!(o.rc, 0);
}

#[test]
fn a_string_stored_through_a_pointer_into_scratch_is_copied_there() {
    // `*x = "abc"` copies the string into alloca'd memory; the assignment's value is the copy
    let o = dtrace(&[
        "-qn",
        "BEGIN { x = (string *)alloca(sizeof(string) + 1); *x = \"abc\"; \
         y = *x = strjoin(*x, \"def\"); printf(\"%s %s \", *x, y); \
         printf(\"%s\\n\", *x = timestamp > 0 ? \"ghi\" : \"jk\"); exit(0); }",
    ]);
    assert_eq!(o.stderr, "");
    assert_eq!(o.stdout, "abcdef abcdef ghi\n\n");
    assert_eq!(o.rc, 0);
    // memory that is not scratch is not written
    let o = dtrace(&[
        "-qn",
        "BEGIN { x = (string *)0x1000; *x = \"abc\"; } \
         ERROR { printf(\"fault %d\\n\", arg4); exit(0); }",
    ]);
    assert_eq!(o.stdout, "fault 1\n\n");
    assert_eq!(o.rc, 0);
}

#[test]
fn libraries_of_a_libdir_are_declared_in_dependency_order() {
    let dir = std::env::temp_dir().join(format!("dtrace-e2e-{}-libdir", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("ok")).unwrap();
    std::fs::create_dir_all(dir.join("bad")).unwrap();
    let write = |p: &str, t: &str| std::fs::write(dir.join(p), t).unwrap();
    // a.d sorts first but depends on b.d; c.d needs a module that is not loaded, d.d needs c.d
    write(
        "ok/a.d",
        "#pragma D depends_on library b.d\ninline int foo = bar + 1;\n",
    );
    write("ok/b.d", "typedef int libint_t;\ninline int bar = 41;\n");
    write(
        "ok/c.d",
        "#pragma D depends_on module no_such_module_here\ninline int baz = 1;\n",
    );
    write(
        "ok/d.d",
        "#pragma D depends_on library c.d\ninline int qux = baz;\n",
    );
    write("bad/a.d", "#pragma D depends_on library notthere.d\n");
    let ok = dir.join("ok").display().to_string();
    let o = dtrace(&[
        "-L",
        &ok,
        "-qn",
        "BEGIN { printf(\"%d %d\\n\", foo, sizeof(libint_t)); exit(0); }",
    ]);
    assert_eq!(
        (o.stdout.as_str(), o.stderr.as_str(), o.rc),
        ("42 4\n\n", "", 0)
    );
    // the libraries left out declare nothing
    let o = dtrace(&["-L", &ok, "-qn", "BEGIN { trace(qux); exit(0); }"]);
    assert_eq!(o.rc, 1);
    assert!(o.stderr.contains("failed to resolve qux"), "{}", o.stderr);
    let bad = dir.join("bad").display().to_string();
    let o = dtrace(&["-L", &bad, "-qn", "BEGIN { exit(0); }"]);
    assert_eq!(o.rc, 1);
    assert_eq!(
        o.stderr,
        format!(
            "dtrace: invalid probe specifier BEGIN {{ exit(0); }}: \
             Invalid library dependency in {bad}/a.d: {bad}/notthere.d\n"
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn script_with_pragmas_arguments_and_aggregations() {
    let p = script(
        "aggs.d",
        "#pragma D option quiet\n\
         BEGIN\n{\n\
         \t@s[\"a\"] = sum(10); @s[\"b\"] = sum(3);\n\
         \t@mn = min(4); @mn = min(-2);\n\
         \t@av = avg(3); @av = avg(6);\n\
         \t@l = lquantize(3, 0, 10, 5); @l = lquantize(12, 0, 10, 5);\n\
         \tprinta(\"%s -> %@d\\n\", @s);\n\
         \tx[1, \"k\"] = 5; self->t = 7; this->c = 9;\n\
         \tprintf(\"%d %d %d %s\\n\", x[1, \"k\"], self->t, this->c, $$1);\n\
         \texit(0);\n}\n",
    );
    let o = dtrace(&["-s", p.to_str().unwrap(), "hello"]);
    let _ = std::fs::remove_file(&p);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert_eq!(o.stderr, "");
    let want = "b -> 3\na -> 10\n5 7 9 hello\n\n               -2\n                4\n\n           value  ------------- Distribution ------------- count    \n             < 0 |                                         0        \n               0 |@@@@@@@@@@@@@@@@@@@@                     1        \n               5 |                                         0        \n           >= 10 |@@@@@@@@@@@@@@@@@@@@                     1        \n\n";
    assert_eq!(o.stdout, want);
}

#[test]
fn tick_probes_count_and_quantize() {
    let o = dtrace(&[
        "-n",
        "tick-1ms /i++ < 5/ { @c[\"ticks\"] = count(); @q = quantize(i); } tick-1ms /i >= 5/ { exit(0); } END { printf(\"%s %d\\n\", \"end\", i); }",
    ]);
    assert_eq!(o.rc, 0);
    assert_eq!(
        o.stderr,
        "dtrace: description 'tick-1ms ' matched 3 probes\n"
    );
    let want = format!(
        "CPU     ID                    FUNCTION:NAME\n  0 {:>6} {:>32} \n  0      2                             :END end 5\n\n\n  ticks{}5\n\n           value  ------------- Distribution ------------- count    \n               0 |                                         0        \n               1 |@@@@@@@@                                 1        \n               2 |@@@@@@@@@@@@@@@@                         2        \n               4 |@@@@@@@@@@@@@@@@                         2        \n               8 |                                         0        \n\n",
        o.stdout
            .lines()
            .nth(1)
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or("?"),
        ":tick-1ms",
        " ".repeat(61)
    );
    assert_eq!(o.stdout, want);
}

#[test]
fn runtime_errors_are_reported_and_tracing_goes_on() {
    let o = dtrace(&[
        "-qn",
        "BEGIN { x = (int *)0; trace(*x); } BEGIN { printf(\"%s\\n\", \"still here\"); exit(0); }",
    ]);
    assert_eq!(o.rc, 0);
    assert_eq!(o.stdout, "still here\n\n");
    assert!(
        o.stderr.starts_with(
            "dtrace: error in dt_clause_0 for probe ID 1 (dtrace:::BEGIN): invalid address (0x0) at BPF pc "
        ),
        "{}",
        o.stderr
    );
}

#[test]
fn compile_errors_exit_1() {
    let o = dtrace(&["-n", "BEGIN { trace(; }"]);
    assert_eq!(o.rc, 1);
    assert!(o
        .stderr
        .starts_with("dtrace: invalid probe specifier BEGIN { trace(; }: "));
    let p = script("bad.d", "BEGIN\n{\n\tnosuchfunc(1);\n}\n");
    let o = dtrace(&["-s", p.to_str().unwrap()]);
    let _ = std::fs::remove_file(&p);
    assert_eq!(o.rc, 1);
    assert!(o.stderr.starts_with(&format!(
        "dtrace: failed to compile script {}: ",
        p.display()
    )));
}

#[test]
fn output_file_and_environment_options() {
    let f = std::env::temp_dir().join(format!("dtrace-e2e-{}-out", std::process::id()));
    let _ = std::fs::remove_file(&f);
    let o = Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .args([
            "-o",
            f.to_str().unwrap(),
            "-n",
            "BEGIN { trace(1); exit(0); }",
        ])
        .env("DTRACE_OPT_QUIET", "")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(o.stdout.is_empty() && o.stderr.is_empty());
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "1\n");
    let _ = std::fs::remove_file(&f);
}

#[test]
fn a_clause_with_only_ftruncate_truncates_the_output_file() {
    let f = std::env::temp_dir().join(format!("dtrace-e2e-{}-ftrunc", std::process::id()));
    let _ = std::fs::remove_file(&f);
    let o = dtrace(&[
        "-q",
        "-o",
        f.to_str().unwrap(),
        "-n",
        "BEGIN { printf(\"a\\n\"); } BEGIN { ftruncate(); } BEGIN { printf(\"b\\n\"); exit(0); }",
    ]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    let text = std::fs::read_to_string(&f).unwrap();
    let _ = std::fs::remove_file(&f);
    assert!(text.starts_with("b\n"), "{text:?}");
}

/// The `-l` heading.
const HEADING: &str = "   ID   PROVIDER            MODULE                          FUNCTION NAME\n";

#[test]
fn verbose_listing_of_begin() {
    let o = dtrace(&["-lv", "-n", "BEGIN"]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        format!(
            "{HEADING}    1     dtrace {:17} {:33} BEGIN

\tProbe Description Attributes
\t\tIdentifier Names: Stable
\t\tData Semantics:   Stable
\t\tDependency Class: Common

\tArgument Attributes
\t\tIdentifier Names: Stable
\t\tData Semantics:   Stable
\t\tDependency Class: Common

\tArgument Types
\t\tNone

",
            "", ""
        )
    );
}

#[test]
fn listing_the_probes_of_a_script_and_of_clauses() {
    let d = script(
        "list.d",
        "END { printf(\"bye\"); }\nBEGIN /1/ { trace(1); }\nBEGIN { trace(2); }\nnosuch:::probe { }\n",
    );
    let o = dtrace(&["-l", "-s", &d.display().to_string()]);
    let _ = std::fs::remove_file(&d);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    // One listing per clause, in the script's order; a clause matching nothing is reported.
    let end = format!("    2     dtrace {:17} {:33} END\n", "", "");
    let begin = format!("    1     dtrace {:17} {:33} BEGIN\n", "", "");
    assert_eq!(o.stdout, format!("{HEADING}{end}{begin}{begin}"));
    assert_eq!(
        o.stderr,
        "dtrace: failed to match nosuch:::probe: No probe matches description\n"
    );
    let f = std::env::temp_dir().join(format!("dtrace-e2e-{}-list.out", std::process::id()));
    let _ = std::fs::remove_file(&f);
    let o = dtrace(&[
        "-l",
        "-n",
        "BEGIN, END /0/ { exit(0); }",
        "-o",
        &f.display().to_string(),
    ]);
    assert_eq!((o.rc, o.stdout.as_str()), (0, ""), "{}", o.stderr);
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        format!("{HEADING}{begin}{end}")
    );
    let _ = std::fs::remove_file(&f);
    let o = dtrace(&["-l", "-n", "BEGIN, END /0/ { exit(0); }"]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert_eq!(o.stdout, format!("{HEADING}{begin}{end}"));
    let o = dtrace(&["-l", "-n", "BEGIN { trace( }"]);
    assert_eq!(o.rc, 1);
    assert!(
        o.stderr
            .starts_with("dtrace: invalid probe specifier BEGIN { trace( }: "),
        "{}",
        o.stderr
    );
}

#[test]
fn listing_probes() {
    let o = dtrace(&["-l", "-n", "dtrace:::BEGIN"]);
    assert_eq!(o.rc, 0);
    assert_eq!(
        o.stdout,
        format!(
            "   ID   PROVIDER            MODULE                          FUNCTION NAME\n    1     dtrace {:17} {:33} BEGIN\n",
            "", ""
        )
    );
}

#[test]
fn sigint_ends_the_run_with_end_and_aggregations() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dtrace"))
        .args([
            "-n",
            "tick-1ms { @n = count(); trace(1); } END { trace(\"end\"); }",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A hang guard, not a timing assertion: a stuck run is killed so the test fails instead.
    let pid = child.id() as i32;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d2 = done.clone();
    std::thread::spawn(move || {
        for _ in 0..120 {
            std::thread::sleep(std::time::Duration::from_secs(1));
            if d2.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
        }
        // SAFETY: signalling the child we spawned, which has not been waited for yet.
        unsafe { libc_kill(pid, 9) };
    });
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert_eq!(line, "dtrace: description 'tick-1ms ' matched 2 probes\n");
    // Wait until a tick has been consumed, so that the aggregation has data.
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = Vec::new();
    loop {
        let mut l = String::new();
        assert!(out.read_line(&mut l).unwrap() > 0, "no tick seen: {seen:?}");
        let tick = l.contains(":tick-1ms");
        seen.push(l);
        if tick {
            break;
        }
    }
    // SAFETY: sending a signal to our own child.
    unsafe { libc_kill(child.id() as i32, 2) };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let status = child.wait();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(status.unwrap().code(), Some(0));
    // ... more tick lines, the interrupt newline, END, the final newline and the count.
    let tail: Vec<&str> = rest.lines().rev().take(4).collect();
    assert!(tail[0].trim().parse::<u64>().unwrap() >= 1, "{rest}");
    assert_eq!(tail[1], "");
    assert!(
        tail[2].starts_with("  0      2                             :END   end"),
        "{rest}"
    );
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

#[test]
fn descriptions_matching_nothing() {
    let o = dtrace(&["-n", "nosuch:::probe { trace(1); }"]);
    assert_eq!(o.rc, 1);
    assert_eq!(
        o.stderr,
        "dtrace: invalid probe specifier nosuch:::probe { trace(1); }: probe description nosuch:::probe does not match any probes\n"
    );
    // With `-x errtags` the tag is named; a program given as a string has no line.
    let o = dtrace(&["-xerrtags", "-n", "BEGIN::read:entry"]);
    assert_eq!(o.rc, 1);
    assert_eq!(
        o.stderr,
        "dtrace: invalid probe specifier BEGIN::read:entry: [D_PDESC_ZERO] probe description BEGIN::read:entry does not match any probes\n"
    );
    // A script names the line of the description that matches nothing (the second clause's,
    // after the first clause matched), with the tag only under `-x errtags`.
    let text = "BEGIN\n{\n}\n\n/* none */\nnosuch:::probe,\n:::no_such_probe*\n{\n\ttrace(1);\n}\n";
    let p = script("pdesc-zero.d", text);
    let path = p.to_str().unwrap();
    let o = dtrace(&["-s", path]);
    assert_eq!(o.rc, 1);
    assert_eq!(
        o.stderr,
        format!("dtrace: failed to compile script {path}: line 6: probe description nosuch:::probe does not match any probes\n")
    );
    let o = dtrace(&["-xerrtags", "-s", path]);
    let _ = std::fs::remove_file(&p);
    assert_eq!(o.rc, 1);
    assert_eq!(
        o.stderr,
        format!("dtrace: failed to compile script {path}: [D_PDESC_ZERO] line 6: probe description nosuch:::probe does not match any probes\n")
    );
    let o = dtrace(&[
        "-Z",
        "-qn",
        "nosuch:::probe { trace(1); } BEGIN { exit(0); }",
    ]);
    assert_eq!((o.rc, o.stdout.as_str()), (0, "\n"));
}

#[test]
fn printf_without_arguments_in_a_clause_of_its_own() {
    let o = dtrace(&["-n", "BEGIN { exit(0); } END { printf(\"done\\n\"); }"]);
    assert_eq!(o.rc, 0);
    assert_eq!(
        o.stdout,
        "CPU     ID                    FUNCTION:NAME\n  0      1                           :BEGIN \n  0      2                             :END done\n\n\n"
    );
}

#[test]
fn destructive_actions_are_refused_when_tracing_starts() {
    // compiled and enabled, then refused by dtrace_go(), as DTrace reports it
    let o = dtrace(&["-n", "BEGIN { raise(0); exit(0); }"]);
    assert_eq!(o.rc, 1);
    assert_eq!(
        o.stderr,
        "dtrace: description 'BEGIN ' matched 1 probe\ndtrace: could not enable tracing: Destructive actions not allowed\n"
    );
    assert_eq!(o.stdout, "");
}

#[test]
fn aggregation_display_options_from_x_pragma_and_setopt() {
    // -x aggpack: quantize() on one line, ASCII cells by the -x encoding.
    let o = dtrace(&[
        "-q",
        "-x",
        "aggpack",
        "-x",
        "encoding=ascii",
        "-n",
        "BEGIN { @ = quantize(1); @ = quantize(4, 4); exit(0); }",
    ]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert_eq!(o.stderr, "");
    assert_eq!(
        o.stdout,
        "\n\n  min .-----. max  | count\n    0 : _ X : 8    | 5\n"
    );

    // #pragma D option agghist and aggzoom: counts and sums as histograms scaled to the largest.
    let p = script(
        "agghist.d",
        "#pragma D option quiet\n\
         #pragma D option agghist\n\
         #pragma D option aggzoom\n\
         BEGIN\n{\n\
         \t@c[\"read\"] = count(); @c[\"read\"] = count(); @c[\"write\"] = count();\n\
         \t@s[1] = sum(-3); @s[2] = sum(6);\n\
         \texit(0);\n}\n",
    );
    let o = dtrace(&["-s", p.to_str().unwrap()]);
    let _ = std::fs::remove_file(&p);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert_eq!(o.stderr, "");
    let dist = "------------- Distribution -------------";
    let want = format!(
        "\n\n{:>17}  {dist} count    \n{:>17} |{:<40} 1        \n{:>17} |{} 2        \n\n{:>9}  {dist} count    \n{:>9} {:>20}|{:20} -3       \n{:>9} {:20}|{} 6        \n",
        "key",
        "write",
        "@".repeat(20),
        "read",
        "@".repeat(40),
        "key",
        1,
        "@".repeat(10),
        "",
        2,
        "",
        "@".repeat(20)
    );
    assert_eq!(o.stdout, want);

    // setopt() while tracing, then printa() without a format: lquantize() packed over its whole
    // range, in UTF-8 block elements.
    let o = dtrace(&[
        "-qn",
        "BEGIN { setopt(\"aggpack\"); setopt(\"encoding\", \"utf8\"); @l[\"x\"] = lquantize(3, 0, 10, 5); printa(@l); exit(0); }",
    ]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert_eq!(o.stderr, "");
    assert_eq!(
        o.stdout,
        format!(
            "\n\n{:>17}     min .----. max      | count\n{:>17}     < 0 : \u{2588}  : >= 10    | 1\n\n",
            "key", "x"
        )
    );
}

#[test]
fn wide_character_printf_conversions() {
    let o = dtrace(&[
        "-qn",
        "int w[4]; BEGIN { w[0] = 0x68; w[1] = 0xe9; printf(\"%lc%lc|%3wc|[%ls|%-4ws]\\n\", 0x48, 0xe9, 0x20ac, w, w); exit(0); }",
    ]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert_eq!(o.stderr, "");
    assert_eq!(o.stdout, "H\u{e9}|\u{20ac}|[h\u{e9}|h\u{e9} ]\n\n");
    // A value with no multibyte form stops processing, as the C library's EILSEQ does DTrace's.
    let o = dtrace(&["-qn", "BEGIN { printf(\"[%lc]\\n\", 0xd800); exit(0); }"]);
    assert_eq!(o.rc, 1);
    assert_eq!(
        o.stderr,
        "dtrace: processing aborted: wide character 0xd800 has no multibyte form: Illegal byte sequence\n"
    );
}

/// The programs of one command line share their identifiers, as in DTrace: a `self->` variable or a
/// global set by one `-n` program is the one the next reads, and aggregations stay apart.
#[test]
fn programs_share_variables() {
    let o = dtrace(&[
        "-q",
        "-n",
        "BEGIN { self->t = 5; x = 3; @a = count(); }",
        "-n",
        "BEGIN /self->t/ { printf(\"%d %d\\n\", self->t, x); @b = sum(x); }",
        "-n",
        "tick-1ms { x++; } tick-1ms /x == 6/ { printf(\"x=%d\\n\", x); exit(0); }",
    ]);
    assert_eq!(o.stderr, "");
    assert_eq!(o.rc, 0);
    assert_eq!(
        o.stdout,
        "5 3\nx=6\n\n                1\n                3\n"
    );
}

#[test]
fn type_conflict_across_programs() {
    let o = dtrace(&["-n", "BEGIN { x = 1; }", "-n", "BEGIN { x = \"a\"; }"]);
    assert_eq!(o.rc, 1);
    assert_eq!(
        o.stderr,
        "dtrace: invalid probe specifier BEGIN { x = \"a\"; }: in action list: operands have incompatible types: \"int\" = \"string\"\n"
    );
    let o = dtrace(&[
        "-n",
        "BEGIN { @a = count(); }",
        "-n",
        "BEGIN { @a = sum(1); }",
    ]);
    assert_eq!(o.rc, 1);
    assert!(
        o.stderr
            .starts_with("dtrace: invalid probe specifier BEGIN { @a = sum(1); }: "),
        "{}",
        o.stderr
    );
    // Alone, the second program cannot know self->t.
    let o = dtrace(&["-n", "BEGIN /self->t/ { exit(0); }"]);
    assert_eq!(o.rc, 1);
    assert!(o
        .stderr
        .contains("self->t has not yet been declared or assigned"));
}

/// A `dtrace -v` stability report as DTrace prints it (`Stability attributes for ...`), from
/// (name, data, class) triples of the description and of the statements.
fn stability(what: &str, desc: [&str; 3], stmt: [&str; 3]) -> String {
    format!(
        "\nStability attributes for {what}:\n\
         \n\tMinimum Probe Description Attributes\n\
         \t\tIdentifier Names: {}\n\t\tData Semantics:   {}\n\t\tDependency Class: {}\n\
         \n\tMinimum Statement Attributes\n\
         \t\tIdentifier Names: {}\n\t\tData Semantics:   {}\n\t\tDependency Class: {}\n",
        desc[0], desc[1], desc[2], stmt[0], stmt[1], stmt[2]
    )
}

const STABLE: [&str; 3] = ["Stable", "Stable", "Common"];
const UNSTABLE: [&str; 3] = ["Unstable", "Unstable", "Common"];

#[test]
fn verbose_stability_report_of_begin() {
    // No provider named: the description is Unstable; trace(1) is D's own, Stable.
    let o = dtrace(&["-v", "-n", "BEGIN { trace(1); exit(0); }"]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert_eq!(o.stderr, "dtrace: description 'BEGIN ' matched 1 probe\n");
    assert_eq!(
        o.stdout,
        format!(
            "{}\nCPU     ID                    FUNCTION:NAME\n  0      1                           :BEGIN           1\n\n",
            stability("description BEGIN ", UNSTABLE, STABLE)
        )
    );
}

#[test]
fn verbose_stability_report_with_builtin_variables() {
    // dtrace:::BEGIN names the dtrace provider (Stable provider and name); curthread has Private
    // data; probefunc takes the provider's function attributes (Private/Private/Unknown); a
    // script is reported by its path.
    let p = script(
        "stab.d",
        "dtrace:::BEGIN { self->t = curthread; }\ndtrace:::BEGIN { exit(0); }\n",
    );
    let path = p.to_str().unwrap().to_string();
    let o = dtrace(&[
        "-qv",
        "-s",
        &path,
        "-n",
        "dtrace:::BEGIN { x = probefunc; }",
        "-n",
        "BEGIN { y = execname; z = htons(1); }",
    ]);
    let _ = std::fs::remove_file(&p);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    let want = [
        stability(
            &format!("script {path}"),
            STABLE,
            ["Stable", "Private", "Common"],
        ),
        stability(
            "description dtrace:::BEGIN ",
            STABLE,
            ["Private", "Private", "Unknown"],
        ),
        stability(
            "description BEGIN ",
            UNSTABLE,
            ["Evolving", "Evolving", "Common"],
        ),
    ]
    .join("\n");
    assert_eq!(o.stdout, format!("{want}\n\n"));
}

#[test]
fn verbose_stability_report_without_enabling() {
    // -e: compiled, not enabled; each description follows with its probe's information.
    let o = dtrace(&["-ev", "-n", "dtrace:::BEGIN, tick-1s { trace(timestamp); }"]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert_eq!(o.stderr, "");
    let info = |desc: [&str; 3], args: [&str; 3]| {
        format!(
            "\n\tProbe Description Attributes\n\
             \t\tIdentifier Names: {}\n\t\tData Semantics:   {}\n\t\tDependency Class: {}\n\
             \n\tArgument Attributes\n\
             \t\tIdentifier Names: {}\n\t\tData Semantics:   {}\n\t\tDependency Class: {}\n\
             \n\tArgument Types\n\t\tNone\n\n",
            desc[0], desc[1], desc[2], args[0], args[1], args[2]
        )
    };
    assert_eq!(
        o.stdout,
        format!(
            "{}\ndtrace:::BEGIN\n{}\n:::tick-1s\n{}",
            stability("description dtrace:::BEGIN, tick-1s ", UNSTABLE, STABLE),
            info(STABLE, STABLE),
            info(UNSTABLE, UNSTABLE),
        )
    );
}

#[test]
fn print_shows_the_object_a_pointer_points_to() {
    // DTrace for Linux's print(): the address, then the object (a union, an enum, bit-fields,
    // arrays and a nested struct; members that are zero left out), as in its tst.print.*.r files
    let p = script(
        "print.d",
        "#pragma D option quiet\n\
         enum color { RED = 1, GREEN, BLUE };\n\
         typedef struct point { int x; int y; } point_t;\n\
         struct shape {\n\
         \tchar name[8];\n\
         \tenum color color;\n\
         \tpoint_t corner[2];\n\
         \tunion { int i; unsigned char b[4]; } u;\n\
         \tunsigned int visible:1;\n\
         \tunsigned int layer:5;\n\
         \tstruct shape *next;\n\
         \tlong zero;\n\
         };\n\
         BEGIN\n{\n\
         \tthis->s = (struct shape *)alloca(sizeof (struct shape));\n\
         \tthis->s->color = BLUE;\n\
         \tthis->s->next = (struct shape *)0xfeedfacefeedface;\n\
         \tthis->s->u.i = 0x01020304;\n\
         \tthis->c = (char *)this->s;\n\
         \tthis->c[0] = 'b'; this->c[1] = 'o'; this->c[2] = 'x';\n\
         \tthis->pt = (int *)((char *)this->s + offsetof(struct shape, corner));\n\
         \tthis->pt[2] = 3; this->pt[3] = 4;\n\
         \tthis->c[offsetof(struct shape, next) - 8] = 0x1;\n\
         \tthis->c[offsetof(struct shape, next) - 7] = 0x6;\n\
         \tprint(this->s);\n\
         \tprint((void *)0x1234);\n\
         \texit(0);\n}\n",
    );
    let o = dtrace(&["-s", p.to_str().unwrap()]);
    let _ = std::fs::remove_file(&p);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert_eq!(o.stderr, "");
    let (addr, rest) = o.stdout.split_once(" = *\n").expect("an address line");
    assert!(addr.starts_with("0x"), "{addr}");
    let m = " ".repeat(44);
    let want = [
        "(struct shape) {",
        " .name = (char [8]) [",
        "  (char)'b',",
        "  (char)'o',",
        "  (char)'x',",
        " ],",
        " .color = (enum color)BLUE,",
        " .corner = (point_t [2]) [",
        "  (point_t) {",
        "  },",
        "  (point_t) {",
        "   .x = (int)3,",
        "   .y = (int)4,",
        "  },",
        " ],",
        " .u = (union) {",
        "  .i = (int)16909060,",
        "  .b = (unsigned char [4]) [",
        "   (unsigned char)4,",
        "   (unsigned char)3,",
        "   (unsigned char)2,",
        "   (unsigned char)1,",
        "  ],",
        " },",
        " .visible = (unsigned int)0x1,",
        " .layer = (unsigned int)0x6,",
        " .next = (struct shape *)0xfeedfacefeedface,",
        "}",
        "0x1234 = *",
        "",
    ]
    .iter()
    .map(|l| {
        if l.starts_with(['(', ' ', '}']) {
            format!("{m}{l}\n")
        } else {
            format!("{l}\n")
        }
    })
    .collect::<String>();
    assert_eq!(rest, want);
}

#[test]
fn print_shows_kernel_types_from_btf() {
    if !dtrace_testkit::skip_unless(
        std::path::Path::new("/sys/kernel/btf/vmlinux").exists(),
        "print_shows_kernel_types_from_btf",
        "no /sys/kernel/btf/vmlinux",
    ) {
        return;
    }
    // DTrace for Linux's print/tst.print.skb.d, and printsize (tst.print.local.trunc.d's shape)
    let o = dtrace(&[
        "-qn",
        "BEGIN { skb = (struct sk_buff *)alloca(sizeof (struct sk_buff)); skb->len = 123; \
         skb->data = (unsigned char *)0xfeedfacefeedface; skb->truesize = 32; print(skb); \
         this->t = (struct timespec64 *)alloca(sizeof (struct timespec64)); \
         this->t->tv_sec = 12; this->t->tv_nsec = 345; setopt(\"printsize\", \"8\"); print(this->t); exit(0); }",
    ]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    let m = " ".repeat(44);
    let got: Vec<String> = o
        .stdout
        .lines()
        .map(|l| match l.split_once(" = *") {
            Some((a, "")) if a.starts_with("0x") => "ADDR = *".to_string(),
            _ => l.replace(&m, "|"),
        })
        .collect();
    assert_eq!(
        got,
        [
            "ADDR = *",
            "|(struct sk_buff) {",
            "| .len = (unsigned int)123,",
            "| .data = (unsigned char *)0xfeedfacefeedface,",
            "| .truesize = (unsigned int)32,",
            "|}",
            "ADDR = *",
            "|(struct timespec64) {",
            "| .tv_sec = (time64_t)12,",
            "| ...",
            "|}",
            "",
        ]
    );
}

/// One aggregation fed by clauses whose keys differ in size (`ustack(1)` and `ustack(3)`): each
/// entry's key is read with the layout of the clause that made it, as DTrace keeps one description
/// per aggregation id.
#[test]
fn aggregation_keys_of_different_sizes() {
    let o = dtrace(&[
        "-qn",
        "BEGIN { @[ustack(1)] = count(); @[ustack(3)] = count(); @[ustack(3)] = count(); exit(0); }",
    ]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    // BEGIN runs in dtrace itself, where no user stack is captured: empty stacks, counts 1 and 2.
    assert_eq!(o.stdout, "\n\n                1\n\n                2\n");
}

/// `-i id`: a probe named by its id, to list or to trace (with an optional clause after the id);
/// an unknown id is DTrace's "invalid probe identifier".
#[test]
fn probes_by_id() {
    let o = dtrace(&["-l", "-i", "1"]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "   ID   PROVIDER            MODULE                          FUNCTION NAME\n    1     dtrace                                                     BEGIN\n"
    );
    let o = dtrace(&[
        "-q",
        "-i",
        "1 { printf(\"hi %s\\n\", probename); exit(0); }",
    ]);
    assert_eq!(
        (o.rc, o.stdout.as_str()),
        (0, "hi BEGIN\n\n"),
        "{}",
        o.stderr
    );
    let o = dtrace(&["-i", "4000000"]);
    assert_eq!(o.rc, 1);
    assert_eq!(
        o.stderr,
        "dtrace: invalid probe specifier 4000000: invalid probe identifier 4000000: Unknown probe identifier\n"
    );
}

#[test]
fn system_passes_the_formatted_bytes_to_the_shell_unchanged() {
    // "\xc0\xa8" is two bytes that are not UTF-8: the shell must get them as they are.
    let p = script(
        "system-bytes.d",
        "BEGIN { system(\"printf %%s '%s' | od -An -tx1\", \"\\xc0\\xa8\"); exit(0); }\n",
    );
    let o = dtrace(&["-q", "-w", "-s", p.to_str().unwrap()]);
    let _ = std::fs::remove_file(&p);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout.split_whitespace().collect::<Vec<_>>(),
        ["c0", "a8"]
    );
}

#[test]
fn a_format_string_keeps_bytes_that_are_not_utf8() {
    // The same bytes written in the format itself: the format travels as bytes from the lexer
    // to the consumer (a lossy UTF-8 conversion turned each into EF BF BD).
    let p = script(
        "format-bytes.d",
        "BEGIN { system(\"printf '\\xc0\\xa8\\x01\\x17' | od -An -tx1\"); exit(0); }\n",
    );
    let o = dtrace(&["-q", "-w", "-s", p.to_str().unwrap()]);
    let _ = std::fs::remove_file(&p);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout.split_whitespace().collect::<Vec<_>>(),
        ["c0", "a8", "01", "17"]
    );
}

#[test]
fn an_alloca_pointer_is_recorded_as_its_scratch_offset() {
    // DTrace for Linux's alloca pointers are offsets in the scratch area after 8 reserved bytes.
    let o = dtrace(&[
        "-qn",
        "BEGIN { x = (char *)alloca(8); trace(x); y = alloca(16); printf(\" %d\", (uint64_t)y); exit(0); }",
    ]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert_eq!(o.stdout, "8 16\n");
}

#[test]
fn strtok_of_a_null_string_expression_faults_at_address_0() {
    let o = dtrace(&[
        "-qn",
        "BEGIN { strtok(strstr(\"abc\", \"def\"), \"\"); exit(1); } ERROR { exit(0); }",
    ]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains("(dtrace:::BEGIN): invalid address (0x0)"),
        "{}",
        o.stderr
    );
}

#[test]
fn aggsortrev_prints_the_last_aggregation_first() {
    // DTrace sorts by aggregation, then key or value; aggsortrev reverses the whole order.
    let o = dtrace(&[
        "-q",
        "-x",
        "aggsortrev",
        "-n",
        "BEGIN { @a = count(); @b = sum(5); exit(0); }",
    ]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert_eq!(o.stdout, format!("\n{:>17}\n{:>17}\n", 5, 1));
}

#[test]
fn a_dropped_dynamic_variable_store_ends_its_clause() {
    // DTrace for Linux: the clause stops at the store that got no variable (one drop counted,
    // no record, no error); the next clause runs.
    let o = dtrace(&[
        "-q",
        "-x",
        "dynvarsize=1024",
        "-x",
        "strsize=512",
        "-n",
        "BEGIN { a[\"x\"] = 1; a[\"y\"] = 1; a[\"z\"] = 1; printf(\"rest\\n\"); } BEGIN { printf(\"next\\n\"); exit(0); }",
    ]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert!(o.stdout.starts_with("next\n"), "{}", o.stdout);
    assert!(!o.stdout.contains("rest"), "{}", o.stdout);
    assert!(
        o.stderr.contains("1 dynamic variable drop\n"),
        "{}",
        o.stderr
    );
}

#[test]
fn begin_is_progeny_of_its_ancestors_up_to_init() {
    let o = dtrace(&[
        "-qn",
        "BEGIN { printf(\"%d %d %d\", progenyof($pid), progenyof($ppid), progenyof(1)); exit(0); }",
    ]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert!(o.stdout.starts_with("1 1 1"), "{}", o.stdout);
}

#[test]
fn trace_prints_signed_64_bit_values_in_a_19_wide_column() {
    // DTrace for Linux: ` %19ld` for signed, ` %20lu` for unsigned 64-bit values.
    let o = dtrace(&["-n", "BEGIN { trace(x++); trace(-1ul); exit(0); }"]);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    let line = o.stdout.lines().nth(1).unwrap();
    assert!(
        line.ends_with(":BEGIN                    0 18446744073709551615"),
        "{line:?}"
    );
}

/// An index computed at run time into an array variable declared with a size is checked against
/// it: DTrace for Linux's "index out of bounds" fault, naming the (signed) index; a constant
/// index is checked when compiling, and an index inside the bounds is no fault.
#[test]
fn index_past_a_declared_array_faults_at_run_time() {
    let p = script(
        "bounds.d",
        "#pragma D option quiet\n\
         int a[5];\n\
         BEGIN { i = 4; a[i] = 7; printf(\"%d\\n\", a[i]); }\n\
         BEGIN { i = 8; a[i] = 1; }\n\
         BEGIN { i = -1; trace(a[i]); }\n\
         BEGIN { exit(0); }\n",
    );
    let o = dtrace(&["-s", p.to_str().unwrap()]);
    let _ = std::fs::remove_file(&p);
    assert_eq!(o.rc, 0, "{}", o.stderr);
    assert_eq!(o.stdout, "7\n\n");
    let faults: Vec<&str> = o
        .stderr
        .lines()
        .map(|l| l.split(" at BPF pc").next().unwrap_or(l))
        .collect();
    assert_eq!(
        faults,
        [
            "dtrace: error in dt_clause_1 for probe ID 1 (dtrace:::BEGIN): index out of bounds (8)",
            "dtrace: error in dt_clause_2 for probe ID 1 (dtrace:::BEGIN): index out of bounds (-1)",
        ]
    );
}
