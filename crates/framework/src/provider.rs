//! The provider interface and the probe registry: providers publish probes (`provide`), the framework
//! numbers them (probe ids from 1, in creation order), matches probe descriptions against them, and asks
//! providers to enable and disable them. Stability attributes and argument descriptions are what
//! `dtrace -l -v` prints.

use crate::glob::desc_matches;
use crate::records::ProbeInfo;
use dtrace_dif::program::ProbeDesc;
use std::collections::HashMap;
use thiserror::Error;

pub use dtrace_dif::attr::{Attribute, DepClass, ProviderAttributes, Stability};

/// A typed argument of a probe (`dtrace_argdesc_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgDesc {
    /// The argument's native C type.
    pub native: String,
    /// The translated type, if a translator applies.
    pub xlate: Option<String>,
    /// Which raw argument it is taken from.
    pub mapping: u32,
}

/// Errors from providers.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProviderError {
    /// The provider cannot enable this probe.
    #[error("cannot enable probe {probe}: {reason}")]
    Enable {
        /// `provider:module:function:name`.
        probe: String,
        /// Why.
        reason: String,
    },
    /// A provider with this name is already registered.
    #[error("provider {0} is already registered")]
    Duplicate(String),
}

/// Where a provider creates its probes during [`Provider::provide`].
pub struct ProbeSink<'a> {
    registry: &'a mut ProbeRegistry,
    provider: usize,
    name: String,
}

impl ProbeSink<'_> {
    /// Creates probe `module:function:name` of this provider unless it exists; returns its id.
    pub fn create(&mut self, module: &str, function: &str, name: &str) -> u32 {
        self.registry
            .create(self.provider, &self.name, module, function, name)
    }

    /// The id of an existing probe of this provider.
    pub fn lookup(&self, module: &str, function: &str, name: &str) -> Option<u32> {
        self.registry.lookup(self.provider, module, function, name)
    }
}

/// A source of probes (`dtrace_pops_t`). Providers are driven from the framework's thread; one that
/// produces events on other threads sends them through [`crate::EventSender`].
pub trait Provider: Send {
    /// The provider's name (`dtrace`, `profile`, `syscall`, ...).
    fn name(&self) -> &str;

    /// Its stability attributes.
    fn attributes(&self) -> ProviderAttributes;

    /// Creates the probes matching `desc` (all the probes it always has when `desc` is `None`).
    fn provide(&mut self, desc: Option<&ProbeDesc>, sink: &mut ProbeSink<'_>);

    /// Starts firing `probe`.
    fn enable(&mut self, probe: &ProbeInfo) -> Result<(), ProviderError>;

    /// Stops firing `probe`.
    fn disable(&mut self, probe: &ProbeInfo);

    /// The typed description of argument `index` of `probe`, if it has one.
    fn arg_desc(&self, _probe: &ProbeInfo, _index: u32) -> Option<ArgDesc> {
        None
    }

    /// Timer-driven providers: the probe firings due at `now` (monotonic nanoseconds), pushed as
    /// `(probe id, cpu, time it was due)`; `ncpus` is the number of CPUs being traced. Others fire
    /// nothing here.
    fn poll(&mut self, _now: u64, _ncpus: u32, _due: &mut Vec<(u32, u32, u64)>) {}

    /// The earliest time a call to [`Provider::poll`] could fire something, if ever.
    fn next_deadline(&self) -> Option<u64> {
        None
    }
}

/// A registered probe.
#[derive(Debug, Clone)]
pub struct Probe {
    /// Its identity.
    pub info: ProbeInfo,
    /// Index of its provider in the registry.
    pub provider: usize,
}

/// The table of providers and probes.
#[derive(Default)]
pub struct ProbeRegistry {
    providers: Vec<Box<dyn Provider>>,
    probes: Vec<Probe>,
    by_name: HashMap<(usize, String, String, String), u32>,
}

impl ProbeRegistry {
    /// Registers a provider and lets it create its standing probes.
    pub fn register(&mut self, provider: Box<dyn Provider>) -> Result<usize, ProviderError> {
        if self.providers.iter().any(|p| p.name() == provider.name()) {
            return Err(ProviderError::Duplicate(provider.name().to_string()));
        }
        self.providers.push(provider);
        let idx = self.providers.len() - 1;
        self.provide(idx, None);
        Ok(idx)
    }

    /// Puts `provider` in the place of the registered provider of the same name (registering it
    /// when there is none): the probes already created keep their ids and now belong to it.
    pub fn replace(&mut self, provider: Box<dyn Provider>) -> usize {
        match self
            .providers
            .iter()
            .position(|p| p.name() == provider.name())
        {
            Some(idx) => {
                self.providers[idx] = provider;
                self.provide(idx, None);
                idx
            }
            None => {
                self.providers.push(provider);
                let idx = self.providers.len() - 1;
                self.provide(idx, None);
                idx
            }
        }
    }

