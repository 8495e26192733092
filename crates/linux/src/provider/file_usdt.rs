//! USDT probes of processes started after dtrace: file-wide uprobes.
//!
//! DTrace learns of a process's USDT providers when the process registers its DOF at start-up, so
//! `python*:::gc-start` also matches the `python<PID>` probes of processes started later. Here a
//! description whose provider is a glob (`python*`, `myapp1*`) places, besides the per-process
//! probes of the processes running when it is matched, one uprobe per USDT site on each *file*
//! whose notes or DOF define matching probes (the executables and libraries those processes map,
//! and those of the processes started since, looked for every 100 ms by
//! `LinuxTracing::discover_files`): a [`FileProbe`], placed with no process filter
//! ([`crate::uprobe::EVERY_PROCESS`]), so every process that maps the file, now or later, fires
//! it; its semaphore is given to the kernel as the uprobe's `ref_ctr_offset`, which the kernel
//! raises in each process as it maps the file. A process that maps a file not known yet fires
//! once the file has been found; one looked at before that loads a library later is looked at
//! again after the load ([`crate::rtld::LinkerWatch`] on the run-time linkers it maps).
//!
//! A file probe is not a framework probe: its records carry a tag of its own
//! ([`FILE_TAG_BASE`] and up). Delivery fires each of its events as the probe
//! `<provider><PID>:<module>:<function>:<name>` of the firing process: the per-process probe the
//! file probe *serves* for that process. The first event of a process not seen before waits
//! ([`FileProbes::hold`]) until the next poll registers the process's provider, matches the
//! enabled descriptions again (`Framework::enable_new`, as for a library loaded later) and so
//! creates its probes (listed from then on); then it fires. Per-process probes the file probes
//! cover place no uprobe of their own, so a firing is never delivered twice.
//!
//! A clause that matches the probe in every process (provider `prefix*`, see
//! [`FileProbe::matches_every_process`]) and reads no `probeprov` runs in the kernel at a file
//! probe, as at a per-process probe (its predicate, aggregations, records): only the EPIDs of
//! its records depend on the process, and dtrace maps each record to the process's probe by
//! the pid it carries. The kernel notes each process at its first firing and records that
//! firing for dtrace whatever the filter says (`KernelAggs::known`), so dtrace learns of every
//! process. The D variables such clauses use live in the kernel as at a per-process probe
//! (`kvars::kernel_probes` counts the file probes a provider glob matches). The other clauses
//! run in dtrace, the kernel capturing what they read.

use crate::catalog::{glob, AttachPoint, Probe};
use crate::session::Delivery;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// The first tag of the file probes (framework probe ids stay below it).
pub const FILE_TAG_BASE: u32 = 0xF000_0000;

/// Whether `tag` is a file probe's.
pub fn is_file_tag(tag: u32) -> bool {
    tag >= FILE_TAG_BASE
}

/// The part of a glob before its first special character.
pub(crate) fn glob_prefix(pattern: &str) -> &str {
    let end = pattern.find(['*', '?', '[', '\\']).unwrap_or(pattern.len());
    &pattern[..end]
}

/// Whether provider description `pattern` may match provider `kind` followed by some process id
/// (`python*`, `py*`, `python1*` and `python123` for `python`): a superset, from the pattern's
/// literal prefix; the framework matches the real name once the process is known.
pub fn may_match_kind(pattern: &str, kind: &str) -> bool {
    if pattern.is_empty() || kind.is_empty() {
        return false;
    }
    let pre = glob_prefix(pattern);
    match pre.strip_prefix(kind) {
        Some(rest) => rest.bytes().all(|b| b.is_ascii_digit()),
        None => kind.starts_with(pre),
    }
}

/// One USDT probe of one file, placed for every process.
#[derive(Clone, Debug)]
pub(crate) struct FileProbe {
    /// Its records' tag.
    pub(crate) tag: u32,
    /// The provider without a process id (`python`).
    pub(crate) kind: String,
    /// Whether the file was a process's executable when found (its module is then `a.out` too).
    pub(crate) main: bool,
    /// The probe, named `<kind>:<module>:<function>:<name>`, placed for every process.
    pub(crate) probe: Probe,
    /// Enabled in the capture session.
    pub(crate) enabled: bool,
}

