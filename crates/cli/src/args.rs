//! dtrace(1)'s command line, parsed as DTrace parses it: getopt over `3:6:aAb:Bc:CD:ef:FGhHi:I:lL:m:n:
//! o:p:P:qs:SU:vVwx:X:Z` with clustered flags (`-qn`, `-qs file`), options anywhere, every non-option
//! argument kept as a macro argument (`$1`, `$2`, ...), and `-32`/`-64`.

use thiserror::Error;

/// DTrace's option string (a `:` follows options that take an argument).
pub const OPTSTR: &str = "3:6:aAb:Bc:CD:ef:FGhHi:I:lL:m:n:o:p:P:qs:SU:vVwx:X:Z";

/// A usage error, with the message DTrace prints before the usage text.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum UsageError {
    /// An option letter DTrace does not know.
    #[error("illegal option -- {0}")]
    Illegal(char),
    /// An option missing its argument.
    #[error("option requires an argument -- {0}")]
    MissingArg(char),
    /// `-3x`/`-6x` other than `-32`/`-64`.
    #[error("illegal option -- {0}")]
    BadModel(String),
}

/// One probe specification or script, in command-line order (`dtrace_cmd_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmd {
    /// The option letter: `n`, `P`, `m`, `f`, `i` or `s`.
    pub kind: char,
    /// Its argument.
    pub arg: String,
}

impl Cmd {
    /// `description` or `script`, as in the status line.
    pub fn desc(&self) -> &'static str {
        if self.kind == 's' {
            "script"
        } else {
            "description"
        }
    }
}

/// Everything the command line says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Config {
    /// Probe specifications and scripts in order.
    pub cmds: Vec<Cmd>,
    /// `-x name[=value]`, `-b`, `-D`, ... as options to set, in order, with the flag that set them.
    pub options: Vec<(char, String, Option<String>)>,
    /// How many of the mode options `-A -G -h -l -V` were given.
    pub modes: usize,
    /// Macro arguments (non-option words).
    pub args: Vec<String>,
    /// `-l`.
    pub list: bool,
    /// `-q`.
    pub quiet: bool,
    /// `-F`.
    pub flowindent: bool,
    /// `-v`.
    pub verbose: bool,
    /// `-V`.
    pub version: bool,
    /// `-e`.
    pub exit_after_compile: bool,
    /// `-S`.
    pub show_dif: bool,
    /// `-Z`.
    pub zdefs: bool,
    /// `-C`.
    pub cpp: bool,
    /// `-w`.
    pub destructive: bool,
    /// `-o file`.
    pub output: Option<String>,
    /// `-c cmd` (each).
    pub commands: Vec<String>,
    /// `-p pid` (each).
    pub pids: Vec<String>,
    /// `-G`: write each program as an ELF object holding its DOF instead of running it.
    pub link: bool,
    /// `-h`: write a C header for the programs' `provider` declarations.
    pub header: bool,
    /// `-32`/`-64`: the data model D programs are compiled for (LP64 unless `-32`).
    pub ilp32: bool,
    /// Options accepted but whose features are not there yet (`-a -A -B`), by letter.
    pub unsupported: Vec<char>,
}

fn takes_arg(c: char) -> Option<bool> {
    let i = OPTSTR.find(c)?;
    if c == ':' {
        return None;
    }
    Some(OPTSTR[i + 1..].starts_with(':'))
}

/// Parses `argv` (without the program name).
pub fn parse(argv: &[String]) -> Result<Config, UsageError> {
    let mut cfg = Config::default();
    let mut i = 0;
    while i < argv.len() {
        let a = &argv[i];
        i += 1;
        if a == "--" {
            cfg.args.extend(argv[i..].iter().cloned());
            break;
        }
        if !a.starts_with('-') || a == "-" {
            cfg.args.push(a.clone());
            continue;
        }
        let chars: Vec<char> = a[1..].chars().collect();
        let mut j = 0;
        while j < chars.len() {
            let c = chars[j];
            j += 1;
            let needs = takes_arg(c).ok_or(UsageError::Illegal(c))?;
            let optarg = if needs {
                let rest: String = chars[j..].iter().collect();
                j = chars.len();
                if !rest.is_empty() {
                    rest
                } else if i < argv.len() {
                    i += 1;
                    argv[i - 1].clone()
                } else {
                    return Err(UsageError::MissingArg(c));
                }
            } else {
                String::new()
            };
            apply(&mut cfg, c, optarg)?;
        }
    }
    Ok(cfg)
}

fn opt(cfg: &mut Config, flag: char, name: &str, value: Option<String>) {
    cfg.options.push((flag, name.to_string(), value));
}

