//! `dtrace(1)`: parses DTrace's command line, sets options (from `DTRACE_OPT_*`, `-x` and the short
//! flags), compiles each `-n/-P/-m/-f/-i` description and `-s` script with the macro arguments, enables
//! them with DTrace's status lines, runs until `exit()`, a signal or the end of `-c` commands, prints the
//! aggregations, and exits with DTrace's statuses: the `exit()` value, 1 on error, 2 on usage errors.

mod args;
mod coredump;
mod header;
mod link;
mod metrics;
mod oformat;
mod output;
mod procs;
mod signals;
mod usage;

use std::io::Write;
use std::process::ExitCode;

use dtrace_compiler::{CompileError, ErrTag};
use dtrace_consumer::error::ConsumerError;
use dtrace_consumer::handle::{CompileFlags, Handle, ProbeSpec, WorkStatus};
use dtrace_consumer::listing;
use dtrace_consumer::oformat::OFormat;
use dtrace_consumer::options::Options;
use dtrace_consumer::proginfo::stability_report;

/// Exit status for errors (`E_ERROR`).
const E_ERROR: u8 = 1;
/// Set to 1: at the end of a run, how many times the main loop woke from its waits is reported
/// on stderr (`dtrace: N wake-ups`), to show that an idle run sleeps.
const REPORT_WAKEUPS_ENV: &str = "DTRACE_REPORT_WAKEUPS";
/// Exit status for usage errors (`E_USAGE`).
pub(crate) const E_USAGE: u8 = 2;

fn pname() -> String {
    std::env::args()
        .next()
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "dtrace".to_string())
}

pub(crate) fn fatal(msg: &str) -> ExitCode {
    eprintln!("dtrace: {msg}");
    ExitCode::from(E_ERROR)
}

fn main() -> ExitCode {
    let pname = pname();
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.is_empty() {
        eprint!("{}", usage::usage(&pname));
        return ExitCode::from(E_USAGE);
    }
    let cfg = match args::parse(&argv) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{pname}: {e}");
            eprint!("{}", usage::usage(&pname));
            return ExitCode::from(E_USAGE);
        }
    };
    if cfg.modes > 1 {
        eprintln!("{pname}: only one of the [-AGhlV] options can be specified at a time");
        return ExitCode::from(E_USAGE);
    }
    if cfg.version {
        println!("{pname}: {}", usage::VERSION);
        return ExitCode::SUCCESS;
    }
    let code = run(&pname, cfg);
    coredump::force_if_requested();
    code
}

/// The text and kind a `-n/-P/-m/-f/-i` argument compiles as. DTrace's lexer reads a specifier that
/// starts with a decimal number as a probe identifier (`dt_node_pdesc_by_id`), for `-i` and `-n`
/// alike: the number becomes that probe's full description, and text that goes on the description
/// is a further description (`4-2` is probe 4 and `:::-2`). Other arguments (`-i i23`) compile
/// unchanged, `-i` as a probe name.
fn specifier(h: &mut Handle, kind: char, arg: &str) -> Result<(String, ProbeSpec), String> {
    let spec = spec_of(kind);
    let t = arg.trim_start();
    let end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, rest) = t.split_at(end);
    if digits.is_empty() {
        return Ok((arg.to_string(), spec));
    }
    let what = match kind {
        'P' => Some("providers"),
        'm' => Some("modules"),
        'f' => Some("functions"),
        _ => None,
    };
    if let Some(what) = what {
        return Err(format!(
            "probe identifier {digits} not permitted when specifying {what}"
        ));
    }
    let unknown = || format!("invalid probe identifier {digits}: Unknown probe identifier");
    let id: u32 = digits.parse().map_err(|_| unknown())?;
    let all = h
        .list_probes(&dtrace_dif::program::ProbeDesc::default())
        .map_err(|e| e.to_string())?;
    let p = all.iter().find(|p| p.id == id).ok_or_else(unknown)?;
    let desc = format!("{}:{}:{}:{}", p.provider, p.module, p.function, p.name);
    let more =
        rest.starts_with(|c: char| !c.is_whitespace() && !matches!(c, '/' | '{' | ',' | ';'));
    let sep = if more { "," } else { "" };
    Ok((format!("{desc}{sep}{rest}"), ProbeSpec::Name))
}

