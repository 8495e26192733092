//! The DIF virtual machine: DTrace's intermediate format.
//!
//! This crate owns the DIF instruction set ([`opcode`], [`instr`]), DIF objects and their tables
//! ([`object`]), built-in variable and subroutine numbers ([`vars`], [`subr`]), the description of a
//! compiled program that the framework executes ([`program`]) with its stability attributes ([`attr`]), the text assembler ([`asm`]) and the
//! `dtrace -S` disassembler ([`disasm`]), the syntax of option values ([`optval`]), the load-time verifier ([`verify`]), the data-flow analysis of what registers hold ([`flow`]) and the interpreter with its
//! subroutines, variable spaces and faults ([`vm`]). [`fuzzing`] holds the entry points of the fuzz targets.
//! It has no OS code: probe context and memory are traits the caller hands in ([`vm::ProbeContext`],
//! [`vm::Memory`]). It does not parse D (that is `dtrace-compiler`) nor manage buffers or providers (that
//! is `dtrace-framework`).

pub mod asm;
pub mod attr;
pub mod disasm;
pub mod flow;
pub mod fuzzing;
pub mod instr;
pub mod object;
pub mod opcode;
pub mod optval;
pub mod program;
pub mod subr;
pub mod vars;
pub mod verify;
pub mod vm;

pub use instr::{DecodeError, Instr, Reg};
pub use object::{DifObject, DifType, VarEntry};
pub use opcode::{Format, Opcode};
pub use program::{ActionDesc, ActionKind, EcbDesc, LibAction, ProbeDesc, Program, RecDesc};
pub use subr::Subr;
