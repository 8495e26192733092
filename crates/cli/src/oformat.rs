//! `dtrace(1)`'s side of the structured formats (`-x oformat=json|folded`, `-x flamegraph=FILE`):
//! which callbacks print the probe firings, where drops and errors go (JSON lines on the output
//! instead of messages on stderr), an output that outlives its reader (a JSON consumer that closes
//! the pipe never stops tracing), and writing the flame graph file at the end of a run.

use std::io::{self, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use dtrace_consumer::consume::{ConsumeAction, DefaultOutput, ProbeData};
use dtrace_consumer::handle::Handle;
use dtrace_consumer::oformat::{self, json, OFormat};
use dtrace_consumer::status::{DropReport, ErrorReport};
use dtrace_dif::program::RecDesc;

/// The probe and record callbacks of the chosen format.
pub enum Printer {
    /// DTrace's text (quiet under `oformat=folded`, whose output is the aggregations).
    Text(DefaultOutput),
    /// One JSON document per firing.
    Json(json::JsonOutput),
}

impl Printer {
    /// The printer for `format`.
    pub fn new(format: OFormat, quiet: bool, flowindent: bool, testing: bool) -> Printer {
        match format {
            OFormat::Json => Printer::Json(json::JsonOutput::default()),
            OFormat::Folded => Printer::Text(DefaultOutput {
                quiet: true,
                ..Default::default()
            }),
            OFormat::Text => Printer::Text(DefaultOutput {
                quiet,
                flowindent,
                testing,
                ..Default::default()
            }),
        }
    }

    /// The per-probe callback.
    pub fn probe(&mut self, pd: &ProbeData<'_>, out: &mut Vec<u8>) -> ConsumeAction {
        match self {
            Printer::Text(p) => p.probe(pd, out),
            Printer::Json(p) => p.probe(pd, out),
        }
    }

    /// The per-record callback.
    pub fn record(
        &mut self,
        pd: &ProbeData<'_>,
        rec: Option<&RecDesc>,
        out: &mut Vec<u8>,
    ) -> ConsumeAction {
        match self {
            Printer::Text(p) => p.record(pd, rec, out),
            Printer::Json(p) => p.record(pd, rec, out),
        }
    }
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The error handler: DTrace's message on stderr, or under JSON a line on the output.
pub fn error_handler<W: Write + 'static>(
    format: OFormat,
    mut out: W,
) -> Box<dyn FnMut(&ErrorReport) -> bool> {
    Box::new(move |e: &ErrorReport| {
        if format == OFormat::Json {
            let _ = out.write_all(json::error_line(e, now_ns()).as_bytes());
        } else {
            eprint!("dtrace: {}", e.msg);
        }
        true
    })
}

/// The drop handler: DTrace's message on stderr, or under JSON a line on the output.
pub fn drop_handler<W: Write + 'static>(
    format: OFormat,
    mut out: W,
) -> Box<dyn FnMut(&DropReport) -> bool> {
    Box::new(move |d: &DropReport| {
        if format == OFormat::Json {
            let _ = out.write_all(json::drop_line(d, now_ns()).as_bytes());
        } else {
            eprintln!("dtrace: {}", d.msg);
        }
        true
    })
}

/// A writer whose reader may go away: once the pipe is closed (`EPIPE`), output is discarded, said
/// once on stderr, and tracing goes on (aggregations, metrics and `exit()` still take effect).
pub struct Outliving<W> {
    inner: W,
    gone: bool,
}

impl<W: Write> Outliving<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Outliving<W> {
        Outliving { inner, gone: false }
    }

    fn absorb(&mut self, r: io::Result<()>) -> io::Result<()> {
        match r {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                if !self.gone {
                    eprintln!("dtrace: the output's reader went away; tracing continues");
                }
                self.gone = true;
                Ok(())
            }
            r => r,
        }
    }
}

impl<W: Write> Write for Outliving<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.gone {
            return Ok(buf.len());
        }
        let r = self.inner.write_all(buf);
        self.absorb(r).map(|_| buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.gone {
            return Ok(());
        }
        let r = self.inner.flush();
        self.absorb(r)
    }
}

/// `-x flamegraph=FILE`: draws the stack-keyed aggregations into `path` as an SVG flame graph; the
/// aggregations drawn are not printed again as text.
pub fn write_flamegraph(h: &mut Handle, path: &str) -> Result<usize, String> {
    let (lines, used) = oformat::stack_lines(&h.decoder).map_err(|e| e.to_string())?;
    let mut svg = Vec::new();
    oformat::flamegraph::svg(&lines, "Flame Graph", &mut svg).map_err(|e| e.to_string())?;
    std::fs::write(path, &svg).map_err(|e| crate::io_reason(&e))?;
    h.decoder.printed.extend(used);
    Ok(lines.len())
}
