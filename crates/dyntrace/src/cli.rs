//! The command line of `dyntrace(1)`, and the program that puts the pieces together: load the opcode
//! file, check the output, start or attach, trace, write the profile.

use crate::error::{sysexits, Error, Result};
use crate::oplist::{OpList, BUILTIN_OPLIST};
use crate::perf::TimingEvent;
use crate::tracer::{Mode, Options, Target, Tracer};
use clap::Parser;
use std::path::{Path, PathBuf};

/// dyntrace: dynamic execution tracing utility.
#[derive(Debug, Parser)]
#[command(
    name = "dyntrace",
    override_usage = "dyntrace [-vz] [-c seconds] [-f opcodefile] [-o outputfile] command ...\n       \
                      dyntrace [-vz] [-c seconds] [-f opcodefile] [-o outputfile] -p pid"
)]
pub struct Args {
    /// Increase verbosity (repeatable); messages go to stderr.
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Include instructions with zero counts in the output.
    #[arg(short = 'z')]
    pub zeros: bool,
    /// Checkpoint the profile every this many seconds (0 disables).
    #[arg(short = 'c', value_name = "seconds", default_value_t = 900)]
    pub checkpoint: u64,
    /// Load instruction descriptions from this file.
    #[arg(short = 'f', value_name = "opcodefile")]
    pub opcode_file: Option<PathBuf>,
    /// Write the profile to this file (default: procname.trace).
    #[arg(short = 'o', value_name = "outputfile")]
    pub output: Option<PathBuf>,
    /// Trace this running process.
    #[arg(short = 'p', value_name = "pid")]
    pub pid: Option<i32>,
    /// Also trace children across fork (never the default: it would break tracing debuggers).
    #[arg(short = 'F', long = "follow-forks")]
    pub follow_forks: bool,
    /// Counting mode: "step" traps on every instruction, "block" once per basic block (same counts).
    #[arg(
        short = 'm',
        long = "mode",
        value_name = "step|block",
        default_value = "step"
    )]
    pub mode: String,
    /// Run the command without address-space randomization (reproducible profiles).
    #[arg(long = "no-randomize")]
    pub no_randomize: bool,
    /// Do not pin dyntrace and the command to one CPU.
    #[arg(long = "no-pin")]
    pub no_pin: bool,
    /// What times instructions (step mode): "cycles" (hardware counter, the default, where the
    /// machine has one), "task-clock" (nanoseconds of the thread's CPU time, trap cost included, for
    /// machines without cycle counters) or "none".
    #[arg(
        long = "timer",
        value_name = "cycles|task-clock|none",
        default_value = "cycles"
    )]
    pub timer: String,
    /// Block mode: never emulate hot blocks in the tracer (every block runs natively).
    #[arg(long = "no-emulate")]
    pub no_emulate: bool,
    /// The command to run and its arguments.
    #[arg(trailing_var_arg = true, value_name = "command")]
    pub command: Vec<String>,
}

/// Where the shipped data files are: `share/dyntrace` beside or above the binary, else the source tree.
pub fn data_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [
        dir.join("share/dyntrace"),
        dir.join("../share/dyntrace"),
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/share/dyntrace")),
    ]
    .into_iter()
    .find(|cand| cand.join("oplist-x86_64.xml").is_file())
}

fn load_oplist(path: Option<&Path>) -> Result<OpList> {
    match path {
        Some(p) => {
            let bytes = std::fs::read(p).map_err(|e| Error::OpcodeFileRead {
                path: p.to_path_buf(),
                source: e,
            })?;
            let text = String::from_utf8(bytes).map_err(|_| Error::OpcodeFile {
                path: p.display().to_string(),
                reason: "not UTF-8 text".into(),
            })?;
            OpList::parse(&text, &p.display().to_string())
        }
        None => match data_dir().map(|d| d.join("oplist-x86_64.xml")) {
            Some(f) => match std::fs::read_to_string(&f) {
                Ok(t) => OpList::parse(&t, &f.display().to_string()),
                Err(_) => OpList::parse(BUILTIN_OPLIST, "<built-in>"),
            },
            None => OpList::parse(BUILTIN_OPLIST, "<built-in>"),
        },
    }
}

fn procname(target: &Target) -> String {
    match target {
        Target::Command(argv) => argv
            .first()
            .and_then(|a| Path::new(a).file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "dyntrace".into()),
        Target::Pid(pid) => std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| pid.to_string()),
    }
}

/// Checks that `path` can be written, without leaving anything behind.
fn check_writable(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let probe = dir.join(format!(".dyntrace-probe.{}", std::process::id()));
    let cant = |e| Error::CantCreate {
        path: path.to_path_buf(),
        source: e,
    };
    if path.is_dir() {
        return Err(cant(std::io::Error::other("is a directory")));
    }
    std::fs::File::create(&probe).map_err(cant)?;
    let _ = std::fs::remove_file(&probe);
    if path.exists() {
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(cant)?;
    }
    Ok(())
}

fn parse_args(args: &[String]) -> Result<(Args, Target)> {
    let a = Args::try_parse_from(args).map_err(|e| Error::Usage(e.to_string()))?;
    let target = match (a.pid, a.command.is_empty()) {
        (Some(_), false) => {
            return Err(Error::Usage(
                "the -p and command options are mutually exclusive".into(),
            ))
        }
        (Some(p), true) => Target::Pid(p),
        (None, false) => Target::Command(a.command.clone()),
        (None, true) => return Err(Error::Usage("no command or -p pid given".into())),
    };
    if a.timer != "none" && TimingEvent::from_name(&a.timer).is_none() {
        return Err(Error::Usage(format!(
            "unknown timer \"{}\" (cycles, task-clock or none)",
            a.timer
        )));
    }
    if !matches!(a.mode.as_str(), "step" | "block") {
        return Err(Error::Usage(format!(
            "unknown mode \"{}\" (step or block)",
            a.mode
        )));
    }
    Ok((a, target))
}

