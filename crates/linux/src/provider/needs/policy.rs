//! The sizes a capture takes from the program's options and D's defaults: `strsize` (the most
//! bytes of a string copy), the frames of `stack()`/`ustack()`, and the frames `caller` and
//! `ucaller` read.

use crate::capture::spec::MAX_COPY_SIZE;
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
