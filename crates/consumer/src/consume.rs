//! Consuming principal buffers (`dt_consume_cpu`): walking the records of one CPU's buffer by EPID,
//! handing each enabled probe and each data record to the caller's callbacks (which answer with
//! [`ConsumeAction`]), and printing what the callbacks leave to the library: `trace()` values by size,
//! strings and byte dumps, `printf`/`printa`/`system`/`freopen`, stacks and symbols, the consumer-side
//! aggregation actions (`clear`, `trunc`, `normalize`, `denormalize`, `setopt`, `ftruncate`), `print()`
//! of typed data (through [`crate::typeprint`]), flow
//! indentation, ERROR-probe records turned into DTrace's error messages, and drop counts.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use dtrace_dif::program::{
    split_libact_arg, ActionKind, LibAction, PrintType, RecDesc, TRACE_BYREF, TRACE_SIGNED,
    TRACE_STRING,
};
use dtrace_framework::records::{
    fault_eprobe_desc, BufferSnapshot, EprobeDesc, ProbeInfo, EPID_NONE, FAULT_EPID, RECHDR_SIZE,
};

use crate::aggdisplay;
use crate::aggprint;
use crate::aggregate::{Aggregations, SortOrder};
use crate::bytes;
use crate::cformat::{self, Spec};
use crate::error::{ConsumerError, Result};
use crate::options::{Options, ENCODING_ASCII, ENCODING_UTF8};
use crate::printf::{FmtEnv, PrintfFormat};
use crate::quantize::GraphStyle;
use crate::recdata;
use crate::stack;
use crate::status::{self, DropKind, DropReport, ErrorReport};
use crate::symbols::{NoSymbols, Symbolizer};
use crate::typeprint;

/// What a consume callback asks the library to do (`DTRACE_CONSUME_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeAction {
    /// Stop consuming with an error.
    Error,
    /// Process this probe or record normally.
    This,
    /// Skip to the next probe or record.
    Next,
    /// Stop consuming now.
    Abort,
}

/// Flow direction of a probe under `flowindent` (`dtrace_flowkind_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Neither entry nor return.
    None,
    /// An entry probe.
    Entry,
    /// A return probe.
    Return,
}

/// One enabled probe's firing as handed to the callbacks (`dtrace_probedata_t`).
#[derive(Debug, Clone, Copy)]
pub struct ProbeData<'a> {
    /// CPU it fired on.
    pub cpu: u32,
    /// Its enabled probe description.
    pub edesc: &'a EprobeDesc,
    /// The probe.
    pub pdesc: &'a ProbeInfo,
    /// The whole record, header included (record offsets index it).
    pub data: &'a [u8],
    /// Timestamp from the record header.
    pub timestamp: u64,
    /// Flow kind (with `flowindent`).
    pub flow: Flow,
    /// Indentation (with `flowindent`).
    pub indent: usize,
    /// Flow prefix (`" -> "`, `" <- "`, `"| "`).
    pub prefix: &'static str,
}

/// Side effects of destructive or output-redirecting actions, carried out by the embedding program
/// (the library itself makes no OS calls). `pending` is output not yet written: flush it first.
/// Commands and paths are the bytes the D program formatted, not necessarily UTF-8.
pub trait Effects {
    /// `system(cmd)`.
    fn system(&mut self, pending: &mut Vec<u8>, cmd: &[u8]) -> Result<()> {
        let _ = (pending, cmd);
        Err(ConsumerError::NotSupported(
            "system() in this consumer".into(),
        ))
    }
    /// `freopen(path)`; an empty path restores the original output.
    fn freopen(&mut self, pending: &mut Vec<u8>, path: &[u8]) -> Result<()> {
        let _ = (pending, path);
        Err(ConsumerError::NotSupported(
            "freopen() in this consumer".into(),
        ))
    }
    /// `ftruncate()`.
    fn ftruncate(&mut self, pending: &mut Vec<u8>) -> Result<()> {
        let _ = pending;
        Err(ConsumerError::NotSupported(
            "ftruncate() in this consumer".into(),
        ))
    }
}

/// Effects that are not supported.
#[derive(Debug, Default)]
pub struct NoEffects;
impl Effects for NoEffects {}

