//! The string subroutines as pure functions over byte strings (no NULs inside, at most `strsize - 1`
//! bytes), following DTrace's `dtrace_dif_subr` semantics exactly, edge cases included.

/// `basename(s)` (`want_dir` false) or `dirname(s)` (`want_dir` true), at most `max` bytes.
pub fn base_or_dir(src: &[u8], want_dir: bool, max: usize) -> Vec<u8> {
    let src: &[u8] = if src.is_empty() { b"." } else { src };
    let len = src.len() as isize;
    let at = |i: isize| src[i as usize];
    let (mut lastbase, mut firstbase, mut lastdir) = (-1isize, -1isize, -1isize);
    let mut i = len - 1;
    while i >= 0 && at(i) == b'/' {
        i -= 1;
    }
    if i >= 0 {
        lastbase = i;
    }
    while i >= 0 && at(i) != b'/' {
        i -= 1;
    }
    if i >= 0 {
        firstbase = i + 1;
    }
    while i >= 0 && at(i) == b'/' {
        i -= 1;
    }
    if i >= 0 {
        lastdir = i;
    }
    let mut src = src;
    if lastbase == -1 {
        // Only slashes: both are "/".
        firstbase = 0;
        lastbase = 0;
        lastdir = 0;
    }
    if firstbase == -1 {
        if want_dir {
            src = b".";
            lastdir = 0;
        } else {
            firstbase = 0;
        }
    }
    let (start, end) = if want_dir {
        if lastdir == -1 {
            lastdir = 0;
        }
        (0, lastdir)
    } else {
        (firstbase, lastbase)
    };
    let mut out = Vec::new();
    let mut k = start;
    while k <= end && out.len() < max {
        out.push(src.get(k as usize).copied().unwrap_or(0));
        k += 1;
    }
    out
}

/// `cleanpath(s)`: removes `//`, `/./` and `/x/../` components, as DTrace does (purely textually),
/// producing at most `size - 1` bytes.
pub fn cleanpath(src: &[u8], size: usize) -> Vec<u8> {
    let mut dest: Vec<u8> = Vec::new();
    let load = |i: usize| src.get(i).copied().unwrap_or(0);
    let mut i = 0usize;
    loop {
        let mut c = load(i);
        i += 1;
        // `next:` in DTrace's loop.
        loop {
            if dest.len() + 5 >= size {
                return finish(dest);
            }
            if c != b'/' {
                dest.push(c);
                break;
            }
            c = load(i);
            i += 1;
            if c == b'/' {
                continue;
            }
            if c != b'.' {
                dest.push(b'/');
                dest.push(c);
                break;
            }
            c = load(i);
            i += 1;
            if c == b'/' {
                continue;
            }
            if c != b'.' {
                dest.extend_from_slice(&[b'/', b'.', c]);
                break;
            }
            c = load(i);
            i += 1;
            if c != b'/' && c != 0 {
                dest.extend_from_slice(&[b'/', b'.', b'.', c]);
                break;
            }
            // "/../" or "/..\0": back up to the previous '/'.
            i -= 1;
            let mut j = dest.len();
            while j != 0 {
                j -= 1;
                if dest[j] == b'/' {
                    break;
                }
            }
            dest.truncate(j);
            if c == 0 {
                dest.push(b'/');
                dest.push(0);
            }
            break;
        }
        if c == 0 || i > src.len() + 4 {
            return finish(dest);
        }
    }
}

fn finish(mut dest: Vec<u8>) -> Vec<u8> {
    if let Some(n) = dest.iter().position(|&b| b == 0) {
        dest.truncate(n);
    }
    dest
}

/// `substr(s, index [, len])` with DTrace's (Perl-like) negative index and length rules.
pub fn substr(s: &[u8], index: i64, len_arg: Option<i64>, size: usize) -> Vec<u8> {
    let len = s.len() as i64;
    let size = size as i64;
    let mut index = index;
    let mut remaining = len_arg.unwrap_or(size);
    if index < 0 {
        index = index.saturating_add(len);
        if index < 0 && index.saturating_add(remaining) > 0 {
            remaining = remaining.saturating_add(index);
            index = 0;
        }
    }
    if index >= len || index < 0 {
        remaining = 0;
    } else if remaining < 0 {
        remaining = remaining.saturating_add(len - index);
    } else if index.saturating_add(remaining) > size {
        remaining = size - index;
    }
    let mut out = Vec::new();
    let mut k = 0i64;
    while k < remaining && out.len() < (size - 1) as usize {
        match s.get((index + k) as usize) {
            Some(&c) => out.push(c),
            None => break,
        }
        k += 1;
    }
    out
}

