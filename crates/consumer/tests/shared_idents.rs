//! Programs compiled on one handle share their identifiers, as in DTrace (`dtrace -n ... -n ...`): a
//! `self->` variable set by one program's clause is the one another program's predicate reads, a
//! global keeps one value across programs, and two programs' aggregations stay apart. Runs through
//! the D compiler, the framework and the consumer over a synthetic provider (no kernel needed).

use dtrace_consumer::consume::DefaultOutput;
use dtrace_consumer::dcompile::DCompiler;
use dtrace_consumer::fwtracer::FrameworkTracer;
use dtrace_consumer::handle::{CompileFlags, Handle, ProbeSpec, WorkStatus};
use dtrace_dif::program::ProbeDesc;
use dtrace_framework::provider::{
    Attribute, DepClass, ProbeSink, Provider, ProviderAttributes, ProviderError, Stability,
};
use dtrace_framework::records::ProbeInfo;
use dtrace_framework::{EventSender, FiringContext, ProbeEvent};

/// `syscall::read:entry` and `syscall::read:return`, fired by the test.
struct Sys;

impl Provider for Sys {
    fn name(&self) -> &str {
        "syscall"
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
        sink.create("", "read", "entry");
        sink.create("", "read", "return");
    }
    fn enable(&mut self, _probe: &ProbeInfo) -> Result<(), ProviderError> {
        Ok(())
    }
    fn disable(&mut self, _probe: &ProbeInfo) {}
}

struct Run {
    h: Handle,
    events: EventSender,
    out: Vec<u8>,
}

impl Run {
    /// Compiles each of `programs` as a `-n` argument, enables them in order and starts tracing.
    fn start(programs: &[&str]) -> Run {
        let mut t = FrameworkTracer::new(1);
        t.framework().register_provider(Box::new(Sys)).expect("reg");
        let events = t.framework().event_sender();
        let mut h = Handle::open(Box::new(t), Some(Box::new(DCompiler::default())));
        h.setopt("quiet", None).expect("quiet");
        let mut progs = Vec::new();
        for p in programs {
            let argv = ["dtrace".to_string()];
            match h.compile_str(p, ProbeSpec::Name, CompileFlags::default(), &argv) {
                Ok(prog) => progs.push(prog),
                Err(e) => panic!("{p}: {e}"),
            }
        }
        for p in &progs {
            h.exec(p).expect("exec");
        }
        h.go().expect("go");
        Run {
            h,
            events,
            out: Vec::new(),
        }
    }

    fn fire(&mut self, name: &str, tid: u64, timestamp: u64) {
        let d = ProbeDesc {
            provider: "syscall".into(),
            module: String::new(),
            function: "read".into(),
            name: name.into(),
        };
        let probe = self.h.list_probes(&d).expect("list")[0].id;
        let ctx = FiringContext {
            pid: 10,
            tid,
            timestamp: Some(timestamp),
            ..Default::default()
        };
        assert!(self.events.send(ProbeEvent {
            probe,
            cpu: 0,
            ctx,
            memory: None,
        }));
        self.work();
    }

    fn work(&mut self) -> WorkStatus {
        let mut printer = DefaultOutput {
            quiet: true,
            ..Default::default()
        };
        let printer = std::cell::RefCell::new(&mut printer);
        self.h
            .work(
                &mut self.out,
                &mut |pd, o| printer.borrow_mut().probe(pd, o),
                &mut |pd, r, o| printer.borrow_mut().record(pd, r, o),
            )
            .expect("work")
    }

    fn finish(mut self) -> String {
        self.h.stop().expect("stop");
        while self.work() != WorkStatus::Done {}
        self.h.aggregate_print(&mut self.out).expect("print");
        String::from_utf8(self.out).expect("utf-8")
    }
}

#[test]
fn thread_local_set_by_one_program_is_read_by_the_other() {
    let mut r = Run::start(&[
        "syscall::read:entry { self->t = timestamp; }",
        "syscall::read:return /self->t/ { printf(\"%d %d\\n\", tid, timestamp - self->t); self->t = 0; }",
    ]);
    r.fire("entry", 7, 1000);
    r.fire("return", 8, 1500); // another thread: no self->t
    r.fire("return", 7, 1250);
    r.fire("return", 7, 1300); // cleared by the return clause
    assert_eq!(r.finish(), "7 250\n");
}

#[test]
fn globals_are_one_variable_and_aggregations_stay_apart() {
    let mut r = Run::start(&[
        "syscall::read:entry { n++; @a[tid] = count(); }",
        "syscall::read:return { @b = sum(n); printf(\"n=%d\\n\", n); }",
    ]);
    r.fire("entry", 1, 1);
    r.fire("entry", 2, 2);
    r.fire("return", 1, 3);
    assert_eq!(
        r.finish(),
        "n=2\n        1                1\n        2                1\n                2\n"
    );
}
