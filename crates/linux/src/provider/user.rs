//! Per-process providers (`pid<PID>`, and USDT providers such as `python<PID>`) as framework
//! providers: one is registered for each process a program's descriptions name, when the program
//! is planned ([`LinuxTracing::prepare_user`]); its probes are created when a description asks
//! for them, from the process's mapped objects ([`crate::catalog::pid::ProcessImage`]), and kept
//! here for the shared enabling path of [`super::Shared`].

use super::file_usdt::{self, FileProbes};
use super::proc_scan::{self, ProcessObjects, ScanCache};
use super::LinuxTracing;
use crate::catalog::pid::{split_provider, MappedObject, ProcessImage};
use crate::catalog::{glob, Probe, ProbeDesc};
use crate::error::{LinuxError, Result};
use crate::rlc::RunOnClose;
use crate::rtld::{LinkerWatch, RtldWatch};
use dtrace_dif::program::ProbeDesc as DifProbeDesc;
use dtrace_framework::provider::{
    ArgDesc, Attribute, DepClass, ProbeSink, ProviderAttributes, ProviderError, Stability,
};
use dtrace_framework::records::ProbeInfo;
use dtrace_framework::{Framework, Provider};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The user-space probes created so far, and the images of the processes they come from.
#[derive(Default)]
pub(crate) struct UserProbes {
    probes: HashMap<ProbeDesc, Probe>,
    images: HashMap<u32, Arc<ProcessImage>>,
    registered: HashSet<String>,
    /// USDT providers of each object file looked at by a provider glob.
    file_providers: HashMap<String, Vec<String>>,
    /// The run-time linker hook of each traced process (see [`crate::rtld`]).
    watches: HashMap<u32, RtldWatch>,
    /// Provider globs of the enabled descriptions (`python*`): a library a traced process loads
    /// later is matched against them.
    globs: Vec<String>,
    /// What lets the processes the hooks stop run on if dtrace dies (after `watches`, so it
    /// stands down only once they are out).
    rlc: Option<RunOnClose>,
    /// The USDT probes placed on files for every process (see [`super::file_usdt`]).
    pub(crate) files: FileProbes,
    /// The enabled descriptions whose provider is a glob with a literal prefix (`python*:::`):
    /// the files of processes started later are matched against them.
    glob_descs: Vec<ProbeDesc>,
    /// The processes whose objects have been looked at for USDT probes, with the executable
    /// each ran then (one that has exec'd since is looked at again).
    scanned: HashMap<u32, Option<std::path::PathBuf>>,
    /// When processes were last looked at for new files ([`UserProbes::discover_files`]).
    last_scan: Option<std::time::Instant>,
    /// Each object file a looked-at process maps, with the hook placed on it when it is a
    /// run-time linker (`None` otherwise): a process looked at before that loads a library is
    /// looked at again.
    linkers: HashMap<String, Option<LinkerWatch>>,
    /// The processes and their objects as the enabling under way first read them, shared by
    /// every provider glob it looks at.
    procs: ScanCache,
}

/// How often the processes started since the last look are looked at for object files with
/// USDT probes a provider glob matches.
const DISCOVERY_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

impl UserProbes {
    /// A created probe.
    pub(crate) fn get(&self, desc: &ProbeDesc) -> Option<&Probe> {
        self.probes.get(desc)
    }

    /// The stability of per-process provider `provider` (`myprov1234`) where the objects of its
    /// process declare it (DOF providers), as far as they have been read.
    fn stability(&self, provider: &str) -> Option<ProviderAttributes> {
        let (kind, pid) = split_provider(provider)?;
        self.images
            .get(&pid)?
            .objects
            .iter()
            .flat_map(|o| &o.usdt)
            .find(|s| s.provider == kind && s.stability.is_some())?
            .stability
    }

    /// The image of `pid`, read at the first asking.
    fn image(&mut self, pid: u32) -> Result<Arc<ProcessImage>> {
        if let Some(i) = self.images.get(&pid) {
            return Ok(i.clone());
        }
        let i = Arc::new(ProcessImage::read(pid)?);
        self.images.insert(pid, i.clone());
        Ok(i)
    }

