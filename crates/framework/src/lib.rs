//! The framework: the probe-context half of DTrace (in DTrace, the kernel).
//!
//! It owns the probe registry and the provider trait, ECBs and EPIDs, running predicates and actions
//! through the DIF interpreter, per-CPU principal buffers, aggregation buffers, speculations and the
//! `dtrace` provider. It hands the consumer bytes in the published record format plus the metadata to
//! decode them ([`records`]). It does not compile D nor format output.
//!
//! Modules, in DTrace's vocabulary: [`options`] (framework options and DTrace's value syntax),
//! [`provider`] (the provider trait and probe registry), [`glob`] (probe description matching),
//! [`layout`] (record layout of ECBs), [`framework`] (the session: enabling, go, stop, snapshots,
//! status), [`exec`] (probe context: predicates, actions, faults and the ERROR probe), [`context`] (what
//! a firing carries), [`memory`] (memory captured with a firing), [`buffer`] (principal buffers and their policies), [`aggregate`] (the aggregating
//! functions and aggregation buffers), [`speculation`], [`providers`] (`dtrace`, `profile`), [`records`]
//! (the contract with the consumer), [`fuzzing`] (fuzz entry points).
//!
//! Threads: a [`Framework`] is driven by one thread (it is `Send`, not shared); providers on other
//! threads send firings through an [`EventSender`], fired in order by [`Framework::process_events`] (also
//! called by [`Framework::poll`] and [`Framework::stop`]).
//!
//! How a consumer drives it:
//! ```
//! use dtrace_dif::asm::assemble;
//! use dtrace_dif::program::{ActionDesc, ActionKind, EcbDesc, ProbeDesc, Program};
//! use dtrace_framework::{Framework, Options};
//!
//! // BEGIN { trace(42); exit(0); }
//! let trace = ActionDesc { kind: ActionKind::DifExpr, difo: Some(assemble("setx 42, %r1\nret %r1\n").unwrap()),
//!                          arg: 0, uarg: 0, ntuple: 0 };
//! let exit = ActionDesc { kind: ActionKind::Exit, difo: Some(assemble("ret %r0\n.rtype int 4\n").unwrap()),
//!                         arg: 0, uarg: 0, ntuple: 0 };
//! let begin = ProbeDesc { provider: "dtrace".into(), name: "BEGIN".into(), ..ProbeDesc::default() };
//! let program = Program { ecbs: vec![EcbDesc { probe: begin, predicate: None, actions: vec![trace, exit], line: 0 }],
//!                         ..Program::default() };
//!
//! let mut fw = Framework::new(Options::default(), 1);
//! fw.set_option("bufsize", Some("1m")).unwrap();
//! let enabling = fw.enable(&program, false).unwrap();       // "matched 1 probe"
//! assert_eq!(enabling.matched, 1);
//! fw.go().unwrap();                                          // fires BEGIN
//! loop {
//!     fw.poll();                                             // timers, queued events, cleaning
//!     for snap in fw.switch_all() {                          // at switchrate
//!         // decode snap.data with enabling.eprobes (records::EprobeDesc) ...
//!         assert_eq!(snap.data.len() % 8, 0);
//!     }
//!     let _aggs = fw.snapshot_aggregations();                // at aggrate: deltas to accumulate
//!     if fw.status().exit_status.is_some() { break; }        // at statusrate
//! }
//! fw.stop().unwrap();                                        // fires END
//! let _last = fw.switch_all();
//! ```

pub mod aggregate;
pub mod buffer;
pub mod context;
pub mod error;
pub mod exec;
pub mod framework;
pub mod fuzzing;
pub mod glob;
pub mod layout;
pub mod memory;
pub mod options;
pub mod provider;
pub mod providers;
pub mod records;
pub mod speculation;

pub use context::{CpuPlace, FiringContext};
pub use error::FrameworkError;
pub use framework::{
    Activity, Clock, DestructiveRequest, Enabling, EventSender, Framework, ManualClock, ProbeEvent,
    Status, SystemClock,
};
pub use memory::CapturedMemory;
pub use options::{BufPolicy, BufResize, OptionError, Options};
pub use provider::{ProbeRegistry, Provider};
