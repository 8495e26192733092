//! The eBPF layer: the bpf(2) wrapper, the instruction assembler, maps, program loading and ring-buffer
//! consumption. A thin layer of our own over `libc` (see the crate docs for why).

pub use dtrace_ebpf::insn;
pub mod btf_obj;
pub mod funcinfo;
pub mod map;
pub mod prog;
pub mod ringbuf;
pub mod sys;

pub use insn::{Asm, Insn, Label, Reg, Size};
pub use map::{Map, MapKind};
pub use prog::{ProgKind, Program};
pub use ringbuf::RingBuf;
