//! `provider` declarations: what the compiler keeps of them for `dtrace -h` and `-G`.

use dtrace_compiler::{compile, CompileOptions};

#[test]
fn provider_probes_with_native_and_translated_types() {
    let src = "provider myprov {\n probe probe1(int, string);\n \
               probe query__done(char *name, long n) : (long n, string name);\n probe empty();\n};\n\
               BEGIN { exit(0); }";
    let p = compile(src, &CompileOptions::default()).unwrap();
    assert_eq!(p.providers.len(), 1);
    let pv = &p.providers[0];
    assert_eq!(pv.name, "myprov");
    let names: Vec<_> = pv.probes.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["probe1", "query-done", "empty"]);
    assert_eq!(pv.probes[0].native, ["int", "char *"]);
    assert_eq!(pv.probes[0].xlated, ["int", "string"]);
    assert_eq!(pv.probes[0].mapping, [0, 1]);
    assert_eq!(pv.probes[1].native, ["char *", "long"]);
    assert_eq!(pv.probes[1].xlated, ["long", "string"]);
    assert_eq!(pv.probes[1].mapping, [1, 0]);
    assert!(pv.probes[2].native.is_empty());
}

#[test]
fn bad_provider_declarations_are_errors() {
    let opts = CompileOptions::default();
    for src in [
        "provider p { probe a(); probe a(); };",
        "provider p1 { probe a(); };",
        "provider p { probe a(int) : (int, int); };",
        "provider p { int x; };",
        "provider p { probe a(nosuchtype_t); };",
    ] {
        assert!(compile(src, &opts).is_err(), "{src}");
    }
}

#[test]
fn provider_attribute_pragmas_are_kept() {
    let src = "provider myprov { probe p(int); };\n\
               #pragma D attributes Evolving/Evolving/Common provider myprov provider\n\
               #pragma D attributes Private/Private/Unknown provider myprov module\n\
               #pragma D attributes Evolving/Evolving/ISA provider myprov args\n";
    let p = compile(src, &CompileOptions::default()).unwrap();
    let a = p.providers[0].attrs;
    assert_eq!(a[0], Some([5, 5, 5]));
    assert_eq!(a[1], Some([1, 1, 0]));
    assert_eq!(a[2], None);
    assert_eq!(a[4], Some([5, 5, 4]));
    let opts = CompileOptions::default();
    for bad in [
        "#pragma D attributes Evolving/Evolving/Common provider myprov part\n",
        "#pragma D attributes Nope/Evolving/Common provider myprov module\n",
        "#pragma D attributes Evolving/Evolving/Common provider myprov\n",
    ] {
        assert!(compile(&format!("provider myprov {{ probe p(); }};\n{bad}"), &opts).is_err());
    }
}
