//! Calendar formatting of nanosecond timestamps for `%Y` (`1973 Dec  3 17:20:00`, ctime's fields) and
//! `%T` (RFC 822). Times are shown in UTC: the consumer makes no OS calls to learn the local zone.

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
}

fn tm(ns: u64) -> Tm {
    let secs = (ns / 1_000_000_000) as i64;
    let days = secs.div_euclid(86_400);
    let s = secs.rem_euclid(86_400);
    let (year, mon, day) = civil(days);
    Tm {
        year,
        mon,
        day,
        hms: (s / 3600, s / 60 % 60, s % 60),
        days,
    }
}

/// `%Y`: `YYYY Mon DD HH:MM:SS`, the day padded with a space as ctime(3) does.
pub fn ymdhms(ns: u64) -> String {
    let t = tm(ns);
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

/// `%T`: `strftime("%a, %d %b %G %T %Z")` in UTC (`%G` is the ISO 8601 week-based year).
pub fn rfc822(ns: u64) -> String {
    let t = tm(ns);
    let wd = DAYS[t.days.rem_euclid(7) as usize];
    // ISO year: the year of this week's Thursday (weekday Monday=0).
    let monday_based = (t.days + 3).rem_euclid(7);
    let thursday = t.days - monday_based + 3;
    let iso_year = civil(thursday).0;
    format!(
        "{wd}, {:02} {} {iso_year} {:02}:{:02}:{:02} UTC",
        t.day,
        MONTHS[(t.mon - 1) as usize],
        t.hms.0,
        t.hms.1,
        t.hms.2
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        // 1973-12-03 17:20:00 UTC
        let ns = 123_787_200u64 * 1_000_000_000;
        assert_eq!(ymdhms(ns), "1973 Dec  3 17:20:00");
        assert_eq!(rfc822(ns), "Mon, 03 Dec 1973 17:20:00 UTC");
        assert_eq!(ymdhms(0), "1970 Jan  1 00:00:00");
        // 2027-01-01 is a Friday in ISO week 53 of 2026.
        let ns = 1_798_761_600u64 * 1_000_000_000;
        assert_eq!(rfc822(ns), "Fri, 01 Jan 2026 00:00:00 UTC");
    }
}
