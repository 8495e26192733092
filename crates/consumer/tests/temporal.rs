//! The `temporal` option through the handle: records from several CPUs printed in timestamp order
//! rather than buffer by buffer, records stamped after the time the tracer's buffers are complete
//! through held for the next switch, everything flushed once tracing stops, drops reported after
//! the records; and without the option, each CPU's buffer in turn as before.

mod common;

use std::collections::VecDeque;

use common::*;
use dtrace_consumer::consume::DefaultOutput;
use dtrace_consumer::handle::{ExecInfo, Handle, Tracer, WorkStatus};
use dtrace_consumer::options::Options;
use dtrace_consumer::status::StatusCounters;
use dtrace_consumer::Result;
use dtrace_dif::program::{ActionKind as A, Program};
use dtrace_framework::records::{AggRecord, BufferSnapshot, EprobeDesc};

/// A tracer replaying one batch of buffers per switch, each with the time its buffers are
/// complete through; the run exits once the batches are used up.
struct Batches {
    info: ExecInfo,
    batches: VecDeque<(Vec<BufferSnapshot>, Option<u64>)>,
    through: Option<u64>,
    stopped: bool,
    /// Whether the previous switch took the last batch (the run then ends).
    drained: bool,
}

impl Tracer for Batches {
    fn exec(&mut self, _: &Program, _: &Options) -> Result<ExecInfo> {
        Ok(self.info.clone())
    }
    fn go(&mut self) -> Result<()> {
        Ok(())
    }
    fn stop(&mut self) -> Result<()> {
        self.stopped = true;
        Ok(())
    }
    fn switch_buffers(&mut self) -> Result<Vec<BufferSnapshot>> {
        match self.batches.pop_front() {
            Some((b, t)) => {
                self.through = t;
                if self.batches.is_empty() {
                    self.drained = true;
                }
                Ok(b)
            }
            None => Ok(Vec::new()),
        }
    }
    fn aggregate_snapshot(&mut self) -> Result<Vec<AggRecord>> {
        Ok(Vec::new())
    }
    fn status(&mut self) -> Result<StatusCounters> {
        Ok(StatusCounters {
            exited: self.drained,
            ..StatusCounters::default()
        })
    }
    fn complete_through(&self) -> Option<u64> {
        self.through
    }
}

/// The probe: `printf("%d@%d\n", value)` with the value's own timestamp in the header.
fn ep() -> EprobeDesc {
    eprobe(1, 1, &[(A::Printf, 8, 1, 0)])
}

/// A record stamped `ts` printing `v`.
fn rec(ts: u64, v: i64) -> Vec<u8> {
    let mut r = record(&ep(), &[i64b(v)]);
    r[4..8].copy_from_slice(&((ts >> 32) as u32).to_ne_bytes());
    r[8..12].copy_from_slice(&(ts as u32).to_ne_bytes());
    r
}

/// A CPU's buffer holding records (timestamp, value), with padding words between them as the
/// framework leaves for alignment.
fn cpu_buf(cpu: u32, recs: &[(u64, i64)], drops: u64) -> BufferSnapshot {
    let mut data = Vec::new();
    for (i, &(ts, v)) in recs.iter().enumerate() {
        if i % 2 == 1 {
            data.extend_from_slice(&0u32.to_ne_bytes());
        }
        data.extend(rec(ts, v));
    }
    BufferSnapshot { cpu, data, drops }
}

