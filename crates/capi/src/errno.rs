//! libdtrace's error numbers (`dt_errno`): the `EDT_*` codes from 1000 up with DTrace's messages,
//! system `errno` values below them, and how each [`ConsumerError`] of the Rust consumer maps onto
//! one. The number is what `dtrace_errno()` returns; the handle keeps the full message beside it
//! for the codes whose text depends on the occasion (compiler errors, "not yet supported: ...").

use dtrace_consumer::ConsumerError;

/// The first libdtrace error number.
pub const EDT_BASE: i32 = 1000;

/// The libdtrace error codes, in DTrace's order (`EDT_VERSION` is [`EDT_BASE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
#[allow(missing_docs)]
pub enum Edt {
    Version = EDT_BASE,
    VersInval,
    VersUndef,
    VersReduced,
    Ctf,
    Compiler,
    NoReg,
    NoTupReg,
    NoMem,
    Int2Big,
    Str2Big,
    NoMod,
    NoProv,
    NoProbe,
    NoSym,
    NoSymAddr,
    NoType,
    NoVar,
    NoAgg,
    BadScope,
    BadSpec,
    BadSpcv,
    BadId,
    NotLoaded,
    NoCtf,
    DataModel,
    DifVers,
    BadAgg,
    Fio,
    DifInval,
    DifSize,
    DifFault,
    BadProbe,
    BadPglob,
    NoScope,
    NoDecl,
    DMismatch,
    DOffset,
    DAlign,
    BadOptName,
    BadOptVal,
    BadOptCtx,
    CppFork,
    CppExec,
    CppEnt,
    CppErr,
    SymOflow,
    Active,
    Destructive,
    NoAnon,
    IsAnon,
    EndTooBig,
    NoConv,
    BadConv,
    BadError,
    ErrAbort,
    DropAbort,
    DirAbort,
    BadRval,
    BadNormal,
    BufTooSmall,
    BadTrunc,
    Busy,
    Access,
    NoEnt,
    Bricked,
    Hardwire,
    ElfVersion,
    NoBuffered,
    Unstable,
    BadSetopt,
    BadStackPc,
    BadAggVar,
    OVersion,
    EnablingErr,
}

/// DTrace's message for each code, in the order of [`Edt`].
const MESSAGES: [&str; 75] = [
    "Client requested version newer than library",
    "Version is not properly formatted or is too large",
    "Requested version is not supported by compiler",
    "Requested version conflicts with earlier setting",
    "Unexpected libctf error",
    "Error in D program compilation",
    "Insufficient registers to generate code",
    "Insufficient tuple registers to generate code",
    "Memory allocation failure",
    "Integer constant table limit exceeded",
    "String constant table limit exceeded",
    "Unknown module name",
    "Unknown provider name",
    "No probe matches description",
    "Unknown symbol name",
    "No symbol corresponds to address",
    "Unknown type name",
    "Unknown variable name",
    "Unknown aggregation name",
    "Improper use of scoping operator in type name",
    "Overspecified probe description",
    "Undefined macro variable in probe description",
    "Unknown probe identifier",
    "Module is no longer loaded",
    "Module does not contain any CTF data",
    "Module and program data models do not match",
    "Library uses newer DIF version than kernel",
    "Unknown aggregating action",
    "Error occurred while reading from input stream",
    "DIF program content is invalid",
    "DIF program exceeds maximum program size",
    "DIF program contains invalid pointer",
    "Invalid probe specification",
    "Probe description has too many globbing characters",
    "Declaration scope stack underflow",
    "Declaration stack underflow",
    "Data record list does not match statement",
    "Data record offset exceeds buffer boundary",
    "Data record has inappropriate alignment",
    "Invalid option name",
    "Invalid value for specified option",
    "Option cannot be used from within a D program",
    "Failed to fork preprocessor",
    "Failed to exec preprocessor",
    "Preprocessor not found",
    "Preprocessor failed to process input program",
    "Symbol table identifier space exhausted",
    "Operation illegal when tracing is active",
    "Destructive actions not allowed",
    "No anonymous tracing state",
    "Can't claim anonymous state and enable probes",
    "END enablings exceed size of principal buffer",
    "Failed to load type for printf conversion",
    "Incomplete printf conversion",
    "Invalid library ERROR action",
    "Abort due to error",
    "Abort due to drop",
    "Abort explicitly directed",
    "Invalid return value from callback",
    "Invalid normalization",
    "Enabling exceeds size of buffer",
    "Invalid truncation",
    "DTrace cannot be used when kernel debugger is active",
    "DTrace requires additional privileges",
    "DTrace device not available on system",
    "Abort due to systemic unresponsiveness",
    "Failed to load language definitions",
    "libelf is out-of-date with respect to libdtrace",
    "Attempt to buffer output without handler",
    "Description matched an unstable set of probes",
    "Invalid setopt() library action",
    "Invalid stack program counter size",
    "Invalid aggregation variable identifier",
    "Client requested deprecated version of library",
    "Failed to enable probe",
];