/// What DTrace says when it may not trace the kernel (`dtrace_open` failing with `EDT_NOPERM`'s
/// message).
const NO_PRIVILEGES: &str = "failed to initialize dtrace: DTrace requires additional privileges";

/// Whether `e` is a description matching no probes because the kernel's probes could not be read
/// for want of privileges (BEGIN, END and tick-N still run unprivileged).
fn unprivileged(e: &dtrace_consumer::error::ConsumerError) -> bool {
    dtrace_open::backend::kernel_denied() && e.to_string().contains("does not match any probes")
}

pub(crate) fn spec_of(kind: char) -> ProbeSpec {
    match kind {
        'P' => ProbeSpec::Provider,
        'm' => ProbeSpec::Module,
        'f' => ProbeSpec::Function,
        _ => ProbeSpec::Name,
    }
}

fn run(pname: &str, cfg: args::Config) -> ExitCode {
    if let Some(c) = cfg.unsupported.first() {
        let what = match c {
            'a' => "claiming anonymous tracing state",
            'A' => "anonymous tracing directives",
            _ => "this option",
        };
        return fatal(&format!("-{c}: not yet supported: {what}"));
    }
    if cfg.link {
        return link::run(pname, &cfg);
    }
    if cfg.header {
        return header::run(pname, &cfg);
    }
    signals::install();
    let mut h = dtrace_open::handle(compiles(&cfg), cfg.ilp32);
    if let Some(code) = set_options(&mut h, &cfg) {
        return code;
    }
    if h.decoder.options.is_set("core") {
        coredump::request();
    }
    // DTrace for Linux's testing mode quiets what varies between runs: the CPU and ID columns of
    // probe lines, the newline after an interrupt, and reports of resized buffers.
    let testing = std::env::var_os("_DTRACE_TESTING").is_some();
    if testing && h.setopt("quietresize", None).is_err() {
        eprint!("{pname}: cannot set quietresize for testing");
    }
    // Options but nothing to trace: with -e there is nothing to do; otherwise DTrace's message.
    if cfg.cmds.is_empty() && !cfg.list {
        if cfg.exit_after_compile {
            return ExitCode::SUCCESS;
        }
        return fatal("no probes specified");
    }
    // Create and grab the processes before compiling, so `$target` is known (the first one's pid,
    // as in DTrace).
    let mut procs = procs::Procs::default();
    let mut pids = Vec::new();
    for cmd in &cfg.commands {
        match procs.create(cmd) {
            Ok(pid) => pids.push(pid),
            Err(e) => return fatal(&e),
        }
    }
    for arg in &cfg.pids {
        match procs.grab(arg) {
            Ok(pid) => pids.push(pid),
            Err(e) => return fatal(&e),
        }
    }
    if let Some(pid) = pids.first() {
        h.set_macro("target", &pid.to_string());
    }
    if cfg.list {
        return list(pname, &mut h, &cfg, &mut procs, pids.first().copied());
    }
    let flags = CompileFlags {
        zero_defs: cfg.zdefs,
        cpp: cfg.cpp,
        show_dif: cfg.show_dif,
        no_exec: cfg.exit_after_compile,
    };
    // Compile everything first, as DTrace does.
    let mut progs = Vec::new();
    for cmd in &cfg.cmds {
        let r = if cmd.kind == 's' {
            let mut argv = vec![cmd.arg.clone()];
            argv.extend(cfg.args.iter().cloned());
            if let Err(e) = std::fs::metadata(&cmd.arg) {
                return fatal(&format!("failed to open {}: {}", cmd.arg, io_reason(&e)));
            }
            h.compile_file(std::path::Path::new(&cmd.arg), flags, &argv)
        } else {
            let mut argv = vec![pname.to_string()];
            argv.extend(cfg.args.iter().cloned());
            let (text, spec) = match specifier(&mut h, cmd.kind, &cmd.arg) {
                Ok(t) => t,
                Err(e) => return fatal(&format!("invalid probe specifier {}: {e}", cmd.arg)),
            };
            h.compile_str(&text, spec, flags, &argv)
        };
        match r {
            Ok(p) => {
                if cfg.show_dif {
                    eprint!("{}", dtrace_consumer::dcompile::listing(&p));
                }
                progs.push(p)
            }
            Err(e) if unprivileged(&e) => return fatal(NO_PRIVILEGES),
            Err(e) if cmd.kind == 's' => {
                return fatal(&format!("failed to compile script {}: {e}", cmd.arg))
            }
            Err(e) => return fatal(&format!("invalid probe specifier {}: {e}", cmd.arg)),
        }
    }
    // A `#pragma D option core` in a script.
    if h.decoder.options.is_set("core") {
        coredump::request();
    }
    let out = match output::Output::open(cfg.output.as_deref()) {
        Ok(o) => o,
        Err(e) => {
            return fatal(&format!(
                "failed to open output file '{}': {e}",
                cfg.output.as_deref().unwrap_or("")
            ))
        }
    };
    if cfg.exit_after_compile {
        // -e: with -v, each program's stability report and its descriptions' probe information.
        if cfg.verbose {
            let mut w = out.clone();
            for (cmd, prog) in cfg.cmds.iter().zip(&progs) {
                let a = h.program_attributes(prog);
                let r = stability_report(cmd.desc(), report_name(cmd), &a, true);
                let _ = w.write_all(r.as_bytes());
            }
            let _ = w.flush();
        }
        return ExitCode::SUCCESS;
    }
    h.decoder.effects = Box::new(out.clone());
    let quiet = cfg.quiet || h.decoder.options.is_set("quiet");
    let format = OFormat::of(&h.decoder.options);
    let err_handler = oformat::error_handler(format, out.clone());
    // Faults reach the consumer through the library's ERROR program, as in DTrace.
    if let Err(e) = h.handle_err(err_handler) {
        return fatal(&format!("failed to establish error handler: {e}"));
    }
    h.handle_drop(oformat::drop_handler(format, out.clone()));
    let metrics = match h.decoder.options.string("metrics") {
        Some(addr) => match metrics::MetricsServer::start(addr) {
            Ok(m) => {
                if !quiet {
                    eprintln!(
                        "dtrace: serving metrics at http://{}/metrics",
                        m.local_addr()
                    );
                }
                Some(m)
            }
            Err(e) => return fatal(&format!("failed to serve metrics at {e}")),
        },
        None => None,
    };
    // `-c` commands are traced from `evaltime`: from their exec with `exec`, otherwise (DTrace's
    // default `postinit`, and `preinit`/`main`) once the dynamic linker has loaded and initialized
    // their libraries, at the program's entry point, so its work is not traced. The libraries a
    // command loads at start are also mapped before its pid probes are matched.
    let from_exec = h.decoder.options.string("evaltime") == Some("exec");
    if !from_exec || progs.iter().any(uses_process_providers) {
        if let Err(e) = procs.run_to_entry() {
            return fatal(&e);
        }
    }
    // Their mappings now, while they are held (with the libraries loaded at start): a command may
    // exit before its events are read.
    for pid in &pids {
        h.decoder.symbols.note_process(u64::from(*pid));
    }
    h.hold_processes(&pids);
    h.plan(&progs.iter().collect::<Vec<_>>());
    let mut total = 0;
    for (cmd, prog) in cfg.cmds.iter().zip(&progs) {
        let name = report_name(cmd);
        match h.exec(prog) {
            Ok(info) => {
                total += info.matches;
                if !quiet {
                    eprintln!(
                        "dtrace: {} '{}' matched {} probe{}",
                        cmd.desc(),
                        name,
                        info.matches,
                        if info.matches == 1 { "" } else { "s" }
                    );
                }
            }
            // DTrace matches probes while compiling, so a description that matches nothing is
            // reported as a compilation error (`D_PDESC_ZERO`, at the description's line).
            Err(e) if unprivileged(&e) => return fatal(NO_PRIVILEGES),
            Err(e @ (ConsumerError::NoMatch { .. } | ConsumerError::BadDescription { .. })) => {
                // A provider refusing a description (the pid provider's `D_PROC_*`) is reported
                // the same way, with its tag.
                let (tag, line) = match &e {
                    ConsumerError::BadDescription { tag, line, .. } => {
                        (ErrTag::from_name(tag).unwrap_or(ErrTag::D_UNKNOWN), *line)
                    }
                    ConsumerError::NoMatch { line, .. } => (ErrTag::D_PDESC_ZERO, *line),
                    _ => (ErrTag::D_UNKNOWN, 0),
                };
                let ce = CompileError::new(tag, line, e.to_string());
                let errtags = h.decoder.options.is_set("errtags");
                return fatal(&if cmd.kind == 's' {
                    ce.render_script(&cmd.arg, errtags)
                } else {
                    ce.render_specifier(&cmd.arg, errtags)
                });
            }
            Err(e) => return fatal(&format!("failed to enable '{name}': {e}")),
        }
        if cfg.verbose {
            // -v: the program's stability report, after it is enabled.
            let a = h.program_attributes(prog);
            let r = stability_report(cmd.desc(), name, &a, false);
            let mut w = out.clone();
            let _ = w.write_all(r.as_bytes()).and_then(|_| w.flush());
        }
    }
    if total == 0 && !cfg.zdefs {
        return fatal("no probes matched");
    }
    if cfg.verbose {
        for line in h.placement_report() {
            eprintln!("dtrace: {line}");
        }
    }
    if h.decoder.options.is_set("destructive") && !quiet {
        eprintln!("dtrace: allowing destructive actions");
    }
    if h.decoder.options.is_set("noresolve") {
        // -x noresolve: user addresses print as offsets into their objects, not as symbols.
        let inner = std::mem::replace(
            &mut h.decoder.symbols,
            Box::new(dtrace_consumer::symbols::NoSymbols),
        );
        h.decoder.symbols = Box::new(dtrace_open::symbols::Unresolved::new(inner));
    }
    if let Err(e) = h.go() {
        return fatal(&format!("could not enable tracing: {e}"));
    }
    if let Err(e) = procs.release() {
        return fatal(&e);
    }
    let quiet = cfg.quiet || h.decoder.options.is_set("quiet");
    let flowindent = cfg.flowindent || h.decoder.options.is_set("flowindent");
    let mut printer = oformat::Printer::new(format, quiet, flowindent, testing);
    let printer = std::cell::RefCell::new(&mut printer);
    // A structured output's reader may go away without stopping the run.
    let mut w: Box<dyn Write> = match format {
        OFormat::Text => Box::new(out.clone()),
        _ => Box::new(oformat::Outliving::new(out.clone())),
    };
    let mut newline_done = format != OFormat::Text;
    loop {
        if signals::interrupted() && !newline_done {
            // DTrace ends the interrupted line (the terminal's ^C), even when quiet; not when
            // testing, where that newline would land at a random place in the output.
            if !testing {
                let _ = w.write_all(b"\n");
            }
            newline_done = true;
        }
        procs.poll();
        for n in procs.take_notices() {
            if !quiet {
                eprintln!("dtrace: {n}");
            }
        }
        let all_exited = !procs.is_empty() && procs.live() == 0;
        if (signals::interrupted() || all_exited) && !h.stopped() {
            if let Err(e) = h.stop() {
                return fatal(&format!("couldn't stop tracing: {e}"));
            }
        }
        let r = h.work(
            &mut w,
            &mut |pd, o| printer.borrow_mut().probe(pd, o),
            &mut |pd, r, o| printer.borrow_mut().record(pd, r, o),
        );
        match r {
            Ok(WorkStatus::Done) => break,
            Ok(WorkStatus::Okay) => {}
            Err(e) => return fatal(&format!("processing aborted: {e}")),
        }
        if let Some(m) = &metrics {
            match dtrace_consumer::oformat::metrics_text(&h.decoder) {
                Ok(text) => m.publish(text),
                Err(e) => return fatal(&format!("processing aborted: {e}")),
            }
        }
        if h.stopped() {
            continue;
        }
        // Wait until the next rate is due, running the tracer's timers and waking for what the
        // tracer delivers, signals and the end of a traced process; between those, sleep.
        loop {
            let rate = h.time_to_next_rate();
            if rate.is_zero() || signals::interrupted() || procs.poll() {
                break;
            }
            let mut also = procs.exit_fds();
            also.extend(signals::wake_fd());
            let r = h
                .wait(h.time_to_next().min(rate), &also)
                .and_then(|_| h.poll());
            if let Err(e) = r {
                return fatal(&format!("processing aborted: {e}"));
            }
        }
    }
    if let Some(path) = h.decoder.options.string("flamegraph").map(str::to_string) {
        if let Err(e) = oformat::write_flamegraph(&mut h, &path) {
            return fatal(&format!("failed to write flame graph {path}: {e}"));
        }
    }
    if format == OFormat::Text {
        let _ = w.write_all(b"\n");
    }
    if let Err(e) = h.aggregate_print(&mut w) {
        return fatal(&format!("failed to print aggregations: {e}"));
    }
    let _ = w.flush();
    if std::env::var_os(REPORT_WAKEUPS_ENV).is_some_and(|v| v == "1") {
        eprintln!("dtrace: {} wake-ups", h.wakeups());
    }
    ExitCode::from(h.exit_status().unwrap_or(0) as u8)
}