/// The probe callback type.
pub type ProbeFn<'c> = dyn FnMut(&ProbeData<'_>, &mut Vec<u8>) -> ConsumeAction + 'c;
/// The record callback type; `None` marks the end of a probe's records.
pub type RecFn<'c> =
    dyn FnMut(&ProbeData<'_>, Option<&RecDesc>, &mut Vec<u8>) -> ConsumeAction + 'c;
/// The error handler: gets each ERROR-probe report; returning `false` aborts.
pub type ErrFn<'c> = dyn FnMut(&ErrorReport) -> bool + 'c;
/// The drop handler: gets each drop report; returning `false` aborts.
pub type DropFn<'c> = dyn FnMut(&DropReport) -> bool + 'c;

/// The record-decoding state of a handle: descriptions, formats, aggregations, options, flow state.
pub struct Decoder {
    /// Enabled probe descriptions by EPID.
    pub eprobes: HashMap<u32, EprobeDesc>,
    /// Probes by id.
    pub probes: HashMap<u32, ProbeInfo>,
    /// Parsed format strings per executed program (index = `RecDesc::format - 1`).
    pub formats: Vec<Vec<PrintfFormat>>,
    /// Types of `print()` values per executed program (`Program::print_types`; same index as
    /// `formats`).
    pub print_types: Vec<Vec<PrintType>>,
    /// Which program (index into `formats`) each EPID came from.
    pub epid_program: HashMap<u32, usize>,
    /// The consumer's aggregation copy.
    pub aggs: Aggregations,
    /// Options.
    pub options: Options,
    /// Symbol lookups.
    pub symbols: Box<dyn Symbolizer>,
    /// Side effects.
    pub effects: Box<dyn Effects>,
    /// `$target` (the `-c`/`-p` process), whose addresses `%A` of a bare address resolves in.
    pub target: u64,
    /// EPIDs whose firings are the library's ERROR handler (`DT_ECB_ERROR`).
    pub error_epids: HashSet<u32>,
    /// Aggregation variables printed by `printa()` (skipped at the end of the run).
    pub printed: HashSet<u32>,
    /// Status passed to `exit()`, once seen.
    pub exit_status: Option<i32>,
    /// Aggregation names by variable id (for the structured formats of [`crate::oformat`]).
    pub agg_names: std::collections::BTreeMap<u32, String>,
    /// The time zone `%Y` and `%T` print in (the embedding program's local zone; UTC by default).
    pub zone: crate::timefmt::Zone,
    last_epid: u32,
    indent: usize,
    flags: RunFlags,
    cur_prog: Option<usize>,
    lib_errors: Vec<String>,
}

/// Option values read once per buffer.
#[derive(Debug, Clone, Copy, Default)]
struct RunFlags {
    quiet: bool,
    flowindent: bool,
    rawbytes: bool,
    stackindent: usize,
}

/// Descriptions looked up by EPID, cloned once per EPID per buffer rather than once per record.
#[derive(Default)]
pub(crate) struct DescCache(HashMap<u32, Rc<(EprobeDesc, ProbeInfo, Option<usize>)>>);

/// The offset of the first record at or after `offs` in a buffer (EPID_NONE padding skipped), if
/// one starts there.
pub(crate) fn next_record(data: &[u8], mut offs: usize) -> Option<usize> {
    while offs + 4 <= data.len() {
        let epid = recdata::uint(&data[offs..offs + 4]).unwrap_or(0) as u32;
        if epid != EPID_NONE {
            return Some(offs);
        }
        offs += 4;
    }
    None
}

/// The timestamp in the header of the record at `offs` (0 if the header is cut short).
pub(crate) fn record_timestamp(data: &[u8], offs: usize) -> u64 {
    let word = |o: usize| {
        data.get(offs + o..offs + o + 4)
            .and_then(recdata::uint)
            .unwrap_or(0)
    };
    (word(4) << 32) | word(8)
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            eprobes: HashMap::new(),
            probes: HashMap::new(),
            formats: Vec::new(),
            print_types: Vec::new(),
            epid_program: HashMap::new(),
            aggs: Aggregations::default(),
            options: Options::default(),
            symbols: Box::new(NoSymbols),
            effects: Box::new(NoEffects),
            target: 0,
            error_epids: HashSet::new(),
            printed: HashSet::new(),
            exit_status: None,
            agg_names: Default::default(),
            zone: crate::timefmt::Zone::Utc,
            last_epid: EPID_NONE,
            indent: 0,
            flags: RunFlags::default(),
            cur_prog: None,
            lib_errors: Vec::new(),
        }
    }
}

/// The `CPU     ID                    FUNCTION:NAME` heading (or `CPU FUNCTION` with flowindent).
pub fn heading(flowindent: bool, testing: bool) -> String {
    match (flowindent, testing) {
        (true, false) => format!("{:>3} {:<41}\n", "CPU", "FUNCTION"),
        (true, true) => format!("{:<41}\n", "FUNCTION"),
        (false, false) => format!("{:>3} {:>6} {:>32}\n", "CPU", "ID", "FUNCTION:NAME"),
        (false, true) => format!("{:>32}\n", "FUNCTION:NAME"),
    }
}

