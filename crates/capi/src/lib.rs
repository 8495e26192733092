//! libdtrace's C interface: `dtrace.h` (in the repository's `include/`) and the `libdtrace.so` /
//! `libdtrace.a` this crate builds, with the functions, types, constants and callback protocol
//! of the Oracle guide's consumer API ([`api`]), over the Rust consumer (`dtrace-consumer`) joined
//! to this system's compiler and providers as `dtrace(1)` is (`dtrace-open`).
//!
//! The layers: [`api`] (the `extern "C"` shells), [`hdl`] (the handle, its registry and the
//! checked way into it), [`program`], [`consume`], [`aggregate`] and [`handlers`] (the work, in
//! safe Rust), [`ctypes`] (the C structures), [`errno`] (DTrace's error numbers and messages),
//! and `ffi`, the one module with unsafe code, each site justified.
//!
//! The safety contract of every entry point is the C header's: pointer arguments are NULL or
//! valid for what they point to; a handle is used by one thread at a time. Handles are checked
//! against the open ones, so NULL, closed or foreign handles fail with an error rather than crash.

#![allow(clippy::missing_safety_doc)]

pub mod aggregate;
pub mod api;
pub mod consume;
pub mod ctypes;
pub mod errno;
mod ffi;
pub mod handlers;
pub mod hdl;
pub mod program;
