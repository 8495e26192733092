//! Compile options: data models, string size, C preprocessing, `defaultargs`, destructive actions.

use dtrace_compiler::{compile, CompileOptions, DataModel, ErrTag, StdcMode};

fn const_of(p: &dtrace_dif::Program, action: usize) -> u64 {
    let o = p.ecbs[0].actions[action].difo.as_ref().expect("object");
    o.inttab[0]
}

#[test]
fn data_models_size_longs_and_pointers() {
    let src = "BEGIN { trace(sizeof (long)); trace(sizeof (char *)); trace(sizeof (long long)); trace(sizeof (size_t)); }";
    let p = compile(src, &CompileOptions::default()).unwrap();
    assert_eq!(
        [
            const_of(&p, 0),
            const_of(&p, 1),
            const_of(&p, 2),
            const_of(&p, 3)
        ],
        [8, 8, 8, 8]
    );
    let o = CompileOptions {
        model: DataModel::Ilp32,
        ..Default::default()
    };
    let p = compile(src, &o).unwrap();
    assert_eq!(
        [
            const_of(&p, 0),
            const_of(&p, 1),
            const_of(&p, 2),
            const_of(&p, 3)
        ],
        [4, 4, 8, 4]
    );
}

#[test]
fn strsize_shapes_string_records() {
    let o = CompileOptions {
        strsize: 32,
        ..Default::default()
    };
    let p = compile("BEGIN { trace(execname); trace(sizeof (string)); }", &o).unwrap();
    // a string record holds strsize characters and the NUL; sizeof (string) is strsize itself
    assert_eq!(p.ecbs[0].actions[0].difo.as_ref().unwrap().rtype.size, 33);
    assert_eq!(const_of(&p, 1), 32);
}

#[test]
fn stack_depths_by_option_and_by_pragma() {
    let frames = |src: &str, o: &CompileOptions| -> Vec<(u64, u64)> {
        let p = compile(src, o).unwrap();
        p.ecbs
            .iter()
            .flat_map(|e| e.actions.iter().map(|a| (a.arg, a.uarg)))
            .collect()
    };
    let o = CompileOptions {
        stackframes: 7,
        ..Default::default()
    };
    assert_eq!(frames("BEGIN { stack(); }", &o)[0].0, 7);
    // A pragma sets the default of the stack actions after it, as DTrace's option does.
    let src = "#pragma D option stackframes=3
        #pragma D option ustackframes=4
        BEGIN { stack(); ustack(); stack(9); }";
    let f = frames(src, &o);
    assert_eq!((f[0].0, f[1].0, f[2].0), (3, 4, 9));
    assert!(compile("#pragma D option stackframes=x\nBEGIN { stack(); }", &o).is_err());
}

#[test]
fn defaultargs_by_pragma() {
    assert_eq!(
        compile("BEGIN { trace($3); }", &CompileOptions::default())
            .unwrap_err()
            .tag,
        ErrTag::D_MACRO_UNDEF
    );
    let p = compile(
        "#pragma D option defaultargs\nBEGIN { trace($3); trace($$4); }",
        &CompileOptions::default(),
    )
    .unwrap();
    assert_eq!(p.ecbs[0].actions.len(), 2);
}

#[test]
fn destructive_programs_compile_and_are_flagged() {
    // DTrace compiles them without -w and refuses them when tracing starts
    let o = CompileOptions::default();
    for src in [
        "BEGIN { system(\"date\"); }",
        "BEGIN { raise(9); }",
        "BEGIN { stop(); }",
        "BEGIN { copyout((void *)arg1, arg0, 4); }",
        "BEGIN { copyoutstr(\"a\", arg0, 2); }",
        "BEGIN /copyoutstr(\"a\", arg0, 2), 1/ { }",
    ] {
        let p = compile(src, &o).unwrap_or_else(|e| panic!("{src}: {e}"));
        assert!(dtrace_compiler::destructive(&p), "{src}");
    }
    for src in [
        "BEGIN { trace(1); exit(0); }",
        "BEGIN { printf(\"%d\", strlen(\"ab\")); }",
    ] {
        let p = compile(src, &o).unwrap_or_else(|e| panic!("{src}: {e}"));
        assert!(!dtrace_compiler::destructive(&p), "{src}");
    }
}

