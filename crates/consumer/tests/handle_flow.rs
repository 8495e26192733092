//! The handle API end to end over a scripted tracer: exec with the status information, go, work
//! until exit() drains the run, END output, drops from status counters, aggregation printing and the
//! exit status; plus option and state errors.

mod common;

use std::collections::VecDeque;

use common::*;
use dtrace_consumer::consume::DefaultOutput;
use dtrace_consumer::handle::{ExecInfo, Handle, Tracer, WorkStatus};
use dtrace_consumer::options::Options;
use dtrace_consumer::status::StatusCounters;
use dtrace_consumer::{ConsumerError, Result};
use dtrace_dif::program::{ActionKind as A, Program};
use dtrace_framework::records::{AggRecord, BufferSnapshot};

/// A tracer that replays scripted buffers: one batch per switch, `exited` after the last.
struct Script {
    info: ExecInfo,
    batches: VecDeque<(Vec<BufferSnapshot>, Vec<AggRecord>)>,
    end: (Vec<BufferSnapshot>, Vec<AggRecord>),
    stopped: bool,
    status: StatusCounters,
}

impl Tracer for Script {
    fn exec(&mut self, _: &Program, _: &Options) -> Result<ExecInfo> {
        Ok(self.info.clone())
    }
    fn go(&mut self) -> Result<()> {
        Ok(())
    }
    fn stop(&mut self) -> Result<()> {
        self.stopped = true;
        self.batches.push_back(std::mem::take(&mut self.end));
        Ok(())
    }
    fn switch_buffers(&mut self) -> Result<Vec<BufferSnapshot>> {
        Ok(self
            .batches
            .front_mut()
            .map(|b| std::mem::take(&mut b.0))
            .unwrap_or_default())
    }
    fn aggregate_snapshot(&mut self) -> Result<Vec<AggRecord>> {
        // Aggregations come before buffers in work(): hand them over, then retire the batch once the
        // buffers are taken.
        if let Some(b) = self.batches.front_mut() {
            if b.0.is_empty() {
                self.batches.pop_front();
                return self.aggregate_snapshot();
            }
            return Ok(std::mem::take(&mut b.1));
        }
        Ok(Vec::new())
    }
    fn status(&mut self) -> Result<StatusCounters> {
        if self.batches.len() <= 1 && !self.stopped {
            self.status.exited = true;
        }
        self.status.dyndrops += 1;
        Ok(self.status)
    }
}

