//! What a compilation is told by its caller: macro arguments and variables, data model, string size,
//! preprocessing, destructive-action permission, and the defaults of options that shape actions.

use crate::types::DataModel;

/// Where the program text came from; decides how errors are located and whether a bare probe
/// description is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourceKind {
    /// A script file (`-s`): errors carry line numbers.
    #[default]
    File,
    /// A string (`-n`, `-P`, `-m`, `-f`, `-i`): errors carry the region.
    String,
}

/// The `stdc` option (`-X a|c|s|t`): how ISO C conforming the preprocessing is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StdcMode {
    /// `a`: ISO C plus extensions (the default).
    #[default]
    Xa,
    /// `c`: strictly conforming ISO C.
    Xc,
    /// `s`: K&R C.
    Xs,
    /// `t`: ISO C plus extensions, with transitional semantics.
    Xt,
}

impl StdcMode {
    /// The mode an option value names (`a`, `c`, `s` or `t`).
    pub fn from_letter(v: &str) -> Option<StdcMode> {
        match v {
            "a" => Some(StdcMode::Xa),
            "c" => Some(StdcMode::Xc),
            "s" => Some(StdcMode::Xs),
            "t" => Some(StdcMode::Xt),
            _ => None,
        }
    }
}

/// Options for one compilation.
#[derive(Debug, Clone)]
pub struct CompileOptions {
    /// `$0` (script name) followed by the macro arguments `$1`...
    pub args: Vec<String>,
    /// Named macro variables: `target`, `pid`, `ppid`, `uid`, `gid`, `sid`, `pgid`, `projid`,
    /// `taskid`, `zonename`...
    pub macros: Vec<(String, String)>,
    /// `-x defaultargs`: undefined arguments are 0 or "" and extra arguments are not an error.
    pub default_args: bool,
    /// Data model (`-32`/`-64`).
    pub model: DataModel,
    /// `-x strsize`: characters of a string, its NUL not counted (a string's storage is one more).
    pub strsize: u32,
    /// `-x scratchsize`: bytes of scratch space (`alloca()`, `copyin()`) per probe firing.
    pub scratchsize: u64,
    /// `-w`: destructive actions allowed.
    pub destructive: bool,
    /// `-x stackframes` default for `stack()`.
    pub stackframes: u32,
    /// `-x ustackframes` default for `ustack()`.
    pub ustackframes: u32,
    /// `-x jstackframes` and `-x jstackstrsize` defaults for `jstack()`.
    pub jstackframes: u32,
    pub jstackstrsize: u32,
    /// `-C`: run the C preprocessor first.
    pub cpp: bool,
    /// `-H` (`-x cpphdrs`): the preprocessor prints the pathname of each file it includes on
    /// standard error (this implies `-C`).
    pub cpp_headers: bool,
    /// `-D name[=value]` for the preprocessor.
    pub defines: Vec<String>,
    /// `-U name`.
    pub undefs: Vec<String>,
    /// `-I dir`.
    pub includes: Vec<String>,
    /// `-L dir` (option `libdir`): directories of D libraries, declared before the first program.
    pub libdirs: Vec<String>,
    /// `-x argref`: macro arguments need not all be referenced.
    pub argref: bool,
    /// `-x cppargs`: further preprocessor arguments, already split at white space.
    pub cpp_args: Vec<String>,
    /// `-x cpppath`.
    pub cpp_path: String,
    /// `-x pspec`: ambiguous text is read as a probe description.
    pub pspec: bool,
    /// `-x empty`: an empty program is accepted (and enables nothing) rather than an error.
    pub empty: bool,
    /// `-X` (`-x stdc`): the ISO C conformance the preprocessor is run with.
    pub stdc: StdcMode,
    /// How the source was given.
    pub source: SourceKind,
    /// `-Z` (`-x zdefs`): a probe description may match no probes.
    pub zdefs: bool,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            args: vec![String::new()],
            macros: Vec::new(),
            default_args: false,
            model: DataModel::Lp64,
            strsize: 256,
            scratchsize: 1 << 20,
            destructive: false,
            stackframes: 20,
            ustackframes: 100,
            jstackframes: 50,
            jstackstrsize: 512,
            cpp: false,
            cpp_headers: false,
            defines: Vec::new(),
            undefs: Vec::new(),
            includes: Vec::new(),
            libdirs: Vec::new(),
            argref: false,
            cpp_args: Vec::new(),
            cpp_path: "cpp".to_string(),
            empty: false,
            pspec: false,
            stdc: StdcMode::default(),
            source: SourceKind::File,
            zdefs: false,
        }
    }
}
