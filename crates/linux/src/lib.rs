//! The Linux substrate of DTrace: everything that talks to the running kernel.
//!
//! It owns the eBPF layer ([`bpf`]: the bpf(2) wrapper, our own instruction assembler, maps, program
//! loading with the verifier log, ring buffers), attachment to tracepoints, raw tracepoints and perf
//! events ([`attach`]), the probe catalogue read from tracefs ([`catalog`], [`tracefs`]), the capture
//! programs generated per enabled probe and the decoding of what they record ([`capture`]), capture
//! sessions ([`session`]), symbolization of kernel and user stacks ([`symbols`], with `.eh_frame`
//! unwinding of user stacks captured as registers and stack bytes), process control for `-c`/`-p`
//! ([`process`]), kernel feature detection ([`features`]) and reading the kernel on demand from the
//! calling thread for the probes that fire in `dtrace` itself ([`live`]).
//!
//! User programs are traced on uprobes ([`uprobe`]): the `pid` provider's probes come from the ELF
//! symbol tables of the objects a process maps ([`catalog::pid`]), USDT probes from their
//! `.note.stapsdt` notes ([`catalog::usdt`]); [`provider::user`] registers one framework provider per
//! process a program names (`pid123`, `python123`). Where the kernel has uprobe-multi links, one link
//! places every probe of an object, process and kind, and a dispatcher tail-calls each probe's
//! program by the link's cookie (see `session`), so thousands of probes detach at once.
//!
//! Syscall probes fire from the `sys_enter`/`sys_exit` raw tracepoints through one generated dispatcher
//! per direction that tail-calls the enabled probe's program by syscall number, so `syscall:::entry`
//! attaches and detaches hundreds of probes in about a second; other tracepoints use perf events.
//!
//! It delivers [`capture::CapturedEvent`]s (probe context, copied memory, stacks) to the
//! framework, which runs predicates and actions in the DIF interpreter, except for the clauses
//! whose DIF translates to eBPF: their predicates, aggregations, variables and records run at the
//! probe, and the records they build are committed to the framework's buffers; [`provider`] registers
//! the catalogue as framework providers and does that delivery, and drives the framework's `profile`
//! probes from cpu-clock perf events ([`provider::profile`]). The delivery remembers the mappings of
//! the processes events come from, so the consumer prints user stacks of processes that have exited.
//!
//! The BPF layer is a thin one of our own over `libc` rather than a crate such as `aya`: every program
//! we load is generated at run time as raw instructions, we use a handful of commands (map create and
//! element access, program load, raw tracepoint open) and perf_event_open, and owning these ~300 lines
//! keeps the verifier-log handling, teardown order and error messages under our control with no
//! build-time dependency on BTF-relocating loaders or their ELF object model.

pub mod attach;
pub mod bpf;
pub mod btf;
pub mod capture;
pub mod catalog;
pub mod debug;
pub mod error;
mod fasthash;
pub mod features;
mod held;
pub mod kconfig;
pub mod kprobe;
pub mod live;
pub mod mapping;
pub mod process;
pub mod provider;
pub mod rlc;
pub mod room;
pub mod rtld;
pub mod session;
pub mod signals;
pub mod symbols;
pub mod syscall_fentry;
pub mod topology;
pub mod tracefs;
pub mod uprobe;
pub mod vtime;
pub mod wait;
pub mod wakeup;

pub use catalog::{Catalog, Probe, ProbeDesc};
pub use error::{LinuxError, Result};
pub use provider::LinuxTracing;
pub use session::{Session, SessionOptions};

/// Whether this process can use BPF tracing here: root (or the capabilities), the bpf(2) call
/// present. Used by tests to decide whether to skip.
pub fn bpf_available() -> bool {
    bpf::Map::create(bpf::MapKind::Array, "dt_probe", 4, 8, 1).is_ok()
}