/// Whether this run will compile D: always unless listing, and when listing only for a script or a
/// description with a predicate or actions (a plain description is matched, not compiled).
fn compiles(cfg: &args::Config) -> bool {
    !cfg.list
        || cfg
            .cmds
            .iter()
            .any(|c| c.kind == 's' || !list_plain(&c.arg))
}

/// Whether `-l` lists the probes of this description (list) by matching it, without compiling it.
fn list_plain(text: &str) -> bool {
    !text.contains(['/', '{', ';'])
}

/// How a program is named in messages and reports: a script by its path, a description cut before
/// any predicate or action.
fn report_name(cmd: &args::Cmd) -> &str {
    if cmd.kind == 's' {
        cmd.arg.as_str()
    } else {
        cmd.arg.split(['{', '/', ';']).next().unwrap_or("")
    }
}

/// `-l`: the probes matching each description (all probes when none is given); with `-s` or a
/// description carrying a predicate or actions, the probes each clause of the compiled program
/// matches; with `-v`, each probe's stability attributes and argument types under its line.
/// Whether `prog` names a per-process provider (`pid123`, `python123`).
fn uses_process_providers(prog: &dtrace_dif::program::Program) -> bool {
    prog.ecbs
        .iter()
        .any(|e| dtrace_linux::catalog::pid::split_provider(&e.probe.provider).is_some())
}