impl FileProbe {
    /// The object file.
    pub(crate) fn path(&self) -> &str {
        match &self.probe.attach {
            AttachPoint::Uprobe { path, .. } => path,
            _ => "",
        }
    }

    /// Whether description `d` may match this probe in some process.
    pub(crate) fn may_match(&self, d: &dtrace_dif::program::ProbeDesc) -> bool {
        let p = &self.probe.desc;
        may_match_kind(&d.provider, &self.kind)
            && (glob::matches(&d.module, &p.module)
                || (self.main && glob::matches(&d.module, "a.out"))
                || module_alias(&d.module, &p.module))
            && glob::matches(&d.function, &p.function)
            && glob::matches(&d.name, &p.name)
    }
}

impl FileProbe {
    /// Whether description `d` matches this probe in every process: its provider is a glob
    /// whose literal prefix starts the kind and ends in `*` alone (`python*`, `py*`), and its
    /// module, function and name match the probe's own (an alias such as `a.out` is left to
    /// the framework's matching, per process).
    pub(crate) fn matches_every_process(&self, d: &dtrace_dif::program::ProbeDesc) -> bool {
        let p = &self.probe.desc;
        let pre = glob_prefix(&d.provider);
        d.provider.get(pre.len()..) == Some("*")
            && self.kind.starts_with(pre)
            && glob::matches(&d.module, &p.module)
            && glob::matches(&d.function, &p.function)
            && glob::matches(&d.name, &p.name)
    }
}

