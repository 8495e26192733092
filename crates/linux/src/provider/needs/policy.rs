//! The sizes a capture takes from the program's options and D's defaults: `strsize` (the most
//! bytes of a string copy), `scratchsize` (the most bytes of a copy sized at the probe), the
//! frames of `stack()`/`ustack()`, and the frames `caller` and `ucaller` read.

use crate::capture::spec::{MAX_COPY_SIZE, MAX_SIZED_COPY};
use dtrace_dif::program::Program;

/// Default `strsize` (characters of a string, its NUL not counted).
pub const DEFAULT_STRSIZE: u32 = 256;
/// Bytes of a string under the default `strsize`: its characters and the NUL.
pub const DEFAULT_STRING_STORAGE: u32 = DEFAULT_STRSIZE + 1;
/// Default `stackframes`.
pub const DEFAULT_STACKFRAMES: u32 = 20;
/// Default `ustackframes`.
pub const DEFAULT_USTACKFRAMES: u32 = 100;

/// Frames a `stack(N)` action or aggregation key records: `N`, or the `stackframes` default for
/// `stack()`.
pub fn stack_frames(arg: u64) -> u32 {
    match arg {
        0 => DEFAULT_STACKFRAMES,
        n => u32::try_from(n).unwrap_or(u32::MAX),
    }
}

/// Frames a `ustack(N)` or `jstack(N)` action or key records: `N` (the argument's low 32 bits; its
/// high ones give the string space), or the `ustackframes` default for `ustack()`.
pub fn ustack_frames(arg: u64) -> u32 {
    match (arg & 0xffff_ffff) as u32 {
        0 => DEFAULT_USTACKFRAMES,
        f => f,
    }
}

/// Kernel frames captured for `caller`: enough to pass the tracing functions above the probe site.
pub const CALLER_FRAMES: u32 = crate::capture::spec::TRACING_FRAMES;
/// User frames captured for `ucaller`: the PC and its caller.
pub const UCALLER_FRAMES: u32 = 2;

/// Bytes of a string in a program (its `strsize` pragma, else the default, and the NUL): what the
/// interpreter keeps of one and the most a string copy takes; the needs of the program are
/// computed with it (and [`super::spec_for`] is given it).
pub fn program_strsize(program: &Program) -> u32 {
    program
        .options
        .iter()
        .rev()
        .find(|(n, _)| n == "strsize")
        .and_then(|(_, v)| v.as_deref())
        .and_then(dtrace_dif::optval::parse_size)
        .map(|s| s.saturating_add(1).clamp(2, u64::from(MAX_COPY_SIZE)) as u32)
        .unwrap_or(DEFAULT_STRING_STORAGE)
}

/// The most bytes a copy sized at the probe takes (`copyin(arg1, arg2)`): what one `copyin()`
/// of the interpreter may allocate, the program's `scratchsize` (rounded up to 8 bytes, as the
/// framework rounds it; the framework's default where the program sets none), at most
/// [`MAX_SIZED_COPY`]. A longer copy faults in the interpreter (out of scratch space) before it
/// reads a byte, so the probe need take no more.
pub fn sized_copy_limit(program: &Program) -> u32 {
    program_scratchsize(program).min(u64::from(MAX_SIZED_COPY)) as u32
}

/// The program's `scratchsize` as the framework sizes the interpreter's alloca area with it:
/// rounded up to 8 bytes, the framework's default where the program sets none (past it
/// `alloca()` and `copyin()` fault).
pub fn program_scratchsize(program: &Program) -> u64 {
    program
        .options
        .iter()
        .rev()
        .find(|(n, _)| n == "scratchsize")
        .and_then(|(_, v)| v.as_deref())
        .and_then(dtrace_dif::optval::parse_size)
        .unwrap_or(dtrace_framework::Options::default().scratchsize)
        .div_ceil(8)
        .saturating_mul(8)
}

/// The sizes the needs of a program's clauses are computed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyLimits {
    /// Bytes of a string ([`program_strsize`]).
    pub strsize: u32,
    /// The most bytes of a copy sized at the probe ([`sized_copy_limit`]).
    pub sized: u32,
}

impl CopyLimits {
    /// The limits of `program`.
    pub fn of(program: &Program) -> CopyLimits {
        CopyLimits {
            strsize: program_strsize(program),
            sized: sized_copy_limit(program),
        }
    }
}