/// `lltostr(v [, base])`; `None` for a base outside 2..=36 (an illegal operation).
pub fn lltostr(v: i64, base: u64) -> Option<Vec<u8>> {
    if !(2..=36).contains(&base) {
        return None;
    }
    let mut val: u64 = if base == 10 && v < 0 {
        v.unsigned_abs()
    } else {
        v as u64
    };
    let mut rev = Vec::new();
    while val != 0 {
        let d = (val % base) as u8;
        rev.push(if d <= 9 { b'0' + d } else { b'a' + d - 10 });
        val /= base;
    }
    if v == 0 && base == 16 {
        rev.push(b'0');
    }
    if base == 16 {
        rev.push(b'x');
    }
    if v == 0 || base == 8 || base == 16 {
        rev.push(b'0');
    }
    if v < 0 && base == 10 {
        rev.push(b'-');
    }
    rev.reverse();
    Some(rev)
}

fn digit(c: u8) -> Option<u64> {
    match c {
        b'0'..=b'9' => Some((c - b'0') as u64),
        b'a'..=b'z' => Some((c - b'a') as u64 + 10),
        b'A'..=b'Z' => Some((c - b'A') as u64 + 10),
        _ => None,
    }
}

/// `strtoll(s [, base])`: leading blanks, an optional sign, `0x` for base 16, then digits; `None` for a
/// base outside 2..=36.
pub fn strtoll(s: &[u8], base: u64) -> Option<i64> {
    if !(2..=36).contains(&base) {
        return None;
    }
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut pos = 0;
    while at(pos) == b' ' || at(pos) == b'\t' {
        pos += 1;
    }
    let mut neg = false;
    if at(pos) == b'-' || at(pos) == b'+' {
        neg = at(pos) == b'-';
        pos += 1;
    }
    if base == 16
        && at(pos) == b'0'
        && (at(pos + 1) == b'x' || at(pos + 1) == b'X')
        && at(pos + 2).is_ascii_hexdigit()
    {
        pos += 2;
    }
    let mut val: i64 = 0;
    while pos < s.len() {
        match digit(s[pos]) {
            Some(d) if d < base => {
                val = val.wrapping_mul(base as i64).wrapping_add(d as i64);
            }
            _ => break,
        }
        pos += 1;
    }
    Some(if neg { val.wrapping_neg() } else { val })
}

/// Knuth-Morris-Pratt failure table of `needle`.
fn kmp_table(needle: &[u8]) -> Vec<usize> {
    let mut t = vec![0usize; needle.len()];
    let mut k = 0;
    for i in 1..needle.len() {
        while k > 0 && needle[i] != needle[k] {
            k = t[k - 1];
        }
        if needle[i] == needle[k] {
            k += 1;
        }
        t[i] = k;
    }
    t
}

/// First position `>= start` where `needle` (non-empty) occurs in `hay`, in linear time.
fn find_from(hay: &[u8], needle: &[u8], start: usize) -> Option<usize> {
    let t = kmp_table(needle);
    let mut k = 0;
    for (i, &c) in hay.iter().enumerate().skip(start) {
        while k > 0 && c != needle[k] {
            k = t[k - 1];
        }
        if c == needle[k] {
            k += 1;
            if k == needle.len() {
                return Some(i + 1 - k);
            }
        }
    }
    None
}

/// Last position `<= start` where `needle` (non-empty) occurs in `hay`, in linear time.
fn rfind_to(hay: &[u8], needle: &[u8], start: usize) -> Option<usize> {
    let end = start.checked_add(needle.len())?.min(hay.len());
    let rh: Vec<u8> = hay[..end].iter().rev().copied().collect();
    let rn: Vec<u8> = needle.iter().rev().copied().collect();
    find_from(&rh, &rn, 0).map(|p| end - p - needle.len())
}