#[test]
fn begin_exit_end_and_aggregations() {
    let begin = eprobe(1, 1, &[(A::Printf, 8, 1, 0), (A::Exit, 4, 0, 0)]);
    let end = eprobe(2, 2, &[(A::DifExpr, 16, 0, 0)]);
    let agg = aggdesc(1, 0, &[], (A::AggCount, 8, 0, 0));
    let info = ExecInfo {
        matches: 2,
        eprobes: vec![begin.clone(), end.clone()],
        probes: vec![
            probe(1, "dtrace", "", "", "BEGIN"),
            probe(2, "dtrace", "", "", "END"),
        ],
        aggs: vec![agg.clone()],
        ..ExecInfo::default()
    };
    let tracer = Script {
        info,
        batches: VecDeque::from([(
            vec![BufferSnapshot {
                cpu: 0,
                data: record(&begin, &[i64b(7), i32b(3)]),
                drops: 0,
            }],
            vec![aggrec(&agg, &[], i64b(4))],
        )]),
        end: (
            vec![BufferSnapshot {
                cpu: 1,
                data: record(&end, &[strb("bye", 16)]),
                drops: 2,
            }],
            vec![aggrec(&agg, &[], i64b(1))],
        ),
        stopped: false,
        status: StatusCounters::default(),
    };
    let mut h = Handle::open(Box::new(tracer), None);
    let drops = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let d2 = drops.clone();
    h.handle_drop(Box::new(move |d| {
        d2.borrow_mut().push(d.msg.clone());
        true
    }));
    let mut prog = Program {
        formats: vec!["n=%d\n".into()],
        ..Program::default()
    };
    prog.options.push(("bufsize".into(), Some("1m".into())));
    assert_eq!(h.exec(&prog).unwrap().matches, 2);
    assert_eq!(h.getopt("bufsize").unwrap(), 1 << 20);
    h.go().unwrap();
    assert!(matches!(h.go(), Err(ConsumerError::BadState(_))));
    assert_eq!(h.setopt("bufsize", Some("2m")), Err(ConsumerError::Active));
    assert_eq!(h.errmsg(), "Operation illegal when tracing is active");
    let mut out: Vec<u8> = Vec::new();
    let mut o = DefaultOutput::default();
    let o = std::cell::RefCell::new(&mut o);
    let mut rounds = 0;
    loop {
        rounds += 1;
        assert!(rounds < 10, "work() never finished");
        let st = h
            .work(
                &mut out,
                &mut |pd, w| o.borrow_mut().probe(pd, w),
                &mut |pd, r, w| o.borrow_mut().record(pd, r, w),
            )
            .unwrap();
        if st == WorkStatus::Done {
            break;
        }
    }
    h.aggregate_print(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(
        text,
        "CPU     ID                    FUNCTION:NAME\n  0      1                           :BEGIN n=7\n\n  1      2                             :END   bye                              \n                5\n"
    );
    assert_eq!(h.exit_status(), Some(3));
    let drops = drops.borrow();
    assert!(drops.contains(&"2 drops on CPU 1".to_string()), "{drops:?}");
    assert!(
        drops.contains(&"1 dynamic variable drop".to_string()),
        "{drops:?}"
    );
    h.close().unwrap();
}

/// A tracer whose buffers are read only once, after tracing stopped: BEGIN's and END's CPU 0
/// holds BEGIN's record, a record of another probe and END's; CPU 1 a record of that probe.
struct ReadOnceStopped {
    info: ExecInfo,
    bufs: Vec<BufferSnapshot>,
}

impl Tracer for ReadOnceStopped {
    fn exec(&mut self, _: &Program, _: &Options) -> Result<ExecInfo> {
        Ok(self.info.clone())
    }
    fn go(&mut self) -> Result<()> {
        Ok(())
    }
    fn stop(&mut self) -> Result<()> {
        Ok(())
    }
    fn switch_buffers(&mut self) -> Result<Vec<BufferSnapshot>> {
        Ok(std::mem::take(&mut self.bufs))
    }
    fn aggregate_snapshot(&mut self) -> Result<Vec<AggRecord>> {
        Ok(Vec::new())
    }
    fn status(&mut self) -> Result<StatusCounters> {
        Ok(StatusCounters::default())
    }
    fn end_cpu(&self) -> Option<u32> {
        Some(0)
    }
}

#[test]
fn a_first_read_after_the_end_prints_begin_first_and_end_last() {
    // dt_consume_begin: BEGIN's records of CPU 0, then CPU 1's buffer, then the rest of CPU 0's
    // (END's last), though all were first read after END fired.
    let begin = eprobe(1, 1, &[(A::Printf, 8, 1, 0)]);
    let tick = eprobe(2, 3, &[(A::Printf, 8, 1, 0)]);
    let end = eprobe(3, 2, &[(A::Printf, 8, 1, 0)]);
    let info = ExecInfo {
        matches: 3,
        eprobes: vec![begin.clone(), tick.clone(), end.clone()],
        probes: vec![
            probe(1, "dtrace", "", "", "BEGIN"),
            probe(2, "dtrace", "", "", "END"),
            probe(3, "syscall", "vmlinux", "write", "entry"),
        ],
        ..ExecInfo::default()
    };
    let mut cpu0 = record(&begin, &[i64b(1)]);
    cpu0.extend(record(&tick, &[i64b(2)]));
    cpu0.extend(record(&end, &[i64b(4)]));
    let tracer = ReadOnceStopped {
        info,
        bufs: vec![
            BufferSnapshot {
                cpu: 0,
                data: cpu0,
                drops: 0,
            },
            BufferSnapshot {
                cpu: 1,
                data: record(&tick, &[i64b(3)]),
                drops: 0,
            },
        ],
    };
    let mut h = Handle::open(Box::new(tracer), None);
    let prog = Program {
        formats: vec!["<%d>\n".into()],
        ..Program::default()
    };
    h.exec(&prog).unwrap();
    h.go().unwrap();
    h.stop().unwrap();
    let mut out: Vec<u8> = Vec::new();
    let mut o = DefaultOutput::default();
    let o = std::cell::RefCell::new(&mut o);
    let st = h
        .work(
            &mut out,
            &mut |pd, w| o.borrow_mut().probe(pd, w),
            &mut |pd, r, w| o.borrow_mut().record(pd, r, w),
        )
        .unwrap();
    assert_eq!(st, WorkStatus::Done);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "CPU     ID                    FUNCTION:NAME\n  0      1                           :BEGIN <1>\n\n  1      3                      write:entry <3>\n\n  0      3                      write:entry <2>\n\n  0      2                             :END <4>\n\n"
    );
}

