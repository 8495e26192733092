//! Probe descriptions on the command line and probe listings: `dtrace_str2desc` (a `-n/-P/-m/-f`
//! argument split into provider, module, function and name, filled from the right per its kind) and
//! the `-l` table (`   ID   PROVIDER            MODULE                          FUNCTION NAME`), and the
//! `-l -v` report under each line: the probe's description and argument stability attributes and
//! its argument types (`dtrace_probe_info` and dtrace(1M)'s `print_probe_info`).

use dtrace_dif::program::ProbeDesc;
use dtrace_framework::provider::{Attribute, ProviderAttributes};
use dtrace_framework::records::ProbeInfo;

use crate::handle::ProbeSpec;

/// Splits a probe description as `dtrace_xstr2desc` does: its fields are taken from the right, the
/// last one naming the field `spec` says (`-f read` is function `read`; `-m fbt:genunix` is provider
/// `fbt`, module `genunix`); text left over once the provider is filled is an error
/// ("Overspecified probe description").
pub fn str2desc(spec: ProbeSpec, s: &str) -> Result<ProbeDesc, String> {
    let last = match spec {
        ProbeSpec::Provider => 0,
        ProbeSpec::Module => 1,
        ProbeSpec::Function => 2,
        _ => 3,
    };
    let mut f = [String::new(), String::new(), String::new(), String::new()];
    let mut rest = s;
    for slot in (0..=last).rev() {
        let (left, field) = match rest.rfind(':') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => ("", rest),
        };
        f[slot] = field.to_string();
        rest = left;
        if rest.is_empty() {
            break;
        }
    }
    if !rest.is_empty() {
        return Err(format!(
            "invalid probe description \"{s}\": Overspecified probe description"
        ));
    }
    let [provider, module, function, name] = f;
    Ok(ProbeDesc {
        provider,
        module,
        function,
        name,
    })
}

/// The `-l` heading.
pub fn list_heading() -> String {
    format!(
        "{:>5} {:>10} {:>17} {:>33} {}\n",
        "ID", "PROVIDER", "MODULE", "FUNCTION", "NAME"
    )
}

/// One `-l` line.
pub fn list_line(p: &ProbeInfo) -> String {
    format!(
        "{:>5} {:>10} {:>17} {:>33} {}\n",
        p.id, p.provider, p.module, p.function, p.name
    )
}

/// What `-l -v` reports of a probe: its provider's stability attributes and the types of its
/// arguments as D sees them (`args[0]`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeDetail {
    /// The provider's attributes.
    pub attributes: ProviderAttributes,
    /// Argument types, translated where a translator applies.
    pub args: Vec<String>,
}

/// The smaller of two attribute triples, field by field (`dt_attr_min`).
pub fn attr_min(a: Attribute, b: Attribute) -> Attribute {
    a.min(b)
}

/// The attributes of a probe description (`dtrace_probe_info`): the provider's own, lowered by
/// those of each field that names a value; a description without a single provider has the
/// attributes of an unnamed one (Unstable).
pub fn description_attributes(desc: &ProbeInfo, pa: &ProviderAttributes) -> Attribute {
    let d = ProbeDesc {
        provider: desc.provider.clone(),
        module: desc.module.clone(),
        function: desc.function.clone(),
        name: desc.name.clone(),
    };
    dtrace_dif::attr::probe_attrs(&d, Some((pa, false))).map_or(Attribute::UNSTABLE, |a| a.desc)
}

/// One titled attribute triple as `dtrace -v` prints it.
pub(crate) fn attribute_lines(title: &str, a: Attribute) -> String {
    format!(
        "\n\t{title}\n\t\tIdentifier Names: {}\n\t\tData Semantics:   {}\n\t\tDependency Class: {}\n",
        a.name.name(),
        a.data.name(),
        a.class.name()
    )
}

