//! Stability attributes (DTrace's Stability chapter): the stability levels and dependency classes, the
//! attribute triple of an interface, a provider's five triples, and how a program's attributes are
//! computed. The compiler gives each ECB the minimum attributes of what its statements use
//! ([`EcbAttrs`]); the provider-dependent part (`probeprov`, `probemod`, `probefunc`, `probename`,
//! `args[]`) and the probe description attributes are resolved against the provider the description
//! matches ([`probe_attrs`], as libdtrace's `dt_probe_info`), which the consumer knows, and the
//! program's are the minimum over its ECBs ([`program_attrs`]).

use crate::program::ProbeDesc;

/// Stability levels (`dtrace_stability_t`), in DTrace's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stability {
    /// Private to DTrace itself.
    Internal,
    /// Private to the provider.
    Private,
    /// Obsolete.
    Obsolete,
    /// Supported by an external party.
    External,
    /// Unstable.
    Unstable,
    /// Evolving.
    Evolving,
    /// Stable.
    Stable,
    /// An industry standard.
    Standard,
}

impl Stability {
    /// DTrace's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Stability::Internal => "Internal",
            Stability::Private => "Private",
            Stability::Obsolete => "Obsolete",
            Stability::External => "External",
            Stability::Unstable => "Unstable",
            Stability::Evolving => "Evolving",
            Stability::Stable => "Stable",
            Stability::Standard => "Standard",
        }
    }
}

/// Dependency classes (`dtrace_class_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DepClass {
    /// Unknown.
    Unknown,
    /// Specific to a CPU model.
    Cpu,
    /// Specific to a hardware platform.
    Platform,
    /// Specific to a group of platforms.
    Group,
    /// Specific to an instruction set.
    Isa,
    /// Common to all platforms.
    Common,
}

impl DepClass {
    /// DTrace's name for it.
    pub fn name(self) -> &'static str {
        match self {
            DepClass::Unknown => "Unknown",
            DepClass::Cpu => "CPU",
            DepClass::Platform => "Platform",
            DepClass::Group => "Group",
            DepClass::Isa => "ISA",
            DepClass::Common => "Common",
        }
    }
}

/// One attribute triple (`dtrace_attribute_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attribute {
    /// Name stability.
    pub name: Stability,
    /// Data stability.
    pub data: Stability,
    /// Dependency class.
    pub class: DepClass,
}

impl Attribute {
    /// Builds a triple.
    pub const fn new(name: Stability, data: Stability, class: DepClass) -> Attribute {
        Attribute { name, data, class }
    }
}

/// A provider's attributes (`dtrace_pattr_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProviderAttributes {
    /// Of the provider name.
    pub provider: Attribute,
    /// Of module names.
    pub module: Attribute,
    /// Of function names.
    pub function: Attribute,
    /// Of probe names.
    pub name: Attribute,
    /// Of the arguments.
    pub args: Attribute,
}

impl Attribute {
    /// `Stable/Stable/Common`, the attributes of D's own constructs (`_dtrace_defattr`).
    pub const DEFAULT: Attribute =
        Attribute::new(Stability::Stable, Stability::Stable, DepClass::Common);
    /// `Standard/Standard/Common`, where minimum computations start (`_dtrace_maxattr`).
    pub const MAX: Attribute =
        Attribute::new(Stability::Standard, Stability::Standard, DepClass::Common);
    /// `Evolving/Evolving/Common`.
    pub const EVOLVING: Attribute =
        Attribute::new(Stability::Evolving, Stability::Evolving, DepClass::Common);
    /// `Private/Private/Unknown`, the attributes of kernel symbols and types (`_dtrace_symattr`).
    pub const PRIVATE: Attribute =
        Attribute::new(Stability::Private, Stability::Private, DepClass::Unknown);
    /// `Unstable/Unstable/Common`, those of a description naming no provider (`_dtrace_prvdesc`).
    pub const UNSTABLE: Attribute =
        Attribute::new(Stability::Unstable, Stability::Unstable, DepClass::Common);