#[test]
fn without_a_compiler_compiling_is_not_supported() {
    let mut h = Handle::open(
        Box::new(dtrace_consumer::handle::NoTracer("x".into())),
        None,
    );
    let r = h.compile_str(
        "BEGIN",
        dtrace_consumer::ProbeSpec::Name,
        Default::default(),
        &[],
    );
    assert!(matches!(r, Err(ConsumerError::NotSupported(_))));
    assert!(h.errmsg().starts_with("not yet supported: compiling D"));
    assert!(matches!(h.go(), Err(ConsumerError::NotSupported(_))));
    assert!(matches!(
        h.getopt("nosuch"),
        Err(ConsumerError::BadOptionName(_))
    ));
}

type Seen = std::rc::Rc<std::cell::RefCell<Vec<(String, Vec<String>)>>>;
struct Capture(Seen);
impl dtrace_consumer::Compiler for Capture {
    fn compile(
        &mut self,
        source: &str,
        _: dtrace_consumer::ProbeSpec,
        _: dtrace_consumer::CompileFlags,
        argv: &[String],
        _: &Options,
    ) -> Result<Program> {
        self.0
            .borrow_mut()
            .push((source.to_string(), argv.to_vec()));
        Ok(Program::default())
    }
}

#[test]
fn scripts_lose_their_interpreter_line_and_get_their_arguments() {
    let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let mut h = Handle::open(
        Box::new(dtrace_consumer::handle::NoTracer("x".into())),
        Some(Box::new(Capture(seen.clone()))),
    );
    let path = std::env::temp_dir().join(format!("dtrace-consumer-{}.d", std::process::id()));
    std::fs::write(&path, "#!/usr/sbin/dtrace -qs\nBEGIN { trace($1); }\n").unwrap();
    let argv = vec![path.display().to_string(), "42".to_string()];
    h.compile_file(&path, Default::default(), &argv).unwrap();
    let _ = std::fs::remove_file(&path);
    let seen = seen.borrow();
    // The #! line becomes an empty line, so line numbers in errors stay right.
    assert_eq!(seen[0].0, "\nBEGIN { trace($1); }\n");
    assert_eq!(seen[0].1, argv);
}

/// A tracer whose program calls exit() once the test says so; the status reports it.
struct Exiting {
    exited: std::rc::Rc<std::cell::Cell<bool>>,
    stops: std::rc::Rc<std::cell::Cell<u32>>,
}

impl Tracer for Exiting {
    fn exec(&mut self, _: &Program, _: &Options) -> Result<ExecInfo> {
        Ok(ExecInfo::default())
    }
    fn go(&mut self) -> Result<()> {
        Ok(())
    }
    fn stop(&mut self) -> Result<()> {
        self.stops.set(self.stops.get() + 1);
        Ok(())
    }
    fn switch_buffers(&mut self) -> Result<Vec<BufferSnapshot>> {
        Ok(Vec::new())
    }
    fn aggregate_snapshot(&mut self) -> Result<Vec<AggRecord>> {
        Ok(Vec::new())
    }
    fn status(&mut self) -> Result<StatusCounters> {
        Ok(StatusCounters {
            exited: self.exited.get(),
            ..StatusCounters::default()
        })
    }
}

#[test]
fn exit_is_noticed_at_the_status_check() {
    // DTrace notices exit() at its status check (dtrace_status, every `statusrate`): tracing
    // goes on until the check is due, then END fires. Oracle's tst.statusrate.d (END more than
    // 2 s after exit() at statusrate=10sec) and tst.aggrate-slow.d (the exiting firing's printa
    // consumed before the stop, with the older snapshot) depend on it.
    let exited = std::rc::Rc::new(std::cell::Cell::new(false));
    let stops = std::rc::Rc::new(std::cell::Cell::new(0));
    let tracer = Exiting {
        exited: exited.clone(),
        stops: stops.clone(),
    };
    let mut h = Handle::open(Box::new(tracer), None);
    h.setopt("statusrate", Some("3600s")).unwrap();
    h.exec(&Program::default()).unwrap();
    h.go().unwrap();
    let mut out: Vec<u8> = Vec::new();
    let mut o = DefaultOutput::default();
    let o = std::cell::RefCell::new(&mut o);
    let mut work = |h: &mut Handle| {
        h.work(
            &mut out,
            &mut |pd, w| o.borrow_mut().probe(pd, w),
            &mut |pd, r, w| o.borrow_mut().record(pd, r, w),
        )
        .unwrap()
    };
    // the first call checks the status
    assert_eq!(work(&mut h), WorkStatus::Okay);
    exited.set(true);
    assert_eq!(work(&mut h), WorkStatus::Okay);
    assert_eq!(stops.get(), 0);
    assert!(h.going());
    // once tracing stops (as when the check is due), END fires and the run is done
    h.stop().unwrap();
    assert_eq!(stops.get(), 1);
    assert_eq!(work(&mut h), WorkStatus::Done);
}