    fn provide(&mut self, idx: usize, desc: Option<&ProbeDesc>) {
        // Take the provider out while it writes into the registry.
        let mut p = std::mem::replace(&mut self.providers[idx], Box::new(NullProvider));
        let name = p.name().to_string();
        let mut sink = ProbeSink {
            registry: self,
            provider: idx,
            name,
        };
        p.provide(desc, &mut sink);
        self.providers[idx] = p;
    }

    fn create(
        &mut self,
        provider: usize,
        provider_name: &str,
        module: &str,
        function: &str,
        name: &str,
    ) -> u32 {
        let key = (
            provider,
            module.to_string(),
            function.to_string(),
            name.to_string(),
        );
        if let Some(&id) = self.by_name.get(&key) {
            return id;
        }
        let id = self.probes.len() as u32 + 1;
        self.probes.push(Probe {
            info: ProbeInfo {
                id,
                provider: provider_name.to_string(),
                module: module.to_string(),
                function: function.to_string(),
                name: name.to_string(),
            },
            provider,
        });
        self.by_name.insert(key, id);
        id
    }

    fn lookup(&self, provider: usize, module: &str, function: &str, name: &str) -> Option<u32> {
        self.by_name
            .get(&(
                provider,
                module.to_string(),
                function.to_string(),
                name.to_string(),
            ))
            .copied()
    }

    /// The probe with this id.
    pub fn probe(&self, id: u32) -> Option<&Probe> {
        self.probes.get((id as usize).checked_sub(1)?)
    }

    /// Every probe, in id order.
    pub fn probes(&self) -> &[Probe] {
        &self.probes
    }

    /// The provider of a probe.
    pub fn provider_of(&self, id: u32) -> Option<&dyn Provider> {
        let p = self.probe(id)?;
        self.providers.get(p.provider).map(|b| b.as_ref())
    }

    /// Asks every provider whose name matches to provide probes for `desc`, then returns the ids of the
    /// probes matching it, in id order.
    pub fn matching(&mut self, desc: &ProbeDesc) -> Vec<u32> {
        for idx in 0..self.providers.len() {
            if crate::glob::field_matches(&desc.provider, self.providers[idx].name()) {
                self.provide(idx, Some(desc));
            }
        }
        self.probes
            .iter()
            .filter(|p| {
                desc_matches(
                    desc,
                    &p.info.provider,
                    &p.info.module,
                    &p.info.function,
                    &p.info.name,
                )
            })
            .map(|p| p.info.id)
            .collect()
    }

    /// Enables a probe through its provider.
    pub fn enable(&mut self, id: u32) -> Result<(), ProviderError> {
        let Some(p) = self.probe(id).cloned() else {
            return Ok(());
        };
        self.providers[p.provider].enable(&p.info)
    }

    /// Disables a probe through its provider.
    pub fn disable(&mut self, id: u32) {
        if let Some(p) = self.probe(id).cloned() {
            self.providers[p.provider].disable(&p.info);
        }
    }

    /// Polls every provider for due timer firings.
    pub fn poll(&mut self, now: u64, ncpus: u32, due: &mut Vec<(u32, u32, u64)>) {
        for p in &mut self.providers {
            p.poll(now, ncpus, due);
        }
    }

    /// The earliest deadline of any provider.
    pub fn next_deadline(&self) -> Option<u64> {
        self.providers
            .iter()
            .filter_map(|p| p.next_deadline())
            .min()
    }

    /// The attributes of the provider named `name`.
    pub fn attributes(&self, name: &str) -> Option<ProviderAttributes> {
        self.providers
            .iter()
            .find(|p| p.name() == name)
            .map(|p| p.attributes())
    }
}

/// Placeholder used while a provider is borrowed out of the registry.
struct NullProvider;

impl Provider for NullProvider {
    fn name(&self) -> &str {
        ""
    }
    fn attributes(&self) -> ProviderAttributes {
        let a = Attribute::new(Stability::Private, Stability::Private, DepClass::Unknown);
        ProviderAttributes {
            provider: a,
            module: a,
            function: a,
            name: a,
            args: a,
        }
    }
    fn provide(&mut self, _desc: Option<&ProbeDesc>, _sink: &mut ProbeSink<'_>) {}
    fn enable(&mut self, _probe: &ProbeInfo) -> Result<(), ProviderError> {
        Ok(())
    }
    fn disable(&mut self, _probe: &ProbeInfo) {}
}

/// Formats a probe description as `provider:module:function:name`.
pub fn desc_string(d: &ProbeDesc) -> String {
    format!("{}:{}:{}:{}", d.provider, d.module, d.function, d.name)
}
