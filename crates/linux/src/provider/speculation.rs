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
use crate::capture::speculation::{decode_lost, lost_count, INACTIVE, MAX_KERNEL_NSPEC};
use crate::error::Result;
use dtrace_dif::program::{ActionKind, EcbDesc};

/// The name `-v` gives the speculations among a clause's variables.
pub const SPECULATIONS: &str = "speculations";

/// Whether clause `e` uses speculations: calls `speculation()`, or `speculate()`, `commit()` or
/// `discard()`.
pub fn uses_speculations(e: &EcbDesc) -> bool {
    use dtrace_dif::subr::Subr;
    let calls = e
        .predicate
        .iter()
        .chain(e.actions.iter().filter_map(|a| a.difo.as_ref()))
        .flat_map(|o| o.subrs_called())
        .any(|s| s == Subr::Speculation);
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

/// What the kernel counted of the speculations since the previous look, all CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecCounts {
    /// `speculation()` calls that failed while a speculation was busy.
    pub busy: u64,
    /// `speculation()` calls that failed with every speculation in use.
    pub unavail: u64,
    /// Speculative drops: clauses whose record is larger than `specsize`.
    pub drops: u64,
}

/// A speculation whose `commit()` or `discard()` the ring had no room for (see
/// `capture::speculation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LostSettle {
    /// Its id.
    pub id: u32,
    /// It was a `commit()` (else a `discard()`).
    pub commit: bool,
    /// The CPU that ran it.
    pub cpu: u32,
}

/// The kernel's maps of the speculations (see `capture::speculation`).
pub struct KernelSpecMaps {
    states: Map,
    fails: Map,
    nspec: u32,
    specsize: u64,
    /// The counts already reported (all CPUs).
    reported: SpecCounts,
    /// The lost settles counted when the states were last looked at.
    lost_seen: u64,
    /// The lost settles reported and not freed yet.
    lost_pending: Vec<u32>,
}

/// The bytes of one CPU's value of the failure counts (busy, unavailable, speculative drops).
const FAIL_VALUE: u32 = 24;

impl KernelSpecMaps {
    /// The maps of `nspec` speculations of `specsize` bytes, all inactive.
    pub fn new(nspec: u32, specsize: u64) -> Result<KernelSpecMaps> {
        let nspec = nspec.clamp(1, MAX_KERNEL_NSPEC);
        Ok(KernelSpecMaps {
            // The states, then the count of lost settles.
            states: Map::create(MapKind::Array, "dt_spec", 4, 8, lost_count(nspec) + 1)?,
            fails: Map::create(MapKind::PerCpuArray, "dt_spec_fail", 4, FAIL_VALUE, 1)?,
            nspec,
            specsize,
            reported: SpecCounts::default(),
            lost_seen: 0,
            lost_pending: Vec::new(),
        })
    }

    /// The probe's view of them.
    pub fn specs(&self) -> KernelSpecs {
        KernelSpecs {
            states: self.states.raw_fd(),
            fails: self.fails.raw_fd(),
            nspec: self.nspec,
            specsize: self.specsize,
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

    /// What the probes counted since the previous call.
    pub fn take_counts(&mut self) -> Result<SpecCounts> {
        let Some(values) = self.fails.lookup(&0u32.to_ne_bytes())? else {
            return Ok(SpecCounts::default());
        };
        let word = |b: &[u8], i: usize| {
            b.get(i * 8..i * 8 + 8)
                .and_then(|w| w.try_into().ok())
                .map_or(0, u64::from_ne_bytes)
        };
        let mut all = SpecCounts::default();
        // Per-CPU values are 8-byte aligned: 24 bytes each.
        for cpu in values.chunks(FAIL_VALUE as usize) {
            all.busy += word(cpu, 0);
            all.unavail += word(cpu, 1);
            all.drops += word(cpu, 2);
        }
        let new = SpecCounts {
            busy: all.busy.saturating_sub(self.reported.busy),
            unavail: all.unavail.saturating_sub(self.reported.unavail),
            drops: all.drops.saturating_sub(self.reported.drops),
        };
        self.reported = all;
        Ok(new)
    }

    /// The speculations left [`lost`](crate::capture::speculation::lost) by a `commit()` or
    /// `discard()` the ring had no room for, not reported before. The states are read only
    /// when the kernel counted a lost settle since the previous look.
    pub fn lost(&mut self) -> Result<Vec<LostSettle>> {
        let word = |b: Option<Vec<u8>>| {
            b.and_then(|v| v.get(..8).and_then(|w| w.try_into().ok()))
                .map_or(0, u64::from_ne_bytes)
        };
        let count = word(self.states.lookup(&lost_count(self.nspec).to_ne_bytes())?);
        if count == self.lost_seen {
            return Ok(Vec::new());
        }
        self.lost_seen = count;
        let mut out = Vec::new();
        for i in 0..self.nspec {
            let id = i + 1;
            if self.lost_pending.contains(&id) {
                continue;
            }
            let state = word(self.states.lookup(&i.to_ne_bytes())?);
            if let Some((commit, cpu)) = decode_lost(state) {
                self.lost_pending.push(id);
                out.push(LostSettle { id, commit, cpu });
            }
        }
        Ok(out)
    }

    /// Frees speculation `id`, reported by [`KernelSpecMaps::lost`], once dtrace settled it.
    pub fn release_lost(&mut self, id: u32) -> Result<()> {
        self.lost_pending.retain(|&p| p != id);
        self.release(id)
    }
}