    /// The smaller of two triples, field by field (`dt_attr_min`).
    pub fn min(self, other: Attribute) -> Attribute {
        Attribute {
            name: self.name.min(other.name),
            data: self.data.min(other.data),
            class: self.class.min(other.class),
        }
    }
}

impl ProviderAttributes {
    /// Every component `Unstable/Unstable/Common` (`_dtrace_prvdesc`).
    pub const UNSTABLE: ProviderAttributes = ProviderAttributes {
        provider: Attribute::UNSTABLE,
        module: Attribute::UNSTABLE,
        function: Attribute::UNSTABLE,
        name: Attribute::UNSTABLE,
        args: Attribute::UNSTABLE,
    };
}

/// Which of the provider's attributes a clause's statements take on: built-in variables whose
/// attributes are those of the probe's provider (`probeprov` the provider's, `probemod` the
/// module's, `probefunc` the function's, `probename` the name's, `args[]` the arguments').
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ProviderDeps {
    pub provider: bool,
    pub module: bool,
    pub function: bool,
    pub name: bool,
    pub args: bool,
}

/// The attributes of one ECB's statements, as the compiler computed them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EcbAttrs {
    /// The minimum attributes of the predicate and actions, provider-dependent identifiers aside.
    pub stmt: Attribute,
    /// The provider-dependent identifiers used.
    pub deps: ProviderDeps,
}

impl Default for EcbAttrs {
    fn default() -> EcbAttrs {
        EcbAttrs {
            stmt: Attribute::DEFAULT,
            deps: ProviderDeps::default(),
        }
    }
}

impl EcbAttrs {
    /// The statement attributes once the provider's attributes `pap` are known.
    pub fn resolve(&self, pap: &ProviderAttributes) -> Attribute {
        let d = self.deps;
        let mut a = self.stmt;
        for (used, attr) in [
            (d.provider, pap.provider),
            (d.module, pap.module),
            (d.function, pap.function),
            (d.name, pap.name),
            (d.args, pap.args),
        ] {
            if used {
                a = a.min(attr);
            }
        }
        a
    }
}

/// Whether a description component is empty or a glob pattern (`strisglob`).
fn is_glob(s: &str) -> bool {
    s.is_empty() || s.contains(['*', '?', '[', '\\'])
}

/// What a probe description's representative probe gives (`dtrace_probeinfo_t` and the context
/// `dt_setcontext` sets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DescAttrs {
    /// The description's attributes.
    pub desc: Attribute,
    /// The arguments' attributes.
    pub args: Attribute,
    /// The provider attributes the clause's identifiers (`probefunc`, `args[]`...) take.
    pub idents: ProviderAttributes,
}

impl DescAttrs {
    /// A description without a representative probe: `Unstable/Unstable/Common` throughout.
    pub const UNMATCHED: DescAttrs = DescAttrs {
        desc: Attribute::UNSTABLE,
        args: Attribute::UNSTABLE,
        idents: ProviderAttributes::UNSTABLE,
    };
}

/// The attributes `desc` has, given the attributes of the provider of the first probe it matches
/// and whether it matches more than one (`None` when it matches none), as libdtrace's
/// `dt_probe_info` computes them: `None` when there is no representative probe (nothing matched,
/// or several probes of a provider whose argument data is less than Evolving or whose
/// Evolving-named components are left open); otherwise the description's attributes are the
/// minimum of the provider's over the components it names (and all `Unstable` when it names no
/// provider or a pattern), while the clause's identifiers take the provider's own.
pub fn probe_attrs(
    desc: &ProbeDesc,
    matched: Option<(&ProviderAttributes, bool)>,
) -> Option<DescAttrs> {
    let (m_glob, f_glob, n_glob) = (
        is_glob(&desc.module),
        is_glob(&desc.function),
        is_glob(&desc.name),
    );
    let (pattr, several) = matched?;
    if several {
        let evolving = |a: Attribute| a.name >= Stability::Evolving;
        if pattr.args.data < Stability::Evolving
            || (evolving(pattr.module) && m_glob)
            || (evolving(pattr.function) && f_glob)
            || (evolving(pattr.name) && n_glob)
        {
            return None;
        }
    }
    let pap = if is_glob(&desc.provider) {
        &ProviderAttributes::UNSTABLE
    } else {
        pattr
    };
    let mut a = pap.provider;
    if !m_glob {
        a = a.min(pap.module);
    }
    if !f_glob {
        a = a.min(pap.function);
    }
    if !n_glob {
        a = a.min(pap.name);
    }
    Some(DescAttrs {
        desc: a,
        args: pap.args,
        idents: *pattr,
    })
}