/// The table message of a libdtrace error number, if it is one.
pub fn edt_message(err: i32) -> Option<&'static str> {
    let i = usize::try_from(err.checked_sub(EDT_BASE)?).ok()?;
    MESSAGES.get(i).copied()
}

/// `ENOTSUP`: what a feature that is not built yet fails with (its message says which).
pub const ENOTSUP: i32 = libc::ENOTSUP;

/// A failure of an entry point: the number `dtrace_errno()` will return and, when the table's
/// text would not say enough, the message `dtrace_errmsg()` gives for it on this handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fail {
    /// `EDT_*` or a system `errno`.
    pub errno: i32,
    /// The occasion's message, if any.
    pub msg: Option<String>,
}

impl Fail {
    /// A failure with the table's (or `strerror`'s) message.
    pub fn code(errno: i32) -> Fail {
        Fail { errno, msg: None }
    }

    /// A libdtrace error with the table's message.
    pub fn edt(e: Edt) -> Fail {
        Fail::code(e as i32)
    }

    /// A feature that is not built yet: `ENOTSUP`, "not yet supported: `what`".
    pub fn unsupported(what: &str) -> Fail {
        Fail {
            errno: ENOTSUP,
            msg: Some(format!("not yet supported: {what}")),
        }
    }
}

impl From<ConsumerError> for Fail {
    fn from(e: ConsumerError) -> Fail {
        use ConsumerError as C;
        let (code, keep_msg) = match &e {
            C::BadOptionName(_) => (Edt::BadOptName as i32, false),
            C::BadOptionValue(_) => (Edt::BadOptVal as i32, false),
            C::Active => (Edt::Active as i32, false),
            C::DirectAbort => (Edt::DirAbort as i32, false),
            C::RecordOutOfBounds { .. } => (Edt::DOffset as i32, true),
            C::SizeMismatch { .. } => (Edt::DMismatch as i32, true),
            C::Misaligned(_) => (Edt::DAlign as i32, true),
            C::BadAggId(_) => (Edt::BadAggVar as i32, true),
            C::FormatSyntax { .. } | C::MissingArgument(_) => (Edt::BadConv as i32, true),
            C::Compile(m) if m.contains("does not match any probes") => (Edt::NoProbe as i32, true),
            C::Compile(_) => (Edt::Compiler as i32, true),
            C::NotSupported(_) => (ENOTSUP, true),
            C::BadState(_) => (libc::EINVAL, true),
            C::Io(_) => (libc::EIO, true),
            C::BadWideChar(_) => (libc::EILSEQ, true),
            C::BadErrorProbe(_) => (Edt::BadError as i32, true),
            C::BadEpid(_) | C::BadFormat(_) | C::BadPrintType(_) => (Edt::DMismatch as i32, true),
            C::NoMatch { .. } => (Edt::NoProbe as i32, true),
            C::BadDescription { .. } => (Edt::Compiler as i32, true),
            C::Backend(m) if m.contains("does not match any probes") => (Edt::NoProbe as i32, true),
            C::Backend(_) => (Edt::EnablingErr as i32, true),
        };
        Fail {
            errno: code,
            msg: keep_msg.then(|| e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_follows_dtrace_numbering() {
        assert_eq!(
            edt_message(EDT_BASE),
            Some("Client requested version newer than library")
        );
        assert_eq!(
            edt_message(Edt::Compiler as i32),
            Some("Error in D program compilation")
        );
        assert_eq!(
            edt_message(Edt::BadOptName as i32),
            Some("Invalid option name")
        );
        assert_eq!(
            edt_message(Edt::EnablingErr as i32),
            Some("Failed to enable probe")
        );
        assert_eq!(edt_message(Edt::EnablingErr as i32 + 1), None);
        assert_eq!(edt_message(EDT_BASE - 1), None);
        assert_eq!(edt_message(i32::MIN), None);
    }

    #[test]
    fn consumer_errors_map_to_their_codes() {
        let f = Fail::from(ConsumerError::BadOptionName("nosuch".into()));
        assert_eq!(f, Fail::edt(Edt::BadOptName));
        let f = Fail::from(ConsumerError::Compile("line 1: syntax error".into()));
        assert_eq!(f.errno, Edt::Compiler as i32);
        assert_eq!(f.msg.as_deref(), Some("line 1: syntax error"));
        let f = Fail::from(ConsumerError::NotSupported("x".into()));
        assert_eq!(f.errno, ENOTSUP);
        assert_eq!(f.msg.as_deref(), Some("not yet supported: x"));
    }
}
