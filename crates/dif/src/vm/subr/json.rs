//! `json(document, selector)`: the value selected by `a.b[2].c` in a JSON document, as text (strings
//! without their quotes, escapes kept as written; numbers, `true`, `false`, `null` as written). An
//! object or array, a missing member, or malformed JSON yields `None` (D's NULL string).

/// Selector steps.
enum Step<'a> {
    Key(&'a [u8]),
    Index(usize),
}

fn parse_selector(sel: &[u8]) -> Option<Vec<Step<'_>>> {
    let mut steps = Vec::new();
    let mut i = 0;
    while i < sel.len() {
        if sel[i] == b'[' {
            let end = i + sel[i..].iter().position(|&c| c == b']')?;
            let n = std::str::from_utf8(&sel[i + 1..end]).ok()?.parse().ok()?;
            steps.push(Step::Index(n));
            i = end + 1;
            if i < sel.len() && sel[i] == b'.' {
                i += 1;
            }
            continue;
        }
        let start = i;
        while i < sel.len() && sel[i] != b'.' && sel[i] != b'[' {
            i += 1;
        }
        steps.push(Step::Key(&sel[start..i]));
        if i < sel.len() && sel[i] == b'.' {
            i += 1;
        }
    }
    Some(steps)
}

struct P<'a> {
    s: &'a [u8],
    i: usize,
}

const MAX_DEPTH: usize = 128;

impl P<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.peek()? == c).then(|| self.i += 1)
    }
    /// Skips a string; returns its contents (escapes kept).
    fn string(&mut self) -> Option<(usize, usize)> {
        self.ws();
        if self.peek()? != b'"' {
            return None;
        }
        self.i += 1;
        let start = self.i;
        loop {
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some((start, self.i - 1));
                }
                b'\\' => self.i += 2,
                _ => self.i += 1,
            }
        }
    }
    /// Skips any value; returns its span when it is a scalar.
    fn value(&mut self, depth: usize) -> Option<Option<(usize, usize)>> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match self.peek()? {
            b'"' => self.string().map(Some),
            b'{' => {
                self.i += 1;
                if self.eat(b'}').is_some() {
                    return Some(None);
                }
                loop {
                    self.string()?;
                    self.eat(b':')?;
                    self.value(depth + 1)?;
                    if self.eat(b',').is_none() {
                        self.eat(b'}')?;
                        return Some(None);
                    }
                }
            }
            b'[' => {
                self.i += 1;
                if self.eat(b']').is_some() {
                    return Some(None);
                }
                loop {
                    self.value(depth + 1)?;
                    if self.eat(b',').is_none() {
                        self.eat(b']')?;
                        return Some(None);
                    }
                }
            }
            _ => {
                let start = self.i;
                while let Some(c) = self.peek() {
                    if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.') {
                        self.i += 1;
                    } else {
                        break;
                    }
                }
                if self.i == start {
                    return None;
                }
                let lit = &self.s[start..self.i];
                let ok = lit == b"true"
                    || lit == b"false"
                    || lit == b"null"
                    || lit[0] == b'-'
                    || lit[0].is_ascii_digit();
                ok.then_some(Some((start, self.i)))
            }
        }
    }

    /// Finds the value the steps select, starting at the current position.
    fn select(&mut self, steps: &[Step<'_>]) -> Option<(usize, usize)> {
        let Some((first, rest)) = steps.split_first() else {
            return self.value(0)?;
        };
        self.ws();
        match first {
            Step::Key(k) => {
                self.eat(b'{')?;
                if self.eat(b'}').is_some() {
                    return None;
                }
                loop {
                    let (a, b) = self.string()?;
                    self.eat(b':')?;
                    if &self.s[a..b] == *k {
                        return self.select(rest);
                    }
                    self.value(0)?;
                    self.eat(b',')?;
                }
            }
            Step::Index(n) => {
                self.eat(b'[')?;
                if self.eat(b']').is_some() {
                    return None;
                }
                let mut k = 0;
                loop {
                    if k == *n {
                        return self.select(rest);
                    }
                    self.value(0)?;
                    self.eat(b',')?;
                    k += 1;
                }
            }
        }
    }
}

/// The selected scalar of `doc`, as text.
pub fn json(doc: &[u8], selector: &[u8]) -> Option<Vec<u8>> {
    let steps = parse_selector(selector)?;
    let mut p = P { s: doc, i: 0 };
    let (a, b) = p.select(&steps)?;
    Some(doc[a..b].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j(d: &str, s: &str) -> Option<String> {
        json(d.as_bytes(), s.as_bytes()).map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn selects_scalars() {
        let d = r#" {"a": 1, "b": {"c": "x\"y", "d": [true, null, -2.5e3, {"e": "f"}]}} "#;
        assert_eq!(j(d, "a").as_deref(), Some("1"));
        assert_eq!(j(d, "b.c").as_deref(), Some("x\\\"y"));
        assert_eq!(j(d, "b.d[0]").as_deref(), Some("true"));
        assert_eq!(j(d, "b.d[1]").as_deref(), Some("null"));
        assert_eq!(j(d, "b.d[2]").as_deref(), Some("-2.5e3"));
        assert_eq!(j(d, "b.d[3].e").as_deref(), Some("f"));
        assert_eq!(j(d, "b.d[4]"), None);
        assert_eq!(j(d, "b"), None);
        assert_eq!(j(d, "zz"), None);
        assert_eq!(j("[1,2]", "[1]").as_deref(), Some("2"));
        assert_eq!(j("{\"a\":", "a"), None);
        assert_eq!(j("", "a"), None);
        assert_eq!(j(&"[".repeat(1000), "a"), None);
        assert_eq!(j("{\"a\":{}}", "a.b"), None);
    }
}