/// Runs dyntrace with `args` (argv including the program name); returns the exit code.
pub fn main_with(args: &[String]) -> i32 {
    if args
        .iter()
        .skip(1)
        .take_while(|a| a.starts_with('-'))
        .any(|a| a == "-h" || a == "--help")
    {
        let _ = Args::try_parse_from(["dyntrace", "--help"]).map_err(|e| e.print());
        return sysexits::EX_OK;
    }
    match run(args) {
        Ok(()) => sysexits::EX_OK,
        Err(e) => {
            match &e {
                Error::Usage(m) => eprintln!("dyntrace: {}", m.trim_end()),
                other => eprintln!("dyntrace: {other}"),
            }
            e.exit_code()
        }
    }
}

fn run(args: &[String]) -> Result<()> {
    let (a, target) = parse_args(args)?;
    let ops = load_oplist(a.opcode_file.as_deref())?;
    let output = a
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.trace", procname(&target))));
    check_writable(&output)?;
    let mode = if a.mode == "block" {
        Mode::Block
    } else {
        Mode::Step
    };
    let mut timing = None;
    if let Some(event) = TimingEvent::from_name(&a.timer) {
        match crate::perf::probe(event) {
            Ok(()) if mode == Mode::Step => timing = Some(event),
            Ok(()) => eprintln!(
                "dyntrace: warning: instruction timing needs step mode; profiling without timing"
            ),
            Err(e) => eprintln!(
                "dyntrace: warning: instruction timing unavailable (no {} counter: {e}); profiling without timing",
                event.name()
            ),
        }
    }
    crate::signals::install_all(a.checkpoint).map_err(|e| Error::Os {
        call: "sigaction",
        source: e,
    })?;
    let opts = Options {
        verbose: a.verbose,
        zeros: a.zeros,
        follow_forks: a.follow_forks,
        mode,
        output: output.clone(),
        pin: !a.no_pin,
        timing,
        emulate: !a.no_emulate,
    };
    let mut tracer = Tracer::new(ops, opts);
    // Pinning helps when tracer and tracee share the CPU: the command inherits it; an attached
    // process keeps its own affinity, so dyntrace is not pinned then.
    if !a.no_pin && matches!(target, Target::Command(_)) && !crate::launch::pin_to_current_cpu() {
        tracer_log(a.verbose, "could not pin to one CPU");
    }
    match &target {
        Target::Command(argv) => {
            let pid = crate::launch::spawn(argv, tracer.ptrace_options(), a.no_randomize)?;
            tracer.adopt_spawned(pid)?;
        }
        Target::Pid(pid) => {
            let tids = crate::launch::attach(*pid, tracer.ptrace_options())?;
            tracer_log(
                a.verbose,
                &format!("attached to {} thread(s) of {pid}", tids.len()),
            );
            tracer.adopt_attached(*pid, &tids);
        }
    }
    let result = tracer.run();
    if result.is_err() {
        tracer.detach_all();
    }
    let text = tracer.render_final();
    crate::profile::write_atomically(&output, &text).map_err(|e| Error::Write {
        path: output.clone(),
        source: e,
    })?;
    tracer_log(
        a.verbose,
        &format!(
            "{} instructions counted in {} stops; profile in {}",
            tracer.profile.total(),
            tracer.stops,
            output.display()
        ),
    );
    result
}

fn tracer_log(verbose: u8, msg: &str) {
    if verbose > 0 {
        eprintln!("dyntrace: {msg}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        std::iter::once("dyntrace")
            .chain(v.iter().copied())
            .map(String::from)
            .collect()
    }

    #[test]
    fn parses_the_manual_synopsis() {
        let (a, t) = parse_args(&args(&[
            "-vv", "-z", "-c", "5", "-o", "x.trace", "ls", "-l",
        ]))
        .unwrap();
        assert_eq!(a.verbose, 2);
        assert!(a.zeros);
        assert_eq!(a.checkpoint, 5);
        assert!(matches!(t, Target::Command(ref c) if c == &["ls".to_string(), "-l".to_string()]));
        let (a, t) = parse_args(&args(&["-c", "0", "-p", "1024"])).unwrap();
        assert_eq!(a.checkpoint, 0);
        assert!(matches!(t, Target::Pid(1024)));
        let (a, _) = parse_args(&args(&["true"])).unwrap();
        assert_eq!(a.checkpoint, 900);
        assert_eq!(procname(&Target::Command(vec!["/bin/df".into()])), "df");
    }

    #[test]
    fn usage_errors() {
        for bad in [
            &["-p", "1", "ls"][..],
            &[],
            &["-c", "x", "ls"],
            &["-q", "ls"],
            &["-m", "fast", "ls"],
        ] {
            let e = parse_args(&args(bad)).unwrap_err();
            assert_eq!(e.exit_code(), sysexits::EX_USAGE, "{bad:?}");
        }
    }

    #[test]
    fn unwritable_output_is_refused() {
        let e = check_writable(Path::new("/no/such/dir/out.trace")).unwrap_err();
        assert_eq!(e.exit_code(), sysexits::EX_CANTCREAT);
        let e = check_writable(Path::new("/")).unwrap_err();
        assert_eq!(e.exit_code(), sysexits::EX_CANTCREAT);
    }
}