/// Whether `name` (not a glob) names `module` without its suffix (`libc` for `libc.so.6`).
fn module_alias(name: &str, module: &str) -> bool {
    !name.is_empty()
        && !glob::has_meta(name)
        && module
            .strip_prefix(name)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// What fired in a process not known yet: a file probe of provider `kind` in the file at `path`
/// (`main`: found as a process's executable).
pub(crate) struct Fired {
    pub(crate) kind: String,
    pub(crate) path: String,
    pub(crate) main: bool,
}

/// The file probes, which per-process probe each serves in each process, and the events of
/// processes not known yet.
#[derive(Default)]
pub(crate) struct FileProbes {
    list: Vec<FileProbe>,
    /// (path, provider kind, function, name) to the index in `list`.
    index: HashMap<(String, String, String, String), usize>,
    /// (tag, process) to the framework probe fired (shared with each delivery batch, copied
    /// only when a probe is added while a batch holds it).
    served: Arc<HashMap<(u32, u32), u32>>,
    /// Events of processes whose probes are not created yet, in order.
    waiting: Vec<Delivery>,
    /// The processes of those events, with the file probes (indices) that fired in each.
    unknown: BTreeMap<u32, Vec<usize>>,
    /// (tag, process) pairs whose probes were created from their events: a later event of one
    /// that still finds no probe (no enabled description matches it) is dropped.
    adopted: HashSet<(u32, u32)>,
    /// Per tag: the clauses that run in the kernel at that file probe, each with its number
    /// among the probe's kernel clauses.
    pub(crate) kernel: HashMap<u32, Vec<(usize, u16)>>,
}

impl FileProbes {
    /// Adds `probe` (named for `kind`, placed for every process) of a file, unless it is known.
    pub(crate) fn add(&mut self, kind: &str, main: bool, probe: Probe) {
        let AttachPoint::Uprobe { path, .. } = &probe.attach else {
            return;
        };
        let key = (
            path.clone(),
            kind.to_string(),
            probe.desc.function.clone(),
            probe.desc.name.clone(),
        );
        if self.index.contains_key(&key) {
            return;
        }
        let Some(tag) = u32::try_from(self.list.len())
            .ok()
            .and_then(|n| FILE_TAG_BASE.checked_add(n))
        else {
            return;
        };
        self.index.insert(key, self.list.len());
        self.list.push(FileProbe {
            tag,
            kind: kind.to_string(),
            main,
            probe,
            enabled: false,
        });
    }

    /// The file probes description `d` may match in some process.
    pub(crate) fn matching<'a>(
        &'a self,
        d: &'a dtrace_dif::program::ProbeDesc,
    ) -> impl Iterator<Item = &'a FileProbe> + 'a {
        self.list.iter().filter(move |f| f.may_match(d))
    }

    /// Whether there are any.
    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// How many there are.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// The file probes not yet enabled in the session, marked enabled.
    pub(crate) fn take_unenabled(&mut self) -> Vec<FileProbe> {
        let mut out = Vec::new();
        for f in self.list.iter_mut().filter(|f| !f.enabled) {
            f.enabled = true;
            out.push(f.clone());
        }
        out
    }

    /// File probe `tag` if it is not yet enabled in the session, marked enabled.
    pub(crate) fn take_unenabled_tag(&mut self, tag: u32) -> Option<FileProbe> {
        let f = self
            .list
            .get_mut(tag.checked_sub(FILE_TAG_BASE)? as usize)?;
        if f.enabled {
            return None;
        }
        f.enabled = true;
        Some(f.clone())
    }

    /// The tag of the file probe that covers per-process USDT probe `probe` (`python123:...`, of
    /// provider kind `kind`): the same sites of the same file.
    pub(crate) fn covering(&self, kind: &str, probe: &Probe) -> Option<u32> {
        let AttachPoint::Uprobe {
            path,
            retprobe: false,
            sites,
            ..
        } = &probe.attach
        else {
            return None;
        };
        let key = (
            path.clone(),
            kind.to_string(),
            probe.desc.function.clone(),
            probe.desc.name.clone(),
        );
        let f = self.list.get(*self.index.get(&key)?)?;
        match &f.probe.attach {
            AttachPoint::Uprobe { sites: s, .. } if s == sites => Some(f.tag),
            _ => None,
        }
    }

    /// Fires file probe `tag` in process `pid` as framework probe `id`.
    pub(crate) fn serve(&mut self, tag: u32, pid: u32, id: u32) {
        Arc::make_mut(&mut self.served).insert((tag, pid), id);
    }

    /// (tag, process) to the framework probe an event of that file probe in that process fires.
    pub(crate) fn served_map(&self) -> Arc<HashMap<(u32, u32), u32>> {
        Arc::clone(&self.served)
    }

    /// Keeps what file probe `tag` delivered in process `pid` (an event, a record or a fault of
    /// a clause run in the kernel) while the process has no probe yet, for after
    /// [`FileProbes::take_unknown`]; drops it when the process's probes were created already
    /// (none matches it).
    pub(crate) fn hold(&mut self, d: Delivery, tag: u32, pid: u32) {
        if self.adopted.contains(&(tag, pid)) {
            return;
        }
        let Some(i) = tag.checked_sub(FILE_TAG_BASE).map(|i| i as usize) else {
            return;
        };
        let fired = self.unknown.entry(pid).or_default();
        if !fired.contains(&i) {
            fired.push(i);
        }
        self.waiting.push(d);
    }

    /// Notes that file probe `tag` fired in process `pid` (its first firing, whose record was
    /// lost): the process is named at the next [`FileProbes::take_unknown`] unless it is
    /// already.
    pub(crate) fn note_unknown(&mut self, tag: u32, pid: u32) {
        if self.adopted.contains(&(tag, pid)) || self.served.contains_key(&(tag, pid)) {
            return;
        }
        let Some(i) = tag.checked_sub(FILE_TAG_BASE).map(|i| i as usize) else {
            return;
        };
        if i >= self.list.len() {
            return;
        }
        let fired = self.unknown.entry(pid).or_default();
        if !fired.contains(&i) {
            fired.push(i);
        }
    }

    /// The processes that fired file probes without a probe of their own, each with the
    /// (provider kind, file, was an executable) of what fired; they count as adopted from now.
    pub(crate) fn take_unknown(&mut self) -> Vec<(u32, Vec<Fired>)> {
        let unknown = std::mem::take(&mut self.unknown);
        let mut out = Vec::with_capacity(unknown.len());
        for (pid, fired) in unknown {
            let files = fired
                .iter()
                .filter_map(|&i| self.list.get(i))
                .map(|f| {
                    self.adopted.insert((f.tag, pid));
                    Fired {
                        kind: f.kind.clone(),
                        path: f.path().to_string(),
                        main: f.main,
                    }
                })
                .collect();
            out.push((pid, files));
        }
        out
    }

    /// The events held for processes now adopted.
    pub(crate) fn take_waiting(&mut self) -> Vec<Delivery> {
        std::mem::take(&mut self.waiting)
    }
}