fn list(
    pname: &str,
    h: &mut Handle,
    cfg: &args::Config,
    procs: &mut procs::Procs,
    target: Option<u32>,
) -> ExitCode {
    if target.is_some() {
        if let Err(e) = procs.run_to_entry() {
            return fatal(&e);
        }
    }
    // -l implies -Z: a clause matching nothing is reported, not fatal.
    let flags = CompileFlags {
        zero_defs: true,
        cpp: cfg.cpp,
        show_dif: false,
        no_exec: true,
    };
    let mut descs = Vec::new();
    for c in &cfg.cmds {
        let (text, spec) = if c.kind == 's' {
            (c.arg.clone(), ProbeSpec::Script)
        } else {
            match specifier(h, c.kind, &c.arg) {
                Ok(t) => t,
                Err(e) => return fatal(&format!("invalid probe specifier {}: {e}", c.arg)),
            }
        };
        if c.kind != 's' && list_plain(&text) {
            let text = match target {
                Some(pid) => text.replace("$target", &pid.to_string()),
                None => text,
            };
            for d in text.split(',') {
                match listing::str2desc(spec, d.trim()) {
                    Ok(d) => descs.push(d),
                    Err(e) => return fatal(&format!("invalid probe specifier {}: {e}", c.arg)),
                }
            }
            continue;
        }
        let r = if c.kind == 's' {
            if let Err(e) = std::fs::metadata(&c.arg) {
                return fatal(&format!("failed to open {}: {}", c.arg, io_reason(&e)));
            }
            let mut argv = vec![c.arg.clone()];
            argv.extend(cfg.args.iter().cloned());
            h.compile_file(std::path::Path::new(&c.arg), flags, &argv)
        } else {
            let mut argv = vec![pname.to_string()];
            argv.extend(cfg.args.iter().cloned());
            h.compile_str(&text, spec, flags, &argv)
        };
        match r {
            Ok(p) => descs.extend(p.ecbs.iter().map(|e| e.probe.clone())),
            Err(e) if c.kind == 's' => {
                return fatal(&format!("failed to compile script {}: {e}", c.arg))
            }
            Err(e) => return fatal(&format!("invalid probe specifier {}: {e}", c.arg)),
        }
    }
    let all = cfg.cmds.is_empty();
    if all {
        descs.push(Default::default());
    }
    let mut text = listing::list_heading();
    for d in &descs {
        match h.list_probes(d) {
            Ok(ps) if ps.is_empty() && !all => {
                eprintln!(
                    "dtrace: failed to match {}:{}:{}:{}: No probe matches description",
                    d.provider, d.module, d.function, d.name
                );
            }
            Ok(ps) => {
                for p in &ps {
                    text.push_str(&listing::list_line(p));
                    // As dtrace(1M), a probe whose details cannot be had is listed without them.
                    if cfg.verbose {
                        if let Ok(detail) = h.probe_detail(p) {
                            text.push_str(&listing::verbose_info(p, &detail));
                        }
                    }
                }
            }
            Err(e) => return fatal(&format!("failed to list probes: {e}")),
        }
    }
    // As in DTrace, `-o` takes the listing too (appended). A closed pipe (`dtrace -l | head`) ends
    // the listing quietly.
    let mut out = match output::Output::open(cfg.output.as_deref()) {
        Ok(o) => o,
        Err(e) => {
            return fatal(&format!(
                "failed to open output file '{}': {e}",
                cfg.output.as_deref().unwrap_or("")
            ))
        }
    };
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
    ExitCode::SUCCESS
}

