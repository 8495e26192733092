//! Programs' stability attributes through the handle (`dtrace_program_info`): the compiler's
//! statement attributes resolved against the provider of the probes each description matches,
//! over a synthetic provider with attributes of its own, and the `-v` report.

use dtrace_consumer::dcompile::DCompiler;
use dtrace_consumer::fwtracer::FrameworkTracer;
use dtrace_consumer::handle::{CompileFlags, Handle, ProbeSpec};
use dtrace_consumer::proginfo::stability_report;
use dtrace_dif::attr::Attribute;
use dtrace_dif::program::ProbeDesc;
use dtrace_framework::provider::{
    ArgDesc, DepClass, ProbeSink, Provider, ProviderAttributes, ProviderError, Stability,
};
use dtrace_framework::records::ProbeInfo;

/// `io:::start` and `io:::done` in modules `sd` and `nfs`: Evolving provider and name, Private
/// module and function, Evolving arguments (like DTrace's io provider).
struct Io;

const EVOLVING: Attribute = Attribute::EVOLVING;
const PRIVATE: Attribute = Attribute::PRIVATE;
const ISA: Attribute = Attribute::new(Stability::Evolving, Stability::Evolving, DepClass::Isa);

impl Provider for Io {
    fn name(&self) -> &str {
        "io"
    }
    fn attributes(&self) -> ProviderAttributes {
        ProviderAttributes {
            provider: EVOLVING,
            module: PRIVATE,
            function: PRIVATE,
            name: EVOLVING,
            args: ISA,
        }
    }
    fn provide(&mut self, _desc: Option<&ProbeDesc>, sink: &mut ProbeSink<'_>) {
        for m in ["sd", "nfs"] {
            sink.create(m, "", "start");
            sink.create(m, "", "done");
        }
    }
    fn enable(&mut self, _probe: &ProbeInfo) -> Result<(), ProviderError> {
        Ok(())
    }
    fn disable(&mut self, _probe: &ProbeInfo) {}
    fn arg_desc(&self, _probe: &ProbeInfo, index: u32) -> Option<ArgDesc> {
        (index == 0).then(|| ArgDesc {
            native: "int".into(),
            xlate: None,
            mapping: 0,
        })
    }
}

fn handle() -> Handle {
    let mut t = FrameworkTracer::new(1);
    t.framework().register_provider(Box::new(Io)).expect("reg");
    Handle::open(Box::new(t), Some(Box::new(DCompiler::default())))
}

fn compile(h: &mut Handle, src: &str) -> dtrace_dif::program::Program {
    h.compile_str(
        src,
        ProbeSpec::Script,
        CompileFlags::default(),
        &["x".into()],
    )
    .unwrap_or_else(|e| panic!("{src}: {e}"))
}

#[test]
fn descriptions_and_statements_take_the_providers_attributes() {
    let mut h = handle();
    // Provider and name named: Evolving; probename takes the name's, probemod the module's.
    let p = compile(&mut h, "io:::start { trace(probename); }");
    let a = h.program_attributes(&p);
    assert_eq!((a.desc, a.stmt), (EVOLVING, EVOLVING));
    let p = compile(&mut h, "io:sd::start { trace(probemod); trace(args[0]); }");
    let a = h.program_attributes(&p);
    assert_eq!((a.desc, a.stmt), (PRIVATE, PRIVATE));
    // Several probes, the Evolving-named name left open: no representative probe, Unstable.
    let p = compile(&mut h, "io:sd:: { trace(args[0]); }");
    let a = h.program_attributes(&p);
    assert_eq!((a.desc, a.stmt), (Attribute::UNSTABLE, Attribute::UNSTABLE));
    assert_eq!(a.ecbs[0].info, None);
    // Several probes, only Private-named components open: the first one stands for them.
    let p = compile(&mut h, "io:::start { trace(args[0]); }");
    let a = h.program_attributes(&p);
    assert_eq!((a.desc, a.stmt), (EVOLVING, ISA));
    // The minimum over the program's clauses; a program of declarations only is Stable.
    let p = compile(&mut h, "io:::start { trace(1); } io:sd::done { trace(2); }");
    let a = h.program_attributes(&p);
    assert_eq!((a.desc, a.stmt), (PRIVATE, Attribute::DEFAULT));
    let p = compile(&mut h, "int x;");
    let a = h.program_attributes(&p);
    assert_eq!((a.desc, a.stmt), (Attribute::DEFAULT, Attribute::DEFAULT));
    // A description naming no provider.
    let p = compile(&mut h, "::*:done { trace(probeprov); }");
    let a = h.program_attributes(&p);
    assert_eq!((a.desc, a.stmt), (Attribute::UNSTABLE, EVOLVING));
}

#[test]
fn report_with_probe_information() {
    let mut h = handle();
    let p = compile(&mut h, "io:::start, io:sd::done { trace(curthread); }");
    let a = h.program_attributes(&p);
    let triple = |a: [&str; 3]| {
        format!(
            "\t\tIdentifier Names: {}\n\t\tData Semantics:   {}\n\t\tDependency Class: {}\n",
            a[0], a[1], a[2]
        )
    };
    let evolving = triple(["Evolving", "Evolving", "Common"]);
    let private = triple(["Private", "Private", "Unknown"]);
    let isa = triple(["Evolving", "Evolving", "ISA"]);
    let head = format!(
        "\nStability attributes for script s.d:\n\n\tMinimum Probe Description Attributes\n{private}\n\tMinimum Statement Attributes\n{}",
        triple(["Stable", "Private", "Common"])
    );
    assert_eq!(
        stability_report("script", "s.d", &a, false),
        format!("{head}\n")
    );
    let probe = |d: &str, attr: &str| {
        format!(
            "\n{d}\n\n\tProbe Description Attributes\n{attr}\n\tArgument Attributes\n{isa}\n\tArgument Types\n\t\targs[0]: int\n\n"
        )
    };
    assert_eq!(
        stability_report("script", "s.d", &a, true),
        format!(
            "{head}{}{}",
            probe("io:::start", &evolving),
            probe("io:sd::done", &private)
        )
    );
}