impl super::Shared {
    /// Serves probe `info` from a file probe when it is a per-process USDT probe that one
    /// covers (the same sites of the same file): no uprobe of its own, its firings are those of
    /// the file probe in its process. Whether it was.
    pub(super) fn serve_from_file(
        &mut self,
        info: &dtrace_framework::records::ProbeInfo,
    ) -> std::result::Result<bool, String> {
        if self.user.files.is_empty() {
            return Ok(false);
        }
        let Some((kind, pid)) = crate::catalog::pid::split_provider(&info.provider) else {
            return Ok(false);
        };
        let desc = crate::ProbeDesc::new(&info.provider, &info.module, &info.function, &info.name);
        let Some(tag) = self
            .user
            .get(&desc)
            .and_then(|p| self.user.files.covering(kind, p))
        else {
            return Ok(false);
        };
        // The file probe is placed first (a process running when the program is enabled is
        // served before the file probes are placed): which clauses run in the kernel there is
        // known then.
        if let Some(f) = self.user.files.take_unenabled_tag(tag) {
            self.enable_file_probe(&f)
                .map_err(|e| format!("{} in every process: {e}", f.probe.desc))?;
        }
        let matching = self.clauses_matching(info);
        let in_kernel: Vec<(usize, u16)> = self
            .user
            .files
            .kernel
            .get(&tag)
            .map(|k| {
                k.iter()
                    .filter(|(i, _)| matching.contains(i))
                    .copied()
                    .collect()
            })
            .unwrap_or_default();
        let in_dtrace: Vec<usize> = matching
            .iter()
            .copied()
            .filter(|i| !in_kernel.iter().any(|(k, _)| k == i))
            .collect();
        // (The firing's strtok() state is looked up by the file probe's name, not the process's
        // probe's: in the kernel at any probe, for this check.)
        self.check_in_dtrace(&in_dtrace, &desc.to_string(), None)?;
        self.user.files.serve(tag, pid, info.id);
        self.active.insert(info.id);
        // The clauses run in the kernel at the file probe run there for this process from now
        // on: the framework leaves them to it, the records they build carry their EPIDs here.
        for (i, n) in in_kernel {
            self.kernel_aggregated.insert((i, info.id));
            self.built_at.insert((i, info.id), n);
        }
        Ok(true)
    }

    /// Clauses `idx` run in dtrace at `probe`: none may use a D variable kept in the kernel
    /// (the firing's `strtok()` state: at `placed`, the probe as the placement names it; at any
    /// probe when `None`).
    fn check_in_dtrace(
        &self,
        idx: &[usize],
        probe: &str,
        placed: Option<&str>,
    ) -> std::result::Result<(), String> {
        for &i in idx {
            if let Some(v) = self.tvars[i]
                .iter()
                .find(|v| self.placement.keeps(v, placed))
            {
                return Err(format!(
                    "clause {}: {} lives in the kernel, where this clause cannot run at {probe} \
                     (planned after the programs that placed it there)",
                    self.kernel.get(i).map_or("?", |c| c.desc.as_str()),
                    v.name
                ));
            }
        }
        Ok(())
    }

