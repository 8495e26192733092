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
        // every object passes the verifier (`cpu`, DIF_VAR_CPU, is not yet known to it)
        for ecb in &p.ecbs {
            let objs = ecb.predicate.iter().chain(ecb.actions.iter().filter_map(|a| a.difo.as_ref()));
            for o in objs {
                let uses_cpu = o.text.iter().any(|w| {
                    matches!(dtrace_dif::Instr::decode(*w), Ok(dtrace_dif::Instr::LoadVar { var: 0x200, .. }))
                });
                if let Err(e) = dtrace_dif::verify::verify(o) {
                    assert!(uses_cpu, "verifier rejected an object: {e}");
                }
            }
        }
    }
    opts.source = dtrace_compiler::SourceKind::String;
    opts.destructive = true;
    let _ = dtrace_compiler::compile(&src, &opts);
});