/// Runs the batches to the end; the printed values, one a line, and the drop messages.
fn run(
    batches: Vec<(Vec<BufferSnapshot>, Option<u64>)>,
    temporal: bool,
) -> (Vec<String>, Vec<String>) {
    let info = ExecInfo {
        matches: 1,
        eprobes: vec![ep()],
        probes: vec![probe(1, "profile", "", "", "profile-97")],
        aggs: Vec::new(),
        ..ExecInfo::default()
    };
    let tracer = Batches {
        info,
        batches: batches.into(),
        through: None,
        stopped: false,
        drained: false,
    };
    let mut h = Handle::open(Box::new(tracer), None);
    let drops = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let d2 = drops.clone();
    h.handle_drop(Box::new(move |d| {
        d2.borrow_mut().push(d.msg.clone());
        true
    }));
    if temporal {
        h.setopt("temporal", None).unwrap();
    }
    h.setopt("quiet", None).unwrap();
    // Each work() below, 2 ms apart, reads the buffers and checks the status.
    h.setopt("switchrate", Some("1ms")).unwrap();
    h.setopt("statusrate", Some("1ms")).unwrap();
    let prog = Program {
        formats: vec![b"%d\n".to_vec()],
        ..Program::default()
    };
    h.exec(&prog).unwrap();
    h.go().unwrap();
    let mut out: Vec<u8> = Vec::new();
    let mut o = DefaultOutput {
        quiet: true,
        ..Default::default()
    };
    let o = std::cell::RefCell::new(&mut o);
    let mut seen = Vec::new();
    for _ in 0..20 {
        let st = h
            .work(
                &mut out,
                &mut |pd, w| o.borrow_mut().probe(pd, w),
                &mut |pd, r, w| o.borrow_mut().record(pd, r, w),
            )
            .unwrap();
        // What each switch printed, marked off.
        let text = String::from_utf8(std::mem::take(&mut out)).unwrap();
        seen.extend(text.lines().map(str::to_string));
        seen.push("|".to_string());
        if st == WorkStatus::Done {
            let d = drops.borrow().clone();
            return (seen, d);
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    panic!("the run never ended");
}

fn v(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| x.to_string()).collect()
}

#[test]
fn records_of_all_cpus_come_out_in_time_order() {
    let batch = vec![
        cpu_buf(0, &[(10, 1), (40, 4), (50, 5)], 0),
        cpu_buf(1, &[(20, 2), (30, 3), (60, 6)], 0),
        cpu_buf(3, &[(15, 7)], 0),
    ];
    let (seen, _) = run(vec![(batch.clone(), None)], true);
    assert_eq!(
        seen.iter()
            .filter(|l| *l != "|")
            .cloned()
            .collect::<Vec<_>>(),
        v(&["1", "7", "2", "3", "4", "5", "6"])
    );
    // Without the option: each CPU's buffer in turn.
    let (seen, _) = run(vec![(batch, None)], false);
    assert_eq!(
        seen.iter()
            .filter(|l| *l != "|")
            .cloned()
            .collect::<Vec<_>>(),
        v(&["1", "4", "5", "2", "3", "6", "7"])
    );
}

#[test]
fn records_after_the_complete_time_wait_for_the_next_switch() {
    // The first switch is complete through 35: 40, 50 and 60 could still be preceded by records
    // another CPU has not handed over yet (CPU 1's 38 in the second switch).
    let first = vec![
        cpu_buf(0, &[(10, 1), (40, 4), (50, 5)], 0),
        cpu_buf(1, &[(20, 2), (30, 3), (60, 6)], 3),
    ];
    let second = vec![cpu_buf(1, &[(38, 38), (70, 7)], 0)];
    let third = vec![cpu_buf(0, &[(80, 8)], 0)];
    let (seen, drops) = run(
        vec![(first, Some(35)), (second, Some(75)), (third, Some(76))],
        true,
    );
    // The first switch prints up to 35; the second up to 75; the third holds 80 until tracing
    // stops, when everything left is printed.
    let printed: Vec<String> = seen.iter().filter(|l| *l != "|").cloned().collect();
    assert_eq!(printed, v(&["1", "2", "3", "38", "4", "5", "6", "7", "8"]));
    let first_switch: Vec<&String> = seen.iter().take_while(|l| *l != "|").collect();
    assert_eq!(first_switch, ["1", "2", "3"]);
    let second_switch: Vec<&String> = seen.split(|l| l == "|").nth(1).unwrap().iter().collect();
    assert_eq!(second_switch, ["38", "4", "5", "6", "7"]);
    // Drops are reported with the pass that switched them.
    assert_eq!(drops, v(&["3 drops on CPU 1"]));
}

#[test]
fn equal_timestamps_keep_the_order_of_the_buffers() {
    let batch = vec![
        cpu_buf(0, &[(10, 1), (20, 3)], 0),
        cpu_buf(1, &[(10, 2), (20, 4)], 0),
    ];
    let (seen, _) = run(vec![(batch, None)], true);
    assert_eq!(
        seen.iter()
            .filter(|l| *l != "|")
            .cloned()
            .collect::<Vec<_>>(),
        v(&["1", "2", "3", "4"])
    );
}

#[test]
fn a_buffer_slightly_out_of_order_is_sorted_too() {
    // A backend may hand a CPU's records over a little out of order (a probe interrupted between
    // reading the clock and recording); records are ordered one by one, not by buffer heads.
    let batch = vec![
        cpu_buf(0, &[(10, 1), (5, 0), (30, 3)], 0),
        cpu_buf(1, &[(20, 2)], 0),
    ];
    let (seen, _) = run(vec![(batch, None)], true);
    assert_eq!(
        seen.iter()
            .filter(|l| *l != "|")
            .cloned()
            .collect::<Vec<_>>(),
        v(&["0", "1", "2", "3"])
    );
}

#[test]
fn an_exit_is_noticed_at_the_next_status_check_not_before() {
    // DTrace's dtrace_status checks at the statusrate: with an hour between checks, the exit the
    // tracer reports after the first check does not end the run at the next work() calls.
    let info = ExecInfo {
        matches: 1,
        eprobes: vec![ep()],
        probes: vec![probe(1, "profile", "", "", "profile-97")],
        ..ExecInfo::default()
    };
    let tracer = Batches {
        info,
        batches: vec![(vec![cpu_buf(0, &[(10, 1)], 0)], None)].into(),
        through: None,
        stopped: false,
        drained: false,
    };
    let mut h = Handle::open(Box::new(tracer), None);
    h.setopt("quiet", None).unwrap();
    h.setopt("switchrate", Some("1ns")).unwrap();
    h.setopt("statusrate", Some("1h")).unwrap();
    h.exec(&Program {
        formats: vec![b"%d\n".to_vec()],
        ..Program::default()
    })
    .unwrap();
    h.go().unwrap();
    let mut out: Vec<u8> = Vec::new();
    let mut o = DefaultOutput {
        quiet: true,
        ..Default::default()
    };
    let o = std::cell::RefCell::new(&mut o);
    for _ in 0..3 {
        let st = h
            .work(
                &mut out,
                &mut |pd, w| o.borrow_mut().probe(pd, w),
                &mut |pd, r, w| o.borrow_mut().record(pd, r, w),
            )
            .unwrap();
        assert_ne!(st, WorkStatus::Done);
    }
    assert_eq!(String::from_utf8(out).unwrap(), "1\n");
}