/// The reason part of an I/O error as C's strerror(3) words it.
pub(crate) fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "No such file or directory".to_string(),
        std::io::ErrorKind::PermissionDenied => "Permission denied".to_string(),
        _ => e.to_string(),
    }
}

/// Sets the options of the environment (`DTRACE_OPT_<NAME>` sets option `<name>`, for every option),
/// then those of the command line; on an error, the exit status after reporting it.
pub(crate) fn set_options(h: &mut Handle, cfg: &args::Config) -> Option<ExitCode> {
    for (name, value) in args::env_options(std::env::vars()) {
        // As DTrace (dtrace_setoptenv looks up only the names it knows), a variable naming no
        // option is none of dtrace's business; a bad value for a known option is reported.
        if Options::kind(&name).is_none() {
            continue;
        }
        if let Err(e) = h.setopt(&name, value.as_deref()) {
            return Some(fatal(&format!(
                "failed to set option {name} from the environment: {e}"
            )));
        }
    }
    for (flag, name, value) in &cfg.options {
        if let Err(e) = h.setopt(name, value.as_deref()) {
            let what = match flag {
                'x' => format!("-x {name}"),
                'b' | 'D' | 'I' | 'L' | 'U' | 'X' => {
                    format!("-{flag} {}", value.as_deref().unwrap_or(""))
                }
                _ => format!("-{flag}"),
            };
            return Some(fatal(&format!("failed to set {what}: {e}")));
        }
    }
    None
}
