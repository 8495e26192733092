//! Capture: what a consumer asks to record at a probe ([`spec`]), where it sits in a ring-buffer record
//! ([`layout`]), the eBPF that records it ([`codegen`], every address it reads evaluated by
//! [`address`]) and the decoder back to Rust values ([`record`]).

mod address;
pub mod chill;
pub mod codegen;
pub mod fault;
pub mod filter;
pub mod kagg;
pub mod kstack;
pub mod kvars;
pub mod layout;
pub mod mirror;
pub mod path;
pub mod record;
pub mod regs;
pub mod signal;
mod sized;
pub mod spec;
pub mod speculation;
pub mod tracemem;
pub mod ustack;
pub mod ustack_keys;
pub mod uunwind;

pub use codegen::{CtxKind, ProbeShape};
pub use layout::RecordLayout;
pub use path::{CapturedPath, PathError};
pub use record::{
    decode_record, CapturedEvent, CapturedMemory, CopySource, DeferredUpdate, FileStackCapture,
    Record, StackCapture, UserFrame, UserStackCopy,
};
pub use spec::{
    AddrBase, AddrExpr, ArgSource, CaptureSpec, Condition, CopyRequest, Identity, KernelAgg,
    KernelAggClause, KernelAggs, KernelFilter, KernelSignal, KernelSignals, KernelStacks,
    KernelVars, KeyKind, MemKind, MirrorOp,
};
