//! Probe descriptions on the command line and probe listings: `dtrace_str2desc` (a `-n/-P/-m/-f`
//! argument split into provider, module, function and name, filled from the right per its kind) and
//! the `-l` table (`   ID   PROVIDER            MODULE                          FUNCTION NAME`).

use dtrace_dif::program::ProbeDesc;
use dtrace_framework::records::ProbeInfo;

use crate::handle::ProbeSpec;

/// Splits a probe description; a description with fewer fields than four fills from the field named
/// by `spec` leftwards (`-f read` is function `read`; `-n syscall::read:entry` uses all four).
pub fn str2desc(spec: ProbeSpec, s: &str) -> ProbeDesc {
    let parts: Vec<&str> = s.split(':').collect();
    let last = match spec {
        ProbeSpec::Provider => 0,
        ProbeSpec::Module => 1,
        ProbeSpec::Function => 2,
        _ => 3,
    };
    let mut f = [String::new(), String::new(), String::new(), String::new()];
    let n = parts.len().min(4);
    let end = if parts.len() >= 4 { 3 } else { last.max(n - 1) };
    for (i, p) in parts.iter().rev().take(n).enumerate() {
        if let Some(slot) = end.checked_sub(i) {
            f[slot] = p.to_string();
        }
    }
    let [provider, module, function, name] = f;
    ProbeDesc {
        provider,
        module,
        function,
        name,
    }
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
        assert_eq!(str2desc(ProbeSpec::Name, "BEGIN"), d("", "", "", "BEGIN"));
        assert_eq!(
            str2desc(ProbeSpec::Name, "syscall::read:entry"),
            d("syscall", "", "read", "entry")
        );
        assert_eq!(
            str2desc(ProbeSpec::Name, "read:entry"),
            d("", "", "read", "entry")
        );
        assert_eq!(str2desc(ProbeSpec::Function, "read"), d("", "", "read", ""));
        assert_eq!(
            str2desc(ProbeSpec::Provider, "syscall"),
            d("syscall", "", "", "")
        );
        assert_eq!(
            str2desc(ProbeSpec::Module, "fbt:genunix"),
            d("fbt", "genunix", "", "")
        );
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
}
