//! The running kernel's build options, as `/proc/config.gz` (`CONFIG_IKCONFIG_PROC`) or the
//! distribution's `/boot/config-RELEASE` lists them, and its boot command line. Used where a
//! kernel's behaviour depends on an option that no interface reports directly (for instance
//! whether the scheduler's task clock leaves out steal time).

use std::io::Read;

/// Upper bound on a decompressed configuration (today's are about 300 KiB).
const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// What the configuration says of one option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// `CONFIG_X=y` or `=m`.
    Set,
    /// `# CONFIG_X is not set`, or absent from a configuration that was read.
    NotSet,
    /// No configuration could be read.
    Unknown,
}

/// The configuration text of the running kernel, if any source can be read.
pub fn running() -> Option<String> {
    let gz = std::fs::File::open("/proc/config.gz").ok().and_then(|f| {
        let mut text = String::new();
        flate2::read::GzDecoder::new(f)
            .take(MAX_CONFIG_BYTES)
            .read_to_string(&mut text)
            .ok()?;
        Some(text)
    });
    gz.or_else(|| {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
        std::fs::read_to_string(format!("/boot/config-{}", release.trim())).ok()
    })
}

/// How `option` (with its `CONFIG_` prefix) is set in configuration `text`.
pub fn setting(text: Option<&str>, option: &str) -> Setting {
    let Some(text) = text else {
        return Setting::Unknown;
    };
    let set = text.lines().any(|l| {
        l.strip_prefix(option)
            .and_then(|rest| rest.strip_prefix('='))
            .is_some_and(|v| v == "y" || v == "m")
    });
    if set {
        Setting::Set
    } else {
        Setting::NotSet
    }
}

/// Whether the running kernel was booted with `word` on its command line.
pub fn boot_flag(word: &str) -> bool {
    std::fs::read_to_string("/proc/cmdline")
        .map(|c| c.split_whitespace().any(|w| w == word))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_read_by_exact_option_name() {
        let text = "CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_AB=m\nCONFIG_C=\"x\"\n";
        assert_eq!(setting(Some(text), "CONFIG_A"), Setting::Set);
        assert_eq!(setting(Some(text), "CONFIG_AB"), Setting::Set);
        assert_eq!(setting(Some(text), "CONFIG_B"), Setting::NotSet);
        assert_eq!(setting(Some(text), "CONFIG_C"), Setting::NotSet);
        assert_eq!(setting(Some(text), "CONFIG_D"), Setting::NotSet);
        assert_eq!(setting(None, "CONFIG_A"), Setting::Unknown);
    }
}
