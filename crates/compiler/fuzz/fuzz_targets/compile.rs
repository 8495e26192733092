//! Fuzz target: any bytes as D source (file and string forms) compile to a program or an error.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let src = String::from_utf8_lossy(data);
    let mut opts = dtrace_compiler::CompileOptions {
        args: vec!["fuzz.d".into(), "1".into(), "foo".into()],
        macros: vec![("target".into(), "1".into())],
        default_args: true,
        ..Default::default()
    };
    if let Ok(p) = dtrace_compiler::compile(&src, &opts) {
        let _ = dtrace_compiler::listing(&p);
    }
    opts.source = dtrace_compiler::SourceKind::String;
    opts.destructive = true;
    let _ = dtrace_compiler::compile(&src, &opts);
});
