//! Calendar formatting of nanosecond timestamps for `%Y` (`1973 Dec  3 17:20:00`, ctime's fields) and
//! `%T` (RFC 822, `strftime("%a, %d %b %G %T %Z")`), in a time zone ([`Zone`]) as libdtrace's
//! `ctime_r`/`localtime_r` show them. The consumer makes no OS calls: the embedding program hands the
//! decoder its zone, resolved from `TZ` the way the C library does ([`Zone::from_tz_env`], which is
//! given the file reader); the default is UTC.

use std::fmt;

/// A time zone: UTC, a fixed offset with a name, or the rules of a TZif file or POSIX `TZ` string.
#[derive(Clone, Default)]
pub enum Zone {
    /// Coordinated Universal Time, named `UTC`.
    #[default]
    Utc,
    /// A fixed offset east of UTC in seconds and its abbreviation (the C library's fallback for a
    /// `TZ` it cannot read: the name it starts with, at offset 0).
    Fixed(i32, String),
    /// Transitions and rules from a TZif file or a POSIX `TZ` string.
    Rules(Box<tz::TimeZone>),
}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Zone::Utc => f.write_str("Utc"),
            Zone::Fixed(o, n) => write!(f, "Fixed({o}, {n:?})"),
            Zone::Rules(_) => f.write_str("Rules(..)"),
        }
    }
}

/// Why a zone could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ZoneError {
    /// A TZif file was malformed.
    #[error("bad time zone file: {0}")]
    TzFile(String),
    /// A POSIX `TZ` string was malformed.
    #[error("bad TZ string {0:?}: {1}")]
    TzString(String, String),
}

/// The DST rules glibc applies to a `TZ` string that names a DST zone without giving them
/// (US rules: second Sunday of March to first Sunday of November).
const DEFAULT_DST_RULES: &str = ",M3.2.0,M11.1.0";

/// The system zone directory when `TZDIR` is unset.
pub const DEFAULT_TZDIR: &str = "/usr/share/zoneinfo";

/// The file read when `TZ` is unset.
pub const LOCALTIME: &str = "/etc/localtime";

impl Zone {
    /// The zone of a TZif file's contents.
    pub fn from_tzif(bytes: &[u8]) -> Result<Zone, ZoneError> {
        tz::TimeZone::from_tz_data(bytes)
            .map(|z| Zone::Rules(Box::new(z)))
            .map_err(|e| ZoneError::TzFile(e.to_string()))
    }

    /// The zone of a POSIX `TZ` rule string (`EST5EDT,M3.2.0,M11.1.0`, `JST-9`); no file is read.
    pub fn from_posix(s: &str) -> Result<Zone, ZoneError> {
        let no_files = tz::timezone::TimeZoneSettings::new(&[], |_| Err("no file lookups".into()));
        no_files
            .parse_posix_tz(s)
            .map(|z| Zone::Rules(Box::new(z)))
            .map_err(|e| ZoneError::TzString(s.to_string(), e.to_string()))
    }

    /// The zone the C library uses for `TZ` (`tz`, None when unset) and `TZDIR`, reading files
    /// through `read`: unset is [`LOCALTIME`]; empty is UTC; otherwise, after an optional leading
    /// `:`, an absolute path or a name under the zone directory holding a TZif file, else a POSIX
    /// `TZ` string (a DST zone without rules takes the US ones), else offset 0 under the name the
    /// string starts with (empty if it starts with no name of three letters or more). A missing or bad [`LOCALTIME`] is UTC.
    pub fn from_tz_env(
        tz: Option<&str>,
        tzdir: Option<&str>,
        read: &dyn Fn(&str) -> Option<Vec<u8>>,
    ) -> Zone {
        let Some(tz) = tz else {
            return read(LOCALTIME)
                .and_then(|b| Zone::from_tzif(&b).ok())
                .unwrap_or(Zone::Utc);
        };
        let name = tz.strip_prefix(':').unwrap_or(tz);
        if name.is_empty() {
            return Zone::Utc;
        }
        let path = if name.starts_with('/') {
            name.to_string()
        } else {
            let dir = tzdir.filter(|d| !d.is_empty()).unwrap_or(DEFAULT_TZDIR);
            format!("{}/{name}", dir.trim_end_matches('/'))
        };
        if let Some(z) = read(&path).and_then(|b| Zone::from_tzif(&b).ok()) {
            return z;
        }
        if let Ok(z) = Zone::from_posix(name) {
            return z;
        }
        if !name.contains(',') {
            if let Ok(z) = Zone::from_posix(&format!("{name}{DEFAULT_DST_RULES}")) {
                return z;
            }
        }
        let lead: String = name
            .chars()
            .take_while(|c| c.is_ascii_alphabetic())
            .collect();
        Zone::Fixed(0, if lead.len() >= 3 { lead } else { String::new() })
    }

