//! The DIF interpreter and what it is handed.
//!
//! - [`env`]: the traits through which the VM sees the probe context and memory.
//! - [`state`]: options and the variable state the caller keeps across firings.
//! - [`dynvar`]: the dynamic variable space (thread-locals, associative arrays) with its cleaner.
//! - [`machine`]: per-firing state (scratch, clause-locals) and the VM address space.
//! - [`prepare`]: the pre-decoded form of a DIF object the loop runs ([`Prepared`]).
//! - [`interp`]: the instruction loop ([`Machine::run_prepared`]).
//! - [`subr`]: the subroutines of `call`.
//! - [`fault`]: run-time faults for the ERROR probe.
//! - [`fake`]: in-memory context and memory for tests.
//!
//! Typical use by the framework, per probe firing:
//! ```
//! use dtrace_dif::vm::{fake::{FakeContext, FakeMemory}, Machine, VarState, VmOptions};
//! use dtrace_dif::asm::assemble;
//! let obj = assemble("setx DT_INTEGER[0], %r1 ! 42\nret %r1\n").unwrap();
//! let mut state = VarState::new(VmOptions::default());
//! let mut m = Machine::new();
//! let (mut ctx, mut mem) = (FakeContext::new(), FakeMemory::new());
//! m.begin_firing();
//! assert_eq!(m.run(&obj, &mut state, &mut ctx, &mut mem), Ok(42));
//! ```

pub mod dynvar;
pub mod env;
pub mod fake;
pub mod fault;
pub mod interp;
pub mod machine;
pub mod prepare;
pub mod state;
pub mod subr;

pub use env::{is_string_var, Memory, NoMemory, ProbeContext};
pub use fault::{Fault, FaultKind};
pub use machine::{Machine, ALLOCA_BASE, DYN_BASE, SCRATCH_BASE, STRTAB_BASE};
pub use prepare::Prepared;
pub use state::{DynKey, DynScope, DynScopeTag, DynVarSpace, KeyElem, Stored, VarState, VmOptions};
