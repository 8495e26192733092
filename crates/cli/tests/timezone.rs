//! `%Y` and `%T` print in the local time zone, as libdtrace's `ctime_r` and `localtime_r` do: `TZ`
//! as a zone name, a path, a POSIX rule string, empty, unusable, and unset (`/etc/localtime`),
//! compared with `date(1)` under the same `TZ`, at the current time and either side of DST
//! transitions.

use std::process::Command;

/// `%Y` in `date`'s words, then `%T`'s `strftime` format.
const DATE_FMT: &str = "+%Y %b %e %H:%M:%S|%a, %d %b %G %T %Z";

fn dtrace(tz: Option<&str>, script: &str) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dtrace"));
    c.args(["-qn", script]);
    match tz {
        Some(tz) => c.env("TZ", tz),
        None => c.env_remove("TZ"),
    };
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn date(tz: Option<&str>, at: Option<u64>) -> String {
    let mut c = Command::new("date");
    if let Some(at) = at {
        c.arg(format!("-d@{at}"));
    }
    c.arg(DATE_FMT);
    match tz {
        Some(tz) => c.env("TZ", tz),
        None => c.env_remove("TZ"),
    };
    let o = c.output().unwrap();
    assert!(o.status.success());
    String::from_utf8(o.stdout).unwrap()
}

fn zones() -> Vec<Option<&'static str>> {
    let mut z = vec![
        None,
        Some(""),
        Some("EST5EDT,M3.2.0,M11.1.0"),
        Some("<-03>3"),
        Some("Nonexistent/Zone"),
    ];
    if dtrace_testkit::skip_unless(
        std::path::Path::new("/usr/share/zoneinfo/America/New_York").exists(),
        "times_print_as_date_does_in_each_zone (zone names)",
        "no /usr/share/zoneinfo (scripts/setup installs tzdata)",
    ) {
        z.extend([
            Some("America/New_York"),
            Some(":Europe/London"),
            Some("/usr/share/zoneinfo/Australia/Lord_Howe"),
            Some("Asia/Kolkata"),
        ]);
    }
    z
}

#[test]
fn times_print_as_date_does_in_each_zone() {
    // Now, then either side of the US spring forward and fall back, the EU ones, and Lord Howe's
    // half-hour shift (2026).
    let instants: [u64; 6] = [
        1_772_953_200,
        1_793_512_800,
        1_774_746_000,
        1_792_890_000,
        1_775_313_000,
        1_791_037_800,
    ];
    // The current time, then its seconds for `date` to format.
    let mut script = String::from(
        "BEGIN {\nthis->w = walltimestamp;\nprintf(\"%Y|%T\\n%d\\n\", this->w, this->w, this->w / 1000000000);\n",
    );
    for t in instants {
        for s in [t - 1, t] {
            script.push_str(&format!(
                "printf(\"%Y|%T\\n\", (uint64_t){s}000000000, (uint64_t){s}000000000);\n"
            ));
        }
    }
    script.push_str("exit(0); }");
    for tz in zones() {
        let then: String = instants
            .iter()
            .flat_map(|&t| [t - 1, t])
            .map(|s| date(tz, Some(s)))
            .collect();
        let got = dtrace(tz, &script);
        let (now, rest) = got.split_once('\n').unwrap();
        let (secs, rest) = rest.split_once('\n').unwrap();
        let secs: u64 = secs.parse().unwrap();
        // walltimestamp is this run's clock.
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(
            secs <= wall && wall - secs < 60,
            "walltimestamp {secs}, now {wall}"
        );
        assert_eq!(format!("{now}\n"), date(tz, Some(secs)), "TZ={tz:?}");
        assert_eq!(rest, format!("{then}\n"), "TZ={tz:?}");
    }
}

/// `%@Y` and `%@T` in `printa()` print an aggregation's value (a `max(walltimestamp)`, say) as a
/// time, as `%Y` and `%T` do a `printf()` argument.
#[test]
fn printa_prints_an_aggregation_value_as_a_time() {
    let out = dtrace(
        Some("UTC"),
        r#"BEGIN { @t = min(1075064400 * 1000000000); printa("%@Y|", @t); printa("%@T\n", @t);
            exit(0); }"#,
    );
    assert_eq!(
        out.trim_end(),
        "2004 Jan 25 21:00:00|Sun, 25 Jan 2004 21:00:00 UTC"
    );
}