/// The per-probe line prefix `dtrace(1)` prints (`  0      1                           :BEGIN `);
/// `testing` (DTrace for Linux's `_DTRACE_TESTING`) leaves out the CPU and probe ID columns.
pub fn probe_line(pd: &ProbeData<'_>, flowindent: bool, testing: bool, out: &mut Vec<u8>) {
    let p = pd.pdesc;
    let s = if flowindent {
        let name = if pd.flow == Flow::None {
            format!(
                "{:w$}{}{}:{}",
                "",
                pd.prefix,
                p.function,
                p.name,
                w = pd.indent
            )
        } else {
            format!("{:w$}{}{}", "", pd.prefix, p.function, w = pd.indent)
        };
        if testing {
            format!("{name:<41} ")
        } else {
            format!("{:>3} {:<41} ", pd.cpu, name)
        }
    } else {
        let name = format!("{}:{}", p.function, p.name);
        if testing {
            format!("{name:>32} ")
        } else {
            format!("{:>3} {:>6} {:>32} ", pd.cpu, p.id, name)
        }
    };
    out.extend_from_slice(s.as_bytes());
}

fn flow_of(p: &ProbeInfo) -> (Flow, &'static str) {
    let n = p.name.as_str();
    let sys = p.provider == "syscall";
    let is = |suffix: &str| n == suffix || n.ends_with(&format!("-{suffix}"));
    if is("entry") {
        (Flow::Entry, if sys { " => " } else { " -> " })
    } else if is("return") {
        (Flow::Return, if sys { " <= " } else { " <- " })
    } else {
        (Flow::None, "| ")
    }
}

fn u64_rec(rec: &RecDesc, data: &[u8]) -> Result<u64> {
    let b = recdata::slice(data, rec.offset as usize, rec.size as usize)?;
    recdata::uint(b).ok_or(ConsumerError::SizeMismatch {
        size: b.len(),
        what: "an integer record",
    })
}

/// The record of the object a `print()` whose pointer is record `i` points to, if it has one.
fn print_object(recs: &[RecDesc], i: usize) -> Option<&RecDesc> {
    let r = &recs[i];
    if r.action != ActionKind::LibAct || lib_action(r.arg) != Some(LibAction::Print) {
        return None;
    }
    recs.get(i + 1).filter(|n| {
        n.action == ActionKind::LibAct && lib_action(n.arg) == Some(LibAction::PrintObject)
    })
}

fn lib_action(arg: u64) -> Option<LibAction> {
    Some(match split_libact_arg(arg).0 {
        1 => LibAction::Clear,
        2 => LibAction::Normalize,
        3 => LibAction::Denormalize,
        4 => LibAction::Trunc,
        5 => LibAction::Setopt,
        6 => LibAction::Ftruncate,
        7 => LibAction::Print,
        8 => LibAction::PrintObject,
        _ => return None,
    })
}

impl Decoder {
    /// Sort order from the `aggsort*` options.
    pub fn sort_order(&self) -> SortOrder {
        let kp = self.options.value("aggsortkeypos");
        SortOrder {
            by_key: self.options.is_set("aggsortkey"),
            reverse: self.options.is_set("aggsortrev"),
            keypos: if kp > 0 { kp as usize } else { 0 },
        }
    }

    fn sortpos(&self) -> usize {
        let p = self.options.value("aggsortpos");
        if p > 0 {
            p as usize
        } else {
            0
        }
    }

    fn stackindent(&self) -> usize {
        let v = self.options.value("stackindent");
        if v >= 0 {
            v.min(1 << 16) as usize
        } else {
            stack::DEFAULT_STACKINDENT
        }
    }

    /// Parses a program's format strings and installs them with the EPIDs of its enablings;
    /// returns the program's index.
    pub fn add_program(&mut self, formats: &[Vec<u8>], epids: &[u32]) -> Result<usize> {
        let parsed = formats
            .iter()
            .map(|f| PrintfFormat::parse(f))
            .collect::<Result<Vec<_>>>()?;
        self.formats.push(parsed);
        let idx = self.formats.len() - 1;
        for &e in epids {
            self.epid_program.insert(e, idx);
        }
        Ok(idx)
    }

    /// Installs the `print()` types of program `program` (as [`Decoder::add_program`] numbered it).
    pub fn set_print_types(&mut self, program: usize, types: Vec<PrintType>) {
        if self.print_types.len() <= program {
            self.print_types.resize_with(program + 1, Vec::new);
        }
        self.print_types[program] = types;
    }

    fn format(&self, rec: &RecDesc) -> Result<Option<&PrintfFormat>> {
        if rec.format == 0 {
            return Ok(None);
        }
        self.cur_prog
            .and_then(|p| self.formats.get(p))
            .and_then(|f| f.get(rec.format as usize - 1))
            .map(Some)
            .ok_or(ConsumerError::BadFormat(rec.format as u32))
    }