/// The match position of `index`/`rindex` (`reverse`), with the optional start position, as DTrace
/// computes it; -1 when not found.
pub fn index_of(s: &[u8], sub: &[u8], pos: Option<i64>, reverse: bool) -> i64 {
    let len = s.len() as i64;
    let sublen = sub.len() as i64;
    if sublen == 0 && len == 0 {
        return 0;
    }
    if reverse {
        let mut start = len;
        if let Some(p) = pos {
            if p < 0 {
                return if sublen == 0 { 0 } else { -1 };
            }
            start = p.min(len);
        }
        if sublen == 0 {
            return start;
        }
        rfind_to(s, sub, start as usize).map_or(-1, |p| p as i64)
    } else {
        let mut start = 0;
        if let Some(p) = pos {
            let p = p.max(0);
            if p >= len {
                return if sublen == 0 { len } else { -1 };
            }
            start = p;
        }
        if sublen == 0 {
            return start;
        }
        find_from(s, sub, start as usize).map_or(-1, |p| p as i64)
    }
}

/// `strstr(s, sub)`: the offset of the first match in `s`, if any (DTrace returns a pointer there).
pub fn strstr(s: &[u8], sub: &[u8]) -> Option<usize> {
    if sub.is_empty() {
        return Some(0);
    }
    find_from(s, sub, 0)
}

/// `inet_ntoa`/`inet_ntop(AF_INET)`: dotted quad.
pub fn ntoa(b: &[u8; 4]) -> Vec<u8> {
    format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3]).into_bytes()
}

/// `link_ntop`: a link-layer address as lower-case hex bytes joined by colons.
pub fn link_ntop(b: &[u8]) -> Vec<u8> {
    let hex: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    hex.join(":").into_bytes()
}

/// `inet_ntoa6`/`inet_ntop(AF_INET6)`: DTrace's IPv6 text form (the longest run of zero groups as `::`).
/// IPv4-mapped and -compatible addresses (five zero groups then `ffff`, or six zero groups then
/// anything but `::` and `::1`) end in a dotted quad: `strict` keeps their IPv6 prefix
/// (`::ffff:10.0.0.1`, inet_ntop's form), otherwise the dotted quad is all (inet_ntoa6's default).
pub fn ntoa6(b: &[u8; 16], strict: bool) -> Vec<u8> {
    let groups: Vec<u16> = (0..8)
        .map(|i| u16::from_be_bytes([b[2 * i], b[2 * i + 1]]))
        .collect();
    let v4_tail = b[..10].iter().all(|&x| x == 0)
        && ((b[10] == 0xff && b[11] == 0xff)
            || (b[10] == 0 && b[11] == 0 && u32::from_be_bytes([b[12], b[13], b[14], b[15]]) > 1));
    if v4_tail && !strict {
        return ntoa(&[b[12], b[13], b[14], b[15]]);
    }
    let ngroups = if v4_tail { 6 } else { 8 };
    // Longest run of zero groups (the first of equal runs).
    let (mut best, mut best_len, mut i) = (usize::MAX, 0usize, 0usize);
    while i < ngroups {
        if groups[i] == 0 {
            let start = i;
            while i < ngroups && groups[i] == 0 {
                i += 1;
            }
            if i - start > best_len {
                best = start;
                best_len = i - start;
            }
        } else {
            i += 1;
        }
    }
    let mut out = String::new();
    let mut g = 0;
    while g < ngroups {
        if g == best {
            out.push_str("::");
            g += best_len;
            continue;
        }
        if !out.is_empty() && !out.ends_with(':') {
            out.push(':');
        }
        out.push_str(&format!("{:x}", groups[g]));
        g += 1;
    }
    if v4_tail {
        if !out.ends_with(':') {
            out.push(':');
        }
        out.push_str(&format!("{}.{}.{}.{}", b[12], b[13], b[14], b[15]));
    }
    out.into_bytes()
}

