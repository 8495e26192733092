//! What a D program needs captured at each probe: the user memory its clauses read with `copyinstr`
//! and `copyin` (found by following probe arguments through the DIF registers to the subroutine
//! call, with the DIF data-flow of [`dtrace_dif::flow`]; the length too when a probe argument gives
//! it, and user pointers read from memory a `copyin` of the same probe copied, as in execve's
//! argv), the kernel memory they read through `curthread` and probe arguments
//! (`curthread->real_parent->pid`, `args[0]->field`, the D library's `curpsinfo` translations:
//! chains of constant offsets and pointer loads, each step captured) and the stacks their
//! `stack()`/`ustack()` actions record, and the thread-locals whose addresses another probe copies
//! from (`self->buf = arg1` at `read:entry`, `copyin(self->buf, arg0)` at `read:return`: the
//! storing probe mirrors the address in the kernel). The provider turns these into one
//! [`CaptureSpec`](crate::capture::CaptureSpec) per enabled probe, the union over every clause
//! enabled on it, with neighbouring kernel copies of one object merged.
//!
//! One module per concern: `scan.rs` (what one DIF object asks to capture), `program.rs` (the
//! clauses of a program), `clause.rs` (what a clause needs), `mirror.rs` (thread-locals copied
//! from at another probe), `pid_filter.rs` (the `pid == N` predicate), `spec.rs` (a probe's
//! capture spec), `merge.rs` (merging its kernel copies), `policy.rs` (sizes from options and
//! defaults), `fuzz.rs` (the fuzz target's entry).

mod clause;
mod fuzz;
mod merge;
mod mirror;
mod pid_filter;
mod policy;
mod program;
mod scan;
mod spec;

pub use clause::{ClauseNeeds, ALL_ARGS};
pub use fuzz::fuzz_entry;
pub use policy::{
    program_scratchsize, program_strsize, stack_frames, ustack_frames, CALLER_FRAMES,
    DEFAULT_STACKFRAMES, DEFAULT_STRING_STORAGE, DEFAULT_STRSIZE, DEFAULT_USTACKFRAMES,
    UCALLER_FRAMES,
};
pub use program::{mirror_context, program_needs, program_needs_in, MirrorContext, ProgramNeeds};
pub use spec::{spec_for, spec_or_kernel_only};

#[cfg(test)]
mod mirror_tests;
#[cfg(test)]
mod sized_tests;
#[cfg(test)]
mod smoke_tests;
#[cfg(test)]
mod tests;