    /// What aggregation printing needs from the handle: symbols, `$target`, and the display options
    /// as they are now (`agghist`, `aggpack`, `aggzoom`, `encoding`; with no `encoding`, packed
    /// cells use UTF-8 unless `TERM` names a terminal that cannot draw it).
    fn agg_env(&self) -> FmtEnv<'_> {
        let encoding = self.options.value("encoding");
        FmtEnv {
            symbols: self.symbols.as_ref(),
            stackindent: self.stackindent(),
            target: self.target,
            style: GraphStyle {
                zoom: self.options.is_set("aggzoom"),
                utf8: encoding == ENCODING_UTF8,
                packed_utf8: match encoding {
                    ENCODING_UTF8 => true,
                    ENCODING_ASCII => false,
                    _ => aggdisplay::utf8_for_term(std::env::var("TERM").ok().as_deref()),
                },
            },
            agghist: self.options.is_set("agghist"),
            aggpack: self.options.is_set("aggpack"),
            zone: &self.zone,
        }
    }

    /// Prints every aggregation not yet printed by `printa()` (`dtrace_aggregate_print`).
    pub fn print_all_aggregations(&self, out: &mut Vec<u8>) -> Result<()> {
        if crate::oformat::print_all(self, out)? {
            return Ok(());
        }
        self.print_aggregations_in(out, self.sort_order())
    }

    /// [`Decoder::print_all_aggregations`] in the given order (`dtrace_aggregate_print` with one
    /// of the sorted walkers) instead of the `aggsort*` options'.
    pub fn print_aggregations_in(&self, out: &mut Vec<u8>, order: SortOrder) -> Result<()> {
        let env = self.agg_env();
        let mut varids = self.aggs.varids();
        // DTrace sorts all the entries by aggregation first, then by key or value, and
        // `aggsortrev` reverses that whole order: the last aggregation prints first.
        if order.reverse {
            varids.reverse();
        }
        for varid in varids {
            if self.printed.contains(&varid) {
                continue;
            }
            aggprint::print_aggregation(out, &env, &self.aggs, varid, order)?;
        }
        Ok(())
    }

    /// Consumes one CPU's buffer snapshot.
    pub fn consume_buffer(
        &mut self,
        snap: &BufferSnapshot,
        out: &mut Vec<u8>,
        pfunc: &mut ProbeFn<'_>,
        rfunc: &mut RecFn<'_>,
        errfn: &mut ErrFn<'_>,
        dropfn: &mut DropFn<'_>,
    ) -> Result<()> {
        self.begin_pass();
        let mut cache = DescCache::default();
        let mut offs = 0usize;
        while let Some(at) = next_record(&snap.data, offs) {
            offs = self.consume_at(
                snap.cpu, &snap.data, at, &mut cache, out, pfunc, rfunc, errfn,
            )?;
        }
        self.report_cpu_drops(snap.cpu, snap.drops, dropfn)
    }

    /// Reads the run-time flags a pass of consumption starts with.
    pub(crate) fn begin_pass(&mut self) {
        self.flags = RunFlags {
            quiet: self.options.is_set("quiet"),
            flowindent: self.options.is_set("flowindent"),
            rawbytes: self.options.is_set("rawbytes"),
            stackindent: self.stackindent(),
        };
    }

    /// Reports `drops` principal-buffer drops on `cpu` (none: nothing).
    pub(crate) fn report_cpu_drops(
        &mut self,
        cpu: u32,
        drops: u64,
        dropfn: &mut DropFn<'_>,
    ) -> Result<()> {
        if drops > 0 {
            let r = DropReport {
                cpu: Some(cpu),
                kind: DropKind::Principal,
                drops,
                msg: status::cpu_drop_message(
                    DropKind::Principal,
                    drops,
                    cpu,
                    self.options.is_set("droptags"),
                ),
            };
            if !dropfn(&r) {
                return Err(ConsumerError::DirectAbort);
            }
        }
        Ok(())
    }

    /// The size of the records of `epid` in a principal buffer.
    pub(crate) fn record_size(&self, epid: u32) -> Result<usize> {
        let size = match self.eprobes.get(&epid) {
            Some(e) => e.size,
            None if epid == FAULT_EPID => fault_eprobe_desc().size,
            None => return Err(ConsumerError::BadEpid(epid)),
        };
        Ok((size as usize).max(RECHDR_SIZE as usize))
    }

    /// How many bytes at the start of `data`, the buffer of the CPU BEGIN fired on, BEGIN's
    /// records fill, with those of ERROR and the fault reports among them: the part
    /// `dt_consume_begin` consumes before the other CPUs' buffers (the rest, END's records
    /// included, comes after them).
    pub(crate) fn begin_part(&self, data: &[u8]) -> usize {
        let mut offs = 0;
        while let Some(at) = next_record(data, offs) {
            let epid = recdata::uint(&data[at..at + 4]).unwrap_or(0) as u32;
            let of_begin = epid == FAULT_EPID
                || self.eprobes.get(&epid).is_some_and(|e| {
                    self.probes.get(&e.probe_id).is_some_and(|p| {
                        p.provider == "dtrace" && (p.name == "BEGIN" || p.name == "ERROR")
                    })
                });
            match self.record_size(epid) {
                Ok(size) if of_begin => offs = at + size,
                _ => return at,
            }
        }
        data.len()
    }

    /// Consumes the record at `offs` of `cpu`'s buffer `data` (as [`next_record`] found it);
    /// returns the offset past it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn consume_at(
        &mut self,
        cpu: u32,
        data: &[u8],
        offs: usize,
        cache: &mut DescCache,
        out: &mut Vec<u8>,
        pfunc: &mut ProbeFn<'_>,
        rfunc: &mut RecFn<'_>,
        errfn: &mut ErrFn<'_>,
    ) -> Result<usize> {
        let epid = recdata::uint(recdata::slice(data, offs, 4)?).unwrap_or(0) as u32;
        let descs = match cache.0.get(&epid) {
            Some(d) => d.clone(),
            None => {
                let e = match self.eprobes.get(&epid) {
                    Some(e) => e.clone(),
                    // The framework's fault records (DTrace's ERROR reports).
                    None if epid == FAULT_EPID => fault_eprobe_desc(),
                    None => return Err(ConsumerError::BadEpid(epid)),
                };
                let p = self.probes.get(&e.probe_id).cloned().unwrap_or(ProbeInfo {
                    id: e.probe_id,
                    provider: String::new(),
                    module: String::new(),
                    function: String::new(),
                    name: String::new(),
                });
                let prog = self.epid_program.get(&epid).copied();
                let d = Rc::new((e, p, prog));
                cache.0.insert(epid, d.clone());
                d
            }
        };
        let (edesc, pdesc) = (&descs.0, &descs.1);
        self.cur_prog = descs.2;
        let size = (edesc.size as usize).max(RECHDR_SIZE as usize);
        let rec = recdata::slice(data, offs, size)?;
        let next_offs = offs + size;
        self.consume_record(
            cpu, edesc, pdesc, rec, data, next_offs, out, pfunc, rfunc, errfn,
        )?;
        self.last_epid = epid;
        Ok(next_offs)
    }

    /// Whether the next record after `offs` is another EPID of the same probe (for flow returns).
    fn next_is_same_probe(&self, data: &[u8], mut offs: usize, epid: u32, probe: u32) -> bool {
        while offs + 4 <= data.len() {
            let next = recdata::uint(&data[offs..offs + 4]).unwrap_or(0) as u32;
            if next == EPID_NONE {
                offs += 4;
                continue;
            }
            return next != epid && self.eprobes.get(&next).is_some_and(|e| e.probe_id == probe);
        }
        false
    }

    #[allow(clippy::too_many_arguments)]
    fn consume_record(
        &mut self,
        cpu: u32,
        edesc: &EprobeDesc,
        pdesc: &ProbeInfo,
        rec: &[u8],
        buf: &[u8],
        next_offs: usize,
        out: &mut Vec<u8>,
        pfunc: &mut ProbeFn<'_>,
        rfunc: &mut RecFn<'_>,
        errfn: &mut ErrFn<'_>,
    ) -> Result<()> {
        if edesc.epid == FAULT_EPID || self.error_epids.contains(&edesc.epid) {
            let report = self.error_report(cpu, edesc, rec)?;
            if !errfn(&report) {
                return Err(ConsumerError::DirectAbort);
            }
            return Ok(());
        }
        let hi = recdata::uint(&rec[4..8]).unwrap_or(0);
        let lo = recdata::uint(&rec[8..12]).unwrap_or(0);
        let flowindent = self.flags.flowindent;
        let (mut flow, mut prefix) = (Flow::None, "");
        if flowindent {
            let (f, p) = flow_of(pdesc);
            flow = f;
            prefix = p;
            let last_probe = self.eprobes.get(&self.last_epid).map(|e| e.probe_id);
            if flow == Flow::Entry
                && self.last_epid != EPID_NONE
                && self.last_epid != edesc.epid
                && last_probe == Some(edesc.probe_id)
            {
                flow = Flow::None;
            }
            if flow == Flow::Return
                && self.next_is_same_probe(buf, next_offs, edesc.epid, edesc.probe_id)
            {
                flow = Flow::None;
            }
            if flow == Flow::None {
                prefix = "| ";
            }
            if flow == Flow::Return {
                self.indent = self.indent.saturating_sub(2);
            }
        }
        let pd = ProbeData {
            cpu,
            edesc,
            pdesc,
            data: rec,
            timestamp: (hi << 32) | lo,
            flow,
            indent: self.indent,
            prefix,
        };
        let rv = pfunc(&pd, out);
        if flowindent && flow == Flow::Entry {
            self.indent += 2;
        }
        match rv {
            ConsumeAction::Next => return Ok(()),
            ConsumeAction::Abort => return Err(ConsumerError::DirectAbort),
            ConsumeAction::Error => return Err(ConsumerError::DirectAbort),
            ConsumeAction::This => {}
        }
        let recs = &edesc.recs;
        let mut tracememsize: u64 = 0;
        let mut i = 0usize;
        while i < recs.len() {
            let r = &recs[i];
            let bytes = recdata::slice(rec, r.offset as usize, r.size as usize)?;
            // print() records are data (DTrace's are DIFEXPR records): they go through the record
            // callback below like trace()'s
            if r.action == ActionKind::LibAct && lib_action(r.arg) != Some(LibAction::Print) {
                i += self.lib_act(recs, i, rec, out)?;
                for msg in std::mem::take(&mut self.lib_errors) {
                    let report = status::library_error(cpu, edesc.clause, pdesc, msg);
                    if !errfn(&report) {
                        return Err(ConsumerError::DirectAbort);
                    }
                }
                self.flags.quiet = self.options.is_set("quiet");
                self.flags.flowindent = self.options.is_set("flowindent");
                continue;
            }
            if r.action == ActionKind::TracememDynsize && r.size == 8 {
                tracememsize = recdata::uint(bytes).unwrap_or(0);
                i += 1;
                continue;
            }
            if r.action == ActionKind::Exit && r.size >= 4 {
                self.exit_status = recdata::sint(&bytes[..4]).map(|v| v as i32);
            }
            match rfunc(&pd, Some(r), out) {
                ConsumeAction::Next => {
                    // a print() skipped leaves its object record too
                    i += 1 + usize::from(print_object(recs, i).is_some());
                    continue;
                }
                ConsumeAction::This => {}
                _ => return Err(ConsumerError::DirectAbort),
            }
            let quiet = self.flags.quiet;
            i += self.print_record(recs, i, rec, bytes, quiet, &mut tracememsize, out)?;
        }
        match rfunc(&pd, None, out) {
            ConsumeAction::Abort | ConsumeAction::Error => Err(ConsumerError::DirectAbort),
            _ => Ok(()),
        }
    }

    /// Handles a library action starting at record `i`; returns how many records it used.
    fn lib_act(
        &mut self,
        recs: &[RecDesc],
        i: usize,
        rec: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<usize> {
        let r = &recs[i];
        // The value of normalize/trunc/setopt follows as a LibAct record with the same number.
        let paired = recs
            .get(i + 1)
            .filter(|n| n.action == ActionKind::LibAct && n.arg == r.arg);
        match lib_action(r.arg) {
            Some(LibAction::Clear) => {
                let id = u64_rec(r, rec)? as u32;
                self.aggs.clear(id);
                Ok(1)
            }
            Some(LibAction::Denormalize) => {
                let id = u64_rec(r, rec)? as u32;
                self.aggs.denormalize(id);
                Ok(1)
            }
            Some(LibAction::Normalize) => {
                let id = u64_rec(r, rec)? as u32;
                let v = paired.ok_or(ConsumerError::SizeMismatch {
                    size: r.size as usize,
                    what: "normalize() without a factor",
                })?;
                let n = u64_rec(v, rec)?;
                self.aggs.normalize(id, n);
                Ok(2)
            }
            Some(LibAction::Trunc) => {
                let id = u64_rec(r, rec)? as u32;
                let (n, used) = match paired {
                    Some(v) => {
                        let b = recdata::slice(rec, v.offset as usize, v.size as usize)?;
                        let n = recdata::sint(b).ok_or(ConsumerError::SizeMismatch {
                            size: b.len(),
                            what: "trunc()",
                        })?;
                        (n, 2)
                    }
                    None => (0, 1),
                };
                self.aggs.trunc(id, n);
                Ok(used)
            }
            Some(LibAction::Setopt) => {
                let name_b = recdata::slice(rec, r.offset as usize, r.size as usize)?;
                let name = String::from_utf8_lossy(recdata::cstr(name_b)).into_owned();
                let (value, used) = match paired {
                    Some(v) if v.size > 8 => {
                        let val_b = recdata::slice(rec, v.offset as usize, v.size as usize)?;
                        (
                            Some(String::from_utf8_lossy(recdata::cstr(val_b)).into_owned()),
                            2,
                        )
                    }
                    Some(_) => (Some("1".to_string()), 2),
                    None => (None, 1),
                };
                if let Err(e) = self.options.set(&name, value.as_deref(), true) {
                    // DTrace for Linux's message ends in a newline of its own, so a blank line
                    // follows it.
                    self.lib_errors.push(format!(
                        "couldn't set option \"{name}\" to \"{}\": {e}\n",
                        value.as_deref().unwrap_or("")
                    ));
                }
                Ok(used)
            }
            Some(LibAction::Ftruncate) => {
                self.effects.ftruncate(out)?;
                Ok(1)
            }
            Some(LibAction::Print) | Some(LibAction::PrintObject) | None => Ok(1),
        }
    }

    /// Prints one data record (or a printf-like group starting at it); returns records used.
    #[allow(clippy::too_many_arguments)]
    fn print_record(
        &mut self,
        recs: &[RecDesc],
        i: usize,
        rec: &[u8],
        bytes: &[u8],
        quiet: bool,
        tracememsize: &mut u64,
        out: &mut Vec<u8>,
    ) -> Result<usize> {
        let r = &recs[i];
        let env = FmtEnv {
            symbols: self.symbols.as_ref(),
            stackindent: self.flags.stackindent,
            target: self.target,
            style: GraphStyle::default(),
            agghist: false,
            aggpack: false,
            zone: &self.zone,
        };
        match r.action {
            ActionKind::Stack | ActionKind::Ustack | ActionKind::Jstack => {
                stack::print_any(out, env.symbols, r, bytes, env.stackindent, None)?;
                return Ok(1);
            }
            ActionKind::Sym
            | ActionKind::Mod
            | ActionKind::Usym
            | ActionKind::Umod
            | ActionKind::Uaddr => {
                stack::print_symbol_record(out, env.symbols, r.action, bytes)?;
                return Ok(1);
            }
            ActionKind::Printf => {
                if let Some(f) = self.format(r)? {
                    return f.format(out, &env, &recs[i..], rec, &[]).map(|n| n.max(1));
                }
            }
            ActionKind::System | ActionKind::Freopen => {
                if let Some(f) = self.format(r)? {
                    let mut s = Vec::new();
                    let n = f.format(&mut s, &env, &recs[i..], rec, &[])?.max(1);
                    if r.action == ActionKind::System {
                        self.effects.system(out, &s)?;
                    } else {
                        self.effects.freopen(out, &s)?;
                    }
                    return Ok(n);
                }
            }
            ActionKind::Printa => return self.printa(recs, i, rec, out),
            ActionKind::LibAct if lib_action(r.arg) == Some(LibAction::Print) => {
                let types = self
                    .cur_prog
                    .and_then(|p| self.print_types.get(p))
                    .filter(|t| !t.is_empty());
                // without a type description, print as trace() does (DTrace's fallback too)
                if let Some(t) = types {
                    let root = split_libact_arg(r.arg).1;
                    let addr = recdata::uint(bytes).ok_or(ConsumerError::SizeMismatch {
                        size: bytes.len(),
                        what: "print()",
                    })?;
                    // the object follows as a record of the same action (none for void *)
                    let object = print_object(recs, i)
                        .map(|n| recdata::slice(rec, n.offset as usize, n.size as usize))
                        .transpose()?;
                    let printsize = self.options.is_set("printsize");
                    let printsize =
                        printsize.then(|| self.options.value("printsize").max(0) as u64);
                    typeprint::print_pointer(out, t, root, addr, object, printsize)?;
                    return Ok(1 + usize::from(object.is_some()));
                }
            }
            ActionKind::Tracemem => {
                let n = if *tracememsize == 0 || *tracememsize > bytes.len() as u64 {
                    bytes.len()
                } else {
                    *tracememsize as usize
                };
                *tracememsize = 0;
                bytes::print_bytes(out, &bytes[..n], -33, quiet, true);
                return Ok(1);
            }
            _ => {}
        }
        if r.action == ActionKind::DifExpr && r.arg == TRACE_BYREF {
            // a struct, union or array: its bytes, whatever its size
            bytes::print_bytes(out, bytes, -33, quiet, true);
            return Ok(1);
        }
        if r.action == ActionKind::DifExpr && r.arg == TRACE_STRING {
            // a string, whatever its size (a four- or eight-byte one is not a number)
            bytes::print_bytes(out, bytes, -33, quiet, self.flags.rawbytes);
            return Ok(1);
        }
        let signed = r.action == ActionKind::DifExpr && r.arg == TRACE_SIGNED;
        trace_value(out, bytes, quiet, self.flags.rawbytes, signed);
        Ok(1)
    }

    fn printa(
        &mut self,
        recs: &[RecDesc],
        i: usize,
        rec: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<usize> {
        let r = &recs[i];
        let mut varids = vec![u64_rec(r, rec)? as u32];
        let mut n = 1;
        // Further aggregations of one printa() come as further Printa records with the same format,
        // or (the compiler's form) as DifExpr records holding aggregation ids, as many as the format
        // has %@ conversions: a printa() without a format has one aggregation, so consecutive
        // `printa(@a); printa(@b);` are two.
        let format = self.format(r)?;
        let wanted = match &format {
            Some(f) => f.agg_conversions().max(1),
            None => 1,
        };
        // With a format, every aggregation the printa() names is joined, even beyond its %@
        // conversions (those print the first ones' values).
        let formatted = format.is_some();
        while let Some(nr) = recs.get(i + n) {
            let same_printa = nr.action == ActionKind::Printa
                && (formatted || varids.len() < wanted)
                && nr.format == r.format
                && nr.arg == r.arg;
            let id_expr = nr.action == ActionKind::DifExpr
                && varids.len() < wanted
                && matches!(nr.size, 4 | 8);
            if !same_printa && !id_expr {
                break;
            }
            let id = u64_rec(nr, rec)? as u32;
            if id_expr && !same_printa && self.aggs.desc_for_var(id).is_none() {
                break;
            }
            varids.push(id);
            n += 1;
        }
        if crate::oformat::printa(self, &varids, out)? {
            self.printed.extend(varids);
            return Ok(n);
        }
        let env = self.agg_env();
        let (order, pos) = (self.sort_order(), self.sortpos());
        match self.format(r)? {
            Some(f) => {
                aggprint::print_formatted(out, &env, &self.aggs, f, &varids, order, pos)?;
            }
            None => {
                out.push(b'\n');
                if varids.len() == 1 {
                    aggprint::print_aggregation(out, &env, &self.aggs, varids[0], order)?;
                } else {
                    aggprint::print_joined(out, &env, &self.aggs, &varids, order, pos)?;
                }
            }
        }
        self.printed.extend(varids);
        Ok(n)
    }

    fn error_report(&self, cpu: u32, edesc: &EprobeDesc, rec: &[u8]) -> Result<ErrorReport> {
        if edesc.recs.len() != 5 {
            return Err(ConsumerError::SizeMismatch {
                size: edesc.recs.len(),
                what: "the ERROR probe's five records",
            });
        }
        let v: Vec<u64> = edesc
            .recs
            .iter()
            .map(|r| u64_rec(r, rec))
            .collect::<Result<_>>()?;
        let prid = v[0] as u32;
        let probe = self
            .probes
            .get(&prid)
            .cloned()
            .ok_or(ConsumerError::BadErrorProbe(prid))?;
        Ok(status::error_report(
            cpu,
            &probe,
            v[1] as u32,
            v[2] as i64,
            v[3] as i32,
            v[4],
        ))
    }
}

/// `trace()` of a value by its size, as DTrace for Linux prints it: integers right-aligned in a column
/// (64-bit signed ` %19ld`, unsigned ` %20lu`; ` %10d`, ` %5d`, ` %3d`) or bare with `quiet`,
/// signed or unsigned as the traced
/// expression's type (`signed`, the record's [`dtrace_dif::program::TRACE_SIGNED`]); anything else as a
/// string or byte dump.
pub fn trace_value(out: &mut Vec<u8>, b: &[u8], quiet: bool, rawbytes: bool, signed: bool) {
    let width = |w: i64| {
        if quiet {
            Spec::default()
        } else {
            Spec::width(w)
        }
    };
    match b.len() {
        8 | 4 | 2 | 1 => {
            if !quiet {
                out.push(b' ');
            }
            let w = match b.len() {
                8 if signed => 19,
                8 => 20,
                4 => 10,
                2 => 5,
                _ => 3,
            };
            if signed {
                cformat::fmt_signed(out, &width(w), recdata::sint(b).unwrap_or(0));
            } else {
                cformat::fmt_unsigned(out, &width(w), recdata::uint(b).unwrap_or(0), b'u');
            }
        }
        _ => bytes::print_bytes(out, b, -33, quiet, rawbytes),
    }
}

/// `dtrace(1)`'s default callbacks (`chew` and `chewrec`): the heading once, then per probe
/// `CPU ID FUNCTION:NAME` (or the flow-indented function), a newline after each probe's records unless
/// quiet, and `exit()` records left unprinted.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultOutput {
    /// The heading has been printed.
    pub heading_printed: bool,
    /// `-q` / `quiet`.
    pub quiet: bool,
    /// `-F` / `flowindent`.
    pub flowindent: bool,
    /// DTrace for Linux's testing mode (`_DTRACE_TESTING` in the environment): probe lines and the
    /// heading leave out the CPU and ID columns, for output that does not vary between runs.
    pub testing: bool,
}

impl DefaultOutput {
    /// The per-probe callback.
    pub fn probe(&mut self, pd: &ProbeData<'_>, out: &mut Vec<u8>) -> ConsumeAction {
        if !self.heading_printed {
            if self.flowindent || !self.quiet {
                out.extend_from_slice(heading(self.flowindent, self.testing).as_bytes());
            }
            self.heading_printed = true;
        }
        if self.flowindent || !self.quiet {
            probe_line(pd, self.flowindent, self.testing, out);
        }
        ConsumeAction::This
    }

    /// The per-record callback.
    pub fn record(
        &mut self,
        _pd: &ProbeData<'_>,
        rec: Option<&RecDesc>,
        out: &mut Vec<u8>,
    ) -> ConsumeAction {
        match rec {
            None => {
                if !self.quiet {
                    out.push(b'\n');
                }
                ConsumeAction::Next
            }
            Some(r) if matches!(r.action, ActionKind::Exit | ActionKind::Raise) => {
                ConsumeAction::Next
            }
            Some(_) => ConsumeAction::This,
        }
    }
}