/// `uuidstr(u)`: a `struct uuid` (time fields in host byte order) as
/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub fn uuidstr(u: &[u8; 16]) -> Vec<u8> {
    let time_low = u32::from_le_bytes([u[0], u[1], u[2], u[3]]);
    let time_mid = u16::from_le_bytes([u[4], u[5]]);
    let time_hi = u16::from_le_bytes([u[6], u[7]]);
    format!(
        "{time_low:08x}-{time_mid:04x}-{time_hi:04x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
        u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: Vec<u8>) -> String {
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn basename_and_dirname() {
        let cases: &[(&str, &str, &str)] = &[
            ("/usr/bin/ls", "ls", "/usr/bin"),
            ("/usr/bin/", "bin", "/usr"),
            ("ls", "ls", "."),
            ("", ".", "."),
            ("/", "/", "/"),
            ("///", "/", "/"),
            ("/ls", "ls", "/"),
            ("a//b//", "b", "a"),
            ("//a", "a", "/"),
        ];
        for &(p, b, d) in cases {
            assert_eq!(
                s(base_or_dir(p.as_bytes(), false, 255)),
                b,
                "basename({p:?})"
            );
            assert_eq!(s(base_or_dir(p.as_bytes(), true, 255)), d, "dirname({p:?})");
        }
    }

    #[test]
    fn cleanpath_cases() {
        let cases: &[(&str, &str)] = &[
            ("/a/b/../c", "/a/c"),
            ("/a//b/./c", "/a/b/c"),
            ("/a/b/..", "/a/"),
            ("/..", "/"),
            ("/a/.b/..c", "/a/.b/..c"),
            ("", ""),
            ("a/b", "a/b"),
            ("/foo/bar/../../baz", "/baz"),
        ];
        for &(p, want) in cases {
            assert_eq!(s(cleanpath(p.as_bytes(), 256)), want, "cleanpath({p:?})");
        }
        // Output is bounded.
        let long = "/x".repeat(200);
        assert!(cleanpath(long.as_bytes(), 32).len() < 32);
    }

    #[test]
    fn substr_cases() {
        let h = b"hello";
        let t = |i, l| s(substr(h, i, l, 256));
        assert_eq!(t(1, None), "ello");
        assert_eq!(t(1, Some(2)), "el");
        assert_eq!(t(-2, None), "lo");
        assert_eq!(t(-10, Some(7)), "he");
        assert_eq!(t(-10, Some(2)), "");
        assert_eq!(t(1, Some(-1)), "ell");
        assert_eq!(t(5, None), "");
        assert_eq!(t(0, Some(0)), "");
        assert_eq!(t(i64::MIN, Some(i64::MAX)), "hell");
        assert_eq!(s(substr(b"", 0, None, 256)), "");
        assert_eq!(s(substr(h, 0, Some(100), 4)), "hel");
    }

    #[test]
    fn lltostr_cases() {
        let t = |v, b| s(lltostr(v, b).unwrap());
        assert_eq!(t(0, 10), "0");
        assert_eq!(t(-123, 10), "-123");
        assert_eq!(t(i64::MIN, 10), "-9223372036854775808");
        assert_eq!(t(255, 16), "0xff");
        assert_eq!(t(0, 16), "0x0");
        assert_eq!(t(8, 8), "010");
        assert_eq!(t(0, 8), "0");
        assert_eq!(t(5, 2), "101");
        assert_eq!(t(-1, 16), "0xffffffffffffffff");
        assert_eq!(t(35, 36), "z");
        assert!(lltostr(1, 1).is_none());
        assert!(lltostr(1, 37).is_none());
    }

    #[test]
    fn strtoll_cases() {
        assert_eq!(strtoll(b"  42abc", 10), Some(42));
        assert_eq!(strtoll(b"-17", 10), Some(-17));
        assert_eq!(strtoll(b"+0x1F", 16), Some(31));
        assert_eq!(strtoll(b"0xg", 16), Some(0));
        assert_eq!(strtoll(b"777", 8), Some(511));
        assert_eq!(strtoll(b"", 10), Some(0));
        assert_eq!(strtoll(b"zz", 36), Some(1295));
        assert_eq!(strtoll(b"1", 0), None);
    }

    #[test]
    fn index_and_rindex() {
        assert_eq!(index_of(b"hello", b"l", None, false), 2);
        assert_eq!(index_of(b"hello", b"l", None, true), 3);
        assert_eq!(index_of(b"hello", b"z", None, false), -1);
        assert_eq!(index_of(b"hello", b"l", Some(3), false), 3);
        assert_eq!(index_of(b"hello", b"l", Some(-5), false), 2);
        assert_eq!(index_of(b"hello", b"l", Some(2), true), 2);
        assert_eq!(index_of(b"hello", b"l", Some(1), true), -1);
        assert_eq!(index_of(b"hello", b"l", Some(-1), true), -1);
        assert_eq!(index_of(b"hello", b"", Some(-1), true), 0);
        assert_eq!(index_of(b"hello", b"", Some(9), false), 5);
        assert_eq!(index_of(b"hello", b"", None, true), 5);
        assert_eq!(index_of(b"", b"", Some(3), false), 0);
        assert_eq!(index_of(b"hello", b"lo", Some(100), true), 3);
        assert_eq!(strstr(b"hello", b"ll"), Some(2));
        assert_eq!(strstr(b"hello", b"x"), None);
        assert_eq!(strstr(b"aaab", b"aab"), Some(1));
        assert_eq!(index_of(b"abababa", b"aba", None, true), 4);
        assert_eq!(index_of(b"abababa", b"aba", Some(3), true), 2);
        assert_eq!(index_of(b"abababa", b"aba", Some(1), false), 2);
        // Linear time on adversarial input.
        let hay = vec![b'a'; 1 << 20];
        let mut needle = vec![b'a'; 1 << 19];
        needle.push(b'b');
        assert_eq!(index_of(&hay, &needle, None, false), -1);
        assert_eq!(index_of(&hay, &needle, None, true), -1);
    }

    #[test]
    fn inet_formats() {
        assert_eq!(s(ntoa(&[192, 168, 1, 2])), "192.168.1.2");
        let mut a = [0u8; 16];
        assert_eq!(s(ntoa6(&a, false)), "::");
        a[15] = 1;
        assert_eq!(s(ntoa6(&a, false)), "::1");
        assert_eq!(s(ntoa6(&a, true)), "::1");
        let mut m = [0u8; 16];
        m[10] = 0xff;
        m[11] = 0xff;
        m[12..].copy_from_slice(&[10, 0, 0, 1]);
        assert_eq!(s(ntoa6(&m, true)), "::ffff:10.0.0.1");
        assert_eq!(s(ntoa6(&m, false)), "10.0.0.1");
        let mut c = [0u8; 16];
        c[12..].copy_from_slice(&[10, 0, 0, 1]);
        assert_eq!(s(ntoa6(&c, true)), "::10.0.0.1");
        assert_eq!(s(ntoa6(&c, false)), "10.0.0.1");
        // seven zero groups then anything but 0 or 1 is IPv4-compatible too
        let mut d = [0u8; 16];
        d[15] = 2;
        assert_eq!(s(ntoa6(&d, false)), "0.0.0.2");
        // ffff must follow exactly five zero groups
        let mut f = [0u8; 16];
        f[10] = 0xff;
        f[11] = 0xfe;
        f[12] = 0x7f;
        f[15] = 1;
        assert_eq!(s(ntoa6(&f, false)), "::fffe:7f00:1");
        let x: [u8; 16] = [
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55,
        ];
        assert_eq!(s(ntoa6(&x, false)), "fe80::211:22ff:fe33:4455");
        let y: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
        assert_eq!(s(ntoa6(&y, true)), "2001:db8:0:1::1");
    }

    #[test]
    fn link_addresses() {
        assert_eq!(s(link_ntop(&[0, 1, 2, 0xab, 4, 0xff])), "00:01:02:ab:04:ff");
        let ib: Vec<u8> = (0..20).collect();
        let text = s(link_ntop(&ib));
        assert_eq!(text.len(), 20 * 3 - 1);
        assert!(
            text.starts_with("00:01:02:03") && text.ends_with(":13"),
            "{text}"
        );
    }

    #[test]
    fn uuid_format() {
        let u: [u8; 16] = [
            0x78, 0x56, 0x34, 0x12, 0x34, 0x12, 0x78, 0x56, 0x9a, 0xbc, 1, 2, 3, 4, 5, 6,
        ];
        assert_eq!(s(uuidstr(&u)), "12345678-1234-5678-9abc-010203040506");
    }
}
