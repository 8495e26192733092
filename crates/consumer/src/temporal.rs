//! The `temporal` option: records of every CPU consumed in the order they were traced, as
//! `dtrace_consume` does with its priority queue of buffers. Each pass queues the records of the
//! buffers just switched with what earlier passes left, then consumes them oldest first (sorted
//! as records, not by buffer heads: a backend may deliver a CPU's records slightly out of order).
//! Records stamped at or after the time the tracer says its buffers are complete through wait for
//! the next pass, since another CPU may yet hand over older ones; once tracing has stopped,
//! everything is consumed. Drops are reported after the records, per CPU.

use std::collections::HashMap;

use dtrace_framework::records::BufferSnapshot;

use crate::consume::{
    next_record, record_timestamp, Decoder, DescCache, DropFn, ErrFn, ProbeFn, RecFn,
};
use crate::error::Result;
use crate::recdata;

/// A switched buffer with records left to consume.
struct Buf {
    cpu: u32,
    data: Vec<u8>,
    cache: DescCache,
    /// How many of its records are not consumed yet.
    left: usize,
}

/// A record waiting to be consumed: its timestamp, arrival order, buffer and offset.
#[derive(Clone, Copy)]
struct Rec {
    ts: u64,
    seq: u64,
    buf: u64,
    offs: usize,
}

/// The records not consumed yet, across passes, and the buffers holding them.
#[derive(Default)]
pub struct TemporalQueue {
    bufs: HashMap<u64, Buf>,
    recs: Vec<Rec>,
    next_buf: u64,
    next_seq: u64,
}

/// Where output goes while consuming: each record's text is written as soon as it is formatted.
pub struct Sinks<'a, 'b> {
    /// The output stream.
    pub out: &'a mut dyn std::io::Write,
    /// Probe callback.
    pub pfunc: &'a mut ProbeFn<'b>,
    /// Record callback.
    pub rfunc: &'a mut RecFn<'b>,
    /// Error handler.
    pub errfn: &'a mut ErrFn<'b>,
    /// Drop handler.
    pub dropfn: &'a mut DropFn<'b>,
}

impl TemporalQueue {
    /// Whether records are held for a later pass.
    pub fn is_empty(&self) -> bool {
        self.recs.is_empty()
    }

    /// Queues the records of one switched buffer; an EPID without a description ends it (the
    /// error is returned after the records before it are queued).
    fn queue(&mut self, decoder: &Decoder, s: BufferSnapshot) -> Result<()> {
        let id = self.next_buf;
        self.next_buf += 1;
        let mut offs = 0;
        let mut left = 0;
        let mut result = Ok(());
        while let Some(at) = next_record(&s.data, offs) {
            let epid = recdata::uint(&s.data[at..at + 4]).unwrap_or(0) as u32;
            let size = match decoder.record_size(epid) {
                Ok(n) => n,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            self.recs.push(Rec {
                ts: record_timestamp(&s.data, at),
                seq: self.next_seq,
                buf: id,
                offs: at,
            });
            self.next_seq += 1;
            left += 1;
            offs = at + size;
        }
        if left > 0 {
            self.bufs.insert(
                id,
                Buf {
                    cpu: s.cpu,
                    data: s.data,
                    cache: DescCache::default(),
                    left,
                },
            );
        }
        result
    }

    /// One pass: queues the records of `snaps` (CPU order) and consumes, oldest first, every
    /// record stamped before `complete_through` (all of them when it is None or `stopped`).
    /// Records with equal timestamps keep the order they arrived in.
    pub fn consume(
        &mut self,
        decoder: &mut Decoder,
        snaps: Vec<BufferSnapshot>,
        complete_through: Option<u64>,
        stopped: bool,
        sinks: Sinks<'_, '_>,
    ) -> Result<()> {
        let mut drops = Vec::new();
        let mut queued = Ok(());
        for s in snaps {
            if s.drops > 0 {
                drops.push((s.cpu, s.drops));
            }
            if let Err(e) = self.queue(decoder, s) {
                queued = Err(e);
            }
        }
        // Buffers are mostly in time order already; backends may deliver a little out of order.
        self.recs.sort_by_key(|r| (r.ts, r.seq));
        let due = match (stopped, complete_through) {
            (false, Some(t)) => self.recs.partition_point(|r| r.ts < t),
            _ => self.recs.len(),
        };
        decoder.begin_pass();
        let mut text = Vec::new();
        let mut done = 0;
        let mut result = Ok(());
        for r in &self.recs[..due] {
            done += 1;
            let Some(b) = self.bufs.get_mut(&r.buf) else {
                continue;
            };
            let c = decoder.consume_at(
                b.cpu,
                &b.data,
                r.offs,
                &mut b.cache,
                &mut text,
                sinks.pfunc,
                sinks.rfunc,
                sinks.errfn,
            );
            b.left -= 1;
            if b.left == 0 {
                self.bufs.remove(&r.buf);
            }
            let w = sinks.out.write_all(&text);
            text.clear();
            if let Err(e) = c {
                result = Err(e);
                break;
            }
            if let Err(e) = w {
                result = Err(e.into());
                break;
            }
        }
        // Consumed records (and one that failed) are not tried again.
        self.recs.drain(..done);
        result?;
        queued?;
        for (cpu, n) in drops {
            decoder.report_cpu_drops(cpu, n, sinks.dropfn)?;
        }
        Ok(())
    }
}