/// A program's minimum attributes (`dpi_descattr`, `dpi_stmtattr` of `dtrace_program_info`): the
/// minimum over its ECBs of each one's (description, statement) attributes; `Stable/Stable/Common`
/// for a program without ECBs.
pub fn program_attrs(
    ecbs: impl IntoIterator<Item = (Attribute, Attribute)>,
) -> (Attribute, Attribute) {
    let mut it = ecbs.into_iter().peekable();
    if it.peek().is_none() {
        return (Attribute::DEFAULT, Attribute::DEFAULT);
    }
    it.fold((Attribute::MAX, Attribute::MAX), |(d, s), (ed, es)| {
        (d.min(ed), s.min(es))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(s: &str) -> ProbeDesc {
        let f: Vec<&str> = s.split(':').collect();
        ProbeDesc {
            provider: f[0].into(),
            module: f[1].into(),
            function: f[2].into(),
            name: f[3].into(),
        }
    }

    const STABLE: Attribute = Attribute::DEFAULT;

    fn dtrace_provider() -> ProviderAttributes {
        ProviderAttributes {
            provider: STABLE,
            module: Attribute::PRIVATE,
            function: Attribute::PRIVATE,
            name: STABLE,
            args: STABLE,
        }
    }

    #[test]
    fn description_attributes() {
        let p = dtrace_provider();
        // Named provider and name: their minimum; the empty module and function are skipped.
        let a = probe_attrs(&desc("dtrace:::BEGIN"), Some((&p, false))).expect("matched");
        assert_eq!((a.desc, a.args, a.idents), (STABLE, STABLE, p));
        // No provider named: Unstable, while identifiers still take the provider's attributes.
        let a = probe_attrs(&desc(":::BEGIN"), Some((&p, false))).expect("matched");
        assert_eq!(
            (a.desc, a.args, a.idents),
            (Attribute::UNSTABLE, Attribute::UNSTABLE, p)
        );
        // A named module brings in its Private attributes.
        let a = probe_attrs(&desc("dtrace:m::BEGIN"), Some((&p, false))).expect("matched");
        assert_eq!(a.desc, Attribute::PRIVATE);
        // Nothing matched.
        assert_eq!(probe_attrs(&desc("nosuch:::x"), None), None);
        // Several matches with an Evolving-named component left open: no representative probe.
        assert_eq!(probe_attrs(&desc("dtrace:::"), Some((&p, true))), None);
        // Several matches, open components only Private-named: fine.
        let a = probe_attrs(&desc("dtrace:::BEGIN"), Some((&p, true))).expect("matched");
        assert_eq!(a.desc, STABLE);
    }

    #[test]
    fn statement_resolution_and_program_minimum() {
        let p = dtrace_provider();
        let e = EcbAttrs {
            stmt: Attribute::EVOLVING,
            deps: ProviderDeps {
                function: true,
                ..ProviderDeps::default()
            },
        };
        assert_eq!(
            e.resolve(&p),
            Attribute::new(Stability::Private, Stability::Private, DepClass::Unknown)
        );
        assert_eq!(EcbAttrs::default().resolve(&p), STABLE);
        assert_eq!(program_attrs([]), (STABLE, STABLE));
        assert_eq!(
            program_attrs([(STABLE, Attribute::EVOLVING), (Attribute::UNSTABLE, STABLE)]),
            (Attribute::UNSTABLE, Attribute::EVOLVING)
        );
        assert_eq!(
            program_attrs([(STABLE, STABLE)]),
            (STABLE, STABLE),
            "one ECB: its own attributes, not the maximum"
        );
    }
}