    /// The offset east of UTC (seconds) and the abbreviation in force at `secs` since the epoch.
    pub fn at(&self, secs: i64) -> (i64, String) {
        match self {
            Zone::Utc => (0, "UTC".to_string()),
            Zone::Fixed(o, n) => (i64::from(*o), n.clone()),
            Zone::Rules(z) => match z.find_local_time_type(secs) {
                Ok(t) => (
                    i64::from(t.ut_offset()),
                    t.time_zone_designation().to_string(),
                ),
                Err(_) => (0, "UTC".to_string()),
            },
        }
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];

/// (year, month 1-12, day 1-31) of a day count since 1970-01-01.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

struct Tm {
    year: i64,
    mon: u32,
    day: u32,
    hms: (i64, i64, i64),
    days: i64,
    zone: String,
}

/// The local calendar time of `ns` in `zone`.
fn tm(ns: u64, zone: &Zone) -> Tm {
    let utc = (ns / 1_000_000_000) as i64;
    let (offset, name) = zone.at(utc);
    let secs = utc + offset;
    let days = secs.div_euclid(86_400);
    let s = secs.rem_euclid(86_400);
    let (year, mon, day) = civil(days);
    Tm {
        year,
        mon,
        day,
        hms: (s / 3600, s / 60 % 60, s % 60),
        days,
        zone: name,
    }
}

/// `%Y`: `YYYY Mon DD HH:MM:SS` in `zone`, the day padded with a space as ctime(3) does.
pub fn ymdhms(ns: u64, zone: &Zone) -> String {
    let t = tm(ns, zone);
    format!(
        "{} {} {:2} {:02}:{:02}:{:02}",
        t.year,
        MONTHS[(t.mon - 1) as usize],
        t.day,
        t.hms.0,
        t.hms.1,
        t.hms.2
    )
}

/// `%T`: `strftime("%a, %d %b %G %T %Z")` in `zone` (`%G` is the ISO 8601 week-based year).
pub fn rfc822(ns: u64, zone: &Zone) -> String {
    let t = tm(ns, zone);
    let wd = DAYS[t.days.rem_euclid(7) as usize];
    // ISO year: the year of this week's Thursday (weekday Monday=0).
    let monday_based = (t.days + 3).rem_euclid(7);
    let thursday = t.days - monday_based + 3;
    let iso_year = civil(thursday).0;
    format!(
        "{wd}, {:02} {} {iso_year} {:02}:{:02}:{:02} {}",
        t.day,
        MONTHS[(t.mon - 1) as usize],
        t.hms.0,
        t.hms.1,
        t.hms.2,
        t.zone
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn formats_known_instants_in_utc() {
        let z = Zone::Utc;
        // 1973-12-03 17:20:00 UTC
        let ns = 123_787_200u64 * S;
        assert_eq!(ymdhms(ns, &z), "1973 Dec  3 17:20:00");
        assert_eq!(rfc822(ns, &z), "Mon, 03 Dec 1973 17:20:00 UTC");
        assert_eq!(ymdhms(0, &z), "1970 Jan  1 00:00:00");
        // 2027-01-01 is a Friday in ISO week 53 of 2026.
        let ns = 1_798_761_600u64 * S;
        assert_eq!(rfc822(ns, &z), "Fri, 01 Jan 2026 00:00:00 UTC");
    }

    /// US Eastern around the 2026 transitions (8 March 07:00 UTC, 1 November 06:00 UTC).
    fn check_us_eastern(z: &Zone) {
        let spring = 1_772_953_200u64;
        assert_eq!(ymdhms((spring - 1) * S, z), "2026 Mar  8 01:59:59");
        assert_eq!(ymdhms(spring * S, z), "2026 Mar  8 03:00:00");
        assert_eq!(rfc822((spring - 1) * S, z), "Sun, 08 Mar 2026 01:59:59 EST");
        assert_eq!(rfc822(spring * S, z), "Sun, 08 Mar 2026 03:00:00 EDT");
        let fall = 1_793_512_800u64;
        assert_eq!(ymdhms((fall - 1) * S, z), "2026 Nov  1 01:59:59");
        assert_eq!(ymdhms(fall * S, z), "2026 Nov  1 01:00:00");
        assert_eq!(rfc822((fall - 1) * S, z), "Sun, 01 Nov 2026 01:59:59 EDT");
        assert_eq!(rfc822(fall * S, z), "Sun, 01 Nov 2026 01:00:00 EST");
        // 1 January 2026 04:59:59 UTC is still 31 December locally; `%G` is the ISO year of that
        // local day, whose week (Monday 29 December) belongs to 2026.
        assert_eq!(ymdhms(1_767_243_599 * S, z), "2025 Dec 31 23:59:59");
        assert_eq!(
            rfc822(1_767_243_599 * S, z),
            "Wed, 31 Dec 2026 23:59:59 EST"
        );
        assert_eq!(
            rfc822(1_767_243_599 * S, &Zone::Utc),
            "Thu, 01 Jan 2026 04:59:59 UTC"
        );
    }

    fn files(path: &str) -> Option<Vec<u8>> {
        std::fs::read(path).ok()
    }

    fn no_files(_: &str) -> Option<Vec<u8>> {
        None
    }

    #[test]
    fn posix_tz_strings_follow_their_rules() {
        let z = Zone::from_tz_env(Some("EST5EDT,M3.2.0,M11.1.0"), None, &no_files);
        check_us_eastern(&z);
        // Without rules, a DST zone takes the US ones, as glibc does.
        check_us_eastern(&Zone::from_tz_env(Some("EST5EDT"), None, &no_files));
        let z = Zone::from_tz_env(Some("JST-9"), None, &no_files);
        assert_eq!(rfc822(0, &z), "Thu, 01 Jan 1970 09:00:00 JST");
        let z = Zone::from_tz_env(Some("<+0530>-5:30"), None, &no_files);
        assert_eq!(ymdhms(0, &z), "1970 Jan  1 05:30:00");
        assert_eq!(rfc822(0, &z), "Thu, 01 Jan 1970 05:30:00 +0530");
    }

    #[test]
    fn tzif_files_are_found_as_the_c_library_finds_them() {
        if !dtrace_testkit::skip_unless(
            std::path::Path::new("/usr/share/zoneinfo/America/New_York").exists(),
            "tzif_files_are_found_as_the_c_library_finds_them",
            "no /usr/share/zoneinfo (scripts/setup installs tzdata)",
        ) {
            return;
        }
        check_us_eastern(&Zone::from_tz_env(Some("America/New_York"), None, &files));
        check_us_eastern(&Zone::from_tz_env(Some(":America/New_York"), None, &files));
        check_us_eastern(&Zone::from_tz_env(
            Some("/usr/share/zoneinfo/America/New_York"),
            Some("/nonexistent"),
            &files,
        ));
        check_us_eastern(&Zone::from_tz_env(
            Some("America/New_York"),
            Some("/usr/share/zoneinfo/"),
            &files,
        ));
        // Unset TZ reads /etc/localtime.
        let localtime_is_ny = |p: &str| {
            if p == LOCALTIME {
                std::fs::read("/usr/share/zoneinfo/America/New_York").ok()
            } else {
                None
            }
        };
        check_us_eastern(&Zone::from_tz_env(None, None, &localtime_is_ny));
        // Historic rules come from the file's transitions: 1973 had DST from 6 January.
        let z = Zone::from_tz_env(Some("America/New_York"), None, &files);
        assert_eq!(rfc822(123_787_200 * S, &z), "Mon, 03 Dec 1973 12:20:00 EST");
    }

    #[test]
    fn unusable_tz_values_fall_back_as_glibc_does() {
        let z = Zone::from_tz_env(Some(""), None, &files);
        assert_eq!(rfc822(0, &z), "Thu, 01 Jan 1970 00:00:00 UTC");
        let z = Zone::from_tz_env(Some("Nonexistent/Zone"), None, &no_files);
        assert_eq!(rfc822(0, &z), "Thu, 01 Jan 1970 00:00:00 Nonexistent");
        let z = Zone::from_tz_env(Some("X/Y"), None, &no_files);
        assert_eq!(rfc822(0, &z), "Thu, 01 Jan 1970 00:00:00 ");
        assert_eq!(
            rfc822(0, &Zone::from_tz_env(None, None, &no_files)),
            "Thu, 01 Jan 1970 00:00:00 UTC"
        );
        let garbage = |_: &str| Some(b"not a tzif file".to_vec());
        assert_eq!(
            rfc822(0, &Zone::from_tz_env(None, None, &garbage)),
            "Thu, 01 Jan 1970 00:00:00 UTC"
        );
        assert!(Zone::from_tzif(b"TZif").is_err());
        assert!(Zone::from_posix("EST5EDT,M3").is_err());
    }
}