#[test]
fn c_preprocessor() {
    let have_cpp = dtrace_testkit::have_program("cpp");
    if !dtrace_testkit::skip_unless(have_cpp, "c_preprocessor", "no cpp on this machine") {
        return;
    }
    let o = CompileOptions {
        cpp: true,
        defines: vec!["LIMIT=7".into()],
        ..Default::default()
    };
    let src = "#define TWICE(x) ((x) * 2)\n#ifdef LIMIT\nBEGIN { trace(TWICE(LIMIT)); }\n#endif\n";
    let p = compile(src, &o).unwrap();
    assert_eq!(const_of(&p, 0), 14);
    // line numbers survive preprocessing
    let src = "#define A 1\n\n\nBEGIN { trace(nosuchvar); }\n";
    let e = compile(src, &o).unwrap_err();
    assert_eq!(e.line, Some(4));
    // A program far larger than a pipe's buffer goes through cpp whole (written while cpp's
    // output is read, never both sides waiting on a full pipe).
    let big = "BEGIN { x = LIMIT; }\n".repeat(20_000);
    let out = dtrace_compiler::cpp::preprocess(&big, &o).unwrap();
    assert_eq!(out.matches("x = 7;").count(), 20_000);
}

#[test]
fn cpp_predefinitions_and_stdc_modes() {
    let have_cpp = dtrace_testkit::have_program("cpp");
    if !dtrace_testkit::skip_unless(have_cpp, "cpp_predefinitions", "no cpp on this machine") {
        return;
    }
    let o = CompileOptions {
        cpp: true,
        ..Default::default()
    };
    // DTrace for Linux's names are defined, GNU C's is not.
    let src = "#if defined(__linux) && defined(__unix) && defined(__SVR4) && __SUNW_D == 1 \
        && defined(__SUNW_D_64) && defined(__Linux) && __SUNW_D_VERSION == 0x02000000 \
        && !defined(__GNUC__)\nBEGIN { trace(1); }\n#else\nBEGIN { trace(2); }\n#endif\n";
    assert_eq!(const_of(&compile(src, &o).unwrap(), 0), 1);
    // The default (-X a) preprocesses as C99: a system header's GNU inline functions stay out,
    // its macros stay in.
    let src = "#include <endian.h>\nBEGIN { trace(__BYTE_ORDER == __LITTLE_ENDIAN || __BYTE_ORDER == __BIG_ENDIAN); }\n";
    assert_eq!(const_of(&compile(src, &o).unwrap(), 0), 1);
    // -X s is K&R C: no __STDC__; -X c keeps it.
    let src = "#ifdef __STDC__\nBEGIN { trace(1); }\n#else\nBEGIN { trace(0); }\n#endif\n";
    for (mode, want) in [(StdcMode::Xs, 0), (StdcMode::Xc, 1), (StdcMode::Xa, 1)] {
        let o = CompileOptions {
            cpp: true,
            stdc: mode,
            ..Default::default()
        };
        assert_eq!(const_of(&compile(src, &o).unwrap(), 0), want, "{mode:?}");
    }
    assert_eq!(StdcMode::from_letter("t"), Some(StdcMode::Xt));
    assert_eq!(StdcMode::from_letter("x"), None);
}

#[test]
fn cpp_headers_lists_included_files() {
    let have_cpp = dtrace_testkit::have_program("cpp");
    if !dtrace_testkit::skip_unless(have_cpp, "cpp_headers_lists_included_files", "no cpp") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("dtrace-cpp-h-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("outer.h"), "#include \"sub/inner.h\"\n").unwrap();
    std::fs::write(dir.join("sub/inner.h"), "#define SEVEN 7\n").unwrap();
    // -H alone implies -C
    let o = CompileOptions {
        cpp_headers: true,
        includes: vec![dir.display().to_string()],
        ..Default::default()
    };
    let src = "#include \"outer.h\"\nBEGIN { trace(SEVEN); }\n";
    let (_, headers) = dtrace_compiler::cpp::preprocess_with_headers(src, &o).unwrap();
    let lines: Vec<&str> = headers.lines().collect();
    assert_eq!(lines.len(), 2, "{headers}");
    assert!(
        lines[0].starts_with(". ") && lines[0].ends_with("outer.h"),
        "{headers}"
    );
    assert!(
        lines[1].starts_with(".. ") && lines[1].ends_with("sub/inner.h"),
        "{headers}"
    );
    let p = compile(src, &o).unwrap();
    assert_eq!(const_of(&p, 0), 7);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn freopen_with_an_empty_name_restores_stdout() {
    let o = CompileOptions {
        destructive: true,
        ..Default::default()
    };
    assert!(compile("BEGIN { freopen(\"\"); }", &o).is_ok());
}
