//! The DTrace consumer library (libdtrace's consumer half): the handle API of the Oracle guide in Rust
//! form ([`handle`]), decoding the framework's buffers by EPID and record descriptions ([`consume`]),
//! the consumer's merged copy of the aggregations ([`aggregate`]), and every output format byte-exact
//! with DTrace: `printf` ([`printf`], on the C engine [`cformat`]), `trace()` and byte dumps
//! ([`bytes`]), `print()` of typed data ([`typeprint`]), aggregation printing and `printa`
//! ([`aggprint`]), the `agghist`/`aggpack` layouts ([`aggdisplay`]), distribution graphs
//! ([`quantize`]), stacks and symbols ([`stack`], [`symbols`]), options ([`options`]), drop and error
//! messages ([`status`]), programs' stability reports ([`proginfo`]), and the structured formats
//! (JSON, folded stacks, flame graphs, OpenMetrics: [`oformat`]).
//!
//! It does not compile D (`dtrace-compiler`) nor run probes (`dtrace-framework`, `dtrace-linux`): those
//! are reached through the [`handle::Compiler`] and [`handle::Tracer`] seams. It makes no OS calls of its
//! own: `system()`, `freopen()` and symbol lookups go through traits the embedding program implements.

pub mod aggdisplay;
pub mod aggprint;
pub mod aggregate;
pub mod aggvalue;
pub mod bytes;
pub mod cformat;
pub mod consume;
pub mod dcompile;
pub mod error;
pub mod fuzz_entry;
pub mod fwtracer;
pub mod handle;
pub mod listing;
pub mod oformat;
pub mod options;
pub mod printf;
pub mod proginfo;
pub mod quantize;
pub mod recdata;
pub mod stack;
pub mod status;
pub mod symbols;
pub mod temporal;
pub mod timefmt;
pub mod typeprint;

pub use consume::{ConsumeAction, Decoder, ProbeData};
pub use error::{ConsumerError, Result};
pub use handle::{CompileFlags, Compiler, ExecInfo, Handle, ProbeSpec, Tracer, WorkStatus};
