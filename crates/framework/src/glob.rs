//! Probe description matching: DTrace's shell-style globs (`*`, `?`, `[...]` with ranges and `!`
//! negation, `\` escapes) per field, where an empty field matches anything and a field without glob
//! characters must match exactly.

use dtrace_dif::program::ProbeDesc;

/// Whether `s` contains any glob metacharacter.
pub fn is_glob(s: &str) -> bool {
    s.bytes().any(|c| matches!(c, b'*' | b'?' | b'[' | b'\\'))
}

/// Whether a single field pattern matches a value: empty matches everything, otherwise glob match.
pub fn field_matches(pattern: &str, value: &str) -> bool {
    if pattern.is_empty() {
        return true;
    }
    if !is_glob(pattern) {
        return pattern == value;
    }
    gmatch(pattern.as_bytes(), value.as_bytes())
}

/// Whether a probe description pattern matches a probe's four names.
pub fn desc_matches(
    d: &ProbeDesc,
    provider: &str,
    module: &str,
    function: &str,
    name: &str,
) -> bool {
    field_matches(&d.provider, provider)
        && field_matches(&d.module, module)
        && field_matches(&d.function, function)
        && field_matches(&d.name, name)
}

/// Glob match of a whole string (no allocation, iterative with single-star backtracking, so it runs in
/// O(len(p) * len(s)) at worst).
pub fn gmatch(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    loop {
        if pi < p.len() {
            match p[pi] {
                b'*' => {
                    star = Some((pi, si));
                    pi += 1;
                    continue;
                }
                b'?' if si < s.len() => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                b'[' if si < s.len() => {
                    if let Some((matched, next)) = class_match(p, pi, s[si]) {
                        if matched {
                            pi = next;
                            si += 1;
                            continue;
                        }
                    } else if s[si] == b'[' {
                        // An unterminated class is a literal '['.
                        pi += 1;
                        si += 1;
                        continue;
                    }
                }
                b'\\' if si < s.len() => {
                    let lit = p.get(pi + 1).copied().unwrap_or(b'\\');
                    if lit == s[si] {
                        pi += if pi + 1 < p.len() { 2 } else { 1 };
                        si += 1;
                        continue;
                    }
                }
                c if si < s.len() && !matches!(c, b'?' | b'[' | b'\\') && c == s[si] => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                _ => {}
            }
        } else if si == s.len() {
            return true;
        }
        // Mismatch: let the last star absorb one more character, if there is one.
        match star {
            Some((sp, ss)) if ss < s.len() => {
                star = Some((sp, ss + 1));
                pi = sp + 1;
                si = ss + 1;
            }
            _ => return false,
        }
    }
}

/// Matches character `c` against the class starting at `p[start] == '['`. Returns whether it matched and
/// the index after the closing `]`, or `None` when the class is not terminated.
fn class_match(p: &[u8], start: usize, c: u8) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negate = matches!(p.get(i), Some(b'!') | Some(b'^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let mut lo = *p.get(i)?;
        if lo == b']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        if lo == b'\\' {
            i += 1;
            lo = *p.get(i)?;
        }
        i += 1;
        if p.get(i) == Some(&b'-') && p.get(i + 1).is_some_and(|&h| h != b']') {
            let mut hi = p[i + 1];
            i += 2;
            if hi == b'\\' {
                hi = *p.get(i)?;
                i += 1;
            }
            if lo <= c && c <= hi {
                matched = true;
            }
        } else if lo == c {
            matched = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(gmatch(b"*", b""));
        assert!(gmatch(b"*", b"anything"));
        assert!(gmatch(b"tick-*", b"tick-1sec"));
        assert!(!gmatch(b"tick-*", b"profile-97"));
        assert!(gmatch(b"?EGIN", b"BEGIN"));
        assert!(!gmatch(b"?EGIN", b"EGIN"));
        assert!(gmatch(b"[BE]*", b"END"));
        assert!(gmatch(b"[A-C]EGIN", b"BEGIN"));
        assert!(!gmatch(b"[!B]EGIN", b"BEGIN"));
        assert!(gmatch(b"[!A]EGIN", b"BEGIN"));
        assert!(gmatch(b"a\\*b", b"a*b"));
        assert!(!gmatch(b"a\\*b", b"axb"));
        assert!(gmatch(b"*read*", b"pread64"));
        assert!(gmatch(b"*a*b*c", b"xaybzzc"));
        assert!(!gmatch(b"*a*b*c", b"xaybzzcd"));
        assert!(gmatch(b"[]]", b"]"));
        assert!(gmatch(b"[a-]", b"-"));
        assert!(gmatch(b"[", b"["));
        assert!(!gmatch(b"", b"x"));
    }

    #[test]
    fn fields() {
        assert!(field_matches("", "BEGIN"));
        assert!(field_matches("BEGIN", "BEGIN"));
        assert!(!field_matches("BEGI", "BEGIN"));
        let d = ProbeDesc {
            provider: "dtrace".into(),
            module: "".into(),
            function: "".into(),
            name: "B*".into(),
        };
        assert!(desc_matches(&d, "dtrace", "", "", "BEGIN"));
        assert!(!desc_matches(&d, "dtrace", "", "", "END"));
    }

    #[test]
    fn pathological_pattern_terminates() {
        let p = b"*a*a*a*a*a*a*a*a*b";
        let s = [b'a'; 200];
        assert!(!gmatch(p, &s));
    }
}
