//! Probe-description pattern matching as DTrace does it: `*`, `?`, `[set]` (with ranges and `!`
//! negation), and `\` escapes; an empty pattern matches everything.

/// Whether `s` contains a pattern metacharacter.
pub fn has_meta(s: &str) -> bool {
    s.contains(['*', '?', '[', '\\'])
}

/// Whether `pattern` matches all of `text`.
pub fn matches(pattern: &str, text: &str) -> bool {
    if pattern.is_empty() {
        return true;
    }
    if !has_meta(pattern) {
        return pattern == text;
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative matcher with single-star backtracking: linear memory, no recursion.
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, ti));
                    pi += 1;
                    continue;
                }
                '?' => {
                    pi += 1;
                    ti += 1;
                    continue;
                }
                '[' => {
                    if let Some((ok, next)) = class(&p, pi, t[ti]) {
                        if ok {
                            pi = next;
                            ti += 1;
                            continue;
                        }
                    } else if t[ti] == '[' {
                        pi += 1;
                        ti += 1;
                        continue;
                    }
                }
                '\\' if pi + 1 < p.len() => {
                    if p[pi + 1] == t[ti] {
                        pi += 2;
                        ti += 1;
                        continue;
                    }
                }
                c => {
                    if c == t[ti] {
                        pi += 1;
                        ti += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, st)) => {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// Matches `c` against the class starting at `p[at] == '['`; returns (matched, index after `]`), or
/// `None` when the class is not closed.
fn class(p: &[char], at: usize, c: char) -> Option<(bool, usize)> {
    let mut i = at + 1;
    let negate = matches!(p.get(i), Some('!') | Some('^'));
    if negate {
        i += 1;
    }
    let mut found = false;
    let mut first = true;
    while i < p.len() {
        if p[i] == ']' && !first {
            return Some((found != negate, i + 1));
        }
        first = false;
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            if p[i] <= c && c <= p[i + 2] {
                found = true;
            }
            i += 3;
        } else {
            if p[i] == c {
                found = true;
            }
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn globs_match_like_dtrace() {
        assert!(matches("", "anything"));
        assert!(matches("read", "read"));
        assert!(!matches("read", "readv"));
        assert!(matches("read*", "readv"));
        assert!(matches("*read*", "pread64"));
        assert!(matches("r?ad", "read"));
        assert!(matches("[rw]rite", "write"));
        assert!(!matches("[!w]rite", "write"));
        assert!(matches("profile-[0-9]*", "profile-997"));
        assert!(matches("a*b*c", "aXXbYYc"));
        assert!(!matches("a*b*c", "aXXbYY"));
        assert!(matches("\\*", "*"));
        assert!(!matches("[abc", "b"));
    }
}