    /// Places file probe `f` in the capture session for every process. The clauses that match
    /// its probe in every process and read no name that depends on the process (`probeprov`)
    /// run in the kernel as at a per-process probe (predicates, aggregations, records), for the
    /// processes whose probes dtrace has named ([`FileProbes::serve`] makes one known to the
    /// kernel); a firing in another process is handed over to dtrace whole, which names the
    /// process's probes and runs every clause on it. The other clauses run in dtrace, their
    /// predicates filtering in the kernel when none reads `probeprov`. A probe no clause asks
    /// for is not placed.
    fn enable_file_probe(&mut self, f: &FileProbe) -> std::result::Result<(), String> {
        let idx: Vec<usize> = self
            .clauses
            .iter()
            .enumerate()
            .filter(|(_, (d, _))| f.may_match(d))
            .map(|(i, _)| i)
            .collect();
        if idx.is_empty() {
            return Ok(());
        }
        let kernel_aggs = self.kernel_predicates
            && self.kernel_aggregations.is_ok()
            && self.exit_at_kernel_probe.is_none();
        // Why each clause stays in dtrace at this probe (the others may run in the kernel).
        let mut kept_out: Vec<(usize, String)> = Vec::new();
        let mut prov_readers = false;
        for &i in &idx {
            if self.ecb(i).is_some_and(reads_probeprov) {
                prov_readers = true;
                kept_out.push((
                    i,
                    "it reads probeprov, the firing process's provider, which only dtrace \
                     knows at a probe of every process"
                        .into(),
                ));
            } else if !f.matches_every_process(&self.clauses[i].0) {
                kept_out.push((
                    i,
                    "its description matches the probe in some processes only".into(),
                ));
            }
        }
        // As at a per-process probe: stores run in the kernel with the variables they store.
        let (k_idx, r_idx): (Vec<usize>, Vec<usize>) = idx.iter().partition(|&&i| {
            kernel_aggs
                && !kept_out.iter().any(|(k, _)| *k == i)
                && matches!(self.kplans.get(i),
                    Some(Ok(p)) if p.stores.is_empty() || self.placement.in_kernel(i)
                        || p.writes_user)
        });
        // A clause that uses a kernel variable runs in the kernel, or nothing runs.
        let at = f.probe.desc.to_string();
        self.check_in_dtrace(&r_idx, &at, Some(&at))?;
        let filter_off = prov_readers.then_some(
            "a predicate at the probe reads probeprov, the firing process's provider, which \
             only dtrace knows at a probe of every process",
        );
        let matching: Vec<&super::needs::ClauseNeeds> =
            idx.iter().map(|&i| &self.clauses[i].1).collect();
        let used = matching.iter().fold(0u16, |m, n| m | n.used_args);
        let string_args = super::string_args(&f.probe);
        let mut spec = super::needs::spec_for(&matching, (&string_args, false), self.strsize)?;
        if !self.kernel_predicates || prov_readers {
            spec.filter = None;
        }
        let others = if k_idx.is_empty() {
            None
        } else {
            let r: Vec<&super::needs::ClauseNeeds> =
                r_idx.iter().map(|&i| &self.clauses[i].1).collect();
            let mut o = super::needs::spec_for(&r, (&string_args, false), self.strsize)?;
            if prov_readers {
                o.filter = None;
            }
            Some(o)
        };
        if (spec.filter.is_some() || others.is_some()) && self.bypass.is_none() {
            let map = crate::bpf::Map::create(crate::bpf::MapKind::Array, "dt_nofilter", 4, 8, 1)
                .map_err(|e| e.to_string())?;
            self.bypass = Some(map);
        }
        let bypass = self.bypass.as_ref().map(|m| m.raw_fd());
        // The names the kernel knows: the provider is the kind (`python`), which no clause run
        // there reads.
        let d = &f.probe.desc;
        let names = dtrace_ebpf::translate::ProbeNames {
            provider: f.kind.clone(),
            module: d.module.clone(),
            function: d.function.clone(),
            name: d.name.clone(),
            syscall_return: false,
            id: dtrace_ebpf::translate::ProbeId::Shared,
        };
        let opaque_args = super::opaque_args(&f.probe);
        if let Some(k) = &mut spec.filter {
            k.place_at(&names, opaque_args, bypass);
        }
        if let Some(mut o) = others {
            if let Some(k) = &mut o.filter {
                k.place_at(&names, opaque_args, bypass);
            }
            let (mut aggs, numbers) = self.kernel_clauses(
                &k_idx,
                &r_idx,
                (o.filter, o.filter_pid),
                &names,
                opaque_args,
                bypass,
                &[&f.kind, &d.module, &d.function, &d.name],
                &at,
            )?;
            aggs.walk_key_frames(spec.ustack.filter(|_| !spec.ustack_build_id));
            aggs.known = Some(self.known_processes()?);
            aggs.missed = self.missed_announcements.as_ref().map(|m| m.raw_fd());
            self.user.files.kernel.insert(f.tag, numbers);
            spec.aggs = Some(aggs);
        }
        if spec.ustack.is_some() && !spec.ustack_build_id {
            spec.ustack_unwind = Some(crate::capture::spec::USTACK_UNWIND_BYTES);
        }
        let arg_copies = super::copies_of_args(&f.probe, used, &mut spec)?;
        if self.session.is_none() {
            self.session = Some(
                crate::session::Session::new(self.session_opts.clone())
                    .map_err(|e| e.to_string())?,
            );
        }
        let session = self
            .session
            .as_mut()
            .ok_or_else(|| "no capture session".to_string())?;
        session
            .enable(&f.probe, f.tag, &spec)
            .map_err(|e| e.to_string())?;
        let report = session.capture_report(f.tag).cloned().unwrap_or_default();
        if !arg_copies.is_empty() {
            self.arg_copies.insert(f.tag, arg_copies);
        }
        if spec.filter.is_some() || spec.aggs.is_some() {
            // A clause planned later that matches it turns the filters off.
            self.filtered.push(dtrace_framework::records::ProbeInfo {
                id: f.tag,
                provider: f.kind.clone(),
                module: d.module.clone(),
                function: d.function.clone(),
                name: d.name.clone(),
            });
        }
        // What `dtrace -v` reports for each clause; signals are sent by dtrace here.
        let probe_name = format!("{} in every process", f.probe.desc);
        let run_here = self.report_placement(
            &super::Placed {
                matching: &idx,
                kernel: &k_idx,
                others: &r_idx,
                report: &report,
                spec: &spec,
                kernel_aggs,
                at_kernel_probe: true,
                kept_out: &kept_out,
                filter_off,
            },
            &probe_name,
        )?;
        if let Some(numbers) = self.user.files.kernel.get_mut(&f.tag) {
            numbers.retain(|(i, _)| run_here.contains(i));
        }
        let why = "the probe fires for every process, whose names only dtrace knows";
        for &i in &idx {
            let Some(c) = self.kernel.get_mut(i) else {
                continue;
            };
            if c.signals.is_some() {
                c.signals_in_dtrace
                    .push((probe_name.clone(), why.to_string()));
            }
        }
        Ok(())
    }

