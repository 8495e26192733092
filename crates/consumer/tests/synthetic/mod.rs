//! A harness for running D programs end to end (D compiler, framework, consumer) over providers
//! whose probes the test fires itself, with the contexts and memory it chooses: no kernel needed.

// Each test file uses the parts it needs.
#![allow(dead_code)]

use dtrace_consumer::consume::DefaultOutput;
use dtrace_consumer::dcompile::DCompiler;
use dtrace_consumer::fwtracer::FrameworkTracer;
use dtrace_consumer::handle::{CompileFlags, Handle, ProbeSpec, WorkStatus};
use dtrace_dif::program::ProbeDesc;
use dtrace_framework::provider::{
    Attribute, DepClass, ProbeSink, Provider, ProviderAttributes, ProviderError, Stability,
};
use dtrace_framework::records::ProbeInfo;
use dtrace_framework::{CapturedMemory, EventSender, FiringContext, ProbeEvent};

/// A provider offering a fixed list of `module:function:name` probes that the test fires itself.
pub struct Synthetic {
    name: String,
    probes: Vec<(String, String, String)>,
}

impl Synthetic {
    pub fn new(name: &str, probes: &[(&str, &str, &str)]) -> Synthetic {
        Synthetic {
            name: name.to_string(),
            probes: probes
                .iter()
                .map(|(m, f, n)| (m.to_string(), f.to_string(), n.to_string()))
                .collect(),
        }
    }
}

impl Provider for Synthetic {
    fn name(&self) -> &str {
        &self.name
    }
    fn attributes(&self) -> ProviderAttributes {
        let a = Attribute::new(Stability::Evolving, Stability::Evolving, DepClass::Common);
        ProviderAttributes {
            provider: a,
            module: a,
            function: a,
            name: a,
            args: a,
        }
    }
    fn provide(&mut self, _desc: Option<&ProbeDesc>, sink: &mut ProbeSink<'_>) {
        for (m, f, n) in &self.probes {
            sink.create(m, f, n);
        }
    }
    fn enable(&mut self, _probe: &ProbeInfo) -> Result<(), ProviderError> {
        Ok(())
    }
    fn disable(&mut self, _probe: &ProbeInfo) {}
}

/// One run of a D script over synthetic providers.
pub struct Run {
    h: Handle,
    events: EventSender,
    out: Vec<u8>,
    printer: DefaultOutput,
}

impl Run {
    /// Compiles and enables `script` (with macro arguments `argv`) and starts tracing.
    pub fn start(providers: Vec<Synthetic>, script: &str, argv: &[&str]) -> Run {
        Run::start_with(providers, script, argv, &[])
    }

    /// [`Run::start`] with options set first (as `dtrace -x name`, e.g. `quiet` for `-q`).
    pub fn start_with(
        providers: Vec<Synthetic>,
        script: &str,
        argv: &[&str],
        options: &[&str],
    ) -> Run {
        Run::start_on(providers, script, argv, options, 1)
    }

    /// [`Run::start_with`] over `ncpus` CPUs.
    pub fn start_on(
        providers: Vec<Synthetic>,
        script: &str,
        argv: &[&str],
        options: &[&str],
        ncpus: u32,
    ) -> Run {
        Run::start_programs(
            providers,
            &[(ProbeSpec::Script, script)],
            argv,
            options,
            ncpus,
        )
    }

    /// Compiles each of `programs` (as `-s` or `-n` would give it) on one handle, enables them in
    /// order and starts tracing.
    pub fn start_programs(
        providers: Vec<Synthetic>,
        programs: &[(ProbeSpec, &str)],
        argv: &[&str],
        options: &[&str],
        ncpus: u32,
    ) -> Run {
        let mut t = FrameworkTracer::new(ncpus);
        for p in providers {
            t.framework()
                .register_provider(Box::new(p))
                .expect("register");
        }
        t.framework().set_consumer_context(FiringContext {
            pid: 4242,
            tid: 4242,
            execname: "dtrace".into(),
            ..Default::default()
        });
        let events = t.framework().event_sender();
        let mut h = Handle::open(Box::new(t), Some(Box::new(DCompiler::default())));
        for o in options {
            h.setopt(o, None).expect("option");
        }
        let mut args = vec!["dtrace".to_string()];
        args.extend(argv.iter().map(|s| s.to_string()));
        let mut progs = Vec::new();
        for (spec, text) in programs {
            let prog = h
                .compile_str(text, *spec, CompileFlags::default(), &args)
                .unwrap_or_else(|e| panic!("{e}\n{text}"));
            progs.push(prog);
        }
        for p in &progs {
            h.exec(p).expect("exec");
        }
        h.go().expect("go");
        let flowindent = h.decoder.options.is_set("flowindent");
        let quiet = h.decoder.options.is_set("quiet");
        Run {
            h,
            events,
            out: Vec::new(),
            printer: DefaultOutput {
                quiet,
                flowindent,
                ..Default::default()
            },
        }
    }

    pub fn probe_id(&mut self, desc: &str) -> u32 {
        let f: Vec<&str> = desc.split(':').collect();
        let d = ProbeDesc {
            provider: f[0].into(),
            module: f[1].into(),
            function: f[2].into(),
            name: f[3].into(),
        };
        let ps = self.h.list_probes(&d).expect("list");
        assert_eq!(ps.len(), 1, "{desc}");
        ps[0].id
    }

    /// Fires probe `desc` in `ctx` (with `memory` captured), then lets the consumer work.
    pub fn fire_with(&mut self, desc: &str, ctx: FiringContext, memory: Option<CapturedMemory>) {
        let probe = self.probe_id(desc);
        let ev = ProbeEvent {
            probe,
            cpu: 0,
            ctx,
            memory: memory.map(|m| Box::new(m) as _),
        };
        assert!(self.events.send(ev));
        self.work();
    }

    /// Fires probe `desc` on `cpu` without consuming (its record waits in that CPU's buffer).
    pub fn fire_on(&mut self, desc: &str, ctx: FiringContext, cpu: u32) {
        let probe = self.probe_id(desc);
        assert!(self.events.send(ProbeEvent {
            probe,
            cpu,
            ctx,
            memory: None,
        }));
    }

    pub fn fire(&mut self, desc: &str, ctx: FiringContext) {
        self.fire_with(desc, ctx, None);
    }

    pub fn work(&mut self) -> WorkStatus {
        let printer = std::cell::RefCell::new(&mut self.printer);
        self.h
            .work(
                &mut self.out,
                &mut |pd, o| printer.borrow_mut().probe(pd, o),
                &mut |pd, r, o| printer.borrow_mut().record(pd, r, o),
            )
            .expect("work")
    }

    /// Stops tracing (END fires) and returns everything printed, aggregations last, as dtrace(1M)
    /// prints them at the end of a run.
    pub fn finish(mut self) -> String {
        self.h.stop().expect("stop");
        while self.work() != WorkStatus::Done {}
        self.h.aggregate_print(&mut self.out).expect("print");
        String::from_utf8(self.out).expect("utf-8")
    }
}
