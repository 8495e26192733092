//! A program's stability report (`dtrace_program_info`'s minimum attributes and what `dtrace -v`
//! prints): each ECB's probe description attributes and statement attributes, resolved against the
//! provider of the probes its description matches, and their minimum over the program.

use dtrace_dif::attr::{self, Attribute};
use dtrace_dif::program::{ProbeDesc, Program};

use crate::handle::Handle;
use crate::listing::attribute_lines;

/// What a description's representative probe tells (`dtrace_probeinfo_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescInfo {
    /// The description's attributes.
    pub attr: Attribute,
    /// The arguments' attributes.
    pub args_attr: Attribute,
    /// The argument types of the representative probe.
    pub args: Vec<String>,
}

/// One ECB's attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EcbInfo {
    /// Its probe description.
    pub desc: ProbeDesc,
    /// Probe description attributes.
    pub desc_attr: Attribute,
    /// Statement attributes.
    pub stmt_attr: Attribute,
    /// The representative probe's information, when the description has one.
    pub info: Option<DescInfo>,
}

/// A program's attributes (`dpi_descattr`, `dpi_stmtattr`) and those of each ECB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramAttrs {
    /// Minimum probe description attributes.
    pub desc: Attribute,
    /// Minimum statement attributes.
    pub stmt: Attribute,
    /// Per ECB, in program order.
    pub ecbs: Vec<EcbInfo>,
}

impl Handle {
    /// The stability attributes of `prog` (`dtrace_program_info`): each description is matched
    /// against the probes the tracer offers; the first match stands for them all.
    pub fn program_attributes(&mut self, prog: &Program) -> ProgramAttrs {
        let mut ecbs = Vec::new();
        for (i, e) in prog.ecbs.iter().enumerate() {
            let probes = self.list_probes(&e.probe).unwrap_or_default();
            let detail = match probes.first() {
                Some(p) => self.probe_detail(p).ok(),
                None => None,
            };
            let matched = detail.as_ref().map(|d| (&d.attributes, probes.len() > 1));
            let found = attr::probe_attrs(&e.probe, matched);
            let a = found.unwrap_or(attr::DescAttrs::UNMATCHED);
            let stmt_attr = prog
                .attrs
                .get(i)
                .copied()
                .unwrap_or_default()
                .resolve(&a.idents);
            let info = found.zip(detail).map(|(a, d)| DescInfo {
                attr: a.desc,
                args_attr: a.args,
                args: d.args,
            });
            let desc_attr = a.desc;
            ecbs.push(EcbInfo {
                desc: e.probe.clone(),
                desc_attr,
                stmt_attr,
                info,
            });
        }
        let (desc, stmt) = attr::program_attrs(ecbs.iter().map(|e| (e.desc_attr, e.stmt_attr)));
        ProgramAttrs { desc, stmt, ecbs }
    }
}

/// The report `dtrace -v` prints for a program: `what` is `description` or `script`, `name` the
/// description (cut before its predicate or actions) or the script's path. With `per_ecb` (`-e`:
/// the program is not enabled) each ECB's description follows with its representative probe's
/// attributes and argument types; otherwise an empty line.
pub fn stability_report(what: &str, name: &str, a: &ProgramAttrs, per_ecb: bool) -> String {
    let mut s = format!("\nStability attributes for {what} {name}:\n");
    s.push_str(&attribute_lines(
        "Minimum Probe Description Attributes",
        a.desc,
    ));
    s.push_str(&attribute_lines("Minimum Statement Attributes", a.stmt));
    if !per_ecb {
        s.push('\n');
        return s;
    }
    let mut last: Option<&ProbeDesc> = None;
    for e in &a.ecbs {
        // The ECBs of one clause split by `if` share their description: listed once.
        if last == Some(&e.desc) {
            continue;
        }
        last = Some(&e.desc);
        let d = &e.desc;
        s.push_str(&format!(
            "\n{}:{}:{}:{}\n",
            d.provider, d.module, d.function, d.name
        ));
        if let Some(i) = &e.info {
            s.push_str(&attribute_lines("Probe Description Attributes", i.attr));
            s.push_str(&attribute_lines("Argument Attributes", i.args_attr));
            s.push_str("\n\tArgument Types\n");
            for (n, t) in i.args.iter().enumerate() {
                s.push_str(&format!("\t\targs[{n}]: {t}\n"));
            }
            if i.args.is_empty() {
                s.push_str("\t\tNone\n");
            }
            s.push('\n');
        }
    }
    s
}