    /// The map of the processes whose probes dtrace knows (see `KernelAggs::known`), made at
    /// first use.
    fn known_processes(&mut self) -> std::result::Result<i32, String> {
        if self.known_processes.is_none() {
            let map = crate::bpf::Map::create(
                crate::bpf::MapKind::LruHash,
                "dt_known_procs",
                8,
                1,
                KNOWN_PROCESSES,
            )
            .map_err(|e| e.to_string())?;
            let missed = crate::bpf::Map::create(
                crate::bpf::MapKind::LruHash,
                "dt_missed_procs",
                8,
                1,
                MISSED_ANNOUNCEMENTS,
            )
            .map_err(|e| e.to_string())?;
            self.known_processes = Some(map);
            self.missed_announcements = Some(missed);
        }
        self.known_processes
            .as_ref()
            .map(|m| m.raw_fd())
            .ok_or_else(|| "no map of known processes".to_string())
    }
}

/// (file probe, process) pairs the kernel remembers as known; one evicted is handed over to
/// dtrace again, which serves it as before (slower, not wrong).
const KNOWN_PROCESSES: u32 = 65536;

/// (file probe, process) pairs whose first firing the ring had no room for, noted between two
/// polls (see `KernelAggs::missed`).
const MISSED_ANNOUNCEMENTS: u32 = 8192;