/// The `-v` report printed under a probe's `-l` line.
pub fn verbose_info(p: &ProbeInfo, d: &ProbeDetail) -> String {
    let mut s = attribute_lines(
        "Probe Description Attributes",
        description_attributes(p, &d.attributes),
    );
    s.push_str(&attribute_lines("Argument Attributes", d.attributes.args));
    s.push_str("\n\tArgument Types\n");
    for (i, t) in d.args.iter().enumerate() {
        s.push_str(&format!("\t\targs[{i}]: {t}\n"));
    }
    if d.args.is_empty() {
        s.push_str("\t\tNone\n");
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(p: &str, m: &str, f: &str, n: &str) -> ProbeDesc {
        ProbeDesc {
            provider: p.into(),
            module: m.into(),
            function: f.into(),
            name: n.into(),
        }
    }

    #[test]
    fn descriptions_fill_from_the_right() {
        let ok = |spec, s| str2desc(spec, s).unwrap();
        assert_eq!(ok(ProbeSpec::Name, "BEGIN"), d("", "", "", "BEGIN"));
        assert_eq!(
            ok(ProbeSpec::Name, "syscall::read:entry"),
            d("syscall", "", "read", "entry")
        );
        assert_eq!(
            ok(ProbeSpec::Name, "read:entry"),
            d("", "", "read", "entry")
        );
        assert_eq!(ok(ProbeSpec::Function, "read"), d("", "", "read", ""));
        assert_eq!(ok(ProbeSpec::Provider, "syscall"), d("syscall", "", "", ""));
        assert_eq!(
            ok(ProbeSpec::Module, "fbt:genunix"),
            d("fbt", "genunix", "", "")
        );
        // An empty field left of the provider is no text left over.
        assert_eq!(
            ok(ProbeSpec::Function, ":genunix::"),
            d("genunix", "", "", "")
        );
    }

    #[test]
    fn overspecified_descriptions() {
        for (spec, s) in [
            (ProbeSpec::Module, "genunix::"),
            (ProbeSpec::Module, ":genunix::"),
            (ProbeSpec::Provider, "profile:::profile-97"),
            (ProbeSpec::Function, "a:b:c:d"),
            (ProbeSpec::Name, "a:b:c:d:e"),
        ] {
            assert_eq!(
                str2desc(spec, s),
                Err(format!(
                    "invalid probe description \"{s}\": Overspecified probe description"
                ))
            );
        }
    }

    #[test]
    fn listing_layout() {
        assert_eq!(
            list_heading(),
            "   ID   PROVIDER            MODULE                          FUNCTION NAME\n"
        );
        let p = ProbeInfo {
            id: 1,
            provider: "dtrace".into(),
            module: String::new(),
            function: String::new(),
            name: "BEGIN".into(),
        };
        assert_eq!(
            list_line(&p),
            format!("    1     dtrace {:17} {:33} BEGIN\n", "", "")
        );
    }

    #[test]
    fn verbose_report_of_begin_and_a_typed_probe() {
        use dtrace_framework::provider::{DepClass, Stability};
        let stable = Attribute::new(Stability::Stable, Stability::Stable, DepClass::Common);
        let private = Attribute::new(Stability::Private, Stability::Private, DepClass::Unknown);
        let pa = ProviderAttributes {
            provider: stable,
            module: private,
            function: private,
            name: stable,
            args: stable,
        };
        let begin = ProbeInfo {
            id: 1,
            provider: "dtrace".into(),
            module: String::new(),
            function: String::new(),
            name: "BEGIN".into(),
        };
        let d = ProbeDetail {
            attributes: pa,
            args: vec![],
        };
        assert_eq!(
            verbose_info(&begin, &d),
            "\n\tProbe Description Attributes\n\t\tIdentifier Names: Stable\n\t\tData Semantics:   Stable\n\t\tDependency Class: Common\n\n\tArgument Attributes\n\t\tIdentifier Names: Stable\n\t\tData Semantics:   Stable\n\t\tDependency Class: Common\n\n\tArgument Types\n\t\tNone\n\n"
        );
        // A named module lowers the description to the module's attributes.
        let p = ProbeInfo {
            module: "vmlinux".into(),
            function: "write".into(),
            name: "entry".into(),
            ..begin.clone()
        };
        let d = ProbeDetail {
            attributes: pa,
            args: vec!["int".into(), "char *".into()],
        };
        let r = verbose_info(&p, &d);
        assert!(r.starts_with("\n\tProbe Description Attributes\n\t\tIdentifier Names: Private\n\t\tData Semantics:   Private\n\t\tDependency Class: Unknown\n"));
        assert!(r.ends_with("\n\tArgument Types\n\t\targs[0]: int\n\t\targs[1]: char *\n\n"));
        // Glob providers are Unstable.
        let g = ProbeInfo {
            provider: "sys*".into(),
            ..p
        };
        assert_eq!(
            description_attributes(&g, &pa),
            Attribute::new(Stability::Unstable, Stability::Unstable, DepClass::Common)
        );
    }
}
