//! `dyntrace(1)`: an instruction-level execution profiler for Linux x86-64.
//!
//! It runs a command or attaches to a process, traces every instruction each thread executes (by ptrace
//! single-step, or trapping once per basic block), names each instruction from an opcode description
//! file, groups the counts by program image and memory region type, times them when the machine has
//! cycle counters, and writes an XML profile (`share/dyntrace/dyntrace.dtd`). It owns its own ptrace,
//! `/proc` and perf plumbing; it shares no code with the DTrace crates.

pub mod bitmask;
pub mod block;
pub mod block_threads;
pub mod cli;
pub mod decode;
pub mod emu;
pub mod emu_alu;
pub mod error;
mod fuzz_smoke;
pub mod launch;
pub mod maps;
pub mod oplist;
pub mod oplist_gen;
pub mod perf;
pub mod profile;
pub mod ptrace;
pub mod signals;
pub mod tracer;

pub use error::{Error, Result};