/// The (tag, process) pairs noted in map `missed` (see `KernelAggs::missed`), taken out: one
/// noted again after it is read is taken by the next call.
fn take_missed(missed: &crate::bpf::Map) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for k in missed.keys().unwrap_or_default() {
        let _ = missed.delete(&k);
        let Some(key) = k
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_ne_bytes)
        else {
            continue;
        };
        out.push(((key >> 32) as u32, key as u32));
    }
    out
}

/// Whether `e` reads `probeprov` anywhere (its predicate or its actions).
pub(crate) fn reads_probeprov(e: &dtrace_dif::program::EcbDesc) -> bool {
    use dtrace_dif::instr::Instr;
    e.predicate
        .iter()
        .chain(e.actions.iter().filter_map(|a| a.difo.as_ref()))
        .any(|o| {
            o.text.iter().any(|w| {
                matches!(Instr::decode(*w),
                    Ok(Instr::LoadVar { op: dtrace_dif::opcode::Opcode::Ldgs, var, .. })
                        if u32::from(var) == dtrace_dif::vars::DIF_VAR_PROBEPROV)
            })
        })
}

impl super::LinuxTracing {
    /// Places the file probes found since the last call (see [`FileProbe`]); call after the
    /// programs naming them are enabled, before [`super::LinuxTracing::attach_pending`]. With
    /// `lenient` (files found while tracing), a probe that cannot be placed is left out.
    pub fn enable_file_probes(&self, lenient: bool) -> crate::error::Result<()> {
        let mut sh = self.lock();
        for f in sh.user.files.take_unenabled() {
            match sh.enable_file_probe(&f) {
                Ok(()) => {}
                Err(_) if lenient => {}
                Err(reason) => {
                    return Err(crate::error::LinuxError::BadProbe(format!(
                        "{} in every process: {reason}",
                        f.probe.desc
                    )))
                }
            }
        }
        Ok(())
    }

