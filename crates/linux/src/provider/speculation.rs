//! Speculations kept in the kernel, the consumer's side (the probe's side is
//! `capture::speculation`): which clauses use them, the kernel's maps of their states and failure
//! counts, and freeing a speculation once dtrace consumed its `commit()` or `discard()`.
//!
//! Speculations are one resource shared by every clause that calls `speculation()`,
//! `speculate()`, `commit()` or `discard()`: they live in the kernel only when every such clause
//! runs whole there, which `provider::kvars` decides by taking them as one more variable that
//! those clauses share ([`SPECULATIONS`]), so the two paths never share a speculation.

use crate::bpf::{Map, MapKind};
use crate::capture::spec::KernelSpecs;
use crate::capture::speculation::{INACTIVE, MAX_KERNEL_NSPEC};
use crate::error::Result;
use dtrace_dif::program::{ActionKind, EcbDesc};

/// The name `-v` gives the speculations among a clause's variables.
pub const SPECULATIONS: &str = "speculations";

/// Whether clause `e` uses speculations: calls `speculation()`, or `speculate()`, `commit()` or
/// `discard()`.
pub fn uses_speculations(e: &EcbDesc) -> bool {
    use dtrace_dif::instr::Instr;
    use dtrace_dif::subr::Subr;
    let calls = e
        .predicate
        .iter()
        .chain(e.actions.iter().filter_map(|a| a.difo.as_ref()))
        .flat_map(|o| &o.text)
        .any(|w| {
            matches!(Instr::decode(*w), Ok(Instr::Call { subr, .. })
                if Subr::from_u16(subr) == Some(Subr::Speculation))
        });
    calls
        || e.actions.iter().any(|a| {
            matches!(
                a.kind,
                ActionKind::Speculate | ActionKind::Commit | ActionKind::Discard
            )
        })
}

/// Why the speculations cannot live in the kernel with `nspec` of them (`None`: they can).
pub fn not_kept(nspec: u32) -> Option<String> {
    (nspec > MAX_KERNEL_NSPEC)
        .then(|| format!("nspec is above the kernel's {MAX_KERNEL_NSPEC} speculations"))
}

/// The kernel's maps of the speculations (see `capture::speculation`).
pub struct KernelSpecMaps {
    states: Map,
    fails: Map,
    nspec: u32,
    /// The failures already reported: (busy, unavailable), all CPUs.
    reported: (u64, u64),
}

impl KernelSpecMaps {
    /// The maps of `nspec` speculations, all inactive.
    pub fn new(nspec: u32) -> Result<KernelSpecMaps> {
        let nspec = nspec.clamp(1, MAX_KERNEL_NSPEC);
        Ok(KernelSpecMaps {
            states: Map::create(MapKind::Array, "dt_spec", 4, 8, nspec)?,
            fails: Map::create(MapKind::PerCpuArray, "dt_spec_fail", 4, 16, 1)?,
            nspec,
            reported: (0, 0),
        })
    }

    /// The probe's view of them.
    pub fn specs(&self) -> KernelSpecs {
        KernelSpecs {
            states: self.states.raw_fd(),
            fails: self.fails.raw_fd(),
            nspec: self.nspec,
        }
    }

    /// Frees speculation `id` once dtrace consumed its `commit()` or `discard()`.
    pub fn release(&self, id: u32) -> Result<()> {
        let Some(i) = id.checked_sub(1).filter(|&i| i < self.nspec) else {
            return Ok(());
        };
        self.states
            .update(&i.to_ne_bytes(), &INACTIVE.to_ne_bytes())
    }

    /// The `speculation()` calls that failed at the probes since the previous call: (while one
    /// was busy, with every one in use).
    pub fn take_fails(&mut self) -> Result<(u64, u64)> {
        let Some(values) = self.fails.lookup(&0u32.to_ne_bytes())? else {
            return Ok((0, 0));
        };
        let word = |b: &[u8], i: usize| {
            b.get(i * 8..i * 8 + 8)
                .and_then(|w| w.try_into().ok())
                .map_or(0, u64::from_ne_bytes)
        };
        let (mut busy, mut unavail) = (0u64, 0u64);
        for cpu in values.chunks(16) {
            busy += word(cpu, 0);
            unavail += word(cpu, 1);
        }
        let new = (
            busy.saturating_sub(self.reported.0),
            unavail.saturating_sub(self.reported.1),
        );
        self.reported = (busy, unavail);
        Ok(new)
    }
}