fn apply(cfg: &mut Config, c: char, arg: String) -> Result<(), UsageError> {
    match c {
        '3' | '6' => {
            let want = if c == '3' { "2" } else { "4" };
            if arg != want {
                return Err(UsageError::BadModel(format!("{c}{arg}")));
            }
            cfg.ilp32 = c == '3';
        }
        'b' => opt(cfg, c, "bufsize", Some(arg)),
        'c' => cfg.commands.push(arg),
        'C' => {
            cfg.cpp = true;
            opt(cfg, c, "cpp", None);
        }
        'D' => opt(cfg, c, "define", Some(arg)),
        'e' => cfg.exit_after_compile = true,
        'f' | 'i' | 'm' | 'n' | 'P' | 's' => cfg.cmds.push(Cmd { kind: c, arg }),
        'F' => {
            cfg.flowindent = true;
            opt(cfg, c, "flowindent", None);
        }
        'H' => opt(cfg, c, "cpphdrs", None),
        'I' => opt(cfg, c, "incdir", Some(arg)),
        'l' => {
            cfg.list = true;
            cfg.modes += 1;
        }
        'L' => opt(cfg, c, "libdir", Some(arg)),
        'o' => cfg.output = Some(arg),
        'p' => cfg.pids.push(arg),
        'q' => {
            cfg.quiet = true;
            opt(cfg, c, "quiet", None);
        }
        'S' => cfg.show_dif = true,
        'U' => opt(cfg, c, "undef", Some(arg)),
        'v' => cfg.verbose = true,
        'V' => {
            cfg.version = true;
            cfg.modes += 1;
        }
        'w' => {
            cfg.destructive = true;
            opt(cfg, c, "destructive", None);
        }
        'x' => match arg.split_once('=') {
            Some((n, v)) => opt(cfg, c, n, Some(v.to_string())),
            None => opt(cfg, c, &arg, None),
        },
        'X' => opt(cfg, c, "stdc", Some(arg)),
        'Z' => {
            cfg.zdefs = true;
            opt(cfg, c, "zdefs", None);
        }
        'G' => {
            cfg.modes += 1;
            cfg.link = true;
        }
        'h' => {
            cfg.modes += 1;
            cfg.header = true;
        }
        'A' => {
            cfg.modes += 1;
            cfg.unsupported.push(c);
        }
        'a' | 'B' => cfg.unsupported.push(c),
        _ => return Err(UsageError::Illegal(c)),
    }
    Ok(())
}

/// Options from `DTRACE_OPT_NAME=value` environment variables (name lower-cased; an empty value
/// sets a boolean option).
pub fn env_options(vars: impl Iterator<Item = (String, String)>) -> Vec<(String, Option<String>)> {
    vars.filter_map(|(k, v)| {
        let name = k.strip_prefix("DTRACE_OPT_")?.to_ascii_lowercase();
        (!name.is_empty()).then(|| (name, (!v.is_empty()).then_some(v)))
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(a: &[&str]) -> Result<Config, UsageError> {
        parse(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn clustered_flags_and_arguments() {
        let c = p(&["-qn", "BEGIN { exit(0); }", "-x", "bufsize=1m", "-xquiet"]).unwrap();
        assert!(c.quiet);
        assert_eq!(
            c.cmds,
            vec![Cmd {
                kind: 'n',
                arg: "BEGIN { exit(0); }".into()
            }]
        );
        assert_eq!(
            c.options,
            vec![
                ('q', "quiet".into(), None),
                ('x', "bufsize".into(), Some("1m".into())),
                ('x', "quiet".into(), None)
            ]
        );
    }

    #[test]
    fn scripts_take_macro_arguments_after_them() {
        let c = p(&["-qs", "x.d", "12", "foo", "-F"]).unwrap();
        assert_eq!(c.cmds[0].arg, "x.d");
        assert_eq!(c.args, ["12", "foo"]);
        assert!(c.flowindent);
    }

    #[test]
    fn models_and_errors() {
        assert!(!p(&["-32", "-64"]).unwrap().ilp32);
        assert!(p(&["-64", "-32"]).unwrap().ilp32);
        assert_eq!(p(&["-33"]), Err(UsageError::BadModel("33".into())));
        assert_eq!(p(&["-k"]), Err(UsageError::Illegal('k')));
        assert_eq!(p(&["-n"]), Err(UsageError::MissingArg('n')));
        assert_eq!(p(&["-q:"]), Err(UsageError::Illegal(':')));
    }

    #[test]
    fn environment_options() {
        let v = env_options(
            [
                ("DTRACE_OPT_BUFSIZE".to_string(), "2m".to_string()),
                ("DTRACE_OPT_QUIET".to_string(), String::new()),
                ("PATH".to_string(), "/bin".to_string()),
            ]
            .into_iter(),
        );
        assert_eq!(
            v,
            vec![
                ("bufsize".into(), Some("2m".into())),
                ("quiet".into(), None)
            ]
        );
    }
}
