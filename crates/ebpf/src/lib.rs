//! eBPF code generation for DTrace, with no OS calls: the instruction encoding and a small assembler
//! ([`insn`]), the translator from verified DIF to eBPF ([`translate`]) that lets D run at the
//! probe instead of in the consumer's interpreter (DESIGN.md §4, stage 2), and the walk of a
//! `struct path` both the capture programs and the translated `d_path()` make ([`dpath`]).
//!
//! It is a crate of its own, not a module of `dtrace-linux`, so that everything here is pure
//! computation: `#![forbid(unsafe_code)]`, unit-testable without privileges or a kernel, and shared
//! by every attachment (tracepoints, raw tracepoints, perf events, uprobes, fentry/kprobes) through
//! the one [`translate::ProbeContext`] trait each of them implements for the values only it knows
//! how to read. `dtrace-linux` loads what is generated here and re-exports [`insn`] as `bpf::insn`.

#![forbid(unsafe_code)]

pub mod dpath;
pub mod fuzzing;
pub mod insn;
pub mod translate;

pub use insn::{Asm, AsmError, Insn, Label, Reg, Size};