    /// Registers with `fw` the USDT providers of the processes whose file-probe events wait for
    /// their probes (`python<PID>`), their images read (or, for a process gone, made of the
    /// files that fired). Returns those processes: match the enabled descriptions again for
    /// them (`Framework::enable_new`), then [`super::LinuxTracing::fire_waiting`].
    pub fn adopt_new_processes(
        &self,
        fw: &mut dtrace_framework::Framework,
    ) -> crate::error::Result<Vec<u32>> {
        let unknown = {
            let mut sh = self.lock();
            // First firings whose records the ring had no room for name their processes too.
            let missed = sh
                .missed_announcements
                .as_ref()
                .map(take_missed)
                .unwrap_or_default();
            for (tag, pid) in missed {
                sh.user.files.note_unknown(tag, pid);
            }
            sh.user.files.take_unknown()
        };
        let mut pids = Vec::with_capacity(unknown.len());
        let mut names: Vec<String> = Vec::new();
        for (pid, fired) in unknown {
            let files: Vec<(String, bool)> =
                fired.iter().map(|f| (f.path.clone(), f.main)).collect();
            self.lock().user.late_image(pid, &files);
            for f in &fired {
                let name = format!("{}{pid}", f.kind);
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            pids.push(pid);
        }
        self.register_new(fw, names)?;
        Ok(pids)
    }

    /// Fires the file-probe events that waited for their processes' probes (those still without
    /// one are dropped). Returns how many fired.
    pub fn fire_waiting(&self, fw: &mut dtrace_framework::Framework) -> usize {
        let (waiting, offset) = {
            let mut sh = self.lock();
            (sh.user.files.take_waiting(), sh.clock_offset.unwrap_or(0))
        };
        self.fire_all(fw, waiting, offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::CapturedEvent;

    #[test]
    fn provider_globs_may_match_a_kind_with_any_pid() {
        assert!(may_match_kind("python*", "python"));
        assert!(may_match_kind("py*", "python"));
        assert!(may_match_kind("python1*", "python"));
        assert!(may_match_kind("python123", "python"));
        assert!(may_match_kind("*", "python"));
        assert!(!may_match_kind("pythonx*", "python"));
        assert!(!may_match_kind("ruby*", "python"));
        assert!(!may_match_kind("", "python"));
        assert_eq!(glob_prefix("py*n"), "py");
        assert!(is_file_tag(FILE_TAG_BASE) && !is_file_tag(FILE_TAG_BASE - 1));
    }

    fn probe(provider: &str, pid: u32, function: &str, offsets: &[u64]) -> Probe {
        Probe {
            desc: crate::ProbeDesc::new(provider, "app", function, "work-done"),
            args: Vec::new(),
            attach: AttachPoint::Uprobe {
                path: "/opt/app".into(),
                retprobe: false,
                pid,
                sites: offsets
                    .iter()
                    .map(|&offset| crate::catalog::UserSite {
                        offset,
                        args: Vec::new(),
                        ref_ctr_offset: 0x4000,
                    })
                    .collect(),
            },
        }
    }

    fn event(tag: u32, pid: u32) -> Box<CapturedEvent> {
        Box::new(CapturedEvent {
            tag,
            pid,
            tid: pid,
            ppid: 1,
            ..Default::default()
        })
    }

    #[test]
    fn a_file_probe_covers_the_same_sites_of_the_same_file_in_any_process() {
        let mut files = FileProbes::default();
        files.add("myapp", true, probe("myapp", 0, "main", &[0x10, 0x20]));
        // Known already: not added twice.
        files.add("myapp", true, probe("myapp", 0, "main", &[0x10, 0x20]));
        assert_eq!(files.len(), 1);
        let tag = FILE_TAG_BASE;
        assert_eq!(
            files.covering("myapp", &probe("myapp12", 12, "main", &[0x10, 0x20])),
            Some(tag)
        );
        // Other sites, another function or another provider: not covered.
        assert_eq!(
            files.covering("myapp", &probe("myapp12", 12, "main", &[0x10])),
            None
        );
        assert_eq!(
            files.covering("myapp", &probe("myapp12", 12, "other", &[0x10, 0x20])),
            None
        );
        assert_eq!(
            files.covering("other", &probe("other12", 12, "main", &[0x10, 0x20])),
            None
        );
        let f = &files.take_unenabled()[0];
        assert!(files.take_unenabled().is_empty());
        let d = |p: &str, m: &str| dtrace_dif::program::ProbeDesc {
            provider: p.into(),
            module: m.into(),
            function: String::new(),
            name: "work-done".into(),
        };
        assert!(f.may_match(&d("myapp*", "")));
        assert!(f.may_match(&d("myapp*", "a.out")));
        assert!(f.may_match(&d("my*", "app")));
        assert!(!f.may_match(&d("myapp*", "libc")));
        assert!(!f.may_match(&d("ruby*", "")));
    }

    #[test]
    fn events_of_unknown_processes_wait_once() {
        let mut files = FileProbes::default();
        files.add("myapp", false, probe("myapp", 0, "main", &[0x10]));
        let tag = FILE_TAG_BASE;
        files.hold(Delivery::Event(event(tag, 7)), tag, 7);
        files.hold(Delivery::Event(event(tag, 7)), tag, 7);
        files.hold(Delivery::Event(event(tag, 8)), tag, 8);
        let unknown = files.take_unknown();
        assert_eq!(unknown.len(), 2);
        assert_eq!(unknown[0].0, 7);
        assert_eq!(unknown[0].1.len(), 1);
        assert_eq!(unknown[0].1[0].path, "/opt/app");
        assert_eq!(unknown[0].1[0].kind, "myapp");
        assert_eq!(files.take_waiting().len(), 3);
        files.serve(tag, 7, 42);
        assert_eq!(files.served_map().get(&(tag, 7)), Some(&42));
        // Process 8 was adopted but got no probe: its later events are dropped, not held.
        files.hold(Delivery::Event(event(tag, 8)), tag, 8);
        assert!(files.take_unknown().is_empty());
        assert!(files.take_waiting().is_empty());
    }
}
