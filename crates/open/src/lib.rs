//! `dtrace_open` on Linux: what joins a consumer [`Handle`] to this system, shared by `dtrace(1)`
//! and the C library (`libdtrace`). The D compiler sees the running kernel's types and the Linux
//! probes' argument types ([`ktypes`]); the tracer is the in-process framework with the kernel
//! providers of `dtrace-linux` registered when this kernel's probe catalogue can be read
//! ([`backend`], [`kernel`]); stacks and addresses print through the Linux symbol tables
//! ([`symbols`]); `%Y` and `%T` print in the local time zone ([`local_zone`]).
//!
//! It owns no tracing of its own: probes live in `dtrace-linux` and `dtrace-framework`, decoding
//! and printing in `dtrace-consumer`.

pub mod backend;
pub mod kernel;
pub mod ktypes;
pub mod symbols;

use dtrace_consumer::handle::Handle;

/// A consumer handle over this system's tracer, symbol tables and compiler, printing times in
/// the local zone. Unless `compiles` (D will be compiled), the kernel's types are read only if a
/// lookup asks for them; `ilp32` (`-32`) compiles D for the ILP32 data model.
pub fn handle(compiles: bool, ilp32: bool) -> Handle {
    let (tracer, symbols, compiler) = backend::open(compiles, ilp32);
    let mut h = Handle::open(tracer, Some(compiler));
    h.decoder.symbols = symbols;
    h.decoder.zone = local_zone();
    h
}

/// The local time zone `%Y` and `%T` print in, found as the C library finds it (`TZ`, `TZDIR`,
/// `/etc/localtime`).
pub fn local_zone() -> dtrace_consumer::timefmt::Zone {
    let tz = std::env::var_os("TZ").map(|v| v.to_string_lossy().into_owned());
    let tzdir = std::env::var_os("TZDIR").map(|v| v.to_string_lossy().into_owned());
    dtrace_consumer::timefmt::Zone::from_tz_env(tz.as_deref(), tzdir.as_deref(), &|p| {
        std::fs::read(p).ok()
    })
}