    /// The linker hooks placed so far and their run-on-close helper, taken out: dropping them
    /// in that order removes the hooks, resumes what they stopped, then stands the helper down.
    pub(crate) fn take_watches(&mut self) -> (HashMap<u32, RtldWatch>, Option<RunOnClose>) {
        (std::mem::take(&mut self.watches), self.rlc.take())
    }

    /// The run-on-close helper, started at the first need.
    fn rlc(&mut self) -> Result<&RunOnClose> {
        if self.rlc.is_none() {
            self.rlc = Some(RunOnClose::start()?);
        }
        self.rlc
            .as_ref()
            .ok_or_else(|| LinuxError::Process("run-on-close helper".into()))
    }

    /// Places the linker hook of process `pid` (its image read), if its objects have one.
    fn watch(&mut self, pid: u32) -> Result<()> {
        if self.watches.contains_key(&pid) {
            return Ok(());
        }
        let Some(image) = self.images.get(&pid).cloned() else {
            return Ok(());
        };
        let Some(site) = RtldWatch::site(&image) else {
            return Ok(());
        };
        let w = match RtldWatch::place(&image, site, self.rlc()?) {
            Ok(w) => w,
            // Gone since its objects were read (a process a provider glob found): it loads
            // nothing more.
            Err(LinuxError::NoProcess(_)) => {
                self.images.remove(&pid);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        self.watches.insert(pid, w);
        Ok(())
    }

    /// The USDT providers of the object file at `path` (read once).
    fn file_providers(&mut self, path: &str) -> &[String] {
        self.file_providers
            .entry(path.to_string())
            .or_insert_with(|| {
                let mut v: Vec<String> = Vec::new();
                for s in crate::catalog::usdt::read_sites(path).unwrap_or_default() {
                    if !v.contains(&s.provider) {
                        v.push(s.provider);
                    }
                }
                v
            })
    }

    /// The USDT providers (`python1234`) of the objects process `pid` maps that match an enabled
    /// glob. The file probes of those objects are added too (placed by the next
    /// [`LinuxTracing::enable_file_probes`]), so the process's probes are served from them: a
    /// library it loaded fires once for it, and in every process that maps it.
    fn glob_providers_of(&mut self, pid: u32) -> Vec<String> {
        let globs = self.globs.clone();
        let mut out = Vec::new();
        let mut files = Vec::new();
        let Some(process) = ProcessObjects::read(pid) else {
            return out;
        };
        for g in &globs {
            for name in self.usdt_providers_and_files_in(&process, g, &mut files) {
                if !out.contains(&name) {
                    out.push(name);
                }
            }
        }
        for d in self.glob_descs.clone() {
            self.add_file_probes(&d, &files);
        }
        out
    }

    /// The USDT providers (`python1234`) of the objects `process` maps that match provider
    /// glob `pattern`, adding to `files` each object (path, whether it is the process's
    /// executable) with a USDT provider the glob may name in some process.
    fn usdt_providers_and_files_in(
        &mut self,
        process: &ProcessObjects,
        pattern: &str,
        files: &mut Vec<(String, bool)>,
    ) -> Vec<String> {
        let mut out = Vec::new();
        let pid = process.process.pid;
        for path in &process.objects {
            let mut wanted = false;
            for p in self.file_providers(path) {
                wanted |= file_usdt::may_match_kind(pattern, p);
                let name = format!("{p}{pid}");
                if glob::matches(pattern, &name) && !out.contains(&name) {
                    out.push(name);
                }
            }
            if wanted && !files.iter().any(|(f, _)| f == path) {
                files.push((path.clone(), process.is_main(path)));
            }
            self.watch_linker(pid, path);
        }
        out
    }

    /// Hooks object file `path` of process `pid` for every process when it is a run-time
    /// linker (once per file; one whose hook cannot be placed is left unwatched: its processes'
    /// later libraries are then found only by a process that maps them from its start).
    fn watch_linker(&mut self, pid: u32, path: &str) {
        if self.linkers.contains_key(path) {
            return;
        }
        let watch = if LinkerWatch::may_be_linker(path) {
            LinkerWatch::place(pid, path).ok().flatten()
        } else {
            None
        };
        self.linkers.insert(path.to_string(), watch);
    }

    /// Adds the file probes of description `d` (its provider a glob) in the object files
    /// `files` (path, whether a process runs it as its executable): every USDT probe of a
    /// provider the glob may name whose module, function and name it matches.
    fn add_file_probes(&mut self, d: &ProbeDesc, files: &[(String, bool)]) {
        for (path, main) in files {
            let Some(obj) = MappedObject::load(path, *main) else {
                continue;
            };
            let image = ProcessImage {
                pid: crate::uprobe::EVERY_PROCESS,
                objects: vec![obj],
            };
            for kind in image.usdt_providers() {
                if !file_usdt::may_match_kind(&d.provider, kind) {
                    continue;
                }
                for p in image.usdt_probes(kind, kind, d) {
                    self.files.add(kind, *main, p);
                }
            }
        }
    }

    /// How long until [`UserProbes::discover_files`] looks again (`None`: no provider glob
    /// asks it to).
    pub(crate) fn time_to_next_look(&self) -> Option<std::time::Duration> {
        (!self.glob_descs.is_empty()).then(|| {
            self.last_scan.map_or(std::time::Duration::ZERO, |t| {
                DISCOVERY_INTERVAL.saturating_sub(t.elapsed())
            })
        })
    }

    /// The doorbell the linker hooks ring once they stopped a process (see
    /// [`RunOnClose::emit_ring`]), for a wait on it; `None` before the first hook. It is
    /// emptied by [`LinuxTracing::loads_changed`] before the counts are read, so a ring that
    /// follows the read keeps it readable.
    pub(crate) fn doorbell(&self) -> Option<std::os::fd::RawFd> {
        self.rlc.as_ref().map(RunOnClose::doorbell_fd)
    }

    /// Looks at the processes started since the last look (at most every
    /// [`DISCOVERY_INTERVAL`]) for object files with USDT probes an enabled provider glob may
    /// name, and adds their file probes. Whether any was added.
    fn discover_files(&mut self) -> bool {
        if self.glob_descs.is_empty()
            || self
                .last_scan
                .is_some_and(|t| t.elapsed() < DISCOVERY_INTERVAL)
        {
            return false;
        }
        self.last_scan = Some(std::time::Instant::now());
        // A process whose linker changed its objects since the last look (a library loaded) is
        // looked at again, after the change.
        for w in self.linkers.values().flatten() {
            for pid in w.take_changed() {
                self.scanned.remove(&pid);
            }
        }
        let mut live = HashMap::new();
        let mut files: Vec<(String, bool)> = Vec::new();
        let descs = self.glob_descs.clone();
        for process in proc_scan::list() {
            // A process is looked at again when it runs another program (a shell's child that
            // was looked at between its fork and its exec).
            let known = self.scanned.get(&process.pid) == Some(&process.exe);
            live.insert(process.pid, process.exe.clone());
            if known {
                continue;
            }
            let Some(objects) = ProcessObjects::of(process) else {
                continue;
            };
            for d in &descs {
                self.usdt_providers_and_files_in(&objects, &d.provider, &mut files);
            }
        }
        // A process id seen again later is a new process.
        self.scanned = live;
        let before = self.files.len();
        for d in &descs {
            self.add_file_probes(d, &files);
        }
        self.files.len() > before
    }

    /// The image of process `pid`, which fired probes of the object files `files` (path, whether
    /// it was found as an executable) before it was known: its mappings while it lives (read
    /// again if they lack one of those files), else those files alone.
    pub(crate) fn late_image(&mut self, pid: u32, files: &[(String, bool)]) {
        let has_all = |i: &ProcessImage| {
            files
                .iter()
                .all(|(f, _)| i.objects.iter().any(|o| o.table.path == *f))
        };
        let old = self.images.get(&pid).cloned();
        if old.as_deref().is_some_and(has_all) {
            return;
        }
        let read = ProcessImage::read_again(pid, old.as_deref())
            .ok()
            .filter(|i| has_all(i));
        let image = read.unwrap_or_else(|| {
            let mut objects: Vec<MappedObject> = old.map(|i| i.objects.clone()).unwrap_or_default();
            for (path, main) in files {
                if objects.iter().any(|o| o.table.path == *path) {
                    continue;
                }
                if let Some(o) = MappedObject::load(path, *main) {
                    objects.push(o);
                }
            }
            ProcessImage { pid, objects }
        });
        self.images.insert(pid, Arc::new(image));
    }

    /// Reads the objects of `pid` again (its run-time linker changed them); the objects it still
    /// maps are kept from the earlier reading.
    fn reread(&mut self, pid: u32) -> Result<()> {
        let old = self.images.get(&pid).cloned();
        let i = Arc::new(ProcessImage::read_again(pid, old.as_deref())?);
        self.images.insert(pid, i);
        Ok(())
    }

    /// The USDT providers (`python1234`) of every process that match provider glob `pattern`,
    /// found from the notes of the objects each process maps (as the enabling under way first
    /// read them); the objects with providers the glob may name are added to `files`.
    fn usdt_providers_matching(
        &mut self,
        pattern: &str,
        files: &mut Vec<(String, bool)>,
    ) -> Vec<String> {
        let mut out = Vec::new();
        let scan = self.procs.get();
        for process in &scan.processes {
            self.scanned
                .insert(process.process.pid, process.process.exe.clone());
            for name in self.usdt_providers_and_files_in(process, pattern, files) {
                if !out.contains(&name) {
                    out.push(name);
                }
            }
        }
        out
    }

    /// The enabling under way has ended: the next one reads the processes again.
    pub(crate) fn end_enabling(&mut self) {
        self.procs.forget();
    }

    /// How many times the processes were read for enablings (for tests).
    pub(crate) fn process_scans(&self) -> usize {
        self.procs.reads()
    }

    /// The file probes (see [`super::file_usdt`]) description `d` may match, its provider a
    /// glob with a literal prefix (`myapp*`): those of the files the running processes map,
    /// added now if not yet known.
    pub(crate) fn file_probes_for(&mut self, d: &DifProbeDesc) -> Vec<file_usdt::FileProbe> {
        let mut files = Vec::new();
        self.usdt_providers_matching(&d.provider, &mut files);
        let pattern = ProbeDesc::new(&d.provider, &d.module, &d.function, &d.name);
        self.add_file_probes(&pattern, &files);
        self.files.matching(d).cloned().collect()
    }

    /// The USDT probes of per-process provider description `desc`, for typing `args[]` while a
    /// program compiles (`None` for `pid` probes, which have no declared types, or when the process
    /// cannot be read). The image read here is not kept: a process started with `-c` has not
    /// mapped its libraries yet, and its probes are created from a later reading.
    pub(crate) fn matching_for_types(&mut self, desc: &ProbeDesc) -> Option<Vec<Probe>> {
        let (kind, pid) = split_provider(&desc.provider)?;
        if kind == "pid" {
            return None;
        }
        let image = match self.images.get(&pid) {
            Some(i) => i.clone(),
            None => Arc::new(ProcessImage::read(pid).ok()?),
        };
        Some(image.usdt_probes(&desc.provider, kind, desc))
    }

    /// The probes of `provider` (a per-process provider's full name) matching `pattern`.
    pub(crate) fn matching(&mut self, provider: &str, pattern: &ProbeDesc) -> Result<Vec<Probe>> {
        let Some((kind, pid)) = split_provider(provider) else {
            return Ok(Vec::new());
        };
        // A probe already created is found by its name (a `-` probe is named for its function
        // and address, which are not a description of it).
        if let Some(p) = self.probes.get(pattern) {
            return Ok(vec![p.clone()]);
        }
        let image = self.image(pid)?;
        let found = if kind == "pid" {
            image.probes(provider, pattern)?
        } else {
            image.usdt_probes(provider, kind, pattern)
        };
        for p in &found {
            self.probes.insert(p.desc.clone(), p.clone());
        }
        Ok(found)
    }
}

use file_usdt::glob_prefix;

/// The process of the pid provider that provider glob `pattern` names (`p*d123` → 123).
fn glob_pid_provider(pattern: &str) -> Option<u32> {
    let (_, pid) = split_provider(pattern)?;
    glob::matches(pattern, &format!("pid{pid}")).then_some(pid)
}

/// Whether provider description `provider` may name a per-process provider of one of `pids`
/// (`pid123`, `python123`, `p*d123`, or a glob without a process id such as `*`).
pub fn may_name_process(provider: &str, pids: &[u32]) -> bool {
    match split_provider(provider) {
        Some((_, pid)) => pids.contains(&pid),
        None => provider.is_empty() || glob::has_meta(provider),
    }
}

/// Whether `provider` names a per-process provider (`pid123`, `python123`).
fn per_process(provider: &str) -> bool {
    split_provider(provider).is_some()
}

impl LinuxTracing {
    /// Registers with `fw` the per-process providers `descs` name (`pid1234`) and returns the
    /// descriptions as the framework must see them (module aliases such as `a.out` and `libc`
    /// replaced by the object's name). A process that does not exist, or a probe that cannot be placed (an offset inside an
    /// instruction), is an error.
    pub fn prepare_user(
        &self,
        fw: &mut Framework,
        descs: &[DifProbeDesc],
    ) -> Result<Vec<DifProbeDesc>> {
        let mut out = Vec::with_capacity(descs.len());
        for d in descs {
            if glob::has_meta(&d.provider) && !glob_prefix(&d.provider).is_empty() {
                // `python*`: the USDT providers of every process whose objects have them; and
                // `p*d123`: the pid provider of process 123, as DTrace tries `pid<digits>`
                // against a glob ending in a process id.
                let mut names = {
                    let mut sh = self.lock();
                    if !sh.user.globs.contains(&d.provider) {
                        sh.user.globs.push(d.provider.clone());
                    }
                    let mut files = Vec::new();
                    let names = sh.user.usdt_providers_matching(&d.provider, &mut files);
                    // The files' probes fire in processes started from now on too.
                    let pattern = ProbeDesc::new(&d.provider, &d.module, &d.function, &d.name);
                    sh.user.add_file_probes(&pattern, &files);
                    if !sh.user.glob_descs.contains(&pattern) {
                        sh.user.glob_descs.push(pattern);
                    }
                    names
                };
                if let Some(pid) = glob_pid_provider(&d.provider) {
                    self.lock().user.image(pid)?;
                    names.push(format!("pid{pid}"));
                }
                self.register_new(fw, names)?;
            }
            let mut d = d.clone();
            if per_process(&d.provider) {
                let pattern = ProbeDesc::new(&d.provider, &d.module, &d.function, &d.name);
                let (image, newly) = {
                    let mut sh = self.lock();
                    let Some((_, pid)) = split_provider(&d.provider) else {
                        continue;
                    };
                    let image = sh.user.image(pid)?;
                    // Validates the description (offsets on instruction boundaries).
                    sh.user.matching(&d.provider, &pattern)?;
                    (image, sh.user.registered.insert(d.provider.clone()))
                };
                if let Some(m) = image.module_alias(&d.module) {
                    d.module = m.to_string();
                }
                // `-`: the probe is named for the function holding the address.
                if let Some((m, f)) = image.address_names(&pattern) {
                    (d.module, d.function) = (m, f);
                }
                // A function named by an alias: its probes are named for its address's name.
                if let Some(f) = image.canonical_function(&pattern) {
                    d.function = f;
                }
                if newly {
                    fw.register_provider(Box::new(UserProvider {
                        name: d.provider.clone(),
                        shared: self.clone(),
                    }))
                    .map_err(|e| LinuxError::BadProbe(e.to_string()))?;
                }
            }
            out.push(d);
        }
        Ok(out)
    }
}

impl LinuxTracing {
    /// An enabling (a program's descriptions prepared, planned and enabled) has ended: the
    /// processes its provider globs were matched against, read from `/proc` once for all of
    /// them, are read again by the next one (see [`super::proc_scan`]). Tracing going live ends
    /// one too.
    pub fn end_enabling(&self) {
        self.lock().user.end_enabling();
    }

    /// How many times enablings have read the running processes to match provider globs.
    pub fn process_scans(&self) -> usize {
        self.lock().user.process_scans()
    }

    /// Looks for object files with USDT probes an enabled provider glob names in the processes
    /// started since the last look (every 100 ms at most), and places their file probes (see
    /// [`super::file_usdt`]): the processes that map them from then on fire them. Call at each
    /// poll while tracing. A file whose probes cannot be placed (gone, or an instruction uprobes
    /// refuse) is left out: tracing goes on.
    pub fn discover_files(&self) -> Result<()> {
        if !self.lock().user.discover_files() {
            return Ok(());
        }
        self.enable_file_probes(true)?;
        // On an error the probes not yet placed are dropped (see `Session::attach_pending`).
        let _ = self.attach_pending();
        Ok(())
    }

    /// Hooks the run-time linker of every process a per-process provider names (see
    /// [`crate::rtld`]), once per process: the libraries it loads from now on get their probes
    /// before their code runs. A process without a linker hook (a static program that cannot
    /// `dlopen`) loads nothing later.
    /// The processes are held (`-c`, `-p`): the ranges of the objects they map are loaded for
    /// the user stacks walked at the probe first (see [`LinuxTracing::load_walk_ranges`]).
    pub fn watch_loads(&self) -> Result<()> {
        let pids: Vec<u32> = {
            let mut sh = self.lock();
            let user = &mut sh.user;
            let pids: Vec<u32> = user.images.keys().copied().collect();
            for &pid in &pids {
                user.watch(pid)?;
            }
            pids
        };
        self.load_walk_ranges(&pids);
        Ok(())
    }

    /// Prepares for the first firings of processes `pids`, which `-c` or `-p` hold until
    /// tracing goes: the ranges of the objects they map are loaded for the user stacks walked
    /// at the probe (see [`LinuxTracing::load_walk_ranges`]), as for the processes a provider
    /// names, whatever the probes (`syscall::write:entry /pid == $target/ { @[ustack()] =
    /// count(); }` lost its first firings, handed over until dtrace loaded the ranges).
    pub fn prepare_held(&self, pids: &[u32]) {
        self.load_walk_ranges(pids);
    }

    /// Loads the ranges of the objects processes `pids` map (each held by dtrace: stopped by
    /// `-c`/`-p` or in its linker) for the user stacks walked at the probe (see
    /// [`super::ustack_maps`]), so that their firings are walked there from the first on. Else
    /// a program's first firings are handed over with their stacks until dtrace loads the ranges
    /// at the first it reads, and a program that calls a traced function in a loop at once
    /// fills the ring with them in milliseconds (those firings are then drops).
    fn load_walk_ranges(&self, pids: &[u32]) {
        if pids.is_empty() || self.lock().ustack_maps.is_none() {
            return;
        }
        let mut syms = self.lock_symbols();
        let mut sh = self.lock();
        let now = super::deliver::monotonic_ns();
        if let Some(m) = sh.ustack_maps.as_mut() {
            for &pid in pids {
                // A process whose ranges cannot be loaded has its firings handed over.
                let _ = m.load(&mut syms, pid, now);
            }
        }
    }

    /// Registers with `fw` the USDT providers of processes `pids` that an enabled provider glob
    /// names and that are not registered yet (a library a process loaded).
    pub fn register_glob_providers(&self, fw: &mut Framework, pids: &[u32]) -> Result<()> {
        for &pid in pids {
            let names = self.lock().user.glob_providers_of(pid);
            self.register_new(fw, names)?;
        }
        // The new objects' file probes first: the processes' probes are served from them.
        self.enable_file_probes(true)
    }

    /// Registers with `fw` each user provider of `names` not registered yet.
    pub(crate) fn register_new(&self, fw: &mut Framework, names: Vec<String>) -> Result<()> {
        for name in names {
            if self.lock().user.registered.insert(name.clone()) {
                fw.register_provider(Box::new(UserProvider {
                    name,
                    shared: self.clone(),
                }))
                .map_err(|e| LinuxError::BadProbe(e.to_string()))?;
            }
        }
        Ok(())
    }

    /// The processes whose run-time linker changed their objects since the last call: each is
    /// stopped in the linker, and its objects are read again, so the descriptions matched now see
    /// the new ones. Call [`LinuxTracing::resume_loads`] with them once their probes are placed.
    pub fn loads_changed(&self) -> Vec<u32> {
        let mut sh = self.lock();
        let user = &mut sh.user;
        // The rings answered here are those of the counts read next.
        if let Some(rlc) = user.rlc.as_mut() {
            rlc.answer_doorbell();
        }
        let mut changed = Vec::new();
        for (pid, w) in user.watches.iter_mut() {
            if w.changed() {
                changed.push(*pid);
            }
        }
        changed.retain(|&pid| {
            // A process that is gone has nothing to trace: drop its hook.
            if user.reread(pid).is_ok() {
                return true;
            }
            user.images.remove(&pid);
            user.watches.remove(&pid);
            false
        });
        changed
    }

    /// Lets the processes [`LinuxTracing::loads_changed`] returned go on, once the ranges of
    /// the objects they now map are loaded for the user stacks walked at the probe (see
    /// [`LinuxTracing::load_walk_ranges`]).
    pub fn resume_loads(&self, pids: &[u32]) {
        self.load_walk_ranges(pids);
        let sh = self.lock();
        for &pid in pids {
            match &sh.user.rlc {
                Some(rlc) => rlc.let_go(pid),
                // A process that is gone has nothing to resume.
                None => {
                    let _ = crate::process::continue_process(pid);
                }
            }
        }
    }
}

/// One per-process provider, as the framework sees it.
struct UserProvider {
    name: String,
    shared: LinuxTracing,
}

impl Provider for UserProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn attributes(&self) -> ProviderAttributes {
        use DepClass::*;
        use Stability::*;
        if let Some(declared) = self.shared.lock().user.stability(&self.name) {
            return declared;
        }
        let a = |n, d, c| Attribute::new(n, d, c);
        ProviderAttributes {
            provider: a(Evolving, Evolving, Isa),
            module: a(Private, Private, Unknown),
            function: a(Private, Private, Unknown),
            name: a(Evolving, Evolving, Isa),
            args: a(Private, Private, Unknown),
        }
    }

    fn provide(&mut self, desc: Option<&DifProbeDesc>, sink: &mut ProbeSink<'_>) {
        // Probes are created only when asked for: a process has far too many to list up front.
        let Some(d) = desc else { return };
        let pattern = ProbeDesc::new(&self.name, &d.module, &d.function, &d.name);
        let found = self.shared.lock().user.matching(&self.name, &pattern);
        // Errors were reported when the program was prepared; a description that no longer
        // resolves creates nothing.
        for p in found.unwrap_or_default() {
            sink.create(&p.desc.module, &p.desc.function, &p.desc.name);
        }
    }

    fn enable(&mut self, probe: &ProbeInfo) -> std::result::Result<(), ProviderError> {
        self.shared.lock().enable_for_framework(probe)
    }

    fn disable(&mut self, probe: &ProbeInfo) {
        self.shared.lock().active.remove(&probe.id);
    }

    fn arg_desc(&self, probe: &ProbeInfo, index: u32) -> Option<ArgDesc> {
        let sh = self.shared.lock();
        let desc =
            crate::ProbeDesc::new(&probe.provider, &probe.module, &probe.function, &probe.name);
        super::arg_desc_of(sh.user.get(&desc)?, index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_descriptions_name_processes() {
        assert!(may_name_process("pid12", &[12]));
        assert!(may_name_process("python12", &[7, 12]));
        assert!(!may_name_process("pid13", &[12]));
        assert!(!may_name_process("syscall", &[12]));
        assert!(may_name_process("", &[12]));
        assert!(may_name_process("python*", &[12]));
        assert_eq!(glob_pid_provider("p*d12"), Some(12));
        assert_eq!(glob_pid_provider("py*12"), None);
        assert_eq!(glob_pid_provider("p*d"), None);
    }
}
